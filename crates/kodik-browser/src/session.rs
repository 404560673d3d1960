//! [`BrowserSession`]: one conversation's browser — its process, tabs, and what they reported.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, DownloadProgressState, EventDownloadProgress, EventDownloadWillBegin, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::inspector::EventTargetCrashed as InspectorTargetCrashed;
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, EventResponseReceived, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, EventFileChooserOpened, EventFrameNavigated, EventJavascriptDialogOpening,
    EventNavigatedWithinDocument, SetInterceptFileChooserDialogParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, EventTargetCrashed, EventTargetCreated, EventTargetDestroyed,
    TargetId,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallFunctionOnParams, EventConsoleApiCalled, EventExceptionThrown, RemoteObject,
};
use chromiumoxide::{Browser, Page};
use futures_util::StreamExt;
use kodik_schema::browser::StorageMode;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::credentials::CredentialStore;
use crate::error::{BrowserError, cdp};
use crate::launch::{self, Launched};

/// Pages of out-of-process frames by frame id (which is their target id).
pub(crate) type FramePages = Arc<Mutex<std::collections::HashMap<String, crate::raw::Session>>>;

/// How many console entries, page errors and failed requests a tab keeps (B3, B11).
pub(crate) const BUFFER: usize = 500;

/// Options of a [`BrowserSession`].
#[derive(Debug, Clone)]
pub struct BrowserOptions {
    /// The Chromium binary; `None` looks for `CHROME`, then Debian's `chromium`.
    pub executable: Option<PathBuf>,
    /// Where the persistent `global` and `workspace` profiles live; `None` is
    /// `$XDG_CACHE_HOME/kodik/browser` (or `~/.cache/kodik/browser`).
    pub profile_root: Option<PathBuf>,
    /// A key for the `workspace` profile, e.g. the workspace's root path.
    pub workspace_key: Option<String>,
    /// Untrusted workspaces get only ephemeral storage (B1).
    pub trusted: bool,
    /// Longest wait for Chromium to start.
    pub launch_timeout: Duration,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            executable: None,
            profile_root: None,
            workspace_key: None,
            trusted: true,
            launch_timeout: Duration::from_secs(20),
        }
    }
}

impl BrowserOptions {
    /// The folder of a persistent profile (`None` for ephemeral storage or without a cache folder).
    pub(crate) fn profile_dir(&self, storage: StorageMode) -> Option<PathBuf> {
        let root = self.profile_root.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|c| c.join("kodik").join("browser"))
        })?;
        match storage {
            StorageMode::Global => Some(root.join("global")),
            StorageMode::Workspace => {
                let key = self.workspace_key.clone().unwrap_or_default();
                Some(root.join(format!("workspace-{:016x}", fnv(key.as_bytes()))))
            }
            StorageMode::Ephemeral => None,
        }
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// One console message.
#[derive(Debug, Clone)]
pub(crate) struct ConsoleEntry {
    pub level: String,
    pub text: String,
}

/// A JavaScript dialog waiting for an answer (B6).
#[derive(Debug, Clone)]
pub(crate) struct Dialog {
    pub kind: String,
    pub message: String,
    pub default_prompt: String,
}

/// The latest screenshot of a tab, for coordinate targets (B3).
#[derive(Debug, Clone)]
pub(crate) struct Shot {
    pub id: String,
    /// The image's size in pixels: x/y targets are read off the image.
    pub width: f64,
    pub height: f64,
    /// CSS pixels per image pixel, across and down: a phone viewport shows a page without a
    /// viewport meta tag at its 980 px layout width scaled down to the screen.
    pub scale: (f64, f64),
    pub url: String,
    /// The page's scroll position when it was taken: scrolled, the image shows other places.
    pub scroll: (f64, f64),
}

/// What a tab's event listeners collect.
#[derive(Debug, Default)]
pub(crate) struct TabData {
    pub console: VecDeque<ConsoleEntry>,
    pub console_seen: u64,
    pub errors: VecDeque<String>,
    /// Failed requests: the request whose method and URL name it (see [`TabData::requested`]),
    /// when only its id is known, and the failure.
    pub failed: VecDeque<(Option<String>, String)>,
    /// The latest requests by id, as "METHOD URL": a network failure comes with the id only.
    pub requested: VecDeque<(String, String)>,
    pub dialog: Option<Dialog>,
    pub inflight: HashSet<String>,
    pub requests: u64,
    pub last_network: Option<Instant>,
    pub crashed: bool,
    /// When the last crash was reported: Chrome reports one crash on the page and on the
    /// target, and the second must not mark the reloaded page as crashed again.
    pub crashed_at: Option<Instant>,
    /// The page closed itself (window.close) or was closed by the browser.
    pub closed: bool,
    pub next_ref: u64,
    pub snapshot_taken: bool,
    pub shot: Option<Shot>,
    pub shots: u64,
    /// An intercepted file chooser waiting for `upload`: its input and whether it takes several files.
    pub file_chooser: Option<(chromiumoxide::cdp::browser_protocol::dom::BackendNodeId, bool)>,
    /// Cross-origin frames seen by snapshots, keyed `fN` in their refs (B3, B4).
    pub frames: Vec<crate::frames::FrameInfo>,
    /// Bumped by every snapshot; frame refs from an older one are stale.
    pub snapshot_gen: u64,
    /// A navigation of the top document that has not committed yet: Chromium holds the page's
    /// evaluations until it does, so nothing may wait on them meanwhile.
    pub navigating: Option<PendingNav>,
    /// Loaders of navigations that committed or failed: the events come on separate tasks, so
    /// an end may be handled before its start.
    pub ended_loaders: VecDeque<String>,
    /// Requests that finished or failed lately, for the same reason: a request whose end was
    /// handled before its start would otherwise stay in flight for good.
    pub ended_requests: VecDeque<String>,
    /// Something the next result should say (a navigation that was stopped).
    pub note: Option<String>,
    /// The loader of the committed top document.
    pub loader: Option<String>,
    /// The URL the top document last committed (or moved to within itself), error pages aside.
    pub url: Option<String>,
    /// `file:` URLs the frames of the top document loaded, to check against the workspace.
    pub frame_files: Vec<String>,
    /// The HTTP status of the top document's response and its URL, when it was an error (≥ 400).
    pub doc_error: Option<(i64, String, String)>,
    /// The document whose `load` was given up on (see `actions::wait_ready`).
    pub load_given_up: Option<String>,
    /// A URL the tab was sent to that turned out to be a download: the tab kept its page.
    pub download_nav: Option<String>,
}

/// A top-level navigation waiting for its server (see [`TabData::navigating`]).
#[derive(Debug, Clone)]
pub(crate) struct PendingNav {
    pub loader: String,
    pub url: String,
    pub since: Instant,
}

impl TabData {
    /// A request was sent (or redirected): `what` is its method and URL.
    pub(crate) fn request_sent(&mut self, id: &str, what: String) {
        if !self.ended_requests.iter().any(|r| r == id) {
            self.inflight.insert(id.to_string());
        }
        match self.requested.iter_mut().rev().find(|(r, _)| r == id) {
            Some(entry) => entry.1 = what,
            None => push_bounded(&mut self.requested, (id.to_string(), what)),
        }
        self.requests += 1;
        self.last_network = Some(Instant::now());
    }

    /// A request finished or failed.
    pub(crate) fn request_ended(&mut self, id: &str) {
        self.inflight.remove(id);
        self.ended_requests.push_back(id.to_string());
        while self.ended_requests.len() > BUFFER {
            self.ended_requests.pop_front();
        }
        self.last_network = Some(Instant::now());
    }

    /// The method and URL of request `id`, when it is still known; else its id.
    pub(crate) fn request_name(&self, id: &str) -> String {
        self.requested
            .iter()
            .rev()
            .find(|(r, _)| r == id)
            .map_or_else(|| format!("request {id}"), |(_, what)| what.clone())
    }

    /// The failed requests, each named by its method and URL when known.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.failed
            .iter()
            .map(|(id, text)| match id {
                Some(id) => format!("{} ({text})", self.request_name(id)),
                None => text.clone(),
            })
            .collect()
    }

    /// Records that the navigation of `loader` committed or failed.
    fn end_navigation(&mut self, loader: &str) {
        if self.navigating.as_ref().is_some_and(|n| n.loader == loader) {
            self.navigating = None;
        }
        self.ended_loaders.push_back(loader.to_string());
        while self.ended_loaders.len() > 32 {
            self.ended_loaders.pop_front();
        }
    }
}

pub(crate) struct TabShared {
    pub data: Mutex<TabData>,
    /// Bumped when a dialog opens or the page closes, so a running action stops waiting for it.
    pub dialog_opened: watch::Sender<u64>,
}

impl TabShared {
    /// Marks the page crashed, once per crash.
    pub fn mark_crashed(&self) {
        {
            let mut d = self.lock();
            if d.crashed_at.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
                return;
            }
            d.crashed = true;
            d.crashed_at = Some(Instant::now());
        }
        self.dialog_opened.send_modify(|n| *n += 1);
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, TabData> {
        // A panicking listener cannot leave the buffers half-written in a way that matters.
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One tab of the session.
pub(crate) struct Tab {
    pub id: String,
    pub page: Page,
    pub opener: Option<String>,
    pub shared: Arc<TabShared>,
    pub context: Option<BrowserContextId>,
    pub last_url: String,
    tasks: Vec<JoinHandle<()>>,
    /// Sessions of out-of-process (cross-site) frames, by frame id, shared by the whole browser.
    pub frame_pages: FramePages,
    /// The browser's second connection, for navigations (see [`crate::raw`]).
    pub raw: Arc<crate::raw::RawLink>,
    /// This tab's session on that connection, attached on its first navigation.
    pub nav: tokio::sync::OnceCell<crate::raw::Session>,
}

impl Tab {
    /// The page to bring the tab back to after a crash or a restart: the last one it showed.
    pub fn restore_url(&self) -> String {
        self.shared.lock().url.clone().filter(|u| !u.is_empty()).unwrap_or_else(|| self.last_url.clone())
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A finished or running download (B8).
#[derive(Debug, Clone)]
pub(crate) struct Download {
    pub guid: String,
    pub name: String,
    pub url: String,
    pub bytes: u64,
    pub state: &'static str,
    pub path: Option<PathBuf>,
    pub reported: bool,
}

/// A download's progress event applied to its entry.
fn apply_progress(entry: &mut Download, e: &EventDownloadProgress, folder: &Path) {
    entry.bytes = e.received_bytes.max(0.0) as u64;
    match e.state {
        DownloadProgressState::Completed => {
            entry.state = "completed";
            entry.path = Some(e.file_path.clone().map(PathBuf::from).unwrap_or_else(|| folder.join(&entry.name)));
        }
        DownloadProgressState::Canceled => entry.state = "canceled",
        DownloadProgressState::InProgress => {}
    }
}

/// A running browser process and its tabs.
pub(crate) struct Running {
    pub browser: Browser,
    handler: JoinHandle<()>,
    pub storage: StorageMode,
    _profile: Option<tempfile::TempDir>,
    pub profile_dir: PathBuf,
    pub tabs: Vec<Tab>,
    pub current: Option<String>,
    /// The tab Chromium shows, when known. Only that one is visible: a page in the background
    /// runs no animation frames and gets throttled input, so every action on it crawls.
    front: Option<String>,
    /// Tabs the pages opened since the last call other than `wait`: what `wait` with condition
    /// `popup` reports first, so a wait after the click that opened one finds it.
    pub new_popups: Vec<String>,
    /// Tabs that closed themselves since the last result said so.
    pub closed_tabs: Vec<String>,
    next_tab: u32,
    new_targets: mpsc::UnboundedReceiver<(TargetId, Option<TargetId>)>,
    /// Out-of-process frames created since the last [`attach_frames`](Self::attach_frames).
    new_frames: Mutex<mpsc::UnboundedReceiver<TargetId>>,
    frame_pages: FramePages,
    raw: Arc<crate::raw::RawLink>,
    /// Pages that existed before the session's first tab (Chromium's start-up tab), and pages of
    /// closed tabs.
    pub(crate) ignored: HashSet<TargetId>,
    /// Something the next result should say about how the browser was started.
    pub note: Option<String>,
    /// Every tab's shared state by target, for the browser-level listeners.
    registry: Arc<Mutex<std::collections::HashMap<TargetId, Arc<TabShared>>>>,
    crashed: mpsc::UnboundedReceiver<TargetId>,
    pub downloads: Arc<Mutex<Vec<Download>>>,
    pub download_dir: tempfile::TempDir,
    /// The browser's `TMPDIR`: what a killed Chromium leaves there goes with it.
    _temp_dir: tempfile::TempDir,
    background: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.background {
            t.abort();
        }
        self.handler.abort();
    }
}

impl Running {
    /// Whether the DevTools connection is still up.
    pub fn alive(&mut self) -> bool {
        if self.handler.is_finished() {
            return false;
        }
        !matches!(self.browser.try_wait(), Ok(Some(_)))
    }

    pub fn tab(&self, id: Option<&str>) -> Result<&Tab, BrowserError> {
        let id = match id.or(self.current.as_deref()) {
            Some(id) => id,
            None => return Err(BrowserError::NoOpenTab),
        };
        self.tabs
            .iter()
            .find(|t| t.id == id)
            .ok_or_else(|| BrowserError::NoTab { id: id.to_string(), open: self.tab_ids() })
    }

    pub fn tab_mut(&mut self, id: &str) -> Option<&mut Tab> {
        self.tabs.iter_mut().find(|t| t.id == id)
    }

    pub fn tab_ids(&self) -> String {
        if self.tabs.is_empty() {
            "none".into()
        } else {
            self.tabs.iter().map(|t| t.id.as_str()).collect::<Vec<_>>().join(", ")
        }
    }

    /// Opens a new tab at `url` (ephemeral tabs get their own browser context).
    pub async fn open_tab(&mut self, url: &str, ephemeral: bool, timeout: Duration) -> Result<String, BrowserError> {
        crate::actions::check_url(url)?;
        let context = if ephemeral {
            let created = self
                .browser
                .execute(CreateBrowserContextParams::default())
                .await
                .map_err(cdp("create an isolated browser context"))?;
            let id = created.result.browser_context_id.clone();
            self.allow_downloads(Some(id.clone())).await?;
            Some(id)
        } else {
            None
        };
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = context.clone();
        let page = self.browser.new_page(params).await.map_err(cdp("open a tab"))?;
        let id = self.add_tab(page, None, context).await;
        if url != "about:blank" {
            let tab = self.tab(Some(&id))?;
            if let Err(e) = crate::actions::goto(tab, url, timeout).await {
                // A tab that never showed its page is not left behind for list_tabs to show.
                let _ = self.close_tab(&id).await;
                return Err(e);
            }
        }
        self.current = Some(id.clone());
        self.front = Some(id.clone());
        Ok(id)
    }

    /// Brings the current tab to the front when another one is there (a popup opens in front
    /// of its opener), so the page the model works in is the visible one.
    pub async fn show_current(&mut self) {
        let Some(id) = self.current.clone() else { return };
        if self.front.as_ref() == Some(&id) {
            return;
        }
        let Some(tab) = self.tabs.iter().find(|t| t.id == id) else { return };
        let shown = tokio::time::timeout(Duration::from_secs(2), tab.page.bring_to_front()).await;
        self.front = matches!(shown, Ok(Ok(_))).then_some(id);
    }

    /// Closes a tab (and its isolated storage when it was the last tab in it); the current tab
    /// becomes the last one left.
    pub async fn close_tab(&mut self, id: &str) -> Result<(), BrowserError> {
        let Some(pos) = self.tabs.iter().position(|t| t.id == id) else {
            return Err(BrowserError::NoTab { id: id.to_string(), open: self.tab_ids() });
        };
        let tab = self.tabs.remove(pos);
        // Closing cancels a pending dialog (B6): the page is gone with it.
        let target = tab.page.target_id().clone();
        // Its creation may still wait in `new_targets`: it must not come back as a popup.
        self.ignored.insert(target.clone());
        let close = self.browser.execute(chromiumoxide::cdp::browser_protocol::target::CloseTargetParams::new(target));
        let _ = tokio::time::timeout(Duration::from_secs(5), close).await;
        if let Some(ctx) = tab.context.clone()
            && !self.tabs.iter().any(|t| t.context.as_ref() == Some(&ctx))
        {
            let _ = tokio::time::timeout(Duration::from_secs(5), self.browser.dispose_browser_context(ctx)).await;
        }
        if self.current.as_deref() == Some(id) {
            self.current = self.tabs.last().map(|t| t.id.clone());
        }
        if self.front.as_deref() == Some(id) {
            self.front = None;
        }
        Ok(())
    }

    /// Replaces a tab whose renderer crashed with a fresh page at its last URL, keeping its id,
    /// opener and storage context (a crashed target does not navigate again).
    pub async fn replace_crashed(&mut self, id: &str) -> Result<String, BrowserError> {
        let Some(pos) = self.tabs.iter().position(|t| t.id == id) else {
            return Err(BrowserError::NoTab { id: id.to_string(), open: self.tab_ids() });
        };
        let (context, url, old_target) = {
            let t = &self.tabs[pos];
            (t.context.clone(), t.restore_url(), t.page.target_id().clone())
        };
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = context;
        let page = self.browser.new_page(params).await.map_err(cdp("open a tab"))?;
        let (dialog_opened, _) = watch::channel(0u64);
        let shared = Arc::new(TabShared { data: Mutex::new(TabData::default()), dialog_opened });
        let tasks = listen(&page, &shared).await;
        let _ = page.execute(AddScriptToEvaluateOnNewDocumentParams::new(BLOCKED_POPUPS_JS)).await;
        self.registry.lock().unwrap_or_else(|p| p.into_inner()).insert(page.target_id().clone(), shared.clone());
        {
            let t = &mut self.tabs[pos];
            t.page = page;
            t.shared = shared;
            t.nav = tokio::sync::OnceCell::new();
            for old in std::mem::replace(&mut t.tasks, tasks) {
                old.abort();
            }
        }
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.browser.execute(chromiumoxide::cdp::browser_protocol::target::CloseTargetParams::new(old_target)),
        )
        .await;
        self.front = Some(id.to_string());
        let target = if url.is_empty() { "about:blank".to_string() } else { url };
        crate::actions::goto(&self.tabs[pos], &target, Duration::from_secs(15)).await?;
        Ok(target)
    }

    async fn add_tab(&mut self, page: Page, opener: Option<String>, context: Option<BrowserContextId>) -> String {
        self.next_tab += 1;
        let id = format!("t{}", self.next_tab);
        let (dialog_opened, _) = watch::channel(0u64);
        let shared = Arc::new(TabShared { data: Mutex::new(TabData::default()), dialog_opened });
        let tasks = listen(&page, &shared).await;
        self.registry.lock().unwrap_or_else(|p| p.into_inner()).insert(page.target_id().clone(), shared.clone());
        // Installed before any page script runs, so a window.open on load is seen too (B7).
        let _ = page.execute(AddScriptToEvaluateOnNewDocumentParams::new(BLOCKED_POPUPS_JS)).await;
        let last_url = page.url().await.ok().flatten().unwrap_or_default();
        let frame_pages = self.frame_pages.clone();
        let (raw, nav) = (self.raw.clone(), tokio::sync::OnceCell::new());
        self.tabs.push(Tab { id: id.clone(), page, opener, shared, context, last_url, tasks, frame_pages, raw, nav });
        id
    }

    /// New tabs the page opened (popups, `target=_blank`) since the last call, registered with
    /// their opener; returns their ids.
    pub async fn adopt_new_targets(&mut self) -> Vec<String> {
        let mut added = Vec::new();
        while let Ok((target, opener)) = self.new_targets.try_recv() {
            if self.ignored.contains(&target) || self.tabs.iter().any(|t| t.page.target_id() == &target) {
                continue;
            }
            // The handler attaches to the new target on its own; give it a moment.
            let mut page = None;
            for _ in 0..40 {
                if let Ok(p) = self.browser.get_page(target.clone()).await {
                    page = Some(p);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            let Some(page) = page else { continue };
            let opener_tab =
                opener.and_then(|o| self.tabs.iter().find(|t| t.page.target_id() == &o).map(|t| t.id.clone()));
            let context = opener_tab
                .as_deref()
                .and_then(|o| self.tabs.iter().find(|t| t.id == o))
                .and_then(|t| t.context.clone());
            let id = self.add_tab(page, opener_tab, context).await;
            added.push(id);
        }
        if let Some(last) = added.last() {
            self.front = Some(last.clone());
        }
        self.new_popups.extend(added.iter().cloned());
        let gone: Vec<String> = self.tabs.iter().filter(|t| t.shared.lock().closed).map(|t| t.id.clone()).collect();
        for id in gone {
            if self.front.as_deref() == Some(id.as_str()) {
                self.front = None;
            }
            let opener = self.tabs.iter().find(|t| t.id == id).and_then(|t| t.opener.clone());
            self.tabs.retain(|t| t.id != id);
            if self.current.as_deref() == Some(id.as_str()) {
                self.current = opener
                    .filter(|o| self.tabs.iter().any(|t| &t.id == o))
                    .or_else(|| self.tabs.last().map(|t| t.id.clone()));
            }
            self.closed_tabs.push(id);
        }
        while let Ok(target) = self.crashed.try_recv() {
            if let Some(t) = self.tabs.iter().find(|t| t.page.target_id() == &target) {
                t.shared.mark_crashed();
            }
        }
        added
    }

    /// Attaches to the out-of-process frames (cross-site iframes, B3) created since the last call,
    /// over a second DevTools connection (see [`crate::raw`]), so snapshots and actions can reach
    /// into them through their own sessions.
    pub async fn attach_frames(&self) {
        let fresh: Vec<TargetId> = {
            let mut rx = self.new_frames.lock().unwrap_or_else(|p| p.into_inner());
            std::iter::from_fn(|| rx.try_recv().ok()).collect()
        };
        if fresh.is_empty() {
            return;
        }
        // Frames that cannot be reached are shown as not inspected, with the reason.
        let Ok(raw) = self.raw.get().await else { return };
        for target in fresh {
            if let Ok(session) = raw.attach(target.clone()).await {
                self.frame_pages.lock().unwrap_or_else(|p| p.into_inner()).insert(target.inner().clone(), session);
            }
        }
    }

    /// Downloads go to the session's own folder, with events (B8).
    async fn allow_downloads(&self, context: Option<BrowserContextId>) -> Result<(), BrowserError> {
        let mut params = SetDownloadBehaviorParams::new(
            chromiumoxide::cdp::browser_protocol::browser::SetDownloadBehaviorBehavior::Allow,
        );
        params.browser_context_id = context;
        params.download_path = Some(self.download_dir.path().display().to_string());
        params.events_enabled = Some(true);
        self.browser.execute(params).await.map_err(cdp("set the download folder"))?;
        Ok(())
    }

    /// Closes the browser and waits (bounded) for its process to exit, killing it if it lingers.
    pub async fn shutdown(mut self) {
        self.tabs.clear();
        let closed = tokio::time::timeout(Duration::from_secs(3), self.browser.close()).await;
        if !matches!(closed, Ok(Ok(_))) {
            let _ = self.browser.kill().await;
        }
        if tokio::time::timeout(Duration::from_secs(5), self.browser.wait()).await.is_err() {
            let _ = self.browser.kill().await;
            let _ = self.browser.wait().await;
        }
    }

    /// The browser's process id.
    pub fn pid(&mut self) -> Option<u32> {
        self.browser.get_mut_child().and_then(|c| c.as_mut_inner().id())
    }
}

/// A window opened without a user gesture comes back null from Chrome's popup blocker, with no
/// DevTools event; this wrapper remembers it so the next result can say so.
const BLOCKED_POPUPS_JS: &str = "(() => { const open = window.open; window.__kodikBlocked = []; \
    window.open = function (...a) { const w = open.apply(this, a); if (!w) window.__kodikBlocked.push(String(a[0] ?? '')); return w; }; \
    try { const c = navigator.credentials; if (c) for (const k of ['get', 'create']) { const f = c[k].bind(c); \
      c[k] = (o) => { if (o && o.publicKey) window.__kodikWebauthn = k; return f(o); }; } } catch (e) {} })()";

/// Feeds every `E` the page sends to `handle` with the tab's shared state, from a task of the tab.
async fn on_event<E, F>(page: &Page, shared: &Arc<TabShared>, tasks: &mut Vec<JoinHandle<()>>, handle: F)
where
    E: chromiumoxide::cdp::IntoEventKind + Unpin + Send + Sync + 'static,
    F: Fn(&TabShared, &E) + Send + 'static,
{
    if let Ok(mut s) = page.event_listener::<E>().await {
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(e) = s.next().await {
                handle(&shared, &e);
            }
        }));
    }
}

/// Appends to a bounded buffer, dropping the oldest entries (B3, B11).
fn push_bounded<T>(buf: &mut VecDeque<T>, item: T) {
    buf.push_back(item);
    while buf.len() > BUFFER {
        buf.pop_front();
    }
}

/// Starts the listeners of one tab.
async fn listen(page: &Page, shared: &Arc<TabShared>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    on_event(page, shared, &mut tasks, |shared, e: &EventJavascriptDialogOpening| {
        let kind = serde_json::to_value(&e.r#type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "dialog".into());
        shared.lock().dialog = Some(Dialog {
            kind,
            message: e.message.clone(),
            default_prompt: e.default_prompt.clone().unwrap_or_default(),
        });
        shared.dialog_opened.send_modify(|n| *n += 1);
    })
    .await;
    // A file chooser opened by a click is reported, not shown (there is no one to pick a file).
    on_event(page, shared, &mut tasks, |shared, e: &EventFileChooserOpened| {
        if let Some(node) = e.backend_node_id {
            let multiple = serde_json::to_value(&e.mode).ok().and_then(|v| v.as_str().map(|m| m == "selectMultiple"));
            shared.lock().file_chooser = Some((node, multiple.unwrap_or(false)));
        }
    })
    .await;
    let _ = page.execute(SetInterceptFileChooserDialogParams::new(true)).await;
    on_event(page, shared, &mut tasks, |shared, _: &InspectorTargetCrashed| shared.mark_crashed()).await;
    // Console arguments that are objects need a round trip each, so this one awaits in its loop.
    if let Ok(mut s) = page.event_listener::<EventConsoleApiCalled>().await {
        let shared = shared.clone();
        let page = page.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(e) = s.next().await {
                let mut parts = Vec::new();
                for arg in &e.args {
                    parts.push(render_arg(&page, arg).await);
                }
                let level = serde_json::to_value(&e.r#type)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "log".into());
                let mut d = shared.lock();
                d.console_seen += 1;
                push_bounded(&mut d.console, ConsoleEntry { level, text: parts.join(" ") });
            }
        }));
    }
    on_event(page, shared, &mut tasks, |shared, e: &EventExceptionThrown| {
        let d = &e.exception_details;
        let text = d.exception.as_ref().and_then(|x| x.description.clone()).unwrap_or_else(|| d.text.clone());
        let at = d.url.clone().map(|u| format!(" at {u}:{}:{}", d.line_number + 1, d.column_number + 1));
        let line = format!("{}{}", first_line(&text), at.unwrap_or_default());
        let mut data = shared.lock();
        data.console_seen += 1;
        push_bounded(&mut data.console, ConsoleEntry { level: "error".into(), text: format!("Uncaught {line}") });
        push_bounded(&mut data.errors, line);
    })
    .await;
    let main_frame = page.target_id().inner().clone();
    on_event(page, shared, &mut tasks, move |shared, e: &EventRequestWillBeSent| {
        let mut d = shared.lock();
        let loader = e.loader_id.inner();
        if e.r#type == Some(ResourceType::Document)
            && e.request_id.inner() == loader
            && e.frame_id.as_ref().is_some_and(|f| *f.inner() == main_frame)
            && !d.ended_loaders.iter().any(|l| l == loader)
        {
            d.navigating =
                Some(PendingNav { loader: loader.clone(), url: e.request.url.clone(), since: Instant::now() });
        }
        d.request_sent(e.request_id.inner(), format!("{} {}", e.request.method, e.request.url));
    })
    .await;
    on_event(page, shared, &mut tasks, |shared, e: &EventLoadingFinished| {
        shared.lock().request_ended(e.request_id.inner());
    })
    .await;
    on_event(page, shared, &mut tasks, |shared, e: &EventFrameNavigated| {
        if e.frame.parent_id.is_some() {
            let mut d = shared.lock();
            if e.frame.url.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:")) && d.frame_files.len() < BUFFER {
                d.frame_files.push(e.frame.url.clone());
            }
        } else {
            let mut d = shared.lock();
            d.frame_files.clear();
            d.end_navigation(e.frame.loader_id.inner());
            d.loader = Some(e.frame.loader_id.inner().clone());
            if !e.frame.url.starts_with("chrome-error:") {
                d.url = Some(format!("{}{}", e.frame.url, e.frame.url_fragment.as_deref().unwrap_or("")));
            }
        }
    })
    .await;
    let main_frame = page.target_id().inner().clone();
    on_event(page, shared, &mut tasks, move |shared, e: &EventNavigatedWithinDocument| {
        if *e.frame_id.inner() == main_frame {
            shared.lock().url = Some(e.url.clone());
        }
    })
    .await;
    on_event(page, shared, &mut tasks, |shared, e: &EventLoadingFailed| {
        let mut d = shared.lock();
        // A navigation request's id is its loader's.
        d.end_navigation(e.request_id.inner());
        d.request_ended(e.request_id.inner());
        if e.canceled != Some(true) {
            // Named when shown: this event has no URL, and the request's own may come after it.
            push_bounded(&mut d.failed, (Some(e.request_id.inner().clone()), e.error_text.clone()));
        }
    })
    .await;
    let main_frame = page.target_id().inner().clone();
    on_event(page, shared, &mut tasks, move |shared, e: &EventResponseReceived| {
        if e.r#type == ResourceType::Document
            && e.request_id.inner() == e.loader_id.inner()
            && e.frame_id.as_ref().is_some_and(|f| *f.inner() == main_frame)
        {
            shared.lock().doc_error = (e.response.status >= 400)
                .then(|| (e.response.status, e.response.status_text.clone(), e.response.url.clone()));
        }
        if e.response.status >= 400 {
            let line = format!("{} {} {}", e.response.status, e.response.status_text, e.response.url);
            push_bounded(&mut shared.lock().failed, (None, line));
        }
    })
    .await;
    tasks
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// A console argument as text: primitives as they are, objects as JSON (Chrome only says
/// "Object" otherwise).
async fn render_arg(page: &Page, arg: &RemoteObject) -> String {
    if let Some(v) = &arg.value {
        return match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    if let Some(id) = &arg.object_id {
        let call = CallFunctionOnParams::builder()
            .function_declaration(
                "function(){try{const s=JSON.stringify(this);if(s!==undefined&&s!=='{}')return s}catch(e){}return String(this)}",
            )
            .object_id(id.clone())
            .return_by_value(true)
            .build();
        if let Ok(call) = call
            && let Ok(Ok(r)) = tokio::time::timeout(Duration::from_millis(500), page.execute(call)).await
            && let Some(Value::String(s)) = &r.result.result.value
        {
            return crate::actions::clip_chars(s, 2000);
        }
    }
    arg.description.clone().or_else(|| arg.unserializable_value.as_ref().map(|u| u.inner().clone())).unwrap_or_default()
}

/// One entry of the audit trail (B11).
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    pub at: std::time::SystemTime,
    pub tab: Option<String>,
    pub line: String,
    pub ok: bool,
}

/// One conversation's browser: started on first use, owning its tabs, closed with
/// [`shutdown`](Self::shutdown) (or killed when dropped).
pub struct BrowserSession {
    pub(crate) options: BrowserOptions,
    pub(crate) running: tokio::sync::Mutex<Option<Running>>,
    pub(crate) activity: Mutex<VecDeque<Activity>>,
    pub(crate) credentials: CredentialStore,
    pub(crate) preview: tokio::sync::Mutex<Option<crate::preview::Preview>>,
    pub(crate) executable: Mutex<Option<PathBuf>>,
    pub(crate) takeover: Mutex<Option<Takeover>>,
    /// Set by the first call from a workspace the host does not trust (B1).
    pub(crate) workspace_untrusted: std::sync::atomic::AtomicBool,
}

/// Automation paused for the user (B11): a CAPTCHA, passkey or one-time-code prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The tab that needs the user.
    pub tab: String,
    /// What was found, e.g. "a CAPTCHA (recaptcha frame)".
    pub reason: String,
}

impl std::fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSession").field("options", &self.options).finish_non_exhaustive()
    }
}

impl BrowserSession {
    /// A session that starts Chromium on its first action.
    pub fn new(options: BrowserOptions) -> Self {
        Self {
            options,
            running: tokio::sync::Mutex::new(None),
            activity: Mutex::new(VecDeque::new()),
            credentials: CredentialStore::default(),
            preview: tokio::sync::Mutex::new(None),
            executable: Mutex::new(None),
            takeover: Mutex::new(None),
            workspace_untrusted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The host-side credential store (B10): add logins here; the model only sees labels and ids.
    pub fn credentials(&self) -> &CredentialStore {
        &self.credentials
    }

    /// The pending user takeover, if automation is paused (B11).
    pub fn takeover(&self) -> Option<Takeover> {
        self.takeover.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Hands control back to the agent after the user finished a takeover.
    pub fn resume(&self) {
        *self.takeover.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Whether this session may keep storage beyond itself: the options say so and no call came
    /// from an untrusted workspace. Otherwise every tab gets fresh, isolated storage (B1).
    pub fn trusted(&self) -> bool {
        self.options.trusted && !self.workspace_untrusted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether Chromium is running for this session.
    pub async fn is_running(&self) -> bool {
        self.running.lock().await.is_some()
    }

    /// The profile folder the running browser uses (`--user-data-dir`).
    pub async fn profile_dir(&self) -> Option<PathBuf> {
        self.running.lock().await.as_ref().map(|r| r.profile_dir.clone())
    }

    /// The browser's process id, when it runs.
    pub async fn browser_pid(&self) -> Option<u32> {
        self.running.lock().await.as_mut().and_then(Running::pid)
    }

    /// Closes every tab, stops the preview server and ends the browser process (bounded; the
    /// process is killed if it does not exit).
    pub async fn shutdown(&self) {
        if let Some(p) = self.preview.lock().await.take() {
            p.stop().await;
        }
        if let Some(r) = self.running.lock().await.take() {
            r.shutdown().await;
        }
    }

    /// Starts the browser for `storage` if it is not running.
    pub(crate) async fn ensure_running<'a>(
        &self,
        guard: &'a mut Option<Running>,
        storage: StorageMode,
    ) -> Result<&'a mut Running, BrowserError> {
        if let Some(r) = guard.as_mut()
            && !r.alive()
        {
            *guard = None;
        }
        if guard.is_none() {
            *guard = Some(self.start(storage).await?);
        }
        guard.as_mut().ok_or(BrowserError::NoOpenTab)
    }

    fn chromium(&self) -> Result<PathBuf, BrowserError> {
        let mut cached = self.executable.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cached.as_ref() {
            return Ok(p.clone());
        }
        let p = launch::find_chromium(self.options.executable.as_deref())?;
        *cached = Some(p.clone());
        Ok(p)
    }

    async fn start(&self, storage: StorageMode) -> Result<Running, BrowserError> {
        sweep_dead_sessions(&std::env::temp_dir());
        let executable = self.chromium()?;
        let storage = if self.trusted() { storage } else { StorageMode::Ephemeral };
        let mut note = None;
        let mut profile = self.options.profile_dir(storage);
        if let Some(dir) = &profile
            && let Some(pid) = profile_in_use(dir)
        {
            // Chromium allows one process per profile; a second would hand over to the first and exit.
            note = Some(format!(
                "The {storage:?} browser profile is in use by another Chromium (pid {pid}, e.g. another session); \
                 this session uses a fresh temporary profile instead (no saved cookies or logins)."
            ));
            profile = None;
        }
        let (mut temp, mut dir) = match profile {
            Some(dir) => {
                std::fs::create_dir_all(&dir).map_err(|e| {
                    BrowserError::Other(format!("cannot create the browser profile folder {}: {e}", dir.display()))
                })?;
                (None, dir)
            }
            None => {
                let t = temp_profile()?;
                let d = t.path().to_path_buf();
                (Some(t), d)
            }
        };
        let download_dir = session_dir("downloads", "the download folder")?;
        let temp_dir = session_dir("tmp", "the browser's temporary folder")?;
        let launched = launch::launch(&executable, &dir, temp_dir.path(), self.options.launch_timeout).await;
        let Launched { browser, handler } = match launched {
            // Another Chromium took the profile after the check above (two sessions starting at
            // once), or holds it from where this one cannot see it: as when the check finds it.
            Err(BrowserError::Launch { reason, .. }) if temp.is_none() && profile_locked(&dir, &reason) => {
                note = Some(format!(
                    "The {storage:?} browser profile is in use by another Chromium (e.g. another session); this \
                     session uses a fresh temporary profile instead (no saved cookies or logins)."
                ));
                let t = temp_profile()?;
                dir = t.path().to_path_buf();
                temp = Some(t);
                launch::launch(&executable, &dir, temp_dir.path(), self.options.launch_timeout).await?
            }
            other => other?,
        };
        let (tx, new_targets) = mpsc::unbounded_channel();
        let (frame_tx, new_frames) = mpsc::unbounded_channel();
        let (crash_tx, crashed) = mpsc::unbounded_channel();
        let downloads = Arc::new(Mutex::new(Vec::new()));
        let mut background = Vec::new();
        if let Ok(mut s) = browser.event_listener::<EventTargetCreated>().await {
            background.push(tokio::spawn(async move {
                while let Some(e) = s.next().await {
                    if e.target_info.r#type == "page" {
                        let _ = tx.send((e.target_info.target_id.clone(), e.target_info.opener_id.clone()));
                    } else if e.target_info.r#type == "iframe" {
                        let _ = frame_tx.send(e.target_info.target_id.clone());
                    }
                }
            }));
        }
        if let (Ok(mut begins), Ok(mut progress)) = (
            browser.event_listener::<EventDownloadWillBegin>().await,
            browser.event_listener::<EventDownloadProgress>().await,
        ) {
            let downloads = downloads.clone();
            let folder = download_dir.path().to_path_buf();
            // One task for both streams: a small file's start and end come together, and with a
            // task each an end handled before its start was lost, leaving the download "in
            // progress" for good. An end that still comes first waits for its start here.
            background.push(tokio::spawn(async move {
                let mut early: Vec<Arc<EventDownloadProgress>> = Vec::new();
                loop {
                    tokio::select! {
                        biased;
                        Some(e) = begins.next() => {
                            let mut d = downloads.lock().unwrap_or_else(|p| p.into_inner());
                            let mut entry = Download {
                                guid: e.guid.clone(),
                                name: e.suggested_filename.clone(),
                                url: e.url.clone(),
                                bytes: 0,
                                state: "in progress",
                                path: None,
                                reported: false,
                            };
                            for p in early.iter().filter(|p| p.guid == e.guid) {
                                apply_progress(&mut entry, p, &folder);
                            }
                            early.retain(|p| p.guid != e.guid);
                            d.push(entry);
                        }
                        Some(e) = progress.next() => {
                            let mut d = downloads.lock().unwrap_or_else(|p| p.into_inner());
                            match d.iter_mut().find(|x| x.guid == e.guid) {
                                Some(entry) => apply_progress(entry, &e, &folder),
                                None => early.push(e),
                            }
                        }
                        else => break,
                    }
                }
            }));
        }
        let registry: Arc<Mutex<std::collections::HashMap<TargetId, Arc<TabShared>>>> = Arc::default();
        let frame_pages = FramePages::default();
        if let Ok(mut s) = browser.event_listener::<EventTargetDestroyed>().await {
            let registry = registry.clone();
            let frame_pages = frame_pages.clone();
            background.push(tokio::spawn(async move {
                while let Some(e) = s.next().await {
                    frame_pages.lock().unwrap_or_else(|p| p.into_inner()).remove(e.target_id.inner());
                    let shared = registry.lock().unwrap_or_else(|p| p.into_inner()).remove(&e.target_id);
                    if let Some(shared) = shared {
                        shared.lock().closed = true;
                        shared.dialog_opened.send_modify(|n| *n += 1);
                    }
                }
            }));
        }
        if let Ok(mut s) = browser.event_listener::<EventTargetCrashed>().await {
            let registry = registry.clone();
            background.push(tokio::spawn(async move {
                while let Some(e) = s.next().await {
                    let shared = registry.lock().unwrap_or_else(|p| p.into_inner()).get(&e.target_id).cloned();
                    if let Some(shared) = shared {
                        shared.mark_crashed();
                    }
                    let _ = crash_tx.send(e.target_id.clone());
                }
            }));
        }
        // Listed, not attached: chromiumoxide's fetch_targets would attach to Chromium's start-up
        // tab and run a whole page set-up for it while the first real tab is being set up.
        let ignored: HashSet<TargetId> = browser
            .execute(chromiumoxide::cdp::browser_protocol::target::GetTargetsParams::default())
            .await
            .map(|r| r.result.target_infos.iter().filter(|t| t.r#type == "page").map(|t| t.target_id.clone()).collect())
            .unwrap_or_default();
        let raw = crate::raw::RawLink::new(browser.websocket_address());
        let running = Running {
            note,
            ignored,
            registry,
            browser,
            handler,
            storage,
            _profile: temp,
            profile_dir: dir,
            tabs: Vec::new(),
            current: None,
            front: None,
            new_popups: Vec::new(),
            closed_tabs: Vec::new(),
            next_tab: 0,
            new_targets,
            new_frames: Mutex::new(new_frames),
            frame_pages,
            raw,
            crashed,
            downloads,
            download_dir,
            _temp_dir: temp_dir,
            background,
        };
        running.allow_downloads(None).await?;
        Ok(running)
    }

    pub(crate) fn record(&self, tab: Option<&str>, line: String, ok: bool) {
        let mut a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        a.push_back(Activity { at: std::time::SystemTime::now(), tab: tab.map(str::to_string), line, ok });
        while a.len() > 1000 {
            a.pop_front();
        }
    }
}

/// A fresh profile folder that goes with the session.
fn temp_profile() -> Result<tempfile::TempDir, BrowserError> {
    session_dir("profile", "a temporary browser profile")
}

/// Prefix of the session's temporary folders; the owner (process id and PID namespace)
/// follows the kind, so a later session can tell the folders of a process that ended without
/// removing them.
const SESSION_DIR: &str = "kodik-browser-";

/// The PID namespace of this process (the inode of `/proc/self/ns/pid`), if it can be read. A
/// temporary folder shared by containers holds folders of processes this one cannot see: only
/// those of its own namespace are judged by their pid.
fn pid_namespace() -> Option<u64> {
    static NS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
        link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
    })
}

/// `{pid}n{namespace}`, or `{pid}` alone when the namespace cannot be read (never swept).
fn owner_tag() -> String {
    match pid_namespace() {
        Some(ns) => format!("{}n{ns}", std::process::id()),
        None => std::process::id().to_string(),
    }
}

/// A temporary folder of this session, `kodik-browser-{kind}-{owner}-…`, removed with it.
fn session_dir(kind: &str, what: &str) -> Result<tempfile::TempDir, BrowserError> {
    tempfile::Builder::new()
        .prefix(&format!("{SESSION_DIR}{kind}-{}-", owner_tag()))
        .tempdir()
        .map_err(|e| BrowserError::Other(format!("cannot create {what}: {e}")))
}

/// Removes the temporary folders (profile, downloads, the browser's TMPDIR) of sessions whose
/// process has ended without removing them: killed, or stopped by a signal before its session
/// was dropped. Folders of live processes, and of processes in another PID namespace (another
/// container sharing the folder), are left alone.
pub(crate) fn sweep_dead_sessions(root: &Path) {
    let Some(own_ns) = pid_namespace() else { return };
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let alive = |pid: u32| Path::new(&format!("/proc/{pid}")).exists();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SESSION_DIR)) else { continue };
        let mut parts = rest.splitn(3, '-');
        let (Some(kind), Some(owner), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if !matches!(kind, "profile" | "downloads" | "tmp") {
            continue;
        }
        let dead = match owner.split_once('n') {
            Some((pid, ns)) => match (pid.parse::<u32>(), ns.parse::<u64>()) {
                (Ok(pid), Ok(ns)) => ns == own_ns && !alive(pid),
                _ => false,
            },
            // Named before the namespace was part of the owner: the pid may be another
            // container's, so the folder must also be this user's and untouched for a while.
            None => owner.parse::<u32>().is_ok_and(|pid| !alive(pid)) && abandoned(&entry.path()),
        };
        if dead && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long a folder named without its owner's PID namespace must have been left untouched
/// before it is taken for a dead session's: a live browser writes into its profile and TMPDIR.
const UNTOUCHED_FOR: Duration = Duration::from_secs(3600);

/// Whether `dir` belongs to this user and neither it nor anything directly in it changed for
/// [`UNTOUCHED_FOR`].
fn abandoned(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let old = |m: &std::fs::Metadata| {
        m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= UNTOUCHED_FOR)
    };
    let Ok(meta) = dir.symlink_metadata() else { return false };
    if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() || !old(&meta) {
        return false;
    }
    let Ok(children) = std::fs::read_dir(dir) else { return false };
    children.flatten().all(|c| c.path().symlink_metadata().is_ok_and(|m| old(&m)))
}

/// Whether Chromium failed to start because another Chromium holds the profile: it says so on
/// stderr (not always read in time) and exits with code 21, and the holder's lock is there.
fn profile_locked(dir: &Path, reason: &str) -> bool {
    ["ProcessSingleton", "SingletonLock", "profile appears to be in use"].iter().any(|m| reason.contains(m))
        || dir.join("SingletonLock").symlink_metadata().is_ok()
}

/// The pid of a live Chromium holding `dir` (its `SingletonLock` names `host-pid`).
pub(crate) fn profile_in_use(dir: &Path) -> Option<u32> {
    let target = std::fs::read_link(dir.join("SingletonLock")).ok()?;
    let pid: u32 = target.to_string_lossy().rsplit('-').next()?.parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// The folder a download path is shown relative to.
pub(crate) fn display_path(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use super::{TabData, sweep_dead_sessions};

    /// Sets the modification time of `path` to `ago` in the past.
    fn age(path: &Path, ago: Duration) {
        let f = std::fs::File::open(path).unwrap();
        f.set_modified(SystemTime::now() - ago).unwrap();
    }

    /// B9: folders named the way sessions named them before the PID namespace was part of the
    /// owner (`kodik-browser-tmp-{pid}-…`) are removed once their process is gone, they are this
    /// user's and nothing in them changed for an hour; a live owner or a recent change keeps them.
    #[test]
    fn b9_old_format_folders_of_dead_processes_are_removed_when_untouched_for_an_hour() {
        let root = tempfile::tempdir().unwrap();
        let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
        let dead = pid_max + 7;
        let folder = |name: String, child_ago: Duration, ago: Duration| {
            let dir = root.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let file = dir.join("Local State");
            std::fs::write(&file, "{}").unwrap();
            age(&file, child_ago);
            age(&dir, ago);
            dir
        };
        let hours = Duration::from_secs(2 * 3600);
        let gone = folder(format!("kodik-browser-tmp-{dead}-AbC123"), hours, hours);
        let gone_downloads = folder(format!("kodik-browser-downloads-{dead}-XyZ789"), hours, hours);
        let recent = folder(format!("kodik-browser-profile-{dead}-Rcnt01"), Duration::ZERO, Duration::ZERO);
        let written = folder(format!("kodik-browser-tmp-{dead}-Wrtn01"), Duration::ZERO, hours);
        let live = folder(format!("kodik-browser-tmp-{}-Live01", std::process::id()), hours, hours);
        let other = folder(format!("kodik-browser-agent-{dead}-Othr01"), hours, hours);
        sweep_dead_sessions(root.path());
        assert!(!gone.exists() && !gone_downloads.exists(), "a dead session's old-format folders were left");
        assert!(recent.exists(), "a folder changed within the hour was removed");
        assert!(written.exists(), "a folder whose content changed within the hour was removed");
        assert!(live.exists(), "a live process's folder was removed");
        assert!(other.exists(), "a folder of another kind was removed");
    }

    /// B5: the end of a request may be handled before its start (the listeners run as separate
    /// tasks); the request must not stay in flight, or network_idle never comes.
    #[test]
    fn b5_a_request_whose_end_is_handled_first_is_not_left_in_flight() {
        let mut d = TabData::default();
        d.request_sent("1", "GET /a".into());
        d.request_ended("2");
        d.request_sent("2", "GET /b".into());
        assert_eq!(d.inflight.len(), 1, "{:?}", d.inflight);
        d.request_ended("1");
        assert!(d.inflight.is_empty(), "{:?}", d.inflight);
        assert_eq!(d.requests, 2);
    }
}
