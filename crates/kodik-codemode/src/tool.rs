//! [`CodeModeTool`]: the `codemode` tool (K1).

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, TypedTool};
use kodik_schema::ToolArgs as _;
use kodik_schema::codemode::CodemodeArgs;
use serde_json::Value;

use crate::catalog::Catalog;
use crate::config::CodeModeConfig;
use crate::run::{Setup, run};

/// The `codemode` tool: runs a JavaScript program that calls the tools of `tools` (K1–K12).
///
/// Nested calls go through [`kodik_core::dispatch`] with the caller's hooks, approver, events
/// and a child cancellation token, so they are approved, hooked and cancelled like direct calls
/// (K5, K10). `store()` values live as long as this value.
pub struct CodeModeTool {
    spec: ToolSpec,
    setup: Setup,
}

impl std::fmt::Debug for CodeModeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeModeTool").field("config", &self.setup.config).finish_non_exhaustive()
    }
}

impl CodeModeTool {
    /// A tool over `tools`, the registry scripts may call (without `codemode`; if present it is
    /// left out anyway). Exposure rules in `config` decide which tools are callable and listed.
    pub fn new(config: CodeModeConfig, tools: ToolRegistry) -> Self {
        let catalog = Catalog::build(&tools, &config);
        let mut spec = kodik_schema::spec::<CodemodeArgs>();
        // Like the schema crate's spec: a script may mutate files, so it never starts while
        // the response still streams (G4).
        spec.streaming_start = false;
        spec.description = describe(&config, &catalog);
        Self { spec, setup: Setup { catalog: Arc::new(catalog), registry: tools, config, store: Arc::default() } }
    }

    /// The same tool over a new set of callable `tools`, sharing this one's configuration and
    /// `store()` values: for when the set changes mid-conversation (an MCP server's
    /// `tools/list_changed`). Scripts running on this value keep the tools they started with.
    pub fn with_tools(&self, tools: ToolRegistry) -> Self {
        let mut next = Self::new(self.setup.config.clone(), tools);
        next.setup.store = Arc::clone(&self.setup.store);
        next
    }

    /// The tool description: what scripts are, the limits in force, and the catalog of tools
    /// within `catalog-budget` bytes (K7).
    pub fn description(&self) -> &str {
        &self.spec.description
    }

    /// The configuration in force.
    pub fn config(&self) -> &CodeModeConfig {
        &self.setup.config
    }

    /// Runs `code` as a `codemode` call would.
    pub async fn run_code(&self, code: &str, cx: &ToolContext) -> ToolOutput {
        let done = run(code, &self.setup, cx).await;
        crate::output::render(done, self.setup.config.max_output_bytes)
    }
}

fn describe(cfg: &CodeModeConfig, catalog: &Catalog) -> String {
    let base = CodemodeArgs::DESCRIPTION;
    let base = base.split(" Limits:").next().unwrap_or(base);
    format!(
        "{base} Extra helpers: lines(text) and grep(text, needle, {{ignoreCase}}) split and filter large text fast \
         (prefer them to split('\\n') and global regex matches on big outputs); fileText(out) turns a read_file \
         result (lines numbered `N→text`) back into the file's text, e.g. to JSON.parse it. Limits: {} s, {} tool \
         calls, {} in parallel, {} output bytes.\n\nTools scripts can call:\n{}",
        cfg.timeout,
        cfg.max_tool_calls,
        cfg.max_concurrency,
        cfg.max_output_bytes,
        catalog.render(cfg.catalog_budget)
    )
}

#[async_trait]
impl TypedTool for CodeModeTool {
    type Args = CodemodeArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A script calls other tools, and which files they touch is known only as it runs: it
    /// waits for every earlier call of its turn, and every later call waits for it, so a read
    /// (or a `shell`) after the script sees what it wrote (G2, G4).
    fn orders_all_calls(&self, _args: &Value) -> bool {
        true
    }

    /// Scripts reach only what the request may use: not the tools the mode switched off or the
    /// model cannot have (G10, G11). A tool exposed to scripts only is "not offered" to the
    /// model on purpose and stays callable (K6).
    fn narrowed(&self, withheld: &[String]) -> Option<Arc<dyn kodik_core::Tool>> {
        let mut callable = self.setup.registry.clone();
        let mut removed = Vec::new();
        for name in withheld {
            if self.setup.config.exposure_of(name).model_sees() && callable.remove(name).is_some() {
                removed.push(name.clone());
            }
        }
        let mut next = self.with_tools(callable);
        // A catalog just built is not shared yet, so this always applies.
        if let Some(catalog) = Arc::get_mut(&mut next.setup.catalog) {
            catalog.withheld = removed;
        }
        Some(Arc::new(next))
    }

    async fn run(&self, args: CodemodeArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(self.run_code(&args.code, cx).await)
    }
}
