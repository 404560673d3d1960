//! The agent loop's cost per tool call over the scheduler alone, in the same run:
//! `scheduler_run` pushes N trivial calls through `Scheduler::run`; `agent_turn` runs one
//! conversation whose replayed response (a real Responses client against kodik-model's
//! loopback `ReplayServer`) holds the same N calls, then a text answer — stream parsing, the
//! event wrapper, the transcript (two lines per call) and the two HTTP requests included.
//! `agent_text_only` is one request answered by text: the fixed cost of a request.
//! Target: (agent_turn − scheduler_run − agent_text_only) / N ≤ 50 µs.
//!
//! It also prints the time from the stream's `ToolCallDone` to the tool's own start (p50/p95
//! over every call of every sample, stamped with `Instant`s). Target p95 ≤ 1 ms.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use kodik_agent::{Agent, AgentConfig, CancellationToken, RunStatus};
use kodik_core::{Effect, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, TypedTool, Workspace};
use kodik_harness::Harness;
use kodik_model::replay::{Exchange, Recording, ReplayServer};
use kodik_model::{EventStream, ModelClient, ModelConfig, ModelError, ModelEvent, Provider, Request};
use kodik_scheduler::Scheduler;
use serde::Deserialize;
use serde_json::{Value, json};

const CALLS: usize = 200;

type Stamps = Arc<Mutex<HashMap<String, Instant>>>;

#[derive(Deserialize)]
struct Args {}

/// Answers at once; notes when each call started.
struct Noop {
    spec: ToolSpec,
    started: Stamps,
}

#[async_trait]
impl TypedTool for Noop {
    type Args = Args;
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(&self, _a: Args, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.started.lock().unwrap().insert(cx.call_id.clone(), Instant::now());
        Ok(ToolOutput::text("ok"))
    }
}

/// The real client, with the moment each `ToolCallDone` leaves its stream noted.
struct Stamping {
    inner: Arc<dyn ModelClient>,
    done: Stamps,
}

struct StampStream {
    inner: EventStream,
    done: Stamps,
}

impl futures_core::Stream for StampStream {
    type Item = Result<ModelEvent, ModelError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(ModelEvent::ToolCallDone { call_id, .. }))) = &polled {
            self.done.lock().unwrap().insert(call_id.clone(), Instant::now());
        }
        polled
    }
}

#[async_trait]
impl ModelClient for Stamping {
    async fn stream(&self, request: &Request, cancel: CancellationToken) -> Result<EventStream, ModelError> {
        let inner = self.inner.stream(request, cancel).await?;
        Ok(Box::pin(StampStream { inner, done: self.done.clone() }))
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn supports_freeform_tools(&self) -> bool {
        self.inner.supports_freeform_tools()
    }
}

/// A Responses SSE body with `calls` calls of `noop`, or a text answer when `calls` is 0.
fn body(calls: usize) -> String {
    let mut out = String::new();
    let mut ev = |v: Value| out.push_str(&format!("event: {}\ndata: {}\n\n", v["type"].as_str().unwrap(), v));
    ev(json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}));
    for i in 0..calls {
        let item = json!({"id": format!("fc_{i}"), "type": "function_call", "arguments": "{}", "call_id": format!("call_{i}"), "name": "noop"});
        ev(json!({"type": "response.output_item.added", "output_index": i, "item": item}));
        ev(
            json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{i}"), "output_index": i, "delta": "{}"}),
        );
        ev(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    if calls == 0 {
        ev(json!({"type": "response.output_text.delta", "item_id": "msg", "output_index": 0, "delta": "done"}));
    }
    ev(
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [], "usage": {"input_tokens": 10, "output_tokens": 10}}}),
    );
    out
}

struct Fixture {
    _server: ReplayServer,
    agent: Agent,
}

/// An agent whose server has `runs` conversations' worth of exchanges.
async fn fixture(
    dir: &std::path::Path,
    registry: &Arc<ToolRegistry>,
    stamps: &(Stamps, Stamps),
    runs: u64,
    calls: usize,
) -> Fixture {
    let mut recording = Recording::new(Provider::OpenAiResponses, "gpt-5");
    let (with_calls, answer) = (body(calls), body(0));
    for _ in 0..runs {
        if calls > 0 {
            recording = recording.with(Exchange::sse(with_calls.clone()));
        }
        recording = recording.with(Exchange::sse(answer.clone()));
    }
    let server = ReplayServer::start(recording).await.unwrap();
    let client = kodik_model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("sk-bench"),
    )
    .unwrap();
    let model = Arc::new(Stamping { inner: client, done: stamps.0.clone() });
    let harness = Harness::new(registry.specs().cloned());
    let cx = ToolContext::new(Workspace::new(dir).unwrap());
    let config = AgentConfig::default().sessions_dir(dir.join("sessions"));
    Fixture { _server: server, agent: Agent::new(model, registry.clone(), cx, harness, config) }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stamps: (Stamps, Stamps) = Default::default();
    let mut reg = ToolRegistry::new();
    let spec = ToolSpec::new("noop", "Answers at once.", json!({"type": "object"}), Effect::ReadOnly);
    reg.register(Noop { spec, started: stamps.1.clone() });
    let registry = Arc::new(reg);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let scheduler = Scheduler::new(registry.clone());
    let calls: Vec<ToolCall> = (0..CALLS).map(|i| ToolCall::new(format!("call_{i}"), "noop", json!({}))).collect();
    let mut latencies: Vec<Duration> = Vec::new();

    let mut g = c.benchmark_group(format!("agent_{CALLS}_noop_calls"));
    g.sample_size(20);
    g.bench_function("scheduler_run", |b| b.iter(|| rt.block_on(scheduler.run(calls.iter().cloned(), &cx))));
    g.bench_function("agent_turn", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let f = fixture(dir.path(), &registry, &stamps, iters, CALLS).await;
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut conv = f.agent.start().unwrap();
                    let t = Instant::now();
                    let outcome = conv.run("go", CancellationToken::new()).await;
                    total += t.elapsed();
                    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
                    let (done, started) = (stamps.0.lock().unwrap(), stamps.1.lock().unwrap());
                    for (id, at) in done.iter() {
                        latencies.push(started[id].saturating_duration_since(*at));
                    }
                    drop((done, started));
                    stamps.0.lock().unwrap().clear();
                    stamps.1.lock().unwrap().clear();
                }
                total
            })
        })
    });
    g.bench_function("agent_text_only", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let f = fixture(dir.path(), &registry, &stamps, iters, 0).await;
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut conv = f.agent.start().unwrap();
                    let t = Instant::now();
                    let outcome = conv.run("go", CancellationToken::new()).await;
                    total += t.elapsed();
                    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
                }
                total
            })
        })
    });
    g.finish();

    latencies.sort();
    if !latencies.is_empty() {
        println!(
            "ToolCallDone -> tool start over {} calls: p50 {:?}, p95 {:?}, max {:?}",
            latencies.len(),
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            latencies[latencies.len() - 1],
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
