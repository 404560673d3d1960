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

/// What a failed call's output says, within `max` bytes: all of it when it fits; else its first
/// line and as many of its last lines as fit, with `…` between. A command's log ends with what
/// went wrong and its exit code, which the first line alone never shows (K2, K9).
pub(crate) fn failure_gist(output: &str, max: usize) -> String {
    let t = output.trim();
    if t.len() <= max {
        return t.to_string();
    }
    let gap = if t.contains('\n') { "\n…\n" } else { " … " };
    let head = prefix_within(t.split('\n').next().unwrap_or(t).trim_end(), max / 4);
    let room = max.saturating_sub(head.len() + gap.len());
    // Whole last lines while they fit; the end of the last line when even it does not.
    let mut start = t.len();
    for (i, _) in t.rmatch_indices('\n') {
        if t.len() - (i + 1) > room {
            break;
        }
        start = i + 1;
    }
    let tail = if start == t.len() { suffix_within(t, room) } else { &t[start..] };
    format!("{head}{gap}{tail}")
}

/// The longest start of `s` within `max` bytes, cut at a character boundary.
fn prefix_within(s: &str, max: usize) -> &str {
    let mut cut = max.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// The longest end of `s` within `max` bytes, cut at a character boundary.
fn suffix_within(s: &str, max: usize) -> &str {
    let mut cut = s.len().saturating_sub(max);
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    &s[cut..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k9_failure_gist_keeps_short_output_whole_and_the_end_of_long_output() {
        assert_eq!(failure_gist("  a\nb\n[exit code 2]\n", 100), "a\nb\n[exit code 2]");
        let long = format!("{}\nlast line", "é".repeat(500));
        let gist = failure_gist(&long, 100);
        assert!(gist.len() <= 100 && gist.ends_with("\n…\nlast line"), "{gist}");
        let one = "ü".repeat(300);
        let gist = failure_gist(&one, 100);
        assert!(gist.len() <= 100 && gist.contains(" … "), "{gist}");
    }
}
