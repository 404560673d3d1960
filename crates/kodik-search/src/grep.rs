//! `grep` (GR1–GR5): regex search on ripgrep's engine (`grep::regex`, `grep::searcher`,
//! `ignore`'s parallel walker and type table).
//!
//! - Results are sorted by path whatever order the worker threads finish in, then paged
//!   with `head_limit`/`offset`.
//! - Every hit is reported as its line (`path:line:text`), so an empty match (`^$`) still has
//!   a path and a line number (GR4).
//! - `glob`/`exclude` are ripgrep's `--glob` rules (GR5), but unlike ripgrep's they never
//!   re-include what `.gitignore`, `.ignore` or `.kodikignore` hide (G16).
//! - A folder search reads files as UTF-8, UTF-16 with a BOM, or the project's
//!   `files.encoding`; a single file is decoded by kodik-core's detection first (GR3).
//! - Nothing outlives the call: matcher, searchers and results are dropped when it returns,
//!   fails or is cancelled (GR2).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use grep::matcher::LineTerminator;
use grep::regex::{RegexMatcher, RegexMatcherBuilder};
use grep::searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::TypesBuilder;
use kodik_core::{CancellationToken, Session, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::search::{GrepArgs, OutputMode};
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::glob::search_base;
use crate::guard;
use crate::util::{hash_of, names_hidden, run_blocking, stamp};

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

    async fn run(&self, args: GrepArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ws = cx.workspace.clone();
        let session = cx.session.clone();
        let config = self.config.clone();
        let cancel = cx.cancel.clone();
        Ok(run_blocking(&cx.cancel, move || grep(&ws, &session, &config, &args, &cancel)).await?)
    }
}

/// One reported line (its text is a slice of [`FileHits::text`]), or the `--` between
/// separate context groups.
#[derive(Debug, Clone, Copy)]
enum Entry {
    Line { number: u64, is_match: bool, start: usize, end: usize },
    Break,
}

/// What one file gave. Lines share one text buffer: a search with a million hits makes a few
/// thousand allocations, not a million.
#[derive(Debug)]
struct FileHits {
    path: PathBuf,
    stamp: (u128, u64),
    matches: u64,
    text: String,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Opts {
    mode: OutputMode,
    max_line_chars: usize,
}

/// Collects one file's hits.
struct Collect<'a> {
    opts: Opts,
    cancel: &'a CancellationToken,
    matches: u64,
    text: String,
    entries: Vec<Entry>,
}

impl<'a> Collect<'a> {
    fn new(opts: Opts, cancel: &'a CancellationToken) -> Self {
        Self { opts, cancel, matches: 0, text: String::new(), entries: Vec::new() }
    }

    fn line(&mut self, number: u64, is_match: bool, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let start = self.text.len();
        let max = self.opts.max_line_chars;
        match std::str::from_utf8(bytes) {
            // Fewer bytes than the limit means fewer characters too: no counting needed.
            Ok(s) if s.len() <= max => self.text.push_str(s),
            _ => {
                let lossy = String::from_utf8_lossy(bytes);
                match lossy.char_indices().nth(max) {
                    Some((cut, _)) => {
                        let rest = lossy[cut..].chars().count();
                        let _ = write!(self.text, "{} […{rest} more characters]", &lossy[..cut]);
                    }
                    None => self.text.push_str(&lossy),
                }
            }
        }
        self.entries.push(Entry::Line { number, is_match, start, end: self.text.len() });
    }

    fn into_hits(self, path: PathBuf, stamp: (u128, u64)) -> FileHits {
        FileHits { path, stamp, matches: self.matches, text: self.text, entries: self.entries }
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.matches += 1;
        match self.opts.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                for (n, line) in (m.line_number().unwrap_or(0)..).zip(m.lines()) {
                    self.line(n, true, line);
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.line(c.line_number().unwrap_or(0), false, c.bytes());
        Ok(!self.cancel.is_cancelled())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.entries.push(Entry::Break);
        Ok(true)
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

fn overrides(args: &GrepArgs, base: &Path) -> Result<Option<Override>, SearchError> {
    let include = args.glob.as_ref().map(|g| g.to_vec()).unwrap_or_default();
    let exclude = args.exclude.as_ref().map(|g| g.to_vec()).unwrap_or_default();
    if include.is_empty() && exclude.is_empty() {
        return Ok(None);
    }
    let mut b = OverrideBuilder::new(base);
    let bad = |glob: &str, e: ignore::Error| SearchError::BadGlob { glob: glob.to_string(), reason: e.to_string() };
    for g in include.iter().filter(|g| !g.trim().is_empty()) {
        b.add(g.trim()).map_err(|e| bad(g, e))?;
    }
    for g in exclude.iter().filter(|g| !g.trim().is_empty()) {
        let g = g.trim();
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

fn types(name: &str) -> Result<ignore::types::Types, SearchError> {
    let mut b = TypesBuilder::new();
    b.add_defaults();
    for n in name.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        b.select(n);
    }
    b.build().map_err(|e| match e {
        ignore::Error::UnrecognizedFileType(bad) => {
            let defs = TypesBuilder::new().add_defaults().definitions();
            let lower = bad.to_lowercase();
            let head: String = lower.chars().take(2).collect();
            let close: Vec<String> = defs
                .iter()
                .map(|d| d.name().to_string())
                .filter(|n| n.contains(&lower) || lower.contains(n.as_str()) || n.starts_with(&head))
                .take(12)
                .collect();
            let hint = if close.is_empty() {
                "examples: rust, py, js, ts, go, java, c, cpp, md, json, yaml, toml, html, css, sh".to_string()
            } else {
                format!("did you mean one of: {}?", close.join(", "))
            };
            SearchError::UnknownType { name: bad, hint }
        }
        other => SearchError::UnknownType { name: name.to_string(), hint: other.to_string() },
    })
}

/// Per-thread results, handed over when the walker thread drops its visitor.
struct Local {
    hits: Vec<FileHits>,
    shared: Arc<Mutex<Vec<FileHits>>>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.append(&mut self.hits);
    }
}

fn grep(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &GrepArgs,
    cancel: &CancellationToken,
) -> Result<ToolOutput, SearchError> {
    let (base, meta) = search_base(ws, args.path.as_deref())?;
    let matcher = build_matcher(args)?;
    let mode = args.output_mode.unwrap_or_default();
    let opts = Opts { mode, max_line_chars: config.grep_max_line_chars.max(20) };
    let searched = AtomicU64::new(0);

    let mut files: Vec<FileHits> = if meta.is_file() {
        searched.fetch_add(1, Ordering::Relaxed);
        search_one_file(ws, args, &base, &matcher, opts, cancel)?.into_iter().collect()
    } else if meta.is_dir() {
        let mut wb = ws.walker(&base);
        let include_hidden = args.glob.as_ref().is_some_and(|g| g.to_vec().iter().any(|p| names_hidden(p)));
        wb.hidden(!include_hidden).threads(config.threads);
        if let Some(t) = &args.file_type {
            wb.types(types(t)?);
        }
        let ov = overrides(args, &base)?;
        if ov.is_some() || include_hidden {
            wb.filter_entry(move |e| {
                let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                if include_hidden && is_dir && e.file_name() == ".git" {
                    return false;
                }
                ov.as_ref().is_none_or(|ov| !ov.matched(e.path(), is_dir).is_ignore())
            });
        }
        let searcher = build_searcher(args, mode, ws, true)?;
        let shared: Arc<Mutex<Vec<FileHits>>> = Arc::default();
        wb.build_parallel().run(|| {
            let mut local = Local { hits: Vec::new(), shared: shared.clone() };
            let mut searcher = searcher.clone();
            let matcher = matcher.clone();
            let searched = &searched;
            Box::new(move |entry| {
                if cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else { return WalkState::Continue };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                searched.fetch_add(1, Ordering::Relaxed);
                let mut sink = Collect::new(opts, cancel);
                // An unreadable file is skipped, as ripgrep does (after saying so on stderr).
                if searcher.search_path(&matcher, entry.path(), &mut sink).is_ok() && sink.matches > 0 {
                    let stamp = stamp(entry.metadata().ok().as_ref());
                    local.hits.push(sink.into_hits(entry.into_path(), stamp));
                }
                WalkState::Continue
            })
        });
        std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
    } else {
        return Err(SearchError::NotSearchable(ws.display(&base)));
    };
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled);
    }
    files.sort_unstable_by(|a, b| a.path.cmp(&b.path));

    let key = format!("grep\0{}\0{args:?}", base.display());
    let total_matches: u64 = files.iter().map(|f| f.matches).sum();
    let what = format!("{total_matches} matches in {} files, none of them changed", files.len());
    // G15: what a repeat must notice is a matched file that changed (its mtime or size), a
    // newly matching file, or one that no longer matches; the lines follow from those.
    let fingerprint = hash_of(&files.iter().map(|f| (&f.path, f.stamp, f.matches)).collect::<Vec<_>>());
    if let Some(out) = guard::check(session, &key, fingerprint, &what) {
        return Ok(out);
    }
    Ok(format_result(ws, config, args, mode, &base, &files, searched.load(Ordering::Relaxed)))
}

fn search_one_file(
    ws: &Workspace,
    args: &GrepArgs,
    path: &Path,
    matcher: &RegexMatcher,
    opts: Opts,
    cancel: &CancellationToken,
) -> Result<Option<FileHits>, SearchError> {
    let shown = ws.display(path);
    let meta =
        std::fs::metadata(path).map_err(|source| SearchError::Io { action: "reading", path: shown.clone(), source })?;
    let bytes =
        std::fs::read(path).map_err(|source| SearchError::Io { action: "reading", path: shown.clone(), source })?;
    // GR3: the file's own encoding (BOM, UTF-16 without BOM, UTF-8, `files.encoding`, detection).
    let decoded = kodik_core::text::decode(&bytes, ws.settings().encoding()).map_err(|_| SearchError::Binary(shown))?;
    drop(bytes);
    let mut searcher = build_searcher(args, opts.mode, ws, false)?;
    let mut sink = Collect::new(opts, cancel);
    searcher
        .search_slice(matcher, decoded.text.as_bytes(), &mut sink)
        .map_err(|e| SearchError::Internal(e.to_string()))?;
    Ok((sink.matches > 0).then(|| sink.into_hits(path.to_path_buf(), stamp(Some(&meta)))))
}

fn format_result(
    ws: &Workspace,
    config: &SearchConfig,
    args: &GrepArgs,
    mode: OutputMode,
    base: &Path,
    files: &[FileHits],
    searched: u64,
) -> ToolOutput {
    let total_matches: u64 = files.iter().map(|f| f.matches).sum();
    let base_shown = ws.display(base);
    if files.is_empty() {
        return ToolOutput::text(format!(
            "No matches for `{}` in `{base_shown}` ({searched} files searched; ignored, hidden and binary files are \
             skipped).",
            args.pattern
        ))
        .with_meta(json!({ "total_matches": 0, "files": 0, "entries": 0, "shown": 0, "searched_files": searched }));
    }
    let context = matches!(mode, OutputMode::Content)
        && args.context_before.or(args.context_after).or(args.context).unwrap_or(0) > 0;
    // Entries are listed as cheap references and only the shown page is formatted: a search
    // with a million hits costs one pass, not a million strings.
    let shown_paths: Vec<String> = files.iter().map(|f| ws.display(&f.path)).collect();
    let mut entries: Vec<(usize, Option<Entry>)> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        match mode {
            OutputMode::FilesWithMatches | OutputMode::Count => entries.push((i, None)),
            OutputMode::Content => {
                if context && i > 0 {
                    entries.push((i, Some(Entry::Break)));
                }
                entries.extend(f.entries.iter().map(|e| (i, Some(*e))));
            }
        }
    }
    let total = entries.len();
    let offset = args.offset.unwrap_or(0);
    let limit = match args.head_limit.unwrap_or(config.grep_head_limit) {
        0 => usize::MAX,
        n => n,
    };
    let end = offset.saturating_add(limit).min(total);
    let nfiles = files.len();
    let plural = |n: usize, one: &str, many: &str| if n == 1 { one.to_string() } else { many.to_string() };
    let mut text = match mode {
        OutputMode::FilesWithMatches => format!("Found {nfiles} {}", plural(nfiles, "file", "files")),
        OutputMode::Count | OutputMode::Content => format!(
            "Found {total_matches} matching {} in {nfiles} {}",
            plural(total_matches as usize, "line", "lines"),
            plural(nfiles, "file", "files")
        ),
    };
    text.push('\n');
    if offset >= total {
        text.push_str(&format!("[offset {offset} is past the end: there are {total} entries; use a smaller offset.]"));
    } else {
        for &(i, e) in &entries[offset..end] {
            let shown = &shown_paths[i];
            let _ = match (mode, e) {
                (OutputMode::Count, _) => writeln!(text, "{shown}:{}", files[i].matches),
                (_, None) => writeln!(text, "{shown}"),
                (_, Some(Entry::Break)) => writeln!(text, "--"),
                (_, Some(Entry::Line { number, is_match, start, end })) => {
                    let sep = if is_match { ':' } else { '-' };
                    writeln!(text, "{shown}{sep}{number}{sep}{}", &files[i].text[start..end])
                }
            };
        }
        if offset > 0 || end < total {
            text.push_str(&format!("[Showing entries {}–{end} of {total}.", offset + 1));
            if end < total {
                text.push_str(&format!(" Next page: offset {end}."));
            }
            text.push(']');
        } else {
            text.pop();
        }
    }
    ToolOutput::text(text).with_meta(json!({
        "total_matches": total_matches,
        "files": nfiles,
        "entries": total,
        "shown": end.saturating_sub(offset),
        "offset": offset,
        "searched_files": searched,
        "truncated": end < total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
