//! Argument types of the edit tools: `edit_file`, `create_file`, `delete_file`, `apply_patch`,
//! `edit_notebook` (SPEC sections E, C, D, P, N).

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolArgs, spec};

/// Arguments of `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Path of the file to edit, relative to the workspace root or absolute. Must be a file,
    /// not a folder. Use forward slashes.
    pub path: String,
    /// The replacements, applied in order; each one sees the text the previous one left.
    /// Put every change to this file into this one call. If any edit fails, none is applied.
    pub edits: Vec<Edit>,
}

/// One exact replacement inside the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Text copied exactly from the current file (indentation, tabs and line breaks included).
    /// It must match exactly one place; add neighbouring lines when it could match more.
    /// Empty only to give an empty file its first content.
    pub old_string: String,
    /// The text that replaces `old_string`; must differ from it. Empty deletes the match.
    pub new_string: String,
}

impl ToolArgs for EditFileArgs {
    const NAME: &'static str = "edit_file";
    const EFFECT: Effect = Effect::MutatesFiles;
    const DESCRIPTION: &'static str = "Edit one existing text file with a list of exact replacements \
{old_string, new_string}. Read the file first. Copy each old_string from the current file so that it \
matches exactly one place, and give a different new_string (empty new_string deletes the match). All edits \
of one file go into one call and apply in order, each to the text the previous one left. The call is all \
or nothing: if one edit does not match, the file stays unchanged and the result says which edit failed and \
why. Small differences in line endings, typographic quotes/dashes/non-breaking spaces and indentation are \
tolerated when the text still points at exactly one place. On success the change is applied and the result \
shows the diff: do not re-read the file to check it. Encoding, BOM, line endings and permissions are kept.";
}

/// Arguments of `create_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFileArgs {
    /// Path of the new file, relative to the workspace root or absolute. Missing parent folders
    /// are created. The path must not exist yet.
    pub path: String,
    /// The complete, literal content of the file. Empty makes an empty file.
    pub content: String,
}

impl ToolArgs for CreateFileArgs {
    const NAME: &'static str = "create_file";
    const EFFECT: Effect = Effect::MutatesFiles;
    const DESCRIPTION: &'static str = "Create one new text file with its complete literal content; missing \
parent folders are created. Refuses to overwrite an existing path (use edit_file to change a file). Empty \
content creates an empty file. One call per file; independent calls may run in parallel.";
}

/// Arguments of `delete_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileArgs {
    /// Path of the file to delete, relative to the workspace root or absolute. Folders are refused.
    pub path: String,
}

impl ToolArgs for DeleteFileArgs {
    const NAME: &'static str = "delete_file";
    const EFFECT: Effect = Effect::MutatesFiles;
    const DESCRIPTION: &'static str = "Delete one whole existing file. To remove text but keep the file, use \
edit_file with an empty new_string; never delete and re-create a file to get around a failed edit. One call \
per file; independent calls may run in parallel.";
}

/// Arguments of `apply_patch` in its JSON form (P5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The whole patch, from `*** Begin Patch` to `*** End Patch`.
    pub input: String,
}

impl ToolArgs for ApplyPatchArgs {
    const NAME: &'static str = "apply_patch";
    const EFFECT: Effect = Effect::MutatesFiles;
    const DESCRIPTION: &'static str = "Apply a patch in the Codex format to add, update, delete and move \
files. The patch is plain text:\n\
*** Begin Patch\n\
*** Add File: path/new.txt\n\
+every line of the new file, each prefixed with +\n\
*** Update File: path/old.txt\n\
*** Move to: path/renamed.txt   (optional)\n\
@@ optional line that precedes the change (e.g. a function header)\n\
 context line (space prefix)\n\
-removed line\n\
+added line\n\
*** End of File   (optional: the hunk ends at the end of the file)\n\
*** Delete File: path/gone.txt\n\
*** End Patch\n\
An update may hold several @@ hunks, in file order; give about 3 lines of context around each change. \
Each hunk's context must match exactly one place. The patch is checked as a whole first: if any part \
fails, no file is changed. Line endings and encodings of the files are kept. Paths are relative to the \
workspace root.";
}

/// The Lark grammar of the patch format, for providers that take `apply_patch` as a freeform
/// (grammar-constrained) tool instead of a JSON function (P5). It is Codex's grammar.
pub const APPLY_PATCH_LARK_GRAMMAR: &str = r#"start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
"#;

/// What `edit_notebook` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotebookOperation {
    /// Insert a new cell at `cell_index` (or before the cell `cell_id`); an index equal to the
    /// number of cells appends.
    Insert,
    /// Change an existing cell: replace its whole source with `new_source`, or replace
    /// `old_string` by `new_string` inside it.
    Edit,
    /// Delete an existing cell.
    Delete,
}

/// The kind of a notebook cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellType {
    /// Code.
    Code,
    /// Markdown text.
    Markdown,
}

/// Arguments of `edit_notebook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditNotebookArgs {
    /// Path of the `.ipynb` notebook, relative to the workspace root or absolute.
    pub target_notebook: String,
    /// `insert`, `edit` or `delete`.
    pub operation: NotebookOperation,
    /// 0-based index of the cell. Give this or `cell_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_index: Option<usize>,
    /// The `id` of the cell (nbformat 4.5+). Give this or `cell_index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_id: Option<String>,
    /// For `insert`: `code` or `markdown`. Defaults to `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_type: Option<CellType>,
    /// For code cells: python, javascript, typescript, r, julia or sql. Only checked against the
    /// notebook's kernel language; the notebook's own language is used when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_language: Option<String>,
    /// The cell's whole new text: for `insert`, or for `edit` when no `old_string` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_source: Option<String>,
    /// For `edit`: text copied exactly from the cell that must match exactly one place in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_string: Option<String>,
    /// For `edit` with `old_string`: the replacement text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_string: Option<String>,
}

impl ToolArgs for EditNotebookArgs {
    const NAME: &'static str = "edit_notebook";
    const EFFECT: Effect = Effect::MutatesFiles;
    const DESCRIPTION: &'static str = "Edit a Jupyter notebook (.ipynb): insert, edit or delete one code or \
markdown cell, chosen by 0-based cell_index or by cell_id. For insert give cell_type and new_source. For \
edit give either new_source (the cell's whole new text) or old_string/new_string (an exact replacement \
inside the cell). Outputs and metadata of other cells, the notebook's formatting and unknown fields are \
kept. Languages: Python, JavaScript, TypeScript, R, Julia, SQL.";
}

/// The specs of this module's tools.
pub fn specs() -> Vec<ToolSpec> {
    vec![
        spec::<EditFileArgs>(),
        spec::<CreateFileArgs>(),
        spec::<DeleteFileArgs>(),
        spec::<ApplyPatchArgs>(),
        spec::<EditNotebookArgs>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e1_edit_file_schema_has_path_and_edits_with_old_and_new_string() {
        let s = spec::<EditFileArgs>();
        assert_eq!(s.effect, Effect::MutatesFiles);
        let props = &s.input_schema["properties"];
        assert!(props["path"].is_object());
        let item = &props["edits"]["items"];
        assert!(item["properties"]["old_string"].is_object(), "{}", s.input_schema);
        assert!(item["properties"]["new_string"].is_object());
        assert_eq!(item["additionalProperties"], false);
    }

    #[test]
    fn p5_apply_patch_takes_one_input_string_and_rejects_other_fields() {
        let s = spec::<ApplyPatchArgs>();
        assert_eq!(s.input_schema["required"], serde_json::json!(["input"]));
        let bad: Result<ApplyPatchArgs, _> = serde_json::from_value(serde_json::json!({"input": "x", "patch": "y"}));
        assert!(bad.is_err());
    }

    #[test]
    fn n1_notebook_args_parse_with_the_spec_names() {
        let a: EditNotebookArgs = serde_json::from_value(serde_json::json!({
            "target_notebook": "a.ipynb", "operation": "insert", "cell_index": 0,
            "cell_type": "markdown", "new_source": "# hi"
        }))
        .unwrap();
        assert_eq!(a.operation, NotebookOperation::Insert);
        assert_eq!(a.cell_type, Some(CellType::Markdown));
    }

    #[test]
    fn p5_freeform_grammar_names_every_marker() {
        for m in [
            "*** Begin Patch",
            "*** End Patch",
            "*** Add File: ",
            "*** Delete File: ",
            "*** Update File: ",
            "*** Move to: ",
            "*** End of File",
            "@@",
        ] {
            assert!(APPLY_PATCH_LARK_GRAMMAR.contains(m), "{m}");
        }
    }

    #[test]
    fn edit_specs_are_five_mutating_tools() {
        let names: Vec<String> = specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["edit_file", "create_file", "delete_file", "apply_patch", "edit_notebook"]);
        assert!(specs().iter().all(|s| s.effect == Effect::MutatesFiles && !s.streaming_start));
    }
}
