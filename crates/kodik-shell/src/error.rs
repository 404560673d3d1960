//! [`ShellError`]: what can go wrong in the shell tools, worded for the model.

use kodik_core::ToolError;

use crate::interactive::Refusal;

/// A shell-tool failure. Each message tells the model what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The command would wait for a human (S6).
    #[error("{}", .0.message())]
    Interactive(Refusal),
    /// The command names a path hidden by `.kodikignore` (G16).
    #[error(
        "Refused: the command names `{0}`, which is excluded by .kodikignore and must not be accessed, not even \
         through the shell. Leave that file alone or ask the user."
    )]
    IgnoredPath(String),
    /// `apply_patch` used inside a longer command line, which no shell can run (P2).
    #[error(
        "Refused, nothing was run: `{0}` is not a program here; a patch is applied only when it is the whole \
         command: `apply_patch <<'EOF'` … `EOF` (optionally after `cd DIR &&`), or the apply_patch tool. Send the \
         patch alone in this call and the other commands in a separate shell call."
    )]
    PatchNotAlone(String),
    /// The working folder is not a folder.
    #[error("workdir `{0}` is not an existing folder; give a folder relative to the workspace or absolute")]
    BadWorkdir(String),
    /// Too many commands are running at once.
    #[error(
        "too many commands are still running ({running} of at most {max}): {list}. Stop one with kill_terminal, \
         or wait until one has ended (get_terminal_output shows whether it has), before starting another."
    )]
    TooManyRunning {
        /// How many run now.
        running: usize,
        /// The configured limit.
        max: usize,
        /// `id \`command\`` of each.
        list: String,
    },
    /// The shell could not be started.
    #[error("could not start `{shell}`: {source}")]
    Spawn {
        /// The shell binary.
        shell: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// No terminal by that id.
    #[error("no terminal `{id}`; {known}. Use the terminal_id a shell result gave.")]
    UnknownTerminal {
        /// The id asked for.
        id: String,
        /// The ids that exist, worded.
        known: String,
    },
    /// The terminal existed but was freed.
    #[error("terminal `{id}` is gone: {why}")]
    Freed {
        /// The id asked for.
        id: String,
        /// Why it was freed.
        why: String,
    },
}

impl ShellError {
    /// A short machine-readable kind for result metadata.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Interactive(_) => "interactive",
            Self::IgnoredPath(_) => "ignored_path",
            Self::PatchNotAlone(_) => "patch_not_alone",
            Self::BadWorkdir(_) => "bad_workdir",
            Self::TooManyRunning { .. } => "too_many_running",
            Self::Spawn { .. } => "spawn",
            Self::UnknownTerminal { .. } => "unknown_terminal",
            Self::Freed { .. } => "terminal_freed",
        }
    }
}

impl From<ShellError> for ToolError {
    fn from(e: ShellError) -> Self {
        ToolError::Failed(e.to_string())
    }
}
