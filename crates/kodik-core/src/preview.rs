//! [`OutputPreview`]: what the model sees of a long output — its head and its tail with the
//! dropped middle marked — while the whole stream goes to a spool file (G9, G17–G20).
//!
//! Memory is bounded by `head_bytes + tail_bytes` plus one write buffer, whatever the stream
//! length; every byte is copied a fixed number of times (linear time). The spool is written
//! synchronously from [`push`](OutputPreview::push), so a slow disk slows the producer
//! (back-pressure) instead of growing memory (G19). If the spool cannot be created or written,
//! the preview goes on without it and says so (G18); the next preview tries again.
//!
//! Spool files outlive their call, since their paths are handed to the model (G20), but not
//! forever: starting a spool file prunes the folder's old ones (see [`SPOOL_MAX_AGE`] and
//! [`SPOOL_BUDGET_BYTES`]), so a long-lived host does not fill the disk.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// Limits and spool location of a preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewConfig {
    /// Bytes kept from the start.
    pub head_bytes: usize,
    /// Bytes kept from the end.
    pub tail_bytes: usize,
    /// Folder for spool files; `None` disables spooling.
    pub spool_dir: Option<PathBuf>,
}

impl Default for PreviewConfig {
    fn default() -> Self {
        Self { head_bytes: 16 * 1024, tail_bytes: 16 * 1024, spool_dir: Some(default_spool_dir()) }
    }
}

impl PreviewConfig {
    /// A preview keeping `max_bytes` in all, split evenly between head and tail.
    pub fn with_limit(max_bytes: usize) -> Self {
        Self { head_bytes: max_bytes / 2, tail_bytes: max_bytes - max_bytes / 2, ..Self::default() }
    }

    /// Without a spool file.
    pub fn without_spool(mut self) -> Self {
        self.spool_dir = None;
        self
    }

    /// Spool into `dir`.
    pub fn spool_in(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spool_dir = Some(dir.into());
        self
    }
}

/// The spool folder set for this process with [`set_default_spool_dir`], if any.
static SPOOL_DIR_OVERRIDE: std::sync::RwLock<Option<PathBuf>> = std::sync::RwLock::new(None);

/// Where spool files go by default: the folder set with [`set_default_spool_dir`], else
/// `kodik-output-<uid>` in the temporary folder (`$TMPDIR`, else `/tmp`), one per user so two users
/// of a machine never share full outputs. The paths are handed to the model, so the files outlive
/// the call (G20); old ones are pruned as new ones start.
pub fn default_spool_dir() -> PathBuf {
    let set = SPOOL_DIR_OVERRIDE.read().unwrap_or_else(|p| p.into_inner()).clone();
    set.unwrap_or_else(per_user_spool_dir)
}

/// `kodik-output-<uid>` in the temporary folder: the default when nothing is set.
pub fn per_user_spool_dir() -> PathBuf {
    std::env::temp_dir().join(format!("kodik-output-{}", rustix::process::geteuid().as_raw()))
}

/// Whether `path` (canonical) is a full output saved by this module in the spool folder: an
/// `output-*.log` file directly in [`default_spool_dir`]. Results hand the model these paths
/// (G20), so the read tools accept them although they lie outside the workspace.
pub fn is_saved_output(path: &Path) -> bool {
    let named =
        path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("output-") && n.ends_with(".log"));
    if !named {
        return false;
    }
    let dir = default_spool_dir();
    let dir = dir.canonicalize().unwrap_or(dir);
    path.parent() == Some(dir.as_path()) && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Sets the folder [`default_spool_dir`] returns for this process (`None`: back to
/// [`per_user_spool_dir`]). A host calls it once at start-up, before building toolsets: every
/// [`PreviewConfig::default`] made afterwards spools there. The folder is created (mode 0700)
/// when the first output is saved.
pub fn set_default_spool_dir(dir: Option<PathBuf>) {
    *SPOOL_DIR_OVERRIDE.write().unwrap_or_else(|p| p.into_inner()) = dir;
}

/// Creates `dir` for spool files readable by this user only. The per-user default in a shared
/// temporary folder must also be a real folder owned by this user with no access for others
/// (anyone can create `/tmp/kodik-output-<uid>` first): a symlink or another owner is refused, and
/// looser permissions on an own folder are tightened.
fn prepare_spool_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(e);
    }
    if dir != per_user_spool_dir() {
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a folder of this user (uid {me}) — someone else made it; outputs are not saved \
                 there. Remove it, or set another spool folder",
                dir.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Spool files older than this are deleted when a new spool file starts in the same folder.
pub const SPOOL_MAX_AGE: Duration = Duration::from_secs(3 * 24 * 3600);
/// When a folder's spool files add up to more than this, the oldest are deleted, down to the
/// budget, as a new one starts; files younger than [`SPOOL_MIN_AGE`] are always kept.
pub const SPOOL_BUDGET_BYTES: u64 = 4 << 30;
/// Spool files this young are never pruned: the model may be about to read them.
pub const SPOOL_MIN_AGE: Duration = Duration::from_secs(3600);
/// The most one spool file saves by default (see [`OutputPreview::with_spool_limit`]): pruning
/// only runs as a file starts, so without a cap one runaway command (a `yes` flood, a retry
/// loop left in the background) would write until the disk is full.
pub const SPOOL_FILE_MAX_BYTES: u64 = SPOOL_BUDGET_BYTES;

/// Prunes `dir` at most once a minute per process: listing a large folder for every long
/// output would cost more than it saves.
fn prune_spool_dir_now_and_then(dir: &Path) {
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
            return;
        }
        *last = Some(Instant::now());
    }
    prune_spool_dir(dir, SystemTime::now(), SPOOL_MAX_AGE, SPOOL_BUDGET_BYTES, SPOOL_MIN_AGE);
}

/// Deletes this module's spool files (`output-*.log`) in `dir` that are older than `max_age`,
/// then the oldest of the rest while they add up to more than `budget`, never one younger than
/// `min_age`. Other files are left alone; errors are ignored (pruning is housekeeping).
fn prune_spool_dir(dir: &Path, now: SystemTime, max_age: Duration, budget: u64, min_age: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut kept: Vec<(Duration, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("output-") && name.ends_with(".log")) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let age = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
        if age > max_age {
            let _ = std::fs::remove_file(entry.path());
        } else {
            kept.push((age, meta.len(), entry.path()));
        }
    }
    let mut total: u64 = kept.iter().map(|(_, len, _)| len).sum();
    // Oldest first.
    kept.sort_by_key(|k| std::cmp::Reverse(k.0));
    for (age, len, path) in kept {
        if total <= budget || age < min_age {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// The largest single write into a spool file. The page cache takes a write in folios as large
/// as the write, and fresh large folios are far dearer than small ones: on the 2-core VM the
/// benchmarks run on (Linux 6.18, ext4), `dd` writing 1 GiB from a pipe spent 4–9× the CPU with
/// 1 MiB writes as with 64 KiB ones, which cost what `cat` (64 KiB pipe reads) does.
const SPOOL_WRITE_MAX: usize = 64 * 1024;

/// Writes what of `data` fits under `limit`, given that `before` bytes came before it; the first
/// time the limit cuts, a line saying so ends the file, so whoever reads it knows it is not all.
fn write_spool_capped<W: std::io::Write>(
    w: &mut std::io::BufWriter<W>,
    data: &[u8],
    before: u64,
    limit: u64,
) -> std::io::Result<()> {
    let room = usize::try_from(limit.saturating_sub(before)).unwrap_or(usize::MAX);
    if data.len() <= room {
        return write_spool(w, data);
    }
    write_spool(w, &data[..room])?;
    if before <= limit {
        write_spool(w, spool_cut_marker(limit).as_bytes())?;
    }
    Ok(())
}

/// The line that ends a spool file cut at `limit` bytes.
fn spool_cut_marker(limit: u64) -> String {
    format!("\n[… saving stopped here: only the first {limit} bytes of the output were saved …]\n")
}

/// Writes `data` through the spool's buffer in pieces of at most [`SPOOL_WRITE_MAX`]: a piece
/// that fills the buffer goes straight to the file, smaller ones are gathered first.
fn write_spool<W: std::io::Write>(w: &mut std::io::BufWriter<W>, data: &[u8]) -> std::io::Result<()> {
    data.chunks(SPOOL_WRITE_MAX).try_for_each(|piece| w.write_all(piece))
}

/// A fixed-capacity ring of the most recent bytes.
#[derive(Debug)]
struct Ring {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Self { buf: vec![0; cap], start: 0, len: 0 }
    }

    fn push(&mut self, mut data: &[u8]) {
        let cap = self.buf.len();
        if cap == 0 {
            return;
        }
        if data.len() >= cap {
            data = &data[data.len() - cap..];
            self.buf.copy_from_slice(data);
            self.start = 0;
            self.len = cap;
            return;
        }
        let mut end = (self.start + self.len) % cap;
        let first = data.len().min(cap - end);
        self.buf[end..end + first].copy_from_slice(&data[..first]);
        self.buf[..data.len() - first].copy_from_slice(&data[first..]);
        end = (end + data.len()) % cap;
        let new_len = self.len + data.len();
        if new_len > cap {
            self.start = end;
            self.len = cap;
        } else {
            self.len = new_len;
        }
    }

    fn to_vec(&self) -> Vec<u8> {
        let cap = self.buf.len();
        let mut out = Vec::with_capacity(self.len);
        let first = self.len.min(cap - self.start);
        out.extend_from_slice(&self.buf[self.start..self.start + first]);
        out.extend_from_slice(&self.buf[..self.len - first]);
        out
    }
}

#[derive(Debug)]
enum Spool {
    /// Not needed yet: everything so far fits in the head.
    Pending,
    Active {
        file: std::io::BufWriter<std::fs::File>,
        path: PathBuf,
    },
    Off,
    Failed(String),
}

/// A bounded view of a byte stream, with the full stream spooled to disk.
#[derive(Debug)]
pub struct OutputPreview {
    cfg: PreviewConfig,
    head: Vec<u8>,
    tail: Ring,
    total: u64,
    lines: u64,
    ends_with_newline: bool,
    spool: Spool,
    /// The most bytes of the stream the spool file saves.
    spool_limit: u64,
}

/// What a finished (or paused) preview shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewSummary {
    /// Head, marker and tail, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Whether a middle part was dropped.
    pub truncated: bool,
    /// Bytes seen in all.
    pub total_bytes: u64,
    /// Lines seen in all (a final line without newline counts).
    pub total_lines: u64,
    /// Where the complete stream is, when it had to be saved and could be.
    pub full_output: Option<PathBuf>,
    /// Why the full stream could not be saved, when it could not (G18).
    pub spool_error: Option<String>,
}

impl OutputPreview {
    /// An empty preview.
    pub fn new(cfg: PreviewConfig) -> Self {
        let tail = Ring::new(cfg.tail_bytes);
        let spool = if cfg.spool_dir.is_some() { Spool::Pending } else { Spool::Off };
        Self {
            head: Vec::with_capacity(cfg.head_bytes.min(64 * 1024)),
            tail,
            cfg,
            total: 0,
            lines: 0,
            ends_with_newline: true,
            spool,
            spool_limit: SPOOL_FILE_MAX_BYTES,
        }
    }

    /// Saves at most `bytes` of the stream in the spool file (default [`SPOOL_FILE_MAX_BYTES`]);
    /// past it the file ends with a line saying so, the preview's head, tail and counts still
    /// cover everything, and its marker says the file holds only the start (G9, G18).
    pub fn with_spool_limit(mut self, bytes: u64) -> Self {
        self.spool_limit = bytes;
        self
    }

    /// Appends bytes. Never fails: a spool error turns spooling off and is reported later.
    pub fn push(&mut self, data: &[u8]) {
        self.push_lines(data, memchr::memchr_iter(b'\n', data).count() as u64);
    }

    /// [`push`](Self::push) for a caller that already knows how many `\n` bytes `data` holds
    /// (it scanned the bytes anyway, or feeds the same chunk to two previews): one pass over
    /// the bytes fewer. `newlines` must be that count; it is what `total_lines` adds up.
    pub fn push_lines(&mut self, data: &[u8], newlines: u64) {
        if data.is_empty() {
            return;
        }
        let before = self.total;
        self.total += data.len() as u64;
        self.lines += newlines;
        self.ends_with_newline = data.last() == Some(&b'\n');

        let room = self.cfg.head_bytes.saturating_sub(self.head.len());
        let (to_head, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(to_head);
        self.tail.push(rest);

        if matches!(self.spool, Spool::Pending) && self.total > self.cfg.head_bytes as u64 {
            self.start_spool(rest);
        } else if let Spool::Active { file, .. } = &mut self.spool
            && before <= self.spool_limit
            && let Err(e) = write_spool_capped(file, data, before, self.spool_limit)
        {
            self.spool_failed(format!("writing the full output failed: {e}"));
        }
    }

    /// Spooling failed: the partial file is deleted, since it is never named to the model and
    /// would only keep a full disk full, so later outputs could never be saved again (G18, G21).
    fn spool_failed(&mut self, why: String) {
        if let Spool::Active { file, path } = std::mem::replace(&mut self.spool, Spool::Failed(why)) {
            // Whatever is still buffered is lost either way; the file goes.
            drop(file.into_parts());
            let _ = std::fs::remove_file(path);
        }
    }

    fn start_spool(&mut self, rest: &[u8]) {
        let Some(dir) = self.cfg.spool_dir.clone() else {
            self.spool = Spool::Off;
            return;
        };
        let result = (|| -> std::io::Result<(std::io::BufWriter<std::fs::File>, PathBuf)> {
            prepare_spool_dir(&dir)?;
            prune_spool_dir_now_and_then(&dir);
            // Kept (named for good) only once the start is written: a failed start deletes it.
            let file = tempfile::Builder::new().prefix("output-").suffix(".log").tempfile_in(&dir)?;
            let mut w = std::io::BufWriter::with_capacity(SPOOL_WRITE_MAX, file);
            write_spool_capped(&mut w, &self.head, 0, self.spool_limit)?;
            write_spool_capped(&mut w, rest, self.head.len() as u64, self.spool_limit)?;
            let (file, path) = w.into_inner().map_err(|e| e.into_error())?.keep().map_err(|e| e.error)?;
            Ok((std::io::BufWriter::with_capacity(SPOOL_WRITE_MAX, file), path))
        })();
        self.spool = match result {
            Ok((file, path)) => Spool::Active { file, path },
            Err(e) => Spool::Failed(format!("the full output could not be saved to {}: {e}", dir.display())),
        };
    }

    /// Bytes seen so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes of memory the preview holds for text (head and tail capacity); bounded by the
    /// configuration whatever was pushed.
    pub fn memory_bytes(&self) -> usize {
        self.head.capacity() + self.tail.buf.capacity()
    }

    /// Flushes the spool so the saved file is complete up to now.
    pub fn flush(&mut self) {
        if let Spool::Active { file, .. } = &mut self.spool
            && let Err(e) = file.flush()
        {
            self.spool_failed(format!("writing the full output failed: {e}"));
        }
    }

    /// The preview as it stands. Can be called repeatedly; more may be pushed afterwards.
    pub fn summary(&mut self) -> PreviewSummary {
        self.summary_shown_through(|bytes| std::borrow::Cow::Borrowed(bytes))
    }

    /// [`summary`](Self::summary) with the kept head and tail each passed through `shown` before
    /// they become text (the whole output when nothing was dropped): for a caller that saves
    /// bytes as they came but shows them cleaned up. Head and tail are passed apart, so whatever
    /// `shown` does at the end of one never runs into the marker or the other. The counts and
    /// the saved file are those of the bytes pushed.
    pub fn summary_shown_through(
        &mut self,
        mut shown: impl for<'a> FnMut(&'a [u8]) -> std::borrow::Cow<'a, [u8]>,
    ) -> PreviewSummary {
        self.flush();
        let kept = self.head.len() as u64 + self.tail.len as u64;
        let truncated = self.total > kept;
        let (full_output, spool_error) = match &self.spool {
            Spool::Active { path, .. } if truncated => (Some(path.clone()), None),
            Spool::Failed(e) if truncated => (None, Some(e.clone())),
            _ => (None, None),
        };
        let text = if truncated {
            let head = trim_partial_char_end(&self.head);
            let tail_bytes = self.tail.to_vec();
            let tail = skip_partial_char_start(&tail_bytes);
            let omitted = self.total - head.len() as u64 - tail.len() as u64;
            let (head, tail) = (shown(head), shown(tail));
            let mut marker = format!("\n[… {omitted} bytes omitted from the middle …");
            match (&full_output, &spool_error) {
                (Some(p), _) if self.total > self.spool_limit => marker.push_str(&format!(
                    " only the first {} bytes were saved (the cap for one output): {}",
                    self.spool_limit,
                    p.display()
                )),
                (Some(p), _) => marker.push_str(&format!(" full output: {}", p.display())),
                (None, Some(e)) => marker.push_str(&format!(" {e}")),
                _ => {}
            }
            marker.push_str("]\n");
            let mut t = String::from_utf8_lossy(&head).into_owned();
            t.push_str(&marker);
            t.push_str(&String::from_utf8_lossy(&tail));
            t
        } else {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail.to_vec());
            String::from_utf8_lossy(&shown(&all)).into_owned()
        };
        let total_lines = self.lines + u64::from(self.total > 0 && !self.ends_with_newline);
        PreviewSummary { text, truncated, total_bytes: self.total, total_lines, full_output, spool_error }
    }
}

impl Drop for OutputPreview {
    /// A spool file starts as soon as the output outgrows the head, but an output that ends
    /// within head + tail is shown whole and its file is never named to anyone: it goes.
    fn drop(&mut self) {
        let kept = self.head.len() as u64 + self.tail.len as u64;
        if self.total <= kept
            && let Spool::Active { path, .. } = &self.spool
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn trim_partial_char_end(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    // Walk back over at most 3 continuation bytes to the start of the last character.
    let mut i = end;
    while i > 0 && end - i < 4 {
        i -= 1;
        let byte = b[i];
        if byte & 0xC0 != 0x80 {
            let need = if byte >= 0xF0 {
                4
            } else if byte >= 0xE0 {
                3
            } else if byte >= 0xC0 {
                2
            } else {
                1
            };
            if end - i < need {
                end = i;
            }
            break;
        }
    }
    &b[..end]
}

fn skip_partial_char_start(b: &[u8]) -> &[u8] {
    let skip = b.iter().take(3).take_while(|x| **x & 0xC0 == 0x80).count();
    &b[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g20_g21_old_spool_files_are_pruned_recent_and_foreign_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let file = |name: &str, len: usize, age: Duration| {
            let path = dir.path().join(name);
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(len as u64).unwrap();
            f.set_modified(now - age).unwrap();
            path
        };
        let ancient = file("output-ancient.log", 10, 100 * hour);
        let foreign = file("notes.txt", 10, 100 * hour);
        let old_big = file("output-old-big.log", 600, 5 * hour);
        let old_small = file("output-old-small.log", 100, 3 * hour);
        let fresh_big = file("output-fresh.log", 900, Duration::from_secs(60));
        // Budget 1000 bytes: the oldest go first until the rest fit; a file younger than the
        // minimum age is kept whatever the budget.
        prune_spool_dir(dir.path(), now, 72 * hour, 1000, hour);
        assert!(!ancient.exists(), "older than the maximum age");
        assert!(foreign.exists(), "not a spool file");
        assert!(!old_big.exists(), "oldest first…");
        assert!(old_small.exists(), "…only down to the budget (100 + 900 bytes fit)");
        assert!(fresh_big.exists(), "never younger than the minimum age");
        // Within the budget nothing young enough is touched.
        let a = file("output-a.log", 100, 5 * hour);
        prune_spool_dir(dir.path(), now, 72 * hour, 10_000, hour);
        assert!(a.exists() && old_small.exists() && fresh_big.exists());
        // Over budget with only young files left: they all stay.
        prune_spool_dir(dir.path(), now, 72 * hour, 0, 10 * hour);
        assert!(a.exists() && old_small.exists() && fresh_big.exists());
    }

    /// Runs in a child process of this test binary (the spool setting and `TMPDIR` are
    /// process-wide), with `TMPDIR` set to a fresh folder.
    fn spool_folder_child(tmp: &Path) {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let spool = |cfg: PreviewConfig| {
            let mut p = OutputPreview::new(PreviewConfig { head_bytes: 4, tail_bytes: 4, ..cfg });
            p.push(b"0123456789abcdef");
            p.summary()
        };
        let uid = rustix::process::geteuid().as_raw();
        let mine = tmp.join(format!("kodik-output-{uid}"));
        assert_eq!(default_spool_dir(), mine, "TMPDIR is honoured and the folder is per user");
        let full = spool(PreviewConfig::default()).full_output.expect("saved");
        assert_eq!(full.parent(), Some(mine.as_path()));
        assert_eq!(mode(&mine), 0o700, "other users cannot list or read it");

        // A folder someone else prepared (here: a symlink to theirs) is refused, with a reason.
        std::fs::remove_dir_all(&mine).unwrap();
        std::fs::create_dir(tmp.join("theirs")).unwrap();
        std::os::unix::fs::symlink(tmp.join("theirs"), &mine).unwrap();
        let s = spool(PreviewConfig::default());
        assert_eq!(s.full_output, None);
        assert!(s.spool_error.as_deref().unwrap_or("").contains("not a folder of this user"), "{s:?}");
        assert_eq!(std::fs::read_dir(tmp.join("theirs")).unwrap().count(), 0);
        // An own folder with loose permissions is tightened.
        std::fs::remove_file(&mine).unwrap();
        std::fs::create_dir(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(spool(PreviewConfig::default()).full_output.is_some());
        assert_eq!(mode(&mine), 0o700);

        // A host's setting wins for every default made afterwards, and can be undone.
        let set = tmp.join("host-chosen");
        set_default_spool_dir(Some(set.clone()));
        let full = spool(PreviewConfig::default()).full_output.expect("saved");
        assert_eq!(full.parent(), Some(set.as_path()));
        set_default_spool_dir(None);
        assert_eq!(default_spool_dir(), mine);
    }

    #[test]
    fn g9_g18_spool_folder_is_per_user_private_honours_tmpdir_and_can_be_set() {
        const CHILD: &str = "KODIK_SPOOL_FOLDER_CHILD";
        if let Some(tmp) = std::env::var_os(CHILD) {
            spool_folder_child(Path::new(&tmp));
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "preview::tests::g9_g18_spool_folder_is_per_user_private_honours_tmpdir_and_can_be_set"])
            .args(["--nocapture", "--test-threads=1"])
            .env("TMPDIR", tmp.path())
            .env(CHILD, tmp.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
    }

    #[test]
    fn g9_g21_output_that_ends_within_head_and_tail_leaves_no_spool_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PreviewConfig { head_bytes: 10, tail_bytes: 10, spool_dir: Some(dir.path().into()) };
        let mut p = OutputPreview::new(cfg.clone());
        p.push(b"0123456789abcdef"); // past the head: a spool file starts
        let s = p.summary();
        assert!(!s.truncated && s.full_output.is_none());
        drop(p);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a file nobody was told of is gone");
        // A truncated output's file stays: its path was handed out.
        let mut p = OutputPreview::new(cfg);
        p.push(&[b'x'; 100]);
        let full = p.summary().full_output.expect("saved");
        drop(p);
        assert_eq!(std::fs::read(full).unwrap().len(), 100);
    }

    #[test]
    fn g17_g20_push_lines_saves_and_shows_what_push_does() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PreviewConfig { head_bytes: 100, tail_bytes: 100, spool_dir: Some(dir.path().into()) };
        let data: Vec<u8> = (0..300_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let (mut a, mut b) = (OutputPreview::new(cfg.clone()), OutputPreview::new(cfg));
        // Chunks larger than one spool write, and small ones gathered in the buffer.
        for chunk in data.chunks(200_003).chain([&b"no newline"[..]]) {
            a.push(chunk);
            b.push_lines(chunk, memchr::memchr_iter(b'\n', chunk).count() as u64);
        }
        let (sa, sb) = (a.summary(), b.summary());
        assert_eq!(sb.total_lines, 300_001);
        let (pa, pb) = (sa.full_output.clone().unwrap(), sb.full_output.clone().unwrap());
        let shown = |s: &PreviewSummary, p: &Path| s.text.replace(&*p.to_string_lossy(), "FULL");
        assert_eq!((shown(&sa, &pa), sa.total_lines), (shown(&sb, &pb), sb.total_lines));
        let mut all = data.clone();
        all.extend_from_slice(b"no newline");
        assert_eq!(std::fs::read(pb).unwrap(), all, "every byte saved, in order");
        assert_eq!(std::fs::read(pa).unwrap(), all);
    }

    #[test]
    fn g9_g17_head_and_tail_are_shown_through_a_filter_apart_while_counts_and_file_keep_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PreviewConfig { head_bytes: 8, tail_bytes: 8, spool_dir: Some(dir.path().into()) };
        let raw = b"ab#cd#ef0123456789gh#ij#k\n";
        fn drop_hash(b: &[u8]) -> std::borrow::Cow<'_, [u8]> {
            b.iter().copied().filter(|&c| c != b'#').collect()
        }
        let mut p = OutputPreview::new(cfg.clone());
        p.push(raw);
        let s = p.summary_shown_through(drop_hash);
        let full = s.full_output.clone().expect("saved");
        assert_eq!(
            s.text,
            format!("abcdef\n[… 10 bytes omitted from the middle … full output: {}]\nghijk\n", full.display())
        );
        assert_eq!((s.total_bytes, s.total_lines, s.truncated), (26, 1, true));
        assert_eq!(std::fs::read(&full).unwrap(), raw, "the file keeps what was pushed");
        // Nothing dropped: the whole output goes through the filter once.
        let mut p = OutputPreview::new(cfg);
        p.push(b"a#b");
        assert_eq!(p.summary_shown_through(drop_hash).text, "ab");
    }

    #[test]
    fn g9_g18_the_spool_file_stops_at_its_cap_and_both_file_and_preview_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PreviewConfig { head_bytes: 10, tail_bytes: 10, spool_dir: Some(dir.path().into()) };
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let mut p = OutputPreview::new(cfg.clone()).with_spool_limit(1000);
        for chunk in data.chunks(333) {
            p.push(chunk);
        }
        let s = p.summary();
        assert_eq!(s.total_bytes, data.len() as u64, "counts cover everything");
        assert!(s.text.ends_with(" 99999\n"), "the tail is the real end");
        assert!(s.text.contains("only the first 1000 bytes were saved"), "{}", s.text);
        let saved = std::fs::read(s.full_output.unwrap()).unwrap();
        let mut expected = data[..1000].to_vec();
        expected.extend_from_slice(spool_cut_marker(1000).as_bytes());
        assert_eq!(saved, expected);
        // Exactly at the cap: everything is saved, no mark.
        let mut p = OutputPreview::new(cfg).with_spool_limit(1000);
        p.push(&data[..1000]);
        let s = p.summary();
        assert_eq!(std::fs::read(s.full_output.unwrap()).unwrap(), &data[..1000]);
        assert!(s.text.contains("full output:"));
    }

    #[test]
    fn g17_small_output_is_shown_whole() {
        let mut p = OutputPreview::new(PreviewConfig::with_limit(100).without_spool());
        p.push(b"hello\nworld");
        let s = p.summary();
        assert_eq!(s.text, "hello\nworld");
        assert!(!s.truncated);
        assert_eq!(s.total_lines, 2);
        assert_eq!(s.full_output, None);
    }

    #[test]
    fn g17_g20_head_and_tail_are_exact_and_the_middle_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let mut p =
            OutputPreview::new(PreviewConfig { head_bytes: 10, tail_bytes: 10, spool_dir: Some(dir.path().into()) });
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for chunk in data.chunks(7) {
            p.push(chunk);
        }
        let s = p.summary();
        assert!(s.truncated);
        assert!(s.text.starts_with(std::str::from_utf8(&data[..10]).unwrap()));
        assert!(s.text.ends_with(std::str::from_utf8(&data[990..]).unwrap()));
        assert!(s.text.contains("[… 980 bytes omitted from the middle …"), "{}", s.text);
        let full = s.full_output.expect("spooled");
        assert!(s.text.contains(&full.display().to_string()));
        assert_eq!(std::fs::read(&full).unwrap(), data, "the saved output is complete");
        // A finished preview keeps the same head and tail when asked again (G20).
        assert_eq!(p.summary().text, s.text);
    }

    #[test]
    fn g17_cuts_never_split_a_character() {
        let mut p = OutputPreview::new(PreviewConfig { head_bytes: 5, tail_bytes: 5, spool_dir: None });
        p.push("ééééééééééééééé".as_bytes());
        let s = p.summary();
        assert!(!s.text.contains('\u{FFFD}'), "{}", s.text);
        assert!(s.text.starts_with("éé") && s.text.ends_with("éé"));
    }

    #[test]
    fn g17_g19_one_gib_keeps_memory_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = OutputPreview::new(PreviewConfig::with_limit(32 * 1024).spool_in(dir.path()));
        let bound = p.memory_bytes();
        let chunk = vec![b'x'; 1 << 20];
        for i in 0..1024u32 {
            let mut c = chunk.clone();
            c[..4].copy_from_slice(format!("{i:04}").as_bytes());
            *c.last_mut().unwrap() = b'\n';
            p.push(&c);
            assert!(p.memory_bytes() <= bound, "memory grew at chunk {i}");
        }
        let s = p.summary();
        assert_eq!(s.total_bytes, 1 << 30);
        assert_eq!(s.total_lines, 1024);
        let full = s.full_output.unwrap();
        assert_eq!(std::fs::metadata(&full).unwrap().len(), 1 << 30, "the spool holds every byte");
        std::fs::remove_file(full).unwrap();
    }

    #[test]
    fn g18_unwritable_spool_dir_falls_back_to_a_bounded_preview_with_a_note() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A regular file cannot be a folder: creating the spool fails.
        let bad = file.path().join("sub");
        let mut p = OutputPreview::new(PreviewConfig { head_bytes: 4, tail_bytes: 4, spool_dir: Some(bad) });
        p.push(b"0123456789abcdef");
        let s = p.summary();
        assert!(s.truncated);
        assert_eq!(s.full_output, None);
        assert!(s.spool_error.as_deref().unwrap().contains("could not be saved"));
        assert!(s.text.contains("could not be saved"));
        assert!(s.text.starts_with("0123") && s.text.ends_with("cdef"));
        // The next preview with a working folder saves again.
        let good = tempfile::tempdir().unwrap();
        let mut p2 =
            OutputPreview::new(PreviewConfig { head_bytes: 4, tail_bytes: 4, spool_dir: Some(good.path().into()) });
        p2.push(b"0123456789abcdef");
        assert!(p2.summary().full_output.is_some());
    }
}
