//! The `kodik` binary end to end: real processes, real files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::process::{Command, Stdio};

use serde_json::Value;

fn kodik() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kodik"))
}

const ALL_TOOLS: [&str; 29] = [
    "agent_status",
    "apply_patch",
    "ask_questions",
    "browser",
    "call_tool",
    "check_understanding",
    "codebase_search",
    "codemode",
    "create_file",
    "create_lesson",
    "delete_file",
    "edit_file",
    "edit_notebook",
    "generate_plan",
    "get_terminal_output",
    "glob",
    "grep",
    "kill_terminal",
    "lsp",
    "memory",
    "read_file",
    "read_lints",
    "send_message",
    "shell",
    "sub_agent",
    "todo_write",
    "tool_search",
    "web_fetch",
    "web_search",
];

#[test]
fn schema_prints_every_tool_in_each_provider_format() {
    for (format, schema_key) in [("openai", "parameters"), ("anthropic", "input_schema"), ("mcp", "inputSchema")] {
        let out = kodik().args(["schema", "--format", format]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = v.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ALL_TOOLS, "{format}");
        for t in v.as_array().unwrap() {
            assert_eq!(t[schema_key]["type"], "object", "{format} {}", t["name"]);
        }
    }
}

#[test]
fn schema_of_an_unknown_tool_is_a_usage_error_with_suggestions() {
    let out = kodik().args(["schema", "edit_fil"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean: edit_file"));
}

#[test]
fn call_exit_codes_follow_the_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let ws = dir.path().to_str().unwrap();

    let ok = kodik().args(["call", "--workspace", ws, "read_file", r#"{"path":"a.txt"}"#]).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stdout));
    let v: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(v["status"], "success");
    assert!(v["content"][0]["text"].as_str().unwrap().contains("beta"));

    let missing = kodik().args(["call", "--workspace", ws, "read_file", r#"{"path":"nope.txt"}"#]).output().unwrap();
    assert_eq!(missing.status.code(), Some(1));

    let bad_json = kodik().args(["call", "--workspace", ws, "read_file", "{not json"]).output().unwrap();
    assert_eq!(bad_json.status.code(), Some(2));

    let unknown = kodik().args(["call", "--workspace", ws, "reed_file", "{}"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stdout).contains("read_file"));
}

#[test]
fn batch_runs_lines_in_one_session_and_answers_in_call_order() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let input = [
        r#"{"id":"c1","name":"create_file","args":{"path":"src/a.txt","content":"one\ntwo\n"}}"#,
        r#"[{"id":"r1","name":"read_file","args":{"path":"src/a.txt"}},{"id":"g1","name":"grep","args":{"pattern":"two"}}]"#,
        r#"{"id":"e1","name":"edit_file","args":{"path":"src/a.txt","edits":[{"old_string":"two","new_string":"zwei"}]}}"#,
        "not json at all",
        r#"{"id":"u1","name":"nonexistent_tool","args":{}}"#,
        r#"{"id":"k1","name":"codemode","args":{"code":"return await tools.read_file({path: 'src/a.txt'})"}}"#,
    ]
    .join("\n");
    let lines = common::run_batch(kodik(), ws, &input);
    let ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["c1", "r1", "g1", "e1", "", "u1", "k1"]);
    let statuses: Vec<&str> = lines.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["success", "success", "success", "success", "error", "error", "success"], "{lines:#?}");
    assert!(lines[1]["content"][0]["text"].as_str().unwrap().contains("2→two"), "{}", lines[1]);
    assert!(lines[2]["content"][0]["text"].as_str().unwrap().contains("a.txt"), "{}", lines[2]);
    assert!(lines[4]["content"][0]["text"].as_str().unwrap().contains("line 4"));
    assert_eq!(std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(), "one\nzwei\n");
    // K1: a script in the same session sees the edit made by the line before it.
    assert!(lines[6]["content"][0]["text"].as_str().unwrap().contains("2→zwei"), "{}", lines[6]);
}

/// Runs `kodik ARGS` in `ws` with `input` on stdin; (stdout lines, stderr JSON lines).
fn run_with_stderr(args: &[&str], input: &str) -> (Vec<Value>, Vec<Value>) {
    use std::io::Write as _;
    let mut child =
        kodik().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let parse = |bytes: &[u8]| -> Vec<Value> {
        String::from_utf8_lossy(bytes).lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    (parse(&out.stdout), parse(&out.stderr))
}

/// Whether process `pid` runs, waiting up to 2 s for it to go (a zombie counts as gone: it
/// waits only for its new parent to reap it).
fn alive(pid: &str) -> bool {
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"))
    };
    let start = std::time::Instant::now();
    while running() && start.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running()
}

/// S3, S4, S11 at the end of `kodik batch`'s input and of `kodik call`: a command the results
/// said "keeps running in the background" gets its timeout once more to finish and reports
/// its real end on stderr; one still running after that is stopped, with a final terminal
/// event `stopped` that says why. Before, both were killed at exit: the quick one's work was
/// lost and the event, when there was one, said `error` with no exit code and no reason.
#[test]
fn s3_s4_s11_batch_and_call_end_by_waiting_for_background_commands_or_saying_they_stopped_them() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    // Both commands go to the background a second after the read finishes (S4).
    let turn = serde_json::json!([
        {"id": "quick", "name": "shell", "args": {"command": "sleep 2.5; echo done > late.txt"}},
        {"id": "server", "name": "shell", "args": {"command": "echo $$ > server.pid; exec sleep 60"}},
        {"id": "read", "name": "read_file", "args": {"path": "a.txt"}},
        {"id": "daemon", "name": "shell", "args": {"command": "sleep 61 > /dev/null 2>&1 & echo $! > daemon.pid"}},
    ]);
    let (results, events) = run_with_stderr(&["batch", "--workspace", ws], &format!("{turn}\n"));
    assert_eq!(results[0]["meta"]["running"], true, "{}", results[0]);
    assert_eq!(results[1]["meta"]["running"], true, "{}", results[1]);
    let event = |id: &Value| {
        events.iter().find(|e| e["terminal_id"] == *id).unwrap_or_else(|| panic!("no event for {id}: {events:#?}"))
    };
    let quick = event(&results[0]["meta"]["terminal_id"]);
    assert_eq!((quick["status"].as_str(), quick["exit_code"].as_i64()), (Some("success"), Some(0)), "{quick}");
    assert_eq!(std::fs::read_to_string(dir.path().join("late.txt")).unwrap(), "done\n");
    let server = event(&results[1]["meta"]["terminal_id"]);
    assert_eq!(server["status"], "stopped", "{server}");
    assert!(server["reason"].as_str().unwrap().contains("kodik batch reached the end of its input"), "{server}");
    let pid = std::fs::read_to_string(dir.path().join("server.pid")).unwrap();
    assert!(!alive(pid.trim()), "the stopped command still runs");
    // What a finished command left running with `&` is stopped at once, and said so.
    assert_eq!(results[3]["meta"]["background_running"], true, "{}", results[3]);
    let daemon = event(&results[3]["meta"]["terminal_id"]);
    assert_eq!(daemon["status"], "stopped", "{daemon}");
    assert!(daemon["reason"].as_str().unwrap().contains("started in the background"), "{daemon}");
    let pid = std::fs::read_to_string(dir.path().join("daemon.pid")).unwrap();
    assert!(!alive(pid.trim()), "the `&` process still runs");

    // kodik call: its one command outlives its timeout by half a second and still finishes.
    let (results, events) = run_with_stderr(
        &["call", "--workspace", ws, "shell", r#"{"command":"sleep 5.5; touch call.flag","timeout":5000}"#],
        "",
    );
    assert_eq!(results[0]["meta"]["running"], true, "{}", results[0]);
    assert!(dir.path().join("call.flag").exists(), "kodik call killed the command it said keeps running");
    assert_eq!(events[0]["exit_code"], 0, "{events:#?}");
}

/// S11, S5: a command `kodik call` / `kodik batch` stops at the end gets one final terminal
/// event, and it is true. Before, each such terminal got a second event from the `&`-leftover
/// sweep: "stopped by the user", "it had already finished before kill_terminal; nothing was
/// stopped", reason "kodik stopped the processes the command had started in the background".
#[test]
fn s5_s11_a_command_stopped_at_the_end_gets_exactly_one_true_final_event() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let check = |events: &[Value], terminal: &Value, ended: &str| {
        let mine: Vec<&Value> = events.iter().filter(|e| e["terminal_id"] == *terminal).collect();
        assert_eq!(mine.len(), 1, "one final event per terminal: {mine:#?}");
        let ev = mine[0];
        assert_eq!(ev["status"], "stopped", "{ev}");
        let reason = ev["reason"].as_str().unwrap();
        assert!(reason.contains(ended) && reason.contains("still ran after waiting its timeout"), "{ev}");
        let text = ev["unread_output"].as_str().unwrap();
        assert!(!text.contains("nothing was stopped") && !text.contains("by the user"), "{ev}");
    };
    let (results, events) =
        run_with_stderr(&["call", "--workspace", ws, "shell", r#"{"command":"sleep 30","timeout":1000}"#], "");
    assert_eq!(results[0]["meta"]["running"], true, "{}", results[0]);
    check(&events, &results[0]["meta"]["terminal_id"], "kodik call returned its result");

    // In a batch, next to a finished command whose `&` process is stopped: one event each.
    let turn = serde_json::json!([
        {"id": "long", "name": "shell", "args": {"command": "sleep 31", "timeout": 1000}},
        {"id": "daemon", "name": "shell", "args": {"command": "sleep 62 > /dev/null 2>&1 &"}},
    ]);
    let (results, events) = run_with_stderr(&["batch", "--workspace", ws], &format!("{turn}\n"));
    assert_eq!(events.len(), 2, "{events:#?}");
    check(&events, &results[0]["meta"]["terminal_id"], "kodik batch reached the end of its input");
    let daemon = events.iter().find(|e| e["terminal_id"] == results[1]["meta"]["terminal_id"]).unwrap();
    assert!(daemon["reason"].as_str().unwrap().contains("started in the background"), "{daemon}");
}

/// E2 through `kodik call`: one call is a whole session, so the file an edit changes counts as
/// read (by whoever runs the command); edit_file and apply_patch change it. Before, every
/// `kodik call edit_file` failed with "has not been read in this session; read it with
/// read_file first", advice no single call could follow.
#[test]
fn e2_kodik_call_edits_a_file_without_a_read_in_the_same_process() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let out = kodik()
        .args([
            "call",
            "--workspace",
            ws,
            "edit_file",
            r#"{"path":"a.txt","edits":[{"old_string":"x","new_string":"y"}]}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "y\n");
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-y\n+z\n*** End Patch";
    let args = serde_json::json!({"input": patch}).to_string();
    let out = kodik().args(["call", "--workspace", ws, "apply_patch", &args]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "z\n");
}

/// R4, G15: each batch line is one message of the model driving it: a read on a later line is
/// never "already read in this message", and since the driver cannot say it compacted, the
/// repeat right after the "unchanged" hint shows the file again. Before, every read after the
/// first answered "unchanged since you read them earlier in this message" until the file
/// changed.
#[test]
fn r4_g15_batch_lines_are_messages_and_the_repeat_after_the_hint_shows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let read = r#"{"id":"r","name":"read_file","args":{"path":"a.txt"}}"#;
    let lines = common::run_batch(kodik(), dir.path().to_str().unwrap(), &[read, read, read].join("\n"));
    let texts: Vec<&str> = lines.iter().map(|l| l["content"][0]["text"].as_str().unwrap()).collect();
    assert_eq!(texts[0], "1\u{2192}hello\n");
    assert!(!texts[1].contains("in this message"), "another line is another message: {texts:?}");
    assert!(texts[1].contains("send this exact call once more"), "{texts:?}");
    assert_eq!(texts[2], texts[0], "the repeat after the hint shows the file: {texts:?}");
}

/// G2, G4, P2: in one turn, a shell command, grep and glob placed after an edit see the edit, a
/// heredoc patch through the shell and a later edit of the same file both land, and searches
/// placed before a delete still see the file. Before, none of them declared what they touch,
/// so they raced the edit (an edit lost, "No matches" for text the turn had just written).
#[test]
fn g2_g4_shell_and_searches_keep_their_place_among_a_turns_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    // Big enough that an edit takes longer than starting `tail` (2.3 MB).
    let body: String = (0..150_000).map(|i| format!("x{i} = {i}\n")).collect();
    std::fs::write(dir.path().join("big.py"), format!("TOP = 1\n{body}MARK = \"old\"\n")).unwrap();
    std::fs::write(dir.path().join("keep.txt"), "NEEDLE\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "NEEDLE\n").unwrap();
    let read = r#"{"id":"r","name":"read_file","args":{"path":"big.py","ranges":[{"start_line":1,"end_line":1}]}}"#;
    let edit_then_look = serde_json::json!([
        {"id": "e", "name": "edit_file", "args": {"path": "big.py", "edits": [{"old_string": "MARK = \"old\"", "new_string": "MARK = \"new\""}]}},
        {"id": "s", "name": "shell", "args": {"command": "tail -1 big.py"}},
        {"id": "g", "name": "grep", "args": {"pattern": "MARK = .new"}},
    ]);
    let patch = "*** Begin Patch\n*** Update File: big.py\n@@\n-TOP = 1\n+TOP = 2\n*** End Patch";
    let shell_patch_then_edit = serde_json::json!([
        {"id": "p", "name": "shell", "args": {"command": format!("apply_patch <<'EOF'\n{patch}\nEOF")}},
        {"id": "e2", "name": "edit_file", "args": {"path": "big.py", "edits": [{"old_string": "MARK = \"new\"", "new_string": "MARK = \"newer\""}]}},
    ]);
    let look_then_delete = serde_json::json!([
        {"id": "gl", "name": "glob", "args": {"pattern": "*.txt"}},
        {"id": "g2", "name": "grep", "args": {"pattern": "NEEDLE", "output_mode": "files_with_matches"}},
        {"id": "d", "name": "delete_file", "args": {"path": "keep.txt"}},
    ]);
    // P2: a patch through the shell is ordered like the apply_patch call it is: a read of the file
    // it adds comes after it.
    let add = "*** Begin Patch\n*** Add File: gen/new.txt\n+generated\n*** End Patch";
    let shell_patch_then_read = serde_json::json!([
        {"id": "p2", "name": "shell", "args": {"command": format!("bash -lc \"apply_patch <<'EOF'\n{add}\nEOF\n\"")}},
        {"id": "r2", "name": "read_file", "args": {"path": "gen/new.txt"}},
    ]);
    let input = [
        read.to_string(),
        edit_then_look.to_string(),
        shell_patch_then_edit.to_string(),
        look_then_delete.to_string(),
        shell_patch_then_read.to_string(),
    ]
    .join("\n");
    let lines = common::run_batch(kodik(), ws, &input);
    let text = |id: &str| {
        let line = lines.iter().find(|l| l["id"] == id).unwrap_or_else(|| panic!("no result {id}: {lines:#?}"));
        assert_eq!(line["status"], "success", "{line}");
        line["content"][0]["text"].as_str().unwrap().to_owned()
    };
    assert!(text("s").contains("MARK = \"new\""), "the shell ran before the edit: {}", text("s"));
    assert!(text("g").contains("big.py:150002:"), "grep ran before the edit: {}", text("g"));
    text("p");
    text("e2");
    let after = std::fs::read_to_string(dir.path().join("big.py")).unwrap();
    assert!(after.starts_with("TOP = 2\n") && after.ends_with("MARK = \"newer\"\n"), "a change was lost");
    assert!(text("gl").contains("keep.txt"), "glob ran after the delete: {}", text("gl"));
    assert!(text("g2").contains("keep.txt"), "grep ran after the delete: {}", text("g2"));
    assert!(!dir.path().join("keep.txt").exists());
    text("p2");
    assert!(text("r2").contains("1→generated"), "the read overtook the patch: {}", text("r2"));
}

#[test]
fn k1_codemode_runs_through_call_and_the_worker_subcommand_refuses_to_run_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let ws = dir.path().to_str().unwrap();
    let code = r#"{"code":"const t = await tools.read_file({path: 'a.txt'});\ntext('lines: ' + lines(t).length);\nreturn grep(t, 'bet')"}"#;
    let out = kodik().args(["call", "--workspace", ws, "codemode", code]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Tool calls: 1 — read_file ×1"), "{text}");
    assert!(text.contains("beta"), "{text}");
    // The worker subcommand is the other end of that run; by hand it refuses at once.
    let alone = kodik().arg("codemode-worker").stdin(Stdio::null()).output().unwrap();
    assert_eq!(alone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&alone.stderr).contains("started by the codemode tool"));
}

/// G9, G20: `--spool-dir` decides where a full output that does not fit the result is saved.
#[test]
fn g9_g20_spool_dir_flag_decides_where_full_outputs_go() {
    let ws = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let out = kodik()
        .args(["--spool-dir", spool.path().to_str().unwrap(), "call", "--workspace", ws.path().to_str().unwrap()])
        .args(["shell", r#"{"command":"seq 1 200000"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let full = std::path::PathBuf::from(result["full_output"].as_str().expect("the output was saved in full"));
    assert!(full.starts_with(spool.path()), "{} is not under {}", full.display(), spool.path().display());
    assert!(std::fs::read_to_string(full).unwrap().ends_with("200000\n"));
}

/// GR3: `--files-encoding` is the project's `files.encoding`: a folder search finds Cyrillic in
/// a Windows-1251 file with it and not without it; an unknown label is a usage error.
#[test]
fn gr3_files_encoding_flag_sets_the_projects_encoding_for_folder_searches() {
    let ws = tempfile::tempdir().unwrap();
    // "Привет" in Windows-1251.
    std::fs::write(ws.path().join("a.txt"), b"line1\n\xcf\xf0\xe8\xe2\xe5\xf2 world\n").unwrap();
    let grep = |flags: &[&str]| {
        let out = kodik()
            .args(flags)
            .args(["call", "--workspace", ws.path().to_str().unwrap(), "grep", r#"{"pattern":"Привет"}"#])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, without, _) = grep(&[]);
    assert_eq!(code, Some(0));
    assert!(without.contains("No matches"), "{without}");
    let (code, with, _) = grep(&["--files-encoding", "windows-1251"]);
    assert_eq!(code, Some(0));
    assert!(with.contains("a.txt:2:Привет world"), "{with}");
    let (code, _, err) = grep(&["--files-encoding", "klingon"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not an encoding label") && err.contains("windows-1251"), "{err}");
}

/// A1, A2: the conversation tools through `kodik call` and `kodik batch`: a todo list kept for
/// the lines of one batch, an invalid merge refused with the list untouched, and a memory note
/// written as a Markdown file in the workspace.
#[test]
fn a1_a2_todo_write_and_memory_through_call_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let out = kodik()
        .args(["call", "--workspace", ws, "todo_write"])
        .arg(r#"{"todos":[{"id":"1","title":"read the code","status":"in_progress"}]}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("read the code"));

    let input = [
        r#"{"id":"t1","name":"todo_write","args":{"todos":[{"id":"1","title":"fix the bug"},{"id":"2","title":"test it"}]}}"#,
        r#"{"id":"t2","name":"todo_write","args":{"merge":true,"todos":[{"id":"1","status":"completed"}]}}"#,
        r#"{"id":"t3","name":"todo_write","args":{"merge":true,"todos":[{"id":"9","status":"completed"}]}}"#,
        r#"{"id":"m1","name":"memory","args":{"action":"save","content":"Build: run make first"}}"#,
    ]
    .join("\n");
    let lines = common::run_batch(kodik(), ws, &input);
    let text = |i: usize| lines[i]["content"][0]["text"].as_str().unwrap().to_string();
    let statuses: Vec<&str> = lines.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["success", "success", "error", "success"], "{lines:#?}");
    assert!(text(1).contains("fix the bug") && text(1).contains("test it"), "{}", text(1));
    // The refused merge names the unknown id and shows the list as it was.
    assert!(text(2).contains('9') && text(2).contains("fix the bug"), "{}", text(2));
    let notes: Vec<_> = std::fs::read_dir(dir.path().join(".kodik/memory"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(notes.iter().any(|n| n.contains("run make first")), "{notes:?}");
}

/// `kodik schema | head`: a reader that stops early is not a crash; before, the broken pipe
/// made `println!` panic and print a backtrace.
#[test]
fn schema_whose_reader_stopped_early_exits_quietly() {
    let mut child = kodik().args(["schema"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// `kodik call … | head`: a reader that stops early is not a crash of the call.
#[test]
fn call_whose_reader_stopped_early_exits_cleanly() {
    let ws = tempfile::tempdir().unwrap();
    let mut child = kodik()
        .args(["call", "--workspace"])
        .arg(ws.path())
        .args(["shell", r#"{"command":"sleep 0.3; echo done"}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the result is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
