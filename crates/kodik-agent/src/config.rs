//! [`AgentConfig`] and [`ApprovalMode`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kodik_core::{Approval, ApprovalPolicy, ApprovalRequest, Approver, Effect};
use kodik_harness::Mode;
use kodik_schema::ToolArgs as _;
use kodik_schema::harness::CallToolArgs;

/// The name of the deferred-tool runner, whose approval is the called tool's.
const CALL_TOOL: &str = CallToolArgs::NAME;

/// How an [`Agent`](crate::Agent) runs its conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// The harness mode every request is planned for (G11). Default: Code.
    pub mode: Mode,
    /// Model requests per run, at most. Default: 50.
    pub max_turns: u32,
    /// Wall-clock time per run, at most; a turn in flight is aborted when it runs out.
    pub max_wall: Option<Duration>,
    /// Input plus output tokens per run, at most (as the provider reports them).
    pub max_tokens: Option<u64>,
    /// The model's context window in tokens; old tool outputs are compacted near 80 % of it (G20).
    pub context_window: u64,
    /// Where transcripts go. Default: `<first workspace root>/.kodik/sessions`.
    pub sessions_dir: Option<PathBuf>,
    /// Put before the harness's tool guidance in the system prompt.
    pub system_prompt: Option<String>,
    /// How long a run whose model has answered still waits for the commands it left running in
    /// the background (S3: the model was told their outcome arrives by itself). Each that
    /// settles meanwhile goes to the model as a terminal event, in one more turn; those still
    /// running after this are named in the outcome's `error`. Default: 120 s; zero ends at once.
    pub background_wait: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Code,
            max_turns: 50,
            max_wall: None,
            max_tokens: None,
            context_window: 200_000,
            sessions_dir: None,
            system_prompt: None,
            background_wait: Duration::from_secs(120),
        }
    }
}

impl AgentConfig {
    /// Sets [`mode`](Self::mode).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets [`max_turns`](Self::max_turns).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    /// Sets [`max_wall`](Self::max_wall).
    pub fn max_wall(mut self, limit: Duration) -> Self {
        self.max_wall = Some(limit);
        self
    }

    /// Sets [`max_tokens`](Self::max_tokens).
    pub fn max_tokens(mut self, n: u64) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sets [`context_window`](Self::context_window).
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = tokens;
        self
    }

    /// Sets [`sessions_dir`](Self::sessions_dir).
    pub fn sessions_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sessions_dir = Some(dir.into());
        self
    }

    /// Sets [`background_wait`](Self::background_wait).
    pub fn background_wait(mut self, wait: Duration) -> Self {
        self.background_wait = wait;
        self
    }

    /// Sets [`system_prompt`](Self::system_prompt).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }
}

/// Which calls run without asking anyone; the rest are denied with a reason the model can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalMode {
    /// Every call runs.
    Auto,
    /// Reads and network requests run, and the model's own planning: its todo list, reading
    /// its memory (`memory` `list`), questions to the user, and sub-agents (held to this same
    /// approval). File changes, processes, the browser, saving memory and messages to other
    /// conversations are denied.
    ReadOnly,
    /// Only pure reads run (they need no approval); every call that needs approval is denied.
    Deny,
}

impl ApprovalMode {
    /// Parses `auto`, `read-only` (or `read_only`, `readonly`) and `deny`, any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "read-only" | "read_only" | "readonly" => Some(Self::ReadOnly),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    /// The name [`parse`](Self::parse) reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::ReadOnly => "read-only",
            Self::Deny => "deny",
        }
    }

    /// The approver for the [`ToolContext`](kodik_core::ToolContext), built from [`ApprovalPolicy`].
    ///
    /// `call_tool` is judged by the tool it calls: it runs that tool through `dispatch` with
    /// this same approver, which then sees the called tool's own effect. Judged by its own
    /// placeholder effect it was refused, and in Code mode (reads deferred, G12) a read-only
    /// session could not read at all.
    pub fn approver(self) -> Arc<dyn Approver> {
        let refuse = || ApprovalPolicy::ask(Some(Box::new(Refuse(self)))).tool(CALL_TOOL, true);
        match self {
            Self::Auto => Arc::new(ApprovalPolicy::auto_approve_all()),
            Self::ReadOnly => Arc::new(
                READ_ONLY_PLANNING
                    .into_iter()
                    .fold(refuse().effect(Effect::ReadOnly, true).effect(Effect::Network, true), |p, t| {
                        p.tool(t, true)
                    }),
            ),
            Self::Deny => Arc::new(refuse().effect(Effect::ReadOnly, true)),
        }
    }
}

/// Conversation tools that change nothing in the project: a read-only session keeps them. A
/// sub-agent runs under the same approver, so it can do no more than its parent.
const READ_ONLY_PLANNING: [&str; 4] = ["todo_write", "agent_status", "sub_agent", "ask_questions"];

/// The fallback of the restrictive modes: refuses, saying why and what still works (a
/// read-only session still lists its memory).
struct Refuse(ApprovalMode);

#[async_trait]
impl Approver for Refuse {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if self.0 == ApprovalMode::ReadOnly && request.tool == "memory" && request.args["action"] == "list" {
            return Approval::Approved;
        }
        let allowed = match self.0 {
            ApprovalMode::ReadOnly => {
                "reading and searching files, network requests, the todo list, listing memory and sub-agents"
            }
            _ => "reading and searching files",
        };
        let what = match request.effect {
            Effect::MutatesFiles => "it changes files",
            Effect::Process => "it runs a program",
            Effect::Browser => "it drives the browser",
            Effect::Network => "it makes network requests",
            Effect::Conversation => "it changes saved notes, plans or other conversations",
            Effect::ReadOnly => "it needs approval",
        };
        Approval::Denied(format!(
            "this session runs with approval mode `{}`: `{}` is not allowed ({what}); only {allowed} is. \
             Do the task with those tools, or tell the user what you would run and why.",
            self.0.as_str(),
            request.tool,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tool: &str, effect: Effect) -> ApprovalRequest {
        ApprovalRequest { call_id: "1".into(), tool: tool.into(), effect, args: serde_json::Value::Null, server: None }
    }

    #[tokio::test]
    async fn g3_approval_modes_allow_what_they_say_and_explain_refusals() {
        let cases = [
            (ApprovalMode::Auto, [true, true, true, true]),
            (ApprovalMode::ReadOnly, [true, true, false, false]),
            (ApprovalMode::Deny, [true, false, false, false]),
        ];
        let calls = [
            ("read_file", Effect::ReadOnly),
            ("web_fetch", Effect::Network),
            ("shell", Effect::Process),
            ("edit_file", Effect::MutatesFiles),
        ];
        for (mode, allowed) in cases {
            let approver = mode.approver();
            for ((tool, effect), allow) in calls.into_iter().zip(allowed) {
                match approver.approve(&request(tool, effect)).await {
                    Approval::Approved => assert!(allow, "{mode:?} approved {tool}"),
                    Approval::Denied(reason) => {
                        assert!(!allow, "{mode:?} denied {tool}");
                        assert!(reason.contains(mode.as_str()) && reason.contains(tool), "{reason}");
                    }
                }
            }
            assert_eq!(ApprovalMode::parse(mode.as_str()), Some(mode));
        }
    }

    #[tokio::test]
    async fn g3_read_only_keeps_planning_tools_and_sub_agents() {
        let approver = ApprovalMode::ReadOnly.approver();
        for tool in ["todo_write", "sub_agent", "agent_status", "ask_questions"] {
            assert_eq!(approver.approve(&request(tool, Effect::Conversation)).await, Approval::Approved, "{tool}");
        }
        for tool in ["generate_plan", "send_message"] {
            assert!(matches!(approver.approve(&request(tool, Effect::Conversation)).await, Approval::Denied(_)));
        }
        let deny = ApprovalMode::Deny.approver();
        assert!(matches!(deny.approve(&request("sub_agent", Effect::Conversation)).await, Approval::Denied(_)));
    }

    #[tokio::test]
    async fn g3_g12_call_tool_is_left_to_the_approval_of_the_tool_it_calls() {
        for mode in [ApprovalMode::Auto, ApprovalMode::ReadOnly, ApprovalMode::Deny] {
            let approver = mode.approver();
            let call = request("call_tool", Effect::Conversation);
            assert_eq!(approver.approve(&call).await, Approval::Approved, "{mode:?}");
            assert!(approver.approves_without_asking("call_tool", Effect::Conversation), "{mode:?}");
        }
        // The called tool is then asked for with its own effect, as a direct call would be.
        let approver = ApprovalMode::ReadOnly.approver();
        assert!(matches!(approver.approve(&request("shell", Effect::Process)).await, Approval::Denied(_)));
    }
}
