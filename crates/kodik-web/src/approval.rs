//! The web tools' own auto-approve switches (W5): `web_search` has one, apart from
//! `web_fetch`'s and from the network class both belong to, so a user can let the agent read
//! pages freely while every search (which may cost API credits) still asks, or the reverse.

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{Approval, ApprovalRequest, Approver, Effect};

/// Environment variable of `web_search`'s switch (`1`/`0`, `true`/`false`, `on`/`off`, `yes`/`no`).
pub const SEARCH_SWITCH_ENV: &str = "KODIK_WEB_SEARCH_AUTO_APPROVE";
/// Environment variable of `web_fetch`'s switch.
pub const FETCH_SWITCH_ENV: &str = "KODIK_WEB_FETCH_AUTO_APPROVE";

/// The two switches. `None` leaves a tool to the session's approver (its approval mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AutoApprove {
    /// `web_search`: `Some(true)` runs without asking, `Some(false)` is never auto-approved.
    pub web_search: Option<bool>,
    /// `web_fetch`, likewise.
    pub web_fetch: Option<bool>,
}

impl AutoApprove {
    /// Reads [`SEARCH_SWITCH_ENV`] and [`FETCH_SWITCH_ENV`] through `var`; an unreadable value
    /// is an error naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        Ok(Self { web_search: read_switch(&var, SEARCH_SWITCH_ENV)?, web_fetch: read_switch(&var, FETCH_SWITCH_ENV)? })
    }

    /// Like [`Self::from_vars`], but a switch that cannot be read leaves only its own tool
    /// refused ([`Unreadable::over`]) instead of failing the whole toolset: a typo in a web
    /// setting must not take the file, shell and edit tools (or the MCP server) down with it.
    /// Approval is still not guessed: the tool with the unreadable switch never runs.
    pub fn from_vars_per_tool(var: impl Fn(&str) -> Option<String>) -> (Self, Unreadable) {
        let mut unreadable = Unreadable::default();
        let mut read = |tool: &'static str, name: &str| match read_switch(&var, name) {
            Ok(v) => v,
            Err(e) => {
                unreadable.0.push((tool, e));
                None
            }
        };
        let web_search = read("web_search", SEARCH_SWITCH_ENV);
        let web_fetch = read("web_fetch", FETCH_SWITCH_ENV);
        (Self { web_search, web_fetch }, unreadable)
    }

    /// Whether any switch is set.
    pub fn is_set(&self) -> bool {
        self.web_search.is_some() || self.web_fetch.is_some()
    }

    fn switch(&self, tool: &str) -> Option<bool> {
        match tool {
            "web_search" => self.web_search,
            "web_fetch" => self.web_fetch,
            _ => None,
        }
    }

    /// `inner` with these switches on top: a switched-on tool runs without asking; a
    /// switched-off one goes to whoever `inner` asks the user through, or is denied when
    /// `inner` would have approved it without asking; every other call is `inner`'s.
    pub fn over(self, inner: Arc<dyn Approver>) -> Arc<dyn Approver> {
        if self.is_set() { Arc::new(Switched { switches: self, inner }) } else { inner }
    }
}

fn read_switch(var: impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<bool>, String> {
    let Some(v) = var(name) else { return Ok(None) };
    match v.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "1" | "true" | "on" | "yes" => Ok(Some(true)),
        "0" | "false" | "off" | "no" => Ok(Some(false)),
        other => Err(format!("{name}={other:?} is not one of 1/0, true/false, on/off, yes/no")),
    }
}

/// The web tools whose auto-approve switch could not be read, each with what is wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unreadable(pub Vec<(&'static str, String)>);

impl Unreadable {
    /// `inner` refusing every call of a tool listed here, with the message naming the variable;
    /// every other call is `inner`'s. The same approver when nothing is listed.
    pub fn over(&self, inner: Arc<dyn Approver>) -> Arc<dyn Approver> {
        if self.0.is_empty() { inner } else { Arc::new(Refused { tools: self.0.clone(), inner }) }
    }
}

struct Refused {
    tools: Vec<(&'static str, String)>,
    inner: Arc<dyn Approver>,
}

#[async_trait]
impl Approver for Refused {
    fn approves_without_asking(&self, tool: &str, effect: Effect) -> bool {
        !self.tools.iter().any(|(t, _)| *t == tool) && self.inner.approves_without_asking(tool, effect)
    }

    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        match self.tools.iter().find(|(t, _)| *t == request.tool) {
            Some((tool, why)) => Approval::Denied(format!(
                "{why}; `{tool}` cannot run until the user fixes this environment variable (other tools are \
                 unaffected)"
            )),
            None => self.inner.approve(request).await,
        }
    }
}

struct Switched {
    switches: AutoApprove,
    inner: Arc<dyn Approver>,
}

#[async_trait]
impl Approver for Switched {
    fn approves_without_asking(&self, tool: &str, effect: Effect) -> bool {
        match self.switches.switch(tool) {
            Some(on) => on,
            None => self.inner.approves_without_asking(tool, effect),
        }
    }

    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        match self.switches.switch(&request.tool) {
            Some(true) => Approval::Approved,
            Some(false) if self.inner.approves_without_asking(&request.tool, request.effect) => {
                Approval::Denied(format!(
                    "`{}` is not auto-approved (its own switch, {}, is off) and no one could be asked; \
                     ask the user to allow it",
                    request.tool,
                    if request.tool == "web_search" { SEARCH_SWITCH_ENV } else { FETCH_SWITCH_ENV },
                ))
            }
            _ => self.inner.approve(request).await,
        }
    }
}
