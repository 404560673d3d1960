//! `sub_agent` and `send_message` with real kodik-agent children talking to kodik-model's
//! loopback replay server, one recording per child (SPEC A3, A4, A5, G6).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kodik_tools::Toolbox;
use kodik_tools::agent::AgentConfig;
use kodik_tools::core::{ToolCall, ToolOutput, ToolStatus};
use kodik_tools::model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_tools::model::{ModelClient, ModelConfig, Provider};
use serde_json::{Value, json};

enum Step {
    Text(&'static str),
    Call(&'static str, &'static str, Value),
}

/// A Responses SSE body with these steps, then `response.completed`.
fn body(steps: &[Step]) -> String {
    let mut seq = 0u64;
    let mut out = String::new();
    let mut ev = |mut v: Value| {
        v["sequence_number"] = json!(seq);
        seq += 1;
        out.push_str(&format!("event: {}\ndata: {}\n\n", v["type"].as_str().unwrap(), v));
    };
    ev(json!({"type": "response.created", "response": {"id": "resp", "status": "in_progress", "output": []}}));
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Text(t) => ev(
                json!({"type": "response.output_text.delta", "item_id": format!("msg_{i}"), "output_index": i, "content_index": 0, "delta": t}),
            ),
            Step::Call(id, name, args) => {
                let args = args.to_string();
                ev(
                    json!({"type": "response.output_item.added", "output_index": i, "item": {"id": format!("fc_{i}"), "type": "function_call", "status": "in_progress", "arguments": "", "call_id": id, "name": name}}),
                );
                ev(
                    json!({"type": "response.output_item.done", "output_index": i, "item": {"id": format!("fc_{i}"), "type": "function_call", "status": "completed", "arguments": args, "call_id": id, "name": name}}),
                );
            }
        }
    }
    ev(
        json!({"type": "response.completed", "response": {"id": "resp", "status": "completed", "output": [], "usage": {"input_tokens": 100, "output_tokens": 10}}}),
    );
    out
}

/// A replay server answering with `bodies` in turn.
async fn replay(bodies: impl IntoIterator<Item = String>, options: ReplayOptions) -> ReplayServer {
    let recording =
        bodies.into_iter().fold(Recording::new(Provider::OpenAiResponses, "gpt-5"), |r, b| r.with(Exchange::sse(b)));
    ReplayServer::start_with(recording, options).await.unwrap()
}

/// A Responses client of `server`.
fn model_at(server: &ReplayServer) -> Arc<dyn ModelClient> {
    kodik_tools::model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("sk-test").retries(0),
    )
    .unwrap()
}

async fn toolbox(dir: &std::path::Path, bodies: Vec<String>, options: ReplayOptions) -> (Toolbox, ReplayServer) {
    let server = replay(bodies, options).await;
    let tb = Toolbox::builder().workspace(dir).build().unwrap();
    assert!(tb.enable_sub_agents(model_at(&server), AgentConfig::default().max_turns(5)));
    (tb, server)
}

async fn call(tb: &Toolbox, name: &str, args: Value) -> ToolOutput {
    tb.call(&ToolCall::new("c", name, args)).await
}

/// The text of every `input` item of a recorded Responses request, in order.
fn input_texts(body: &Value) -> Vec<String> {
    body["input"].as_array().unwrap().iter().map(|i| i.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a5_a_real_child_answers_then_resumes_its_saved_conversation_on_a_message() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "parsers: json, toml\n").unwrap();
    let (tb, server) = toolbox(
        dir.path(),
        vec![
            body(&[Step::Call("call_read", "read_file", json!({"path": "notes.txt"}))]),
            body(&[Step::Text("There are 2 parsers: json and toml.")]),
            body(&[Step::Text("Their tests live in tests/parsers.rs.")]),
        ],
        ReplayOptions::default(),
    )
    .await;

    let out = call(
        &tb,
        "sub_agent",
        json!({"description": "count parsers", "prompt": "How many parsers are listed in notes.txt?", "mode": "ask"}),
    )
    .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("There are 2 parsers: json and toml."), "{}", out.text_content());
    let id = out.meta["agent_id"].as_str().unwrap().to_string();
    assert!(dir.path().join(".kodik/sessions").join(format!("{id}.jsonl")).exists(), "the child has a transcript");

    // A finished child resumes its exact saved conversation.
    let out = call(&tb, "send_message", json!({"agent_id": id, "message": "Where are their tests?"})).await;
    assert_eq!(out.meta["delivered"], "resumed", "{}", out.text_content());
    let out = call(&tb, "agent_status", json!({"agent_id": id, "wait": true})).await;
    assert!(out.text_content().contains("Their tests live in tests/parsers.rs."), "{}", out.text_content());

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let third = input_texts(&requests[2].body);
    let second = input_texts(&requests[1].body);
    assert_eq!(&third[..second.len()], &second[..], "the resumed request starts with the whole earlier history");
    let rest = third[second.len()..].join("\n");
    assert!(rest.contains("There are 2 parsers") && rest.contains("Where are their tests?"), "{rest}");
    assert!(second.join("\n").contains("parsers: json, toml"), "the child read the file itself: {second:#?}");
    // The child runs in its own mode (Ask: read_file offered directly, nothing that edits), also
    // after resuming.
    for r in [&requests[0], &requests[2]] {
        let tools = offered(&r.body);
        assert!(tools.iter().any(|t| t == "read_file") && !tools.iter().any(|t| t == "edit_file"), "{tools:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a_background_child_settles_while_the_parent_runs_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let (tb, _server) =
        toolbox(dir.path(), vec![body(&[Step::Text("Background work done.")])], ReplayOptions::default()).await;
    let out = call(&tb, "sub_agent", json!({"description": "bg", "prompt": "do it", "background": true})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let id = out.meta["agent_id"].as_str().unwrap().to_string();
    // The parent waits on something else meanwhile.
    let out = call(&tb, "shell", json!({"command": "sleep 0.5; echo parent-done"})).await;
    assert!(out.text_content().contains("parent-done"), "{}", out.text_content());
    let out = call(&tb, "agent_status", json!({})).await;
    assert!(out.text_content().contains(&format!("- {id} [completed] bg")), "{}", out.text_content());
    let reports = tb.conversation().take_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].1.text, "Background work done.");
}

/// Processes whose command line is exactly `argv`.
fn processes_running(argv: &[&str]) -> usize {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
        .count()
}

async fn wait_for(argv: &[&str], running: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while (processes_running(argv) > 0) != running && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (processes_running(argv) > 0) == running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_cancelling_the_parents_call_stops_the_child_and_its_command() {
    // An argument no other process uses, so the checks see this test's command only.
    let secs = format!("31.{:07}", std::process::id());
    let argv = ["sleep", secs.as_str()];
    let dir = tempfile::tempdir().unwrap();
    let (tb, _server) = toolbox(
        dir.path(),
        vec![body(&[Step::Call("call_sleep", "shell", json!({"command": format!("sleep {secs}")}))])],
        ReplayOptions::default(),
    )
    .await;
    let tb = Arc::new(tb);
    let parent_cancel = tb.context().cancel.clone();
    let watched = argv.map(String::from);
    let watcher = tokio::spawn(async move {
        let argv = [watched[0].as_str(), watched[1].as_str()];
        // Cancel once the child's command really runs, so the test cannot pass on one that never started.
        let seen = wait_for(&argv, true).await;
        parent_cancel.cancel();
        seen
    });
    let out = call(&tb, "sub_agent", json!({"description": "sleeper", "prompt": "sleep a while"})).await;
    assert!(watcher.await.unwrap(), "the child's command never started");
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text_content());
    assert!(wait_for(&argv, false).await, "the child's command outlived the parent's cancelled call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a4_a5_an_agents_conversation_is_published_listed_and_resumed_once_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (tb, _server) = toolbox(
        dir.path(),
        vec![body(&[Step::Text("The build is green.")]), body(&[Step::Text("Still green after the merge.")])],
        ReplayOptions::default(),
    )
    .await;
    let model = model_at(&_server);
    let agent = tb.agent(model, AgentConfig::default());
    let store = Arc::new(kodik_tools::conversation::FileStore::for_workspace(dir.path()));
    let publisher = kodik_tools::publish_sessions(&agent, store.clone(), dir.path().to_path_buf());
    let mut conv = agent.start().unwrap();
    let outcome = conv.run("Is the build green?", kodik_tools::core::CancellationToken::new()).await;
    assert_eq!(outcome.final_text, "The build is green.");
    let id = conv.id().to_string();

    // Another conversation (another toolbox, as in another process) lists it.
    let other = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let listed = async || call(&other, "agent_status", json!({"scope": "sessions", "query": "build green"})).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = listed().await;
    while !out.text_content().contains("[idle]") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        out = listed().await;
    }
    let text = out.text_content();
    // Titled by what the user asked.
    assert!(text.contains(&format!("- {id} [idle] Is the build green?")), "{text}");
    assert!(text.contains("mode code, model gpt-5") && text.contains("context 0% full"), "{text}");

    drop(conv);
    drop(agent);
    publisher.await.unwrap();
    use kodik_tools::conversation::ConversationStore as _;
    assert_eq!(store.get(&id).unwrap().unwrap().status, kodik_tools::schema::agent::SessionState::Closed);

    // A closed conversation messaged from another one resumes its saved conversation at once (A5).
    let sender = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let model = model_at(&_server);
    assert!(sender.enable_sub_agents(model, AgentConfig::default()));
    let out = call(&sender, "send_message", json!({"agent_id": id, "message": "And after the merge?"})).await;
    assert_eq!(out.meta["delivered"], "resumed_conversation", "{}", out.text_content());
    let out = call(&sender, "agent_status", json!({"agent_id": id, "wait": true})).await;
    assert!(out.text_content().contains("Still green after the merge."), "{}", out.text_content());
    let requests = _server.requests();
    let (first, second) = (input_texts(&requests[0].body), input_texts(&requests[1].body));
    assert_eq!(&second[..first.len()], &first[..], "resumed with its whole history");
    assert!(second[first.len()..].join("\n").contains("And after the merge?"));
}

/// A background child's report reaches the parent model in its next request, once (A3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a_background_childs_report_goes_into_the_parents_next_request() {
    let dir = tempfile::tempdir().unwrap();
    // The child talks to its own server, so parent and child requests cannot race for
    // exchanges; its answer streams slowly enough (≥ 0.3 s) to settle during the parent's
    // `sleep 1`, not before the parent's second request.
    let slow = ReplayOptions { chunk_delay: Duration::from_millis(150), ..Default::default() };
    let (tb, child_server) = toolbox(dir.path(), vec![body(&[Step::Text("Found 3 parsers.")])], slow).await;
    let parent_bodies = [
        body(&[Step::Call(
            "call_bg",
            "sub_agent",
            json!({"description": "count", "prompt": "count parsers", "background": true}),
        )]),
        // The parent waits on something else while the child settles.
        body(&[Step::Call("call_wait", "shell", json!({"command": "sleep 1"}))]),
        body(&[Step::Text("The child found 3 parsers.")]),
    ];
    let parent_server = replay(parent_bodies, ReplayOptions::default()).await;
    let parent_model = model_at(&parent_server);
    let agent = tb.agent(parent_model, AgentConfig::default().max_turns(5));
    let mut conversation = agent.start().unwrap();
    let outcome = conversation.run("count the parsers in the background", Default::default()).await;
    assert_eq!(outcome.final_text, "The child found 3 parsers.", "{outcome:?}");
    assert_eq!(child_server.requests().len(), 1, "the child ran");

    let requests = parent_server.requests();
    assert_eq!(requests.len(), 3);
    let third = input_texts(&requests[2].body).join("\n");
    assert!(third.contains("completed") && third.contains("Found 3 parsers."), "{third}");
    // Handed out once: the second request had none, and nothing is left queued.
    assert!(!input_texts(&requests[1].body).join("\n").contains("Found 3 parsers."));
    assert!(tb.conversation().take_reports().is_empty());
}

/// The names of the tools a recorded Responses request offered.
fn offered(request: &Value) -> Vec<String> {
    request["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap_or_default().to_string()).collect()
}

/// A3, A5: with the default depth limit (2) a real child starts a real grandchild, which is not
/// offered `sub_agent` itself, messages its parent mid-run (child → parent), and reports; the
/// child's next request carries both the message and the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a5_a_child_delegates_to_a_grandchild_which_messages_it_before_its_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let (tb, server) = toolbox(
        dir.path(),
        vec![
            // The child delegates.
            body(&[Step::Call(
                "call_sub",
                "sub_agent",
                json!({"description": "count parsers", "prompt": "Count the parsers.", "mode": "ask"}),
            )]),
            // The grandchild tells its parent how far it got, then reports.
            body(&[Step::Call(
                "call_msg",
                "send_message",
                json!({"parent": true, "message": "halfway: 2 parsers so far"}),
            )]),
            body(&[Step::Text("grandchild done: 3 parsers")]),
            // The child answers.
            body(&[Step::Text("child done: 3 parsers")]),
        ],
        ReplayOptions::default(),
    )
    .await;
    let out =
        call(&tb, "sub_agent", json!({"description": "delegate", "prompt": "Delegate the count.", "mode": "ask"}))
            .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("child done: 3 parsers"), "{}", out.text_content());

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let (child, grandchild) = (offered(&requests[0].body), offered(&requests[1].body));
    assert!(child.iter().any(|t| t == "sub_agent"), "the child (depth 1) may delegate: {child:?}");
    assert!(
        !grandchild.iter().any(|t| t == "sub_agent"),
        "the grandchild (depth 2) is not offered sub_agent: {grandchild:?}"
    );
    assert!(grandchild.iter().any(|t| t == "send_message"), "{grandchild:?}");
    let reply = input_texts(&requests[2].body).join("\n");
    assert!(reply.contains("Message delivered to your parent"), "{reply}");
    let last = input_texts(&requests[3].body).join("\n");
    assert!(last.contains("[message from sub-agent") && last.contains("halfway: 2 parsers so far"), "{last}");
    assert!(last.contains("grandchild done: 3 parsers"), "{last}");
}

/// A5: a message to a running child reaches it at its next model request, inside the same run
/// (not after the run settles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a5_a_message_to_a_running_child_arrives_at_its_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let (tb, server) = toolbox(
        dir.path(),
        vec![
            body(&[Step::Call("call_wait", "shell", json!({"command": "touch started; sleep 1"}))]),
            body(&[Step::Text("Noted: skip the docs.")]),
        ],
        ReplayOptions::default(),
    )
    .await;
    let out = call(&tb, "sub_agent", json!({"description": "bg", "prompt": "work", "background": true})).await;
    let id = out.meta["agent_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(marker.exists(), "the child's command never ran");
    let out = call(&tb, "send_message", json!({"agent_id": id, "message": "Skip the docs."})).await;
    assert_eq!(out.meta["delivered"], "queued", "{}", out.text_content());
    let out = call(&tb, "agent_status", json!({"agent_id": id, "wait": true})).await;
    assert!(out.text_content().contains("Noted: skip the docs."), "{}", out.text_content());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one run: the message did not start another");
    let second = input_texts(&requests[1].body).join("\n");
    assert!(second.contains("[message from your parent agent") && second.contains("Skip the docs."), "{second}");
}

/// G6, A3: cancelling the parent's run stops its background children and their commands, not
/// only its foreground ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_cancelling_the_parents_run_stops_its_background_child_and_its_command() {
    let secs = format!("32.{:07}", std::process::id());
    let argv = ["sleep", secs.as_str()];
    let dir = tempfile::tempdir().unwrap();
    let (tb, _child_server) = toolbox(
        dir.path(),
        vec![body(&[Step::Call("call_sleep", "shell", json!({"command": format!("sleep {secs}")}))])],
        ReplayOptions::default(),
    )
    .await;
    let parent_bodies = [
        body(&[Step::Call(
            "call_bg",
            "sub_agent",
            json!({"description": "sleeper", "prompt": "sleep", "background": true}),
        )]),
        // The parent waits on something else until the user cancels.
        body(&[Step::Call("call_wait", "shell", json!({"command": "sleep 20"}))]),
    ];
    let parent_server = replay(parent_bodies, ReplayOptions::default()).await;
    let parent_model = model_at(&parent_server);
    let agent = tb.agent(parent_model, AgentConfig::default().max_turns(5));
    let mut conversation = agent.start().unwrap();
    let cancel = kodik_tools::core::CancellationToken::new();
    let (stop, watched) = (cancel.clone(), argv.map(String::from));
    let watcher = tokio::spawn(async move {
        let seen = wait_for(&[watched[0].as_str(), watched[1].as_str()], true).await;
        stop.cancel();
        seen
    });
    let outcome = conversation.run("start a sleeper in the background", cancel).await;
    assert!(watcher.await.unwrap(), "the child's command never started");
    assert_eq!(outcome.status, kodik_tools::agent::RunStatus::Cancelled, "{outcome:?}");
    assert!(wait_for(&argv, false).await, "the background child's command outlived the parent's cancelled run");
    let out = call(&tb, "agent_status", json!({})).await;
    assert!(out.text_content().contains("[cancelled] sleeper"), "{}", out.text_content());
}

/// A3: a child's code-mode scripts reach the child's own conversation tools: its todo list is
/// its own, the parent's stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a_childs_script_writes_the_childs_todo_list_not_its_parents() {
    let dir = tempfile::tempdir().unwrap();
    let script = "await tools.todo_write({ todos: [{ title: 'child step' }] });";
    let (tb, server) = toolbox(
        dir.path(),
        vec![body(&[Step::Call("call_code", "codemode", json!({"code": script}))]), body(&[Step::Text("Planned.")])],
        ReplayOptions::default(),
    )
    .await;
    let out = call(&tb, "sub_agent", json!({"description": "plan", "prompt": "plan it"})).await;
    assert!(out.text_content().contains("Planned."), "{}", out.text_content());
    let second = input_texts(&server.requests()[1].body).join("\n");
    assert!(second.contains("child step"), "the script's call succeeded: {second}");
    assert!(tb.conversation().todos().is_empty(), "the parent's list: {:?}", tb.conversation().todos());
}

/// G11, A3: a conversation the user started in Ask mode cannot change files through a
/// sub-agent. A child asked for in Code mode is refused (before any model request), naming the
/// tools it would have gained; a child without `mode` runs in Ask mode, and its own Code-mode
/// grandchild is refused too, so nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g11_a3_a_sub_agent_of_an_ask_mode_conversation_cannot_run_in_code_mode() {
    let dir = tempfile::tempdir().unwrap();
    let server = replay(
        vec![
            // The child (no mode given) tries to escape through a Code-mode grandchild.
            body(&[Step::Call(
                "call_sub",
                "sub_agent",
                json!({"description": "write", "prompt": "Create escaped.txt.", "mode": "code"}),
            )]),
            body(&[Step::Text("child done: nothing changed")]),
        ],
        ReplayOptions::default(),
    )
    .await;
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let config = AgentConfig::default().max_turns(5).mode(kodik_tools::harness::Mode::Ask);
    assert!(tb.enable_sub_agents(model_at(&server), config));

    let out = call(
        &tb,
        "sub_agent",
        json!({"description": "write", "prompt": "Run `echo x > escaped.txt`.", "mode": "code"}),
    )
    .await;
    assert!(!out.is_success(), "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("ask mode") && text.contains("code mode") && text.contains("shell"), "{text}");
    assert!(server.requests().is_empty(), "the refused child made no model request");

    let out = call(&tb, "sub_agent", json!({"description": "look", "prompt": "Look around."})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("child done: nothing changed"), "{}", out.text_content());
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools = offered(&requests[0].body);
    assert!(
        tools.iter().any(|t| t == "read_file") && !tools.iter().any(|t| t == "shell" || t == "apply_patch"),
        "the child runs in Ask mode: {tools:?}"
    );
    let reply = input_texts(&requests[1].body).join("\n");
    assert!(reply.contains("runs in ask mode") && reply.contains("code mode"), "{reply}");
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!dir.path().join("escaped.txt").exists(), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_sub_agent_is_offered_only_once_enable_sub_agents_can_run_it() {
    use kodik_tools::harness::Mode;
    let dir = tempfile::tempdir().unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let offered = |tb: &Toolbox| tb.plan(Mode::Code, "claude-sonnet-4-5").tools.iter().any(|t| t.name == "sub_agent");
    assert!(!offered(&tb), "no runner yet: the model would only be told sub-agents are unavailable");
    // Never contacted: the plan changes when the runner is set, not when a child runs.
    let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url("http://127.0.0.1:9/v1").api_key("k");
    let model = kodik_tools::model::client(config).unwrap();
    assert!(tb.enable_sub_agents(model, AgentConfig::default()));
    assert!(offered(&tb));
}
