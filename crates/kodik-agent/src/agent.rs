//! [`Agent`] and [`Conversation`]: the loop that streams a response, runs its calls as they
//! complete and feeds their results back until the model answers.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kodik_core::{Event, EventSink, TerminalEvent, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolStatus};
use kodik_harness::{Harness, ModelFamily};
use kodik_model::{Item, ModelClient, ModelError, ModelEvent, Request, StopReason, ToolDef, Usage};
use kodik_scheduler::{Scheduler, SchedulerConfig};
use kodik_schema::providers::{APPLY_PATCH, APPLY_PATCH_LARK_GRAMMAR};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::events::{AgentEvent, RunOutcome, RunStatus};
use crate::observe::{Observed, Settled, claim, head, model_result, model_text};
use crate::transcript::{self, Record, Writer};

/// Events kept for a slow subscriber before it starts missing some.
const EVENT_BUFFER: usize = 4096;
/// Compaction starts when a request would fill this share of the context window (G20).
const COMPACT_AT: f64 = 0.8;
/// How often in a row an answer cut off at the output-token limit is continued.
const MAX_CONTINUATIONS: u32 = 3;
/// What the model reads after its answer was cut off at the output-token limit.
const CONTINUE_NOTE: &str = "[Your answer was cut off at the output-token limit. Continue exactly where it \
     stopped, without repeating anything or apologising.]";
/// What an image in a tool result counts for in the request-size estimate: providers bill an
/// image by its pixels (about 1,600 tokens for a downscaled screenshot), not by its base64 size.
const IMAGE_BYTES: usize = 6_400;
/// Results shorter than this are not worth compacting.
const COMPACT_MIN_BYTES: usize = 256;

/// Everything the conversations of one agent share.
#[derive(Clone)]
struct Shared {
    model: Arc<dyn ModelClient>,
    registry: Arc<ToolRegistry>,
    context: ToolContext,
    harness: Harness,
    scheduler: SchedulerConfig,
    config: AgentConfig,
    events: broadcast::Sender<AgentEvent>,
    /// Background commands that settled since the last request (S3, S5).
    inbox: Arc<TerminalInbox>,
    /// Other sources of notes for the next request ([`Agent::with_notes`]).
    notes: Vec<Arc<dyn Notes>>,
    /// Where each request takes its tools and policy from, when they may change
    /// ([`Agent::with_tool_source`]); otherwise `registry` and `harness` are used.
    source: Option<Arc<dyn ToolSource>>,
}

/// Tools that may change between requests — an MCP server's `tools/list_changed` adds or
/// removes `server__tool` entries — read once per request: each request offers what the
/// source holds then, while calls already running keep the tools they started with.
pub trait ToolSource: Send + Sync {
    /// The registry and policy in force now.
    fn current(&self) -> (Arc<ToolRegistry>, Arc<Harness>);

    /// Text for the end of the system prompt that comes with these tools, read on every
    /// request: the mounted MCP servers' `instructions`, fenced and labelled as theirs.
    /// Default: none.
    fn instructions(&self) -> Option<String> {
        None
    }
}

/// A source of messages that arrive between requests from outside the loop — a background
/// sub-agent's report (A3) — each put before the model's next request as a note.
pub trait Notes: Send + Sync {
    /// The messages that arrived since the last call; each is handed out once.
    fn take(&self) -> Vec<String>;

    /// The messages for conversation `session_id`'s next request (default: [`take`](Self::take)),
    /// for sources that keep a mailbox per conversation (A5: a message from another process).
    fn take_for(&self, session_id: &str) -> Vec<String> {
        let _ = session_id;
        self.take()
    }

    /// Work of conversation `session_id` still running in the background that will report
    /// through [`take_for`](Self::take_for) when it settles — background sub-agents (A3) — as
    /// `what (detail)` lines. A run that would end waits for it as for background commands (up
    /// to [`AgentConfig::background_wait`]) and otherwise names it. Default: none.
    fn running(&self, session_id: &str) -> Vec<String> {
        let _ = session_id;
        Vec::new()
    }

    /// Conversation `session_id` was reloaded from its transcript: `results` are its tool
    /// results' metas as (tool name, meta), in order, for a source that keeps state the tools
    /// changed (the todo list) to put it back. Default: nothing.
    fn resumed(&self, session_id: &str, results: &[(String, serde_json::Value)]) {
        let _ = (session_id, results);
    }

    /// Conversation `session_id`'s run ended cancelled: stop what it left running in the
    /// background, such as its background sub-agents (G6, A3). Default: nothing.
    fn run_cancelled(&self, session_id: &str) {
        let _ = session_id;
    }
}

/// Passes every tool event on to the host's sink and keeps the ends of background commands
/// for the model: each goes into the next request as a note, so a command that outlived its
/// `shell` call still reports its exit code and last output (S3, S5, S9).
struct TerminalInbox {
    host: Arc<dyn EventSink>,
    settled: Mutex<Vec<TerminalEvent>>,
    /// Wakes a run waiting for its background commands (one permit is kept if none waits).
    arrived: tokio::sync::Notify,
}

impl EventSink for TerminalInbox {
    fn emit(&self, event: Event) {
        if let Event::Terminal(t) = &event {
            self.settled.lock().unwrap_or_else(|p| p.into_inner()).push(t.clone());
            self.arrived.notify_one();
        }
        self.host.emit(event);
    }
}

impl TerminalInbox {
    fn take(&self) -> Vec<TerminalEvent> {
        std::mem::take(&mut *self.settled.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn is_empty(&self) -> bool {
        self.settled.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }
}

/// What the model reads about a background command that settled.
fn terminal_note(t: &TerminalEvent) -> String {
    let how = match t.exit_code {
        Some(code) => format!("exited with code {code}"),
        None => format!("ended ({})", t.status),
    };
    let mut note = format!(
        "[terminal event] `{}` in {} {how} after {:.1} s.",
        t.command,
        t.terminal_id,
        t.duration_ms as f64 / 1000.0
    );
    if t.unread_output.is_empty() {
        note.push_str(" No output you have not seen.");
    } else {
        note.push_str(" Output you have not seen:\n");
        note.push_str(&t.unread_output);
    }
    if let Some(p) = &t.full_output {
        note.push_str(&format!("\n[full output: {}]", p.display()));
    }
    note
}

impl Shared {
    /// Whether anyone listens: events that cost a copy are built only then.
    fn listening(&self) -> bool {
        self.events.receiver_count() > 0
    }

    fn emit(&self, event: AgentEvent) {
        // Err only means nobody subscribed; the run does not depend on listeners.
        let _ = self.events.send(event);
    }

    fn sessions_dir(&self) -> Result<PathBuf, AgentError> {
        match &self.config.sessions_dir {
            Some(d) => Ok(d.clone()),
            None => self
                .context
                .workspace
                .roots()
                .first()
                .map(|r| r.join(".kodik").join("sessions"))
                .ok_or(AgentError::NoSessionsDir),
        }
    }
}

/// A model, the tools and the policy; starts and resumes [`Conversation`]s.
pub struct Agent {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.shared.model.model())
            .field("tools", &self.shared.registry)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent over `model` and every tool of `registry`; `harness` decides per request which
    /// of them the model is offered, `context` is what calls run with (its approver decides
    /// what may run, see [`ApprovalMode`](crate::ApprovalMode)).
    pub fn new(
        model: Arc<dyn ModelClient>,
        registry: Arc<ToolRegistry>,
        context: ToolContext,
        harness: Harness,
        config: AgentConfig,
    ) -> Self {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let mut context = context;
        let inbox = Arc::new(TerminalInbox {
            host: Arc::clone(&context.events),
            settled: Mutex::new(Vec::new()),
            arrived: tokio::sync::Notify::new(),
        });
        context.events = inbox.clone();
        Self {
            shared: Arc::new(Shared {
                inbox,
                notes: Vec::new(),
                source: None,
                model,
                registry,
                context,
                harness,
                scheduler: SchedulerConfig::default(),
                config,
                events,
            }),
        }
    }

    /// Adds a source of notes for the model's next request (e.g. background sub-agents' reports).
    pub fn with_notes(mut self, notes: Arc<dyn Notes>) -> Self {
        Arc::make_mut(&mut self.shared).notes.push(notes);
        self
    }

    /// Reads the tools and the policy from `source` on every request instead of the fixed
    /// ones given to [`new`](Self::new), so tools added or removed meanwhile apply from the next
    /// request.
    pub fn with_tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        Arc::make_mut(&mut self.shared).source = Some(source);
        self
    }

    /// Replaces the scheduler configuration (concurrency, per-call timeout, output bound).
    pub fn with_scheduler_config(mut self, config: SchedulerConfig) -> Self {
        Arc::make_mut(&mut self.shared).scheduler = config;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.shared.config
    }

    /// Every event of every conversation of this agent, from now on. A receiver that falls more
    /// than 4096 events behind loses the oldest ones (`RecvError::Lagged`); the run never waits
    /// for a receiver.
    pub fn subscribe(&self) -> broadcast::Receiver<AgentEvent> {
        self.shared.events.subscribe()
    }

    /// Where transcripts are written.
    pub fn sessions_dir(&self) -> Result<PathBuf, AgentError> {
        self.shared.sessions_dir()
    }

    /// Starts a conversation with a new session id and a new transcript.
    pub fn start(&self) -> Result<Conversation, AgentError> {
        self.start_as(None)
    }

    /// Starts the conversation of a sub-agent that session `parent` started (A3). Its
    /// transcript names the parent, and [`resume_last`](Self::resume_last) passes over it:
    /// the user's next message belongs to the conversation they had, not to a child of it.
    pub fn start_child(&self, parent: &str) -> Result<Conversation, AgentError> {
        self.start_as(Some(parent))
    }

    fn start_as(&self, parent: Option<&str>) -> Result<Conversation, AgentError> {
        let s = &self.shared;
        let dir = s.sessions_dir()?;
        std::fs::create_dir_all(&dir).map_err(|source| AgentError::Io {
            action: "cannot create",
            path: dir.clone(),
            source,
        })?;
        if s.config.sessions_dir.is_none() {
            // Transcripts in the workspace hold tool outputs a model's `git add -A` would
            // otherwise commit; ignoring them is housekeeping, not a reason to fail.
            let _ = kodik_core::workspace::hide_from_git(&dir, "kodik conversation transcripts");
        }
        let mut attempt = 0;
        let (id, path, mut writer) = loop {
            let id = transcript::new_id();
            let path = transcript::path_of(&dir, &id);
            match Writer::create(&path) {
                Ok(w) => break (id, path, w),
                // Two sessions in the same millisecond with the same random suffix: draw again.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
                Err(source) => return Err(AgentError::Io { action: "cannot create", path, source }),
            }
        };
        let meta = Record::Meta {
            version: transcript::VERSION,
            session_id: id.clone(),
            model: s.model.model().to_string(),
            mode: s.config.mode.as_str().to_string(),
            created: transcript::now_rfc3339(),
            parent: parent.map(str::to_owned),
        };
        writer.append(&meta).map_err(|source| AgentError::Io { action: "cannot write", path: path.clone(), source })?;
        s.emit(AgentEvent::SessionStarted {
            session_id: id.clone(),
            model: s.model.model().to_string(),
            mode: s.config.mode.as_str().to_string(),
            resumed: false,
        });
        Ok(Conversation::new(Arc::clone(s), id, path, dir, writer, transcript::Loaded::default()))
    }

    /// Reloads the conversation `id` (a file name in the sessions directory, `.jsonl` optional)
    /// and continues its transcript.
    pub fn resume(&self, id: &str) -> Result<Conversation, AgentError> {
        let id = id.strip_suffix(".jsonl").unwrap_or(id);
        if !transcript::valid_id(id) {
            return Err(AgentError::BadId(id.to_string()));
        }
        let dir = self.shared.sessions_dir()?;
        let path = transcript::path_of(&dir, id);
        if !path.is_file() {
            return Err(AgentError::NotFound { id: id.to_string(), dir });
        }
        self.reopen(id.to_string(), path, dir)
    }

    /// Reloads the conversation the user spoke in last: the transcript written last (every
    /// turn and every resume appends to it), sub-agents' conversations left out.
    pub fn resume_last(&self) -> Result<Conversation, AgentError> {
        let dir = self.shared.sessions_dir()?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(AgentError::NoSessions { dir }),
            Err(source) => return Err(AgentError::Io { action: "cannot list", path: dir, source }),
        };
        // By last activity, not by creation (an older conversation resumed since is the
        // current one); the id, which starts with the creation time, breaks ties.
        let mut sessions: Vec<(std::time::SystemTime, String)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let id = e.file_name().to_str().and_then(|n| n.strip_suffix(".jsonl")).map(String::from)?;
                let written = e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
                Some((written, id))
            })
            .filter(|(_, id)| transcript::valid_id(id))
            .collect();
        sessions.sort_unstable_by(|a, b| b.cmp(a));
        let newest =
            sessions.into_iter().map(|(_, id)| id).find(|id| !transcript::is_sub_agent(&transcript::path_of(&dir, id)));
        match newest {
            Some(id) => {
                let path = transcript::path_of(&dir, &id);
                self.reopen(id, path, dir)
            }
            None => Err(AgentError::NoSessions { dir }),
        }
    }

    fn reopen(&self, id: String, path: PathBuf, dir: PathBuf) -> Result<Conversation, AgentError> {
        let s = &self.shared;
        // Locked before it is read: its last line may be one the running writer is still
        // writing, which must not be cut off as a crash's remains.
        let Some(mut writer) = Writer::open(&path)? else {
            return Err(AgentError::Running { id });
        };
        let (loaded, keep) = transcript::load(&path)?;
        writer.truncate_to(&path, keep)?;
        let resumed = Record::Resumed {
            model: s.model.model().to_string(),
            mode: s.config.mode.as_str().to_string(),
            at: transcript::now_rfc3339(),
        };
        writer.append(&resumed).map_err(|source| AgentError::Io {
            action: "cannot write",
            path: path.clone(),
            source,
        })?;
        s.emit(AgentEvent::SessionStarted {
            session_id: id.clone(),
            model: s.model.model().to_string(),
            mode: s.config.mode.as_str().to_string(),
            resumed: true,
        });
        for source in &s.notes {
            source.resumed(&id, &loaded.results);
        }
        let mut conv = Conversation::new(Arc::clone(s), id, path, dir, writer, loaded);
        conv.close_dangling_calls();
        Ok(conv)
    }
}

/// One conversation: its history, its transcript, and the loop that continues it.
pub struct Conversation {
    shared: Arc<Shared>,
    id: String,
    path: PathBuf,
    dir: PathBuf,
    writer: Writer,
    items: Vec<Item>,
    /// Where a tool saved a result's full output, by call id: what compaction points to.
    full_outputs: HashMap<String, PathBuf>,
    /// Call ids whose result text was already compacted.
    compacted: HashSet<String>,
    /// Where the items of the latest turn start; compaction never touches them.
    last_turn_start: usize,
    /// Provider-reported input tokens beyond the bytes/4 estimate of the last request.
    token_correction: u64,
    /// The context window compaction works to: the configured one, or the smaller one a
    /// provider's overflow error revealed.
    window: u64,
    /// Estimated tokens of the last request sent.
    last_request_tokens: u64,
    /// Commands this conversation's calls left running in the background (S3), by terminal
    /// id, with their command line: their outcome is still to reach the model.
    background: std::collections::BTreeMap<String, String>,
    transcript_error: Option<String>,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("id", &self.id)
            .field("transcript", &self.path)
            .field("items", &self.items.len())
            .finish_non_exhaustive()
    }
}

/// How one turn ended.
enum TurnEnd {
    /// The response completed and its calls settled; `cut_off`: it stopped at the output-token
    /// limit.
    Answered { text: String, calls: usize, cut_off: bool },
    /// The caller cancelled.
    Cancelled,
    /// The run's wall-clock limit ran out.
    Wall,
    /// The model request failed.
    Failed(String),
    /// The provider refused the request as larger than the model's context window; `limit`
    /// is the window its message named.
    Overflow { error: String, limit: Option<u64> },
}

/// What a stream ended with.
enum StreamEnd {
    Completed(Usage, StopReason),
    Cancelled,
    Wall,
    Failed(String),
    Overflow { error: String, limit: Option<u64> },
}

impl Conversation {
    fn new(
        shared: Arc<Shared>,
        id: String,
        path: PathBuf,
        dir: PathBuf,
        writer: Writer,
        loaded: transcript::Loaded,
    ) -> Self {
        let last_turn_start = loaded.items.len();
        let window = shared.config.context_window;
        Self {
            shared,
            id,
            path,
            dir,
            writer,
            items: loaded.items,
            full_outputs: loaded.full_outputs,
            compacted: loaded.compacted,
            last_turn_start,
            token_correction: 0,
            window,
            last_request_tokens: 0,
            background: Default::default(),
            transcript_error: None,
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The JSON Lines transcript.
    pub fn transcript_path(&self) -> &Path {
        &self.path
    }

    /// The history sent with the next request.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// Sends `task` as a user message and runs turns until the model answers without calling a
    /// tool, a limit of [`AgentConfig`] is reached, `cancel` fires, or the model fails.
    ///
    /// Cancelling `cancel` or the agent's [`ToolContext::cancel`] aborts the run (G6); so does
    /// dropping the returned future, which also stops its calls.
    pub async fn run(&mut self, task: &str, cancel: CancellationToken) -> RunOutcome {
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        // The run stops when the caller's token or the context's own token fires; dropping the
        // run's future stops its calls too (the guard cancels the run's token).
        let cancel = cancel.child_token();
        let _stop_on_drop = cancel.clone().drop_guard();
        let (context_cancel, linked) = (shared.context.cancel.clone(), cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = context_cancel.cancelled() => linked.cancel(),
                () = linked.cancelled() => {}
            }
        });
        let deadline = config.max_wall.map(|d| Instant::now() + d);
        self.push(Item::User { text: task.to_string() }, None);
        self.last_turn_start = self.items.len();
        let _ = shared.events.send(AgentEvent::UserMessage { text: task.to_string() });

        let mut usage = Usage::default();
        let mut turns = 0u32;
        let mut final_text = String::new();
        // An answer cut off at the output-token limit, continued over several requests.
        let mut cut_text = String::new();
        let mut continuations = 0u32;
        let mut overflow_retried = false;
        let (status, error) = loop {
            if cancel.is_cancelled() {
                break (RunStatus::Cancelled, Some("the run was cancelled".to_string()));
            }
            if turns >= config.max_turns {
                break (
                    RunStatus::MaxTurns,
                    Some(format!(
                        "stopped after {turns} model requests (max_turns); the model still had calls to make"
                    )),
                );
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break (RunStatus::MaxWall, Some(wall_message(config)));
            }
            if let Some(max) = config.max_tokens
                && usage.input_tokens + usage.output_tokens >= max
            {
                break (
                    RunStatus::MaxTokens,
                    Some(format!("used {} of {max} tokens (max_tokens)", usage.input_tokens + usage.output_tokens)),
                );
            }
            turns += 1;
            shared.emit(AgentEvent::TurnStarted { turn: turns });
            let (end, turn_usage) = self.turn(turns, &cancel, deadline).await;
            usage.add(&turn_usage);
            match end {
                TurnEnd::Answered { text, calls, cut_off } => {
                    overflow_retried = false;
                    shared.emit(AgentEvent::TurnCompleted { turn: turns, usage: turn_usage });
                    if cut_off && calls == 0 {
                        // The answer stopped mid-way at the output-token limit: not an answer
                        // yet. The model continues it; the pieces make the final text.
                        cut_text.push_str(&text);
                        final_text.clone_from(&cut_text);
                        if continuations >= MAX_CONTINUATIONS {
                            break (
                                RunStatus::MaxTokens,
                                Some(format!(
                                    "the answer was still cut off at the model's output-token limit after \
                                     {continuations} continuations"
                                )),
                            );
                        }
                        continuations += 1;
                        self.push(Item::User { text: CONTINUE_NOTE.to_string() }, None);
                        continue;
                    }
                    if !text.is_empty() || calls == 0 {
                        final_text = std::mem::take(&mut cut_text) + &text;
                    }
                    if calls == 0 {
                        // S3: the model was told the outcome of a command it left in the
                        // background arrives by itself; it does, in one more turn, rather
                        // than the command being stopped when the host exits.
                        if self.wait_for_background(&cancel, deadline).await {
                            continue;
                        }
                        if cancel.is_cancelled() {
                            continue;
                        }
                        let running = self.still_running();
                        if running.is_empty() {
                            break (RunStatus::Completed, None);
                        }
                        break (
                            RunStatus::Completed,
                            Some(format!(
                                "the run ended while work it started was still running in the background and is \
                                 cut off when this process exits: {}",
                                running.join(", ")
                            )),
                        );
                    }
                }
                TurnEnd::Cancelled => break (RunStatus::Cancelled, Some("the run was cancelled".to_string())),
                TurnEnd::Wall => break (RunStatus::MaxWall, Some(wall_message(config))),
                TurnEnd::Failed(e) => break (RunStatus::Failed, Some(e)),
                // G20: the model's window is smaller than configured (a local model, an
                // unknown one). Compact to the window the provider named, or to well under
                // the request it refused, and send again once; a second refusal in a row ends
                // the run.
                TurnEnd::Overflow { limit, .. } if !overflow_retried => {
                    overflow_retried = true;
                    let refused = self.last_request_tokens.max(1);
                    let window = limit.filter(|&l| l < refused).unwrap_or(refused * 3 / 4);
                    tracing::info!(window, refused, "the request did not fit the model's context window: compacting");
                    self.window = self.window.min(window);
                    continue;
                }
                TurnEnd::Overflow { error, .. } => break (RunStatus::Failed, Some(error)),
            }
        };
        let error = match (error, self.transcript_error.take()) {
            (e, None) => e,
            (None, Some(t)) => Some(t),
            (Some(e), Some(t)) => Some(format!("{e}; {t}")),
        };
        if status == RunStatus::Cancelled {
            for source in &shared.notes {
                source.run_cancelled(&self.id);
            }
        }
        shared.emit(AgentEvent::RunFinished {
            status,
            turns,
            usage,
            final_text: final_text.clone(),
            error: error.clone(),
        });
        RunOutcome { status, final_text, turns, usage, error }
    }

    /// One request and its calls.
    async fn turn(&mut self, n: u32, cancel: &CancellationToken, deadline: Option<Instant>) -> (TurnEnd, Usage) {
        let shared = Arc::clone(&self.shared);
        let model_id = shared.model.model().to_string();
        let (tools_now, harness_now);
        let (registry_now, harness) = match &shared.source {
            Some(source) => {
                (tools_now, harness_now) = source.current();
                (&tools_now, &*harness_now)
            }
            None => (&shared.registry, &shared.harness),
        };
        let mut plan = harness.plan(shared.config.mode, &model_id);
        // A tool that calls others (code mode) reaches, and its description lists, only what
        // this request may use (G10, G11, K7).
        let narrowed = plan.narrow(registry_now);

        // P5: OpenAI models get apply_patch as a grammar tool where the wire API takes one;
        // elsewhere it stays a JSON tool with its `input` field.
        let freeform = plan.family == ModelFamily::OpenAi && shared.model.supports_freeform_tools();
        let tools: Vec<ToolDef> = plan
            .tools
            .iter()
            .map(|t| ToolDef {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                freeform_grammar: (freeform && t.name == APPLY_PATCH).then(|| APPLY_PATCH_LARK_GRAMMAR.to_string()),
            })
            .collect();
        let system = match &shared.config.system_prompt {
            Some(p) if !plan.guidance.is_empty() => format!("{p}\n\nTools:\n{}", plan.guidance),
            Some(p) => p.clone(),
            None if plan.guidance.is_empty() => String::new(),
            None => format!("Tools:\n{}", plan.guidance),
        };
        // Last, after kodik's own guidance, so that it reads as what it is: the servers' notes.
        let system = match shared.source.as_ref().and_then(|s| s.instructions()) {
            Some(extra) if system.is_empty() => extra,
            Some(extra) => format!("{system}\n\n{extra}"),
            None => system,
        };

        let settled: Settled = Arc::new(Mutex::new(HashSet::new()));
        // A deferred tool called by its own name runs as through call_tool (G12).
        let base = plan.callable(&narrowed);
        let mut registry = ToolRegistry::new();
        for name in base.names() {
            if let Some(tool) = base.get(name) {
                registry.register(Observed {
                    inner: Arc::clone(tool),
                    events: shared.events.clone(),
                    settled: Arc::clone(&settled),
                });
            }
        }
        // A tool the mode (or this model) does not offer, called by habit, is answered with
        // why, not "unknown tool" and a suggestion of something else (G11).
        for (name, why) in withheld_reasons(&plan, registry_now) {
            registry.register(Observed {
                inner: Arc::new(NotOffered::new(name, why)),
                events: shared.events.clone(),
                settled: Arc::clone(&settled),
            });
        }
        // A call of a tool this request has not is answered "unknown tool" by the scheduler,
        // whatever its arguments.
        let known: HashSet<String> = registry.names().map(str::to_owned).collect();
        let scheduler = Scheduler::new(registry).with_config(shared.scheduler.clone());

        // Background commands that settled since the last request report to the model now.
        for settled in shared.inbox.take() {
            self.background.remove(&settled.terminal_id);
            self.push(Item::User { text: terminal_note(&settled) }, None);
        }
        for source in &shared.notes {
            for note in source.take_for(&self.id) {
                self.push(Item::User { text: note }, None);
            }
        }
        let fixed_bytes = system.len() + tools.iter().map(tool_bytes).sum::<usize>();
        if self.compact_if_needed(fixed_bytes) {
            // The model no longer sees those results: a file read then is read whole again,
            // a repeated search gets its matches, not "unchanged since" (G15).
            shared.context.session.compacted();
        }
        // Each request is a new model message: "unchanged since you read them earlier in this
        // message" (R4) holds only for reads of the response being answered.
        shared.context.session.next_message();
        let request_bytes = fixed_bytes + self.items.iter().map(item_bytes).sum::<usize>();
        self.last_request_tokens = (request_bytes / 4) as u64 + self.token_correction;
        let request = Request {
            model: model_id,
            system,
            items: self.items.clone(),
            tools,
            parallel_tool_calls: true,
            max_output_tokens: None,
        };

        // Cancelling the run, or the wall limit, stops the stream and every call of the turn.
        // Not a child of the run's token: the turn is marked aborted before its calls see the
        // cancellation, so a running command is stopped (G6) rather than left in the background
        // as after a new user message (S4).
        let turn_cancel = CancellationToken::new();
        let mut cx = shared.context.clone();
        cx.cancel = turn_cancel.clone();
        let mut turn = scheduler.turn(&cx);

        let wall = async move {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(wall);

        let mut text = String::new();
        let mut reasoning = String::new();
        let mut turn_items: Vec<Item> = Vec::new();
        // Each call, and for one whose arguments are not a JSON object, the model's text: such
        // a call never reaches a tool, its result says what was wrong with the arguments.
        let mut calls: Vec<(String, String, Option<String>)> = Vec::new();

        let end = 'stream: {
            let mut stream = tokio::select! {
                biased;
                () = cancel.cancelled() => break 'stream StreamEnd::Cancelled,
                () = &mut wall => break 'stream StreamEnd::Wall,
                r = shared.model.stream(&request, turn_cancel.clone()) => match r {
                    Ok(s) => s,
                    Err(e) => break 'stream failed(e, cancel),
                },
            };
            loop {
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break 'stream StreamEnd::Cancelled,
                    () = &mut wall => break 'stream StreamEnd::Wall,
                    ev = std::future::poll_fn(|c| stream.as_mut().poll_next(c)) => ev,
                };
                match next {
                    None => break 'stream StreamEnd::Failed(ModelError::Truncated.to_string()),
                    Some(Err(e)) => break 'stream failed(e, cancel),
                    Some(Ok(ev)) => match ev {
                        ModelEvent::TextDelta { text: t } => {
                            text.push_str(&t);
                            if shared.listening() {
                                shared.emit(AgentEvent::TextDelta { text: t });
                            }
                        }
                        ModelEvent::ToolCallDone { call_id, name, input } => {
                            // G4: pushed the moment its arguments are complete; the scheduler
                            // starts reads and commands now, the rest when the response ends.
                            let unparsed = input.unparsed().filter(|_| known.contains(&name)).map(str::to_owned);
                            if unparsed.is_none() {
                                turn.push(ToolCall::new(call_id.clone(), name.clone(), input.clone().into_args()));
                            }
                            calls.push((call_id.clone(), name.clone(), unparsed));
                            turn_items.push(Item::ToolCall { call_id, name, input });
                        }
                        ModelEvent::Reasoning { raw } => turn_items.push(Item::Reasoning { raw }),
                        ModelEvent::Completed { usage, stop_reason } => {
                            turn.finish();
                            break 'stream StreamEnd::Completed(usage, stop_reason);
                        }
                        ModelEvent::ReasoningDelta { text: t } => reasoning.push_str(&t),
                        ModelEvent::ToolCallStarted { .. } => {}
                    },
                }
            }
        };

        let usage = match &end {
            StreamEnd::Completed(u, _) => *u,
            _ => {
                // G6: the response broke off; started calls stop, every call gets `cancelled`.
                // Abort first: a command that sees its cancellation then knows to stop, not
                // to go on in the background as after a new user message.
                turn.abort();
                turn_cancel.cancel();
                Usage::default()
            }
        };

        // The answer text goes before the calls, as every provider orders an assistant turn.
        self.last_turn_start = self.items.len();
        let at = turn_items.iter().position(|i| matches!(i, Item::ToolCall { .. })).unwrap_or(turn_items.len());
        if !text.is_empty() {
            turn_items.insert(at, Item::Assistant { text: text.clone() });
        }
        self.push_all(turn_items.into_iter().map(|i| (i, None)).collect());
        if !reasoning.is_empty() {
            shared.emit(AgentEvent::Reasoning { text: reasoning });
        }
        if matches!(end, StreamEnd::Completed(..)) && !text.is_empty() {
            shared.emit(AgentEvent::AssistantMessage { text: text.clone() });
        }

        // G5: results in call order, once all settled; cancelling the run or the wall limit
        // still stops them (the turn marked aborted first, as above).
        let signals = turn.signals().clone();
        let results = turn.results();
        tokio::pin!(results);
        let mut hit_wall = false;
        // A wall limit that already stopped the stream must not be polled again.
        let wall_pending = !matches!(end, StreamEnd::Wall);
        let outputs = tokio::select! {
            r = &mut results => r,
            () = cancel.cancelled() => {
                signals.abort();
                turn_cancel.cancel();
                results.await
            }
            () = &mut wall, if wall_pending => {
                hit_wall = true;
                signals.abort();
                turn_cancel.cancel();
                results.await
            }
        };
        let n_calls = calls.len();
        let cut_off = matches!(end, StreamEnd::Completed(_, StopReason::MaxTokens));
        let mut outputs = outputs.into_iter();
        let mut results = Vec::with_capacity(n_calls);
        for (call_id, name, unparsed) in calls {
            let out = match unparsed {
                Some(raw) => ToolOutput::error(bad_arguments(&name, &raw, cut_off)),
                // The scheduler answers every call pushed to it, in order.
                None => match outputs.next() {
                    Some(out) => out,
                    None => ToolOutput::with_status(ToolStatus::Cancelled, "the call did not run"),
                },
            };
            let (output, images) = model_result(&out, shared.model.supports_images());
            if shared.listening() && claim(&settled, &call_id) {
                shared.emit(AgentEvent::ToolCallFinished {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    status: out.status,
                    duration_ms: 0,
                    output: head(&output, 2048).to_string(),
                });
            }
            self.track_background(&out);
            let is_error = out.status != ToolStatus::Success;
            if let Some(p) = &out.full_output {
                self.full_outputs.insert(call_id.clone(), p.clone());
            }
            results.push((Item::ToolResult { call_id, name, output, is_error, images }, Some(out)));
        }
        self.push_all(results);

        if let StreamEnd::Completed(u, _) = &end {
            self.record(&Record::Usage { turn: n, usage: *u });
            // What the provider counted beyond bytes/4 (tokenizer, images, framing) carries
            // over into the next estimate.
            self.token_correction = u.input_tokens.saturating_sub((request_bytes / 4) as u64);
        }
        let end = match end {
            StreamEnd::Completed(..) if cancel.is_cancelled() => TurnEnd::Cancelled,
            StreamEnd::Completed(..) if hit_wall => TurnEnd::Wall,
            StreamEnd::Completed(_, stop) => {
                TurnEnd::Answered { text, calls: n_calls, cut_off: stop == StopReason::MaxTokens }
            }
            StreamEnd::Cancelled => TurnEnd::Cancelled,
            StreamEnd::Wall => TurnEnd::Wall,
            StreamEnd::Failed(e) => TurnEnd::Failed(e),
            StreamEnd::Overflow { error, limit } => TurnEnd::Overflow { error, limit },
        };
        (end, usage)
    }

    /// Notes a command a result says is still running in the background, or forgets one a
    /// result says has finished (`get_terminal_output`, `kill_terminal`).
    fn track_background(&mut self, out: &ToolOutput) {
        let Some(id) = out.meta.get("terminal_id").and_then(serde_json::Value::as_str) else { return };
        if out.meta.get("running").and_then(serde_json::Value::as_bool) == Some(true) {
            let command = out.meta.get("command").and_then(serde_json::Value::as_str).unwrap_or_default();
            self.background.insert(id.to_string(), head(command, 200).to_string());
        } else {
            self.background.remove(id);
        }
    }

    /// What this conversation left running in the background: its commands and what the
    /// note sources run for it (sub-agents, A3).
    fn still_running(&self) -> Vec<String> {
        let mut running: Vec<String> =
            self.background.iter().map(|(id, command)| format!("{id} (`{command}`)")).collect();
        for source in &self.shared.notes {
            running.extend(source.running(&self.id));
        }
        running
    }

    /// Puts what the note sources hold for this conversation into the history; `true` when
    /// there was something.
    fn take_notes(&mut self) -> bool {
        let shared = Arc::clone(&self.shared);
        let notes: Vec<(Item, Option<ToolOutput>)> = shared
            .notes
            .iter()
            .flat_map(|source| source.take_for(&self.id))
            .map(|text| (Item::User { text }, None))
            .collect();
        let any = !notes.is_empty();
        self.push_all(notes);
        any
    }

    /// After an answer without calls: waits, up to [`AgentConfig::background_wait`] and the
    /// run's wall limit, until a background command or sub-agent this conversation started
    /// settles. `true` when one did (or had already), or a note arrived meanwhile: the next
    /// request carries it. A sub-agent cut off when the process ends would drop the work the
    /// model was told would report (A3).
    async fn wait_for_background(&mut self, cancel: &CancellationToken, deadline: Option<Instant>) -> bool {
        let shared = Arc::clone(&self.shared);
        let inbox = &shared.inbox;
        if !inbox.is_empty() || self.take_notes() {
            return true;
        }
        let running = self.still_running();
        if running.is_empty() || shared.config.background_wait.is_zero() {
            return false;
        }
        let bound = Instant::now() + shared.config.background_wait;
        let until = deadline.map_or(bound, |d| d.min(bound));
        // A host would otherwise look stuck for the whole wait.
        let up_to_secs = until.saturating_duration_since(Instant::now()).as_secs();
        shared.emit(AgentEvent::WaitingForBackground { terminals: running, up_to_secs });
        loop {
            if !inbox.is_empty() || self.take_notes() {
                return true;
            }
            // Everything settled without a word for this conversation (a report already read
            // through agent_status): nothing to go on with.
            if self.still_running().is_empty() {
                return false;
            }
            // Sub-agents settle without a signal to this loop: looked at every 100 ms.
            tokio::select! {
                () = inbox.arrived.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep_until(until.into()) => return !inbox.is_empty() || self.take_notes(),
            }
        }
    }

    /// Appends an item to the history and the transcript.
    fn push(&mut self, item: Item, output: Option<ToolOutput>) {
        self.push_all(vec![(item, output)]);
    }

    /// Appends items known at the same moment, with one transcript write.
    fn push_all(&mut self, items: Vec<(Item, Option<ToolOutput>)>) {
        if items.is_empty() {
            return;
        }
        let records: Vec<Record> = items.into_iter().map(|(item, output)| Record::Item { item, output }).collect();
        if let Err(e) = self.writer.append_all(&records) {
            self.transcript_failed(e);
        }
        for record in records {
            if let Record::Item { item, .. } = record {
                self.items.push(item);
            }
        }
    }

    fn record(&mut self, record: &Record) {
        if let Err(e) = self.writer.append(record) {
            self.transcript_failed(e);
        }
    }

    fn transcript_failed(&mut self, e: std::io::Error) {
        tracing::warn!(path = %self.path.display(), error = %e, "cannot write the transcript");
        if self.transcript_error.is_none() {
            self.transcript_error = Some(format!("cannot write the transcript {}: {e}", self.path.display()));
        }
    }

    /// A transcript that ends between a call and its result (a crash mid-turn) gets a
    /// `cancelled` result for each such call, so the history is valid for every provider.
    fn close_dangling_calls(&mut self) {
        let answered: HashSet<&str> = self
            .items
            .iter()
            .filter_map(|i| match i {
                Item::ToolResult { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        let dangling: Vec<(String, String)> = self
            .items
            .iter()
            .filter_map(|i| match i {
                Item::ToolCall { call_id, name, .. } if !answered.contains(call_id.as_str()) => {
                    Some((call_id.clone(), name.clone()))
                }
                _ => None,
            })
            .collect();
        for (call_id, name) in dangling {
            let out = ToolOutput::with_status(
                ToolStatus::Cancelled,
                "the session ended before this call's result was recorded; run it again if it is still needed",
            );
            let output = model_text(&out);
            self.push(Item::ToolResult { call_id, name, output, is_error: true, images: Vec::new() }, Some(out));
        }
        self.last_turn_start = self.items.len();
    }

    /// G20: when the next request would pass ~80 % of the context window, replaces the oldest
    /// tool results (never the latest turn's) by their first line and the path of their full
    /// output, saving the text under the sessions folder when no file holds it yet. Returns
    /// whether any result was replaced.
    fn compact_if_needed(&mut self, fixed_bytes: usize) -> bool {
        let limit = (self.window as f64 * COMPACT_AT) as u64;
        let mut bytes = fixed_bytes + self.items.iter().map(item_bytes).sum::<usize>();
        let estimate = |bytes: usize, correction: u64| (bytes / 4) as u64 + correction;
        if estimate(bytes, self.token_correction) <= limit {
            return false;
        }
        let mut replaced = false;
        for i in 0..self.last_turn_start.min(self.items.len()) {
            if estimate(bytes, self.token_correction) <= limit {
                break;
            }
            let Item::ToolResult { call_id, output, images, .. } = &self.items[i] else { continue };
            if output.len() + images.len() * IMAGE_BYTES < COMPACT_MIN_BYTES || self.compacted.contains(call_id) {
                continue;
            }
            let call_id = call_id.clone();
            let full_path = match self.full_output_path(&call_id, i) {
                Ok(p) => p,
                Err(e) => {
                    // Without a copy on disk the text would be lost: leave this one whole.
                    tracing::warn!(call_id, error = %e, "cannot save a tool output before compacting it");
                    continue;
                }
            };
            let Item::ToolResult { output, images, .. } = &mut self.items[i] else { continue };
            let first = head(output.lines().next().unwrap_or(""), 200).to_string();
            let new_text = format!("{first} [output compacted; full output: {}]", full_path.display());
            // Its images go too; the transcript keeps the whole ToolOutput (G20, R5).
            bytes = bytes - output.len() - images.len() * IMAGE_BYTES + new_text.len();
            images.clear();
            *output = new_text.clone();
            self.compacted.insert(call_id.clone());
            self.record(&Record::Compacted { call_id, output: new_text });
            replaced = true;
        }
        replaced
    }

    /// Where the full output of a result is on disk: the tool's own saved file when it still
    /// exists, else `ID.outputs/CALLID.txt` in the sessions folder, written now.
    fn full_output_path(&self, call_id: &str, index: usize) -> std::io::Result<PathBuf> {
        if let Some(p) = self.full_outputs.get(call_id)
            && p.is_file()
        {
            return Ok(p.clone());
        }
        let text = match &self.items[index] {
            Item::ToolResult { output, .. } => output.as_str(),
            _ => "",
        };
        let dir = self.dir.join(format!("{}.outputs", self.id));
        std::fs::create_dir_all(&dir)?;
        let safe: String = call_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '_' })
            .collect();
        let path = dir.join(format!("{safe}.txt"));
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

fn failed(e: ModelError, cancel: &CancellationToken) -> StreamEnd {
    if cancel.is_cancelled() || matches!(e, ModelError::Cancelled) {
        StreamEnd::Cancelled
    } else {
        if e.is_context_overflow() {
            StreamEnd::Overflow { error: e.to_string(), limit: e.context_limit() }
        } else {
            StreamEnd::Failed(e.to_string())
        }
    }
}

/// What the model reads for a call whose arguments were not a JSON object: the parse error,
/// and when the response hit the output-token limit, that the call was cut off by it.
fn bad_arguments(name: &str, raw: &str, cut_off: bool) -> String {
    let what = match serde_json::from_str::<serde_json::Value>(raw) {
        Err(e) => format!("are not valid JSON: {e}"),
        Ok(v) => {
            let kind = match v {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                _ => "not an object",
            };
            format!("must be one JSON object, not {kind}")
        }
    };
    if cut_off {
        format!(
            "The arguments of `{name}` {what}: your response reached the output-token limit and cut this call \
             off, so nothing ran. Make the call again with less in it — split a large file or edit into several \
             smaller calls."
        )
    } else {
        format!(
            "The arguments of `{name}` {what}. Nothing ran; make the call again with its arguments as one JSON object."
        )
    }
}

fn wall_message(config: &AgentConfig) -> String {
    let secs = config.max_wall.map(|d| d.as_secs_f64()).unwrap_or_default();
    format!("stopped after the run's time limit of {secs} s (max_wall)")
}

/// Bytes a tool definition adds to a request, roughly.
fn tool_bytes(t: &ToolDef) -> usize {
    t.name.len() + t.description.len() + t.input_schema.to_string().len()
}

/// Bytes an item adds to a request, roughly.
fn item_bytes(item: &Item) -> usize {
    match item {
        Item::User { text } | Item::Assistant { text } => text.len(),
        Item::Reasoning { raw } => raw.to_string().len(),
        Item::ToolCall { name, input, .. } => {
            name.len()
                + match input {
                    kodik_model::ToolInput::Json(v) => v.to_string().len(),
                    kodik_model::ToolInput::Freeform(s) => s.len(),
                }
        }
        Item::ToolResult { output, images, .. } => output.len() + images.len() * IMAGE_BYTES,
    }
}

/// For each tool `base` has that `plan` withholds (the mode cannot offer it, the user switched it
/// off in this mode, or this model changes files under another name): its name and what to tell
/// a model that calls it anyway.
fn withheld_reasons(plan: &kodik_harness::RequestPlan, base: &ToolRegistry) -> Vec<(String, String)> {
    use kodik_harness::LeftOut;
    let mode = plan.mode.title();
    plan.left_out()
        .into_iter()
        .filter(|(name, _)| base.get(name).is_some())
        .map(|(name, why)| {
            let text = match why {
                LeftOut::Respelled(tools) => {
                    format!(
                        "`{name}` is not offered to this model: it changes files with {} instead.",
                        tools.join(", ")
                    )
                }
                LeftOut::NotInMode => format!(
                    "`{name}` is not offered in {mode} mode, which this conversation runs in: use the offered tools, \
                     or tell the user what you would do with `{name}` and why."
                ),
                LeftOut::SwitchedOff => format!("`{name}` is switched off in {mode} mode: use the offered tools."),
            };
            (name, text)
        })
        .collect()
}

/// A withheld tool's stand-in for one request: any call of it ends in an error saying why.
struct NotOffered {
    spec: kodik_core::ToolSpec,
    why: String,
}

impl NotOffered {
    fn new(name: String, why: String) -> Self {
        // Read-only: the call does nothing, so it needs no approval and waits for no other call.
        let spec =
            kodik_core::ToolSpec::new(name, "", serde_json::json!({"type": "object"}), kodik_core::Effect::ReadOnly);
        Self { spec, why }
    }
}

#[async_trait::async_trait]
impl kodik_core::Tool for NotOffered {
    fn spec(&self) -> &kodik_core::ToolSpec {
        &self.spec
    }

    async fn call(&self, _args: serde_json::Value, _cx: &ToolContext) -> ToolOutput {
        ToolOutput::error(self.why.clone())
    }
}
