//! Capabilities one crate offers another through core, so tool crates never depend on each
//! other (DESIGN: arrows point down).

use std::path::Path;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::output::ToolOutput;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticSeverity {
    /// An error.
    Error,
    /// A warning.
    Warning,
    /// Information or a hint.
    Info,
}

/// One diagnostic of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// Severity.
    pub severity: DiagnosticSeverity,
    /// The message.
    pub message: String,
    /// The reporting tool (`pyright`, `tsc`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Reports diagnostics of a file after an edit (E9). kodik-lsp implements it.
#[async_trait]
pub trait DiagnosticsProvider: Send + Sync {
    /// Whether this provider has anything to say about `path`; `false` means no waiting at all.
    fn handles(&self, path: &Path) -> bool;

    /// Diagnostics for the file as just written.
    async fn diagnostics(&self, path: &Path, text: &str) -> Vec<Diagnostic>;
}

/// Takes over a shell command that is really a call to another tool, such as an
/// `apply_patch <<'EOF' … EOF` heredoc (P2). kodik-edit implements it; the shell consults it.
#[async_trait]
pub trait CommandInterceptor: Send + Sync {
    /// `Some(result)` when the command was handled here and no process must start.
    async fn intercept(&self, command: &str, workdir: &Path, cx: &ToolContext) -> Option<ToolOutput>;
}
