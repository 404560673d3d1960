//! Argument types of the web tools: `web_fetch` and `web_search` (SPEC W1–W5).

use kodik_core::{Effect, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolArgs, spec};

/// The specs of `web_fetch` and `web_search`.
pub fn specs() -> Vec<ToolSpec> {
    vec![spec::<WebFetchArgs>(), spec::<WebSearchArgs>()]
}

/// Arguments of `web_fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::compact_schema)]
pub struct WebFetchArgs {
    /// The page to fetch. Must be `https://`; plain `http://` is allowed only for localhost.
    pub url: String,
    /// Words to look for. When given, only the sections of the page whose text holds them are
    /// returned, each with its heading, in page order (the start of the page if none match).
    /// Use it on long documentation pages to save context.
    pub query: Option<String>,
    /// Where to continue a long page: the byte offset of a section, as printed in the outline
    /// or as "next offset" at the end of the previous result (default 0). With `query`, the
    /// search for matching sections starts there.
    pub offset: Option<u64>,
}

impl ToolArgs for WebFetchArgs {
    const NAME: &'static str = "web_fetch";
    const EFFECT: Effect = Effect::Network;
    const DESCRIPTION: &'static str = "Fetch a web page and return its content as Markdown (cut at 32 KB; 30-second \
timeout; pages rendered by JavaScript are loaded in a headless browser). HTTPS only; plain HTTP only for localhost. \
Pass `query` to get only the sections that mention its words, which keeps long pages small. Typical use: web_search \
to discover, then web_fetch the most promising result to read it in full.";
}

/// Arguments of `web_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::compact_schema)]
pub struct WebSearchArgs {
    /// What to search for, as you would type it into a search engine: library and version
    /// names, the exact error message, the API in question.
    pub query: String,
    /// At most this many results (default 10).
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

impl ToolArgs for WebSearchArgs {
    const NAME: &'static str = "web_search";
    const EFFECT: Effect = Effect::Network;
    const DESCRIPTION: &'static str = "Search the web for current information you have no link for: latest library \
versions and APIs, unfamiliar error messages, breaking changes, official documentation pages. Returns ranked results \
(title, URL, snippet), usually with a synthesized answer; waits at most 30 seconds. Then read the best result in full \
with web_fetch.";
}
