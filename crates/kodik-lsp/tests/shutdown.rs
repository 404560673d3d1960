//! Servers are stopped as the protocol says when the session ends, so they remove their
//! temporary files (a killed clangd, pyright or gopls leaves them in `/tmp`, one set per
//! session).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, configured};
use serde_json::json;

/// What `server` (started with `TMPDIR` set to a folder of its own) leaves in that folder
/// after a `read_lints` of `file` and the end of the session.
async fn left_in_tmp(name: &str, program: &str, files: &[(&str, &str)], file: &str) -> Option<Vec<String>> {
    let mut cfg = configured(name, program)?;
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // `env` execs the server: the process (and group) kodik starts is the server itself.
    let mut args = vec![format!("TMPDIR={}", tmp.path().display()), cfg.command.display().to_string()];
    args.append(&mut cfg.args);
    cfg.args = args;
    cfg.command = "/usr/bin/env".into();
    let h = Harness::new(dir.path(), cfg);
    for (path, text) in files {
        h.write(path, text);
    }
    let lints = h.call("read_lints", json!({"paths": [file]})).await.text_content();
    assert!(lints.contains("checked file"), "{name}: {lints}");
    let pid = h.servers.running().await.first().and_then(|s| s.pid()).expect("a running server");
    drop(h);
    assert!(common::wait_group_gone(pid, std::time::Duration::from_secs(5)).await, "{name} is still running");
    let mut left: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    Some(left)
}

/// The end of a session leaves no temporary files of clangd, pyright or gopls (before: kodik
/// killed the servers, and each session left a `preamble-*.pch` of up to 2.5 MB, a
/// `pyright-PID-*` and a `gopls-PID.1` folder in `/tmp`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_servers_are_asked_to_exit_and_leave_no_temporary_files() {
    let c = [("compile_flags.txt", "-Iinclude\n"), ("main.c", "#include <stdio.h>\nint main(void) { return 0; }\n")];
    let py = [("pyproject.toml", "[project]\nname = \"p\"\nversion = \"0\"\n"), ("a.py", "x: int = 1\n")];
    let go = [("go.mod", "module example.com/m\n\ngo 1.19\n"), ("main.go", "package main\n\nfunc main() {}\n")];
    for (name, program, files, file) in [
        ("clangd", "clangd", &c[..], "main.c"),
        ("pyright", "pyright-langserver", &py[..], "a.py"),
        ("gopls", "gopls", &go[..], "main.go"),
    ] {
        if let Some(left) = left_in_tmp(name, program, files, file).await {
            assert!(left.is_empty(), "{name} left {left:?}");
        }
    }
}
