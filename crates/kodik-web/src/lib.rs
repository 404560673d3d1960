//! `web_fetch` and `web_search` for Kodik (SPEC W1–W5).
//!
//! - [`GuardedClient`]: the only way a page is reached. Names resolve through a resolver that
//!   drops forbidden addresses (loopback, RFC 1918, link-local/cloud metadata, CGNAT, reserved,
//!   multicast, documentation, unique-local, IPv4 embedded in IPv6 …), IP literals are checked
//!   directly, every redirect hop is checked again (at most 5, never https→http, plain http and
//!   loopback only when the model's own URL named localhost), environment proxies are off.
//! - [`WebFetchTool`]: HTML → Markdown with main-content extraction, JSON, text, PDF, images
//!   described; a 32 KB page cut at a section boundary with the outline of the rest; `query`;
//!   the text framed as untrusted; a 15-minute cache revalidated with ETag/Last-Modified.
//! - [`WebSearchTool`] over a [`SearchProvider`]: SearXNG, Brave, Tavily, Exa.

pub mod addr;
pub mod approval;
pub mod client;
pub mod config;
pub mod content;
pub mod decode;
pub mod fetch;
pub mod html;
pub mod pdf;
pub mod robots;
pub mod search;
pub mod sections;
pub mod stop;

use std::sync::Arc;

use kodik_core::{Approver, PageRenderer, ToolRegistry};

pub use approval::AutoApprove;
pub use client::{FetchError, Fetched, GuardedClient, GuardedResolver};
pub use config::WebConfig;
pub use fetch::WebFetchTool;
pub use search::{
    BraveProvider, ExaProvider, SearchError, SearchHit, SearchProvider, SearchResults, SearxngProvider, TavilyProvider,
    WebSearchTool,
};

/// Both web tools, ready to register.
#[derive(Clone, Default)]
pub struct WebToolset {
    config: WebConfig,
    provider: Option<Arc<dyn SearchProvider>>,
    renderer: Option<Arc<dyn PageRenderer>>,
    auto_approve: AutoApprove,
    /// Switches that could not be read: their tools are refused, the rest run.
    unreadable: approval::Unreadable,
}

impl std::fmt::Debug for WebToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebToolset")
            .field("search_provider", &self.provider.as_ref().map(|p| p.name()))
            .field("renderer", &self.renderer.is_some())
            .field("auto_approve", &self.auto_approve)
            .finish_non_exhaustive()
    }
}

impl WebToolset {
    /// The tools with `config` and no search provider yet.
    pub fn new(config: WebConfig) -> Self {
        Self { config, ..Self::default() }
    }

    /// Default configuration, the search provider the environment names
    /// ([`search::provider_from_env`]) and the auto-approve switches it sets
    /// ([`approval::SEARCH_SWITCH_ENV`], [`approval::FETCH_SWITCH_ENV`]).
    pub fn from_env() -> Result<Self, SearchError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Self::from_env`] over any variable lookup. A mistake in the environment stops only
    /// the tool it is about, for the user to fix: a search provider configured wrongly leaves
    /// `web_search` offered, answering each call with the configuration error; an unreadable
    /// auto-approve switch leaves its tool refused with a message naming the variable (approval
    /// is not guessed). web_fetch and every other tool keep working. Never Err today; the
    /// `Result` stays for callers.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, SearchError> {
        let (auto_approve, unreadable) = AutoApprove::from_vars_per_tool(&var);
        for (tool, why) in &unreadable.0 {
            tracing::warn!("{tool} is refused until its auto-approve switch is fixed: {why}");
        }
        let provider = search::provider_from(|k| var(k).filter(|v| !v.trim().is_empty())).unwrap_or_else(|e| {
            tracing::warn!("web_search is misconfigured: {e}");
            Some(Arc::new(search::Misconfigured(e.to_string())) as Arc<dyn SearchProvider>)
        });
        Ok(Self { provider, auto_approve, unreadable, ..Self::default() })
    }

    /// Sets `web_search`'s and `web_fetch`'s own auto-approve switches (W5).
    pub fn with_auto_approve(mut self, switches: AutoApprove) -> Self {
        self.auto_approve = switches;
        self.unreadable = approval::Unreadable::default();
        self
    }

    /// The session's approver with the web tools' switches on top ([`AutoApprove::over`]), and
    /// a tool whose switch could not be read refused ([`approval::Unreadable::over`]); the same
    /// approver when no switch is set.
    pub fn approver(&self, inner: Arc<dyn Approver>) -> Arc<dyn Approver> {
        self.unreadable.over(self.auto_approve.over(inner))
    }

    /// Searches through `provider`.
    pub fn with_search_provider(mut self, provider: Arc<dyn SearchProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Renders client-side pages through `renderer`.
    pub fn with_renderer(mut self, renderer: Arc<dyn PageRenderer>) -> Self {
        self.renderer = Some(renderer);
        self
    }

    /// Whether `web_search` has a provider (W5: offered only then).
    pub fn search_configured(&self) -> bool {
        self.provider.is_some()
    }

    /// Registers `web_fetch` and `web_search`.
    pub fn register(&self, registry: &mut ToolRegistry) -> Result<(), FetchError> {
        let config = Arc::new(self.config.clone());
        let mut fetch = WebFetchTool::with_client(GuardedClient::new(config.clone())?);
        if let Some(r) = &self.renderer {
            fetch = fetch.with_renderer(r.clone());
        }
        registry.register(fetch);
        registry.register(WebSearchTool::new(self.provider.clone(), config));
        Ok(())
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
