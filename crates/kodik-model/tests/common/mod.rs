//! Helpers shared by the client tests: fixtures, event collection, tool definitions.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses some helpers

use std::time::Duration;

use futures_util::StreamExt;
use kodik_model::{EventStream, ModelError, ModelEvent, ToolDef};
use serde_json::json;

/// The key every test configures; no error, Debug output or recording may contain it.
pub const KEY: &str = "sk-test-SECRET-0123456789abcdef";

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// All events until the stream ends, and the error that ended it, if any.
pub async fn collect(mut stream: EventStream) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(20), stream.next()).await.expect("stream hung") {
        match item {
            Ok(event) => events.push(event),
            Err(e) => {
                assert!(stream.next().await.is_none(), "the stream goes on after an error");
                return (events, Some(e));
            }
        }
    }
    (events, None)
}

pub fn grep_tool() -> ToolDef {
    ToolDef {
        name: "grep".into(),
        description: "Search file contents.".into(),
        input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
        freeform_grammar: None,
    }
}

pub fn glob_tool() -> ToolDef {
    ToolDef {
        name: "glob".into(),
        description: "Find files by name.".into(),
        input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        freeform_grammar: None,
    }
}

pub const PATCH_GRAMMAR: &str = "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\n";

pub fn apply_patch_tool() -> ToolDef {
    ToolDef {
        name: "apply_patch".into(),
        description: "Apply a patch.".into(),
        input_schema: json!({"type": "object", "properties": {"input": {"type": "string"}}}),
        freeform_grammar: Some(PATCH_GRAMMAR.into()),
    }
}

/// The kinds of `events`, e.g. `["text", "started:grep", "done:grep", "completed"]`.
pub fn kinds(events: &[ModelEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            ModelEvent::TextDelta { .. } => "text".to_owned(),
            ModelEvent::ReasoningDelta { .. } => "reasoning_delta".to_owned(),
            ModelEvent::ToolCallStarted { name, .. } => format!("started:{name}"),
            ModelEvent::ToolCallDone { name, .. } => format!("done:{name}"),
            ModelEvent::Reasoning { .. } => "reasoning".to_owned(),
            ModelEvent::Completed { .. } => "completed".to_owned(),
        })
        .collect()
}

pub fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
