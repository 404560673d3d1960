//! The builder's per-crate configurations reach the tools of the built toolbox.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use kodik_tools::Toolbox;
use kodik_tools::core::{ToolCall, ToolStatus};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_the_builders_edit_toolset_decides_which_file_operations_run() {
    use kodik_tools::edit::{EditToolset, FileOps};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "x\n").unwrap();
    let ops = FileOps { delete: false, ..FileOps::default() };
    let tb = Toolbox::builder().workspace(dir.path()).edit(EditToolset::with_file_ops(ops)).build().unwrap();
    let out = tb.call(&ToolCall::new("1", "delete_file", json!({"path": "keep.txt"}))).await;
    assert_ne!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(dir.path().join("keep.txt").exists());
    let out = tb.call(&ToolCall::new("2", "create_file", json!({"path": "new.txt", "content": "n\n"}))).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    // The toolbox's checkpoints are the given toolset's: undo removes the new file.
    assert!(tb.checkpoints().undo_all().is_complete());
    assert!(!dir.path().join("new.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builders_search_toolset_sets_the_glob_limit() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("f{i}.txt")), "x").unwrap();
    }
    let search = kodik_tools::search::SearchToolset::new().glob_limit(2);
    let tb = Toolbox::builder().workspace(dir.path()).search(search).build().unwrap();
    let out = tb.call(&ToolCall::new("1", "glob", json!({"pattern": "*.txt"}))).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let listed = out.text_content().lines().filter(|l| l.ends_with(".txt")).count();
    assert_eq!(listed, 2, "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g20_a_shell_toolset_made_before_build_saves_full_outputs_where_the_model_can_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    // Made before the builder sets the folder, as a host configures its shell.
    let shell = kodik_tools::shell::ShellToolset::new().unset_env("OPENAI_API_KEY");
    let tb = Toolbox::builder().workspace(dir.path()).shell(shell).spool_dir(spool.path()).build().unwrap();
    let out = tb.call(&ToolCall::new("1", "shell", json!({"command": "seq 1 200000"}))).await;
    let full = out.full_output.clone().expect("a long output is saved in full");
    assert!(full.starts_with(spool.path()), "{} is not in {}", full.display(), spool.path().display());
    let read = tb
        .call(&ToolCall::new("2", "read_file", json!({"path": full, "ranges": [{"start_line": 1, "end_line": 2}]})))
        .await;
    assert_eq!(read.status, ToolStatus::Success, "{}", read.text_content());
    assert!(read.text_content().contains("2→2"), "{}", read.text_content());
}
