//! The script worker of the `codemode` tool: started by the tool when
//! `CodeModeConfig::worker` names it, never by hand (see `kodik_codemode::worker`).

fn main() -> std::process::ExitCode {
    kodik_codemode::worker::serve_stdio()
}
