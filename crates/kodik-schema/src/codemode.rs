//! Argument type of `codemode` (SPEC K1–K12): one JavaScript program that calls other tools.

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolArgs, spec};

/// The spec of `codemode`.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<CodemodeArgs>()]
}

/// Arguments of `codemode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodemodeArgs {
    /// The JavaScript program: the body of an async function. Call tools with
    /// `await tools.<name>({...})` (MCP tools as `tools.<server>.<tool>`), and `return` the
    /// result: strings go back as-is, other values as JSON.
    pub code: String,
}

impl ToolArgs for CodemodeArgs {
    /// The tool's name.
    const NAME: &'static str = "codemode";
    /// A script runs code and may call any tool: `Process` is the closest single class. Its real
    /// effects are those of the tools it calls, each approved on its own (K5).
    const EFFECT: Effect = Effect::Process;
    /// A script may call any tool, file mutations included, so unlike other `Process` tools it
    /// does not start while the response still streams: no later call of the response may
    /// overtake it (G4). The calls inside go through hooks and approval one by one (K5).
    const STREAMING_START: Option<bool> = Some(false);
    const DESCRIPTION: &'static str = "Run a JavaScript program that calls other tools, to chain dependent calls \
without a round trip each, run independent calls in parallel (Promise.all), loop over many items, or read large \
outputs and keep only the facts you need. The code is the body of an async function: use await, and return the \
result (strings as-is, other values as JSON). Only the return value and logs come back, not the nested results. \
Call tools as `await tools.<name>({...})`; MCP tools are grouped by server (`github__list_issues` is \
`tools.github.list_issues`). Each call takes one object and resolves to the tool's text output (JSON.parse it when \
it is JSON). A failed call throws an Error named ToolError with `tool` and `output`; catch it or use \
Promise.allSettled. Helpers: text(value), console.log/info/warn/error, call(name, args), searchTools(query, {limit, \
namespace}), describeTool(name), ALL_TOOLS, store(key, value)/load(key), sleep(ms). No filesystem, network, process, \
timer or module access except through tools. Limits: 30 s, 50 tool calls, 8 in parallel, 100000 output bytes.";
}
