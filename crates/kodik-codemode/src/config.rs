//! [`CodeModeConfig`]: limits, exposure rules and the config-file section (K6, K8, K12).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a tool is offered to the model and to scripts (K6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exposure {
    /// The model sees it as a tool; scripts can call it; short form in the catalog.
    #[default]
    Direct,
    /// Scripts only; full signature in the catalog.
    Codemode,
    /// Scripts only; not in the catalog, found with `searchTools()`.
    Deferred,
    /// The model sees it; scripts cannot call it.
    ModelOnly,
}

impl Exposure {
    /// Whether the model gets this tool in its own tool list.
    pub fn model_sees(self) -> bool {
        matches!(self, Self::Direct | Self::ModelOnly)
    }

    /// Whether scripts may call this tool.
    pub fn script_callable(self) -> bool {
        !matches!(self, Self::ModelOnly)
    }

    /// The config-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Codemode => "codemode",
            Self::Deferred => "deferred",
            Self::ModelOnly => "model-only",
        }
    }
}

/// The `codemode:` config section (K12), also usable as a builder.
///
/// ```
/// use kodik_codemode::{CodeModeConfig, Exposure};
/// let cfg: CodeModeConfig = serde_json::from_str(
///     r#"{"timeout": 60, "mcp-exposure": "codemode", "exposure": {"github__create_issue": "direct"}}"#,
/// ).unwrap();
/// assert_eq!(cfg.exposure_of("github__list_issues"), Exposure::Codemode);
/// assert_eq!(cfg.exposure_of("github__create_issue"), Exposure::Direct);
/// assert_eq!(cfg.max_tool_calls, 50);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct CodeModeConfig {
    /// Whether the `codemode` tool is offered at all (on by default).
    pub enabled: bool,
    /// Seconds per script (fractions allowed).
    pub timeout: f64,
    /// Tool calls per script.
    pub max_tool_calls: usize,
    /// Tool calls of one script running at the same time.
    pub max_concurrency: usize,
    /// Bytes of result the model receives; the full text goes to a temporary file.
    pub max_output_bytes: usize,
    /// Approximate heap-growth limit in MiB; `-1` (or any negative value) disables it.
    pub memory_limit_mb: i64,
    /// Bytes of tool list in the tool description.
    pub catalog_budget: usize,
    /// Default exposure of MCP tools (names containing `__`).
    pub mcp_exposure: Exposure,
    /// Glob rules name → exposure; an exact name beats a glob, a longer pattern beats a shorter
    /// one; matching ignores case.
    pub exposure: BTreeMap<String, Exposure>,
    /// Run each script in a child process started with this command (program, then arguments),
    /// one that serves [`crate::worker::serve_stdio`] — `kodik codemode-worker`, or the
    /// `kodik-codemode-worker` binary of this crate. The process is killed the moment the script
    /// times out, is cancelled or passes the memory limit, which is then measured on that process
    /// alone: code after an `await` cannot keep running or growing. Unset (the default): scripts
    /// run on a thread of this process, where boa cannot interrupt code after an `await`.
    pub worker: Option<Vec<String>>,
}

impl Default for CodeModeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: 30.0,
            max_tool_calls: 50,
            max_concurrency: 8,
            max_output_bytes: 100_000,
            memory_limit_mb: 256,
            catalog_budget: 12_000,
            mcp_exposure: Exposure::Direct,
            exposure: BTreeMap::new(),
            worker: None,
        }
    }
}

impl CodeModeConfig {
    /// The defaults (same as [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Turn code mode on or off.
    pub fn enabled(mut self, on: bool) -> Self {
        self.enabled = on;
        self
    }

    /// Time limit per script.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d.as_secs_f64();
        self
    }

    /// Tool calls per script.
    pub fn max_tool_calls(mut self, n: usize) -> Self {
        self.max_tool_calls = n;
        self
    }

    /// Parallel tool calls per script.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n;
        self
    }

    /// Result bytes the model receives.
    pub fn max_output_bytes(mut self, n: usize) -> Self {
        self.max_output_bytes = n;
        self
    }

    /// Heap-growth limit in MiB; `None` disables the watchdog.
    pub fn memory_limit_mb(mut self, mb: Option<u64>) -> Self {
        self.memory_limit_mb = mb.map_or(-1, |m| i64::try_from(m).unwrap_or(i64::MAX));
        self
    }

    /// Bytes of catalog in the tool description.
    pub fn catalog_budget(mut self, n: usize) -> Self {
        self.catalog_budget = n;
        self
    }

    /// Default exposure of MCP tools.
    pub fn mcp_exposure(mut self, e: Exposure) -> Self {
        self.mcp_exposure = e;
        self
    }

    /// Runs scripts in child processes started as `program args…` (see the `worker` field).
    pub fn worker(mut self, program: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut command = vec![program.into()];
        command.extend(args.into_iter().map(Into::into));
        self.worker = Some(command);
        self
    }

    /// Adds one exposure rule (`"github__*"`, `"subagent"`, …).
    pub fn expose(mut self, pattern: impl Into<String>, e: Exposure) -> Self {
        self.exposure.insert(pattern.into(), e);
        self
    }

    /// The script time limit as a duration (at least 1 ms; bad values fall back to 30 s).
    pub fn timeout_duration(&self) -> Duration {
        if self.timeout.is_finite() && self.timeout > 0.0 {
            Duration::from_secs_f64(self.timeout.min(86_400.0)).max(Duration::from_millis(1))
        } else {
            Duration::from_secs(30)
        }
    }

    /// The memory limit in bytes, or `None` when disabled.
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        u64::try_from(self.memory_limit_mb).ok().map(|mb| mb.saturating_mul(1024 * 1024))
    }

    /// The exposure of the tool called `name` under these rules (K6).
    pub fn exposure_of(&self, name: &str) -> Exposure {
        let lower = name.to_lowercase();
        let mut best: Option<(bool, usize, &str, Exposure)> = None;
        for (pattern, exposure) in &self.exposure {
            let p = pattern.to_lowercase();
            let exact = !p.contains(['*', '?', '[', '{']);
            let hit = if exact { p == lower } else { glob_matches(&p, &lower) };
            if !hit {
                continue;
            }
            let key = (exact, pattern.chars().count());
            let better = match &best {
                None => true,
                // Exact beats glob, then longer beats shorter; on a tie the first in order wins.
                Some((e, len, _, _)) => key > (*e, *len),
            };
            if better {
                best = Some((exact, key.1, pattern, *exposure));
            }
        }
        match best {
            Some((_, _, _, e)) => e,
            None if is_mcp(name) => self.mcp_exposure,
            None => Exposure::Direct,
        }
    }
}

/// Whether `name` is an MCP tool (`server__tool`).
pub fn is_mcp(name: &str) -> bool {
    name.split_once("__").is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
}

fn glob_matches(pattern: &str, name: &str) -> bool {
    match globset::GlobBuilder::new(pattern).case_insensitive(true).literal_separator(false).build() {
        Ok(g) => g.compile_matcher().is_match(name),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k6_exact_beats_glob_and_longer_beats_shorter_ignoring_case() {
        let cfg = CodeModeConfig::default()
            .mcp_exposure(Exposure::Codemode)
            .expose("github__*", Exposure::Deferred)
            .expose("github__create_*", Exposure::Codemode)
            .expose("GitHub__Create_Issue", Exposure::Direct)
            .expose("*", Exposure::ModelOnly)
            .expose("subagent", Exposure::ModelOnly);
        assert_eq!(cfg.exposure_of("github__create_issue"), Exposure::Direct);
        assert_eq!(cfg.exposure_of("github__create_pr"), Exposure::Codemode);
        assert_eq!(cfg.exposure_of("GITHUB__list_issues"), Exposure::Deferred);
        assert_eq!(cfg.exposure_of("subagent"), Exposure::ModelOnly);
        assert_eq!(cfg.exposure_of("read_file"), Exposure::ModelOnly);
        let plain = CodeModeConfig::default().mcp_exposure(Exposure::Codemode);
        assert_eq!(plain.exposure_of("linear__list"), Exposure::Codemode);
        assert_eq!(plain.exposure_of("read_file"), Exposure::Direct);
    }

    #[test]
    fn k12_config_section_uses_kebab_case_and_defaults() {
        let cfg: CodeModeConfig = serde_json::from_value(serde_json::json!({
            "enabled": false, "timeout": 1.5, "max-tool-calls": 3, "max-concurrency": 2,
            "max-output-bytes": 10, "memory-limit-mb": -1, "catalog-budget": 500,
            "mcp-exposure": "deferred", "exposure": {"x": "model-only"}
        }))
        .unwrap();
        assert!(!cfg.enabled);
        assert_eq!(cfg.timeout_duration(), Duration::from_millis(1500));
        assert_eq!(cfg.memory_limit_bytes(), None);
        assert_eq!(cfg.exposure_of("x"), Exposure::ModelOnly);
        let d = CodeModeConfig::default();
        assert!(d.enabled);
        assert_eq!((d.max_tool_calls, d.max_concurrency, d.max_output_bytes), (50, 8, 100_000));
        assert_eq!((d.memory_limit_mb, d.catalog_budget), (256, 12_000));
        assert_eq!(d.timeout_duration(), Duration::from_secs(30));
        let bad = serde_json::from_value::<CodeModeConfig>(serde_json::json!({"max_tool_calls": 3}));
        assert!(bad.is_err(), "snake_case keys are refused so typos are noticed");
    }
}
