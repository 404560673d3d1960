//! Modes, model families and the per-request plan of offered tools.

use std::collections::{BTreeMap, HashMap};

use kodik_core::{Effect, ToolRegistry, ToolSpec};
use serde::{Deserialize, Serialize};

use crate::deferred::{CallToolTool, ToolSearchTool};

/// The agent's working modes (G11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Writing code: every workspace tool.
    Code,
    /// Finding and fixing bugs: every workspace tool.
    Debug,
    /// Planning: built-in workspace tools stay read-only; `generate_plan` is offered.
    Plan,
    /// Answering questions: read-only.
    Ask,
    /// Teaching: read-only, plus `check_understanding`, `create_lesson` and the browser.
    Educator,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 5] = [Mode::Code, Mode::Debug, Mode::Plan, Mode::Ask, Mode::Educator];

    /// Parses `code`, `debug`, `plan`, `ask`, `educator` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(s))
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Debug => "debug",
            Self::Plan => "plan",
            Self::Ask => "ask",
            Self::Educator => "educator",
        }
    }

    /// The name as a title: `Ask`, `Code`.
    pub fn title(self) -> &'static str {
        match self {
            Self::Code => "Code",
            Self::Debug => "Debug",
            Self::Plan => "Plan",
            Self::Ask => "Ask",
            Self::Educator => "Educator",
        }
    }

    /// Whether the mode can offer a built-in tool at all (its structural policy).
    fn can_offer(self, name: &str, effect: Effect) -> bool {
        match name {
            "generate_plan" => return self == Mode::Plan,
            "check_understanding" | "create_lesson" => return self == Mode::Educator,
            "browser" => return matches!(self, Mode::Code | Mode::Debug | Mode::Educator),
            _ => {}
        }
        match self {
            Mode::Code | Mode::Debug => true,
            // Read-only modes: no file changes, no processes.
            Mode::Plan | Mode::Ask | Mode::Educator => {
                matches!(effect, Effect::ReadOnly | Effect::Network | Effect::Conversation)
            }
        }
    }
}

/// Model families that change the tool list (G10, G12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFamily {
    /// OpenAI models (GPT, o-series, Codex).
    OpenAi,
    /// Anthropic's Claude models.
    Claude,
    /// Everything else.
    Other,
}

impl ModelFamily {
    /// The family of a model id such as `gpt-5`, `openai/o3`, `claude-sonnet-4`.
    pub fn of(model: &str) -> Self {
        let m = model.to_ascii_lowercase();
        let base = m.rsplit('/').next().unwrap_or(&m);
        if m.starts_with("openai/")
            || base.starts_with("gpt")
            || base.starts_with("codex")
            || base.starts_with("chatgpt")
            || (base.starts_with('o') && base.chars().nth(1).is_some_and(|c| c.is_ascii_digit()))
        {
            Self::OpenAi
        } else if m.starts_with("anthropic/") || base.starts_with("claude") {
            Self::Claude
        } else {
            Self::Other
        }
    }
}

/// Where a tool stands in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    /// In the request's tool list.
    Immediate,
    /// Behind `tool_search` / `call_tool`.
    Deferred,
    /// Switched off by the user for this mode.
    SwitchedOff,
    /// The mode (or the model family) cannot offer it.
    NotOffered,
}

/// One tool the harness knows.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The tool's spec.
    pub spec: ToolSpec,
    /// The MCP server it comes from; `None` for built-ins.
    pub server: Option<String>,
    /// One line of system-prompt guidance.
    pub guidance: String,
}

/// What one request offers.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPlan {
    /// The mode the plan was made for.
    pub mode: Mode,
    /// The model family the plan was made for.
    pub family: ModelFamily,
    /// The request's tool list, in order (G13), `tool_search`/`call_tool` included when
    /// anything is deferred.
    pub tools: Vec<ToolSpec>,
    /// Deferred tools (reachable through `tool_search`/`call_tool`).
    pub deferred: Vec<ToolSpec>,
    /// Tools the user switched off in this mode.
    pub switched_off: Vec<String>,
    /// Tools this mode or model cannot offer.
    pub not_offered: Vec<String>,
    /// Of `not_offered`, those left out only because this model family gets the same
    /// capability under another name (G10: `apply_patch` for OpenAI models instead of the three
    /// file tools, and the reverse).
    pub respelled: Vec<String>,
    /// System-prompt guidance for the offered and deferred tools only (G11).
    pub guidance: String,
}

/// Why a tool is left out of a request ([`RequestPlan::left_out`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftOut {
    /// This model changes files with these tools instead (G10).
    Respelled(Vec<String>),
    /// The mode cannot offer it (G11).
    NotInMode,
    /// The user switched it off in this mode (G11).
    SwitchedOff,
}

impl RequestPlan {
    /// The tools that a tool calling others (code mode) must not reach for this request: those
    /// switched off and those the mode cannot offer, but not those only respelled for the model
    /// (a script may call `edit_file` where the model itself patches).
    pub fn withheld(&self) -> Vec<String> {
        self.switched_off
            .iter()
            .chain(self.not_offered.iter().filter(|n| !self.respelled.contains(n)))
            .cloned()
            .collect()
    }

    /// `base` as this request may use it: each tool that calls others (code mode) narrowed to
    /// what the request may use ([`withheld`](Self::withheld) left out, G10, G11), and this
    /// plan's descriptions of those tools replaced by the narrowed ones', so a description
    /// listing what a tool can call (code mode's catalog, K7) lists exactly that. A host builds
    /// its request's tool list from the plan after this and its registry from the result.
    pub fn narrow(&mut self, base: &ToolRegistry) -> ToolRegistry {
        let withheld = self.withheld();
        // Only the tools this request offers: one it does not is never called through it.
        let offered = self.tools.iter().chain(&self.deferred);
        let narrowed: Vec<_> = offered.filter_map(|s| base.get(&s.name)?.narrowed(&withheld)).collect();
        let mut registry = base.clone();
        for tool in narrowed {
            if let Some(spec) =
                self.tools.iter_mut().chain(self.deferred.iter_mut()).find(|s| s.name == tool.spec().name)
            {
                spec.description.clone_from(&tool.spec().description);
            }
            registry.register_arc(tool);
        }
        registry
    }

    /// Every tool left out of this request and why, those the mode or model cannot offer
    /// first: what a host tells a model that calls one anyway.
    pub fn left_out(&self) -> Vec<(String, LeftOut)> {
        let file_tools: Vec<String> = self
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| ["apply_patch", "create_file", "edit_file", "delete_file"].contains(&n.as_str()))
            .collect();
        let not_offered = self.not_offered.iter().map(|name| {
            let why = if self.respelled.contains(name) && !file_tools.is_empty() {
                LeftOut::Respelled(file_tools.clone())
            } else {
                LeftOut::NotInMode
            };
            (name.clone(), why)
        });
        not_offered.chain(self.switched_off.iter().map(|name| (name.clone(), LeftOut::SwitchedOff))).collect()
    }

    /// Each tool's availability, by name.
    pub fn availability(&self) -> BTreeMap<String, Availability> {
        let mut m = BTreeMap::new();
        for t in &self.tools {
            m.insert(t.name.clone(), Availability::Immediate);
        }
        for t in &self.deferred {
            m.insert(t.name.clone(), Availability::Deferred);
        }
        for n in &self.switched_off {
            m.insert(n.clone(), Availability::SwitchedOff);
        }
        for n in &self.not_offered {
            m.insert(n.clone(), Availability::NotOffered);
        }
        m
    }

    /// The tools of this request as a registry: the immediate tools from `base`, plus
    /// `tool_search` and `call_tool` over the deferred ones when there are any.
    pub fn registry(&self, base: &ToolRegistry) -> ToolRegistry {
        let mut reg = ToolRegistry::new();
        for spec in &self.tools {
            if let Some(t) = base.get(&spec.name) {
                reg.register_arc(t.clone());
            }
        }
        let direct = reg.clone();
        if !self.deferred.is_empty() {
            let mut deferred_reg = ToolRegistry::new();
            for spec in &self.deferred {
                if let Some(t) = base.get(&spec.name) {
                    deferred_reg.register_arc(t.clone());
                }
            }
            reg.register(ToolSearchTool::new(self.deferred.clone()));
            reg.register(CallToolTool::new(deferred_reg).with_direct(direct));
        }
        reg
    }

    /// Every tool a model may call in this request: [`registry`](Self::registry), plus each
    /// deferred tool under its own name. Models trained on other agents call `read_file` or
    /// `grep` directly even when only `call_tool` offers them; such a call runs as it would
    /// through `call_tool` (same checks, hooks and approval) instead of failing as an unknown
    /// tool, and the request's tool list stays the same (G12).
    pub fn callable(&self, base: &ToolRegistry) -> ToolRegistry {
        let mut reg = self.registry(base);
        for spec in &self.deferred {
            if let Some(t) = base.get(&spec.name)
                && reg.get(&spec.name).is_none()
            {
                reg.register_arc(t.clone());
            }
        }
        reg
    }
}

const FILE_TOOLS: [&str; 3] = ["create_file", "edit_file", "delete_file"];
const READ_SEARCH_FETCH: [&str; 6] = ["read_file", "glob", "grep", "codebase_search", "web_fetch", "web_search"];
const SUB_AGENT_MANAGEMENT: [&str; 2] = ["agent_status", "send_message"];
const DEFERRAL_TOOLS: [&str; 2] = ["tool_search", "call_tool"];

/// The tool policy of a conversation: every known tool, user switches and deferral settings.
#[derive(Debug, Clone, Default)]
pub struct Harness {
    tools: Vec<ToolEntry>,
    switches: HashMap<(Mode, String), bool>,
    deferral: HashMap<(Mode, String), bool>,
    hidden: std::collections::HashSet<String>,
    no_search_provider: bool,
    no_sub_agent_runner: bool,
    no_asker: bool,
}

impl Harness {
    /// A harness over built-in tools.
    pub fn new(builtins: impl IntoIterator<Item = ToolSpec>) -> Self {
        let mut h = Self::default();
        for spec in builtins {
            if DEFERRAL_TOOLS.contains(&spec.name.as_str()) {
                continue; // added per request when needed
            }
            let guidance = first_sentence(&spec.description);
            h.tools.push(ToolEntry { spec, server: None, guidance });
        }
        h
    }

    /// Adds a tool of an MCP server (offered in every mode, after the built-ins, A8, G13).
    pub fn add_mcp_tool(&mut self, server: impl Into<String>, spec: ToolSpec) -> &mut Self {
        let guidance = first_sentence(&spec.description);
        self.tools.push(ToolEntry { spec, server: Some(server.into()), guidance });
        self
    }

    /// Replaces every MCP server's tools with `tools` (server, spec), keeping the built-ins,
    /// switches and deferrals: a server's `tools/list_changed` applies from the next
    /// [`plan`](Self::plan).
    pub fn set_mcp_tools(&mut self, tools: impl IntoIterator<Item = (String, ToolSpec)>) -> &mut Self {
        self.tools.retain(|t| t.server.is_none());
        for (server, spec) in tools {
            self.add_mcp_tool(server, spec);
        }
        self
    }

    /// Switches a tool on or off in one mode; applies from the next [`plan`](Self::plan).
    pub fn set_enabled(&mut self, mode: Mode, tool: impl Into<String>, enabled: bool) -> &mut Self {
        self.switches.insert((mode, tool.into()), enabled);
        self
    }

    /// Hides a tool from the model in every mode (e.g. a tool code mode exposes to scripts
    /// only, K6); it is listed as not offered.
    pub fn hide_from_model(&mut self, tool: impl Into<String>) -> &mut Self {
        self.hidden.insert(tool.into());
        self
    }

    /// W5: `web_search` is offered only where a search provider is configured; with
    /// `false` it is listed as not offered in every mode.
    pub fn set_search_configured(&mut self, configured: bool) -> &mut Self {
        self.no_search_provider = !configured;
        self
    }

    /// A3: `sub_agent` is offered only where the host can run sub-agents; with `false` it is
    /// listed as not offered in every mode, as `web_search` is without a provider. Default
    /// `true`.
    pub fn set_sub_agents_available(&mut self, available: bool) -> &mut Self {
        self.no_sub_agent_runner = !available;
        self
    }

    /// A6: `ask_questions` is offered only where someone can answer; with `false` it is
    /// listed as not offered in every mode, as `web_search` is without a provider. Default
    /// `true`.
    pub fn set_asker_available(&mut self, available: bool) -> &mut Self {
        self.no_asker = !available;
        self
    }

    /// Overrides whether a tool is deferred in one mode.
    pub fn set_deferred(&mut self, mode: Mode, tool: impl Into<String>, deferred: bool) -> &mut Self {
        self.deferral.insert((mode, tool.into()), deferred);
        self
    }

    /// Every tool the harness knows.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.tools
    }

    fn enabled(&self, mode: Mode, name: &str) -> bool {
        self.switches.get(&(mode, name.to_string())).copied().unwrap_or(true)
    }

    /// The G12 defaults: in Code and Debug, read/search/fetch and sub-agent management tools
    /// are deferred; `lsp` everywhere; the todo list for OpenAI and Claude models everywhere.
    fn deferred_by_default(mode: Mode, family: ModelFamily, name: &str) -> bool {
        match name {
            "lsp" => true,
            "todo_write" => matches!(family, ModelFamily::OpenAi | ModelFamily::Claude),
            n if matches!(mode, Mode::Code | Mode::Debug) => {
                READ_SEARCH_FETCH.contains(&n) || SUB_AGENT_MANAGEMENT.contains(&n)
            }
            _ => false,
        }
    }

    /// The tools of one request for `mode` and `model`.
    pub fn plan(&self, mode: Mode, model: &str) -> RequestPlan {
        let family = ModelFamily::of(model);
        // G10: OpenAI models patch; the three file tools come back when apply_patch is off.
        let patch_on = self.tools.iter().any(|t| t.spec.name == "apply_patch") && self.enabled(mode, "apply_patch");
        let openai_patches = family == ModelFamily::OpenAi && patch_on;

        let mut builtin_immediate = Vec::new();
        let mut mcp_immediate = Vec::new();
        let mut deferred = Vec::new();
        let mut switched_off = Vec::new();
        let mut not_offered = Vec::new();
        let mut respelled = Vec::new();
        let mut guidance_entries: Vec<(&ToolEntry, bool)> = Vec::new();

        for entry in &self.tools {
            let name = entry.spec.name.as_str();
            let respelled_here = entry.server.is_none()
                && ((openai_patches && FILE_TOOLS.contains(&name))
                    || (name == "apply_patch" && family != ModelFamily::OpenAi));
            let structurally = entry.server.is_some() || (mode.can_offer(name, entry.spec.effect) && !respelled_here);
            let unconfigured = (self.no_search_provider && name == "web_search")
                || (self.no_sub_agent_runner && name == "sub_agent")
                || (self.no_asker && name == "ask_questions");
            if !structurally || self.hidden.contains(name) || unconfigured {
                if respelled_here && mode.can_offer(name, entry.spec.effect) && !self.hidden.contains(name) {
                    respelled.push(name.to_string());
                }
                not_offered.push(name.to_string());
                continue;
            }
            if !self.enabled(mode, name) {
                switched_off.push(name.to_string());
                continue;
            }
            let is_deferred = self
                .deferral
                .get(&(mode, name.to_string()))
                .copied()
                .unwrap_or_else(|| entry.server.is_none() && Self::deferred_by_default(mode, family, name));
            if is_deferred {
                deferred.push(entry.spec.clone());
            } else if entry.server.is_some() {
                mcp_immediate.push(entry.spec.clone());
            } else {
                builtin_immediate.push(entry.spec.clone());
            }
            guidance_entries.push((entry, is_deferred));
        }

        if !deferred.is_empty() {
            for spec in kodik_schema::harness::specs() {
                builtin_immediate.push(spec);
            }
        }
        builtin_immediate.sort_by(|a, b| a.name.cmp(&b.name));
        mcp_immediate.sort_by(|a, b| a.name.cmp(&b.name));
        deferred.sort_by(|a, b| a.name.cmp(&b.name));
        switched_off.sort();
        not_offered.sort();
        guidance_entries
            .sort_by(|a, b| (a.0.server.is_some(), &a.0.spec.name).cmp(&(b.0.server.is_some(), &b.0.spec.name)));

        let mut guidance = String::new();
        for (entry, is_deferred) in &guidance_entries {
            let via = if *is_deferred { " (deferred: find it with tool_search, run it with call_tool)" } else { "" };
            let from = entry.server.as_deref().map(|s| format!(" [MCP server {s}]")).unwrap_or_default();
            guidance.push_str(&format!("- {}{from}: {}{via}\n", entry.spec.name, entry.guidance));
        }

        let mut tools = builtin_immediate;
        tools.extend(mcp_immediate);
        RequestPlan { mode, family, tools, deferred, switched_off, not_offered, respelled, guidance }
    }
}

fn first_sentence(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.find(". ") {
        Some(i) => line[..=i].to_string(),
        None => line.to_string(),
    }
}
