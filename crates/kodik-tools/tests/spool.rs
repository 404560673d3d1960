//! The spool folder set on the builder (its own test binary: the setting is process-wide).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kodik_tools::Toolbox;
use kodik_tools::core::ToolCall;
use serde_json::json;

/// G9, G20: a command whose output does not fit its result saves the full output in the folder
/// the host chose, not in the shared temporary folder, and read_file and grep can read it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_g20_full_outputs_go_to_the_spool_folder_the_builder_sets() {
    let ws = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let folder = spool.path().join("outputs");
    let tb = Toolbox::builder().workspace(ws.path()).spool_dir(&folder).build().unwrap();
    let call = ToolCall::new("1", "shell", json!({"command": "seq 1 200000"}));
    let out = tb.call(&call).await;
    assert!(out.is_success(), "{}", out.text_content());
    let full = out.full_output.expect("a 1.3 MB output is saved in full");
    assert!(full.starts_with(&folder), "{} is not under {}", full.display(), folder.display());
    let saved = std::fs::read_to_string(&full).unwrap();
    assert!(saved.starts_with("1\n2\n") && saved.ends_with("199999\n200000\n"));

    // G20: the saved output stays reachable with the read tools, although it lies outside the
    // workspace (before: "is outside the workspace", so only a shell `sed` could read it).
    let path = full.display().to_string();
    let read = tb.call(&ToolCall::new("2", "read_file", json!({"path": path, "ranges": [[150000, 150001]]}))).await;
    assert!(read.is_success() && read.text_content().contains("150000"), "{}", read.text_content());
    let grep = tb.call(&ToolCall::new("3", "grep", json!({"pattern": "^199999$", "path": path}))).await;
    assert!(grep.is_success() && grep.text_content().contains(":199999:"), "{}", grep.text_content());
    // Only the saved outputs: any other file there, or beside the workspace, is still refused,
    // and a saved output cannot be written through the edit tools.
    std::fs::write(folder.join("notes.txt"), "private\n").unwrap();
    let outside = spool.path().join("outside.log");
    std::fs::write(&outside, "private\n").unwrap();
    for other in [folder.join("notes.txt"), outside] {
        let out = tb.call(&ToolCall::new("4", "read_file", json!({"path": other}))).await;
        assert!(!out.is_success() && out.text_content().contains("outside the workspace"), "{}", out.text_content());
    }
    let edit = tb
        .call(&ToolCall::new(
            "5",
            "edit_file",
            json!({"path": path, "edits": [{"old_string": "150000\n", "new_string": "x\n"}]}),
        ))
        .await;
    assert!(!edit.is_success() && edit.text_content().contains("outside the workspace"), "{}", edit.text_content());
}
