//! A conversion whose call has already answered stops (W2, W4). Its own test binary with one
//! test, so the process's CPU time is this conversion's alone: it must stop growing soon after
//! web_fetch returns its error (before, the converting thread ran on to the end of the page).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Reply, Server, fetch, fetch_in, tool};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w2_w4_a_conversion_past_the_time_limit_or_cancelled_stops_using_the_cpu() {
    let page = big_page();
    let s = Server::start(move |_| Reply::html(page.clone())).await;
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
}
