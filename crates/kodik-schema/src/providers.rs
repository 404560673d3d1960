//! One spec, several wire formats: OpenAI function tools, Anthropic tools, MCP tool definitions,
//! and OpenAI's freeform (grammar) form of `apply_patch` (P5).
//!
//! [`render`] turns any spec into any format. [`render_for`] is what a harness calls when it
//! builds a request: it gives OpenAI `apply_patch` as the freeform grammar tool the models are
//! trained on, and refuses with [`ProviderError::FreeformUnsupported`] when the provider cannot
//! take freeform tools, instead of silently sending something else.

use kodik_core::ToolSpec;
use serde_json::{Value, json};

/// A provider's tool format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenAI function tool (`{"type":"function", …}`).
    OpenAi,
    /// Anthropic tool (`{"name","description","input_schema"}`).
    Anthropic,
    /// MCP tool definition (`{"name","description","inputSchema"}`).
    Mcp,
}

/// Why a spec cannot be rendered for a provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider cannot take freeform (custom grammar) tools, which `apply_patch` needs there.
    #[error(
        "`{tool}` is a freeform (grammar) tool for OpenAI models, and this provider does not support freeform/custom \
         tools; use a provider or endpoint that does, or disable `{tool}` so the model gets create_file, edit_file and \
         delete_file instead"
    )]
    FreeformUnsupported {
        /// The tool that needs freeform support.
        tool: String,
    },
}

/// The name of the tool that has a freeform form.
pub const APPLY_PATCH: &str = "apply_patch";

/// A Lark grammar of the Codex patch format, as the freeform `apply_patch` tool constrains the
/// model's output with it. Lines of an added file start with `+`; lines of an update hunk with
/// ` ` (context), `-` (removed) or `+` (added).
pub const APPLY_PATCH_LARK_GRAMMAR: &str = r#"start: begin_patch file_op+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

file_op: add_file | delete_file | update_file
add_file: "*** Add File: " path LF added_line*
delete_file: "*** Delete File: " path LF
update_file: "*** Update File: " path LF move_to? hunks?
move_to: "*** Move to: " path LF

hunks: (hunk_header | hunk_line)+ end_of_file?
hunk_header: "@@" LF | "@@ " /(.+)/ LF
hunk_line: context_line | removed_line | added_line
context_line: " " /(.*)/ LF
removed_line: "-" /(.*)/ LF
added_line: "+" /(.*)/ LF
end_of_file: "*** End of File" LF

path: /(.+)/

%import common.LF
"#;

/// The freeform (custom, grammar) tool definition of `apply_patch` for OpenAI's Responses API
/// (P5): the model writes the patch text itself, no JSON around it.
pub fn openai_freeform_apply_patch(description: &str) -> Value {
    json!({
        "type": "custom",
        "name": APPLY_PATCH,
        "description": description,
        "format": {
            "type": "grammar",
            "syntax": "lark",
            "definition": APPLY_PATCH_LARK_GRAMMAR,
        },
    })
}

/// `spec` in `format`. `apply_patch` comes out as a JSON function tool with the patch in its
/// `input` string field; use [`render_for`] to get its freeform form.
pub fn render(spec: &ToolSpec, format: Format) -> Value {
    match format {
        Format::OpenAi => json!({
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        }),
        Format::Anthropic => json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.input_schema,
        }),
        Format::Mcp => json!({
            "name": spec.name,
            "description": spec.description,
            "inputSchema": spec.input_schema,
        }),
    }
}

/// `spec` as a request to a provider in `format` carries it.
///
/// For [`Format::OpenAi`], `apply_patch` is the freeform grammar tool
/// ([`openai_freeform_apply_patch`]) when `freeform_supported`, and an error when not (P5);
/// every other tool, and every tool in the other formats, is [`render`]'s output.
/// `freeform_supported` is ignored outside OpenAI: Anthropic and MCP have no freeform tools.
pub fn render_for(spec: &ToolSpec, format: Format, freeform_supported: bool) -> Result<Value, ProviderError> {
    if format == Format::OpenAi && spec.name == APPLY_PATCH {
        return if freeform_supported {
            Ok(openai_freeform_apply_patch(&spec.description))
        } else {
            Err(ProviderError::FreeformUnsupported { tool: spec.name.clone() })
        };
    }
    Ok(render(spec, format))
}

/// Every spec of `specs` in `format`, in order, as a JSON array (what `kodik schema --format`
/// prints and what goes into a request's `tools`).
pub fn render_all(specs: &[ToolSpec], format: Format) -> Value {
    Value::Array(specs.iter().map(|s| render(s, format)).collect())
}
