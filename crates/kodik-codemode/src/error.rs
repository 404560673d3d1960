//! The typed errors a script ends with (K9).

use serde::{Deserialize, Serialize};

/// Why a script stopped without a result (K9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The script ran past `timeout` (or its CPU backstop).
    TimeoutExceeded,
    /// The script made more than `max-tool-calls` calls.
    ToolCallLimitExceeded,
    /// The process heap grew past `memory-limit-mb` while the script ran.
    MemoryLimitExceeded,
    /// The code is not valid JavaScript.
    ParseError,
    /// A call named a tool scripts cannot call.
    UnknownTool,
    /// A call's arguments were refused before the tool ran.
    InvalidToolInput,
    /// A tool call failed and the script did not catch it.
    ToolFailure,
    /// The script threw, or broke a runtime limit (stack depth).
    ExecutionFailure,
    /// The script's promise never settled: nothing was left to wait for.
    UnsettledPromise,
    /// The host cancelled the script.
    Cancelled,
}

impl ErrorKind {
    /// The name the model reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TimeoutExceeded => "TimeoutExceeded",
            Self::ToolCallLimitExceeded => "ToolCallLimitExceeded",
            Self::MemoryLimitExceeded => "MemoryLimitExceeded",
            Self::ParseError => "ParseError",
            Self::UnknownTool => "UnknownTool",
            Self::InvalidToolInput => "InvalidToolInput",
            Self::ToolFailure => "ToolFailure",
            Self::ExecutionFailure => "ExecutionFailure",
            Self::UnsettledPromise => "UnsettledPromise",
            Self::Cancelled => "Cancelled",
        }
    }

    /// The kind named `s` (as thrown by the prelude, `error.name`).
    pub(crate) fn from_js_name(s: &str) -> Option<Self> {
        Some(match s {
            "ToolError" => Self::ToolFailure,
            "UnknownTool" => Self::UnknownTool,
            "InvalidToolInput" => Self::InvalidToolInput,
            "ToolCallLimitExceeded" => Self::ToolCallLimitExceeded,
            _ => return None,
        })
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A script's error: kind, message and, when known, the line and column in the submitted code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}{}: {message}", location(*.line, *.column))]
pub struct ScriptError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Worded for the model.
    pub message: String,
    /// 1-based line in the submitted code.
    pub line: Option<u32>,
    /// 1-based column.
    pub column: Option<u32>,
}

fn location(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

impl ScriptError {
    /// An error without a position.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), line: None, column: None }
    }

    /// With a position.
    pub fn at(mut self, line: Option<u32>, column: Option<u32>) -> Self {
        self.line = line;
        self.column = column;
        self
    }
}
