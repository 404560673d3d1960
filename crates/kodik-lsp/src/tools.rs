//! The `lsp` and `read_lints` tools over a [`LanguageServers`] manager.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{IgnoreChecks, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::lsp::{LspArgs, LspOperation, ReadLintsArgs};
use serde_json::{Value, json};

use crate::LspError;
use crate::manager::LanguageServers;
use crate::paths::{PathChecks, Shown};
use crate::position::{
    Encoding, from_lsp_column, identifier_at, line_of, path_to_uri, pick, to_lsp_column, uri_to_path,
};
use crate::server::{Readiness, Server};

/// At most this many locations are listed (L4).
pub const MAX_LOCATIONS: usize = 100;
/// Source lines are cut at this many characters (L4).
pub const MAX_LINE_CHARS: usize = 200;
/// At most this many diagnostics are listed by `read_lints`.
pub const MAX_DIAGNOSTICS: usize = 200;
/// `read_lints` on a folder checks at most this many files.
pub const MAX_LINT_FILES: usize = 300;

/// Folder names whose files are dependencies, not the project's own code (L5).
const DEPENDENCY_DIRS: &[&str] =
    &["node_modules", ".venv", "venv", "site-packages", "dist-packages", "typeshed-fallback", ".cargo", ".rustup"];

/// The note for answers given while the server is still indexing (L6).
pub const INDEXING_NOTE: &str = "the language server is still indexing; results may be incomplete";

fn to_tool_error(e: LspError) -> ToolError {
    match e {
        LspError::Path(p) => ToolError::Path(p),
        other => ToolError::failed(other.to_string()),
    }
}

/// `lsp` (L2–L6).
pub struct LspTool {
    servers: Arc<LanguageServers>,
    spec: ToolSpec,
    /// Path checks kept between calls while nothing on their way changes.
    checks: PathChecks,
}

/// What formatting an answer's locations needs besides the server.
#[derive(Clone, Copy)]
struct Answer<'a> {
    ws: &'a Workspace,
    checks: &'a PathChecks,
}

impl LspTool {
    /// The tool over a shared manager.
    pub fn new(servers: Arc<LanguageServers>) -> Self {
        Self { servers, spec: kodik_schema::spec::<LspArgs>(), checks: PathChecks::default() }
    }

    fn answer<'a>(&'a self, ws: &'a Workspace) -> Answer<'a> {
        Answer { ws, checks: &self.checks }
    }
}

/// `read_lints` (L1).
pub struct ReadLintsTool {
    servers: Arc<LanguageServers>,
    spec: ToolSpec,
}

impl ReadLintsTool {
    /// The tool over a shared manager.
    pub fn new(servers: Arc<LanguageServers>) -> Self {
        Self { servers, spec: kodik_schema::spec::<ReadLintsArgs>() }
    }
}

/// One location a server returned, resolved to a file and a 0-based line and server column.
#[derive(Debug, PartialEq, Eq)]
struct Loc {
    path: PathBuf,
    line: u32,
    /// In the answering server's units (`enc`).
    col: u32,
    label: Option<String>,
    enc: Encoding,
}

fn loc_from(v: &Value, label: Option<String>, enc: Encoding) -> Option<Loc> {
    let (uri, line, col) = loc_parts(v)?;
    Some(Loc { path: uri_to_path(uri)?, line, col, label, enc })
}

/// A Location's `uri` and range start, or a LocationLink's `targetUri` and target selection
/// range start.
fn loc_parts(v: &Value) -> Option<(&str, u32, u32)> {
    let (uri, range) = match v.get("targetUri") {
        Some(u) => (u, v.get("targetSelectionRange").or_else(|| v.get("targetRange"))?),
        None => (v.get("uri")?, v.get("range")?),
    };
    let start = range.get("start")?;
    let line = start.get("line")?.as_u64()? as u32;
    let col = start.get("character")?.as_u64()? as u32;
    Some((uri.as_str()?, line, col))
}

fn locations(result: &Value, enc: Encoding) -> Vec<Loc> {
    let items = match result {
        Value::Array(items) => items.as_slice(),
        Value::Object(_) => std::slice::from_ref(result),
        _ => return Vec::new(),
    };
    let mut out = Vec::with_capacity(items.len());
    // Servers list a file's hits together: its URI is decoded once per run.
    let mut last: Option<(&str, PathBuf)> = None;
    for (uri, line, col) in items.iter().filter_map(loc_parts) {
        let path = match &last {
            Some((u, p)) if *u == uri => p.clone(),
            _ => {
                let Some(p) = uri_to_path(uri) else { continue };
                last = Some((uri, p.clone()));
                p
            }
        };
        out.push(Loc { path, line, col, label: None, enc });
    }
    out
}

/// Hover contents: MarkupContent, MarkedString (string or `{language, value}`) or an array.
fn hover_text(result: &Value) -> String {
    fn one(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Object(o) => {
                let value = o.get("value").and_then(Value::as_str).unwrap_or("");
                match o.get("language").and_then(Value::as_str) {
                    Some(lang) => format!("```{lang}\n{value}\n```"),
                    None => value.to_owned(),
                }
            }
            Value::Array(items) => items.iter().map(one).collect::<Vec<_>>().join("\n\n"),
            _ => String::new(),
        }
    }
    result.get("contents").map(one).unwrap_or_default().trim().to_owned()
}

const SYMBOL_KINDS: &[&str] = &[
    "file",
    "module",
    "namespace",
    "package",
    "class",
    "method",
    "property",
    "field",
    "constructor",
    "enum",
    "interface",
    "function",
    "variable",
    "constant",
    "string",
    "number",
    "boolean",
    "array",
    "object",
    "key",
    "null",
    "enum member",
    "struct",
    "event",
    "operator",
    "type parameter",
];

fn kind_name(v: &Value) -> &'static str {
    v.get("kind")
        .and_then(Value::as_u64)
        .and_then(|k| SYMBOL_KINDS.get((k as usize).wrapping_sub(1)))
        .copied()
        .unwrap_or("symbol")
}

fn cut(line: &str) -> String {
    let mut out = String::new();
    push_cut(line, &mut out);
    out
}

/// `line` trimmed and cut to [`MAX_LINE_CHARS`] characters that show the 0-based character
/// `col` (a hit far into a minified or generated line is shown with what surrounds it, `…` on
/// each cut side), onto `out`.
fn push_around(line: &str, col: usize, out: &mut String) {
    let lead = line.chars().take_while(|c| c.is_whitespace()).count();
    let t = line.trim();
    // Up to this many characters before the hit are kept when the line must be cut.
    const BEFORE: usize = 60;
    let col = col.saturating_sub(lead);
    if col + 20 < MAX_LINE_CHARS || t.chars().count() <= MAX_LINE_CHARS {
        return push_cut(line, out);
    }
    let start = col - BEFORE;
    out.push('…');
    let mut shown = t.chars().skip(start);
    out.extend(shown.by_ref().take(MAX_LINE_CHARS));
    if shown.next().is_some() {
        out.push('…');
    }
}

/// `line` trimmed, cut at [`MAX_LINE_CHARS`] characters (with `…`), onto `out`.
fn push_cut(line: &str, out: &mut String) {
    let t = line.trim();
    match t.char_indices().nth(MAX_LINE_CHARS) {
        None => out.push_str(t),
        Some((at, _)) => {
            out.push_str(&t[..at]);
            out.push('…');
        }
    }
}

/// A folder of third-party code a folder check passes over, like pyright's and tsc's default
/// excludes: `node_modules`, a virtualenv under any name (it holds `pyvenv.cfg`), caches.
pub(crate) fn is_dependency_dir(dir: &Path) -> bool {
    let name = dir.file_name().unwrap_or_default();
    DEPENDENCY_DIRS.iter().chain(&["__pycache__", "bower_components", "jspm_packages"]).any(|d| name == *d)
        || dir.join("pyvenv.cfg").is_file()
}

fn is_external(ws: &Workspace, path: &Path) -> bool {
    let inside = ws.roots().iter().any(|r| path.starts_with(r));
    !inside || path.components().any(|c| DEPENDENCY_DIRS.iter().any(|d| c.as_os_str() == *d))
}

/// Locations in the answer's order: by path (compared as bytes, which is cheaper than
/// `Path`'s component-wise order and just as stable), then line, column and label.
fn location_order(a: &Loc, b: &Loc) -> std::cmp::Ordering {
    a.path
        .as_os_str()
        .as_encoded_bytes()
        .cmp(b.path.as_os_str().as_encoded_bytes())
        .then(a.line.cmp(&b.line))
        .then(a.col.cmp(&b.col))
        .then_with(|| a.label.cmp(&b.label))
}

/// What is shown for every location in one file, worked out once per file: a reference
/// search answers with many hits in each of a few dozen files.
type FileShown = Shown;

impl FileShown {
    fn new(ws: &Workspace, ignores: &mut IgnoreChecks<'_>, path: &Path) -> Self {
        // Servers answer with the real paths of the files they were given (the workspace's
        // roots are canonical): resolving symlinks (a `readlink` per path component) is only
        // needed for paths that seem to lie outside.
        // A file inside that is a symlink (pyright reports `pkg/link.py` as itself) is shown as
        // what it points to, so a target outside the workspace is marked `[external]` like every
        // other tool treats it (one `lstat` per file shown).
        let inside = ws.roots().iter().any(|r| path.starts_with(r))
            && !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let path = if inside { path.to_path_buf() } else { path.canonicalize().unwrap_or_else(|_| path.to_path_buf()) };
        if ws.roots().iter().any(|r| path.starts_with(r)) && ignores.is_ignored(&path) {
            return Self { path: None, shown_path: String::new(), external: false };
        }
        let external = is_external(ws, &path);
        let shown_path = if external { path.display().to_string() } else { ws.display(&path) };
        Self { path: Some(path), shown_path, external }
    }
}

/// L4/L5: `path:line:column: source` lines, dependencies marked `[external]`, hits in files
/// hidden by `.kodikignore` left out and counted, at most 100 with the total.
/// Files' texts already read in this answer (by path), so each is looked at once.
type Texts = std::collections::HashMap<PathBuf, Option<Arc<str>>>;

/// `server` reads the source lines (those in `read` were read already); each location's
/// column is in its own server's units.
fn format_locations(cx: Answer<'_>, server: &Server, locs: Vec<Loc>, header: &str, read: &Texts) -> (String, Value) {
    let Answer { ws, checks } = cx;
    let mut locs = locs;
    locs.sort_by(location_order);
    locs.dedup();
    // Sorted, so each file's locations are together: one `FileShown` per run of them.
    let mut files: Vec<(usize, FileShown)> = Vec::new();
    let mut ignores = ws.ignore_checks();
    let mut hidden = 0usize;
    let mut total = 0usize;
    for (i, l) in locs.iter().enumerate() {
        if i == 0 || locs[i - 1].path != l.path {
            files.push((i, checks.shown(&l.path, || FileShown::new(ws, &mut ignores, &l.path))));
        }
        match files.last() {
            Some((_, f)) if f.path.is_some() => total += 1,
            _ => hidden += 1,
        }
    }
    let mut out = format!("{header}: {total} location{}", if total == 1 { "" } else { "s" });
    if total > MAX_LOCATIONS {
        let _ = write!(out, " (showing the first {MAX_LOCATIONS})");
    }
    out.push('\n');
    let mut written = 0usize;
    for (n, (first, file)) in files.iter().enumerate() {
        if written == MAX_LOCATIONS {
            break;
        }
        let Some(path) = &file.path else { continue };
        // Read only for files with a location among the ones shown.
        let text = match read.get(path) {
            Some(t) => t.clone(),
            None => server.source(path),
        };
        let end = files.get(n + 1).map_or(locs.len(), |(next, _)| *next);
        for l in locs[*first..end].iter().take(MAX_LOCATIONS - written) {
            let src = text.as_deref().and_then(|t| line_of(t, l.line as usize));
            let col = src.map(|s| from_lsp_column(s, l.col, l.enc)).unwrap_or(l.col as usize) + 1;
            let _ = write!(out, "{}:{}:{col}:", file.shown_path, l.line + 1);
            if file.external {
                out.push_str(" [external]");
            }
            if let Some(label) = &l.label {
                let _ = write!(out, " {label}");
            }
            if let Some(s) = src {
                out.push(' ');
                push_around(s, col - 1, &mut out);
            }
            out.push('\n');
            written += 1;
        }
    }
    if hidden > 0 {
        let _ = writeln!(out, "({hidden} more in files hidden by .kodikignore, not shown)");
    }
    (out, json!({"total": total, "shown": total.min(MAX_LOCATIONS), "hidden": hidden}))
}

/// At most this many symbols are listed in an outline.
pub const MAX_SYMBOLS: usize = 500;

/// How many symbols an outline holds at each nesting level (index 0: top level).
fn symbols_per_level(result: &Value, depth: usize, counts: &mut Vec<usize>) {
    let Some(items) = result.as_array() else { return };
    if counts.len() <= depth {
        counts.resize(depth + 1, 0);
    }
    counts[depth] += items.len();
    for s in items {
        if let Some(children) = s.get("children") {
            symbols_per_level(children, depth + 1, counts);
        }
    }
}

/// Writes the outline `result` into `out`: every symbol when there are at most
/// [`MAX_SYMBOLS`], else as many whole levels as fit (a file's functions before their
/// parameters and locals), then a note of what was left out. Returns `(total, shown)`.
fn outline(result: &Value, out: &mut String) -> (usize, usize) {
    let mut counts = Vec::new();
    symbols_per_level(result, 0, &mut counts);
    let total: usize = counts.iter().sum();
    // The deepest level to list: all of them when they fit, else the levels that fit whole.
    let mut levels = counts.len();
    while levels > 1 && counts[..levels].iter().sum::<usize>() > MAX_SYMBOLS {
        levels -= 1;
    }
    let mut shown = 0;
    document_symbols(result, out, 0, levels, &mut shown);
    if shown < total {
        let _ = if levels < counts.len() && shown == counts[..levels].iter().sum::<usize>() {
            let nested = if levels == 1 {
                "nested in another symbol".to_owned()
            } else {
                format!("nested more than {} levels deep", levels - 1)
            };
            writeln!(
                out,
                "({shown} of {total} symbols shown: the {} {nested} are left out; ask `hover` or `definition` on a symbol for its details)",
                total - shown
            )
        } else {
            writeln!(
                out,
                "({shown} of {total} symbols shown: the first {MAX_SYMBOLS} top-level ones; `workspace_symbols` with a name finds the others)"
            )
        };
    }
    (total, shown)
}

fn document_symbols(result: &Value, out: &mut String, depth: usize, levels: usize, shown: &mut usize) {
    let Some(items) = result.as_array() else { return };
    if depth >= levels {
        return;
    }
    for s in items {
        if *shown >= MAX_SYMBOLS {
            return;
        }
        *shown += 1;
        let name = s.get("name").and_then(Value::as_str).unwrap_or("?");
        // DocumentSymbol has selectionRange; SymbolInformation has location.range.
        let line = s
            .pointer("/selectionRange/start/line")
            .or_else(|| s.pointer("/location/range/start/line"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let _ = writeln!(out, "{}{} {} (line {})", "  ".repeat(depth), kind_name(s), name, line + 1);
        if let Some(children) = s.get("children") {
            document_symbols(children, out, depth + 1, levels, shown);
        }
    }
}

/// Asks `server` and, when the server is still indexing once it has answered, waits for it
/// to finish (at most `indexing_wait`) and asks again: an answer given mid-load may be partial
/// even when it is not empty (tsserver's syntax-only server answers references with the
/// declaration alone, definition with the import line). Returns the answer and whether it may
/// be partial.
async fn ask(server: &Server, indexing_wait: Duration, method: &str, params: Value) -> Result<(Value, bool), LspError> {
    // Answers given mid-scan miss files (partial references): wait for the scan, bounded.
    if server.readiness() == Readiness::Indexing {
        server.wait_ready(indexing_wait).await;
    }
    let first = server.request_ref(method, &params).await.map_err(LspError::Rpc)?;
    if server.readiness() != Readiness::Indexing {
        return Ok((first, false));
    }
    let ready = server.wait_ready(indexing_wait).await;
    let again = server.request_ref(method, &params).await.map_err(LspError::Rpc)?;
    Ok((again, !ready))
}

/// The locations `res` (the answer to `op`'s first request) leads to: the references with the
/// uses through import aliases added (the aliases followed go to `aliases`), or the calls into
/// or out of the call-hierarchy item. `None` when the server has no call-hierarchy item there
/// (not a function).
async fn uses(
    server: &Server,
    op: LspOperation,
    res: &Value,
    read: &mut Texts,
    aliases: &mut Vec<String>,
) -> Result<Option<Vec<Loc>>, LspError> {
    let enc = server.encoding();
    if op == LspOperation::References {
        let mut locs = locations(res, enc);
        for alias in alias_uses(server, &mut locs, read).await {
            if !aliases.contains(&alias) {
                aliases.push(alias);
            }
        }
        return Ok(Some(locs));
    }
    let Some(item) = res.as_array().and_then(|a| a.first()).cloned() else { return Ok(None) };
    let (method, key) = if op == LspOperation::IncomingCalls {
        ("callHierarchy/incomingCalls", "from")
    } else {
        ("callHierarchy/outgoingCalls", "to")
    };
    let calls = server.request(method, json!({"item": item})).await.map_err(LspError::Rpc)?;
    let mut locs = Vec::new();
    for c in calls.as_array().into_iter().flatten() {
        let Some(it) = c.get(key) else { continue };
        let kind = kind_name(it);
        // pyright names a module caller "(module) uni.py".
        let name = it.get("name").and_then(Value::as_str).unwrap_or("?");
        let name = name.strip_prefix("(module) ").unwrap_or(name);
        let label = Some(format!("({kind} {name})"));
        let Some(uri) = it.get("uri") else { continue };
        // A function caller is shown at its name; code at a file's top level has no such
        // line (its "declaration" is line 1: a comment, an import), so its calls are shown.
        let sites = c.get("fromRanges").and_then(Value::as_array).filter(|r| !r.is_empty());
        match sites {
            Some(ranges) if op == LspOperation::IncomingCalls && matches!(kind, "file" | "module") => {
                locs.extend(
                    ranges.iter().filter_map(|r| loc_from(&json!({"uri": uri, "range": r}), label.clone(), enc)),
                );
            }
            _ => {
                let Some(range) = it.get("selectionRange") else { continue };
                locs.extend(loc_from(&json!({"uri": uri, "range": range}), label, enc));
            }
        }
    }
    Ok(Some(locs))
}

/// The place a question was asked about, enough to ask another server about the same place.
struct Asked<'a> {
    path: &'a Path,
    /// 0-based line.
    line0: u32,
    /// Character index of the identifier in the line.
    idx: usize,
    op: LspOperation,
}

/// At most this many other projects are asked by one `references` or `incoming_calls`.
const MAX_OTHER_PROJECTS: usize = 8;

/// How long another project's server may take to start and answer (a first question in a
/// monorepo starts them).
const OTHER_PROJECT_WAIT: Duration = Duration::from_secs(60);

/// The workspace's other projects of a server, asked too (see
/// [`crate::ServerConfig::sibling_projects`]).
struct OtherProjects {
    searched: Vec<PathBuf>,
    failed: Vec<(PathBuf, String)>,
    /// Projects beyond [`MAX_OTHER_PROJECTS`], not asked.
    skipped: usize,
    /// An answer may be partial (its server was still indexing).
    partial: bool,
}

impl OtherProjects {
    fn note(&self, ws: &Workspace, out: &mut String, meta: &mut Value) {
        if !self.searched.is_empty() {
            let names: Vec<String> = self.searched.iter().map(|r| ws.display(r)).collect();
            let _ = writeln!(out, "(also searched the workspace's other projects: {})", names.join(", "));
        }
        if !self.failed.is_empty() {
            let failed: Vec<String> = self.failed.iter().map(|(r, why)| format!("{}: {why}", ws.display(r))).collect();
            let _ = writeln!(out, "Not searched: {}.", failed.join("; "));
            meta["not_searched"] = json!(failed);
        }
        if self.skipped > 0 {
            let _ = writeln!(
                out,
                "({} more projects of the workspace were not searched: at most {MAX_OTHER_PROJECTS} are asked; grep finds uses there)",
                self.skipped
            );
        }
    }
}

/// The functions of `server`'s own project that hold the references `refs` (those in `asked`,
/// the function's own file, left out): each as its name's place, labelled like an incoming
/// call. A reference outside every function is listed where it is, unless it is an import.
async fn callers(server: &Server, refs: Vec<Loc>, asked: &Path, read: &mut Texts) -> Vec<Loc> {
    let mut found: Vec<Loc> = Vec::new();
    let mut refs: Vec<Loc> =
        refs.into_iter().filter(|l| l.path != asked && l.path.starts_with(server.root())).collect();
    refs.sort_by(location_order);
    for file_refs in refs.chunk_by(|a, b| a.path == b.path) {
        let path = &file_refs[0].path;
        let Ok(text) = server.sync(path, None).await else { continue };
        let params = json!({"textDocument": {"uri": path_to_uri(path)}});
        let symbols = server.request("textDocument/documentSymbol", params).await.unwrap_or(Value::Null);
        let mut callables = Vec::new();
        callable_symbols(&symbols, &mut callables);
        for r in file_refs {
            // The innermost function around the reference: the one that starts last.
            let holder = callables
                .iter()
                .filter(|c| c.start <= (r.line, r.col) && (r.line, r.col) < c.end)
                .max_by_key(|c| c.start);
            let loc = match holder {
                Some(c) => Loc {
                    path: path.clone(),
                    line: c.name_at.0,
                    col: c.name_at.1,
                    label: Some(format!("({} {})", c.kind, c.name)),
                    enc: r.enc,
                },
                None if line_of(&text, r.line as usize).is_some_and(is_import_line) => continue,
                None => Loc {
                    path: path.clone(),
                    line: r.line,
                    col: r.col,
                    label: Some("(top-level code)".into()),
                    enc: r.enc,
                },
            };
            if !found.contains(&loc) {
                found.push(loc);
            }
        }
        read.entry(path.clone()).or_insert(Some(text));
    }
    found
}

/// A function, method or constructor of a document's outline.
struct Callable {
    name: String,
    kind: &'static str,
    /// Range of the whole body, as (line, character) in the server's units; `end` exclusive.
    start: (u32, u32),
    end: (u32, u32),
    name_at: (u32, u32),
}

/// The callables of a `textDocument/documentSymbol` answer, nested ones included (hierarchical
/// DocumentSymbols; flat SymbolInformation has ranges too).
fn callable_symbols(result: &Value, out: &mut Vec<Callable>) {
    let pos = |v: Option<&Value>| -> Option<(u32, u32)> {
        let v = v?;
        Some((v.get("line")?.as_u64()? as u32, v.get("character")?.as_u64()? as u32))
    };
    for s in result.as_array().into_iter().flatten() {
        // Function 12, method 6, constructor 9.
        if matches!(s.get("kind").and_then(Value::as_u64), Some(6 | 9 | 12)) {
            let range = s.get("range").or_else(|| s.pointer("/location/range"));
            let start = pos(range.and_then(|r| r.get("start")));
            let end = pos(range.and_then(|r| r.get("end")));
            let name_at = pos(s.pointer("/selectionRange/start")).or(start);
            if let (Some(start), Some(end), Some(name_at)) = (start, end, name_at) {
                let name = s.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
                out.push(Callable { name, kind: kind_name(s), start, end, name_at });
            }
        }
        if let Some(children) = s.get("children") {
            callable_symbols(children, out);
        }
    }
}

/// `asked` put to the server of the project that `sample` belongs to: the locations, the
/// texts read for them, the import aliases followed, and whether the answer may be partial.
async fn ask_other_project(
    servers: &LanguageServers,
    sample: &Path,
    asked: &Asked<'_>,
) -> Result<(Vec<Loc>, Texts, Vec<String>, bool), LspError> {
    servers
        .with_server(sample, |server| async move {
            // tsserver loads a project when one of its files opens; without it the file asked
            // about would be the only one this server knows.
            let new_here = !server.is_open(asked.path).await;
            server.sync(sample, None).await?;
            if new_here {
                // A file new to this server is placed in its projects once its diagnostics are
                // in; asked before that, tsserver's syntax-only server answers while the
                // projects load, with the declaration alone.
                server.diagnostics(asked.path, None).await?;
            }
            let text = server.sync(asked.path, None).await?;
            let src = line_of(&text, asked.line0 as usize).unwrap_or("");
            let position = json!({"line": asked.line0, "character": to_lsp_column(src, asked.idx, server.encoding())});
            let mut params = json!({"textDocument": {"uri": path_to_uri(asked.path)}, "position": position});
            let method = if asked.op == LspOperation::References {
                params["context"] = json!({"includeDeclaration": true});
                "textDocument/references"
            } else {
                "textDocument/prepareCallHierarchy"
            };
            let (res, partial) = ask(&server, servers.config().indexing_wait, method, params.clone()).await?;
            let (mut read, mut aliases) = (Texts::new(), Vec::new());
            let mut found = uses(&server, asked.op, &res, &mut read, &mut aliases).await?.unwrap_or_default();
            if asked.op == LspOperation::IncomingCalls && found.is_empty() {
                // tsserver's call hierarchy stays within the project of the function's own file;
                // its references do not: this project's callers are found from them.
                params["context"] = json!({"includeDeclaration": false});
                let (res, _) = ask(&server, servers.config().indexing_wait, "textDocument/references", params).await?;
                found = callers(&server, locations(&res, server.encoding()), asked.path, &mut read).await;
            }
            Ok((found, read, aliases, partial))
        })
        .await
}

/// References of a symbol include its imports renamed with `as` (`from .models import
/// User as Person`), but pyright does not list the uses of the new name: those are asked
/// for at the alias and added to `locs`. Returns the aliases followed; the files read are
/// left in `read` for the answer's source lines.
async fn alias_uses(server: &Server, locs: &mut Vec<Loc>, read: &mut Texts) -> Vec<String> {
    let mut aliases = Vec::new();
    let mut asked = Vec::new();
    let mut current: Option<(PathBuf, Option<Arc<str>>)> = None;
    for l in locs.iter() {
        if asked.len() == MAX_ALIASES {
            break;
        }
        // Servers list a file's hits together: one lookup per run of them.
        if current.as_ref().is_none_or(|(p, _)| *p != l.path) {
            let text = match read.get(&l.path) {
                Some(t) => t.clone(),
                None => {
                    let t = server.source(&l.path);
                    read.insert(l.path.clone(), t.clone());
                    t
                }
            };
            current = Some((l.path.clone(), text));
        }
        let Some(text) = current.as_ref().and_then(|(_, t)| t.as_deref()) else { continue };
        let Some(line) = line_of(text, l.line as usize) else { continue };
        // Most hits are uses, not imports: their lines are passed over before any column work.
        if !is_import_line(line) {
            continue;
        }
        let start = from_lsp_column(line, l.col, l.enc);
        let Some((alias, at)) = import_alias(line, start) else { continue };
        let position = json!({"line": l.line, "character": to_lsp_column(line, at, server.encoding())});
        asked.push((path_to_uri(&l.path), position));
        if !aliases.contains(&alias) {
            aliases.push(alias);
        }
    }
    for (uri, position) in asked {
        let params =
            json!({"textDocument": {"uri": uri}, "position": position, "context": {"includeDeclaration": true}});
        if let Ok(more) = server.request("textDocument/references", params).await {
            locs.extend(locations(&more, server.encoding()));
        }
    }
    aliases
}

impl LspTool {
    async fn ask(&self, server: &Server, method: &str, params: Value) -> Result<(Value, bool), LspError> {
        ask(server, self.servers.config().indexing_wait, method, params).await
    }

    /// For a server whose projects see only their own files (a monorepo's packages each have
    /// a server): the uses of the symbol in the workspace's other projects of that server,
    /// each asked of its own server (started when needed), added to `locs`. `None` when the
    /// server sees the whole build or the workspace has no other project of it.
    async fn in_other_projects(
        &self,
        server: &Server,
        asked: &Asked<'_>,
        locs: &mut Vec<Loc>,
        read: &mut Texts,
        aliases: &mut Vec<String>,
    ) -> Option<OtherProjects> {
        let cfg = self.servers.config().servers.iter().find(|c| c.name == server.name())?;
        if !cfg.sibling_projects {
            return None;
        }
        let others: Vec<(PathBuf, PathBuf)> =
            self.servers.projects(server.name()).into_iter().filter(|(root, _)| root != server.root()).collect();
        if others.is_empty() {
            return None;
        }
        let skipped = others.len().saturating_sub(MAX_OTHER_PROJECTS);
        let mut running = tokio::task::JoinSet::new();
        for (root, sample) in others.into_iter().take(MAX_OTHER_PROJECTS) {
            let servers = self.servers.clone();
            let (path, line0, idx, op) = (asked.path.to_path_buf(), asked.line0, asked.idx, asked.op);
            running.spawn(async move {
                let asked = Asked { path: &path, line0, idx, op };
                let got = tokio::time::timeout(OTHER_PROJECT_WAIT, ask_other_project(&servers, &sample, &asked)).await;
                (root, got)
            });
        }
        let mut others = OtherProjects { searched: Vec::new(), failed: Vec::new(), skipped, partial: false };
        while let Some(joined) = running.join_next().await {
            let Ok((root, got)) = joined else { continue };
            match got {
                Ok(Ok((found, texts, names, partial))) => {
                    locs.extend(found);
                    for (path, text) in texts {
                        read.entry(path).or_insert(text);
                    }
                    for name in names {
                        if !aliases.contains(&name) {
                            aliases.push(name);
                        }
                    }
                    others.partial |= partial;
                    others.searched.push(root);
                }
                Ok(Err(e)) => others.failed.push((root, e.to_string())),
                Err(_) => others
                    .failed
                    .push((root, format!("its server did not answer within {} s", OTHER_PROJECT_WAIT.as_secs()))),
            }
        }
        others.searched.sort();
        others.failed.sort();
        Some(others)
    }

    async fn at_position(&self, args: &LspArgs, ws: &Workspace) -> Result<ToolOutput, LspError> {
        let raw_path = args.path.as_deref().unwrap_or("");
        let path = self.checks.check_file(ws, raw_path).map_err(LspError::Path)?;
        let op = args.operation;
        self.servers
            .with_server(&path, |server| {
                let path = path.clone();
                async move {
                    let text = server.sync(&path, None).await?;
                    let enc = server.encoding();
                    let uri = path_to_uri(&path);
                    if op == LspOperation::DocumentSymbols {
                        let params = json!({"textDocument": {"uri": uri}});
                        let (res, partial) = self.ask(&server, "textDocument/documentSymbol", params).await?;
                        let mut out = format!("Outline of {}:\n", ws.display(&path));
                        let (total, shown) = outline(&res, &mut out);
                        if total == 0 {
                            out = format!("{} has no symbols.\n", ws.display(&path));
                        }
                        return Ok(finish(out, partial, json!({"symbols": total, "shown": shown})));
                    }
                    let line = args.line.unwrap_or(1);
                    let idx =
                        pick(&text, line, args.symbol.as_deref(), args.occurrence, args.character).map_err(LspError::Pick)?;
                    let src = line_of(&text, line.saturating_sub(1) as usize).unwrap_or("");
                    let position = json!({"line": line.saturating_sub(1), "character": to_lsp_column(src, idx, enc)});
                    let params = json!({"textDocument": {"uri": uri}, "position": position});
                    // The identifier actually asked about: `greet` for `u.greet`, the whole name
                    // under a bare `character`.
                    let shown_symbol = identifier_at(src, idx)
                        .or_else(|| args.symbol.clone())
                        .unwrap_or_else(|| src.chars().nth(idx).map(String::from).unwrap_or_default());
                    let header =
                        format!("{} of `{shown_symbol}` ({}:{line}:{})", op.as_str(), ws.display(&path), idx + 1);
                    let method = match op {
                        LspOperation::Definition => "textDocument/definition",
                        LspOperation::TypeDefinition => "textDocument/typeDefinition",
                        LspOperation::Implementation => "textDocument/implementation",
                        LspOperation::References => "textDocument/references",
                        LspOperation::Hover => "textDocument/hover",
                        LspOperation::IncomingCalls | LspOperation::OutgoingCalls => {
                            "textDocument/prepareCallHierarchy"
                        }
                        LspOperation::DocumentSymbols | LspOperation::WorkspaceSymbols => unreachable_op(op)?,
                    };
                    let mut params = params;
                    if op == LspOperation::References {
                        params["context"] = json!({"includeDeclaration": true});
                    }
                    let (res, partial) = self.ask(&server, method, params).await.map_err(|e| unsupported(e, &server, op))?;
                    match op {
                        LspOperation::Hover => {
                            let text = hover_text(&res);
                            let out = if text.is_empty() {
                                format!(
                                    "No hover information for `{shown_symbol}` at {}:{line}:{}.\n",
                                    ws.display(&path),
                                    idx + 1
                                )
                            } else {
                                format!("{header}:\n{text}\n")
                            };
                            Ok(finish(out, partial, json!({})))
                        }
                        LspOperation::IncomingCalls | LspOperation::OutgoingCalls | LspOperation::References => {
                            let mut read = Texts::new();
                            let mut aliases = Vec::new();
                            let Some(mut locs) = uses(&server, op, &res, &mut read, &mut aliases).await? else {
                                let out = format!("`{shown_symbol}` is not a function or method the server can follow calls of ({header}).\n");
                                return Ok(finish(out, partial, json!({"total": 0})));
                            };
                            let asked = Asked { path: &path, line0: line.saturating_sub(1), idx, op };
                            let others = if op == LspOperation::OutgoingCalls {
                                None
                            } else {
                                self.in_other_projects(&server, &asked, &mut locs, &mut read, &mut aliases).await
                            };
                            let partial = partial || others.as_ref().is_some_and(|o| o.partial);
                            let (mut out, mut meta, partial) =
                                locations_text(self.answer(ws), &server, locs, &header, partial, &read);
                            match others {
                                Some(others) => others.note(ws, &mut out, &mut meta),
                                None if op != LspOperation::OutgoingCalls => {
                                    other_projects_note(ws, &self.servers, &server, &mut out)
                                }
                                None => {}
                            }
                            if !aliases.is_empty() {
                                let names: Vec<String> = aliases.iter().map(|a| format!("`{a}`")).collect();
                                let s = if aliases.len() == 1 { "" } else { "es" };
                                let _ = writeln!(out, "(includes uses through the import alias{s} {})", names.join(", "));
                            }
                            Ok(finish(out, partial, meta))
                        }
                        _ => Ok(locations_answer(
                            self.answer(ws),
                            &server,
                            locations(&res, server.encoding()),
                            &header,
                            partial,
                        )),
                    }
                }
            })
            .await
    }

    async fn workspace_symbols(&self, args: &LspArgs, ws: &Workspace) -> Result<ToolOutput, LspError> {
        let query = args.query.clone().unwrap_or_default();
        // With a path, that file's server; without, every server with files in the workspace:
        // the model cannot know which language a name belongs to.
        let anchors = match args.path.as_deref() {
            Some(p) => vec![ws.check_file(p).map_err(LspError::Path)?],
            None => served_files_per_server(&self.servers, ws),
        };
        if anchors.is_empty() {
            return Err(LspError::NoServer { file_type: "any file in the workspace".into(), tried: Vec::new() });
        }
        let mut locs = Vec::new();
        let (mut asked, mut failed, mut partial) = (Vec::new(), Vec::new(), false);
        let mut first_error = None;
        let mut source_server = None;
        for anchor in &anchors {
            let got = self
                .servers
                .with_server(anchor, |server| {
                    let query = query.clone();
                    async move {
                        // typescript-language-server answers "No Project" until a file is open.
                        server.sync(anchor, None).await?;
                        let (res, partial) = self.ask(&server, "workspace/symbol", json!({"query": query})).await?;
                        Ok((server, res, partial))
                    }
                })
                .await;
            let (server, res, was_partial) = match got {
                Ok(g) => g,
                Err(e) => {
                    failed.push(e.to_string());
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            partial |= was_partial;
            asked.push(server.name().to_owned());
            let enc = server.encoding();
            locs.extend(res.as_array().into_iter().flatten().filter_map(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or("?");
                let container = s
                    .get("containerName")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                    .map(|c| format!(" in {c}"))
                    .unwrap_or_default();
                let label = format!("({} {name}{container})", kind_name(s));
                let mut loc = s.get("location")?.clone();
                if loc.get("range").is_none() {
                    loc["range"] = json!({"start": {"line": 0, "character": 0}});
                }
                loc_from(&loc, Some(label), enc)
            }));
            source_server.get_or_insert(server);
        }
        let Some(server) = source_server else {
            return Err(first_error.unwrap_or_else(|| LspError::Internal("no server was asked".into())));
        };
        asked.sort();
        asked.dedup();
        let header = format!("workspace symbols matching `{query}` ({})", asked.join(", "));
        let (mut out, mut meta, partial) =
            locations_text(self.answer(ws), &server, locs, &header, partial, &Texts::new());
        if !failed.is_empty() {
            let _ = writeln!(out, "Not searched: {}.", failed.join("; "));
            meta["not_searched"] = json!(failed);
        }
        Ok(finish(out, partial, meta))
    }
}

/// A server's "method not found" as what the model can do instead.
fn unsupported(e: LspError, server: &Server, op: LspOperation) -> LspError {
    match e {
        LspError::Rpc(crate::transport::RpcError::Server { code, .. })
            if code == crate::transport::METHOD_NOT_FOUND =>
        {
            let hint = match op {
                LspOperation::Implementation => {
                    "; use `references` on the method or class instead (overrides and subclasses name it)"
                }
                LspOperation::TypeDefinition => "; use `hover` for the type, then `definition` on the type's name",
                LspOperation::IncomingCalls => "; use `references` instead",
                _ => "; use grep to search the text instead",
            };
            LspError::Unsupported {
                server: server.name().to_owned(),
                operation: op.as_str().to_owned(),
                hint: hint.to_owned(),
            }
        }
        other => other,
    }
}

fn unreachable_op(op: LspOperation) -> Result<&'static str, LspError> {
    Err(LspError::Internal(format!("`{}` is not a position operation", op.as_str())))
}

fn locations_answer(cx: Answer<'_>, server: &Server, locs: Vec<Loc>, header: &str, partial: bool) -> ToolOutput {
    let (out, meta, partial) = locations_text(cx, server, locs, header, partial, &Texts::new());
    finish(out, partial, meta)
}

/// The text and meta of a locations answer, and whether [`finish`] must still add the
/// indexing note (an empty answer already says it).
fn locations_text(
    cx: Answer<'_>,
    server: &Server,
    locs: Vec<Loc>,
    header: &str,
    partial: bool,
    read: &Texts,
) -> (String, Value, bool) {
    if locs.is_empty() {
        let out = if partial {
            format!("Nothing found yet for {header}: {INDEXING_NOTE}. Try again shortly.\n")
        } else {
            format!("No results for {header}.\n")
        };
        return (out, json!({"total": 0, "indexing": partial}), false);
    }
    let (out, meta) = format_locations(cx, server, locs, header, read);
    (out, meta, partial)
}

fn finish(mut out: String, partial: bool, mut meta: Value) -> ToolOutput {
    if partial {
        let _ = writeln!(out, "Note: {INDEXING_NOTE}.");
        meta["indexing"] = json!(true);
    }
    ToolOutput::text(out.trim_end().to_owned()).with_meta(meta)
}

/// When `server` serves one project of several in the workspace (a monorepo's packages), a
/// note that uses in the others were not searched, and how to find them.
fn other_projects_note(ws: &Workspace, servers: &LanguageServers, server: &Server, out: &mut String) {
    if ws.roots().iter().any(|r| r == server.root()) {
        return;
    }
    let others: Vec<String> =
        servers.project_roots(server.name()).iter().filter(|r| *r != server.root()).map(|r| ws.display(r)).collect();
    if others.is_empty() {
        return;
    }
    let shown: Vec<&str> = others.iter().take(5).map(String::as_str).collect();
    let more = if others.len() > 5 { format!(" and {} more", others.len() - 5) } else { String::new() };
    let _ = writeln!(
        out,
        "(searched the project {} only; other projects in the workspace: {}{more} — ask again from a file that uses the symbol there, or grep)",
        ws.display(server.root()),
        shown.join(", ")
    );
}

/// At most this many import aliases of a symbol are followed by one `references`.
const MAX_ALIASES: usize = 10;

/// For an identifier at character `start` of an import line followed by `as NAME`: `NAME` and
/// its character index.
fn import_alias(line: &str, start: usize) -> Option<(String, usize)> {
    if !is_import_line(line) {
        return None;
    }
    let chars: Vec<char> = line.chars().collect();
    let is_id = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut i = start;
    while i < chars.len() && is_id(chars[i]) {
        i += 1;
    }
    let after: String = chars[i..].iter().collect();
    let rest = after.trim_start();
    let rest = rest.strip_prefix("as")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let name_from = chars.len() - rest.trim_start().chars().count();
    let name: String = chars[name_from..].iter().take_while(|&&c| is_id(c)).collect();
    (!name.is_empty() && i > start).then_some((name, name_from))
}

/// Whether `line` is an `import …` or `from … import …` statement.
fn is_import_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with("import ") || trimmed.starts_with("from ")
}

/// At most this many servers are asked by one `workspace_symbols` without a path.
const MAX_SYMBOL_SERVERS: usize = 8;

/// One file of the workspace per (installed server, project root), in walk order: each is
/// the anchor that makes `workspace_symbols` ask that server (and opens a document in it, which
/// typescript-language-server needs before it has a project).
fn served_files_per_server(servers: &LanguageServers, ws: &Workspace) -> Vec<PathBuf> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for root in ws.roots() {
        for entry in ws.walker(root).build().flatten().take(20_000) {
            let p = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Some(key) = servers.server_key(p)
                && seen.insert(key)
            {
                out.push(p.to_path_buf());
                if out.len() == MAX_SYMBOL_SERVERS {
                    return out;
                }
            }
        }
    }
    out
}

/// What a server's answer depends on: every file of the workspace (roots are canonical).
fn project_files(ws: &Workspace) -> Vec<Resource> {
    ws.roots().iter().map(|r| Resource::Tree(r.clone())).collect()
}

#[async_trait]
impl TypedTool for LspTool {
    type Args = LspArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &LspArgs) -> Result<(), ToolError> {
        args.check()
    }

    /// The server answers from every file of the project: the turn's earlier edits must have
    /// landed, and its later ones wait (G2, G4).
    fn reads(&self, _args: &LspArgs, ws: &Workspace) -> Vec<Resource> {
        project_files(ws)
    }

    async fn run(&self, args: LspArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = &cx.workspace;
        self.checks.begin(ws, self.servers.config().keep_warm);
        let work = async {
            if args.operation == LspOperation::WorkspaceSymbols {
                self.workspace_symbols(&args, ws).await
            } else {
                self.at_position(&args, ws).await
            }
        };
        let result = tokio::select! {
            r = work => r,
            () = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        result.map_err(to_tool_error)
    }
}

/// How many files `read_lints` has its servers check at once. A push server (tsserver) checks
/// the open files together after a short debounce, and each file's answer waits for a quiet
/// window: one file after another cost about a second each.
const LINT_CONCURRENCY: usize = 32;

/// The diagnostics of each of `files`, in order, at most [`LINT_CONCURRENCY`] at a time.
async fn lint_files(
    servers: &Arc<LanguageServers>,
    files: &[PathBuf],
) -> Vec<Result<(crate::server::FileDiagnostics, Encoding), LspError>> {
    let mut results: Vec<Option<Result<_, LspError>>> = (0..files.len()).map(|_| None).collect();
    let mut running = tokio::task::JoinSet::new();
    let mut next = 0;
    loop {
        while running.len() < LINT_CONCURRENCY && next < files.len() {
            let (servers, file, i) = (servers.clone(), files[next].clone(), next);
            running.spawn(async move {
                let got = servers
                    .with_server(&file, |server| {
                        let file = file.clone();
                        async move { Ok((server.diagnostics(&file, None).await?, server.encoding())) }
                    })
                    .await;
                (i, got)
            });
            next += 1;
        }
        match running.join_next().await {
            Some(Ok((i, got))) => results[i] = Some(got),
            Some(Err(e)) => return vec_of_errors(files.len(), &e.to_string()),
            None => break,
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(LspError::Internal("a file's check did not finish".into()))))
        .collect()
}

fn vec_of_errors<T>(n: usize, why: &str) -> Vec<Result<T, LspError>> {
    (0..n).map(|_| Err(LspError::Internal(format!("a file's check failed: {why}")))).collect()
}

/// Why `read_lints` checked nothing, and what to do instead.
fn nothing_to_lint(unserved: &[String], missing: &[(String, Vec<String>, usize)]) -> String {
    let mut parts = Vec::new();
    for (ext, tried, _) in missing {
        parts.push(format!("no language server is installed for {ext} files (tried {})", tried.join(", ")));
    }
    if !unserved.is_empty() {
        parts.push(format!("no language server checks {}", unserved.join(", ")));
    }
    if parts.is_empty() {
        return "these paths hold no source file a language server checks".to_owned();
    }
    format!("{}; run the project's own checker (compiler, linter) with the shell tool for these", parts.join("; "))
}

/// The error when no asked path can be checked: a single path's own error (a path error, so
/// hosts see its kind), or every path named with its reason.
fn all_paths_bad(mut bad: Vec<kodik_core::PathError>) -> LspError {
    if bad.len() == 1
        && let Some(e) = bad.pop()
    {
        return LspError::Path(e);
    }
    let reasons: Vec<String> = bad.iter().map(ToString::to_string).collect();
    LspError::NothingToLint(format!("none of the paths can be checked: {}", reasons.join("; ")))
}

fn severity_name(item: &Value) -> &'static str {
    match item.get("severity").and_then(Value::as_u64) {
        Some(1) | None => "error",
        Some(2) => "warning",
        Some(3) => "info",
        _ => "hint",
    }
}

impl ReadLintsTool {
    async fn lint(&self, args: &ReadLintsArgs, ws: &Workspace) -> Result<ToolOutput, LspError> {
        let mut targets: Vec<PathBuf> = Vec::new();
        if let Some(glob) = args.paths.iter().find(|p| p.contains(['*', '?', '['])) {
            return Err(LspError::NothingToLint(format!(
                "`{glob}`: patterns are not supported in `paths`; pass files or folders (a folder is checked with everything below it)"
            )));
        }
        // File types with a configured server that is not installed: (extension, programs tried, count).
        let mut missing: Vec<(String, Vec<String>, usize)> = Vec::new();
        let mut note_missing = |f: &Path, tried: Vec<String>| {
            let ext = f.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
            match missing.iter_mut().find(|(e, _, _)| *e == ext) {
                Some((_, _, n)) => *n += 1,
                None => missing.push((ext, tried, 1)),
            }
        };
        // Paths that cannot be checked (missing, outside the workspace, ignored) cost only
        // themselves: they are named in the answer, which is an error only when every path is bad.
        let mut bad: Vec<kodik_core::PathError> = Vec::new();
        let mut asked: Vec<PathBuf> = Vec::new();
        if args.paths.is_empty() {
            asked.extend_from_slice(ws.roots());
        }
        for p in &args.paths {
            match ws.check(p) {
                Ok(p) if p.exists() => asked.push(p),
                Ok(p) => bad.push(ws.not_found(&p)),
                Err(e) => bad.push(e),
            }
        }
        if asked.is_empty() {
            return Err(all_paths_bad(bad));
        }
        let mut unserved = Vec::new();
        // Files whose server cannot start, by server: (why, files). They are reported, and the
        // other languages' files are still checked.
        let mut unchecked: Vec<(String, String, Vec<String>)> = Vec::new();
        let mut note_unchecked =
            |server: String, why: String, file: String| match unchecked.iter_mut().find(|(s, _, _)| *s == server) {
                Some((_, _, files)) => files.push(file),
                None => unchecked.push((server, why, vec![file])),
            };
        // Dependency folders found below the asked folders and left out (not the project's code).
        let skipped = Arc::new(std::sync::Mutex::new(Vec::<PathBuf>::new()));
        for p in &asked {
            if p.is_dir() {
                let skipped = skipped.clone();
                // `walker_with`, not `filter_entry` on `walker`: that would replace the check of
                // the `.kodikignore` files above `p`, and a `!` in a `.gitignore` below could
                // then bring back files they hide (G16).
                let walker = ws.walker_with(p, move |e| {
                    let keep =
                        e.depth() == 0 || !e.file_type().is_some_and(|t| t.is_dir()) || !is_dependency_dir(e.path());
                    if !keep && let Ok(mut s) = skipped.lock() {
                        s.push(e.path().to_path_buf());
                    }
                    keep
                });
                for entry in walker.build().flatten() {
                    let f = entry.path();
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        continue;
                    }
                    if self.servers.serves(f) {
                        targets.push(f.to_path_buf());
                    } else if let Some((server, why)) = self.servers.start_failure(f) {
                        note_unchecked(server, why, ws.display(f));
                    } else {
                        let tried = self.servers.not_installed(f);
                        if !tried.is_empty() {
                            note_missing(f, tried);
                        }
                    }
                }
            } else if self.servers.serves(p) {
                targets.push(p.clone());
            } else if let Some((server, why)) = self.servers.start_failure(p) {
                note_unchecked(server, why, ws.display(p));
            } else {
                let tried = self.servers.not_installed(p);
                if tried.is_empty() {
                    unserved.push(ws.display(p));
                } else {
                    note_missing(p, tried);
                }
            }
        }
        targets.sort();
        targets.dedup();
        let truncated_files = targets.len().saturating_sub(MAX_LINT_FILES);
        // Named, so the model can pass them in `paths` (a flat folder has no smaller one to ask for).
        let truncated: Vec<String> = targets.iter().skip(MAX_LINT_FILES).take(5).map(|f| ws.display(f)).collect();
        targets.truncate(MAX_LINT_FILES);
        let mut lines = Vec::new();
        let (mut errors, mut warnings, mut stale_files) = (0usize, 0usize, Vec::new());
        let mut checked = 0usize;
        let results = lint_files(&self.servers, &targets).await;
        for (file, got) in targets.iter().zip(results) {
            let (d, enc) = match got {
                Ok(got) => got,
                // A server that cannot start (or was given up after crashes) costs its own
                // files, not the whole answer.
                Err(e) => match self.servers.start_failure(file) {
                    Some((server, why)) => {
                        note_unchecked(server, why, ws.display(file));
                        continue;
                    }
                    None if matches!(e, LspError::GaveUp { .. }) => {
                        let server = self.servers.server_key(file).map(|(name, _)| name).unwrap_or_default();
                        note_unchecked(server, e.to_string(), ws.display(file));
                        continue;
                    }
                    None => return Err(e),
                },
            };
            checked += 1;
            if d.possibly_stale {
                stale_files.push(ws.display(file));
            }
            for item in &d.items {
                let sev = severity_name(item);
                match sev {
                    "error" => errors += 1,
                    "warning" => warnings += 1,
                    _ => {}
                }
                let line0 = item.pointer("/range/start/line").and_then(Value::as_u64).unwrap_or(0) as usize;
                let col = item.pointer("/range/start/character").and_then(Value::as_u64).unwrap_or(0) as u32;
                let column = line_of(&d.text, line0).map(|l| from_lsp_column(l, col, enc)).unwrap_or(0) + 1;
                let source = item.get("source").and_then(Value::as_str).unwrap_or("");
                let code = match item.get("code") {
                    Some(Value::String(s)) => format!(" {s}"),
                    Some(Value::Number(n)) => format!(" {n}"),
                    _ => String::new(),
                };
                let tag =
                    if source.is_empty() && code.is_empty() { String::new() } else { format!(" [{source}{code}]") };
                let message = item.get("message").and_then(Value::as_str).unwrap_or("").replace('\n', " ");
                lines.push((
                    sev != "error",
                    format!("{}:{}:{column}: {sev}{tag} {}", ws.display(file), line0 + 1, cut(&message)),
                ));
            }
        }
        // Errors first: they are what the model must act on.
        lines.sort_by_key(|(not_error, _)| *not_error);
        if checked == 0 {
            if let Some((_, why, files)) = unchecked.first() {
                return Err(LspError::Unchecked { why: why.clone(), files: files.join(", ") });
            }
            let mut why = nothing_to_lint(&unserved, &missing);
            for e in &bad {
                let _ = write!(why, "; {e}");
            }
            return Err(LspError::NothingToLint(why));
        }
        let total = lines.len();
        let mut out = if total == 0 {
            format!("No errors or warnings in {checked} checked file{}.\n", if checked == 1 { "" } else { "s" })
        } else {
            format!("{errors} error(s), {warnings} warning(s), {total} diagnostic(s) in {checked} checked file(s):\n")
        };
        for (_, l) in lines.iter().take(MAX_DIAGNOSTICS) {
            out.push_str(l);
            out.push('\n');
        }
        if total > MAX_DIAGNOSTICS {
            let _ = writeln!(out, "({} more not shown; ask for fewer paths)", total - MAX_DIAGNOSTICS);
        }
        for (_, why, files) in &unchecked {
            let shown: Vec<&str> = files.iter().take(5).map(String::as_str).collect();
            let more = if files.len() > shown.len() {
                format!(" and {} more", files.len() - shown.len())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "Not checked: {}{more} — {why}. Run the project's own checker (compiler, type checker) with the shell tool for these.",
                shown.join(", ")
            );
        }
        if truncated_files > 0 {
            let more = if truncated_files > truncated.len() {
                format!(" and {} more", truncated_files - truncated.len())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "({truncated_files} more files not checked (at most {MAX_LINT_FILES} at a time): {}{more}; pass them in `paths` to check them)",
                truncated.join(", ")
            );
        }
        for (ext, tried, n) in &missing {
            let _ = writeln!(
                out,
                "(not checked: {n} {ext} file(s): no language server installed, tried {})",
                tried.join(", ")
            );
        }
        let skipped: Vec<String> =
            skipped.lock().map(|s| s.iter().map(|d| format!("{}/", ws.display(d))).collect()).unwrap_or_default();
        if !skipped.is_empty() {
            let shown: Vec<&str> = skipped.iter().take(5).map(String::as_str).collect();
            let more = if skipped.len() > 5 { format!(" and {} more", skipped.len() - 5) } else { String::new() };
            let _ = writeln!(
                out,
                "(dependency folders not checked: {}{more}; name one in `paths` to check it)",
                shown.join(", ")
            );
        }
        if !unserved.is_empty() {
            let _ = writeln!(out, "(no language server for: {})", unserved.join(", "));
        }
        for e in &bad {
            let _ = writeln!(out, "Not checked: {e}.");
        }
        if !stale_files.is_empty() {
            let _ = writeln!(
                out,
                "Note: the server had not settled for {}; these diagnostics may be from before the last change.",
                stale_files.join(", ")
            );
        }
        let not_checked: usize = unchecked.iter().map(|(_, _, f)| f.len()).sum::<usize>() + truncated_files;
        let meta = json!({"errors": errors, "warnings": warnings, "total": total, "files": checked, "not_checked": not_checked, "possibly_stale": stale_files, "bad_paths": bad.iter().map(ToString::to_string).collect::<Vec<_>>()});
        Ok(ToolOutput::text(out.trim_end().to_owned()).with_meta(meta))
    }
}

#[async_trait]
impl TypedTool for ReadLintsTool {
    type Args = ReadLintsArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Diagnostics of files the turn edits earlier are of the edited text (G2, G4, E9).
    fn reads(&self, _args: &ReadLintsArgs, ws: &Workspace) -> Vec<Resource> {
        project_files(ws)
    }

    async fn run(&self, args: ReadLintsArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let result = tokio::select! {
            r = self.lint(&args, &cx.workspace) => r,
            () = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        result.map_err(to_tool_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L2: an import renamed with `as` gives the alias and where it is; other lines give nothing.
    #[test]
    fn l2_import_alias_is_found_after_the_imported_name() {
        let line = "from .models import User as Person, Other";
        assert_eq!(import_alias(line, 20), Some(("Person".to_owned(), 28)));
        assert_eq!(import_alias("import numpy as np", 7), Some(("np".to_owned(), 16)));
        assert_eq!(import_alias("from .models import User", 20), None);
        assert_eq!(import_alias("x = User as_ Person", 4), None);
        assert_eq!(import_alias("from a import b as  c", 14), Some(("c".to_owned(), 20)));
    }

    /// L4: a hit far into a long line is shown with the characters around it (cut on both
    /// sides, at most 200 of them); a hit near the start keeps the usual cut at 200.
    #[test]
    fn l4_long_line_is_cut_around_the_hit_not_only_from_the_start() {
        let pad: Vec<String> = (0..400).map(|i| format!("k{i}: {i}")).collect();
        let line = format!("  export const o = {{ {}, v: parse(\"a:1\") }};", pad.join(", "));
        let col = line.find("parse").unwrap_or(0);
        let mut out = String::new();
        push_around(&line, col, &mut out);
        assert!(out.starts_with('…') && out.contains("v: parse(\"a:1\") };"), "{out}");
        assert!(out.contains("k399: 399"), "{out}");
        assert!(out.chars().count() <= MAX_LINE_CHARS + 2, "{}", out.chars().count());

        let mut out = String::new();
        push_around(&line, 2, &mut out);
        assert!(out.starts_with("export const o = { k0: 0") && out.ends_with('…'), "{out}");
        assert_eq!(out.chars().count(), MAX_LINE_CHARS + 1);
    }
}
