//! The agent loop end to end: a real Responses client against the loopback replay server,
//! real tools (search, edit, shell) in a temporary workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::{Duration, Instant};

use common::*;
use kodik_agent::{AgentConfig, AgentEvent, ApprovalMode, CancellationToken, RunStatus};
use kodik_core::ToolStatus;
use kodik_model::Item;
use kodik_model::Provider;
use kodik_model::replay::{Exchange, Recording, ReplayOptions};
use serde_json::{Value, json};

fn position(events: &[AgentEvent], pred: impl Fn(&AgentEvent) -> bool) -> usize {
    events.iter().position(pred).unwrap_or_else(|| panic!("event not found in {events:#?}"))
}

fn started(id: &'static str) -> impl Fn(&AgentEvent) -> bool {
    move |e| matches!(e, AgentEvent::ToolCallStarted { call_id, .. } if call_id == id)
}

fn finished(id: &'static str) -> impl Fn(&AgentEvent) -> bool {
    move |e| matches!(e, AgentEvent::ToolCallFinished { call_id, .. } if call_id == id)
}

fn delta(text: &'static str) -> impl Fn(&AgentEvent) -> bool {
    move |e| matches!(e, AgentEvent::TextDelta { text: t } if t == text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g4_a_search_starts_while_the_response_streams_and_a_patch_waits_for_its_end() {
    let patch = "*** Begin Patch\n*** Add File: new.txt\n+made by the patch\n*** End Patch\n";
    let first = body(
        &[
            Step::Call("call_grep", "grep", json!({"pattern": "needle"})),
            Step::Text("searching"),
            Step::Text(" while"),
            Step::Text(" the"),
            Step::Text(" response"),
            Step::Text(" streams"),
            Step::Call("call_patch", "apply_patch", json!({"input": patch})),
            Step::Text("."),
        ],
        100,
        20,
    );
    // One SSE event per write, 80 ms apart: the response takes about a second to arrive.
    let options = ReplayOptions { chunk_delay: Duration::from_millis(80), ..Default::default() };
    let mut s = setup(vec![first, answer("done")], options, AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("hay.txt"), "hay\nneedle in the hay\n").unwrap();

    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("find the needle, then add new.txt", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_text, "done");
    let events = drain(&mut s.events);

    // The grep ran and finished while text the model wrote after it was still on its way.
    let last_delta = position(&events, delta(" streams"));
    assert!(position(&events, started("call_grep")) < position(&events, delta("searching")), "{events:#?}");
    assert!(position(&events, finished("call_grep")) < last_delta, "{events:#?}");
    // The file change started only once the response was complete (after its last text).
    assert!(position(&events, started("call_patch")) > position(&events, delta(".")), "{events:#?}");
    assert_eq!(std::fs::read_to_string(s.dir.path().join("new.txt")).unwrap(), "made by the patch\n");

    let requests = s.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(output_of(&requests[1].body, "call_grep").contains("needle in the hay"));
    // P5/G10: an OpenAI model on the Responses API gets apply_patch as a grammar tool and no
    // create_file/edit_file/delete_file.
    let tools = requests[0].body["tools"].as_array().unwrap();
    let patch_tool = tools.iter().find(|t| t["name"] == "apply_patch").unwrap();
    assert_eq!(patch_tool["type"], "custom");
    assert_eq!(patch_tool["format"]["syntax"], "lark");
    assert!(!tools.iter().any(|t| t["name"] == "edit_file" || t["name"] == "create_file"));
    assert_eq!(requests[0].body["parallel_tool_calls"], true);
    // G11: the system prompt carries the harness guidance of the offered tools.
    let instructions = requests[0].body["instructions"].as_str().unwrap();
    assert!(instructions.contains("- grep") && instructions.contains("- apply_patch"), "{instructions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g5_results_go_back_in_call_order_though_the_later_call_finished_first() {
    let first = body(
        &[
            Step::Call("call_slow", "shell", json!({"command": "sleep 0.4; echo slow-done"})),
            Step::Call("call_fast", "read_file", json!({"path": "a.txt"})),
        ],
        100,
        20,
    );
    let mut s = setup(vec![first, answer("ok")], ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("run both", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");

    let events = drain(&mut s.events);
    assert!(position(&events, finished("call_fast")) < position(&events, finished("call_slow")), "{events:#?}");

    let requests = s.server.requests();
    let second = &requests[1].body;
    let outline: Vec<(String, String)> = outline(second).into_iter().filter(|(_, id)| !id.is_empty()).collect();
    let expect = [
        ("function_call", "call_slow"),
        ("function_call", "call_fast"),
        ("function_call_output", "call_slow"),
        ("function_call_output", "call_fast"),
    ];
    assert_eq!(outline, expect.map(|(a, b)| (a.to_string(), b.to_string())));
    assert!(output_of(second, "call_slow").contains("slow-done"));
    assert!(output_of(second, "call_fast").contains("alpha"));
}

/// Processes whose command line is exactly `argv` (NUL-separated in /proc).
fn processes_running(argv: &[&str]) -> usize {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_cancelling_mid_turn_stops_the_stream_and_the_running_command() {
    // An argument no other process uses, so the checks below see this test's command only.
    let secs = format!("29.{:07}", std::process::id());
    let argv = ["sleep", secs.as_str()];
    let mut steps = vec![Step::Call("call_sleep", "shell", json!({"command": format!("sleep {secs}")}))];
    for _ in 0..40 {
        steps.push(Step::Text("."));
    }
    // 40 text events 150 ms apart: the response would take 6 s.
    let options = ReplayOptions { chunk_delay: Duration::from_millis(150), ..Default::default() };
    let s = setup(vec![body(&steps, 100, 20)], options, AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let watched = secs.clone();
    let watcher = tokio::spawn(async move {
        let argv = ["sleep", watched.as_str()];
        // Cancel once the command really runs, so the test cannot pass on a call that never started.
        let deadline = Instant::now() + Duration::from_secs(5);
        while processes_running(&argv) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = processes_running(&argv) > 0;
        trigger.cancel();
        (seen, Instant::now())
    });
    let outcome = conv.run("sleep", cancel).await;
    let ended = Instant::now();
    let (seen, cancelled_at) = watcher.await.unwrap();
    assert!(seen, "the command never started");
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_eq!(outcome.status.exit_code(), 130);
    assert!(ended.duration_since(cancelled_at) < Duration::from_secs(2), "the run took long to stop");

    // The call has a `cancelled` result in the history and in the transcript.
    let Some(Item::ToolResult { call_id, output, is_error, .. }) = conv.items().last() else {
        panic!("{:#?}", conv.items())
    };
    assert_eq!(call_id, "call_sleep");
    assert!(output.starts_with("[cancelled]") && *is_error, "{output}");
    let transcript = std::fs::read_to_string(conv.transcript_path()).unwrap();
    let last: serde_json::Value = serde_json::from_str(transcript.lines().last().unwrap()).unwrap();
    assert_eq!(last["output"]["status"], "cancelled", "{last}");

    // The command stopped with the run (G6), while the agent and its tools are still alive.
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_running(&argv) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_running(&argv), 0, "the command outlived the cancelled run");

    // And the host dropping the agent (and with it the tools) leaves nothing either.
    drop(conv);
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_running(&argv) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(processes_running(&argv), 0, "the command outlived the cancelled run");
}

#[tokio::test]
async fn max_turns_stops_a_run_whose_model_keeps_calling_tools() {
    let first = body(&[Step::Call("call_1", "read_file", json!({"path": "a.txt"}))], 100, 20);
    let mut s =
        setup(vec![first, answer("never sent")], ReplayOptions::default(), AgentConfig::default().max_turns(1)).await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("read", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::MaxTurns, "{outcome:?}");
    assert_eq!(outcome.status.exit_code(), 1);
    assert_eq!(outcome.turns, 1);
    assert!(outcome.error.unwrap().contains("max_turns"));
    assert_eq!(s.server.requests().len(), 1);
    // The result of the last turn is in the history all the same.
    assert!(matches!(conv.items().last(), Some(Item::ToolResult { is_error: false, .. })));
    let events = drain(&mut s.events);
    assert!(matches!(events.last(), Some(AgentEvent::RunFinished { status: RunStatus::MaxTurns, turns: 1, .. })));
}

#[tokio::test]
async fn a_tool_error_goes_back_to_the_model_and_the_run_continues() {
    let first = body(&[Step::Call("call_missing", "read_file", json!({"path": "missing.txt"}))], 100, 20);
    let mut s =
        setup(vec![first, answer("the file does not exist")], ReplayOptions::default(), AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("read missing.txt", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.turns, 2);
    assert_eq!(outcome.final_text, "the file does not exist");
    assert_eq!(outcome.usage.input_tokens, 200);
    assert_eq!(outcome.usage.output_tokens, 30);
    let requests = s.server.requests();
    let out = output_of(&requests[1].body, "call_missing");
    assert!(out.contains("missing.txt"), "{out}");
    let events = drain(&mut s.events);
    let status = events.iter().find_map(|e| match e {
        AgentEvent::ToolCallFinished { call_id, status, .. } if call_id == "call_missing" => Some(*status),
        _ => None,
    });
    assert_eq!(status, Some(ToolStatus::Error));
    assert_eq!(events.iter().filter(|e| matches!(e, AgentEvent::TurnCompleted { .. })).count(), 2);
}

#[tokio::test]
async fn g3_read_only_approval_denies_a_command_with_a_reason_the_model_can_act_on() {
    let first = body(&[Step::Call("call_touch", "shell", json!({"command": "touch made.txt"}))], 100, 20);
    let s = setup_with(
        Recording::new(Provider::OpenAiResponses, "gpt-5"),
        vec![first, answer("I may not run commands here")],
        ReplayOptions::default(),
        AgentConfig::default(),
        ApprovalMode::ReadOnly,
    )
    .await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("touch made.txt", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let out = output_of(&s.server.requests()[1].body, "call_touch");
    assert!(out.starts_with("[denied]") && out.contains("read-only"), "{out}");
    assert!(!s.dir.path().join("made.txt").exists());
    assert_eq!(ApprovalMode::parse("READ-ONLY"), Some(ApprovalMode::ReadOnly));
    assert_eq!(ApprovalMode::parse("sometimes"), None);
}

#[tokio::test]
async fn g3_g12_read_only_and_deny_sessions_read_and_search_through_call_tool() {
    for approval in [ApprovalMode::ReadOnly, ApprovalMode::Deny] {
        let first = body(
            &[
                Step::Call("call_read", "call_tool", json!({"name": "read_file", "arguments": {"path": "a.txt"}})),
                Step::Call("call_grep", "call_tool", json!({"name": "grep", "arguments": {"pattern": "alpha"}})),
                Step::Call("call_touch", "shell", json!({"command": "touch made.txt"})),
            ],
            100,
            20,
        );
        let s = setup_harness(
            Recording::new(Provider::OpenAiResponses, "gpt-5"),
            vec![first, answer("read it")],
            ReplayOptions::default(),
            AgentConfig::default(),
            approval,
            default_harness,
        )
        .await;
        std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
        let mut conv = s.agent.start().unwrap();
        let outcome = conv.run("what is in a.txt?", CancellationToken::new()).await;
        assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
        let second = &s.server.requests()[1].body;
        let read = output_of(second, "call_read");
        assert!(read.contains("alpha") && !read.contains("[denied]"), "{approval:?}: {read}");
        let grep = output_of(second, "call_grep");
        assert!(grep.contains("a.txt") && !grep.contains("[denied]"), "{approval:?}: {grep}");
        let touch = output_of(second, "call_touch");
        assert!(touch.starts_with("[denied]"), "{approval:?}: {touch}");
        assert!(!s.dir.path().join("made.txt").exists());
    }
}

#[tokio::test]
async fn g12_a_deferred_read_called_by_its_own_name_runs_and_the_tool_list_stays() {
    let first = body(
        &[
            Step::Call("call_read", "read_file", json!({"path": "a.txt"})),
            Step::Call("call_grep", "grep", json!({"pattern": "alpha"})),
            Step::Call("call_none", "no_such_tool", json!({})),
        ],
        100,
        20,
    );
    let s = setup_harness(
        Recording::new(Provider::OpenAiResponses, "gpt-5"),
        vec![first, answer("read it")],
        ReplayOptions::default(),
        AgentConfig::default(),
        ApprovalMode::Auto,
        default_harness,
    )
    .await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    assert_eq!(conv.run("what is in a.txt?", CancellationToken::new()).await.status, RunStatus::Completed);
    let requests = s.server.requests();
    let read = output_of(&requests[1].body, "call_read");
    assert!(read.contains("alpha") && !read.contains("unknown tool"), "{read}");
    let grep = output_of(&requests[1].body, "call_grep");
    assert!(grep.contains("a.txt") && !grep.contains("unknown tool"), "{grep}");
    assert!(output_of(&requests[1].body, "call_none").contains("unknown tool"));
    for request in &requests {
        let tools = request.body["tools"].as_array().unwrap();
        assert!(!tools.iter().any(|t| t["name"] == "read_file" || t["name"] == "grep"), "{tools:?}");
    }
    assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
}

#[tokio::test]
async fn g7_a_transcript_resumes_by_id_and_as_the_last_session_with_its_history() {
    let first = body(&[Step::Call("call_read", "read_file", json!({"path": "a.txt"}))], 100, 20);
    let bodies = vec![first, answer("alpha it is"), answer("still alpha"), answer("third")];
    let s = setup(bodies, ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();

    let mut conv = s.agent.start().unwrap();
    let id = conv.id().to_string();
    assert!(conv.transcript_path().starts_with(s.dir.path().join(".kodik/sessions")));
    // The transcripts are git-ignored: a model's `git add -A` in the workspace leaves them out.
    let git = |args: &[&str]| std::process::Command::new("git").args(args).current_dir(s.dir.path()).output().unwrap();
    assert!(git(&["init", "-q"]).status.success());
    let status = String::from_utf8(git(&["status", "--porcelain", "--untracked-files=all"]).stdout).unwrap();
    assert!(!status.contains(".kodik/sessions"), "{status}");
    assert_eq!(conv.run("what is in a.txt?", CancellationToken::new()).await.status, RunStatus::Completed);
    let history = conv.items().to_vec();
    drop(conv);

    // The transcript: meta first, the result with its full ToolOutput (G7), usage per turn.
    let path = s.agent.sessions_dir().unwrap().join(format!("{id}.jsonl"));
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["type"], "meta");
    assert_eq!(lines[0]["model"], "gpt-5");
    let result = lines.iter().find(|l| l["item"]["type"] == "tool_result").unwrap();
    assert_eq!(result["output"]["status"], "success");
    assert_eq!(lines.iter().filter(|l| l["type"] == "usage").count(), 2);

    let mut resumed = s.agent.resume(&id).unwrap();
    assert_eq!(resumed.items(), &history[..]);
    assert_eq!(resumed.run("and now?", CancellationToken::new()).await.final_text, "still alpha");
    let third = &s.server.requests()[2].body;
    let texts: Vec<String> = input(third)
        .iter()
        .map(|i| match i["type"].as_str().unwrap() {
            "message" => i["content"][0]["text"].as_str().unwrap().to_string(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        texts,
        ["what is in a.txt?", "function_call", "function_call_output", "alpha it is", "and now?"],
        "{third}"
    );
    drop(resumed);

    // A crash mid-write leaves a partial last line: it is skipped and cut off.
    let mut raw = std::fs::read(&path).unwrap();
    raw.extend_from_slice(br#"{"type":"item","item":{"type":"user","te"#);
    std::fs::write(&path, &raw).unwrap();
    let other = s.agent.start().unwrap();
    let other_id = other.id().to_string();
    drop(other);
    std::fs::remove_file(s.agent.sessions_dir().unwrap().join(format!("{other_id}.jsonl"))).unwrap();
    let mut last = s.agent.resume_last().unwrap();
    assert_eq!(last.id(), id);
    assert_eq!(last.items().len(), history.len() + 2);
    assert_eq!(last.run("third", CancellationToken::new()).await.status, RunStatus::Completed);
    let text = std::fs::read_to_string(&path).unwrap();
    for (n, line) in text.lines().enumerate() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("line {}: {e}: {line}", n + 1));
    }

    assert!(matches!(s.agent.resume("no-such-session"), Err(kodik_agent::AgentError::NotFound { .. })));
    assert!(matches!(s.agent.resume("../escape"), Err(kodik_agent::AgentError::BadId(_))));
}

#[tokio::test]
async fn a3_g7_the_last_session_is_the_users_latest_conversation_not_a_sub_agents() {
    let bodies = vec![answer("parent answer"), answer("child answer"), answer("resumed"), answer("again")];
    let s = setup(bodies, ReplayOptions::default(), AgentConfig::default()).await;
    // Transcripts' times are the file system's (a clock tick apart at best): steps a tick apart.
    let tick = || std::thread::sleep(Duration::from_millis(30));

    let mut parent = s.agent.start().unwrap();
    let parent_id = parent.id().to_string();
    assert_eq!(parent.run("fix the bug in parser.c", CancellationToken::new()).await.status, RunStatus::Completed);
    tick();
    // A sub-agent the parent started: created and written after the parent.
    let mut child = s.agent.start_child(&parent_id).unwrap();
    let child_id = child.id().to_string();
    assert_eq!(child.run("list files", CancellationToken::new()).await.status, RunStatus::Completed);
    drop((parent, child));
    tick();

    let mut last = s.agent.resume_last().unwrap();
    assert_eq!(last.id(), parent_id, "the sub-agent's {child_id} was resumed");
    assert_eq!(last.run("now add a test for it", CancellationToken::new()).await.final_text, "resumed");
    let sent = &s.server.requests()[2].body;
    assert!(sent.to_string().contains("fix the bug in parser.c"), "{sent}");
    drop(last);
    tick();

    // A newer conversation, then the older one continued: the continued one is the last.
    let newer = s.agent.start().unwrap();
    let newer_id = newer.id().to_string();
    drop(newer);
    tick();
    drop(s.agent.resume(&parent_id).unwrap());
    tick();
    assert_eq!(s.agent.resume_last().unwrap().id(), parent_id, "{newer_id} was resumed");
    // The sub-agent's transcript can still be resumed by its id.
    assert_eq!(s.agent.resume(&child_id).unwrap().items().len(), 2);
}

#[tokio::test]
async fn g20_old_outputs_are_compacted_to_a_line_and_a_path_that_holds_them() {
    let big: String = (0..1500).map(|i| format!("line {i:04} {}\n", "x".repeat(89))).collect();
    let first = body(&[Step::Call("call_big", "read_file", json!({"path": "big.txt"}))], 100, 20);
    // The provider counts 25 000 input tokens for the second request: with the big output the
    // third would pass 80 % of a 30 000-token window, whatever bytes/4 estimates.
    let second = body(&[Step::Call("call_small", "read_file", json!({"path": "small.txt"}))], 25_000, 20);
    let config = AgentConfig::default().context_window(30_000);
    let s = setup(vec![first, second, answer("done")], ReplayOptions::default(), config).await;
    std::fs::write(s.dir.path().join("big.txt"), &big).unwrap();
    std::fs::write(s.dir.path().join("small.txt"), "small file\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("read both", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");

    let requests = s.server.requests();
    // The second request still carries the big output: it belongs to the latest turn.
    let uncompacted = output_of(&requests[1].body, "call_big");
    assert!(uncompacted.len() > 10_000 && uncompacted.contains("line 0000"), "{}", uncompacted.len());
    // The third has it as one line pointing to a file with the full text.
    let compacted = output_of(&requests[2].body, "call_big");
    assert_eq!(compacted.lines().count(), 1, "{compacted}");
    let (_, path) = compacted.split_once("[output compacted; full output: ").unwrap();
    let path = std::path::Path::new(path.trim_end_matches(']'));
    let saved = std::fs::read_to_string(path).unwrap();
    assert_eq!(saved, uncompacted);
    assert!(compacted.starts_with(uncompacted.lines().next().unwrap()), "{compacted}");
    assert!(output_of(&requests[2].body, "call_small").contains("small file"));
    // The transcript says so, and a resumed conversation sends the same compacted history.
    let transcript = std::fs::read_to_string(conv.transcript_path()).unwrap();
    assert!(transcript.lines().any(|l| l.contains(r#""type":"compacted""#)));
    let id = conv.id().to_string();
    let history = conv.items().to_vec();
    drop(conv);
    assert_eq!(s.agent.resume(&id).unwrap().items(), &history[..]);
}

#[tokio::test]
async fn r4_a_file_read_in_an_earlier_response_is_shown_again_in_the_next() {
    let first = body(&[Step::Call("call_1", "read_file", json!({"path": "a.txt"}))], 100, 20);
    // The same lines, asked for differently: not the identical call G15 answers "unchanged".
    let lines = json!({"path": "a.txt", "ranges": [{"start_line": 1, "end_line": 1}]});
    let second = body(&[Step::Call("call_2", "read_file", lines)], 100, 20);
    let s = setup(vec![first, second, answer("done")], ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("a.txt"), "hello\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("read it twice", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let requests = s.server.requests();
    // "Unchanged … earlier in this message" is for a re-read within one response (R4).
    let again = output_of(&requests[2].body, "call_2");
    assert!(again.contains("1→hello"), "{again}");
}

#[tokio::test]
async fn g15_g20_after_compaction_a_repeated_search_shows_its_matches_again() {
    let lines: String = (0..40).map(|i| format!("needle {i:02} {}\n", "x".repeat(40))).collect();
    let grep = || json!({"pattern": "needle", "path": "hay.txt"});
    let first = body(&[Step::Call("call_1", "grep", grep())], 100, 20);
    // The provider counts 25 000 input tokens for the second request: the third passes 80 %
    // of a 30 000-token window and the first search's output is compacted.
    let second = body(&[Step::Call("call_2", "read_file", json!({"path": "small.txt"}))], 25_000, 20);
    let third = body(&[Step::Call("call_3", "grep", grep())], 100, 20);
    let config = AgentConfig::default().context_window(30_000);
    let s = setup(vec![first, second, third, answer("done")], ReplayOptions::default(), config).await;
    std::fs::write(s.dir.path().join("hay.txt"), &lines).unwrap();
    std::fs::write(s.dir.path().join("small.txt"), "small file\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("search twice", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let requests = s.server.requests();
    assert!(output_of(&requests[3].body, "call_1").contains("[output compacted"), "the first search was not compacted");
    // The model no longer sees the first result: the repeat must not point to it.
    let again = output_of(&requests[3].body, "call_3");
    assert!(again.contains("needle 39"), "{again}");
}

#[tokio::test]
async fn max_wall_aborts_a_stalled_response() {
    let options = ReplayOptions { stall: Some((0, 200)), ..Default::default() };
    let config = AgentConfig::default().max_wall(Duration::from_millis(500));
    let mut s = setup(vec![answer("never completes")], options, config).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("wait", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::MaxWall, "{outcome:?}");
    assert!(outcome.error.unwrap().contains("max_wall"));
    let events = drain(&mut s.events);
    assert!(matches!(events.last(), Some(AgentEvent::RunFinished { status: RunStatus::MaxWall, .. })));
}

#[tokio::test]
async fn a_model_error_fails_the_run_with_the_providers_message() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(400, "The model `gpt-5` does not exist or you do not have access to it."));
    let s = setup_with(recording, vec![], ReplayOptions::default(), AgentConfig::default(), ApprovalMode::Auto).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("hello", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(outcome.error.as_deref().unwrap().contains("does not exist"), "{outcome:?}");
}

#[tokio::test]
async fn a_plain_answer_reports_its_events_in_order() {
    let mut s = setup(
        vec![body(&[Step::Text("Hel"), Step::Text("lo")], 7, 3)],
        ReplayOptions::default(),
        AgentConfig::default(),
    )
    .await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("greet", CancellationToken::new()).await;
    assert_eq!((outcome.status, outcome.final_text.as_str(), outcome.turns), (RunStatus::Completed, "Hello", 1));
    let kinds: Vec<String> = drain(&mut s.events)
        .iter()
        .map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "user_message",
            "turn_started",
            "text_delta",
            "text_delta",
            "assistant_message",
            "turn_completed",
            "run_finished"
        ]
    );
    assert_eq!(serde_json::to_value(RunStatus::MaxTokens).unwrap(), "max_tokens");
    assert_eq!(conv.items().last(), Some(&Item::Assistant { text: "Hello".into() }));
}

#[tokio::test]
async fn max_tokens_stops_the_run_between_turns_once_the_budget_is_spent() {
    let call = |id| body(&[Step::Call(id, "read_file", json!({"path": "a.txt"}))], 100, 20);
    let bodies = vec![call("call_1"), call("call_2"), answer("never sent")];
    let s = setup(bodies, ReplayOptions::default(), AgentConfig::default().max_tokens(200)).await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("read twice", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::MaxTokens, "{outcome:?}");
    assert_eq!(outcome.turns, 2);
    assert_eq!(outcome.usage.input_tokens + outcome.usage.output_tokens, 240);
    assert_eq!(s.server.requests().len(), 2);
    // The second turn's result is recorded: the conversation can go on from here.
    assert!(matches!(conv.items().last(), Some(Item::ToolResult { call_id, .. }) if call_id == "call_2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g12_a_deferred_search_through_call_tool_still_starts_while_the_response_streams() {
    let mut steps =
        vec![Step::Call("call_deferred", "call_tool", json!({"name": "grep", "arguments": {"pattern": "needle"}}))];
    steps.extend([Step::Text("a"), Step::Text("b"), Step::Text("c"), Step::Text("d")]);
    let options = ReplayOptions { chunk_delay: Duration::from_millis(80), ..Default::default() };
    // The G12 defaults: in Code mode grep is deferred behind tool_search / call_tool.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hay.txt"), "needle\n").unwrap();
    let recording = [body(&steps, 100, 20), answer("found")]
        .into_iter()
        .fold(Recording::new(Provider::OpenAiResponses, "gpt-5"), |r, b| r.with(Exchange::sse(b)));
    let server = kodik_model::replay::ReplayServer::start_with(recording, options).await.unwrap();
    let model = kodik_model::client(
        kodik_model::ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("k"),
    )
    .unwrap();
    let registry = registry();
    let harness = kodik_harness::Harness::new(registry.specs().cloned());
    let cx = kodik_core::ToolContext::new(kodik_core::Workspace::new(dir.path()).unwrap());
    let agent = kodik_agent::Agent::new(model, std::sync::Arc::new(registry), cx, harness, AgentConfig::default());
    let mut events = agent.subscribe();
    let mut conv = agent.start().unwrap();
    let outcome = conv.run("find the needle", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");

    let tools = server.requests()[0].body["tools"].as_array().unwrap().clone();
    assert!(tools.iter().any(|t| t["name"] == "call_tool") && !tools.iter().any(|t| t["name"] == "grep"));
    let events = drain(&mut events);
    assert!(position(&events, finished("call_deferred")) < position(&events, delta("d")), "{events:#?}");
    assert!(output_of(&server.requests()[1].body, "call_deferred").contains("hay.txt"));
}

#[tokio::test]
async fn g7_a_transcript_cut_between_a_call_and_its_result_resumes_with_a_cancelled_result() {
    let s = setup(vec![answer("picked up")], ReplayOptions::default(), AgentConfig::default()).await;
    let conv = s.agent.start().unwrap();
    let path = conv.transcript_path().to_path_buf();
    let id = conv.id().to_string();
    drop(conv);
    // What a crash right after the model's call leaves behind.
    let lines = [
        json!({"type": "item", "item": {"type": "user", "text": "run the tests"}}),
        json!({"type": "item", "item": {"type": "tool_call", "call_id": "call_lost", "name": "shell",
            "input": {"kind": "json", "value": {"command": "cargo test"}}}}),
    ];
    let mut text = std::fs::read_to_string(&path).unwrap();
    for l in lines {
        text.push_str(&format!("{l}\n"));
    }
    std::fs::write(&path, text).unwrap();

    let mut events = s.agent.subscribe();
    let mut conv = s.agent.resume(&format!("{id}.jsonl")).unwrap();
    assert!(matches!(
        drain(&mut events).first(),
        Some(AgentEvent::SessionStarted { resumed: true, session_id, .. }) if *session_id == id
    ));
    let Some(Item::ToolResult { call_id, output, is_error: true, .. }) = conv.items().last() else {
        panic!("{:#?}", conv.items())
    };
    assert_eq!(call_id, "call_lost");
    assert!(output.starts_with("[cancelled]"), "{output}");
    assert_eq!(conv.run("go on", CancellationToken::new()).await.status, RunStatus::Completed);
    let outline = outline(&s.server.requests()[0].body);
    assert_eq!(outline[1], ("function_call".to_string(), "call_lost".to_string()));
    assert_eq!(outline[2], ("function_call_output".to_string(), "call_lost".to_string()));
}

#[tokio::test]
async fn g9_an_over_large_result_reaches_the_model_as_head_and_tail_with_the_saved_path() {
    let big: String = (0..1500).map(|i| format!("line {i:04} {}\n", "y".repeat(89))).collect();
    let first = body(&[Step::Call("call_big", "read_file", json!({"path": "big.txt"}))], 100, 20);
    let s = setup(vec![first, answer("read")], ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("big.txt"), &big).unwrap();
    let scheduler = kodik_scheduler::SchedulerConfig { max_output_bytes: 4_000, ..Default::default() };
    let agent = s.agent.with_scheduler_config(scheduler);
    let mut conv = agent.start().unwrap();
    assert_eq!(conv.run("read big.txt", CancellationToken::new()).await.status, RunStatus::Completed);
    let out = output_of(&s.server.requests()[1].body, "call_big");
    assert!(out.len() < 6_000, "{} bytes", out.len());
    assert!(out.contains("line 0000"), "{out}");
    let (_, rest) = out.split_once("full output: ").unwrap_or_else(|| panic!("{out}"));
    let path = rest.split_whitespace().next().unwrap().trim_end_matches([']', ')', '.', ',']);
    let saved = std::fs::read_to_string(path).unwrap();
    assert!(saved.len() > out.len() && saved.contains("line 0000"), "{path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s5_a_background_command_that_settles_reports_its_exit_and_output_in_the_next_request() {
    // The command goes to the background 1 s after the read of its turn finished (S4), and
    // ends while the next turn's command runs: the request after that carries its end.
    let first = body(
        &[
            Step::Call("call_bg", "shell", json!({"command": "sleep 1.5; echo background-finished-marker"})),
            Step::Call("call_read", "read_file", json!({"path": "a.txt"})),
        ],
        100,
        20,
    );
    let second = body(&[Step::Call("call_wait", "shell", json!({"command": "sleep 2"}))], 100, 20);
    let mut s = setup(vec![first, second, answer("ok")], ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("run it", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    drain(&mut s.events);

    let requests = s.server.requests();
    assert_eq!(requests.len(), 3);
    let backgrounded = output_of(&requests[1].body, "call_bg");
    assert!(!backgrounded.contains("background-finished-marker"), "the command was not backgrounded: {backgrounded}");
    let third = requests[2].body.to_string();
    assert!(third.contains("[terminal event]"), "{third}");
    assert!(third.contains("exited with code 0") && third.contains("background-finished-marker"), "{third}");
    // Delivered once: the note is in the history, not queued again.
    let notes = conv.items().iter().filter(|i| matches!(i, Item::User { text } if text.contains("[terminal event]")));
    assert_eq!(notes.count(), 1);
}

/// The function_call item of `call_id` in a recorded Responses request.
fn call_item(body: &serde_json::Value, call_id: &str) -> serde_json::Value {
    input(body).into_iter().find(|i| i["type"] == "function_call" && i["call_id"] == call_id).unwrap()
}

#[tokio::test]
async fn g7_g8_arguments_that_are_not_a_json_object_get_the_parse_error_and_replay_unchanged() {
    let first = body(
        &[
            Step::RawCall("call_cut", "shell", r#"{"command": "echo hi"#),
            Step::RawCall("call_text", "shell", "not json at all"),
            Step::RawCall("call_array", "shell", r#"["echo", "hi"]"#),
            Step::Call("call_ok", "shell", json!({"command": "echo fine"})),
            Step::RawCall("call_unknown", "no_such_tool", "{"),
        ],
        100,
        20,
    );
    let mut s = setup(vec![first, answer("ok")], ReplayOptions::default(), AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    assert_eq!(conv.run("go", CancellationToken::new()).await.status, RunStatus::Completed);
    let second = &s.server.requests()[1].body;
    let cut = output_of(second, "call_cut");
    assert!(cut.contains("`shell` are not valid JSON: EOF while parsing a string at line 1 column 20"), "{cut}");
    assert!(!cut.contains("ShellArgs") && !cut.contains("output-token limit"), "{cut}");
    assert!(output_of(second, "call_text").contains("not valid JSON: expected"), "{second}");
    let array = output_of(second, "call_array");
    assert!(array.contains("must be one JSON object, not an array"), "{array}");
    assert!(output_of(second, "call_ok").contains("fine"));
    assert!(output_of(second, "call_unknown").contains("unknown tool `no_such_tool`"), "{second}");
    // The history replays what the model wrote.
    assert_eq!(call_item(second, "call_cut")["arguments"], r#"{"command": "echo hi"#);
    assert_eq!(call_item(second, "call_text")["arguments"], "not json at all");
    assert_eq!(call_item(second, "call_array")["arguments"], r#"["echo", "hi"]"#);
    let events = drain(&mut s.events);
    let status = events.iter().find_map(|e| match e {
        AgentEvent::ToolCallFinished { call_id, status, .. } if call_id == "call_cut" => Some(*status),
        _ => None,
    });
    assert_eq!(status, Some(ToolStatus::Error));
}

#[tokio::test]
async fn g8_a_call_cut_off_by_the_output_token_limit_says_so_and_nothing_runs() {
    let first = body_cut(&[Step::RawCall("call_big", "shell", r#"{"command": "touch made.txt; echo aaaa"#)]);
    let s = setup(vec![first, answer("ok")], ReplayOptions::default(), AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    assert_eq!(conv.run("write it", CancellationToken::new()).await.status, RunStatus::Completed);
    let out = output_of(&s.server.requests()[1].body, "call_big");
    assert!(out.contains("output-token limit") && out.contains("not valid JSON: EOF while parsing"), "{out}");
    assert!(!s.dir.path().join("made.txt").exists());
}

#[tokio::test]
async fn an_answer_cut_off_by_the_output_token_limit_is_continued_into_one_final_text() {
    let bodies = vec![body_cut(&[Step::Text("The answer")]), body_cut(&[Step::Text(" is")]), answer(" 42.")];
    let s = setup(bodies, ReplayOptions::default(), AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("what is it?", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_text, "The answer is 42.");
    assert_eq!(outcome.turns, 3);
    let last = s.server.requests()[2].body.to_string();
    assert!(last.contains("cut off at the output-token limit"), "{last}");

    // One that stays cut off ends as not completed, with what it has.
    let bodies = (0..4).map(|_| body_cut(&[Step::Text("more ")])).collect();
    let s = setup(bodies, ReplayOptions::default(), AgentConfig::default()).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("go on", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::MaxTokens, "{outcome:?}");
    assert_eq!(outcome.final_text, "more more more more ");
    assert!(outcome.error.unwrap().contains("output-token limit"));
}

#[tokio::test]
async fn g20_a_request_refused_as_over_the_context_window_is_compacted_and_sent_again() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(body(&[Step::Call("call_1", "shell", json!({"command": "seq 100000 104000"}))], 100, 20)))
        .with(Exchange::sse(body(&[Step::Call("call_2", "shell", json!({"command": "seq 200000 204000"}))], 100, 20)))
        .with(Exchange::error(
            400,
            "This model's maximum context length is 12000 tokens. However, your messages resulted in 17000 \
             tokens. Please reduce the length of the messages.",
        ))
        .with(Exchange::sse(answer("done")))
        .with(Exchange::sse(answer("still fits")));
    let s = setup_with(recording, vec![], ReplayOptions::default(), AgentConfig::default(), ApprovalMode::Auto).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("count", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_text, "done");
    let requests = s.server.requests();
    assert_eq!(requests.len(), 4);
    let (refused, retry) = (requests[2].body.to_string(), requests[3].body.to_string());
    assert!(!refused.contains("[output compacted"));
    assert!(output_of(&requests[3].body, "call_1").contains("[output compacted; full output: "), "{retry}");
    assert!(retry.len() < 12_000 * 4, "{} bytes", retry.len());
    // The smaller window holds for the rest of the conversation.
    assert_eq!(conv.run("again", CancellationToken::new()).await.status, RunStatus::Completed);
    assert!(s.server.requests()[4].body.to_string().len() < 12_000 * 4);
}

#[tokio::test]
async fn g20_a_second_overflow_in_a_row_fails_the_run_with_the_providers_message() {
    let too_long = "prompt is too long: 90000 tokens > 200 maximum";
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(400, too_long))
        .with(Exchange::error(400, too_long));
    let s = setup_with(recording, vec![], ReplayOptions::default(), AgentConfig::default(), ApprovalMode::Auto).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("hello", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Failed, "{outcome:?}");
    assert!(outcome.error.as_deref().unwrap().contains("prompt is too long"), "{outcome:?}");
    assert_eq!(s.server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_an_answer_while_a_background_command_runs_waits_for_its_terminal_event() {
    // The build goes to the background 1 s after the quick command finished (S4); the model
    // answers that its result will come by itself, and it does, in one more turn.
    let first = body(
        &[
            Step::Call(
                "call_build",
                "shell",
                json!({"command": "sleep 2.5; echo built > result.txt; echo build-done"}),
            ),
            Step::Call("call_quick", "shell", json!({"command": "echo quick"})),
        ],
        100,
        20,
    );
    let second = answer("The build is running in the background; its result will arrive by itself.");
    let s = setup(vec![first, second, answer("The build finished.")], ReplayOptions::default(), AgentConfig::default())
        .await;
    let mut events = s.agent.subscribe();
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("build it", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_text, "The build finished.");
    // The host is told what the run waits for, and for how long at most.
    let mut waiting = None;
    while let Ok(event) = events.try_recv() {
        if let AgentEvent::WaitingForBackground { terminals, up_to_secs } = event {
            waiting = Some((terminals, up_to_secs));
        }
    }
    let (terminals, up_to_secs) = waiting.expect("no WaitingForBackground event");
    assert!(terminals.len() == 1 && terminals[0].contains("sleep 2.5"), "{terminals:?}");
    assert!((100..=120).contains(&up_to_secs), "{up_to_secs}");
    assert!(outcome.error.is_none(), "{outcome:?}");
    assert!(s.dir.path().join("result.txt").is_file(), "the build was not left to finish");
    let requests = s.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(!output_of(&requests[1].body, "call_build").contains("build-done"), "not backgrounded");
    let third = requests[2].body.to_string();
    assert!(third.contains("[terminal event]") && third.contains("build-done"), "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_background_command_still_running_after_the_wait_is_named_in_the_outcome() {
    let first = body(
        &[
            Step::Call("call_server", "shell", json!({"command": "sleep 30"})),
            Step::Call("call_quick", "shell", json!({"command": "echo quick"})),
        ],
        100,
        20,
    );
    let config = AgentConfig::default().background_wait(Duration::from_millis(300));
    let s = setup(vec![first, answer("Started.")], ReplayOptions::default(), config).await;
    let mut conv = s.agent.start().unwrap();
    let outcome = conv.run("serve", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.final_text, "Started.");
    let error = outcome.error.unwrap_or_default();
    assert!(error.contains("still running in the background") && error.contains("`sleep 30`"), "{error}");
    assert_eq!(s.server.requests().len(), 2);
}

#[tokio::test]
async fn r5_an_image_a_tool_returns_reaches_a_model_that_takes_images() {
    // A 1x1 red PNG.
    const RED_PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(RED_PNG).unwrap();
    let first = body(&[Step::Call("call_img", "read_file", json!({"path": "red.png"}))], 100, 20);
    let s = setup(vec![first, answer("a red pixel")], ReplayOptions::default(), AgentConfig::default()).await;
    std::fs::write(s.dir.path().join("red.png"), &png).unwrap();
    let mut conv = s.agent.start().unwrap();
    assert_eq!(conv.run("look at red.png", CancellationToken::new()).await.status, RunStatus::Completed);
    let second = &s.server.requests()[1].body;
    let out = input(second).into_iter().find(|i| i["call_id"] == "call_img" && i["type"] == "function_call_output");
    let parts = out.unwrap()["output"].as_array().cloned().unwrap_or_else(|| panic!("no image sent: {second}"));
    assert_eq!(parts[0]["type"], "input_text");
    assert!(parts[0]["text"].as_str().unwrap().contains("attached"), "{parts:?}");
    assert_eq!(parts[1]["type"], "input_image");
    let url = parts[1]["image_url"].as_str().unwrap();
    let data = url.strip_prefix("data:image/png;base64,").unwrap();
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), png);
    // The history keeps it for a resumed conversation.
    drop(conv);
    let resumed = s.agent.resume_last().unwrap();
    assert!(resumed.items().iter().any(|i| matches!(i, Item::ToolResult { images, .. } if images.len() == 1)));
}

/// A tool that calls other tools, as code mode does: its output names the tools it was told to
/// leave out for this request.
struct Caller {
    spec: kodik_core::ToolSpec,
    withheld: Vec<String>,
}

#[async_trait::async_trait]
impl kodik_core::Tool for Caller {
    fn spec(&self) -> &kodik_core::ToolSpec {
        &self.spec
    }

    fn narrowed(&self, withheld: &[String]) -> Option<std::sync::Arc<dyn kodik_core::Tool>> {
        Some(std::sync::Arc::new(Caller { spec: self.spec.clone(), withheld: withheld.to_vec() }))
    }

    async fn call(&self, _args: Value, _cx: &kodik_core::ToolContext) -> kodik_core::ToolOutput {
        kodik_core::ToolOutput::text(format!("withheld: {}", self.withheld.join(",")))
    }
}

/// G10, G11, K6: a tool that calls other tools (code mode) reaches only what the request
/// offers: the agent loop hands it the tools switched off in the mode (before: scripts in
/// `kodik agent` could call them, while `kodik serve` already left them out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g11_a_tool_that_calls_others_is_narrowed_to_the_requests_tools() {
    let steps = vec![Step::Call("call_script", "script", json!({}))];
    let recording = [body(&steps, 100, 20), answer("done")]
        .into_iter()
        .fold(Recording::new(Provider::OpenAiResponses, "gpt-5"), |r, b| r.with(Exchange::sse(b)));
    let server = kodik_model::replay::ReplayServer::start_with(recording, ReplayOptions::default()).await.unwrap();
    let model = kodik_model::client(
        kodik_model::ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("k"),
    )
    .unwrap();
    let mut registry = registry();
    let spec = kodik_core::ToolSpec::new(
        "script",
        "Runs a script over the other tools.",
        json!({"type": "object", "properties": {}}),
        kodik_core::Effect::Process,
    );
    registry.register(Caller { spec, withheld: Vec::new() });
    let mut harness = kodik_harness::Harness::new(registry.specs().cloned());
    harness.set_enabled(kodik_harness::Mode::Code, "glob", false);
    let dir = tempfile::tempdir().unwrap();
    let cx = kodik_core::ToolContext::new(kodik_core::Workspace::new(dir.path()).unwrap());
    let agent = kodik_agent::Agent::new(model, std::sync::Arc::new(registry), cx, harness, AgentConfig::default());
    let mut conv = agent.start().unwrap();
    let outcome = conv.run("run the script", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let out = output_of(&server.requests()[1].body, "call_script");
    // Switched off in the mode; delete_file is only respelled for this model (OpenAI models
    // patch, G10), so a script may still call it.
    assert!(out.contains("glob") && !out.contains("delete_file") && !out.contains("grep"), "{out}");
}
