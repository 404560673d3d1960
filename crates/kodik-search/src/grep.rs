//! `grep` (GR1–GR5): regex search on ripgrep's engine (`grep::regex`, `grep::searcher`,
//! `ignore`'s walker and type table).
//!
//! - Results come in path order (roots in workspace order), paged with `head_limit`/`offset`.
//! - First a pre-pass works as ripgrep does: `ignore`'s parallel walker (which finds ignore
//!   files in each folder's listing rather than probing for them), each file searched by the
//!   thread that finds it. It holds up to 8 MiB of hits and lists the files that have any;
//!   the list is sorted into path order. A search with few hits ends there.
//! - Memory is bounded by the page, not by the result: files whose hits did not fit the
//!   pre-pass are searched again by a pool of threads in path order; each finished file's lines
//!   are handed on in that order, counted, and only the page's lines are kept (`Report`). A
//!   file that finishes before the ones ahead of it waits in a bounded buffer; a file with more
//!   hits than that buffer holds pauses its search until it is next in line, then streams. A
//!   tree with too many such files to list is walked in sorted order instead, the pool
//!   searching behind the walk.
//! - When the answer does not show everything, the full result streams to a spool file
//!   (kodik-core's [`OutputPreview`], G18–G20) whose path the answer gives.
//! - Every hit is reported as its line (`path:line:text`), so an empty match (`^$`) still has
//!   a path and a line number (GR4). A line longer than the display cap shows a window around
//!   each match with the match's column, so `read_file`'s `start_column` can continue there.
//! - `glob`/`exclude` are ripgrep's `--glob` rules (GR5), but unlike ripgrep's they never
//!   re-include what `.gitignore`, `.ignore` or `.kodikignore` hide (G16).
//! - A folder search reads files as UTF-8, UTF-16 with a BOM, or the project's
//!   `files.encoding`; a single file is decoded by kodik-core's detection first (GR3).
//! - Nothing outlives the call: matcher, searchers and buffers are dropped when it returns,
//!   fails or is cancelled (GR2).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use grep::matcher::{LineTerminator, Matcher};
use grep::regex::{RegexMatcher, RegexMatcherBuilder};
use grep::searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkFinish, SinkMatch};
use ignore::WalkState;
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::TypesBuilder;
use kodik_core::{
    CancellationToken, OutputPreview, PreviewConfig, PreviewSummary, Resource, Session, ToolContext, ToolError,
    ToolOutput, ToolSpec, TypedTool, Workspace,
};
use kodik_schema::search::{GrepArgs, OutputMode};
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::glob::{search_bases, show_path};
use crate::guard;
use crate::util::{CancelCheck, Unreadable, content_stamp as stamp, hash_of, names_hidden, run_blocking};

/// A file whose lines wait for the files ahead of it holds at most this much before its search
/// pauses until it is next in line (then it streams).
const FILE_BUFFER_BYTES: usize = 1 << 20;
/// Finished files waiting for the ones ahead of them hold at most about this much in all; past
/// it, workers start no new file except the one next in line.
const READY_BUDGET_BYTES: usize = 16 << 20;
/// Files handed to a worker at a time: one at a time, the queue's wake-ups cost more system
/// time than the search when most files are small; few, so the files in flight stay close in
/// path order.
const JOB_BATCH: usize = 32;
/// How often a waiting worker looks at the cancellation token.
const WAIT_TICK: Duration = Duration::from_millis(10);

/// The `grep` tool.
#[derive(Debug, Clone)]
pub struct GrepTool {
    spec: ToolSpec,
    config: Arc<SearchConfig>,
}

impl GrepTool {
    /// The tool with the given limits.
    pub fn new(config: SearchConfig) -> Self {
        Self { spec: kodik_schema::spec::<GrepArgs>(), config: Arc::new(config) }
    }
}

impl Default for GrepTool {
    fn default() -> Self {
        Self::new(SearchConfig::default())
    }
}

#[async_trait]
impl TypedTool for GrepTool {
    type Args = GrepArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn reads(&self, args: &GrepArgs, ws: &Workspace) -> Vec<Resource> {
        crate::glob::searched(ws, args.path.as_deref())
    }

    async fn run(&self, args: GrepArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = cx.workspace.clone();
        let session = cx.session.clone();
        let config = self.config.clone();
        let cancel = cx.cancel.clone();
        Ok(run_blocking(&cx.cancel, move || grep(&ws, &session, &config, &args, &cancel)).await?)
    }
}

#[derive(Debug, Clone, Copy)]
struct Opts {
    mode: OutputMode,
    max_line_chars: usize,
    /// Content mode with context lines: separate files' groups get a `--` line.
    context: bool,
    /// A match may span lines.
    multiline: bool,
}

/// One file's output so far: complete `\n`-terminated lines, so that putting files in order is
/// a copy and paging is counting newlines. In content mode a line is `12:text` (`12-text` for
/// context, `--` between groups) and the path is added only to the lines the answer shows; the
/// full result names each file once above its lines, as ripgrep's `--heading` does, which
/// makes it less than half the size. In the other modes a line is the answer's whole line.
#[derive(Debug, Default)]
struct Block {
    bytes: Vec<u8>,
    lines: u64,
}

/// What a searched file hands on when it is done.
#[derive(Debug)]
struct Done {
    /// The path as shown.
    shown: String,
    block: Block,
    /// Whether `block` starts the file's output (no part of it was streamed before).
    starts_file: bool,
    matches: u64,
    /// Path and `(mtime, len)` of a matched file, for the loop guard's fingerprint (G15).
    stamp: Option<(PathBuf, (u128, u64))>,
}

/// Formats one file's hits into a [`Block`].
struct FileSink<'a> {
    opts: Opts,
    matcher: &'a RegexMatcher,
    cancel: &'a CancellationToken,
    /// The path as shown.
    shown: String,
    block: Block,
    matches: u64,
    /// Streams the block when it grows past [`FILE_BUFFER_BYTES`]; `None` for a search that
    /// runs alone (a single file), which keeps everything.
    pipe: Option<(&'a Shared, usize)>,
    streamed: bool,
    /// The pre-pass's search: the output must fit [`FILE_BUFFER_BYTES`] or the search stops
    /// (`cut`), to be done again in order.
    held_only: bool,
    cut: bool,
}

impl<'a> FileSink<'a> {
    fn new(opts: Opts, matcher: &'a RegexMatcher, cancel: &'a CancellationToken, shown: String) -> Self {
        Self {
            opts,
            matcher,
            cancel,
            shown,
            block: Block::default(),
            matches: 0,
            pipe: None,
            streamed: false,
            held_only: false,
            cut: false,
        }
    }

    fn line(&mut self, number: u64, is_match: bool, bytes: &[u8]) {
        if self.block.bytes.capacity() == 0 {
            // Dense results grow blocks to hundreds of KB; start past the many small doublings.
            self.block.bytes.reserve(16 * 1024);
        }
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let sep = if is_match { b':' } else { b'-' };
        let out = &mut self.block.bytes;
        push_number(out, number);
        out.push(sep);
        let max = self.opts.max_line_chars;
        if bytes.len() <= max {
            // Fewer bytes than the limit means fewer characters too: no counting needed. Bytes
            // that are not UTF-8 are replaced when the page becomes text, as ripgrep's output
            // keeps them raw.
            out.extend_from_slice(bytes);
        } else {
            let text = String::from_utf8_lossy(bytes);
            push_long_line(out, &text, max, is_match.then_some(self.matcher));
        }
        out.push(b'\n');
        self.block.lines += 1;
    }

    /// Hands the block on early when it grew too big to wait (see [`Shared::stream`]).
    fn maybe_stream(&mut self) -> bool {
        match self.pipe {
            Some((shared, idx)) if self.block.bytes.len() >= FILE_BUFFER_BYTES => {
                let block = std::mem::take(&mut self.block);
                let starts_file = !self.streamed;
                self.streamed = true;
                shared.stream(idx, block, starts_file, &self.shown)
            }
            None if self.held_only && self.block.bytes.len() >= FILE_BUFFER_BYTES => {
                self.cut = true;
                false
            }
            _ => true,
        }
    }

    /// The file's remaining output (for `count` and `files_with_matches`, its one line).
    fn into_done(mut self, stamp: Option<(PathBuf, (u128, u64))>) -> Done {
        if self.matches > 0 {
            let out = &mut self.block.bytes;
            match self.opts.mode {
                OutputMode::Content => {}
                OutputMode::FilesWithMatches => {
                    out.extend_from_slice(self.shown.as_bytes());
                    out.push(b'\n');
                    self.block.lines += 1;
                }
                OutputMode::Count => {
                    out.extend_from_slice(self.shown.as_bytes());
                    let _ = writeln!(out, ":{}", self.matches);
                    self.block.lines += 1;
                }
            }
        }
        let stamp = if self.matches > 0 { stamp } else { None };
        Done { shown: self.shown, block: self.block, starts_file: !self.streamed, matches: self.matches, stamp }
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        // The token takes a lock; every 256 matches is still at once for a person.
        if self.matches.is_multiple_of(256) && self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.matches += 1;
        match self.opts.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                let first = m.line_number().unwrap_or(0);
                if self.opts.multiline {
                    for (n, line) in (first..).zip(m.lines()) {
                        self.line(n, true, line);
                    }
                } else {
                    // One line per match: no need to look for line ends again.
                    self.line(first, true, m.bytes());
                }
                Ok(self.maybe_stream())
            }
        }
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.line(c.line_number().unwrap_or(0), false, c.bytes());
        Ok((!self.block.lines.is_multiple_of(256) || !self.cancel.is_cancelled()) && self.maybe_stream())
    }

    fn finish(&mut self, _: &Searcher, finish: &SinkFinish) -> Result<(), Self::Error> {
        // As ripgrep (whose counts then match): a file found to be binary in a folder search
        // (a NUL byte, which also stops its search) has no hits, not even those before the NUL.
        // Only a file that already streamed part of its output (over 1 MiB of hits before the
        // NUL) keeps what it streamed.
        if finish.binary_byte_offset().is_some() && !self.streamed {
            self.block = Block::default();
            self.matches = 0;
        }
        Ok(())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.block.bytes.extend_from_slice(b"--\n");
        self.block.lines += 1;
        Ok(true)
    }
}

/// Appends `n` in decimal; `write!` costs more than the search itself when every line matches.
fn push_number(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Shows a line longer than `max` characters: for a matching line, a window around each match
/// (at most `max` characters in all) with `…` on both sides and the match's 1-based character
/// column, which `read_file`'s `start_column` takes; otherwise (or when no match lies on this
/// line of a multi-line match) its start.
fn push_long_line(out: &mut Vec<u8>, text: &str, max: usize, matcher: Option<&RegexMatcher>) {
    let total_chars = text.chars().count();
    if total_chars <= max {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    let mut found: Vec<usize> = Vec::new();
    let mut count = 0u64;
    // The windows share the line's budget; fewer than ~60 characters would hide the context.
    let max_windows = (max / 60).max(1);
    if let Some(m) = matcher {
        let _ = m.find_iter(text.as_bytes(), |mat| {
            count += 1;
            if found.len() < max_windows {
                found.push(mat.start());
            }
            true
        });
    }
    if found.is_empty() {
        let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
        let _ = write!(out, "{} […{} more characters]", &text[..cut], total_chars - max);
        return;
    }
    let plural = if count == 1 { "" } else { "es" };
    let _ = write!(out, "[line of {total_chars} characters, {count} match{plural} on it]");
    let width = (max / found.len()).max(1);
    // Columns are counted on from the previous match, so the line is walked once.
    let (mut at_byte, mut at_col) = (0usize, 1usize);
    let mut shown_until = 0usize;
    for start in found {
        if start < shown_until {
            continue; // Already inside the previous window.
        }
        at_col += text[at_byte..start].chars().count();
        at_byte = start;
        // A little before the match, most after it: code reads forward.
        let lead = (width / 4).min(at_col - 1);
        let from = match lead {
            0 => start,
            n => text[..start].char_indices().rev().nth(n - 1).map_or(start, |(i, _)| i),
        };
        let until = text[from..].char_indices().nth(width).map_or(text.len(), |(i, _)| from + i);
        let _ = write!(out, " match at column {at_col}: ");
        if from > 0 {
            out.extend_from_slice("…".as_bytes());
        }
        out.extend_from_slice(&text.as_bytes()[from..until]);
        if until < text.len() {
            out.extend_from_slice("…".as_bytes());
        }
        shown_until = until;
    }
}

fn build_matcher(args: &GrepArgs) -> Result<RegexMatcher, SearchError> {
    let multiline = args.multiline.unwrap_or(false);
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(args.case_insensitive.unwrap_or(false))
        .case_smart(args.smart_case.unwrap_or(false))
        .fixed_strings(args.fixed_strings.unwrap_or(false))
        .word(args.word.unwrap_or(false))
        .multi_line(true)
        .dot_matches_new_line(multiline)
        // `$` also matches before `\r\n`, so `^$` finds empty lines in CRLF files too. This also
        // makes `\r\n` the line terminator, which the searcher is told as well.
        .crlf(true);
    if multiline {
        // A multi-line pattern may match line terminators (`a\nb`).
        b.line_terminator(None);
    }
    b.build(&args.pattern).map_err(|e| regex_error(args, e.to_string()))
}

/// A bad pattern's error as the model should see it: the parser's message with a caret under
/// the user's own pattern (grep-regex reports it inside its internal wrapping), the position,
/// and a hint for the usual slip.
fn regex_error(args: &GrepArgs, engine_message: String) -> SearchError {
    let pattern = &args.pattern;
    let message = match regex_syntax::ast::parse::Parser::new().parse(pattern) {
        Err(e) => {
            let at = pattern[..e.span().start.offset.min(pattern.len())].chars().count() + 1;
            format!("{e}\n(at character {at} of the pattern)")
        }
        Ok(_) if pattern.contains("\\n") || pattern.contains('\n') => {
            format!("{engine_message}\nTo match across lines, set `multiline: true`.")
        }
        Ok(_) => engine_message,
    };
    SearchError::BadRegex { pattern: pattern.clone(), message }
}

fn build_searcher(args: &GrepArgs, mode: OutputMode, ws: &Workspace, walk: bool) -> Result<Searcher, SearchError> {
    let mut b = searcher_builder(args, mode);
    if walk {
        // As ripgrep: a NUL byte marks a binary file, which a folder search skips.
        b.binary_detection(BinaryDetection::quit(b'\x00')).bom_sniffing(true);
        if let Some(enc) = ws.settings().encoding() {
            let enc = grep::searcher::Encoding::new(enc.name())
                .map_err(|e| SearchError::Internal(format!("files.encoding `{}`: {e}", enc.name())))?;
            b.encoding(Some(enc));
        }
    }
    Ok(b.build())
}

/// `glob` without a leading `./` (after a `!`), which means the searched folder itself, as the
/// glob tool reads it; ripgrep's overrides would match it against no path at all.
fn without_dot_slash(glob: &str) -> String {
    let (bang, rest) = glob.strip_prefix('!').map_or(("", glob), |r| ("!", r));
    let mut rest = rest;
    while let Some(r) = rest.strip_prefix("./") {
        rest = r;
    }
    // `./x` meant "x in this folder" only: keep it anchored.
    let anchor = if rest.len() < glob.len() - bang.len() && !rest.contains('/') { "/" } else { "" };
    format!("{bang}{anchor}{rest}")
}

fn overrides(args: &GrepArgs, base: &Path) -> Result<Option<Override>, SearchError> {
    let include = args.glob.as_ref().map(|g| g.to_vec()).unwrap_or_default();
    let exclude = args.exclude.as_ref().map(|g| g.to_vec()).unwrap_or_default();
    if include.is_empty() && exclude.is_empty() {
        return Ok(None);
    }
    let mut b = OverrideBuilder::new(base);
    let bad = |glob: &str, e: ignore::Error| SearchError::BadGlob { glob: glob.to_string(), reason: e.to_string() };
    for g in include.iter().filter(|g| !g.trim().is_empty()) {
        b.add(&without_dot_slash(g.trim())).map_err(|e| bad(g, e))?;
    }
    for g in exclude.iter().filter(|g| !g.trim().is_empty()) {
        let g = &without_dot_slash(g.trim());
        let negated = match g.strip_prefix('!') {
            // `!x` in `exclude` would mean "include"; take it as the plain pattern, which is what was meant.
            Some(rest) => format!("!{rest}"),
            None => format!("!{g}"),
        };
        b.add(&negated).map_err(|e| bad(g, e))?;
    }
    let ov = b.build().map_err(|e| bad(&include.join(","), e))?;
    Ok(Some(ov))
}

/// Language names models reach for that ripgrep's table spells otherwise.
const TYPE_ALIASES: &[(&str, &str)] = &[
    ("javascript", "js"),
    ("python", "py"),
    ("golang", "go"),
    ("bash", "sh"),
    ("shell", "sh"),
    ("c++", "cpp"),
    ("makefile", "make"),
    ("dockerfile", "docker"),
];

fn types(name: &str) -> Result<ignore::types::Types, SearchError> {
    let mut b = TypesBuilder::new();
    b.add_defaults();
    let defs = b.definitions();
    for n in name.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let lower = n.to_lowercase();
        if defs.iter().any(|d| d.name() == n) {
            b.select(n);
        } else if defs.iter().any(|d| d.name() == lower) {
            // `Rust`, `JS`: the type, not (as an extension) only `*.js`.
            b.select(&lower);
        } else if let Some((_, to)) = TYPE_ALIASES.iter().find(|(from, _)| *from == lower) {
            b.select(to);
        } else {
            // A file extension (`rs`, `.yml`, `*.kt`) the table knows: exactly the files with it.
            let ext = lower.trim_start_matches("*.").trim_start_matches('.');
            let glob = format!("*.{ext}");
            if !ext.is_empty()
                && ext.chars().all(char::is_alphanumeric)
                && defs.iter().any(|d| d.globs().contains(&glob))
            {
                // Type names are alphanumeric only.
                let custom = format!("kodikextension{ext}");
                b.add(&custom, &glob)
                    .map_err(|e| SearchError::UnknownType { name: n.to_string(), hint: e.to_string() })?;
                b.select(&custom);
            } else {
                b.select(n);
            }
        }
    }
    b.build().map_err(|e| match e {
        ignore::Error::UnrecognizedFileType(bad) => {
            let lower = bad.to_lowercase();
            let head: String = lower.chars().take(2).collect();
            // A one- or two-letter type inside a longer word (`c`, `r`, `v` in `javascript`)
            // is a coincidence, not a hint.
            let close: Vec<String> = defs
                .iter()
                .map(|d| d.name().to_string())
                .filter(|n| n.contains(&lower) || (n.len() >= 3 && lower.contains(n.as_str())) || n.starts_with(&head))
                .take(12)
                .collect();
            let mut hint = if close.is_empty() {
                "examples: rust, py, js, ts, go, java, c, cpp, md, json, yaml, toml, html, css, sh, or a file extension such as rs".to_string()
            } else {
                format!("did you mean one of: {}?", close.join(", "))
            };
            // An extension the table does not know (`astro`, `prisma`) is still a glob away.
            let ext = lower.trim_start_matches("*.").trim_start_matches('.');
            if !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric()) {
                hint.push_str(&format!(" For files ending in `.{ext}`, use `glob: \"*.{ext}\"` instead of `type`."));
            }
            SearchError::UnknownType { name: bad, hint }
        }
        other => SearchError::UnknownType { name: name.to_string(), hint: other.to_string() },
    })
}

/// Whether the pattern looks for non-ASCII text in particular: a non-ASCII character written
/// out or as an escape (`\xe9`, `\x{41F}`), or a class of only non-ASCII letters
/// (`\p{Cyrillic}`, `[а-я]`). A class that takes ASCII letters too (`\w`, `.`, `\p{L}`) finds
/// ASCII text whatever the encoding, so it says nothing of one.
fn seeks_non_ascii(args: &GrepArgs) -> bool {
    use regex_syntax::hir::{Class, Hir, HirKind};
    fn walk(h: &Hir) -> bool {
        match h.kind() {
            HirKind::Literal(l) => !l.0.is_ascii(),
            HirKind::Class(Class::Unicode(c)) => {
                let has = |ch: char| c.ranges().iter().any(|r| r.start() <= ch && ch <= r.end());
                c.ranges().iter().any(|r| !r.end().is_ascii())
                    && !(('a'..='z').chain('A'..='Z').chain('0'..='9')).any(has)
            }
            HirKind::Repetition(r) => walk(&r.sub),
            HirKind::Capture(c) => walk(&c.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(walk),
            _ => false,
        }
    }
    if !args.pattern.is_ascii() {
        return true;
    }
    if args.fixed_strings.unwrap_or(false) {
        return false;
    }
    regex_syntax::ParserBuilder::new().build().parse(&args.pattern).is_ok_and(|h| walk(&h))
}

/// Bytes handed to the spool writer at a time.
const SPOOL_CHUNK_BYTES: usize = 256 << 10;
/// Chunks queued for the spool writer; a full queue makes the search wait for the disk (G19).
const SPOOL_QUEUE: usize = 8;

/// The full result's writer. A thread owns the file (kodik-core's [`OutputPreview`] with no
/// head or tail kept: its spool writer, with its pruning and its G18 handling of an unwritable
/// folder), fed through a bounded queue, so the disk write overlaps the search while memory
/// stays a few chunks.
enum Spool {
    Thread {
        pending: Vec<u8>,
        tx: SyncSender<Vec<u8>>,
        writer: JoinHandle<PreviewSummary>,
    },
    /// No thread could be started: the caller writes.
    Inline(OutputPreview),
}

/// The spool and the file whose lines it is writing (content mode's headings).
struct SpoolOut {
    writer: Spool,
    heading: Option<String>,
}

impl SpoolOut {
    fn start(dir: Option<PathBuf>) -> Self {
        Self { writer: Spool::start(dir), heading: None }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.writer.push(bytes);
    }

    fn finish(self) -> PreviewSummary {
        self.writer.finish()
    }
}

impl Spool {
    fn start(dir: Option<PathBuf>) -> Self {
        // A preview creates its file only when the first bytes arrive.
        let cfg = PreviewConfig { head_bytes: 0, tail_bytes: 0, spool_dir: dir };
        let (tx, rx) = sync_channel::<Vec<u8>>(SPOOL_QUEUE);
        let thread_cfg = cfg.clone();
        let spawned = std::thread::Builder::new().name("grep-spool".into()).spawn(move || {
            let mut preview = OutputPreview::new(thread_cfg);
            for chunk in rx {
                preview.push(&chunk);
            }
            preview.summary()
        });
        match spawned {
            Ok(writer) => Self::Thread { pending: Vec::with_capacity(SPOOL_CHUNK_BYTES), tx, writer },
            Err(_) => Self::Inline(OutputPreview::new(cfg)),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        match self {
            Self::Thread { pending, tx, .. } => {
                pending.extend_from_slice(bytes);
                if pending.len() >= SPOOL_CHUNK_BYTES {
                    let chunk = std::mem::replace(pending, Vec::with_capacity(SPOOL_CHUNK_BYTES));
                    // The writer only stops when this sender is dropped, so a send cannot fail
                    // while it runs; if it panicked, `finish` reports that.
                    let _ = tx.send(chunk);
                }
            }
            Self::Inline(preview) => preview.push(bytes),
        }
    }

    fn finish(self) -> PreviewSummary {
        match self {
            Self::Thread { pending, tx, writer } => {
                if !pending.is_empty() {
                    let _ = tx.send(pending);
                }
                drop(tx);
                writer.join().unwrap_or_else(|_| PreviewSummary {
                    text: String::new(),
                    truncated: true,
                    total_bytes: 0,
                    total_lines: 0,
                    full_output: None,
                    spool_error: Some("the thread writing the full result failed".into()),
                })
            }
            Self::Inline(mut preview) => preview.summary(),
        }
    }
}

/// Lines of one file on the page.
#[derive(Debug)]
struct PageFile {
    shown: String,
    lines: Vec<u8>,
    /// The `--` the answer shows between two files' groups; not part of the saved result.
    is_break: bool,
}

/// Takes files' output in path order: counts every entry and match, keeps only the page's
/// lines (and at most `max_bytes` of them), and streams the full result to a spool file once
/// the answer cannot show it all.
struct Report {
    opts: Opts,
    offset: u64,
    /// One past the last entry of the page (`offset + head_limit`).
    end: u64,
    max_bytes: usize,
    entries: u64,
    files: u64,
    matches: u64,
    page: Vec<PageFile>,
    /// Bytes of the page as the answer shows it.
    page_bytes: usize,
    /// The first entry at or after `offset` that the page does not show.
    next: Option<u64>,
    spool_dir: Option<PathBuf>,
    spool: Option<SpoolOut>,
    /// Whether the spool holds a file's lines yet (files after the first get a blank line first).
    spool_started_files: bool,
    fingerprint: DefaultHasher,
}

impl Report {
    fn new(opts: Opts, offset: usize, limit: usize, max_bytes: usize, spool_dir: Option<PathBuf>) -> Self {
        let offset = offset as u64;
        Self {
            opts,
            offset,
            end: offset.saturating_add(limit as u64),
            max_bytes,
            entries: 0,
            files: 0,
            matches: 0,
            page: Vec::new(),
            page_bytes: 0,
            next: None,
            spool_dir,
            spool: None,
            spool_started_files: false,
            fingerprint: DefaultHasher::new(),
        }
    }

    /// Content lines carry no path: the answer puts it in front of each, `path:12:text`.
    fn prefixed(&self) -> bool {
        matches!(self.opts.mode, OutputMode::Content)
    }

    /// The next part of one file's output.
    fn take(&mut self, block: &Block, starts_file: bool, shown: &str) {
        if block.lines == 0 {
            return;
        }
        if self.opts.context && starts_file && self.entries > 0 {
            // An entry of the answer; the full result separates files by their headings.
            self.lines(b"--\n", 1, shown, false);
        }
        self.lines(&block.bytes, block.lines, shown, starts_file);
    }

    fn lines(&mut self, bytes: &[u8], count: u64, shown: &str, starts_file: bool) {
        let first = self.entries;
        self.entries += count;
        let is_break = count == 1 && bytes == b"--\n" && !starts_file;
        if self.spool.is_none() && self.offset > 0 {
            // The entries before the page are part of the full result too.
            self.spool = Some(SpoolOut::start(self.spool_dir.clone()));
        }
        let mut spool_from = 0;
        if self.next.is_none() && self.entries > self.offset {
            let prefix = if self.prefixed() && !is_break { shown.len() + 1 } else { 0 };
            let (mut idx, mut pos) = (first, 0);
            for nl in memchr::memchr_iter(b'\n', bytes) {
                if idx >= self.offset {
                    let line = &bytes[pos..=nl];
                    let cost = prefix + line.len();
                    if idx >= self.end || (self.page_bytes > 0 && self.page_bytes + cost > self.max_bytes) {
                        self.next = Some(idx);
                        break;
                    }
                    self.page_bytes += cost;
                    match self.page.last_mut() {
                        Some(f) if f.shown == shown && !is_break && !f.is_break => f.lines.extend_from_slice(line),
                        _ => self.page.push(PageFile { shown: shown.to_string(), lines: line.to_vec(), is_break }),
                    }
                }
                idx += 1;
                pos = nl + 1;
            }
            if self.next.is_some() && self.spool.is_none() {
                // From here on the answer is partial: the full result starts with what the page holds.
                self.spool = Some(SpoolOut::start(self.spool_dir.clone()));
                for f in std::mem::take(&mut self.page) {
                    self.spool_lines(&f.lines, &f.shown, f.is_break);
                    self.page.push(f);
                }
                spool_from = pos;
            }
        }
        if self.spool.is_some() && spool_from < bytes.len() {
            self.spool_lines(&bytes[spool_from..], shown, is_break);
        }
    }

    /// Appends to the full result; in content mode each file's lines come under its path.
    fn spool_lines(&mut self, bytes: &[u8], shown: &str, is_break: bool) {
        let prefixed = self.prefixed();
        let Some(spool) = &mut self.spool else { return };
        if !prefixed {
            spool.push(bytes);
            return;
        }
        if is_break {
            return;
        }
        if spool.heading.as_deref() != Some(shown) {
            if self.spool_started_files {
                spool.push(b"\n");
            }
            self.spool_started_files = true;
            spool.push(shown.as_bytes());
            spool.push(b"\n");
            spool.heading = Some(shown.to_string());
        }
        spool.push(bytes);
    }

    /// A file is complete.
    fn file_done(&mut self, done: &Done) {
        self.take(&done.block, done.starts_file, &done.shown);
        if done.matches > 0 {
            self.files += 1;
            self.matches += done.matches;
            // G15: what a repeat must notice is a matched file that changed (its mtime or size),
            // a newly matching file, or one that no longer matches; the lines follow from those.
            done.stamp.hash(&mut self.fingerprint);
            done.matches.hash(&mut self.fingerprint);
        }
    }

    /// The page as the answer shows it.
    fn page_text(&self) -> String {
        let mut out = Vec::with_capacity(self.page_bytes);
        for f in &self.page {
            if !self.prefixed() || f.is_break {
                out.extend_from_slice(&f.lines);
                continue;
            }
            let mut pos = 0;
            for nl in memchr::memchr_iter(b'\n', &f.lines) {
                let line = &f.lines[pos..=nl];
                if line != b"--\n" {
                    // `12:text` becomes `path:12:text`, `12-text` becomes `path-12-text`.
                    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
                    out.extend_from_slice(f.shown.as_bytes());
                    out.push(line.get(digits).copied().unwrap_or(b':'));
                }
                out.extend_from_slice(line);
                pos = nl + 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Deletes the spool file of an answer that will not be given (cancelled, or an unchanged repeat).
    fn discard(&mut self) {
        if let Some(s) = self.spool.take()
            && let Some(path) = s.finish().full_output
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The walk's files in path order, shared by the workers that search them.
struct Shared {
    state: Mutex<State>,
    turn: Condvar,
    cancel: CancellationToken,
}

struct State {
    /// The next file (by walk index) whose output the report takes.
    front: usize,
    /// Finished files behind the front, and the bytes they hold.
    ready: BTreeMap<usize, Done>,
    ready_bytes: usize,
    /// Workers waiting for the front to move: without any, a wake-up is a wasted system call.
    waiters: usize,
    report: Report,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits (watching for cancellation) until `ready(state)`; `None` when cancelled.
    fn wait_until(&self, mut ready: impl FnMut(&State) -> bool) -> Option<MutexGuard<'_, State>> {
        let mut st = self.lock();
        while !ready(&st) {
            if self.cancel.is_cancelled() {
                return None;
            }
            st.waiters += 1;
            st = self.turn.wait_timeout(st, WAIT_TICK).unwrap_or_else(|p| p.into_inner()).0;
            st.waiters -= 1;
        }
        Some(st)
    }

    /// Before searching file `idx`: with too much finished output waiting, only the front may start.
    fn may_start(&self, idx: usize) -> bool {
        self.wait_until(|st| st.front == idx || st.ready_bytes < READY_BUDGET_BYTES).is_some()
    }

    /// Part of file `idx`'s output, too big to wait: pauses the search until the file is at the
    /// front, then hands it to the report. `false` when cancelled.
    fn stream(&self, idx: usize, block: Block, starts_file: bool, shown: &str) -> bool {
        match self.wait_until(|st| st.front == idx) {
            Some(mut st) => {
                st.report.take(&block, starts_file, shown);
                true
            }
            None => false,
        }
    }

    /// File `idx` is done: the report takes it and every finished file after it, in order.
    fn done(&self, idx: usize, done: Done) {
        let mut st = self.lock();
        if st.front != idx {
            st.ready_bytes += done.block.bytes.capacity();
            st.ready.insert(idx, done);
            return;
        }
        st.report.file_done(&done);
        drop(done);
        st.front += 1;
        loop {
            let front = st.front;
            let Some(next) = st.ready.remove(&front) else { break };
            st.ready_bytes -= next.block.bytes.capacity();
            st.report.file_done(&next);
            st.front += 1;
        }
        let wake = st.waiters > 0;
        drop(st);
        if wake {
            self.turn.notify_all();
        }
    }
}

/// A file to search, numbered in path order.
struct Job {
    idx: usize,
    path: PathBuf,
}

/// Hands jobs to the worker pool in batches.
struct Feed {
    tx: SyncSender<Vec<Job>>,
    batch: Vec<Job>,
}

impl Feed {
    /// Queues a job; `false` once the workers are gone.
    fn push(&mut self, job: Job) -> bool {
        self.batch.push(job);
        self.batch.len() < JOB_BATCH
            || self.tx.send(std::mem::replace(&mut self.batch, Vec::with_capacity(JOB_BATCH))).is_ok()
    }
}

fn worker_count(config: &SearchConfig) -> usize {
    match config.threads {
        // ripgrep's default.
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()).min(12),
        n => n,
    }
}

/// Walk builders for the folders, with the call's filters (hidden files, types, `glob`/`exclude`).
fn walk_builders(
    ws: &Workspace,
    args: &GrepArgs,
    bases: &[(PathBuf, std::fs::Metadata)],
    unreadable: &Unreadable,
) -> Result<Vec<ignore::WalkBuilder>, SearchError> {
    let include_hidden = args.glob.as_ref().is_some_and(|g| g.to_vec().iter().any(|p| names_hidden(p)));
    let file_types = args.file_type.as_deref().map(types).transpose()?;
    let mut builders = Vec::with_capacity(bases.len());
    for (base, _) in bases {
        let ov = overrides(args, base)?;
        let enters = unreadable.clone();
        let mut wb = ws.walker_with(base, move |e| {
            if !enters.enters(e) {
                return false;
            }
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            if include_hidden && is_dir && e.file_name() == ".git" {
                return false;
            }
            ov.as_ref().is_none_or(|ov| !ov.matched(e.path(), is_dir).is_ignore())
        });
        wb.hidden(!include_hidden);
        if let Some(t) = &file_types {
            wb.types(t.clone());
        }
        builders.push(wb);
    }
    Ok(builders)
}

/// Files with hits (or left for later) the parallel pre-pass lists before it gives up on
/// holding the list (about 100 bytes each); such a search walks again, in sorted order.
const PREPASS_MAX_FILES: usize = 300_000;
/// Hits the pre-pass holds in all; past it, files are only listed and searched afterwards.
const PREPASS_BUDGET_BYTES: usize = 8 << 20;

/// What the pre-pass knows of one file with hits. (Files without hits are only counted: they
/// take no place in the answer's order.)
enum Pre {
    /// Searched, with its whole output.
    Hits(Done),
    /// Not searched yet: the pre-pass's budget was spent, or the file's output outgrew it.
    Later,
}

/// A pre-pass thread's files, handed to the shared list when the walker drops its visitor.
struct PreLocal<'a> {
    files: Vec<(PathBuf, Pre)>,
    into: &'a Mutex<Vec<(PathBuf, Pre)>>,
}

impl Drop for PreLocal<'_> {
    fn drop(&mut self) {
        self.into.lock().unwrap_or_else(|p| p.into_inner()).append(&mut self.files);
    }
}

enum Prepass {
    /// Each base's files with hits, in path order, and the number of files searched.
    Listed(Vec<Vec<(PathBuf, Pre)>>, u64),
    TooMany,
    Cancelled,
}

/// Walks and searches as ripgrep does — `ignore`'s parallel walker, which reads ignore files
/// off each folder's listing instead of probing for them, each file searched by the thread
/// that finds it — holding the hits (up to [`PREPASS_BUDGET_BYTES`]) and listing the files that
/// have any (or might: those left for later); then sorts that list. A search with few hits is done here; with many, the files not searched
/// yet go through the ordered pool afterwards.
#[allow(clippy::too_many_arguments)] // One call site; a struct would only rename the list.
fn prepass(
    ws: &Workspace,
    builders: &[ignore::WalkBuilder],
    threads: usize,
    matcher: &RegexMatcher,
    searcher: &Searcher,
    opts: Opts,
    cancel: &CancellationToken,
    max_files: usize,
    unreadable: &Unreadable,
) -> Prepass {
    let held = AtomicUsize::new(0);
    let (files, listed) = (AtomicU64::new(0), AtomicUsize::new(0));
    let too_many = AtomicBool::new(false);
    let mut lists = Vec::with_capacity(builders.len());
    for builder in builders {
        let collected = Mutex::new(Vec::new());
        let mut builder = builder.clone();
        builder.threads(threads).build_parallel().run(|| {
            let mut local = PreLocal { files: Vec::new(), into: &collected };
            let (matcher, mut searcher) = (matcher.clone(), searcher.clone());
            let (held, files, listed, too_many) = (&held, &files, &listed, &too_many);
            let mut cancelled = CancelCheck::new(cancel.clone());
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
                files.fetch_add(1, Ordering::Relaxed);
                let pre = if held.load(Ordering::Relaxed) >= PREPASS_BUDGET_BYTES {
                    Pre::Later
                } else {
                    match search_held(ws, entry.path(), &matcher, &mut searcher, opts, cancel, held, unreadable) {
                        // A file left for later is asked when its turn comes (`run_pool`).
                        Some(pre) => pre,
                        None => return WalkState::Continue,
                    }
                };
                if listed.fetch_add(1, Ordering::Relaxed) >= max_files {
                    too_many.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                local.files.push((entry.into_path(), pre));
                WalkState::Continue
            })
        });
        if cancel.is_cancelled() {
            return Prepass::Cancelled;
        }
        if too_many.load(Ordering::Relaxed) {
            return Prepass::TooMany;
        }
        let mut list = collected.into_inner().unwrap_or_else(|p| p.into_inner());
        list.sort_unstable_by(|a, b| path_order(&a.0, &b.0));
        lists.push(list);
    }
    Prepass::Listed(lists, files.load(Ordering::Relaxed))
}

/// `Path`'s order (component by component, the sorted depth-first walk's order) by comparing
/// bytes with `/` below every other byte, which is the same for the walker's normal paths and
/// several times cheaper than iterating components.
pub(crate) fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (a, b) = (a.as_os_str().as_encoded_bytes(), b.as_os_str().as_encoded_bytes());
    let key = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    // Paths of one walk share long prefixes: skip them a word at a time.
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    match a[i..n].iter().zip(&b[i..n]).find(|(x, y)| x != y) {
        Some((x, y)) => key(*x).cmp(&key(*y)),
        None => a.len().cmp(&b.len()),
    }
}

/// Searches one file in the pre-pass, keeping its output if it fits the budget; `None` when
/// it has no hits (or cannot be read: then it is noted in `unreadable`).
#[allow(clippy::too_many_arguments)] // One call site; a struct would only rename the list.
fn search_held(
    ws: &Workspace,
    path: &Path,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    opts: Opts,
    cancel: &CancellationToken,
    held: &AtomicUsize,
    unreadable: &Unreadable,
) -> Option<Pre> {
    // The path is shown only for a file with hits: most files have none.
    let mut sink = FileSink::new(opts, matcher, cancel, String::new());
    sink.held_only = true;
    let file = std::fs::File::open(path);
    let ok = match &file {
        Ok(f) => searcher.search_file(matcher, f, &mut sink).map_err(|e| unreadable.file(path, &e)).is_ok(),
        Err(e) => {
            unreadable.file(path, e);
            false
        }
    };
    if sink.cut {
        return Some(Pre::Later);
    }
    if !ok || sink.matches == 0 {
        return None;
    }
    sink.shown = show_path(ws, path);
    let stamp = file.ok().map(|f| (path.to_path_buf(), stamp(f.metadata().ok().as_ref())));
    let mut done = sink.into_done(stamp);
    done.block.bytes.shrink_to_fit();
    let size = done.block.bytes.capacity() + done.shown.len() + std::mem::size_of::<Done>();
    if held.fetch_add(size, Ordering::Relaxed) + size > PREPASS_BUDGET_BYTES {
        // The count stays past the budget, so the files after this one are only listed: giving
        // the bytes back would let every later file be searched here just to be dropped and
        // searched again in order (many-hits searches read most files twice that way).
        return Some(Pre::Later);
    }
    Some(Pre::Hits(done))
}

fn grep(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &GrepArgs,
    cancel: &CancellationToken,
) -> Result<ToolOutput, SearchError> {
    grep_listing(ws, session, config, args, cancel, PREPASS_MAX_FILES)
}

/// [`grep`] with the pre-pass's file limit given (tests take every path with a small one).
fn grep_listing(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &GrepArgs,
    cancel: &CancellationToken,
    max_listed: usize,
) -> Result<ToolOutput, SearchError> {
    if args.max_count == Some(0) {
        return Err(SearchError::MaxCountZero);
    }
    let own_glob = match &args.glob {
        Some(kodik_schema::search::Patterns::One(g)) => Some(g.as_str()),
        _ => None,
    };
    let bases = search_bases(ws, args.path.as_deref(), "glob", own_glob)?;
    let matcher = build_matcher(args)?;
    let mode = args.output_mode.unwrap_or_default();
    let context = matches!(mode, OutputMode::Content)
        && args.context_before.or(args.context_after).or(args.context).unwrap_or(0) > 0;
    let multiline = args.multiline.unwrap_or(false);
    let opts = Opts { mode, max_line_chars: config.grep_max_line_chars.max(20), context, multiline };
    let offset = args.offset.unwrap_or(0);
    let limit = match args.head_limit.unwrap_or(config.grep_head_limit) {
        0 => usize::MAX,
        n => n,
    };
    let report = Report::new(opts, offset, limit, config.grep_max_output_bytes.max(1), config.spool_dir.clone());
    let searched = AtomicU64::new(0);
    let unreadable = Unreadable::new();

    let mut report = match bases.as_slice() {
        [(base, meta)] if meta.is_file() => {
            searched.fetch_add(1, Ordering::Relaxed);
            let done = search_one_file(ws, args, base, &matcher, opts, cancel)?;
            let mut report = report;
            report.file_done(&done);
            report
        }
        _ => {
            if let Some((base, _)) = bases.iter().find(|(_, m)| !m.is_dir()) {
                return Err(SearchError::NotSearchable(ws.display(base)));
            }
            search_folders(
                ws,
                config,
                args,
                &bases,
                &matcher,
                opts,
                report,
                cancel,
                &searched,
                max_listed,
                &unreadable,
            )?
        }
    };
    if cancel.is_cancelled() {
        report.discard();
        return Err(SearchError::Cancelled);
    }

    let where_ = bases.iter().map(|(b, _)| b.display().to_string()).collect::<Vec<_>>().join("\0");
    let key = format!("grep\0{where_}\0{args:?}");
    let what = format!("{} matches in {} files, none of them changed", report.matches, report.files);
    if let Some(out) = guard::check(session, &key, report.fingerprint.finish(), &what) {
        report.discard();
        return Ok(out);
    }
    let shown_bases: Vec<String> = bases.iter().map(|(b, _)| show_path(ws, b)).collect();
    let searched = searched.load(Ordering::Relaxed).saturating_sub(unreadable.files());
    let page_free = GrepArgs { offset: None, head_limit: None, ..args.clone() };
    let saved = SavedKey { search: hash_of(&format!("{where_}\0{page_free:?}")), files: report.fingerprint.finish() };
    let folders = !matches!(bases.as_slice(), [(_, meta)] if meta.is_file());
    let nothing = report.files == 0;
    let mut out = format_result(args, &shown_bases, report, searched, saved);
    if nothing && folders && seeks_non_ascii(args) && ws.settings().encoding().is_none() {
        // GR3: a folder search reads UTF-8 (and UTF-16 with a BOM); text in a legacy code page
        // is found only in a file searched by its path, which detects the encoding.
        out = with_note(
            out,
            "[A folder search reads files as UTF-8 (or UTF-16 with a BOM): non-ASCII text in a file stored in \
             another encoding (e.g. Windows-1251) is not found here. Search such a file by its `path` to have its \
             encoding detected.]",
        );
    }
    Ok(with_unreadable(out, ws, &unreadable, false))
}

/// Searches the folders: the parallel pre-pass first; then, in path order on a pool of workers,
/// whatever it left for later. A tree too large to list is walked in sorted order instead,
/// with the pool searching behind the walk.
#[allow(clippy::too_many_arguments)] // One call site; a struct would only rename the list.
fn search_folders(
    ws: &Workspace,
    config: &SearchConfig,
    args: &GrepArgs,
    bases: &[(PathBuf, std::fs::Metadata)],
    matcher: &RegexMatcher,
    opts: Opts,
    mut report: Report,
    cancel: &CancellationToken,
    searched: &AtomicU64,
    max_listed: usize,
    unreadable: &Unreadable,
) -> Result<Report, SearchError> {
    let searcher = build_searcher(args, opts.mode, ws, true)?;
    let builders = walk_builders(ws, args, bases, unreadable)?;
    let lists = match prepass(ws, &builders, config.threads, matcher, &searcher, opts, cancel, max_listed, unreadable) {
        Prepass::Cancelled => return Ok(report),
        Prepass::Listed(lists, files) => {
            searched.store(files, Ordering::Relaxed);
            lists
        }
        Prepass::TooMany => {
            let walkers: Vec<_> = builders
                .into_iter()
                .map(|mut wb| {
                    // Sorting each folder's entries by name makes the depth-first walk produce
                    // paths in `Path` order (component by component), the answer's order.
                    wb.sort_by_file_name(|a, b| a.cmp(b));
                    wb.build()
                })
                .collect();
            return Ok(run_pool(ws, config, matcher, &searcher, opts, report, cancel, unreadable, |feed, _| {
                let mut idx = 0;
                for walk in walkers {
                    for entry in walk {
                        if cancel.is_cancelled() {
                            return;
                        }
                        let entry = match entry {
                            Ok(entry) => entry,
                            Err(e) => {
                                unreadable.walk_error(&e);
                                continue;
                            }
                        };
                        if !entry.file_type().is_some_and(|t| t.is_file()) {
                            continue;
                        }
                        searched.fetch_add(1, Ordering::Relaxed);
                        if !feed.push(Job { idx, path: entry.into_path() }) {
                            return;
                        }
                        idx += 1;
                    }
                }
            }));
        }
    };
    if lists.iter().flatten().all(|(_, pre)| !matches!(pre, Pre::Later)) {
        for (_, pre) in lists.into_iter().flatten() {
            if let Pre::Hits(done) = pre {
                report.file_done(&done);
            }
        }
        return Ok(report);
    }
    Ok(run_pool(ws, config, matcher, &searcher, opts, report, cancel, unreadable, |feed, shared| {
        // Held hits go straight to the report (or wait there for the files ahead of them), the
        // rest to the workers.
        for (idx, (path, pre)) in lists.into_iter().flatten().enumerate() {
            if cancel.is_cancelled() {
                return;
            }
            match pre {
                Pre::Hits(done) => shared.done(idx, done),
                Pre::Later => {
                    if !feed.push(Job { idx, path }) {
                        return;
                    }
                }
            }
        }
    }))
}

/// Searches the jobs `produce` feeds on a pool of workers, handing each file's output to the
/// report in job order.
#[allow(clippy::too_many_arguments)] // Two call sites in one function; a struct would only rename the list.
fn run_pool(
    ws: &Workspace,
    config: &SearchConfig,
    matcher: &RegexMatcher,
    searcher: &Searcher,
    opts: Opts,
    report: Report,
    cancel: &CancellationToken,
    unreadable: &Unreadable,
    produce: impl FnOnce(&mut Feed, &Shared),
) -> Report {
    let shared = Shared {
        state: Mutex::new(State { front: 0, ready: BTreeMap::new(), ready_bytes: 0, waiters: 0, report }),
        turn: Condvar::new(),
        cancel: cancel.clone(),
    };
    let workers = worker_count(config);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(workers * 8);
    let rx = Mutex::new(rx);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            // A clone has its own pool of regex caches: sharing one makes the threads contend.
            let (shared, rx, matcher, mut searcher) = (&shared, &rx, matcher.clone(), searcher.clone());
            scope.spawn(move || {
                // Once cancelled, jobs are taken and dropped until the walk stops, so that the
                // walker never waits on a full queue.
                loop {
                    // The queue's lock only for the `recv`: a guard in the `while let` scrutinee
                    // lives through the loop's body, and held over a batch's search it kept the
                    // other workers from taking any (one worker did most of a many-hits search).
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(batch) = next else { break };
                    for job in batch {
                        if cancel.is_cancelled() || !shared.may_start(job.idx) {
                            continue;
                        }
                        let path = job.path.as_path();
                        let mut sink = FileSink::new(opts, &matcher, cancel, show_path(ws, path));
                        sink.pipe = Some((shared, job.idx));
                        // An unreadable file is skipped and named in the answer, as ripgrep names it on stderr.
                        let file = std::fs::File::open(path);
                        let ok = match &file {
                            Ok(f) => searcher
                                .search_file(&matcher, f, &mut sink)
                                .map_err(|e| unreadable.file(path, &e))
                                .is_ok(),
                            Err(e) => {
                                unreadable.file(path, e);
                                false
                            }
                        };
                        if cancel.is_cancelled() {
                            continue;
                        }
                        // The open file's metadata: no second path lookup, and only for matched files.
                        let stamp = match &file {
                            Ok(f) if ok && sink.matches > 0 => {
                                Some((job.path.clone(), stamp(f.metadata().ok().as_ref())))
                            }
                            _ => None,
                        };
                        drop(file);
                        let mut done = sink.into_done(stamp);
                        if !ok {
                            done = Done { block: Block::default(), matches: 0, stamp: None, ..done };
                        }
                        shared.done(job.idx, done);
                    }
                }
            });
        }
        let mut feed = Feed { tx, batch: Vec::with_capacity(JOB_BATCH) };
        produce(&mut feed, &shared);
        if !feed.batch.is_empty() {
            let _ = feed.tx.send(feed.batch);
        }
    });
    shared.state.into_inner().unwrap_or_else(|p| p.into_inner()).report
}

/// Files up to this size are read whole and decoded as `read_file` decodes them (GR3); larger
/// ones are searched as a stream, as ripgrep does, in the encoding [`SNIFF_BYTES`] of them
/// show: reading a multi-GB log whole took memory twice its size.
const WHOLE_FILE_MAX: u64 = 8 << 20;
/// How much of a large file decides its encoding: its start, or when that is UTF-8, the bytes
/// from the first line that is not ([`crate::stream::LateDecoder`]).
const SNIFF_BYTES: usize = 1 << 20;

fn search_one_file(
    ws: &Workspace,
    args: &GrepArgs,
    path: &Path,
    matcher: &RegexMatcher,
    opts: Opts,
    cancel: &CancellationToken,
) -> Result<Done, SearchError> {
    let shown = show_path(ws, path);
    let io = |source| SearchError::Io { action: "reading", path: shown.clone(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    let mut searcher = build_searcher(args, opts.mode, ws, false)?;
    let mut sink = FileSink::new(opts, matcher, cancel, shown.clone());
    let mut whole = false;
    if meta.len() <= WHOLE_FILE_MAX {
        let bytes = std::fs::read(path).map_err(io)?;
        // GR3: the file's own encoding (BOM, UTF-16 without BOM, UTF-8, `files.encoding`, detection).
        match kodik_core::text::decode(&bytes, ws.settings().encoding()) {
            Ok(decoded) => {
                drop(bytes);
                searcher
                    .search_slice(matcher, decoded.text.as_bytes(), &mut sink)
                    .map_err(|e| SearchError::Internal(e.to_string()))?;
                whole = true;
            }
            // A NUL only past the first MiB: searched as in a bigger file (below), where only
            // the start decides whether a file is binary; before, the same log answered
            // "binary file" under 8 MB and its matches over it.
            Err(_) if !bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) => {}
            Err(_) => return Err(SearchError::Binary(shown)),
        }
    }
    if !whole {
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut head = Vec::with_capacity(SNIFF_BYTES);
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, SNIFF_BYTES as u64), &mut head).map_err(io)?;
        let head = without_cut_character(&head);
        let decoded =
            kodik_core::text::decode(head, ws.settings().encoding()).map_err(|_| SearchError::Binary(shown.clone()))?;
        let (format, lossy) = (decoded.format, decoded.lossy);
        drop(decoded.text);
        // NUL bytes past the start are searched as any byte (the start showed text), as `grep -a`.
        // No heap limit: a line (or, in multi-line mode, the file) is held whole, as ripgrep
        // holds it; a limit refused a minified 70 MB line and multi-line search of a big log.
        let mut b = searcher_builder(args, opts.mode);
        b.bom_sniffing(true);
        if format.encoding != encoding_rs::UTF_8 {
            let enc = grep::searcher::Encoding::new(format.encoding.name())
                .map_err(|e| SearchError::Internal(format!("encoding `{}`: {e}", format.encoding.name())))?;
            b.encoding(Some(enc));
        }
        searcher = b.build();
        std::io::Seek::rewind(&mut file).map_err(io)?;
        if format.encoding == encoding_rs::UTF_8 && !lossy {
            // A clean UTF-8 (or ASCII) start says little of the rest: text that is not UTF-8
            // decides its own encoding where it comes.
            let reader = crate::stream::LateDecoder::new(&file, ws.settings().encoding(), SNIFF_BYTES);
            searcher.search_reader(matcher, reader, &mut sink).map_err(io)?;
        } else {
            searcher.search_file(matcher, &file, &mut sink).map_err(io)?;
        }
    }
    Ok(sink.into_done(Some((path.to_path_buf(), stamp(Some(&meta))))))
}

/// The call's line numbers, context and limits, shared by every search.
fn searcher_builder(args: &GrepArgs, mode: OutputMode) -> SearcherBuilder {
    let (before, after) = match mode {
        OutputMode::Content => {
            (args.context_before.or(args.context).unwrap_or(0), args.context_after.or(args.context).unwrap_or(0))
        }
        _ => (0, 0),
    };
    let mut b = SearcherBuilder::new();
    b.line_number(true)
        .line_terminator(LineTerminator::crlf())
        .multi_line(args.multiline.unwrap_or(false))
        .before_context(before)
        .after_context(after)
        .max_matches(args.max_count);
    b
}

/// `bytes` without a UTF-8 character cut off at its end (a read's limit fell inside it), which
/// would count as an invalid sequence when the encoding is judged.
pub(crate) fn without_cut_character(bytes: &[u8]) -> &[u8] {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b < 0x80 {
            break;
        }
        if b >= 0xC0 {
            let width = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            if width > back {
                return &bytes[..bytes.len() - back];
            }
            break;
        }
    }
    bytes
}

/// `out` with `note` on a line of its own at the end.
pub(crate) fn with_note(mut out: ToolOutput, note: &str) -> ToolOutput {
    if let Some(kodik_core::Content::Text { text }) = out.content.first_mut() {
        text.push('\n');
        text.push_str(note);
    }
    out
}

/// `out` with what could not be read said at the end, and counted in its meta as `unreadable`.
pub(crate) fn with_unreadable(out: ToolOutput, ws: &Workspace, unreadable: &Unreadable, listed: bool) -> ToolOutput {
    let Some(note) = unreadable.note(ws) else { return out };
    let note = if listed { note.replace("Not searched", "Not listed") } else { note };
    let mut out = with_note(out, &note);
    if let Some(meta) = out.meta.as_object_mut() {
        meta.insert("unreadable".into(), json!(unreadable.count()));
    }
    out
}

/// A full result grep saved: the search (roots and arguments without the page) and the
/// fingerprint of the files it found hits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SavedKey {
    search: u64,
    files: u64,
}

/// The latest full results saved, so that another page of the same search over unchanged
/// files points at the copy already on disk instead of saving one more (a model paging
/// through a big result wrote a full copy per page, which the spool keeps for an hour).
static SAVED: Mutex<Vec<(SavedKey, PathBuf)>> = Mutex::new(Vec::new());
/// How many saved results [`SAVED`] remembers.
const SAVED_KEPT: usize = 32;

/// The file already holding the result `key` names, or else `fresh` (which is remembered).
fn saved_once(key: SavedKey, fresh: PathBuf) -> PathBuf {
    let mut saved = SAVED.lock().unwrap_or_else(|p| p.into_inner());
    saved.retain(|(_, p)| p.is_file());
    if let Some((_, earlier)) = saved.iter().find(|(k, _)| *k == key)
        && *earlier != fresh
    {
        let _ = std::fs::remove_file(&fresh);
        return earlier.clone();
    }
    if saved.len() >= SAVED_KEPT {
        saved.remove(0);
    }
    saved.push((key, fresh.clone()));
    fresh
}

fn format_result(args: &GrepArgs, bases: &[String], mut report: Report, searched: u64, key: SavedKey) -> ToolOutput {
    let mode = report.opts.mode;
    let (total, nfiles, total_matches, offset) = (report.entries, report.files, report.matches, report.offset);
    if nfiles == 0 {
        return ToolOutput::text(format!(
            "No matches for `{}` in {} ({searched} files searched; ignored, hidden and binary files are skipped).",
            args.pattern,
            bases.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", ")
        ))
        .with_meta(json!({ "total_matches": 0, "files": 0, "entries": 0, "shown": 0, "searched_files": searched }));
    }
    let plural = |n: u64, one: &str, many: &str| if n == 1 { one.to_string() } else { many.to_string() };
    let mut text = match mode {
        OutputMode::FilesWithMatches => format!("Found {nfiles} {}", plural(nfiles, "file", "files")),
        OutputMode::Count | OutputMode::Content => format!(
            "Found {total_matches} matching {} in {nfiles} {}",
            plural(total_matches, "line", "lines"),
            plural(nfiles, "file", "files")
        ),
    };
    text.push('\n');
    if offset >= total {
        // Nothing of the result is on this page, so no page points at the saved copy.
        report.discard();
    }
    let mut summary = report.spool.take().map(SpoolOut::finish);
    if let Some(s) = summary.as_mut()
        && s.spool_error.is_none()
        && let Some(fresh) = s.full_output.take()
    {
        s.full_output = Some(saved_once(key, fresh));
    }
    let saved = match &summary {
        Some(s) => match (&s.full_output, &s.spool_error) {
            (Some(p), _) if matches!(mode, OutputMode::Content) => format!(
                " The full result ({total} entries; each file's path once, above its `line:text` lines) is in `{}`.",
                p.display()
            ),
            (Some(p), _) => format!(" The full result ({total} entries) is in `{}`.", p.display()),
            (None, Some(e)) => format!(" The full result could not be saved: {e}."),
            _ => String::new(),
        },
        None => String::new(),
    };
    let shown_end = report.next.unwrap_or(total).min(total);
    let shown = shown_end.saturating_sub(offset);
    if offset >= total {
        text += &format!("[offset {offset} is past the end: there are {total} entries; use a smaller offset.]");
    } else {
        text.push_str(&report.page_text());
        if offset > 0 || shown_end < total {
            text += &format!("[Showing entries {}–{shown_end} of {total}.", offset + 1);
            if shown_end < total {
                text += &format!(" Next page: offset {shown_end}.");
                if shown_end < report.end.min(total) {
                    text += &format!(" (This answer holds at most {} KB of lines.)", report.max_bytes / 1024);
                }
            }
            text.push_str(&saved);
            text.push(']');
        } else {
            text.pop();
        }
    }
    let full_output = summary.and_then(|s| s.full_output).map(|p| p.display().to_string());
    ToolOutput::text(text).with_meta(json!({
        "total_matches": total_matches,
        "files": nfiles,
        "entries": total,
        "shown": shown,
        "offset": offset,
        "searched_files": searched,
        "truncated": offset > 0 || shown_end < total,
        "full_output": full_output,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer and the saved full result of one search, the spool file removed.
    fn answer(ws: &Workspace, args: &serde_json::Value, max_listed: usize) -> (String, serde_json::Value, String) {
        let args: GrepArgs = serde_json::from_value(args.clone()).unwrap();
        let out =
            grep_listing(ws, &Session::new(), &SearchConfig::default(), &args, &CancellationToken::new(), max_listed)
                .unwrap();
        let mut meta = out.meta.clone();
        let mut text = out.text_content();
        let full = match out.meta["full_output"].as_str() {
            Some(p) => {
                let full = std::fs::read_to_string(p).unwrap();
                std::fs::remove_file(p).unwrap();
                // Each search saves to a file of its own.
                text = text.replace(p, "SPOOL");
                meta["full_output"] = "SPOOL".into();
                full
            }
            None => String::new(),
        };
        (text, meta, full)
    }

    #[test]
    fn gr1_gr2_every_search_path_gives_the_same_ordered_answer() {
        // Small files with a few hits each, and one whose hits outgrow what the parallel
        // pre-pass holds for a file, so that it is searched again in order.
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in ["b/z.txt", "a.txt", "a/b.txt", "a-b/c.txt", "b/a/x.txt", "c.txt"].iter().enumerate() {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("nothing\nhit {i} one\nnone\nhit {i} two\n")).unwrap();
        }
        let big: String = (0..60_000).map(|l| format!("hit in a big file, line {l}\n")).collect();
        std::fs::write(dir.path().join("b/big.txt"), big).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();

        for args in [
            json!({"pattern": "hit", "head_limit": 20}),
            json!({"pattern": "hit", "head_limit": 5, "offset": 59_990}),
            json!({"pattern": "hit", "output_mode": "files_with_matches"}),
            json!({"pattern": "hit", "output_mode": "count"}),
            json!({"pattern": "one", "context": 1}),
        ] {
            // Listed in parallel and sorted, then the big file in order; and walked in sorted order.
            let listed = answer(&ws, &args, usize::MAX);
            let walked = answer(&ws, &args, 0);
            // Not `assert_eq!`: the full results are megabytes.
            assert!(listed == walked, "{args}: the answers differ:\n{}\n---\n{}", listed.0, walked.0);
            assert_eq!(listed.1["searched_files"], 7, "{args}");
        }
        let (text, meta, full) = answer(&ws, &json!({"pattern": "hit", "head_limit": 3}), usize::MAX);
        assert_eq!(meta["total_matches"], 60_000 + 12);
        // Path order, component by component: folder `a` before `a-b`, `a-b` before `a.txt`.
        assert_eq!(
            text.lines().skip(1).take(3).collect::<Vec<_>>(),
            ["a/b.txt:2:hit 2 one", "a/b.txt:4:hit 2 two", "a-b/c.txt:2:hit 3 one"],
            "{text}"
        );
        let headings: Vec<&str> = full.lines().filter(|l| l.ends_with(".txt")).collect();
        assert_eq!(headings, ["a/b.txt", "a-b/c.txt", "a.txt", "b/a/x.txt", "b/big.txt", "b/z.txt", "c.txt"]);

        // Only small files: the pre-pass answers alone, in the same order as the sorted walk.
        std::fs::remove_file(dir.path().join("b/big.txt")).unwrap();
        let args = json!({"pattern": "hit", "head_limit": 5});
        assert_eq!(answer(&ws, &args, usize::MAX), answer(&ws, &args, 0));
    }

    #[test]
    fn gr1_path_order_is_component_order() {
        let mut paths: Vec<PathBuf> =
            ["a-b/c", "a/b", "a.txt", "a/b/c", "a", "b", "a/b-c", "ab"].iter().map(PathBuf::from).collect();
        let mut by_components = paths.clone();
        by_components.sort();
        paths.sort_by(|a, b| path_order(a, b));
        assert_eq!(paths, by_components);
    }

    #[test]
    fn gr2_cancellation_stops_the_walk_itself_not_just_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let body = "abcdefghij".repeat(10) + "\n";
        let body = body.repeat(2000);
        for i in 0..120 {
            let d = dir.path().join(format!("d{}", i % 10));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("f{i}.txt")), &body).unwrap();
        }
        let ws = Workspace::new(dir.path()).unwrap();
        let args: GrepArgs =
            serde_json::from_value(json!({"pattern": "(a|b)+c.*j$", "output_mode": "content"})).unwrap();
        let session = Session::new();
        let config = SearchConfig::default();

        let full_start = std::time::Instant::now();
        let full = grep(&ws, &session, &config, &args, &CancellationToken::new()).unwrap();
        let full_time = full_start.elapsed();
        assert_eq!(full.meta["total_matches"], 120 * 2000);
        if let Some(saved) = full.meta["full_output"].as_str() {
            std::fs::remove_file(saved).unwrap();
        }

        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(full_time / 10);
            c2.cancel();
        });
        let start = std::time::Instant::now();
        let result = grep(&ws, &Session::new(), &config, &args, &cancel);
        let took = start.elapsed();
        canceller.join().unwrap();
        assert!(matches!(result, Err(SearchError::Cancelled)), "{result:?}");
        assert!(took < full_time / 2, "cancelled walk took {took:?}, a full one {full_time:?}");
    }
}
