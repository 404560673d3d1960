//! `sub_agent` (A3) and `send_message` (A5) over the [`AgentRunner`] host trait, and the
//! children `agent_status` (A4) reports on.
//!
//! A child runs as one [`ChildConversation::run`] at a time. A message to a running child waits
//! in its inbox and starts its next run as soon as the current one settles; a message to a
//! settled child resumes its saved conversation through [`AgentRunner::resume`], so it goes on
//! with its exact history.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use async_trait::async_trait;
use kodik_schema::agent::AgentMode;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the parent asks for when it starts a child.
#[derive(Debug, Clone)]
pub struct ChildTask {
    /// The short name of the task.
    pub description: String,
    /// The child's mode; `None` keeps the parent's.
    pub mode: Option<AgentMode>,
    /// The parent's session id.
    pub parent: String,
    /// The child's own conversation tools, to register in its tool set in place of the
    /// parent's: its own todo list and sub-agents, one level deeper, and `send_message` with
    /// `parent: true` reaching the parent (A5). Call [`set_session_id`](crate::ConversationToolset::set_session_id)
    /// with the child's id once it has one.
    pub tools: crate::ConversationToolset,
}

/// How a child's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    /// It finished with an answer.
    Completed,
    /// It stopped on a limit or an error.
    Failed,
    /// It was cancelled (its parent's turn was cancelled, or the host stopped it).
    Cancelled,
}

impl ChildStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The end of one run of a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildReport {
    /// How it ended.
    pub status: ChildStatus,
    /// Its last answer, or what went wrong.
    pub text: String,
}

/// Why the runner could not start or resume a child.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunnerError(pub String);

/// One child conversation, with its own context and tool set.
#[async_trait]
pub trait ChildConversation: Send {
    /// Its session id.
    fn id(&self) -> &str;
    /// Runs one message to its end; `cancel` stops it and whatever it started.
    async fn run(&mut self, message: &str, cancel: CancellationToken) -> ChildReport;
}

/// Starts child conversations and resumes them from their saved transcripts.
pub trait AgentRunner: Send + Sync {
    /// A new child for `task`.
    fn start(&self, task: &ChildTask) -> Result<Box<dyn ChildConversation>, RunnerError>;
    /// The child `id` as it was saved, ready to go on, with `tools` as its conversation tools
    /// (as [`ChildTask::tools`]).
    fn resume(&self, id: &str, tools: &crate::ConversationToolset) -> Result<Box<dyn ChildConversation>, RunnerError>;
}

/// Where a child is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildState {
    /// Working.
    Running,
    /// Its last run ended.
    Settled(ChildReport),
}

pub(crate) struct Child {
    pub(crate) id: String,
    pub(crate) description: String,
    pub(crate) started: Instant,
    pub(crate) background: bool,
    pub(crate) state: watch::Sender<ChildState>,
    inbox: Mutex<Vec<String>>,
    /// The child's own conversation tools, kept for resuming it.
    pub(crate) tools: crate::ConversationToolset,
    /// Stops the current run only (the parent's turn was cancelled); the child can be resumed.
    run_cancel: Mutex<CancellationToken>,
}

impl Child {
    /// Stops the child's current run, if any.
    pub(crate) fn stop_run(&self) {
        self.run_cancel.lock().unwrap_or_else(|p| p.into_inner()).cancel();
    }

    pub(crate) fn state(&self) -> ChildState {
        self.state.borrow().clone()
    }

    /// Waits until the child settles, or `cancel` fires.
    pub(crate) async fn settled(&self, cancel: &CancellationToken) -> Option<ChildReport> {
        let mut rx = self.state.subscribe();
        loop {
            if let ChildState::Settled(r) = &*rx.borrow_and_update() {
                return Some(r.clone());
            }
            tokio::select! {
                _ = cancel.cancelled() => return None,
                changed = rx.changed() => if changed.is_err() { return None },
            }
        }
    }
}

/// The children of one conversation.
#[derive(Default)]
pub(crate) struct Children {
    pub(crate) list: Mutex<Vec<Arc<Child>>>,
    /// Stops every child for good: cancelled when the toolset goes away (and, for a sub-agent's
    /// toolset, with its parent's).
    pub(crate) stop: CancellationToken,
    pub(crate) reports: Mutex<Vec<(String, ChildReport)>>,
    pub(crate) by_id: Mutex<HashMap<String, Arc<Child>>>,
    /// Messages children sent to this conversation (A5: child → parent), as notes.
    messages: Mutex<Vec<String>>,
}

impl Children {
    /// The children of a sub-agent: they stop for good with its parent's.
    pub(crate) fn under(stop: CancellationToken) -> Self {
        Self { stop, ..Self::default() }
    }

    pub(crate) fn take_messages(&self) -> Vec<String> {
        std::mem::take(&mut *self.messages.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Child>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    pub(crate) fn all(&self) -> Vec<Arc<Child>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn add(
        &self,
        id: String,
        description: String,
        background: bool,
        tools: crate::ConversationToolset,
    ) -> Arc<Child> {
        let child = Arc::new(Child {
            id: id.clone(),
            description,
            started: Instant::now(),
            background,
            state: watch::channel(ChildState::Running).0,
            inbox: Mutex::new(Vec::new()),
            tools: tools.clone(),
            run_cancel: Mutex::new(CancellationToken::new()),
        });
        if let Some(link) = &tools.inner.parent {
            let _ = link.me.set(Arc::downgrade(&child));
        }
        self.list.lock().unwrap_or_else(|p| p.into_inner()).push(child.clone());
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).insert(id, child.clone());
        child
    }
}

/// Runs `first` on `conv`, then every message that arrived meanwhile, until the inbox is
/// empty; then the child is settled and its conversation dropped (a later message resumes it
/// from its transcript).
pub(crate) async fn drive(
    child: Arc<Child>,
    mut conv: Box<dyn ChildConversation>,
    first: String,
    cancel: CancellationToken,
    reports: Option<std::sync::Weak<Children>>,
) -> ChildReport {
    *child.run_cancel.lock().unwrap_or_else(|p| p.into_inner()) = cancel.clone();
    let mut message = first;
    loop {
        let report = conv.run(&message, cancel.clone()).await;
        let mut inbox = child.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if inbox.is_empty() || report.status == ChildStatus::Cancelled {
            // Closed before it shows settled: a message that then resumes it reopens its
            // transcript, which the open conversation still holds.
            drop(conv);
            // The report is queued before the child shows settled, so an `agent_status` wait
            // that returns it can take it back out and the model does not read it twice.
            if let Some(children) = reports.and_then(|w| w.upgrade()) {
                children.reports.lock().unwrap_or_else(|p| p.into_inner()).push((child.id.clone(), report.clone()));
            }
            // Settled under the inbox lock, so `queue` never adds to a child that will not read it.
            child.state.send_replace(ChildState::Settled(report.clone()));
            drop(inbox);
            return report;
        }
        message = std::mem::take(&mut *inbox).join("\n\n");
    }
}

/// What [`queue_or_claim`] did.
pub(crate) enum Delivery {
    /// The child is running; the message waits in its inbox.
    Queued,
    /// The child was settled and is now marked running for the caller to resume; this was
    /// its last report, to restore if resuming fails.
    Claimed(ChildReport),
}

/// Queues `message` for a running child, or claims a settled one for resuming. `drive` settles
/// under the inbox lock, so a message is never queued for a child that will not read it, and
/// two messages never resume the same child twice.
pub(crate) fn queue_or_claim(child: &Child, message: &str) -> Delivery {
    let mut inbox = child.inbox.lock().unwrap_or_else(|p| p.into_inner());
    match child.state() {
        ChildState::Running => {
            inbox.push(message.to_string());
            Delivery::Queued
        }
        ChildState::Settled(last) => {
            child.state.send_replace(ChildState::Running);
            Delivery::Claimed(last)
        }
    }
}

/// One line about a child for `agent_status`.
pub(crate) fn describe(child: &Child) -> String {
    let secs = child.started.elapsed().as_secs();
    let (state, tail) = match child.state() {
        ChildState::Running => ("running".to_string(), String::new()),
        ChildState::Settled(r) => (r.status.as_str().to_string(), format!("\n  report: {}", r.text.trim())),
    };
    let kind = if child.background { "background" } else { "foreground" };
    format!("- {} [{state}] {} — {kind}, started {secs} s ago{tail}", child.id, child.description)
}

/// The text the model reads for a settled child.
pub(crate) fn report_text(id: &str, r: &ChildReport) -> String {
    format!("Sub-agent {id} {}:\n{}", r.status.as_str(), r.text.trim())
}

/// A sub-agent's way back to the conversation that started it (A5: child → parent, parent →
/// child at the child's next request).
pub(crate) struct ParentLink {
    /// The parent's session id.
    pub(crate) id: String,
    /// The parent's children, whose message list the parent reads before its next request.
    parent: Weak<Children>,
    /// This child's entry in that list (its inbox); set once the child has an id.
    pub(crate) me: OnceLock<Weak<Child>>,
}

impl ParentLink {
    pub(crate) fn new(id: String, parent: Weak<Children>) -> Self {
        Self { id, parent, me: OnceLock::new() }
    }

    /// Leaves `message` for the parent's next request.
    pub(crate) fn send(&self, message: &str) -> Result<(), String> {
        let parent = self.parent.upgrade().ok_or_else(|| format!("your parent conversation {} has ended", self.id))?;
        let me = self.me.get().and_then(Weak::upgrade);
        let (id, what) = me.as_ref().map_or(("?", ""), |c| (c.id.as_str(), c.description.as_str()));
        parent.messages.lock().unwrap_or_else(|p| p.into_inner()).push(format!(
            "[message from sub-agent {id} ({what}), still working]\n{}\n(Answer it with send_message agent_id \"{id}\".)",
            message.trim()
        ));
        Ok(())
    }

    /// The parent's messages waiting for this child, as notes for its next request; the
    /// inbox is emptied, so the run that settles next has nothing left to go on with.
    pub(crate) fn take_from_parent(&self) -> Vec<String> {
        let Some(me) = self.me.get().and_then(Weak::upgrade) else { return Vec::new() };
        let taken = std::mem::take(&mut *me.inbox.lock().unwrap_or_else(|p| p.into_inner()));
        taken.into_iter().map(|m| format!("[message from your parent agent {}]\n{}", self.id, m.trim())).collect()
    }
}
