//! Runs one command through the `shell` tool and prints a one-line summary of the result, with
//! the CPU time and peak memory of this process alone (the runner, not the command it ran).
//! `benches/compare_shell.sh` runs it against a plain `sh -c '… | cat > file'` in the same run.
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
    let command = std::env::args().nth(1).ok_or("usage: capture COMMAND [SPOOL_DIR]")?;
    let temp = tempfile::tempdir()?;
    let spool = std::env::args().nth(2).map_or_else(|| temp.path().to_path_buf(), std::path::PathBuf::from);
    let toolset = ShellToolset::new().preview(PreviewConfig::default().spool_in(spool));
    let mut registry = ToolRegistry::new();
    toolset.register(&mut registry);
    let cx = ToolContext::new(Workspace::new(std::env::current_dir()?)?);
    let call = ToolCall::new("1", "shell", serde_json::json!({ "command": command, "timeout": 60000 }));
    let out = dispatch(&registry, &call, &cx).await;
    let (cpu, hwm) = own_cpu_and_peak()?;
    println!(
        "status={} exit_code={} output_bytes={} output_lines={} truncated={} running={} runner_cpu_s={cpu:.3} runner_peak_rss_kib={hwm}",
        out.status,
        out.meta["exit_code"],
        out.meta["output_bytes"],
        out.meta["output_lines"],
        out.meta["truncated"],
        out.meta["running"]
    );
    Ok(())
}

/// User + system CPU seconds of this process (not of the commands it ran, which are children)
/// and its peak resident memory in KiB, from /proc (Linux).
fn own_cpu_and_peak() -> Result<(f64, u64), Box<dyn Error>> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // Fields after the `(comm)`: state is field 3, utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').ok_or("unexpected /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields.get(11).ok_or("no utime")?.parse::<u64>()? + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    // The kernel reports these in USER_HZ, which is 100 on every Linux ABI.
    let cpu = ticks as f64 / 100.0;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmHWM")?;
    Ok((cpu, hwm))
}
