//! `cargo xtask <task>`: the project's automation, in plain Rust.
//!
//! - `ci`: install what the tests need when missing (incl. the official Python MCP SDK in a
//!   venv under the target dir, and pyright, typescript-language-server + typescript@5 from npm and
//!   clangd, gopls and golang-go from Debian, and rust-analyzer built from crates.io, for
//!   kodik-lsp), then fmt check, schema staleness check,
//!   clippy with `-D warnings` on all targets, the same on kodik-tools with no features and the
//!   defaults plus each optional one, the `minimal_harness` example
//!   (feature `edit` only) built and run on its own, rustdoc with `-D warnings`, and the whole
//!   test suite. The README's test command; `.ci/run` calls it.
//! - `test-tools`: only install what the tests need (what `ci` does first).
//! - `features`: `ci`'s kodik-tools feature checks, and each feature alone as well.
//! - `schema`: write every tool's JSON Schema under `schemas/`; `schema --check` fails when the
//!   committed files are stale.
//! - `fuzz [target|all] [seconds]`: run kodik-edit's cargo-fuzz targets (`fuzz/`: `patch_parser`,
//!   `matcher`; default all, 60 s each) on the stable toolchain, installing cargo-fuzz when
//!   missing. Not part of `ci`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("schema") => schema(args.iter().any(|a| a == "--check")),
        Some("test-tools") => ensure_test_tools(),
        Some("features") => check_tools_features(true),
        Some("fuzz") => fuzz(&args[1..]),
        _ => Err("usage: cargo xtask ci | features | schema [--check] | test-tools | fuzz [patch_parser|matcher|all] [seconds]"
            .to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    // xtask lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

fn run(step: &str, cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: == {step}: {cmd:?}");
    let status = cmd.current_dir(root()).status().map_err(|e| format!("{step}: cannot start {cmd:?}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{step} failed ({status})")) }
}

/// The last non-empty line a failed command wrote to stderr: the reason, for our one-line errors.
fn last_line(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
}

/// PATH with `dir` first.
fn path_with(dir: &Path) -> Result<std::ffi::OsString, String> {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
        .map_err(|e| format!("cannot put {} on PATH: {e}", dir.display()))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs (or names) what the test suite needs that a clean machine may lack.
fn ensure_test_tools() -> Result<(), String> {
    // The shell tool runs commands with bash and falls back to sh; its tests use bash features.
    for program in ["bash", "sh"] {
        if !have(program) {
            return Err(format!("missing `{program}`: install it (Debian: apt-get install -y {program})"));
        }
    }
    ensure_python_mcp()?;
    ensure_language_servers()?;
    ensure_rust_analyzer()?;
    ensure_chromium()?;
    Ok(())
}

/// Debian's `chromium` for kodik-browser's tests (its tests fail without it under CI=true);
/// installed with apt-get when running as root.
fn ensure_chromium() -> Result<(), String> {
    let found = || {
        std::env::var_os("CHROME").is_some_and(|p| Path::new(&p).is_file())
            || Path::new("/usr/lib/chromium/chromium").is_file()
            || have("chromium")
    };
    if found() {
        return Ok(());
    }
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root || !have("apt-get") {
        return Err(
            "missing `chromium` for the browser tests: install it (Debian: apt-get install -y chromium) or set CHROME"
                .into(),
        );
    }
    eprintln!("xtask: == installing chromium with apt-get");
    let ok = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "chromium"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok || !found() {
        return Err("missing `chromium`: `apt-get install -y chromium` failed; run `apt-get update` first or install it by hand".into());
    }
    Ok(())
}

/// Where `cargo xtask` installs language servers: `$CARGO_TARGET_DIR/lsp-servers` (a
/// per-user cache under `.ci/run`, so they are fetched and built once).
fn lsp_servers() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    };
    target.join("lsp-servers")
}

/// The folder holding the npm language servers (`node_modules/.bin` of [`lsp_servers`]);
/// kodik-lsp's tests read it from `KODIK_LSP_BIN`.
fn lsp_bin() -> PathBuf {
    lsp_servers().join("node_modules").join(".bin")
}

/// The folder holding the rust-analyzer `cargo xtask` builds; the test step puts it first on
/// PATH, ahead of rustup's proxy of the same name.
fn rust_analyzer_bin() -> PathBuf {
    lsp_servers().join("rust-analyzer").join("bin")
}

/// rustup can only download the rust-analyzer component from the internet, and Debian has no
/// package; crates.io publishes rust-analyzer itself as `ra_ap_rust-analyzer` (with its
/// `rust-analyzer` binary). 0.0.331 is the newest release that builds on the stable toolchain
/// here (later ones declare 1.95 but use `assert_matches`, unstable there). Built once with
/// light optimisation: about 10 CPU-minutes.
const RUST_ANALYZER: &str = "ra_ap_rust-analyzer@0.0.331";

fn ensure_rust_analyzer() -> Result<(), String> {
    let program = rust_analyzer_bin().join("rust-analyzer");
    let runs = || Command::new(&program).arg("--version").output().is_ok_and(|o| o.status.success());
    if runs() {
        return Ok(());
    }
    let home = lsp_servers().join("rust-analyzer");
    let build = lsp_servers().join("rust-analyzer-build");
    eprintln!("xtask: == building rust-analyzer ({RUST_ANALYZER}) into {} with cargo install", home.display());
    let out = cargo()
        .args(["install", RUST_ANALYZER, "--locked", "--bin", "rust-analyzer", "--root"])
        .arg(&home)
        .env("CARGO_TARGET_DIR", &build)
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "false")
        .output()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    // Only the binary is kept; its build folder is most of a gigabyte.
    let _ = std::fs::remove_dir_all(&build);
    if !out.status.success() || !runs() {
        return Err(format!(
            "missing rust-analyzer: `cargo install {RUST_ANALYZER}` failed ({}); check access to crates.io",
            last_line(&out)
        ));
    }
    Ok(())
}

/// pyright, typescript-language-server and typescript@5 from npm (kodik-lsp's tests); clangd,
/// gopls and the Go toolchain from Debian when running as root.
fn ensure_language_servers() -> Result<(), String> {
    let bin = lsp_bin();
    let wanted = ["pyright-langserver", "typescript-language-server", "tsserver"];
    if !wanted.iter().all(|b| bin.join(b).is_file()) {
        if !have("npm") {
            return Err(
                "missing `npm` for the language-server tests: install Node 20 (Debian: apt-get install -y nodejs npm)"
                    .into(),
            );
        }
        let dir = bin.parent().and_then(Path::parent).unwrap_or(Path::new("target/lsp-servers")).to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let packages = ["pyright@1.1.414", "typescript-language-server@5", "typescript@5"];
        eprintln!("xtask: == installing {} into {} with npm", packages.join(" "), dir.display());
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(packages)
            .output()
            .map_err(|e| format!("cannot run npm: {e}"))?;
        if !out.status.success() || !wanted.iter().all(|b| bin.join(b).is_file()) {
            let last = last_line(&out);
            return Err(format!(
                "missing language servers: `npm install {}` failed ({last}); check access to npm",
                packages.join(" ")
            ));
        }
    }
    // clangd, and gopls with the Go toolchain it loads packages with, from Debian.
    let debian = [("clangd", "clangd"), ("gopls", "gopls"), ("go", "golang-go")];
    let missing: Vec<&str> = debian.iter().filter(|(bin, _)| !have(bin)).map(|(_, pkg)| *pkg).collect();
    if !missing.is_empty() {
        let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if !is_root {
            return Err(format!(
                "missing {} for the language-server tests: install them (Debian: apt-get install -y {})",
                missing.join(", "),
                missing.join(" ")
            ));
        }
        eprintln!("xtask: == installing {} with apt-get", missing.join(" "));
        let ok = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing)
            .status()
            .is_ok_and(|s| s.success());
        if !ok || debian.iter().any(|(bin, _)| !have(bin)) {
            return Err(format!(
                "missing language servers: `apt-get install -y {}` failed; run `apt-get update` first or install them by hand",
                missing.join(" ")
            ));
        }
    }
    Ok(())
}

/// The Python of the venv holding the official MCP SDK (`kodik serve`'s end-to-end test):
/// `$CARGO_TARGET_DIR/mcp-venv` or `<workspace>/target/mcp-venv`. The test reads it from
/// `KODIK_MCP_PYTHON`.
fn mcp_python() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    };
    target.join("mcp-venv").join("bin").join("python")
}

/// Creates the venv with the official Python MCP SDK (`pip install mcp`) when it is missing.
fn ensure_python_mcp() -> Result<(), String> {
    let python = mcp_python();
    let imports = |py: &Path| Command::new(py).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
    if imports(&python) {
        return Ok(());
    }
    if !have("python3") {
        return Err("missing `python3` for the MCP end-to-end test: install it (Debian: apt-get install -y python3 python3-venv)".into());
    }
    let venv = python.parent().and_then(Path::parent).unwrap_or(Path::new("target/mcp-venv")).to_path_buf();
    eprintln!("xtask: == creating {} with the official Python MCP SDK (pip install mcp)", venv.display());
    let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(format!(
                "missing Python venv support: `python3 -m venv {}` failed ({}); install it (Debian: apt-get install -y python3-venv)",
                venv.display(),
                last_line(&o)
            ));
        }
        Err(e) => return Err(format!("cannot run `python3 -m venv`: {e}")),
    }
    let installed = Command::new(&python).args(["-m", "pip", "install", "--quiet", "mcp"]).output();
    match installed {
        Ok(o) if o.status.success() && imports(&python) => Ok(()),
        Ok(o) => Err(format!(
            "missing the official Python MCP SDK: `{} -m pip install mcp` failed ({}); check access to PyPI",
            python.display(),
            last_line(&o)
        )),
        Err(e) => Err(format!("cannot run the venv's pip ({}): {e}", python.display())),
    }
}

fn ci() -> Result<(), String> {
    ensure_test_tools()?;
    run("fmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    schema(true)?;
    run("clippy", cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    check_tools_features(false)?;
    // Broken intra-doc links and bad rustdoc are errors, like clippy's warnings.
    run("doc", cargo().args(["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings"))?;
    run(
        "test",
        cargo()
            .args(["test", "--workspace", "--no-fail-fast"])
            .env("KODIK_MCP_PYTHON", mcp_python())
            .env("KODIK_LSP_BIN", lsp_bin())
            .env("PATH", path_with(&rust_analyzer_bin())?),
    )?;
    eprintln!("xtask: ci passed");
    Ok(())
}

/// kodik-tools' features as its Cargo.toml declares them: (name, on by default), `default`
/// itself left out. Read from the file so a feature added there is checked without a change here.
fn tools_features() -> Result<Vec<(String, bool)>, String> {
    let manifest = root().join("crates/kodik-tools/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| format!("reading {}: {e}", manifest.display()))?;
    let section = text
        .split("\n[")
        .find_map(|s| s.strip_prefix("features]"))
        .ok_or_else(|| format!("{} has no [features] table", manifest.display()))?;
    // `name = [...]` lines; the quoted words of `default = [...]` are the default features.
    let entries: Vec<(&str, &str)> = section
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(name, value)| (name.trim(), value.trim()))
        .filter(|(name, value)| !name.starts_with('#') && value.starts_with('['))
        .collect();
    let defaults: Vec<&str> = entries
        .iter()
        .find(|(name, _)| *name == "default")
        .map(|(_, value)| value.split('"').skip(1).step_by(2).collect())
        .unwrap_or_default();
    let features: Vec<(String, bool)> = entries
        .iter()
        .filter(|(name, _)| *name != "default")
        .map(|(name, _)| (name.to_string(), defaults.contains(name)))
        .collect();
    if features.is_empty() || defaults.is_empty() {
        return Err(format!("found no features or no default set in {}", manifest.display()));
    }
    Ok(features)
}

/// What a user who picks kodik-tools' features gets: the rest of `ci` builds only the union the
/// workspace turns on, so here kodik-tools is linted with no features, with the defaults plus each
/// optional one and (with `each_alone`) with each feature alone, warnings as errors, and its
/// rustdoc too; then the `minimal_harness` example (feature `edit` only), built on its own, must
/// offer exactly the edit and search tools.
///
/// `ci` leaves out each feature alone: every such set resolves its dependencies' features
/// differently (tokio's above all), so each checks much of the dependency tree again: all 15
/// sets took 20 minutes on a loaded machine with nothing cached (2026-12-02), against 45 s warm.
/// `cargo xtask features` runs them.
fn check_tools_features(each_alone: bool) -> Result<(), String> {
    let features = tools_features()?;
    let mut sets: Vec<Vec<String>> = vec![vec!["--no-default-features".into()]];
    for (name, _) in features.iter().filter(|_| each_alone) {
        sets.push(vec!["--no-default-features".into(), "--features".into(), name.clone()]);
    }
    for (name, _) in features.iter().filter(|(_, default)| !default) {
        sets.push(vec!["--features".into(), name.clone()]);
    }
    for set in &sets {
        let set_name = set.join(" ");
        run(
            &format!("clippy kodik-tools {set_name}"),
            cargo().args(["clippy", "--quiet", "-p", "kodik-tools"]).args(set).args(["--", "-D", "warnings"]),
        )?;
        // A doc link to an item of a feature that is off is a broken link.
        run(
            &format!("doc kodik-tools {set_name}"),
            cargo()
                .args(["doc", "--quiet", "--no-deps", "-p", "kodik-tools"])
                .args(set)
                .env("RUSTDOCFLAGS", "-D warnings"),
        )?;
    }
    minimal_toolbox()
}

/// Runs `minimal_harness` as `cargo run -p minimal_harness` builds it (its features alone: a
/// workspace-wide build would unify them with every other member's) and checks that its toolbox
/// offers exactly the edit tools and the search tools `edit` brings (E2: edit_file changes only
/// files read_file read), and that its read, edit and grep succeed.
fn minimal_toolbox() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("kodik-xtask-minimal-{}", std::process::id()));
    // Built first with its output shown: a compile error then reads in full, not as the last
    // line of a captured run.
    run("build minimal_harness", cargo().args(["build", "-p", "minimal_harness"]).current_dir(root()))?;
    eprintln!("xtask: == minimal toolbox: cargo run -p minimal_harness -- {}", dir.display());
    let out = cargo().args(["run", "--quiet", "-p", "minimal_harness", "--"]).arg(&dir).current_dir(root()).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("minimal toolbox: cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("minimal toolbox: minimal_harness failed ({}): {}\n{stdout}", out.status, last_line(&out)));
    }
    let offered: std::collections::BTreeSet<&str> =
        stdout.lines().next().and_then(|l| l.strip_prefix("tools: ")).unwrap_or("").split(", ").collect();
    let edit_and_search = [kodik_schema::edit::specs(), kodik_schema::search::specs()];
    let wanted: std::collections::BTreeSet<String> = edit_and_search.into_iter().flatten().map(|s| s.name).collect();
    if !offered.iter().copied().eq(wanted.iter().map(String::as_str)) {
        return Err(format!(
            "minimal toolbox: kodik-tools with feature edit offers [{}], not exactly [{}]",
            offered.into_iter().collect::<Vec<_>>().join(", "),
            wanted.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    eprintln!("xtask: == minimal toolbox: offers exactly {} tools", wanted.len());
    Ok(())
}

fn schema(check: bool) -> Result<(), String> {
    let dir = root().join("schemas");
    let mut wanted = std::collections::BTreeMap::new();
    for spec in kodik_schema::all() {
        let doc = serde_json::json!({
            "name": spec.name,
            "description": spec.description,
            "effect": spec.effect,
            "streaming_start": spec.streaming_start,
            "input_schema": spec.input_schema,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
        wanted.insert(format!("{}.json", spec.name), text);
    }
    let existing: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    if check {
        let mut stale = Vec::new();
        for (name, text) in &wanted {
            if std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(text.as_str()) {
                stale.push(name.clone());
            }
        }
        stale.extend(existing.iter().filter(|n| !wanted.contains_key(*n)).cloned());
        if !stale.is_empty() {
            return Err(format!("schemas/ is stale ({}); run `cargo xtask schema` and commit", stale.join(", ")));
        }
        eprintln!("xtask: == schema: {} schemas up to date", wanted.len());
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for name in existing.iter().filter(|n| !wanted.contains_key(*n)) {
        std::fs::remove_file(dir.join(name)).map_err(|e| format!("removing {name}: {e}"))?;
    }
    for (name, text) in &wanted {
        std::fs::write(dir.join(name), text).map_err(|e| format!("writing {name}: {e}"))?;
    }
    eprintln!("xtask: wrote {} schemas to {}", wanted.len(), dir.display());
    Ok(())
}

/// The cargo-fuzz targets under `fuzz/`.
const FUZZ_TARGETS: [&str; 2] = ["patch_parser", "matcher"];

/// `cargo xtask fuzz [target|all] [seconds]`: runs each chosen target for `seconds` (default 60)
/// with libFuzzer, without a sanitizer (the fuzzed code has no `unsafe`), on whatever toolchain
/// is active: `RUSTC_BOOTSTRAP=1` lets stable accept the flags cargo-fuzz passes. New inputs
/// stay in `fuzz/corpus/<target>`, crashes in `fuzz/artifacts/<target>` (both git-ignored).
fn fuzz(args: &[String]) -> Result<(), String> {
    let which = args.first().map(String::as_str).unwrap_or("all");
    let targets: Vec<&str> = match which {
        "all" => FUZZ_TARGETS.to_vec(),
        t if FUZZ_TARGETS.contains(&t) => vec![t],
        other => {
            return Err(format!("unknown fuzz target `{other}`; choose one of {} or all", FUZZ_TARGETS.join(", ")));
        }
    };
    let seconds: u64 = match args.get(1) {
        None => 60,
        Some(s) => s.parse().map_err(|_| format!("seconds must be a whole number, got `{s}`"))?,
    };
    ensure_cargo_fuzz()?;
    for target in targets {
        let corpus = root().join("fuzz").join("corpus").join(target);
        seed_corpus(target, &corpus)?;
        run(
            &format!("fuzz {target} for {seconds} s"),
            cargo()
                .args(["fuzz", "run", "--sanitizer", "none", target])
                .arg(&corpus)
                .args(["--", &format!("-max_total_time={seconds}"), "-print_final_stats=1"])
                .env("RUSTC_BOOTSTRAP", "1"),
        )?;
    }
    eprintln!("xtask: fuzzing found no failure");
    Ok(())
}

/// Installs cargo-fuzz when `cargo fuzz` is not available.
fn ensure_cargo_fuzz() -> Result<(), String> {
    let works = || cargo().args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if works() {
        return Ok(());
    }
    eprintln!("xtask: == installing cargo-fuzz (cargo install cargo-fuzz --locked)");
    let installed = cargo().args(["install", "cargo-fuzz", "--locked"]).status();
    match installed {
        Ok(s) if s.success() && works() => Ok(()),
        Ok(s) => Err(format!("cargo-fuzz is missing and `cargo install cargo-fuzz --locked` failed ({s})")),
        Err(e) => Err(format!("cargo-fuzz is missing and `cargo install` could not start: {e}")),
    }
}

/// Gives an empty corpus a few valid inputs to start from, so the fuzzer explores real
/// patches and real matches instead of spending its time rediscovering the syntax.
fn seed_corpus(target: &str, corpus: &Path) -> Result<(), String> {
    std::fs::create_dir_all(corpus).map_err(|e| format!("creating {}: {e}", corpus.display()))?;
    let empty = std::fs::read_dir(corpus).map(|mut d| d.next().is_none()).unwrap_or(false);
    if !empty {
        return Ok(());
    }
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    match target {
        "patch_parser" => {
            seeds.push(
                b"*** Begin Patch\n*** Update File: a.rs\n@@ fn main() {\n-    let x = 1;\n+    let x = 2;\n*** End of File\n*** End Patch\n"
                    .to_vec(),
            );
            seeds.push(b"*** Begin Patch\n*** Add File: b.txt\n+hello\n*** Delete File: c.txt\n*** End Patch".to_vec());
            seeds.push(
                b"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n last line\n+more\n*** End Patch\nEOF\n"
                    .to_vec(),
            );
            // Codex's own scenarios, when the shared fixtures are next to the repository.
            let scenarios = root().join("../shared/conformance/codex-apply-patch/scenarios");
            if let Ok(dirs) = std::fs::read_dir(scenarios) {
                for dir in dirs.flatten() {
                    if let Ok(patch) = std::fs::read(dir.path().join("patch.txt")) {
                        seeds.push(patch);
                    }
                }
            }
        }
        _ => {
            seeds.push(b"fn main() {\n    let x = 1;\n}\n\xFFlet x = 1;\xFFlet x = 2;".to_vec());
            // Typography (E7) and CRLF: the matcher splits its input at 0xFF bytes.
            let curly = "say \u{201C}hi\u{201D} \u{2014} ok\r\nnext\r\n";
            seeds.push([curly.as_bytes(), b"\xFF", b"say \"hi\" - ok", b"\xFF", b"say \"yo\" - ok"].concat());
            seeds.push(b"  if a {\n    b();\n  }\n  c();\n\xFFif a {\nb();\n}\xFFif a {\n  d();\n}".to_vec());
        }
    }
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(corpus.join(format!("seed-{i}")), seed).map_err(|e| format!("writing a seed: {e}"))?;
    }
    Ok(())
}
