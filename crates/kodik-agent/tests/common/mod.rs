//! A real agent over real tools (search, edit, shell) in a temporary workspace, talking to a
//! real Responses client against kodik-model's loopback replay server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::sync::Arc;

use kodik_agent::{Agent, AgentConfig, AgentEvent, ApprovalMode};
use kodik_core::{ToolContext, ToolRegistry, Workspace};
use kodik_harness::{Harness, Mode};
use kodik_model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_model::{ModelConfig, Provider};
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub server: ReplayServer,
    pub agent: Agent,
    pub events: broadcast::Receiver<AgentEvent>,
}

/// What one scripted response does, in stream order.
pub enum Step {
    Text(&'static str),
    Call(&'static str, &'static str, Value),
    /// A call whose arguments text is sent as is (broken JSON, a cut-off call).
    RawCall(&'static str, &'static str, &'static str),
}

/// A Responses SSE body: each step becomes the events the API sends for it, then
/// `response.completed` with `input_tokens` / `output_tokens` usage.
pub fn body(steps: &[Step], input_tokens: u64, output_tokens: u64) -> String {
    body_ending(steps, input_tokens, output_tokens, false)
}

/// Like [`body`], ending in `response.incomplete` for the output-token limit (`max_output_tokens`).
pub fn body_cut(steps: &[Step]) -> String {
    body_ending(steps, 100, 20, true)
}

fn body_ending(steps: &[Step], input_tokens: u64, output_tokens: u64, cut: bool) -> String {
    let mut seq = 0u64;
    let mut out = String::new();
    let mut ev = |v: Value| {
        let mut v = v;
        v["sequence_number"] = json!(seq);
        seq += 1;
        out.push_str(&format!("event: {}\ndata: {}\n\n", v["type"].as_str().unwrap(), v));
    };
    ev(json!({"type": "response.created", "response": {"id": "resp", "status": "in_progress", "output": []}}));
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Text(t) => {
                ev(
                    json!({"type": "response.output_text.delta", "item_id": format!("msg_{i}"), "output_index": i, "content_index": 0, "delta": t}),
                );
            }
            Step::Call(..) | Step::RawCall(..) => {
                let (id, name, args) = match step {
                    Step::Call(id, name, args) => (id, name, args.to_string()),
                    Step::RawCall(id, name, raw) => (id, name, raw.to_string()),
                    Step::Text(_) => unreachable!(),
                };
                ev(
                    json!({"type": "response.output_item.added", "output_index": i, "item": {"id": format!("fc_{i}"), "type": "function_call", "status": "in_progress", "arguments": "", "call_id": id, "name": name}}),
                );
                ev(
                    json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{i}"), "output_index": i, "delta": args}),
                );
                ev(
                    json!({"type": "response.output_item.done", "output_index": i, "item": {"id": format!("fc_{i}"), "type": "function_call", "status": "completed", "arguments": args, "call_id": id, "name": name}}),
                );
            }
        }
    }
    let usage = json!({"input_tokens": input_tokens, "output_tokens": output_tokens});
    if cut {
        ev(
            json!({"type": "response.incomplete", "response": {"id": "resp", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [], "usage": usage}}),
        );
    } else {
        ev(
            json!({"type": "response.completed", "response": {"id": "resp", "status": "completed", "output": [], "usage": usage}}),
        );
    }
    out
}

pub fn answer(text: &'static str) -> String {
    body(&[Step::Text(text)], 100, 10)
}

pub fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    kodik_search::SearchToolset::new().register(&mut registry);
    kodik_edit::EditToolset::new().register(&mut registry);
    kodik_shell::ShellToolset::new().register(&mut registry);
    registry
}

/// The G12 defaults: in Code mode read_file, grep and glob are deferred.
pub fn default_harness(registry: &ToolRegistry) -> Harness {
    Harness::new(registry.specs().cloned())
}

/// Code mode with read_file, grep and glob offered directly (the G12 default defers them).
pub fn harness(registry: &ToolRegistry) -> Harness {
    let mut h = Harness::new(registry.specs().cloned());
    for t in ["read_file", "grep", "glob"] {
        h.set_deferred(Mode::Code, t, false);
    }
    h
}

pub async fn setup(bodies: Vec<String>, options: ReplayOptions, config: AgentConfig) -> Setup {
    setup_with(Recording::new(Provider::OpenAiResponses, "gpt-5"), bodies, options, config, ApprovalMode::Auto).await
}

pub async fn setup_with(
    recording: Recording,
    bodies: Vec<String>,
    options: ReplayOptions,
    config: AgentConfig,
    approval: ApprovalMode,
) -> Setup {
    setup_harness(recording, bodies, options, config, approval, harness).await
}

/// Like [`setup_with`], with the harness `make` builds over the registry (e.g. the G12
/// defaults, `Harness::new`, where reads are deferred in Code mode).
pub async fn setup_harness(
    recording: Recording,
    bodies: Vec<String>,
    options: ReplayOptions,
    config: AgentConfig,
    approval: ApprovalMode,
    make: fn(&ToolRegistry) -> Harness,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let recording = bodies.into_iter().fold(recording, |r, b| r.with(Exchange::sse(b)));
    let server = ReplayServer::start_with(recording, options).await.unwrap();
    let model = kodik_model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("sk-test").retries(0),
    )
    .unwrap();
    let registry = registry();
    let harness = make(&registry);
    let mut cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    cx.approver = approval.approver();
    let agent = Agent::new(model, Arc::new(registry), cx, harness, config);
    let events = agent.subscribe();
    Setup { dir, server, agent, events }
}

/// Every event received so far.
pub fn drain(rx: &mut broadcast::Receiver<AgentEvent>) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The `input` items of a recorded Responses request.
pub fn input(body: &Value) -> Vec<Value> {
    body["input"].as_array().cloned().unwrap_or_default()
}

/// `(type, call_id)` of each item of a request's input.
pub fn outline(body: &Value) -> Vec<(String, String)> {
    input(body)
        .iter()
        .map(|i| (i["type"].as_str().unwrap_or("").to_string(), i["call_id"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// The output the request carries for `call_id`.
pub fn output_of(body: &Value, call_id: &str) -> String {
    input(body)
        .iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
        .and_then(|i| i["output"].as_str())
        .unwrap_or_else(|| panic!("no output for {call_id} in {body}"))
        .to_string()
}
