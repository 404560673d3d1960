//! `shell`, `get_terminal_output` and `kill_terminal`: a process runner for AI agents that never
//! hangs the agent and never loses output (SPEC section S, G16–G21).
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`ShellToolset`] | the shared terminal table; registers the three tools, host API ([`ShellToolset::user_stop`]) |
//! | [`config`] | [`ShellConfig`]: shell, hardened environment, limits, preview, rules |
//! | [`interactive`] | the S6 table of commands that would wait for a human, and prompt detection |
//! | [`ansi`] | the streaming ANSI/VT escape stripper (S1) |
//! | [`tools`] | the three [`kodik_core::TypedTool`]s |
//! | [`error`] | [`ShellError`] |
//!
//! How a command runs: `bash -c` (else `sh -c`), started with `posix_spawn` as the leader of
//! its own session and process group, stdin from /dev/null, stdout and stderr on one pipe (so
//! they merge in arrival order), a hardened environment. A small reaper process per toolset
//! kills every live process group if the host dies. One pooled thread per command reads the
//! pipe into kodik-core's [`OutputPreview`](kodik_core::OutputPreview) (head + tail in memory,
//! everything in a spool file) and, on Linux through a pidfd, waits for the process. The
//! `shell` call waits up to its clamped timeout; a command still running then stays in the
//! table as a background terminal whose end is emitted as a [`kodik_core::TerminalEvent`].
//!
//! Unix only (Linux and macOS). Windows would need a Job Object instead of process groups
//! (kill-on-close for the whole tree, `TerminateJobObject` for kill_terminal), `cmd /c` or
//! PowerShell with `-NonInteractive`, a `CreatePipe` handle shared by stdout and stderr, and
//! `CREATE_NO_WINDOW`/`DETACHED_PROCESS` instead of a new session.

#![cfg(unix)]

pub mod ansi;
pub mod config;
pub mod error;
pub mod interactive;
mod process;
mod terminal;
pub mod tools;
mod words;

use std::sync::Arc;
use std::time::Duration;

use kodik_core::{PreviewConfig, TerminalEvent, ToolRegistry};

pub use config::{ShellConfig, default_env};
pub use error::ShellError;
pub use interactive::{InteractiveRule, InteractiveRules, Refusal, Trigger};
pub use tools::{GetTerminalOutputTool, KillTerminalTool, ShellTool};

use terminal::Table;

/// The three shell tools and the terminal table they share. Cheap to clone (clones share the
/// table). The table lives as long as the toolset or any registered tool: background commands
/// survive between calls (and between the lines of a `kodik batch` session); dropping the
/// last owner kills every process group still running.
#[derive(Clone)]
pub struct ShellToolset {
    table: Arc<Table>,
}

impl Default for ShellToolset {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ShellToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellToolset").field("shell", &self.table.shell).finish_non_exhaustive()
    }
}

impl ShellToolset {
    /// A toolset with the default configuration.
    pub fn new() -> Self {
        Self::with_config(ShellConfig::default())
    }

    /// A toolset with `config`.
    pub fn with_config(config: ShellConfig) -> Self {
        Self { table: Arc::new(Table::new(config)) }
    }

    /// The configuration in use.
    pub fn config(&self) -> &ShellConfig {
        &self.table.cfg
    }

    /// The same toolset with a changed configuration. Configure before registering: this
    /// builds a fresh terminal table.
    pub fn configure(self, f: impl FnOnce(&mut ShellConfig)) -> Self {
        let mut cfg = self.table.cfg.clone();
        f(&mut cfg);
        Self::with_config(cfg)
    }

    /// Run commands with this shell (given `-c`).
    pub fn shell(self, path: impl Into<std::path::PathBuf>) -> Self {
        let path = path.into();
        self.configure(|c| c.shell = Some(path))
    }

    /// Set an environment variable for every command.
    pub fn env(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (k, v) = (key.into(), value.into());
        self.configure(|c| {
            c.env.retain(|(name, _)| *name != k);
            c.env.push((k, Some(v)));
        })
    }

    /// Remove an environment variable for every command.
    pub fn unset_env(self, key: impl Into<String>) -> Self {
        let k = key.into();
        self.configure(|c| {
            c.env.retain(|(name, _)| *name != k);
            c.env.push((k, None));
        })
    }

    /// At most `n` commands running at once.
    pub fn max_running(self, n: usize) -> Self {
        self.configure(|c| c.max_running = n)
    }

    /// Keep finished background commands readable this long (G21).
    pub fn keep_finished(self, d: Duration) -> Self {
        self.configure(|c| c.keep_finished = d)
    }

    /// Time between SIGTERM and SIGKILL.
    pub fn kill_grace(self, d: Duration) -> Self {
        self.configure(|c| c.kill_grace = d)
    }

    /// Output preview limits and spool folder.
    pub fn preview(self, p: PreviewConfig) -> Self {
        self.configure(|c| c.preview = p)
    }

    /// Save at most `bytes` of one command's output to its full-output file (default 1 GiB).
    pub fn max_saved_output(self, bytes: u64) -> Self {
        self.configure(|c| c.max_saved_output = bytes)
    }

    /// For a host that cannot hand terminal events to the model by themselves (an MCP server):
    /// a backgrounded command's result says to collect its outcome with get_terminal_output
    /// instead of waiting for an event (S3, S5).
    pub fn events_not_delivered_to_model(self) -> Self {
        self.configure(|c| c.events_reach_model = false)
    }

    /// One more interactive-command rule (S6).
    pub fn rule(self, r: InteractiveRule) -> Self {
        self.configure(|c| {
            c.rules.push(r);
        })
    }

    /// The three tools, sharing this toolset's terminal table.
    pub fn tools(&self) -> (ShellTool, GetTerminalOutputTool, KillTerminalTool) {
        (
            ShellTool::new(Arc::clone(&self.table)),
            GetTerminalOutputTool::new(Arc::clone(&self.table)),
            KillTerminalTool::new(Arc::clone(&self.table)),
        )
    }

    /// Registers `shell`, `get_terminal_output` and `kill_terminal`.
    pub fn register(&self, registry: &mut ToolRegistry) {
        let (shell, output, kill) = self.tools();
        registry.register(shell).register(output).register(kill);
    }

    /// The host's user stops a command (S12): SIGTERM to its process group, SIGKILL after the
    /// grace. The stop is announced once, as a terminal event in the next shell-tool result
    /// (or through [`take_announcements`](Self::take_announcements)). `false` when no such
    /// command is running.
    pub fn user_stop(&self, terminal_id: &str) -> bool {
        self.table.user_stop(terminal_id)
    }

    /// The terminals whose command is still running (not counting processes a finished command
    /// left behind with `&`), for a host about to end that must wait for them or say that it
    /// stops them (`kodik batch` at the end of its input).
    pub fn running(&self) -> Vec<String> {
        self.table.running()
    }

    /// User stops not announced yet, for a host that puts them in the next user message; each
    /// is handed out once, here or in a result (S12).
    pub fn take_announcements(&self) -> Vec<TerminalEvent> {
        self.table.take_announcements()
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
