//! The MCP client: other servers' tools as Kodik tools (A8, G13).
//!
//! Each configured server is started (stdio: a child process in its own process group) and
//! initialized with a deadline; its tools become [`McpTool`]s named `server__tool`. A call
//! that is cancelled or runs past its timeout is abandoned with `notifications/cancelled`.
//! A server that dies fails the calls it was running with an error naming it, and is started
//! again for the next call, a bounded number of times.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kodik_core::{Content, Effect, Event, EventSink, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, ToolStatus};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ContentBlock, Implementation, JsonObject, NumberOrString,
    ProgressNotificationParam, ProgressToken, RequestId, ResourceContents, ServerResult, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RunningService, ServiceError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::config::{McpConfig, ServerConfig};

/// How long to wait for servers, and how often to start a dead one again.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The longest wait for a server's `initialize` answer (default 30 s).
    pub init_timeout: Duration,
    /// The longest wait for one tool call (default 10 min); then it is cancelled and
    /// reported as `timed_out`.
    pub call_timeout: Duration,
    /// How many times a server that died is started again (default 1).
    pub max_restarts: u32,
    /// The folder stdio servers without a `cwd` run in, and a relative `cwd` is taken from
    /// (the workspace root).
    pub base_dir: Option<std::path::PathBuf>,
    /// Variables left out of stdio servers' environment unless a server's `env` names them
    /// (e.g. `"OPENAI_API_KEY": "${OPENAI_API_KEY}"`): a host's own secrets, such as the model
    /// provider's API key, which a third-party server could otherwise return to the model.
    pub unset_env: Vec<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            init_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(600),
            max_restarts: 1,
            base_dir: None,
            unset_env: Vec::new(),
        }
    }
}

/// A server's input schema as model providers take it, with the tool's description. Anthropic
/// refuses a whole request (every tool, every turn) over one tool whose schema lacks
/// `"type": "object"` or has `anyOf`/`oneOf`/`allOf` at its top level, which MCP servers send (an
/// empty `{}` for a tool without arguments; "give `paths` or `scopes`"). The type is added, and
/// each such top-level combination is taken out of the schema and told in the description, so
/// the model still knows it; the server checks the arguments as before.
fn model_schema(mut schema: JsonObject, description: &str) -> (Value, String) {
    let mut description = description.to_owned();
    if !schema.contains_key("type") {
        schema.insert("type".into(), json!("object"));
    }
    for (key, meaning) in [("anyOf", "at least one of"), ("oneOf", "exactly one of"), ("allOf", "all of")] {
        if let Some(parts) = schema.remove(key) {
            if !description.is_empty() {
                description.push_str("\n\n");
            }
            description.push_str(&format!("The arguments must match {meaning} these JSON schemas: {parts}"));
        }
    }
    (Value::Object(schema), description)
}

/// Why an HTTP server's handshake failed, in terms of what to fix: a 401 names the header to
/// check, a refused connection says nothing is listening, a 404 or 405 says the URL is no MCP
/// endpoint (an old SSE one, when it ends in `/sse`); anything else is rmcp's reason.
fn http_init_message(e: &rmcp::service::ClientInitializeError, url: &str) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let rmcp::service::ClientInitializeError::TransportError { error, .. } = e else {
        return e.to_string();
    };
    match error.error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::AuthRequired(auth)) => {
            let challenge = auth.www_authenticate_header.trim();
            let challenge = if challenge.is_empty() { String::new() } else { format!(" ({challenge})") };
            format!(
                "{url} answered HTTP 401 Unauthorized{challenge}: give it a valid token in the server's `headers` \
                 (\"Authorization\": \"Bearer …\") in its mcp.json"
            )
        }
        Some(StreamableHttpError::Client(re)) if re.is_connect() => {
            format!(
                "nothing answered at {url} (the connection was refused or could not be made): is the server running?"
            )
        }
        Some(StreamableHttpError::Client(re)) if re.is_timeout() => format!("{url} did not answer in time"),
        // "HTTP 404 Not Found: <!DOCTYPE html>…" (an Express app's "Cannot POST /sse"), inside
        // rmcp's transport type names: the URL is no streamable-HTTP endpoint.
        Some(StreamableHttpError::UnexpectedServerResponse(response)) => {
            let (status, body) = response.split_once(": ").unwrap_or((response.as_ref(), ""));
            let body: String = body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
            let mut message = format!("{url} answered {status} to MCP's `initialize` POST");
            if !body.is_empty() {
                message.push_str(&format!(" ({body})"));
            }
            if status.starts_with("HTTP 404") || status.starts_with("HTTP 405") {
                message.push_str(": it is not a streamable-HTTP MCP endpoint; check the path in `url` (often `/mcp`)");
                if url.trim_end_matches('/').ends_with("/sse") {
                    message.push_str(
                        ". A URL ending in `/sse` is the old HTTP+SSE transport, which kodik does not support: use \
                         the server's streamable-HTTP URL",
                    );
                }
            }
            message
        }
        _ => e.to_string(),
    }
}

/// The environment variable that tells a process how many MCP clients started it as a
/// server, one inside the other: a stdio server gets this process's depth plus one.
pub const DEPTH_VAR: &str = "KODIK_MCP_DEPTH";

/// From this depth on, a client starts no servers: a Kodik that mounts itself (a `kodik serve`
/// in its own `mcp.json`) would otherwise nest servers without end.
pub const MAX_DEPTH: u32 = 2;

/// This process's depth ([`DEPTH_VAR`]; 0 when it was not started as an MCP server by a client).
fn own_depth() -> u32 {
    std::env::var(DEPTH_VAR).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// This process is itself a server [`MAX_DEPTH`] levels below other clients.
    #[error(
        "MCP server `{server}` was not started: this process is itself an MCP server {depth} levels below other \
         MCP clients ({DEPTH_VAR}={depth}), and starting more would nest servers without end (is a `kodik serve` \
         mounting itself?)"
    )]
    TooDeep {
        /// The server's name.
        server: String,
        /// This process's depth.
        depth: u32,
    },
    /// The program could not be started.
    #[error("MCP server `{server}`: cannot start `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server did not answer `initialize` in time.
    #[error("MCP server `{server}` did not answer `initialize` within {secs} s{stderr}")]
    InitTimeout {
        /// The server's name.
        server: String,
        /// The deadline.
        secs: u64,
        /// The server's last stderr lines, if any.
        stderr: String,
    },
    /// The handshake failed (the server exited, or answered with an error).
    #[error("MCP server `{server}` failed its handshake: {message}{stderr}")]
    Initialize {
        /// The server's name.
        server: String,
        /// rmcp's reason.
        message: String,
        /// The server's last stderr lines, if any.
        stderr: String,
    },
    /// `tools/list` failed.
    #[error("MCP server `{server}` could not list its tools: {message}")]
    ListTools {
        /// The server's name.
        server: String,
        /// rmcp's reason.
        message: String,
    },
    /// The configuration asks for a transport this build does not have.
    #[error("MCP server `{server}`: {message}")]
    Unsupported {
        /// The server's name.
        server: String,
        /// What is missing.
        message: String,
    },
}

/// The last lines a server wrote to stderr, for error messages.
#[derive(Default)]
struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    const LINES: usize = 20;

    fn push(&self, line: String) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() == Self::LINES {
                q.pop_front();
            }
            q.push_back(line);
        }
    }

    fn render(&self) -> String {
        match self.0.lock() {
            Ok(q) if !q.is_empty() => {
                format!("; its stderr ended with:\n{}", q.iter().cloned().collect::<Vec<_>>().join("\n"))
            }
            _ => String::new(),
        }
    }
}

/// What the connection's handler shares with the server handle.
struct Shared {
    /// The server's current tool list (refreshed on `tools/list_changed`).
    tools: RwLock<Vec<rmcp::model::Tool>>,
    /// Bumped on every refresh.
    generation: tokio::sync::watch::Sender<u64>,
    /// The client's count, bumped on every server's refresh.
    client_generation: Arc<tokio::sync::watch::Sender<u64>>,
    /// Where the progress of each running call goes.
    progress: Mutex<Progress>,
    /// The `instructions` of the server's last `initialize` answer.
    instructions: RwLock<Option<String>>,
    /// Where the server's log messages go.
    logs: crate::logs::ServerLogs,
    /// The tools it runs only as tasks, read from its raw `tools/list` answers.
    tasks: crate::tasks::TaskOnly,
    /// The task-only tools already reported as left out.
    withheld: Mutex<HashSet<String>>,
}

/// The event sink and call id a running call's progress goes to.
type ProgressTarget = (Arc<dyn EventSink>, String);

/// How long, and how many, progress notifications of a token no call has claimed yet are kept.
const EARLY_PROGRESS_FOR: Duration = Duration::from_secs(10);
const EARLY_PROGRESS_MAX: usize = 64;

/// The running calls' progress targets, and the notifications that came first.
#[derive(Default)]
struct Progress {
    /// By the progress token each call's request carries.
    targets: HashMap<String, ProgressTarget>,
    /// Notifications for a token no call has claimed yet (token, when, message): rmcp gives
    /// out a request's token only once the request is on its way, and a quick server can
    /// report its first step before the call has claimed it. Claimed, they go out first.
    early: std::collections::VecDeque<(String, Instant, String)>,
}

impl Progress {
    /// Sends `message` to the call with `token`, or keeps it for a call yet to claim it.
    fn report(&mut self, token: String, message: String) {
        match self.targets.get(&token) {
            Some((events, call_id)) => events.emit(Event::Progress { call_id: call_id.clone(), message }),
            None => {
                let now = Instant::now();
                self.early.retain(|(_, at, _)| now.duration_since(*at) < EARLY_PROGRESS_FOR);
                if self.early.len() == EARLY_PROGRESS_MAX {
                    self.early.pop_front();
                }
                self.early.push_back((token, now, message));
            }
        }
    }

    /// Sends what came for `token` so far to `target`, and the rest of its progress from now on.
    /// Under the same lock as [`report`](Self::report), so the steps keep their order.
    fn claim(&mut self, token: String, target: ProgressTarget) {
        let (events, call_id) = &target;
        for (t, at, message) in std::mem::take(&mut self.early) {
            if t == token {
                events.emit(Event::Progress { call_id: call_id.clone(), message });
            } else {
                self.early.push_back((t, at, message));
            }
        }
        self.targets.insert(token, target);
    }
}

impl Shared {
    fn set_tools(&self, tools: Vec<rmcp::model::Tool>) {
        if let Ok(mut t) = self.tools.write() {
            *t = tools;
        }
        self.generation.send_modify(|g| *g += 1);
        self.client_generation.send_modify(|g| *g += 1);
    }

    /// Sends the server's progress notifications carrying `token` to `cx`'s events until the
    /// returned guard drops.
    fn track_progress(self: &Arc<Self>, token: &ProgressToken, cx: &ToolContext) -> ProgressGuard {
        let token = token_key(token);
        if let Ok(mut progress) = self.progress.lock() {
            progress.claim(token.clone(), (Arc::clone(&cx.events), cx.call_id.clone()));
        }
        ProgressGuard { shared: Arc::clone(self), token }
    }

    fn offers(&self, remote: &str) -> bool {
        self.tools.read().map(|t| t.iter().any(|tool| tool.name == remote)).unwrap_or(true)
    }
}

/// Stops forwarding a call's progress when the call ends (also when it is cancelled): the
/// spec forbids progress after the response, and a late one must not reach another call.
struct ProgressGuard {
    shared: Arc<Shared>,
    token: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        if let Ok(mut progress) = self.shared.progress.lock() {
            progress.targets.remove(&self.token);
        }
    }
}

/// A progress token as a map key (`7` and `"7"` are different tokens).
fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::String(s) => format!("s:{s}"),
        NumberOrString::Number(n) => format!("n:{n}"),
    }
}

/// `tools/call` as rmcp's `call_tool_once` sends it, keeping the progress token rmcp puts on
/// every request (servers report progress only on a request that carries one: server-everything's
/// long-running operation, builds, crawls), so that progress goes to the call's events, which
/// `kodik serve` passes on to its own client. Dropped before the answer
/// (timeout, cancellation), it sends `notifications/cancelled`.
async fn call_tool(
    peer: &Peer<RoleClient>,
    shared: &Arc<Shared>,
    cx: &ToolContext,
    params: CallToolRequestParams,
) -> Result<CallToolResponse, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer.send_request_with_option(request, PeerRequestOptions::no_options()).await?;
    // A notification that arrives before this line is kept until the token is claimed here.
    let _progress = shared.track_progress(&handle.progress_token, cx);
    let mut abandon = Abandon { peer: peer.clone(), id: Some(handle.id.clone()) };
    let answer = handle.await_response().await;
    abandon.id = None;
    match answer? {
        ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => Ok(CallToolResponse::InputRequired(result)),
        ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
        // A result with no content at all (rmcp's `call_tool_once` reads it the same way).
        ServerResult::EmptyResult(_) => Ok(CallToolResponse::Complete(CallToolResult::default())),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Tells the server a request was given up when the future waiting for it is dropped.
struct Abandon {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let (Some(id), Ok(runtime)) = (self.id.take(), tokio::runtime::Handle::try_current()) else { return };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let reason = Some("request abandoned by the caller".to_owned());
            // The server may be gone already; then there is nothing to cancel.
            let _ = peer.notify_cancelled(CancelledNotificationParam::new(Some(id), reason)).await;
        });
    }
}

/// A server's `notifications/progress` as the line a user (and a `kodik serve` client) sees:
/// its message, and how far along it is (`3/5`, or `3` without a total).
fn progress_message(p: &ProgressNotificationParam) -> String {
    let number = |n: f64| if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n}") };
    let step = match p.total {
        Some(total) => format!("{}/{}", number(p.progress), number(total)),
        None => number(p.progress),
    };
    match p.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => format!("{m} ({step})"),
        _ => format!("progress {step}"),
    }
}

/// The level of log messages asked of a server that declares `logging`: until a client sends
/// `logging/setLevel` a server "MAY decide which messages to send", and server-everything then
/// sends only its emergency-level ones.
#[allow(deprecated)] // MCP logging: deprecated by draft SEP-2577, used by 2025 servers.
const LOG_LEVEL: rmcp::model::LoggingLevel = rmcp::model::LoggingLevel::Info;

/// Sends `logging/setLevel` ([`LOG_LEVEL`]) to a server that declares `logging`, without
/// waiting for the answer: its log messages are for the user ([`crate::logs`]), and a server that
/// refuses the request still works.
#[allow(deprecated)] // MCP logging: deprecated by draft SEP-2577, used by 2025 servers.
fn ask_for_logs(peer: &Peer<RoleClient>) {
    if peer.peer_info().is_none_or(|info| info.capabilities.logging.is_none()) {
        return;
    }
    let peer = peer.clone();
    tokio::spawn(async move {
        if let Err(e) = peer.set_level(rmcp::model::SetLevelRequestParams::new(LOG_LEVEL)).await {
            tracing::debug!("an MCP server refused logging/setLevel: {e}");
        }
    });
}

/// The rmcp client handler: identifies as kodik, follows `tools/list_changed`, passes
/// progress on to the call it belongs to and log messages to the user ([`crate::logs`]).
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("kodik", env!("CARGO_PKG_VERSION")))
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        // A token of no running call is kept briefly: its call may not have claimed it yet.
        // One whose call ended (or that the server made up) is dropped when it ages out.
        if let Ok(mut progress) = self.shared.progress.lock() {
            progress.report(token_key(&params.progress_token), progress_message(&params));
        }
    }

    // Deprecated by draft SEP-2577; servers of the 2025 protocol versions still log this way.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.shared.logs.deliver(&params);
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // The handler runs on the connection's loop: the request goes out from a task so the
        // loop can read its answer.
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            match context.peer.list_all_tools().await {
                Ok(tools) => shared.set_tools(tools),
                Err(e) => tracing::warn!("refreshing an MCP server's tools after list_changed failed: {e}"),
            }
        });
    }
}

type Service = RunningService<RoleClient, Handler>;

/// One configured server and its current connection.
struct Server {
    name: String,
    config: ServerConfig,
    options: ClientOptions,
    shared: Arc<Shared>,
    stderr: Arc<StderrTail>,
    conn: tokio::sync::Mutex<Option<Service>>,
    restarts: AtomicU32,
    /// The process group of the running stdio server (0: none).
    pgid: AtomicI32,
    /// Why kodik closed the connection itself, when it did (a message too long to read).
    close_reason: crate::child::CloseReason,
}

impl Server {
    /// Connects and initializes the server, keeping the `instructions` it answered with.
    async fn start(&self) -> Result<Service, ClientError> {
        let service = self.connect().await?;
        let instructions = service.peer().peer_info().and_then(|info| info.instructions.clone());
        *self.shared.instructions.write().unwrap_or_else(|p| p.into_inner()) = instructions;
        ask_for_logs(service.peer());
        Ok(service)
    }

    async fn connect(&self) -> Result<Service, ClientError> {
        let handler = Handler { shared: Arc::clone(&self.shared) };
        let server = self.name.clone();
        let init_failed = |e: &rmcp::service::ClientInitializeError| ClientError::Initialize {
            server: server.clone(),
            message: e.to_string(),
            stderr: self.stderr.render(),
        };
        let timed_out = || ClientError::InitTimeout {
            server: self.name.clone(),
            secs: self.options.init_timeout.as_secs(),
            stderr: self.stderr.render(),
        };
        if let Some(command) = &self.config.command {
            let mut cmd = tokio::process::Command::new(command);
            // Removed first: the server's own `env` may set the same name again.
            for name in &self.options.unset_env {
                cmd.env_remove(name);
            }
            cmd.args(&self.config.args).envs(&self.config.env).env(DEPTH_VAR, (own_depth() + 1).to_string());
            // Without a `cwd` the server runs in the workspace, as in Claude Code and Cursor (a
            // `node server.js` of the project's own config finds its file), not wherever the
            // host was started.
            match (&self.config.cwd, &self.options.base_dir) {
                (Some(cwd), Some(base)) if cwd.is_relative() => cmd.current_dir(base.join(cwd)),
                (Some(cwd), _) => cmd.current_dir(cwd),
                (None, Some(base)) => cmd.current_dir(base),
                (None, None) => &mut cmd,
            };
            let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
            // Its own process group: killing the server also kills what it started.
            wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
            wrap.wrap(process_wrap::tokio::KillOnDrop);
            if let Ok(mut reason) = self.close_reason.lock() {
                *reason = None;
            }
            let sniffer = crate::tasks::LineSniffer::new(self.shared.tasks.clone());
            let (transport, stderr) = crate::child::ServerProcess::spawn(wrap, Arc::clone(&self.close_reason), sniffer)
                .map_err(|source| ClientError::Spawn { server: self.name.clone(), command: command.clone(), source })?;
            // The leader's pid is its group's id.
            self.pgid.store(transport.id().and_then(|id| i32::try_from(id).ok()).unwrap_or(0), Ordering::Relaxed);
            if let Some(stderr) = stderr {
                let tail = Arc::clone(&self.stderr);
                let name = self.name.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(target: "kodik_mcp::server_stderr", server = %name, "{line}");
                        tail.push(line);
                    }
                });
            }
            // Dropping the transport on a timeout kills the child.
            return match tokio::time::timeout(self.options.init_timeout, handler.serve(transport)).await {
                Ok(Ok(service)) => Ok(service),
                Ok(Err(e)) => Err(init_failed(&e)),
                Err(_) => Err(timed_out()),
            };
        }
        match &self.config.url {
            Some(url) => self.start_http(handler, url).await.map_err(|e| match e {
                HttpStartError::Init(e) => ClientError::Initialize {
                    server: self.name.clone(),
                    message: http_init_message(&e, url),
                    stderr: String::new(),
                },
                HttpStartError::Timeout => timed_out(),
                HttpStartError::Other(message) => ClientError::Unsupported { server: self.name.clone(), message },
            }),
            None => {
                Err(ClientError::Unsupported { server: self.name.clone(), message: "needs `command` or `url`".into() })
            }
        }
    }

    async fn start_http(&self, handler: Handler, url: &str) -> Result<Service, HttpStartError> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        // reqwest is built without a default TLS provider; ring is the one the workspace uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        let mut headers = std::collections::HashMap::new();
        for (name, value) in &self.config.headers {
            // rmcp sends the bearer token itself and refuses `Authorization` among custom headers.
            if name.eq_ignore_ascii_case("authorization") {
                let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).unwrap_or(value);
                config = config.auth_header(token.to_owned());
                continue;
            }
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| HttpStartError::Other(format!("header name `{name}` is not valid: {e}")))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|e| HttpStartError::Other(format!("the value of header `{name}` is not valid: {e}")))?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| HttpStartError::Other(format!("cannot build the HTTP client: {e}")))?;
        let client = crate::tasks::SniffingHttp { client, tasks: self.shared.tasks.clone() };
        let transport = StreamableHttpClientTransport::with_client(client, config.custom_headers(headers));
        match tokio::time::timeout(self.options.init_timeout, handler.serve(transport)).await {
            Ok(Ok(service)) => Ok(service),
            Ok(Err(e)) => Err(HttpStartError::Init(Box::new(e))),
            Err(_) => Err(HttpStartError::Timeout),
        }
    }

    /// Lists the server's tools, bounded like `initialize` ([`ClientOptions::init_timeout`]): a
    /// server that answers `initialize` and never `tools/list` would otherwise hold up every
    /// command that mounts it.
    async fn list_tools(&self, service: &Service) -> Result<(), ClientError> {
        let failed = |message: String| ClientError::ListTools {
            server: self.name.clone(),
            message: format!("{message}{}", self.stderr.render()),
        };
        let tools = match tokio::time::timeout(self.options.init_timeout, service.peer().list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Err(_) => {
                return Err(failed(format!(
                    "no answer to `tools/list` within {} s",
                    self.options.init_timeout.as_secs()
                )));
            }
        };
        self.shared.set_tools(tools);
        Ok(())
    }

    /// Leaves out a tool the server runs only as a task, saying so once per tool.
    fn withhold(&self, tool: &str) {
        let first = self.shared.withheld.lock().unwrap_or_else(|p| p.into_inner()).insert(tool.to_owned());
        if first {
            tracing::warn!(
                server = %self.name,
                tool,
                "MCP server `{}` offers `{tool}` only as a task (execution.taskSupport: \"required\"), and kodik \
                 cannot call tools as tasks: it is not offered to the model",
                self.name
            );
        }
    }

    /// Kills what is left of a stdio server's process group. Closing the connection ends the
    /// server itself, but what it started (a browser, `npx` children) stays in its group, and
    /// once the leader has exited nothing else signals that group.
    fn kill_group(&self) {
        let pgid = self.pgid.swap(0, Ordering::Relaxed);
        if let Some(pgid) = rustix::process::Pid::from_raw(pgid) {
            // ESRCH: the group is already empty.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    /// The live connection's peer; a dead server is started again while restarts remain.
    async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let mut conn = self.conn.lock().await;
        if let Some(service) = conn.as_ref()
            && !service.is_closed()
            && !service.peer().is_transport_closed()
        {
            return Ok(service.peer().clone());
        }
        let done = self.restarts.load(Ordering::Relaxed);
        if done >= self.options.max_restarts {
            return Err(format!(
                "MCP server `{}` has stopped and was already restarted {done} time(s); it is not started again{}",
                self.name,
                self.stderr.render()
            ));
        }
        self.restarts.store(done + 1, Ordering::Relaxed);
        tracing::warn!(server = %self.name, "MCP server stopped; starting it again");
        conn.take();
        self.kill_group();
        let service =
            self.start().await.map_err(|e| format!("MCP server `{}` stopped; restarting it failed: {e}", self.name))?;
        self.list_tools(&service).await.map_err(|e| e.to_string())?;
        let peer = service.peer().clone();
        *conn = Some(service);
        Ok(peer)
    }

    async fn call(&self, tool: &str, args: Value, cx: &ToolContext) -> ToolOutput {
        let cancel = &cx.cancel;
        let limit = self.config.timeout.map(Duration::from_millis).unwrap_or(self.options.call_timeout);
        let meta = || json!({"server": self.name, "tool": tool});
        let peer = match self.peer().await {
            Ok(p) => p,
            Err(msg) => {
                return ToolOutput::error(msg)
                    .with_meta(json!({"server": self.name, "tool": tool, "error_kind": "mcp_server_unavailable"}));
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        match args {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            other => return not_an_object(tool, &other).into_output(),
        }
        // The server's log messages go to this call's events until it ends (links read too).
        let _logs = self.shared.logs.track(cx);
        // Dropping the request (timeout, cancellation) sends notifications/cancelled.
        let request = call_tool(&peer, &self.shared, cx, params);
        let answer = tokio::select! {
            a = tokio::time::timeout(limit, request) => a,
            () = cancel.cancelled() => return ToolError::Cancelled.into_output().with_meta(meta()),
        };
        match answer {
            // The server has answered: the call's limit is met, and what follows its links is
            // bounded on its own, so a slow link never turns a done call into a timed-out one.
            Ok(Ok(CallToolResponse::Complete(mut result))) => {
                follow_links(&peer, &mut result, cancel).await;
                result_output(result, &self.name, tool)
            }
            Ok(Ok(_)) => ToolOutput::error(format!(
                "MCP server `{}` answered `{tool}` with a task or an input request, which kodik does not support",
                self.name
            ))
            .with_meta(meta()),
            Ok(Err(ServiceError::McpError(e))) => {
                ToolOutput::error(format!("MCP server `{}` refused `{tool}`: {}", self.name, e.message))
                    .with_meta(meta())
            }
            Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                let again = if self.restarts.load(Ordering::Relaxed) < self.options.max_restarts {
                    "it is started again for the next call"
                } else {
                    "it is not started again"
                };
                let why = self.close_reason.lock().ok().and_then(|r| r.clone());
                let what = match why {
                    Some(why) => {
                        format!("MCP server `{}` was disconnected during the call to `{tool}`: {why}", self.name)
                    }
                    None => format!("MCP server `{}` stopped during the call to `{tool}` ({e})", self.name),
                };
                ToolOutput::error(format!("{what}; {again}{}", self.stderr.render()))
                    .with_meta(json!({"server": self.name, "tool": tool, "error_kind": "mcp_server_stopped"}))
            }
            Ok(Err(e)) => ToolOutput::error(format!("MCP call `{}__{tool}` failed: {e}", self.name)).with_meta(meta()),
            Err(_) => ToolOutput::with_status(
                ToolStatus::TimedOut,
                format!(
                    "MCP server `{}` did not answer `{tool}` within {} s; the call was cancelled",
                    self.name,
                    limit.as_secs_f64()
                ),
            )
            .with_meta(meta()),
        }
    }
}

enum HttpStartError {
    Init(Box<rmcp::service::ClientInitializeError>),
    Timeout,
    Other(String),
}

/// The largest `structuredContent` kept in a result's `meta` (its JSON's bytes), as large as
/// the text the scheduler lets through by default; a larger one is left out and its size given
/// as `structured_content_bytes` (when the server sent no other content it is the text, which
/// is cut and saved in full like any other).
const MAX_STRUCTURED_META: usize = 100_000;

/// An MCP result as a Kodik output, raw text untouched (G8): text blocks as they are, images
/// as images, embedded text resources (and blobs that hold text) as their text, other blocks as
/// a one-line note;
/// `isError` → `error`; `structuredContent` in `meta.structured_content` up to 100 000 bytes
/// of JSON, else only its size as `structured_content_bytes` (and as the text when the server
/// sent no content).
pub fn result_output(result: CallToolResult, server: &str, tool: &str) -> ToolOutput {
    let mut content = Vec::new();
    let mut resources = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(t) => content.push(Content::Text { text: t.text }),
            ContentBlock::Image(i) => {
                content.push(crate::images::model_image(i.data, i.mime_type));
            }
            ContentBlock::Audio(a) => {
                content.push(Content::text(format!("[audio {}, {} bytes of base64]", a.mime_type, a.data.len())));
            }
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { uri, text, mime_type, .. } => {
                    resources.push(json!({"uri": uri, "mime_type": mime_type}));
                    content.push(Content::Text { text });
                }
                ResourceContents::BlobResourceContents { uri, blob, mime_type, .. } => {
                    resources.push(json!({"uri": uri, "mime_type": mime_type}));
                    match mime_type {
                        Some(m) if m.starts_with("image/") => content.push(crate::images::model_image(blob, m)),
                        m => match blob_text(&blob, m.as_deref()) {
                            Some(text) => content.push(Content::Text { text }),
                            None => content.push(Content::text(format!(
                                "[resource {uri} ({}), {} bytes of base64]",
                                m.as_deref().unwrap_or("unknown type"),
                                blob.len()
                            ))),
                        },
                    }
                }
                _ => content.push(Content::text("[a resource of a kind this kodik does not know]")),
            },
            ContentBlock::ResourceLink(link) => {
                resources.push(json!({"uri": link.uri, "mime_type": link.mime_type}));
                content.push(Content::text(format!("[resource link {} ({})]", link.uri, link.name)));
            }
            _ => content.push(Content::text("[a content block of a kind this kodik does not know]")),
        }
    }
    // A link read right after it names its resource twice.
    let mut seen = HashSet::new();
    resources.retain(|r| seen.insert(r["uri"].to_string()));
    let mut meta = json!({"server": server, "tool": tool});
    if let Some(structured) = result.structured_content {
        let text = structured.to_string();
        if text.len() > MAX_STRUCTURED_META {
            // The scheduler cuts content to the model's budget (G9) but not meta, which
            // `kodik serve` passes on in `structuredContent` (the field some clients give their
            // model) and `kodik batch` prints: a server's copy of a 5 MB file went through whole.
            meta["structured_content_bytes"] = json!(text.len());
        } else {
            meta["structured_content"] = structured;
        }
        if content.is_empty() {
            content.push(Content::text(text));
        }
    }
    if !resources.is_empty() {
        meta["resources"] = Value::Array(resources);
    }
    let status = if result.is_error == Some(true) { ToolStatus::Error } else { ToolStatus::Success };
    ToolOutput { status, content, meta, full_output: None }
}

/// The text of a blob resource that holds text: servers send files as base64 blobs whatever
/// they hold (server-everything's `text/plain` resources, a JSON report), and the model cannot
/// read base64. Decoded when the type is textual (`text/*`, JSON, XML, YAML, TOML, scripts) or
/// absent, and the bytes are UTF-8 without NUL bytes; anything else stays a note.
fn blob_text(blob: &str, mime_type: Option<&str>) -> Option<String> {
    use base64::Engine as _;
    if mime_type.is_some_and(|m| !is_textual(m)) {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(blob.trim()).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Whether a MIME type names text a model can read: `text/*`, JSON, XML, YAML, TOML, scripts.
fn is_textual(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence.starts_with("text/")
        || [
            "application/json",
            "application/xml",
            "application/javascript",
            "application/ecmascript",
            "application/x-javascript",
            "application/typescript",
            "application/yaml",
            "application/x-yaml",
            "application/toml",
            "application/sql",
            "application/graphql",
            "application/x-sh",
            "application/x-ndjson",
            "application/ld+json",
        ]
        .contains(&essence.as_str())
        || ["+json", "+xml", "+yaml"].iter().any(|suffix| essence.ends_with(suffix))
}

/// How many resource links of one result are read ([`follow_links`]).
const MAX_LINKS_READ: usize = 8;

/// The longest wait for all `resources/read`s of one result's links together.
const LINK_READS_TIMEOUT: Duration = Duration::from_secs(15);

/// Past this many bytes of linked resources read for one result, later links are not read.
const LINK_READS_MAX_BYTES: usize = 1 << 20;

/// Reads the resources a result links to, each right after its link, when the server offers
/// resources: kodik gives the model no tool to read MCP resources, so a link alone ("[resource
/// link demo://resource/dynamic/text/2 (Text Resource 2)]", a report a server returns by
/// reference) is a dead end. Only links to text or images (or of no stated type) are read, at
/// most [`MAX_LINKS_READ`], within [`LINK_READS_TIMEOUT`] and [`LINK_READS_MAX_BYTES`] in all;
/// a link that is not read says why. Cancelling the call stops the reads and keeps the result.
/// The output is cut to the model's budget like any other (G9).
async fn follow_links(peer: &Peer<RoleClient>, result: &mut CallToolResult, cancel: &kodik_core::CancellationToken) {
    let offers_resources = peer.peer_info().is_some_and(|info| info.capabilities.resources.is_some());
    if !offers_resources || !result.content.iter().any(|b| matches!(b, ContentBlock::ResourceLink(_))) {
        return;
    }
    let mut read = 0;
    let mut bytes = 0usize;
    let deadline = tokio::time::Instant::now() + LINK_READS_TIMEOUT;
    let mut content = Vec::with_capacity(result.content.len());
    for block in std::mem::take(&mut result.content) {
        let uri = match &block {
            ContentBlock::ResourceLink(link)
                if read < MAX_LINKS_READ
                    && link.mime_type.as_deref().is_none_or(|m| is_textual(m) || m.starts_with("image/")) =>
            {
                Some(link.uri.clone())
            }
            _ => None,
        };
        content.push(block);
        let Some(uri) = uri else { continue };
        read += 1;
        let why_not = if cancel.is_cancelled() {
            Some("the call was cancelled".to_owned())
        } else if bytes > LINK_READS_MAX_BYTES {
            Some(format!("the links before it brought {bytes} bytes already"))
        } else {
            None
        };
        if let Some(why) = why_not {
            content.push(ContentBlock::text(format!("[{uri} not read: {why}]")));
            continue;
        }
        let request = peer.read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()));
        let answer = tokio::select! {
            a = tokio::time::timeout_at(deadline, request) => a,
            () = cancel.cancelled() => {
                content.push(ContentBlock::text(format!("[{uri} not read: the call was cancelled]")));
                continue;
            }
        };
        match answer {
            Ok(Ok(r)) => {
                for c in r.contents {
                    bytes += match &c {
                        ResourceContents::TextResourceContents { text, .. } => text.len(),
                        ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
                        _ => 0,
                    };
                    content.push(ContentBlock::resource(c));
                }
            }
            Ok(Err(ServiceError::McpError(e))) => {
                content.push(ContentBlock::text(format!("[{uri} could not be read: {}]", e.message)));
            }
            Ok(Err(e)) => content.push(ContentBlock::text(format!("[{uri} could not be read: {e}]"))),
            Err(_) => content.push(ContentBlock::text(format!(
                "[{uri} could not be read: the links' reads took over {} s]",
                LINK_READS_TIMEOUT.as_secs()
            ))),
        }
    }
    result.content = content;
}

fn not_an_object(tool: &str, args: &Value) -> ToolError {
    ToolError::InvalidInput {
        tool: tool.to_owned(),
        field: None,
        message: format!("the arguments must be a JSON object, got {args}"),
    }
}

/// `server__tool` with every character outside `[A-Za-z0-9_-]` replaced by `_`, at most 64
/// characters (the providers' limit).
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name = format!("{}__{}", clean_name(server), clean_name(tool));
    name.truncate(64);
    name
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`: a server's name as
/// the model sees it in its tools' names.
pub(crate) fn clean_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// One tool of a mounted server, as a Kodik [`Tool`].
pub struct McpTool {
    server: Arc<Server>,
    remote: String,
    spec: ToolSpec,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.spec.name).field("server", &self.server.name).finish()
    }
}

impl McpTool {
    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.server.name
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        match args {
            Value::Object(_) | Value::Null => Ok(()),
            other => Err(not_an_object(&self.spec.name, other)),
        }
    }

    fn server(&self) -> Option<&str> {
        Some(&self.server.name)
    }

    async fn call(&self, args: Value, cx: &ToolContext) -> ToolOutput {
        // A caller holding a tool list from before the server's `tools/list_changed`.
        if !self.server.shared.offers(&self.remote) {
            return removed_output(&self.spec.name, &self.server.name, &self.remote);
        }
        self.server.call(&self.remote, args, cx).await
    }
}

/// A mounted tool's hints with MCP's defaults for those its server left out.
fn upstream_hints(upstream: Option<&ToolAnnotations>) -> ToolAnnotations {
    let mut hints = upstream.cloned().unwrap_or_default();
    let read_only = *hints.read_only_hint.get_or_insert(false);
    hints.destructive_hint.get_or_insert(!read_only);
    hints.open_world_hint.get_or_insert(true);
    hints
}

fn removed_output(name: &str, server: &str, remote: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "`{name}` is no longer offered: MCP server `{server}` removed its tool `{remote}` from its tool list. Use \
         the tools you are offered now."
    ))
    .with_meta(json!({"server": server, "tool": remote, "error_kind": "mcp_tool_removed"}))
}

/// A tool a mounted server used to offer and removed (`tools/list_changed`): kept under its
/// old name so a call to it gets a clear "no longer offered" error instead of "unknown tool".
/// Hosts keep it out of the lists the model sees.
#[derive(Debug)]
pub struct RemovedTool {
    spec: ToolSpec,
    server: String,
    remote: String,
}

impl RemovedTool {
    /// The removed tool `name` (`server__tool`), which was `remote` on `server`.
    pub fn new(name: impl Into<String>, server: impl Into<String>, remote: impl Into<String>) -> Self {
        let name = name.into();
        let server = server.into();
        let description = format!("No longer offered: MCP server `{server}` removed it.");
        let spec = ToolSpec::new(name, description, json!({"type": "object"}), Effect::ReadOnly);
        Self { spec, server, remote: remote.into() }
    }
}

#[async_trait::async_trait]
impl Tool for RemovedTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn validate(&self, _args: &Value) -> Result<(), ToolError> {
        // Whatever the arguments, the answer is that the tool is gone.
        Ok(())
    }

    fn server(&self) -> Option<&str> {
        Some(&self.server)
    }

    async fn call(&self, _args: Value, _cx: &ToolContext) -> ToolOutput {
        removed_output(&self.spec.name, &self.server, &self.remote)
    }
}

/// The connected MCP servers of one toolbox.
pub struct McpClient {
    servers: Vec<Arc<Server>>,
    errors: Vec<ClientError>,
    /// Bumped whenever any server's tool list is refreshed.
    generation: Arc<tokio::sync::watch::Sender<u64>>,
    /// The hints of each tool [`tools`](Self::tools) handed out last, by its Kodik name.
    hints: RwLock<HashMap<String, ToolAnnotations>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("servers", &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>())
            .field("errors", &self.errors)
            .finish()
    }
}

impl McpClient {
    /// Starts and initializes every server of `config` at once and lists their tools. A
    /// server that fails (cannot start, no `initialize` answer within
    /// [`ClientOptions::init_timeout`]) is left out and reported in [`errors`](Self::errors).
    pub async fn connect(config: &McpConfig, options: ClientOptions) -> Self {
        let client_generation = Arc::new(tokio::sync::watch::channel(0).0);
        let depth = own_depth();
        if depth >= MAX_DEPTH {
            let errors = config.servers.keys().map(|server| ClientError::TooDeep { server: server.clone(), depth });
            return Self {
                servers: Vec::new(),
                errors: errors.collect(),
                generation: client_generation,
                hints: RwLock::default(),
            };
        }
        let starts = config.servers.iter().map(|(name, server)| {
            let (generation, _) = tokio::sync::watch::channel(0);
            let server = Arc::new(Server {
                name: name.clone(),
                config: server.clone(),
                options: options.clone(),
                shared: Arc::new(Shared {
                    tools: RwLock::new(Vec::new()),
                    generation,
                    client_generation: Arc::clone(&client_generation),
                    progress: Mutex::default(),
                    instructions: RwLock::default(),
                    logs: crate::logs::ServerLogs::new(name),
                    tasks: crate::tasks::TaskOnly::default(),
                    withheld: Mutex::default(),
                }),
                stderr: Arc::new(StderrTail::default()),
                conn: tokio::sync::Mutex::new(None),
                restarts: AtomicU32::new(0),
                pgid: AtomicI32::new(0),
                close_reason: Arc::default(),
            });
            async move {
                let service = server.start().await?;
                if let Err(e) = server.list_tools(&service).await {
                    drop(service);
                    server.kill_group();
                    return Err(e);
                }
                *server.conn.lock().await = Some(service);
                Ok::<_, ClientError>(server)
            }
        });
        let mut servers = Vec::new();
        let mut errors = Vec::new();
        for result in futures_util::future::join_all(starts).await {
            match result {
                Ok(s) => servers.push(s),
                Err(e) => errors.push(e),
            }
        }
        Self { servers, errors, generation: client_generation, hints: RwLock::default() }
    }

    /// The servers that could not be used, with why.
    pub fn errors(&self) -> &[ClientError] {
        &self.errors
    }

    /// The connected servers' names.
    pub fn server_names(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.name.as_str()).collect()
    }

    /// Each connected server's `instructions` (from its `initialize` answer; MCP meant them
    /// for the model) as (server name, text), in the servers' order; a server that sent none,
    /// or only whitespace, is left out. The text is the server's, unbounded: for a system
    /// prompt use [`instructions_prompt`](Self::instructions_prompt).
    pub fn instructions(&self) -> Vec<(String, String)> {
        self.servers
            .iter()
            .filter_map(|s| {
                let text = s.shared.instructions.read().unwrap_or_else(|p| p.into_inner()).clone()?;
                (!text.trim().is_empty()).then(|| (s.name.clone(), text))
            })
            .collect()
    }

    /// The servers' [`instructions`](Self::instructions) as a section for a model's system
    /// prompt, or `None` when no server sent any: introduced as written by the servers' authors
    /// (not by the host or the user), each server's text fenced in
    /// `<mcp_server_instructions server="name">` (a fence its text cannot close) and cut at
    /// [`MAX_INSTRUCTIONS_BYTES`](crate::instructions::MAX_INSTRUCTIONS_BYTES), saying how much
    /// was left out. A server started again after it died gives its new answer's text.
    pub fn instructions_prompt(&self) -> Option<String> {
        let servers = self.instructions();
        crate::instructions::instructions_section(servers.iter().map(|(n, t)| (n.as_str(), t.as_str())))
    }

    /// Every server's current tools as Kodik tools named `server__tool`, kept unique (and
    /// apart from `taken`, the built-ins) with a `_2`, `_3`… suffix. Tools without
    /// `readOnlyHint: true` are side-effecting in every mode (A8); all start while the
    /// response still streams (G4). A tool its server runs only as a task
    /// (`execution.taskSupport: "required"`) is left out, with a `tracing` warning the first
    /// time: kodik cannot call tools as tasks, and any other call of it fails.
    pub fn tools(&self, taken: &HashSet<String>) -> Vec<McpTool> {
        let mut used: HashSet<String> = taken.clone();
        let mut out = Vec::new();
        let mut hints = HashMap::new();
        for server in &self.servers {
            let tools = server.shared.tools.read().map(|t| t.clone()).unwrap_or_default();
            for tool in tools {
                if server.shared.tasks.required(&tool.name) {
                    server.withhold(&tool.name);
                    continue;
                }
                let base = tool_name(&server.name, &tool.name);
                let mut name = base.clone();
                let mut n = 2;
                while used.contains(&name) {
                    let suffix = format!("_{n}");
                    name = format!("{}{suffix}", &base[..base.len().min(64 - suffix.len())]);
                    n += 1;
                }
                used.insert(name.clone());
                hints.insert(name.clone(), upstream_hints(tool.annotations.as_ref()));
                let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
                let effect = if read_only { Effect::ReadOnly } else { Effect::Process };
                let (schema, description) =
                    model_schema(tool.input_schema.as_ref().clone(), tool.description.as_deref().unwrap_or_default());
                let mut spec = ToolSpec::new(name, description, schema, effect);
                spec.streaming_start = true;
                out.push(McpTool { server: Arc::clone(server), remote: tool.name.to_string(), spec });
            }
        }
        *self.hints.write().unwrap_or_else(|p| p.into_inner()) = hints;
        out
    }

    /// The MCP annotations of the mounted tool [`tools`](Self::tools) last named `name`, for a
    /// server that lists it to its own clients: its server's hints as they are, each one absent
    /// there at MCP's default (not read-only, destructive unless read-only, open world), so
    /// passing it on never makes it look safer than its server says. `None` for a name that is
    /// no mounted tool.
    pub fn annotations_of(&self, name: &str) -> Option<ToolAnnotations> {
        self.hints.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// A receiver that changes whenever a server's tool list is refreshed
    /// (`tools/list_changed`, or a restart); per server name.
    pub fn changes(&self) -> HashMap<String, tokio::sync::watch::Receiver<u64>> {
        self.servers.iter().map(|s| (s.name.clone(), s.shared.generation.subscribe())).collect()
    }

    /// A count that grows whenever any server's tool list is refreshed (`tools/list_changed`,
    /// or a restart): a host that built its tool list at count `n` rebuilds it when the count
    /// differs.
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// A receiver of [`generation`](Self::generation), woken on every refresh of any server.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Closes every connection (stdio servers are killed with their process group).
    pub async fn shutdown(&self) {
        for server in &self.servers {
            if let Some(mut service) = server.conn.lock().await.take() {
                let _ = service.close().await;
            }
            server.kill_group();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects the progress lines it is given.
    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl EventSink for Lines {
        fn emit(&self, event: Event) {
            if let (Event::Progress { message, .. }, Ok(mut lines)) = (event, self.0.lock()) {
                lines.push(message);
            }
        }
    }

    #[test]
    fn a8_progress_that_comes_before_its_call_claims_the_token_still_reaches_the_call() {
        // A server reported its first step before the call had claimed the request's token
        // (seen in CI: "compiling (1/3)" lost, the later steps shown).
        let mut progress = Progress::default();
        progress.report("n:1".into(), "compiling (1/3)".into());
        progress.report("n:2".into(), "another call's step".into());
        let lines = Arc::new(Lines::default());
        progress.claim("n:1".into(), (lines.clone(), "call-1".into()));
        progress.report("n:1".into(), "linking (2/3)".into());
        let seen = lines.0.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(seen, ["compiling (1/3)", "linking (2/3)"]);
        assert_eq!(progress.early.len(), 1, "the other token's step waits for its own call");
        for i in 0..2 * EARLY_PROGRESS_MAX {
            progress.report(format!("n:{}", 100 + i), "unclaimed".into());
        }
        assert_eq!(progress.early.len(), EARLY_PROGRESS_MAX, "unclaimed steps are bounded");
    }
}
