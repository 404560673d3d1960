//! `kodik agent` end to end: the binary against kodik-model's loopback replay server (the real
//! OpenAI Responses client, the real agent loop, the real tools), and the offline demo.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kodik_tools::Toolbox;
use kodik_tools::harness::Mode;
use kodik_tools::model::Provider;
use kodik_tools::model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use serde_json::{Value, json};

const KODIK: &str = env!("CARGO_BIN_EXE_kodik");
const DEMO_RECORDING: &str = include_str!("../../../examples/demo/recording.json");
const DEMO_WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo-workspace");

/// The JSON Lines of a `--json` run; fails on any line that is not a JSON object.
fn json_lines(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"));
            assert!(v["type"].is_string(), "{l}");
            v
        })
        .collect()
}

/// The finished tool calls of a `--json` run as (tool, status, output); a deferred tool called
/// through `call_tool` counts as itself.
fn finished_calls(lines: &[Value]) -> Vec<(String, String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "item.completed" && l["item"]["type"] == "tool_call")
        .map(|l| {
            let item = &l["item"];
            let name = match item["name"].as_str().unwrap() {
                "call_tool" => item["arguments"]["name"].as_str().unwrap(),
                other => other,
            };
            (name.to_owned(), item["status"].as_str().unwrap().to_owned(), item["output"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn demo(dir: &Path, extra: &[&str]) -> Output {
    Command::new(KODIK).args(["agent", "--demo", "--demo-dir"]).arg(dir).args(extra).output().unwrap()
}

/// G1, G4, G10, G12, P5, S3, S4, K1, E2: the recorded session runs through the real client and
/// tools: every tool family succeeds (search through call_tool, read, shell, the freeform
/// apply_patch, the background test run polled by get_terminal_output, the codemode script
/// that edits the changelog), the tests pass afterwards, and the checkout's copy is untouched.
#[test]
fn demo_json_run_fixes_the_project_with_every_tool_family() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let started = std::time::Instant::now();
    let out = demo(&dir, &["--json"]);
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(elapsed < Duration::from_secs(30), "the demo took {elapsed:?}");
    let lines = json_lines(&out);

    assert_eq!(lines[0]["type"], "thread.started");
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result", "the last line is the result: {result}");
    assert_eq!(result["status"], "completed");
    assert_eq!(result["turns"], 7);
    assert_eq!(result["session_id"], lines[0]["thread_id"]);
    assert!(result["final_text"].as_str().unwrap().starts_with("Fixed."), "{result}");
    assert!(result["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(lines.iter().filter(|l| l["type"] == "turn.completed").count(), 7);

    // G4: the first turn's grep started while the response still streamed, before its text was complete.
    let position = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred).unwrap();
    let grep_started = position(&|l| l["type"] == "item.started" && l["item"]["arguments"]["name"] == "grep");
    let first_message = position(&|l| l["item"]["type"] == "agent_message");
    assert!(grep_started < first_message, "grep did not start while the response streamed");

    // The recorded reasoning summary comes out as a reasoning item, as in `codex exec --json`.
    assert!(
        lines
            .iter()
            .any(|l| l["item"]["type"] == "reasoning" && l["item"]["text"].as_str().is_some_and(|t| !t.is_empty())),
        "no reasoning item"
    );

    let calls = finished_calls(&lines);
    for family in ["grep", "glob", "read_file", "shell", "apply_patch", "get_terminal_output", "codemode"] {
        assert!(
            calls.iter().any(|(name, status, _)| name == family && status == "success"),
            "no successful {family} call in {calls:?}"
        );
    }
    // The first test run fails; the second goes to the background (S4) and the script waits for it.
    let shells: Vec<_> = calls.iter().filter(|(n, _, _)| n == "shell").collect();
    assert_eq!(shells[0].1, "error", "{}", shells[0].2);
    assert!(shells[0].2.contains("FAIL - 'Rust & Shell: a tale'"), "{}", shells[0].2);
    assert!(shells[1].2.contains("[terminal term-2 · still running"), "{}", shells[1].2);
    let script = &calls.iter().find(|(n, _, _)| n == "codemode").unwrap().2;
    assert!(script.contains("[exit code 0 ·") && script.contains("edit_file ×1"), "{script}");

    let changelog = std::fs::read_to_string(dir.join("CHANGELOG.md")).unwrap();
    assert!(changelog.contains("## Unreleased\n\n- Fixed: `slugify` turns a run of separators"), "{changelog}");
    let tests = Command::new("sh").arg("test.sh").current_dir(&dir).output().unwrap();
    assert!(tests.status.success(), "{}", String::from_utf8_lossy(&tests.stdout));
    let original = std::fs::read_to_string(Path::new(DEMO_WORKSPACE).join("slugify.sh")).unwrap();
    assert!(original.contains("s/[^a-z0-9]/-/g"), "the checkout's demo project must keep its bug");
}

/// The human mode: progress lines on stderr without escape codes (not a terminal), the final
/// answer alone on stdout, exit 0.
#[test]
fn demo_human_run_prints_progress_on_stderr_and_the_answer_on_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let out = demo(&tmp.path().join("demo"), &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stdout.starts_with("Fixed. `slugify`"), "{stdout}");
    assert!(stdout.contains("all tests pass"), "{stdout}");
    assert!(!stderr.contains('\x1b'), "no ANSI escapes when stderr is not a terminal:\n{stderr}");
    for line in ["✓ grep \"slugify\"", "✗ shell sh test.sh", "✓ apply_patch slugify.sh", "in the background as term-2"]
    {
        assert!(stderr.contains(line), "`{line}` missing from:\n{stderr}");
    }
    assert!(stderr.contains("completed · 7 turn(s)"), "{stderr}");
}

/// L7: the offline demo never sends its project to an embedding server, even when the
/// environment names one (codebase_search would otherwise index the demo's files at start).
#[test]
fn l7_the_demo_sends_nothing_to_a_configured_embedding_server() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(KODIK)
        .args(["agent", "--demo", "--demo-dir"])
        .arg(tmp.path().join("demo"))
        .env("KODIK_EMBEDDINGS_MODEL", "text-embedding-3-small")
        .env("KODIK_EMBEDDINGS_URL", &url)
        .env("KODIK_EMBEDDINGS_KEY", "k")
        .env("XDG_CACHE_HOME", tmp.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let connected = listener.accept();
    assert!(
        matches!(&connected, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the demo connected to the embedding server: {connected:?}"
    );
}

/// The demo never writes into a folder that holds files.
#[test]
fn demo_refuses_a_non_empty_demo_dir() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("mine.txt"), "keep me").unwrap();
    let out = demo(tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

/// The calls of the recording's SSE bodies: (name, arguments or freeform text, freeform?).
fn recorded_calls(recording: &Recording) -> Vec<(String, Value, bool)> {
    let mut calls = Vec::new();
    for exchange in &recording.exchanges {
        for line in exchange.body.lines().filter_map(|l| l.strip_prefix("data: ")) {
            let event: Value = serde_json::from_str(line).unwrap();
            if event["type"] != "response.output_item.done" {
                continue;
            }
            let item = &event["item"];
            match item["type"].as_str().unwrap() {
                "function_call" => {
                    let args = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                    calls.push((item["name"].as_str().unwrap().to_owned(), args, false));
                }
                "custom_tool_call" => {
                    calls.push((item["name"].as_str().unwrap().to_owned(), item["input"].clone(), true))
                }
                _ => {}
            }
        }
    }
    calls
}

/// G10, G12, P5, K1: every call of the recording is one a gpt-5 request in Code mode can make:
/// offered tools by name (apply_patch as the freeform tool), deferred ones through call_tool,
/// and the tools the codemode script calls exist.
#[test]
fn g10_g12_every_recorded_call_fits_the_gpt5_code_mode_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let toolbox = Toolbox::builder().workspace(tmp.path()).build().unwrap();
    let plan = toolbox.plan(Mode::Code, "gpt-5");
    let offered: Vec<&str> = plan.tools.iter().map(|t| t.name.as_str()).collect();
    let deferred: Vec<&str> = plan.deferred.iter().map(|t| t.name.as_str()).collect();
    let recording: Recording = serde_json::from_str(DEMO_RECORDING).unwrap();
    assert_eq!(recording.provider, Provider::OpenAiResponses);
    let calls = recorded_calls(&recording);
    assert!(calls.len() >= 9, "{calls:?}");
    for (name, args, freeform) in &calls {
        assert!(offered.contains(&name.as_str()), "{name} is not offered to gpt-5 in Code mode: {offered:?}");
        assert_eq!(*freeform, name == "apply_patch", "{name}: only apply_patch is sent as a freeform tool");
        if name == "call_tool" {
            let inner = args["name"].as_str().unwrap();
            assert!(deferred.contains(&inner), "call_tool reaches {inner}, which is not deferred: {deferred:?}");
            assert!(args["arguments"].is_object());
        }
        if name == "codemode" {
            let code = args["code"].as_str().unwrap();
            for called in code.split("tools.").skip(1).map(|s| s.split('(').next().unwrap()) {
                assert!(toolbox.registry().get(called).is_some(), "the script calls unknown tool {called}");
            }
        }
    }
    for family in ["grep", "glob", "read_file"] {
        assert!(calls.iter().any(|(n, a, _)| n == "call_tool" && a["name"] == family), "no {family} call");
    }
}

/// A Responses stream that makes one function call.
fn call_body(call_id: &str, name: &str, args: &Value) -> String {
    let args = args.to_string();
    let added = json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": ""}});
    let done = json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": args}});
    sse(&[added, done], 100)
}

/// A Responses stream that answers with several calls `(call_id, name, args)` at once.
fn calls_body(calls: &[(&str, &str, Value)]) -> String {
    let events: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"type": "response.output_item.done", "output_index": i, "item": {"type": "function_call",
                "id": format!("fc_{i}"), "call_id": id, "name": name, "arguments": args.to_string()}})
        })
        .collect();
    sse(&events, 100)
}

/// A Responses stream that answers with text.
fn text_body(text: &str) -> String {
    sse(&[json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text})], 40)
}

fn sse(events: &[Value], input_tokens: u64) -> String {
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "usage": {"input_tokens": input_tokens, "output_tokens": 10}}});
    events
        .iter()
        .chain([&completed])
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// Runs `kodik agent` against `server` with a dummy key and `args`.
async fn agent_against(server: &ReplayServer, workspace: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(KODIK)
        .arg("agent")
        .arg("--workspace")
        .arg(workspace)
        .args(["--model", "gpt-5", "--base-url", &server.base_url()])
        .args(args)
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        // The machine's own user config (global memory, mcp.json) and search keys stay out of
        // the requests these tests look at.
        .env("KODIK_CONFIG_DIR", workspace.join("user-config"))
        .env_remove("KODIK_SEARCH_PROVIDER")
        .env_remove("KODIK_SEARXNG_URL")
        .env_remove("BRAVE_API_KEY")
        .env_remove("BRAVE_SEARCH_API_KEY")
        .env_remove("TAVILY_API_KEY")
        .env_remove("EXA_API_KEY")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// A real (non-demo) run: the model configured by flags and the key from the environment,
/// the transcript saved, --record writing a replayable recording, exit 0 — and the key never
/// printed, nor shown to the model by a command's `env`.
#[tokio::test]
async fn agent_runs_a_task_records_it_and_never_prints_the_key() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("hello.txt"), "hi\n").unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "shell", &json!({"command": "cat hello.txt && env"}))))
        .with(Exchange::sse(text_body("hello.txt says hi.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let record = ws.path().join("session.json");
    let out =
        agent_against(&server, ws.path(), &["--record", record.to_str().unwrap(), "what does hello.txt say?"]).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(stdout, "hello.txt says hi.\n");
    assert!(stderr.contains("✓ shell cat hello.txt"), "{stderr}");
    assert!(!stdout.contains("sk-test") && !stderr.contains("sk-test"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The command's output went to the model, its environment without the key.
    let sent = requests[1].body.to_string();
    assert!(sent.contains("PATH=") && !sent.contains("OPENAI_API_KEY") && !sent.contains("sk-test"), "{sent}");
    let transcripts = || {
        std::fs::read_dir(ws.path().join(".kodik/sessions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect::<Vec<_>>()
    };
    let transcript = transcripts()[0].clone();
    assert!(!std::fs::read_to_string(transcript).unwrap().contains("sk-test"));
    let saved = Recording::load(&record).unwrap();
    assert_eq!(saved.exchanges.len(), 2);
    assert!(saved.exchanges[1].body.contains("hello.txt says hi."));
    assert!(!std::fs::read_to_string(&record).unwrap().contains("sk-test"));
    let sessions = transcripts().len();
    assert_eq!(sessions, 1, "one transcript");
}

/// A run that hits --max-turns ends with status max_turns and exit 1; `--last` resumes the
/// same session.
#[tokio::test]
async fn agent_exits_1_at_max_turns_and_resumes_the_last_session() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "shell", &json!({"command": "echo one"}))))
        .with(Exchange::sse(text_body("done now")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--json", "--max-turns", "1", "echo one"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    let result = lines.last().unwrap();
    assert_eq!(result["status"], "max_turns", "{result}");
    let first_session = result["session_id"].as_str().unwrap().to_owned();

    let out = agent_against(&server, ws.path(), &["--json", "--last", "and now?"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["thread_id"], first_session.as_str(), "--last continues the same session");
    assert_eq!(lines.last().unwrap()["final_text"], "done now");
}

/// G3: with --approve read-only a command is denied (it never runs) and the model reads why;
/// the run still completes.
#[tokio::test]
async fn g3_read_only_approval_denies_a_command_and_the_run_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "shell", &json!({"command": "touch made.txt"}))))
        .with(Exchange::sse(text_body("I may not run commands here.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--json", "--approve", "read-only", "make a file"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = finished_calls(&json_lines(&out));
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1, "denied", "{calls:?}");
    assert!(!ws.path().join("made.txt").exists(), "a denied command must not run");
}

/// G3: `--approve read-only` keeps the model's own planning: its todo list and listing its
/// memory run; saving a note is denied with a reason in plain words (no internal effect name).
#[tokio::test]
async fn g3_read_only_approval_keeps_the_todo_list_and_memory_list() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".kodik/memory")).unwrap();
    std::fs::write(ws.path().join(".kodik/memory/use-pnpm.md"), "Always use pnpm.\n").unwrap();
    let calls = [
        ("call_1", "todo_write", json!({"todos": [{"id": "1", "title": "read the code", "status": "in_progress"}]})),
        ("call_2", "memory", json!({"action": "list"})),
        ("call_3", "memory", json!({"action": "save", "content": "Use yarn."})),
    ];
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(calls_body(&calls)))
        .with(Exchange::sse(text_body("Planned.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--json", "--approve", "read-only", "plan it"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = finished_calls(&json_lines(&out));
    assert_eq!(calls.len(), 3, "{calls:?}");
    // Listed as they finish, which for calls running together is in any order.
    let find = |name: &str, status: &str| {
        calls.iter().find(|(n, s, _)| n == name && s == status).unwrap_or_else(|| panic!("{calls:?}")).2.clone()
    };
    find("todo_write", "success");
    assert!(find("memory", "success").contains("use-pnpm"), "{calls:?}");
    let denied = find("memory", "denied");
    assert!(denied.contains("read-only") && !denied.contains("Conversation"), "{calls:?}");
    assert_eq!(std::fs::read_dir(ws.path().join(".kodik/memory")).unwrap().count(), 1, "nothing saved");
}

/// G11: in `--mode ask` a tool the mode does not offer, called by habit, is answered with why
/// ("not offered in Ask mode"), not "unknown tool" with a suggestion of something else, and
/// nothing changes.
#[tokio::test]
async fn g11_ask_mode_answers_a_withheld_tool_as_not_offered() {
    let ws = tempfile::tempdir().unwrap();
    let calls = [
        ("call_1", "create_file", json!({"path": "n.txt", "content": "x"})),
        ("call_2", "shell", json!({"command": "touch made.txt"})),
    ];
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(calls_body(&calls)))
        .with(Exchange::sse(text_body("I can only read here.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--json", "--mode", "ask", "make a file"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = finished_calls(&json_lines(&out));
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (name, status, output) in &calls {
        assert_eq!(status, "error", "{calls:?}");
        assert!(output.contains(&format!("`{name}` is not offered in Ask mode")), "{calls:?}");
        assert!(!output.contains("unknown tool"), "{calls:?}");
    }
    assert!(!ws.path().join("n.txt").exists() && !ws.path().join("made.txt").exists());
}

/// A2: a new conversation's first request carries the saved workspace and global memory
/// notes; `--last` does not add them again (they are in its history).
#[tokio::test]
async fn a2_saved_memory_reaches_a_new_conversations_first_request() {
    let ws = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".kodik/memory")).unwrap();
    std::fs::write(ws.path().join(".kodik/memory/use-pnpm.md"), "Always use pnpm, never npm.\n").unwrap();
    std::fs::create_dir_all(config.path().join("memory")).unwrap();
    std::fs::write(config.path().join("memory/terse.md"), "The user likes short answers.\n").unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(text_body("ok")))
        .with(Exchange::sse(text_body("ok again")));
    let server = ReplayServer::start(recording).await.unwrap();
    for args in [vec!["install the deps"], vec!["--last", "and now?"]] {
        let out = tokio::process::Command::new(KODIK)
            .arg("agent")
            .arg("--workspace")
            .arg(ws.path())
            .args(["--model", "gpt-5", "--base-url", &server.base_url()])
            .args(&args)
            .env("OPENAI_API_KEY", "sk-test")
            .env("KODIK_CONFIG_DIR", config.path())
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let requests = server.requests();
    let first = requests[0].body["input"].to_string();
    assert!(
        first.contains("Always use pnpm, never npm.") && first.contains("The user likes short answers."),
        "{first}"
    );
    let second = requests[1].body["input"].to_string();
    assert_eq!(second.matches("Always use pnpm").count(), 1, "{second}");
}

/// G11, K7: the `codemode` description in `kodik agent`'s request lists exactly the tools a
/// script can call in that request (`ALL_TOOLS`): not generate_plan, check_understanding or
/// create_lesson, which Code mode does not offer, nor web_search without a search provider.
/// Before, it listed the full registry and a script calling one of them got UnknownTool.
#[tokio::test]
async fn g11_k7_the_codemode_catalog_in_the_request_lists_exactly_what_scripts_can_call() {
    let ws = tempfile::tempdir().unwrap();
    let script = json!({"code": "return ALL_TOOLS.map(t => t.name).join(',')"});
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "codemode", &script)))
        .with(Exchange::sse(text_body("listed")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--mode", "code", "list the tools"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let requests = server.requests();
    let tools = requests[0].body["tools"].as_array().unwrap();
    let codemode = tools.iter().find(|t| t["name"] == "codemode").expect("codemode offered in Code mode");
    let description = codemode["description"].as_str().unwrap();
    let catalog = description.split_once("Tools scripts can call:\n").expect(description).1;
    let mut listed: Vec<&str> = catalog.lines().filter_map(|l| l.strip_prefix("- tools.")?.split('(').next()).collect();
    listed.sort_unstable();
    let input = requests[1].body["input"].as_array().unwrap();
    let output = input
        .iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == "call_1")
        .and_then(|i| i["output"].as_str())
        .expect("the script's result in the second request");
    let mut callable: Vec<&str> = output.trim_end().lines().last().unwrap().split(',').collect();
    callable.sort_unstable();
    assert_eq!(listed, callable, "catalog vs ALL_TOOLS\n{output}");
    assert!(listed.contains(&"edit_file") && listed.contains(&"shell"), "{listed:?}");
    for absent in ["generate_plan", "check_understanding", "create_lesson", "web_search"] {
        assert!(!listed.contains(&absent), "{absent} listed: {listed:?}");
    }
}

/// A2: many saved notes do not flood the first request: notes are shown whole up to 16 KB, the
/// rest named by id with how to read them. Before, every note went in whole (up to 200 notes of
/// 4 KB per scope).
#[tokio::test]
async fn a2_many_memory_notes_are_bounded_in_the_first_request() {
    let ws = tempfile::tempdir().unwrap();
    let memory = ws.path().join(".kodik/memory");
    std::fs::create_dir_all(&memory).unwrap();
    for i in 0..40 {
        std::fs::write(memory.join(format!("note-{i:02}.md")), format!("Fact {i}: {}\n", "x".repeat(1000))).unwrap();
    }
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("ok")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["install the deps"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let first = server.requests()[0].body["input"].to_string();
    assert!(first.contains("Fact 0: ") && !first.contains("Fact 39: "), "not bounded");
    assert!(first.contains("more notes are not shown here") && first.contains("note-39"), "{first}");
    assert!(first.len() < 20 * 1024, "the first request's input holds {} bytes", first.len());
}

/// A2: the workspace's AGENTS.md (the project's instructions for coding agents) reaches a new
/// conversation's first request, saying where it came from, cut at 32 KB with a note where the
/// rest is; `--last` does not add it again, and `--untrusted` (authors not trusted) leaves it
/// out. Before, it was never read.
#[tokio::test]
async fn a2_agents_md_reaches_a_new_conversations_first_request_bounded() {
    let ws = tempfile::tempdir().unwrap();
    let filler = "Keep functions short and name them for what they do.\n".repeat(1000);
    std::fs::write(ws.path().join("AGENTS.md"), format!("Use pnpm, never npm.\n{filler}TAIL-MARKER\n")).unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(text_body("ok")))
        .with(Exchange::sse(text_body("ok again")))
        .with(Exchange::sse(text_body("ok untrusted")));
    let server = ReplayServer::start(recording).await.unwrap();
    let untrusted = tempfile::tempdir().unwrap();
    std::fs::write(untrusted.path().join("AGENTS.md"), "Use pnpm, never npm.\n").unwrap();
    for (dir, args) in [
        (ws.path(), vec!["install the deps"]),
        (ws.path(), vec!["--last", "and now?"]),
        (untrusted.path(), vec!["--untrusted", "install the deps"]),
    ] {
        let out = agent_against(&server, dir, &args).await;
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let requests = server.requests();
    let first = requests[0].body["input"].to_string();
    assert!(
        first.contains("From AGENTS.md at the workspace root") && first.contains("Use pnpm, never npm."),
        "{first}"
    );
    assert!(first.contains("AGENTS.md is cut here") && !first.contains("TAIL-MARKER"), "not cut at 32 KB");
    assert!(first.len() < 40 * 1024, "the first request holds {} bytes", first.len());
    let second = requests[1].body["input"].to_string();
    assert_eq!(second.matches("Use pnpm, never npm.").count(), 1, "given again on --last");
    let third = requests[2].body["input"].to_string();
    assert!(!third.contains("Use pnpm"), "read in an untrusted workspace: {third}");
}

/// --max-time stops a run whose model stalls: status max_wall, exit 1, well before the stall ends.
#[tokio::test]
async fn agent_max_time_stops_a_stalled_run_with_exit_1() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("never finished")));
    let options = ReplayOptions { stall: Some((0, 20)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording, options).await.unwrap();
    let run = agent_against(&server, ws.path(), &["--json", "--max-time", "1", "wait"]);
    let out = tokio::time::timeout(Duration::from_secs(30), run).await.expect("--max-time did not stop the run");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json_lines(&out).last().unwrap()["status"], "max_wall");
}

/// A5, G7: `--last` and `--resume ID` refuse a conversation another `kodik agent` is still
/// running (exit 2, naming it), without touching its transcript or asking the model; once that
/// run has ended, `--last` continues it.
#[tokio::test]
async fn a5_g7_last_and_resume_refuse_a_conversation_another_process_is_running() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(text_body("never finished")))
        .with(Exchange::sse(text_body("continued after the first run")));
    let options = ReplayOptions { stall: Some((0, 20)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording, options).await.unwrap();
    let first = tokio::spawn({
        let (url, ws) = (server.base_url(), ws.path().to_path_buf());
        async move {
            tokio::process::Command::new(KODIK)
                .arg("agent")
                .arg("--workspace")
                .arg(&ws)
                .args(["--model", "gpt-5", "--base-url", &url, "--json", "--max-time", "6", "task A"])
                .env("OPENAI_API_KEY", "sk-test")
                .stdin(Stdio::null())
                .output()
                .await
                .unwrap()
        }
    });
    for _ in 0..400 {
        if !server.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.requests().len(), 1, "the first run never sent its request");
    let sessions = ws.path().join(".kodik/sessions");
    let transcript = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let id = transcript.file_stem().unwrap().to_str().unwrap().to_owned();
    let before = std::fs::read_to_string(&transcript).unwrap();
    for args in [vec!["--last", "task B"], vec!["--resume", id.as_str(), "task B"]] {
        let out = agent_against(&server, ws.path(), &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&id) && stderr.contains("running in another kodik process"), "{args:?}: {stderr}");
    }
    assert_eq!(server.requests().len(), 1, "a refused resume asks the model nothing");
    assert_eq!(std::fs::read_to_string(&transcript).unwrap(), before, "a refused resume writes nothing");

    let out = tokio::time::timeout(Duration::from_secs(30), first).await.unwrap().unwrap();
    assert_eq!(json_lines(&out).last().unwrap()["status"], "max_wall", "{}", String::from_utf8_lossy(&out.stderr));
    let out = agent_against(&server, ws.path(), &["--json", "--last", "go on"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json_lines(&out)[0]["thread_id"], id.as_str());
    let sent = server.requests()[1].body.to_string();
    assert!(sent.contains("task A") && sent.contains("go on") && !sent.contains("task B"), "{sent}");
}

/// Usage: a task of spaces only and `--max-turns 0` are usage errors (exit 2) before anything
/// runs or is saved; before, the blank task was sent (Claude refuses it) and `--max-turns 0`
/// reported "the model still had calls to make" without asking it anything.
#[tokio::test]
async fn agent_refuses_a_blank_task_and_max_turns_0() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("hello")));
    let server = ReplayServer::start(recording).await.unwrap();
    for (args, says) in
        [(vec!["   "], "no task given"), (vec!["--max-turns", "0", "go"], "--max-turns must be at least 1")]
    {
        let out = agent_against(&server, ws.path(), &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(server.requests().is_empty());
    assert!(!ws.path().join(".kodik/sessions").exists(), "no conversation saved");
}

/// No model configured: a usage error naming what to set, before anything runs.
#[test]
fn agent_without_a_model_says_what_to_set() {
    let ws = tempfile::tempdir().unwrap();
    let out = Command::new(KODIK)
        .args(["agent", "--workspace"])
        .arg(ws.path())
        .arg("do something")
        .env_remove("KODIK_MODEL")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KODIK_MODEL"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// G6: Ctrl-C (SIGINT) while the model streams cancels the run: result status cancelled, exit 130.
#[tokio::test]
async fn agent_interrupted_by_sigint_exits_130() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("never finished")));
    // The response stalls after 20 bytes and the connection stays open.
    let options = ReplayOptions { stall: Some((0, 20)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording, options).await.unwrap();
    let child = tokio::process::Command::new(KODIK)
        .arg("agent")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--model", "gpt-5", "--base-url", &server.base_url(), "--json", "wait"])
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    // Wait until the request is in flight, then interrupt.
    for _ in 0..200 {
        if !server.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.requests().len(), 1, "the agent never sent its request");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await.unwrap().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines.last().unwrap()["status"], "cancelled");
}

/// S3: `--background-wait 0` ends the run at the answer, naming the command still running,
/// instead of waiting for it.
#[tokio::test]
async fn agent_background_wait_flag_bounds_the_wait_for_background_commands() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "shell", &json!({"command": "sleep 30", "run_in_background": true}))))
        .with(Exchange::sse(text_body("It runs in the background.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let started = std::time::Instant::now();
    let out = agent_against(&server, ws.path(), &["--background-wait", "0", "--context-window", "64000", "go"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}\n{stderr}", started.elapsed());
    assert!(!stderr.contains("waiting up to"), "{stderr}");
    assert!(stderr.contains("sleep 30"), "the command left running is named: {stderr}");
    assert_eq!(server.requests().len(), 2);
}

/// A Responses endpoint on 127.0.0.1 that answers each request by what it holds, for runs where
/// a parent and its sub-agents talk to one server concurrently and their order is not fixed.
/// `answer` gets the request body's text and returns the SSE body and a pause before it.
struct RoutingServer {
    addr: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl RoutingServer {
    fn start(answer: fn(&str) -> (String, Duration)) -> Self {
        use std::io::{BufRead as _, Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let seen = std::sync::Arc::clone(&seen);
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let body = String::from_utf8(body).unwrap();
                    seen.lock().unwrap().push(body.clone());
                    let (sse, pause) = answer(&body);
                    std::thread::sleep(pause);
                    let mut stream = stream;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
                        sse.len()
                    );
                });
            }
        });
        Self { addr, requests }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// A3 with S3: a background sub-agent still working when the parent answers is waited for, as a
/// background command is, and its report reaches the parent in one more request — before, the
/// run ended "completed" at once and the child was killed mid-request with its transcript cut.
#[tokio::test]
async fn a3_s3_the_run_waits_for_a_background_sub_agent_and_reads_its_report() {
    // The child answers only once the run has announced that it waits for it, so there is
    // always a sub-agent to wait for, however slow the machine (a fixed pause once let the
    // child finish first under load).
    static RUN_WAITS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    fn answer(body: &str) -> (String, Duration) {
        use std::sync::atomic::Ordering;
        // The parent's later requests hold the child's prompt too, in the sub_agent call.
        if body.contains("child report: the slow answer") {
            return (text_body("PARENT FINAL with the child's report"), Duration::ZERO);
        }
        if body.contains("function_call_output") {
            return (text_body("The child works on it."), Duration::ZERO);
        }
        if body.contains("CHILD-TASK") {
            let start = std::time::Instant::now();
            while !RUN_WAITS.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return (text_body("child report: the slow answer"), Duration::ZERO);
        }
        let args = json!({"description": "slow child", "prompt": "CHILD-TASK: be slow", "background": true});
        (call_body("call_1", "sub_agent", &args), Duration::ZERO)
    }
    let ws = tempfile::tempdir().unwrap();
    let server = RoutingServer::start(answer);
    let mut child = tokio::process::Command::new(KODIK)
        .args(["agent", "--workspace", ws.path().to_str().unwrap(), "--model", "gpt-5", "--json"])
        .args(["--base-url", &server.base_url(), "--context-window", "64000", "PARENT: go"])
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        .env("KODIK_CONFIG_DIR", ws.path().join("user-config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut line = String::new();
    while tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line).await.unwrap() > 0 {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        if v["type"] == "background.waiting" {
            RUN_WAITS.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        lines.push(v);
        line.clear();
    }
    assert!(child.wait().await.unwrap().success(), "{lines:?}");
    let result = lines.iter().find(|l| l["type"] == "result").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(result["final_text"], "PARENT FINAL with the child's report", "{result}");
    assert!(result["error"].is_null(), "{result}");
    assert!(
        lines.iter().any(|l| l["type"] == "background.waiting" && l["terminals"].to_string().contains("slow child")),
        "the wait is announced, naming the sub-agent: {lines:?}"
    );
    let parent_requests = server.requests().iter().filter(|b| b.contains("PARENT: go")).count();
    assert_eq!(parent_requests, 3, "the parent asked once more with the report");
}

/// A3 with S3: with `--background-wait 0` the run does not wait, and its result names the
/// sub-agent it cut off instead of a clean "completed".
#[tokio::test]
async fn a3_s3_background_wait_0_names_the_sub_agent_cut_off() {
    fn answer(body: &str) -> (String, Duration) {
        if body.contains("function_call_output") {
            return (text_body("The child works on it."), Duration::ZERO);
        }
        if body.contains("CHILD-TASK") {
            return (text_body("child report"), Duration::from_secs(5));
        }
        let args = json!({"description": "slow child", "prompt": "CHILD-TASK: be slow", "background": true});
        (call_body("call_1", "sub_agent", &args), Duration::ZERO)
    }
    let ws = tempfile::tempdir().unwrap();
    let server = RoutingServer::start(answer);
    let out = tokio::process::Command::new(KODIK)
        .args(["agent", "--workspace", ws.path().to_str().unwrap(), "--model", "gpt-5", "--json"])
        .args(["--base-url", &server.base_url(), "--context-window", "64000", "--background-wait", "0", "go"])
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        .env("KODIK_CONFIG_DIR", ws.path().join("user-config"))
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let lines = json_lines(&out);
    let result = lines.iter().find(|l| l["type"] == "result").unwrap_or_else(|| panic!("{lines:?}"));
    let error = result["error"].as_str().unwrap_or_else(|| panic!("no error naming the sub-agent: {result}"));
    assert!(error.contains("slow child") && error.contains("cut off"), "{error}");
}

/// A1 with A5: the todo list outlives the process: `--last` restores it from the transcript, so
/// the model's merge by id works — before, the list came back empty and every update failed
/// with "no item has id 1".
#[tokio::test]
async fn a1_a5_the_todo_list_comes_back_with_last() {
    let ws = tempfile::tempdir().unwrap();
    let plan = json!({"todos": [{"title": "step A"}, {"title": "step B"}, {"title": "step C"}]});
    let progress =
        json!({"merge": true, "todos": [{"id": "1", "status": "completed"}, {"id": "2", "status": "in_progress"}]});
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "todo_write", &plan)))
        .with(Exchange::sse(text_body("planned")))
        .with(Exchange::sse(call_body("call_2", "todo_write", &progress)))
        .with(Exchange::sse(text_body("progressed")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--context-window", "64000", "PLAN it"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = agent_against(&server, ws.path(), &["--context-window", "64000", "--last", "PROGRESS it"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let last = requests[3].body.to_string();
    assert!(
        last.contains("[x] 1: step A") && last.contains("[~] 2: step B") && last.contains("[ ] 3: step C"),
        "the merge found the restored list: {last}"
    );
}

/// G11: `kodik agent` with no terminal (stdin from /dev/null) does not offer ask_questions,
/// which could only fail there; the other conversation tools (memory) still are.
#[tokio::test]
async fn g11_agent_without_a_terminal_does_not_offer_ask_questions() {
    let ws = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(text_body("done")));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = agent_against(&server, ws.path(), &["--context-window", "64000", "go"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let offered = server.requests()[0].body["tools"].to_string();
    assert!(!offered.contains("\"ask_questions\""), "{offered}");
    assert!(offered.contains("\"memory\""), "{offered}");
}

/// A6 on a terminal (script(1) gives `kodik agent` one): while a question waits for the
/// answer, no spinner redraws the line — each frame cleared it, erasing the prompt and what the
/// person typed — and the answer typed there reaches the model.
#[tokio::test]
async fn a6_on_a_terminal_no_spinner_redraws_over_the_question_and_the_answer_counts() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let has_script = Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(has_script, "this test needs script(1) from util-linux to give kodik a terminal");
    let ws = tempfile::tempdir().unwrap();
    let question =
        json!({"questions": [{"question": "Which DB?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}]});
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call_body("call_1", "ask_questions", &question)))
        .with(Exchange::sse(text_body("Going with it.")));
    let server = ReplayServer::start(recording).await.unwrap();
    let line = format!(
        "{KODIK} agent --workspace {} --model gpt-5 --base-url {} --context-window 64000 go",
        ws.path().display(),
        server.base_url()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("OPENAI_API_KEY", "sk-test-not-a-real-key")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let prompt = "untouched) > ";
    let at_prompt = tokio::time::timeout(Duration::from_secs(30), async {
        while !String::from_utf8_lossy(&seen).contains(prompt) {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "kodik ended before asking: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    assert!(at_prompt.is_ok(), "no question on the terminal: {}", String::from_utf8_lossy(&seen));
    // A spinner ticks every 80 ms: in 1 s it would have redrawn a dozen times.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            let n = stdout.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let shown = String::from_utf8_lossy(&seen).to_string();
    let after = &shown[shown.find(prompt).unwrap() + prompt.len()..];
    // The call's own `→ ask_questions` line may come just after the prompt (its event and the
    // prompt race); a line clear (ESC[2K) is what erased the prompt and the typing.
    assert!(!after.contains("\x1b[2K"), "the prompt line was redrawn: {after:?}");
    stdin.write_all(b"2\n").await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), async {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest).await;
        child.wait().await
    })
    .await
    .expect("kodik did not end after the answer");
    assert!(status.unwrap().success());
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body["input"].to_string().contains("SQLite"), "{}", requests[1].body["input"]);
}
