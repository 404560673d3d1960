//! [`BodyDecoder`]: a provider's raw SSE body, fed in any chunks, to [`ModelEvent`]s — the code
//! the clients run on every response, usable without HTTP (offline analysis, benchmarks).

use std::collections::VecDeque;

use crate::anthropic::AnthropicDecoder;
use crate::chat::ChatDecoder;
use crate::config::Provider;
use crate::openai::ResponsesDecoder;
use crate::sse::SseParser;
use crate::transport::{Decoder, Flow};
use crate::types::{ModelError, ModelEvent};

/// Incremental decoder of one response body.
pub struct BodyDecoder {
    parser: SseParser,
    inner: Box<dyn Decoder>,
    completed: bool,
}

impl std::fmt::Debug for BodyDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyDecoder").field("completed", &self.completed).finish_non_exhaustive()
    }
}

impl BodyDecoder {
    /// A decoder for a body in `provider`'s wire format.
    pub fn new(provider: Provider) -> Self {
        let inner: Box<dyn Decoder> = match provider {
            Provider::OpenAiResponses => Box::new(ResponsesDecoder::default()),
            Provider::ChatCompletions => Box::new(ChatDecoder::default()),
            Provider::Anthropic => Box::new(AnthropicDecoder::default()),
        };
        Self { parser: SseParser::new(), inner, completed: false }
    }

    /// Decodes `chunk`, appending events to `out`. Returns `true` once the response is complete
    /// ([`ModelEvent::Completed`] was appended); bytes after that are ignored. After an error the
    /// decoder must not be fed again.
    pub fn feed(&mut self, chunk: &[u8], out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError> {
        if self.completed {
            return Ok(true);
        }
        let (inner, completed) = (&mut self.inner, &mut self.completed);
        self.parser.feed(chunk, |event| {
            if !*completed {
                *completed = inner.event(event, out)? == Flow::Done;
            }
            Ok::<(), ModelError>(())
        })?;
        Ok(self.completed)
    }

    /// The body ended. Fine when the response completed (some Chat Completions servers end a
    /// complete response without `[DONE]`; then `Completed` is appended now); otherwise
    /// [`ModelError::Truncated`].
    pub fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if self.completed {
            return Ok(());
        }
        if self.parser.has_pending() {
            return Err(ModelError::Truncated);
        }
        self.inner.end(out)?;
        self.completed = true;
        Ok(())
    }
}
