//! The conversation tools through `dispatch`, as a host runs them (SPEC A1, A2, A4, A6, A7).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kodik_conversation::{
    Answer, Artifact, ConversationConfig, ConversationStore, ConversationToolset, FileStore, Letter, PresentError,
    Presenter, Reaction, ScriptedAsker, SessionInfo,
};
use kodik_core::{ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolStatus, Workspace, dispatch};
use kodik_schema::agent::SessionState;
use serde_json::{Value, json};

struct Host {
    registry: ToolRegistry,
    cx: ToolContext,
    set: ConversationToolset,
    _dir: tempfile::TempDir,
    global: tempfile::TempDir,
}

fn host_with(
    build: impl FnOnce(kodik_conversation::ConversationToolsetBuilder) -> kodik_conversation::ConversationToolsetBuilder,
) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let global = tempfile::tempdir().unwrap();
    let config = ConversationConfig {
        session_id: "me".into(),
        global_memory_dir: Some(global.path().to_path_buf()),
        ..ConversationConfig::default()
    };
    let set = build(ConversationToolset::builder().config(config)).build();
    let mut registry = ToolRegistry::new();
    set.register(&mut registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    Host { registry, cx, set, _dir: dir, global }
}

fn host() -> Host {
    host_with(|b| b)
}

impl Host {
    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        dispatch(&self.registry, &ToolCall::new("c", tool, args), &self.cx).await
    }

    fn root(&self) -> &Path {
        self.cx.workspace.primary_root()
    }
}

// ---------------------------------------------------------------------------------------------
// A1 todo_write

#[tokio::test]
async fn a1_todo_merge_updates_several_items_and_returns_the_list() {
    let h = host();
    let out = h
        .call(
            "todo_write",
            json!({"todos": [{"title": "Read the parser"}, {"title": "Fix the bug"}, {"title": "Test"}]}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    let out = h
        .call(
            "todo_write",
            json!({"merge": true, "todos": [
                {"id": "1", "status": "completed"},
                {"id": "2", "status": "in_progress"},
                {"title": "Update the changelog"}
            ]}),
        )
        .await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("[x] 1: Read the parser"), "{text}");
    assert!(text.contains("[~] 2: Fix the bug"), "{text}");
    assert!(text.contains("[ ] 3: Test"), "{text}");
    assert!(text.contains("[ ] 4: Update the changelog"), "{text}");
    assert_eq!(out.meta["todos"].as_array().unwrap().len(), 4);
    // Without merge the list is replaced.
    let out = h.call("todo_write", json!({"todos": [{"title": "Only this"}]})).await;
    assert_eq!(h.set.todos().len(), 1, "{}", out.text_content());
}

#[tokio::test]
async fn a1_invalid_merge_leaves_the_stored_list_untouched() {
    let h = host();
    h.call("todo_write", json!({"todos": [{"title": "A"}, {"title": "B"}]})).await;
    let before = h.set.todos();
    // The first item is a valid change; the second is a status-only change of an unknown id.
    let out = h
        .call(
            "todo_write",
            json!({"merge": true, "todos": [{"id": "1", "status": "completed"}, {"id": "9", "status": "completed"}]}),
        )
        .await;
    let text = out.text_content();
    assert_eq!(out.status, ToolStatus::Error, "{text}");
    assert!(text.contains("no item has id `9`") && text.contains("ids: 1, 2"), "{text}");
    assert!(text.contains("The list is unchanged") && text.contains("[ ] 1: A"), "the list is in the error: {text}");
    assert_eq!(h.set.todos(), before, "the valid first item was not applied either");
    // A new item in a merge needs a title.
    let out = h.call("todo_write", json!({"merge": true, "todos": [{"status": "pending"}]})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("needs a `title`"), "{}", out.text_content());
    assert_eq!(h.set.todos(), before);
}

// ---------------------------------------------------------------------------------------------
// A2 memory

#[tokio::test]
async fn a2_memory_notes_are_plain_markdown_files_per_scope() {
    let h = host();
    let out = h.call("memory", json!({"content": "Use pnpm, not npm: the lockfile is pnpm-lock.yaml."})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let id = out.meta["id"].as_str().unwrap().to_string();
    let file = h.root().join(".kodik/memory").join(format!("{id}.md"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "Use pnpm, not npm: the lockfile is pnpm-lock.yaml.\n");

    // A person edits the file; the agent lists what they wrote.
    std::fs::write(&file, "Use pnpm 9.\n").unwrap();
    std::fs::write(h.root().join(".kodik/memory/by-hand.md"), "Tests need `make db` first.\n").unwrap();
    let out = h.call("memory", json!({"action": "list"})).await;
    let text = out.text_content();
    assert!(text.contains("2 notes") && text.contains("Use pnpm 9.") && text.contains("## by-hand"), "{text}");

    let out =
        h.call("memory", json!({"action": "update", "id": "by-hand", "content": "Run `make db` before tests."})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(
        std::fs::read_to_string(h.root().join(".kodik/memory/by-hand.md")).unwrap(),
        "Run `make db` before tests.\n"
    );
    let out = h.call("memory", json!({"action": "delete", "id": id})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(!file.exists());

    // Global and session scopes live in their own folders.
    h.call("memory", json!({"scope": "global", "content": "The user prefers British spelling."})).await;
    h.call("memory", json!({"scope": "session", "content": "Chose approach B for the cache."})).await;
    assert_eq!(std::fs::read_dir(h.global.path()).unwrap().count(), 1);
    let session_dir = h.root().join(".kodik/memory/sessions/me");
    assert_eq!(std::fs::read_dir(&session_dir).unwrap().count(), 1);
    // Session notes are kept from git like the transcripts they belong to; workspace notes,
    // project facts a team may commit, are not hidden.
    let ignore = std::fs::read_to_string(h.root().join(".kodik/memory/sessions/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    assert!(!h.root().join(".kodik/memory/.gitignore").exists());
    let out = h.call("memory", json!({"action": "list", "scope": "workspace"})).await;
    assert!(!out.text_content().contains("British"), "{}", out.text_content());
}

#[tokio::test]
async fn a2_memory_refuses_escaping_ids_unknown_ids_and_oversized_notes() {
    let h = host();
    std::fs::write(h.root().join("secret.md"), "keep\n").unwrap();
    let out = h.call("memory", json!({"action": "delete", "id": "../../secret"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("not a note id"), "{}", out.text_content());
    assert!(h.root().join("secret.md").exists());
    let out = h.call("memory", json!({"action": "update", "id": "nope", "content": "x"})).await;
    assert!(out.text_content().contains("no note `nope`"), "{}", out.text_content());
    let out = h.call("memory", json!({"content": "x".repeat(5000)})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("5000 bytes"), "{}", out.text_content());
    assert!(!h.root().join(".kodik/memory").exists(), "nothing was written");
}

/// Saves of notes with the same first words racing in one process (a turn's concurrent calls,
/// two sub-agents): each success is its own file holding its own text.
#[test]
fn a2_g1_concurrent_saves_of_one_slug_each_get_their_own_file_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let memory = dir.path().join("memory");
    let limits = kodik_conversation::MemoryLimits::default();
    for round in 0..5 {
        let barrier = Arc::new(std::sync::Barrier::new(12));
        let threads: Vec<_> = (0..12)
            .map(|i| {
                let (memory, barrier) = (memory.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let text = format!("Use pnpm not npm in this project always because lockfile; r{round} v{i}");
                    barrier.wait();
                    (text.clone(), kodik_conversation::memory::save(&memory, &text, limits, None))
                })
            })
            .collect();
        let mut ids = std::collections::HashSet::new();
        for t in threads {
            let (text, saved) = t.join().unwrap();
            let note = saved.unwrap_or_else(|e| panic!("save of `{text}` failed: {e}"));
            assert!(ids.insert(note.id.clone()), "two saves were told they got id {}", note.id);
            assert_eq!(std::fs::read_to_string(&note.path).unwrap(), format!("{text}\n"), "{}", note.id);
        }
    }
    let files = std::fs::read_dir(&memory).unwrap().count();
    assert_eq!(files, 60, "one file per save and no temporary files left");
}

#[cfg(unix)]
#[tokio::test]
async fn a2_g16_memory_neither_reads_writes_nor_deletes_through_links_out_of_the_workspace() {
    let h = host();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "SECRET-OUTSIDE-WS\n").unwrap();
    std::fs::create_dir_all(h.root().join(".kodik/memory")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), h.root().join(".kodik/memory/linked.md")).unwrap();
    std::fs::write(h.root().join(".kodik/memory/plain.md"), "A plain note.\n").unwrap();

    let out = h.call("memory", json!({"action": "list"})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(!text.contains("SECRET-OUTSIDE-WS"), "a link's target reached the model: {text}");
    assert!(text.contains("A plain note.") && text.contains("linked.md: a link to a file outside"), "{text}");
    for args in [
        json!({"action": "update", "id": "linked", "content": "overwritten"}),
        json!({"action": "delete", "id": "linked"}),
    ] {
        let out = h.call("memory", args).await;
        assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
        assert!(out.text_content().contains("outside the workspace"), "{}", out.text_content());
    }
    assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "SECRET-OUTSIDE-WS\n");

    // The memory folder itself a link out of the workspace: nothing is written or deleted there.
    std::fs::remove_dir_all(h.root().join(".kodik/memory")).unwrap();
    std::os::unix::fs::symlink(outside.path(), h.root().join(".kodik/memory")).unwrap();
    std::fs::write(outside.path().join("README.md"), "precious\n").unwrap();
    let out = h.call("memory", json!({"content": "planted"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert!(out.text_content().contains("leads outside the workspace"), "{}", out.text_content());
    let out = h.call("memory", json!({"action": "delete", "id": "README"})).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert!(outside.path().join("README.md").exists(), "a file outside the workspace was deleted");
    assert!(!outside.path().join("planted.md").exists());
}

#[tokio::test]
async fn a2_a_note_file_that_is_not_utf8_is_skipped_with_a_note_and_saving_still_works() {
    let h = host();
    std::fs::create_dir_all(h.root().join(".kodik/memory")).unwrap();
    std::fs::write(h.root().join(".kodik/memory/latin.md"), b"caf\xe9\n").unwrap();
    std::fs::write(h.root().join(".kodik/memory/a:b.md"), "odd name\n").unwrap();
    let out = h.call("memory", json!({"content": "new fact"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let out = h.call("memory", json!({"action": "list"})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("## new-fact") && text.contains("latin.md: not UTF-8 text"), "{text}");
    assert!(text.contains("a:b.md: its name cannot be a note id"), "no id the model cannot use: {text}");
    assert_eq!(out.meta["ids"], json!(["new-fact"]));
}

// ---------------------------------------------------------------------------------------------
// A6 ask_questions — the clock is tokio's paused clock: real 60 s durations, no waiting.

fn question() -> Value {
    json!({"questions": [
        {"question": "Which database?", "options": [
            {"label": "Postgres", "description": "the production one"},
            {"label": "SQLite", "description": "simpler to test"}
        ]},
        {"question": "Keep the old API?"}
    ]})
}

#[tokio::test(start_paused = true)]
async fn a6_answer_at_59_seconds_counts_and_untouched_questions_skip_at_60() {
    let asker = Arc::new(ScriptedAsker::new([
        Reaction {
            answer_after: Some(Duration::from_secs(59)),
            answers: vec![Answer::Chosen(vec!["SQLite".into()]), Answer::Own("yes, for one release".into())],
            ..Reaction::default()
        },
        Reaction { answer_after: None, ..Reaction::default() },
    ]));
    let h = host_with(|b| b.asker(asker.clone()));

    let started = tokio::time::Instant::now();
    let out = h.call("ask_questions", question()).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("Which database? → chose `SQLite`"), "{text}");
    assert!(text.contains("own words: yes, for one release"), "{text}");
    assert_eq!(started.elapsed().as_secs(), 59);

    let started = tokio::time::Instant::now();
    let out = h.call("ask_questions", question()).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert_eq!(out.meta["timed_out"], true);
    assert!(text.contains("skipped") && text.contains("state the assumptions"), "{text}");
    assert_eq!(started.elapsed().as_secs(), 60);
    assert_eq!(asker.asked().len(), 2);
    assert_eq!(asker.asked()[0][0].options[1].description.as_deref(), Some("simpler to test"));
}

#[tokio::test(start_paused = true)]
async fn a6_any_interaction_stops_the_countdown() {
    let asker = Arc::new(ScriptedAsker::new([Reaction {
        touch_after: Some(Duration::from_secs(30)),
        answer_after: Some(Duration::from_secs(600)),
        answers: vec![Answer::Skipped, Answer::Own("no".into())],
    }]));
    let h = host_with(|b| b.asker(asker));
    let out = h.call("ask_questions", question()).await;
    let text = out.text_content();
    assert_eq!(out.meta["timed_out"], false, "{text}");
    assert!(text.contains("Which database? → skipped") && text.contains("go on with your best judgement"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a6_cancelled_turn_stops_waiting_and_bad_host_answers_are_errors() {
    let asker = Arc::new(ScriptedAsker::new([
        Reaction { touch_after: Some(Duration::from_secs(1)), answer_after: None, ..Reaction::default() },
        Reaction {
            answer_after: Some(Duration::from_secs(1)),
            answers: vec![Answer::Chosen(vec!["MySQL".into()]), Answer::Skipped],
            ..Reaction::default()
        },
    ]));
    let h = host_with(|b| b.asker(asker));
    let cancel = h.cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        cancel.cancel();
    });
    let out = h.call("ask_questions", question()).await;
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text_content());

    let h2 = Host { cx: ToolContext::new(h.cx.workspace.clone()), ..h };
    let out = h2.call("ask_questions", question()).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("`MySQL`, not an option"), "{}", out.text_content());
}

#[tokio::test]
async fn a6_without_an_asker_the_agent_is_told_to_go_on() {
    let h = host();
    let out = h.call("ask_questions", question()).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("state the assumptions"), "{}", out.text_content());
}

// ---------------------------------------------------------------------------------------------
// A4 agent_status over the file store

fn session(id: &str, title: &str, status: SessionState, minutes_ago: u64, ws: &str) -> SessionInfo {
    SessionInfo {
        title: title.into(),
        mode: Some("code".into()),
        model: Some("gpt-5".into()),
        workspace: Some(ws.into()),
        status,
        last_activity: kodik_conversation::store::now_secs() - minutes_ago * 60,
        goal: Some(format!("goal of {title}")),
        context_fill: Some(0.42),
        last_messages: vec![format!("last words of {title}")],
        ..SessionInfo::new(id)
    }
}

/// Writes sessions when run as the writer process of `a4_agent_status_lists_sessions_written_by_another_process`.
#[test]
fn store_writer_process() {
    let Some(dir) = std::env::var_os("KODIK_TEST_STORE_DIR") else { return };
    let store = FileStore::new(dir);
    store.put(&session("s-old", "Old refactor", SessionState::Closed, 600, "/work/alpha")).unwrap();
    store.put(&session("s-run", "Parser fix", SessionState::Running, 2, "/work/alpha")).unwrap();
    store.put(&session("s-idle", "Docs pass", SessionState::Idle, 30, "/work/beta")).unwrap();
    store.put(&session("me", "This one", SessionState::Running, 0, "/work/alpha")).unwrap();
    // Left "running" by this process, which ends now: a crashed conversation.
    let crashed = SessionInfo {
        pid: Some(std::process::id()),
        ..session("s-crashed", "Crashed run", SessionState::Running, 5, "/work/gamma")
    };
    store.put(&crashed).unwrap();
}

#[tokio::test]
async fn a4_agent_status_lists_sessions_written_by_another_process() {
    let h = host();
    let dir = h.root().join(".kodik/conversations");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "store_writer_process", "--test-threads=1"])
        .env("KODIK_TEST_STORE_DIR", &dir)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 5, "the other process wrote the store");

    let out = h.call("agent_status", json!({"scope": "sessions"})).await;
    let text = out.text_content();
    assert!(text.starts_with("Conversations 1–4 of 4"), "{text}");
    assert!(text.contains("- s-crashed [closed] Crashed run"), "its process is gone: {text}");
    let run = text.find("s-run").unwrap();
    let idle = text.find("s-idle").unwrap();
    let old = text.find("s-old").unwrap();
    assert!(run < idle && idle < old, "most recent first: {text}");
    assert!(!text.contains("- me "), "this conversation is not among the others: {text}");
    assert!(text.contains("context 42% full") && text.contains("goal: goal of Parser fix"), "{text}");

    let ids = |out: &ToolOutput| {
        out.meta["sessions"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let out = h.call("agent_status", json!({"scope": "sessions", "status": "closed"})).await;
    assert_eq!(ids(&out), ["s-crashed", "s-old"]);
    let out = h.call("agent_status", json!({"scope": "sessions", "status": "running"})).await;
    assert_eq!(ids(&out), ["s-run"]);
    let out = h.call("agent_status", json!({"scope": "sessions", "active_within_minutes": 60})).await;
    assert_eq!(ids(&out), ["s-run", "s-crashed", "s-idle"]);
    let out = h.call("agent_status", json!({"scope": "sessions", "workspace": "beta"})).await;
    assert_eq!(ids(&out), ["s-idle"]);
    let out = h.call("agent_status", json!({"scope": "all", "query": "words parser"})).await;
    assert_eq!(ids(&out), ["s-run"]);
    assert!(out.text_content().contains("no background sub-agents"), "{}", out.text_content());
    let out = h.call("agent_status", json!({"scope": "sessions", "limit": 1, "offset": 2})).await;
    assert_eq!(ids(&out), ["s-idle"]);
    assert!(out.text_content().contains("offset 3"), "{}", out.text_content());

    let out = h.call("agent_status", json!({"scope": "self"})).await;
    assert!(out.text_content().contains("- me [running] This one"), "{}", out.text_content());
    let out = h.call("agent_status", json!({"agent_id": "s-idle"})).await;
    assert!(out.text_content().contains("> last words of Docs pass"), "{}", out.text_content());
    let out = h.call("agent_status", json!({"agent_id": "nobody"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    let out = h.call("agent_status", json!({"status": "closed"})).await;
    assert_eq!(out.status, ToolStatus::Error, "a filter without a session scope is refused");
}

#[test]
fn a4_a5_the_workspace_conversation_store_stays_out_of_git_add() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(root).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::write(root.join("main.rs"), "fn main() {}\n").unwrap();
    // The entries and letters another conversation reads (A4, A5), written as a session does.
    let store = FileStore::for_workspace(root);
    store.put(&session("s-run", "Parser fix", SessionState::Running, 2, "/work/alpha")).unwrap();
    store.post("s-run", &Letter { from: "me".into(), message: "The lexer API changed.".into(), sent: 1 }).unwrap();
    assert_eq!(store.list().unwrap().len(), 1, "the .gitignore is not read as an entry");

    // What a model's `git add -A` would commit: the project's file, nothing of the store.
    git(&["add", "-A"]);
    let staged = git(&["diff", "--cached", "--name-only"]);
    assert_eq!(staged, "main.rs\n");
    let status = git(&["status", "--porcelain", "--untracked-files=all", "--ignored"]);
    assert!(status.contains("!! .kodik/conversations/"), "{status}");

    // The letter is still delivered once, from the hidden folder.
    assert_eq!(store.take_messages("s-run").unwrap().len(), 1);
}

#[tokio::test]
async fn a4_self_without_a_stored_entry_shows_the_todo_progress() {
    let h = host();
    h.call("todo_write", json!({"todos": [{"title": "Step one", "status": "completed"}, {"title": "Step two"}]})).await;
    let out = h.call("agent_status", json!({"scope": "self"})).await;
    let text = out.text_content();
    assert!(
        text.contains("- me [running]") && text.contains("1 completed") && text.contains("[ ] 2: Step two"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// A7 generate_plan, create_lesson, check_understanding

#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<Artifact>>);

#[async_trait::async_trait]
impl Presenter for Recorder {
    async fn present(&self, a: &Artifact) -> Result<String, PresentError> {
        self.0.lock().unwrap().push(a.clone());
        Ok("shown to the test".into())
    }
}

#[tokio::test]
async fn a7_generate_plan_writes_a_reviewable_markdown_plan_and_presents_it() {
    let rec = Arc::new(Recorder::default());
    let h = host_with(|b| b.presenter(rec.clone()));
    let args = json!({
        "title": "Cache the parser",
        "summary": "Parsing dominates; cache parsed files by version.",
        "steps": [
            {"title": "Add the cache", "details": "An LRU keyed by FileVersion.", "files": ["src/cache.rs", "src/lib.rs"]},
            {"title": "Use it", "files": ["src/lib.rs"]}
        ],
        "risks": ["Stale entries if versions collide"]
    });
    let out = h.call("generate_plan", args.clone()).await;
    assert!(out.is_success(), "{}", out.text_content());
    let shown = rec.0.lock().unwrap().clone();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].path, h.root().join(".kodik/plans/cache-the-parser.md"));
    let md = std::fs::read_to_string(&shown[0].path).unwrap();
    assert!(md.starts_with("# Cache the parser\n\nParsing dominates"), "{md}");
    assert!(
        md.contains("1. **Add the cache**\n   An LRU keyed by FileVersion.\n   Files: `src/cache.rs`, `src/lib.rs`"),
        "{md}"
    );
    assert!(md.contains("- `src/lib.rs` (step 1, 2)"), "{md}");
    assert!(md.contains("## Risks\n\n- Stale entries if versions collide"), "{md}");
    assert!(out.text_content().contains("shown to the test"));
    // A second plan of the same title does not overwrite the first.
    h.call("generate_plan", args).await;
    assert!(h.root().join(".kodik/plans/cache-the-parser-2.md").exists());
}

#[tokio::test]
async fn a7_create_lesson_refuses_network_resources_and_writes_a_self_contained_page() {
    let rec = Arc::new(Recorder::default());
    let h = host_with(|b| b.presenter(rec.clone()));
    let out = h
        .call(
            "create_lesson",
            json!({"title": "Borrowing", "html": "<html><script src=\"https://cdn.example/q.js\"></script></html>"}),
        )
        .await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("https://cdn.example/q.js"), "{}", out.text_content());
    assert!(rec.0.lock().unwrap().is_empty());

    let html = "<!doctype html><html><body><h1>Borrowing</h1><p>See <a href=\"https://doc.rust-lang.org\">the book</a>.</p></body></html>";
    let out = h.call("create_lesson", json!({"title": "Borrowing", "html": html})).await;
    assert!(out.is_success(), "{}", out.text_content());
    let path = h.root().join(".kodik/lessons/borrowing.html");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), html);
    assert_eq!(rec.0.lock().unwrap()[0].path, path);
}

#[tokio::test(start_paused = true)]
async fn a7_check_understanding_grades_the_learners_answers() {
    let asker = Arc::new(ScriptedAsker::new([Reaction {
        answer_after: Some(Duration::from_secs(5)),
        answers: vec![
            Answer::Chosen(vec!["one".into()]),
            Answer::Chosen(vec!["yes".into()]),
            Answer::Own("moves it".into()),
        ],
        ..Reaction::default()
    }]));
    let h = host_with(|b| b.asker(asker));
    let out = h
        .call(
            "check_understanding",
            json!({"topic": "ownership", "questions": [
                {"question": "How many owners?", "options": ["one", "two"], "correct_option": 0},
                {"question": "Can a &T be mutated?", "options": ["yes", "no"], "correct_option": 1, "explanation": "shared borrows are read-only"},
                {"question": "What does `let b = a;` do to a String?"}
            ]}),
        )
        .await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("How many owners? → `one` — correct"), "{text}");
    assert!(text.contains("`yes` — wrong; correct: `no`") && text.contains("why: shared borrows"), "{text}");
    assert!(text.contains("open answer: moves it") && text.contains("1 of 2 choice answers correct"), "{text}");
}

/// A4: filter values below or above the schema's bounds are clear errors, not an empty or
/// silently clipped listing (`active_within_minutes: 0` listed nothing before).
#[tokio::test]
async fn a4_out_of_range_agent_status_filters_are_clear_errors() {
    let h = host();
    for (args, says) in [
        (json!({"scope": "sessions", "active_within_minutes": 0}), "`active_within_minutes` must be at least 1"),
        (json!({"scope": "sessions", "limit": 100000}), "at most 200"),
    ] {
        let out = h.call("agent_status", args.clone()).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}: {}", out.text_content());
        assert!(out.text_content().contains(says), "{args}: {}", out.text_content());
    }
}
