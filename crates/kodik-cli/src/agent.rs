//! `kodik agent`: one task run by the agent loop over the toolbox, with live progress on stderr
//! (or JSON Lines on stdout with `--json`) and the final answer on stdout.

use std::collections::HashMap;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kodik_tools::agent::{AgentConfig, AgentEvent, ApprovalMode, CancellationToken, Conversation, RunOutcome};
use kodik_tools::core::ToolStatus;
use kodik_tools::harness::Mode;
use kodik_tools::model::{ModelClient, ModelConfig, Provider, Usage};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{builder_without_embedder, demo, parse_approval, parse_mode, usage_error};

/// What `kodik agent` was asked to do.
#[derive(clap::Args)]
pub struct Args {
    /// The workspace root (ignored with --demo).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// The model id (gpt-5, claude-sonnet-4-5, llama3.1, …); default KODIK_MODEL.
    #[arg(long)]
    pub model: Option<String>,
    /// The wire API: openai-responses, chat-completions or anthropic; default KODIK_PROVIDER,
    /// else inferred from the model id.
    #[arg(long)]
    pub provider: Option<String>,
    /// The API root (e.g. http://127.0.0.1:11434/v1 for Ollama); default KODIK_BASE_URL, else
    /// the provider's.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The mode: code, ask, plan, debug or educator.
    #[arg(long, default_value = "code", value_parser = parse_mode)]
    pub mode: Mode,
    /// Which calls run: auto (all), read-only (reads and searches; changes and commands are
    /// denied) or deny (only pure reads).
    #[arg(long, default_value = "auto", value_parser = parse_approval)]
    pub approve: ApprovalMode,
    /// Model requests per run, at most (default 50).
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Wall-clock seconds per run, at most.
    #[arg(long, value_name = "SECS")]
    pub max_time: Option<u64>,
    /// The model's context window in tokens (default 200000): old tool outputs are shortened
    /// before a request would pass ~80 % of it. Set it for smaller local models.
    #[arg(long, value_name = "TOKENS")]
    pub context_window: Option<u64>,
    /// Seconds a run whose model has answered still waits for commands it left running in
    /// the background (default 120; 0: end at once).
    #[arg(long, value_name = "SECS")]
    pub background_wait: Option<u64>,
    /// JSON Lines on stdout (thread.started, turn.started, item.started, item.completed,
    /// turn.completed, result) instead of human progress.
    #[arg(long)]
    pub json: bool,
    /// Continue the conversation with this session id (see `.kodik/sessions/`).
    #[arg(long, conflicts_with = "last")]
    pub resume: Option<String>,
    /// Continue the newest conversation of the workspace.
    #[arg(long)]
    pub last: bool,
    /// Save every model response to FILE as a replayable recording.
    #[arg(long, value_name = "FILE", conflicts_with = "demo")]
    pub record: Option<PathBuf>,
    /// Replay the recorded demo session (no network, no key) on a fresh copy of the demo project.
    #[arg(long, conflicts_with_all = ["resume", "last", "model", "provider", "base_url"])]
    pub demo: bool,
    /// Where --demo puts its project: a new or empty folder (default: a new temporary folder).
    #[arg(long, value_name = "DIR", requires = "demo")]
    pub demo_dir: Option<PathBuf>,
    /// Mount the MCP servers of this `{"mcpServers": …}` file (besides the workspace's
    /// `.kodik/mcp.json` and the user's `~/.config/kodik/mcp.json`); repeatable.
    #[arg(long = "mcp-config", value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
    /// What to do.
    pub task: Option<String>,
}

pub async fn run(args: Args) -> ExitCode {
    if args.demo && args.task.is_some() {
        return usage_error("--demo runs its recorded task; give no task with it");
    }
    // A task of spaces only (an empty variable in a script) is no task: sent, Claude refuses it
    // and the saved conversation could not be resumed.
    let given = args.task.clone().filter(|t| !t.trim().is_empty());
    let Some(task) = given.or_else(|| args.demo.then(|| demo::TASK.to_owned())) else {
        return usage_error("no task given: kodik agent [OPTIONS] \"what to do\" (or --demo)");
    };
    if args.max_turns == Some(0) {
        return usage_error("--max-turns must be at least 1 (it counts model requests)");
    }
    // The server must outlive the run: dropping it stops the replay.
    let mut _replay = None;
    let (workspace, model) = if args.demo {
        let dir = match demo::prepare(args.demo_dir.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return usage_error(e),
        };
        let server = match demo::replay_server().await {
            Ok(s) => s,
            Err(e) => return usage_error(e),
        };
        eprintln!("kodik: demo project in {} (a recorded gpt-5 session, no network, no key)", dir.display());
        let config = ModelConfig::new(Provider::OpenAiResponses, demo::MODEL).base_url(server.base_url()).retries(0);
        _replay = Some(server);
        (dir, kodik_tools::model::client(config))
    } else {
        (args.workspace.clone(), model_config(&args).and_then(kodik_tools::model::client))
    };
    let model: Arc<dyn ModelClient> = match model {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    // ask_questions reaches the person at this terminal; without one, questions get no answer
    // and the model is told to go on stating its assumptions (A6).
    let mut conversation_tools = kodik_tools::conversation::ConversationToolset::builder();
    let person = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if person {
        conversation_tools = conversation_tools.asker(Arc::new(kodik_tools::conversation::TerminalAsker));
    }
    // The model's key stays with the model client: a command's `env`, or a mounted server that
    // reads its environment, would show it to the model (and put it in the transcript and in
    // --record files). A server that needs a key names it in its `env`.
    let keys = [Provider::OpenAiResponses.key_var(), Provider::Anthropic.key_var(), "KODIK_EMBEDDINGS_KEY"];
    // MCP servers of the workspace, the user and --mcp-config join the tools (A8); the demo is
    // a fixed recording and mounts none.
    let (tools, mcp) = if args.demo {
        // No network: the demo's project is never sent to an embedding server either (L7).
        (builder_without_embedder(workspace.clone()), None)
    } else {
        match crate::builder_with_mcp(workspace.clone(), &args.mcp_config, &keys).await {
            Ok(b) => b,
            Err(code) => return code,
        }
    };
    let shell = keys.into_iter().fold(kodik_tools::shell::ShellToolset::new(), |shell, k| shell.unset_env(k));
    // With nobody at a terminal ask_questions could only ever fail: not offered (G11).
    let tools = if person { tools } else { tools.disable("ask_questions") };
    let toolbox =
        match tools.approver(args.approve.approver()).conversation(conversation_tools.build()).shell(shell).build() {
            Ok(t) => t,
            Err(e) => return usage_error(e),
        };
    // codebase_search's index builds (or catches up) while the model reads the task (L7).
    if let Some(index) = toolbox.codebase_index() {
        index.warm(&toolbox.context().workspace).await;
    }
    let mut config = AgentConfig::default().mode(args.mode);
    if let Some(n) = args.max_turns {
        config = config.max_turns(n);
    }
    if let Some(secs) = args.max_time {
        config = config.max_wall(Duration::from_secs(secs));
    }
    if let Some(tokens) = args.context_window {
        config = config.context_window(tokens);
    }
    if let Some(secs) = args.background_wait {
        config = config.background_wait(Duration::from_secs(secs));
    }
    // sub_agent children run on the same model, each in its own session (A3, A5).
    toolbox.enable_sub_agents(Arc::clone(&model), config.clone());
    let agent = toolbox.agent(model, config);
    // agent_status lists this conversation to other processes too (A4).
    let store = Arc::new(kodik_tools::conversation::FileStore::for_workspace(&workspace));
    // Listed by its full path, as `agent_status`'s `workspace` filter is given it, not as typed
    // here (`.`, `ws7`).
    let listed = std::fs::canonicalize(&workspace).unwrap_or_else(|_| workspace.clone());
    let published = kodik_tools::publish_sessions(&agent, store, listed);
    let mut events = agent.subscribe();
    let conversation = match (&args.resume, args.last) {
        (Some(id), _) => agent.resume(id),
        (None, true) => agent.resume_last(),
        (None, false) => agent.start(),
    };
    let mut conversation = match conversation {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };

    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    // SIGTERM (`timeout`, `docker stop`, a CI cancel) ends the run as Ctrl-C does: its calls are
    // cancelled and the browser and mounted servers stopped before exiting. Once the servers'
    // start-up has listened for SIGTERM, it would otherwise not end the process at all.
    tokio::spawn(async move {
        crate::interrupted().await;
        on_interrupt.cancel();
        // A second signal does not wait for the calls to wind down.
        crate::interrupted().await;
        eprintln!("kodik: interrupted twice; exiting without waiting for the run to stop");
        std::process::exit(130);
    });

    let mut out: Box<dyn Output> = if args.json { Box::new(JsonLines::default()) } else { Box::new(Human::new()) };
    let outcome = drive(&mut conversation, &task, cancel, &mut events, out.as_mut()).await;
    out.finish(&outcome, conversation.id());
    toolbox.browser().shutdown().await;
    crate::unmount(mcp).await;
    // The listing's last writes (idle with the title and context fill, then closed) come when
    // the agent's events end: without waiting for them the process often exited first and left
    // the conversation listed "running", untitled (A4). Bounded, as a listing never holds a run.
    drop(conversation);
    drop(agent);
    let _ = tokio::time::timeout(Duration::from_secs(5), published).await;
    ExitCode::from(u8::try_from(outcome.status.exit_code()).unwrap_or(1))
}

/// The model configuration from the environment (`KODIK_MODEL`, `KODIK_PROVIDER`,
/// `KODIK_BASE_URL`, the provider's key), the flags taking precedence.
fn model_config(args: &Args) -> Result<ModelConfig, kodik_tools::model::ModelError> {
    let flag = |name: &str| match name {
        "KODIK_MODEL" => args.model.clone(),
        "KODIK_PROVIDER" => args.provider.clone(),
        "KODIK_BASE_URL" => args.base_url.clone(),
        _ => None,
    };
    let config = ModelConfig::from_vars(|name| flag(name).or_else(|| std::env::var(name).ok()))?;
    Ok(match &args.record {
        Some(path) => config.record_to(path),
        None => config,
    })
}

/// Runs the task while showing every event; the events a finished run left in the channel are
/// shown before its outcome (a broadcast send completes before `run` returns).
async fn drive(
    conversation: &mut Conversation,
    task: &str,
    cancel: CancellationToken,
    events: &mut broadcast::Receiver<AgentEvent>,
    out: &mut dyn Output,
) -> RunOutcome {
    let run = conversation.run(task, cancel);
    tokio::pin!(run);
    let outcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            event = events.recv() => match event {
                Ok(event) => out.event(event),
                Err(broadcast::error::RecvError::Lagged(n)) => out.lagged(n),
                Err(broadcast::error::RecvError::Closed) => {}
            },
        }
    };
    loop {
        match events.try_recv() {
            Ok(event) => out.event(event),
            Err(broadcast::error::TryRecvError::Lagged(n)) => out.lagged(n),
            Err(_) => break,
        }
    }
    outcome
}

/// Where a run is shown.
trait Output {
    fn event(&mut self, event: AgentEvent);
    fn lagged(&mut self, missed: u64);
    fn finish(&mut self, outcome: &RunOutcome, session_id: &str);
}

/// `--json`: one JSON object per line on stdout, in the style of `codex exec --json`.
#[derive(Default)]
struct JsonLines {
    next_item: u64,
    /// call id → (item id, name, arguments) of calls that started.
    calls: HashMap<String, (String, String, Value)>,
}

impl JsonLines {
    fn item_id(&mut self) -> String {
        self.next_item += 1;
        format!("item_{}", self.next_item - 1)
    }

    fn line(&self, value: &Value) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{value}");
        let _ = stdout.flush();
    }
}

impl Output for JsonLines {
    fn event(&mut self, event: AgentEvent) {
        let line = match event {
            AgentEvent::SessionStarted { session_id, .. } => json!({"type": "thread.started", "thread_id": session_id}),
            AgentEvent::TurnStarted { .. } => json!({"type": "turn.started"}),
            AgentEvent::TextDelta { .. } | AgentEvent::UserMessage { .. } => return,
            AgentEvent::ToolCallStarted { call_id, name, args } => {
                let id = self.item_id();
                let item = json!({"id": id, "type": "tool_call", "call_id": call_id, "name": name,
                    "arguments": args, "status": "in_progress"});
                self.calls.insert(call_id, (id, name, args));
                json!({"type": "item.started", "item": item})
            }
            AgentEvent::ToolCallFinished { call_id, name, status, duration_ms, output } => {
                // A call that never started (denied, skipped) has no item yet.
                let (id, name, args) = match self.calls.remove(&call_id) {
                    Some(started) => started,
                    None => (self.item_id(), name, Value::Null),
                };
                json!({"type": "item.completed", "item": {"id": id, "type": "tool_call", "call_id": call_id,
                    "name": name, "arguments": args, "status": status.as_str(), "duration_ms": duration_ms,
                    "output": output}})
            }
            AgentEvent::AssistantMessage { text } => {
                json!({"type": "item.completed", "item": {"id": self.item_id(), "type": "agent_message", "text": text}})
            }
            AgentEvent::Reasoning { text } => {
                json!({"type": "item.completed", "item": {"id": self.item_id(), "type": "reasoning", "text": text}})
            }
            AgentEvent::TurnCompleted { usage, .. } => json!({"type": "turn.completed", "usage": usage}),
            AgentEvent::WaitingForBackground { terminals, up_to_secs } => {
                json!({"type": "background.waiting", "terminals": terminals, "up_to_secs": up_to_secs})
            }
            AgentEvent::RunFinished { .. } => return,
        };
        self.line(&line);
    }

    fn lagged(&mut self, missed: u64) {
        self.line(&json!({"type": "error", "message": format!("{missed} progress events were dropped")}));
    }

    fn finish(&mut self, outcome: &RunOutcome, session_id: &str) {
        self.line(&json!({"type": "result", "status": outcome.status, "turns": outcome.turns,
            "usage": outcome.usage, "final_text": outcome.final_text, "session_id": session_id,
            "error": outcome.error}));
    }
}

/// Human progress on stderr (a spinner per running call on a terminal, plain lines otherwise)
/// and the final answer on stdout.
struct Human {
    tty: bool,
    bars: MultiProgress,
    /// call id → its label and, on a terminal, its spinner.
    running: HashMap<String, (String, Option<ProgressBar>)>,
    /// The current turn's text as it streams.
    turn_text: String,
    /// Whether `turn_text` was shown already (it was a preamble to tool calls).
    text_shown: bool,
    /// A turn's complete text not shown yet: shown when another turn follows; the last one is
    /// the answer, which goes to stdout instead.
    pending_text: Option<String>,
    /// Calls that wait for the person at this terminal (ask_questions, check_understanding):
    /// while any runs, the spinners are not drawn — each frame clears its line, which would
    /// erase the question's prompt and what the person types after it.
    asking: usize,
}

/// Tools whose calls prompt the person on this terminal and read the answer from it.
const ASKS_THE_PERSON: [&str; 2] = ["ask_questions", "check_understanding"];

impl Human {
    fn new() -> Self {
        let tty = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let target = if tty { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Self {
            tty,
            bars: MultiProgress::with_draw_target(target),
            running: HashMap::new(),
            turn_text: String::new(),
            text_shown: false,
            pending_text: None,
            asking: 0,
        }
    }

    fn println(&self, line: &str) {
        if self.tty && self.asking == 0 {
            let _ = self.bars.println(line);
        } else {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.tty { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn say(&self, text: &str) {
        if !text.trim().is_empty() {
            self.println(&self.paint("2", &format!("· {}", text.trim())));
        }
    }
}

impl Output for Human {
    fn event(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::SessionStarted { session_id, model, mode, resumed } => {
                let verb = if resumed { "resumed" } else { "session" };
                self.println(&self.paint("2", &format!("kodik {verb} {session_id} · {model} · {mode} mode")));
            }
            AgentEvent::TurnStarted { .. } => {
                if let Some(text) = self.pending_text.take() {
                    self.say(&text);
                }
                self.turn_text.clear();
                self.text_shown = false;
            }
            AgentEvent::TextDelta { text } => self.turn_text.push_str(&text),
            AgentEvent::AssistantMessage { text } => {
                if !self.text_shown {
                    self.pending_text = Some(text);
                }
            }
            AgentEvent::TurnCompleted { .. }
            | AgentEvent::RunFinished { .. }
            | AgentEvent::Reasoning { .. }
            | AgentEvent::UserMessage { .. } => {}
            AgentEvent::WaitingForBackground { terminals, up_to_secs } => {
                if let Some(text) = self.pending_text.take() {
                    self.say(&text);
                    self.text_shown = true;
                }
                let what = terminals.join(", ");
                self.println(&self.paint("2", &format!("… waiting up to {up_to_secs} s for {what}, left running")));
            }
            AgentEvent::ToolCallStarted { call_id, name, args } => {
                // Text before a turn's calls is a preamble, not the answer: show it first.
                if !self.text_shown {
                    let text = self.pending_text.take().unwrap_or_else(|| self.turn_text.clone());
                    self.say(&text);
                    self.text_shown = true;
                }
                let label = call_label(&name, &args);
                if self.tty && ASKS_THE_PERSON.contains(&name.as_str()) {
                    self.asking += 1;
                    self.bars.set_draw_target(ProgressDrawTarget::hidden());
                    self.println(&format!("→ {label}"));
                    self.running.insert(call_id, (label, None));
                    return;
                }
                let bar = if self.tty {
                    let bar = self.bars.add(ProgressBar::new_spinner());
                    if let Ok(style) = ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}") {
                        bar.set_style(style);
                    }
                    bar.set_message(label.clone());
                    bar.enable_steady_tick(Duration::from_millis(80));
                    Some(bar)
                } else {
                    self.println(&format!("→ {label}"));
                    None
                };
                self.running.insert(call_id, (label, bar));
            }
            AgentEvent::ToolCallFinished { call_id, name, status, duration_ms, output } => {
                let (mark, colour) = match status {
                    ToolStatus::Success => ("✓", "32"),
                    ToolStatus::Denied | ToolStatus::Skipped | ToolStatus::Cancelled => ("–", "33"),
                    _ => ("✗", "31"),
                };
                let shell = name == "shell";
                if self.tty && ASKS_THE_PERSON.contains(&name.as_str()) && self.running.contains_key(&call_id) {
                    self.asking = self.asking.saturating_sub(1);
                    if self.asking == 0 {
                        self.bars.set_draw_target(ProgressDrawTarget::stderr());
                    }
                }
                let label = match self.running.remove(&call_id) {
                    Some((label, bar)) => {
                        if let Some(bar) = bar {
                            bar.finish_and_clear();
                            self.bars.remove(&bar);
                        }
                        label
                    }
                    None => name,
                };
                let secs = format!("{:.1} s", duration_ms as f64 / 1000.0);
                let mut line = format!("{} {label} {}", self.paint(colour, mark), self.paint("2", &secs));
                if status != ToolStatus::Success {
                    line.push_str(&format!(" {}", status.as_str()));
                    let tail: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
                    let tail = tail[tail.len().saturating_sub(2)..].join(" · ");
                    line.push_str(&self.paint("2", &format!(" — {}", clip(&tail, 120))));
                } else if let Some(id) = background_terminal(&output).filter(|_| shell) {
                    line.push_str(&self.paint("2", &format!(" · still running in the background as {id}")));
                }
                self.println(&line);
            }
        }
    }

    fn lagged(&mut self, missed: u64) {
        self.println(&format!("({missed} progress events were dropped)"));
    }

    fn finish(&mut self, outcome: &RunOutcome, session_id: &str) {
        for (_, (_, bar)) in self.running.drain() {
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        }
        let Usage { input_tokens, output_tokens, .. } = outcome.usage;
        let summary = format!(
            "{} · {} turn(s) · {input_tokens} in / {output_tokens} out tokens · session {session_id}",
            outcome.status, outcome.turns
        );
        self.println(&self.paint("2", &summary));
        if let Some(error) = &outcome.error {
            self.println(&format!("kodik: {error}"));
        }
        if !outcome.final_text.is_empty() {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", outcome.final_text.trim_end());
            let _ = stdout.flush();
        }
    }
}

/// The terminal id of a command a `shell` result left running (its state line says so, S3).
fn background_terminal(output: &str) -> Option<&str> {
    output.lines().rev().find_map(|line| {
        let rest = line.strip_prefix("[terminal ")?;
        let (id, state) = rest.split_once(" · ")?;
        state.starts_with("still running").then_some(id)
    })
}

/// One line naming a call and what it works on: `shell sh test.sh`, `grep "TODO"`, …; a
/// deferred tool called through `call_tool` shows as itself.
fn call_label(name: &str, args: &Value) -> String {
    if name == "call_tool"
        && let Some(inner) = args.get("name").and_then(Value::as_str)
    {
        return call_label(inner, args.get("arguments").unwrap_or(&Value::Null));
    }
    let s = |key: &str| args.get(key).and_then(Value::as_str);
    let detail = match name {
        "shell" => s("command").map(str::to_owned),
        "grep" | "glob" => s("pattern").map(|p| format!("{p:?}")),
        "get_terminal_output" | "kill_terminal" => s("terminal_id").map(str::to_owned),
        "apply_patch" => s("input").map(|patch| {
            let files: Vec<&str> =
                patch.lines().filter_map(|l| l.split_once(" File: ").map(|(_, path)| path.trim())).collect();
            files.join(", ")
        }),
        "codemode" => s("code").map(|code| {
            let lines = code.lines().count();
            let first = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
            format!("{} ({lines} lines)", first.trim_start_matches("//").trim())
        }),
        _ => s("path").or_else(|| s("target_notebook")).map(str::to_owned),
    };
    match detail {
        Some(d) if !d.is_empty() => format!("{name} {}", clip(&d, 80)),
        _ => name.to_owned(),
    }
}

fn clip(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None if line.len() < text.trim_end().len() => format!("{line} …"),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_labels_name_what_a_call_works_on() {
        let grep = json!({"name": "grep", "arguments": {"pattern": "slugify"}});
        assert_eq!(call_label("call_tool", &grep), "grep \"slugify\"");
        assert_eq!(call_label("shell", &json!({"command": "sh test.sh"})), "shell sh test.sh");
        let patch = json!({"input": "*** Begin Patch\n*** Update File: a.sh\n@@\n-x\n+y\n*** End Patch\n"});
        assert_eq!(call_label("apply_patch", &patch), "apply_patch a.sh");
        let code = json!({"code": "// note the fix\nawait tools.read_file({path: 'a'});\n"});
        assert_eq!(call_label("codemode", &code), "codemode note the fix (2 lines)");
        assert_eq!(call_label("tool_search", &json!({"query": "lsp"})), "tool_search");
    }

    #[test]
    fn s3_a_backgrounded_command_is_recognised_by_its_state_line() {
        let out = "ok\n[terminal term-2 · still running · 1.1 s]\n[still running 1 s after …]";
        assert_eq!(background_terminal(out), Some("term-2"));
        assert_eq!(background_terminal("ok\n[exit code 0 · 2.0 s]"), None);
    }
}
