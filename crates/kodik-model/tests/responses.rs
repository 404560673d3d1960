//! OpenAI Responses against a replay server: streaming, tool calls the moment they are done (G4),
//! freeform apply_patch (P5), reasoning carried back, and the request JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use kodik_model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_model::{
    Item, ModelClient, ModelConfig, ModelError, ModelEvent, Provider, Request, ResponsesClient, StopReason, ToolInput,
    Usage,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn recording(bodies: &[&str]) -> Recording {
    bodies.iter().fold(Recording::new(Provider::OpenAiResponses, "gpt-5"), |r, b| r.with(Exchange::sse(*b)))
}

fn client_for(server: &ReplayServer) -> ResponsesClient {
    let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url()).api_key(KEY);
    ResponsesClient::new(config).unwrap()
}

fn request() -> Request {
    Request {
        model: "gpt-5".into(),
        system: "You are a coding agent.".into(),
        items: vec![Item::User { text: "fix slugify".into() }],
        tools: vec![grep_tool(), glob_tool(), apply_patch_tool()],
        parallel_tool_calls: true,
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn text_answer_streams_deltas_and_completes_with_cached_and_reasoning_usage() {
    let server = ReplayServer::start(recording(&[&fixture("responses_text.sse")])).await.unwrap();
    let client = client_for(&server);
    let stream = client.stream(&request(), CancellationToken::new()).await.unwrap();
    let (events, error) = collect(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(kinds(&events), ["text", "text", "completed"]);
    assert_eq!(text_of(&events), "The tests \"pass\" now — all 12.");
    let usage = Usage {
        input_tokens: 1200,
        cached_input_tokens: 1024,
        output_tokens: 40,
        reasoning_tokens: 16,
        cost_usd: None,
    };
    assert_eq!(events.last(), Some(&ModelEvent::Completed { stop_reason: StopReason::EndTurn, usage }));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/responses");
    assert_eq!(requests[0].headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
}

/// G4, P5: each call is done before the next starts and before the response completes; the
/// freeform apply_patch call arrives as raw patch text; the reasoning item comes back verbatim.
#[tokio::test]
async fn parallel_calls_and_freeform_patch_are_done_in_stream_order_g4_p5() {
    let server = ReplayServer::start(recording(&[&fixture("responses_tools.sse")])).await.unwrap();
    let client = client_for(&server);
    assert!(client.supports_freeform_tools());
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        kinds(&events),
        [
            "reasoning",
            "started:grep",
            "done:grep",
            "started:glob",
            "done:glob",
            "started:apply_patch",
            "done:apply_patch",
            "completed"
        ]
    );
    assert_eq!(
        events[2],
        ModelEvent::ToolCallDone {
            call_id: "call_grep".into(),
            name: "grep".into(),
            input: ToolInput::Json(json!({"pattern": "slugify"}))
        }
    );
    assert_eq!(
        events[6],
        ModelEvent::ToolCallDone {
            call_id: "call_patch".into(),
            name: "apply_patch".into(),
            input: ToolInput::Freeform(
                "*** Begin Patch\n*** Update File: slugify.sh\n@@\n-s/-/-/g\n+s/-\\+/-/g\n*** End Patch".into()
            ),
        }
    );
    let ModelEvent::Reasoning { raw } = &events[0] else { panic!("{:?}", events[0]) };
    assert_eq!(raw["encrypted_content"], "gAAAAABpc2VjcmV0LXJlYXNvbmluZw==");
    let ModelEvent::Completed { stop_reason, usage } = events.last().unwrap() else { panic!() };
    assert_eq!((*stop_reason, usage.reasoning_tokens), (StopReason::ToolUse, 64));
}

/// G4: the server stops writing right after the first call's `output_item.done`; the call is
/// delivered anyway, and only then does the stalled stream fail with IdleTimeout.
#[tokio::test]
async fn a_done_call_is_delivered_while_the_rest_of_the_response_is_still_pending_g4() {
    let body = fixture("responses_tools.sse");
    let first_done = body.find("\"sequence_number\":7").unwrap();
    let stall_at = first_done + body[first_done..].find("\n\n").unwrap() + 2;
    let options = ReplayOptions { stall: Some((0, stall_at)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording(&[&body]), options).await.unwrap();
    let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5")
        .base_url(server.base_url())
        .idle_timeout(Duration::from_millis(300));
    let client = ResponsesClient::new(config).unwrap();
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(kinds(&events), ["reasoning", "started:grep", "done:grep"]);
    assert!(matches!(error, Some(ModelError::IdleTimeout(_))), "{error:?}");
}

/// The request carries function and freeform (grammar) tools, parallel_tool_calls, store:false
/// with encrypted reasoning, and history in Responses item form: the reasoning item back without
/// its id, freeform calls and their results as custom_tool_call(_output) (P5, G7).
#[tokio::test]
async fn request_json_has_tools_freeform_grammar_and_history_items_p5_g7() {
    let server = ReplayServer::start(recording(&[&fixture("responses_text.sse")])).await.unwrap();
    let client = client_for(&server);
    let reasoning = json!({"id": "rs_01", "type": "reasoning", "summary": [], "encrypted_content": "gAAA=="});
    let mut req = request();
    req.max_output_tokens = Some(4096);
    req.items.extend([
        Item::Reasoning { raw: reasoning.clone() },
        Item::ToolCall { call_id: "c1".into(), name: "grep".into(), input: ToolInput::Json(json!({"pattern": "x"})) },
        Item::ToolCall {
            call_id: "c2".into(),
            name: "apply_patch".into(),
            input: ToolInput::Freeform("*** Begin Patch".into()),
        },
        Item::ToolResult {
            call_id: "c1".into(),
            name: "grep".into(),
            output: "a.sh:1: x".into(),
            is_error: false,
            images: vec![],
        },
        Item::ToolResult {
            call_id: "c2".into(),
            name: "apply_patch".into(),
            output: "patch failed".into(),
            is_error: true,
            images: vec![],
        },
        Item::Assistant { text: "Done.".into() },
    ]);
    let (_, error) = collect(client.stream(&req, CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "gpt-5");
    assert_eq!(body["instructions"], "You are a coding agent.");
    assert_eq!((body["stream"].clone(), body["store"].clone()), (json!(true), json!(false)));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["parallel_tool_calls"], true);
    assert_eq!(body["max_output_tokens"], 4096);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["parameters"]["required"], json!(["pattern"]));
    assert_eq!(
        body["tools"][2],
        json!({"type": "custom", "name": "apply_patch", "description": "Apply a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_GRAMMAR}})
    );
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[0],
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix slugify"}]})
    );
    // Everything but the id, which names nothing on the server under store:false.
    assert_eq!(input[1], json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAA=="}));
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{\"pattern\":\"x\"}"})
    );
    assert_eq!(
        input[3],
        json!({"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"})
    );
    assert_eq!(input[4], json!({"type": "function_call_output", "call_id": "c1", "output": "a.sh:1: x"}));
    assert_eq!(input[5], json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "patch failed"}));
    assert_eq!(input[6]["role"], "assistant");
    assert_eq!(input[6]["content"][0], json!({"type": "output_text", "text": "Done."}));
}

#[tokio::test]
async fn response_failed_is_a_provider_error_with_its_message() {
    let server = ReplayServer::start(recording(&[&fixture("responses_failed.sse")])).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(events.is_empty());
    let Some(ModelError::Provider(message)) = error else { panic!("{error:?}") };
    assert_eq!(message, "The model had an internal error; try again.");
}

#[tokio::test]
async fn malformed_event_names_the_event_and_shows_the_data() {
    let server = ReplayServer::start(recording(&[&fixture("responses_malformed.sse")])).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(text_of(&events), "Hi");
    let Some(ModelError::Malformed(message)) = error else { panic!("{error:?}") };
    assert!(message.contains("openai-responses event `response.output_text.delta`"), "{message}");
    assert!(message.contains("\"delta\":\"oops"), "{message}");
}

/// Arbitrary byte chunking (mid-event, mid-UTF-8) gives the same events as whole events.
#[tokio::test]
async fn tiny_chunks_with_delays_give_the_same_events() {
    let options = ReplayOptions { chunk_size: Some(7), chunk_delay: Duration::from_micros(50), stall: None };
    let server = ReplayServer::start_with(recording(&[&fixture("responses_tools.sse")]), options).await.unwrap();
    let (chunked, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let whole_server = ReplayServer::start(recording(&[&fixture("responses_tools.sse")])).await.unwrap();
    let (whole, _) =
        collect(client_for(&whole_server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert_eq!(chunked, whole);
}

/// Dropping the stream mid-response closes the connection: the server sees the hang-up.
#[tokio::test]
async fn dropping_the_stream_closes_the_connection_at_once() {
    let body = fixture("responses_tools.sse");
    let options = ReplayOptions { stall: Some((0, body.len() / 2)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording(&[&body]), options).await.unwrap();
    let client = client_for(&server);
    let mut stream = client.stream(&request(), CancellationToken::new()).await.unwrap();
    assert!(matches!(stream.next().await, Some(Ok(ModelEvent::Reasoning { .. }))));
    drop(stream);
    for _ in 0..200 {
        if server.client_closed_early() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never saw the connection close");
}

#[tokio::test]
async fn cancelling_the_token_mid_stream_ends_it_with_cancelled_and_closes_the_connection() {
    let body = fixture("responses_tools.sse");
    let options = ReplayOptions { stall: Some((0, body.len() / 2)), ..ReplayOptions::default() };
    let server = ReplayServer::start_with(recording(&[&body]), options).await.unwrap();
    let client = client_for(&server);
    let cancel = CancellationToken::new();
    let mut stream = client.stream(&request(), cancel.clone()).await.unwrap();
    assert!(matches!(stream.next().await, Some(Ok(ModelEvent::Reasoning { .. }))));
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let mut rest = Vec::new();
    while let Some(item) = stream.next().await {
        rest.push(item);
    }
    canceller.await.unwrap();
    assert!(matches!(rest.last(), Some(Err(ModelError::Cancelled))), "{rest:?}");
    for _ in 0..200 {
        if server.client_closed_early() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never saw the connection close");
}

/// Arguments the model wrote that are not a JSON object go back on the next request as the
/// model wrote them, not as a JSON string literal of them (G7).
#[test]
fn unparsed_arguments_replay_as_the_model_wrote_them_g7() {
    let client = ResponsesClient::new(ModelConfig::new(Provider::OpenAiResponses, "gpt-5").api_key(KEY)).unwrap();
    let mut req = request();
    let cut = r#"{"command": "echo hi"#;
    req.items.push(Item::ToolCall {
        call_id: "c1".into(),
        name: "shell".into(),
        input: ToolInput::Json(serde_json::Value::String(cut.into())),
    });
    let body = client.request_body(&req);
    let call = body["input"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").unwrap().clone();
    assert_eq!(call["arguments"], cut);
}

/// R5: a tool result's image goes to the Responses API as an input_image part of the
/// function_call_output; Chat Completions takes no images in tool messages (text only).
#[test]
fn a_tool_results_image_goes_as_an_input_image_part() {
    let client = ResponsesClient::new(ModelConfig::new(Provider::OpenAiResponses, "gpt-5").api_key(KEY)).unwrap();
    assert!(client.supports_images());
    let mut req = request();
    let image = kodik_model::Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() };
    req.items.push(Item::ToolCall { call_id: "c1".into(), name: "browser".into(), input: ToolInput::Json(json!({})) });
    req.items.push(Item::ToolResult {
        call_id: "c1".into(),
        name: "browser".into(),
        output: "Screenshot.".into(),
        is_error: false,
        images: vec![image],
    });
    let body = client.request_body(&req);
    let out = body["input"].as_array().unwrap().iter().find(|i| i["type"] == "function_call_output").unwrap().clone();
    assert_eq!(
        out["output"],
        json!([{"type": "input_text", "text": "Screenshot."},
               {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}])
    );
    let chat =
        kodik_model::ChatClient::new(ModelConfig::new(Provider::ChatCompletions, "llama3.1").api_key(KEY)).unwrap();
    assert!(!chat.supports_images());
    req.tools.retain(|t| t.freeform_grammar.is_none());
    let body = chat.request_body(&req).unwrap();
    let tool = body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(tool["content"], "Screenshot.");
}

/// A response stopped by the output-token limit in the middle of a call's arguments: the call
/// still ends, with the arguments it had, as not a JSON object (G7, G8).
#[tokio::test]
async fn a_call_cut_off_by_the_output_token_limit_ends_with_its_partial_arguments() {
    let ev = |v: serde_json::Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let body = [
        ev(json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}})),
        ev(json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "fc", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "c1", "name": "grep"}})),
        ev(json!({"type": "response.function_call_arguments.delta", "item_id": "fc", "output_index": 0, "delta": "{\"pattern\": \"aa"})),
        ev(json!({"type": "response.incomplete", "response": {"id": "r", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [], "usage": {"input_tokens": 5, "output_tokens": 7}}})),
    ]
    .concat();
    let server = ReplayServer::start(recording(&[&body])).await.unwrap();
    let (events, error) =
        collect(client_for(&server).stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    let done = events.iter().find_map(|e| match e {
        ModelEvent::ToolCallDone { call_id, input, .. } => Some((call_id.clone(), input.clone())),
        _ => None,
    });
    let (call_id, input) = done.unwrap_or_else(|| panic!("the cut-off call vanished: {events:?}"));
    assert_eq!(call_id, "c1");
    assert_eq!(input.unparsed(), Some(r#"{"pattern": "aa"#));
    assert!(matches!(events.last(), Some(ModelEvent::Completed { stop_reason: StopReason::MaxTokens, .. })));
}
