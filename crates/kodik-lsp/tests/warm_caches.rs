//! A warm `lsp` call that changed nothing looks at no file: path checks, open documents and
//! the source lines of results are kept while inotify reports no change. These tests prove
//! the kept answers never outlive a change made by another process between two calls
//! (L2, L4, L5, G16).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::path::Path;

use common::{Harness, configured};
use serde_json::json;

/// Runs `script` in a shell in `dir`: the change is made by another process.
fn sh(dir: &Path, script: &str) {
    let ok = std::process::Command::new("sh").arg("-c").arg(script).current_dir(dir).status().unwrap();
    assert!(ok.success(), "{script}");
}

/// L2, L4, L5, G16: between two warm `definition` calls another process rewrites the result's
/// file (same length, same second), then the file asked about, then adds a `.kodikignore`
/// hiding the result's file and then the file asked about: each next answer shows the change
/// (new source line, the symbol on its new line, the location hidden and counted, the path
/// refused), and removing the `.kodikignore` brings the answer back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l4_l5_g16_warm_answers_follow_files_changed_by_another_process() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"b\"\nversion = \"0\"\n");
    h.write("util.py", "def helper(value: int) -> int:\n    return value * 2\n");
    h.write("main.py", "from util import helper\n\n\ndef run(x: int) -> int:\n    return helper(x) + 1\n");
    let ask = |line: u32| json!({"operation": "definition", "path": "main.py", "line": line, "symbol": "helper"});

    for _ in 0..3 {
        let warm = h.lsp(ask(5)).await;
        assert!(warm.contains("util.py:1:5: def helper(value: int) -> int:"), "{warm}");
    }
    sh(&h.root, "printf 'def helper(count: int) -> int:\\n    return count * 2\\n' > util.py");
    let after = h.lsp(ask(5)).await;
    assert!(after.contains("util.py:1:5: def helper(count: int) -> int:"), "a stale source line: {after}");

    sh(&h.root, "printf 'import os\\n' | cat - main.py > main.tmp && mv main.tmp main.py");
    let moved = h.lsp(ask(6)).await;
    assert!(moved.contains("main.py:6:") && moved.contains("util.py:1:5:"), "{moved}");

    sh(&h.root, "printf 'util.py\\n' > .kodikignore");
    let hidden = h.lsp(ask(6)).await;
    assert!(hidden.contains("0 locations") && hidden.contains("1 more in files hidden by .kodikignore"), "{hidden}");

    sh(&h.root, "printf 'main.py\\n' > .kodikignore");
    let refused = h.call("lsp", ask(6)).await;
    assert!(!refused.is_success(), "{}", refused.text_content());
    assert!(refused.text_content().contains(".kodikignore"), "{}", refused.text_content());

    sh(&h.root, "rm .kodikignore");
    let back = h.lsp(ask(6)).await;
    assert!(back.contains("util.py:1:5: def helper(count: int) -> int:"), "{back}");
}
