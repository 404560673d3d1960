//! `tool_search` and `call_tool`: deferred tools found and run without changing the tool list (G12).

use async_trait::async_trait;
use kodik_core::{
    Resource, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, TypedTool, Workspace, dispatch,
};
use kodik_schema::harness::{CallToolArgs, ToolSearchArgs};
use serde_json::{Value, json};

/// Words that say nothing about which tool is meant; a query made only of them keeps them.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "go", "how", "i", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "that", "the", "this", "to", "use", "what", "with",
];

/// Whether description word `d` is query word `w` or a plural/inflection of it (`reference`,
/// `references`; `definition`, `definitions`).
fn same_word(d: &str, w: &str) -> bool {
    if d == w {
        return true;
    }
    let (short, long) = if d.len() <= w.len() { (d, w) } else { (w, d) };
    short.len() >= 4 && long.starts_with(short) && long.len() - short.len() <= 3
}

/// Ranks `tools` for `query`: exact name first, then name words, then description words, each
/// weighted by how few tools share it and how often the description uses it, so a word every
/// description has ("to", "file") does not outrank the one word that names what the model wants
/// ("definition"). Returns indices of tools with a positive score, best first.
pub fn rank_tools(tools: &[ToolSpec], query: &str) -> Vec<usize> {
    let all: Vec<String> =
        query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    let meaningful: Vec<String> = all.iter().filter(|w| !STOP_WORDS.contains(&w.as_str())).cloned().collect();
    let words = if meaningful.is_empty() { all } else { meaningful };
    let q = query.trim().to_lowercase();
    let descs: Vec<Vec<String>> = tools
        .iter()
        .map(|t| t.description.to_lowercase().split(|c: char| !c.is_alphanumeric()).map(str::to_owned).collect())
        .collect();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_lowercase()).collect();
    // Rarer words count more: ln((N + 1) / (tools with the word + 1)) + 1, from 1 upwards.
    let weight = |w: &str| {
        let with = names
            .iter()
            .zip(&descs)
            .filter(|(n, d)| n.split('_').any(|p| same_word(p, w)) || d.iter().any(|d| same_word(d, w)))
            .count();
        ((tools.len() as f64 + 1.0) / (with as f64 + 1.0)).ln() + 1.0
    };
    let weights: Vec<f64> = words.iter().map(|w| weight(w)).collect();
    let mut scored: Vec<(f64, usize)> = tools
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let name = &names[i];
            let mut score = 0.0;
            if *name == q || name.replace('_', " ") == q {
                score += 100.0;
            }
            for (w, weight) in words.iter().zip(&weights) {
                if name.split('_').any(|p| p == w) {
                    score += 10.0 * weight;
                } else if name.contains(w.as_str()) {
                    score += 5.0 * weight;
                }
                // A description that keeps coming back to the word is about it; one that
                // mentions it once may be pointing elsewhere ("lsp for definitions").
                let uses = descs[i].iter().filter(|d| same_word(d, w)).count();
                if uses > 0 {
                    score += 2.0 * weight * (1.0 + (uses as f64).ln());
                }
            }
            (score, i)
        })
        .filter(|(s, _)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(tools[a.1].name.cmp(&tools[b.1].name)));
    scored.into_iter().map(|(_, i)| i).collect()
}

/// `tool_search`: finds deferred tools and returns their schemas.
pub struct ToolSearchTool {
    spec: ToolSpec,
    deferred: Vec<ToolSpec>,
}

impl ToolSearchTool {
    /// Searches `deferred`.
    pub fn new(deferred: Vec<ToolSpec>) -> Self {
        Self { spec: kodik_schema::spec::<ToolSearchArgs>(), deferred }
    }
}

#[async_trait]
impl TypedTool for ToolSearchTool {
    type Args = ToolSearchArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: ToolSearchArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let limit = match args.limit.unwrap_or(5) {
            n @ 1..=20 => n as usize,
            n => {
                return Err(ToolError::InvalidInput {
                    tool: self.spec.name.clone(),
                    field: Some("limit".into()),
                    message: format!("`limit` is {n}; it must be 1 to 20 (default 5)"),
                });
            }
        };
        let hits = rank_tools(&self.deferred, &args.query);
        if hits.is_empty() {
            let names: Vec<&str> = self.deferred.iter().map(|t| t.name.as_str()).collect();
            return Ok(ToolOutput::text(format!(
                "No deferred tool matches `{}`. Deferred tools: {}.",
                args.query,
                names.join(", ")
            )));
        }
        let found: Vec<Value> = hits
            .iter()
            .take(limit)
            .map(|&i| {
                let t = &self.deferred[i];
                json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
            })
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "tools": found }))
            .map_err(|e| ToolError::failed(format!("cannot render the result: {e}")))?;
        Ok(ToolOutput::text(text).with_meta(json!({"found": hits.len().min(limit), "matching": hits.len()})))
    }
}

/// `call_tool`: runs a deferred tool by name, through the same checks, hooks and approval as
/// a direct call.
pub struct CallToolTool {
    spec: ToolSpec,
    deferred: ToolRegistry,
}

impl CallToolTool {
    /// Runs tools of `deferred`.
    pub fn new(deferred: ToolRegistry) -> Self {
        Self { spec: kodik_schema::spec::<CallToolArgs>(), deferred }
    }
}

#[async_trait]
impl TypedTool for CallToolTool {
    type Args = CallToolArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The called tool's rule (G4): `call_tool` of `grep` starts while the response streams,
    /// `call_tool` of a file change waits for the response to end.
    fn starts_while_streaming(&self, args: &Value) -> bool {
        let inner = args.get("name").and_then(Value::as_str).and_then(|n| self.deferred.get(n));
        match (inner, args.get("arguments")) {
            (Some(tool), Some(a)) => tool.starts_while_streaming(a),
            (Some(tool), None) => tool.starts_while_streaming(&Value::Object(Default::default())),
            // Unknown tools fail at once, without running anything.
            (None, _) => true,
        }
    }

    /// The called tool's resources, so a deferred mutation keeps its same-file order (G2).
    fn resources(&self, args: &CallToolArgs, ws: &Workspace) -> Vec<Resource> {
        match self.deferred.get(&args.name) {
            Some(tool) => tool.resources(&Value::Object(args.arguments.clone()), ws),
            None => Vec::new(),
        }
    }

    fn reads(&self, args: &CallToolArgs, ws: &Workspace) -> Vec<Resource> {
        match self.deferred.get(&args.name) {
            Some(tool) => tool.reads(&Value::Object(args.arguments.clone()), ws),
            None => Vec::new(),
        }
    }

    fn check(&self, args: &CallToolArgs) -> Result<(), ToolError> {
        let tool = self.deferred.get(&args.name).ok_or_else(|| {
            ToolError::failed(format!(
                "`{}` is not a deferred tool of this mode; find one with tool_search (deferred: {})",
                args.name,
                self.deferred.names().collect::<Vec<_>>().join(", ")
            ))
        })?;
        // The called tool's own argument check, before any approval (S8).
        tool.validate(&Value::Object(args.arguments.clone()))
    }

    async fn run(&self, args: CallToolArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let call = ToolCall::new(cx.call_id.clone(), args.name, Value::Object(args.arguments));
        Ok(dispatch(&self.deferred, call, cx).await)
    }
}
