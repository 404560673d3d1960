//! [`AgentError`]: why a conversation could not be started or resumed.

use std::path::PathBuf;

/// Why a conversation could not be started or resumed. A run itself never fails with this
/// type: its problems end up in [`RunOutcome`](crate::RunOutcome).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A file or folder of the sessions directory could not be used.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done (`cannot create`, `cannot read`, …).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// No sessions directory was configured and the workspace has no root to put one under.
    #[error("no sessions directory: set AgentConfig::sessions_dir or give the workspace a root")]
    NoSessionsDir,
    /// A session id that cannot name a transcript file.
    #[error("`{0}` is not a session id (expected something like 20261201T041500.123Z-1a2b)")]
    BadId(String),
    /// `resume(id)` found no transcript with that id.
    #[error("no session `{id}` in {}", dir.display())]
    NotFound {
        /// The id asked for.
        id: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// `resume_last()` found no conversation to resume (sub-agents' conversations do not count).
    #[error("no session to resume in {}", dir.display())]
    NoSessions {
        /// Where transcripts were looked for.
        dir: PathBuf,
    },
    /// The conversation is open elsewhere: another process (another `kodik agent`) is running
    /// it, or it is still open in this one. Resuming it too would interleave two runs in one
    /// transcript.
    #[error(
        "conversation `{id}` is running in another kodik process: wait until it ends, leave it a message with \
         send_message, or start a new conversation"
    )]
    Running {
        /// The conversation's session id.
        id: String,
    },
    /// A transcript line (other than a partial last line) that is not a transcript record.
    #[error("{}:{line}: not a transcript record: {message}", path.display())]
    BadTranscript {
        /// The transcript.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What was wrong with it.
        message: String,
    },
}
