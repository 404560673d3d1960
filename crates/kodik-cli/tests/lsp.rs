//! `lsp`, `read_lints` and E9 through the `kodik` binary (`call`, `batch`, `serve` over stdio)
//! against a real pyright found on PATH; the language servers never outlive kodik, also when it
//! is killed with SIGKILL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const UTIL: &str = "def helper(value: int) -> int:\n    return value * 2\n";
const MAIN: &str = "from util import helper\n\n\ndef run(x: int) -> int:\n    return helper(x) + 1\n";

/// The folder holding `pyright-langserver` and `typescript-language-server`: `KODIK_LSP_BIN`
/// (what `cargo xtask ci` installs), else PATH. Missing fails in CI and skips with a printed
/// reason elsewhere.
fn pyright_dir() -> Option<PathBuf> {
    let from_env = std::env::var_os("KODIK_LSP_BIN").map(PathBuf::from);
    let from_path = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    let found = from_env
        .into_iter()
        .chain(from_path)
        .find(|d| d.join("pyright-langserver").is_file() && d.join("typescript-language-server").is_file());
    if found.is_none() {
        let msg = "pyright-langserver and typescript-language-server are not installed: run `cargo xtask ci` \
                   or set KODIK_LSP_BIN";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// `kodik` with `bin` first on PATH, so its default configuration finds pyright there.
fn kodik(bin: &Path) -> Command {
    let mut path = vec![bin.to_path_buf()];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kodik"));
    cmd.env("PATH", std::env::join_paths(path).unwrap());
    cmd
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pyproject.toml"), "[project]\nname = \"p\"\nversion = \"0\"\n").unwrap();
    std::fs::write(dir.path().join("util.py"), UTIL).unwrap();
    std::fs::write(dir.path().join("main.py"), MAIN).unwrap();
    let root = dir.path().canonicalize().unwrap();
    (dir, root)
}

/// `(ppid, start time)` of process `pid` from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let fields: Vec<&str> = s[s.rfind(')')? + 2..].split(' ').collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// Every process below `root_pid`, as `(pid, start time)` (the language servers kodik started
/// and their children).
fn descendants(root_pid: u32) -> Vec<(u32, u64)> {
    let all: Vec<(u32, u32, u64)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|pid| stat(pid).map(|(ppid, start)| (pid, ppid, start)))
        .collect();
    let mut found = vec![root_pid];
    let mut out = Vec::new();
    while let Some(parent) = found.pop() {
        for &(pid, ppid, start) in &all {
            if ppid == parent {
                found.push(pid);
                out.push((pid, start));
            }
        }
    }
    out
}

/// Waits until none of `procs` is alive (same pid and start time), at most `limit`; returns
/// those still alive.
fn wait_gone(procs: &[(u32, u64)], limit: Duration) -> Vec<u32> {
    let end = Instant::now() + limit;
    loop {
        let left: Vec<u32> =
            procs.iter().filter(|(pid, start)| stat(*pid).is_some_and(|(_, s)| s == *start)).map(|p| p.0).collect();
        if left.is_empty() || Instant::now() > end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn text(v: &Value) -> &str {
    v["content"][0]["text"].as_str().unwrap_or_default()
}

/// L2 through `kodik call`; L1, L2 and E9 in one `kodik batch` session (the edit's result
/// carries the error it introduced, read_lints finds it, the fix's result has none); no
/// language server is left running after either exits.
#[test]
fn l1_l2_e9_lsp_and_read_lints_through_kodik_call_and_batch() {
    let Some(bin) = pyright_dir() else { return };
    let (_dir, root) = project();
    let ws = root.to_str().unwrap();

    let args = json!({"operation": "definition", "path": "main.py", "line": 5, "symbol": "helper"}).to_string();
    let out = kodik(&bin).args(["call", "--workspace", ws, "lsp", &args]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert!(text(&v).contains("util.py:1:5:") && text(&v).contains("def helper"), "{v}");

    let lines = [
        json!({"id": "r", "name": "read_file", "args": {"path": "main.py"}}),
        json!({"id": "e1", "name": "edit_file", "args": {"path": "main.py",
            "edits": [{"old_string": "helper(x) + 1", "new_string": "helper(\"x\") + 1"}]}}),
        json!({"id": "l1", "name": "read_lints", "args": {"paths": ["main.py"]}}),
        json!({"id": "e2", "name": "edit_file", "args": {"path": "main.py",
            "edits": [{"old_string": "helper(\"x\") + 1", "new_string": "helper(x) + 2"}]}}),
        json!({"id": "x", "name": "lsp", "args": {"operation": "references", "path": "util.py", "line": 1, "symbol": "helper"}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut child = kodik(&bin)
        .args(["batch", "--workspace", ws])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let results: Vec<Value> = (0..lines.len())
        .map(|_| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a result line ({e}): {line}"))
        })
        .collect();
    let started = descendants(child.id());
    assert!(!started.is_empty(), "no language server runs below `kodik batch`");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    // A clean exit kills the servers' process groups.
    assert_eq!(wait_gone(&started, Duration::from_secs(10)), Vec::<u32>::new(), "outlived `kodik batch`");
    assert_eq!(results.len(), 5, "{results:#?}");
    assert!(results.iter().all(|r| r["status"] == "success"), "{results:#?}");
    let edited = text(&results[1]);
    assert!(edited.contains("Errors in the written file (1)") && edited.contains("5:19"), "{edited}");
    let lints = text(&results[2]);
    assert!(lints.contains("main.py:5:19: error") && lints.contains("\"Literal['x']\""), "{lints}");
    let fixed = text(&results[3]);
    assert!(!fixed.contains("Errors in"), "stale errors after the fix: {fixed}");
    let refs = text(&results[4]);
    assert!(refs.contains("3 locations") && refs.contains("main.py:5:12:") && refs.contains("util.py:1:5:"), "{refs}");
}

fn send(stdin: &mut impl std::io::Write, msg: &Value) {
    writeln!(stdin, "{msg}").unwrap();
    stdin.flush().unwrap();
}

/// The next JSON-RPC message on `out` with `id`, skipping notifications (logging, progress).
fn answer(out: &mut impl std::io::BufRead, id: i64) -> Value {
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "`kodik serve` closed stdout before answering {id}");
        let msg: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
        if msg["id"] == id {
            return msg;
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// L1/L2 through `kodik serve` over stdio (a raw MCP client) with pyright and
/// typescript-language-server (which runs tsserver children); then the host is killed with
/// SIGKILL (no destructor runs) and every process below it still goes away.
#[test]
fn l1_l2_lsp_through_kodik_serve_and_servers_die_with_a_sigkilled_host() {
    let Some(bin) = pyright_dir() else { return };
    let (_dir, root) = project();
    let mut serve = Killed(
        kodik(&bin)
            .args(["serve", "--workspace", root.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = serve.0.stdin.take().unwrap();
    let mut out = BufReader::new(serve.0.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    send(&mut stdin, &init);
    assert_eq!(answer(&mut out, 1)["result"]["serverInfo"]["name"], "kodik");
    send(&mut stdin, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let call = |id: i64, name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    send(
        &mut stdin,
        &call(2, "lsp", json!({"operation": "definition", "path": "main.py", "line": 5, "symbol": "helper"})),
    );
    let def = answer(&mut out, 2);
    let def_text = def["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(def["result"]["isError"] != true && def_text.contains("util.py:1:5:"), "{def}");
    std::fs::write(root.join("bad.py"), "n: int = \"s\"\n").unwrap();
    send(&mut stdin, &call(3, "read_lints", json!({"paths": ["bad.py"]})));
    let lints = answer(&mut out, 3);
    let lints_text = lints["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(lints_text.contains("bad.py:1:10: error"), "{lints}");

    // typescript-language-server starts tsserver processes of its own: grandchildren of kodik.
    std::fs::write(root.join("shapes.ts"), "export function area(r: number): number {\n  return r * r;\n}\n").unwrap();
    send(&mut stdin, &call(4, "lsp", json!({"operation": "document_symbols", "path": "shapes.ts"})));
    let symbols = answer(&mut out, 4);
    assert!(
        symbols["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("function area"),
        "{symbols}"
    );

    let running = descendants(serve.0.id());
    assert!(!running.is_empty(), "no language server runs below `kodik serve`");
    // SIGKILL: kodik's destructors do not run; only what the kernel does on its death can help.
    serve.0.kill().unwrap();
    serve.0.wait().unwrap();
    let left = wait_gone(&running, Duration::from_secs(15));
    assert!(left.is_empty(), "language server processes {left:?} outlived the SIGKILLed host");
}
