//! MCP both ways, on [rmcp](https://docs.rs/rmcp).
//!
//! - [`McpServer`] serves a Kodik tool set to any MCP client (Claude Desktop, IDEs, the
//!   official SDKs) over stdio, or over streamable HTTP with one server per MCP session
//!   ([`serve_http`]: bearer token off loopback, Origin check, idle expiry, graceful drain).
//! - [`McpClient`] mounts other servers' tools (stdio or streamable HTTP, configured in the
//!   `mcpServers` shape, [`McpConfig`]) as Kodik tools named `server__tool` ([`McpTool`], A8,
//!   G13).
//!
//! The server:
//!
//! - `tools/list` returns the given [`ToolSpec`](kodik_core::ToolSpec)s in the order given
//!   (the harness's G13 order), with `readOnlyHint`/`destructiveHint`/`openWorldHint`
//!   annotations from their [`Effect`](kodik_core::Effect), corrected per tool where the
//!   effect says too little (`shell` and `codemode` are destructive, `create_file` only adds,
//!   `agent_status` reads).
//! - `tools/call` runs through a [`kodik_scheduler::CallStream`]: the client's overlapping
//!   requests are one turn's calls, so they run concurrently and mutations of one file keep
//!   their order (G1, G2); requests that do not overlap are separate batches for the shell's
//!   S4 rule. A request the client cancels cancels its call (G6).
//! - Results become MCP content (text and image blocks, raw text untouched: G8), with
//!   `isError` for every status but `success` and `structuredContent =
//!   {"status", "output", "meta", "full_output"}` ([`call_result`]; `output` is the content's
//!   text, for clients that give their model `structuredContent` instead of `content`). An unknown tool or invalid arguments
//!   come back as an `isError` result the model can act on, never as a protocol error.
//! - Terminal events and progress ([`kodik_core::Event`]) go to the client as
//!   `notifications/message` with logger `kodik` and the event's JSON as `data`, once the
//!   client is connected ([`events`]). Since most clients do not show those to their model, a
//!   background command's end is also appended to the next tool result ([`terminal_note`]).
//!   A running call's `Progress` events also go out as `notifications/progress` when its
//!   request carried a `progressToken`.
//!
//! ```no_run
//! # async fn run(scheduler: kodik_scheduler::Scheduler, cx: kodik_core::ToolContext,
//! #              tools: Vec<kodik_core::ToolSpec>) -> Result<(), kodik_mcp::McpError> {
//! kodik_mcp::McpServer::new(scheduler, cx, tools).serve_stdio().await
//! # }
//! ```

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod child;
pub mod client;
pub mod config;
mod convert;
pub mod events;
pub mod http;
mod images;
pub mod instructions;
pub mod logs;
mod server;
mod tasks;

pub use client::{ClientError, ClientOptions, DEPTH_VAR, MAX_DEPTH, McpClient, McpTool, RemovedTool};
pub use config::{ConfigError, McpConfig, ServerConfig};
pub use convert::{call_result, mcp_tool, terminal_note};
pub use events::McpEvents;
pub use http::{HttpError, HttpOptions, serve_http};
pub use instructions::instructions_section;
pub use server::{McpServer, Offering};

/// The rmcp version this crate speaks, re-exported for embedders that pass their own transport.
pub use rmcp;

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The MCP handshake with the client failed (closed early, bad `initialize`, …).
    #[error("the MCP client did not complete the handshake: {0}")]
    Initialize(Box<rmcp::service::ServerInitializeError>),
    /// The task serving the connection panicked or was aborted.
    #[error("the MCP service task failed: {0}")]
    Service(#[from] tokio::task::JoinError),
}

impl From<rmcp::service::ServerInitializeError> for McpError {
    fn from(e: rmcp::service::ServerInitializeError) -> Self {
        // Boxed: the rmcp error is large and this one travels through every `?`.
        Self::Initialize(Box::new(e))
    }
}
