//! A real workspace in a tempdir, the edit tools registered, and a stand-in for read_file.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};

use kodik_core::{FileVersion, ToolCall, ToolContext, ToolOutput, ToolRegistry, Workspace, dispatch};
use kodik_edit::EditToolset;
use serde_json::Value;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub tools: EditToolset,
    pub registry: ToolRegistry,
    pub cx: ToolContext,
}

impl Env {
    pub fn new() -> Self {
        Self::with_tools(EditToolset::new())
    }

    pub fn with_tools(tools: EditToolset) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = ToolRegistry::new();
        tools.register(&mut registry);
        let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        Self { dir, tools, registry, cx }
    }

    pub fn root(&self) -> PathBuf {
        self.cx.workspace.primary_root().to_path_buf()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    pub fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    pub fn text(&self, rel: &str) -> String {
        String::from_utf8(self.bytes(rel)).unwrap()
    }

    /// What read_file does for E2: the session learns the file's current version.
    pub fn read(&self, rel: &str) {
        let p = self.cx.workspace.resolve(rel).unwrap();
        self.cx.session.record_read(&p, FileVersion::of_file(&p).unwrap(), None);
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        dispatch(&self.registry, &ToolCall::new("call-1", tool, args), &self.cx).await
    }

    pub async fn edit(&self, path: &str, edits: &[(&str, &str)]) -> ToolOutput {
        let edits: Vec<Value> =
            edits.iter().map(|(o, n)| serde_json::json!({"old_string": o, "new_string": n})).collect();
        self.call("edit_file", serde_json::json!({"path": path, "edits": edits})).await
    }

    pub async fn patch(&self, input: &str) -> ToolOutput {
        self.call("apply_patch", serde_json::json!({"input": input})).await
    }
}

pub fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if p.is_dir() {
                out.push((rel, None));
                stack.push(p);
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}
