//! `edit_notebook` (N1): insert, edit or delete one cell of a Jupyter notebook (nbformat 4),
//! keeping everything else — key order, indentation, unknown fields, other cells' outputs.

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::text::LineEnding;
use kodik_core::{FileVersion, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::edit::{CellType, EditNotebookArgs, NotebookOperation};
use serde::Serialize as _;
use serde_json::{Map, Value, json};

use crate::checkpoints::Prior;
use crate::matcher::{Budget, replace_unique};
use crate::{FileOp, Shared, files};

/// Languages `cell_language` accepts (N1).
pub const LANGUAGES: [&str; 6] = ["python", "javascript", "typescript", "r", "julia", "sql"];

/// The `edit_notebook` tool.
pub struct EditNotebookTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl EditNotebookTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { spec: kodik_schema::spec::<EditNotebookArgs>(), shared }
    }
}

fn fail(msg: impl Into<String>) -> ToolError {
    ToolError::failed(msg)
}

/// The indentation unit of pretty-printed JSON text, or `None` for compact JSON.
fn detect_indent(text: &str) -> Option<String> {
    let nl = text.find('\n')?;
    let rest = &text[nl + 1..];
    let ws: String = rest.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    Some(if ws.is_empty() { " ".into() } else { ws })
}

/// Serialises `nb` the way the original text was laid out: same indentation, same final
/// newline, same line endings. Keys keep their order (serde_json's `preserve_order`).
pub fn render_like(nb: &Value, original: &str) -> Result<String, serde_json::Error> {
    let mut s = render_value(nb, original)?;
    if original.trim_end_matches([' ', '\t']).ends_with('\n') {
        s.push('\n');
    }
    if matches!(LineEnding::detect(original), LineEnding::CrLf) {
        s = s.replace('\n', "\r\n");
    }
    Ok(s)
}

/// `v` as JSON in the style of `original`: its indentation unit, and `\uXXXX` escapes for
/// non-ASCII text when the original was written that way (Python's `ensure_ascii`). Lines are
/// joined with `\n`.
fn render_value(v: &Value, original: &str) -> Result<String, serde_json::Error> {
    let mut buf = Vec::new();
    match detect_indent(original) {
        Some(indent) => {
            let fmt = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
            v.serialize(&mut ser)?;
        }
        None => serde_json::to_writer(&mut buf, v)?,
    }
    let s = String::from_utf8(buf).unwrap_or_default();
    if s.is_ascii() || !(original.is_ascii() && original.contains("\\u")) {
        return Ok(s);
    }
    // Outside strings JSON is ASCII, so every other character is inside one and escapes as-is.
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    Ok(out)
}

/// Byte ranges of the elements of the top-level `"cells"` array of the JSON `text`; `None` when
/// the text is not shaped like that (then the caller renders the whole notebook).
fn cell_spans(text: &str) -> Option<Vec<std::ops::Range<usize>>> {
    let b = text.as_bytes();
    let ws = |mut i: usize| {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = ws(i);
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_json(b, i)?;
        let is_cells = &text[i..key_end] == "\"cells\"";
        i = ws(key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        if is_cells {
            if b.get(i) != Some(&b'[') {
                return None;
            }
            let mut spans = Vec::new();
            i = ws(i + 1);
            if b.get(i) == Some(&b']') {
                return Some(spans);
            }
            loop {
                let end = skip_json(b, i)?;
                spans.push(i..end);
                i = ws(end);
                match b.get(i) {
                    Some(b',') => i = ws(i + 1),
                    Some(b']') => return Some(spans),
                    _ => return None,
                }
            }
        }
        i = ws(skip_json(b, i)?);
        match b.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

/// The end of the JSON value starting at `i`.
fn skip_json(b: &[u8], mut i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            i += 1;
            loop {
                match *b.get(i)? {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match *b.get(i)? {
                    b'"' => {
                        i = skip_json(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            Some(i)
        }
    }
}

/// `original` with only the cells that changed from `old` to `new` rewritten (in its style,
/// at its indentation): every other byte — other cells, metadata, hand formatting, escapes —
/// stays as it was (N1). `None` when the text's shape is not understood or no cell is left;
/// the caller then renders the whole notebook.
fn splice_cells(original: &str, old: &[Value], new: &[Value]) -> Option<String> {
    let spans = cell_spans(original)?;
    if spans.len() != old.len() || old.is_empty() || new.is_empty() {
        return None;
    }
    let same_head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let max_tail = old.len().min(new.len()) - same_head;
    let same_tail = old.iter().rev().zip(new.iter().rev()).take(max_tail).take_while(|(a, b)| a == b).count();
    let (old_end, new_end) = (old.len() - same_tail, new.len() - same_tail);
    let line_start = original[..spans[0].start].rfind('\n').map_or(0, |p| p + 1);
    let base = &original[line_start..spans[0].start];
    let crlf = matches!(LineEnding::detect(original), LineEnding::CrLf);
    let brk = if crlf { "\r\n" } else { "\n" };
    let sep = match spans.get(1) {
        Some(second) => original[spans[0].end..second.start].to_string(),
        None if line_start > 0 => format!(",{brk}{base}"),
        None => ",".to_string(),
    };
    let mut pieces = Vec::new();
    for cell in &new[same_head..new_end] {
        let r = render_value(cell, original).ok()?;
        pieces.push(r.replace('\n', &format!("{brk}{base}")));
    }
    let joined = pieces.join(&sep);
    let (from, to, text) = if same_head < old_end {
        // Cells replaced (or removed): their range, with one separator when none come back.
        let (from, to) = (spans[same_head].start, spans[old_end - 1].end);
        match (joined.is_empty(), spans.get(old_end)) {
            (false, _) => (from, to, joined),
            (true, Some(next)) => (from, next.start, String::new()),
            (true, None) => (spans[same_head - 1].end, to, String::new()),
        }
    } else if let Some(next) = spans.get(same_head) {
        (next.start, next.start, format!("{joined}{sep}"))
    } else {
        let last = spans[same_head - 1].end;
        (last, last, format!("{sep}{joined}"))
    };
    Some(format!("{}{text}{}", &original[..from], &original[to..]))
}

/// The notebook `nb` as text: `original` with only the changed cells rewritten when it can be
/// spliced, else all of it rendered in `original`'s style.
fn render_changed(nb: &Value, old_cells: &[Value], original: &str) -> Result<String, serde_json::Error> {
    let new_cells = nb.get("cells").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    match splice_cells(original, old_cells, new_cells) {
        Some(text) => Ok(text),
        None => render_like(nb, original),
    }
}

/// The notebook's language, from its kernel metadata.
pub fn notebook_language(nb: &Value) -> Option<String> {
    let md = nb.get("metadata")?;
    md.pointer("/kernelspec/language")
        .or_else(|| md.pointer("/language_info/name"))
        .and_then(Value::as_str)
        .map(|s| s.to_lowercase())
}

fn normalize_language(l: &str) -> String {
    match l.trim().to_lowercase().as_str() {
        "py" | "python3" | "ipython" => "python".into(),
        "js" | "node" | "nodejs" => "javascript".into(),
        "ts" => "typescript".into(),
        other => other.to_string(),
    }
}

fn source_text(cell: &Value) -> String {
    match cell.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// Jupyter's on-disk form of a source: a list of lines, each but the last ending in `\n`.
fn source_lines(text: &str) -> Value {
    Value::Array(text.split_inclusive('\n').map(|l| Value::String(l.to_string())).collect())
}

fn set_source(cell: &mut Value, text: &str, as_string: bool) {
    let v = if as_string { Value::String(text.to_string()) } else { source_lines(text) };
    if let Some(obj) = cell.as_object_mut() {
        obj.insert("source".into(), v);
    }
}

fn new_id(existing: &[String], salt: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut n = 0u64;
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(salt);
        h.write_u64(n);
        let id = format!("{:08x}", h.finish() & 0xffff_ffff);
        if !existing.contains(&id) {
            return id;
        }
        n += 1;
    }
}

/// Applies one operation to a parsed notebook. Returns a one-line summary and the cell's source
/// before and after.
pub fn apply_operation(nb: &mut Value, args: &EditNotebookArgs) -> Result<(String, String, String), ToolError> {
    let format = nb.get("nbformat").and_then(Value::as_u64);
    if format != Some(4) {
        return Err(fail(format!(
            "only nbformat 4 notebooks can be edited; this one has nbformat {}",
            format.map_or("missing".to_string(), |f| f.to_string())
        )));
    }
    let minor = nb.get("nbformat_minor").and_then(Value::as_u64).unwrap_or(0);
    let lang = notebook_language(nb);
    let cells =
        nb.get_mut("cells").and_then(Value::as_array_mut).ok_or_else(|| fail("the notebook has no `cells` array"))?;
    let ids: Vec<String> =
        cells.iter().filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string)).collect();
    let by_id = match &args.cell_id {
        Some(id) => Some(
            ids.iter()
                .position(|x| x == id)
                .map(|_| ())
                .and_then(|_| cells.iter().position(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str())))
                .ok_or_else(|| fail(format!("no cell has id `{id}`; the notebook has {} cells", cells.len())))?,
        ),
        None => None,
    };
    if let (Some(i), Some(j)) = (args.cell_index, by_id)
        && i != j
    {
        return Err(fail(format!("cell_index {i} and cell_id (cell {j}) point at different cells; give one of them")));
    }
    let n = cells.len();
    let mut warn = String::new();
    if let Some(l) = &args.cell_language {
        let l = normalize_language(l);
        if !LANGUAGES.contains(&l.as_str()) {
            return Err(fail(format!("cell_language `{l}` is not supported; use one of {}", LANGUAGES.join(", "))));
        }
        if let Some(nl) = &lang
            && normalize_language(nl) != l
            && l != "sql"
        {
            warn = format!(" Note: the notebook's kernel language is {nl}, not {l}.");
        }
    }
    match args.operation {
        NotebookOperation::Insert => {
            let at = by_id.or(args.cell_index).unwrap_or(n);
            if at > n {
                return Err(fail(format!(
                    "cell_index {at} is past the end; the notebook has {n} cells (0..={n} to insert)"
                )));
            }
            let text = args.new_source.clone().ok_or_else(|| fail("insert needs new_source (the new cell's text)"))?;
            let kind = args.cell_type.unwrap_or(CellType::Code);
            let mut cell = Map::new();
            match kind {
                CellType::Code => {
                    cell.insert("cell_type".into(), json!("code"));
                    cell.insert("execution_count".into(), Value::Null);
                }
                CellType::Markdown => {
                    cell.insert("cell_type".into(), json!("markdown"));
                }
            }
            if minor >= 5 {
                cell.insert("id".into(), json!(new_id(&ids, at)));
            }
            cell.insert("metadata".into(), json!({}));
            if kind == CellType::Code {
                cell.insert("outputs".into(), json!([]));
            }
            let as_string = cells.iter().any(|c| c.get("source").is_some_and(Value::is_string))
                && !cells.iter().any(|c| c.get("source").is_some_and(Value::is_array));
            cell.insert("source".into(), if as_string { json!(text) } else { source_lines(&text) });
            cells.insert(at, Value::Object(cell));
            let what = if kind == CellType::Code { "code" } else { "markdown" };
            Ok((
                format!("Inserted a {what} cell at index {at} (the notebook now has {} cells).{warn}", n + 1),
                String::new(),
                text,
            ))
        }
        NotebookOperation::Edit | NotebookOperation::Delete => {
            let at = by_id.or(args.cell_index).ok_or_else(|| fail("give cell_index or cell_id"))?;
            if at >= n {
                return Err(fail(format!("cell_index {at} does not exist; the notebook has {n} cells (0..{n})")));
            }
            let before = source_text(&cells[at]);
            if args.operation == NotebookOperation::Delete {
                cells.remove(at);
                return Ok((
                    format!("Deleted cell {at} (the notebook now has {} cells).", n - 1),
                    before,
                    String::new(),
                ));
            }
            let after = match (&args.old_string, &args.new_source) {
                (Some(old), _) => {
                    let new = args.new_string.clone().unwrap_or_default();
                    let r = replace_unique(&before, old, &new, &mut Budget::default())
                        .map_err(|e| fail(format!("cell {at}: {e}")))?;
                    let mut t = before.clone();
                    t.replace_range(r.start..r.end, &r.text);
                    t
                }
                (None, Some(src)) => src.clone(),
                (None, None) => return Err(fail("edit needs new_source, or old_string and new_string")),
            };
            let cell = &mut cells[at];
            let as_string = cell.get("source").is_some_and(Value::is_string);
            set_source(cell, &after, as_string);
            if let Some(kind) = args.cell_type {
                convert_cell(cell, kind);
            }
            if cell.get("cell_type").and_then(Value::as_str) == Some("code") && after != before {
                // The old outputs belong to the old code.
                if let Some(obj) = cell.as_object_mut() {
                    if obj.contains_key("outputs") {
                        obj.insert("outputs".into(), json!([]));
                    }
                    if obj.contains_key("execution_count") {
                        obj.insert("execution_count".into(), Value::Null);
                    }
                }
            }
            Ok((format!("Edited cell {at}.{warn}"), before, after))
        }
    }
}

fn convert_cell(cell: &mut Value, kind: CellType) {
    let Some(obj) = cell.as_object_mut() else { return };
    match kind {
        CellType::Markdown => {
            obj.insert("cell_type".into(), json!("markdown"));
            obj.remove("outputs");
            obj.remove("execution_count");
        }
        CellType::Code if obj.get("cell_type").and_then(Value::as_str) != Some("code") => {
            obj.insert("cell_type".into(), json!("code"));
            obj.insert("execution_count".into(), Value::Null);
            obj.insert("outputs".into(), json!([]));
        }
        CellType::Code => {}
    }
}

fn run_blocking(
    args: &EditNotebookArgs,
    ws: &Workspace,
    session: &kodik_core::Session,
    shared: &Shared,
) -> Result<ToolOutput, ToolError> {
    shared.ops.require(&[FileOp::Change], "edit_notebook")?;
    let path = ws.check_file(&args.target_notebook).map_err(|e| crate::path_error(e, "none"))?;
    let shown = ws.display(&path);
    if path.extension().and_then(|e| e.to_str()) != Some("ipynb") {
        return Err(fail(format!("`{shown}` is not a .ipynb notebook; use edit_file for other files")));
    }
    let loaded = files::load(&path, &shown, ws)?;
    let mut nb: Value = serde_json::from_str(&loaded.text).map_err(|e| {
        fail(format!("`{shown}` is not valid notebook JSON ({e}); it was not changed — fix or re-create it"))
    })?;
    if !nb.is_object() {
        return Err(fail(format!("`{shown}` is not a notebook (its JSON is not an object)")));
    }
    let old_cells = nb.get("cells").and_then(Value::as_array).cloned().unwrap_or_default();
    let (summary, before, after) = apply_operation(&mut nb, args)?;
    let text = render_changed(&nb, &old_cells, &loaded.text)
        .map_err(|e| fail(format!("could not write the notebook: {e}")))?;
    let bytes = loaded.encode(&text, &shown)?;
    let meta = std::fs::metadata(&path).map_err(|e| ToolError::io("reading", &shown, e))?;
    let other_links = kodik_core::fs::other_links(&path);
    let prior = Prior::file(loaded.into_bytes(), meta.permissions());
    files::write_recorded(&path, &shown, &bytes, prior, session.message(), &shared.checkpoints)?;
    session.record_write(&path, FileVersion::of_bytes(&bytes));
    let d = crate::diff::unified_with(&before, &after, "a/cell", "b/cell", shared.preview.clone());
    let mut out = format!("`{shown}`: {summary}{}", files::split_links_note(other_links, &shown));
    if !d.text.is_empty() {
        out.push('\n');
        out.push_str(&d.text);
    }
    Ok(ToolOutput::text(out).with_meta(json!({"path": shown, "operation": args.operation})))
}

#[async_trait]
impl TypedTool for EditNotebookTool {
    type Args = EditNotebookArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn resources(&self, args: &EditNotebookArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&args.target_notebook)]
    }

    async fn run(&self, args: EditNotebookArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (ws, session, shared) = (cx.workspace.clone(), Arc::clone(&cx.session), Arc::clone(&self.shared));
        tokio::task::spawn_blocking(move || run_blocking(&args, &ws, &session, &shared))
            .await
            .map_err(|e| fail(format!("the notebook task failed: {e}")))?
    }
}
