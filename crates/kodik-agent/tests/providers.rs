//! Agents built by hand: the other wire APIs (P5's JSON form of apply_patch over Chat
//! Completions; a Claude model over Anthropic Messages getting the three file tools, G10), the
//! context's own cancellation (G6), and a tool switched off for the mode (G11).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::sync::Arc;

use common::*;
use kodik_agent::{Agent, AgentConfig, CancellationToken, RunStatus};
use kodik_core::{ToolContext, Workspace};
use kodik_model::replay::{Exchange, Recording, ReplayServer};
use kodik_model::{ModelConfig, Provider};
use serde_json::{Value, json};

fn chat(chunks: &[Value]) -> String {
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

async fn agent(provider: Provider, model: &str, bodies: Vec<String>) -> (tempfile::TempDir, ReplayServer, Agent) {
    let dir = tempfile::tempdir().unwrap();
    let recording = bodies.into_iter().fold(Recording::new(provider, model), |r, b| r.with(Exchange::sse(b)));
    let server = ReplayServer::start(recording).await.unwrap();
    let client =
        kodik_model::client(ModelConfig::new(provider, model).base_url(server.base_url()).api_key("k").retries(0))
            .unwrap();
    let registry = registry();
    let harness = harness(&registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let agent = Agent::new(client, Arc::new(registry), cx, harness, AgentConfig::default());
    (dir, server, agent)
}

#[tokio::test]
async fn p5_an_openai_model_over_chat_completions_patches_through_the_json_form() {
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n";
    let args = json!({"input": patch}).to_string();
    let call = chat(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_p", "type": "function", "function": {"name": "apply_patch", "arguments": args}}]}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 5}}),
    ]);
    let answer = chat(&[
        json!({"choices": [{"index": 0, "delta": {"content": "added"}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    let (dir, server, agent) = agent(Provider::ChatCompletions, "openai/gpt-5", vec![call, answer]).await;
    let mut conv = agent.start().unwrap();
    let outcome = conv.run("add hello.txt", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(), "hello\n");

    let tools = server.requests()[0].body["tools"].as_array().unwrap().clone();
    let patch_tool = tools.iter().find(|t| t["function"]["name"] == "apply_patch").unwrap();
    assert_eq!(patch_tool["type"], "function");
    assert!(patch_tool["function"]["parameters"]["properties"]["input"].is_object(), "{patch_tool}");
    assert!(!tools.iter().any(|t| t["function"]["name"] == "edit_file"));
}

#[tokio::test]
async fn g10_a_claude_model_gets_the_file_tools_and_no_apply_patch() {
    let answer = [
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]
    .iter()
    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
    .collect::<String>();
    let (_dir, server, agent) = agent(Provider::Anthropic, "claude-sonnet-4-5", vec![answer]).await;
    let mut conv = agent.start().unwrap();
    let outcome = conv.run("hi", CancellationToken::new()).await;
    assert_eq!((outcome.status, outcome.final_text.as_str()), (RunStatus::Completed, "hi"), "{outcome:?}");
    let tools = server.requests()[0].body["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in ["create_file", "edit_file", "delete_file", "shell"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert!(!names.contains(&"apply_patch"), "{names:?}");
}

#[tokio::test]
async fn g6_cancelling_the_contexts_token_aborts_the_run_too() {
    let dir = tempfile::tempdir().unwrap();
    let body = body(&[Step::Text("never"), Step::Text(" ends")], 10, 1);
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(body));
    let options = kodik_model::replay::ReplayOptions { stall: Some((0, 120)), ..Default::default() };
    let server = ReplayServer::start_with(recording, options).await.unwrap();
    let client = kodik_model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("k"),
    )
    .unwrap();
    let registry = registry();
    let harness = harness(&registry);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let host_token = cx.cancel.clone();
    let agent = Agent::new(client, Arc::new(registry), cx, harness, AgentConfig::default());
    let mut conv = agent.start().unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        host_token.cancel();
    });
    let outcome = conv.run("wait", CancellationToken::new()).await;
    assert_eq!(outcome.status, RunStatus::Cancelled, "{outcome:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn g11_a_tool_switched_off_for_the_mode_leaves_the_schemas_and_the_guidance() {
    let dir = tempfile::tempdir().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(answer("ok")));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = kodik_model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key("k"),
    )
    .unwrap();
    let registry = registry();
    let mut harness = harness(&registry);
    harness.set_enabled(kodik_harness::Mode::Code, "shell", false);
    let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let config = AgentConfig::default().system_prompt("You are terse.");
    let agent = Agent::new(client, Arc::new(registry), cx, harness, config);
    let mut conv = agent.start().unwrap();
    assert_eq!(conv.run("hi", CancellationToken::new()).await.status, RunStatus::Completed);

    let body = &server.requests()[0].body;
    let names: Vec<&str> = body["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"grep") && !names.contains(&"shell"), "{names:?}");
    let instructions = body["instructions"].as_str().unwrap();
    assert!(instructions.starts_with("You are terse."), "{instructions}");
    assert!(instructions.contains("- grep") && !instructions.contains("- shell"), "{instructions}");
}
