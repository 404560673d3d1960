//! Kodik's conversation tools (SPEC A1–A7): the tools that need a conversation, a person or
//! other agents. The library owns their rules and state; the host is reached only through
//! small traits:
//!
//! | trait | for | reference implementations |
//! | --- | --- | --- |
//! | [`Asker`] | `ask_questions`, `check_understanding` | [`ScriptedAsker`], [`TerminalAsker`] |
//! | [`Presenter`] | `generate_plan`, `create_lesson` | [`PathPresenter`], [`CommandPresenter`] |
//! | [`ConversationStore`] | `agent_status` | [`FileStore`] under `.kodik/conversations/` |
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
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use agents::{AgentRunner, ChildConversation, ChildReport, ChildStatus, ChildTask, RunnerError};
pub use ask::{Answer, AskError, AskOutcome, Asker, Interaction, Reaction, ScriptedAsker, TerminalAsker};
use kodik_core::ToolRegistry;
pub use memory::{MemoryLimits, Note};
pub use present::{Artifact, ArtifactKind, CommandPresenter, PathPresenter, PresentError, Presenter};
pub use store::{ConversationStore, FileStore, SessionInfo, StoreError};
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
        }
    }
}

pub(crate) struct Inner {
    pub(crate) config: ConversationConfig,
    pub(crate) todos: TodoList,
    pub(crate) asker: Option<Arc<dyn Asker>>,
    pub(crate) presenter: Arc<dyn Presenter>,
    pub(crate) store: Option<Arc<dyn ConversationStore>>,
    pub(crate) runner: OnceLock<Arc<dyn AgentRunner>>,
    pub(crate) children: Arc<agents::Children>,
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

    /// The current todo list.
    pub fn todos(&self) -> Vec<Todo> {
        self.inner.todos.items()
    }

    /// Sets who runs sub-agents (once; later calls are ignored and return `false`). Set after
    /// building because the runner usually needs the registry these tools are part of.
    pub fn set_runner(&self, runner: Arc<dyn AgentRunner>) -> bool {
        self.inner.runner.set(runner).is_ok()
    }

    /// Stops every sub-agent of this conversation (the host's stop button; also done when the
    /// toolset is dropped). Foreground sub-agents also stop with their call's cancellation (G6).
    pub fn stop_children(&self) {
        self.inner.children.stop.cancel();
    }

    /// Reports of background sub-agents that settled since the last call, for the host to put
    /// before the model's next request (A3: the child reports when it settles).
    pub fn take_reports(&self) -> Vec<(String, ChildReport)> {
        std::mem::take(&mut *self.inner.children.reports.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// [`take_reports`](Self::take_reports) as the text the model reads for each settled child.
    pub fn take_report_notes(&self) -> Vec<String> {
        self.take_reports().iter().map(|(id, r)| agents::report_text(id, r)).collect()
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
        ConversationToolset {
            inner: Arc::new(Inner {
                config: self.config.unwrap_or_default(),
                todos: TodoList::new(),
                asker: self.asker,
                presenter: self.presenter.unwrap_or_else(|| Arc::new(PathPresenter::default())),
                store: self.store,
                runner: OnceLock::new(),
                children: Arc::default(),
            }),
        }
    }
}
