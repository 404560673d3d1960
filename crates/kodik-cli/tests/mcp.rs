//! `kodik serve` against the official Python MCP SDK (`mcp` on PyPI) as a real client process.
//!
//! The SDK lives in a venv that `cargo xtask ci` creates (`ensure_python_mcp`) and names in
//! `KODIK_MCP_PYTHON`; without that variable the test looks for
//! `$CARGO_TARGET_DIR/mcp-venv/bin/python` (or `<workspace>/target/mcp-venv/bin/python`).
//! A missing SDK fails the test with the command that installs it; it is never skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KODIK: &str = env!("CARGO_BIN_EXE_kodik");

/// A valid 1×1 RGBA PNG (one red pixel).
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0D, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0, 0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D,
    0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

/// The client: lists the tools, then (in code mode) reads a text and an image, edits, creates, runs a command that
/// goes to the background and polls it, waits for another one's terminal event, makes two bad
/// calls, and prints one JSON summary line.
const CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

kodik, workspace, mode, what = sys.argv[1:5]
extra = sys.argv[5:]

def summary(result):
    return {
        "is_error": result.is_error,
        "text": "\n".join(c.text for c in result.content if c.type == "text"),
        "structured": result.structured_content,
        "images": [{"mime_type": c.mime_type, "data": c.data} for c in result.content if c.type == "image"],
    }

async def main():
    logs = []
    got_log = asyncio.Event()

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})
        got_log.set()

    server = StdioServerParameters(command=kodik, args=["serve", "--workspace", workspace, "--mode", mode, *extra])
    out = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            out["tools"] = names = [t.name for t in (await session.list_tools()).tools]
            if what == "list":
                print(json.dumps(out))
                return
            if what == "aggregate":
                out["echo"] = summary(await session.call_tool("py__echo", {"text": "<b>&amp;</b>\n"}))
                print(json.dumps(out))
                return

            async def run(name, args):
                # Deferred tools (G12) are reached through call_tool.
                if name in names:
                    return summary(await session.call_tool(name, args))
                return summary(await session.call_tool("call_tool", {"name": name, "arguments": args}))

            out["read"] = await run("read_file", {"path": "notes.txt"})
            out["image"] = await run("read_file", {"path": "dot.png"})
            out["edit"] = await run("edit_file", {
                "path": "notes.txt",
                "edits": [{"old_string": "hello", "new_string": "goodbye"}],
            })
            out["create"] = await run("create_file", {"path": "new.txt", "content": "created\n"})
            out["codemode"] = await run("codemode", {"code": "return await tools.read_file({path: 'new.txt'})"})
            # Two overlapping requests: both commands outlive the 5 s wait and go to the background.
            polled, evented = await asyncio.gather(
                run("shell", {"command": "sleep 6; echo done"}),
                run("shell", {"command": "sleep 6; echo event-done"}),
            )
            out["shell"] = polled
            out["shell_evented"] = evented
            terminal = polled["structured"]["meta"]["terminal_id"]
            polls = []
            for _ in range(120):
                r = await run("get_terminal_output", {"terminal_id": terminal})
                polls.append(r)
                if not r["structured"]["meta"].get("running", True):
                    break
                await asyncio.sleep(0.25)
            out["polls"] = polls
            want = evented["structured"]["meta"]["terminal_id"]
            for _ in range(120):
                if any(l["data"].get("event") == "terminal" and l["data"].get("terminal_id") == want for l in logs):
                    break
                got_log.clear()
                try:
                    await asyncio.wait_for(got_log.wait(), 0.25)
                except asyncio.TimeoutError:
                    pass
            out["logs"] = logs
            out["unknown"] = summary(await session.call_tool("read_fil", {"path": "notes.txt"}))
            out["invalid"] = await run("shell", {"cmd": "echo hi"})
    print(json.dumps(out))

asyncio.run(main())
"#;

/// The venv python with the official SDK, or a failure that says how to install it.
fn mcp_python() -> PathBuf {
    let python = match std::env::var_os("KODIK_MCP_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            target.join("mcp-venv/bin/python")
        }
    };
    let ok = Command::new(&python)
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the official Python MCP SDK is missing: `{} -c \"import mcp\"` failed{}. Install it with \
         `cargo xtask test-tools` (`cargo xtask ci` runs it too), or by hand: \
         `python3 -m venv target/mcp-venv && target/mcp-venv/bin/pip install mcp` \
         (or point KODIK_MCP_PYTHON at a python that has `mcp`)",
        python.display(),
        if std::env::var_os("CI").is_some() { " in CI" } else { "" },
    );
    python
}

/// Runs the client script against `kodik serve EXTRA…` in `workspace`, killed after `limit`;
/// `what` is `list` (list the tools only) or `full` (the code-mode session).
fn run_client(workspace: &Path, mode: &str, what: &str, extra: &[&str], limit: Duration) -> Value {
    let mut args = vec![KODIK, workspace.to_str().unwrap(), mode, what];
    args.extend_from_slice(extra);
    run_python(CLIENT, &args, limit)
}

/// A client session against `kodik serve --workspace WORKSPACE SERVE_ARGS…`: `body` is Python
/// run inside `async with ClientSession(...) as session:` after `initialize`, with `text(result)`
/// (the result's text blocks) at hand; it fills the dict `out`, printed as the summary.
const SCENARIO: &str = r#"
import asyncio, json, os, sys, time
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

kodik, workspace = sys.argv[1:3]
extra = sys.argv[3:]

def text(result):
    return "\n".join(c.text for c in result.content if c.type == "text")

async def main():
    out = {}
    server = StdioServerParameters(command=kodik, args=["serve", "--workspace", workspace, *extra])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
BODY
    print(json.dumps(out))

asyncio.run(main())
"#;

/// Runs `body` in [`SCENARIO`] against `kodik serve` in `workspace`; the summary `out`.
fn run_scenario(workspace: &Path, serve_args: &[&str], body: &str, limit: Duration) -> Value {
    let indented: String = body.lines().map(|l| format!("            {l}\n")).collect();
    let script = SCENARIO.replace("BODY\n", &indented);
    let mut args = vec![KODIK, workspace.to_str().unwrap()];
    args.extend_from_slice(serve_args);
    run_python(&script, &args, limit)
}

/// Runs a Python `script` with the SDK's python and `args`, killed after `limit`; its last
/// stdout line parsed as JSON.
fn run_python(script: &str, args: &[&str], limit: Duration) -> Value {
    let python = mcp_python();
    let script_dir = tempfile::tempdir().unwrap();
    let path = script_dir.path().join("client.py");
    std::fs::write(&path, script).unwrap();
    let mut child = Command::new(python)
        .arg(&path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out_reader.join().unwrap();
    let err = err_reader.join().unwrap();
    let status = status.unwrap_or_else(|| panic!("the MCP client did not finish within {limit:?}\nstderr:\n{err}"));
    assert!(status.success(), "the MCP client failed ({status})\nstdout:\n{out}\nstderr:\n{err}");
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no JSON summary ({e})\nstdout:\n{out}\nstderr:\n{err}"))
}

/// One event of a Responses stream, as a replayed model sends it.
fn sse_event(v: &Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap())
}

/// The event that ends a Responses stream.
fn sse_completed() -> String {
    sse_event(&serde_json::json!({"type": "response.completed", "response": {"id": "r", "status": "completed",
        "usage": {"input_tokens": 10, "output_tokens": 5}}}))
}

/// A finished function call at `index` of a Responses stream.
fn sse_call(index: usize, call_id: &str, name: &str, args: &Value) -> String {
    sse_event(&serde_json::json!({"type": "response.output_item.done", "output_index": index,
        "item": {"type": "function_call", "id": format!("fc_{index}"), "call_id": call_id, "name": name,
            "arguments": args.to_string()}}))
}

/// Text the model streams.
fn sse_text(text: &str) -> String {
    sse_event(&serde_json::json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
        "delta": text}))
}

fn names(summary: &Value) -> Vec<&str> {
    summary["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect()
}

#[test]
fn g1_g8_g12_r5_s3_s4_mcp_round_trip_with_the_official_python_client() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello world\n").unwrap();
    std::fs::write(dir.path().join("dot.png"), PNG_1X1).unwrap();
    let s = run_client(dir.path(), "code", "full", &[], Duration::from_secs(90));

    assert_eq!(s["server"], "kodik");
    let tools = names(&s);
    // An MCP client gets every tool of the mode directly; G12 deferral only with --defer.
    for t in ["shell", "get_terminal_output", "edit_file", "create_file", "read_file", "grep", "glob"] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    for t in ["tool_search", "call_tool"] {
        assert!(!tools.contains(&t), "{t} listed without --defer: {tools:?}");
    }
    // G13: built-ins sorted by name.
    let mut sorted = tools.clone();
    sorted.sort_unstable();
    assert_eq!(tools, sorted);

    assert_eq!(s["read"]["is_error"], false, "{}", s["read"]);
    assert!(s["read"]["text"].as_str().unwrap().contains("hello world"), "{}", s["read"]);
    // R5/G8: an image comes back as an MCP image block.
    assert_eq!(s["image"]["is_error"], false, "{}", s["image"]);
    let image = &s["image"]["images"][0];
    assert_eq!(image["mime_type"], "image/png", "{}", s["image"]);
    assert!(image["data"].as_str().unwrap().starts_with("iVBORw0KGgo"), "{image}");
    assert_eq!(s["edit"]["is_error"], false, "{}", s["edit"]);
    assert_eq!(s["edit"]["structured"]["status"], "success");
    assert_eq!(s["create"]["is_error"], false, "{}", s["create"]);
    // K1: codemode over MCP, its script in a `kodik codemode-worker` process, its call on the server.
    assert_eq!(s["codemode"]["is_error"], false, "{}", s["codemode"]);
    let script = s["codemode"]["text"].as_str().unwrap();
    assert!(script.contains("Tool calls: 1 — read_file ×1") && script.contains("created"), "{script}");
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "goodbye world\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("new.txt")).unwrap(), "created\n");

    // S3: the command outlived the wait and went to the background; polling shows it finish.
    assert_eq!(s["shell"]["is_error"], false, "{}", s["shell"]);
    assert_eq!(s["shell"]["structured"]["meta"]["running"], true, "{}", s["shell"]);
    // S2/S4: earlier, finished requests are not this batch, so the command got the full wait.
    assert!(s["shell"]["text"].as_str().unwrap().contains("after the default 5 s wait"), "{}", s["shell"]);
    let polls = s["polls"].as_array().unwrap();
    let last = polls.last().unwrap();
    assert_eq!(last["structured"]["meta"]["running"], false, "never finished: {last}");
    assert_eq!(last["is_error"], false, "{last}");
    // S5: the output arrives once, through a poll or (when the command ended between polls) as
    // a terminal note appended to a result.
    let polled_text: String = polls.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert!(polled_text.contains("done\n"), "{polled_text}");

    // The other background command's end arrived as an MCP logging notification.
    let evented = s["shell_evented"]["structured"]["meta"]["terminal_id"].as_str().unwrap();
    let event = s["logs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["data"]["event"] == "terminal" && l["data"]["terminal_id"] == evented)
        .unwrap_or_else(|| panic!("no terminal event for {evented}: {}", s["logs"]));
    assert_eq!(event["logger"], "kodik");
    assert_eq!(event["data"]["exit_code"], 0);
    assert!(event["data"]["unread_output"].as_str().unwrap().contains("event-done"), "{event}");

    // Bad calls are results the model can act on, not protocol errors.
    assert_eq!(s["unknown"]["is_error"], true, "{}", s["unknown"]);
    assert!(s["unknown"]["text"].as_str().unwrap().contains("unknown tool `read_fil`"), "{}", s["unknown"]);
    assert_eq!(s["invalid"]["is_error"], true, "{}", s["invalid"]);
    assert_eq!(s["invalid"]["structured"]["status"], "error");
}

#[test]
fn g11_serve_offers_only_the_modes_tools() {
    let dir = tempfile::tempdir().unwrap();
    let s = run_client(dir.path(), "ask", "list", &[], Duration::from_secs(60));
    let tools = names(&s);
    assert!(!tools.is_empty());
    for t in ["edit_file", "create_file", "delete_file", "apply_patch", "shell"] {
        assert!(!tools.contains(&t), "ask mode must not offer {t}: {tools:?}");
    }
}

#[test]
fn g12_serve_defers_read_and_search_tools_only_with_defer() {
    let dir = tempfile::tempdir().unwrap();
    let direct = run_client(dir.path(), "code", "list", &[], Duration::from_secs(60));
    let deferred = run_client(dir.path(), "code", "list", &["--defer"], Duration::from_secs(60));
    let (direct, deferred) = (names(&direct), names(&deferred));
    for t in ["read_file", "grep", "glob"] {
        assert!(direct.contains(&t), "{t} missing without --defer: {direct:?}");
        assert!(!deferred.contains(&t), "{t} listed with --defer: {deferred:?}");
    }
    for t in ["tool_search", "call_tool"] {
        assert!(!direct.contains(&t), "{t} listed without --defer: {direct:?}");
        assert!(deferred.contains(&t), "{t} missing with --defer: {deferred:?}");
    }
    // Both lists keep the mode's other tools.
    for t in ["shell", "edit_file", "codemode"] {
        assert!(direct.contains(&t) && deferred.contains(&t), "{t}: {direct:?} / {deferred:?}");
    }
}

#[test]
fn g12_serve_help_names_its_flags() {
    let out = Command::new(KODIK).args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--defer", "tool_search", "--mcp-config", "--http", "--token-file"] {
        assert!(help.contains(flag), "`kodik serve --help` lacks {flag}:\n{help}");
    }
}

/// Waits for `child` up to `limit`; kills it and fails the test when it does not exit.
/// R4, G15: over MCP each request that overlaps no other is a new message: a file read in an
/// earlier request is never "already read in this message", and an MCP client (which cannot
/// say it compacted) gets the content back by repeating the read that was answered
/// "unchanged". Before, every later read of an unchanged file answered "unchanged since you
/// read them earlier in this message" for the rest of the session; grep alike.
#[test]
fn r4_g15_a_later_request_is_a_new_message_and_the_repeat_after_the_hint_shows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let body = r#"
reads = []
for _ in range(3):
    reads.append(text(await session.call_tool("read_file", {"path": "a.txt"})))
out["reads"] = reads
out["greps"] = [text(await session.call_tool("grep", {"pattern": "hello"})) for _ in range(3)]
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    let reads: Vec<&str> = s["reads"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert!(reads[0].contains("1\u{2192}hello"), "{reads:?}");
    assert!(!reads[1].contains("in this message"), "an earlier request is not this message: {reads:?}");
    assert!(
        reads[1].contains("Unchanged since your last identical call")
            && reads[1].contains("send this exact call once more"),
        "{reads:?}"
    );
    assert!(reads[2].contains("1\u{2192}hello"), "the repeat after the hint shows the file: {reads:?}");
    let greps: Vec<&str> = s["greps"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert!(greps[0].contains("a.txt") && greps[0].contains("hello"), "{greps:?}");
    assert!(greps[1].contains("send this exact call once more"), "{greps:?}");
    assert_eq!(greps[2], greps[0], "the repeat after the hint shows the matches again");
}

/// R4, G15 while another request runs (a long test, a parallel sub-agent's call): a request
/// sent well after the one before it is a message of its own, so a re-read is never "already
/// read in this message" by someone else; and a read that did get that note returns the lines
/// when sent again. Before, every re-read during a running command got the note, and repeating
/// it never helped.
#[test]
fn r4_g15_rereads_while_another_request_runs_are_not_stuck_on_already_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let body = r#"
running = asyncio.ensure_future(session.call_tool("shell", {"command": "sleep 6", "timeout": 20000}))
await asyncio.sleep(0.5)
args = {"path": "a.txt", "ranges": [{"start_line": 1, "end_line": 1}]}
back_to_back = [text(await session.call_tool("read_file", args)) for _ in range(3)]
await asyncio.sleep(0.8)
later = [text(await session.call_tool("read_file", args)) for _ in range(2)]
out["back_to_back"], out["later"], out["running"] = back_to_back, later, running.done()
await running
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    assert_eq!(s["running"], false, "the command must still run during the reads: {s}");
    let texts = |key: &str| -> Vec<String> {
        s[key].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_owned()).collect()
    };
    let (quick, later) = (texts("back_to_back"), texts("later"));
    assert!(quick[0].contains("1\u{2192}hello"), "{quick:?}");
    // Sent right after the first: a note (R4, or the loop guard's if the reads were slow), and
    // the way out of it.
    assert!(!quick[1].contains("1\u{2192}hello") && quick[1].contains("send this exact call once more"), "{quick:?}");
    assert!(quick[2].contains("1\u{2192}hello"), "the read sent again returns the lines: {quick:?}");
    assert!(!later[0].contains("in this message"), "a request sent later is another message: {later:?}");
    assert!(later[0].contains("send this exact call once more"), "{later:?}");
    assert!(later[1].contains("1\u{2192}hello"), "{later:?}");
}

/// S3, S5 over MCP: no text `kodik serve` lists promises that a background command's end
/// "arrives later by itself" or "as a terminal event" (an MCP client never shows its model
/// one): the end comes with the next tool result. Before, `get_terminal_output`'s description
/// and `shell`'s `timeout` parameter still said so, against the `shell` description.
#[test]
fn s3_s5_no_tool_text_kodik_serve_lists_promises_a_terminal_event() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
tools = (await session.list_tools()).tools
out["tools"] = {t.name: {"description": t.description, "schema": json.dumps(t.input_schema)} for t in tools}
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    let tools = s["tools"].as_object().unwrap();
    for (name, t) in tools {
        for text in [t["description"].as_str().unwrap(), t["schema"].as_str().unwrap()] {
            for promise in ["terminal event", "arrives later", "by itself", "delivered automatically", "do not poll"] {
                assert!(!text.contains(promise), "{name} says `{promise}`: {text}");
            }
        }
    }
    let output = tools["get_terminal_output"]["description"].as_str().unwrap();
    assert!(output.contains("added to your next tool result"), "{output}");
    let shell: Value = serde_json::from_str(tools["shell"]["schema"].as_str().unwrap()).unwrap();
    let timeout = shell["properties"]["timeout"]["description"].as_str().unwrap();
    assert!(timeout.contains("added to your next tool result"), "{timeout}");
}

/// S10, S5 over MCP: with every running slot taken by background commands, another `shell`
/// call is refused at once, and the refusal says what the client's model can do: stop one, or
/// check with get_terminal_output. Before, it said to "wait for its terminal event", which an
/// MCP client never shows its model.
#[test]
fn s5_s10_the_refusal_of_one_command_too_many_over_mcp_promises_no_terminal_event() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
started = await asyncio.gather(*[session.call_tool("shell", {"command": f"sleep 4{k:02d}"}) for k in range(16)])
out["started"] = [text(r) for r in started]
out["refused"] = text(await session.call_tool("shell", {"command": "echo one-more"}))
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    let started = s["started"].as_array().unwrap();
    assert!(started.iter().all(|t| t.as_str().unwrap().contains("still running")), "{started:?}");
    let refused = s["refused"].as_str().unwrap();
    assert!(refused.contains("too many commands are still running"), "{refused}");
    assert!(refused.contains("kill_terminal") && refused.contains("get_terminal_output"), "{refused}");
    assert!(!refused.contains("terminal event"), "{refused}");
}

/// MCP annotations: clients auto-approve tools by these hints, so everything that can delete
/// or overwrite (a command, a script, a file edit, the browser) says `destructiveHint`, and
/// status checks say `readOnlyHint`. Before, `shell` and `codemode` were non-destructive and
/// `agent_status` was not read-only, while `create_file` (which refuses to overwrite) was
/// destructive.
#[test]
fn g11_mcp_annotations_mark_commands_destructive_and_status_checks_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
tools = (await session.list_tools()).tools
out["hints"] = {t.name: [t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.open_world_hint] for t in tools}
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    let hints = |name: &str| -> (bool, bool, bool) {
        let h = &s["hints"][name];
        assert!(h.is_array(), "{name} not listed: {s}");
        (h[0] == true, h[1] == true, h[2] == true)
    };
    // (readOnly, destructive, openWorld)
    assert_eq!(hints("shell"), (false, true, true));
    assert_eq!(hints("codemode"), (false, true, true));
    assert_eq!(hints("kill_terminal"), (false, true, false));
    assert_eq!(hints("edit_file"), (false, true, false));
    assert_eq!(hints("delete_file"), (false, true, false));
    assert_eq!(hints("create_file"), (false, false, false));
    assert_eq!(hints("browser"), (false, true, true));
    assert_eq!(hints("memory"), (false, true, false));
    assert_eq!(hints("todo_write"), (false, false, false));
    for read_only in ["read_file", "grep", "glob", "lsp", "read_lints", "get_terminal_output", "agent_status"] {
        assert_eq!(hints(read_only), (true, false, false), "{read_only}");
    }
    assert_eq!(hints("web_fetch"), (true, false, true));
}

/// G12: with `--defer`, a deferred tool called by its own name runs as through `call_tool`
/// (models trained on other agents call `read_file` and `grep` directly), and stays unlisted.
/// G10, G11: a tool the mode or the model cannot have is answered "not offered" with why.
/// Before, both were "unknown tool" with suggestions of tools that do something else
/// (`read_file` → "did you mean: read_lints", `edit_file` in Ask mode → "did you mean: read_file").
#[test]
fn g10_g11_g12_serve_runs_deferred_tools_by_name_and_says_what_is_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let body = r#"
out["tools"] = [t.name for t in (await session.list_tools()).tools]
for name, args in [("read_file", {"path": "a.txt"}), ("grep", {"pattern": "hello"}), ("edit_file", {"path": "a.txt", "edits": [{"old_string": "hello", "new_string": "bye"}]}), ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"})]:
    r = await session.call_tool(name, args)
    out[name] = {"is_error": r.is_error, "text": text(r)}
"#;
    let deferred = run_scenario(dir.path(), &["--defer"], body, Duration::from_secs(60));
    let tools = names(&deferred);
    assert!(tools.contains(&"call_tool") && !tools.contains(&"read_file") && !tools.contains(&"grep"), "{tools:?}");
    assert_eq!(deferred["read_file"]["is_error"], false, "{deferred}");
    assert_eq!(deferred["read_file"]["text"], "1\u{2192}hello\n");
    assert_eq!(deferred["grep"]["is_error"], false, "{deferred}");
    assert!(deferred["grep"]["text"].as_str().unwrap().contains("a.txt:1:hello"), "{deferred}");
    // The default model edits with the three file tools: apply_patch is theirs under another name.
    let patch = deferred["apply_patch"]["text"].as_str().unwrap();
    assert!(patch.contains("`apply_patch` is not offered to this model") && patch.contains("edit_file"), "{patch}");

    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let ask = run_scenario(dir.path(), &["--mode", "ask"], body, Duration::from_secs(60));
    assert_eq!(ask["edit_file"]["is_error"], true, "{ask}");
    let edit = ask["edit_file"]["text"].as_str().unwrap();
    assert!(edit.starts_with("`edit_file` is not offered in Ask mode"), "{edit}");
    assert!(!edit.contains("did you mean"), "{edit}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "hello\n");
}

/// G6: a request the client cancels (the official SDK sends `notifications/cancelled` when the
/// caller's task is cancelled, as a user pressing Esc does) stops its command's process group
/// while the server keeps serving. Before, the command ran on to its end, unseen: the reply
/// that would have named its terminal is never delivered.
#[test]
fn g6_a_shell_call_the_client_cancels_stops_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
pid_file = os.path.join(workspace, "cancel.pid")
task = asyncio.create_task(session.call_tool("shell", {"command": "echo $$ > cancel.pid; exec sleep 30", "timeout": 60000}))
for _ in range(400):
    if os.path.exists(pid_file) and open(pid_file).read().strip():
        break
    await asyncio.sleep(0.05)
pid = int(open(pid_file).read())
def alive():
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
out["alive_before"] = alive()
task.cancel()
try:
    await task
except asyncio.CancelledError:
    pass
start = time.monotonic()
while alive() and time.monotonic() - start < 10:
    await asyncio.sleep(0.05)
out["alive_after"] = alive()
out["after"] = text(await session.call_tool("shell", {"command": "echo still-serving"}))
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    assert_eq!(s["alive_before"], true, "{s}");
    assert_eq!(s["alive_after"], false, "the cancelled call's command still runs: {s}");
    assert!(s["after"].as_str().unwrap().contains("still-serving"), "{s}");
}

/// S3, S5 over MCP: a command sent to the background, and the `shell` description, tell the
/// model that its end comes with its next tool result (the server appends it there), not "as a
/// terminal event — do not poll", which an MCP client never shows its model; and the next
/// result does carry the end.
#[test]
fn s3_s5_a_backgrounded_command_over_mcp_says_its_end_comes_with_the_next_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let body = r#"
shell, _ = await asyncio.gather(
    session.call_tool("shell", {"command": "sleep 2; echo bg-finished"}),
    session.call_tool("read_file", {"path": "a.txt"}),
)
out["shell"] = text(shell)
out["description"] = next(t.description for t in (await session.list_tools()).tools if t.name == "shell")
await asyncio.sleep(3)
out["next"] = text(await session.call_tool("glob", {"pattern": "*.txt"}))
"#;
    let s = run_scenario(dir.path(), &[], body, Duration::from_secs(60));
    let shell = s["shell"].as_str().unwrap();
    assert!(shell.contains("added to your next tool result") && !shell.contains("do not poll"), "{shell}");
    let described = s["description"].as_str().unwrap();
    assert!(described.contains("added to your next tool result") && !described.contains("do not poll"), "{described}");
    let next = s["next"].as_str().unwrap();
    assert!(next.contains("exited with code 0") && next.contains("bg-finished"), "{next}");
}

/// JSON-RPC over stdio: a `tools/call` whose `arguments` are not an object is an `isError`
/// result naming the problem (as other invalid arguments are), one without a tool name is
/// -32602 invalid params, and only an unknown method is -32601. Before, both bad calls were
/// "-32601 Method not found" with the message `tools/call`, for a method that exists.
#[test]
fn g8_bad_tools_call_params_are_invalid_params_not_an_unknown_method() {
    use std::io::{BufRead as _, Write as _};
    let ws = tempfile::tempdir().unwrap();
    let mut child = Command::new(KODIK)
        .args(["serve", "--workspace", ws.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":"a.txt"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"frobnicate"}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut replies = std::collections::HashMap::new();
    while replies.len() < 4 {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) else { break };
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_i64() {
            replies.insert(id, v);
        }
    }
    drop(stdin);
    assert_eq!(replies.len(), 4, "a request got no reply: {replies:?}");
    let _ = wait_exit(&mut child, Duration::from_secs(10));
    let bad_args = &replies[&2]["result"];
    assert_eq!(bad_args["isError"], true, "{replies:?}");
    assert!(bad_args["content"][0]["text"].as_str().unwrap().contains("must be a JSON object"), "{bad_args}");
    assert_eq!(replies[&3]["error"]["code"], -32602, "{replies:?}");
    assert!(replies[&3]["error"]["message"].as_str().unwrap().contains("name"), "{replies:?}");
    assert_eq!(replies[&4]["error"]["code"], -32601, "{replies:?}");
}

fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`kodik serve` did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_answers_on_stdout_only_and_exits_when_the_client_closes_stdin() {
    use std::io::{BufRead as _, BufReader, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(KODIK)
        .args(["serve", "--workspace", dir.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"raw","version":"0"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let reply: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not pure JSON-RPC ({e}): {line}"));
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["serverInfo"]["name"], "kodik");
    assert!(reply["result"]["capabilities"]["tools"].is_object(), "{reply}");
    drop(stdin);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("serving") && err.contains("mode code"), "{err}");
}

#[test]
fn g11_serve_refuses_an_unknown_mode_with_the_valid_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(KODIK)
        .args(["serve", "--workspace", dir.path().to_str().unwrap(), "--mode", "yolo"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown mode `yolo`") && err.contains("code, debug, plan, ask, educator"), "{err}");
    assert!(out.stdout.is_empty());
}

/// An `mcpServers` file mounting the kodik-mcp test fixture (a Python-SDK server) as `py`.
fn fixture_config(dir: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kodik-mcp/tests/fixture/server.py");
    let markers = dir.join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let config = dir.join("servers.json");
    let body = serde_json::json!({"mcpServers": {"py": {
        "command": mcp_python(),
        "args": [fixture, markers],
    }}});
    std::fs::write(&config, body.to_string()).unwrap();
    config
}

#[test]
fn a8_g13_serve_mcp_config_aggregates_another_servers_tools_after_the_built_ins() {
    let ws = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let config = fixture_config(conf.path());
    let s = run_client(
        ws.path(),
        "code",
        "aggregate",
        &["--mcp-config", config.to_str().unwrap()],
        Duration::from_secs(90),
    );
    let tools = names(&s);
    let first_mcp = tools.iter().position(|t| t.starts_with("py__")).unwrap_or_else(|| panic!("{tools:?}"));
    let (builtins, mounted) = tools.split_at(first_mcp);
    assert!(builtins.contains(&"read_file") && builtins.contains(&"shell"), "{tools:?}");
    assert!(mounted.iter().all(|t| t.starts_with("py__")), "G13: MCP tools after every built-in: {tools:?}");
    assert!(mounted.contains(&"py__echo") && mounted.contains(&"py__dotted_name"), "{tools:?}");
    let mut sorted = mounted.to_vec();
    sorted.sort_unstable();
    assert_eq!(mounted, sorted, "G13: sorted by name inside the group");
    // G8: the other server's text comes through kodik unchanged.
    assert_eq!(s["echo"]["is_error"], false, "{}", s["echo"]);
    assert_eq!(s["echo"]["text"], "<b>&amp;</b>\n");
}

/// A8: `kodik serve --mcp-config` passes a mounted server's `instructions` on to its own
/// client, fenced and labelled as that server's, after kodik's own guidance, as `kodik agent`
/// puts them in its system prompt. Before, the client got kodik's guidance only.
#[test]
fn a8_serve_passes_a_mounted_servers_instructions_on_fenced() {
    let ws = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let config = fixture_config(conf.path());
    let body = r#"out["instructions"] = init.instructions"#;
    let s = run_scenario(ws.path(), &["--mcp-config", config.to_str().unwrap()], body, Duration::from_secs(90));
    let text = s["instructions"].as_str().unwrap_or_else(|| panic!("no instructions: {s}"));
    let fenced = text.find(r#"<mcp_server_instructions server="py">"#).unwrap_or_else(|| panic!("{text}"));
    let own = text.find("Call `py__echo` to check the connection").unwrap_or_else(|| panic!("{text}"));
    assert!(fenced < own, "{text}");
    assert!(text[..fenced].contains("read_file"), "kodik's own guidance comes first: {text}");
    // The server's attempt to close the fence early does not close it.
    assert_eq!(text.matches("</mcp_server_instructions>").count(), 1, "{text}");
    let plain = tempfile::tempdir().unwrap();
    let s = run_scenario(plain.path(), &[], body, Duration::from_secs(60));
    assert!(!s["instructions"].as_str().unwrap_or_default().contains("mcp_server_instructions"), "{s}");
}

/// G13, A8: `kodik serve` lists a mounted server's tools with that server's MCP annotations,
/// each hint it leaves out at MCP's default, never safer than the server says. Before, the
/// hints were derived from the effect kodik gives the tool: a read-only tool (a fetch) was
/// listed `openWorldHint: false`, the unsafe direction, and title and idempotence were lost.
#[test]
fn a8_g13_serve_lists_mounted_tools_with_their_servers_annotations() {
    let ws = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let config = fixture_config(conf.path());
    let body = r#"
tools = (await session.list_tools()).tools
out["hints"] = {t.name: t.annotations.model_dump(by_alias=True, exclude_none=True) for t in tools if t.name.startswith("py__")}
"#;
    let s = run_scenario(ws.path(), &["--mcp-config", config.to_str().unwrap()], body, Duration::from_secs(90));
    let hints = &s["hints"];
    // readOnlyHint only: open world and not destructive by MCP's defaults.
    assert_eq!(
        hints["py__echo"],
        serde_json::json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true}),
        "{s}"
    );
    // Title, idempotence and a closed world as the server says; destructive by default.
    assert_eq!(
        hints["py__write_note"],
        serde_json::json!({"title": "Write a note", "readOnlyHint": false, "destructiveHint": true,
            "idempotentHint": true, "openWorldHint": false}),
        "{s}"
    );
    // No annotations at all: MCP's defaults.
    assert_eq!(
        hints["py__fail"],
        serde_json::json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}),
        "{s}"
    );
}

#[test]
fn a8_call_and_batch_mount_mcp_config_and_report_a_bad_file() {
    let ws = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let config = fixture_config(conf.path());
    let out = Command::new(KODIK)
        .args(["call", "--workspace", ws.path().to_str().unwrap(), "--mcp-config", config.to_str().unwrap()])
        .args(["py__echo", r#"{"text":"<x> & y"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "success", "{v}");
    assert_eq!(v["content"][0]["text"], "<x> & y", "{v}");
    assert_eq!(v["meta"]["server"], "py", "{v}");

    let mut child = Command::new(KODIK)
        .args(["batch", "--workspace", ws.path().to_str().unwrap(), "--mcp-config", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, r#"[{{"id":"a","name":"py__stats","args":{{"n":4}}}},{{"id":"b","name":"py__fail","args":{{"reason":"no"}}}}]"#).unwrap();
    }
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(status.success(), "{stdout}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["meta"]["structured_content"]["square"], 16, "{stdout}");
    assert_eq!(lines[1]["status"], "error", "{stdout}");

    let bad = conf.path().join("bad.json");
    std::fs::write(&bad, r#"{"mcpServers": {"x": {"args": []}}}"#).unwrap();
    let out = Command::new(KODIK)
        .args(["call", "--workspace", ws.path().to_str().unwrap(), "--mcp-config", bad.to_str().unwrap(), "glob"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MCP server `x`") && err.contains("bad.json"), "{err}");
}

/// The official SDK's streamable-HTTP client: `sessions` (two sessions at once) or `inflight`
/// (a call running while the server gets SIGTERM); prints one JSON summary line.
const HTTP_CLIENT: &str = r#"
import asyncio, json, sys
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

url, scenario, token = sys.argv[1], sys.argv[2], sys.argv[3]

def summary(result):
    return {
        "is_error": result.is_error,
        "text": "\n".join(c.text for c in result.content if c.type == "text"),
        "structured": result.structured_content,
    }

class Session:
    def __init__(self):
        headers = {"Authorization": "Bearer " + token} if token else {}
        self.http = httpx2.AsyncClient(headers=headers, timeout=120)

    async def __aenter__(self):
        # "idle" leaves without ending its session, as a client that vanished would.
        self.transport = streamable_http_client(url, http_client=self.http, terminate_on_close=scenario != "idle")
        read, write, *_ = await self.transport.__aenter__()
        self.session = ClientSession(read, write)
        await self.session.__aenter__()
        await self.session.initialize()
        return self

    async def __aexit__(self, *exc):
        await self.session.__aexit__(*exc)
        await self.transport.__aexit__(*exc)

    async def call(self, name, args):
        return summary(await self.session.call_tool(name, args))

async def main():
    out = {}
    if scenario == "sessions":
        async with Session() as a, Session() as b:
            out["tools"] = [t.name for t in (await a.session.list_tools()).tools]
            out["a_read"] = await a.call("read_file", {"path": "notes.txt"})
            out["a_edit"] = await a.call("edit_file", {"path": "notes.txt", "edits": [{"old_string": "hello", "new_string": "bye"}]})
            out["b_edit"] = await b.call("edit_file", {"path": "notes.txt", "edits": [{"old_string": "bye", "new_string": "stolen"}]})
            out["a_shell"] = await a.call("shell", {"command": "sleep 6; echo mine"})
            term = out["a_shell"]["structured"]["meta"]["terminal_id"]
            out["b_poll"] = await b.call("get_terminal_output", {"terminal_id": term})
            out["a_poll"] = await a.call("get_terminal_output", {"terminal_id": term})
    elif scenario == "list":
        async with Session() as a:
            out["tools"] = [t.name for t in (await a.session.list_tools()).tools]
    elif scenario == "idle":
        async with Session() as a:
            out["background"] = await a.call("shell", {"command": "echo $$ > idle.pid; exec sleep 300"})
    elif scenario == "inflight":
        async with Session() as a:
            out["background"] = await a.call("shell", {"command": "echo $$ > sleeper.pid; exec sleep 300"})
            print("calling", flush=True)
            out["call"] = await a.call("shell", {"command": "sleep 2; echo finished"})
    print(json.dumps(out), flush=True)

asyncio.run(main())
"#;

/// A raw streamable-HTTP client (stdlib only) that never opens the optional GET stream: it
/// POSTs a 3 s `shell` call and reads the call's own SSE response, answering pings only when
/// told to; prints `{"result", "pings"}`.
const RAW_LONG_CALL: &str = r#"
import http.client, json, sys, urllib.parse
url, answer = urllib.parse.urlparse(sys.argv[1]), sys.argv[2] == "answer"
H = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
def post(msg, sid=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    c.request("POST", url.path, json.dumps(msg), dict(H, **({"Mcp-Session-Id": sid} if sid else {})))
    return c.getresponse()
def messages(r):
    for line in r:
        line = line.decode().strip()
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])
r = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
sid = r.getheader("Mcp-Session-Id")
list(messages(r))
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).read()
r = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "shell", "arguments": {"command": "sleep 3; echo long-done", "timeout": 20000}}}, sid)
out = {"result": None, "pings": 0}
for m in messages(r):
    if m.get("method") == "ping":
        out["pings"] += 1
        if answer:
            post({"jsonrpc": "2.0", "id": m["id"], "result": {}}, sid).read()
    elif m.get("id") == 2:
        out["result"] = m
        break
print(json.dumps(out))
"#;

/// MCP streamable HTTP: a call longer than `--session-idle` from a client without the optional
/// GET stream keeps its session alive (the server pings on the call's own response stream)
/// and gets its result, whether or not the client answers the pings. Before, the pings went to
/// the GET stream the client never opened: the session expired mid-call, the command was
/// killed and the POST ended without a response.
#[test]
fn http_a_call_longer_than_the_idle_limit_keeps_its_session_without_a_get_stream() {
    let ws = tempfile::tempdir().unwrap();
    let server = HttpServe::start_with(ws.path(), "127.0.0.1:0", None, &["--session-idle", "1"]).unwrap();
    for answer in ["answer", "ignore"] {
        let client = Command::new(mcp_python())
            .args(["-c", RAW_LONG_CALL, &server.url, answer])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let s = finish(client, Duration::from_secs(60));
        let text = s["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("long-done"), "{answer}: no result after the idle limit: {s}");
        assert!(s["pings"].as_u64().unwrap() >= 1, "{answer}: {s}");
    }
}

/// `kodik serve --http ADDR` in `workspace`, with its bound URL read from stderr.
struct HttpServe {
    child: std::process::Child,
    url: String,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServe {
    fn start(workspace: &Path, addr: &str, token: Option<&str>) -> Result<Self, String> {
        Self::start_with(workspace, addr, token, &[])
    }

    fn start_with(workspace: &Path, addr: &str, token: Option<&str>, extra: &[&str]) -> Result<Self, String> {
        use std::io::BufRead as _;
        let mut cmd = Command::new(KODIK);
        cmd.args(["serve", "--workspace", workspace.to_str().unwrap(), "--http", addr])
            .args(extra)
            .env_remove("KODIK_SERVE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(t) = token {
            cmd.env("KODIK_SERVE_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(i) = line.find("http://") {
                    let _ = tx.send(line[i..].split_whitespace().next().unwrap_or_default().to_owned());
                }
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => Ok(Self { child, url, stderr: log }),
            Err(_) => {
                let status = wait_exit(&mut child, Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(100));
                Err(format!("exit {status}: {}", log.lock().unwrap()))
            }
        }
    }

    fn port(&self) -> u16 {
        self.url.trim_end_matches("/mcp").rsplit(':').next().unwrap().parse().unwrap()
    }

    fn sigterm(&self) {
        let ok = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the HTTP client script; returns its stdout lines.
fn http_client(url: &str, scenario: &str, token: &str) -> std::process::Child {
    // Given with `-c`: a script file would have to outlive the returned child, and a kept
    // temporary folder was left behind by every run.
    Command::new(mcp_python())
        .args(["-c", HTTP_CLIENT, url, scenario, token])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(mut child: std::process::Child, limit: Duration) -> Value {
    let status = wait_exit(&mut child, limit);
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "the HTTP client failed ({status})\n{out}\n{err}");
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

/// One raw HTTP/1.1 request to 127.0.0.1:`port`; the status code.
fn raw_status(port: u16, headers: &str) -> u16 {
    use std::io::Write as _;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// POSTs `body` as `content_type` to `/mcp`; (status, response body).
fn raw_post(port: u16, content_type: &str, body: &str) -> (u16, String) {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {content_type}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    let status = response.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// G8 over HTTP: a body that is not JSON is HTTP 400 with JSON-RPC's parse error (-32700), JSON
/// that is no JSON-RPC message 400 with invalid request (-32600). Before, both were 415
/// Unsupported Media Type, which points at a Content-Type header that was right.
#[test]
fn g8_http_a_body_that_is_not_json_rpc_is_a_bad_request_with_the_json_rpc_error() {
    let ws = tempfile::tempdir().unwrap();
    let server = HttpServe::start(ws.path(), "127.0.0.1:0", None).unwrap();
    let port = server.port();
    let (status, body) = raw_post(port, "application/json", "this is not json");
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["error"]["code"], -32700, "{body}");
    let (status, body) = raw_post(port, "application/json; charset=utf-8", r#"{"hello": 1}"#);
    assert_eq!(status, 400, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["error"]["code"], -32600, "{body}");
    // A wrong Content-Type is still 415, and a good request still works.
    assert_eq!(raw_post(port, "text/plain", r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).0, 415);
    assert_eq!(raw_status(port, ""), 200);
}

#[test]
fn http_sessions_keep_separate_terminals_and_reads() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "hello world\n").unwrap();
    let server = HttpServe::start(ws.path(), "127.0.0.1:0", None).unwrap();
    let s = finish(http_client(&server.url, "sessions", ""), Duration::from_secs(90));
    let tools = names(&s);
    assert!(tools.contains(&"read_file") && tools.contains(&"shell"), "{tools:?}");
    assert_eq!(s["a_edit"]["is_error"], false, "{}", s["a_edit"]);
    // Session B never read the file: its edit is refused (the read tracker is per session).
    assert_eq!(s["b_edit"]["is_error"], true, "{}", s["b_edit"]);
    assert!(s["b_edit"]["text"].as_str().unwrap().contains("has not been read"), "{}", s["b_edit"]);
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(), "bye world\n");
    // A's terminal is invisible to B.
    assert_eq!(s["a_shell"]["structured"]["meta"]["running"], true, "{}", s["a_shell"]);
    assert_eq!(s["b_poll"]["is_error"], true, "{}", s["b_poll"]);
    assert_eq!(s["a_poll"]["is_error"], false, "{}", s["a_poll"]);
}

#[test]
fn http_refuses_missing_tokens_and_foreign_origins() {
    let ws = tempfile::tempdir().unwrap();
    // A non-loopback bind without a token does not start.
    let err = HttpServe::start(ws.path(), "0.0.0.0:0", None).err().expect("served 0.0.0.0 without a token");
    assert!(err.contains("not a loopback address") && err.contains("KODIK_SERVE_TOKEN"), "{err}");

    let server = HttpServe::start(ws.path(), "0.0.0.0:0", Some("s3cret-token")).unwrap();
    let port = server.port();
    assert_eq!(raw_status(port, ""), 401);
    assert_eq!(raw_status(port, "Authorization: Bearer wrong-token\r\n"), 401);
    assert_eq!(raw_status(port, "Authorization: Bearer s3cret-token\r\n"), 200);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let s = finish(http_client(&url, "list", "s3cret-token"), Duration::from_secs(60));
    assert!(names(&s).contains(&"read_file"), "{s}");
    // kodik's own client sends the `headers` of an mcpServers entry (Authorization included).
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use kodik_mcp::{ClientOptions, McpClient, McpConfig, ServerConfig};
        let mut with = ServerConfig::http(&url);
        with.headers.insert("Authorization".into(), "Bearer s3cret-token".into());
        let client = McpClient::connect(&McpConfig::new().server("k", with), ClientOptions::default()).await;
        assert!(client.errors().is_empty(), "{:?}", client.errors());
        assert!(
            client.tools(&Default::default()).iter().any(|t| kodik_tools::core::Tool::spec(t).name == "k__read_file")
        );
        client.shutdown().await;
        let without =
            McpClient::connect(&McpConfig::new().server("k", ServerConfig::http(&url)), ClientOptions::default()).await;
        let err = without.errors().first().map(ToString::to_string).unwrap_or_default();
        assert!(err.contains("MCP server `k`"), "connected without the token: {err}");
    });
    drop(server);

    // DNS rebinding: a browser origin is refused even on loopback.
    let local = HttpServe::start(ws.path(), "127.0.0.1:0", None).unwrap();
    assert_eq!(raw_status(local.port(), "Origin: http://evil.example\r\n"), 403);
    assert_eq!(raw_status(local.port(), ""), 200);
}

#[test]
fn http_sigterm_lets_the_call_in_flight_finish_kills_terminals_and_exits_0() {
    use std::io::BufRead as _;
    let ws = tempfile::tempdir().unwrap();
    let mut server = HttpServe::start(ws.path(), "127.0.0.1:0", None).unwrap();
    let mut client = http_client(&server.url, "inflight", "");
    let mut lines = std::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert_eq!(first, "calling");
    std::thread::sleep(Duration::from_millis(500));
    server.sigterm();
    let status = wait_exit(&mut server.child, Duration::from_secs(30));
    assert!(status.success(), "exit {status}: {}", server.stderr.lock().unwrap());
    let summary: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let _ = wait_exit(&mut client, Duration::from_secs(30));
    assert_eq!(summary["call"]["is_error"], false, "{summary}");
    assert!(summary["call"]["text"].as_str().unwrap().contains("finished"), "{summary}");
    let pid = std::fs::read_to_string(ws.path().join("sleeper.pid")).unwrap();
    let proc = PathBuf::from(format!("/proc/{}", pid.trim()));
    let start = Instant::now();
    while proc.exists() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!proc.exists(), "the background terminal {pid} outlived the server");
}

/// The peak resident set of a process, in KiB (Linux `VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn http_load_50_sessions_x_100_calls_without_errors_or_cross_session_leaks() {
    use kodik_mcp::{ClientOptions, McpClient, McpConfig, ServerConfig};
    const SESSIONS: usize = 50;
    const CALLS: usize = 100;
    let ws = tempfile::tempdir().unwrap();
    for i in 0..SESSIONS {
        std::fs::write(ws.path().join(format!("f{i}.txt")), format!("marker-{i}\n")).unwrap();
    }
    let server = HttpServe::start(ws.path(), "127.0.0.1:0", None).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (latencies, wall) = rt.block_on(async {
        let config = McpConfig::new().server("k", ServerConfig::http(&server.url));
        // One McpClient per session: each is its own Mcp-Session-Id on the server.
        let mut clients = Vec::new();
        for _ in 0..SESSIONS {
            let c = McpClient::connect(&config, ClientOptions::default()).await;
            assert!(c.errors().is_empty(), "{:?}", c.errors());
            clients.push(c);
        }
        let started = Instant::now();
        let mut runs = tokio::task::JoinSet::new();
        for (i, client) in clients.iter().enumerate() {
            let tools = client.tools(&Default::default());
            let ws = ws.path().to_path_buf();
            runs.spawn(async move {
                use kodik_tools::core::Tool as _;
                let tool = |n: &str| tools.iter().find(|t| t.spec().name == format!("k__{n}")).unwrap();
                let cx = kodik_tools::core::ToolContext::new(kodik_tools::core::Workspace::new(&ws).unwrap());
                let mut times = Vec::with_capacity(CALLS);
                for n in 0..CALLS {
                    let (name, args, want) = match n % 3 {
                        // Arguments differ from call to call, as a model's do: identical repeats
                        // are answered by the session's repeat guard instead.
                        0 => (
                            "read_file",
                            serde_json::json!({"path": format!("f{i}.txt"), "ranges": [{"start_line": 1, "end_line": n + 1}]}),
                            format!("marker-{i}"),
                        ),
                        1 => (
                            "grep",
                            serde_json::json!({"pattern": format!("marker-{i}$|^never-{n}$"), "path": "."}),
                            format!("f{i}.txt"),
                        ),
                        _ => ("shell", serde_json::json!({"command": format!("echo session-{i}-{n}")}), format!("session-{i}-{n}")),
                    };
                    let t = Instant::now();
                    let out = tool(name).call(args, &cx).await;
                    times.push(t.elapsed());
                    assert!(out.is_success(), "session {i} call {n} ({name}): {out:?}");
                    let text = out.text_content();
                    // A repeated read of an unchanged file is answered by the session's read
                    // tracker ("unchanged since you read them"), naming this session's file.
                    let repeated_read = name == "read_file" && text.contains(&format!("`f{i}.txt`"));
                    assert!(text.contains(&want) || repeated_read, "session {i} call {n} ({name}) lacks {want}: {text}");
                    // No other session's marker ever shows up in this session's results.
                    for other in (0..SESSIONS).filter(|o| *o != i) {
                        assert!(!text.contains(&format!("session-{other}-")), "leak into {i}: {text}");
                    }
                }
                times
            });
        }
        let all: Vec<Duration> = runs.join_all().await.into_iter().flatten().collect();
        let wall = started.elapsed();
        for c in &clients {
            c.shutdown().await;
        }
        (all, wall)
    });
    let mut sorted = latencies.clone();
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)];
    let rss = peak_rss_kib(server.child.id());
    eprintln!(
        "load: {} calls in {:.2} s = {:.0} calls/s; p50 {:?}, p99 {:?}; server peak RSS {} MiB",
        sorted.len(),
        wall.as_secs_f64(),
        sorted.len() as f64 / wall.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        rss / 1024
    );
    assert_eq!(sorted.len(), SESSIONS * CALLS);
    assert!(rss < 1024 * 1024, "the server's RSS grew past 1 GiB: {rss} KiB");
}

#[test]
fn http_an_idle_session_expires_and_its_terminals_are_killed() {
    let ws = tempfile::tempdir().unwrap();
    let server = HttpServe::start_with(ws.path(), "127.0.0.1:0", None, &["--session-idle", "3"]).unwrap();
    let s = finish(http_client(&server.url, "idle", ""), Duration::from_secs(60));
    assert_eq!(s["background"]["structured"]["meta"]["running"], true, "{s}");
    let pid = std::fs::read_to_string(ws.path().join("idle.pid")).unwrap();
    let proc = PathBuf::from(format!("/proc/{}", pid.trim()));
    assert!(proc.exists(), "the background command is gone before the session expired");
    let start = Instant::now();
    while proc.exists() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!proc.exists(), "the idle session's terminal {} still runs after {:?}", pid.trim(), start.elapsed());
    // The server itself keeps serving.
    let again = finish(http_client(&server.url, "list", ""), Duration::from_secs(60));
    assert!(names(&again).contains(&"shell"), "{again}");
}

/// A8, G13: `kodik agent --mcp-config` mounts another server's tools: the model is offered
/// `py__echo` after the built-ins and its call reaches the Python-SDK server.
#[tokio::test]
async fn a8_agent_mounts_mcp_config_and_the_model_calls_the_servers_tool() {
    use kodik_tools::model::Provider;
    use kodik_tools::model::replay::{Exchange, Recording, ReplayServer};
    let ws = tempfile::tempdir().unwrap();
    let config = fixture_config(ws.path());
    let completed = sse_completed();
    let call = sse_call(0, "call_echo", "py__echo", &serde_json::json!({"text": "hello through mcp"}));
    let answer = sse_text("The server echoed.");
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call + &completed))
        .with(Exchange::sse(answer + &completed));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = tokio::process::Command::new(KODIK)
        .args(["agent", "--workspace", ws.path().to_str().unwrap(), "--model", "gpt-5"])
        .args(["--base-url", &server.base_url(), "--mcp-config", config.to_str().unwrap(), "echo it"])
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("✓ py__echo"), "{stderr}");
    let requests = server.requests();
    let tools: Vec<&str> =
        requests[0].body["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(tools.contains(&"py__echo"), "{tools:?}");
    let first_mcp = tools.iter().position(|t| t.starts_with("py__")).unwrap();
    assert!(tools[first_mcp..].iter().all(|t| t.starts_with("py__")), "MCP tools come after the built-ins: {tools:?}");
    assert!(requests[1].body.to_string().contains("hello through mcp"), "{}", requests[1].body);
}

/// A8, README `kodik agent` (keys never shown to the model): a mounted server does not inherit
/// the provider's API key, so a third-party server cannot hand it to the model; a server whose
/// `env` names the key gets it.
#[tokio::test]
async fn a8_agent_mounted_servers_get_the_api_key_only_when_their_env_names_it() {
    use kodik_tools::model::Provider;
    use kodik_tools::model::replay::{Exchange, Recording, ReplayServer};
    let ws = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kodik-mcp/tests/fixture/server.py");
    let markers = ws.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let config = ws.path().join("servers.json");
    let server_entry =
        |env: Value| serde_json::json!({"command": mcp_python(), "args": [&fixture, &markers], "env": env});
    let body = serde_json::json!({"mcpServers": {
        "plain": server_entry(serde_json::json!({})),
        "named": server_entry(serde_json::json!({"OPENAI_API_KEY": "${OPENAI_API_KEY}"})),
    }});
    std::fs::write(&config, body.to_string()).unwrap();
    let completed = sse_completed();
    let call =
        |i: usize, name: &str, var: &str| sse_call(i, &format!("call_{i}"), name, &serde_json::json!({"name": var}));
    let calls = call(0, "plain__getenv", "OPENAI_API_KEY")
        + &call(1, "plain__getenv", "ANTHROPIC_API_KEY")
        + &call(2, "named__getenv", "OPENAI_API_KEY");
    let answer = sse_text("Looked.");
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(calls + &completed))
        .with(Exchange::sse(answer + &completed));
    let server = ReplayServer::start(recording).await.unwrap();
    let out = tokio::process::Command::new(KODIK)
        .args(["agent", "--workspace", ws.path().to_str().unwrap(), "--model", "gpt-5"])
        .args(["--base-url", &server.base_url(), "--mcp-config", config.to_str().unwrap(), "look"])
        .env("OPENAI_API_KEY", "sk-test-openai-secret")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-secret")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    let outputs: Vec<String> = requests[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    assert!(outputs[0].contains("(unset)") && outputs[1].contains("(unset)"), "{outputs:?}");
    assert!(outputs[2].contains("sk-test-openai-secret"), "a server naming the key in `env` gets it: {outputs:?}");
    assert!(!outputs[..2].iter().any(|o| o.contains("secret")), "{outputs:?}");
}

/// G6, README `kodik agent` exit codes: with a server mounted, SIGTERM (`timeout`, `docker stop`,
/// a CI cancel) during a call to the server's tool ends the run as Ctrl-C does: the call is
/// cancelled, the server stopped, exit 130; before, the signal was swallowed and the run went on.
#[tokio::test]
async fn g6_agent_with_a_mounted_server_ends_on_sigterm_and_stops_the_server() {
    use kodik_tools::model::Provider;
    use kodik_tools::model::replay::{Exchange, Recording, ReplayServer};
    let ws = tempfile::tempdir().unwrap();
    let config = fixture_config(ws.path());
    let completed = sse_completed();
    let call = sse_call(0, "call_slow", "py__slow", &serde_json::json!({"seconds": 120, "tag": "term"}));
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(call + &completed))
        .with(Exchange::sse(completed.clone()));
    let server = ReplayServer::start(recording).await.unwrap();
    let mut child = tokio::process::Command::new(KODIK)
        .args(["agent", "--workspace", ws.path().to_str().unwrap(), "--model", "gpt-5", "--json"])
        .args(["--base-url", &server.base_url(), "--mcp-config", config.to_str().unwrap(), "wait"])
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = ws.path().join("markers/started-term");
    eventually("the server's tool started", || started.exists()).await;
    let pid: i32 = std::fs::read_to_string(&started).unwrap().trim().parse().unwrap();
    assert!(Command::new("kill").args(["-TERM", &child.id().unwrap().to_string()]).status().unwrap().success());
    let status = match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = child.kill().await;
            panic!("kodik agent still ran 20 s after SIGTERM");
        }
    };
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = alive();
    if left {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(!left, "the MCP server {pid} outlived the terminated kodik agent");
    let mut stdout = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).await.unwrap();
    assert_eq!(status.code(), Some(130), "{stdout}");
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(last["status"], "cancelled", "{stdout}");
}

/// Waits (at most 20 s) until `done` holds, polling.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A8: a Toolbox built before a mounted server's `tools/list_changed` follows it: its next plan
/// offers the added tool and can call it (directly and from code mode), a removed tool
/// answers "no longer offered", and an agent made before the change is offered the new tool
/// on its next request and calls it.
#[tokio::test(flavor = "multi_thread")]
async fn a8_list_changed_reaches_a_built_toolbox_and_its_agents_next_request() {
    use kodik_tools::agent::AgentConfig;
    use kodik_tools::core::{CancellationToken, ToolCall, ToolStatus};
    use kodik_tools::harness::Mode;
    use kodik_tools::mcp::{ClientOptions, McpClient, McpConfig};
    use kodik_tools::model::replay::{Exchange, Recording, ReplayServer};
    use kodik_tools::model::{ModelConfig, Provider};
    use std::sync::Arc;

    let ws = tempfile::tempdir().unwrap();
    let config = McpConfig::load(&fixture_config(ws.path())).unwrap();
    let client = Arc::new(McpClient::connect(&config, ClientOptions::default()).await);
    assert!(client.errors().is_empty(), "{:?}", client.errors());
    let tb = kodik_tools::Toolbox::builder().workspace(ws.path()).mcp(Arc::clone(&client)).build().unwrap();
    let offered = |tb: &kodik_tools::Toolbox| -> Vec<String> {
        tb.plan(Mode::Code, "gpt-5").tools.iter().map(|t| t.name.clone()).collect()
    };
    let before = offered(&tb);
    assert!(before.iter().any(|t| t == "py__ephemeral") && !before.iter().any(|t| t == "py__late"), "{before:?}");

    let completed = sse_completed();
    let text = sse_text;
    let call_late = sse_call(0, "call_late", "py__late", &serde_json::json!({}));
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::sse(text("nothing to do yet") + &completed))
        .with(Exchange::sse(call_late + &completed))
        .with(Exchange::sse(text("called it") + &completed));
    let replay = ReplayServer::start(recording).await.unwrap();
    let model = kodik_tools::model::client(
        ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(replay.base_url()).api_key("sk-test").retries(0),
    )
    .unwrap();
    let agent = tb.agent(model, AgentConfig::default());
    let mut conversation = agent.start().unwrap();
    let first = conversation.run("first", CancellationToken::new()).await;
    assert!(first.error.is_none(), "{first:?}");

    // The server adds `late`, then removes `ephemeral`, telling kodik each time.
    for (id, tool) in [("c1", "py__grow"), ("c2", "py__shrink")] {
        let out = tb.call(&ToolCall::new(id, tool, serde_json::json!({}))).await;
        assert_eq!(out.status, ToolStatus::Success, "{out:?}");
    }
    eventually("the toolbox offers py__late and no py__ephemeral", || {
        let now = offered(&tb);
        now.iter().any(|t| t == "py__late") && !now.iter().any(|t| t == "py__ephemeral")
    })
    .await;
    let late = tb.call(&ToolCall::new("c3", "py__late", serde_json::json!({}))).await;
    assert_eq!((late.status, late.text_content().as_str()), (ToolStatus::Success, "late"), "{late:?}");
    let gone = tb.call(&ToolCall::new("c4", "py__ephemeral", serde_json::json!({}))).await;
    assert_eq!(gone.status, ToolStatus::Error, "{gone:?}");
    assert!(gone.text_content().contains("no longer offered"), "{gone:?}");
    assert_eq!(gone.meta["error_kind"], "mcp_tool_removed", "{gone:?}");
    // Code mode's view was rebuilt too: scripts reach the new tool.
    let script = serde_json::json!({"code": "return await tools.py__late({})"});
    let from_script = tb.call(&ToolCall::new("c5", "codemode", script)).await;
    assert_eq!(from_script.status, ToolStatus::Success, "{from_script:?}");
    assert!(from_script.text_content().contains("late"), "{from_script:?}");

    let second = conversation.run("now call the new tool", CancellationToken::new()).await;
    assert!(second.error.is_none(), "{second:?}");
    assert_eq!(second.final_text, "called it");
    let requests = replay.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let tools = |n: usize| -> Vec<String> {
        requests[n].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    };
    assert!(tools(0).contains(&"py__ephemeral".into()) && !tools(0).contains(&"py__late".into()), "{:?}", tools(0));
    assert!(tools(1).contains(&"py__late".into()) && !tools(1).contains(&"py__ephemeral".into()), "{:?}", tools(1));
    let result = requests[2].body["input"].to_string();
    assert!(result.contains("call_late") && result.contains("late"), "{result}");
    client.shutdown().await;
}

/// The client of the list_changed test: lists, has the mounted server add `late` and remove
/// `ephemeral` through kodik, waits for kodik's own `notifications/tools/list_changed`, lists
/// again and calls the new and the removed tool.
const FOLLOW_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

kodik, workspace, config = sys.argv[1:4]

async def main():
    changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = StdioServerParameters(command=kodik, args=["serve", "--workspace", workspace, "--mcp-config", config])
    out = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            out["list_changed_capability"] = bool(init.capabilities.tools and init.capabilities.tools.list_changed)
            out["before"] = [t.name for t in (await session.list_tools()).tools]
            for tool in ["py__grow", "py__shrink"]:
                r = await session.call_tool(tool, {})
                out[tool] = r.is_error
                await asyncio.wait_for(changed.wait(), 20)
                changed.clear()
                out["after_" + tool] = [t.name for t in (await session.list_tools()).tools]
            late = await session.call_tool("py__late", {})
            out["late"] = {"is_error": late.is_error, "text": "".join(c.text for c in late.content if c.type == "text")}
            gone = await session.call_tool("py__ephemeral", {})
            out["gone"] = {"is_error": gone.is_error, "text": "".join(c.text for c in gone.content if c.type == "text")}
    print(json.dumps(out))

asyncio.run(main())
"#;

/// A8: a running stdio `kodik serve` that mounts a server follows its `tools/list_changed`:
/// it tells its own client (`notifications/tools/list_changed`, announced in its
/// capabilities), lists the new tool and calls it, and refuses the removed one clearly.
#[test]
fn a8_serve_tells_its_client_when_a_mounted_servers_tools_change() {
    let python = mcp_python();
    let ws = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let config = fixture_config(conf.path());
    let script = conf.path().join("follow.py");
    std::fs::write(&script, FOLLOW_CLIENT).unwrap();
    let mut child = Command::new(python)
        .arg(&script)
        .args([KODIK, ws.path().to_str().unwrap(), config.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = wait_exit(&mut child, Duration::from_secs(90));
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let err = err_reader.join().unwrap();
    assert!(status.success(), "the client failed ({status})\nstdout:\n{out}\nstderr:\n{err}");
    let s: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON summary ({e})\nstdout:\n{out}\nstderr:\n{err}"));
    let list = |key: &str| -> Vec<&str> { s[key].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect() };
    assert_eq!(s["list_changed_capability"], true, "{s}");
    assert!(list("before").contains(&"py__ephemeral") && !list("before").contains(&"py__late"), "{s}");
    assert_eq!((&s["py__grow"], &s["py__shrink"]), (&Value::Bool(false), &Value::Bool(false)), "{s}");
    assert!(list("after_py__grow").contains(&"py__late"), "{s}");
    assert!(!list("after_py__shrink").contains(&"py__ephemeral"), "{s}");
    assert!(list("after_py__shrink").contains(&"read_file"), "the built-ins stay: {s}");
    assert_eq!(s["late"], serde_json::json!({"is_error": false, "text": "late"}), "{s}");
    assert_eq!(s["gone"]["is_error"], true, "{s}");
    assert!(s["gone"]["text"].as_str().unwrap().contains("no longer offered"), "{s}");
}

/// A8: a workspace whose `.kodik/mcp.json` mounts `kodik serve` on itself nests servers only
/// down to `MAX_DEPTH`: its tools come through once more (`self__self__shell`) and stop there.
#[test]
fn a8_a_kodik_that_mounts_itself_nests_only_so_deep() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".kodik")).unwrap();
    let config = serde_json::json!({"mcpServers": {"self": {"command": KODIK, "args": ["serve", "--workspace", "."]}}});
    std::fs::write(ws.path().join(".kodik/mcp.json"), config.to_string()).unwrap();
    let call = |tool: &str| {
        let mut child = Command::new(KODIK)
            .args(["call", "--workspace", ws.path().to_str().unwrap(), tool, r#"{"command":"echo nested"}"#])
            .env_remove("KODIK_MCP_DEPTH")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_exit(&mut child, Duration::from_secs(120));
        let mut stdout = String::new();
        child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
        (status, serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null))
    };
    let (status, out) = call("self__self__shell");
    assert!(status.success(), "{out}");
    assert!(out["content"][0]["text"].as_str().unwrap_or_default().contains("nested"), "{out}");
    let (_, out) = call("self__self__self__shell");
    assert_eq!(out["meta"]["error_kind"], "unknown_tool", "{out}");
}

/// A8: Ctrl-C (or SIGTERM) while an MCP server is still starting ends that server too; before,
/// kodik died of the signal and the server, in its own process group, ran on.
#[test]
fn a8_interrupted_while_a_server_starts_leaves_no_server_running() {
    let ws = tempfile::tempdir().unwrap();
    let pidfile = ws.path().join("server.pid");
    // Written whole and renamed into place, so the test never reads a half-written pid.
    let script = format!(
        "import os, time; p = {:?}; open(p + '.tmp', 'w').write(str(os.getpid())); os.rename(p + '.tmp', p); time.sleep(120)",
        pidfile.to_str().unwrap()
    );
    let config = ws.path().join("slow.json");
    let python = mcp_python();
    let body = serde_json::json!({"mcpServers": {"slow": {"command": python, "args": ["-c", script]}}});
    std::fs::write(&config, body.to_string()).unwrap();
    let mut child = Command::new(KODIK)
        .args(["call", "--workspace", ws.path().to_str().unwrap(), "--mcp-config", config.to_str().unwrap()])
        .args(["shell", r#"{"command":"echo never"}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !pidfile.exists() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let server: i32 = std::fs::read_to_string(&pidfile).expect("the server started").trim().parse().unwrap();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let alive = || {
        std::fs::read_to_string(format!("/proc/{server}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = alive();
    if left {
        let _ = Command::new("kill").args(["-KILL", &server.to_string()]).status();
    }
    assert!(!left, "the MCP server {server} outlived the interrupted kodik");
    assert_eq!(status.code(), Some(130));

    // Once the servers are up, Ctrl-C still ends a running call (and stops the servers).
    let conf = tempfile::tempdir().unwrap();
    let quick = fixture_config(conf.path());
    let mut child = Command::new(KODIK)
        .args(["call", "--workspace", ws.path().to_str().unwrap(), "--mcp-config", quick.to_str().unwrap()])
        .args(["shell", r#"{"command":"echo started > started.txt; sleep 60"}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = ws.path().join("started.txt");
    let start = Instant::now();
    while !started.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started.exists(), "the call never ran");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)).code(), Some(130));
}
