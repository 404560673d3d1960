//! `create_file` (C1) and `delete_file` (D1).

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{FileVersion, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::edit::{CreateFileArgs, DeleteFileArgs};
use serde_json::json;

use crate::checkpoints::Prior;
use crate::{FileOp, Shared, files};

/// The `create_file` tool.
pub struct CreateFileTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl CreateFileTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { spec: kodik_schema::spec::<CreateFileArgs>(), shared }
    }
}

fn create_blocking(
    args: &CreateFileArgs,
    ws: &Workspace,
    session: &kodik_core::Session,
    shared: &Shared,
) -> Result<(ToolOutput, std::path::PathBuf, String), ToolError> {
    shared.ops.require(&[FileOp::Create], "create_file")?;
    let path = ws.check(&args.path)?;
    let shown = ws.display(&path);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => {
            return Err(ToolError::failed(format!("`{shown}` is a folder; give the path of the new file inside it")));
        }
        Ok(m) if m.is_symlink() && ws.dangling_target(&path).is_some() => {
            return Err(ws.not_found(&path).into());
        }
        Ok(m) if m.len() == 0 => {
            return Err(ToolError::failed(format!(
                "`{shown}` already exists (empty) and create_file never overwrites; give it its content with \
                 edit_file: old_string \"\" and the content as new_string (read it first)"
            )));
        }
        Ok(_) => {
            return Err(ToolError::failed(format!(
                "`{shown}` already exists and create_file never overwrites; change it with edit_file instead \
                 (read it first)"
            )));
        }
        Err(_) => {}
    }
    if let Some(parent) = path.parent()
        && parent.is_file()
    {
        return Err(ToolError::failed(format!(
            "cannot create `{shown}`: `{}` is a file, not a folder",
            ws.display(parent)
        )));
    }
    let prior = Prior::capture(&path).map_err(|e| ToolError::io("checking", &shown, e))?;
    let bytes = args.content.as_bytes();
    files::write_recorded(&path, &shown, bytes, prior, session.message(), &shared.checkpoints)?;
    session.record_write(&path, FileVersion::of_bytes(bytes));
    let lines = if args.content.is_empty() { 0 } else { args.content.lines().count() };
    let out = ToolOutput::text(format!("Created `{shown}` ({lines} lines, {} bytes).", bytes.len()))
        .with_meta(json!({"path": shown, "operation": "create", "bytes": bytes.len(), "lines": lines}));
    Ok((out, path, shown))
}

/// [`CreateFileArgs`] with its strings borrowed from the call's JSON (the checks before the call).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateFileArgsRef<'a> {
    path: &'a str,
    #[serde(rename = "content")]
    _content: &'a str,
}

impl crate::lean::RawResources for CreateFileTool {
    fn raw_resources(&self, args: &serde_json::Value, ws: &Workspace) -> Vec<Resource> {
        crate::lean::borrowed::<CreateFileArgsRef<'_>>(args).map(|a| vec![ws.resource(a.path)]).unwrap_or_default()
    }
}

#[async_trait]
impl TypedTool for CreateFileTool {
    type Args = CreateFileArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn resources(&self, args: &CreateFileArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&args.path)]
    }

    fn validate_args(&self, args: &serde_json::Value) -> Result<(), ToolError> {
        // The content may be megabytes: check its shape by borrowing. Whatever the borrowed form
        // refuses goes through the normal parse for its exact error.
        match crate::lean::borrowed::<CreateFileArgsRef<'_>>(args) {
            Some(_) => Ok(()),
            None => kodik_core::parse_args::<CreateFileArgs>("create_file", args).map(|_| ()),
        }
    }

    async fn run(&self, args: CreateFileArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (ws, session, shared) = (cx.workspace.clone(), Arc::clone(&cx.session), Arc::clone(&self.shared));
        let (mut out, path, shown) =
            tokio::task::spawn_blocking(move || create_blocking(&args, &ws, &session, &shared))
                .await
                .map_err(|e| ToolError::failed(format!("the create task failed: {e}")))??;
        // E9: the new file's errors, as edit_file reports them.
        let checked = files::written_diagnostics(cx, &[(path, shown)]).await.pop().map(|(_, c)| c).unwrap_or_default();
        if let Some(kodik_core::Content::Text { text }) = out.content.first_mut() {
            text.push_str(&files::diagnostics_text(&checked));
        }
        out.meta["diagnostics"] = json!(files::shown_errors(&checked.errors));
        if let Some(why) = &checked.not_checked {
            out.meta["not_checked"] = json!(why);
        }
        Ok(out)
    }
}

/// The `delete_file` tool.
pub struct DeleteFileTool {
    spec: ToolSpec,
    shared: Arc<Shared>,
}

impl DeleteFileTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { spec: kodik_schema::spec::<DeleteFileArgs>(), shared }
    }
}

fn delete_blocking(
    args: &DeleteFileArgs,
    ws: &Workspace,
    session: &kodik_core::Session,
    shared: &Shared,
) -> Result<ToolOutput, ToolError> {
    shared.ops.require(&[FileOp::Delete], "delete_file")?;
    if let Some((link, target)) = files::named_symlink(ws, std::path::Path::new(&args.path))? {
        let shown = ws.display(&link);
        let prior = Prior::capture_link(&link).map_err(|e| ToolError::io("reading", &shown, e))?;
        std::fs::remove_file(&link).map_err(|e| ToolError::io("deleting", &shown, e))?;
        shared.checkpoints.record(session.message(), &link, prior);
        let target = target.display().to_string();
        return Ok(ToolOutput::text(format!(
            "Deleted the symlink `{shown}`; the file it pointed to (`{target}`) is unchanged."
        ))
        .with_meta(json!({"path": shown, "operation": "delete", "symlink_to": target})));
    }
    let path = ws.check_file(&args.path).map_err(|e| crate::path_error(e, "delete_file"))?;
    let shown = ws.display(&path);
    let prior = Prior::capture(&path).map_err(|e| ToolError::io("reading", &shown, e))?;
    std::fs::remove_file(&path).map_err(|e| ToolError::io("deleting", &shown, e))?;
    shared.checkpoints.record(session.message(), &path, prior);
    session.forget(&path);
    Ok(ToolOutput::text(format!("Deleted `{shown}`.")).with_meta(json!({"path": shown, "operation": "delete"})))
}

#[async_trait]
impl TypedTool for DeleteFileTool {
    type Args = DeleteFileArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn resources(&self, args: &DeleteFileArgs, ws: &Workspace) -> Vec<Resource> {
        vec![ws.resource(&args.path)]
    }

    async fn run(&self, args: DeleteFileArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (ws, session, shared) = (cx.workspace.clone(), Arc::clone(&cx.session), Arc::clone(&self.shared));
        let out = tokio::task::spawn_blocking(move || delete_blocking(&args, &ws, &session, &shared))
            .await
            .map_err(|e| ToolError::failed(format!("the delete task failed: {e}")))??;
        Ok(out)
    }
}
