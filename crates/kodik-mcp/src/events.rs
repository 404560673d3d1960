//! Kodik events as MCP logging notifications.
//!
//! Tools emit [`Event`]s synchronously and must never block, while sending to the client is
//! async and only possible once it is connected. [`McpEvents`] queues events in a bounded
//! channel; when the session is up a task drains it into `notifications/message` (logger
//! `kodik`, `data` = the event's JSON), honouring the client's `logging/setLevel`.

// MCP logging is deprecated by SEP-2577 in rmcp, but it is still the channel every client
// shows; progress notifications need a per-request token the terminal events do not have.
#![allow(deprecated)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kodik_core::{Event, EventSink, TerminalEvent, ToolStatus};
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;

/// Events waiting for the client beyond this are dropped (and counted) rather than blocking a tool.
const QUEUE: usize = 1024;

/// Terminal events kept for the next tool result; the oldest go first beyond this.
const PENDING: usize = 64;

/// The logger name on every notification.
pub const LOGGER: &str = "kodik";

/// An [`EventSink`] that forwards every event to the connected MCP client, and to an inner sink.
pub struct McpEvents {
    inner: Arc<dyn EventSink>,
    tx: mpsc::Sender<Event>,
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
    min_level: Arc<AtomicU8>,
    dropped: AtomicU64,
    /// Running calls whose request asked for progress: call id → token and steps sent.
    progress: Arc<Steps>,
    /// Terminal events not yet shown in a tool result (see [`McpEvents::take_pending`]).
    pending: Mutex<VecDeque<TerminalEvent>>,
}

impl std::fmt::Debug for McpEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpEvents").field("dropped", &self.dropped.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl McpEvents {
    /// A sink that also hands every event to `inner` (pass [`kodik_core::NullSink`] for none).
    pub fn new(inner: Arc<dyn EventSink>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        Self {
            inner,
            tx,
            rx: Mutex::new(Some(rx)),
            min_level: Arc::new(AtomicU8::new(rank(LoggingLevel::Debug))),
            dropped: AtomicU64::new(0),
            progress: Arc::default(),
            pending: Mutex::new(VecDeque::new()),
        }
    }

    /// Starts forwarding to `peer`. Only the first call has an effect: one session per sink.
    /// Must be called inside a Tokio runtime.
    pub fn attach(&self, peer: Peer<RoleServer>) {
        let Some(mut rx) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let min_level = Arc::clone(&self.min_level);
        let progress = Arc::clone(&self.progress);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let Event::Progress { call_id, message } = &event
                    && progress.send(&peer, call_id, message.clone()).await.is_err()
                {
                    break;
                }
                let level = level_of(&event);
                if rank(level) < min_level.load(Ordering::Relaxed) {
                    continue;
                }
                let data = match serde_json::to_value(&event) {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot serialize a kodik event");
                        continue;
                    }
                };
                let param = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
                if let Err(e) = peer.notify_logging_message(param).await {
                    // The client went away; nothing further can be delivered.
                    tracing::debug!(error = %e, "stopped forwarding events to the MCP client");
                    break;
                }
            }
        });
    }

    /// Sends `Progress` events of `call_id` as `notifications/progress` with `token` until
    /// [`end_progress`](Self::end_progress); they still go out as log messages too.
    pub fn begin_progress(&self, call_id: &str, token: ProgressToken) {
        lock(&self.progress.calls).insert(call_id.to_owned(), (token, 0));
    }

    /// The call ended: no more progress notifications for it.
    pub fn end_progress(&self, call_id: &str) {
        lock(&self.progress.calls).remove(call_id);
    }

    /// Sends `peer` a `notifications/progress` of `call_id` saying `message`, as its next step,
    /// when its request asked for progress and it still runs; `Err` when the client is gone.
    /// Progress that is no event ("still running") goes through here too, so steps go out in
    /// increasing order whichever path sends them.
    pub(crate) async fn send_progress(
        &self,
        peer: &Peer<RoleServer>,
        call_id: &str,
        message: String,
    ) -> Result<(), rmcp::service::ServiceError> {
        self.progress.send(peer, call_id, message).await
    }

    /// Notifications below `level` are not sent (the client's `logging/setLevel`).
    pub fn set_level(&self, level: LoggingLevel) {
        self.min_level.store(rank(level), Ordering::Relaxed);
    }

    /// Terminal events emitted since the last call, oldest first.
    ///
    /// MCP clients rarely show logging notifications to their model, and a terminal event
    /// carries output the shell will not repeat (S5), so the server also appends these to the
    /// next tool result.
    pub fn take_pending(&self) -> Vec<TerminalEvent> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect()
    }

    /// Events dropped because the client could not keep up.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The progress steps of running calls, and a gate that keeps them in order on the wire.
#[derive(Default)]
struct Steps {
    calls: Mutex<HashMap<String, (ProgressToken, u64)>>,
    gate: tokio::sync::Mutex<()>,
}

impl Steps {
    async fn send(
        &self,
        peer: &Peer<RoleServer>,
        call_id: &str,
        message: String,
    ) -> Result<(), rmcp::service::ServiceError> {
        let _in_order = self.gate.lock().await;
        // Only while the call runs: the spec forbids progress after the response.
        let step = lock(&self.calls).get_mut(call_id).map(|(token, n)| {
            *n += 1;
            (token.clone(), *n)
        });
        match step {
            Some((token, n)) => {
                peer.notify_progress(ProgressNotificationParam::new(token, n as f64).with_message(message)).await
            }
            None => Ok(()),
        }
    }
}

impl EventSink for McpEvents {
    fn emit(&self, event: Event) {
        self.inner.emit(event.clone());
        if let Event::Terminal(t) = &event {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if pending.len() == PENDING {
                pending.pop_front();
            }
            pending.push_back(t.clone());
        }
        if self.tx.try_send(event).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(dropped = n, "MCP client is not reading notifications; dropped an event");
        }
    }
}

/// The MCP level a Kodik event is logged at.
pub fn level_of(event: &Event) -> LoggingLevel {
    match event {
        Event::Terminal(t) => match t.status {
            ToolStatus::Success => LoggingLevel::Info,
            ToolStatus::Stopped | ToolStatus::Cancelled => LoggingLevel::Notice,
            _ => LoggingLevel::Warning,
        },
        Event::Progress { .. } => LoggingLevel::Info,
        Event::Log { level, .. } => match level.to_ascii_lowercase().as_str() {
            "debug" | "trace" => LoggingLevel::Debug,
            "warn" | "warning" => LoggingLevel::Warning,
            "error" => LoggingLevel::Error,
            _ => LoggingLevel::Info,
        },
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// RFC 5424 severity order (LoggingLevel has no `Ord`).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
