//! MCP over streamable HTTP (rmcp's server transport) with one [`McpServer`] — so one
//! toolbox session — per `Mcp-Session-Id`.
//!
//! - Loopback binds need nothing; any other bind needs a bearer token, compared in constant
//!   time. A request without it gets 401 before anything else looks at it.
//! - A request carrying an `Origin` header is refused (403) unless the origin is allowed
//!   (DNS-rebinding protection as the MCP spec asks); MCP clients that are not browsers send
//!   none. The `Host` header must be a loopback name on loopback binds.
//! - Idle sessions expire ([`HttpOptions::idle_timeout`]); their server is dropped, which
//!   cancels its calls and kills its terminals.
//! - Shutdown (the token passed to [`serve_http`]): stop accepting, let calls in flight finish
//!   (at most [`HttpOptions::drain_timeout`]), then end every session.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::McpServer;

/// Settings of [`serve_http`].
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token clients must send (`Authorization: Bearer …`); required when the
    /// listener is not on a loopback address.
    pub token: Option<String>,
    /// A session without requests for this long is closed (default 30 min).
    pub idle_timeout: Duration,
    /// How long shutdown waits for calls in flight (default 10 s).
    pub drain_timeout: Duration,
    /// The URL path of the endpoint (default `/mcp`).
    pub path: String,
    /// Browser origins allowed to call (`https://app.example.com:443`); none by default.
    pub allowed_origins: Vec<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            token: None,
            idle_timeout: Duration::from_secs(30 * 60),
            drain_timeout: Duration::from_secs(10),
            path: "/mcp".into(),
            allowed_origins: Vec::new(),
        }
    }
}

/// Why the HTTP server could not run.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback bind without a token.
    #[error(
        "{addr} is not a loopback address: serving it needs a bearer token (--token-file FILE or KODIK_SERVE_TOKEN)"
    )]
    TokenRequired {
        /// The bound address.
        addr: SocketAddr,
    },
    /// An empty token.
    #[error("the bearer token is empty")]
    EmptyToken,
    /// The listener failed.
    #[error("the HTTP listener failed: {0}")]
    Io(#[from] std::io::Error),
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *response.status_mut() = status;
    response
}

/// Whether the request carries `Authorization: Bearer <token>` (constant-time comparison).
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    let Some(value) = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(given) = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")) else {
        return false;
    };
    bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
}

/// Whether the request says its body is JSON (`Content-Type: application/json[; …]`).
fn json_content(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json"))
}

/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A JSON-RPC error answer with no id (the request's could not be read), HTTP `status`.
fn json_rpc_error(status: StatusCode, code: i64, message: String) -> Response<Body> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    let mut response = plain(status, &body.to_string());
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// The request with its body read, when that body is a JSON-RPC message. Otherwise the answer
/// JSON-RPC gives: a body that is not JSON is a parse error (-32700), JSON that is no JSON-RPC
/// message an invalid request (-32600), both HTTP 400. rmcp answered both with 415
/// Unsupported Media Type, which is about the Content-Type header, and a client then looks
/// there for the fault.
async fn json_rpc_body(req: Request<Incoming>) -> Result<Request<Full<Bytes>>, Response<Body>> {
    let (parts, body) = req.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(plain(StatusCode::PAYLOAD_TOO_LARGE, &format!("the request body exceeds {MAX_BODY} bytes\n")));
        }
        Err(e) => return Err(plain(StatusCode::BAD_REQUEST, &format!("the request body could not be read: {e}\n"))),
    };
    if let Err(e) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
        return Err(match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Err(parse) => {
                json_rpc_error(StatusCode::BAD_REQUEST, -32700, format!("Parse error: the body is not JSON: {parse}"))
            }
            Ok(_) => json_rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("Invalid Request: the body is not a JSON-RPC request, notification or response: {e}"),
            ),
        });
    }
    Ok(Request::from_parts(parts, Full::new(bytes)))
}

/// Serves MCP over streamable HTTP on `listener` until `shutdown` is cancelled. `factory`
/// makes the server of each new session (give each its own toolbox: sessions must not share
/// terminals or reads).
pub async fn serve_http<F>(
    listener: TcpListener,
    factory: F,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), HttpError>
where
    F: Fn() -> Result<McpServer, std::io::Error> + Send + Sync + 'static,
{
    let addr = listener.local_addr()?;
    let token = match options.token.as_deref().map(str::trim) {
        Some("") => return Err(HttpError::EmptyToken),
        Some(t) => Some(Arc::<str>::from(t)),
        None if addr.ip().is_loopback() => None,
        None => return Err(HttpError::TokenRequired { addr }),
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&in_flight);
    // Well inside the idle limit, so a session with a call running never looks idle.
    let heartbeat = (options.idle_timeout / 3).max(Duration::from_millis(200));
    let sessions_end = CancellationToken::new();
    // No SSE priming/retry events: without an event store a client cannot resume anyway, and
    // each one is an extra write per request.
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(sessions_end.clone()).with_sse_retry(None);
    config = if options.allowed_origins.is_empty() {
        config.enforce_origin_validation()
    } else {
        config.with_allowed_origins(options.allowed_origins.clone())
    };
    if !addr.ip().is_loopback() {
        // Behind a load balancer the Host is the service's name; the token guards instead.
        config = config.disable_allowed_hosts();
    }
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(options.idle_timeout);
    sessions.session_config.sse_retry = None;
    let service = StreamableHttpService::new(
        move || factory().map(|s| s.with_in_flight(Arc::clone(&counter), heartbeat)),
        Arc::new(sessions),
        config,
    );
    let path: Arc<str> = options.path.clone().into();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors or a reset during accept: keep serving the others.
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let token = token.clone();
        let path = Arc::clone(&path);
        let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            let path = Arc::clone(&path);
            async move {
                if let Some(token) = &token
                    && !authorized(&req, token)
                {
                    let mut r = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
                    r.headers_mut()
                        .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
                    return Ok::<_, Infallible>(r);
                }
                if req.uri().path() != &*path {
                    return Ok(plain(StatusCode::NOT_FOUND, "the MCP endpoint is elsewhere\n"));
                }
                if req.method() == hyper::Method::POST && json_content(&req) {
                    return Ok(match json_rpc_body(req).await {
                        Ok(req) => service.handle(req).await,
                        Err(refused) => refused,
                    });
                }
                Ok(service.handle(req).await)
            }
        });
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
    }
    drop(listener);
    // Calls in flight finish (bounded), their answers go out, then every session ends: that
    // drops each session's server, which cancels what is left and kills its terminals.
    let deadline = Instant::now() + options.drain_timeout;
    while in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), graceful.shutdown()).await;
    sessions_end.cancel();
    Ok(())
}
