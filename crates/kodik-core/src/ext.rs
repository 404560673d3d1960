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

    /// [`DiagnosticsProvider::diagnostics`], or why the file could not be checked (its server
    /// failed to start, crashed, or did not answer in time), so that an edit's result says so
    /// instead of reading like a file without errors. The default never fails; providers that
    /// can fail override it.
    async fn check(&self, path: &Path, text: &str) -> Result<Vec<Diagnostic>, String> {
        Ok(self.diagnostics(path, text).await)
    }
}

/// Takes over a shell command that is really a call to another tool, such as an
/// `apply_patch <<'EOF' … EOF` heredoc (P2). kodik-edit implements it; the shell consults it.
#[async_trait]
pub trait CommandInterceptor: Send + Sync {
    /// `Some(result)` when the command was handled here and no process must start.
    async fn intercept(&self, command: &str, workdir: &Path, cx: &ToolContext) -> Option<ToolOutput>;
}

/// What a [`PageRenderer`] is asked to load.
#[derive(Clone, Copy)]
pub struct RenderRequest<'a> {
    /// The page, already checked by the caller's address rules.
    pub url: &'a str,
    /// The caller's address rules for every request the page makes (its scripts, frames,
    /// redirects): `Err` names the rule that refused the URL, and the renderer must then not
    /// send that request. It may block briefly to resolve a name.
    pub allow_request: &'a (dyn Fn(&str) -> Result<(), String> + Send + Sync),
    /// How long the whole render may take.
    pub timeout: std::time::Duration,
    /// Stops the render; the renderer drops what it has in flight.
    pub cancel: &'a tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for RenderRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderRequest").field("url", &self.url).field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

/// Loads a page in a headless browser and returns the HTML of its rendered DOM, for pages that
/// are empty application shells until their JavaScript runs (W2). kodik-web asks for it; the
/// browser crate implements it; kodik-tools wires the two together.
#[async_trait]
pub trait PageRenderer: Send + Sync {
    /// The rendered DOM's HTML (`document.documentElement.outerHTML`) once the page settled, or
    /// a message saying why it could not be rendered.
    async fn render(&self, request: RenderRequest<'_>) -> Result<String, String>;

    /// [`render`](Self::render), also saying when the page was taken before it finished
    /// loading. The default never says so.
    async fn render_page(&self, request: RenderRequest<'_>) -> Result<RenderedPage, String> {
        self.render(request).await.map(|html| RenderedPage { html, incomplete: None })
    }
}

/// A page as [`PageRenderer::render_page`] took it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderedPage {
    /// The rendered DOM's HTML.
    pub html: String,
    /// Set when the page was taken while requests it made were still open (a long poll, a hung
    /// API call): a sentence for the reader naming them. Such a page may lack parts, so it is
    /// not kept as the page's complete copy.
    pub incomplete: Option<String>,
}
