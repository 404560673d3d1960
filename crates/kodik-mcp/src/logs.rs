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
//! them for [`LOG_GRACE`]. A call shows at most [`MAX_LOGS_PER_CALL`] of them as events (in
//! `kodik serve` they share the event queue with kodik's own progress and answers), then one
//! saying that the rest are not shown; `tracing` keeps them all.

// MCP logging is deprecated by draft SEP-2577 in rmcp, but servers of the 2025 protocol versions
// (server-everything, the SDKs' `ctx.info`) still log this way.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, Weak};
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

/// The most log messages one call shows as events. A server may log thousands in one call (a
/// progress line per file), and each event takes a slot of the host's event queue (1024 in
/// `kodik serve`, shared with kodik's own progress and answers) and a line of a person's screen.
pub const MAX_LOGS_PER_CALL: usize = 100;

/// A call that receives its server's log messages.
struct Target {
    /// Order of start.
    order: u64,
    call_id: String,
    /// Weak so that a call that ended does not keep its host's sink (and what it holds: a
    /// `kodik serve` session's queue, a client's connection) until this server's next call.
    sink: Weak<dyn EventSink>,
    /// The sink held while the call runs.
    _hold: Option<Arc<dyn EventSink>>,
    /// Messages shown as this call's events (at most [`MAX_LOGS_PER_CALL`]), and whether it
    /// has said that the rest are not shown.
    shown: usize,
    cut: bool,
}

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
        if let Some(at) = calls.running.iter().position(|t| t.order == self.id) {
            let mut target = calls.running.remove(at);
            target._hold = None;
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
        calls.running.push(Target {
            order: id,
            call_id: cx.call_id.clone(),
            sink: Arc::downgrade(&cx.events),
            _hold: Some(Arc::clone(&cx.events)),
            shown: 0,
            cut: false,
        });
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
        for (call_id, sink, show) in targets {
            if show {
                sink.emit(Event::Log { call_id, level: level.to_owned(), message: message.clone() });
            } else {
                let message = format!(
                    "[MCP server {server}] more than {MAX_LOGS_PER_CALL} log messages in this call: the rest are \
                     not shown; KODIK_LOG={LOG_TARGET}=debug shows them"
                );
                sink.emit(Event::Log { call_id, level: "info".to_owned(), message });
            }
        }
    }

    /// Each sink of the running calls once, under its call started last; with none running, the
    /// call that ended within [`LOG_GRACE`]; each with whether it shows the message (`false`:
    /// its call has shown [`MAX_LOGS_PER_CALL`] and is to say once that the rest are not shown).
    /// A call that has said so is left out.
    fn targets(&self) -> Vec<(String, Arc<dyn EventSink>, bool)> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let calls = &mut *calls;
        // `running` is in start order: a later call on the same sink takes its place.
        let mut chosen: Vec<&mut Target> = Vec::new();
        for target in calls.running.iter_mut() {
            match chosen.iter_mut().find(|t| Weak::ptr_eq(&t.sink, &target.sink)) {
                Some(slot) => *slot = target,
                None => chosen.push(target),
            }
        }
        if chosen.is_empty()
            && let Some((at, target)) = &mut calls.ended
            && at.elapsed() < LOG_GRACE
        {
            chosen.push(target);
        }
        let mut out = Vec::new();
        for target in chosen {
            let Some(sink) = target.sink.upgrade() else { continue };
            if target.shown < MAX_LOGS_PER_CALL {
                target.shown += 1;
                out.push((target.call_id.clone(), sink, true));
            } else if !target.cut {
                target.cut = true;
                out.push((target.call_id.clone(), sink, false));
            }
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

    #[test]
    fn a8_a_call_shows_a_hundred_log_messages_then_says_once_that_the_rest_are_not() {
        let logs = ServerLogs::new("docs");
        let host = Arc::new(CollectingSink::default());
        let _call = logs.track(&call("c1", &host));
        for i in 0..MAX_LOGS_PER_CALL {
            logs.deliver(&log(&format!("line {i}")));
        }
        let shown = calls_of(&host);
        assert_eq!(shown.len(), MAX_LOGS_PER_CALL);
        assert_eq!(shown.last().map(|s| s.1.as_str()), Some("[MCP server docs] line 99"), "no note at exactly 100");
        for i in 0..3 {
            logs.deliver(&log(&format!("more {i}")));
        }
        let note = "[MCP server docs] more than 100 log messages in this call: the rest are not shown; \
                    KODIK_LOG=kodik_mcp::server_log=debug shows them";
        assert_eq!(calls_of(&host), [("c1".to_owned(), note.to_owned())]);
    }

    /// A call that ended keeps its sink only weakly: the host's sink (a `kodik serve` session's
    /// queue) is freed when the host drops it, not at this server's next call.
    #[test]
    fn a8_a_call_that_ended_does_not_keep_its_hosts_event_sink() {
        let logs = ServerLogs::new("docs");
        let host = Arc::new(CollectingSink::default());
        let cx = call("c1", &host);
        let guard = logs.track(&cx);
        drop(guard);
        logs.deliver(&log("after the answer"));
        assert_eq!(calls_of(&host).len(), 1, "still within the grace");
        let weak = Arc::downgrade(&host);
        drop((cx, host));
        assert!(weak.upgrade().is_none(), "the sink outlived its host");
        logs.deliver(&log("nobody listens"));
    }
}
