//! A crashed renderer and a killed browser (B9), storage modes (B1), preview with a dev server
//! (B2) and the remaining waits (B5) against real Chromium.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::{Routes, harness, serve};
use serde_json::json;

const COOKIE: &str = r#"<!doctype html><title>Cookie</title><p id="c"></p>
<script>if (location.search === '?set') document.cookie = 'sid=abc123; max-age=3600';
document.getElementById('c').textContent = 'cookies: [' + document.cookie + ']';</script>"#;

const LATER: &str = r#"<!doctype html><title>Later</title>
<button id="go" disabled>Go</button><p id="spin">Loading…</p>
<script>setTimeout(() => { document.getElementById('go').disabled = false; document.getElementById('spin').remove();
  history.pushState({}, '', '/later/done'); fetch('/slow-asset'); }, 300);</script>"#;

/// The `TMPDIR` a running Chromium was started with.
fn browser_temp_dir(pid: u32) -> std::path::PathBuf {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let var = environ.split(|b| *b == 0).find_map(|v| v.strip_prefix(b"TMPDIR=")).expect("Chromium has a TMPDIR");
    std::path::PathBuf::from(String::from_utf8(var.to_vec()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_b5_b9_crash_and_kill_recovery_storage_modes_and_waits() {
    let mut routes = Routes::new();
    routes.insert("/cookie", ("text/html", COOKIE.to_string(), ""));
    routes.insert("/later", ("text/html", LATER.to_string(), ""));
    routes.insert("/slow-asset", ("text/plain", "x".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();

    // B5: element state, URL and network idle waits, each bounded.
    h.ok(json!({"action": "open", "url": format!("{base}/later")})).await;
    let w = h.ok(json!({"action": "wait", "condition": "element", "state": "enabled", "target": {"role": "button", "name": "Go"}})).await;
    assert!(w.contains("is \"enabled\""), "{w}");
    h.ok(json!({"action": "wait", "condition": "element", "state": "detached", "target": {"css": "#spin"}})).await;
    h.ok(json!({"action": "wait", "condition": "url", "url": "*/later/done"})).await;
    h.ok(json!({"action": "wait", "condition": "url", "url": "/later\\/d[aeiou]ne$/"})).await;
    let e = h.err(json!({"action": "wait", "condition": "url", "url": "/([/"})).await;
    assert!(e.contains("not a valid regular expression"), "{e}");
    h.ok(json!({"action": "wait", "condition": "network_idle", "timeout": 5000})).await;
    let e = h.err(json!({"action": "wait", "condition": "text", "text": "never shown", "timeout": 300})).await;
    assert!(e.contains("timed out after 300 ms"), "{e}");
    // A cancelled call stops at once with status cancelled, however long its wait.
    let mut cx = h.cx.clone();
    cx.cancel = kodik_core::CancellationToken::new();
    let token = cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let started = std::time::Instant::now();
    let out = kodik_core::Tool::call(
        &h.tool,
        json!({"action": "wait", "condition": "text", "text": "never shown", "timeout": 60000}),
        &cx,
    )
    .await;
    assert_eq!(out.status, kodik_core::ToolStatus::Cancelled, "{}", out.text_content());
    assert!(started.elapsed() < Duration::from_secs(5));

    // B1: global storage keeps cookies; an ephemeral tab does not see them.
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/cookie?set")})).await;
    assert!(r.contains("cookies: [sid=abc123]"), "{r}");
    let r = h.ok(json!({"action": "open", "url": format!("{base}/cookie"), "storage": "ephemeral"})).await;
    assert!(r.contains("cookies: []"), "ephemeral tab saw global cookies: {r}");
    h.ok(json!({"action": "close_tab"})).await;

    // B9: a crashed renderer is reloaded at its last URL on the next action, and says so.
    h.ok(json!({"action": "navigate", "url": format!("{base}/cookie")})).await;
    let _ = h.call(json!({"action": "navigate", "url": "chrome://crash", "timeout": 3000})).await;
    let r = h.ok(json!({"action": "snapshot"})).await;
    assert!(r.contains("had crashed; it was reloaded"), "{r}");
    assert!(r.contains("cookies: [sid=abc123]"), "{r}");

    // B9: a killed browser is restarted once and the tab restored at its last URL.
    let pid = h.session.browser_pid().await.unwrap();
    // Chromium keeps its shared memory in files under TMPDIR, which a killed browser leaves
    // behind: its TMPDIR is a folder of the session's own, gone once the browser is replaced.
    let temp = browser_temp_dir(pid);
    assert!(temp.is_dir() && temp.starts_with(std::env::temp_dir()), "{}", temp.display());
    std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = h.ok(json!({"action": "snapshot"})).await;
    assert!(r.contains("The browser had stopped; it was restarted and its tabs restored"), "{r}");
    assert_ne!(h.session.browser_pid().await.unwrap(), pid);
    assert!(!temp.exists(), "the killed browser's temporary folder was left: {}", temp.display());
    let temp = browser_temp_dir(h.session.browser_pid().await.unwrap());

    // B1: global storage is persistent: a new session on the same profile keeps the cookie.
    h.ok(json!({"action": "navigate", "url": format!("{base}/cookie?set")})).await;
    h.session.shutdown().await;
    assert!(!temp.exists(), "a closed browser's temporary folder was left: {}", temp.display());
    let h = common::harness_with_profiles(h);
    let r = h.ok(json!({"action": "open", "url": format!("{base}/cookie")})).await;
    assert!(r.contains("cookies: [sid=abc123]"), "{r}");
    // A second session on the same profile at the same time gets a temporary one, and says so.
    let other = std::sync::Arc::new(kodik_browser::BrowserSession::new(kodik_browser::BrowserOptions {
        profile_root: Some(h.profiles.path().to_path_buf()),
        ..Default::default()
    }));
    let tool = kodik_browser::BrowserTool::new(other.clone());
    let out = kodik_core::Tool::call(&tool, json!({"action": "open", "url": format!("{base}/cookie")}), &h.cx).await;
    let text = out.text_content();
    assert!(
        out.is_success() && text.contains("is in use by another Chromium") && text.contains("cookies: []"),
        "{text}"
    );
    other.shutdown().await;

    // clear_storage empties the persistent profile.
    h.ok(json!({"action": "clear_storage", "storage": "global"})).await;
    let r = h.ok(json!({"action": "reload"})).await;
    assert!(r.contains("cookies: []"), "{r}");
    let e = h.err(json!({"action": "clear_storage", "storage": "ephemeral"})).await;
    assert!(e.contains("ephemeral storage is dropped with its tab"), "{e}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b2_preview_starts_and_stops_its_dev_server() {
    let h = harness();
    std::fs::create_dir(h.dir.path().join("site")).unwrap();
    std::fs::write(h.dir.path().join("site/index.html"), "<title>My app</title><h1>Hello preview</h1>").unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let r = h
        .ok(json!({"action": "preview", "url": url, "command": format!("python3 -m http.server {port} --bind 127.0.0.1"), "workdir": "site"}))
        .await;
    assert!(r.contains("dev server started") && r.contains(r#"heading "Hello preview""#), "{r}");
    h.ok(json!({"action": "close_preview"})).await;
    // The server is gone with the preview.
    let mut stopped = false;
    for _ in 0..30 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "the dev server still answers after close_preview");
    // A server command that exits is reported instead of waiting out the timeout.
    let e = h.err(json!({"action": "preview", "url": url, "command": "exit 3", "timeout": 20000})).await;
    assert!(e.contains("exited") && e.contains("before"), "{e}");
    h.session.shutdown().await;
}

/// B2: a dev-server command for a URL another server already answers is refused before it
/// starts (the old server's page was shown as "dev server started"), and a command that dies
/// is reported with its last output (it said only "exited (exit status: 2)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b2_preview_refuses_a_taken_port_and_quotes_a_dead_servers_output() {
    let h = harness();
    let old = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = format!("http://127.0.0.1:{}/", old.local_addr().unwrap().port());
    let e = h.err(json!({"action": "preview", "url": taken, "command": "sleep 30"})).await;
    assert!(e.contains("already answers before `sleep 30` started"), "{e}");
    let free = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/", l.local_addr().unwrap().port())
    };
    let e = h
        .err(json!({"action": "preview", "url": free, "command": "echo starting; echo 'no such script: dev.py' >&2; exit 2", "timeout": 20000}))
        .await;
    assert!(e.contains("exited") && e.contains("Its last output:") && e.contains("no such script: dev.py"), "{e}");
    h.session.shutdown().await;
}

const JAR: &str = r#"<!doctype html><title>Jar</title><p id="c"></p>
<script>const k = new URLSearchParams(location.search).get('set'); if (k) document.cookie = k + '=1; max-age=3600';
document.getElementById('c').textContent = 'cookies: [' + document.cookie + ']';</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_untrusted_workspace_gets_only_ephemeral_storage_and_leaves_the_profile_alone() {
    let mut routes = Routes::new();
    routes.insert("/jar", ("text/html", JAR.to_string(), ""));
    let base = serve(routes).await;

    // A trusted session leaves a cookie in the global profile.
    let h = harness();
    let r = h.ok(json!({"action": "open", "url": format!("{base}/jar?set=trusted")})).await;
    assert!(r.contains("cookies: [trusted=1]"), "{r}");
    h.session.shutdown().await;

    // The same workspace, now untrusted: even an explicit global tab starts empty, says why,
    // and runs outside the persistent profile folder.
    let mut h = common::harness_with_profiles(h);
    h.cx.workspace = h.cx.workspace.clone().with_trusted(false);
    let r = h.ok(json!({"action": "open", "url": format!("{base}/jar?set=untrusted"), "storage": "global"})).await;
    assert!(r.contains("cookies: [untrusted=1]") && !r.contains("trusted=1;"), "{r}");
    assert!(r.contains("Storage: ephemeral, since this workspace is not trusted"), "{r}");
    let profile = h.session.profile_dir().await.unwrap();
    assert!(!profile.starts_with(h.profiles.path()), "untrusted session used {}", profile.display());
    let e = h.err(json!({"action": "clear_storage", "storage": "global"})).await;
    assert!(e.contains("this workspace is not trusted"), "{e}");
    h.session.shutdown().await;

    // Trusted again: the global profile still has its own cookie and none of the untrusted one.
    let mut h = common::harness_with_profiles(h);
    h.cx.workspace = h.cx.workspace.clone().with_trusted(true);
    let r = h.ok(json!({"action": "open", "url": format!("{base}/jar")})).await;
    assert!(r.contains("cookies: [trusted=1]"), "{r}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b9_a_tab_only_opened_is_restored_at_its_page_and_a_failing_call_says_the_browser_restarted() {
    let mut routes = Routes::new();
    routes.insert("/form", ("text/html", "<title>Form</title><button>Submit</button>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/form")})).await;
    let pid = h.session.browser_pid().await.unwrap();
    std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The first call after the restart fails on its own terms, and still says the browser restarted.
    let e = h.err(json!({"action": "click", "target": {"role": "button", "name": "Missing"}})).await;
    assert!(
        e.contains("it was restarted and its tabs restored (t1 at {base}/form)".replace("{base}", &base).as_str()),
        "{e}"
    );
    assert!(e.contains("no element matches"), "{e}");
    let r = h.ok(json!({"action": "click", "target": {"role": "button", "name": "Submit"}})).await;
    assert!(r.contains("Clicked button \"Submit\""), "{r}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_a_profile_another_chromium_holds_unseen_falls_back_to_a_temporary_profile() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", "<title>Home</title><h1>Home</h1>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    // A lock the start-up check cannot see live (a Chromium elsewhere, or one that took the
    // profile a moment after the check): Chromium refuses the profile and exits.
    let global = h.profiles.path().join("global");
    std::fs::create_dir_all(&global).unwrap();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    std::os::unix::fs::symlink(format!("otherhost-{}", pid_max + 5), global.join("SingletonLock")).unwrap();
    let r = h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    assert!(r.contains("is in use by another Chromium") && r.contains("temporary profile"), "{r}");
    assert!(r.contains("heading \"Home\""), "{r}");
    let dir = h.session.profile_dir().await.unwrap();
    assert!(!dir.starts_with(h.profiles.path()), "{}", dir.display());
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_clear_storage_deletes_every_origins_site_data_with_or_without_a_running_browser() {
    const STORE: &str = r#"<!doctype html><title>Store</title><p id="s"></p>
<script>document.getElementById('s').textContent = 'stored ' + (localStorage.getItem('k') || 'none'); localStorage.setItem('k', 'set');</script>"#;
    let mut routes = Routes::new();
    routes.insert("/store", ("text/html", STORE.to_string(), ""));
    routes.insert("/other", ("text/html", "<title>Other</title><p>elsewhere</p>".to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    let r = h.ok(json!({"action": "open", "url": format!("{base}/store"), "storage": "workspace"})).await;
    assert!(r.contains("stored none"), "{r}");
    // Stored data of an origin no tab shows right now is cleared too.
    let other = base.replace("127.0.0.1", "localhost");
    h.ok(json!({"action": "navigate", "url": format!("{other}/other")})).await;
    let r = h.ok(json!({"action": "clear_storage", "storage": "workspace"})).await;
    assert!(r.contains("Cleared cookies and site data of the Workspace profile"), "{r}");
    assert!(r.contains(&format!("t1 at {other}/other")), "{r}");
    let r = h.ok(json!({"action": "navigate", "url": format!("{base}/store")})).await;
    assert!(r.contains("stored none"), "{r}");
    h.session.shutdown().await;

    // With no browser running, the profile the launcher uses is cleared.
    let h = common::harness_with_profiles(h);
    h.ok(json!({"action": "clear_storage", "storage": "workspace"})).await;
    let r = h.ok(json!({"action": "open", "url": format!("{base}/store"), "storage": "workspace"})).await;
    assert!(r.contains("stored none"), "{r}");
    h.session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_b9_folders_left_by_a_session_whose_process_died_are_removed_by_the_next_one() {
    let mut routes = Routes::new();
    routes.insert("/", ("text/html", "<title>Home</title><h1>Home</h1>".to_string(), ""));
    let base = serve(routes).await;
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let link = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let ns: u64 = link.to_str().unwrap().trim_start_matches("pid:[").trim_end_matches(']').parse().unwrap();
    let tmp = std::env::temp_dir();
    let dead = tmp.join(format!("kodik-browser-tmp-{}n{ns}-b8test", pid_max + 7));
    let dead_downloads = tmp.join(format!("kodik-browser-downloads-{}n{ns}-b8test", pid_max + 7));
    let live = tmp.join(format!("kodik-browser-tmp-{}n{ns}-b8test", std::process::id()));
    // A process of another PID namespace (another container sharing /tmp) cannot be seen here:
    // its folders are not judged by a pid that means nothing in this namespace.
    let other_ns = tmp.join(format!("kodik-browser-downloads-{}n{}-b8test", pid_max + 7, ns + 1));
    for d in [&dead, &dead_downloads, &live, &other_ns] {
        std::fs::create_dir_all(d.join("org.chromium.Chromium.x")).unwrap();
    }
    let h = harness();
    h.ok(json!({"action": "open", "url": format!("{base}/")})).await;
    assert!(!dead.exists() && !dead_downloads.exists(), "a dead session's folders were left");
    assert!(live.exists(), "a live process's folder was removed");
    assert!(other_ns.exists(), "a folder of another PID namespace was removed");
    std::fs::remove_dir_all(&live).unwrap();
    std::fs::remove_dir_all(&other_ns).unwrap();
    // The session's own folders carry its process id.
    let pid = h.session.browser_pid().await.unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let var = environ.split(|b| *b == 0).find_map(|v| v.strip_prefix(b"TMPDIR=")).unwrap();
    let name = String::from_utf8(var.to_vec()).unwrap();
    assert!(name.contains(&format!("kodik-browser-tmp-{}n{ns}-", std::process::id())), "{name}");
    h.session.shutdown().await;
}
