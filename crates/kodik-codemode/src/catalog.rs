//! The tools a script can see: exposure (K6), TypeScript-like signatures generated from each
//! tool's JSON Schema, the budgeted catalog in the tool description (K7), `searchTools()` and
//! `describeTool()`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kodik_core::{Tool, ToolRegistry};
use serde_json::Value;

use crate::config::{CodeModeConfig, Exposure, is_mcp};

/// How deep nested objects are spelled out in a signature.
const MAX_DEPTH: usize = 2;

/// One tool as scripts see it.
#[derive(Clone)]
pub(crate) struct Entry {
    /// The registry name (`github__list_issues`).
    pub name: String,
    /// The namespace: the MCP server, or `""` for built-in tools.
    pub namespace: String,
    /// The JavaScript expression that calls it (`tools.github.list_issues`).
    pub path: String,
    pub exposure: Exposure,
    pub tool: Arc<dyn Tool>,
}

impl Entry {
    fn description(&self) -> &str {
        &self.tool.spec().description
    }

    fn schema(&self) -> &Value {
        &self.tool.spec().input_schema
    }

    /// The first sentence of the description, at most 160 bytes.
    pub fn summary(&self) -> String {
        first_sentence(self.description(), 160)
    }

    /// `tools.x({a, b?})`: names only.
    pub fn short_signature(&self) -> String {
        let props = object_props(self.schema());
        let names: Vec<String> =
            props.iter().map(|(n, _, req)| if *req { prop_name(n) } else { format!("{}?", prop_name(n)) }).collect();
        format!("{}({{{}}})", self.path, names.join(", "))
    }

    /// `tools.x({a: string, b?: number}): string`: with types.
    pub fn full_signature(&self) -> String {
        format!("{}({}): string", self.path, ts_type(self.schema(), 0))
    }

    /// The multi-line signature with each argument's description, for `describeTool()`.
    pub fn describe(&self) -> String {
        let mut out = format!("{}\n\n{}(args: {{\n", self.description().trim(), self.path);
        for (name, schema, required) in object_props(self.schema()) {
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                for line in d.trim().lines() {
                    out.push_str(&format!("  // {}\n", line.trim()));
                }
            }
            let opt = if required { "" } else { "?" };
            out.push_str(&format!("  {}{opt}: {},\n", prop_name(&name), ts_type(&schema, 1)));
        }
        out.push_str("}): Promise<string>\n\nTool name: ");
        out.push_str(&self.name);
        out.push_str("\nJSON Schema: ");
        out.push_str(&serde_json::to_string(self.schema()).unwrap_or_default());
        out
    }
}

/// Every script-visible tool, by registry name.
#[derive(Clone, Default)]
pub(crate) struct Catalog {
    pub entries: BTreeMap<String, Entry>,
    /// Names the model sees but scripts may not call (for a clear error).
    pub model_only: Vec<String>,
    /// Tools left out for the request the script runs in (the mode does not offer them, the
    /// user switched them off, G11): a script calling one is told so, not "no tool".
    pub withheld: Vec<String>,
}

impl Catalog {
    /// Builds the catalog of `registry` under `config`; `codemode` itself is never included (K5).
    pub fn build(registry: &ToolRegistry, config: &CodeModeConfig) -> Self {
        let mut cat = Self::default();
        for name in registry.names() {
            if name == crate::TOOL_NAME {
                continue;
            }
            let Some(tool) = registry.get(name) else { continue };
            let exposure = config.exposure_of(name);
            if !exposure.script_callable() {
                cat.model_only.push(name.to_string());
                continue;
            }
            let (namespace, path) = match name.split_once("__") {
                Some((server, tool_name)) if is_mcp(name) => {
                    (server.to_string(), format!("tools{}{}", js_member(server), js_member(tool_name)))
                }
                _ => (String::new(), format!("tools{}", js_member(name))),
            };
            cat.entries.insert(
                name.to_string(),
                Entry { name: name.to_string(), namespace, path, exposure, tool: Arc::clone(tool) },
            );
        }
        cat
    }

    /// The entry called `name`, by registry name or by script path (`github.list_issues`,
    /// `tools.github.list_issues`), ignoring case as a last resort.
    pub fn find(&self, name: &str) -> Option<&Entry> {
        if let Some(e) = self.entries.get(name) {
            return Some(e);
        }
        let trimmed = name.strip_prefix("tools.").unwrap_or(name);
        let as_mcp = trimmed.replacen('.', "__", 1);
        if let Some(e) = self.entries.get(&as_mcp) {
            return Some(e);
        }
        let lower = as_mcp.to_lowercase();
        self.entries.values().find(|e| e.name.to_lowercase() == lower)
    }

    /// Up to three callable names closest to `name`.
    pub fn suggest(&self, name: &str) -> Vec<String> {
        kodik_core::registry::closest(name, self.entries.keys().map(String::as_str), 3)
    }

    /// The catalog text for the tool description: namespaces share `budget` bytes round-robin;
    /// `direct` tools in short form, `codemode` tools with full signatures, `deferred` left out;
    /// ends with "N more tools — use searchTools()" when anything was left out (K7).
    pub fn render(&self, budget: usize) -> String {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut hidden = 0usize;
        for e in self.entries.values() {
            let line = match e.exposure {
                Exposure::Direct => format!("- {}\n", e.short_signature()),
                Exposure::Codemode => format!("- {} — {}\n", e.full_signature(), e.summary()),
                Exposure::Deferred | Exposure::ModelOnly => {
                    hidden += 1;
                    continue;
                }
            };
            groups.entry(e.namespace.as_str()).or_default().push(line);
        }
        let header = |ns: &str| {
            if ns.is_empty() { "Built-in tools:\n".to_string() } else { format!("MCP server `{ns}`:\n") }
        };
        let total: usize = groups.values().map(Vec::len).sum();
        // Reserve room for the closing line so the whole catalog stays within the budget.
        let footer_room = format!("{} more tools — use searchTools() to find them.\n", total + hidden).len();
        let mut left = budget.saturating_sub(footer_room);
        let mut taken: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut cursor: BTreeMap<&str, usize> = groups.keys().map(|k| (*k, 0)).collect();
        let mut progress = true;
        while progress {
            progress = false;
            for (ns, lines) in &groups {
                let i = cursor.get(ns).copied().unwrap_or(usize::MAX);
                let Some(line) = lines.get(i) else { continue };
                let head_cost = if taken.contains_key(ns) { 0 } else { header(ns).len() };
                if line.len() + head_cost <= left {
                    left -= line.len() + head_cost;
                    taken.entry(ns).or_default().push(line);
                    cursor.insert(ns, i + 1);
                    progress = true;
                } else {
                    // A namespace whose next line does not fit stops here; smaller ones go on.
                    cursor.insert(ns, usize::MAX);
                }
            }
        }
        let mut out = String::new();
        let mut shown = 0usize;
        for (ns, lines) in &taken {
            out.push_str(&header(ns));
            for l in lines {
                out.push_str(l);
                shown += 1;
            }
        }
        let more = total + hidden - shown;
        if more > 0 {
            out.push_str(&format!("{more} more tools — use searchTools() to find them.\n"));
        }
        out
    }

    /// Tools matching `query` (every word must appear in the name or description; names weigh
    /// more), best first.
    pub fn search(&self, query: &str, limit: usize, namespace: Option<&str>) -> Vec<&Entry> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut scored: Vec<(usize, &Entry)> = self
            .entries
            .values()
            .filter(|e| namespace.is_none_or(|ns| e.namespace.eq_ignore_ascii_case(ns)))
            .filter_map(|e| {
                let name = e.name.to_lowercase();
                let desc = e.description().to_lowercase();
                let mut score = 0;
                for w in &words {
                    let in_name = name.contains(w.as_str());
                    let in_desc = desc.contains(w.as_str());
                    if !in_name && !in_desc {
                        return None;
                    }
                    score += if in_name { 3 } else { 1 };
                }
                Some((score, e))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.name.cmp(&b.1.name)));
        scored.into_iter().take(limit).map(|(_, e)| e).collect()
    }
}

/// `.name` when `name` is an identifier, `["name"]` otherwise.
fn js_member(name: &str) -> String {
    if is_identifier(name) {
        format!(".{name}")
    } else {
        format!("[{}]", serde_json::to_string(name).unwrap_or_default())
    }
}

fn prop_name(name: &str) -> String {
    if is_identifier(name) { name.to_string() } else { serde_json::to_string(name).unwrap_or_default() }
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `(name, schema, required)` of an object schema's properties, required first then by order.
fn object_props(schema: &Value) -> Vec<(String, Value, bool)> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    let mut out: Vec<(String, Value, bool)> =
        props.iter().map(|(k, v)| (k.clone(), v.clone(), required.contains(&k.as_str()))).collect();
    out.sort_by_key(|(_, _, req)| !*req);
    out
}

/// A TypeScript-like type for `schema`.
fn ts_type(schema: &Value, depth: usize) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let parts: Vec<String> = values.iter().map(|v| serde_json::to_string(v).unwrap_or_default()).collect();
        return parts.join(" | ");
    }
    if let Some(c) = schema.get("const") {
        return serde_json::to_string(c).unwrap_or_default();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let mut parts: Vec<String> = alts.iter().map(|a| ts_type(a, depth)).collect();
            parts.dedup();
            return parts.join(" | ");
        }
    }
    match schema.get("type") {
        Some(Value::Array(types)) => {
            let parts: Vec<String> = types
                .iter()
                .map(|t| {
                    let mut s = schema.clone();
                    s["type"] = t.clone();
                    ts_type(&s, depth)
                })
                .collect();
            parts.join(" | ")
        }
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let item = schema.get("items").map_or_else(|| "unknown".to_string(), |i| ts_type(i, depth));
                if item.contains(' ') { format!("({item})[]") } else { format!("{item}[]") }
            }
            "object" => object_type(schema, depth),
            _ => "unknown".into(),
        },
        _ if schema.get("properties").is_some() => object_type(schema, depth),
        _ => "unknown".into(),
    }
}

fn object_type(schema: &Value, depth: usize) -> String {
    let props = object_props(schema);
    if props.is_empty() {
        return "object".into();
    }
    if depth >= MAX_DEPTH {
        return "object".into();
    }
    let parts: Vec<String> = props
        .iter()
        .map(|(n, s, req)| format!("{}{}: {}", prop_name(n), if *req { "" } else { "?" }, ts_type(s, depth + 1)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The first sentence of `text` (up to `. ` or a newline), cut to `max` bytes at a char boundary.
/// Where the first sentence of `t` ends (just after its `.`): a `. ` that does not close an
/// abbreviation such as "e.g." or "etc.", nor a line break inside the sentence.
fn sentence_end(t: &str) -> Option<usize> {
    const ABBREVIATIONS: [&str; 6] = ["e.g", "i.e", "etc", "vs", "cf", "approx"];
    let mut from = 0;
    while let Some(i) = t[from..].find(". ").map(|i| from + i) {
        let word = t[..i].rsplit(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
        if !ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a)) {
            return Some(i + 1);
        }
        from = i + 2;
    }
    None
}

pub(crate) fn first_sentence(text: &str, max: usize) -> String {
    let t = text.trim();
    let end = sentence_end(t).or_else(|| t.find('\n')).unwrap_or(t.len());
    let s = &t[..end];
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max.saturating_sub(1);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn k4_first_sentence_is_not_cut_at_an_abbreviation() {
        let d = "Delegate a self-contained subtask to a sub-agent with its own context, e.g. a search. Then more.";
        assert_eq!(
            first_sentence(d, 300),
            "Delegate a self-contained subtask to a sub-agent with its own context, e.g. a search."
        );
        assert_eq!(first_sentence("One (i.e. two). Three.", 300), "One (i.e. two).");
        assert_eq!(first_sentence("Plain. Next.", 300), "Plain.");
    }

    #[test]
    fn k7_signature_types_from_schema() {
        let schema = json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "File"},
                "mode": {"enum": ["a", "b"]},
                "limit": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "opts": {"type": "object", "properties": {"deep": {"type": "object", "properties": {"x": {"type": "number"}}}}}
            }
        });
        let t = ts_type(&schema, 0);
        assert!(t.starts_with("{path: string, "), "{t}");
        assert!(t.contains("mode?: \"a\" | \"b\""), "{t}");
        assert!(t.contains("limit?: number | null"), "{t}");
        assert!(t.contains("tags?: string[]"), "{t}");
        assert!(t.contains("opts?: {deep?: object}"), "{t}");
    }

    #[test]
    fn k1_member_access_for_odd_names() {
        assert_eq!(js_member("read_file"), ".read_file");
        assert_eq!(js_member("odd-name"), "[\"odd-name\"]");
    }
}
