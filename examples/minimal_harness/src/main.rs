//! The smallest embedding: a toolbox with only the edit and search tools (the crate's other
//! features are off), one model turn's calls run through it, results printed as the model
//! would read them.
//!
//! `cargo run -p minimal_harness [DIR]` — works in DIR (default: a fresh scratch folder).

use kodik_tools::Toolbox;
use kodik_tools::core::{ToolCall, ToolStatus};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("kodik-minimal-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("notes.txt"), "todo: write the docs\ndone: ship it\n")?;

    let toolbox = Toolbox::builder().workspace(&dir).build()?;
    let names: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
    println!("tools: {}", names.join(", "));

    // edit_file wants the file read first (E2); the same turn's calls run in order on one file.
    let turn = [
        ToolCall::new("1", "read_file", json!({"path": "notes.txt"})),
        ToolCall::new(
            "2",
            "edit_file",
            json!({"path": "notes.txt", "edits": [
                {"old_string": "todo: write the docs", "new_string": "done: write the docs"}
            ]}),
        ),
        ToolCall::new("3", "grep", json!({"pattern": "^done", "output_mode": "count"})),
    ];
    let results = toolbox.run_turn(&turn).await;
    for (call, out) in turn.iter().zip(&results) {
        println!("--- {} [{}]\n{}", call.name, out.status.as_str(), out.text_content());
    }
    if results.iter().any(|o| o.status != ToolStatus::Success) {
        return Err("a call failed (see above)".into());
    }
    println!("all calls succeeded; the workspace is {}", dir.display());
    Ok(())
}
