//! Kodik's conversation tools (SPEC A1–A7): the tools that need a conversation, a person or
//! other agents. The library owns their rules and state; the host is reached only through
//! small traits:
//!
//! | trait | for | reference implementations |
//! | --- | --- | --- |
//! | [`Asker`] | `ask_questions`, `check_understanding` | [`ScriptedAsker`], [`TerminalAsker`] |
//! | [`Presenter`] | `generate_plan`, `create_lesson` | [`PathPresenter`], [`CommandPresenter`], [`BrowserPresenter`] |
//! | [`ConversationStore`] | `agent_status` | [`FileStore`] under `.kodik/conversations/` (git-ignored there) |
//! | [`AgentRunner`] | `sub_agent`, `send_message` | the kodik-agent loop, in kodik-tools |
//!
//! | tool | state |
//! | --- | --- |
//! | `todo_write` (A1) | the list, in the toolset (one per conversation) |
//! | `memory` (A2) | Markdown files: `.kodik/memory/`, the user's config dir, per session |
//! | `ask_questions` (A6) | — the 60 s untouched countdown runs here, not in the host |
//! | `agent_status` (A4) | the [`ConversationStore`], this conversation's children |
//! | `sub_agent`, `send_message` (A3, A5) | the children, each run in its own task |
//! | `generate_plan`, `check_understanding`, `create_lesson` (A7) | files under `.kodik/plans/`, `.kodik/lessons/` |
//!
//! Which mode offers which tool is the harness's business (G10–G12).

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod agents;
pub mod ask;
pub mod memory;
pub mod present;
pub mod store;
pub mod todo;
mod tools;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

pub use agents::{AgentRunner, ChildConversation, ChildReport, ChildStatus, ChildTask, RunnerError};
pub use ask::{Answer, AskError, AskOutcome, Asker, Interaction, Reaction, ScriptedAsker, TerminalAsker};
use kodik_core::ToolRegistry;
pub use memory::{MemoryLimits, Note};
pub use present::{Artifact, ArtifactKind, BrowserPresenter, CommandPresenter, PathPresenter, PresentError, Presenter};
pub use store::{ConversationStore, FileStore, Letter, SessionInfo, StoreError};
pub use todo::{Todo, TodoList};
pub use tools::{
    AgentStatusTool, AskQuestionsTool, CheckUnderstandingTool, CreateLessonTool, GeneratePlanTool, MemoryTool,
    SendMessageTool, SubAgentTool, TodoWriteTool,
};

/// Settings of one conversation's toolset.
#[derive(Debug, Clone)]
pub struct ConversationConfig {
    /// This conversation's id: the session memory's folder and `agent_status`'s "self".
    pub session_id: String,
    /// The user-level memory folder; `None` turns the global scope off (default:
    /// [`memory::default_global_dir`]).
    pub global_memory_dir: Option<PathBuf>,
    /// Note and note-count limits.
    pub memory_limits: MemoryLimits,
    /// Untouched questions are skipped after this long (A6; 60 s).
    pub question_timeout: Duration,
    /// Sub-agents one conversation may start (A3; default 8).
    pub max_children: usize,
    /// How deep sub-agents may nest (A3; default 2): 1 lets the top conversation start
    /// sub-agents that start none of their own, 2 lets those start one more level, 0 turns
    /// sub-agents off. Each level multiplies the cost of a task, so the default is shallow.
    pub max_depth: usize,
    /// Where this conversation sits: 0 for a conversation a person started, 1 for its
    /// sub-agents, and so on. Set by `sub_agent` for the toolsets of its children.
    pub depth: usize,
}

/// A new session id: time and process, so ids from different processes do not collide.
pub fn new_session_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    format!("{nanos:x}-{:x}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

impl Default for ConversationConfig {
    fn default() -> Self {
        Self {
            session_id: new_session_id(),
            global_memory_dir: memory::default_global_dir(),
            memory_limits: MemoryLimits::default(),
            question_timeout: ask::QUESTION_TIMEOUT,
            max_children: 8,
            max_depth: 2,
            depth: 0,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) config: ConversationConfig,
    /// The id in use: `config.session_id` until the host learns the conversation's real id
    /// (a transcript's id is chosen when the conversation starts, after the tools are built).
    pub(crate) session_id: RwLock<String>,
    pub(crate) todos: TodoList,
    pub(crate) asker: Option<Arc<dyn Asker>>,
    pub(crate) presenter: RwLock<Arc<dyn Presenter>>,
    pub(crate) store: Option<Arc<dyn ConversationStore>>,
    pub(crate) runner: OnceLock<Arc<dyn AgentRunner>>,
    pub(crate) children: Arc<agents::Children>,
    /// The conversation that started this one, for a sub-agent.
    pub(crate) parent: Option<agents::ParentLink>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.children.stop.cancel();
    }
}

/// The conversation tools of one conversation, sharing its state (the todo list) and the
/// host's traits. Cheap to clone.
#[derive(Clone)]
pub struct ConversationToolset {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for ConversationToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationToolset")
            .field("config", &self.inner.config)
            .field("asker", &self.inner.asker.is_some())
            .field("store", &self.inner.store.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for ConversationToolset {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl ConversationToolset {
    /// Configures a toolset.
    pub fn builder() -> ConversationToolsetBuilder {
        ConversationToolsetBuilder::default()
    }

    /// The settings.
    pub fn config(&self) -> &ConversationConfig {
        &self.inner.config
    }

    /// This conversation's id: the session memory's folder, `agent_status`'s "self", the
    /// mailbox other conversations write to.
    pub fn session_id(&self) -> String {
        self.inner.session_id.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets this conversation's id once the host knows it (e.g. the transcript's id, chosen
    /// when the conversation starts).
    pub fn set_session_id(&self, id: impl Into<String>) {
        *self.inner.session_id.write().unwrap_or_else(|p| p.into_inner()) = id.into();
    }

    /// Replaces who shows plans and lessons (e.g. the browser, once the host has one).
    pub fn set_presenter(&self, presenter: Arc<dyn Presenter>) {
        *self.inner.presenter.write().unwrap_or_else(|p| p.into_inner()) = presenter;
    }

    pub(crate) fn presenter(&self) -> Arc<dyn Presenter> {
        self.inner.presenter.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The id of the conversation that started this one, for a sub-agent.
    pub fn parent_id(&self) -> Option<&str> {
        self.inner.parent.as_ref().map(|p| p.id.as_str())
    }

    /// The conversation store: the host's, or the workspace's `.kodik/conversations/`.
    pub fn store_for(&self, workspace_root: &std::path::Path) -> Arc<dyn ConversationStore> {
        match &self.inner.store {
            Some(s) => s.clone(),
            None => Arc::new(FileStore::for_workspace(workspace_root)),
        }
    }

    /// The current todo list.
    pub fn todos(&self) -> Vec<Todo> {
        self.inner.todos.items()
    }

    /// Restores this conversation's state from the tool results of its saved transcript, as
    /// `(tool name, result meta)` in order, when it is resumed (`--resume`, `--last`, a message to
    /// a closed conversation): the todo list of the last successful `todo_write` (A1).
    pub fn restore(&self, results: &[(String, serde_json::Value)]) {
        let last = results.iter().rev().find(|(name, meta)| name == "todo_write" && meta.get("todos").is_some());
        if let Some((_, meta)) = last
            && let Ok(items) = serde_json::from_value::<Vec<Todo>>(meta["todos"].clone())
        {
            self.inner.todos.restore(items);
        }
    }

    /// Sets who runs sub-agents (once; later calls are ignored and return `false`). Set after
    /// building because the runner usually needs the registry these tools are part of.
    pub fn set_runner(&self, runner: Arc<dyn AgentRunner>) -> bool {
        self.inner.runner.set(runner).is_ok()
    }

    /// Whether an [`Asker`] was given, so `ask_questions` can reach someone.
    pub fn has_asker(&self) -> bool {
        self.inner.asker.is_some()
    }

    /// Whether a runner is set, so `sub_agent` can start anything.
    pub fn has_runner(&self) -> bool {
        self.inner.runner.get().is_some()
    }

    /// Stops what every sub-agent of this conversation is doing (the host's stop button, or
    /// the parent's turn cancelled: G6); a stopped child can still be messaged and resumed, and
    /// new ones can start. Dropping the toolset stops them for good. Foreground sub-agents
    /// also stop with their call's cancellation.
    pub fn stop_children(&self) {
        for child in self.inner.children.all() {
            child.stop_run();
        }
    }

    /// The sub-agents of this conversation still working (background ones, and conversations
    /// resumed by `send_message`), as `sub-agent <id> (<task>)`: a host that ends the
    /// conversation's run waits for them, as for background commands, or says they were cut
    /// off — they report through [`take_report_notes`](Self::take_report_notes) when they settle.
    pub fn running_children(&self) -> Vec<String> {
        self.inner
            .children
            .all()
            .iter()
            .filter(|c| c.state() == agents::ChildState::Running)
            .map(|c| format!("sub-agent {} ({})", c.id, c.description))
            .collect()
    }

    /// Reports of background sub-agents that settled since the last call, for the host to put
    /// before the model's next request (A3: the child reports when it settles).
    pub fn take_reports(&self) -> Vec<(String, ChildReport)> {
        std::mem::take(&mut *self.inner.children.reports.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// What arrived for this conversation inside this process since the last call, as the
    /// notes the model reads before its next request: reports of background sub-agents that
    /// settled (A3), messages from sub-agents (A5: child → parent) and, for a sub-agent,
    /// messages from its parent.
    pub fn take_report_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.take_reports().iter().map(|(id, r)| agents::report_text(id, r)).collect();
        notes.extend(self.inner.children.take_messages());
        if let Some(link) = &self.inner.parent {
            notes.extend(link.take_from_parent());
        }
        notes
    }

    /// The saved workspace and global memory notes, as one note for a new conversation's first
    /// request (A2): notes that outlast a conversation are only useful if the next one sees
    /// them, without having to guess to list them. `None` when there are none.
    /// At most [`MEMORY_NOTE_MAX_BYTES`] of notes are shown whole; the rest are named by id.
    pub fn memory_note(&self, workspace: &kodik_core::Workspace) -> Option<String> {
        let mut parts = Vec::new();
        let mut budget = MEMORY_NOTE_MAX_BYTES;
        let dir = workspace.primary_root().join(".kodik").join("memory");
        if let Ok(listing) = memory::list(&dir, Some(workspace))
            && !listing.notes.is_empty()
        {
            parts.push(memory::render_within("workspace", &dir, &listing, &mut budget));
        }
        if let Some(dir) = &self.inner.config.global_memory_dir
            && let Ok(listing) = memory::list(dir, None)
            && !listing.notes.is_empty()
        {
            parts.push(memory::render_within("global", dir, &listing, &mut budget));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "[memory] Notes saved by earlier conversations (update or delete one with the memory tool when it \
                 is out of date):\n\n{}",
                parts.join("\n\n")
            )
        })
    }

    /// Messages other processes left in conversation `id`'s mailbox (A5), as notes for its next
    /// request; each is handed out once. The store is the host's or `workspace_root`'s.
    pub fn take_mailbox_notes(&self, id: &str, workspace_root: &std::path::Path) -> Vec<String> {
        match self.store_for(workspace_root).take_messages(id) {
            Ok(messages) => messages.iter().map(store::Letter::note).collect(),
            Err(e) => vec![format!("[mailbox] messages for this conversation could not be read: {e}")],
        }
    }

    /// The toolset of a new sub-agent of this conversation: one level deeper, its own todo
    /// list and sub-agents, the same person, presenter, store and runner, and a link back here
    /// (A5: child → parent). Its id is set once the runner has started it.
    pub(crate) fn child_toolset(&self) -> ConversationToolset {
        let inner = &self.inner;
        let config =
            ConversationConfig { session_id: String::new(), depth: inner.config.depth + 1, ..inner.config.clone() };
        let set = ConversationToolset {
            inner: Arc::new(Inner {
                session_id: RwLock::new(String::new()),
                config,
                todos: TodoList::new(),
                asker: inner.asker.clone(),
                presenter: RwLock::new(self.presenter()),
                store: inner.store.clone(),
                runner: OnceLock::new(),
                children: Arc::new(agents::Children::under(inner.children.stop.child_token())),
                parent: Some(agents::ParentLink::new(self.session_id(), Arc::downgrade(&inner.children))),
            }),
        };
        if let Some(runner) = inner.runner.get() {
            let _ = set.inner.runner.set(Arc::clone(runner));
        }
        set
    }

    /// Registers every conversation tool: `todo_write`, `memory`, `ask_questions`,
    /// `agent_status`, `sub_agent`, `send_message`, `generate_plan`, `check_understanding` and
    /// `create_lesson`.
    pub fn register(&self, registry: &mut ToolRegistry) {
        registry
            .register(SubAgentTool::new(self.clone()))
            .register(SendMessageTool::new(self.clone()))
            .register(TodoWriteTool::new(self.clone()))
            .register(MemoryTool::new(self.clone()))
            .register(AskQuestionsTool::new(self.clone()))
            .register(AgentStatusTool::new(self.clone()))
            .register(GeneratePlanTool::new(self.clone()))
            .register(CheckUnderstandingTool::new(self.clone()))
            .register(CreateLessonTool::new(self.clone()));
    }
}

/// The most bytes of saved notes that [`ConversationToolset::memory_note`] shows whole (the
/// rest are named by id): up to 200 notes of 4 KB per scope would otherwise go into the first
/// request.
pub const MEMORY_NOTE_MAX_BYTES: usize = 16 * 1024;

/// The most of a workspace's `AGENTS.md` that [`agents_md_note`] carries (Codex's default for
/// its project docs): enough for a project's conventions, bounded so a huge file does not fill
/// the context.
pub const AGENTS_MD_MAX_BYTES: usize = 32 * 1024;

/// The workspace root's `AGENTS.md` (the instructions a project writes for coding agents, read
/// by Codex, Cursor and others) as a note for a new conversation's first request, cut at
/// [`AGENTS_MD_MAX_BYTES`] with a note where the rest is. `None` when there is none, it is
/// empty, hidden by `.kodikignore` (G16), a link out of the workspace, or the host does not
/// trust the workspace's authors.
pub fn agents_md_note(workspace: &kodik_core::Workspace) -> Option<String> {
    use std::io::Read as _;
    if !workspace.is_trusted() {
        return None;
    }
    let path = workspace.check_file("AGENTS.md").ok()?;
    let file = std::fs::File::open(&path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(AGENTS_MD_MAX_BYTES as u64 + 4).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let (text, cut) = if bytes.len() > AGENTS_MD_MAX_BYTES {
        (&text[..text.floor_char_boundary(AGENTS_MD_MAX_BYTES)], true)
    } else {
        (&text[..], false)
    };
    let text = text.trim_end();
    if text.trim().is_empty() {
        return None;
    }
    let mut note = format!(
        "[project instructions] From AGENTS.md at the workspace root, written by the project for coding agents \
         (follow them; where the user asks otherwise, the user comes first):\n\n{text}"
    );
    if cut {
        note.push_str(&format!(
            "\n\n[AGENTS.md is cut here, after {} KB of its {size} bytes: read the rest with read_file]",
            AGENTS_MD_MAX_BYTES / 1024
        ));
    }
    Some(note)
}

/// Configures a [`ConversationToolset`].
#[derive(Default)]
pub struct ConversationToolsetBuilder {
    config: Option<ConversationConfig>,
    asker: Option<Arc<dyn Asker>>,
    presenter: Option<Arc<dyn Presenter>>,
    store: Option<Arc<dyn ConversationStore>>,
}

impl ConversationToolsetBuilder {
    /// The settings (default: [`ConversationConfig::default`]).
    pub fn config(mut self, config: ConversationConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// Who answers `ask_questions` and `check_understanding`; without one they return an error
    /// saying nobody can be asked.
    pub fn asker(mut self, asker: Arc<dyn Asker>) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Who shows plans and lessons (default: [`PathPresenter`]).
    pub fn presenter(mut self, presenter: Arc<dyn Presenter>) -> Self {
        self.presenter = Some(presenter);
        self
    }

    /// Where conversations' metadata lives (default: a [`FileStore`] in the workspace's
    /// `.kodik/conversations/`).
    pub fn store(mut self, store: Arc<dyn ConversationStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Builds the toolset.
    pub fn build(self) -> ConversationToolset {
        let config = self.config.unwrap_or_default();
        ConversationToolset {
            inner: Arc::new(Inner {
                session_id: RwLock::new(config.session_id.clone()),
                config,
                todos: TodoList::new(),
                asker: self.asker,
                presenter: RwLock::new(self.presenter.unwrap_or_else(|| Arc::new(PathPresenter::default()))),
                store: self.store,
                runner: OnceLock::new(),
                children: Arc::default(),
                parent: None,
            }),
        }
    }
}
