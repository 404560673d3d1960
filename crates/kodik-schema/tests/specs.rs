//! Checks over the specs as a model and a provider see them: names, effects, schema shape and
//! documentation of every property.

use kodik_core::{Effect, ToolSpec};
use kodik_schema::{agent, browser, codemode, harness, lsp, web};
use serde_json::Value;

/// The 29 built-in tools of issue 2 (SPEC sections R–K).
const ALL_TOOLS: [&str; 29] = [
    "read_file",
    "edit_file",
    "create_file",
    "delete_file",
    "apply_patch",
    "edit_notebook",
    "shell",
    "get_terminal_output",
    "kill_terminal",
    "glob",
    "grep",
    "read_lints",
    "lsp",
    "codebase_search",
    "web_fetch",
    "web_search",
    "browser",
    "todo_write",
    "memory",
    "sub_agent",
    "agent_status",
    "send_message",
    "ask_questions",
    "check_understanding",
    "create_lesson",
    "generate_plan",
    "codemode",
    "tool_search",
    "call_tool",
];

/// The specs of the modules this test file is about (lsp, web, browser, agent, codemode, harness).
fn own_specs() -> Vec<ToolSpec> {
    [lsp::specs(), web::specs(), browser::specs(), agent::specs(), codemode::specs(), harness::specs()]
        .into_iter()
        .flatten()
        .collect()
}

/// Every place in `schema` where a property lacks a non-empty description, as JSON paths.
fn undocumented(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, prop) in props {
            let here = format!("{path}.{name}");
            let documented = prop.get("description").and_then(Value::as_str).is_some_and(|d| !d.trim().is_empty());
            if !documented {
                out.push(here.clone());
            }
            undocumented(prop, &here, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get(key) {
            undocumented(sub, &format!("{path}.{key}"), out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = map.get(key) {
            for (i, sub) in subs.iter().enumerate() {
                // An enum value written as `{"const": …}` is documented like a property.
                if sub.get("const").is_some() && sub.get("description").is_none() {
                    out.push(format!("{path}.{key}[{i}]"));
                }
                undocumented(sub, &format!("{path}.{key}[{i}]"), out);
            }
        }
    }
}

/// Every `$ref` in `value`, as JSON paths.
fn refs(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" || k == "$defs" || k == "definitions" {
                    out.push(format!("{path}.{k}"));
                }
                refs(v, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                refs(v, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn assert_well_formed(specs: &[ToolSpec]) {
    for spec in specs {
        let schema = &spec.input_schema;
        assert_eq!(schema["type"], "object", "{}: the top of the schema must be an object", spec.name);
        assert!(schema["properties"].is_object(), "{}: the schema has no properties", spec.name);
        assert_eq!(schema["additionalProperties"], false, "{}: unknown fields must be refused", spec.name);
        assert!(spec.description.trim().len() >= 40, "{}: the description is too thin to guide a model", spec.name);
        for key in ["oneOf", "anyOf", "allOf", "enum", "not"] {
            assert!(schema.get(key).is_none(), "{}: providers refuse `{key}` at the top of a schema", spec.name);
        }
        let mut found = Vec::new();
        refs(schema, &spec.name, &mut found);
        assert!(found.is_empty(), "{}: providers dislike $ref; found {found:?}", spec.name);
        if let Some(Value::Array(required)) = schema.get("required") {
            for r in required {
                let r = r.as_str().unwrap_or_default();
                assert!(schema["properties"].get(r).is_some(), "{}: required `{r}` is not a property", spec.name);
            }
        }
    }
}

#[test]
fn g10_all_29_builtin_tools_exist_with_these_names() {
    let specs = kodik_schema::all();
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let mut expected = ALL_TOOLS.to_vec();
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected);
    for name in ALL_TOOLS {
        assert_eq!(kodik_schema::find(name).map(|s| s.name), Some(name.to_string()));
    }
    assert!(kodik_schema::find("rg").is_none(), "the old English name `rg` is `grep` now");
}

#[test]
fn g13_all_specs_are_sorted_by_name() {
    let names: Vec<String> = kodik_schema::all().into_iter().map(|s| s.name).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn own_specs_are_objects_with_properties_and_descriptions() {
    let specs = own_specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_lints",
            "lsp",
            "codebase_search",
            "web_fetch",
            "web_search",
            "browser",
            "todo_write",
            "memory",
            "sub_agent",
            "agent_status",
            "send_message",
            "ask_questions",
            "check_understanding",
            "create_lesson",
            "generate_plan",
            "codemode",
            "tool_search",
            "call_tool",
        ]
    );
    assert_well_formed(&specs);
}

#[test]
fn every_spec_of_every_module_is_a_well_formed_object_schema() {
    assert_well_formed(&kodik_schema::all());
}

#[test]
fn own_specs_document_every_property_for_the_model() {
    for spec in own_specs() {
        let mut missing = Vec::new();
        undocumented(&spec.input_schema, &spec.name, &mut missing);
        assert!(missing.is_empty(), "{}: undocumented properties {missing:?}", spec.name);
    }
}

#[test]
fn every_property_of_every_tool_is_documented() {
    let mut missing = Vec::new();
    for spec in kodik_schema::all() {
        undocumented(&spec.input_schema, &spec.name, &mut missing);
    }
    assert!(missing.is_empty(), "undocumented properties: {missing:?}");
}

#[test]
fn the_description_check_finds_an_undocumented_nested_property() {
    // The recursive check must see into nested objects, arrays and optional wrappers.
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"description": "ok", "type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
            "c": {"description": "ok", "anyOf": [{"type": "object", "properties": {"d": {"type": "string"}}}, {"type": "null"}]},
            "e": {"description": "ok", "oneOf": [{"const": "x"}]}
        }
    });
    let mut missing = Vec::new();
    undocumented(&schema, "t", &mut missing);
    assert_eq!(missing, ["t.a.items.b", "t.c.anyOf[0].d", "t.e.oneOf[0]"]);
}

#[test]
fn g4_effects_of_own_tools_decide_their_streaming_start() {
    let expected = [
        ("read_lints", Effect::ReadOnly, true),
        ("lsp", Effect::ReadOnly, true),
        ("codebase_search", Effect::ReadOnly, true),
        ("web_fetch", Effect::Network, true),
        ("web_search", Effect::Network, true),
        ("browser", Effect::Browser, false),
        ("todo_write", Effect::Conversation, false),
        ("memory", Effect::Conversation, false),
        ("sub_agent", Effect::Conversation, false),
        ("agent_status", Effect::Conversation, false),
        ("send_message", Effect::Conversation, false),
        ("ask_questions", Effect::Conversation, false),
        ("check_understanding", Effect::Conversation, false),
        ("create_lesson", Effect::Conversation, false),
        ("generate_plan", Effect::Conversation, false),
        // A script may change files, so it must not start early though its class is Process.
        ("codemode", Effect::Process, false),
        ("tool_search", Effect::ReadOnly, true),
        ("call_tool", Effect::Conversation, false),
    ];
    let specs = own_specs();
    assert_eq!(specs.len(), expected.len());
    for (name, effect, streaming) in expected {
        let spec = specs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no spec for {name}"));
        assert_eq!(spec.effect, effect, "{name}");
        assert_eq!(spec.streaming_start, streaming, "{name}");
    }
}

#[test]
fn own_enums_are_plain_string_enums_with_documented_values() {
    // `compact_schema` turns documented enums into `enum` + a description listing each value.
    let lsp = kodik_schema::spec::<lsp::LspArgs>();
    let op = &lsp.input_schema["properties"]["operation"];
    assert_eq!(op["type"], "string");
    let values: Vec<&str> = op["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        values,
        [
            "definition",
            "type_definition",
            "implementation",
            "references",
            "hover",
            "document_symbols",
            "workspace_symbols",
            "incoming_calls",
            "outgoing_calls"
        ]
    );
    let description = op["description"].as_str().unwrap();
    for v in values {
        assert!(description.contains(&format!("- `{v}`: ")), "`{v}` is not explained: {description}");
    }
    // Optional fields are plain types, not `anyOf` with null, and carry no `format`.
    let line = &lsp.input_schema["properties"]["line"];
    assert_eq!(line["type"], "integer");
    assert_eq!(line["minimum"], 1);
    assert!(line.get("format").is_none());
    assert_eq!(lsp.input_schema["required"], serde_json::json!(["operation"]));
}

#[test]
fn b3_browser_schema_offers_every_action_of_the_seeds() {
    let spec = kodik_schema::spec::<browser::BrowserArgs>();
    let actions: Vec<&str> = spec.input_schema["properties"]["action"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for action in [
        "list_tabs",
        "select_tab",
        "preview",
        "close_preview",
        "navigate",
        "reload",
        "back",
        "forward",
        "resize",
        "screenshot",
        "snapshot",
        "inspect",
        "console",
        "clear_console",
        "click",
        "fill",
        "press",
        "select",
        "check",
        "hover",
        "drag",
        "scroll",
        "upload",
        "wait",
        "handle_dialog",
        "list_credentials",
        "fill_credential",
        "clear_storage",
        "diagnostics",
        "activity",
        "eval",
    ] {
        assert!(actions.contains(&action), "browser lacks action `{action}`");
    }
    let props = spec.input_schema["properties"].as_object().unwrap();
    for field in ["prompt_text", "condition", "storage", "command", "target", "tab_id", "credential_id", "clip"] {
        assert!(props.contains_key(field), "browser lacks field `{field}`");
    }
    let conditions: Vec<&str> =
        props["condition"]["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        conditions,
        ["url", "load", "network_idle", "text", "element", "popup", "dialog", "file_chooser", "download"]
    );
    let storage: Vec<&str> = props["storage"]["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(storage, ["global", "workspace", "ephemeral"]);
}

#[test]
fn a4_agent_status_schema_has_the_seed_parameters() {
    let spec = kodik_schema::spec::<agent::AgentStatusArgs>();
    let props = spec.input_schema["properties"].as_object().unwrap();
    for field in
        ["agent_id", "scope", "status", "active_within_minutes", "workspace", "query", "limit", "offset", "wait"]
    {
        assert!(props.contains_key(field), "agent_status lacks `{field}`");
    }
    let scopes: Vec<&str> = props["scope"]["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(scopes, ["agents", "sessions", "all", "self"]);
    let states: Vec<&str> = props["status"]["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(states, ["running", "idle", "closed"]);
    assert!(spec.input_schema.get("required").is_none_or(|r| r.as_array().is_some_and(|r| r.is_empty())));
}

#[test]
fn g12_call_tool_arguments_are_an_object() {
    let spec = kodik_schema::spec::<harness::CallToolArgs>();
    assert_eq!(spec.input_schema["properties"]["arguments"]["type"], "object");
    assert_eq!(spec.input_schema["required"], serde_json::json!(["name"]));
    let search = kodik_schema::spec::<harness::ToolSearchArgs>();
    assert_eq!(search.input_schema["required"], serde_json::json!(["query"]));
}

/// Every description in `schema` (property and nested), with its path.
fn descriptions<'a>(schema: &'a Value, path: &str, out: &mut Vec<(String, &'a str)>) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "description"
                    && let Some(d) = v.as_str()
                {
                    out.push((path.to_string(), d));
                }
                descriptions(v, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| descriptions(v, path, out)),
        _ => {}
    }
}

#[test]
fn own_descriptions_read_as_prose_without_doc_comment_line_breaks() {
    for spec in own_specs() {
        let mut all = Vec::new();
        descriptions(&spec.input_schema, &spec.name, &mut all);
        assert!(!all.is_empty());
        for (path, d) in all {
            // Line breaks only start an enum value's entry ("\n- `value`: …").
            for (i, _) in d.match_indices('\n') {
                assert!(d[i..].starts_with("\n- `"), "{path}: stray line break in {d:?}");
            }
            assert!(!d.contains("  "), "{path}: double space in {d:?}");
        }
    }
}

/// Every place in `schema`, at any depth, where a keyword a provider may refuse is left: a
/// `format` (schemars' `uint`, `double`) or a `null` among the types of an optional field.
fn refusable(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(map) = schema else { return };
    if map.get("format").is_some_and(Value::is_string) {
        out.push(format!("{path}.format"));
    }
    let null_type = match map.get("type") {
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        Some(t) => t == "null",
        None => false,
    };
    if null_type {
        out.push(format!("{path}.type"));
    }
    for (key, value) in map {
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(members)) => {
                for (name, member) in members {
                    refusable(member, &format!("{path}.{name}"), out);
                }
            }
            ("items" | "additionalProperties", sub) => refusable(sub, &format!("{path}.{key}"), out),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(subs)) => {
                for (i, sub) in subs.iter().enumerate() {
                    refusable(sub, &format!("{path}.{key}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn g13_no_schema_keeps_a_format_or_a_null_type_at_any_depth() {
    // Gemini and OpenAI's strict mode refuse type lists with `null`; Ajv in strict mode (MCP
    // clients in JavaScript) refuses formats it does not know. read_file's `ranges[].start_line`
    // and grep's `context_before` kept both until the compaction ran for every tool's arguments.
    let mut found = Vec::new();
    for spec in kodik_schema::all() {
        refusable(&spec.input_schema, &spec.name, &mut found);
    }
    assert!(found.is_empty(), "left for a provider to refuse: {found:?}");
}

#[test]
fn nested_descriptions_read_as_one_line_per_paragraph() {
    // The doc comment of an array item's field is unwrapped like a top-level one.
    let spec = kodik_schema::find("read_file").unwrap();
    let item = &spec.input_schema["properties"]["ranges"]["items"]["properties"]["start_column"];
    let description = item["description"].as_str().unwrap();
    assert!(!description.contains('\n'), "a wrapped doc comment line reached the model: {description:?}");
}

/// A host that still applies `compact_schema` to its own struct (as the attribute
/// `#[schemars(transform = compact_schema)]` did before `input_schema` applied it itself) gets
/// the schema it would get from one pass: before, the second pass joined the enum's value list
/// into one line. A list in a doc comment stays a list too.
#[test]
fn compacting_a_schema_twice_changes_nothing_and_doc_lists_stay_lists() {
    /// How to sort.
    #[derive(schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Order {
        /// Newest first.
        Newest,
        /// By name, A to Z.
        Name,
    }
    /// Lists files.
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct ListArgs {
        /// The order of the list.
        order: Option<Order>,
        /// What to leave out:
        /// - hidden files,
        /// - files over the size limit.
        ///
        /// Give none to keep all.
        skip: Vec<String>,
    }
    let once = kodik_schema::input_schema::<ListArgs>();
    let mut twice = schemars::Schema::try_from(once.clone()).unwrap();
    kodik_schema::compact_schema(&mut twice);
    assert_eq!(twice.as_value(), &once);
    let order = once["properties"]["order"]["description"].as_str().unwrap();
    assert_eq!(order, "The order of the list.\n- `newest`: Newest first.\n- `name`: By name, A to Z.");
    let skip = once["properties"]["skip"]["description"].as_str().unwrap();
    assert_eq!(skip, "What to leave out:\n- hidden files,\n- files over the size limit.\n\nGive none to keep all.");
}
