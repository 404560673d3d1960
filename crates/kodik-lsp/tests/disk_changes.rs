//! Files changed on disk by something other than kodik's edit tools (a shell `printf >`,
//! `mv`, `sed -i`) reach the servers before the next query or `read_lints` (L1, L2, E9).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, configured};
use serde_json::json;

/// L1, L2: an unopened dependency rewritten on disk changes the dependent's diagnostics and
/// hover at once (before: "No errors or warnings" and the old type until the dependency
/// happened to be opened), and a file created and a file moved between two `references`
/// calls are in the second answer, the moved-away path is not (before: the old answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l2_files_changed_on_disk_outside_kodik_reach_pyright() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    h.write("pkg/__init__.py", "");
    h.write("pkg/c.py", "c = 1\n");
    h.write("pkg/d.py", "from .c import c\nd: int = c\n");
    h.write("pkg/models.py", "def make_user(name: str) -> str:\n    return name\n");
    h.write("pkg/service.py", "from .models import make_user\n\nu = make_user(\"bob\")\n");

    let lints = h.call("read_lints", json!({"paths": ["pkg/d.py"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    let hover = h.lsp(json!({"operation": "hover", "path": "pkg/d.py", "line": 2, "symbol": "c"})).await;
    assert!(hover.contains("Literal[1]"), "{hover}");

    // Like `printf 'c = "now a string"\n' > pkg/c.py` in a shell.
    h.write("pkg/c.py", "c = \"now a string\"\n");
    let lints = h.call("read_lints", json!({"paths": ["pkg/d.py"]})).await.text_content();
    assert!(lints.contains("pkg/d.py:2:10: error") && lints.contains("\"int\""), "{lints}");
    let hover = h.lsp(json!({"operation": "hover", "path": "pkg/d.py", "line": 2, "symbol": "c"})).await;
    assert!(hover.contains("now a string") || hover.contains("str"), "{hover}");

    let refs =
        h.lsp(json!({"operation": "references", "path": "pkg/models.py", "line": 1, "symbol": "make_user"})).await;
    assert!(refs.contains("pkg/service.py:3:5:"), "{refs}");
    // Like `printf … > pkg/new_mod.py && mv pkg/service.py pkg/svc.py`.
    h.write("pkg/new_mod.py", "from .models import make_user\n\nbob = make_user(\"bob\")\n");
    std::fs::rename(h.root.join("pkg/service.py"), h.root.join("pkg/svc.py")).unwrap();
    let refs =
        h.lsp(json!({"operation": "references", "path": "pkg/models.py", "line": 1, "symbol": "make_user"})).await;
    assert!(refs.contains("5 locations"), "{refs}");
    assert!(refs.contains("pkg/new_mod.py:3:7:") && refs.contains("pkg/svc.py:3:5:"), "{refs}");
    assert!(!refs.contains("pkg/service.py"), "{refs}");
}

/// L2, L6: a Python file created in the project makes queries wait for pyright's rescan, but
/// one created under `node_modules` (which pyright excludes, so it never rescans for it) does
/// not (before: the next query waited the whole 3 s for a rescan that never came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l6_files_created_in_dependency_folders_do_not_wait_for_a_rescan() {
    let Some(cfg) = configured("pyright", "pyright-langserver") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("pyproject.toml", "[project]\nname = \"pkg\"\nversion = \"0.1\"\n");
    let a = h.write("a.py", "def f():\n    return 1\n");
    h.lsp(json!({"operation": "references", "path": "a.py", "line": 1, "symbol": "f"})).await;
    let server = h.servers.server_for(&a).await.unwrap();
    assert_eq!(server.readiness(), kodik_lsp::Readiness::Ready);

    h.write("node_modules/x/c.py", "x = 1\n");
    server.sync(&a, None).await.unwrap();
    assert_eq!(server.readiness(), kodik_lsp::Readiness::Ready);

    h.write("b.py", "from a import f\nf()\n");
    server.sync(&a, None).await.unwrap();
    assert_eq!(server.readiness(), kodik_lsp::Readiness::Indexing);
    let refs = h.lsp(json!({"operation": "references", "path": "a.py", "line": 1, "symbol": "f"})).await;
    assert!(refs.contains("b.py:2:1: f()"), "{refs}");
}

/// L1: a header changed on disk makes clangd re-check an open file that includes it (before:
/// `main.c` kept the old declaration: "No errors or warnings" and the old hover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_a_header_changed_on_disk_rechecks_open_files_that_include_it_in_clangd() {
    let Some(cfg) = configured("clangd", "clangd") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    let root = h.root.display().to_string();
    let entry = |f: &str| json!({"directory": root, "file": f, "arguments": ["cc", "-Iinclude", "-c", f]});
    h.write("compile_commands.json", &json!([entry("src/main.c")]).to_string());
    h.write("include/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\n#endif\n");
    h.write("src/main.c", "#include \"util.h\"\nint main(void) {\n    return add(1, 2);\n}\n");

    let lints = h.call("read_lints", json!({"paths": ["src/main.c"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    h.write("include/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b, int c);\n#endif\n");
    let lints = h.call("read_lints", json!({"paths": ["src/main.c"]})).await.text_content();
    assert!(lints.contains("src/main.c:3:20: error") && lints.contains("Too few arguments"), "{lints}");
    let hover = h.lsp(json!({"operation": "hover", "path": "src/main.c", "line": 3, "symbol": "add"})).await;
    assert!(hover.contains("int c"), "{hover}");
}

/// L1, L6: in TypeScript, a module rewritten or deleted on disk (a shell `printf >`, `rm`)
/// changes an importing file's `read_lints` at once (before: "No errors or warnings" for
/// seconds, with no stale note, while hover already showed the new type).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l6_a_dependency_changed_on_disk_reaches_typescript_lints_at_once() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("tsconfig.json", r#"{"compilerOptions":{"strict":true},"include":["src"]}"#);
    h.write("src/c.ts", "export const c = 1;\n");
    h.write("src/d.ts", "import { c } from \"./c\";\nexport const d: number = c;\n");

    let lints = h.call("read_lints", json!({"paths": ["src/d.ts"]})).await.text_content();
    assert!(lints.contains("No errors or warnings in 1 checked file"), "{lints}");
    h.write("src/c.ts", "export const c = \"now a string\";\n");
    let lints = h.call("read_lints", json!({"paths": ["src/d.ts"]})).await.text_content();
    assert!(lints.contains("src/d.ts:2:14: error [typescript 2322]"), "{lints}");
    std::fs::remove_file(h.root.join("src/c.ts")).unwrap();
    let lints = h.call("read_lints", json!({"paths": ["src/d.ts"]})).await.text_content();
    assert!(lints.contains("src/d.ts:1:19: error [typescript 2307]"), "{lints}");
}

/// E9, L1: a TypeScript edit that leaves a file without errors, and a shell change that does,
/// get their (empty) diagnostics for the written version, not the cap's "may be from before
/// the last change" (before: typescript-language-server published nothing for a list that
/// stayed empty, and every clean → clean edit waited out the cap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_l1_a_typescript_edit_that_leaves_a_file_clean_is_answered_as_checked() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = kodik_lsp::LspConfig {
        servers: vec![cfg],
        diagnostics_cap: std::time::Duration::from_secs(4),
        ..kodik_lsp::LspConfig::default()
    };
    let h = Harness::with_config(dir.path(), config);
    h.write("tsconfig.json", r#"{"compilerOptions":{"strict":true},"include":["src"]}"#);
    let c = h.write("src/c.ts", "export function c(): number { return 1; }\n");
    let server = h.servers.server_for(&c).await.unwrap();
    for n in 2..5 {
        let text = format!("export function c(): number {{ return {n}; }}\n");
        std::fs::write(&c, &text).unwrap();
        let d = server.diagnostics(&c, Some(&text)).await.unwrap();
        assert!(d.items.is_empty() && !d.possibly_stale, "edit {n}: {d:?}");
    }
    let bad = "export function c(): number { return \"x\"; }\n";
    std::fs::write(&c, bad).unwrap();
    let d = server.diagnostics(&c, Some(bad)).await.unwrap();
    assert!(d.items.len() == 1 && !d.possibly_stale, "{d:?}");
    // Like `sed -i` in a shell, back to a clean file.
    h.write("src/c.ts", "export function c(): number { return 7; }\n");
    let lints = h.call("read_lints", json!({"paths": ["src/c.ts"]})).await.text_content();
    assert!(lints.contains("No errors or warnings in 1 checked file"), "{lints}");
    assert!(!lints.contains("may be from before"), "{lints}");
}

/// L1: in Go, a package rewritten on disk changes the diagnostics of an open file that calls
/// it on the next `read_lints` (before: the caller's publish from before the change passed as
/// current: "No errors or warnings", and the error only on the call after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_a_go_package_changed_on_disk_reaches_its_callers_lints_at_once() {
    let Some(cfg) = configured("gopls", "gopls") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("go.mod", "module example.com/m\n\ngo 1.19\n");
    h.write("util/util.go", "package util\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n");
    h.write("main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/util\"\n)\n\nfunc main() {\n\tfmt.Println(util.Add(1, 2))\n}\n");

    h.lsp(json!({"operation": "hover", "path": "util/util.go", "line": 4, "symbol": "Add"})).await;
    let lints = h.call("read_lints", json!({"paths": ["main.go"]})).await.text_content();
    assert!(lints.contains("No errors or warnings in 1 checked file"), "{lints}");
    // Like `sed -i 's/func Add(a, b int)/func Add(a, b, c int)/' util/util.go`.
    h.write("util/util.go", "package util\n\n// Add adds.\nfunc Add(a, b, c int) int { return a + b + c }\n");
    let lints = h.call("read_lints", json!({"paths": ["main.go"]})).await.text_content();
    assert!(lints.contains("main.go:10:") && lints.contains("not enough arguments"), "{lints}");
}

/// L1: after an edit of one C file, another open C file's diagnostics come at once and without
/// a "may be from before the last change" note (before: the edit made every open file wait
/// 10 s for a publish clangd never sends for a file whose inputs did not change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_an_edit_of_one_c_file_leaves_other_files_lints_current_in_clangd() {
    let Some(cfg) = configured("clangd", "clangd") else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = kodik_lsp::LspConfig {
        servers: vec![cfg],
        diagnostics_cap: std::time::Duration::from_secs(5),
        ..kodik_lsp::LspConfig::default()
    };
    let h = Harness::with_config(dir.path(), config);
    let root = h.root.display().to_string();
    let entry = |f: &str| json!({"directory": root, "file": f, "arguments": ["cc", "-Iinclude", "-c", f]});
    h.write("compile_commands.json", &json!([entry("src/main.c"), entry("src/util.c")]).to_string());
    h.write("include/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\n#endif\n");
    h.write("src/util.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n");
    let main = h.write("src/main.c", "#include \"util.h\"\nint main(void) {\n    return add(1, 2);\n}\n");

    let lints = h.call("read_lints", json!({"paths": ["src/util.c"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    let edited = "#include \"util.h\"\nint main(void) {\n    return add(1, 3);\n}\n";
    std::fs::write(&main, edited).unwrap();
    let server = h.servers.server_for(&main).await.unwrap();
    server.diagnostics(&main, Some(edited)).await.unwrap();
    let lints = h.call("read_lints", json!({"paths": ["src/util.c"]})).await.text_content();
    assert!(lints.contains("No errors or warnings in 1 checked file"), "{lints}");
    assert!(!lints.contains("may be from before"), "{lints}");
}

/// L2, L6: in TypeScript, a file created and a file moved by a shell command are in the very
/// next `references` and `incoming_calls` (before: 3 of 7 references and "No results" for the
/// callers until tsserver's own rescan, seconds later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l6_files_created_and_moved_on_disk_reach_typescript_references_at_once() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write(
        "tsconfig.json",
        r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
    );
    h.write("package.json", r#"{"name": "tsproj", "version": "1.0.0"}"#);
    h.write("src/lib/config.ts", "export interface Config { name: string; port: number; }\n\n\n\n\n/** Parse */\nexport function parseConfig(text: string): Config {\n  return { name: text, port: 1 };\n}\n");
    h.write("src/lib/index.ts", "export { parseConfig as parse } from \"./config\";\n");
    h.write("src/main.ts", "import { parse } from \"./lib\";\nparse(\"a:1\");\n");
    let ask = |op: &str| json!({"operation": op, "path": "src/lib/config.ts", "line": 7, "symbol": "parseConfig"});
    let refs = h.lsp(ask("references")).await;
    assert!(refs.contains("src/main.ts:2:1:"), "{refs}");

    // Like `printf … > src/extra.ts && mv src/main.ts src/entry.ts`.
    h.write("src/extra.ts", "import { parseConfig } from \"./lib/config\";\nparseConfig(\"x\");\n");
    std::fs::rename(h.root.join("src/main.ts"), h.root.join("src/entry.ts")).unwrap();
    let refs = h.lsp(ask("references")).await;
    assert!(refs.contains("src/extra.ts:2:1:") && refs.contains("src/entry.ts:2:1:"), "{refs}");
    assert!(!refs.contains("src/main.ts"), "{refs}");
    let calls = h.lsp(ask("incoming_calls")).await;
    assert!(calls.contains("src/extra.ts:2:1:"), "{calls}");
}
