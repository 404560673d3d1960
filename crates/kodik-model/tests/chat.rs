//! Chat Completions against a replay server: tool calls assembled by index and done as soon as
//! a later index starts (G4), usage with OpenRouter cost, freeform tools refused (P5), request JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use kodik_model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_model::{
    ChatClient, Item, ModelClient, ModelConfig, ModelError, ModelEvent, Provider, Request, StopReason, ToolInput, Usage,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn recording(body: &str) -> Recording {
    Recording::new(Provider::ChatCompletions, "llama3.1").with(Exchange::sse(body))
}

fn client_for(server: &ReplayServer) -> ChatClient {
    ChatClient::new(ModelConfig::new(Provider::ChatCompletions, "llama3.1").base_url(server.base_url()).api_key(KEY))
        .unwrap()
}

fn request() -> Request {
    Request {
        model: String::new(),
        system: "You are a coding agent.".into(),
        items: vec![Item::User { text: "fix slugify".into() }],
        tools: vec![grep_tool(), glob_tool()],
        parallel_tool_calls: true,
        max_output_tokens: Some(2048),
    }
}

#[tokio::test]
async fn text_answer_with_usage_cost_and_cached_tokens() {
    let server = ReplayServer::start(recording(&fixture("chat_text.sse"))).await.unwrap();
    let client = client_for(&server);
    assert!(!client.supports_freeform_tools());
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(kinds(&events), ["text", "text", "completed"]);
    assert_eq!(text_of(&events), "All 12 tests pass.");
    let usage = Usage {
        input_tokens: 900,
        cached_input_tokens: 512,
        output_tokens: 6,
        reasoning_tokens: 0,
        cost_usd: Some(0.00042),
    };
    assert_eq!(events[2], ModelEvent::Completed { stop_reason: StopReason::EndTurn, usage });
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
}

/// G4: call 0 is done in the chunk where index 1 starts, call 1 when index 2 starts, the last at
/// finish_reason — each before the response completes.
#[tokio::test]
async fn interleaved_parallel_calls_are_assembled_by_index_and_done_when_a_later_index_starts_g4() {
    let server = ReplayServer::start(recording(&fixture("chat_tools.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds(&events),
        ["started:grep", "done:grep", "started:glob", "done:glob", "started:grep", "done:grep", "completed"]
    );
    let done = |call_id: &str, name: &str, args| ModelEvent::ToolCallDone {
        call_id: call_id.into(),
        name: name.into(),
        input: ToolInput::Json(args),
    };
    assert_eq!(events[1], done("call_a", "grep", json!({"pattern": "slugify"})));
    assert_eq!(events[3], done("call_b", "glob", json!({"pattern": "**/*.sh"})));
    assert_eq!(events[5], done("call_c", "grep", json!({"pattern": "TODO"})));
    let ModelEvent::Completed { stop_reason, usage } = &events[6] else { panic!() };
    assert_eq!((*stop_reason, usage.input_tokens, usage.output_tokens), (StopReason::ToolUse, 1500, 60));
}

/// G4: the server stalls right after the chunk in which call 1 starts; call 0 is already done.
#[tokio::test]
async fn first_call_is_done_while_the_stream_stalls_g4() {
    let body = fixture("chat_tools.sse");
    let third = body.match_indices("\n\n").nth(2).unwrap().0 + 2;
    let options = ReplayOptions { stall: Some((0, third)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording(&body), options).await.unwrap();
    let config = ModelConfig::new(Provider::ChatCompletions, "llama3.1")
        .base_url(server.base_url())
        .idle_timeout(Duration::from_millis(300));
    let client = ChatClient::new(config).unwrap();
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(kinds(&events), ["started:grep", "done:grep", "started:glob"]);
    assert!(matches!(error, Some(ModelError::IdleTimeout(_))), "{error:?}");
}

/// P5: a freeform tool is refused before anything is sent, naming the tool.
#[tokio::test]
async fn freeform_tool_is_refused_before_sending_p5() {
    let server = ReplayServer::start(recording(&fixture("chat_text.sse"))).await.unwrap();
    let mut req = request();
    req.tools.push(apply_patch_tool());
    let error = client_for(&server).stream(&req, CancellationToken::new()).await.err().unwrap();
    assert!(matches!(&error, ModelError::FreeformUnsupported(name) if name == "apply_patch"), "{error:?}");
    assert!(error.to_string().contains("create_file, edit_file and delete_file"));
    assert!(server.requests().is_empty());
}

/// History: assistant text and its calls in one message, a freeform call from an earlier model
/// in its JSON form (P5, G10), tool results as `tool` messages (G7), no reasoning items.
#[tokio::test]
async fn request_json_has_messages_tools_and_stream_options_g7() {
    let server = ReplayServer::start(recording(&fixture("chat_text.sse"))).await.unwrap();
    let mut req = request();
    req.items.extend([
        Item::Reasoning { raw: json!({"type": "reasoning", "encrypted_content": "x"}) },
        Item::Assistant { text: "Looking.".into() },
        Item::ToolCall { call_id: "c1".into(), name: "grep".into(), input: ToolInput::Json(json!({"pattern": "x"})) },
        Item::ToolCall {
            call_id: "c2".into(),
            name: "apply_patch".into(),
            input: ToolInput::Freeform("*** Begin Patch".into()),
        },
        Item::ToolResult {
            call_id: "c1".into(),
            name: "grep".into(),
            output: "hit".into(),
            is_error: false,
            images: vec![],
        },
        Item::ToolResult {
            call_id: "c2".into(),
            name: "apply_patch".into(),
            output: "failed".into(),
            is_error: true,
            images: vec![],
        },
    ]);
    let (_, error) = collect(client_for(&server).stream(&req, CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "llama3.1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["parallel_tool_calls"], true);
    assert_eq!(body["max_tokens"], 2048);
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "grep", "description": "Search file contents.",
               "parameters": grep_tool().input_schema}})
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(messages[0], json!({"role": "system", "content": "You are a coding agent."}));
    assert_eq!(messages[1], json!({"role": "user", "content": "fix slugify"}));
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"x\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "apply_patch", "arguments": "{\"input\":\"*** Begin Patch\"}"}},
        ]})
    );
    assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "c1", "content": "hit"}));
    assert_eq!(messages[4], json!({"role": "tool", "tool_call_id": "c2", "content": "failed"}));
}

#[tokio::test]
async fn error_chunk_is_a_provider_error_and_malformed_json_names_the_problem() {
    let server = ReplayServer::start(recording(&fixture("chat_error.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(text_of(&events), "Let me");
    let Some(ModelError::Provider(message)) = error else { panic!("{error:?}") };
    assert_eq!(message, "Provider returned error: upstream overloaded");

    let server = ReplayServer::start(recording(&fixture("chat_malformed.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(text_of(&events), "ok");
    let Some(ModelError::Malformed(message)) = error else { panic!("{error:?}") };
    assert!(message.starts_with("chat-completions event `message` does not parse (EOF while parsing"), "{message}");
}

#[tokio::test]
async fn a_body_that_ends_before_finish_reason_is_truncated() {
    let body = fixture("chat_tools.sse");
    let cut = body.match_indices("\n\n").nth(3).unwrap().0 + 2;
    let server = ReplayServer::start(recording(&body[..cut])).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(!kinds(&events).contains(&"completed".to_owned()));
    assert!(matches!(error, Some(ModelError::Truncated)), "{error:?}");
}

/// A server that sends a call with no id, or `"id": ""` (Ollama, vLLM, OpenAI-compatible
/// gateways): the call runs under a generated id, unique per call, which the replayed history
/// carries for the call and its result alike.
#[tokio::test]
async fn a_call_streamed_without_an_id_gets_a_generated_one_g7() {
    let chunk = |v: serde_json::Value| format!("data: {v}\n\n");
    let call = |index: u64, id: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "type": "function", "function": {"name": "grep", "arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
        }
        chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [c]}}]}))
    };
    let body = [
        call(0, Some(""), r#"{"pattern": "a"}"#),
        call(1, None, r#"{"pattern": "b"}"#),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let server = ReplayServer::start(recording(&body)).await.unwrap();
    let client = client_for(&server);
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let done: Vec<(String, ToolInput)> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallDone { call_id, name, input } if name == "grep" => {
                Some((call_id.clone(), input.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), 2, "{events:?}");
    let ids: Vec<&str> = done.iter().map(|(id, _)| id.as_str()).collect();
    assert!(ids.iter().all(|id| id.starts_with("call_")) && ids[0] != ids[1], "{ids:?}");
    assert_eq!(done[1].1, ToolInput::Json(json!({"pattern": "b"})));
    // Each ToolCallStarted names the same id as its ToolCallDone.
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallStarted { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ids);

    // The next request carries the generated ids on the calls and their results.
    let mut next = request();
    for (id, input) in &done {
        next.items.push(Item::ToolCall { call_id: id.clone(), name: "grep".into(), input: input.clone() });
    }
    for (id, _) in &done {
        next.items.push(Item::ToolResult {
            call_id: id.clone(),
            name: "grep".into(),
            output: "x".into(),
            is_error: false,
            images: vec![],
        });
    }
    let body = client.request_body(&next).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], ids[0]);
    assert_eq!(assistant["tool_calls"][1]["id"], ids[1]);
    let results: Vec<&str> =
        messages.iter().filter(|m| m["role"] == "tool").map(|m| m["tool_call_id"].as_str().unwrap()).collect();
    assert_eq!(results, ids);

    // A call without a name cannot run: still a clear error.
    let nameless = [
        chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
    ]
    .concat();
    let server = ReplayServer::start(recording(&nameless)).await.unwrap();
    let (_, error) = collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    let Some(ModelError::Malformed(message)) = error else { panic!("{error:?}") };
    assert!(message.contains("without a name"), "{message}");
}

/// A call cut off by the output-token limit (`finish_reason: "length"`) and arguments that are
/// not a JSON object keep the model's text: the caller can say what was wrong, and the next
/// request replays exactly what the model wrote (G7).
#[tokio::test]
async fn arguments_that_are_not_a_json_object_keep_the_models_text_and_replay_unchanged_g7() {
    let chunk = |v: serde_json::Value| format!("data: {v}\n\n");
    let call = |index: u64, args: &str| {
        chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": format!("c{index}"), "type": "function", "function": {"name": "grep", "arguments": args}}]}}]}),
        )
    };
    let cut = r#"{"pattern": "aaaa"#;
    let body = [
        call(0, "null"),
        call(1, r#"["a"]"#),
        call(2, cut),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let server = ReplayServer::start(recording(&body)).await.unwrap();
    let client = client_for(&server);
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let inputs: Vec<ToolInput> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallDone { input, .. } => Some(input.clone()),
            _ => None,
        })
        .collect();
    // `null` is no arguments; an array and cut-off JSON stay the model's text.
    assert_eq!(inputs[0], ToolInput::Json(json!({})));
    assert_eq!(inputs[1].unparsed(), Some(r#"["a"]"#));
    assert_eq!(inputs[2].unparsed(), Some(cut));
    assert!(matches!(events.last(), Some(ModelEvent::Completed { stop_reason: StopReason::MaxTokens, .. })));

    let mut next = request();
    next.items.push(Item::ToolCall { call_id: "c2".into(), name: "grep".into(), input: inputs[2].clone() });
    let body = client.request_body(&next).unwrap();
    let assistant = body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().clone();
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], cut);
    let parsed =
        Item::ToolCall { call_id: "c0".into(), name: "grep".into(), input: ToolInput::Json(json!({"pattern": "a"})) };
    next.items.push(parsed);
    let body = client.request_body(&next).unwrap();
    let assistant = body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().clone();
    assert_eq!(assistant["tool_calls"][1]["function"]["arguments"], r#"{"pattern":"a"}"#);
}
