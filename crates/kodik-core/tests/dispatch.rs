//! The call sequence every caller shares: lookup → argument check → hooks → approval → run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use kodik_core::{
    Approval, ApprovalPolicy, ApprovalRequest, Approver, Effect, HookDecision, Hooks, ToolCall, ToolContext, ToolError,
    ToolOutput, ToolRegistry, ToolSpec, ToolStatus, TypedTool, Workspace, dispatch,
};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    text: String,
    #[serde(default)]
    repeat: Option<u32>,
}

struct Echo {
    spec: ToolSpec,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl TypedTool for Echo {
    type Args = EchoArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, args: EchoArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if args.text == "panic" {
            panic!("boom");
        }
        if args.text == "sleep" {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        }
        Ok(ToolOutput::text(args.text.repeat(args.repeat.unwrap_or(1) as usize)))
    }
}

fn setup() -> (tempfile::TempDir, ToolRegistry, ToolContext, Arc<AtomicUsize>) {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut reg = ToolRegistry::new();
    reg.register(Echo {
        spec: ToolSpec::new("echo", "Echoes.", json!({"type":"object"}), Effect::ReadOnly),
        runs: runs.clone(),
    });
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    (dir, reg, cx, runs)
}

struct CountingApprover(Arc<AtomicUsize>, Approval);

#[async_trait]
impl Approver for CountingApprover {
    async fn approve(&self, _r: &ApprovalRequest) -> Approval {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.clone()
    }
}

#[tokio::test]
async fn s8_bad_arguments_name_the_field_and_never_reach_approval() {
    let (_d, reg, mut cx, runs) = setup();
    let asked = Arc::new(AtomicUsize::new(0));
    cx.approver = Arc::new(CountingApprover(asked.clone(), Approval::Approved));
    for (args, field) in [
        (json!({"text": ["a", "b"]}), "text"),
        (json!({"text": "a", "bogus": 1}), "bogus"),
        (json!({"repeat": 2}), "text"),
        (json!({"text": "a", "repeat": "two"}), "repeat"),
    ] {
        let out = dispatch(&reg, &ToolCall::new("1", "echo", args.clone()), &cx).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}");
        let text = out.text_content();
        assert!(text.contains("invalid arguments for `echo`"), "{text}");
        assert!(text.contains(field), "{args}: {text}");
        assert_eq!(out.meta["error_kind"], "invalid_input");
    }
    assert_eq!(asked.load(Ordering::SeqCst), 0, "approval never asked for bad arguments");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn s8_arguments_that_are_not_an_object_are_told_as_json_not_as_a_rust_type() {
    // A model that sends its arguments as a string (or a list) reads what to send instead.
    let (_d, reg, cx, runs) = setup();
    for args in [json!("{\"text\": \"a\"}"), json!(["a"]), json!(3)] {
        let out = dispatch(&reg, &ToolCall::new("1", "echo", args.clone()), &cx).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}");
        let text = out.text_content();
        assert!(text.contains("expected a JSON object"), "{args}: {text}");
        assert!(!text.contains("struct"), "a Rust type name reached the model: {text}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn unknown_tool_lists_the_closest_names() {
    let (_d, reg, cx, _) = setup();
    let out = dispatch(&reg, &ToolCall::new("1", "ecoh", json!({})), &cx).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("did you mean: echo"), "{}", out.text_content());
}

#[tokio::test]
async fn g3_denied_call_gets_denied_status_and_does_not_run() {
    let (_d, reg, mut cx, runs) = setup();
    cx.approver = Arc::new(ApprovalPolicy::ask(None));
    let out = dispatch(&reg, &ToolCall::new("1", "echo", json!({"text": "hi"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Denied);
    assert!(out.text_content().contains("approval"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    cx.approver = Arc::new(ApprovalPolicy::ask(None).tool("echo", true));
    let out = dispatch(&reg, &ToolCall::new("2", "echo", json!({"text": "hi", "repeat": 2})), &cx).await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(out.text_content(), "hihi");
}

struct BlockEcho(std::sync::Mutex<Vec<(String, ToolStatus)>>);

#[async_trait]
impl Hooks for BlockEcho {
    async fn before_call(&self, call: &ToolCall) -> HookDecision {
        if call.args["text"] == "secret" { HookDecision::Block("no secrets".into()) } else { HookDecision::Allow }
    }
    async fn after_call(&self, call: &ToolCall, out: &ToolOutput) {
        self.0.lock().unwrap().push((call.id.clone(), out.status));
    }
}

#[tokio::test]
async fn g3_blocking_hook_denies_with_its_reason_and_after_hook_sees_every_result() {
    let (_d, reg, mut cx, runs) = setup();
    let hooks = Arc::new(BlockEcho(Default::default()));
    cx.hooks = hooks.clone();
    let out = dispatch(&reg, &ToolCall::new("a", "echo", json!({"text": "secret"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Denied);
    assert!(out.text_content().contains("no secrets"));
    let out = dispatch(&reg, &ToolCall::new("b", "echo", json!({"text": "ok"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(*hooks.0.lock().unwrap(), vec![("a".into(), ToolStatus::Denied), ("b".into(), ToolStatus::Success)]);
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_for_that_call_only() {
    let (_d, reg, cx, _) = setup();
    let out = dispatch(&reg, &ToolCall::new("1", "echo", json!({"text": "panic"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("boom"));
    let out = dispatch(&reg, &ToolCall::new("2", "echo", json!({"text": "fine"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Success);
}

#[tokio::test]
async fn g6_cancellation_stops_a_running_call_at_once() {
    let (_d, reg, cx, _) = setup();
    let cancel = cx.cancel.clone();
    let task =
        tokio::spawn(async move { dispatch(&reg, &ToolCall::new("1", "echo", json!({"text": "sleep"})), &cx).await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    cancel.cancel();
    let out = tokio::time::timeout(std::time::Duration::from_secs(5), task).await.unwrap().unwrap();
    assert_eq!(out.status, ToolStatus::Cancelled);
}
