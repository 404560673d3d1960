//! Small helpers shared by the tools.

use std::hash::{DefaultHasher, Hash, Hasher};

use kodik_core::CancellationToken;

use crate::error::SearchError;

/// Runs blocking file work off the async threads; a cancellation answers at once while the
/// worker (which watches the same token) winds down on its own.
pub(crate) async fn run_blocking<T, F>(cancel: &CancellationToken, work: F) -> Result<T, SearchError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, SearchError> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled);
    }
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(SearchError::Cancelled),
        joined = handle => joined.map_err(|e| SearchError::Internal(e.to_string()))?,
    }
}

/// A cancellation check cheap enough for every entry of a walk: it looks at the token every
/// 64th time only. The token takes a lock, which walker threads asking for every entry contend
/// for — and on a loaded machine wait on while its holder is preempted, which turned a parallel
/// walk's wall time serial.
pub(crate) struct CancelCheck {
    token: CancellationToken,
    calls: u32,
}

impl CancelCheck {
    pub(crate) fn new(token: CancellationToken) -> Self {
        Self { token, calls: 0 }
    }

    /// Whether the call was cancelled, as seen at the latest look.
    pub(crate) fn is_cancelled(&mut self) -> bool {
        self.calls = self.calls.wrapping_add(1);
        self.calls.is_multiple_of(64) && self.token.is_cancelled()
    }
}

/// What a folder search could not read — a folder it could not list, a file it could not open
/// — so the answer can say so: ripgrep names each on stderr, and a search that kept quiet
/// presented a partial or empty result as the whole answer. Clones share what they collect
/// (a walk's entry filter holds one).
#[derive(Debug, Clone)]
pub(crate) struct Unreadable {
    inner: std::sync::Arc<std::sync::Mutex<UnreadableInner>>,
    /// Whether file modes can refuse this process a read (see [`Unreadable::enters`]).
    modes_bind: bool,
    /// The folders found closed so far, so that a folder walked twice (the pre-pass, then the
    /// ordered walk) is named once.
    closed: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<std::path::PathBuf>>>,
}

#[derive(Debug, Default)]
struct UnreadableInner {
    /// The first few, as `(path, why)`.
    shown: Vec<(std::path::PathBuf, String)>,
    /// How many in all.
    count: u64,
    /// How many of them are files the search counted as searched.
    files: u64,
}

/// Why nothing in a folder that can be listed may be searched: what it hides is unknown, and
/// G16 fails closed.
#[derive(Debug)]
pub(crate) enum Closed {
    /// Its `.kodikignore` exists but cannot be read.
    IgnoreFile(std::io::Error),
    /// The folder cannot be entered (no search permission), so whether it has a
    /// `.kodikignore` at all cannot be told, and none of its files can be read anyway.
    Folder(std::io::Error),
}

/// Whether folder `dir` is [`Closed`]: one `open` for a folder without a `.kodikignore`.
pub(crate) fn closed_folder(dir: &std::path::Path) -> Option<Closed> {
    use std::io::ErrorKind::NotFound;
    let file = dir.join(kodik_core::workspace::IGNORE_FILE);
    match std::fs::File::open(&file) {
        Err(e) if e.kind() != NotFound => match std::fs::metadata(&file) {
            // It is there: its rules cannot be read.
            Ok(_) => Some(Closed::IgnoreFile(e)),
            Err(s) if s.kind() == NotFound => None,
            // Not even its existence can be asked: the folder itself is shut.
            Err(s) => Some(Closed::Folder(s)),
        },
        _ => None,
    }
}

impl Unreadable {
    /// How many paths the note names; the rest are counted.
    const SHOWN: usize = 5;

    /// For one search, run from the thread that starts its walker threads (they inherit its
    /// capabilities).
    pub(crate) fn new() -> Self {
        Self { inner: Default::default(), modes_bind: modes_bind(), closed: Default::default() }
    }

    /// The walk's entry filter: whether the walk may go into `entry`. A folder whose
    /// `.kodikignore` cannot be read, or that cannot be entered, is not walked at all and is
    /// named once in the answer — always, whatever it holds and whatever is searched for, so
    /// that the answer tells nothing about what it hides (G16).
    pub(crate) fn enters(&self, entry: &ignore::DirEntry) -> bool {
        if !self.modes_bind || !entry.file_type().is_some_and(|t| t.is_dir()) {
            return true;
        }
        let why = match closed_folder(entry.path()) {
            None => return true,
            Some(Closed::IgnoreFile(e)) => {
                format!("its {} cannot be read: {}", kodik_core::workspace::IGNORE_FILE, e.kind())
            }
            Some(Closed::Folder(e)) => e.kind().to_string(),
        };
        if self.closed.lock().unwrap_or_else(|p| p.into_inner()).insert(entry.path().to_path_buf()) {
            self.add_why(entry.path(), why, false);
        }
        false
    }

    /// A file that could not be opened or read.
    pub(crate) fn file(&self, path: &std::path::Path, err: &std::io::Error) {
        self.add(path, err.kind(), true);
    }

    /// An error the walker met: only those with an I/O error count (an unlistable folder, an
    /// unreadable ignore file); a symlink loop or a malformed ignore line is no unread path.
    pub(crate) fn walk_error(&self, err: &ignore::Error) {
        let mut ios = Vec::new();
        io_errors(err, &mut ios);
        for (path, kind) in ios {
            self.add(path, kind, false);
        }
    }

    fn add(&self, path: &std::path::Path, kind: std::io::ErrorKind, file: bool) {
        self.add_why(path, kind.to_string(), file);
    }

    fn add_why(&self, path: &std::path::Path, why: String, file: bool) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.count += 1;
        inner.files += u64::from(file);
        // The first few in path order, not in the order the walker threads met them: the
        // same answer every time (`f1, f2, f3`, not `f123, f164, f296`).
        let at = inner.shown.partition_point(|(p, _)| p.as_path() < path);
        if at < Self::SHOWN {
            inner.shown.insert(at, (path.to_path_buf(), why));
            inner.shown.truncate(Self::SHOWN);
        }
    }

    /// How many files were counted as searched but could not be read.
    pub(crate) fn files(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).files
    }

    /// How many paths could not be read.
    pub(crate) fn count(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).count
    }

    /// The sentence for the answer, `None` when everything could be read.
    pub(crate) fn note(&self, ws: &kodik_core::Workspace) -> Option<String> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.count == 0 {
            return None;
        }
        let listed: Vec<String> =
            inner.shown.iter().map(|(p, why)| format!("`{}` ({why})", crate::glob::show_path(ws, p))).collect();
        let more = inner.count - inner.shown.len() as u64;
        Some(format!(
            "[Not searched, could not be read: {}{}.]",
            listed.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ))
    }
}

/// Whether file modes bind the calling thread: it lacks both CAP_DAC_OVERRIDE and
/// CAP_DAC_READ_SEARCH, either of which lets it read any file. `true` when that cannot be told.
fn modes_bind() -> bool {
    const DAC_BITS: u64 = (1 << 1) | (1 << 2);
    let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") else { return true };
    let effective = status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(str::trim);
    effective.and_then(|hex| u64::from_str_radix(hex, 16).ok()).is_none_or(|caps| caps & DAC_BITS == 0)
}

/// The I/O errors in `err`, with the path each is about.
fn io_errors<'a>(err: &'a ignore::Error, out: &mut Vec<(&'a std::path::Path, std::io::ErrorKind)>) {
    use ignore::Error as E;
    match err {
        E::Partial(errs) => errs.iter().for_each(|e| io_errors(e, out)),
        E::WithLineNumber { err, .. } | E::WithDepth { err, .. } => io_errors(err, out),
        E::WithPath { path, err } => {
            if let Some(io) = err.io_error() {
                out.push((path, io.kind()));
            }
        }
        _ => {}
    }
}

/// A stable 64-bit hash of anything hashable (within one process, which is all the loop guard needs).
pub(crate) fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// `(mtime in ns, len)` of a file, for loop-guard fingerprints; zeros when it cannot be read.
pub(crate) fn stamp(meta: Option<&std::fs::Metadata>) -> (u128, u64) {
    match meta {
        Some(m) => {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (t, m.len())
        }
        None => (0, 0),
    }
}

/// [`stamp`] for grep's fingerprints, with the inode's change time and number folded in: a
/// content change that keeps size and mtime (`cp -p`, `rsync -a`, `touch -r`, a coarse-mtime
/// file system) still moves the change time, which user space cannot set back, and a file
/// replaced by a rename has a new inode. (glob lists names by mtime: [`stamp`] is its whole answer.)
pub(crate) fn content_stamp(meta: Option<&std::fs::Metadata>) -> (u128, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let (mtime, len) = stamp(meta);
    match meta {
        Some(m) => {
            let ctime = (m.ctime() as u128).wrapping_mul(1_000_000_000).wrapping_add(m.ctime_nsec() as u128);
            (mtime ^ (ctime << 64) ^ (ctime >> 64), len ^ m.ino().rotate_left(32))
        }
        None => (mtime, len),
    }
}

/// Whether a glob names a hidden component (`.github/**`, `**/.env*`): then hidden files are
/// searched too, since the model asked for them explicitly.
pub(crate) fn names_hidden(pattern: &str) -> bool {
    pattern.trim_start_matches('!').split('/').any(|c| c.starts_with('.') && c != "." && c != "..")
}

/// A byte count for people: `512 bytes`, `12.3 KB`, `4.0 MB`.
pub(crate) fn human_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n < 1024 * 1024 {
        format!("{:.1} KB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MB", n as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gl1_hidden_components_are_recognised() {
        assert!(names_hidden(".github/**/*.yml"));
        assert!(names_hidden("**/.env*"));
        assert!(!names_hidden("**/*.rs"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("../x/*.rs"));
    }
}
