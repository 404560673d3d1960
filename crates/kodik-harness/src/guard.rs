//! The harness side of the loop guard (G15): the same call that keeps failing is blocked.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use kodik_core::{
    Effect, HookDecision, Hooks, NoHooks, Resource, ToolCall, ToolOutput, ToolRegistry, ToolStatus, Workspace,
};
use serde_json::Value;

/// Blocks the third identical call (same tool, same arguments, same world) when the earlier
/// identical attempts failed, were denied, were cancelled or changed nothing. A call with
/// corrected arguments goes through; a success resets the count. Wraps the host's own hooks.
///
/// The guard stops loops in a world that does not change, not a call whose outcome may have
/// changed: the count starts over once a call that may change the workspace succeeded (an
/// edit, a command, a browser action, a sub-agent: any tool that is not read-only or network
/// only, [`learn_effects`](Self::learn_effects)) — except for edits whose files the guard
/// watches, which only their files decide — and a call on files (the ones its tool says it
/// changes or reads, [`learn_tools`](Self::learn_tools), else its `path`) is a different call
/// once one of them changed on disk, whoever changed it ([`watching`](Self::watching)). So a test command runs again after the fix, and an edit
/// that failed goes through once the text it looks for is in the file.
pub struct RepeatGuard {
    inner: Arc<dyn Hooks>,
    /// Fruitless attempts per call fingerprint ([`fingerprint`]), with the [`epoch`] they were
    /// counted in.
    ///
    /// [`epoch`]: Self::epoch
    fruitless: Mutex<HashMap<u64, (u32, u64)>>,
    /// How many calls that may have changed the workspace succeeded so far.
    epoch: AtomicU64,
    /// What each tool may affect, by name; a tool not listed counts as one that may change
    /// the workspace.
    effects: RwLock<HashMap<String, Effect>>,
    /// Where `path` arguments are resolved, to fingerprint the file's state.
    workspace: Option<Workspace>,
    /// The tools, to ask which files a call changes or reads (an `apply_patch` names its files
    /// in the patch, `edit_notebook` has no `path`).
    tools: RwLock<Option<Arc<ToolRegistry>>>,
    /// Fingerprints taken in `before_call` of calls not yet settled, by call id and tool: the
    /// after-hook of a call that ran sees no arguments (they moved into the tool, #18.2).
    /// With each, whether only its files decide its outcome ([`decided_by_files`]).
    ///
    /// [`decided_by_files`]: Self::decided_by_files
    pending: Mutex<HashMap<(String, String), Vec<Taken>>>,
    limit: u32,
}

/// A call's fingerprint as `before_call` took it, and whether only its files decide it.
type Taken = (u64, bool);

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
        Self {
            inner,
            fruitless: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            effects: RwLock::new(HashMap::new()),
            workspace: None,
            tools: RwLock::new(None),
            pending: Mutex::new(HashMap::new()),
            limit: 2,
        }
    }

    /// Resolves a call's `path` argument in `workspace` and counts the file's state (size,
    /// modification time, inode) as part of the call: after the file changed on disk — by a
    /// command, another program, the user — the same arguments are a new call.
    #[must_use]
    pub fn watching(mut self, workspace: Workspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// Tells the guard what each tool may affect (its [`Effect`]). A success of a tool that is
    /// not [`Effect::ReadOnly`] or [`Effect::Network`] — or of one never named here — may have
    /// changed the workspace, so every count starts over. May be called again as tools join.
    pub fn learn_effects(&self, effects: impl IntoIterator<Item = (String, Effect)>) {
        self.effects.write().unwrap_or_else(|p| p.into_inner()).extend(effects);
    }

    /// [`learn_effects`](Self::learn_effects) for every tool of `registry`, and the files each
    /// call names are the ones its tool declares ([`Tool::resources`], [`Tool::reads`]).
    ///
    /// [`Tool::resources`]: kodik_core::Tool::resources
    /// [`Tool::reads`]: kodik_core::Tool::reads
    pub fn learn_tools(&self, registry: Arc<ToolRegistry>) {
        self.learn_effects(registry.specs().map(|s| (s.name.clone(), s.effect)));
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = Some(registry);
    }

    fn key(&self, call: &ToolCall) -> u64 {
        let mut h = fingerprint(call);
        if let Some(state) = self.path_state(call) {
            h ^= state.rotate_left(17);
        }
        h
    }

    /// The state of the files a call names, when it names any.
    fn path_state(&self, call: &ToolCall) -> Option<u64> {
        use std::os::unix::fs::MetadataExt as _;
        let ws = self.workspace.as_ref()?;
        let files = self.named_files(call, ws);
        if files.is_empty() {
            return None;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for file in files {
            match std::fs::metadata(&file) {
                Ok(m) if m.is_file() => (m.len(), m.mtime(), m.mtime_nsec(), m.ino()).hash(&mut h),
                // A folder's own time changes as entries come and go; a missing file is one state.
                Ok(m) => (m.mtime(), m.mtime_nsec(), m.ino()).hash(&mut h),
                Err(_) => h.write_u8(0),
            }
        }
        Some(h.finish())
    }

    /// The files `call` changes or reads, as its tool declares them; else its `path` argument.
    fn named_files(&self, call: &ToolCall, ws: &Workspace) -> Vec<std::path::PathBuf> {
        let tools = self.tools.read().unwrap_or_else(|p| p.into_inner());
        if let Some(tool) = tools.as_ref().and_then(|r| r.get(&call.name)) {
            let declared = tool.resources(&call.args, ws).into_iter().chain(tool.reads(&call.args, ws));
            let files: Vec<_> = declared
                .filter_map(|r| match r {
                    Resource::File(p) => Some(p),
                    _ => None,
                })
                .collect();
            if !files.is_empty() {
                return files;
            }
        }
        call.args.get("path").and_then(Value::as_str).and_then(|p| ws.resolve(p).ok()).into_iter().collect()
    }

    /// Whether identical fruitless calls of `tool` are blocked: not for commands, web requests
    /// and browser actions, whose outcome depends on what kodik cannot see change (a server
    /// still starting, the user's editor, time): their third try is no loop (G15 blocks
    /// previews that failed or changed nothing).
    fn blocks(&self, tool: &str) -> bool {
        let effects = self.effects.read().unwrap_or_else(|p| p.into_inner());
        !matches!(effects.get(tool), Some(Effect::Process | Effect::Network | Effect::Browser))
    }

    /// Whether `call` is an edit whose outcome only its files decide, and the guard sees their
    /// state ([`watching`](Self::watching)): then it is a new call exactly when one of them
    /// changed, and another call's success (a `git status`, a `cat` of the file) does not make
    /// it worth a third identical try.
    fn decided_by_files(&self, call: &ToolCall) -> bool {
        let effect = self.effects.read().unwrap_or_else(|p| p.into_inner()).get(&call.name).copied();
        effect == Some(Effect::MutatesFiles)
            && self.workspace.as_ref().is_some_and(|ws| !self.named_files(call, ws).is_empty())
    }

    /// Whether a success of `tool` may have changed what other calls meet.
    fn may_change_world(&self, tool: &str) -> bool {
        let effects = self.effects.read().unwrap_or_else(|p| p.into_inner());
        !matches!(effects.get(tool), Some(Effect::ReadOnly | Effect::Network))
    }

    /// The fingerprint `before_call` took for this call and whether only its files decide it,
    /// or, for a call that never passed it (or still carries its arguments), its own.
    fn settled_key(&self, call: &ToolCall) -> Taken {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let slot = (call.id.clone(), call.name.clone());
        let taken = pending.get_mut(&slot).and_then(|keys| (!keys.is_empty()).then(|| keys.remove(0)));
        if pending.get(&slot).is_some_and(Vec::is_empty) {
            pending.remove(&slot);
        }
        taken.unwrap_or_else(|| (self.key(call), self.decided_by_files(call)))
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
        if !self.blocks(&call.name) {
            return self.inner.before_call(call).await;
        }
        let key = self.key(call);
        let by_files = self.decided_by_files(call);
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            // Calls dropped before they settle never reach `after_call`; do not let their
            // fingerprints pile up over a long session.
            if pending.len() >= 4096 {
                pending.clear();
            }
            pending.entry((call.id.clone(), call.name.clone())).or_default().push((key, by_files));
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let count = match self.fruitless.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            Some(&(count, at)) if at == epoch || by_files => count,
            _ => 0,
        };
        if count >= self.limit {
            return HookDecision::Block(format!(
                "this exact `{}` call already failed or changed nothing {count} times and nothing it depends on has \
                 changed since, so it would end the same way; change the arguments (for an edit: copy the text from the \
                 file as it is now), or first change what it depends on — after a successful edit or command, or once \
                 a file it names changed, it may run again",
                call.name,
            ));
        }
        self.inner.before_call(call).await
    }

    async fn after_call(&self, call: &ToolCall, out: &ToolOutput) {
        if !self.blocks(&call.name) {
            if out.status == ToolStatus::Success && self.may_change_world(&call.name) {
                self.epoch.fetch_add(1, Ordering::SeqCst);
            }
            return self.inner.after_call(call, out).await;
        }
        let (key, by_files) = self.settled_key(call);
        let blocked_here = out.status == ToolStatus::Denied && out.text_content().contains("this exact");
        if !blocked_here {
            let useless = fruitless(out);
            // Counted in the epoch the call settled in: a change made while it ran (another
            // call of its turn) is one it may not have seen, so the next try runs.
            let epoch = self.epoch.load(Ordering::SeqCst);
            {
                let mut map = self.fruitless.lock().unwrap_or_else(|p| p.into_inner());
                if useless {
                    let entry = map.entry(key).or_insert((0, epoch));
                    *entry = if entry.1 == epoch || by_files { (entry.0 + 1, epoch) } else { (1, epoch) };
                } else {
                    map.remove(&key);
                }
            }
            if !useless && self.may_change_world(&call.name) {
                self.epoch.fetch_add(1, Ordering::SeqCst);
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
