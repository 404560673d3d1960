//! kodik-web: HTML → Markdown on a 2 MB real-world page (The Rust Programming Language's
//! print.html from the toolchain's docs), and web_fetch of a 200 KB page from a 127.0.0.1
//! server end to end, against a plain reqwest GET of the same page as the baseline.
//! After criterion, prints p50/p95 of web_fetch and of its own cost (parse, extract, convert).
//! turndown on the same page: `benches/compare_web.sh`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use kodik_core::{ToolContext, TypedTool, Workspace};
use kodik_schema::web::WebFetchArgs;
use kodik_web::{WebConfig, WebFetchTool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Rust book as one page (~1.9 MB), or a generated stand-in when the docs are not installed.
fn page_2mb() -> String {
    let sysroot = std::process::Command::new("rustc").args(["--print", "sysroot"]).output().ok();
    let path = sysroot.map(|o| {
        std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("share/doc/rust/html/book/print.html")
    });
    if let Some(html) = path.and_then(|p| std::fs::read_to_string(p).ok()) {
        return html;
    }
    eprintln!("web bench: the toolchain's book/print.html is missing; using a generated 2 MB page");
    let mut html = String::from("<html><head><title>Generated</title></head><body><main>");
    let mut i = 0;
    while html.len() < 2 << 20 {
        html.push_str(&format!(
            "<h2>Section {i}</h2><p>Text of section {i} with <a href='/x{i}'>a link</a> and <code>code</code>.</p>\
             <pre><code class='language-rust'>fn f{i}() -> u32 {{ {i} }}</code></pre><ul><li>one</li><li>two</li></ul>"
        ));
        i += 1;
    }
    html.push_str("</main></body></html>");
    html
}

/// The first ~200 KB of `html`, cut before a chapter heading.
fn page_200kb(html: &str) -> String {
    let mut end = html.len().min(200 * 1024);
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    let cut = html[..end].rfind("<h1").unwrap_or(end);
    format!("{}</main></body></html>", &html[..cut])
}

async fn serve(page: Arc<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/page", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let page = page.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(page.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    url
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[v.len() / 2]), ms(v[(v.len() * 95 / 100).min(v.len() - 1)]))
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let big = page_2mb();
    let small = Arc::new(page_200kb(&big));

    let mut g = c.benchmark_group("web_html_to_markdown");
    g.sample_size(10).throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function(BenchmarkId::new("kodik_web_convert", big.len()), |b| {
        b.iter(|| kodik_web::html::convert(&big, Some("https://doc.rust-lang.org/book/print.html")))
    });
    g.bench_function(BenchmarkId::new("htmd_alone", big.len()), |b| b.iter(|| htmd::convert(&big).unwrap()));
    g.finish();

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let url = rt.block_on(serve(small.clone()));
    let tool = WebFetchTool::new(WebConfig { cache_ttl: Duration::ZERO, ..WebConfig::default() }).unwrap();
    let cx = ToolContext::new(Workspace::new(std::env::temp_dir()).unwrap());
    let args = || WebFetchArgs { url: url.clone(), query: None, offset: None };
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let fetch_once = || async {
        let out = tool.run(args(), &cx).await.unwrap();
        assert!(out.is_success());
    };
    let get_once = || async { plain.get(&url).send().await.unwrap().bytes().await.unwrap() };

    let mut g = c.benchmark_group("web_fetch_200kb");
    g.sample_size(30).throughput(Throughput::Bytes(small.len() as u64));
    g.bench_function("reqwest_get_baseline", |b| b.iter(|| rt.block_on(get_once())));
    g.bench_function("web_fetch", |b| b.iter(|| rt.block_on(fetch_once())));
    g.bench_function("own_cost_convert", |b| {
        b.iter(|| kodik_web::html::convert(&small, Some("https://doc.rust-lang.org/book/print.html")))
    });
    g.finish();

    // p50/p95 over 100 runs each (criterion reports means and medians, not p95).
    let n = 100;
    let mut fetch = Vec::with_capacity(n);
    let mut get = Vec::with_capacity(n);
    let mut own = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        rt.block_on(get_once());
        get.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(fetch_once());
        fetch.push(t.elapsed());
        let t = Instant::now();
        let _ = kodik_web::html::convert(&small, Some("https://doc.rust-lang.org/book/print.html"));
        own.push(t.elapsed());
    }
    let (g50, g95) = percentiles(get);
    let (f50, f95) = percentiles(fetch);
    let (o50, o95) = percentiles(own);
    println!("web_fetch 200 KB over {n} runs: p50 {f50:.2} ms, p95 {f95:.2} ms");
    println!(
        "  plain reqwest GET (baseline): p50 {g50:.2} ms, p95 {g95:.2} ms → web_fetch/GET at p50 = {:.1}x",
        f50 / g50
    );
    println!("  own cost (parse, extract, convert): p50 {o50:.2} ms, p95 {o95:.2} ms");
    c.final_summary();
}
