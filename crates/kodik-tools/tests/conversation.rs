//! The conversation tools in the assembled toolbox, as `kodik call` and `batch` run them
//! (SPEC A1, A2, A6; G11 for the mode policy).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use kodik_tools::Toolbox;
use kodik_tools::conversation::{Answer, ConversationConfig, ConversationToolset, Reaction, ScriptedAsker};
use kodik_tools::core::{ToolCall, ToolStatus};
use kodik_tools::harness::Mode;
use serde_json::json;

fn toolbox(dir: &std::path::Path, set: ConversationToolset) -> Toolbox {
    Toolbox::builder().workspace(dir).conversation(set).build().unwrap()
}

fn config() -> ConversationConfig {
    ConversationConfig { session_id: "s1".into(), global_memory_dir: None, ..ConversationConfig::default() }
}

#[tokio::test]
async fn a1_todo_write_and_memory_run_through_the_toolbox_in_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let tb = toolbox(dir.path(), ConversationToolset::builder().config(config()).build());
    let calls = [
        ToolCall::new("1", "todo_write", json!({"todos": [{"title": "Write the test"}, {"title": "Make it pass"}]})),
        ToolCall::new("2", "memory", json!({"content": "Run tests with `cargo test -p kodik-tools`."})),
    ];
    let outs = tb.run_turn(&calls).await;
    assert!(outs.iter().all(|o| o.is_success()), "{outs:?}");
    let out = tb
        .call(&ToolCall::new("3", "todo_write", json!({"merge": true, "todos": [{"id": "1", "status": "completed"}]})))
        .await;
    assert!(out.text_content().contains("[x] 1: Write the test"), "{}", out.text_content());
    assert_eq!(tb.conversation().todos().len(), 2, "the host reads the same list");
    let note =
        std::fs::read_to_string(dir.path().join(".kodik/memory/run-tests-with-cargo-test-p-kodik-tools.md")).unwrap();
    assert_eq!(note, "Run tests with `cargo test -p kodik-tools`.\n");

    let out = tb
        .call(&ToolCall::new("4", "todo_write", json!({"merge": true, "todos": [{"id": "7", "status": "completed"}]})))
        .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(tb.conversation().todos()[1].status, kodik_tools::schema::agent::TodoStatus::Pending);
}

#[tokio::test]
async fn a6_ask_questions_through_the_toolbox_skips_after_the_countdown() {
    let dir = tempfile::tempdir().unwrap();
    let asker = Arc::new(ScriptedAsker::new([Reaction { answer_after: None, ..Reaction::default() }]));
    // A shortened clock: the host configures the countdown; the library runs it.
    let config = ConversationConfig { question_timeout: Duration::from_millis(200), ..config() };
    let tb = toolbox(dir.path(), ConversationToolset::builder().config(config).asker(asker).build());
    let started = std::time::Instant::now();
    let out = tb
        .call(&ToolCall::new("1", "ask_questions", json!({"questions": [{"question": "Tabs or spaces?", "options": [{"label": "tabs"}, {"label": "spaces"}]}]})))
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(out.meta["timed_out"], true);
    assert!(out.text_content().contains("within 0 s") || out.text_content().contains("skipped"));
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[test]
fn g11_plan_and_lesson_tools_follow_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let offered = |mode| {
        let plan = tb.plan(mode, "some-model");
        tb.registry_for(&plan).names().map(String::from).collect::<Vec<_>>()
    };
    let plan = offered(Mode::Plan);
    assert!(plan.iter().any(|n| n == "generate_plan") && !plan.iter().any(|n| n == "create_lesson"), "{plan:?}");
    let educator = offered(Mode::Educator);
    assert!(educator.iter().any(|n| n == "create_lesson") && educator.iter().any(|n| n == "check_understanding"));
    let code = offered(Mode::Code);
    assert!(code.iter().any(|n| n == "todo_write") && !code.iter().any(|n| n == "generate_plan"), "{code:?}");
    let _ = Answer::Skipped;
}

/// A lesson as a model would write it: explanation, a quiz checked in the page, no network.
const LESSON: &str = r#"<!doctype html><html><head><title>Moves</title>
<style>body{font-family:sans-serif} .ok{color:green}</style></head><body>
<h1>Moves in Rust</h1><p>Assigning a String to another variable moves it.</p>
<fieldset><legend>What happens to a after let b = a;?</legend>
<label><input type="radio" name="q1" value="copied"> It is copied</label>
<label><input type="radio" name="q1" value="moved"> It is moved</label></fieldset>
<button onclick="check()">Check answer</button><p id="result"></p>
<script>function check(){var c=document.querySelector('input[name=q1]:checked');
document.getElementById('result').textContent=c&&c.value==='moved'?'Correct: a was moved.':'Not quite, try again.';}</script>
</body></html>"#;

async fn browse(tb: &Toolbox, args: serde_json::Value) -> kodik_tools::core::ToolOutput {
    tb.call(&ToolCall::new("b", "browser", args)).await
}

/// A7: asked to, the toolbox opens a generated plan in its (real, headless) Chromium session as
/// a rendered page, and a lesson as itself; the model's `browser` tool then sees them, and the
/// lesson's quiz is answered in the page. (One Chromium test per binary: they share the
/// global browser profile.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a7_plans_and_lessons_open_in_the_browser_when_the_host_asks() {
    let dir = tempfile::tempdir().unwrap();
    let tb = toolbox(dir.path(), ConversationToolset::builder().config(config()).build());
    tb.present_in_browser();
    let plan = json!({
        "title": "Split the <lexer>",
        "summary": "Move lexing out of **parse.rs** so it can be tested alone.",
        "steps": [
            {"title": "Create lex.rs", "details": "Move `tokenize` and its helpers.", "files": ["src/lex.rs", "src/parse.rs"]},
            {"title": "Test the lexer", "files": ["tests/lex.rs"]}
        ],
        "risks": ["Public API & docs change"]
    });
    let out = tb.call(&ToolCall::new("1", "generate_plan", plan)).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("opened in the browser (file://"), "{}", out.text_content());
    assert!(dir.path().join(".kodik/plans/split-the-lexer.html").is_file());

    let out = browse(&tb, json!({"action": "snapshot"})).await;
    let page = out.text_content();
    assert!(out.is_success(), "{page}");
    for seen in [
        "Split the <lexer>",
        "Create lex.rs",
        "Move tokenize and its helpers.",
        "Files touched",
        "Public API & docs change",
    ] {
        assert!(page.contains(seen), "the rendered plan lacks {seen:?}:\n{page}");
    }
    assert!(!page.contains("**"), "Markdown marks are rendered, not shown:\n{page}");

    let out = tb.call(&ToolCall::new("2", "create_lesson", json!({"title": "Moves", "html": LESSON}))).await;
    assert!(out.text_content().contains("opened in the browser"), "{}", out.text_content());
    // The lesson is the current tab: its quiz is answered without opening it again.
    let out = browse(&tb, json!({"action": "click", "target": {"role": "radio", "name": "It is moved"}})).await;
    assert!(out.is_success(), "{}", out.text_content());
    browse(&tb, json!({"action": "click", "target": {"role": "button", "name": "Check answer"}})).await;
    let out = browse(&tb, json!({"action": "wait", "condition": "text", "text": "Correct: a was moved."})).await;
    assert!(out.is_success(), "{}", out.text_content());
    tb.browser().shutdown().await;
}

#[test]
fn a6_g11_ask_questions_is_offered_only_when_the_host_gave_an_asker() {
    let dir = tempfile::tempdir().unwrap();
    let offers_ask =
        |tb: &Toolbox| tb.plan(Mode::Code, "claude-sonnet-4-5").tools.iter().any(|t| t.name == "ask_questions");
    let nobody = Toolbox::builder().workspace(dir.path()).build().unwrap();
    assert!(!offers_ask(&nobody), "with nobody to answer it could only say so");
    let asker = Arc::new(ScriptedAsker::new([Reaction::default()]));
    let someone = toolbox(dir.path(), ConversationToolset::builder().config(config()).asker(asker).build());
    assert!(offers_ask(&someone));
}
