//! [`ToolRegistry`] holds the tools of a session; [`dispatch`] runs one call through the
//! fixed sequence every caller shares: lookup → argument check → hooks → approval → run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument as _;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::hooks::{Approval, ApprovalRequest, HookDecision};
use crate::output::{ToolCall, ToolOutput};
use crate::tool::{Tool, ToolSpec};

/// Tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, replacing one of the same name.
    pub fn register(&mut self, tool: impl Tool + 'static) -> &mut Self {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool, replacing one of the same name.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.insert(tool.spec().name.clone(), tool);
        self
    }

    /// Removes a tool by name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The tool called `name`, or an error listing the closest names.
    pub fn lookup(&self, name: &str) -> Result<&Arc<dyn Tool>, ToolError> {
        self.get(name).ok_or_else(|| ToolError::UnknownTool { name: name.to_string(), suggestions: self.suggest(name) })
    }

    /// Names sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Specs sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|t| t.spec())
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Up to three existing names closest to `name`.
    pub fn suggest(&self, name: &str) -> Vec<String> {
        closest(name, self.names(), 3)
    }
}

/// Up to `n` candidates closest to `name` (edit distance, with substring matches first).
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>, n: usize) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(f64, &str)> = candidates
        .map(|c| {
            let cl = c.to_lowercase();
            let mut score = strsim::jaro_winkler(&lower, &cl);
            if !lower.is_empty() && (cl.contains(&lower) || lower.contains(&cl)) {
                score += 0.5;
            }
            (score, c)
        })
        .filter(|(s, _)| *s >= 0.7)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(n).map(|(_, c)| c.to_string()).collect()
}

/// Polls a tool's future in place, turning a panic inside it into `Err` with the panic's
/// message. In place rather than on a spawned task: a spawn costs a task allocation and, on a
/// multi-threaded runtime, a hop to another worker for every call (#17.7).
struct CatchUnwind<'a> {
    inner: std::pin::Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>,
}

impl Future for CatchUnwind<'_> {
    type Output = Result<ToolOutput, String>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let inner = &mut self.inner;
        // A tool that panicked is never polled again (the future is dropped with this call), so
        // no broken state of it can be observed afterwards.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(payload) => std::task::Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// A call [`dispatch`] takes: a [`ToolCall`] by value, whose arguments then move into the tool
/// uncopied, or a `&ToolCall`, whose arguments are copied once. Hand over the call when it is
/// not needed afterwards: a whole-file edit carries its file's content twice (issue 18.2).
pub trait IntoCall {
    /// The owned call.
    fn into_call(self) -> ToolCall;
}

impl IntoCall for ToolCall {
    fn into_call(self) -> ToolCall {
        self
    }
}

impl IntoCall for &ToolCall {
    fn into_call(self) -> ToolCall {
        self.clone()
    }
}

/// Runs one call: unknown name → error with suggestions; bad arguments → `InvalidInput`
/// before any approval (S8); a blocking hook or a refused approval → `denied` (G3); then the
/// tool, racing the context's cancellation (→ `cancelled`). A panic in the tool becomes an
/// `error` result for this call only. The whole call runs in a `tool.call` span.
///
/// This is [`authorize`] followed by [`execute`]; a scheduler calls the two separately so a
/// call waiting for approval holds no concurrency slot. Pass the call by value when it is not
/// needed afterwards ([`IntoCall`]).
pub async fn dispatch(registry: &ToolRegistry, call: impl IntoCall, cx: &ToolContext) -> ToolOutput {
    let call = call.into_call();
    let span = call_span(&call);
    let started = Instant::now();
    let out = async {
        match authorize(registry, &call, cx).await {
            Ok(tool) => execute(tool, call, cx).await,
            Err(out) => out,
        }
    }
    .instrument(span.clone())
    .await;
    record_span(&span, &out, started);
    out
}

/// The `tool.call` span of a call; `status` and `duration_ms` are recorded when it settles.
pub fn call_span(call: &ToolCall) -> tracing::Span {
    tracing::info_span!(
        "tool.call",
        name = %call.name,
        call_id = %call.id,
        status = tracing::field::Empty,
        duration_ms = tracing::field::Empty,
    )
}

/// Records a settled call's status and duration on its span.
pub fn record_span(span: &tracing::Span, out: &ToolOutput, started: Instant) {
    span.record("status", out.status.as_str());
    span.record("duration_ms", started.elapsed().as_millis() as u64);
}

/// The first phase of [`dispatch`]: lookup, argument check, before-hooks and approval.
/// `Ok` holds the tool to run; `Err` holds the call's final result (error or `denied`), for
/// which the after-hooks have already run.
pub async fn authorize(
    registry: &ToolRegistry,
    call: &ToolCall,
    cx: &ToolContext,
) -> Result<Arc<dyn Tool>, ToolOutput> {
    let tool = match registry.lookup(&call.name) {
        Ok(t) => Arc::clone(t),
        Err(e) => return Err(e.into_output()),
    };
    if let Err(e) = tool.validate(&call.args) {
        return Err(e.into_output());
    }
    if let HookDecision::Block(reason) = cx.hooks.before_call(call).await {
        let out = ToolError::Denied(format!("blocked by a hook: {reason}")).into_output();
        cx.hooks.after_call(call, &out).await;
        return Err(out);
    }
    let effect = tool.spec().effect;
    if cx.approver.approves_without_asking(&call.name, effect) {
        if cx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled.into_output());
        }
        return Ok(tool);
    }
    let request = ApprovalRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        effect,
        args: call.args.clone(),
        server: tool.server().map(str::to_owned),
    };
    let approval = tokio::select! {
        a = cx.approver.approve(&request) => a,
        () = cx.cancel.cancelled() => return Err(ToolError::Cancelled.into_output()),
    };
    if let Approval::Denied(reason) = approval {
        let out = ToolError::Denied(reason).into_output();
        cx.hooks.after_call(call, &out).await;
        return Err(out);
    }
    Ok(tool)
}

/// The second phase of [`dispatch`]: runs an authorized tool, racing the context's
/// cancellation, then runs the after-hooks. A panic in the tool becomes an `error` result for
/// this call only.
///
/// The arguments move into the tool rather than being copied, so the after-hooks see the call
/// with `args` set to `null` (see [`Hooks::after_call`](crate::Hooks::after_call)).
pub async fn execute(tool: Arc<dyn Tool>, call: ToolCall, cx: &ToolContext) -> ToolOutput {
    let mut call_cx = cx.clone();
    call_cx.call_id = call.id.clone();
    let ToolCall { id, name, args } = call;
    let running = CatchUnwind { inner: tool.call(args, &call_cx) };
    let out = tokio::select! {
        done = running => match done {
            Ok(out) => out,
            Err(msg) => {
                ToolOutput::error(format!("the tool failed internally (panic: {msg}); this is a bug in the tool"))
                    .with_meta(serde_json::json!({"error_kind": "panic"}))
            }
        },
        () = call_cx.cancel.cancelled() => ToolError::Cancelled.into_output(),
    };
    cx.hooks.after_call(&ToolCall { id, name, args: serde_json::Value::Null }, &out).await;
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use serde_json::{Value, json};

    use super::*;
    use crate::hooks::{HookDecision, Hooks};
    use crate::tool::Effect;
    use crate::workspace::Workspace;

    /// Answers with the address of the `content` string it was handed.
    struct Where(ToolSpec);

    #[async_trait]
    impl Tool for Where {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
            let at = args["content"].as_str().map_or(0, |s| s.as_ptr() as usize);
            ToolOutput::text(at.to_string())
        }
    }

    /// What the after-hook saw of each call: its id and its arguments.
    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, Value)>>);

    #[async_trait]
    impl Hooks for Seen {
        async fn before_call(&self, call: &ToolCall) -> HookDecision {
            if call.args["block"] == true { HookDecision::Block("blocked".into()) } else { HookDecision::Allow }
        }
        async fn after_call(&self, call: &ToolCall, _out: &ToolOutput) {
            self.0.lock().unwrap().push((call.id.clone(), call.args.clone()));
        }
    }

    #[tokio::test]
    async fn g3_a_handed_over_call_moves_its_arguments_into_the_tool_and_after_hooks_still_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(Where(ToolSpec::new("where", "Where.", json!({"type": "object"}), Effect::ReadOnly)));
        let mut cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let seen = Arc::new(Seen::default());
        cx.hooks = seen.clone();
        // A whole file's worth of content: handed over, the tool gets this very string.
        let moved = ToolCall::new("moved", "where", json!({"content": "x".repeat(1 << 20)}));
        let moved_at = moved.args["content"].as_str().unwrap().as_ptr() as usize;
        let out = dispatch(&registry, moved, &cx).await;
        assert_eq!(out.status, crate::output::ToolStatus::Success);
        assert_eq!(out.text_content(), moved_at.to_string());
        // Borrowed, the call is copied once and stays the caller's.
        let call = ToolCall::new("kept", "where", json!({"content": "y".repeat(1 << 20)}));
        let kept_at = call.args["content"].as_str().unwrap().as_ptr() as usize;
        let borrowed = dispatch(&registry, &call, &cx).await;
        assert_eq!(borrowed.status, crate::output::ToolStatus::Success);
        assert_ne!(borrowed.text_content(), kept_at.to_string());
        assert_eq!(call.args["content"].as_str().map(str::len), Some(1 << 20));
        // The after-hooks ran for every call: a call that ran shows no arguments (they went
        // into the tool); one refused before it ran still shows them.
        let blocked = dispatch(&registry, ToolCall::new("refused", "where", json!({"block": true})), &cx).await;
        assert_eq!(blocked.status, crate::output::ToolStatus::Denied);
        let seen = seen.0.lock().unwrap();
        let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["moved", "kept", "refused"]);
        assert!(seen[..2].iter().all(|(_, args)| args.is_null()));
        assert_eq!(seen[2].1, json!({"block": true}));
    }
}
