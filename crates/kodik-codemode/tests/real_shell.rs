//! Code mode over the real `shell` tool: what happens to a command when the script that started
//! it ends without waiting for it. Every test is bounded by a timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use kodik_codemode::{CodeModeConfig, CodeModeTool};
use kodik_core::{Tool, ToolContext, ToolOutput, ToolRegistry, Workspace};
use kodik_shell::ShellToolset;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

struct Setup {
    tool: CodeModeTool,
    cx: ToolContext,
    dir: tempfile::TempDir,
    /// Kept alive so the terminal table (and a command it failed to stop) outlives the script.
    _shell: ShellToolset,
}

fn setup(timeout: Duration) -> Setup {
    let shell = ShellToolset::new().kill_grace(Duration::from_millis(300));
    let mut registry = ToolRegistry::new();
    shell.register(&mut registry);
    let dir = tempfile::tempdir().unwrap();
    let tool = CodeModeTool::new(CodeModeConfig::default().timeout(timeout), registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    Setup { tool, cx, dir, _shell: shell }
}

async fn run(s: &Setup, code: &str) -> ToolOutput {
    tokio::time::timeout(LIMIT, s.tool.call(json!({ "code": code }), &s.cx)).await.expect("the script hung")
}

/// Whether process `pid` still runs (a zombie has ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// The pid the command wrote to `file`, waiting for it to appear.
async fn pid_in(file: &Path) -> u32 {
    let t = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to 5 s for `pid` to end; whether it did.
async fn ended(pid: u32) -> bool {
    let t = Instant::now();
    while alive(pid) {
        if t.elapsed() > Duration::from_secs(5) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

const COMMAND: &str = "echo $$ > pid.txt; exec sleep 289";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_g6_a_command_running_when_the_script_times_out_is_stopped() {
    let s = setup(Duration::from_secs(2));
    let code = format!("await tools.shell({{command: {COMMAND:?}, timeout_ms: 60000}}); return 'waited'");
    let out = run(&s, &code).await;
    assert_eq!(out.meta["codemode"]["error_kind"], "TimeoutExceeded", "{}", out.text_content());
    let pid = pid_in(&s.dir.path().join("pid.txt")).await;
    assert!(ended(pid).await, "`sleep 289` (pid {pid}) still runs after the script's calls were cancelled");
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "cancelled", "{}", out.meta);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_g6_a_command_running_when_the_script_throws_is_stopped() {
    let s = setup(Duration::from_secs(30));
    let code = format!(
        "tools.shell({{command: {COMMAND:?}, timeout_ms: 60000}});\nawait sleep(300);\nthrow new Error('gave up')"
    );
    let out = run(&s, &code).await;
    assert_eq!(out.meta["codemode"]["error_kind"], "ExecutionFailure", "{}", out.text_content());
    let pid = pid_in(&s.dir.path().join("pid.txt")).await;
    assert!(ended(pid).await, "`sleep 289` (pid {pid}) still runs after the script failed");
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "cancelled", "{}", out.meta);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_a_command_the_script_sent_to_the_background_keeps_running_after_it() {
    // A command that outlived its own timeout was handed to the script as a background
    // terminal: the script ended normally, so it is the model's to read or stop.
    let s = setup(Duration::from_secs(30));
    let code = format!("return await tools.shell({{command: {COMMAND:?}, timeout_ms: 300}})");
    let out = run(&s, &code).await;
    assert!(out.text_content().contains("term-1"), "{}", out.text_content());
    let pid = pid_in(&s.dir.path().join("pid.txt")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(alive(pid), "the background command was stopped");
    drop(s);
    assert!(ended(pid).await, "dropping the toolset stops it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_k11_an_unawaited_command_at_the_time_limit_is_stopped_and_recorded_cancelled() {
    let s = setup(Duration::from_secs(2));
    let code = format!("tools.shell({{command: {COMMAND:?}, timeout_ms: 60000}});\nreturn 'started'");
    let out = run(&s, &code).await;
    let text = out.text_content();
    assert!(text.contains("had not finished at the time limit and were cancelled: shell"), "{text}");
    let pid = pid_in(&s.dir.path().join("pid.txt")).await;
    assert!(ended(pid).await, "`sleep 289` (pid {pid}) still runs after the note said it was cancelled");
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "cancelled", "{}", out.meta);
}
