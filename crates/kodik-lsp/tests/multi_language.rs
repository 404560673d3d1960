//! Workspaces with more than one language: every server with files in the workspace answers
//! `workspace_symbols`, and a server that cannot start costs only its own files in
//! `read_lints` (L1, L2, L6).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Harness, configured};
use kodik_lsp::LspConfig;
use serde_json::json;

/// L2: without `path`, `workspace_symbols` finds a Python function and a TypeScript class in
/// one workspace (before, one server picked by file-walk order answered "No results" for the
/// other language's names).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_workspace_symbols_asks_every_language_server_in_the_workspace() {
    let (Some(py), Some(ts)) = (
        configured("pyright", "pyright-langserver"),
        configured("typescript-language-server", "typescript-language-server"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::with_config(dir.path(), LspConfig { servers: vec![py, ts], ..LspConfig::default() });
    h.write("api/app.py", "def handle_request(req):\n    return req\n");
    h.write("web/tsconfig.json", "{\"compilerOptions\":{\"strict\":true}}\n");
    h.write("web/src/cart.ts", "export class ShoppingCart {\n  total(): number { return 0; }\n}\n");

    let py_hit = h.lsp(json!({"operation": "workspace_symbols", "query": "handle_request"})).await;
    assert!(py_hit.contains("api/app.py:1:5: (function handle_request) def handle_request(req):"), "{py_hit}");
    assert!(py_hit.contains("pyright") && py_hit.contains("typescript-language-server"), "{py_hit}");
    let ts_hit = h.lsp(json!({"operation": "workspace_symbols", "query": "ShoppingCart"})).await;
    assert!(ts_hit.contains("web/src/cart.ts:1:1: (class ShoppingCart) export class ShoppingCart {"), "{ts_hit}");
}

/// L1, L6: rustup installs a `rust-analyzer` proxy that exits at once when the component is
/// missing. A whole-workspace `read_lints` still reports the Python error and names the Rust
/// files it could not check and why (before: the whole call failed); asking only for those
/// files is an error that says why and what to do instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l6_read_lints_checks_other_languages_when_one_server_cannot_start() {
    let Some(py) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let proxy = bin.path().join("rust-analyzer");
    std::fs::write(
        &proxy,
        "#!/bin/sh\necho \"error: Unknown binary 'rust-analyzer' in official toolchain 'stable'\" >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&proxy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut ra = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == "rust-analyzer").unwrap();
    ra.command = proxy;
    let h = Harness::with_config(dir.path(), LspConfig { servers: vec![py, ra], ..LspConfig::default() });
    h.write("Cargo.toml", "[package]\nname = \"r\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    h.write("src/main.rs", "fn helper() -> i32 { 1 }\nfn main() { let x: String = helper(); }\n");
    h.write("src/lib.rs", "pub fn f() {}\n");
    h.write("tool.py", "x: int = \"s\"\n");

    let out = h.call("read_lints", json!({})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("tool.py:1:10: error"), "{text}");
    assert!(text.contains("in 1 checked file"), "{text}");
    assert!(text.contains("Not checked: src/lib.rs, src/main.rs"), "{text}");
    assert!(text.contains("rust-analyzer language server did not start"), "{text}");
    assert!(text.contains("it said: error: Unknown binary 'rust-analyzer' in official toolchain"), "{text}");

    // Passed over now (until the restart window ends), yet still named, not skipped silently.
    let out = h.call("read_lints", json!({"paths": ["tool.py", "src"]})).await;
    let text = out.text_content();
    assert!(out.is_success() && text.contains("tool.py:1:10: error"), "{text}");
    assert!(text.contains("Not checked: src/lib.rs, src/main.rs"), "{text}");

    let out = h.call("read_lints", json!({"paths": ["src/main.rs"]})).await;
    let text = out.text_content();
    assert!(!out.is_success(), "{text}");
    assert!(text.contains("src/main.rs could not be checked") && text.contains("did not start"), "{text}");
    assert!(text.contains("shell"), "{text}");
}

/// L1, L6: with no server installed for the workspace's Python files, `read_lints` says which
/// programs were looked for (before: "no language server for these paths hold no file files").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l6_read_lints_without_an_installed_server_names_the_programs_tried() {
    let dir = tempfile::tempdir().unwrap();
    let mut py = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == "pyright").unwrap();
    py.command = dir.path().join("not-installed/pyright-langserver");
    let h = Harness::with_config(dir.path(), LspConfig { servers: vec![py], ..LspConfig::default() });
    h.write("tool.py", "x: int = \"s\"\n");
    let out = h.call("read_lints", json!({})).await;
    let text = out.text_content();
    assert!(!out.is_success(), "{text}");
    assert!(text.contains("no language server is installed for .py files (tried"), "{text}");
    assert!(text.contains("pyright-langserver") && text.contains("shell"), "{text}");
}
