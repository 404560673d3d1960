//! Runs the tool calls of one model turn.
//!
//! A [`Turn`] takes calls as the model's stream completes them ([`Turn::push`]), learns when
//! the response is complete ([`Turn::finish`]) or broke off ([`Turn::abort`]), and hands back
//! every result in call order once all have settled ([`Turn::results`]).
//!
//! - **Concurrency (G1)**: independent calls run at once, up to a configurable limit on the
//!   work kodik does itself (reads, searches, edits, fetches, browser actions). A call that
//!   mostly waits on something outside — a command's process or one it controls
//!   ([`Effect::Process`]: `shell`, `kill_terminal`, code mode), a person or another agent
//!   ([`Effect::Conversation`]) — takes no slot: sixteen commands waiting for their processes
//!   do not keep `kill_terminal`, `get_terminal_output` or a read from running (S10).
//! - **Same resource, model order (G2)**: calls that mutate the same file — compared through
//!   [`kodik_core::Resource`], so `a.txt`, `./a.txt`, `dir/../a.txt`, the absolute path and a
//!   symlink are one — run in call order; unrelated calls never wait for them. A call that may
//!   act on anything ([`Tool::orders_all_calls`]: a code-mode script) waits for every earlier
//!   call, and every later one waits for it ([`kodik_core::CallOrder`]).
//! - **Approval (G3)**: each call is authorized (hooks, approver) before it takes a slot, so a
//!   call waiting for the user blocks nothing else.
//! - **Streaming start (G4)**: calls whose tool may start while the response streams
//!   ([`Tool::starts_while_streaming`]: reads, searches, web, shell, and `call_tool` of one of
//!   those) start when pushed; the others — and every call pushed after one of
//!   them — wait for [`Turn::finish`].
//! - **Results (G5, G7, G8, G9)**: in call order, raw output untouched, over-large text cut to
//!   head and tail with the full text saved.
//! - **Abort (G6)**: started calls are cancelled and their results dropped; calls not started
//!   get `cancelled`. A per-call timeout gives `timed_out`; a panic is an `error` for that call.
//!
//! [`Tool::starts_while_streaming`]: kodik_core::Tool::starts_while_streaming
//! [`Effect::Process`]: kodik_core::Effect::Process
//! [`Effect::Conversation`]: kodik_core::Effect::Conversation
//! [`Tool::orders_all_calls`]: kodik_core::Tool::orders_all_calls

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kodik_core::preview::{OutputPreview, PreviewConfig};
use kodik_core::registry::{call_span, record_span};
use kodik_core::{
    CallOrder, Content, Effect, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, TurnSignals, authorize,
    execute,
};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// How a scheduler runs calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Calls running at the same time, at most, not counting calls that wait on a process, a
    /// person or another agent ([`Effect::Process`],
    /// [`Effect::Conversation`]): those hold no slot.
    pub max_concurrency: usize,
    /// A call running longer gets `timed_out` (`None`: no limit; tools keep their own limits).
    pub call_timeout: Option<Duration>,
    /// Text results longer than this are cut to head and tail, the full text saved (G9).
    pub max_output_bytes: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self { max_concurrency: 16, call_timeout: None, max_output_bytes: 100_000 }
    }
}

/// Runs turns of calls against one registry.
#[derive(Debug, Clone)]
pub struct Scheduler {
    registry: Arc<ToolRegistry>,
    config: SchedulerConfig,
}

impl Scheduler {
    /// A scheduler over `registry` with the default configuration.
    pub fn new(registry: impl Into<Arc<ToolRegistry>>) -> Self {
        Self { registry: registry.into(), config: SchedulerConfig::default() }
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: SchedulerConfig) -> Self {
        self.config = config;
        self
    }

    /// The registry calls are looked up in.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// Starts a turn. Calls run with clones of `cx`; the turn gets its own cancellation
    /// (a child of `cx.cancel`) and its own [`TurnSignals`].
    pub fn turn(&self, cx: &ToolContext) -> Turn {
        let mut cx = cx.clone();
        cx.cancel = cx.cancel.child_token();
        cx.turn = TurnSignals::default();
        Turn {
            registry: Arc::clone(&self.registry),
            config: self.config.clone(),
            semaphore: Arc::new(Semaphore::new(self.config.max_concurrency.max(1))),
            complete: CancellationToken::new(),
            gate_rest: false,
            order: CallOrder::new(),
            orders_commands: true,
            calls: Vec::new(),
            aborted: false,
            cx,
        }
    }

    /// A turn that never ends, for hosts whose calls arrive one at a time and may overlap
    /// (an MCP client's concurrent requests): every call starts at once, concurrency and
    /// same-resource order (G2) apply across all calls of the stream.
    ///
    /// Overlapping calls form one burst, treated like one model turn's calls: they share the
    /// [`TurnSignals`] ("another call of this turn finished", the shell's S4 rule). A call that
    /// arrives while none runs starts a new burst, so a lone `shell` call gets its full default
    /// wait however many calls came before it; with nothing running, G2 has nothing to order
    /// against.
    ///
    /// A command (a shell call, a sub-agent) does not hold up the stream's later file changes,
    /// as it does in a turn: the calls may be several agents' (sub-agents sharing the client's
    /// connection). Same-file order still applies, a patch sent through the shell included.
    pub fn stream(&self, cx: &ToolContext) -> CallStream {
        let mut turn = self.turn(cx);
        turn.orders_commands = false;
        turn.finish();
        CallStream { cancel: turn.cx.cancel.clone(), state: std::sync::Mutex::new(StreamState { turn, in_flight: 0 }) }
    }

    /// Runs a complete turn: pushes every call, finishes, and returns the results in order.
    pub async fn run(&self, calls: impl IntoIterator<Item = ToolCall>, cx: &ToolContext) -> Vec<ToolOutput> {
        let mut turn = self.turn(cx);
        for call in calls {
            turn.push(call);
        }
        turn.results().await
    }
}

/// Cancels the pending tasks of a turn that is dropped before its results are taken.
struct Pending {
    handle: JoinHandle<ToolOutput>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// The calls of one model turn. See the [crate docs](crate).
pub struct Turn {
    registry: Arc<ToolRegistry>,
    config: SchedulerConfig,
    cx: ToolContext,
    semaphore: Arc<Semaphore>,
    /// Cancelled when the response is complete: releases the calls that wait for it (G4).
    complete: CancellationToken,
    /// Set once a call that must wait for completion was pushed: all later calls wait too.
    gate_rest: bool,
    /// Which earlier calls a new call waits for (G2, G4).
    order: CallOrder,
    /// Whether a call that may change any file below a folder ([`Resource::Tree`] among its
    /// changes: a shell command, a sub-agent) holds up the later changes of those files. Off in
    /// a [`CallStream`], whose overlapping calls may come from several agents sharing one
    /// connection: there one agent's long command would stall every other agent's edits.
    ///
    /// [`Resource::Tree`]: kodik_core::Resource::Tree
    orders_commands: bool,
    calls: Vec<Pending>,
    aborted: bool,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("calls", &self.calls.len()).field("aborted", &self.aborted).finish()
    }
}

impl Turn {
    /// The signals shared by this turn's calls.
    pub fn signals(&self) -> &TurnSignals {
        &self.cx.turn
    }

    /// Adds a call whose arguments are complete. It starts now when its tool may start while
    /// the response streams and no earlier call of this turn had to wait; otherwise it starts at
    /// [`finish`](Self::finish).
    pub fn push(&mut self, call: ToolCall) {
        let (handle, _cancel, _abandoned) = self.spawn(call);
        self.calls.push(Pending { handle });
    }

    /// Starts `call`; its task, its cancellation and its "given up for good" token
    /// ([`ToolContext::abandoned`]).
    fn spawn(&mut self, call: ToolCall) -> (JoinHandle<ToolOutput>, CancellationToken, CancellationToken) {
        let tool = self.registry.get(&call.name).cloned();
        let must_wait = self.gate_rest || tool.as_ref().is_some_and(|t| !t.starts_while_streaming(&call.args));
        self.gate_rest |= must_wait;

        let done = CancellationToken::new();
        let before = match &tool {
            Some(t) if t.orders_all_calls(&call.args) => self.order.register_barrier(&done),
            Some(t) => {
                let ws = &self.cx.workspace;
                let mut writes = t.resources(&call.args, ws);
                if !self.orders_commands {
                    writes.retain(|r| !matches!(r, kodik_core::Resource::Tree(_)));
                }
                self.order.register(writes, t.reads(&call.args, ws), &done)
            }
            None => self.order.register(Vec::new(), Vec::new(), &done),
        };

        let cx = self.cx.for_call(call.id.clone());
        let cancel = cx.cancel.clone();
        let abandoned = cx.abandoned.clone();
        let job = CallJob {
            registry: Arc::clone(&self.registry),
            config: self.config.clone(),
            semaphore: Arc::clone(&self.semaphore),
            complete: must_wait.then(|| self.complete.clone()),
            before,
            done,
            call,
            cx,
        };
        let span = call_span(&job.call);
        (tokio::spawn(job.run(span.clone()).instrument(span)), cancel, abandoned)
    }

    /// The response is complete: calls that waited for it may start.
    pub fn finish(&mut self) {
        self.complete.cancel();
    }

    /// The response broke off: started calls are cancelled and their results dropped, calls
    /// not started will not start (G6). [`results`](Self::results) then gives `cancelled` for
    /// every call.
    pub fn abort(&mut self) {
        self.aborted = true;
        // Before the cancellation, so calls see why they are cancelled.
        self.cx.turn.abort();
        self.cx.cancel.cancel();
    }

    /// Every call's result, in call order, once all have settled (G5). Finishes the turn
    /// first if [`finish`](Self::finish) was not called.
    pub async fn results(mut self) -> Vec<ToolOutput> {
        self.finish();
        let mut outs = Vec::with_capacity(self.calls.len());
        for pending in std::mem::take(&mut self.calls) {
            let mut pending = pending;
            let joined = (&mut pending.handle).await;
            let out = match joined {
                _ if self.aborted => cancelled_output("the response broke off; the call's result was dropped"),
                Ok(out) => out,
                Err(e) if e.is_panic() => ToolOutput::error("the scheduler task of this call panicked; this is a bug"),
                Err(_) => cancelled_output("cancelled"),
            };
            outs.push(out);
        }
        outs
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // A turn dropped without taking its results must not leave calls running.
        if !self.calls.is_empty() {
            self.cx.cancel.cancel();
        }
    }
}

/// Calls that arrive one at a time and share one turn's ordering rules; see [`Scheduler::stream`].
pub struct CallStream {
    state: std::sync::Mutex<StreamState>,
    cancel: CancellationToken,
}

struct StreamState {
    turn: Turn,
    /// Calls of the current burst still running.
    in_flight: usize,
}

/// Ends a call's share of its burst, also when the caller went away.
struct InFlight<'a>(&'a std::sync::Mutex<StreamState>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        state.in_flight = state.in_flight.saturating_sub(1);
    }
}

impl std::fmt::Debug for CallStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallStream").finish_non_exhaustive()
    }
}

/// Cancels a stream call whose caller went away.
struct CancelOnDrop(Option<CancellationToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.cancel();
        }
    }
}

impl CallStream {
    /// Runs one call. Dropping the returned future cancels the call.
    pub async fn call(&self, call: ToolCall) -> ToolOutput {
        self.start(call).output().await
    }

    /// Registers `call` now, before this returns: its place in the same-resource order (G2) is
    /// fixed here, so a host that knows the order its calls arrived in registers them in that
    /// order. [`StreamCall::output`] waits for the result; dropping it cancels the call.
    pub fn start(&self, call: ToolCall) -> StreamCall<'_> {
        let (handle, cancel, abandoned) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.in_flight == 0 {
                // A new burst: calls that finished before it are not "another call of this turn".
                state.turn.cx.turn = TurnSignals::default();
            }
            state.in_flight += 1;
            state.turn.spawn(call)
        };
        let abandon = Abandon { abandoned, cancel: cancel.clone() };
        StreamCall { handle, _in_flight: InFlight(&self.state), cancel: CancelOnDrop(Some(cancel)), abandon }
    }

    /// Cancels every call of the stream.
    pub fn cancel_all(&self) {
        self.cancel.cancel();
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A call registered with a [`CallStream`] ([`CallStream::start`]); dropping it before
/// [`output`](Self::output) returns cancels the call.
pub struct StreamCall<'a> {
    handle: JoinHandle<ToolOutput>,
    _in_flight: InFlight<'a>,
    cancel: CancelOnDrop,
    abandon: Abandon,
}

/// Gives one stream call up for good ([`StreamCall::abandon_handle`]).
#[derive(Debug, Clone)]
pub struct Abandon {
    abandoned: CancellationToken,
    cancel: CancellationToken,
}

impl Abandon {
    /// Gives the call up for good (G6): as [`ToolContext::abandon`] — marked abandoned, then
    /// cancelled — so what it started (a command's process group) stops too, where a bare
    /// cancellation only ends its wait.
    pub fn abandon(&self) {
        self.abandoned.cancel();
        self.cancel.cancel();
    }
}

impl std::fmt::Debug for StreamCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamCall").finish_non_exhaustive()
    }
}

impl StreamCall<'_> {
    /// A handle that gives the call up for good, for a host whose client withdraws a request
    /// (MCP `notifications/cancelled`) while [`output`](Self::output) waits; dropping the
    /// call only cancels it.
    pub fn abandon_handle(&self) -> Abandon {
        self.abandon.clone()
    }

    /// The call's result, once it settled.
    pub async fn output(mut self) -> ToolOutput {
        let out = match (&mut self.handle).await {
            Ok(out) => out,
            Err(e) if e.is_panic() => ToolOutput::error("the scheduler task of this call panicked; this is a bug"),
            Err(_) => cancelled_output("cancelled"),
        };
        self.cancel.0 = None;
        out
    }
}

fn cancelled_output(msg: &str) -> ToolOutput {
    ToolError::Cancelled.into_output().with_meta(serde_json::json!({"error_kind": "cancelled", "reason": msg}))
}

struct CallJob {
    registry: Arc<ToolRegistry>,
    config: SchedulerConfig,
    semaphore: Arc<Semaphore>,
    complete: Option<CancellationToken>,
    before: Vec<CancellationToken>,
    done: CancellationToken,
    call: ToolCall,
    cx: ToolContext,
}

impl CallJob {
    async fn run(mut self, span: tracing::Span) -> ToolOutput {
        // Whatever happens below (return, panic, abort), later calls on the same resources
        // must be released.
        let _release = self.done.clone().drop_guard();
        let started = Instant::now();
        let out = self.run_inner().await;
        self.cx.turn.call_finished();
        record_span(&span, &out, started);
        out
    }

    async fn run_inner(&mut self) -> ToolOutput {
        let cancel = &self.cx.cancel;
        if let Some(complete) = &self.complete {
            tokio::select! {
                () = complete.cancelled() => {}
                () = cancel.cancelled() => return cancelled_output("the call had not started"),
            }
        }
        let tool = match authorize(&self.registry, &self.call, &self.cx).await {
            Ok(t) => t,
            Err(out) => return out,
        };
        for prev in &self.before {
            tokio::select! {
                () = prev.cancelled() => {}
                () = cancel.cancelled() => return cancelled_output("the call had not started"),
            }
        }
        // A slot bounds work kodik does itself; a call that waits on a process, a person or an
        // agent would hold it for nothing and starve the calls that inspect or stop that
        // process (S10).
        let takes_slot = !matches!(tool.spec().effect, Effect::Process | Effect::Conversation);
        let _permit = if takes_slot {
            Some(tokio::select! {
                p = Arc::clone(&self.semaphore).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return cancelled_output("the turn was closed"),
                },
                () = cancel.cancelled() => return cancelled_output("the call had not started"),
            })
        } else {
            None
        };
        // The arguments move into the tool: a copy would cost a whole-file edit its size (#18.2).
        let call = std::mem::replace(&mut self.call, ToolCall::new("", "", serde_json::Value::Null));
        let out = match self.config.call_timeout {
            None => execute(tool, call, &self.cx).await,
            Some(limit) => match tokio::time::timeout(limit, execute(tool, call, &self.cx)).await {
                Ok(out) => out,
                Err(_) => {
                    cancel.cancel();
                    ToolError::TimedOut(limit.as_millis() as u64).into_output()
                }
            },
        };
        bound_output(out, self.config.max_output_bytes)
    }
}

/// Cuts over-large text content to head and tail, saving the full text (G9). Outputs that
/// already carry a full-output path were bounded by their tool and are left alone.
fn bound_output(mut out: ToolOutput, max_bytes: usize) -> ToolOutput {
    if out.full_output.is_some() {
        return out;
    }
    let text_len: usize = out.content.iter().map(|c| if let Content::Text { text } = c { text.len() } else { 0 }).sum();
    if text_len <= max_bytes {
        return out;
    }
    let mut preview = OutputPreview::new(PreviewConfig::with_limit(max_bytes));
    let mut images = Vec::new();
    for c in std::mem::take(&mut out.content) {
        match c {
            Content::Text { text } => preview.push(text.as_bytes()),
            image => images.push(image),
        }
    }
    let summary = preview.summary();
    out.content = vec![Content::text(summary.text)];
    out.content.extend(images);
    out.full_output = summary.full_output;
    if out.meta.is_null() {
        out.meta = serde_json::json!({});
    }
    if let Some(m) = out.meta.as_object_mut() {
        m.insert("truncated".into(), true.into());
        m.insert("total_bytes".into(), summary.total_bytes.into());
    }
    out
}
