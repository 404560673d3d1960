//! Loading and saving text files the way every edit tool must: decoded by their own
//! encoding, written back atomically in the same encoding, BOM and line endings (E12), with a
//! checkpoint of what was there before (E13).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kodik_core::text::{TextFormat, decode, encode};
use kodik_core::{Diagnostic, DiagnosticSeverity, FileVersion, ToolContext, ToolError, Workspace};

use crate::checkpoints::{Checkpoints, Prior};
use crate::damaged;

/// A text file as read from disk.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    /// The bytes on disk when they are not simply `text` in UTF-8 (another encoding, a BOM);
    /// `None` when they are, so a 10 MB file is held once, not twice.
    raw: Option<Vec<u8>>,
    /// The decoded text, line endings untouched.
    pub(crate) text: String,
    /// How it is stored.
    pub(crate) format: TextFormat,
    /// UTF-8 with a few invalid byte sequences, each shown in `text` as U+FFFD; `raw` holds the
    /// bytes they were, to be put back when the file is written.
    lossy_utf8: bool,
}

impl Loaded {
    /// Whether `text` is the file's bytes as they are (UTF-8 without BOM, nothing replaced), so
    /// an edited text can be written without encoding.
    pub(crate) fn is_plain(&self) -> bool {
        self.raw.is_none()
    }

    /// The bytes to write for `text`, this file's text edited: in its encoding, with its BOM,
    /// and the invalid bytes of a damaged UTF-8 file put back where their U+FFFD still stands:
    /// each U+FFFD gets the bytes of the one it was traced to (see [`damaged`]).
    pub(crate) fn encode(&self, text: &str, shown: &str) -> Result<Vec<u8>, ToolError> {
        // No U+FFFD left: the damaged bytes were all replaced (a repair), the text is plain.
        if !self.lossy_utf8 || !text.contains('\u{FFFD}') {
            return encode_checked(text, &self.format, shown);
        }
        const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
        let original = self.raw.as_deref().unwrap_or_default();
        let body = original.strip_prefix(BOM).filter(|_| self.format.bom).unwrap_or(original);
        let stood_for = damaged::stood_for(body);
        if damaged::marks(text) != stood_for.len() || damaged::marks(&self.text) != stood_for.len() {
            return Err(ToolError::failed(format!(
                "`{shown}` has bytes that are not valid UTF-8, shown as `\u{FFFD}`; the edit removed or added some \
                 of them, so which bytes go where is unknown and the file was not changed — keep every `\u{FFFD}` \
                 as it is and edit around it, or replace all of them at once to repair the file"
            )));
        }
        let traced = damaged::trace(&self.text, text);
        let mut used = vec![false; stood_for.len()];
        traced.iter().flatten().for_each(|&i| used[i] = true);
        // The U+FFFD nothing traces are as many as the ones nothing was traced to; when those
        // all stand for the same bytes, which goes where makes no difference.
        let mut unused = stood_for.iter().zip(&used).filter(|(_, u)| !**u).map(|(b, _)| *b);
        let same = unused.next().filter(|first| unused.all(|b| b == *first));
        let mut pieces = text.split('\u{FFFD}');
        let mut kept = Vec::with_capacity(text.len());
        kept.extend_from_slice(pieces.next().unwrap_or_default().as_bytes());
        for (piece, origin) in pieces.zip(traced) {
            let bytes = match origin.map(|i| stood_for[i]).or(same) {
                Some(bytes) => bytes.unwrap_or("\u{FFFD}".as_bytes()),
                None => {
                    return Err(ToolError::failed(format!(
                        "`{shown}` has bytes that are not valid UTF-8, shown as `\u{FFFD}`; the edit moved or \
                         rewrote lines holding them so that which bytes belong to which `\u{FFFD}` cannot be told, \
                         and the file was not changed — keep the text around each `\u{FFFD}` as it is (moving whole \
                         lines is fine), or replace all of them at once to repair the file"
                    )));
                }
            };
            kept.extend_from_slice(bytes);
            kept.extend_from_slice(piece.as_bytes());
        }
        Ok(if self.format.bom { [BOM, &kept].concat() } else { kept })
    }

    /// The bytes on disk.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.raw.as_deref().unwrap_or(self.text.as_bytes())
    }

    /// The bytes on disk, by value.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.raw.unwrap_or_else(|| self.text.into_bytes())
    }
}

/// Reads and decodes `path`, refusing binary files and text that would not survive a round
/// trip through its detected encoding.
pub(crate) fn load(path: &Path, shown: &str, ws: &Workspace) -> Result<Loaded, ToolError> {
    let bytes = std::fs::read(path).map_err(|e| ToolError::io("reading", shown, e))?;
    decode_bytes(bytes, shown, ws)
}

/// [`load`] for a file the caller already holds the text of, as `expected` (a whole-file
/// `old_string`): when the file's bytes are exactly `expected` and [`decode_bytes`] would take
/// them as plain UTF-8 text, the file is compared in pieces instead of read into a second copy,
/// and `expected` becomes the loaded text. Otherwise `Err(expected)` and the caller loads.
pub(crate) fn load_if_equal(path: &Path, expected: String) -> Result<Loaded, String> {
    if plain_text(&expected) && file_equals(path, &expected) {
        Ok(Loaded { raw: None, text: expected, format: TextFormat::default(), lossy_utf8: false })
    } else {
        Err(expected)
    }
}

/// Whether [`decode_bytes`] takes `text`'s bytes as plain UTF-8 text as they are: not empty, no
/// BOM, no NUL.
pub(crate) fn plain_text(text: &str) -> bool {
    !text.is_empty() && !text.starts_with('\u{FEFF}') && memchr::memchr(0, text.as_bytes()).is_none()
}

/// Whether the file at `path` holds exactly `expected`, compared in 1 MB pieces.
pub(crate) fn file_equals(path: &Path, expected: &str) -> bool {
    use std::io::Read as _;
    if !std::fs::metadata(path).is_ok_and(|m| m.len() == expected.len() as u64) {
        return false;
    }
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return at == expected.len(),
            Ok(n) if expected.as_bytes().get(at..at + n) == Some(&buf[..n]) => at += n,
            Ok(_) | Err(_) => return false,
        }
    }
}

/// [`plain_text`] and [`file_equals`] in one pass: each piece of the file is compared with the
/// same piece of `expected` and that piece scanned for NUL and `\r` while it is in cache. `None`
/// when the file is not exactly `expected` or `expected` is not plain text; else whether
/// `expected` holds a `\r` (then its line endings need a closer look).
pub(crate) fn file_equals_plain(path: &Path, expected: &str) -> Option<bool> {
    use std::io::Read as _;
    let want = expected.as_bytes();
    if want.is_empty() || want.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return None;
    }
    if !std::fs::metadata(path).is_ok_and(|m| m.len() == want.len() as u64) {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut saw_cr) = (0, false);
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            return (at == want.len()).then_some(saw_cr);
        }
        let piece = want.get(at..at + n)?;
        if piece != &buf[..n] {
            return None;
        }
        let nul_from = if saw_cr {
            0
        } else {
            match memchr::memchr2(0, b'\r', piece) {
                None => n,
                Some(k) => {
                    saw_cr |= piece[k] == b'\r';
                    k
                }
            }
        };
        if memchr::memchr(0, &piece[nul_from..]).is_some() {
            return None;
        }
        at += n;
    }
}

/// [`load`] for bytes already in memory.
pub(crate) fn decode_bytes(bytes: Vec<u8>, shown: &str, ws: &Workspace) -> Result<Loaded, ToolError> {
    // Fast path for the common case (plain UTF-8, no BOM, no NUL): what `decode` would do, but
    // without its byte-by-byte line-ending census, which the edit tools do not need.
    let bytes = if !bytes.starts_with(&[0xEF, 0xBB, 0xBF]) && memchr::memchr(0, &bytes).is_none() {
        match String::from_utf8(bytes) {
            Ok(text) => return Ok(Loaded { raw: None, text, format: TextFormat::default(), lossy_utf8: false }),
            Err(e) => e.into_bytes(),
        }
    } else {
        bytes
    };
    let decoded = decode(&bytes, ws.settings().encoding()).map_err(|_| {
        ToolError::failed(format!("`{shown}` is a binary file (it contains NUL bytes); only text files can be edited"))
    })?;
    // A UTF-8 file with a few damaged bytes keeps them: they are written back as they were.
    let lossy_utf8 = decoded.lossy && decoded.format.encoding == encoding_rs::UTF_8;
    if decoded.lossy && !lossy_utf8 {
        return Err(ToolError::failed(format!(
            "`{shown}` is not valid {} text, so writing it back would corrupt it; set the project's \
             `files.encoding` to the file's real encoding, or leave this file alone",
            decoded.format.encoding.name()
        )));
    }
    Ok(Loaded { raw: Some(bytes), text: decoded.text, format: decoded.format, lossy_utf8 })
}

/// Encodes `text` in `format`, refusing characters the encoding cannot store (encoding_rs
/// would silently turn them into HTML entities).
pub(crate) fn encode_checked(text: &str, format: &TextFormat, shown: &str) -> Result<Vec<u8>, ToolError> {
    let enc = format.encoding;
    if enc != encoding_rs::UTF_8 && enc != encoding_rs::UTF_16LE && enc != encoding_rs::UTF_16BE {
        let (_, _, unmappable) = enc.encode(text);
        if unmappable {
            let bad: String = text
                .chars()
                .filter(|c| {
                    let mut b = [0u8; 4];
                    enc.encode(c.encode_utf8(&mut b)).2
                })
                .take(5)
                .collect();
            return Err(ToolError::failed(format!(
                "`{shown}` is stored as {} and cannot hold these characters of the new text: {bad:?}; \
                 the file was not changed — use characters the encoding has",
                enc.name()
            )));
        }
    }
    Ok(encode(text, format))
}

/// The symlink that `raw` itself names, with what it points to, when its last part is one: its
/// folder is resolved like any path, its last part is not followed. Deleting a name (or moving
/// it away) removes that link, never the file behind it (D1), as `rm` and `git rm` do. `None`
/// when the last part is not a symlink or its folder is not a valid workspace path (the normal
/// path check then reports that).
pub(crate) fn named_symlink(ws: &Workspace, raw: &Path) -> Result<Option<(PathBuf, PathBuf)>, ToolError> {
    let Some(std::path::Component::Normal(name)) = raw.components().next_back() else { return Ok(None) };
    let parent = match raw.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(dir) = ws.check(parent) else { return Ok(None) };
    let link = dir.join(name);
    if !std::fs::symlink_metadata(&link).is_ok_and(|m| m.is_symlink()) {
        return Ok(None);
    }
    if ws.is_ignored(&link) {
        return Err(ToolError::Path(kodik_core::PathError::Ignored(ws.display(&link))));
    }
    let target = std::fs::read_link(&link).map_err(|e| ToolError::io("reading", ws.display(&link), e))?;
    Ok(Some((link, target)))
}

/// What a result says when the file written had `others` other hard links: the atomic write
/// (E12: a new file renamed into place, so no reader ever sees half of it) gave this name a new
/// file, and the other names still show the old content. Writing in place instead would keep
/// the links but could leave a half-written file behind a crash; the model is told instead, so
/// it can edit the other names too if they matter. Empty when there are none.
pub(crate) fn split_links_note(others: u64, shown: &str) -> String {
    match others {
        0 => String::new(),
        1 => format!(
            "\nNote: `{shown}` had another name (a hard link); the write gave `{shown}` a new file, so the other \
             name still has the old content."
        ),
        n => format!(
            "\nNote: `{shown}` had {n} other names (hard links); the write gave `{shown}` a new file, so the other \
             names still have the old content."
        ),
    }
}

/// Writes `bytes` to `path` atomically and records `prior` as a checkpoint of `turn`.
pub(crate) fn write_recorded(
    path: &Path,
    shown: &str,
    bytes: &[u8],
    prior: Prior,
    turn: u64,
    checkpoints: &Checkpoints,
) -> Result<(), ToolError> {
    kodik_core::fs::write_atomic(path, bytes, true).map_err(|e| ToolError::io("writing", shown, e))?;
    checkpoints.record(turn, path, prior);
    Ok(())
}

/// Texts from this size on are worth a helper thread for work that can run beside other work
/// (a thread costs tens of microseconds; hashing 1 MB costs about a hundred).
pub(crate) const PARALLEL_MIN: usize = 1 << 20;

/// [`alongside`] when `parallel`, else `main` and then `side` on this thread.
pub(crate) fn alongside_if<A, B: Send>(
    parallel: bool,
    main: impl FnOnce() -> A,
    side: impl FnOnce() -> B + Send,
) -> (A, std::thread::Result<B>) {
    if parallel {
        return alongside(main, side);
    }
    let a = main();
    (a, std::panic::catch_unwind(std::panic::AssertUnwindSafe(side)))
}

/// Runs `main` on this thread and `side` on a helper thread at the same time (`side` runs
/// here after `main` if no thread can be started). A panic in `side` comes back as its `Err`.
pub(crate) fn alongside<A, B: Send>(
    main: impl FnOnce() -> A,
    side: impl FnOnce() -> B + Send,
) -> (A, std::thread::Result<B>) {
    let cell = std::sync::Mutex::new(Some(side));
    let take = || cell.lock().ok().and_then(|mut f| f.take());
    let (a, b) = std::thread::scope(|scope| {
        let handle =
            std::thread::Builder::new().name("kodik-edit-side".into()).spawn_scoped(scope, || take().map(|f| f()));
        let a = main();
        (a, handle.map(|h| h.join()))
    });
    let b = match b {
        Ok(Ok(Some(b))) => Ok(b),
        Ok(Err(panic)) => Err(panic),
        // No helper thread: run it here.
        Err(_) | Ok(Ok(None)) => match take() {
            Some(f) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)),
            None => Err(Box::new("the helper thread lost its work") as Box<dyn std::any::Any + Send>),
        },
    };
    (a, b)
}

/// The checks every mutating tool makes against a file the session read: it must have been
/// read (E2) and must not have changed on disk since.
pub(crate) fn check_read(
    cx_session: &kodik_core::Session,
    path: &Path,
    shown: &str,
    bytes: &[u8],
) -> Result<(), ToolError> {
    check_read_version(cx_session, path, shown, || FileVersion::of_bytes(bytes))
}

/// [`check_read`] with the file's version from `version` (hashed elsewhere, maybe already).
pub(crate) fn check_read_version(
    cx_session: &kodik_core::Session,
    path: &Path,
    shown: &str,
    version: impl FnOnce() -> FileVersion,
) -> Result<(), ToolError> {
    let Some(record) = cx_session.last_read(path) else {
        return Err(ToolError::failed(format!(
            "`{shown}` has not been read in this session; read it with read_file first, then retry this edit \
             with old_string copied from what you read"
        )));
    };
    if record.version != version() {
        return Err(ToolError::failed(format!(
            "`{shown}` changed on disk since you last read it (by the user, a formatter or another process); \
             re-read it first with read_file and build the edit from its current content — the file was not changed"
        )));
    }
    Ok(())
}

/// What E9 found for one written file.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Its errors, all of them (the result text shows [`MAX_SHOWN_ERRORS`]) but those the
    /// project disproves ([`crate::disproved`]).
    pub(crate) errors: Vec<Diagnostic>,
    /// Why it could not be checked (its language server failed to start, crashed or did not
    /// answer in time): said in the result, which would otherwise read like a clean file.
    pub(crate) not_checked: Option<String>,
}

impl Checked {
    fn has_news(&self) -> bool {
        !self.errors.is_empty() || self.not_checked.is_some()
    }
}

/// The errors a diagnostics provider reports for the file as written (E9). No provider, or
/// one that does not handle the file, means no waiting at all.
pub(crate) async fn diagnostics(cx: &ToolContext, path: &Path, text: &str) -> Checked {
    let Some(provider) = cx.diagnostics.as_ref().map(Arc::clone) else { return Checked::default() };
    if !provider.handles(path) {
        return Checked::default();
    }
    let all = tokio::select! {
        d = provider.check(path, text) => d,
        () = cx.cancel.cancelled() => return Checked::default(),
    };
    match all {
        Ok(all) => {
            let project = crate::disproved::Project::new(path, cx.workspace.roots());
            let errors =
                all.into_iter().filter(|d| d.severity == DiagnosticSeverity::Error && !project.disproves(d)).collect();
            Checked { errors, not_checked: None }
        }
        Err(why) => Checked { errors: Vec::new(), not_checked: Some(why) },
    }
}

/// The files a tool wrote, as `(path, shown path)`.
pub(crate) type Written = Vec<(std::path::PathBuf, String)>;

/// E9 for the tools that write whole files (create_file, apply_patch): each written `(path,
/// shown)` file with errors or that could not be checked, read back only when a provider
/// handles it.
pub(crate) async fn written_diagnostics(
    cx: &ToolContext,
    written: &[(std::path::PathBuf, String)],
) -> Vec<(String, Checked)> {
    let Some(provider) = cx.diagnostics.as_ref().map(Arc::clone) else { return Vec::new() };
    let mut out = Vec::new();
    for (path, shown) in written {
        if !provider.handles(path) {
            continue;
        }
        let Ok(bytes) = tokio::fs::read(path).await else { continue };
        let checked = diagnostics(cx, path, &String::from_utf8_lossy(&bytes)).await;
        if checked.has_news() {
            out.push((shown.clone(), checked));
        }
    }
    out
}

/// [`written_diagnostics`] as result text, one block per file.
pub(crate) fn written_diagnostics_text(found: &[(String, Checked)]) -> String {
    found.iter().map(|(shown, c)| named_diagnostics_text(&format!("`{shown}`"), c)).collect()
}

/// The diagnostics as lines for the result text.
pub(crate) fn diagnostics_text(checked: &Checked) -> String {
    named_diagnostics_text("the written file", checked)
}

/// How many of a written file's errors a result shows.
pub(crate) const MAX_SHOWN_ERRORS: usize = 20;

/// The errors a result shows (text and meta alike).
pub(crate) fn shown_errors(diags: &[Diagnostic]) -> &[Diagnostic] {
    &diags[..diags.len().min(MAX_SHOWN_ERRORS)]
}

fn named_diagnostics_text(file: &str, checked: &Checked) -> String {
    if let Some(why) = &checked.not_checked {
        return format!("\nNot checked for errors ({file}): {why}. Run read_lints on it later to see its errors.");
    }
    let diags = &checked.errors;
    if diags.is_empty() {
        return String::new();
    }
    let mut s = if diags.len() > MAX_SHOWN_ERRORS {
        format!("\nErrors in {file} ({}; the first {MAX_SHOWN_ERRORS} shown, read_lints lists all):", diags.len())
    } else {
        format!("\nErrors in {file} ({}):", diags.len())
    };
    for d in shown_errors(diags) {
        // A message's own lines are indented under it, so they do not read as more errors.
        s.push_str(&format!("\n  {}:{} {}", d.line, d.column, d.message.trim_end().replace('\n', "\n      ")));
        if let Some(src) = &d.source {
            s.push_str(&format!(" [{src}]"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e6_diff_built_alongside_the_write_returns_both_and_contains_a_panic() {
        let (a, b) = alongside(|| 1, || "diff".to_string());
        assert_eq!((a, b.unwrap()), (1, "diff".to_string()));
        let (a, b) = alongside(|| 2, || -> u8 { panic!("a bug in the diff") });
        assert_eq!(a, 2);
        assert!(b.is_err());
    }
}
