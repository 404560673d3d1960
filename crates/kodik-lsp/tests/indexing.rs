//! L6 readiness with a real child process: a server that indexes (an open `$/progress` token)
//! and answers `[]` until it is done. A query waits for the work to end and gets the answer;
//! when the work outlasts the wait, the answer says "still indexing", never "no results".

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::Harness;
use kodik_lsp::{LspConfig, ServerConfig};
use serde_json::json;

fn python() -> Option<std::path::PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("python3")).find(|p| p.is_file());
    if found.is_none() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "python3 is needed for the indexing server");
        eprintln!("SKIPPED: python3 not found");
    }
    found
}

fn harness(index_seconds: &str, wait: Duration) -> Option<(tempfile::TempDir, Harness)> {
    let py = python()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/indexing_server.py");
    let server = ServerConfig::new("indexer", py, &[script, index_seconds], &[("idx", "idx")]);
    let dir = tempfile::tempdir().unwrap();
    let mut h = Harness::new(dir.path(), server);
    let config = LspConfig { indexing_wait: wait, ..h.servers.config().clone() };
    h = Harness::with_config(&h.root, config);
    h.write("a.idx", "def name\n");
    Some((dir, h))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_query_during_indexing_waits_for_it_instead_of_answering_nothing() {
    let Some((_dir, h)) = harness("0.8", Duration::from_secs(10)) else { return };
    let out = h.lsp(json!({"operation": "definition", "path": "a.idx", "line": 1, "symbol": "name"})).await;
    assert!(out.contains("a.idx:1:5: def name"), "{out}");
    assert!(!out.contains("indexing"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_indexing_longer_than_the_wait_is_reported_not_nothing_found() {
    let Some((_dir, h)) = harness("30", Duration::from_millis(300)) else { return };
    let out = h.lsp(json!({"operation": "definition", "path": "a.idx", "line": 1, "symbol": "name"})).await;
    assert!(out.contains("still indexing; results may be incomplete"), "{out}");
    assert!(!out.contains("No results"), "{out}");
}

/// L2, L6: a server that reports its scan of the project by log lines, as pyright does, is
/// ready only at the line that ends the scan: pyright's own configuration waits past
/// "Searching for source files" for "Found 1 source file" (before, "source file" matched the
/// first line, and a query under load was answered from a file list without the new file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l6_a_server_that_logs_its_scan_is_ready_when_the_scan_ends_not_when_it_starts() {
    let Some(py) = python() else { return };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/indexing_server.py");
    let pyright = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == "pyright").unwrap();
    let server = ServerConfig {
        ready_log: pyright.ready_log,
        ..ServerConfig::new("indexer", py, &[script, "0.8", "logs"], &[("idx", "idx")])
    };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), server);
    h.write("a.idx", "def name\n");
    let out = h.lsp(json!({"operation": "definition", "path": "a.idx", "line": 1, "symbol": "name"})).await;
    assert!(out.contains("a.idx:1:5: def name"), "{out}");
    assert!(!out.contains("indexing"), "{out}");
}

/// A server program that is installed but exits at once (rustup's `rust-analyzer` proxy without
/// the component does this): one clear error, then the file type counts as unserved, so edits
/// do not wait for it or spawn it again (E9: no provider, no waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_e9_a_server_that_cannot_start_is_reported_once_then_passed_over() {
    let Some(sh) =
        std::env::split_paths(&std::env::var_os("PATH").unwrap()).map(|d| d.join("sh")).find(|p| p.is_file())
    else {
        panic!("sh is needed")
    };
    let server = ServerConfig::new("broken", sh, &["-c", "echo no such component >&2; exit 1"], &[("brk", "brk")]);
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), server);
    let file = h.write("a.brk", "x\n");
    assert!(h.servers.serves(&file));
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "a.brk"})).await;
    assert!(!out.is_success() && out.text_content().contains("did not start"), "{}", out.text_content());
    assert!(!h.servers.serves(&file), "a server that failed to start is still offered");
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "a.brk"})).await;
    assert!(out.text_content().contains("no language server for .brk files"), "{}", out.text_content());
    assert!(out.text_content().contains("failed to start"), "{}", out.text_content());
}

/// L6: a server that fails to start is quoted by its error line, not by the end of the
/// backtrace printed after it (`RUST_BACKTRACE=1`, as rustup's proxy does); and the later
/// message says it could not be used, not that none is installed (before: "it said: 13:
/// __libc_start_call_main | …" and "none installed: tried … (failed to start)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_failed_start_quotes_the_error_line_not_the_backtrace_after_it() {
    let Some(sh) =
        std::env::split_paths(&std::env::var_os("PATH").unwrap()).map(|d| d.join("sh")).find(|p| p.is_file())
    else {
        panic!("sh is needed")
    };
    let script = "echo \"error: Unknown binary 'rust-analyzer' in official toolchain 'stable'.\" >&2; \
                  echo 'Stack backtrace:' >&2; \
                  i=0; while [ $i -lt 200 ]; do echo \"  $i: std::rt::lang_start_internal at /rustc/src/rt.rs:$i:5\" >&2; i=$((i+1)); done; \
                  exit 1";
    let server = ServerConfig::new("broken", sh, &["-c", script], &[("brk", "brk")]);
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), server);
    h.write("a.brk", "x\n");
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "a.brk"})).await;
    let text = out.text_content();
    assert!(text.contains("it said: error: Unknown binary 'rust-analyzer' in official toolchain 'stable'"), "{text}");
    assert!(!text.contains("'stable'.."), "{text}");
    assert!(!text.contains("lang_start") && !text.contains("Stack backtrace"), "{text}");
    let text = h.call("lsp", json!({"operation": "document_symbols", "path": "a.brk"})).await.text_content();
    assert!(text.contains("(none could be used: tried") && !text.contains("none installed"), "{text}");
}
