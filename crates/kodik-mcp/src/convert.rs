//! Kodik specs and outputs in MCP's shapes.

use std::sync::Arc;

use kodik_core::{Content, Effect, TerminalEvent, ToolOutput, ToolSpec, ToolStatus};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// The MCP `Tool` for a Kodik spec: name, description, input schema and annotations
/// (`readOnlyHint`, `destructiveHint`, `openWorldHint` from the spec's effect, corrected per
/// tool: `shell` and `codemode` are destructive, `create_file` only adds, `agent_status`
/// reads).
pub fn mcp_tool(spec: &ToolSpec) -> Tool {
    let mut schema: JsonObject = match &spec.input_schema {
        Value::Object(map) => map.clone(),
        // MCP requires an object schema; a tool without one takes an empty object.
        _ => json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
    };
    drop_unknown_formats(&mut schema);
    Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(schema)).with_annotations(annotations(spec))
}

/// The `format`s JSON Schema defines (draft 2020-12); validators know these.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes, at every depth, the `format`s JSON Schema does not define (schemars writes `uint`,
/// `uint64`, `double` for Rust's number types). Ajv, which MCP clients in JavaScript compile
/// schemas with, throws on an unknown format in its default strict mode ("unknown format "uint"
/// ignored in schema"), and the range (`minimum`) already says what the format would.
fn drop_unknown_formats(schema: &mut JsonObject) {
    if schema.get("format").and_then(Value::as_str).is_some_and(|f| !STANDARD_FORMATS.contains(&f)) {
        schema.remove("format");
    }
    for (key, value) in schema.iter_mut() {
        // Under `properties` (and `$defs`, …) the keys are names, not keywords: a property
        // called `format` stays.
        match value {
            // Values, not schemas.
            _ if matches!(key.as_str(), "default" | "const" | "enum" | "examples") => {}
            Value::Object(map)
                if matches!(key.as_str(), "properties" | "$defs" | "definitions" | "patternProperties") =>
            {
                for sub in map.values_mut() {
                    if let Value::Object(sub) = sub {
                        drop_unknown_formats(sub);
                    }
                }
            }
            Value::Object(sub) => drop_unknown_formats(sub),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(sub) = item {
                        drop_unknown_formats(sub);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The MCP hints for a Kodik tool, which clients use to decide what runs without asking:
/// `readOnlyHint` (changes nothing), `destructiveHint` (may delete or overwrite; `false` means
/// it only adds), `openWorldHint` (reaches beyond the workspace: network, a browser, any
/// program). Derived from the spec's [`Effect`]:
///
/// - `ReadOnly`: read-only, closed world; `Network` (fetch, search): read-only, open world.
/// - `MutatesFiles`: destructive, except `create_file`, which refuses to overwrite.
/// - `Process` (`shell`, `codemode`, `kill_terminal`, a mounted server's tool without
///   `readOnlyHint`): destructive — a command can delete anything — and open world, except
///   `kill_terminal`, which only stops the session's own commands.
/// - `Browser`: destructive (clicks submit forms), open world.
/// - `Conversation` (todo list, plans, questions, messages to agents): neither read-only nor
///   destructive, except `agent_status` and the questions to the user, which change nothing,
///   `memory`, which deletes notes, and `sub_agent` and `call_tool`, which run other tools
///   (destructive, open world).
fn annotations(spec: &ToolSpec) -> ToolAnnotations {
    let (mut read_only, mut destructive, mut open_world) = match spec.effect {
        Effect::ReadOnly => (true, false, false),
        Effect::Network => (true, false, true),
        Effect::MutatesFiles => (false, true, false),
        Effect::Process | Effect::Browser => (false, true, true),
        Effect::Conversation => (false, false, false),
    };
    match spec.name.as_str() {
        "create_file" => destructive = false,
        "kill_terminal" => open_world = false,
        "agent_status" | "ask_questions" | "check_understanding" => read_only = true,
        "memory" => destructive = true,
        "sub_agent" | "call_tool" => (destructive, open_world) = (true, true),
        _ => {}
    }
    ToolAnnotations::new().read_only(read_only).destructive(destructive).open_world(open_world)
}

/// The MCP result for a Kodik output: text and image blocks in order, `isError` unless the
/// status is `success`, and `structuredContent = {"status", "output", "meta", "full_output"}`,
/// where `output` is the content's text (images as a note), for clients that give their model
/// `structuredContent` instead of `content`.
pub fn call_result(out: ToolOutput) -> CallToolResult {
    let ToolOutput { status, content, meta, full_output } = out;
    let blocks = content
        .into_iter()
        .map(|c| match c {
            Content::Text { text } => ContentBlock::text(text),
            Content::Image { data, mime_type } => ContentBlock::image(data, mime_type),
        })
        .collect();
    let mut result =
        if status == ToolStatus::Success { CallToolResult::success(blocks) } else { CallToolResult::error(blocks) };
    result.structured_content = Some(json!({
        "status": status,
        "output": "",
        "meta": meta,
        "full_output": full_output,
    }));
    set_structured_output(&mut result);
    result
}

/// Puts the result's content, as text, into `structuredContent.output`. Some clients give their
/// model `structuredContent` instead of `content` whenever it is present (Codex CLI: "we prefer
/// structured_content"), so without it their model read only the status and meta of every
/// call — never the file it read or the command's output. Text blocks are joined by newlines as
/// they are (G8); an image becomes a note, since it cannot travel in JSON text.
pub(crate) fn set_structured_output(result: &mut CallToolResult) {
    let output = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image {}, in this result's content]", i.mime_type),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(Value::Object(structured)) = &mut result.structured_content {
        structured.insert("output".into(), Value::String(output));
    }
}

/// A background command's end as the model reads it in a later result (S5: exit code, run
/// time, only the output not read yet).
pub fn terminal_note(ev: &TerminalEvent) -> String {
    let outcome = match (ev.status, ev.exit_code) {
        (ToolStatus::Stopped, _) => "was stopped".to_owned(),
        (_, Some(code)) => format!("exited with code {code}"),
        (status, None) => format!("ended ({status})"),
    };
    let mut note = format!(
        "[terminal {} · `{}` {outcome} after {:.1} s]",
        ev.terminal_id,
        ev.command,
        ev.duration_ms as f64 / 1000.0
    );
    if ev.unread_output.is_empty() {
        note.push_str("\n(no output since the last check)");
    } else {
        note.push('\n');
        note.push_str(&ev.unread_output);
    }
    if let Some(path) = &ev.full_output {
        note.push_str(&format!("\n[full output: {}]", path.display()));
    }
    note
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn wire(out: ToolOutput) -> Value {
        serde_json::to_value(call_result(out)).unwrap()
    }

    #[test]
    fn g8_success_keeps_raw_text_and_images_in_order_with_structured_status() {
        let raw = "<a href=\"x\">&amp;</a>\n";
        let out = ToolOutput {
            status: ToolStatus::Success,
            content: vec![Content::text(raw), Content::image(&[137, 80, 78, 71], "image/png")],
            meta: json!({"lines": 1}),
            full_output: None,
        };
        let v = wire(out);
        assert_eq!(v["isError"], false);
        assert_eq!(v["content"][0], json!({"type": "text", "text": raw}));
        assert_eq!(v["content"][1]["type"], "image");
        assert_eq!(v["content"][1]["data"], "iVBORw==");
        assert_eq!(v["content"][1]["mimeType"], "image/png");
        assert_eq!(
            v["structuredContent"],
            json!({
                "status": "success",
                "output": format!("{raw}\n[image image/png, in this result's content]"),
                "meta": {"lines": 1},
                "full_output": null
            })
        );
    }

    #[test]
    fn g8_every_status_but_success_is_an_error_result() {
        for status in ToolStatus::ALL.into_iter().filter(|s| *s != ToolStatus::Success) {
            let out = ToolOutput::with_status(status, "why")
                .with_meta(json!({"exit_code": 2}))
                .with_full_output(Some(PathBuf::from("/tmp/full.log")));
            let v = wire(out);
            assert_eq!(v["isError"], true, "{status}");
            assert_eq!(v["content"][0]["text"], "why");
            assert_eq!(v["structuredContent"]["status"], status.as_str());
            assert_eq!(v["structuredContent"]["output"], "why", "{status}");
            assert_eq!(v["structuredContent"]["meta"]["exit_code"], 2);
            assert_eq!(v["structuredContent"]["full_output"], "/tmp/full.log");
        }
    }

    #[test]
    fn g13_tool_keeps_name_description_schema_and_effect_hints() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        let read = mcp_tool(&ToolSpec::new("read_file", "Reads a file.", schema.clone(), Effect::ReadOnly));
        let v = serde_json::to_value(&read).unwrap();
        assert_eq!(v["name"], "read_file");
        assert_eq!(v["description"], "Reads a file.");
        assert_eq!(v["inputSchema"], schema);
        assert_eq!(v["annotations"]["readOnlyHint"], true);
        assert_eq!(v["annotations"]["destructiveHint"], false);

        let edit = mcp_tool(&ToolSpec::new("edit_file", "Edits.", schema, Effect::MutatesFiles));
        let v = serde_json::to_value(&edit).unwrap();
        assert_eq!(v["annotations"]["readOnlyHint"], false);
        assert_eq!(v["annotations"]["destructiveHint"], true);

        let odd = mcp_tool(&ToolSpec::new("x", "X.", Value::Null, Effect::Process));
        assert_eq!(serde_json::to_value(&odd).unwrap()["inputSchema"], json!({"type": "object"}));
    }

    /// Ajv's default (strict) mode throws on `"format": "uint"`, which schemars writes for
    /// `usize` fields (grep's `context`, read_file's `ranges[].start_line`), so a JavaScript
    /// MCP client that compiles kodik's schemas failed on them.
    #[test]
    fn served_schemas_keep_only_formats_json_schema_defines() {
        let schema = json!({
            "type": "object",
            "properties": {
                "context": {"type": "integer", "format": "uint", "minimum": 0},
                "ranges": {"type": "array", "items": {"type": "object", "properties": {
                    "start_line": {"type": "integer", "format": "uint64"},
                    "format": {"type": "string", "format": "uri"}
                }}},
                "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number", "format": "double"}]}
            },
            "$defs": {"N": {"type": "integer", "format": "int32"}},
            "default": {"format": "uint"}
        });
        let tool = mcp_tool(&ToolSpec::new("grep", "Searches.", schema, Effect::ReadOnly));
        let v = serde_json::to_value(&tool).unwrap()["inputSchema"].clone();
        assert_eq!(v["properties"]["context"], json!({"type": "integer", "minimum": 0}));
        let item = &v["properties"]["ranges"]["items"]["properties"];
        assert_eq!(item["start_line"], json!({"type": "integer"}));
        assert_eq!(item["format"], json!({"type": "string", "format": "uri"}), "a property named `format` stays");
        assert_eq!(
            v["properties"]["when"]["anyOf"],
            json!([{"type": "string", "format": "date-time"}, {"type": "number"}])
        );
        assert_eq!(v["$defs"]["N"], json!({"type": "integer"}));
        assert_eq!(v["default"], json!({"format": "uint"}), "values are not schemas");
    }

    #[test]
    fn s5_terminal_note_gives_exit_code_time_and_unread_output() {
        let ev = TerminalEvent {
            terminal_id: "term-3".into(),
            command: "make test".into(),
            exit_code: Some(2),
            status: ToolStatus::Error,
            duration_ms: 6040,
            unread_output: "FAILED x\n".into(),
            full_output: Some(PathBuf::from("/tmp/t3.log")),
        };
        assert_eq!(
            terminal_note(&ev),
            "[terminal term-3 · `make test` exited with code 2 after 6.0 s]\nFAILED x\n\n[full output: /tmp/t3.log]"
        );
    }
}
