//! Starting a command and stopping its process group (S1, S10, S13; Unix).
//!
//! Each command gets one OS thread that forks it and then waits for it. Forking from that
//! thread matters on Linux: `PR_SET_PDEATHSIG` fires when the *thread* that forked dies, and
//! this thread lives exactly as long as the child, so the child is signalled only if the
//! whole host process goes away. A second thread reads the merged output pipe with blocking
//! reads, so the synchronous spool write in the preview slows the producer down (G19).

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Exited by itself with this code.
    Code(i32),
    /// Ended by this signal.
    Signal(i32),
}

impl Exit {
    fn from_status(s: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt as _;
        match (s.code(), s.signal()) {
            (Some(c), _) => Self::Code(c),
            (None, Some(sig)) => Self::Signal(sig),
            (None, None) => Self::Code(-1),
        }
    }
}

/// What to start.
pub(crate) struct Spec<'a> {
    pub shell: &'a Path,
    pub command: &'a str,
    pub workdir: &'a Path,
    pub env: &'a [(String, Option<String>)],
}

/// Receives output chunks on the reader thread; called with raw bytes as they arrive.
pub(crate) trait Sink: Send + Sync + 'static {
    /// New bytes from the merged stdout/stderr pipe.
    fn output(&self, chunk: &[u8]);
    /// The process ended and the pipe was drained (or the drain grace passed).
    fn exited(&self, exit: Exit, reader_done: bool);
    /// The pipe reached end of file (every holder of its write end is gone).
    fn reader_finished(&self);
}

/// How long to keep draining the pipe after the leader exited: a background grandchild may
/// hold the write end open forever, so completion does not wait for end of file.
const DRAIN_GRACE: Duration = Duration::from_millis(150);
const READ_BUF: usize = 1024 * 1024;
/// Reads shorter than this are followed by [`COALESCE_PAUSE`].
const COALESCE_BELOW: usize = 256 * 1024;
/// Short enough to be invisible to a person, long enough for a fast writer to fill the pipe.
const COALESCE_PAUSE: Duration = Duration::from_micros(500);

/// Starts `spec` in its own session and process group with stdin from /dev/null and stdout
/// and stderr on one pipe. Returns the pid (which is also the process group id).
pub(crate) async fn spawn(spec: Spec<'_>, sink: std::sync::Arc<dyn Sink>) -> std::io::Result<i32> {
    let mut cmd = Command::new(spec.shell);
    cmd.arg("-c").arg(spec.command).current_dir(spec.workdir).stdin(Stdio::null());
    for (k, v) in spec.env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<std::io::Result<i32>>();
    std::thread::Builder::new().name("kodik-shell-wait".into()).spawn(move || run(cmd, sink, tx))?;
    rx.await.unwrap_or_else(|_| Err(std::io::Error::other("the process thread ended before starting the command")))
}

fn run(mut cmd: Command, sink: std::sync::Arc<dyn Sink>, started: tokio::sync::oneshot::Sender<std::io::Result<i32>>) {
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    // A bigger pipe means fewer wake-ups for chatty commands; failure is harmless.
    #[cfg(target_os = "linux")]
    let _ = rustix::pipe::fcntl_setpipe_size(&writer, 1 << 20);
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    cmd.stdout(Stdio::from(writer)).stderr(Stdio::from(writer2));
    harden(&mut cmd);
    let spawned = cmd.spawn();
    // The Command holds our copies of the pipe's write end: drop them so end of file can come.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let pid = child.id() as i32;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let reader_sink = std::sync::Arc::clone(&sink);
    let reader_thread = std::thread::Builder::new().name("kodik-shell-read".into()).spawn(move || {
        read_all(reader, reader_sink.as_ref());
        reader_sink.reader_finished();
        let _ = done_tx.send(());
    });
    if let Err(e) = reader_thread {
        let _ = kill_group(pid, Signal::KILL);
        let _ = child.wait();
        let _ = started.send(Err(e));
        return;
    }
    let _ = started.send(Ok(pid));
    let exit = match child.wait() {
        Ok(s) => Exit::from_status(s),
        Err(_) => Exit::Code(-1),
    };
    let reader_done = done_rx.recv_timeout(DRAIN_GRACE).is_ok();
    sink.exited(exit, reader_done);
}

fn read_all(mut reader: std::io::PipeReader, sink: &dyn Sink) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                sink.output(&buf[..n]);
                // A fast writer fills the pipe in small writes; letting them pile up for a moment
                // turns thousands of tiny reads into a few big ones (and wakes the writer less).
                if n < COALESCE_BELOW {
                    std::thread::sleep(COALESCE_PAUSE);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

/// New session (so no controlling terminal: a program that opens /dev/tty to ask for a
/// password fails at once instead of hanging or stealing the host's terminal) and, on Linux,
/// a SIGKILL when the host dies.
fn harden(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    #[cfg(target_os = "linux")]
    let parent = rustix::process::getpid();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and only makes raw system calls
    // (setsid, prctl, getppid, kill) through rustix: it allocates nothing, takes no locks and
    // touches no shared state, so it is async-signal-safe as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setsid()?;
            #[cfg(target_os = "linux")]
            {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The host may have died between fork and prctl: then nobody would signal us.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::Error::other("the parent process is gone"));
                }
            }
            Ok(())
        });
    }
}

/// Sends `sig` to the process group `pgid`.
pub(crate) fn kill_group(pgid: i32, sig: Signal) -> std::io::Result<()> {
    let pid = Pid::from_raw(pgid).ok_or_else(|| std::io::Error::other("invalid process group id"))?;
    rustix::process::kill_process_group(pid, sig).map_err(Into::into)
}

/// Whether any process of group `pgid` is still alive (zombies do not count: in containers
/// whose init does not reap, dead grandchildren stay around as zombies).
pub(crate) fn group_alive(pgid: i32) -> bool {
    let Some(pid) = Pid::from_raw(pgid) else {
        return false;
    };
    if rustix::process::test_kill_process_group(pid).is_err() {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        live_members_linux(pgid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

#[cfg(target_os = "linux")]
fn live_members_linux(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{name}/stat")) else { continue };
        // Fields after the `(comm)`, which may itself hold spaces or parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let pgrp = fields.next().and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && !matches!(state, Some("Z") | Some("X")) {
            return true;
        }
    }
    false
}

/// SIGTERM to the group, then SIGKILL if anything in it is still alive after `grace` (S10).
pub(crate) async fn terminate_group(pgid: i32, grace: Duration) {
    if kill_group(pgid, Signal::TERM).is_err() {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if !group_alive(pgid) {
            return;
        }
    }
    let _ = kill_group(pgid, Signal::KILL);
}

/// The blocking version of [`terminate_group`], for places without a runtime.
pub(crate) fn terminate_group_blocking(pgid: i32, grace: Duration) {
    if kill_group(pgid, Signal::TERM).is_err() {
        return;
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        if !group_alive(pgid) {
            return;
        }
    }
    let _ = kill_group(pgid, Signal::KILL);
}

/// A small helper process that outlives a crashed host just long enough to kill the process
/// groups the host still had: `PR_SET_PDEATHSIG` reaches only the shell itself, not what the
/// shell started. It reads `+ PGID` / `- PGID` lines on stdin and, at end of file (the host is
/// gone, or the toolset was dropped), sends SIGKILL to every group still listed. One per toolset.
pub(crate) struct Reaper {
    stdin: std::sync::Mutex<Option<std::process::ChildStdin>>,
}

const REAPER_SCRIPT: &str = r#"pgs=' '
while read -r op pg; do
  case $op in
    +) pgs="$pgs$pg " ;;
    -) case "$pgs" in *" $pg "*) pgs="${pgs%% $pg *} ${pgs#* $pg }" ;; esac ;;
  esac
done
for pg in $pgs; do kill -KILL "-$pg" 2>/dev/null; done"#;

impl Reaper {
    /// Starts the helper; `None` when it cannot run (then only the death signal protects).
    pub fn start() -> Option<Self> {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(REAPER_SCRIPT).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        // Its own group: a kill of a command's group, or a Ctrl-C at the host's terminal, misses it.
        cmd.process_group(0);
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        std::thread::Builder::new()
            .name("kodik-shell-reaper".into())
            .spawn(move || {
                let _ = child.wait();
            })
            .ok()?;
        Some(Self { stdin: std::sync::Mutex::new(Some(stdin)) })
    }

    /// Watch a new process group.
    pub fn watch(&self, pgid: i32) {
        self.send(&format!("+ {pgid}\n"));
    }

    /// A group is gone: forget it, so a later reuse of its id is never killed.
    pub fn unwatch(&self, pgid: i32) {
        self.send(&format!("- {pgid}\n"));
    }

    fn send(&self, line: &str) {
        use std::io::Write as _;
        let mut guard = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stdin) = guard.as_mut()
            && stdin.write_all(line.as_bytes()).is_err()
        {
            *guard = None;
        }
    }
}

/// The first usable shell: bash, else sh (S13: both run non-interactively with `-c`).
pub(crate) fn find_shell() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["bash", "sh"] {
        for dir in std::env::split_paths(&path).chain(["/bin".into(), "/usr/bin".into()]) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    "/bin/sh".into()
}
