//! The loop guard (G15, kodik-harness's `RepeatGuard`) in front of the real file and shell
//! tools, wired as the toolbox wires it: it blocks a call that keeps failing in a world that
//! does not change, and lets the same call run once what it depends on changed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use kodik_core::{Hooks, ToolCall, ToolContext, ToolOutput, ToolRegistry, ToolStatus, Workspace, dispatch};
use kodik_harness::RepeatGuard;
use serde_json::{Value, json};

struct Guarded {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    registry: Arc<ToolRegistry>,
    cx: ToolContext,
}

fn guarded() -> Guarded {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let mut registry = ToolRegistry::new();
    kodik_search::SearchToolset::new().register(&mut registry);
    kodik_edit::EditToolset::new().register(&mut registry);
    kodik_shell::ShellToolset::new().register(&mut registry);
    let workspace = Workspace::new(&root).unwrap();
    let mut cx = ToolContext::new(workspace.clone());
    let guard = Arc::new(RepeatGuard::default().watching(workspace));
    let registry = Arc::new(registry);
    guard.learn_tools(Arc::clone(&registry));
    cx.hooks = guard as Arc<dyn Hooks>;
    Guarded { _dir: dir, root, registry, cx }
}

impl Guarded {
    async fn call(&self, id: &str, name: &str, args: Value) -> ToolOutput {
        dispatch(&self.registry, ToolCall::new(id, name, args), &self.cx).await
    }
}

fn zzz_edit() -> Value {
    json!({"path": "a.txt", "edits": [{"old_string": "zzz", "new_string": "y"}]})
}

#[tokio::test]
async fn g15_an_edit_that_failed_twice_runs_once_a_command_put_its_text_in_the_file() {
    let g = guarded();
    std::fs::write(g.root.join("a.txt"), "a\n").unwrap();
    assert!(g.call("0", "read_file", json!({"path": "a.txt"})).await.is_success());
    for id in ["1", "2"] {
        assert_eq!(g.call(id, "edit_file", zzz_edit()).await.status, ToolStatus::Error);
    }
    // Nothing changed: the third identical try is blocked, and the advice names what helps.
    let blocked = g.call("3", "edit_file", zzz_edit()).await;
    assert_eq!(blocked.status, ToolStatus::Denied, "{}", blocked.text_content());
    assert!(blocked.text_content().contains("change the arguments"), "{}", blocked.text_content());
    assert!(g.call("4", "shell", json!({"command": "echo zzz >> a.txt"})).await.is_success());
    assert!(g.call("5", "read_file", json!({"path": "a.txt"})).await.text_content().contains("zzz"));
    let after = g.call("6", "edit_file", zzz_edit()).await;
    assert_eq!(after.status, ToolStatus::Success, "{}", after.text_content());
    assert_eq!(std::fs::read_to_string(g.root.join("a.txt")).unwrap(), "a\ny\n");
}

#[tokio::test]
async fn g15_an_edit_blocked_after_two_failures_runs_once_another_program_changed_the_file() {
    let g = guarded();
    std::fs::write(g.root.join("a.txt"), "a\n").unwrap();
    assert!(g.call("0", "read_file", json!({"path": "a.txt"})).await.is_success());
    for id in ["1", "2"] {
        assert_eq!(g.call(id, "edit_file", zzz_edit()).await.status, ToolStatus::Error);
    }
    assert_eq!(g.call("3", "edit_file", zzz_edit()).await.status, ToolStatus::Denied);
    // A read of the unchanged file changes nothing: still blocked.
    g.call("4", "read_file", json!({"path": "a.txt"})).await;
    assert_eq!(g.call("5", "edit_file", zzz_edit()).await.status, ToolStatus::Denied);
    // The user's editor (not a tool call) adds the text; the model re-reads, as advised.
    std::fs::write(g.root.join("a.txt"), "a\nzzz\n").unwrap();
    assert!(g.call("6", "read_file", json!({"path": "a.txt"})).await.text_content().contains("zzz"));
    let after = g.call("7", "edit_file", zzz_edit()).await;
    assert_eq!(after.status, ToolStatus::Success, "{}", after.text_content());
}

/// G15: a patch that failed twice (its context is not in the file) runs again once another
/// program changed a file the patch names, although the patch has no `path` argument.
#[tokio::test]
async fn g15_a_patch_blocked_after_two_failures_runs_once_a_file_it_names_changed() {
    let g = guarded();
    std::fs::write(g.root.join("a.txt"), "a\n").unwrap();
    assert!(g.call("0", "read_file", json!({"path": "a.txt"})).await.is_success());
    let patch = || json!({"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-zzz\n+y\n*** End Patch"});
    for id in ["1", "2"] {
        assert_eq!(g.call(id, "apply_patch", patch()).await.status, ToolStatus::Error);
    }
    assert_eq!(g.call("3", "apply_patch", patch()).await.status, ToolStatus::Denied);
    std::fs::write(g.root.join("a.txt"), "a\nzzz\n").unwrap();
    assert!(g.call("4", "read_file", json!({"path": "a.txt"})).await.text_content().contains("zzz"));
    let after = g.call("5", "apply_patch", patch()).await;
    assert_eq!(after.status, ToolStatus::Success, "{}", after.text_content());
}

#[tokio::test]
async fn g15_a_failing_test_command_runs_again_after_each_fix() {
    let g = guarded();
    std::fs::write(g.root.join("calc.txt"), "add wrong\nmul wrong\n").unwrap();
    let test = || json!({"command": "! grep -q wrong calc.txt && echo ALL PASS"});
    assert_eq!(g.call("t1", "shell", test()).await.status, ToolStatus::Error);
    assert!(g.call("r", "read_file", json!({"path": "calc.txt"})).await.is_success());
    let fix = |what: &str| json!({"path": "calc.txt", "edits": [{"old_string": format!("{what} wrong"), "new_string": format!("{what} right")}]});
    assert!(g.call("f1", "edit_file", fix("add")).await.is_success());
    assert_eq!(g.call("t2", "shell", test()).await.status, ToolStatus::Error);
    assert!(g.call("f2", "edit_file", fix("mul")).await.is_success());
    let third = g.call("t3", "shell", test()).await;
    assert_eq!(third.status, ToolStatus::Success, "{}", third.text_content());
    assert!(third.text_content().contains("ALL PASS"), "{}", third.text_content());
    // A command's outcome depends on what kodik cannot see change (the user's editor, a server
    // still starting): it is never blocked, however often it failed.
    std::fs::write(g.root.join("calc.txt"), "wrong\n").unwrap();
    for id in ["t4", "t5", "t6"] {
        assert_eq!(g.call(id, "shell", test()).await.status, ToolStatus::Error);
    }
    std::fs::write(g.root.join("calc.txt"), "right\n").unwrap();
    assert_eq!(g.call("t7", "shell", test()).await.status, ToolStatus::Success);
}

/// G15: a command between the tries that leaves the file as it was (`git status`, a `cat` of
/// the file, as a model looks at it) does not reset the count of an edit whose file the guard
/// watches: the loop edit → `cat` → edit → `cat` → edit is blocked at the third edit.
#[tokio::test]
async fn g15_a_command_that_leaves_the_file_alone_does_not_reset_a_failing_edits_count() {
    let g = guarded();
    std::fs::write(g.root.join("a.txt"), "a\n").unwrap();
    assert!(g.call("0", "read_file", json!({"path": "a.txt"})).await.is_success());
    for id in ["1", "2"] {
        assert_eq!(g.call(&format!("e{id}"), "edit_file", zzz_edit()).await.status, ToolStatus::Error);
        assert!(g.call(&format!("c{id}"), "shell", json!({"command": "cat a.txt"})).await.is_success());
    }
    let blocked = g.call("e3", "edit_file", zzz_edit()).await;
    assert_eq!(blocked.status, ToolStatus::Denied, "{}", blocked.text_content());
    // A command that does change the file makes it a new call.
    assert!(g.call("c3", "shell", json!({"command": "echo zzz >> a.txt"})).await.is_success());
    assert!(g.call("r", "read_file", json!({"path": "a.txt"})).await.is_success());
    assert_eq!(g.call("e4", "edit_file", zzz_edit()).await.status, ToolStatus::Success);
}
