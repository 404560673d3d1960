//! kodik-core's PageRenderer through the browser (W2 for web_fetch): JavaScript runs, every
//! request the page makes passes the caller's address rules first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::{Routes, harness, serve};
use kodik_core::{CancellationToken, PageRenderer, RenderRequest};

const SHELL: &str = r#"<!doctype html><title>App</title><div id="root"></div><script src="/app.js"></script>"#;
const APP: &str = r#"document.getElementById('root').innerHTML = '<h1>Rendered by JS</h1>';
fetch('/internal-api').then(() => { document.body.insertAdjacentHTML('beforeend', '<p>internal reached</p>'); },
  () => { document.body.insertAdjacentHTML('beforeend', '<p>internal refused</p>'); });"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_renders_javascript_pages_and_checks_every_request() {
    let mut routes = Routes::new();
    routes.insert("/app", ("text/html", SHELL.to_string(), ""));
    routes.insert("/app.js", ("text/javascript", APP.to_string(), ""));
    routes.insert("/internal-api", ("text/plain", "secret".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    let seen = Mutex::new(Vec::<String>::new());
    let allow = |url: &str| -> Result<(), String> {
        seen.lock().unwrap().push(url.to_string());
        if url.contains("internal") { Err("internal address".into()) } else { Ok(()) }
    };
    let cancel = CancellationToken::new();
    let url = format!("{base}/app");
    let req = RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(10), cancel: &cancel };
    let html = h.session.render(req).await.unwrap();
    assert!(html.contains("<h1>Rendered by JS</h1>"), "{html}");
    assert!(html.contains("internal refused") && !html.contains("internal reached"), "{html}");
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().any(|u| u.ends_with("/app.js")), "{seen:?}");

    // A page the rules refuse is not loaded at all.
    let deny = |_: &str| -> Result<(), String> { Err("blocked for the test".into()) };
    let req = RenderRequest { url: &url, allow_request: &deny, timeout: Duration::from_secs(5), cancel: &cancel };
    let err = h.session.render(req).await.unwrap_err();
    assert!(err.contains("blocked for the test"), "{err}");
    // The render tab is hidden from the model's tabs.
    let tabs = h.ok(serde_json::json!({"action": "list_tabs"})).await;
    assert!(tabs.contains("0 tab(s)"), "{tabs}");
    h.session.shutdown().await;
}
