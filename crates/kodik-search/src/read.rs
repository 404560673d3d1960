//! `read_file` (R1–R6): numbered lines, 16 KB per call, ranges, encodings, images.
//!
//! Output format: every line is `<number>→<text>`, the number right-aligned to the widest
//! number shown, the text exactly as stored (its line ending dropped). The model quotes the
//! part after `→` in edits.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::text::{self, Decoded};
use kodik_core::{FileVersion, Resource, Session, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::search::{LineRange, ReadFileArgs};
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::util::{hash_of, human_bytes, run_blocking};
use crate::{guard, image};

/// Room kept below the byte limit for the notes after the lines (fixed part, and per range
/// for the `ranges` to read next), so the whole text stays within the limit.
const NOTE_RESERVE: usize = 320;
const NOTE_RESERVE_PER_RANGE: usize = 72;

/// The `read_file` tool.
#[derive(Debug, Clone)]
pub struct ReadFileTool {
    spec: ToolSpec,
    config: Arc<SearchConfig>,
}

impl ReadFileTool {
    /// The tool with the given limits.
    pub fn new(config: SearchConfig) -> Self {
        Self { spec: kodik_schema::spec::<ReadFileArgs>(), config: Arc::new(config) }
    }
}

impl Default for ReadFileTool {
    fn default() -> Self {
        Self::new(SearchConfig::default())
    }
}

#[async_trait]
impl TypedTool for ReadFileTool {
    type Args = ReadFileArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// An edit of the same file later in the turn waits for this read (E2, G2).
    fn reads(&self, args: &ReadFileArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&args.path)]
    }

    async fn run(&self, args: ReadFileArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = cx.workspace.clone();
        let session = cx.session.clone();
        let config = self.config.clone();
        Ok(run_blocking(&cx.cancel, move || read(&ws, &session, &config, &args)).await?)
    }
}

/// One requested block after validation: lines `start..=end` (clamped), from `column` on in the first.
#[derive(Debug, Clone, Copy)]
struct Block {
    start: usize,
    end: usize,
    column: Option<usize>,
    clamped_from: Option<usize>,
}

fn read(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &ReadFileArgs,
) -> Result<ToolOutput, SearchError> {
    let resolved = ws.check_readable(&args.path)?;
    let shown = ws.display(&resolved);
    let meta = match std::fs::metadata(&resolved) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ws.not_found(&resolved).into()),
        Err(source) => return Err(SearchError::Io { action: "reading", path: shown, source }),
    };
    if meta.is_dir() {
        return Err(SearchError::IsFolder(shown));
    }
    if !meta.is_file() {
        return Err(SearchError::NotSearchable(shown));
    }
    let key = format!("read_file\0{}\0{:?}", resolved.display(), args.ranges);

    if image::is_image_path(&resolved) {
        if meta.len() > config.max_image_bytes {
            return Err(SearchError::ImageTooLarge { path: shown, size: meta.len(), limit: config.max_image_bytes });
        }
        let bytes = read_bytes(&resolved, &shown)?;
        let version = FileVersion::of_bytes(&bytes);
        if let Some(out) = guard::check(session, &key, hash_of(&version), "same image") {
            return Ok(out);
        }
        return image::render(&shown, &bytes, config);
    }

    let limit = config.max_file_bytes();
    if args.ranges.is_none() && meta.len() > limit {
        return too_large(&resolved, &shown, meta.len(), limit, config);
    }
    let bytes = read_bytes(&resolved, &shown)?;
    let version = FileVersion::of_bytes(&bytes);
    let decoded = text::decode(&bytes, ws.settings().encoding()).map_err(|_| SearchError::Binary(shown.clone()))?;
    drop(bytes);
    let lines = split_lines(&decoded.text);
    let total = lines.len();
    let blocks = blocks(args.ranges.as_deref(), total)?;

    let verdict = guard::check(session, &key, hash_of(&version), "same file content, same lines");
    // R4: the same lines of the same version already read in this message.
    if total > 0
        && !blocks.is_empty()
        && blocks.iter().all(|b| b.column.is_none() && still_current(session, &resolved, version, b.start, b.end))
    {
        let which = blocks.iter().map(|b| format!("{}-{}", b.start, b.end)).collect::<Vec<_>>().join(", ");
        return Ok(ToolOutput::text(format!(
            "`{shown}` lines {which} are unchanged since you read them earlier in this message; that read is still \
             current (the file has not changed)."
        ))
        .with_meta(json!({ "path": shown, "still_current": true, "total_lines": total })));
    }
    if let Some(out) = verdict {
        return Ok(out);
    }

    let whole = args.ranges.is_none();
    let reserve = NOTE_RESERVE + NOTE_RESERVE_PER_RANGE * blocks.len();
    let r = render(&lines, &blocks, config.read_output_bytes.saturating_sub(reserve).max(256));
    for &(s, e) in &r.shown {
        session.record_read(&resolved, version, Some((s, e)));
    }
    if total == 0 {
        session.record_read(&resolved, version, None);
    }
    Ok(finish(&shown, total, &decoded, &blocks, r, whole, config))
}

/// R4: lines `start..=end` of this version were shown by `read_file` during the current message.
///
/// Only ranges this tool recorded count (they always end at a real line number): the
/// `(1, usize::MAX)` record that edit tools leave through `Session::record_write` means the
/// session *wrote* the file, and a model that only sent an edit has not seen the result, so a
/// read after an edit shows the content.
fn still_current(session: &Session, path: &Path, version: FileVersion, start: usize, end: usize) -> bool {
    session.last_read(path).is_some_and(|r| {
        r.version == version
            && r.message == session.message()
            && r.ranges.iter().any(|&(s, e)| e != usize::MAX && s <= start && end <= e)
    })
}

fn read_bytes(path: &Path, shown: &str) -> Result<Vec<u8>, SearchError> {
    std::fs::read(path).map_err(|source| SearchError::Io { action: "reading", path: shown.to_string(), source })
}

/// The file's lines without their endings (`\n` or `\r\n`); a final line ending adds no empty line.
fn split_lines(text: &str) -> Vec<&str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect()
}

fn blocks(ranges: Option<&[LineRange]>, total: usize) -> Result<Vec<Block>, SearchError> {
    let Some(ranges) = ranges else {
        return Ok(if total == 0 {
            Vec::new()
        } else {
            vec![Block { start: 1, end: total, column: None, clamped_from: None }]
        });
    };
    if ranges.is_empty() {
        return Err(SearchError::BadRange {
            index: 0,
            reason: "`ranges` is empty; leave it out to read from the start, or give at least one range".into(),
        });
    }
    let mut out = Vec::with_capacity(ranges.len());
    for (index, r) in ranges.iter().enumerate() {
        let bad = |reason: String| SearchError::BadRange { index, reason };
        if r.start_line == 0 {
            return Err(bad("start_line is 1-based; the first line is 1".into()));
        }
        if r.end_line < r.start_line {
            return Err(bad(format!("end_line {} is before start_line {}", r.end_line, r.start_line)));
        }
        if r.start_line > total {
            return Err(bad(if total == 0 {
                "the file is empty (0 lines)".to_string()
            } else {
                format!("start_line {} is past the end of the file, which has {total} lines", r.start_line)
            }));
        }
        if r.start_column == Some(0) {
            return Err(bad("start_column is 1-based; the first character is 1".into()));
        }
        let (end, clamped_from) = if r.end_line > total { (total, Some(r.end_line)) } else { (r.end_line, None) };
        out.push(Block { start: r.start_line, end, column: r.start_column, clamped_from });
    }
    Ok(out)
}

/// What [`render`] produced.
struct Rendered {
    text: String,
    /// Line ranges shown, per block.
    shown: Vec<(usize, usize)>,
    /// The ranges to ask for next when the byte limit cut the output.
    next: Vec<LineRange>,
    /// When the cut fell inside one long line: `(line, its length in characters, next column)`.
    cut_line: Option<(usize, usize, usize)>,
}

fn render(lines: &[&str], blocks: &[Block], budget: usize) -> Rendered {
    let width = blocks.iter().map(|b| b.end).max().unwrap_or(1).to_string().len();
    let mut r = Rendered { text: String::new(), shown: Vec::new(), next: Vec::new(), cut_line: None };
    let mut shown_any = false;
    for b in blocks {
        if !r.next.is_empty() {
            r.next.push(LineRange { start_line: b.start, end_line: b.end, start_column: b.column });
            continue;
        }
        let mut first: Option<usize> = None;
        let mut last = 0;
        for n in b.start..=b.end {
            let line = lines[n - 1];
            let (textpart, column) = match b.column {
                Some(c) if n == b.start => (skip_chars(line, c - 1), c),
                _ => (line, 1),
            };
            let prefix = format!("{n:>width$}→");
            let need = prefix.len() + textpart.len() + 1;
            if r.text.len() + need <= budget {
                r.text.push_str(&prefix);
                r.text.push_str(textpart);
                r.text.push('\n');
                first.get_or_insert(n);
                last = n;
                shown_any = true;
                continue;
            }
            if !shown_any {
                // Not even this one line fits: show its head and continue inside it next time (R2).
                let room = budget.saturating_sub(prefix.len() + 1 + r.text.len());
                let cut = floor_boundary(textpart, room);
                r.text.push_str(&prefix);
                r.text.push_str(&textpart[..cut]);
                r.text.push('\n');
                let next_column = column + textpart[..cut].chars().count();
                r.cut_line = Some((n, line.chars().count(), next_column));
                r.next.push(LineRange { start_line: n, end_line: b.end, start_column: Some(next_column) });
                first.get_or_insert(n);
                last = n;
                shown_any = true;
            } else {
                r.next.push(LineRange { start_line: n, end_line: b.end, start_column: None });
            }
            break;
        }
        if let Some(f) = first {
            r.shown.push((f, last));
        }
    }
    r
}

fn skip_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[i..],
        None => "",
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn finish(
    shown: &str,
    total: usize,
    decoded: &Decoded,
    blocks: &[Block],
    r: Rendered,
    whole: bool,
    config: &SearchConfig,
) -> ToolOutput {
    let mut text = r.text;
    let mut notes: Vec<String> = Vec::new();
    if total == 0 {
        notes.push(format!("`{shown}` is empty (0 lines)."));
    }
    for b in blocks {
        if let Some(asked) = b.clamped_from {
            notes.push(format!("end_line {asked} is past the end; the file has {total} lines."));
            break;
        }
    }
    if let Some((line, len, next_column)) = r.cut_line {
        notes.push(format!(
            "Line {line} is {len} characters long; shown up to column {}.",
            next_column.saturating_sub(1)
        ));
    }
    if !r.next.is_empty() {
        let next = serde_json::to_string(&r.next).unwrap_or_default();
        notes.push(format!(
            "Output cut at the {} KB limit of one call. To read on, call read_file with ranges: {next}",
            config.read_output_bytes / 1024
        ));
    } else if !whole && total > 0 {
        notes.push(format!("The file has {total} lines."));
    }
    let enc = decoded.format.encoding;
    if enc != encoding_rs::UTF_8 || decoded.format.bom {
        notes.push(format!("Decoded from {}{}.", enc.name(), if decoded.format.bom { " with BOM" } else { "" }));
    }
    if decoded.lossy {
        notes.push(format!("Some bytes are not valid {} and are shown as U+FFFD.", enc.name()));
    }
    if !notes.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        let _ = write!(text, "[{}]", notes.join(" "));
    }
    let meta = json!({
        "path": shown,
        "total_lines": total,
        "shown": r.shown,
        "truncated": !r.next.is_empty(),
        "next_ranges": r.next,
        "encoding": enc.name(),
    });
    ToolOutput::text(text).with_meta(meta)
}

/// R3: a file over the size limit is not read whole; the result says how to read it instead.
fn too_large(
    path: &Path,
    shown: &str,
    size: u64,
    limit: u64,
    config: &SearchConfig,
) -> Result<ToolOutput, SearchError> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).map_err(|source| SearchError::Io {
        action: "reading",
        path: shown.to_string(),
        source,
    })?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut newlines = 0usize;
    loop {
        let n = file.read(&mut buf).map_err(|source| SearchError::Io {
            action: "reading",
            path: shown.to_string(),
            source,
        })?;
        if n == 0 {
            break;
        }
        newlines += buf[..n].iter().filter(|b| **b == b'\n').count();
    }
    let lines = newlines.max(1);
    let avg = (size as usize / lines).max(1);
    let first = (config.read_output_bytes / (avg + 8)).clamp(1, lines);
    let text = format!(
        "`{shown}` is {} (about {lines} lines), over the {} limit for reading a file whole, so it was not read. \
         Use `grep` with path `{shown}` and output_mode `content` to find the lines you need, then read_file with \
         `ranges` around them, e.g. ranges: [{{\"start_line\": 1, \"end_line\": {first}}}].",
        human_bytes(size),
        human_bytes(limit)
    );
    Ok(ToolOutput::text(text).with_meta(json!({ "path": shown, "too_large": true, "bytes": size, "limit": limit })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r1_lines_split_without_endings() {
        assert_eq!(split_lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(split_lines("a\n\nb"), ["a", "", "b"]);
        assert!(split_lines("").is_empty());
        assert_eq!(split_lines("\n"), [""]);
    }

    #[test]
    fn r2_cut_inside_a_line_respects_char_boundaries() {
        let line = "ж".repeat(100);
        let blocks = [Block { start: 1, end: 1, column: None, clamped_from: None }];
        let r = render(&[&line], &blocks, 51);
        assert!(r.text.len() <= 51);
        let (_, len, next) = r.cut_line.unwrap();
        assert_eq!(len, 100);
        let shown_chars = r.text.trim_end().split('→').nth(1).unwrap().chars().count();
        assert_eq!(next, shown_chars + 1);
    }

    proptest::proptest! {
        /// R2 for any text and any limit: every call stays within its byte budget, always makes
        /// progress, and following `next` ranges gives back every line exactly.
        #[test]
        fn r2_following_next_ranges_reassembles_any_file(
            lines in proptest::collection::vec("[a-zé→\\t ]{0,300}", 1..40),
            budget in 64usize..600,
        ) {
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            let mut blocks = vec![Block { start: 1, end: refs.len(), column: None, clamped_from: None }];
            let mut rebuilt: Vec<String> = vec![String::new(); refs.len()];
            for _ in 0..10_000 {
                let r = render(&refs, &blocks, budget);
                proptest::prop_assert!(r.text.len() <= budget, "{} > {budget}", r.text.len());
                for l in r.text.lines() {
                    let (num, text) = l.split_once('→').unwrap();
                    rebuilt[num.trim().parse::<usize>().unwrap() - 1].push_str(text);
                }
                if r.next.is_empty() {
                    break;
                }
                let n = &r.next[0];
                proptest::prop_assert!(
                    (n.start_line, n.start_column) != (blocks[0].start, blocks[0].column),
                    "no progress"
                );
                blocks = r
                    .next
                    .iter()
                    .map(|n| Block { start: n.start_line, end: n.end_line, column: n.start_column, clamped_from: None })
                    .collect();
            }
            proptest::prop_assert_eq!(rebuilt, lines);
        }
    }
}
