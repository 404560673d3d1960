//! The assembled tool set: crates working together through the facade.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use kodik_tools::Toolbox;
use kodik_tools::core::{ToolCall, ToolOutput, ToolStatus};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

async fn one(tb: &Toolbox, name: &str, args: Value) -> ToolOutput {
    tb.call(&call("c", name, args)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_p3_an_apply_patch_heredoc_in_the_shell_goes_through_the_edit_engine_and_can_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "old line\nkeep\n").unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let cmd = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n@@\n-old line\n+new line\n keep\n*** Add File: b.txt\n+born\n*** End Patch\nEOF";
    let out = one(&tb, "shell", json!({"command": cmd})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "new line\nkeep\n");
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "born\n");
    let report = tb.checkpoints().undo_all();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "old line\nkeep\n");
    assert!(!dir.path().join("b.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_e5_edits_to_one_file_through_five_spellings_in_one_turn_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("dir")).unwrap();
    std::fs::write(root.join("a.txt"), "v0\n").unwrap();
    std::os::unix::fs::symlink(root.join("a.txt"), root.join("link.txt")).unwrap();
    let tb = Toolbox::builder().workspace(&root).build().unwrap();
    assert!(one(&tb, "read_file", json!({"path": "a.txt"})).await.is_success());
    let abs = root.join("a.txt").display().to_string();
    let spellings = ["a.txt", "./a.txt", "dir/../a.txt", abs.as_str(), "link.txt"];
    let calls: Vec<ToolCall> = spellings
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let edits = json!([{"old_string": format!("v{i}"), "new_string": format!("v{}", i + 1)}]);
            call(&format!("e{i}"), "edit_file", json!({"path": p, "edits": edits}))
        })
        .collect();
    let outs = tb.run_turn(&calls).await;
    for o in &outs {
        assert_eq!(o.status, ToolStatus::Success, "{}", o.text_content());
    }
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "v5\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g16_an_ignored_file_is_out_of_reach_of_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".kodikignore"), "secret.env\n").unwrap();
    std::fs::write(dir.path().join("secret.env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(dir.path().join("open.txt"), "TOKEN=public\n").unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();

    for (name, args) in [
        ("read_file", json!({"path": "secret.env"})),
        ("edit_file", json!({"path": "secret.env", "edits": [{"old_string": "TOKEN", "new_string": "X"}]})),
        ("delete_file", json!({"path": "secret.env"})),
        ("create_file", json!({"path": "secret.env", "content": "x"})),
        ("shell", json!({"command": "cat secret.env"})),
    ] {
        let out = one(&tb, name, args).await;
        assert_ne!(out.status, ToolStatus::Success, "{name}: {}", out.text_content());
        assert!(!out.text_content().contains("hunter2"), "{name}");
        assert!(out.text_content().contains(".kodikignore"), "{name}: {}", out.text_content());
    }
    let grep = one(&tb, "grep", json!({"pattern": "TOKEN"})).await;
    assert!(grep.text_content().contains("open.txt"), "{}", grep.text_content());
    assert!(!grep.text_content().contains("hunter2") && !grep.text_content().contains("secret.env"));
    let glob = one(&tb, "glob", json!({"pattern": "*"})).await;
    assert!(!glob.text_content().contains("secret.env"), "{}", glob.text_content());
    assert_eq!(std::fs::read_to_string(dir.path().join("secret.env")).unwrap(), "TOKEN=hunter2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_codemode_calls_the_assembled_tools() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let code = "const r = await tools.grep({pattern: 'beta'}); return r.includes('notes.txt') ? 'found' : r;";
    let out = one(&tb, "codemode", json!({"code": code})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("found"), "{}", out.text_content());
}

#[test]
fn every_enabled_tool_comes_from_kodik_schema_so_advertised_schemas_match() {
    let dir = tempfile::tempdir().unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    let all = kodik_tools::schema::all();
    for spec in tb.specs() {
        let published =
            all.iter().find(|s| s.name == spec.name).unwrap_or_else(|| panic!("{} not in kodik-schema", spec.name));
        assert_eq!(published.input_schema, spec.input_schema, "{}", spec.name);
    }
    let names: Vec<String> = tb.specs().into_iter().map(|s| s.name).collect();
    for t in ["read_file", "grep", "glob", "edit_file", "apply_patch", "shell", "kill_terminal", "codemode"] {
        assert!(names.iter().any(|n| n == t), "{t} missing from {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_a_tool_exposed_to_scripts_only_is_hidden_from_the_model_but_callable_from_codemode() {
    use kodik_tools::codemode::{CodeModeConfig, Exposure};
    use kodik_tools::harness::{Availability, Mode};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.txt"), "hello\n").unwrap();
    let config = CodeModeConfig::default().expose("glob", Exposure::Codemode);
    let tb = Toolbox::builder().workspace(dir.path()).codemode(config).build().unwrap();
    let plan = tb.plan(Mode::Ask, "qwen3-coder");
    assert_eq!(plan.availability()["glob"], Availability::NotOffered);
    assert_eq!(plan.availability()["grep"], Availability::Immediate);
    let out = one(&tb, "codemode", json!({"code": "return await tools.glob({pattern: '*.txt'})"})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("x.txt"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g15_the_toolbox_blocks_a_third_identical_failing_edit_and_lets_a_corrected_one_through() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let tb = Toolbox::builder().workspace(dir.path()).build().unwrap();
    assert!(one(&tb, "read_file", json!({"path": "a.txt"})).await.is_success());
    let bad = json!({"path": "a.txt", "edits": [{"old_string": "gamma", "new_string": "delta"}]});
    assert_eq!(one(&tb, "edit_file", bad.clone()).await.status, ToolStatus::Error);
    assert_eq!(one(&tb, "edit_file", bad.clone()).await.status, ToolStatus::Error);
    let third = one(&tb, "edit_file", bad).await;
    assert_eq!(third.status, ToolStatus::Denied, "{}", third.text_content());
    let fixed = json!({"path": "a.txt", "edits": [{"old_string": "alpha", "new_string": "delta"}]});
    assert!(one(&tb, "edit_file", fixed).await.is_success());
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "delta\n");
}

/// W5: web_fetch's own auto-approve switch reaches the toolbox: switched off, a fetch the
/// session would have run without asking is denied and never connects; unset, it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w5_the_web_auto_approve_switch_applies_to_toolbox_calls() {
    use kodik_tools::web::{AutoApprove, WebToolset};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
    let dir = tempfile::tempdir().unwrap();
    let off = AutoApprove { web_search: None, web_fetch: Some(false) };
    let tb =
        Toolbox::builder().workspace(dir.path()).web(WebToolset::default().with_auto_approve(off)).build().unwrap();
    let out = one(&tb, "web_fetch", json!({"url": url})).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
    assert!(listener.accept().is_err(), "a denied fetch connected");

    listener.set_nonblocking(false).unwrap();
    // Serves every connection (robots.txt is asked for first): 404 for robots.txt, the page otherwise.
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut s in listener.incoming().flatten() {
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let (status, body) = if seen.starts_with(b"GET /robots.txt") {
                ("404 Not Found", "")
            } else {
                ("200 OK", "fetched through the toolbox")
            };
            let head = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).and_then(|()| s.write_all(body.as_bytes()));
        }
    });
    let tb = Toolbox::builder().workspace(dir.path()).web(WebToolset::default()).build().unwrap();
    let out = one(&tb, "web_fetch", json!({"url": url})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("fetched through the toolbox"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g10_g11_k6_scripts_reach_only_the_tools_the_request_offers() {
    use kodik_tools::codemode::{CodeModeConfig, Exposure};
    use kodik_tools::harness::{Availability, Mode};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.txt"), "hello\n").unwrap();
    let config = CodeModeConfig::default().expose("glob", Exposure::Codemode);
    let tb = Toolbox::builder().workspace(dir.path()).codemode(config).build().unwrap();
    let plan = tb.plan(Mode::Code, "mcp-client");
    for off in ["generate_plan", "apply_patch"] {
        assert_ne!(plan.availability()[off], Availability::Immediate, "{off} is offered in Code mode");
    }
    let scheduler = kodik_tools::scheduler::Scheduler::new(tb.registry_for(&plan));
    let script = |code: &str| call("s", "codemode", json!({ "code": code }));
    let outs = scheduler
        .run(
            [
                script("return await tools.generate_plan({title: 'T', summary: 'S', steps: [{title: 'a', details: 'b'}]})"),
                script("return await tools.apply_patch({input: '*** Begin Patch\\n*** Add File: patched.txt\\n+hi\\n*** End Patch'})"),
                script("return (await tools.grep({pattern: 'hello'})) + (await tools.glob({pattern: '*.txt'}))"),
                script("return ALL_TOOLS.map(t => t.name).join(',')"),
            ],
            tb.context(),
        )
        .await;
    // generate_plan is for Plan mode only: out of the scripts' reach in Code mode.
    assert_eq!(outs[0].meta["codemode"]["error_kind"], "UnknownTool", "{}", outs[0].text_content());
    // Said as it is: the tool exists but not for this request (not "no tool", nor a suggestion).
    assert!(
        outs[0].text_content().contains("`generate_plan` is not available to this request"),
        "{}",
        outs[0].text_content()
    );
    assert!(!dir.path().join(".kodik/plans").exists());
    // apply_patch is only respelled for this model (G10: it edits with the three file tools),
    // the file changes themselves are offered: a script may still patch.
    assert_eq!(outs[1].status, ToolStatus::Success, "{}", outs[1].text_content());
    assert!(dir.path().join("patched.txt").exists());
    assert_eq!(outs[2].status, ToolStatus::Success, "{}", outs[2].text_content());
    assert!(outs[2].text_content().contains("x.txt"), "a script-only tool stays callable: {}", outs[2].text_content());
    let listed = outs[3].text_content();
    assert!(listed.contains("grep") && !listed.contains("generate_plan"), "{listed}");
}
