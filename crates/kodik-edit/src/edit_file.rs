//! `edit_file` (SPEC section E).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{FileVersion, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::edit::{Edit, EditFileArgs};
use serde_json::json;

use crate::checkpoints::Prior;
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
    let mut current = text.to_string();
    let mut applied = Vec::with_capacity(edits.len());
    let mut spans = Vec::new();
    // (byte, 1-based line there) just after the previous replacement: edits usually go down
    // the file, so counting lines from there keeps 50 edits of a 10 MB file linear.
    let mut anchor = (0usize, 1usize);
    for (i, e) in edits.iter().enumerate() {
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
        current.replace_range(r.start..r.end, &r.text);
        applied.push(AppliedEdit { stage: r.stage, line, similarity: r.similarity });
    }
    Ok((current, applied, spans))
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
}

fn run_blocking(
    args: &EditFileArgs,
    ws: &Workspace,
    cx_session: &kodik_core::Session,
    shared: &Shared,
) -> Result<Done, ToolError> {
    shared.ops.require(&[crate::FileOp::Change], "edit_file")?;
    let path = ws.check_file(&args.path).map_err(|e| crate::path_error(e, "create_file"))?;
    let shown = ws.display(&path);
    let loaded = files::load(&path, &shown, ws)?;
    files::check_read(cx_session, &path, &shown, &loaded.bytes)?;
    let (new_text, applied, spans) = apply_edits_tracked(&loaded.text, &args.edits).map_err(|e| {
        ToolError::failed(format!("`{shown}`: {e} No edit of this call was applied; the file is unchanged."))
    })?;
    if new_text == loaded.text {
        return Ok(Done { path, shown, new_text, applied, diff: diff::unified("", "", "", ""), unchanged: true });
    }
    let encoded;
    let bytes: &[u8] = if loaded.format == kodik_core::text::TextFormat::default() {
        // Plain UTF-8 without BOM: the text is already the bytes to write.
        new_text.as_bytes()
    } else {
        encoded = files::encode_checked(&new_text, &loaded.format, &shown)?;
        &encoded
    };
    let perms = std::fs::metadata(&path).map_err(|e| ToolError::io("reading", &shown, e))?.permissions();
    let prior = Prior { content: Some((loaded.bytes, perms)), created_dirs: Vec::new() };
    files::write_recorded(&path, &shown, bytes, prior, cx_session.message(), &shared.checkpoints)?;
    cx_session.record_write(&path, FileVersion::of_bytes(bytes));
    let d = diff::unified_spans(
        &loaded.text,
        &new_text,
        &spans,
        &format!("a/{shown}"),
        &format!("b/{shown}"),
        kodik_core::PreviewConfig::default(),
    );
    Ok(Done { path, shown, new_text, applied, diff: d, unchanged: false })
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
        if args.edits.is_empty() {
            return Err(ToolError::InvalidInput {
                tool: "edit_file".into(),
                field: Some("edits".into()),
                message: "edits is empty; give at least one {old_string, new_string}".into(),
            });
        }
        Ok(())
    }

    async fn run(&self, args: EditFileArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (ws, session, shared) = (cx.workspace.clone(), Arc::clone(&cx.session), Arc::clone(&self.shared));
        let done = tokio::task::spawn_blocking(move || run_blocking(&args, &ws, &session, &shared))
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
        let diags = files::diagnostics(cx, &done.path, &done.new_text).await;
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
        text.push_str(&files::diagnostics_text(&diags));
        text.push('\n');
        text.push_str(&done.diff.text);
        let stage = done.applied.iter().map(|a| a.stage).max_by_key(|s| *s as u8).unwrap_or(Stage::Exact);
        Ok(ToolOutput::text(text)
            .with_meta(json!({
                "path": done.shown,
                "changed": true,
                "stage": stage,
                "edits": edits_meta,
                "added": done.diff.added,
                "removed": done.diff.removed,
                "diagnostics": diags,
            }))
            .with_full_output(done.diff.full_output))
    }
}
