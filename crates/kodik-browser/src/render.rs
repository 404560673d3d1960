//! [`PageRenderer`] for web_fetch (W2): a JavaScript-only page rendered in an isolated, hidden
//! tab, with every request the page makes checked by the caller's address rules first.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams as FetchEnableParams, EventRequestPaused, FailRequestParams,
};
use chromiumoxide::cdp::browser_protocol::network::ErrorReason;
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, CreateBrowserContextParams, CreateTargetParams};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use futures_util::StreamExt;
use kodik_core::{PageRenderer, RenderRequest};
use kodik_schema::browser::StorageMode;
use serde_json::{Value, json};

use crate::session::BrowserSession;

#[async_trait]
impl PageRenderer for BrowserSession {
    async fn render(&self, request: RenderRequest<'_>) -> Result<String, String> {
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

async fn render_in(page: &chromiumoxide::Page, request: &RenderRequest<'_>) -> Result<String, String> {
    let mut paused = page.event_listener::<EventRequestPaused>().await.map_err(|e| e.to_string())?;
    let enable: FetchEnableParams = serde_json::from_value(json!({ "patterns": [{ "urlPattern": "*" }] }))
        .map_err(|e| format!("cannot build the request filter: {e}"))?;
    page.execute(enable).await.map_err(|e| format!("cannot filter the page's requests: {e}"))?;
    let blocked = std::sync::Mutex::new(Vec::<String>::new());
    // Every request waits here until the caller's rules allowed it.
    let gate = async {
        while let Some(e) = paused.next().await {
            let url = e.request.url.clone();
            match (request.allow_request)(&url) {
                Ok(()) => {
                    let _ = page.execute(ContinueRequestParams::new(e.request_id.clone())).await;
                }
                Err(rule) => {
                    blocked.lock().unwrap_or_else(|p| p.into_inner()).push(format!("{url} ({rule})"));
                    let _ =
                        page.execute(FailRequestParams::new(e.request_id.clone(), ErrorReason::BlockedByClient)).await;
                }
            }
        }
    };
    let load = async {
        let nav =
            page.execute(NavigateParams::new(request.url)).await.map_err(|e| format!("navigation failed: {e}"))?;
        if let Some(err) = &nav.result.error_text {
            let why = blocked.lock().unwrap_or_else(|p| p.into_inner()).first().cloned();
            return Err(match why {
                Some(b) => format!("the page was refused: {b}"),
                None => format!("the page did not load: {err}"),
            });
        }
        // Settled: loaded, and no DOM change for a short while (client-side rendering).
        let start = Instant::now();
        let mut last_len = 0usize;
        let mut stable_since = Instant::now();
        loop {
            let html = outer_html(page).await?;
            let complete = ready(page).await;
            if html.len() != last_len {
                last_len = html.len();
                stable_since = Instant::now();
            }
            if complete && stable_since.elapsed() >= Duration::from_millis(300) {
                return Ok(html);
            }
            if start.elapsed() >= request.timeout.saturating_sub(Duration::from_millis(100)) {
                return Ok(html);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        r = load => r,
        _ = gate => Err("the page's request stream ended".into()),
        _ = tokio::time::sleep(request.timeout) => Err(format!("rendering took longer than {} ms", request.timeout.as_millis())),
        _ = request.cancel.cancelled() => Err("cancelled".into()),
    }
}

async fn eval_value(page: &chromiumoxide::Page, expr: &str) -> Result<Value, String> {
    let params = EvaluateParams::builder().expression(expr).return_by_value(true).build().map_err(|e| e.to_string())?;
    let res = page.execute(params).await.map_err(|e| format!("the page did not answer: {e}"))?;
    Ok(res.result.result.value.clone().unwrap_or(Value::Null))
}

async fn outer_html(page: &chromiumoxide::Page) -> Result<String, String> {
    match eval_value(page, "document.documentElement ? document.documentElement.outerHTML : ''").await? {
        Value::String(s) => Ok(s),
        _ => Ok(String::new()),
    }
}

async fn ready(page: &chromiumoxide::Page) -> bool {
    matches!(eval_value(page, "document.readyState").await, Ok(Value::String(s)) if s == "complete")
}
