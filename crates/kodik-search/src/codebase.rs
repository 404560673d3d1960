//! `codebase_search` (L7): meaning-based search over a local vector index that builds and
//! updates itself.
//!
//! A library ships no embedding model: the host gives a [`kodik_core::Embedder`] (kodik-model's
//! `EmbeddingsClient` speaks the OpenAI-compatible `/v1/embeddings` API of OpenAI, Ollama,
//! LM Studio, vLLM, …). Without one, [`SearchToolset`](crate::SearchToolset) does not offer the
//! tool at all.
//!
//! How the index lives:
//! - The first call (or [`CodebaseIndex::warm`]) starts a background build over the workspace's
//!   files through [`Workspace::walker`] (`.gitignore`, `.ignore`, `.kodikignore`, G16). Binary
//!   files, files over a size cap and secrets (`.env*`, `*.pem`, `*.key`, `id_rsa*`, …) never
//!   reach the embedder.
//! - Files are cut into chunks of whole lines (about 40–80, preferring a blank line, a few
//!   lines of overlap), each sent prefixed with its path.
//! - Every call first brings the index up to date: a walk with each file's size and times
//!   (cheap), then only new or changed files are embedded and deleted ones dropped (G15: a
//!   changed file gives fresh results). A call waits for that at most
//!   [`IndexConfig::call_wait`]; a larger change goes on in the background and the answer says
//!   how much is indexed so far. A failed update stops until the next call, and the answer
//!   says so.
//! - A batch the server refuses for its input (HTTP 400, 413, 422: a text over a small model's
//!   context) is split in halves down to single texts; a text refused alone is left out, its
//!   file kept with what did embed, said once in an answer, and not sent again until the file
//!   changes. Other failures (key, rate limit, outage) leave the files to the next call.
//! - The vectors are kept in a per-user cache folder (`$XDG_CACHE_HOME/kodik/index` or
//!   `~/.cache/kodik/index`), one file per workspace and embedding model, written atomically
//!   with a checksum in the background (after each update and every
//!   [`IndexConfig::save_every`] of a long one; a call never waits for the disk) and loaded on
//!   the next start, so a restart re-embeds only what changed. A corrupt or foreign file is
//!   rebuilt. An untrusted workspace is never written to disk.
//! - Dropping the [`CodebaseIndex`] stops its builds at their next batch and writes what they
//!   embedded.

use std::collections::HashMap;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{EmbedError, Embedder, Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::lsp::CodebaseSearchArgs;
use serde_json::json;
use tokio::sync::watch;

use crate::error::SearchError;
use crate::glob::show_path;
use crate::guard;
use crate::util::{Unreadable, content_stamp, run_blocking};

/// Limits and places of a [`CodebaseIndex`]. Every field has a sensible default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    /// Where index files are kept; `None` keeps the index in memory only. Default:
    /// `$XDG_CACHE_HOME/kodik/index`, else `~/.cache/kodik/index`.
    pub cache_dir: Option<PathBuf>,
    /// Files larger than this are not indexed (default 512 KiB).
    pub max_file_bytes: u64,
    /// At most this many files are indexed (default 20 000); the answer says when the cap was hit.
    pub max_files: usize,
    /// At most this many chunks are kept (default 50 000), which bounds memory: each holds a
    /// vector and a few preview lines.
    pub max_chunks: usize,
    /// Lines a chunk aims for (default 60); it ends at a blank line between two thirds and four
    /// thirds of this when there is one.
    pub chunk_lines: usize,
    /// Lines the next chunk repeats from the end of the previous one (default 5).
    pub overlap_lines: usize,
    /// Bytes of one chunk's text sent to the embedder at most (default 8 KiB); a longer chunk
    /// (one enormous line) is embedded by its start.
    pub max_chunk_bytes: usize,
    /// How long a call waits for the index to catch up before answering from what is indexed
    /// (default 10 s); the update goes on in the background.
    pub call_wait: Duration,
    /// How often a long build saves what it has so far (default 10 s), so a process that ends
    /// mid-build (a one-shot `kodik call`, an agent stopped early) leaves its work to the next.
    pub save_every: Duration,
    /// Batches sent to the embedder at once while building (default 4): a remote API answers
    /// each in about a second, so one at a time leaves a large build waiting on round trips.
    pub concurrent_requests: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            max_file_bytes: 512 * 1024,
            max_files: 20_000,
            max_chunks: 50_000,
            chunk_lines: 60,
            overlap_lines: 5,
            max_chunk_bytes: 8 * 1024,
            call_wait: Duration::from_secs(10),
            save_every: Duration::from_secs(10),
            concurrent_requests: 4,
        }
    }
}

/// `$XDG_CACHE_HOME/kodik/index` or `~/.cache/kodik/index`; `None` when neither is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let from = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = from("XDG_CACHE_HOME").filter(|p| p.is_absolute()).or_else(|| from("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("kodik").join("index"))
}

/// Whether a file name is a secret that must never be sent to an embedding server, whatever
/// the ignore files say: environment files, private keys and certificates, key stores,
/// credential files.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, e)| e);
    lower.starts_with(".env")
        || lower.ends_with(".env")
        || ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"].iter().any(|k| lower.starts_with(k))
        || matches!(
            ext,
            Some(
                "pem" | "key" | "p12" | "pfx" | "jks" | "keystore" | "kdbx" | "gpg" | "asc" | "crt" | "der" | "ppk"
                    | "keytab" | "ovpn" | "tfvars" | "tfstate"
            )
        )
        || matches!(
            lower.as_str(),
            ".netrc" | ".npmrc" | ".pypirc" | ".htpasswd" | ".git-credentials" | "kubeconfig" | ".dockercfg"
        )
        // Rails' credentials.yml(.enc) and secrets.yml, credentials.json, Google's
        // client_secret_….json and service-account key files.
        || lower.starts_with("credentials")
        || lower.starts_with("secrets.")
        || lower.starts_with("client_secret")
        || (lower.ends_with(".json") && lower.contains("service-account"))
        || lower.ends_with(".tfstate.backup")
}

/// Whether a file name is a generated file whose text says nothing a search by meaning could
/// use, and whose embedding costs money: lock files, minified bundles, source maps.
pub fn is_generated_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "cargo.lock"
            | "package-lock.json"
            | "yarn.lock"
            | "pnpm-lock.yaml"
            | "bun.lockb"
            | "poetry.lock"
            | "pipfile.lock"
            | "uv.lock"
            | "composer.lock"
            | "gemfile.lock"
            | "go.sum"
            | "flake.lock"
            | "mix.lock"
            | "pubspec.lock"
            | "podfile.lock"
    ) || lower.ends_with(".min.js")
        || lower.ends_with(".min.css")
        || lower.ends_with(".map")
}

/// Whether decoded file text holds key material that must never be sent to an embedding
/// server, whatever the file is called: a PEM private key, or a JSON key file's
/// `"private_key"` (a Google service account's).
pub fn holds_secret(text: &str) -> bool {
    (text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----")) || text.contains("\"private_key\"")
}

/// One chunk of a file: its lines, a short preview and its vector.
#[derive(Debug, Clone)]
struct Chunk {
    /// 1-based, inclusive.
    start: u32,
    /// 1-based, inclusive.
    end: u32,
    /// The chunk's first lines (each cut at 200 characters).
    preview: String,
    /// The L2-normalised vector quantised to bytes: component `i` is `vector[i] * scale`. A
    /// quarter of the memory (and of the bytes each call ranks) of `f32`s, at a ranking error
    /// far below what separates two chunks.
    vector: Vec<i8>,
    /// See `vector`.
    scale: f32,
}

/// What the index holds for one file.
#[derive(Debug, Clone)]
struct FileEntry {
    /// [`content_stamp`]: modification time, size, change time and inode folded together.
    stamp: (u128, u64),
    chunks: Vec<Chunk>,
}

/// The index of one workspace.
#[derive(Debug, Default)]
struct Data {
    /// Entries are never changed in place, only replaced: a save copies the map (paths and
    /// pointers) and writes it without holding the lock calls answer from.
    files: HashMap<PathBuf, Arc<FileEntry>>,
    dimension: Option<usize>,
    /// Indexable files the last walk found.
    total: usize,
    /// A note about what was left out (caps).
    capped: Option<String>,
    /// What the last update could not do.
    error: Option<EmbedError>,
    /// Whether the last walk found folders it could not read, with the note for the answer.
    unreadable: Option<String>,
    /// Whether anything changed since the last save.
    dirty: bool,
    /// Whether at least one walk finished.
    walked: bool,
    /// Files the server refused (part of) since the last answer, with its reason: the next
    /// answer says so once. They are held with what did embed and not sent again until they
    /// change.
    refused: Vec<(PathBuf, String)>,
}

impl Data {
    fn chunk_count(&self) -> usize {
        self.files.values().map(|f| f.chunks.len()).sum()
    }
}

#[derive(Debug, Default)]
struct Saving {
    /// Whether a background save runs.
    running: bool,
    /// Whether the index changed again while it ran: it saves once more.
    again: bool,
}

#[derive(Debug, Default)]
struct Schedule {
    /// Update passes asked for.
    requested: u64,
    /// Whether a background task is running passes.
    running: bool,
}

/// The index of one workspace: data, the update schedule and where it is saved.
struct WsIndex {
    ws: Workspace,
    embedder: Arc<dyn Embedder>,
    config: Arc<IndexConfig>,
    cache_file: Option<PathBuf>,
    data: Mutex<Data>,
    schedule: Mutex<Schedule>,
    /// The last pass that finished.
    done: watch::Sender<u64>,
    /// Set when the [`CodebaseIndex`] holding this is dropped: a build stops at its next batch
    /// instead of paying for embeddings nobody will search.
    closed: watch::Sender<bool>,
    /// The background save: one at a time, the latest state wins.
    saving: Mutex<Saving>,
    /// Held while the cache file is written, so the background save and the one at drop never
    /// write at once.
    writing: Mutex<()>,
}

impl std::fmt::Debug for WsIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsIndex").field("roots", &self.ws.roots()).field("cache_file", &self.cache_file).finish()
    }
}

/// How far an index is, for hosts that show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexStatus {
    /// Files indexed (binary or empty ones count as done).
    pub indexed_files: usize,
    /// Indexable files found by the last walk.
    pub total_files: usize,
    /// Chunks held.
    pub chunks: usize,
    /// Whether an update is running.
    pub updating: bool,
    /// What the last update could not do.
    pub error: Option<EmbedError>,
}

/// The vector index behind `codebase_search`: one per embedder, holding an index per workspace
/// it was used with. Share it (`Arc`) between the tool and the host, which may
/// [`warm`](Self::warm) it at start.
pub struct CodebaseIndex {
    embedder: Arc<dyn Embedder>,
    config: Arc<IndexConfig>,
    workspaces: Mutex<HashMap<Vec<PathBuf>, Arc<WsIndex>>>,
}

impl std::fmt::Debug for CodebaseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodebaseIndex")
            .field("model", &self.embedder.model())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CodebaseIndex {
    /// An index over `embedder`'s vectors with default limits and the per-user cache folder.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self::with_config(embedder, IndexConfig::default())
    }

    /// An index with the given limits.
    pub fn with_config(embedder: Arc<dyn Embedder>, config: IndexConfig) -> Self {
        Self { embedder, config: Arc::new(config), workspaces: Mutex::default() }
    }

    /// The limits in use.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Starts building (or updating) the index of `ws` in the background and returns at once.
    /// Needs a Tokio runtime.
    pub async fn warm(&self, ws: &Workspace) {
        let index = self.workspace(ws).await;
        index.request();
    }

    /// Waits until the index of `ws` is up to date with the files as they are now, at most
    /// `timeout`; `true` when it is.
    pub async fn wait_until_current(&self, ws: &Workspace, timeout: Duration) -> bool {
        let index = self.workspace(ws).await;
        let wanted = index.request();
        index.wait_for(wanted, timeout).await
    }

    /// Writes what is embedded so far to the cache, blocking until it is on disk (after a
    /// background save under way): a host that is about to exit calls it, or the last update's
    /// save may never run and the next process embeds those files again. Builds go on.
    pub fn flush(&self) {
        let held: Vec<Arc<WsIndex>> =
            self.workspaces.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        for index in held {
            index.save_now();
        }
    }

    /// How far the index of `ws` is (`None` before its first use).
    pub fn status(&self, ws: &Workspace) -> Option<IndexStatus> {
        let index = self.workspaces.lock().unwrap_or_else(PoisonError::into_inner).get(ws.roots()).cloned()?;
        let data = index.data();
        let updating = index.schedule.lock().unwrap_or_else(PoisonError::into_inner).running;
        Some(IndexStatus {
            indexed_files: data.files.len(),
            total_files: data.total,
            chunks: data.chunk_count(),
            updating,
            error: data.error.clone(),
        })
    }

    /// The index of `ws`, loaded from the cache file on first use.
    async fn workspace(&self, ws: &Workspace) -> Arc<WsIndex> {
        if let Some(found) = self.workspaces.lock().unwrap_or_else(PoisonError::into_inner).get(ws.roots()) {
            return found.clone();
        }
        let cache_file = self
            .config
            .cache_dir
            .as_ref()
            .filter(|_| ws.is_trusted())
            .map(|dir| dir.join(cache_name(ws.roots(), self.embedder.model())));
        let loaded = match cache_file.clone() {
            Some(file) => {
                let (roots, model, dim) =
                    (ws.roots().to_vec(), self.embedder.model().to_owned(), self.embedder.dimension());
                tokio::task::spawn_blocking(move || load(&file, &roots, &model, dim)).await.ok().flatten()
            }
            None => None,
        };
        let index = Arc::new(WsIndex {
            ws: ws.clone(),
            embedder: self.embedder.clone(),
            config: self.config.clone(),
            cache_file,
            data: Mutex::new(loaded.unwrap_or_default()),
            schedule: Mutex::default(),
            done: watch::channel(0).0,
            closed: watch::channel(false).0,
            saving: Mutex::default(),
            writing: Mutex::default(),
        });
        // Another call may have loaded it meanwhile: the first one in wins.
        self.workspaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(ws.roots().to_vec())
            .or_insert(index)
            .clone()
    }
}

impl Drop for CodebaseIndex {
    /// Stops the builds of this index at their next batch and writes what they embedded: the
    /// host is going away, and a background save may not get to run before its runtime ends.
    /// This blocks for the write (a fraction of a second at the chunk cap), after a background
    /// save under way, if any.
    fn drop(&mut self) {
        let held = std::mem::take(self.workspaces.get_mut().unwrap_or_else(PoisonError::into_inner));
        for index in held.values() {
            index.closed.send_replace(true);
            index.save_now();
        }
    }
}

impl WsIndex {
    fn data(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for an update pass that starts from now; returns its number.
    fn request(self: &Arc<Self>) -> u64 {
        let mut schedule = self.schedule.lock().unwrap_or_else(PoisonError::into_inner);
        schedule.requested += 1;
        let wanted = schedule.requested;
        if !schedule.running {
            schedule.running = true;
            let me = self.clone();
            tokio::spawn(async move { me.run().await });
        }
        wanted
    }

    /// Runs passes until none is asked for: a change made while a pass walked is seen by the next.
    async fn run(self: Arc<Self>) {
        loop {
            let this = self.schedule.lock().unwrap_or_else(PoisonError::into_inner).requested;
            self.pass().await;
            self.done.send_replace(this);
            let mut schedule = self.schedule.lock().unwrap_or_else(PoisonError::into_inner);
            if schedule.requested == this || *self.closed.borrow() {
                schedule.running = false;
                return;
            }
        }
    }

    /// Waits until pass `wanted` finished, at most `timeout`.
    async fn wait_for(&self, wanted: u64, timeout: Duration) -> bool {
        let mut rx = self.done.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|done| *done >= wanted)).await.is_ok_and(|r| r.is_ok())
    }

    /// One update: walk, drop what is gone, embed what is new or changed, then save in the
    /// background (the call waiting for this pass does not wait for the disk).
    async fn pass(self: &Arc<Self>) {
        let mut closed = self.closed.subscribe();
        let (ws, config) = (self.ws.clone(), self.config.clone());
        let walked = match tokio::task::spawn_blocking(move || walk(&ws, &config)).await {
            Ok(walked) => walked,
            Err(e) => {
                tracing::warn!("codebase index walk failed: {e}");
                return;
            }
        };
        let mut todo: Vec<(PathBuf, (u128, u64))> = {
            let mut data = self.data();
            let before = data.files.len();
            data.files.retain(|path, _| walked.files.contains_key(path));
            if data.files.len() != before {
                data.dirty = true;
            }
            data.total = walked.files.len();
            data.capped = walked.capped.clone();
            data.unreadable = walked.unreadable.clone();
            data.walked = true;
            walked
                .files
                .iter()
                .filter(|(path, stamp)| data.files.get(*path).is_none_or(|e| e.stamp != **stamp))
                .map(|(p, s)| (p.clone(), *s))
                .collect()
        };
        // Path order: a partial index covers whole folders, which reads more sensibly.
        todo.sort();
        let mut failed = None;
        let mut full = false;
        let mut at = 0;
        let mut saved = std::time::Instant::now();
        // Chunks sent and not answered yet, which the chunk cap counts as held.
        let mut reserved = 0usize;
        let mut inflight: tokio::task::JoinSet<Embedded> = tokio::task::JoinSet::new();
        let requests = self.config.concurrent_requests.max(1);
        let verdict = Arc::new(Verdict::default());
        loop {
            // Keep up to `requests` batches at the embedder; stop sending after a failure or
            // once the index's owner is gone.
            while inflight.len() < requests && at < todo.len() && failed.is_none() && !full && !*self.closed.borrow() {
                // Read and cut files until a batch's worth of chunks is ready (the slice bounds
                // the copy: a run of binary files yields no chunks).
                let want = self.embedder.max_batch().max(1);
                let slice: Vec<_> = todo[at..(at + want.max(16) * 2).min(todo.len())].to_vec();
                let (ws, config) = (self.ws.clone(), self.config.clone());
                let Ok(mut group) = tokio::task::spawn_blocking(move || read_group(&ws, &config, &slice, want)).await
                else {
                    failed = Some(EmbedError::BadResponse("reading the files failed".into()));
                    break;
                };
                at += group.len();
                // The files that still fit under the chunk cap; the rest are left out, and said so.
                // A changed file's old chunks go when its new ones come: they do not count
                // against it (at the cap, an edited file would otherwise never fit again).
                let (held, old): (usize, Vec<usize>) = {
                    let data = self.data();
                    let old = group.iter().map(|f| data.files.get(&f.path).map_or(0, |e| e.chunks.len())).collect();
                    (data.chunk_count(), old)
                };
                let mut room = self.config.max_chunks as i64 - (held + reserved) as i64;
                let (mut fit, mut used) = (0, 0);
                for (f, old) in group.iter().zip(old) {
                    let grows = f.chunks.len() as i64 - old as i64;
                    if grows > room {
                        break;
                    }
                    room -= grows;
                    used += f.chunks.len();
                    fit += 1;
                }
                full = fit < group.len();
                group.truncate(fit);
                reserved += used;
                let (embedder, verdict) = (self.embedder.clone(), verdict.clone());
                inflight.spawn(async move {
                    let texts: Vec<String> =
                        group.iter().flat_map(|f| f.chunks.iter().map(|c| c.text.clone())).collect();
                    let vectors = embed_splitting(&*embedder, &texts, &verdict).await;
                    Embedded { group, chunks: texts.len(), vectors }
                });
            }
            let joined = tokio::select! {
                joined = inflight.join_next() => joined,
                () = async { let _ = closed.wait_for(|c| *c).await; } => {
                    // Requests under way are dropped too (their connections close): nobody
                    // will search what they would bring.
                    inflight.abort_all();
                    break;
                }
            };
            let Some(joined) = joined else { break };
            let Embedded { group, chunks, vectors } = match joined {
                Ok(done) => done,
                Err(e) => {
                    failed.get_or_insert(EmbedError::BadResponse(format!("an embedding task failed: {e}")));
                    continue;
                }
            };
            reserved = reserved.saturating_sub(chunks);
            let vectors = match vectors {
                Ok(v) => v,
                Err(e) => {
                    // The first failure is the one reported; batches already sent still count.
                    failed.get_or_insert(e);
                    continue;
                }
            };
            let mut vectors = vectors.into_iter();
            {
                let mut data = self.data();
                for file in group {
                    let mut chunks = Vec::with_capacity(file.chunks.len());
                    let mut refused = None;
                    for c in file.chunks {
                        let vector = match vectors.next() {
                            Some(Ok(vector)) => normalised(vector),
                            Some(Err(reason)) => {
                                refused.get_or_insert(reason);
                                continue;
                            }
                            None => break,
                        };
                        // Vectors of another length belong to another model: start over with these.
                        if data.dimension.is_some_and(|d| d != vector.len()) {
                            data.files.clear();
                        }
                        data.dimension = Some(vector.len());
                        let (vector, scale) = quantised(&vector);
                        chunks.push(Chunk { start: c.start, end: c.end, preview: c.preview, vector, scale });
                    }
                    if let Some(reason) = refused {
                        data.refused.push((file.path.clone(), reason));
                    }
                    data.files.insert(file.path, Arc::new(FileEntry { stamp: file.stamp, chunks }));
                }
                data.dirty = true;
            }
            if saved.elapsed() >= self.config.save_every {
                self.request_save();
                saved = std::time::Instant::now();
            }
        }
        {
            let mut data = self.data();
            if full {
                data.capped = Some(format!(
                    "the index holds its maximum of {} chunks; {} more files are not indexed",
                    self.config.max_chunks,
                    data.total.saturating_sub(data.files.len())
                ));
                // What is left out is not "still being indexed".
                data.total = data.files.len();
            }
            data.error = failed;
        }
        self.request_save();
    }

    /// Saves the index in the background when it changed: one save at a time, and one more
    /// after it when the index changed meanwhile, so the latest state is the one left on disk.
    fn request_save(self: &Arc<Self>) {
        if self.cache_file.is_none() {
            return;
        }
        {
            let mut saving = self.saving.lock().unwrap_or_else(PoisonError::into_inner);
            if saving.running {
                saving.again = true;
                return;
            }
            saving.running = true;
        }
        let turn = SaveTurn { index: self.clone(), ended: false };
        // A blocking task from the start: a runtime that shuts down waits for one that started
        // (an async task would be dropped before it wrote). Either way the write is atomic.
        tokio::task::spawn_blocking(move || {
            loop {
                turn.index.save_now();
                let mut saving = turn.index.saving.lock().unwrap_or_else(PoisonError::into_inner);
                if !saving.again {
                    saving.running = false;
                    drop(saving);
                    turn.end();
                    return;
                }
                saving.again = false;
            }
        });
    }

    /// Writes the index to its cache file when it changed; blocks for the write.
    fn save_now(&self) {
        let Some(file) = &self.cache_file else { return };
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let snapshot = {
            let mut data = self.data();
            if !data.dirty {
                return;
            }
            data.dirty = false;
            Data { files: data.files.clone(), dimension: data.dimension, ..Data::default() }
        };
        let bytes = encode(&snapshot, self.ws.roots(), self.embedder.model());
        if let Err(e) = write_atomic(file, &bytes) {
            tracing::warn!("could not save the codebase index: {e}");
            // The next save tries again.
            self.data().dirty = true;
        }
    }
}

/// Whether the embedding server takes texts at all in this pass: a refusal of one text alone
/// is that text's fault only when the server embeds a short probe right after it. A server that
/// refuses everything (a wrong model name answered with 400), or starts to mid-pass (a gateway
/// whose budget ran out, a local model swapped), must not get every file marked as not
/// embeddable; once the probe fails, the rest of the pass marks nothing.
#[derive(Default)]
struct Verdict {
    /// Whether the probe was refused in this pass.
    broken: AtomicBool,
}

/// The text sent to learn whether the server takes anything: short enough for any model.
const PROBE: &str = "fn main() {}";

impl Verdict {
    /// Asks the probe after each text refused alone (refusals are rare; a probe is one short
    /// request), since the server may have stopped taking anything since its last answer.
    async fn server_works(&self, embedder: &dyn Embedder) -> bool {
        if self.broken.load(Ordering::Relaxed) {
            return false;
        }
        let works = embed_checked(embedder, &[PROBE.to_owned()]).await.is_ok();
        if !works {
            self.broken.store(true, Ordering::Relaxed);
        }
        works
    }
}

/// The server's reason when it refused a batch for what is in it (HTTP 400, 413, 422: input
/// too long, too many tokens), as opposed to a key, a limit or an outage, which say nothing
/// about the texts.
fn refusal(e: &EmbedError) -> Option<String> {
    match e {
        EmbedError::Http { status: status @ (400 | 413 | 422), message } => {
            let message = message.trim();
            Some(if message.is_empty() { format!("HTTP {status}") } else { cut_line(message, 120) })
        }
        _ => None,
    }
}

/// `embedder.embed`, with the count of vectors checked.
async fn embed_checked(embedder: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
    match embedder.embed(texts).await {
        Ok(v) if v.len() != texts.len() => {
            Err(EmbedError::BadResponse(format!("{} texts sent, {} vectors received", texts.len(), v.len())))
        }
        other => other,
    }
}

/// Embeds `texts`, one vector or one refusal per text. A batch the server refuses for its
/// input is split in halves and each sent again, down to single texts, so one text over a
/// small model's context does not keep the rest of its batch out; a text refused alone gets
/// the server's reason. Any other failure (or a refusal from a server that takes nothing)
/// fails the whole batch.
async fn embed_splitting(
    embedder: &dyn Embedder,
    texts: &[String],
    verdict: &Verdict,
) -> Result<Vec<Result<Vec<f32>, String>>, EmbedError> {
    let mut out: Vec<Option<Result<Vec<f32>, String>>> = (0..texts.len()).map(|_| None).collect();
    // Ranges still to send, the first on top: texts come back in their order.
    let mut todo = if texts.is_empty() { Vec::new() } else { vec![(0, texts.len())] };
    while let Some((from, to)) = todo.pop() {
        let e = match embed_checked(embedder, &texts[from..to]).await {
            Ok(vectors) => {
                for (slot, v) in out[from..to].iter_mut().zip(vectors) {
                    *slot = Some(Ok(v));
                }
                continue;
            }
            Err(e) => e,
        };
        match refusal(&e) {
            Some(_) if to - from > 1 => {
                let mid = from + (to - from) / 2;
                todo.push((mid, to));
                todo.push((from, mid));
            }
            Some(reason) => {
                if !verdict.server_works(embedder).await {
                    return Err(e);
                }
                out[from] = Some(Err(reason));
            }
            None => return Err(e),
        }
    }
    // The ranges cover every text once, so every slot is filled.
    Ok(out.into_iter().flatten().collect())
}

/// A batch's answer: its files, how many chunks were sent, and their vectors.
struct Embedded {
    group: Vec<ReadFile>,
    chunks: usize,
    /// Per text its vector, or the server's reason for refusing it alone.
    vectors: Result<Vec<Result<Vec<f32>, String>>, EmbedError>,
}

/// What a walk found: the indexable files with their stamps.
struct Walked {
    files: HashMap<PathBuf, (u128, u64)>,
    capped: Option<String>,
    unreadable: Option<String>,
}

fn walk(ws: &Workspace, config: &IndexConfig) -> Walked {
    let roots = ws.roots();
    let found: Mutex<Vec<(PathBuf, (u128, u64))>> = Mutex::default();
    let unreadable = Unreadable::new();
    for (i, root) in roots.iter().enumerate() {
        // A root inside another is walked through the outer one.
        if roots.iter().enumerate().any(|(j, o)| j != i && root.starts_with(o) && (o != root || j < i)) {
            continue;
        }
        let enters = unreadable.clone();
        // In parallel, as glob walks: every call walks the whole workspace.
        ws.walker_with(root, move |e| enters.enters(e)).build_parallel().run(|| {
            let mut local = Flush { files: Vec::new(), into: &found };
            let unreadable = &unreadable;
            Box::new(move |entry| {
                let entry = match entry {
                    Ok(e) => e,
                    Err(e) => {
                        unreadable.walk_error(&e);
                        return ignore::WalkState::Continue;
                    }
                };
                if entry.file_type().is_some_and(|t| t.is_file())
                    && !is_secret_name(&entry.file_name().to_string_lossy())
                    && !is_generated_name(&entry.file_name().to_string_lossy())
                    && let Ok(meta) = entry.metadata()
                    && meta.len() <= config.max_file_bytes
                    && meta.len() > 0
                {
                    local.files.push((entry.into_path(), content_stamp(Some(&meta))));
                }
                ignore::WalkState::Continue
            })
        });
    }
    let mut found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    let mut capped = None;
    if found.len() > config.max_files {
        // The same files every time (path order), or the index would churn between calls.
        found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        capped = Some(format!(
            "{} more files are not indexed: the index takes at most {} files",
            found.len() - config.max_files,
            config.max_files
        ));
        found.truncate(config.max_files);
    }
    Walked { files: found.into_iter().collect(), capped, unreadable: unreadable.note(ws) }
}

/// The background save's turn: when its task never ran (the runtime shut down first) or
/// panicked, the next change must still be able to start a save.
struct SaveTurn {
    index: Arc<WsIndex>,
    ended: bool,
}

impl SaveTurn {
    /// The task saw `running` set back itself.
    fn end(mut self) {
        self.ended = true;
    }
}

impl Drop for SaveTurn {
    fn drop(&mut self) {
        if !self.ended {
            self.index.saving.lock().unwrap_or_else(PoisonError::into_inner).running = false;
        }
    }
}

/// A walker thread's files, added to the shared list when the thread is done with them.
struct Flush<'a> {
    files: Vec<(PathBuf, (u128, u64))>,
    into: &'a Mutex<Vec<(PathBuf, (u128, u64))>>,
}

impl Drop for Flush<'_> {
    fn drop(&mut self) {
        self.into.lock().unwrap_or_else(PoisonError::into_inner).append(&mut self.files);
    }
}

/// A chunk cut from a file, before embedding.
struct ChunkText {
    start: u32,
    end: u32,
    preview: String,
    /// What is embedded: the path, a line break, the lines.
    text: String,
}

struct ReadFile {
    path: PathBuf,
    stamp: (u128, u64),
    chunks: Vec<ChunkText>,
}

/// Reads and cuts files from the start of `todo` until `want` chunks are ready (at least one file).
fn read_group(ws: &Workspace, config: &IndexConfig, todo: &[(PathBuf, (u128, u64))], want: usize) -> Vec<ReadFile> {
    let mut out = Vec::new();
    let mut count = 0;
    for (path, stamp) in todo {
        if count >= want && !out.is_empty() {
            break;
        }
        // A file that cannot be read now, or is binary, is recorded without chunks so it is
        // not read again until it changes.
        // Decoded as read_file decodes (R6): UTF-16, Windows-1251 and the project's
        // `files.encoding` become text; NUL bytes in any other pattern mean binary.
        let chunks = match std::fs::read(path).map(|b| kodik_core::text::decode(&b, ws.settings().encoding())) {
            // A file holding a private key is kept out whole, like one named as a secret.
            Ok(Ok(decoded)) if !holds_secret(&decoded.text) => chunk_file(&show_path(ws, path), &decoded.text, config),
            _ => Vec::new(),
        };
        count += chunks.len();
        out.push(ReadFile { path: path.clone(), stamp: *stamp, chunks });
    }
    out
}

/// Cuts `text` into chunks of whole lines.
fn chunk_file(shown: &str, text: &str, config: &IndexConfig) -> Vec<ChunkText> {
    let lines: Vec<&str> = text.lines().collect();
    let target = config.chunk_lines.max(3);
    let (min, max) = ((target * 2 / 3).max(1), (target * 4 / 3).max(2));
    let mut out = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let hard_end = (start + max).min(lines.len());
        let mut end = hard_end;
        if hard_end < lines.len() {
            // The last blank line in the preferred window, so a chunk holds whole functions.
            if let Some(blank) = (start + min..hard_end).rev().find(|&i| lines[i].trim().is_empty()) {
                end = blank + 1;
            } else {
                end = (start + target).min(lines.len());
            }
        }
        let body = &lines[start..end];
        if body.iter().any(|l| !l.trim().is_empty()) {
            let mut text = String::with_capacity(shown.len() + 1 + body.iter().map(|l| l.len() + 1).sum::<usize>());
            text.push_str(shown);
            text.push('\n');
            for line in body {
                if text.len() + line.len() > config.max_chunk_bytes {
                    let mut cut = config.max_chunk_bytes.saturating_sub(text.len()).min(line.len());
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.push_str(&line[..cut]);
                    break;
                }
                text.push_str(line);
                text.push('\n');
            }
            let preview = body
                .iter()
                .filter(|l| !l.trim().is_empty())
                .take(4)
                .map(|l| cut_line(l.trim_end(), 200))
                .collect::<Vec<_>>()
                .join("\n");
            out.push(ChunkText { start: (start + 1) as u32, end: end as u32, preview, text });
        }
        if end >= lines.len() {
            break;
        }
        let next = end.saturating_sub(config.overlap_lines.min(target / 2));
        start = if next > start { next } else { end };
    }
    out
}

fn cut_line(line: &str, max_chars: usize) -> String {
    match line.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// The dot product of a quantised vector and a query (without the chunk's scale), in eight
/// lanes so the compiler can use SIMD: a plain `zip().sum()` of floats must add in order and
/// stays scalar. Every call ranks every chunk, which is most of a call's time on a large index.
fn dot(a: &[i8], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| f32::from(*x) * y).sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            lanes[i] += f32::from(x[i]) * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `v` as bytes and the scale that gives it back: the largest component becomes ±127.
fn quantised(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    // In range by construction: |x| <= max, so |x / scale| <= 127.
    (v.iter().map(|x| (x / scale).round() as i8).collect(), scale)
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// The cache file
// ---------------------------------------------------------------------------------------------

/// The format's name and version: a file of another version is rebuilt.
const MAGIC: &[u8; 8] = b"KODIKIX2";

/// The file name for a workspace and model: a hash of both, so a model or workspace never reads
/// another's vectors (the dimension is checked inside).
fn cache_name(roots: &[PathBuf], model: &str) -> String {
    let mut key = Vec::new();
    for r in roots {
        key.extend_from_slice(r.as_os_str().as_encoded_bytes());
        key.push(0);
    }
    key.extend_from_slice(model.as_bytes());
    format!("{:016x}.idx", xxhash_rust::xxh3::xxh3_64(&key))
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n.min(u32::MAX as usize) as u32).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

/// magic, header (roots, model, dimension), files (path, stamp, chunks: lines, preview, scale,
/// one byte per dimension), xxh3 of all before.
fn encode(data: &Data, roots: &[PathBuf], model: &str) -> Vec<u8> {
    let dim = data.dimension.unwrap_or(0);
    let mut out = Vec::with_capacity(64 + data.chunk_count() * (dim + 120));
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, roots.len());
    for r in roots {
        put_bytes(&mut out, r.as_os_str().as_encoded_bytes());
    }
    put_bytes(&mut out, model.as_bytes());
    put_u32(&mut out, dim);
    put_u32(&mut out, data.files.len());
    for (path, entry) in &data.files {
        put_bytes(&mut out, path.as_os_str().as_encoded_bytes());
        out.extend_from_slice(&entry.stamp.0.to_le_bytes());
        out.extend_from_slice(&entry.stamp.1.to_le_bytes());
        put_u32(&mut out, entry.chunks.len());
        for c in &entry.chunks {
            put_u32(&mut out, c.start as usize);
            put_u32(&mut out, c.end as usize);
            put_bytes(&mut out, c.preview.as_bytes());
            out.extend_from_slice(&c.scale.to_le_bytes());
            out.extend(c.vector.iter().map(|x| x.to_le_bytes()[0]));
        }
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize)
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(n)
    }
}

/// The index saved in `file`, or `None` when there is none or it is corrupt or someone else's
/// (another workspace, model or dimension): then the index is rebuilt and the file replaced.
fn load(file: &Path, roots: &[PathBuf], model: &str, dimension: Option<usize>) -> Option<Data> {
    let bytes = std::fs::read(file).ok()?;
    let decoded = decode(&bytes, roots, model, dimension);
    if decoded.is_none() {
        tracing::warn!(file = %file.display(), "the codebase index cache is corrupt or not this index's; rebuilding it");
    }
    decoded
}

fn decode(bytes: &[u8], roots: &[PathBuf], model: &str, dimension: Option<usize>) -> Option<Data> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if xxhash_rust::xxh3::xxh3_64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut r = Reader { bytes: body };
    if r.take(8)? != MAGIC {
        return None;
    }
    let n_roots = r.u32()?;
    if n_roots != roots.len() {
        return None;
    }
    for root in roots {
        if r.bytes()? != root.as_os_str().as_encoded_bytes() {
            return None;
        }
    }
    if r.bytes()? != model.as_bytes() {
        return None;
    }
    let dim = r.u32()?;
    if dimension.is_some_and(|d| d != dim) {
        return None;
    }
    let n_files = r.u32()?;
    let mut files = HashMap::with_capacity(n_files.min(1 << 20));
    for _ in 0..n_files {
        // The path's own bytes: a name that is not UTF-8 is kept as it is.
        let path = PathBuf::from(std::ffi::OsString::from_vec(r.bytes()?.to_vec()));
        let mtime = u128::from_le_bytes(r.take(16)?.try_into().ok()?);
        let len = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
        let n_chunks = r.u32()?;
        let mut chunks = Vec::with_capacity(n_chunks.min(1 << 16));
        for _ in 0..n_chunks {
            let start = r.u32()? as u32;
            let end = r.u32()? as u32;
            let preview = String::from_utf8(r.bytes()?.to_vec()).ok()?;
            let scale = f32::from_le_bytes(r.take(4)?.try_into().ok()?);
            if !scale.is_finite() {
                return None;
            }
            let vector = r.take(dim)?.iter().map(|b| i8::from_le_bytes([*b])).collect();
            chunks.push(Chunk { start, end, preview, vector, scale });
        }
        files.insert(path, Arc::new(FileEntry { stamp: (mtime, len), chunks }));
    }
    if !r.bytes.is_empty() {
        return None;
    }
    Some(Data { files, dimension: (dim > 0).then_some(dim), ..Data::default() })
}

/// Writes `bytes` to `file` with kodik-core's atomic write (a crash leaves the old file or the
/// new one, never half of one) in a folder only the user can read: the file holds lines of
/// the project's code.
fn write_atomic(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    kodik_core::fs::write_atomic(file, bytes, false)
}

// ---------------------------------------------------------------------------------------------
// The tool
// ---------------------------------------------------------------------------------------------

/// The longest query embedded.
const MAX_QUERY_BYTES: usize = 4096;

/// How long a call waits for its query's vector, retries included: the client's own limits
/// (a request timeout, retries with backoff) allow minutes against a server that hangs.
const QUERY_EMBED_LIMIT: Duration = Duration::from_secs(30);

/// The `codebase_search` tool over a shared [`CodebaseIndex`].
#[derive(Debug, Clone)]
pub struct CodebaseSearchTool {
    spec: ToolSpec,
    index: Arc<CodebaseIndex>,
}

impl CodebaseSearchTool {
    /// The tool over `index`.
    pub fn new(index: Arc<CodebaseIndex>) -> Self {
        Self { spec: kodik_schema::spec::<CodebaseSearchArgs>(), index }
    }

    /// The index it searches.
    pub fn index(&self) -> &Arc<CodebaseIndex> {
        &self.index
    }
}

/// One result.
struct Hit<'a> {
    score: f32,
    path: &'a Path,
    chunk: &'a Chunk,
}

#[async_trait]
impl TypedTool for CodebaseSearchTool {
    type Args = CodebaseSearchArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn reads(&self, args: &CodebaseSearchArgs, ws: &Workspace) -> Vec<Resource> {
        crate::glob::searched(ws, args.path.as_deref())
    }

    fn check(&self, args: &CodebaseSearchArgs) -> Result<(), ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::InvalidInput {
                tool: "codebase_search".into(),
                field: Some("query".into()),
                message: "the query is empty: describe in words what you are looking for".into(),
            });
        }
        // Embedding models take a few thousand tokens at most; a pasted file is no question.
        if args.query.len() > MAX_QUERY_BYTES {
            return Err(ToolError::InvalidInput {
                tool: "codebase_search".into(),
                field: Some("query".into()),
                message: format!(
                    "the query is {} bytes; describe what you are looking for in a sentence or two (at most {} \
                     bytes), or use grep for exact text",
                    args.query.len(),
                    MAX_QUERY_BYTES
                ),
            });
        }
        Ok(())
    }

    async fn run(&self, args: CodebaseSearchArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = cx.workspace.clone();
        // The folder first: a refused path costs no update and no embedding.
        let base = match args.path.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
            Some(p) => {
                let ws2 = ws.clone();
                let p = p.to_owned();
                Some(
                    run_blocking(&cx.cancel, move || {
                        let resolved = ws2.check_readable(&p)?;
                        if !resolved.exists() {
                            return Err(ws2.not_found(&resolved).into());
                        }
                        Ok(resolved)
                    })
                    .await?,
                )
            }
            None => None,
        };
        let limit = args.limit.unwrap_or(10).clamp(1, 50) as usize;
        let index = self.index.workspace(&ws).await;
        let wanted = index.request();
        let current = tokio::select! {
            current = index.wait_for(wanted, self.index.config.call_wait) => current,
            () = cx.cancel.cancelled() => return Err(SearchError::Cancelled.into()),
        };
        let query = vec![args.query.trim().to_owned()];
        let query_vector = tokio::select! {
            v = tokio::time::timeout(QUERY_EMBED_LIMIT, self.index.embedder.embed(&query)) => {
                v.unwrap_or_else(|_| Err(EmbedError::Unreachable(format!(
                    "no vector for the query within {} s",
                    QUERY_EMBED_LIMIT.as_secs()
                ))))
            }
            () = cx.cancel.cancelled() => return Err(SearchError::Cancelled.into()),
        };
        let query_vector = match query_vector {
            Ok(mut v) if v.len() == 1 => normalised(v.remove(0)),
            Ok(v) => {
                return Err(embed_failure(&EmbedError::BadResponse(format!(
                    "1 text sent, {} vectors received",
                    v.len()
                ))));
            }
            Err(e) => return Err(embed_failure(&e)),
        };
        // Vectors of another length come from another model under the same name (a local
        // server that swapped its model): none of the index compares with them, so it starts
        // over rather than answering "no indexed code" for good.
        let held = index.data().dimension.filter(|&d| d != query_vector.len());
        if let Some(held) = held {
            {
                let mut data = index.data();
                data.files.clear();
                data.dimension = None;
                data.dirty = true;
            }
            index.request();
            return Ok(ToolOutput::text(format!(
                "The embedding model now gives vectors of {} numbers, but the index was built with {held}: \
                 another model answers under the name `{}`. The index is being rebuilt for it; ask again in a \
                 moment (grep finds exact text meanwhile).",
                query_vector.len(),
                self.index.embedder.model()
            )));
        }
        // The update may have finished while the query was embedded.
        let current = current || *index.done.borrow() >= wanted;
        let (index2, ws2, base2) = (index.clone(), ws.clone(), base.clone());
        let result = run_blocking(&cx.cancel, move || {
            Ok(answer(&index2, &ws2, base2.as_deref(), &query_vector, limit, current))
        })
        .await?;
        let Answer { text, fingerprint, settled, meta } = result?;
        if settled {
            let key = format!(
                "codebase_search\0{}\0{}\0{limit}",
                args.query.trim(),
                base.as_deref().map(|b| b.display().to_string()).unwrap_or_default()
            );
            if let Some(out) = guard::check(&cx.session, &key, fingerprint, "the index holds the same files") {
                return Ok(out);
            }
        }
        Ok(ToolOutput::text(text).with_meta(meta))
    }
}

/// The error for a failed embedding: what happened and what to do.
fn embed_failure(e: &EmbedError) -> ToolError {
    let advice = e.advice().map(|a| format!(" {a}")).unwrap_or_default();
    ToolError::Failed(format!("codebase_search could not embed the query: {e}.{advice}"))
}

struct Answer {
    text: String,
    fingerprint: u64,
    /// Whether the index was complete and healthy: only then may an identical repeat be
    /// answered "unchanged".
    settled: bool,
    meta: serde_json::Value,
}

fn answer(
    index: &WsIndex,
    ws: &Workspace,
    base: Option<&Path>,
    query: &[f32],
    limit: usize,
    current: bool,
) -> Result<Answer, ToolError> {
    // Whether a pass runs now: after a failed one nothing does until the next call, and the
    // answer must not say the rest "is being indexed".
    let running = index.schedule.lock().unwrap_or_else(PoisonError::into_inner).running;
    let mut data = index.data();
    let indexed = data.files.len();
    let total = data.total.max(indexed);
    let mut notes = Vec::new();
    let mut settled = current && data.error.is_none();
    let retry = if running { "It is being retried in the background" } else { "The next call retries" };
    if let Some(e) = &data.error {
        let advice = e.advice().map(|a| format!(" {a}")).unwrap_or_default();
        if indexed == 0 {
            return Err(ToolError::Failed(format!(
                "codebase_search could not build its index: {e}.{advice} {retry}; meanwhile use grep or glob."
            )));
        }
        if indexed < total && !running {
            settled = false;
            notes.push(format!(
                "[index: {indexed} of {total} files so far; results may be incomplete — indexing stopped: {e}.\
                 {advice} The next call retries.]"
            ));
        } else {
            notes.push(format!(
                "[the index could not be brought up to date: {e}.{advice} {retry}; results come from what was \
                 indexed before.]"
            ));
        }
    }
    if indexed < total && (running || data.error.is_none()) {
        settled = false;
        let rest = if running {
            "the rest is being indexed in the background, ask again shortly"
        } else {
            "the next call goes on indexing"
        };
        notes.push(format!("[index: {indexed} of {total} files so far; results may be incomplete — {rest}]"));
    } else if indexed >= total && !current && data.error.is_none() {
        notes.push(
            "[index: still checking for changes made since its last update; results may miss them — ask again \
             shortly]"
                .to_owned(),
        );
    }
    if let Some(c) = &data.capped {
        notes.push(format!("[{c}]"));
    }
    if let Some(u) = &data.unreadable {
        notes.push(u.clone());
    }
    // Said once: the files stay out until they change, and every later answer would repeat it.
    let refused = std::mem::take(&mut data.refused);
    if !refused.is_empty() {
        let shown: Vec<String> =
            refused.iter().take(5).map(|(path, reason)| format!("{} ({reason})", show_path(ws, path))).collect();
        let more = refused.len() - shown.len();
        let more = if more > 0 { format!(", and {more} more") } else { String::new() };
        let (files, them, are, until) = match refused.len() {
            1 => ("1 file".to_owned(), "it", "is", "it changes"),
            n => (format!("{n} files"), "them", "are", "they change"),
        };
        notes.push(format!(
            "[{files} could not be embedded (the embedding server refused part or all of {them}) and {are} left \
             out until {until}: {}{more}]",
            shown.join(", ")
        ));
    }
    if data.walked && indexed >= total && data.files.values().all(|f| f.chunks.is_empty()) {
        // With the notes: "left out" may be the server's doing, said in one of them.
        let text = std::iter::once(
            "The workspace has no files codebase_search can index (ignored, hidden, binary, secret and very large \
             files are left out). Use glob to see what is there.",
        )
        .chain(notes.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("\n");
        return Ok(Answer {
            text,
            fingerprint: 0,
            settled,
            meta: json!({ "indexed_files": 0, "total_files": 0, "results": 0 }),
        });
    }
    let mut ignore = ws.ignore_checks();
    let mut hits: Vec<Hit<'_>> = Vec::new();
    for (path, entry) in &data.files {
        if base.is_some_and(|b| !path.starts_with(b)) || entry.chunks.is_empty() {
            continue;
        }
        // A rule added since the file was indexed hides it at once (G16). After a finished
        // update every indexed file was in that update's walk, which applied the rules.
        if !current && ignore.is_ignored(path) {
            continue;
        }
        for chunk in &entry.chunks {
            if chunk.vector.len() != query.len() {
                continue;
            }
            let score = dot(&chunk.vector, query) * chunk.scale;
            hits.push(Hit { score, path, chunk });
        }
    }
    let found = hits.len();
    if found > limit {
        hits.select_nth_unstable_by(limit - 1, |a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(b.path)));
    let mut text = String::new();
    if hits.is_empty() {
        let where_ = base.map(|b| format!(" below `{}`", show_path(ws, b))).unwrap_or_default();
        if indexed < total {
            text.push_str(&format!("Nothing indexed{where_} yet to compare with."));
        } else {
            text.push_str(&format!("No indexed code{where_} to compare with (empty, binary or left-out files only)."));
        }
    }
    for hit in &hits {
        text.push_str(&format!(
            "{}:{}-{} (score {:.2})\n",
            show_path(ws, hit.path),
            hit.chunk.start,
            hit.chunk.end,
            hit.score
        ));
        for line in hit.chunk.preview.lines() {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
        text.push('\n');
    }
    let mut text = text.trim_end().to_owned();
    for n in &notes {
        text.push('\n');
        text.push_str(n);
    }
    let results: Vec<_> = hits
        .iter()
        .map(|h| json!({ "path": show_path(ws, h.path), "start_line": h.chunk.start, "end_line": h.chunk.end, "score": h.score }))
        .collect();
    // What the index holds, not its history: each file's path and stamp (summed, so the map's
    // order does not matter), and the notes.
    let held = data.files.iter().fold(0u64, |sum, (path, entry)| {
        let seed = (entry.stamp.0 as u64) ^ entry.stamp.1.rotate_left(32);
        sum.wrapping_add(xxhash_rust::xxh3::xxh3_64_with_seed(path.as_os_str().as_encoded_bytes(), seed))
    });
    let fingerprint = crate::util::hash_of(&(held, indexed, total, &data.capped, &data.unreadable, &refused));
    Ok(Answer {
        text,
        fingerprint,
        settled,
        meta: json!({ "indexed_files": indexed, "total_files": total, "results": results, "complete": indexed >= total }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn config() -> IndexConfig {
        IndexConfig { cache_dir: None, chunk_lines: 6, overlap_lines: 1, ..IndexConfig::default() }
    }

    /// Polls `done` every 10 ms for at most 10 s.
    async fn eventually(what: &str, done: impl Fn() -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while !done() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        assert!(waited.await.is_ok(), "{what}");
    }

    /// L7, G15: the answer to a call after an edit does not wait for the index file to be
    /// written. The disk is made to stall by holding the lock every write of the file takes
    /// (a slow filesystem cannot be simulated otherwise): the call still answers at once with
    /// the edit, and the file is written once the disk is back. Before, the update wrote the
    /// file before the call could answer.
    #[tokio::test]
    // The lock stands for a disk that does not finish writing; holding it across the call is
    // the point of the test.
    #[allow(clippy::await_holding_lock)]
    async fn g15_l7_a_call_after_an_edit_answers_while_the_index_file_is_still_being_written() {
        let server = kodik_model::HashEmbeddingServer::start(64).await.unwrap();
        let client = kodik_model::EmbeddingsConfig::new(server.base_url(), "m").retries(0);
        let client = Arc::new(kodik_model::EmbeddingsClient::new(client).unwrap());
        let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(dir.path().join("a.rs"), "/// Removes expired sessions.\nfn purge() {}\n").unwrap();
        let config = IndexConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            call_wait: Duration::from_secs(5),
            ..IndexConfig::default()
        };
        let index = Arc::new(CodebaseIndex::with_config(client, config));
        let tool = CodebaseSearchTool::new(index.clone());
        let cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(10)).await);
        let ws = index.workspace(&cx.workspace).await;
        let file = ws.cache_file.clone().unwrap();
        let saving = || ws.saving.lock().unwrap().running;
        eventually("the first save", || !saving() && file.exists()).await;

        let stalled = ws.writing.lock().unwrap();
        std::fs::write(dir.path().join("a.rs"), "/// Sends the weekly newsletter.\nfn newsletter() {}\n").unwrap();
        let args = CodebaseSearchArgs { query: "weekly newsletter".into(), path: None, limit: None };
        let out = tokio::time::timeout(Duration::from_secs(30), tool.run(args, &cx))
            .await
            .expect("the call waited for the index file to be written")
            .unwrap();
        let text = out.text_content();
        assert!(text.contains("/// Sends the weekly newsletter."), "{text}");
        assert!(!text.contains("[index:"), "the update was complete: {text}");
        assert!(saving(), "the save waits for the disk");
        let roots = cx.workspace.roots().to_vec();
        let on_disk = |needle: &str| {
            let data = load(&file, &roots, "m", None).unwrap();
            data.files[&roots[0].join("a.rs")].chunks[0].preview.contains(needle)
        };
        assert!(on_disk("expired sessions"), "nothing written while the disk stalls");

        drop(stalled);
        eventually("the save after the disk is back", || !saving()).await;
        assert!(on_disk("weekly newsletter"));
    }

    #[test]
    fn l7_chunks_are_whole_lines_with_overlap_and_the_path_in_front() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let chunks = chunk_file("src/a.rs", &text, &config());
        assert!(chunks.len() >= 3, "{}", chunks.len());
        assert_eq!(chunks[0].start, 1);
        assert_eq!(chunks.last().unwrap().end, 20);
        for pair in chunks.windows(2) {
            assert!(pair[1].start <= pair[0].end, "overlap or adjacency");
            assert!(pair[1].start > pair[0].start);
        }
        for c in &chunks {
            assert!(c.text.starts_with("src/a.rs\nline "), "{}", c.text);
            // Every line whole.
            for l in c.text.lines().skip(1) {
                assert!(l.starts_with("line "), "{l}");
            }
        }
    }

    #[test]
    fn l7_chunks_end_at_a_blank_line_and_long_lines_are_cut_only_in_the_preview() {
        let text = "a\nb\nc\nd\n\ne\nf\ng\nh\n";
        let chunks = chunk_file("x", text, &config());
        assert_eq!((chunks[0].start, chunks[0].end), (1, 5), "ends after the blank line");
        let long = "y".repeat(500);
        let chunks = chunk_file("x", &long, &config());
        assert_eq!(chunks[0].preview.chars().count(), 201);
    }

    #[test]
    fn l7_quantised_dot_products_stay_within_a_hundredth_of_the_exact_cosine() {
        for n in [0, 1, 7, 8, 9, 31, 256, 1536] {
            let a = normalised((0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0).collect());
            let b = normalised((0..n).map(|i| ((i * 13 % 17) as f32 - 8.0) / 9.0).collect());
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let (q, scale) = quantised(&a);
            let got = dot(&q, &b) * scale;
            assert!((got - exact).abs() < 0.01, "{n}: {got} vs {exact}");
        }
        assert_eq!(quantised(&[0.0, 0.0]), (vec![0, 0], 0.0));
        assert_eq!(quantised(&[-1.0, 0.5]).0, vec![-127, 64]);
    }

    #[test]
    fn l7_secret_and_generated_names_are_recognised() {
        for s in [
            ".env",
            ".env.local",
            "prod.env",
            "server.key",
            "tls.PEM",
            "id_rsa",
            "id_ed25519.pub",
            ".netrc",
            "credentials.yml",
            "credentials.yml.enc",
            "secrets.yml",
            "prod.tfvars",
            "terraform.tfstate",
            "my-service-account.json",
            "client_secret_123.apps.googleusercontent.com.json",
            "kubeconfig",
        ] {
            assert!(is_secret_name(s), "{s}");
        }
        for s in
            ["main.rs", "environment.ts", "keys.rs", "README.md", "envelope.go", "secrets_manager.rs", "account.json"]
        {
            assert!(!is_secret_name(s), "{s}");
        }
        for s in ["Cargo.lock", "package-lock.json", "yarn.lock", "go.sum", "app.min.js", "app.js.map", "site.min.css"]
        {
            assert!(is_generated_name(s), "{s}");
        }
        for s in ["lock.rs", "map.rs", "main.js", "sum.go", "locks.md"] {
            assert!(!is_generated_name(s), "{s}");
        }
        assert!(holds_secret(r#"{"type": "service_account", "private_key": "x"}"#));
        assert!(holds_secret("KEY = \"-----BEGIN RSA PRIVATE KEY-----\\nMIIE\""));
        assert!(!holds_secret("fn parse_private_key(pem: &str) {}"));
    }

    #[test]
    fn l7_the_cache_format_round_trips_and_refuses_other_models_and_damage() {
        let mut data = Data { dimension: Some(2), ..Data::default() };
        data.files.insert(
            PathBuf::from("/w/a.rs"),
            Arc::new(FileEntry {
                stamp: (7, 9),
                chunks: vec![Chunk {
                    start: 1,
                    end: 3,
                    preview: "fn a()".into(),
                    vector: vec![95, 127],
                    scale: 0.8 / 127.0,
                }],
            }),
        );
        let roots = vec![PathBuf::from("/w")];
        let bytes = encode(&data, &roots, "m");
        let back = decode(&bytes, &roots, "m", None).unwrap();
        assert_eq!(back.files[Path::new("/w/a.rs")].chunks[0].vector, vec![95, 127]);
        assert_eq!(back.files[Path::new("/w/a.rs")].chunks[0].scale, 0.8 / 127.0);
        assert_eq!(back.dimension, Some(2));
        // A name that is not UTF-8 survives too.
        let odd = PathBuf::from(std::ffi::OsString::from_vec(b"/w/\xff.rs".to_vec()));
        let mut data = back;
        let entry = data.files[Path::new("/w/a.rs")].clone();
        data.files.insert(odd.clone(), entry);
        let back = decode(&encode(&data, &roots, "m"), &roots, "m", Some(2)).unwrap();
        assert!(back.files.contains_key(&odd));
        assert!(decode(&bytes, &roots, "other-model", None).is_none());
        assert!(decode(&bytes, &roots, "m", Some(3)).is_none());
        assert!(decode(&bytes, &[PathBuf::from("/v")], "m", None).is_none());
        let mut damaged = bytes.clone();
        damaged[20] ^= 1;
        assert!(decode(&damaged, &roots, "m", None).is_none());
        assert!(decode(&bytes[..bytes.len() - 3], &roots, "m", None).is_none());
        assert!(decode(b"", &roots, "m", None).is_none());
    }
}
