//! The terminal table: one [`Terminal`] per started command, shared by the three tools, with
//! its output, its lifecycle and who has been told about its end (S3, S5, S7, S9, S12, G21).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use kodik_core::{Event, EventSink, OutputPreview, PreviewConfig, PreviewSummary, TerminalEvent, ToolStatus};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::ansi::AnsiStripper;
use crate::config::ShellConfig;
use crate::error::ShellError;
use crate::interactive::looks_like_prompt;
use crate::process::{self, Exit};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Who stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopKind {
    /// `kill_terminal`: the model asked, so no event announces it (S12).
    Model,
    /// The host's user: announced once in the next result (S12).
    User,
    /// The shell tool itself, because the command sat at a password prompt (S6).
    Prompt,
    /// Its call was given up for good (a client's cancel, an aborted turn): whoever gave it up
    /// reads no result, so nothing announces it (G6).
    Cancelled,
}

struct Output {
    /// Everything, spooled (what the shell result and `full_output` show).
    total: OutputPreview,
    /// Only what the model has not seen yet (get_terminal_output, terminal events).
    unread: OutputPreview,
    last_output: Instant,
    /// The unfinished last line, when it looks like a prompt for a secret.
    prompt: Option<String>,
    /// The output held a NUL byte: it is binary data, not terminal text, and from that chunk on
    /// it is saved as it came; escapes are stripped only from the head and tail shown.
    binary: bool,
}

impl Output {
    /// The summary of `preview`, escape-free whichever way its bytes were kept.
    fn summary(binary: bool, preview: &mut OutputPreview) -> PreviewSummary {
        if !binary {
            // Stripped as it arrived.
            return preview.summary();
        }
        preview.summary_shown_through(|bytes| AnsiStripper::new().strip(bytes))
    }
}

/// State only the reader thread touches; kept apart so stripping never holds the output lock.
struct ReaderState {
    stripper: AnsiStripper,
    last_line: Vec<u8>,
    /// A chunk with an escape also held a NUL byte: binary data, no longer stripped.
    binary: bool,
}

const LAST_LINE_MAX: usize = 256;

/// A chunk this large goes to the spool file at once, in one write as it was read, instead of
/// being gathered into the preview's 64 KiB spool buffer first; smaller ones are still gathered.
const FLUSH_AT: usize = 4 * 1024;

#[derive(Default)]
struct Lifecycle {
    exit: Option<(Exit, Instant)>,
    stop: Option<StopKind>,
    /// A `shell` call is waiting for this command in the foreground.
    attached: bool,
    /// The command's end has been delivered (in a result, an event, or a kill result).
    reported: bool,
    reader_done: bool,
    /// Listed with the reaper, and not yet taken off.
    watched: bool,
    /// Processes of the command's group were still alive when its leader ended, and have not
    /// been seen gone since (`nohup server > log 2>&1 &` holds no pipe, only the group).
    group_left: bool,
    /// Something the command started outlived it (the group or the output pipe).
    had_leftovers: bool,
    /// The end of those leftovers was delivered, or needs no telling (kill_terminal).
    leftovers_reported: bool,
}

/// One started command.
pub(crate) struct Terminal {
    /// Itself, for the thread that watches processes left behind (see `watch_leftovers`).
    me: Weak<Terminal>,
    pub id: String,
    pub command: String,
    pub started: Instant,
    pgid: OnceLock<i32>,
    /// The inode of the pipe its output goes to (see [`process::Group`]).
    output_pipe: OnceLock<Option<u64>>,
    unread_cfg: PreviewConfig,
    /// The most bytes of the output its full-output file saves.
    saved_cap: u64,
    out: Mutex<Output>,
    reader: Mutex<ReaderState>,
    life: Mutex<Lifecycle>,
    done: watch::Sender<bool>,
    events: Arc<dyn EventSink>,
    /// Started by a program (code mode), which reads results but no events.
    for_program: bool,
    announcements: Arc<Mutex<Vec<TerminalEvent>>>,
    prompt_markers: Arc<Vec<String>>,
    reaper: Option<Arc<process::Reaper>>,
    /// The file a command too long for one argument runs from; deleted when the command ends.
    script: Mutex<Option<tempfile::TempPath>>,
    /// The table's "a running slot may have freed up" signal (see [`Table::slot_changed`]).
    slot_changed: Arc<tokio::sync::Notify>,
    /// A live member of the group found when it was last looked at, checked first next time.
    group_member: Mutex<Option<i32>>,
}

/// What the model is shown of the output, plus the facts about all of it.
pub(crate) struct Shown {
    pub text: String,
    pub total: PreviewSummary,
}

impl Terminal {
    pub fn pgid(&self) -> Option<i32> {
        self.pgid.get().copied()
    }

    /// Its process group and output pipe, once started: what the stop functions take.
    pub fn group(&self) -> Option<process::Group> {
        Some(process::Group { pgid: self.pgid()?, output: self.output_pipe.get().copied().flatten() })
    }

    /// Lists the started group with the reaper, or takes it off once the leader exited, nothing
    /// holds its output any more and no process is left in the group (the group is gone). Runs
    /// under the lifecycle lock, so a `+` never follows its `-`.
    fn sync_reaper(&self, started: bool) {
        let (Some(reaper), Some(pgid)) = (&self.reaper, self.pgid()) else {
            return;
        };
        let mut l = lock(&self.life);
        if started {
            reaper.watch(pgid);
            l.watched = true;
        }
        if l.watched && l.exit.is_some() && l.reader_done && !l.group_left {
            reaper.unwatch(pgid);
            l.watched = false;
        }
    }

    pub fn is_running(&self) -> bool {
        lock(&self.life).exit.is_none()
    }

    pub fn subscribe_done(&self) -> watch::Receiver<bool> {
        self.done.subscribe()
    }

    pub fn set_attached(&self, attached: bool) {
        lock(&self.life).attached = attached;
        if !attached {
            self.deliver_if_detached();
            // A call waiting for a running slot waits only while some command is in the
            // foreground; this one no longer is.
            self.slot_changed.notify_waiters();
        }
    }

    /// Whether a `shell` call waits for this command in the foreground, so it ends or goes to
    /// the background within that call's timeout.
    pub fn is_attached(&self) -> bool {
        lock(&self.life).attached
    }

    /// Marks the end as delivered; returns whether it had been delivered already.
    pub fn mark_reported(&self) -> bool {
        std::mem::replace(&mut lock(&self.life).reported, true)
    }

    /// Records who stops the command, unless it already ended. Returns whether it was running.
    pub fn set_stop(&self, kind: StopKind) -> bool {
        let mut l = lock(&self.life);
        if l.exit.is_some() {
            return false;
        }
        l.stop.get_or_insert(kind);
        true
    }

    pub fn stop_kind(&self) -> Option<StopKind> {
        lock(&self.life).stop
    }

    /// Whether the command ended but processes it started (with `&`, `nohup`) still run: they
    /// hold its output pipe or are still members of its process group.
    pub fn leftovers_running(&self) -> bool {
        let l = lock(&self.life);
        l.exit.is_some() && (!l.reader_done || l.group_left)
    }

    /// Whether something the command started outlived it and has ended since, and nobody was
    /// told yet; the caller tells now, so no terminal event repeats it (G15).
    pub fn take_leftovers_end(&self) -> bool {
        let mut l = lock(&self.life);
        let untold = l.had_leftovers && l.reader_done && !l.group_left && !l.leftovers_reported;
        l.leftovers_reported |= untold;
        untold
    }

    /// The model stopped the leftovers itself: no terminal event announces their end.
    pub fn mark_leftovers_reported(&self) {
        lock(&self.life).leftovers_reported = true;
    }

    /// Looks again whether the command's group still has live members; when it has none any
    /// more, the group is taken off the reaper's list and the end of the leftovers delivered.
    /// Returns whether members are left.
    pub fn refresh_group(&self) -> bool {
        let Some(pgid) = self.pgid() else {
            return false;
        };
        if !lock(&self.life).group_left {
            return false;
        }
        if process::group_alive_known(pgid, &mut lock(&self.group_member)) {
            return true;
        }
        lock(&self.life).group_left = false;
        self.sync_reaper(false);
        self.leftovers_settled();
        false
    }

    /// Once everything the command left behind is gone (group and pipe), tells whoever has not
    /// been told: a server started with `&` that crashed is then no longer silent (S5, S7).
    fn leftovers_settled(&self) {
        {
            let mut l = lock(&self.life);
            if !(l.had_leftovers && l.reader_done && !l.group_left) || l.leftovers_reported || !l.reported {
                return;
            }
            l.leftovers_reported = true;
        }
        let mut ev = self.event();
        ev.unread_output = format!("{LEFTOVERS_ENDED}\n{}", ev.unread_output);
        self.events.emit(Event::Terminal(ev));
    }

    pub fn finished_at(&self) -> Option<Instant> {
        lock(&self.life).exit.map(|(_, at)| at)
    }

    pub fn duration(&self) -> Duration {
        match lock(&self.life).exit {
            Some((_, at)) => at.duration_since(self.started),
            None => self.started.elapsed(),
        }
    }

    /// The unfinished last line, when it is a prompt for a secret and nothing came after it
    /// for `silence`.
    pub fn waiting_prompt(&self, silence: Duration) -> Option<String> {
        let o = lock(&self.out);
        o.prompt.clone().filter(|_| o.last_output.elapsed() >= silence)
    }

    /// The status the command's end maps to; `None` while it runs (S11).
    pub fn status(&self) -> Option<ToolStatus> {
        let l = lock(&self.life);
        let (exit, _) = l.exit?;
        Some(match (l.stop, exit) {
            (Some(StopKind::Model | StopKind::User | StopKind::Cancelled), _) => ToolStatus::Stopped,
            (Some(StopKind::Prompt), _) => ToolStatus::Error,
            (None, Exit::Code(0)) => ToolStatus::Success,
            (None, _) => ToolStatus::Error,
        })
    }

    fn exit(&self) -> Option<Exit> {
        lock(&self.life).exit.map(|(e, _)| e)
    }

    /// Everything so far (head and tail), which also counts as read.
    pub fn show_all(&self) -> Shown {
        let mut o = lock(&self.out);
        o.unread = OutputPreview::new(self.unread_cfg.clone());
        let total = Output::summary(o.binary, &mut o.total);
        Shown { text: total.text.clone(), total }
    }

    /// Only what was not shown before; it counts as read now (S5, G15).
    pub fn take_unread(&self) -> Shown {
        self.unread(true)
    }

    /// What was not shown before, counted as read when `consume`.
    fn unread(&self, consume: bool) -> Shown {
        let mut o = lock(&self.out);
        let unread = if consume {
            let mut unread = std::mem::replace(&mut o.unread, OutputPreview::new(self.unread_cfg.clone()));
            Output::summary(o.binary, &mut unread)
        } else {
            let binary = o.binary;
            Output::summary(binary, &mut o.unread)
        };
        let total = Output::summary(o.binary, &mut o.total);
        let mut text = unread.text;
        if unread.truncated
            && let Some(p) = &total.full_output
        {
            if total.total_bytes > self.saved_cap {
                text.push_str(&format!(
                    "\n[full output, only its first {} bytes were saved (the cap for one output): {}]",
                    self.saved_cap,
                    p.display()
                ));
            } else {
                text.push_str(&format!("\n[full output: {}]", p.display()));
            }
        }
        Shown { text, total }
    }

    /// One line saying where the command stands.
    pub fn state_line(&self) -> String {
        let secs = self.duration().as_secs_f64();
        let stop = self.stop_kind();
        match (self.exit(), stop) {
            (None, _) => format!("[terminal {} · still running · {secs:.1} s]", self.id),
            (Some(_), Some(StopKind::Model)) => {
                format!("[terminal {} · stopped by kill_terminal after {secs:.1} s]", self.id)
            }
            (Some(_), Some(StopKind::User)) => {
                format!("[terminal {} · stopped by the user after {secs:.1} s]", self.id)
            }
            (Some(_), Some(StopKind::Cancelled)) => {
                format!("[terminal {} · stopped after {secs:.1} s because its call was cancelled]", self.id)
            }
            (Some(Exit::Code(c)), _) => format!("[exit code {c} · {secs:.1} s]"),
            (Some(Exit::Signal(s)), _) => format!("[killed by signal {s} ({}) · {secs:.1} s]", signal_name(s)),
        }
    }

    /// The lifecycle fields every shell tool returns (S7).
    pub fn lifecycle(&self, total: &PreviewSummary) -> Value {
        let exit = self.exit();
        json!({
            "terminal_id": self.id,
            "command": shown_command(&self.command),
            "running": exit.is_none(),
            "background_running": self.leftovers_running(),
            "status": self.status().map_or("running", ToolStatus::as_str),
            "exit_code": match exit { Some(Exit::Code(c)) => Some(c), _ => None },
            "signal": match exit { Some(Exit::Signal(s)) => Some(s), _ => None },
            "duration_ms": self.duration().as_millis() as u64,
            "output_bytes": total.total_bytes,
            "output_lines": total.total_lines,
            "truncated": total.truncated,
            "full_output": total.full_output,
        })
    }

    /// The terminal event for the command's end, carrying only unread output (S5). A program
    /// that started the command (code mode) sees no events: what it has not read stays for its
    /// get_terminal_output, or a script polling a command never saw its last lines.
    pub fn event(&self) -> TerminalEvent {
        let shown = self.unread(!self.for_program);
        let exit_code = match self.exit() {
            Some(Exit::Code(c)) => Some(c),
            _ => None,
        };
        TerminalEvent {
            terminal_id: self.id.clone(),
            command: shown_command(&self.command),
            exit_code,
            status: self.status().unwrap_or(ToolStatus::Success),
            duration_ms: self.duration().as_millis() as u64,
            unread_output: shown.text,
            full_output: shown.total.full_output,
        }
    }

    /// After the end: nobody waits in the foreground and nobody was told yet → tell them.
    fn deliver_if_detached(&self) {
        let stop = {
            let mut l = lock(&self.life);
            if l.exit.is_none() || l.attached || l.reported {
                return;
            }
            l.reported = true;
            l.stop
        };
        match stop {
            Some(StopKind::Model | StopKind::Prompt | StopKind::Cancelled) => {}
            Some(StopKind::User) => {
                let ev = self.event();
                lock(&self.announcements).push(ev);
            }
            None => {
                let mut ev = self.event();
                if self.leftovers_running() {
                    if !ev.unread_output.is_empty() && !ev.unread_output.ends_with('\n') {
                        ev.unread_output.push('\n');
                    }
                    ev.unread_output.push_str(&format!(
                        "[processes it started in the background are still running; kill_terminal \
                         {{\"terminal_id\": \"{}\"}} stops them]\n",
                        self.id
                    ));
                }
                self.events.emit(Event::Terminal(ev));
            }
        }
    }
}

impl process::Sink for Terminal {
    fn output(&self, chunk: &mut [u8]) {
        // Every byte of text is looked at twice here (is there an escape? how many newlines?),
        // both SIMD scans; stripping, when there is something to strip, works in the read buffer
        // itself. Binary data is not stripped: it has an ESC or BEL every 128 bytes on average,
        // and stripping them cost twice `cat`'s CPU while only corrupting the saved bytes.
        let (text, prompt, binary) = {
            let mut r = lock(&self.reader);
            let len = if r.binary || r.stripper.passes_through(chunk) {
                chunk.len()
            } else if memchr::memchr(0, chunk).is_some() {
                r.binary = true;
                chunk.len()
            } else {
                r.stripper.strip_in_place(chunk)
            };
            let text = &chunk[..len];
            let prompt = track_last_line(&mut r.last_line, text, &self.prompt_markers);
            (text, prompt, r.binary)
        };
        let newlines = memchr::memchr_iter(b'\n', text).count() as u64;
        let mut o = lock(&self.out);
        o.binary = binary;
        o.total.push_lines(text, newlines);
        o.unread.push_lines(text, newlines);
        if text.len() >= FLUSH_AT {
            o.total.flush();
        }
        o.last_output = Instant::now();
        o.prompt = prompt;
    }

    fn exited(&self, exit: Exit, reader_done: bool) {
        drop(lock(&self.script).take());
        // The leader is reaped by now, so a live member is something it started.
        let group_left =
            self.pgid().is_some_and(|pgid| process::group_alive_known(pgid, &mut lock(&self.group_member)));
        let leftovers = {
            let mut l = lock(&self.life);
            l.exit = Some((exit, Instant::now()));
            l.reader_done |= reader_done;
            l.group_left = group_left;
            l.had_leftovers = group_left || !l.reader_done;
            group_left
        };
        if leftovers {
            self.watch_leftovers();
        }
        self.done.send_replace(true);
        self.sync_reaper(false);
        self.deliver_if_detached();
        self.slot_changed.notify_waiters();
    }

    fn reader_finished(&self) {
        lock(&self.life).reader_done = true;
        self.sync_reaper(false);
        self.leftovers_settled();
    }
}

/// Commands longer than this are shortened where they are repeated back (lifecycle fields,
/// terminal events): a generated heredoc of 200 KB need not come back in every result.
const SHOWN_COMMAND_MAX: usize = 2048;

fn shown_command(command: &str) -> String {
    if command.len() <= SHOWN_COMMAND_MAX {
        return command.to_string();
    }
    let mut end = SHOWN_COMMAND_MAX;
    while !command.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes in all]", &command[..end], command.len())
}

/// How often the groups whose leader ended are looked at for live members. Their end is told
/// in a terminal event, which need not come within a fraction of a second.
const LEFTOVER_POLL: Duration = Duration::from_secs(1);

/// First line of the terminal event sent when what a finished command left running has ended.
pub(crate) const LEFTOVERS_ENDED: &str = "[the processes it had started in the background have ended]";

/// The terminals (of every table) whose group outlived its leader, and whether the one thread
/// that watches them all runs.
static LEFTOVERS: Mutex<(Vec<Weak<Terminal>>, bool)> = Mutex::new((Vec::new(), false));

impl Terminal {
    /// Has the group watched until it has no live members (no process event exists for a
    /// group, so it is polled) or the terminal is gone. One thread, started when needed and
    /// ended when nothing is left to watch, looks at every such group once per tick: a thread
    /// per terminal, each waking every 250 ms, cost ten servers a third of a core.
    fn watch_leftovers(&self) {
        let mut watched = lock(&LEFTOVERS);
        watched.0.push(self.me.clone());
        if watched.1 {
            return;
        }
        let spawned = std::thread::Builder::new().name("kodik-shell-groups".into()).spawn(|| {
            loop {
                std::thread::sleep(LEFTOVER_POLL);
                let batch = std::mem::take(&mut lock(&LEFTOVERS).0);
                let still: Vec<Weak<Terminal>> =
                    batch.into_iter().filter(|w| w.upgrade().is_some_and(|t| t.refresh_group())).collect();
                let mut watched = lock(&LEFTOVERS);
                watched.0.extend(still);
                if watched.0.is_empty() {
                    watched.1 = false;
                    return;
                }
            }
        });
        // Without the thread the group stays listed (and watched by the reaper) until
        // kill_terminal or the toolset's end, which still stop it; the next leftover tries again.
        watched.1 = spawned.is_ok();
    }
}

/// Keeps the unfinished last line (bounded) and says whether it is a prompt for a secret.
fn track_last_line(last: &mut Vec<u8>, chunk: &[u8], markers: &[String]) -> Option<String> {
    // Only the chunk's end can matter: a line ending before it leaves a last line too long to
    // be a prompt either way, so a chunk without newlines is not scanned to its start.
    let window = &chunk[chunk.len().saturating_sub(LAST_LINE_MAX + 1)..];
    match memchr::memrchr(b'\n', window) {
        Some(nl) => {
            last.clear();
            last.extend_from_slice(&window[nl + 1..]);
        }
        None => {
            last.extend_from_slice(window);
            if last.len() > LAST_LINE_MAX {
                let cut = last.len() - LAST_LINE_MAX - 1;
                last.drain(..cut);
            }
        }
    }
    // A line longer than the bound is output, not a prompt.
    if last.is_empty() || last.len() > LAST_LINE_MAX {
        return None;
    }
    let end = last.iter().rev().find(|b| !b.is_ascii_whitespace()).copied();
    if !matches!(end, Some(b':') | Some(b'?')) {
        return None;
    }
    let line = String::from_utf8_lossy(last);
    looks_like_prompt(&line, markers).then(|| line.trim().to_string())
}

fn signal_name(s: i32) -> &'static str {
    match s {
        1 => "SIGHUP",
        2 => "SIGINT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// All terminals of one toolset. Dropping it kills every process group it still has.
pub(crate) struct Table {
    pub cfg: ShellConfig,
    pub shell: PathBuf,
    /// `cfg.env`, prepared for starting processes.
    env: process::EnvChanges,
    next: AtomicU64,
    inner: Mutex<Inner>,
    announcements: Arc<Mutex<Vec<TerminalEvent>>>,
    prompt_markers: Arc<Vec<String>>,
    /// Started with the first command.
    reaper: OnceLock<Option<Arc<process::Reaper>>>,
    /// Woken when a running command ends or leaves the foreground (see [`Table::slot_changed`]).
    slot_changed: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct Inner {
    live: HashMap<String, Arc<Terminal>>,
    /// Recently freed ids and why, so a late lookup gets a useful answer.
    freed: VecDeque<(String, String)>,
}

const FREED_MEMORY: usize = 256;

impl Table {
    pub fn new(cfg: ShellConfig) -> Self {
        let shell = cfg.shell.clone().unwrap_or_else(process::find_shell);
        let prompt_markers = Arc::new(cfg.prompt_markers.iter().map(|m| m.to_lowercase()).collect());
        Self {
            env: process::EnvChanges::new(&cfg.env),
            cfg,
            shell,
            next: AtomicU64::new(1),
            inner: Mutex::default(),
            announcements: Arc::default(),
            prompt_markers,
            reaper: OnceLock::new(),
            slot_changed: Arc::default(),
        }
    }

    /// Woken (`notify_waiters`) whenever a running command ends or a call stops waiting for one
    /// in the foreground: a call that found every running slot taken looks again then (G1).
    pub fn slot_changed(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.slot_changed)
    }

    /// Whether some running command has a `shell` call waiting for it in the foreground: it will
    /// end, or go to the background, within that call's timeout, so a slot may free up soon.
    /// Commands already in the background end whenever they end; nobody waits for those.
    pub fn foreground_running(&self) -> bool {
        lock(&self.inner).live.values().any(|t| t.is_running() && t.is_attached())
    }

    /// Starts `command` in `workdir`; its end is reported to `events` unless a result carries it
    /// (and kept for get_terminal_output too when `for_program`: a program reads no events).
    pub fn start(
        &self,
        command: &str,
        workdir: &Path,
        events: Arc<dyn EventSink>,
        for_program: bool,
    ) -> Result<Arc<Terminal>, ShellError> {
        self.sweep();
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let unread_cfg = self.cfg.preview.clone().without_spool();
        let term = Arc::new_cyclic(|me| Terminal {
            me: me.clone(),
            id: id.clone(),
            command: command.to_string(),
            started: Instant::now(),
            pgid: OnceLock::new(),
            output_pipe: OnceLock::new(),
            out: Mutex::new(Output {
                total: OutputPreview::new(self.cfg.preview.clone()).with_spool_limit(self.cfg.max_saved_output),
                unread: OutputPreview::new(unread_cfg.clone()),
                last_output: Instant::now(),
                prompt: None,
                binary: false,
            }),
            unread_cfg,
            saved_cap: self.cfg.max_saved_output,
            reader: Mutex::new(ReaderState { stripper: AnsiStripper::new(), last_line: Vec::new(), binary: false }),
            life: Mutex::new(Lifecycle { attached: true, ..Lifecycle::default() }),
            done: watch::channel(false).0,
            events,
            for_program,
            announcements: Arc::clone(&self.announcements),
            prompt_markers: Arc::clone(&self.prompt_markers),
            reaper: self.reaper.get_or_init(|| process::Reaper::start().map(Arc::new)).clone(),
            script: Mutex::new(None),
            slot_changed: Arc::clone(&self.slot_changed),
            group_member: Mutex::new(None),
        });
        {
            let mut inner = lock(&self.inner);
            let running: Vec<String> =
                inner.live.values().filter(|t| t.is_running()).map(|t| format!("{} `{}`", t.id, t.command)).collect();
            if running.len() >= self.cfg.max_running {
                return Err(ShellError::TooManyRunning {
                    running: running.len(),
                    max: self.cfg.max_running,
                    list: running.join(", "),
                });
            }
            inner.live.insert(id.clone(), Arc::clone(&term));
        }
        // A NUL byte is refused when the command is passed as an argument, with a clear error.
        let script = if command.len() > process::MAX_ARG && !command.contains('\0') {
            match script_file(command) {
                Ok(path) => Some(path),
                Err(e) => {
                    lock(&self.inner).live.remove(&id);
                    return Err(ShellError::Spawn { shell: self.shell.display().to_string(), source: e });
                }
            }
        } else {
            None
        };
        let script_path = script.as_ref().map(|p| p.to_path_buf());
        let spec =
            process::Spec { shell: &self.shell, command, script: script_path.as_deref(), workdir, env: &self.env };
        // The group goes to the reaper before anything else can happen (S10, G21).
        let started = |group: process::Group| {
            let _ = term.output_pipe.set(group.output);
            let _ = term.pgid.set(group.pgid);
            term.sync_reaper(true);
        };
        // Kept until the command ends (the shell reads its script as it goes).
        *lock(&term.script) = script;
        match process::spawn(spec, Arc::clone(&term) as Arc<dyn process::Sink>, started) {
            Ok(_) => Ok(term),
            Err(e) => {
                lock(&self.inner).live.remove(&id);
                Err(ShellError::Spawn { shell: self.shell.display().to_string(), source: e })
            }
        }
    }

    /// The terminal called `id`, or an error that says what happened to it.
    pub fn get(&self, id: &str) -> Result<Arc<Terminal>, ShellError> {
        self.sweep();
        let inner = lock(&self.inner);
        if let Some(t) = inner.live.get(id) {
            return Ok(Arc::clone(t));
        }
        if let Some((_, why)) = inner.freed.iter().rev().find(|(f, _)| f == id) {
            return Err(ShellError::Freed { id: id.to_string(), why: why.clone() });
        }
        let mut known: Vec<&String> = inner.live.keys().collect();
        known.sort();
        let known = if known.is_empty() {
            "there are no terminals now".to_string()
        } else {
            format!("known terminals: {}", known.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))
        };
        Err(ShellError::UnknownTerminal { id: id.to_string(), known })
    }

    /// Frees a terminal (G21), killing whatever of its process group still holds the output pipe.
    pub fn free(&self, id: &str, why: &str) {
        let removed = {
            let mut inner = lock(&self.inner);
            let t = inner.live.remove(id);
            if t.is_some() {
                inner.freed.push_back((id.to_string(), why.to_string()));
                while inner.freed.len() > FREED_MEMORY {
                    inner.freed.pop_front();
                }
            }
            t
        };
        if let Some(t) = removed {
            reap_leftovers(&t);
        }
    }

    /// Frees finished terminals older than `keep_finished`, and the oldest beyond `max_finished`.
    fn sweep(&self) {
        let now = Instant::now();
        let mut finished: Vec<(Instant, String)> = lock(&self.inner)
            .live
            .values()
            // A finished command whose leftovers still run stays until kill_terminal.
            .filter(|t| {
                let l = lock(&t.life);
                !l.attached && l.reader_done && !l.group_left
            })
            .filter_map(|t| t.finished_at().map(|at| (at, t.id.clone())))
            .collect();
        finished.sort();
        let excess = finished.len().saturating_sub(self.cfg.max_finished);
        for (i, (at, id)) in finished.iter().enumerate() {
            if i < excess || now.duration_since(*at) >= self.cfg.keep_finished {
                self.free(
                    id,
                    "it finished and was freed after its keep time; its end was reported as a terminal event",
                );
            }
        }
    }

    /// The terminals whose command is still running, sorted.
    pub fn running(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            lock(&self.inner).live.values().filter(|t| t.is_running()).map(|t| t.id.clone()).collect();
        ids.sort();
        ids
    }

    /// Stops a running command on the user's behalf (S12).
    pub fn user_stop(&self, id: &str) -> bool {
        let Some(t) = lock(&self.inner).live.get(id).cloned() else {
            return false;
        };
        self.stop_in_background(&t, StopKind::User)
    }

    /// Stops a running command's process group (TERM, then KILL after the grace time) from a
    /// thread of its own, so callers that cannot wait (a user stop, a dropped call) return at
    /// once. Returns whether the command was running.
    pub fn stop_in_background(&self, t: &Terminal, kind: StopKind) -> bool {
        let (Some(group), grace) = (t.group(), self.cfg.kill_grace) else {
            return false;
        };
        if !t.set_stop(kind) {
            return false;
        }
        let spawned = std::thread::Builder::new()
            .name("kodik-shell-stop".into())
            .spawn(move || process::terminate_group_blocking(group, grace));
        if spawned.is_err() {
            process::signal_command(group, rustix::process::Signal::KILL);
        }
        true
    }

    /// User stops not announced yet; each is handed out once (S12).
    pub fn take_announcements(&self) -> Vec<TerminalEvent> {
        std::mem::take(&mut *lock(&self.announcements))
    }
}

/// Writes a command too long for one argument to a private temporary file for the shell to run.
/// The shell removes the file itself as soon as it has it open (it goes on reading from the open
/// file), so a host killed while the command runs leaves nothing behind in the temp folder; the
/// removal goes on the first line, in front of the command's own first line, so line numbers in
/// the command's error messages stay right. Dropping the returned path removes it otherwise.
fn script_file(command: &str) -> std::io::Result<tempfile::TempPath> {
    use std::io::Write as _;
    let mut file = tempfile::Builder::new().prefix("kodik-command-").suffix(".sh").tempfile()?;
    let quoted = file.path().to_string_lossy().replace('\'', "'\\''");
    write!(file, "rm -f -- '{quoted}' 2>/dev/null; ")?;
    file.write_all(command.as_bytes())?;
    file.flush()?;
    Ok(file.into_temp_path())
}

/// Kills what is left of a command (the command, or what it started, in its group or out of it).
fn reap_leftovers(t: &Terminal) {
    if let Some(group) = t.group()
        && (t.is_running() || t.leftovers_running())
    {
        process::signal_command(group, rustix::process::Signal::KILL);
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let inner = lock(&self.inner);
        for t in inner.live.values() {
            // Nobody is left to tell that they ended.
            t.mark_leftovers_reported();
            reap_leftovers(t);
        }
    }
}
