//! The `mcpServers` configuration users already write for Claude Desktop, Cursor and Claude
//! Code: `{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"}}}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why an MCP configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read the MCP configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The text is not the `{"mcpServers": {…}}` shape.
    #[error("the MCP configuration {origin} is not valid: {message}")]
    Invalid {
        /// Where the text came from (a path or `builder`).
        origin: String,
        /// What is wrong, with serde's line and column.
        message: String,
    },
    /// A server entry names neither or both of `command` and `url`.
    #[error("MCP server `{server}` in {origin}: {message}")]
    Server {
        /// Where the entry came from.
        origin: String,
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },
}

/// One server: a command to start (stdio) or a URL (streamable HTTP).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerConfig {
    /// The program to start; its stdin/stdout speak MCP.
    #[serde(default)]
    pub command: Option<String>,
    /// The program's arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables added to the program's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The program's working folder; a relative one is taken from the workspace root.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The streamable-HTTP endpoint (`http://host:port/mcp`).
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request (e.g. `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `"stdio"`, `"http"` or `"streamable-http"` as some clients write it; only checked.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// A server the user switched off without deleting it.
    #[serde(default)]
    pub disabled: bool,
    /// The longest wait for one of this server's tool calls, in milliseconds (Gemini CLI's
    /// `timeout`; a fraction is rounded), at least 1000; else
    /// [`ClientOptions::call_timeout`](crate::ClientOptions::call_timeout).
    #[serde(default, deserialize_with = "millis")]
    pub timeout: Option<u64>,
}

impl ServerConfig {
    /// A server started as `command args…`.
    pub fn stdio(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { command: Some(command.into()), args: args.into_iter().map(Into::into).collect(), ..Self::default() }
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        Self { url: Some(url.into()), ..Self::default() }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Replaces `${VAR}` and `${VAR:-default}` in the command, arguments, environment, folder,
    /// URL and headers with the variable's value, as Claude Code's `.mcp.json` does, so one file
    /// serves every machine without a key written into it. A variable that is not set and has
    /// no default is an error naming it: started with the placeholder, the server would fail
    /// in a way that does not say why.
    fn expand(&mut self, origin: &str, server: &str) -> Result<(), ConfigError> {
        let expand = |text: &mut String| -> Result<(), ConfigError> {
            *text = expand_vars(text, |name| std::env::var(name).ok()).map_err(|name| ConfigError::Server {
                origin: origin.to_owned(),
                server: server.to_owned(),
                message: format!(
                    "`${{{name}}}` is not set: set {name} in the environment, or give a default as `${{{name}:-value}}`"
                ),
            })?;
            Ok(())
        };
        for text in self.command.iter_mut().chain(&mut self.args).chain(self.env.values_mut()) {
            expand(text)?;
        }
        for text in self.url.iter_mut().chain(self.headers.values_mut()) {
            expand(text)?;
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            expand(&mut text)?;
            *cwd = PathBuf::from(text);
        }
        Ok(())
    }

    fn check(&self, origin: &str, server: &str) -> Result<(), ConfigError> {
        let fail =
            |message: String| ConfigError::Server { origin: origin.to_owned(), server: server.to_owned(), message };
        match (&self.command, &self.url) {
            (Some(c), None) if c.trim().is_empty() => Err(fail("`command` is empty".into())),
            (Some(_), None) => Ok(()),
            (None, Some(u)) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                Err(fail(format!("`url` must start with http:// or https://, got `{u}`")))
            }
            (None, Some(_)) => Ok(()),
            (Some(_), Some(_)) => Err(fail("give either `command` (stdio) or `url` (HTTP), not both".into())),
            (None, None) => Err(fail("needs `command` (a stdio server) or `url` (a streamable-HTTP server)".into())),
        }
        .and_then(|()| match self.timeout {
            Some(0) => Err(fail("`timeout` is in milliseconds and at least 1000".into())),
            // Cline writes its `timeout` in seconds: a copied 60 would be 60 ms, and every call
            // would time out while the server carries it out.
            Some(t) if t < 1000 => Err(fail(format!(
                "`timeout` is in milliseconds (as Gemini CLI writes it) and at least 1000: {t} would be {t} ms; \
                 write {} for {t} seconds",
                t.saturating_mul(1000)
            ))),
            _ => Ok(()),
        })
        .and_then(|()| match self.kind.as_deref() {
            None | Some("stdio" | "http" | "streamable-http" | "streamableHttp") => Ok(()),
            Some("sse") => {
                Err(fail("the old SSE transport is not supported; use the server's streamable-HTTP URL".into()))
            }
            Some(other) => Err(fail(format!("unknown `type` `{other}`; use stdio or http"))),
        })
    }
}

/// `text` with each `${NAME}` replaced by `lookup(NAME)` and each `${NAME:-default}` by the
/// value or, when it is unset or empty, the default; the name of a variable that has neither.
/// Anything else, a lone `$` included, is kept as written.
fn expand_vars(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else { break };
        let inner = &rest[start + 2..start + 2 + len];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push_str(&rest[..start + 2]);
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        match (lookup(name).filter(|v| !v.is_empty() || default.is_none()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(name.to_owned()),
        }
        rest = &rest[start + 2 + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    mcp_servers: BTreeMap<String, ServerConfig>,
}

/// A set of named MCP servers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    /// The servers by name; the name prefixes their tools (`name__tool`).
    pub servers: BTreeMap<String, ServerConfig>,
}

impl McpConfig {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a server.
    pub fn server(mut self, name: impl Into<String>, config: ServerConfig) -> Self {
        self.servers.insert(name.into(), config);
        self
    }

    /// Parses `{"mcpServers": {…}}`; `origin` names the source in errors. Disabled servers
    /// are dropped.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let file: File = serde_json::from_str(text)
            .map_err(|e| ConfigError::Invalid { origin: origin.to_owned(), message: e.to_string() })?;
        let mut servers = BTreeMap::new();
        for (name, config) in file.mcp_servers {
            if config.disabled {
                continue;
            }
            if name.trim().is_empty() {
                return Err(ConfigError::Invalid {
                    origin: origin.to_owned(),
                    message: "a server has an empty name".into(),
                });
            }
            let mut config = config;
            config.expand(origin, &name)?;
            config.check(origin, &name)?;
            servers.insert(name, config);
        }
        Ok(Self { servers })
    }

    /// Reads one file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The user-level file (`$KODIK_CONFIG_DIR/mcp.json`, else `$XDG_CONFIG_HOME/kodik/mcp.json`,
    /// else `~/.config/kodik/mcp.json`) and then the workspace's `.kodik/mcp.json`; a server
    /// named in both takes the workspace's entry. Missing files are no error.
    pub fn load_default(workspace: &Path) -> Result<Self, ConfigError> {
        let mut config = Self::new();
        let user = std::env::var_os("KODIK_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CONFIG_HOME").map(|d| PathBuf::from(d).join("kodik")))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("kodik")));
        for path in user.map(|d| d.join("mcp.json")).into_iter().chain([workspace.join(".kodik").join("mcp.json")]) {
            if path.is_file() {
                config.merge(Self::load(&path)?);
            }
        }
        Ok(config)
    }

    /// Adds `other`'s servers; a name in both takes `other`'s entry.
    pub fn merge(&mut self, other: McpConfig) {
        self.servers.extend(other.servers);
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// A number of milliseconds: whole or with a fraction (rounded), never negative.
fn millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        None => Ok(None),
        // `as` saturates: a number past u64 is the longest wait there is.
        Some(ms) if ms.is_finite() && ms >= 0.0 => Ok(Some(ms.round() as u64)),
        Some(ms) => Err(serde::de::Error::custom(format!("`timeout` must be a number of milliseconds, got {ms}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a8_placeholders_take_the_environment_or_their_default() {
        let env = |name: &str| match name {
            "TOKEN" => Some("s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand_vars("Bearer ${TOKEN}", env), Ok("Bearer s3cret".into()));
        assert_eq!(expand_vars("${PORT:-8080}/${TOKEN:-x}", env), Ok("8080/s3cret".into()));
        assert_eq!(expand_vars("${EMPTY:-fallback}|${EMPTY}|", env), Ok("fallback||".into()));
        assert_eq!(expand_vars("$HOME ${not a name} ${unclosed", env), Ok("$HOME ${not a name} ${unclosed".into()));
        assert_eq!(expand_vars("a ${MISSING} b", env), Err("MISSING".into()));
    }

    #[test]
    fn a8_an_unset_placeholder_is_an_error_naming_the_variable() {
        let text = r#"{"mcpServers": {"s": {"command": "srv", "args": ["--key", "${KODIK_TEST_SURELY_UNSET_VAR}"]}}}"#;
        let err = McpConfig::parse(text, "mcp.json").unwrap_err().to_string();
        assert!(err.contains("`${KODIK_TEST_SURELY_UNSET_VAR}` is not set") && err.contains("`s`"), "{err}");
        let text = r#"{"mcpServers": {"s": {"command": "srv", "env": {"A": "${KODIK_TEST_SURELY_UNSET_VAR:-dflt}"}}}}"#;
        assert_eq!(McpConfig::parse(text, "mcp.json").unwrap().servers["s"].env["A"], "dflt");
    }

    #[test]
    fn a8_reads_the_claude_desktop_shape() {
        let text = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"A": "1"}, "cwd": "tools"},
            "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
            "off": {"command": "nope", "disabled": true}
        }}"#;
        let c = McpConfig::parse(text, "test").unwrap();
        assert_eq!(c.servers.len(), 2);
        assert_eq!(c.servers["fs"].args, ["-y", "server-fs", "/tmp"]);
        assert_eq!(c.servers["fs"].env["A"], "1");
        assert_eq!(c.servers["web"].headers["Authorization"], "Bearer x");
    }

    #[test]
    fn a8_bad_entries_are_named() {
        let both = McpConfig::parse(r#"{"mcpServers": {"x": {"command": "a", "url": "http://h/"}}}"#, "f.json");
        assert!(both.unwrap_err().to_string().contains("MCP server `x` in f.json: give either"));
        let none = McpConfig::parse(r#"{"mcpServers": {"y": {"args": []}}}"#, "f.json");
        assert!(none.unwrap_err().to_string().contains("`y`"));
        let sse = McpConfig::parse(r#"{"mcpServers": {"z": {"type": "sse", "url": "http://h/"}}}"#, "f.json");
        assert!(sse.unwrap_err().to_string().contains("SSE"));
        let json = McpConfig::parse("{\"mcpServers\": [", "f.json").unwrap_err().to_string();
        assert!(json.contains("f.json is not valid") && json.contains("line 1"), "{json}");
    }

    #[test]
    fn a8_workspace_file_overrides_the_user_file() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("mcp.json"),
            r#"{"mcpServers": {"a": {"command": "user"}, "b": {"command": "b"}}}"#,
        )
        .unwrap();
        std::fs::create_dir(ws.path().join(".kodik")).unwrap();
        std::fs::write(ws.path().join(".kodik/mcp.json"), r#"{"mcpServers": {"a": {"command": "ws"}}}"#).unwrap();
        let mut c = McpConfig::load(&home.path().join("mcp.json")).unwrap();
        c.merge(McpConfig::load(&ws.path().join(".kodik/mcp.json")).unwrap());
        assert_eq!(c.servers["a"].command.as_deref(), Some("ws"));
        assert_eq!(c.servers["b"].command.as_deref(), Some("b"));
        let missing = McpConfig::load(&ws.path().join("none.json")).unwrap_err();
        assert!(missing.to_string().contains("none.json"), "{missing}");
    }
}
