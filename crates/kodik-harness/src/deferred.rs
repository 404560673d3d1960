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

/// Query words and the words tool descriptions use for the same thing: a query in the
/// model's words (`list directory`, `regex`, `callers`) finds the tool described in others.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("directory", &["folder"]),
    ("directories", &["folders"]),
    ("dir", &["folder"]),
    ("folder", &["directory"]),
    ("regex", &["regular"]),
    ("regexp", &["regular"]),
    ("caller", &["incoming"]),
    ("callers", &["incoming"]),
    ("callee", &["outgoing"]),
    ("callees", &["outgoing"]),
    ("list", &["find"]),
    ("rename", &["move"]),
];

/// Ranks `tools` for `query`: exact name first, then name words, then description words, each
/// weighted by how few tools share it (so a word every description has, "to" or "file", does
/// not outrank the one word that names what the model wants, "definition"), by how much of a
/// description it takes up (a long description that repeats a word is not more about it than
/// a short one that says it once), and doubled in the description's first sentence, which
/// says what the tool is for. A query word counts as well through the word descriptions use
/// for it (a small table of synonyms). Returns indices of tools with a positive score, best first.
pub fn rank_tools(tools: &[ToolSpec], query: &str) -> Vec<usize> {
    /// BM25's term-frequency saturation and length normalisation.
    const K: f64 = 1.2;
    const B: f64 = 0.25;
    let split = |text: &str| -> Vec<String> {
        text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect()
    };
    let all = split(query);
    let meaningful: Vec<String> = all.iter().filter(|w| !STOP_WORDS.contains(&w.as_str())).cloned().collect();
    let words = if meaningful.is_empty() { all } else { meaningful };
    let q = query.trim().to_lowercase();
    let descs: Vec<Vec<String>> = tools.iter().map(|t| split(&t.description)).collect();
    let leads: Vec<Vec<String>> =
        tools.iter().map(|t| split(t.description.split_terminator(". ").next().unwrap_or_default())).collect();
    let average = descs.iter().map(Vec::len).sum::<usize>() as f64 / descs.len().max(1) as f64;
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
    // Each query word with the words that mean the same, each with its weight.
    let concepts: Vec<Vec<(&str, f64)>> = words
        .iter()
        .map(|w| {
            let same = SYNONYMS.iter().filter(|(from, _)| from == w).flat_map(|(_, to)| to.iter().copied());
            std::iter::once(w.as_str()).chain(same).map(|a| (a, weight(a))).collect()
        })
        .collect();
    let mut scored: Vec<(f64, usize)> = tools
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let name = &names[i];
            let mut score = 0.0;
            if *name == q || name.replace('_', " ") == q {
                score += 100.0;
            }
            let length = descs[i].len() as f64 / average.max(1.0);
            for alternatives in &concepts {
                let best = alternatives
                    .iter()
                    .map(|&(w, weight)| {
                        let mut s = 0.0;
                        if name.split('_').any(|p| p == w) {
                            s += 10.0 * weight;
                        } else if name.contains(w) {
                            s += 5.0 * weight;
                        }
                        let uses = descs[i].iter().filter(|d| same_word(d, w)).count() as f64;
                        if uses > 0.0 {
                            let tf = uses * (K + 1.0) / (uses + K * (1.0 - B + B * length));
                            let lead = if leads[i].iter().any(|d| same_word(d, w)) { 2.0 } else { 1.0 };
                            s += 2.0 * weight * tf * lead;
                        }
                        s
                    })
                    .fold(0.0, f64::max);
                score += best;
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
    /// The request's directly offered tools: a model that calls one through `call_tool` gets it
    /// run as if called by its name, not sent to tool_search, which would not find it.
    direct: ToolRegistry,
}

impl CallToolTool {
    /// Runs tools of `deferred`.
    pub fn new(deferred: ToolRegistry) -> Self {
        Self { spec: kodik_schema::spec::<CallToolArgs>(), deferred, direct: ToolRegistry::new() }
    }

    /// Also runs the request's directly offered tools (`direct`).
    pub fn with_direct(mut self, direct: ToolRegistry) -> Self {
        self.direct = direct;
        self
    }

    /// The registry that has `name`: the deferred tools first, then the direct ones.
    fn holder(&self, name: &str) -> Option<&ToolRegistry> {
        [&self.deferred, &self.direct].into_iter().find(|r| r.get(name).is_some())
    }

    fn find(&self, name: &str) -> Option<&std::sync::Arc<dyn kodik_core::Tool>> {
        self.holder(name).and_then(|r| r.get(name))
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
        let inner = args.get("name").and_then(Value::as_str).and_then(|n| self.find(n));
        match (inner, args.get("arguments")) {
            (Some(tool), Some(a)) => tool.starts_while_streaming(a),
            (Some(tool), None) => tool.starts_while_streaming(&Value::Object(Default::default())),
            // Unknown tools fail at once, without running anything.
            (None, _) => true,
        }
    }

    /// The called tool's resources, so a deferred mutation keeps its same-file order (G2).
    fn resources(&self, args: &CallToolArgs, ws: &Workspace) -> Vec<Resource> {
        match self.find(&args.name) {
            Some(tool) => tool.resources(&Value::Object(args.arguments.clone()), ws),
            None => Vec::new(),
        }
    }

    fn reads(&self, args: &CallToolArgs, ws: &Workspace) -> Vec<Resource> {
        match self.find(&args.name) {
            Some(tool) => tool.reads(&Value::Object(args.arguments.clone()), ws),
            None => Vec::new(),
        }
    }

    fn check(&self, args: &CallToolArgs) -> Result<(), ToolError> {
        let tool = self.find(&args.name).ok_or_else(|| {
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
        let registry = self.holder(&args.name).unwrap_or(&self.deferred);
        let call = ToolCall::new(cx.call_id.clone(), args.name, Value::Object(args.arguments));
        Ok(dispatch(registry, call, cx).await)
    }
}

#[cfg(test)]
mod tests {
    use super::rank_tools;

    /// Everyday queries in the model's words rank the tool meant first: through the words
    /// descriptions use for them (directory/folder, regex/regular expression, callers/incoming
    /// calls, list/find, rename/move) and what a description leads with. Before, `list
    /// directory` gave agent_status (its long description repeats "lists"), `search file
    /// contents regex` and `callers of a function` read_file, `list files in a folder` grep.
    #[test]
    fn g12_tool_search_ranks_by_the_models_words_and_what_a_description_leads_with() {
        let all = kodik_schema::all();
        let first = |query: &str| all[rank_tools(&all, query)[0]].name.clone();
        for (query, tool) in [
            ("list directory", "glob"),
            ("search file contents regex", "grep"),
            ("callers of a function", "lsp"),
            ("list files in a folder", "glob"),
            ("rename a file", "apply_patch"),
            ("todo list", "todo_write"),
            ("find files by name", "glob"),
            ("take a screenshot", "browser"),
            ("background task status", "agent_status"),
        ] {
            assert_eq!(first(query), tool, "{query}");
        }
    }
}
