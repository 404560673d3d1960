//! [`CodeModeTool`]: the `codemode` tool (K1).

use std::sync::Arc;

use async_trait::async_trait;
use kodik_core::{Resource, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec, TypedTool, Workspace};
use kodik_schema::ToolArgs as _;
use kodik_schema::codemode::CodemodeArgs;

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
         (prefer them to split('\\n') and global regex matches on big outputs). Limits: {} s, {} tool calls, {} in \
         parallel, {} output bytes.\n\nTools scripts can call:\n{}",
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

    /// The files the script names in string literals: a call later in the same turn on one of
    /// them (a read of a file the script writes) waits for the script, and the script waits for
    /// earlier calls on them (G2, G4). Paths the script computes at run time are not known here.
    fn resources(&self, args: &CodemodeArgs, ws: &Workspace) -> Vec<Resource> {
        let mut out: Vec<Resource> = Vec::new();
        for lit in path_literals(&args.code) {
            let r = ws.resource(lit);
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    async fn run(&self, args: CodemodeArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(self.run_code(&args.code, cx).await)
    }
}

/// At most this many literals are declared: a script naming more files is ordered by the first.
const MAX_PATH_LITERALS: usize = 256;

/// The string literals of `code` that look like file paths (a `.` or `/`, one line, no glob or
/// escape characters, not a URL). Comments are skipped; a template literal counts only without
/// `${…}`. A regular expression holding a quote can mislead the scan, which only adds or misses
/// a resource.
fn path_literals(code: &str) -> Vec<&str> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_PATH_LITERALS {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = code[i..].find('\n').map_or(bytes.len(), |n| i + n);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = code[i + 2..].find("*/").map_or(bytes.len(), |n| i + 2 + n + 2);
            }
            q @ (b'\'' | b'"' | b'`') => {
                let start = i + 1;
                let mut j = start;
                let mut plain = true;
                while j < bytes.len() && bytes[j] != q {
                    if bytes[j] == b'\\' {
                        plain = false;
                        j += 1;
                    } else if bytes[j] == b'\n' && q != b'`' {
                        break;
                    } else if q == b'`' && bytes[j] == b'$' && bytes.get(j + 1) == Some(&b'{') {
                        plain = false;
                    }
                    j += 1;
                }
                let lit = &code[start..j.min(bytes.len())];
                if plain && looks_like_path(lit) {
                    out.push(lit);
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn looks_like_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 1024
        && (s.contains('.') || s.contains('/'))
        && !s.contains(['\n', '*', '?', '[', '{', '<', '>', '|'])
        && !s.contains("://")
        && !s.trim().is_empty()
        && s.trim() == s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g2_path_literals_are_found_outside_comments() {
        let code = "// 'skip.txt'\n/* \"also.txt\" */ await tools.create_file({path: \"out/a.txt\", content: 'hello world'});\n\
                    await tools.read_file({path: `b.md`}); tools.glob({pattern: '**/*.rs'}); const u = 'https://x.org/a.js';\n\
                    tools.read_file({path: `gen/${i}.txt`}); const s = 'line';";
        assert_eq!(path_literals(code), vec!["out/a.txt", "b.md"]);
    }
}
