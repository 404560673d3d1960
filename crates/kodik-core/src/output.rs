//! What goes into a tool and what comes out: [`ToolCall`], [`ToolOutput`], [`ToolStatus`].
//!
//! Outputs serialize losslessly (G7) so a conversation can be reloaded with its results, and
//! the tool's raw text is stored unchanged under its status (G8).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call the model made: its id, the tool's name and the raw JSON arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; results are matched back to calls by it.
    pub id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments exactly as the model sent them, as a JSON object: a provider's
    /// arguments string (OpenAI's `function_call.arguments`) is parsed first, since a string
    /// here is refused as the wrong type; a freeform tool's text (OpenAI's `apply_patch`) goes
    /// as `{"input": text}`; `null` means no arguments.
    #[serde(default)]
    pub args: Value,
}

impl ToolCall {
    /// A call with the given id, tool name and arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        Self { id: id.into(), name: name.into(), args }
    }
}

/// The one status every result carries (G8, S11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool did what was asked.
    Success,
    /// The tool ran and failed, or its arguments were invalid.
    Error,
    /// A hook or the user refused the call; it did not run (G3).
    Denied,
    /// The call was not run because of an earlier decision (e.g. a policy or a failed dependency).
    Skipped,
    /// The call was stopped by a cancellation (new user message, aborted response).
    Cancelled,
    /// The call ran past its time limit.
    TimedOut,
    /// A shell command stopped by the user or by `kill_terminal` (S11).
    Stopped,
}

impl ToolStatus {
    /// Every status, in declaration order.
    pub const ALL: [ToolStatus; 7] =
        [Self::Success, Self::Error, Self::Denied, Self::Skipped, Self::Cancelled, Self::TimedOut, Self::Stopped];

    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Denied => "denied",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of a result's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text, kept exactly as the tool produced it.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 of the image bytes.
        data: String,
        /// MIME type such as `image/png`.
        mime_type: String,
    },
}

impl Content {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// Image content from raw bytes.
    pub fn image(bytes: &[u8], mime_type: impl Into<String>) -> Self {
        use base64::Engine as _;
        Self::Image { data: base64::engine::general_purpose::STANDARD.encode(bytes), mime_type: mime_type.into() }
    }
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// How the call ended.
    pub status: ToolStatus,
    /// What the model sees.
    #[serde(default)]
    pub content: Vec<Content>,
    /// Structured facts about the call (diff, matched stage, exit code, …) for hosts and UIs.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub meta: Value,
    /// Where the complete output was saved when `content` holds only a preview (G9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output: Option<PathBuf>,
}

impl ToolOutput {
    /// A successful result holding one text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::with_status(ToolStatus::Success, text)
    }

    /// A result with the given status holding one text.
    pub fn with_status(status: ToolStatus, text: impl Into<String>) -> Self {
        Self { status, content: vec![Content::text(text)], meta: Value::Null, full_output: None }
    }

    /// An `error` result holding one text.
    pub fn error(text: impl Into<String>) -> Self {
        Self::with_status(ToolStatus::Error, text)
    }

    /// Attach structured metadata.
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = meta;
        self
    }

    /// Attach the path of the saved full output.
    pub fn with_full_output(mut self, path: Option<PathBuf>) -> Self {
        self.full_output = path;
        self
    }

    /// All text content joined with newlines (images are left out).
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text } = c {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// Whether the status is `success`.
    pub fn is_success(&self) -> bool {
        self.status == ToolStatus::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g7_outputs_round_trip_losslessly_for_every_status() {
        for status in ToolStatus::ALL {
            let out = ToolOutput {
                status,
                content: vec![Content::text("<b>raw & untouched</b>\n"), Content::image(&[1, 2, 3], "image/png")],
                meta: serde_json::json!({"exit_code": 3, "nested": {"a": [1, 2]}}),
                full_output: Some(PathBuf::from("/tmp/full.log")),
            };
            let json = serde_json::to_string(&out).unwrap();
            assert!(json.contains(&format!("\"status\":\"{}\"", status.as_str())), "{json}");
            let back: ToolOutput = serde_json::from_str(&json).unwrap();
            assert_eq!(back, out);
        }
    }

    #[test]
    fn g8_raw_markup_is_kept_unchanged() {
        let raw = "<?xml version=\"1.0\"?><a href=\"x\">&amp;</a>";
        let out = ToolOutput::text(raw);
        let back: ToolOutput = serde_json::from_str(&serde_json::to_string(&out).unwrap()).unwrap();
        assert_eq!(back.text_content(), raw);
    }
}
