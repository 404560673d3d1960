//! `lsp` and `read_lints` against a real gopls (Debian's, with Go 1.19): definition and
//! references across packages, hover, and diagnostics after an edit and after its fix
//! (L1, L2, L4, E9).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, configured, server_program};
use kodik_core::{DiagnosticSeverity, DiagnosticsProvider};
use serde_json::json;

const UTIL: &str = "package util\n\n// Double doubles a value.\nfunc Double(v int) int { return v * 2 }\n";

/// gopls's configuration, when gopls and the `go` command it loads packages with are there.
fn gopls() -> Option<kodik_lsp::ServerConfig> {
    let cfg = configured("gopls", "gopls")?;
    server_program("go")?;
    Some(cfg)
}

/// L1, L2, L4, E9 on gopls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l2_e9_against_gopls() {
    let Some(cfg) = gopls() else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("go.mod", "module example.com/p\n\ngo 1.19\n");
    h.write("util/util.go", UTIL);
    let good = "package main\n\nimport \"example.com/p/util\"\n\nfunc main() {\n\tn := util.Double(util.Double(2))\n\t_ = n\n}\n";
    h.write("main.go", good);

    let def = h
        .lsp(json!({"operation": "definition", "path": "main.go", "line": 6, "symbol": "Double", "occurrence": 2}))
        .await;
    assert!(def.contains("util/util.go:4:6: func Double(v int) int { return v * 2 }"), "{def}");
    let refs = h.lsp(json!({"operation": "references", "path": "util/util.go", "line": 4, "symbol": "Double"})).await;
    // The tab before `n` is one character: columns count characters, not display width.
    assert!(refs.contains("main.go:6:12:") && refs.contains("main.go:6:24:"), "{refs}");
    let hover = h.lsp(json!({"operation": "hover", "path": "main.go", "line": 6, "symbol": "Double"})).await;
    assert!(hover.contains("func util.Double(v int) int") && hover.contains("Double doubles a value."), "{hover}");

    let main = h.root.join("main.go");
    let bad =
        "package main\n\nimport \"example.com/p/util\"\n\nfunc main() {\n\tvar s string = util.Double(2)\n\t_ = s\n}\n";
    std::fs::write(&main, bad).unwrap();
    let diags = h.servers.diagnostics(&main, bad).await;
    assert!(diags.iter().any(|d| d.severity == DiagnosticSeverity::Error && d.line == 6), "{diags:?}");
    std::fs::write(&main, good).unwrap();
    let diags = h.servers.diagnostics(&main, good).await;
    assert!(diags.iter().all(|d| d.severity != DiagnosticSeverity::Error), "stale errors after the fix: {diags:?}");
    let lints = h.call("read_lints", json!({"paths": ["main.go"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    assert_eq!(h.servers.starts().await, 1);
}

/// L2: the modules of a `go.work` share one gopls at the `go.work`, and references cross them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_modules_of_a_go_work_share_one_gopls() {
    let Some(cfg) = gopls() else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("go.work", "go 1.19\n\nuse (\n\t./lib\n\t./app\n)\n");
    h.write("lib/go.mod", "module example.com/lib\n\ngo 1.19\n");
    h.write("lib/util.go", "package lib\n\n// Double doubles a value.\nfunc Double(v int) int { return v * 2 }\n");
    h.write("app/go.mod", "module example.com/app\n\ngo 1.19\n");
    h.write("app/main.go", "package main\n\nimport \"example.com/lib\"\n\nfunc main() {\n\t_ = lib.Double(2)\n}\n");

    let def = h.lsp(json!({"operation": "definition", "path": "app/main.go", "line": 6, "symbol": "Double"})).await;
    assert!(def.contains("lib/util.go:4:6: func Double(v int) int"), "{def}");
    let refs = h.lsp(json!({"operation": "references", "path": "lib/util.go", "line": 4, "symbol": "Double"})).await;
    assert!(refs.contains("app/main.go:6:10:"), "{refs}");
    assert!(!refs.contains("searched the project"), "{refs}");
    assert_eq!(h.servers.starts().await, 1, "one gopls for the go.work");
}
