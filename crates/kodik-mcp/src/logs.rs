//! A mounted server's log messages (`notifications/message`), shown to the user, never to the
//! model.
//!
//! Each goes to `tracing` (target [`LOG_TARGET`], the server's name in the `server` field, the
//! level mapped from MCP's) and, while calls to that server run, as an [`Event::Log`] to those
//! calls' event sinks (the host's: `kodik call`/`batch` print them on stderr, `kodik serve`
//! passes them on to its client). MCP ties no log message to a request, so one that arrives
//! while several calls on the same sink run goes to that sink once, under the call started
//! last. rmcp handles notifications in tasks of their own, so a message a server sends just
//! before its answer may be handled just after it: the call that ended last keeps receiving
//! them for [`LOG_GRACE`].

// MCP logging is deprecated by draft SEP-2577 in rmcp, but servers of the 2025 protocol versions
// (server-everything, the SDKs' `ctx.info`) still log this way.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kodik_core::{Event, EventSink, ToolContext};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::Value;

/// The `tracing` target of mounted servers' log messages (`KODIK_LOG=kodik_mcp::server_log=debug`
/// shows them all); the server's name is in the event's `server` field.
pub const LOG_TARGET: &str = "kodik_mcp::server_log";

/// How long after a call ends its sink still receives its server's log messages.
pub const LOG_GRACE: Duration = Duration::from_secs(1);

/// The most of one log message kept, in bytes: a server may log a whole payload.
const MAX_LOG_BYTES: usize = 4096;

/// A call that receives its server's log messages: (order of start, call id, its sink).
type Target = (u64, String, Arc<dyn EventSink>);

#[derive(Default)]
struct Calls {
    running: Vec<Target>,
    started: u64,
    /// The call that ended last, and when.
    ended: Option<(Instant, Target)>,
}

/// One server's log messages and the calls that receive them.
pub(crate) struct ServerLogs {
    server: String,
    calls: Arc<Mutex<Calls>>,
}

/// Stops a call from receiving its server's log messages ([`LOG_GRACE`] after it drops).
pub(crate) struct LogGuard {
    calls: Arc<Mutex<Calls>>,
    id: u64,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = calls.running.iter().position(|t| t.0 == self.id) {
            let target = calls.running.remove(at);
            calls.ended = Some((Instant::now(), target));
        }
    }
}

impl ServerLogs {
    pub(crate) fn new(server: &str) -> Self {
        Self { server: server.to_owned(), calls: Arc::default() }
    }

    /// Sends the server's log messages to `cx`'s events until the guard drops.
    pub(crate) fn track(&self, cx: &ToolContext) -> LogGuard {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.started += 1;
        let id = calls.started;
        calls.running.push((id, cx.call_id.clone(), Arc::clone(&cx.events)));
        LogGuard { calls: Arc::clone(&self.calls), id }
    }

    /// Shows one `notifications/message`: to `tracing`, and to the sinks of the calls running.
    pub(crate) fn deliver(&self, params: &LoggingMessageNotificationParam) {
        let text = log_text(&params.data);
        let server = self.server.as_str();
        let logger = params.logger.as_deref().unwrap_or_default();
        // `tracing` takes its level as a constant.
        match params.level {
            LoggingLevel::Debug => tracing::debug!(target: LOG_TARGET, server, logger, "{text}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(target: LOG_TARGET, server, logger, "{text}"),
            LoggingLevel::Warning => tracing::warn!(target: LOG_TARGET, server, logger, "{text}"),
            _ => tracing::error!(target: LOG_TARGET, server, logger, "{text}"),
        }
        let targets = self.targets();
        if targets.is_empty() {
            return;
        }
        let level = match params.level {
            LoggingLevel::Debug => "debug",
            LoggingLevel::Info | LoggingLevel::Notice => "info",
            LoggingLevel::Warning => "warn",
            _ => "error",
        };
        let source = if logger.is_empty() { server.to_owned() } else { format!("{server}/{logger}") };
        let message = format!("[MCP server {source}] {text}");
        for (call_id, sink) in targets {
            sink.emit(Event::Log { call_id, level: level.to_owned(), message: message.clone() });
        }
    }

    /// Each sink of the running calls once, under its call started last; with none running, the
    /// call that ended within [`LOG_GRACE`].
    fn targets(&self) -> Vec<(String, Arc<dyn EventSink>)> {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(String, Arc<dyn EventSink>)> = Vec::new();
        // `running` is in start order: a later call on the same sink takes its place.
        for (_, call_id, sink) in &calls.running {
            match out.iter_mut().find(|(_, s)| Arc::ptr_eq(s, sink)) {
                Some(slot) => slot.0 = call_id.clone(),
                None => out.push((call_id.clone(), Arc::clone(sink))),
            }
        }
        if out.is_empty()
            && let Some((at, (_, call_id, sink))) = &calls.ended
            && at.elapsed() < LOG_GRACE
        {
            out.push((call_id.clone(), Arc::clone(sink)));
        }
        out
    }
}

/// A log message's `data` as one line of text: a string as it is, anything else as JSON, cut
/// at [`MAX_LOG_BYTES`] saying how much was left out.
fn log_text(data: &Value) -> String {
    let mut text = match data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() > MAX_LOG_BYTES {
        let mut cut = MAX_LOG_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let left = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!(" … [{left} more bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use kodik_core::Workspace;
    use kodik_core::events::CollectingSink;

    fn call(id: &str, sink: &Arc<CollectingSink>) -> ToolContext {
        let dir = std::env::temp_dir();
        let mut cx = ToolContext::new(Workspace::with_roots([dir]).unwrap_or_else(|e| panic!("{e}")));
        cx.call_id = id.to_owned();
        cx.events = Arc::clone(sink) as Arc<dyn EventSink>;
        cx
    }

    fn log(text: &str) -> LoggingMessageNotificationParam {
        serde_json::from_value(serde_json::json!({"level": "notice", "data": text})).unwrap_or_else(|e| panic!("{e}"))
    }

    fn calls_of(sink: &CollectingSink) -> Vec<(String, String)> {
        sink.take()
            .into_iter()
            .filter_map(|e| match e {
                Event::Log { call_id, message, .. } => Some((call_id, message)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a8_a_log_goes_once_to_each_sink_of_the_running_calls_and_briefly_to_the_one_that_ended() {
        let logs = ServerLogs::new("docs");
        let (host, other) = (Arc::new(CollectingSink::default()), Arc::new(CollectingSink::default()));
        let first = logs.track(&call("c1", &host));
        let second = logs.track(&call("c2", &host));
        let elsewhere = logs.track(&call("x1", &other));
        logs.deliver(&log("indexing"));
        let line = "[MCP server docs] indexing".to_owned();
        assert_eq!(calls_of(&host), [("c2".to_owned(), line.clone())], "once per sink, under the later call");
        assert_eq!(calls_of(&other), [("x1".to_owned(), line.clone())]);
        drop((elsewhere, second));
        drop(first);
        logs.deliver(&log("indexing"));
        assert_eq!(calls_of(&host), [("c1".to_owned(), line)], "the call that ended last, within the grace");
        assert!(calls_of(&other).is_empty());
    }
}
