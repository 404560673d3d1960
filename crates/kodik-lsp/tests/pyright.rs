//! `lsp` and `read_lints` against a real pyright on a small multi-file project (L1–L6, E9).
//! One server start covers the queries; the crash test adds one restart.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::{Harness, configured, server_program, wait_group_gone};
use kodik_core::{DiagnosticSeverity, DiagnosticsProvider};
use kodik_lsp::ServerConfig;
use serde_json::json;

const UTIL: &str = r#"def helper(value: int) -> int:
    """Doubles a value."""
    return value * 2


class Shape:
    def area(self) -> float:
        raise NotImplementedError


class Square(Shape):
    def __init__(self, side: float) -> None:
        self.side = side

    def area(self) -> float:
        return self.side * self.side
"#;

const MAIN: &str = "from pkg.util import helper as h, Square
from pkg import util


def run(id: int, idx: int) -> int:
    total = h(h(id)) + idx
    return total + util.helper(1)


msg = \"😀😀😀😀\"; n = run(1, 2)
size = len(\"abc\")
s = Square(2.0)
";

fn pyright() -> Option<ServerConfig> {
    let program = server_program("pyright-langserver")?;
    let mut cfg = kodik_lsp::config::default_servers().into_iter().find(|s| s.name == "pyright")?;
    cfg.command = program;
    Some(cfg)
}

fn project() -> (tempfile::TempDir, Harness) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = pyright().expect("checked by the caller");
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"demo\"\nversion = \"0\"\n");
    h.write("pkg/__init__.py", "");
    h.write("pkg/util.py", UTIL);
    h.write("main.py", MAIN);
    h.write(".kodikignore", "secret/\n");
    h.write("secret/use.py", "from pkg.util import helper\n\nhelper(3)\n");
    h.write("notes.toml", "[a]\nb = 1\n");
    (dir, h)
}

/// L2, L3, L4, L5, L6 on one pyright: definition across files, references through an import
/// alias, hover, outline, workspace symbols, call hierarchy, `occurrence` on `h(h(id))`, emoji
/// before the column, `[external]` typeshed, `.kodikignore` hits hidden and counted, a file
/// type with no server, and 3 000 references cut to 100 with the total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l6_queries_against_pyright() {
    if pyright().is_none() {
        return;
    }
    let (_dir, h) = project();

    // L2/L3: definition across files; the second `h` on the line is the inner call.
    let def =
        h.lsp(json!({"operation": "definition", "path": "main.py", "line": 6, "symbol": "h", "occurrence": 2})).await;
    assert!(def.contains("pkg/util.py:1:5: def helper(value: int) -> int:"), "{def}");

    // L3: four emoji (two UTF-16 units each) before `run`: the column must be converted.
    let def = h.lsp(json!({"operation": "definition", "path": "main.py", "line": 10, "symbol": "run"})).await;
    assert!(def.contains("main.py:5:5: def run(id: int, idx: int) -> int:"), "{def}");

    // L3: `id` is not found inside `idx`; `idx` is its own symbol.
    let refs = h.lsp(json!({"operation": "references", "path": "main.py", "line": 6, "symbol": "idx"})).await;
    assert!(refs.contains("2 locations"), "{refs}");
    assert!(refs.contains("main.py:5:18:") && refs.contains("main.py:6:24:"), "{refs}");

    // L2/L5: references of `helper` reach the aliased import and `util.helper`; the use under
    // `.kodikignore` is hidden and counted.
    let refs = h.lsp(json!({"operation": "references", "path": "pkg/util.py", "line": 1, "symbol": "helper"})).await;
    assert!(refs.contains("pkg/util.py:1:5:"), "{refs}");
    assert!(refs.contains("main.py:1:22: from pkg.util import helper as h, Square"), "{refs}");
    assert!(refs.contains("main.py:7:25:"), "{refs}");
    assert!(!refs.contains("secret/"), "{refs}");
    assert!(refs.contains("more in files hidden by .kodikignore"), "{refs}");

    // L2: hover has the signature and the docstring.
    let hover = h.lsp(json!({"operation": "hover", "path": "main.py", "line": 7, "symbol": "helper"})).await;
    assert!(hover.contains("(value: int) -> int") && hover.contains("Doubles a value."), "{hover}");

    // L5: a definition in typeshed is outside the workspace and marked.
    let ext = h.lsp(json!({"operation": "definition", "path": "main.py", "line": 11, "symbol": "len"})).await;
    assert!(ext.contains("[external]") && ext.contains("builtins.pyi"), "{ext}");

    // L2: outline and workspace symbols.
    let outline = h.lsp(json!({"operation": "document_symbols", "path": "pkg/util.py"})).await;
    assert!(outline.contains("class Square (line 11)") && outline.contains("  method area (line 15)"), "{outline}");
    let ws = h.lsp(json!({"operation": "workspace_symbols", "query": "Square"})).await;
    assert!(ws.contains("pkg/util.py:11:7: (class Square)"), "{ws}");

    // L2: call hierarchy both ways.
    let incoming =
        h.lsp(json!({"operation": "incoming_calls", "path": "pkg/util.py", "line": 1, "symbol": "helper"})).await;
    assert!(incoming.contains("main.py:5:5: (function run)"), "{incoming}");
    let outgoing = h.lsp(json!({"operation": "outgoing_calls", "path": "main.py", "line": 5, "symbol": "run"})).await;
    assert!(outgoing.contains("pkg/util.py:1:5: (function helper)"), "{outgoing}");

    // L3: a symbol that is not on the line is a clear error naming the line.
    let out = h.call("lsp", json!({"operation": "definition", "path": "main.py", "line": 6, "symbol": "nope"})).await;
    assert!(!out.is_success() && out.text_content().contains("`nope` does not occur"), "{}", out.text_content());

    // L5: paths under .kodikignore are refused.
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "secret/use.py"})).await;
    assert!(!out.is_success(), "{}", out.text_content());

    // L6: no server for TOML: its own answer pointing at grep; no server was started for it.
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "notes.toml"})).await;
    assert!(out.text_content().contains("no language server for .toml files") && out.text_content().contains("grep"));
    assert!(!h.servers.serves(&h.root.join("notes.toml")));

    // L4: 3 000 references are cut to 100 and the total is given.
    let mut many = String::from("from pkg.util import helper\n\n");
    for _ in 0..1000 {
        many.push_str("helper(1) + helper(2) + helper(3)\n");
    }
    h.write("many.py", &many);
    let refs = h
        .lsp(json!({"operation": "references", "path": "many.py", "line": 3, "symbol": "helper", "occurrence": 3}))
        .await;
    let listed = refs.lines().skip(1).filter(|l| l.contains(".py:")).count();
    assert!(refs.contains("locations (showing the first 100)"), "{}", &refs[..300.min(refs.len())]);
    let total: usize = refs.split(": ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(total >= 3004, "{total}");
    assert_eq!(listed, 100);
    assert_eq!(h.servers.starts().await, 1, "one server for the whole project");
}

/// L1 and E9: diagnostics of the written version only — a type error appears after the edit
/// that makes it and is gone after the edit that fixes it; a new file fixes another file's
/// import; a clean file reports nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_e9_diagnostics_follow_edits_against_pyright() {
    if pyright().is_none() {
        return;
    }
    let (_dir, h) = project();
    let clean = h.call("read_lints", json!({"paths": ["main.py"]})).await;
    assert!(clean.text_content().contains("No errors or warnings in 1 checked file"), "{}", clean.text_content());

    // E9 through the provider kodik-edit calls: the written text is what gets checked.
    let bad = "from pkg.util import helper\n\nx: int = helper(\"two\")\n";
    let path = h.write("calc.py", bad);
    let diags = h.servers.diagnostics(&path, bad).await;
    assert!(
        diags
            .iter()
            .any(|d| d.severity == DiagnosticSeverity::Error && d.line == 3 && d.message.contains("Literal['two']")),
        "{diags:?}"
    );
    let good = "from pkg.util import helper\n\nx: int = helper(2)\n";
    std::fs::write(&path, good).unwrap();
    let diags = h.servers.diagnostics(&path, good).await;
    assert!(diags.is_empty(), "stale diagnostics after the fix: {diags:?}");

    // L1: read_lints on a file changed on disk behind the server's back sees the new content.
    std::fs::write(&path, bad).unwrap();
    let lints = h.call("read_lints", json!({"paths": ["calc.py"]})).await;
    let text = lints.text_content();
    assert!(text.contains("calc.py:3:17: error [") && text.contains("reportArgumentType"), "{text}");
    std::fs::write(&path, good).unwrap();
    let text = h.call("read_lints", json!({"paths": ["calc.py"]})).await.text_content();
    assert!(text.contains("No errors or warnings"), "{text}");

    // A missing module, then the file that provides it (created as kodik-edit would, through
    // the provider): the importing file's error goes away.
    let app = h.write("app.py", "from helpers2 import thing\n\nprint(thing)\n");
    let text = h.call("read_lints", json!({"paths": ["app.py"]})).await.text_content();
    assert!(text.contains("helpers2") && text.contains("error"), "{text}");
    let helper = h.write("helpers2.py", "thing = 1\n");
    let diags = h.servers.diagnostics(&helper, "thing = 1\n").await;
    assert!(diags.is_empty(), "{diags:?}");
    let text = h.call("read_lints", json!({"paths": ["app.py"]})).await.text_content();
    assert!(text.contains("No errors or warnings"), "the new module was not noticed: {text}");
    assert!(app.exists());

    // L1: the whole workspace, with .kodikignore honoured.
    std::fs::write(&path, bad).unwrap();
    let text = h.call("read_lints", json!({})).await.text_content();
    assert!(text.contains("calc.py:3:17: error"), "{text}");
    assert!(!text.contains("secret/"), "{text}");
}

/// A `kill -9` of the server while a request is in flight: the request fails over to a
/// restarted server and answers; the dead process group is gone; dropping the manager kills
/// the new one (no orphans).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_request_restarts_and_answers() {
    if pyright().is_none() {
        return;
    }
    let (_dir, h) = project();
    // A slow request to kill the server under: thousands of references.
    let mut many = String::from("from pkg.util import helper\n\n");
    for _ in 0..1000 {
        many.push_str("helper(1) + helper(2) + helper(3)\n");
    }
    h.write("many.py", &many);
    let first = h.lsp(json!({"operation": "definition", "path": "main.py", "line": 12, "symbol": "Square"})).await;
    assert!(first.contains("pkg/util.py:11:7:"), "{first}");
    let server = h.servers.server_for(&h.root.join("main.py")).await.unwrap();
    let old = server.pid().unwrap();
    drop(server);

    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel();
    let killer = tokio::spawn(async move {
        // Mid-request: the references call below is sent before this fires.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let status = std::process::Command::new("kill").args(["-9", &old.to_string()]).status().unwrap();
        let _ = killed_tx.send(status.success());
    });
    let refs = h.lsp(json!({"operation": "references", "path": "pkg/util.py", "line": 1, "symbol": "helper"})).await;
    killer.await.unwrap();
    assert!(killed_rx.await.unwrap());
    assert!(refs.contains("main.py:1:22:") && refs.contains("many.py:"), "{refs}");
    // The restart happened inside that call: the kill came while it was in flight.
    assert_eq!(h.servers.starts().await, 2, "the request finished before the kill");
    assert!(wait_group_gone(old, Duration::from_secs(5)).await, "the killed server's group lingers");
    // Queries keep working; exactly one restart happened.
    let again = h.lsp(json!({"operation": "definition", "path": "main.py", "line": 12, "symbol": "Square"})).await;
    assert!(again.contains("pkg/util.py:11:7:"), "{again}");
    assert_eq!(h.servers.starts().await, 2);

    let new = h.servers.running().await[0].pid().unwrap();
    assert_ne!(new, old);
    let Harness { servers, registry, cx, .. } = h;
    drop((registry, cx));
    drop(servers);
    assert!(wait_group_gone(new, Duration::from_secs(5)).await, "dropping the manager left the server running");
}

/// L1: a whole-workspace `read_lints` passes over third-party folders that are not
/// git-ignored (a virtualenv's `site-packages`, a virtualenv under any name, `node_modules`),
/// like pyright's own default excludes, and says so. Before, 320 files of a dependency filled
/// the 300-file cap and the project's own error was never checked ("No errors or warnings in
/// 300 checked files").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_whole_workspace_read_lints_passes_over_virtualenvs_and_node_modules() {
    if pyright().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), pyright().expect("checked above"));
    h.write("pyproject.toml", "[project]\nname = \"app\"\nversion = \"0\"\n");
    for i in 0..320 {
        h.write(&format!("env/lib/python3.11/site-packages/dep/m{i}.py"), &format!("def f{i}():\n    return {i}\n"));
    }
    h.write("myenv/pyvenv.cfg", "home = /usr/bin\n");
    h.write("myenv/bin/tool.py", "y: int = \"dependency\"\n");
    h.write("node_modules/pkg/x.py", "z: int = \"dependency\"\n");
    h.write("src/main.py", "x: int = \"oops\"\n");

    let out = h.call("read_lints", json!({})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("src/main.py:1:10: error") && text.contains("in 1 checked file"), "{text}");
    assert!(!text.contains("dependency\""), "{text}");
    assert!(text.contains("dependency folders not checked:"), "{text}");
    assert!(text.contains("env/lib/python3.11/site-packages/") && text.contains("myenv/"), "{text}");
    assert!(text.contains("node_modules/"), "{text}");

    // Named explicitly, a dependency folder is checked.
    let text = h.call("read_lints", json!({"paths": ["myenv"]})).await.text_content();
    assert!(text.contains("myenv/bin/tool.py:1:10: error"), "{text}");
}

/// L6: errors say what to do: `implementation` (pyright has none) points at `references`;
/// `read_lints` of a file no server checks, or of a glob, says so and what to pass instead;
/// no hover on a comment names the place once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_unsupported_operations_and_unlintable_paths_say_what_to_do() {
    if pyright().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), pyright().expect("checked above"));
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    h.write("pkg/__init__.py", "");
    h.write(
        "pkg/m.py",
        "class Base:\n    def greet(self) -> str:\n        raise NotImplementedError\n\n\nclass A(Base):\n    def greet(self) -> str:\n        return \"a\"\n\n# Base in a comment\n",
    );

    let out =
        h.call("lsp", json!({"operation": "implementation", "path": "pkg/m.py", "line": 2, "symbol": "greet"})).await;
    let text = out.text_content();
    assert!(!out.is_success() && text.contains("pyright does not support `implementation`"), "{text}");
    assert!(text.contains("use `references`") && !text.contains("-32601"), "{text}");

    let out = h.call("read_lints", json!({"paths": ["pyproject.toml"]})).await;
    let text = out.text_content();
    assert!(!out.is_success() && text.contains("no language server checks pyproject.toml"), "{text}");
    assert!(text.contains("shell") && !text.contains("grep"), "{text}");

    let out = h.call("read_lints", json!({"paths": ["pkg/**/*.py"]})).await;
    let text = out.text_content();
    assert!(!out.is_success() && text.contains("patterns are not supported"), "{text}");

    let text = h.lsp(json!({"operation": "hover", "path": "pkg/m.py", "line": 10, "symbol": "Base"})).await;
    assert_eq!(text, "No hover information for `Base` at pkg/m.py:10:3.");
}

/// L5: hits in a file reached through a symlink to outside the workspace are shown with the
/// real path and marked `[external]`, as read_file and lsp treat that path (before: shown as
/// `pkg/link.py:1:1: SECRET_KEY = "abc123"`, a workspace file every other tool refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l5_hits_through_a_symlink_to_outside_the_workspace_are_external() {
    if pyright().is_none() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().canonicalize().unwrap().join("secrets.py");
    std::fs::write(&secrets, "SECRET_KEY = \"abc123\"\ndef leak():\n    return SECRET_KEY\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), pyright().expect("checked above"));
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    h.write("pkg/__init__.py", "");
    std::os::unix::fs::symlink(&secrets, h.root.join("pkg/link.py")).unwrap();
    h.write("pkg/use.py", "from .link import leak, SECRET_KEY\n\nprint(leak(), SECRET_KEY)\n");

    let refs = h.lsp(json!({"operation": "references", "path": "pkg/use.py", "line": 3, "symbol": "SECRET_KEY"})).await;
    assert!(!refs.contains("pkg/link.py"), "{refs}");
    assert!(refs.contains(&format!("{}:1:1: [external]", secrets.display())), "{refs}");
    assert!(refs.contains("pkg/use.py:3:15:"), "{refs}");
}

/// L2: references follow an import renamed with `as` (`from .models import User as Person`):
/// the uses of `Person` are listed with `User`'s and the alias is named (before: pyright's
/// answer alone, without `p = Person()`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_references_follow_python_import_aliases() {
    if pyright().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), pyright().expect("checked above"));
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    h.write("pkg/__init__.py", "from .models import User as Person\n");
    h.write("pkg/models.py", "class User:\n    pass\n");
    h.write("pkg/service.py", "from . import Person\n\np = Person()\n");
    let refs = h.lsp(json!({"operation": "references", "path": "pkg/models.py", "line": 1, "symbol": "User"})).await;
    assert!(refs.contains("pkg/__init__.py:1:21:") && refs.contains("pkg/models.py:1:7:"), "{refs}");
    assert!(refs.contains("pkg/service.py:3:5: p = Person()"), "{refs}");
    assert!(refs.contains("pkg/service.py:1:15:"), "{refs}");
    assert!(refs.contains("includes uses through the import alias `Person`"), "{refs}");
}

/// L2: a Python monorepo whose services each have a pyproject.toml gets a pyright per service;
/// references asked in the shared library also ask the other services' servers, so a use in a
/// service that imports the library is listed (before: only the library's own lines, presented
/// as complete); incoming calls likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_references_in_a_python_monorepo_include_the_other_projects() {
    if pyright().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), pyright().expect("checked above"));
    h.write("services/lib/pyproject.toml", "[project]\nname = \"lib\"\nversion = \"0.1\"\n");
    h.write("services/lib/shared.py", "def helper(n: int) -> int:\n    return n * 2\n");
    h.write(
        "services/app/pyproject.toml",
        "[project]\nname = \"app\"\nversion = \"0.1\"\n\n[tool.pyright]\nextraPaths = [\"../lib\"]\n",
    );
    h.write("services/app/main.py", "from shared import helper\n\n\ndef run() -> int:\n    return helper(2)\n");
    h.write("services/other/pyproject.toml", "[project]\nname = \"other\"\nversion = \"0.1\"\n");
    h.write("services/other/unrelated.py", "def helper() -> None:\n    pass\n\nhelper()\n");
    let refs = h
        .lsp(json!({"operation": "references", "path": "services/lib/shared.py", "line": 1, "symbol": "helper"}))
        .await;
    assert!(refs.contains("services/lib/shared.py:1:5:"), "{refs}");
    assert!(refs.contains("services/app/main.py:1:20: from shared import helper"), "{refs}");
    assert!(refs.contains("services/app/main.py:5:12: return helper(2)"), "{refs}");
    // A function of the same name in a project that does not import the library is not a use.
    assert!(!refs.contains("unrelated.py"), "{refs}");
    assert!(refs.contains("(also searched the workspace's other projects: services/app, services/other)"), "{refs}");
    let calls = h
        .lsp(json!({"operation": "incoming_calls", "path": "services/lib/shared.py", "line": 1, "symbol": "helper"}))
        .await;
    assert!(calls.contains("services/app/main.py:4:5: (function run)"), "{calls}");
}

/// L4, L6: the outline of a file with more symbols than an outline lists keeps every function
/// and leaves out their parameters and locals, saying so with the total (before: it stopped at
/// the 500th symbol, mid-file, with no note, and meta gave 501 as the count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_l6_a_long_outline_keeps_every_top_level_symbol_and_says_what_it_left_out() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"o\"\nversion = \"0\"\n");
    let mut views: String = (0..150)
        .map(|i| format!("def handler_{i}(request, user):\n    data = request.json\n    result = data.get(\"x\")\n    return result\n\n"))
        .collect();
    views.push_str("def the_last_function():\n    return 1\n");
    h.write("views.py", &views);
    let out = h.call("lsp", json!({"operation": "document_symbols", "path": "views.py"})).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(
        text.contains("function handler_149 (line 746)") && text.contains("function the_last_function (line 751)"),
        "{text}"
    );
    assert!(!text.contains("variable request"), "{text}");
    let total = out.meta["symbols"].as_u64().unwrap();
    assert!(total > 500, "{}", out.meta);
    assert_eq!(out.meta["shown"], 151, "{}", out.meta);
    assert!(
        text.contains(&format!(
            "(151 of {total} symbols shown: the {} nested in another symbol are left out",
            total - 151
        )),
        "{text}"
    );
}

/// L4: a call from a file's top level is shown where it is, with the call's line, and the
/// caller named once as the module (before: line 1 of the file, a comment, labelled "(module
/// (module) uni.py)"); a call from a function is still shown at the function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_incoming_calls_from_top_level_code_show_the_call_line() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    h.write("pkg/__init__.py", "");
    h.write("pkg/core.py", "def compute(x: int) -> int:\n    return x * 2\n");
    h.write("pkg/uni.py", "# -*- coding: utf-8 -*-\nfrom pkg.core import compute\n\nresult = compute(3)\n\n\ndef twice() -> int:\n    return compute(compute(1))\n");
    let calls =
        h.lsp(json!({"operation": "incoming_calls", "path": "pkg/core.py", "line": 1, "symbol": "compute"})).await;
    assert!(calls.contains("pkg/uni.py:4:10: (module uni.py) result = compute(3)"), "{calls}");
    assert!(calls.contains("pkg/uni.py:7:5: (function twice) def twice() -> int:"), "{calls}");
    assert!(!calls.contains("pkg/uni.py:1:1:") && !calls.contains("(module) "), "{calls}");
}

/// E9, L1: a project with its own `.venv` (uv's and poetry's layout) is checked against it
/// when kodik runs without it activated: a package installed there resolves, and a type error
/// involving it is reported (before: "Import \"fakepkg\" could not be resolved", and the real
/// error was missed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_l1_the_projects_own_virtualenv_resolves_its_packages() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"v\"\nversion = \"0\"\n");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(&h.root)
        .status()
        .expect("python3 is needed to make a virtualenv");
    assert!(made.success());
    let site =
        std::fs::read_dir(h.root.join(".venv/lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
    std::fs::create_dir_all(site.join("fakepkg")).unwrap();
    std::fs::write(site.join("fakepkg/__init__.py"), "def hello() -> str:\n    return \"hi\"\n").unwrap();
    let text = "import fakepkg\n\ny: int = fakepkg.hello()\n";
    let app = h.write("app.py", text);
    let diags = h.servers.diagnostics(&app, text).await;
    assert!(diags.iter().all(|d| !d.message.contains("could not be resolved")), "{diags:?}");
    assert!(diags.iter().any(|d| d.line == 3 && d.column == 10 && d.message.contains("\"str\"")), "{diags:?}");
}
