//! `kodik`: run an agent on a task, print tool schemas, run one tool call, run a batch of calls
//! in one session, or serve the tool set over MCP.
//!
//! Exit codes: 0 success, 1 a tool reported a non-success status (for `agent`: the run failed
//! or hit a limit), 2 bad usage, 130 (`agent`) interrupted.

mod agent;
mod demo;

use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use kodik_tools::Toolbox;
use kodik_tools::agent::ApprovalMode;
use kodik_tools::core::{Event, EventSink, FileVersion, Resource, ToolCall, ToolOutput, ToolStatus};
use kodik_tools::harness::Mode;
use kodik_tools::mcp::{ClientOptions, McpClient, McpConfig};
use kodik_tools::schema::providers::{self, Format};
use serde::Serialize;
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "kodik",
    version,
    about = "The Kodik agent tool set: an agent, schemas, single calls, batches and an MCP server"
)]
struct Cli {
    /// Where full outputs that do not fit a result are saved (default: $TMPDIR/kodik-output-UID).
    #[arg(long, global = true, value_name = "DIR")]
    spool_dir: Option<PathBuf>,
    /// The workspace's authors are not trusted: the browser keeps no cookies or storage beyond
    /// the session for it and may not clear saved profiles (B1).
    #[arg(long, global = true)]
    untrusted: bool,
    /// The encoding of the project's files where it cannot be told from their bytes (R6, GR3):
    /// a WHATWG label such as `windows-1251` or `shift_jis`, as VS Code's `files.encoding`.
    /// Default: a byte-order mark, else UTF-8, else detection.
    #[arg(long, global = true, value_name = "LABEL", value_parser = parse_encoding)]
    files_encoding: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a task with a model and the tools: progress on stderr, the answer on stdout.
    ///
    /// The model comes from --model or KODIK_MODEL, its key from OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY. codebase_search is offered (to every command) when
    /// KODIK_EMBEDDINGS_MODEL names an embedding model at KODIK_EMBEDDINGS_URL (any
    /// OpenAI-compatible /v1/embeddings server; default OpenAI) with KODIK_EMBEDDINGS_KEY.
    /// Exit code 0 when the run completed, 1 when it failed or hit a limit,
    /// 130 when interrupted (Ctrl-C). `kodik agent --demo` replays a recorded session offline.
    Agent(agent::Args),
    /// Print the JSON Schemas of the tools (all of them, or the ones named).
    Schema {
        /// Provider format.
        #[arg(long, value_enum, default_value_t = SchemaFormat::Mcp)]
        format: SchemaFormat,
        /// Tool names; none means every tool.
        tools: Vec<String>,
    },
    /// Run one tool call and print its result as JSON.
    Call {
        /// The workspace root.
        #[arg(long, default_value = ".")]
        workspace: PathBuf,
        /// Mount the MCP servers of this `{"mcpServers": …}` file (besides the workspace's
        /// `.kodik/mcp.json` and the user's `~/.config/kodik/mcp.json`); repeatable.
        #[arg(long, value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
        /// The tool's name.
        tool: String,
        /// The arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Read calls as JSON Lines on stdin (`{"id","name","args"}` or an array of them for one
    /// model turn), run them in one session, and write one JSON line per result in call order.
    Batch {
        /// The workspace root.
        #[arg(long, default_value = ".")]
        workspace: PathBuf,
        /// Mount the MCP servers of this `{"mcpServers": …}` file (besides the workspace's
        /// `.kodik/mcp.json` and the user's `~/.config/kodik/mcp.json`); repeatable.
        #[arg(long, value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
    },
    /// Serve the tools a mode offers to an MCP client over stdio (stdout is the protocol;
    /// logs go to stderr), or over streamable HTTP with --http.
    ///
    /// Every tool the mode enables is listed directly: an MCP client (Claude Code, Codex,
    /// Cursor, Zed) brings its own prompt and tool search. `--defer` puts the read/search
    /// tools behind `tool_search`/`call_tool` as kodik's own agent does (G12).
    Serve {
        /// The workspace root.
        #[arg(long, default_value = ".")]
        workspace: PathBuf,
        /// The mode whose tool set is offered: code, debug, plan, ask or educator.
        #[arg(long, default_value = "code", value_parser = parse_mode)]
        mode: Mode,
        /// The model the client runs (decides e.g. apply_patch vs create/edit/delete_file, G10).
        #[arg(long, default_value = "mcp-client")]
        model: String,
        /// Defer tools as kodik's own agent does (G12): the read/search tools are reached through
        /// `tool_search` and `call_tool` instead of being listed.
        #[arg(long)]
        defer: bool,
        /// Mount the MCP servers of this `{"mcpServers": …}` file (besides the workspace's
        /// `.kodik/mcp.json` and the user's `~/.config/kodik/mcp.json`) and serve their tools
        /// too, as `server__tool` after the built-ins: one endpoint for several servers.
        #[arg(long, value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
        /// Serve MCP over streamable HTTP on ADDR (e.g. 127.0.0.1:8765) at path /mcp instead of
        /// stdio. Each MCP session gets its own tool session (terminals, reads, checkpoints).
        /// A non-loopback ADDR needs a bearer token (--token-file or KODIK_SERVE_TOKEN).
        /// SIGTERM stops accepting, lets calls in flight finish and exits 0.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// A file holding the bearer token HTTP clients must send (`Authorization: Bearer …`);
        /// default KODIK_SERVE_TOKEN.
        #[arg(long, value_name = "FILE", requires = "http")]
        token_file: Option<PathBuf>,
        /// Seconds without requests after which an HTTP session is closed and its processes
        /// killed.
        #[arg(long, value_name = "SECS", default_value_t = 1800, requires = "http")]
        session_idle: u64,
    },
    /// Run one `codemode` script for the codemode tool over stdin/stdout. The tool starts this
    /// itself, so a runaway script can be killed; not for use by hand.
    #[command(hide = true)]
    CodemodeWorker,
}

pub(crate) fn parse_approval(s: &str) -> Result<ApprovalMode, String> {
    ApprovalMode::parse(s).ok_or_else(|| format!("unknown approval mode `{s}`; use one of: auto, read-only, deny"))
}

pub(crate) fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| format!("unknown mode `{s}`; use one of: code, debug, plan, ask, educator"))
}

#[derive(Clone, Copy, ValueEnum)]
enum SchemaFormat {
    Openai,
    Anthropic,
    Mcp,
}

impl From<SchemaFormat> for Format {
    fn from(f: SchemaFormat) -> Self {
        match f {
            SchemaFormat::Openai => Format::OpenAi,
            SchemaFormat::Anthropic => Format::Anthropic,
            SchemaFormat::Mcp => Format::Mcp,
        }
    }
}

/// Terminal events and progress go to stderr as JSON lines, so stdout keeps one line per result.
struct StderrEvents;

impl EventSink for StderrEvents {
    fn emit(&self, event: Event) {
        if let Ok(line) = serde_json::to_string(&event) {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

fn main() -> ExitCode {
    if let Ok(filter) = std::env::var("KODIK_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let cli = Cli::parse();
    if let Some(dir) = cli.spool_dir {
        // Once, before any toolbox is built (the setting is process-wide).
        kodik_tools::core::preview::set_default_spool_dir(Some(dir));
    }
    if cli.untrusted {
        UNTRUSTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(label) = cli.files_encoding {
        let _ = FILES_ENCODING.set(label);
    }
    match cli.command {
        Command::Agent(args) => with_runtime(|| agent::run(args)),
        Command::Schema { format, tools } => schema(format.into(), &tools),
        Command::Call { workspace, mcp_config, tool, args } => with_runtime(|| call(workspace, mcp_config, tool, args)),
        Command::Batch { workspace, mcp_config } => with_runtime(|| batch(workspace, mcp_config)),
        Command::Serve { workspace, mode, model, defer, mcp_config, http, token_file, session_idle } => {
            let opts = ServeOptions { mode, model, defer, http, token_file, session_idle };
            with_runtime(|| serve(workspace, mcp_config, opts))
        }
        Command::CodemodeWorker => kodik_tools::codemode::worker::serve_stdio(),
    }
}

/// `--untrusted`, set once before any toolbox is built.
static UNTRUSTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--files-encoding`, set once before any toolbox is built.
static FILES_ENCODING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A known encoding label, as the tools will use it.
fn parse_encoding(label: &str) -> Result<String, String> {
    let settings = kodik_tools::core::Settings { files_encoding: Some(label.trim().to_string()) };
    match settings.encoding() {
        Some(_) => Ok(label.trim().to_string()),
        None => Err(format!(
            "`{label}` is not an encoding label; use a WHATWG label such as utf-8, windows-1251, \
             iso-8859-1, shift_jis, gbk, euc-kr or utf-16le"
        )),
    }
}

/// codebase_search's index. One per process: `kodik serve --http` builds a toolbox per MCP
/// session, and each would otherwise hold, build and save its own copy of the same workspace's
/// vectors.
static INDEX: std::sync::OnceLock<Option<Arc<kodik_tools::search::CodebaseIndex>>> = std::sync::OnceLock::new();

/// The toolbox every command uses: scripts of `codemode` run in a worker process of this same
/// program (`kodik codemode-worker`), so a script that runs away after an `await` is killed
/// instead of running on inside the command.
fn builder(workspace: PathBuf) -> kodik_tools::ToolboxBuilder {
    let builder = builder_without_embedder(workspace);
    let index = INDEX.get_or_init(|| embedder_from_env().map(|e| Arc::new(kodik_tools::search::CodebaseIndex::new(e))));
    match index {
        Some(index) => builder.search(kodik_tools::search::SearchToolset::new().codebase_index(Arc::clone(index))),
        None => builder,
    }
}

/// [`builder`] without codebase_search's embedder, whatever the environment says: for the
/// offline demo, whose project must not go to an embedding server.
fn builder_without_embedder(workspace: PathBuf) -> kodik_tools::ToolboxBuilder {
    let trusted = !UNTRUSTED.load(std::sync::atomic::Ordering::Relaxed);
    let settings = kodik_tools::core::Settings { files_encoding: FILES_ENCODING.get().cloned() };
    let builder = Toolbox::builder().workspace(workspace).trusted(trusted).settings(settings);
    match std::env::current_exe() {
        Ok(exe) => builder.codemode(
            kodik_tools::codemode::CodeModeConfig::default().worker(exe.to_string_lossy(), ["codemode-worker"]),
        ),
        Err(_) => builder,
    }
}

/// The embedder `codebase_search` needs (L7), from `KODIK_EMBEDDINGS_MODEL`,
/// `KODIK_EMBEDDINGS_URL` (default OpenAI's API) and `KODIK_EMBEDDINGS_KEY` (else
/// `OPENAI_API_KEY` for OpenAI's API): any OpenAI-compatible `/v1/embeddings` server (Ollama,
/// LM Studio, vLLM, …). `None` without a model, and then the tool is not offered; a bad
/// configuration is said once on stderr.
fn embedder_from_env() -> Option<Arc<dyn kodik_tools::core::Embedder>> {
    use kodik_tools::model::{EmbeddingsClient, EmbeddingsConfig};
    static WARNED: std::sync::Once = std::sync::Once::new();
    let made = EmbeddingsConfig::from_vars(|name| std::env::var(name).ok())
        .and_then(|config| config.map(EmbeddingsClient::new).transpose());
    match made {
        Ok(client) => client.map(|c| Arc::new(c) as Arc<dyn kodik_tools::core::Embedder>),
        Err(e) => {
            WARNED.call_once(|| eprintln!("kodik: codebase_search is off: {e} (KODIK_EMBEDDINGS_MODEL is set)"));
            None
        }
    }
}

fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("kodik: {msg}");
    ExitCode::from(2)
}

fn with_runtime<F: std::future::Future<Output = ExitCode>>(f: impl FnOnce() -> F) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => {
            let code = rt.block_on(f());
            // The index is a static, never dropped: what the command embedded is written now,
            // or a one-shot `kodik call` would leave the next one to embed it again.
            if let Some(Some(index)) = INDEX.get() {
                index.flush();
            }
            code
        }
        Err(e) => usage_error(format!("cannot start the async runtime: {e}")),
    }
}

fn schema(format: Format, names: &[String]) -> ExitCode {
    let all = kodik_tools::schema::all();
    let mut chosen = Vec::new();
    for name in names {
        match all.iter().find(|s| &s.name == name) {
            Some(s) => chosen.push(s.clone()),
            None => {
                let close = kodik_tools::core::registry::closest(name, all.iter().map(|s| s.name.as_str()), 3);
                let hint = kodik_tools::core::error::suggestions_suffix(&close);
                return usage_error(format!("unknown tool `{name}`{hint}"));
            }
        }
    }
    if names.is_empty() {
        chosen = all;
    }
    let rendered = providers::render_all(&chosen, format);
    match serde_json::to_string_pretty(&rendered) {
        Ok(s) => {
            // `kodik schema | head`: a reader that stopped early has what it wanted.
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{s}").and_then(|()| stdout.flush());
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(e),
    }
}

/// Connects the MCP servers of the workspace's and the user's `mcp.json` and of `files`;
/// servers that fail are reported on stderr and left out. `None` when none is configured.
/// `unset_env`: variables the servers do not inherit unless their `env` names them.
async fn mount_mcp(
    workspace: &std::path::Path,
    files: &[PathBuf],
    unset_env: &[&str],
) -> Result<Option<Arc<McpClient>>, ExitCode> {
    let mut config = McpConfig::load_default(workspace).map_err(usage_error)?;
    for file in files {
        config.merge(McpConfig::load(file).map_err(usage_error)?);
    }
    if config.is_empty() {
        return Ok(None);
    }
    let options = ClientOptions {
        base_dir: Some(workspace.to_path_buf()),
        unset_env: unset_env.iter().map(|v| (*v).to_owned()).collect(),
        ..ClientOptions::default()
    };
    // Interrupted while servers start (up to their 30 s deadline): dropping the connection
    // attempt kills the servers started so far; exiting in the signal's default way would
    // leave them running.
    let client = tokio::select! {
        client = McpClient::connect(&config, options) => client,
        () = interrupted() => {
            eprintln!("kodik: interrupted while starting the MCP servers");
            return Err(ExitCode::from(130));
        }
    };
    for e in client.errors() {
        eprintln!("kodik: {e}");
    }
    Ok(Some(Arc::new(client)))
}

/// Resolves on SIGINT or SIGTERM.
async fn interrupted() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `call`, `batch` and `serve` have no model to run sub-agents on and no person to ask:
/// `sub_agent` and `ask_questions` could only ever fail there, so they are not offered (G11).
fn without_model_or_person(b: kodik_tools::ToolboxBuilder) -> kodik_tools::ToolboxBuilder {
    b.disable("sub_agent").disable("ask_questions")
}

/// The builder for `workspace` with the configured MCP servers mounted.
async fn builder_with_mcp(
    workspace: PathBuf,
    mcp_config: &[PathBuf],
    unset_env: &[&str],
) -> Result<(kodik_tools::ToolboxBuilder, Option<Arc<McpClient>>), ExitCode> {
    let mcp = mount_mcp(&workspace, mcp_config, unset_env).await?;
    let b = builder(workspace);
    Ok(match &mcp {
        Some(client) => (b.mcp(Arc::clone(client)), mcp),
        None => (b, None),
    })
}

async fn toolbox(workspace: PathBuf, mcp_config: &[PathBuf]) -> Result<(Toolbox, Option<Arc<McpClient>>), ExitCode> {
    let (b, mcp) = builder_with_mcp(workspace, mcp_config, &[]).await?;
    let b = without_model_or_person(b);
    let tb = b.events(Arc::new(StderrEvents)).build().map_err(usage_error)?;
    // SIGINT and SIGTERM end `call` and `batch` after the browser (its profile and temporary
    // folders) and the mounted servers are stopped; dying of the signal would leave both. Once
    // the servers' start-up has listened for them, they would otherwise not end it at all.
    let (client, browser) = (mcp.clone(), Arc::clone(tb.browser()));
    tokio::spawn(async move {
        interrupted().await;
        eprintln!("kodik: interrupted");
        browser.shutdown().await;
        unmount(client).await;
        // What an interrupted first build embedded is kept for the next process.
        if let Some(Some(index)) = INDEX.get() {
            let index = Arc::clone(index);
            let _ = tokio::task::spawn_blocking(move || index.flush()).await;
        }
        std::process::exit(130);
    });
    Ok((tb, mcp))
}

/// Stops the mounted servers (their stdin closes, then they are killed) before exiting.
async fn unmount(mcp: Option<Arc<McpClient>>) {
    if let Some(client) = mcp {
        client.shutdown().await;
    }
}

async fn call(workspace: PathBuf, mcp_config: Vec<PathBuf>, tool: String, args: String) -> ExitCode {
    let args: Value = match serde_json::from_str(&args) {
        Ok(v) => v,
        Err(e) => return usage_error(format!("the arguments are not valid JSON: {e}")),
    };
    let (tb, mcp) = match toolbox(workspace, &mcp_config).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    seen_by_caller(&tb, &tool, &args);
    let out = tb.call(&ToolCall::new("call_1", tool, args)).await;
    let mut background = Background::default();
    background.note(&out);
    background.settle(&tb, "kodik call returned its result").await;
    // A clean browser exit writes its cookies to the profile (B1); a kill would lose them.
    tb.browser().shutdown().await;
    unmount(mcp).await;
    match serde_json::to_string(&out) {
        Ok(s) => {
            // A reader that stopped early (`| head`) leaves the result unread; the call still ran.
            let mut stdout = std::io::stdout();
            let _ = writeln!(stdout, "{s}").and_then(|()| stdout.flush());
        }
        Err(e) => return usage_error(e),
    }
    match out.status {
        ToolStatus::Success => ExitCode::SUCCESS,
        _ if out.meta["error_kind"] == "unknown_tool" => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

/// `kodik call` is one call in a fresh session, which has read nothing: the files the call
/// changes count as read at their current version, or an edit could never pass E2's "read it
/// first" (the person or script running `kodik call` looks at the file itself; the check that
/// the file did not change between that read and the edit still holds within the call).
fn seen_by_caller(tb: &Toolbox, tool: &str, args: &Value) {
    let Some(t) = tb.registry().get(tool).cloned() else {
        return;
    };
    let cx = tb.context();
    for resource in t.resources(args, &cx.workspace) {
        if let Resource::File(path) = resource
            && let Ok(version) = FileVersion::of_file(&path)
        {
            cx.session.record_read(&path, version, None);
        }
    }
}

/// The shell's default wait (S2), and the longest a command gets.
const DEFAULT_TIMEOUT_MS: u64 = 5_000;
const MAX_TIMEOUT_MS: u64 = 60_000;

/// Commands a `kodik call` or `kodik batch` sent to the background (S3, S4), with the timeout
/// their call gave them.
#[derive(Default)]
struct Background {
    timeouts: std::collections::HashMap<String, u64>,
    /// Every terminal a result said still runs something, the command or what it started with
    /// `&`, with its command line.
    terminals: std::collections::BTreeMap<String, String>,
}

impl Background {
    /// Remembers the command of a shell result that went to the background, or that left
    /// processes running in the background.
    fn note(&mut self, out: &ToolOutput) {
        let Some(id) = out.meta["terminal_id"].as_str() else {
            return;
        };
        if out.meta["running"] == true {
            let timeout = out.meta["timeout_ms"].as_u64().unwrap_or(DEFAULT_TIMEOUT_MS);
            self.timeouts.insert(id.to_owned(), timeout);
        }
        if out.meta["running"] == true || out.meta["background_running"] == true {
            let command = out.meta["command"].as_str().unwrap_or_default().to_owned();
            self.terminals.insert(id.to_owned(), command);
        }
    }

    /// The end of `kodik call` or of `kodik batch`'s input: the results said the commands still
    /// running would report by themselves, so each gets its own timeout once more (default
    /// 5 s, at most 60 s) to finish, and its end goes to stderr as a terminal event as usual.
    /// What still runs then is stopped (SIGTERM, then SIGKILL), and its final terminal event
    /// says `stopped` and why; so do processes a finished command left running with `&`, which
    /// are stopped at once. Without this, exiting killed them silently (S3, S10, S11).
    async fn settle(&self, tb: &Toolbox, ended: &str) {
        let shell = tb.shell();
        let start = tokio::time::Instant::now();
        let mut stopped = std::collections::HashSet::new();
        loop {
            let running = shell.running();
            if running.is_empty() {
                break;
            }
            for id in running {
                let timeout = self.timeouts.get(&id).copied().unwrap_or(DEFAULT_TIMEOUT_MS);
                let limit = std::time::Duration::from_millis(timeout.clamp(DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS));
                if start.elapsed() >= limit && !stopped.contains(&id) && shell.user_stop(&id) {
                    stopped.insert(id);
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // A stop made for the user is announced, not emitted: say it here, with the reason.
        let reason = format!("{ended} and the command still ran after waiting its timeout once more: kodik stopped it");
        let wait_until = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut unannounced = stopped.clone();
        while !unannounced.is_empty() {
            for ev in shell.take_announcements() {
                unannounced.remove(&ev.terminal_id);
                let mut line = serde_json::to_value(Event::Terminal(ev)).unwrap_or_default();
                if let Some(fields) = line.as_object_mut() {
                    fields.insert("reason".into(), Value::String(reason.clone()));
                }
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
            if tokio::time::Instant::now() >= wait_until {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Processes a finished command started with `&` (a dev server) would die with kodik
        // unannounced: stop them as kill_terminal does, and say so. A command stopped above
        // took its whole process group with it and has had its one final event; a second,
        // from kill_terminal, would say "stopped by the user … nothing was stopped".
        let reason = format!("{ended}: kodik stopped the processes the command had started in the background");
        for (id, command) in self.terminals.iter().filter(|(id, _)| !stopped.contains(*id)) {
            let kill = ToolCall::new(format!("end_{id}"), "kill_terminal", serde_json::json!({"terminal_id": id}));
            let out = tb.call(&kill).await;
            if out.status != ToolStatus::Stopped {
                continue;
            }
            let line = serde_json::json!({
                "event": "terminal",
                "terminal_id": id,
                "command": command,
                "exit_code": out.meta["exit_code"],
                "status": "stopped",
                "duration_ms": out.meta["duration_ms"],
                "unread_output": out.text_content(),
                "full_output": out.meta["full_output"],
                "reason": reason,
            });
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

/// One result line of `kodik batch`.
#[derive(Serialize)]
struct ResultLine<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(flatten)]
    output: &'a ToolOutput,
}

fn parse_line(line: &str, counter: &mut u64) -> Result<Vec<ToolCall>, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let items = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    items
        .into_iter()
        .map(|item| {
            *counter += 1;
            let name = item.get("name").and_then(Value::as_str).ok_or("each call needs a string `name`")?;
            let id = match item.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => format!("call_{counter}"),
            };
            let args = item.get("args").or_else(|| item.get("arguments")).cloned().unwrap_or(Value::Null);
            Ok(ToolCall::new(id, name, args))
        })
        .collect()
}

async fn batch(workspace: PathBuf, mcp_config: Vec<PathBuf>) -> ExitCode {
    let (tb, mcp) = match toolbox(workspace, &mcp_config).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let mut background = Background::default();
    let code = batch_lines(&tb, &mut background).await;
    background.settle(&tb, "kodik batch reached the end of its input").await;
    tb.browser().shutdown().await;
    unmount(mcp).await;
    code
}

/// Each input line is one message of the driving model (R4), and the driver has no way to say
/// that it compacted its context: the repeat after an "unchanged" hint runs afresh (G15).
async fn batch_lines(tb: &Toolbox, background: &mut Background) -> ExitCode {
    let session = &tb.context().session;
    session.set_compaction_unseen();
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut counter = 0u64;
    for (n, line) in stdin.lock().lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return usage_error(format!("reading stdin: {e}")),
        };
        if line.trim().is_empty() {
            continue;
        }
        let written = match parse_line(&line, &mut counter) {
            Ok(calls) => {
                session.next_message();
                let mut outs = tb.run_turn(&calls).await;
                let mut buf = String::new();
                for (c, o) in calls.iter().zip(&mut outs) {
                    session.explain_repeat(o);
                    background.note(o);
                    let rl = ResultLine { id: &c.id, name: &c.name, output: o };
                    buf.push_str(&serde_json::to_string(&rl).unwrap_or_default());
                    buf.push('\n');
                }
                buf
            }
            Err(msg) => {
                let out = ToolOutput::error(format!("line {}: {msg}", n + 1));
                let rl = ResultLine { id: "", name: "", output: &out };
                format!("{}\n", serde_json::to_string(&rl).unwrap_or_default())
            }
        };
        if stdout.write_all(written.as_bytes()).and_then(|()| stdout.flush()).is_err() {
            return ExitCode::SUCCESS;
        }
    }
    ExitCode::SUCCESS
}

/// `kodik serve`'s flags besides the workspace and the MCP configuration.
struct ServeOptions {
    mode: Mode,
    model: String,
    defer: bool,
    http: Option<std::net::SocketAddr>,
    token_file: Option<PathBuf>,
    session_idle: u64,
}

/// What `kodik serve` offers from `tb` now: the mode's tools, directly or deferred (G12),
/// and a scheduler over exactly the tools a call may name. A deferred tool called by its own
/// name runs as through `call_tool` (as in kodik's own agent, [`RequestPlan::callable`]); a
/// tool the mode or model cannot offer is answered with why (G10, G11).
///
/// [`RequestPlan::callable`]: kodik_tools::harness::RequestPlan::callable
fn serve_offer(
    tb: &Toolbox,
    mode: Mode,
    model: &str,
    defer: bool,
) -> (kodik_mcp::Offering, kodik_tools::harness::RequestPlan) {
    let mut harness = tb.harness();
    if !defer {
        // G12 shapes kodik's own requests; an MCP client has its own tool search.
        let names: Vec<String> = harness.entries().iter().map(|e| e.spec.name.clone()).collect();
        for name in names {
            harness.set_deferred(mode, name, false);
        }
    }
    let mut plan = harness.plan(mode, model);
    // Code mode reaches, and its catalog lists, only what this offering may use (G11, K7).
    let base = plan.narrow(&tb.registry());
    let mut registry = plan.registry(&base);
    let mut unlisted = Vec::new();
    for spec in &plan.deferred {
        if registry.get(&spec.name).is_none()
            && let Some(tool) = base.get(&spec.name)
        {
            registry.register_arc(Arc::clone(tool));
            unlisted.push(spec.name.clone());
        }
    }
    let mode_title = mode.title();
    let not_offered: Vec<(String, String)> = plan
        .left_out()
        .into_iter()
        .map(|(name, why)| {
            let text = match why {
                kodik_tools::harness::LeftOut::Respelled(tools) => format!(
                    "`{name}` is not offered to this model (`kodik serve --model {model}`): it changes files with {} \
                     instead.",
                    tools.join(", ")
                ),
                kodik_tools::harness::LeftOut::NotInMode => format!(
                    "`{name}` is not offered in {mode_title} mode (`kodik serve --mode {}`): use one of the listed \
                     tools, or ask the user to serve a mode that has it.",
                    mode.as_str()
                ),
                kodik_tools::harness::LeftOut::SwitchedOff => {
                    format!("`{name}` is switched off in {mode_title} mode: use one of the listed tools.")
                }
            };
            (name, text)
        })
        .collect();
    // A mounted tool's hints are its server's, not guessed from its effect (a read-only fetch
    // still reaches the open world).
    let annotations = match tb.mcp() {
        Some(client) => {
            plan.tools.iter().filter_map(|t| Some((t.name.clone(), client.annotations_of(&t.name)?))).collect()
        }
        None => Default::default(),
    };
    let offering = kodik_mcp::Offering {
        scheduler: kodik_tools::scheduler::Scheduler::new(registry),
        tools: plan.tools.iter().cloned().map(for_mcp_client).collect(),
        unlisted,
        not_offered,
        annotations,
    };
    (offering, plan)
}

/// What kodik's own agent does by itself and an MCP client does not: a background command's
/// end reaches the model only in its next tool result (the server appends it), never as an
/// event of its own, so no text the client's model reads may promise one or say "do not poll"
/// (S3, S5): not `shell`'s description, not its `timeout` parameter, not
/// `get_terminal_output`'s description. Nor may `send_message` promise that a closed
/// conversation starts working on a message: resuming one needs a model, which this server
/// has not (A5).
fn for_mcp_client(mut spec: kodik_tools::core::ToolSpec) -> kodik_tools::core::ToolSpec {
    const SHELL_EVENT: &str = "and its final exit code and remaining output arrive later automatically as a terminal \
         event — do not poll for it.";
    const SHELL_NEXT_RESULT: &str = "and once it ends, its exit code and remaining output are added to your next tool \
         result; call get_terminal_output when you need them before going on.";
    const TIMEOUT_EVENT: &str = "its outcome arrives later by itself.";
    const TIMEOUT_NEXT_RESULT: &str =
        "once it ends, its outcome is added to your next tool result (get_terminal_output shows it sooner).";
    const OUTPUT_EVENT: &str = "Only for an on-demand progress check: completion is delivered automatically as a \
         terminal event.";
    const OUTPUT_NEXT_RESULT: &str = "A command's end is also added to your next tool result; call this when you need \
         its output or exit code before going on.";
    const SEND_CLOSED: &str = "(a closed one starts working on it at once, as on a user message)";
    const SEND_CLOSED_ARG: &str = "(a closed one starts working on the message at once)";
    const SEND_CLOSED_HERE: &str = "(a closed one is not resumed from this server, which has no model: the message \
         is refused, and the user can resume it with `kodik agent --resume ID`)";
    match spec.name.as_str() {
        "shell" => {
            spec.description = spec.description.replace(SHELL_EVENT, SHELL_NEXT_RESULT);
            if let Some(Value::String(text)) = spec.input_schema.pointer_mut("/properties/timeout/description") {
                *text = text.replace(TIMEOUT_EVENT, TIMEOUT_NEXT_RESULT);
            }
        }
        "get_terminal_output" => spec.description = spec.description.replace(OUTPUT_EVENT, OUTPUT_NEXT_RESULT),
        // This server has no model: a closed conversation is refused with how to resume it (A5).
        "send_message" => {
            spec.description = spec.description.replace(SEND_CLOSED, SEND_CLOSED_HERE);
            if let Some(Value::String(text)) = spec.input_schema.pointer_mut("/properties/agent_id/description") {
                *text = text.replace(SEND_CLOSED_ARG, SEND_CLOSED_HERE);
            }
        }
        _ => {}
    }
    spec
}

/// One MCP server over a fresh toolbox (see [`serve_offer`]), and the number of tools it
/// lists. With MCP servers mounted it follows their `tools/list_changed`: it offers their new
/// tools from its next request and tells its own client.
fn session_server(
    workspace: &std::path::Path,
    mcp: Option<&Arc<McpClient>>,
    mode: Mode,
    model: &str,
    defer: bool,
) -> Result<(kodik_mcp::McpServer, usize), kodik_tools::BuildError> {
    // An MCP client shows notifications to its user at most: a command's end reaches the model
    // in its next result, so a backgrounded command's result must not say "do not poll" (S3).
    let shell = kodik_tools::shell::ShellToolset::new().events_not_delivered_to_model();
    let mut b = without_model_or_person(builder(workspace.to_path_buf())).shell(shell);
    if let Some(client) = mcp {
        b = b.mcp(Arc::clone(client));
    }
    let tb = Arc::new(b.build()?);
    let (offering, plan) = serve_offer(&tb, mode, model, defer);
    // Events reach the client as MCP logging notifications: the server forwards the context's
    // event sink to its peer, so the toolbox keeps no other sink (stdout is the protocol).
    // A mounted server's own instructions go on to our client as `kodik agent` uses them:
    // after kodik's guidance, fenced and labelled as that server's.
    let mut instructions = plan.guidance.clone();
    if let Some(servers) = tb.mcp_instructions() {
        instructions.push_str("\n\n");
        instructions.push_str(&servers);
    }
    let mut server = kodik_mcp::McpServer::offering(offering, tb.context().clone()).with_instructions(instructions);
    if let Some(client) = mcp {
        let model = model.to_owned();
        server = server.follow(client.subscribe(), move || serve_offer(&tb, mode, &model, defer).0);
    }
    Ok((server, plan.tools.len()))
}

/// Serves the mode's tool set over MCP on stdin/stdout until the client disconnects or
/// SIGTERM/SIGINT, or over streamable HTTP until SIGTERM/SIGINT.
async fn serve(workspace: PathBuf, mcp_config: Vec<PathBuf>, opts: ServeOptions) -> ExitCode {
    let mcp = match mount_mcp(&workspace, &mcp_config, &[]).await {
        Ok(m) => m,
        Err(code) => return code,
    };
    let (server, count) = match session_server(&workspace, mcp.as_ref(), opts.mode, &opts.model, opts.defer) {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    let ServeOptions { mode, model, defer, http, token_file, session_idle } = opts;
    let served = match http {
        None => {
            eprintln!("kodik: serving {count} tools over MCP (mode {}, model {model})", mode.as_str());
            // Listened for here too: once the mounted servers' start-up has taken the signals
            // over, nothing else would end a stdio server on SIGINT or SIGTERM.
            tokio::select! {
                served = server.serve_stdio() => served.map_err(|e| e.to_string()),
                () = interrupted() => Ok(()),
            }
        }
        Some(addr) => {
            drop(server);
            let token = match token_file {
                Some(path) => match std::fs::read_to_string(&path) {
                    Ok(t) => Some(t.trim().to_owned()),
                    Err(e) => return usage_error(format!("cannot read the token file {}: {e}", path.display())),
                },
                None => std::env::var("KODIK_SERVE_TOKEN").ok(),
            };
            if token.is_none() && !addr.ip().is_loopback() {
                return usage_error(kodik_mcp::HttpError::TokenRequired { addr });
            }
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => return usage_error(format!("cannot listen on {addr}: {e}")),
            };
            let bound = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.to_string());
            let options = kodik_mcp::HttpOptions {
                token,
                idle_timeout: std::time::Duration::from_secs(session_idle.max(1)),
                ..kodik_mcp::HttpOptions::default()
            };
            let shutdown = tokio_util::sync::CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                interrupted().await;
                stop.cancel();
            });
            let ws = workspace.clone();
            let client = mcp.clone();
            let factory = move || {
                session_server(&ws, client.as_ref(), mode, &model, defer).map(|(s, _)| s).map_err(std::io::Error::other)
            };
            eprintln!(
                "kodik: serving {count} tools over MCP streamable HTTP at http://{bound}/mcp (mode {})",
                mode.as_str()
            );
            kodik_mcp::serve_http(listener, factory, options, shutdown).await.map_err(|e| e.to_string())
        }
    };
    unmount(mcp).await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kodik: {e}");
            ExitCode::from(1)
        }
    }
}
