//! What a run reports: [`AgentEvent`]s as it goes, a [`RunOutcome`] at the end.

use kodik_core::ToolStatus;
use kodik_model::Usage;
use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model answered without calling a tool.
    Completed,
    /// The run made `max_turns` requests and the model still wanted to call tools.
    MaxTurns,
    /// The run's wall-clock limit ran out.
    MaxWall,
    /// The run's token budget ran out, or the model's answer stayed cut off at its
    /// output-token limit after being continued three times.
    MaxTokens,
    /// The caller cancelled the run.
    Cancelled,
    /// The model request failed (after the client's own retries).
    Failed,
}

impl RunStatus {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::MaxTurns => "max_turns",
            Self::MaxWall => "max_wall",
            Self::MaxTokens => "max_tokens",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// The process exit code a command-line host should use: 0 completed, 130 cancelled
    /// (as for SIGINT), 1 otherwise.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Completed => 0,
            Self::Cancelled => 130,
            _ => 1,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of [`Conversation::run`](crate::Conversation::run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// How the run ended.
    pub status: RunStatus,
    /// The model's last answer text (the final answer when `status` is `Completed`).
    pub final_text: String,
    /// Model requests made.
    pub turns: u32,
    /// Tokens (and cost) of the run, summed over its requests.
    pub usage: Usage,
    /// What went wrong, for every status but `Completed`.
    pub error: Option<String>,
}

/// Everything a host may show, in order. Serialized with a `type` tag in snake_case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A conversation was started or resumed.
    SessionStarted {
        /// Its id (the transcript's file name without `.jsonl`).
        session_id: String,
        /// The model id.
        model: String,
        /// The harness mode.
        mode: String,
        /// Whether an earlier transcript was reloaded.
        resumed: bool,
    },
    /// A run began with this message from the user (the task, or a follow-up).
    UserMessage {
        /// The message.
        text: String,
    },
    /// A model request is about to be sent.
    TurnStarted {
        /// 1-based within the run.
        turn: u32,
    },
    /// A piece of the answer text, as it streams.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// The reasoning summary of a turn, once it is complete (when the provider streams one).
    Reasoning {
        /// The summary text.
        text: String,
    },
    /// A tool call really started running (after approval and any wait for earlier calls).
    ToolCallStarted {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments.
        args: serde_json::Value,
    },
    /// A tool call settled, whether it ran or not.
    ToolCallFinished {
        /// The provider's call id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// How it ended.
        status: ToolStatus,
        /// Time from its start (0 when it never started).
        duration_ms: u64,
        /// The first ~2 KB of the text the model reads.
        output: String,
    },
    /// The turn's complete answer text, once, when the response is complete.
    AssistantMessage {
        /// The text.
        text: String,
    },
    /// A turn ended: the response and its calls' results are in the history.
    TurnCompleted {
        /// 1-based within the run.
        turn: u32,
        /// What the request cost.
        usage: Usage,
    },
    /// The model answered while commands it left in the background still run: the run waits
    /// for the first of them to settle, at most `up_to_secs` (its terminal event then goes to
    /// the model in one more turn).
    WaitingForBackground {
        /// The terminals still running, as `term-N (`command`)`.
        terminals: Vec<String>,
        /// The longest wait, in seconds.
        up_to_secs: u64,
    },
    /// The run ended.
    RunFinished {
        /// How.
        status: RunStatus,
        /// Model requests made.
        turns: u32,
        /// Tokens of the run.
        usage: Usage,
        /// The last answer text.
        final_text: String,
        /// What went wrong, if anything.
        error: Option<String>,
    },
}
