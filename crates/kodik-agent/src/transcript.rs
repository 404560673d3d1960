//! The JSON Lines transcript of a conversation: one record per change, flushed per line, so a
//! crash loses at most the line being written (G7).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use kodik_core::ToolOutput;
use kodik_model::{Item, Usage};
use serde::{Deserialize, Serialize};

use crate::error::AgentError;

/// The transcript format version written in the meta record.
pub(crate) const VERSION: u32 = 1;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Record {
    /// The first line. `parent` is the session that started this one as a sub-agent (A3).
    Meta {
        version: u32,
        session_id: String,
        model: String,
        mode: String,
        created: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
    /// The conversation was reloaded and continues from here.
    Resumed { model: String, mode: String, at: String },
    /// An item appended to the history; a tool result carries its full output (G7).
    Item {
        item: Item,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<ToolOutput>,
    },
    /// A tool result's text was replaced by a one-line pointer to its full output (G20).
    Compacted { call_id: String, output: String },
    /// What a request cost.
    Usage { turn: u32, usage: Usage },
}

/// What a transcript holds once reloaded.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub items: Vec<Item>,
    /// Where tools saved full outputs, by call id.
    pub full_outputs: HashMap<String, PathBuf>,
    pub compacted: HashSet<String>,
    /// Each tool result's meta that is not null, as (tool name, meta), in order: what a note
    /// source restores its state from on resume ([`crate::Notes::resumed`]).
    pub results: Vec<(String, serde_json::Value)>,
}

/// An open transcript, appended to line by line.
#[derive(Debug)]
pub(crate) struct Writer {
    file: File,
}

impl Writer {
    /// Creates `path`, failing if it exists. The new conversation is locked at once (see
    /// [`open`](Self::open)).
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().append(true).create_new(true).open(path)?;
        // A file nobody else has opened yet: the lock cannot be taken; failing to lock
        // (a file system without locks) leaves it unlocked, as before locks existed.
        let _ = file.try_lock();
        Ok(Self { file })
    }

    /// Opens `path` for appending and takes its lock, which this process holds as long as the
    /// conversation is open (the system drops it when the process dies, however it ends).
    /// `None`: another conversation holds it — running in another process, or still open in
    /// this one. Two writers would interleave their turns in one transcript, answering one
    /// call twice, which no provider accepts on the next resume.
    pub fn open(path: &Path) -> Result<Option<Self>, AgentError> {
        let file = OpenOptions::new().append(true).open(path).map_err(|source| AgentError::Io {
            action: "cannot open",
            path: path.to_path_buf(),
            source,
        })?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            // A file system without locks: go on unlocked, as before locks existed.
            Err(std::fs::TryLockError::Error(e)) => {
                tracing::debug!(path = %path.display(), "transcript not locked: {e}");
                Ok(Some(Self { file }))
            }
        }
    }

    /// Cuts the transcript to its first `keep` bytes (a partial last line is cut off, so the
    /// next record starts on a line of its own).
    pub fn truncate_to(&mut self, path: &Path, keep: u64) -> Result<(), AgentError> {
        let io = |action, source| AgentError::Io { action, path: path.to_path_buf(), source };
        let len = self.file.metadata().map_err(|e| io("cannot read", e))?.len();
        if len > keep {
            self.file.set_len(keep).map_err(|e| io("cannot truncate the partial last line of", e))?;
        }
        Ok(())
    }

    /// Appends one record as one line; it reaches the file before this returns.
    pub fn append(&mut self, record: &Record) -> std::io::Result<()> {
        self.append_all(std::slice::from_ref(record))
    }

    /// Appends records known at the same moment (a response's calls, a turn's results), one
    /// line each, in one write: nothing is held back for later.
    pub fn append_all(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for record in records {
            serde_json::to_writer(&mut buf, record).map_err(std::io::Error::other)?;
            buf.push(b'\n');
        }
        self.file.write_all(&buf)?;
        self.file.flush()
    }
}

/// Reads a transcript. Returns what it holds and the length of its well-formed prefix: a last
/// line that does not parse (a crash mid-write) is skipped; any other bad line is an error.
pub(crate) fn load(path: &Path) -> Result<(Loaded, u64), AgentError> {
    let text = std::fs::read_to_string(path).map_err(|source| AgentError::Io {
        action: "cannot read",
        path: path.to_path_buf(),
        source,
    })?;
    let mut loaded = Loaded::default();
    let mut keep = 0u64;
    let mut offset = 0usize;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, raw) in lines.iter().enumerate() {
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            keep = offset as u64;
            continue;
        }
        let record = match serde_json::from_str::<Record>(line) {
            Ok(r) if raw.ends_with('\n') || i + 1 < lines.len() => r,
            // A last line without its newline was cut off mid-write, even if it parses.
            Ok(_) => break,
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(AgentError::BadTranscript {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                });
            }
        };
        keep = offset as u64;
        if i == 0 && !matches!(record, Record::Meta { .. }) {
            return Err(AgentError::BadTranscript {
                path: path.to_path_buf(),
                line: 1,
                message: "the first line must be the meta record".into(),
            });
        }
        match record {
            Record::Item { item, output } => {
                if let (Item::ToolResult { call_id, name, .. }, Some(output)) = (&item, output) {
                    if !output.meta.is_null() {
                        loaded.results.push((name.clone(), output.meta));
                    }
                    if let Some(path) = output.full_output {
                        loaded.full_outputs.insert(call_id.clone(), path);
                    }
                }
                loaded.items.push(item);
            }
            Record::Compacted { call_id, output: new_text } => {
                for item in loaded.items.iter_mut().rev() {
                    if let Item::ToolResult { call_id: id, output, images, .. } = item
                        && *id == call_id
                    {
                        *output = new_text;
                        images.clear();
                        break;
                    }
                }
                loaded.compacted.insert(call_id);
            }
            Record::Meta { .. } | Record::Resumed { .. } | Record::Usage { .. } => {}
        }
    }
    Ok((loaded, keep))
}

/// Whether the transcript at `path` is a sub-agent's: its meta line names a parent session.
/// Only the first line is read; a transcript whose first line cannot be read counts as not a
/// sub-agent's, so whatever is wrong with it is reported when it is opened.
pub(crate) fn is_sub_agent(path: &Path) -> bool {
    use std::io::BufRead as _;
    let Ok(file) = File::open(path) else { return false };
    let mut line = String::new();
    if std::io::BufReader::new(file).read_line(&mut line).is_err() {
        return false;
    }
    matches!(serde_json::from_str::<Record>(&line), Ok(Record::Meta { parent: Some(_), .. }))
}

/// A new session id: UTC time to the millisecond, then 4 random hex digits, so ids sort by
/// creation time: `20261201T041500.123Z-1a2b`.
pub(crate) fn new_id() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // RandomState is seeded from the OS per process and per instance: enough to tell apart
    // sessions started in the same millisecond.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(now.as_nanos());
    let (date, time) = civil(now.as_secs());
    format!("{date}T{time}.{:03}Z-{:04x}", now.subsec_millis(), h.finish() & 0xffff)
}

/// Whether `id` can name a transcript file in the sessions folder (no path separators, no
/// leading dot).
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 200
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The transcript of session `id`.
pub(crate) fn path_of(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.jsonl"))
}

/// RFC 3339 UTC time with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, time) = civil(now.as_secs());
    let (y, rest) = date.split_at(4);
    let (mo, d) = rest.split_at(2);
    let (h, rest) = time.split_at(2);
    let (mi, s) = rest.split_at(2);
    format!("{y}-{mo}-{d}T{h}:{mi}:{s}.{:03}Z", now.subsec_millis())
}

/// `(YYYYMMDD, HHMMSS)` of a Unix time (Howard Hinnant's civil-from-days).
fn civil(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (format!("{y:04}{m:02}{d:02}"), format!("{:02}{:02}{:02}", sod / 3600, sod % 3600 / 60, sod % 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil(0), ("19700101".into(), "000000".into()));
        // 2026-12-01T04:15:00Z
        assert_eq!(civil(1_796_098_500), ("20261201".into(), "041500".into()));
        // A leap day.
        assert_eq!(civil(951_782_400), ("20000229".into(), "000000".into()));
    }

    #[test]
    fn ids_name_files_and_sort_by_time() {
        let a = new_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id();
        assert!(valid_id(&a) && valid_id(&b), "{a} {b}");
        assert!(a < b, "{a} !< {b}");
        assert!(!valid_id("../x") && !valid_id(".hidden") && !valid_id("a/b") && !valid_id(""));
    }
}
