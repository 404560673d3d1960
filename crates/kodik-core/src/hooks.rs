//! [`Hooks`] around every call, and the [`Approver`] that decides whether a call may run (G3).

use std::collections::HashMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::output::{ToolCall, ToolOutput};
use crate::tool::Effect;

/// What a before-call hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Let the call go on.
    Allow,
    /// Block it; the call gets status `denied` with this reason.
    Block(String),
}

/// Code that runs around every call: direct calls, scheduled calls, calls from code mode (K5).
#[async_trait]
pub trait Hooks: Send + Sync {
    /// Before the call runs (after argument validation). May block it.
    async fn before_call(&self, _call: &ToolCall) -> HookDecision {
        HookDecision::Allow
    }

    /// After the result is known.
    ///
    /// When the tool ran, `call.args` is `null`: the arguments were moved into the tool, not
    /// copied (a whole-file edit carries megabytes, issue 18.2). A hook that needs them after
    /// the call keeps what it needs in [`before_call`](Self::before_call), which every call
    /// that runs passes first, matching the two by `call.id` and `call.name`. A call refused
    /// before it ran (blocked by a hook, approval denied) still carries its arguments here.
    async fn after_call(&self, _call: &ToolCall, _output: &ToolOutput) {}
}

/// No hooks.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

#[async_trait]
impl Hooks for NoHooks {}

/// What the approver is asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// What the tool may affect.
    pub effect: Effect,
    /// The arguments, as the model sent them.
    pub args: Value,
    /// For MCP tools: the server's name (G13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// The approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Approved,
    /// Do not run it; the reason goes to the model.
    Denied(String),
}

/// Decides whether a call may run. Waiting here must not block unrelated calls (G3).
#[async_trait]
pub trait Approver: Send + Sync {
    /// Asks for approval of one call.
    async fn approve(&self, request: &ApprovalRequest) -> Approval;

    /// Whether every call of `tool` (with `effect`) is approved whatever its arguments.
    /// `dispatch` then neither builds the [`ApprovalRequest`] (a deep copy of the arguments:
    /// megabytes for a whole-file edit) nor asks. The default, `false`, always asks.
    fn approves_without_asking(&self, _tool: &str, _effect: Effect) -> bool {
        false
    }
}

/// Auto-approve settings per tool and per effect class, with a fallback approver for the rest.
///
/// A per-tool setting beats a per-effect setting, which beats the default.
pub struct ApprovalPolicy {
    per_tool: HashMap<String, bool>,
    per_effect: HashMap<Effect, bool>,
    default_auto: bool,
    fallback: Option<Box<dyn Approver>>,
}

impl std::fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalPolicy")
            .field("per_tool", &self.per_tool)
            .field("per_effect", &self.per_effect)
            .field("default_auto", &self.default_auto)
            .finish()
    }
}

impl ApprovalPolicy {
    /// Approves everything.
    pub fn auto_approve_all() -> Self {
        Self { per_tool: HashMap::new(), per_effect: HashMap::new(), default_auto: true, fallback: None }
    }

    /// Approves nothing automatically: every call goes to `fallback` (or is denied without one).
    pub fn ask(fallback: Option<Box<dyn Approver>>) -> Self {
        Self { per_tool: HashMap::new(), per_effect: HashMap::new(), default_auto: false, fallback }
    }

    /// Auto-approve (or not) one tool.
    pub fn tool(mut self, name: impl Into<String>, auto: bool) -> Self {
        self.per_tool.insert(name.into(), auto);
        self
    }

    /// Auto-approve (or not) one effect class.
    pub fn effect(mut self, effect: Effect, auto: bool) -> Self {
        self.per_effect.insert(effect, auto);
        self
    }

    /// Whether `tool` with `effect` is auto-approved.
    pub fn is_auto(&self, tool: &str, effect: Effect) -> bool {
        self.per_tool.get(tool).or_else(|| self.per_effect.get(&effect)).copied().unwrap_or(self.default_auto)
    }
}

#[async_trait]
impl Approver for ApprovalPolicy {
    fn approves_without_asking(&self, tool: &str, effect: Effect) -> bool {
        self.is_auto(tool, effect)
    }

    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        if self.is_auto(&request.tool, request.effect) {
            return Approval::Approved;
        }
        match &self.fallback {
            Some(f) => f.approve(request).await,
            None => Approval::Denied(format!(
                "`{}` needs the user's approval and no one could be asked; ask the user to allow it",
                request.tool
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn g3_policy_per_tool_beats_per_effect() {
        let p = ApprovalPolicy::ask(None).effect(Effect::ReadOnly, true).tool("grep", false);
        let req = |tool: &str, effect| ApprovalRequest {
            call_id: "1".into(),
            tool: tool.into(),
            effect,
            args: Value::Null,
            server: None,
        };
        assert_eq!(p.approve(&req("read_file", Effect::ReadOnly)).await, Approval::Approved);
        assert!(matches!(p.approve(&req("grep", Effect::ReadOnly)).await, Approval::Denied(_)));
        assert!(matches!(p.approve(&req("shell", Effect::Process)).await, Approval::Denied(_)));
        // What dispatch checks before building a request: the same decisions, without args.
        assert!(p.approves_without_asking("read_file", Effect::ReadOnly));
        assert!(!p.approves_without_asking("grep", Effect::ReadOnly));
        assert!(!p.approves_without_asking("shell", Effect::Process));
    }
}
