//! `LanguageServers`: one server per (server, project root), started on first use, restarted
//! after a crash, asked to exit and then killed with its process group when the manager drops.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kodik_core::{Diagnostic, DiagnosticSeverity, DiagnosticsProvider};
use serde_json::Value;

use crate::LspError;
use crate::config::LspConfig;
use crate::position::{Encoding, from_lsp_column, line_of};
use crate::server::Server;
use crate::transport::RpcError;

#[derive(Default)]
struct Slot {
    server: Option<Arc<Server>>,
    restarts: Vec<Instant>,
    starts: u32,
}

type SlotKey = (String, PathBuf);

/// The language servers of one workspace.
pub struct LanguageServers {
    config: LspConfig,
    roots: Vec<PathBuf>,
    slots: Mutex<HashMap<SlotKey, Arc<tokio::sync::Mutex<Slot>>>>,
    /// Servers whose start failed, and until when they are passed over. A program that is
    /// on PATH but cannot serve (rustup's `rust-analyzer` proxy without the component) must not
    /// be spawned again on every edit.
    broken: Mutex<HashMap<String, (Instant, String)>>,
    /// Project root per (server, folder): found once, not with a dozen `stat`s per request.
    roots_seen: Mutex<HashMap<(String, PathBuf), PathBuf>>,
    /// Each server's program as last looked up, and when: a found program is kept (a later
    /// failure to start marks the server broken); a missing one is looked for again after
    /// [`PROGRAM_RECHECK`], so a server installed mid-session is picked up.
    programs: Mutex<HashMap<String, (Option<PathBuf>, Instant)>>,
    /// Each server's projects in the workspace, found once (see [`LanguageServers::projects`]).
    projects: Mutex<HashMap<String, Vec<(PathBuf, PathBuf)>>>,
    /// The running server each file was last served by, and when it was looked up: a warm
    /// call skips the server and project lookups (a few allocations and locks), which is
    /// all [`Self::server_for`] would do for a server still running. Believed for
    /// [`PROGRAM_RECHECK`], like a missing program, so a preferred server installed
    /// meanwhile is still picked up.
    serving: Mutex<HashMap<PathBuf, (Arc<Server>, Instant)>>,
}

/// At most this many files are remembered in `serving`.
const MAX_SERVING: usize = 4_096;

/// How long servers asked to exit are given before they are killed (they take a few
/// milliseconds).
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// How long "not installed" is believed before `PATH` is searched again.
const PROGRAM_RECHECK: Duration = Duration::from_secs(10);

impl std::fmt::Debug for LanguageServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageServers").field("roots", &self.roots).finish_non_exhaustive()
    }
}

impl LanguageServers {
    /// A manager for the workspace `roots` (project roots are looked for below them).
    pub fn new(config: LspConfig, roots: Vec<PathBuf>) -> Self {
        let roots = roots.into_iter().map(|r| r.canonicalize().unwrap_or(r)).collect();
        Self {
            config,
            roots,
            slots: Mutex::default(),
            broken: Mutex::default(),
            roots_seen: Mutex::default(),
            programs: Mutex::default(),
            projects: Mutex::default(),
            serving: Mutex::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LspConfig {
        &self.config
    }

    /// Whether a configured, installed server serves `path`'s file type.
    pub fn serves(&self, path: &Path) -> bool {
        self.pick(path).is_ok()
    }

    /// The configured server for `path` and its program, passing over broken servers.
    fn pick(&self, path: &Path) -> Result<(&crate::ServerConfig, PathBuf), Vec<String>> {
        self.config.server_for_with(path, &|name| self.is_broken(name), &|cfg| self.program(cfg))
    }

    fn program(&self, cfg: &crate::ServerConfig) -> Option<PathBuf> {
        let now = Instant::now();
        if let Ok(programs) = self.programs.lock()
            && let Some((found, at)) = programs.get(&cfg.name)
            && (found.is_some() || now.duration_since(*at) < PROGRAM_RECHECK)
        {
            return found.clone();
        }
        let found = cfg.resolve_program();
        if let Ok(mut programs) = self.programs.lock() {
            programs.insert(cfg.name.clone(), (found.clone(), now));
        }
        found
    }

    fn is_broken(&self, name: &str) -> bool {
        self.broken.lock().is_ok_and(|b| b.get(name).is_some_and(|(until, _)| Instant::now() < *until))
    }

    /// For a file whose server failed to start recently (and is passed over until the restart
    /// window ends): that server's name and why it failed. Lets a folder check say which files
    /// went unchecked instead of leaving them out silently.
    pub fn start_failure(&self, path: &Path) -> Option<(String, String)> {
        let (cfg, _) = self.config.server_for_with(path, &|_| false, &|cfg| self.program(cfg)).ok()?;
        let broken = self.broken.lock().ok()?;
        let (until, why) = broken.get(&cfg.name)?;
        (Instant::now() < *until).then(|| (cfg.name.clone(), why.clone()))
    }

    /// The programs of the configured servers for `path`'s file type when none of them is
    /// installed (empty when one is, or when no server is configured for it).
    pub fn not_installed(&self, path: &Path) -> Vec<String> {
        self.pick(path).err().unwrap_or_default()
    }

    /// The project roots of server `name` in the workspace (a monorepo's packages each have
    /// their own server), from one walk of the workspace the first time they are asked for.
    pub fn project_roots(&self, name: &str) -> Vec<PathBuf> {
        self.projects(name).into_iter().map(|(root, _)| root).collect()
    }

    /// Server `name`'s projects in the workspace, each as its root and the first file of it
    /// the walk met (opening one of a project's files is what makes tsserver load the project).
    pub fn projects(&self, name: &str) -> Vec<(PathBuf, PathBuf)> {
        if let Some(found) = self.projects.lock().ok().and_then(|r| r.get(name).cloned()) {
            return found;
        }
        let mut found: Vec<(PathBuf, PathBuf)> = Vec::new();
        for root in &self.roots {
            // node_modules' packages hold package.json too: they are not the workspace's projects.
            let walk = ignore::WalkBuilder::new(root)
                .require_git(false)
                .filter_entry(|e| {
                    e.depth() == 0
                        || !e.file_type().is_some_and(|t| t.is_dir())
                        || !crate::tools::is_dependency_dir(e.path())
                })
                .build();
            for entry in walk.flatten().take(20_000) {
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    continue;
                }
                if let Some((server, project)) = self.server_key(entry.path())
                    && server == name
                    && !found.iter().any(|(r, _)| *r == project)
                {
                    found.push((project, entry.into_path()));
                }
            }
        }
        found.sort();
        if let Ok(mut r) = self.projects.lock() {
            r.insert(name.to_owned(), found.clone());
        }
        found
    }

    /// The server (by name) and project root that would answer for `path`, without starting
    /// anything; `None` when no installed server serves it. Two files with the same key share
    /// one server.
    pub fn server_key(&self, path: &Path) -> Option<(String, PathBuf)> {
        let (cfg, _) = self.pick(path).ok()?;
        Some((cfg.name.clone(), self.project_root(cfg, path)))
    }

    fn project_root(&self, cfg: &crate::ServerConfig, path: &Path) -> PathBuf {
        let dir = path.parent().unwrap_or(path).to_path_buf();
        let key = (cfg.name.clone(), dir);
        let cached = self.roots_seen.lock().ok().and_then(|r| r.get(&key).cloned());
        match cached {
            Some(r) => r,
            None => {
                let r = cfg.project_root(path, &self.roots);
                if let Ok(mut seen) = self.roots_seen.lock() {
                    seen.insert(key, r.clone());
                }
                r
            }
        }
    }

    /// The running server for `path`, started (or restarted after a crash) when needed.
    pub async fn server_for(&self, path: &Path) -> Result<Arc<Server>, LspError> {
        if self.config.keep_warm
            && let Some((s, at)) = self.serving.lock().ok().and_then(|m| m.get(path).cloned())
            && !s.is_closed()
            && at.elapsed() < PROGRAM_RECHECK
        {
            return Ok(s);
        }
        let server = self.start_or_find(path).await?;
        if let Ok(mut serving) = self.serving.lock() {
            if serving.len() >= MAX_SERVING {
                serving.clear();
            }
            serving.insert(path.to_path_buf(), (server.clone(), Instant::now()));
        }
        Ok(server)
    }

    async fn start_or_find(&self, path: &Path) -> Result<Arc<Server>, LspError> {
        let (cfg, program) = self.pick(path).map_err(|tried| no_server(path, tried))?;
        let root = self.project_root(cfg, path);
        let slot = {
            let mut slots = self.slots.lock().map_err(|_| LspError::Poisoned)?;
            slots.entry((cfg.name.clone(), root.clone())).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(s) = &slot.server
            && !s.is_closed()
        {
            return Ok(s.clone());
        }
        // Another caller waiting on this slot just failed to start it: not again for each file.
        if slot.server.is_none() && self.is_broken(&cfg.name) {
            return Err(no_server(path, vec![format!("{} (failed to start)", cfg.command.display())]));
        }
        if slot.server.take().is_some() {
            let now = Instant::now();
            slot.restarts.retain(|t| now.duration_since(*t) < self.config.restart_window);
            if slot.restarts.len() as u32 >= self.config.max_restarts {
                return Err(LspError::GaveUp {
                    server: cfg.name.clone(),
                    restarts: slot.restarts.len() as u32,
                    window: self.config.restart_window,
                });
            }
            // Backoff grows with each recent crash so a server that dies on start is not respawned in a loop.
            let backoff = Duration::from_millis(100 << slot.restarts.len().min(5));
            tracing::warn!(server = %cfg.name, root = %root.display(), "language server exited; restarting");
            tokio::time::sleep(backoff).await;
            slot.restarts.push(now);
        }
        let server = match Server::start(cfg, &program, &root, &self.config).await {
            Ok(s) => Arc::new(s),
            Err(e) => {
                if let Ok(mut b) = self.broken.lock() {
                    b.insert(cfg.name.clone(), (Instant::now() + self.config.restart_window, e.to_string()));
                }
                // It may have been uninstalled: look for it again next time.
                if let Ok(mut programs) = self.programs.lock() {
                    programs.remove(&cfg.name);
                }
                return Err(e);
            }
        };
        slot.starts += 1;
        slot.server = Some(server.clone());
        Ok(server)
    }

    /// How many times servers were started (restarts included), for tests and status.
    pub async fn starts(&self) -> u32 {
        let slots: Vec<_> = self.slots.lock().map(|s| s.values().cloned().collect()).unwrap_or_default();
        let mut n = 0;
        for s in slots {
            n += s.lock().await.starts;
        }
        n
    }

    /// The running servers.
    pub async fn running(&self) -> Vec<Arc<Server>> {
        let slots: Vec<_> = self.slots.lock().map(|s| s.values().cloned().collect()).unwrap_or_default();
        let mut out = Vec::new();
        for s in slots {
            if let Some(server) = &s.lock().await.server
                && !server.is_closed()
            {
                out.push(server.clone());
            }
        }
        out
    }

    /// Runs `op` on `path`'s server; if the server dies under it, restarts it (documents are
    /// reopened by the next sync) and runs `op` once more.
    pub async fn with_server<T, F, Fut>(&self, path: &Path, op: F) -> Result<T, LspError>
    where
        F: Fn(Arc<Server>) -> Fut,
        Fut: Future<Output = Result<T, LspError>>,
    {
        let server = self.server_for(path).await?;
        match op(server).await {
            Err(e) if e.is_exit() => {
                tracing::warn!(error = %e, "language server crashed mid-request; retrying once after a restart");
                let server = self.server_for(path).await?;
                op(server).await
            }
            other => other,
        }
    }

    /// Stops every server: asks each to exit as the protocol says (`shutdown`, `exit`), waits
    /// for them together at most `EXIT_WAIT` (2 s), then kills each process group (the servers'
    /// own children, and any server that did not exit). A killed server leaves its temporary
    /// files behind (clangd's precompiled preambles, pyright's and gopls' folders in `/tmp`):
    /// one set per session fills a CI machine's `/tmp`. Blocks the calling thread meanwhile
    /// (it runs from `Drop`).
    pub fn shutdown(&self) {
        if let Ok(mut serving) = self.serving.lock() {
            serving.clear();
        }
        let slots: Vec<_> = self.slots.lock().map(|mut s| s.drain().map(|(_, v)| v).collect()).unwrap_or_default();
        let servers: Vec<Arc<Server>> =
            slots.iter().filter_map(|slot| slot.try_lock().ok().and_then(|s| s.server.clone())).collect();
        let asked: Vec<&Arc<Server>> = servers.iter().filter(|s| s.ask_to_exit()).collect();
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline && !asked.iter().all(|s| s.has_exited()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        for s in &servers {
            s.kill();
        }
    }
}

impl Drop for LanguageServers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn no_server(path: &Path, tried: Vec<String>) -> LspError {
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_else(|| "extension-less".into());
    LspError::NoServer { file_type: ext, tried }
}

/// `message`'s lines joined by single spaces, each trimmed.
fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// A core diagnostic from a raw LSP one, with a 1-based character column.
pub fn to_core(item: &Value, text: &str, enc: Encoding) -> Diagnostic {
    let line0 = item.pointer("/range/start/line").and_then(Value::as_u64).unwrap_or(0) as usize;
    let col = item.pointer("/range/start/character").and_then(Value::as_u64).unwrap_or(0) as u32;
    let column = line_of(text, line0).map(|l| from_lsp_column(l, col, enc)).unwrap_or(col as usize);
    let severity = match item.get("severity").and_then(Value::as_u64) {
        Some(1) | None => DiagnosticSeverity::Error,
        Some(2) => DiagnosticSeverity::Warning,
        _ => DiagnosticSeverity::Info,
    };
    Diagnostic {
        line: line0 as u32 + 1,
        column: column as u32 + 1,
        severity,
        // One line, as `read_lints` shows it: a multi-line message (pyright's "… is not
        // assignable to …" detail) would read as more entries in an edit's result.
        message: one_line(item.get("message").and_then(Value::as_str).unwrap_or("")),
        source: item.get("source").and_then(Value::as_str).map(str::to_owned),
    }
}

/// E9: kodik-edit asks for the written file's diagnostics through this.
#[async_trait]
impl DiagnosticsProvider for LanguageServers {
    fn handles(&self, path: &Path) -> bool {
        // A server that failed to start is passed over for a while; the edit's result still
        // says the file went unchecked, and why.
        self.serves(path) || self.start_failure(path).is_some()
    }

    async fn diagnostics(&self, path: &Path, text: &str) -> Vec<Diagnostic> {
        self.check(path, text).await.unwrap_or_else(|why| {
            tracing::warn!(path = %path.display(), error = %why, "no diagnostics after the edit");
            Vec::new()
        })
    }

    async fn check(&self, path: &Path, text: &str) -> Result<Vec<Diagnostic>, String> {
        if !self.serves(path)
            && let Some((_, why)) = self.start_failure(path)
        {
            return Err(format!("{why} (it is tried again in a while)"));
        }
        let work = self.with_server(path, |server| async move {
            let d = server.diagnostics(path, Some(text)).await?;
            Ok(d.items.iter().map(|i| to_core(i, &d.text, server.encoding())).collect::<Vec<_>>())
        });
        // An edit's result waits for a starting server, but not for one that hangs in start-up.
        let limit = self.config.diagnostics_cap * 2;
        let got = tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
            Err(LspError::Rpc(RpcError::Timeout { method: "diagnostics after the edit".into(), after: limit }))
        });
        got.map_err(|e| e.to_string())
    }
}

impl LspError {
    fn is_exit(&self) -> bool {
        matches!(self, Self::Rpc(RpcError::Exited { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E9: a multi-line server message is one line in an edit's result, not a line that reads
    /// as a second diagnostic.
    #[test]
    fn e9_multi_line_messages_become_one_line() {
        let item = serde_json::json!({
            "range": {"start": {"line": 0, "character": 10}},
            "severity": 1,
            "message": "Type \"Literal['s']\" is not assignable to declared type \"int\"\n  \"Literal['s']\" is not assignable to \"int\"",
        });
        let d = to_core(&item, "x0: int = \"s\"\n", Encoding::Utf16);
        assert_eq!(
            d.message,
            "Type \"Literal['s']\" is not assignable to declared type \"int\" \"Literal['s']\" is not assignable to \"int\""
        );
        assert_eq!((d.line, d.column), (1, 11));
    }
}
