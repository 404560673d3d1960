//! Finding the real language servers and driving the tools through the registry.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kodik_core::{ToolCall, ToolContext, ToolOutput, ToolRegistry, Workspace, dispatch};
use kodik_lsp::{LanguageServers, LspConfig, LspToolset, ServerConfig};
use serde_json::Value;

/// The program `name`: from `KODIK_LSP_BIN` (the folder `cargo xtask` installs npm servers
/// into), then `PATH`. `None` outside CI prints why the test is skipped; in CI a missing
/// server fails the test (never a silent pass).
pub fn server_program(name: &str) -> Option<PathBuf> {
    let from_env = std::env::var_os("KODIK_LSP_BIN").map(|d| PathBuf::from(d).join(name)).filter(|p| p.is_file());
    let found = from_env.or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = format!(
            "`{name}` is not installed: run `cargo xtask ci` (it installs language servers) or set KODIK_LSP_BIN"
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// The default configuration of server `name`, started as `program` found as
/// [`server_program`] finds it.
#[allow(dead_code)] // not every test binary uses it
pub fn configured(name: &str, program: &str) -> Option<kodik_lsp::ServerConfig> {
    let path = server_program(program)?;
    let mut cfg = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == name)?;
    cfg.command = path;
    Some(cfg)
}

pub struct Harness {
    pub servers: Arc<LanguageServers>,
    pub registry: ToolRegistry,
    pub cx: ToolContext,
    pub root: PathBuf,
    n: std::sync::atomic::AtomicU32,
}

impl Harness {
    pub fn new(root: &Path, server: ServerConfig) -> Self {
        Self::with_config(root, LspConfig { servers: vec![server], ..LspConfig::default() })
    }

    pub fn with_config(root: &Path, config: LspConfig) -> Self {
        let root = root.canonicalize().unwrap();
        let servers = Arc::new(LanguageServers::new(config, vec![root.clone()]));
        let mut registry = ToolRegistry::default();
        LspToolset::new(servers.clone()).register(&mut registry);
        let mut cx = ToolContext::new(Workspace::new(&root).unwrap());
        cx.diagnostics = Some(servers.clone());
        Self { servers, registry, cx, root, n: Default::default() }
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let id = self.n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let call = ToolCall::new(format!("c{id}"), tool, args);
        tokio::time::timeout(Duration::from_secs(120), dispatch(&self.registry, &call, &self.cx))
            .await
            .expect("the tool call hung for 120 s")
    }

    /// Calls `lsp` and returns its text, asserting success.
    pub async fn lsp(&self, args: Value) -> String {
        let out = self.call("lsp", args.clone()).await;
        let text = out.text_content();
        assert!(out.is_success(), "lsp {args} failed: {text}");
        text
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// Whether any process of group `pgid` is still alive.
pub fn group_alive(pgid: u32) -> bool {
    let pid = rustix::process::Pid::from_raw(pgid as i32).unwrap();
    rustix::process::test_kill_process_group(pid).is_ok()
}

/// Waits until group `pgid` is gone, at most `limit`.
pub async fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if !group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !group_alive(pgid)
}
