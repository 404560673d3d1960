//! The harness side of the loop guard (G15): the same call that keeps failing is blocked.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kodik_core::{HookDecision, Hooks, NoHooks, ToolCall, ToolOutput, ToolStatus};
use serde_json::Value;

/// Blocks the third identical call (same tool, same arguments) when the earlier identical
/// attempts failed, were denied, were cancelled or changed nothing. A call with corrected
/// arguments goes through; a success resets the count. Wraps the host's own hooks.
pub struct RepeatGuard {
    inner: Arc<dyn Hooks>,
    /// Fruitless attempts per call fingerprint ([`fingerprint`]).
    fruitless: Mutex<HashMap<u64, u32>>,
    /// Fingerprints taken in `before_call` of calls not yet settled, by call id and tool: the
    /// after-hook of a call that ran sees no arguments (they moved into the tool, #18.2).
    pending: Mutex<HashMap<(String, String), Vec<u64>>>,
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
        Self { inner, fruitless: Mutex::new(HashMap::new()), pending: Mutex::new(HashMap::new()), limit: 2 }
    }

    fn key(call: &ToolCall) -> u64 {
        fingerprint(call)
    }

    /// The fingerprint `before_call` took for this call, or, for a call that never passed it
    /// (or still carries its arguments), its own.
    fn settled_key(&self, call: &ToolCall) -> u64 {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let slot = (call.id.clone(), call.name.clone());
        let taken = pending.get_mut(&slot).and_then(|keys| (!keys.is_empty()).then(|| keys.remove(0)));
        if pending.get(&slot).is_some_and(Vec::is_empty) {
            pending.remove(&slot);
        }
        taken.unwrap_or_else(|| Self::key(call))
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

/// A hash of the tool name and the arguments with object keys taken in sorted order, so
/// argument order does not make two calls different. Hashing in place (no canonical copy of
/// the arguments) keeps a whole-file edit of megabytes from being copied twice per call.
fn fingerprint(call: &ToolCall) -> u64 {
    fn feed(v: &Value, h: &mut impl Hasher) {
        match v {
            Value::Null => h.write_u8(0),
            Value::Bool(b) => {
                h.write_u8(1);
                b.hash(h);
            }
            Value::Number(n) => {
                h.write_u8(2);
                // The textual form: 1 and 1.0 stay different, as they were as JSON text.
                n.to_string().hash(h);
            }
            Value::String(s) => {
                h.write_u8(3);
                s.hash(h);
            }
            Value::Array(a) => {
                h.write_u8(4);
                h.write_usize(a.len());
                for item in a {
                    feed(item, h);
                }
            }
            Value::Object(m) => {
                h.write_u8(5);
                h.write_usize(m.len());
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for k in keys {
                    k.hash(h);
                    feed(&m[k], h);
                }
            }
        }
    }
    // SipHash with fixed keys: the same call always gives the same fingerprint.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    call.name.hash(&mut h);
    feed(&call.args, &mut h);
    h.finish()
}

#[async_trait]
impl Hooks for RepeatGuard {
    async fn before_call(&self, call: &ToolCall) -> HookDecision {
        let key = Self::key(call);
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            // Calls dropped before they settle never reach `after_call`; do not let their
            // fingerprints pile up over a long session.
            if pending.len() >= 4096 {
                pending.clear();
            }
            pending.entry((call.id.clone(), call.name.clone())).or_default().push(key);
        }
        let count = self.fruitless.lock().unwrap_or_else(|p| p.into_inner()).get(&key).copied();
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
        let key = self.settled_key(call);
        let blocked_here = out.status == ToolStatus::Denied && out.text_content().contains("this exact");
        if !blocked_here {
            let mut map = self.fruitless.lock().unwrap_or_else(|p| p.into_inner());
            if fruitless(out) {
                *map.entry(key).or_insert(0) += 1;
            } else {
                map.remove(&key);
            }
        }
        self.inner.after_call(call, out).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn g15_key_order_does_not_make_two_calls_different_but_any_value_does() {
        let call = |args| ToolCall::new("1", "grep", args);
        let a = fingerprint(&call(json!({"pattern": "x", "path": "src", "opts": {"a": 1, "b": [1, 2]}})));
        let b = fingerprint(&call(json!({"opts": {"b": [1, 2], "a": 1}, "path": "src", "pattern": "x"})));
        assert_eq!(a, b);
        for other in [
            json!({"pattern": "x", "path": "src", "opts": {"a": 1, "b": [2, 1]}}),
            json!({"pattern": "x", "path": "src", "opts": {"a": 1.0, "b": [1, 2]}}),
            json!({"pattern": "x", "path": "src ", "opts": {"a": 1, "b": [1, 2]}}),
            json!({"pattern": "x", "path": "src", "opts": {"a": "1", "b": [1, 2]}}),
        ] {
            assert_ne!(a, fingerprint(&call(other.clone())), "{other}");
        }
        assert_ne!(a, fingerprint(&ToolCall::new("1", "glob", json!({"pattern": "x", "path": "src"}))));
    }
}
