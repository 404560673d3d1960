//! One spec, several wire formats: OpenAI function tools, Anthropic tools, MCP tool definitions.

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

/// `spec` in `format`.
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
