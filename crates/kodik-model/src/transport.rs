//! What the three clients share: the HTTP client, retries, the idle timeout, cancellation,
//! recording, and turning an SSE body into [`ModelEvent`]s through a provider's [`Decoder`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{ModelConfig, Provider};
use crate::decode::BodyDecoder;
use crate::replay::{Exchange, Recorder};
use crate::sse::{SseError, SseEvent};
use crate::types::{EventStream, ModelError, ModelEvent};

/// Whether a provider's event ended the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading.
    More,
    /// The response is complete; stop reading and close the connection.
    Done,
}

/// A provider's event semantics: SSE events in, [`ModelEvent`]s out.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one SSE event.
    fn event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<ModelEvent>) -> Result<Flow, ModelError>;

    /// The body ended without [`Flow::Done`]; some servers end a complete response this way.
    fn end(&mut self, _out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        Err(ModelError::Truncated)
    }
}

impl From<SseError> for ModelError {
    fn from(e: SseError) -> Self {
        ModelError::Malformed(e.to_string())
    }
}

/// Parses `data` as JSON of type `T`, or says which event of which provider was not.
pub(crate) fn parse_event<'a, T: serde::Deserialize<'a>>(
    provider: &str,
    event: &SseEvent<'a>,
) -> Result<T, ModelError> {
    serde_json::from_str(event.data).map_err(|e| {
        let name = if event.event.is_empty() { "message" } else { event.event };
        ModelError::Malformed(format!("{provider} event `{name}` does not parse ({e}); data: {}", excerpt(event.data)))
    })
}

/// The first 200 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() { format!("{}…", &text[..end]) } else { text.to_owned() }
}

/// The shared HTTP side of a client.
pub(crate) struct Transport {
    http: reqwest::Client,
    pub(crate) config: ModelConfig,
    recorder: Option<Arc<Recorder>>,
}

static CRYPTO: Once = Once::new();

/// Installs rustls' ring provider once per process (reqwest is built without one).
pub(crate) fn install_crypto() {
    CRYPTO.call_once(|| {
        // Err means another part of the process installed a provider first; that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Transport {
    pub(crate) fn new(config: ModelConfig) -> Result<Self, ModelError> {
        if !config.base_url.starts_with("http://") && !config.base_url.starts_with("https://") {
            return Err(ModelError::Config(format!(
                "base URL `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        install_crypto();
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| ModelError::Config(format!("could not build the HTTP client: {e}")))?;
        let recorder =
            config.record_path.clone().map(|path| Arc::new(Recorder::new(path, config.provider, &config.model)));
        Ok(Self { http, config, recorder })
    }

    /// `authorization: Bearer KEY` when a key is set: what OpenAI-style servers expect.
    pub(crate) fn bearer_headers(&self) -> Vec<(&'static str, String)> {
        self.config.key().map(|key| ("authorization", format!("Bearer {key}"))).into_iter().collect()
    }

    /// POSTs `body` to `{base}{path}` with `headers`, retrying 429, 5xx and connection failures
    /// before the first body byte, and returns the event stream `decoder` makes of the body.
    pub(crate) async fn stream(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
        decoder: BodyDecoder,
        cancel: CancellationToken,
    ) -> Result<EventStream, ModelError> {
        let url = format!("{}{path}", self.config.base_url);
        let body =
            serde_json::to_vec(body).map_err(|e| ModelError::Config(format!("request not serializable: {e}")))?;
        let mut attempt = 0u32;
        loop {
            let wait = match self.attempt(&url, headers, &body, &cancel).await? {
                Attempt::Opened(response, first) => {
                    return Ok(drive(response, first, decoder, self.config.idle_timeout, cancel, self.tee()));
                }
                Attempt::Retry { error, retry_after } if attempt < self.config.retries => {
                    let backoff = self.config.retry_base_delay.saturating_mul(1 << attempt.min(16));
                    let wait = retry_after.unwrap_or(backoff).min(self.config.max_retry_wait);
                    tracing::debug!(attempt, ?wait, "model request failed ({error}); retrying");
                    wait
                }
                Attempt::Retry { error, .. } => return Err(error),
            };
            attempt += 1;
            tokio::select! {
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn tee(&self) -> Option<Tee> {
        self.recorder.as_ref().map(|r| Tee {
            recorder: r.clone(),
            body: Vec::new(),
            key: self.config.key().map(str::to_owned),
        })
    }

    async fn attempt(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &[u8],
        cancel: &CancellationToken,
    ) -> Result<Attempt, ModelError> {
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(body.to_vec());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let timeout = self.config.request_timeout;
        let sent = tokio::select! {
            () = cancel.cancelled() => return Err(ModelError::Cancelled),
            sent = tokio::time::timeout(timeout, request.send()) => sent,
        };
        let mut response = match sent {
            Err(_) => {
                let error = ModelError::Transport(format!("no response headers within {} s", timeout.as_secs()));
                return Ok(Attempt::Retry { error, retry_after: None });
            }
            Ok(Err(e)) => {
                let error = ModelError::Transport(self.config.redact(transport_message(&e)));
                return Ok(Attempt::Retry { error, retry_after: None });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if status != 200 {
            let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let text = tokio::select! {
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                text = tokio::time::timeout(timeout, response.text()) => text.ok().and_then(Result::ok).unwrap_or_default(),
            };
            let text = self.config.redact(text);
            if let Some(recorder) = &self.recorder {
                let mut headers = BTreeMap::new();
                if let Some(v) = &retry_after {
                    headers.insert("retry-after".to_owned(), v.clone());
                }
                recorder.push(Exchange { status, headers, body: text.clone() });
            }
            let mut message = error_message(&text);
            if status == 404 {
                message = self.not_found(url, message);
            }
            let error = ModelError::Http { status, message };
            if status == 429 || status >= 500 {
                let retry_after = retry_after
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .and_then(|s| (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(86_400.0))));
                return Ok(Attempt::Retry { error, retry_after });
            }
            return Err(error);
        }
        // A server that ignored `stream: true` (or a proxy's error page) answers 200 with JSON.
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        // A web page (a web UI on that port, a proxy's or captive portal's error page) is no
        // API at all: parsed as events it would read as a stream that broke off.
        let page = content_type.starts_with("text/html") || content_type.starts_with("application/xhtml");
        if content_type.starts_with("application/json") || page {
            let text = tokio::select! {
                () = cancel.cancelled() => return Err(ModelError::Cancelled),
                text = tokio::time::timeout(timeout, response.text()) => text.ok().and_then(Result::ok).unwrap_or_default(),
            };
            let what = if page { " (a web page, not the API: check the base URL)" } else { "" };
            return Err(ModelError::Malformed(format!(
                "expected an event stream (text/event-stream) but the server answered {content_type}{what}: {}",
                error_message(&self.config.redact(text))
            )));
        }
        // The first body byte decides whether a retry is still safe: nothing has been yielded yet.
        let idle = self.config.idle_timeout;
        let first = tokio::select! {
            () = cancel.cancelled() => return Err(ModelError::Cancelled),
            first = tokio::time::timeout(idle, response.chunk()) => first,
        };
        match first {
            Err(_) => Err(ModelError::IdleTimeout(whole_secs(idle))),
            Ok(Err(e)) => {
                let error = ModelError::Transport(self.config.redact(transport_message(&e)));
                Ok(Attempt::Retry { error, retry_after: None })
            }
            Ok(Ok(first)) => Ok(Attempt::Opened(response, first)),
        }
    }
}

impl Transport {
    /// A 404's `message` with the address asked and, unless the provider's words blame the
    /// model, what is usually wrong with the base URL: a server that says only "404 page not
    /// found" leaves the user guessing that `/v1` is missing (Ollama) or doubled (Anthropic).
    fn not_found(&self, url: &str, message: String) -> String {
        let base = &without_secrets(&self.config.base_url);
        let mut out = format!("{message} (POST {})", without_secrets(url));
        if message.to_ascii_lowercase().contains("model") {
            return out;
        }
        let check = "check the base URL (KODIK_BASE_URL, `kodik agent --base-url`)";
        let v1 = base.ends_with("/v1");
        let hint = match self.config.provider {
            Provider::Anthropic if v1 => format!(
                "{check}: for Anthropic it is the server's root, without /v1 (the client adds /v1/messages), e.g. {}",
                &base[..base.len() - 3]
            ),
            Provider::Anthropic => format!("{check}: the client adds /v1/messages to it"),
            Provider::OpenAiResponses | Provider::ChatCompletions if !v1 => {
                format!("{check}: OpenAI-compatible servers usually serve the API under /v1, e.g. {base}/v1")
            }
            Provider::OpenAiResponses => format!(
                "{check}; a server without the Responses API (Ollama, vLLM, llama.cpp) needs `--provider \
                 chat-completions` (KODIK_PROVIDER)"
            ),
            Provider::ChatCompletions => check.to_owned(),
        };
        out.push_str(": ");
        out.push_str(&hint);
        out
    }
}

/// `url` as an error may show it: without a `user:password@` or a query, where keys and tokens
/// sometimes ride (keys never appear in errors).
pub(crate) fn without_secrets(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.as_str().trim_end_matches('/').to_owned()
        }
        Err(_) => "(the configured base URL)".to_owned(),
    }
}

enum Attempt {
    Opened(reqwest::Response, Option<Bytes>),
    Retry { error: ModelError, retry_after: Option<Duration> },
}

/// reqwest's error with its sources, which hold the useful part ("connection refused").
pub(crate) fn transport_message(e: &reqwest::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// The provider's message from an error body (`{"error":{"message"}}`, `{"error":"…"}`,
/// `{"message"}`), else the body's start.
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let found = v
            .pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str);
        if let Some(message) = found {
            return message.to_owned();
        }
    }
    if body.trim().is_empty() { "(empty body)".to_owned() } else { excerpt(body.trim()) }
}

/// Copies a streamed body into the recording; saves when the stream ends or is dropped.
struct Tee {
    recorder: Arc<Recorder>,
    body: Vec<u8>,
    key: Option<String>,
}

impl Drop for Tee {
    fn drop(&mut self) {
        let mut body = String::from_utf8_lossy(&self.body).into_owned();
        if let Some(key) = self.key.as_deref().filter(|k| k.len() >= 4) {
            body = body.replace(key, "<redacted>");
        }
        self.recorder.push(Exchange { status: 200, headers: BTreeMap::new(), body });
    }
}

struct Drive {
    /// `None` once finished: dropping it closes the connection.
    response: Option<reqwest::Response>,
    first: Option<Bytes>,
    decoder: BodyDecoder,
    pending: VecDeque<ModelEvent>,
    idle: Duration,
    cancel: CancellationToken,
    tee: Option<Tee>,
    /// The stream has nothing more to read (completed, failed or cancelled).
    finished: bool,
    /// An error to yield after the pending events.
    error: Option<ModelError>,
}

fn drive(
    response: reqwest::Response,
    first: Option<Bytes>,
    decoder: BodyDecoder,
    idle: Duration,
    cancel: CancellationToken,
    tee: Option<Tee>,
) -> EventStream {
    let state = Drive {
        response: Some(response),
        first,
        decoder,
        pending: VecDeque::new(),
        idle,
        cancel,
        tee,
        finished: false,
        error: None,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                return Some((Ok(event), st));
            }
            if let Some(error) = st.error.take() {
                return Some((Err(error), st));
            }
            if st.finished {
                return None;
            }
            let response = st.response.as_mut()?;
            let chunk = match st.first.take() {
                Some(first) => Ok(Some(first)),
                None => tokio::select! {
                    () = st.cancel.cancelled() => {
                        st.finish(Some(ModelError::Cancelled));
                        continue;
                    }
                    chunk = tokio::time::timeout(st.idle, response.chunk()) => match chunk {
                        Err(_) => Err(ModelError::IdleTimeout(whole_secs(st.idle))),
                        Ok(Err(e)) => Err(ModelError::Transport(transport_message(&e))),
                        Ok(Ok(chunk)) => Ok(chunk),
                    },
                },
            };
            match chunk {
                Err(e) => st.finish(Some(e)),
                Ok(None) => {
                    let result = st.decoder.end(&mut st.pending);
                    st.finish(result.err());
                }
                Ok(Some(bytes)) => st.feed(&bytes),
            }
        }
    }))
}

impl Drive {
    fn feed(&mut self, bytes: &[u8]) {
        if let Some(tee) = &mut self.tee {
            tee.body.extend_from_slice(bytes);
        }
        match self.decoder.feed(bytes, &mut self.pending) {
            Err(e) => self.finish(Some(e)),
            Ok(true) => self.finish(None),
            Ok(false) => {}
        }
    }

    fn finish(&mut self, error: Option<ModelError>) {
        self.finished = true;
        self.error = error;
        self.response = None;
        // Saving now, not at drop, keeps the recording complete while the caller still holds the stream.
        self.tee = None;
    }
}

/// Seconds rounded up, so a sub-second timeout is not reported as "0 s".
fn whole_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).try_into().unwrap_or(u64::MAX)
}
