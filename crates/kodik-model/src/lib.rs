//! Streaming model clients with no tool knowledge.
//!
//! Three wire APIs — OpenAI Responses, Chat Completions (OpenRouter, Ollama, vLLM, llama.cpp)
//! and Anthropic Messages — turn into one stream of [`ModelEvent`]s. Each tool call is reported
//! by [`ModelEvent::ToolCallDone`] the moment its arguments are complete, while the rest of the
//! response still streams, so an agent can start it at once (G4).
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`types`] | [`Request`], [`Item`], [`ToolDef`], [`ModelEvent`], [`ToolInput`], [`Usage`], [`ModelClient`] |
//! | [`config`] | [`ModelConfig`] (builder, `from_env`), [`Provider`] |
//! | [`replay`] | [`Recording`](replay::Recording) files and the loopback [`ReplayServer`](replay::ReplayServer) |
//! | [`decode`] | [`BodyDecoder`](decode::BodyDecoder): a raw body to events without HTTP |
//! | [`sse`] | the incremental SSE parser |
//! | [`embeddings`] | [`EmbeddingsClient`]: `/v1/embeddings` for `codebase_search` ([`kodik_core::Embedder`]) |
//!
//! [`client`] builds the client a configuration names.

use std::sync::Arc;

pub mod anthropic;
pub mod chat;
pub mod config;
pub mod decode;
pub mod embeddings;
pub mod openai;
pub mod replay;
pub mod sse;
mod transport;
pub mod types;

pub use anthropic::AnthropicClient;
pub use chat::ChatClient;
pub use config::{ModelConfig, Provider};
pub use embeddings::{EmbeddingsClient, EmbeddingsConfig, HashEmbeddingServer};
pub use openai::ResponsesClient;
/// What [`ModelClient::stream`] is cancelled with; the same type kodik-core and kodik-agent
/// re-export, so a host needs no `tokio-util` dependency of its own.
pub use tokio_util::sync::CancellationToken;
pub use types::{
    EventStream, Image, Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolDef, ToolInput, Usage,
};

/// The client for `config.provider`.
pub fn client(config: ModelConfig) -> Result<Arc<dyn ModelClient>, ModelError> {
    match config.provider {
        Provider::OpenAiResponses => Ok(Arc::new(ResponsesClient::new(config)?)),
        Provider::ChatCompletions => Ok(Arc::new(ChatClient::new(config)?)),
        Provider::Anthropic => Ok(Arc::new(AnthropicClient::new(config)?)),
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
