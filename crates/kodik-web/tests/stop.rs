//! A conversion whose call has already answered stops (W2, W4). Its own test binary with one
//! test, so the process's CPU time is this conversion's alone: it must stop growing soon after
//! web_fetch returns its error (before, the converting thread ran on to the end of the page).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Reply, Server, fetch, fetch_in, pdf_of, tool};
use kodik_web::WebConfig;

/// This process's user + system CPU time, in clock ticks (/proc/self/stat fields 14 and 15).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// CPU ticks this process spends in `window`, measured after `grace` for the converter to reach
/// a checkpoint.
async fn cpu_after(grace: Duration, window: Duration) -> u64 {
    tokio::time::sleep(grace).await;
    let before = cpu_ticks();
    tokio::time::sleep(window).await;
    cpu_ticks() - before
}

/// 8 MB of paragraphs in a `<main>`: many seconds of converting in a debug build.
fn big_page() -> String {
    let mut html = String::from("<html><head><title>Big</title></head><body><main><h1>Big</h1>");
    let mut i = 0;
    while html.len() < 8 << 20 {
        html.push_str(&format!(
            "<p>Paragraph {i} with <a href=\"/x{i}\">a link</a>, <code>code</code> and <em>some</em> words.</p>"
        ));
        i += 1;
    }
    html.push_str("</main></body></html>");
    html
}

/// The tester's bigpdf.pdf: 3 000 pages of 50 lines (8 MB), 40 s of extracting in a debug build.
fn big_pdf() -> Vec<u8> {
    let pages = 3000;
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        String::new(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
    ];
    let mut kids = Vec::new();
    for i in 0..pages {
        let lines: String = (0..50).map(|j| format!("(Line {j} of page {i} with some text) Tj 0 -12 Td ")).collect();
        let body = format!("BT /F1 10 Tf 72 750 Td {lines}ET");
        objects.push(format!("<< /Length {} >>\nstream\n{body}\nendstream", body.len()));
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {} 0 R /Resources << /Font << /F1 3 0 R >> >> >>",
            objects.len()
        ));
        kids.push(format!("{} 0 R", objects.len()));
    }
    objects[1] = format!("<< /Type /Pages /Kids [{}] /Count {pages} >>", kids.join(" "));
    pdf_of(&objects)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_w4_a_conversion_or_pdf_extraction_past_the_time_limit_or_cancelled_stops_using_the_cpu() {
    let page = big_page();
    let pdf = big_pdf();
    let s = Server::start(move |r| match r.path.as_str() {
        "/big.pdf" => Reply::ok("application/pdf", pdf.clone()),
        _ => Reply::html(page.clone()),
    })
    .await;
    // Calibration: the process idles at almost no CPU.
    let idle = cpu_after(Duration::ZERO, Duration::from_secs(1)).await;

    // Past the limit: the error comes at the limit, and the work stops with it.
    let t = tool(WebConfig { total_timeout: Duration::from_millis(1500), ..WebConfig::default() });
    let started = std::time::Instant::now();
    let err = fetch(&t, &s.url("/big"), None, None).await.unwrap_err();
    assert!(err.contains("took longer than") && err.contains("too large or too complex"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let used = cpu_after(Duration::from_millis(500), Duration::from_secs(3)).await;
    assert!(used <= idle * 3 + 30, "{used} CPU ticks in the 3 s after the timeout error (idle: {idle} per s)");

    // Cancelled: the same.
    let t = tool(WebConfig { total_timeout: Duration::from_secs(120), ..WebConfig::default() });
    let cx = common::context();
    let cancel = cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cancel.cancel();
    });
    let err = fetch_in(&t, &cx, &s.url("/big2"), None, None).await.unwrap_err();
    assert!(err.contains("cancelled"), "{err}");
    let used = cpu_after(Duration::from_millis(500), Duration::from_secs(3)).await;
    assert!(used <= idle * 3 + 30, "{used} CPU ticks in the 3 s after the cancel (idle: {idle} per s)");

    // A PDF past the limit: its extraction stops too. (The limit leaves lopdf time to parse the
    // file, which runs to its end; the walk and the extraction after it are what take long.)
    let t = tool(WebConfig { total_timeout: Duration::from_secs(4), ..WebConfig::default() });
    let err = fetch(&t, &s.url("/big.pdf"), None, None).await.unwrap_err();
    assert!(err.contains("took longer than"), "{err}");
    let used = cpu_after(Duration::from_millis(500), Duration::from_secs(3)).await;
    assert!(used <= idle * 3 + 30, "{used} CPU ticks in the 3 s after the PDF's timeout error (idle: {idle} per s)");
}
