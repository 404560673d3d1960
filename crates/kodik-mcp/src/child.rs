//! A mounted stdio MCP server as an rmcp transport. rmcp's own child-process transport reads at
//! most 16 MiB per message and silently drops a longer one, so a server answering with a
//! full-page screenshot (36 MB of base64) left the call waiting for its 10-minute timeout and
//! then blamed the server for not answering. Here a message may be up to [`MAX_MESSAGE`]; a
//! longer one closes the connection at once, and the reason is kept for the call's error.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

use crate::tasks::LineSniffer;

/// The longest message read from a server: a full-page screenshot or a large query result
/// fits; anything longer is no answer a model could use.
pub(crate) const MAX_MESSAGE: usize = 128 * 1024 * 1024;

/// How long a server may take to exit once its input is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Why the connection was closed by kodik, when it was (a message over [`MAX_MESSAGE`]).
pub(crate) type CloseReason = Arc<Mutex<Option<String>>>;

/// A started server: its process and the JSON-RPC connection over its stdin and stdout.
pub(crate) struct ServerProcess {
    child: Option<Box<dyn ChildWrapper>>,
    transport: AsyncRwTransport<RoleClient, LineLimit<ChildStdout>, ChildStdin>,
}

impl ServerProcess {
    /// Starts `command` with piped stdin, stdout and stderr; returns the process and its stderr.
    pub(crate) fn spawn(
        mut command: CommandWrap,
        reason: CloseReason,
        sniffer: LineSniffer,
    ) -> std::io::Result<(Self, Option<ChildStderr>)> {
        command.command_mut().stdin(std::process::Stdio::piped());
        command.command_mut().stdout(std::process::Stdio::piped());
        command.command_mut().stderr(std::process::Stdio::piped());
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.inner_mut().stdin().take(), child.inner_mut().stdout().take()) else {
            return Err(std::io::Error::other("the server's stdin or stdout was not piped"));
        };
        let stderr = child.inner_mut().stderr().take();
        let read = LineLimit { inner: stdout, line: 0, limit: MAX_MESSAGE, reason, sniffer: Some(sniffer) };
        // rmcp's own limit lies above ours: ours is the one that decides, and says why.
        let transport = AsyncRwTransport::new(read, stdin).with_max_line_length(MAX_MESSAGE + 2);
        Ok((Self { child: Some(child), transport }, stderr))
    }

    /// The server's process id (the leader of its process group).
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        // MCP's stdio shutdown: close the server's input, let it exit, then kill it.
        self.transport.close().await?;
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err()
        {
            Box::into_pin(child.kill()).await?;
        }
        Ok(())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `kill` also reaps it (no zombie); without a runtime the kill-on-drop wrapper
            // still stops it when `child` goes.
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = Box::into_pin(child.kill()).await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for ServerProcess {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// The server's output, ended with an error (which closes the connection, failing every call
/// waiting on it at once) when one line grows past `limit`.
pub(crate) struct LineLimit<R> {
    inner: R,
    /// Bytes of the current line so far.
    line: usize,
    limit: usize,
    reason: CloseReason,
    /// Reads `tools/list` answers for the tools that run only as tasks.
    sniffer: Option<LineSniffer>,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let read = &buf.filled()[before..];
        // The longest line seen in this chunk: the current line's end, whole lines, the start
        // of the next.
        let mut longest = 0;
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', read) {
            longest = longest.max(if start == 0 { this.line + end } else { end - start });
            start = end + 1;
        }
        this.line = if start == 0 { this.line + read.len() } else { read.len() - start };
        if longest.max(this.line) > this.limit {
            let why = format!(
                "it sent a message of over {} MiB, more than kodik reads at once, so the connection was closed",
                this.limit / (1024 * 1024)
            );
            if let Ok(mut reason) = this.reason.lock() {
                *reason = Some(why.clone());
            }
            // A read that fails hands over nothing.
            buf.set_filled(before);
            return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why)));
        }
        if let Some(sniffer) = &mut this.sniffer {
            sniffer.feed(&buf.filled()[before..]);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn g8_a_line_over_the_limit_ends_the_stream_with_the_reason_and_shorter_ones_pass() {
        let reason = CloseReason::default();
        // A long line in the middle of one chunk counts as much as one at its end.
        let data = b"short\n0123456789012\nabc".to_vec();
        let mut r = LineLimit { inner: &data[..], line: 0, limit: 12, reason: Arc::clone(&reason), sniffer: None };
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(reason.lock().unwrap().as_deref().unwrap().contains("message of over"));
        let mut ok = LineLimit {
            inner: &b"short\nabcdefghij\n"[..],
            line: 0,
            limit: 12,
            reason: CloseReason::default(),
            sniffer: None,
        };
        let mut all = Vec::new();
        ok.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"short\nabcdefghij\n");
    }
}
