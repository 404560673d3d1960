//! Starting a command and stopping its process group (S1, S10, S13; Unix).
//!
//! A command is started with `posix_spawn` (on Linux and macOS; a `vfork`-style clone, so
//! starting costs the same whatever the host's memory size) as the leader of a new process group,
//! and of a new session when the host has a controlling terminal. Nothing runs in the child between clone and exec, so
//! there is no `PR_SET_PDEATHSIG`: the [`Reaper`] covers a host that dies, and the pid is
//! handed to it before anything else happens. On Linux one thread (from a small pool of reused
//! threads) polls the merged output pipe and a pidfd of the process; elsewhere one pooled
//! thread reads and another waits. Reading is blocking and the spool write in the preview is
//! synchronous, so a slow disk slows the producer down instead of growing memory (G19).

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};
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

/// The longest command passed as one argument (`-c COMMAND`): Linux refuses a single argument
/// of 128 KiB or more (MAX_ARG_STRLEN, with its NUL byte) with E2BIG. A longer one (a heredoc
/// writing a generated file) runs from a file instead.
pub(crate) const MAX_ARG: usize = 128 * 1024 - 1;

/// What to start.
pub(crate) struct Spec<'a> {
    pub shell: &'a Path,
    pub command: &'a str,
    /// A file holding `command`, run instead of `-c command` (see [`MAX_ARG`]).
    pub script: Option<&'a Path>,
    pub workdir: &'a Path,
    pub env: &'a EnvChanges,
}

/// The configured environment changes, prepared once per toolset rather than once per command.
pub(crate) struct EnvChanges {
    /// Variables set (`Some`) or removed (`None`) on top of the host's environment.
    list: Vec<(String, Option<String>)>,
    /// `KEY=VALUE` for the variables set; `None` when one holds a NUL byte (an error at start).
    #[cfg_attr(not(any(target_os = "linux", target_vendor = "apple")), allow(dead_code))]
    set: Option<Vec<std::ffi::CString>>,
}

impl EnvChanges {
    pub fn new(list: &[(String, Option<String>)]) -> Self {
        let set = list
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| std::ffi::CString::new(format!("{k}={v}")).ok()))
            .collect();
        Self { list: list.to_vec(), set }
    }

    /// Whether the host's value of `key` is replaced or removed.
    #[cfg_attr(not(any(target_os = "linux", target_vendor = "apple")), allow(dead_code))]
    fn changes(&self, key: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt as _;
        self.list.iter().any(|(name, _)| std::ffi::OsStr::new(name).as_bytes() == key)
    }
}

/// /dev/null, opened once (every command's stdin is a copy of it) and kept above 0–2.
fn dev_null() -> std::io::Result<std::os::fd::BorrowedFd<'static>> {
    use std::os::fd::AsFd as _;
    static NULL: std::sync::OnceLock<std::os::fd::OwnedFd> = std::sync::OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_fd());
    }
    let fd = above_stdio(std::fs::File::open("/dev/null")?.into())?;
    Ok(NULL.get_or_init(|| fd).as_fd())
}

/// dup2 onto 0–2 must not start from a descriptor that is itself one of 0–2 (a host started
/// with closed stdio): such a descriptor is moved up first.
fn above_stdio(fd: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd as _;
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
}

/// Receives output chunks on the reader thread; called with raw bytes as they arrive.
pub(crate) trait Sink: Send + Sync + 'static {
    /// New bytes from the merged stdout/stderr pipe, in the reader's buffer: the sink may change
    /// them in place (the buffer is refilled after the call).
    fn output(&self, chunk: &mut [u8]);
    /// The process ended and the pipe was drained (or the drain grace passed).
    fn exited(&self, exit: Exit, reader_done: bool);
    /// The pipe reached end of file (every holder of its write end is gone).
    fn reader_finished(&self);
}

/// How long to keep draining the pipe after the leader exited: a background grandchild may
/// hold the write end open forever, so completion does not wait for end of file.
const DRAIN_GRACE: Duration = Duration::from_millis(150);
/// The first read buffer: most commands print little, and a small buffer costs nothing to set up.
const READ_BUF_SMALL: usize = 4 * 1024;
/// The largest read buffer, reached by growing 16× each time a read fills the buffer. A pipe
/// read copies under the pipe's lock, which the writing command then waits for: 256 KiB reads
/// had the writer spinning on that lock about 8× as often as `cat`'s 64 KiB reads did.
const READ_BUF: usize = 64 * 1024;
/// The pipe's capacity (Linux): room for the command to run ahead while the reader is busy or
/// descheduled, so neither side waits on the other on a loaded machine. Reads are not delayed
/// to let output pile up: a sleeping reader woke late under load and stalled the writer on a
/// full pipe (with a 0.5 ms pause after short reads, `yes … | head -c 1G` took 1.2–1.9× as long,
/// medians of 6 interleaved runs).
#[cfg(target_os = "linux")]
const PIPE_SIZE: usize = 1024 * 1024;

/// Starts `spec` in its own process group (and session, when the host has a controlling
/// terminal: see [`spawn_in_own_group`]) with stdin from /dev/null and stdout
/// and stderr on one pipe. `started` gets the pid (which is also the process group id) and the
/// pipe before any output or exit is reported to `sink`. Returns the pid.
pub(crate) fn spawn(spec: Spec<'_>, sink: Arc<dyn Sink>, started: impl FnOnce(Group)) -> std::io::Result<i32> {
    let (reader, writer) = std::io::pipe()?;
    // Failure is harmless: the default capacity only means more wake-ups.
    #[cfg(target_os = "linux")]
    let _ = rustix::pipe::fcntl_setpipe_size(&writer, PIPE_SIZE);
    // What the command starts inherits this pipe: its inode finds them when they leave the group.
    let output = rustix::fs::fstat(&reader).ok().map(|st| st.st_ino);
    let pid = spawn_in_own_group(&spec, std::os::fd::OwnedFd::from(writer), dev_null()?)?;
    started(Group { pgid: pid, output });
    // From here on the process exists: whatever fails, it is stopped and reported as ended,
    // so the terminal never waits for an exit that nobody will report.
    let abandon = |e: std::io::Error, sink: &dyn Sink| {
        let _ = kill_group(pid, Signal::KILL);
        let exit = wait_exit(pid);
        sink.reader_finished();
        sink.exited(exit, true);
        Err(e)
    };

    // Linux: one thread watches both the pipe and the process (through a pidfd).
    #[cfg(target_os = "linux")]
    if let Some(pidfd) =
        Pid::from_raw(pid).and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
    {
        let job_sink = Arc::clone(&sink);
        return match pool::execute(Box::new(move || watch_with_pidfd(pid, &pidfd, reader, job_sink.as_ref()))) {
            Ok(()) => Ok(pid),
            Err(e) => abandon(e, sink.as_ref()),
        };
    }

    // Elsewhere (or without pidfds): one thread reads, another waits.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let reader_sink = Arc::clone(&sink);
    let reader_job = pool::execute(Box::new(move || {
        let mut reader = reader;
        let mut chunks = Chunks::new();
        while chunks.pump(&mut reader, reader_sink.as_ref()) {}
        reader_sink.reader_finished();
        let _ = done_tx.send(());
    }));
    if let Err(e) = reader_job {
        return abandon(e, sink.as_ref());
    }
    let wait_sink = Arc::clone(&sink);
    let waiter = pool::execute(Box::new(move || {
        let exit = wait_exit(pid);
        let reader_done = done_rx.recv_timeout(DRAIN_GRACE).is_ok();
        wait_sink.exited(exit, reader_done);
    }));
    if let Err(e) = waiter {
        // The reader ends by itself once the killed group's pipe ends are closed.
        return abandon(e, sink.as_ref());
    }
    Ok(pid)
}

/// Reads the pipe and waits for the process in one thread: output as it comes; the exit once
/// the pipe reached end of file or [`DRAIN_GRACE`] after the leader ended (whichever is
/// first); then the rest of the output of whatever still holds the pipe.
#[cfg(target_os = "linux")]
fn watch_with_pidfd(pid: i32, pidfd: &std::os::fd::OwnedFd, mut reader: std::io::PipeReader, sink: &dyn Sink) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    // Non-blocking, so that after a full read the next one is tried without a poll first (see
    // `drain_ready`). Should that fail, the pipe stays blocking and a poll precedes every read.
    let nonblocking = rustix::io::ioctl_fionbio(&reader, true).is_ok();
    let mut chunks = Chunks::new();
    let mut exit: Option<(Exit, std::time::Instant)> = None;
    let mut exit_reported = false;
    loop {
        let timeout = match exit {
            Some((e, at)) if !exit_reported => {
                let left = DRAIN_GRACE.saturating_sub(at.elapsed());
                if left.is_zero() {
                    // Something the command started still holds the pipe: the command has ended
                    // all the same, and its leftovers' output keeps coming until end of file.
                    sink.exited(e, false);
                    exit_reported = true;
                    None
                } else {
                    Timespec::try_from(left).ok()
                }
            }
            _ => None,
        };
        let watched = if exit.is_none() { 2 } else { 1 };
        let mut fds = [PollFd::new(&reader, PollFlags::IN), PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds[..watched], timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => {
                // Only a kernel out of memory gets here; try again shortly rather than spin.
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        }
        let pipe_ready = !fds[0].revents().is_empty();
        let leader_ended = watched == 2 && !fds[1].revents().is_empty();
        if pipe_ready && !drain_ready(&mut chunks, &mut reader, sink, nonblocking) {
            sink.reader_finished();
            if !exit_reported {
                let e = match exit {
                    Some((e, _)) => e,
                    // The pipe closed first (`exec >&-`): nothing left to read, so just wait.
                    None => wait_exit(pid),
                };
                sink.exited(e, true);
            }
            return;
        }
        if leader_ended {
            exit = Some((wait_exit(pid), std::time::Instant::now()));
        }
    }
}

/// At most this many reads follow one poll: the pidfd is looked at at least once per pipe's
/// worth of output, so a leftover process that keeps the pipe full cannot hide the leader's exit.
#[cfg(target_os = "linux")]
const READS_PER_POLL: usize = PIPE_SIZE / READ_BUF;

/// Reads what a poll found in the (non-blocking) pipe. While reads come back full the command
/// writes faster than one buffer per wake-up, and the next read follows at once: with a poll
/// before every read, 1 GiB of `cat` output took 16 384 polls for as many reads. `false` at end
/// of file.
#[cfg(target_os = "linux")]
fn drain_ready(chunks: &mut Chunks, reader: &mut std::io::PipeReader, sink: &dyn Sink, nonblocking: bool) -> bool {
    for _ in 0..READS_PER_POLL {
        match chunks.read_once(reader, sink) {
            Pumped::Full if nonblocking => {}
            Pumped::End => return false,
            Pumped::Full | Pumped::Some | Pumped::Empty => return true,
        }
    }
    true
}

/// The read buffer of one command's pipe.
struct Chunks {
    buf: Vec<u8>,
}

impl Chunks {
    fn new() -> Self {
        Self { buf: vec![0; READ_BUF_SMALL] }
    }

    /// One read into the sink; `false` at end of file (or on a read error, which ends it too).
    fn pump(&mut self, reader: &mut std::io::PipeReader, sink: &dyn Sink) -> bool {
        !matches!(self.read_once(reader, sink), Pumped::End)
    }

    /// One read into the sink, saying what it found.
    fn read_once(&mut self, reader: &mut std::io::PipeReader, sink: &dyn Sink) -> Pumped {
        loop {
            match reader.read(&mut self.buf) {
                Ok(0) => return Pumped::End,
                Ok(n) => {
                    sink.output(&mut self.buf[..n]);
                    let full = n == self.buf.len();
                    if full && self.buf.len() < READ_BUF {
                        self.buf = vec![0; (self.buf.len() * 16).min(READ_BUF)];
                    }
                    return if full { Pumped::Full } else { Pumped::Some };
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Pumped::Empty,
                Err(_) => return Pumped::End,
            }
        }
    }
}

/// What one read of the pipe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pumped {
    /// As much as the buffer holds: more may be waiting.
    Full,
    /// Less than the buffer holds: the pipe was empty after it.
    Some,
    /// Nothing yet (a non-blocking pipe).
    Empty,
    /// End of file, or a read error.
    End,
}

/// Reusable threads for the blocking work of a command (reading its pipe, waiting for it):
/// creating two threads per command was a good part of the cost of a short command.
mod pool {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard, mpsc};
    use std::time::Duration;

    pub(crate) type Job = Box<dyn FnOnce() + Send>;

    /// An idle thread exits after this long without work.
    const KEEP_IDLE: Duration = Duration::from_secs(30);

    /// Idle threads and how to hand each one a job. Jobs are sent while this lock is held, and an
    /// idle thread that gives up drops its receiver while holding it: a job is either received
    /// or returned to the sender, never lost.
    static IDLE: Mutex<Vec<(u64, mpsc::Sender<Job>)>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);

    fn idle() -> MutexGuard<'static, Vec<(u64, mpsc::Sender<Job>)>> {
        IDLE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `job` on an idle thread, or on a new one.
    pub(crate) fn execute(mut job: Job) -> std::io::Result<()> {
        {
            let mut idle = idle();
            while let Some((_, tx)) = idle.pop() {
                match tx.send(job) {
                    Ok(()) => return Ok(()),
                    Err(mpsc::SendError(j)) => job = j,
                }
            }
        }
        std::thread::Builder::new().name("kodik-shell-io".into()).spawn(move || worker(job)).map(drop)
    }

    fn worker(mut job: Job) {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel::<Job>();
        loop {
            job();
            idle().push((id, tx.clone()));
            match rx.recv_timeout(KEEP_IDLE) {
                Ok(next) => job = next,
                Err(_) => {
                    let mut idle = idle();
                    idle.retain(|(i, _)| *i != id);
                    match rx.try_recv() {
                        Ok(next) => job = next,
                        Err(_) => {
                            drop(rx);
                            drop(idle);
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Waits for `pid` to end and reaps it.
fn wait_exit(pid: i32) -> Exit {
    let Some(p) = Pid::from_raw(pid) else {
        return Exit::Code(-1);
    };
    loop {
        match rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => {
                if let Some(code) = status.exit_status() {
                    return Exit::Code(code);
                }
                if let Some(sig) = status.terminating_signal() {
                    return Exit::Signal(sig);
                }
                // Stopped or continued: not the end.
            }
            Ok(None) => return Exit::Code(-1),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Exit::Code(-1),
        }
    }
}

/// Whether this process has a controlling terminal (opening `/dev/tty` fails with `ENXIO` when
/// it has none). Asked at every start: a session leader can gain a terminal at any time, and the
/// failing `open` costs about a microsecond.
fn host_has_controlling_terminal() -> bool {
    use rustix::fs::{Mode, OFlags, open};
    open("/dev/tty", OFlags::RDONLY | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NONBLOCK, Mode::empty()).is_ok()
}

/// `bash -c COMMAND` (or whichever shell) through `posix_spawn`, as the leader of a new process
/// group, in `spec.workdir`, with the host's environment plus `spec.env`, stdin from `stdin` and
/// stdout and stderr both on `output`. SIGPIPE goes back to its default (Rust ignores it, and
/// ignored signals survive exec).
///
/// When the host has a controlling terminal the command also leads a new session, so it has none:
/// a program that opens /dev/tty to ask for a password fails at once instead of hanging or
/// stealing the host's terminal (S6). A host without one passes none on, so the command stays in
/// the host's session: with the kernel's autogroup scheduling every session is a scheduling group
/// of its own, and a command streaming output to the host's reader thread across two groups took
/// 1.3–1.4× as long as within one (1 GiB through a pipe into a file, `benches/compare_shell.sh`).
#[cfg(any(target_os = "linux", target_vendor = "apple"))]
#[allow(unsafe_code)]
fn spawn_in_own_group(
    spec: &Spec<'_>,
    output: std::os::fd::OwnedFd,
    stdin: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<i32> {
    use std::ffi::{CString, c_char, c_int};
    use std::mem::MaybeUninit;
    use std::os::fd::AsRawFd as _;
    use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};

    #[cfg(target_vendor = "apple")]
    const POSIX_SPAWN_SETSID: c_int = 0x0400;
    #[cfg(not(target_vendor = "apple"))]
    const POSIX_SPAWN_SETSID: c_int = libc::POSIX_SPAWN_SETSID as c_int;

    fn cstring(bytes: &[u8], what: &str) -> std::io::Result<CString> {
        CString::new(bytes).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("the {what} contains a NUL byte"))
        })
    }
    fn check(r: c_int) -> std::io::Result<()> {
        if r == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(r)) }
    }

    let output = above_stdio(output)?;
    let program = cstring(spec.shell.as_os_str().as_bytes(), "shell path")?;
    let args = match spec.script {
        Some(file) => vec![program.clone(), cstring(file.as_os_str().as_bytes(), "script path")?],
        None => vec![program.clone(), cstring(b"-c", "")?, cstring(spec.command.as_bytes(), "command")?],
    };
    let workdir = cstring(spec.workdir.as_os_str().as_bytes(), "working folder")?;
    let Some(set) = &spec.env.set else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a configured environment variable contains a NUL byte",
        ));
    };
    let mut host = Vec::new();
    for (k, v) in std::env::vars_os() {
        if spec.env.changes(k.as_bytes()) {
            continue;
        }
        let mut kv = k.into_vec();
        kv.reserve_exact(v.len() + 2);
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        // The host's environment cannot hold a NUL byte; were one there, it is not passed on.
        if let Ok(c) = CString::new(kv) {
            host.push(c);
        }
    }
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut c_char> = host.iter().chain(set).map(|e| e.as_ptr().cast_mut()).collect();
    envp.push(std::ptr::null_mut());

    struct Actions(libc::posix_spawn_file_actions_t);
    impl Drop for Actions {
        fn drop(&mut self) {
            // SAFETY: initialised by posix_spawn_file_actions_init in `spawn_in_own_group`.
            unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
        }
    }
    struct Attr(libc::posix_spawnattr_t);
    impl Drop for Attr {
        fn drop(&mut self) {
            // SAFETY: initialised by posix_spawnattr_init in `spawn_in_own_group`.
            unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
        }
    }

    // SAFETY: plain libc calls on objects initialised right here and destroyed by the guards;
    // every pointer passed (program, argv, envp, workdir) points into a live CString and the
    // arrays are NULL-terminated; the descriptors are open for the whole call.
    unsafe {
        let mut actions = MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
        check(libc::posix_spawn_file_actions_init(actions.as_mut_ptr()))?;
        let mut actions = Actions(actions.assume_init());
        check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, stdin.as_raw_fd(), 0))?;
        check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, output.as_raw_fd(), 1))?;
        check(libc::posix_spawn_file_actions_adddup2(&mut actions.0, output.as_raw_fd(), 2))?;
        check(libc::posix_spawn_file_actions_addchdir_np(&mut actions.0, workdir.as_ptr()))?;

        let mut attr = MaybeUninit::<libc::posix_spawnattr_t>::uninit();
        check(libc::posix_spawnattr_init(attr.as_mut_ptr()))?;
        let mut attr = Attr(attr.assume_init());
        let mut no_signals = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(no_signals.as_mut_ptr());
        let no_signals = no_signals.assume_init();
        let mut default_signals = no_signals;
        libc::sigaddset(&mut default_signals, libc::SIGPIPE);
        check(libc::posix_spawnattr_setsigmask(&mut attr.0, &no_signals))?;
        check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &default_signals))?;
        // The group's id is the command's pid either way: a session leader leads its group too.
        let group = if host_has_controlling_terminal() {
            POSIX_SPAWN_SETSID
        } else {
            check(libc::posix_spawnattr_setpgroup(&mut attr.0, 0))?;
            libc::POSIX_SPAWN_SETPGROUP as c_int
        };
        let flags = group | libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        check(libc::posix_spawnattr_setflags(&mut attr.0, flags as _))?;

        let mut pid: libc::pid_t = 0;
        check(libc::posix_spawn(&mut pid, program.as_ptr(), &actions.0, &attr.0, argv.as_ptr(), envp.as_ptr()))?;
        Ok(pid)
    }
}

/// Elsewhere: std's `Command` with a `setsid` (or only a new process group) before exec (a fork,
/// slower but equivalent).
#[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
fn spawn_in_own_group(
    spec: &Spec<'_>,
    output: std::os::fd::OwnedFd,
    stdin: std::os::fd::BorrowedFd<'_>,
) -> std::io::Result<i32> {
    use std::os::unix::process::CommandExt as _;
    let stdin = stdin.try_clone_to_owned()?;
    let mut cmd = Command::new(spec.shell);
    match spec.script {
        Some(file) => cmd.arg(file),
        None => cmd.arg("-c").arg(spec.command),
    };
    cmd.current_dir(spec.workdir);
    for (k, v) in &spec.env.list {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.stdin(Stdio::from(stdin)).stdout(Stdio::from(output.try_clone()?)).stderr(Stdio::from(output));
    if host_has_controlling_terminal() {
        #[allow(unsafe_code)]
        // SAFETY: the closure only calls setsid, which is async-signal-safe as `pre_exec` requires.
        unsafe {
            cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
        }
    } else {
        cmd.process_group(0);
    }
    let child = cmd.spawn()?;
    // The waiter thread reaps it with waitpid; std's handle only holds the pid.
    Ok(child.id() as i32)
}

/// Sends `sig` to the process group `pgid`.
pub(crate) fn kill_group(pgid: i32, sig: Signal) -> std::io::Result<()> {
    let pid = Pid::from_raw(pgid).ok_or_else(|| std::io::Error::other("invalid process group id"))?;
    rustix::process::kill_process_group(pid, sig).map_err(Into::into)
}

/// Whether any process of group `pgid` is still alive (zombies do not count: in containers
/// whose init does not reap, dead grandchildren stay around as zombies).
pub(crate) fn group_alive(pgid: i32) -> bool {
    group_alive_known(pgid, &mut None)
}

/// [`group_alive`] for a group looked at again and again (a finished command's leftovers):
/// `member` remembers a live member found last time, and while that one lives the answer costs
/// one `kill(-pgid, 0)` and one read of its `/proc/<pid>/stat` instead of a scan of all of
/// `/proc` (on a desktop with 1 500 processes, ten watched groups scanned every 250 ms took a
/// third of a core).
pub(crate) fn group_alive_known(pgid: i32, member: &mut Option<i32>) -> bool {
    let Some(pid) = Pid::from_raw(pgid) else {
        return false;
    };
    if rustix::process::test_kill_process_group(pid).is_err() {
        *member = None;
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        if let Some(known) = *member
            && std::fs::read_to_string(format!("/proc/{known}/stat")).is_ok_and(|stat| live_in_group(&stat, pgid))
        {
            return true;
        }
        *member = live_member_linux(pgid);
        member.is_some()
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// How many times all of `/proc` was scanned for a group's members (for tests of the cost).
#[cfg(test)]
static FULL_SCANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether a `/proc/<pid>/stat` line is of a live (not zombie) process of group `pgid`.
#[cfg(target_os = "linux")]
fn live_in_group(stat: &str, pgid: i32) -> bool {
    stat_fields(stat).is_some_and(|f| f.live && f.pgrp == pgid)
}

/// What a `/proc/<pid>/stat` line says about a process's place in the process tree.
#[cfg(target_os = "linux")]
struct StatFields {
    /// Not a zombie.
    live: bool,
    ppid: i32,
    pgrp: i32,
}

#[cfg(target_os = "linux")]
fn stat_fields(stat: &str) -> Option<StatFields> {
    // Fields after the `(comm)`, which may itself hold spaces or parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(StatFields { live: !matches!(state, "Z" | "X"), ppid, pgrp })
}

/// A live member of group `pgid`; when `/proc` cannot be read, the group leader's id stands
/// for "alive" (kill said the group exists).
#[cfg(target_os = "linux")]
fn live_member_linux(pgid: i32) -> Option<i32> {
    #[cfg(test)]
    FULL_SCANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Some(pgid);
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(pid) = name.parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{name}/stat")) else { continue };
        if live_in_group(&stat, pgid) {
            return Some(pid);
        }
    }
    None
}

/// A started command as the stop functions see it: its process group, and the pipe its output
/// goes to (whatever it started holds that pipe, in its group or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    pub pgid: i32,
    /// The output pipe's inode.
    pub output: Option<u64>,
}

/// The process groups, other than the command's own, of what the command started and moved out
/// of its group: `timeout` and `setsid` put their child in a group of its own, so a signal to
/// the command's group alone left `timeout 600 npm test` running after kill_terminal. Found
/// two ways: descendants of the group's members (while the chain is whole), and processes that
/// still hold the command's output pipe (after the command's shell exited, its orphans belong
/// to init, but they inherited the pipe). The host's own group is never among them.
pub(crate) fn escaped_groups(group: Group) -> Vec<i32> {
    #[cfg(target_os = "linux")]
    {
        escaped_groups_linux(group)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = group;
        Vec::new()
    }
}

#[cfg(target_os = "linux")]
fn escaped_groups_linux(group: Group) -> Vec<i32> {
    use std::collections::{BTreeSet, HashMap};
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut procs: HashMap<i32, StatFields> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some(fields) = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().as_deref().and_then(stat_fields)
            && fields.live
        {
            procs.insert(pid, fields);
        }
    }
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, f) in &procs {
        children.entry(f.ppid).or_default().push(pid);
    }
    let mut reached: Vec<i32> = procs.iter().filter(|(_, f)| f.pgrp == group.pgid).map(|(&pid, _)| pid).collect();
    let mut seen: std::collections::HashSet<i32> = reached.iter().copied().collect();
    let mut next = 0;
    while let Some(&pid) = reached.get(next) {
        next += 1;
        for &child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child) {
                reached.push(child);
            }
        }
    }
    let mut groups: BTreeSet<i32> = reached.iter().filter_map(|pid| procs.get(pid)).map(|f| f.pgrp).collect();
    if let Some(inode) = group.output {
        let pipe = format!("pipe:[{inode}]");
        for (&pid, f) in &procs {
            if !groups.contains(&f.pgrp) && holds(pid, &pipe) {
                groups.insert(f.pgrp);
            }
        }
    }
    groups.remove(&group.pgid);
    groups.remove(&rustix::process::getpgrp().as_raw_nonzero().get());
    groups.into_iter().collect()
}

/// Whether process `pid` has a descriptor open on `target` (a `pipe:[inode]` link text).
#[cfg(target_os = "linux")]
fn holds(pid: i32, target: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target))
}

/// Sends `sig` to the command's group and to the groups it escaped to ([`escaped_groups`]).
/// Returns the groups that got it.
pub(crate) fn signal_command(group: Group, sig: Signal) -> Vec<i32> {
    let mut groups = escaped_groups(group);
    groups.push(group.pgid);
    groups.retain(|&g| kill_group(g, sig).is_ok());
    groups
}

/// SIGTERM to the command's groups, then SIGKILL if anything in them is still alive after
/// `grace` (S10).
pub(crate) async fn terminate_group(group: Group, grace: Duration) {
    // Reading /proc takes a few milliseconds on a busy machine: not on a runtime thread.
    let targets = tokio::task::spawn_blocking(move || signal_command(group, Signal::TERM)).await.unwrap_or_default();
    if targets.is_empty() {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if !targets.iter().any(|&g| group_alive(g)) {
            return;
        }
    }
    let _ = tokio::task::spawn_blocking(move || kill_after_grace(group, &targets)).await;
}

/// The blocking version of [`terminate_group`], for places without a runtime.
pub(crate) fn terminate_group_blocking(group: Group, grace: Duration) {
    let targets = signal_command(group, Signal::TERM);
    if targets.is_empty() {
        return;
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        if !targets.iter().any(|&g| group_alive(g)) {
            return;
        }
    }
    kill_after_grace(group, &targets);
}

/// SIGKILL to the groups that got SIGTERM and to any the command escaped to since.
fn kill_after_grace(group: Group, targets: &[i32]) {
    let later = signal_command(group, Signal::KILL);
    for &g in targets.iter().filter(|g| !later.contains(g)) {
        let _ = kill_group(g, Signal::KILL);
    }
}

/// A small helper process that outlives a crashed host just long enough to kill the process
/// groups the host still had (every command, and whatever it started in its group). One per
/// toolset. It blocks reading its stdin, a pipe nobody writes to; at end of file (the host is
/// gone, or the toolset was dropped) it reads the list of live groups from a file the host
/// keeps up to date, and sends SIGKILL to each. The list is updated with positioned writes into
/// fixed-width slots, so starting or ending a command costs two small writes and never wakes
/// the helper (waking a second process per command slowed every command down on a busy machine).
pub(crate) struct Reaper {
    /// Held only to be closed: end of file is the helper's signal.
    _alive: std::process::ChildStdin,
    /// The group list (an unlinked file), shared with the helper as its stdout.
    list: std::fs::File,
    slots: std::sync::Mutex<Slots>,
}

#[derive(Default)]
struct Slots {
    by_pgid: std::collections::HashMap<i32, u64>,
    free: Vec<u64>,
    next: u64,
}

/// One slot: a right-aligned process group id and a newline; blank when free.
const SLOT: usize = 11;

const REAPER_SCRIPT: &str = r#"read -r _
while read -r pg; do
  case $pg in ''|*[!0-9]*) ;; *) kill -KILL "-$pg" 2>/dev/null ;; esac
done <&1"#;

impl Reaper {
    /// Starts the helper; `None` when it cannot run (then a crashed host leaves its commands
    /// running; dropping the toolset still kills them).
    pub fn start() -> Option<Self> {
        use std::os::unix::process::CommandExt as _;
        let list = unlinked_temp_file().ok()?;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(REAPER_SCRIPT).stdin(Stdio::piped()).stdout(list.try_clone().ok()?).stderr(Stdio::null());
        // Its own group: a kill of a command's group, or a Ctrl-C at the host's terminal, misses it.
        cmd.process_group(0);
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        pool::execute(Box::new(move || {
            let _ = child.wait();
        }))
        .ok()?;
        Some(Self { _alive: stdin, list, slots: std::sync::Mutex::default() })
    }

    /// Watch a new process group.
    pub fn watch(&self, pgid: i32) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.free.pop().unwrap_or_else(|| {
            slots.next += 1;
            slots.next - 1
        });
        self.write_slot(slot, &format!("{pgid:>width$}\n", width = SLOT - 1));
        slots.by_pgid.insert(pgid, slot);
    }

    /// A group is gone: forget it, so a later reuse of its id is never killed.
    pub fn unwatch(&self, pgid: i32) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.by_pgid.remove(&pgid) {
            self.write_slot(slot, &format!("{:>width$}\n", "", width = SLOT - 1));
            slots.free.push(slot);
        }
    }

    fn write_slot(&self, slot: u64, text: &str) {
        use std::os::unix::fs::FileExt as _;
        // One positioned write: the helper's read offset stays at the start, and a host killed
        // mid-call still completes the write (the kernel finishes the system call).
        let _ = self.list.write_all_at(text.as_bytes(), slot * SLOT as u64);
    }
}

/// A read-write file with no name (memory-backed where the system has `memfd_create`).
fn unlinked_temp_file() -> std::io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    if let Ok(fd) = rustix::fs::memfd_create("kodik-shell-reaper", rustix::fs::MemfdFlags::CLOEXEC) {
        return Ok(std::fs::File::from(fd));
    }
    tempfile::tempfile()
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn s10_a_watched_groups_live_member_is_checked_without_scanning_all_of_proc() {
        use std::os::unix::process::CommandExt as _;
        let mut child = Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pgid = child.id() as i32;
        let mut member = None;
        assert!(group_alive_known(pgid, &mut member));
        assert_eq!(member, Some(pgid));
        let scans = FULL_SCANS.load(std::sync::atomic::Ordering::Relaxed);
        for _ in 0..20 {
            assert!(group_alive_known(pgid, &mut member));
        }
        // Other tests may scan meanwhile, but not 20 times.
        assert!(FULL_SCANS.load(std::sync::atomic::Ordering::Relaxed) - scans < 20);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!group_alive_known(pgid, &mut member));
        assert_eq!(member, None);
    }

    #[test]
    fn s10_every_job_handed_to_the_pool_runs_and_idle_threads_are_reused() {
        let (tx, rx) = mpsc::channel();
        let submitters: Vec<_> = (0..4)
            .map(|_| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let tx = tx.clone();
                        pool::execute(Box::new(move || {
                            let _ = tx.send(std::thread::current().id());
                        }))
                        .unwrap();
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        let threads: HashSet<_> =
            (0..200).map(|_| rx.recv_timeout(Duration::from_secs(10)).expect("every job ran")).collect();
        assert!(threads.len() < 200, "idle threads were reused ({} threads for 200 jobs)", threads.len());
    }
}
