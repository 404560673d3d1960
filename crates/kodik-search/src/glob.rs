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

use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use kodik_core::{
    CancellationToken, PathError, Session, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace,
};
use kodik_schema::search::GlobArgs;
use serde_json::json;

use crate::config::SearchConfig;
use crate::error::SearchError;
use crate::guard;
use crate::util::{CancelCheck, names_hidden, run_blocking, stamp};

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
pub(crate) fn search_bases(
    ws: &Workspace,
    path: Option<&str>,
) -> Result<Vec<(PathBuf, std::fs::Metadata)>, SearchError> {
    let bases: Vec<PathBuf> = match path {
        Some(p) if !p.trim().is_empty() => vec![ws.check(p.trim())?],
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
            Ok(m) => Ok((base, m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(PathError::NotFound(ws.display(&base)).into()),
            Err(source) => Err(SearchError::Io { action: "reading", path: ws.display(&base), source }),
        })
        .collect()
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
    let bytes = path.as_os_str().as_encoded_bytes();
    let root = ws.primary_root().as_os_str().as_encoded_bytes();
    let rel = bytes.strip_prefix(root).and_then(|rest| match rest {
        [] => Some(&b"."[..]),
        [b'/', rest @ ..] => Some(rest),
        rest if root.ends_with(b"/") => Some(rest),
        _ => None,
    });
    out.push_str(&String::from_utf8_lossy(rel.unwrap_or(bytes)));
}

/// A compiled pattern and what it is matched against.
#[derive(Clone)]
pub(crate) struct Pattern {
    /// The pattern as the answer names it (relative to the search folder).
    pub(crate) shown: String,
    matcher: GlobMatcher,
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
        Ok(Self { shown: p.to_string(), matcher: glob.compile_matcher(), on_path })
    }

    /// Whether the file at `path`, found below `base`, matches.
    pub(crate) fn matches(&self, path: &Path, base: &Path) -> bool {
        if self.on_path {
            self.matcher.is_match(path.strip_prefix(base).unwrap_or(path))
        } else {
            path.file_name().is_some_and(|n| self.matcher.is_match(n))
        }
    }
}

struct Found {
    path: PathBuf,
    mtime: u128,
    len: u64,
}

/// Per-thread results, handed to the shared list when the walker thread drops its visitor.
struct Local {
    found: Vec<Found>,
    shared: Arc<Mutex<Vec<Found>>>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.append(&mut self.found);
    }
}

fn glob(
    ws: &Workspace,
    session: &Session,
    config: &SearchConfig,
    args: &GlobArgs,
    cancel: &CancellationToken,
) -> Result<ToolOutput, SearchError> {
    let bases = search_bases(ws, args.path.as_deref())?;
    for (base, meta) in &bases {
        if meta.is_file() {
            return Err(SearchError::GlobOnFile(ws.display(base)));
        }
        if !meta.is_dir() {
            return Err(SearchError::NotSearchable(ws.display(base)));
        }
    }
    let shared: Arc<Mutex<Vec<Found>>> = Arc::default();
    let mut pattern = String::new();
    let mut hidden = false;
    for (base, _) in &bases {
        let compiled = Pattern::compile(&args.pattern, base)?;
        hidden = names_hidden(&compiled.shown);
        pattern = compiled.shown.clone();
        let mut wb = ws.walker(base);
        wb.hidden(!hidden).threads(config.threads);
        if hidden {
            wb.filter_entry(|e| e.file_name() != ".git");
        }
        wb.build_parallel().run(|| {
            let mut local = Local { found: Vec::new(), shared: shared.clone() };
            // A clone has its own regex cache: sharing one makes the threads contend.
            let compiled = compiled.clone();
            let base = base.clone();
            let mut cancelled = CancelCheck::new(cancel.clone());
            Box::new(move |entry| {
                if cancelled.is_cancelled() {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else { return WalkState::Continue };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                if compiled.matches(entry.path(), &base) {
                    let (mtime, len) = stamp(entry.metadata().ok().as_ref());
                    local.found.push(Found { path: entry.into_path(), mtime, len });
                }
                WalkState::Continue
            })
        });
    }
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled);
    }
    let mut found = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    found.sort_unstable_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));

    // The path's bytes: hashing a `Path` walks its components, which costs more here than the walk.
    let mut hasher = DefaultHasher::new();
    for f in &found {
        f.path.as_os_str().as_encoded_bytes().hash(&mut hasher);
        (f.mtime, f.len).hash(&mut hasher);
    }
    let fingerprint = hasher.finish();
    let where_ = bases.iter().map(|(b, _)| b.display().to_string()).collect::<Vec<_>>().join("\0");
    let key = format!("glob\0{where_}\0{pattern}");
    let base_shown = bases.iter().map(|(b, _)| show_path(ws, b)).collect::<Vec<_>>().join("`, `");
    let what = format!("{} files match `{pattern}` in `{base_shown}`, none changed", found.len());
    if let Some(out) = guard::check(session, &key, fingerprint, &what) {
        return Ok(out);
    }

    let total = found.len();
    if total == 0 {
        return Ok(ToolOutput::text(format!(
            "No files match `{pattern}` in `{base_shown}` (ignored files{} are skipped).",
            if hidden { "" } else { " and hidden files" }
        ))
        .with_meta(json!({ "total": 0, "shown": 0, "truncated": false })));
    }
    let limit = config.glob_limit.max(1);
    let mut text = String::new();
    for f in found.iter().take(limit) {
        push_shown(ws, &f.path, &mut text);
        text.push('\n');
    }
    let shown = total.min(limit);
    if total > limit {
        text.push_str(&format!(
            "[{total} files match; showing the {limit} most recently modified. {} more not shown: narrow the \
             pattern or the path.]",
            total - limit
        ));
    } else {
        text.pop();
    }
    Ok(ToolOutput::text(text).with_meta(json!({ "total": total, "shown": shown, "truncated": total > limit })))
}
