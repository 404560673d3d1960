//! JavaScript dialogs incl. prompt() (B6), popups with their opener (B7), downloads and uploads
//! (B8) and credentials (B10) against real Chromium. One browser for the whole file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Routes, harness, serve};
use serde_json::json;

const DIALOGS: &str = r#"<!doctype html><title>Dialogs</title>
<button onclick="document.getElementById('out').textContent = 'answer=' + JSON.stringify(prompt('Your name?', 'Anon'))">Ask</button>
<button onclick="document.getElementById('out').textContent = 'confirmed=' + confirm('Sure?')">Confirm</button>
<p id="out">none</p>"#;

const OPENER: &str = r#"<!doctype html><title>App</title>
<button onclick="window.open('/login', 'login', 'width=400,height=300')">Log in with popup</button>
<button onclick="window.open('/login-auto', 'auto', 'width=400,height=300')">Log in silently</button>
<p id="token">no token</p>
<a href="/file.txt" download>Get report</a>
<input type="file" id="up" aria-label="Attachment" onchange="document.getElementById('picked').textContent = 'picked ' + this.files[0].name + ' ' + this.files[0].size">
<p id="picked"></p>
<form id="login"><input name="user" type="email" aria-label="User"><input name="pass" type="password" aria-label="Pass"></form>
<script>window.addEventListener('message', (e) => { document.getElementById('token').textContent = 'token ' + e.data; });</script>"#;

const LOGIN: &str = r#"<!doctype html><title>Login popup</title>
<button onclick="window.opener.postMessage('token-123', '*'); window.close()">Approve</button>"#;

/// A popup that hands back its result and closes itself without a click, as silent OAuth
/// flows do.
const LOGIN_AUTO: &str = r#"<!doctype html><title>Signing in</title><p>signing in</p>
<script>setTimeout(() => { window.opener.postMessage('token-456', '*'); window.close(); }, 5000)</script>"#;

const MFA: &str = r#"<!doctype html><title>Verify</title>
<button onclick="document.getElementById('code').hidden = false">Continue</button>
<input id="code" autocomplete="one-time-code" aria-label="Code" hidden>
<button onclick="navigator.credentials.get({publicKey: {challenge: new Uint8Array(16), timeout: 1000}}).catch(() => {})">Use passkey</button>"#;

const AUTOPOPUP: &str = r#"<!doctype html><title>Ads</title><script>window.open('/ad')</script><p>page with an ad</p>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b6_b7_b8_b10_dialogs_popups_files_and_credentials() {
    let mut routes = Routes::new();
    routes.insert("/dialogs", ("text/html", DIALOGS.to_string(), ""));
    routes.insert("/app", ("text/html", OPENER.to_string(), ""));
    routes.insert("/login", ("text/html", LOGIN.to_string(), ""));
    routes.insert("/login-auto", ("text/html", LOGIN_AUTO.to_string(), ""));
    routes.insert("/mfa", ("text/html", MFA.to_string(), ""));
    routes.insert("/auto", ("text/html", AUTOPOPUP.to_string(), ""));
    routes.insert("/ad", ("text/html", "<title>Ad</title>".to_string(), ""));
    routes.insert(
        "/file.txt",
        (
            "text/plain",
            "quarterly numbers\n".to_string(),
            "Content-Disposition: attachment; filename=\"report.txt\"\r\n",
        ),
    );
    let base = serve(routes).await;
    let h = harness();

    // B6: prompt() is reported in the result of the click that raised it; the tab is blocked.
    h.ok(json!({"action": "open", "url": format!("{base}/dialogs")})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Ask"}})).await;
    assert!(r.contains(r#"Dialog: prompt "Your name?" (default "Anon")"#), "{r}");
    let e = h.err(json!({"action": "snapshot"})).await;
    assert!(e.contains("prompt dialog is open") && e.contains("handle_dialog"), "{e}");
    let w = h.ok(json!({"action": "wait", "condition": "dialog"})).await;
    assert!(w.contains("Your name?"), "{w}");
    // Accept with an empty string returns the empty string.
    let r = h.ok(json!({"action": "handle_dialog", "accept": true, "prompt_text": ""})).await;
    assert!(r.contains(r#"it returns """#) && r.contains(r#"answer=\"\""#) || r.contains(r#"answer="""#), "{r}");
    // Accept without text keeps the default.
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Ask"}})).await;
    let r = h.ok(json!({"action": "handle_dialog", "accept": true})).await;
    assert!(r.contains(r#"answer="Anon""#), "{r}");
    // Dismiss returns null.
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Ask"}})).await;
    let r = h.ok(json!({"action": "handle_dialog", "accept": false})).await;
    assert!(r.contains("answer=null") && r.contains("returns null"), "{r}");
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Confirm"}})).await;
    let r = h.ok(json!({"action": "handle_dialog", "accept": true})).await;
    assert!(r.contains("confirmed=true"), "{r}");
    let e = h.err(json!({"action": "handle_dialog", "accept": true})).await;
    assert!(e.contains("no JavaScript dialog is open"), "{e}");
    // Navigating away cancels a pending dialog.
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Ask"}})).await;
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/app")})).await;
    assert!(r.contains("Title: App"), "{r}");

    // B7: a popup from a user click becomes a tab with its opener; it can hand back a result.
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Log in with popup"}})).await;
    assert!(r.contains("New tab t2 opened by t1"), "{r}");
    let tabs = h.ok(json!({"action": "list_tabs"})).await;
    assert!(tabs.contains("t2") && tabs.contains("(opened by t1)"), "{tabs}");
    h.ok(json!({"action": "select_tab", "tab_id": "t2"})).await;
    h.ok(json!({"action": "wait", "condition": "text", "text": "Approve"})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Approve"}})).await;
    assert!(r.contains("Tab t2 closed itself. The current tab is now t1."), "{r}");
    let s = h.ok(json!({"action": "wait", "condition": "text", "text": "token token-123"})).await;
    assert!(s.contains("on the page"), "{s}");
    // B5, B7: a wait on a popup that closes itself ends when it closes, saying so and which tab
    // is current now, instead of running into its timeout.
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Log in silently"}})).await;
    assert!(r.contains("New tab t3 opened by t1"), "{r}");
    h.ok(json!({"action": "select_tab", "tab_id": "t3"})).await;
    let e = h.err(json!({"action": "wait", "condition": "text", "text": "never on the page", "timeout": 20000})).await;
    assert!(
        e.contains("tab t3 closed itself") && e.contains("the current tab is now t1") && !e.contains("timed out"),
        "{e}"
    );
    let s = h.ok(json!({"action": "wait", "condition": "text", "text": "token token-456"})).await;
    assert!(s.contains("on the page"), "{s}");
    let tabs = h.ok(json!({"action": "list_tabs"})).await;
    assert!(!tabs.contains("t3"), "{tabs}");
    // A window.open without a user gesture is blocked and reported.
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/auto")})).await;
    assert!(r.contains("Blocked popup(s) opened without a user gesture") && r.contains("/ad"), "{r}");
    let tabs = h.ok(json!({"action": "list_tabs"})).await;
    assert!(!tabs.contains("\"Ad\""), "{tabs}");

    // B8: downloads land in the session's folder, reported with name, size and path.
    h.ok(json!({"action": "navigate", "url": format!("{base}/app")})).await;
    h.ok(json!({"action": "click", "target": {"role": "link", "name": "Get report"}})).await;
    let out = h.call(json!({"action": "wait", "condition": "download"})).await;
    let text = out.text_content();
    assert!(out.is_success() && text.contains("report.txt") && text.contains("(18 bytes)"), "{text}");
    let path = out.meta["download"]["path"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "quarterly numbers\n");

    // B8: uploads only from workspace files that .kodikignore does not hide.
    std::fs::write(h.dir.path().join("cv.pdf"), b"%PDF-1.4 fake").unwrap();
    std::fs::write(h.dir.path().join("secret.key"), b"k").unwrap();
    std::fs::write(h.dir.path().join(".kodikignore"), "*.key\n").unwrap();
    let r = h.ok(json!({"action": "upload", "files": ["cv.pdf"], "target": {"label": "Attachment"}})).await;
    assert!(r.contains("cv.pdf"), "{r}");
    h.ok(json!({"action": "wait", "condition": "text", "text": "picked cv.pdf 13"})).await;
    // A click on the input opens a file chooser, which is reported and answered with upload.
    h.ok(json!({"action": "click", "target": {"label": "Attachment"}})).await;
    let w = h.ok(json!({"action": "wait", "condition": "file_chooser", "timeout": 3000})).await;
    assert!(w.contains("file chooser is open (one file)"), "{w}");
    std::fs::write(h.dir.path().join("notes.txt"), b"hello").unwrap();
    let r = h.ok(json!({"action": "upload", "files": ["notes.txt"]})).await;
    assert!(r.contains("Answered the file chooser with notes.txt"), "{r}");
    h.ok(json!({"action": "wait", "condition": "text", "text": "picked notes.txt 5"})).await;
    let e = h.err(json!({"action": "upload", "files": ["secret.key"], "target": {"label": "Attachment"}})).await;
    assert!(e.contains("secret.key"), "{e}");
    let e = h.err(json!({"action": "upload", "files": ["/etc/passwd"], "target": {"label": "Attachment"}})).await;
    assert!(e.contains("/etc/passwd"), "{e}");

    // B10: the model sees a label and an id; the secret never appears in any result.
    let origin = base.clone();
    let id = h.session.credentials().add(&origin, "Staging admin", "admin@example.com", "pa55-w0rd-XYZ");
    h.session.credentials().add("http://other.example", "Elsewhere", "x", "other-secret");
    let l = h.ok(json!({"action": "list_credentials"})).await;
    assert!(l.contains("Staging admin") && l.contains(&id) && !l.contains("Elsewhere"), "{l}");
    assert!(!l.contains("pa55") && !l.contains("admin@example.com"), "{l}");
    // Using a saved login needs its own approval, which a policy can withhold.
    let mut strict = h.cx.clone();
    strict.approver =
        std::sync::Arc::new(kodik_core::ApprovalPolicy::auto_approve_all().tool("browser.fill_credential", false));
    let denied = kodik_core::Tool::call(
        &h.tool,
        json!({"action": "fill_credential", "credential_id": id, "target": {"css": "#login"}}),
        &strict,
    )
    .await;
    assert!(!denied.is_success() && denied.text_content().contains("was not approved"), "{}", denied.text_content());
    let f = h.ok(json!({"action": "fill_credential", "credential_id": id, "target": {"css": "#login"}})).await;
    assert!(!f.contains("pa55-w0rd-XYZ"), "{f}");
    let v = h.ok(json!({"action": "eval", "expression": "element.value", "target": {"label": "Pass"}})).await;
    assert!(v.contains("[redacted]") && !v.contains("pa55-w0rd-XYZ"), "{v}");
    let snap = h.ok(json!({"action": "snapshot"})).await;
    assert!(!snap.contains("pa55-w0rd-XYZ"), "{snap}");
    let other = h.session.credentials().for_origin("http://other.example")[0].id().to_string();
    let e = h.err(json!({"action": "fill_credential", "credential_id": other})).await;
    assert!(e.contains("belongs to http://other.example") && !e.contains("other-secret"), "{e}");
    let a = h.ok(json!({"action": "activity"})).await;
    assert!(!a.contains("pa55-w0rd-XYZ") && a.contains("fill_credential"), "{a}");

    // B11: a one-time-code field pauses automation until the host hands control back.
    h.ok(json!({"action": "navigate", "url": format!("{base}/mfa")})).await;
    let r = h.call(json!({"action": "click", "target": {"role": "button", "name": "Continue"}})).await;
    assert!(
        r.text_content().contains("takeover_required")
            && r.meta["takeover_required"]["reason"].as_str().unwrap().contains("one-time code"),
        "{}",
        r.text_content()
    );
    let e = h.err(json!({"action": "fill", "target": {"label": "Code"}, "value": "123456"})).await;
    assert!(e.contains("automation is paused"), "{e}");
    assert!(h.session.takeover().is_some());
    h.session.resume();
    h.ok(json!({"action": "navigate", "url": format!("{base}/mfa")})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Use passkey"}})).await;
    assert!(r.contains("takeover_required") && r.contains("passkey"), "{r}");
    h.session.resume();

    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b7_the_opener_stays_live_after_its_popup_opens() {
    // An animation frame runs only in the visible tab: in a background tab this never updates.
    const PAGE: &str = r#"<!doctype html><title>Opener</title>
<a href="/popup" target="_blank">Open popup</a>
<button onclick="requestAnimationFrame(() => { document.getElementById('out').textContent = 'frame ' + document.visibilityState; })">Go</button>
<p id="out">none</p>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", PAGE.to_string(), ""));
    routes.insert("/popup", ("text/html", "<title>Popup</title><h1>I am popup</h1>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let r = h.ok(json!({"action": "click", "target": {"role": "link", "name": "Open popup"}})).await;
    assert!(r.contains("New tab t2"), "{r}");
    // The opener stays the current tab, and is the one shown: its page runs as before.
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Go"}})).await;
    assert!(r.contains("frame visible"), "{r}");
    h.ok(json!({"action": "select_tab", "tab_id": "t2"})).await;
    h.ok(json!({"action": "select_tab", "tab_id": "t1"})).await;
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_b7_wait_popup_after_the_click_that_opened_it_finds_it() {
    const PAGE: &str = r#"<!doctype html><title>Opener</title>
<button onclick="window.open('/popup', 'w2')">WinOpen</button>
<button onclick="setTimeout(() => window.open('/popup', 'w3'), 300)">Later</button>"#;
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", PAGE.to_string(), ""));
    routes.insert("/popup", ("text/html", "<title>Popup</title><h1>I am popup</h1>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "WinOpen"}})).await;
    let w = h.ok(json!({"action": "wait", "condition": "popup", "timeout": 3000})).await;
    assert!(w.contains("New tab t2 opened") && w.contains("/popup"), "{w}");
    // Reported once: a second wait waits for a new one.
    let e = h.err(json!({"action": "wait", "condition": "popup", "timeout": 300})).await;
    assert!(e.contains("timed out"), "{e}");
    // A popup that opens while the wait runs is found as before.
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Later"}})).await;
    let w = h.ok(json!({"action": "wait", "condition": "popup", "timeout": 5000})).await;
    assert!(w.contains("New tab t3 opened"), "{w}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b6_results_show_a_multi_select_choice_a_held_navigation_and_no_title_twice() {
    const MS: &str = r#"<!doctype html><title>MS</title>
<label for="m">Multi</label><select id="m" multiple><option>A</option><option>B</option><option>C</option></select>
<input aria-label="I" oninput="window.onbeforeunload = (e) => { e.preventDefault(); e.returnValue = 1; }">
<button onclick="alert('hi')">Alert</button>
<a href="/other">Other</a>"#;
    let mut routes = Routes::new();
    routes.insert("/ms", ("text/html", MS.to_string(), ""));
    routes.insert("/other", ("text/html", "<title>Other</title><h1>Elsewhere</h1>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/ms")})).await;
    // The choice of a multiple select is in the snapshot, as a single select's is.
    let r = h.ok(json!({"action": "select", "target": {"label": "Multi"}, "values": ["A", "C"]})).await;
    let s = h.ok(json!({"action": "snapshot"})).await;
    assert!(s.contains(r#"listbox "Multi""#) && s.contains(r#": "A, C" [options: "A", "B", "C"]"#), "{r}\n{s}");
    // "an alert", and a result that says the title once.
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Alert"}})).await;
    let e = h.err(json!({"action": "snapshot"})).await;
    assert!(e.contains("an alert dialog is open"), "{e}");
    let r = h.ok(json!({"action": "handle_dialog", "accept": true})).await;
    assert_eq!(r.matches("Title: MS").count(), 1, "{r}");
    let r = h.ok(json!({"action": "click", "target": {"role": "link", "name": "Other"}})).await;
    assert_eq!(r.matches("Title: Other").count(), 1, "{r}");
    h.ok(json!({"action": "navigate", "url": format!("{base}/ms")})).await;
    // A navigation a beforeunload dialog holds has not happened, and the result says so.
    h.ok(json!({"action": "fill", "target": {"label": "I"}, "value": "dirty"})).await;
    h.ok(json!({"action": "click", "target": {"label": "Multi"}})).await;
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/other")})).await;
    assert!(r.starts_with("navigate has not happened yet: the page opened a beforeunload dialog"), "{r}");
    assert!(!r.contains("navigate done"), "{r}");
    h.session.shutdown().await;
}

/// B5, B8: `navigate` or `open` to a URL that is a download succeeds, saying it is a download,
/// where the file was saved, and that the tab keeps its page (it failed as
/// "did not load: net::ERR_ABORTED", and after `open` the download could not be waited for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_b8_navigating_to_a_download_says_where_the_file_went_and_keeps_the_page() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", "<!doctype html><title>Home</title><h1>home page</h1>".to_string(), ""));
    routes.insert(
        "/dl",
        ("application/octet-stream", "x".repeat(1000), "Content-Disposition: attachment; filename=\"data.bin\"\r\n"),
    );
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    let out = h.call(json!({"action": "navigate", "url": format!("{base}/dl")})).await;
    let n = out.text_content();
    assert!(out.is_success(), "{n}");
    assert!(n.contains(&format!("{base}/dl is a download, not a page")), "{n}");
    assert!(n.contains("Download completed: data.bin (1000 bytes) at "), "{n}");
    assert!(n.contains("home page"), "the tab keeps its page: {n}");
    let path = out.meta["download"]["path"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(&path).unwrap().len(), 1000);

    let out = h.call(json!({"action": "open", "url": format!("{base}/dl")})).await;
    let o = out.text_content();
    assert!(out.is_success(), "{o}");
    assert!(o.contains("is a download, not a page") && o.contains("data.bin (1000 bytes)"), "{o}");
    let l = h.ok(json!({"action": "list_tabs"})).await;
    assert!(l.contains("2 tab(s)"), "{l}");
    h.session.shutdown().await;
}

/// B6: `navigate` away from a page that keeps opening alerts says the navigation did not happen
/// and that close_tab gets rid of the page (it said to accept the alert "to leave the page",
/// which an alert never does), and close_tab does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b6_navigate_from_an_alert_loop_says_it_did_not_happen_and_close_tab_gets_out() {
    const LOOP: &str = r#"<!doctype html><title>AlertLoop</title><h1>al</h1><button onclick="while (true) { alert(1) }">Loop</button>"#;
    let mut routes = Routes::new();
    routes.insert("/al", ("text/html", LOOP.to_string(), ""));
    routes.insert("/other", ("text/html", "<title>Other</title><h1>Elsewhere</h1>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/al")})).await;
    h.ok(json!({"action": "click", "target": {"role": "button", "name": "Loop"}})).await;
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/other")})).await;
    assert!(r.starts_with("navigate did not happen") && r.contains("close_tab"), "{r}");
    assert!(!r.contains("to leave the page"), "{r}");
    let c = h.ok(json!({"action": "close_tab"})).await;
    assert!(c.contains("Closed tab t1"), "{c}");
    h.session.shutdown().await;
}
