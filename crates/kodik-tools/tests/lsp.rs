//! E9 end to end: edit_file and create_file report the written version's errors from a real
//! pyright started by the toolbox's `lsp` feature; `lsp` and `read_lints` are registered.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::PathBuf;

use kodik_tools::Toolbox;
use kodik_tools::core::{ToolCall, ToolOutput};
use kodik_tools::lsp::LspConfig;
use serde_json::{Value, json};

/// pyright-langserver from `KODIK_LSP_BIN` (set by `cargo xtask ci`) or PATH; missing fails in
/// CI and skips with a printed reason elsewhere.
fn pyright() -> Option<PathBuf> {
    let env = std::env::var_os("KODIK_LSP_BIN").map(|d| PathBuf::from(d).join("pyright-langserver"));
    let found = env.filter(|p| p.is_file()).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("pyright-langserver")).find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = "pyright-langserver is not installed: run `cargo xtask test-tools` or set KODIK_LSP_BIN";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("SKIPPED: {msg}");
    }
    found
}

async fn one(tb: &Toolbox, name: &str, args: Value) -> ToolOutput {
    tokio::time::timeout(std::time::Duration::from_secs(120), tb.call(&ToolCall::new("c", name, args)))
        .await
        .expect("call hung")
}

/// E9: the error an edit introduces is in edit_file's result, the fixing edit's result has none
/// (never the pre-edit errors); L1: a module made by create_file clears another file's import error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_edit_results_carry_errors_of_the_written_version() {
    let Some(program) = pyright() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname = \"d\"\nversion = \"0\"\n").unwrap();
    std::fs::write(dir.path().join("calc.py"), "def double(v: int) -> int:\n    return v * 2\n\nx: int = double(2)\n")
        .unwrap();
    let mut config = LspConfig::default();
    for s in &mut config.servers {
        if s.name == "pyright" {
            s.command = program.clone();
        }
    }
    let tb = Toolbox::builder().workspace(dir.path()).lsp(config).build().unwrap();
    let names: Vec<String> = tb.specs().into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"lsp".to_owned()) && names.contains(&"read_lints".to_owned()), "{names:?}");

    assert!(one(&tb, "read_file", json!({"path": "calc.py"})).await.is_success());
    let bad = one(
        &tb,
        "edit_file",
        json!({"path": "calc.py", "edits": [{"old_string": "double(2)", "new_string": "double(\"two\")"}]}),
    )
    .await;
    let text = bad.text_content();
    assert!(bad.is_success(), "{text}");
    assert!(text.contains("Errors in the written file (1)") && text.contains("4:17"), "{text}");

    let good = one(
        &tb,
        "edit_file",
        json!({"path": "calc.py", "edits": [{"old_string": "double(\"two\")", "new_string": "double(3)"}]}),
    )
    .await;
    let text = good.text_content();
    assert!(good.is_success() && !text.contains("Errors in the written file"), "stale errors: {text}");

    let app =
        one(&tb, "create_file", json!({"path": "app.py", "content": "from helpers import thing\n\nprint(thing)\n"}))
            .await;
    assert!(app.is_success(), "{}", app.text_content());
    let lints = one(&tb, "read_lints", json!({"paths": ["app.py"]})).await;
    assert!(lints.text_content().contains("app.py:1:6: error") && lints.text_content().contains("helpers"));
    let helper = one(&tb, "create_file", json!({"path": "helpers.py", "content": "thing = 1\n"})).await;
    assert!(helper.is_success(), "{}", helper.text_content());
    let lints = one(&tb, "read_lints", json!({"paths": ["app.py"]})).await;
    assert!(lints.text_content().contains("No errors or warnings"), "{}", lints.text_content());
    assert_eq!(tb.lsp().starts().await, 1);
}

/// E9 for the other editing tools: create_file's result carries the new file's errors, and
/// apply_patch's carries those of every file it added (`*** Add File`) or updated
/// (`*** Update File`), named per file; the fixing patch's result has none (no stale errors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_create_file_and_apply_patch_results_carry_errors_of_the_written_version() {
    let Some(program) = pyright() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname = \"d\"\nversion = \"0\"\n").unwrap();
    std::fs::write(dir.path().join("calc.py"), "def double(v: int) -> int:\n    return v * 2\n").unwrap();
    let mut config = LspConfig::default();
    for s in &mut config.servers {
        if s.name == "pyright" {
            s.command = program.clone();
        }
    }
    let tb = Toolbox::builder().workspace(dir.path()).lsp(config).build().unwrap();

    let bad = one(&tb, "create_file", json!({"path": "bad.py", "content": "y: int = 1\nx: int = \"s\"\n"})).await;
    let text = bad.text_content();
    assert!(bad.is_success(), "{text}");
    assert!(text.contains("Errors in the written file (1)") && text.contains("2:10"), "{text}");
    assert_eq!(bad.meta["diagnostics"][0]["line"], 2, "{}", bad.meta);
    let clean = one(&tb, "create_file", json!({"path": "clean.py", "content": "z: int = 3\n"})).await;
    assert!(clean.is_success() && !clean.text_content().contains("Errors in"), "{}", clean.text_content());

    let patch = "*** Begin Patch\n*** Add File: added.py\n+from calc import double\n+n: str = double(1)\n\
                 *** Update File: calc.py\n@@\n def double(v: int) -> int:\n-    return v * 2\n+    return v + \"2\"\n\
                 *** End Patch";
    let out = one(&tb, "apply_patch", json!({"input": patch})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("Errors in `added.py` (1)") && text.contains("2:10"), "{text}");
    assert!(text.contains("Errors in `calc.py` (1)") && text.contains("2:12"), "{text}");
    // The errors come before the diffs, so a diff cut to a preview cannot hide them.
    assert!(text.find("Errors in").unwrap() < text.find("@@").unwrap(), "{text}");

    let fix = "*** Begin Patch\n*** Update File: added.py\n@@\n from calc import double\n-n: str = double(1)\n\
               +n: int = double(1)\n*** Update File: calc.py\n@@\n def double(v: int) -> int:\n\
               -    return v + \"2\"\n+    return v * 2\n*** End Patch";
    let out = one(&tb, "apply_patch", json!({"input": fix})).await;
    let text = out.text_content();
    assert!(out.is_success() && !text.contains("Errors in"), "stale errors: {text}");
    assert_eq!(out.meta["diagnostics"], json!({}), "{}", out.meta);
}
