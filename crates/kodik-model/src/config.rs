//! Which provider to talk to and how: [`ModelConfig`] and [`Provider`].

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::types::ModelError;

/// OpenAI's API root.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API root.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// The wire API a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Provider {
    /// OpenAI Responses (`POST {base}/responses`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Chat Completions (`POST {base}/chat/completions`): OpenAI, OpenRouter, Ollama, vLLM, llama.cpp.
    #[serde(rename = "chat-completions")]
    ChatCompletions,
    /// Anthropic Messages (`POST {base}/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
}

impl Provider {
    /// The provider a model id implies: `claude*` → Anthropic; `gpt*`, `o1`…`o9*`, `codex*` →
    /// OpenAI Responses; anything else → Chat Completions.
    pub fn infer(model: &str) -> Self {
        let m = model.to_ascii_lowercase();
        let b = m.as_bytes();
        if m.starts_with("claude") {
            Self::Anthropic
        } else if m.starts_with("gpt")
            || m.starts_with("codex")
            || (b.len() >= 2 && b[0] == b'o' && (b'1'..=b'9').contains(&b[1]))
        {
            Self::OpenAiResponses
        } else {
            Self::ChatCompletions
        }
    }

    /// The name used in `KODIK_PROVIDER` and recordings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAiResponses => "openai-responses",
            Self::ChatCompletions => "chat-completions",
            Self::Anthropic => "anthropic",
        }
    }

    /// The API root used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAiResponses | Self::ChatCompletions => OPENAI_BASE_URL,
            Self::Anthropic => ANTHROPIC_BASE_URL,
        }
    }

    /// The environment variable holding this provider's key.
    pub fn key_var(self) -> &'static str {
        match self {
            Self::OpenAiResponses | Self::ChatCompletions => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai-responses" | "responses" | "openai" => Ok(Self::OpenAiResponses),
            "chat-completions" | "chat" => Ok(Self::ChatCompletions),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(ModelError::Config(format!(
                "unknown provider `{other}`; use openai-responses, chat-completions or anthropic"
            ))),
        }
    }
}

/// How to reach a model. Build with [`ModelConfig::new`] and the setters, or read the
/// environment with [`ModelConfig::from_env`]. `Debug` never shows the key.
#[derive(Clone)]
pub struct ModelConfig {
    /// The wire API.
    pub provider: Provider,
    /// The API root (`https://api.openai.com/v1`, `https://api.anthropic.com`, `http://127.0.0.1:11434/v1`, …).
    pub base_url: String,
    api_key: Option<String>,
    /// The model id sent when a request names none.
    pub model: String,
    /// Extra tries after a 429, a 5xx or a connection failure before the first body byte.
    pub retries: u32,
    /// The longest wait between tries, also when `Retry-After` asks for more.
    pub max_retry_wait: Duration,
    /// The first backoff when the provider gives no `Retry-After`; it doubles per try.
    pub retry_base_delay: Duration,
    /// How long a response stream may send nothing before it fails with [`ModelError::IdleTimeout`].
    pub idle_timeout: Duration,
    /// How long to wait for a response's status and headers.
    pub request_timeout: Duration,
    /// Where to save a [`Recording`](crate::replay::Recording) of every response, if anywhere.
    pub record_path: Option<PathBuf>,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("retries", &self.retries)
            .field("max_retry_wait", &self.max_retry_wait)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("idle_timeout", &self.idle_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("record_path", &self.record_path)
            .finish()
    }
}

impl ModelConfig {
    /// A configuration for `model` on `provider` with its default base URL, no key, 3 retries,
    /// a 120 s idle timeout and a 120 s wait for response headers.
    pub fn new(provider: Provider, model: impl Into<String>) -> Self {
        Self {
            provider,
            base_url: provider.default_base_url().to_owned(),
            api_key: None,
            model: model.into(),
            retries: 3,
            max_retry_wait: Duration::from_secs(30),
            retry_base_delay: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(120),
            record_path: None,
        }
    }

    /// Reads `KODIK_MODEL`, `KODIK_PROVIDER` (else inferred from the model), `KODIK_BASE_URL`
    /// and the provider's key (`OPENAI_API_KEY` or `ANTHROPIC_API_KEY`).
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`ModelConfig::from_env`] over any variable lookup (tests, or a CLI that overrides some).
    /// A key is required unless `KODIK_BASE_URL` points elsewhere (local servers take none).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let non_empty = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let model = non_empty("KODIK_MODEL").ok_or_else(|| {
            ModelError::Config("no model: set KODIK_MODEL (e.g. gpt-5, claude-sonnet-4-5, llama3.1)".to_owned())
        })?;
        let provider = match non_empty("KODIK_PROVIDER") {
            Some(p) => p.parse()?,
            None => Provider::infer(&model),
        };
        let mut config = Self::new(provider, model.trim());
        let custom_base = non_empty("KODIK_BASE_URL");
        if let Some(base) = &custom_base {
            config = config.base_url(base.trim());
        }
        match non_empty(provider.key_var()) {
            Some(key) => config = config.api_key(key.trim()),
            None if custom_base.is_none() => {
                return Err(ModelError::Config(format!(
                    "no API key: set {} for {provider} (or KODIK_BASE_URL for a server that needs none)",
                    provider.key_var()
                )));
            }
            None => {}
        }
        Ok(config)
    }

    /// Sets the API root; a trailing `/` is dropped.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        let mut url = url.into();
        while url.ends_with('/') {
            url.pop();
        }
        self.base_url = url;
        self
    }

    /// Sets the API key.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the model id.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets how many extra tries a failed request gets.
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Sets the longest wait between tries.
    pub fn max_retry_wait(mut self, wait: Duration) -> Self {
        self.max_retry_wait = wait;
        self
    }

    /// Sets the first backoff used when the provider sends no `Retry-After`.
    pub fn retry_base_delay(mut self, delay: Duration) -> Self {
        self.retry_base_delay = delay;
        self
    }

    /// Sets the idle-stream timeout.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the wait for response headers.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Records every response (status, `Retry-After`, raw body; never the key or auth headers)
    /// into a [`Recording`](crate::replay::Recording) saved at `path` after each response.
    pub fn record_to(mut self, path: impl Into<PathBuf>) -> Self {
        self.record_path = Some(path.into());
        self
    }

    /// Whether a key is set (the key itself is never handed out except to the HTTP layer).
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    pub(crate) fn key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// Replaces every occurrence of the key in `text`, for messages that echo request data.
    pub(crate) fn redact(&self, text: String) -> String {
        match self.api_key.as_deref() {
            Some(key) if key.len() >= 4 && text.contains(key) => text.replace(key, "<redacted>"),
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_is_inferred_from_the_model_name() {
        assert_eq!(Provider::infer("claude-sonnet-4-5"), Provider::Anthropic);
        assert_eq!(Provider::infer("gpt-5-codex"), Provider::OpenAiResponses);
        assert_eq!(Provider::infer("o3-mini"), Provider::OpenAiResponses);
        assert_eq!(Provider::infer("o4"), Provider::OpenAiResponses);
        assert_eq!(Provider::infer("codex-mini-latest"), Provider::OpenAiResponses);
        assert_eq!(Provider::infer("ollama"), Provider::ChatCompletions);
        assert_eq!(Provider::infer("llama3.1"), Provider::ChatCompletions);
        assert_eq!(Provider::infer("openai/gpt-5"), Provider::ChatCompletions);
    }
}
