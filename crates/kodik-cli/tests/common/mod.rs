//! What the CLI's integration tests share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `kodik` (`cmd`, with its environment) as `batch --workspace WS` with `input` on stdin;
/// asserts a clean exit and returns one parsed result per output line.
pub fn run_batch(mut cmd: Command, ws: &str, input: &str) -> Vec<Value> {
    let mut child = cmd
        .args(["batch", "--workspace", ws])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kodik batch failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}
