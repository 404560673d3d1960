//! kodik-shell's per-command overhead: `true` through the `shell` tool (spawn, pipe, pooled
//! watcher thread, preview, result) against `std::process::Command` running the same shell
//! with captured output, in the same run. Target: runner ≤ 1.3× the plain `SHELL -c true`.
//! Two like-for-like pairs: the runner pinned to `/bin/sh` vs `sh -c true`, and the default
//! runner (bash) vs `bash -c true`. The unlike pair (runner with bash vs `sh -c true`) is
//! bounded by bash itself, which starts about twice as slowly as dash's `sh`.
//! `runner_tool_call_*` call the tool itself (`Tool::call`): the runner's own overhead,
//! without kodik-core's `dispatch` (hooks, approval, and a task per call).
//! Criterion runs them one after the other, so a shared machine's changing load skews
//! the ratios; `cargo run --release -p kodik-shell --example spawn_overhead -- 500 /bin/sh`
//! alternates runner and plain runs and compares medians.
//! The 1 GiB capture comparison is `benches/compare_shell.sh`: hyperfine against the floor of a
//! capture that keeps every byte, `sh -c 'CMD | cat > file'`, plus CPU time and peak RSS.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::{Tool, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_shell::ShellToolset;

fn registry(toolset: &ShellToolset) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    toolset.register(&mut r);
    r
}

fn plain(shell: &str) {
    let out = Command::new(shell).args(["-c", "true"]).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success());
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let bash = ShellToolset::new();
    let sh = ShellToolset::new().shell("/bin/sh");
    let (bash_reg, sh_reg) = (registry(&bash), registry(&sh));
    let call = ToolCall::new("1", "shell", serde_json::json!({"command": "true"}));
    let run = |reg: &ToolRegistry| {
        let out = rt.block_on(dispatch(reg, &call, &cx));
        assert_eq!(out.meta["exit_code"], 0, "{}", out.text_content());
    };
    // The tool itself, without dispatch's hooks, approval and per-call task.
    let (bash_tool, sh_tool) = (bash.tools().0, sh.tools().0);
    let run_direct = |tool: &dyn Tool| {
        let out = rt.block_on(tool.call(call.args.clone(), &cx));
        assert_eq!(out.meta["exit_code"], 0, "{}", out.text_content());
    };

    let mut g = c.benchmark_group("shell_true");
    g.sample_size(60);
    g.bench_function("baseline_std_command_sh_c_true", |b| b.iter(|| plain("sh")));
    g.bench_function("runner_true_with_bash", |b| b.iter(|| run(&bash_reg)));
    g.bench_function("runner_true_with_sh", |b| b.iter(|| run(&sh_reg)));
    g.bench_function("runner_tool_call_true_with_sh", |b| b.iter(|| run_direct(&sh_tool)));
    g.bench_function("runner_tool_call_true_with_bash", |b| b.iter(|| run_direct(&bash_tool)));
    g.bench_function("baseline_std_command_bash_c_true", |b| b.iter(|| plain("bash")));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
