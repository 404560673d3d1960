//! kodik-edit speed (issue 3): edit_file on a 10 MB source file against the I/O floor (read +
//! atomic write of the same file, measured in the same run), and the fuzzy stage's budget.
//!
//! `cargo bench -p kodik-benches --bench edit -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use kodik_core::{FileVersion, PreviewConfig, ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
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
    /// Where the tools save long diffs in full (G9): inside the bench's own temporary folder,
    /// so a run leaves nothing behind (issue 20.4).
    spool: PathBuf,
    registry: ToolRegistry,
    cx: ToolContext,
    rt: tokio::runtime::Runtime,
}

impl Setup {
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let cx = ToolContext::new(Workspace::new(&root).unwrap());
        let path = cx.workspace.primary_root().join("big.rs");
        std::fs::write(&path, text).unwrap();
        let mut registry = ToolRegistry::new();
        EditToolset::new().preview(PreviewConfig::default().spool_in(&spool)).register(&mut registry);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        Self { _dir: dir, path, spool, registry, cx, rt }
    }

    /// Puts the original back, tells the session it was read and builds the call (not
    /// timed: a host has the call's JSON already, parsed from the model's response).
    fn reset(&self, text: &str, edits: &serde_json::Value) -> ToolCall {
        // A whole-file diff (30 MB) is saved in full (G9); the host owns those files, and here
        // the host is the bench: without this a run fills the disk before it ends.
        for full in std::fs::read_dir(&self.spool).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(full.path());
        }
        // Synced, like the floor's file: otherwise the timed edit's fsync would also flush
        // this set-up write (ext4 commits earlier dirty data with the journal).
        let mut f = std::fs::File::create(&self.path).unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f.sync_all().unwrap();
        self.cx.session.record_read(&self.path, FileVersion::of_bytes(text.as_bytes()), None);
        call(edits)
    }

    fn edit(&self, call: &ToolCall) -> bool {
        self.rt.block_on(dispatch(&self.registry, call, &self.cx)).is_success()
    }
}

fn call(edits: &serde_json::Value) -> ToolCall {
    ToolCall::new("b", "edit_file", json!({"path": "big.rs", "edits": edits}))
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
        b.iter_batched(|| s.reset(&text, &one), |c| assert!(s.edit(&c)), BatchSize::PerIteration)
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
        b.iter_batched(|| s.reset(&text, &fifty), |c| assert!(s.edit(&c)), BatchSize::PerIteration)
    });

    let replaced = text.replace("compute(alpha", "evaluate(omega");
    let whole = json!([{"old_string": text, "new_string": replaced}]);
    g.bench_function("edit_file_whole_file_replacement", |b| {
        b.iter_batched(|| s.reset(&text, &whole), |c| assert!(s.edit(&c)), BatchSize::PerIteration)
    });

    let miss: String = (0..40).map(|i| format!("        let missing_{i} = other(thing, {i}); // nope\n")).collect();
    let fuzzy = s.reset(&text, &json!([{"old_string": miss, "new_string": "x"}]));
    g.bench_function("fuzzy_stage_40_line_miss", |b| b.iter(|| assert!(!s.edit(&fuzzy))));
    g.finish();
    s.reset(&text, &json!([]));
}

criterion_group!(edit, benches);
criterion_main!(edit);
