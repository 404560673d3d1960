//! Which server speaks for which files, and the manager's timing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

/// One language server: how to start it and which files it serves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A short name shown in results (`pyright`).
    pub name: String,
    /// The program, found on `PATH` unless absolute.
    pub command: PathBuf,
    /// Its arguments (`--stdio`).
    pub args: Vec<String>,
    /// File extensions (without the dot) and the LSP `languageId` each is opened as.
    pub extensions: Vec<(String, String)>,
    /// Files or folders whose presence marks a project root, nearest first wins.
    pub root_markers: Vec<String>,
    /// `initializationOptions` sent with `initialize`.
    pub initialization_options: Value,
    /// Settings answered to `workspace/configuration`, looked up by dotted section.
    pub settings: Value,
    /// Adds what depends on the project to [`ServerConfig::settings`] before the server starts
    /// there (pyright: the project's own virtualenv).
    pub settings_for_root: Option<fn(&Path, &mut Value)>,
    /// `window/logMessage` texts (substrings), any of which says the scan of the project is
    /// done; until one arrives the server counts as indexing (pyright: "Found 12 source files",
    /// or "No source files found."). Empty for servers that report `$/progress` instead.
    pub ready_log: Vec<String>,
    /// For servers that index in the background after the first file opens (clangd): if a
    /// `$/progress` begins within this long after start, the server counts as indexing until
    /// that work ends.
    pub first_progress_grace: Option<Duration>,
    /// When not empty, [`ServerConfig::first_progress_grace`] applies only to a project root
    /// holding one of these files (typescript-language-server reports progress while it loads
    /// a `tsconfig.json` project, none for loose files).
    pub grace_markers: Vec<String>,
    /// This server's quiet window for pushed diagnostics, instead of
    /// [`LspConfig::diagnostics_quiet`]: servers that publish without a document version and
    /// after a debounce (typescript-language-server) need a longer one, or a late publish for
    /// the previous version would pass for the current one.
    pub diagnostics_quiet: Option<Duration>,
    /// The server rebuilds every open document and publishes its diagnostics again when any
    /// document is saved (clangd): after files change on disk, an open document's diagnostics
    /// are then awaited from a publish after that save, not taken from before it.
    pub republishes_on_save: bool,
    /// The server puts the document's version on every publish for an open document (gopls):
    /// a publish without one was computed from the file on disk, before the document was
    /// opened or changed, and is never taken for the open document's diagnostics. gopls sends
    /// such a late empty publish after a change on a loaded machine; taken as current, it made
    /// an edit that broke the build look clean.
    pub versions_open_documents: bool,
    /// Extensions (without the dot) of the files other files can depend on, when only some
    /// can (C and C++: headers; a `.c` file is no part of another file's build). A change to
    /// any other file leaves other open documents' diagnostics as they were. Empty: any file
    /// of the server's language may be a dependency.
    pub dependency_extensions: Vec<String>,
    /// The server is typescript-language-server, which passes requests on to tsserver
    /// (`typescript.tsserverRequest`): diagnostics are asked of tsserver instead of awaited as
    /// pushes (see `Server::diagnostics`), and after files of its language are created or
    /// deleted on disk tsserver is told to reload its projects before the next query (it
    /// notices them itself only after its own delayed rescan: references and callers
    /// missed a file just created or moved).
    pub tsserver_requests: bool,
    /// Runs on the project root before the server starts there: for servers that write files
    /// of their own into the user's project (clangd's background index), to keep them out of
    /// `git status` and a model's `git add -A`.
    pub before_start: Option<fn(&Path)>,
    /// Each of this server's projects sees only its own files (pyright, tsserver: a monorepo's
    /// packages each get a server), so `references` and `incoming_calls` also ask the servers
    /// of the workspace's other projects and merge their answers. Off for servers that load
    /// the whole build from any member (rust-analyzer the cargo workspace, gopls the module).
    pub sibling_projects: bool,
    /// For servers that load a whole build from one root (rust-analyzer a cargo workspace,
    /// gopls a `go.work`): called with a folder at or above the project root found by
    /// [`ServerConfig::root_markers`] (never above the workspace root) and that project root,
    /// it says whether the folder is the root of the build the project belongs to. The nearest
    /// such folder becomes the root, so the build's members share one server: one
    /// rust-analyzer per crate of a 20-crate workspace would each load and index all of it.
    pub build_root: Option<fn(&Path, &Path) -> bool>,
}

impl ServerConfig {
    /// A server started as `command args…` for files with these `(extension, languageId)` pairs.
    pub fn new(name: &str, command: impl Into<PathBuf>, args: &[&str], extensions: &[(&str, &str)]) -> Self {
        Self {
            name: name.to_owned(),
            command: command.into(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            extensions: extensions.iter().map(|(e, l)| ((*e).to_owned(), (*l).to_owned())).collect(),
            root_markers: Vec::new(),
            initialization_options: Value::Null,
            settings: Value::Null,
            settings_for_root: None,
            ready_log: Vec::new(),
            first_progress_grace: None,
            grace_markers: Vec::new(),
            diagnostics_quiet: None,
            republishes_on_save: false,
            versions_open_documents: false,
            dependency_extensions: Vec::new(),
            tsserver_requests: false,
            before_start: None,
            sibling_projects: false,
            build_root: None,
        }
    }

    /// Sets the root markers.
    pub fn root_markers(mut self, markers: &[&str]) -> Self {
        self.root_markers = markers.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Sets [`ServerConfig::build_root`].
    pub fn build_root(mut self, is_build_root: fn(&Path, &Path) -> bool) -> Self {
        self.build_root = Some(is_build_root);
        self
    }

    /// The project root of `file` for this server: the nearest folder holding one of
    /// [`ServerConfig::root_markers`] ([`find_root`]), or the root of the build it belongs to
    /// when the server loads whole builds ([`ServerConfig::build_root`]).
    pub fn project_root(&self, file: &Path, roots: &[PathBuf]) -> PathBuf {
        let project = find_root(file, &self.root_markers, roots);
        let Some(is_build_root) = self.build_root else { return project };
        let Some(ws_root) = roots.iter().filter(|r| project.starts_with(r)).max_by_key(|r| r.components().count())
        else {
            return project;
        };
        project
            .ancestors()
            .take_while(|d| d.starts_with(ws_root))
            .find(|d| is_build_root(d, &project))
            .map_or(project.clone(), Path::to_path_buf)
    }

    /// Sets the settings answered to `workspace/configuration`.
    pub fn settings(mut self, settings: Value) -> Self {
        self.settings = settings;
        self
    }

    /// Also asks this server's other projects in the workspace for references and incoming
    /// calls (see [`ServerConfig::sibling_projects`]).
    pub fn sibling_projects(mut self) -> Self {
        self.sibling_projects = true;
        self
    }

    /// The settings for a server started at `root` (see [`ServerConfig::settings_for_root`]).
    pub fn settings_for(&self, root: &Path) -> Value {
        let mut settings = self.settings.clone();
        if let Some(add) = self.settings_for_root {
            add(root, &mut settings);
        }
        settings
    }

    /// Adds a text to [`ServerConfig::ready_log`].
    pub fn ready_log(mut self, text: &str) -> Self {
        self.ready_log.push(text.to_owned());
        self
    }

    /// Sets `initializationOptions`.
    pub fn initialization_options(mut self, options: Value) -> Self {
        self.initialization_options = options;
        self
    }

    /// The `languageId` of `path`, when this server serves its extension.
    pub fn language_id(&self, path: &Path) -> Option<&str> {
        let ext = path.extension()?.to_str()?;
        self.extensions.iter().find(|(e, _)| e == ext).map(|(_, l)| l.as_str())
    }

    /// Whether `path` may be a file other files depend on (see
    /// [`ServerConfig::dependency_extensions`]).
    pub fn may_be_included(&self, path: &Path) -> bool {
        self.dependency_extensions.is_empty()
            || path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| self.dependency_extensions.iter().any(|d| d == e))
    }

    /// The program's full path when it can be run (absolute and present, or found on `PATH`).
    /// A rustup proxy (`~/.cargo/bin/rust-analyzer` with the component not installed) is not
    /// the program: it only says "Unknown binary", so the search goes on down `PATH`, and with
    /// nothing else found the server counts as not installed rather than failing every start.
    pub fn resolve_program(&self) -> Option<PathBuf> {
        if self.command.components().count() > 1 {
            return self.command.is_file().then(|| self.command.clone());
        }
        resolve_on(&std::env::var_os("PATH")?, &self.command)
    }
}

/// The first `command` in the folders of `path_var` (a `PATH` value) that can be run.
fn resolve_on(path_var: &std::ffi::OsStr, command: &Path) -> Option<PathBuf> {
    std::env::split_paths(path_var).map(|d| d.join(command)).find(|p| p.is_file() && !is_idle_rustup_proxy(p))
}

/// How long a rustup proxy may take to say whether its tool is installed.
const PROXY_CHECK: Duration = Duration::from_secs(5);

/// Whether `program` is rustup standing in for a tool whose component is not installed: a link
/// to the `rustup` beside it (as rustup installs its proxies) whose `--version` fails. Asked
/// only of such links, so other servers start no extra process.
fn is_idle_rustup_proxy(program: &Path) -> bool {
    let Some(dir) = program.parent() else { return false };
    let rustup = dir.join("rustup");
    let links_to_rustup = match std::fs::read_link(program) {
        Ok(target) => target.file_name().is_some_and(|n| n == "rustup"),
        // A hard link: the same file as `rustup`.
        Err(_) => {
            use std::os::unix::fs::MetadataExt as _;
            match (std::fs::metadata(program), std::fs::metadata(&rustup)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            }
        }
    };
    if !links_to_rustup {
        return false;
    }
    let spawn = || {
        std::process::Command::new(program)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
    };
    let mut child = spawn();
    // A file just written may still be open in a process another thread is forking.
    for _ in 0..20 {
        match &child {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(10));
                child = spawn();
            }
            _ => break,
        }
    }
    let Ok(mut child) = child else { return true };
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return !status.success(),
            Ok(None) if started.elapsed() < PROXY_CHECK => std::thread::sleep(Duration::from_millis(5)),
            // Too slow to tell: let the start decide (and say why if it fails).
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// The manager's configuration: servers in order of preference, and its waits.
#[derive(Debug, Clone)]
pub struct LspConfig {
    /// Candidate servers; for a file, the first one that serves its extension and is installed
    /// is used.
    pub servers: Vec<ServerConfig>,
    /// Deadline of one request; past it the request is cancelled (`$/cancelRequest`).
    pub request_timeout: Duration,
    /// Deadline of `initialize`.
    pub start_timeout: Duration,
    /// Pushed diagnostics count as settled after this long without a newer publish and with no
    /// progress open.
    pub diagnostics_quiet: Duration,
    /// Diagnostics are answered after this long at most, marked possibly stale.
    pub diagnostics_cap: Duration,
    /// How long an empty answer from a server that is still indexing is retried.
    pub indexing_wait: Duration,
    /// Restarts allowed per server within [`LspConfig::restart_window`] before it is given up.
    pub max_restarts: u32,
    /// See [`LspConfig::max_restarts`].
    pub restart_window: Duration,
    /// Whether what a warm call would look up again (path checks, open documents, source
    /// lines, the file's server) is kept between calls while inotify reports no change on
    /// its way (default). Off, every call looks at the disk as a first one would: for
    /// benchmarks, which compare the two in one run.
    pub keep_warm: bool,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self {
            servers: default_servers(),
            request_timeout: Duration::from_secs(30),
            start_timeout: Duration::from_secs(60),
            diagnostics_quiet: Duration::from_millis(150),
            diagnostics_cap: Duration::from_secs(10),
            indexing_wait: Duration::from_secs(10),
            max_restarts: 3,
            restart_window: Duration::from_secs(120),
            keep_warm: true,
        }
    }
}

impl LspConfig {
    /// Puts `server` before the defaults, so it wins for its extensions.
    pub fn with_server(mut self, server: ServerConfig) -> Self {
        self.servers.insert(0, server);
        self
    }

    /// The server for `path`: the first configured one that serves its extension and is
    /// installed. `Err` lists the names tried when some serve it but none is installed.
    pub fn server_for(&self, path: &Path) -> Result<(&ServerConfig, PathBuf), Vec<String>> {
        self.server_for_except(path, &|_| false)
    }

    /// [`LspConfig::server_for`], passing over servers for which `skip(name)` is true.
    pub fn server_for_except(
        &self,
        path: &Path,
        skip: &dyn Fn(&str) -> bool,
    ) -> Result<(&ServerConfig, PathBuf), Vec<String>> {
        self.server_for_with(path, skip, &ServerConfig::resolve_program)
    }

    /// [`LspConfig::server_for_except`] with programs found by `resolve` (the manager caches
    /// them: a `PATH` search is a dozen `stat`s, and it ran before every request).
    pub fn server_for_with(
        &self,
        path: &Path,
        skip: &dyn Fn(&str) -> bool,
        resolve: &dyn Fn(&ServerConfig) -> Option<PathBuf>,
    ) -> Result<(&ServerConfig, PathBuf), Vec<String>> {
        let mut tried = Vec::new();
        for s in self.servers.iter().filter(|s| s.language_id(path).is_some()) {
            if skip(&s.name) {
                tried.push(format!("{} (failed to start)", s.command.display()));
                continue;
            }
            match resolve(s) {
                Some(p) => return Ok((s, p)),
                None => tried.push(s.command.display().to_string()),
            }
        }
        Err(tried)
    }
}

const PY: &[(&str, &str)] = &[("py", "python"), ("pyi", "python")];
const TS: &[(&str, &str)] = &[
    ("ts", "typescript"),
    ("tsx", "typescriptreact"),
    ("mts", "typescript"),
    ("cts", "typescript"),
    ("js", "javascript"),
    ("jsx", "javascriptreact"),
    ("mjs", "javascript"),
    ("cjs", "javascript"),
];
const C: &[(&str, &str)] = &[
    ("c", "c"),
    ("h", "c"),
    ("cc", "cpp"),
    ("cpp", "cpp"),
    ("cxx", "cpp"),
    ("hpp", "cpp"),
    ("hh", "cpp"),
    ("hxx", "cpp"),
];

/// rust-analyzer, pyright (or basedpyright), typescript-language-server, clangd and gopls.
pub fn default_servers() -> Vec<ServerConfig> {
    let py_markers = ["pyproject.toml", "pyrightconfig.json", "setup.py", "setup.cfg", "requirements.txt"];
    // Open-file diagnostics are what read_lints and E9 ask for; `workspace` mode would make
    // pyright check every file of a large project on start.
    let py_settings = json!({"python": {"analysis": {"diagnosticMode": "openFilesOnly", "autoSearchPaths": true}}});
    vec![
        ServerConfig::new("rust-analyzer", "rust-analyzer", &[], &[("rs", "rust")])
            .root_markers(&["Cargo.toml"])
            .build_root(is_cargo_workspace_of),
        ServerConfig {
            settings_for_root: Some(project_python),
            ..ServerConfig::new("pyright", "pyright-langserver", &["--stdio"], PY)
        }
        .root_markers(&py_markers)
        .settings(py_settings.clone())
        // pyright answers references from the files it has found so far; these log lines
        // say the search is done. Not "source file" alone: "Searching for source files"
        // comes before the search, and under load a query then missed a new file.
        .ready_log("Found ")
        .ready_log("No source files found")
        .sibling_projects(),
        ServerConfig {
            settings_for_root: Some(project_python),
            ..ServerConfig::new("basedpyright", "basedpyright-langserver", &["--stdio"], PY)
        }
        .root_markers(&py_markers)
        .settings(py_settings)
        .ready_log("Found ")
        .ready_log("No source files found")
        .sibling_projects(),
        ServerConfig {
            diagnostics_quiet: Some(Duration::from_millis(600)),
            // tsserver loads the project after the first file opens, and its syntax-only
            // server answers meanwhile (references: the declaration alone; definition: the
            // import line): the first queries wait for that load's progress to end.
            first_progress_grace: Some(Duration::from_secs(10)),
            grace_markers: vec!["tsconfig.json".into(), "jsconfig.json".into()],
            sibling_projects: true,
            tsserver_requests: true,
            ..ServerConfig::new("typescript-language-server", "typescript-language-server", &["--stdio"], TS)
                .root_markers(&["tsconfig.json", "jsconfig.json", "package.json"])
        },
        // The background index is what finds references in files that are not open; clangd
        // keeps it in the project, so it is made invisible to git first.
        ServerConfig {
            republishes_on_save: true,
            dependency_extensions: ["h", "hh", "hpp", "hxx"].map(String::from).to_vec(),
            // References into other files come from the index, which clangd builds after the
            // first file opens: asked before that (a loaded machine), a header's declaration
            // was missing from the answer. The first queries wait for that indexing.
            first_progress_grace: Some(Duration::from_secs(5)),
            before_start: Some(hide_clangd_index),
            ..ServerConfig::new("clangd", "clangd", &["--background-index"], C).root_markers(&[
                "compile_commands.json",
                "compile_flags.txt",
                ".clangd",
            ])
        },
        ServerConfig {
            versions_open_documents: true,
            ..ServerConfig::new("gopls", "gopls", &[], &[("go", "go")])
                .root_markers(&["go.work", "go.mod"])
                .build_root(is_go_work_of)
        },
    ]
}

/// The project's own virtualenv (`.venv`, as uv and poetry make it, or `venv`: a folder with
/// `pyvenv.cfg` and `bin/python`) as pyright's `python.pythonPath`, unless the settings or a
/// `pyrightconfig.json` name an interpreter or virtualenv. Without it pyright uses the
/// `python` on `PATH`, and when kodik was started without the project's virtualenv activated,
/// every import of an installed package was an error ("Import … could not be resolved") and
/// the type errors involving those packages were missed.
pub fn project_python(root: &Path, settings: &mut Value) {
    let configured = std::fs::read_to_string(root.join("pyrightconfig.json"))
        .is_ok_and(|c| c.contains("\"venv") || c.contains("\"pythonPath"))
        || std::fs::read_to_string(root.join("pyproject.toml"))
            .is_ok_and(|c| c.contains("[tool.pyright]") && (c.contains("venv") || c.contains("pythonPath")));
    if configured || settings.pointer("/python/pythonPath").is_some() {
        return;
    }
    let Some(python) = [".venv", "venv"]
        .iter()
        .map(|v| root.join(v))
        .filter(|v| v.join("pyvenv.cfg").is_file())
        .map(|v| v.join("bin/python"))
        .find(|p| p.exists())
    else {
        return;
    };
    if !settings.is_object() {
        *settings = json!({});
    }
    if let Some(obj) = settings.as_object_mut() {
        let py = obj.entry("python").or_insert_with(|| json!({}));
        if let Some(py) = py.as_object_mut() {
            py.insert("pythonPath".into(), json!(python.display().to_string()));
        }
    }
}

/// Whether `folder`'s `Cargo.toml` declares the cargo workspace `project` (a package folder at
/// or below it) belongs to, as cargo decides: the nearest manifest above a package with a
/// `[workspace]` table whose `exclude` does not name it.
pub fn is_cargo_workspace_of(folder: &Path, project: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(folder.join("Cargo.toml")) else { return false };
    let declares =
        text.lines().map(str::trim_start).any(|l| l.starts_with("[workspace]") || l.starts_with("[workspace."));
    if !declares {
        return false;
    }
    let Some(rel) = relative(folder, project) else { return true };
    // The `[workspace]` table's `exclude = ["a", "tools/b"]`, possibly over several lines (a
    // `[package]`'s `exclude` lists files to leave out of the package instead): a package in an
    // excluded folder belongs to no workspace above it.
    let mut table = "";
    let mut list = String::new();
    let mut in_list = false;
    for line in text.lines().map(str::trim) {
        if in_list {
            list.push_str(line);
            in_list = !line.contains(']');
        } else if line.starts_with('[') {
            table = line;
        } else if table == "[workspace]" && line.split('=').next().is_some_and(|k| k.trim() == "exclude") {
            list.push_str(line);
            in_list = !line.contains(']');
        }
    }
    !quoted(&list).iter().any(|e| path_covers(e, &rel))
}

/// Whether `folder`'s `go.work` uses the module in `project` (a folder at or below it).
pub fn is_go_work_of(folder: &Path, project: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(folder.join("go.work")) else { return false };
    let Some(rel) = relative(folder, project) else { return true };
    let mut uses = Vec::new();
    let mut in_block = false;
    for line in text.lines().map(|l| l.split("//").next().unwrap_or("").trim()) {
        if in_block {
            if line.starts_with(')') {
                in_block = false;
            } else if !line.is_empty() {
                uses.push(line.trim_matches('"').to_owned());
            }
        } else if let Some(rest) = line.strip_prefix("use") {
            let rest = rest.trim();
            if rest.starts_with('(') {
                in_block = true;
            } else if !rest.is_empty() {
                uses.push(rest.trim_matches('"').to_owned());
            }
        }
    }
    uses.iter().any(|u| clean(u) == rel)
}

/// `project` relative to `folder` with `/` separators; `None` when they are the same folder.
fn relative(folder: &Path, project: &Path) -> Option<String> {
    let rel = project.strip_prefix(folder).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// A manifest's relative path without `./` and trailing `/`.
fn clean(p: &str) -> &str {
    let p = p.trim_end_matches('/');
    p.strip_prefix("./").unwrap_or(p)
}

/// Whether the folder `entry` (relative, as a manifest lists it) is `rel` or holds it.
fn path_covers(entry: &str, rel: &str) -> bool {
    let entry = clean(entry);
    rel == entry || rel.strip_prefix(entry).is_some_and(|r| r.starts_with('/'))
}

/// The double- or single-quoted strings in `list`.
fn quoted(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = list;
    while let Some(start) = rest.find(['"', '\'']) {
        let q = rest[start..].chars().next().unwrap_or('"');
        let after = &rest[start + 1..];
        let Some(end) = after.find(q) else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

/// clangd writes its background index to `.cache/clangd/index` beside the compilation
/// database (`compile_commands.json`, `compile_flags.txt`, or `build/compile_commands.json`, whose
/// project folder is the one above `build`; or the folder a `.clangd` names in
/// `CompilationDatabase:`), and no flag or config key of clangd 14–21 moves it. A `.gitignore` of
/// `*` in `.cache/clangd` hides the folder from git (itself included) without touching a tracked
/// file, as the fix proposed to clangd itself does (llvm-project#170003). The index stays where
/// clangd reads it, so references across files keep working. Nothing is written for a root
/// without a compilation database: clangd then indexes into the user's cache folder, not the
/// project.
pub fn hide_clangd_index(root: &Path) {
    let databases = ["compile_commands.json", "compile_flags.txt"];
    let has_database = |dir: &Path| databases.iter().any(|d| dir.join(d).is_file());
    let mut folders: Vec<PathBuf> = Vec::new();
    if has_database(root) || root.join("build/compile_commands.json").is_file() {
        folders.push(root.to_path_buf());
    }
    folders.extend(named_database_folder(root).filter(|d| has_database(d)));
    for folder in folders {
        let dir = folder.join(".cache/clangd");
        let what = "clangd's background index (kodik started clangd): not part of the project.";
        if let Err(e) = kodik_core::workspace::hide_from_git(&dir, what) {
            tracing::debug!(path = %dir.display(), error = %e, "could not hide clangd's index from git");
        }
    }
}

/// The folder `root/.clangd` names in `CompileFlags: CompilationDatabase: DIR`, when it is a
/// folder inside `root` (not `Ancestors` or `None`, which name no folder).
fn named_database_folder(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join(".clangd")).ok()?;
    let value = text.lines().find_map(|l| l.trim().strip_prefix("CompilationDatabase:"))?;
    let value = value.split(" #").next().unwrap_or("").trim().trim_matches(['"', '\'']);
    if value.is_empty() || value == "Ancestors" || value == "None" {
        return None;
    }
    let dir = root.join(value);
    let inside = dir.starts_with(root) && !dir.components().any(|c| c == std::path::Component::ParentDir);
    inside.then_some(dir)
}

/// The project root of `file`: the nearest folder at or above it holding one of `markers`,
/// not going above the workspace root that contains it; else that workspace root (or the
/// file's folder when it lies outside every root).
pub fn find_root(file: &Path, markers: &[String], roots: &[PathBuf]) -> PathBuf {
    let ws_root = roots.iter().filter(|r| file.starts_with(r)).max_by_key(|r| r.components().count());
    let mut dir = file.parent();
    while let Some(d) = dir {
        if markers.iter().any(|m| d.join(m).exists()) {
            return d.to_path_buf();
        }
        if ws_root.is_some_and(|r| r == d) {
            break;
        }
        dir = d.parent();
    }
    ws_root.cloned().or_else(|| file.parent().map(Path::to_path_buf)).unwrap_or_else(|| PathBuf::from("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
    }

    fn server(name: &str) -> ServerConfig {
        default_servers().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name}"))
    }

    /// An executable shell script at `dir/name`.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let p = dir.join(name);
        write(dir, name, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        p
    }

    #[test]
    fn l6_a_rustup_proxy_without_its_component_is_not_the_server() {
        // `~/.cargo/bin/rust-analyzer` with the component not installed: a link to rustup that
        // answers "Unknown binary". Every `.rs` edit used to say the server "did not start".
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (cargo_bin, other, working) =
            (tmp.path().join("cargo-bin"), tmp.path().join("other"), tmp.path().join("ok"));
        for d in [&cargo_bin, &other, &working] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        script(&cargo_bin, "rustup", "echo \"error: Unknown binary 'rust-analyzer'\" >&2; exit 1");
        std::os::unix::fs::symlink("rustup", cargo_bin.join("rust-analyzer")).unwrap_or_else(|e| panic!("{e}"));
        let command = Path::new("rust-analyzer");
        let only_proxy = std::env::join_paths([&cargo_bin]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resolve_on(&only_proxy, command), None, "the idle proxy counts as not installed");
        // A real program further down PATH is found.
        let real = script(&other, "rust-analyzer", "exit 0");
        let both = std::env::join_paths([&cargo_bin, &other]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resolve_on(&both, command), Some(real));
        // A proxy whose component is installed is the program.
        script(&working, "rustup", "exit 0");
        std::os::unix::fs::symlink("rustup", working.join("rust-analyzer")).unwrap_or_else(|e| panic!("{e}"));
        let installed = std::env::join_paths([&working, &other]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resolve_on(&installed, command), Some(working.join("rust-analyzer")));
        // Any other program is taken as found, without being run.
        let marker = tmp.path().join("ran");
        script(&other, "clangd", &format!("touch {}; exit 1", marker.display()));
        assert_eq!(resolve_on(&both, Path::new("clangd")), Some(other.join("clangd")));
        assert!(!marker.exists(), "only rustup proxies are asked for their version");
    }

    /// L2: the crates of one cargo workspace share one rust-analyzer at the workspace root; an
    /// excluded crate and a nested crate that declares its own workspace get their own.
    #[test]
    fn l2_members_of_a_cargo_workspace_share_one_root() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().to_path_buf();
        write(
            &ws,
            "Cargo.toml",
            "[package]\nname = \"top\"\nexclude = [\"crates/a\"]\n\n[workspace]\nmembers = [\"crates/*\"]\nexclude = [\n  \"tools/gen\",\n]\n",
        );
        write(&ws, "src/main.rs", "");
        for krate in ["crates/a", "crates/b", "tools/gen", "vendor/own"] {
            write(&ws, &format!("{krate}/Cargo.toml"), "[package]\nname = \"x\"\n");
            write(&ws, &format!("{krate}/src/lib.rs"), "");
        }
        write(&ws, "vendor/own/Cargo.toml", "[package]\nname = \"own\"\n\n[workspace]\n");
        let ra = server("rust-analyzer");
        let roots = [ws.clone()];
        let root_of = |rel: &str| ra.project_root(&ws.join(rel), &roots);
        // `crates/a` is in the package's `exclude` (files left out of the package), not the
        // workspace's: still a member.
        assert_eq!(root_of("crates/a/src/lib.rs"), ws);
        assert_eq!(root_of("crates/b/src/lib.rs"), ws);
        assert_eq!(root_of("src/main.rs"), ws);
        assert_eq!(root_of("tools/gen/src/lib.rs"), ws.join("tools/gen"));
        assert_eq!(root_of("vendor/own/src/lib.rs"), ws.join("vendor/own"));
        // A virtual manifest (`[workspace]` only, or `[workspace.package]` first) is a root too.
        write(&ws, "Cargo.toml", "[workspace.package]\nversion = \"1.0.0\"\n\n[workspace]\nmembers = [\"crates/*\"]\n");
        assert_eq!(ra.project_root(&ws.join("tools/gen/src/lib.rs"), &roots), ws);
        // Never above the workspace root the file is in.
        let inner = [ws.join("crates")];
        assert_eq!(ra.project_root(&ws.join("crates/b/src/lib.rs"), &inner), ws.join("crates/b"));
    }

    /// L2: the modules a `go.work` uses share one gopls at the `go.work`; a module it does not
    /// use keeps its own.
    #[test]
    fn l2_modules_of_a_go_work_share_one_root() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().to_path_buf();
        write(&ws, "go.work", "go 1.19\n\nuse (\n\t./svc/a // the API\n\tsvc/b/\n)\nuse ./lib\n");
        for module in ["svc/a", "svc/b", "lib", "other"] {
            write(&ws, &format!("{module}/go.mod"), "module example.com/x\n");
            write(&ws, &format!("{module}/x.go"), "package x\n");
        }
        let gopls = server("gopls");
        let roots = [ws.clone()];
        for module in ["svc/a", "svc/b", "lib"] {
            assert_eq!(gopls.project_root(&ws.join(module).join("x.go"), &roots), ws, "{module}");
        }
        assert_eq!(gopls.project_root(&ws.join("other/x.go"), &roots), ws.join("other"));
    }
}
