//! Mode policy, model families, deferred tools, ordering and the repeat guard.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{
    Effect, Hooks, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, ToolStatus, TypedTool,
    Workspace, dispatch,
};
use kodik_harness::{Availability, Harness, Mode, RepeatGuard};
use serde::Deserialize;
use serde_json::json;

fn names(specs: &[ToolSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name.as_str()).collect()
}

fn harness() -> Harness {
    Harness::new(kodik_schema::all())
}

#[test]
fn g10_openai_models_get_apply_patch_instead_of_the_three_file_tools() {
    let h = harness();
    let gpt = h.plan(Mode::Code, "gpt-5");
    let claude = h.plan(Mode::Code, "claude-sonnet-4-5");
    assert!(names(&gpt.tools).contains(&"apply_patch"));
    for t in ["create_file", "edit_file", "delete_file"] {
        assert!(!names(&gpt.tools).contains(&t), "{t}");
        assert!(names(&claude.tools).contains(&t), "{t}");
    }
    assert!(!names(&claude.tools).contains(&"apply_patch"));
    // Switching model mid-conversation swaps them on the next request.
    assert_ne!(gpt.tools, claude.tools);
}

#[test]
fn g10_disabling_apply_patch_gives_openai_models_the_file_tools_back() {
    let mut h = harness();
    h.set_enabled(Mode::Code, "apply_patch", false);
    let plan = h.plan(Mode::Code, "openai/o3");
    for t in ["create_file", "edit_file", "delete_file"] {
        assert!(names(&plan.tools).contains(&t), "{t}");
    }
    assert_eq!(plan.availability()["apply_patch"], Availability::SwitchedOff);
}

#[test]
fn g11_switched_off_tools_disappear_from_schemas_and_guidance_from_the_next_request() {
    let mut h = harness();
    let before = h.plan(Mode::Code, "qwen3-coder");
    assert!(names(&before.tools).contains(&"shell"));
    assert!(before.guidance.contains("- shell:"));
    h.set_enabled(Mode::Code, "shell", false);
    let after = h.plan(Mode::Code, "qwen3-coder");
    assert!(!names(&after.tools).contains(&"shell"));
    assert!(!after.guidance.contains("- shell:"));
    assert!(after.switched_off.contains(&"shell".to_string()));
    // The earlier request is not rewritten, and other modes are untouched.
    assert!(names(&before.tools).contains(&"shell"));
    assert!(names(&h.plan(Mode::Debug, "qwen3-coder").tools).contains(&"shell"));
}

#[test]
fn g11_read_only_modes_list_what_they_cannot_offer() {
    let h = harness();
    for mode in [Mode::Plan, Mode::Ask, Mode::Educator] {
        let plan = h.plan(mode, "qwen3-coder");
        let av = plan.availability();
        for t in ["edit_file", "create_file", "delete_file", "shell", "edit_notebook"] {
            assert_eq!(av[t], Availability::NotOffered, "{mode:?} {t}");
        }
        assert_eq!(av["read_file"], Availability::Immediate, "{mode:?}");
        assert!(!plan.guidance.contains("- edit_file:"));
    }
    assert_eq!(h.plan(Mode::Plan, "x").availability()["generate_plan"], Availability::Immediate);
    assert_eq!(h.plan(Mode::Code, "x").availability()["generate_plan"], Availability::NotOffered);
    assert_eq!(h.plan(Mode::Educator, "x").availability()["create_lesson"], Availability::Immediate);
}

#[test]
fn g12_default_deferrals_by_mode_and_model() {
    let h = harness();
    let code = h.plan(Mode::Code, "qwen3-coder");
    let av = code.availability();
    for t in ["read_file", "glob", "grep", "web_fetch", "web_search", "agent_status", "send_message", "lsp"] {
        assert_eq!(av[t], Availability::Deferred, "code: {t}");
    }
    assert_eq!(av["todo_write"], Availability::Immediate);
    assert!(names(&code.tools).contains(&"tool_search") && names(&code.tools).contains(&"call_tool"));
    assert!(code.guidance.contains("deferred: find it with tool_search"));

    let ask = h.plan(Mode::Ask, "qwen3-coder").availability();
    assert_eq!(ask["read_file"], Availability::Immediate);
    assert_eq!(ask["lsp"], Availability::Deferred, "lsp is deferred everywhere");
    for model in ["claude-opus-4", "gpt-5"] {
        for mode in Mode::ALL {
            assert_eq!(h.plan(mode, model).availability()["todo_write"], Availability::Deferred, "{mode:?} {model}");
        }
    }
}

#[test]
fn g13_mcp_tools_come_after_builtins_each_group_sorted_and_only_active_ones_count() {
    let mut h = harness();
    let mk = |n: &str| ToolSpec::new(n, "An MCP tool. More text.", json!({"type": "object"}), Effect::Network);
    h.add_mcp_tool("github", mk("github__list_issues"));
    h.add_mcp_tool("alpha", mk("alpha__zeta"));
    h.add_mcp_tool("alpha", mk("alpha__off"));
    h.set_enabled(Mode::Ask, "alpha__off", false);
    let plan = h.plan(Mode::Ask, "qwen3-coder");
    let n = names(&plan.tools);
    let first_mcp = n.iter().position(|t| t.contains("__")).unwrap();
    assert!(n[..first_mcp].iter().all(|t| !t.contains("__")));
    assert_eq!(&n[first_mcp..], ["alpha__zeta", "github__list_issues"], "MCP after built-ins, sorted");
    let mut builtins = n[..first_mcp].to_vec();
    builtins.sort();
    assert_eq!(builtins, n[..first_mcp].to_vec(), "built-ins sorted");
    assert!(!plan.guidance.contains("alpha__off"));
    assert!(plan.guidance.contains("github__list_issues [MCP server github]"));
    // MCP tools are offered even in read-only modes (A8).
    assert_eq!(plan.availability()["github__list_issues"], Availability::Immediate);
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FindArgs {
    needle: String,
}

struct Find(ToolSpec);

#[async_trait]
impl TypedTool for Find {
    type Args = FindArgs;
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(&self, a: FindArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if a.needle == "fail" {
            return Err(ToolError::failed("nothing found"));
        }
        Ok(ToolOutput::text(format!("found {}", a.needle)))
    }
}

fn find_spec() -> ToolSpec {
    ToolSpec::new(
        "find_symbol",
        "Finds a symbol definition in the project index.",
        json!({"type": "object", "properties": {"needle": {"type": "string"}}, "required": ["needle"]}),
        Effect::ReadOnly,
    )
}

#[tokio::test]
async fn g12_tool_search_ranks_the_tool_a_query_names_first_not_one_sharing_common_words() {
    let all = kodik_schema::all();
    let first = |query: &str| all[kodik_harness::rank_tools(&all, query)[0]].name.clone();
    for (query, tool) in [
        ("go to definition", "lsp"),
        ("find references to a symbol", "lsp"),
        ("lsp", "lsp"),
        ("read a file", "read_file"),
        ("run a shell command", "shell"),
        ("search the web", "web_search"),
        ("stop a running terminal", "kill_terminal"),
    ] {
        assert_eq!(first(query), tool, "{query}");
    }
    let mut reg = ToolRegistry::new();
    reg.register(kodik_harness::ToolSearchTool::new(all.clone()));
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let one =
        dispatch(&reg, ToolCall::new("1", "tool_search", json!({"query": "go to definition", "limit": 1})), &cx).await;
    let v: serde_json::Value = serde_json::from_str(&one.text_content()).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 1);
    assert_eq!(v["tools"][0]["name"], "lsp");
    // The schema says 1 to 20: anything else is named as the error, not silently clamped.
    for limit in [0, 100] {
        let out = dispatch(&reg, ToolCall::new("2", "tool_search", json!({"query": "lsp", "limit": limit})), &cx).await;
        assert_eq!(out.status, ToolStatus::Error, "{limit}");
        assert!(out.text_content().contains("1 to 20"), "{}", out.text_content());
    }
}

#[tokio::test]
async fn g12_tool_search_then_call_tool_round_trip_without_changing_the_tool_list() {
    let mut h = Harness::new([find_spec()]);
    h.set_deferred(Mode::Code, "find_symbol", true);
    let plan = h.plan(Mode::Code, "qwen3-coder");
    assert_eq!(names(&plan.tools), ["call_tool", "tool_search"]);
    let mut base = ToolRegistry::new();
    base.register(Find(find_spec()));
    let reg = plan.registry(&base);
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());

    let found = dispatch(&reg, &ToolCall::new("1", "tool_search", json!({"query": "symbol definition"})), &cx).await;
    assert_eq!(found.status, ToolStatus::Success);
    let v: serde_json::Value = serde_json::from_str(&found.text_content()).unwrap();
    assert_eq!(v["tools"][0]["name"], "find_symbol");
    assert_eq!(v["tools"][0]["input_schema"]["required"][0], "needle");

    let args = json!({"name": "find_symbol", "arguments": {"needle": "main"}});
    let out = dispatch(&reg, &ToolCall::new("2", "call_tool", args), &cx).await;
    assert_eq!(out.text_content(), "found main");

    let bad =
        dispatch(&reg, &ToolCall::new("3", "call_tool", json!({"name": "find_symbol", "arguments": {}})), &cx).await;
    assert_eq!(bad.status, ToolStatus::Error);
    assert!(bad.text_content().contains("needle"), "{}", bad.text_content());

    let unknown =
        dispatch(&reg, &ToolCall::new("4", "call_tool", json!({"name": "shell", "arguments": {}})), &cx).await;
    assert!(unknown.text_content().contains("not a deferred tool"));
    // The request's tool list stays the same after searching and calling.
    assert_eq!(h.plan(Mode::Code, "qwen3-coder").tools, plan.tools);
}

/// G12: `call_tool` of a tool the request offers directly runs it, as a call by its name would;
/// before, it was refused with advice to use tool_search, which could not find it either.
#[tokio::test]
async fn g12_call_tool_of_a_directly_offered_tool_runs_it() {
    let mut h = Harness::new([
        find_spec(),
        ToolSpec::new("lsp", "Language server.", json!({"type": "object"}), Effect::ReadOnly),
    ]);
    h.set_deferred(Mode::Code, "find_symbol", false);
    let plan = h.plan(Mode::Code, "qwen3-coder");
    assert!(
        names(&plan.tools).contains(&"find_symbol") && names(&plan.tools).contains(&"call_tool"),
        "{:?}",
        names(&plan.tools)
    );
    let mut base = ToolRegistry::new();
    base.register(Find(find_spec()));
    let reg = plan.callable(&base);
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let via = json!({"name": "find_symbol", "arguments": {"needle": "main"}});
    let out = dispatch(&reg, &ToolCall::new("1", "call_tool", via), &cx).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(out.text_content(), "found main");
    let bad =
        dispatch(&reg, &ToolCall::new("2", "call_tool", json!({"name": "find_symbol", "arguments": {}})), &cx).await;
    assert!(bad.text_content().contains("needle"), "its own argument check: {}", bad.text_content());
}

#[tokio::test]
async fn g12_a_deferred_tool_called_by_its_own_name_runs_as_through_call_tool() {
    let mut h = Harness::new([find_spec()]);
    h.set_deferred(Mode::Code, "find_symbol", true);
    let plan = h.plan(Mode::Code, "qwen3-coder");
    let mut base = ToolRegistry::new();
    base.register(Find(find_spec()));
    let reg = plan.callable(&base);
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());

    let out = dispatch(&reg, &ToolCall::new("1", "find_symbol", json!({"needle": "main"})), &cx).await;
    assert_eq!(out.text_content(), "found main");
    let via = json!({"name": "find_symbol", "arguments": {"needle": "main"}});
    assert_eq!(dispatch(&reg, &ToolCall::new("2", "call_tool", via), &cx).await.text_content(), "found main");
    // Its own argument check, as through call_tool.
    let bad = dispatch(&reg, &ToolCall::new("3", "find_symbol", json!({})), &cx).await;
    assert_eq!(bad.status, ToolStatus::Error);
    assert!(bad.text_content().contains("needle"), "{}", bad.text_content());
    // Offered nothing more: the tool list is the same, and a tool the mode has not is unknown.
    assert_eq!(names(&plan.tools), ["call_tool", "tool_search"]);
    let shell = dispatch(&reg, &ToolCall::new("4", "shell", json!({})), &cx).await;
    assert!(shell.text_content().contains("unknown tool"), "{}", shell.text_content());
    // A tool switched off in this mode stays unknown.
    h.set_enabled(Mode::Code, "find_symbol", false);
    let off = h.plan(Mode::Code, "qwen3-coder").callable(&base);
    let out = dispatch(&off, &ToolCall::new("5", "find_symbol", json!({"needle": "main"})), &cx).await;
    assert_eq!(out.status, ToolStatus::Error);
}

/// A deferred tool that changes a file: its call waits for the end of the response (G4) and
/// is ordered with other changes of that file (G2).
struct Touch(ToolSpec);

#[derive(Deserialize)]
struct TouchArgs {
    path: String,
}

#[async_trait]
impl TypedTool for Touch {
    type Args = TouchArgs;
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn resources(&self, a: &TouchArgs, ws: &Workspace) -> Vec<kodik_core::Resource> {
        ws.resolve(&a.path).map(|p| vec![kodik_core::Resource::File(p)]).unwrap_or_default()
    }
    async fn run(&self, a: TouchArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("touched {}", a.path)))
    }
}

#[tokio::test]
async fn g4_g12_call_tool_starts_while_streaming_exactly_when_the_tool_it_calls_would() {
    let touch_spec = ToolSpec::new(
        "touch",
        "Touches a file.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        Effect::MutatesFiles,
    );
    let mut h = Harness::new([find_spec(), touch_spec.clone()]);
    h.set_deferred(Mode::Code, "find_symbol", true).set_deferred(Mode::Code, "touch", true);
    let plan = h.plan(Mode::Code, "qwen3-coder");
    let mut base = ToolRegistry::new();
    base.register(Find(find_spec()));
    base.register(Touch(touch_spec));
    let reg = plan.registry(&base);
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let call_tool = reg.get("call_tool").unwrap();

    // The scheduler starts a read through call_tool while the response streams…
    let scheduler = kodik_scheduler::Scheduler::new(reg.clone());
    let mut turn = scheduler.turn(&cx);
    let find = json!({"name": "find_symbol", "arguments": {"needle": "main"}});
    assert!(call_tool.starts_while_streaming(&find));
    turn.push(ToolCall::new("1", "call_tool", find));
    let mut finished = turn.signals().subscribe();
    tokio::time::timeout(std::time::Duration::from_secs(10), finished.wait_for(|n| *n >= 1))
        .await
        .expect("call_tool(find_symbol) did not run before the response ended")
        .unwrap();
    // …but a file change through call_tool, and everything after it, waits for the end (G4).
    let touch = json!({"name": "touch", "arguments": {"path": "a.txt"}});
    assert!(!call_tool.starts_while_streaming(&touch));
    // Its resources are the called tool's, so it keeps its place among changes of a.txt (G2).
    let resources = call_tool.resources(&touch, &cx.workspace);
    assert_eq!(resources.len(), 1, "{resources:?}");
    assert_eq!(resources, base.get("touch").unwrap().resources(&json!({"path": "./a.txt"}), &cx.workspace));
    turn.push(ToolCall::new("2", "call_tool", touch));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(turn.signals().finished_count(), 1, "the file change ran before the response ended");
    let outs = turn.results().await;
    assert_eq!(outs[0].text_content(), "found main");
    assert_eq!(outs[1].text_content(), "touched a.txt");
    // An unknown name fails at once instead of waiting.
    assert!(call_tool.starts_while_streaming(&json!({"name": "nope"})));
}

#[tokio::test]
async fn g15_the_third_identical_fruitless_call_is_blocked_and_corrected_arguments_go_through() {
    let mut base = ToolRegistry::new();
    base.register(Find(find_spec()));
    let dir = tempfile::tempdir().unwrap();
    let mut cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let guard = Arc::new(RepeatGuard::default());
    cx.hooks = guard.clone() as Arc<dyn Hooks>;
    let failing = || ToolCall::new("x", "find_symbol", json!({"needle": "fail"}));
    assert_eq!(dispatch(&base, &failing(), &cx).await.status, ToolStatus::Error);
    // A cancelled identical call counts too.
    guard.after_call(&failing(), &ToolError::Cancelled.into_output()).await;
    let third = dispatch(&base, &failing(), &cx).await;
    assert_eq!(third.status, ToolStatus::Denied);
    assert!(third.text_content().contains("change the arguments"));
    let corrected = dispatch(&base, &ToolCall::new("y", "find_symbol", json!({"needle": "main"})), &cx).await;
    assert_eq!(corrected.status, ToolStatus::Success);
}

#[test]
fn w5_web_search_is_offered_only_where_a_search_provider_is_configured() {
    let mut h = harness();
    h.set_search_configured(false);
    for mode in Mode::ALL {
        let plan = h.plan(mode, "qwen3-coder");
        assert_eq!(plan.availability()["web_search"], Availability::NotOffered, "{mode:?}");
        assert!(!names(&plan.tools).contains(&"web_search"));
        assert_ne!(plan.availability()["web_fetch"], Availability::NotOffered, "{mode:?}");
    }
    h.set_search_configured(true);
    assert_eq!(h.plan(Mode::Ask, "qwen3-coder").availability()["web_search"], Availability::Immediate);
}
