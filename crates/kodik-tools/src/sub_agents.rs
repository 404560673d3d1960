//! The kodik-agent loop as the conversation tools' [`AgentRunner`]: each sub-agent is an
//! [`Agent`](kodik_agent::Agent) conversation over the same tools, with its own session and
//! context, planned for its own mode (A3), saved as a transcript it can be resumed from (A5).
//! Its conversation tools are its own (its todo list, its sub-agents one level deeper, its way
//! back to the parent), and [`ConversationNotes`] hands it what arrives between requests.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use kodik_agent::{Agent, AgentConfig, Conversation, RunStatus};
use kodik_conversation::{
    AgentRunner, ChildConversation, ChildReport, ChildStatus, ChildTask, ConversationToolset, RunnerError,
};
use kodik_core::{CancellationToken, Session, ToolContext};
use kodik_harness::{Harness, Mode};
use kodik_scheduler::SchedulerConfig;
use kodik_schema::agent::AgentMode;

/// Runs sub-agents with the kodik-agent loop. Built by [`Toolbox::enable_sub_agents`](crate::Toolbox::enable_sub_agents).
pub struct AgentLoopRunner {
    model: Arc<dyn kodik_model::ModelClient>,
    // Weak: the toolbox's tools hold the sub_agent tool, which holds this runner. Read per
    // child, so a child sees the tools in force when it starts (MCP `tools/list_changed`).
    tools: Weak<crate::Tools>,
    context: ToolContext,
    config: AgentConfig,
    scheduler: SchedulerConfig,
    /// Each child's mode, so a resumed child goes on in the mode it started in, and its own
    /// sub-agents are held to it.
    modes: Mutex<HashMap<String, Mode>>,
}

impl std::fmt::Debug for AgentLoopRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoopRunner").field("model", &self.model.model()).field("config", &self.config).finish()
    }
}

/// The conversation tools, which each child gets its own of.
pub(crate) const CONVERSATION_TOOLS: [&str; 9] = [
    "todo_write",
    "memory",
    "ask_questions",
    "agent_status",
    "sub_agent",
    "send_message",
    "generate_plan",
    "check_understanding",
    "create_lesson",
];

/// What arrives for a conversation between its model requests, as notes (kodik-agent's hook):
/// first the workspace's AGENTS.md and the saved memory notes (A2), then background
/// sub-agents' reports (A3), messages from its sub-agents or its parent, and letters
/// other processes left in its mailbox (A5). When its run is cancelled, its sub-agents stop
/// too (G6).
pub(crate) struct ConversationNotes {
    tools: ConversationToolset,
    /// The conversation's workspace, with the host's trust and ignore rules.
    workspace: kodik_core::Workspace,
    /// Whether the workspace's AGENTS.md and the saved memory notes went to the model (a
    /// resumed conversation has them in its history already).
    memory_given: std::sync::atomic::AtomicBool,
}

impl ConversationNotes {
    pub(crate) fn new(tools: ConversationToolset, workspace: kodik_core::Workspace) -> Self {
        Self { tools, workspace, memory_given: std::sync::atomic::AtomicBool::new(false) }
    }
}

impl kodik_agent::Notes for ConversationNotes {
    fn take(&self) -> Vec<String> {
        self.tools.take_report_notes()
    }

    fn take_for(&self, session_id: &str) -> Vec<String> {
        // The conversation's id is chosen when it starts, after its tools were built: from its
        // first request on, session memory, agent_status and the mailbox go by it.
        if self.tools.session_id() != session_id {
            self.tools.set_session_id(session_id);
        }
        let mut notes = Vec::new();
        if !self.memory_given.swap(true, std::sync::atomic::Ordering::Relaxed) {
            notes.extend(kodik_conversation::agents_md_note(&self.workspace));
            notes.extend(self.tools.memory_note(&self.workspace));
        }
        notes.extend(self.tools.take_report_notes());
        notes.extend(self.tools.take_mailbox_notes(session_id, self.workspace.primary_root()));
        notes
    }

    fn resumed(&self, _session_id: &str, results: &[(String, serde_json::Value)]) {
        self.memory_given.store(true, std::sync::atomic::Ordering::Relaxed);
        self.tools.restore(results);
    }

    fn running(&self, _session_id: &str) -> Vec<String> {
        self.tools.running_children()
    }

    fn run_cancelled(&self, _session_id: &str) {
        self.tools.stop_children();
    }
}

fn mode_of(mode: AgentMode) -> Mode {
    match mode {
        AgentMode::Code => Mode::Code,
        AgentMode::Debug => Mode::Debug,
        AgentMode::Plan => Mode::Plan,
        AgentMode::Ask => Mode::Ask,
        AgentMode::Educator => Mode::Educator,
    }
}

/// The tools a request in `mode` offers `model`, directly or deferred.
fn offered(harness: &Harness, mode: Mode, model: &str) -> BTreeSet<String> {
    let plan = harness.plan(mode, model);
    plan.tools.iter().chain(&plan.deferred).map(|t| t.name.clone()).collect()
}

impl AgentLoopRunner {
    pub(crate) fn new(
        model: Arc<dyn kodik_model::ModelClient>,
        tools: Weak<crate::Tools>,
        context: ToolContext,
        config: AgentConfig,
        scheduler: SchedulerConfig,
    ) -> Self {
        Self { model, tools, context, config, scheduler, modes: Mutex::default() }
    }

    /// The mode conversation `id` runs in: a child's own, else the top-level one's.
    fn mode_of_conversation(&self, id: &str) -> Mode {
        self.modes.lock().unwrap_or_else(|p| p.into_inner()).get(id).copied().unwrap_or(self.config.mode)
    }

    /// An agent for a child in `mode`. With `parent` (a new child), the child may not be
    /// offered a tool its parent's mode does not offer: otherwise an Ask or Plan conversation,
    /// which the user started so that nothing changes, could change files through a Code-mode
    /// child (G11).
    fn agent(&self, mode: Mode, parent: Option<Mode>, own: &ConversationToolset) -> Result<Agent, RunnerError> {
        let tools = self.tools.upgrade().ok_or_else(|| RunnerError("the toolbox was dropped".into()))?;
        // The tools in force now, but its own conversation tools.
        let (registry, harness) = tools.for_child(own);
        if let Some(parent) = parent.filter(|p| *p != mode) {
            let model = self.model.model();
            let allowed = offered(&harness, parent, model);
            let widened: Vec<String> =
                offered(&harness, mode, model).into_iter().filter(|t| !allowed.contains(t)).collect();
            if !widened.is_empty() {
                return Err(RunnerError(format!(
                    "this conversation runs in {} mode, and a sub-agent in {} mode would get tools it does not \
                     offer ({}): leave `mode` out (the sub-agent then runs in {} mode) or pick a mode that \
                     offers no more than this one",
                    parent.as_str(),
                    mode.as_str(),
                    widened.join(", "),
                    parent.as_str(),
                )));
            }
        }
        let mut harness = Harness::clone(&harness);
        let limits = own.config();
        if limits.depth >= limits.max_depth {
            // At the depth limit `sub_agent` would only refuse: not offered at all (G11).
            for mode in Mode::ALL {
                harness.set_enabled(mode, "sub_agent", false);
            }
        }
        let mut config = self.config.clone();
        config.mode = mode;
        // Its own context: what the child read is not what the parent read (E2, R4).
        let mut context = self.context.clone();
        context.session = Arc::new(Session::new());
        context.cancel = CancellationToken::new();
        let workspace = context.workspace.clone();
        // A child calls the mounted servers' tools too, so it gets their instructions, from a
        // tool source as the parent does: the agent puts them after its own prompt and kodik's
        // tool guidance. Appended to the prompt, they came before the guidance, which then read
        // as part of the servers' section.
        let source = ChildTools {
            registry: Arc::clone(&registry),
            harness: Arc::new(harness.clone()),
            instructions: tools.mcp_instructions(),
        };
        Ok(Agent::new(Arc::clone(&self.model), registry, context, harness, config)
            .with_tool_source(Arc::new(source))
            .with_scheduler_config(self.scheduler.clone())
            .with_notes(Arc::new(ConversationNotes::new(own.clone(), workspace))))
    }
}

/// A child's tools, fixed when it starts, and the mounted servers' instructions of then.
struct ChildTools {
    registry: Arc<kodik_core::ToolRegistry>,
    harness: Arc<Harness>,
    instructions: Option<String>,
}

impl kodik_agent::ToolSource for ChildTools {
    fn current(&self) -> (Arc<kodik_core::ToolRegistry>, Arc<Harness>) {
        (Arc::clone(&self.registry), Arc::clone(&self.harness))
    }

    fn instructions(&self) -> Option<String> {
        self.instructions.clone()
    }
}

struct LoopChild {
    id: String,
    conversation: Conversation,
}

#[async_trait]
impl ChildConversation for LoopChild {
    fn id(&self) -> &str {
        &self.id
    }

    async fn run(&mut self, message: &str, cancel: CancellationToken) -> ChildReport {
        let outcome = self.conversation.run(message, cancel).await;
        let status = match outcome.status {
            RunStatus::Completed => ChildStatus::Completed,
            RunStatus::Cancelled => ChildStatus::Cancelled,
            _ => ChildStatus::Failed,
        };
        let text = match (&outcome.error, outcome.final_text.trim().is_empty()) {
            (Some(e), true) => format!("{} ({e})", outcome.status),
            (Some(e), false) => format!("{}\n[{}: {e}]", outcome.final_text, outcome.status),
            (None, _) => outcome.final_text,
        };
        ChildReport { status, text }
    }
}

impl AgentRunner for AgentLoopRunner {
    fn start(&self, task: &ChildTask) -> Result<Box<dyn ChildConversation>, RunnerError> {
        // Without `mode` a child works in its parent's mode, which for a child is its own.
        let parent = self.mode_of_conversation(&task.parent);
        let mode = task.mode.map_or(parent, mode_of);
        let conversation = self
            .agent(mode, Some(parent), &task.tools)?
            .start_child(&task.parent)
            .map_err(|e| RunnerError(e.to_string()))?;
        let id = conversation.id().to_string();
        self.modes.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), mode);
        Ok(Box::new(LoopChild { id, conversation }))
    }

    fn resume(&self, id: &str, tools: &ConversationToolset) -> Result<Box<dyn ChildConversation>, RunnerError> {
        let mode = self.mode_of_conversation(id);
        let conversation = self.agent(mode, None, tools)?.resume(id).map_err(|e| RunnerError(e.to_string()))?;
        Ok(Box::new(LoopChild { id: id.to_string(), conversation }))
    }
}
