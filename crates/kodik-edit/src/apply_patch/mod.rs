//! `apply_patch` (SPEC section P): the Codex patch format, applied atomically, with the same
//! matching cascade as `edit_file`; also reachable as a shell heredoc (P2).

mod apply;
mod parse;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{
    Approval, ApprovalRequest, CommandInterceptor, Effect, HookDecision, Resource, Session, ToolCall, ToolContext,
    ToolError, ToolOutput, ToolSpec, TypedTool, Workspace,
};
use kodik_schema::edit::ApplyPatchArgs;
use serde_json::json;

pub use apply::{ChangeKind, FileChange, HunkError, apply_hunks};
pub use parse::{Hunk, HunkLine, ParseError, Patch, PatchOp, parse_patch};

use crate::Shared;

/// Parses, checks and applies `input` with relative paths resolved against `base`.
/// Returns the per-file report; on any failure no file has changed.
pub(crate) fn run_patch(
    input: String,
    base: &Path,
    ws: &Workspace,
    session: &Session,
    shared: &Shared,
) -> Result<(Vec<FileChange>, crate::files::Written), ToolError> {
    let patch = parse_patch(&input).map_err(|e| ToolError::failed(format!("{e}. No file was changed.")))?;
    // The parsed patch holds every line it needs: the text (maybe megabytes) can go.
    drop(input);
    let plan = apply::Plan::build(patch, base, ws, shared)
        .map_err(|e| ToolError::failed(format!("apply_patch failed; no file was changed. {e}")))?;
    plan.commit(session, shared)?;
    let written = plan.written();
    Ok((plan.changes, written))
}

/// The resources a patch touches (G2): every path, move targets included.
pub fn patch_resources(input: &str, base: &Path, ws: &Workspace) -> Vec<Resource> {
    let Ok(patch) = parse::parse_patch_shape(input) else { return Vec::new() };
    let mut out = Vec::new();
    for op in &patch.ops {
        let mut paths = vec![op.path().to_string()];
        if let PatchOp::Update { move_to: Some(m), .. } = op {
            paths.push(m.clone());
        }
        for p in paths {
            let raw = Path::new(&p);
            let full = if raw.is_absolute() { raw.to_path_buf() } else { base.join(raw) };
            let r = ws.resource(full);
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

fn report(changes: &[FileChange], diagnostics: &[(String, crate::files::Checked)]) -> ToolOutput {
    let mut text = format!(
        "Patch applied; {} file{} changed — no need to read them again:",
        changes.len(),
        if changes.len() == 1 { "" } else { "s" }
    );
    for c in changes {
        match &c.to {
            Some(to) => text.push_str(&format!("\n{} {} -> {}", c.kind.letter(), c.path, to)),
            None => text.push_str(&format!("\n{} {}", c.kind.letter(), c.path)),
        }
    }
    for c in changes {
        text.push_str(&crate::files::split_links_note(c.other_links, &c.path));
    }
    // E9: before the diffs, so a long diff cut to a preview never hides them.
    text.push_str(&crate::files::written_diagnostics_text(diagnostics));
    let mut full = None;
    for c in changes {
        if !c.diff.text.is_empty() {
            text.push_str("\n\n");
            text.push_str(&c.diff.text);
        }
        if full.is_none() {
            full = c.diff.full_output.clone();
        }
    }
    let files: Vec<serde_json::Value> = changes
        .iter()
        .map(|c| {
            json!({"kind": c.kind, "path": c.path, "to": c.to, "stages": c.stages,
                   "added": c.diff.added, "removed": c.diff.removed})
        })
        .collect();
    let not_checked: serde_json::Map<String, serde_json::Value> = diagnostics
        .iter()
        .filter_map(|(shown, c)| c.not_checked.as_ref().map(|why| (shown.clone(), json!(why))))
        .collect();
    let diagnostics: serde_json::Map<String, serde_json::Value> = diagnostics
        .iter()
        .filter(|(_, c)| !c.errors.is_empty())
        .map(|(shown, c)| (shown.clone(), json!(crate::files::shown_errors(&c.errors))))
        .collect();
    let mut meta = json!({"files": files, "diagnostics": diagnostics});
    if !not_checked.is_empty() {
        meta["not_checked"] = json!(not_checked);
    }
    ToolOutput::text(text).with_meta(meta).with_full_output(full)
}

/// The `apply_patch` tool (JSON form: one `input` string, P5).
pub struct ApplyPatchTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl ApplyPatchTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { spec: kodik_schema::spec::<ApplyPatchArgs>(), shared }
    }
}

async fn run_in(input: String, base: PathBuf, cx: &ToolContext, shared: Arc<Shared>) -> Result<ToolOutput, ToolError> {
    let (ws, session) = (cx.workspace.clone(), Arc::clone(&cx.session));
    let (changes, written) = tokio::task::spawn_blocking(move || run_patch(input, &base, &ws, &session, &shared))
        .await
        .map_err(|e| ToolError::failed(format!("the patch task failed: {e}")))??;
    let diagnostics = crate::files::written_diagnostics(cx, &written).await;
    Ok(report(&changes, &diagnostics))
}

/// [`ApplyPatchArgs`] borrowed from the call's JSON (the checks before the call).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyPatchArgsRef<'a> {
    input: &'a str,
}

/// The check before approval: the patch must parse.
fn check_patch(input: &str) -> Result<(), ToolError> {
    parse::parse_patch_shape(input).map(|_| ()).map_err(|e| ToolError::InvalidInput {
        tool: "apply_patch".into(),
        field: Some("input".into()),
        message: e.to_string(),
    })
}

impl crate::lean::RawResources for ApplyPatchTool {
    fn raw_resources(&self, args: &serde_json::Value, ws: &Workspace) -> Vec<Resource> {
        crate::lean::borrowed::<ApplyPatchArgsRef<'_>>(args)
            .map(|a| patch_resources(a.input, ws.primary_root(), ws))
            .unwrap_or_default()
    }
}

#[async_trait]
impl TypedTool for ApplyPatchTool {
    type Args = ApplyPatchArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn resources(&self, args: &ApplyPatchArgs, ws: &Workspace) -> Vec<Resource> {
        patch_resources(&args.input, ws.primary_root(), ws)
    }

    fn validate_args(&self, args: &serde_json::Value) -> Result<(), ToolError> {
        match crate::lean::borrowed::<ApplyPatchArgsRef<'_>>(args) {
            Some(a) => check_patch(a.input),
            None => check_patch(&kodik_core::parse_args::<ApplyPatchArgs>("apply_patch", args)?.input),
        }
    }

    async fn run(&self, args: ApplyPatchArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run_in(args.input, cx.workspace.primary_root().to_path_buf(), cx, Arc::clone(&self.shared)).await
    }
}

/// An `apply_patch` heredoc found in a shell command (P2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The folder of a leading `cd DIR &&`, as written.
    pub cd: Option<String>,
    /// The patch text between the heredoc lines.
    pub input: String,
}

impl Invocation {
    /// The parsed patch.
    pub fn patch(&self) -> Result<Patch, ParseError> {
        parse_patch(&self.input)
    }
}

/// Recognises `apply_patch <<'EOF' … EOF` (also `<<EOF`, `<<"EOF"`, `applypatch`, and a leading
/// `cd DIR &&`). `None` for any other command, which then runs as a normal process.
pub fn parse_invocation(command: &str) -> Option<Invocation> {
    let command = command.trim_start();
    let (first, rest) = command.split_once('\n')?;
    let mut head = first.trim();
    let mut cd = None;
    if let Some(after_cd) = head.strip_prefix("cd ") {
        let (dir, tail) = after_cd.split_once("&&")?;
        let dir = dir.trim().trim_matches(|c| c == '\'' || c == '"');
        if dir.is_empty() {
            return None;
        }
        cd = Some(dir.to_string());
        head = tail.trim();
    }
    let tool = head.split_whitespace().next()?;
    if tool != "apply_patch" && tool != "applypatch" {
        return None;
    }
    let delim = parse::heredoc_delimiter(head)?;
    let lines: Vec<&str> = rest.split('\n').collect();
    let end = lines.iter().position(|l| l.trim_end_matches('\r').trim() == delim)?;
    if lines[end + 1..].iter().any(|l| !l.trim().is_empty()) {
        // Something runs after the heredoc; leave the whole command to the shell.
        return None;
    }
    Some(Invocation { cd, input: lines[..end].join("\n") })
}

/// Routes `apply_patch` heredocs from the shell through the same engine, hooks, approval and
/// checkpoints as a direct `apply_patch` call (P2).
pub struct PatchInterceptor {
    shared: Arc<Shared>,
}

impl PatchInterceptor {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[async_trait]
impl CommandInterceptor for PatchInterceptor {
    async fn intercept(&self, command: &str, workdir: &Path, cx: &ToolContext) -> Option<ToolOutput> {
        let inv = parse_invocation(command)?;
        let base = match &inv.cd {
            Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
            Some(d) => workdir.join(d),
            None => workdir.to_path_buf(),
        };
        let call = ToolCall::new(cx.call_id.clone(), "apply_patch", json!({"input": inv.input}));
        if let HookDecision::Block(reason) = cx.hooks.before_call(&call).await {
            let out = ToolError::Denied(format!("blocked by a hook: {reason}")).into_output();
            cx.hooks.after_call(&call, &out).await;
            return Some(out);
        }
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            effect: Effect::MutatesFiles,
            args: call.args.clone(),
            server: None,
        };
        let approval = tokio::select! {
            a = cx.approver.approve(&request) => a,
            () = cx.cancel.cancelled() => return Some(ToolError::Cancelled.into_output()),
        };
        if let Approval::Denied(reason) = approval {
            let out = ToolError::Denied(reason).into_output();
            cx.hooks.after_call(&call, &out).await;
            return Some(out);
        }
        let out = match run_in(inv.input, base, cx, Arc::clone(&self.shared)).await {
            Ok(o) => o,
            Err(e) => e.into_output(),
        };
        cx.hooks.after_call(&call, &out).await;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2_parse_invocation_recognises_heredoc_forms() {
        let body = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
        for cmd in [
            format!("apply_patch <<'EOF'\n{body}\nEOF\n"),
            format!("apply_patch <<EOF\n{body}\nEOF"),
            format!("apply_patch <<\"PATCH\"\n{body}\nPATCH\n"),
        ] {
            let inv = parse_invocation(&cmd).unwrap_or_else(|| panic!("{cmd}"));
            assert_eq!(inv.input, body);
            assert_eq!(inv.cd, None);
            assert!(inv.patch().is_ok());
        }
        let inv = parse_invocation(&format!("cd sub/dir && apply_patch <<'EOF'\n{body}\nEOF\n")).unwrap();
        assert_eq!(inv.cd.as_deref(), Some("sub/dir"));
        assert_eq!(parse_invocation("ls -la"), None);
        assert_eq!(parse_invocation(&format!("cat <<'EOF'\n{body}\nEOF\n")), None);
        assert_eq!(parse_invocation(&format!("apply_patch <<'EOF'\n{body}\nEOF\nrm -rf x\n")), None);
    }
}
