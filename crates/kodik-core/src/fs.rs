//! File writes that never leave a half-written file, nor a stray temporary file, behind (E12).
//!
//! A write goes to an unnamed `O_TMPFILE` in the target's folder where the file system allows
//! it, and only gets a name once it is complete and on disk, so a writer killed mid-write leaves
//! nothing visible. Where a name is needed (no `O_TMPFILE`, or replacing an existing file, which
//! takes a link to a temporary name and a rename), the name carries the writer's pid:
//! `.kodik-<pid>-<n>.tmp`. Every write sweeps such names of writers that are gone from its
//! folder (at most once a minute per folder), so a leftover heals itself at the next write.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Mode of a new file before the umask, as `open(2)` callers such as editors and `touch` use.
const NEW_FILE_MODE: u32 = 0o666;
/// A temporary name whose writer is still alive is left alone unless it is this old: no
/// atomic write takes a day, but a reused pid must not pin a leftover for good.
const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Names of the older scheme (`.kodik-XXXXXX.tmp`, no pid) are removed past this age.
const LEGACY_STALE_AFTER: Duration = Duration::from_secs(3600);
/// How often one folder is swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Writes `bytes` to `path` atomically: the content is written to a file in the same folder,
/// flushed to disk and then renamed (or linked) into place, so readers see the old file or the
/// new one, never a mix. An existing file keeps its permission bits and, where the process may
/// set them, its owner and group; a new one gets 0666 minus the process umask, like any file an
/// editor creates. Missing parent folders are created when `create_parents` is set.
///
/// The rename gives `path` a new inode: other hard links to the old file keep the old content
/// ([`other_links`] tells a caller beforehand, to say so).
pub fn write_atomic(path: &Path, bytes: &[u8], create_parents: bool) -> std::io::Result<()> {
    write_atomic_like(path, bytes, create_parents, None)
}

/// [`write_atomic`] for content that takes the place of another file, as a move's destination
/// does: `path` gets `like`'s permission bits and owner, as `mv` keeps them, whether or not a
/// file was there (a 0600 file moved onto a 0644 one stays 0600). Without `like`, as
/// [`write_atomic`].
pub fn write_atomic_like(
    path: &Path,
    bytes: &[u8],
    create_parents: bool,
    like: Option<&std::fs::Metadata>,
) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{}` does not name a file", path.display()),
        ));
    };
    if create_parents {
        std::fs::create_dir_all(parent)?;
    }
    let current = std::fs::metadata(path).ok();
    let replacing = current.is_some();
    let keep = like.or(current.as_ref()).map(Keep::of);
    sweep_if_due(parent);
    let dir = File::open(parent)?;
    #[cfg(target_os = "linux")]
    if let Some(done) = unnamed::write(&dir, Path::new(name), bytes, keep, replacing) {
        done?;
        sync_dir(&dir);
        return Ok(());
    }
    write_named(parent, Path::new(name), bytes, keep)?;
    sync_dir(&dir);
    Ok(())
}

/// How many other names (hard links) the file at `path` has: a write through [`write_atomic`]
/// leaves them with the old content. 0 when it has none or does not exist.
pub fn other_links(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).map_or(0, |m| m.nlink().saturating_sub(1))
}

/// What a replacing write carries over from the file it replaces (E12).
#[derive(Debug, Clone, Copy)]
struct Keep {
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Keep {
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self { mode: m.permissions().mode() & 0o7777, uid: m.uid(), gid: m.gid() }
    }

    /// Gives `file`, which this process just created, the kept owner as far as it may (root
    /// any owner, another user only a group it is in: chown(2)), best effort like an editor's
    /// save — a file the process may not give away becomes its own, as any new file would.
    /// Then the mode: the umask trimmed it at open, and a chown clears the set-id bits.
    fn apply(&self, file: &File) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        let m = file.metadata()?;
        if (m.uid(), m.gid()) != (self.uid, self.gid)
            && std::os::unix::fs::fchown(file, Some(self.uid), Some(self.gid)).is_err()
            && m.gid() != self.gid
        {
            let _ = std::os::unix::fs::fchown(file, None, Some(self.gid));
        }
        file.set_permissions(std::fs::Permissions::from_mode(self.mode))
    }
}

/// Makes the rename itself durable; a failure here cannot lose data, so it is not reported.
fn sync_dir(dir: &File) {
    let _ = dir.sync_all();
}

/// A fresh temporary name of this process in a folder.
fn temp_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!(".kodik-{}-{n}{nanos:08x}.tmp", std::process::id())
}

/// The portable path: a named temporary file, renamed over the target.
fn write_named(parent: &Path, name: &Path, bytes: &[u8], keep: Option<Keep>) -> std::io::Result<()> {
    let mut attempts = 0;
    let (tmp_path, mut file) = loop {
        let tmp_path = parent.join(temp_name());
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(keep.map_or(NEW_FILE_MODE, |k| k.mode))
            .open(&tmp_path)
        {
            Ok(f) => break (tmp_path, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 8 => attempts += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        file.write_all(bytes)?;
        if let Some(keep) = keep {
            keep.apply(&file)?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp_path, parent.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

#[cfg(target_os = "linux")]
mod unnamed {
    //! `O_TMPFILE`: the content has no name until it is complete.

    use std::fs::File;
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{AtFlags, Mode, OFlags};
    use rustix::io::Errno;

    /// Cleared once linking an unnamed file failed for a reason that will not go away (no
    /// `/proc`, a sandbox refusing `linkat`), so later writes do not write everything twice.
    static LINKING_WORKS: AtomicBool = AtomicBool::new(true);

    /// Writes through an unnamed file; `None` when this folder or system cannot, so the caller
    /// takes the named path (nothing was created then).
    pub(super) fn write(
        dir: &File,
        name: &Path,
        bytes: &[u8],
        keep: Option<super::Keep>,
        replacing: bool,
    ) -> Option<std::io::Result<()>> {
        if !LINKING_WORKS.load(Ordering::Relaxed) {
            return None;
        }
        let mode = Mode::from_raw_mode(keep.map_or(super::NEW_FILE_MODE, |k| k.mode));
        let fd = match rustix::fs::openat(dir, ".", OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC, mode) {
            Ok(fd) => fd,
            // The file system or kernel has no O_TMPFILE.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => return None,
            Err(e) => return Some(Err(e.into())),
        };
        let mut file = File::from(fd);
        let written = (|| {
            file.write_all(bytes)?;
            if let Some(keep) = keep {
                keep.apply(&file)?;
            }
            file.sync_all()
        })();
        if let Err(e) = written {
            // Dropping the file frees it: nothing was ever visible.
            return Some(Err(e));
        }
        if !replacing {
            match link(dir, &file, name) {
                Ok(()) => return Some(Ok(())),
                // Someone created the target meanwhile: replace it like any existing file.
                Err(Errno::EXIST) => {}
                Err(e) => return fallback(e),
            }
        }
        let tmp = super::temp_name();
        if let Err(e) = link(dir, &file, Path::new(&tmp)) {
            return fallback(e);
        }
        // Only between this link and the rename does a name exist that a kill could leave
        // behind; it carries our pid, so the next write in this folder sweeps it.
        let renamed = rustix::fs::renameat(dir, tmp.as_str(), dir, name).map_err(std::io::Error::from);
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        }
        Some(renamed)
    }

    /// A link failure that is about this system, not this write, switches the unnamed path off
    /// and lets the caller write through a named file instead.
    fn fallback(e: Errno) -> Option<std::io::Result<()>> {
        match e {
            Errno::NOENT | Errno::PERM | Errno::ACCESS | Errno::NOSYS | Errno::OPNOTSUPP | Errno::XDEV => {
                LINKING_WORKS.store(false, Ordering::Relaxed);
                None
            }
            e => Some(Err(e.into())),
        }
    }

    /// Gives the unnamed `file` the name `name` in `dir`. `AT_EMPTY_PATH` needs a capability
    /// most processes lack; `/proc/self/fd` does the same for everyone where `/proc` exists.
    fn link(dir: &File, file: &File, name: &Path) -> Result<(), Errno> {
        match rustix::fs::linkat(file, "", dir, name, AtFlags::EMPTY_PATH) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT | Errno::PERM | Errno::ACCESS | Errno::INVAL) => {
                let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
                rustix::fs::linkat(rustix::fs::CWD, proc.as_str(), dir, name, AtFlags::SYMLINK_FOLLOW)
            }
            Err(e) => Err(e),
        }
    }
}

/// Sweeps `dir` unless this process did so within [`SWEEP_EVERY`].
fn sweep_if_due(dir: &Path) {
    static LAST: Mutex<Option<HashMap<PathBuf, Instant>>> = Mutex::new(None);
    let now = Instant::now();
    {
        let Ok(mut last) = LAST.lock() else { return };
        let map = last.get_or_insert_with(HashMap::new);
        if map.get(dir).is_some_and(|t| now.duration_since(*t) < SWEEP_EVERY) {
            return;
        }
        if map.len() >= 4096 {
            map.clear();
        }
        map.insert(dir.to_path_buf(), now);
    }
    sweep_leftovers(dir);
}

/// Removes temporary files in `dir` that earlier writers left behind: those of a process that
/// no longer exists, those older than a day, and those of the older pid-less scheme older than
/// an hour. Returns how many it removed. Failures are ignored: sweeping is a courtesy, the write
/// that triggered it does not depend on it.
pub fn sweep_leftovers(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(kind) = leftover_kind(name) else { continue };
        let age =
            || entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).unwrap_or_default();
        let stale = match kind {
            Leftover::Pid(pid) => pid != std::process::id() && (!process_alive(pid) || age() > STALE_AFTER),
            Leftover::Legacy => age() > LEGACY_STALE_AFTER,
        };
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

enum Leftover {
    /// `.kodik-<pid>-<n>.tmp`.
    Pid(u32),
    /// `.kodik-XXXXXX.tmp` from the `tempfile` crate (six alphanumerics).
    Legacy,
}

fn leftover_kind(name: &str) -> Option<Leftover> {
    let middle = name.strip_prefix(".kodik-")?.strip_suffix(".tmp")?;
    if let Some((pid, rest)) = middle.split_once('-') {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
        if digits(pid) && digits(rest) {
            return pid.parse().ok().map(Leftover::Pid);
        }
        return None;
    }
    (middle.len() == 6 && middle.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(Leftover::Legacy)
}

/// Whether `pid` names a running process (one we may not signal counts as running).
fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root (an agent in a container on a bind-mounted checkout) keeps the owner of the file it
    /// replaces instead of turning it into a root-owned file the host user cannot write.
    #[test]
    fn e12_replacing_write_keeps_owner_and_group_where_permitted() {
        use std::os::unix::fs::MetadataExt as _;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.txt");
        std::fs::write(&p, "a\n").unwrap();
        if std::os::unix::fs::chown(&p, Some(65534), Some(65534)).is_err() {
            // Only root can give a file away; elsewhere there is no foreign owner to keep.
            assert!(std::env::var_os("CI").is_none(), "CI must run this test as root (chown to nobody failed)");
            eprintln!("skipped: not root");
            return;
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"b\n", false).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (65534, 65534, 0o640));
        assert_eq!(std::fs::read(&p).unwrap(), b"b\n");
        // A new file stays the writer's.
        let fresh = d.path().join("new.txt");
        write_atomic(&fresh, b"n", false).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().uid(), rustix::process::geteuid().as_raw());
    }

    /// A move's destination takes the place of the source: it gets the source's mode, as `mv`
    /// keeps it, not a new file's 0666 minus umask nor the mode of a file it replaces.
    #[test]
    fn e12_write_like_gives_a_new_path_the_mode_of_the_file_it_replaces() {
        let d = tempfile::tempdir().unwrap();
        for mode in [0o755, 0o600] {
            let src = d.path().join(format!("src{mode:o}"));
            std::fs::write(&src, "x").unwrap();
            std::fs::set_permissions(&src, std::fs::Permissions::from_mode(mode)).unwrap();
            let like = std::fs::metadata(&src).unwrap();
            let dest = d.path().join(format!("moved/dest{mode:o}"));
            write_atomic_like(&dest, b"y", true, Some(&like)).unwrap();
            assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o7777, mode);
            // Moved onto an existing file, it still keeps its own (a 0600 file must not become
            // 0644 because a readable file was there).
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).unwrap();
            write_atomic_like(&dest, b"z", true, Some(&like)).unwrap();
            assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o7777, mode);
        }
    }

    #[test]
    fn e12_other_links_counts_the_names_a_replacing_write_leaves_behind() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, "old").unwrap();
        assert_eq!(other_links(&a), 0);
        std::fs::hard_link(&a, &b).unwrap();
        assert_eq!(other_links(&a), 1);
        write_atomic(&a, b"new", false).unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"old");
        assert_eq!(other_links(&a), 0);
        assert_eq!(other_links(&d.path().join("missing")), 0);
    }

    #[test]
    fn e12_atomic_write_keeps_permissions_and_leaves_no_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&p, b"new", false).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o751);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn e12_named_fallback_keeps_permissions_and_leaves_no_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o741)).unwrap();
        write_named(d.path(), Path::new("run.sh"), b"new", Some(Keep::of(&std::fs::metadata(&p).unwrap()))).unwrap();
        write_named(d.path(), Path::new("fresh.txt"), b"fresh", None).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read(d.path().join("fresh.txt")).unwrap(), b"fresh");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o741);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }

    #[test]
    fn c1_creates_parents_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/c.txt");
        assert!(write_atomic(&p, b"x", false).is_err());
        write_atomic(&p, b"x", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
    }

    #[test]
    fn e12_sweep_removes_leftovers_of_dead_writers_only() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dead_tmp = d.path().join(format!(".kodik-{dead}-1a.tmp"));
        let own_tmp = d.path().join(format!(".kodik-{}-2b.tmp", std::process::id()));
        let init_tmp = d.path().join(".kodik-1-3c.tmp"); // pid 1 is always alive
        let user_file = d.path().join(".kodik-notes.tmp.txt");
        for p in [&dead_tmp, &own_tmp, &init_tmp, &user_file] {
            std::fs::write(p, "x").unwrap();
        }
        assert_eq!(sweep_leftovers(d.path()), 1);
        assert!(!dead_tmp.exists());
        assert!(own_tmp.exists() && init_tmp.exists() && user_file.exists());
    }

    #[test]
    fn e12_names_of_the_two_schemes_are_recognised_and_nothing_else() {
        assert!(matches!(leftover_kind(".kodik-123-0a1b.tmp"), Some(Leftover::Pid(123))));
        assert!(matches!(leftover_kind(".kodik-aB3xZ9.tmp"), Some(Leftover::Legacy)));
        for other in [".kodik-.tmp", ".kodik-12-.tmp", ".kodik-notes.tmp", "kodik-123-1.tmp", ".kodik-123-1.txt"] {
            assert!(leftover_kind(other).is_none(), "{other}");
        }
    }
}
