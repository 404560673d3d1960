//! Throughput of kodik-core's output preview (G17–G20) against the plain baseline of copying
//! the same bytes to a file with `std::io::copy`, in the same run.

use std::io::Write as _;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kodik_core::preview::{OutputPreview, PreviewConfig};

const CHUNK: usize = 64 * 1024;

fn total_bytes() -> usize {
    // KODIK_BENCH_PREVIEW_MB=1024 gives the 1 GiB figure; the default keeps a run short.
    std::env::var("KODIK_BENCH_PREVIEW_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(256usize) * 1024 * 1024
}

fn bench(c: &mut Criterion) {
    let total = total_bytes();
    let mut chunk = vec![b'x'; CHUNK];
    for i in (0..CHUNK).step_by(80) {
        chunk[i] = b'\n';
    }
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("preview");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(total as u64));
    g.bench_function("baseline_io_copy_to_file", |b| {
        b.iter(|| {
            let mut f = std::io::BufWriter::with_capacity(CHUNK, tempfile::tempfile_in(dir.path()).unwrap());
            for _ in 0..total / CHUNK {
                std::io::copy(&mut &chunk[..], &mut f).unwrap();
            }
            f.flush().unwrap();
        })
    });
    g.bench_function("output_preview_with_spool", |b| {
        b.iter(|| {
            let mut p = OutputPreview::new(PreviewConfig::default().spool_in(dir.path()));
            for _ in 0..total / CHUNK {
                p.push(&chunk);
            }
            let s = p.summary();
            if let Some(path) = s.full_output {
                std::fs::remove_file(path).unwrap();
            }
        })
    });
    g.bench_function("output_preview_without_spool", |b| {
        b.iter(|| {
            let mut p = OutputPreview::new(PreviewConfig::default().without_spool());
            for _ in 0..total / CHUNK {
                p.push(&chunk);
            }
            p.summary()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
