//! The conversation tools across real `kodik` processes: `kodik serve` over stdio MCP (A1, A2,
//! A4) and a message from one `kodik agent` to another one that is running (A5).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kodik_tools::model::Provider;
use kodik_tools::model::replay::{Exchange, Recording, ReplayServer};
use serde_json::{Value, json};

const KODIK: &str = env!("CARGO_BIN_EXE_kodik");

/// A `kodik serve` child process spoken to in raw JSON-RPC lines.
struct Serve {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Serve {
    fn start(workspace: &Path, mode: &str) -> Self {
        let mut child = Command::new(KODIK)
            .args(["serve", "--workspace", workspace.to_str().unwrap(), "--mode", mode])
            .env("KODIK_CONFIG_DIR", workspace.join("user-config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut serve = Self { child, stdin, stdout, next: 1 };
        let init = serve.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "kodik", "{init}");
        writeln!(serve.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        serve
    }

    /// Sends a request and returns its response, skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "kodik serve closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Calls a tool; returns (is_error, text of its content).
    fn call(&mut self, name: &str, arguments: Value) -> (bool, String) {
        let reply = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = &reply["result"];
        assert!(result.is_object(), "{reply}");
        let text = result["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect();
        (result["isError"] == true, text)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A1, A2, A4 through `kodik serve`: the conversation tools are listed, the todo list lives as
/// long as the server's conversation (an invalid merge leaves it untouched), notes are plain
/// Markdown files, and agent_status describes this conversation.
#[test]
fn a1_a2_a4_conversation_tools_through_kodik_serve() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), "code");
    let tools = serve.request("tools/list", json!({}));
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for tool in ["todo_write", "memory", "agent_status"] {
        assert!(names.contains(&tool), "{tool} is not listed: {names:?}");
    }
    // G11: a server has no model to run sub-agents and no person to ask: those tools, which
    // could only fail, are not offered.
    for tool in ["sub_agent", "ask_questions"] {
        assert!(!names.contains(&tool), "{tool} is offered: {names:?}");
    }

    let (err, text) = serve.call("todo_write", json!({"todos": [{"title": "Write the parser"}, {"title": "Test it"}]}));
    assert!(!err, "{text}");
    let (err, text) = serve.call("todo_write", json!({"merge": true, "todos": [{"id": "1", "status": "in_progress"}]}));
    assert!(!err && text.contains("1: Write the parser") && text.contains("2: Test it"), "the list lives on: {text}");
    let (err, text) = serve.call("todo_write", json!({"merge": true, "todos": [{"id": "9", "status": "completed"}]}));
    assert!(err && text.contains("The list is unchanged"), "{text}");

    let (err, text) = serve.call("memory", json!({"content": "The parser lives in src/parse.rs."}));
    assert!(!err, "{text}");
    let note = std::fs::read_to_string(dir.path().join(".kodik/memory/the-parser-lives-in-src-parse-rs.md")).unwrap();
    assert_eq!(note, "The parser lives in src/parse.rs.\n", "a plain Markdown file");
    let (err, text) = serve.call("memory", json!({"action": "list"}));
    assert!(!err && text.contains("the-parser-lives-in-src-parse-rs"), "{text}");

    let (err, text) = serve.call("agent_status", json!({"scope": "self"}));
    assert!(!err, "{text}");
    assert!(text.contains("Write the parser"), "self shows the todo progress: {text}");
    let (err, text) = serve.call("agent_status", json!({}));
    assert!(!err && text.contains("no background sub-agents"), "{text}");

    // Called anyway (a client with a stale list): a clear error, no hang.
    let (err, text) = serve.call("sub_agent", json!({"description": "d", "prompt": "p"}));
    assert!(err && text.contains("sub_agent"), "{text}");
    let (err, text) = serve.call("send_message", json!({"agent_id": "nobody", "message": "hi"}));
    assert!(err && text.contains("neither a sub-agent"), "{text}");
}

/// A7 through `kodik serve` in Plan and Educator modes: the plan and the lesson are written as
/// files; the quiz has nobody to ask.
#[test]
fn a7_plan_and_lesson_tools_through_kodik_serve() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), "plan");
    let plan = json!({"title": "Split the lexer", "summary": "Move lexing out.",
        "steps": [{"title": "Create lex.rs", "files": ["src/lex.rs"]}], "risks": ["API change"]});
    let (err, text) = serve.call("generate_plan", plan);
    assert!(!err, "{text}");
    let md = std::fs::read_to_string(dir.path().join(".kodik/plans/split-the-lexer.md")).unwrap();
    assert!(
        md.contains("1. **Create lex.rs**") && md.contains("- `src/lex.rs` (step 1)") && md.contains("- API change")
    );
    drop(serve);

    let mut serve = Serve::start(dir.path(), "educator");
    let html = "<html><body><h1>Moves</h1><p>let b = a; moves a.</p></body></html>";
    let (err, text) = serve.call("create_lesson", json!({"title": "Moves", "html": html}));
    assert!(!err, "{text}");
    assert_eq!(std::fs::read_to_string(dir.path().join(".kodik/lessons/moves.html")).unwrap(), html);
    let quiz = json!({"topic": "moves", "questions": [{"question": "Is a moved?", "options": ["yes", "no"], "correct_option": 0}]});
    let (err, text) = serve.call("check_understanding", quiz);
    assert!(err && text.contains("nobody can be asked"), "{text}");
}

/// A Responses stream that makes one function call.
/// Runs `kodik batch` on `input` (one JSON line per turn) and returns its result lines.
fn batch(workspace: &Path, input: &str) -> std::process::Child {
    let mut child = Command::new(KODIK)
        .args(["batch", "--workspace", workspace.to_str().unwrap()])
        .env("KODIK_CONFIG_DIR", workspace.join("user-config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child
}

fn results(child: std::process::Child) -> Vec<Value> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kodik batch failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A2 with G1: two `kodik batch` processes on one workspace, each saving 15 notes with the same
/// first words in one turn (so they run concurrently): every save that reports success is its
/// own file holding its own text — before, two saves could be told they got one id and one
/// note was silently lost.
#[test]
fn a2_g1_saves_racing_in_a_turn_and_across_two_processes_each_keep_their_own_note() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let turn = |who: &str| {
            let calls: Vec<Value> = (0..15)
                .map(|i| {
                    json!({"id": format!("{who}{i}"), "name": "memory", "args": {
                        "content": format!("Use pnpm not npm in this project always because lockfile; from {who} {i}")}})
                })
                .collect();
            format!("{}\n", Value::Array(calls))
        };
        let (a, b) = (batch(ws, &turn("A")), batch(ws, &turn("B")));
        let lines: Vec<Value> = results(a).into_iter().chain(results(b)).collect();
        assert_eq!(lines.len(), 30, "{lines:?}");
        let mut paths = std::collections::HashSet::new();
        for line in &lines {
            assert_eq!(line["status"], "success", "round {round}: {line}");
            let (who, i) = line["id"].as_str().unwrap().split_at(1);
            let path = line["meta"]["path"].as_str().unwrap().to_string();
            assert!(paths.insert(path.clone()), "round {round}: two saves were told they got {path}");
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.ends_with(&format!("from {who} {i}\n")), "round {round}: {path} holds another note: {text}");
        }
        assert_eq!(std::fs::read_dir(ws.join(".kodik/memory")).unwrap().count(), 30, "round {round}");
    }
}

/// A2 with G2: `delete` then `update` of one note in one turn run in the model's order: the
/// update finds no note — before, the update could run first and both report success with no
/// note left.
#[test]
fn a2_g2_delete_then_update_of_one_note_in_one_turn_run_in_the_models_order() {
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let input = format!(
            "{}\n{}\n",
            json!({"id": "s", "name": "memory", "args": {"content": "fact x"}}),
            json!([
                {"id": "d", "name": "memory", "args": {"action": "delete", "id": "fact-x"}},
                {"id": "u", "name": "memory", "args": {"action": "update", "id": "fact-x", "content": "fact x v2"}}
            ])
        );
        let lines = results(batch(ws, &input));
        let status = |id: &str| lines.iter().find(|l| l["id"] == id).map(|l| l["status"].clone()).unwrap();
        assert_eq!(status("d"), "success", "round {round}: {lines:?}");
        assert_eq!(status("u"), "error", "round {round}: the update ran before the delete: {lines:?}");
        assert!(!ws.join(".kodik/memory/fact-x.md").exists(), "round {round}");
    }
}

fn call_body(name: &str, args: &Value) -> String {
    let args = args.to_string();
    let added = json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": ""}});
    let done = json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": args}});
    sse(&[added, done])
}

fn text_body(text: &str) -> String {
    sse(&[json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text})])
}

fn sse(events: &[Value]) -> String {
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "usage": {"input_tokens": 100, "output_tokens": 10}}});
    events
        .iter()
        .chain([&completed])
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn agent(server: &ReplayServer, workspace: &Path, mode: &str, task: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(KODIK);
    cmd.arg("agent")
        .arg("--workspace")
        .arg(workspace)
        .args(["--mode", mode, "--json", "--model", "gpt-5", "--base-url", &server.base_url(), task])
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A5: one `kodik agent` messages another that is running in its own process; the message
/// waits in the recipient's mailbox and is in its next model request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_a_message_reaches_a_conversation_running_in_another_process() {
    let ws = tempfile::tempdir().unwrap();
    // The recipient works on something that ends once a letter has arrived (at most 30 s).
    let wait =
        "for i in $(seq 300); do ls .kodik/conversations/*.inbox/*.json >/dev/null 2>&1 && break; sleep 0.1; done";
    let recipient = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("shell", &json!({"command": wait}))))
        .with(Exchange::sse(text_body("Adapted to the new lexer API.")));
    let recipient_server = ReplayServer::start(recipient).await.unwrap();
    let mut running = agent(&recipient_server, ws.path(), "code", "refactor the parser").spawn().unwrap();

    // Its entry in the conversation store names it and its process.
    let store = ws.path().join(".kodik/conversations");
    let deadline = Instant::now() + Duration::from_secs(30);
    let entry = loop {
        let found = std::fs::read_dir(&store)
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "json")));
        if let Some(path) = found
            && let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap_or_default())
        {
            break v;
        }
        assert!(Instant::now() < deadline, "the running agent published no conversation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let recipient_id = entry["id"].as_str().unwrap().to_string();
    assert_eq!(entry["pid"].as_u64(), running.id().map(u64::from), "{entry}");

    let sender = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body(
            "send_message",
            &json!({"agent_id": recipient_id, "message": "The lexer API changed: tokenize() now returns a Vec."}),
        )))
        .with(Exchange::sse(text_body("Told them.")));
    let sender_server = ReplayServer::start(sender).await.unwrap();
    let sent = agent(&sender_server, ws.path(), "ask", "tell the parser refactor about the lexer change")
        .output()
        .await
        .unwrap();
    let sent_out = String::from_utf8_lossy(&sent.stdout);
    assert_eq!(sent.status.code(), Some(0), "{sent_out}\n{}", String::from_utf8_lossy(&sent.stderr));
    assert!(sent_out.contains("Message left for conversation"), "{sent_out}");
    let sender_id = sent_out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "thread.started")
        .and_then(|l| l["thread_id"].as_str().map(String::from))
        .unwrap();

    let done = tokio::time::timeout(Duration::from_secs(60), running.wait()).await.expect("the recipient never ended");
    assert!(done.unwrap().success());
    let requests = recipient_server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body["input"].to_string();
    assert!(
        second.contains(&format!("[message from conversation {sender_id}]"))
            && second.contains("The lexer API changed: tokenize() now returns a Vec."),
        "{second}"
    );
    assert!(!requests[0].body["input"].to_string().contains("lexer API"));
    let inbox = store.join(format!("{recipient_id}.inbox"));
    assert_eq!(std::fs::read_dir(&inbox).map(|d| d.count()).unwrap_or(0), 0, "the letter was taken once");
}

/// A4: after `kodik agent` exits its conversation is listed closed, with its title, and under
/// the workspace's full path even when started as `kodik agent` in the folder (`--workspace .`)
/// — before, the record was often left "running" and untitled (the process exited before the
/// listing's last write) and said `"workspace": "."`, which agent_status's `workspace` filter,
/// given the path or the folder's name, never found; and the title was the model's first
/// answer, so `query` with a word of the task found nothing.
#[tokio::test]
async fn a4_an_exited_agent_is_listed_closed_titled_and_by_its_full_path() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("parser-ws");
    std::fs::create_dir(&ws).unwrap();
    let runs = 6;
    let recording = (0..runs).fold(Recording::new(Provider::OpenAiResponses, "gpt-5"), |r, i| {
        r.with(Exchange::sse(text_body(&format!("Answer {i}"))))
    });
    let server = ReplayServer::start(recording).await.unwrap();
    for i in 0..runs {
        let mut cmd = tokio::process::Command::new(KODIK);
        cmd.current_dir(&ws)
            .args(["agent", "--model", "gpt-5", "--base-url", &server.base_url(), "Refactor the parser"])
            .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
            .env("KODIK_CONFIG_DIR", dir.path().join("user-config"))
            .stdin(Stdio::null());
        if i % 2 == 1 {
            cmd.arg("--json");
        }
        let out = cmd.output().await.unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let full = std::fs::canonicalize(&ws).unwrap();
    let mut records = 0;
    for entry in std::fs::read_dir(ws.join(".kodik/conversations")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let info: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        records += 1;
        assert_eq!(info["status"], "closed", "{info}");
        // The title is the user's task, not the model's first answer (A4 `query` finds it).
        assert_eq!(info["title"], "Refactor the parser", "{info}");
        assert_eq!(info["workspace"], full.to_str().unwrap(), "{info}");
    }
    assert_eq!(records, runs);
    for filter in [full.to_str().unwrap(), "parser-ws"] {
        let line = json!({"id": "1", "name": "agent_status", "args": {"scope": "sessions", "workspace": filter}});
        let results = results(batch(&ws, &format!("{line}\n")));
        let text = results[0]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("of {runs}")), "filter {filter}: {text}");
    }
    let line = json!({"id": "1", "name": "agent_status", "args": {"scope": "sessions", "query": "parser"}});
    let results = results(batch(&ws, &format!("{line}\n")));
    let text = results[0]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("of {runs}")) && text.contains("Refactor the parser"), "{text}");
}

/// A5: `send_message` through `kodik batch` to a closed conversation says what is true: the
/// conversation is closed, this host has no model to resume it, the message was not delivered,
/// and how the user resumes it; before, it answered that sub-agents are not available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_batch_send_message_to_a_closed_conversation_says_it_was_not_delivered() {
    let ws = tempfile::tempdir().unwrap();
    let recording =
        Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("Parser refactored.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent(&server, ws.path(), "code", "Refactor the parser").output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = std::fs::read_dir(ws.path().join(".kodik/conversations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap();
    let line = json!({"id": "1", "name": "send_message", "args": {"agent_id": id, "message": "please also add docs"}});
    let results = results(batch(ws.path(), &format!("{line}\n")));
    assert_eq!(results[0]["status"], "error", "{}", results[0]);
    let text = results[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("is closed")
            && text.contains("not delivered")
            && text.contains(&format!("kodik agent --resume {id}"))
            && !text.contains("sub-agents are not available"),
        "{text}"
    );
}

/// A5: a letter that arrives while the recipient is in what would be its last request is read
/// before its run ends — one more request carries it — instead of staying in the mailbox until
/// a person resumes the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_a_letter_arriving_during_the_last_request_is_read_before_the_run_ends() {
    use kodik_tools::conversation::{ConversationStore as _, FileStore, Letter};
    let ws = tempfile::tempdir().unwrap();
    let recipient = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(text_body("The parser is refactored.")))
        .with(Exchange::sse(text_body("Added the tests you asked for.")));
    // The first answer takes 2 s to stream: the letter comes in meanwhile.
    let slow = kodik_tools::model::replay::ReplayOptions { chunk_delay: Duration::from_secs(2), ..Default::default() };
    let server = ReplayServer::start_with(recipient, slow).await.unwrap();
    let mut running = agent(&server, ws.path(), "code", "refactor the parser").spawn().unwrap();

    let store = ws.path().join(".kodik/conversations");
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let found = std::fs::read_dir(&store)
            .ok()
            .and_then(|d| d.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "json")));
        if let Some(path) = found
            && let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap_or_default())
        {
            break v["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the running agent published no conversation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Posted once the first request is under way: before it, the letter would simply go into it.
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "the agent sent no request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let letter = Letter { from: "someone".into(), message: "MAIL: please add tests".into(), sent: 0 };
    FileStore::for_workspace(ws.path()).post(&id, &letter).unwrap();

    let done = tokio::time::timeout(Duration::from_secs(60), running.wait()).await.expect("the recipient never ended");
    assert!(done.unwrap().success());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the letter was left unread");
    assert!(!requests[0].body["input"].to_string().contains("MAIL: please add tests"));
    assert!(requests[1].body["input"].to_string().contains("MAIL: please add tests"));
}
