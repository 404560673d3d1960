//! Code mode (SPEC K): engine start-up, per-call overhead of a script against direct dispatch,
//! parallel calls, and how fast the time and memory limits stop a runaway script.
//!
//! `cargo bench -p kodik-benches --bench codemode -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use kodik_codemode::{CodeModeConfig, CodeModeTool};
use kodik_core::{Effect, Tool, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolSpec, Workspace, dispatch};
use serde_json::{Value, json};

/// Returns "ok" at once.
struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value, _cx: &ToolContext) -> ToolOutput {
        ToolOutput::text("ok")
    }
}

/// Sleeps 100 ms.
struct Sleep100(ToolSpec);

#[async_trait]
impl Tool for Sleep100 {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value, _cx: &ToolContext) -> ToolOutput {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ToolOutput::text("slept")
    }
}

fn registry() -> ToolRegistry {
    let schema = json!({"type": "object", "properties": {}});
    let mut r = ToolRegistry::new();
    r.register(Noop(ToolSpec::new("noop", "No-op.", schema.clone(), Effect::ReadOnly)));
    r.register(Sleep100(ToolSpec::new("sleep100", "Sleeps 100 ms.", schema, Effect::ReadOnly)));
    r
}

fn time_once(rt: &tokio::runtime::Runtime, tool: &CodeModeTool, cx: &ToolContext, code: &str) -> (Duration, String) {
    let t = Instant::now();
    let out = rt.block_on(tool.run_code(code, cx));
    let kind = out.meta["codemode"]["error_kind"].as_str().unwrap_or("ok").to_string();
    (t.elapsed(), kind)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap_or_else(|e| {
        eprintln!("no runtime: {e}");
        std::process::exit(1)
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| {
        eprintln!("no tempdir: {e}");
        std::process::exit(1)
    });
    let Ok(ws) = Workspace::new(dir.path()) else {
        eprintln!("no workspace");
        std::process::exit(1)
    };
    let cx = ToolContext::new(ws);
    let reg = registry();
    let tool = Arc::new(CodeModeTool::new(CodeModeConfig::default(), reg.clone()));

    c.bench_function("codemode/context_and_return_1", |b| {
        b.iter(|| black_box(rt.block_on(tool.run_code("return 1", &cx))))
    });
    let fifty = "for (let i = 0; i < 50; i++) await tools.noop({}); return 1";
    c.bench_function("codemode/script_50_noop_calls", |b| b.iter(|| black_box(rt.block_on(tool.run_code(fifty, &cx)))));
    c.bench_function("codemode/direct_50_noop_dispatches", |b| {
        b.iter(|| {
            rt.block_on(async {
                for i in 0..50 {
                    let call = ToolCall::new(format!("d{i}"), "noop", json!({}));
                    black_box(dispatch(&reg, &call, &cx).await);
                }
            })
        })
    });

    // Derived figure and the one-shot limit checks, reported plainly.
    let n = 50;
    let avg = |code: &str| {
        let t = Instant::now();
        for _ in 0..n {
            black_box(rt.block_on(tool.run_code(code, &cx)));
        }
        t.elapsed() / n
    };
    let base = avg("return 1");
    let script = avg(fifty);
    let t = Instant::now();
    rt.block_on(async {
        for _ in 0..n {
            for i in 0..50 {
                black_box(dispatch(&reg, &ToolCall::new(format!("d{i}"), "noop", json!({})), &cx).await);
            }
        }
    });
    let direct = t.elapsed() / n;
    let per_call = (script.saturating_sub(base).saturating_sub(direct)) / 50;
    eprintln!(
        "codemode: return 1 = {:.2} ms; 50 calls in a script = {:.2} ms; 50 direct = {:.2} ms; overhead per call = {} µs (target ≤ 200 µs)",
        base.as_secs_f64() * 1e3,
        script.as_secs_f64() * 1e3,
        direct.as_secs_f64() * 1e3,
        per_call.as_micros()
    );

    let mut g = c.benchmark_group("codemode_parallel");
    g.sample_size(10);
    let par = "await Promise.all([1,2,3,4,5,6,7,8].map(() => tools.sleep100({})))";
    g.bench_function("8_parallel_100ms_calls", |b| b.iter(|| black_box(rt.block_on(tool.run_code(par, &cx)))));
    g.finish();
    let (wall, kind) = time_once(&rt, &tool, &cx, par);
    eprintln!("codemode: 8 parallel 100 ms calls = {} ms ({kind}; target ≤ 150 ms)", wall.as_millis());

    let busy = CodeModeTool::new(CodeModeConfig::default().timeout(Duration::from_secs(1)), reg.clone());
    let (wall, kind) = time_once(&rt, &busy, &cx, "while (true) {}");
    eprintln!("codemode: while(true) with 1 s timeout -> {kind} in {} ms (target ≤ 3000 ms)", wall.as_millis());
    let (wall, kind) = time_once(&rt, &busy, &cx, "await tools.noop({}); while (true) {}");
    eprintln!("codemode: while(true) after an await, 1 s timeout -> {kind} in {} ms", wall.as_millis());

    let mem = CodeModeTool::new(CodeModeConfig::default().memory_limit_mb(Some(64)), reg.clone());
    let grow = "const keep = []; while (true) { keep.push('x'.repeat(1 << 20) + keep.length) }";
    let (wall, kind) = time_once(&rt, &mem, &cx, grow);
    eprintln!("codemode: allocation loop with a 64 MB limit -> {kind} in {} ms", wall.as_millis());

    // The same in a worker process, which is killed at the limit (on a thread, code after an
    // `await` runs on after the answer).
    let worker = |cfg: CodeModeConfig| cfg.worker(env!("CARGO_BIN_EXE_codemode-worker"), Vec::<String>::new());
    let in_worker = CodeModeTool::new(worker(CodeModeConfig::default()), reg.clone());
    let one = avg_with(&rt, &in_worker, &cx, "return 1", 20);
    let fifty_in_worker = avg_with(&rt, &in_worker, &cx, fifty, 20);
    eprintln!(
        "codemode worker: return 1 = {:.2} ms ({:.1}× of a thread); 50 calls = {:.2} ms; overhead per call = {} µs",
        one.as_secs_f64() * 1e3,
        one.as_secs_f64() / base.as_secs_f64(),
        fifty_in_worker.as_secs_f64() * 1e3,
        (fifty_in_worker.saturating_sub(one).saturating_sub(direct) / 50).as_micros()
    );
    let busy = CodeModeTool::new(worker(CodeModeConfig::default().timeout(Duration::from_secs(1))), reg.clone());
    let (wall, kind) = time_once(&rt, &busy, &cx, "await tools.noop({}); while (true) {}");
    eprintln!("codemode worker: while(true) after an await, 1 s timeout -> {kind} in {} ms", wall.as_millis());
    let mem = CodeModeTool::new(worker(CodeModeConfig::default().memory_limit_mb(Some(64))), reg);
    let (wall, kind) = time_once(&rt, &mem, &cx, &format!("await tools.noop({{}}); {grow}"));
    eprintln!("codemode worker: allocation loop after an await, 64 MB limit -> {kind} in {} ms", wall.as_millis());
}

fn avg_with(rt: &tokio::runtime::Runtime, tool: &CodeModeTool, cx: &ToolContext, code: &str, n: u32) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        black_box(rt.block_on(tool.run_code(code, cx)));
    }
    t.elapsed() / n
}

criterion_group!(benches, bench);
criterion_main!(benches);
