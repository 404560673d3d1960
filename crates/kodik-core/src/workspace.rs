//! The [`Workspace`]: the folders a session may touch, how paths resolve inside them, and the
//! one `.kodikignore` check every tool uses (G16).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

/// The name of the ignore file every tool honours.
pub const IGNORE_FILE: &str = ".kodikignore";

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path was empty.
    #[error("the path is empty; give a file path relative to the workspace or absolute")]
    Empty,
    /// The path resolves outside every workspace root.
    #[error("`{path}` is outside the workspace ({roots}); only files inside it can be used")]
    OutsideWorkspace {
        /// The path as given.
        path: String,
        /// The roots, comma-separated.
        roots: String,
    },
    /// The path is hidden by `.kodikignore`.
    #[error("`{0}` is excluded by .kodikignore and cannot be accessed")]
    Ignored(String),
    /// A `.kodikignore` on the way to the path exists but cannot be read, so everything below
    /// its folder is treated as hidden (G16 fails closed).
    #[error(
        "`{path}` cannot be accessed: `{ignore_file}`, which says what is excluded there, cannot be read \
         ({reason}), so everything in its folder is treated as excluded; the user must make it readable"
    )]
    IgnoreFileUnreadable {
        /// The path as shown.
        path: String,
        /// The unreadable `.kodikignore`, as shown.
        ignore_file: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// A Windows-style path that holds a control character, typically `\t` from `C:\tmp` (E10).
    #[error(
        "`{0}` looks like a Windows path that contains a control character (a `\\t` or `\\n` escape \
         turned a backslash into a tab or newline); write the path with forward slashes or escaped backslashes"
    )]
    ControlCharacter(String),
    /// A path written with backslashes or a drive letter that names nothing here: on this
    /// system `\\` is part of a file name, so `dir\\new.txt` would be a new file in the root (E10).
    #[error(
        "`{path}` looks like a Windows path, but `\\` is not a folder separator here and nothing has that \
         name; write the path with forward slashes, relative to the workspace or absolute (e.g. `{suggestion}`)"
    )]
    WindowsPath {
        /// The path as given.
        path: String,
        /// The same path with forward slashes (and without a drive letter).
        suggestion: String,
    },
    /// A path with shell escapes (`My\\ Docs/a.txt`) that names nothing here: paths are taken
    /// as written, no shell removes the backslashes (E10).
    #[error(
        "`{path}` has shell escapes (a `\\` before a space or a character such as `(`), but paths are not read by \
         a shell here and nothing has that name; write the name as it is, without backslashes: `{suggestion}`"
    )]
    ShellEscaped {
        /// The path as given.
        path: String,
        /// The same path with the escaping backslashes removed.
        suggestion: String,
    },
    /// The path is a symbolic link whose target does not exist.
    #[error(
        "`{path}` is a symbolic link to `{target}`, which does not exist; create the file it points to (`{target}`) \
         or delete the link"
    )]
    DanglingSymlink {
        /// The link, as shown.
        path: String,
        /// Where it points, as shown (relative to the workspace when inside it).
        target: String,
    },
    /// A workspace root does not exist or is not a folder.
    #[error("workspace root `{path}` is not a usable folder: {reason}")]
    BadRoot {
        /// The root as given.
        path: String,
        /// Why it is unusable.
        reason: String,
    },
    /// The path resolves to a folder where a file was expected.
    #[error("`{0}` is a folder; give the path of a file")]
    IsDirectory(String),
    /// The path does not exist, and nothing in its folder has a name close to it.
    #[error("`{0}` does not exist")]
    NotFound(String),
    /// The path does not exist, but names close to it do (a typo, a wrong extension).
    #[error("`{path}` does not exist{}", crate::error::suggestions_suffix(near))]
    NotFoundNear {
        /// The path as shown.
        path: String,
        /// Existing paths close to it, as shown, closest first.
        near: Vec<String>,
    },
}

impl PathError {
    /// Whether the path simply does not exist (with or without suggestions).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_) | Self::NotFoundNear { .. })
    }
}

/// Project settings the tools read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case")]
pub struct Settings {
    /// `files.encoding`: the encoding to assume where detection is ambiguous (R6, GR3), as a
    /// WHATWG label such as `windows-1251`. `None` means BOM sniffing, UTF-8, then detection.
    pub files_encoding: Option<String>,
}

impl Settings {
    /// The configured fallback encoding, when its label is known.
    pub fn encoding(&self) -> Option<&'static encoding_rs::Encoding> {
        self.files_encoding.as_deref().and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes()))
    }
}

/// A canonical key for something a call mutates, so two spellings of one file compare equal (G2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Resource {
    /// A file, by its canonical absolute path (symlinks of existing ancestors resolved).
    File(PathBuf),
    /// State a tool's calls share beyond files, by a name the tool chooses — the browser
    /// session whose tabs every `browser` action reads and changes: its calls run in the
    /// model's order, as edits of one file do.
    Session(String),
    /// Every file at or below a folder, by its canonical absolute path (`/` for any file).
    /// Among a call's [`reads`](crate::Tool::reads): it reads files below the folder (a search),
    /// so it waits for earlier changes of them and later changes wait for it. Among its
    /// [`resources`](crate::Tool::resources) (what it changes): it may read and change files
    /// below the folder in ways it cannot name (a shell command, a sub-agent), so it waits for
    /// every earlier call on those files and later changes of them wait for it; later reads,
    /// searches and other calls of this kind run with it (G1, S4).
    Tree(PathBuf),
}

impl Resource {
    /// Every file there is: what a shell command may touch.
    pub fn any_file() -> Self {
        Self::Tree(PathBuf::from("/"))
    }

    /// Whether a call on `self` and one on `other` may touch the same file.
    pub fn overlaps(&self, other: &Resource) -> bool {
        match (self, other) {
            (Self::Tree(a), Self::Tree(b)) => a.starts_with(b) || b.starts_with(a),
            (Self::Tree(t), Self::File(f)) | (Self::File(f), Self::Tree(t)) => f.starts_with(t),
            (a, b) => a == b,
        }
    }
}

#[derive(Debug)]
struct CachedIgnore {
    modified: Option<SystemTime>,
    /// The inode change time, which a `chmod` moves (and nobody can set back).
    changed: (i64, i64),
    len: u64,
    matcher: Option<Arc<Gitignore>>,
    /// Why the file could not be read, when it could not: then `matcher` hides everything.
    unreadable: Option<String>,
}

/// One or more root folders, the rules for paths inside them, and project settings.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Arc<Vec<PathBuf>>,
    settings: Arc<Settings>,
    ignores: Arc<Mutex<HashMap<PathBuf, CachedIgnore>>>,
    trusted: bool,
}

impl Workspace {
    /// A workspace with one root.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, PathError> {
        Self::with_roots([root])
    }

    /// A workspace with several roots; relative paths resolve against the first.
    pub fn with_roots<P: AsRef<Path>>(roots: impl IntoIterator<Item = P>) -> Result<Self, PathError> {
        let mut canon = Vec::new();
        for r in roots {
            let r = r.as_ref();
            let c = std::fs::canonicalize(r)
                .map_err(|e| PathError::BadRoot { path: r.display().to_string(), reason: e.to_string() })?;
            if !c.is_dir() {
                return Err(PathError::BadRoot { path: r.display().to_string(), reason: "not a folder".into() });
            }
            canon.push(c);
        }
        if canon.is_empty() {
            return Err(PathError::BadRoot { path: String::new(), reason: "no root given".into() });
        }
        Ok(Self { roots: Arc::new(canon), settings: Arc::default(), ignores: Arc::default(), trusted: true })
    }

    /// Replaces the project settings.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = Arc::new(settings);
        self
    }

    /// Marks the workspace trusted or not. A workspace is trusted unless the host says otherwise
    /// (e.g. a folder the user opened without trusting its authors); tools then keep nothing of
    /// it beyond the session — the browser uses only fresh, isolated storage for it (B1).
    pub fn with_trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// Whether the host trusts this workspace (default `true`, see [`with_trusted`](Self::with_trusted)).
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// The canonical roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The first root, against which relative paths resolve.
    pub fn primary_root(&self) -> &Path {
        &self.roots[0]
    }

    /// The project settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Resolves `path` (relative to the first root, or absolute) to a canonical absolute path
    /// inside the workspace. `.`/`..` are handled, symlinks of existing parts are followed, and
    /// the result must lie under a root. The path itself need not exist. A name that exists
    /// only in another Unicode normalization form (`café` typed precomposed, stored decomposed
    /// as macOS writes it) resolves to the name on disk: the two look the same to the model,
    /// which could otherwise never name the file, and writing would make a look-alike twin.
    pub fn resolve(&self, path: impl AsRef<Path>) -> Result<PathBuf, PathError> {
        let raw = path.as_ref();
        let shown = raw.display().to_string();
        if shown.is_empty() {
            return Err(PathError::Empty);
        }
        if looks_windows(&shown) && shown.chars().any(|c| c.is_control()) {
            return Err(PathError::ControlCharacter(shown.escape_debug().to_string()));
        }
        let joined = if raw.is_absolute() { raw.to_path_buf() } else { self.primary_root().join(raw) };
        // A name that really has a backslash (or a drive-like prefix) is still usable.
        let b = shown.as_bytes();
        let drive = b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'/' | b'\\');
        if !drive
            && shown.contains('\\')
            && joined.symlink_metadata().is_err()
            && let Some(suggestion) = without_shell_escapes(&shown)
        {
            return Err(PathError::ShellEscaped { path: shown, suggestion });
        }
        if (drive || shown.contains('\\')) && joined.symlink_metadata().is_err() {
            let unix = shown.replace('\\', "/");
            // Without the drive: the model most likely meant a path inside the workspace.
            let suggestion = if drive { unix[3..].to_string() } else { unix };
            return Err(PathError::WindowsPath { path: shown, suggestion });
        }
        let canonical = self.on_disk(&normalize_lexically(&joined));
        if self.roots.iter().any(|r| canonical.starts_with(r)) {
            Ok(canonical)
        } else {
            Err(PathError::OutsideWorkspace { path: shown, roots: self.roots_list() })
        }
    }

    /// [`resolve`](Self::resolve), then refuse paths hidden by `.kodikignore` (G16).
    /// This is the check every tool that touches a file goes through.
    pub fn check(&self, path: impl AsRef<Path>) -> Result<PathBuf, PathError> {
        let resolved = self.resolve(path.as_ref())?;
        if self.is_ignored(&resolved) {
            return Err(self.ignored_error(&resolved));
        }
        Ok(resolved)
    }

    /// [`check`](Self::check) for the tools that only read (read_file, grep), which also accept
    /// a full output a tool saved and named in its result (G20): it lies outside the workspace,
    /// but the model was handed its path to read.
    pub fn check_readable(&self, path: impl AsRef<Path>) -> Result<PathBuf, PathError> {
        let path = path.as_ref();
        match self.check(path) {
            Err(e @ PathError::OutsideWorkspace { .. }) => match std::fs::canonicalize(path) {
                Ok(real) if crate::preview::is_saved_output(&real) => Ok(real),
                _ => Err(e),
            },
            other => other,
        }
    }

    /// [`check`](Self::check) for a path that must be an existing file (not a folder).
    pub fn check_file(&self, path: impl AsRef<Path>) -> Result<PathBuf, PathError> {
        let resolved = self.check(path)?;
        match std::fs::metadata(&resolved) {
            Ok(m) if m.is_dir() => Err(PathError::IsDirectory(self.display(&resolved))),
            Ok(_) => Ok(resolved),
            Err(_) => Err(self.not_found(&resolved)),
        }
    }

    /// The error for a resolved path that does not exist: [`PathError::DanglingSymlink`] for a
    /// link to nothing, else [`PathError::NotFoundNear`] with up to
    /// three existing paths whose name is close to the first missing part of it (`a.tx` → `a.txt`,
    /// `scr/main.rs` → `src/main.rs`), or [`PathError::NotFound`] when there are none. Names hidden
    /// by `.kodikignore` are never suggested.
    pub fn not_found(&self, resolved: &Path) -> PathError {
        let shown = self.display(resolved);
        if let Some(target) = self.dangling_target(resolved) {
            return PathError::DanglingSymlink { path: shown, target };
        }
        let near = self.near_names(resolved);
        if near.is_empty() { PathError::NotFound(shown) } else { PathError::NotFoundNear { path: shown, near } }
    }

    /// Where `path` points, as shown, when it is a symbolic link to nothing.
    pub fn dangling_target(&self, path: &Path) -> Option<String> {
        let target = std::fs::read_link(path).ok()?;
        if path.metadata().is_ok() {
            return None;
        }
        let full = path.parent().map_or_else(|| target.clone(), |dir| normalize_lexically(&dir.join(&target)));
        Some(if self.roots.iter().any(|r| full.starts_with(r)) {
            self.display(&full)
        } else {
            target.display().to_string()
        })
    }

    fn near_names(&self, resolved: &Path) -> Vec<String> {
        // Folders with more entries than this are not listed: the hint is not worth the time.
        const MAX_ENTRIES: usize = 10_000;
        let mut missing = Vec::new();
        let mut dir = resolved;
        while !dir.exists() {
            let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else { return Vec::new() };
            missing.push(name);
            dir = parent;
        }
        let Some(first) = missing.pop().and_then(|n| n.to_str()) else { return Vec::new() };
        if !self.roots.iter().any(|r| dir.starts_with(r)) {
            return Vec::new();
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        let names: Vec<String> =
            entries.take(MAX_ENTRIES).flatten().filter_map(|e| e.file_name().into_string().ok()).collect();
        let rest: PathBuf = missing.iter().rev().collect();
        closest_names(first, &names)
            .into_iter()
            .map(|n| dir.join(n).join(&rest))
            .filter(|p| (rest.as_os_str().is_empty() || p.exists()) && !self.is_ignored(p))
            .take(3)
            .map(|p| self.display(&p))
            .collect()
    }

    /// The canonical resource key of `path` (G2). Paths outside the workspace still get a key.
    pub fn resource(&self, path: impl AsRef<Path>) -> Resource {
        let raw = path.as_ref();
        let joined = if raw.is_absolute() { raw.to_path_buf() } else { self.primary_root().join(raw) };
        Resource::File(self.on_disk(&normalize_lexically(&joined)))
    }

    /// The canonical [`Resource::Tree`] of the folder `path` (G2, G4).
    pub fn tree(&self, path: impl AsRef<Path>) -> Resource {
        match self.resource(path) {
            Resource::File(p) => Resource::Tree(p),
            other => other,
        }
    }

    /// [`canonical`](Self::canonical), with a missing name replaced by its twin on disk in
    /// another Unicode normalization form ([`look_alike`]).
    fn on_disk(&self, lexical: &Path) -> PathBuf {
        let canonical = self.canonical(lexical);
        // ASCII names have one Unicode form only: the look costs nothing on them.
        if canonical.as_os_str().is_ascii() || canonical.symlink_metadata().is_ok() {
            return canonical;
        }
        look_alike(&canonical).map_or(canonical, |found| self.canonical(&found))
    }

    /// [`canonicalize_existing_prefix`] of a lexically normal absolute path, checking only the
    /// components below the root it lies under when none of them is a symlink: one `readlink`
    /// per component below the root and one for the root itself (canonical when the workspace
    /// was made, and checked to still be no symlink), instead of one per component of the
    /// whole path. Every tool call resolves its paths through here.
    fn canonical(&self, lexical: &Path) -> PathBuf {
        self.roots
            .iter()
            .find_map(|root| below_root(root, lexical))
            .unwrap_or_else(|| canonicalize_existing_prefix(lexical))
    }

    /// Whether an absolute, resolved path is hidden by a `.kodikignore` at a root or in any
    /// folder between the root and the path. Gitignore semantics: deeper files win, `!` negates,
    /// and an ignored folder hides everything below it.
    pub fn is_ignored(&self, resolved: &Path) -> bool {
        self.is_ignored_with(resolved, &mut |dir: &Path| self.ignore_matcher(dir))
    }

    /// [`is_ignored`](Self::is_ignored) for many paths at once (the files of a reference
    /// search, say): each folder's `.kodikignore` is looked up once for all of them instead of
    /// once per path. Keep it for one answer only; a rule file changed meanwhile is seen by
    /// the next.
    pub fn ignore_checks(&self) -> IgnoreChecks<'_> {
        IgnoreChecks { ws: self, matchers: HashMap::new() }
    }

    fn is_ignored_with(&self, resolved: &Path, matcher: &mut impl FnMut(&Path) -> Option<Arc<Gitignore>>) -> bool {
        let Some(root) = self.roots.iter().find(|r| resolved.starts_with(r)) else {
            return false;
        };
        let Ok(rel) = resolved.strip_prefix(root) else {
            return false;
        };
        let mut matchers: Vec<Arc<Gitignore>> = Vec::new();
        let mut dir = root.clone();
        if let Some(m) = matcher(&dir) {
            matchers.push(m);
        }
        let comps: Vec<_> = rel.components().collect();
        for (i, comp) in comps.iter().enumerate() {
            let candidate = dir.join(comp);
            let is_last = i + 1 == comps.len();
            let ignored = if !is_last {
                verdict(&matchers, &candidate, true)
            } else {
                // Whether the path is a folder matters only to rules ending in `/`: asking the
                // file system (a `stat` on every check of every tool) only when the two
                // answers differ.
                let as_file = verdict(&matchers, &candidate, false);
                if as_file == verdict(&matchers, &candidate, true) {
                    as_file
                } else {
                    verdict(&matchers, &candidate, candidate.is_dir())
                }
            };
            if ignored {
                return true;
            }
            if !is_last {
                dir = candidate;
                if let Some(m) = matcher(&dir) {
                    matchers.push(m);
                }
            }
        }
        false
    }

    /// A directory walker over `dir` that honours `.gitignore`, `.ignore` and `.kodikignore`
    /// (the same rules as [`is_ignored`](Self::is_ignored)). Hidden files are skipped.
    ///
    /// Ignore files in folders above `dir` apply as git applies them: `.gitignore` and `.ignore`
    /// up to the top of the git repository `dir` is in — none when `dir` is a repository's top
    /// itself, and none above the workspace root when there is no repository — and
    /// `.kodikignore` up to the workspace root. (The `ignore` crate's own lookup, without
    /// requiring git, read every `.gitignore` up to `/`: a home folder's dotfiles repository
    /// ignoring `*` hid a whole project cloned below it.) Inside a repository a nested
    /// repository is a boundary, as for git and ripgrep.
    ///
    /// The `.kodikignore` files above `dir` win over every `.gitignore` and `.ignore`, also over
    /// a `!` exception in one found during the walk, as [`is_ignored`](Self::is_ignored) has it:
    /// the walker's entry filter holds them. A caller that sets its own
    /// [`filter_entry`](ignore::WalkBuilder::filter_entry) replaces that filter: use
    /// [`walker_with`](Self::walker_with) instead.
    pub fn walker(&self, dir: &Path) -> ignore::WalkBuilder {
        self.walker_with(dir, |_| true)
    }

    /// [`walker`](Self::walker) with the caller's own entry filter as well (`false` leaves the
    /// entry out, and a folder's whole contents with it).
    pub fn walker_with<F>(&self, dir: &Path, filter: F) -> ignore::WalkBuilder
    where
        F: Fn(&ignore::DirEntry) -> bool + Send + Sync + 'static,
    {
        let mut b = self.walker_unguarded(dir);
        let guard = WalkGuard { ws: self.clone(), above: self.kodik_rules_above(dir) };
        b.filter_entry(move |e| filter(e) && !guard.hides(e));
        b
    }

    /// The `.kodikignore` rules of the folders above `dir` up to its root, outermost first (an
    /// unreadable one hides everything, as in [`is_ignored`](Self::is_ignored)).
    fn kodik_rules_above(&self, dir: &Path) -> Vec<Arc<Gitignore>> {
        let Some(root) = self.roots.iter().find(|r| dir.starts_with(r)) else {
            return Vec::new();
        };
        let mut rules: Vec<_> = dir
            .ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(root))
            .filter_map(|d| self.ignore_matcher(d))
            .collect();
        rules.reverse();
        rules
    }

    fn walker_unguarded(&self, dir: &Path) -> ignore::WalkBuilder {
        let mut b = ignore::WalkBuilder::new(dir);
        let root = self.roots.iter().find(|r| dir.starts_with(r));
        // Outermost first: later rules win (`add_ignore`'s order), so deeper files override.
        let mut git_rules = Vec::new();
        let mut in_repo = dir.join(".git").exists();
        if !in_repo {
            for d in dir.ancestors().skip(1) {
                git_rules.extend([(d, d.join(".gitignore")), (d, d.join(".ignore"))]);
                if d.join(".git").exists() {
                    git_rules.push((d, d.join(".git/info/exclude")));
                    in_repo = true;
                    break;
                }
            }
            if !in_repo {
                git_rules.retain(|(d, _)| root.is_some_and(|r| d.starts_with(r)));
            }
        }
        let kodik_rules: Vec<(&Path, PathBuf)> = match root {
            Some(root) => {
                dir.ancestors().skip(1).take_while(|d| d.starts_with(root)).map(|d| (d, d.join(IGNORE_FILE))).collect()
            }
            None => Vec::new(),
        };
        // In a repository ignore rules stop at nested repositories (`require_git` is what makes
        // the crate notice them); without one, kodik still honours `.gitignore` files.
        b.add_custom_ignore_filename(IGNORE_FILE).require_git(in_repo).parents(false);
        // `.kodikignore` rules come last so they win over every git rule above `dir`. The crate
        // checks rules added here after every ignore file it finds during the walk, so a `!`
        // exception in one of those would still win: the walk guard holds them against that.
        for (folder, file) in git_rules.iter().rev().chain(kodik_rules.iter().rev()) {
            if file.is_file() {
                // `add_ignore` roots the file's patterns at the walker's current folder: root
                // them at the folder the file is for, so `/build` or `src/gen/` mean what they say.
                b.current_dir(folder);
                b.add_ignore(file);
            }
        }
        if let Ok(cwd) = std::env::current_dir() {
            // Global git excludes (`core.excludesFile`) match relative to it, as before.
            b.current_dir(cwd);
        }
        b
    }

    /// `path` shown relative to its root when inside one, else as given.
    pub fn display(&self, path: &Path) -> String {
        for r in self.roots.iter() {
            if let Ok(rel) = path.strip_prefix(r) {
                let s = rel.display().to_string();
                return if s.is_empty() { ".".into() } else { s };
            }
        }
        path.display().to_string()
    }

    fn roots_list(&self) -> String {
        self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    }

    fn ignore_matcher(&self, dir: &Path) -> Option<Arc<Gitignore>> {
        use std::os::unix::fs::MetadataExt as _;
        let file = dir.join(IGNORE_FILE);
        let meta = std::fs::metadata(&file).ok();
        let (modified, changed, len) = match &meta {
            Some(m) if m.is_file() => (m.modified().ok(), (m.ctime(), m.ctime_nsec()), m.len()),
            _ => (None, (0, 0), 0),
        };
        let mut cache = self.ignores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache.get(dir)
            && c.modified == modified
            && c.changed == changed
            && c.len == len
        {
            return c.matcher.clone();
        }
        let mut unreadable = None;
        let matcher = if meta.as_ref().is_some_and(|m| m.is_file()) {
            let mut b = GitignoreBuilder::new(dir);
            if let Err(e) = std::fs::File::open(&file) {
                // Fail closed (G16): rules that cannot be read might hide anything in the folder.
                unreadable = Some(e.kind().to_string());
                let _ = b.add_line(None, "*");
            } else {
                // A malformed line is skipped, as git does; the rest of the file still applies.
                let _ = b.add(&file);
            }
            b.build().ok().map(Arc::new)
        } else {
            None
        };
        let entry = CachedIgnore { modified, changed, len, matcher: matcher.clone(), unreadable };
        cache.insert(dir.to_path_buf(), entry);
        matcher
    }

    /// The error for a path [`is_ignored`](Self::is_ignored) hides: [`PathError::Ignored`], or
    /// [`PathError::IgnoreFileUnreadable`] when an unreadable `.kodikignore` on its way hides it.
    fn ignored_error(&self, resolved: &Path) -> PathError {
        let cache = self.ignores.lock().unwrap_or_else(|p| p.into_inner());
        let unreadable = resolved.ancestors().skip(1).find_map(|d| {
            let reason = cache.get(d)?.unreadable.as_ref()?;
            Some((d, reason.clone()))
        });
        match unreadable {
            Some((dir, reason)) => PathError::IgnoreFileUnreadable {
                path: self.display(resolved),
                ignore_file: self.display(&dir.join(IGNORE_FILE)),
                reason,
            },
            None => PathError::Ignored(self.display(resolved)),
        }
    }
}

/// The `.kodikignore` rules above a walk's start, checked on every entry the walk meets: the
/// `ignore` crate lets any ignore file found during the walk override rules given to it up
/// front, so a `!secret.txt` in a subfolder's `.gitignore` showed what a `.kodikignore` above
/// the searched folder hides (G16).
struct WalkGuard {
    ws: Workspace,
    /// Outermost first.
    above: Vec<Arc<Gitignore>>,
}

impl WalkGuard {
    fn hides(&self, entry: &ignore::DirEntry) -> bool {
        if self.above.is_empty() {
            return false;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        // Only a `.kodikignore` inside the walk can make an exception to these rules: the
        // whole check (rare, as hidden entries are) says whether one does.
        verdict(&self.above, entry.path(), is_dir) && self.ws.is_ignored(entry.path())
    }
}

/// Whether the deepest matcher with an opinion on `path` ignores it (gitignore semantics: a
/// deeper file's rule, or its `!` exception, wins over a shallower one).
fn verdict(matchers: &[Arc<Gitignore>], path: &Path, is_dir: bool) -> bool {
    for m in matchers.iter().rev() {
        let v = m.matched(path, is_dir);
        if v.is_ignore() {
            return true;
        }
        if v.is_whitelist() {
            return false;
        }
    }
    false
}

/// Checks many paths against `.kodikignore` with each folder's rules looked up once; see
/// [`Workspace::ignore_checks`].
pub struct IgnoreChecks<'a> {
    ws: &'a Workspace,
    /// The folders looked up so far and their rules.
    matchers: HashMap<PathBuf, Option<Arc<Gitignore>>>,
}

impl IgnoreChecks<'_> {
    /// Whether an absolute, resolved path is hidden by `.kodikignore` (as
    /// [`Workspace::is_ignored`]).
    pub fn is_ignored(&mut self, resolved: &Path) -> bool {
        let Self { ws, matchers } = self;
        ws.is_ignored_with(resolved, &mut |dir: &Path| match matchers.get(dir) {
            Some(m) => m.clone(),
            None => {
                let m = ws.ignore_matcher(dir);
                matchers.insert(dir.to_path_buf(), m.clone());
                m
            }
        })
    }
}

/// Keeps git from seeing `dir`, a folder of kodik's own state inside a project (transcripts,
/// the conversation store, a language server's index) that a model's `git add -A` must not
/// commit: creates `dir` and in it a `.gitignore` of `*` (which hides the file itself too),
/// its first line a comment saying what the folder holds (`what`). A `.gitignore` already
/// there is the user's or an earlier run's and is left as it is; tracked files are untouched.
pub fn hide_from_git(dir: &Path, what: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let ignore = dir.join(".gitignore");
    if ignore.symlink_metadata().is_ok() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    // `create_new`: a file that appeared meanwhile is someone else's, never overwritten.
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&ignore) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    };
    file.write_all(format!("# {}\n*\n", what.replace('\n', " ")).as_bytes())
}

/// `p` with its backslashes removed when every one of them escapes a character a shell would
/// otherwise split or expand (`My\\ Docs`, `a\\(1\\).txt`), as a model copying a path from a
/// shell command writes it; `None` when any backslash stands before a plain character (a
/// Windows separator, `src\\main.rs`).
fn without_shell_escapes(p: &str) -> Option<String> {
    const ESCAPED: &str = " ()[]{}'\"&;$!#*?|<>`~,=";
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let next = chars.next().filter(|n| ESCAPED.contains(*n))?;
            out.push(next);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn looks_windows(p: &str) -> bool {
    let b = p.as_bytes();
    p.contains('\\') || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
}

/// Names in `names` close to `name`, closest first. Edit distance rather than the Jaro-Winkler
/// score tool names use ([`crate::registry::closest`]): a transposition in a short name (`scr`
/// for `src`) counts as one slip, and a shared extension alone (`nope.txt`, `a.txt`) is no match.
fn closest_names<'a>(name: &str, names: &'a [String]) -> Vec<&'a str> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .iter()
        .filter_map(|n| {
            let nl = n.to_lowercase();
            let mut score = strsim::normalized_damerau_levenshtein(&lower, &nl);
            // `main` for `main.rs`, `readme` for `README.md`: the model left out the extension.
            if lower.len() >= 3 && nl.starts_with(&lower) && nl[lower.len()..].starts_with('.') {
                score = score.max(0.9);
            }
            (score >= 0.6).then_some((score, n.as_str()))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(6).map(|(_, n)| n).collect()
}

/// Removes `.` and resolves `..` without touching the file system.
fn normalize_lexically(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `lexical` canonicalized when it lies under `root` and neither `root` nor any existing
/// component below it is a symlink; `None` otherwise (or when a component cannot be checked),
/// and the caller then canonicalizes the whole path.
fn below_root(root: &Path, lexical: &Path) -> Option<PathBuf> {
    let rel = lexical.strip_prefix(root).ok()?;
    let is_plain = |p: &Path| match std::fs::read_link(p) {
        // `EINVAL`: it exists and is not a symlink.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Some(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(false),
        _ => None,
    };
    if !is_plain(root)? {
        return None;
    }
    let mut out = root.to_path_buf();
    let mut parts = rel.components();
    while let Some(part) = parts.next() {
        out.push(part);
        if !is_plain(&out)? {
            // The longest existing prefix ends here; the rest is appended as written.
            out.extend(parts);
            return Some(out);
        }
    }
    Some(out)
}

/// Canonicalizes the longest existing ancestor (following symlinks) and appends the rest.
fn canonicalize_existing_prefix(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// `path` with each missing component replaced by the one entry of its folder that is the same
/// name in another Unicode normalization form (NFC against NFD); `None` when no component was
/// replaced. A component that several entries match stays as given (which one was meant cannot
/// be told).
fn look_alike(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    use unicode_normalization::UnicodeNormalization as _;
    let mut out = PathBuf::new();
    let mut replaced = false;
    let mut missing = false;
    for component in path.components() {
        let Component::Normal(name) = component else {
            out.push(component);
            continue;
        };
        if !missing && out.join(name).symlink_metadata().is_ok() {
            out.push(name);
            continue;
        }
        missing = true;
        let wanted = name.to_str().filter(|n| !n.is_ascii()).map(|n| n.nfc().collect::<String>());
        let twin = wanted.and_then(|wanted| {
            let entries = std::fs::read_dir(&out).ok()?;
            let mut same = entries
                .flatten()
                .map(|e| e.file_name())
                .filter(|e| e.to_str().is_some_and(|e| !e.is_ascii() && e.nfc().eq(wanted.chars())));
            let first = same.next()?;
            same.next().is_none().then_some(first)
        });
        match twin {
            Some(twin) => {
                out.push(twin);
                replaced = true;
                // The twin exists: what follows it may exist too.
                missing = false;
            }
            None => out.push(name),
        }
    }
    replaced.then_some(out)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let w = Workspace::new(dir.path()).unwrap();
        (dir, w)
    }

    #[test]
    fn g16_dotdot_escaping_the_root_is_refused() {
        let (_d, w) = ws();
        let err = w.resolve("src/../../etc/passwd").unwrap_err();
        assert!(matches!(err, PathError::OutsideWorkspace { .. }), "{err}");
        assert!(err.to_string().contains("outside the workspace"));
        assert!(w.resolve("src/../a.txt").is_ok());
    }

    #[test]
    fn g16_absolute_path_outside_is_refused() {
        let (_d, w) = ws();
        assert!(matches!(w.resolve("/etc/hostname"), Err(PathError::OutsideWorkspace { .. })));
        let inside = w.primary_root().join("a.txt");
        assert_eq!(w.resolve(&inside).unwrap(), inside);
    }

    #[test]
    fn g16_symlink_out_of_the_root_is_refused() {
        let (d, w) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("link")).unwrap();
        assert!(matches!(w.resolve("link/secret"), Err(PathError::OutsideWorkspace { .. })));
        // A file that does not exist yet below the escaping link is refused too.
        assert!(matches!(w.resolve("link/new/file.txt"), Err(PathError::OutsideWorkspace { .. })));
    }

    #[test]
    fn g2_five_spellings_of_one_file_are_one_resource() {
        let (d, w) = ws();
        std::os::unix::fs::symlink(d.path().join("a.txt"), d.path().join("alias.txt")).unwrap();
        let abs = w.primary_root().join("a.txt");
        let keys = ["a.txt", "./a.txt", "src/../a.txt", abs.to_str().unwrap(), "alias.txt"].map(|p| w.resource(p));
        assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
        assert_ne!(w.resource("src/a.txt"), keys[0]);
    }

    #[test]
    fn g16_ignored_file_and_nested_negation() {
        let (d, w) = ws();
        std::fs::write(d.path().join(".kodikignore"), "*.secret\nbuild/\n").unwrap();
        std::fs::write(d.path().join("src/.kodikignore"), "!keep.secret\n").unwrap();
        std::fs::write(d.path().join("x.secret"), "").unwrap();
        std::fs::write(d.path().join("src/keep.secret"), "").unwrap();
        std::fs::write(d.path().join("src/other.secret"), "").unwrap();
        std::fs::create_dir_all(d.path().join("build/out")).unwrap();

        let err = w.check("x.secret").unwrap_err();
        assert!(matches!(err, PathError::Ignored(_)), "{err}");
        assert!(err.to_string().contains(".kodikignore"));
        assert!(w.check("src/keep.secret").is_ok(), "nested negation re-includes");
        assert!(w.check("src/other.secret").is_err());
        // Everything below an ignored folder is ignored, existing or not.
        assert!(w.check("build/out/new.rs").is_err());
        assert!(w.check("a.txt").is_ok());
    }

    #[test]
    fn g16_a_rule_for_folders_hides_the_folder_but_not_a_file_of_that_name() {
        let (d, w) = ws();
        std::fs::write(d.path().join(".kodikignore"), "cache/\n").unwrap();
        std::fs::create_dir_all(d.path().join("cache")).unwrap();
        std::fs::write(d.path().join("src/cache"), "a file").unwrap();
        assert!(matches!(w.check("cache"), Err(PathError::Ignored(_))));
        assert!(w.check("cache/new.txt").is_err());
        assert!(w.check("src/cache").is_ok(), "a file named like the folder rule is not hidden");
    }

    #[test]
    fn g16_a_root_later_replaced_by_a_symlink_to_elsewhere_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("proj");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        let w = Workspace::new(&root).unwrap();
        assert!(w.resolve("a.txt").is_ok());
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("a.txt"), "not the project's").unwrap();
        std::fs::rename(&root, d.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, &root).unwrap();
        assert!(matches!(w.resolve("a.txt"), Err(PathError::OutsideWorkspace { .. })));
    }

    #[test]
    fn g16_checking_many_paths_at_once_answers_as_one_at_a_time() {
        let (d, w) = ws();
        std::fs::write(d.path().join(".kodikignore"), "*.secret\nbuild/\n").unwrap();
        std::fs::write(d.path().join("src/.kodikignore"), "!keep.secret\n").unwrap();
        std::fs::create_dir_all(d.path().join("build")).unwrap();
        let paths = ["x.secret", "src/keep.secret", "src/other.secret", "build/a.rs", "src/deep/a.rs", "a.txt"]
            .map(|p| w.primary_root().join(p));
        let mut checks = w.ignore_checks();
        let batch: Vec<bool> = paths.iter().map(|p| checks.is_ignored(p)).collect();
        let single: Vec<bool> = paths.iter().map(|p| w.is_ignored(p)).collect();
        assert_eq!(batch, single);
        assert_eq!(batch, [true, false, true, true, false, false]);
        // A rule added afterwards is seen by the next batch.
        std::fs::write(d.path().join(".kodikignore"), "*.txt\n").unwrap();
        assert!(w.ignore_checks().is_ignored(&paths[5]));
    }

    #[test]
    fn g16_ignore_file_changes_are_seen() {
        let (d, w) = ws();
        assert!(w.check("a.txt").is_ok());
        std::fs::write(d.path().join(".kodikignore"), "a.txt\n").unwrap();
        assert!(w.check("a.txt").is_err());
    }

    /// A name stored decomposed (`e` + U+0301, as macOS writes it) looks the same as the
    /// precomposed one the model types: both name the one file, so reads find it and writes do
    /// not make a look-alike twin (G2: one file, one resource).
    #[test]
    fn g2_a_name_typed_in_another_unicode_form_resolves_to_the_file_on_disk() {
        let (d, w) = ws();
        let (nfd, nfc) = ("Cafe\u{301}", "Caf\u{e9}");
        std::fs::create_dir(d.path().join(nfd)).unwrap();
        std::fs::write(d.path().join(nfd).join(format!("{nfd}.txt")), "x").unwrap();
        let on_disk = w.resolve(format!("{nfd}/{nfd}.txt")).unwrap();
        assert_eq!(w.check_file(format!("{nfc}/{nfc}.txt")).unwrap(), on_disk);
        // A new file in the folder lands in the folder on disk, under the name given.
        let new = w.resolve(format!("{nfc}/new-{nfc}.txt")).unwrap();
        assert_eq!(new, on_disk.parent().unwrap().join(format!("new-{nfc}.txt")));
        assert_eq!(w.resource(format!("{nfc}/{nfc}.txt")), w.resource(format!("{nfd}/{nfd}.txt")));
        // When both forms exist, each name is its own file.
        std::fs::write(d.path().join(nfd).join(format!("{nfc}.txt")), "y").unwrap();
        assert_ne!(w.check_file(format!("{nfc}/{nfc}.txt")).unwrap(), on_disk);
        assert_eq!(w.check_file(format!("{nfd}/{nfd}.txt")).unwrap(), on_disk);
    }

    #[test]
    fn g16_walker_hides_ignored_files_including_rules_above_the_start() {
        let (d, w) = ws();
        std::fs::write(d.path().join(".kodikignore"), "*.log\n").unwrap();
        std::fs::write(d.path().join("src/deep/x.log"), "").unwrap();
        std::fs::write(d.path().join("src/deep/x.rs"), "").unwrap();
        let start = w.resolve("src").unwrap();
        let names: Vec<String> = w
            .walker(&start)
            .build()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.rs".to_string()]);
    }

    #[test]
    fn e10_a_shell_escaped_path_gets_the_name_without_backslashes_not_a_windows_hint() {
        let (d, w) = ws();
        std::fs::create_dir(d.path().join("My Docs")).unwrap();
        let err = w.check_file("My\\ Docs/a\\(1\\).txt").unwrap_err();
        assert!(matches!(err, PathError::ShellEscaped { .. }), "{err}");
        assert!(err.to_string().contains("without backslashes: `My Docs/a(1).txt`"), "{err}");
        // A backslash before a plain letter is still a Windows separator.
        assert!(matches!(w.resolve("My\\ Docs\\a.txt"), Err(PathError::WindowsPath { .. })));
        // A name that really has an escaped-looking backslash is used as it is.
        std::fs::write(d.path().join("odd\\ name.txt"), "x").unwrap();
        assert!(w.check_file("odd\\ name.txt").is_ok());
    }

    #[test]
    fn e10_a_symlink_to_nothing_is_named_with_its_target_not_suggested_as_itself() {
        let (d, w) = ws();
        std::os::unix::fs::symlink("nothere.txt", d.path().join("link.txt")).unwrap();
        let err = w.check_file("link.txt").unwrap_err();
        assert!(matches!(err, PathError::DanglingSymlink { .. }), "{err}");
        assert!(
            err.to_string().starts_with("`link.txt` is a symbolic link to `nothere.txt`, which does not exist"),
            "{err}"
        );
        std::os::unix::fs::symlink("/nonexistent/elsewhere", d.path().join("far.txt")).unwrap();
        assert!(w.check_file("far.txt").unwrap_err().to_string().contains("to `/nonexistent/elsewhere`"));
    }

    #[test]
    fn e10_windows_path_with_tab_gets_a_slash_hint() {
        let (_d, w) = ws();
        let err = w.resolve("C:\tmp\\file.txt").unwrap_err();
        assert!(matches!(err, PathError::ControlCharacter(_)));
        assert!(err.to_string().contains("forward slashes"));
    }

    #[test]
    fn e10_windows_paths_without_control_characters_are_refused_unless_they_exist() {
        let (d, w) = ws();
        for (path, suggestion) in [("C:\\temp\\new.txt", "temp/new.txt"), ("src\\new.txt", "src/new.txt")] {
            let err = w.resolve(path).unwrap_err();
            assert!(matches!(err, PathError::WindowsPath { .. }), "{err}");
            assert!(
                err.to_string()
                    .contains(&format!("forward slashes, relative to the workspace or absolute (e.g. `{suggestion}`)")),
                "{err}"
            );
        }
        assert!(matches!(w.resolve("C:/temp/x.txt"), Err(PathError::WindowsPath { .. })));
        // A file whose name has a backslash is still reachable.
        std::fs::write(d.path().join("odd\\name.txt"), "x").unwrap();
        assert!(w.check_file("odd\\name.txt").is_ok());
        assert!(w.resolve("src/new.txt").is_ok());
    }

    #[test]
    fn e10_folder_where_file_expected() {
        let (_d, w) = ws();
        assert!(matches!(w.check_file("src"), Err(PathError::IsDirectory(_))));
        assert!(matches!(w.check_file("nope.txt"), Err(PathError::NotFound(_))));
    }

    #[test]
    fn g16_missing_path_suggests_close_existing_names_but_never_ignored_ones() {
        let (_d, w) = ws();
        let root = w.primary_root().to_path_buf();
        std::fs::write(root.join("a.txt"), "x").unwrap();
        std::fs::write(root.join("a.secret"), "x").unwrap();
        std::fs::write(root.join(".kodikignore"), "*.secret\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "x").unwrap();
        let err = w.check_file("a.tx").unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(err.to_string(), "`a.tx` does not exist; did you mean: a.txt?");
        let err = w.check_file("scr/main.rs").unwrap_err();
        assert_eq!(err.to_string(), "`scr/main.rs` does not exist; did you mean: src/main.rs?");
        let err = w.check_file("a.secre").unwrap_err();
        assert!(!err.to_string().contains("a.secret"), "{err}");
        assert!(matches!(w.check_file("zzzzzz.md"), Err(PathError::NotFound(_))));
    }

    #[test]
    fn second_root_is_usable_by_absolute_path() {
        let (_d, w1) = ws();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("b.txt"), "b").unwrap();
        let w = Workspace::with_roots([w1.primary_root().to_path_buf(), other.path().to_path_buf()]).unwrap();
        assert!(w.check_file(other.path().join("b.txt")).is_ok());
    }
}
