//! Provider formats: OpenAI function tools, Anthropic tools, MCP tool definitions, and the
//! freeform grammar form of `apply_patch` (P5).

use std::collections::BTreeSet;

use kodik_core::{Effect, ToolSpec};
use kodik_schema::providers::{
    APPLY_PATCH_LARK_GRAMMAR, Format, ProviderError, openai_freeform_apply_patch, render, render_all, render_for,
};
use serde_json::{Value, json};

/// An `apply_patch` spec as edit.rs defines it in JSON form: the patch in one string `input`.
fn apply_patch_spec() -> ToolSpec {
    kodik_schema::find("apply_patch").unwrap_or_else(|| {
        ToolSpec::new(
            "apply_patch",
            "Edit files with a patch in the Codex format.",
            json!({"type": "object", "properties": {"input": {"type": "string", "description": "The patch."}},
                   "required": ["input"], "additionalProperties": false}),
            Effect::MutatesFiles,
        )
    })
}

fn names(tools: &Value) -> Vec<String> {
    let Some(tools) = tools.as_array() else { panic!("not an array: {tools}") };
    tools.iter().map(|t| t["name"].as_str().unwrap_or_default().to_string()).collect()
}

#[test]
fn openai_function_tools_have_object_parameters_without_refs() {
    let specs = kodik_schema::all();
    let tools = render_all(&specs, Format::OpenAi);
    assert_eq!(names(&tools), specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    for (tool, spec) in tools.as_array().unwrap().iter().zip(&specs) {
        let keys: BTreeSet<&str> = tool.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["type", "name", "description", "parameters"]), "{}", spec.name);
        assert_eq!(tool["type"], "function");
        assert_eq!(tool["description"], spec.description.as_str());
        assert_eq!(tool["parameters"]["type"], "object", "{}", spec.name);
        assert_eq!(tool["parameters"], spec.input_schema);
        let text = serde_json::to_string(&tool["parameters"]).unwrap();
        assert!(!text.contains("\"$ref\"") && !text.contains("\"$defs\""), "{}: {text}", spec.name);
        assert!(!text.contains("\"$schema\""), "{}: $schema is not for providers", spec.name);
        // OpenAI limits function names to [a-zA-Z0-9_-]{1,64}.
        assert!(spec.name.len() <= 64 && spec.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}

#[test]
fn anthropic_tools_have_an_object_input_schema() {
    let specs = kodik_schema::all();
    let tools = render_all(&specs, Format::Anthropic);
    assert_eq!(tools.as_array().unwrap().len(), specs.len());
    for (tool, spec) in tools.as_array().unwrap().iter().zip(&specs) {
        let keys: BTreeSet<&str> = tool.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["name", "description", "input_schema"]), "{}", spec.name);
        assert_eq!(tool["name"], spec.name.as_str());
        assert_eq!(tool["input_schema"]["type"], "object");
        // Anthropic refuses oneOf/anyOf/allOf at the top of input_schema.
        for key in ["oneOf", "anyOf", "allOf"] {
            assert!(tool["input_schema"].get(key).is_none(), "{}: top-level {key}", spec.name);
        }
    }
}

#[test]
fn mcp_tool_definitions_use_input_schema_in_camel_case() {
    let specs = kodik_schema::all();
    let tools = render_all(&specs, Format::Mcp);
    for (tool, spec) in tools.as_array().unwrap().iter().zip(&specs) {
        let keys: BTreeSet<&str> = tool.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["name", "description", "inputSchema"]), "{}", spec.name);
        assert_eq!(tool["inputSchema"], spec.input_schema);
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
}

#[test]
fn render_all_of_nothing_is_an_empty_array() {
    assert_eq!(render_all(&[], Format::OpenAi), json!([]));
}

#[test]
fn p5_freeform_apply_patch_is_a_custom_lark_grammar_tool() {
    let tool = openai_freeform_apply_patch("Edit files with a patch.");
    assert_eq!(tool["type"], "custom");
    assert_eq!(tool["name"], "apply_patch");
    assert_eq!(tool["description"], "Edit files with a patch.");
    assert_eq!(tool["format"]["type"], "grammar");
    assert_eq!(tool["format"]["syntax"], "lark");
    let grammar = tool["format"]["definition"].as_str().unwrap();
    assert_eq!(grammar, APPLY_PATCH_LARK_GRAMMAR);
    for marker in [
        "\"*** Begin Patch\"",
        "\"*** End Patch\"",
        "\"*** Add File: \"",
        "\"*** Delete File: \"",
        "\"*** Update File: \"",
        "\"*** Move to: \"",
        "\"*** End of File\"",
        "\"@@\"",
        "\"@@ \"",
        "\" \" /(.*)/",
        "\"-\" /(.*)/",
        "\"+\" /(.*)/",
    ] {
        assert!(grammar.contains(marker), "the grammar lacks {marker}");
    }
    assert!(grammar.starts_with("start: begin_patch file_op+ end_patch"));
}

/// The rule names a Lark grammar defines and the ones it uses.
fn lark_rules(grammar: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut defined = BTreeSet::new();
    let mut used = BTreeSet::new();
    for line in grammar.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('%')) {
        let (head, body) = line.split_once(':').unwrap_or_else(|| panic!("not a rule: {line}"));
        defined.insert(head.trim().to_string());
        // Strip string literals and regexes, then collect lower-case identifiers.
        let mut rest = String::new();
        let mut in_str = None;
        for c in body.chars() {
            match (in_str, c) {
                (None, '"') | (None, '/') => in_str = Some(c),
                (Some(q), c) if c == q => in_str = None,
                (None, c) => rest.push(c),
                _ => {}
            }
        }
        for word in rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                used.insert(word.to_string());
            }
        }
    }
    (defined, used)
}

#[test]
fn p5_every_rule_the_grammar_uses_is_defined_and_used() {
    let (defined, used) = lark_rules(APPLY_PATCH_LARK_GRAMMAR);
    let undefined: Vec<_> = used.difference(&defined).collect();
    assert!(undefined.is_empty(), "rules used but not defined: {undefined:?}");
    let unused: Vec<_> = defined.iter().filter(|d| *d != "start" && !used.contains(*d)).collect();
    assert!(unused.is_empty(), "rules defined but never used: {unused:?}");
    assert!(APPLY_PATCH_LARK_GRAMMAR.contains("%import common.LF"));
}

#[test]
fn p5_the_rule_checker_catches_an_undefined_rule() {
    let (defined, used) = lark_rules("start: a b\na: \"x\"\n");
    assert_eq!(used.difference(&defined).cloned().collect::<Vec<_>>(), ["b"]);
}

#[test]
fn p5_render_for_gives_openai_models_the_freeform_apply_patch() {
    let spec = apply_patch_spec();
    let tool = render_for(&spec, Format::OpenAi, true).unwrap();
    assert_eq!(tool, openai_freeform_apply_patch(&spec.description));
}

#[test]
fn p5_a_provider_without_freeform_tools_gets_a_clear_error() {
    let spec = apply_patch_spec();
    let err = render_for(&spec, Format::OpenAi, false).unwrap_err();
    assert_eq!(err, ProviderError::FreeformUnsupported { tool: "apply_patch".into() });
    let message = err.to_string();
    assert!(message.contains("apply_patch") && message.contains("freeform"), "{message}");
    assert!(message.contains("create_file"), "the error says how to get going again: {message}");
}

#[test]
fn p5_apply_patch_stays_a_json_tool_with_input_for_anthropic_and_mcp() {
    let spec = apply_patch_spec();
    for (format, key) in [(Format::Anthropic, "input_schema"), (Format::Mcp, "inputSchema")] {
        for freeform in [true, false] {
            let tool = render_for(&spec, format, freeform).unwrap();
            assert_eq!(tool, render(&spec, format));
            assert_eq!(tool[key]["properties"]["input"]["type"], "string");
        }
    }
}

#[test]
fn render_for_leaves_every_other_tool_as_render_makes_it() {
    for spec in kodik_schema::all().iter().filter(|s| s.name != "apply_patch") {
        for format in [Format::OpenAi, Format::Anthropic, Format::Mcp] {
            for freeform in [true, false] {
                assert_eq!(render_for(spec, format, freeform).unwrap(), render(spec, format), "{}", spec.name);
            }
        }
    }
}
