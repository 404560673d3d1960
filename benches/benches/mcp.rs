//! `kodik serve`'s MCP layer in process (rmcp client ↔ McpServer over a duplex pipe, the stdio
//! path minus the pipe syscalls): the cost of one tools/call round trip vs dispatching the same
//! no-op call directly; the same call over streamable HTTP on loopback (kodik-mcp's HTTP server
//! with a session, called through kodik-mcp's client as a mounted `server__tool`); and 8
//! overlapping 100 ms requests (they must run concurrently: ≈100 ms wall, not 800).
//!
//! Before the criterion groups it prints per-call p50/p99 of `read_file` on a small file three
//! ways: direct `dispatch`, MCP over the in-process pipe, and MCP over the stdin/stdout of a
//! real `kodik serve` child process — the binary next to this bench (build it first with
//! `cargo build --release -p kodik-cli`) or `$KODIK_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary, not library code

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use kodik_core::{Effect, Tool, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolSpec, Workspace, dispatch};
use kodik_mcp::{ClientOptions, HttpOptions, McpClient, McpConfig, McpServer, ServerConfig};
use kodik_scheduler::Scheduler;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, args: Value, _cx: &ToolContext) -> ToolOutput {
        if let Some(ms) = args.get("ms").and_then(Value::as_u64) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        ToolOutput::text("ok")
    }
}

const CALLS: usize = 1_000;

/// Calls per path in the latency table.
const LATENCY_CALLS: usize = 3_000;

/// `kodik serve`'s binary: `$KODIK_BIN`, else `kodik` in the target folder this bench runs from.
fn kodik_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("KODIK_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(Path::parent).unwrap().join("kodik");
    assert!(
        bin.exists(),
        "no kodik binary at {}: run `cargo build --release -p kodik-cli` first, or set KODIK_BIN",
        bin.display()
    );
    bin
}

/// A different line window per call, as a model's reads differ.
fn read_args(n: usize) -> Value {
    let start = 1 + n % 40;
    json!({"path": "lines.txt", "ranges": [{"start_line": start, "end_line": start + 5}]})
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// Per-call latency of the same `read_file` calls: direct dispatch, MCP over the in-process
/// pipe, and MCP over a `kodik serve` child's stdin/stdout. Each path gets a fresh session.
fn latency_table(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=60).map(|i| format!("line {i} of a small file\n")).collect();
    std::fs::write(dir.path().join("lines.txt"), text).unwrap();
    let mut reg = ToolRegistry::new();
    kodik_search::SearchToolset::new().register(&mut reg);
    let specs: Vec<ToolSpec> = reg.specs().cloned().collect();
    let fresh_cx = || ToolContext::new(Workspace::new(dir.path()).unwrap());

    let direct = rt.block_on(async {
        let cx = fresh_cx();
        let mut times = Vec::with_capacity(LATENCY_CALLS);
        for n in 0..LATENCY_CALLS {
            let call = ToolCall::new("c", "read_file", read_args(n));
            let t = Instant::now();
            let out = dispatch(&reg, &call, &cx).await;
            times.push(t.elapsed());
            assert!(out.is_success(), "{out:?}");
        }
        times
    });
    // read_file calls, then calls to an unknown tool: refused by the server before any tool
    // runs, they time the transport and rmcp alone.
    let over_peer = |peer: rmcp::service::Peer<rmcp::RoleClient>| async move {
        let mut reads = Vec::with_capacity(LATENCY_CALLS);
        let mut refused = Vec::with_capacity(LATENCY_CALLS);
        for (tool, times) in [("read_file", &mut reads), ("no_such_tool", &mut refused)] {
            for n in 0..LATENCY_CALLS {
                let params =
                    CallToolRequestParams::new(tool).with_arguments(read_args(n).as_object().cloned().unwrap());
                let t = Instant::now();
                let out = peer.call_tool(params).await.unwrap();
                times.push(t.elapsed());
                assert_eq!(out.is_error == Some(true), tool == "no_such_tool", "{out:?}");
            }
        }
        (reads, refused)
    };
    let pipe = rt.block_on(async {
        let server = McpServer::new(Scheduler::new(Arc::new(reg.clone())), fresh_cx(), specs);
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let _ = server.serve(server_io).await;
        });
        let client = ().serve(client_io).await.unwrap();
        let times = over_peer(client.peer().clone()).await;
        drop(client);
        times
    });
    let child = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(kodik_bin());
        cmd.args(["serve", "--workspace"]).arg(dir.path());
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
        let mut client = ().serve(transport).await.unwrap();
        let times = over_peer(client.peer().clone()).await;
        let _ = client.close().await;
        times
    });
    eprintln!("{LATENCY_CALLS} sequential calls per path; read_file of a 60-line file, then a refused call:");
    let base = {
        let mut d = direct.clone();
        d.sort();
        percentile(&d, 0.5)
    };
    for (name, mut times) in [
        ("read_file, direct dispatch", direct),
        ("read_file, MCP in-process pipe", pipe.0),
        ("read_file, MCP kodik serve child", child.0),
        ("refused, MCP in-process pipe", pipe.1),
        ("refused, MCP kodik serve child", child.1),
    ] {
        times.sort();
        let p50 = percentile(&times, 0.5);
        eprintln!(
            "  {name:<34} p50 {:>8.1} µs  p99 {:>8.1} µs  p50 over direct {:>+8.1} µs",
            p50.as_secs_f64() * 1e6,
            percentile(&times, 0.99).as_secs_f64() * 1e6,
            (p50.as_secs_f64() - base.as_secs_f64()) * 1e6
        );
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    latency_table(&rt);
    let dir = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(Noop(ToolSpec::new("noop", "no-op", json!({"type": "object"}), Effect::ReadOnly)));
    let specs: Vec<ToolSpec> = reg.specs().cloned().collect();
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());

    let client = rt.block_on(async {
        let server = McpServer::new(Scheduler::new(Arc::new(reg.clone())), cx.clone(), specs);
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let _ = server.serve(server_io).await;
        });
        ().serve(client_io).await.unwrap()
    });
    let peer = client.peer().clone();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let (http_client, http_tool) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (reg, cx, specs) = (reg.clone(), cx.clone(), reg.specs().cloned().collect::<Vec<_>>());
        let factory = move || Ok(McpServer::new(Scheduler::new(Arc::new(reg.clone())), cx.clone(), specs.clone()));
        tokio::spawn(kodik_mcp::serve_http(listener, factory, HttpOptions::default(), shutdown.clone()));
        let config = McpConfig::new().server("h", ServerConfig::http(url));
        let client = McpClient::connect(&config, ClientOptions::default()).await;
        assert!(client.errors().is_empty(), "{:?}", client.errors());
        let tool = client.tools(&Default::default()).pop().unwrap();
        (client, tool)
    });
    let params = |args: Value| CallToolRequestParams::new("noop").with_arguments(args.as_object().cloned().unwrap());
    let direct = ToolCall::new("c", "noop", json!({}));

    let mut g = c.benchmark_group("mcp_1000_sequential_noop_calls");
    g.sample_size(10);
    g.bench_function("direct_dispatch", |b| {
        b.iter(|| {
            rt.block_on(async {
                for _ in 0..CALLS {
                    dispatch(&reg, &direct, &cx).await;
                }
            })
        })
    });
    g.bench_function("mcp_round_trip", |b| {
        b.iter(|| {
            rt.block_on(async {
                for _ in 0..CALLS {
                    peer.call_tool(params(json!({}))).await.unwrap();
                }
            })
        })
    });
    g.bench_function("mcp_http_round_trip", |b| {
        b.iter(|| {
            rt.block_on(async {
                for _ in 0..CALLS {
                    let out = http_tool.call(json!({}), &cx).await;
                    assert!(out.is_success(), "{out:?}");
                }
            })
        })
    });
    g.finish();

    let mut g = c.benchmark_group("mcp_8_overlapping_100ms_calls");
    g.sample_size(10);
    g.bench_function("wall_time", |b| {
        b.iter(|| {
            rt.block_on(async {
                let calls: Vec<_> = (0..8)
                    .map(|_| {
                        let peer = peer.clone();
                        let p = params(json!({"ms": 100}));
                        tokio::spawn(async move { peer.call_tool(p).await })
                    })
                    .collect();
                for call in calls {
                    call.await.unwrap().unwrap();
                }
            })
        })
    });
    g.finish();
    drop(client);
    rt.block_on(http_client.shutdown());
    shutdown.cancel();
}

criterion_group!(benches, bench);
criterion_main!(benches);
