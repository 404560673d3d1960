//! `codebase_search` (L7) end to end: the real `/v1/embeddings` client of kodik-model talks
//! to a real HTTP server on 127.0.0.1 whose vectors come from word hashing, so "remove
//! expired sessions" lands near the chunk about purging sessions. Asserts on what the server
//! received prove what was (and was not) sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kodik_core::{ToolContext, ToolOutput, ToolRegistry, ToolStatus, Workspace};
use kodik_model::{EmbeddingsClient, EmbeddingsConfig, HashEmbeddingServer};
use kodik_search::{CodebaseIndex, IndexConfig, SearchToolset};
use serde_json::json;

const SESSIONS: &str = "\
//! Session store.

/// Purges every session whose expiry time has passed: removes expired sessions from the
/// store so stale logins cannot be reused.
pub fn purge_expired_sessions(store: &mut Store, now: Instant) {
    store.sessions.retain(|s| s.expires_at > now);
}
";

const MARKDOWN: &str = "\
/// Renders rows as a Markdown table with a header line and aligned columns.
pub fn render_markdown_table(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows { out.push_str(&row.cells.join(\" | \")); }
    out
}
";

const ROUTER: &str = "\
/// Routes an incoming HTTP request to its handler by method and path.
pub fn route_request(req: &Request) -> Response {
    match (req.method, req.path.as_str()) { _ => not_found() }
}
";

/// A workspace with three source files, a `.kodikignore`d note, secrets and a binary file.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files: &[(&str, &[u8])] = &[
        ("src/sessions.rs", SESSIONS.as_bytes()),
        ("src/markdown.rs", MARKDOWN.as_bytes()),
        ("src/router.rs", ROUTER.as_bytes()),
        (".kodikignore", b"private/\n"),
        ("private/plan.md", b"Secret plan: remove expired sessions by hand every night.\n"),
        (".env", b"SESSION_TOKEN=hunter2-expired-sessions\n"),
        ("config/prod.env", b"DB_PASSWORD=swordfish-sessions\n"),
        ("deploy/server.key", b"-----BEGIN PRIVATE KEY----- sessions expired\n"),
        ("id_rsa", b"-----BEGIN OPENSSH PRIVATE KEY----- sessions\n"),
        ("assets/logo.bin", b"\x89PNG\0\0\0sessions expired remove\0"),
    ];
    for (path, body) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    dir
}

struct Setup {
    ws: tempfile::TempDir,
    cache: tempfile::TempDir,
    server: HashEmbeddingServer,
}

impl Setup {
    async fn new() -> Self {
        Self {
            ws: workspace(),
            cache: tempfile::tempdir().unwrap(),
            server: HashEmbeddingServer::start(256).await.unwrap(),
        }
    }

    fn client(&self, config: impl FnOnce(EmbeddingsConfig) -> EmbeddingsConfig) -> Arc<EmbeddingsClient> {
        let c = EmbeddingsConfig::new(self.server.base_url(), "hash-embed-256")
            .api_key("sk-test")
            .retries(0)
            .retry_base_delay(Duration::from_millis(10));
        Arc::new(EmbeddingsClient::new(config(c)).unwrap())
    }

    /// A fresh process's view: a new index over the same cache folder.
    fn tools(
        &self,
        client: Arc<EmbeddingsClient>,
        call_wait: Duration,
    ) -> (ToolRegistry, Arc<CodebaseIndex>, ToolContext) {
        let config = IndexConfig { cache_dir: Some(self.cache_dir()), call_wait, ..IndexConfig::default() };
        let index = Arc::new(CodebaseIndex::with_config(client, config));
        let mut reg = ToolRegistry::new();
        SearchToolset::new().codebase_index(index.clone()).register(&mut reg);
        let cx = ToolContext::new(Workspace::new(self.ws.path()).unwrap());
        (reg, index, cx)
    }

    /// [`tools`](Self::tools) with one batch at the embedder at a time: tests of what a call
    /// says while the build runs need it to last.
    fn serial_tools(
        &self,
        client: Arc<EmbeddingsClient>,
        call_wait: Duration,
    ) -> (ToolRegistry, Arc<CodebaseIndex>, ToolContext) {
        let config = IndexConfig {
            cache_dir: Some(self.cache_dir()),
            call_wait,
            concurrent_requests: 1,
            ..IndexConfig::default()
        };
        let index = Arc::new(CodebaseIndex::with_config(client, config));
        let mut reg = ToolRegistry::new();
        SearchToolset::new().codebase_index(index.clone()).register(&mut reg);
        let cx = ToolContext::new(Workspace::new(self.ws.path()).unwrap());
        (reg, index, cx)
    }

    fn default_tools(&self) -> (ToolRegistry, Arc<CodebaseIndex>, ToolContext) {
        self.tools(self.client(|c| c), Duration::from_secs(30))
    }

    fn write(&self, path: &str, body: &str) {
        let p = self.ws.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    /// The cache folder, which the index creates.
    fn cache_dir(&self) -> PathBuf {
        self.cache.path().join("kodik/index")
    }

    fn cache_files(&self) -> Vec<PathBuf> {
        let Ok(dir) = std::fs::read_dir(self.cache_dir()) else { return Vec::new() };
        dir.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "idx")).collect()
    }
}

async fn search(reg: &ToolRegistry, cx: &ToolContext, args: serde_json::Value) -> ToolOutput {
    let tool = reg.get("codebase_search").expect("codebase_search is registered");
    tokio::time::timeout(Duration::from_secs(60), tool.call(args, cx)).await.expect("codebase_search hung")
}

/// The `path:start-end` heads of the results, best first.
fn heads(out: &ToolOutput) -> Vec<String> {
    out.text_content()
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(".rs:") && l.contains("(score"))
        .map(|l| l.split(' ').next().unwrap().to_owned())
        .collect()
}

/// Polls `done` every 10 ms for at most 10 s.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    assert!(waited.await.is_ok(), "{what}");
}

fn inputs_since(server: &HashEmbeddingServer, before: usize) -> Vec<String> {
    server.inputs().into_iter().skip(before).collect()
}

#[tokio::test]
async fn l7_without_an_embedder_the_tool_is_not_offered() {
    let mut reg = ToolRegistry::new();
    SearchToolset::new().register(&mut reg);
    assert!(reg.get("codebase_search").is_none());
    let s = Setup::new().await;
    let (reg, _, _) = s.default_tools();
    let tool = reg.get("codebase_search").unwrap();
    assert_eq!(tool.spec(), &kodik_schema::spec::<kodik_schema::lsp::CodebaseSearchArgs>());
    assert_eq!(s.server.requests().len(), 0, "registering embeds nothing");
}

#[tokio::test]
async fn l7_first_call_builds_the_index_and_ranks_by_meaning() {
    let s = Setup::new().await;
    let (reg, index, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    let text = out.text_content();
    let found = heads(&out);
    assert_eq!(found.len(), 3, "{text}");
    assert!(found[0].starts_with("src/sessions.rs:1-"), "{text}");
    assert!(text.contains("  /// Purges every session whose expiry time has passed"), "first lines shown: {text}");
    assert!(!text.contains("index:"), "a finished index has no progress note: {text}");
    let status = index.status(&cx.workspace).unwrap();
    assert_eq!((status.indexed_files, status.total_files), (4, 4), "3 sources and the binary file (no chunks)");
    // `limit` caps the results.
    let one = search(&reg, &cx, json!({ "query": "render a markdown table", "limit": 1 })).await;
    assert_eq!(heads(&one), ["src/markdown.rs:1-6"], "{}", one.text_content());
    // Chunks are sent with their path in front.
    assert!(s.server.inputs().iter().any(|i| i.starts_with("src/sessions.rs\n//! Session store.")));
}

#[tokio::test]
async fn g16_l7_ignored_secret_and_binary_files_never_reach_the_embedder_or_the_results() {
    let s = Setup::new().await;
    // Secrets under names that do not say `.env` or key: Rails' credentials, Terraform's
    // variables, and a key file whose name says nothing but whose text holds a private key.
    s.write("config/credentials.yml", "sessions_secret: correct-horse-sessions\n");
    s.write("infra/prod.tfvars", "db_password = \"tr0ub4dor-sessions\"\n");
    s.write("deploy_sessions.json", "{\"type\": \"service_account\", \"private_key\": \"opaque-sessions\"}\n");
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions secret plan token", "limit": 50 })).await;
    assert!(out.is_success(), "{}", out.text_content());
    let sent = s.server.inputs().join("\n=====\n");
    for secret in
        ["Secret plan", "hunter2", "swordfish", "PRIVATE KEY", "PNG", "correct-horse", "tr0ub4dor", "opaque-sessions"]
    {
        assert!(!sent.contains(secret), "`{secret}` reached the embedding server:\n{sent}");
    }
    for path in ["private/", ".env", "config/prod.env", "deploy/", "id_rsa", "assets/"] {
        assert!(!out.text_content().contains(path), "{path} in {}", out.text_content());
    }
    // A rule added after indexing hides the file's chunks at once.
    s.write(".kodikignore", "private/\nsrc/sessions.rs\n");
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(!out.text_content().contains("sessions.rs"), "{}", out.text_content());
    assert!(heads(&out).len() == 2, "{}", out.text_content());
}

#[tokio::test]
async fn l7_a_query_while_building_says_how_far_the_index_is() {
    let s = Setup::new().await;
    // One text per request, each answered after 300 ms: the build outlasts the call's wait.
    s.server.set_delay(Duration::from_millis(300));
    let (reg, index, cx) = s.serial_tools(s.client(|c| c.batch_size(1)), Duration::from_millis(100));
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    let text = out.text_content();
    let note = text.lines().find(|l| l.starts_with("[index: ")).unwrap_or_else(|| panic!("no progress note: {text}"));
    assert!(note.contains(" of 4 files so far; results may be incomplete"), "{note}");
    assert!(!note.starts_with("[index: 4 of 4"), "{note}");
    assert!(!text.contains("No indexed code"), "{text}");
    // The build goes on in the background and completes.
    assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(30)).await);
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(!out.text_content().contains("[index: "), "{}", out.text_content());
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{}", out.text_content());
}

#[tokio::test]
async fn g15_l7_an_edit_changes_the_answer_and_a_deleted_file_is_gone() {
    let s = Setup::new().await;
    let (reg, _, cx) = s.default_tools();
    let query = json!({ "query": "parse the yaml configuration file" });
    let before = search(&reg, &cx, query.clone()).await;
    assert!(!heads(&before).is_empty());
    assert!(!before.text_content().contains("config.rs"), "{}", before.text_content());

    // A new file: only it (and the query) is embedded, and it is the best match.
    let sent = s.server.inputs().len();
    s.write("src/config.rs", "/// Parses the YAML configuration file into settings.\npub fn parse_yaml_configuration(text: &str) -> Config { todo!() }\n");
    let after = search(&reg, &cx, query.clone()).await;
    assert_eq!(heads(&after)[0], "src/config.rs:1-2", "{}", after.text_content());
    let new = inputs_since(&s.server, sent);
    assert!(
        new.iter().all(|i| i.starts_with("src/config.rs\n") || i == "parse the yaml configuration file"),
        "{new:?}"
    );

    // An edit of an existing file changes its chunk.
    s.write("src/markdown.rs", "/// Reads the yaml configuration file and parses it.\nfn load() {}\n");
    let after = search(&reg, &cx, json!({ "query": "render a markdown table", "limit": 50 })).await;
    assert!(after.text_content().contains("src/markdown.rs:1-2"), "{}", after.text_content());
    assert!(
        after.text_content().contains("/// Reads the yaml configuration file and parses it."),
        "{}",
        after.text_content()
    );
    assert!(
        !after.text_content().contains("Renders rows as a Markdown table"),
        "stale chunk: {}",
        after.text_content()
    );

    // A deleted file's chunks are gone.
    std::fs::remove_file(s.ws.path().join("src/config.rs")).unwrap();
    let gone = search(&reg, &cx, query).await;
    assert!(!gone.text_content().contains("config.rs"), "{}", gone.text_content());
}

#[tokio::test]
async fn l7_a_restart_loads_the_cache_and_embeds_only_what_changed() {
    let s = Setup::new().await;
    {
        let (reg, _, cx) = s.default_tools();
        assert!(search(&reg, &cx, json!({ "query": "route an http request" })).await.is_success());
    }
    assert_eq!(s.cache_files().len(), 1, "one cache file for the workspace and model");
    // It holds lines of the project's code: only the user may enter the folder it made.
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(s.cache_dir()).unwrap().permissions().mode() & 0o777, 0o700);
    let sent = s.server.inputs().len();
    assert!(sent >= 4, "three source chunks and the query");

    // A new process: the cache is loaded, nothing is re-embedded but the query.
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-4", "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent), ["route an http request"]);

    // One changed file: only it is embedded again.
    let sent = s.server.inputs().len();
    s.write(
        "src/router.rs",
        "/// Dispatches an incoming HTTP request to the handler for its route.\npub fn dispatch() {}\n",
    );
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-2", "{}", out.text_content());
    let new = inputs_since(&s.server, sent);
    assert_eq!(new.len(), 2, "{new:?}");
    assert!(new[0].starts_with("src/router.rs\n/// Dispatches"), "{new:?}");
}

#[tokio::test]
async fn l7_a_corrupt_or_foreign_cache_is_rebuilt_not_a_crash() {
    let s = Setup::new().await;
    {
        let (reg, _, cx) = s.default_tools();
        assert!(search(&reg, &cx, json!({ "query": "sessions" })).await.is_success());
    }
    let file = s.cache_files().pop().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&file, &bytes).unwrap();
    let sent = s.server.inputs().len();
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent).len(), 4, "every file embedded again, and the query");

    // The rebuilt file is whole again: the next process embeds only its query. This one ends
    // first (its index is written in the background, and at the latest when it is dropped).
    drop(reg);
    let sent = s.server.inputs().len();
    let (reg, _, cx) = s.default_tools();
    assert!(search(&reg, &cx, json!({ "query": "sessions" })).await.is_success());
    assert_eq!(inputs_since(&s.server, sent), ["sessions"]);

    // Garbage of any length is the same.
    std::fs::write(&file, b"not an index").unwrap();
    let (reg, _, cx) = s.default_tools();
    assert!(search(&reg, &cx, json!({ "query": "sessions" })).await.is_success());
}

#[tokio::test]
async fn l7_a_refused_key_is_a_clear_error_and_the_index_keeps_what_it_had() {
    let s = Setup::new().await;
    s.server.require_key(Some("the-right-key"));
    let (reg, _, cx) = s.tools(s.client(|c| c.api_key("a-wrong-key")), Duration::from_secs(30));
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("refused the API key (HTTP 401)"), "{text}");
    assert!(text.contains("Check the embedding API key"), "{text}");
    assert!(!text.contains("a-wrong-key"), "{text}");

    // With the right key the index is built; then one update fails: the old chunks still answer.
    let (reg, _, cx) = s.tools(s.client(|c| c.api_key("the-right-key")), Duration::from_secs(30));
    assert!(search(&reg, &cx, json!({ "query": "sessions" })).await.is_success());
    s.write("src/sessions.rs", &format!("{SESSIONS}\n// touched\n"));
    s.server.fail_next(401, None);
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{}", out.text_content());
    assert!(out.text_content().contains("could not be brought up to date"), "{}", out.text_content());
    assert!(out.text_content().contains("refused the API key"), "{}", out.text_content());
    // The next call catches up.
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(!out.text_content().contains("could not be brought up to date"), "{}", out.text_content());
}

#[tokio::test]
async fn l7_an_unreachable_server_says_what_to_do() {
    let s = Setup::new().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = Arc::new(
        EmbeddingsClient::new(EmbeddingsConfig::new(format!("http://127.0.0.1:{port}/v1"), "m").retries(0)).unwrap(),
    );
    let (reg, _, cx) = s.tools(client, Duration::from_secs(30));
    let out = search(&reg, &cx, json!({ "query": "sessions" })).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("could not reach the embedding server"), "{}", out.text_content());
    assert!(out.text_content().contains("use grep"), "{}", out.text_content());
}

#[tokio::test]
async fn l7_g16_path_limits_the_search_and_outside_or_ignored_folders_are_refused() {
    let s = Setup::new().await;
    s.write("docs/sessions.md", "How expired sessions are removed: the purge job runs hourly.\n");
    let (reg, _, cx) = s.default_tools();
    for path in ["/", "..", "private", "no/such/folder"] {
        let out = search(&reg, &cx, json!({ "query": "sessions", "path": path })).await;
        assert_eq!(out.status, ToolStatus::Error, "`{path}`: {}", out.text_content());
    }
    for query in ["", "   ", &"x".repeat(5000)] {
        let out = search(&reg, &cx, json!({ "query": query })).await;
        assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
        assert!(out.text_content().contains("query"), "{}", out.text_content());
    }
    assert_eq!(s.server.requests().len(), 0, "a refused call embeds nothing");
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions", "path": "docs" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().starts_with("docs/sessions.md:1-1"), "{}", out.text_content());
    assert!(!out.text_content().contains("src/"), "{}", out.text_content());
}

#[tokio::test]
async fn l7_a_workspace_with_nothing_indexable_says_so() {
    let s = Setup::new().await;
    for f in ["src", ".kodikignore", "private"] {
        let p = s.ws.path().join(f);
        if p.is_dir() { std::fs::remove_dir_all(p).unwrap() } else { std::fs::remove_file(p).unwrap() }
    }
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("no files codebase_search can index"), "{}", out.text_content());
}

#[tokio::test]
async fn g15_l7_an_unchanged_repeat_gets_the_short_hint() {
    let s = Setup::new().await;
    let (reg, _, cx) = s.default_tools();
    let args = json!({ "query": "remove expired sessions" });
    assert!(!heads(&search(&reg, &cx, args.clone()).await).is_empty());
    let again = search(&reg, &cx, args.clone()).await;
    assert!(again.text_content().starts_with("Unchanged since your last identical call"), "{}", again.text_content());
    s.write("src/sessions.rs", &format!("{SESSIONS}\n// touched\n"));
    let fresh = search(&reg, &cx, args).await;
    assert!(heads(&fresh)[0].starts_with("src/sessions.rs:"), "{}", fresh.text_content());
}

#[tokio::test]
async fn g15_l7_an_answer_given_while_a_change_is_still_being_embedded_says_so() {
    let s = Setup::new().await;
    let (reg, index, cx) = s.serial_tools(s.client(|c| c.batch_size(1)), Duration::from_millis(200));
    assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(30)).await);
    // Two changed files, one request each, 1.5 s apiece: the update outlasts the call's wait
    // and the query's own embedding.
    s.server.set_delay(Duration::from_millis(1500));
    s.write("src/sessions.rs", "/// Formats dates for the audit log.\nfn format_date() {}\n");
    s.write("src/router.rs", "/// Sends the weekly newsletter.\nfn newsletter() {}\n");
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("[index: still checking for changes"), "{}", out.text_content());
    // Once caught up, the edit shows and the note is gone.
    s.server.set_delay(Duration::ZERO);
    assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(30)).await);
    let out = search(&reg, &cx, json!({ "query": "format dates for the audit log" })).await;
    assert!(heads(&out)[0].starts_with("src/sessions.rs:1-2"), "{}", out.text_content());
    assert!(!out.text_content().contains("[index:"), "{}", out.text_content());
}

#[tokio::test]
async fn l7_file_size_file_count_and_chunk_caps_leave_files_out_and_say_so() {
    let s = Setup::new().await;
    s.write("src/huge.rs", &format!("// remove expired sessions\n{}", "x\n".repeat(40_000)));
    let limits = |config: IndexConfig| IndexConfig { cache_dir: None, max_file_bytes: 10_000, ..config };
    let build = |config: IndexConfig| {
        let index = Arc::new(CodebaseIndex::with_config(s.client(|c| c), config));
        let mut reg = ToolRegistry::new();
        SearchToolset::new().codebase_index(index).register(&mut reg);
        reg
    };
    let cx = ToolContext::new(Workspace::new(s.ws.path()).unwrap());

    // Over the size cap: never read, never sent.
    let reg = build(limits(IndexConfig::default()));
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions", "limit": 50 })).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(!out.text_content().contains("huge.rs"), "{}", out.text_content());
    assert!(s.server.inputs().iter().all(|i| !i.starts_with("src/huge.rs")));

    // Two files at most: the rest is counted in a note.
    let reg = build(IndexConfig { max_files: 2, ..limits(IndexConfig::default()) });
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(
        out.text_content().contains("[2 more files are not indexed: the index takes at most 2 files]"),
        "{}",
        out.text_content()
    );
    // The first two in path order: assets/logo.bin (binary, no chunks) and src/markdown.rs.
    assert_eq!(heads(&out), ["src/markdown.rs:1-6"], "{}", out.text_content());

    // One chunk at most: the next file does not fit and the note says so.
    let reg = build(IndexConfig { max_chunks: 1, ..limits(IndexConfig::default()) });
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(
        out.text_content().contains("[the index holds its maximum of 1 chunks; 2 more files are not indexed]"),
        "{}",
        out.text_content()
    );
    assert_eq!(heads(&out), ["src/markdown.rs:1-6"], "{}", out.text_content());
    assert!(!out.text_content().contains("[index: "), "left-out files are not 'being indexed': {}", out.text_content());
}

#[tokio::test]
async fn l7_r6_legacy_and_utf16_files_are_decoded_before_they_are_embedded() {
    let s = Setup::new().await;
    let cp1251 = encoding_rs::WINDOWS_1251.encode("// Удаляет просроченные сессии из хранилища.\nfn purge() {}\n").0;
    std::fs::write(s.ws.path().join("src/legacy.rs"), &cp1251).unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "// Renders the monthly invoice as PDF.\nfn invoice() {}\n".encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    std::fs::write(s.ws.path().join("src/invoice.rs"), &utf16).unwrap();
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "просроченные сессии" })).await;
    assert!(heads(&out)[0].starts_with("src/legacy.rs:1-2"), "{}", out.text_content());
    assert!(out.text_content().contains("  // Удаляет просроченные сессии из хранилища."), "{}", out.text_content());
    let out = search(&reg, &cx, json!({ "query": "monthly invoice PDF" })).await;
    assert!(heads(&out)[0].starts_with("src/invoice.rs:1-2"), "{}", out.text_content());
}

#[tokio::test]
async fn l7_a_long_build_saves_what_it_has_before_it_ends() {
    let s = Setup::new().await;
    // One text per request, slowly: the build takes seconds; it saves after every batch, so a
    // process that ends mid-build (a one-shot `kodik call`) leaves its work to the next. The
    // save runs in the background: a second per request leaves it time on a busy CI disk.
    s.server.set_delay(Duration::from_millis(1000));
    let config = IndexConfig {
        cache_dir: Some(s.cache_dir()),
        call_wait: Duration::from_millis(50),
        save_every: Duration::ZERO,
        concurrent_requests: 1,
        ..IndexConfig::default()
    };
    let index = Arc::new(CodebaseIndex::with_config(s.client(|c| c.batch_size(1)), config));
    let ws = Workspace::new(s.ws.path()).unwrap();
    index.warm(&ws).await;
    let saved_while_building = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if !s.cache_files().is_empty() {
                return index.status(&ws).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("no cache file was written");
    assert!(
        saved_while_building.updating && saved_while_building.indexed_files < saved_while_building.total_files,
        "the first save came only with the finished build: {saved_while_building:?}"
    );
    assert!(index.wait_until_current(&ws, Duration::from_secs(30)).await);
}

#[tokio::test]
async fn l7_a_build_keeps_a_bounded_number_of_batches_at_the_embedder() {
    let s = Setup::new().await;
    for i in 0..12 {
        s.write(&format!("src/gen/f{i:02}.rs"), &format!("/// Generated helper number {i}.\nfn helper_{i}() {{}}\n"));
    }
    let ws = Workspace::new(s.ws.path()).unwrap();
    for (requests, expect) in [(1, 1..=1), (3, 2..=3)] {
        // A server of its own per run, one text per request, each answered after 100 ms.
        let server = HashEmbeddingServer::start(64).await.unwrap();
        server.set_delay(Duration::from_millis(100));
        let client = EmbeddingsClient::new(EmbeddingsConfig::new(server.base_url(), "m").batch_size(1)).unwrap();
        let config = IndexConfig { cache_dir: None, concurrent_requests: requests, ..IndexConfig::default() };
        let index = CodebaseIndex::with_config(Arc::new(client), config);
        assert!(index.wait_until_current(&ws, Duration::from_secs(30)).await);
        assert_eq!(index.status(&ws).unwrap().chunks, 15, "3 sources and 12 generated files");
        assert!(expect.contains(&server.max_in_flight()), "{requests} allowed, {} at once", server.max_in_flight());
    }
}

#[tokio::test]
async fn l7_an_untrusted_workspace_is_indexed_in_memory_only() {
    let s = Setup::new().await;
    let (reg, _, _) = s.default_tools();
    let cx = ToolContext::new(Workspace::new(s.ws.path()).unwrap().with_trusted(false));
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{}", out.text_content());
    assert!(s.cache_files().is_empty(), "an untrusted workspace left {:?}", s.cache_files());
}

/// L7: a server that starts answering with vectors of another length under the same model
/// name (a local server that swapped its model) gets the index rebuilt: the first call says
/// so, and once rebuilt the search finds code again. Before, every call answered "No indexed
/// code" for good.
#[tokio::test]
async fn l7_vectors_of_another_length_under_the_same_model_rebuild_the_index() {
    let s = Setup::new().await;
    {
        let (reg, _, cx) = s.default_tools();
        assert!(search(&reg, &cx, json!({ "query": "route an http request" })).await.is_success());
    }
    let other = HashEmbeddingServer::start(128).await.unwrap();
    let client = Arc::new(
        EmbeddingsClient::new(EmbeddingsConfig::new(other.base_url(), "hash-embed-256").api_key("sk-test").retries(0))
            .unwrap(),
    );
    let (reg, index, cx) = s.tools(client, Duration::from_secs(30));
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("vectors of 128 numbers, but the index was built with 256"), "{text}");
    assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(30)).await);
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-4", "{}", out.text_content());
}

/// L7, G15: at the chunk cap an edited file is embedded again (its old chunks make room for
/// its new ones), so the next call finds the new text. Before, the old chunks counted against
/// the new ones, the file never fit, and the old text was answered for good.
#[tokio::test]
async fn g15_l7_an_edited_file_is_updated_when_the_index_is_at_its_chunk_cap() {
    let s = Setup::new().await;
    let config = IndexConfig { cache_dir: None, max_chunks: 3, ..IndexConfig::default() };
    let index = Arc::new(CodebaseIndex::with_config(s.client(|c| c), config));
    let mut reg = ToolRegistry::new();
    SearchToolset::new().codebase_index(index).register(&mut reg);
    let cx = ToolContext::new(Workspace::new(s.ws.path()).unwrap());
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{}", out.text_content());
    s.write("src/sessions.rs", "/// Sends the weekly newsletter to every subscriber.\npub fn newsletter() {}\n");
    let out = search(&reg, &cx, json!({ "query": "send the weekly newsletter to subscribers" })).await;
    assert_eq!(heads(&out)[0], "src/sessions.rs:1-2", "{}", out.text_content());
    assert!(out.text_content().contains("Sends the weekly newsletter"), "{}", out.text_content());
}

/// A text longer than the refusing server takes: one chunk of about 1 400 characters.
fn long_text(topic: &str) -> String {
    format!("/// {topic}\n{}", format!("// {topic}: one of many lines that make this chunk long\n").repeat(20))
}

/// L7: a batch the server refuses for its input (HTTP 400 "input too long", as a small
/// model's server answers one text over its context) is split and sent again, so the rest of
/// it is indexed; the text refused alone is left out, said once, and not sent again until its
/// file changes, also after a restart. Before, the whole batch stayed out and every call
/// failed again with the same error.
#[tokio::test]
async fn l7_a_text_the_server_refuses_is_left_out_said_once_and_not_retried_until_it_changes() {
    let s = Setup::new().await;
    s.server.refuse_longer_than(Some(600));
    s.write("src/long.rs", &long_text("Computes the monthly tax report"));
    let (reg, _, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "the rest of the batch is indexed: {text}");
    assert!(text.contains("[1 file could not be embedded (the embedding server refused part or all of it)"), "{text}");
    assert!(text.contains("src/long.rs (input too long: "), "the server's reason: {text}");
    assert!(!text.contains("[index:") && !text.contains("could not be brought up to date"), "{text}");

    // Said once; the refused text is not sent again.
    let sent = s.server.inputs().len();
    let out = search(&reg, &cx, json!({ "query": "render a markdown table" })).await;
    assert_eq!(heads(&out)[0], "src/markdown.rs:1-6", "{}", out.text_content());
    assert!(!out.text_content().contains("could not be embedded"), "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent), ["render a markdown table"]);

    // Nor after a restart.
    drop(reg);
    let (reg, _, cx) = s.default_tools();
    let sent = s.server.inputs().len();
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-4", "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent), ["route an http request"]);

    // Changed, it is sent again; refused alone in its update, it is still left out (the
    // server takes a short text, so the refusal is about this one).
    s.write("src/long.rs", &long_text("Builds the yearly audit summary"));
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("src/long.rs (input too long: "), "{text}");
    let sent = s.server.inputs().len();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert!(!out.text_content().contains("could not be embedded"), "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent), ["remove expired sessions"]);

    // Short enough, it is indexed.
    s.write("src/long.rs", "/// Computes the monthly tax report.\nfn monthly_tax_report() {}\n");
    let out = search(&reg, &cx, json!({ "query": "monthly tax report" })).await;
    assert_eq!(heads(&out)[0], "src/long.rs:1-2", "{}", out.text_content());
}

/// L7: a server that refuses every text with HTTP 400 (a wrong model name, say) marks no file
/// as not embeddable: it is a failed update, and once the server answers every file is indexed.
#[tokio::test]
async fn l7_a_server_refusing_every_text_marks_no_file() {
    let s = Setup::new().await;
    s.server.set_failing(Some(400));
    let (reg, index, cx) = s.default_tools();
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert!(out.text_content().contains("HTTP 400"), "{}", out.text_content());
    let status = index.status(&cx.workspace).unwrap();
    assert_eq!(status.indexed_files, 0, "{status:?}");
    assert!(status.error.is_some(), "{status:?}");

    s.server.set_failing(None);
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    let text = out.text_content();
    assert_eq!(heads(&out).len(), 3, "{text}");
    assert!(heads(&out)[0].starts_with("src/sessions.rs:"), "{text}");
    assert!(!text.contains("could not be embedded"), "{text}");
}

/// L7: a server that stops taking anything in the middle of a pass (a gateway whose budget ran
/// out answers 400 to everything, a local model swapped) marks no file as not embeddable, though
/// it embedded earlier texts of the same pass: each text refused alone is checked with a probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_a_server_that_starts_refusing_everything_mid_pass_marks_no_file() {
    let s = Setup::new().await;
    s.server.set_delay(Duration::from_millis(200));
    let (reg, index, cx) = s.serial_tools(s.client(|c| c.batch_size(1)), Duration::from_secs(30));
    let reg = Arc::new(reg);
    let searching = {
        let (reg, cx) = (reg.clone(), cx.clone());
        tokio::spawn(async move { search(&reg, &cx, json!({ "query": "remove expired sessions" })).await })
    };
    tokio::time::timeout(Duration::from_secs(20), async {
        while s.server.served() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the server embedded nothing");
    s.server.set_failing(Some(400));
    let out = searching.await.unwrap();
    let text = out.text_content();
    assert!(!text.contains("could not be embedded"), "files were blamed for the server's refusal: {text}");
    let status = index.status(&cx.workspace).unwrap();
    assert!(status.indexed_files < status.total_files, "the server refused before the end: {status:?}");

    s.server.set_failing(None);
    let out = search(&reg, &cx, json!({ "query": "remove expired sessions" })).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(!text.contains("could not be embedded") && !text.contains("[index:"), "{text}");
    let status = index.status(&cx.workspace).unwrap();
    assert_eq!(status.indexed_files, status.total_files, "every file is indexed once the server answers: {status:?}");
}

/// L7: after a failed update the answer says indexing stopped and the next call retries, which
/// is what happens: nothing runs until then. Before, it said the rest "is being indexed in the
/// background". A server error (5xx) marks no file: the next call indexes them.
#[tokio::test]
async fn l7_after_a_failed_update_the_answer_says_indexing_stopped_and_the_next_call_retries() {
    let s = Setup::new().await;
    let (reg, index, cx) = s.default_tools();
    assert!(search(&reg, &cx, json!({ "query": "remove expired sessions" })).await.is_success());
    s.write("src/billing.rs", "/// Emails the monthly invoice to the customer.\nfn email_invoice() {}\n");
    s.write("src/audit.rs", "/// Appends an entry to the audit log.\nfn audit() {}\n");
    s.server.fail_next(500, None);
    let out = search(&reg, &cx, json!({ "query": "email the invoice" })).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(
        text.contains(
            "[index: 4 of 6 files so far; results may be incomplete — indexing stopped: the embedding server \
                       answered HTTP 500"
        ),
        "{text}"
    );
    assert!(text.contains("The next call retries."), "{text}");
    assert!(!text.contains("being indexed in the background"), "nothing is: {text}");
    assert!(!index.status(&cx.workspace).unwrap().updating);
    let sent = s.server.requests().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.server.requests().len(), sent, "nothing runs until the next call");

    let out = search(&reg, &cx, json!({ "query": "email the invoice" })).await;
    assert_eq!(heads(&out)[0], "src/billing.rs:1-2", "{}", out.text_content());
    assert!(!out.text_content().contains("[index:"), "{}", out.text_content());
}

/// L7: dropping the last owner of the index (the toolbox) stops its build at the next batch:
/// the server gets no request after a short grace, and what was embedded is on disk for the
/// next process. Before, the build went on to the end of its pass.
#[tokio::test]
async fn l7_dropping_the_index_stops_its_build_and_keeps_what_it_embedded() {
    let s = Setup::new().await;
    for i in 0..30 {
        s.write(&format!("src/gen/f{i:02}.rs"), &format!("/// Generated helper number {i}.\nfn helper_{i}() {{}}\n"));
    }
    // One text per request, each answered after 300 ms: the build takes ten seconds.
    s.server.set_delay(Duration::from_millis(300));
    let (reg, index, cx) = s.serial_tools(s.client(|c| c.batch_size(1)), Duration::from_millis(50));
    index.warm(&cx.workspace).await;
    eventually("the build started", || s.server.requests().len() >= 3).await;
    let indexed = index.status(&cx.workspace).unwrap().indexed_files;
    drop(reg);
    drop(index);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let sent = s.server.requests().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(s.server.requests().len(), sent, "requests after the index was dropped");
    assert!(sent < 10, "{sent} requests: the build went on");

    // What was embedded before the drop is not embedded again.
    s.server.set_delay(Duration::ZERO);
    let (_reg, index, cx) = s.default_tools();
    let before = s.server.inputs().len();
    assert!(index.wait_until_current(&cx.workspace, Duration::from_secs(30)).await);
    // 33 chunks in all (the binary file has none and comes first in path order).
    let again = inputs_since(&s.server, before).len();
    assert!(indexed >= 3 && again <= 33 - (indexed - 1), "{indexed} files indexed before, {again} chunks sent again");
}

/// L7: an edit is saved in the background: a call answers, the file follows, and a new process
/// started while the first still runs embeds nothing but its query.
#[tokio::test]
async fn l7_an_edit_is_saved_in_the_background_for_the_next_process() {
    let s = Setup::new().await;
    let (reg, _index, cx) = s.default_tools();
    assert!(search(&reg, &cx, json!({ "query": "route an http request" })).await.is_success());
    let saved = || s.cache_files().pop().and_then(|f| std::fs::read(f).ok());
    eventually("the first save", || saved().is_some()).await;
    let first = saved();
    s.write(
        "src/router.rs",
        "/// Dispatches an incoming HTTP request to the handler for its route.\npub fn dispatch() {}\n",
    );
    let out = search(&reg, &cx, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-2", "{}", out.text_content());
    eventually("the save of the edit", || saved() != first).await;

    let sent = s.server.inputs().len();
    let (reg2, _, cx2) = s.default_tools();
    let out = search(&reg2, &cx2, json!({ "query": "route an http request" })).await;
    assert_eq!(heads(&out)[0], "src/router.rs:1-2", "{}", out.text_content());
    assert_eq!(inputs_since(&s.server, sent), ["route an http request"]);
}
