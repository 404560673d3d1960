//! The `browser` tool: one action per call, run against the conversation's [`BrowserSession`].

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::browser::SetPermissionParams;
use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide::cdp::browser_protocol::emulation::{SetDeviceMetricsOverrideParams, SetFocusEmulationEnabledParams};
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, HandleJavaScriptDialogParams, Viewport,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use kodik_core::{
    Approval, ApprovalRequest, Content, Effect, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool,
    Workspace,
};
use kodik_schema::browser::{
    BrowserAction, BrowserArgs, ElementState, MouseButton, ScrollDirection, StorageMode, Target, WaitCondition,
};
use serde_json::{Value, json};

use crate::actions::{self, clip_chars, eval, with_element};
use crate::error::{BrowserError, cdp};
use crate::frames::FrameCtx;
use crate::session::{BrowserSession, Running, Shot, Tab};

/// The `browser` tool over one [`BrowserSession`] (one per conversation).
pub struct BrowserTool {
    spec: ToolSpec,
    session: Arc<BrowserSession>,
}

impl std::fmt::Debug for BrowserTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserTool").finish_non_exhaustive()
    }
}

impl BrowserTool {
    /// The tool over `session`.
    pub fn new(session: Arc<BrowserSession>) -> Self {
        Self { spec: kodik_schema::spec::<BrowserArgs>(), session }
    }

    /// The session it drives (for the host: credentials, shutdown).
    pub fn session(&self) -> &Arc<BrowserSession> {
        &self.session
    }
}

#[async_trait]
impl TypedTool for BrowserTool {
    type Args = BrowserArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &BrowserArgs) -> Result<(), ToolError> {
        args.check()
    }

    /// Every action reads or changes the session's tabs (a fill, then a click, then a snapshot):
    /// the calls of one response run in the model's order (G2), never at once.
    fn resources(&self, _args: &BrowserArgs, _ws: &Workspace) -> Vec<Resource> {
        vec![Resource::Session("browser".into())]
    }

    async fn run(&self, args: BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let action = args.action;
        let summary = activity_line(&args);
        // Every action stops when the call is cancelled (K10), not only the waits.
        let result = tokio::select! {
            r = self.session.act(args, cx) => r,
            _ = cx.cancel.cancelled() => {
                self.session.record(None, format!("{summary} (cancelled)"), false);
                return Err(ToolError::Cancelled);
            }
        };
        let tab = self.session.current_tab().await;
        self.session.record(tab.as_deref(), summary, result.is_ok());
        let mut out = result.map_err(ToolError::from)?;
        // Belt and braces for B10: no saved secret may leave in a result.
        let secrets = self.session.credentials.secrets();
        if !secrets.is_empty() {
            for c in &mut out.content {
                if let Content::Text { text } = c {
                    for s in &secrets {
                        if text.contains(s.as_str()) {
                            *text = text.replace(s.as_str(), "[redacted]");
                        }
                    }
                }
            }
        }
        let _ = action;
        Ok(out)
    }
}

/// The audit line of a call: the action and its target, typed values shown only by length (B11).
fn activity_line(a: &BrowserArgs) -> String {
    let mut s = a.action.as_str().to_string();
    if let Some(u) = &a.url {
        let _ = write!(s, " url={u}");
    }
    if let Some(t) = &a.target {
        let _ = write!(s, " target={}", target_text(t));
    }
    if let Some(v) = &a.value {
        let _ = write!(s, " value=[{} characters, redacted]", v.chars().count());
    }
    if let Some(k) = &a.key {
        let _ = write!(s, " key={k}");
    }
    if let Some(c) = &a.credential_id {
        let _ = write!(s, " credential={c}");
    }
    if a.prompt_text.is_some() {
        s.push_str(" prompt_text=[redacted]");
    }
    if a.text.is_some() && a.action == BrowserAction::WriteClipboard {
        s.push_str(" text=[redacted]");
    } else if let Some(t) = &a.text {
        let _ = write!(s, " text={t:?}");
    }
    s
}

fn target_text(t: &Target) -> String {
    let mut parts = Vec::new();
    let mut add = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k}={v:?}"));
        }
    };
    add("ref", &t.reference);
    add("role", &t.role);
    add("name", &t.name);
    add("label", &t.label);
    add("placeholder", &t.placeholder);
    add("text", &t.text);
    add("test_id", &t.test_id);
    add("href", &t.href);
    add("css", &t.css);
    add("frame", &t.frame);
    if let (Some(x), Some(y)) = (t.x, t.y) {
        parts.push(format!("x={x} y={y}"));
    }
    parts.join(" ")
}

/// What an action reports besides its own message.
struct Report {
    lines: Vec<String>,
    meta: serde_json::Map<String, Value>,
    image: Option<Vec<u8>>,
}

impl Report {
    fn new(first: impl Into<String>) -> Self {
        Self { lines: vec![first.into()], meta: serde_json::Map::new(), image: None }
    }
    fn line(&mut self, l: impl Into<String>) {
        self.lines.push(l.into());
    }
    fn into_output(self) -> ToolOutput {
        let mut content = vec![Content::text(self.lines.join("\n"))];
        if let Some(png) = &self.image {
            content.push(Content::image(png, "image/png"));
        }
        let mut out = ToolOutput::text("");
        out.content = content;
        out.with_meta(Value::Object(self.meta))
    }
}

/// Where a page was before an action, to say what changed after it.
struct Before {
    url: String,
    title: String,
    console_seen: u64,
    tabs: usize,
    downloads: usize,
}

const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// How long `open`, `navigate` and `reload` wait for a page when no `timeout` is given.
const NAVIGATION_TIMEOUT: Duration = Duration::from_secs(30);

fn timeout_of(args: &BrowserArgs, default: Duration) -> Duration {
    args.timeout.map(Duration::from_millis).unwrap_or(default)
}

impl BrowserSession {
    pub(crate) async fn current_tab(&self) -> Option<String> {
        self.running.lock().await.as_ref().and_then(|r| r.current.clone())
    }

    /// Runs one action.
    pub(crate) async fn act(&self, args: BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        use BrowserAction as A;
        match args.action {
            A::Activity => return Ok(self.activity_report(args.limit)),
            A::ListCredentials | A::ReadClipboard | A::WriteClipboard => {}
            _ => {}
        }
        if args.action == A::ClosePreview {
            let preview = self.preview.lock().await.take();
            let Some(p) = preview else { return Err(BrowserError::Other("no preview is open".into())) };
            let tab = p.tab.clone();
            p.stop().await;
            let mut guard = self.running.lock().await;
            if let Some(r) = guard.as_mut()
                && r.tabs.iter().any(|t| t.id == tab)
            {
                r.close_tab(&tab).await?;
            }
            return Ok(Report::new(format!("Closed the preview (tab {tab}) and stopped its dev server.")).into_output());
        }
        if !cx.workspace.is_trusted() {
            self.workspace_untrusted.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if matches!(args.action, A::Open | A::Navigate | A::Preview)
            && let Some(url) = &args.url
        {
            actions::check_file_url(url, &cx.workspace)?;
        }
        let mut guard = self.running.lock().await;
        let storage = args.storage.unwrap_or(StorageMode::Global);
        // B9: a browser that died (or whose connection dropped) is restarted once, and its tabs
        // reopened at their last URLs.
        let mut restored = None;
        if let Some(r) = guard.as_mut()
            && !r.alive()
        {
            let urls: Vec<String> = r.tabs.iter().map(Tab::restore_url).collect();
            let old_storage = r.storage;
            *guard = None;
            let r = tokio::time::timeout(Duration::from_secs(30), self.ensure_running(&mut guard, old_storage))
                .await
                .map_err(|_| BrowserError::Other("the browser died and did not restart within 30 s".into()))??;
            let mut reopened = Vec::new();
            for u in urls {
                let url = if u.is_empty() { "about:blank".to_string() } else { u };
                if let Ok(id) = r.open_tab(&url, old_storage == StorageMode::Ephemeral, NAVIGATION_TIMEOUT).await {
                    reopened.push(format!("{id} at {url}"));
                }
            }
            restored = Some(format!(
                "The browser had stopped; it was restarted and its tabs restored ({}). Refs from earlier snapshots are gone.",
                if reopened.is_empty() { "none were open".to_string() } else { reopened.join(", ") }
            ));
        }
        if args.action == A::ClearStorage {
            if !self.trusted() {
                return Err(BrowserError::Other(
                    "this workspace is not trusted: its tabs only ever get fresh, isolated storage that ends with them, \
                     and it may not clear the persistent profiles"
                        .into(),
                ));
            }
            return self.clear_storage(&mut guard, storage).await;
        }
        let r = match args.action {
            A::Open | A::Preview => self.ensure_running(&mut guard, storage).await?,
            _ => match guard.as_mut() {
                Some(r) => r,
                None if args.action == A::ListTabs => {
                    return Ok(Report::new("No tabs are open (the browser starts with `open`).").into_output());
                }
                None => return Err(BrowserError::NoOpenTab),
            },
        };
        if args.action == A::Open
            && let Some(asked) = args.storage
            && asked != StorageMode::Ephemeral
            && asked != r.storage
            && self.trusted()
        {
            return Err(BrowserError::Other(format!(
                "this session's browser runs on the {:?} profile; a {:?} tab needs a new session (or use storage: ephemeral)",
                r.storage, asked
            )));
        }
        // A crashed renderer is reloaded at its last URL (B9), before the action or, when it
        // crashed during it, after; a snapshot or screenshot is then taken again.
        if args.action != A::Wait {
            r.new_popups.clear();
        }
        r.adopt_new_targets().await;
        r.attach_frames().await;
        let mut crash_note = None;
        if !matches!(args.action, A::ListTabs | A::CloseTab | A::Console | A::Diagnostics) {
            crash_note = recover_crash(r).await;
        }
        r.show_current().await;
        let start_note = r.note.take();
        let mut out = self.dispatch(r, &args, cx).await;
        if crash_note.is_none()
            && let Some(note) = recover_crash(r).await
        {
            crash_note = Some(note);
            if matches!(args.action, A::Snapshot | A::Screenshot | A::Navigate | A::Reload) {
                out = self.dispatch(r, &args, cx).await;
            }
        }
        // B8, G16: a page can lead a tab to a file the workspace does not allow (a link in a
        // workspace page); what it shows must not reach the model.
        let mut escaped: Vec<(String, String)> = r
            .tabs
            .iter()
            .flat_map(|t| {
                let frames = t.shared.lock().frame_files.clone();
                std::iter::once(t.restore_url()).chain(frames).map(|u| (t.id.clone(), u)).collect::<Vec<_>>()
            })
            .filter(|(_, u)| actions::check_file_url(u, &cx.workspace).is_err())
            .collect();
        escaped.dedup_by(|a, b| a.0 == b.0);
        if let (Ok(o), Some(cur)) = (&out, r.current.clone())
            && let Some(u) = o.meta.get("url").and_then(Value::as_str)
            && actions::check_file_url(u, &cx.workspace).is_err()
            && !escaped.iter().any(|(id, _)| *id == cur)
        {
            escaped.push((cur, u.to_string()));
        }
        if !escaped.is_empty() {
            for (id, _) in &escaped {
                if let Ok(t) = r.tab(Some(id)) {
                    let _ = actions::goto(t, "about:blank", Duration::from_secs(5)).await;
                }
            }
            let what: Vec<String> = escaped.iter().map(|(id, u)| format!("tab {id} to {u}")).collect();
            return Err(BrowserError::Refused(format!(
                "the page led {}, a file outside the workspace (or hidden by .kodikignore), as its page or in a \
                 frame; the browser opens workspace files only, so the tab was sent to about:blank",
                what.join(" and ")
            )));
        }
        let notes: Vec<String> = [start_note, restored, crash_note].into_iter().flatten().collect();
        match out.as_mut() {
            Ok(out) => {
                for note in notes {
                    if let Some(Content::Text { text }) = out.content.first_mut() {
                        *text = format!("{note}\n{text}");
                    }
                }
            }
            // A failure right after a restart is read in its light: the page was reloaded.
            Err(e) if !notes.is_empty() && !matches!(e, BrowserError::Refused(_) | BrowserError::Cancelled(_)) => {
                return Err(BrowserError::Other(format!("{}\n{e}", notes.join("\n"))));
            }
            Err(_) => {}
        }
        out
    }

    async fn dispatch(
        &self,
        r: &mut Running,
        args: &BrowserArgs,
        cx: &ToolContext,
    ) -> Result<ToolOutput, BrowserError> {
        use BrowserAction as A;
        // B11: while the user has to act, the agent only looks.
        if let Some(t) = self.takeover()
            && !matches!(args.action, A::ListTabs | A::Console | A::Diagnostics | A::Activity | A::Screenshot)
        {
            return Err(BrowserError::Refused(format!(
                "automation is paused: tab {} shows {}; the user has to finish it and hand control back first",
                t.tab, t.reason
            )));
        }
        // While a dialog is open the page is frozen: only these go ahead (B6).
        if let Ok(tab) = r.tab(None) {
            let dialog = tab.shared.lock().dialog.clone();
            if let Some(d) = dialog
                && !matches!(
                    args.action,
                    A::HandleDialog
                        | A::ListTabs
                        | A::SelectTab
                        | A::Open
                        | A::CloseTab
                        | A::Navigate
                        | A::Console
                        | A::ClearConsole
                        | A::Diagnostics
                        | A::Wait
                        | A::ListCredentials
                )
            {
                return Err(actions::dialog_error(tab, &d));
            }
        }
        match args.action {
            A::ListTabs => Ok(list_tabs(r).await.into_output()),
            A::SelectTab => {
                let id = args.tab_id.clone().unwrap_or_default();
                r.tab(Some(&id))?;
                r.current = Some(id.clone());
                r.show_current().await;
                let tab = r.tab(None)?;
                let url = tab.restore_url();
                Ok(Report::new(format!("Tab {id} is now current ({url}).")).into_output())
            }
            A::Open => {
                let url = args.url.clone().unwrap_or_default();
                let ephemeral = args.storage == Some(StorageMode::Ephemeral) || !self.trusted();
                let id = r.open_tab(&url, ephemeral, timeout_of(args, NAVIGATION_TIMEOUT)).await?;
                let tab = r.tab(Some(&id))?;
                let mut rep = Report::new(format!("Opened tab {id}."));
                download_lines(r, tab, &mut rep).await;
                if !self.trusted() && args.storage.is_some_and(|s| s != StorageMode::Ephemeral) {
                    rep.line(
                        "Storage: ephemeral, since this workspace is not trusted (nothing is kept after the tab).",
                    );
                }
                rep.meta.insert("tab_id".into(), json!(id));
                self.page_state(r, tab, &mut rep, true).await;
                Ok(rep.into_output())
            }
            A::CloseTab => {
                let id = match &args.tab_id {
                    Some(id) => id.clone(),
                    None => r.current.clone().ok_or(BrowserError::NoOpenTab)?,
                };
                r.tab(Some(&id))?;
                r.close_tab(&id).await?;
                Ok(Report::new(format!(
                    "Closed tab {id}.{}",
                    r.current.as_ref().map(|c| format!(" Current tab: {c}.")).unwrap_or_default()
                ))
                .into_output())
            }
            A::Preview => self.preview(r, args, cx).await,
            A::Navigate | A::Reload | A::Back | A::Forward => self.navigate(r, args).await,
            A::Resize => {
                let (w, h) = match (args.breakpoint, args.width, args.height) {
                    (Some(b), _, _) => b.size(),
                    (None, Some(w), Some(h)) => (w, h),
                    _ => return Err(BrowserError::Other("resize needs breakpoint or width and height".into())),
                };
                let tab = r.tab(None)?;
                let mobile = w < 500;
                let params = SetDeviceMetricsOverrideParams::new(i64::from(w), i64::from(h), 1.0, mobile);
                tab.page.execute(params).await.map_err(cdp("resize the viewport"))?;
                tab.shared.lock().shot = None;
                let mut rep = Report::new(format!("Viewport of tab {} is now {w}×{h}.", tab.id));
                rep.meta.insert("width".into(), json!(w));
                rep.meta.insert("height".into(), json!(h));
                Ok(rep.into_output())
            }
            A::Screenshot => self.screenshot(r.tab(None)?, args).await,
            A::Snapshot => {
                let tab = r.tab(None)?;
                let mut rep = Report::new(String::new());
                rep.lines.clear();
                match self.page_state(r, tab, &mut rep, true).await {
                    Some(e) => Err(e),
                    None => Ok(rep.into_output()),
                }
            }
            A::Inspect => inspect(r.tab(None)?, target(args)?).await,
            A::Console => {
                let tab = r.tab(None)?;
                let limit = args.limit.unwrap_or(50) as usize;
                let d = tab.shared.lock();
                let n = d.console.len();
                let mut rep = Report::new(format!(
                    "Console of tab {} ({} entries kept{}):",
                    tab.id,
                    n,
                    if n > limit { format!(", the latest {limit} shown") } else { String::new() }
                ));
                for e in d.console.iter().skip(n.saturating_sub(limit)) {
                    rep.line(format!("[{}] {}", e.level, clip_chars(&e.text, 2000)));
                }
                Ok(rep.into_output())
            }
            A::ClearConsole => {
                let tab = r.tab(None)?;
                tab.shared.lock().console.clear();
                Ok(Report::new(format!("Cleared the console of tab {}.", tab.id)).into_output())
            }
            A::Diagnostics => diagnostics(r, args.limit.unwrap_or(20) as usize).await,
            A::Activity => Ok(self.activity_report(args.limit)),
            A::Click | A::Hover | A::Fill | A::Press | A::Select | A::Check | A::Drag | A::Scroll => {
                self.interact(r, args).await
            }
            A::Upload => self.upload(r, args, cx).await,
            A::Wait => self.wait(r, args, cx).await,
            A::HandleDialog => self.handle_dialog(r, args).await,
            A::ListCredentials => {
                let tab = r.tab(None)?;
                let origin = origin_of(tab).await?;
                let creds = self.credentials.for_origin(&origin);
                let mut rep = Report::new(if creds.is_empty() {
                    format!("No saved credentials for {origin}.")
                } else {
                    format!("Saved credentials for {origin}:")
                });
                for c in creds {
                    rep.line(format!("- {} (credential_id: {})", c.label(), c.id()));
                }
                Ok(rep.into_output())
            }
            A::FillCredential => self.fill_credential(r, args, cx).await,
            A::ReadClipboard | A::WriteClipboard => self.clipboard(r, args, cx).await,
            A::Eval => self.eval_action(r, args).await,
            A::ClosePreview | A::ClearStorage => Err(BrowserError::Other("handled above".into())),
        }
    }

    fn activity_report(&self, limit: Option<u32>) -> ToolOutput {
        let a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        let limit = limit.unwrap_or(50) as usize;
        let mut rep = Report::new(format!("Browser activity ({} actions):", a.len()));
        for e in a.iter().skip(a.len().saturating_sub(limit)) {
            let secs = e.at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            rep.line(format!(
                "{:02}:{:02}:{:02} {}{} {}",
                (secs / 3600) % 24,
                (secs / 60) % 60,
                secs % 60,
                e.tab.as_deref().map(|t| format!("[{t}] ")).unwrap_or_default(),
                e.line,
                if e.ok { "ok" } else { "failed" }
            ));
        }
        rep.into_output()
    }

    /// Deletes the profile's cookies and site data (B1). A running browser on it is closed for
    /// that, its folder emptied, and the browser started again with its tabs reloaded: Chromium
    /// can clear cookies but not every origin's storage of a profile while it runs.
    async fn clear_storage(
        &self,
        guard: &mut Option<Running>,
        storage: StorageMode,
    ) -> Result<ToolOutput, BrowserError> {
        let running = guard.as_ref().map(|r| r.storage);
        match running {
            Some(s) if s == storage => {
                let Some(r) = guard.take() else { return Err(BrowserError::NoOpenTab) };
                let tabs: Vec<(String, bool)> = r.tabs.iter().map(|t| (t.restore_url(), t.context.is_some())).collect();
                let dir = r.profile_dir.clone();
                r.shutdown().await;
                remove_profile(&dir)?;
                let r = self.ensure_running(guard, storage).await?;
                let mut reopened = Vec::new();
                for (url, ephemeral) in tabs {
                    let url = if url.is_empty() { "about:blank".to_string() } else { url };
                    if let Ok(id) = r.open_tab(&url, ephemeral, NAVIGATION_TIMEOUT).await {
                        reopened.push(format!("{id} at {url}"));
                    }
                }
                Ok(Report::new(format!(
                    "Cleared cookies and site data of the {storage:?} profile; the browser was restarted on it and its \
                     tabs reloaded ({}). Refs from earlier snapshots are gone.",
                    if reopened.is_empty() { "none were open".to_string() } else { reopened.join(", ") }
                ))
                .into_output())
            }
            Some(s) => Err(BrowserError::Other(format!(
                "the running browser uses the {s:?} profile; clear {storage:?} storage when no browser runs on it"
            ))),
            None => match self.options.profile_dir(storage) {
                Some(dir) => {
                    if let Some(pid) = crate::session::profile_in_use(&dir) {
                        return Err(BrowserError::Other(format!(
                            "the {storage:?} profile is in use by another Chromium (pid {pid}, e.g. another session); \
                             clear it when that one has ended"
                        )));
                    }
                    remove_profile(&dir)?;
                    Ok(Report::new(format!("Cleared the {storage:?} browser profile.")).into_output())
                }
                None => Err(BrowserError::Other(
                    "ephemeral storage is dropped with its tab; there is nothing to clear".into(),
                )),
            },
        }
    }

    /// URL, title, new tabs, dialog, console errors, and (with `snapshot`) the page snapshot;
    /// returns why the snapshot could not be taken. A page that does not answer is asked once.
    async fn page_state(&self, r: &Running, tab: &Tab, rep: &mut Report, snapshot: bool) -> Option<BrowserError> {
        if let Some(note) = tab.shared.lock().note.take() {
            rep.line(note);
        }
        let dialog = tab.shared.lock().dialog.clone();
        if let Some(d) = dialog {
            rep.line(format!(
                "Dialog: {} {:?}{} — the page waits; answer with handle_dialog.",
                d.kind,
                d.message,
                if d.kind == "prompt" { format!(" (default {:?})", d.default_prompt) } else { String::new() }
            ));
            rep.meta
                .insert("dialog".into(), json!({"type": d.kind, "message": d.message, "default": d.default_prompt}));
            return None;
        }
        // Without a snapshot to take, the probes below are extras: a busy page does not hold the
        // result (a wait that succeeded) for long.
        let probe_limit = if snapshot { Duration::from_secs(30) } else { Duration::from_secs(2) };
        let blocked = tokio::time::timeout(probe_limit, eval(tab, "(window.__kodikBlocked || []).splice(0)"))
            .await
            .unwrap_or_else(|_| {
                Err(BrowserError::Unresponsive(format!(
                    "the page of tab {} does not answer (a script keeps it busy?)",
                    tab.id
                )))
            });
        if let Err(e @ BrowserError::Unresponsive(_)) = blocked {
            if snapshot {
                rep.line(format!("(no snapshot: {e})"));
            }
            return Some(e);
        }
        if let Ok(Value::Array(blocked)) = blocked
            && !blocked.is_empty()
        {
            rep.line(format!(
                "Blocked popup(s) opened without a user gesture: {}",
                blocked.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
        let probe = format!("(() => {{ const K = {}; return K.takeover(); }})()", actions::PAGE_JS);
        if let Ok(Value::String(reason)) = eval(tab, &probe).await {
            rep.line(format!(
                "takeover_required: tab {} shows {reason}. Automation is paused until the user completes it and \
                 hands control back; tell the user what is needed.",
                tab.id
            ));
            rep.meta.insert("takeover_required".into(), json!({"tab": tab.id, "reason": reason}));
            *self.takeover.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(crate::session::Takeover { tab: tab.id.clone(), reason });
        }
        if snapshot {
            r.attach_frames().await;
            match take_snapshot(tab).await {
                Ok((url, title, text)) => {
                    let doc_error = tab.shared.lock().doc_error.clone();
                    if let Some((status, reason, at)) = doc_error
                        && at == url
                    {
                        rep.line(format!("The server answered HTTP {status} {reason} for this page."));
                        rep.meta.insert("http_status".into(), json!(status));
                    }
                    rep.line(format!("URL: {url}"));
                    rep.line(format!("Title: {title}"));
                    rep.line("Snapshot:".to_string());
                    rep.line(text);
                    rep.meta.insert("url".into(), json!(url));
                    rep.meta.insert("title".into(), json!(title));
                }
                Err(e) => {
                    rep.line(format!("(no snapshot: {e})"));
                    return Some(e);
                }
            }
        }
        None
    }

    async fn navigate(&self, r: &mut Running, args: &BrowserArgs) -> Result<ToolOutput, BrowserError> {
        let id = r.current.clone().ok_or(BrowserError::NoOpenTab)?;
        let timeout = timeout_of(args, NAVIGATION_TIMEOUT);
        {
            let tab = r.tab(Some(&id))?;
            // Navigating away cancels a pending dialog (B6).
            let pending = tab.shared.lock().dialog.take();
            if pending.is_some() {
                let _ = tab.page.execute(HandleJavaScriptDialogParams::new(false)).await;
            }
            match args.action {
                BrowserAction::Navigate => actions::goto(tab, args.url.as_deref().unwrap_or(""), timeout).await?,
                BrowserAction::Reload => actions::reload(tab, timeout).await?,
                BrowserAction::Back | BrowserAction::Forward => {
                    let step = if args.action == BrowserAction::Back { "-1" } else { "1" };
                    let before = eval(tab, "location.href").await.ok();
                    let _ = eval(tab, &format!("history.go({step})")).await;
                    // history.go is asynchronous: wait for the URL to change, then for the load.
                    let cancel = kodik_core::CancellationToken::new();
                    let moved = actions::poll("the history step", Duration::from_secs(3), &cancel, || async {
                        let now = eval(tab, "location.href").await.ok();
                        Ok(if now.is_some() && now != before { Some(()) } else { None })
                    })
                    .await;
                    if moved.is_err() {
                        return Err(BrowserError::Other(format!(
                            "there is no page to go {} to",
                            if step == "-1" { "back" } else { "forward" }
                        )));
                    }
                    actions::wait_ready(tab, timeout).await?;
                }
                _ => {}
            }
        }
        let url = {
            let tab = r.tab(Some(&id))?;
            eval(tab, "location.href").await.ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        };
        if let Some(t) = r.tab_mut(&id) {
            t.last_url = url;
            let mut d = t.shared.lock();
            d.shot = None;
        }
        let tab = r.tab(Some(&id))?;
        let pending = tab.shared.lock().dialog.as_ref().map(|d| d.kind.clone());
        let download = tab.shared.lock().download_nav.is_some();
        let mut rep = Report::new(match pending {
            _ if download => format!("{} did not change the page:", args.action.as_str()),
            // A beforeunload dialog holds the navigation: it has not happened.
            Some(kind) if kind == "beforeunload" => format!(
                "{} has not happened yet: the page opened {} {kind} dialog and waits for it (accept it with \
                 handle_dialog to leave the page, dismiss it to stay).",
                args.action.as_str(),
                crate::error::article(&kind)
            ),
            // Any other dialog opened meanwhile: answering it does not leave the page.
            Some(kind) => format!(
                "{} did not happen: the page opened {} {kind} dialog again as the last one was dismissed (a page \
                 that keeps opening dialogs); answering it does not leave the page: close_tab gets rid of it.",
                args.action.as_str(),
                crate::error::article(&kind)
            ),
            None => format!("{} done.", args.action.as_str()),
        });
        download_lines(r, tab, &mut rep).await;
        self.page_state(r, tab, &mut rep, true).await;
        Ok(rep.into_output())
    }

    async fn screenshot(&self, tab: &Tab, args: &BrowserArgs) -> Result<ToolOutput, BrowserError> {
        let mut params = CaptureScreenshotParams::builder().format(CaptureScreenshotFormat::Png);
        let mut what = "the viewport".to_string();
        let (mut width, mut height) = viewport_size(tab).await?;
        let mut cut = None;
        if let Some(t) = &args.target {
            let (mut v, frame) = actions::with_element_in(
                tab,
                t,
                json!({}),
                "el.scrollIntoView({block: 'center', behavior: 'instant'}); const b = K.box(el); \
                 return { desc: K.describe(el), x: b.x + window.scrollX, y: b.y + window.scrollY, w: b.width, h: b.height };",
            )
            .await?;
            if frame.key.is_some() {
                // The clip is in top-page coordinates: the frame's position there plus its scroll.
                let (dx, dy) = frame.offset().await?;
                let inner = actions::eval_in(tab, &frame, "[window.scrollX, window.scrollY]").await?;
                let top = eval(tab, "[window.scrollX, window.scrollY]").await?;
                let at = |a: &Value, i: usize| a.get(i).and_then(Value::as_f64).unwrap_or(0.0);
                let x = v["x"].as_f64().unwrap_or(0.0) - at(&inner, 0) + dx + at(&top, 0);
                let y = v["y"].as_f64().unwrap_or(0.0) - at(&inner, 1) + dy + at(&top, 1);
                v["x"] = json!(x);
                v["y"] = json!(y);
            }
            let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            if f("w") <= 0.0 || f("h") <= 0.0 {
                return Err(BrowserError::NotActionable(format!(
                    "{} has no size to capture",
                    v.get("desc").and_then(Value::as_str).unwrap_or("the element")
                )));
            }
            (width, height) = (f("w").min(MAX_SIDE), f("h").min(MAX_SIDE));
            cut = cut_note(f("w"), f("h"));
            params = params.clip(Viewport { x: f("x"), y: f("y"), width, height, scale: 1.0 });
            params = params.capture_beyond_viewport(true);
            what = v.get("desc").and_then(Value::as_str).unwrap_or("the element").to_string();
        } else if let Some(c) = &args.clip {
            let scroll = eval(tab, "[window.scrollX, window.scrollY]").await?;
            let sx = scroll.get(0).and_then(Value::as_f64).unwrap_or(0.0);
            let sy = scroll.get(1).and_then(Value::as_f64).unwrap_or(0.0);
            (width, height) = (c.width.min(MAX_SIDE), c.height.min(MAX_SIDE));
            cut = cut_note(c.width, c.height);
            params = params.clip(Viewport { x: c.x + sx, y: c.y + sy, width, height, scale: 1.0 });
            what = format!("the region {}×{} at ({}, {})", c.width, c.height, c.x, c.y);
        } else if args.full_page == Some(true) {
            let size =
                eval(tab, "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]").await?;
            let w = size.get(0).and_then(Value::as_f64).unwrap_or(width);
            let h = size.get(1).and_then(Value::as_f64).unwrap_or(height);
            (width, height) = (w.min(MAX_SIDE), h.min(MAX_SIDE));
            cut = cut_note(w, h);
            params = params.clip(Viewport { x: 0.0, y: 0.0, width, height, scale: 1.0 });
            params = params.capture_beyond_viewport(true);
            what = "the full page".into();
        }
        let shot = tab.page.execute(params.build()).await.map_err(cdp("take a screenshot"))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.result.data.as_ref() as &str)
            .map_err(|e| BrowserError::Other(format!("the screenshot was not valid base64: {e}")))?;
        let viewport = args.target.is_none() && args.clip.is_none() && args.full_page != Some(true);
        let (url, scroll) = place(tab).await;
        // The image may not be the viewport's CSS size (a phone viewport scales a page without a
        // viewport meta tag down to the screen): the model reads x/y off the image.
        let (img_w, img_h) = png_size(&png).unwrap_or((width, height));
        let scale = (width / img_w.max(1.0), height / img_h.max(1.0));
        let scaled = viewport && ((scale.0 - 1.0).abs() > 0.01 || (scale.1 - 1.0).abs() > 0.01);
        let id = {
            let mut d = tab.shared.lock();
            d.shots += 1;
            let id = format!("{}-s{}", tab.id, d.shots);
            // Only viewport screenshots define a coordinate space for x/y targets.
            if viewport {
                d.shot = Some(Shot { id: id.clone(), width: img_w, height: img_h, scale, url, scroll });
            }
            id
        };
        let mut rep = Report::new(if scaled {
            format!(
                "Screenshot {id} of {what}: a {}×{} px image of a {}×{} CSS px page area (scaled by {:.2}, as the \
                 device shows it); x/y targets are image pixels of it, with screenshot_id.",
                img_w.round(),
                img_h.round(),
                width.round(),
                height.round(),
                img_w / width.max(1.0)
            )
        } else {
            format!(
                "Screenshot {id} of {what} ({}×{} CSS pixels{}).",
                width.round(),
                height.round(),
                if viewport { "; x/y targets may refer to it with screenshot_id" } else { "" }
            )
        });
        if scaled {
            rep.meta.insert("image_width".into(), json!(img_w));
            rep.meta.insert("image_height".into(), json!(img_h));
        }
        if let Some(cut) = cut {
            rep.line(cut);
            rep.meta.insert("cut".into(), json!(true));
        }
        rep.meta.insert("screenshot_id".into(), json!(id));
        rep.meta.insert("width".into(), json!(width));
        rep.meta.insert("height".into(), json!(height));
        rep.image = Some(png);
        Ok(rep.into_output())
    }

    async fn interact(&self, r: &mut Running, args: &BrowserArgs) -> Result<ToolOutput, BrowserError> {
        use BrowserAction as A;
        let id = r.current.clone().ok_or(BrowserError::NoOpenTab)?;
        let before = {
            let tab = r.tab(Some(&id))?;
            before(tab, r).await
        };
        let message = {
            let tab = r.tab(Some(&id))?;
            match args.action {
                A::Click => {
                    let (desc, x, y) =
                        point_within(tab, target(args)?, args.timeout.map(Duration::from_millis)).await?;
                    let button = match args.button.unwrap_or(MouseButton::Left) {
                        MouseButton::Left => "left",
                        MouseButton::Right => "right",
                        MouseButton::Middle => "middle",
                    };
                    let mut modifiers = 0;
                    for m in args.modifiers.iter().flatten() {
                        modifiers |= actions::modifier_bit(m)
                            .ok_or_else(|| BrowserError::NotActionable(format!("`{m}` is not a modifier key")))?;
                    }
                    let clicks = if args.double == Some(true) { 2 } else { 1 };
                    actions::click_at(tab, x, y, button, clicks, modifiers).await?;
                    let how = match (clicks, button) {
                        (2, "left") => "Double-clicked".to_string(),
                        (2, b) => format!("Double-clicked ({b} button)"),
                        (_, "left") => "Clicked".to_string(),
                        (_, b) => format!("Clicked ({b} button)"),
                    };
                    let with = match &args.modifiers {
                        Some(m) if !m.is_empty() => format!(" with {} held", m.join("+")),
                        _ => String::new(),
                    };
                    format!("{how} {desc}{with}.")
                }
                A::Hover => {
                    let (desc, x, y) = point(tab, target(args)?, false).await?;
                    actions::mouse(tab, "mouseMoved", x, y, "none", 0, 0).await?;
                    format!("Hovered {desc}.")
                }
                A::Fill => {
                    let value = args.value.clone().unwrap_or_default();
                    let v = with_element(
                        tab,
                        target(args)?,
                        json!({ "value": value }),
                        r#"
                        const desc = K.describe(el);
                        const editable = el.isContentEditable || (el.tagName === 'TEXTAREA') ||
                          (el.tagName === 'INPUT' && !['checkbox','radio','button','submit','reset','file','image','hidden'].includes((el.type||'').toLowerCase()));
                        if (!editable) return { __error: 'actionable', detail: desc + ' is not a text field (fill needs an input, textarea or contenteditable)' };
                        if (K.disabled(el) || el.readOnly) return { __error: 'actionable', detail: desc + ' is ' + (el.readOnly ? 'read-only' : 'disabled') };
                        el.scrollIntoView({ block: 'center', behavior: 'instant' });
                        el.focus();
                        if (el.isContentEditable) {
                          // Selected, to be replaced by typed text (below).
                          const doc = el.ownerDocument, range = doc.createRange();
                          range.selectNodeContents(el);
                          const sel = doc.getSelection(); sel.removeAllRanges(); sel.addRange(range);
                          return { desc, editable: true };
                        }
                        const proto = el.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
                        const set = Object.getOwnPropertyDescriptor(proto, 'value').set;
                        const old = el.value;
                        set.call(el, args.value);
                        // A field keeps only values of its type (a date as YYYY-MM-DD, a range
                        // within its bounds): a value it turned into another is not filled.
                        const lines = (s) => s.replace(/\r\n?/g, '\n');
                        if (lines(el.value) !== lines(args.value)) {
                          const held = el.value;
                          set.call(el, old);
                          const type = (el.type || '').toLowerCase();
                          const formats = { date: 'YYYY-MM-DD, e.g. 2024-02-29', month: 'YYYY-MM, e.g. 2024-03', week: 'YYYY-Www, e.g. 2024-W09',
                            time: 'HH:MM or HH:MM:SS in 24 hours, e.g. 13:45', 'datetime-local': 'YYYY-MM-DDTHH:MM, e.g. 2024-02-29T13:45',
                            number: 'a number written like 42 or -3.5', color: '#rrggbb, e.g. #ff8800' };
                          let why = formats[type] ? ' (a ' + type + ' field takes ' + formats[type] + ')' : '';
                          if (type === 'range') why = ' (its range is ' + (el.min || '0') + ' to ' + (el.max || '100') + (el.step && el.step !== 'any' ? ', step ' + el.step : '') + ')';
                          return { __error: 'actionable', detail: desc + ' did not take ' + JSON.stringify(args.value) + why + ': it would hold ' +
                            JSON.stringify(held) + ', so it was left as it was (' + JSON.stringify(old) + ')' };
                        }
                        el.dispatchEvent(new InputEvent('input', { bubbles: true, composed: true, inputType: 'insertText', data: args.value }));
                        el.dispatchEvent(new Event('change', { bubbles: true }));
                        return { desc };
                        "#,
                    )
                    .await?;
                    let desc = v.get("desc").and_then(Value::as_str).unwrap_or("the field").to_string();
                    if v.get("editable") == Some(&Value::Bool(true)) {
                        // A rich-text editor (Lexical, Slate, ProseMirror) keeps its own model of
                        // the text, fed by the input events of typing; a DOM write is undone by
                        // it. Text inserted as a user's typing arrives goes through it.
                        if value.is_empty() {
                            actions::press(tab, "Delete").await?;
                        } else {
                            tab.page
                                .execute(InsertTextParams::new(value.clone()))
                                .await
                                .map_err(cdp("type the text"))?;
                        }
                        let after = with_element(
                            tab,
                            target(args)?,
                            json!({ "value": value }),
                            "return { text: K.norm(el.innerText), want: K.norm(args.value) };",
                        )
                        .await?;
                        if after.get("text") != after.get("want") {
                            return Err(BrowserError::NotActionable(format!(
                                "{desc} did not keep the text: it shows {}; click it and type with press, key by key",
                                after.get("text").map(Value::to_string).unwrap_or_default()
                            )));
                        }
                    }
                    let n = value.chars().count();
                    format!("Filled {desc} with {n} character{}.", if n == 1 { "" } else { "s" })
                }
                A::Press => {
                    let key = args.key.clone().unwrap_or_default();
                    let mut on = String::new();
                    if let Some(t) = &args.target {
                        let v = with_element(tab, t, json!({}), "el.focus(); return { desc: K.describe(el) };").await?;
                        on = format!(" in {}", v.get("desc").and_then(Value::as_str).unwrap_or("the element"));
                    }
                    actions::press(tab, &key).await?;
                    format!("Pressed {key}{on}.")
                }
                A::Select => {
                    let v = with_element(
                        tab,
                        target(args)?,
                        json!({ "values": args.values }),
                        r#"
                        const desc = K.describe(el);
                        if (el.tagName !== 'SELECT') {
                          const custom = ['combobox', 'listbox', 'button'].includes(K.role(el));
                          return { __error: 'actionable', detail: desc + ' is not a select element' + (custom ? '; it is a custom widget: click it, then click the option' : '') };
                        }
                        if (K.disabled(el)) return { __error: 'actionable', detail: desc + ' is disabled' };
                        const opts = Array.from(el.options);
                        const chosen = [];
                        for (const want of args.values) {
                          const hit = opts.filter((o) => o.value === want || K.norm(o.textContent) === K.norm(want));
                          if (!hit.length) return { __error: 'actionable', detail: 'no option ' + JSON.stringify(want) + ' in ' + desc + '; options: ' + opts.map((o) => JSON.stringify(K.norm(o.textContent))).join(', ') };
                          chosen.push(hit[0]);
                        }
                        if (!el.multiple && chosen.length > 1) return { __error: 'actionable', detail: desc + ' takes one option, ' + chosen.length + ' were given' };
                        for (const o of opts) o.selected = chosen.includes(o);
                        el.dispatchEvent(new Event('input', { bubbles: true }));
                        el.dispatchEvent(new Event('change', { bubbles: true }));
                        return { desc, chosen: chosen.map((o) => K.norm(o.textContent)) };
                        "#,
                    )
                    .await?;
                    format!(
                        "Selected {} in {}.",
                        v.get("chosen").map(Value::to_string).unwrap_or_default(),
                        v.get("desc").and_then(Value::as_str).unwrap_or("the select")
                    )
                }
                A::Check => {
                    let want = args.checked.unwrap_or(true);
                    let t = target(args)?;
                    let state_js = "const c = el.getAttribute('aria-checked'); return { desc: K.describe(el), \
                                    checkable: el.type === 'checkbox' || el.type === 'radio' || c !== null, \
                                    checked: el.checked === true || c === 'true' };";
                    let s = with_element(tab, t, json!({}), state_js).await?;
                    let desc = s.get("desc").and_then(Value::as_str).unwrap_or("the element").to_string();
                    if s.get("checkable") != Some(&Value::Bool(true)) {
                        return Err(BrowserError::NotActionable(format!("{desc} is not a checkbox, radio or switch")));
                    }
                    if s.get("checked") == Some(&Value::Bool(want)) {
                        format!("{desc} was already {}.", if want { "checked" } else { "unchecked" })
                    } else {
                        let (_, x, y) = point(tab, t, true).await?;
                        actions::click_at(tab, x, y, "left", 1, 0).await?;
                        let after = with_element(tab, t, json!({}), state_js).await?;
                        if after.get("checked") != Some(&Value::Bool(want)) {
                            return Err(BrowserError::NotActionable(format!(
                                "clicking {desc} did not {} it (a radio cannot be unchecked by clicking)",
                                if want { "check" } else { "uncheck" }
                            )));
                        }
                        format!("{} {desc}.", if want { "Checked" } else { "Unchecked" })
                    }
                }
                A::Drag => {
                    let (from, x1, y1) = point(tab, target(args)?, true).await?;
                    let to = args.to.as_ref().ok_or_else(|| BrowserError::Other("drag needs `to`".into()))?;
                    let (dest, x2, y2) = point(tab, to, false).await?;
                    let html5 = actions::drag(tab, (x1, y1), (x2, y2)).await?;
                    format!("Dragged {from} onto {dest}{}.", if html5 { " (HTML5 drag and drop)" } else { "" })
                }
                A::Scroll => {
                    let dir = args.direction.unwrap_or(ScrollDirection::Down);
                    let (dx, dy) = match dir {
                        ScrollDirection::Up => (0, -1),
                        ScrollDirection::Down => (0, 1),
                        ScrollDirection::Left => (-1, 0),
                        ScrollDirection::Right => (1, 0),
                    };
                    let amount = args.amount.map(f64::from);
                    let body = r#"
                        const box = el === null ? null : el;
                        const target = box || document.scrollingElement || document.documentElement;
                        const step = args.amount ?? Math.round((args.dy ? target.clientHeight : target.clientWidth) * 0.8 || (args.dy ? innerHeight : innerWidth) * 0.8);
                        const x0 = target.scrollLeft, y0 = target.scrollTop;
                        target.scrollBy({ left: args.dx * step, top: args.dy * step, behavior: 'instant' });
                        return { desc: box ? K.describe(box) : 'the page', moved: [target.scrollLeft - x0, target.scrollTop - y0], at: [target.scrollLeft, target.scrollTop],
                                 max: [target.scrollWidth - target.clientWidth, target.scrollHeight - target.clientHeight] };
                    "#;
                    let a = json!({ "dx": dx, "dy": dy, "amount": amount });
                    let v = match &args.target {
                        Some(t) => with_element(tab, t, a, body).await?,
                        None => {
                            let script = format!(
                                "(() => {{ const K = {}; const args = {a}; const el = null; {body} }})()",
                                actions::PAGE_JS
                            );
                            eval(tab, &script).await?
                        }
                    };
                    format!(
                        "Scrolled {} {:?} by {} px; now at {} of {}.",
                        v.get("desc").and_then(Value::as_str).unwrap_or("the page"),
                        dir,
                        v.get("moved").map(Value::to_string).unwrap_or_default(),
                        v.get("at").map(Value::to_string).unwrap_or_default(),
                        v.get("max").map(Value::to_string).unwrap_or_default(),
                    )
                }
                _ => return Err(BrowserError::Other("not an interaction".into())),
            }
        };
        let snapshot = !matches!(args.action, A::Hover | A::Scroll | A::Fill);
        // A click's `timeout` also lets a navigation it starts (a slow form submission) finish.
        let bound = match args.action {
            A::Click => timeout_of(args, actions::SETTLE).max(actions::SETTLE),
            _ => actions::SETTLE,
        };
        self.after_action(r, &id, before, message, snapshot, bound).await
    }

    /// The result of an acting action: its message, what changed, and a fresh snapshot.
    async fn after_action(
        &self,
        r: &mut Running,
        id: &str,
        before: Before,
        message: String,
        snapshot: bool,
        bound: Duration,
    ) -> Result<ToolOutput, BrowserError> {
        {
            let tab = r.tab(Some(id))?;
            if tab.shared.lock().dialog.is_none() {
                actions::settle(tab, bound).await;
            }
        }
        let new_tabs = r.adopt_new_targets().await;
        let mut rep = Report::new(message);
        for closed in std::mem::take(&mut r.closed_tabs) {
            rep.line(format!(
                "Tab {closed} closed itself.{}",
                r.current.as_ref().map(|c| format!(" The current tab is now {c}.")).unwrap_or_default()
            ));
        }
        let Ok(tab) = r.tab(Some(id)) else {
            return Ok(rep.into_output());
        };
        let dialog_open = tab.shared.lock().dialog.is_some();
        // Until its server answers, the page answers no evaluation: nothing below may ask it.
        let loading = tab.shared.lock().navigating.clone();
        if !dialog_open && loading.is_none() {
            let now = eval(tab, "[location.href, document.title, (window.__kodikBlocked || []).splice(0)]")
                .await
                .unwrap_or(Value::Null);
            let url = now.get(0).and_then(Value::as_str).unwrap_or("").to_string();
            let title = now.get(1).and_then(Value::as_str).unwrap_or("").to_string();
            if url != before.url && !url.is_empty() {
                rep.line(format!("The page navigated to {url}."));
            }
            // The snapshot below says the title.
            if !snapshot && title != before.title && !title.is_empty() {
                rep.line(format!("Title: {title}"));
            }
            if let Some(blocked) = now.get(2).and_then(Value::as_array)
                && !blocked.is_empty()
            {
                rep.line(format!(
                    "Blocked popup(s) opened without a user gesture: {}",
                    blocked.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let _ = before.tabs;
        for t in &new_tabs {
            if let Ok(nt) = r.tab(Some(t)) {
                let url = nt.page.url().await.ok().flatten().unwrap_or_default();
                rep.line(format!(
                    "New tab {t} opened{} at {url}; select_tab {t} to work in it.",
                    nt.opener.as_ref().map(|o| format!(" by {o}")).unwrap_or_default()
                ));
            }
        }
        if !new_tabs.is_empty() {
            rep.meta.insert("new_tabs".into(), json!(new_tabs));
        }
        let tab = r.tab(Some(id))?;
        {
            let d = tab.shared.lock();
            let fresh = d.console_seen.saturating_sub(before.console_seen) as usize;
            let errors: Vec<String> = d
                .console
                .iter()
                .rev()
                .take(fresh)
                .filter(|e| e.level == "error")
                .map(|e| clip_chars(&e.text, 300))
                .collect();
            if !errors.is_empty() {
                rep.line(format!("Console errors: {}", errors.into_iter().rev().collect::<Vec<_>>().join(" | ")));
            }
        }
        {
            let dl = r.downloads.lock().unwrap_or_else(|p| p.into_inner());
            if dl.len() > before.downloads {
                for d in dl.iter().skip(before.downloads) {
                    rep.line(format!("Download started: {} from {}", d.name, d.url));
                }
            }
        }
        if let Some(nav) = loading {
            rep.line(format!(
                "The page is still loading {} (for {} s; the action started it, e.g. a form submission or a link), \
                 and tab {id} shows its previous page until the server answers. The action was done: do not repeat \
                 it; wait with condition url, text or load to see the result.",
                nav.url,
                nav.since.elapsed().as_secs()
            ));
            rep.meta.insert("loading".into(), json!(nav.url));
            return Ok(rep.into_output());
        }
        self.page_state(r, tab, &mut rep, snapshot).await;
        if let Ok(Value::String(u)) = eval(tab, "location.href").await
            && let Some(t) = r.tab_mut(id)
        {
            t.last_url = u;
        }
        Ok(rep.into_output())
    }

    async fn upload(&self, r: &mut Running, args: &BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        let tab = r.tab(None)?;
        let mut paths = Vec::new();
        for f in args.files.clone().unwrap_or_default() {
            // B8: only workspace files that .kodikignore does not hide.
            let p =
                cx.workspace.check_file(&f).map_err(|e| BrowserError::Refused(format!("cannot upload {f}: {e}")))?;
            paths.push(p.display().to_string());
        }
        // Without a target, an open file chooser is answered (B5), else the page's one file input.
        let chooser = if args.target.is_none() { tab.shared.lock().file_chooser.take() } else { None };
        if let Some((node, multiple)) = chooser {
            if paths.len() > 1 && !multiple {
                tab.shared.lock().file_chooser = Some((node, multiple));
                return Err(BrowserError::NotActionable(format!(
                    "the file chooser takes one file, {} were given",
                    paths.len()
                )));
            }
            let mut set = SetFileInputFilesParams::new(paths.clone());
            set.backend_node_id = Some(node);
            tab.page.execute(set).await.map_err(cdp("answer the file chooser"))?;
            return Ok(
                Report::new(format!("Answered the file chooser with {}.", file_names(&paths).join(", "))).into_output()
            );
        }
        let t = args.target.clone().unwrap_or(Target { css: Some("input[type=file]".into()), ..Default::default() });
        let v = with_element(
            tab,
            &t,
            json!({}),
            "if (!(el.tagName === 'INPUT' && el.type === 'file')) return { __error: 'actionable', detail: K.describe(el) + ' is not a file input' }; \
             window.__kodik.upload = el; return { desc: K.describe(el), multiple: el.multiple };",
        )
        .await?;
        let desc = v.get("desc").and_then(Value::as_str).unwrap_or("the file input").to_string();
        if paths.len() > 1 && v.get("multiple") != Some(&Value::Bool(true)) {
            return Err(BrowserError::NotActionable(format!("{desc} takes one file, {} were given", paths.len())));
        }
        let params = EvaluateParams::builder()
            .expression("window.__kodik.upload")
            .build()
            .map_err(|e| BrowserError::Other(format!("cannot build the evaluation: {e}")))?;
        let obj = tab.page.execute(params).await.map_err(cdp("find the file input"))?;
        let object_id =
            obj.result.result.object_id.clone().ok_or_else(|| BrowserError::Other("the file input vanished".into()))?;
        let mut set = SetFileInputFilesParams::new(paths.clone());
        set.object_id = Some(object_id);
        tab.page.execute(set).await.map_err(cdp("set the files"))?;
        let _ = eval(tab, "(() => { const el = window.__kodik.upload; delete window.__kodik.upload; el.dispatchEvent(new Event('change', {bubbles: true})); return 1 })()").await;
        let names = file_names(&paths);
        Ok(Report::new(format!("Set {} on {desc}.", names.join(", "))).into_output())
    }

    /// [`Self::wait_on`], ended as soon as the tab waited on closes itself (an OAuth popup
    /// that calls `window.close()`): the condition can no longer come, and the model is told
    /// which tab is current now instead of waiting out the timeout. Downloads and popups are
    /// waited for on, as they outlive the page that started them.
    async fn wait(&self, r: &mut Running, args: &BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        let condition = args.condition.unwrap_or(WaitCondition::Load);
        if matches!(condition, WaitCondition::Download | WaitCondition::Popup) {
            return self.wait_on(r, args, cx).await;
        }
        let id = r.current.clone().ok_or(BrowserError::NoOpenTab)?;
        let shared = Arc::clone(&r.tab(Some(&id))?.shared);
        let closed = async {
            while !shared.lock().closed {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            got = self.wait_on(r, args, cx) => return got,
            () = closed => {}
        }
        r.adopt_new_targets().await;
        r.closed_tabs.retain(|t| *t != id);
        let now = r.current.as_ref().map(|c| format!("; the current tab is now {c}")).unwrap_or_default();
        Err(BrowserError::Other(format!(
            "tab {id} closed itself (the page called window.close()) before the wait for {} was over{now}",
            serde_json::to_value(condition).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
        )))
    }

    async fn wait_on(&self, r: &mut Running, args: &BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        let timeout = timeout_of(args, DEFAULT_WAIT);
        let cancel = &cx.cancel;
        let condition = args.condition.unwrap_or(WaitCondition::Load);
        let id = r.current.clone().ok_or(BrowserError::NoOpenTab)?;
        let started = Instant::now();
        let msg = match condition {
            WaitCondition::Dialog => {
                let tab = r.tab(Some(&id))?;
                let shared = tab.shared.clone();
                let d = actions::poll("a dialog", timeout, cancel, || {
                    let shared = shared.clone();
                    async move { Ok(shared.lock().dialog.clone()) }
                })
                .await?;
                let mut rep = Report::new(format!(
                    "{} {} dialog is open: {:?}{}. Answer with handle_dialog.",
                    if crate::error::article(&d.kind) == "an" { "An" } else { "A" },
                    d.kind,
                    d.message,
                    if d.kind == "prompt" { format!(" (default {:?})", d.default_prompt) } else { String::new() }
                ));
                rep.meta.insert(
                    "dialog".into(),
                    json!({"type": d.kind, "message": d.message, "default": d.default_prompt}),
                );
                return Ok(rep.into_output());
            }
            WaitCondition::Popup => {
                let known = r.tabs.len();
                let deadline = started + timeout;
                loop {
                    r.adopt_new_targets().await;
                    // A popup the previous action opened counts: the wait could not start before it.
                    let open: Vec<String> =
                        r.new_popups.iter().filter(|t| r.tabs.iter().any(|x| &x.id == *t)).cloned().collect();
                    if let Some(t) = open.first() {
                        r.new_popups.retain(|x| x != t);
                        let tab = r.tab(Some(t))?;
                        let _ = actions::wait_ready(tab, Duration::from_secs(5)).await;
                        let url = eval(tab, "location.href")
                            .await
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        break format!("New tab {t} opened at {url}; select_tab {t} to work in it.");
                    }
                    if r.tabs.len() > known {
                        break "A new tab opened; see list_tabs.".to_string();
                    }
                    if Instant::now() >= deadline {
                        return Err(BrowserError::Timeout { what: "a popup".into(), ms: timeout.as_millis() as u64 });
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                        _ = cancel.cancelled() => return Err(BrowserError::Cancelled("a popup".into())),
                    }
                }
            }
            WaitCondition::Download => {
                let downloads = r.downloads.clone();
                let d = actions::poll("a download to finish", timeout, cancel, || {
                    let downloads = downloads.clone();
                    async move {
                        let mut dl = downloads.lock().unwrap_or_else(|p| p.into_inner());
                        Ok(dl.iter_mut().find(|d| !d.reported && d.state != "in progress").map(|d| {
                            d.reported = true;
                            d.clone()
                        }))
                    }
                })
                .await?;
                let path = d.path.as_deref().map(crate::session::display_path).unwrap_or_default();
                let mut rep = Report::new(format!("Download {}: {} ({} bytes) at {path}", d.state, d.name, d.bytes));
                rep.meta.insert(
                    "download".into(),
                    json!({"name": d.name, "bytes": d.bytes, "path": path, "state": d.state}),
                );
                return Ok(rep.into_output());
            }
            WaitCondition::FileChooser => {
                let tab = r.tab(Some(&id))?;
                let shared = tab.shared.clone();
                let (_, multiple) = actions::poll("a file chooser", timeout, cancel, || {
                    let shared = shared.clone();
                    async move { Ok(shared.lock().file_chooser) }
                })
                .await?;
                format!(
                    "A file chooser is open ({}); answer it with upload and `files`.",
                    if multiple { "several files" } else { "one file" }
                )
            }
            WaitCondition::Load => {
                let tab = r.tab(Some(&id))?;
                actions::wait_load(tab, timeout).await?;
                "The page has loaded.".to_string()
            }
            WaitCondition::NetworkIdle => {
                let tab = r.tab(Some(&id))?;
                let shared = tab.shared.clone();
                actions::poll("the network to be idle", timeout, cancel, || {
                    let shared = shared.clone();
                    async move {
                        let d = shared.lock();
                        let quiet = d.last_network.is_none_or(|t| t.elapsed() >= Duration::from_millis(500));
                        Ok((d.inflight.is_empty() && quiet).then_some(()))
                    }
                })
                .await
                .map_err(|e| match e {
                    BrowserError::Timeout { what, ms } => {
                        BrowserError::Timeout { what: format!("{what}{}", in_flight(&tab.shared.lock())), ms }
                    }
                    e => e,
                })?;
                "The network is idle (no requests for 500 ms).".to_string()
            }
            WaitCondition::Url => {
                let tab = r.tab(Some(&id))?;
                let want = args.url.clone().unwrap_or_default();
                // `/…/` is a regular expression (JavaScript syntax), `*` a glob, anything else a substring.
                let regex = (want.len() > 2 && want.starts_with('/') && want.ends_with('/'))
                    .then(|| serde_json::to_string(&want[1..want.len() - 1]).unwrap_or_default());
                if let Some(re) = &regex
                    && let Err(e) = eval(tab, &format!("new RegExp({re}) && true")).await
                {
                    return Err(BrowserError::Other(format!("`{want}` is not a valid regular expression: {e}")));
                }
                let url = actions::poll(&format!("the URL to match {want:?}"), timeout, cancel, || async {
                    // The URL the tab's events tell needs no answer from the page (it may be busy).
                    let known = tab.shared.lock().url.clone();
                    let u = match known {
                        Some(u) if regex.is_none() => Some(u),
                        _ => eval(tab, "location.href").await.ok().and_then(|v| v.as_str().map(str::to_string)),
                    };
                    let Some(u) = u else { return Ok(None) };
                    let hit = match &regex {
                        Some(re) => matches!(
                            eval(
                                tab,
                                &format!("new RegExp({re}).test({})", serde_json::to_string(&u).unwrap_or_default())
                            )
                            .await,
                            Ok(Value::Bool(true))
                        ),
                        None => url_matches(&u, &want),
                    };
                    Ok(hit.then_some(u))
                })
                .await?;
                format!("The URL is {url}.")
            }
            WaitCondition::Text => {
                let tab = r.tab(Some(&id))?;
                let want = args.text.clone().unwrap_or_default();
                let script = format!(
                    "(() => {{ const K = {}; return K.textOf(document.body).toLowerCase().includes({}) }})()",
                    actions::PAGE_JS,
                    serde_json::to_string(&want.to_lowercase()).unwrap_or_default()
                );
                actions::poll(&format!("the text {want:?}"), timeout, cancel, || async {
                    Ok(matches!(eval(tab, &script).await, Ok(Value::Bool(true))).then_some(()))
                })
                .await?;
                format!("{want:?} is on the page.")
            }
            WaitCondition::Element => {
                let tab = r.tab(Some(&id))?;
                let t = target(args)?;
                let state = args.state.unwrap_or(ElementState::Visible);
                let want = serde_json::to_value(state).unwrap_or(Value::Null);
                actions::poll(&format!("{} to be {want}", target_text(t)), timeout, cancel, || async {
                    let v =
                        with_element(tab, t, json!({}), "return { visible: K.visible(el), disabled: K.disabled(el) };")
                            .await;
                    let ok = match (&v, state) {
                        (Err(BrowserError::NoMatch(_)), ElementState::Detached | ElementState::Hidden) => true,
                        (Err(BrowserError::NoMatch(_)), _) => false,
                        (Err(BrowserError::StaleRef(_)), ElementState::Detached) => true,
                        (Err(e), _) => return Err(BrowserError::Other(e.to_string())),
                        (Ok(v), s) => {
                            let visible = v.get("visible") == Some(&Value::Bool(true));
                            let disabled = v.get("disabled") == Some(&Value::Bool(true));
                            match s {
                                ElementState::Visible => visible,
                                ElementState::Hidden => !visible,
                                ElementState::Attached => true,
                                ElementState::Detached => false,
                                ElementState::Enabled => visible && !disabled,
                                ElementState::Disabled => disabled,
                            }
                        }
                    };
                    Ok(ok.then_some(()))
                })
                .await?;
                format!("{} is {want}.", target_text(t))
            }
        };
        let tab = r.tab(Some(&id))?;
        let mut rep = Report::new(format!("{msg} (waited {} ms)", started.elapsed().as_millis()));
        self.page_state(r, tab, &mut rep, false).await;
        Ok(rep.into_output())
    }

    async fn handle_dialog(&self, r: &mut Running, args: &BrowserArgs) -> Result<ToolOutput, BrowserError> {
        let id = r.current.clone().ok_or(BrowserError::NoOpenTab)?;
        let tab = r.tab(Some(&id))?;
        let Some(d) = tab.shared.lock().dialog.clone() else { return Err(BrowserError::NoDialog(id)) };
        let accept = args.accept.unwrap_or(false);
        let mut params = HandleJavaScriptDialogParams::new(accept);
        // Accept without text keeps the prompt's default, as a user pressing OK would.
        let answer = if d.kind == "prompt" && accept {
            Some(args.prompt_text.clone().unwrap_or_else(|| d.default_prompt.clone()))
        } else {
            None
        };
        params.prompt_text = answer.clone();
        tab.page.execute(params).await.map_err(cdp("answer the dialog"))?;
        tab.shared.lock().dialog = None;
        let message = match (d.kind.as_str(), accept) {
            ("prompt", true) => {
                format!("Accepted the prompt {:?}; it returns {:?}.", d.message, answer.unwrap_or_default())
            }
            ("prompt", false) => format!("Dismissed the prompt {:?}; it returns null.", d.message),
            ("confirm", a) => {
                format!("{} the confirm {:?}; it returns {a}.", if a { "Accepted" } else { "Dismissed" }, d.message)
            }
            (k, a) => format!("{} the {k} {:?}.", if a { "Accepted" } else { "Dismissed" }, d.message),
        };
        let before = Before {
            url: String::new(),
            title: String::new(),
            console_seen: tab.shared.lock().console_seen,
            tabs: r.tabs.len(),
            downloads: 0,
        };
        let before = Before { downloads: r.downloads.lock().map(|d| d.len()).unwrap_or(0), ..before };
        let before = {
            let mut b = before;
            // The URL before the dialog is unknown here; comparing with it would always say "navigated".
            b.url = eval(r.tab(Some(&id))?, "location.href")
                .await
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            b
        };
        self.after_action(r, &id, before, message, true, actions::SETTLE).await
    }

    async fn fill_credential(
        &self,
        r: &mut Running,
        args: &BrowserArgs,
        cx: &ToolContext,
    ) -> Result<ToolOutput, BrowserError> {
        let tab = r.tab(None)?;
        let cid = args.credential_id.clone().unwrap_or_default();
        let cred = self
            .credentials
            .get(&cid)
            .ok_or_else(|| BrowserError::Other(format!("no saved credential {cid}; see list_credentials")))?;
        let origin = origin_of(tab).await?;
        if origin != cred.origin() {
            return Err(BrowserError::Refused(format!(
                "credential {cid} belongs to {}, but this tab is on {origin}; it is never filled on another origin",
                cred.origin()
            )));
        }
        // B10: using a saved login is its own approval (`browser.fill_credential` in a policy),
        // beyond the approval of the browser call; the approver sees the label, never the secret.
        let request = ApprovalRequest {
            call_id: cx.call_id.clone(),
            tool: "browser.fill_credential".into(),
            effect: Effect::Browser,
            args: json!({ "credential_id": cid, "label": cred.label(), "origin": origin }),
            server: None,
        };
        if let Approval::Denied(why) = cx.approver.approve(&request).await {
            return Err(BrowserError::Refused(format!("filling credential {cid} was not approved: {why}")));
        }
        let form = args.target.clone().unwrap_or(Target { css: Some("body".into()), ..Default::default() });
        // The form may sit in a frame of another origin; the values go only where they belong.
        let at = with_element(tab, &form, json!({}), "return { origin: location.origin };").await?;
        let form_origin = at.get("origin").and_then(Value::as_str).unwrap_or("");
        if form_origin != cred.origin() {
            return Err(BrowserError::Refused(format!(
                "credential {cid} belongs to {}, but the form is in a frame of {form_origin}; it is never filled on another origin",
                cred.origin()
            )));
        }
        // The values travel only in this call's arguments and never come back.
        let v = with_element(
            tab,
            &form,
            json!({ "u": cred.username(), "p": cred.password() }),
            r#"
            const scope = el.tagName === 'FORM' || el.tagName === 'BODY' ? el : (el.closest('form') || el);
            const pw = Array.from(scope.querySelectorAll('input[type=password]')).filter(K.visible);
            if (pw.length !== 1) return { __error: 'actionable', detail: (pw.length ? pw.length + ' password fields' : 'no password field') + ' in ' + K.describe(el) + '; give the login form as target' };
            const inputs = Array.from(scope.querySelectorAll('input')).filter((i) => K.visible(i) && /^(text|email|tel|)$/.test((i.getAttribute('type') || '').toLowerCase()));
            const user = inputs.filter((i) => (i.compareDocumentPosition(pw[0]) & Node.DOCUMENT_POSITION_FOLLOWING)).pop();
            const set = (f, v) => { const s = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set; f.focus(); s.call(f, v);
              f.dispatchEvent(new InputEvent('input', { bubbles: true, composed: true })); f.dispatchEvent(new Event('change', { bubbles: true })); };
            if (user) set(user, args.u);
            set(pw[0], args.p);
            return { user: user ? K.describe(user) : null, pw: K.describe(pw[0]) };
            "#,
        )
        .await?;
        let user = v.get("user").and_then(Value::as_str).map(|u| format!("{u} and ")).unwrap_or_default();
        Ok(Report::new(format!(
            "Filled {user}{} with the saved credential {:?} (values not shown).",
            v.get("pw").and_then(Value::as_str).unwrap_or("the password field"),
            cred.label()
        ))
        .into_output())
    }

    /// The page's clipboard (headless Chromium keeps its own), after its own approval (B10).
    async fn clipboard(
        &self,
        r: &mut Running,
        args: &BrowserArgs,
        cx: &ToolContext,
    ) -> Result<ToolOutput, BrowserError> {
        let tab = r.tab(None)?;
        let write = args.action == BrowserAction::WriteClipboard;
        let request = ApprovalRequest {
            call_id: cx.call_id.clone(),
            tool: "browser.clipboard".into(),
            effect: Effect::Browser,
            args: json!({ "action": args.action.as_str() }),
            server: None,
        };
        if let Approval::Denied(why) = cx.approver.approve(&request).await {
            return Err(BrowserError::Refused(format!("{} was not approved: {why}", args.action.as_str())));
        }
        let origin = origin_of(tab).await?;
        for name in ["clipboard-read", "clipboard-write"] {
            let grant: SetPermissionParams = serde_json::from_value(json!({
                "permission": { "name": name, "allowWithoutSanitization": true }, "setting": "granted", "origin": origin,
            }))
            .map_err(|e| BrowserError::Other(format!("cannot build the permission grant: {e}")))?;
            r.browser.execute(grant).await.map_err(cdp("allow the clipboard"))?;
        }
        let tab = r.tab(None)?;
        let focus: SetFocusEmulationEnabledParams = SetFocusEmulationEnabledParams::new(true);
        tab.page.execute(focus).await.map_err(cdp("focus the page"))?;
        if write {
            let text = args.text.clone().unwrap_or_default();
            let lit = serde_json::to_string(&text).unwrap_or_default();
            eval(tab, &format!("navigator.clipboard.writeText({lit}).then(() => true)")).await?;
            Ok(Report::new(format!("Wrote {} characters to the clipboard.", text.chars().count())).into_output())
        } else {
            let v = eval(tab, "navigator.clipboard.readText()").await?;
            let text = v.as_str().unwrap_or("").to_string();
            let mut rep = Report::new(format!("Clipboard ({} characters):", text.chars().count()));
            rep.line(clip_chars(&text, 20_000));
            Ok(rep.into_output())
        }
    }

    async fn eval_action(&self, r: &mut Running, args: &BrowserArgs) -> Result<ToolOutput, BrowserError> {
        let tab = r.tab(None)?;
        let src = args.expression.clone().unwrap_or_default();
        let expr = crate::eval::parse(&src)?;
        let mut reads = Vec::new();
        crate::eval::reads(&expr, &mut reads);
        let mut values = std::collections::HashMap::new();
        for read in reads {
            let v = if crate::eval::needs_element(read) {
                let t = args.target.as_ref().ok_or_else(|| {
                    BrowserError::Refused(format!("`{read}` reads an element: give `target` (a ref or locator)"))
                })?;
                let prop = read.trim_start_matches("element.");
                with_element(
                    tab,
                    t,
                    json!({ "p": prop }),
                    "const v = el[args.p]; return { v: v === undefined ? null : v };",
                )
                .await?
                .get("v")
                .cloned()
                .unwrap_or(Value::Null)
            } else {
                // `read` is one of the fixed whitelisted property paths, never model text.
                eval(tab, read).await?
            };
            values.insert(read, v);
        }
        let result = crate::eval::compute(&expr, &|k| values.get(k).cloned().unwrap_or(Value::Null));
        let mut rep = Report::new(format!("{src} = {result}"));
        rep.meta.insert("value".into(), result);
        Ok(rep.into_output())
    }

    async fn preview(&self, r: &mut Running, args: &BrowserArgs, cx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        let url = args.url.clone().unwrap_or_default();
        if let Some(old) = self.preview.lock().await.take() {
            old.stop().await;
        }
        let mut server = None;
        if let Some(command) = &args.command {
            let workdir = match &args.workdir {
                Some(w) => cx.workspace.resolve(w).map_err(|e| BrowserError::Refused(format!("workdir {w}: {e}")))?,
                None => cx.workspace.primary_root().to_path_buf(),
            };
            crate::preview::check_free(&url, command).await?;
            let (mut child, log) = crate::preview::start_server(command, &workdir)?;
            let timeout = timeout_of(args, Duration::from_secs(60));
            let up = tokio::select! {
                r = crate::preview::wait_until_up(&url, timeout, &mut child, &log) => r,
                _ = cx.cancel.cancelled() => Err(BrowserError::Cancelled("the dev server".into())),
            };
            if let Err(e) = up {
                crate::preview::Preview::new(String::new(), Some(child)).stop().await;
                return Err(e);
            }
            server = Some(child);
        }
        let id = match r.open_tab(&url, false, NAVIGATION_TIMEOUT).await {
            Ok(id) => id,
            Err(e) => {
                crate::preview::Preview::new(String::new(), server).stop().await;
                return Err(e);
            }
        };
        let started = server.is_some();
        *self.preview.lock().await = Some(crate::preview::Preview::new(id.clone(), server));
        let tab = r.tab(Some(&id))?;
        let mut rep = Report::new(format!(
            "Preview of {url} in tab {id}{}.",
            if started { " (dev server started; close_preview stops it)" } else { "" }
        ));
        rep.meta.insert("tab_id".into(), json!(id));
        self.page_state(r, tab, &mut rep, true).await;
        Ok(rep.into_output())
    }
}

/// When the tab was sent to a URL that is a download: says so, and where the file is (waiting
/// a moment for a small one to finish).
async fn download_lines(r: &Running, tab: &Tab, rep: &mut Report) {
    let Some(url) = tab.shared.lock().download_nav.take() else { return };
    rep.line(format!("{url} is a download, not a page; tab {} keeps the page it had.", tab.id));
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let found = {
            let mut dl = r.downloads.lock().unwrap_or_else(|p| p.into_inner());
            let entry = dl.iter_mut().rev().find(|d| d.url == url && !d.reported);
            match entry {
                Some(d) if d.state != "in progress" || Instant::now() >= deadline => {
                    d.reported = d.state != "in progress";
                    Some(d.clone())
                }
                Some(_) => None,
                None if Instant::now() >= deadline => {
                    rep.line("Its download has not begun yet; wait with condition download for it.");
                    return;
                }
                None => None,
            }
        };
        if let Some(d) = found {
            let path = d.path.as_deref().map(crate::session::display_path).unwrap_or_default();
            rep.line(if d.state == "in progress" {
                format!("Download started: {}; wait with condition download for it to finish.", d.name)
            } else {
                format!("Download {}: {} ({} bytes) at {path}", d.state, d.name, d.bytes)
            });
            rep.meta
                .insert("download".into(), json!({"name": d.name, "bytes": d.bytes, "path": path, "state": d.state}));
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reloads the current tab at its last URL when its renderer crashed; says what happened.
async fn recover_crash(r: &mut Running) -> Option<String> {
    let id = r.current.clone()?;
    let tab = r.tabs.iter().find(|t| t.id == id)?;
    if !tab.shared.lock().crashed {
        return None;
    }
    Some(match r.replace_crashed(&id).await {
        Ok(url) => format!("The page of tab {id} had crashed; it was reloaded at {url}. Take a new snapshot."),
        Err(e) => format!("The page of tab {id} had crashed and did not reload ({e}); navigate again."),
    })
}

/// The longest side of a screenshot, in CSS pixels: model APIs refuse larger images (8000 px
/// per side for Anthropic's), and a taller one is unreadable once scaled down anyway.
const MAX_SIDE: f64 = 8000.0;

/// What a capture of `w`×`h` leaves out when a side is over [`MAX_SIDE`].
fn cut_note(w: f64, h: f64) -> Option<String> {
    (w > MAX_SIDE || h > MAX_SIDE).then(|| {
        format!(
            "Cut: the area is {}×{} px; only its first {}×{} px were captured (a larger image is refused by model \
             APIs). Use clip, an element target, or scroll to see the rest.",
            w.round(),
            h.round(),
            w.min(MAX_SIDE).round(),
            h.min(MAX_SIDE).round()
        )
    })
}

/// Deletes a profile folder; one that is not there is already clear.
fn remove_profile(dir: &std::path::Path) -> Result<(), BrowserError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(BrowserError::Other(format!("cannot clear {}: {e}", dir.display())))
        }
        _ => Ok(()),
    }
}

/// `*`-globs match anything; otherwise the URL must contain `want`.
fn url_matches(url: &str, want: &str) -> bool {
    if !want.contains('*') {
        return url.contains(want);
    }
    let parts: Vec<&str> = want.split('*').collect();
    let mut rest = url;
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() {
            continue;
        }
        match rest.find(p) {
            Some(at) if i > 0 || at == 0 => rest = &rest[at + p.len()..],
            _ => return false,
        }
    }
    parts.last().is_none_or(|l| l.is_empty() || url.ends_with(l))
}

fn file_names(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| std::path::Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        .collect()
}

fn target(args: &BrowserArgs) -> Result<&Target, BrowserError> {
    args.target.as_ref().ok_or_else(|| BrowserError::Other(format!("`{}` needs `target`", args.action.as_str())))
}

/// [`point`] for an element, waiting up to `wait` for one that is missing, hidden, disabled or
/// covered to become actionable (a button enabled a moment later, a list still rendering).
async fn point_within(tab: &Tab, t: &Target, wait: Option<Duration>) -> Result<(String, f64, f64), BrowserError> {
    let start = Instant::now();
    let wait = wait.unwrap_or_default();
    loop {
        match point(tab, t, true).await {
            Err(BrowserError::NoMatch(m) | BrowserError::NotActionable(m)) if start.elapsed() < wait => {
                if tab.shared.lock().dialog.is_some() {
                    return Err(BrowserError::NotActionable(m));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(BrowserError::NoMatch(m)) if !wait.is_zero() => {
                return Err(BrowserError::NoMatch(format!("{m} (waited {} ms)", wait.as_millis())));
            }
            Err(BrowserError::NotActionable(m)) if !wait.is_zero() => {
                return Err(BrowserError::NotActionable(format!("{m} (waited {} ms)", wait.as_millis())));
            }
            other => return other,
        }
    }
}

/// The point to act on: an element's centre, or coordinates checked against the latest screenshot.
async fn point(tab: &Tab, t: &Target, enabled: bool) -> Result<(String, f64, f64), BrowserError> {
    if let (Some(x), Some(y), Some(sid)) = (t.x, t.y, &t.screenshot_id) {
        let shot = tab.shared.lock().shot.clone();
        let Some(shot) = shot else {
            return Err(BrowserError::StaleScreenshot(format!(
                "no viewport screenshot of tab {} is current; take one and use its id",
                tab.id
            )));
        };
        if &shot.id != sid {
            return Err(BrowserError::StaleScreenshot(format!(
                "screenshot {sid} is not the latest of tab {} (that is {}); coordinates are read from the latest one",
                tab.id, shot.id
            )));
        }
        let (url, scroll) = place(tab).await;
        if url != shot.url {
            return Err(BrowserError::StaleScreenshot(format!(
                "the page changed since screenshot {sid} (now {url}); take a new screenshot"
            )));
        }
        if scroll != shot.scroll {
            return Err(BrowserError::StaleScreenshot(format!(
                "the page was scrolled since screenshot {sid} (from ({}, {}) to ({}, {})), so its points show other \
                 places now; take a new screenshot",
                shot.scroll.0, shot.scroll.1, scroll.0, scroll.1
            )));
        }
        if x < 0.0 || y < 0.0 || x > shot.width || y > shot.height {
            return Err(BrowserError::StaleScreenshot(format!(
                "({x}, {y}) is outside screenshot {sid} ({}×{})",
                shot.width, shot.height
            )));
        }
        // Mouse events take CSS pixels of the page's viewport.
        return Ok((format!("the point ({x}, {y}) of {sid}"), x * shot.scale.0, y * shot.scale.1));
    }
    actions::point_of(tab, t, enabled).await
}

/// The page's URL and scroll position, which a screenshot's points depend on.
async fn place(tab: &Tab) -> (String, (f64, f64)) {
    let v = eval(tab, "[location.href, window.scrollX, window.scrollY]").await.unwrap_or(Value::Null);
    let at = |i: usize| v.get(i).and_then(Value::as_f64).unwrap_or(0.0);
    (v.get(0).and_then(Value::as_str).unwrap_or("").to_string(), (at(1), at(2)))
}

/// Width and height of a PNG image, from its header.
fn png_size(png: &[u8]) -> Option<(f64, f64)> {
    let w = u32::from_be_bytes(png.get(16..20)?.try_into().ok()?);
    let h = u32::from_be_bytes(png.get(20..24)?.try_into().ok()?);
    (png.starts_with(b"\x89PNG") && w > 0 && h > 0).then_some((f64::from(w), f64::from(h)))
}

async fn viewport_size(tab: &Tab) -> Result<(f64, f64), BrowserError> {
    let v = eval(tab, "[innerWidth, innerHeight]").await?;
    Ok((v.get(0).and_then(Value::as_f64).unwrap_or(0.0), v.get(1).and_then(Value::as_f64).unwrap_or(0.0)))
}

async fn before(tab: &Tab, r: &Running) -> Before {
    let v = eval(tab, "[location.href, document.title]").await.unwrap_or(Value::Null);
    Before {
        url: v.get(0).and_then(Value::as_str).unwrap_or("").to_string(),
        title: v.get(1).and_then(Value::as_str).unwrap_or("").to_string(),
        console_seen: tab.shared.lock().console_seen,
        tabs: r.tabs.len(),
        downloads: r.downloads.lock().map(|d| d.len()).unwrap_or(0),
    }
}

/// Takes a snapshot; refs issued in it are the only valid ones afterwards (B4). Cross-origin
/// frames are snapshotted in their own documents and spliced in where their iframe is.
pub(crate) async fn take_snapshot(tab: &Tab) -> Result<(String, String, String), BrowserError> {
    tab.shared.lock().snapshot_gen += 1;
    let top = FrameCtx::top(tab);
    let v = snapshot_of(tab, &top).await?;
    tab.shared.lock().snapshot_taken = true;
    let text = v.get("text").and_then(Value::as_str).unwrap_or("").to_string();
    let text = if v.get("cross").and_then(Value::as_u64).unwrap_or(0) > 0 {
        splice_frames(tab, &top, text, 1).await
    } else {
        text
    };
    Ok((
        v.get("url").and_then(Value::as_str).unwrap_or("").to_string(),
        v.get("title").and_then(Value::as_str).unwrap_or("").to_string(),
        text,
    ))
}

/// One document's snapshot, with refs numbered on from where that document's last one ended.
async fn snapshot_of(tab: &Tab, frame: &FrameCtx) -> Result<Value, BrowserError> {
    let start = {
        let d = tab.shared.lock();
        match frame.key {
            None => d.next_ref,
            Some(k) => d.frames.iter().find(|f| f.key == k).map_or(1, |f| f.next_ref),
        }
        .max(1)
    };
    let prefix = serde_json::to_string(&frame.prefix()).unwrap_or_else(|_| "\"\"".into());
    let script = format!("(() => {{ const K = {}; return K.snapshot({start}, {prefix}); }})()", actions::PAGE_JS);
    let v = actions::eval_in(tab, frame, &script).await?;
    let next = v.get("next").and_then(Value::as_u64).unwrap_or(start);
    let mut d = tab.shared.lock();
    let generation = d.snapshot_gen;
    match frame.key {
        None => d.next_ref = next,
        Some(k) => {
            if let Some(f) = d.frames.iter_mut().find(|f| f.key == k) {
                f.next_ref = next;
                f.seen_in = generation;
            }
        }
    }
    Ok(v)
}

/// Replaces each cross-origin frame marker of `parent`'s snapshot with that frame's snapshot.
fn splice_frames<'a>(
    tab: &'a Tab,
    parent: &'a FrameCtx,
    text: String,
    depth: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send + 'a>> {
    Box::pin(async move {
        let mut out = Vec::new();
        for line in text.lines() {
            let trimmed = line.trim_start_matches(' ');
            let Some(index) = trimmed.strip_prefix('\u{1}') else {
                out.push(line.to_string());
                continue;
            };
            let indent = &line[..line.len() - trimmed.len()];
            let inner = async {
                if depth > crate::frames::MAX_DEPTH {
                    return Err(BrowserError::Other("frames nested too deep".into()));
                }
                let frame =
                    crate::frames::child_by_expression(tab, parent, &format!("window.__kodik.cross[{index}]")).await?;
                let v = snapshot_of(tab, &frame).await?;
                let text = v.get("text").and_then(Value::as_str).unwrap_or("").to_string();
                let text = if v.get("cross").and_then(Value::as_u64).unwrap_or(0) > 0 {
                    splice_frames(tab, &frame, text, depth + 1).await
                } else {
                    text
                };
                Ok::<_, BrowserError>((
                    frame.prefix(),
                    v.get("url").and_then(Value::as_str).unwrap_or("").to_string(),
                    text,
                ))
            };
            match inner.await {
                Ok((key, url, text)) => {
                    out.push(format!("{indent}- document [frame={key}] [url={url}]"));
                    out.extend(text.lines().map(|l| format!("{indent}  {l}")));
                }
                Err(e) => out.push(format!("{indent}- text: (cross-origin frame not inspected: {e})")),
            }
        }
        out.join("\n")
    })
}

async fn inspect(tab: &Tab, t: &Target) -> Result<ToolOutput, BrowserError> {
    let v = with_element(
        tab,
        t,
        json!({}),
        r#"
        const s = getComputedStyle(el);
        const keep = ['display','position','visibility','opacity','color','background-color','font-size','font-weight','width','height','margin','padding','border','overflow','z-index','cursor','pointer-events'];
        const styles = {}; for (const k of keep) styles[k] = s.getPropertyValue(k);
        const b = K.box(el);
        const html = el.outerHTML;
        return { desc: K.describe(el), html: html.length > 4000 ? html.slice(0, 4000) + '… (' + (html.length - 4000) + ' more characters)' : html,
                 styles, box: { x: Math.round(b.x), y: Math.round(b.y), width: Math.round(b.width), height: Math.round(b.height) },
                 visible: K.visible(el), disabled: K.disabled(el) };
        "#,
    )
    .await?;
    let mut rep = Report::new(format!("Inspected {}:", v.get("desc").and_then(Value::as_str).unwrap_or("the element")));
    rep.line(format!("Box: {}", v.get("box").cloned().unwrap_or(Value::Null)));
    rep.line(format!(
        "Visible: {}, disabled: {}",
        v.get("visible").cloned().unwrap_or(Value::Null),
        v.get("disabled").cloned().unwrap_or(Value::Null)
    ));
    if let Some(Value::Object(styles)) = v.get("styles") {
        let s: Vec<String> = styles.iter().map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or(""))).collect();
        rep.line(format!("Styles: {}", s.join("; ")));
    }
    rep.line("HTML:".to_string());
    rep.line(v.get("html").and_then(Value::as_str).unwrap_or("").to_string());
    Ok(rep.into_output())
}

async fn diagnostics(r: &Running, limit: usize) -> Result<ToolOutput, BrowserError> {
    let tab = r.tab(None)?;
    let perf = eval(
        tab,
        r#"(() => { const n = performance.getEntriesByType('navigation')[0]; const res = performance.getEntriesByType('resource');
           const imgs = Array.from(document.images); return {
           timing: n ? { dom_content_loaded_ms: Math.round(n.domContentLoadedEventEnd), load_ms: Math.round(n.loadEventEnd), transfer_bytes: n.transferSize } : null,
           resources: res.length, resource_bytes: res.reduce((a, r) => a + (r.transferSize || 0), 0),
           broken_images: imgs.filter((i) => i.complete && i.naturalWidth === 0).map((i) => i.currentSrc || i.src).slice(0, 20),
           stylesheets: document.styleSheets.length, scripts: document.scripts.length }; })()"#,
    )
    .await
    .unwrap_or(Value::Null);
    let d = tab.shared.lock();
    let mut rep = Report::new(format!("Diagnostics of tab {}:", tab.id));
    rep.line(format!("Page errors ({}):", d.errors.len()));
    for e in d.errors.iter().skip(d.errors.len().saturating_sub(limit)) {
        rep.line(format!("- {}", clip_chars(e, 500)));
    }
    let failed = d.failures();
    rep.line(format!("Failed requests ({}):", failed.len()));
    for e in failed.iter().skip(failed.len().saturating_sub(limit)) {
        rep.line(format!("- {}", clip_chars(e, 500)));
    }
    rep.line(format!("Requests: {} sent, {} in flight{}", d.requests, d.inflight.len(), in_flight(&d)));
    rep.line(format!("Performance and assets: {perf}"));
    rep.meta.insert("errors".into(), json!(d.errors.len()));
    rep.meta.insert("failed_requests".into(), json!(d.failed.len()));
    Ok(rep.into_output())
}

/// "; in flight: GET http://…, …" naming the requests still waiting for an answer (a few).
fn in_flight(d: &crate::session::TabData) -> String {
    if d.inflight.is_empty() {
        return String::new();
    }
    let mut names: Vec<String> = d.inflight.iter().map(|id| clip_chars(&d.request_name(id), 200)).collect();
    names.sort();
    let more = names.len().saturating_sub(5);
    names.truncate(5);
    format!("; in flight: {}{}", names.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() })
}

/// The tabs as the browser lists them: asking each page would wait on a busy or navigating one.
async fn list_tabs(r: &Running) -> Report {
    use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
    let infos = tokio::time::timeout(Duration::from_secs(5), r.browser.execute(GetTargetsParams::default()))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|res| res.result.target_infos)
        .unwrap_or_default();
    let mut rep = Report::new(format!("{} tab(s):", r.tabs.len()));
    for t in &r.tabs {
        let (title, url) = infos
            .iter()
            .find(|i| &i.target_id == t.page.target_id())
            .map(|i| (i.title.clone(), i.url.clone()))
            .unwrap_or_else(|| (String::new(), t.last_url.clone()));
        // A page without a title is listed by its URL.
        let title = if title == url { String::new() } else { title };
        rep.line(format!(
            "- {}{}: {title:?} {url}{}",
            t.id,
            if r.current.as_deref() == Some(t.id.as_str()) { " (current)" } else { "" },
            t.opener.as_ref().map(|o| format!(" (opened by {o})")).unwrap_or_default()
        ));
    }
    rep
}

async fn origin_of(tab: &Tab) -> Result<String, BrowserError> {
    match eval(tab, "location.origin").await? {
        Value::String(s) => Ok(s),
        _ => Err(BrowserError::Other("the page has no origin".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::BrowserOptions;
    use kodik_core::Tool;

    /// G2: a fill and a click of one response share one resource, so the scheduler runs them in
    /// the model's order instead of at once (the click could land before the fill).
    #[test]
    fn g2_every_action_declares_the_session_so_calls_keep_model_order() {
        let tool = BrowserTool::new(Arc::new(BrowserSession::new(BrowserOptions::default())));
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let fill = json!({"action": "fill", "target": {"label": "Name"}, "value": "Ada"});
        let click = json!({"action": "click", "target": {"role": "button", "name": "Greet"}});
        let snapshot = json!({"action": "snapshot"});
        let of = |args: &Value| Tool::resources(&tool, args, &ws);
        assert_eq!(of(&fill), vec![Resource::Session("browser".into())]);
        assert_eq!(of(&fill), of(&click));
        assert_eq!(of(&click), of(&snapshot));
    }
}
