//! A host's own tool registered with `ToolboxBuilder::tool`, beside the built-ins.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kodik_tools::Toolbox;
use kodik_tools::core::{
    Approval, ApprovalRequest, Approver, Effect, HookDecision, Hooks, ToolCall, ToolContext, ToolError, ToolOutput,
    ToolSpec, ToolStatus, TypedTool,
};
use kodik_tools::schema::ToolArgs;
use serde_json::json;

/// Says hello.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

impl ToolArgs for GreetArgs {
    const NAME: &'static str = "greet";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Greet someone by name.";
}

struct Greet(ToolSpec);

#[async_trait]
impl TypedTool for Greet {
    type Args = GreetArgs;
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(&self, args: GreetArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("hello, {}", args.name)))
    }
}

/// A host tool under any spec that always answers the same text.
struct Fixed(ToolSpec, &'static str);

#[async_trait]
impl kodik_tools::core::Tool for Fixed {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: serde_json::Value, _cx: &ToolContext) -> ToolOutput {
        ToolOutput::text(self.1)
    }
}

/// Records the calls the hooks see.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

#[async_trait]
impl Hooks for Seen {
    async fn before_call(&self, call: &ToolCall) -> HookDecision {
        self.0.lock().unwrap().push(call.name.clone());
        HookDecision::Allow
    }
}

/// Refuses to greet Mallory.
struct NotMallory;

#[async_trait]
impl Approver for NotMallory {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if request.args["name"] == "Mallory" { Approval::Denied("not her".into()) } else { Approval::Approved }
    }
}

fn toolbox(dir: &std::path::Path, seen: Arc<Seen>) -> Toolbox {
    Toolbox::builder()
        .workspace(dir)
        .tool(Greet(kodik_tools::schema::spec::<GreetArgs>()))
        .hooks(seen)
        .approver(Arc::new(NotMallory))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_k1_a_host_tool_is_offered_validated_hooked_approved_and_callable_from_codemode() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let tb = toolbox(dir.path(), Arc::clone(&seen));

    let spec = tb.specs().into_iter().find(|s| s.name == "greet").expect("greet is in the toolbox");
    assert_eq!(spec.input_schema["properties"]["name"]["description"], "Who to greet.");
    assert!(tb.plan(kodik_tools::harness::Mode::Ask, "gpt-5").tools.iter().any(|t| t.name == "greet"));

    let ok = tb.call(&ToolCall::new("1", "greet", json!({"name": "Ada"}))).await;
    assert_eq!((ok.status, ok.text_content().as_str()), (ToolStatus::Success, "hello, Ada"));

    let bad = tb.call(&ToolCall::new("2", "greet", json!({"name": "Ada", "loud": true}))).await;
    assert_eq!(bad.status, ToolStatus::Error);
    assert!(bad.text_content().contains("unknown field `loud`"), "{}", bad.text_content());

    let denied = tb.call(&ToolCall::new("3", "greet", json!({"name": "Mallory"}))).await;
    assert_eq!(denied.status, ToolStatus::Denied);
    assert!(denied.text_content().contains("not her"), "{}", denied.text_content());

    let script =
        tb.call(&ToolCall::new("4", "codemode", json!({"code": "return await tools.greet({name: 'Bob'})"}))).await;
    assert_eq!(script.status, ToolStatus::Success, "{}", script.text_content());
    assert!(script.text_content().contains("hello, Bob"), "{}", script.text_content());

    // The call with bad arguments never reached the hooks; the script's nested call did.
    let names = seen.0.lock().unwrap().clone();
    assert_eq!(names, ["greet", "greet", "codemode", "greet"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_tool_with_a_built_in_name_replaces_the_built_in() {
    let dir = tempfile::tempdir().unwrap();
    let spec = kodik_tools::schema::find("glob").unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).tool(Fixed(spec, "my glob")).build().unwrap();
    let out = tb.call(&ToolCall::new("1", "glob", json!({"pattern": "*"}))).await;
    assert_eq!(out.text_content(), "my glob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g10_g12_scheduler_for_runs_what_a_plan_lets_the_model_call_and_nothing_else() {
    use kodik_tools::harness::Mode;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
    let seen = Arc::new(Seen::default());
    let tb = toolbox(dir.path(), Arc::clone(&seen));
    let plan = tb.plan(Mode::Code, "gpt-5");
    assert!(plan.tools.iter().any(|t| t.name == "call_tool"), "grep is deferred for this model");
    let via_call_tool = ToolCall::new("1", "call_tool", json!({"name": "grep", "arguments": {"pattern": "needle"}}));
    // The toolbox's own entry points know the tools, not the plan's deferral tools.
    assert_eq!(tb.call(&via_call_tool).await.status, ToolStatus::Error);
    let search = ToolCall::new("2", "tool_search", json!({"query": "search file contents regex"}));
    let by_own_name = ToolCall::new("3", "read_file", json!({"path": "a.txt"}));
    // Left out for OpenAI models, which patch instead.
    let left_out = ToolCall::new(
        "4",
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old_string": "needle", "new_string": "pin"}]}),
    );
    let outs = tb.scheduler_for(&plan).run([via_call_tool, search, by_own_name, left_out], tb.context()).await;
    assert!(outs[2].text_content().contains("needle"), "{}", outs[2].text_content());
    assert_eq!(outs[3].status, ToolStatus::Error, "{}", outs[3].text_content());
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "needle\n");
    assert_eq!(outs[0].status, ToolStatus::Success, "{}", outs[0].text_content());
    assert!(outs[0].text_content().contains("a.txt:1:needle"), "{}", outs[0].text_content());
    assert_eq!(outs[1].status, ToolStatus::Success, "{}", outs[1].text_content());
    assert!(outs[1].text_content().contains("grep"), "{}", outs[1].text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a6_a_hosts_own_sub_agent_and_ask_questions_are_offered() {
    // Plans leave the built-in sub_agent and ask_questions out while nothing can run them; a
    // host that brings its own under those names gets them offered.
    use kodik_tools::harness::Mode;
    let dir = tempfile::tempdir().unwrap();
    let offered = |tb: &Toolbox, name: &str| {
        let plan = tb.plan(Mode::Code, "gpt-5");
        plan.tools.iter().chain(&plan.deferred).any(|t| t.name == name)
    };
    let plain = Toolbox::builder().workspace(dir.path()).build().unwrap();
    assert!(!offered(&plain, "sub_agent") && !offered(&plain, "ask_questions"));
    let tb = Toolbox::builder()
        .workspace(dir.path())
        .tool(Fixed(kodik_tools::schema::find("sub_agent").unwrap(), "mine"))
        .tool(Fixed(kodik_tools::schema::find("ask_questions").unwrap(), "mine"))
        .build()
        .unwrap();
    assert!(offered(&tb, "sub_agent") && offered(&tb, "ask_questions"));
}

#[test]
fn g12_a_host_tool_cannot_take_a_harness_name_or_one_providers_refuse() {
    let dir = tempfile::tempdir().unwrap();
    for (name, why) in [("call_tool", "keeps this name"), ("my tool!", "1 to 64"), ("", "1 to 64")] {
        let spec = ToolSpec::new(name, "A tool of the host's own.", json!({"type": "object"}), Effect::ReadOnly);
        let Err(err) = Toolbox::builder().workspace(dir.path()).tool(Greet(spec)).build() else {
            panic!("`{name}` was taken");
        };
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
}
