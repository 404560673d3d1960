//! JSON-RPC over a child process's stdio, as LSP frames it (`Content-Length` headers).
//!
//! Our own layer rather than `async-lsp`: that crate stops its loop on unknown notifications
//! and hides request ids, so a request past its deadline could not be cancelled. Messages are
//! raw [`serde_json::Value`]s; the few shapes we read are picked out where they are used.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

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

type Pending = Arc<Mutex<HashMap<i64, (String, oneshot::Sender<Result<Value, RpcError>>)>>>;

/// One running server process and the JSON-RPC session over its stdio.
pub struct Connection {
    out: mpsc::UnboundedSender<Vec<u8>>,
    pending: Pending,
    next_id: AtomicI64,
    closed: Arc<AtomicBool>,
    pid: Option<u32>,
    exit_status: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("pid", &self.pid).field("closed", &self.is_closed()).finish()
    }
}

/// Frames one message: `Content-Length` header, blank line, JSON body.
pub fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut buf = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    buf.extend_from_slice(body.as_bytes());
    buf
}

/// Reads one framed message; `Ok(None)` at a clean end of input.
pub async fn read_message<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<Value>> {
    let mut length: Option<usize> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            if length.is_some() {
                break;
            }
            // Stray blank lines between messages are tolerated.
            continue;
        }
        if let Some((name, value)) = trimmed.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok();
        }
    }
    let length = length.unwrap_or(0);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad JSON-RPC body: {e}")))
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
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // Its own group, so tsserver, cargo check and other grandchildren go down with it.
            .process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("the child has no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("the child has no stdout"))?;
        Ok(Self::from_parts(stdin, stdout, Some(child), pid, handler))
    }

    fn from_parts(
        mut stdin: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
        stdout: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        child: Option<Child>,
        pid: Option<u32>,
        handler: Arc<dyn Handler>,
    ) -> Self {
        let (out, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(buf) = rx.recv().await {
                if stdin.write_all(&buf).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let exit_status: Arc<Mutex<Option<String>>> = Arc::default();
        let reader_out = out.clone();
        let (reader_pending, reader_closed, reader_status) = (pending.clone(), closed.clone(), exit_status.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            while let Ok(Some(msg)) = read_message(&mut reader).await {
                dispatch(msg, &reader_pending, &reader_out, handler.as_ref());
            }
            reader_closed.store(true, Ordering::SeqCst);
            let status = match child {
                Some(mut c) => match tokio::time::timeout(Duration::from_millis(500), c.wait()).await {
                    Ok(Ok(s)) => Some(s.to_string()),
                    _ => None,
                },
                None => None,
            };
            if let Ok(mut s) = reader_status.lock() {
                s.clone_from(&status);
            }
            let drained: Vec<_> = reader_pending.lock().map(|mut p| p.drain().collect()).unwrap_or_default();
            for (_, (method, tx)) in drained {
                let _ = tx.send(Err(RpcError::Exited { method, status: status.clone() }));
            }
            handler.on_closed();
        });
        Self { out, pending, next_id: AtomicI64::new(1), closed, pid, exit_status }
    }

    /// The server's process id (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the server's output has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.out.send(frame(&json!({"jsonrpc": "2.0", "method": method, "params": params})));
    }

    /// Sends a request and waits for its answer at most `deadline`; past it, the request is
    /// cancelled with `$/cancelRequest` so it does not keep the server busy.
    pub async fn request(&self, method: &str, params: Value, deadline: Duration) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        let exited = || RpcError::Exited {
            method: method.to_owned(),
            status: self.exit_status.lock().ok().and_then(|s| s.clone()),
        };
        {
            let Ok(mut pending) = self.pending.lock() else { return Err(exited()) };
            // Checked under the lock: the reader drains the map under it after setting `closed`.
            if self.is_closed() {
                return Err(exited());
            }
            pending.insert(id, (method.to_owned(), tx));
        }
        let _ = self.out.send(frame(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})));
        // Removes the entry when the caller stops waiting (deadline or its own cancellation).
        let guard = PendingGuard { pending: &self.pending, id, out: &self.out, answered: false };
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(answer)) => {
                guard.done();
                answer
            }
            Ok(Err(_)) => {
                guard.done();
                Err(exited())
            }
            Err(_) => Err(RpcError::Timeout { method: method.to_owned(), after: deadline }),
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

/// Drops a pending request the caller no longer waits for and tells the server to stop it.
struct PendingGuard<'a> {
    pending: &'a Pending,
    id: i64,
    out: &'a mpsc::UnboundedSender<Vec<u8>>,
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
        let removed = self.pending.lock().map(|mut p| p.remove(&self.id).is_some()).unwrap_or(false);
        if removed {
            let _ = self
                .out
                .send(frame(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": self.id}})));
        }
    }
}

fn dispatch(msg: Value, pending: &Pending, out: &mpsc::UnboundedSender<Vec<u8>>, handler: &dyn Handler) {
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = msg.get("id").cloned();
    match (method, id) {
        (Some(method), Some(id)) => {
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            let reply = match handler.on_request(&method, params) {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err((code, message)) => {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                }
            };
            let _ = out.send(frame(&reply));
        }
        (Some(method), None) => handler.on_notification(&method, msg.get("params").cloned().unwrap_or(Value::Null)),
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let Some((method, tx)) = pending.lock().ok().and_then(|mut p| p.remove(&id)) else { return };
            let answer = match msg.get("error") {
                Some(err) if !err.is_null() => Err(RpcError::Server {
                    method,
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
                }),
                _ => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = tx.send(answer);
        }
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl Handler for Quiet {
        fn on_request(&self, _: &str, _: Value) -> Result<Value, (i64, String)> {
            Err((METHOD_NOT_FOUND, "no".into()))
        }
        fn on_notification(&self, _: &str, _: Value) {}
    }

    #[tokio::test]
    async fn frames_round_trip_and_multibyte_lengths_count_bytes() {
        let msg = json!({"jsonrpc": "2.0", "method": "x", "params": {"text": "😀 日本"}});
        let mut buf = frame(&msg);
        buf.extend(frame(&json!({"id": 1})));
        let mut reader = BufReader::new(&buf[..]);
        assert_eq!(read_message(&mut reader).await.ok().flatten(), Some(msg));
        assert_eq!(read_message(&mut reader).await.ok().flatten(), Some(json!({"id": 1})));
        assert_eq!(read_message(&mut reader).await.ok().flatten(), None);
    }

    /// A server that never answers: the deadline fails the request and `$/cancelRequest` goes
    /// out with its id; the server's output ending fails everything still pending.
    #[tokio::test]
    async fn deadline_sends_cancel_request_and_eof_fails_pending() {
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let (server_read, mut server_write) = tokio::io::split(server_end);
        let (client_read, client_write) = tokio::io::split(client_end);
        let conn = Connection::from_parts(client_write, client_read, None, None, Arc::new(Quiet));
        let err = conn.request("textDocument/references", json!({}), Duration::from_millis(50)).await;
        assert!(matches!(err, Err(RpcError::Timeout { .. })), "{err:?}");
        let mut reader = BufReader::new(server_read);
        let first = read_message(&mut reader).await.ok().flatten().unwrap_or_default();
        let cancel = read_message(&mut reader).await.ok().flatten().unwrap_or_default();
        assert_eq!(cancel["method"], "$/cancelRequest");
        assert_eq!(cancel["params"]["id"], first["id"]);

        // A server→client request is answered, even one the client does not know.
        let ask = frame(&json!({"jsonrpc": "2.0", "id": "s1", "method": "custom/unknown", "params": null}));
        server_write.write_all(&ask).await.unwrap_or_default();
        let reply = read_message(&mut reader).await.ok().flatten().unwrap_or_default();
        assert_eq!(reply["id"], "s1");
        assert_eq!(reply["error"]["code"], METHOD_NOT_FOUND);

        let conn = Arc::new(conn);
        let c2 = conn.clone();
        let waiting = tokio::spawn(async move { c2.request("hover", json!({}), Duration::from_secs(30)).await });
        let _ = read_message(&mut reader).await;
        drop(server_write);
        drop(reader);
        let result = waiting.await.ok();
        assert!(matches!(result, Some(Err(RpcError::Exited { .. }))), "{result:?}");
        assert!(conn.is_closed());
    }
}
