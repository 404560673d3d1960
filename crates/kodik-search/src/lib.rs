//! `read_file`, `glob` and `grep` for kodik-tools, on ripgrep's own engine, and `codebase_search`.
//!
//! | module | tool | SPEC |
//! | --- | --- | --- |
//! | [`read`] | [`ReadFileTool`]: numbered lines, 16 KB per call, ranges, encodings, images | R1–R6 |
//! | [`glob`] | [`GlobTool`]: files by pattern, newest first | GL1 |
//! | [`grep`] | [`GrepTool`]: regex search with ripgrep's options | GR1–GR5 |
//! | [`codebase`] | [`CodebaseSearchTool`]: meaning-based search over a self-updating vector index (needs an [`Embedder`]) | L7 |
//!
//! Every path goes through [`kodik_core::Workspace`] (confinement and `.kodikignore`, G16), every
//! walk through [`Workspace::walker`](kodik_core::Workspace::walker) (`.gitignore`, `.ignore`,
//! `.kodikignore`), and every repeated identical call through the session's loop guard (G15):
//! an unchanged repeat gets a one-line "unchanged" result instead of the same output again.
//! All three tools are [`Effect::ReadOnly`](kodik_core::Effect::ReadOnly) and do their file work
//! in `tokio::task::spawn_blocking`.
//!
//! ```no_run
//! # async fn demo() {
//! use kodik_core::{ToolContext, ToolRegistry, Workspace};
//! let mut registry = ToolRegistry::new();
//! kodik_search::SearchToolset::new().register(&mut registry);
//! let cx = ToolContext::new(Workspace::new(".").unwrap());
//! let grep = registry.get("grep").unwrap();
//! let out = grep.call(serde_json::json!({"pattern": "fn main", "output_mode": "content"}), &cx).await;
//! println!("{}", out.text_content());
//! # }
//! ```

pub mod codebase;
mod config;
mod error;
pub mod glob;
pub mod grep;
mod guard;
mod image;
pub mod read;
mod stream;
mod util;

pub use codebase::{CodebaseIndex, CodebaseSearchTool, IndexConfig, IndexStatus};
pub use config::SearchConfig;
pub use error::SearchError;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use read::ReadFileTool;

use std::sync::Arc;

use kodik_core::{Embedder, ToolRegistry};

/// The search tools with one shared configuration; what the `kodik-tools` facade registers.
/// `codebase_search` is among them only when an embedder (or an index) is given.
#[derive(Debug, Clone, Default)]
pub struct SearchToolset {
    config: SearchConfig,
    codebase: Option<Arc<CodebaseIndex>>,
}

impl SearchToolset {
    /// The tools with default limits (see [`SearchConfig`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The tools with the given limits.
    pub fn with_config(config: SearchConfig) -> Self {
        Self { config, codebase: None }
    }

    /// Offers `codebase_search` (L7) over an index of `embedder`'s vectors with default limits
    /// and the per-user cache folder (see [`IndexConfig`]). Without an embedder the tool is not
    /// offered at all.
    pub fn embedder(self, embedder: Arc<dyn Embedder>) -> Self {
        self.codebase_index(Arc::new(CodebaseIndex::new(embedder)))
    }

    /// Offers `codebase_search` over `index`, which the host keeps to [`warm`](CodebaseIndex::warm)
    /// it at start or show its [`status`](CodebaseIndex::status).
    pub fn codebase_index(mut self, index: Arc<CodebaseIndex>) -> Self {
        self.codebase = Some(index);
        self
    }

    /// The index behind `codebase_search`, when it is offered.
    pub fn index(&self) -> Option<&Arc<CodebaseIndex>> {
        self.codebase.as_ref()
    }

    /// The model's context window in tokens; the read size limit (R3) is derived from it.
    pub fn context_window_tokens(mut self, tokens: usize) -> Self {
        self.config.context_window_tokens = tokens;
        self
    }

    /// An explicit size limit for reading a text file whole (R3), overriding the derived one.
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.config.max_file_bytes = Some(bytes);
        self
    }

    /// How many files `glob` lists before it only counts the rest.
    pub fn glob_limit(mut self, limit: usize) -> Self {
        self.config.glob_limit = limit;
        self
    }

    /// How many entries `grep` shows when the call gives no `head_limit`.
    pub fn grep_head_limit(mut self, limit: usize) -> Self {
        self.config.grep_head_limit = limit;
        self
    }

    /// Where `grep` saves its full result when an answer shows only part of it; `None` saves nothing.
    pub fn spool_dir(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.config.spool_dir = dir;
        self
    }

    /// Worker threads for walks (0: ripgrep's default, one per core up to 12).
    pub fn threads(mut self, threads: usize) -> Self {
        self.config.threads = threads;
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// Registers `read_file`, `glob` and `grep`, and `codebase_search` when an embedder was given.
    pub fn register(&self, registry: &mut ToolRegistry) {
        registry.register(ReadFileTool::new(self.config.clone()));
        registry.register(GlobTool::new(self.config.clone()));
        registry.register(GrepTool::new(self.config.clone()));
        if let Some(index) = &self.codebase {
            registry.register(CodebaseSearchTool::new(index.clone()));
        }
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g4_toolset_registers_three_read_only_tools_with_the_schema_specs() {
        let mut registry = ToolRegistry::new();
        SearchToolset::new().register(&mut registry);
        assert_eq!(registry.names().collect::<Vec<_>>(), ["glob", "grep", "read_file"]);
        for spec in kodik_schema::search::specs() {
            let registered = registry.get(&spec.name).unwrap().spec();
            assert_eq!(registered, &spec);
            assert_eq!(registered.effect, kodik_core::Effect::ReadOnly);
            assert!(registered.streaming_start, "reads and searches start while the response streams");
        }
    }
}
