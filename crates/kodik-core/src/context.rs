//! [`ToolContext`]: everything a call may use besides its arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::{EventSink, NullSink};
use crate::ext::{CommandInterceptor, DiagnosticsProvider};
use crate::hooks::{ApprovalPolicy, Approver, Hooks, NoHooks};
use crate::session::Session;
use crate::workspace::Workspace;

/// Signals between the calls of one model turn. The shell uses "another call of this turn
/// finished" for its S4 rule.
#[derive(Debug, Clone)]
pub struct TurnSignals {
    finished: Arc<watch::Sender<u64>>,
    aborted: Arc<AtomicBool>,
}

impl Default for TurnSignals {
    fn default() -> Self {
        Self { finished: Arc::new(watch::channel(0).0), aborted: Arc::new(AtomicBool::new(false)) }
    }
}

impl TurnSignals {
    /// Marks the turn as aborted: the response broke off (G6). Set before the calls' token is
    /// cancelled, so a call that sees the cancellation can tell "stop everything" (an aborted
    /// response) from "stop waiting" (a new user message, S4).
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
    }

    /// Whether the turn was aborted (see [`abort`](Self::abort)).
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Announce that one call of the turn finished.
    pub fn call_finished(&self) {
        self.finished.send_modify(|n| *n += 1);
    }

    /// How many calls of the turn have finished so far.
    pub fn finished_count(&self) -> u64 {
        *self.finished.borrow()
    }

    /// A receiver that wakes whenever another call finishes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.finished.subscribe()
    }
}

/// What a call gets besides its arguments. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    /// The call's id.
    pub call_id: String,
    /// Where files may be touched.
    pub workspace: Workspace,
    /// The conversation's shared state.
    pub session: Arc<Session>,
    /// Cancelled when the call must stop (new user message, aborted response, K10).
    pub cancel: CancellationToken,
    /// Cancelled when the call is given up for good (an MCP client cancelled the request, G6):
    /// unlike a bare [`cancel`](Self::cancel), which may only end a wait (S4: a new user message
    /// sends a running command to the background), what the call started must stop too. Use
    /// [`abandon`](Self::abandon), which cancels this before `cancel`.
    pub abandoned: CancellationToken,
    /// Where terminal events and progress go.
    pub events: Arc<dyn EventSink>,
    /// Decides whether calls may run (used by dispatch, and by tools that run nested calls).
    pub approver: Arc<dyn Approver>,
    /// Runs around every call.
    pub hooks: Arc<dyn Hooks>,
    /// Diagnostics after edits (E9), when a language server is wired up.
    pub diagnostics: Option<Arc<dyn DiagnosticsProvider>>,
    /// Shell commands that are really other tools (P2).
    pub interceptor: Option<Arc<dyn CommandInterceptor>>,
    /// Signals between the calls of the current turn.
    pub turn: TurnSignals,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("workspace", &self.workspace.roots())
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context over `workspace` with a fresh session, auto-approval, no hooks, no events.
    pub fn new(workspace: Workspace) -> Self {
        Self {
            call_id: String::new(),
            workspace,
            session: Arc::new(Session::new()),
            cancel: CancellationToken::new(),
            abandoned: CancellationToken::new(),
            events: Arc::new(NullSink),
            approver: Arc::new(ApprovalPolicy::auto_approve_all()),
            hooks: Arc::new(NoHooks),
            diagnostics: None,
            interceptor: None,
            turn: TurnSignals::default(),
        }
    }

    /// The same context for another call id, with a child cancellation token.
    pub fn for_call(&self, call_id: impl Into<String>) -> Self {
        let mut cx = self.clone();
        cx.call_id = call_id.into();
        cx.cancel = self.cancel.child_token();
        cx.abandoned = self.abandoned.child_token();
        cx
    }

    /// Gives the call up for good (G6): marks it [`abandoned`](Self::abandoned), then cancels
    /// it, so a call that sees the cancellation knows to stop what it started.
    pub fn abandon(&self) {
        self.abandoned.cancel();
        self.cancel.cancel();
    }

    /// Whether the call was given up for good: [`abandon`](Self::abandon)ed, or its turn
    /// [aborted](TurnSignals::abort).
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.is_cancelled() || self.turn.is_aborted()
    }
}
