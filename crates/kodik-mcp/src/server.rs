//! The MCP server handler: tools/list, tools/call, logging/setLevel.

// MCP logging (capability, setLevel) is deprecated by SEP-2577 in rmcp; clients still use it.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kodik_core::{ToolCall, ToolContext, ToolError, ToolSpec};
use kodik_scheduler::{CallStream, Scheduler};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, ContentBlock, CustomRequest, CustomResult, ErrorCode,
    Implementation, JsonRpcMessage, JsonRpcRequest, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::McpError;
use crate::convert::{call_result, mcp_tool, set_structured_output, terminal_note};
use crate::events::McpEvents;

/// A tool list as a server offers it ([`McpServer::offering`], [`McpServer::follow`]).
pub struct Offering {
    /// Runs the calls; its registry must hold the listed and the unlisted tools.
    pub scheduler: Scheduler,
    /// What `tools/list` lists, in this order.
    pub tools: Vec<ToolSpec>,
    /// Tools not listed that still run when called by their own name: those deferred behind
    /// `tool_search`/`call_tool` (G12), which models trained on other agents call directly.
    /// Such a call runs as it would through `call_tool`.
    pub unlisted: Vec<String>,
    /// Tools this server cannot offer, each with the sentence that says why (G11): a call to
    /// one is answered with it, instead of "unknown tool" and suggestions that do something
    /// else.
    pub not_offered: Vec<(String, String)>,
    /// The MCP annotations of listed tools that another MCP server serves (mounted tools,
    /// [`McpClient::annotations_of`](crate::McpClient::annotations_of)), listed as they are
    /// instead of being derived from the tool's effect: a read-only tool of another server may
    /// still reach the open world.
    pub annotations: std::collections::HashMap<String, rmcp::model::ToolAnnotations>,
}

impl Offering {
    /// The MCP `Tool`s `tools/list` answers with.
    fn listed(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .map(|spec| match self.annotations.get(&spec.name) {
                Some(hints) => mcp_tool(spec).with_annotations(hints.clone()),
                None => mcp_tool(spec),
            })
            .collect()
    }

    /// `tools` listed and run on `scheduler`, nothing unlisted or explained.
    pub fn new(scheduler: Scheduler, tools: Vec<ToolSpec>) -> Self {
        Self { scheduler, tools, unlisted: Vec::new(), not_offered: Vec::new(), annotations: Default::default() }
    }
}

/// What the server offers now: replaced as a whole when the tool list changes
/// ([`McpServer::follow`]), so a request works on one consistent list.
struct Offer {
    /// One stream per list: overlapping requests form one turn's calls (G1, G2, S4).
    calls: Arc<CallStream>,
    tools: Vec<Tool>,
    /// Names a call may use: the listed and the unlisted tools.
    offered: HashSet<String>,
    /// The listed names.
    listed: Vec<String>,
    /// Names the server cannot offer, with why.
    not_offered: std::collections::HashMap<String, String>,
    /// Names offered earlier and removed since: calls to them get "no longer offered".
    removed: HashSet<String>,
}

/// How the server learns of a changed tool list.
struct Follow {
    changes: tokio::sync::watch::Receiver<u64>,
    refresh: Box<dyn Fn() -> Offering + Send + Sync>,
}

/// An MCP server over a tool list, running calls through the scheduler.
pub struct McpServer {
    offer: Arc<RwLock<Arc<Offer>>>,
    /// The calls' context (events go to the client too).
    cx: ToolContext,
    /// Set by [`follow`](Self::follow); started once the client is connected.
    follow: Mutex<Option<Follow>>,
    /// Whether the tool list may change (the `tools.listChanged` capability).
    following: bool,
    /// Cancelled when the server is dropped: ends the follower.
    ended: CancellationToken,
    events: Arc<McpEvents>,
    next_id: Arc<AtomicU64>,
    instructions: Option<String>,
    /// Calls running now, shared by every session of an HTTP server (graceful shutdown waits
    /// for it to reach zero).
    in_flight: Option<Arc<AtomicUsize>>,
    /// While a call runs, ping the client this often: an HTTP session counts as idle when no
    /// message passes, and a long call must not make it expire.
    heartbeat: Option<std::time::Duration>,
    /// While a call whose request carries a progress token runs, tell the client this often
    /// that it still does ([`progress_every`](Self::progress_every)).
    progress_every: std::time::Duration,
    /// This client's requests being answered now: one that arrives while none is, or well
    /// after the last one arrived, starts a new message (R4).
    burst: Mutex<BurstState>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("tools", &self.offer().tools.len()).finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server offering `tools` (in this order) whose calls run on `scheduler` with `cx`.
    ///
    /// Calls to a name not in `tools` are refused even if the scheduler's registry has it, so a
    /// mode's policy cannot be bypassed. Events the calls emit go to `cx.events` and also to
    /// the MCP client as logging notifications.
    ///
    /// The client's requests sent together are one message of its model (R4: "already read
    /// in this message"); a request that arrives while none runs, or over 300 ms after the
    /// one before it, starts the next. An MCP client
    /// cannot say that it compacted its context, so the session's loop guard runs the repeat
    /// that follows an "unchanged" hint afresh ([`Session::set_compaction_unseen`], G15).
    ///
    /// [`Session::set_compaction_unseen`]: kodik_core::Session::set_compaction_unseen
    pub fn new(scheduler: Scheduler, cx: ToolContext, tools: Vec<ToolSpec>) -> Self {
        Self::offering(Offering::new(scheduler, tools), cx)
    }

    /// A server offering `offering` ([`new`](Self::new) with tools called by name though not
    /// listed, and reasons for those not offered).
    pub fn offering(offering: Offering, mut cx: ToolContext) -> Self {
        cx.session.set_compaction_unseen();
        let events = Arc::new(McpEvents::new(Arc::clone(&cx.events)));
        cx.events = events.clone();
        let offer = Offer::new(offering, &cx, HashSet::new());
        Self {
            offer: Arc::new(RwLock::new(Arc::new(offer))),
            cx,
            follow: Mutex::new(None),
            following: false,
            ended: CancellationToken::new(),
            events,
            next_id: Arc::new(AtomicU64::new(1)),
            instructions: None,
            in_flight: None,
            heartbeat: None,
            progress_every: PROGRESS_EVERY,
            burst: Mutex::new(BurstState { running: 0, last: std::time::Instant::now() }),
        }
    }

    /// Text the client may add to its model's system prompt (the harness's tool guidance).
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        let text = instructions.into();
        self.instructions = (!text.trim().is_empty()).then_some(text);
        self
    }

    /// How often a running call whose request carries a progress token sends
    /// `notifications/progress` ("still running (40 s)"), whether or not the tool reports
    /// progress of its own in between (default 20 s). Clients time out a request after a fixed wait unless progress resets it
    /// (the TypeScript SDK: 60 s, reset with `resetTimeoutOnProgress`, as opencode does): a
    /// `shell` call given a longer `timeout` was cancelled, and its command killed, at 60 s.
    pub fn progress_every(mut self, every: std::time::Duration) -> Self {
        self.progress_every = every.max(std::time::Duration::from_millis(10));
        self
    }

    /// Follows a tool list that changes while serving (a mounted MCP server's
    /// `tools/list_changed`): whenever `changes` sees a new value, `refresh` gives the
    /// offering in force now; the server offers them from its next request on,
    /// tells its client with `notifications/tools/list_changed`, and answers calls to removed
    /// tools with a "no longer offered" error. Calls already running finish on the old list.
    pub fn follow<F>(mut self, changes: tokio::sync::watch::Receiver<u64>, refresh: F) -> Self
    where
        F: Fn() -> Offering + Send + Sync + 'static,
    {
        if let Ok(mut follow) = self.follow.lock() {
            *follow = Some(Follow { changes, refresh: Box::new(refresh) });
        }
        self.following = true;
        self
    }

    fn offer(&self) -> Arc<Offer> {
        Arc::clone(&self.offer.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Starts following changes (once), now that `peer` can be told about them.
    fn start_following(&self, peer: rmcp::service::Peer<RoleServer>) {
        let Some(Follow { mut changes, refresh }) = self.follow.lock().ok().and_then(|mut f| f.take()) else {
            return;
        };
        let offer = Arc::clone(&self.offer);
        let cx = self.cx.clone();
        let ended = self.ended.clone();
        changes.borrow_and_update();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = ended.cancelled() => break,
                    changed = changes.changed() => if changed.is_err() { break },
                }
                let offering = refresh();
                let changed = {
                    let mut current = offer.write().unwrap_or_else(|p| p.into_inner());
                    let next = offering.listed();
                    let unlisted: HashSet<&String> = offering.unlisted.iter().collect();
                    let same_unlisted = current.offered.len() == current.listed.len() + unlisted.len()
                        && unlisted.iter().all(|n| current.offered.contains(*n));
                    if next == current.tools && same_unlisted {
                        false
                    } else {
                        let mut removed: HashSet<String> = current.removed.union(&current.offered).cloned().collect();
                        for name in offering.tools.iter().map(|t| &t.name).chain(&offering.unlisted) {
                            removed.remove(name);
                        }
                        // Calls running on the old stream keep it alive until they finish.
                        *current = Arc::new(Offer::new(offering, &cx, removed));
                        true
                    }
                };
                if changed && peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    /// Counts this server's running calls in `counter`.
    pub(crate) fn with_in_flight(mut self, counter: Arc<AtomicUsize>, heartbeat: std::time::Duration) -> Self {
        self.in_flight = Some(counter);
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Serves one client over this process's stdin/stdout until it disconnects. Must run
    /// inside a Tokio runtime with IO enabled.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        // Pipes (how MCP clients start servers) go through the IO reactor: no blocking-pool
        // hop per message, and no stdin read left pending that would hold up runtime shutdown.
        // Anything else falls back to the blocking handles.
        self.serve(rmcp::transport::stdio_pipes()).await
    }

    /// Serves one client over `transport` (any rmcp transport, e.g. a `tokio::io::duplex`
    /// half or a `(reader, writer)` pair) until it disconnects.
    pub async fn serve<T, E, A>(self, transport: T) -> Result<(), McpError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let running = self.start(transport).await?;
        running.waiting().await?;
        Ok(())
    }

    /// Completes the handshake over `transport` and returns the running service (its peer,
    /// `waiting()`, `cancel()`), for hosts that need to stop the server themselves.
    pub async fn start<T, E, A>(self, transport: T) -> Result<RunningService<RoleServer, Self>, McpError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let events = Arc::clone(&self.events);
        let running = ServiceExt::serve(self, InOrder::new(transport.into_transport())).await?;
        events.attach(running.peer().clone());
        Ok(running)
    }
}

impl Offer {
    fn new(offering: Offering, cx: &ToolContext, removed: HashSet<String>) -> Self {
        let mcp_tools = offering.listed();
        let Offering { scheduler, tools, unlisted, not_offered, .. } = offering;
        let listed: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        Self {
            calls: Arc::new(scheduler.stream(cx)),
            tools: mcp_tools,
            offered: listed.iter().chain(&unlisted).cloned().collect(),
            listed,
            not_offered: not_offered.into_iter().collect(),
            removed,
        }
    }

    fn refuse(&self, name: &str) -> kodik_core::ToolOutput {
        if let Some(why) = self.not_offered.get(name) {
            return kodik_core::ToolOutput::error(why.clone())
                .with_meta(serde_json::json!({"error_kind": "not_offered", "tool": name}));
        }
        if self.removed.contains(name) {
            return kodik_core::ToolOutput::error(format!(
                "`{name}` is no longer offered: the server's tool list changed (notifications/tools/list_changed). \
                 List the tools again and use one of those."
            ))
            .with_meta(serde_json::json!({"error_kind": "tool_removed", "tool": name}));
        }
        let suggestions = kodik_core::registry::closest(name, self.offered.iter().map(String::as_str), 3);
        ToolError::UnknownTool { name: name.to_owned(), suggestions }.into_output()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let caps = if self.following {
            ServerCapabilities::builder().enable_logging().enable_tools().enable_tool_list_changed().build()
        } else {
            ServerCapabilities::builder().enable_logging().enable_tools().build()
        };
        let config = ServerConfig::new(caps).with_server_info(Implementation::new("kodik", env!("CARGO_PKG_VERSION")));
        match &self.instructions {
            Some(text) => config.with_instructions(text.clone()),
            None => config,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.offer().tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _burst = Burst::enter(&self.burst, &self.cx.session);
        // Requests over a transport [`InOrder`] wraps carry their place in line: wait for the
        // request read before this one to register its call first (G2).
        let place = context.extensions.get::<Place>().cloned();
        if let Some(place) = &place {
            tokio::select! {
                _ = tokio::time::timeout(PLACE_WAIT, place.0.after.cancelled()) => {}
                () = context.ct.cancelled() => return Ok(call_result(ToolError::Cancelled.into_output()).into()),
            }
        }
        let name = request.name.into_owned();
        let offer = self.offer();
        if !offer.offered.contains(&name) {
            return Ok(call_result(offer.refuse(&name)).into());
        }
        let args = request.arguments.map(Value::Object).unwrap_or_else(|| Value::Object(Default::default()));
        let id = format!("mcp_{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let _progress = context.meta.get_progress_token().map(|token| {
            self.events.begin_progress(&id, token);
            EndProgress(&self.events, id.clone())
        });
        let _still_running = _progress.as_ref().map(|_| {
            let (events, peer, call_id, every) =
                (Arc::clone(&self.events), context.peer.clone(), id.clone(), self.progress_every);
            Heartbeat(tokio::spawn(async move {
                let started = std::time::Instant::now();
                let mut tick = tokio::time::interval(every);
                // After a stall (a loaded machine, a slow client), one note and the next a
                // whole interval later, not a burst of the ticks missed.
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let message = format!("still running ({} s)", started.elapsed().as_secs());
                    if events.send_progress(&peer, &call_id, message).await.is_err() {
                        break;
                    }
                }
            }))
        });
        let _running = self.in_flight.as_deref().map(Running::new);
        let _heartbeat = self.heartbeat.map(|every| {
            let peer = context.peer.clone();
            let origin = context.id.clone();
            Heartbeat(tokio::spawn(async move {
                use rmcp::model::GetExtensions as _;
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let mut ping = rmcp::model::ServerRequest::PingRequest(rmcp::model::PingRequest::default());
                    // On the call's own response stream (SEP-2260): rmcp's task-local link to
                    // the request does not cross this spawn, and without it the ping takes the
                    // optional GET stream — a client that never opened one got no ping, its
                    // session expired mid-call and the call was killed.
                    ping.extensions_mut().insert(rmcp::service::OriginatingRequestId(origin.clone()));
                    // Sending is what keeps the session alive; the answer (a client may give
                    // none) is not waited for, so one unanswered ping stops no later one.
                    let options = rmcp::service::PeerRequestOptions::with_timeout(every);
                    if peer.send_request_with_option(ping, options).await.is_err() {
                        break;
                    }
                }
            }))
        });
        let call = ToolCall::new(id, name, args);
        let started = offer.calls.start(call);
        if let Some(place) = &place {
            place.0.done.cancel();
        }
        // rmcp cancels the request's token when the client sends notifications/cancelled: the
        // client withdrew the call, so it is given up for good and what it started stops too
        // (G6) — a bare cancellation would only end a command's wait and leave it running
        // unseen, since the reply that would name its terminal is never delivered.
        let abandon = started.abandon_handle();
        let mut out = tokio::select! {
            out = started.output() => out,
            () = context.ct.cancelled() => {
                abandon.abandon();
                ToolError::Cancelled.into_output()
            }
        };
        self.cx.session.explain_repeat(&mut out);
        let mut result = call_result(out);
        // Background commands that ended meanwhile: the model sees them here even when its
        // client ignores logging notifications. A cancelled request's reply is never
        // delivered, so its events wait for the next one.
        if !context.ct.is_cancelled() {
            for ev in self.events.take_pending() {
                result.content.push(ContentBlock::text(terminal_note(&ev)));
            }
            set_structured_output(&mut result);
        }
        Ok(result.into())
    }

    /// rmcp hands a request whose params do not fit its method's type over as a custom request:
    /// for a method MCP defines that means invalid params (-32602), not an unknown method. A
    /// `tools/call` naming a tool with `arguments` that are not an object gets an `isError`
    /// result the model can act on, as other invalid arguments do.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let CustomRequest { method, params, .. } = request;
        if method != "tools/call" {
            return Err(if KNOWN_METHODS.contains(&method.as_str()) {
                ErrorData::invalid_params(format!("the params of `{method}` do not fit its MCP schema"), None)
            } else {
                ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("unknown method `{method}`"), None)
            });
        }
        let params = params.unwrap_or(Value::Null);
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(ErrorData::invalid_params(
                "`tools/call` needs params {\"name\": the tool's name (a string), \"arguments\": an object}",
                None,
            ));
        };
        let given = match params.get("arguments") {
            Some(Value::String(_)) => "a string",
            Some(Value::Array(_)) => "an array",
            Some(Value::Number(_)) => "a number",
            Some(Value::Bool(_)) => "a boolean",
            _ => {
                return Err(ErrorData::invalid_params(
                    "the params of `tools/call` do not fit its MCP schema: {\"name\": string, \"arguments\": object}",
                    None,
                ));
            }
        };
        let out = ToolError::InvalidInput {
            tool: name.to_owned(),
            field: Some("arguments".into()),
            message: format!("`arguments` must be a JSON object of the tool's parameters, not {given}"),
        }
        .into_output();
        serde_json::to_value(call_result(out))
            .map(CustomResult)
            .map_err(|e| ErrorData::internal_error(format!("the result could not be written: {e}"), None))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.events.set_level(request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.start_following(context.peer.clone());
        self.events.attach(context.peer);
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // The session is over: stop whatever its calls still run, and stop following.
        self.ended.cancel();
        self.offer().calls.cancel_all();
    }
}

/// The request methods this server answers: params that do not fit one of them are invalid
/// params, any other method is unknown.
const KNOWN_METHODS: [&str; 5] = ["initialize", "ping", "tools/list", "tools/call", "logging/setLevel"];

/// Stops progress notifications for a call when its request ends (also when cancelled).
struct EndProgress<'a>(&'a McpEvents, String);

impl Drop for EndProgress<'_> {
    fn drop(&mut self) {
        self.0.end_progress(&self.1);
    }
}

/// Counts one running call until dropped.
struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How long after a request another one may arrive and still be part of the same message of
/// the client's model. A model's parallel calls are sent one right after another; a model
/// cannot send its next message while its calls still run, so a request that comes later while
/// others run is another agent's (sub-agents sharing one connection) and must not hear that a
/// file was "already read in this message" by someone else (R4).
const JOIN_WINDOW: std::time::Duration = std::time::Duration::from_millis(300);

/// The requests of a client being answered now, and when the last one arrived.
struct BurstState {
    running: usize,
    last: std::time::Instant,
}

/// One request's share of its client's current message: the first of a burst of requests sent
/// together starts a new message (R4), the others join it.
struct Burst<'a>(&'a Mutex<BurstState>);

impl<'a> Burst<'a> {
    fn enter(state: &'a Mutex<BurstState>, session: &kodik_core::Session) -> Self {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if s.running == 0 || now.duration_since(s.last) > JOIN_WINDOW {
            session.next_message();
        }
        s.running += 1;
        s.last = now;
        Self(state)
    }
}

impl Drop for Burst<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.running = s.running.saturating_sub(1);
    }
}

/// How often a call whose request carries a progress token says it still runs
/// ([`McpServer::progress_every`]): three times in the TypeScript SDK's 60 s request timeout.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(20);

/// Stops a call's heartbeat (pings, or progress) when the call ends.
struct Heartbeat(tokio::task::JoinHandle<()>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The longest a `tools/call` request waits for the one read before it to register its call.
/// That takes microseconds (the earlier request's task only has to be polled once), and a
/// request that ends another way releases its place when dropped; the bound is a last resort
/// against a place never released, so an order lost under extreme load is the worst outcome,
/// never a stalled session.
const PLACE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A transport that gives each `tools/call` request, as it is read (one at a time, in the
/// client's order), its [`Place`] in line. rmcp runs every request in a task of its own, and
/// those tasks first run in any order; the place is what makes calls on one file or the
/// browser session run in the order the client sent them (G2), as `kodik batch` does.
struct InOrder<T> {
    inner: T,
    /// Released once the last request read registered its call.
    last: CancellationToken,
}

impl<T> InOrder<T> {
    fn new(inner: T) -> Self {
        let last = CancellationToken::new();
        last.cancel();
        Self { inner, last }
    }
}

/// A `tools/call` request's place in line (in its request's extensions, which rmcp hands to
/// [`ServerHandler::call_tool`] as `context.extensions`).
#[derive(Clone)]
struct Place(Arc<PlaceTokens>);

struct PlaceTokens {
    /// Released when the request before registered its call (or ended without one).
    after: CancellationToken,
    /// Released when this request registered its call.
    done: CancellationToken,
}

impl Drop for PlaceTokens {
    /// A request cancelled or dropped before its call registered gives up its place, but the
    /// request behind it still waits for the one ahead of it.
    fn drop(&mut self) {
        if self.done.is_cancelled() {
            return;
        }
        let (after, done) = (self.after.clone(), self.done.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !after.is_cancelled() => {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(PLACE_WAIT, after.cancelled()).await;
                    done.cancel();
                });
            }
            _ => done.cancel(),
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for InOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await?;
        if let JsonRpcMessage::Request(JsonRpcRequest { request: ClientRequest::CallToolRequest(call), .. }) =
            &mut message
        {
            let done = CancellationToken::new();
            let after = std::mem::replace(&mut self.last, done.clone());
            call.extensions.insert(Place(Arc::new(PlaceTokens { after, done })));
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
