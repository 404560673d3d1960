//! The three tools: [`ShellTool`], [`GetTerminalOutputTool`], [`KillTerminalTool`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{
    Content, Event, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, ToolStatus, TypedTool, Workspace,
};
use kodik_schema::shell::{GetTerminalOutputArgs, KillTerminalArgs, ShellArgs};
use serde_json::json;
use tokio::time::Instant;

use crate::error::ShellError;
use crate::process;
use crate::terminal::{LEFTOVERS_ENDED, Shown, StopKind, Table, Terminal};
use crate::words;

/// `shell`: runs one command line (S1–S6, S8, S9, S13).
pub struct ShellTool {
    table: Arc<Table>,
    spec: ToolSpec,
}

/// `get_terminal_output`: new output and state of a background command (S7, G15).
pub struct GetTerminalOutputTool {
    table: Arc<Table>,
    spec: ToolSpec,
}

/// `kill_terminal`: stops a command's whole process group (S10, S11).
pub struct KillTerminalTool {
    table: Arc<Table>,
    spec: ToolSpec,
}

impl ShellTool {
    pub(crate) fn new(table: Arc<Table>) -> Self {
        Self { table, spec: kodik_schema::spec::<ShellArgs>() }
    }
}

impl GetTerminalOutputTool {
    pub(crate) fn new(table: Arc<Table>) -> Self {
        Self { table, spec: kodik_schema::spec::<GetTerminalOutputArgs>() }
    }
}

impl KillTerminalTool {
    pub(crate) fn new(table: Arc<Table>) -> Self {
        Self { table, spec: kodik_schema::spec::<KillTerminalArgs>() }
    }
}

/// Emits pending user-stop announcements through this call's sink and returns their text,
/// so each is announced exactly once, in the next result (S12).
fn announce(table: &Table, cx: &ToolContext) -> Vec<String> {
    table
        .take_announcements()
        .into_iter()
        .map(|ev| {
            let line = format!(
                "[terminal event: the user stopped `{}` ({}) after {:.1} s]",
                ev.command,
                ev.terminal_id,
                ev.duration_ms as f64 / 1000.0
            );
            cx.events.emit(Event::Terminal(ev));
            line
        })
        .collect()
}

/// Puts announcement lines in front of a result, whatever its status.
fn with_notes(result: Result<ToolOutput, ToolError>, notes: Vec<String>) -> ToolOutput {
    let mut out = match result {
        Ok(o) => o,
        Err(e) => e.into_output(),
    };
    if !notes.is_empty() {
        out.content.insert(0, Content::text(notes.join("\n")));
        if let Some(m) = out.meta.as_object_mut() {
            m.insert("announced_stops".into(), json!(notes.len()));
        }
    }
    out
}

fn shell_error(e: ShellError) -> ToolOutput {
    let kind = e.kind();
    ToolOutput::error(e.to_string()).with_meta(json!({ "error_kind": kind }))
}

/// A result showing `shown` with the state line and the lifecycle fields (S7). Without a note
/// of its own, a finished command says whether what it started in the background still runs.
fn lifecycle_output(
    term: &Terminal,
    status: ToolStatus,
    shown: Shown,
    empty: &str,
    note: Option<String>,
) -> ToolOutput {
    let note = note.or_else(|| {
        if term.leftovers_running() {
            Some(format!(
                "[processes it started in the background are still running; kill_terminal {{\"terminal_id\": \"{}\"}} \
                 stops them]",
                term.id
            ))
        } else if term.take_leftovers_end() {
            Some(LEFTOVERS_ENDED.to_string())
        } else {
            None
        }
    });
    let mut text = if shown.text.is_empty() { empty.to_string() } else { shown.text };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&term.state_line());
    if let Some(n) = note {
        text.push('\n');
        text.push_str(&n);
    }
    let meta = term.lifecycle(&shown.total);
    ToolOutput::with_status(status, text).with_meta(meta).with_full_output(shown.total.full_output)
}

/// Sets and clears the terminal's "a shell call waits for it" mark; a dropped (cancelled)
/// call leaves it detached, so its end goes out as a terminal event (S3, S9) — unless the call
/// was given up for good (the model's response broke off, the client cancelled the request):
/// then the command is stopped with the call (G6), and nobody is told about it later (the
/// call's result was dropped).
struct Attachment<'a> {
    term: &'a Terminal,
    table: &'a Table,
    cx: &'a ToolContext,
}

impl Drop for Attachment<'_> {
    fn drop(&mut self) {
        if self.cx.is_abandoned() && self.table.stop_in_background(self.term, StopKind::Cancelled) {
            self.term.mark_reported();
        }
        self.term.set_attached(false);
    }
}

enum Waited {
    Finished,
    Background(&'static str),
    Prompt(String),
    /// The call was given up for good (G6).
    Abandoned,
}

#[async_trait]
impl TypedTool for ShellTool {
    type Args = ShellArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A command may read and change any file (a test run, `sed -i`): it runs after the turn's
    /// earlier calls on files and before its later changes of files, while later reads and the
    /// turn's other commands run with it (G1, G2, G4, S4). A patch sent through the shell
    /// changes the files it names, ordered like the same patch sent to `apply_patch` (P2).
    fn resources(&self, args: &ShellArgs, ws: &Workspace) -> Vec<Resource> {
        let root = ws.primary_root();
        let workdir = match args.workdir.as_deref().map(str::trim).filter(|w| !w.is_empty()) {
            Some(w) => root.join(w),
            None => root.to_path_buf(),
        };
        patch_files(&args.command, &workdir, ws).unwrap_or_else(|| vec![Resource::any_file()])
    }

    fn check(&self, args: &ShellArgs) -> Result<(), ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidInput {
                tool: self.spec.name.clone(),
                field: Some("command".into()),
                message: "`command` is empty; give the command line to run".into(),
            });
        }
        // S6 before approval: nobody should be asked to approve a command that cannot work here.
        if let Some(refusal) = self.table.cfg.rules.check(&args.command) {
            return Err(ToolError::InvalidInput {
                tool: self.spec.name.clone(),
                field: Some("command".into()),
                message: ShellError::Interactive(refusal).to_string(),
            });
        }
        Ok(())
    }

    async fn run(&self, args: ShellArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let notes = announce(&self.table, cx);
        let out = self.run_inner(args, cx).await;
        Ok(with_notes(out, notes))
    }
}

impl ShellTool {
    async fn run_inner(&self, args: ShellArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let cfg = &self.table.cfg;
        let workdir = match args.workdir.as_deref().map(str::trim).filter(|w| !w.is_empty()) {
            Some(w) => cx.workspace.check(w)?,
            None => cx.workspace.primary_root().to_path_buf(),
        };
        if !workdir.is_dir() {
            return Ok(shell_error(ShellError::BadWorkdir(cx.workspace.display(&workdir))));
        }
        // P2: a command that is really another tool (an apply_patch heredoc) runs no process;
        // the other spellings of a patch Codex-trained models send are tried in heredoc form.
        if let Some(interceptor) = &cx.interceptor {
            if let Some(out) = interceptor.intercept(&args.command, &workdir, cx).await {
                return Ok(out);
            }
            if let Some(heredoc) = patch_as_heredoc(&args.command, 0)
                && let Some(out) = interceptor.intercept(&heredoc, &workdir, cx).await
            {
                return Ok(out);
            }
            // Anywhere else in a command line it would run as a program that does not exist,
            // print "command not found" and, followed by another command, report success.
            if let Some(program) = patch_program(&args.command, 0) {
                return Ok(shell_error(ShellError::PatchNotAlone(program)));
            }
        }
        if cfg.check_ignored_paths
            && let Some(p) = ignored_path(&args.command, &workdir, &cx.workspace)
        {
            return Ok(shell_error(ShellError::IgnoredPath(p)));
        }
        // The call's timeout bounds the whole wait, for a running slot and for the command.
        let deadline = Instant::now() + Duration::from_millis(args.timeout_ms());
        let term = match self.start_when_free(&args.command, &workdir, deadline, cx).await {
            Ok(t) => t,
            Err(out) => return Ok(out),
        };
        let attachment = Attachment { term: &term, table: &self.table, cx };
        let waited = self.wait(&term, &args, deadline, cx).await;
        let out = match waited {
            Waited::Finished => {
                term.mark_reported();
                let status = term.status().unwrap_or(ToolStatus::Error);
                if !term.leftovers_running() {
                    // Everything was just shown; nothing is left to read later.
                    let out = lifecycle_output(&term, status, term.show_all(), "(no output)", None);
                    self.table.free(&term.id, "it finished in the foreground and its output was in the shell result");
                    out
                } else {
                    // Something it started with `&` is still in its group or holds its output:
                    // leave it running, but keep the terminal so kill_terminal can stop it.
                    let note = format!(
                        "[processes it started in the background are still running in terminal `{id}`; \
                         get_terminal_output {{\"terminal_id\": \"{id}\"}} shows their output, kill_terminal stops them]",
                        id = term.id
                    );
                    lifecycle_output(&term, status, term.show_all(), "(no output)", Some(note))
                }
            }
            Waited::Background(why) => {
                let note = if cfg.events_reach_model {
                    format!(
                        "[{why}: the command was NOT stopped and keeps running in the background as terminal `{id}`. \
                         Its exit code and any further output will arrive by themselves as a terminal event — do \
                         not poll for it. get_terminal_output {{\"terminal_id\": \"{id}\"}} shows progress; \
                         kill_terminal stops it.]",
                        id = term.id
                    )
                } else {
                    // The host cannot deliver an event on its own (an MCP client shows notifications
                    // to the user at most): say how the result does reach the model.
                    format!(
                        "[{why}: the command was NOT stopped and keeps running in the background as terminal `{id}`. \
                         Once it ends, its exit code and further output are added to your next tool result; when \
                         you need them before going on, call get_terminal_output {{\"terminal_id\": \"{id}\"}} \
                         (it shows progress and, once it ended, the exit code); kill_terminal stops it.]",
                        id = term.id
                    )
                };
                lifecycle_output(&term, ToolStatus::Success, term.show_all(), "(no output yet)", Some(note))
            }
            Waited::Prompt(prompt) => {
                if let Some(group) = term.group() {
                    process::terminate_group(group, cfg.kill_grace).await;
                }
                let mut done = term.subscribe_done();
                let _ = tokio::time::timeout(Duration::from_secs(2), done.wait_for(|d| *d)).await;
                term.mark_reported();
                let note = format!(
                    "Stopped: the command is waiting for a secret (`{prompt}`), which cannot be typed here. Ask the \
                     user to run it in their own terminal, or use a non-interactive way (SSH keys, a token, `sudo -n`)."
                );
                let out = lifecycle_output(&term, ToolStatus::Error, term.show_all(), "(no output)", Some(note));
                self.table.free(&term.id, "it was stopped at a password prompt");
                out
            }
            Waited::Abandoned => {
                // Whoever gave the call up reads no result, and an aborted turn waits for its
                // calls to settle: the command is stopped (TERM, KILL after the grace) from a
                // thread of its own, and nobody is told about its end later.
                self.table.stop_in_background(&term, StopKind::Cancelled);
                term.mark_reported();
                term.mark_leftovers_reported();
                let note = "[the call was cancelled, so the command is being stopped]".to_string();
                lifecycle_output(&term, ToolStatus::Cancelled, term.show_all(), "(no output)", Some(note))
            }
        };
        drop(attachment);
        let mut out = out;
        if let Some(m) = out.meta.as_object_mut() {
            m.insert("timeout_ms".into(), json!(args.timeout_ms()));
            if let Some(d) = &args.description {
                m.insert("description".into(), json!(d));
            }
        }
        Ok(out)
    }

    /// Starts the command. When every running slot is taken while some command still has its
    /// call waiting in the foreground (the turn's other calls), it waits for one to end or go to
    /// the background — up to `deadline`, or until the call is cancelled — instead of failing at
    /// once: more calls in one turn than the limit are the model's normal work (G1), and an
    /// instant failure would also count as a finished call for S4, sending the others to the
    /// background. With only background commands running nothing frees a slot by itself, so the
    /// error (which names them and kill_terminal) comes at once.
    async fn start_when_free(
        &self,
        command: &str,
        workdir: &Path,
        deadline: Instant,
        cx: &ToolContext,
    ) -> Result<Arc<Terminal>, ToolOutput> {
        let waiting_since = Instant::now();
        let slot_changed = self.table.slot_changed();
        loop {
            // Registered before looking, so a slot freed in between still wakes this call.
            let changed = slot_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let full = match self.table.start(command, workdir, Arc::clone(&cx.events), cx.session.is_for_program()) {
                Ok(t) => return Ok(t),
                Err(e @ ShellError::TooManyRunning { .. }) if self.table.foreground_running() => e,
                Err(e) => return Err(shell_error(e)),
            };
            let gave_up = |why: &str| {
                let mut out = shell_error(full);
                if let Some(Content::Text { text }) = out.content.first_mut() {
                    text.push_str(&format!(
                        " This call waited {:.1} s for one of them to end and {why}; the command was not started.",
                        waiting_since.elapsed().as_secs_f64()
                    ));
                }
                out
            };
            tokio::select! {
                biased;
                () = cx.abandoned.cancelled() => {
                    return Err(ToolOutput::with_status(
                        ToolStatus::Cancelled,
                        "[the call was cancelled while it waited for a running slot; the command was not started]",
                    ));
                }
                () = cx.cancel.cancelled() => return Err(gave_up("was interrupted by a new user message")),
                () = tokio::time::sleep_until(deadline) => return Err(gave_up("its timeout ran out")),
                () = &mut changed => {}
            }
        }
    }

    /// Waits for the end, the timeout (S2, S3), the S4 batch rule, a cancellation, or a
    /// password prompt (S6), whichever comes first.
    async fn wait(&self, term: &Terminal, args: &ShellArgs, deadline: Instant, cx: &ToolContext) -> Waited {
        let cfg = &self.table.cfg;
        let started = Instant::now();
        let mut done = term.subscribe_done();
        let mut turn = cx.turn.subscribe();
        let batch_rule = args.default_timeout();
        let mut batch_at = (batch_rule && cx.turn.finished_count() > 0).then(|| started + cfg.batch_grace);
        let mut turn_open = true;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let batch_deadline = batch_at.unwrap_or(deadline);
            tokio::select! {
                biased;
                r = done.wait_for(|d| *d) => {
                    if r.is_ok() {
                        return Waited::Finished;
                    }
                }
                () = cx.abandoned.cancelled() => return Waited::Abandoned,
                () = cx.cancel.cancelled() => {
                    return if cx.is_abandoned() {
                        Waited::Abandoned
                    } else {
                        Waited::Background("the wait was interrupted by a new user message")
                    };
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Waited::Background(if batch_rule { "still running after the default 5 s wait" } else { "still running after the timeout" });
                }
                () = tokio::time::sleep_until(batch_deadline), if batch_at.is_some() => {
                    return Waited::Background("still running 1 s after another call of this turn finished");
                }
                r = turn.changed(), if batch_rule && batch_at.is_none() && turn_open => match r {
                    Ok(()) => batch_at = Some(Instant::now() + cfg.batch_grace),
                    Err(_) => turn_open = false,
                },
                _ = tick.tick() => {
                    if let Some(p) = term.waiting_prompt(cfg.prompt_silence) {
                        term.set_stop(StopKind::Prompt);
                        return Waited::Prompt(p);
                    }
                }
            }
        }
    }
}

/// `command` in the `[cd DIR &&] apply_patch <<'EOF' … EOF` form the interceptor knows, when it
/// is another spelling of the same thing: wrapped in `bash -lc "…"` (or `sh -c`), or with the
/// patch as the argument (`apply_patch '*** Begin Patch …'`). `None` otherwise (P2).
fn patch_as_heredoc(command: &str, depth: u8) -> Option<String> {
    let cmds = words::parse(command);
    let (cd, cmd) = match cmds.as_slice() {
        [cmd] => (None, cmd),
        [cd, cmd] => match cd.words.as_slice() {
            [word, dir] if word.text == "cd" && !dir.dynamic && cd.redirects.is_empty() => (Some(&dir.text), cmd),
            _ => return None,
        },
        _ => return None,
    };
    if cmd.words.iter().any(|w| w.dynamic) || !cmd.redirects.is_empty() || cmd.stdin_fed || cmd.piped_out {
        return None;
    }
    let args = cmd.args();
    let inner = match args.as_slice() {
        [sh, flag, script]
            if matches!(sh.rsplit('/').next(), Some("bash" | "sh" | "zsh" | "dash"))
                && matches!(flag.as_str(), "-c" | "-lc")
                && depth < 2 =>
        {
            patch_as_heredoc(script, depth + 1).unwrap_or_else(|| script.clone())
        }
        [tool, patch] if matches!(tool.as_str(), "apply_patch" | "applypatch") => {
            if !patch.trim_start().starts_with("*** Begin Patch") {
                return None;
            }
            let patch = patch.strip_suffix('\n').unwrap_or(patch);
            let mut delim = "KODIK_PATCH_EOF".to_string();
            while patch.lines().any(|l| l.trim() == delim) {
                delim.push('_');
            }
            format!("{tool} <<'{delim}'\n{patch}\n{delim}\n")
        }
        _ => return None,
    };
    Some(match cd {
        Some(dir) => format!("cd '{}' && {inner}", dir.replace('\'', "'\\''")),
        None => inner,
    })
}

/// `apply_patch` (or `applypatch`) where `command` runs it as a program, also inside
/// `bash -c '…'`; `None` when it does not.
fn patch_program(command: &str, depth: u8) -> Option<String> {
    words::parse(command).iter().find_map(|cmd| {
        let args = cmd.args();
        let program = args.first()?.rsplit('/').next()?;
        if matches!(program, "apply_patch" | "applypatch") {
            return Some(program.to_string());
        }
        match args.as_slice() {
            [sh, flag, script, ..]
                if matches!(sh.rsplit('/').next(), Some("bash" | "sh" | "zsh" | "dash"))
                    && matches!(flag.as_str(), "-c" | "-lc")
                    && depth < 2 =>
            {
                patch_program(script, depth + 1)
            }
            _ => None,
        }
    })
}

/// The files a patch sent through the shell (`[cd DIR &&] apply_patch <<'EOF' … EOF`, or
/// another spelling [`patch_as_heredoc`] knows) adds, updates, deletes or moves to, resolved
/// against `workdir` and the `cd`; `None` when `command` is not such a patch.
fn patch_files(command: &str, workdir: &Path, ws: &Workspace) -> Option<Vec<Resource>> {
    let heredoc = patch_as_heredoc(command, 0).unwrap_or_else(|| command.to_owned());
    let (first, body) = heredoc.split_once('\n')?;
    let (dir, invocation) = match first.split_once("&&") {
        Some((cd, rest)) => {
            let words = words::parse(cd);
            let [cmd] = words.as_slice() else { return None };
            match cmd.words.as_slice() {
                [word, target] if word.text == "cd" && !target.dynamic => (workdir.join(&target.text), rest),
                _ => return None,
            }
        }
        None => (workdir.to_path_buf(), first),
    };
    let invocation = invocation.trim_start();
    let rest = invocation.strip_prefix("apply_patch").or_else(|| invocation.strip_prefix("applypatch"))?;
    if !rest.trim_start().starts_with("<<") {
        return None;
    }
    let headers = ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "];
    let files: Vec<Resource> = body
        .lines()
        .filter_map(|line| headers.iter().find_map(|h| line.strip_prefix(h)))
        .map(|path| ws.resource(dir.join(path.trim())))
        .collect();
    (!files.is_empty()).then_some(files)
}

/// The first word of `command` that resolves to a `.kodikignore`d path (G16; best effort:
/// expansions, globs and paths built at run time are not seen).
fn ignored_path(command: &str, workdir: &Path, ws: &Workspace) -> Option<String> {
    // Relative paths after a `cd` resolve against the folder it changed to.
    let mut dir = workdir.to_path_buf();
    for cmd in words::parse(command) {
        let next_dir = match cmd.words.as_slice() {
            [cd, target] if cd.text == "cd" && !target.dynamic => Some(dir.join(&target.text)),
            _ => None,
        };
        for w in cmd.words.iter().chain(cmd.redirects.iter()) {
            if w.dynamic || w.text.contains("://") {
                continue;
            }
            let text = if w.text.starts_with('-') {
                match w.text.split_once('=') {
                    Some((_, v)) => v,
                    None => continue,
                }
            } else {
                w.text.as_str()
            };
            if text.is_empty() {
                continue;
            }
            let candidate: PathBuf = if Path::new(text).is_absolute() { text.into() } else { dir.join(text) };
            if !text.contains('/') && std::fs::symlink_metadata(&candidate).is_err() {
                continue;
            }
            if let Ok(resolved) = ws.resolve(&candidate)
                && ws.is_ignored(&resolved)
            {
                return Some(text.to_string());
            }
        }
        if let Some(d) = next_dir {
            dir = d;
        }
    }
    None
}

#[async_trait]
impl TypedTool for GetTerminalOutputTool {
    type Args = GetTerminalOutputArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: GetTerminalOutputArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let notes = announce(&self.table, cx);
        let out = match self.table.get(args.terminal_id.trim()) {
            Err(e) => shell_error(e),
            Ok(term) => {
                let shown = term.take_unread();
                let (status, note) = match term.status() {
                    None => {
                        let note = term.waiting_prompt(self.table.cfg.prompt_silence).map(|p| {
                            format!(
                                "[it seems to wait for a secret (`{p}`) that cannot be typed here; stop it with \
                                 kill_terminal and ask the user to run it themselves]"
                            )
                        });
                        (ToolStatus::Success, note)
                    }
                    Some(status) => {
                        // Its end is delivered now, so no terminal event repeats it (G15).
                        term.mark_reported();
                        (status, None)
                    }
                };
                lifecycle_output(&term, status, shown, "(no new output since the last check)", note)
            }
        };
        Ok(with_notes(Ok(out), notes))
    }
}

#[async_trait]
impl TypedTool for KillTerminalTool {
    type Args = KillTerminalArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: KillTerminalArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let notes = announce(&self.table, cx);
        let id = args.terminal_id.trim();
        let out = match self.table.get(id) {
            Err(e) => shell_error(e),
            Ok(term) => {
                let grace = self.table.cfg.kill_grace;
                let stopped_now = term.set_stop(StopKind::Model);
                let leftovers = !stopped_now && term.leftovers_running();
                if (stopped_now || leftovers)
                    && let Some(group) = term.group()
                {
                    process::terminate_group(group, grace).await;
                    let mut done = term.subscribe_done();
                    let _ = tokio::time::timeout(Duration::from_secs(2), done.wait_for(|d| *d)).await;
                }
                term.mark_reported();
                term.mark_leftovers_reported();
                term.refresh_group();
                let shown = term.take_unread();
                let (status, note) = if stopped_now {
                    (ToolStatus::Stopped, None)
                } else if leftovers {
                    (
                        ToolStatus::Stopped,
                        Some("[the command had finished; the background processes it left were stopped]".to_string()),
                    )
                } else {
                    (
                        term.status().unwrap_or(ToolStatus::Stopped),
                        Some("[it had already finished before kill_terminal; nothing was stopped]".to_string()),
                    )
                };
                let out = lifecycle_output(&term, status, shown, "(no new output)", note);
                self.table.free(&term.id, "it was stopped with kill_terminal");
                out
            }
        };
        Ok(with_notes(Ok(out), notes))
    }
}
