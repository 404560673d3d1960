//! One model turn through the scheduler, with test tools that record what happened when.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{
    Approval, ApprovalRequest, Approver, Effect, Resource, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry,
    ToolSpec, ToolStatus, TypedTool, Workspace,
};
use kodik_scheduler::{Scheduler, SchedulerConfig};
use serde::Deserialize;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, s: impl Into<String>) {
        self.0.lock().unwrap().push(s.into());
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Deserialize)]
struct WaitArgs {
    tag: String,
    #[serde(default)]
    ms: u64,
    #[serde(default)]
    barrier: bool,
    #[serde(default)]
    panic: bool,
    #[serde(default)]
    output_bytes: usize,
    /// Answer with how many calls of this turn had finished when this one started.
    #[serde(default)]
    report_finished: bool,
    /// A file this call reads (declared for ordering, not opened).
    #[serde(default)]
    path: Option<String>,
}

/// Logs `start:TAG`, optionally waits on a shared barrier or sleeps, logs `end:TAG`.
struct Wait {
    spec: ToolSpec,
    log: Arc<Log>,
    barrier: Arc<tokio::sync::Barrier>,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

#[async_trait]
impl TypedTool for Wait {
    type Args = WaitArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn reads(&self, a: &WaitArgs, ws: &Workspace) -> Vec<Resource> {
        a.path.iter().map(|p| ws.resource(p)).collect()
    }
    async fn run(&self, a: WaitArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.log.push(format!("start:{}", a.tag));
        if a.report_finished {
            return Ok(ToolOutput::text(cx.turn.finished_count().to_string()));
        }
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let _dec = Dec(self.running.clone());
        if a.panic {
            panic!("tool bug");
        }
        if a.barrier {
            tokio::time::timeout(Duration::from_secs(5), self.barrier.wait())
                .await
                .map_err(|_| ToolError::failed("barrier not reached: calls did not run concurrently"))?;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(a.ms)) => {}
            () = cx.cancel.cancelled() => {
                self.log.push(format!("cancelled:{}", a.tag));
                return Err(ToolError::Cancelled);
            }
        }
        self.log.push(format!("end:{}", a.tag));
        Ok(ToolOutput::text(if a.output_bytes > 0 { "y".repeat(a.output_bytes) } else { a.tag }))
    }
}

struct Dec(Arc<AtomicUsize>);
impl Drop for Dec {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Deserialize)]
struct AppendArgs {
    path: String,
    line: String,
    #[serde(default)]
    ms: u64,
}

/// Appends a line to a file after an optional delay; declares the file as its resource.
struct Append {
    spec: ToolSpec,
    log: Arc<Log>,
}

#[async_trait]
impl TypedTool for Append {
    type Args = AppendArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn resources(&self, a: &AppendArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&a.path)]
    }
    async fn run(&self, a: AppendArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.log.push(format!("start:{}", a.line));
        let path = cx.workspace.resolve(&a.path)?;
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(a.ms)).await;
        text.push_str(&a.line);
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| ToolError::io("writing", &path, e))?;
        self.log.push(format!("end:{}", a.line));
        Ok(ToolOutput::text("appended"))
    }
}

#[derive(Deserialize)]
struct CommandArgs {
    tag: String,
    ms: u64,
}

/// A command that may change any file (as the shell declares): sleeps, logging start and end.
struct Command {
    spec: ToolSpec,
    log: Arc<Log>,
}

#[async_trait]
impl TypedTool for Command {
    type Args = CommandArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn resources(&self, _a: &CommandArgs, _ws: &Workspace) -> Vec<Resource> {
        vec![Resource::any_file()]
    }
    async fn run(&self, a: CommandArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.log.push(format!("start:{}", a.tag));
        tokio::time::sleep(Duration::from_millis(a.ms)).await;
        self.log.push(format!("end:{}", a.tag));
        Ok(ToolOutput::text(a.tag))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scheduler: Scheduler,
    cx: ToolContext,
    log: Arc<Log>,
    peak: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
}

fn fixture(config: SchedulerConfig, barrier_size: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let log = Arc::new(Log::default());
    let peak = Arc::new(AtomicUsize::new(0));
    let mut reg = ToolRegistry::new();
    let barrier = Arc::new(tokio::sync::Barrier::new(barrier_size));
    let running = Arc::new(AtomicUsize::new(0));
    for (name, effect) in [("read", Effect::ReadOnly), ("ask", Effect::Conversation), ("net", Effect::Network)] {
        reg.register(Wait {
            spec: ToolSpec::new(name, "test", json!({"type": "object"}), effect),
            log: log.clone(),
            barrier: barrier.clone(),
            running: running.clone(),
            peak: peak.clone(),
        });
    }
    reg.register(Command {
        spec: ToolSpec::new("cmd", "test", json!({"type": "object"}), Effect::Process),
        log: log.clone(),
    });
    reg.register(Append {
        spec: ToolSpec::new("append", "test", json!({"type": "object"}), Effect::MutatesFiles),
        log: log.clone(),
    });
    let cx = ToolContext::new(Workspace::new(&root).unwrap());
    Fixture { _dir: dir, root, scheduler: Scheduler::new(reg).with_config(config), cx, log, peak, running }
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

async fn wait_for(log: &Log, entry: &str) {
    tokio::time::timeout(LIMIT, async {
        while !log.all().iter().any(|e| e == entry) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{entry}` never happened; log: {:?}", log.all()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g1_independent_calls_of_every_kind_run_concurrently() {
    let f = fixture(SchedulerConfig::default(), 8);
    // Each call waits on one barrier of 8: the turn only completes if all 8 run at once.
    let calls = (0..8).map(|i| {
        let name = ["read", "ask", "net"][i % 3];
        call(&format!("c{i}"), name, json!({"tag": format!("t{i}"), "barrier": true}))
    });
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    assert!(outs.iter().all(|o| o.status == ToolStatus::Success), "{outs:?}");
    assert_eq!(f.peak.load(Ordering::SeqCst), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g1_concurrency_limit_is_respected() {
    let f = fixture(SchedulerConfig { max_concurrency: 2, ..Default::default() }, 1);
    let calls = (0..6).map(|i| call(&format!("c{i}"), "read", json!({"tag": format!("t{i}"), "ms": 30})));
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    assert!(outs.iter().all(|o| o.is_success()));
    assert_eq!(f.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_five_spellings_of_one_file_keep_call_order_while_other_files_run_freely() {
    let f = fixture(SchedulerConfig::default(), 1);
    std::fs::create_dir_all(f.root.join("dir")).unwrap();
    std::fs::write(f.root.join("a.txt"), "").unwrap();
    std::os::unix::fs::symlink(f.root.join("a.txt"), f.root.join("link.txt")).unwrap();
    let abs = f.root.join("a.txt").display().to_string();
    let spellings = ["a.txt", "./a.txt", "dir/../a.txt", abs.as_str(), "link.txt"];
    let mut turn = f.scheduler.turn(&f.cx);
    // Decreasing delays: without ordering, later calls would finish first.
    for (i, p) in spellings.iter().enumerate() {
        turn.push(call(&format!("m{i}"), "append", json!({"path": p, "line": format!("line{i}"), "ms": 50 - i * 10})));
    }
    turn.push(call("other", "append", json!({"path": "b.txt", "line": "other", "ms": 0})));
    let outs = tokio::time::timeout(LIMIT, turn.results()).await.unwrap();
    assert!(outs.iter().all(|o| o.is_success()), "{outs:?}");
    assert_eq!(std::fs::read_to_string(f.root.join("a.txt")).unwrap(), "line0\nline1\nline2\nline3\nline4\n");
    let log = f.log.all();
    let pos = |e: &str| log.iter().position(|x| x == e).unwrap();
    assert!(pos("end:other") < pos("end:line0"), "an unrelated file did not wait: {log:?}");
    for i in 0..4 {
        assert!(pos(&format!("end:line{i}")) < pos(&format!("start:line{}", i + 1)), "{log:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_one_hundred_edits_to_one_file_stay_in_call_order() {
    let f = fixture(SchedulerConfig::default(), 1);
    let calls = (0..100).map(|i| call(&format!("e{i}"), "append", json!({"path": "same.txt", "line": i.to_string()})));
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    assert!(outs.iter().all(|o| o.is_success()));
    let want: String = (0..100).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(f.root.join("same.txt")).unwrap(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_e2_an_edit_waits_for_earlier_reads_of_its_file_while_reads_of_one_file_run_together() {
    // The reads meet at a barrier of 2: they only succeed if they run at the same time.
    let f = fixture(SchedulerConfig::default(), 2);
    let mut turn = f.scheduler.turn(&f.cx);
    turn.push(call("r1", "read", json!({"tag": "r1", "path": "a.txt", "barrier": true, "ms": 80})));
    turn.push(call("r2", "read", json!({"tag": "r2", "path": "./a.txt", "barrier": true, "ms": 40})));
    turn.push(call("w", "append", json!({"path": "a.txt", "line": "w"})));
    turn.push(call("r3", "read", json!({"tag": "r3", "path": "a.txt"})));
    turn.push(call("other", "read", json!({"tag": "other", "path": "b.txt"})));
    let outs = tokio::time::timeout(LIMIT, turn.results()).await.unwrap();
    assert!(outs.iter().all(|o| o.is_success()), "{outs:?}");
    let log = f.log.all();
    let pos = |e: &str| log.iter().position(|x| x == e).unwrap_or_else(|| panic!("no `{e}` in {log:?}"));
    assert!(pos("end:r1") < pos("start:w") && pos("end:r2") < pos("start:w"), "the edit overtook a read: {log:?}");
    assert!(pos("end:w") < pos("start:r3"), "a later read overtook the edit: {log:?}");
    assert!(pos("end:other") < pos("end:r1"), "a read of another file waited: {log:?}");
}

/// Denies calls whose tag is "no"; holds calls tagged "slow" until released.
struct TestApprover {
    release: tokio::sync::Notify,
    asked: AtomicUsize,
}

#[async_trait]
impl Approver for TestApprover {
    async fn approve(&self, r: &ApprovalRequest) -> Approval {
        self.asked.fetch_add(1, Ordering::SeqCst);
        match r.args["tag"].as_str() {
            Some("no") => Approval::Denied("the user said no".into()),
            Some("slow") => {
                self.release.notified().await;
                Approval::Approved
            }
            _ => Approval::Approved,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g3_a_call_waiting_for_approval_blocks_nothing_and_a_denied_call_does_not_run() {
    let mut f = fixture(SchedulerConfig { max_concurrency: 1, ..Default::default() }, 1);
    let approver = Arc::new(TestApprover { release: tokio::sync::Notify::new(), asked: AtomicUsize::new(0) });
    f.cx.approver = approver.clone();
    let mut turn = f.scheduler.turn(&f.cx);
    turn.push(call("1", "read", json!({"tag": "slow"})));
    turn.push(call("2", "read", json!({"tag": "no"})));
    turn.push(call("3", "read", json!({"tag": "free"})));
    // With one slot, "free" can only finish if the call awaiting approval holds no slot.
    wait_for(&f.log, "end:free").await;
    approver.release.notify_one();
    let outs = tokio::time::timeout(LIMIT, turn.results()).await.unwrap();
    let st: Vec<_> = outs.iter().map(|o| o.status).collect();
    assert_eq!(st, [ToolStatus::Success, ToolStatus::Denied, ToolStatus::Success]);
    assert!(outs[1].text_content().contains("the user said no"));
    assert!(!f.log.all().contains(&"start:no".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g4_streaming_start_reads_start_at_once_mutations_and_everything_after_wait_for_finish() {
    let f = fixture(SchedulerConfig::default(), 1);
    let mut turn = f.scheduler.turn(&f.cx);
    turn.push(call("r1", "read", json!({"tag": "r1"})));
    wait_for(&f.log, "end:r1").await;
    turn.push(call("m1", "append", json!({"path": "x.txt", "line": "m1"})));
    turn.push(call("r2", "read", json!({"tag": "r2"})));
    turn.push(call("q1", "ask", json!({"tag": "q1"})));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(f.log.all(), ["start:r1", "end:r1"], "nothing after the mutation starts before finish()");
    turn.finish();
    let outs = tokio::time::timeout(LIMIT, turn.results()).await.unwrap();
    assert!(outs.iter().all(|o| o.is_success()));
    assert!(f.log.all().contains(&"end:r2".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g5_results_come_back_in_call_order_whatever_order_calls_finish_in() {
    let f = fixture(SchedulerConfig::default(), 1);
    let calls = [300, 10, 150, 0]
        .iter()
        .enumerate()
        .map(|(i, ms)| call(&i.to_string(), "read", json!({"tag": format!("t{i}"), "ms": ms})));
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    let texts: Vec<String> = outs.iter().map(|o| o.text_content()).collect();
    assert_eq!(texts, ["t0", "t1", "t2", "t3"]);
    let log = f.log.all();
    assert!(log.iter().position(|e| e == "end:t3") < log.iter().position(|e| e == "end:t0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g6_abort_mid_turn_cancels_started_calls_and_never_starts_the_rest() {
    let f = fixture(SchedulerConfig::default(), 1);
    let mut turn = f.scheduler.turn(&f.cx);
    turn.push(call("1", "read", json!({"tag": "long", "ms": 60_000})));
    turn.push(call("2", "append", json!({"path": "never.txt", "line": "x"})));
    wait_for(&f.log, "start:long").await;
    turn.abort();
    let outs = tokio::time::timeout(LIMIT, turn.results()).await.unwrap();
    assert!(outs.iter().all(|o| o.status == ToolStatus::Cancelled), "{outs:?}");
    // The started call is stopped (its task observed the cancellation or was dropped).
    tokio::time::timeout(LIMIT, async {
        while f.running.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the started call kept running");
    assert!(!f.log.all().iter().any(|e| e == "end:long"));
    assert!(!f.root.join("never.txt").exists());
    assert!(!f.log.all().iter().any(|e| e == "start:x"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g7_repeated_identical_calls_each_get_their_own_serializable_result() {
    let f = fixture(SchedulerConfig::default(), 1);
    let calls = (0..3).map(|i| call(&format!("same{i}"), "read", json!({"tag": "same"})));
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    assert_eq!(outs.len(), 3);
    for o in &outs {
        let back: ToolOutput = serde_json::from_str(&serde_json::to_string(o).unwrap()).unwrap();
        assert_eq!(&back, o);
    }
    assert_eq!(f.log.all().iter().filter(|e| *e == "end:same").count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timeouts_give_timed_out_and_panics_stay_in_their_call() {
    let f = fixture(SchedulerConfig { call_timeout: Some(Duration::from_secs(3)), ..Default::default() }, 1);
    let calls = [
        call("slow", "read", json!({"tag": "slow", "ms": 60_000})),
        call("bug", "read", json!({"tag": "bug", "panic": true})),
        call("fine", "read", json!({"tag": "fine"})),
    ];
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(calls, &f.cx)).await.unwrap();
    let st: Vec<_> = outs.iter().map(|o| o.status).collect();
    assert_eq!(st, [ToolStatus::TimedOut, ToolStatus::Error, ToolStatus::Success]);
    assert!(outs[1].text_content().contains("tool bug"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g9_an_over_large_result_shows_head_and_tail_and_the_saved_full_output() {
    let f = fixture(SchedulerConfig { max_output_bytes: 1000, ..Default::default() }, 1);
    let outs = f.scheduler.run([call("big", "read", json!({"tag": "big", "output_bytes": 50_000}))], &f.cx).await;
    let o = &outs[0];
    assert!(o.text_content().len() < 1500);
    assert!(o.text_content().contains("bytes omitted from the middle"));
    let full = o.full_output.clone().expect("saved");
    assert_eq!(std::fs::read(&full).unwrap().len(), 50_000);
    std::fs::remove_file(full).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s4_tools_learn_when_another_call_of_the_turn_finished() {
    let f = fixture(SchedulerConfig::default(), 1);
    let mut turn = f.scheduler.turn(&f.cx);
    let mut rx = turn.signals().subscribe();
    turn.push(call("1", "read", json!({"tag": "quick"})));
    tokio::time::timeout(LIMIT, rx.changed()).await.unwrap().unwrap();
    assert_eq!(*rx.borrow(), 1);
    turn.results().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g1_g2_a_call_stream_runs_overlapping_calls_concurrently_and_same_file_calls_in_order() {
    let f = fixture(SchedulerConfig::default(), 3);
    let stream = Arc::new(f.scheduler.stream(&f.cx));
    let mut tasks = Vec::new();
    for i in 0..3 {
        let s = stream.clone();
        tasks.push(tokio::spawn(async move {
            s.call(call(&i.to_string(), "read", json!({"tag": i.to_string(), "barrier": true}))).await
        }));
    }
    for t in tasks {
        assert!(tokio::time::timeout(LIMIT, t).await.unwrap().unwrap().is_success());
    }
    let a = stream.call(call("a", "append", json!({"path": "s.txt", "line": "first", "ms": 50})));
    let b = stream.call(call("b", "append", json!({"path": "./s.txt", "line": "second"})));
    let (a, b) = tokio::join!(a, b);
    assert!(a.is_success() && b.is_success());
    assert_eq!(std::fs::read_to_string(f.root.join("s.txt")).unwrap(), "first\nsecond\n");
}

/// G2, G4: in a turn, a command that may change any file holds up the turn's later file change;
/// in a stream (an MCP connection, which several agents may share) it does not, so one agent's
/// long command does not stall another's edits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_g4_a_command_holds_up_later_file_changes_in_a_turn_but_not_in_a_stream() {
    let f = fixture(SchedulerConfig::default(), 1);
    let turn = [
        call("c", "cmd", json!({"tag": "cmd", "ms": 300})),
        call("a", "append", json!({"path": "t.txt", "line": "turn"})),
    ];
    let outs = tokio::time::timeout(LIMIT, f.scheduler.run(turn, &f.cx)).await.unwrap();
    assert!(outs.iter().all(ToolOutput::is_success), "{outs:?}");
    let at = |entry: &str| f.log.all().iter().position(|e| e == entry).unwrap_or_else(|| panic!("no {entry}"));
    assert!(at("end:cmd") < at("start:turn"), "{:?}", f.log.all());

    let stream = f.scheduler.stream(&f.cx);
    let c = stream.start(call("c2", "cmd", json!({"tag": "cmd2", "ms": 300})));
    let a = stream.start(call("a2", "append", json!({"path": "t.txt", "line": "stream"})));
    let (a, c) = tokio::time::timeout(LIMIT, async { tokio::join!(a.output(), c.output()) }).await.unwrap();
    assert!(a.is_success() && c.is_success());
    assert!(at("end:stream") < at("end:cmd2"), "the edit waited for the command: {:?}", f.log.all());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_a_stream_call_takes_its_place_when_started_not_when_first_awaited() {
    let f = fixture(SchedulerConfig::default(), 1);
    let stream = f.scheduler.stream(&f.cx);
    // Started in this order, awaited the other way round: the order they were started in wins.
    let first = stream.start(call("a", "append", json!({"path": "s.txt", "line": "first", "ms": 50})));
    let second = stream.start(call("b", "append", json!({"path": "./s.txt", "line": "second"})));
    let (second, first) =
        tokio::time::timeout(LIMIT, async { tokio::join!(second.output(), first.output()) }).await.unwrap();
    assert!(first.is_success() && second.is_success());
    assert_eq!(std::fs::read_to_string(f.root.join("s.txt")).unwrap(), "first\nsecond\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s4_a_stream_call_arriving_while_none_runs_starts_a_new_burst() {
    let f = fixture(SchedulerConfig::default(), 1);
    let stream = f.scheduler.stream(&f.cx);
    for i in 0..3 {
        assert!(stream.call(call(&i.to_string(), "read", json!({"tag": "x"}))).await.is_success());
    }
    let seen = stream.call(call("probe", "read", json!({"tag": "probe", "report_finished": true}))).await;
    assert_eq!(seen.text_content(), "0", "calls that finished before this one are not part of its burst");

    // While a call runs, a finishing neighbour is "another call of this turn".
    let long = stream.call(call("long", "read", json!({"tag": "long", "ms": 400})));
    let burst = async {
        wait_for(&f.log, "start:long").await;
        assert!(stream.call(call("quick", "read", json!({"tag": "quick"}))).await.is_success());
        stream.call(call("probe2", "read", json!({"tag": "probe2", "report_finished": true}))).await
    };
    let (long, seen) = tokio::time::timeout(LIMIT, async { tokio::join!(long, burst) }).await.unwrap();
    assert!(long.is_success());
    assert_eq!(seen.text_content(), "1");
}
