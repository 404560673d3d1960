//! The reference agent loop.
//!
//! An [`Agent`] holds a model client, every tool, the tool context and the mode policy
//! ([`Harness`](kodik_harness::Harness)); a [`Conversation`] is one history with its transcript.
//! [`Conversation::run`] sends a user message and loops:
//!
//! - each request offers what the harness plans for the mode and model (G10–G12), the
//!   system prompt carries its guidance (G11);
//! - tool calls are handed to the scheduler the moment the stream completes them, so reads and
//!   commands run while the response still streams (G4); results come back in call order (G5);
//! - a tool error goes back to the model; a cancellation or a wall-clock limit aborts the
//!   stream and the calls, which get `cancelled` results in the history (G6);
//! - every item, with each result's full [`ToolOutput`](kodik_core::ToolOutput), goes to a
//!   JSON Lines transcript that [`Agent::resume`] reloads (G7);
//! - near the context window, old results shrink to one line and the path of their full
//!   output (G9, G20);
//! - what settles between requests — a background command (S3, S5), a background sub-agent's
//!   report ([`Notes`], A3) — goes into the next request as a note.
//!
//! Hosts follow a run through [`AgentEvent`]s ([`Agent::subscribe`]).

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod agent;
mod config;
mod error;
mod events;
mod observe;
mod transcript;

pub use agent::{Agent, Conversation, Notes, ToolSource};
pub use config::{AgentConfig, ApprovalMode};
pub use error::AgentError;
pub use events::{AgentEvent, RunOutcome, RunStatus};
pub use observe::model_text;
/// Re-exported so hosts use the same token type.
pub use tokio_util::sync::CancellationToken;
