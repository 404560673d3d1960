//! S6: commands that would wait for a human are refused before they start, from one table of
//! rules an embedder can extend; a password or passphrase prompt that shows up at run time is
//! caught from the output.

use std::fmt;
use std::sync::Arc;

use crate::words::{self, SimpleCommand};

/// A rule's own test: gets the program's arguments, program first; `true` means interactive.
pub type CustomTrigger = Arc<dyn Fn(&[String]) -> bool + Send + Sync>;

/// When a rule's program counts as interactive.
#[derive(Clone)]
pub enum Trigger {
    /// Always, unless one of these flags is given (`--version`, `top -b`, …).
    Always {
        /// Flags that make the program run without a human.
        unless: Vec<String>,
    },
    /// A REPL or client: interactive unless it is given a script.
    Repl {
        /// Flags that pass a script or a single command (`-c`, `-e`, `--command`, …).
        script_flags: Vec<String>,
        /// Flags that force the interactive prompt even with a script (`-i`).
        interactive_flags: Vec<String>,
        /// How many operands make it a script run (`python x.py` → 1, `sqlite3 db 'sql'` → 2);
        /// `None` when operands never do (`psql dbname` is still a prompt).
        operands_for_script: Option<usize>,
    },
    /// Only with one of these flags (`docker run -it`).
    WithFlags(Vec<String>),
    /// `ssh host` with no remote command.
    SshWithoutCommand,
    /// A program that asks for a password unless run by root or given one of these flags.
    PasswordUnless(Vec<String>),
    /// Anything else: gets the program's arguments (program first).
    Custom(CustomTrigger),
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Always { unless } => f.debug_struct("Always").field("unless", unless).finish(),
            Self::Repl { script_flags, interactive_flags, operands_for_script } => f
                .debug_struct("Repl")
                .field("script_flags", script_flags)
                .field("interactive_flags", interactive_flags)
                .field("operands_for_script", operands_for_script)
                .finish(),
            Self::WithFlags(v) => f.debug_tuple("WithFlags").field(v).finish(),
            Self::SshWithoutCommand => f.write_str("SshWithoutCommand"),
            Self::PasswordUnless(v) => f.debug_tuple("PasswordUnless").field(v).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// One row of the table: which programs, when, and what to tell the model.
#[derive(Debug, Clone)]
pub struct InteractiveRule {
    /// Program names (basename; a version suffix such as `python3.12` matches `python`).
    pub programs: Vec<String>,
    /// When the program is interactive.
    pub trigger: Trigger,
    /// What it is, for the message: "a Python REPL", "an editor".
    pub what: String,
    /// A non-interactive alternative, for the message (may be empty).
    pub advice: String,
    /// Fine when its output goes into a pipe (`man git | cat`).
    pub ok_when_piped: bool,
}

impl InteractiveRule {
    /// A rule for `programs` with `trigger`.
    pub fn new(programs: &[&str], trigger: Trigger, what: &str, advice: &str) -> Self {
        Self {
            programs: programs.iter().map(|p| p.to_string()).collect(),
            trigger,
            what: what.into(),
            advice: advice.into(),
            ok_when_piped: false,
        }
    }

    /// Allow the program when its output is piped on.
    pub fn ok_when_piped(mut self) -> Self {
        self.ok_when_piped = true;
        self
    }

    fn matches_program(&self, program: &str) -> bool {
        let base = program.rsplit('/').next().unwrap_or(program);
        let unversioned = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        self.programs.iter().any(|p| p == base || (!unversioned.is_empty() && p == unversioned))
    }

    /// `stdin_fed`: the command's stdin is a pipe, a file or a heredoc, never a terminal, so a
    /// REPL or `ssh host` reads it as a script and ends at its end.
    fn triggers(&self, args: &[String], is_root: bool, stdin_fed: bool) -> bool {
        let rest = args.get(1..).unwrap_or(&[]);
        match &self.trigger {
            Trigger::Always { unless } => !has_flag(rest, unless),
            Trigger::Repl { .. } | Trigger::SshWithoutCommand if stdin_fed => false,
            Trigger::Repl { script_flags, interactive_flags, operands_for_script } => {
                if has_flag(rest, interactive_flags) {
                    return true;
                }
                if has_flag(rest, script_flags) {
                    return false;
                }
                let operands = rest.iter().filter(|a| !a.starts_with('-') || *a == "-").count();
                operands_for_script.is_none_or(|n| operands < n)
            }
            Trigger::WithFlags(flags) => has_flag(rest, flags),
            // `-V` prints the version, `-G` the configuration, `-Q` what is supported.
            Trigger::SshWithoutCommand => !has_flag(rest, &v(&["-V", "-G", "-Q"])) && ssh_operands(rest) < 2,
            Trigger::PasswordUnless(flags) => !is_root && !has_flag(rest, flags),
            Trigger::Custom(f) => f(args),
        }
    }
}

/// Whether any argument is one of `flags`: exactly, as `--flag=value`, or a short flag with
/// its value attached (`-cprint(1)`).
fn has_flag(args: &[String], flags: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| {
        flags.iter().any(|f| {
            a == f
                || (f.starts_with("--") && a.starts_with(f.as_str()) && a.as_bytes().get(f.len()) == Some(&b'='))
                || (f.len() == 2
                    && f.starts_with('-')
                    && !f.starts_with("--")
                    && a.starts_with(f.as_str())
                    && !a.starts_with("--"))
        })
    })
}

/// Whether a `tmux` command line (program first) attaches to the terminal: bare `tmux`,
/// `attach`, or `new-session` without `-d`. Every other subcommand talks to the tmux server and
/// returns (`ls`, `kill-server`, `send-keys`, `capture-pane -p`).
fn tmux_attaches(args: &[String]) -> bool {
    let rest = args.get(1..).unwrap_or(&[]);
    let mut i = 0;
    while let Some(a) = rest.get(i).filter(|a| a.starts_with('-')) {
        match a.as_str() {
            // `-c` runs a shell command, `-V` prints the version: neither attaches.
            "-c" | "-V" => return false,
            "-L" | "-S" | "-f" | "-T" => i += 2,
            _ => i += 1,
        }
    }
    let Some(sub) = rest.get(i) else {
        return true;
    };
    let flags = &rest[i + 1..];
    let detached = flags.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains('d'));
    match sub.as_str() {
        "attach" | "attach-session" | "a" | "at" | "attac" => true,
        "new" | "new-session" => !detached,
        _ => false,
    }
}

/// Whether a `screen` command line attaches to the terminal: everything but detached starts
/// (`-dm`, `-d -m`), listings and commands sent to a running session (`-ls`, `-X`, `-Q`).
fn screen_attaches(args: &[String]) -> bool {
    let rest = args.get(1..).unwrap_or(&[]);
    let flag = |f: &str| rest.iter().any(|a| a == f);
    let combined_dm = rest.iter().any(|a| {
        let a = a.strip_prefix('-').unwrap_or("");
        (a.starts_with('d') || a.starts_with('D')) && a.contains('m')
    });
    let query = ["-ls", "-list", "-X", "-Q", "-v", "-wipe", "--version", "--help", "-h"].iter().any(|f| flag(f));
    !(combined_dm || (flag("-d") || flag("-D")) && flag("-m") || query)
}

/// ssh's operands: the host, then the remote command's words.
fn ssh_operands(args: &[String]) -> usize {
    const WITH_VALUE: &[u8] = b"BbcDEeFIiJLlmOoPpQRSWw";
    let mut n = 0;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if n == 0 && a.starts_with('-') && a.len() >= 2 {
            let last = a.as_bytes()[a.len() - 1];
            if a.len() == 2 && WITH_VALUE.contains(&last) {
                i += 1;
            }
        } else {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The program that would wait for a human.
    pub program: String,
    /// What it is.
    pub what: String,
    /// A non-interactive alternative, when known.
    pub advice: String,
}

impl Refusal {
    /// The message the model reads.
    pub fn message(&self) -> String {
        let mut m = format!(
            "Refused: `{}` is {}, which needs an interactive terminal; commands here run without one (no TTY, \
             stdin closed) and would hang or fail.",
            self.program, self.what
        );
        if !self.advice.is_empty() {
            m.push(' ');
            m.push_str(&self.advice);
        }
        m.push_str(" If it really has to run interactively, ask the user to run it in their own terminal.");
        m
    }
}

/// The table of interactive-command rules (S6).
#[derive(Debug, Clone)]
pub struct InteractiveRules {
    rules: Vec<InteractiveRule>,
}

impl Default for InteractiveRules {
    fn default() -> Self {
        Self::standard()
    }
}

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Programs that run another command given as their arguments.
const WRAPPERS: &[&str] = &["env", "nohup", "nice", "time", "exec", "command", "builtin", "stdbuf", "timeout", "sudo"];

impl InteractiveRules {
    /// No rules at all.
    pub fn empty() -> Self {
        Self { rules: Vec::new() }
    }

    /// The built-in table: REPLs, database clients, editors, pagers, monitors, remote shells,
    /// password prompts and TTY-only container flags.
    pub fn standard() -> Self {
        use Trigger::*;
        let help = ["--version", "--help", "-h", "-V"];
        let help_and = |extra: &[&str]| v(&[&help[..], extra].concat());
        let repl = |script: &[&str], interactive: &[&str], n: Option<usize>| Repl {
            script_flags: v(script),
            interactive_flags: v(interactive),
            operands_for_script: n,
        };
        let rules = vec![
            InteractiveRule::new(
                &["python", "pypy", "ipython"],
                repl(&["-c", "-m", "--version", "-V", "--help", "-h"], &["-i"], Some(1)),
                "a Python REPL",
                "Pass a script file or use `python -c '…'`.",
            ),
            InteractiveRule::new(
                &["node", "nodejs", "bun", "deno"],
                repl(
                    &["-e", "--eval", "-p", "--print", "-v", "--version", "-h", "--help", "-c", "--check", "--test"],
                    &["-i", "--interactive"],
                    Some(1),
                ),
                "a JavaScript REPL",
                "Pass a script file or use `node -e '…'`.",
            ),
            InteractiveRule::new(
                &["irb", "pry", "ghci", "ts-node", "scala", "sbcl", "lua", "R", "julia"],
                repl(&["-e", "--eval", "-f", "--file", "--version", "--help", "-h"], &["-i"], Some(1)),
                "a REPL",
                "Pass a script file or an expression to evaluate.",
            ),
            InteractiveRule::new(
                &["psql"],
                repl(
                    &["-c", "--command", "-f", "--file", "-l", "--list", "-V", "--version", "-?", "--help"],
                    &[],
                    None,
                ),
                "the PostgreSQL shell",
                "Use `psql -c 'SQL'` or `psql -f file.sql`.",
            ),
            InteractiveRule::new(
                &["mysql", "mariadb"],
                repl(&["-e", "--execute", "-V", "--version", "-?", "--help"], &[], None),
                "the MySQL shell",
                "Use `mysql -e 'SQL'`.",
            ),
            InteractiveRule::new(
                &["sqlite3"],
                repl(&["-cmd", "-version", "-help", "--version", "--help"], &["-interactive"], Some(2)),
                "the SQLite shell",
                "Give the SQL as an argument: `sqlite3 db.sqlite 'SELECT …'`.",
            ),
            InteractiveRule::new(
                &["mongo", "mongosh"],
                repl(&["--eval", "-f", "--file", "--version", "--help", "-h"], &[], None),
                "the MongoDB shell",
                "Use `--eval '…'`.",
            ),
            InteractiveRule::new(
                &["redis-cli"],
                repl(&["--version", "-v", "--help"], &[], Some(1)),
                "the Redis shell",
                "Give the Redis command as arguments.",
            ),
            InteractiveRule::new(
                &["gdb", "lldb"],
                Always { unless: help_and(&["-batch", "--batch"]) },
                "a debugger",
                "Use batch mode (`gdb -batch -ex …`).",
            ),
            InteractiveRule::new(
                &["vim", "vi", "nvim", "view", "nano", "pico", "emacs", "micro", "joe", "hx", "helix", "kak", "mcedit"],
                Always { unless: help_and(&["-es", "-Es", "--headless", "--batch", "-batch", "--script"]) },
                "a text editor",
                "Change files with the file tools, or non-interactively with sed/awk.",
            ),
            InteractiveRule::new(
                &["less", "more", "most"],
                Always { unless: help_and(&[]) },
                "a pager",
                "Drop the pager; use `cat`, `head` or `tail` instead.",
            ),
            InteractiveRule::new(
                &["man", "info"],
                Always { unless: help_and(&["-P", "--pager", "-f", "-k", "-w", "--where", "--path"]) },
                "a manual viewer that opens a pager",
                "Use `man NAME | cat` or `NAME --help`.",
            )
            .ok_when_piped(),
            InteractiveRule::new(
                &["top", "iotop"],
                Always { unless: help_and(&["-b", "--batch", "-n"]) },
                "a full-screen monitor",
                "Use batch mode (`top -b -n 1`) or `ps`.",
            ),
            InteractiveRule::new(
                &[
                    "htop", "btop", "atop", "glances", "nmon", "watch", "tig", "lazygit", "ranger", "mc", "nnn",
                    "vifm", "whiptail", "dialog",
                ],
                Always { unless: help_and(&[]) },
                "a full-screen terminal program",
                "Run a one-shot, non-interactive command instead.",
            ),
            InteractiveRule::new(
                &["tmux"],
                Custom(Arc::new(tmux_attaches)),
                "a terminal multiplexer attaching to this terminal",
                "Start a detached session (`tmux new-session -d -s NAME 'command'`) and read it with \
                 `tmux capture-pane -p -t NAME`.",
            ),
            InteractiveRule::new(
                &["screen"],
                Custom(Arc::new(screen_attaches)),
                "a terminal multiplexer attaching to this terminal",
                "Start it detached (`screen -dmS NAME command`).",
            ),
            InteractiveRule::new(
                &["ssh"],
                SshWithoutCommand,
                "a remote login shell",
                "Give the remote command after the host: `ssh host 'command'` (key-based auth only).",
            ),
            InteractiveRule::new(
                &["telnet", "mosh", "ftp", "nc", "ncat", "minicom"],
                Always { unless: help_and(&["-z", "-l", "-w"]) },
                "an interactive network client",
                "",
            ),
            InteractiveRule::new(
                &["sftp"],
                Always { unless: help_and(&["-b"]) },
                "an interactive file-transfer shell",
                "Use `sftp -b batchfile` or scp.",
            ),
            InteractiveRule::new(
                &["sudo"],
                PasswordUnless(v(&[
                    "-n",
                    "--non-interactive",
                    "-S",
                    "--stdin",
                    "-V",
                    "--version",
                    "-h",
                    "--help",
                    "-k",
                    "-K",
                ])),
                "a command that asks for a password",
                "Use `sudo -n` if no password is needed.",
            ),
            InteractiveRule::new(
                &["su", "doas", "pkexec"],
                PasswordUnless(v(&help)),
                "a command that asks for a password",
                "",
            ),
            InteractiveRule::new(
                &["passwd", "ssh-add", "gpg-agent", "kinit", "login"],
                Always { unless: help_and(&["-S", "--status", "-l", "-L"]) },
                "a command that asks for a password or passphrase",
                "",
            ),
            InteractiveRule::new(
                &["docker", "podman", "kubectl", "nerdctl"],
                WithFlags(v(&["-t", "-it", "-ti", "--tty"])),
                "a container command that asks for a TTY (-t)",
                "Drop `-t`/`-it`; output is captured without a terminal.",
            ),
        ];
        Self { rules }
    }

    /// Adds a rule; it is consulted with the built-in ones.
    pub fn push(&mut self, rule: InteractiveRule) -> &mut Self {
        self.rules.push(rule);
        self
    }

    /// With one more rule.
    pub fn with(mut self, rule: InteractiveRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Removes every rule naming `program`.
    pub fn remove(&mut self, program: &str) -> &mut Self {
        self.rules.retain(|r| !r.programs.iter().any(|p| p == program));
        self
    }

    /// The rules.
    pub fn rules(&self) -> &[InteractiveRule] {
        &self.rules
    }

    /// Checks every simple command of `command_line`; `Some` names the first one that would
    /// wait for a human.
    pub fn check(&self, command_line: &str) -> Option<Refusal> {
        let is_root = rustix::process::geteuid().is_root();
        self.check_as(command_line, is_root, 0)
    }

    fn check_as(&self, command_line: &str, is_root: bool, depth: u8) -> Option<Refusal> {
        words::parse(command_line).iter().find_map(|c| self.check_simple(c, is_root, depth))
    }

    fn check_simple(&self, cmd: &SimpleCommand, is_root: bool, depth: u8) -> Option<Refusal> {
        let mut args = cmd.args();
        loop {
            let program = args.first()?.clone();
            // Control keywords run the command after them.
            if matches!(
                program.as_str(),
                "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{" | "time"
            ) {
                args.remove(0);
                continue;
            }
            if let Some(rule) = self.rules.iter().find(|r| r.matches_program(&program))
                && !(rule.ok_when_piped && cmd.piped_out)
                && rule.triggers(&args, is_root, cmd.stdin_fed)
            {
                return Some(Refusal { program, what: rule.what.clone(), advice: rule.advice.clone() });
            }
            // `bash -c '…'` runs a command line of its own.
            let base = program.rsplit('/').next().unwrap_or(&program);
            if matches!(base, "bash" | "sh" | "zsh" | "dash" | "ksh")
                && depth < 3
                && let Some(pos) = args.iter().position(|a| a == "-c" || a == "-lc" || a == "-ic")
                && let Some(inner) = args.get(pos + 1)
            {
                return self.check_as(inner, is_root, depth + 1);
            }
            // `command -v X` only says where X is.
            if !WRAPPERS.contains(&base) || base == "command" && args.get(1).is_some_and(|a| a == "-v" || a == "-V") {
                return None;
            }
            args = unwrap_wrapper(base, &args[1..]);
        }
    }
}

/// The command a wrapper (`env X=1 cmd`, `timeout 5 cmd`, `sudo -u x cmd`) runs.
fn unwrap_wrapper(wrapper: &str, rest: &[String]) -> Vec<String> {
    let takes_value: &[&str] = match wrapper {
        "env" => &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
        "nice" => &["-n", "--adjustment"],
        "timeout" => &["-s", "--signal", "-k", "--kill-after"],
        "sudo" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--host"],
        "stdbuf" => &["-i", "-o", "-e"],
        _ => &[],
    };
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if a == "--" {
            i += 1;
            break;
        }
        if a.starts_with('-') && a.len() > 1 {
            if takes_value.contains(&a.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if wrapper == "env" && a.contains('=') {
            i += 1;
            continue;
        }
        break;
    }
    // `timeout 5 cmd`: the duration comes first.
    if wrapper == "timeout" && i < rest.len() {
        i += 1;
    }
    rest.get(i..).unwrap_or(&[]).to_vec()
}

/// Words in the last line of output that mean a program waits for a secret.
pub const DEFAULT_PROMPT_MARKERS: &[&str] = &[
    "password",
    "passphrase",
    "pass phrase",
    "passcode",
    "pin for",
    "verification code",
    "one-time code",
    "authentication code",
    "are you sure you want to continue connecting",
];

/// First words that ask for what follows: `Enter …`, `Retype …`, `Confirm …`.
const ASKING: &[&str] =
    &["enter", "retype", "re-enter", "reenter", "confirm", "repeat", "verify", "type", "please", "input", "provide"];

/// Whether the unfinished last line of output looks like a prompt for a secret. A prompt starts
/// with what it asks for, ends like a question (`:` or `?`, maybe a space), and names one of
/// `markers` (case-insensitive, a word of its own) in one of these shapes:
/// - it opens with an asking word: `Enter the verification code sent to …:`, `Retype new
///   password:`, `Confirm passphrase:`;
/// - the marker comes after at most two words that qualify it (`Password:`, `New password:`,
///   `Vault password:`, `alice@host's password:`), after a `[sudo] ` or `(user@host) ` tag, and
///   only what it is for follows: `password for root:`, `Password (again):`, `PIN for 'YubiKey':`;
/// - `… passphrase for key '…':`.
///
/// A progress line printed before slow work only mentions one (`Updating password for admin: `,
/// `Generating random password: `, `Migrating table user_passwords: `, `Checking password
/// policy: `): such a command must not be stopped (S6).
pub fn looks_like_prompt(last_line: &str, markers: &[String]) -> bool {
    let t = last_line.trim();
    if t.is_empty() || t.len() > 300 || !(t.ends_with(':') || t.ends_with('?')) {
        return false;
    }
    let mut lower = t[..t.len() - 1].to_lowercase();
    // `[sudo] password for x:`, `(alice@host) Password:`: a tag before the prompt itself.
    loop {
        let trimmed = lower.trim_start();
        let close = match trimmed.chars().next() {
            Some('[') => ']',
            Some('(') => ')',
            _ => break,
        };
        let Some(end) = trimmed.find(close) else { break };
        lower = trimmed[end + 1..].to_string();
    }
    let lower = lower.trim();
    let word_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    // openssl's second prompt is `Verifying - Enter PEM pass phrase:`.
    let asks = std::iter::once(lower)
        .chain(lower.split_once(" - ").map(|(_, after)| after))
        .any(|part| part.split_whitespace().next().is_some_and(|w| ASKING.contains(&w)));
    markers.iter().filter(|m| !m.is_empty()).any(|m| {
        lower.match_indices(m.as_str()).any(|(at, _)| {
            let before = &lower[..at];
            if before.chars().next_back().is_some_and(word_char) {
                return false;
            }
            let rest = &lower[at + m.len()..];
            if rest.chars().next().is_some_and(word_char) {
                return false;
            }
            let rest = rest.trim();
            if asks || rest.starts_with("for key ") {
                return true;
            }
            // What may qualify the marker: `new`, `vault`, `alice@host's`; not a verb of what
            // the program is doing (`Updating`, `Generating random`) nor a sentence.
            let qualifiers: Vec<&str> = before.split_whitespace().collect();
            let qualified = qualifiers.len() <= 2
                && qualifiers.iter().all(|w| {
                    let w = w.trim_matches(|c: char| !c.is_alphanumeric());
                    !w.ends_with("ing") && !w.ends_with("ed") && !w.is_empty()
                });
            qualified
                && (rest.is_empty()
                    || rest.starts_with(['(', '[', '\'', '"'])
                    || ["for ", "of ", "again"].iter().any(|w| rest.starts_with(w)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Option<String> {
        InteractiveRules::standard().check_as(line, false, 0).map(|r| r.program)
    }

    #[test]
    fn s6_repls_without_a_script_are_refused() {
        assert_eq!(refused("python").as_deref(), Some("python"));
        assert_eq!(refused("python3.12 -u").as_deref(), Some("python3.12"));
        assert_eq!(refused("cd x && node").as_deref(), Some("node"));
        assert_eq!(refused("psql mydb").as_deref(), Some("psql"));
        assert_eq!(refused("mysql -u root").as_deref(), Some("mysql"));
        assert_eq!(refused("python -i x.py").as_deref(), Some("python"));
        assert_eq!(refused("python x.py"), None);
        assert_eq!(refused("python3 -c 'print(1)'"), None);
        assert_eq!(refused("python -m pytest -q"), None);
        assert_eq!(refused("node -e 'console.log(1)'"), None);
        assert_eq!(refused("psql -c 'select 1' mydb"), None);
        assert_eq!(refused("mysql -e 'select 1'"), None);
        assert_eq!(refused("sqlite3 db.sqlite"), Some("sqlite3".into()));
        assert_eq!(refused("sqlite3 db.sqlite 'select 1'"), None);
    }

    #[test]
    fn s6_editors_pagers_monitors_are_refused() {
        for line in ["vim a.txt", "git log | less", "top", "htop", "nano x", "emacs x", "man ls", "FOO=1 vi x"] {
            assert!(refused(line).is_some(), "{line}");
        }
        for line in ["top -b -n 1", "man ls | cat", "vim --version", "emacs --batch -l x.el", "lessc a.less"] {
            assert_eq!(refused(line), None, "{line}");
        }
    }

    #[test]
    fn s6_ssh_sudo_and_wrappers() {
        assert_eq!(refused("ssh example.org").as_deref(), Some("ssh"));
        assert_eq!(refused("ssh -p 2222 -i key user@host").as_deref(), Some("ssh"));
        assert_eq!(refused("ssh -p 2222 host uptime"), None);
        assert_eq!(refused("sudo apt-get install x").as_deref(), Some("sudo"));
        assert_eq!(refused("sudo -n true"), None);
        assert!(InteractiveRules::standard().check_as("sudo apt-get install -y x", true, 0).is_none(), "root");
        assert_eq!(refused("timeout 5 vim x").as_deref(), Some("vim"));
        assert_eq!(refused("env -u X FOO=1 python").as_deref(), Some("python"));
        assert_eq!(refused("bash -c 'less x'").as_deref(), Some("less"));
        assert_eq!(refused("docker run -it ubuntu bash").as_deref(), Some("docker"));
        assert_eq!(refused("docker run --rm ubuntu echo hi"), None);
        assert_eq!(refused("echo vim python less"), None);
        assert_eq!(refused("ssh -V"), None);
        assert_eq!(refused("ssh -G host"), None);
        assert_eq!(refused("ssh host < deploy.sh"), None);
        assert_eq!(refused("command -v python3 >/dev/null && echo have"), None);
        assert_eq!(refused("command -V node"), None);
        assert_eq!(refused("command python3").as_deref(), Some("python3"));
    }

    #[test]
    fn s6_a_repl_given_its_script_on_stdin_runs_it() {
        for line in [
            "python3 <<'EOF'\nprint(6*7)\nEOF",
            "echo 'print(6*7)' | python3",
            "sqlite3 t.db < q.sql",
            "cat q.sql | psql -d x",
            "mysql db < dump.sql",
            "node <<EOF\nconsole.log(1)\nEOF",
            "python3 < /dev/null",
            "python3 <<< 'print(1)'",
        ] {
            assert_eq!(refused(line), None, "{line}");
        }
        // A REPL after the one that was fed still waits for a human.
        assert_eq!(refused("echo x | cat; python3").as_deref(), Some("python3"));
    }

    #[test]
    fn s6_tmux_and_screen_only_when_they_attach() {
        for line in [
            "tmux new-session -d -s srv 'sleep 5'",
            "tmux new -ds srv",
            "tmux ls",
            "tmux kill-server",
            "tmux capture-pane -p -t srv",
            "tmux -L sock send-keys -t srv 'make' Enter",
            "screen -dmS srv make",
            "screen -d -m make",
            "screen -ls",
            "screen -S srv -X quit",
        ] {
            assert_eq!(refused(line), None, "{line}");
        }
        for line in ["tmux", "tmux attach -t srv", "tmux new -s srv", "screen", "screen -r srv", "screen make"] {
            assert!(refused(line).is_some(), "{line}");
        }
    }

    #[test]
    fn s6_the_table_is_extensible() {
        let rules = InteractiveRules::standard().with(InteractiveRule::new(
            &["mytui"],
            Trigger::Custom(Arc::new(|args: &[String]| !args.iter().any(|a| a == "--plain"))),
            "a TUI",
            "Use --plain.",
        ));
        let r = rules.check_as("mytui", false, 0).unwrap();
        assert!(
            r.message().contains("a TUI") && r.message().contains("--plain") && r.message().contains("ask the user")
        );
        assert!(rules.check_as("mytui --plain", false, 0).is_none());
    }

    #[test]
    fn s6_password_prompts_are_recognised() {
        let m: Vec<String> = DEFAULT_PROMPT_MARKERS.iter().map(|s| s.to_string()).collect();
        assert!(looks_like_prompt("[sudo] password for root: ", &m));
        assert!(looks_like_prompt("Enter passphrase for key '/root/.ssh/id_ed25519': ", &m));
        assert!(looks_like_prompt("Password:", &m));
        assert!(looks_like_prompt("alice@example.org's password: ", &m));
        assert!(looks_like_prompt("Password for 'https://alice@github.com': ", &m));
        assert!(looks_like_prompt("Password (again):", &m));
        assert!(looks_like_prompt("Enter PIN for 'YubiKey': ", &m));
        assert!(looks_like_prompt("Verification code: ", &m));
        assert!(looks_like_prompt("Enter same passphrase again: ", &m));
        assert!(looks_like_prompt("Enter passphrase (empty for no passphrase): ", &m));
        assert!(looks_like_prompt("Enter the verification code sent to +1 555 0100: ", &m));
        assert!(looks_like_prompt("Are you sure you want to continue connecting (yes/no/[fingerprint])? ", &m));
        assert!(!looks_like_prompt("password updated successfully", &m));
        assert!(!looks_like_prompt("Compiling…", &m));
        // Progress lines printed before slow work, which only mention a secret.
        assert!(!looks_like_prompt("Migrating table user_passwords: ", &m));
        assert!(!looks_like_prompt("Checking password policy: ", &m));
        assert!(!looks_like_prompt("Rotating passphrase-protected keys: ", &m));
        assert!(!looks_like_prompt("Resetting passwords of 3 users:", &m));
    }

    #[test]
    fn s6_a_prompt_starts_with_what_it_asks_for_and_a_progress_line_is_not_one() {
        let m: Vec<String> = DEFAULT_PROMPT_MARKERS.iter().map(|s| s.to_string()).collect();
        for line in [
            "Password: ",
            "[sudo] password for alice: ",
            "(alice@host) Password: ",
            "Enter password: ",
            "Enter host password for user 'bob': ",
            "New password: ",
            "Retype new password: ",
            "Re-enter new password: ",
            "Confirm password: ",
            "Current password: ",
            "Vault password: ",
            "BECOME password: ",
            "Password for user postgres: ",
            "Enter PEM pass phrase: ",
            "Verifying - Enter PEM pass phrase: ",
            "Bad passphrase for key '/root/.ssh/id_rsa': ",
        ] {
            assert!(looks_like_prompt(line, &m), "a prompt: {line}");
        }
        for line in [
            "Updating password for admin: ",
            "Setting password for user postgres: ",
            "Generating random password: ",
            "Resetting password: ",
            "Changed password for 3 users: ",
            "Step 2 of 5 - rotating the password for admin: ",
            "Saving encrypted password to vault: ",
        ] {
            assert!(!looks_like_prompt(line, &m), "a progress line: {line}");
        }
    }
}
