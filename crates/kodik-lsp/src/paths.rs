//! The `lsp` tool's path checks kept between calls, vouched for by inotify: the path asked
//! about (`Workspace::check_file`: symlinks, `.kodikignore`, a file and not a folder) and how
//! each file of an answer is shown (`.kodikignore`, symlink, `[external]`). Each costs
//! `readlink`s and `stat`s of the path and of every `.kodikignore` on its way, on every call;
//! a warm `definition` that pyright answers in ~40 µs paid about as much again for them.
//!
//! An answer is kept only once every folder from the workspace root down to the file is
//! watched (before it is worked out, so a change made meanwhile is queued too). Any event in
//! those folders (a file or folder created, deleted, moved, its mode changed; a
//! `.kodikignore` written) or on the root itself drops every kept answer at the start of the
//! next call, which reads the queue once (`EAGAIN` when nothing changed). Writes to other files
//! there are passed over: they change no path check.

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kodik_core::workspace::IGNORE_FILE;
use kodik_core::{PathError, Workspace};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// At most this many folders are watched; past it, answers are worked out on every call.
const MAX_DIRS: usize = 1_024;
/// At most this many answers of each kind are kept.
const MAX_KEPT: usize = 4_096;

/// What is shown for the locations in one file of an answer.
#[derive(Clone)]
pub(crate) struct Shown {
    /// `None`: hidden by `.kodikignore`.
    pub path: Option<PathBuf>,
    pub shown_path: String,
    pub external: bool,
}

/// Path checks kept between calls (see the module's documentation).
#[derive(Default)]
pub(crate) struct PathChecks {
    inner: Mutex<Option<Kept>>,
}

struct Kept {
    roots: Vec<PathBuf>,
    fd: OwnedFd,
    dirs: HashSet<PathBuf>,
    /// A watch could not be added: nothing more is kept until the next change clears it.
    full: bool,
    /// Keyed by the path asked for joined to the primary root, so the same relative path in
    /// another workspace is another key.
    files: HashMap<PathBuf, PathBuf>,
    shown: HashMap<PathBuf, Shown>,
    /// Counts the times everything was dropped: an answer worked out while another call
    /// dropped everything (it saw a change) may be from before that change, and is not kept.
    generation: u64,
    buf: Vec<MaybeUninit<u8>>,
}

fn flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

/// Generations keep counting across every [`Kept`] made: an answer worked out for one
/// workspace is never kept by another's (two calls with other roots may interleave).
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Kept {
    fn new(ws: &Workspace) -> Option<Self> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Self {
            roots: ws.roots().to_vec(),
            fd,
            dirs: HashSet::new(),
            full: false,
            files: HashMap::new(),
            shown: HashMap::new(),
            generation: next_generation(),
            buf: vec![MaybeUninit::uninit(); 8 * 1024],
        })
    }

    /// Whether anything that may change a path check happened since the last look.
    fn changed(&mut self) -> bool {
        let mut changed = false;
        let mut reader = inotify::Reader::new(&self.fd, &mut self.buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => break,
                // Anything else: the queue cannot be trusted.
                Err(_) => return true,
            };
            let mask = event.events();
            // A write changes no path check, unless it is to a `.kodikignore`.
            let write_only = (mask & !(ReadFlags::MODIFY | ReadFlags::CLOSE_WRITE)).is_empty();
            if !write_only || event.file_name().is_some_and(|n| n.to_bytes() == IGNORE_FILE.as_bytes()) {
                changed = true;
            }
        }
        changed
    }

    /// Watches every folder from `path`'s root down to its parent. False when `path` lies
    /// outside the roots or a folder cannot be watched: then nothing about it may be kept.
    fn watch_way_to(&mut self, path: &Path) -> bool {
        if self.full {
            return false;
        }
        let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) else { return false };
        let Some(parent) = path.parent().filter(|p| p.starts_with(root)) else { return false };
        let mut dir = parent;
        loop {
            if !self.dirs.contains(dir) {
                if self.dirs.len() >= MAX_DIRS || inotify::add_watch(&self.fd, dir, flags()).is_err() {
                    self.full = true;
                    return false;
                }
                self.dirs.insert(dir.to_path_buf());
            }
            if dir == root.as_path() {
                return true;
            }
            let Some(up) = dir.parent() else { return false };
            dir = up;
        }
    }

    /// Drops every kept answer, and the folders known to be watched: a folder deleted or
    /// moved is watched no more (its way is watched again before anything is kept).
    fn clear(&mut self) {
        self.files.clear();
        self.shown.clear();
        self.dirs.clear();
        self.full = false;
        self.generation = next_generation();
    }
}

impl PathChecks {
    /// Starts a call in `ws`: drops every kept answer if anything changed since the last call
    /// (or the workspace is another one). One `read` of the event queue.
    pub fn begin(&self, ws: &Workspace, keep: bool) {
        let Ok(mut inner) = self.inner.lock() else { return };
        match inner.as_mut() {
            _ if !keep => *inner = None,
            Some(kept) if kept.roots == ws.roots() => {
                if kept.changed() {
                    kept.clear();
                }
            }
            _ => *inner = Kept::new(ws),
        }
    }

    /// [`Workspace::check_file`] of `raw`, kept while nothing on its way changes. Only a
    /// path that resolves to itself (no symlink, `..` or other root on its way) is kept.
    pub fn check_file(&self, ws: &Workspace, raw: &str) -> Result<PathBuf, PathError> {
        let joined = ws.primary_root().join(raw);
        if let Ok(inner) = self.inner.lock()
            && let Some(found) = inner.as_ref().filter(|k| k.roots == ws.roots()).and_then(|k| k.files.get(&joined))
        {
            return Ok(found.clone());
        }
        // Watched before the check is made, so a change made meanwhile is queued too.
        let watched = self.with(|k| (k.files.len() < MAX_KEPT && k.watch_way_to(&joined)).then_some(k.generation));
        let path = ws.check_file(raw)?;
        if let Some(Some(generation)) = watched
            && path == joined
        {
            self.with(|k| (k.generation == generation).then(|| k.files.insert(joined, path.clone())));
        }
        Ok(path)
    }

    /// How the locations in `path` are shown, worked out by `work` unless kept.
    pub fn shown(&self, path: &Path, work: impl FnOnce() -> Shown) -> Shown {
        if let Ok(inner) = self.inner.lock()
            && let Some(found) = inner.as_ref().and_then(|k| k.shown.get(path))
        {
            return found.clone();
        }
        let watched = self.with(|k| (k.shown.len() < MAX_KEPT && k.watch_way_to(path)).then_some(k.generation));
        let shown = work();
        // A file shown as another (a symlink) depends on more than its own way.
        if let Some(Some(generation)) = watched
            && shown.path.as_deref().is_none_or(|p| p == path)
        {
            self.with(|k| (k.generation == generation).then(|| k.shown.insert(path.to_path_buf(), shown.clone())));
        }
        shown
    }

    fn with<R>(&self, f: impl FnOnce(&mut Kept) -> R) -> Option<R> {
        self.inner.lock().ok()?.as_mut().map(f)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Runs `script` in a shell: the change is made by another process, as a user's editor or
    /// `git checkout` makes it.
    fn sh(dir: &Path, script: &str) {
        let ok = std::process::Command::new("sh").arg("-c").arg(script).current_dir(dir).status().unwrap();
        assert!(ok.success(), "{script}");
    }

    /// G16, L5: one tool used for two workspaces in turn never answers a path of one with a
    /// check kept for the other. (Two calls interleaving inside `check_file` are kept apart by
    /// the generations, which count across workspaces, and the keys, which are absolute.)
    #[test]
    fn g16_l5_a_check_kept_for_one_workspace_never_answers_another() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (ra, rb) = (a.path().canonicalize().unwrap(), b.path().canonicalize().unwrap());
        std::fs::write(ra.join("x.py"), "a = 1\n").unwrap();
        std::fs::write(rb.join("x.py"), "b = 1\n").unwrap();
        std::fs::write(rb.join(".kodikignore"), "x.py\n").unwrap();
        let (wa, wb) = (Workspace::new(&ra).unwrap(), Workspace::new(&rb).unwrap());
        let checks = PathChecks::default();
        checks.begin(&wa, true);
        assert_eq!(checks.check_file(&wa, "x.py").unwrap(), ra.join("x.py"));
        // Workspace b's call starts while a's answer is kept; a's next call comes after it.
        checks.begin(&wb, true);
        assert_eq!(checks.check_file(&wa, "x.py").unwrap(), ra.join("x.py"));
        assert!(
            matches!(checks.check_file(&wb, "x.py"), Err(PathError::Ignored(_))),
            "b's .kodikignore was not applied"
        );
    }

    /// G16, L5: a kept path check is dropped by any change on its way: a `.kodikignore`
    /// created (at the root or in a folder between), written or made unreadable refuses the
    /// path at the very next call, a file deleted or replaced by a folder is no longer
    /// accepted, and one moved back in is accepted again.
    #[test]
    fn g16_l5_kept_path_checks_never_outlive_a_change_on_their_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::write(root.join("pkg/sub/a.py"), "a = 1\n").unwrap();
        let ws = Workspace::new(&root).unwrap();
        let checks = PathChecks::default();
        let check = |raw: &str| {
            checks.begin(&ws, true);
            checks.check_file(&ws, raw)
        };
        assert_eq!(check("pkg/sub/a.py").unwrap(), root.join("pkg/sub/a.py"));
        assert!(checks.with(|k| k.files.contains_key(&root.join("pkg/sub/a.py"))).unwrap(), "the check was not kept");
        assert_eq!(check("pkg/sub/a.py").unwrap(), root.join("pkg/sub/a.py"));

        sh(&root, "printf 'sub/\\n' > pkg/.kodikignore");
        assert!(matches!(check("pkg/sub/a.py"), Err(PathError::Ignored(_))), "a new .kodikignore was not seen");
        sh(&root, "printf '# nothing\\n' > pkg/.kodikignore");
        assert!(check("pkg/sub/a.py").is_ok());
        // Written in place (no create): still seen.
        sh(&root, "printf '*.py\\n' >> pkg/.kodikignore");
        assert!(matches!(check("pkg/sub/a.py"), Err(PathError::Ignored(_))), "a rewritten .kodikignore was not seen");
        sh(&root, "rm pkg/.kodikignore");
        assert!(check("pkg/sub/a.py").is_ok());
        sh(&root, "printf 'a.py\\n' > .kodikignore");
        assert!(check("pkg/sub/a.py").is_err(), "a root .kodikignore was not seen");
        sh(&root, "rm .kodikignore");
        assert!(check("pkg/sub/a.py").is_ok());

        sh(&root, "rm pkg/sub/a.py");
        assert!(check("pkg/sub/a.py").is_err(), "a deleted file was still accepted");
        sh(&root, "mkdir pkg/sub/a.py");
        assert!(matches!(check("pkg/sub/a.py"), Err(PathError::IsDirectory(_))), "{:?}", check("pkg/sub/a.py"));
        sh(&root, "rmdir pkg/sub/a.py && mv pkg/sub pkg/gone");
        assert!(check("pkg/sub/a.py").is_err(), "a moved folder's file was still accepted");
        sh(&root, "mv pkg/gone pkg/sub && printf 'a = 2\\n' > pkg/sub/a.py");
        assert!(check("pkg/sub/a.py").is_ok());
    }

    /// L5: how a file of an answer is shown is kept too, and a `.kodikignore` that hides it
    /// afterwards is honoured at the next call.
    #[test]
    fn l5_kept_shown_files_are_hidden_by_a_new_kodikignore_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("util.py"), "x = 1\n").unwrap();
        let ws = Workspace::new(&root).unwrap();
        let checks = PathChecks::default();
        let util = root.join("util.py");
        let shown = |checks: &PathChecks| {
            checks.begin(&ws, true);
            checks.shown(&util, || {
                let hidden = ws.is_ignored(&util);
                Shown { path: (!hidden).then(|| util.clone()), shown_path: "util.py".into(), external: false }
            })
        };
        assert!(shown(&checks).path.is_some());
        assert!(checks.with(|k| k.shown.contains_key(&util)).unwrap(), "the answer was not kept");
        sh(&root, "printf 'util.py\\n' > .kodikignore");
        assert!(shown(&checks).path.is_none(), "a kept file was shown after a .kodikignore hid it");
    }
}
