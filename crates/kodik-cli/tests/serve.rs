//! `kodik serve` seen by a raw stdio MCP client: what its tool descriptions tell the client's
//! model is what the server does (code mode's catalog, send_message to a closed conversation).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const KODIK: &str = env!("CARGO_BIN_EXE_kodik");

/// Runs `kodik serve --workspace WS ARGS…`, initializes, sends each of `requests` (method,
/// params) in turn and returns the result of each; fails if an answer takes over a minute.
fn serve_session(ws: &std::path::Path, args: &[&str], requests: &[(&str, Value)]) -> Vec<Value> {
    let mut child = Command::new(KODIK)
        .arg("serve")
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            if tx.send(msg).is_err() {
                break;
            }
        }
    });
    let answer = |id: u64| loop {
        let msg = rx.recv_timeout(Duration::from_secs(60)).expect("kodik serve did not answer within a minute");
        if msg["id"] == id {
            break msg;
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    answer(0);
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    let mut results = Vec::new();
    for (i, (method, params)) in requests.iter().enumerate() {
        let id = i as u64 + 1;
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        let reply = answer(id);
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        results.push(reply["result"].clone());
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    results
}

/// The tool names of the "Tools scripts can call" catalog in a codemode description.
fn catalog_names(description: &str) -> Vec<String> {
    let catalog = description.split_once("Tools scripts can call:\n").expect(description).1;
    let mut names: Vec<String> =
        catalog.lines().filter_map(|l| l.strip_prefix("- tools.")?.split('(').next().map(str::to_owned)).collect();
    names.sort();
    names
}

/// G11, K7: in the modes that offer code mode, the catalog `kodik serve` lists in `codemode`'s
/// description names exactly the tools a script can call (`ALL_TOOLS`): none the mode does not
/// offer (generate_plan, check_understanding, create_lesson) and not web_search without a
/// search provider. Before, the catalog was the full registry's while scripts were narrowed to the
/// mode: a script told it could call `tools.generate_plan` got UnknownTool.
#[test]
fn g11_k7_the_served_codemode_catalog_lists_exactly_what_scripts_can_call() {
    let ws = tempfile::tempdir().unwrap();
    let all_tools = json!({"name": "codemode", "arguments": {"code": "return ALL_TOOLS.map(t => t.name).join(',')"}});
    for args in [&["--mode", "code"][..], &["--mode", "code", "--defer"], &["--mode", "debug"]] {
        let results = serve_session(ws.path(), args, &[("tools/list", json!({})), ("tools/call", all_tools.clone())]);
        let tools = results[0]["tools"].as_array().unwrap();
        let codemode =
            tools.iter().find(|t| t["name"] == "codemode").unwrap_or_else(|| panic!("{args:?}: no codemode"));
        let listed = catalog_names(codemode["description"].as_str().unwrap());
        let output = results[1]["content"][0]["text"].as_str().unwrap();
        let callable_line = output.lines().last().unwrap();
        let mut callable: Vec<String> = callable_line.split(',').map(str::to_owned).collect();
        callable.sort();
        assert_eq!(listed, callable, "{args:?}: catalog vs ALL_TOOLS\n{output}");
        assert!(listed.iter().any(|n| n == "edit_file"), "{args:?}: {listed:?}");
        for absent in ["generate_plan", "check_understanding", "create_lesson", "web_search"] {
            assert!(!listed.iter().any(|n| n == absent), "{args:?}: {absent} listed: {listed:?}");
        }
    }
}

/// G11, K9: a script that calls a tool the served mode does not offer is told that, in the
/// script worker `kodik serve` runs scripts in too; before, "no tool `generate_plan` can be
/// called from a script … Use searchTools", and web_search got "did you mean: web_fetch?".
#[test]
fn g11_k9_a_script_calling_a_tool_the_mode_withholds_is_told_it_is_not_available() {
    let ws = tempfile::tempdir().unwrap();
    let script = |code: &str| json!({"name": "codemode", "arguments": {"code": code}});
    let plan = "return await tools.generate_plan({title: 'T', summary: 'S', steps: [{title: 'a', details: 'b'}]})";
    let search = "return await tools.web_search({query: 'x'})";
    let requests = [("tools/call", script(plan)), ("tools/call", script(search))];
    let results = serve_session(ws.path(), &["--mode", "code"], &requests);
    for (result, name) in results.iter().zip(["generate_plan", "web_search"]) {
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("`{name}` is not available to this request")), "{text}");
        assert!(!text.contains("did you mean"), "{text}");
    }
    assert!(!ws.path().join(".kodik/plans").exists(), "no plan written");
}

/// A5: `kodik serve` has no model, so `send_message` to a closed conversation is refused with
/// how to resume it, and the description it lists says so instead of promising that "a closed
/// one starts working on it at once".
#[test]
fn a5_served_send_message_does_not_promise_to_resume_a_closed_conversation() {
    let ws = tempfile::tempdir().unwrap();
    let results = serve_session(ws.path(), &[], &[("tools/list", json!({}))]);
    let tools = results[0]["tools"].as_array().unwrap();
    let send = tools.iter().find(|t| t["name"] == "send_message").expect("send_message listed");
    let texts = [
        send["description"].as_str().unwrap(),
        send["inputSchema"]["properties"]["agent_id"]["description"].as_str().unwrap(),
    ];
    for text in texts {
        assert!(!text.contains("starts working"), "{text}");
        assert!(text.contains("a closed one is not resumed from this server"), "{text}");
    }
}
