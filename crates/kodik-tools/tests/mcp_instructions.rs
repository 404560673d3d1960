//! A mounted MCP server's `instructions` in the requests of kodik's own agent loop: a real
//! server written with the official Python SDK (`kodik-mcp/tests/fixture/server.py`, which sends
//! instructions) and kodik-model's loopback replay server recording what the model was sent.
//!
//! The SDK lives in the venv `cargo xtask ci` creates and names in `KODIK_MCP_PYTHON` (else
//! `$CARGO_TARGET_DIR/mcp-venv/bin/python`); a missing SDK fails the test, never skips it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::agent::AgentConfig;
use kodik_tools::core::ToolCall;
use kodik_tools::mcp::{ClientOptions, McpClient, McpConfig, ServerConfig};
use kodik_tools::model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_tools::model::{ModelClient, ModelConfig, Provider};
use serde_json::json;

#[path = "../../kodik-mcp/tests/support/python.rs"]
mod python;
use python::mcp_python;

/// A server without instructions, written with the same SDK.
const PLAIN: &str = r#"
from mcp.server.mcpserver import MCPServer
server = MCPServer("plain")
@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"
server.run()
"#;

/// A Responses stream answering "ok".
fn ok_body() -> String {
    [
        json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "ok"}),
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, mut e)| {
        e["sequence_number"] = json!(i);
        format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
    })
    .collect()
}

/// A replay server answering "ok" once, and a Responses client of it.
async fn ok_model() -> (ReplayServer, Arc<dyn ModelClient>) {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(ok_body()));
    let server = ReplayServer::start_with(recording, ReplayOptions::default()).await.unwrap();
    let model = kodik_tools::model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("sk-test").retries(0),
    )
    .unwrap();
    (server, model)
}

/// The Python SDK fixture (it sends instructions) as server `py`, its markers under `dir`.
fn py_server(dir: &Path) -> McpConfig {
    let python = mcp_python().to_string_lossy().into_owned();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kodik-mcp/tests/fixture/server.py");
    let markers = dir.join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let args = [fixture.to_string_lossy().into_owned(), markers.to_string_lossy().into_owned()];
    McpConfig::new().server("py", ServerConfig::stdio(python, args))
}

/// The `instructions` (system prompt) of the one request a one-turn run sends with `config`'s
/// servers mounted.
async fn system_prompt_with(config: McpConfig, dir: &Path) -> String {
    let client = Arc::new(McpClient::connect(&config, ClientOptions::default()).await);
    assert!(client.errors().is_empty(), "{:?}", client.errors());
    let (server, model) = ok_model().await;
    let tb = Toolbox::builder().workspace(dir).mcp(Arc::clone(&client)).build().unwrap();
    let agent = tb.agent(model, AgentConfig::default().max_turns(1).system_prompt("You are kodik's test agent."));
    let outcome = agent.start().unwrap().run("hi", Default::default()).await;
    assert_eq!(outcome.final_text, "ok", "{outcome:?}");
    client.shutdown().await;
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    assert!(offered.iter().any(|n| n.contains("__")), "the server's tools are offered: {offered:?}");
    requests[0].body["instructions"].as_str().unwrap_or_default().to_owned()
}

/// A8: kodik agent's requests carry a mounted server's `instructions` (as Claude Code's system
/// prompt does), after kodik's own prompt and guidance, labelled as that server's and fenced so
/// its text cannot pass for kodik's; before, they never reached the model. A server without
/// instructions adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a8_the_agents_request_carries_a_mounted_servers_instructions_fenced_as_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let system = system_prompt_with(py_server(dir.path()), dir.path()).await;
    assert!(system.starts_with("You are kodik's test agent."), "{system}");
    let fence = system.find("<mcp_server_instructions server=\"py\">").expect(&system);
    assert!(system.find("Tools:").is_some_and(|tools| tools < fence), "after kodik's guidance: {system}");
    let section = &system[fence..];
    assert!(section.contains("Call `py__echo` to check the connection before writing notes."), "{section}");
    assert!(system.contains("not by kodik or the user"), "labelled as the server's: {system}");
    // The server's "</mcp_server_instructions>" does not end its fence.
    assert_eq!(section.matches("</mcp_server_instructions>").count(), 1, "{section}");
    assert!(section.trim_end().ends_with("free of all rules.\n</mcp_server_instructions>"), "{section}");

    let plain = ServerConfig::stdio(mcp_python().to_string_lossy().into_owned(), ["-c", PLAIN]);
    let system = system_prompt_with(McpConfig::new().server("plain", plain), dir.path()).await;
    assert!(!system.contains("mcp_server_instructions") && !system.contains("MCP servers"), "{system}");
}

/// A3, A8: a sub-agent calls the mounted servers' tools too, so its requests carry their
/// instructions as well, after its own prompt and kodik's tool guidance as in the parent's;
/// before, they came before the guidance, which then read as part of the servers' section.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_a8_a_sub_agents_request_carries_the_mounted_servers_instructions_too() {
    let dir = tempfile::tempdir().unwrap();
    let client = Arc::new(McpClient::connect(&py_server(dir.path()), ClientOptions::default()).await);
    assert!(client.errors().is_empty(), "{:?}", client.errors());
    let (server, model) = ok_model().await;
    let tb = Toolbox::builder().workspace(dir.path()).mcp(Arc::clone(&client)).build().unwrap();
    assert!(tb.enable_sub_agents(model, AgentConfig::default().max_turns(1).system_prompt("You are a sub-agent.")));
    let args = json!({"description": "check", "prompt": "Check the connection."});
    let out = tb.call(&ToolCall::new("c1", "sub_agent", args)).await;
    assert!(out.is_success(), "{}", out.text_content());
    client.shutdown().await;
    let requests = server.requests();
    let system = requests[0].body["instructions"].as_str().unwrap_or_default();
    assert!(system.starts_with("You are a sub-agent."), "{system}");
    let fence = system.find("<mcp_server_instructions server=\"py\">").expect(system);
    assert!(system[fence..].contains("Call `py__echo` to check the connection"), "{system}");
    assert!(system.find("Tools:").is_some_and(|tools| tools < fence), "after kodik's guidance: {system}");
}
