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

pub mod types;

pub use types::{
    EventStream, Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolDef, ToolInput, Usage,
};
