//! A client's `tools/call` requests run in the order the server read them (G2), over the
//! stdio transport's framing (newline-delimited JSON-RPC on a pipe), written by the test the
//! way an MCP client writes one turn's calls: back to back, without waiting for answers.
//!
//! rmcp's own client is not used for the calls: it sends each request from a task of its own,
//! so the order on the wire would be the client's, not the test's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may unwrap too

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{Effect, Resource, Tool, ToolContext, ToolOutput, ToolRegistry, ToolSpec, Workspace};
use kodik_mcp::McpServer;
use kodik_scheduler::Scheduler;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};

const LIMIT: Duration = Duration::from_secs(60);

/// Pairs of order-dependent calls per test: enough that, without ordering by arrival, some
/// pair runs the wrong way round on every run.
const PAIRS: u64 = 150;

fn spec(name: &str, effect: Effect) -> ToolSpec {
    ToolSpec::new(
        name,
        format!("Test tool {name}."),
        json!({"type": "object", "properties": {"path": {"type": "string"}, "value": {"type": "integer"}}}),
        effect,
    )
}

/// Writes `value` to the file `path` (a mutation of that file, G2).
struct Write {
    spec: ToolSpec,
    ws: Workspace,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Write {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(args["path"].as_str().unwrap_or("x"))]
    }
    async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
        let value = args["value"].as_u64().unwrap_or_default();
        let path = self.ws.roots()[0].join(args["path"].as_str().unwrap_or("x"));
        self.log.lock().unwrap().push(format!("write {value}"));
        match std::fs::write(&path, value.to_string()) {
            Ok(()) => ToolOutput::text(format!("wrote {value}")),
            Err(e) => ToolOutput::error(format!("writing {}: {e}", path.display())),
        }
    }
}

/// Reads the file `path` and fails unless it holds `value`: it only succeeds after the
/// `write` of the same value, and before the next one.
struct Check {
    spec: ToolSpec,
    ws: Workspace,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Check {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn reads(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(args["path"].as_str().unwrap_or("x"))]
    }
    async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
        let value = args["value"].as_u64().unwrap_or_default();
        let path = self.ws.roots()[0].join(args["path"].as_str().unwrap_or("x"));
        self.log.lock().unwrap().push(format!("check {value}"));
        let found = std::fs::read_to_string(&path).unwrap_or_else(|e| format!("({e})"));
        if found == value.to_string() {
            ToolOutput::text(format!("holds {value}"))
        } else {
            ToolOutput::error(format!("expected {value}, found {found}"))
        }
    }
}

/// Runs until its call is cancelled.
struct Park(ToolSpec);

#[async_trait]
impl Tool for Park {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value, cx: &ToolContext) -> ToolOutput {
        cx.cancel.cancelled().await;
        ToolOutput::error("cancelled")
    }
}

/// A server on one end of a pipe, and the test on the other end as a raw MCP client.
struct Pipe {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    write: WriteHalf<DuplexStream>,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Pipe {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut registry = ToolRegistry::new();
        registry.register(Write { spec: spec("write", Effect::MutatesFiles), ws: ws.clone(), log: Arc::clone(&log) });
        registry.register(Check { spec: spec("check", Effect::ReadOnly), ws: ws.clone(), log: Arc::clone(&log) });
        registry.register(Park(spec("park", Effect::Process)));
        let tools: Vec<ToolSpec> = registry.specs().cloned().collect();
        let server = McpServer::new(Scheduler::new(Arc::new(registry)), ToolContext::new(ws), tools);
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let _ = server.serve(server_io).await;
        });
        let (read, write) = tokio::io::split(client_io);
        let mut pipe = Pipe { lines: BufReader::new(read).lines(), write, log, _dir: dir };
        pipe.send(&[json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "order-test", "version": "1"}}})])
            .await;
        let init = pipe.next().await;
        assert_eq!(init["id"], 0, "{init}");
        assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
        pipe.send(&[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})]).await;
        pipe
    }

    /// Writes `messages` in one write, as a client sending a turn's calls at once does.
    async fn send(&mut self, messages: &[Value]) {
        let mut bytes = Vec::new();
        for m in messages {
            serde_json::to_writer(&mut bytes, m).unwrap();
            bytes.push(b'\n');
        }
        self.write.write_all(&bytes).await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// The next message from the server that answers a request (notifications skipped).
    async fn next(&mut self) -> Value {
        loop {
            let line = tokio::time::timeout(LIMIT, self.lines.next_line()).await.unwrap().unwrap().unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    /// Answers to `count` requests, by id.
    async fn answers(&mut self, count: usize) -> HashMap<u64, Value> {
        let mut out = HashMap::new();
        while out.len() < count {
            let m = self.next().await;
            out.insert(m["id"].as_u64().unwrap(), m);
        }
        out
    }
}

fn call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_back_to_back_requests_on_one_file_run_in_the_order_the_client_sent_them() {
    let mut pipe = Pipe::start().await;
    // One turn's calls, all on a.txt: write 1, check 1, write 2, check 2, … Every tenth pair has
    // a call to an unknown tool between the two, refused without reaching the scheduler: it
    // must not hold up the calls after it.
    let mut messages = Vec::new();
    let mut expected = Vec::new();
    let mut id = 0;
    for value in 1..=PAIRS {
        id += 1;
        messages.push(call(id, "write", json!({"path": "a.txt", "value": value})));
        if value % 10 == 0 {
            id += 1;
            messages.push(call(id, "no_such_tool", json!({})));
        }
        id += 1;
        messages.push(call(id, "check", json!({"path": "./a.txt", "value": value})));
        expected.extend([format!("write {value}"), format!("check {value}")]);
    }
    pipe.send(&messages).await;
    let answers = pipe.answers(messages.len()).await;
    let mut failed = Vec::new();
    for m in &messages {
        let answer = &answers[&m["id"].as_u64().unwrap()];
        let refused = m["params"]["name"] == "no_such_tool";
        if answer["result"]["isError"] != json!(refused) {
            failed.push(format!("{} {}: {}", m["params"]["name"], m["params"]["arguments"], text(answer)));
        }
    }
    assert!(failed.is_empty(), "{} of {} calls ran out of order: {failed:#?}", failed.len(), messages.len());
    assert_eq!(*pipe.log.lock().unwrap(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_g6_a_request_cancelled_before_it_ran_does_not_hold_up_the_requests_after_it() {
    let mut pipe = Pipe::start().await;
    let mut messages = Vec::new();
    for value in 1..=20 {
        let base = value * 10;
        messages.extend([
            call(base, "write", json!({"path": "a.txt", "value": value})),
            call(base + 1, "park", json!({})),
            // Cancelled right after it was sent: most are cancelled before they were registered
            // with the scheduler, some while they run.
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": base + 1}}),
            call(base + 2, "check", json!({"path": "a.txt", "value": value})),
        ]);
    }
    pipe.send(&messages).await;
    // A cancelled request gets no answer (MCP): the others all do, in time and in order.
    let answers = pipe.answers(40).await;
    for value in 1..=20u64 {
        let (write, check) = (&answers[&(value * 10)], &answers[&(value * 10 + 2)]);
        assert_eq!(text(write), format!("wrote {value}"), "{write}");
        assert_eq!(text(check), format!("holds {value}"), "{check}");
    }
    assert!(answers.keys().all(|id| id % 10 != 1), "a cancelled request was answered: {answers:?}");
}
