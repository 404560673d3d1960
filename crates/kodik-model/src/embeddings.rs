//! An OpenAI-compatible `/v1/embeddings` client, [`EmbeddingsClient`], implementing
//! [`kodik_core::Embedder`] for `codebase_search` (L7). OpenAI, Ollama, LM Studio, vLLM,
//! llama.cpp and Voyage-style servers all speak this API: `POST {base}/embeddings` with
//! `{"model", "input": [texts]}`, answered by `{"data": [{"index", "embedding"}]}`.
//!
//! [`HashEmbeddingServer`] is a loopback server speaking the same API with deterministic
//! word-hashing vectors, for tests and demos without a model.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{EmbedError, Embedder};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::replay::{RecordedRequest, read_request, reason};
use crate::transport::{error_message, transport_message, without_secrets};

/// How to reach an embeddings server. `Debug` never shows the key.
#[derive(Clone)]
pub struct EmbeddingsConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1` (Ollama);
    /// the client posts to `{base_url}/embeddings`.
    pub base_url: String,
    api_key: Option<String>,
    /// The embedding model, e.g. `text-embedding-3-small`, `nomic-embed-text`.
    pub model: String,
    /// At most this many texts per request (default 64); larger batches are split.
    pub batch_size: usize,
    /// Asks the server for vectors of this length (OpenAI's `dimensions` parameter) and checks
    /// every answer has it; `None` sends nothing and takes the length of the first answer.
    pub dimensions: Option<usize>,
    /// Extra tries after a 429, a 5xx or a connection failure (default 3).
    pub retries: u32,
    /// The first backoff when the server gives no `Retry-After`; it doubles per try (default 500 ms).
    pub retry_base_delay: Duration,
    /// The longest wait between tries (default 20 s); a server asking for longer gets
    /// [`EmbedError::RateLimited`] at once instead of a stalled caller.
    pub max_retry_wait: Duration,
    /// How long one request may take, answer included (default 60 s).
    pub request_timeout: Duration,
}

impl std::fmt::Debug for EmbeddingsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsConfig")
            .field("base_url", &without_secrets(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("batch_size", &self.batch_size)
            .field("dimensions", &self.dimensions)
            .field("retries", &self.retries)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl EmbeddingsConfig {
    /// A configuration for `model` at `base_url` (a trailing `/` is dropped), without a key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        Self {
            base_url,
            api_key: None,
            model: model.into(),
            batch_size: 64,
            dimensions: None,
            retries: 3,
            retry_base_delay: Duration::from_millis(500),
            max_retry_wait: Duration::from_secs(20),
            request_timeout: Duration::from_secs(60),
        }
    }

    /// Reads `KODIK_EMBEDDINGS_URL` (default OpenAI's API root), `KODIK_EMBEDDINGS_MODEL`
    /// (required) and `KODIK_EMBEDDINGS_KEY` (else `OPENAI_API_KEY` when the URL is OpenAI's)
    /// through `var`; `Ok(None)` when no model is set, meaning "no embeddings configured".
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, EmbedError> {
        let non_empty = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let Some(model) = non_empty("KODIK_EMBEDDINGS_MODEL") else { return Ok(None) };
        let url = non_empty("KODIK_EMBEDDINGS_URL").unwrap_or_else(|| crate::config::OPENAI_BASE_URL.to_owned());
        let openai = url.starts_with(crate::config::OPENAI_BASE_URL);
        let key = non_empty("KODIK_EMBEDDINGS_KEY").or_else(|| if openai { non_empty("OPENAI_API_KEY") } else { None });
        if openai && key.is_none() {
            return Err(EmbedError::MissingKey);
        }
        let mut config = Self::new(url, model);
        config.api_key = key;
        Ok(Some(config))
    }

    /// Sets the API key, sent as `authorization: Bearer KEY`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets how many texts go into one request (at least 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Asks for vectors of `n` dimensions (see [`dimensions`](Self::dimensions)).
    pub fn dimensions(mut self, n: usize) -> Self {
        self.dimensions = Some(n);
        self
    }

    /// Sets how many extra tries a failed request gets.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }

    /// Sets the first backoff used when the server sends no `Retry-After`.
    pub fn retry_base_delay(mut self, d: Duration) -> Self {
        self.retry_base_delay = d;
        self
    }

    /// Sets the longest wait between tries.
    pub fn max_retry_wait(mut self, d: Duration) -> Self {
        self.max_retry_wait = d;
        self
    }

    /// Sets how long one request may take.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    fn redact(&self, text: String) -> String {
        match self.api_key.as_deref() {
            Some(key) if key.len() >= 4 && text.contains(key) => text.replace(key, "<redacted>"),
            _ => text,
        }
    }
}

/// The `/v1/embeddings` client. Cheap to clone behind an `Arc`.
#[derive(Debug)]
pub struct EmbeddingsClient {
    http: reqwest::Client,
    config: EmbeddingsConfig,
    url: String,
    /// The vectors' length: configured, or learnt from the first answer.
    dimension: OnceLock<usize>,
}

enum Failure {
    /// Worth another try (429, 5xx, connection failure, timeout).
    Retry { error: EmbedError, retry_after: Option<Duration> },
    /// Final.
    Stop(EmbedError),
}

impl EmbeddingsClient {
    /// A client for `config`; fails on a base URL that is not http(s).
    pub fn new(config: EmbeddingsConfig) -> Result<Self, EmbedError> {
        if !config.base_url.starts_with("http://") && !config.base_url.starts_with("https://") {
            return Err(EmbedError::Config(format!(
                "base URL `{}` must start with http:// or https://",
                without_secrets(&config.base_url)
            )));
        }
        if config.model.trim().is_empty() {
            return Err(EmbedError::Config("no embedding model named".into()));
        }
        crate::transport::install_crypto();
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .connect_timeout(Duration::from_secs(15).min(config.request_timeout))
            .build()
            .map_err(|e| EmbedError::Config(format!("could not build the HTTP client: {e}")))?;
        let dimension = OnceLock::new();
        if let Some(n) = config.dimensions {
            let _ = dimension.set(n);
        }
        let url = format!("{}/embeddings", config.base_url);
        Ok(Self { http, config, url, dimension })
    }

    /// The configuration in use.
    pub fn config(&self) -> &EmbeddingsConfig {
        &self.config
    }

    async fn batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = json!({ "model": self.config.model, "input": texts });
        if let Some(n) = self.config.dimensions {
            body["dimensions"] = json!(n);
        }
        let body =
            serde_json::to_vec(&body).map_err(|e| EmbedError::Config(format!("request not serializable: {e}")))?;
        let mut attempt = 0u32;
        loop {
            let (error, retry_after) = match self.attempt(&body, texts.len()).await {
                Ok(vectors) => return Ok(vectors),
                Err(Failure::Stop(e)) => return Err(e),
                Err(Failure::Retry { error, retry_after }) => (error, retry_after),
            };
            // A server asking for a longer pause than we wait is answered at once: the caller
            // keeps what it has and comes back later, instead of stalling.
            let too_long = retry_after.is_some_and(|d| d > self.config.max_retry_wait);
            if attempt >= self.config.retries || too_long {
                return Err(error);
            }
            let backoff = self.config.retry_base_delay.saturating_mul(1 << attempt.min(16));
            let wait = retry_after.unwrap_or(backoff).min(self.config.max_retry_wait);
            tracing::debug!(attempt, ?wait, "embedding request failed ({error}); retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, body: &[u8], count: usize) -> Result<Vec<Vec<f32>>, Failure> {
        let mut request = self.http.post(&self.url).header("content-type", "application/json").body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let timeout = self.config.request_timeout;
        let timed_out = || Failure::Retry {
            error: EmbedError::Unreachable(format!(
                "no answer from {} within {} s",
                without_secrets(&self.url),
                timeout.as_secs_f64()
            )),
            retry_after: None,
        };
        let answer = tokio::time::timeout(timeout, async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(86_400.0)))
            });
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, retry_after, text))
        })
        .await;
        let (status, retry_after, text) = match answer {
            Err(_) => return Err(timed_out()),
            Ok(Err(e)) => {
                let message = self.config.redact(transport_message(&e));
                return Err(Failure::Retry {
                    error: EmbedError::Unreachable(format!("{} ({})", message, without_secrets(&self.url))),
                    retry_after: None,
                });
            }
            Ok(Ok(answer)) => answer,
        };
        if status != 200 {
            let message = error_message(&self.config.redact(text));
            return Err(match status {
                401 | 403 if self.config.api_key.is_none() => Failure::Stop(EmbedError::MissingKey),
                401 | 403 => Failure::Stop(EmbedError::Refused { status, message }),
                429 => Failure::Retry { error: EmbedError::RateLimited { retry_after, message }, retry_after },
                404 => Failure::Stop(EmbedError::Http {
                    status,
                    message: format!(
                        "{message} (POST {}): check the base URL (OpenAI-compatible servers serve /v1/embeddings) \
                         and the model name",
                        without_secrets(&self.url)
                    ),
                }),
                s if s >= 500 => Failure::Retry { error: EmbedError::Http { status, message }, retry_after },
                _ => Failure::Stop(EmbedError::Http { status, message }),
            });
        }
        self.parse(&text, count).map_err(Failure::Stop)
    }

    fn parse(&self, text: &str, count: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            EmbedError::BadResponse(format!("not JSON ({e}): {}", crate::transport::excerpt(text.trim())))
        })?;
        let data = value.get("data").and_then(Value::as_array).ok_or_else(|| {
            EmbedError::BadResponse(format!("no `data` list in {}", crate::transport::excerpt(text.trim())))
        })?;
        if data.len() != count {
            return Err(EmbedError::BadResponse(format!("{} texts sent, {} vectors received", count, data.len())));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; count];
        for (position, item) in data.iter().enumerate() {
            // `index` says which input a vector is for; servers that leave it out answer in order.
            let index = item.get("index").and_then(Value::as_u64).map_or(position, |i| i as usize);
            let vector = item.get("embedding").and_then(Value::as_array).ok_or_else(|| {
                EmbedError::BadResponse(format!("item {position} has no `embedding` list of numbers"))
            })?;
            let vector: Vec<f32> = vector
                .iter()
                .map(|x| x.as_f64().filter(|x| x.is_finite()).map(|x| x as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| EmbedError::BadResponse(format!("item {position}'s embedding holds a non-number")))?;
            if vector.is_empty() {
                return Err(EmbedError::BadResponse(format!("item {position}'s embedding is empty")));
            }
            let want = *self.dimension.get_or_init(|| vector.len());
            if vector.len() != want {
                return Err(EmbedError::BadResponse(format!(
                    "a vector of {} dimensions where {want} were expected (did the server's model change?)",
                    vector.len()
                )));
            }
            match out.get_mut(index) {
                Some(slot @ None) => *slot = Some(vector),
                _ => return Err(EmbedError::BadResponse(format!("index {index} is out of range or repeated"))),
            }
        }
        // Every slot is filled: `count` distinct in-range indexes.
        Ok(out.into_iter().flatten().collect())
    }
}

#[async_trait]
impl Embedder for EmbeddingsClient {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn dimension(&self) -> Option<usize> {
        self.dimension.get().copied()
    }

    fn max_batch(&self) -> usize {
        self.config.batch_size.max(1)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size.max(1)) {
            out.extend(self.batch(batch).await?);
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// A loopback server with word-hashing vectors
// ---------------------------------------------------------------------------------------------

/// A deterministic "embedding" of `text`: its words (split at non-alphanumerics and camelCase,
/// lower-cased, crudely stemmed so `sessions`/`session` and `expired`/`expire` agree) hashed
/// into `dimension` signed buckets, L2-normalised. Texts sharing words land near each other,
/// which is all a test of ranking needs.
pub fn hash_embedding(text: &str, dimension: usize) -> Vec<f32> {
    let dimension = dimension.max(1);
    let mut v = vec![0f32; dimension];
    for word in words(text) {
        let h = fnv1a(word.as_bytes());
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[(h % dimension as u64) as usize] += sign;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_lowercase();
            current.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out.push(current);
    out.into_iter().filter(|w| w.chars().count() >= 3).map(|w| stem(&w))
}

fn stem(word: &str) -> String {
    let mut w = word;
    for suffix in ["ing", "ed", "es", "s"] {
        if w.len() > suffix.len() + 2 && w.ends_with(suffix) {
            w = &w[..w.len() - suffix.len()];
            break;
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w = &w[..w.len() - 1];
    }
    w.to_owned()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[derive(Debug, Default)]
struct ServerState {
    requests: Vec<RecordedRequest>,
    /// Answers to give instead of vectors, first come first served: `(status, retry_after)`.
    failures: VecDeque<(u16, Option<u64>)>,
    /// Every request fails with this status while set.
    failing: Option<u16>,
    key: Option<String>,
    delay: Duration,
    /// Requests holding a text longer than this many characters are refused with 400, as a
    /// small model's server refuses input over its context.
    max_chars: Option<usize>,
}

/// A loopback HTTP/1.1 server speaking `POST /v1/embeddings` with [`hash_embedding`] vectors,
/// for tests and demos without a model. It records every request (inputs included, also of
/// refused ones), can demand a key, fail on purpose, refuse long texts and answer slowly. The `data` list comes
/// back in reverse order, each item with its `index`, as a client must cope with. Dropping it
/// stops it.
#[derive(Debug)]
pub struct HashEmbeddingServer {
    addr: SocketAddr,
    dimension: usize,
    state: Arc<Mutex<ServerState>>,
    served: Arc<AtomicUsize>,
    /// Requests being answered now, and the most at once.
    in_flight: Arc<(AtomicUsize, AtomicUsize)>,
    stop: CancellationToken,
}

impl Drop for HashEmbeddingServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HashEmbeddingServer {
    /// Starts a server on `127.0.0.1:0` answering with vectors of `dimension` numbers.
    pub async fn start(dimension: usize) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(ServerState::default()));
        let served = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let stop = CancellationToken::new();
        let (task_state, task_served, task_stop) = (state.clone(), served.clone(), stop.clone());
        let task_in_flight = in_flight.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = task_stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut socket, _)) = accepted else { continue };
                let (state, served, stop) = (task_state.clone(), task_served.clone(), task_stop.clone());
                let in_flight = task_in_flight.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        _ = serve_embeddings(&mut socket, dimension, &state, &served, &in_flight) => {}
                    }
                });
            }
        });
        Ok(Self { addr, dimension, state, served, in_flight, stop })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL for [`EmbeddingsConfig::new`].
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The vectors' length.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Demands `authorization: Bearer KEY` (401 otherwise); `None` takes any request.
    pub fn require_key(&self, key: Option<&str>) {
        self.state().key = key.map(str::to_owned);
    }

    /// The next request is answered with `status` (and `Retry-After: secs` when given).
    pub fn fail_next(&self, status: u16, retry_after: Option<u64>) {
        self.state().failures.push_back((status, retry_after));
    }

    /// Every request is answered with `status` until this is called with `None`.
    pub fn set_failing(&self, status: Option<u16>) {
        self.state().failing = status;
    }

    /// Waits this long before answering each request.
    pub fn set_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    /// Refuses every request holding a text longer than `max` characters with HTTP 400
    /// `input too long: …`, as the server of a model with a small context does; `None` takes
    /// texts of any length.
    pub fn refuse_longer_than(&self, max: Option<usize>) {
        self.state().max_chars = max;
    }

    /// The requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests.clone()
    }

    /// Every input text received so far (refused requests' too), in arrival order.
    pub fn inputs(&self) -> Vec<String> {
        self.state().requests.iter().flat_map(|r| inputs_of(&r.body)).collect()
    }

    /// How many requests were answered with vectors.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.in_flight.1.load(Ordering::SeqCst)
    }
}

fn inputs_of(body: &Value) -> Vec<String> {
    match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

async fn serve_embeddings(
    socket: &mut tokio::net::TcpStream,
    dimension: usize,
    state: &Mutex<ServerState>,
    served: &AtomicUsize,
    in_flight: &(AtomicUsize, AtomicUsize),
) -> std::io::Result<()> {
    let Some(request) = read_request(socket).await? else { return Ok(()) };
    let now = in_flight.0.fetch_add(1, Ordering::SeqCst) + 1;
    in_flight.1.fetch_max(now, Ordering::SeqCst);
    let answered = answer_embeddings(socket, request, dimension, state, served).await;
    in_flight.0.fetch_sub(1, Ordering::SeqCst);
    answered
}

async fn answer_embeddings(
    socket: &mut tokio::net::TcpStream,
    request: RecordedRequest,
    dimension: usize,
    state: &Mutex<ServerState>,
    served: &AtomicUsize,
) -> std::io::Result<()> {
    let (failure, delay) = {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        s.requests.push(request.clone());
        let auth = request.headers.get("authorization").map(String::as_str);
        let failure = if !request.path.ends_with("/embeddings") {
            Some((404, None, format!("no route {}", request.path)))
        } else if s.key.as_ref().is_some_and(|k| auth != Some(format!("Bearer {k}").as_str())) {
            Some((401, None, "Incorrect API key provided".to_owned()))
        } else if let Some((status, after)) = s.failures.pop_front() {
            Some((status, after, format!("failing on purpose with {status}")))
        } else if let Some(status) = s.failing {
            Some((status, None, format!("failing on purpose with {status}")))
        } else {
            let longest = inputs_of(&request.body).iter().map(|t| t.chars().count()).max().unwrap_or(0);
            s.max_chars
                .filter(|max| longest > *max)
                .map(|max| (400, None, format!("input too long: {longest} characters, the model takes at most {max}")))
        };
        (failure, s.delay)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (status, extra, body) = match failure {
        Some((status, after, message)) => (
            status,
            after.map(|s| format!("retry-after: {s}\r\n")).unwrap_or_default(),
            json!({ "error": { "message": message } }).to_string(),
        ),
        None => {
            let model = request.body.get("model").cloned().unwrap_or(Value::Null);
            let inputs = inputs_of(&request.body);
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, text)| json!({ "object": "embedding", "index": i, "embedding": hash_embedding(text, dimension) }))
                .collect();
            served.fetch_add(1, Ordering::SeqCst);
            (200, String::new(), json!({ "object": "list", "data": data, "model": model }).to_string())
        }
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn l7_word_hashing_puts_texts_sharing_words_closer() {
        let q = hash_embedding("remove expired sessions", 256);
        let near = hash_embedding("fn purge_expired_sessions() { /* removes every session that expired */ }", 256);
        let far = hash_embedding("fn render_markdown_table(rows: &[Row]) -> String", 256);
        assert!(cosine(&q, &near) > cosine(&q, &far) + 0.2, "{} vs {}", cosine(&q, &near), cosine(&q, &far));
        assert_eq!(hash_embedding("same text", 64), hash_embedding("same text", 64));
    }
}
