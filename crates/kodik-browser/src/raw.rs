//! A second, minimal DevTools connection for out-of-process frames (B3).
//!
//! chromiumoxide routes a session's commands through its target only when the target is a page,
//! so a cross-site iframe attached as its own target never answers through a `Page`. This
//! connection attaches to such frames itself (flat sessions) and sends their commands with the
//! session id, matching answers by call id; events are not needed and are dropped.
//!
//! Tabs send their `Page.navigate` here too: chromiumoxide queues a page's navigations behind one
//! another and keeps each until its own 30 s deadline, so after a navigation that was given up on
//! (and stopped) the next one would wait for that deadline.

use std::collections::HashMap;
use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::{AttachToTargetParams, SessionId, TargetId};
use chromiumoxide::cdp::events::CdpEventMessage;
use chromiumoxide::conn::Connection;
use chromiumoxide::types::{Command, Message, MethodId};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::BrowserError;

type Reply = oneshot::Sender<Result<Value, String>>;

/// The connection: a task owns the socket; calls reach it over a channel.
pub(crate) struct RawCdp {
    tx: mpsc::UnboundedSender<(MethodId, Option<SessionId>, Value, Reply)>,
    task: JoinHandle<()>,
}

impl Drop for RawCdp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawCdp {
    /// Connects to the browser's DevTools websocket.
    pub async fn connect(ws_url: &str) -> Result<Arc<Self>, BrowserError> {
        let mut conn = Connection::<CdpEventMessage>::connect(ws_url)
            .await
            .map_err(|e| BrowserError::Other(format!("cannot open a DevTools connection for frames: {e}")))?;
        let (tx, mut rx) = mpsc::unbounded_channel::<(MethodId, Option<SessionId>, Value, Reply)>();
        let task = tokio::spawn(async move {
            let mut pending: HashMap<String, Reply> = HashMap::new();
            loop {
                tokio::select! {
                    call = rx.recv() => {
                        let Some((method, session, params, reply)) = call else { return };
                        match conn.submit_command(method, session, params) {
                            Ok(id) => { pending.insert(id.to_string(), reply); }
                            Err(e) => { let _ = reply.send(Err(e.to_string())); }
                        }
                    }
                    msg = conn.next() => match msg {
                        None => return,
                        Some(Ok(Message::Response(r))) => {
                            if let Some(reply) = pending.remove(&r.id.to_string()) {
                                let _ = reply.send(match (r.result, r.error) {
                                    (_, Some(e)) => Err(e.message),
                                    (Some(v), None) => Ok(v),
                                    (None, None) => Ok(Value::Null),
                                });
                            }
                        }
                        // Events (and ones this build of the protocol cannot parse) are not used.
                        Some(_) => {}
                    },
                }
            }
        });
        Ok(Arc::new(Self { tx, task }))
    }

    async fn call<C: Command>(&self, session: Option<SessionId>, cmd: C) -> Result<C::Response, BrowserError> {
        let method = cmd.identifier();
        let params = serde_json::to_value(&cmd).map_err(|e| BrowserError::Other(e.to_string()))?;
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((method.clone(), session, params, reply))
            .map_err(|_| BrowserError::Other("the DevTools connection for frames is closed".into()))?;
        let value = tokio::time::timeout(std::time::Duration::from_secs(30), answer)
            .await
            .map_err(|_| BrowserError::Other(format!("{method} got no answer within 30 s")))?
            .map_err(|_| BrowserError::Other("the DevTools connection for frames is closed".into()))?
            .map_err(|e| BrowserError::Other(format!("{method} failed: {e}")))?;
        C::response_from_value(value).map_err(|e| BrowserError::Other(format!("{method}: unexpected answer: {e}")))
    }

    /// Attaches to an out-of-process frame target and returns its session.
    pub async fn attach(self: &Arc<Self>, target: TargetId) -> Result<Session, BrowserError> {
        let params =
            AttachToTargetParams::builder().target_id(target).flatten(true).build().map_err(BrowserError::Other)?;
        let r = self.call(None, params).await?;
        Ok(Session::Raw { cdp: self.clone(), session: r.session_id })
    }
}

/// The second connection of one browser, opened on first use and shared by its tabs and frames.
pub(crate) struct RawLink {
    ws_url: String,
    cdp: tokio::sync::OnceCell<Arc<RawCdp>>,
}

impl RawLink {
    /// A link to the browser at `ws_url`; nothing is opened yet.
    pub fn new(ws_url: &str) -> Arc<Self> {
        Arc::new(Self { ws_url: ws_url.to_string(), cdp: tokio::sync::OnceCell::new() })
    }

    /// The connection, opened now if it is not yet.
    pub async fn get(&self) -> Result<Arc<RawCdp>, BrowserError> {
        self.cdp.get_or_try_init(|| RawCdp::connect(&self.ws_url)).await.cloned()
    }
}

/// Where a document's commands go: a tab's page, or an out-of-process frame's own session.
#[derive(Clone)]
pub(crate) enum Session {
    Page(Page),
    Raw { cdp: Arc<RawCdp>, session: SessionId },
}

impl Session {
    /// Sends `cmd` and returns its answer.
    pub async fn execute<C: Command>(&self, cmd: C) -> Result<C::Response, BrowserError> {
        match self {
            Session::Page(p) => {
                let what = format!("run {}", cmd.identifier());
                p.execute(cmd).await.map(|r| r.result).map_err(crate::error::cdp(what))
            }
            Session::Raw { cdp, session } => cdp.call(Some(session.clone()), cmd).await,
        }
    }

    /// The tab's page, when this is one.
    pub fn page(&self) -> Option<&Page> {
        match self {
            Session::Page(p) => Some(p),
            Session::Raw { .. } => None,
        }
    }
}
