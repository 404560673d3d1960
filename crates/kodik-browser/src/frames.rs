//! Cross-origin frames (B3, B4): the page's helper cannot see into them, so each one is reached
//! through its own execution context — in the tab's DevTools session when the frame shares the
//! page's renderer (same site, other port), or in the frame's own session when site isolation put
//! it in another process (an out-of-process iframe, attached by [`Running::attach_frames`]).
//!
//! Their refs carry the frame's key (`f2e5`), so an action finds the frame again, and their
//! coordinates are moved by the iframe's position in each parent up to the top page, where
//! mouse events are sent.
//!
//! [`Running::attach_frames`]: crate::session::Running::attach_frames

use chromiumoxide::cdp::browser_protocol::dom::{DescribeNodeParams, GetFrameOwnerParams, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::page::FrameId;
use chromiumoxide::cdp::js_protocol::runtime::{
    CallFunctionOnParams, EvaluateParams, ExecutionContextId, RemoteObjectId,
};
use serde_json::Value;

use crate::error::BrowserError;
use crate::raw::Session;
use crate::session::Tab;

/// How deep frames inside frames are followed.
pub(crate) const MAX_DEPTH: usize = 4;

/// A cross-origin frame a snapshot has shown, by its key `n` (refs `f{n}eN`).
#[derive(Debug, Clone)]
pub(crate) struct FrameInfo {
    pub key: u32,
    pub frame_id: String,
    /// The frame the iframe element is in; `None` is the top page.
    pub parent: Option<u32>,
    /// The next ref number in this frame, so refs are not reused across its documents.
    pub next_ref: u64,
    /// The snapshot that last showed it.
    pub seen_in: u64,
}

/// Where a document of the tab is evaluated: the top page or a cross-origin frame.
#[derive(Clone)]
pub(crate) struct FrameCtx {
    /// The DevTools session the document lives in.
    pub page: Session,
    /// Its main-world context in that session; `None` is the session's main frame.
    pub context: Option<ExecutionContextId>,
    /// The iframe element of each level, outermost first, as (session of its parent, object).
    owners: Vec<(Session, RemoteObjectId)>,
    /// `None` for the top page.
    pub key: Option<u32>,
}

impl FrameCtx {
    /// The tab's top-level document.
    pub fn top(tab: &Tab) -> Self {
        Self { page: Session::Page(tab.page.clone()), context: None, owners: Vec::new(), key: None }
    }

    /// The prefix of refs issued in this document.
    pub fn prefix(&self) -> String {
        self.key.map(|k| format!("f{k}")).unwrap_or_default()
    }

    /// Scrolls the iframes that hold this document into view and returns where the document's
    /// viewport starts in top-page coordinates. Innermost first: scrolling an outer frame does
    /// not move an inner iframe within its own parent.
    pub async fn offset(&self) -> Result<(f64, f64), BrowserError> {
        let (mut x, mut y) = (0.0, 0.0);
        for (page, owner) in self.owners.iter().rev() {
            let call = CallFunctionOnParams::builder()
                .function_declaration(
                    "function () { this.scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'instant' }); \
                     const r = this.getBoundingClientRect(), s = getComputedStyle(this); \
                     return [r.left + this.clientLeft + (parseFloat(s.paddingLeft) || 0), r.top + this.clientTop + (parseFloat(s.paddingTop) || 0)]; }",
                )
                .object_id(owner.clone())
                .return_by_value(true)
                .build()
                .map_err(BrowserError::Other)?;
            let r = page.execute(call).await?;
            let v = r.result.value.clone().unwrap_or(Value::Null);
            x += v.get(0).and_then(Value::as_f64).unwrap_or(0.0);
            y += v.get(1).and_then(Value::as_f64).unwrap_or(0.0);
        }
        Ok((x, y))
    }
}

/// The key in a frame ref: `f2e5` → 2; `e5` → `None`.
pub(crate) fn key_of_ref(reference: &str) -> Option<u32> {
    let rest = reference.strip_prefix('f')?;
    let (key, n) = rest.split_once('e')?;
    n.parse::<u64>().ok()?;
    key.parse().ok()
}

/// The frame whose iframe element `expression` (evaluated in `parent`) yields, registered under
/// a key for its refs.
pub(crate) async fn child_by_expression(
    tab: &Tab,
    parent: &FrameCtx,
    expression: &str,
) -> Result<FrameCtx, BrowserError> {
    let mut params = EvaluateParams::builder().expression(expression).return_by_value(false);
    if let Some(c) = parent.context {
        params = params.context_id(c);
    }
    let params = params.build().map_err(BrowserError::Other)?;
    let r = parent.page.execute(params).await?;
    let owner = r
        .result
        .object_id
        .clone()
        .ok_or_else(|| BrowserError::Other("the frame's element is gone; take a new snapshot".into()))?;
    child_by_owner(tab, parent, owner, None).await
}

/// The frame registered under `key`, found again from its parent.
pub(crate) async fn by_key(tab: &Tab, key: u32, reference: &str) -> Result<FrameCtx, BrowserError> {
    let mut chain = Vec::new();
    {
        let d = tab.shared.lock();
        let mut next = Some(key);
        while let Some(k) = next {
            let info = d.frames.iter().find(|f| f.key == k).cloned().filter(|f| f.seen_in == d.snapshot_gen);
            let Some(info) = info else {
                return Err(BrowserError::StaleRef(format!(
                    "ref {reference} is in a frame that is not in the latest snapshot of this page"
                )));
            };
            next = info.parent;
            chain.push(info);
            if chain.len() > MAX_DEPTH {
                break;
            }
        }
    }
    let mut ctx = FrameCtx::top(tab);
    for info in chain.into_iter().rev() {
        let gone = || BrowserError::StaleRef(format!("ref {reference} is in a frame that has gone since the snapshot"));
        let owner = ctx
            .page
            .execute(GetFrameOwnerParams::new(FrameId::new(info.frame_id.clone())))
            .await
            .map_err(|_| gone())?;
        let mut resolve = ResolveNodeParams::builder().backend_node_id(owner.backend_node_id);
        if let Some(c) = ctx.context {
            resolve = resolve.execution_context_id(c);
        }
        let object = ctx.page.execute(resolve.build()).await.map_err(|_| gone())?;
        let owner = object.object.object_id.clone().ok_or_else(gone)?;
        ctx = child_by_owner(tab, &ctx, owner, Some(&info.frame_id)).await?;
    }
    Ok(ctx)
}

async fn child_by_owner(
    tab: &Tab,
    parent: &FrameCtx,
    owner: RemoteObjectId,
    expect: Option<&str>,
) -> Result<FrameCtx, BrowserError> {
    let node = parent.page.execute(DescribeNodeParams::builder().object_id(owner.clone()).build()).await?;
    let frame_id = node
        .node
        .frame_id
        .clone()
        .ok_or_else(|| BrowserError::Other("the frame has no document yet; wait for it to load".into()))?;
    let id = frame_id.inner().clone();
    if expect.is_some_and(|e| e != id) {
        return Err(BrowserError::StaleRef("the frame navigated since the snapshot; take a new snapshot".into()));
    }
    // An out-of-process frame has its own session; a same-site one shares the page's renderer
    // and is reached through its execution context there.
    let oopif = tab.frame_pages.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
    let (page, context) = match oopif {
        Some(p) => (p, None),
        None => {
            let context = match parent.page.page() {
                Some(p) => p.frame_execution_context(frame_id).await.ok().flatten(),
                None => None,
            };
            let context = context.ok_or_else(|| {
                BrowserError::Other(format!("the cross-origin frame {id} cannot be reached yet (still loading?)"))
            })?;
            (parent.page.clone(), Some(context))
        }
    };
    let key = {
        let mut d = tab.shared.lock();
        let generation = d.snapshot_gen;
        match d.frames.iter_mut().find(|f| f.frame_id == id) {
            Some(f) => {
                f.parent = parent.key;
                f.key
            }
            None => {
                let key = d.frames.iter().map(|f| f.key).max().unwrap_or(0) + 1;
                d.frames.push(FrameInfo { key, frame_id: id, parent: parent.key, next_ref: 1, seen_in: generation });
                key
            }
        }
    };
    let mut owners = parent.owners.clone();
    owners.push((parent.page.clone(), owner));
    Ok(FrameCtx { page, context, owners, key: Some(key) })
}
