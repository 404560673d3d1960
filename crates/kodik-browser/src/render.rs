//! [`PageRenderer`] for web_fetch (W2): a JavaScript-only page rendered in an isolated, hidden
//! tab, with every request the page makes checked by the caller's address rules first.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams as FetchEnableParams, EventRequestPaused, FailRequestParams,
};
use chromiumoxide::cdp::browser_protocol::network::{
    ErrorReason, EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, CreateBrowserContextParams, CreateTargetParams};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use futures_util::StreamExt;
use kodik_core::{PageRenderer, RenderRequest, RenderedPage};
use kodik_schema::browser::StorageMode;
use serde_json::{Value, json};

use crate::session::BrowserSession;

#[async_trait]
impl PageRenderer for BrowserSession {
    async fn render(&self, request: RenderRequest<'_>) -> Result<String, String> {
        self.render_page(request).await.map(|p| p.html)
    }

    async fn render_page(&self, request: RenderRequest<'_>) -> Result<RenderedPage, String> {
        let mut guard = self.running.lock().await;
        let r = self.ensure_running(&mut guard, StorageMode::Global).await.map_err(|e| e.to_string())?;
        // Its own browser context: no cookies of the agent's tabs, nothing left behind.
        let context = r
            .browser
            .execute(CreateBrowserContextParams::default())
            .await
            .map_err(|e| format!("cannot create an isolated context: {e}"))?
            .result
            .browser_context_id
            .clone();
        let mut params = CreateTargetParams::new("about:blank");
        params.browser_context_id = Some(context.clone());
        let page = r.browser.new_page(params).await.map_err(|e| format!("cannot open a tab: {e}"))?;
        // Not one of the model's tabs.
        r.ignored.insert(page.target_id().clone());
        let result = render_in(&page, &request).await;
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            r.browser.execute(CloseTargetParams::new(page.target_id().clone())),
        )
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(2), r.browser.dispose_browser_context(context)).await;
        result
    }
}

/// How long the page's network must be quiet before its DOM is taken (Playwright's
/// `networkidle`): a chained request (config, then data) starts within this after the last one.
const NETWORK_QUIET: Duration = Duration::from_millis(500);
/// How long the DOM must stay unchanged: client-side rendering in progress changes it.
const DOM_STABLE: Duration = Duration::from_millis(300);
/// How long a loaded, quiet page that shows no text is watched before it is given up on (an
/// app drawing after a splash timer draws well within this).
const BLANK_GIVE_UP: Duration = Duration::from_secs(5);
/// How long requests still open are waited for once the loaded page shows text in a DOM that
/// stopped changing; then the page is taken as it is, with a note naming them. A long poll, a
/// hung API call or a slow beacon never ends, and waiting for it would turn every such page
/// into an error at the deadline; an API that answers within this after the page drew its
/// placeholder is still waited for. 5 s is Lighthouse's quiet window for Time to Interactive
/// (5 s with at most two GETs in flight), and matches [`BLANK_GIVE_UP`].
const INFLIGHT_GRACE: Duration = Duration::from_secs(5);
/// Kept from the render's deadline to look at the page once more and say why it was given up.
const DEADLINE_MARGIN: Duration = Duration::from_millis(300);

/// The page's requests that can still change its text — its documents, scripts and data
/// (`fetch`, XHR) — and when the last of them started or ended. Images, fonts, beacons and
/// event streams do not hold the render up: they add no text, and a stream never ends.
#[derive(Debug, Default)]
struct Pending {
    inflight: HashMap<String, String>,
    /// Requests whose end was handled before their start (the listeners are separate streams).
    ended: VecDeque<String>,
    last: Option<Instant>,
}

impl Pending {
    fn sent(&mut self, id: &str, url: &str) {
        if let Some(i) = self.ended.iter().position(|e| e == id) {
            self.ended.remove(i);
        } else {
            self.inflight.insert(id.to_string(), url.to_string());
        }
        self.last = Some(Instant::now());
    }

    fn ended(&mut self, id: &str) {
        if self.inflight.remove(id).is_some() {
            self.last = Some(Instant::now());
        } else {
            self.ended.push_back(id.to_string());
            while self.ended.len() > 256 {
                self.ended.pop_front();
            }
        }
    }

    fn idle(&self) -> bool {
        self.inflight.is_empty() && self.last.is_none_or(|t| t.elapsed() >= NETWORK_QUIET)
    }

    /// The requests still in flight, for a message: their number and the first two URLs, each
    /// cut short (the page chose them, and the message is read outside the page's text).
    fn describe(&self, state: &str) -> String {
        let mut urls: Vec<&str> = self.inflight.values().map(String::as_str).collect();
        urls.sort_unstable();
        let more = urls.len().saturating_sub(2);
        let short = |u: &str| match u.char_indices().nth(100) {
            Some((i, _)) => format!("{}…", &u[..i]),
            None => u.to_string(),
        };
        let mut list = urls.into_iter().take(2).map(short).collect::<Vec<_>>().join(", ");
        if more > 0 {
            list.push_str(&format!(" and {more} more"));
        }
        let n = self.inflight.len();
        format!("{n} request{} ({list}) {} {state}", if n == 1 { "" } else { "s" }, if n == 1 { "was" } else { "were" })
    }
}

/// Whether a request can still change the text taken: a frame's document is not part of the
/// top document's HTML, so only the top one counts.
fn counts(kind: Option<&ResourceType>, frame: Option<&str>, main_frame: &str) -> bool {
    match kind {
        Some(ResourceType::Document) => frame == Some(main_frame),
        Some(ResourceType::Script | ResourceType::Xhr | ResourceType::Fetch) => true,
        _ => false,
    }
}

async fn render_in(page: &chromiumoxide::Page, request: &RenderRequest<'_>) -> Result<RenderedPage, String> {
    let mut paused = page.event_listener::<EventRequestPaused>().await.map_err(|e| e.to_string())?;
    let mut sent = page.event_listener::<EventRequestWillBeSent>().await.map_err(|e| e.to_string())?;
    let mut finished = page.event_listener::<EventLoadingFinished>().await.map_err(|e| e.to_string())?;
    let mut failed = page.event_listener::<EventLoadingFailed>().await.map_err(|e| e.to_string())?;
    let enable: FetchEnableParams = serde_json::from_value(json!({ "patterns": [{ "urlPattern": "*" }] }))
        .map_err(|e| format!("cannot build the request filter: {e}"))?;
    page.execute(enable).await.map_err(|e| format!("cannot filter the page's requests: {e}"))?;
    let main_frame = page.target_id().inner().clone();
    let blocked = std::sync::Mutex::new(Vec::<String>::new());
    // A navigation of the tab itself that the rules refused (a script setting `location`):
    // Chromium then shows its own error page, which must not pass for the page.
    let refused_navigation = std::sync::Mutex::new(None::<(String, String)>);
    let pending = std::sync::Mutex::new(Pending::default());
    // Every request waits here until the caller's rules allowed it.
    let gate = async {
        while let Some(e) = paused.next().await {
            let url = e.request.url.clone();
            match (request.allow_request)(&url) {
                Ok(()) => {
                    let _ = page.execute(ContinueRequestParams::new(e.request_id.clone())).await;
                }
                Err(rule) => {
                    if e.resource_type == ResourceType::Document && *e.frame_id.inner() == main_frame {
                        lock(&refused_navigation).get_or_insert_with(|| (url.clone(), rule.clone()));
                    }
                    lock(&blocked).push(format!("{url} ({rule})"));
                    let _ =
                        page.execute(FailRequestParams::new(e.request_id.clone(), ErrorReason::BlockedByClient)).await;
                }
            }
        }
    };
    let track = async {
        loop {
            tokio::select! {
                Some(e) = sent.next() => {
                    if counts(e.r#type.as_ref(), e.frame_id.as_ref().map(|f| f.inner().as_str()), &main_frame) {
                        lock(&pending).sent(e.request_id.inner(), &e.request.url);
                    }
                }
                Some(e) = finished.next() => lock(&pending).ended(e.request_id.inner()),
                Some(e) = failed.next() => lock(&pending).ended(e.request_id.inner()),
                else => break,
            }
        }
    };
    let refused = || {
        lock(&refused_navigation).as_ref().map(|(url, rule)| {
            let rule = rule.strip_prefix(&format!("{url}: ")).unwrap_or(rule);
            format!("the page navigated to {url}, which was not followed: {rule}")
        })
    };
    let load = async {
        // The deadline counts from here, as the whole render's timeout below does.
        let start = Instant::now();
        let nav =
            page.execute(NavigateParams::new(request.url)).await.map_err(|e| format!("navigation failed: {e}"))?;
        if let Some(err) = &nav.result.error_text {
            let why = lock(&blocked).first().cloned();
            return Err(match why {
                Some(b) => format!("the page was refused: {b}"),
                None => format!("the page did not load: {err}"),
            });
        }
        // Settled: loaded, the requests that can bring content done and the network quiet, the
        // DOM unchanged for a while, and some text shown — a placeholder shown while the data
        // is on its way is not the page. Requests still open INFLIGHT_GRACE after the page
        // first showed text in a still DOM are not waited for any longer, but named.
        let deadline = request.timeout.saturating_sub(DEADLINE_MARGIN);
        let mut last_len = 0usize;
        let mut stable_since = Instant::now();
        let mut shown_since: Option<Instant> = None;
        loop {
            if let Some(why) = refused() {
                return Err(why);
            }
            let (html, complete) = dom(page).await?;
            if html.len() != last_len {
                last_len = html.len();
                stable_since = Instant::now();
            }
            let still = complete && stable_since.elapsed() >= DOM_STABLE;
            let idle = lock(&pending).idle();
            let grace_over = shown_since.is_some_and(|t| t.elapsed() >= INFLIGHT_GRACE);
            if still && (idle || shown_since.is_none() || grace_over) {
                if !body_text(page).await?.is_empty() {
                    if idle {
                        return Ok(RenderedPage { html, incomplete: None });
                    }
                    if grace_over {
                        // None open at this moment: a page polling in quick turns, each answered,
                        // has loaded what it asked for.
                        let incomplete = {
                            let p = lock(&pending);
                            (!p.inflight.is_empty()).then(|| {
                                let open = p.describe(&format!(
                                    "still open {} s after the page showed its text",
                                    INFLIGHT_GRACE.as_secs()
                                ));
                                format!("{open}, so parts of the page may not have loaded")
                            })
                        };
                        return Ok(RenderedPage { html, incomplete });
                    }
                    shown_since = Some(Instant::now());
                } else if idle && stable_since.elapsed() >= BLANK_GIVE_UP {
                    // Loaded, quiet and unchanged this long and still blank: nothing is coming,
                    // and waiting out the whole deadline would only cost the caller its time.
                    return Err(format!(
                        "the headless browser ran the page for {:.1} s and it showed no text: it had loaded, its \
network was idle and its DOM unchanged for {} s, so its scripts put nothing on the page.",
                        start.elapsed().as_secs_f64(),
                        BLANK_GIVE_UP.as_secs()
                    ));
                }
            }
            if start.elapsed() >= deadline {
                let waiting = {
                    let p = lock(&pending);
                    (!p.inflight.is_empty()).then(|| p.describe("still in flight"))
                };
                return given_up(page, html, request.timeout, waiting)
                    .await
                    .map(|html| RenderedPage { html, incomplete: None });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        r = load => r,
        _ = gate => Err("the page's request stream ended".into()),
        _ = track => Err("the page's network events ended".into()),
        _ = tokio::time::sleep(request.timeout) => Err(format!("rendering took longer than {} ms", request.timeout.as_millis())),
        _ = request.cancel.cancelled() => Err("cancelled".into()),
    }
}

/// At the deadline: the page as it is when it shows text and nothing it asked for is still
/// coming (a page that keeps animating); otherwise an error saying what it showed and which
/// requests (`waiting`) it was still waiting for.
async fn given_up(
    page: &chromiumoxide::Page,
    html: String,
    limit: Duration,
    waiting: Option<String>,
) -> Result<String, String> {
    let text = body_text(page).await?;
    let waited = format!("the headless browser ran the page until its {:.1} s limit", limit.as_secs_f64());
    if let Some(pending) = waiting {
        let shown = if text.is_empty() {
            "no text yet".to_string()
        } else {
            let excerpt: String = text.chars().take(200).collect();
            let cut = if excerpt.len() < text.len() { "…" } else { "" };
            format!("only \"{excerpt}{cut}\"")
        };
        return Err(format!(
            "{waited}, and {pending}; the page showed {shown} meanwhile — a loading state, not given as its \
content. Fetch the data URL itself, or try again later."
        ));
    }
    if text.is_empty() {
        return Err(format!("{waited}, and it still showed no text: its scripts put nothing on the page in time."));
    }
    Ok(html)
}

async fn eval_value(page: &chromiumoxide::Page, expr: &str) -> Result<Value, String> {
    let params = EvaluateParams::builder().expression(expr).return_by_value(true).build().map_err(|e| e.to_string())?;
    let res = page.execute(params).await.map_err(|e| format!("the page did not answer: {e}"))?;
    Ok(res.result.result.value.clone().unwrap_or(Value::Null))
}

/// A poisoned lock's data is still whole here: every holder only pushes or sets.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The document's HTML, and whether it has loaded (`readyState` complete), in one round trip.
async fn dom(page: &chromiumoxide::Page) -> Result<(String, bool), String> {
    let v = eval_value(
        page,
        "[document.documentElement ? document.documentElement.outerHTML : '', document.readyState === 'complete']",
    )
    .await?;
    let html = v.get(0).and_then(Value::as_str).unwrap_or_default().to_string();
    Ok((html, v.get(1).and_then(Value::as_bool).unwrap_or(false)))
}

/// The text the page shows (hidden elements, scripts and `<noscript>` aside), whitespace collapsed.
async fn body_text(page: &chromiumoxide::Page) -> Result<String, String> {
    let v = eval_value(page, "document.body ? document.body.innerText : ''").await?;
    Ok(v.as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::Pending;

    /// W2: a request whose end is handled before its start (separate event streams) is not left
    /// in flight, or the render would wait for it until its deadline.
    #[test]
    fn w2_a_request_whose_end_is_handled_first_is_not_left_in_flight() {
        let mut p = Pending::default();
        p.sent("1", "http://a/data");
        p.ended("2");
        p.sent("2", "http://a/app.js");
        assert_eq!(p.inflight.len(), 1, "{p:?}");
        let said = p.describe("still in flight");
        assert!(said.contains("1 request (http://a/data) was still in flight"), "{said}");
        p.ended("1");
        assert!(p.inflight.is_empty(), "{p:?}");
    }
}
