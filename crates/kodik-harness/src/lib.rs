//! What the model is offered, per request.
//!
//! A [`Harness`] knows every tool (built-in and MCP) and decides, for one [`Mode`] and one
//! model, which tools go in the request's tool list, which are deferred behind `tool_search`
//! / `call_tool`, which the user switched off, and which the mode cannot offer:
//!
//! - **Modes (G11)**: Code, Debug, Plan, Ask, Educator, each with a structural policy and user
//!   switches; a switched-off tool disappears from the schemas and from the guidance. A change
//!   applies to the next [`Harness::plan`] — requests already built are not rewritten.
//! - **Model families (G10)**: OpenAI models get `apply_patch` instead of `create_file` /
//!   `edit_file` / `delete_file`; switching `apply_patch` off gives them the three back.
//! - **Deferred tools (G12)**: not in the tool list; found by [`ToolSearchTool`] (ranked by
//!   name and description words, results carry schemas) and run by [`CallToolTool`], so the
//!   tool list — and the prompt cache — never changes.
//! - **Ordering (G13)**: built-ins first, then MCP tools, each group sorted by name; only
//!   active tools count.
//! - **Loop guard (G15)**: [`RepeatGuard`] blocks the third identical call whose earlier
//!   attempts failed, were denied, were cancelled or changed nothing, as long as nothing it
//!   depends on changed (a successful edit or command, a file it names changing on disk);
//!   commands, web requests and browser actions are never blocked.

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod deferred;
mod guard;
mod policy;

pub use deferred::{CallToolTool, ToolSearchTool, rank_tools};
pub use guard::RepeatGuard;
pub use policy::{Availability, Harness, LeftOut, Mode, ModelFamily, RequestPlan, ToolEntry};
