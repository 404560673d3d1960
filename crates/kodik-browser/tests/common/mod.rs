//! A tiny HTTP server on 127.0.0.1 with the test pages, and helpers to call the tool.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::collections::HashMap;
use std::sync::Arc;

use kodik_browser::{BrowserOptions, BrowserSession, BrowserTool};
use kodik_core::{Content, Tool, ToolContext, ToolOutput, Workspace};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// path → (content type, body, extra headers); the content type [`HANG`] never answers.
pub type Routes = HashMap<&'static str, (&'static str, String, &'static str)>;

/// A route with this content type reads the request and never answers (a hung server).
pub const HANG: &str = "hang";

/// A route with this content type sends its body as HTML and never ends the response.
pub const STREAM: &str = "stream";

/// Serves `routes` on an ephemeral port; unknown paths are 404. Returns the base URL.
pub async fn serve(routes: Routes) -> String {
    serve_slow(routes, &[]).await
}

/// [`serve`], with the paths in `delays` answered only after their delay (a slow API).
pub async fn serve_slow(routes: Routes, delays: &[(&'static str, std::time::Duration)]) -> String {
    serve_logged(routes, delays).await.0
}

/// Requests a server received, as "METHOD /path?query", in order.
pub type Log = Arc<std::sync::Mutex<Vec<String>>>;

/// [`serve_slow`], also returning the log of the requests it received.
pub async fn serve_logged(routes: Routes, delays: &[(&'static str, std::time::Duration)]) -> (String, Log) {
    let log = Log::default();
    let seen = log.clone();
    let delays: Arc<HashMap<&'static str, std::time::Duration>> = Arc::new(delays.iter().copied().collect());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = Arc::new(routes);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let routes = routes.clone();
            let delays = delays.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let mut got = 0;
                loop {
                    let Ok(n) = sock.read(&mut buf[got..]).await else { return };
                    if n == 0 {
                        return;
                    }
                    got += n;
                    if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") || got == buf.len() {
                        break;
                    }
                }
                let head = String::from_utf8_lossy(&buf[..got]).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let method = head.split_whitespace().next().unwrap_or("").to_string();
                seen.lock().unwrap().push(format!("{method} {path}"));
                let path = path.split('?').next().unwrap_or("/").to_string();
                if let Some((STREAM, body, _)) = routes.get(path.as_str()) {
                    // Sends the start of a page and never ends it (a stuck streamed response).
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n";
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(body.as_bytes()).await;
                    let _ = sock.write_all(" ".repeat(4096).as_bytes()).await;
                    tokio::time::sleep(std::time::Duration::from_secs(600)).await;
                    return;
                }
                if routes.get(path.as_str()).is_some_and(|r| r.0 == HANG) {
                    tokio::time::sleep(std::time::Duration::from_secs(600)).await;
                    return;
                }
                if let Some(d) = delays.get(path.as_str()) {
                    tokio::time::sleep(*d).await;
                }
                let (status, ctype, body, extra) = match routes.get(path.as_str()) {
                    Some((c, b, e)) => ("200 OK", *c, b.clone(), *e),
                    None => ("404 Not Found", "text/plain", "not found".to_string(), ""),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), log)
}

pub struct Harness {
    pub tool: BrowserTool,
    pub session: Arc<BrowserSession>,
    pub cx: ToolContext,
    pub dir: tempfile::TempDir,
    pub profiles: tempfile::TempDir,
}

pub fn harness() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let options = BrowserOptions {
        profile_root: Some(profiles.path().to_path_buf()),
        workspace_key: Some(dir.path().display().to_string()),
        ..BrowserOptions::default()
    };
    let session = Arc::new(BrowserSession::new(options));
    Harness { tool: BrowserTool::new(session.clone()), session, cx: ToolContext::new(ws), dir, profiles }
}

/// A new session (as for a new conversation) over the same workspace and profile folder.
pub fn harness_with_profiles(old: Harness) -> Harness {
    let Harness { dir, profiles, cx, .. } = old;
    let options = BrowserOptions {
        profile_root: Some(profiles.path().to_path_buf()),
        workspace_key: Some(dir.path().display().to_string()),
        ..BrowserOptions::default()
    };
    let session = Arc::new(BrowserSession::new(options));
    Harness { tool: BrowserTool::new(session.clone()), session, cx, dir, profiles }
}

impl Harness {
    /// Runs one call the way dispatch does: validation first, then the call.
    pub async fn call(&self, args: Value) -> ToolOutput {
        if let Err(e) = self.tool.validate(&args) {
            return e.into_output();
        }
        let start = std::time::Instant::now();
        let out = self.tool.call(args.clone(), &self.cx).await;
        if start.elapsed() > std::time::Duration::from_secs(2) {
            eprintln!("slow call ({:?}): {args}", start.elapsed());
        }
        out
    }

    /// A call that must succeed; returns its text.
    pub async fn ok(&self, args: Value) -> String {
        let out = self.call(args.clone()).await;
        let text = out.text_content();
        assert!(out.is_success(), "{args} failed: {text}");
        text
    }

    /// A call that must fail; returns its message.
    pub async fn err(&self, args: Value) -> String {
        let out = self.call(args.clone()).await;
        let text = out.text_content();
        assert!(!out.is_success(), "{args} should have failed but said: {text}");
        text
    }
}

pub fn has_image(out: &ToolOutput) -> bool {
    out.content.iter().any(|c| matches!(c, Content::Image { .. }))
}

/// The ref on the snapshot line that contains `needle`.
pub fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle) && l.contains("[ref="))
        .unwrap_or_else(|| panic!("no line with {needle:?} and a ref in:\n{snapshot}"));
    let at = line.find("[ref=").unwrap() + 5;
    line[at..].split(']').next().unwrap().to_string()
}
