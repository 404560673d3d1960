//! Anthropic Messages: `POST {base}/v1/messages` with `stream: true`.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{ModelConfig, Provider};
use crate::decode::BodyDecoder;
use crate::openai::json_arguments;
use crate::sse::SseEvent;
use crate::transport::{Decoder, Flow, Transport, parse_event};
use crate::types::{EventStream, Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolInput, Usage};

const NAME: &str = "anthropic";
/// The API version header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is sent when a request sets no cap.
pub const DEFAULT_MAX_TOKENS: u32 = 16_384;

/// A client for Anthropic Messages (tool use, prompt caching on the system prompt and tools).
pub struct AnthropicClient {
    transport: Transport,
}

impl AnthropicClient {
    /// A client for `config` (its provider field is not consulted).
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        Ok(Self { transport: Transport::new(config)? })
    }

    /// The JSON body this client sends for `request`, or why it cannot be sent.
    pub fn request_body(&self, request: &Request) -> Result<Value, ModelError> {
        request_body(request, &self.transport.config.model)
    }
}

#[async_trait::async_trait]
impl ModelClient for AnthropicClient {
    async fn stream(&self, request: &Request, cancel: CancellationToken) -> Result<EventStream, ModelError> {
        let body = self.request_body(request)?;
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = self.transport.config.key() {
            headers.push(("x-api-key", key.to_owned()));
        }
        self.transport.stream("/v1/messages", &headers, &body, BodyDecoder::new(Provider::Anthropic), cancel).await
    }

    fn model(&self) -> &str {
        &self.transport.config.model
    }

    fn supports_images(&self) -> bool {
        true
    }
}

fn request_body(request: &Request, default_model: &str) -> Result<Value, ModelError> {
    request.refuse_freeform()?;
    let mut messages: Vec<Value> = Vec::new();
    // Consecutive items of one role become one message: the API wants the roles to alternate,
    // and all results of one turn's calls go back in a single user message.
    let mut push = |role: &str, block: Value| match messages.last_mut() {
        Some(last) if last["role"] == role => {
            if let Some(content) = last["content"].as_array_mut() {
                content.push(block);
            }
        }
        _ => messages.push(json!({"role": role, "content": [block]})),
    };
    for item in &request.items {
        match item {
            Item::User { text } => push("user", json!({"type": "text", "text": text})),
            // Claude streams whitespace-only text ("\n\n") before a tool call at times, and
            // refuses it when it comes back ("text content blocks must contain non-whitespace
            // text"): sent as it is, it would fail this request and every resume after it.
            Item::Assistant { text } if text.trim().is_empty() => {}
            Item::Assistant { text } => push("assistant", json!({"type": "text", "text": text})),
            Item::Reasoning { .. } => {}
            Item::ToolCall { call_id, name, input } => {
                // tool_use.input must be an object: a freeform call goes back in its JSON form (P5).
                let input = match input.clone().into_args() {
                    v if v.is_object() => v,
                    v => json!({ "input": v }),
                };
                push("assistant", json!({"type": "tool_use", "id": call_id, "name": name, "input": input}));
            }
            Item::ToolResult { call_id, output, is_error, images, .. } => {
                let content = if images.is_empty() {
                    json!(output)
                } else {
                    // tool_result content may be a list of blocks, images included.
                    let mut blocks = Vec::new();
                    if !output.trim().is_empty() {
                        blocks.push(json!({"type": "text", "text": output}));
                    }
                    blocks.extend(images.iter().map(|i| {
                        json!({"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}})
                    }));
                    json!(blocks)
                };
                push(
                    "user",
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
                )
            }
        }
    }
    mark_conversation_cache(&mut messages);
    let model = if request.model.is_empty() { default_model } else { &request.model };
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if !request.system.is_empty() {
        body["system"] = json!([{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]);
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        // The cache breakpoint on the last tool caches the whole tool list (it precedes the system prompt).
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        body["tools"] = json!(tools);
        body["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": !request.parallel_tool_calls});
    }
    Ok(body)
}

/// Cache breakpoints in the conversation, besides the tool list's and the system prompt's (the
/// API takes four): on the newest message, so the next turn reads this whole request from the
/// cache, and on the user message before it, where the previous request put its breakpoint, so
/// this one reads the earlier turns from the cache however many blocks the last turn added
/// (the API looks back only 20 blocks from a breakpoint for an earlier one).
fn mark_conversation_cache(messages: &mut [Value]) {
    let Some(last) = messages.len().checked_sub(1) else { return };
    let previous_user = messages[..last].iter().rposition(|m| m["role"] == "user");
    for i in previous_user.into_iter().chain([last]) {
        if let Some(block) = messages[i]["content"].as_array_mut().and_then(|c| c.last_mut()) {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<BlockDelta<'a>>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// `content_block_delta.delta` and `message_delta.delta` in one shape.
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default)]
    stop_reason: Option<String>,
}

struct ToolBlock {
    id: String,
    name: String,
    json: String,
}

#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    tools: HashMap<u64, ToolBlock>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    cache_creation: u64,
}

impl AnthropicDecoder {
    fn read_usage(&mut self, usage: &Value) {
        let n = |name: &str| usage.get(name).and_then(Value::as_u64);
        // message_start carries the input side, message_delta the (cumulative) output side;
        // newer API versions repeat the input side in message_delta, so take what is there.
        if let Some(v) = n("input_tokens") {
            self.usage.input_tokens = v;
        }
        if let Some(v) = n("cache_read_input_tokens") {
            self.usage.cached_input_tokens = v;
        }
        if let Some(v) = n("cache_creation_input_tokens") {
            self.cache_creation = v;
        }
        if let Some(v) = n("output_tokens") {
            self.usage.output_tokens = v;
        }
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, sse: SseEvent<'_>, out: &mut VecDeque<ModelEvent>) -> Result<Flow, ModelError> {
        let event: Event<'_> = parse_event(NAME, &sse)?;
        match &*event.kind {
            "content_block_delta" => {
                let delta = event.delta.ok_or_else(|| malformed("content_block_delta without a delta"))?;
                match delta.kind.as_deref() {
                    Some("text_delta") => {
                        out.push_back(ModelEvent::TextDelta { text: delta.text.unwrap_or_default().into_owned() });
                    }
                    Some("input_json_delta") => {
                        let index = event.index.unwrap_or(0);
                        let block = self.tools.get_mut(&index).ok_or_else(|| {
                            malformed(&format!("input_json_delta for block {index}, which is no tool_use block"))
                        })?;
                        block.json.push_str(&delta.partial_json.unwrap_or_default());
                    }
                    Some("thinking_delta") => out.push_back(ModelEvent::ReasoningDelta {
                        text: delta.thinking.unwrap_or_default().into_owned(),
                    }),
                    _ => {}
                }
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let field = |name: &str| block.get(name).and_then(Value::as_str).map(str::to_owned);
                    let (Some(id), Some(name)) = (field("id"), field("name")) else {
                        return Err(malformed(&format!("a tool_use block without id or name: {block}")));
                    };
                    out.push_back(ModelEvent::ToolCallStarted { call_id: id.clone(), name: name.clone() });
                    self.tools.insert(event.index.unwrap_or(0), ToolBlock { id, name, json: String::new() });
                }
            }
            "content_block_stop" => {
                if let Some(block) = self.tools.remove(&event.index.unwrap_or(0)) {
                    let input = ToolInput::Json(json_arguments(&block.json));
                    out.push_back(ModelEvent::ToolCallDone { call_id: block.id, name: block.name, input });
                }
            }
            "message_start" => {
                if let Some(usage) = event.message.as_ref().and_then(|m| m.get("usage")) {
                    self.read_usage(usage);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(match reason.as_str() {
                        "end_turn" | "stop_sequence" => StopReason::EndTurn,
                        "tool_use" => StopReason::ToolUse,
                        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
                        "refusal" => StopReason::ContentFilter,
                        _ => StopReason::Other,
                    });
                }
                if let Some(usage) = &event.usage {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                // A tool_use block the message ended in without its block stop (cut off): it
                // ends with the input it had; empty input is no arguments at all, not `{}`.
                let mut open: Vec<(u64, ToolBlock)> = std::mem::take(&mut self.tools).into_iter().collect();
                open.sort_unstable_by_key(|(index, _)| *index);
                for (_, block) in open {
                    let input = if block.json.trim().is_empty() {
                        Value::String(block.json)
                    } else {
                        json_arguments(&block.json)
                    };
                    let input = ToolInput::Json(input);
                    out.push_back(ModelEvent::ToolCallDone { call_id: block.id, name: block.name, input });
                }
                let mut usage = self.usage;
                // Anthropic counts cached and cache-written tokens apart from input_tokens;
                // Usage::input_tokens is the whole prompt, as the OpenAI APIs report it.
                usage.input_tokens += usage.cached_input_tokens + self.cache_creation;
                let stop_reason = self.stop_reason.unwrap_or(StopReason::Other);
                out.push_back(ModelEvent::Completed { stop_reason, usage });
                return Ok(Flow::Done);
            }
            "error" => {
                let error = event.error.unwrap_or_default();
                let message = error.get("message").and_then(Value::as_str).unwrap_or("an error without a message");
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                return Err(ModelError::Provider(format!("{message} ({kind})")));
            }
            // ping, and block types this client does not surface.
            _ => {}
        }
        Ok(Flow::More)
    }
}

fn malformed(what: &str) -> ModelError {
    ModelError::Malformed(format!("{NAME}: {what}"))
}
