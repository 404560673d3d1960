//! `BodyDecoder` without HTTP: every fixture gives the same events however its bytes are split,
//! and Chat Completions variants of other servers (calls without `index`, no `[DONE]`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::collections::VecDeque;

use common::*;
use kodik_model::decode::BodyDecoder;
use kodik_model::{ModelError, ModelEvent, Provider, StopReason, ToolInput};
use serde_json::json;

fn decode(provider: Provider, body: &[u8], chunk: usize) -> Result<Vec<ModelEvent>, ModelError> {
    let mut decoder = BodyDecoder::new(provider);
    let mut out = VecDeque::new();
    for piece in body.chunks(chunk) {
        decoder.feed(piece, &mut out)?;
    }
    decoder.end(&mut out)?;
    Ok(out.into_iter().collect())
}

#[test]
fn every_fixture_decodes_the_same_in_any_chunking() {
    for (provider, file) in [
        (Provider::OpenAiResponses, "responses_text.sse"),
        (Provider::OpenAiResponses, "responses_tools.sse"),
        (Provider::ChatCompletions, "chat_text.sse"),
        (Provider::ChatCompletions, "chat_tools.sse"),
        (Provider::Anthropic, "anthropic_text.sse"),
        (Provider::Anthropic, "anthropic_tools.sse"),
    ] {
        let body = fixture(file);
        let whole = decode(provider, body.as_bytes(), body.len()).unwrap();
        assert!(matches!(whole.last(), Some(ModelEvent::Completed { .. })), "{file}");
        for chunk in 1..=17 {
            assert_eq!(decode(provider, body.as_bytes(), chunk).unwrap(), whole, "{file} in {chunk}-byte chunks");
        }
        // CRLF line endings (some proxies) change nothing either.
        let crlf = body.replace('\n', "\r\n");
        assert_eq!(decode(provider, crlf.as_bytes(), 5).unwrap(), whole, "{file} with CRLF");
    }
}

/// Servers that send whole calls without `index` (several in one chunk) and end without `[DONE]`.
#[test]
fn chat_calls_without_index_and_a_body_without_done_g4() {
    let body = concat!(
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":["#,
        r#"{"id":"c1","type":"function","function":{"name":"grep","arguments":"{\"pattern\":\"a\"}"}},"#,
        r#"{"id":"c2","type":"function","function":{"name":"glob","arguments":"{\"pattern\":\"*.md\"}"}}"#,
        r#"]},"finish_reason":null}]}"#,
        "\n\n",
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#,
        "\n\n",
    );
    let events = decode(Provider::ChatCompletions, body.as_bytes(), body.len()).unwrap();
    assert_eq!(kinds(&events), ["started:grep", "done:grep", "started:glob", "done:glob", "completed"]);
    assert_eq!(
        events[3],
        ModelEvent::ToolCallDone {
            call_id: "c2".into(),
            name: "glob".into(),
            input: ToolInput::Json(json!({"pattern": "*.md"}))
        }
    );
    let ModelEvent::Completed { stop_reason, usage } = &events[4] else { panic!() };
    // "stop" with calls made is still a tool-use turn.
    assert_eq!((*stop_reason, usage.output_tokens), (StopReason::ToolUse, 7));
}

#[test]
fn a_body_cut_mid_event_is_truncated_and_bytes_after_completion_are_ignored() {
    let body = fixture("anthropic_text.sse");
    let cut = &body.as_bytes()[..body.len() - 10];
    assert!(matches!(decode(Provider::Anthropic, cut, 64), Err(ModelError::Truncated)));
    let extra = format!("{body}data: not json at all\n\n");
    let events = decode(Provider::Anthropic, extra.as_bytes(), 64).unwrap();
    assert_eq!(kinds(&events), ["text", "text", "completed"]);
}

/// Function-call arguments that are not JSON reach the tool as a JSON string, so its input
/// check can tell the model; empty arguments are `{}`.
#[test]
fn unparsable_or_empty_arguments_are_kept_for_the_tool_to_judge() {
    let body = concat!(
        r#"data: {"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"a","name":"grep","arguments":"{\"pattern\":"}}"#,
        "\n\n",
        r#"data: {"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","call_id":"b","name":"list","arguments":""}}"#,
        "\n\n",
        r#"data: {"type":"response.completed","response":{}}"#,
        "\n\n",
    );
    let events = decode(Provider::OpenAiResponses, body.as_bytes(), 16).unwrap();
    // No output_item.added was sent: each Done still follows its Started.
    assert_eq!(kinds(&events), ["started:grep", "done:grep", "started:list", "done:list", "completed"]);
    let inputs: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallDone { input, .. } => Some(input.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(inputs, [ToolInput::Json(json!("{\"pattern\":")), ToolInput::Json(json!({}))]);
}
