//! Behaviour of the `codemode` tool, by SPEC K rule. Every test is bounded by a timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kodik_codemode::{CodeModeConfig, CodeModeTool, Exposure};
use kodik_core::events::CollectingSink;
use kodik_core::{
    Effect, Event, HookDecision, Hooks, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec,
    ToolStatus, TypedTool, Workspace,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

// ---- test tools ----

#[derive(Deserialize, JsonSchema)]
struct AnyArgs {
    /// Anything to echo back.
    #[serde(default)]
    value: Option<Value>,
}

/// Returns "ok", or its `value` argument as JSON. Counts its runs.
struct Noop {
    spec: ToolSpec,
    runs: Arc<AtomicUsize>,
}

impl Noop {
    fn named(name: &str, description: &str) -> Self {
        Self {
            spec: ToolSpec::new(name, description, kodik_schema::input_schema::<AnyArgs>(), Effect::ReadOnly),
            runs: Arc::default(),
        }
    }
}

#[async_trait]
impl TypedTool for Noop {
    type Args = AnyArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, args: AnyArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(args.value.map_or_else(|| "ok".to_string(), |v| v.to_string())))
    }
}

#[derive(Deserialize, JsonSchema)]
struct SleepArgs {
    /// Milliseconds to sleep.
    ms: u64,
}

/// Sleeps `ms`; records how many run at once and how many finished.
#[derive(Clone, Default)]
struct Probe {
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

struct Sleeper {
    spec: ToolSpec,
    probe: Probe,
}

#[async_trait]
impl TypedTool for Sleeper {
    type Args = SleepArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, args: SleepArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let n = self.probe.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.probe.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        self.probe.now.fetch_sub(1, Ordering::SeqCst);
        self.probe.finished.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("slept {}", args.ms)))
    }
}

/// Always fails, with its `value` argument as the output when that is a string (a command's
/// log, say).
struct Failing {
    spec: ToolSpec,
}

#[async_trait]
impl TypedTool for Failing {
    type Args = AnyArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, args: AnyArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let output = args.value.as_ref().and_then(Value::as_str).unwrap_or("boom: the disk is on fire");
        Err(ToolError::failed(output))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The file to read.
    path: String,
    /// How many lines.
    #[serde(default)]
    #[allow(dead_code)]
    limit: Option<u32>,
    /// Which encoding.
    #[serde(default)]
    #[allow(dead_code)]
    mode: Option<Mode>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Text,
    Binary,
}

/// Has a required argument; counts its runs.
struct Reader {
    spec: ToolSpec,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl TypedTool for Reader {
    type Args = ReadArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, args: ReadArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("contents of {}\nline 2\nTODO: fix {}", args.path, args.path)))
    }
}

struct Fixture {
    registry: ToolRegistry,
    noop_runs: Arc<AtomicUsize>,
    read_runs: Arc<AtomicUsize>,
    probe: Probe,
    _dir: tempfile::TempDir,
    workspace: Workspace,
}

fn fixture() -> Fixture {
    let mut registry = ToolRegistry::new();
    let noop = Noop::named("noop", "Does nothing and returns ok.");
    let noop_runs = Arc::clone(&noop.runs);
    registry.register(noop);
    registry.register(Noop::named("echo", "Returns its value argument as JSON."));
    registry.register(Noop::named("odd-name", "A tool whose name is not an identifier."));
    registry.register(Noop::named("github__list_issues", "List the issues of a repository."));
    registry.register(Noop::named("github__create_issue", "Create an issue in a repository."));
    registry.register(Noop::named("linear__find_ticket", "Find a Linear ticket by keyword."));
    registry.register(Noop::named("subagent", "Start a sub-agent."));
    let probe = Probe::default();
    registry.register(Sleeper {
        spec: ToolSpec::new("sleep_ms", "Sleeps.", kodik_schema::input_schema::<SleepArgs>(), Effect::ReadOnly),
        probe: probe.clone(),
    });
    registry.register(Failing {
        spec: ToolSpec::new("fail", "Always fails.", kodik_schema::input_schema::<AnyArgs>(), Effect::ReadOnly),
    });
    let reader = Reader {
        spec: ToolSpec::new(
            "read",
            "Read a file. Returns its text.",
            kodik_schema::input_schema::<ReadArgs>(),
            Effect::ReadOnly,
        ),
        runs: Arc::default(),
    };
    let read_runs = Arc::clone(&reader.runs);
    registry.register(reader);
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    Fixture { registry, noop_runs, read_runs, probe, _dir: dir, workspace }
}

fn config() -> CodeModeConfig {
    CodeModeConfig::default()
        .timeout(Duration::from_secs(10))
        .expose("linear__*", Exposure::Deferred)
        .expose("github__*", Exposure::Codemode)
        .expose("github__create_issue", Exposure::Direct)
        .expose("subagent", Exposure::ModelOnly)
}

const LIMIT: Duration = Duration::from_secs(30);

async fn run_with(tool: &CodeModeTool, cx: &ToolContext, code: &str) -> ToolOutput {
    tokio::time::timeout(LIMIT, tool.call(json!({ "code": code }), cx)).await.expect("the script hung")
}

async fn run(cfg: CodeModeConfig, code: &str) -> (ToolOutput, Fixture) {
    let f = fixture();
    let tool = CodeModeTool::new(cfg, f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    let out = run_with(&tool, &cx, code).await;
    (out, f)
}

fn error_kind(out: &ToolOutput) -> Option<String> {
    let kind = out.meta["codemode"]["error_kind"].as_str().map(str::to_string);
    assert_eq!(out.meta["error_kind"].as_str(), kind.as_deref(), "the kind is also at the top of the metadata");
    kind
}

fn output_section(out: &ToolOutput) -> String {
    let t = out.text_content();
    t.split_once("\nOutput:\n").map(|(_, o)| o.trim_end().to_string()).unwrap_or_default()
}

// ---- K1, K2: calls and return values ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_k2_strings_return_as_is_other_values_as_json() {
    let (out, _) = run(config(), "return 'plain text'").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(output_section(&out), "plain text");
    let (out, _) = run(config(), "const r = await tools.noop({}); return {r, n: [1, 2]}").await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap();
    assert_eq!(v, json!({"r": "ok", "n": [1, 2]}));
    let (out, _) = run(config(), "return 42").await;
    assert_eq!(output_section(&out), "42");
    let (out, _) = run(config(), "await tools.noop({})").await;
    assert_eq!(out.status, ToolStatus::Success);
    assert!(!out.text_content().contains("Output:"), "{}", out.text_content());
    assert!(out.text_content().starts_with("Script completed in "), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_mcp_tools_are_grouped_by_server_and_odd_names_use_brackets() {
    let code = r#"
        const a = await tools.github.list_issues({value: "gh"});
        const b = await tools["odd-name"]({value: 7});
        const c = await call("github__list_issues", {value: "by name"});
        return [a, b, c].join("|")"#;
    let (out, _) = run(config(), code).await;
    assert_eq!(output_section(&out), r#""gh"|7|"by name""#, "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_an_mcp_server_named_like_a_built_in_tool_leaves_both_callable() {
    // The official MCP memory server is usually keyed `memory`, like the built-in tool.
    let mut registry = ToolRegistry::new();
    registry.register(Noop::named("memory__name", "A server tool named like a function's own property."));
    registry.register(Noop::named("memory", "The built-in memory tool."));
    registry.register(Noop::named("memory__recall", "Recall from the memory server."));
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let tool = CodeModeTool::new(CodeModeConfig::default().timeout(Duration::from_secs(10)), registry);
    let code = "return [await tools.memory({value: 1}), await tools.memory.recall({value: 2}), \
                await tools.memory.name({value: 3}), await call('memory', {value: 4})].join('|')";
    let out = run_with(&tool, &cx, code).await;
    assert_eq!(output_section(&out), "1|2|3|4", "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k4_call_by_name_reaches_builtin_and_mcp_tools() {
    let (out, f) =
        run(config(), "return (await call('noop', {})) + (await call('github__create_issue', {value: 1}))").await;
    assert_eq!(output_section(&out), "ok1", "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_fenced_code_is_unwrapped() {
    let (out, _) = run(config(), "```javascript\nconst x = await tools.noop({});\nreturn x + '!'\n```").await;
    assert_eq!(output_section(&out), "ok!", "{}", out.text_content());
    let (out, _) = run(config(), "```js\nconst a = 1;\nnull.boom\n```").await;
    assert_eq!(out.meta["codemode"]["error"]["line"], 3, "line of the submitted text: {}", out.text_content());
}

// ---- K2: tool errors ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_tool_error_is_catchable_with_tool_and_output() {
    let code = r#"
        try { await tools.fail({}); return "not thrown"; }
        catch (e) { return {name: e.name, tool: e.tool, output: e.output, isError: e instanceof Error}; }"#;
    let (out, _) = run(config(), code).await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap();
    assert_eq!(v["name"], "ToolError");
    assert_eq!(v["tool"], "fail");
    assert_eq!(v["isError"], true);
    assert!(v["output"].as_str().unwrap().contains("boom: the disk is on fire"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_uncaught_tool_error_is_a_tool_failure_with_line() {
    let (out, _) = run(config(), "const a = 1;\nawait tools.noop({});\nawait tools.fail({});\nreturn 'no'").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(error_kind(&out).as_deref(), Some("ToolFailure"));
    let text = out.text_content();
    assert!(text.contains("boom: the disk is on fire"), "{text}");
    assert_eq!(out.meta["codemode"]["error"]["line"], 3, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_k9_a_failed_calls_error_carries_the_end_of_its_output() {
    // A short output is kept whole: every line, down to the exit code.
    let short = "building\nerror: x\n[exit code 2 · 0.0 s]";
    let code = format!("await tools.fail({{value: {short:?}}})");
    let (out, _) = run(config(), &code).await;
    assert_eq!(error_kind(&out).as_deref(), Some("ToolFailure"), "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("building\nerror: x\n[exit code 2 · 0.0 s]"), "{text}");
    let record = out.meta["codemode"]["calls"][0]["error"].as_str().unwrap();
    assert!(record.contains("error: x") && record.contains("exit code 2"), "{record}");
    // A long log keeps its first line and its end, where a build or test says what failed.
    let log: String = (0..400).map(|i| format!("   Compiling crate{i} v0.1.0\n")).collect::<String>()
        + "error[E0308]: mismatched types\n --> src/lib.rs:3:5\n[exit code 101 · 3.2 s]";
    let code = format!("try {{ await tools.fail({{value: {log:?}}}) }} catch (e) {{ return e.message }}");
    let (out, _) = run(config(), &code).await;
    let message = output_section(&out);
    assert!(message.starts_with("tool `fail` failed (error): Compiling crate0 v0.1.0\n"), "{message}");
    assert!(message.contains("…"), "{message}");
    assert!(
        message.ends_with("error[E0308]: mismatched types\n --> src/lib.rs:3:5\n[exit code 101 · 3.2 s]"),
        "{message}"
    );
    assert!(message.len() < 2500, "{} bytes", message.len());
    let code = format!("await tools.fail({{value: {log:?}}})");
    let (out, _) = run(config(), &code).await;
    let record = out.meta["codemode"]["calls"][0]["error"].as_str().unwrap();
    assert!(record.ends_with("[exit code 101 · 3.2 s]"), "{record}");
    assert!(record.chars().count() <= 300, "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_promise_all_settled_sees_each_outcome() {
    let code = r#"
        const r = await Promise.allSettled([tools.noop({}), tools.fail({}), tools.echo({value: 3})]);
        return r.map(x => x.status + ":" + (x.value ?? x.reason.name)).join(",")"#;
    let (out, _) = run(config(), code).await;
    assert_eq!(output_section(&out), "fulfilled:ok,rejected:ToolError,fulfilled:3", "{}", out.text_content());
}

// ---- K9: typed errors ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_unknown_tool_names_the_closest_tools() {
    let (out, _) = run(config(), "return await tools.noopp({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
    assert!(out.text_content().contains("did you mean: noop"), "{}", out.text_content());
    let (out, _) = run(config(), "return await tools.github.list_issuez({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
    assert!(out.text_content().contains("github__list_issues"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_missing_required_argument_is_refused_before_the_tool_runs() {
    let (out, f) = run(config(), "await tools.noop({});\nreturn await tools.read({limit: 3})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("InvalidToolInput"), "{}", out.text_content());
    assert!(out.text_content().contains("path"), "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["error"]["line"], 2);
    assert_eq!(f.read_runs.load(Ordering::SeqCst), 0, "the tool must not run");
    // Catchable, too.
    let (out, _) = run(config(), "try { await tools.read({}) } catch (e) { return e.name }").await;
    assert_eq!(output_section(&out), "InvalidToolInput");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_parse_error_points_at_the_models_line() {
    let (out, _) = run(config(), "const a = 1;\nconst b = ;\nreturn a").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ParseError"), "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["error"]["line"], 2, "{}", out.text_content());
    assert!(out.text_content().contains("line 2"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_unterminated_literals_and_a_stray_bracket_are_placed_where_they_are() {
    for (code, line, column, says) in [
        ("const a = 1;\nconst b = \"unterminated string;\nreturn a", 2, 11, "never closed"),
        ("const a = 1;\nconst s = `unterminated\nreturn 1", 2, 11, "never closed"),
        ("return 1 }", 1, 10, "unexpected `}`: it closes no bracket"),
    ] {
        let (out, _) = run(config(), code).await;
        let text = out.text_content();
        assert_eq!(error_kind(&out).as_deref(), Some("ParseError"), "{code}: {text}");
        assert_eq!(out.meta["codemode"]["error"]["line"], line, "{code}: {text}");
        assert_eq!(out.meta["codemode"]["error"]["column"], column, "{code}: {text}");
        assert!(text.contains(says), "{code}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_runtime_error_points_at_the_models_line() {
    let (out, _) = run(config(), "const x = await tools.noop({});\n\nconst y = null;\ny.field.deeper;").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"));
    assert_eq!(out.meta["codemode"]["error"]["line"], 4, "{}", out.text_content());
    assert!(out.text_content().contains("TypeError"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_thrown_strings_are_reported() {
    let (out, _) = run(config(), "await tools.noop({}); throw 'custom failure 17'").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"));
    assert!(out.text_content().contains("custom failure 17"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_unsettled_promise_is_reported_not_hung() {
    let started = Instant::now();
    let (out, _) = run(config(), "await new Promise(() => {}); return 1").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnsettledPromise"), "{}", out.text_content());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_stack_overflow_is_an_execution_failure() {
    let (out, _) = run(config(), "function f(n) { return f(n + 1) + 1 }\nreturn f(0)").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("stack overflow"), "{}", out.text_content());
    // After an await boa 0.22 swallows the engine error; it is still an ExecutionFailure, and
    // the script ends at once even with a slow call in flight (K10: that call is cancelled).
    let t = Instant::now();
    let (out, _) = run(
        config(),
        "await tools.noop({});\nconst slow = tools.sleep_ms({ms: 10000});\nconst g = (n) => g(n + 1);\ng(0)",
    )
    .await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("stack overflow"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(out.meta["codemode"]["calls"][1]["status"], "cancelled", "{}", out.meta);
    // Inside an async function the model wrote, the overflow after its await is still named,
    // not mistaken for an UnsettledPromise.
    let code = "async function walk(n) {\n  await tools.noop({});\n  const deep = (k) => deep(k + 1);\n  return deep(n);\n}\n\
                const results = await Promise.all([walk(0), tools.noop({})]);\nreturn results";
    let (out, _) = run(config(), code).await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("stack overflow"), "{}", out.text_content());
    assert!(out.text_content().contains("`walk` (starting on line 1)"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_awaits_then_and_combinators_are_not_mistaken_for_a_dead_script() {
    // Reactions from `.then()`, `Promise.all`, `finally` and returned thenables must not look
    // like the body dying after an await (the stack-overflow detection above).
    let code = "const seen = [];\n\
        tools.noop({}).then(() => seen.push('then'));\n\
        await tools.noop({});\n\
        const [a, b] = await Promise.all([tools.noop({}), tools.sleep_ms({ms: 50}).then(() => 'b')]);\n\
        await tools.noop({}).finally(() => seen.push('finally'));\n\
        await 5;\n\
        for await (const x of [tools.noop({}), Promise.resolve(2)]) seen.push(typeof x);\n\
        await sleep(10);\n\
        return { then(resolve) { resolve(seen.join(',') + '|' + b) } }";
    let (out, _) = run(config(), code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(output_section(&out), "then,finally,string,number|b");
    // A genuine unsettled promise after awaits is still UnsettledPromise, also when functions of
    // the model's finished or threw after their awaits.
    let code = "const f = async () => { await tools.noop({}); return 1 };\n\
                const g = async () => { await tools.noop({}); throw new Error('x') };\n\
                await f();\ntry { await g() } catch {}\n\
                await Promise.all([tools.noop({}), new Promise(() => {})])";
    let (out, _) = run(config(), code).await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnsettledPromise"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_k11_returning_a_calls_promise_without_await_resolves_to_its_result() {
    // An async function may return a promise: the script's result is what it settles to, and
    // the call is recorded as it ended, never mistaken for a stack overflow.
    for (code, expected) in [
        ("return tools.echo({value: 7})", "7"),
        ("return tools.sleep_ms({ms: 50})", "slept 50"),
        ("const p = tools.read({path: 'a.txt'});\nreturn p", "contents of a.txt\nline 2\nTODO: fix a.txt"),
        ("return Promise.all([tools.echo({value: 1}), tools.sleep_ms({ms: 20})])", "[\n  \"1\",\n  \"slept 20\"\n]"),
        ("return tools.sleep_ms({ms: 20}).then(t => t + '!')", "slept 20!"),
        ("return sleep(10).then(() => 7)", "7"),
        ("return { then(resolve) { tools.echo({value: 3}).then(resolve) } }", "3"),
        ("await tools.noop({});\nreturn tools.echo({value: 8})", "8"),
    ] {
        let (out, _) = run(config(), code).await;
        assert_eq!(out.status, ToolStatus::Success, "{code}: {}", out.text_content());
        assert_eq!(output_section(&out), expected, "{code}");
        let calls = out.meta["codemode"]["calls"].as_array().unwrap();
        assert!(calls.iter().all(|c| c["status"] == "success"), "{code}: {calls:?}");
    }
    // A returned call that fails is the call's failure.
    let (out, _) = run(config(), "return tools.fail({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ToolFailure"), "{}", out.text_content());
    assert!(!out.text_content().contains("stack overflow"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_k11_calls_in_flight_when_a_script_fails_may_finish_and_are_named() {
    // A short call finishes and is recorded as it ended; a long one is stopped. The note says
    // which, so the model does not repeat what was done.
    let code = "tools.sleep_ms({ms: 300});\ntools.sleep_ms({ms: 20000});\nawait sleep(10);\nthrow new Error('oops')";
    let started = Instant::now();
    let (out, f) = run(config(), code).await;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    let calls = out.meta["codemode"]["calls"].as_array().unwrap();
    assert_eq!(calls[0]["status"], "success", "{calls:?}");
    assert_eq!(calls[1]["status"], "cancelled", "{calls:?}");
    assert_eq!(f.probe.finished.load(Ordering::SeqCst), 1);
    let text = out.text_content();
    assert!(
        text.contains(
            "2 call(s) were still running when the script failed; 1 finished (their changes are made): sleep_ms; \
             1 were stopped: sleep_ms."
        ),
        "{text}"
    );
    // An abort stops them at once, with no such wait.
    let (out, f) = run(config().timeout(Duration::from_secs(1)), "tools.sleep_ms({ms: 1500});\nwhile (true) {}").await;
    assert_eq!(error_kind(&out).as_deref(), Some("TimeoutExceeded"), "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "cancelled", "{}", out.meta);
    assert_eq!(f.probe.finished.load(Ordering::SeqCst), 0);
}

// ---- K3: sandbox ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k3_no_ambient_authority() {
    let code = r#"
        const names = ["require", "process", "fetch", "setTimeout", "setInterval", "XMLHttpRequest",
                       "Deno", "Bun", "module", "exports", "WebSocket", "queueMicrotask"];
        const present = names.filter(n => typeof globalThis[n] !== "undefined");
        let imported = "no";
        try { await import("fs"); imported = "yes"; } catch (e) { imported = "refused"; }
        return {present, imported}"#;
    let (out, _) = run(config(), code).await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(v["present"], json!([]), "{v}");
    assert_eq!(v["imported"], "refused");
}

// ---- K4: helpers ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k4_text_and_console_reach_the_output_and_events() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let sink = Arc::new(CollectingSink::default());
    let mut cx = ToolContext::new(f.workspace.clone());
    cx.call_id = "cm1".into();
    cx.events = sink.clone();
    let out =
        run_with(&tool, &cx, "text('first'); console.log('hello', {a: 1}); console.warn('careful'); return 'last'")
            .await;
    let t = out.text_content();
    assert!(t.contains("Logs:\nhello {\n  \"a\": 1\n}\n[warn] careful"), "{t}");
    assert!(t.contains("Output:\nfirst\nlast"), "{t}");
    let logs: Vec<(String, String)> = sink
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::Log { call_id, level, message } if call_id == "cm1" => Some((level, message)),
            _ => None,
        })
        .collect();
    assert_eq!(logs[1], ("warn".to_string(), "careful".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k4_store_keeps_values_across_runs_of_one_tool() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    run_with(&tool, &cx, "store('seen', {files: ['a.rs'], n: 2}); store('tmp', 1)").await;
    let out = run_with(&tool, &cx, "const s = load('seen'); store('tmp', undefined); return s.files[0] + s.n").await;
    assert_eq!(output_section(&out), "a.rs2");
    let out = run_with(&tool, &cx, "return String(load('tmp')) + ',' + String(load('never'))").await;
    assert_eq!(output_section(&out), "undefined,undefined");
    let other = CodeModeTool::new(config(), f.registry.clone());
    let out = run_with(&other, &cx, "return String(load('seen'))").await;
    assert_eq!(output_section(&out), "undefined", "another tool instance has its own store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_k4_maps_and_sets_are_returned_and_stored_as_data_and_a_function_is_refused() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    let code = "const counts = new Map([['a.ts', 3], ['b.ts', 1]]);\n\
                store('m', counts);\n\
                const self = new Map(); self.set('me', self);\n\
                return {counts, seen: new Set(['x', 'y', 'x']), pairs: new Map([[{id: 1}, 'one']]), self}";
    let out = run_with(&tool, &cx, code).await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(
        v,
        json!({"counts": {"a.ts": 3, "b.ts": 1}, "seen": ["x", "y"], "pairs": [[{"id": 1}, "one"]], "self": {"me": "[Circular]"}})
    );
    // Storing a function fails and leaves the key as it was.
    let code = "store('k', 1);\n\
                let refused = '';\n\
                try { store('k', () => 1) } catch (e) { refused = e.name + ': ' + e.message }\n\
                return {refused, k: load('k'), m: load('m')}";
    let out = run_with(&tool, &cx, code).await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(v["refused"], "TypeError: store(): a function cannot be stored; store plain data", "{v}");
    assert_eq!(v["k"], 1, "{v}");
    assert_eq!(v["m"], json!({"a.ts": 3, "b.ts": 1}), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_k9_a_value_nested_too_deep_is_a_clear_error_not_a_crash() {
    let deep = "let o = {}; let c = o; for (let i = 0; i < 10000; i++) { c.a = {}; c = c.a }\n";
    let started = Instant::now();
    let (out, _) = run(config(), &format!("{deep}return o")).await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("nested more than 500 levels deep"), "{}", out.text_content());
    let (out, _) = run(config(), &format!("{deep}try {{ store('deep', o) }} catch (e) {{ return e.name }}")).await;
    assert_eq!(output_section(&out), "RangeError", "{}", out.text_content());
    // A worker process, whose native stack such a value overflowed (SIGABRT), says the same.
    let (out, _) = run(worker_config(), &format!("{deep}return o")).await;
    assert!(out.text_content().contains("nested more than 500 levels deep"), "{}", out.text_content());
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    // Data a script really returns is not near the limit.
    let (out, _) =
        run(config(), "let o = {}; let c = o; for (let i = 0; i < 50; i++) { c.a = {}; c = c.a }\nreturn o").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k4_describe_tool_gives_the_signature_text() {
    let (out, _) = run(config(), "return describeTool('read')").await;
    let t = output_section(&out);
    assert!(t.contains("tools.read(args: {"), "{t}");
    assert!(t.contains("// The file to read."), "{t}");
    assert!(t.contains("  path: string,"), "{t}");
    // Optional, and plain: `input_schema` lists an optional field with its own type only.
    assert!(t.contains("  limit?: number,"), "{t}");
    assert!(t.contains("mode?: \"text\" | \"binary\""), "{t}");
    let (out, _) = run(config(), "return describeTool('github.list_issues')").await;
    assert!(output_section(&out).contains("tools.github.list_issues(args"), "{}", out.text_content());
    let (out, _) = run(config(), "return describeTool('nope')").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k4_search_all_tools_sleep_and_line_helpers() {
    let code = r#"
        const found = searchTools("ticket");
        const gh = searchTools("issue", {namespace: "github", limit: 1});
        const t0 = Date.now(); await sleep(50); const slept = Date.now() - t0;
        const text = await tools.read({path: "x.rs"});
        return {found: found.map(f => f.name), gh: gh.map(f => f.name), slept: slept >= 45,
                all: ALL_TOOLS.map(t => t.name).includes("linear__find_ticket"),
                lines: lines(text).length, todo: grep(text, "todo", {ignoreCase: true})}"#;
    let (out, _) = run(config(), code).await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(v["found"], json!(["linear__find_ticket"]));
    assert_eq!(v["gh"].as_array().unwrap().len(), 1);
    assert_eq!(v["slept"], true);
    assert_eq!(v["all"], true);
    assert_eq!(v["lines"], 3);
    assert_eq!(v["todo"], json!(["TODO: fix x.rs"]));
}

// ---- K5: hooks, approval, codemode not callable ----

#[derive(Default)]
struct RecordingHooks {
    seen: Mutex<Vec<String>>,
    block: Option<String>,
}

#[async_trait]
impl Hooks for RecordingHooks {
    async fn before_call(&self, call: &ToolCall) -> HookDecision {
        self.seen.lock().unwrap().push(format!("before {}", call.name));
        match &self.block {
            Some(b) if *b == call.name => HookDecision::Block("not in scripts today".into()),
            _ => HookDecision::Allow,
        }
    }
    async fn after_call(&self, call: &ToolCall, out: &ToolOutput) {
        self.seen.lock().unwrap().push(format!("after {} {}", call.name, out.status));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k5_hooks_see_every_nested_call_in_order() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let hooks = Arc::new(RecordingHooks::default());
    let mut cx = ToolContext::new(f.workspace.clone());
    cx.hooks = hooks.clone();
    let out =
        run_with(&tool, &cx, "await tools.noop({}); await tools.echo({value: 1}); await tools.github.list_issues({})")
            .await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(
        *hooks.seen.lock().unwrap(),
        vec![
            "before noop",
            "after noop success",
            "before echo",
            "after echo success",
            "before github__list_issues",
            "after github__list_issues success"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k5_a_tool_blocked_by_a_hook_is_blocked_inside_scripts() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let hooks = Arc::new(RecordingHooks { block: Some("noop".into()), ..Default::default() });
    let mut cx = ToolContext::new(f.workspace.clone());
    cx.hooks = hooks;
    let out =
        run_with(&tool, &cx, "try { await tools.noop({}) } catch (e) { return e.status + ': ' + e.output }").await;
    let o = output_section(&out);
    assert!(o.starts_with("denied: "), "{o}");
    assert!(o.contains("not in scripts today"), "{o}");
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k5_codemode_cannot_be_called_from_a_script() {
    let f = fixture();
    let mut registry = f.registry.clone();
    // Even a registry that contains codemode itself does not expose it.
    registry.register(CodeModeTool::new(config(), f.registry.clone()));
    let tool = CodeModeTool::new(config(), registry);
    let cx = ToolContext::new(f.workspace.clone());
    let out = run_with(&tool, &cx, "return await call('codemode', {code: 'return 1'})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
    assert!(out.text_content().contains("cannot be called from a script"), "{}", out.text_content());
    assert!(!tool.description().contains("tools.codemode"));
}

// ---- K6, K7: exposure and catalog ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k6_model_only_tools_are_not_callable_from_scripts() {
    let (out, _) = run(config(), "return await tools.subagent({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
    assert!(out.text_content().contains("model-only"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k6_deferred_tools_are_callable_and_found_by_search_but_not_listed() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let d = tool.description();
    assert!(!d.contains("linear"), "{d}");
    assert!(!d.contains("subagent"), "{d}");
    // codemode exposure: full signature; direct: short form.
    assert!(d.contains("- tools.github.list_issues({value?: unknown}): string — List the issues"), "{d}");
    assert!(d.contains("- tools.github.create_issue({value?})"), "{d}");
    assert!(d.contains("- tools.read({path, limit?, mode?})"), "{d}");
    assert!(d.contains("- tools[\"odd-name\"]({value?})"), "{d}");
    let cx = ToolContext::new(f.workspace.clone());
    let out = run_with(&tool, &cx, "const hit = searchTools('linear ticket')[0]; return hit.path + ' ' + await tools.linear.find_ticket({value: 'x'})").await;
    assert_eq!(output_section(&out), "tools.linear.find_ticket \"x\"", "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k7_catalog_budget_is_shared_round_robin_and_a_small_namespace_is_shown() {
    let mut registry = ToolRegistry::new();
    for i in 0..80 {
        registry.register(Noop::named(&format!("big__tool_{i:02}"), "One of many tools of a big server."));
    }
    registry.register(Noop::named("small__only", "The only tool of a small server."));
    registry.register(Noop::named("zz_builtin", "A built-in tool."));
    let cfg = CodeModeConfig::default().mcp_exposure(Exposure::Codemode).catalog_budget(1500);
    let tool = CodeModeTool::new(cfg, registry);
    let d = tool.description();
    let catalog = d.split_once("Tools scripts can call:\n").unwrap().1;
    assert!(catalog.len() <= 1500, "catalog is {} bytes", catalog.len());
    assert!(catalog.contains("tools.small.only("), "{catalog}");
    assert!(catalog.contains("tools.zz_builtin("), "{catalog}");
    assert!(catalog.contains("tools.big.tool_00("), "{catalog}");
    assert!(!catalog.contains("tools.big.tool_79("), "{catalog}");
    let shown = catalog.matches("- tools.").count();
    assert!(
        catalog.trim_end().ends_with(&format!("{} more tools — use searchTools() to find them.", 82 - shown)),
        "{catalog}"
    );
    // Left-out tools stay callable.
    let dir = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let out = run_with(&tool, &cx, "return await tools.big.tool_79({value: 79})").await;
    assert_eq!(output_section(&out), "79");
}

// ---- K8: limits ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_concurrency_cap_is_observed() {
    let cfg = config().max_concurrency(2);
    let (out, f) = run(cfg, "await Promise.all([1,2,3,4,5,6].map(() => tools.sleep_ms({ms: 80})))").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(f.probe.max.load(Ordering::SeqCst), 2);
    assert_eq!(f.probe.finished.load(Ordering::SeqCst), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_parallel_calls_are_faster_than_serial_ones() {
    let t = Instant::now();
    let (out, _) = run(config(), "await Promise.all([1,2,3,4].map(() => tools.sleep_ms({ms: 200})))").await;
    let parallel = t.elapsed();
    assert_eq!(out.status, ToolStatus::Success);
    let t = Instant::now();
    let (out, _) = run(config(), "for (let i = 0; i < 4; i++) await tools.sleep_ms({ms: 200})").await;
    let serial = t.elapsed();
    assert_eq!(out.status, ToolStatus::Success);
    assert!(serial >= Duration::from_millis(800), "{serial:?}");
    assert!(parallel < Duration::from_millis(600), "parallel took {parallel:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_tool_call_limit_stops_the_script() {
    let cfg = config().max_tool_calls(3);
    let (out, f) = run(cfg, "for (let i = 0; i < 10; i++) {\n  await tools.noop({});\n}\nreturn 'done'").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ToolCallLimitExceeded"), "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 3);
    assert_eq!(out.meta["codemode"]["error"]["line"], 2);
    // Catching the error does not let the script go on.
    let (out, f) = run(
        config().max_tool_calls(2),
        "for (let i = 0; i < 5; i++) { try { await tools.noop({}) } catch {} }\nreturn 'went on'",
    )
    .await;
    assert_eq!(error_kind(&out).as_deref(), Some("ToolCallLimitExceeded"), "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_busy_loop_times_out_before_any_await() {
    let t = Instant::now();
    let (out, _) = run(config().timeout(Duration::from_secs(1)), "while (true) {}").await;
    assert_eq!(error_kind(&out).as_deref(), Some("TimeoutExceeded"), "{}", out.text_content());
    assert_eq!(out.status, ToolStatus::TimedOut);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_busy_loop_times_out_after_an_await() {
    let t = Instant::now();
    let (out, _) =
        run(config().timeout(Duration::from_secs(1)), "await tools.noop({});\nlet i = 0; while (true) { i++ }").await;
    assert_eq!(error_kind(&out).as_deref(), Some("TimeoutExceeded"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_timeout_cancels_calls_in_flight() {
    let t = Instant::now();
    let (out, f) =
        run(config().timeout(Duration::from_secs(2)), "await tools.noop({});\nawait tools.sleep_ms({ms: 10000})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("TimeoutExceeded"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(out.meta["codemode"]["calls"][1]["name"], "sleep_ms", "{}", out.meta);
    assert_eq!(out.meta["codemode"]["calls"][1]["status"], "cancelled", "{}", out.meta);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(f.probe.finished.load(Ordering::SeqCst), 0);
    assert_eq!(f.probe.now.load(Ordering::SeqCst), 1, "the cancelled call was dropped mid-sleep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_parent_cancellation_stops_the_script_and_its_calls() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    let cancel = cx.cancel.clone();
    let running = f.probe.now.clone();
    tokio::spawn(async move {
        // Cancel once both calls are running.
        while running.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
    });
    let t = Instant::now();
    let out = tokio::time::timeout(
        LIMIT,
        tool.run_code("await Promise.all([tools.sleep_ms({ms: 5000}), tools.sleep_ms({ms: 5000})])", &cx),
    )
    .await
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(out.status, ToolStatus::Cancelled);
    assert_eq!(error_kind(&out).as_deref(), Some("Cancelled"));
    let calls = out.meta["codemode"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c["status"] == "cancelled"), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_memory_limit_stops_an_allocation_loop() {
    let cfg = config().memory_limit_mb(Some(48));
    let t = Instant::now();
    let (out, _) = run(cfg, "const keep = [];\nwhile (true) { keep.push('x'.repeat(1 << 20) + keep.length) }").await;
    assert_eq!(error_kind(&out).as_deref(), Some("MemoryLimitExceeded"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_long_output_is_cut_and_saved_in_full() {
    let cfg = config().max_output_bytes(2000);
    let (out, _) = run(cfg, "return 'a'.repeat(3000) + 'é'.repeat(3000) + 'END'").await;
    let text = out.text_content();
    assert!(text.len() <= 2300, "{} bytes", text.len());
    assert!(text.ends_with("END\n"), "the tail is kept");
    let path = out.full_output.clone().expect("full output path");
    assert!(text.contains(&path.display().to_string()));
    let full = std::fs::read_to_string(&path).unwrap();
    assert!(full.contains(&format!("{}{}END", "a".repeat(3000), "é".repeat(3000))));
    assert_eq!(out.meta["codemode"]["full_output"], json!(path));
}

// ---- K11: metadata and events ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k11_metadata_lists_calls_and_events_stream_the_call_log() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let sink = Arc::new(CollectingSink::default());
    let mut cx = ToolContext::new(f.workspace.clone());
    cx.call_id = "cm".into();
    cx.events = sink.clone();
    let out = run_with(&tool, &cx, "await tools.noop({}); await tools.echo({value: 5}); try { await tools.fail({}) } catch {} ; await tools.noop({})").await;
    assert!(out.text_content().contains("Tool calls: 4 — noop ×2, echo ×1, fail ×1"), "{}", out.text_content());
    let calls = out.meta["codemode"]["calls"].as_array().unwrap();
    assert_eq!(calls[1]["name"], "echo");
    assert_eq!(calls[1]["arguments"], json!({"value": 5}));
    assert_eq!(calls[1]["status"], "success");
    assert_eq!(calls[1]["id"], "cm.2");
    assert!(calls[1]["duration_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(calls[2]["status"], "error");
    assert!(calls[2]["error"].as_str().unwrap().contains("boom"));
    assert!(out.meta["codemode"]["wall_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(out.meta["codemode"]["error_kind"], Value::Null);
    let progress: Vec<String> = sink
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::Progress { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(progress.len(), 8, "{progress:?}");
    assert!(progress[0].starts_with("▸ noop {}"), "{progress:?}");
    assert!(progress[1].starts_with("✓ noop ("), "{progress:?}");
    assert!(progress[5].starts_with("✗ fail (error"), "{progress:?}");
}

/// A script that awaited every call is never told it forgot an `await`: the count of calls in
/// flight went down only after the script had the result, so a script returning right after
/// its last `await` sometimes saw "0 call(s) were still running … (a missing `await`?)" (K11).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k11_a_script_that_awaited_every_call_gets_no_missing_await_note() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    for round in 0..150 {
        let code = if round % 2 == 0 {
            "const rs = await Promise.all([1,2,3,4,5,6,7,8].map(i => tools.read({path: `p${i}.txt`}))); return rs.length"
        } else {
            "return await tools.read({path: 'p.txt'})"
        };
        let out = run_with(&tool, &cx, code).await;
        assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
        assert!(!out.text_content().contains("missing `await`"), "round {round}: {}", out.text_content());
        assert_eq!(out.meta["codemode"]["notes"].as_array().map_or(0, Vec::len), 0, "round {round}: {}", out.meta);
    }
}

/// Returns an image only.
struct Camera {
    spec: ToolSpec,
}

#[async_trait]
impl TypedTool for Camera {
    type Args = AnyArgs;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, _args: AnyArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut out = ToolOutput::text("");
        out.content = vec![kodik_core::Content::image(&[1, 2, 3], "image/png")];
        Ok(out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_an_image_result_becomes_a_placeholder() {
    let f = fixture();
    let mut registry = f.registry.clone();
    registry.register(Camera {
        spec: ToolSpec::new("camera", "Takes a picture.", kodik_schema::input_schema::<AnyArgs>(), Effect::ReadOnly),
    });
    let tool = CodeModeTool::new(config(), registry);
    let cx = ToolContext::new(f.workspace.clone());
    let out = run_with(&tool, &cx, "return await tools.camera({})").await;
    let o = output_section(&out);
    assert!(o.contains("image/png") && o.contains("call the tool directly"), "{o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k5_approval_is_asked_for_every_nested_call() {
    let f = fixture();
    let tool = CodeModeTool::new(config(), f.registry.clone());
    let mut cx = ToolContext::new(f.workspace.clone());
    cx.approver = Arc::new(kodik_core::ApprovalPolicy::ask(None).tool("echo", true));
    let code =
        "const a = await tools.echo({value: 1});\ntry { await tools.noop({}) } catch (e) { return a + ' ' + e.status }";
    let out = run_with(&tool, &cx, code).await;
    assert_eq!(output_section(&out), "1 denied", "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 0);
}

// ---- scripts in a worker process (K8, K10 after an `await`) ----

/// Worker tests run one at a time, so "no worker of ours is left" is about the test at hand.
static WORKER_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn worker_config() -> CodeModeConfig {
    config().worker(env!("CARGO_BIN_EXE_kodik-codemode-worker"), Vec::<String>::new())
}

/// Live child processes of this test process that are script workers.
fn live_workers() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid …"; comm is cut to 15 bytes by the kernel.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let comm = &stat[open + 1..close];
        let mut rest = stat[close + 1..].split_whitespace();
        let (state, ppid) = (rest.next(), rest.next().and_then(|p| p.parse::<u32>().ok()));
        if ppid == Some(me) && comm.starts_with("kodik-codemode") && state != Some("Z") {
            found.push(pid);
        }
    }
    found
}

async fn assert_no_worker_left() {
    let t = Instant::now();
    while !live_workers().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(3), "a worker is still running: {:?}", live_workers());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k5_k4_worker_scripts_call_tools_print_and_store_through_the_host() {
    let _one = WORKER_TESTS.lock().await;
    let f = fixture();
    let tool = CodeModeTool::new(worker_config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    let code = "text('from text');\nconsole.warn('from console');\nstore('k', {n: 1});\n\
                const r = await Promise.all([tools.noop({}), tools.echo({value: 5})]);\nreturn r.join('+')";
    let out = run_with(&tool, &cx, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let shown = output_section(&out);
    assert_eq!(shown, "from text\nok+5");
    assert!(out.text_content().contains("Logs:\n[warn] from console\n"), "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 1, "the call ran on the host");
    assert_eq!(out.meta["codemode"]["calls"].as_array().unwrap().len(), 2, "{}", out.meta);
    // The store lives in the host: the next script, in a new process, sees it.
    let out = run_with(&tool, &cx, "return load('k')").await;
    assert_eq!(output_section(&out), "{\n  \"n\": 1\n}", "{}", out.text_content());
    assert_no_worker_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_worker_refuses_a_missing_argument_before_the_tool_runs() {
    let _one = WORKER_TESTS.lock().await;
    let (out, f) = run(worker_config(), "await tools.noop({});\nawait tools.read({limit: 2})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("InvalidToolInput"), "{}", out.text_content());
    assert!(out.text_content().contains("path"), "{}", out.text_content());
    assert_eq!(f.read_runs.load(Ordering::SeqCst), 0);
    let (out, _) = run(worker_config(), "await tools.nope({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"), "{}", out.text_content());
    assert_no_worker_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_worker_allocation_loop_after_an_await_is_stopped_at_the_memory_limit() {
    let _one = WORKER_TESTS.lock().await;
    let t = Instant::now();
    let code = "await tools.noop({});\nconst keep = [];\nwhile (true) { keep.push('x'.repeat(1 << 20) + keep.length) }";
    let (out, _) = run(worker_config().memory_limit_mb(Some(48)), code).await;
    assert_eq!(error_kind(&out).as_deref(), Some("MemoryLimitExceeded"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    // On a thread this loop would go on growing after the answer; the worker is gone.
    assert_no_worker_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_k10_worker_busy_loop_after_an_await_ends_at_the_deadline_or_on_cancel() {
    let _one = WORKER_TESTS.lock().await;
    let t = Instant::now();
    let cfg = worker_config().timeout(Duration::from_secs(1));
    let (out, _) = run(cfg, "await tools.noop({});\nlet i = 0; while (true) { i++ }").await;
    assert_eq!(error_kind(&out).as_deref(), Some("TimeoutExceeded"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_no_worker_left().await;

    let f = fixture();
    let tool = CodeModeTool::new(worker_config(), f.registry.clone());
    let cx = ToolContext::new(f.workspace.clone());
    let cancel = cx.cancel.clone();
    let seen = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let seen = live_workers();
        cancel.cancel();
        seen
    });
    let t = Instant::now();
    let out = run_with(&tool, &cx, "await tools.noop({});\nwhile (true) {}").await;
    assert_eq!(seen.await.unwrap().len(), 1, "the script ran in one worker process");
    assert_eq!(error_kind(&out).as_deref(), Some("Cancelled"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_no_worker_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_a_worker_that_cannot_start_is_a_clear_error() {
    let _one = WORKER_TESTS.lock().await;
    let cfg = config().worker("/nonexistent/kodik-codemode-worker", ["--serve"]);
    let (out, f) = run(cfg, "return await tools.noop({})").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("could not start the script worker"), "{}", out.text_content());
    assert_eq!(f.noop_runs.load(Ordering::SeqCst), 0);
    // A worker that dies mid-run is reported, not waited for.
    let t = Instant::now();
    let (out, _) = run(config().worker("sh", ["-c", "read start; exit 3"]), "return 1").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("worker process exited"), "{}", out.text_content());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_script_cut_off_at_its_end_is_reported_at_the_models_last_line_with_what_was_expected() {
    let cases: [(&str, u64, u64, &str); 6] = [
        ("return (((", 1, 11, "unexpected end of script: expected `)` to close the `(` at line 1, column 10"),
        ("```js\nreturn (((\n```", 2, 11, "expected `)` to close the `(` at line 2, column 10"),
        ("const a = [1,2", 1, 15, "unexpected end of script: expected `]` to close the `[` at line 1, column 11"),
        ("const x = 1;\nif (x) {\n  return x +", 3, 13, "unexpected end of script: expected `}` to close the `{`"),
        ("const a = 1;\nreturn a +\n\n", 2, 11, "unexpected end of script: expected primary expression"),
        ("const s = \"(\"; // (\nreturn s +", 2, 11, "unexpected end of script: expected primary expression"),
    ];
    for (code, line, column, message) in cases {
        let (out, _) = run(config(), code).await;
        let text = out.text_content();
        assert_eq!(error_kind(&out).as_deref(), Some("ParseError"), "{code}: {text}");
        assert_eq!(out.meta["codemode"]["error"]["line"], line, "{code}: {text}");
        assert_eq!(out.meta["codemode"]["error"]["column"], column, "{code}: {text}");
        assert!(text.contains(message), "{code}: {text}");
        assert!(!text.contains("'}'"), "the wrapper's brace must not show: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_an_unknown_name_is_reported_on_its_own_line() {
    let (out, _) = run(config(), "// c\n// c\n// c\n// c\nreturn foo + 1;\n").await;
    assert_eq!(out.meta["codemode"]["error"]["line"], 5, "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["error"]["column"], 8, "{}", out.text_content());
    let (out, _) = run(config(), "function f(){\n  return zzz;\n}\nawait tools.noop({});\nf();\n").await;
    assert_eq!(out.meta["codemode"]["error"]["line"], 2, "{}", out.text_content());
    assert!(out.text_content().contains("zzz is not defined"), "{}", out.text_content());
    // An object key of the same name is no use of it.
    let (out, _) = run(config(), "const o = {foo: 1};\nconsole.log(o.foo);\nreturn foo;\n").await;
    assert_eq!(out.meta["codemode"]["error"]["line"], 3, "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["error"]["column"], 8, "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k2_k9_a_cyclic_value_is_shown_with_circular_marks_and_a_failing_to_json_is_an_error() {
    let (out, _) =
        run(config(), "const a = {name: 'root', children: []}; a.children.push({parent: a, n: 10n}); return a").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(v, json!({"name": "root", "children": [{"parent": "[Circular]", "n": "10"}]}));
    // The same object twice side by side is not a cycle.
    let (out, _) = run(config(), "const x = {k: 1}; return {a: x, b: x}").await;
    let v: Value = serde_json::from_str(&output_section(&out)).unwrap();
    assert_eq!(v, json!({"a": {"k": 1}, "b": {"k": 1}}));
    let (out, _) = run(config(), "return {toJSON() { throw new Error('tj') }}").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ExecutionFailure"), "{}", out.text_content());
    assert!(out.text_content().contains("could not be converted to JSON (tj)"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k9_k4_import_require_and_unknown_names_say_what_to_do_instead() {
    let (out, _) = run(config(), "import fs from \"fs\";\nreturn 1").await;
    assert_eq!(error_kind(&out).as_deref(), Some("ParseError"), "{}", out.text_content());
    assert!(out.text_content().contains("modules are not available in code mode"), "{}", out.text_content());
    assert!(out.text_content().contains("tools.read_file"), "{}", out.text_content());
    let (out, _) = run(config(), "const x = 1;\nconst fs = require(\"fs\"); return 1").await;
    assert!(out.text_content().contains("modules are not available in code mode"), "{}", out.text_content());
    assert_eq!(out.meta["codemode"]["error"]["line"], 2, "{}", out.text_content());
    let (out, _) = run(config(), "return describeTool('reda')").await;
    assert_eq!(error_kind(&out).as_deref(), Some("UnknownTool"));
    assert!(out.text_content().contains("did you mean: read"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k3_atomics_wait_cannot_block_the_script_thread() {
    let code = "const ia = new Int32Array(new SharedArrayBuffer(16));\n\
                try { Atomics.wait(ia, 0, 0); return 'blocked and woke' } catch (e) { return 'refused: ' + e.name }";
    let (out, _) = run(config(), code).await;
    assert_eq!(output_section(&out), "refused: TypeError", "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_an_unawaited_call_past_the_time_limit_is_named_as_cancelled() {
    let started = Instant::now();
    let (out, f) = run(config().timeout(Duration::from_secs(1)), "tools.sleep_ms({ms: 20000}); return 'started'").await;
    assert!(started.elapsed() < Duration::from_secs(10), "the wait is bounded by the timeout");
    let text = out.text_content();
    assert!(text.contains("had not finished at the time limit and were cancelled: sleep_ms"), "{text}");
    assert_eq!(f.probe.finished.load(Ordering::SeqCst), 0);
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "cancelled", "it stopped and says so");
}
