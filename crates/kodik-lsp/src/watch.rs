//! What changed under a project since the last request, from inotify: files written, created,
//! deleted or moved by anything (a shell `sed -i`, `git checkout`, a code generator), not only
//! by kodik's edit tools. Servers like pyright and clangd do not watch the disk themselves, so
//! without this an unopened dependency changed on disk stays stale in their answers.
//!
//! The kernel queues an event when the write happens, so a change made before a request is
//! always in the queue when the request drains it; draining an empty queue is one `read` that
//! returns `EAGAIN`, which is all a warm query pays.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// At most this many folders are watched per project; past it, changes are found by a scan
/// before diagnostics only (as without a watcher).
pub const MAX_WATCHED_DIRS: usize = 8_192;

/// Watches for the project's folders.
pub struct DirWatcher {
    fd: OwnedFd,
    dirs: HashMap<i32, PathBuf>,
    /// The folders in `dirs`, to tell whether a file's changes are seen.
    watched: HashSet<PathBuf>,
    buf: Vec<MaybeUninit<u8>>,
}

/// What [`DirWatcher::drain`] found.
#[derive(Debug, Default)]
pub struct Seen {
    /// Files written, created, deleted or moved (either end), each once.
    pub files: HashSet<PathBuf>,
    /// Events were lost or a folder appeared, went away or moved: only a scan can tell which
    /// files changed.
    pub rescan: bool,
    /// Folders that appeared: to be watched (with the folders below them).
    pub new_dirs: Vec<PathBuf>,
}

fn flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

impl DirWatcher {
    /// A watcher with no folders yet; `None` when inotify is unavailable.
    pub fn new() -> Option<Self> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Self { fd, dirs: HashMap::new(), watched: HashSet::new(), buf: vec![MaybeUninit::uninit(); 16 * 1024] })
    }

    /// Watches `dir` (not the folders below it). False when it cannot (the user's watch limit
    /// is reached, or [`MAX_WATCHED_DIRS`]): the watcher is then incomplete.
    pub fn watch(&mut self, dir: &Path) -> bool {
        if self.dirs.len() >= MAX_WATCHED_DIRS {
            return false;
        }
        match inotify::add_watch(&self.fd, dir, flags()) {
            Ok(wd) => {
                self.dirs.insert(wd, dir.to_path_buf());
                self.watched.insert(dir.to_path_buf());
                true
            }
            // Gone already: nothing to watch there.
            Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => true,
            Err(_) => false,
        }
    }

    /// Whether a change to `file` (written, replaced, deleted) is queued as an event: its
    /// folder is watched. A file whose folder is not (hidden, ignored or third-party folders,
    /// or outside the project) must be looked at on disk instead.
    pub fn sees(&self, file: &Path) -> bool {
        file.parent().is_some_and(|dir| self.watched.contains(dir))
    }

    /// Everything queued since the last drain, without waiting.
    pub fn drain(&mut self) -> Seen {
        let mut seen = Seen::default();
        let mut reader = inotify::Reader::new(&self.fd, &mut self.buf);
        loop {
            let event = match reader.next() {
                Ok(e) => e,
                Err(rustix::io::Errno::INTR) => continue,
                // `AGAIN`: the queue is empty. Anything else: changes cannot be trusted.
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => {
                    seen.rescan = true;
                    break;
                }
            };
            let mask = event.events();
            if mask.contains(ReadFlags::QUEUE_OVERFLOW) {
                seen.rescan = true;
                continue;
            }
            if mask.contains(ReadFlags::IGNORED) {
                if let Some(dir) = self.dirs.remove(&event.wd()) {
                    self.watched.remove(&dir);
                }
                continue;
            }
            let (Some(dir), Some(name)) = (self.dirs.get(&event.wd()), event.file_name()) else { continue };
            let path = dir.join(OsStr::from_bytes(name.to_bytes()));
            if mask.contains(ReadFlags::ISDIR) {
                seen.rescan = true;
                if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                    seen.new_dirs.push(path);
                }
            } else {
                seen.files.insert(path);
            }
        }
        seen
    }
}
