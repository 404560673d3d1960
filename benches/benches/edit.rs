//! kodik-edit speed (issue 3): edit_file on a 10 MB source file against the I/O floor (read +
//! atomic write of the same file, measured in the same run), and the fuzzy stage's budget.
//!
//! `cargo bench -p kodik-benches --bench edit -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use kodik_core::{FileVersion, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_edit::EditToolset;
use serde_json::json;

const LINES: usize = 250_000;

fn source() -> String {
    let mut s = String::with_capacity(10_500_000);
    for i in 0..LINES {
        s.push_str(&format!("    let value_{i} = compute(alpha, beta, {i}); // line\n"));
    }
    s
}

struct Setup {
    _dir: tempfile::TempDir,
    path: PathBuf,
    registry: ToolRegistry,
    cx: ToolContext,
    rt: tokio::runtime::Runtime,
}

impl Setup {
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let path = cx.workspace.primary_root().join("big.rs");
        std::fs::write(&path, text).unwrap();
        let mut registry = ToolRegistry::new();
        EditToolset::new().register(&mut registry);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        Self { _dir: dir, path, registry, cx, rt }
    }

    /// Puts the original back and tells the session it was read (not timed).
    fn reset(&self, text: &str) {
        std::fs::write(&self.path, text).unwrap();
        self.cx.session.record_read(&self.path, FileVersion::of_bytes(text.as_bytes()), None);
    }

    fn edit(&self, edits: &serde_json::Value) -> bool {
        let call = ToolCall::new("b", "edit_file", json!({"path": "big.rs", "edits": edits}));
        self.rt.block_on(dispatch(&self.registry, &call, &self.cx)).is_success()
    }
}

fn io_floor(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    kodik_core::fs::write_atomic(path, &bytes, false).unwrap();
}

fn benches(c: &mut Criterion) {
    let text = source();
    let s = Setup::new(&text);
    let mut g = c.benchmark_group("edit_10mb");
    g.sample_size(10);

    g.bench_function("io_floor_read_plus_atomic_write", |b| b.iter(|| io_floor(&s.path)));

    let one = json!([{"old_string": "let value_125000 = compute(alpha, beta, 125000);",
                      "new_string": "let value_125000 = compute(alpha, gamma, 125000);"}]);
    g.bench_function("edit_file_1_edit", |b| {
        b.iter_batched(|| s.reset(&text), |()| assert!(s.edit(&one)), BatchSize::PerIteration)
    });

    let fifty: Vec<serde_json::Value> = (0..50)
        .map(|k| {
            let i = k * 5000 + 17;
            json!({"old_string": format!("let value_{i} = compute(alpha, beta, {i});"),
                   "new_string": format!("let value_{i} = compute(alpha, beta, {i}) + 1;")})
        })
        .collect();
    let fifty = serde_json::Value::Array(fifty);
    g.bench_function("edit_file_50_edits", |b| {
        b.iter_batched(|| s.reset(&text), |()| assert!(s.edit(&fifty)), BatchSize::PerIteration)
    });

    let replaced = text.replace("compute(alpha", "evaluate(omega");
    let whole = json!([{"old_string": text, "new_string": replaced}]);
    g.bench_function("edit_file_whole_file_replacement", |b| {
        b.iter_batched(|| s.reset(&text), |()| assert!(s.edit(&whole)), BatchSize::PerIteration)
    });

    let miss: String = (0..40).map(|i| format!("        let missing_{i} = other(thing, {i}); // nope\n")).collect();
    let fuzzy = json!([{"old_string": miss, "new_string": "x"}]);
    s.reset(&text);
    g.bench_function("fuzzy_stage_40_line_miss", |b| b.iter(|| assert!(!s.edit(&fuzzy))));
    g.finish();
}

criterion_group!(edit, benches);
criterion_main!(edit);
