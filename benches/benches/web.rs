//! kodik-web: HTML → Markdown on a 2 MB real-world page (The Rust Programming Language's
//! print.html from the toolchain's docs) beside the two converter crates alone (htmd, which
//! kodik-web uses, and fast_html2md), and web_fetch of a 200 KB page from a 127.0.0.1 server end
//! to end, against a plain reqwest GET of the same page as the baseline.
//!
//! After criterion, prints percentiles over many interleaved samples (`KODIK_WEB_SAMPLES`,
//! default 400): web_fetch and the GET baseline end to end, and the tool's own cost (parse,
//! extract, convert) beside htmd alone on the same page — wall time, and the converting thread's
//! CPU time from /proc/thread-self/schedstat, so a loaded machine's run-queue waits show up as
//! the gap between the two instead of hiding in the tool's figure.
//! turndown on the same pages: `benches/compare_web.sh`.

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

/// p50, p95 and p99 in milliseconds.
fn percentiles(mut v: Vec<Duration>) -> [f64; 3] {
    v.sort();
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)].as_secs_f64() * 1000.0;
    [at(50), at(95), at(99)]
}

/// The CPU time this thread has run so far (Linux; `None` elsewhere).
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// Wall and CPU time of `f` on this thread.
fn timed<T>(f: impl FnOnce() -> T) -> (Duration, Option<Duration>) {
    let (c0, t) = (thread_cpu(), Instant::now());
    std::hint::black_box(f());
    let wall = t.elapsed();
    (wall, c0.and_then(|c0| Some(thread_cpu()?.saturating_sub(c0))))
}

fn line(label: &str, p: [f64; 3]) {
    println!("  {label:<44} p50 {:>7.2} ms   p95 {:>7.2} ms   p99 {:>7.2} ms", p[0], p[1], p[2]);
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
    g.bench_function(BenchmarkId::new("fast_html2md_alone", big.len()), |b| {
        b.iter(|| html2md::rewrite_html(&big, false))
    });
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

    // Percentiles over many samples, the four measurements interleaved so load changes hit
    // them alike (criterion reports means and medians, not p95).
    let n: usize = std::env::var("KODIK_WEB_SAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let url_for_convert = Some("https://doc.rust-lang.org/book/print.html");
    let (mut fetch, mut get) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut own, mut own_cpu, mut htmd_wall, mut htmd_cpu) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        rt.block_on(get_once());
        get.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(fetch_once());
        fetch.push(t.elapsed());
        let (wall, cpu) = timed(|| kodik_web::html::convert(&small, url_for_convert));
        own.push(wall);
        own_cpu.extend(cpu);
        let (wall, cpu) = timed(|| htmd::convert(&small).unwrap());
        htmd_wall.push(wall);
        htmd_cpu.extend(cpu);
    }
    let (g, f) = (percentiles(get), percentiles(fetch));
    let (o, h) = (percentiles(own), percentiles(htmd_wall));
    println!(
        "web 200 KB page ({} bytes), {n} interleaved samples each; load average {}",
        small.len(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    line("web_fetch end to end (127.0.0.1)", f);
    line("plain reqwest GET (baseline)", g);
    println!("    → web_fetch / GET: {:.1}x at p50, {:.1}x at p95", f[0] / g[0], f[1] / g[1]);
    line("own cost: parse, extract, convert (wall)", o);
    line("htmd alone on the same page (wall, baseline)", h);
    println!("    → own cost / htmd alone: {:.2}x at p50, {:.2}x at p95", o[0] / h[0], o[1] / h[1]);
    if own_cpu.len() == n && htmd_cpu.len() == n {
        let (oc, hc) = (percentiles(own_cpu), percentiles(htmd_cpu));
        line("own cost (CPU time of the converting thread)", oc);
        line("htmd alone (CPU time)", hc);
        println!("    → wall minus CPU at p95 is time spent waiting for a core: {:.2} ms", o[1] - oc[1]);
    }
    c.final_summary();
}
