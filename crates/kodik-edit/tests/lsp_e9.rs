//! E9 against a real typescript-language-server: an edit result carries the written file's
//! real errors, and not those the project itself disproves (test-runner globals whose types are
//! not installed, Deno globals and imports in a Deno project); read_lints still shows them all.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;
#[path = "../../kodik-lsp/tests/common/mod.rs"]
mod lsp_common;

use std::sync::Arc;

use common::Env;
use kodik_lsp::{LanguageServers, LspConfig, LspToolset};
use serde_json::json;

/// An edit-tools workspace whose diagnostics come from a real typescript-language-server, with
/// `read_lints` registered beside the edit tools. `None` when the server is not installed
/// (outside CI only; in CI that fails).
fn typescript_env() -> Option<(Env, Arc<LanguageServers>)> {
    let cfg = lsp_common::configured("typescript-language-server", "typescript-language-server")?;
    let mut env = Env::new();
    let servers =
        Arc::new(LanguageServers::new(LspConfig { servers: vec![cfg], ..LspConfig::default() }, vec![env.root()]));
    LspToolset::new(servers.clone()).register(&mut env.registry);
    env.cx.diagnostics = Some(servers.clone());
    Some((env, servers))
}

/// E9: in a test file of a project with no test-runner types installed, `describe`, `it`,
/// `test`, `expect`, `beforeEach` are the runner's globals, not errors of the edit; the type
/// error the edit introduces is reported in the same result. read_lints shows the truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_test_runner_globals_without_installed_types_are_not_edit_errors() {
    let Some((env, _servers)) = typescript_env() else { return };
    env.write(
        "tsconfig.json",
        r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
    );
    env.write("package.json", r#"{"name": "t", "version": "1.0.0", "scripts": {"test": "jest"}}"#);
    env.write("src/sum.ts", "export function sum(a: number, b: number): number {\n  return a + b;\n}\n");
    env.write(
        "src/sum.test.ts",
        "import { sum } from \"./sum\";\n\ndescribe(\"sum\", () => {\n  beforeEach(() => {});\n  it(\"adds\", () => {\n    expect(sum(1, 2)).toBe(3);\n  });\n  test(\"again\", () => {\n    expect(sum(2, 2)).toBe(4);\n  });\n});\n",
    );
    env.read("src/sum.test.ts");
    let out = env
        .edit(
            "src/sum.test.ts",
            &[("    expect(sum(2, 2)).toBe(4);", "    const total: string = sum(2, 2);\n    expect(total).toBe(4);")],
        )
        .await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("Errors in the written file (1):"), "{text}");
    assert!(text.contains("9:11 Type 'number' is not assignable to type 'string'."), "{text}");
    // The diff below shows the code itself; only the errors above it count.
    let errors = text.split("\n--- a/").next().unwrap();
    for global in ["describe", "beforeEach", "'it'", "'test'", "expect"] {
        assert!(!errors.contains(global), "`{global}` reported as an error: {text}");
    }
    assert_eq!(out.meta["diagnostics"].as_array().map(Vec::len), Some(1), "{}", out.meta);

    let lints = env.call("read_lints", json!({"paths": ["src/sum.test.ts"]})).await.text_content();
    assert!(lints.contains("Cannot find name 'describe'") && lints.contains("9:11: error"), "{lints}");
}

/// E9: in a Deno project (deno.json), `Deno`, `jsr:`/`npm:`/`https:`/`node:` imports, an
/// import mapped in deno.json and a relative import ending in `.ts` are not edit errors; a type
/// error in the same file is, in the same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_deno_globals_and_imports_in_a_deno_project_are_not_edit_errors() {
    let Some((env, _servers)) = typescript_env() else { return };
    env.write("deno.json", "{\n  \"imports\": { \"@std/path\": \"jsr:@std/path@^1\" }\n}\n");
    // An editor's tsconfig beside it, as Deno projects that also build with tsc have: with it
    // tsserver objects to the `.ts` ending Deno requires.
    env.write(
        "tsconfig.json",
        r#"{"compilerOptions": {"strict": true, "target": "es2022", "module": "esnext", "moduleResolution": "bundler"}}"#,
    );
    env.write("util.ts", "export function helper(n: number): number {\n  return n;\n}\n");
    env.write(
        "main.ts",
        "import { assertEquals } from \"jsr:@std/assert@1\";\nimport chalk from \"npm:chalk@5\";\nimport { join } from \"@std/path\";\nimport { serve } from \"https://deno.land/std@0.200.0/http/server.ts\";\nimport { readFileSync } from \"node:fs\";\nimport { helper } from \"./util.ts\";\n\nconsole.log(Deno.args, assertEquals, chalk, join, serve, readFileSync, helper(1));\n",
    );
    env.read("main.ts");
    let out = env.edit("main.ts", &[("helper(1));\n", "helper(1));\nconst port: number = \"8080\";\n")]).await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("Errors in the written file (1):"), "{text}");
    assert!(text.contains("9:7 Type 'string' is not assignable to type 'number'."), "{text}");
    let errors = text.split("\n--- a/").next().unwrap();
    for disproved in ["jsr:", "npm:", "@std/path", "https:", "node:fs", "Deno'", ".ts' extension"] {
        assert!(!errors.contains(disproved), "`{disproved}` reported as an error: {text}");
    }
    // read_lints reports what the server says, all of it.
    let lints = env.call("read_lints", json!({"paths": ["main.ts"]})).await.text_content();
    for said in ["Cannot find name 'Deno'", "'jsr:@std/assert@1'", "'@std/path'", "'.ts' extension", "9:7: error"] {
        assert!(lints.contains(said), "read_lints lost `{said}`: {lints}");
    }
}

/// E9: a file whose language server cannot check it (here one that exits at start) is not
/// reported like a clean file — edit_file, create_file and apply_patch say it was not checked
/// and why, and the edits themselves are written.
#[tokio::test]
async fn e9_a_file_the_server_could_not_check_is_not_shown_as_clean() {
    let mut env = Env::new();
    let cfg = kodik_lsp::ServerConfig::new("broken-py", "/bin/false", &[], &[("py", "python")]);
    let servers =
        Arc::new(LanguageServers::new(LspConfig { servers: vec![cfg], ..LspConfig::default() }, vec![env.root()]));
    env.cx.diagnostics = Some(servers);
    env.write("a.py", "x = 1\n");
    env.read("a.py");
    let out = env.edit("a.py", &[("x = 1", "x = 2")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    let text = out.text_content();
    assert!(text.contains("Not checked for errors (the written file): ") && text.contains("broken-py"), "{text}");
    assert!(out.meta["not_checked"].as_str().is_some_and(|w| w.contains("broken-py")), "{}", out.meta);
    assert_eq!(env.text("a.py"), "x = 2\n", "the edit itself is written");

    let created = env.call("create_file", json!({"path": "b.py", "content": "y = 1\n"})).await;
    assert!(created.text_content().contains("Not checked for errors"), "{}", created.text_content());
    assert!(created.meta["not_checked"].is_string(), "{}", created.meta);
    let patch = "*** Begin Patch\n*** Update File: b.py\n@@\n-y = 1\n+y = 2\n*** End Patch\n";
    let patched = env.call("apply_patch", json!({"input": patch})).await;
    assert!(patched.text_content().contains("Not checked for errors (`b.py`)"), "{}", patched.text_content());
    assert!(patched.meta["not_checked"]["b.py"].is_string(), "{}", patched.meta);
    assert_eq!(env.text("b.py"), "y = 2\n");
}
