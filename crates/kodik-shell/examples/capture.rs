//! Runs one command through the `shell` tool and prints a one-line summary of the result.
//! `benches/compare_shell.sh` runs it under `/usr/bin/time -v` to measure the runner's wall
//! time and peak memory against a plain `sh -c`.
//!
//! ```text
//! cargo run --release -p kodik-shell --example capture -- "head -c 1G /dev/zero | tr '\0' x"
//! ```

use std::error::Error;

use kodik_core::{PreviewConfig, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_shell::ShellToolset;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let command = std::env::args().nth(1).ok_or("usage: capture COMMAND")?;
    // The spool (the full output) goes to a folder removed at the end.
    let spool = tempfile::tempdir()?;
    let toolset = ShellToolset::new().preview(PreviewConfig::default().spool_in(spool.path()));
    let mut registry = ToolRegistry::new();
    toolset.register(&mut registry);
    let cx = ToolContext::new(Workspace::new(std::env::current_dir()?)?);
    let call = ToolCall::new("1", "shell", serde_json::json!({ "command": command, "timeout": 60000 }));
    let out = dispatch(&registry, &call, &cx).await;
    println!(
        "status={} exit_code={} output_bytes={} truncated={} running={}",
        out.status, out.meta["exit_code"], out.meta["output_bytes"], out.meta["truncated"], out.meta["running"]
    );
    Ok(())
}
