//! [`ToolError`]: what went wrong in a call, worded for the model.

use crate::output::{ToolOutput, ToolStatus};
use crate::workspace::PathError;

/// An error a tool reports. Every variant's message is meant to be read by the model and
/// tells it what to do next; [`ToolError::into_output`] turns it into a result.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not fit the tool's schema (S8). Raised before any approval.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidInput {
        /// The tool whose arguments were wrong.
        tool: String,
        /// The offending field as a path (`edits[1].old_string`), when known.
        field: Option<String>,
        /// What was wrong.
        message: String,
    },
    /// No tool of that name exists.
    #[error("unknown tool `{name}`{}", suggestions_suffix(.suggestions))]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The closest existing names.
        suggestions: Vec<String>,
    },
    /// A path was refused or could not be resolved.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A hook or the approver refused the call.
    #[error("denied: {0}")]
    Denied(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The call ran out of time.
    #[error("timed out after {0} ms")]
    TimedOut(u64),
    /// An I/O error while touching a file, with the path and what was being done.
    #[error("{action} {path}: {source}")]
    Io {
        /// What the tool was doing (`reading`, `writing`, …).
        action: &'static str,
        /// The path involved.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Any other failure, already worded for the model.
    #[error("{0}")]
    Failed(String),
}

/// `; did you mean: a, b?` for a non-empty list of suggestions, else nothing: the one wording
/// every "unknown name" error uses.
pub fn suggestions_suffix(s: &[String]) -> String {
    if s.is_empty() { String::new() } else { format!("; did you mean: {}?", s.join(", ")) }
}

impl ToolError {
    /// A failure with a message for the model.
    pub fn failed(msg: impl Into<String>) -> Self {
        Self::Failed(msg.into())
    }

    /// An I/O error while doing `action` on `path`.
    pub fn io(action: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Self::Io { action, path: path.as_ref().display().to_string(), source }
    }

    /// The status this error maps to.
    pub fn status(&self) -> ToolStatus {
        match self {
            Self::Denied(_) => ToolStatus::Denied,
            Self::Cancelled => ToolStatus::Cancelled,
            Self::TimedOut(_) => ToolStatus::TimedOut,
            _ => ToolStatus::Error,
        }
    }

    /// A short machine-readable kind for result metadata.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid_input",
            Self::UnknownTool { .. } => "unknown_tool",
            Self::Path(_) => "path",
            Self::Denied(_) => "denied",
            Self::Cancelled => "cancelled",
            Self::TimedOut(_) => "timed_out",
            Self::Io { .. } => "io",
            Self::Failed(_) => "failed",
        }
    }

    /// The result the model sees for this error.
    pub fn into_output(self) -> ToolOutput {
        let mut meta = serde_json::json!({ "error_kind": self.kind() });
        if let Self::InvalidInput { field: Some(f), .. } = &self {
            meta["field"] = serde_json::Value::String(f.clone());
        }
        ToolOutput::with_status(self.status(), self.to_string()).with_meta(meta)
    }
}

impl From<ToolError> for ToolOutput {
    fn from(e: ToolError) -> Self {
        e.into_output()
    }
}
