//! Page-level building blocks of the actions: evaluating the injected helper, locating targets,
//! real mouse and keyboard input, waiting for the page to settle.

use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::input::{DispatchKeyEventParams, DispatchMouseEventParams};
use chromiumoxide::cdp::browser_protocol::page::{NavigateParams, ReloadParams, StopLoadingParams};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use kodik_core::CancellationToken;
use kodik_schema::browser::Target;
use serde_json::{Value, json};

use crate::error::{BrowserError, cdp};
use crate::frames::{self, FrameCtx};
use crate::session::Tab;

/// The helper installed in each document (see page.js).
pub(crate) const PAGE_JS: &str = include_str!("page.js");

/// `s` cut to at most `max` characters, with a marker when cut.
pub(crate) fn clip_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} more characters)", &s[..i], s[i..].chars().count()),
        None => s.to_string(),
    }
}

/// Evaluates `expression` in the tab's page and returns its JSON value. Stops early when a
/// JavaScript dialog opens, since the page is frozen until it is answered.
pub(crate) async fn eval(tab: &Tab, expression: &str) -> Result<Value, BrowserError> {
    eval_in(tab, &FrameCtx::top(tab), expression).await
}

/// [`eval`] in one document of the tab: the top page or a cross-origin frame.
pub(crate) async fn eval_in(tab: &Tab, frame: &FrameCtx, expression: &str) -> Result<Value, BrowserError> {
    let mut params =
        EvaluateParams::builder().expression(expression).return_by_value(true).await_promise(true).user_gesture(false);
    if let Some(c) = frame.context {
        params = params.context_id(c);
    }
    let params = params.build().map_err(|e| BrowserError::Other(format!("cannot build the evaluation: {e}")))?;
    if matches!(frame.page, crate::raw::Session::Page(_)) {
        wait_committed(tab).await?;
    }
    let run = frame.page.execute(params);
    let mut dialog = tab.shared.dialog_opened.subscribe();
    dialog.mark_unchanged();
    if let Some(d) = tab.shared.lock().dialog.clone() {
        return Err(dialog_error(tab, &d));
    }
    if tab.shared.lock().closed {
        return Err(BrowserError::Other(format!("tab {} was closed", tab.id)));
    }
    if tab.shared.lock().crashed {
        return Err(crashed(tab));
    }
    let res = tokio::select! {
        r = run => r?,
        _ = tokio::time::sleep(EVAL_LIMIT) => {
            return Err(BrowserError::Unresponsive(format!(
                "the page of tab {} did not answer within {} s (busy script or hung renderer)", tab.id, EVAL_LIMIT.as_secs()
            )));
        }
        _ = dialog.changed() => {
            let (d, closed, crash) = { let s = tab.shared.lock(); (s.dialog.clone(), s.closed, s.crashed) };
            return Err(match d {
                Some(d) => dialog_error(tab, &d),
                None if closed => BrowserError::Other(format!("tab {} was closed", tab.id)),
                None if crash => crashed(tab),
                None => BrowserError::Other("a dialog opened and closed".into()),
            });
        }
    };
    if let Some(ex) = &res.exception_details {
        let text = ex.exception.as_ref().and_then(|e| e.description.clone()).unwrap_or_else(|| ex.text.clone());
        return Err(BrowserError::Other(format!("the page's script failed: {}", text.lines().next().unwrap_or(""))));
    }
    Ok(res.result.value.clone().unwrap_or(Value::Null))
}

/// The longest a single evaluation may take; waits poll with short evaluations instead.
const EVAL_LIMIT: Duration = Duration::from_secs(15);

/// Waits (at most [`EVAL_LIMIT`]) for a pending top-level navigation to commit: until it does,
/// Chromium answers no evaluation in the tab's page.
async fn wait_committed(tab: &Tab) -> Result<(), BrowserError> {
    let start = Instant::now();
    loop {
        let nav = {
            let d = tab.shared.lock();
            if d.dialog.is_some() || d.closed || d.crashed {
                return Ok(());
            }
            d.navigating.clone()
        };
        let Some(nav) = nav else { return Ok(()) };
        if start.elapsed() >= EVAL_LIMIT {
            return Err(BrowserError::Unresponsive(format!(
                "tab {} is still waiting for {} to answer (for {} s); wait for it, or navigate elsewhere",
                tab.id,
                nav.url,
                nav.since.elapsed().as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

fn crashed(tab: &Tab) -> BrowserError {
    BrowserError::Other(format!(
        "the page of tab {} crashed (its renderer is gone); the next action reloads it at its last URL",
        tab.id
    ))
}

pub(crate) fn dialog_error(tab: &Tab, d: &crate::session::Dialog) -> BrowserError {
    BrowserError::DialogOpen {
        kind: d.kind.clone(),
        tab: tab.id.clone(),
        message: d.message.clone(),
        prompt: if d.kind == "prompt" { ", prompt_text: the answer" } else { "" },
    }
}

/// Runs `body` (JavaScript with `K`, `el` and `args` in scope, returning a JSON-able value)
/// against the element `target` names. Locator errors become the matching [`BrowserError`].
pub(crate) async fn with_element(tab: &Tab, target: &Target, args: Value, body: &str) -> Result<Value, BrowserError> {
    Ok(with_element_in(tab, target, args, body).await?.0)
}

/// [`with_element`], also returning the document the element is in: a ref such as `f2e5` or a
/// locator whose `frame` is cross-origin runs in that frame.
pub(crate) async fn with_element_in(
    tab: &Tab,
    target: &Target,
    args: Value,
    body: &str,
) -> Result<(Value, FrameCtx), BrowserError> {
    let top = FrameCtx::top(tab);
    // `frame: "f2"` names a cross-origin frame by the key the snapshot shows for it.
    let frame_key = target.frame.as_deref().and_then(|f| known_frame_key(tab, f));
    let (frame, target) = match (target.reference.as_deref().and_then(frames::key_of_ref), frame_key) {
        (Some(key), _) => (frames::by_key(tab, key, target.reference.as_deref().unwrap_or("")).await?, target.clone()),
        (None, Some(key)) => {
            (frames::by_key(tab, key, &format!("f{key}")).await?, Target { frame: None, ..target.clone() })
        }
        (None, None) => {
            // A locator without `frame` searches the top page (and its same-origin frames); an
            // equal element in a cross-origin frame makes it as ambiguous as two on one page.
            if target.reference.is_none() && target.x.is_none() {
                let elsewhere = frame_matches(tab, target).await;
                if !elsewhere.is_empty()
                    && let Ok(v) = run_on_element(tab, &top, target, &json!({}), DESCRIBE).await
                {
                    let here = v.get("desc").and_then(Value::as_str).unwrap_or("an element").to_string();
                    let there: Vec<String> = elsewhere.iter().map(|(k, d)| format!("{d} (in frame f{k})")).collect();
                    return Err(BrowserError::Ambiguous(format!(
                        "{} elements match the target: {here}, {}; a ref, or \"frame\" in the target, picks one",
                        there.len() + 1,
                        there.join(", ")
                    )));
                }
            }
            (top, target.clone())
        }
    };
    let target = &target;
    let v = match run_on_element(tab, &frame, target, &args, body).await {
        Err(BrowserError::NoMatch(m))
            if frame.key.is_none() && target.frame.is_none() && target.reference.is_none() =>
        {
            return Err(BrowserError::NoMatch(match in_frames(tab, target).await {
                Some(hint) => format!("{m}; {hint}"),
                None => m,
            }));
        }
        other => other?,
    };
    if v.get("__error").and_then(Value::as_str) != Some("xframe") {
        return Ok((v, frame));
    }
    // The locator's `frame` named a cross-origin iframe: look for the element inside it.
    let inner = frames::child_by_expression(tab, &frame, "window.__kodik.crossHit").await?;
    let within = Target { frame: None, ..target.clone() };
    let v = run_on_element(tab, &inner, &within, &args, body).await?;
    Ok((v, inner))
}

/// The key of a cross-origin frame of the latest snapshot named as `f2`.
fn known_frame_key(tab: &Tab, name: &str) -> Option<u32> {
    let key: u32 = name.strip_prefix('f')?.parse().ok()?;
    let d = tab.shared.lock();
    d.frames.iter().any(|f| f.key == key && f.seen_in == d.snapshot_gen).then_some(key)
}

/// Where a target the top document does not have is, among the cross-origin frames of the latest
/// snapshot: a locator without `frame` does not reach into them.
async fn in_frames(tab: &Tab, target: &Target) -> Option<String> {
    let found: Vec<String> = frame_matches(tab, target)
        .await
        .into_iter()
        .map(|(key, desc)| {
            format!("{desc} is inside frame f{key}; add \"frame\": \"f{key}\" to the target or use its ref")
        })
        .collect();
    (!found.is_empty()).then(|| found.join("; "))
}

const DESCRIBE: &str = "return { desc: K.describe(el) };";

/// The cross-origin frames of the latest snapshot holding an element `target` matches, with it.
async fn frame_matches(tab: &Tab, target: &Target) -> Vec<(u32, String)> {
    let keys: Vec<u32> = {
        let d = tab.shared.lock();
        d.frames.iter().filter(|f| f.seen_in == d.snapshot_gen).map(|f| f.key).collect()
    };
    let mut found = Vec::new();
    for key in keys {
        let Ok(frame) = frames::by_key(tab, key, &format!("f{key}")).await else { continue };
        if let Ok(v) = run_on_element(tab, &frame, target, &json!({}), DESCRIBE).await
            && let Some(desc) = v.get("desc").and_then(Value::as_str)
        {
            found.push((key, desc.to_string()));
        }
    }
    found
}

async fn run_on_element(
    tab: &Tab,
    frame: &FrameCtx,
    target: &Target,
    args: &Value,
    body: &str,
) -> Result<Value, BrowserError> {
    let t = json!({
        "ref": target.reference, "role": target.role, "name": target.name, "label": target.label,
        "placeholder": target.placeholder, "text": target.text, "test_id": target.test_id,
        "href": target.href, "css": target.css, "frame": target.frame,
    });
    let script = format!(
        "(async () => {{ const K = {PAGE_JS}; const args = {args}; const __r = K.locate({t}); \
         if (__r.error) return {{ __error: __r.error, detail: __r.detail }}; const el = __r.el; {body} }})()"
    );
    let v = eval_in(tab, frame, &script).await?;
    if let Some(kind) = v.get("__error").and_then(Value::as_str)
        && kind != "xframe"
    {
        let detail = v.get("detail").and_then(Value::as_str).unwrap_or("").to_string();
        return Err(match kind {
            "stale" => BrowserError::StaleRef(detail),
            "ambiguous" => BrowserError::Ambiguous(detail),
            "none" | "frame" | "css" => BrowserError::NoMatch(detail),
            _ => BrowserError::NotActionable(detail),
        });
    }
    Ok(v)
}

/// Scrolls the element into view and returns its description and centre in viewport
/// coordinates, refusing hidden, disabled (when `enabled`) or covered elements.
pub(crate) async fn point_of(tab: &Tab, target: &Target, enabled: bool) -> Result<(String, f64, f64), BrowserError> {
    let (v, frame) = with_element_in(
        tab,
        target,
        json!({ "enabled": enabled }),
        r#"
        const desc = K.describe(el);
        el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
        if (!K.visible(el)) return { __error: 'actionable', detail: desc + ' is not visible' };
        if (args.enabled && K.disabled(el)) return { __error: 'actionable', detail: desc + ' is disabled' };
        const b = K.box(el);
        const x = b.x + b.width / 2, y = b.y + b.height / 2;
        const r = el.getBoundingClientRect();
        const root = el.getRootNode();
        const hit = root.elementFromPoint ? root.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) : null;
        if (hit && hit !== el && !el.contains(hit) && !(hit.shadowRoot && hit.contains(el)) && !(el.labels && Array.from(el.labels).some((l) => l === hit || l.contains(hit))))
          return { __error: 'actionable', detail: desc + ' is covered by ' + K.describe(hit) };
        return { desc, x, y };
        "#,
    )
    .await?;
    let desc = v.get("desc").and_then(Value::as_str).unwrap_or("the element").to_string();
    let (dx, dy) = frame.offset().await?;
    let x = v.get("x").and_then(Value::as_f64).unwrap_or(0.0) + dx;
    let y = v.get("y").and_then(Value::as_f64).unwrap_or(0.0) + dy;
    Ok((desc, x, y))
}

fn mouse_params(
    kind: &str,
    x: f64,
    y: f64,
    button: &str,
    clicks: i64,
    modifiers: i64,
) -> Result<DispatchMouseEventParams, BrowserError> {
    serde_json::from_value(json!({
        "type": kind, "x": x, "y": y, "button": button, "clickCount": clicks, "modifiers": modifiers,
        "buttons": if kind == "mousePressed" || (kind == "mouseMoved" && button != "none") { 1 } else { 0 },
    }))
    .map_err(|e| BrowserError::Other(format!("cannot build a mouse event: {e}")))
}

/// Sends one mouse event; a dialog that opens in its handler ends the wait (the page is frozen).
pub(crate) async fn mouse(
    tab: &Tab,
    kind: &str,
    x: f64,
    y: f64,
    button: &str,
    clicks: i64,
    modifiers: i64,
) -> Result<(), BrowserError> {
    let params = mouse_params(kind, x, y, button, clicks, modifiers)?;
    let mut dialog = tab.shared.dialog_opened.subscribe();
    dialog.mark_unchanged();
    tokio::select! {
        r = tokio::time::timeout(INPUT_LIMIT, tab.page.execute(params)) => match r {
            Ok(r) => { r.map_err(cdp("send a mouse event"))?; }
            Err(_) => return Err(frozen(tab, "the mouse")),
        },
        _ = dialog.changed() => {}
    }
    Ok(())
}

/// How long the page may take to handle one input event: Chromium answers the event once the
/// page's handlers ran, and a handler that runs this long has frozen the page.
const INPUT_LIMIT: Duration = Duration::from_secs(5);

fn frozen(tab: &Tab, what: &str) -> BrowserError {
    BrowserError::Unresponsive(format!(
        "the page of tab {} did not handle {what} within {} s: a script keeps it busy (the page is frozen). \
         close_tab or navigate elsewhere to get out of it",
        tab.id,
        INPUT_LIMIT.as_secs()
    ))
}

/// A real click (pressed and released) at a viewport point, so the page sees a user gesture.
pub(crate) async fn click_at(
    tab: &Tab,
    x: f64,
    y: f64,
    button: &str,
    clicks: i64,
    modifiers: i64,
) -> Result<(), BrowserError> {
    mouse(tab, "mouseMoved", x, y, "none", 0, modifiers).await?;
    for n in 1..=clicks {
        mouse(tab, "mousePressed", x, y, button, n, modifiers).await?;
        if tab.shared.lock().dialog.is_some() {
            return Ok(());
        }
        mouse(tab, "mouseReleased", x, y, button, n, modifiers).await?;
        if tab.shared.lock().dialog.is_some() {
            return Ok(());
        }
    }
    Ok(())
}

/// Drags with the mouse from `from` to `to`. When the page starts an HTML5 drag (draggable
/// elements, DataTransfer), Chrome hands it to us and the drop is dispatched as drag events, as a
/// user's would be; otherwise the mouse events are the drag. Returns whether it was HTML5.
pub(crate) async fn drag(tab: &Tab, from: (f64, f64), to: (f64, f64)) -> Result<bool, BrowserError> {
    use chromiumoxide::cdp::browser_protocol::input::{
        DispatchDragEventParams, EventDragIntercepted, SetInterceptDragsParams,
    };
    use futures_util::StreamExt;
    let mut intercepted = tab.page.event_listener::<EventDragIntercepted>().await.map_err(cdp("watch for a drag"))?;
    tab.page.execute(SetInterceptDragsParams::new(true)).await.map_err(cdp("intercept drags"))?;
    let result = async {
        mouse(tab, "mouseMoved", from.0, from.1, "none", 0, 0).await?;
        mouse(tab, "mousePressed", from.0, from.1, "left", 1, 0).await?;
        let mut data = None;
        for i in 1..=10 {
            let f = f64::from(i) / 10.0;
            mouse(tab, "mouseMoved", from.0 + (to.0 - from.0) * f, from.1 + (to.1 - from.1) * f, "left", 0, 0).await?;
            if data.is_none()
                && let Ok(Some(e)) =
                    tokio::time::timeout(Duration::from_millis(if i == 1 { 150 } else { 5 }), intercepted.next()).await
            {
                data = Some(e.data.clone());
            }
        }
        let Some(data) = data else {
            mouse(tab, "mouseReleased", to.0, to.1, "left", 1, 0).await?;
            return Ok(false);
        };
        for kind in ["dragEnter", "dragOver", "drop"] {
            let params: DispatchDragEventParams = serde_json::from_value(json!({
                "type": kind, "x": to.0, "y": to.1, "data": data, "modifiers": 0,
            }))
            .map_err(|e| BrowserError::Other(format!("cannot build a drag event: {e}")))?;
            tab.page.execute(params).await.map_err(cdp("drop"))?;
        }
        mouse(tab, "mouseReleased", to.0, to.1, "left", 1, 0).await?;
        Ok(true)
    }
    .await;
    let _ = tab.page.execute(SetInterceptDragsParams::new(false)).await;
    result
}

/// Modifier bits of CDP input events.
pub(crate) fn modifier_bit(name: &str) -> Option<i64> {
    match name.to_ascii_lowercase().as_str() {
        "alt" | "option" => Some(1),
        "control" | "ctrl" => Some(2),
        "meta" | "command" | "cmd" | "controlormeta" => Some(4),
        "shift" => Some(8),
        _ => None,
    }
}

/// Presses a key or combination such as `Enter` or `Control+A` in the focused element.
pub(crate) async fn press(tab: &Tab, combo: &str) -> Result<(), BrowserError> {
    // `+` alone or at the end (`Control++`) is the plus key.
    let mut parts: Vec<&str> = combo.split('+').collect();
    if combo.ends_with("++") || combo == "+" {
        parts.retain(|p| !p.is_empty());
        parts.push("+");
    }
    let (key, mods) = parts.split_last().ok_or_else(|| BrowserError::Other("empty key".into()))?;
    let mut modifiers = 0;
    for m in mods {
        modifiers |= modifier_bit(m).ok_or_else(|| {
            BrowserError::NotActionable(format!(
                "`{m}` in `{combo}` is not a modifier; use Control, Alt, Shift or Meta joined with +"
            ))
        })?;
    }
    let key = match key.to_ascii_lowercase().as_str() {
        "esc" => "Escape",
        "space" => " ",
        "return" => "Enter",
        "up" => "ArrowUp",
        "down" => "ArrowDown",
        "left" => "ArrowLeft",
        "right" => "ArrowRight",
        "del" => "Delete",
        _ => key,
    };
    // Shift held on a character key types its shifted character, as on a US keyboard.
    let shifted = (modifiers & 8 != 0).then(|| shifted(key)).flatten();
    let key = shifted.as_deref().unwrap_or(key);
    let def = chromiumoxide::keys::USKEYBOARD_LAYOUT.iter().find(|d| d.key == key).ok_or_else(|| {
        BrowserError::NotActionable(format!(
            "unknown key `{key}`; use names like Enter, Tab, Escape, Backspace, ArrowDown, a, A, 1"
        ))
    })?;
    let text = if modifiers & (1 | 2 | 4) != 0 {
        None
    } else if def.key == "Enter" {
        Some("\r".to_string())
    } else {
        def.text.map(str::to_string).or_else(|| (def.key.chars().count() == 1).then(|| def.key.to_string()))
    };
    // Editing shortcuts are browser commands: a synthetic Control+A types nothing on Linux.
    let command = if modifiers & 2 != 0 {
        match def.key.to_ascii_lowercase().as_str() {
            "a" => Some("selectAll"),
            "c" => Some("copy"),
            "x" => Some("cut"),
            "v" => Some("paste"),
            "z" => Some("undo"),
            _ => None,
        }
    } else {
        None
    };
    let down = json!({
        "type": if text.is_some() { "keyDown" } else { "rawKeyDown" },
        "key": def.key, "code": def.code, "windowsVirtualKeyCode": def.key_code, "nativeVirtualKeyCode": def.key_code,
        "modifiers": modifiers, "text": text, "unmodifiedText": text,
        "commands": command.map(|c| vec![c]).unwrap_or_default(),
    });
    let up = json!({
        "type": "keyUp", "key": def.key, "code": def.code, "windowsVirtualKeyCode": def.key_code,
        "nativeVirtualKeyCode": def.key_code, "modifiers": modifiers,
    });
    for ev in [down, up] {
        let params: DispatchKeyEventParams =
            serde_json::from_value(ev).map_err(|e| BrowserError::Other(format!("cannot build a key event: {e}")))?;
        let mut dialog = tab.shared.dialog_opened.subscribe();
        dialog.mark_unchanged();
        tokio::select! {
            r = tokio::time::timeout(INPUT_LIMIT, tab.page.execute(params)) => match r {
                Ok(r) => { r.map_err(cdp("press a key"))?; }
                Err(_) => return Err(frozen(tab, "the key")),
            },
            _ = dialog.changed() => { return Ok(()); }
        }
    }
    Ok(())
}

/// The character Shift makes of `key` on a US keyboard (`b` → `B`, `1` → `!`), if it changes.
fn shifted(key: &str) -> Option<String> {
    const PAIRS: &str = "1!2@3#4$5%6^7&8*9(0)-_=+[{]}\\|;:'\"`~,<.>/?";
    let mut chars = key.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else { return None };
    if c.is_ascii_lowercase() {
        return Some(c.to_ascii_uppercase().to_string());
    }
    let pairs: Vec<char> = PAIRS.chars().collect();
    pairs.chunks(2).find(|p| p[0] == c).map(|p| p[1].to_string())
}

/// Navigates the tab and waits (bounded) for the load event. A navigation that does not answer
/// within `timeout` is stopped, so the tab keeps its previous page and answers the next calls
/// (Chromium holds a page's evaluations while a navigation of it is pending).
pub(crate) async fn goto(tab: &Tab, url: &str, timeout: Duration) -> Result<(), BrowserError> {
    let current = tab.shared.lock().url.clone();
    check_url_from(url, current.as_deref())?;
    let start = Instant::now();
    let session = nav_session(tab).await?;
    let mut events = tab.shared.dialog_opened.subscribe();
    events.mark_unchanged();
    let res = tokio::select! {
        r = tokio::time::timeout(timeout, session.execute(NavigateParams::new(url))) => match r {
            Ok(r) => r.map_err(|e| BrowserError::Other(format!("cannot navigate to {url}: {e}")))?,
            Err(_) => {
                stop_loading(tab).await;
                return Err(BrowserError::Timeout {
                    what: format!("{url} to answer; the navigation was stopped and tab {} keeps its previous page", tab.id),
                    ms: timeout.as_millis() as u64,
                });
            }
        },
        _ = events.changed() => {
            let s = tab.shared.lock();
            if s.crashed {
                drop(s);
                return Err(crashed(tab));
            }
            // A beforeunload dialog or a closed tab: the caller reports it.
            return Ok(());
        }
    };
    if res.is_download == Some(true) {
        // Not a page: Chromium saves it (B8) and the tab keeps its page; the caller says so.
        let mut s = tab.shared.lock();
        s.navigating = None;
        s.download_nav = Some(url.to_string());
        return Ok(());
    }
    if let Some(err) = &res.error_text {
        return Err(BrowserError::Other(format!("{url} did not load: {err}")));
    }
    let loaded = wait_ready(tab, timeout.saturating_sub(start.elapsed())).await;
    if loaded.is_err() {
        // The error says it; the next result need not say it again.
        tab.shared.lock().note = None;
    }
    loaded
}

/// The tab's session on the second connection, for its navigations (see [`crate::raw`]).
async fn nav_session(tab: &Tab) -> Result<&crate::raw::Session, BrowserError> {
    tab.nav.get_or_try_init(|| async { tab.raw.get().await?.attach(tab.page.target_id().clone()).await }).await
}

/// Reloads the tab's page and waits for it as [`goto`] does: ready once its DOM is (a request that
/// never finishes does not hold it), stopped when it does not answer within `timeout`.
pub(crate) async fn reload(tab: &Tab, timeout: Duration) -> Result<(), BrowserError> {
    let start = Instant::now();
    let before = tab.shared.lock().loader.clone();
    let session = nav_session(tab).await?;
    let stopped = |tab: &Tab| BrowserError::Timeout {
        what: format!("the reload; it was stopped and tab {} keeps its page", tab.id),
        ms: timeout.as_millis() as u64,
    };
    match tokio::time::timeout(timeout, session.execute(ReloadParams::default())).await {
        Ok(r) => {
            r?;
        }
        Err(_) => {
            stop_loading(tab).await;
            return Err(stopped(tab));
        }
    }
    // Page.reload answers before the new document exists: until it does, the old one would
    // pass for the reloaded page.
    loop {
        let started = {
            let s = tab.shared.lock();
            s.navigating.is_some() || s.loader != before || s.dialog.is_some() || s.closed || s.crashed
        };
        if started {
            break;
        }
        if start.elapsed() >= timeout {
            stop_loading(tab).await;
            return Err(stopped(tab));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let loaded = wait_ready(tab, timeout.saturating_sub(start.elapsed())).await;
    if loaded.is_err() {
        tab.shared.lock().note = None;
    }
    loaded
}

/// Schemes a tab may be sent to; anything else is taken for a URL missing its scheme.
const SCHEMES: &[&str] = &["http", "https", "file", "about", "data", "blob", "chrome", "view-source"];

/// Refuses what is not a URL the browser can open, saying how to write it: without a scheme,
/// `localhost:3000/x` is read as scheme `localhost`, and Chromium neither loads nor refuses it.
pub(crate) fn check_url(url: &str) -> Result<(), BrowserError> {
    check_url_from(url, None)
}

/// `scheme://host[:port]` of an http(s) URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next().filter(|h| !h.is_empty())?;
    Some(format!("{scheme}://{host}"))
}

/// [`check_url`], suggesting for a relative URL the full one on `current`'s origin.
pub(crate) fn check_url_from(url: &str, current: Option<&str>) -> Result<(), BrowserError> {
    let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if scheme.is_some_and(|s| SCHEMES.contains(&s.to_ascii_lowercase().as_str())) {
        return Ok(());
    }
    // `localhost:3000/x` is a host and port; `javascript:x` or `mailto:x` a scheme not opened.
    if let Some(s) = scheme
        && !url[s.len() + 1..].starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(BrowserError::Other(format!(
            "`{url}` is a {s}: URL, which the browser does not open; it opens {} URLs{}",
            SCHEMES.join(", "),
            if s.eq_ignore_ascii_case("javascript") {
                " (act on the page with click, fill or press, and read it with eval)"
            } else {
                ""
            }
        )));
    }
    if url.starts_with('/') || url.starts_with("./") || url.starts_with("../") {
        let suggestion = match current.and_then(origin_of) {
            Some(origin) if url.starts_with('/') && !url.starts_with("//") => format!(", e.g. {origin}{url}"),
            _ => String::new(),
        };
        return Err(BrowserError::Other(format!(
            "`{url}` is a relative URL; give a full one with scheme and host{suggestion}"
        )));
    }
    let host_like = !url.is_empty() && !url.contains(char::is_whitespace);
    Err(BrowserError::Other(if host_like {
        format!("`{url}` is not a URL the browser can open: it needs a scheme, e.g. http://{url}")
    } else {
        format!("`{url}` is not a URL: give a full one such as http://localhost:3000/ or https://example.com/")
    }))
}

/// Refuses a `file:` URL (also inside `view-source:`) whose file is outside the workspace or
/// hidden by `.kodikignore`: the browser reads files as every file tool does, no further (B8, G16).
pub(crate) fn check_file_url(url: &str, workspace: &kodik_core::Workspace) -> Result<(), BrowserError> {
    let mut inner = url.trim();
    while let Some(rest) = strip_prefix_ci(inner, "view-source:") {
        inner = rest;
    }
    let Some(rest) = strip_prefix_ci(inner, "file:") else { return Ok(()) };
    // file:///p, file://localhost/p and file:/p all name /p; query and fragment are not the path.
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let at = after.find('/').unwrap_or(after.len());
            let host = &after[..at];
            if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
                return Err(BrowserError::Refused(format!(
                    "`{url}` names a file on another host; the browser opens files of the workspace only"
                )));
            }
            &after[at..]
        }
        None => rest,
    };
    let path = percent_decode(path);
    let resolved = workspace
        .check(if path.is_empty() { "/" } else { path.as_str() })
        .map_err(|e| BrowserError::Refused(format!("cannot open `{url}`: {e}")))?;
    // Chromium's listing of a folder would show the names .kodikignore hides.
    if resolved.is_dir() {
        return Err(BrowserError::Refused(format!(
            "`{url}` is a folder; the browser does not show folder listings (use glob to see what is in it)"
        )));
    }
    Ok(())
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// `%2F`-style escapes decoded (invalid ones kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |k: usize| b.get(k).and_then(|c| char::from(*c).to_digit(16));
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Stops the tab's pending navigation and loading (the browser's Stop button), bounded.
pub(crate) async fn stop_loading(tab: &Tab) {
    let _ = tokio::time::timeout(Duration::from_secs(2), tab.page.execute(StopLoadingParams::default())).await;
    tab.shared.lock().navigating = None;
}

/// How long a page that is ready to use (DOMContentLoaded) may take to fire `load` before a
/// navigation or action stops waiting for it: one request that never finishes (an image, a font,
/// a long poll) keeps `load` from ever firing, and the page is usable all the same.
const LOAD_GRACE: Duration = Duration::from_secs(5);

/// Waits until the document is fully loaded (`load` fired), bounded by `timeout`. A navigation
/// still waiting for its server at the end goes on: the wait is the model's, the navigation not.
pub(crate) async fn wait_load(tab: &Tab, timeout: Duration) -> Result<(), BrowserError> {
    wait_document(tab, timeout, false, false).await
}

/// Waits until the document is ready to use: loaded, or its DOM ready and `load` not come within
/// [`LOAD_GRACE`] (waited once per document; the next result says it is still loading). A
/// navigation still waiting for its server at the end is stopped: this is for the tool's own
/// navigations (`navigate`, `reload`, `back`), whose bound the model set.
pub(crate) async fn wait_ready(tab: &Tab, timeout: Duration) -> Result<(), BrowserError> {
    wait_document(tab, timeout, true, true).await
}

async fn wait_document(
    tab: &Tab,
    timeout: Duration,
    ready_is_enough: bool,
    stop_pending: bool,
) -> Result<(), BrowserError> {
    let start = Instant::now();
    let mut ready_at: Option<Instant> = None;
    loop {
        let (pending, waited_out) = {
            let s = tab.shared.lock();
            if s.dialog.is_some() || s.closed {
                return Ok(());
            }
            if s.crashed {
                return Err(crashed(tab));
            }
            (s.navigating.clone(), s.load_given_up.is_some() && s.load_given_up == s.loader)
        };
        // A navigation in progress destroys the context the check runs in; just ask again. A
        // page that does not answer must not hold the wait past its time.
        let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(50));
        if pending.is_none() {
            let state = "[document.readyState, !!(document.body && document.body.firstElementChild)]";
            let v = tokio::time::timeout(left, eval(tab, state)).await.ok().and_then(Result::ok).unwrap_or_default();
            let shown = v.get(1) == Some(&Value::Bool(true));
            match v.get(0).and_then(Value::as_str) {
                Some("complete") => return Ok(()),
                // DOM ready; or (given twice the time) a page whose HTML is still streaming but
                // already shows content: a stuck part of a streamed response never lets it end.
                Some(s @ ("interactive" | "loading")) if ready_is_enough && (s == "interactive" || shown) => {
                    if waited_out {
                        return Ok(());
                    }
                    let grace = if s == "interactive" { LOAD_GRACE } else { LOAD_GRACE * 2 };
                    if ready_at.get_or_insert_with(Instant::now).elapsed() >= grace {
                        give_up_load(tab, start.elapsed());
                        return Ok(());
                    }
                }
                _ => ready_at = None,
            }
        }
        if start.elapsed() >= timeout {
            let ms = timeout.as_millis() as u64;
            let pending = tab.shared.lock().navigating.clone();
            if let Some(nav) = pending.as_ref().filter(|_| !stop_pending) {
                return Err(BrowserError::Timeout {
                    what: format!(
                        "{} to answer; it goes on loading, and tab {} shows its previous page until it answers",
                        nav.url, tab.id
                    ),
                    ms,
                });
            }
            if let Some(nav) = pending {
                // Left pending, it would hold every later call on this tab.
                stop_loading(tab).await;
                let what = format!(
                    "{} to answer; the navigation was stopped and tab {} keeps its previous page",
                    nav.url, tab.id
                );
                tab.shared.lock().note = Some(format!("Timed out after {ms} ms waiting for {what}."));
                return Err(BrowserError::Timeout { what, ms });
            }
            if ready_at.is_some() {
                give_up_load(tab, start.elapsed());
                return Ok(());
            }
            return Err(BrowserError::Timeout { what: "the page to load".into(), ms });
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Stops waiting for the current document's `load`, and has the next result say so.
fn give_up_load(tab: &Tab, waited: Duration) {
    let mut s = tab.shared.lock();
    s.load_given_up = s.loader.clone();
    s.note = Some(format!(
        "The page is ready but has not finished loading after {:.1} s (a request that does not finish: an image, \
         font, script or long poll); what it still loads may change it.",
        waited.as_secs_f64()
    ));
}

/// After an action: let the page run its handlers and finish (within `bound`) a navigation the
/// action started. One whose server has not answered by then is left to go on, never stopped:
/// the page may already have acted on it (a form posted), so the caller says it is loading.
pub(crate) async fn settle(tab: &Tab, bound: Duration) {
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        eval(tab, "new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))"),
    )
    .await;
    let _ = wait_document(tab, bound, true, false).await;
}

/// How long an action waits for a navigation it started, unless its `timeout` is longer.
pub(crate) const SETTLE: Duration = Duration::from_secs(10);

/// Polls `check` every 50 ms until it yields `Some`, `timeout` passes, or `cancel` fires.
pub(crate) async fn poll<T, F, Fut>(
    what: &str,
    timeout: Duration,
    cancel: &CancellationToken,
    mut check: F,
) -> Result<T, BrowserError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, BrowserError>>,
{
    let start = Instant::now();
    loop {
        // One check may not outlast the wait (a frozen page answers no evaluation).
        let left = timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(100));
        let answered = match tokio::time::timeout(left, check()).await {
            Ok(r) => {
                if let Some(v) = r? {
                    return Ok(v);
                }
                true
            }
            Err(_) => false,
        };
        if start.elapsed() >= timeout {
            let what = if answered {
                what.to_string()
            } else {
                format!("{what}; the page did not answer (a script keeps it busy?)")
            };
            return Err(BrowserError::Timeout { what, ms: timeout.as_millis() as u64 });
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = cancel.cancelled() => return Err(BrowserError::Cancelled(what.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_url, shifted};

    #[test]
    fn b3_shift_gives_the_shifted_character_of_a_us_keyboard() {
        assert_eq!(shifted("b").as_deref(), Some("B"));
        assert_eq!(shifted("1").as_deref(), Some("!"));
        assert_eq!(shifted("/").as_deref(), Some("?"));
        assert_eq!(shifted("'").as_deref(), Some("\""));
        assert_eq!(shifted("\\").as_deref(), Some("|"));
        assert_eq!(shifted("B"), None);
        assert_eq!(shifted("Tab"), None);
    }

    #[test]
    fn b3_a_url_without_a_scheme_the_browser_opens_is_refused_with_the_fix() {
        for ok in
            ["http://localhost:3000/x", "https://example.com", "about:blank", "file:///tmp/a.html", "chrome://crash"]
        {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        let e = check_url("localhost:8765/form.html").unwrap_err().to_string();
        assert!(e.contains("e.g. http://localhost:8765/form.html"), "{e}");
        let e = check_url("example.com/page").unwrap_err().to_string();
        assert!(e.contains("e.g. http://example.com/page"), "{e}");
        let e = check_url("not a url").unwrap_err().to_string();
        assert!(e.contains("`not a url` is not a URL"), "{e}");
        // A scheme the browser does not open is named as such, not "missing its scheme".
        let e = check_url("javascript:alert(1)").unwrap_err().to_string();
        assert!(
            e.contains("is a javascript: URL, which the browser does not open") && !e.contains("http://javascript"),
            "{e}"
        );
        let e = check_url("mailto:a@b.c").unwrap_err().to_string();
        assert!(e.contains("is a mailto: URL"), "{e}");
        // A relative URL gets the full one on the current page's origin.
        let e = super::check_url_from("/popup.html", Some("http://127.0.0.1:8766/a/b.html")).unwrap_err().to_string();
        assert!(e.contains("relative URL") && e.contains("e.g. http://127.0.0.1:8766/popup.html"), "{e}");
        assert!(!e.contains("http:///"), "{e}");
    }
}
