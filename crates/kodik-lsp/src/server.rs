//! One running language server: its handshake, what it reports (progress, diagnostics,
//! registrations), and the documents it has been sent.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::LspError;
use crate::config::{LspConfig, ServerConfig};
use crate::position::{Encoding, path_to_uri, uri_to_path};
use crate::transport::{Connection, Handler, METHOD_NOT_FOUND, RpcError};
use crate::watch::DirWatcher;

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// `initialize` has not been answered yet.
    Starting,
    /// Work is in progress (a `$/progress` token is open, or rust-analyzer is not quiescent):
    /// answers may be incomplete.
    Indexing,
    /// Nothing in progress.
    Ready,
    /// The process is gone.
    Exited,
}

/// Diagnostics the server pushed for one file.
#[derive(Debug, Clone, Default)]
struct Published {
    version: Option<i64>,
    items: Vec<Value>,
    seq: u64,
    /// When it arrived.
    at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Inner {
    progress: HashSet<String>,
    quiescent: Option<bool>,
    pull_registered: bool,
    diagnostics: HashMap<PathBuf, Published>,
    seq: u64,
    initialized: bool,
    closed: bool,
    /// The `ready_log` texts still awaited (any one of them).
    awaiting_log: Option<Vec<String>>,
    /// When `awaiting_log` was armed again after files were created or deleted: until when
    /// it is believed (a server may not rescan for every such change).
    rescan_until: Option<Instant>,
    /// `first_progress_grace` applies and no progress has ended yet.
    awaiting_progress: bool,
    /// Some progress has begun.
    progress_seen: bool,
}

/// What the server tells us, shared with the connection's reader task.
struct State {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
    settings: Value,
    folders: Value,
}

impl State {
    fn bump(&self, inner: &mut Inner) {
        inner.seq += 1;
        self.changed.send_replace(inner.seq);
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> Option<R> {
        let mut inner = self.inner.lock().ok()?;
        let r = f(&mut inner);
        self.bump(&mut inner);
        Some(r)
    }

    fn read<R>(&self, f: impl FnOnce(&Inner) -> R) -> Option<R> {
        self.inner.lock().ok().map(|i| f(&i))
    }
}

fn section(settings: &Value, section: Option<&str>) -> Value {
    let Some(section) = section.filter(|s| !s.is_empty()) else { return settings.clone() };
    let mut v = settings;
    for part in section.split('.') {
        match v.get(part) {
            Some(next) => v = next,
            None => return Value::Null,
        }
    }
    v.clone()
}

impl Handler for State {
    fn on_request(&self, method: &str, params: Value) -> Result<Value, (i64, String)> {
        match method {
            "workspace/configuration" => {
                let items = params.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                Ok(Value::Array(
                    items.iter().map(|i| section(&self.settings, i.get("section").and_then(Value::as_str))).collect(),
                ))
            }
            "client/registerCapability" => {
                let regs = params.get("registrations").and_then(Value::as_array).cloned().unwrap_or_default();
                if regs.iter().any(|r| r.get("method").and_then(Value::as_str) == Some("textDocument/diagnostic")) {
                    self.with(|i| i.pull_registered = true);
                }
                Ok(Value::Null)
            }
            "workspace/workspaceFolders" => Ok(self.folders.clone()),
            "workspace/applyEdit" => Ok(json!({"applied": false, "failureReason": "kodik's lsp tool only reads"})),
            "window/workDoneProgress/create"
            | "client/unregisterCapability"
            | "window/showMessageRequest"
            | "window/showDocument"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/inlineValue/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            _ => Err((METHOD_NOT_FOUND, format!("kodik does not handle `{method}`"))),
        }
    }

    fn on_notification(&self, method: &str, params: Value) {
        match method {
            "$/progress" => {
                let token = params.get("token").map(Value::to_string).unwrap_or_default();
                match params.pointer("/value/kind").and_then(Value::as_str) {
                    Some("begin") => self.with(|i| {
                        i.progress_seen = true;
                        i.progress.insert(token)
                    }),
                    Some("end") => self.with(|i| {
                        let removed = i.progress.remove(&token);
                        if i.progress.is_empty() {
                            i.awaiting_progress = false;
                        }
                        removed
                    }),
                    _ => None,
                };
            }
            "pyright/beginProgress" => {
                self.with(|i| i.progress.insert("pyright".into()));
            }
            "pyright/endProgress" => {
                self.with(|i| i.progress.remove("pyright"));
            }
            "window/logMessage" => {
                let msg = params.get("message").and_then(Value::as_str).unwrap_or("");
                let seen = self
                    .read(|i| {
                        i.awaiting_log.as_ref().is_some_and(|texts| texts.iter().any(|t| msg.contains(t.as_str())))
                    })
                    .unwrap_or(false);
                if seen {
                    self.with(|i| {
                        i.awaiting_log = None;
                        i.rescan_until = None;
                    });
                }
            }
            "experimental/serverStatus" => {
                let q = params.get("quiescent").and_then(Value::as_bool);
                self.with(|i| i.quiescent = q);
            }
            "textDocument/publishDiagnostics" => {
                let Some(path) = params.get("uri").and_then(Value::as_str).and_then(uri_to_path) else { return };
                let version = params.get("version").and_then(Value::as_i64);
                let items = params.get("diagnostics").and_then(Value::as_array).cloned().unwrap_or_default();
                self.with(|i| {
                    let seq = i.seq + 1;
                    i.diagnostics.insert(path, Published { version, items, seq, at: Some(Instant::now()) });
                });
            }
            _ => {}
        }
    }

    fn on_closed(&self) {
        self.with(|i| i.closed = true);
    }
}

/// A document as last sent to the server.
#[derive(Debug, Clone)]
struct Doc {
    version: i64,
    /// Shared with callers: an unchanged document is handed out without copying it.
    text: Arc<str>,
    /// `State::seq` when the last change went out: pushes older than that are stale.
    sent_seq: u64,
    /// `State::seq` when the server was last told of a change to another file this one may
    /// depend on: a push older than that was made before it, and is taken only once the
    /// server has had time to publish again ([`DEPENDENCY_QUIET`]).
    dep_seq: u64,
    /// When the last change (or the opening) went out.
    sent_at: Instant,
    /// How the file looked on disk when `text` was read from it, and when that was.
    disk: Option<(Stamp, SystemTime)>,
    /// `disk` was looked at while the project's watcher saw the file's folder, and no event
    /// for the file has been drained since: the file is as `disk` says without a `stat`.
    watched: bool,
}

/// What a file looks like on disk without reading it. The same stamp means the same content
/// once the file's last change is older than [`RACY`] at the time it was read: a later write
/// then gets a later ctime even from the kernel's coarse clock. (ctime, unlike mtime, cannot be
/// set back by `touch -d` or `cp -p`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: Option<SystemTime>,
    ctime: (i64, i64),
}

/// How long a server's rescan after files were created or deleted is waited for.
const RESCAN_WAIT: Duration = Duration::from_secs(3);

/// A document's diagnostics published before another file it may depend on changed stand once
/// the server has sent nothing for this long (or three times as long as it recently took to
/// publish after a change, when that is longer: a loaded machine) while idle. Servers re-check
/// the dependents of a changed file, but not every open file depends on it, so a newer publish
/// may never come. (gopls published the dependent's new error 0.3–0.4 s after the change.)
const DEPENDENCY_QUIET: Duration = Duration::from_secs(1);

/// Files changed this recently before they were read are read again on the next request:
/// file times come from a clock that may lag by a scheduler tick.
const RACY: Duration = Duration::from_millis(50);

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self { ino: meta.ino(), len: meta.len(), mtime: meta.modified().ok(), ctime: (meta.ctime(), meta.ctime_nsec()) }
    }

    /// Whether a read at `read_at` saw the file's settled content.
    fn settled(&self, read_at: SystemTime) -> bool {
        let changed = std::time::UNIX_EPOCH
            + Duration::new(self.ctime.0.max(0) as u64, self.ctime.1.clamp(0, 999_999_999) as u32);
        changed + RACY <= read_at
    }
}

/// A file's content on disk, unless its stamp says it is what `known` already holds.
enum Disk {
    Unchanged,
    Read(String, Option<(Stamp, SystemTime)>),
}

/// Reads `path` unless it was read when it looked like `known` and it has not changed since
/// (by its stamp): this runs for every open document before every request.
fn look(path: &Path, known: Option<(Stamp, SystemTime)>) -> std::io::Result<Disk> {
    let read_at = SystemTime::now();
    let stamp = Stamp::of(&std::fs::metadata(path)?);
    if let Some((was, at)) = known
        && was == stamp
        && was.settled(at)
    {
        return Ok(Disk::Unchanged);
    }
    let bytes = std::fs::read(path)?;
    Ok(Disk::Read(String::from_utf8_lossy(&bytes).into_owned(), Some((stamp, read_at))))
}

/// An LSP `Diagnostic` from a tsserver one (1-based line and UTF-16 offset), as
/// typescript-language-server converts it.
fn tsserver_diagnostic(d: &Value) -> Option<Value> {
    let pos = |p: &Value| -> Option<Value> {
        let line = p.get("line")?.as_u64()?.saturating_sub(1);
        let character = p.get("offset")?.as_u64()?.saturating_sub(1);
        Some(json!({"line": line, "character": character}))
    };
    let severity = match d.get("category").and_then(Value::as_str) {
        Some("warning") => 2,
        Some("suggestion") => 4,
        _ => 1,
    };
    Some(json!({
        "range": {"start": pos(d.get("start")?)?, "end": pos(d.get("end")?)?},
        "message": d.get("text").and_then(Value::as_str).unwrap_or(""),
        "severity": severity,
        "code": d.get("code"),
        "source": d.get("source").and_then(Value::as_str).unwrap_or("typescript"),
    }))
}

/// Diagnostics of one file as the server reported them for the current content.
#[derive(Debug, Clone)]
pub struct FileDiagnostics {
    /// The file.
    pub path: PathBuf,
    /// The content they are for (to show lines and convert columns).
    pub text: String,
    /// Raw LSP `Diagnostic` objects.
    pub items: Vec<Value>,
    /// The cap ran out before the server settled: these may be from an older version.
    pub possibly_stale: bool,
}

/// A started and initialized language server.
pub struct Server {
    conn: Connection,
    state: Arc<State>,
    changes: watch::Receiver<u64>,
    config: ServerConfig,
    root: PathBuf,
    encoding: Encoding,
    capabilities: Value,
    docs: tokio::sync::Mutex<HashMap<PathBuf, Doc>>,
    started: SystemTime,
    started_at: Instant,
    timing: LspConfig,
    /// The project's files this server serves and the watcher that keeps them current.
    tracked: Mutex<Tracked>,
    /// How long the server recently took to publish a document's diagnostics after it was
    /// changed (a decaying maximum): scales [`DEPENDENCY_QUIET`] on a loaded machine.
    latency: Mutex<Duration>,
    /// Files read for the source lines shown with results, with how they looked on disk: a
    /// file is read again only when its stamp changed, not for every answer that points into it.
    sources: Mutex<HashMap<PathBuf, Source>>,
    /// Drains of the watcher that reported changes: a source text read while another call
    /// drained a change may predate it, and is not vouched for (compared under `sources`'
    /// lock, which the drain holds while it untrusts entries).
    changes_seen: std::sync::atomic::AtomicU64,
}

/// A file's text kept for source lines, how it looked on disk when read, and whether the
/// watcher has seen no change to it since (then it is handed out without a `stat`).
type Source = (Arc<str>, Seen, bool);

/// How a file looked on disk when its text was read, and when that was.
type Seen = Option<(Stamp, SystemTime)>;

/// At most this many files' text is kept for source lines.
const MAX_SOURCES: usize = 256;

/// Projects with more files than this are not scanned for created and deleted files.
const MAX_SCANNED_FILES: usize = 20_000;

/// The project's files of the server's language, as last seen.
struct Tracked {
    /// `None`: too many to track.
    files: Option<HashSet<PathBuf>>,
    /// Tells what changed on disk before each request; `None` when inotify is unavailable or
    /// cannot watch every folder (then a scan before diagnostics finds created and deleted files).
    watcher: Option<DirWatcher>,
}

/// The files of `config`'s language under `root` and, when `dirs` is given, its folders
/// (both as the editor would see them: ignored folders left out).
fn scan_with_dirs(root: &Path, config: &ServerConfig, mut dirs: Option<&mut Vec<PathBuf>>) -> Option<HashSet<PathBuf>> {
    let mut out = HashSet::new();
    for entry in walk(root).build().flatten() {
        let Some(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if let Some(dirs) = dirs.as_deref_mut() {
                dirs.push(entry.path().to_path_buf());
            }
        } else if kind.is_file() && config.language_id(entry.path()).is_some() {
            out.insert(entry.path().to_path_buf());
            if out.len() > MAX_SCANNED_FILES {
                return None;
            }
        }
    }
    Some(out)
}

/// The project's folders as the server sees them: ignored and hidden ones left out, and
/// third-party ones (`node_modules`, virtualenvs), which servers exclude from their own scans
/// too (a file created there does not make pyright rescan, so it must not make queries wait
/// for one).
fn walk(root: &Path) -> ignore::WalkBuilder {
    let mut b = ignore::WalkBuilder::new(root);
    b.require_git(false).filter_entry(|e| {
        e.depth() == 0 || !e.file_type().is_some_and(|t| t.is_dir()) || !crate::tools::is_dependency_dir(e.path())
    });
    b
}

fn scan(root: &Path, config: &ServerConfig) -> Option<HashSet<PathBuf>> {
    scan_with_dirs(root, config, None)
}

/// The project's files and a watcher on each of its folders (no watcher if one is missing).
fn track(root: &Path, config: &ServerConfig) -> Tracked {
    let mut dirs = Vec::new();
    let files = scan_with_dirs(root, config, Some(&mut dirs));
    let watcher = files.as_ref().and_then(|_| {
        let mut w = DirWatcher::new()?;
        dirs.iter().all(|d| w.watch(d)).then_some(w)
    });
    Tracked { files, watcher }
}

/// `didChangeWatchedFiles` changes from the files known `before` and `now`, plus the files
/// `touched` on disk that are in both (changed); open documents are left to `sync`.
fn file_changes(
    before: &HashSet<PathBuf>,
    now: &HashSet<PathBuf>,
    touched: &HashSet<PathBuf>,
    open: &HashMap<PathBuf, Doc>,
) -> Vec<Value> {
    let mut changes: Vec<Value> = now.difference(before).map(|p| json!({"uri": path_to_uri(p), "type": 1})).collect();
    changes.extend(before.difference(now).map(|p| json!({"uri": path_to_uri(p), "type": 3})));
    changes.extend(
        touched
            .iter()
            .filter(|p| !open.contains_key(*p) && before.contains(*p) && now.contains(*p))
            .map(|p| json!({"uri": path_to_uri(p), "type": 2})),
    );
    changes
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.config.name).field("root", &self.root).finish_non_exhaustive()
    }
}

fn client_capabilities() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "window": {"workDoneProgress": true},
        "workspace": {
            "configuration": true,
            "workspaceFolders": true,
            "didChangeWatchedFiles": {"dynamicRegistration": true, "relativePatternSupport": true},
            "symbol": {"dynamicRegistration": false},
            "diagnostics": {"refreshSupport": false},
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": false, "didSave": true, "willSave": false},
            "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
            // pyright only offers pull diagnostics when they may be registered dynamically.
            "diagnostic": {"dynamicRegistration": true, "relatedDocumentSupport": false},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "definition": {"linkSupport": true},
            "typeDefinition": {"linkSupport": true},
            "implementation": {"linkSupport": true},
            "references": {},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
            "callHierarchy": {"dynamicRegistration": false},
        },
        "experimental": {"serverStatusNotification": true},
    })
}

impl Server {
    /// Starts `program` for `root` and completes the `initialize` handshake.
    pub async fn start(
        config: &ServerConfig,
        program: &Path,
        root: &Path,
        timing: &LspConfig,
    ) -> Result<Self, LspError> {
        if let Some(prepare) = config.before_start {
            prepare(root);
        }
        let uri = path_to_uri(root);
        let name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "root".into());
        let folders = json!([{"uri": uri, "name": name}]);
        let (tx, changes) = watch::channel(0);
        let inner = Inner {
            awaiting_log: (!config.ready_log.is_empty()).then(|| config.ready_log.clone()),
            awaiting_progress: config.first_progress_grace.is_some()
                && (config.grace_markers.is_empty() || config.grace_markers.iter().any(|m| root.join(m).is_file())),
            ..Inner::default()
        };
        let state =
            Arc::new(State { inner: Mutex::new(inner), changed: tx, settings: config.settings_for(root), folders });
        let conn = Connection::spawn(program, &config.args, root, state.clone()).map_err(|e| LspError::Spawn {
            server: config.name.clone(),
            program: program.display().to_string(),
            source: e,
        })?;
        let params = json!({
            "processId": std::process::id(),
            "clientInfo": {"name": "kodik", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": uri,
            "rootPath": root.display().to_string(),
            "workspaceFolders": state.folders,
            "capabilities": client_capabilities(),
            "initializationOptions": config.initialization_options,
        });
        let init = match conn.request("initialize", &params, timing.start_timeout).await {
            Ok(init) => init,
            Err(e) => {
                let said = conn.stderr_tail(Duration::from_millis(500)).await;
                let reason = if said.is_empty() { e.to_string() } else { format!("{e}; it said: {said}") };
                return Err(LspError::Start { server: config.name.clone(), reason });
            }
        };
        conn.notify("initialized", &json!({})).await;
        if !state.settings.is_null() {
            conn.notify("workspace/didChangeConfiguration", &json!({"settings": state.settings})).await;
        }
        state.with(|i| i.initialized = true);
        let capabilities = init.get("capabilities").cloned().unwrap_or(Value::Null);
        let encoding = Encoding::from_name(capabilities.get("positionEncoding").and_then(Value::as_str));
        Ok(Self {
            conn,
            state,
            changes,
            config: config.clone(),
            root: root.to_path_buf(),
            encoding,
            capabilities,
            docs: tokio::sync::Mutex::default(),
            started: SystemTime::now(),
            started_at: Instant::now(),
            timing: timing.clone(),
            tracked: Mutex::new(track(root, config)),
            latency: Mutex::default(),
            sources: Mutex::default(),
            changes_seen: Default::default(),
        })
    }

    /// The current text of `path` (for the source lines shown with results), read from disk
    /// only when the file changed since it was last read; `None` when it cannot be read.
    pub fn source(&self, path: &Path) -> Option<Arc<str>> {
        let known = self.sources.lock().ok()?.get(path).cloned();
        // Every caller synced this server first, which drained the watcher: a change made
        // before this call has already untrusted the entry.
        if let Some((text, _, true)) = &known
            && self.watcher_sees(path)
        {
            return Some(text.clone());
        }
        let watched = self.watcher_sees(path);
        let changes_seen = self.changes_seen.load(std::sync::atomic::Ordering::SeqCst);
        let vouched = || watched && self.changes_seen.load(std::sync::atomic::Ordering::SeqCst) == changes_seen;
        match look(path, known.as_ref().and_then(|(_, disk, _)| *disk)) {
            Ok(Disk::Unchanged) => {
                let (text, disk, _) = known?;
                if let Ok(mut sources) = self.sources.lock()
                    && vouched()
                {
                    sources.insert(path.to_path_buf(), (text.clone(), disk, true));
                }
                Some(text)
            }
            Ok(Disk::Read(text, disk)) => {
                let text: Arc<str> = text.into();
                if let Ok(mut sources) = self.sources.lock() {
                    if sources.len() >= MAX_SOURCES {
                        sources.clear();
                    }
                    sources.insert(path.to_path_buf(), (text.clone(), disk, vouched()));
                }
                Some(text)
            }
            Err(_) => {
                if let Ok(mut sources) = self.sources.lock() {
                    sources.remove(path);
                }
                None
            }
        }
    }

    /// Whether `path` is open in this server (sent with `didOpen` and not closed since).
    pub async fn is_open(&self, path: &Path) -> bool {
        self.docs.lock().await.contains_key(path)
    }

    /// The configured name (`pyright`).
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The project root it was started for.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The process id (also its process group).
    pub fn pid(&self) -> Option<u32> {
        self.conn.pid()
    }

    /// The negotiated column encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The server's capabilities from `initialize`.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// Where the server is in its life.
    pub fn readiness(&self) -> Readiness {
        if self.conn.is_closed() {
            return Readiness::Exited;
        }
        let in_grace = self.config.first_progress_grace.is_some_and(|g| self.started_at.elapsed() < g);
        self.state
            .read(|i| {
                let awaiting_progress = i.awaiting_progress && (i.progress_seen || in_grace);
                let awaiting_log =
                    i.awaiting_log.is_some() && i.rescan_until.is_none_or(|until| Instant::now() < until);
                if !i.initialized {
                    Readiness::Starting
                } else if !i.progress.is_empty() || i.quiescent == Some(false) || awaiting_log || awaiting_progress {
                    Readiness::Indexing
                } else {
                    Readiness::Ready
                }
            })
            .unwrap_or(Readiness::Exited)
    }

    /// Whether the process is gone.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Kills the server's process group.
    pub fn kill(&self) {
        self.conn.kill();
    }

    /// Asks the server to stop (LSP `shutdown` and `exit`) without waiting; see
    /// [`Connection::ask_to_exit`]. Returns whether the request went out.
    pub fn ask_to_exit(&self) -> bool {
        !self.conn.is_closed() && self.conn.ask_to_exit()
    }

    /// Whether the server process has ended.
    pub fn has_exited(&self) -> bool {
        self.conn.has_exited()
    }

    /// Waits until nothing is in progress, at most `limit`. Returns whether it got there.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut rx = self.changes.clone();
        loop {
            match self.readiness() {
                Readiness::Ready => return true,
                Readiness::Exited => return false,
                _ => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            // Polled as well: the progress grace ends by time, not by a message.
            let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), rx.changed()).await;
            if Instant::now() >= deadline {
                // A log line that never came (another server version words it differently)
                // must not make every later query wait again.
                self.state.with(|i| {
                    i.awaiting_log = None;
                    i.awaiting_progress = false;
                });
                return self.readiness() == Readiness::Ready;
            }
        }
    }

    /// Sends one request; `ContentModified` and `ServerCancelled` are retried (twice).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request_ref(method, &params).await
    }

    /// [`request`](Self::request) with borrowed parameters, for a caller that may send them
    /// again (no copy of the message tree per call).
    pub async fn request_ref(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        let mut tries = 0;
        loop {
            match self.conn.request(method, params, self.timing.request_timeout).await {
                Err(e) if e.is_retryable() && tries < 2 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50 * tries)).await;
                }
                other => return other,
            }
        }
    }

    /// Tells the server about files of its language created or deleted since the last scan
    /// (`workspace/didChangeWatchedFiles`), so a new module clears other files' import errors
    /// even when it was written by something other than kodik's edit tools. Only needed when
    /// no watcher tells [`Server::sync`] about them.
    pub async fn notice_created_and_deleted(&self) {
        if self.tracked.lock().is_ok_and(|t| t.watcher.is_some()) {
            return;
        }
        let (root, config) = (self.root.clone(), self.config.clone());
        let Ok(Some(now)) = tokio::task::spawn_blocking(move || scan(&root, &config)).await else { return };
        let changes = {
            let Ok(mut tracked) = self.tracked.lock() else { return };
            let Some(before) = tracked.files.as_ref() else { return };
            let changes = file_changes(before, &now, &HashSet::new(), &HashMap::new());
            tracked.files = Some(now);
            changes
        };
        if !changes.is_empty() {
            self.files_created_or_deleted(&changes);
            self.conn.notify("workspace/didChangeWatchedFiles", &json!({"changes": changes})).await;
            self.reload_projects_after(&changes).await;
        }
    }

    /// For typescript-language-server, after files were created or deleted: tsserver's
    /// `reloadProjects`, answered once its projects' file lists are current (see
    /// [`ServerConfig::tsserver_requests`]).
    async fn reload_projects_after(&self, changes: &[Value]) {
        let created_or_deleted = changes.iter().any(|c| c.get("type").and_then(Value::as_u64).is_some_and(|t| t != 2));
        if !self.config.tsserver_requests || !created_or_deleted {
            return;
        }
        let params = json!({"command": "typescript.tsserverRequest", "arguments": ["reloadProjects", {}]});
        if let Err(e) = self.request("workspace/executeCommand", params).await {
            tracing::debug!(error = %e, "tsserver's reloadProjects failed");
        }
    }

    /// A server that logs when its scan of the project is done (pyright: "Found N source
    /// files") scans again after files are created or deleted, and answers from the old file
    /// list until then (references miss a new file's uses): queries wait for that log again,
    /// for at most [`RESCAN_WAIT`].
    fn files_created_or_deleted(&self, changes: &[Value]) {
        let log = &self.config.ready_log;
        if log.is_empty() {
            return;
        }
        if changes.iter().any(|c| c.get("type").and_then(Value::as_u64).is_some_and(|t| t != 2)) {
            self.state.with(|i| {
                i.awaiting_log = Some(log.clone());
                i.rescan_until = Some(Instant::now() + RESCAN_WAIT);
            });
        }
    }

    /// Files of the server's language that changed on disk since the last request, by the
    /// watcher, as `didChangeWatchedFiles` changes (open documents are left to `sync`).
    async fn disk_changes(&self, open: &mut HashMap<PathBuf, Doc>) -> Vec<Value> {
        let seen = {
            let Ok(mut tracked) = self.tracked.lock() else { return Vec::new() };
            let Some(watcher) = tracked.watcher.as_mut() else { return Vec::new() };
            watcher.drain()
        };
        if seen.files.is_empty() && !seen.rescan {
            return Vec::new();
        }
        // What the watcher vouched for is looked at on disk again: the files it saw change
        // (any language: open documents and source lines), or everything after a rescan.
        for (path, doc) in open.iter_mut() {
            doc.watched &= !seen.rescan && !seen.files.contains(path);
        }
        if let Ok(mut sources) = self.sources.lock() {
            self.changes_seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            for (path, (_, _, trusted)) in sources.iter_mut() {
                *trusted &= !seen.rescan && !seen.files.contains(path);
            }
        }
        let open = &*open;
        let touched: HashSet<PathBuf> =
            seen.files.into_iter().filter(|p| self.config.language_id(p).is_some()).collect();
        if !seen.rescan {
            let Ok(mut tracked) = self.tracked.lock() else { return Vec::new() };
            let Some(known) = tracked.files.as_mut() else { return Vec::new() };
            let before = known.clone();
            for p in &touched {
                if p.is_file() {
                    known.insert(p.clone());
                } else {
                    known.remove(p);
                }
            }
            return file_changes(&before, known, &touched, open);
        }
        // A folder appeared, went or moved, or events were lost: scan, and watch new folders.
        let (root, config, new_dirs) = (self.root.clone(), self.config.clone(), seen.new_dirs);
        let scanned = tokio::task::spawn_blocking(move || {
            let mut dirs = Vec::new();
            for d in new_dirs.iter().filter(|d| !crate::tools::is_dependency_dir(d)) {
                dirs.extend(
                    walk(d)
                        .build()
                        .flatten()
                        .filter_map(|e| e.file_type().is_some_and(|t| t.is_dir()).then(|| e.path().to_path_buf())),
                );
            }
            (scan(&root, &config), dirs)
        })
        .await;
        let Ok(mut tracked) = self.tracked.lock() else { return Vec::new() };
        let Ok((Some(now), dirs)) = scanned else {
            // Too many files now: stop tracking rather than report a partial picture.
            *tracked = Tracked { files: None, watcher: None };
            return Vec::new();
        };
        if let Some(w) = tracked.watcher.as_mut()
            && !dirs.iter().all(|d| w.watch(d))
        {
            tracked.watcher = None;
        }
        let changes = tracked.files.as_ref().map(|before| file_changes(before, &now, &touched, open));
        tracked.files = Some(now);
        changes.unwrap_or_default()
    }

    /// Brings the server's view of `path` (and of every document already open) up to date with
    /// the disk, or with `text` for `path` when given. Returns the content sent for `path`.
    pub async fn sync(&self, path: &Path, text: Option<&str>) -> Result<Arc<str>, LspError> {
        // Files are looked at in place: a trip through tokio's blocking pool per file costs
        // more than a `stat` or reading a source file, and this runs before every request.
        let mut docs = self.docs.lock().await;
        let began = self.seq();
        // Unopened files changed on disk by anything (a shell command, git): told as watched
        // file changes, and every open document is saved again after them, which makes servers
        // that keep open files' dependencies themselves (clangd's preambles) re-check them.
        let mut watched = self.disk_changes(&mut docs).await;
        let resave = !watched.is_empty();
        // Open documents changed or deleted since they were sent.
        // Those the watcher vouches for are passed over without a copy of their path.
        let open: Vec<PathBuf> = docs
            .iter()
            .filter(|(p, d)| p.as_path() != path && !(d.watched && self.watcher_sees(p)))
            .map(|(p, _)| p.clone())
            .collect();
        for p in open {
            let seen = self.watcher_sees(&p);
            match look(&p, docs.get(&p).and_then(|d| d.disk)) {
                Ok(Disk::Unchanged) => {
                    if let Some(d) = docs.get_mut(&p) {
                        d.watched = seen;
                    }
                }
                Ok(Disk::Read(now, disk)) => {
                    if docs.get(&p).is_some_and(|d| *d.text != *now) {
                        self.change(&mut docs, &p, now.into()).await;
                        watched.push(json!({"uri": path_to_uri(&p), "type": 2}));
                    }
                    if let Some(d) = docs.get_mut(&p) {
                        d.disk = disk;
                        d.watched = seen;
                    }
                }
                Err(_) => {
                    docs.remove(&p);
                    self.conn.notify("textDocument/didClose", &json!({"textDocument": {"uri": path_to_uri(&p)}})).await;
                    watched.push(json!({"uri": path_to_uri(&p), "type": 3}));
                }
            }
        }
        // The edit tools pass what they wrote; its stamp is taken when it is next read.
        let seen = text.is_none() && self.watcher_sees(path);
        let (now, disk): (Arc<str>, Seen) = match text {
            Some(t) => (t.into(), None),
            None => match docs.get(path).filter(|d| d.watched && seen) {
                Some(d) => (d.text.clone(), d.disk),
                None => match look(path, docs.get(path).and_then(|d| d.disk)) {
                    Ok(Disk::Unchanged) => match docs.get(path) {
                        Some(d) => (d.text.clone(), d.disk),
                        None => return Err(LspError::Internal("an unopened document had a stamp".into())),
                    },
                    Ok(Disk::Read(now, disk)) => (now.into(), disk),
                    Err(e) => return Err(LspError::Read { path: path.display().to_string(), source: e }),
                },
            },
        };
        match docs.get(path) {
            Some(d) if d.text == now => {}
            Some(_) => {
                self.change(&mut docs, path, now.clone()).await;
                watched.push(json!({"uri": path_to_uri(path), "type": 2}));
            }
            None => {
                let language = self.config.language_id(path).unwrap_or("plaintext");
                let seq = self.seq();
                self.conn
                    .notify(
                        "textDocument/didOpen",
                        &json!({"textDocument": {"uri": path_to_uri(path), "languageId": language, "version": 1, "text": &*now}}),
                    )
                    .await;
                // A file written after the server started may be one it has never seen: other
                // files' imports of it must be re-resolved.
                let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                if modified.is_some_and(|m| m >= self.started) {
                    watched.push(json!({"uri": path_to_uri(path), "type": 1}));
                }
                docs.insert(
                    path.to_path_buf(),
                    Doc {
                        version: 1,
                        text: now.clone(),
                        sent_seq: seq,
                        dep_seq: seq,
                        sent_at: Instant::now(),
                        disk: None,
                        watched: false,
                    },
                );
            }
        }
        if let Some(d) = docs.get_mut(path) {
            d.disk = disk;
            // Text handed in by an edit tool has no stamp: the next sync looks at the disk.
            d.watched = seen && disk.is_some();
        }
        // Other open documents' earlier publishes may predate these changes (a `sed -i` of a
        // module they import): their diagnostics are awaited from after them. (Those opened
        // or changed just now wait for a publish after that anyway.)
        let told_at = self.seq();
        let dependencies_changed = watched.iter().any(|c| {
            c.get("uri").and_then(Value::as_str).and_then(uri_to_path).is_some_and(|p| self.config.may_be_included(&p))
        });
        if !watched.is_empty() {
            self.files_created_or_deleted(&watched);
            self.conn.notify("workspace/didChangeWatchedFiles", &json!({"changes": watched})).await;
            self.reload_projects_after(&watched).await;
        }
        if dependencies_changed {
            for d in docs.values_mut() {
                if d.sent_seq < began {
                    d.dep_seq = d.dep_seq.max(told_at);
                }
                if self.config.republishes_on_save {
                    d.sent_seq = d.sent_seq.max(told_at);
                }
            }
        }
        if resave {
            for p in docs.keys() {
                self.conn.notify("textDocument/didSave", &json!({"textDocument": {"uri": path_to_uri(p)}})).await;
            }
        }
        Ok(now)
    }

    async fn change(&self, docs: &mut HashMap<PathBuf, Doc>, path: &Path, text: Arc<str>) {
        let seq = self.seq();
        let Some(doc) = docs.get_mut(path) else { return };
        doc.version += 1;
        let uri = path_to_uri(path);
        let change =
            json!({"textDocument": {"uri": uri, "version": doc.version}, "contentChanges": [{"text": &*text}]});
        self.conn.notify("textDocument/didChange", &change).await;
        self.conn.notify("textDocument/didSave", &json!({"textDocument": {"uri": uri}})).await;
        doc.text = text;
        doc.sent_seq = seq;
        doc.sent_at = Instant::now();
    }

    /// Whether the project's watcher queues an event for every change to `path` (see
    /// [`DirWatcher::sees`]): then a document or source text it vouched for needs no `stat`.
    fn watcher_sees(&self, path: &Path) -> bool {
        self.timing.keep_warm && self.tracked.lock().is_ok_and(|t| t.watcher.as_ref().is_some_and(|w| w.sees(path)))
    }

    fn seq(&self) -> u64 {
        self.state.read(|i| i.seq).unwrap_or(0)
    }

    /// Whether the server answers `textDocument/diagnostic` (statically or registered).
    pub fn pulls_diagnostics(&self) -> bool {
        self.capabilities.get("diagnosticProvider").is_some_and(|v| !v.is_null())
            || self.state.read(|i| i.pull_registered).unwrap_or(false)
    }

    /// `path`'s diagnostics as tsserver computes them now (syntactic, semantic and suggestion
    /// diagnostics, asked through typescript-language-server's `typescript.tsserverRequest`),
    /// in the shape typescript-language-server publishes them. `None` when the server does not
    /// answer them (then pushes are awaited). typescript-language-server publishes nothing
    /// when a file's list stays empty (an edit that leaves a file clean waited out the cap),
    /// and re-checks open files seconds after another file changes on disk (the dependent's
    /// old list passed for current).
    async fn ask_tsserver(&self, path: &Path) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        for command in ["syntacticDiagnosticsSync", "semanticDiagnosticsSync", "suggestionDiagnosticsSync"] {
            let params = json!({
                "command": "typescript.tsserverRequest",
                "arguments": [command, {"file": path.display().to_string()}],
            });
            let answer = match self.request("workspace/executeCommand", params).await {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "typescript.tsserverRequest failed; awaiting pushed diagnostics");
                    return None;
                }
            };
            let body = answer.get("body").and_then(Value::as_array)?;
            items.extend(body.iter().filter_map(tsserver_diagnostic));
        }
        Some(items)
    }

    async fn pull(&self, path: &Path, text: String) -> Result<FileDiagnostics, LspError> {
        let params = json!({"textDocument": {"uri": path_to_uri(path)}});
        let answer = self.request("textDocument/diagnostic", params).await.map_err(LspError::Rpc)?;
        let items = answer.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(FileDiagnostics { path: path.to_path_buf(), text, items, possibly_stale: false })
    }

    /// Diagnostics of `path` for its current content (or `text`), never those of an older
    /// version: pulled when the server supports it, else the first push after the last change
    /// once the server has been quiet for a moment; past the cap, marked possibly stale.
    pub async fn diagnostics(&self, path: &Path, text: Option<&str>) -> Result<FileDiagnostics, LspError> {
        self.notice_created_and_deleted().await;
        let text = self.sync(path, text).await?.to_string();
        if self.pulls_diagnostics() {
            return self.pull(path, text).await;
        }
        if self.config.tsserver_requests
            && let Some(items) = self.ask_tsserver(path).await
        {
            return Ok(FileDiagnostics { path: path.to_path_buf(), text, items, possibly_stale: false });
        }
        let (version, sent_seq, dep_seq, sent_at) = {
            let docs = self.docs.lock().await;
            docs.get(path).map(|d| (d.version, d.sent_seq, d.dep_seq, d.sent_at)).unwrap_or((1, 0, 0, Instant::now()))
        };
        let recent = self.latency.lock().map(|l| *l).unwrap_or_default();
        let dependency_quiet = (recent * 3).clamp(DEPENDENCY_QUIET, self.timing.diagnostics_cap / 2);
        let deadline = Instant::now() + self.timing.diagnostics_cap;
        let mut rx = self.changes.clone();
        let unversioned_is_stale = self.config.versions_open_documents;
        let fresh = |p: &Published| p.seq > sent_seq && p.version.map_or(!unversioned_is_stale, |v| v == version);
        loop {
            let current = self.state.read(|i| (i.diagnostics.get(path).cloned(), i.progress.is_empty(), i.closed));
            let Some((published, idle, closed)) = current else { break };
            if closed {
                return Err(LspError::Rpc(RpcError::Exited { method: "diagnostics".into(), status: None }));
            }
            // pyright registers pull diagnostics just after start-up, possibly after this call began.
            if self.pulls_diagnostics() {
                return self.pull(path, text).await;
            }
            if let Some(p) = published.filter(fresh) {
                // Settled: nothing newer within the quiet window while no work is in progress.
                let window = if p.seq <= dep_seq {
                    dependency_quiet
                } else {
                    self.config.diagnostics_quiet.unwrap_or(self.timing.diagnostics_quiet)
                };
                let quiet = tokio::time::timeout(window, rx.changed()).await.is_err();
                if quiet && idle {
                    if p.seq > sent_seq.max(dep_seq)
                        && let (Some(at), Ok(mut l)) = (p.at, self.latency.lock())
                    {
                        *l = (*l / 2).max(at.saturating_duration_since(sent_at));
                    }
                    return Ok(FileDiagnostics {
                        path: path.to_path_buf(),
                        text,
                        items: p.items,
                        possibly_stale: false,
                    });
                }
                if Instant::now() >= deadline {
                    return Ok(FileDiagnostics {
                        path: path.to_path_buf(),
                        text,
                        items: p.items,
                        possibly_stale: true,
                    });
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                break;
            }
        }
        let items = self.state.read(|i| i.diagnostics.get(path).map(|p| p.items.clone())).flatten().unwrap_or_default();
        Ok(FileDiagnostics { path: path.to_path_buf(), text, items, possibly_stale: true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str, disk: Option<(Stamp, SystemTime)>) -> Doc {
        Doc { version: 1, text: text.into(), sent_seq: 0, dep_seq: 0, sent_at: Instant::now(), disk, watched: false }
    }

    /// Documents are not re-read before every request when their stamp is unchanged, yet a
    /// rewrite of the same length within the file clock's tick is still seen (no stale text
    /// sent to the server, so no stale answers or diagnostics).
    #[test]
    fn l1_same_length_rewrite_right_after_a_read_is_seen_and_settled_files_are_not_reread() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("a.py");
        std::fs::write(&p, "x = 1\n").unwrap_or_else(|e| panic!("{e}"));
        let Ok(Disk::Read(text, disk)) = look(&p, None) else { panic!("the first look must read") };
        assert_eq!(text, "x = 1\n");
        // Same length, same second, maybe the same coarse tick: must be read again.
        std::fs::write(&p, "x = 2\n").unwrap_or_else(|e| panic!("{e}"));
        match look(&p, doc(&text, disk).disk) {
            Ok(Disk::Read(now, _)) => assert_eq!(now, "x = 2\n"),
            _ => panic!("a rewrite right after the read was not seen"),
        }
        // Once the file's last change is older than RACY when it was read, an unchanged stamp
        // means unchanged content and the file is not read.
        std::thread::sleep(RACY + Duration::from_millis(20));
        let Ok(Disk::Read(text, disk)) = look(&p, None) else { panic!("read") };
        assert!(matches!(look(&p, doc(&text, disk).disk), Ok(Disk::Unchanged)));
        std::fs::write(&p, "x = 3\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(look(&p, doc(&text, disk).disk), Ok(Disk::Read(t, _)) if t == "x = 3\n"));
    }
}
