//! The `codemode` tool of kodik-tools (SPEC K1–K12): the model sends a JavaScript program; it
//! runs in a sandboxed boa_engine context, calls the other tools as `tools.<name>(args)`, and
//! only its output goes back to the model.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`config`] | [`CodeModeConfig`] (the `codemode:` config section and builder), [`Exposure`] |
//! | [`error`] | [`ErrorKind`], [`ScriptError`]: the typed errors a script ends with (K9) |
//! | `tool` | [`CodeModeTool`], the tool itself |
//! | `catalog` | exposure, signatures from JSON Schema, the budgeted catalog, `searchTools()` |
//! | `run` | the host side: nested calls through `kodik_core::dispatch`, limits, cancellation |
//! | `engine` | the engine boundary and its boa implementation |
//! | [`worker`] | scripts in a child process that is killed on timeout, cancellation or memory |
//!
//! Limitations worth knowing: the memory limit is a watchdog on the process's resident size
//! while the script runs (boa has no per-context heap limit), so it is approximate; a busy loop
//! after an `await` is stopped by boa's loop-iteration limit, sized to the time left, while the
//! host already answered TimeoutExceeded at the deadline; boa 0.22 drops a stack overflow
//! raised after an `await`, so it is inferred: at once when it ends the script's body, and, in
//! an async function the model wrote, when the script is then left waiting for a promise that
//! can never settle (reported as that function's stack overflow, by name, not as
//! UnsettledPromise); and `split('\n')`, `indexOf` loops and global regex matches are slow on
//! multi-megabyte strings in boa 0.22, hence the native `lines()` and `grep()` helpers.

mod catalog;
pub mod config;
mod engine;
pub mod error;
mod output;
mod run;
mod tool;
pub mod worker;

pub use config::{CodeModeConfig, Exposure};
pub use error::{ErrorKind, ScriptError};
pub use tool::CodeModeTool;

/// The tool's name; never callable from a script (K5).
pub const TOOL_NAME: &str = "codemode";

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
