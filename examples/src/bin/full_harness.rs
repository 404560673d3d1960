//! Every crate of kodik-tools through `Toolbox::builder`: the harness plans what a request
//! offers per mode and model, the scheduler runs a model turn's calls concurrently, and the
//! edit, search, shell and code-mode tools do the work in a scratch workspace.
//!
//! `cargo run -p kodik-examples --bin full_harness [DIR]` (default DIR: a fresh scratch folder).

use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::core::{Event, EventSink, ToolCall, ToolStatus};
use kodik_tools::harness::Mode;
use serde_json::json;

/// Progress of long calls and code mode's nested calls arrive here while they run.
struct PrintEvents;

impl EventSink for PrintEvents {
    fn emit(&self, event: Event) {
        eprintln!("event: {}", serde_json::to_string(&event).unwrap_or_default());
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("kodik-full-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let toolbox = Toolbox::builder().workspace(&dir).events(Arc::new(PrintEvents)).build()?;

    // What a request offers depends on mode and model (G10-G12): OpenAI models get apply_patch
    // instead of create/edit/delete_file, and Code mode defers the read/search tools.
    for model in ["gpt-5", "claude-sonnet-4-5"] {
        let plan = toolbox.plan(Mode::Code, model);
        let offered: Vec<&str> = plan.tools.iter().map(|t| t.name.as_str()).collect();
        let deferred: Vec<&str> = plan.deferred.iter().map(|t| t.name.as_str()).collect();
        println!("{model}: offers {}; deferred {}", offered.join(" "), deferred.join(" "));
    }

    // Turn 1 writes; turn 2 reads, searches, runs and scripts concurrently over the result.
    let write = [ToolCall::new(
        "w1",
        "apply_patch",
        json!({"input":
        "*** Begin Patch\n*** Add File: src/greet.sh\n+greet() { echo \"hello, $1\"; }\n*** End Patch\n"}),
    )];
    let look = [
        ToolCall::new("r1", "read_file", json!({"path": "src/greet.sh"})),
        ToolCall::new("r2", "glob", json!({"pattern": "**/*.sh"})),
        ToolCall::new("r3", "grep", json!({"pattern": "hello", "output_mode": "content"})),
        ToolCall::new("r4", "shell", json!({"command": ". ./src/greet.sh && greet world"})),
        ToolCall::new(
            "r5",
            "codemode",
            json!({"code":
            "const files = await tools.glob({ pattern: '**/*' });\nreturn `${files.split('\\n').length} file(s)`;"}),
        ),
    ];
    let mut failed = 0;
    for turn in [&write[..], &look[..]] {
        let results = toolbox.run_turn(turn).await;
        for (call, out) in turn.iter().zip(&results) {
            println!("--- {} {} [{}]\n{}", call.id, call.name, out.status.as_str(), out.text_content().trim_end());
            failed += usize::from(out.status != ToolStatus::Success);
        }
    }
    if failed > 0 {
        return Err(format!("{failed} call(s) failed").into());
    }
    println!("every call succeeded in {}", dir.display());
    Ok(())
}
