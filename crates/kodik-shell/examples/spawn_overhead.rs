//! The per-command overhead of the `shell` tool, measured robustly on a busy machine: `true`
//! through the tool and `std::process::Command` running `SHELL -c true` (output captured) are
//! run alternately, so both see the same load, and the medians are compared. The criterion
//! bench (`cargo bench -p kodik-benches --bench shell`) measures the same pair one after the
//! other, which a shared machine's changing load can skew.
//!
//! ```text
//! cargo run --release -p kodik-shell --example spawn_overhead -- [RUNS] [SHELL] [direct]
//! ```
//!
//! By default the call goes through kodik-core's `dispatch` (argument check, hooks, approval,
//! and the tool polled in place with its panics caught, as a host calls it); `direct` calls the tool itself
//! (`Tool::call`), which is the runner's own overhead.

use std::error::Error;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kodik_core::{Tool, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_shell::ShellToolset;

fn quantile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q) as usize]
}

fn main() -> Result<(), Box<dyn Error>> {
    let runs: usize = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(500);
    let shell = std::env::args().nth(2).unwrap_or_else(|| "/bin/sh".into());
    let direct = std::env::args().nth(3).is_some_and(|a| a == "direct");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let dir = tempfile::tempdir()?;
    let cx = ToolContext::new(Workspace::new(dir.path())?);
    let toolset = ShellToolset::new().shell(shell.clone());
    let mut registry = ToolRegistry::new();
    toolset.register(&mut registry);
    let call = ToolCall::new("1", "shell", serde_json::json!({"command": "true"}));
    let (shell_tool, _, _) = toolset.tools();
    let (mut runner, mut plain) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for i in 0..=runs {
        let t = Instant::now();
        let out = if direct {
            rt.block_on(shell_tool.call(call.args.clone(), &cx))
        } else {
            rt.block_on(dispatch(&registry, &call, &cx))
        };
        let took = t.elapsed();
        if out.meta["exit_code"] != 0 {
            return Err(format!("the runner failed: {}", out.text_content()).into());
        }
        let t = Instant::now();
        let status = Command::new(&shell).args(["-c", "true"]).stdin(Stdio::null()).output()?.status;
        let took_plain = t.elapsed();
        if !status.success() {
            return Err(format!("{shell} -c true failed").into());
        }
        // The first round starts the runner's helper process and threads.
        if i > 0 {
            runner.push(took);
            plain.push(took_plain);
        }
    }
    for q in [0.25, 0.5] {
        let (r, p) = (quantile(&mut runner, q), quantile(&mut plain, q));
        println!(
            "{shell}, {runs} alternating runs, {}, p{:.0}: runner {:.3} ms, {shell} -c true {:.3} ms, ratio {:.2}",
            if direct { "Tool::call" } else { "dispatch" },
            q * 100.0,
            r.as_secs_f64() * 1e3,
            p.as_secs_f64() * 1e3,
            r.as_secs_f64() / p.as_secs_f64()
        );
    }
    Ok(())
}
