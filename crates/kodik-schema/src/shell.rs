//! Argument types of the shell tools: `shell`, `get_terminal_output`, `kill_terminal` (S8).
//!
//! `shell` accepts the parameter names other coding agents use (`cwd`, `working_directory`,
//! `timeout_ms`) and silently ignores their "run in background" flag; anything else, and a
//! command given as an argument list, is rejected before approval.

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use crate::{ToolArgs, spec};

/// The shortest wait of `shell`, in milliseconds; shorter timeouts count as this (S2).
pub const MIN_TIMEOUT_MS: u64 = 5_000;
/// The longest wait of `shell`, in milliseconds; longer timeouts count as this (S2).
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// The wait of `shell` when no timeout is given (S2).
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// Run one shell command.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line as ONE string, run by a non-interactive `bash -c` (pipes, `&&`,
    /// redirections and quoting work as in bash). Not a list of arguments. There is no
    /// terminal: stdin is closed, stdout and stderr are merged, colours are stripped.
    /// Do not start editors, pagers, REPLs or anything that asks for a password.
    #[serde(deserialize_with = "command_string")]
    pub command: String,
    /// One short sentence saying what the command does and why, shown to the user.
    #[serde(default)]
    pub description: Option<String>,
    /// How long to wait for the command, in milliseconds: default 5000, at least 5000, at most
    /// 60000 (values outside are clamped). A command still running then is NOT killed: it goes
    /// on in the background and its outcome arrives later by itself.
    #[serde(default, alias = "timeout_ms", deserialize_with = "lenient_millis")]
    pub timeout: Option<u64>,
    /// The folder to run in: relative to the workspace root or absolute. Default: the workspace root.
    #[serde(default, alias = "cwd", alias = "working_directory")]
    pub workdir: Option<String>,
    /// Set to true when the command changes things outside the workspace, deletes data, or
    /// talks to remote systems, so the user is asked before it runs.
    #[serde(default)]
    pub requires_approval: Option<bool>,
    /// Another agent's "run in background" flag, accepted and ignored: a command still
    /// running after its wait goes to the background anyway.
    #[serde(default, alias = "is_background", alias = "background")]
    #[schemars(skip)]
    pub run_in_background: Option<serde_json::Value>,
}

impl ShellArgs {
    /// The wait in milliseconds after clamping to 5000–60000 (S2).
    pub fn timeout_ms(&self) -> u64 {
        clamp_timeout(self.timeout)
    }

    /// Whether the caller left the timeout at its default (the S4 batch rule applies then).
    pub fn default_timeout(&self) -> bool {
        self.timeout.is_none()
    }
}

/// Clamps a requested wait to 5000–60000 ms, `None` meaning the default (S2).
pub fn clamp_timeout(requested: Option<u64>) -> u64 {
    requested.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(MIN_TIMEOUT_MS, MAX_TIMEOUT_MS)
}

impl ToolArgs for ShellArgs {
    const NAME: &'static str = "shell";
    const EFFECT: Effect = Effect::Process;
    const DESCRIPTION: &'static str = "Run a shell command (non-interactive bash, no terminal). Stdin is closed; \
stdout and stderr come back merged in arrival order with ANSI colours stripped, plus the real exit code. \
The call waits up to `timeout` ms (default 5000, clamped to 5000–60000). If the command is still running then, \
it is NOT killed: it keeps running in the background, the result gives its `terminal_id` and the output so far, \
and its final exit code and remaining output arrive later automatically as a terminal event — do not poll for it. \
Use get_terminal_output only to look at progress or fresh logs, and kill_terminal to stop it (e.g. a dev server). \
Commands that need a terminal, a password, SSH login, an editor, a pager or a REPL (vim, less, python without a \
script, ssh host without a command, sudo that prompts) are refused: ask the user to run those themselves. \
Long output shows its head and tail; the full output is saved to a file whose path is given.";
}

/// Show the new output and the state of a command that went to the background.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTerminalOutputArgs {
    /// The `terminal_id` a `shell` result gave.
    pub terminal_id: String,
}

impl ToolArgs for GetTerminalOutputArgs {
    const NAME: &'static str = "get_terminal_output";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Return the output a background command printed since you last saw it, and \
its state (running, or finished with its exit code). Only for an on-demand progress check: completion is \
delivered automatically as a terminal event.";
}

/// Stop a background command and its whole process group.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillTerminalArgs {
    /// The `terminal_id` a `shell` result gave.
    pub terminal_id: String,
}

impl ToolArgs for KillTerminalArgs {
    const NAME: &'static str = "kill_terminal";
    const EFFECT: Effect = Effect::Process;
    const DESCRIPTION: &'static str = "Stop a background command started by `shell` (SIGTERM to its whole process \
group, SIGKILL after a short grace), free its terminal, and return its state with the output not yet seen. \
The result's status is `stopped`.";
}

/// The specs of this module's tools.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<ShellArgs>(), spec::<GetTerminalOutputArgs>(), spec::<KillTerminalArgs>()]
}

/// `command` must be one string; an argument list gets a message saying how to fix it (S8).
fn command_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("the command line as one string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
            let mut words = Vec::new();
            while let Some(w) = seq.next_element::<serde_json::Value>()? {
                words.push(match w {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                });
            }
            Err(serde::de::Error::custom(format!(
                "`command` must be one shell command string, not a list of arguments; join the words into one \
                 string with shell quoting, e.g. {:?}",
                words.join(" ")
            )))
        }
    }
    d.deserialize_any(V)
}

/// A timeout given as any JSON number (or a numeric string); negative or fractional values are
/// fine, since the result is clamped anyway (S2: never rejected).
fn lenient_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number of milliseconds")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.max(0) as u64))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(if v.is_finite() && v > 0.0 { v.min(u64::MAX as f64) as u64 } else { 0 }))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v.trim().parse::<f64>() {
                Ok(n) => self.visit_f64(n),
                Err(_) => Err(E::custom(format!("`timeout` must be a number of milliseconds, got {v:?}"))),
            }
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<ShellArgs, kodik_core::ToolError> {
        kodik_core::parse_args::<ShellArgs>("shell", &v)
    }

    #[test]
    fn s8_aliases_are_accepted() {
        let a = parse(json!({"command": "ls", "cwd": "src", "timeout_ms": 7000})).unwrap();
        assert_eq!(a.workdir.as_deref(), Some("src"));
        assert_eq!(a.timeout, Some(7000));
        let b = parse(json!({"command": "ls", "working_directory": "x", "run_in_background": true})).unwrap();
        assert_eq!(b.workdir.as_deref(), Some("x"));
        assert!(parse(json!({"command": "ls", "is_background": true})).is_ok());
        assert!(parse(json!({"command": "ls", "background": false})).is_ok());
    }

    #[test]
    fn s8_argv_array_and_unknown_fields_are_rejected_with_a_clear_message() {
        let e = parse(json!({"command": ["git", "status"]})).unwrap_err().to_string();
        assert!(e.contains("one shell command string") && e.contains("git status"), "{e}");
        let e = parse(json!({"command": "ls", "mode": "background"})).unwrap_err().to_string();
        assert!(e.contains("mode"), "{e}");
    }

    #[test]
    fn s2_timeouts_are_clamped_never_rejected() {
        assert_eq!(parse(json!({"command": "x"})).unwrap().timeout_ms(), 5000);
        assert_eq!(parse(json!({"command": "x", "timeout": 10})).unwrap().timeout_ms(), 5000);
        assert_eq!(parse(json!({"command": "x", "timeout": -3})).unwrap().timeout_ms(), 5000);
        assert_eq!(parse(json!({"command": "x", "timeout": 12000.5})).unwrap().timeout_ms(), 12000);
        assert_eq!(parse(json!({"command": "x", "timeout": 3_600_000})).unwrap().timeout_ms(), 60000);
        assert_eq!(parse(json!({"command": "x", "timeout": "20000"})).unwrap().timeout_ms(), 20000);
    }

    #[test]
    fn s8_schema_hides_the_foreign_background_flag() {
        let s = crate::input_schema::<ShellArgs>();
        let props = s["properties"].as_object().unwrap();
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(names, ["command", "description", "timeout", "workdir", "requires_approval"]);
        assert_eq!(s["required"], json!(["command"]));
    }
}
