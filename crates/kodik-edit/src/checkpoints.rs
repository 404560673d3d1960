//! Checkpoints (E13, P3): the state every file had before a tool changed it, so a turn or the
//! whole conversation can be undone — both ends of a move, created files removed, deleted
//! files brought back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// What a file was before a mutation.
#[derive(Debug, Clone)]
pub(crate) struct Prior {
    /// The bytes and permissions, or `None` when the path did not exist (or was a symlink).
    pub(crate) content: Option<(Vec<u8>, std::fs::Permissions)>,
    /// Where the path pointed when it was a symlink (D1: a deleted link is brought back as a
    /// link, not as a copy of its target).
    pub(crate) link: Option<PathBuf>,
    /// Folders the mutation created for the file (outermost first).
    pub(crate) created_dirs: Vec<PathBuf>,
}

impl Prior {
    /// An existing regular file's `bytes` and `perms`.
    pub(crate) fn file(bytes: Vec<u8>, perms: std::fs::Permissions) -> Self {
        Self { content: Some((bytes, perms)), link: None, created_dirs: Vec::new() }
    }

    /// The state of `path` now; `created_dirs` lists the folders a write will have to create.
    /// A symlink is captured as the link, when the mutation is about the link itself
    /// ([`Self::capture_link`]); otherwise through it, as the file it points to.
    pub(crate) fn capture(path: &Path) -> std::io::Result<Self> {
        let content = match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Some((std::fs::read(path)?, m.permissions())),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Self { content, link: None, created_dirs: missing_dirs(path) })
    }

    /// The symlink at `path` itself (its target unread), for a mutation that removes the link.
    pub(crate) fn capture_link(path: &Path) -> std::io::Result<Self> {
        Ok(Self { content: None, link: Some(std::fs::read_link(path)?), created_dirs: Vec::new() })
    }

    /// Whether the path existed (a file or a link).
    pub(crate) fn existed(&self) -> bool {
        self.content.is_some() || self.link.is_some()
    }

    /// Puts `path` back the way it was.
    pub(crate) fn restore(&self, path: &Path) -> std::io::Result<()> {
        if let Some(target) = &self.link {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_symlink() && std::fs::read_link(path).is_ok_and(|t| &t == target) => return Ok(()),
                Ok(_) => std::fs::remove_file(path)?,
                Err(_) => {}
            }
            return std::os::unix::fs::symlink(target, path);
        }
        match &self.content {
            Some((bytes, perms)) => {
                kodik_core::fs::write_atomic(path, bytes, true)?;
                std::fs::set_permissions(path, perms.clone())?;
            }
            None => match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
        }
        Ok(())
    }

    /// Removes the folders the mutation created, innermost first, when they are empty.
    pub(crate) fn remove_created_dirs(&self) {
        for d in self.created_dirs.iter().rev() {
            // A folder that gained other files since stays; that is not an error.
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The folders between `path` and its nearest existing ancestor, outermost first.
fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut cur = path.parent();
    while let Some(d) = cur {
        if d.as_os_str().is_empty() || d.exists() {
            break;
        }
        out.push(d.to_path_buf());
        cur = d.parent();
    }
    out.reverse();
    out
}

#[derive(Debug)]
struct Entry {
    turn: u64,
    path: PathBuf,
    prior: Prior,
}

/// What an undo did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UndoReport {
    /// Files written back with their earlier content.
    pub restored: Vec<PathBuf>,
    /// Files removed because the undone changes created them.
    pub removed: Vec<PathBuf>,
    /// Files that could not be put back, with the reason.
    pub failed: Vec<(PathBuf, String)>,
}

impl UndoReport {
    /// Whether every file was put back.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// The record of every mutation the edit tools made, grouped by turn (the session's user
/// message number at the time). Shared by all tools of one [`EditToolset`](crate::EditToolset).
#[derive(Debug, Default)]
pub struct Checkpoints {
    entries: Mutex<Vec<Entry>>,
}

impl Checkpoints {
    /// No checkpoints yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `path` was `prior` before a mutation made during `turn`.
    pub(crate) fn record(&self, turn: u64, path: &Path, prior: Prior) {
        self.lock().push(Entry { turn, path: path.to_path_buf(), prior });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of recorded mutations.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The turns that have checkpoints, oldest first.
    pub fn turns(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self.lock().iter().map(|e| e.turn).collect();
        t.dedup();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The files changed during `turn`.
    pub fn files(&self, turn: u64) -> Vec<PathBuf> {
        let mut f: Vec<PathBuf> = self.lock().iter().filter(|e| e.turn == turn).map(|e| e.path.clone()).collect();
        f.sort();
        f.dedup();
        f
    }

    /// Undoes every change of the most recent turn that changed files.
    pub fn undo_turn(&self) -> UndoReport {
        let last = self.lock().last().map(|e| e.turn);
        match last {
            Some(t) => self.undo_where(|turn| turn == t),
            None => UndoReport::default(),
        }
    }

    /// Undoes every change made during `turn`.
    pub fn undo_message(&self, turn: u64) -> UndoReport {
        self.undo_where(|t| t == turn)
    }

    /// Undoes every recorded change: each file goes back to what it was before the first tool
    /// touched it.
    pub fn undo_all(&self) -> UndoReport {
        self.undo_where(|_| true)
    }

    fn undo_where(&self, pick: impl Fn(u64) -> bool) -> UndoReport {
        let mut entries = self.lock();
        let mut taken: Vec<Entry> = Vec::new();
        let mut kept: Vec<Entry> = Vec::new();
        for e in entries.drain(..) {
            if pick(e.turn) { taken.push(e) } else { kept.push(e) }
        }
        // The earliest record of each file is the state to go back to.
        let mut first: BTreeMap<PathBuf, Prior> = BTreeMap::new();
        let mut all_priors: Vec<Prior> = Vec::new();
        for e in taken {
            all_priors.push(e.prior.clone());
            first.entry(e.path).or_insert(e.prior);
        }
        let mut report = UndoReport::default();
        for (path, prior) in &first {
            match prior.restore(path) {
                Ok(()) if prior.existed() => report.restored.push(path.clone()),
                Ok(()) => report.removed.push(path.clone()),
                Err(e) => report.failed.push((path.clone(), e.to_string())),
            }
        }
        for p in all_priors.iter().rev() {
            p.remove_created_dirs();
        }
        *entries = kept;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e13_undo_restores_content_removes_created_and_brings_back_deleted() {
        let d = tempfile::tempdir().unwrap();
        let kept = d.path().join("kept.txt");
        let gone = d.path().join("gone.txt");
        let made = d.path().join("new/dir/made.txt");
        std::fs::write(&kept, "before").unwrap();
        std::fs::write(&gone, "was here").unwrap();
        let cp = Checkpoints::new();
        for p in [&kept, &gone, &made] {
            cp.record(1, p, Prior::capture(p).unwrap());
        }
        std::fs::write(&kept, "after").unwrap();
        std::fs::remove_file(&gone).unwrap();
        std::fs::create_dir_all(made.parent().unwrap()).unwrap();
        std::fs::write(&made, "x").unwrap();
        let r = cp.undo_turn();
        assert!(r.is_complete(), "{r:?}");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "before");
        assert_eq!(std::fs::read_to_string(&gone).unwrap(), "was here");
        assert!(!made.exists());
        assert!(!d.path().join("new").exists(), "created folders are removed too");
        assert!(cp.is_empty());
    }
}
