//! Recorded responses and a loopback HTTP server that replays them to the real clients.
//!
//! A [`Recording`] is one JSON file: the provider, the model and, per model request, the HTTP
//! status, the headers that matter (`retry-after`) and the raw SSE body. [`ReplayServer`] answers
//! the n-th POST with the n-th exchange, writing the body in pieces over time, and keeps each
//! request for assertions. [`ModelConfig::record_to`](crate::ModelConfig::record_to) writes such
//! files from real sessions.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::config::Provider;

/// A replayable transcript: one exchange per model request, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// The wire API the bodies are in.
    pub provider: Provider,
    /// The model that answered.
    pub model: String,
    /// The responses, in request order.
    pub exchanges: Vec<Exchange>,
}

/// One recorded response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The HTTP status.
    pub status: u16,
    /// Response headers worth replaying (lower-case names), e.g. `retry-after`. `content-type`
    /// defaults to `text/event-stream` for 200 and `application/json` otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The raw response body (SSE text, or the provider's JSON error).
    pub body: String,
}

impl Exchange {
    /// A 200 answer with an SSE body.
    pub fn sse(body: impl Into<String>) -> Self {
        Self { status: 200, headers: BTreeMap::new(), body: body.into() }
    }

    /// An error answer with a JSON body in the providers' `{"error":{"message"}}` shape.
    pub fn error(status: u16, message: &str) -> Self {
        let body = serde_json::json!({ "error": { "message": message } }).to_string();
        Self { status, headers: BTreeMap::new(), body }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.insert(name.to_ascii_lowercase(), value.to_owned());
        self
    }
}

/// Why a recording could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read or written.
    #[error("recording {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// The file is not a recording.
    #[error("recording {path} is not a kodik-model recording: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Where the JSON does not fit.
        source: serde_json::Error,
    },
}

impl Recording {
    /// An empty recording.
    pub fn new(provider: Provider, model: impl Into<String>) -> Self {
        Self { provider, model: model.into(), exchanges: Vec::new() }
    }

    /// Adds an exchange (builder style).
    pub fn with(mut self, exchange: Exchange) -> Self {
        self.exchanges.push(exchange);
        self
    }

    /// Reads a recording file.
    pub fn load(path: &Path) -> Result<Self, RecordingError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| RecordingError::Io { path: path.to_owned(), source })?;
        serde_json::from_str(&text).map_err(|source| RecordingError::Format { path: path.to_owned(), source })
    }

    /// Writes the recording (to a temporary file renamed over `path`, so a reader never sees half).
    pub fn save(&self, path: &Path) -> Result<(), RecordingError> {
        let io_err = |source| RecordingError::Io { path: path.to_owned(), source };
        let text = serde_json::to_string_pretty(self)
            .map_err(|source| RecordingError::Format { path: path.to_owned(), source })?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text).map_err(io_err)?;
        std::fs::rename(&tmp, path).map_err(io_err)
    }
}

/// How [`ReplayServer`] writes bodies.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Bytes per write; `None` writes one SSE event (up to its blank line) per write.
    pub chunk_size: Option<usize>,
    /// A pause before each write after the first.
    pub chunk_delay: Duration,
    /// Stop writing exchange `.0` (0-based) after `.1` bytes and keep the connection open until
    /// the client closes it or the server is dropped.
    pub stall: Option<(usize, usize)>,
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `POST`, …
    pub method: String,
    /// The request target, e.g. `/v1/responses`.
    pub path: String,
    /// Headers with lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
}

#[derive(Debug, Default)]
struct Shared {
    requests: Mutex<Vec<RecordedRequest>>,
    served: AtomicUsize,
    client_closed: AtomicUsize,
}

/// A loopback HTTP/1.1 server that answers with a [`Recording`]'s exchanges. Dropping it stops it.
#[derive(Debug)]
pub struct ReplayServer {
    addr: SocketAddr,
    provider: Provider,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ReplayServer {
    /// Starts a server on `127.0.0.1:0` replaying `recording` event by event, without delays.
    pub async fn start(recording: Recording) -> io::Result<Self> {
        Self::start_with(recording, ReplayOptions::default()).await
    }

    /// Starts a server with explicit chunking, delay and stall options.
    pub async fn start_with(recording: Recording, options: ReplayOptions) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let stop = CancellationToken::new();
        let provider = recording.provider;
        let recording = Arc::new(recording);
        let options = Arc::new(options);
        let (task_shared, task_stop) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = task_stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((socket, _)) = accepted else { continue };
                let (recording, options, shared, stop) =
                    (recording.clone(), options.clone(), task_shared.clone(), task_stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        // A client that hangs up mid-answer is what the cancellation tests provoke.
                        _ = serve(socket, &recording, &options, &shared, &stop) => {}
                    }
                });
            }
        });
        Ok(Self { addr, provider, shared, stop })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What to put into [`ModelConfig::base_url`](crate::ModelConfig::base_url) for the
    /// recording's provider: `http://127.0.0.1:PORT/v1` for the OpenAI APIs, without `/v1` for
    /// Anthropic (whose client adds `/v1/messages`).
    pub fn base_url(&self) -> String {
        match self.provider {
            Provider::Anthropic => format!("http://{}", self.addr),
            Provider::OpenAiResponses | Provider::ChatCompletions => format!("http://{}/v1", self.addr),
        }
    }

    /// The requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many connections the client closed before the server finished writing the answer.
    pub fn client_closed_early(&self) -> usize {
        self.shared.client_closed.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut socket: TcpStream,
    recording: &Recording,
    options: &ReplayOptions,
    shared: &Shared,
    stop: &CancellationToken,
) -> io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else { return Ok(()) };
    let index = {
        let mut requests = shared.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.push(request);
        shared.served.fetch_add(1, Ordering::SeqCst)
    };
    let Some(exchange) = recording.exchanges.get(index) else {
        let body = serde_json::json!({ "error": { "message": format!(
            "replay: request {} arrived but the recording has only {} exchange(s)",
            index + 1,
            recording.exchanges.len()
        ) } })
        .to_string();
        let head = format!(
            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(body.as_bytes()).await?;
        return socket.shutdown().await;
    };
    let mut head = format!("HTTP/1.1 {} {}\r\n", exchange.status, reason(exchange.status));
    if !exchange.headers.contains_key("content-type") {
        let content_type = if exchange.status == 200 { "text/event-stream" } else { "application/json" };
        head.push_str(&format!("content-type: {content_type}\r\n"));
    }
    for (name, value) in &exchange.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("cache-control: no-cache\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;

    let body = exchange.body.as_bytes();
    let stall_at = match options.stall {
        Some((at, bytes)) if at == index => Some(bytes.min(body.len())),
        _ => None,
    };
    let end = stall_at.unwrap_or(body.len());
    let mut written = 0;
    while written < end {
        if written > 0 && !options.chunk_delay.is_zero() {
            tokio::time::sleep(options.chunk_delay).await;
        }
        let next = match options.chunk_size {
            Some(size) => (written + size.max(1)).min(end),
            None => memchr::memmem::find(&body[written..end], b"\n\n").map_or(end, |p| written + p + 2),
        };
        if let Err(e) = socket.write_all(&body[written..next]).await {
            shared.client_closed.fetch_add(1, Ordering::SeqCst);
            return Err(e);
        }
        socket.flush().await?;
        written = next;
    }
    if stall_at.is_some() {
        // Hold the connection open and silent; a read of 0 bytes means the client hung up.
        let mut buf = [0u8; 64];
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                n = socket.read(&mut buf) => match n {
                    Ok(0) | Err(_) => {
                        shared.client_closed.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                    Ok(_) => {}
                },
            }
        }
    }
    socket.shutdown().await
}

/// Reads one request (head and `Content-Length` body); `None` when the client sent nothing.
pub(crate) async fn read_request(socket: &mut TcpStream) -> io::Result<Option<RecordedRequest>> {
    let mut buf = Vec::with_capacity(8192);
    let head_end = loop {
        if let Some(p) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break p;
        }
        if buf.len() > 1 << 20 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request head over 1 MiB"));
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(1 << 16)];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "request body cut off"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(Some(RecordedRequest { method, path, headers, body }))
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Appends each response a client receives to a recording file (see
/// [`ModelConfig::record_to`](crate::ModelConfig::record_to)).
#[derive(Debug)]
pub(crate) struct Recorder {
    path: PathBuf,
    recording: Mutex<Recording>,
}

impl Recorder {
    pub(crate) fn new(path: PathBuf, provider: Provider, model: &str) -> Self {
        Self { path, recording: Mutex::new(Recording::new(provider, model)) }
    }

    /// Adds one exchange and saves the file; a failed save is logged, not fatal to the session.
    pub(crate) fn push(&self, exchange: Exchange) {
        let mut recording = self.recording.lock().unwrap_or_else(PoisonError::into_inner);
        recording.exchanges.push(exchange);
        if let Err(e) = recording.save(&self.path) {
            tracing::warn!("could not save the model recording: {e}");
        }
    }
}
