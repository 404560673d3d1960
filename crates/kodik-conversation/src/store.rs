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
    /// The process it runs in, while it is open: a running or idle entry whose process is gone
    /// was left by a crash and counts as closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl SessionInfo {
    /// Whether the conversation is open in a live process (running or idle, and its process,
    /// if known, still exists).
    pub fn is_open(&self) -> bool {
        self.status != SessionState::Closed && self.pid.is_none_or(process_alive)
    }
}

/// Whether process `pid` exists. Where that cannot be told (no `/proc`), it is assumed to.
pub fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// A message one conversation left for another (A5), waiting in the recipient's mailbox until
/// its next model request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Letter {
    /// The sender's session id.
    pub from: String,
    /// The message.
    pub message: String,
    /// When it was sent, seconds since the Unix epoch.
    pub sent: u64,
}

impl Letter {
    /// The note the recipient's model reads.
    pub fn note(&self) -> String {
        format!(
            "[message from conversation {}]\n{}\n(Reply with send_message agent_id \"{}\" if it asks for an answer.)",
            self.from,
            self.message.trim(),
            self.from
        )
    }
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
            pid: None,
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
    /// The store keeps no mailboxes.
    #[error("this conversation store keeps no mailboxes, so messages cannot reach conversation `{0}`")]
    NoMailbox(String),
}

/// Where conversations' metadata lives.
pub trait ConversationStore: Send + Sync {
    /// Creates or replaces the entry of `info.id`.
    fn put(&self, info: &SessionInfo) -> Result<(), StoreError>;
    /// The entry of `id`, if any.
    fn get(&self, id: &str) -> Result<Option<SessionInfo>, StoreError>;
    /// Every entry (unreadable ones are left out).
    fn list(&self) -> Result<Vec<SessionInfo>, StoreError>;
    /// Leaves `letter` in conversation `to`'s mailbox (default: no mailboxes).
    fn post(&self, to: &str, letter: &Letter) -> Result<(), StoreError> {
        let _ = letter;
        Err(StoreError::NoMailbox(to.to_string()))
    }
    /// Takes every letter waiting for conversation `id`, oldest first; each is handed out once
    /// (default: none).
    fn take_messages(&self, id: &str) -> Result<Vec<Letter>, StoreError> {
        let _ = id;
        Ok(Vec::new())
    }
}

/// One `<id>.json` per conversation in a folder (by default `<workspace>/.kodik/conversations`),
/// and its mailbox `<id>.inbox/` with one JSON file per letter. Writes go through a temporary
/// file and a rename, so another process never reads half an entry or half a letter.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    /// A workspace's store: hidden from git ([`FileStore::for_workspace`]).
    in_workspace: bool,
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
        Self { dir: dir.into(), in_workspace: false }
    }

    /// The store of a workspace: `<root>/.kodik/conversations`, git-ignored there (a
    /// `.gitignore` of `*` written with the first entry or letter), so a model's `git add -A`
    /// does not commit the conversations' metadata and letters.
    pub fn for_workspace(root: &Path) -> Self {
        Self { dir: root.join(".kodik").join("conversations"), in_workspace: true }
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        if valid_id(id) { Ok(self.dir.join(format!("{id}.json"))) } else { Err(StoreError::BadId(id.to_string())) }
    }

    fn inbox(&self, id: &str) -> Result<PathBuf, StoreError> {
        if valid_id(id) { Ok(self.dir.join(format!("{id}.inbox"))) } else { Err(StoreError::BadId(id.to_string())) }
    }

    fn hide_from_git(&self) {
        if self.in_workspace {
            // Hiding the store is housekeeping, never a reason to fail a write; a folder that
            // cannot be created fails the write itself with its own error.
            let _ = kodik_core::workspace::hide_from_git(&self.dir, "kodik conversation metadata and letters");
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
fn write_whole(dir: &Path, path: &Path, stem: &str, bytes: &[u8]) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    let tmp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io_err("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err("writing", path))
}

impl ConversationStore for FileStore {
    fn put(&self, info: &SessionInfo) -> Result<(), StoreError> {
        let path = self.path(&info.id)?;
        self.hide_from_git();
        let json = serde_json::to_vec_pretty(info).map_err(|e| io_err("encoding", &path)(std::io::Error::other(e)))?;
        write_whole(&self.dir, &path, &info.id, &json)
    }

    fn post(&self, to: &str, letter: &Letter) -> Result<(), StoreError> {
        let dir = self.inbox(to)?;
        self.hide_from_git();
        // Named by time, process and a counter: letters sort in the order they were sent, and
        // two senders never pick the same name.
        let name = crate::new_session_id();
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
        let name = format!("{nanos:024}-{name}");
        let path = dir.join(format!("{name}.json"));
        let json = serde_json::to_vec(letter).map_err(|e| io_err("encoding", &path)(std::io::Error::other(e)))?;
        write_whole(&dir, &path, &name, &json)
    }

    fn take_messages(&self, id: &str) -> Result<Vec<Letter>, StoreError> {
        let dir = self.inbox(id)?;
        let mut names: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .filter(|p| p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.')))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StoreError::Io { action: "listing", path: dir, source }),
        };
        names.sort();
        let mut letters = Vec::new();
        for path in names {
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                // Another reader of the same mailbox took it first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(StoreError::Io { action: "reading", path, source }),
            };
            // Removed before it is handed out: a letter is read once even if two readers race;
            // one that is not a letter is left for a person to look at.
            if let Ok(letter) = serde_json::from_slice::<Letter>(&bytes)
                && std::fs::remove_file(&path).is_ok()
            {
                letters.push(letter);
            }
        }
        Ok(letters)
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
