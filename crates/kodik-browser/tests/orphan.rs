//! A host that dies without ending its browser (SIGKILL) does not leave Chromium running with
//! the persistent profile locked (B1, B9). The host is this test binary, started again as a
//! child process that opens a page and waits to be killed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::io::BufRead as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Routes, harness, harness_with_profiles, serve};
use serde_json::json;

const COOKIE: &str = r#"<!doctype html><title>Cookie</title><p id="c"></p>
<script>if (location.search === '?set') document.cookie = 'sid=abc123; max-age=3600';
document.getElementById('c').textContent = 'cookies: [' + document.cookie + ']';</script>"#;

/// Set in the child: the URL to open on the profiles under [`PROFILES`].
const URL: &str = "KODIK_BROWSER_TEST_HOST_URL";
const PROFILES: &str = "KODIK_BROWSER_TEST_HOST_PROFILES";
const WORKSPACE: &str = "KODIK_BROWSER_TEST_HOST_WORKSPACE";
const TEST: &str = "b1_b9_a_browser_whose_host_was_killed_goes_and_the_next_session_keeps_the_saved_profile";

/// The pid the profile's `SingletonLock` names (`host-pid`), while that process lives.
fn holder(profile: &Path) -> Option<u32> {
    let target = std::fs::read_link(profile.join("SingletonLock")).ok()?;
    let pid: u32 = target.to_string_lossy().rsplit('-').next()?.parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// Processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(&needle))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_b9_a_browser_whose_host_was_killed_goes_and_the_next_session_keeps_the_saved_profile() {
    if let (Ok(url), Ok(profiles), Ok(workspace)) =
        (std::env::var(URL), std::env::var(PROFILES), std::env::var(WORKSPACE))
    {
        // The host's part: open the page on the global profile, say so, wait to be killed.
        let ws = kodik_core::Workspace::new(&workspace).unwrap();
        let session = std::sync::Arc::new(kodik_browser::BrowserSession::new(kodik_browser::BrowserOptions {
            profile_root: Some(profiles.into()),
            workspace_key: Some(workspace.clone()),
            ..Default::default()
        }));
        let tool = kodik_browser::BrowserTool::new(session.clone());
        let cx = kodik_core::ToolContext::new(ws);
        let out = kodik_core::Tool::call(&tool, json!({"action": "open", "url": url}), &cx).await;
        println!("OPENED {}", out.text_content().replace('\n', " "));
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }

    let mut routes = Routes::new();
    routes.insert("/cookie", ("text/html", COOKIE.to_string(), ""));
    let base = serve(routes).await;
    let h = harness();
    let profile = h.profiles.path().join("global");
    // A login saved by an earlier session that ended normally.
    let r = h.ok(json!({"action": "open", "url": format!("{base}/cookie?set")})).await;
    assert!(r.contains("cookies: [sid=abc123]"), "{r}");
    h.session.shutdown().await;
    let mut host = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(URL, format!("{base}/cookie"))
        .env(PROFILES, h.profiles.path())
        .env(WORKSPACE, h.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(host.stdout.take().unwrap()).lines();
    // libtest may print "test NAME ... " on the same line first.
    let opened = lines
        .find_map(|l| l.ok().and_then(|l| l.split_once("OPENED ").map(|(_, rest)| rest.to_string())))
        .expect("the host never opened the page");
    assert!(opened.contains("cookies: [sid=abc123]"), "{opened}");
    let chromium = holder(&profile).expect("no Chromium holds the global profile");
    assert!(!processes_naming(&profile).is_empty());

    host.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs in the host
    host.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while (Path::new(&format!("/proc/{chromium}")).exists() || !processes_naming(&profile).is_empty())
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = processes_naming(&profile);
    if !left.is_empty() {
        for pid in &left {
            let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        panic!("the killed host's Chromium was left running: {left:?}");
    }

    // A later session gets the saved profile, with its saved login.
    let h = harness_with_profiles(h);
    let r = h.ok(json!({"action": "open", "url": format!("{base}/cookie")})).await;
    assert!(!r.contains("in use by another Chromium"), "{r}");
    assert!(r.contains("cookies: [sid=abc123]"), "{r}");
    h.session.shutdown().await;
}
