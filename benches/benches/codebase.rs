//! codebase_search (L7) on a generated tree of 2 000 source files (8 000 chunks) whose index is
//! built once: what one call costs when nothing changed (the walk comparing every file's size
//! and times, the query's embedding over HTTP, ranking every chunk), beside the same run's
//! baselines: glob `**/*.rs` (the same walk with one stat per file) and one embedding request
//! of the query alone. Then building an index of 200 files from scratch with one batch at the
//! embedder against four. Vectors come from kodik-model's loopback word-hashing server (1536
//! dimensions), so the embedding's own cost is the HTTP round trip.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::{Embedder, ToolContext, ToolRegistry, Workspace};
use kodik_model::{EmbeddingsClient, EmbeddingsConfig, HashEmbeddingServer};
use kodik_search::{CodebaseIndex, IndexConfig, SearchToolset};
use serde_json::{Value, json};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    kodik_benches::write_rust_tree(dir.path()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let server = rt.block_on(HashEmbeddingServer::start(1536)).unwrap();
    let client = Arc::new(EmbeddingsClient::new(EmbeddingsConfig::new(server.base_url(), "hash-1536")).unwrap());
    let ws = Workspace::new(dir.path()).unwrap();
    let config = IndexConfig { cache_dir: None, ..IndexConfig::default() };
    let index = Arc::new(CodebaseIndex::with_config(client.clone(), config));
    let mut reg = ToolRegistry::new();
    SearchToolset::new().spool_dir(None).codebase_index(index.clone()).register(&mut reg);
    assert!(rt.block_on(index.wait_until_current(&ws, Duration::from_secs(600))), "the index was not built");
    let status = index.status(&ws).unwrap();
    assert_eq!((status.indexed_files, status.error), (2000, None));
    eprintln!("index: {} files, {} chunks", status.indexed_files, status.chunks);

    let run = |tool: &str, args: Value| {
        // A fresh session per call: the loop guard would otherwise answer "unchanged".
        let cx = ToolContext::new(ws.clone());
        let out = rt.block_on(reg.get(tool).unwrap().call(args, &cx));
        assert!(out.is_success(), "{}", out.text_content());
        out
    };
    let query = vec!["helper function for item 1999 line 7".to_owned()];

    let mut g = c.benchmark_group("codebase");
    g.sample_size(20);
    g.bench_function("codebase_search_unchanged_index", |b| {
        b.iter(|| run("codebase_search", json!({"query": query[0]})))
    });
    g.bench_function("baseline_glob_all_rs", |b| b.iter(|| run("glob", json!({"pattern": "**/*.rs"}))));
    g.bench_function("baseline_embed_query_only", |b| b.iter(|| rt.block_on(client.embed(&query)).unwrap()));
    g.finish();

    // Building from scratch against an embedder with 20 ms of latency per request (a local
    // server; remote APIs take longer): one batch in flight against four, in the same run.
    let small = tempfile::tempdir().unwrap();
    for i in 0..200 {
        let body: String = (0..200).map(|l| format!("fn item_{i}_{l}(x: u32) -> u32 {{ x + {l} }}\n")).collect();
        std::fs::write(small.path().join(format!("f{i}.rs")), body).unwrap();
    }
    let small_ws = Workspace::new(small.path()).unwrap();
    server.set_delay(Duration::from_millis(20));
    let mut g = c.benchmark_group("codebase_build_200_files_20ms_latency");
    g.sample_size(10);
    for requests in [1, 4] {
        g.bench_function(format!("concurrent_requests_{requests}"), |b| {
            b.iter(|| {
                let config = IndexConfig { cache_dir: None, concurrent_requests: requests, ..IndexConfig::default() };
                let index = CodebaseIndex::with_config(client.clone(), config);
                assert!(rt.block_on(index.wait_until_current(&small_ws, Duration::from_secs(600))));
                assert_eq!(index.status(&small_ws).unwrap().chunks, 800);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
