//! State shared by the tools of one conversation: what was read at which file version
//! (E2, R4) and the loop guard (G15).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// A file's identity at one moment: size, modification time and a hash of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileVersion {
    /// Size in bytes.
    pub len: u64,
    /// Hash of the content.
    pub hash: u64,
}

impl FileVersion {
    /// The version of these bytes. The hash is XXH64 (seed 0): this runs on every read and
    /// every write of a file, so it must keep up with the disk (SipHash did not, on 10 MB).
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self { len: bytes.len() as u64, hash: xxh64(bytes) }
    }

    /// Reads `path` and returns its version.
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        Ok(Self::of_bytes(&std::fs::read(path)?))
    }
}

/// XXH64 with seed 0: a fast, well-distributed 64-bit content hash (not cryptographic; it
/// tells versions of a file apart, it does not defend against crafted collisions).
fn xxh64(input: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    fn read64(b: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        u64::from_le_bytes(w)
    }
    fn round(acc: u64, lane: u64) -> u64 {
        acc.wrapping_add(lane.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
    }
    fn merge(acc: u64, v: u64) -> u64 {
        (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
    }
    let mut rest = input;
    let mut h = if input.len() >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        let mut stripes = input.chunks_exact(32);
        for s in &mut stripes {
            v[0] = round(v[0], read64(&s[0..]));
            v[1] = round(v[1], read64(&s[8..]));
            v[2] = round(v[2], read64(&s[16..]));
            v[3] = round(v[3], read64(&s[24..]));
        }
        rest = stripes.remainder();
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(input.len() as u64);
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        h = (h ^ round(0, read64(w))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    }
    let mut tail = words.remainder();
    if tail.len() >= 4 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&tail[..4]);
        h = (h ^ u64::from(u32::from_le_bytes(w)).wrapping_mul(P1)).rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        tail = &tail[4..];
    }
    for &b in tail {
        h = (h ^ u64::from(b).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// What the session knows about one file it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// The version that was read.
    pub version: FileVersion,
    /// Line ranges read at that version (1-based, inclusive); `None` means the whole file.
    pub ranges: Vec<(usize, usize)>,
    /// The user message during which it was read.
    pub message: u64,
    /// When it was recorded.
    pub at: SystemTime,
}

/// What the loop guard says about a repeated call (G15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopGuardVerdict {
    /// First time, or the workspace changed since: run it and show the result.
    Fresh,
    /// The same call against the same state as last time: answer with a short hint.
    Unchanged {
        /// How many identical repeats in a row (1 on the first repeat).
        repeats: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct GuardEntry {
    fingerprint: u64,
    repeats: u32,
}

/// State of one conversation, shared by all its tools.
#[derive(Debug, Default)]
pub struct Session {
    message: AtomicU64,
    reads: Mutex<HashMap<PathBuf, ReadRecord>>,
    guard: Mutex<HashMap<String, GuardEntry>>,
}

impl Session {
    /// A fresh session.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current user-message number.
    pub fn message(&self) -> u64 {
        self.message.load(Ordering::Relaxed)
    }

    /// A new user message started: "still current" notes (R4) no longer apply.
    pub fn next_message(&self) -> u64 {
        self.message.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records that `path` (canonical) was read at `version`. Reads of the same version
    /// accumulate their ranges; a new version replaces the record.
    pub fn record_read(&self, path: &Path, version: FileVersion, range: Option<(usize, usize)>) {
        let mut reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        let message = self.message();
        let entry = reads.entry(path.to_path_buf()).or_insert_with(|| ReadRecord {
            version,
            ranges: Vec::new(),
            message,
            at: SystemTime::now(),
        });
        if entry.version != version || entry.message != message {
            *entry = ReadRecord { version, ranges: Vec::new(), message, at: SystemTime::now() };
        }
        entry.ranges.push(range.unwrap_or((1, usize::MAX)));
    }

    /// Records that the session itself wrote `path` at `version`: the model knows the new
    /// content (it just sent it), so later edits need no re-read (E9).
    pub fn record_write(&self, path: &Path, version: FileVersion) {
        let mut reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        reads.insert(
            path.to_path_buf(),
            ReadRecord { version, ranges: vec![(1, usize::MAX)], message: self.message(), at: SystemTime::now() },
        );
    }

    /// Forgets a file (deleted, or compaction dropped its content).
    pub fn forget(&self, path: &Path) {
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).remove(path);
    }

    /// Forgets every read and every loop-guard entry: after compaction replaced old results
    /// with a summary, files can be read whole again (G15).
    pub fn compacted(&self) {
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.guard.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The read record of `path`, if it was read in this session.
    pub fn last_read(&self, path: &Path) -> Option<ReadRecord> {
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).get(path).cloned()
    }

    /// Whether lines `start..=end` of `path` at `version` were already read during the
    /// current message (R4).
    pub fn already_read(&self, path: &Path, version: FileVersion, start: usize, end: usize) -> bool {
        let reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        reads.get(path).is_some_and(|r| {
            r.version == version && r.message == self.message() && r.ranges.iter().any(|&(s, e)| s <= start && end <= e)
        })
    }

    /// The loop guard (G15): `key` identifies the call (tool + canonical arguments),
    /// `fingerprint` the state of what it looks at (file versions, match set). Returns
    /// whether to run it afresh or answer "unchanged".
    pub fn loop_guard(&self, key: &str, fingerprint: u64) -> LoopGuardVerdict {
        let mut guard = self.guard.lock().unwrap_or_else(|p| p.into_inner());
        match guard.get_mut(key) {
            Some(e) if e.fingerprint == fingerprint => {
                e.repeats += 1;
                LoopGuardVerdict::Unchanged { repeats: e.repeats }
            }
            _ => {
                guard.insert(key.to_string(), GuardEntry { fingerprint, repeats: 0 });
                LoopGuardVerdict::Fresh
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2_file_version_hash_is_xxh64() {
        // Published XXH64 vectors (seed 0); the pangram takes the 32-byte stripe path.
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
        assert_eq!(xxh64(b"The quick brown fox jumps over the lazy dog"), 0x0B24_2D36_1FDA_71BC);
        // Same length, one byte apart: a hash that ignored content would pass a length check.
        assert_ne!(FileVersion::of_bytes(b"one\ntwo\n"), FileVersion::of_bytes(b"one\ntwx\n"));
    }

    #[test]
    fn r4_same_lines_same_version_same_message_are_current() {
        let s = Session::new();
        let p = Path::new("/w/a.txt");
        let v = FileVersion::of_bytes(b"one\ntwo\n");
        s.record_read(p, v, Some((1, 10)));
        assert!(s.already_read(p, v, 2, 5));
        assert!(!s.already_read(p, v, 5, 11), "lines beyond what was read");
        assert!(!s.already_read(p, FileVersion::of_bytes(b"changed"), 2, 5), "changed file");
        s.next_message();
        assert!(!s.already_read(p, v, 2, 5), "a new message reads afresh");
    }

    #[test]
    fn g15_loop_guard_sees_changes_and_compaction() {
        let s = Session::new();
        assert_eq!(s.loop_guard("grep:x", 1), LoopGuardVerdict::Fresh);
        assert_eq!(s.loop_guard("grep:x", 1), LoopGuardVerdict::Unchanged { repeats: 1 });
        assert_eq!(s.loop_guard("grep:x", 1), LoopGuardVerdict::Unchanged { repeats: 2 });
        assert_eq!(s.loop_guard("grep:x", 2), LoopGuardVerdict::Fresh, "workspace changed");
        s.compacted();
        assert_eq!(s.loop_guard("grep:x", 2), LoopGuardVerdict::Fresh, "after compaction");
    }
}
