//! [`ShellConfig`]: everything an embedder may tune.

use std::path::PathBuf;
use std::time::Duration;

use kodik_core::PreviewConfig;

use crate::interactive::{DEFAULT_PROMPT_MARKERS, InteractiveRules};

/// A `GIT_EDITOR` that fails at once and says why, instead of opening an editor nobody sees.
const FAILING_EDITOR: &str = "sh -c 'echo \"kodik: no interactive editor is available here; give the text on the \
                              command line (e.g. git commit -m \\\"…\\\")\" >&2; exit 1'";

/// The environment every command gets on top of the host's, so that common tools do not wait
/// for a human or print terminal control codes (S1, S6, S13).
pub fn default_env() -> Vec<(String, Option<String>)> {
    [
        ("TERM", "dumb"),
        ("NO_COLOR", "1"),
        ("CLICOLOR", "0"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("MANPAGER", "cat"),
        ("SYSTEMD_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GCM_INTERACTIVE", "never"),
        ("GIT_EDITOR", FAILING_EDITOR),
        ("EDITOR", "false"),
        ("VISUAL", "false"),
        ("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
        ("SSH_ASKPASS_REQUIRE", "never"),
        ("DEBIAN_FRONTEND", "noninteractive"),
        ("PIP_NO_INPUT", "1"),
        ("PYTHONUNBUFFERED", "1"),
        ("HISTFILE", "/dev/null"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
    .chain(["PROMPT_COMMAND", "HISTFILESIZE"].into_iter().map(|k| (k.to_string(), None)))
    .collect()
}

/// How the shell tools run commands.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// The shell binary run with `-c`; `None` finds bash, else sh.
    pub shell: Option<PathBuf>,
    /// Variables set (`Some`) or removed (`None`) on top of the host's environment.
    pub env: Vec<(String, Option<String>)>,
    /// Commands that may run at the same time. One more waits (within its call's timeout) while
    /// some running command has its call waiting in the foreground, and is refused with a clear
    /// error naming them when only background commands hold the slots.
    pub max_running: usize,
    /// How long a finished background command stays readable (G21).
    pub keep_finished: Duration,
    /// How many finished commands are kept at most; the oldest are freed first (G21).
    pub max_finished: usize,
    /// Time between SIGTERM and SIGKILL when stopping a process group (S10).
    pub kill_grace: Duration,
    /// S4: a default-timeout command goes to the background this long after another call of
    /// its turn finished.
    pub batch_grace: Duration,
    /// A prompt for a secret with no output after it for this long stops the command (S6).
    pub prompt_silence: Duration,
    /// Head and tail limits and the spool folder of the output preview (G17–G20).
    pub preview: PreviewConfig,
    /// The most bytes of one command's output saved to its full-output file; past it the file
    /// ends with a line saying so, and the result says the file holds only the start. Keeps a
    /// runaway command (a `yes` flood, a chatty server left in the background) from filling the
    /// disk (G9, G18).
    pub max_saved_output: u64,
    /// The interactive-command table (S6).
    pub rules: InteractiveRules,
    /// Words that make an unfinished last output line a prompt for a secret (S6).
    pub prompt_markers: Vec<String>,
    /// Refuse commands that name a `.kodikignore`d path (G16, best effort).
    pub check_ignored_paths: bool,
    /// The host hands terminal events to the model by themselves (an agent loop that puts them
    /// in the next request). `false` for a host that cannot (an MCP server, whose notifications
    /// reach the user at most): a backgrounded command's result then tells the model to collect
    /// the outcome with get_terminal_output instead of "do not poll" (S3, S5).
    pub events_reach_model: bool,
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            shell: None,
            env: default_env(),
            max_running: 16,
            keep_finished: Duration::from_secs(15 * 60),
            max_finished: 64,
            kill_grace: Duration::from_secs(1),
            batch_grace: Duration::from_secs(1),
            prompt_silence: Duration::from_millis(800),
            preview: PreviewConfig::default(),
            max_saved_output: 1 << 30,
            rules: InteractiveRules::standard(),
            prompt_markers: DEFAULT_PROMPT_MARKERS.iter().map(|s| s.to_string()).collect(),
            check_ignored_paths: true,
            events_reach_model: true,
        }
    }
}
