//! The harness side of the loop guard (G15): the same call that keeps failing is blocked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kodik_core::{HookDecision, Hooks, NoHooks, ToolCall, ToolOutput, ToolStatus};
use serde_json::Value;

/// Blocks the third identical call (same tool, same arguments) when the earlier identical
/// attempts failed, were denied, were cancelled or changed nothing. A call with corrected
/// arguments goes through; a success resets the count. Wraps the host's own hooks.
pub struct RepeatGuard {
    inner: Arc<dyn Hooks>,
    fruitless: Mutex<HashMap<String, u32>>,
    limit: u32,
}

impl std::fmt::Debug for RepeatGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepeatGuard").field("limit", &self.limit).finish_non_exhaustive()
    }
}

impl Default for RepeatGuard {
    fn default() -> Self {
        Self::new(Arc::new(NoHooks))
    }
}

impl RepeatGuard {
    /// A guard in front of `inner`; the third fruitless identical call is blocked.
    pub fn new(inner: Arc<dyn Hooks>) -> Self {
        Self { inner, fruitless: Mutex::new(HashMap::new()), limit: 2 }
    }

    fn key(call: &ToolCall) -> String {
        format!("{}\u{0}{}", call.name, canonical(&call.args))
    }
}

/// Whether a result changed nothing: an error, a denial, a cancellation, or a result whose
/// metadata says so.
fn fruitless(out: &ToolOutput) -> bool {
    match out.status {
        ToolStatus::Success => out.meta.get("changed").and_then(Value::as_bool) == Some(false),
        ToolStatus::Stopped => false,
        _ => true,
    }
}

/// JSON with object keys sorted, so argument order does not make two calls different.
fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

#[async_trait]
impl Hooks for RepeatGuard {
    async fn before_call(&self, call: &ToolCall) -> HookDecision {
        let count = self.fruitless.lock().unwrap_or_else(|p| p.into_inner()).get(&Self::key(call)).copied();
        if count.is_some_and(|c| c >= self.limit) {
            return HookDecision::Block(format!(
                "this exact `{}` call already failed or changed nothing {} times; change the arguments (re-read the \
                 file or fix the input) instead of repeating it",
                call.name,
                count.unwrap_or_default()
            ));
        }
        self.inner.before_call(call).await
    }

    async fn after_call(&self, call: &ToolCall, out: &ToolOutput) {
        let blocked_here = out.status == ToolStatus::Denied && out.text_content().contains("this exact");
        if !blocked_here {
            let mut map = self.fruitless.lock().unwrap_or_else(|p| p.into_inner());
            let key = Self::key(call);
            if fruitless(out) {
                *map.entry(key).or_insert(0) += 1;
            } else {
                map.remove(&key);
            }
        }
        self.inner.after_call(call, out).await;
    }
}
