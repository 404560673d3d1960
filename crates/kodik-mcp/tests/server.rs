//! The MCP server in process, against rmcp's own client over an in-memory duplex pipe.
#![allow(deprecated)] // MCP logging is deprecated by SEP-2577 in rmcp but still what clients show.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may unwrap too

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::events::TerminalEvent;
use kodik_core::{
    Effect, Event, Resource, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, ToolStatus, Workspace,
};
use kodik_mcp::McpServer;
use kodik_scheduler::Scheduler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio::sync::{Barrier, mpsc};

const LIMIT: Duration = Duration::from_secs(10);

fn spec(name: &str, effect: Effect) -> ToolSpec {
    ToolSpec::new(
        name,
        format!("Test tool {name}."),
        json!({"type": "object", "properties": {"text": {"type": "string"}, "path": {"type": "string"}}}),
        effect,
    )
}

/// Two calls must be inside it at once to get through: proves they run concurrently.
struct Pair {
    spec: ToolSpec,
    barrier: Arc<Barrier>,
}

#[async_trait]
impl Tool for Pair {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _args: Value, _cx: &ToolContext) -> ToolOutput {
        self.barrier.wait().await;
        ToolOutput::text("met")
    }
}

/// Echoes `text`; requires it.
struct Echo(ToolSpec);

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        match args.get("text") {
            Some(Value::String(_)) => Ok(()),
            _ => Err(ToolError::InvalidInput {
                tool: "echo".into(),
                field: Some("text".into()),
                message: "`text` (a string) is required".into(),
            }),
        }
    }
    async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
        ToolOutput::text(args["text"].as_str().unwrap_or_default()).with_meta(json!({"echoed": true}))
    }
}

/// Appends `text` to a log after an optional hold; mutates the file named by `path` (G2).
struct Append {
    spec: ToolSpec,
    log: Arc<Mutex<Vec<String>>>,
    started: mpsc::UnboundedSender<String>,
    release: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Tool for Append {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(args["path"].as_str().unwrap_or("x"))]
    }
    async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
        let text = args["text"].as_str().unwrap_or_default().to_owned();
        let _ = self.started.send(text.clone());
        if text == "hold" {
            self.release.notified().await;
        }
        self.log.lock().unwrap().push(text.clone());
        ToolOutput::text(text)
    }
}

/// Runs until cancelled and records when it stops.
struct WaitCancel {
    spec: ToolSpec,
    cancelled: Arc<AtomicBool>,
    started: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Tool for WaitCancel {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _args: Value, cx: &ToolContext) -> ToolOutput {
        // The scheduler may stop the call by dropping it rather than waiting for it to notice.
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let _guard = SetOnDrop(Arc::clone(&self.cancelled));
        self.started.notify_one();
        cx.cancel.cancelled().await;
        ToolError::Cancelled.into_output()
    }
}

/// Emits a terminal event like a background shell command settling.
struct Emit(ToolSpec);

#[async_trait]
impl Tool for Emit {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value, cx: &ToolContext) -> ToolOutput {
        cx.events.emit(Event::Terminal(TerminalEvent {
            terminal_id: "t1".into(),
            command: "sleep 6; echo done".into(),
            exit_code: Some(0),
            status: ToolStatus::Success,
            duration_ms: 6000,
            unread_output: "done\n".into(),
            full_output: None,
        }));
        ToolOutput::text("emitted")
    }
}

/// How many calls of its turn had finished when it started (the shell's S4 input).
struct Probe(ToolSpec);

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value, cx: &ToolContext) -> ToolOutput {
        ToolOutput::text(cx.turn.finished_count().to_string())
    }
}

/// Reports progress, then finishes once released.
struct Progress {
    spec: ToolSpec,
    release: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Tool for Progress {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _args: Value, cx: &ToolContext) -> ToolOutput {
        cx.events.emit(Event::Progress { call_id: cx.call_id.clone(), message: "halfway".into() });
        self.release.notified().await;
        ToolOutput::text("finished")
    }
}

/// A client that hands every logging and progress notification to a channel.
struct LogClient(
    mpsc::UnboundedSender<LoggingMessageNotificationParam>,
    mpsc::UnboundedSender<ProgressNotificationParam>,
);

impl ClientHandler for LogClient {
    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _cx: NotificationContext<RoleClient>) {
        let _ = self.0.send(params);
    }
    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        let _ = self.1.send(params);
    }
}

struct Fixture {
    client: RunningService<RoleClient, LogClient>,
    logs: mpsc::UnboundedReceiver<LoggingMessageNotificationParam>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    progress_release: Arc<tokio::sync::Notify>,
    append_log: Arc<Mutex<Vec<String>>>,
    append_started: mpsc::UnboundedReceiver<String>,
    release: Arc<tokio::sync::Notify>,
    cancelled: Arc<AtomicBool>,
    wait_started: Arc<tokio::sync::Notify>,
    _dir: tempfile::TempDir,
}

/// The offered list, deliberately not sorted: the server must keep the given order.
const OFFERED: [&str; 8] = ["pair", "echo", "append", "wait_cancel", "emit", "append_other", "probe", "progress"];

async fn fixture() -> Fixture {
    fixture_with(|server| server).await
}

/// [`fixture`] with the server changed by `adjust` before it serves.
async fn fixture_with(adjust: impl FnOnce(McpServer) -> McpServer) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (started_tx, started_rx) = mpsc::unbounded_channel();
    let append_log = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Notify::new());
    let cancelled = Arc::new(AtomicBool::new(false));
    let wait_started = Arc::new(tokio::sync::Notify::new());
    let mut registry = ToolRegistry::new();
    registry.register(Pair { spec: spec("pair", Effect::ReadOnly), barrier: Arc::new(Barrier::new(2)) });
    registry.register(Echo(spec("echo", Effect::ReadOnly)));
    for name in ["append", "append_other"] {
        registry.register(Append {
            spec: spec(name, Effect::MutatesFiles),
            log: Arc::clone(&append_log),
            started: started_tx.clone(),
            release: Arc::clone(&release),
        });
    }
    registry.register(WaitCancel {
        spec: spec("wait_cancel", Effect::Process),
        cancelled: Arc::clone(&cancelled),
        started: Arc::clone(&wait_started),
    });
    registry.register(Emit(spec("emit", Effect::Process)));
    registry.register(Probe(spec("probe", Effect::Process)));
    let progress_release = Arc::new(tokio::sync::Notify::new());
    registry.register(Progress { spec: spec("progress", Effect::Process), release: Arc::clone(&progress_release) });
    // In the registry but not offered: must be refused.
    registry.register(Echo(spec("hidden", Effect::MutatesFiles)));
    let tools: Vec<ToolSpec> = OFFERED.iter().map(|n| registry.get(n).map(|t| t.spec().clone()).unwrap()).collect();

    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let server =
        adjust(McpServer::new(Scheduler::new(Arc::new(registry)), cx, tools).with_instructions("Use the tools."));
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let _ = server.serve(server_io).await;
    });
    let (log_tx, logs) = mpsc::unbounded_channel();
    let (progress_tx, progress) = mpsc::unbounded_channel();
    let client = tokio::time::timeout(LIMIT, LogClient(log_tx, progress_tx).serve(client_io)).await.unwrap().unwrap();
    Fixture {
        client,
        logs,
        progress,
        progress_release,
        append_log,
        append_started: started_rx,
        release,
        cancelled,
        wait_started,
        _dir: dir,
    }
}

fn params(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

async fn call(f: &Fixture, name: &str, args: Value) -> CallToolResult {
    tokio::time::timeout(LIMIT, f.client.peer().call_tool(params(name, args))).await.unwrap().unwrap()
}

fn text(r: &CallToolResult) -> String {
    serde_json::to_value(r).unwrap()["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g13_tools_list_keeps_the_given_order_with_schemas_and_instructions() {
    let f = fixture().await;
    let tools = tokio::time::timeout(LIMIT, f.client.peer().list_all_tools()).await.unwrap().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, OFFERED);
    assert_eq!(tools[1].input_schema["properties"]["text"]["type"], "string");
    assert_eq!(tools[2].annotations.as_ref().unwrap().destructive_hint, Some(true));
    let info = f.client.peer().peer_info().unwrap();
    assert_eq!(info.instructions.as_deref(), Some("Use the tools."));
    assert!(info.capabilities.tools.is_some() && info.capabilities.logging.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g1_overlapping_requests_run_concurrently() {
    let f = fixture().await;
    // Each `pair` call only returns once the other is running too.
    let (a, b) = tokio::join!(call(&f, "pair", json!({})), call(&f, "pair", json!({})));
    assert_eq!((text(&a), text(&b)), ("met".to_owned(), "met".to_owned()));
    assert_eq!(a.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_mutations_of_one_file_wait_for_the_earlier_request_while_others_proceed() {
    let mut f = fixture().await;
    let peer = f.client.peer().clone();
    let first = tokio::spawn({
        let peer = peer.clone();
        async move { peer.call_tool(params("append", json!({"path": "a.txt", "text": "hold"}))).await }
    });
    assert_eq!(tokio::time::timeout(LIMIT, f.append_started.recv()).await.unwrap().unwrap(), "hold");
    // Same file through another spelling: must wait for `hold`.
    let second = tokio::spawn({
        let peer = peer.clone();
        async move { peer.call_tool(params("append", json!({"path": "./sub/../a.txt", "text": "after"}))).await }
    });
    // Another file: runs although `hold` is still running.
    let other = call(&f, "append_other", json!({"path": "b.txt", "text": "other"})).await;
    assert_eq!(text(&other), "other");
    assert_eq!(*f.append_log.lock().unwrap(), ["other"]);
    f.release.notify_one();
    let first = tokio::time::timeout(LIMIT, first).await.unwrap().unwrap().unwrap();
    let second = tokio::time::timeout(LIMIT, second).await.unwrap().unwrap().unwrap();
    assert_eq!((text(&first), text(&second)), ("hold".to_owned(), "after".to_owned()));
    assert_eq!(*f.append_log.lock().unwrap(), ["other", "hold", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g8_unknown_hidden_and_invalid_calls_are_error_results_the_model_can_read() {
    let f = fixture().await;
    let ok = call(&f, "echo", json!({"text": "<b>raw</b>"})).await;
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(text(&ok), "<b>raw</b>");
    assert_eq!(
        ok.structured_content,
        Some(json!({"status": "success", "output": "<b>raw</b>", "meta": {"echoed": true}, "full_output": null}))
    );

    let unknown = call(&f, "ecko", json!({})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(text(&unknown).contains("unknown tool `ecko`") && text(&unknown).contains("echo"), "{}", text(&unknown));
    assert_eq!(unknown.structured_content.as_ref().unwrap()["meta"]["error_kind"], "unknown_tool");

    let hidden = call(&f, "hidden", json!({"text": "x"})).await;
    assert_eq!(hidden.is_error, Some(true));
    assert!(text(&hidden).contains("unknown tool `hidden`"), "{}", text(&hidden));

    let invalid = call(&f, "echo", json!({"txt": "x"})).await;
    assert_eq!(invalid.is_error, Some(true));
    assert!(text(&invalid).contains("`text` (a string) is required"), "{}", text(&invalid));
    assert_eq!(invalid.structured_content.as_ref().unwrap()["status"], "error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_a_request_the_client_cancels_cancels_its_call() {
    let f = fixture().await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params("wait_cancel", json!({}))));
    let handle = f.client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    tokio::time::timeout(LIMIT, f.wait_started.notified()).await.unwrap();
    handle.cancel(Some("user stopped it".into())).await.unwrap();
    tokio::time::timeout(LIMIT, async {
        while !f.cancelled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    // The session keeps working after a cancelled call.
    assert_eq!(text(&call(&f, "echo", json!({"text": "still here"})).await), "still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s5_terminal_events_reach_the_client_as_logging_notifications_and_in_the_next_result() {
    let mut f = fixture().await;
    let emitted = call(&f, "emit", json!({})).await;
    assert_eq!(text(&emitted), "emitted");
    let msg = tokio::time::timeout(LIMIT, f.logs.recv()).await.unwrap().unwrap();
    assert_eq!(msg.logger.as_deref(), Some("kodik"));
    assert_eq!(msg.data["event"], "terminal");
    assert_eq!(msg.data["unread_output"], "done\n");
    assert_eq!(msg.data["exit_code"], 0);

    // The model sees the event in the next result too, once.
    let blocks = serde_json::to_value(&emitted).unwrap()["content"].clone();
    assert_eq!(blocks.as_array().unwrap().len(), 2, "{blocks}");
    assert_eq!(blocks[1]["text"], "[terminal t1 · `sleep 6; echo done` exited with code 0 after 6.0 s]\ndone\n");
    let next = call(&f, "echo", json!({"text": "x"})).await;
    assert_eq!(next.content.len(), 1);
}

/// G8, S5: a client that gives its model `structuredContent` instead of `content` whenever it
/// is present (Codex CLI) must still see the output: before, its model read only
/// `{"status", "meta", "full_output"}` — never the text of a read or a command's output.
/// `output` holds the content's text as it is, the note of a background command included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g8_s5_a_client_that_reads_only_structured_content_gets_the_output_too() {
    let f = fixture().await;
    let raw = "<b>raw</b>\n  line two";
    let ok = call(&f, "echo", json!({"text": raw})).await;
    assert_eq!(ok.structured_content.as_ref().unwrap()["output"], raw);
    let invalid = call(&f, "echo", json!({"txt": "x"})).await;
    assert_eq!(invalid.structured_content.as_ref().unwrap()["output"], text(&invalid));
    let emitted = call(&f, "emit", json!({})).await;
    assert_eq!(
        emitted.structured_content.as_ref().unwrap()["output"],
        "emitted\n[terminal t1 · `sleep 6; echo done` exited with code 0 after 6.0 s]\ndone\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_only_overlapping_requests_form_a_batch() {
    let mut f = fixture().await;
    // Sequential requests: each is its own batch, so nothing "of this batch" has finished.
    for _ in 0..3 {
        assert_eq!(text(&call(&f, "echo", json!({"text": "x"})).await), "x");
    }
    assert_eq!(text(&call(&f, "probe", json!({})).await), "0");

    // While `hold` runs, a finished `echo` belongs to the same batch as the next call.
    let peer = f.client.peer().clone();
    let held =
        tokio::spawn(async move { peer.call_tool(params("append", json!({"path": "a.txt", "text": "hold"}))).await });
    assert_eq!(tokio::time::timeout(LIMIT, f.append_started.recv()).await.unwrap().unwrap(), "hold");
    call(&f, "echo", json!({"text": "y"})).await;
    assert_eq!(text(&call(&f, "probe", json!({})).await), "1");
    f.release.notify_one();
    tokio::time::timeout(LIMIT, held).await.unwrap().unwrap().unwrap();
    assert_eq!(text(&call(&f, "probe", json!({})).await), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_events_become_progress_notifications_for_the_requesting_call() {
    let mut f = fixture().await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params("progress", json!({}))));
    let handle = f.client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let token = handle.progress_token.clone();
    let note = tokio::time::timeout(LIMIT, f.progress.recv()).await.unwrap().unwrap();
    assert_eq!(note.progress_token, token);
    assert_eq!(note.message.as_deref(), Some("halfway"));
    assert_eq!(note.progress, 1.0);
    // And as a log message for clients that only show those.
    let log = tokio::time::timeout(LIMIT, f.logs.recv()).await.unwrap().unwrap();
    assert_eq!(log.data["event"], "progress");
    f.progress_release.notify_one();
    let done = tokio::time::timeout(LIMIT, handle.await_response()).await.unwrap().unwrap();
    assert!(format!("{done:?}").contains("finished"), "{done:?}");
}

/// A client that asked for progress hears that a long call still runs (every 100 ms here, 20 s
/// by default), in increasing steps with the call's own progress, and nothing after the answer.
/// Before, a `shell` call with a `timeout` over 60 s sent nothing, and a TypeScript-SDK client
/// (60 s request timeout, reset by progress with `resetTimeoutOnProgress`) cancelled it — and so
/// killed its command — at 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_a_long_call_tells_a_client_that_asked_for_progress_that_it_still_runs() {
    let mut f = fixture_with(|server| server.progress_every(Duration::from_millis(100))).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params("progress", json!({}))));
    let handle = f.client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let token = handle.progress_token.clone();
    // The tool's own "halfway" and two "still running", in whatever order a loaded machine
    // interleaves them.
    let mut notes: Vec<ProgressNotificationParam> = Vec::new();
    let heard = |notes: &[ProgressNotificationParam], what: &str| {
        notes.iter().filter(|n| n.message.as_deref().is_some_and(|m| m.starts_with(what))).count()
    };
    while heard(&notes, "halfway") == 0 || heard(&notes, "still running (") < 2 {
        notes.push(tokio::time::timeout(LIMIT, f.progress.recv()).await.expect("a long call went quiet").unwrap());
    }
    assert!(notes.iter().all(|n| n.progress_token == token), "{notes:?}");
    // Sent as 1, 2, 3 …; rmcp hands each incoming notification to a task of its own, so the
    // test may hear them in another order: together they are the steps without gap or repeat.
    let mut steps: Vec<f64> = notes.iter().map(|n| n.progress).collect();
    steps.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (1..=notes.len()).map(|n| n as f64).collect();
    assert_eq!(steps, expected, "one increasing sequence: {notes:?}");
    f.progress_release.notify_one();
    let done = tokio::time::timeout(LIMIT, handle.await_response()).await.unwrap().unwrap();
    assert!(format!("{done:?}").contains("finished"), "{done:?}");
    // Those sent before the answer may still be handled (rmcp handles each in a task): let
    // them land, then three intervals must pass in silence.
    tokio::time::sleep(Duration::from_millis(50)).await;
    while f.progress.try_recv().is_ok() {}
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(f.progress.try_recv().is_err(), "progress after the answer");
}
