//! Scheduler overhead (10 000 no-op calls through a turn vs the same calls dispatched
//! directly, in the same run) and concurrency (8 independent 100 ms calls in one turn).

use std::time::Duration;

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::{
    Effect, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, TypedTool, Workspace, dispatch,
};
use kodik_scheduler::{Scheduler, SchedulerConfig};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    ms: u64,
}

struct Noop(ToolSpec);

#[async_trait]
impl TypedTool for Noop {
    type Args = Args;
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(&self, a: Args, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if a.ms > 0 {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
        }
        Ok(ToolOutput::text("ok"))
    }
}

const CALLS: usize = 10_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(Noop(ToolSpec::new("noop", "no-op", json!({"type": "object"}), Effect::ReadOnly)));
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let scheduler =
        Scheduler::new(reg.clone()).with_config(SchedulerConfig { max_concurrency: 64, ..Default::default() });
    let calls: Vec<ToolCall> = (0..CALLS).map(|i| ToolCall::new(i.to_string(), "noop", json!({}))).collect();

    let mut g = c.benchmark_group("scheduler_10k_noop_calls");
    g.sample_size(10);
    g.bench_function("direct_dispatch", |b| {
        b.iter(|| {
            rt.block_on(async {
                for call in &calls {
                    dispatch(&reg, call, &cx).await;
                }
            })
        })
    });
    g.bench_function("through_scheduler_one_turn", |b| {
        b.iter(|| rt.block_on(scheduler.run(calls.iter().cloned(), &cx)))
    });
    g.finish();

    let sleeps: Vec<ToolCall> = (0..8).map(|i| ToolCall::new(i.to_string(), "noop", json!({"ms": 100}))).collect();
    let mut g = c.benchmark_group("scheduler_8_parallel_100ms_calls");
    g.sample_size(10);
    g.bench_function("one_turn_wall_time", |b| b.iter(|| rt.block_on(scheduler.run(sleeps.iter().cloned(), &cx))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
