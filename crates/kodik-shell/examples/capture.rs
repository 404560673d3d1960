//! Runs one command through the `shell` tool and prints a one-line summary of the result.
//! `benches/compare_shell.sh` runs it under `/usr/bin/time -v` to measure the runner's wall
//! time and peak memory against a plain `sh -c`.
//!
//! ```text
//! cargo run --release -p kodik-shell --example capture -- "head -c 1G /dev/zero | tr '\0' x" [SPOOL_DIR]
//! ```
//!
//! Without `SPOOL_DIR` the full output is saved in a temporary folder removed at the end;
//! with it, the saved output stays there (so a caller timing the run can delete it afterwards,
//! outside the measured time, as it does for a plain `> file` baseline).

use std::error::Error;

use kodik_core::{PreviewConfig, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_shell::ShellToolset;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let command = std::env::args().nth(1).ok_or("usage: capture COMMAND")?;
    let temp = tempfile::tempdir()?;
    let spool = std::env::args().nth(2).map_or_else(|| temp.path().to_path_buf(), std::path::PathBuf::from);
    let toolset = ShellToolset::new().preview(PreviewConfig::default().spool_in(spool));
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
