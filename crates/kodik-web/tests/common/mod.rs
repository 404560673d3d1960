//! A real HTTP/1.1 server on 127.0.0.1 for the web tools' tests: routes answer with whole
//! bodies, dripped bodies (one byte per interval, noting when the client hung up), and count
//! their hits. Nothing in kodik-web is mocked; only the far side is local.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kodik_core::{ToolContext, TypedTool, Workspace};
use kodik_schema::web::WebFetchArgs;
use kodik_web::{WebConfig, WebFetchTool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a route answers.
pub enum Reply {
    /// Status, headers and body at once.
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// 200 with `body` sent one byte every `every`.
    Drip { headers: Vec<(String, String)>, body: Vec<u8>, every: Duration },
}

impl Reply {
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Reply::Full { status: 200, headers: vec![("Content-Type".into(), content_type.into())], body: body.into() }
    }
    pub fn html(body: impl Into<Vec<u8>>) -> Self {
        Self::ok("text/html; charset=utf-8", body)
    }
    pub fn not_found() -> Self {
        Reply::Full { status: 404, headers: vec![("Content-Type".into(), "text/plain".into())], body: b"no".to_vec() }
    }
    pub fn redirect(to: &str) -> Self {
        Reply::Full { status: 302, headers: vec![("Location".into(), to.into())], body: Vec::new() }
    }
}

/// A request as the handler sees it.
pub struct Request {
    pub path: String,
    pub headers: HashMap<String, String>,
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// The running server.
pub struct Server {
    pub addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    /// When a dripping response found its client gone.
    pub hung_up: Arc<Mutex<Option<Instant>>>,
}

impl Server {
    pub async fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        Self::start_on("127.0.0.1:0", handler).await
    }

    pub async fn start_on(bind: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler: Handler = Arc::new(handler);
        let hits = Arc::new(Mutex::new(HashMap::new()));
        let hung_up = Arc::new(Mutex::new(None));
        let (h, hu) = (hits.clone(), hung_up.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let (handler, hits, hung_up) = (handler.clone(), h.clone(), hu.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let mut lines = text.split("\r\n");
                    let path = lines.next().unwrap_or("").split(' ').nth(1).unwrap_or("/").to_string();
                    let headers = lines
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                        .collect();
                    *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
                    let req = Request { path, headers };
                    match handler(&req) {
                        Reply::Full { status, headers, body } => {
                            let mut head = format!(
                                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                                body.len()
                            );
                            for (k, v) in headers {
                                head.push_str(&format!("{k}: {v}\r\n"));
                            }
                            head.push_str("\r\n");
                            let _ = sock.write_all(head.as_bytes()).await;
                            let _ = sock.write_all(&body).await;
                            let _ = sock.shutdown().await;
                        }
                        Reply::Drip { headers, body, every } => {
                            let mut head =
                                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
                            for (k, v) in headers {
                                head.push_str(&format!("{k}: {v}\r\n"));
                            }
                            head.push_str("\r\n");
                            let _ = sock.write_all(head.as_bytes()).await;
                            for b in body {
                                let gone = sock.write_all(&[b]).await.is_err() || sock.flush().await.is_err();
                                if gone {
                                    *hung_up.lock().unwrap() = Some(Instant::now());
                                    return;
                                }
                                // A closed peer shows up as readable EOF before a write fails.
                                let mut probe = [0u8; 1];
                                if let Ok(Ok(0)) = tokio::time::timeout(every, sock.read(&mut probe)).await {
                                    *hung_up.lock().unwrap() = Some(Instant::now());
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Server { addr, hits, hung_up }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

pub fn context() -> ToolContext {
    ToolContext::new(Workspace::new(std::env::temp_dir()).unwrap())
}

pub fn tool(config: WebConfig) -> WebFetchTool {
    WebFetchTool::new(config).unwrap()
}

/// Runs web_fetch; `Ok(text)` on success, `Err(message)` otherwise.
pub async fn fetch(tool: &WebFetchTool, url: &str, query: Option<&str>, offset: Option<u64>) -> Result<String, String> {
    fetch_in(tool, &context(), url, query, offset).await
}

pub async fn fetch_in(
    tool: &WebFetchTool,
    cx: &ToolContext,
    url: &str,
    query: Option<&str>,
    offset: Option<u64>,
) -> Result<String, String> {
    let args = WebFetchArgs { url: url.to_string(), query: query.map(str::to_string), offset };
    if let Err(e) = tool.check(&args) {
        return Err(e.to_string());
    }
    match tool.run(args, cx).await {
        Ok(out) if out.is_success() => Ok(out.text_content()),
        Ok(out) => Err(out.text_content()),
        Err(e) => Err(e.to_string()),
    }
}

/// The text between the untrusted-content markers.
pub fn framed(out: &str) -> &str {
    let start = out.find(">>>\n").map(|i| i + 4).unwrap_or(0);
    let end = out.find("<<<end of untrusted web content").unwrap_or(out.len());
    &out[start..end]
}

/// A one-page PDF whose text is `text` (Helvetica), with a correct cross-reference table.
pub fn pdf(text: &str) -> Vec<u8> {
    let stream = format!("BT /F1 18 Tf 72 700 Td ({text}) Tj ET");
    pdf_of(&[
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_string(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
    ])
}

/// A PDF of `objects` (object 1 is the catalog), numbered from 1, with a correct
/// cross-reference table.
pub fn pdf_of(objects: &[String]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

/// A 1×1 PNG's first bytes (signature and IHDR) padded to `len`.
pub fn png(width: u32, height: u32) -> Vec<u8> {
    let mut v = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, b'I', b'H', b'D', b'R'];
    v.extend_from_slice(&width.to_be_bytes());
    v.extend_from_slice(&height.to_be_bytes());
    v.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    v.resize(2048, 0);
    v
}
