//! Navigations that do not finish (a hung server, a bad URL) against real Chromium: every call
//! stays bounded and the session stays usable afterwards (B3, B5).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::{HANG, Harness, Routes, harness, serve};
use serde_json::{Value, json};

const HOME: &str =
    r#"<!doctype html><title>Home</title><h1>Test Home</h1><a href="/form">Form</a><a href="/hang">Stuck</a>"#;
const FORM: &str = r#"<!doctype html><title>Form</title><label>Name <input></label>"#;

/// Runs a call that must answer within `limit` (a hang fails the test instead of blocking it).
async fn bounded(h: &Harness, limit: Duration, args: Value) -> kodik_core::ToolOutput {
    match tokio::time::timeout(limit, h.call(args.clone())).await {
        Ok(out) => out,
        Err(_) => panic!("{args} did not answer within {limit:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_timed_out_navigation_is_stopped_and_the_next_calls_answer() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", HOME.to_string(), ""));
    routes.insert("/form", ("text/html", FORM.to_string(), ""));
    routes.insert("/hang", (HANG, String::new(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;

    let out = bounded(
        &h,
        Duration::from_secs(10),
        json!({"action": "navigate", "url": format!("{base}/hang"), "timeout": 2000}),
    )
    .await;
    assert!(!out.is_success());
    let e = out.text_content();
    assert!(e.contains("timed out after 2000 ms"), "{e}");
    assert!(e.contains("stopped"), "the model should learn the navigation was stopped: {e}");

    // The navigation was stopped: the old page is there and answers at once.
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "snapshot"})).await;
    let s = out.text_content();
    assert!(out.is_success(), "{s}");
    assert!(s.contains("Test Home"), "{s}");
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "list_tabs"})).await;
    let l = out.text_content();
    assert!(out.is_success() && l.contains("t1") && l.contains(&format!("{base}/")), "{l}");
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "navigate", "url": format!("{base}/form")})).await;
    let n = out.text_content();
    assert!(out.is_success() && n.contains("Title: Form"), "{n}");

    // A navigation the page starts (a link to a server that never answers) is the user's action:
    // the click stops waiting for it and says it is still loading, but does not cancel it (it may
    // be a form already posted). It holds no later call that does not need the page.
    h.ok(json!({"action": "navigate", "url": format!("{base}/")})).await;
    let out =
        bounded(&h, Duration::from_secs(30), json!({"action": "click", "target": {"role": "link", "name": "Stuck"}}))
            .await;
    let c = out.text_content();
    assert!(out.is_success(), "{c}");
    assert!(c.contains(&format!("still loading {base}/hang")) && c.contains("do not repeat"), "{c}");
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "list_tabs"})).await;
    assert!(out.is_success() && out.text_content().contains("t1"), "{}", out.text_content());
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "navigate", "url": format!("{base}/form")})).await;
    let n = out.text_content();
    assert!(out.is_success() && n.contains("Title: Form"), "{n}");
    h.session.shutdown().await;
}

/// B5: a click that posts a form to a slow server does not cancel the submission when it stops
/// waiting: the result says the page is still loading and not to click again, the server gets
/// the form once, and a `wait` then sees the answer; a click's `timeout` lets it wait longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_a_click_whose_navigation_outlasts_the_wait_is_not_cancelled_and_says_it_is_loading() {
    let mut routes = Routes::new();
    routes.insert(
        "/",
        (
            "text/html",
            r#"<!doctype html><title>Order</title><form action="/order" method="post"><input name="q" aria-label="Q"><button>Place order</button></form><a href="/report">Report</a>"#.to_string(),
            "",
        ),
    );
    routes.insert("/order", ("text/html", "<!doctype html><title>Done</title><h1>order placed</h1>".to_string(), ""));
    routes
        .insert("/report", ("text/html", "<!doctype html><title>Report</title><h1>report ready</h1>".to_string(), ""));
    let slow = Duration::from_secs(12);
    let (base, log) = common::serve_logged(routes, &[("/order", slow), ("/report", slow)]).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;

    let out = bounded(
        &h,
        Duration::from_secs(20),
        json!({"action": "click", "target": {"role": "button", "name": "Place order"}}),
    )
    .await;
    let c = out.text_content();
    assert!(out.is_success(), "{c}");
    assert!(c.contains(&format!("still loading {base}/order")) && c.contains("do not repeat"), "{c}");
    assert!(!c.contains("stopped"), "{c}");
    let w = h.ok(json!({"action": "wait", "condition": "text", "text": "order placed", "timeout": 15000})).await;
    assert!(w.contains("\"order placed\" is on the page"), "{w}");
    let posts = log.lock().unwrap().iter().filter(|l| l.starts_with("POST /order")).count();
    assert_eq!(posts, 1, "{:?}", log.lock().unwrap());

    // With a `timeout` longer than the server takes, the click returns with the new page.
    h.ok(json!({"action": "navigate", "url": format!("{base}/")})).await;
    let out = bounded(
        &h,
        Duration::from_secs(30),
        json!({"action": "click", "target": {"role": "link", "name": "Report"}, "timeout": 20000}),
    )
    .await;
    let c = out.text_content();
    assert!(out.is_success() && c.contains("report ready") && !c.contains("still loading"), "{c}");
    h.session.shutdown().await;
}

/// B5: `open` takes a `timeout` like `navigate` (the schema says so): a page whose server never
/// answers fails when it is over, and no tab is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_open_takes_a_timeout_and_a_timed_out_open_leaves_no_tab() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", HOME.to_string(), ""));
    routes.insert("/hang", (HANG, String::new(), ""));
    let base = serve(routes).await;
    let h = harness();
    let out =
        bounded(&h, Duration::from_secs(15), json!({"action": "open", "url": format!("{base}/hang"), "timeout": 1500}))
            .await;
    let e = out.text_content();
    assert!(!out.is_success(), "{e}");
    assert!(e.contains("timed out after 1500 ms"), "{e}");
    let l = h.ok(json!({"action": "list_tabs"})).await;
    assert!(l.contains("0 tab(s)"), "{l}");
    let o = h.ok(json!({"action": "open", "url": format!("{base}/"), "timeout": 5000})).await;
    assert!(o.contains("Test Home"), "{o}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_a_bad_url_or_a_failed_open_fails_at_once_and_leaves_no_tab_and_an_error_status_is_said() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", HOME.to_string(), ""));
    let base = serve(routes).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let h = harness();

    // Without a scheme Chromium neither loads nor refuses the URL: it is refused here, with the fix.
    let out =
        bounded(&h, Duration::from_secs(10), json!({"action": "open", "url": format!("localhost:{port}/")})).await;
    let e = out.text_content();
    assert!(!out.is_success(), "{e}");
    assert!(e.contains(&format!("e.g. http://localhost:{port}/")), "{e}");

    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "navigate", "url": "not a url"})).await;
    let e = out.text_content();
    assert!(!out.is_success() && e.contains("is not a URL"), "{e}");

    // A server that refuses: the open fails with the browser's reason and its tab is closed.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out =
        bounded(&h, Duration::from_secs(10), json!({"action": "open", "url": format!("http://127.0.0.1:{refused}/")}))
            .await;
    let e = out.text_content();
    assert!(!out.is_success() && e.contains("ERR_CONNECTION_REFUSED"), "{e}");
    let tabs = h.ok(json!({"action": "list_tabs"})).await;
    assert!(tabs.starts_with("1 tab(s):") && tabs.contains("t1 (current)"), "{tabs}");
    assert!(!tabs.contains("chrome-error"), "{tabs}");
    let s = h.ok(json!({"action": "snapshot"})).await;
    assert!(s.contains("Test Home"), "{s}");
    // A page the server answers with an error status loads, and the result says the status.
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/missing")})).await;
    assert!(r.contains("The server answered HTTP 404"), "{r}");
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/")})).await;
    assert!(!r.contains("The server answered"), "{r}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b5_a_page_whose_load_never_fires_opens_once_ready_and_later_actions_do_not_wait_for_it() {
    const STUCK: &str = r#"<!doctype html><title>ImgHang</title><h1>Visible content</h1><img src="/hang.png" alt="stuck">
<button onclick="document.getElementById('out').textContent = 'clicked ' + (++window.n || (window.n = 1))">Works</button>
<p id="out">none</p>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", HOME.to_string(), ""));
    routes.insert("/stuck", ("text/html", STUCK.to_string(), ""));
    routes.insert("/hang.png", (HANG, String::new(), ""));
    let base = serve(routes).await;
    let h = harness();

    // One image that never arrives: the page opens once its DOM is ready, and says it still loads.
    let out = bounded(&h, Duration::from_secs(20), json!({"action": "open", "url": format!("{base}/stuck")})).await;
    let o = out.text_content();
    assert!(out.is_success(), "{o}");
    assert!(o.contains("has not finished loading") && o.contains("Visible content"), "{o}");
    // The wait for `load` was spent once for this document: a click does not spend it again
    // (it did, 10 s a click), and the note is not repeated.
    for n in 1..=2 {
        let out = bounded(
            &h,
            Duration::from_millis(4500),
            json!({"action": "click", "target": {"role": "button", "name": "Works"}}),
        )
        .await;
        let c = out.text_content();
        assert!(out.is_success() && c.contains(&format!("clicked {n}")), "{c}");
        assert!(!c.contains("has not finished loading"), "{c}");
    }
    // navigate to such a page succeeds too, within its timeout.
    h.ok(json!({"action": "navigate", "url": format!("{base}/")})).await;
    let out = bounded(
        &h,
        Duration::from_secs(20),
        json!({"action": "navigate", "url": format!("{base}/stuck"), "timeout": 8000}),
    )
    .await;
    let n = out.text_content();
    assert!(out.is_success() && n.contains("has not finished loading") && n.contains("Title: ImgHang"), "{n}");
    h.session.shutdown().await;
}

/// B3, B5: `reload` of a page whose `load` never fires returns once its new DOM is ready, with the
/// same note as `navigate` (it waited the whole 30 s and failed), and takes a `timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b5_reload_of_a_page_whose_load_never_fires_returns_once_ready_and_takes_a_timeout() {
    const STUCK: &str = r#"<!doctype html><title>ImgHang</title><h1>Visible content</h1><img src="/hang.png" alt="stuck">
<button onclick="document.getElementById('out').textContent = 'clicked'">Works</button><p id="out">none</p>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", HOME.to_string(), ""));
    routes.insert("/stuck", ("text/html", STUCK.to_string(), ""));
    routes.insert("/hang.png", (HANG, String::new(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/"), "timeout": 8000})).await;
    let r = h.ok(json!({"action": "reload"})).await;
    assert!(r.contains("reload done") && r.contains("Test Home"), "{r}");

    h.ok(json!({"action": "navigate", "url": format!("{base}/stuck"), "timeout": 8000})).await;
    let c = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Works"}})).await;
    assert!(c.contains("paragraph: clicked"), "{c}");
    for args in [json!({"action": "reload"}), json!({"action": "reload", "timeout": 8000})] {
        let out = bounded(&h, Duration::from_secs(15), args.clone()).await;
        let r = out.text_content();
        assert!(out.is_success(), "{args}: {r}");
        assert!(r.contains("has not finished loading") && r.contains("Visible content"), "{r}");
        // A new document: the click's change is gone.
        assert!(r.contains("paragraph: none") && !r.contains("paragraph: clicked"), "{r}");
    }
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_g16_file_urls_open_workspace_files_only() {
    let h = harness();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    std::fs::write(h.dir.path().join("page.html"), "<title>Mine</title><h1>Workspace page</h1>").unwrap();
    std::fs::write(h.dir.path().join("hidden.txt"), "hidden words").unwrap();
    std::fs::write(h.dir.path().join(".kodikignore"), "hidden.txt\n").unwrap();
    let secret = outside.path().join("secret.txt").display().to_string();
    for url in [
        format!("file://{secret}"),
        format!("FILE://localhost{secret}"),
        format!("view-source:file://{secret}"),
        format!("file://{}", secret.replace('/', "%2F")),
        "file:///etc/passwd".to_string(),
        format!("file://{}/hidden.txt", h.dir.path().display()),
        format!("file://{}/../{}", h.dir.path().display(), secret.trim_start_matches('/')),
    ] {
        let e = h.err(json!({"action": "open", "url": url})).await;
        assert!(!e.contains("top secret") && !e.contains("root:") && !e.contains("hidden words"), "{url}: {e}");
        assert!(e.contains("cannot open") || e.contains("workspace"), "{url}: {e}");
    }
    let r = h.ok(json!({"action": "open", "url": format!("file://{}/page.html", h.dir.path().display())})).await;
    assert!(r.contains("Workspace page"), "{r}");
    let e = h.err(json!({"action": "navigate", "url": "file:///etc/passwd"})).await;
    assert!(!e.contains("root:"), "{e}");
    // A workspace page that links out does not take the tab there either.
    std::fs::write(
        h.dir.path().join("links.html"),
        format!(r#"<title>Links</title><a href="file://{secret}">Out</a>"#),
    )
    .unwrap();
    h.ok(json!({"action": "navigate", "url": format!("file://{}/links.html", h.dir.path().display())})).await;
    let e = h.err(json!({"action": "click", "target": {"role": "link", "name": "Out"}})).await;
    assert!(!e.contains("top secret") && e.contains("outside the workspace"), "{e}");
    let tabs = h.ok(json!({"action": "list_tabs"})).await;
    assert!(tabs.contains("about:blank") && !tabs.contains("secret.txt"), "{tabs}");
    // Nor does one that frames such a file.
    std::fs::write(
        h.dir.path().join("frames.html"),
        format!(r#"<title>Frames</title><h1>Framed</h1><iframe src="file://{secret}"></iframe>"#),
    )
    .unwrap();
    let e = h.err(json!({"action": "navigate", "url": format!("file://{}/frames.html", h.dir.path().display())})).await;
    assert!(!e.contains("top secret") && e.contains("outside the workspace"), "{e}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_b11_network_idle_comes_on_a_loaded_static_page_every_time() {
    // Date, time, color and file inputs: the page loads nothing else, Chromium loads their parts.
    const FORM: &str = r#"<!doctype html><title>Form</title><form>
<label>Name <input name="name"></label><label for="c">Color</label><select id="c"><option>Red</option></select>
<select multiple aria-label="Multi"><option>A</option><option>B</option></select>
<label><input type="checkbox"> Agree</label><label><input type="radio" name="s"> Small</label>
<label>Date <input type="date"></label><label>Time <input type="time"></label>
<label>When <input type="datetime-local"></label><label>Range <input type="range"></label>
<label>Pick <input type="color"></label><label>Notes <textarea></textarea></label>
<label>File <input type="file" multiple></label><div contenteditable="true" role="textbox" aria-label="Editor"></div>
<button>Submit</button></form>"#;
    let mut routes = Routes::new();
    routes.insert("/form", ("text/html", FORM.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    for round in 0..6 {
        let action = if round == 0 { "open" } else { "navigate" };
        h.ok(json!({"action": action, "url": format!("{base}/form?{round}")})).await;
        if round % 2 == 1 {
            h.ok(json!({"action": "screenshot", "full_page": true})).await;
        }
        h.ok(json!({"action": "diagnostics"})).await;
        let w = h.call(json!({"action": "wait", "condition": "network_idle", "timeout": 3000})).await;
        let d = h.ok(json!({"action": "diagnostics"})).await;
        assert!(w.is_success(), "round {round}: {} / {d}", w.text_content());
        assert!(d.contains(" 0 in flight"), "round {round}: {d}");
    }
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b5_click_with_a_timeout_waits_for_its_target_to_become_actionable() {
    const LATE: &str = r#"<!doctype html><title>Late</title><div id="x"></div><button id="b" disabled
onclick="document.getElementById('x').insertAdjacentHTML('beforeend', '<p>button clicked</p>')">Later</button>
<button onclick="setTimeout(() => { document.getElementById('b').disabled = false;
  document.getElementById('x').insertAdjacentHTML('beforeend', '<p onclick=&quot;this.textContent = \'arrived clicked\'&quot;>Arrived</p>'); }, 1500)">Start</button>"#;
    let mut routes = Routes::new();
    routes.insert("/late", ("text/html", LATE.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/late")})).await;
    // Without a timeout, a disabled button is refused at once, as before.
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Later"}})).await;
    assert!(e.contains("is disabled") && !e.contains("waited"), "{e}");
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Start"}})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Later"}, "timeout": 5000})).await;
    assert!(r.contains("button clicked"), "{r}");
    let r = h.ok(json!({"action": "click", "target": {"text": "Arrived"}, "timeout": 5000})).await;
    assert!(r.contains("arrived clicked"), "{r}");
    // A target that never comes fails at the timeout, saying it waited.
    let e = h.err(json!({"action": "click", "target": {"text": "Never"}, "timeout": 300})).await;
    assert!(e.contains("no element matches") && e.contains("waited 300 ms"), "{e}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_a_full_page_screenshot_of_a_very_long_page_is_cut_to_what_models_take_and_says_so() {
    let mut routes = Routes::new();
    routes.insert(
        "/long",
        ("text/html", r#"<!doctype html><title>Long</title><div style="height: 30000px">tall</div>"#.to_string(), ""),
    );
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/long")})).await;
    let out = h.call(json!({"action": "screenshot", "full_page": true})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("Cut: the area is") && text.contains("first 1280×8000 px"), "{text}");
    let png = out
        .content
        .iter()
        .find_map(|c| match c {
            kodik_core::Content::Image { data, .. } => Some(data.clone()),
            _ => None,
        })
        .expect("an image");
    let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, png).unwrap();
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(height <= 8000, "image is {height} px tall");
    h.session.shutdown().await;
}

/// B11: diagnostics names a request that failed at the network level by its method and URL (it
/// showed an internal id), and a network_idle wait that times out names what is still in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b11_failed_and_pending_requests_are_named_by_their_url() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let page = format!(
        r#"<!doctype html><title>Fail</title><h1>fail</h1><script>
fetch("http://127.0.0.1:{refused}/api/users").catch(() => {{}}); fetch("/poll").catch(() => {{}});
</script><img src="http://127.0.0.1:{refused}/logo.png">"#
    );
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", page, ""));
    routes.insert("/poll", (HANG, String::new(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let e = h.err(json!({"action": "wait", "condition": "network_idle", "timeout": 1500})).await;
    assert!(e.contains(&format!("in flight: GET {base}/poll")), "{e}");
    let d = h.ok(json!({"action": "diagnostics"})).await;
    for url in [format!("http://127.0.0.1:{refused}/api/users"), format!("http://127.0.0.1:{refused}/logo.png")] {
        assert!(d.contains(&format!("- GET {url} (net::ERR_CONNECTION_REFUSED)")), "{d}");
    }
    assert!(d.contains(&format!("in flight: GET {base}/poll")), "{d}");
    h.session.shutdown().await;
}

/// B5: on a page a script has frozen, a click fails within seconds saying the page is frozen and
/// how to get out (it blocked 30 s and blamed the browser), waits end at their own `timeout`
/// (they took 15 s), a URL wait needs no answer from the page, and close_tab gets out of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_a_frozen_page_costs_no_more_than_the_timeouts_and_says_it_is_frozen() {
    const LOOP: &str = r#"<!doctype html><title>Loop</title><button onclick="while (true) {}">Freeze</button>
<button onclick="setTimeout(() => { while (true) {} }, 1500)">Later</button>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", LOOP.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let out = bounded(
        &h,
        Duration::from_secs(12),
        json!({"action": "click", "target": {"role": "button", "name": "Freeze"}}),
    )
    .await;
    let e = out.text_content();
    assert!(!out.is_success(), "{e}");
    assert!(e.contains("frozen") && e.contains("close_tab"), "{e}");
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "close_tab"})).await;
    assert!(out.is_success(), "{}", out.text_content());

    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Later"}})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = std::time::Instant::now();
    let out = bounded(
        &h,
        Duration::from_secs(6),
        json!({"action": "wait", "condition": "text", "text": "xyz", "timeout": 1000}),
    )
    .await;
    let e = out.text_content();
    assert!(!out.is_success() && e.contains("timed out after 1000 ms") && e.contains("did not answer"), "{e}");
    let out = bounded(
        &h,
        Duration::from_secs(6),
        json!({"action": "wait", "condition": "url", "url": format!("{base}/"), "timeout": 1000}),
    )
    .await;
    assert!(out.is_success(), "a URL wait needs no script: {}", out.text_content());
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    let out = bounded(&h, Duration::from_secs(10), json!({"action": "close_tab"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    h.session.shutdown().await;
}

/// B8, G16: a folder of the workspace is not opened as Chromium's listing, which would show the
/// names and sizes of files .kodikignore hides (glob does not); its files still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_g16_a_workspace_folder_listing_is_not_shown() {
    let h = harness();
    std::fs::write(h.dir.path().join("secret.txt"), "topsecret").unwrap();
    std::fs::write(h.dir.path().join(".kodikignore"), "secret.txt\n").unwrap();
    std::fs::write(h.dir.path().join("page.html"), "<title>Mine</title><a href=\"./\">Up</a>").unwrap();
    let e = h.err(json!({"action": "open", "url": format!("file://{}/", h.dir.path().display())})).await;
    assert!(e.contains("is a folder") && !e.contains("secret.txt"), "{e}");
    h.ok(json!({"action": "open", "url": format!("file://{}/page.html", h.dir.path().display())})).await;
    // A link to the folder is refused too, and nothing of the listing reaches the result.
    let out = h.call(json!({"action": "click", "target": {"role": "link", "name": "Up"}})).await;
    let c = out.text_content();
    assert!(!out.is_success() && !c.contains("secret.txt"), "{c}");
    h.session.shutdown().await;
}

/// B3, B5: a page whose HTML never finishes streaming but already shows content opens (with the
/// note that it has not finished loading) instead of failing and losing the tab, and actions on
/// it do not each wait 10 s for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b5_a_page_whose_html_never_ends_opens_with_what_arrived() {
    let mut routes = Routes::new();
    routes.insert(
        "/partial",
        (
            common::STREAM,
            "<!doctype html><title>Partial</title><h1>partial content</h1><button>PB</button>".to_string(),
            "",
        ),
    );
    let base = serve(routes).await;
    let h = harness();
    let out = bounded(&h, Duration::from_secs(25), json!({"action": "open", "url": format!("{base}/partial")})).await;
    let o = out.text_content();
    assert!(out.is_success(), "{o}");
    assert!(o.contains("has not finished loading") && o.contains("partial content"), "{o}");
    let out =
        bounded(&h, Duration::from_secs(5), json!({"action": "click", "target": {"role": "button", "name": "PB"}}))
            .await;
    assert!(out.is_success(), "{}", out.text_content());
    h.session.shutdown().await;
}
