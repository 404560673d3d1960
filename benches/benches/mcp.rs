//! `kodik serve`'s MCP layer in process (rmcp client ↔ McpServer over a duplex pipe, the stdio
//! path minus the pipe syscalls): the cost of one tools/call round trip vs dispatching the same
//! no-op call directly; the same call over streamable HTTP on loopback (kodik-mcp's HTTP server
//! with a session, called through kodik-mcp's client as a mounted `server__tool`); and 8
//! overlapping 100 ms requests (they must run concurrently: ≈100 ms wall, not 800).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a bench binary, not library code

use std::sync::Arc;
use std::time::Duration;

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

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
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
