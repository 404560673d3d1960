//! `lsp` and `read_lints` for Kodik (SPEC L1–L6, E9): language servers started, fed and kept
//! alive by the library, so an agent gets "go to definition" and compiler errors without an IDE.
//!
//! - [`LanguageServers`] starts one server per (server, project root) on first use — pyright
//!   (or basedpyright), typescript-language-server, clangd, rust-analyzer, gopls, whichever is
//!   installed, plus any [`ServerConfig`] you add — in its own process group, restarts it after a
//!   crash (bounded, with backoff) and kills the group when dropped. It is also the
//!   [`kodik_core::DiagnosticsProvider`] through which edits report errors (E9).
//! - [`transport`] is a small JSON-RPC layer: `Content-Length` frames, id → answer map, a
//!   per-request deadline that sends `$/cancelRequest`, server requests always answered, all
//!   pending requests failed when the server's output ends.
//! - [`LspTool`] and [`ReadLintsTool`] are the tools.
//!
//! LSP messages are raw `serde_json::Value`s read at the few places they are used, instead of
//! `lsp-types` (0.97 is stalled and its `Uri` is awkward) or a generated crate: the client
//! touches about twenty fields, and both `Location`/`LocationLink` and
//! `MarkupContent`/`MarkedString` shapes are handled where they are read.

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod config;
pub mod manager;
mod paths;
pub mod position;
pub mod server;
pub mod tools;
pub mod transport;
mod watch;

use std::sync::Arc;
use std::time::Duration;

pub use config::{LspConfig, ServerConfig};
pub use manager::LanguageServers;
pub use server::{Readiness, Server};
pub use tools::{LspTool, ReadLintsTool};

/// Why a language-server operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    /// No installed server handles this file type (L6).
    #[error(
        "no language server for {file_type} files{} — use grep to search the text instead",
        tried_suffix(.tried)
    )]
    NoServer {
        /// The extension (`.toml`) or a description.
        file_type: String,
        /// Programs that would serve it but are not installed.
        tried: Vec<String>,
    },
    /// The server's program could not be started.
    #[error("could not start the {server} language server (`{program}`): {source}")]
    Spawn {
        /// Server name.
        server: String,
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// `initialize` failed.
    #[error("the {server} language server did not start: {reason}")]
    Start {
        /// Server name.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The server crashed too often.
    #[error("the {server} language server crashed {restarts} times within {}s and was given up; use grep", .window.as_secs())]
    GaveUp {
        /// Server name.
        server: String,
        /// Restarts counted.
        restarts: u32,
        /// The window they were counted in.
        window: Duration,
    },
    /// None of the files asked for could be checked: their language server cannot run.
    #[error(
        "{files} could not be checked: {why}. Run the project's own checker (compiler, type checker) with the shell tool instead"
    )]
    Unchecked {
        /// Why the server is unavailable.
        why: String,
        /// The files, as shown to the model.
        files: String,
    },
    /// The server does not offer this operation.
    #[error("{server} does not support `{operation}`{hint}")]
    Unsupported {
        /// Server name.
        server: String,
        /// The operation asked.
        operation: String,
        /// What to use instead (starts with "; ").
        hint: String,
    },
    /// `read_lints` found nothing it can check; the message says why and what to do.
    #[error("{0}")]
    NothingToLint(String),
    /// A request failed.
    #[error(transparent)]
    Rpc(#[from] transport::RpcError),
    /// The symbol could not be found on the line (L3).
    #[error(transparent)]
    Pick(#[from] position::PickError),
    /// A path was refused (outside the workspace, under `.kodikignore`) or missing (L5).
    #[error(transparent)]
    Path(#[from] kodik_core::PathError),
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A lock was poisoned by a panic elsewhere.
    #[error("the language-server manager's state was poisoned by an earlier panic")]
    Poisoned,
    /// A bug in this crate, reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

fn tried_suffix(tried: &[String]) -> String {
    if tried.is_empty() {
        String::new()
    } else if tried.iter().any(|t| t.ends_with("(failed to start)")) {
        format!(" (none could be used: tried {})", tried.join(", "))
    } else {
        format!(" (none installed: tried {})", tried.join(", "))
    }
}

/// Both tools over one manager; what the `kodik-tools` facade registers.
#[derive(Debug, Clone)]
pub struct LspToolset {
    servers: Arc<LanguageServers>,
}

impl LspToolset {
    /// The tools over `servers`.
    pub fn new(servers: Arc<LanguageServers>) -> Self {
        Self { servers }
    }

    /// The shared manager (also the diagnostics provider for edits).
    pub fn servers(&self) -> &Arc<LanguageServers> {
        &self.servers
    }

    /// Registers `lsp` and `read_lints`.
    pub fn register(&self, registry: &mut kodik_core::ToolRegistry) {
        registry.register(LspTool::new(self.servers.clone()));
        registry.register(ReadLintsTool::new(self.servers.clone()));
    }
}
