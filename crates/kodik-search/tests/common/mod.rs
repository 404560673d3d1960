#![allow(dead_code)]

use std::path::Path;

use kodik_core::{Settings, ToolContext, ToolOutput, ToolRegistry, Workspace};
use kodik_search::SearchToolset;
use serde_json::Value;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub cx: ToolContext,
    pub reg: ToolRegistry,
}

impl Env {
    pub fn new() -> Self {
        Self::with(SearchToolset::new(), Settings::default())
    }

    pub fn with(tools: SearchToolset, settings: Settings) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap().with_settings(settings);
        let cx = ToolContext::new(ws);
        let mut reg = ToolRegistry::new();
        tools.register(&mut reg);
        Self { dir, cx, reg }
    }

    /// A workspace rooted at `sub`, a folder inside the temporary folder `dir`, which the
    /// test can fill with what lies above the project (ignore files, a repository).
    pub fn below(sub: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        let ws = Workspace::new(dir.path().join(sub)).unwrap();
        let cx = ToolContext::new(ws);
        let mut reg = ToolRegistry::new();
        SearchToolset::new().register(&mut reg);
        Self { dir, cx, reg }
    }

    /// Writes `rel`, relative to the temporary folder (above the root of [`Env::below`]).
    pub fn write_outside(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn root(&self) -> &Path {
        self.cx.workspace.primary_root()
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.reg.get(tool).unwrap().call(args, &self.cx).await
    }

    /// Calls and asserts success, returning the text.
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args.clone()).await;
        assert!(out.is_success(), "{tool} {args} failed: {}", out.text_content());
        out.text_content()
    }

    /// Calls and asserts an error, returning the text.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args.clone()).await;
        assert!(!out.is_success(), "{tool} {args} should fail but gave: {}", out.text_content());
        out.text_content()
    }
}

/// Sets a file's modification time to `secs` after the epoch.
pub fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)).unwrap();
}
