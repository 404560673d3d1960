//! `lsp` and `read_lints` against real typescript-language-server (typescript 5) and clangd:
//! definition across files, references through an import alias, hover, workspace symbols,
//! and diagnostics after an edit and after its fix (L1, L2, L4, E9). One start per server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Harness, configured};
use kodik_core::{DiagnosticSeverity, DiagnosticsProvider};
use serde_json::json;

/// L1, L2, L4, E9 on typescript-language-server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l2_e9_against_typescript_language_server() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write(
        "tsconfig.json",
        r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
    );
    h.write("src/util.ts", "/** Doubles a value. */\nexport function helper(value: number): number {\n  return value * 2;\n}\n\nexport interface Shape {\n  area(): number;\n}\n\nexport class Square implements Shape {\n  constructor(private side: number) {}\n  area(): number {\n    return this.side * this.side;\n  }\n}\n");
    h.write("src/main.ts", "import { helper as h, Square } from \"./util\";\n\nexport function run(id: number, idx: number): number {\n  return h(h(id)) + idx + new Square(2).area();\n}\n");

    // Once the project is loaded (the first query waits for it), the definition of an import
    // alias is the aliased function (tsserver's syntax-only server answered the import line).
    let def = h
        .lsp(json!({"operation": "definition", "path": "src/main.ts", "line": 4, "symbol": "h", "occurrence": 2}))
        .await;
    assert!(def.contains("src/util.ts:2:17: export function helper(value: number): number {"), "{def}");
    let def = h.lsp(json!({"operation": "definition", "path": "src/main.ts", "line": 4, "symbol": "Square"})).await;
    assert!(def.contains("src/util.ts:10:14: export class Square implements Shape {"), "{def}");
    let refs = h.lsp(json!({"operation": "references", "path": "src/util.ts", "line": 2, "symbol": "helper"})).await;
    assert!(refs.contains("src/main.ts:1:10:"), "{refs}");
    let hover = h.lsp(json!({"operation": "hover", "path": "src/main.ts", "line": 4, "symbol": "Square"})).await;
    assert!(hover.contains("Square(side: number): Square"), "{hover}");
    let imp = h.lsp(json!({"operation": "implementation", "path": "src/util.ts", "line": 6, "symbol": "Shape"})).await;
    assert!(imp.contains("src/util.ts:10:14:"), "{imp}");
    let ws = h.lsp(json!({"operation": "workspace_symbols", "query": "Square"})).await;
    assert!(ws.contains("src/util.ts:10:1: (class Square) export class Square"), "{ws}");

    let main = h.root.join("src/main.ts");
    let bad = "import { helper as h, Square } from \"./util\";\n\nexport function run(id: number, idx: number): number {\n  return h(\"x\") + idx;\n}\n";
    std::fs::write(&main, bad).unwrap();
    let diags = h.servers.diagnostics(&main, bad).await;
    assert!(
        diags.iter().any(|d| d.severity == DiagnosticSeverity::Error && d.line == 4 && d.column == 12),
        "{diags:?}"
    );
    let good = "import { helper as h } from \"./util\";\n\nexport function run(id: number, idx: number): number {\n  return h(id) + idx;\n}\n";
    std::fs::write(&main, good).unwrap();
    let diags = h.servers.diagnostics(&main, good).await;
    assert!(diags.iter().all(|d| d.severity != DiagnosticSeverity::Error), "stale errors after the fix: {diags:?}");
    let lints = h.call("read_lints", json!({"paths": ["src"]})).await.text_content();
    assert!(lints.contains("No errors or warnings in 2 checked files"), "{lints}");
    assert_eq!(h.servers.starts().await, 1);
}

/// L2, L6: the very first query of a fresh typescript-language-server, answered while tsserver
/// still loads the project, is asked again once it has loaded: every reference (through the
/// re-export and the renamed import), not the declaration alone with an "indexing" note, and
/// the definition across the re-export, not the import line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l6_first_typescript_query_waits_for_the_project_instead_of_a_partial_answer() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    for op in ["references", "definition"] {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::new(dir.path(), cfg.clone());
        h.write(
            "tsconfig.json",
            r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
        );
        h.write("package.json", r#"{"name": "tsproj", "version": "1.0.0"}"#);
        h.write(
            "src/lib/config.ts",
            "export interface Config { name: string; port: number; }\n\n\n\n\n/** Parse */\nexport function parseConfig(text: string): Config {\n  return { name: text, port: 1 };\n}\n",
        );
        h.write("src/lib/index.ts", "export { parseConfig as parse } from \"./config\";\n");
        h.write("src/main.ts", "import { parse } from \"./lib\";\nparse(\"a:1\");\n");
        if op == "references" {
            let refs = h
                .lsp(
                    json!({"operation": "references", "path": "src/lib/config.ts", "line": 7, "symbol": "parseConfig"}),
                )
                .await;
            assert!(refs.contains("src/lib/index.ts:1:10:") && refs.contains("src/main.ts:2:1:"), "{refs}");
            assert!(!refs.contains("indexing"), "{refs}");
        } else {
            let def =
                h.lsp(json!({"operation": "definition", "path": "src/main.ts", "line": 2, "symbol": "parse"})).await;
            assert!(def.contains("src/lib/config.ts:7:17:") || def.contains("src/lib/index.ts:1:"), "{def}");
            assert!(!def.contains("src/main.ts:1:10:"), "{def}");
        }
    }
}

/// L1: a folder of many TypeScript files is checked with the files open together (tsserver
/// checks them in one pass) and every file's own diagnostics come back, fresh: the one error,
/// in the right file, no "may be from before the last change" note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_read_lints_on_a_typescript_folder_checks_every_file_together() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("tsconfig.json", r#"{"compilerOptions":{"strict":true},"include":["src"]}"#);
    for i in 1..=60 {
        h.write(&format!("src/m{i}.ts"), &format!("export function f{i}(x: number): number {{ return x + {i}; }}\n"));
    }
    h.write("src/zz.ts", "import { f7 } from \"./m7\";\nexport const bad: string = f7(1);\n");
    let started = std::time::Instant::now();
    let out = h.call("read_lints", json!({})).await;
    eprintln!("read_lints of 61 TypeScript files took {:?}", started.elapsed());
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.starts_with("1 error(s), 0 warning(s), 1 diagnostic(s) in 61 checked file(s):"), "{text}");
    assert!(text.contains("src/zz.ts:2:14: error [typescript 2322]"), "{text}");
    assert!(!text.contains("may be from before"), "{text}");
    assert_eq!(h.servers.starts().await, 1);
}

/// L6: only a tsconfig project makes typescript-language-server count as loading from its
/// start; with loose files (no progress is ever reported for them) it is ready at once, so a
/// query does not wait out the grace (before: a loose .js file's first query took 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_typescript_counts_as_loading_only_for_a_tsconfig_project() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let loose = tempfile::tempdir().unwrap();
    let h = Harness::new(loose.path(), cfg.clone());
    let file = h.write("loose.js", "function add(a, b) { return a + b; }\nadd(1, 2);\n");
    let server = h.servers.server_for(&file).await.unwrap();
    assert_eq!(server.readiness(), kodik_lsp::Readiness::Ready);
    let refs = h.lsp(json!({"operation": "references", "path": "loose.js", "line": 1, "symbol": "add"})).await;
    assert!(refs.contains("loose.js:2:1: add(1, 2);") && !refs.contains("indexing"), "{refs}");

    let project = tempfile::tempdir().unwrap();
    let h = Harness::new(project.path(), cfg);
    h.write("tsconfig.json", r#"{"compilerOptions":{"strict":true},"include":["src"]}"#);
    let file = h.write("src/a.ts", "export const a = 1;\n");
    let server = h.servers.server_for(&file).await.unwrap();
    assert_eq!(server.readiness(), kodik_lsp::Readiness::Indexing);
}

/// L2: in a monorepo each package has its own server; references and incoming calls asked in
/// one package also ask the other packages' servers, so the uses in a sibling package are listed
/// and the packages searched are named (before: "1 location" from the library's own package,
/// presented as complete, and "No results" for incoming_calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_references_in_one_package_of_a_monorepo_include_the_other_packages() {
    let Some(cfg) = configured("typescript-language-server", "typescript-language-server") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    h.write("package.json", r#"{"name":"mono","private":true,"workspaces":["packages/*"]}"#);
    h.write("packages/lib/tsconfig.json", r#"{"compilerOptions":{"strict":true,"composite":true},"include":["src"]}"#);
    h.write("packages/lib/package.json", r#"{"name":"lib","version":"1.0.0"}"#);
    h.write("packages/lib/src/index.ts", "export function sharedHelper(n: number): number {\n  return n * 2;\n}\n");
    h.write("packages/app/tsconfig.json", r#"{"compilerOptions":{"strict":true},"include":["src"]}"#);
    h.write("packages/app/package.json", r#"{"name":"app","version":"1.0.0"}"#);
    h.write(
        "packages/app/src/main.ts",
        "import { sharedHelper } from \"../../lib/src/index\";\n\nexport function run() {\n  return sharedHelper(2);\n}\n",
    );
    // A dependency's package.json is not a project of the workspace: it is neither asked nor named.
    h.write("packages/app/node_modules/dep/package.json", r#"{"name":"dep","version":"1.0.0"}"#);
    h.write("packages/app/node_modules/dep/index.js", "module.exports = 1;\n");
    let refs = h
        .lsp(json!({"operation": "references", "path": "packages/lib/src/index.ts", "line": 1, "symbol": "sharedHelper"}))
        .await;
    assert!(refs.contains("3 locations"), "{refs}");
    assert!(refs.contains("packages/lib/src/index.ts:1:17:"), "{refs}");
    assert!(refs.contains("packages/app/src/main.ts:1:10: import { sharedHelper }"), "{refs}");
    assert!(refs.contains("packages/app/src/main.ts:4:10: return sharedHelper(2);"), "{refs}");
    assert!(refs.contains("(also searched the workspace's other projects: packages/app)"), "{refs}");
    assert!(!refs.contains("node_modules") && !refs.contains("Not searched"), "{refs}");
    let calls = h
        .lsp(json!({"operation": "incoming_calls", "path": "packages/lib/src/index.ts", "line": 1, "symbol": "sharedHelper"}))
        .await;
    assert!(calls.contains("packages/app/src/main.ts:3:17: (function run)"), "{calls}");
    // Asked from the app package, its own uses and the library's declaration are found.
    let refs = h
        .lsp(
            json!({"operation": "references", "path": "packages/app/src/main.ts", "line": 4, "symbol": "sharedHelper"}),
        )
        .await;
    assert!(
        refs.contains("packages/app/src/main.ts:4:10:") && refs.contains("packages/lib/src/index.ts:1:17:"),
        "{refs}"
    );
}

/// L1, L2, L4, E9 on clangd (push diagnostics only, with versions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l1_l2_e9_against_clangd() {
    let Some(cfg) = configured("clangd", "clangd") else { return };
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new(dir.path(), cfg);
    let root = h.root.display().to_string();
    let entry = |f: &str| json!({"directory": root, "file": f, "arguments": ["cc", "-std=c11", "-Wall", "-c", f]});
    h.write("compile_commands.json", &json!([entry("main.c"), entry("util.c")]).to_string());
    h.write("util.h", "#pragma once\n/* Doubles a value. */\nint helper(int value);\n");
    h.write("util.c", "#include \"util.h\"\n\nint helper(int value) { return value * 2; }\n");
    h.write("main.c", "#include \"util.h\"\n\nint run(int id, int idx) { return helper(helper(id)) + idx; }\n");

    let def = h
        .lsp(json!({"operation": "definition", "path": "main.c", "line": 3, "symbol": "helper", "occurrence": 2}))
        .await;
    assert!(def.contains("util.h:3:5:") || def.contains("util.c:3:5:"), "{def}");
    let hover = h.lsp(json!({"operation": "hover", "path": "main.c", "line": 3, "symbol": "helper"})).await;
    assert!(hover.contains("int helper(int value)"), "{hover}");
    let refs = h.lsp(json!({"operation": "references", "path": "main.c", "line": 3, "symbol": "helper"})).await;
    assert!(refs.contains("main.c:3:35:") && refs.contains("main.c:3:42:") && refs.contains("util.h:3:5:"), "{refs}");

    let main = h.root.join("main.c");
    let bad = "#include \"util.h\"\n\nint run(int id, int idx) { return helper(\"x\", 2) + idx; }\n";
    std::fs::write(&main, bad).unwrap();
    let diags = h.servers.diagnostics(&main, bad).await;
    assert!(diags.iter().any(|d| d.severity == DiagnosticSeverity::Error && d.line == 3), "{diags:?}");
    let good = "#include \"util.h\"\n\nint run(int id, int idx) { return helper(id) + idx; }\n";
    std::fs::write(&main, good).unwrap();
    let diags = h.servers.diagnostics(&main, good).await;
    assert!(diags.is_empty(), "stale errors after the fix: {diags:?}");
    let lints = h.call("read_lints", json!({"paths": ["main.c"]})).await.text_content();
    assert!(lints.contains("No errors or warnings"), "{lints}");
    assert_eq!(h.servers.starts().await, 1);
}
