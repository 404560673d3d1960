//! kodik-search's tools as a model calls them (through the `Tool` trait, with a fresh loop
//! guard each time) on a generated tree of 2 000 source files: grep in its three output modes,
//! a dense grep (every one of the 400 000 lines matches: the answer is a page, the full result
//! is spooled to disk) on its first page and deep into it, glob, and a ranged read of a 1 MB file. The comparison against ripgrep and fd on a real
//! tree is `benches/compare_search.sh`.

use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::{ToolContext, ToolRegistry, Workspace};
use serde_json::{Value, json};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    kodik_benches::write_rust_tree(dir.path()).unwrap();
    let big: String = (0..20_000).map(|l| format!("{l:06} some log text of a typical width here\n")).collect();
    std::fs::write(dir.path().join("big.log"), big).unwrap();

    let ws = Workspace::new(dir.path()).unwrap();
    let spool = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    kodik_search::SearchToolset::new().spool_dir(Some(spool.path().into())).register(&mut reg);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let run = |tool: &str, args: Value| {
        // A fresh session per call: the loop guard would otherwise answer "unchanged".
        let cx = ToolContext::new(ws.clone());
        let out = rt.block_on(reg.get(tool).unwrap().call(args, &cx));
        assert!(out.is_success(), "{}", out.text_content());
        if let Some(full) = out.meta["full_output"].as_str() {
            std::fs::remove_file(full).unwrap();
        }
        out
    };

    let mut g = c.benchmark_group("search");
    g.sample_size(20);
    g.bench_function("grep_literal_content", |b| {
        b.iter(|| run("grep", json!({"pattern": "item_1999_7(", "fixed_strings": true, "output_mode": "content"})))
    });
    g.bench_function("grep_regex_files_with_matches", |b| {
        b.iter(|| run("grep", json!({"pattern": r"item_\d+_199\(", "output_mode": "files_with_matches"})))
    });
    g.bench_function("grep_many_hits_count", |b| {
        b.iter(|| run("grep", json!({"pattern": r"helper\(x\)", "output_mode": "count"})))
    });
    g.bench_function("grep_dense_content_first_page", |b| {
        b.iter(|| run("grep", json!({"pattern": "helper", "output_mode": "content"})))
    });
    g.bench_function("grep_dense_content_page_at_offset_300000", |b| {
        b.iter(|| run("grep", json!({"pattern": "helper", "output_mode": "content", "offset": 300_000})))
    });
    g.bench_function("glob_all_rs_newest_first", |b| b.iter(|| run("glob", json!({"pattern": "**/*.rs"}))));
    g.bench_function("read_file_range_in_1mb_file", |b| {
        b.iter(|| run("read_file", json!({"path": "big.log", "ranges": [{"start_line": 10000, "end_line": 10200}]})))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
