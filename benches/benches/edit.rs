//! kodik-edit speed (issue 3, 20.2): edit_file on a 10 MB source file against the I/O floor
//! (read + atomic write of the same file, with the same fsync as the tool, measured in the same
//! run), and the fuzzy stage's budget; peak memory of 50 MB calls (issue 18.2).
//!
//! `cargo bench -p kodik-benches --bench edit -- edit_10mb`
//!
//! Before criterion, the floor and the three edit cases run in interleaved rounds (each round
//! runs every case once, in a rotating order, each from the same synced file), so a burst of
//! disk or CPU load hits them alike; the table gives medians and the median of the per-round
//! ratios. `KODIK_EDIT_BENCH_ROUNDS` sets the number of rounds (default 40).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use criterion::{BatchSize, Criterion, criterion_group};
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

    /// Runs the call as a host does: handed over, so its arguments move into the tool.
    fn edit(&self, call: ToolCall) -> bool {
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

fn one_edit() -> serde_json::Value {
    json!([{"old_string": "let value_125000 = compute(alpha, beta, 125000);",
            "new_string": "let value_125000 = compute(alpha, gamma, 125000);"}])
}

fn fifty_edits() -> serde_json::Value {
    let fifty: Vec<serde_json::Value> = (0..50)
        .map(|k| {
            let i = k * 5000 + 17;
            json!({"old_string": format!("let value_{i} = compute(alpha, beta, {i});"),
                   "new_string": format!("let value_{i} = compute(alpha, beta, {i}) + 1;")})
        })
        .collect();
    serde_json::Value::Array(fifty)
}

fn whole_file(text: &str) -> serde_json::Value {
    json!([{"old_string": text, "new_string": text.replace("compute(alpha", "evaluate(omega")}])
}

/// The floor and the edit cases in interleaved rounds (see the module docs): per case the
/// median time and the median of its per-round ratio to the floor.
fn interleaved_rounds() {
    let rounds: usize = std::env::var("KODIK_EDIT_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(40);
    let text = source();
    let s = Setup::new(&text);
    let cases: [(&str, Option<serde_json::Value>); 4] = [
        ("read + atomic write (floor)", None),
        ("1 edit", Some(one_edit())),
        ("50 edits", Some(fifty_edits())),
        ("whole-file replacement", Some(whole_file(&text))),
    ];
    // For profiling one case: `KODIK_EDIT_BENCH_ONLY=whole` runs only the cases whose name
    // contains it (and the floor, which every ratio needs).
    let only = std::env::var("KODIK_EDIT_BENCH_ONLY").unwrap_or_default();
    let cases: Vec<_> = cases
        .into_iter()
        .enumerate()
        .filter(|(i, (name, _))| *i == 0 || name.contains(only.as_str()))
        .map(|c| c.1)
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); cases.len()];
    // One untimed round first: page cache, allocator and threads warm.
    for r in 0..=rounds {
        for k in 0..cases.len() {
            let i = (r + k) % cases.len();
            let call = s.reset(&text, cases[i].1.as_ref().unwrap_or(&serde_json::Value::Null));
            let t0 = std::time::Instant::now();
            match &cases[i].1 {
                None => io_floor(&s.path),
                Some(_) => assert!(s.edit(call)),
            }
            if r > 0 {
                times[i].push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    s.reset(&text, &json!([]));
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let floor = times[0].clone();
    println!("edit_10mb interleaved: {rounds} rounds, {} bytes, medians (ms):", text.len());
    println!("{:<30} {:>9} {:>9} {:>9} {:>12}", "case", "median", "min", "max", "× floor");
    for (i, (name, _)) in cases.iter().enumerate() {
        let mut ratios: Vec<f64> = times[i].iter().zip(&floor).map(|(t, f)| t / f).collect();
        let (min, max) = times[i].iter().fold((f64::MAX, 0f64), |(a, b), &t| (a.min(t), b.max(t)));
        let m = median(&mut times[i]);
        println!("{name:<30} {m:>9.1} {min:>9.1} {max:>9.1} {:>12.2}", median(&mut ratios));
    }
}

fn benches(c: &mut Criterion) {
    let text = source();
    let s = Setup::new(&text);
    let mut g = c.benchmark_group("edit_10mb");
    g.sample_size(10);

    g.bench_function("io_floor_read_plus_atomic_write", |b| b.iter(|| io_floor(&s.path)));

    let one = one_edit();
    g.bench_function("edit_file_1_edit", |b| {
        b.iter_batched(|| s.reset(&text, &one), |c| assert!(s.edit(c)), BatchSize::PerIteration)
    });

    let fifty = fifty_edits();
    g.bench_function("edit_file_50_edits", |b| {
        b.iter_batched(|| s.reset(&text, &fifty), |c| assert!(s.edit(c)), BatchSize::PerIteration)
    });

    let whole = whole_file(&text);
    g.bench_function("edit_file_whole_file_replacement", |b| {
        b.iter_batched(|| s.reset(&text, &whole), |c| assert!(s.edit(c)), BatchSize::PerIteration)
    });

    let miss: String = (0..40).map(|i| format!("        let missing_{i} = other(thing, {i}); // nope\n")).collect();
    let fuzzy = s.reset(&text, &json!([{"old_string": miss, "new_string": "x"}]));
    g.bench_function("fuzzy_stage_40_line_miss", |b| b.iter(|| assert!(!s.edit(fuzzy.clone()))));
    g.finish();
    s.reset(&text, &json!([]));
}

criterion_group!(edit, benches);

/// Peak memory of one 50 MB call (issue 18.2), each in a fresh child process of this bench so
/// earlier allocations do not blur it: the resident set before the arguments exist, once they
/// exist, and at its highest during the call (Linux `VmHWM`, reset through `clear_refs`). The
/// call goes through the scheduler, as `kodik batch` runs it.
mod memory {
    use super::*;

    pub const CHILD: &str = "KODIK_EDIT_BENCH_MEMORY_CASE";
    const MB: usize = 1 << 20;
    const SIZE: usize = 50 * MB;
    pub const CASES: [&str; 4] = ["create_file", "edit_file_whole_file", "apply_patch_add", "apply_patch_update"];

    fn status_kb(field: &str) -> usize {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 1024
    }

    fn text(tag: &str) -> String {
        let line = format!("    let value = {tag}(alpha, beta); // a line of about sixty bytes\n");
        line.repeat(SIZE / line.len())
    }

    /// In the child: runs `case` once and prints `base args peak content` in bytes.
    pub fn child(case: &str) {
        let dir = tempfile::tempdir().unwrap();
        let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let mut registry = ToolRegistry::new();
        EditToolset::new()
            .preview(PreviewConfig::default().spool_in(dir.path().join(".spool")))
            .register(&mut registry);
        let scheduler = kodik_scheduler::Scheduler::new(registry);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        // Warm-up: threads, lazy statics and the allocator's arenas exist before measuring.
        let warm = ToolCall::new("w", "create_file", json!({"path": "warm.txt", "content": "x"}));
        assert!(rt.block_on(scheduler.run([warm], &cx))[0].is_success());
        let path = dir.path().join("big.rs");
        if case == "edit_file_whole_file" || case == "apply_patch_update" {
            let tail = if case == "apply_patch_update" { "// the one unique line\n" } else { "" };
            std::fs::write(&path, text("compute") + tail).unwrap();
            cx.session.record_read(&path, FileVersion::of_file(&path).unwrap(), None);
        }
        let base = status_kb("VmRSS:");
        let args = match case {
            "create_file" => json!({"path": "big.rs", "content": text("compute")}),
            "edit_file_whole_file" => {
                json!({"path": "big.rs", "edits": [{"old_string": text("compute"), "new_string": text("evaluate")}]})
            }
            "apply_patch_add" => {
                let body: String = text("compute").lines().map(|l| format!("+{l}\n")).collect();
                json!({"input": format!("*** Begin Patch\n*** Add File: big.rs\n{body}*** End Patch\n")})
            }
            "apply_patch_update" => {
                json!({"input": "*** Begin Patch\n*** Update File: big.rs\n@@\n-// the one unique line\n+// the one changed line\n*** End Patch\n"})
            }
            other => panic!("unknown case {other}"),
        };
        let tool = if case.starts_with("apply_patch") { "apply_patch" } else { case.trim_end_matches("_whole_file") };
        let call = ToolCall::new("m", tool, args);
        let with_args = status_kb("VmRSS:");
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let out = rt.block_on(scheduler.run([call], &cx));
        assert!(out[0].is_success(), "{}", out[0].text_content());
        drop(out);
        let peak = status_kb("VmHWM:");
        println!("{base} {with_args} {peak} {SIZE}");
    }

    /// In the parent: runs every case in a child and prints a table.
    pub fn report() {
        println!("peak memory of one 50 MB call (MB; × content size):");
        println!("{:<22} {:>10} {:>10} {:>16}", "case", "arguments", "call adds", "peak over base");
        for case in CASES {
            let out = std::process::Command::new(std::env::current_exe().unwrap()).env(CHILD, case).output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let nums: Vec<f64> =
                stdout.lines().last().unwrap_or("").split_whitespace().filter_map(|n| n.parse().ok()).collect();
            let [base, args, peak, size] = nums[..] else {
                panic!("{case}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
            };
            let mb = |b: f64| b / MB as f64;
            println!(
                "{case:<22} {:>5.0} {:>4.1}× {:>5.0} {:>4.1}× {:>9.0} {:>5.1}×",
                mb(args - base),
                (args - base) / size,
                mb(peak - args),
                (peak - args) / size,
                mb(peak - base),
                (peak - base) / size
            );
        }
    }
}

fn main() {
    if let Ok(case) = std::env::var(memory::CHILD) {
        memory::child(&case);
        return;
    }
    if std::env::var_os("KODIK_EDIT_BENCH_ONLY").is_none() {
        memory::report();
    }
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.as_deref().is_none_or(|f| "edit_10mb".contains(f) || f.contains("edit_10mb")) {
        interleaved_rounds();
    }
    edit();
    Criterion::default().configure_from_args().final_summary();
}
