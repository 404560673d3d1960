//! [`ConversationStore`]: the metadata of conversations, so `agent_status` can list other
//! conversations — also those of other processes (A4). [`FileStore`] keeps one JSON file per
//! conversation under `.kodik/conversations/`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use kodik_schema::agent::SessionState;
use serde::{Deserialize, Serialize};

/// What is known about one conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// A short title.
    #[serde(default)]
    pub title: String,
    /// Its mode (`code`, `plan`, …).
    #[serde(default)]
    pub mode: Option<String>,
    /// The model it talks to.
    #[serde(default)]
    pub model: Option<String>,
    /// Its workspace folder.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// Running, idle or closed.
    pub status: SessionState,
    /// Last activity, seconds since the Unix epoch.
    pub last_activity: u64,
    /// What it is working towards.
    #[serde(default)]
    pub goal: Option<String>,
    /// How full its context is, 0.0–1.0.
    #[serde(default)]
    pub context_fill: Option<f32>,
    /// The conversation that started it, for a sub-agent.
    #[serde(default)]
    pub parent: Option<String>,
    /// Its last few messages, newest last.
    #[serde(default)]
    pub last_messages: Vec<String>,
}

impl SessionInfo {
    /// A running conversation `id`, active now, with nothing else known.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            title: String::new(),
            mode: None,
            model: None,
            workspace: None,
            status: SessionState::Running,
            last_activity: now_secs(),
            goal: None,
            context_fill: None,
            parent: None,
            last_messages: Vec::new(),
        }
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A session id that cannot be a file name.
    #[error("`{0}` is not a session id (letters, digits, `.`, `-` and `_`, not starting with `.`)")]
    BadId(String),
}

/// Where conversations' metadata lives.
pub trait ConversationStore: Send + Sync {
    /// Creates or replaces the entry of `info.id`.
    fn put(&self, info: &SessionInfo) -> Result<(), StoreError>;
    /// The entry of `id`, if any.
    fn get(&self, id: &str) -> Result<Option<SessionInfo>, StoreError>;
    /// Every entry (unreadable ones are left out).
    fn list(&self) -> Result<Vec<SessionInfo>, StoreError>;
}

/// One `<id>.json` per conversation in a folder (by default `<workspace>/.kodik/conversations`).
/// Writes go through a temporary file and a rename, so another process never reads half an
/// entry.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

/// The ids kodik-agent gives its sessions (`20261201T041500.123Z-1a2b`): a file name with no
/// separators and no leading dot.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 200
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { action, path, source }
}

impl FileStore {
    /// A store in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The store of a workspace: `<root>/.kodik/conversations`.
    pub fn for_workspace(root: &Path) -> Self {
        Self::new(root.join(".kodik").join("conversations"))
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        if valid_id(id) { Ok(self.dir.join(format!("{id}.json"))) } else { Err(StoreError::BadId(id.to_string())) }
    }
}

impl ConversationStore for FileStore {
    fn put(&self, info: &SessionInfo) -> Result<(), StoreError> {
        let path = self.path(&info.id)?;
        std::fs::create_dir_all(&self.dir).map_err(io_err("creating", &self.dir))?;
        let tmp = self.dir.join(format!(".{}.{}.tmp", info.id, std::process::id()));
        let json = serde_json::to_vec_pretty(info).map_err(|e| io_err("encoding", &path)(std::io::Error::other(e)))?;
        std::fs::write(&tmp, json).map_err(io_err("writing", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err("writing", &path))
    }

    fn get(&self, id: &str) -> Result<Option<SessionInfo>, StoreError> {
        let path = self.path(id)?;
        match std::fs::read(&path) {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Io { action: "reading", path, source }),
        }
    }

    fn list(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StoreError::Io { action: "listing", path: self.dir.clone(), source }),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            // A file someone is editing by hand, or a newer format, is skipped rather than
            // failing the whole list.
            if let Ok(Ok(info)) = std::fs::read(&path).map(|b| serde_json::from_slice::<SessionInfo>(&b)) {
                out.push(info);
            }
        }
        Ok(out)
    }
}
