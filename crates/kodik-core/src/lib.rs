//! The core contract of kodik-tools.
//!
//! Every tool crate builds on these pieces and nothing else:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`tool`] | [`Tool`], [`TypedTool`], [`ToolSpec`], [`Effect`] |
//! | [`output`] | [`ToolCall`], [`ToolOutput`], [`ToolStatus`], [`Content`] |
//! | [`error`] | [`ToolError`], the one error type a tool returns to the model |
//! | [`workspace`] | [`Workspace`]: roots, path resolution, confinement, `.kodikignore`, [`Resource`] |
//! | [`session`] | [`Session`]: what was read at which version (E2, R4), the loop guard (G15) |
//! | [`hooks`] | [`Hooks`], [`Approver`], [`ApprovalPolicy`] |
//! | [`events`] | [`EventSink`] and [`Event`]: terminal events and progress |
//! | [`context`] | [`ToolContext`], handed to every call |
//! | [`registry`] | [`ToolRegistry`] and [`dispatch`]: validation → hooks → approval → call, in one span |
//! | [`order`] | [`CallOrder`]: which earlier calls a new one waits for (G2, G4) |
//! | [`text`] | detect, decode and re-encode file bytes (R6, E12) |
//! | [`preview`] | the bounded head+tail output buffer with a spool file (G17–G20) |
//! | [`ext`] | traits other crates implement: [`DiagnosticsProvider`], [`CommandInterceptor`] |
//! | [`embed`] | [`Embedder`]: texts to vectors for `codebase_search`, plugged in by the host |
//!
//! ```
//! use kodik_core::{ToolOutput, ToolStatus};
//! let out = ToolOutput::text("hello");
//! assert_eq!(out.status, ToolStatus::Success);
//! let json = serde_json::to_string(&out).unwrap();
//! assert_eq!(serde_json::from_str::<ToolOutput>(&json).unwrap(), out);
//! ```

pub mod context;
pub mod embed;
pub mod error;
pub mod events;
pub mod ext;
pub mod fs;
pub mod hooks;
pub mod order;
pub mod output;
pub mod preview;
pub mod registry;
pub mod session;
pub mod text;
pub mod tool;
pub mod workspace;

pub use context::{ToolContext, TurnSignals};
pub use embed::{EmbedError, Embedder};
pub use error::ToolError;
pub use events::{Event, EventSink, NullSink, TerminalEvent};
pub use ext::{
    CommandInterceptor, Diagnostic, DiagnosticSeverity, DiagnosticsProvider, PageRenderer, RenderRequest, RenderedPage,
};
pub use hooks::{Approval, ApprovalPolicy, ApprovalRequest, Approver, HookDecision, Hooks, NoHooks};
pub use order::CallOrder;
pub use output::{Content, ToolCall, ToolOutput, ToolStatus};
pub use preview::{OutputPreview, PreviewConfig, PreviewSummary};
pub use registry::{ToolRegistry, authorize, dispatch, execute};
pub use session::{FileVersion, LoopGuardVerdict, ReadRecord, Session};
pub use tool::{Effect, Tool, ToolSpec, TypedTool, parse_args, parse_owned_args};
pub use workspace::{IgnoreChecks, PathError, Resource, Settings, Workspace};

/// Re-exported so tools and embedders use the same token type.
pub use tokio_util::sync::CancellationToken;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
