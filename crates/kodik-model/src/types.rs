//! The provider-neutral shapes: what goes into a request and what comes out of its stream.

use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call's input as the model wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ToolInput {
    /// A function tool's JSON arguments.
    Json(Value),
    /// A freeform (custom, grammar) tool's raw text, e.g. an `apply_patch` patch (P5).
    Freeform(String),
}

impl ToolInput {
    /// The model's own arguments text when it was not a JSON object: a decoder keeps such
    /// arguments (broken JSON, a call cut off by the output-token limit, an array) as
    /// [`Json`](Self::Json) holding the text unchanged, so the caller can tell the model what
    /// was wrong and the history replays what the model wrote.
    pub fn unparsed(&self) -> Option<&str> {
        match self {
            Self::Json(Value::String(text)) => Some(text),
            _ => None,
        }
    }

    /// The arguments as a JSON text for the wire: the model's own text when it was not a JSON
    /// object ([`unparsed`](Self::unparsed)), a freeform call in its JSON form (P5).
    pub fn arguments_text(&self) -> String {
        match self {
            Self::Json(Value::String(text)) => text.clone(),
            Self::Json(v) => v.to_string(),
            Self::Freeform(text) => serde_json::json!({ "input": text }).to_string(),
        }
    }

    /// The arguments a tool takes: JSON as is; freeform text as `{"input": text}`, the JSON form
    /// of a freeform tool (P5).
    pub fn into_args(self) -> Value {
        match self {
            Self::Json(v) => v,
            Self::Freeform(text) => serde_json::json!({ "input": text }),
        }
    }
}

/// One entry of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item {
    /// What the user said.
    User {
        /// The message.
        text: String,
    },
    /// What the model answered in text.
    Assistant {
        /// The answer.
        text: String,
    },
    /// A reasoning item the provider wants back on the next request (OpenAI Responses keeps
    /// encrypted reasoning this way); `raw` is the provider's item as it arrived. It goes back
    /// without its `id`: with `store: false` the provider keeps no item an id could refer to.
    Reasoning {
        /// The provider's item, verbatim.
        raw: Value,
    },
    /// A tool call the model made.
    ToolCall {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The input as the model wrote it.
        input: ToolInput,
    },
    /// The result of a tool call, as the model reads it.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The tool's name (Chat Completions and Anthropic want to know which call it was).
        name: String,
        /// The text the model reads.
        output: String,
        /// Whether the call failed (Anthropic's `is_error`).
        is_error: bool,
        /// Images the result carries (a screenshot, an image file read), sent with the text to
        /// providers whose tool results take images ([`ModelClient::supports_images`]); the
        /// others get only the text, which should say the images exist.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
}

/// An image in a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: String,
    /// The image, base64-encoded.
    pub data: String,
}

/// A tool as a request offers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The tool's name.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// A Lark grammar when the tool is sent as a freeform (custom) tool; only OpenAI Responses
    /// takes those, the other providers fail with [`ModelError::FreeformUnsupported`].
    pub freeform_grammar: Option<String>,
}

/// One request to the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The model id (`gpt-5`, `claude-sonnet-4-5`, `llama3.1`, …).
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub items: Vec<Item>,
    /// The tools offered.
    pub tools: Vec<ToolDef>,
    /// Whether the model may make several calls in one response.
    pub parallel_tool_calls: bool,
    /// A cap on the response's tokens.
    pub max_output_tokens: Option<u32>,
}

impl Request {
    /// Fails with [`ModelError::FreeformUnsupported`] when a freeform tool is offered, for the
    /// providers that take JSON-schema tools only.
    pub(crate) fn refuse_freeform(&self) -> Result<(), ModelError> {
        match self.tools.iter().find(|t| t.freeform_grammar.is_some()) {
            Some(tool) => Err(ModelError::FreeformUnsupported(tool.name.clone())),
            None => Ok(()),
        }
    }
}

/// Tokens (and cost, where the provider reports it) of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Of those, read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Of those, spent on reasoning.
    pub reasoning_tokens: u64,
    /// Cost in US dollars, when the provider reports it (OpenRouter does).
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds another response's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It made tool calls and waits for their results.
    ToolUse,
    /// It hit the output token cap.
    MaxTokens,
    /// The provider filtered or refused the content.
    ContentFilter,
    /// Anything else the provider said.
    Other,
}

/// What a response stream yields, in arrival order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelEvent {
    /// A piece of the answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A piece of reasoning summary text, when the provider streams it.
    ReasoningDelta {
        /// The new text.
        text: String,
    },
    /// The model began a tool call (its arguments follow).
    ToolCallStarted {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
    },
    /// A tool call's arguments are complete: the call may start now (G4).
    ToolCallDone {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The complete input.
        input: ToolInput,
    },
    /// An item to carry back on the next request (OpenAI reasoning), see [`Item::Reasoning`].
    Reasoning {
        /// The provider's item, verbatim.
        raw: Value,
    },
    /// The response is complete.
    Completed {
        /// Why the model stopped.
        stop_reason: StopReason,
        /// What it cost.
        usage: Usage,
    },
}

/// Why a request or its stream failed. No variant ever holds the API key.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Configuration is incomplete or wrong (no key, bad base URL, …).
    #[error("model client configuration: {0}")]
    Config(String),
    /// The provider answered with an HTTP error after retries.
    #[error("the provider answered HTTP {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The provider's error message (body excerpt).
        message: String,
    },
    /// The connection failed.
    #[error("could not reach the provider: {0}")]
    Transport(String),
    /// The stream sent nothing for too long.
    #[error("the response stream sent nothing for {0} s and was closed")]
    IdleTimeout(u64),
    /// The stream carried something that is not the provider's format.
    #[error("malformed event from the provider: {0}")]
    Malformed(String),
    /// The provider reported an error inside the stream.
    #[error("the provider reported an error: {0}")]
    Provider(String),
    /// A freeform tool was offered to a provider that cannot take one (P5).
    #[error(
        "`{0}` is a freeform (grammar) tool and this provider does not support freeform tools; disable it so the model gets create_file, edit_file and delete_file instead"
    )]
    FreeformUnsupported(String),
    /// The stream ended before the response was complete.
    #[error("the response stream ended before the response was complete")]
    Truncated,
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// How providers word "the request does not fit the model's context window" (OpenAI, vLLM,
/// Anthropic, Ollama, llama.cpp, OpenRouter), lower-case.
const OVERFLOW_PHRASES: [&str; 9] = [
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context limit",
    "context window",
    "context size",
    "prompt is too long",
    "too many tokens",
    "maximum prompt length",
];

impl ModelError {
    /// Whether the provider refused the request because it does not fit the model's context
    /// window: the caller can shrink the history and send it again.
    pub fn is_context_overflow(&self) -> bool {
        match self {
            Self::Http { status: 400 | 413 | 422, message } | Self::Provider(message) => {
                let m = message.to_ascii_lowercase();
                OVERFLOW_PHRASES.iter().any(|p| m.contains(p))
            }
            _ => false,
        }
    }

    /// The context window in tokens that an overflow error names, when it names one:
    /// "maximum context length is 32768 tokens" (OpenAI, vLLM), "… tokens > 200000 maximum"
    /// (Anthropic).
    pub fn context_limit(&self) -> Option<u64> {
        if !self.is_context_overflow() {
            return None;
        }
        let (Self::Http { message, .. } | Self::Provider(message)) = self else { return None };
        let m = message.to_ascii_lowercase();
        let number_at = |s: &str| -> Option<u64> {
            let digits: String = s.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == ',').collect();
            digits.replace(',', "").parse().ok()
        };
        if let Some(i) = m.find("maximum context length is") {
            return number_at(&m[i + "maximum context length is".len()..]);
        }
        // "… 210000 tokens > 200000 maximum": the number between '>' and "maximum".
        let end = m.find(" maximum")?;
        let start = m[..end].rfind('>')?;
        number_at(&m[start + 1..end])
    }
}

/// The events of one response, in arrival order; ends after [`ModelEvent::Completed`] or an error.
pub type EventStream = Pin<Box<dyn futures_core::Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A model that answers requests with a stream of events.
#[async_trait::async_trait]
pub trait ModelClient: Send + Sync {
    /// Sends `request`; the stream ends when the response is complete. Dropping the stream, or
    /// cancelling `cancel`, closes the connection.
    async fn stream(
        &self,
        request: &Request,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<EventStream, ModelError>;

    /// The model id this client sends by default.
    fn model(&self) -> &str;

    /// Whether the wire API takes freeform (custom, grammar) tools; only OpenAI Responses does.
    fn supports_freeform_tools(&self) -> bool {
        false
    }

    /// Whether tool results may carry images ([`Item::ToolResult::images`]): OpenAI Responses
    /// and Anthropic Messages; Chat Completions tool messages are text only.
    fn supports_images(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(message: &str) -> ModelError {
        ModelError::Http { status: 400, message: message.into() }
    }

    #[test]
    fn g20_context_overflow_errors_are_recognised_with_the_window_they_name() {
        let openai = http(
            "This model's maximum context length is 32768 tokens. However, your messages resulted in 35232 \
             tokens. (context_length_exceeded)",
        );
        assert!(openai.is_context_overflow());
        assert_eq!(openai.context_limit(), Some(32768));
        let anthropic = http("prompt is too long: 210000 tokens > 200000 maximum");
        assert_eq!(anthropic.context_limit(), Some(200_000));
        let llama = http("the request exceeds the available context size, try increasing it");
        assert!(llama.is_context_overflow());
        assert_eq!(llama.context_limit(), None);
        assert!(ModelError::Provider("input length exceeds the context length".into()).is_context_overflow());
        let both = http("input length and `max_tokens` exceed context limit: 195000 + 16384 > 200000, decrease input");
        assert!(both.is_context_overflow());
        // Other errors are not overflows.
        assert!(!http("The model `gpt-9` does not exist").is_context_overflow());
        let auth = ModelError::Http { status: 401, message: "maximum context length is 5 tokens".into() };
        assert!(!auth.is_context_overflow() && auth.context_limit().is_none());
        assert!(!ModelError::Truncated.is_context_overflow());
    }
}
