//! Argument types of the deferred-tool functions `tool_search` and `call_tool` (SPEC G12).
//!
//! Deferred tools are not in the request's tool list; the model finds them with `tool_search`,
//! whose result carries their schemas, and calls them through `call_tool`, so the tool list
//! (and the prompt cache) never changes.

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{ToolArgs, spec};

/// The specs of `tool_search` and `call_tool`.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<ToolSearchArgs>(), spec::<CallToolArgs>()]
}

/// Arguments of `tool_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSearchArgs {
    /// Keywords for what you want to do or the tool's name, e.g. `go to definition` or `lsp`.
    pub query: String,
    /// At most this many tools (default 5).
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

impl ToolArgs for ToolSearchArgs {
    const NAME: &'static str = "tool_search";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Find a deferred tool: one that is available but not in your tool list (for \
example lsp, read_file, grep, web_fetch or the sub-agent tools, depending on the mode). The result lists the matching \
tools with their descriptions and JSON Schemas; call one with call_tool.";
}

/// Arguments of `call_tool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallToolArgs {
    /// The exact name of a tool found with tool_search.
    pub name: String,
    /// The tool's arguments, as an object that fits the schema tool_search returned.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

impl ToolArgs for CallToolArgs {
    const NAME: &'static str = "call_tool";
    /// The real effect is the called tool's; the harness applies that tool's approval rules.
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Call a deferred tool found with tool_search: give its exact `name` and its \
`arguments` as an object matching the schema tool_search returned. The result is that tool's own result; approval \
and hooks are those of the called tool.";
}
