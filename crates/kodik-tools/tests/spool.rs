//! The spool folder set on the builder (its own test binary: the setting is process-wide).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kodik_tools::Toolbox;
use kodik_tools::core::ToolCall;
use serde_json::json;

/// G9, G20: a command whose output does not fit its result saves the full output in the folder
/// the host chose, not in the shared temporary folder.
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
}
