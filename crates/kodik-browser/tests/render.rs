//! kodik-core's PageRenderer through the browser (W2 for web_fetch): JavaScript runs, every
//! request the page makes passes the caller's address rules first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::{HANG, Routes, harness, serve, serve_slow};
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

/// A page that shows a placeholder until its data request answers (every SPA that calls an API).
const LOADING: &str = r#"<!doctype html><title>Items</title><div id="root">Loading...</div>
<script>fetch('/api/items').then(r => r.json()).then(items => {
  document.getElementById('root').innerHTML = '<h1>Items</h1><ul>' + items.map(i => '<li>' + i + '</li>').join('') + '</ul>';
});</script>"#;

/// W2: the page is taken once its requests are done, not while it still shows its loading
/// placeholder; a render that its deadline cuts short with requests in flight, or that never
/// shows any text, is an error saying so — never the placeholder presented as the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_a_page_waiting_for_its_data_is_rendered_with_the_data_not_its_placeholder() {
    let mut routes = Routes::new();
    routes.insert("/slow", ("text/html", LOADING.to_string(), ""));
    routes.insert("/api/items", ("application/json", r#"["alpha","beta","gamma"]"#.to_string(), ""));
    let hung = LOADING.replace("/api/items", "/api/hung");
    routes.insert("/hung", ("text/html", hung, ""));
    routes.insert("/api/hung", (HANG, String::new(), ""));
    let timer = r#"<!doctype html><title>Timer</title><div id="root"></div>
<script>setTimeout(() => { document.getElementById('root').innerHTML = '<p>Drawn by a timer</p>'; }, 500);</script>"#;
    routes.insert("/timer", ("text/html", timer.to_string(), ""));
    let empty = r#"<!doctype html><title>Shell</title><div id="root"></div><script>window.app = 1;</script>"#;
    routes.insert("/empty", ("text/html", empty.to_string(), ""));
    let base = serve_slow(routes, &[("/api/items", Duration::from_millis(1200))]).await;
    let h = harness();
    let allow = |_: &str| -> Result<(), String> { Ok(()) };
    let cancel = CancellationToken::new();
    let render = |path: &str, secs: u64| {
        let url = format!("{base}{path}");
        let session = h.session.clone();
        let cancel = cancel.clone();
        async move {
            let req =
                RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(secs), cancel: &cancel };
            session.render(req).await
        }
    };

    let html = render("/slow", 10).await.unwrap();
    assert!(html.contains("<li>alpha</li>") && html.contains("<li>gamma</li>"), "{html}");
    assert!(!html.contains("Loading..."), "{html}");

    let html = render("/timer", 10).await.unwrap();
    assert!(html.contains("Drawn by a timer"), "{html}");

    // The data never comes: the deadline ends the render, and the error says what was pending
    // and what the page showed meanwhile.
    let err = render("/hung", 4).await.unwrap_err();
    assert!(err.contains("in flight") && err.contains("/api/hung"), "{err}");
    assert!(err.contains("Loading..."), "{err}");

    // A page that loaded, went quiet and still shows nothing: said without waiting out the
    // deadline, and said that it ran in a headless browser.
    let err = render("/empty", 3).await.unwrap_err();
    assert!(err.contains("headless browser") && err.contains("no text"), "{err}");
    let err = render("/empty", 25).await.unwrap_err();
    assert!(err.contains("headless browser") && err.contains("no text"), "{err}");
    assert!(err.contains("idle") && !err.contains("limit"), "given up before the deadline: {err}");
    h.session.shutdown().await;
}

/// A page that draws its content and keeps two requests open for good: a long poll (fetch) and
/// a beacon sent by XHR to a server that never answers.
const LIVE: &str = r#"<!doctype html><title>Scores</title><div id="root">Loading...</div>
<script>
document.getElementById('root').innerHTML = '<h1>Scores</h1><p>Home 3, away 1 at half time.</p>';
fetch('/poll?since=0').then(r => r.text()).then(t => { document.body.insertAdjacentHTML('beforeend', t); });
const x = new XMLHttpRequest(); x.open('POST', '/beacon'); x.send('seen');
</script>"#;

/// W2: a page that shows its content while requests it made stay open for good (long polling,
/// a hung beacon) is returned with that content and a note naming the open requests, soon after
/// it drew — not turned into an error at the render's deadline. The deadline here is 30 s and
/// a render cut by it is an error (the `/hung` case above), so success proves it was not waited
/// out. A page whose data comes in 1.2 s still has it and carries no note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_a_page_with_requests_that_never_end_is_returned_with_its_content_and_a_note_naming_them() {
    let mut routes = Routes::new();
    routes.insert("/live", ("text/html", LIVE.to_string(), ""));
    routes.insert("/poll", (HANG, String::new(), ""));
    routes.insert("/beacon", (HANG, String::new(), ""));
    routes.insert("/slow", ("text/html", LOADING.to_string(), ""));
    routes.insert("/api/items", ("application/json", r#"["alpha","beta","gamma"]"#.to_string(), ""));
    let base = serve_slow(routes, &[("/api/items", Duration::from_millis(1200))]).await;
    let h = harness();
    let allow = |_: &str| -> Result<(), String> { Ok(()) };
    let cancel = CancellationToken::new();

    let url = format!("{base}/live");
    let req = RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(30), cancel: &cancel };
    let page = h.session.render_page(req).await.unwrap();
    assert!(page.html.contains("Home 3, away 1 at half time.") && !page.html.contains("Loading..."), "{}", page.html);
    let note = page.incomplete.expect("the open requests are named");
    assert!(note.starts_with("2 requests (") && note.contains("were still open 5 s after"), "{note}");
    assert!(note.contains(&format!("{base}/beacon")) && note.contains(&format!("{base}/poll?since=0")), "{note}");
    assert!(note.contains("may not have loaded"), "{note}");

    let url = format!("{base}/slow");
    let req = RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(30), cancel: &cancel };
    let page = h.session.render_page(req).await.unwrap();
    assert!(page.html.contains("<li>gamma</li>") && !page.html.contains("Loading..."), "{}", page.html);
    assert_eq!(page.incomplete, None);
    h.session.shutdown().await;
}

/// W2: a page whose script sends the tab to an address the rules refuse is an error naming that
/// address and the rule, like a refused HTTP redirect — not Chromium's "blocked" page as content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_a_script_navigation_to_a_refused_address_is_an_error_naming_it() {
    let mut routes = Routes::new();
    let away = r#"<!doctype html><title>App</title><div id="root"></div>
<script>location.href = "http://127.0.0.1:9/secret-other-port";</script>"#;
    routes.insert("/away", ("text/html", away.to_string(), ""));
    let onward = r#"<!doctype html><title>App</title><div id="root"></div><script>location.href = "/next";</script>"#;
    routes.insert("/onward", ("text/html", onward.to_string(), ""));
    routes.insert("/next", ("text/html", "<!doctype html><title>Next</title><p>Arrived</p>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    let allow = |u: &str| -> Result<(), String> {
        if u.starts_with(&base) {
            Ok(())
        } else {
            Err(format!("{u}: loopback addresses are reached only when you give that URL yourself"))
        }
    };
    let cancel = CancellationToken::new();

    let url = format!("{base}/away");
    let req = RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(10), cancel: &cancel };
    let err = h.session.render(req).await.unwrap_err();
    assert!(err.contains("http://127.0.0.1:9/secret-other-port"), "{err}");
    assert!(err.contains("loopback addresses are reached only"), "{err}");
    assert!(!err.contains("ERR_BLOCKED_BY_CLIENT"), "{err}");

    // A navigation the rules allow is followed.
    let url = format!("{base}/onward");
    let req = RenderRequest { url: &url, allow_request: &allow, timeout: Duration::from_secs(10), cancel: &cancel };
    let html = h.session.render(req).await.unwrap();
    assert!(html.contains("Arrived"), "{html}");
    h.session.shutdown().await;
}
