//! `browser` through `kodik call` and `kodik batch` (one session keeps its tab between lines),
//! against real Chromium and a page served on 127.0.0.1 (B3, B4).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use serde_json::Value;

const PAGE: &str = r#"<!doctype html><title>Form</title>
<label for="n">Name</label><input id="n">
<button onclick="document.getElementById('o').textContent = 'Hello ' + document.getElementById('n').value">Greet</button>
<p id="o"></p>"#;

/// Serves PAGE for every request on an ephemeral port.
fn serve() -> String {
    serve_page(PAGE)
}

/// Serves `page` for every request on an ephemeral port.
fn serve_page(page: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf);
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = sock.write_all(resp.as_bytes());
        }
    });
    format!("http://{addr}/")
}

fn kodik(cache: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kodik"));
    // The browser's persistent profile lives under the cache folder; keep it per test.
    c.env("XDG_CACHE_HOME", cache);
    c
}

fn browser_processes(cache: &std::path::Path) -> Vec<String> {
    let needle = cache.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
        if cmd.contains(&needle) && !zombie {
            found.push(cmd);
        }
    }
    found
}

#[test]
fn b3_b4_browser_through_call_and_batch_keeps_the_tab_between_lines() {
    let url = serve();
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let w = ws.path().to_str().unwrap();

    let args = serde_json::json!({"action": "open", "url": url}).to_string();
    let out = kodik(cache.path()).args(["call", "--workspace", w, "browser", &args]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(r#"textbox "Name" [ref="#) && text.contains(r#"button "Greet""#), "{text}");

    let lines = [
        serde_json::json!({"id": "o", "name": "browser", "args": {"action": "open", "url": url}}),
        serde_json::json!({"id": "f", "name": "browser", "args": {"action": "fill", "target": {"label": "Name"}, "value": "Ada"}}),
        serde_json::json!({"id": "c", "name": "browser", "args": {"action": "click", "target": {"role": "button", "name": "Greet"}}}),
        serde_json::json!({"id": "x", "name": "browser", "args": {"action": "click", "target": {"ref": "e99"}}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let results = common::run_batch(kodik(cache.path()), w, &input);
    let statuses: Vec<&str> = results.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["success", "success", "success", "error"], "{results:#?}");
    let clicked = results[2]["content"][0]["text"].as_str().unwrap();
    assert!(clicked.contains("Hello Ada"), "the tab was not kept between lines: {clicked}");
    assert!(results[3]["content"][0]["text"].as_str().unwrap().contains("take a new snapshot"));

    // Nothing of the browser outlives the command.
    let mut left = browser_processes(cache.path());
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = browser_processes(cache.path());
    }
    assert!(left.is_empty(), "browser processes left: {left:?}");
}

/// One `kodik [FLAGS] call browser ARGS` in `ws`: its exit code and the result's text.
fn call_browser(cache: &std::path::Path, ws: &std::path::Path, flags: &[&str], args: &Value) -> (i32, String) {
    let out = kodik(cache)
        .args(flags)
        .args(["call", "--workspace", ws.to_str().unwrap(), "browser", &args.to_string()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), v["content"][0]["text"].as_str().unwrap_or_default().to_string())
}

const COOKIE_PAGE: &str = r#"<!doctype html><title>Cookie</title><p id="c"></p>
<script>document.getElementById('c').textContent = 'cookies:[' + document.cookie + ']';
document.cookie = 'seen=yes; max-age=3600; path=/';</script>"#;

/// B1: the default (global) storage persists: a cookie set during one `kodik call` is there in
/// the next, because the command ends Chromium cleanly instead of killing it.
#[test]
fn b1_a_cookie_set_in_one_kodik_call_is_there_in_the_next() {
    let open = serde_json::json!({"action": "open", "url": serve_page(COOKIE_PAGE)});
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (code, first) = call_browser(cache.path(), ws.path(), &[], &open);
    assert!(code == 0 && first.contains("cookies:[]"), "{code}: {first}");
    let (code, second) = call_browser(cache.path(), ws.path(), &[], &open);
    assert!(
        code == 0 && second.contains("cookies:[seen=yes]"),
        "the cookie did not survive the first command: {second}"
    );
}

/// B1: `kodik --untrusted` keeps nothing of an untrusted workspace: the cookie of one call is
/// gone in the next, and clearing the saved profiles is refused.
#[test]
fn b1_untrusted_flag_keeps_no_cookie_between_calls_and_refuses_clear_storage() {
    let open = serde_json::json!({"action": "open", "url": serve_page(COOKIE_PAGE)});
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let (code, text) = call_browser(cache.path(), ws.path(), &["--untrusted"], &open);
        assert!(code == 0 && text.contains("cookies:[]"), "round {round}, a cookie was kept: {code}: {text}");
    }
    let (code, text) = call_browser(
        cache.path(),
        ws.path(),
        &["--untrusted"],
        &serde_json::json!({"action": "clear_storage", "storage": "global"}),
    );
    assert!(code != 0 && text.contains("not trusted"), "{code}: {text}");
}
