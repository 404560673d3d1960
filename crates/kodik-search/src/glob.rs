//! `glob` (GL1): files whose path matches a pattern, newest first. Without `path`, every
//! workspace root is searched; files outside the first root are shown by
//! their absolute path.
//!
//! Pattern rules (the same as grep's `glob` filter, GR5): a pattern without `/` matches file
//! names at any depth (`*.rs` is `**/*.rs`); a pattern with `/` is matched against the path
//! relative to the search folder; `*` never crosses a `/`, `**` does.
//!
//! Hidden files policy: files and folders whose names start with `.` are skipped (as ripgrep
//! and fd do), unless the pattern itself names such a component (`.github/**/*.yml`,
//! `**/.env*`); then hidden entries are walked too, except `.git` folders. `.gitignore`,
//! `.ignore` and `.kodikignore` always apply.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use globset::GlobBuilder;
use ignore::WalkState;
use kodik_core::workspace::IGNORE_FILE;
use kodik_core::{
    CancellationToken, PathError, Resource, Session, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace,
};
use kodik_schema::search::GlobArgs;
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::guard;
use crate::util::{CancelCheck, Closed, Unreadable, closed_folder, names_hidden, run_blocking, stamp};

/// The `glob` tool.
#[derive(Debug, Clone)]
pub struct GlobTool {
    spec: ToolSpec,
    config: Arc<SearchConfig>,
}

impl GlobTool {
    /// The tool with the given limits.
    pub fn new(config: SearchConfig) -> Self {
        Self { spec: kodik_schema::spec::<GlobArgs>(), config: Arc::new(config) }
    }
}

impl Default for GlobTool {
    fn default() -> Self {
        Self::new(SearchConfig::default())
    }
}

#[async_trait]
impl TypedTool for GlobTool {
    type Args = GlobArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn reads(&self, args: &GlobArgs, ws: &Workspace) -> Vec<Resource> {
        searched(ws, args.path.as_deref())
    }

    async fn run(&self, args: GlobArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = cx.workspace.clone();
        let session = cx.session.clone();
        let config = self.config.clone();
        let cancel = cx.cancel.clone();
        Ok(run_blocking(&cx.cancel, move || glob(&ws, &session, &config, &args, &cancel)).await?)
    }
}

/// Where a search starts: the given path (checked), or every workspace root (a root inside
/// another one is left out, its files being found through the outer one).
/// What a search of `path` (every root without one) reads, so it sees the turn's earlier
/// changes of files there and later changes wait for it (G2, G4).
pub(crate) fn searched(ws: &Workspace, path: Option<&str>) -> Vec<Resource> {
    match path.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => vec![ws.tree(p)],
        // Roots are canonical already.
        None => ws.roots().iter().map(|r| Resource::Tree(r.clone())).collect(),
    }
}

/// The folders (or file) a search starts from: `path`, or every root. `field` is the
/// parameter that takes a pattern (`glob` for grep, `pattern` for glob), named when a pattern
/// was given as `path`; `own` is the pattern the call gave there (grep: its one `glob`).
pub(crate) fn search_bases(
    ws: &Workspace,
    path: Option<&str>,
    field: &'static str,
    own: Option<&str>,
) -> Result<Vec<(PathBuf, std::fs::Metadata)>, SearchError> {
    let bases: Vec<PathBuf> = match path {
        Some(p) if !p.trim().is_empty() => vec![ws.check_readable(p.trim())?],
        _ => {
            let roots = ws.roots();
            roots
                .iter()
                .enumerate()
                .filter(|(i, r)| {
                    !roots.iter().enumerate().any(|(j, o)| j != *i && r.starts_with(o) && (o != *r || j < *i))
                })
                .map(|(_, r)| r.clone())
                .collect()
        }
    };
    bases
        .into_iter()
        .map(|base| match std::fs::metadata(&base) {
            // A folder that cannot be listed is an error, not an empty folder with no hits.
            Ok(m) if m.is_dir() => match std::fs::read_dir(&base) {
                // Nothing in a closed folder may be shown (G16 fails closed).
                Ok(_) => match closed_folder(&base) {
                    Some(Closed::IgnoreFile(e)) => Err(PathError::IgnoreFileUnreadable {
                        path: ws.display(&base),
                        ignore_file: ws.display(&base.join(IGNORE_FILE)),
                        reason: e.kind().to_string(),
                    }
                    .into()),
                    Some(Closed::Folder(source)) => {
                        Err(SearchError::Io { action: "entering the folder", path: ws.display(&base), source })
                    }
                    None => Ok((base, m)),
                },
                Err(source) => Err(SearchError::Io { action: "reading the folder", path: ws.display(&base), source }),
            },
            Ok(m) => Ok((base, m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(match path.and_then(|p| glob_as_path(p, field, own)) {
                    Some(e) => e,
                    None => ws.not_found(&base).into(),
                })
            }
            Err(source) => Err(SearchError::Io { action: "reading", path: ws.display(&base), source }),
        })
        .collect()
}

/// The error for a `path` that does not exist because it is a glob pattern (`src/*.ts`,
/// `**/*.rs`): the call that means it, with the folder part as `path` and the rest as `field`.
fn glob_as_path(path: &str, field: &'static str, own: Option<&str>) -> Option<SearchError> {
    let is_glob = |c: &str| c.contains(['*', '?', '[', '{']);
    let parts: Vec<&str> = path.trim().trim_start_matches("./").split('/').collect();
    let first = parts.iter().position(|c| is_glob(c))?;
    let folder = parts[..first].join("/");
    let pattern = parts[first..].join("/");
    if let Some(joined) = own.and_then(|own| joined_pattern(&pattern, own, field)) {
        // The model's own pattern applies below the folders the path's pattern names: both
        // kept, or following the advice searched more (or less) than was asked.
        let hint = if folder.is_empty() {
            format!("`{field}: \"{joined}\"` and leave out `path`")
        } else {
            format!("`path: \"{folder}\"` and `{field}: \"{joined}\"`")
        };
        return Some(SearchError::GlobAsPath { given: path.to_string(), hint, field });
    }
    // grep's `glob` with a `/` is anchored at `path`, so the whole pattern from the root says
    // exactly what was meant; glob's `pattern` is matched below `path`.
    let hint = if folder.is_empty() || field == "glob" {
        format!("`{field}: \"{}\"` and leave out `path`", parts.join("/"))
    } else {
        format!("`path: \"{folder}\"` and `{field}: \"{pattern}\"`")
    };
    Some(SearchError::GlobAsPath { given: path.to_string(), hint, field })
}

/// `own` (the call's `pattern` or single `glob`) applied below `in_path`, the glob part of a
/// path given as `path`, when `in_path` names folders (`**`, `src/**`, `*/`) and `own` is more
/// than a catch-all; `None` otherwise (`in_path` alone then says what was meant).
fn joined_pattern(in_path: &str, own: &str, field: &str) -> Option<String> {
    let own = own.trim().trim_start_matches("./");
    if matches!(own, "" | "*" | "**" | "**/*") {
        return None;
    }
    let under = in_path.strip_suffix('/').unwrap_or(in_path);
    if !(in_path.ends_with('/') || under == "**" || under.ends_with("/**")) {
        return None;
    }
    Some(if under == "**" {
        // grep's `glob` without a `/` matches at any depth already.
        if own.starts_with("**/") || (field == "glob" && !own.contains('/')) {
            own.to_string()
        } else {
            format!("**/{own}")
        }
    } else {
        format!("{under}/{own}")
    })
}

/// A path as the search tools show it: relative to the (first) root, which is how `read_file`
/// and the other tools resolve a relative path. With several roots, a path in another root is
/// shown absolute, so that it names its root and resolves to the same file. (This is
/// `Workspace::display` for the first root, on bytes: it runs for every file a search shows.)
pub(crate) fn show_path(ws: &Workspace, path: &Path) -> String {
    let mut out = String::new();
    push_shown(ws, path, &mut out);
    out
}

/// Appends [`show_path`]'s text to `out`.
pub(crate) fn push_shown(ws: &Workspace, path: &Path, out: &mut String) {
    let bytes = shown_bytes(ws, path);
    match std::str::from_utf8(bytes) {
        Ok(name) if !name.contains(|c: char| c.is_control()) => out.push_str(name),
        _ => push_quoted(bytes, out),
    }
}

/// Whether a shown path must be written quoted by [`push_quoted`].
fn needs_quoting(bytes: &[u8]) -> bool {
    bytes.iter().any(|b| *b < 0x20 || *b == 0x7F) || std::str::from_utf8(bytes).is_err()
}

/// A name with a control character (a newline split one file into two entries of a listing)
/// or bytes that are not UTF-8, written as a JSON string in double quotes, so that it stays one
/// entry and can be given to another tool with the same escapes; bytes that are not UTF-8 as
/// `\xNN`, which no tool call can carry (the listing says so).
fn push_quoted(bytes: &[u8], out: &mut String) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        let json = serde_json::to_string(chunk.valid()).unwrap_or_default();
        out.push_str(json.get(1..json.len().saturating_sub(1)).unwrap_or_default());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out.push('"');
}

/// [`show_path`]'s text as the path's own bytes (not necessarily UTF-8).
fn shown_bytes<'a>(ws: &Workspace, path: &'a Path) -> &'a [u8] {
    let bytes = path.as_os_str().as_encoded_bytes();
    let root = ws.primary_root().as_os_str().as_encoded_bytes();
    let rel = bytes.strip_prefix(root).and_then(|rest| match rest {
        [] => Some(&b"."[..]),
        [b'/', rest @ ..] => Some(rest),
        rest if root.ends_with(b"/") => Some(rest),
        _ => None,
    });
    rel.unwrap_or(bytes)
}

/// A compiled pattern and what it is matched against.
#[derive(Clone)]
pub(crate) struct Pattern {
    /// The pattern as the answer names it (relative to the search folder).
    pub(crate) shown: String,
    /// How the name (or path) is tested.
    test: Test,
    /// Matched against the path below the search folder (`src/*.rs`) rather than the file
    /// name (`*.rs`, and `**/*.rs`, which is the same thing on the whole path but costlier).
    on_path: bool,
}

impl Pattern {
    /// Compiles a glob with GR5 semantics relative to `base`.
    pub(crate) fn compile(pattern: &str, base: &Path) -> Result<Self, SearchError> {
        let mut p = pattern.trim();
        // An absolute pattern below the search folder (`/work/repo/src/*.rs`) is taken relative to it.
        let base_s = format!("{}/", base.to_string_lossy());
        if let Some(rest) = p.strip_prefix(base_s.as_str()) {
            p = rest;
        }
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        let p = p.trim_start_matches('/');
        if p.is_empty() {
            return Err(SearchError::BadGlob { glob: pattern.to_string(), reason: "the pattern is empty".into() });
        }
        let name_only = p.strip_prefix("**/").filter(|rest| !rest.contains('/') && !rest.contains("**"));
        let glob = GlobBuilder::new(name_only.unwrap_or(p))
            .literal_separator(true)
            .build()
            .map_err(|e| SearchError::BadGlob { glob: pattern.to_string(), reason: e.kind().to_string() })?;
        let on_path = name_only.is_none() && p.contains('/');
        let test = match Test::on_name(name_only.unwrap_or(p)).filter(|_| !on_path) {
            Some(test) => test,
            None => Test::Regex(glob_regex(&glob, pattern)?),
        };
        Ok(Self { shown: p.to_string(), test, on_path })
    }

    /// Whether the file at `path`, found below `base`, matches.
    pub(crate) fn matches(&self, path: &Path, base: &Path) -> bool {
        // On bytes: `Path`'s `file_name` and `strip_prefix` parse components, which costs more
        // than the match. The walker's paths are `base` joined with names, `/`-separated.
        let bytes = path.as_os_str().as_encoded_bytes();
        let subject = if self.on_path {
            let base = base.as_os_str().as_encoded_bytes();
            bytes.strip_prefix(base).map_or(bytes, |rest| rest.strip_prefix(b"/").unwrap_or(rest))
        } else {
            memchr::memrchr(b'/', bytes).map_or(bytes, |i| &bytes[i + 1..])
        };
        self.test.matches(subject)
    }
}

/// How a pattern tests a file name or path.
#[derive(Clone)]
enum Test {
    /// `*.rs`, `*_test.go`, `*`: a name ending in these bytes. `*` also matches nothing, so
    /// the name may be just them (`.rs`), as with the regex.
    Suffix(Box<[u8]>),
    /// `Cargo.toml`: exactly this name.
    Name(Box<[u8]>),
    /// Any other glob: its regex, matched on the name's (or path's) bytes as globset's
    /// `GlobMatcher` does, without the `Candidate` that matcher allocates per call, which cost
    /// more than the match on a walk of a large tree.
    Regex(regex_automata::meta::Regex),
}

impl Test {
    /// A byte comparison equal to the glob's regex on a file name (which has no `/`), for the
    /// shapes most calls use (`*.ext`, a literal name); `None` for any other glob. It skips
    /// building the regex and its per-thread lazy DFA.
    fn on_name(glob: &str) -> Option<Self> {
        // globset's metacharacters (`\` escapes; `!`, `-`, `^` mean something only inside `[…]`).
        let literal = |s: &str| !s.contains(['*', '?', '[', ']', '{', '}', '\\', '/']);
        match glob.strip_prefix('*') {
            Some(rest) if literal(rest) => Some(Self::Suffix(rest.as_bytes().into())),
            None if literal(glob) => Some(Self::Name(glob.as_bytes().into())),
            _ => None,
        }
    }

    fn matches(&self, subject: &[u8]) -> bool {
        match self {
            Self::Suffix(end) => subject.ends_with(end),
            Self::Name(name) => subject == &name[..],
            Self::Regex(regex) => regex.is_match(subject),
        }
    }
}

/// The glob's regex, with globset's own settings for a single glob (its `new_regex`).
fn glob_regex(glob: &globset::Glob, pattern: &str) -> Result<regex_automata::meta::Regex, SearchError> {
    regex_automata::meta::Regex::builder()
        .syntax(regex_automata::util::syntax::Config::new().utf8(false).dot_matches_new_line(true))
        .configure(
            regex_automata::meta::Regex::config()
                .utf8_empty(false)
                .nfa_size_limit(Some(10 << 20))
                .hybrid_cache_capacity(10 << 20),
        )
        .build(glob.regex())
        .map_err(|e| SearchError::BadGlob { glob: pattern.to_string(), reason: e.to_string() })
}

struct Found {
    path: PathBuf,
    mtime: u128,
}

/// The walk's files and the loop guard's fingerprint of them (G15).
#[derive(Default)]
struct Collected {
    found: Vec<Found>,
    /// The wrapping sum of each file's hash (path, mtime, size): a sum does not depend on the
    /// order the threads found them in, so each thread hashes its own files.
    fingerprint: u64,
}

/// Per-thread results, handed to the shared list when the walker thread drops its visitor.
struct Local {
    mine: Collected,
    shared: Arc<Mutex<Collected>>,
}

impl Local {
    fn push(&mut self, path: PathBuf, (mtime, len): (u128, u64)) {
        // The path's bytes, with the time and size as the seed: one call per file.
        let seed = (mtime as u64) ^ len.rotate_left(32);
        let hash = xxhash_rust::xxh3::xxh3_64_with_seed(path.as_os_str().as_encoded_bytes(), seed);
        self.mine.fingerprint = self.mine.fingerprint.wrapping_add(hash);
        self.mine.found.push(Found { path, mtime });
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Each walker thread sorts its own files, in parallel; the caller's stable sort then
        // only merges the sorted runs.
        self.mine.found.sort_unstable_by(newest_first);
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.found.append(&mut self.mine.found);
        shared.fingerprint = shared.fingerprint.wrapping_add(self.mine.fingerprint);
    }
}

/// The answer's order: newest first; ties (a tree unpacked or copied at once) in path order,
/// compared as bytes — `Path`'s own comparison walks components, which cost more than the
/// walk when many times are equal.
fn newest_first(a: &Found, b: &Found) -> std::cmp::Ordering {
    b.mtime.cmp(&a.mtime).then_with(|| crate::grep::path_order(&a.path, &b.path))
}

fn glob(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &GlobArgs,
    cancel: &CancellationToken,
) -> Result<ToolOutput, SearchError> {
    let bases = search_bases(ws, args.path.as_deref(), "pattern", Some(&args.pattern))?;
    for (base, meta) in &bases {
        if meta.is_file() {
            return Err(SearchError::GlobOnFile(ws.display(base)));
        }
        if !meta.is_dir() {
            return Err(SearchError::NotSearchable(ws.display(base)));
        }
    }
    let shared: Arc<Mutex<Collected>> = Arc::default();
    let unreadable = Unreadable::new();
    let mut pattern = String::new();
    let mut hidden = false;
    for (base, _) in &bases {
        let compiled = Pattern::compile(&args.pattern, base)?;
        hidden = names_hidden(&compiled.shown);
        pattern = compiled.shown.clone();
        let enters = unreadable.clone();
        let mut wb = ws.walker_with(base, move |e| (!hidden || e.file_name() != ".git") && enters.enters(e));
        wb.hidden(!hidden).threads(config.threads);
        wb.build_parallel().run(|| {
            let mut local = Local { mine: Collected::default(), shared: shared.clone() };
            // A clone has its own regex cache: sharing one makes the threads contend.
            let compiled = compiled.clone();
            let base = base.clone();
            let mut cancelled = CancelCheck::new(cancel.clone());
            let unreadable = &unreadable;
            Box::new(move |entry| {
                if cancelled.is_cancelled() {
                    return WalkState::Quit;
                }
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        unreadable.walk_error(&e);
                        return WalkState::Continue;
                    }
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if compiled.matches(entry.path(), &base) {
                    let stamp = stamp(entry.metadata().ok().as_ref());
                    local.push(entry.into_path(), stamp);
                }
                WalkState::Continue
            })
        });
    }
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled);
    }
    let Collected { mut found, fingerprint } = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    // Stable: it finds the threads' sorted runs and merges them.
    found.sort_by(newest_first);
    let where_ = bases.iter().map(|(b, _)| b.display().to_string()).collect::<Vec<_>>().join("\0");
    let key = format!("glob\0{where_}\0{pattern}");
    let base_shown = bases.iter().map(|(b, _)| show_path(ws, b)).collect::<Vec<_>>().join("`, `");
    let what = format!("{} files match `{pattern}` in `{base_shown}`, none changed", found.len());
    if let Some(out) = guard::check(session, &key, fingerprint, &what) {
        return Ok(out);
    }
    let out = listing(ws, config, &found, &pattern, &base_shown, hidden);
    // Files in a folder that cannot be listed are missing from the list; say which.
    Ok(crate::grep::with_unreadable(out, ws, &unreadable, true))
}

/// The answer for the files found, newest first.
fn listing(
    ws: &Workspace,
    config: &SearchConfig,
    found: &[Found],
    pattern: &str,
    base_shown: &str,
    hidden: bool,
) -> ToolOutput {
    let total = found.len();
    if total == 0 {
        return ToolOutput::text(format!(
            "No files match `{pattern}` in `{base_shown}` (ignored files{} are skipped).",
            if hidden { "" } else { " and hidden files" }
        ))
        .with_meta(json!({ "total": 0, "shown": 0, "truncated": false }));
    }
    let limit = config.glob_limit.max(1);
    // Bytes first and one UTF-8 check at the end: a lossy conversion per path cost more than
    // the copy for a long list.
    let mut bytes = Vec::with_capacity(found.len().min(limit) * 64);
    let mut quoted = 0;
    for f in found.iter().take(limit) {
        let name = shown_bytes(ws, &f.path);
        if needs_quoting(name) {
            let mut s = String::new();
            push_quoted(name, &mut s);
            bytes.extend_from_slice(s.as_bytes());
            quoted += 1;
        } else {
            bytes.extend_from_slice(name);
        }
        bytes.push(b'\n');
    }
    let mut text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let shown = total.min(limit);
    let mut full_output = None;
    if total > limit {
        let saved = match save_list(ws, config, found) {
            Ok(path) => {
                let s = format!(" The full list ({total} files, newest first) is in `{}`.", path.display());
                full_output = Some(path.display().to_string());
                s
            }
            Err(e) => format!(" The full list could not be saved: {e}."),
        };
        text.push_str(&format!(
            "[{total} files match; showing the {limit} most recently modified. {} more not shown: narrow the \
             pattern or the path.{saved}]",
            total - limit
        ));
    } else {
        text.pop();
    }
    if quoted > 0 {
        text.push_str(
            "\n[Names in double quotes hold a line break, another control character or bytes that are not UTF-8, \
             written as JSON strings: give them to other tools with the same escapes. A name with `\\xNN` (a byte \
             that is not UTF-8) cannot be given to any tool; rename it with the shell.]",
        );
    }
    ToolOutput::text(text)
        .with_meta(json!({ "total": total, "shown": shown, "truncated": total > limit, "full_output": full_output }))
}

/// Saves every path of a capped list, newest first, to a spool file (G9), as grep saves its
/// full result: the answer shows only the newest, and files of one age (a fresh checkout) could
/// otherwise be reached only by narrowing the pattern.
fn save_list(ws: &Workspace, config: &SearchConfig, found: &[Found]) -> Result<PathBuf, String> {
    let Some(dir) = config.spool_dir.clone() else { return Err("saving is switched off".into()) };
    let mut preview = kodik_core::preview::OutputPreview::new(kodik_core::preview::PreviewConfig {
        head_bytes: 0,
        tail_bytes: 0,
        spool_dir: Some(dir),
    });
    let mut chunk = Vec::with_capacity(64 * 1024);
    for f in found {
        let name = shown_bytes(ws, &f.path);
        if needs_quoting(name) {
            let mut s = String::new();
            push_quoted(name, &mut s);
            chunk.extend_from_slice(s.as_bytes());
        } else {
            chunk.extend_from_slice(name);
        }
        chunk.push(b'\n');
        if chunk.len() >= 60 * 1024 {
            preview.push(&chunk);
            chunk.clear();
        }
    }
    preview.push(&chunk);
    let summary = preview.summary();
    match (summary.full_output, summary.spool_error) {
        (Some(path), _) => Ok(path),
        (None, Some(e)) => Err(e),
        (None, None) => Err("nothing was written".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)

    use super::*;
    use kodik_core::ToolRegistry;
    use proptest::prelude::*;

    /// The byte test chosen for `glob` and the glob's regex, for the same glob.
    fn both(glob: &str) -> (Test, regex_automata::meta::Regex) {
        let fast = Test::on_name(glob).unwrap_or_else(|| panic!("`{glob}` should take a byte test"));
        let parsed = GlobBuilder::new(glob).literal_separator(true).build().unwrap();
        (fast, glob_regex(&parsed, glob).unwrap())
    }

    #[test]
    fn gl1_gr5_extension_and_name_tests_agree_with_the_regex_on_tricky_names() {
        let names: &[&[u8]] = &[
            b"a.rs",
            b"a.rs.bak",
            b".rs",
            b"x.RS",
            b"rs",
            b"a.r",
            b"a..rs",
            b"foo.rs",
            b"a\n.rs",
            b"\xff\xfe.rs",
            b"Cargo.toml",
            b"cargo.toml",
            b"Cargo.toml.orig",
            b"xCargo.toml",
            b"a_test.go",
            b"_test.go",
            b"",
        ];
        for glob in ["*.rs", "*", "*_test.go", "*.tar.gz", "Cargo.toml", ".env", "a,b", "*!x", "*x^-"] {
            let (fast, regex) = both(glob);
            for name in names {
                assert_eq!(
                    fast.matches(name),
                    regex.is_match(*name),
                    "`{glob}` on {:?}",
                    String::from_utf8_lossy(name)
                );
            }
        }
        // Globs with anything else go to the regex.
        for glob in ["*.{rs,toml}", "*.r?", "*.[rR][sS]", "a*.rs", "*\\*", "**", "*.rs*", "src/*.rs"] {
            assert!(Test::on_name(glob).is_none(), "`{glob}`");
        }
    }

    proptest! {
        #[test]
        fn gl1_gr5_byte_tests_agree_with_the_regex_on_any_name(
            lit in "[a-c.,!^ -]{0,4}",
            star in any::<bool>(),
            name in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'.'), Just(b','), Just(0xffu8), Just(b'\n')], 0..7),
        ) {
            let glob = if star { format!("*{lit}") } else { lit.clone() };
            prop_assume!(!glob.is_empty());
            let (fast, regex) = both(&glob);
            prop_assert_eq!(fast.matches(&name), regex.is_match(&name[..]), "`{}`", glob);
        }
    }

    async fn listed(dir: &Path, pattern: &str) -> Vec<String> {
        let cx = ToolContext::new(Workspace::new(dir).unwrap());
        let mut reg = ToolRegistry::new();
        crate::SearchToolset::new().register(&mut reg);
        let out = reg.get("glob").unwrap().call(json!({ "pattern": pattern }), &cx).await;
        assert!(out.is_success(), "{}", out.text_content());
        let mut files: Vec<String> = out.text_content().lines().map(str::to_string).collect();
        files.sort();
        files
    }

    #[tokio::test]
    async fn gl1_gr5_extension_and_name_globs_list_what_their_regex_lists() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "src/a.rs",
            "b.rs",
            "a.rs.bak",
            "x.RS",
            "rs",
            ".rs",
            "foo.rs/inner.txt",
            "Cargo.toml",
            "sub/Cargo.toml",
            "Cargo.toml.orig",
            "xCargo.toml",
            "pkg/Cargo.toml/inner.txt",
        ] {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        // Folders named like a match (`foo.rs/`, `pkg/Cargo.toml/`) are not listed.
        // `.[r]s` and `Cargo.tom[l]` name the same files through the regex.
        for (fast, regex, want) in [
            ("**/*.rs", "**/*.[r]s", &["b.rs", "src/a.rs"][..]),
            ("*.rs", "*.[r]s", &["b.rs", "src/a.rs"][..]),
            ("Cargo.toml", "Cargo.tom[l]", &["Cargo.toml", "sub/Cargo.toml"][..]),
            ("**/Cargo.toml", "**/Cargo.tom[l]", &["Cargo.toml", "sub/Cargo.toml"][..]),
        ] {
            let got = listed(dir.path(), fast).await;
            assert_eq!(got, want, "`{fast}`");
            assert_eq!(listed(dir.path(), regex).await, got, "`{regex}` against `{fast}`");
        }
    }
}
