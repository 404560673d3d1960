//! The codemode script worker the codemode bench runs scripts in.

fn main() -> std::process::ExitCode {
    kodik_codemode::worker::serve_stdio()
}
