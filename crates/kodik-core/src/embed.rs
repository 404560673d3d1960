//! [`Embedder`]: turns text into vectors for meaning-based search (`codebase_search`, L7).
//!
//! A library cannot ship an embedding model, so the host plugs one in: kodik-model has an
//! OpenAI-compatible `/v1/embeddings` client (OpenAI, Ollama, LM Studio, vLLM, Voyage-style
//! servers), and a host may implement the trait over anything else (a local ONNX model, a
//! company gateway). kodik-search asks for it; kodik-tools wires the two together.

use std::time::Duration;

use async_trait::async_trait;

/// Why an [`Embedder`] could not embed a batch. Each message says what happened; the tool
/// that asked adds what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// No key is configured and the server wants one.
    #[error("the embedding server needs an API key and none is configured")]
    MissingKey,
    /// The server refused the key (HTTP 401/403).
    #[error("the embedding server refused the API key (HTTP {status}): {message}")]
    Refused {
        /// The HTTP status (401 or 403).
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Still rate limited after the client's retries.
    #[error("the embedding server is rate limiting requests{}: {message}", retry_after.map(|d| format!(" (it asks to retry after {} s)", d.as_secs().max(1))).unwrap_or_default())]
    RateLimited {
        /// How long the server asked to wait, when it said.
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
    },
    /// The server answered with another HTTP error (after retries, for 5xx).
    #[error("the embedding server answered HTTP {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The answer was not the embeddings asked for (not JSON, wrong count, wrong dimension, …).
    #[error("the embedding server's answer is unusable: {0}")]
    BadResponse(String),
    /// The server could not be reached (connection refused, DNS, timeout).
    #[error("could not reach the embedding server: {0}")]
    Unreachable(String),
    /// The embedder is misconfigured (bad base URL, …).
    #[error("embedding configuration: {0}")]
    Config(String),
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl EmbedError {
    /// What the user can do about it, for a tool's answer: `None` when there is nothing to add.
    pub fn advice(&self) -> Option<&'static str> {
        match self {
            Self::MissingKey | Self::Refused { .. } => {
                Some("Check the embedding API key the host is configured with (e.g. KODIK_EMBEDDINGS_KEY).")
            }
            Self::RateLimited { .. } => Some("Wait a little and ask again; what is indexed so far is kept."),
            Self::Unreachable(_) => Some(
                "Check that the embedding server is running and its URL is right (e.g. KODIK_EMBEDDINGS_URL); \
                 meanwhile use grep.",
            ),
            Self::Http { .. } | Self::BadResponse(_) | Self::Config(_) => {
                Some("Check the embedding server and model the host is configured with; meanwhile use grep.")
            }
            Self::Cancelled => None,
        }
    }
}

/// Turns texts into vectors. Implementations are cheap to share (`Arc<dyn Embedder>`).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// The model's name; an index built with one model is never searched with another's vectors.
    fn model(&self) -> &str;

    /// The vectors' length, when known before the first call (`None`: learnt from the first answer).
    fn dimension(&self) -> Option<usize>;

    /// The most texts one [`embed`](Self::embed) call should carry; callers split larger batches.
    fn max_batch(&self) -> usize {
        64
    }

    /// One vector per text, in the texts' order, all of the same length.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}
