//! OpenAI Responses: `POST {base}/responses` with `stream: true`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{ModelConfig, Provider};
use crate::decode::BodyDecoder;
use crate::sse::SseEvent;
use crate::transport::{Decoder, Flow, Transport, parse_event};
use crate::types::{EventStream, Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolInput, Usage};

const NAME: &str = "openai-responses";

/// A client for the OpenAI Responses API (function and freeform tools, encrypted reasoning
/// carried back, `store: false`).
pub struct ResponsesClient {
    transport: Transport,
}

impl ResponsesClient {
    /// A client for `config` (its provider field is not consulted).
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        Ok(Self { transport: Transport::new(config)? })
    }

    /// The JSON body this client sends for `request`.
    pub fn request_body(&self, request: &Request) -> Value {
        request_body(request, &self.transport.config.model)
    }
}

#[async_trait::async_trait]
impl ModelClient for ResponsesClient {
    async fn stream(&self, request: &Request, cancel: CancellationToken) -> Result<EventStream, ModelError> {
        let body = self.request_body(request);
        let headers = self.transport.bearer_headers();
        self.transport.stream("/responses", &headers, &body, BodyDecoder::new(Provider::OpenAiResponses), cancel).await
    }

    fn model(&self) -> &str {
        &self.transport.config.model
    }

    fn supports_freeform_tools(&self) -> bool {
        true
    }

    fn supports_images(&self) -> bool {
        true
    }
}

pub(crate) fn request_body(request: &Request, default_model: &str) -> Value {
    let freeform_calls: HashSet<&str> = request
        .items
        .iter()
        .filter_map(|item| match item {
            Item::ToolCall { call_id, input: ToolInput::Freeform(_), .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let input: Vec<Value> = request
        .items
        .iter()
        .map(|item| match item {
            Item::User { text } => {
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
            }
            Item::Assistant { text } => {
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
            }
            Item::Reasoning { raw } => {
                // With store:false the item's `id` names nothing on the server, and sending it
                // fails the request ("Item with id 'rs_…' not found"); the encrypted content
                // carries the reasoning, so everything else goes back as received.
                let mut raw = raw.clone();
                if let Some(fields) = raw.as_object_mut() {
                    fields.remove("id");
                }
                raw
            }
            Item::ToolCall { call_id, name, input: input @ ToolInput::Json(_) } => {
                // Arguments that did not parse go back as the model wrote them.
                json!({"type": "function_call", "call_id": call_id, "name": name, "arguments": input.arguments_text()})
            }
            Item::ToolCall { call_id, name, input: ToolInput::Freeform(text) } => {
                json!({"type": "custom_tool_call", "call_id": call_id, "name": name, "input": text})
            }
            Item::ToolResult { call_id, output, images, .. } => {
                if freeform_calls.contains(call_id.as_str()) {
                    json!({"type": "custom_tool_call_output", "call_id": call_id, "output": output})
                } else if images.is_empty() {
                    json!({"type": "function_call_output", "call_id": call_id, "output": output})
                } else {
                    // A function call's output may be a list of content parts, images included.
                    let mut parts = vec![json!({"type": "input_text", "text": output})];
                    parts.extend(images.iter().map(|i| {
                        json!({"type": "input_image", "image_url": format!("data:{};base64,{}", i.mime_type, i.data)})
                    }));
                    json!({"type": "function_call_output", "call_id": call_id, "output": parts})
                }
            }
        })
        .collect();
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| match &tool.freeform_grammar {
            Some(grammar) => json!({
                "type": "custom",
                "name": tool.name,
                "description": tool.description,
                "format": {"type": "grammar", "syntax": "lark", "definition": grammar},
            }),
            None => json!({
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
                "strict": false,
            }),
        })
        .collect();
    let model = if request.model.is_empty() { default_model } else { &request.model };
    let mut body = json!({
        "model": model,
        "input": input,
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
    });
    if !request.system.is_empty() {
        body["instructions"] = json!(request.system);
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(request.parallel_tool_calls);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    body
}

/// One Responses stream event; deltas borrow from the SSE buffer (the hot path).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<Value>,
}

struct Call {
    call_id: String,
    name: String,
    input: String,
}

#[derive(Default)]
pub(crate) struct ResponsesDecoder {
    calls: HashMap<u64, Call>,
    made_calls: bool,
}

impl Decoder for ResponsesDecoder {
    fn event(&mut self, sse: SseEvent<'_>, out: &mut VecDeque<ModelEvent>) -> Result<Flow, ModelError> {
        let event: Event<'_> = parse_event(NAME, &sse)?;
        match &*event.kind {
            "response.output_text.delta" => {
                out.push_back(ModelEvent::TextDelta { text: event.delta.unwrap_or_default().into_owned() });
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push_back(ModelEvent::ReasoningDelta { text: event.delta.unwrap_or_default().into_owned() });
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                let index = event.output_index.unwrap_or(0);
                let call = self.calls.get_mut(&index).ok_or_else(|| {
                    ModelError::Malformed(format!("{NAME}: `{}` for output {index}, which is no tool call", event.kind))
                })?;
                call.input.push_str(&event.delta.unwrap_or_default());
            }
            "response.output_item.added" => {
                let item = event.item.unwrap_or_default();
                if let Some(kind @ ("function_call" | "custom_tool_call")) = item.get("type").and_then(Value::as_str) {
                    let (call_id, name) = call_identity(&item, kind)?;
                    out.push_back(ModelEvent::ToolCallStarted { call_id: call_id.clone(), name: name.clone() });
                    self.calls.insert(event.output_index.unwrap_or(0), Call { call_id, name, input: String::new() });
                }
            }
            "response.output_item.done" => {
                let item = event.item.unwrap_or_default();
                let index = event.output_index.unwrap_or(0);
                match item.get("type").and_then(Value::as_str) {
                    Some(kind @ "function_call") => {
                        let call = self.take_call(index, &item, kind, out)?;
                        let text = item.get("arguments").and_then(Value::as_str).unwrap_or(&call.input);
                        let input = ToolInput::Json(json_arguments(text));
                        self.made_calls = true;
                        out.push_back(ModelEvent::ToolCallDone { call_id: call.call_id, name: call.name, input });
                    }
                    Some(kind @ "custom_tool_call") => {
                        let call = self.take_call(index, &item, kind, out)?;
                        let text = item.get("input").and_then(Value::as_str).map_or(call.input, str::to_owned);
                        self.made_calls = true;
                        out.push_back(ModelEvent::ToolCallDone {
                            call_id: call.call_id,
                            name: call.name,
                            input: ToolInput::Freeform(text),
                        });
                    }
                    Some("reasoning") => out.push_back(ModelEvent::Reasoning { raw: item }),
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                // A call the response broke off in (the output-token limit) never got its
                // output_item.done: it ends here with the arguments it had, which the caller
                // can tell the model were cut off, rather than vanishing.
                let mut open: Vec<(u64, Call)> = self.calls.drain().collect();
                open.sort_unstable_by_key(|(index, _)| *index);
                for (_, call) in open {
                    let input = if call.input.trim().is_empty() {
                        Value::String(call.input)
                    } else {
                        json_arguments(&call.input)
                    };
                    self.made_calls = true;
                    let input = ToolInput::Json(input);
                    out.push_back(ModelEvent::ToolCallDone { call_id: call.call_id, name: call.name, input });
                }
                let response = event.response.unwrap_or_default();
                let stop_reason = match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                    Some("max_output_tokens") => StopReason::MaxTokens,
                    Some("content_filter") => StopReason::ContentFilter,
                    Some(_) => StopReason::Other,
                    None if self.made_calls => StopReason::ToolUse,
                    None => StopReason::EndTurn,
                };
                out.push_back(ModelEvent::Completed { stop_reason, usage: usage(&response) });
                return Ok(Flow::Done);
            }
            "response.failed" => {
                let response = event.response.unwrap_or_default();
                let message = response
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the response failed without a message");
                return Err(ModelError::Provider(message.to_owned()));
            }
            "error" => {
                let code = event.code.map(|c| format!(" ({c})")).unwrap_or_default();
                let message = event.message.unwrap_or_else(|| "an error without a message".to_owned());
                return Err(ModelError::Provider(format!("{message}{code}")));
            }
            _ => {}
        }
        Ok(Flow::More)
    }
}

impl ResponsesDecoder {
    /// The call started at `index`, or — when the stream skipped `output_item.added` — one made
    /// from the finished item, announced now so every Done follows its Started.
    fn take_call(
        &mut self,
        index: u64,
        item: &Value,
        kind: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<Call, ModelError> {
        match self.calls.remove(&index) {
            Some(call) => Ok(call),
            None => {
                let (call_id, name) = call_identity(item, kind)?;
                out.push_back(ModelEvent::ToolCallStarted { call_id: call_id.clone(), name: name.clone() });
                Ok(Call { call_id, name, input: String::new() })
            }
        }
    }
}

fn call_identity(item: &Value, kind: &str) -> Result<(String, String), ModelError> {
    let field = |name: &str| item.get(name).and_then(Value::as_str).map(str::to_owned);
    match (field("call_id"), field("name")) {
        (Some(call_id), Some(name)) => Ok((call_id, name)),
        _ => Err(ModelError::Malformed(format!("{NAME}: a `{kind}` item without call_id or name: {item}"))),
    }
}

/// A function call's arguments as JSON: empty text (or `null`) is `{}`; text that is not a
/// JSON object stays the model's text, unchanged, as a JSON string
/// ([`ToolInput::unparsed`](crate::ToolInput::unparsed)).
pub(crate) fn json_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str(text) {
        Ok(v @ Value::Object(_)) => v,
        Ok(Value::Null) => json!({}),
        _ => Value::String(text.to_owned()),
    }
}

fn usage(response: &Value) -> Usage {
    let n = |path: &str| response.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("/usage/input_tokens"),
        cached_input_tokens: n("/usage/input_tokens_details/cached_tokens"),
        output_tokens: n("/usage/output_tokens"),
        reasoning_tokens: n("/usage/output_tokens_details/reasoning_tokens"),
        cost_usd: None,
    }
}
