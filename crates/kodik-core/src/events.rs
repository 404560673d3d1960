//! Events a tool emits outside its result: terminal completions (S3, S5) and progress.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The outcome of a background command, delivered when it settles (S3, S5, S9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerminalEvent {
    /// The terminal the command ran in.
    pub terminal_id: String,
    /// The command line.
    pub command: String,
    /// Exit code, when the process exited by itself.
    pub exit_code: Option<i32>,
    /// `success`, `error` or `stopped`.
    pub status: crate::ToolStatus,
    /// Wall time from start to end, in milliseconds.
    pub duration_ms: u64,
    /// Only the output the model has not read yet.
    pub unread_output: String,
    /// Where the complete output was saved.
    pub full_output: Option<std::path::PathBuf>,
}

/// Something a host may show while or after tools run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A background command settled.
    Terminal(TerminalEvent),
    /// Progress of a running call.
    Progress {
        /// The call reporting progress.
        call_id: String,
        /// What is happening.
        message: String,
    },
    /// A log line from inside a call (code mode's `console.log`, a nested call's start/end, …).
    Log {
        /// The call that logged.
        call_id: String,
        /// `info`, `warn`, `error`, …
        level: String,
        /// The line.
        message: String,
    },
}

/// Where events go. Implementations must not block.
pub trait EventSink: Send + Sync {
    /// Deliver one event.
    fn emit(&self, event: Event);
}

/// Drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: Event) {}
}

/// Keeps every event in memory; handy for tests and for hosts that poll.
#[derive(Debug, Default)]
pub struct CollectingSink {
    events: Mutex<Vec<Event>>,
}

impl CollectingSink {
    /// Takes the events collected so far.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl EventSink for CollectingSink {
    fn emit(&self, event: Event) {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).push(event);
    }
}
