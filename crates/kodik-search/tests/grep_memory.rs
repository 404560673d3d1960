//! Issue 19: grep's memory follows the page, not the result (GR2; G18–G20 for the saved copy).
//!
//! The search runs in a child process (this test binary re-run on the one test) so that the
//! peak resident memory read from its `/proc/self/status` (`VmHWM`) is the search's alone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)

use std::process::Command;

use kodik_core::{ToolContext, ToolRegistry, Workspace};
use kodik_search::SearchToolset;
use serde_json::json;

const CHILD: &str = "KODIK_GREP_MEMORY_CHILD";
/// The bound the issue sets, whatever `head_limit` is.
const LIMIT_KIB: u64 = 64 * 1024;
const FILES: usize = 200;
const LINES: usize = 10_000;

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
    line.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// In the child: three dense searches over the tree in `CHILD`, then the peak memory.
fn child(dir: &str) {
    let spool = tempfile::tempdir().unwrap();
    let cx = ToolContext::new(Workspace::new(dir).unwrap());
    let mut reg = ToolRegistry::new();
    SearchToolset::new().spool_dir(Some(spool.path().into())).register(&mut reg);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let before = peak_kib();
    let total = (FILES * LINES) as u64;
    for (i, args) in [
        json!({"pattern": "e", "head_limit": 0}),
        json!({"pattern": "e", "head_limit": 100_000_000, "offset": 1_000_000}),
        json!({"pattern": "e", "output_mode": "count", "head_limit": 0}),
    ]
    .into_iter()
    .enumerate()
    {
        cx.session.compacted();
        let out = rt.block_on(reg.get("grep").unwrap().call(args.clone(), &cx.for_call(format!("c{i}"))));
        assert!(out.is_success(), "{}", out.text_content());
        assert_eq!(out.meta["total_matches"], total, "{args}");
        if i < 2 {
            let full = out.meta["full_output"].as_str().unwrap();
            let saved = std::fs::metadata(full).unwrap().len();
            // The whole result is on disk, not in memory: far more than the bound.
            assert!(saved > LIMIT_KIB * 1024, "{args}: saved {saved} bytes");
            assert!(out.text_content().len() <= 80 * 1024, "{args}: the answer is capped");
            std::fs::remove_file(full).unwrap();
        }
        if i == 1 {
            let t = out.text_content();
            assert!(
                t.contains("\nf000100.txt:1:line e 0 of a generated file\n"),
                "entry 1 000 001 is file 100's first line"
            );
        }
    }
    println!("{CHILD} before={before} peak={}", peak_kib());
}

#[test]
fn gr2_g20_dense_search_with_two_million_hits_stays_within_64_mib() {
    if let Ok(dir) = std::env::var(CHILD) {
        return child(&dir);
    }
    let dir = tempfile::tempdir().unwrap();
    // 2 000 000 matching lines (every line has an `e`), ~60 MB of files, ~100 MB of result.
    let body: String = (0..LINES).map(|l| format!("line e {l} of a generated file\n")).collect();
    for f in 0..FILES {
        std::fs::write(dir.path().join(format!("f{f:06}.txt")), &body).unwrap();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "gr2_g20_dense_search_with_two_million_hits_stays_within_64_mib", "--nocapture"])
        .env(CHILD, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report = stdout.lines().find_map(|l| l.strip_prefix(&format!("{CHILD} "))).expect("the child's figures");
    eprintln!("child: {report}");
    let peak: u64 = report.split("peak=").nth(1).unwrap().parse().unwrap();
    assert!(peak < LIMIT_KIB, "peak RSS {peak} KiB (limit {LIMIT_KIB} KiB); {report}");
}

const SINGLE_CHILD: &str = "KODIK_GREP_SINGLE_FILE_CHILD";
/// ~120 MB of log lines.
const BIG_LINES: usize = 2_000_000;

/// In the child: a single-file search of the big file at `path`, then the peak memory.
fn single_child(path: &str) {
    let path = std::path::Path::new(path);
    let cx = ToolContext::new(Workspace::new(path.parent().unwrap()).unwrap());
    let mut reg = ToolRegistry::new();
    SearchToolset::new().register(&mut reg);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let before = peak_kib();
    let args = json!({"pattern": "needle|Привет", "path": "big.log"});
    let out = rt.block_on(reg.get("grep").unwrap().call(args, &cx));
    assert!(out.is_success(), "{}", out.text_content());
    let last = BIG_LINES + 2;
    let expected = format!("Found 2 matching lines in 1 file\nbig.log:1:Привет first\nbig.log:{last}:needle here");
    assert_eq!(out.text_content(), expected);
    println!("{SINGLE_CHILD} before={before} peak={}", peak_kib());
}

#[test]
fn gr1_gr3_a_single_big_file_is_searched_as_a_stream_within_64_mib() {
    if let Ok(path) = std::env::var(SINGLE_CHILD) {
        return single_child(&path);
    }
    let dir = tempfile::tempdir().unwrap();
    let line = "2026-12-01 INFO request handled in 12ms path=/api/v1/items\n";
    let mut text = String::with_capacity(BIG_LINES * line.len() + 64);
    text.push_str("Привет first\n");
    for _ in 0..BIG_LINES {
        text.push_str(line);
    }
    text.push_str("needle here\n");
    let path = dir.path().join("big.log");
    std::fs::write(&path, &text).unwrap();
    drop(text);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "gr1_gr3_a_single_big_file_is_searched_as_a_stream_within_64_mib", "--nocapture"])
        .env(SINGLE_CHILD, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report = stdout.lines().find(|l| l.starts_with(SINGLE_CHILD)).expect("the child's report");
    let peak: u64 = report.rsplit("peak=").next().unwrap().parse().unwrap();
    // Reading it whole took about twice the file's 120 MB.
    assert!(peak < LIMIT_KIB, "peak {peak} KiB searching a {} MB file", (BIG_LINES * line.len()) >> 20);
}
