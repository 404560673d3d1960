//! web_fetch and web_search through `kodik call`, `kodik batch` and `kodik serve`, against a
//! real HTTP server on 127.0.0.1 (W1, W2, W5).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const PAGE: &str = "<html><head><title>Release notes</title></head><body><nav>NAVLINKS</nav><article>\
<h1>Release notes</h1><h2>Version 2.0</h2><p>Version two adds streaming uploads, faster startup and a new \
configuration format that is easier to read and to review in pull requests.</p><h2>Version 1.0</h2>\
<p>The first stable release, with the original configuration format and synchronous uploads only.</p>\
</article></body></html>";

const SEARXNG: &str = r#"{"results":[{"url":"https://example.org/notes","title":"Example release notes","content":"What changed in 2.0"}],"answers":[]}"#;

/// Serves PAGE at any path and SEARXNG at /search until the test process ends. Returns the
/// base URL.
fn server() -> String {
    serve_routes(|path| {
        Some(if path.starts_with("/search") { ("application/json", SEARXNG) } else { ("text/html", PAGE) })
    })
}

/// Answers each request, one thread per connection, with `route(path)`'s content type and
/// body; `None` holds the connection open without an answer. Returns the base URL.
fn serve_routes(route: fn(&str) -> Option<(&'static str, &'static str)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let Some((ct, body)) = route(head.split(' ').nth(1).unwrap_or("/")) else {
                    // Held open until the client goes away.
                    let _ = s.read(&mut chunk);
                    return;
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    base
}

/// `kodik` with no search provider in its environment unless the test adds one.
fn kodik() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kodik"));
    for v in ["KODIK_SEARXNG_URL", "BRAVE_API_KEY", "BRAVE_SEARCH_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY"] {
        c.env_remove(v);
    }
    c.env_remove("KODIK_SEARCH_PROVIDER");
    c
}

#[test]
fn w2_web_fetch_through_kodik_call() {
    let base = server();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let args = format!(r#"{{"url":"{base}/notes"}}"#);
    let out = kodik().args(["call", "--workspace", ws, "web_fetch", &args]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("## Version 2.0") && text.contains("streaming uploads"), "{text}");
    assert!(!text.contains("NAVLINKS"), "{text}");

    // W1: the cloud metadata address is refused before anything is sent.
    let meta = r#"{"url":"https://169.254.169.254/latest/meta-data/"}"#;
    let out = kodik().args(["call", "--workspace", ws, "web_fetch", meta]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("cloud metadata"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn w5_web_fetch_and_web_search_through_kodik_batch() {
    let base = server();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let input = format!(
        "{}\n{}\n",
        format_args!(r#"{{"id":"f1","name":"web_fetch","args":{{"url":"{base}/notes","query":"version 1.0"}}}}"#),
        r#"{"id":"s1","name":"web_search","args":{"query":"release notes","limit":3}}"#
    );
    let mut cmd = kodik();
    cmd.env("KODIK_SEARXNG_URL", &base);
    let lines = common::run_batch(cmd, ws, &input);
    assert_eq!(lines[0]["status"], "success", "{}", lines[0]);
    let fetched = lines[0]["content"][0]["text"].as_str().unwrap();
    assert!(fetched.contains("## Version 1.0") && fetched.contains("first stable release"), "{fetched}");
    assert_eq!(lines[1]["status"], "success", "{}", lines[1]);
    let found = lines[1]["content"][0]["text"].as_str().unwrap();
    assert!(found.contains("1. Example release notes\n   https://example.org/notes"), "{found}");
}

/// Talks JSON-RPC to `kodik serve`: initialize, list the tools, call `call` (if any); returns
/// the tool names and the call's result.
fn serve(env: &[(&str, &str)], call: Option<Value>) -> (Vec<String>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = kodik();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .args(["serve", "--workspace", dir.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let mut recv = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
    };
    send(serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}));
    recv();
    send(serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(serde_json::json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    let list = recv();
    let names = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string());
    let names: Vec<String> = names.collect();
    let mut result = Value::Null;
    if let Some(params) = call {
        send(serde_json::json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":params}));
        result = recv()["result"].clone();
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(10));
    (names, result)
}

#[test]
fn w5_kodik_serve_offers_web_search_only_with_a_provider_and_runs_web_fetch() {
    let base = server();
    let (names, _) = serve(&[], None);
    assert!(names.contains(&"web_fetch".to_string()), "{names:?}");
    assert!(!names.contains(&"web_search".to_string()), "no provider, no web_search: {names:?}");

    let call = serde_json::json!({"name":"web_search","arguments":{"query":"release notes"}});
    let (names, result) = serve(&[("KODIK_SEARXNG_URL", &base)], Some(call));
    assert!(names.contains(&"web_search".to_string()), "{names:?}");
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("Example release notes"), "{result}");

    let call = serde_json::json!({"name":"web_fetch","arguments":{"url":format!("{base}/notes")}});
    let (_, result) = serve(&[], Some(call));
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("## Version 2.0"), "{result}");
}

/// An app shell whose list is filled by a fetch, beside a long-poll request that never ends.
const APP: &str = "<html><head><title>Inbox</title></head><body><div id=\"root\">Loading...</div><script>\
fetch('/api/items').then(r => r.json()).then(items => { document.getElementById('root').innerHTML = \
'<h1>Inbox</h1><ul>' + items.map(i => '<li>' + i + '</li>').join('') + '</ul>'; });\
fetch('/poll?since=0');</script></body></html>";

/// Serves APP, its data after 0.8 s at /api/items, robots.txt, and a /poll that never answers.
fn app_server() -> String {
    serve_routes(|path| {
        if path.starts_with("/poll") {
            None
        } else if path.starts_with("/api/items") {
            std::thread::sleep(Duration::from_millis(800));
            Some(("application/json", r#"["alpha","beta","gamma"]"#))
        } else if path == "/robots.txt" {
            Some(("text/plain", "User-agent: *\nAllow: /\n"))
        } else {
            Some(("text/html", APP))
        }
    })
}

/// W2 end to end, with the toolbox's real Chromium as web_fetch's renderer: a client-rendered
/// page whose data comes after 0.8 s is returned with its data, not its "Loading..." placeholder,
/// although another request of the page never ends; the result says that request was still open,
/// and the next call renders the page again instead of answering from the cache.
#[test]
fn w2_a_client_rendered_page_with_a_request_that_never_ends_is_read_with_its_data_and_not_cached() {
    let base = app_server();
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let call = format!(r#"{{"id":"f","name":"web_fetch","args":{{"url":"{base}/inbox"}}}}"#);
    let mut cmd = kodik();
    // The browser's profile and temporary folders stay with the test.
    cmd.env("XDG_CACHE_HOME", cache.path());
    let lines = common::run_batch(cmd, ws, &format!("{call}\n{call}\n"));
    for line in &lines {
        assert_eq!(line["status"], "success", "{line}");
        let text = line["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("# Inbox") && text.contains("gamma") && !text.contains("Loading..."), "{text}");
        assert!(text.contains("/poll?since=0") && text.contains("Not cached"), "{text}");
        assert!(!text.contains("from the cache"), "{text}");
    }
}
