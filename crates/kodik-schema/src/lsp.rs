//! Argument types of the code-intelligence tools: `read_lints`, `lsp` and `codebase_search`
//! (SPEC L1–L7). All three only read.

use kodik_core::{Effect, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolArgs, invalid_input, spec};

/// The specs of `read_lints`, `lsp` and `codebase_search`.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<ReadLintsArgs>(), spec::<LspArgs>(), spec::<CodebaseSearchArgs>()]
}

// ---------------------------------------------------------------------------------------------
// read_lints
// ---------------------------------------------------------------------------------------------

/// Arguments of `read_lints`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadLintsArgs {
    /// Files or folders to report on, relative to the workspace or absolute. Omit it, or pass an
    /// empty list, for the whole workspace.
    #[serde(default)]
    pub paths: Vec<String>,
}

impl ToolArgs for ReadLintsArgs {
    const NAME: &'static str = "read_lints";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Read the errors and warnings that linters and language servers report for one or \
more files or folders, or for the whole workspace when `paths` is omitted. edit_file already reports up to 20 errors of \
the file it wrote; use read_lints for warnings, for the rest, and for files you did not just edit.";
}

// ---------------------------------------------------------------------------------------------
// lsp
// ---------------------------------------------------------------------------------------------

/// A question `lsp` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspOperation {
    /// Where the symbol is declared.
    Definition,
    /// Where the symbol's type is declared.
    TypeDefinition,
    /// The implementations of an interface, trait or abstract method.
    Implementation,
    /// Every place the symbol is used (import aliases and re-exports included; never comments or strings).
    References,
    /// The symbol's type and documentation.
    Hover,
    /// The outline of one file. Needs only `path`.
    DocumentSymbols,
    /// Symbols whose name matches `query` anywhere in the workspace. Needs only `query`.
    WorkspaceSymbols,
    /// The functions that call this one.
    IncomingCalls,
    /// The functions this one calls.
    OutgoingCalls,
}

impl LspOperation {
    /// Whether the operation is about one symbol at a position (needs `path`, `line`, `symbol`).
    pub fn needs_position(self) -> bool {
        !matches!(self, Self::DocumentSymbols | Self::WorkspaceSymbols)
    }

    /// The name the model writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Definition => "definition",
            Self::TypeDefinition => "type_definition",
            Self::Implementation => "implementation",
            Self::References => "references",
            Self::Hover => "hover",
            Self::DocumentSymbols => "document_symbols",
            Self::WorkspaceSymbols => "workspace_symbols",
            Self::IncomingCalls => "incoming_calls",
            Self::OutgoingCalls => "outgoing_calls",
        }
    }
}

/// Arguments of `lsp`. A symbol is named by its file, its 1-based line and the
/// identifier on that line, so no column counting is needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspArgs {
    /// What to ask the language server.
    pub operation: LspOperation,
    /// The file, relative to the workspace or absolute. Required for every operation except
    /// `workspace_symbols`, where it is optional: without it every language's server in the
    /// workspace is asked; with it, only the server for that file's language.
    pub path: Option<String>,
    /// 1-based line that holds the symbol. Required for every operation except
    /// `document_symbols` and `workspace_symbols`.
    #[schemars(range(min = 1))]
    pub line: Option<u32>,
    /// The identifier as written on that line, e.g. `parseConfig`. Required with `line`
    /// unless `character` is given.
    pub symbol: Option<String>,
    /// Which occurrence of `symbol` on the line to use when it appears more than once
    /// (1-based; default 1).
    #[schemars(range(min = 1))]
    pub occurrence: Option<u32>,
    /// 1-based column of the symbol on the line: an alternative to `occurrence`.
    #[schemars(range(min = 1))]
    pub character: Option<u32>,
    /// The name (or part of it) to look for with `workspace_symbols`.
    pub query: Option<String>,
}

impl LspArgs {
    /// Checks the rules the schema cannot express: which fields each operation needs, and that
    /// 1-based numbers are not 0. Call it from the tool's `check` (before approval).
    pub fn check(&self) -> Result<(), ToolError> {
        let op = self.operation;
        let name = op.as_str();
        for (field, value) in [("line", self.line), ("occurrence", self.occurrence), ("character", self.character)] {
            if value == Some(0) {
                return Err(invalid_input(Self::NAME, field, format!("`{field}` is 1-based; 0 is not a valid value")));
            }
        }
        if op == LspOperation::WorkspaceSymbols {
            if self.query.as_deref().is_none_or(|q| q.trim().is_empty()) {
                return Err(invalid_input(
                    Self::NAME,
                    "query",
                    "`workspace_symbols` needs `query`: the symbol name (or part of it) to look for",
                ));
            }
            return Ok(());
        }
        if self.path.as_deref().is_none_or(|p| p.trim().is_empty()) {
            return Err(invalid_input(Self::NAME, "path", format!("`{name}` needs `path`: the file to ask about")));
        }
        if !op.needs_position() {
            return Ok(());
        }
        if self.line.is_none() {
            return Err(invalid_input(
                Self::NAME,
                "line",
                format!("`{name}` needs `line`: the 1-based line that holds the symbol"),
            ));
        }
        if self.symbol.as_deref().is_none_or(|s| s.trim().is_empty()) && self.character.is_none() {
            return Err(invalid_input(
                Self::NAME,
                "symbol",
                format!("`{name}` needs `symbol`: the identifier as written on line {}", self.line.unwrap_or(0)),
            ));
        }
        if self.occurrence.is_some() && self.character.is_some() {
            return Err(invalid_input(Self::NAME, "character", "give either `occurrence` or `character`, not both"));
        }
        Ok(())
    }
}

impl ToolArgs for LspArgs {
    const NAME: &'static str = "lsp";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Ask a language server about code precisely instead of matching text: where a \
symbol is declared (definition, type_definition), every use (references: follows import aliases and re-exports, never \
matches comments or strings), its type and docs (hover), implementations of an interface (implementation), a file's \
outline (document_symbols), symbols by name (workspace_symbols with `query`) and the call hierarchy (incoming_calls, \
outgoing_calls). Name the symbol by `path`, 1-based `line` and the identifier on that line in `symbol`; if it occurs \
more than once on the line, pick one with `occurrence` or `character`. Results are `path:line:column` with the source \
line, at most 100 locations plus the total count; locations in dependencies outside the workspace are marked \
[external]. No index is needed. For plain text, configuration, or file types without a language server, use grep.";
}

// ---------------------------------------------------------------------------------------------
// codebase_search
// ---------------------------------------------------------------------------------------------

/// Arguments of `codebase_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodebaseSearchArgs {
    /// What you are looking for, in words: "where are expired sessions cleaned up?" works
    /// better than a single identifier (use grep for exact text).
    pub query: String,
    /// Only search below this folder (relative to the workspace or absolute). Default: the
    /// whole workspace.
    pub path: Option<String>,
    /// At most this many results (default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

impl ToolArgs for CodebaseSearchArgs {
    const NAME: &'static str = "codebase_search";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Search the codebase by meaning rather than by keyword, using a local index \
that is built automatically. Ask a question or describe the behaviour you need to find; results are ranked code \
snippets with their path and lines. Use grep for exact strings or identifiers, lsp for definitions and references.";
}
