//! `lsp` and `read_lints` against a real rust-analyzer (built from crates.io's
//! `ra_ap_rust-analyzer` by `cargo xtask ci`, since rustup here has only its proxy):
//! definition across modules, references through a `use … as` alias, hover, implementation,
//! document symbols, a query sent while the workspace is still loading (L6), and diagnostics
//! after an edit and after its fix (L1, L2, L4, E9).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, server_program};
use kodik_core::{DiagnosticSeverity, DiagnosticsProvider};
use serde_json::json;

/// rust-analyzer's configuration, or `None` (outside CI) when only rustup's proxy is there: the
/// proxy is a file named `rust-analyzer` that fails at once when the component is not installed.
fn rust_analyzer() -> Option<kodik_lsp::ServerConfig> {
    let program = server_program("rust-analyzer")?;
    let works = std::process::Command::new(&program).arg("--version").output().is_ok_and(|o| o.status.success());
    if !works {
        let msg = format!("`{}` does not run (rustup's proxy without the component?)", program.display());
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}: `cargo xtask ci` installs rust-analyzer and puts it first on PATH");
        }
        eprintln!("SKIPPED: {msg}");
        return None;
    }
    let mut cfg = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == "rust-analyzer")?;
    cfg.command = program;
    Some(cfg)
}

const CARGO_TOML: &str = "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
const UTIL: &str = "/// Doubles a value.\npub fn double(v: i32) -> i32 {\n    v * 2\n}\n\npub trait Shape {\n    fn area(&self) -> i32;\n}\n\npub struct Square(pub i32);\n\nimpl Shape for Square {\n    fn area(&self) -> i32 {\n        self.0 * self.0\n    }\n}\n";
const GOOD: &str = "mod util;\n\nuse util::double as twice;\nuse util::Shape;\n\nfn main() {\n    let n: i32 = twice(twice(2)) + util::double(1) + util::Square(3).area();\n    println!(\"{n}\");\n}\n";
const BAD: &str = "mod util;\n\nuse util::double as twice;\nuse util::Shape;\n\nfn main() {\n    let n: i32 = twice(\"two\") + util::Square(3).area();\n    println!(\"{n}\");\n}\n";

/// L1, L2, L4, L6, E9 on rust-analyzer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l2_l6_e9_against_rust_analyzer() {
    let Some(cfg) = rust_analyzer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("Cargo.toml", CARGO_TOML);
    h.write("src/util.rs", UTIL);
    h.write("src/main.rs", GOOD);

    // The first query starts the server and meets `cargo metadata` still loading the
    // workspace: it must come back with the answer (waited for), never "nothing found".
    let def = h
        .lsp(json!({"operation": "definition", "path": "src/main.rs", "line": 7, "symbol": "twice", "occurrence": 2}))
        .await;
    assert!(def.contains("src/util.rs:2:8: pub fn double(v: i32) -> i32 {"), "{def}");
    let def = h.lsp(json!({"operation": "definition", "path": "src/main.rs", "line": 7, "symbol": "Square"})).await;
    assert!(def.contains("src/util.rs:10:12: pub struct Square(pub i32);"), "{def}");
    // References of `double` across files, including the import that renames it
    // (rust-analyzer does not follow the alias to its calls).
    let refs = h.lsp(json!({"operation": "references", "path": "src/util.rs", "line": 2, "symbol": "double"})).await;
    assert!(
        refs.contains("src/main.rs:3:11: use util::double as twice;") && refs.contains("src/main.rs:7:42:"),
        "{refs}"
    );
    let hover = h.lsp(json!({"operation": "hover", "path": "src/main.rs", "line": 7, "symbol": "twice"})).await;
    assert!(hover.contains("pub fn double(v: i32) -> i32") && hover.contains("Doubles a value."), "{hover}");
    let imp = h.lsp(json!({"operation": "implementation", "path": "src/util.rs", "line": 6, "symbol": "Shape"})).await;
    assert!(imp.contains("src/util.rs:12:"), "{imp}");
    let symbols = h.lsp(json!({"operation": "document_symbols", "path": "src/util.rs"})).await;
    assert!(symbols.contains("double") && symbols.contains("Square") && symbols.contains("Shape"), "{symbols}");

    // E9: the written version's type error, then no stale error once it is fixed.
    let main = h.root.join("src/main.rs");
    std::fs::write(&main, BAD).unwrap();
    let diags = h.servers.diagnostics(&main, BAD).await;
    assert!(diags.iter().any(|d| d.severity == DiagnosticSeverity::Error && d.line == 7), "{diags:?}");
    std::fs::write(&main, GOOD).unwrap();
    let diags = h.servers.diagnostics(&main, GOOD).await;
    assert!(diags.iter().all(|d| d.severity != DiagnosticSeverity::Error), "stale errors after the fix: {diags:?}");
    let lints = h.call("read_lints", json!({"paths": ["src/main.rs"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    assert_eq!(h.servers.starts().await, 1);
}

/// L2: in a cargo workspace, the crates share one rust-analyzer at the workspace root (one per
/// crate would each load and index the whole workspace), definition and references cross the
/// crates, and no "searched the project … only" note claims otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_crates_of_a_cargo_workspace_share_one_rust_analyzer() {
    let Some(cfg) = rust_analyzer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n");
    h.write("crates/util/Cargo.toml", "[package]\nname = \"util\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    h.write("crates/util/src/lib.rs", "/// Doubles a value.\npub fn double(v: i32) -> i32 {\n    v * 2\n}\n");
    h.write(
        "crates/app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nutil = { path = \"../util\" }\n",
    );
    h.write("crates/app/src/main.rs", "fn main() {\n    println!(\"{}\", util::double(2));\n}\n");

    let def = h
        .lsp(json!({"operation": "definition", "path": "crates/app/src/main.rs", "line": 2, "symbol": "double"}))
        .await;
    assert!(def.contains("crates/util/src/lib.rs:2:8: pub fn double(v: i32) -> i32 {"), "{def}");
    let refs = h
        .lsp(json!({"operation": "references", "path": "crates/util/src/lib.rs", "line": 2, "symbol": "double"}))
        .await;
    assert!(refs.contains("crates/app/src/main.rs:2:26:"), "{refs}");
    assert!(!refs.contains("searched the project"), "{refs}");
    assert_eq!(h.servers.starts().await, 1, "one rust-analyzer for the workspace");
}
