//! Anthropic Messages against a replay server: tool_use blocks done at content_block_stop (G4),
//! cache_control, merged tool results (G7), errors, request JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use kodik_model::replay::{Exchange, Recording, ReplayServer};
use kodik_model::{
    AnthropicClient, Item, ModelClient, ModelConfig, ModelError, ModelEvent, Provider, Request, StopReason, ToolInput,
    Usage,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn recording(body: &str) -> Recording {
    Recording::new(Provider::Anthropic, "claude-sonnet-4-5").with(Exchange::sse(body))
}

fn client_for(server: &ReplayServer) -> AnthropicClient {
    let config = ModelConfig::new(Provider::Anthropic, "claude-sonnet-4-5").base_url(server.base_url()).api_key(KEY);
    AnthropicClient::new(config).unwrap()
}

fn request() -> Request {
    Request {
        model: "claude-sonnet-4-5".into(),
        system: "You are a coding agent.".into(),
        items: vec![Item::User { text: "fix slugify".into() }],
        tools: vec![grep_tool(), glob_tool()],
        parallel_tool_calls: true,
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn text_answer_with_cache_usage_and_auth_headers() {
    let server = ReplayServer::start(recording(&fixture("anthropic_text.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(kinds(&events), ["text", "text", "completed"]);
    assert_eq!(text_of(&events), "All 12 tests pass.");
    // input = uncached 25 + cache write 100 + cache read 2000.
    let usage =
        Usage { input_tokens: 2125, cached_input_tokens: 2000, output_tokens: 15, reasoning_tokens: 0, cost_usd: None };
    assert_eq!(events[2], ModelEvent::Completed { stop_reason: StopReason::EndTurn, usage });
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.headers.get("x-api-key").map(String::as_str), Some(KEY));
    assert_eq!(req.headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
    assert!(!req.headers.contains_key("authorization"));
}

/// G4: each tool_use block is done at its content_block_stop, before the next block starts.
#[tokio::test]
async fn tool_use_blocks_are_done_at_their_block_stop_g4() {
    let server = ReplayServer::start(recording(&fixture("anthropic_tools.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(kinds(&events), ["text", "started:grep", "done:grep", "started:glob", "done:glob", "completed"]);
    assert_eq!(
        events[2],
        ModelEvent::ToolCallDone {
            call_id: "toolu_a".into(),
            name: "grep".into(),
            input: ToolInput::Json(json!({"pattern": "slugify"}))
        }
    );
    let ModelEvent::Completed { stop_reason, usage } = &events[5] else { panic!() };
    assert_eq!((*stop_reason, usage.output_tokens), (StopReason::ToolUse, 89));
}

/// cache_control on the system prompt and the last tool; assistant text and tool_use in one
/// message; consecutive tool results (with is_error) merged into one user message (G7).
#[tokio::test]
async fn request_json_has_cache_control_and_merged_tool_results_g7() {
    let server = ReplayServer::start(recording(&fixture("anthropic_text.sse"))).await.unwrap();
    let mut req = request();
    req.parallel_tool_calls = false;
    req.items.extend([
        Item::Assistant { text: "Searching.".into() },
        Item::ToolCall { call_id: "t1".into(), name: "grep".into(), input: ToolInput::Json(json!({"pattern": "x"})) },
        Item::ToolCall {
            call_id: "t2".into(),
            name: "apply_patch".into(),
            input: ToolInput::Freeform("*** Begin Patch".into()),
        },
        Item::ToolResult {
            call_id: "t1".into(),
            name: "grep".into(),
            output: "hit".into(),
            is_error: false,
            images: vec![],
        },
        Item::ToolResult {
            call_id: "t2".into(),
            name: "apply_patch".into(),
            output: "no such file".into(),
            is_error: true,
            images: vec![],
        },
    ]);
    let (_, error) = collect(client_for(&server).stream(&req, CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 16384);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}])
    );
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(
        body["tools"][1],
        json!({"name": "glob", "description": "Find files by name.", "input_schema": glob_tool().input_schema,
               "cache_control": {"type": "ephemeral"}})
    );
    assert_eq!(body["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    // Cache breakpoints on the newest message and on the user message before it (L: each
    // turn reads the earlier turns from the cache); with the tools' and the system's, four.
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": [{"type": "text", "text": "fix slugify", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "x"}},
            {"type": "tool_use", "id": "t2", "name": "apply_patch", "input": {"input": "*** Begin Patch"}},
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "hit", "is_error": false},
            {"type": "tool_result", "tool_use_id": "t2", "content": "no such file", "is_error": true,
             "cache_control": {"type": "ephemeral"}},
        ]})
    );
    assert_eq!(body.to_string().matches("cache_control").count(), 4);
}

/// Turn after turn, each request marks its newest message and the user message before it, so
/// the next request's second breakpoint sits where this request's newest one was: the history
/// up to there is read from the cache (L), and never more than four breakpoints.
#[test]
fn each_turn_reads_the_previous_turns_from_the_prompt_cache() {
    let client = AnthropicClient::new(ModelConfig::new(Provider::Anthropic, "claude-sonnet-4-5").api_key(KEY)).unwrap();
    let mut req = request();
    let marked = |body: &serde_json::Value| -> Vec<usize> {
        let messages = body["messages"].as_array().unwrap();
        (0..messages.len())
            .filter(|&i| messages[i]["content"].as_array().unwrap().iter().any(|b| b.get("cache_control").is_some()))
            .collect()
    };
    let body = client.request_body(&req).unwrap();
    assert_eq!(marked(&body), [0]);
    let mut previous_last = 0;
    for turn in 0..3 {
        let id = format!("t{turn}");
        req.items.push(Item::ToolCall { call_id: id.clone(), name: "grep".into(), input: ToolInput::Json(json!({})) });
        req.items.push(Item::ToolResult {
            call_id: id,
            name: "grep".into(),
            output: "hit".into(),
            is_error: false,
            images: vec![],
        });
        let body = client.request_body(&req).unwrap();
        let last = body["messages"].as_array().unwrap().len() - 1;
        assert_eq!(marked(&body), [previous_last, last], "turn {turn}");
        assert_eq!(body.to_string().matches("cache_control").count(), 4);
        previous_last = last;
    }
}

#[tokio::test]
async fn freeform_tool_is_refused_p5() {
    let server = ReplayServer::start(recording(&fixture("anthropic_text.sse"))).await.unwrap();
    let mut req = request();
    req.tools.push(apply_patch_tool());
    let error = client_for(&server).stream(&req, CancellationToken::new()).await.err().unwrap();
    assert!(matches!(&error, ModelError::FreeformUnsupported(name) if name == "apply_patch"), "{error:?}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn error_event_and_malformed_event_end_the_stream_with_clear_errors() {
    let server = ReplayServer::start(recording(&fixture("anthropic_error.sse"))).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(events.is_empty());
    let Some(ModelError::Provider(message)) = error else { panic!("{error:?}") };
    assert_eq!(message, "Overloaded (overloaded_error)");

    let server = ReplayServer::start(recording(&fixture("anthropic_malformed.sse"))).await.unwrap();
    let (_, error) = collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    let Some(ModelError::Malformed(message)) = error else { panic!("{error:?}") };
    assert!(message.starts_with("anthropic event `content_block_delta` does not parse"), "{message}");
    assert!(message.contains("\"text\":\"unterminated}}"), "{message}");
}

/// G7: a whitespace-only text Claude streamed before a tool call is not sent back (Anthropic
/// refuses blank text blocks, so the request and every resume of the conversation failed with
/// HTTP 400); the tool_use alone is the assistant message. A blank text before an image in a
/// tool result is left out too.
#[tokio::test]
async fn g7_blank_assistant_text_is_not_sent_back_to_claude() {
    let server = ReplayServer::start(recording(&fixture("anthropic_text.sse"))).await.unwrap();
    let mut req = request();
    req.items.extend([
        Item::Assistant { text: "\n\n".into() },
        Item::ToolCall { call_id: "t1".into(), name: "grep".into(), input: ToolInput::Json(json!({"pattern": "x"})) },
        Item::ToolResult {
            call_id: "t1".into(),
            name: "grep".into(),
            output: " ".into(),
            is_error: false,
            images: vec![kodik_model::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() }],
        },
        Item::Assistant { text: " \t".into() },
        Item::User { text: "and now?".into() },
    ]);
    let (_, error) = collect(client_for(&server).stream(&req, CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.requests()[0].body;
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{body}");
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    let result = &messages[2]["content"][0];
    assert_eq!(result["content"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(result["content"][0]["type"], "image");
    for block in messages.iter().flat_map(|m| m["content"].as_array().unwrap()) {
        if block["type"] == "text" {
            assert!(!block["text"].as_str().unwrap().trim().is_empty(), "{body}");
        }
    }
}

/// R5: a tool result's image goes to Claude as an image block inside the tool_result.
#[test]
fn a_tool_results_image_goes_as_an_image_block() {
    let client = AnthropicClient::new(ModelConfig::new(Provider::Anthropic, "claude-sonnet-4-5").api_key(KEY)).unwrap();
    assert!(client.supports_images());
    let mut req = request();
    req.items.push(Item::ToolCall { call_id: "t1".into(), name: "browser".into(), input: ToolInput::Json(json!({})) });
    req.items.push(Item::ToolResult {
        call_id: "t1".into(),
        name: "browser".into(),
        output: "Screenshot.".into(),
        is_error: false,
        images: vec![kodik_model::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() }],
    });
    let body = client.request_body(&req).unwrap();
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["content"][0], json!({"type": "text", "text": "Screenshot."}));
    assert_eq!(
        result["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
}

/// A message stopped at max_tokens inside a tool_use block that never got its block stop: the
/// call still ends, with the input it had, as not a JSON object (G7, G8).
#[tokio::test]
async fn a_tool_use_cut_off_without_its_block_stop_ends_with_its_partial_input() {
    let ev = |v: serde_json::Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let body = [
        ev(json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5, "output_tokens": 1}}})),
        ev(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "grep", "input": {}}})),
        ev(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\": \"aa"}})),
        ev(json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}})),
        ev(json!({"type": "message_stop"})),
    ]
    .concat();
    let server = ReplayServer::start(recording(&body)).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let done = events.iter().find_map(|e| match e {
        ModelEvent::ToolCallDone { call_id, input, .. } => Some((call_id.clone(), input.clone())),
        _ => None,
    });
    let (call_id, input) = done.unwrap_or_else(|| panic!("the cut-off call vanished: {events:?}"));
    assert_eq!(call_id, "t1");
    assert_eq!(input.unparsed(), Some(r#"{"pattern": "aa"#));
    assert!(matches!(events.last(), Some(ModelEvent::Completed { stop_reason: StopReason::MaxTokens, .. })));
}
