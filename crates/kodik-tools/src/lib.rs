//! The Kodik tool set, assembled.
//!
//! `kodik-tools` re-exports every tool crate (one cargo feature each) and builds a working
//! [`Toolbox`]: a registry of the enabled tools plus the context they share (workspace,
//! session, approval, hooks, events), wired together where crates cooperate — the shell routes
//! `apply_patch` heredocs to the edit engine (P2).
//!
//! | feature | crate | tools |
//! | --- | --- | --- |
//! | `edit` (turns `search` on: edit_file changes only files read_file read, E2) | `kodik_edit` | edit_file, create_file, delete_file, apply_patch, edit_notebook |
//! | `search` | `kodik_search` | read_file, glob, grep; codebase_search when an embedder is given (`ToolboxBuilder::embedder`) |
//! | `shell` | `kodik_shell` | shell, get_terminal_output, kill_terminal |
//! | `codemode` | `kodik_codemode` | codemode |
//! | `lsp` | `kodik_lsp` | lsp, read_lints; errors after edits (E9) when a language server is installed |
//! | `web` | `kodik_web` | web_fetch, web_search (offered once a search provider is configured) |
//! | `browser` | `kodik_browser` | browser (headless Chromium) |
//! | `model` (off by default) | `kodik_model` | — the streaming model clients |
//! | `agent` (off by default) | `kodik_agent` | — the agent loop; `Toolbox::agent` builds one |
//! | `mcp` (off by default) | `kodik_mcp` | other MCP servers' tools as `server__tool` (`ToolboxBuilder::mcp`) |
//! | `conversation` | `kodik_conversation` | todo_write, memory, ask_questions, agent_status, sub_agent and send_message (with `agent`: `Toolbox::enable_sub_agents`), generate_plan, check_understanding, create_lesson |
//!
//! See the crate README for an agent loop of your own over a toolbox, and a tool of your own
//! beside the built-ins ([`ToolboxBuilder::tool`]).

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct WorkspaceReadmeDoctests;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The attribute the async traits a host implements ([`core::TypedTool`], [`core::Tool`],
/// [`core::Approver`], [`core::Hooks`]) are written with, so a host needs no `async-trait`
/// dependency of its own.
pub use async_trait::async_trait;

#[cfg(feature = "agent")]
pub use kodik_agent as agent;
#[cfg(feature = "browser")]
pub use kodik_browser as browser;
#[cfg(feature = "codemode")]
pub use kodik_codemode as codemode;
#[cfg(feature = "conversation")]
pub use kodik_conversation as conversation;
pub use kodik_core as core;
#[cfg(feature = "edit")]
pub use kodik_edit as edit;
pub use kodik_harness as harness;
#[cfg(feature = "lsp")]
pub use kodik_lsp as lsp;
#[cfg(feature = "mcp")]
pub use kodik_mcp as mcp;
#[cfg(feature = "model")]
pub use kodik_model as model;
pub use kodik_scheduler as scheduler;
pub use kodik_schema as schema;
#[cfg(feature = "search")]
pub use kodik_search as search;
#[cfg(feature = "shell")]
pub use kodik_shell as shell;
#[cfg(feature = "web")]
pub use kodik_web as web;

#[cfg(all(feature = "agent", feature = "conversation"))]
mod sub_agents;
#[cfg(all(feature = "agent", feature = "conversation"))]
pub use sub_agents::AgentLoopRunner;
#[cfg(all(feature = "agent", feature = "conversation"))]
mod sessions;
#[cfg(all(feature = "agent", feature = "conversation"))]
pub use sessions::publish_sessions;

use kodik_core::{
    Approver, EventSink, Hooks, PathError, Settings, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolSpec,
    Workspace,
};
use kodik_harness::{Harness, Mode, RequestPlan};
use kodik_scheduler::{Scheduler, SchedulerConfig};

/// Why a toolbox could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No workspace root was given.
    #[error("no workspace root given; call `.workspace(dir)` on the builder")]
    NoWorkspace,
    /// A root could not be used.
    #[error(transparent)]
    Workspace(#[from] PathError),
    /// A tool named in `disable` does not exist.
    #[error("unknown tool `{0}` in the toolbox configuration")]
    UnknownTool(String),
    /// A tool given to [`ToolboxBuilder::tool`] has a name a provider refuses (not 1–64 of
    /// `A-Z a-z 0-9 _ -`) or one the harness keeps for itself (`call_tool`, `tool_search`,
    /// `codemode`).
    #[error("a host tool cannot be called `{name}`: {reason}")]
    ToolName {
        /// The name given.
        name: String,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// The web tools' configuration (e.g. `KODIK_SEARCH_PROVIDER`) is wrong.
    #[cfg(feature = "web")]
    #[error("web tools: {0}")]
    Web(String),
}

/// Whether a host's tool may be called `name`: providers take 1–64 of `A-Z a-z 0-9 _ -`, and
/// the harness's own tools cannot be replaced (it offers and runs them itself).
fn check_host_tool_name(name: &str) -> Result<(), BuildError> {
    let reason = if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        "providers take 1 to 64 of A-Z, a-z, 0-9, _ and -"
    } else if matches!(name, "call_tool" | "tool_search" | "codemode") {
        "the harness keeps this name for its own tool"
    } else {
        return Ok(());
    };
    Err(BuildError::ToolName { name: name.to_owned(), reason })
}

/// The tools in force at one moment: replaced as a whole when a mounted MCP server's list
/// changes, so a request or turn works on one consistent set while the next sees the new one.
#[derive(Clone)]
struct ToolSet {
    /// Every enabled tool.
    registry: Arc<ToolRegistry>,
    harness: Arc<Harness>,
    /// Runs calls over `registry` plus the MCP tools removed since the build, which answer
    /// "no longer offered".
    scheduler: Scheduler,
    /// The MCP client's change count this set was built at.
    #[cfg(feature = "mcp")]
    mcp_generation: u64,
    /// Code mode over this set's tools (its `store()` values carry over to the next set).
    #[cfg(feature = "codemode")]
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    codemode: Option<Arc<kodik_codemode::CodeModeTool>>,
}

/// The tool set in force, and what rebuilding it after an MCP `tools/list_changed` needs.
struct Tools {
    current: RwLock<Arc<ToolSet>>,
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    scheduler_config: SchedulerConfig,
    #[cfg(feature = "mcp")]
    mcp: Option<McpMount>,
}

/// The mounted MCP servers and the tools they join.
#[cfg(feature = "mcp")]
struct McpMount {
    client: Arc<kodik_mcp::McpClient>,
    /// The built-in tools (after `disable`), without MCP tools and code mode.
    builtins: ToolRegistry,
    #[cfg(feature = "codemode")]
    codemode_config: Option<kodik_codemode::CodeModeConfig>,
    /// Every MCP tool name offered so far: (name, server, remote name).
    ever: std::sync::Mutex<Vec<(String, String, String)>>,
}

impl Tools {
    /// The set in force; rebuilt first when a mounted server's tool list changed since.
    fn current(&self) -> Arc<ToolSet> {
        let set = Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()));
        #[cfg(feature = "mcp")]
        if let Some(mount) = &self.mcp
            && mount.client.generation() != set.mcp_generation
        {
            let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
            if mount.client.generation() != current.mcp_generation {
                *current = Arc::new(mount.rebuild(&current, &self.scheduler_config));
            }
            return Arc::clone(&current);
        }
        set
    }

    fn replace_harness(&self, harness: Harness) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        #[cfg_attr(not(feature = "mcp"), allow(unused_mut))]
        let mut harness = harness;
        // A policy taken before a server's list changed must not bring back its old tools.
        #[cfg(feature = "mcp")]
        harness
            .set_mcp_tools(current.harness.entries().iter().filter_map(|e| Some((e.server.clone()?, e.spec.clone()))));
        let mut next = ToolSet::clone(&current);
        next.harness = Arc::new(harness);
        *current = Arc::new(next);
    }
}

/// A sub-agent's tools (A3): the set in force now with its own conversation tools in place of
/// the parent's, and code mode over those, so its scripts reach its own todo list, sub-agents
/// and parent too.
#[cfg(all(feature = "agent", feature = "conversation"))]
impl Tools {
    fn for_child(&self, own: &kodik_conversation::ConversationToolset) -> (Arc<ToolRegistry>, Arc<Harness>) {
        let set = self.current();
        let mut registry = ToolRegistry::clone(&set.registry);
        for name in sub_agents::CONVERSATION_TOOLS {
            registry.remove(name);
        }
        own.register(&mut registry);
        #[cfg(feature = "codemode")]
        if let Some(codemode) = &set.codemode
            && registry.remove("codemode").is_some()
        {
            let tool = codemode.with_tools(registry.clone());
            registry.register(tool);
        }
        (Arc::new(registry), Arc::clone(&set.harness))
    }
}

#[cfg(feature = "agent")]
impl kodik_agent::ToolSource for Tools {
    fn current(&self) -> (Arc<ToolRegistry>, Arc<Harness>) {
        let set = Tools::current(self);
        (Arc::clone(&set.registry), Arc::clone(&set.harness))
    }

    fn instructions(&self) -> Option<String> {
        self.mcp_instructions()
    }
}

#[cfg(any(feature = "agent", feature = "mcp"))]
impl Tools {
    /// The mounted MCP servers' instructions as a system-prompt section
    /// ([`Toolbox::mcp_instructions`]).
    fn mcp_instructions(&self) -> Option<String> {
        #[cfg(feature = "mcp")]
        if let Some(mount) = &self.mcp {
            return mount.client.instructions_prompt();
        }
        None
    }
}

#[cfg(feature = "mcp")]
impl McpMount {
    /// The MCP tools as the client lists them now, after the built-ins (names kept unique).
    fn mcp_tools(&self, builtins: &ToolRegistry) -> Vec<kodik_mcp::McpTool> {
        let taken = builtins.names().map(String::from).collect();
        let tools = self.client.tools(&taken);
        if let Ok(mut ever) = self.ever.lock() {
            for t in &tools {
                let name = &kodik_core::Tool::spec(t).name;
                if !ever.iter().any(|(n, _, _)| n == name) {
                    ever.push((name.clone(), t.server_name().to_owned(), t.remote_name().to_owned()));
                }
            }
        }
        tools
    }

    /// The set after a server's list changed: the built-ins, the servers' current tools,
    /// code mode over both, the same policy with the new MCP entries.
    fn rebuild(&self, current: &ToolSet, config: &SchedulerConfig) -> ToolSet {
        let generation = self.client.generation();
        let mut registry = self.builtins.clone();
        let tools = self.mcp_tools(&registry);
        let entries: Vec<(String, ToolSpec)> =
            tools.iter().map(|t| (t.server_name().to_owned(), kodik_core::Tool::spec(t).clone())).collect();
        for tool in tools {
            registry.register(tool);
        }
        let mut harness = Harness::clone(&current.harness);
        harness.set_mcp_tools(entries);
        #[cfg(feature = "codemode")]
        let codemode = current.codemode.as_ref().map(|old| {
            if let Some(config) = &self.codemode_config {
                for name in registry.names().filter(|n| !config.exposure_of(n).model_sees()) {
                    harness.hide_from_model(name);
                }
            }
            let tool = Arc::new(old.with_tools(registry.clone()));
            registry.register_arc(Arc::clone(&tool) as Arc<dyn kodik_core::Tool>);
            tool
        });
        let registry = Arc::new(registry);
        ToolSet {
            scheduler: Scheduler::new(self.callable(&registry)).with_config(config.clone()),
            registry,
            harness: Arc::new(harness),
            mcp_generation: generation,
            #[cfg(feature = "codemode")]
            codemode,
        }
    }

    /// `registry` plus the MCP tools offered earlier and removed since, which answer
    /// "no longer offered".
    fn callable(&self, registry: &Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        let ever = self.ever.lock().map(|e| e.clone()).unwrap_or_default();
        let removed: Vec<_> = ever.into_iter().filter(|(name, _, _)| registry.get(name).is_none()).collect();
        if removed.is_empty() {
            return Arc::clone(registry);
        }
        let mut callable = ToolRegistry::clone(registry);
        for (name, server, remote) in removed {
            callable.register(kodik_mcp::RemovedTool::new(name, server, remote));
        }
        Arc::new(callable)
    }
}

/// The enabled tools and the context they share: one conversation's tool set.
///
/// The tools of mounted MCP servers follow their `tools/list_changed`: [`registry`](Self::registry),
/// [`plan`](Self::plan), [`call`](Self::call) and the agents of `agent` (feature `agent`) see
/// the new list from their next use; calls already running keep the tools they started with.
pub struct Toolbox {
    tools: Arc<Tools>,
    context: ToolContext,
    scheduler_config: SchedulerConfig,
    #[cfg(feature = "conversation")]
    conversation: kodik_conversation::ConversationToolset,
    #[cfg(feature = "edit")]
    edit: kodik_edit::EditToolset,
    #[cfg(feature = "shell")]
    shell: kodik_shell::ShellToolset,
    #[cfg(feature = "lsp")]
    lsp: Arc<kodik_lsp::LanguageServers>,
    #[cfg(feature = "mcp")]
    mcp: Option<Arc<kodik_mcp::McpClient>>,
    #[cfg(feature = "browser")]
    browser: Arc<kodik_browser::BrowserSession>,
    #[cfg(feature = "search")]
    codebase: Option<Arc<kodik_search::CodebaseIndex>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.tools.current().registry)
            .field("context", &self.context)
            .finish()
    }
}

impl Toolbox {
    /// Starts configuring a toolbox.
    pub fn builder() -> ToolboxBuilder {
        ToolboxBuilder::default()
    }

    /// The registry of enabled tools, as it is now (a snapshot: mounted MCP servers may change
    /// their tools later).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        Arc::clone(&self.tools.current().registry)
    }

    /// The index behind `codebase_search`, when an embedder made it offered
    /// ([`ToolboxBuilder::embedder`]): a host [`warm`](kodik_search::CodebaseIndex::warm)s it at
    /// start so the index builds while the model works, or shows its
    /// [`status`](kodik_search::CodebaseIndex::status).
    #[cfg(feature = "search")]
    pub fn codebase_index(&self) -> Option<&Arc<kodik_search::CodebaseIndex>> {
        self.codebase.as_ref()
    }

    /// The shared context (workspace, session, approver, hooks, events).
    pub fn context(&self) -> &ToolContext {
        &self.context
    }

    /// The scheduler that runs turns over [`registry`](Self::registry) as it is now.
    pub fn scheduler(&self) -> Scheduler {
        self.tools.current().scheduler.clone()
    }

    /// The mode policy over the enabled tools, as it is now (switches and deferrals can be
    /// changed on it and set with [`Toolbox::set_harness`]).
    pub fn harness(&self) -> Harness {
        Harness::clone(&self.tools.current().harness)
    }

    /// Replaces the mode policy; applies from the next request. The mounted MCP servers'
    /// tools stay the ones they offer now.
    pub fn set_harness(&mut self, harness: Harness) {
        self.tools.current();
        self.tools.replace_harness(harness);
    }

    /// What one request offers in `mode` for `model` (G10–G13), with the descriptions of the
    /// tools that call others narrowed to it (code mode's catalog lists what its scripts can
    /// call in this request, K7; [`RequestPlan::narrow`]).
    pub fn plan(&self, mode: Mode, model: &str) -> RequestPlan {
        let set = self.tools.current();
        let mut plan = set.harness.plan(mode, model);
        plan.narrow(&set.registry);
        plan
    }

    /// The registry of exactly what `plan` offers, `tool_search`/`call_tool` included; a tool
    /// that calls others (code mode) reaches only what the request may use (G10, G11).
    pub fn registry_for(&self, plan: &RequestPlan) -> ToolRegistry {
        let set = self.tools.current();
        let mut plan = plan.clone();
        let narrowed = plan.narrow(&set.registry);
        plan.registry(&narrowed)
    }

    /// The specs of every enabled tool, sorted by name (for `kodik schema`-like listings). A
    /// model request offers [`plan`](Self::plan)'s `tools` instead: per mode and model, with
    /// deferred tools behind `tool_search`/`call_tool` and unusable ones left out.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.current().registry.specs().cloned().collect()
    }

    /// A scheduler that runs what a model may call in a request made from `plan`, with the
    /// builder's scheduler settings: the offered tools, `tool_search` and `call_tool` (which
    /// [`call`](Self::call) and [`run_turn`](Self::run_turn) do not know), and a deferred tool
    /// called by its own name ([`RequestPlan::callable`]); nothing the plan leaves out. A host
    /// with its own agent loop sends `plan.tools` to the model and runs the answer's calls
    /// here, with [`context`](Self::context) (G10–G12).
    pub fn scheduler_for(&self, plan: &RequestPlan) -> Scheduler {
        let set = self.tools.current();
        let mut plan = plan.clone();
        let narrowed = plan.narrow(&set.registry);
        Scheduler::new(Arc::new(plan.callable(&narrowed))).with_config(self.scheduler_config.clone())
    }

    /// Runs one call through validation, hooks, approval and the tool. Every enabled tool is
    /// callable by its name; for the calls of a request made from a [`plan`](Self::plan) use
    /// [`scheduler_for`](Self::scheduler_for).
    pub async fn call(&self, call: &ToolCall) -> ToolOutput {
        let scheduler = self.scheduler();
        let mut out = scheduler.run([call.clone()], &self.context).await;
        out.pop().unwrap_or_else(|| ToolOutput::error("the scheduler returned no result"))
    }

    /// Runs the calls of one model turn concurrently under the scheduler's rules and returns
    /// their results in call order.
    pub async fn run_turn(&self, calls: &[ToolCall]) -> Vec<ToolOutput> {
        let scheduler = self.scheduler();
        scheduler.run(calls.iter().cloned(), &self.context).await
    }

    /// The edit engine's checkpoints, for "undo" (E13).
    #[cfg(feature = "edit")]
    pub fn checkpoints(&self) -> Arc<kodik_edit::Checkpoints> {
        self.edit.checkpoints()
    }

    /// The shell's terminals, for a user stop (S12).
    #[cfg(feature = "shell")]
    pub fn shell(&self) -> &kodik_shell::ShellToolset {
        &self.shell
    }

    /// The language servers behind `lsp`, `read_lints` and the errors edits report (E9).
    #[cfg(feature = "lsp")]
    pub fn lsp(&self) -> &Arc<kodik_lsp::LanguageServers> {
        &self.lsp
    }

    /// The conversation tools' shared state and host traits (the todo list, for a UI).
    #[cfg(feature = "conversation")]
    pub fn conversation(&self) -> &kodik_conversation::ConversationToolset {
        &self.conversation
    }

    /// Opens the plans and lessons the conversation tools make in this toolbox's browser
    /// session, as its current tab (A7), instead of only saving them and printing their path.
    #[cfg(all(feature = "conversation", feature = "browser"))]
    pub fn present_in_browser(&self) {
        let tool = Arc::new(kodik_browser::BrowserTool::new(Arc::clone(&self.browser)));
        let presenter = kodik_conversation::BrowserPresenter::new(tool, self.context.clone());
        self.conversation.set_presenter(Arc::new(presenter));
    }

    /// Lets `sub_agent` start children: each is a kodik-agent conversation on `model` over
    /// this toolbox's tools, with its own session, in its own mode (A3), resumable from its
    /// transcript by `send_message` (A5). Each child has its own conversation tools: it can
    /// message its parent and start sub-agents of its own down to
    /// [`ConversationConfig::max_depth`](kodik_conversation::ConversationConfig::max_depth).
    /// Until then plans leave `sub_agent` out (nothing could run it), unless the
    /// [`ConversationToolset`](kodik_conversation::ConversationToolset) given to the builder
    /// had a runner. `false` when a runner was already set.
    #[cfg(all(feature = "agent", feature = "conversation"))]
    pub fn enable_sub_agents(
        &self,
        model: Arc<dyn kodik_model::ModelClient>,
        config: kodik_agent::AgentConfig,
    ) -> bool {
        let runner = AgentLoopRunner::new(
            model,
            Arc::downgrade(&self.tools),
            self.context.clone(),
            config,
            self.scheduler_config.clone(),
        );
        if !self.conversation.set_runner(Arc::new(runner)) {
            return false;
        }
        // `sub_agent` was left out of every plan while nothing could run it (A3).
        let mut harness = Harness::clone(&self.tools.current().harness);
        harness.set_sub_agents_available(true);
        self.tools.replace_harness(harness);
        true
    }

    /// The conversation's browser session (credentials for B10; `shutdown` ends Chromium).
    #[cfg(feature = "browser")]
    pub fn browser(&self) -> &Arc<kodik_browser::BrowserSession> {
        &self.browser
    }

    /// The mounted MCP servers, if any (for their errors and shutdown).
    #[cfg(feature = "mcp")]
    pub fn mcp(&self) -> Option<&Arc<kodik_mcp::McpClient>> {
        self.mcp.as_ref()
    }

    /// What the mounted MCP servers tell the model about their tools (the `instructions` of
    /// their `initialize` answers), as a section to put at the end of a system prompt, or
    /// `None` when no server sent any (or none is mounted). Each server's text is labelled as
    /// that server's, fenced so it cannot pass for the host's own instructions, and cut at
    /// [`MAX_INSTRUCTIONS_BYTES`](kodik_mcp::instructions::MAX_INSTRUCTIONS_BYTES) saying how
    /// much was left out ([`McpClient::instructions_prompt`](kodik_mcp::McpClient::instructions_prompt)).
    /// The requests of `Toolbox::agent` (feature `agent`) carry it already; an agent loop of your
    /// own reads it for each request, as a server started again may answer with new text:
    ///
    /// ```no_run
    /// # fn f(toolbox: &kodik_tools::Toolbox) {
    /// let mut system = String::from("You are a careful coding agent.");
    /// if let Some(servers) = toolbox.mcp_instructions() {
    ///     system.push_str("\n\n");
    ///     system.push_str(&servers);
    /// }
    /// # }
    /// ```
    #[cfg(feature = "mcp")]
    pub fn mcp_instructions(&self) -> Option<String> {
        self.tools.mcp_instructions()
    }

    /// An agent that talks to `model` and runs its calls on this toolbox: every tool, the
    /// shared context (workspace, approver, hooks, events), the mode policy and the
    /// scheduler settings. Each request offers what the harness plans for `config.mode` and
    /// the model (G10–G12), over the tools in force at that request (a mounted MCP server's
    /// `tools/list_changed` applies from the next one).
    #[cfg(feature = "agent")]
    pub fn agent(
        &self,
        model: Arc<dyn kodik_model::ModelClient>,
        config: kodik_agent::AgentConfig,
    ) -> kodik_agent::Agent {
        let set = self.tools.current();
        let agent = kodik_agent::Agent::new(
            model,
            Arc::clone(&set.registry),
            self.context.clone(),
            Harness::clone(&set.harness),
            config,
        )
        .with_tool_source(self.tools.clone())
        .with_scheduler_config(self.scheduler_config.clone());
        // Background sub-agents report to the model when they settle (A3); messages from
        // them and from other conversations arrive the same way (A5).
        #[cfg(feature = "conversation")]
        let agent = agent.with_notes(Arc::new(sub_agents::ConversationNotes::new(
            self.conversation.clone(),
            self.context.workspace.clone(),
        )));
        agent
    }
}

/// Configures a [`Toolbox`].
#[derive(Default)]
pub struct ToolboxBuilder {
    roots: Vec<PathBuf>,
    spool_dir: Option<PathBuf>,
    settings: Settings,
    untrusted: bool,
    approver: Option<Arc<dyn Approver>>,
    hooks: Option<Arc<dyn Hooks>>,
    events: Option<Arc<dyn EventSink>>,
    disabled: Vec<String>,
    custom: Vec<Arc<dyn kodik_core::Tool>>,
    scheduler: SchedulerConfig,
    #[cfg(feature = "codemode")]
    codemode: Option<kodik_codemode::CodeModeConfig>,
    #[cfg(feature = "lsp")]
    lsp: Option<kodik_lsp::LspConfig>,
    #[cfg(feature = "conversation")]
    conversation: Option<kodik_conversation::ConversationToolset>,
    #[cfg(feature = "shell")]
    shell: Option<kodik_shell::ShellToolset>,
    #[cfg(feature = "search")]
    search: Option<kodik_search::SearchToolset>,
    #[cfg(feature = "search")]
    embedder: Option<Arc<dyn kodik_core::Embedder>>,
    #[cfg(feature = "edit")]
    edit: Option<kodik_edit::EditToolset>,
    #[cfg(feature = "web")]
    web: Option<kodik_web::WebToolset>,
    #[cfg(feature = "mcp")]
    mcp: Option<Arc<kodik_mcp::McpClient>>,
}

impl ToolboxBuilder {
    /// Adds a workspace root (the first one is where relative paths resolve).
    pub fn workspace(mut self, root: impl Into<PathBuf>) -> Self {
        self.roots.push(root.into());
        self
    }

    /// Project settings such as `files.encoding`.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Whether the user trusts the workspace's authors (default `true`). An untrusted
    /// workspace keeps nothing beyond the session: the browser uses only fresh, isolated
    /// storage for it and may not clear the saved profiles (B1).
    pub fn trusted(mut self, trusted: bool) -> Self {
        self.untrusted = !trusted;
        self
    }

    /// Who approves calls (default: everything auto-approved). A denied call's reason goes to
    /// the model. The calls that `call_tool` and code mode's scripts make are asked for one by
    /// one under their own names, after the wrapper call itself (`call_tool`, `codemode`), so
    /// an approver that asks a person can let the wrappers through without asking.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Hooks around every call (code mode's nested calls included).
    pub fn hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Where terminal events and progress go.
    pub fn events(mut self, events: Arc<dyn EventSink>) -> Self {
        self.events = Some(events);
        self
    }

    /// Adds a tool of your own (a [`TypedTool`](kodik_core::TypedTool) or a
    /// [`Tool`](kodik_core::Tool)) beside the built-ins. It gets what they get: argument
    /// validation, hooks, approval by its spec's effect, the scheduler's ordering, and code
    /// mode's scripts can call it. One with a built-in's name replaces that tool. The harness
    /// offers it in the modes its effect allows: Code and Debug take every effect; Plan, Ask and
    /// Educator only read-only, network and conversation tools.
    ///
    /// ```no_run
    /// # fn f(my_tool: impl kodik_tools::core::Tool + 'static) -> Result<(), kodik_tools::BuildError> {
    /// let toolbox = kodik_tools::Toolbox::builder().workspace(".").tool(my_tool).build()?;
    /// # Ok(()) }
    /// ```
    pub fn tool(self, tool: impl kodik_core::Tool + 'static) -> Self {
        self.tool_arc(Arc::new(tool))
    }

    /// [`tool`](Self::tool) for a tool you keep a handle to.
    pub fn tool_arc(mut self, tool: Arc<dyn kodik_core::Tool>) -> Self {
        self.custom.push(tool);
        self
    }

    /// Leaves a tool out.
    pub fn disable(mut self, tool: impl Into<String>) -> Self {
        self.disabled.push(tool.into());
        self
    }

    /// Where full outputs that do not fit a result are saved (G9, G20). Default:
    /// `$TMPDIR/kodik-output-<uid>`, private to the user. This sets the folder for the whole
    /// process (every output preview made afterwards uses it), as a host does once at start-up.
    /// The shell, search and edit toolsets given to this builder save there too (a shell
    /// toolset moved to it gets a fresh terminal table: reach it through `Toolbox::shell`).
    pub fn spool_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spool_dir = Some(dir.into());
        self
    }

    /// Concurrency, per-call timeout and result size limits of the scheduler.
    pub fn scheduler(mut self, config: SchedulerConfig) -> Self {
        self.scheduler = config;
        self
    }

    /// The web tools' configuration and search provider (default: [`kodik_web::WebToolset::from_env`]).
    #[cfg(feature = "web")]
    pub fn web(mut self, web: kodik_web::WebToolset) -> Self {
        self.web = Some(web);
        self
    }

    /// Which language servers `lsp` and `read_lints` start (default: whichever of pyright,
    /// typescript-language-server, clangd, rust-analyzer and gopls is installed).
    #[cfg(feature = "lsp")]
    pub fn lsp(mut self, config: kodik_lsp::LspConfig) -> Self {
        self.lsp = Some(config);
        self
    }

    /// Code mode's configuration (K12); `enabled: false` leaves `codemode` out.
    #[cfg(feature = "codemode")]
    pub fn codemode(mut self, config: kodik_codemode::CodeModeConfig) -> Self {
        self.codemode = Some(config);
        self
    }

    /// The conversation tools' host side: who answers questions, who shows plans and
    /// lessons, where conversations are listed, this session's id. By default nobody can be
    /// asked (plans then leave `ask_questions` out) and plans and lessons are saved with their
    /// path printed.
    #[cfg(feature = "conversation")]
    pub fn conversation(mut self, tools: kodik_conversation::ConversationToolset) -> Self {
        self.conversation = Some(tools);
        self
    }

    /// The shell tools' configuration (environment, limits, output preview); by default
    /// [`ShellToolset::new`](kodik_shell::ShellToolset::new). An agent host removes its model
    /// API key here, so that a command's `env` cannot show it to the model:
    /// `ShellToolset::new().unset_env("OPENAI_API_KEY")`.
    #[cfg(feature = "shell")]
    pub fn shell(mut self, tools: kodik_shell::ShellToolset) -> Self {
        self.shell = Some(tools);
        self
    }

    /// The search tools' limits: the model's context window that read_file's size limit
    /// follows, glob and grep result caps, threads; by default
    /// [`SearchToolset::new`](kodik_search::SearchToolset::new). A host whose model has a
    /// small window sets it here as well as in the agent's config:
    /// `SearchToolset::new().context_window_tokens(32_000)`.
    #[cfg(feature = "search")]
    pub fn search(mut self, tools: kodik_search::SearchToolset) -> Self {
        self.search = Some(tools);
        self
    }

    /// Offers `codebase_search` (L7), meaning-based search over a vector index of the workspace
    /// that builds and updates itself, with this embedder's vectors (e.g. kodik-model's
    /// `EmbeddingsClient` for an OpenAI-compatible `/v1/embeddings` server). Without one the tool
    /// is not offered. A search toolset given to [`search`](Self::search) with its own index
    /// keeps that one.
    #[cfg(feature = "search")]
    pub fn embedder(mut self, embedder: Arc<dyn kodik_core::Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The edit tools: which file operations are allowed (P4,
    /// [`EditToolset::with_file_ops`](kodik_edit::EditToolset::with_file_ops)) and how much of
    /// a diff a result shows; by default [`EditToolset::new`](kodik_edit::EditToolset::new).
    /// Its checkpoints are the toolbox's ([`Toolbox::checkpoints`]).
    #[cfg(feature = "edit")]
    pub fn edit(mut self, tools: kodik_edit::EditToolset) -> Self {
        self.edit = Some(tools);
        self
    }

    /// Mounts the tools of connected MCP servers as `server__tool`, after the built-ins (A8,
    /// G13). Connect first (it is async), e.g. from the `mcpServers` files:
    ///
    /// ```no_run
    /// # async fn f(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    /// use kodik_tools::mcp::{ClientOptions, McpClient, McpConfig};
    /// let config = McpConfig::load_default(dir)?; // ~/.config/kodik/mcp.json, then .kodik/mcp.json
    /// let client = McpClient::connect(&config, ClientOptions::default()).await;
    /// for e in client.errors() {
    ///     eprintln!("{e}");
    /// }
    /// let tb = kodik_tools::Toolbox::builder().workspace(dir).mcp(std::sync::Arc::new(client)).build()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "mcp")]
    pub fn mcp(mut self, client: Arc<kodik_mcp::McpClient>) -> Self {
        self.mcp = Some(client);
        self
    }

    /// Builds the toolbox.
    pub fn build(self) -> Result<Toolbox, BuildError> {
        if self.roots.is_empty() {
            return Err(BuildError::NoWorkspace);
        }
        // Before any toolset is built: each takes the folder from its default preview settings.
        if let Some(dir) = &self.spool_dir {
            kodik_core::preview::set_default_spool_dir(Some(dir.clone()));
        }
        // Toolsets the host made before took the folder in force then. The read tools reach
        // only full outputs in the folder set now (G20), so theirs move here too; one that
        // saves nothing (`None`) stays so.
        #[cfg(any(feature = "shell", feature = "search", feature = "edit"))]
        let elsewhere = |p: &Option<PathBuf>| p.is_some() && *p != self.spool_dir;
        #[cfg(feature = "shell")]
        let shell = match self.shell {
            Some(shell) if self.spool_dir.is_some() && elsewhere(&shell.config().preview.spool_dir) => {
                Some(shell.configure(|c| c.preview.spool_dir = self.spool_dir.clone()))
            }
            other => other,
        };
        #[cfg(feature = "search")]
        let search = match self.search {
            Some(search) if self.spool_dir.is_some() && elsewhere(&search.config().spool_dir) => {
                Some(search.spool_dir(self.spool_dir.clone()))
            }
            other => other,
        };
        #[cfg(feature = "edit")]
        let edit = match self.edit {
            Some(edit) if self.spool_dir.is_some() && elsewhere(&edit.preview_config().spool_dir) => {
                let preview =
                    kodik_core::PreviewConfig { spool_dir: self.spool_dir.clone(), ..edit.preview_config().clone() };
                Some(edit.preview(preview))
            }
            other => other,
        };
        let workspace = Workspace::with_roots(&self.roots)?.with_settings(self.settings).with_trusted(!self.untrusted);
        let mut context = ToolContext::new(workspace);
        if let Some(a) = self.approver {
            context.approver = a;
        }
        // The loop guard (G15) sits in front of the host's hooks: a call that keeps failing
        // with the same arguments is blocked the third time.
        let inner: Arc<dyn Hooks> = self.hooks.unwrap_or_else(|| Arc::new(kodik_core::NoHooks));
        // It sees the state of the files calls name, and learns below what each tool may change.
        let guard = Arc::new(kodik_harness::RepeatGuard::new(inner).watching(context.workspace.clone()));
        context.hooks = Arc::clone(&guard) as Arc<dyn Hooks>;
        if let Some(e) = self.events {
            context.events = e;
        }
        let mut registry = ToolRegistry::new();

        #[cfg(feature = "search")]
        let codebase = {
            let search = search.unwrap_or_default();
            let search = match self.embedder {
                Some(embedder) if search.index().is_none() => search.embedder(embedder),
                _ => search,
            };
            search.register(&mut registry);
            search.index().cloned()
        };

        #[cfg(feature = "edit")]
        let edit = edit.unwrap_or_default();
        #[cfg(feature = "edit")]
        {
            edit.register(&mut registry);
            // The shell hands `apply_patch <<'EOF'` heredocs to the edit engine (P2).
            context.interceptor = Some(edit.interceptor());
        }

        #[cfg(feature = "shell")]
        let shell = shell.unwrap_or_default();
        #[cfg(feature = "shell")]
        shell.register(&mut registry);

        // Servers start on first use; the same manager reports errors after edits (E9).
        #[cfg(feature = "lsp")]
        let lsp = {
            let config = self.lsp.unwrap_or_default();
            let servers = Arc::new(kodik_lsp::LanguageServers::new(config, context.workspace.roots().to_vec()));
            kodik_lsp::LspToolset::new(Arc::clone(&servers)).register(&mut registry);
            context.diagnostics = Some(Arc::clone(&servers) as Arc<dyn kodik_core::DiagnosticsProvider>);
            servers
        };

        #[cfg(feature = "conversation")]
        let conversation = self.conversation.unwrap_or_default();
        #[cfg(feature = "conversation")]
        conversation.register(&mut registry);

        // One browser session per toolbox (= per conversation); Chromium starts on first use.
        #[cfg(feature = "browser")]
        let browser = Arc::new(kodik_browser::BrowserSession::new(kodik_browser::BrowserOptions {
            workspace_key: Some(context.workspace.primary_root().display().to_string()),
            // Also for pages web_fetch renders before any browser call (B1).
            trusted: context.workspace.is_trusted(),
            ..Default::default()
        }));

        #[cfg(feature = "web")]
        let search_configured = {
            let web = match self.web {
                Some(w) => w,
                None => kodik_web::WebToolset::from_env().map_err(|e| BuildError::Web(e.to_string()))?,
            };
            // web_fetch renders JavaScript-only pages in the same browser session (W2).
            #[cfg(feature = "browser")]
            let web = web.with_renderer(browser.clone());
            web.register(&mut registry).map_err(|e| BuildError::Web(e.to_string()))?;
            // web_search's and web_fetch's own auto-approve switches sit over the session's (W5).
            context.approver = web.approver(Arc::clone(&context.approver));
            web.search_configured()
        };

        #[cfg(feature = "browser")]
        registry.register(kodik_browser::BrowserTool::new(browser.clone()));

        // The host's own tools, after the built-ins so one of the same name replaces it.
        #[cfg(feature = "conversation")]
        let host_has = |name: &str| self.custom.iter().any(|t| t.spec().name == name);
        #[cfg(feature = "conversation")]
        let (host_sub_agent, host_asker) = (host_has("sub_agent"), host_has("ask_questions"));
        for tool in self.custom {
            check_host_tool_name(&tool.spec().name)?;
            registry.register_arc(tool);
        }

        for name in &self.disabled {
            if name != "codemode" && registry.remove(name).is_none() {
                return Err(BuildError::UnknownTool(name.clone()));
            }
        }

        // MCP tools join before code mode, so scripts reach them too (K1). The count is read
        // before the list: a change while building makes the first use rebuild.
        #[cfg(feature = "mcp")]
        #[cfg_attr(not(feature = "codemode"), allow(unused_mut))]
        let mut mcp = self.mcp.as_ref().map(|client| McpMount {
            client: Arc::clone(client),
            builtins: registry.clone(),
            #[cfg(feature = "codemode")]
            codemode_config: None,
            ever: std::sync::Mutex::default(),
        });
        #[cfg(feature = "mcp")]
        let mcp_generation = mcp.as_ref().map(|m| m.client.generation()).unwrap_or_default();
        #[cfg(feature = "mcp")]
        let mcp_tools: Vec<(String, ToolSpec)> = match &mcp {
            Some(mount) => mount
                .mcp_tools(&registry)
                .into_iter()
                .map(|tool| {
                    let entry = (tool.server_name().to_owned(), kodik_core::Tool::spec(&tool).clone());
                    registry.register(tool);
                    entry
                })
                .collect(),
            None => Vec::new(),
        };

        // Code mode calls the other tools, so it is built last, over everything else (K5:
        // it cannot call itself).
        #[cfg(feature = "codemode")]
        let (script_only, codemode): (Vec<String>, _) = {
            let config = self.codemode.unwrap_or_default();
            if config.enabled && !self.disabled.iter().any(|d| d == "codemode") {
                let hidden =
                    registry.names().filter(|n| !config.exposure_of(n).model_sees()).map(String::from).collect();
                #[cfg(feature = "mcp")]
                if let Some(mount) = mcp.as_mut() {
                    mount.codemode_config = Some(config.clone());
                }
                let tool = Arc::new(kodik_codemode::CodeModeTool::new(config, registry.clone()));
                registry.register_arc(Arc::clone(&tool) as Arc<dyn kodik_core::Tool>);
                (hidden, Some(tool))
            } else {
                (Vec::new(), None)
            }
        };

        #[cfg(feature = "mcp")]
        #[cfg_attr(not(any(feature = "web", feature = "codemode", feature = "conversation")), allow(unused_mut))]
        let mut harness = {
            let from_mcp: std::collections::HashSet<&str> = mcp_tools.iter().map(|(_, s)| s.name.as_str()).collect();
            let mut harness = Harness::new(registry.specs().filter(|s| !from_mcp.contains(s.name.as_str())).cloned());
            for (server, spec) in &mcp_tools {
                harness.add_mcp_tool(server.clone(), spec.clone());
            }
            harness
        };
        #[cfg(not(feature = "mcp"))]
        #[cfg_attr(not(any(feature = "web", feature = "codemode", feature = "conversation")), allow(unused_mut))]
        let mut harness = Harness::new(registry.specs().cloned());
        #[cfg(feature = "web")]
        harness.set_search_configured(search_configured);
        // Offered once `enable_sub_agents` (or the host's own runner) can start them (A3).
        #[cfg(feature = "conversation")]
        harness.set_sub_agents_available(conversation.has_runner() || host_sub_agent);
        // With nobody to answer, ask_questions could only ever say so (A6, G11).
        #[cfg(feature = "conversation")]
        harness.set_asker_available(conversation.has_asker() || host_asker);
        #[cfg(feature = "codemode")]
        for name in script_only {
            harness.hide_from_model(name);
        }
        let registry = Arc::new(registry);
        guard.learn_tools(Arc::clone(&registry));
        let scheduler = Scheduler::new(Arc::clone(&registry)).with_config(self.scheduler.clone());
        let set = ToolSet {
            registry,
            harness: Arc::new(harness),
            scheduler,
            #[cfg(feature = "mcp")]
            mcp_generation,
            #[cfg(feature = "codemode")]
            codemode,
        };
        let tools = Arc::new(Tools {
            current: RwLock::new(Arc::new(set)),
            scheduler_config: self.scheduler.clone(),
            #[cfg(feature = "mcp")]
            mcp,
        });
        Ok(Toolbox {
            tools,
            context,
            scheduler_config: self.scheduler,
            #[cfg(feature = "conversation")]
            conversation,
            #[cfg(feature = "edit")]
            edit,
            #[cfg(feature = "shell")]
            shell,
            #[cfg(feature = "lsp")]
            lsp,
            #[cfg(feature = "mcp")]
            mcp: self.mcp,
            #[cfg(feature = "browser")]
            browser,
            #[cfg(feature = "search")]
            codebase,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn building_without_a_workspace_is_a_clear_error() {
        let err = Toolbox::builder().build().unwrap_err();
        assert!(err.to_string().contains(".workspace(dir)"));
    }

    #[test]
    fn disabling_an_unknown_tool_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let err = Toolbox::builder().workspace(d.path()).disable("edit_fil").build().unwrap_err();
        assert!(matches!(err, BuildError::UnknownTool(_)));
    }
}
