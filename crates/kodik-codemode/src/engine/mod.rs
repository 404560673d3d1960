//! The engine boundary: what a JavaScript engine gets to run one script, and how it talks to
//! the host. boa is the one engine shipped ([`boa::BoaEngine`]); another engine would implement
//! [`ScriptEngine`] against the same bridge.

pub(crate) mod boa;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kodik_core::EventSink;
use serde_json::Value;

use crate::catalog::Catalog;
use crate::error::{ErrorKind, ScriptError};

/// Runs one script to completion on the calling (dedicated) thread.
pub(crate) trait ScriptEngine: Send + Sync {
    /// Runs `job`; returns the formatted result (`None` for `undefined`) or the script's error.
    fn run(&self, job: ScriptJob) -> Result<Option<String>, ScriptError>;
}

/// Everything one run needs.
pub(crate) struct ScriptJob {
    /// The model's code, fences stripped.
    pub code: String,
    /// Lines to add to an engine line number to get a line of the submitted text (a stripped
    /// fence line).
    pub line_offset: u32,
    pub catalog: Arc<Catalog>,
    pub limits: Limits,
    pub bridge: ScriptSide,
}

/// Limits the engine enforces itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub deadline: Instant,
    pub max_tool_calls: usize,
    /// Process RSS at the start, and the allowed growth, when the watchdog is on.
    pub memory: Option<(u64, u64)>,
    /// For messages: the configured timeout and memory limit.
    pub timeout_secs: f64,
    pub memory_mb: i64,
}

/// Starts tool call `seq` (`name`, `args`) on the host; its result comes back as
/// [`ToScript::CallDone`]. Called on the script thread, so it must not block.
pub(crate) type StartCall = Box<dyn Fn(u64, String, Value) + Send>;

/// Messages from the host to the script thread.
#[derive(Debug)]
pub(crate) enum ToScript {
    /// Call `seq` settled.
    CallDone { seq: u64, result: CallResult },
    /// Stop now (the abort flag says why).
    Wake,
}

/// A nested call's outcome as the script sees it.
#[derive(Debug, Clone)]
pub(crate) struct CallResult {
    pub ok: bool,
    /// The text the promise resolves with, or the `output` of the `ToolError`.
    pub text: String,
    pub status: String,
}

/// Text and log lines the script produced, shared so the host can report them even if the
/// script thread cannot answer any more.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub text: Vec<String>,
    pub logs: Vec<String>,
}

/// Where a script's `text()`, console lines and stored values go as they happen.
pub(crate) trait ScriptOutput: Send + Sync {
    fn text(&self, text: String);
    fn log(&self, level: String, message: String);
    /// A value the script stored, already applied to the script's [`Store`]; `None` deletes.
    fn stored(&self, _key: &str, _value: Option<&str>) {}
}

/// Output of a script run in this process: into the run's [`Collected`] and event sink.
pub(crate) struct LocalOutput {
    pub collected: Arc<Mutex<Collected>>,
    pub events: Arc<dyn EventSink>,
    /// The `codemode` call's id, for log events.
    pub call_id: String,
}

impl ScriptOutput for LocalOutput {
    fn text(&self, text: String) {
        self.collected.lock().unwrap_or_else(|p| p.into_inner()).text.push(text);
    }

    fn log(&self, level: String, message: String) {
        let line = if level == "log" || level == "info" { message.clone() } else { format!("[{level}] {message}") };
        self.collected.lock().unwrap_or_else(|p| p.into_inner()).logs.push(line);
        self.events.emit(kodik_core::Event::Log { call_id: self.call_id.clone(), level, message });
    }
}

/// Values kept across scripts for the life of the tool (K4).
#[derive(Debug, Default, Clone)]
pub(crate) struct Store {
    pub values: HashMap<String, String>,
    pub bytes: usize,
}

impl Store {
    /// Sets (`Some`) or deletes (`None`) `key`; refuses a value past the size caps.
    pub fn set(&mut self, key: String, value: Option<String>) -> Result<(), String> {
        let old = self.values.get(&key).map_or(0, |v| v.len() + key.len());
        match value {
            None => {
                self.values.remove(&key);
                self.bytes -= old;
            }
            Some(v) => {
                let new = v.len() + key.len();
                if v.len() > STORE_VALUE_MAX || self.bytes - old + new > STORE_TOTAL_MAX {
                    return Err(format!(
                        "store(): value too large ({} bytes; at most {STORE_VALUE_MAX} per value and \
                         {STORE_TOTAL_MAX} in all). Store less, or delete keys with store(key, undefined).",
                        v.len()
                    ));
                }
                self.bytes = self.bytes - old + new;
                self.values.insert(key, v);
            }
        }
        Ok(())
    }
}

/// Largest stored value and the whole store, in bytes of JSON.
pub(crate) const STORE_VALUE_MAX: usize = 1024 * 1024;
pub(crate) const STORE_TOTAL_MAX: usize = 8 * 1024 * 1024;

/// Why the host asked the script to stop.
#[derive(Debug, Default)]
pub(crate) struct AbortFlag(AtomicU8);

impl AbortFlag {
    pub fn set(&self, kind: ErrorKind) {
        let code = match kind {
            ErrorKind::TimeoutExceeded => 1,
            ErrorKind::Cancelled => 2,
            ErrorKind::MemoryLimitExceeded => 3,
            _ => 4,
        };
        let _ = self.0.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn get(&self) -> Option<ErrorKind> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            1 => Some(ErrorKind::TimeoutExceeded),
            2 => Some(ErrorKind::Cancelled),
            3 => Some(ErrorKind::MemoryLimitExceeded),
            _ => Some(ErrorKind::ExecutionFailure),
        }
    }
}

/// The script thread's end of the bridge.
pub(crate) struct ScriptSide {
    pub start_call: StartCall,
    pub from_host: std::sync::mpsc::Receiver<ToScript>,
    pub abort: Arc<AbortFlag>,
    pub output: Arc<dyn ScriptOutput>,
    pub store: Arc<Mutex<Store>>,
}

/// The process's resident set size in bytes (Linux; `None` elsewhere). The memory watchdog
/// compares it with the value at the script's start: approximate by design, as boa has no
/// per-context heap limit.
pub(crate) fn rss_bytes() -> Option<u64> {
    rss_in("/proc/self/status")
}

/// The resident set size of process `pid` in bytes (Linux; `None` elsewhere).
pub(crate) fn rss_of(pid: u32) -> Option<u64> {
    rss_in(&format!("/proc/{pid}/status"))
}

fn rss_in(status_file: &str) -> Option<u64> {
    let status = std::fs::read_to_string(status_file).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether the memory watchdog's limit is passed.
pub(crate) fn memory_exceeded(memory: Option<(u64, u64)>) -> bool {
    match (memory, memory.and(rss_bytes())) {
        (Some((base, limit)), Some(now)) => now.saturating_sub(base) > limit,
        _ => false,
    }
}

/// The message for an abort of `kind`.
pub(crate) fn abort_error(kind: ErrorKind, timeout_secs: f64, memory_mb: i64) -> ScriptError {
    let message = match kind {
        ErrorKind::TimeoutExceeded => format!(
            "the script ran longer than its {timeout_secs} s limit and was stopped; calls still running were \
             cancelled. Do less per script (fewer or smaller calls, no busy loops) or split the work."
        ),
        ErrorKind::MemoryLimitExceeded => format!(
            "the script used more than about {memory_mb} MB of memory and was stopped. Keep less data in \
             variables: filter tool output as you go and return only what you need."
        ),
        ErrorKind::Cancelled => "the script was cancelled; calls still running were cancelled too.".to_string(),
        _ => "the script was stopped".to_string(),
    };
    ScriptError::new(kind, message)
}
