//! JSON-RPC over a child process's stdio, as LSP frames it (`Content-Length` headers).
//!
//! Our own layer rather than `async-lsp`: that crate stops its loop on unknown notifications
//! and hides request ids, so a request past its deadline could not be cancelled. Messages are
//! raw [`serde_json::Value`]s; the few shapes we read are picked out where they are used.
//!
//! A warm request costs about what the server takes to answer, because no other thread stands
//! between the caller and the pipe (issue 13: each thread wake-up costs tens of µs on a VM):
//! - the caller writes its own request (no writer task to wake), under a lock that keeps
//!   notifications and requests in the order they were sent;
//! - a caller waiting in `block_on` on a thread that is not one of the runtime's workers
//!   reads the server's output itself for a short while (leader/follower), so the answer wakes
//!   that thread directly instead of a worker that then wakes it. Meanwhile the output is taken
//!   out of the epoll set the runtime watches: otherwise every write of the server would also
//!   wake a worker, and that wake-up, on a 2-core VM, cost as much as the hop it replaced.
//!   On a worker, the task that reads the output runs on the thread the I/O driver wakes, and
//!   the caller's task follows it there without another wake-up.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::event::{PollFd, PollFlags, Timespec};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot};

/// LSP error code: the document changed while the request ran; asking again helps.
pub const CONTENT_MODIFIED: i64 = -32801;
/// LSP error code: the server cancelled the request itself; asking again helps.
pub const SERVER_CANCELLED: i64 = -32802;
/// JSON-RPC error code for a method the receiver does not know.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RpcError {
    /// The server answered with a JSON-RPC error.
    #[error("the language server answered `{method}` with error {code}: {message}")]
    Server {
        /// The request's method.
        method: String,
        /// JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
    },
    /// No answer before the deadline; `$/cancelRequest` was sent.
    #[error("the language server did not answer `{method}` within {} ms (the request was cancelled)", .after.as_millis())]
    Timeout {
        /// The request's method.
        method: String,
        /// The deadline.
        after: Duration,
    },
    /// The server's output ended (it exited or crashed) before it answered.
    #[error("the language server exited before answering `{method}`{}", exit_suffix(.status))]
    Exited {
        /// The request's method.
        method: String,
        /// How the process ended, when known.
        status: Option<String>,
    },
}

fn exit_suffix(status: &Option<String>) -> String {
    status.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
}

impl RpcError {
    /// Whether sending the same request again may succeed (`ContentModified`, `ServerCancelled`).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Server { code, .. } if *code == CONTENT_MODIFIED || *code == SERVER_CANCELLED)
    }
}

/// What the connection does with messages the server starts: requests must be answered
/// (`Ok(result)` or `Err((code, message))`); notifications are only seen.
pub trait Handler: Send + Sync + 'static {
    /// A request from the server.
    fn on_request(&self, method: &str, params: Value) -> Result<Value, (i64, String)>;
    /// A notification from the server.
    fn on_notification(&self, method: &str, params: Value);
    /// The server's output ended; every pending request has been failed.
    fn on_closed(&self) {}
}

type Answer = Result<Value, RpcError>;

/// The server's stdin. Whoever holds the lock writes whole messages, so frames never interleave.
type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Unpin + Send>>>;

/// A caller in `block_on` reads the server's output itself for at most this long before it
/// waits like any other task. Bounded because a thread blocked here does not poll the other
/// futures of its `block_on` (a `join!`, a `select!` on cancellation) meanwhile; warm answers
/// take well under a millisecond. Not shorter: a `poll` timeout that falls before the next
/// scheduler tick made each call ~15–30 µs slower on the 2-core VM (measured 2 ms against
/// 20 ms, 200 ms and no timeout; most likely the timer hardware reprogrammed, a VM exit, on
/// every call).
const LEAD_FOR: Duration = Duration::from_millis(50);

/// How much is read from the server's stdout per `read`.
const READ_CHUNK: usize = 64 * 1024;

/// A header longer than this without its blank line is not LSP framing.
const MAX_HEADER: usize = 8 * 1024;

/// A request waiting for its answer.
struct Pending {
    method: String,
    tx: oneshot::Sender<Answer>,
    /// When the deadline sweeper fails it with [`RpcError::Timeout`] and cancels it.
    due: Instant,
    deadline: Duration,
}

/// How often the deadline sweeper looks at the pending requests while the connection is in
/// use, and for how long it keeps doing so after the last request.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
const SWEEP_IDLE_FOR: Duration = Duration::from_secs(10);

/// What the reader side shares: the pending requests, the bytes read and not yet taken as
/// messages, and how the connection ended.
struct Shared {
    pending: Mutex<HashMap<i64, Pending>>,
    /// When the deadline sweeper looks next (`None`: it sleeps until woken). A request due
    /// before then wakes it; any other request costs it nothing. Deadlines are kept by this one
    /// task rather than a timer per request: registering a timer from a runtime worker woke
    /// the thread that waits on the I/O driver, one more wake-up per request (issue 13).
    sweep_at: Mutex<Option<Instant>>,
    sweep: Notify,
    /// Requests sent so far: the sweeper keeps looking while this moves.
    requests: std::sync::atomic::AtomicU64,
    /// Taken by whoever reads the server's output: the reader task, or a caller leading.
    inbox: Mutex<Inbox>,
    closed: AtomicBool,
    /// Wakes the reader task when a leading caller saw the end of the output.
    ended: Notify,
    exit_status: Mutex<Option<String>>,
    handler: Arc<dyn Handler>,
    /// Replies to server requests and `$/cancelRequest`s, written by a task: whoever sends
    /// them must not wait for the pipe (a reader that waits for the writer can deadlock with
    /// a server that waits for its output to be read).
    background: mpsc::UnboundedSender<Vec<u8>>,
}

/// Bytes read from the server and not yet taken as whole messages.
#[derive(Default)]
struct Inbox {
    buf: Vec<u8>,
    start: usize,
    /// The output ended (or could not be followed any more).
    ended: bool,
}

/// Why the server's output cannot be followed any further.
#[derive(Debug)]
struct BadFraming;

impl Inbox {
    /// Reads once from `fd` (non-blocking). `Ok(0)`: end of output.
    fn fill(&mut self, fd: impl AsFd) -> std::io::Result<usize> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(READ_CHUNK);
        Ok(rustix::io::read(fd, rustix::buffer::spare_capacity(&mut self.buf))?)
    }

    /// The byte range of the next whole message body, once it has all arrived.
    fn next_body(&mut self) -> Result<Option<std::ops::Range<usize>>, BadFraming> {
        // Stray line ends between messages are tolerated.
        while self.buf.get(self.start).is_some_and(|b| *b == b'\r' || *b == b'\n') {
            self.start += 1;
        }
        let rest = &self.buf[self.start..];
        let Some((header_len, blank_len)) = header_end(rest) else {
            return if rest.len() > MAX_HEADER { Err(BadFraming) } else { Ok(None) };
        };
        let length = rest[..header_len]
            .split(|b| *b == b'\n')
            .filter_map(|line| {
                let line = std::str::from_utf8(line).ok()?;
                let (name, value) = line.split_once(':')?;
                name.trim().eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok())?
            })
            .next()
            .ok_or(BadFraming)?;
        let body = self.start + header_len + blank_len;
        if self.buf.len() - body < length {
            return Ok(None);
        }
        self.start = body + length;
        Ok(Some(body..body + length))
    }
}

/// Where a header ends: its length up to its last line's `\n`, and the length of the blank
/// line after it (`\r\n` or `\n`).
fn header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0;
    while let Some(nl) = buf[at..].iter().position(|b| *b == b'\n') {
        let after = at + nl + 1;
        match buf.get(after) {
            Some(b'\n') => return Some((after, 1)),
            Some(b'\r') if buf.get(after + 1) == Some(&b'\n') => return Some((after, 2)),
            Some(_) => at = after,
            None => return None,
        }
    }
    None
}

/// A message from the server, with only the members the client reads. Parsed straight into
/// this shape: no map of the whole message is built, and the result is moved to the caller.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

impl Shared {
    /// Handles every whole message in the inbox. Returns whether the answer to `mine` was
    /// among them; `Err` when the output can no longer be followed.
    fn take_messages(&self, inbox: &mut Inbox, mine: Option<i64>) -> Result<bool, BadFraming> {
        let mut found = false;
        while let Some(range) = inbox.next_body()? {
            match serde_json::from_slice::<Incoming>(&inbox.buf[range]) {
                Ok(msg) => found |= self.dispatch(msg).is_some_and(|id| Some(id) == mine),
                // The frame was whole, so the next one can still be found.
                Err(e) => tracing::warn!(error = %e, "skipped a language-server message that is not JSON-RPC"),
            }
        }
        Ok(found)
    }

    /// Handles one message; returns the id of the answered request, if it was an answer.
    fn dispatch(&self, msg: Incoming) -> Option<i64> {
        match (msg.method, msg.id) {
            (Some(method), Some(id)) => {
                let reply = match self.handler.on_request(&method, msg.params.unwrap_or(Value::Null)) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, message)) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                    }
                };
                let _ = self.background.send(frame(&reply));
                None
            }
            (Some(method), None) => {
                self.handler.on_notification(&method, msg.params.unwrap_or(Value::Null));
                None
            }
            (None, Some(id)) => {
                let id = id.as_i64()?;
                let Pending { method, tx, .. } = self.pending.lock().ok().and_then(|mut p| p.remove(&id))?;
                let answer = match msg.error {
                    Some(err) => Err(RpcError::Server {
                        method,
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: err.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
                    }),
                    None => Ok(msg.result.unwrap_or(Value::Null)),
                };
                let _ = tx.send(answer);
                Some(id)
            }
            (None, None) => None,
        }
    }

    /// Marks the output as ended; the reader task then fails what is pending.
    fn end(&self, inbox: &mut Inbox) {
        inbox.ended = true;
        self.closed.store(true, Ordering::SeqCst);
        self.ended.notify_one();
    }
}

/// The server's stdout, and the epoll set through which the runtime watches it: a set of
/// our own, so the pipe can be taken out of the runtime's sight while a caller reads it itself.
struct Output {
    pipe: OwnedFd,
    watched: AsyncFd<OwnedFd>,
}

impl Output {
    fn new(pipe: OwnedFd) -> std::io::Result<Self> {
        rustix::io::ioctl_fionbio(&pipe, true)?;
        let set = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&set, &pipe, epoll::EventData::new_u64(0), epoll::EventFlags::IN)?;
        // Deprecated for types whose descriptor may change or close while registered; an
        // `OwnedFd` held here until the registration is dropped is neither, and the
        // replacement (`AsyncFd::register`) is `unsafe`, which this workspace denies.
        #[allow(deprecated)]
        let watched = AsyncFd::with_interest(set, tokio::io::Interest::READABLE)?;
        Ok(Self { pipe, watched })
    }

    /// Stops the runtime from being woken by the server's writes.
    fn unwatch(&self) {
        let _ = epoll::delete(self.watched.get_ref(), &self.pipe);
    }

    /// Lets the runtime see the server's writes again. Adding the pipe back with output already
    /// waiting in it wakes the reader task at once, so nothing that came meanwhile is left.
    fn watch(&self) {
        let _ = epoll::add(self.watched.get_ref(), &self.pipe, epoll::EventData::new_u64(0), epoll::EventFlags::IN);
    }
}

/// The server's output taken out of the runtime's sight while a caller reads it itself; put
/// back when dropped, also when the caller's future is dropped mid-request, so the reader task
/// never stays deaf. Adding the pipe back with output waiting wakes the reader task at once.
struct Unwatched<'a>(&'a Output);

impl<'a> Unwatched<'a> {
    fn new(output: &'a Output) -> Self {
        output.unwatch();
        Self(output)
    }
}

impl Drop for Unwatched<'_> {
    fn drop(&mut self) {
        self.0.watch();
    }
}

/// One running server process and the JSON-RPC session over its stdio.
pub struct Connection {
    shared: Arc<Shared>,
    writer: Writer,
    output: Arc<Output>,
    next_id: AtomicI64,
    pid: Option<u32>,
    stderr: Arc<StderrTail>,
}

/// The start and the end of what the server wrote to stderr: why it failed to start (rustup's
/// proxy says "error: Unknown binary 'rust-analyzer' in official toolchain" first, and with
/// `RUST_BACKTRACE=1` a backtrace after it). Read all along, so a chatty server (clangd logs
/// there) never blocks on a full pipe.
#[derive(Default)]
struct StderrTail {
    /// The first [`STDERR_TAIL`] bytes, and the last ones of what came after them.
    head: Mutex<Vec<u8>>,
    tail: Mutex<Vec<u8>>,
    ended: AtomicBool,
    end: Notify,
}

/// Bytes of stderr kept.
const STDERR_TAIL: usize = 2048;

async fn read_stderr(mut from: tokio::process::ChildStderr, into: Arc<StderrTail>) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut rest = &buf[..n];
        if let Ok(mut head) = into.head.lock() {
            let take = rest.len().min(STDERR_TAIL - head.len());
            head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        if let Ok(mut tail) = into.tail.lock() {
            tail.extend_from_slice(rest);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
    }
    into.ended.store(true, Ordering::SeqCst);
    into.end.notify_waiters();
}

/// The lines of a server's stderr that say why it stopped, at most 5 (500 characters): from
/// the first line that names an error (rustup's "error: Unknown binary …"), else the last
/// ones; a backtrace (`stack backtrace:` and what follows) is left out either way.
fn said_on_stderr(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take_while(|l| !l.to_ascii_lowercase().starts_with("stack backtrace:"))
        .collect();
    let error = lines.iter().position(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("error") || l.contains("error:") || l.starts_with("fatal") || l.contains("panicked")
    });
    let shown = match error {
        Some(at) => &lines[at..lines.len().min(at + 5)],
        None => &lines[lines.len().saturating_sub(5)..],
    };
    // The quote ends a sentence of the message it goes into: its own full stop would double.
    let said = shown.join(" | ").trim_end_matches('.').to_owned();
    match said.char_indices().nth(500) {
        Some((at, _)) => format!("{}…", &said[..at]),
        None => said,
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("pid", &self.pid).field("closed", &self.is_closed()).finish()
    }
}

/// Frames one message: `Content-Length` header, blank line, JSON body.
pub fn frame(message: &Value) -> Vec<u8> {
    frame_body(&message.to_string())
}

fn frame_body(body: &str) -> Vec<u8> {
    let mut buf = Vec::with_capacity(body.len() + 32);
    let _ = write!(Bytes(&mut buf), "Content-Length: {}\r\n\r\n", body.len());
    buf.extend_from_slice(body.as_bytes());
    buf
}

/// `fmt::Write` into a byte buffer (writing into a `Vec` cannot fail).
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// A request or notification framed without copying its parameters into a new message tree.
fn frame_call(id: Option<i64>, method: &str, params: &Value) -> Vec<u8> {
    let mut body = String::with_capacity(64);
    body.push_str(r#"{"jsonrpc":"2.0","#);
    if let Some(id) = id {
        let _ = write!(body, r#""id":{id},"#);
    }
    // `Value`'s Display escapes the method name like any JSON string.
    let _ = write!(body, r#""method":{},"params":{params}}}"#, Value::String(method.to_owned()));
    frame_body(&body)
}

/// Whether this thread may block reading the server's output for the caller: only in
/// `block_on` on a thread that is not one of a multi-thread runtime's workers. There nothing
/// else runs but the future given to `block_on`; a worker's other tasks, or a current-thread
/// runtime's driver, would stall.
fn may_lead() -> bool {
    tokio::task::try_id().is_none()
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

impl Connection {
    /// Starts `program args…` in `cwd` in its own process group and speaks JSON-RPC to it.
    /// The child is killed with its whole group when the connection drops.
    pub fn spawn(
        program: &std::path::Path,
        args: &[String],
        cwd: &std::path::Path,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<Self> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own group, so tsserver, cargo check and other grandchildren go down with it.
            .process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("the child has no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("the child has no stdout"))?;
        let stderr = child.stderr.take();
        let conn = Self::from_parts(stdin, stdout.into_owned_fd()?, Some(child), pid, handler)?;
        if let Some(stderr) = stderr {
            tokio::spawn(read_stderr(stderr, conn.stderr.clone()));
        } else {
            conn.stderr.ended.store(true, Ordering::SeqCst);
        }
        Ok(conn)
    }

    /// A session writing to `stdin` and reading from the pipe `stdout` (made non-blocking here).
    fn from_parts(
        stdin: impl AsyncWrite + Unpin + Send + 'static,
        stdout: OwnedFd,
        child: Option<Child>,
        pid: Option<u32>,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<Self> {
        let output = Arc::new(Output::new(stdout)?);
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Box::new(stdin)));
        let (background, mut queued) = mpsc::unbounded_channel::<Vec<u8>>();
        let queue_writer = writer.clone();
        tokio::spawn(async move {
            while let Some(buf) = queued.recv().await {
                if queue_writer.lock().await.write_all(&buf).await.is_err() {
                    break;
                }
            }
        });
        let shared = Arc::new(Shared {
            pending: Mutex::default(),
            sweep_at: Mutex::default(),
            sweep: Notify::new(),
            requests: Default::default(),
            inbox: Mutex::default(),
            closed: AtomicBool::new(false),
            ended: Notify::new(),
            exit_status: Mutex::default(),
            handler,
            background,
        });
        tokio::spawn(read_output(shared.clone(), output.clone(), child));
        tokio::spawn(sweep_deadlines(shared.clone()));
        let stderr = Arc::new(StderrTail::default());
        Ok(Self { shared, writer, output, next_id: AtomicI64::new(1), pid, stderr })
    }

    /// The server's process id (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// What the server said on stderr about why it stopped (see `said_on_stderr`), once it
    /// has closed stderr or `wait` has passed: for the message when it fails to start.
    pub async fn stderr_tail(&self, wait: Duration) -> String {
        let ended = self.stderr.end.notified();
        if !self.stderr.ended.load(Ordering::SeqCst) {
            let _ = tokio::time::timeout(wait, ended).await;
        }
        let mut all = self.stderr.head.lock().map(|h| h.clone()).unwrap_or_default();
        if let Ok(tail) = self.stderr.tail.lock() {
            all.push(b'\n');
            all.extend_from_slice(&tail);
        }
        said_on_stderr(&String::from_utf8_lossy(&all))
    }

    /// Whether the server's output has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Sends a notification. It reaches the server before anything sent after it returns.
    pub async fn notify(&self, method: &str, params: &Value) {
        self.send(frame_call(None, method, params)).await;
    }

    /// Writes one framed message from the caller's own task, so a request costs no hop to a
    /// writer task. What the pipe does not take at once is finished by a spawned task that
    /// keeps the lock: a caller cancelled mid-message can leave no half frame behind, and
    /// later messages still go after it.
    async fn send(&self, buf: Vec<u8>) {
        self.send_then_read(buf, false).await;
    }

    /// [`send`](Self::send); with `lead`, the server's output is taken out of the runtime's
    /// sight once the lock is ours and before the message goes out, for a caller that reads
    /// the answer itself ([`lead`](Self::lead)). Not before the lock: while a spawned task
    /// finishes an earlier message, the server may be waiting for its own output to be read.
    async fn send_then_read(&self, buf: Vec<u8>, lead: bool) -> Option<Unwatched<'_>> {
        let mut writer = self.writer.clone().lock_owned().await;
        let unwatched = lead.then(|| Unwatched::new(&self.output));
        let mut cx = Context::from_waker(Waker::noop());
        let mut written = 0;
        while written < buf.len() {
            match Pin::new(&mut **writer).poll_write(&mut cx, &buf[written..]) {
                Poll::Ready(Ok(n)) if n > 0 => written += n,
                // The server is gone; its output's end fails what is pending.
                Poll::Ready(_) => return unwatched,
                Poll::Pending => {
                    tokio::spawn(async move {
                        let _ = writer.write_all(&buf[written..]).await;
                    });
                    return unwatched;
                }
            }
        }
        unwatched
    }

    /// Sends a request and waits for its answer at most `deadline`; past it, the request is
    /// cancelled with `$/cancelRequest` so it does not keep the server busy.
    pub async fn request(&self, method: &str, params: &Value, deadline: Duration) -> Result<Value, RpcError> {
        let started = Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, mut rx) = oneshot::channel();
        let exited = || RpcError::Exited {
            method: method.to_owned(),
            status: self.shared.exit_status.lock().ok().and_then(|s| s.clone()),
        };
        {
            let Ok(mut pending) = self.shared.pending.lock() else { return Err(exited()) };
            // Checked under the lock: the reader task drains the map under it after `closed` is set.
            if self.is_closed() {
                return Err(exited());
            }
            self.shared.requests.fetch_add(1, Ordering::SeqCst);
            // A deadline too far to add is as good as none: a year.
            let due = started.checked_add(deadline).unwrap_or(started + Duration::from_secs(365 * 86_400));
            pending.insert(id, Pending { method: method.to_owned(), tx, due, deadline });
            let sweeps_later = self.shared.sweep_at.lock().map_or(true, |at| at.is_none_or(|at| at > due));
            if sweeps_later {
                self.shared.sweep.notify_one();
            }
        }
        // Removes the entry when the caller stops waiting (deadline or its own cancellation).
        let guard = PendingGuard { shared: &self.shared, id, answered: false };
        // Out of the runtime's sight before the request goes out when this thread reads the
        // answer itself: a server that answers before this thread starts reading must not wake
        // a worker, whose reader task would then take the answer and hand it over with one more
        // wake-up.
        let lead = may_lead();
        // Past the deadline the sweeper answers with `Timeout` (and has cancelled the request),
        // also while the request still waits to be written behind a message the server does
        // not take.
        let sending = self.send_then_read(frame_call(Some(id), method, params), lead);
        let answer = tokio::select! {
            biased;
            unwatched = sending => {
                if unwatched.is_some() {
                    self.lead(id, started + deadline.min(LEAD_FOR));
                }
                drop(unwatched);
                (&mut rx).await
            }
            answer = &mut rx => answer,
        };
        let answer = answer.map_err(|_| ());
        guard.done();
        answer.unwrap_or_else(|()| Err(exited()))
    }

    /// Reads the server's output on this thread until the answer to `id` is in, `until`
    /// passes, or the output ends. Does nothing when the reader task is reading right now.
    /// The caller has taken the output out of the runtime's sight ([`Unwatched`]) and puts it
    /// back after this returns, when the inbox is free for the reader task it may wake.
    fn lead(&self, id: i64, until: Instant) {
        let fd = &self.output.pipe;
        let Ok(mut inbox) = self.shared.inbox.try_lock() else { return };
        // Only the inbox's holder hands out answers: once it is ours, an answer not in yet
        // can only come through us.
        if !self.shared.pending.lock().is_ok_and(|p| p.contains_key(&id)) {
            return;
        }
        while !inbox.ended {
            let left = until.saturating_duration_since(Instant::now());
            let Ok(timeout) = Timespec::try_from(left) else { break };
            let mut ready = [PollFd::new(fd, PollFlags::IN)];
            match rustix::event::poll(&mut ready, Some(&timeout)) {
                Ok(0) => break,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            match inbox.fill(fd) {
                Ok(0) => self.shared.end(&mut inbox),
                Ok(_) => match self.shared.take_messages(&mut inbox, Some(id)) {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(BadFraming) => self.shared.end(&mut inbox),
                },
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
                Err(_) => self.shared.end(&mut inbox),
            }
        }
    }

    /// Asks the server to stop as the protocol says (`shutdown`, then `exit`), without waiting
    /// for its answer: written from this thread at once, so it works from a destructor. A
    /// server stopped this way removes its temporary files (clangd's `preamble-*.pch`,
    /// pyright's and gopls' folders in `$TMPDIR`), which a kill leaves behind. Returns whether
    /// both messages went out whole (not when another write holds the pipe, or the server is
    /// gone or does not read).
    pub fn ask_to_exit(&self) -> bool {
        let Ok(mut writer) = self.writer.try_lock() else { return false };
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut buf = frame_body(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"shutdown"}}"#));
        buf.extend_from_slice(&frame_body(r#"{"jsonrpc":"2.0","method":"exit"}"#));
        let mut cx = Context::from_waker(Waker::noop());
        let mut written = 0;
        while written < buf.len() {
            match Pin::new(&mut **writer).poll_write(&mut cx, &buf[written..]) {
                Poll::Ready(Ok(n)) if n > 0 => written += n,
                _ => return false,
            }
        }
        !matches!(Pin::new(&mut **writer).poll_flush(&mut cx), Poll::Ready(Err(_)))
    }

    /// Whether the server process has ended (gone, or a zombie not yet reaped).
    pub fn has_exited(&self) -> bool {
        let Some(pid) = self.pid else { return true };
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the command name, which is in parentheses and may hold spaces.
            Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
            Err(_) => true,
        }
    }

    /// Kills the server's process group now.
    pub fn kill(&self) {
        if let Some(pid) = self.pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The reader task: reads the server's output whenever it is readable and no caller is
/// reading it itself; at its end, fails every pending request and tells the handler.
async fn read_output(shared: Arc<Shared>, output: Arc<Output>, child: Option<Child>) {
    loop {
        let mut ready = tokio::select! {
            biased;
            () = shared.ended.notified() => break,
            ready = output.watched.readable() => match ready {
                Ok(r) => r,
                Err(_) => break,
            },
        };
        let Ok(mut inbox) = shared.inbox.try_lock() else {
            // A caller is reading on its own thread. When it is done it puts the pipe back in
            // the set, which wakes this task again if output is waiting.
            ready.clear_ready();
            continue;
        };
        while !inbox.ended {
            match inbox.fill(&output.pipe) {
                Ok(0) => shared.end(&mut inbox),
                Ok(_) => {
                    if shared.take_messages(&mut inbox, None).is_err() {
                        shared.end(&mut inbox);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => shared.end(&mut inbox),
            }
        }
        if inbox.ended {
            break;
        }
    }
    shared.closed.store(true, Ordering::SeqCst);
    let status = match child {
        Some(mut c) => match tokio::time::timeout(Duration::from_millis(500), c.wait()).await {
            Ok(Ok(s)) => Some(s.to_string()),
            _ => None,
        },
        None => None,
    };
    if let Ok(mut s) = shared.exit_status.lock() {
        s.clone_from(&status);
    }
    let drained: Vec<_> = shared.pending.lock().map(|mut p| p.drain().collect()).unwrap_or_default();
    for (_, Pending { method, tx, .. }) in drained {
        let _ = tx.send(Err(RpcError::Exited { method, status: status.clone() }));
    }
    shared.sweep.notify_one();
    shared.handler.on_closed();
}

/// Fails each pending request whose deadline passed with [`RpcError::Timeout`] and sends the
/// server `$/cancelRequest` for it, so a slow request does not keep the server busy. Looks every
/// [`SWEEP_EVERY`] while requests come, sooner when one is due sooner, and sleeps until woken
/// once the connection has been idle for [`SWEEP_IDLE_FOR`]. Ends with the connection.
async fn sweep_deadlines(shared: Arc<Shared>) {
    let mut idle_since = Instant::now();
    let mut requests_seen = 0;
    loop {
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let requests = shared.requests.load(Ordering::SeqCst);
        if requests != requests_seen {
            requests_seen = requests;
            idle_since = now;
        }
        let (expired, at) = {
            let Ok(mut pending) = shared.pending.lock() else { return };
            let ids: Vec<i64> = pending.iter().filter(|(_, p)| p.due <= now).map(|(id, _)| *id).collect();
            let expired: Vec<(i64, Pending)> =
                ids.into_iter().filter_map(|id| pending.remove(&id).map(|p| (id, p))).collect();
            let next_due = pending.values().map(|p| p.due).min();
            let at = match next_due {
                None if now.duration_since(idle_since) >= SWEEP_IDLE_FOR => None,
                None => Some(now + SWEEP_EVERY),
                Some(due) => Some(due.min(now + SWEEP_EVERY)),
            };
            // Under the lock requests are added under: one added after this sees the new time
            // and wakes the sweeper when it is due sooner (`notify_one` keeps a permit when
            // the sweeper is not waiting yet).
            if let Ok(mut sweep_at) = shared.sweep_at.lock() {
                *sweep_at = at;
            }
            (expired, at)
        };
        for (id, p) in expired {
            let _ = p.tx.send(Err(RpcError::Timeout { method: p.method, after: p.deadline }));
            let _ = shared.background.send(frame_call(None, "$/cancelRequest", &json!({"id": id})));
        }
        let woken = shared.sweep.notified();
        match at {
            Some(at) => {
                let _ = tokio::time::timeout_at(at.into(), woken).await;
            }
            None => woken.await,
        }
    }
}

/// Drops a pending request the caller no longer waits for and tells the server to stop it.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: i64,
    answered: bool,
}

impl PendingGuard<'_> {
    fn done(mut self) {
        self.answered = true;
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let removed = self.shared.pending.lock().map(|mut p| p.remove(&self.id).is_some()).unwrap_or(false);
        if removed {
            let _ = self.shared.background.send(frame_call(None, "$/cancelRequest", &json!({"id": self.id})));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, BufReader};

    struct Quiet;
    impl Handler for Quiet {
        fn on_request(&self, _: &str, _: Value) -> Result<Value, (i64, String)> {
            Err((METHOD_NOT_FOUND, "no".into()))
        }
        fn on_notification(&self, _: &str, _: Value) {}
    }

    /// Reads one message the client wrote; `None` at the end of its output.
    async fn read_message<R: AsyncBufRead + Unpin>(reader: &mut R) -> Option<Value> {
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await.ok()? == 0 {
                return None;
            }
            match line.trim_end().split_once(':') {
                Some((name, value)) if name.eq_ignore_ascii_case("content-length") => {
                    length = value.trim().parse().ok()?;
                }
                _ if line.trim_end().is_empty() => break,
                _ => {}
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).await.ok()?;
        serde_json::from_slice(&body).ok()
    }

    fn inbox_of(bytes: &[u8]) -> Inbox {
        Inbox { buf: bytes.to_vec(), ..Inbox::default() }
    }

    fn bodies(inbox: &mut Inbox) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(Some(r)) = inbox.next_body() {
            out.push(serde_json::from_slice(&inbox.buf[r]).unwrap_or_default());
        }
        out
    }

    #[test]
    fn frames_round_trip_and_multibyte_lengths_count_bytes() {
        let msg = json!({"jsonrpc": "2.0", "method": "x", "params": {"text": "😀 日本"}});
        let mut buf = frame(&msg);
        buf.extend(frame_call(Some(7), "a\"b", &json!([1])));
        // Bare `\n` line ends and stray blank lines between messages are read too.
        buf.extend(b"\r\n\nContent-Length: 8\nContent-Type: x\n\n{\"id\":1}");
        let got = bodies(&mut inbox_of(&buf));
        assert_eq!(
            got,
            vec![msg, json!({"jsonrpc": "2.0", "id": 7, "method": "a\"b", "params": [1]}), json!({"id": 1})]
        );
    }

    /// A message that arrives in pieces (a pipe hands over at most what was written so far)
    /// is taken only once all of its body is in; a header without a length ends the stream.
    #[test]
    fn a_message_split_anywhere_is_taken_whole_and_a_header_without_length_is_refused() {
        let whole = frame(&json!({"id": 3, "result": {"uri": "file:///é"}}));
        for cut in 1..whole.len() {
            let mut inbox = inbox_of(&whole[..cut]);
            assert!(matches!(inbox.next_body(), Ok(None)), "cut at {cut}");
            inbox.buf.extend_from_slice(&whole[cut..]);
            assert_eq!(bodies(&mut inbox), vec![json!({"id": 3, "result": {"uri": "file:///é"}})], "cut at {cut}");
        }
        assert!(inbox_of(b"Content-Type: x\r\n\r\n{}").next_body().is_err());
    }

    /// A session over real pipes: the server side is the test.
    fn session(handler: Arc<dyn Handler>) -> (Connection, std::io::PipeWriter, BufReader<tokio::io::DuplexStream>) {
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let (from_server, to_client) = std::io::pipe().unwrap_or_else(|e| panic!("{e}"));
        let conn = Connection::from_parts(client_end, OwnedFd::from(from_server), None, None, handler)
            .unwrap_or_else(|e| panic!("{e}"));
        (conn, to_client, BufReader::new(server_end))
    }

    /// A multi-thread runtime whose `block_on` callers read their answers themselves.
    fn two_workers() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn write_to(pipe: &mut std::io::PipeWriter, msg: &Value) {
        use std::io::Write;
        pipe.write_all(&frame(msg)).unwrap_or_else(|e| panic!("{e}"));
    }

    /// A server that never answers: the deadline fails the request and `$/cancelRequest` goes
    /// out with its id; the server's output ending fails everything still pending.
    #[tokio::test]
    async fn deadline_sends_cancel_request_and_eof_fails_pending() {
        let (conn, mut server_write, mut reader) = session(Arc::new(Quiet));
        let started = Instant::now();
        let err = conn.request("textDocument/references", &json!({}), Duration::from_millis(50)).await;
        assert!(matches!(err, Err(RpcError::Timeout { .. })), "{err:?}");
        assert!(started.elapsed() >= Duration::from_millis(50), "failed before its deadline");
        let first = read_message(&mut reader).await.unwrap_or_default();
        let cancel = read_message(&mut reader).await.unwrap_or_default();
        assert_eq!(cancel["method"], "$/cancelRequest");
        assert_eq!(cancel["params"]["id"], first["id"]);

        // A server→client request is answered, even one the client does not know.
        write_to(&mut server_write, &json!({"jsonrpc": "2.0", "id": "s1", "method": "custom/unknown", "params": null}));
        let reply = read_message(&mut reader).await.unwrap_or_default();
        assert_eq!(reply["id"], "s1");
        assert_eq!(reply["error"]["code"], METHOD_NOT_FOUND);

        let conn = Arc::new(conn);
        let c2 = conn.clone();
        let waiting = tokio::spawn(async move { c2.request("hover", &json!({}), Duration::from_secs(30)).await });
        let _ = read_message(&mut reader).await;
        drop(server_write);
        let result = waiting.await.ok();
        assert!(matches!(result, Some(Err(RpcError::Exited { .. }))), "{result:?}");
        assert!(conn.is_closed());
    }

    /// A request due sooner than the one before it still fails at its own deadline, not when
    /// the sweeper would next have looked (every second while requests come), and a request
    /// after a long quiet spell is still kept to its deadline.
    #[tokio::test]
    async fn l2_each_request_fails_at_its_own_deadline_whatever_came_before() {
        let (conn, _server_write, _reader) = session(Arc::new(Quiet));
        let conn = Arc::new(conn);
        let c2 = conn.clone();
        let long = tokio::spawn(async move { c2.request("long", &json!({}), Duration::from_secs(30)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        for deadline in [40, 60] {
            let started = Instant::now();
            let got = conn.request("short", &json!({}), Duration::from_millis(deadline)).await;
            assert!(matches!(got, Err(RpcError::Timeout { .. })), "{got:?}");
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(deadline) && took < Duration::from_millis(700),
                "a {deadline} ms deadline fired after {took:?}"
            );
        }
        long.abort();
    }

    /// Counts notifications and answers `workspace/configuration`.
    #[derive(Default)]
    struct Counting {
        seen: Mutex<Vec<String>>,
    }
    impl Handler for Counting {
        fn on_request(&self, method: &str, _: Value) -> Result<Value, (i64, String)> {
            if method == "workspace/configuration" { Ok(json!([null])) } else { Err((METHOD_NOT_FOUND, "no".into())) }
        }
        fn on_notification(&self, method: &str, _: Value) {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(method.to_owned());
            }
        }
    }

    /// Callers in `block_on` on a multi-thread runtime read the server's output themselves
    /// (issue 13). What else arrives meanwhile is handled as by the reader task: notifications
    /// seen in order, server requests answered, other callers' answers delivered; a
    /// notification sent before a request reaches the server before it; the output's end still
    /// fails a pending request, and a late answer still arrives after the caller stopped reading.
    #[test]
    fn l2_caller_in_block_on_reads_its_answer_and_everything_around_it() {
        let rt = two_workers();
        let handler = Arc::new(Counting::default());
        let (conn, server_write, reader) = rt.block_on(async { session(handler.clone()) });
        let conn = Arc::new(conn);
        // The server: answers each request with its method and the id, preceded by a
        // notification and a request of its own; answers `slow` only after 50 ms.
        let server = rt.spawn(async move {
            let (mut reader, mut write) = (reader, server_write);
            let mut order = Vec::new();
            while let Some(msg) = read_message(&mut reader).await {
                let Some(method) = msg["method"].as_str().map(str::to_owned) else { continue };
                order.push(method.clone());
                if msg.get("id").is_none() || method == "stop" {
                    if method == "stop" {
                        return order;
                    }
                    continue;
                }
                write_to(&mut write, &json!({"jsonrpc": "2.0", "method": "note", "params": {}}));
                write_to(
                    &mut write,
                    &json!({"jsonrpc": "2.0", "id": "c", "method": "workspace/configuration", "params": {}}),
                );
                if method == "slow" {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                write_to(&mut write, &json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"method": method}}));
            }
            order
        });
        for i in 0..50 {
            rt.block_on(conn.notify("didChange", &json!({"i": i})));
            let got = rt.block_on(conn.request("definition", &json!({"i": i}), Duration::from_secs(5)));
            assert_eq!(got.ok(), Some(json!({"method": "definition"})), "request {i}");
        }
        // Past the time a caller reads for itself, the answer still comes (through the task).
        let slow = rt.block_on(conn.request("slow", &json!({}), Duration::from_secs(5)));
        assert_eq!(slow.ok(), Some(json!({"method": "slow"})));
        // Two callers at once: each gets its own answer whoever reads it.
        let none = json!({});
        let (a, b) = rt.block_on(async {
            tokio::join!(
                conn.request("first", &none, Duration::from_secs(5)),
                conn.request("second", &none, Duration::from_secs(5))
            )
        });
        assert_eq!((a.ok(), b.ok()), (Some(json!({"method": "first"})), Some(json!({"method": "second"}))));
        rt.block_on(conn.notify("stop", &json!({})));
        let order = rt.block_on(server).unwrap_or_default();
        let mut expected = Vec::new();
        for _ in 0..50 {
            expected.extend(["didChange".to_owned(), "definition".to_owned()]);
        }
        expected.extend(["slow", "first", "second", "stop"].map(str::to_owned));
        // The configuration replies go to the server too; only the client's own calls are compared.
        assert_eq!(order, expected);
        let notes = handler.seen.lock().map(|s| s.len()).unwrap_or(0);
        assert_eq!(notes, 53, "every notification the server sent was seen");
    }

    /// A server that stops reading its input cannot hold a request past its deadline, even one
    /// still waiting to be written behind a message the server never took.
    #[tokio::test]
    async fn l2_a_request_stuck_behind_an_unread_message_fails_at_its_deadline() {
        let (conn, _server_write, _reader) = session(Arc::new(Quiet));
        conn.notify("big", &json!({"text": "x".repeat(1 << 20)})).await;
        let started = Instant::now();
        let got = conn.request("hover", &json!({}), Duration::from_millis(200)).await;
        assert!(matches!(got, Err(RpcError::Timeout { .. })), "{got:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "failed only after {:?}", started.elapsed());
    }

    /// A caller that will read its answer itself, waiting to write behind an earlier message the
    /// server has not taken yet, must leave the server's output to the reader task meanwhile: a
    /// server that reads its input only once its own output is read would otherwise never take
    /// the earlier message, and both would wait until the deadline.
    #[test]
    fn l2_a_caller_waiting_to_write_leaves_the_output_to_the_reader() {
        let rt = two_workers();
        let (conn, mut server_write, mut reader) = rt.block_on(async { session(Arc::new(Quiet)) });
        // More than the 64 KiB the input takes at once: a spawned task finishes it, holding the lock.
        rt.block_on(conn.notify("big", &json!({"text": "x".repeat(1 << 20)})));
        let server = rt.spawn(async move {
            // 32 MB of notifications before the server reads anything: far more than the pipe
            // holds, so the server waits for them to be read.
            let note = json!({"jsonrpc": "2.0", "method": "note", "params": {"text": "y".repeat(64 << 10)}});
            let writing = tokio::task::spawn_blocking(move || {
                for _ in 0..512 {
                    write_to(&mut server_write, &note);
                }
                server_write
            });
            let mut server_write = writing.await.unwrap_or_else(|e| panic!("{e}"));
            let _big = read_message(&mut reader).await;
            let request = read_message(&mut reader).await.unwrap_or_default();
            write_to(&mut server_write, &json!({"jsonrpc": "2.0", "id": request["id"], "result": "answered"}));
            server_write
        });
        let started = Instant::now();
        let got = rt.block_on(conn.request("definition", &json!({}), Duration::from_secs(10)));
        assert_eq!(got.ok(), Some(json!("answered")), "after {:?}", started.elapsed());
        drop(rt.block_on(server));
    }

    /// The server exits while a caller in `block_on` reads for itself: the request fails with
    /// "exited" right away, not at its deadline.
    #[test]
    fn l2_output_ending_while_the_caller_reads_fails_its_request() {
        let rt = two_workers();
        let (conn, server_write, mut reader) = rt.block_on(async { session(Arc::new(Quiet)) });
        let closer = rt.spawn(async move {
            let _ = read_message(&mut reader).await;
            drop(server_write);
        });
        let started = Instant::now();
        let got = rt.block_on(conn.request("hover", &json!({}), Duration::from_secs(30)));
        assert!(matches!(got, Err(RpcError::Exited { .. })), "{got:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "failed only after {:?}", started.elapsed());
        let _ = rt.block_on(closer);
        assert!(conn.is_closed());
    }
}
