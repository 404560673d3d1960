//! Arguments as a model writes them: the seeds' examples parse, unknown fields are refused
//! before anything runs (S8's rule, for every tool), and the cross-field checks give errors
//! that name the field.

use kodik_core::{ToolError, parse_args};
use kodik_schema::ToolArgs;
use kodik_schema::agent::*;
use kodik_schema::browser::*;
use kodik_schema::codemode::CodemodeArgs;
use kodik_schema::harness::{CallToolArgs, ToolSearchArgs};
use kodik_schema::lsp::*;
use kodik_schema::web::{WebFetchArgs, WebSearchArgs};
use serde_json::{Value, json};

fn parse<A: ToolArgs>(args: Value) -> A {
    match parse_args::<A>(A::NAME, &args) {
        Ok(a) => a,
        Err(e) => panic!("{}: {args} did not parse: {e}", A::NAME),
    }
}

fn parse_err<A: ToolArgs + std::fmt::Debug>(args: Value) -> ToolError {
    match parse_args::<A>(A::NAME, &args) {
        Ok(a) => panic!("{}: {args} parsed as {a:?}", A::NAME),
        Err(e) => e,
    }
}

/// The field an `InvalidInput` names, and its message.
fn invalid(err: ToolError) -> (Option<String>, String) {
    match err {
        ToolError::InvalidInput { field, message, .. } => (field, message),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// `args` is refused as unknown, and the error names the unknown field.
fn assert_unknown_refused<A: ToolArgs + std::fmt::Debug>(args: Value, field: &str) {
    let (_, message) = invalid(parse_err::<A>(args));
    assert!(message.contains("unknown field") && message.contains(field), "{}: {message}", A::NAME);
}

// --- samples from the seeds parse -------------------------------------------------------------

#[test]
fn l1_read_lints_takes_files_or_nothing_for_the_workspace() {
    let a: ReadLintsArgs = parse(json!({"paths": ["src/server.ts", "src/lib"]}));
    assert_eq!(a.paths, ["src/server.ts", "src/lib"]);
    let whole: ReadLintsArgs = parse(json!({}));
    assert!(whole.paths.is_empty());
    let null: ReadLintsArgs = parse(Value::Null);
    assert!(null.paths.is_empty());
}

#[test]
fn l3_lsp_names_a_symbol_by_file_line_and_identifier() {
    let a: LspArgs =
        parse(json!({"operation": "references", "path": "src/server.ts", "line": 12, "symbol": "parseConfig"}));
    assert_eq!(a.operation, LspOperation::References);
    assert_eq!((a.line, a.symbol.as_deref()), (Some(12), Some("parseConfig")));
    a.check().unwrap();

    let second: LspArgs =
        parse(json!({"operation": "definition", "path": "a.ts", "line": 3, "symbol": "x", "occurrence": 2}));
    second.check().unwrap();
    let by_column: LspArgs = parse(json!({"operation": "hover", "path": "a.ts", "line": 3, "character": 17}));
    by_column.check().unwrap();
    let outline: LspArgs = parse(json!({"operation": "document_symbols", "path": "a.ts"}));
    outline.check().unwrap();
    let ws: LspArgs = parse(json!({"operation": "workspace_symbols", "query": "Config"}));
    ws.check().unwrap();
    for op in ["type_definition", "implementation", "incoming_calls", "outgoing_calls"] {
        let a: LspArgs = parse(json!({"operation": op, "path": "a.rs", "line": 1, "symbol": "f"}));
        assert!(a.operation.needs_position());
        assert_eq!(a.operation.as_str(), op);
        a.check().unwrap();
    }
}

#[test]
fn l7_codebase_search_takes_a_question() {
    let a: CodebaseSearchArgs = parse(json!({"query": "where are expired sessions cleaned up?", "limit": 5}));
    assert_eq!(a.limit, Some(5));
    assert_eq!(a.path, None);
}

#[test]
fn w3_web_fetch_takes_url_and_query() {
    let a: WebFetchArgs = parse(json!({"url": "https://docs.rs/serde", "query": "deny_unknown_fields"}));
    assert_eq!(a.query.as_deref(), Some("deny_unknown_fields"));
    let b: WebSearchArgs = parse(json!({"query": "tokio 1.47 breaking changes"}));
    assert_eq!(b.limit, None);
}

#[test]
fn b6_prompt_dialog_is_awaited_and_answered_with_prompt_text() {
    let wait: BrowserArgs = parse(json!({"action": "wait", "condition": "dialog"}));
    assert_eq!(wait.condition, Some(WaitCondition::Dialog));
    wait.check().unwrap();

    let answer: BrowserArgs = parse(json!({"action": "handle_dialog", "accept": true, "prompt_text": "Ada"}));
    answer.check().unwrap();
    // An empty answer is an answer, not "keep the default".
    let empty: BrowserArgs = parse(json!({"action": "handle_dialog", "accept": true, "prompt_text": ""}));
    assert_eq!(empty.prompt_text.as_deref(), Some(""));
    empty.check().unwrap();
    let keep_default: BrowserArgs = parse(json!({"action": "handle_dialog", "accept": true}));
    assert_eq!(keep_default.prompt_text, None);
    keep_default.check().unwrap();
    let dismiss: BrowserArgs = parse(json!({"action": "handle_dialog", "accept": false}));
    dismiss.check().unwrap();
}

#[test]
fn b2_preview_starts_a_dev_server_command_first() {
    let a: BrowserArgs = parse(json!({
        "action": "preview", "url": "http://localhost:5173", "command": "npm run dev", "workdir": "web", "timeout": 60000
    }));
    assert_eq!(a.command.as_deref(), Some("npm run dev"));
    a.check().unwrap();
    let close: BrowserArgs = parse(json!({"action": "close_preview"}));
    close.check().unwrap();
}

#[test]
fn b1_storage_modes_open_a_tab_and_clear_persistent_storage() {
    let open: BrowserArgs = parse(json!({"action": "open", "url": "https://example.com", "storage": "ephemeral"}));
    assert_eq!(open.storage, Some(StorageMode::Ephemeral));
    open.check().unwrap();
    for mode in ["global", "workspace"] {
        let clear: BrowserArgs = parse(json!({"action": "clear_storage", "storage": mode}));
        clear.check().unwrap();
    }
}

#[test]
fn b3_every_observation_and_interaction_parses_and_checks() {
    let samples = [
        json!({"action": "list_tabs"}),
        json!({"action": "select_tab", "tab_id": "tab-2"}),
        json!({"action": "close_tab"}),
        json!({"action": "navigate", "url": "https://example.com/login"}),
        json!({"action": "reload"}),
        json!({"action": "back"}),
        json!({"action": "forward"}),
        json!({"action": "resize", "breakpoint": "mobile"}),
        json!({"action": "resize", "width": 1024, "height": 768}),
        json!({"action": "screenshot"}),
        json!({"action": "screenshot", "full_page": true}),
        json!({"action": "screenshot", "target": {"css": "#chart"}}),
        json!({"action": "screenshot", "clip": {"x": 0, "y": 0, "width": 400, "height": 300}}),
        json!({"action": "snapshot"}),
        json!({"action": "inspect", "target": {"ref": "e12"}}),
        json!({"action": "console", "limit": 50}),
        json!({"action": "clear_console"}),
        json!({"action": "click", "target": {"role": "button", "name": "Sign in"}}),
        json!({"action": "click", "target": {"x": 120.5, "y": 48, "screenshot_id": "s3"}}),
        json!({"action": "fill", "target": {"label": "Email"}, "value": "ada@example.com"}),
        json!({"action": "fill", "target": {"placeholder": "Search"}, "value": ""}),
        json!({"action": "press", "key": "Control+A"}),
        json!({"action": "select", "target": {"test_id": "country"}, "values": ["FR"]}),
        json!({"action": "check", "target": {"label": "Remember me"}, "checked": false}),
        json!({"action": "hover", "target": {"text": "Pricing"}}),
        json!({"action": "drag", "target": {"ref": "e4"}, "to": {"ref": "e9"}}),
        json!({"action": "scroll", "direction": "down", "amount": 600, "target": {"css": ".list", "frame": "#app"}}),
        json!({"action": "upload", "files": ["fixtures/avatar.png"], "target": {"label": "Avatar"}}),
        json!({"action": "wait", "condition": "url", "url": "/dashboard", "timeout": 5000}),
        json!({"action": "wait", "condition": "text", "text": "Saved"}),
        json!({"action": "wait", "condition": "element", "target": {"href": "/logout"}, "state": "visible"}),
        json!({"action": "wait", "condition": "network_idle"}),
        json!({"action": "wait", "condition": "download"}),
        json!({"action": "list_credentials"}),
        json!({"action": "fill_credential", "credential_id": "cred-7f2"}),
        json!({"action": "read_clipboard"}),
        json!({"action": "write_clipboard", "text": "hello"}),
        json!({"action": "diagnostics"}),
        json!({"action": "activity", "limit": 20}),
        json!({"action": "eval", "expression": "document.title"}),
    ];
    for sample in samples {
        let a: BrowserArgs = parse(sample.clone());
        if let Err(e) = a.check() {
            panic!("{sample} was refused: {e}");
        }
    }
}

#[test]
fn a1_todo_write_creates_and_merges_items() {
    let create: TodoWriteArgs = parse(json!({"todos": [
        {"id": "1", "title": "Add the migration", "status": "in_progress"},
        {"title": "Write tests"}
    ]}));
    assert!(!create.merge);
    create.check().unwrap();
    let status_only: TodoWriteArgs = parse(json!({"todos": [{"id": "1", "status": "completed"}], "merge": true}));
    assert_eq!(status_only.todos[0].status, Some(TodoStatus::Completed));
    status_only.check().unwrap();
}

#[test]
fn a2_memory_saves_updates_and_lists_notes_in_three_scopes() {
    let save: MemoryArgs = parse(json!({"content": "Tests run with `cargo xtask ci`."}));
    assert_eq!((save.action, save.scope), (MemoryAction::Save, MemoryScope::Workspace));
    save.check().unwrap();
    for scope in ["workspace", "global", "session"] {
        let a: MemoryArgs = parse(json!({"action": "save", "scope": scope, "content": "note"}));
        a.check().unwrap();
    }
    let update: MemoryArgs = parse(json!({"action": "update", "id": "m3", "content": "new text"}));
    update.check().unwrap();
    let delete: MemoryArgs = parse(json!({"action": "delete", "scope": "global", "id": "m3"}));
    delete.check().unwrap();
    let list: MemoryArgs = parse(json!({"action": "list", "scope": "session"}));
    list.check().unwrap();
}

#[test]
fn a3_sub_agent_can_run_in_the_background() {
    let a: SubAgentArgs = parse(json!({
        "description": "Find session cleanup",
        "prompt": "Find where expired sessions are deleted in src/ and report the functions.",
        "background": true,
        "mode": "ask"
    }));
    assert!(a.background);
    a.check().unwrap();
}

#[test]
fn a4_agent_status_lists_filters_pages_and_waits() {
    let list: AgentStatusArgs = parse(json!({}));
    list.check().unwrap();
    let sessions: AgentStatusArgs = parse(json!({
        "scope": "sessions", "status": "idle", "active_within_minutes": 60, "workspace": "/work/app",
        "query": "migration", "limit": 10, "offset": 10
    }));
    assert_eq!(sessions.scope, Some(StatusScope::Sessions));
    assert_eq!(sessions.status, Some(SessionState::Idle));
    sessions.check().unwrap();
    let me: AgentStatusArgs = parse(json!({"scope": "self"}));
    assert_eq!(me.scope, Some(StatusScope::Current));
    me.check().unwrap();
    let wait: AgentStatusArgs = parse(json!({"agent_id": "agent-3", "wait": true}));
    wait.check().unwrap();
    // `id` is accepted for `agent_id`.
    let by_id: AgentStatusArgs = parse(json!({"id": "agent-3"}));
    assert_eq!(by_id.agent_id.as_deref(), Some("agent-3"));
}

#[test]
fn a5_send_message_goes_to_a_child_the_parent_or_a_conversation() {
    let child: SendMessageArgs = parse(json!({"agent_id": "agent-3", "message": "Also check src/jobs."}));
    child.check().unwrap();
    let parent: SendMessageArgs = parse(json!({"parent": true, "message": "Done: 3 call sites."}));
    parent.check().unwrap();
}

#[test]
fn a6_ask_questions_offers_options_with_one_line_explanations() {
    let a: AskQuestionsArgs = parse(json!({"questions": [{
        "question": "Which database should the cache use?",
        "options": [
            {"label": "Redis", "description": "Shared across instances; needs a server."},
            {"label": "In-process"}
        ]
    }]}));
    assert_eq!(a.questions[0].options.len(), 2);
    a.check().unwrap();
}

#[test]
fn a7_educator_and_plan_tools_take_their_content() {
    let quiz: CheckUnderstandingArgs = parse(json!({"topic": "Ownership", "questions": [
        {"question": "Who frees a Box?", "options": ["The owner's drop", "The GC"], "correct_option": 0,
         "explanation": "Rust has no GC."},
        {"question": "Explain a borrow in your own words."}
    ]}));
    quiz.check().unwrap();
    let lesson: CreateLessonArgs =
        parse(json!({"title": "Closures", "html": "<!doctype html><html><body><h1>Closures</h1></body></html>"}));
    lesson.check().unwrap();
    let plan: GeneratePlanArgs = parse(json!({
        "title": "Cache layer", "summary": "Add an LRU in front of the DB.",
        "steps": [{"title": "Add the cache type", "details": "An LRU keyed by id.", "files": ["src/cache.rs"]}, {"title": "Wire it"}]
    }));
    plan.check().unwrap();
}

#[test]
fn k1_codemode_takes_the_seed_script() {
    let code = "const files = (await tools.ls({})).split(\"\\n\").filter(f => f.endsWith(\".go\"))\n\
                const contents = await Promise.all(files.map(f => tools.read({ path: f })))\n\
                return files.map((file, i) => ({ file, todo: (contents[i].match(/TODO: (.*)/) || [])[1] }))";
    let a: CodemodeArgs = parse(json!({ "code": code }));
    assert!(a.code.contains("Promise.all"));
}

#[test]
fn g12_tool_search_and_call_tool_reach_deferred_tools() {
    let s: ToolSearchArgs = parse(json!({"query": "go to definition", "limit": 3}));
    assert_eq!(s.limit, Some(3));
    let c: CallToolArgs =
        parse(json!({"name": "lsp", "arguments": {"operation": "hover", "path": "a.ts", "line": 1, "symbol": "x"}}));
    assert_eq!(c.arguments["operation"], "hover");
    // The arguments of the called tool parse with its own struct.
    let inner: LspArgs = parse(Value::Object(c.arguments));
    inner.check().unwrap();
    let no_args: CallToolArgs = parse(json!({"name": "list_tabs"}));
    assert!(no_args.arguments.is_empty());
}

// --- unknown fields are refused -------------------------------------------------------------

#[test]
fn s8_unknown_fields_are_refused_by_every_own_struct() {
    assert_unknown_refused::<ReadLintsArgs>(json!({"paths": [], "severity": "error"}), "severity");
    assert_unknown_refused::<LspArgs>(json!({"operation": "hover", "column": 4}), "column");
    assert_unknown_refused::<CodebaseSearchArgs>(json!({"query": "x", "target_directories": []}), "target_directories");
    assert_unknown_refused::<WebFetchArgs>(json!({"url": "https://a.b", "prompt": "summarise"}), "prompt");
    assert_unknown_refused::<WebSearchArgs>(json!({"query": "x", "num_results": 3}), "num_results");
    assert_unknown_refused::<BrowserArgs>(json!({"action": "click", "selector": "#go"}), "selector");
    assert_unknown_refused::<BrowserArgs>(json!({"action": "click", "target": {"xpath": "//a"}}), "xpath");
    assert_unknown_refused::<BrowserArgs>(json!({"action": "drag", "target": {"ref": "e1"}, "to": {"id": "e2"}}), "id");
    assert_unknown_refused::<BrowserArgs>(
        json!({"action": "screenshot", "clip": {"x": 0, "y": 0, "width": 1, "height": 1, "scale": 2}}),
        "scale",
    );
    assert_unknown_refused::<TodoWriteArgs>(json!({"todos": [], "replace": true}), "replace");
    assert_unknown_refused::<TodoWriteArgs>(json!({"todos": [{"title": "a", "content": "b"}]}), "content");
    assert_unknown_refused::<MemoryArgs>(json!({"content": "x", "tags": ["a"]}), "tags");
    assert_unknown_refused::<SubAgentArgs>(json!({"description": "a", "prompt": "b", "model": "x"}), "model");
    assert_unknown_refused::<AgentStatusArgs>(json!({"agent": "a1"}), "agent");
    assert_unknown_refused::<SendMessageArgs>(json!({"to": "a1", "message": "hi"}), "to");
    assert_unknown_refused::<AskQuestionsArgs>(json!({"questions": [], "timeout": 60}), "timeout");
    assert_unknown_refused::<AskQuestionsArgs>(
        json!({"questions": [{"question": "q", "options": [{"label": "a", "value": 1}]}]}),
        "value",
    );
    assert_unknown_refused::<AskQuestionsArgs>(json!({"questions": [{"question": "q", "header": "h"}]}), "header");
    assert_unknown_refused::<CheckUnderstandingArgs>(json!({"topic": "t", "questions": [], "level": 2}), "level");
    assert_unknown_refused::<CheckUnderstandingArgs>(
        json!({"topic": "t", "questions": [{"question": "q", "answer": 1}]}),
        "answer",
    );
    assert_unknown_refused::<CreateLessonArgs>(json!({"title": "t", "html": "h", "open": true}), "open");
    assert_unknown_refused::<GeneratePlanArgs>(
        json!({"title": "t", "summary": "s", "steps": [{"title": "a", "owner": "me"}]}),
        "owner",
    );
    assert_unknown_refused::<CodemodeArgs>(json!({"code": "return 1", "language": "js"}), "language");
    assert_unknown_refused::<ToolSearchArgs>(json!({"query": "x", "namespace": "github"}), "namespace");
    assert_unknown_refused::<CallToolArgs>(json!({"name": "x", "args": {}}), "args");
}

#[test]
fn s8_wrong_types_and_values_name_the_field() {
    let (field, message) =
        invalid(parse_err::<LspArgs>(json!({"operation": "rename", "path": "a.ts", "line": 1, "symbol": "x"})));
    assert_eq!(field.as_deref(), Some("operation"));
    assert!(message.contains("rename"), "{message}");
    let (field, _) = invalid(parse_err::<BrowserArgs>(json!({"action": "wait", "condition": "idle"})));
    assert_eq!(field.as_deref(), Some("condition"));
    let (field, _) = invalid(parse_err::<TodoWriteArgs>(json!({"todos": [{"title": "a", "status": "done"}]})));
    assert_eq!(field.as_deref(), Some("todos[0].status"));
    let (field, _) = invalid(parse_err::<CodemodeArgs>(json!({"code": ["return 1"]})));
    assert_eq!(field.as_deref(), Some("code"));
    let (field, _) = invalid(parse_err::<WebFetchArgs>(json!({})));
    assert_eq!(field, None, "a missing required field is reported at the top");
    let (_, message) = invalid(parse_err::<WebFetchArgs>(json!({})));
    assert!(message.contains("url"), "{message}");
}

#[test]
fn s8_an_explicit_null_for_an_optional_field_means_absent() {
    // The schemas list optional fields with their plain type (see `compact_schema`); a model
    // that still sends `null` gets the same as leaving the field out.
    let a: BrowserArgs = parse(json!({"action": "reload", "url": null, "target": null, "timeout": null}));
    assert_eq!(a, BrowserArgs::new(BrowserAction::Reload));
    a.check().unwrap();
    let l: LspArgs = parse(json!({"operation": "document_symbols", "path": "a.ts", "line": null, "query": null}));
    assert_eq!(l.line, None);
    l.check().unwrap();
    let s: AgentStatusArgs = parse(json!({"agent_id": null, "scope": null}));
    assert_eq!(s, AgentStatusArgs::default());
}

// --- cross-field checks -----------------------------------------------------------------------

fn check_err(result: Result<(), ToolError>) -> (String, String) {
    let Err(err) = result else { panic!("the check should refuse these arguments") };
    let (field, message) = invalid(err);
    (field.unwrap_or_default(), message)
}

#[test]
fn l3_lsp_check_names_what_an_operation_lacks() {
    let no_line: LspArgs = parse(json!({"operation": "references", "path": "a.ts", "symbol": "x"}));
    assert_eq!(check_err(no_line.check()).0, "line");
    let no_symbol: LspArgs = parse(json!({"operation": "definition", "path": "a.ts", "line": 4}));
    let (field, message) = check_err(no_symbol.check());
    assert_eq!(field, "symbol");
    assert!(message.contains("line 4"), "{message}");
    let no_path: LspArgs = parse(json!({"operation": "document_symbols"}));
    assert_eq!(check_err(no_path.check()).0, "path");
    let no_query: LspArgs = parse(json!({"operation": "workspace_symbols", "query": "  "}));
    assert_eq!(check_err(no_query.check()).0, "query");
    let zero: LspArgs = parse(json!({"operation": "hover", "path": "a.ts", "line": 0, "symbol": "x"}));
    let (field, message) = check_err(zero.check());
    assert_eq!(field, "line");
    assert!(message.contains("1-based"), "{message}");
    let both: LspArgs =
        parse(json!({"operation": "hover", "path": "a.ts", "line": 2, "symbol": "x", "occurrence": 2, "character": 5}));
    assert_eq!(check_err(both.check()).0, "character");
}

#[test]
fn b3_browser_check_refuses_fields_an_action_does_not_use() {
    let a: BrowserArgs = parse(json!({"action": "click", "target": {"ref": "e1"}, "value": "x"}));
    let (field, message) = check_err(a.check());
    assert_eq!(field, "value");
    assert!(message.contains("`click`") && message.contains("target"), "{message}");
    let b: BrowserArgs = parse(json!({"action": "back", "url": "https://a.b"}));
    let (field, message) = check_err(b.check());
    assert_eq!(field, "url");
    assert!(message.contains("no other fields"), "{message}");
}

#[test]
fn b3_browser_check_names_what_an_action_needs() {
    let cases = [
        (json!({"action": "navigate"}), "url"),
        (json!({"action": "select_tab"}), "tab_id"),
        (json!({"action": "click"}), "target"),
        (json!({"action": "fill", "target": {"ref": "e1"}}), "value"),
        (json!({"action": "select", "target": {"ref": "e1"}, "values": []}), "values"),
        (json!({"action": "drag", "target": {"ref": "e1"}}), "to"),
        (json!({"action": "press"}), "key"),
        (json!({"action": "scroll"}), "direction"),
        (json!({"action": "upload", "files": []}), "files"),
        (json!({"action": "wait"}), "condition"),
        (json!({"action": "wait", "condition": "text"}), "text"),
        (json!({"action": "wait", "condition": "url"}), "url"),
        (json!({"action": "wait", "condition": "element"}), "target"),
        (json!({"action": "resize"}), "breakpoint"),
        (json!({"action": "resize", "width": 800}), "breakpoint"),
        (json!({"action": "resize", "breakpoint": "tablet", "width": 800, "height": 600}), "breakpoint"),
        (json!({"action": "fill_credential"}), "credential_id"),
        (json!({"action": "write_clipboard"}), "text"),
        (json!({"action": "clear_storage"}), "storage"),
        (json!({"action": "eval"}), "expression"),
        (json!({"action": "handle_dialog"}), "accept"),
        (json!({"action": "screenshot", "full_page": true, "target": {"ref": "e1"}}), "target"),
        (json!({"action": "screenshot", "clip": {"x": 0, "y": 0, "width": 0, "height": 10}}), "clip"),
    ];
    for (args, field) in cases {
        let a: BrowserArgs = parse(args.clone());
        let (got, message) = check_err(a.check());
        assert_eq!(got, field, "{args}: {message}");
        assert!(!message.is_empty());
    }
}

#[test]
fn b6_a_dismissed_prompt_takes_no_prompt_text() {
    let a: BrowserArgs = parse(json!({"action": "handle_dialog", "accept": false, "prompt_text": "x"}));
    let (field, message) = check_err(a.check());
    assert_eq!(field, "prompt_text");
    assert!(message.contains("null"), "{message}");
}

#[test]
fn b1_ephemeral_storage_has_nothing_to_clear() {
    let a: BrowserArgs = parse(json!({"action": "clear_storage", "storage": "ephemeral"}));
    assert_eq!(check_err(a.check()).0, "storage");
}

#[test]
fn b4_targets_are_strict() {
    let cases = [
        (json!({"action": "click", "target": {}}), "target", "names no element"),
        (json!({"action": "click", "target": {"css": "a", "text": "Go"}}), "target", "exactly one"),
        (json!({"action": "click", "target": {"name": "Go"}}), "target", "role"),
        (json!({"action": "click", "target": {"x": 1, "y": 2}}), "target", "screenshot_id"),
        (
            json!({"action": "click", "target": {"x": 1, "y": 2, "screenshot_id": "s", "css": "a"}}),
            "target",
            "coordinates",
        ),
        (json!({"action": "drag", "target": {"ref": "e1"}, "to": {}}), "to", "names no element"),
    ];
    for (args, field, needle) in cases {
        let a: BrowserArgs = parse(args.clone());
        let (got, message) = check_err(a.check());
        assert_eq!(got, field, "{args}");
        assert!(message.contains(needle), "{args}: {message}");
    }
    // role with name, and a frame with one locator, are one target.
    let ok: BrowserArgs = parse(json!({"action": "click", "target": {"role": "link", "name": "Docs", "frame": "#f"}}));
    ok.check().unwrap();
}

#[test]
fn a1_todo_write_check_refuses_items_it_cannot_store() {
    let no_title: TodoWriteArgs = parse(json!({"todos": [{"id": "1", "status": "pending"}]}));
    let (field, message) = check_err(no_title.check());
    assert_eq!(field, "todos[0].title");
    assert!(message.contains("replaced"), "{message}");
    let new_in_merge: TodoWriteArgs = parse(json!({"todos": [{"status": "pending"}], "merge": true}));
    assert_eq!(check_err(new_in_merge.check()).0, "todos[0].title");
    let twice: TodoWriteArgs = parse(json!({"todos": [{"id": "1", "title": "a"}, {"id": "1", "title": "b"}]}));
    assert_eq!(check_err(twice.check()).0, "todos[1].id");
    let nothing: TodoWriteArgs = parse(json!({"todos": [{"id": "1"}], "merge": true}));
    assert_eq!(check_err(nothing.check()).0, "todos[0]");
    let empty: TodoWriteArgs = parse(json!({"todos": []}));
    assert_eq!(check_err(empty.check()).0, "todos");
}

#[test]
fn a2_memory_check_names_what_an_action_needs() {
    let cases = [
        (json!({}), "content"),
        (json!({"action": "update", "content": "x"}), "id"),
        (json!({"action": "delete"}), "id"),
        (json!({"action": "list", "content": "x"}), "content"),
        (json!({"action": "save", "content": "x", "id": "m1"}), "id"),
    ];
    for (args, field) in cases {
        let a: MemoryArgs = parse(args.clone());
        assert_eq!(check_err(a.check()).0, field, "{args}");
    }
}

#[test]
fn a4_agent_status_check_keeps_filters_with_session_lists() {
    let cases = [
        (json!({"wait": true}), "wait"),
        (json!({"agent_id": "a1", "scope": "all"}), "scope"),
        (json!({"status": "running"}), "status"),
        (json!({"scope": "agents", "query": "x"}), "query"),
        (json!({"scope": "self", "workspace": "/w"}), "workspace"),
        (json!({"limit": 0}), "limit"),
        (json!({"agent_id": " "}), "agent_id"),
    ];
    for (args, field) in cases {
        let a: AgentStatusArgs = parse(args.clone());
        assert_eq!(check_err(a.check()).0, field, "{args}");
    }
}

#[test]
fn a5_send_message_check_needs_exactly_one_recipient() {
    let none: SendMessageArgs = parse(json!({"message": "hi"}));
    assert_eq!(check_err(none.check()).0, "agent_id");
    let both: SendMessageArgs = parse(json!({"agent_id": "a1", "parent": true, "message": "hi"}));
    assert_eq!(check_err(both.check()).0, "parent");
    let empty: SendMessageArgs = parse(json!({"agent_id": "a1", "message": "  "}));
    assert_eq!(check_err(empty.check()).0, "message");
}

#[test]
fn a6_a7_question_checks() {
    let none: AskQuestionsArgs = parse(json!({"questions": []}));
    assert_eq!(check_err(none.check()).0, "questions");
    let dup: AskQuestionsArgs =
        parse(json!({"questions": [{"question": "q", "options": [{"label": "a"}, {"label": "a"}]}]}));
    assert_eq!(check_err(dup.check()).0, "questions[0].options[1].label");
    let out_of_range: CheckUnderstandingArgs =
        parse(json!({"topic": "t", "questions": [{"question": "q", "options": ["a", "b"], "correct_option": 2}]}));
    let (field, message) = check_err(out_of_range.check());
    assert_eq!(field, "questions[0].correct_option");
    assert!(message.contains("0 to 1"), "{message}");
    let no_answer: CheckUnderstandingArgs =
        parse(json!({"topic": "t", "questions": [{"question": "q", "options": ["a", "b"]}]}));
    assert_eq!(check_err(no_answer.check()).0, "questions[0].correct_option");
    let no_steps: GeneratePlanArgs = parse(json!({"title": "t", "summary": "s", "steps": []}));
    assert_eq!(check_err(no_steps.check()).0, "steps");
    let no_html: CreateLessonArgs = parse(json!({"title": "t", "html": ""}));
    assert_eq!(check_err(no_html.check()).0, "html");
    let no_prompt: SubAgentArgs = parse(json!({"description": "d", "prompt": ""}));
    assert_eq!(check_err(no_prompt.check()).0, "prompt");
}
