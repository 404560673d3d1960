//! `edit_file` (SPEC section E).

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{FileVersion, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::edit::{Edit, EditFileArgs};
use serde_json::json;

use crate::checkpoints::Prior;
use crate::edited::{Edited, Occurrences};
use crate::matcher::{Budget, MatchError, Stage, replace_unique};
use crate::{Shared, diff, files};

/// Where one edit of a call landed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AppliedEdit {
    /// The stage of the cascade that placed it.
    pub stage: Stage,
    /// 1-based line where the replaced text started.
    pub line: usize,
    /// For fuzzy matches: how similar the file's lines were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
}

/// Why an edit of a call failed (E4: the position is 1-based).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("edit {position} of {total} failed: {source}")]
pub struct EditFailure {
    /// 1-based position of the failing edit.
    pub position: usize,
    /// How many edits the call had.
    pub total: usize,
    /// Why it failed.
    pub source: MatchError,
}

/// Applies `edits` in order to `text` (E3), each against what the previous one left; all or
/// nothing (E4). This is the whole matching engine of `edit_file`, with no I/O.
pub fn apply_edits(text: &str, edits: &[Edit]) -> Result<(String, Vec<AppliedEdit>), EditFailure> {
    apply_edits_tracked(text, edits).map(|(t, a, _)| (t, a))
}

/// [`apply_edits`], also returning where the text changed (for a diff whose cost follows the
/// size of the change, E6).
pub fn apply_edits_tracked(
    text: &str,
    edits: &[Edit],
) -> Result<(String, Vec<AppliedEdit>, Vec<diff::Span>), EditFailure> {
    apply_edits_in(text, edits, String::new())
}

/// [`apply_edits_tracked`] building the new text in `spare`'s memory when it is large enough.
fn apply_edits_in(
    text: &str,
    edits: &[Edit],
    spare: String,
) -> Result<(String, Vec<AppliedEdit>, Vec<diff::Span>), EditFailure> {
    let mut spare = Some(spare);
    let mut applied = Vec::with_capacity(edits.len());
    // (byte, 1-based line there) just after the previous replacement: edits usually go down
    // the file, so counting lines from there keeps 50 edits of a 10 MB file linear.
    let mut anchor = (0usize, 1usize);
    // Leading edits that match exactly once go through the cheap path; the rest (and any
    // edit it cannot decide) through the full cascade on the materialised text.
    let (mut current, mut spans) = match leading_exact(text, edits, &mut applied, &mut anchor, &mut spare) {
        Some((t, s)) => (Cow::Owned(t), s),
        None => {
            applied.clear();
            anchor = (0, 1);
            (Cow::Borrowed(text), Vec::new())
        }
    };
    for (i, e) in edits.iter().enumerate().skip(applied.len()) {
        let mut budget = Budget::default();
        let r = replace_unique(&current, &e.old_string, &e.new_string, &mut budget).map_err(|source| EditFailure {
            position: i + 1,
            total: edits.len(),
            source,
        })?;
        let from = if r.start >= anchor.0 { anchor } else { (0, 1) };
        let line = from.1 + crate::matcher::count_newlines(&current.as_bytes()[from.0..r.start]);
        anchor = (r.start + r.text.len(), line + crate::matcher::count_newlines(r.text.as_bytes()));
        diff::track(&mut spans, r.start, r.end, r.text.len());
        current = match current {
            // A whole-text replacement is its own result; otherwise build the text once
            // rather than copying the original and then moving its tail.
            Cow::Borrowed(t) if r.start == 0 && r.end == t.len() => Cow::Owned(r.text),
            Cow::Borrowed(t) => {
                let mut s = reuse(spare.take(), t.len() - (r.end - r.start) + r.text.len());
                s.push_str(&t[..r.start]);
                s.push_str(&r.text);
                s.push_str(&t[r.end..]);
                Cow::Owned(s)
            }
            Cow::Owned(mut s) => {
                s.replace_range(r.start..r.end, &r.text);
                Cow::Owned(s)
            }
        };
        applied.push(AppliedEdit { stage: r.stage, line, similarity: r.similarity });
    }
    Ok((current.into_owned(), applied, spans))
}

/// An empty string with room for `len` bytes: `spare`'s memory when it has that room.
pub(crate) fn reuse(spare: Option<String>, len: usize) -> String {
    match spare {
        Some(mut s) if s.capacity() >= len => {
            s.clear();
            s
        }
        _ => String::with_capacity(len),
    }
}

/// Whether replacing all of `text` by `new` is what the exact stage gives with no further
/// work: the texts differ and the file's line breaks are already those of `new`.
fn whole_file_fast_path_applies(text: &str, new: &str) -> bool {
    new != text
        && (!new.contains('\n') || (crate::matcher::ending_for(text, 0, text.len()) == "\n" && !new.contains("\r\n")))
}

/// What the exact stage gives when the one place is the whole non-empty `text`: `new` itself.
fn whole_file_result(text: &str, new: String) -> (String, Vec<AppliedEdit>, Vec<diff::Span>) {
    let mut spans = Vec::new();
    diff::track(&mut spans, 0, text.len(), new.len());
    (new, vec![AppliedEdit { stage: Stage::Exact, line: 1, similarity: None }], spans)
}

/// [`apply_edits_tracked`] for edits the caller owns: a whole-file replacement then becomes
/// the new text itself instead of a 10 MB copy of it (same result, checked in the tests).
fn apply_edits_owned(
    text: &str,
    mut edits: Vec<Edit>,
    spare: String,
) -> Result<(String, Vec<AppliedEdit>, Vec<diff::Span>), EditFailure> {
    if let [e] = edits.as_slice()
        && !text.is_empty()
        && e.old_string == text
        && whole_file_fast_path_applies(text, &e.new_string)
        && let Some(e) = edits.pop()
    {
        return Ok(whole_file_result(text, e.new_string));
    }
    apply_edits_in(text, &edits, spare)
}

/// Texts from this size on place even a single exact edit with [`leading_exact`].
const ONE_EDIT_SCAN_MIN: usize = crate::files::PARALLEL_MIN;

/// The fast path of [`apply_edits_tracked`] (see [`crate::edited`]): applies the leading edits
/// whose `old_string` provably matches exactly once in the text the previous ones left.
/// `None` when it applied none; the caller then starts from the original text.
fn leading_exact(
    text: &str,
    edits: &[Edit],
    applied: &mut Vec<AppliedEdit>,
    anchor: &mut (usize, usize),
    spare: &mut Option<String>,
) -> Option<(String, Vec<diff::Span>)> {
    // One edit of a small text goes straight to the cascade. In a large one, the cascade's
    // substring search picks its candidates by byte frequencies of text in general, which in
    // source code (`let value_1 = …` on every line) stop it on every line; the scan's anchor
    // is chosen by a sample of this text, so one edit takes it too.
    if edits.len() < 2 && text.len() < ONE_EDIT_SCAN_MIN {
        return None;
    }
    let olds: Vec<&str> = edits.iter().map(|e| e.old_string.as_str()).collect();
    let occ = Occurrences::scan(text, &olds)?;
    let mut ed = Edited::new(text);
    for (i, e) in edits.iter().enumerate() {
        if e.old_string == e.new_string {
            break;
        }
        let Some(r) = ed.unique_exact(&occ, i, &e.old_string) else { break };
        let new = if e.new_string.contains('\n') {
            crate::matcher::with_endings(&e.new_string, ed.ending_for(r, &e.old_string))
        } else {
            e.new_string.clone()
        };
        let from = if r >= anchor.0 { *anchor } else { (0, 1) };
        let line = from.1 + ed.count_newlines(from.0..r);
        if !ed.replace(r, r + e.old_string.len(), &new) {
            break;
        }
        *anchor = (r + new.len(), line + crate::matcher::count_newlines(new.as_bytes()));
        applied.push(AppliedEdit { stage: Stage::Exact, line, similarity: None });
    }
    if applied.is_empty() {
        return None;
    }
    ed.finish(spare.take())
}

/// [`EditFileArgs`] with its strings borrowed from the call's JSON (the check before approval).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EditFileArgsRef<'a> {
    #[serde(borrow)]
    path: &'a str,
    #[serde(borrow)]
    edits: Vec<EditRef<'a>>,
}

/// [`Edit`], borrowed.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EditRef<'a> {
    #[serde(borrow, rename = "old_string")]
    _old_string: &'a str,
    #[serde(borrow, rename = "new_string")]
    _new_string: &'a str,
}

/// The `edit_file` tool.
pub struct EditFileTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl EditFileTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { spec: kodik_schema::spec::<EditFileArgs>(), shared }
    }
}

struct Done {
    path: PathBuf,
    shown: String,
    new_text: String,
    applied: Vec<AppliedEdit>,
    diff: diff::DiffText,
    unchanged: bool,
    /// Other hard links of the replaced file, which keep its old content (E12).
    other_links: u64,
}

fn run_blocking(
    args: EditFileArgs,
    ws: &Workspace,
    cx_session: &kodik_core::Session,
    shared: &Shared,
) -> Result<Done, ToolError> {
    shared.ops.require(&[crate::FileOp::Change], "edit_file")?;
    let path = ws.check_file(&args.path).map_err(|e| crate::path_error(e, "create_file"))?;
    let shown = ws.display(&path);
    let mut edits = match run_whole_file(path.clone(), shown.clone(), args.edits, cx_session, shared) {
        Ok(done) => return done,
        Err(edits) => edits,
    };
    // A whole-file replacement already carries the file's text: compare instead of reading a
    // second copy of it (a 50 MB file is then held once less).
    let mut whole = None;
    if let [e] = edits.as_mut_slice() {
        match files::load_if_equal(&path, std::mem::take(&mut e.old_string)) {
            Ok(loaded) => whole = Some(loaded),
            Err(old) => e.old_string = old,
        }
    }
    let is_whole = whole.is_some();
    let loaded = match whole {
        Some(l) => l,
        None => files::load(&path, &shown, ws)?,
    };
    let apply = || match edits.pop() {
        Some(e) if is_whole && whole_file_fast_path_applies(&loaded.text, &e.new_string) => {
            Ok(whole_file_result(&loaded.text, e.new_string))
        }
        Some(mut e) => {
            if is_whole {
                // Rare (the new text changes line endings, or equals the old): the cascade
                // decides, on its own copy of the old text.
                e.old_string = loaded.text.clone();
            }
            edits.push(e);
            apply_edits_owned(&loaded.text, edits, shared.take_spare())
        }
        None => apply_edits_owned(&loaded.text, edits, shared.take_spare()),
    };
    // The version check (E2) hashes the whole file; on a large one it runs while the edits
    // are placed, and its refusal still comes first.
    let check = || files::check_read(cx_session, &path, &shown, loaded.bytes());
    let (result, checked) = files::alongside_if(loaded.text.len() >= files::PARALLEL_MIN, apply, check);
    checked.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
    let (new_text, applied, spans) = result.map_err(|e| {
        ToolError::failed(format!("`{shown}`: {e} No edit of this call was applied; the file is unchanged."))
    })?;
    if new_text == loaded.text {
        return Ok(Done {
            path,
            shown,
            new_text,
            applied,
            diff: diff::unified("", "", "", ""),
            unchanged: true,
            other_links: 0,
        });
    }
    let encoded;
    let bytes: &[u8] = if loaded.is_plain() {
        // Plain UTF-8 without BOM: the text is already the bytes to write.
        new_text.as_bytes()
    } else {
        encoded = loaded.encode(&new_text, &shown)?;
        &encoded
    };
    let meta = std::fs::metadata(&path).map_err(|e| ToolError::io("reading", &shown, e))?;
    let (perms, other_links) = (meta.permissions(), kodik_core::fs::other_links(&path));
    // The diff and the new version's hash need only the texts, so they are made while the write
    // waits for the disk.
    let (written, side) = files::alongside(
        || kodik_core::fs::write_atomic(&path, bytes, true),
        || {
            let version = FileVersion::of_bytes(bytes);
            let diffed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                diff::unified_spans(
                    &loaded.text,
                    &new_text,
                    &spans,
                    &format!("a/{shown}"),
                    &format!("b/{shown}"),
                    shared.preview.clone(),
                )
            }));
            (version, diffed)
        },
    );
    written.map_err(|e| ToolError::io("writing", &shown, e))?;
    let (version, diffed) = side.unwrap_or_else(|panic| (FileVersion::of_bytes(bytes), Err(panic)));
    let prior = Prior::file(loaded.into_bytes(), perms);
    shared.checkpoints.record(cx_session.message(), &path, prior);
    cx_session.record_write(&path, version);
    let d = diffed.map_err(|_| {
        ToolError::failed(format!(
            "`{shown}`: the edits were applied and saved, but building the diff failed (a bug in kodik-edit); \
             read the file to see the result"
        ))
    })?;
    Ok(Done { path, shown, new_text, applied, diff: d, unchanged: false, other_links })
}

/// The common whole-file replacement (one edit whose `old_string` is the whole plain UTF-8 file
/// and whose `new_string` keeps its line breaks), with the diff started first: it needs only the
/// two strings the call carries, so it is built while the file is compared, checked (E2) and
/// written. The file is never read into memory: the call's `old_string` is its text (and the
/// checkpoint), `new_string` the new text. `Err(edits)` (nothing done, nothing left behind)
/// when the case does not apply.
fn run_whole_file(
    path: PathBuf,
    shown: String,
    mut edits: Vec<Edit>,
    session: &kodik_core::Session,
    shared: &Shared,
) -> Result<Result<Done, ToolError>, Vec<Edit>> {
    let applies = match edits.as_slice() {
        [e] => std::fs::metadata(&path).is_ok_and(|m| m.len() == e.old_string.len() as u64),
        _ => false,
    };
    if !applies {
        return Err(edits);
    }
    let Some(e) = edits.pop() else { return Err(edits) };
    let (old, new) = (&e.old_string, &e.new_string);
    let mut spans = Vec::new();
    diff::track(&mut spans, 0, old.len(), new.len());
    let build_diff =
        || diff::unified_spans(old, new, &spans, &format!("a/{shown}"), &format!("b/{shown}"), shared.preview.clone());
    enum Outcome {
        NotThisCase,
        Failed(ToolError),
        Written(std::fs::Permissions, u64, FileVersion, std::thread::Result<diff::DiffText>),
    }
    let outcome = std::thread::scope(|scope| {
        let side = std::thread::Builder::new().name("kodik-edit-side".into()).spawn_scoped(scope, build_diff).ok();
        // The new version's hash needs only the new text either: a third thread, so that no core
        // idles while the write waits for the disk.
        let hashing = hash_beside(scope, new);
        // The E2 check's hash of the old text, beside the comparison of the file with it.
        let hashing_old = hash_beside(scope, old);
        let finish = |side: Option<std::thread::ScopedJoinHandle<'_, diff::DiffText>>| match side {
            Some(h) => h.join(),
            None => std::panic::catch_unwind(std::panic::AssertUnwindSafe(build_diff)),
        };
        // A diff built for nothing: its saved full output goes too.
        let discard = |side| {
            if let Ok(d) = finish(side)
                && let Some(full) = d.full_output
            {
                let _ = std::fs::remove_file(full);
            }
        };
        // One pass over the file and the old text; a `\r` in it is rare and gets the full check.
        let fast = match files::file_equals_plain(&path, old) {
            None => false,
            Some(true) => whole_file_fast_path_applies(old, new),
            // Without `\r` the file's line break is `\n`, so this is what
            // [`whole_file_fast_path_applies`] decides.
            Some(false) => new != old && (memchr::memchr(b'\r', new.as_bytes()).is_none() || !new.contains("\r\n")),
        };
        if !fast {
            discard(side);
            return Outcome::NotThisCase;
        }
        let old_version =
            || hashing_old.and_then(|h| h.join().ok()).unwrap_or_else(|| FileVersion::of_bytes(old.as_bytes()));
        let prepared = files::check_read_version(session, &path, &shown, old_version)
            .and_then(|()| std::fs::metadata(&path).map_err(|e| ToolError::io("reading", &shown, e)));
        let (perms, other_links) = match prepared {
            Ok(m) => (m.permissions(), kodik_core::fs::other_links(&path)),
            Err(e) => {
                discard(side);
                return Outcome::Failed(e);
            }
        };
        match kodik_core::fs::write_atomic(&path, new.as_bytes(), true) {
            Ok(()) => {
                let version =
                    hashing.and_then(|h| h.join().ok()).unwrap_or_else(|| FileVersion::of_bytes(new.as_bytes()));
                Outcome::Written(perms, other_links, version, finish(side))
            }
            Err(err) => {
                discard(side);
                Outcome::Failed(ToolError::io("writing", &shown, err))
            }
        }
    });
    let (perms, other_links, version, diffed) = match outcome {
        Outcome::NotThisCase => return Err(vec![e]),
        Outcome::Failed(err) => return Ok(Err(err)),
        Outcome::Written(perms, links, version, diffed) => (perms, links, version, diffed),
    };
    let Edit { old_string, new_string, .. } = e;
    let prior = Prior::file(old_string.into_bytes(), perms);
    shared.checkpoints.record(session.message(), &path, prior);
    session.record_write(&path, version);
    let applied = vec![AppliedEdit { stage: Stage::Exact, line: 1, similarity: None }];
    Ok(match diffed {
        Ok(diff) => Ok(Done { path, shown, new_text: new_string, applied, diff, unchanged: false, other_links }),
        Err(_) => Err(ToolError::failed(format!(
            "`{shown}`: the edits were applied and saved, but building the diff failed (a bug in kodik-edit); \
             read the file to see the result"
        ))),
    })
}

/// The one rule the schema cannot state, shared by the full and the borrowed argument check.
/// Hashes `text` on a thread of its own in `scope` when it is large enough to be worth one
/// (`None`: the caller hashes it where it is).
fn hash_beside<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    text: &'env str,
) -> Option<std::thread::ScopedJoinHandle<'scope, FileVersion>> {
    if text.len() < files::PARALLEL_MIN {
        return None;
    }
    std::thread::Builder::new()
        .name("kodik-edit-hash".into())
        .spawn_scoped(scope, move || FileVersion::of_bytes(text.as_bytes()))
        .ok()
}

fn check_edit_count(edits: usize) -> Result<(), ToolError> {
    if edits == 0 {
        return Err(ToolError::InvalidInput {
            tool: "edit_file".into(),
            field: Some("edits".into()),
            message: "edits is empty; give at least one {old_string, new_string}".into(),
        });
    }
    Ok(())
}

impl crate::lean::RawResources for EditFileTool {
    fn raw_resources(&self, args: &serde_json::Value, ws: &Workspace) -> Vec<Resource> {
        crate::lean::borrowed::<EditFileArgsRef<'_>>(args).map(|a| vec![ws.resource(a.path)]).unwrap_or_default()
    }
}

#[async_trait]
impl TypedTool for EditFileTool {
    type Args = EditFileArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn resources(&self, args: &EditFileArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&args.path)]
    }

    fn check(&self, args: &EditFileArgs) -> Result<(), ToolError> {
        check_edit_count(args.edits.len())
    }

    fn validate_args(&self, args: &serde_json::Value) -> Result<(), ToolError> {
        // A whole-file edit carries megabytes; checking its shape by borrowing avoids a copy.
        // Anything the borrowed form refuses goes through the normal parse for its exact error.
        match <EditFileArgsRef<'_> as serde::Deserialize>::deserialize(args) {
            Ok(a) => check_edit_count(a.edits.len()),
            Err(_) => self.check(&kodik_core::parse_args::<EditFileArgs>("edit_file", args)?),
        }
    }

    async fn run(&self, args: EditFileArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (ws, session, shared) = (cx.workspace.clone(), Arc::clone(&cx.session), Arc::clone(&self.shared));
        let done = tokio::task::spawn_blocking(move || run_blocking(args, &ws, &session, &shared))
            .await
            .map_err(|e| ToolError::failed(format!("the edit task failed: {e}")))??;
        let edits_meta = serde_json::to_value(&done.applied).unwrap_or_default();
        if done.unchanged {
            return Ok(ToolOutput::text(format!(
                "`{}`: the edits cancel out, so the content is unchanged; nothing was written.",
                done.shown
            ))
            .with_meta(json!({"path": done.shown, "edits": edits_meta, "changed": false})));
        }
        let checked = files::diagnostics(cx, &done.path, &done.new_text).await;
        self.shared.keep_spare(done.new_text);
        let n = done.applied.len();
        let mut text = format!(
            "Applied {n} edit{} to `{}` (+{} -{} lines); the file is saved — no need to read it again.",
            if n == 1 { "" } else { "s" },
            done.shown,
            done.diff.added,
            done.diff.removed
        );
        for (i, a) in done.applied.iter().enumerate() {
            if a.stage != Stage::Exact && a.stage != Stage::LineEndings {
                let how = match a.stage {
                    Stage::Typography => "ignoring typographic quotes, dashes and spaces".to_string(),
                    Stage::Whitespace => "ignoring indentation and whitespace".to_string(),
                    _ => format!("approximately ({:.0}% similar)", a.similarity.unwrap_or(0.0) * 100.0),
                };
                text.push_str(&format!("\nEdit {} matched {how} at line {}; check the diff.", i + 1, a.line));
            }
        }
        text.push_str(&files::split_links_note(done.other_links, &done.shown));
        text.push_str(&files::diagnostics_text(&checked));
        text.push('\n');
        text.push_str(&done.diff.text);
        let stage = done.applied.iter().map(|a| a.stage).max_by_key(|s| *s as u8).unwrap_or(Stage::Exact);
        let mut meta = json!({
            "path": done.shown,
            "changed": true,
            "stage": stage,
            "edits": edits_meta,
            "added": done.diff.added,
            "removed": done.diff.removed,
            "diagnostics": files::shown_errors(&checked.errors),
        });
        if let Some(why) = &checked.not_checked {
            meta["not_checked"] = json!(why);
        }
        Ok(ToolOutput::text(text).with_meta(meta).with_full_output(done.diff.full_output))
    }
}

#[cfg(test)]
mod tests {
    use kodik_core::{Tool, ToolError, TypedTool, parse_args};
    use serde_json::json;

    use super::*;

    #[test]
    fn e1_borrowed_check_accepts_and_refuses_exactly_like_the_full_parse() {
        let tool = EditFileTool::new(Arc::new(Shared::default()));
        let full = |v: &serde_json::Value| -> Result<(), ToolError> {
            tool.check(&parse_args::<EditFileArgs>("edit_file", v)?)
        };
        let cases = [
            json!({"path": "a.txt", "edits": [{"old_string": "a", "new_string": "b"}]}),
            json!({"path": "a.txt", "edits": [{"old_string": "a\n\"q\"", "new_string": ""}]}),
            json!({"path": "a.txt", "edits": []}),
            json!({"path": "a.txt"}),
            json!({"path": 3, "edits": [{"old_string": "a", "new_string": "b"}]}),
            json!({"path": "a.txt", "edits": [{"old_string": "a"}]}),
            json!({"path": "a.txt", "edits": [{"old_string": "a", "new_string": "b", "extra": 1}]}),
            json!({"path": "a.txt", "edits": {"old_string": "a", "new_string": "b"}}),
            json!({"path": "a.txt", "edits": [], "mode": "x"}),
            json!(null),
            json!("text"),
        ];
        for v in &cases {
            let got = Tool::validate(&tool, v).map_err(|e| e.to_string());
            assert_eq!(got, full(v).map_err(|e| e.to_string()), "{v}");
        }
        assert!(Tool::validate(&tool, &cases[0]).is_ok());
        assert!(Tool::validate(&tool, &cases[2]).is_err());
    }
}

#[cfg(test)]
mod whole_file_tests {
    use super::*;

    #[test]
    fn e6_whole_file_replacement_shortcut_equals_the_cascade() {
        let edit = |o: &str, n: &str| Edit { old_string: o.into(), new_string: n.into() };
        for (text, new) in [
            ("a\nb\n", "x\ny\n"),
            ("a\nb", "x"),
            ("a\r\nb\r\n", "x\ny\n"),
            ("a\r\nb\r\n", "x y"),
            ("a\nb\n", "x\r\ny\r\n"),
            ("a\nb\n", "a\nb\n"),
            ("one line", "two\nlines"),
            ("", "x"),
        ] {
            let edits = vec![edit(text, new)];
            assert_eq!(
                apply_edits_owned(text, edits.clone(), String::new()),
                apply_edits_tracked(text, &edits),
                "{text:?} -> {new:?}"
            );
        }
    }
}
