//! Chat Completions: `POST {base}/chat/completions` with `stream: true` (OpenAI, OpenRouter,
//! Ollama, vLLM, llama.cpp).

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{ModelConfig, Provider};
use crate::decode::BodyDecoder;
use crate::openai::json_arguments;
use crate::sse::SseEvent;
use crate::transport::{Decoder, Flow, Transport, parse_event};
use crate::types::{EventStream, Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolInput, Usage};

const NAME: &str = "chat-completions";

/// A client for Chat Completions servers. Freeform tools are refused before sending.
pub struct ChatClient {
    transport: Transport,
}

impl ChatClient {
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
impl ModelClient for ChatClient {
    async fn stream(&self, request: &Request, cancel: CancellationToken) -> Result<EventStream, ModelError> {
        let body = self.request_body(request)?;
        let headers = self.transport.bearer_headers();
        self.transport
            .stream("/chat/completions", &headers, &body, BodyDecoder::new(Provider::ChatCompletions), cancel)
            .await
    }

    fn model(&self) -> &str {
        &self.transport.config.model
    }
}

fn request_body(request: &Request, default_model: &str) -> Result<Value, ModelError> {
    request.refuse_freeform()?;
    let mut messages: Vec<Value> = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for item in &request.items {
        match item {
            Item::User { text } => messages.push(json!({"role": "user", "content": text})),
            Item::Assistant { text } => messages.push(json!({"role": "assistant", "content": text})),
            // Encrypted reasoning belongs to OpenAI Responses; other servers cannot read it.
            Item::Reasoning { .. } => {}
            Item::ToolCall { call_id, name, input } => {
                // A freeform call from an earlier model goes back in its JSON form (P5, G10);
                // arguments that did not parse go back as the model wrote them.
                let arguments = input.arguments_text();
                let call =
                    json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}});
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" => {
                        if last.get("tool_calls").is_none() {
                            last["tool_calls"] = json!([]);
                        }
                        if let Some(calls) = last["tool_calls"].as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            Item::ToolResult { call_id, output, .. } => {
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
        }
    }
    let model = if request.model.is_empty() { default_model } else { &request.model };
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body["tools"] = json!(tools);
        body["parallel_tool_calls"] = json!(request.parallel_tool_calls);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_tokens"] = json!(max);
    }
    Ok(body)
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow, alias = "reasoning")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Vec<CallDelta<'a>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    started: bool,
    done: bool,
}

#[derive(Default)]
pub(crate) struct ChatDecoder {
    /// Calls by their stream index; a BTreeMap so they finish in index order.
    calls: BTreeMap<u64, Call>,
    finish: Option<StopReason>,
    usage: Usage,
}

impl ChatDecoder {
    /// Reports `index` done if it has started and its arguments are complete JSON.
    fn finish_call(&mut self, index: u64, out: &mut VecDeque<ModelEvent>, force: bool) -> Result<(), ModelError> {
        let Some(call) = self.calls.get_mut(&index) else { return Ok(()) };
        if call.done {
            return Ok(());
        }
        let complete = call.arguments.trim().is_empty() || serde_json::from_str::<Value>(&call.arguments).is_ok();
        if !(force || complete) {
            return Ok(());
        }
        if !call.started {
            if call.name.is_empty() {
                return Err(ModelError::Malformed(format!("{NAME}: tool call {index} ended without a name")));
            }
            if call.id.is_empty() {
                // Some servers (Ollama, vLLM, llama.cpp builds, OpenAI-compatible gateways)
                // send no id or an empty one; the call still runs, under an id of our own
                // that its result and the replayed history use alike.
                call.id = generated_id(index);
            }
            out.push_back(ModelEvent::ToolCallStarted { call_id: call.id.clone(), name: call.name.clone() });
            call.started = true;
        }
        call.done = true;
        let input = ToolInput::Json(json_arguments(&call.arguments));
        out.push_back(ModelEvent::ToolCallDone { call_id: call.id.clone(), name: call.name.clone(), input });
        Ok(())
    }

    fn completed(&mut self, out: &mut VecDeque<ModelEvent>) {
        let stop_reason = match self.finish {
            Some(StopReason::EndTurn) if !self.calls.is_empty() => StopReason::ToolUse,
            Some(reason) => reason,
            None => StopReason::Other,
        };
        out.push_back(ModelEvent::Completed { stop_reason, usage: self.usage });
    }
}

impl Decoder for ChatDecoder {
    fn event(&mut self, sse: SseEvent<'_>, out: &mut VecDeque<ModelEvent>) -> Result<Flow, ModelError> {
        if sse.data.trim() == "[DONE]" {
            if self.finish.is_none() {
                return Err(ModelError::Truncated);
            }
            self.completed(out);
            return Ok(Flow::Done);
        }
        let chunk: Chunk<'_> = parse_event(NAME, &sse)?;
        if let Some(error) = chunk.error {
            let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
            return Err(ModelError::Provider(message));
        }
        if let Some(usage) = &chunk.usage {
            let n = |path: &str| usage.pointer(path).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: n("/prompt_tokens"),
                cached_input_tokens: n("/prompt_tokens_details/cached_tokens"),
                output_tokens: n("/completion_tokens"),
                reasoning_tokens: n("/completion_tokens_details/reasoning_tokens"),
                cost_usd: usage.get("cost").and_then(Value::as_f64),
            };
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push_back(ModelEvent::TextDelta { text: text.into_owned() });
                }
                if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                    out.push_back(ModelEvent::ReasoningDelta { text: text.into_owned() });
                }
                for (position, call_delta) in delta.tool_calls.into_iter().enumerate() {
                    self.call_delta(position, call_delta, out)?;
                }
            }
            if let Some(reason) = choice.finish_reason {
                let indices: Vec<u64> = self.calls.keys().copied().collect();
                for index in indices {
                    self.finish_call(index, out, true)?;
                }
                self.finish = Some(match reason.as_str() {
                    "stop" => StopReason::EndTurn,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    "length" => StopReason::MaxTokens,
                    "content_filter" => StopReason::ContentFilter,
                    _ => StopReason::Other,
                });
            }
        }
        Ok(Flow::More)
    }

    /// Some servers (older llama.cpp, some proxies) end the body without `[DONE]`; after a
    /// finish_reason the response is complete anyway.
    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if self.finish.is_none() {
            return Err(ModelError::Truncated);
        }
        self.completed(out);
        Ok(())
    }
}

/// A call id for a call the server sent without one: unique in the conversation (the time in
/// nanoseconds, then the call's index in its response), in the `call_…` form servers use.
fn generated_id(index: u64) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("call_{nanos:x}_{index}")
}

impl ChatDecoder {
    fn call_delta(
        &mut self,
        position: usize,
        delta: CallDelta<'_>,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError> {
        // Servers that omit `index` send each call whole, in array order.
        let index = match delta.index {
            Some(index) => index,
            None if delta.id.is_some() => self.calls.keys().next_back().map_or(position as u64, |last| last + 1),
            None => self.calls.keys().next_back().copied().unwrap_or(0),
        };
        if !self.calls.contains_key(&index) {
            // A new index means the model moved on: earlier calls whose arguments are
            // complete JSON are done now, not at the end of the response (G4).
            let earlier: Vec<u64> = self.calls.range(..index).map(|(i, _)| *i).collect();
            for i in earlier {
                self.finish_call(i, out, false)?;
            }
        }
        let call = self.calls.entry(index).or_default();
        if call.done {
            let more =
                delta.function.as_ref().and_then(|f| f.arguments.as_deref()).is_some_and(|a| !a.trim().is_empty());
            if more {
                return Err(ModelError::Malformed(format!(
                    "{NAME}: tool call {index} (`{}`) got more arguments after its arguments were complete and a later call had started",
                    call.name
                )));
            }
            return Ok(());
        }
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = delta.function {
            // Some servers repeat the name in every delta; the first one counts.
            if let Some(name) = function.name.filter(|n| !n.is_empty() && call.name.is_empty()) {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
        if !call.started && !call.id.is_empty() && !call.name.is_empty() {
            call.started = true;
            out.push_back(ModelEvent::ToolCallStarted { call_id: call.id.clone(), name: call.name.clone() });
        }
        Ok(())
    }
}
