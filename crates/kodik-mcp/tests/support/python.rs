//! The Python that has the official MCP SDK, for tests that start SDK servers: the venv `cargo
//! xtask ci` creates and names in `KODIK_MCP_PYTHON` (else `$CARGO_TARGET_DIR/mcp-venv/bin/python`).
//! Included by kodik-mcp's and kodik-tools' tests (`#[path]`).

use std::path::{Path, PathBuf};

/// The SDK's Python; a missing SDK fails the test, never skips it.
pub fn mcp_python() -> PathBuf {
    let python = match std::env::var_os("KODIK_MCP_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
            .join("mcp-venv/bin/python"),
    };
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the official Python MCP SDK is missing at {}: run `cargo xtask test-tools` (or point KODIK_MCP_PYTHON at a \
         python with `mcp` 2.x)",
        python.display()
    );
    python
}
