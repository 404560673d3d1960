//! Cost of resolving a path through the workspace (confinement + `.kodikignore`) against a
//! plain `std::fs::canonicalize` of the same path, in the same run.

use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::Workspace;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b/c/d");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("file.rs"), "x").unwrap();
    std::fs::write(dir.path().join(".kodikignore"), "*.log\ntarget/\n").unwrap();
    std::fs::write(dir.path().join("a/b/.kodikignore"), "!keep.log\n").unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let abs = deep.join("file.rs");

    let mut g = c.benchmark_group("paths");
    g.bench_function("baseline_canonicalize", |b| b.iter(|| std::fs::canonicalize(&abs).unwrap()));
    g.bench_function("workspace_resolve", |b| b.iter(|| ws.resolve("a/b/../b/c/d/file.rs").unwrap()));
    g.bench_function("workspace_check_with_kodikignore", |b| b.iter(|| ws.check("a/b/c/d/file.rs").unwrap()));
    g.bench_function("workspace_resolve_missing_file", |b| b.iter(|| ws.resolve("a/b/c/d/new/file.rs").unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
