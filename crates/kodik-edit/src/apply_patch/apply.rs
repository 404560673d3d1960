//! Applying a parsed patch: every operation is planned against the files first (later
//! operations see earlier ones), and only when the whole patch fits are files written — all
//! of them, or none (P1 a).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use kodik_core::text::LineEnding;
use kodik_core::{FileVersion, Session, ToolError, Workspace};
use serde::Serialize;

use super::parse::{Hunk, HunkLine, Patch, PatchOp};
use crate::checkpoints::Prior;
use crate::diff::{self, DiffText};
use crate::matcher::{
    Budget, FuzzyVerdict, Level, LineIndex, Reindent, Stage, find_line_seq, fuzzy_search, line_key, nearest_hint,
};
use crate::{FileOp, Shared, files};

/// Why a hunk could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hunk {index} (patch line {line}): {message}")]
pub struct HunkError {
    /// 1-based hunk number within its file.
    pub index: usize,
    /// 1-based patch line where the hunk starts.
    pub line: usize,
    /// What went wrong, worded for the model.
    pub message: String,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ChangeKind {
    /// Added (or replaced by `*** Add File`).
    #[serde(rename = "A")]
    Added,
    /// Modified in place.
    #[serde(rename = "M")]
    Modified,
    /// Deleted.
    #[serde(rename = "D")]
    Deleted,
    /// Moved (and possibly modified).
    #[serde(rename = "R")]
    Renamed,
}

impl ChangeKind {
    /// The one-letter code.
    pub fn letter(self) -> char {
        match self {
            Self::Added => 'A',
            Self::Modified => 'M',
            Self::Deleted => 'D',
            Self::Renamed => 'R',
        }
    }
}

/// One file of an applied patch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileChange {
    /// A/M/D/R.
    pub kind: ChangeKind,
    /// The path (workspace-relative when inside it).
    pub path: String,
    /// For moves: where the file went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The diff of the change.
    #[serde(skip)]
    pub diff: DiffText,
    /// The matching stage of every hunk (updates only).
    pub stages: Vec<Stage>,
    /// Other hard links of a replaced file: they keep its old content (E12).
    #[serde(skip)]
    pub other_links: u64,
}

/// Applies `hunks` to `text` in order; every hunk's old lines must match exactly one place
/// after the previous hunk (same cascade as `edit_file`). Line endings, a missing final
/// newline and unchanged lines survive byte for byte. No I/O.
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<(String, Vec<Stage>), HunkError> {
    let lines = LineIndex::new(text);
    let n = lines.len();
    let ending = LineEnding::detect(text).dominant();
    let mut cache: HashMap<u8, Vec<u64>> = HashMap::new();
    let mut cursor = 0usize;
    let mut pieces: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut stages = Vec::new();
    for (hi, hunk) in hunks.iter().enumerate() {
        let fail = |message: String| HunkError { index: hi + 1, line: hunk.line, message };
        let adds: Vec<String> =
            hunk.lines.iter().filter_map(|l| if let HunkLine::Add(s) = l { Some(s.clone()) } else { None }).collect();
        if hunk.old_lines().is_empty() {
            // Pure addition: after the unique @@ context line, or at the end of the file (P1 b).
            let at = match &hunk.header {
                Some(h) => {
                    let (hits, stage) = header_hits(&lines, text, h, cursor, &mut cache);
                    match hits.as_slice() {
                        [] => return Err(fail(format!("the @@ context line `{h}` was not found{}", after(cursor)))),
                        [one] => {
                            stages.push(stage);
                            one + 1
                        }
                        many => {
                            return Err(fail(format!(
                                "the @@ context line `{h}` matches several lines ({}); use a more specific @@ line \
                                 or add context lines",
                                list(many)
                            )));
                        }
                    }
                }
                None => {
                    stages.push(Stage::Exact);
                    n
                }
            };
            pieces.push((at, at, adds));
            cursor = at;
            continue;
        }
        let (start, stage, hunk_used) = match locate(&lines, text, hunk, cursor, &mut cache) {
            Ok((p, s)) => (p, s, hunk.clone()),
            Err(e) => match without_trailing_blank(hunk) {
                Some(trimmed) => match locate(&lines, text, &trimmed, cursor, &mut cache) {
                    Ok((p, s)) => (p, s, trimmed),
                    Err(_) => return Err(fail(e)),
                },
                None => return Err(fail(e)),
            },
        };
        let old = hunk_used.old_lines();
        let reindent = if matches!(stage, Stage::Whitespace | Stage::Fuzzy) {
            Reindent::learn(old.iter().enumerate().map(|(j, o)| (*o, lines.line(text, start + j))))
        } else {
            Reindent::Keep
        };
        let mut out = Vec::new();
        let mut f = start;
        for l in &hunk_used.lines {
            match l {
                HunkLine::Context(_) => {
                    out.push(lines.line(text, f).to_string());
                    f += 1;
                }
                HunkLine::Remove(_) => f += 1,
                HunkLine::Add(s) => out.push(reindent.apply(s)),
            }
        }
        stages.push(stage);
        pieces.push((start, start + old.len(), out));
        cursor = start + old.len();
    }
    // Assemble: untouched lines are copied as they are, with their own line breaks.
    // In bytes, so the line tables (more than half the file's size for short lines) are freed
    // before the new text is built: the peak is then the old and the new text (issue 18.2).
    let mut prev = 0usize;
    let pieces: Vec<(usize, usize, &str, Vec<String>)> = pieces
        .into_iter()
        .map(|(s, e, new_lines)| {
            let brk =
                if e > s && !lines.terminator(text, e - 1).is_empty() { lines.terminator(text, e - 1) } else { ending };
            let kept = (lines.start(prev, text), lines.start(s, text), brk, new_lines);
            prev = e;
            kept
        })
        .collect();
    let rest = lines.start(prev, text);
    drop(cache);
    drop(lines);
    let mut result = String::with_capacity(text.len() + 64);
    for (keep_from, keep_to, brk, new_lines) in pieces {
        result.push_str(&text[keep_from..keep_to]);
        if !new_lines.is_empty() && !result.is_empty() && !result.ends_with('\n') {
            result.push_str(ending);
        }
        for l in new_lines {
            result.push_str(&l);
            result.push_str(brk);
        }
    }
    result.push_str(&text[rest..]);
    if !text.is_empty() && !text.ends_with('\n') {
        // The file had no final newline; it keeps having none (E12).
        if let Some(stripped) = result.strip_suffix("\r\n").or_else(|| result.strip_suffix('\n')) {
            result.truncate(stripped.len());
        }
    }
    Ok((result, stages))
}

fn after(cursor: usize) -> String {
    if cursor == 0 { String::new() } else { format!(" after line {cursor}") }
}

fn list(lines: &[usize]) -> String {
    lines.iter().take(10).map(|l| format!("line {}", l + 1)).collect::<Vec<_>>().join(", ")
}

fn without_trailing_blank(h: &Hunk) -> Option<Hunk> {
    let mut t = h.clone();
    let mut changed = false;
    while let Some(HunkLine::Context(s)) = t.lines.last() {
        if !s.trim().is_empty() {
            break;
        }
        t.lines.pop();
        changed = true;
    }
    (changed && !t.old_lines().is_empty()).then_some(t)
}

fn level_key(level: Level) -> u8 {
    match level {
        Level::Exact => 0,
        Level::Typography => 1,
        Level::Whitespace => 2,
    }
}

fn hashes<'c>(lines: &LineIndex, text: &str, level: Level, cache: &'c mut HashMap<u8, Vec<u64>>) -> &'c [u64] {
    cache.entry(level_key(level)).or_insert_with(|| lines.hashes(text, level))
}

const LEVELS: [(Level, Stage); 3] =
    [(Level::Exact, Stage::Exact), (Level::Typography, Stage::Typography), (Level::Whitespace, Stage::Whitespace)];

/// Lines at or after `cursor` equal to the @@ header, at the first level that finds any.
fn header_hits(
    lines: &LineIndex,
    text: &str,
    header: &str,
    cursor: usize,
    cache: &mut HashMap<u8, Vec<u64>>,
) -> (Vec<usize>, Stage) {
    let mut budget = Budget::default();
    for (level, stage) in LEVELS {
        let h = hashes(lines, text, level, cache).to_vec();
        let hits = find_line_seq(lines, text, &h, &[header], cursor..lines.len(), level, &mut budget);
        if !hits.is_empty() {
            return (hits, stage);
        }
    }
    (Vec::new(), Stage::Exact)
}

/// The one place the hunk's old lines match, after `cursor` (and after its @@ line).
fn locate(
    lines: &LineIndex,
    text: &str,
    hunk: &Hunk,
    cursor: usize,
    cache: &mut HashMap<u8, Vec<u64>>,
) -> Result<(usize, Stage), String> {
    let old = hunk.old_lines();
    let k = old.len();
    let n = lines.len();
    let mut from = cursor;
    if let Some(h) = &hunk.header {
        let (hits, _) = header_hits(lines, text, h, cursor, cache);
        match hits.first() {
            Some(first) => from = first + 1,
            None => return Err(format!("the @@ context line `{h}` was not found{}", after(cursor))),
        }
    }
    if k > n.saturating_sub(from) {
        return Err(not_found_text(lines, text, &old, from, None, &Budget::default()));
    }
    let range = if hunk.end_of_file { n - k..n } else { from..n };
    let mut budget = Budget::default();
    for (level, stage) in LEVELS {
        let h = hashes(lines, text, level, cache).to_vec();
        let hits = find_line_seq(lines, text, &h, &old, range.clone(), level, &mut budget);
        match hits.as_slice() {
            [] => continue,
            [one] => return Ok((*one, stage)),
            many => {
                return Err(format!(
                    "its context and removed lines match {} places ({}); add more context lines or an @@ line \
                     naming the enclosing function or class so it points at exactly one place",
                    many.len(),
                    list(many)
                ));
            }
        }
    }
    let h = hashes(lines, text, Level::Whitespace, cache).to_vec();
    let fuzzy = fuzzy_search(lines, text, &h, &old, range, &mut budget);
    match fuzzy.verdict() {
        // Drift is forgiven in context lines only: removed lines must be in the file.
        FuzzyVerdict::Unique(w)
            if hunk.lines.iter().filter(|l| !matches!(l, HunkLine::Add(_))).enumerate().all(|(j, l)| match l {
                HunkLine::Remove(s) => {
                    line_key(lines.line(text, w.start + j), Level::Whitespace) == line_key(s, Level::Whitespace)
                }
                _ => true,
            }) =>
        {
            Ok((w.start, Stage::Fuzzy))
        }
        FuzzyVerdict::Unique(w) => Err(not_found_text(lines, text, &old, from, Some(w), &budget)),
        FuzzyVerdict::Ambiguous(starts) => Err(format!(
            "its lines are only approximately in the file, at several places ({}); re-read the file and give \
             exact context lines",
            list(&starts)
        )),
        FuzzyVerdict::None => Err(not_found_text(lines, text, &old, from, fuzzy.best(), &budget)),
    }
}

fn not_found_text(
    lines: &LineIndex,
    text: &str,
    old: &[&str],
    from: usize,
    best: Option<crate::matcher::Window>,
    budget: &Budget,
) -> String {
    let hint = nearest_hint(text, lines, old, best, &old.join("\n"), budget);
    format!(
        "its context and removed lines were not found{} (hunks must be in file order). {hint} Re-read the file \
         and copy the context lines exactly.",
        after(from)
    )
}

/// The planned end state of one path.
#[derive(Debug, Clone)]
struct Planned {
    /// `None` for deleted.
    bytes: Option<Vec<u8>>,
    /// For a move's destination: the source's metadata, whose mode and owner it takes (E12).
    like: Option<std::fs::Metadata>,
}

/// The other hard links of `path` on disk, unless the plan already changed it (then its first
/// change reported them).
fn on_disk_links(plan: &Plan, path: &Path) -> u64 {
    if plan.states.contains_key(path) { 0 } else { kodik_core::fs::other_links(path) }
}

/// A patch checked against the files and ready to write.
pub(crate) struct Plan {
    order: Vec<PathBuf>,
    states: BTreeMap<PathBuf, Planned>,
    shown: HashMap<PathBuf, String>,
    /// The report, in patch order.
    pub(crate) changes: Vec<FileChange>,
}

fn joined(base: &Path, p: &str) -> PathBuf {
    let raw = Path::new(p);
    if raw.is_absolute() { raw.to_path_buf() } else { base.join(raw) }
}

fn resolve(base: &Path, p: &str, ws: &Workspace) -> Result<PathBuf, ToolError> {
    Ok(ws.check(joined(base, p))?)
}

/// The symlink a Delete or a move's source names (D1), unless the plan already changed that
/// name.
fn named_link(plan: &Plan, base: &Path, p: &str, ws: &Workspace) -> Result<Option<(PathBuf, PathBuf)>, ToolError> {
    Ok(files::named_symlink(ws, &joined(base, p))?.filter(|(link, _)| !plan.states.contains_key(link)))
}

/// `t` with CRLF turned into LF, borrowed when it has no CR.
fn lf(t: &str) -> std::borrow::Cow<'_, str> {
    if t.contains('\r') { t.replace("\r\n", "\n").into() } else { t.into() }
}

fn op_context(op: &PatchOp) -> String {
    let verb = match op {
        PatchOp::Add { .. } => "Add File",
        PatchOp::Delete { .. } => "Delete File",
        PatchOp::Update { .. } => "Update File",
    };
    format!("`*** {verb}: {}` (patch line {})", op.path(), op.line())
}

impl Plan {
    fn touch(&mut self, path: &Path, shown: &str) {
        if !self.states.contains_key(path) && !self.order.iter().any(|p| p == path) {
            self.order.push(path.to_path_buf());
        }
        self.shown.insert(path.to_path_buf(), shown.to_string());
    }

    /// The files the plan writes (not the deleted ones), in patch order, with their shown paths.
    pub(crate) fn written(&self) -> crate::files::Written {
        let written = self.order.iter().filter(|p| self.states.get(*p).is_some_and(|s| s.bytes.is_some()));
        written.map(|p| (p.clone(), self.shown.get(p).cloned().unwrap_or_else(|| p.display().to_string()))).collect()
    }

    /// The current bytes of `path` within the plan: planned content, else what is on disk.
    fn current(&self, path: &Path, shown: &str) -> Result<Option<Vec<u8>>, ToolError> {
        if let Some(p) = self.states.get(path) {
            return Ok(p.bytes.clone());
        }
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Err(ToolError::failed(format!("`{shown}` is a folder, not a file"))),
            Ok(_) => std::fs::read(path).map(Some).map_err(|e| ToolError::io("reading", shown, e)),
            Err(_) => Ok(None),
        }
    }

    /// Checks every operation of `patch` against the files, without writing anything.
    pub(crate) fn build(patch: Patch, base: &Path, ws: &Workspace, shared: &Shared) -> Result<Self, ToolError> {
        let mut plan = Plan { order: Vec::new(), states: BTreeMap::new(), shown: HashMap::new(), changes: Vec::new() };
        for op in patch.ops {
            let ctx = op_context(&op);
            let wrap = |e: ToolError| ToolError::failed(format!("{ctx}: {e}"));
            if let PatchOp::Delete { path: name, .. } = &op
                && let Some((link, target)) = named_link(&plan, base, name, ws).map_err(wrap)?
            {
                shared.ops.require(&[FileOp::Delete], "apply_patch").map_err(wrap)?;
                let shown = ws.display(&link);
                let target = target.display().to_string();
                let note =
                    format!("`{shown}` was a symlink to `{target}`: the link is removed, `{target}` is unchanged");
                plan.touch(&link, &shown);
                plan.states.insert(link, Planned { bytes: None, like: None });
                plan.changes.push(FileChange {
                    kind: ChangeKind::Deleted,
                    path: shown,
                    to: None,
                    diff: DiffText { text: note, added: 0, removed: 0, full_output: None },
                    stages: vec![],
                    other_links: 0,
                });
                continue;
            }
            let path = resolve(base, op.path(), ws).map_err(wrap)?;
            let shown = ws.display(&path);
            let current = plan.current(&path, &shown).map_err(wrap)?;
            match op {
                PatchOp::Add { content, .. } => {
                    let mut needed = vec![FileOp::Create];
                    if current.is_some() {
                        needed.push(FileOp::Change);
                    }
                    shared.ops.require(&needed, "apply_patch").map_err(wrap)?;
                    let old_text = match &current {
                        Some(b) => files::decode_bytes(b.clone(), &shown, ws).map(|l| l.text).unwrap_or_default(),
                        None => String::new(),
                    };
                    let from = if current.is_some() { format!("a/{shown}") } else { "/dev/null".into() };
                    let d =
                        diff::unified_with(&old_text, &content, &from, &format!("b/{shown}"), shared.preview.clone());
                    drop(old_text);
                    plan.touch(&path, &shown);
                    // The patch's content becomes the bytes to write, without a copy.
                    plan.states.insert(path.clone(), Planned { bytes: Some(content.into_bytes()), like: None });
                    plan.changes.push(FileChange {
                        kind: ChangeKind::Added,
                        path: shown,
                        to: None,
                        diff: d,
                        stages: vec![],
                        other_links: on_disk_links(&plan, &path),
                    });
                }
                PatchOp::Delete { .. } => {
                    shared.ops.require(&[FileOp::Delete], "apply_patch").map_err(wrap)?;
                    let Some(bytes) = current else {
                        return Err(wrap(ToolError::failed(format!(
                            "`{shown}` does not exist, so it cannot be deleted"
                        ))));
                    };
                    let old_text = files::decode_bytes(bytes, &shown, ws).map(|l| l.text).unwrap_or_default();
                    let d =
                        diff::unified_with(&old_text, "", &format!("a/{shown}"), "/dev/null", shared.preview.clone());
                    plan.touch(&path, &shown);
                    plan.states.insert(path.clone(), Planned { bytes: None, like: None });
                    plan.changes.push(FileChange {
                        kind: ChangeKind::Deleted,
                        path: shown,
                        to: None,
                        diff: d,
                        stages: vec![],
                        other_links: 0,
                    });
                }
                PatchOp::Update { move_to, hunks, path: name, .. } => {
                    // A moved symlink leaves its target alone: the link's name is what goes.
                    // The destination takes the source's mode and owner, as `mv` keeps them (E12).
                    let like = move_to.as_ref().and_then(|_| std::fs::metadata(&path).ok());
                    let source = match &move_to {
                        Some(_) => named_link(&plan, base, &name, ws).map_err(wrap)?.map(|(link, _)| link),
                        None => None,
                    };
                    // A moved link is named as the link: its target stays where it is.
                    let from_shown = source.as_ref().map_or_else(|| shown.clone(), |link| ws.display(link));
                    let mut needed = vec![FileOp::Change];
                    if move_to.is_some() {
                        needed.extend([FileOp::Create, FileOp::Delete]);
                    }
                    shared.ops.require(&needed, "apply_patch").map_err(wrap)?;
                    let Some(bytes) = current else {
                        return Err(wrap(ToolError::failed(format!(
                            "`{shown}` does not exist; use `*** Add File:` to create a file"
                        ))));
                    };
                    let loaded = files::decode_bytes(bytes, &shown, ws).map_err(wrap)?;
                    let (new_text, stages) = apply_hunks(&loaded.text, &hunks)
                        .map_err(|e| wrap(ToolError::failed(format!("`{shown}`: {e}"))))?;
                    let to = match move_to {
                        Some(dest) => {
                            let to = resolve(base, &dest, ws).map_err(wrap)?;
                            let to_shown = ws.display(&to);
                            if let Ok(m) = std::fs::metadata(&to)
                                && m.is_dir()
                                && !plan.states.contains_key(&to)
                            {
                                return Err(wrap(ToolError::failed(format!("move target `{to_shown}` is a folder"))));
                            }
                            Some((to, to_shown))
                        }
                        None => None,
                    };
                    let d = {
                        // The diff compares LF text; a file without CR is compared as it is (a
                        // copy of a 50 MB file is 50 MB).
                        let new_label = format!("b/{}", to.as_ref().map_or(&shown, |(_, s)| s));
                        let (old_n, new_n) = (lf(&loaded.text), lf(&new_text));
                        diff::unified_with(
                            &old_n,
                            &new_n,
                            &format!("a/{from_shown}"),
                            &new_label,
                            shared.preview.clone(),
                        )
                    };
                    let new_bytes = if loaded.is_plain() {
                        // Plain UTF-8 without BOM: the text is the bytes to write.
                        drop(loaded);
                        new_text.into_bytes()
                    } else {
                        loaded.encode(&new_text, &shown).map_err(wrap)?
                    };
                    match to {
                        Some((to, to_shown)) => {
                            let source = source.unwrap_or_else(|| path.clone());
                            plan.touch(&source, &ws.display(&source));
                            plan.touch(&to, &to_shown);
                            plan.states.insert(source, Planned { bytes: None, like: None });
                            plan.states.insert(to.clone(), Planned { bytes: Some(new_bytes), like });
                            plan.changes.push(FileChange {
                                kind: ChangeKind::Renamed,
                                path: from_shown,
                                to: Some(to_shown),
                                diff: d,
                                stages,
                                other_links: 0,
                            });
                        }
                        None => {
                            let other_links = on_disk_links(&plan, &path);
                            plan.touch(&path, &shown);
                            plan.states.insert(path.clone(), Planned { bytes: Some(new_bytes), like: None });
                            plan.changes.push(FileChange {
                                kind: ChangeKind::Modified,
                                path: shown,
                                to: None,
                                diff: d,
                                stages,
                                other_links,
                            });
                        }
                    }
                }
            }
        }
        Ok(plan)
    }

    /// Writes the plan: all files, or — if one write fails — none (the ones already written are
    /// put back). Records checkpoints and tells the session what it wrote.
    pub(crate) fn commit(&self, session: &Session, shared: &Shared) -> Result<(), ToolError> {
        let mut done: Vec<(PathBuf, Prior)> = Vec::new();
        for path in &self.order {
            let Some(planned) = self.states.get(path) else { continue };
            let shown = self.shown.get(path).cloned().unwrap_or_else(|| path.display().to_string());
            // Plan keys are canonical paths, which contain no symlink, except the links a
            // Delete or a move removes (D1): those are captured as links.
            let is_link = planned.bytes.is_none() && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            let captured = if is_link { Prior::capture_link(path) } else { Prior::capture(path) };
            let result = captured.and_then(|prior| {
                let r = match &planned.bytes {
                    Some(b) => kodik_core::fs::write_atomic_like(path, b, true, planned.like.as_ref()),
                    None => match std::fs::remove_file(path) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                        other => other,
                    },
                };
                r.map(|()| prior)
            });
            match result {
                Ok(prior) => done.push((path.clone(), prior)),
                Err(e) => {
                    for (p, prior) in done.iter().rev() {
                        let _ = prior.restore(p);
                        prior.remove_created_dirs();
                    }
                    return Err(ToolError::failed(format!(
                        "writing `{shown}` failed ({e}); every file of the patch was put back as it was"
                    )));
                }
            }
        }
        let turn = session.message();
        for (path, prior) in done {
            match &self.states.get(&path).and_then(|p| p.bytes.as_ref()) {
                Some(bytes) => session.record_write(&path, FileVersion::of_bytes(bytes)),
                None => session.forget(&path),
            }
            shared.checkpoints.record(turn, &path, prior);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_patch;
    use super::*;

    fn hunks(patch_body: &str) -> Vec<Hunk> {
        let p = parse_patch(&format!("*** Begin Patch\n*** Update File: f\n{patch_body}*** End Patch\n")).unwrap();
        match p.ops.into_iter().next().unwrap() {
            PatchOp::Update { hunks, .. } => hunks,
            _ => unreachable!(),
        }
    }

    #[test]
    fn p1_crlf_file_keeps_crlf_and_missing_final_newline() {
        let (out, _) = apply_hunks("a\r\nb\r\nc", &hunks("@@\n a\n-b\n+B\n+B2\n")).unwrap();
        assert_eq!(out, "a\r\nB\r\nB2\r\nc");
        let (out, _) = apply_hunks("a\nb", &hunks("@@\n a\n-b\n+c\n")).unwrap();
        assert_eq!(out, "a\nc");
    }

    /// Found by `cargo xtask fuzz patch_parser`: appending an empty line to a file without a
    /// final newline. The file's last line becomes the empty line, still unterminated, so the
    /// text ends in the break that now ends `last` — the only way to write that line (E12).
    #[test]
    fn p1_e12_blank_line_appended_to_file_without_final_newline() {
        let (out, _) = apply_hunks("a\r\nlast", &hunks("+\n")).unwrap();
        assert_eq!(out, "a\r\nlast\r\n");
        let (out, _) = apply_hunks("a\nlast", &hunks("@@\n+\n+x\n")).unwrap();
        assert_eq!(out, "a\nlast\n\nx");
        let (out, _) = apply_hunks("a\nlast", &hunks("@@\n+x\n")).unwrap();
        assert_eq!(out, "a\nlast\nx");
    }

    #[test]
    fn p1b_pure_addition_with_context_header_inserts_after_it() {
        let text = "fn a() {}\nfn b() {}\nfn c() {}\n";
        let (out, _) = apply_hunks(text, &hunks("@@ fn b() {}\n+// after b\n")).unwrap();
        assert_eq!(out, "fn a() {}\nfn b() {}\n// after b\nfn c() {}\n");
        let (out, _) = apply_hunks(text, &hunks("@@\n+// at end\n")).unwrap();
        assert_eq!(out, "fn a() {}\nfn b() {}\nfn c() {}\n// at end\n");
    }

    #[test]
    fn p1_ambiguous_context_is_an_error_with_lines() {
        let e = apply_hunks("x\ny\nx\ny\n", &hunks("@@\n x\n-y\n+z\n")).unwrap_err();
        assert!(e.message.contains("line 1, line 3"), "{e}");
    }

    #[test]
    fn p1_header_disambiguates_repeated_context() {
        let text = "class A:\n  def f(self):\n    return 1\nclass B:\n  def f(self):\n    return 1\n";
        let (out, _) =
            apply_hunks(text, &hunks("@@ class B:\n   def f(self):\n-    return 1\n+    return 2\n")).unwrap();
        assert_eq!(out, "class A:\n  def f(self):\n    return 1\nclass B:\n  def f(self):\n    return 2\n");
    }

    #[test]
    fn p1_whitespace_drift_keeps_file_indentation() {
        let text = "def f():\n\tx = 1\n\treturn x\n";
        let (out, stages) = apply_hunks(text, &hunks("@@\n x = 1\n-return x\n+return x + 1\n")).unwrap();
        assert_eq!(stages, vec![Stage::Whitespace]);
        assert_eq!(out, "def f():\n\tx = 1\n\treturn x + 1\n");
    }
}
