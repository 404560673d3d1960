//! The kodik-agent loop as the conversation tools' [`AgentRunner`]: each sub-agent is an
//! [`Agent`](kodik_agent::Agent) conversation over the same tools, with its own session and
//! context, planned for its own mode (A3), saved as a transcript it can be resumed from (A5).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use kodik_agent::{Agent, AgentConfig, Conversation, RunStatus};
use kodik_conversation::{AgentRunner, ChildConversation, ChildReport, ChildStatus, ChildTask, RunnerError};
use kodik_core::{CancellationToken, Session, ToolContext};
use kodik_harness::{Harness, Mode};
use kodik_scheduler::SchedulerConfig;
use kodik_schema::agent::AgentMode;

/// Runs sub-agents with the kodik-agent loop. Built by [`Toolbox::enable_sub_agents`](crate::Toolbox::enable_sub_agents).
pub struct AgentLoopRunner {
    model: Arc<dyn kodik_model::ModelClient>,
    // Weak: the toolbox's tools hold the sub_agent tool, which holds this runner. Read per
    // child, so a child sees the tools in force when it starts (MCP `tools/list_changed`).
    tools: Weak<dyn kodik_agent::ToolSource>,
    context: ToolContext,
    config: AgentConfig,
    scheduler: SchedulerConfig,
    /// Each child's mode, so a resumed child goes on in the mode it started in.
    modes: Mutex<HashMap<String, Option<AgentMode>>>,
}

impl std::fmt::Debug for AgentLoopRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoopRunner").field("model", &self.model.model()).field("config", &self.config).finish()
    }
}

/// The tools a child does not get: it starts no sub-agents of its own (depth 1) and cannot
/// message or inspect its siblings (A5: never child → child).
const PARENT_ONLY: [&str; 3] = ["sub_agent", "send_message", "agent_status"];

fn mode_of(mode: AgentMode) -> Mode {
    match mode {
        AgentMode::Code => Mode::Code,
        AgentMode::Debug => Mode::Debug,
        AgentMode::Plan => Mode::Plan,
        AgentMode::Ask => Mode::Ask,
        AgentMode::Educator => Mode::Educator,
    }
}

impl AgentLoopRunner {
    pub(crate) fn new(
        model: Arc<dyn kodik_model::ModelClient>,
        tools: Weak<dyn kodik_agent::ToolSource>,
        context: ToolContext,
        config: AgentConfig,
        scheduler: SchedulerConfig,
    ) -> Self {
        Self { model, tools, context, config, scheduler, modes: Mutex::default() }
    }

    fn agent(&self, mode: Option<AgentMode>) -> Result<Agent, RunnerError> {
        let tools = self.tools.upgrade().ok_or_else(|| RunnerError("the toolbox was dropped".into()))?;
        let (registry, harness) = tools.current();
        let mut harness = Harness::clone(&harness);
        for mode in Mode::ALL {
            for tool in PARENT_ONLY {
                harness.set_enabled(mode, tool, false);
            }
        }
        let mut config = self.config.clone();
        if let Some(m) = mode {
            config.mode = mode_of(m);
        }
        // Its own context: what the child read is not what the parent read (E2, R4).
        let mut context = self.context.clone();
        context.session = Arc::new(Session::new());
        context.cancel = CancellationToken::new();
        Ok(Agent::new(Arc::clone(&self.model), registry, context, harness, config)
            .with_scheduler_config(self.scheduler.clone()))
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
        let conversation = self.agent(task.mode)?.start().map_err(|e| RunnerError(e.to_string()))?;
        let id = conversation.id().to_string();
        self.modes.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), task.mode);
        Ok(Box::new(LoopChild { id, conversation }))
    }

    fn resume(&self, id: &str) -> Result<Box<dyn ChildConversation>, RunnerError> {
        let mode = self.modes.lock().unwrap_or_else(|p| p.into_inner()).get(id).copied().flatten();
        let conversation = self.agent(mode)?.resume(id).map_err(|e| RunnerError(e.to_string()))?;
        Ok(Box::new(LoopChild { id: id.to_string(), conversation }))
    }
}
