//! Code mode over the real file tools (kodik-edit, kodik-search) on real files: what a script
//! does to the workspace and what it reads back. Every test is bounded by a timeout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use kodik_codemode::{CodeModeConfig, CodeModeTool};
use kodik_core::{Tool, ToolContext, ToolOutput, ToolRegistry, ToolStatus, Workspace};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

struct Setup {
    registry: ToolRegistry,
    tool: CodeModeTool,
    cx: ToolContext,
    dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let mut registry = ToolRegistry::new();
    kodik_search::SearchToolset::new().register(&mut registry);
    kodik_edit::EditToolset::new().register(&mut registry);
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let tool = CodeModeTool::new(CodeModeConfig::default().timeout(Duration::from_secs(30)), registry.clone());
    Setup { registry, tool, cx: ToolContext::new(workspace), dir }
}

impl Setup {
    fn tool_registry(&self) -> ToolRegistry {
        self.registry.clone()
    }
}

async fn run(s: &Setup, code: &str) -> ToolOutput {
    tokio::time::timeout(LIMIT, s.tool.call(json!({ "code": code }), &s.cx)).await.expect("the script hung")
}

fn output_section(out: &ToolOutput) -> String {
    let t = out.text_content();
    t.split_once("\nOutput:\n").map(|(_, o)| o.trim_end().to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k3_import_of_a_file_on_disk_is_refused_and_reads_nothing() {
    let s = setup();
    let outside = tempfile::tempdir().unwrap();
    let json_file = outside.path().join("creds.json");
    std::fs::write(&json_file, r#"{"aws_key":"AKIA-OUTSIDE-WORKSPACE"}"#).unwrap();
    let module = outside.path().join("evil.mjs");
    std::fs::write(&module, "export const secret = 'SECRET-FROM-DISK';").unwrap();
    // Also a path relative to the process's working directory, where boa's default loader looks.
    let cwd_file = std::env::current_dir().unwrap().join("Cargo.toml");
    for (spec, attrs) in [
        (json_file.display().to_string(), ", {with: {type: 'json'}}"),
        (module.display().to_string(), ""),
        ("./Cargo.toml".to_string(), ""),
        (cwd_file.display().to_string(), ""),
        ("fs".to_string(), ""),
    ] {
        let code = format!(
            "try {{ const m = await import({spec:?}{attrs}); return 'LOADED ' + JSON.stringify(m.default ?? m.secret) }} \
             catch (e) {{ return 'refused: ' + e.message }}"
        );
        let out = run(&s, &code).await;
        let shown = output_section(&out);
        assert!(shown.starts_with("refused: modules are not available in code mode"), "{spec}: {shown}");
        assert!(shown.contains("tools.read_file"), "the message names the way that works: {shown}");
        assert!(!shown.contains("AKIA") && !shown.contains("SECRET"), "{shown}");
    }
    // Uncaught, it is a failed script, never a success holding the file's data.
    let code = format!("const m = await import({:?}); return m.secret", module.display().to_string());
    let out = run(&s, &code).await;
    assert_ne!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("modules are not available"), "{}", out.text_content());
    assert!(!out.text_content().contains("SECRET-FROM-DISK"));
    drop(s.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_g15_r4_nested_reads_and_greps_get_the_content_not_already_read_notes() {
    let s = setup();
    std::fs::write(s.dir.path().join("b.txt"), "line1\nline2\n").unwrap();
    // The model reads the file directly first: its read must not turn the script's into a note.
    let direct = kodik_core::dispatch(
        &s.tool_registry(),
        kodik_core::ToolCall::new("d1", "read_file", json!({"path": "b.txt"})),
        &s.cx,
    )
    .await;
    assert!(direct.text_content().contains("line2"), "{}", direct.text_content());
    // Two scripts in a row: the first returns only a length, the second the text.
    let first = run(&s, "const t = await tools.read_file({path:'b.txt'}); return String(t.length)").await;
    assert_eq!(first.status, ToolStatus::Success, "{}", first.text_content());
    let second = run(&s, "return await tools.read_file({path:'b.txt'})").await;
    let shown = output_section(&second);
    assert!(shown.contains("line1") && shown.contains("line2"), "{shown}");
    // In parallel inside one script, and a loop over the same grep.
    let out = run(
        &s,
        "const [a, b] = await Promise.all([tools.read_file({path:'b.txt'}), tools.read_file({path:'b.txt'})]);\n\
         const g = [];\n\
         for (let i = 0; i < 3; i++) g.push(await tools.grep({pattern: 'line', path: 'b.txt'}));\n\
         return JSON.stringify([a, b, ...g])",
    )
    .await;
    let all: Vec<String> =
        serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    for (i, text) in all.iter().enumerate() {
        assert!(!text.contains("Unchanged since") && !text.contains("unchanged since"), "result {i}: {text}");
        assert!(text.contains("line2"), "result {i}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_e5_parallel_edits_of_one_file_from_a_script_all_apply_in_order() {
    let s = setup();
    let path = s.dir.path().join("multi.txt");
    std::fs::write(&path, (0..20).map(|i| format!("item{i} = old\n")).collect::<String>()).unwrap();
    let code = "await tools.read_file({path: 'multi.txt'});\n\
        const ps = [];\n\
        for (let i = 0; i < 20; i++) ps.push(tools.edit_file({path: 'multi.txt', edits: [{old_string: `item${i} = old`, new_string: `item${i} = NEW`}]}));\n\
        const r = await Promise.allSettled(ps);\n\
        return JSON.stringify(r.map(x => x.status + ': ' + (x.value || x.reason.message)))";
    let out = run(&s, code).await;
    let results: Vec<String> =
        serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    let applied = results.iter().filter(|r| r.starts_with("fulfilled")).count();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches("NEW").count(), applied, "every edit reported applied is in the file: {results:?}\n{text}");
    assert_eq!(applied, 20, "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_parallel_creates_of_one_file_from_a_script_create_it_once_in_call_order() {
    let s = setup();
    let code = "const r = await Promise.allSettled([1,2,3,4,5,6].map(i => tools.create_file({path: 'race.txt', content: 'writer ' + i})));\n\
        return JSON.stringify(r.map(x => x.status))";
    let out = run(&s, code).await;
    let results: Vec<String> =
        serde_json::from_str(&output_section(&out)).unwrap_or_else(|_| panic!("{}", out.text_content()));
    assert_eq!(results[0], "fulfilled", "{results:?}");
    assert!(results[1..].iter().all(|r| r == "rejected"), "the file exists for every later create: {results:?}");
    assert_eq!(std::fs::read_to_string(s.dir.path().join("race.txt")).unwrap(), "writer 1");
}

/// The file tools and `codemode` over them, as a model turn's scheduler sees them.
fn scheduler(s: &Setup) -> kodik_scheduler::Scheduler {
    let mut registry = s.tool_registry();
    registry.register(CodeModeTool::new(CodeModeConfig::default().timeout(Duration::from_secs(30)), s.tool_registry()));
    kodik_scheduler::Scheduler::new(registry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn g2_g4_a_read_after_a_script_in_one_turn_sees_what_the_script_wrote() {
    let s = setup();
    let sched = scheduler(&s);
    // The script takes a while before it writes: a read that overtook it would find no file.
    let calls = vec![
        kodik_core::ToolCall::new(
            "b",
            "codemode",
            json!({"code": "await sleep(300); await tools.create_file({path: \"order2.txt\", content: \"from script\"}); \
                            const name = ['order', '3.txt'].join(''); await tools.create_file({path: name, content: 'x'}); return 1"}),
        ),
        kodik_core::ToolCall::new("c", "read_file", json!({"path": "order2.txt"})),
        // A path the script computes, and a search that names no file: they wait for it too.
        kodik_core::ToolCall::new("e", "glob", json!({"pattern": "**/order3.txt"})),
        kodik_core::ToolCall::new(
            "d",
            "edit_file",
            json!({"path": "order2.txt", "edits": [{"old_string": "from script", "new_string": "edited after"}]}),
        ),
    ];
    let outs = tokio::time::timeout(LIMIT, sched.run(calls, &s.cx)).await.expect("the turn hung");
    assert_eq!(outs[0].status, ToolStatus::Success, "{}", outs[0].text_content());
    assert!(outs[1].text_content().contains("from script"), "{}", outs[1].text_content());
    assert!(outs[2].text_content().contains("order3.txt"), "{}", outs[2].text_content());
    assert_eq!(outs[3].status, ToolStatus::Success, "{}", outs[3].text_content());
    assert_eq!(std::fs::read_to_string(s.dir.path().join("order2.txt")).unwrap(), "edited after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_k11_calls_a_script_did_not_await_finish_and_are_reported_as_they_ended() {
    let s = setup();
    std::fs::create_dir(s.dir.path().join("many")).unwrap();
    for i in 0..16 {
        std::fs::write(s.dir.path().join(format!("many/f{i}.txt")), "v=old\n").unwrap();
    }
    let code = "for (let i = 0; i < 16; i++) await tools.read_file({path: `many/f${i}.txt`});\n\
                for (let i = 0; i < 16; i++) tools.edit_file({path: `many/f${i}.txt`, edits: [{old_string: 'v=old', new_string: 'v=new'}]});\n\
                return 'started'";
    let out = run(&s, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("still running when the script returned (a missing `await`?)"), "{text}");
    let calls = out.meta["codemode"]["calls"].as_array().unwrap();
    for c in &calls[16..] {
        let path = c["arguments"]["path"].as_str().unwrap();
        let now = std::fs::read_to_string(s.dir.path().join(path)).unwrap();
        assert_eq!(now, "v=new\n", "{path}");
        assert_eq!(c["status"], "success", "the status says what happened to {path}: {c}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_k11_call_records_preview_long_arguments_so_the_result_stays_small() {
    let s = setup();
    let code = "const body = 'x'.repeat(150000);\n\
                for (let i = 0; i < 10; i++) await tools.create_file({path: `gen/f${i}.txt`, content: body});\n\
                return 'wrote 10 files'";
    let out = run(&s, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    for i in 0..10 {
        assert_eq!(std::fs::read_to_string(s.dir.path().join(format!("gen/f{i}.txt"))).unwrap().len(), 150_000);
    }
    let meta = out.meta.to_string();
    assert!(meta.len() < 20_000, "metadata of {} bytes", meta.len());
    let content = out.meta["codemode"]["calls"][0]["arguments"]["content"].as_str().unwrap();
    assert!(content.ends_with("… (150000 chars)"), "{}", &content[..content.len().min(300)]);
    assert_eq!(out.meta["codemode"]["calls"][0]["arguments"]["path"], "gen/f0.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_a_lone_surrogate_is_written_as_the_replacement_character() {
    let s = setup();
    let code = "const s = 'Hi \u{1F600}\u{1F600}';\n\
                await tools.create_file({path: 'emoji.txt', content: s.slice(0, 4) + '|end'});\n\
                return s.slice(0, 4) + '|ret'";
    let out = run(&s, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(std::fs::read_to_string(s.dir.path().join("emoji.txt")).unwrap(), "Hi \u{FFFD}|end");
    assert_eq!(output_section(&out), "Hi \u{FFFD}|ret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_k11_a_returned_create_file_promise_writes_once_and_is_reported_as_done() {
    let s = setup();
    let out = run(&s, "return tools.create_file({path: 'ret1.txt', content: 'made'})").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(std::fs::read_to_string(s.dir.path().join("ret1.txt")).unwrap(), "made");
    assert_eq!(out.meta["codemode"]["calls"][0]["status"], "success", "{}", out.meta);
    std::fs::write(s.dir.path().join("p3.txt"), "content 3\n").unwrap();
    let out = run(&s, "return tools.read_file({path: 'p3.txt'})").await;
    assert!(output_section(&out).contains("content 3"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k1_k9_a_json_file_is_parsed_the_way_the_require_error_says() {
    let s = setup();
    std::fs::write(s.dir.path().join("pkg.json"), "{\"a\": 1,\n\n \"b\": [2, 3], \"c\": \"x→y\"}\n").unwrap();
    // The advice given for `require` must work as written.
    let out = run(&s, "const cfg = require('./pkg.json'); return cfg.b").await;
    let advice = out.text_content();
    let example = "JSON.parse(fileText(await tools.read_file({path: 'package.json'})))";
    assert!(advice.contains(example), "{advice}");
    let code = format!("const cfg = {}; return [cfg.b, cfg.c]", example.replace("package.json", "pkg.json"));
    let out = run(&s, &code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(serde_json::from_str::<serde_json::Value>(&output_section(&out)).unwrap(), json!([[2, 3], "x→y"]));
    // The file's exact text, its empty line included.
    let out = run(&s, "return JSON.stringify(fileText(await tools.read_file({path: 'pkg.json'})))").await;
    assert_eq!(
        serde_json::from_str::<String>(&output_section(&out)).unwrap(),
        std::fs::read_to_string(s.dir.path().join("pkg.json")).unwrap()
    );
    assert!(s.tool.description().contains("fileText(out)"), "the helper is listed for the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k8_k11_call_records_preview_long_lists_so_the_result_stays_small() {
    let s = setup();
    let path = s.dir.path().join("many.txt");
    std::fs::write(&path, (0..3000).map(|i| format!("item{i} = old\n")).collect::<String>()).unwrap();
    let code = "await tools.read_file({path: 'many.txt'});\n\
        const edits = [];\n\
        for (let i = 0; i < 3000; i++) edits.push({old_string: `item${i} = old`, new_string: `item${i} = new`});\n\
        await tools.edit_file({path: 'many.txt', edits});\n\
        return 'edited'";
    let out = run(&s, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(std::fs::read_to_string(&path).unwrap().matches("= new").count(), 3000);
    let meta = out.meta.to_string();
    assert!(meta.len() < 20_000, "metadata of {} bytes", meta.len());
    let edits = out.meta["codemode"]["calls"][1]["arguments"]["edits"].as_array().unwrap();
    assert_eq!(edits.len(), 11, "{edits:?}");
    assert_eq!(edits[0]["old_string"], "item0 = old");
    assert_eq!(edits[10], "… 2990 more items (3000 in all)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k10_k11_an_edit_in_flight_when_the_script_throws_is_recorded_as_applied() {
    let s = setup();
    let path = s.dir.path().join("ue.txt");
    std::fs::write(&path, "v=old\n").unwrap();
    let code = "await tools.read_file({path: 'ue.txt'});\n\
                tools.edit_file({path: 'ue.txt', edits: [{old_string: 'v=old', new_string: 'v=new'}]});\n\
                throw new Error('oops')";
    let out = run(&s, code).await;
    assert_eq!(out.meta["codemode"]["error_kind"], "ExecutionFailure", "{}", out.text_content());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "v=new\n");
    assert_eq!(out.meta["codemode"]["calls"][1]["status"], "success", "{}", out.meta);
    assert!(
        out.text_content().contains("1 finished (their changes are made): edit_file (ue.txt)"),
        "{}",
        out.text_content()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k11_a_script_that_worked_on_cut_outputs_is_told_so() {
    let s = setup();
    let log: String = (0..5000)
        .map(|i| if i % 10 == 0 { format!("ERROR failed {i}\n") } else { format!("INFO good {i}\n") })
        .collect();
    std::fs::write(s.dir.path().join("app.log"), log).unwrap();
    std::fs::write(s.dir.path().join("small.txt"), "ERROR one\n").unwrap();
    let code = "const t = await tools.read_file({path: 'app.log'});\n\
                const g = await tools.grep({pattern: 'ERROR', path: 'app.log'});\n\
                const small = await tools.read_file({path: 'small.txt'});\n\
                return grep(t, 'ERROR').length";
    let out = run(&s, code).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let text = out.text_content();
    assert!(
        text.contains(
            "2 call output(s) the script got were cut at the tool's limit: read_file (app.log), grep (app.log)."
        ),
        "{text}"
    );
    let calls = out.meta["codemode"]["calls"].as_array().unwrap();
    assert_eq!(calls[0]["truncated"], true, "{calls:?}");
    assert_eq!(calls[1]["truncated"], true, "{calls:?}");
    assert!(calls[2].get("truncated").is_none(), "{calls:?}");
    // A script whose outputs were whole gets no such note.
    let out = run(&s, "return await tools.read_file({path: 'small.txt'})").await;
    assert!(!out.text_content().contains("were cut"), "{}", out.text_content());
}
