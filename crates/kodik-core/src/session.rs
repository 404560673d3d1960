//! State shared by the tools of one conversation: what was read at which file version
//! (E2, R4) and the loop guard (G15).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The version of these bytes. The hash is XXH3 (64-bit, seed 0): this runs on every read
    /// and on both sides of every write of a file, so it must be far faster than the disk
    /// (SipHash was not, on 10 MB; a scalar XXH64 took a tenth of a 15 MB edit's time).
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self { len: bytes.len() as u64, hash: xxhash_rust::xxh3::xxh3_64(bytes) }
    }

    /// Reads `path` and returns its version.
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        Ok(Self::of_bytes(&std::fs::read(path)?))
    }
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
    message: Arc<AtomicU64>,
    reads: Arc<Mutex<HashMap<PathBuf, ReadRecord>>>,
    guard: Mutex<HashMap<String, GuardEntry>>,
    /// Results go to a program, not to the model ([`Session::for_program`]).
    unseen: bool,
    /// The host cannot tell when its client compacts ([`Session::set_compaction_unseen`]).
    compaction_unseen: AtomicBool,
}

/// The message number reads seen by no model are recorded under: never the current one.
const UNSEEN: u64 = u64::MAX;

/// Added to a loop-guard hint by a host that cannot see compaction
/// ([`Session::set_compaction_unseen`]): the way back to a result the model no longer has.
pub const REPEAT_TO_SEE_AGAIN: &str = "If that earlier result is no longer in your context (it was compacted or \
     cleared), send this exact call once more: the repeat returns the result in full.";

/// Added by such a host to an "already read in this message" note (R4): the way to the lines
/// for a model that does not have that read ([`Session::explain_repeat`]).
pub const READ_AGAIN_TO_SEE: &str = "If you do not have that read (another agent made it, or it was compacted or \
     cleared), send this exact call once more: the repeat returns the lines.";

impl Session {
    /// A fresh session.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view of this session for calls whose results go to a program instead of the model
    /// (code mode's nested calls, K1). It shares the message number and the read records, so
    /// edits check against what was read before (E2) and what the program reads or writes counts
    /// for later calls; but the model never sees these results, so nothing it reads is
    /// "already read in this message" (R4) and it has no loop guard of its own or the session's
    /// (G15): each call gets its real output.
    pub fn for_program(&self) -> Self {
        Self {
            message: Arc::clone(&self.message),
            reads: Arc::clone(&self.reads),
            guard: Mutex::default(),
            unseen: true,
            compaction_unseen: AtomicBool::new(false),
        }
    }

    /// Whether results go to a program rather than the model ([`Session::for_program`]): it
    /// reads only what tools return, never the events they send on their own.
    pub fn is_for_program(&self) -> bool {
        self.unseen
    }

    /// The host cannot tell when its client compacts its context: an MCP server (the protocol
    /// has no such message) or `kodik batch`. From now on the loop guard (G15) answers an
    /// identical unchanged repeat with its "unchanged" hint once, and runs the repeat after
    /// that hint afresh: a client that sends the very call that was just answered "unchanged"
    /// no longer has the earlier result (its context was compacted or cleared), and there is
    /// no other way for it to get the result back. [`REPEAT_TO_SEE_AGAIN`] is the sentence
    /// such a host adds to the hint ([`Session::explain_repeat`]).
    pub fn set_compaction_unseen(&self) {
        self.compaction_unseen.store(true, Ordering::Relaxed);
    }

    /// Whether [`set_compaction_unseen`](Self::set_compaction_unseen) was called.
    pub fn compaction_unseen(&self) -> bool {
        self.compaction_unseen.load(Ordering::Relaxed)
    }

    /// Adds [`REPEAT_TO_SEE_AGAIN`] to `out` when it is a loop-guard "unchanged" hint (its
    /// `meta.unchanged` is true) and this session's compaction is unseen, so the model learns
    /// how to get the earlier result back. Every other result is left alone.
    ///
    /// Such a host also guesses where its client's messages begin, and an "already read in this
    /// message" note (R4, `meta.still_current`) may name a read this model never saw (another
    /// agent sharing the connection made it) or no longer has. That note gets
    /// [`READ_AGAIN_TO_SEE`], and the current message ends here: the very read sent again
    /// returns the lines (after the loop guard's own hint at most, which its repeat passes).
    pub fn explain_repeat(&self, out: &mut crate::ToolOutput) {
        if !self.compaction_unseen() {
            return;
        }
        let flag = |key: &str| out.meta.get(key).and_then(serde_json::Value::as_bool) == Some(true);
        let sentence = if flag("unchanged") {
            REPEAT_TO_SEE_AGAIN
        } else if flag("still_current") {
            self.next_message();
            READ_AGAIN_TO_SEE
        } else {
            return;
        };
        match out.content.iter_mut().rev().find_map(|c| match c {
            crate::Content::Text { text } => Some(text),
            _ => None,
        }) {
            Some(text) => {
                text.push(if text.ends_with('\n') { '\n' } else { ' ' });
                text.push_str(sentence);
            }
            None => out.content.push(crate::Content::text(sentence)),
        }
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
        let message = if self.unseen { UNSEEN } else { self.message() };
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
        let record = self.reads.lock().unwrap_or_else(|p| p.into_inner()).get(path).cloned();
        // A program saw none of the model's reads: none is from its current message (R4).
        if self.unseen { record.map(|r| ReadRecord { message: UNSEEN, ..r }) } else { record }
    }

    /// Whether lines `start..=end` of `path` at `version` were already read during the
    /// current message (R4).
    pub fn already_read(&self, path: &Path, version: FileVersion, start: usize, end: usize) -> bool {
        if self.unseen {
            return false;
        }
        let reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        reads.get(path).is_some_and(|r| {
            r.version == version && r.message == self.message() && r.ranges.iter().any(|&(s, e)| s <= start && end <= e)
        })
    }

    /// The loop guard (G15): `key` identifies the call (tool + canonical arguments),
    /// `fingerprint` the state of what it looks at (file versions, match set). Returns
    /// whether to run it afresh or answer "unchanged".
    pub fn loop_guard(&self, key: &str, fingerprint: u64) -> LoopGuardVerdict {
        if self.unseen {
            return LoopGuardVerdict::Fresh;
        }
        let mut guard = self.guard.lock().unwrap_or_else(|p| p.into_inner());
        match guard.get_mut(key) {
            // The repeat right after the hint: this client lost the result (see
            // `set_compaction_unseen`); run it, and hint again on the next repeat.
            Some(e) if e.fingerprint == fingerprint && e.repeats > 0 && self.compaction_unseen() => {
                e.repeats = 0;
                LoopGuardVerdict::Fresh
            }
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
    fn e2_file_version_hash_is_xxh3() {
        // The published XXH3-64 value of the empty input (seed 0).
        assert_eq!(FileVersion::of_bytes(b"").hash, 0x2D06_8005_38D3_94C2);
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

    #[test]
    fn g15_a_host_that_cannot_see_compaction_gets_the_result_again_right_after_the_hint() {
        let s = Session::new();
        s.set_compaction_unseen();
        assert_eq!(s.loop_guard("read:a", 1), LoopGuardVerdict::Fresh);
        assert_eq!(s.loop_guard("read:a", 1), LoopGuardVerdict::Unchanged { repeats: 1 });
        assert_eq!(s.loop_guard("read:a", 1), LoopGuardVerdict::Fresh, "the repeat right after the hint");
        assert_eq!(s.loop_guard("read:a", 1), LoopGuardVerdict::Unchanged { repeats: 1 }, "hinted again");
        let mut hint = crate::ToolOutput::text("Unchanged since your last identical call.")
            .with_meta(serde_json::json!({"unchanged": true}));
        s.explain_repeat(&mut hint);
        assert_eq!(hint.text_content(), format!("Unchanged since your last identical call. {REPEAT_TO_SEE_AGAIN}"));
        let mut other = crate::ToolOutput::text("1\u{2192}hello");
        s.explain_repeat(&mut other);
        assert_eq!(other.text_content(), "1\u{2192}hello", "only hints are explained");
        let seen = Session::new();
        let mut hint = crate::ToolOutput::text("Unchanged.").with_meta(serde_json::json!({"unchanged": true}));
        seen.explain_repeat(&mut hint);
        assert_eq!(hint.text_content(), "Unchanged.", "a host that sees compaction resets the guard itself");
    }

    #[test]
    fn r4_g15_a_host_that_cannot_see_messages_ends_the_message_at_an_already_read_note() {
        let s = Session::new();
        s.set_compaction_unseen();
        let p = Path::new("/w/a.txt");
        let v = FileVersion::of_bytes(b"one\n");
        s.record_read(p, v, Some((1, 1)));
        let mut note = crate::ToolOutput::text("`a.txt` lines 1-1 are unchanged since you read them earlier.")
            .with_meta(serde_json::json!({"still_current": true}));
        s.explain_repeat(&mut note);
        assert!(note.text_content().ends_with(READ_AGAIN_TO_SEE), "{}", note.text_content());
        assert!(!s.already_read(p, v, 1, 1), "the read sent again is not 'already read in this message'");
        let seen = Session::new();
        seen.record_read(p, v, Some((1, 1)));
        let mut note = crate::ToolOutput::text("unchanged").with_meta(serde_json::json!({"still_current": true}));
        seen.explain_repeat(&mut note);
        assert_eq!(note.text_content(), "unchanged", "a host that knows its messages keeps the note as it is");
        assert!(seen.already_read(p, v, 1, 1));
    }

    #[test]
    fn g15_r4_a_programs_view_shares_reads_but_never_says_already_read() {
        let s = Session::new();
        let p = Path::new("/w/a.txt");
        let v = FileVersion::of_bytes(b"one\ntwo\n");
        s.record_read(p, v, Some((1, 2)));
        let program = s.for_program();
        assert!(!program.already_read(p, v, 1, 2), "the program never saw the model's read");
        assert_ne!(program.last_read(p).map(|r| r.message), Some(s.message()), "nor from this message");
        assert_eq!(program.last_read(p).map(|r| r.version), Some(v), "edits still see the read version");
        program.record_read(p, v, Some((1, 2)));
        assert!(!program.already_read(p, v, 1, 2), "nor its own earlier read");
        assert!(!s.already_read(p, v, 1, 2), "the model did not see the program's read");
        assert_eq!(program.loop_guard("grep:x", 1), LoopGuardVerdict::Fresh);
        assert_eq!(program.loop_guard("grep:x", 1), LoopGuardVerdict::Fresh);
        assert_eq!(s.loop_guard("grep:x", 1), LoopGuardVerdict::Fresh, "the session's guard is untouched");
        let w = FileVersion::of_bytes(b"new\n");
        program.record_write(p, w);
        assert_eq!(s.last_read(p).map(|r| r.version), Some(w), "a program's write counts for the model's edits");
    }
}
