//! `read_lints` given several paths of which some cannot be checked, against a real pyright:
//! the others are still checked and the bad ones named; only when every path is bad is the
//! call an error (L1).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, configured};
use serde_json::json;

/// L1: a missing file and a path outside the workspace among the paths cost only themselves:
/// the other files' errors come back, and a line names each bad path with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_read_lints_checks_the_good_paths_and_names_the_bad_ones() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(dir.path().join("outside.py"), "y: int = 1\n").unwrap();
    let h = Harness::new(&ws, cfg);
    h.write("pyproject.toml", "[project]\nname = \"demo\"\nversion = \"0\"\n");
    h.write("tool.py", "x: int = \"s\"\n");
    h.write("notes.txt", "not code\n");

    let out = h.call("read_lints", json!({"paths": ["tool.py", "nonexist.py", "../outside.py", "notes.txt"]})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.starts_with("1 error(s), 0 warning(s), 1 diagnostic(s) in 1 checked file(s):"), "{text}");
    assert!(text.contains("tool.py:1:10: error [Pyright reportAssignmentType]"), "{text}");
    assert!(text.contains("Not checked: `nonexist.py` does not exist"), "{text}");
    assert!(text.contains("Not checked: `") && text.contains("outside.py` is outside the workspace"), "{text}");
    assert_eq!(out.meta["bad_paths"].as_array().map(Vec::len), Some(2), "{}", out.meta);

    // Every path bad: an error naming each.
    let out = h.call("read_lints", json!({"paths": ["nonexist.py", "gone/"]})).await;
    let text = out.text_content();
    assert!(!out.is_success(), "{text}");
    assert!(text.contains("`nonexist.py` does not exist") && text.contains("`gone` does not exist"), "{text}");
    // One bad path alone: its own error, as before.
    let out = h.call("read_lints", json!({"paths": ["nonexist.py"]})).await;
    assert!(!out.is_success() && out.text_content().contains("`nonexist.py` does not exist"), "{}", out.text_content());
    // A good path with nothing a server checks, beside a bad one: both reasons.
    let out = h.call("read_lints", json!({"paths": ["notes.txt", "nonexist.py"]})).await;
    let text = out.text_content();
    assert!(!out.is_success(), "{text}");
    assert!(text.contains("notes.txt") && text.contains("`nonexist.py` does not exist"), "{text}");
}

/// L1, L5, G16: `read_lints` of a folder leaves out a file the root's `.kodikignore` hides,
/// though a `.gitignore` in the folder makes an exception for it (`!secret.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_g16_read_lints_of_a_folder_skips_files_kodikignore_hides_despite_a_gitignore_exception() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"demo\"\nversion = \"0\"\n");
    h.write(".kodikignore", "secret.py\n");
    h.write("sub/.gitignore", "!secret.py\n");
    h.write("sub/secret.py", "hidden: int = \"s\"\n");
    h.write("sub/tool.py", "x: int = \"s\"\n");

    let out = h.call("read_lints", json!({"paths": ["sub"]})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("sub/tool.py:1:10: error"), "{text}");
    assert!(!text.contains("secret"), "a hidden file was checked: {text}");
}

/// L1: a folder with more files than one `read_lints` checks names the first files left out
/// and says to pass them in `paths`, and meta counts them as not checked (before: "ask for a
/// smaller folder", which a flat folder does not have, and `not_checked: 0`). Passing the named
/// file then finds its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_read_lints_past_the_file_cap_names_the_files_left_out() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"a\"\nversion = \"0\"\n");
    for i in 100..410 {
        h.write(&format!("app/m{i}.py"), &format!("def f{i}() -> int:\n    return {i}\n"));
    }
    h.write("app/aa_first.py", "y: int = \"bad\"\n");
    h.write("app/zz_last.py", "x: int = \"bad\"\n");
    let out = h.call("read_lints", json!({"paths": ["app"]})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("app/aa_first.py:1:10: error"), "{text}");
    assert!(
        text.contains("(12 more files not checked (at most 300 at a time): app/m399.py, app/m400.py, app/m401.py, app/m402.py, app/m403.py and 7 more; pass them in `paths` to check them)"),
        "{text}"
    );
    assert_eq!(out.meta["not_checked"], 12, "{}", out.meta);
    let text = h.call("read_lints", json!({"paths": ["app/zz_last.py"]})).await.text_content();
    assert!(text.contains("app/zz_last.py:1:10: error"), "{text}");
}
