//! The argument types of every kodik tool, their JSON Schemas, and their provider formats.
//!
//! Usable without any tool implementation: an agent that implements the tools itself can take
//! the schemas from here. Tool crates take their [`ToolSpec`] from here too, so what `kodik
//! schema` prints is exactly what the tools advertise.
//!
//! Each argument struct implements [`ToolArgs`]; its doc comments become the descriptions the
//! model reads.
//!
//! ```
//! let specs = kodik_schema::all();
//! assert!(specs.iter().any(|s| s.name == "read_file"));
//! let openai = kodik_schema::providers::render(&specs[0], kodik_schema::providers::Format::OpenAi);
//! assert_eq!(openai["type"], "function");
//! ```

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub mod agent;
pub mod browser;
pub mod codemode;
pub mod edit;
pub mod harness;
pub mod lsp;
pub mod providers;
pub mod search;
pub mod shell;
pub mod web;

/// The argument struct of one tool.
pub trait ToolArgs: DeserializeOwned + JsonSchema + Send + 'static {
    /// The tool's name.
    const NAME: &'static str;
    /// What the tool may affect.
    const EFFECT: Effect;
    /// What the model reads about the tool.
    const DESCRIPTION: &'static str;
    /// Overrides whether calls may start while the response still streams (G4), which
    /// otherwise follows from [`Self::EFFECT`]. `codemode` sets it to `false`: a script may
    /// change files, so no later call of the response may overtake it.
    const STREAMING_START: Option<bool> = None;
}

/// The JSON Schema of `A`, with every subschema inlined (providers dislike `$ref`), made
/// compact ([`compact_schema`]) and without the `$schema` and `title` keys.
pub fn input_schema<A: JsonSchema>() -> Value {
    let generator =
        schemars::generate::SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true).into_generator();
    let mut schema = generator.into_root_schema_for::<A>();
    compact_schema(&mut schema);
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
    }
    value
}

/// The spec of the tool whose arguments are `A`.
pub fn spec<A: ToolArgs>() -> ToolSpec {
    let mut spec = ToolSpec::new(A::NAME, A::DESCRIPTION, input_schema::<A>(), A::EFFECT);
    if let Some(streaming_start) = A::STREAMING_START {
        spec.streaming_start = streaming_start;
    }
    spec
}

/// Every built-in tool's spec, sorted by name.
pub fn all() -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = [
        search::specs(),
        edit::specs(),
        shell::specs(),
        lsp::specs(),
        web::specs(),
        browser::specs(),
        agent::specs(),
        codemode::specs(),
        harness::specs(),
    ]
    .into_iter()
    .flatten()
    .collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    specs
}

/// The spec of the built-in tool called `name`.
pub fn find(name: &str) -> Option<ToolSpec> {
    all().into_iter().find(|s| s.name == name)
}

/// An [`kodik_core::ToolError::InvalidInput`] for `tool` naming `field`, for the cross-field
/// checks the schema cannot express (`LspArgs::check`, `BrowserArgs::check`, …).
pub(crate) fn invalid_input(tool: &str, field: &str, message: impl Into<String>) -> kodik_core::ToolError {
    kodik_core::ToolError::InvalidInput {
        tool: tool.to_string(),
        field: Some(field.to_string()),
        message: message.into(),
    }
}

/// Makes an argument struct's schema smaller and easier for every provider to take.
/// [`input_schema`] (and so [`spec`]) applies it to every tool's arguments; use it on a schema
/// of your own made another way. It is applied once: a second pass would join the enum value
/// lines it writes into the description.
///
/// The object's description and each property's description are unwrapped: the line breaks
/// of the doc comment become spaces (blank lines stay paragraph breaks). Then, for each property:
/// - `format` (`uint32`, `double`, …) is dropped: it tells the model nothing the range does
///   not, and some providers refuse formats they do not know.
/// - an optional field's `anyOf: [T, {"type": "null"}]` or `"type": [T, "null"]` becomes `T`.
///   The field is optional already by being absent from `required`, and `null` is still
///   accepted when deserializing; the nested copy of the type's own description goes too.
/// - an enum of documented unit variants (a `oneOf` of `const` strings) becomes
///   `{"type": "string", "enum": [...]}`, each value's doc listed in the field's description:
///   shorter, and Gemini and OpenAI's strict mode do not take `oneOf`.
///
/// The same goes for the object schemas nested in a property (an array's `items`, an object
/// property's own `properties`) and in `$defs`: a model reads them as it reads the top level,
/// and a provider that refuses a format refuses it at any depth.
pub fn compact_schema(schema: &mut schemars::Schema) {
    if let Some(Value::String(description)) = schema.get_mut("description") {
        *description = unwrap_lines(description);
    }
    compact_members(schema.as_object_mut());
}

/// Compacts each property of an object schema and each schema in its `$defs`.
fn compact_members(map: Option<&mut serde_json::Map<String, Value>>) {
    let Some(map) = map else { return };
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(members)) = map.get_mut(key) {
            for member in members.values_mut() {
                compact_property(member);
            }
        }
    }
}

/// Joins the lines of each paragraph of a doc comment with spaces, except that a list item
/// (`- `, `* `, `1. `) starts a line of its own: a list written in a doc comment, and the value
/// list [`compact_schema`] writes for an enum, stay lists (so compacting twice changes nothing).
fn unwrap_lines(text: &str) -> String {
    let paragraph = |p: &str| {
        let mut out = String::with_capacity(p.len());
        for line in p.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if !out.is_empty() {
                out.push(if is_list_item(line) { '\n' } else { ' ' });
            }
            out.push_str(line);
        }
        out
    };
    text.split("\n\n").map(paragraph).collect::<Vec<_>>().join("\n\n")
}

/// Whether a doc comment line starts a Markdown list item.
fn is_list_item(line: &str) -> bool {
    if line.starts_with("- ") || line.starts_with("* ") {
        return true;
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && (line[digits..].starts_with(". ") || line[digits..].starts_with(") "))
}

fn compact_property(property: &mut Value) {
    let Value::Object(map) = property else { return };
    // anyOf: [T, null] → T, keeping the field's own keys (description, default) over T's.
    if let Some(Value::Array(any_of)) = map.get("anyOf")
        && any_of.len() == 2
        && let Some(null_at) = any_of.iter().position(|s| s.get("type").and_then(Value::as_str) == Some("null"))
        && let Some(Value::Object(inner)) = any_of.get(1 - null_at).cloned()
    {
        let mut merged = inner;
        map.remove("anyOf");
        for (k, v) in std::mem::take(map) {
            merged.insert(k, v);
        }
        *map = merged;
    }
    map.remove("format");
    // The schemas inside (after the merge above, which may bring them): an array's items (one
    // schema or a tuple's), an object's properties.
    match map.get_mut("items") {
        Some(Value::Array(items)) => items.iter_mut().for_each(compact_property),
        Some(items) => compact_property(items),
        None => {}
    }
    compact_members(Some(map));
    // "type": [T, "null"] → T.
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
        if non_null.len() == 1 && non_null.len() < types.len() {
            map.insert("type".into(), non_null.into_iter().next().unwrap_or(Value::Null));
        }
    }
    if let Some(Value::String(description)) = map.get_mut("description") {
        *description = unwrap_lines(description);
    }
    // oneOf of documented string constants → enum, docs moved into the description.
    if let Some(Value::Array(one_of)) = map.get("oneOf") {
        let variants: Option<Vec<(String, Option<String>)>> = one_of
            .iter()
            .map(|v| {
                let value = v.get("const")?.as_str()?.to_string();
                Some((value, v.get("description").and_then(Value::as_str).map(str::to_string)))
            })
            .collect();
        if let Some(variants) = variants {
            let mut description = map.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
            for (value, doc) in &variants {
                if let Some(doc) = doc {
                    description.push_str(&format!("\n- `{value}`: {}", unwrap_lines(doc)));
                }
            }
            map.remove("oneOf");
            map.insert("type".into(), Value::String("string".into()));
            map.insert("enum".into(), variants.into_iter().map(|(v, _)| Value::String(v)).collect());
            map.insert("description".into(), Value::String(description.trim_start().to_string()));
        }
    }
}

/// Lets the README example compile as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
