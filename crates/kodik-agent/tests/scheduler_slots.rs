//! The scheduler's concurrency limit (G1) with real commands (kodik-shell): commands waiting
//! for their processes do not keep the calls that inspect or stop them from running (S10).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use kodik_core::{ToolCall, ToolContext, ToolRegistry, Workspace};
use kodik_scheduler::{Scheduler, SchedulerConfig};
use serde_json::json;

/// Far longer than the test may take: a call that had to wait for these never ends in time.
const SLEEP: &str = "sleep 311.5";
const LIMIT: Duration = Duration::from_secs(60);

fn sleepers_running() -> usize {
    let out = std::process::Command::new("pgrep").args(["-f", SLEEP]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g1_s10_commands_waiting_for_their_processes_leave_slots_for_kill_terminal_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let mut registry = ToolRegistry::new();
    kodik_search::SearchToolset::new().register(&mut registry);
    kodik_shell::ShellToolset::new().register(&mut registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let scheduler = Scheduler::new(registry).with_config(SchedulerConfig { max_concurrency: 2, ..Default::default() });

    // As an MCP client sends them: overlapping requests on one stream.
    let stream = scheduler.stream(&cx);
    let shell = |id: &str| ToolCall::new(id, "shell", json!({"command": SLEEP, "timeout": 600_000}));
    let first = stream.start(shell("s1"));
    let second = stream.start(shell("s2"));
    let third = stream.start(shell("s3"));
    tokio::time::timeout(LIMIT, async {
        while sleepers_running() < 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the third command never started: the two waiting ones held every slot");

    let read = tokio::time::timeout(LIMIT, stream.call(ToolCall::new("r", "read_file", json!({"path": "a.txt"}))))
        .await
        .expect("read_file waited for the commands' slots");
    assert!(read.text_content().contains("hello"), "{}", read.text_content());
    for term in ["term-1", "term-2", "term-3"] {
        let kill = ToolCall::new(format!("k-{term}"), "kill_terminal", json!({"terminal_id": term}));
        let out = tokio::time::timeout(LIMIT, stream.call(kill)).await.expect("kill_terminal waited for a slot");
        assert!(out.text_content().contains("stopped by kill_terminal"), "{}", out.text_content());
    }
    for call in [first, second, third] {
        let out = tokio::time::timeout(LIMIT, call.output()).await.expect("a killed command's call never ended");
        assert!(out.text_content().contains("term-"), "{}", out.text_content());
    }
    assert_eq!(sleepers_running(), 0, "kill_terminal left a command running");
}
