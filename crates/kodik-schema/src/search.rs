//! Argument types of the search tools: `read_file`, `glob`, `grep` (SPEC R, GL, GR).

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ToolArgs;

/// One block of lines to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineRange {
    /// First line to read, 1-based.
    pub start_line: usize,
    /// Last line to read, inclusive (1-based). Use the same number as `start_line` for one line.
    pub end_line: usize,
    /// Only for continuing a very long line that an earlier read cut: the 1-based character
    /// column of `start_line` to start at. The cut result tells you the exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_column: Option<usize>,
}

/// Read a text file (with line numbers) or an image from the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path of the file, relative to the workspace root or absolute.
    pub path: String,
    /// Optional blocks of lines to read, all in this one call, e.g.
    /// `[{"start_line": 1, "end_line": 50}, {"start_line": 200, "end_line": 230}]`.
    /// Leave out to read the file from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranges: Option<Vec<LineRange>>,
}

impl ToolArgs for ReadFileArgs {
    const NAME: &'static str = "read_file";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Read a file from the workspace. Text comes back with line numbers: each line is \
shown as `<number>→<text>`; the text after the arrow is the file's exact content (quote only that part in edits). \
Read several parts of a file in one call with `ranges`. One call returns at most 16 KB: when the output is cut, the \
result names the exact `ranges` to ask for next. Files larger than the size limit are not read whole: use `grep` \
or `ranges`. Re-reading unchanged lines within one message returns a short note that the earlier read is still \
current. Also opens PNG, JPEG, GIF and WebP images (up to 20 MB; large images are downscaled and their original \
size reported). Files excluded by .kodikignore cannot be read.";
}

/// Patterns for `grep`'s `glob` and `exclude`: one pattern or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Patterns {
    /// One pattern.
    One(String),
    /// Several patterns.
    Many(Vec<String>),
}

impl Patterns {
    /// The patterns as a list.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Self::One(p) => vec![p.clone()],
            Self::Many(v) => v.clone(),
        }
    }
}

/// Find files by name pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob pattern such as `**/*.ts`, `src/**/*.{rs,toml}` or `*.md`. A pattern without `/`
    /// matches file names at any depth; a pattern with `/` is matched against the path relative
    /// to the search folder.
    pub pattern: String,
    /// Folder to search in, relative to the (first) workspace root or absolute. Default: every workspace root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl ToolArgs for GlobArgs {
    const NAME: &'static str = "glob";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Find files whose path matches a glob pattern (`**/*.ts`, `src/*.rs`, \
`*.{json,yaml}`), newest first (by modification time). Respects .gitignore, .ignore and .kodikignore. Hidden files \
and folders (names starting with `.`) are skipped unless the pattern itself names one (e.g. `.github/**/*.yml` or \
`**/.env*`). Without `path`, every workspace root is searched. The list is capped; the result says how many more \
files matched.";
}

/// How `grep` reports what it found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines as `path:line:text` (context lines as `path-line-text`); the default.
    #[default]
    Content,
    /// Only the paths of files with at least one match.
    FilesWithMatches,
    /// The number of matching lines per file as `path:count`.
    Count,
}

/// Search file contents with a regular expression (ripgrep's engine).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression in Rust/ripgrep syntax (e.g. `fn\s+main`, `^$` for empty lines).
    /// Escape regex characters such as `(`, `{` or `.` to match them literally, or set `fixed_strings`.
    pub pattern: String,
    /// File or folder to search, relative to the (first) workspace root or absolute. Default: every workspace root.
    /// A single file has its encoding detected (UTF-8, UTF-16, Windows-1251, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Only search files matching these globs, like ripgrep's `--glob`: without `/` (`*.ts`) a
    /// pattern matches file names at any depth; with `/` (`src/*.ts`) it is anchored at the search folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<Patterns>,
    /// Skip files or folders matching these globs (same rules as `glob`), e.g. `["*.min.js", "vendor/**"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Patterns>,
    /// Only search files of this type from ripgrep's type table, e.g. `rust`, `py`, `js`, `ts`, `go`, `java`, `md`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub file_type: Option<String>,
    /// `content` (default: matching lines as `path:line:text`, paged by `head_limit`), `files_with_matches`
    /// (only the paths of matching files) or `count` (matching lines per file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mode: Option<OutputMode>,
    /// Ignore case.
    #[serde(default, alias = "-i", skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
    /// Ignore case unless the pattern contains an upper-case letter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smart_case: Option<bool>,
    /// Treat `pattern` as plain text, not a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_strings: Option<bool>,
    /// Match whole words only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word: Option<bool>,
    /// Let the pattern span lines; `.` then also matches a newline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiline: Option<bool>,
    /// Lines of context to show before each match (content mode).
    #[serde(default, alias = "-B", skip_serializing_if = "Option::is_none")]
    pub context_before: Option<usize>,
    /// Lines of context to show after each match (content mode).
    #[serde(default, alias = "-A", skip_serializing_if = "Option::is_none")]
    pub context_after: Option<usize>,
    /// Lines of context before and after each match (content mode).
    #[serde(default, alias = "-C", skip_serializing_if = "Option::is_none")]
    pub context: Option<usize>,
    /// Stop after this many matching lines in each file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u64>,
    /// Show at most this many entries (lines in content mode, files otherwise). Default 250; 0 shows all
    /// (the shown text is still capped in size; the full result is saved to a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_limit: Option<usize>,
    /// Skip this many entries first, to page through a long result. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
}

impl ToolArgs for GrepArgs {
    const NAME: &'static str = "grep";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Search file contents with a regular expression (ripgrep's engine and \
options). Respects .gitignore, .ignore and .kodikignore; skips hidden and binary files. Results are sorted by path; \
by default every matching line is shown as `path:line:text`, even an empty match such as `^$`; `output_mode` \
`files_with_matches` lists only file names, `count` counts per file. Without `path`, every workspace root is \
searched. A line longer than 500 characters shows a window around each match with its column (continue with \
`read_file`'s `start_column`). Use `glob`/`exclude`/`type` to filter files, and `head_limit`/`offset` to page; \
when a page does not show everything, the full result is saved to a file whose path is given. A folder search \
reads files as UTF-8 (or UTF-16 with a BOM, or the project's `files.encoding`); a single file has its encoding \
detected.";
}

/// The specs of this module's tools.
pub fn specs() -> Vec<ToolSpec> {
    vec![crate::spec::<ReadFileArgs>(), crate::spec::<GlobArgs>(), crate::spec::<GrepArgs>()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r1_gr1_specs_are_read_only_and_reject_unknown_fields() {
        let specs = specs();
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read_file", "glob", "grep"]);
        assert!(specs.iter().all(|s| s.effect == Effect::ReadOnly && s.streaming_start));
        let bad = serde_json::json!({"path": "a", "rangez": []});
        assert!(serde_json::from_value::<ReadFileArgs>(bad).is_err());
        let ok: GrepArgs = serde_json::from_value(serde_json::json!({
            "pattern": "x", "glob": "*.rs", "exclude": ["a/**", "*.md"], "type": "rust", "-i": true, "-C": 2
        }))
        .unwrap();
        assert_eq!(ok.glob.unwrap().to_vec(), ["*.rs"]);
        assert_eq!(ok.exclude.unwrap().to_vec(), ["a/**", "*.md"]);
        assert_eq!(ok.file_type.as_deref(), Some("rust"));
        assert_eq!((ok.case_insensitive, ok.context), (Some(true), Some(2)));
        let schema = &specs[0].input_schema;
        assert!(schema.to_string().contains("start_line"), "{schema}");
    }
}
