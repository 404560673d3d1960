//! `sub_agent`, `send_message` and `agent_status` over a scripted [`AgentRunner`] (SPEC A3, A4,
//! A5, G6). The real agent loop is tested in kodik-tools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kodik_conversation::{
    AgentRunner, ChildConversation, ChildReport, ChildStatus, ChildTask, ConversationConfig, ConversationStore,
    ConversationToolset, FileStore, RunnerError, SessionInfo,
};
use kodik_core::{CancellationToken, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolStatus, Workspace, dispatch};
use serde_json::{Value, json};

/// Each child answers a message after `delay` with "done: <message>"; its whole history is kept
/// by the runner, as a transcript would be, and `resume` picks it up. A message
/// `do: <tool> <json>` makes the child call one of its own conversation tools and answer with
/// the result, as a model would.
#[derive(Default)]
struct Runner {
    delay: Duration,
    histories: Arc<Mutex<HashMap<String, Vec<String>>>>,
    cancelled: Arc<Mutex<Vec<String>>>,
    /// (child, its parent) for every child started.
    parents: Mutex<Vec<(String, String)>>,
    root: std::path::PathBuf,
    n: Mutex<u32>,
}

struct Child {
    id: String,
    delay: Duration,
    history: Vec<String>,
    saved: Arc<Mutex<HashMap<String, Vec<String>>>>,
    cancelled: Arc<Mutex<Vec<String>>>,
    tools: ToolRegistry,
    root: std::path::PathBuf,
}

impl Child {
    fn new(id: String, runner: &Runner, history: Vec<String>, tools: &ConversationToolset) -> Self {
        let mut registry = ToolRegistry::new();
        tools.register(&mut registry);
        Child {
            id,
            delay: runner.delay,
            history,
            saved: runner.histories.clone(),
            cancelled: runner.cancelled.clone(),
            tools: registry,
            root: runner.root.clone(),
        }
    }
}

#[async_trait]
impl ChildConversation for Child {
    fn id(&self) -> &str {
        &self.id
    }

    async fn run(&mut self, message: &str, cancel: CancellationToken) -> ChildReport {
        self.history.push(format!("user: {message}"));
        tokio::select! {
            _ = cancel.cancelled() => {
                self.cancelled.lock().unwrap().push(self.id.clone());
                return ChildReport { status: ChildStatus::Cancelled, text: "cancelled".into() };
            }
            _ = tokio::time::sleep(self.delay) => {}
        }
        let answer = match message.strip_prefix("do: ").and_then(|m| m.split_once(' ')) {
            Some((tool, args)) => {
                let cx = ToolContext::new(Workspace::new(&self.root).unwrap());
                let args: Value = serde_json::from_str(args).unwrap();
                let out = dispatch(&self.tools, &ToolCall::new("c", tool, args), &cx).await;
                format!("{tool} said: {}", out.text_content())
            }
            None => format!("done: {message} (after {} messages)", self.history.len()),
        };
        self.history.push(format!("agent: {answer}"));
        self.saved.lock().unwrap().insert(self.id.clone(), self.history.clone());
        ChildReport { status: ChildStatus::Completed, text: answer }
    }
}

impl AgentRunner for Runner {
    fn start(&self, task: &ChildTask) -> Result<Box<dyn ChildConversation>, RunnerError> {
        let mut n = self.n.lock().unwrap();
        *n += 1;
        let id = format!("child-{n}");
        self.parents.lock().unwrap().push((id.clone(), task.parent.clone()));
        Ok(Box::new(Child::new(id, self, Vec::new(), &task.tools)))
    }

    fn resume(&self, id: &str, tools: &ConversationToolset) -> Result<Box<dyn ChildConversation>, RunnerError> {
        let history = self
            .histories
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .ok_or_else(|| RunnerError(format!("no transcript {id}")))?;
        Ok(Box::new(Child::new(id.into(), self, history, tools)))
    }
}

struct Host {
    registry: ToolRegistry,
    cx: ToolContext,
    set: ConversationToolset,
    runner: Arc<Runner>,
    _dir: tempfile::TempDir,
}

fn host(delay: Duration, max_children: usize) -> Host {
    host_with(delay, max_children, ConversationConfig::default().max_depth)
}

fn host_with(delay: Duration, max_children: usize, max_depth: usize) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let config = ConversationConfig {
        session_id: "parent".into(),
        global_memory_dir: None,
        max_children,
        max_depth,
        ..ConversationConfig::default()
    };
    let set = ConversationToolset::builder().config(config).build();
    let runner = Arc::new(Runner { delay, root: dir.path().to_path_buf(), ..Runner::default() });
    assert!(set.set_runner(runner.clone()));
    let mut registry = ToolRegistry::new();
    set.register(&mut registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    Host { registry, cx, set, runner, _dir: dir }
}

impl Host {
    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        dispatch(&self.registry, &ToolCall::new("c", tool, args), &self.cx).await
    }
}

#[tokio::test(start_paused = true)]
async fn a3_a4_background_child_settles_while_the_parent_does_other_work() {
    let h = host(Duration::from_secs(10), 8);
    let out = h
        .call("sub_agent", json!({"description": "find the parsers", "prompt": "list parsers", "background": true}))
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(out.meta["agent_id"], "child-1");

    let out = h.call("agent_status", json!({})).await;
    assert!(out.text_content().contains("- child-1 [running] find the parsers — background"), "{}", out.text_content());
    // The parent works on something else meanwhile.
    h.call("todo_write", json!({"todos": [{"title": "meanwhile"}]})).await;
    tokio::time::sleep(Duration::from_secs(11)).await;
    let out = h.call("agent_status", json!({"agent_id": "child-1"})).await;
    assert!(
        out.text_content().contains("[completed]") && out.text_content().contains("done: list parsers"),
        "{}",
        out.text_content()
    );
    assert_eq!(h.set.take_reports().len(), 1, "the host gets the settled child's report");
    assert!(h.set.take_reports().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a3_foreground_child_answers_and_wait_blocks_until_a_background_one_settles() {
    let h = host(Duration::from_secs(5), 8);
    let out = h.call("sub_agent", json!({"description": "d", "prompt": "count files"})).await;
    assert!(out.is_success());
    assert!(out.text_content().contains("Sub-agent child-1 completed:\ndone: count files"), "{}", out.text_content());

    h.call("sub_agent", json!({"description": "d2", "prompt": "second", "background": true})).await;
    let started = tokio::time::Instant::now();
    let out = h.call("agent_status", json!({"agent_id": "child-2", "wait": true})).await;
    assert!(out.text_content().contains("done: second"), "{}", out.text_content());
    assert_eq!(started.elapsed().as_secs(), 5);
    // The report the wait returned is not handed out again as a note.
    assert!(h.set.take_report_notes().is_empty(), "the report would reach the model twice");
}

#[tokio::test(start_paused = true)]
async fn g6_cancelling_the_parents_call_stops_a_foreground_child_and_stop_children_the_background_ones() {
    let h = host(Duration::from_secs(3600), 8);
    let cancel = h.cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        cancel.cancel();
    });
    let out = h.call("sub_agent", json!({"description": "d", "prompt": "long"})).await;
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text_content());
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(*h.runner.cancelled.lock().unwrap(), ["child-1"]);
    // The parent's next turn sees the child settled as cancelled.
    let next_turn = ToolContext::new(h.cx.workspace.clone());
    let out =
        dispatch(&h.registry, &ToolCall::new("s", "agent_status", json!({"agent_id": "child-1"})), &next_turn).await;
    assert!(out.text_content().contains("[cancelled]"), "{}", out.text_content());

    let h = host(Duration::from_secs(3600), 8);
    h.call("sub_agent", json!({"description": "a", "prompt": "x", "background": true})).await;
    h.call("sub_agent", json!({"description": "b", "prompt": "y", "background": true})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.set.stop_children();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut stopped = h.runner.cancelled.lock().unwrap().clone();
    stopped.sort();
    assert_eq!(stopped, ["child-1", "child-2"]);
    let out = h.call("agent_status", json!({})).await;
    assert_eq!(out.text_content().matches("[cancelled]").count(), 2, "{}", out.text_content());
}

#[tokio::test(start_paused = true)]
async fn a5_messages_queue_for_a_running_child_and_resume_a_finished_one_with_its_history() {
    let h = host(Duration::from_secs(10), 8);
    h.call("sub_agent", json!({"description": "d", "prompt": "first", "background": true})).await;
    let out = h.call("send_message", json!({"agent_id": "child-1", "message": "also check tests"})).await;
    assert_eq!(out.meta["delivered"], "queued", "{}", out.text_content());
    let out = h.call("agent_status", json!({"agent_id": "child-1", "wait": true})).await;
    // The queued message ran right after the first run, in the same conversation.
    assert!(out.text_content().contains("done: also check tests (after 3 messages)"), "{}", out.text_content());

    let out = h.call("send_message", json!({"agent_id": "child-1", "message": "and the docs"})).await;
    assert_eq!(out.meta["delivered"], "resumed", "{}", out.text_content());
    let out = h.call("agent_status", json!({"agent_id": "child-1", "wait": true})).await;
    assert!(
        out.text_content().contains("done: and the docs (after 5 messages)"),
        "resumed with its history: {}",
        out.text_content()
    );
    let history = h.runner.histories.lock().unwrap()["child-1"].clone();
    assert_eq!(history[0], "user: first");
    assert_eq!(history.len(), 6);
}

#[tokio::test]
async fn a3_a5_limits_and_recipients_are_checked() {
    let h = host(Duration::ZERO, 1);
    assert!(h.call("sub_agent", json!({"description": "d", "prompt": "p"})).await.is_success());
    let out = h.call("sub_agent", json!({"description": "d", "prompt": "p"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("the most it may"), "{}", out.text_content());
    let out = h.call("send_message", json!({"agent_id": "nobody", "message": "hi"})).await;
    assert!(
        out.text_content().contains("neither a sub-agent of this conversation (yours: child-1)"),
        "{}",
        out.text_content()
    );
    let out = h.call("send_message", json!({"parent": true, "message": "hi"})).await;
    assert_eq!(out.status, ToolStatus::Error);

    let bare = ConversationToolset::builder()
        .config(ConversationConfig { global_memory_dir: None, ..Default::default() })
        .build();
    let mut registry = ToolRegistry::new();
    bare.register(&mut registry);
    let out =
        dispatch(&registry, &ToolCall::new("c", "sub_agent", json!({"description": "d", "prompt": "p"})), &h.cx).await;
    assert!(out.text_content().contains("no agent runner"), "{}", out.text_content());
}

/// `do: sub_agent …` nested `levels` deep: each child starts the next.
fn nested(levels: usize) -> Value {
    let mut args = json!({"description": format!("level {levels}"), "prompt": "hello"});
    for level in (1..levels).rev() {
        args = json!({"description": format!("level {level}"), "prompt": format!("do: sub_agent {args}")});
    }
    args
}

#[tokio::test]
async fn a3_sub_agents_nest_to_the_configured_depth_and_are_refused_past_it() {
    // Default depth 2: a child starts a grandchild; the grandchild's own sub_agent is refused.
    assert_eq!(ConversationConfig::default().max_depth, 2);
    let h = host(Duration::ZERO, 8);
    let out = h.call("sub_agent", nested(3)).await;
    assert!(out.is_success(), "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("Sub-agent child-2 completed"), "the grandchild ran: {text}");
    assert!(
        text.contains("you are a sub-agent at depth 2 and sub-agents may nest at most 2 deep"),
        "the third level is refused with the reason: {text}"
    );
    let parents = h.runner.parents.lock().unwrap().clone();
    assert_eq!(parents, [("child-1".to_string(), "parent".to_string()), ("child-2".into(), "child-1".into())]);

    // A limit of 1: the child itself cannot delegate; 0: nobody can.
    let h = host_with(Duration::ZERO, 8, 1);
    let text = h.call("sub_agent", nested(2)).await.text_content();
    assert!(text.contains("at depth 1 and sub-agents may nest at most 1 deep"), "{text}");
    assert_eq!(h.runner.parents.lock().unwrap().len(), 1);
    let h = host_with(Duration::ZERO, 8, 0);
    let out = h.call("sub_agent", nested(1)).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("sub-agents are turned off"), "{}", out.text_content());
}

#[tokio::test]
async fn a5_a_child_messages_its_parent_which_reads_it_before_its_next_request() {
    let h = host(Duration::ZERO, 8);
    let send = json!({"parent": true, "message": "found 3 parsers so far"});
    let out = h
        .call(
            "sub_agent",
            json!({"description": "scout", "prompt": format!("do: send_message {send}"), "background": true}),
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    let out = h.call("agent_status", json!({"agent_id": "child-1", "wait": true})).await;
    assert!(out.text_content().contains("Message delivered to your parent parent"), "{}", out.text_content());
    let notes = h.set.take_report_notes();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("[message from sub-agent child-1 (scout), still working]\nfound 3 parsers so far")),
        "{notes:#?}"
    );
    // The wait returned the child's report: it is not handed out again as a note.
    assert!(!notes.iter().any(|n| n.starts_with("Sub-agent child-1 completed")), "{notes:#?}");
    assert!(h.set.take_report_notes().is_empty(), "each is handed out once");
}

#[tokio::test]
async fn a5_a_child_cannot_message_its_sibling() {
    let h = host(Duration::ZERO, 8);
    h.call("sub_agent", json!({"description": "first", "prompt": "hello"})).await;
    let send = json!({"agent_id": "child-1", "message": "hi sibling"});
    let out = h.call("sub_agent", json!({"description": "second", "prompt": format!("do: send_message {send}")})).await;
    let text = out.text_content();
    assert!(text.contains("`child-1` is not a sub-agent you started") && text.contains("never its siblings"), "{text}");
    assert_eq!(h.runner.histories.lock().unwrap()["child-1"].len(), 2, "the sibling got nothing");
}

#[tokio::test]
async fn a5_an_open_conversation_of_another_process_gets_the_message_in_its_mailbox_once() {
    let h = host(Duration::ZERO, 8);
    let root = h._dir.path();
    // A live process stands for the other conversation's process.
    let mut other = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let store = FileStore::for_workspace(root);
    let info =
        SessionInfo { pid: Some(other.id()), title: "refactor the parser".into(), ..SessionInfo::new("other-1") };
    store.put(&info).unwrap();
    let out = h.call("send_message", json!({"agent_id": "other-1", "message": "The lexer API changed."})).await;
    assert_eq!(out.meta["delivered"], "mailbox", "{}", out.text_content());

    // The receiver, with the same workspace, reads it before its next request, once.
    let receiver = ConversationToolset::builder()
        .config(ConversationConfig { session_id: "other-1".into(), global_memory_dir: None, ..Default::default() })
        .build();
    let notes = receiver.take_mailbox_notes("other-1", root);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert!(notes[0].starts_with("[message from conversation parent]\nThe lexer API changed."), "{}", notes[0]);
    assert!(receiver.take_mailbox_notes("other-1", root).is_empty());

    // Its process gone, the entry still says running: it counts as closed and is resumed here.
    other.kill().unwrap();
    other.wait().unwrap();
    h.runner.histories.lock().unwrap().insert("other-1".into(), vec!["user: refactor".into()]);
    let out = h.call("send_message", json!({"agent_id": "other-1", "message": "Go on."})).await;
    assert_eq!(out.meta["delivered"], "resumed_conversation", "{}", out.text_content());
    assert!(store.take_messages("other-1").unwrap().is_empty());
}
