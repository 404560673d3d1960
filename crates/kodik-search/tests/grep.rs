//! Behaviour tests of kodik-search's `grep` (SPEC IDs in the test names).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)
mod common;

use std::time::{Duration, Instant};

use common::Env;
use kodik_core::{Settings, ToolStatus};
use kodik_search::SearchToolset;
use serde_json::json;

fn tree() -> Env {
    let env = Env::new();
    env.write("src/main.rs", "fn main() {\n    let Foo = 1;\n    foo_bar();\n}\n");
    env.write("src/lib.rs", "pub fn foo() {}\n\npub fn bar() {}\n");
    env.write("src/ui/app.ts", "const foo = 1;\n");
    env.write("app.ts", "let foo = 2;\n");
    env.write("lib/src/deep.ts", "foo();\n");
    env.write("README.md", "# Foo\nfoo here\n");
    env
}

#[tokio::test]
async fn gr1_content_mode_has_path_and_line_numbers_sorted_by_path() {
    let env = tree();
    let t = env.ok("grep", json!({"pattern": "foo", "output_mode": "content"})).await;
    assert_eq!(
        t,
        "Found 6 matching lines in 6 files\n\
         README.md:2:foo here\n\
         app.ts:1:let foo = 2;\n\
         lib/src/deep.ts:1:foo();\n\
         src/lib.rs:1:pub fn foo() {}\n\
         src/main.rs:3:    foo_bar();\n\
         src/ui/app.ts:1:const foo = 1;"
    );
}

#[tokio::test]
async fn gr1_gr4_default_mode_shows_lines_with_path_and_number_files_and_count_on_request() {
    // Issue 17.1: what the description and GR4 promise is the default, not only an option.
    let env = tree();
    env.write("e.txt", "a\n\nb\n");
    let t = env.ok("grep", json!({"pattern": "^$"})).await;
    assert_eq!(t, "Found 2 matching lines in 2 files\ne.txt:2:\nsrc/lib.rs:2:");
    let t = env.ok("grep", json!({"pattern": "fn ", "path": "src"})).await;
    assert_eq!(
        t,
        "Found 3 matching lines in 2 files\nsrc/lib.rs:1:pub fn foo() {}\nsrc/lib.rs:3:pub fn bar() {}\n\
         src/main.rs:1:fn main() {"
    );
    let t = env.ok("grep", json!({"pattern": "fn ", "path": "src", "output_mode": "files_with_matches"})).await;
    assert_eq!(t, "Found 2 files\nsrc/lib.rs\nsrc/main.rs");
    let t = env.ok("grep", json!({"pattern": "fn ", "output_mode": "count"})).await;
    assert_eq!(t, "Found 3 matching lines in 2 files\nsrc/lib.rs:2\nsrc/main.rs:1");
}

#[tokio::test]
async fn gr1_case_smart_case_fixed_strings_and_word() {
    let env = tree();
    let n = |t: &str| t.lines().skip(1).count();
    let t = env.ok("grep", json!({"pattern": "FOO", "output_mode": "content", "case_insensitive": true})).await;
    assert_eq!(n(&t), 8, "{t}");
    // Smart case: lower-case pattern ignores case, an upper-case letter makes it exact.
    let t = env.ok("grep", json!({"pattern": "foo", "output_mode": "content", "smart_case": true})).await;
    assert_eq!(n(&t), 8, "{t}");
    let t = env.ok("grep", json!({"pattern": "Foo", "output_mode": "content", "smart_case": true})).await;
    assert_eq!(n(&t), 2, "{t}");
    let t = env.ok("grep", json!({"pattern": "foo();", "fixed_strings": true, "output_mode": "content"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nlib/src/deep.ts:1:foo();");
    let t = env.ok("grep", json!({"pattern": "foo", "word": true, "path": "src", "output_mode": "content"})).await;
    assert!(!t.contains("foo_bar"), "{t}");
    assert!(t.contains("src/lib.rs:1:"), "{t}");
}

#[tokio::test]
async fn gr1_multiline_context_and_max_count() {
    let env = Env::new();
    env.write("a.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\n");
    let t = env.ok("grep", json!({"pattern": "two\\nthree", "multiline": true, "output_mode": "content"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\na.txt:2:two\na.txt:3:three");
    let t = env.ok("grep", json!({"pattern": "four", "context": 1, "output_mode": "content"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\na.txt-3-three\na.txt:4:four\na.txt-5-five");
    let t = env
        .ok(
            "grep",
            json!({"pattern": "^(two|six)$", "context_before": 1, "context_after": 0, "output_mode": "content"}),
        )
        .await;
    assert_eq!(t, "Found 2 matching lines in 1 file\na.txt-1-one\na.txt:2:two\n--\na.txt-5-five\na.txt:6:six");
    let t = env.ok("grep", json!({"pattern": "e", "max_count": 2, "output_mode": "content"})).await;
    assert_eq!(t, "Found 2 matching lines in 1 file\na.txt:1:one\na.txt:3:three");
}

#[tokio::test]
async fn gr1_g20_head_limit_and_offset_page_through_results_and_the_full_result_is_saved() {
    let env = Env::new();
    for i in 0..30 {
        env.write(&format!("f{i:02}.txt"), "hit\n");
    }
    let args = json!({"pattern": "hit", "head_limit": 10, "output_mode": "files_with_matches"});
    let out = env.call("grep", args).await;
    let t = out.text_content();
    assert!(t.starts_with("Found 30 files\nf00.txt\n"), "{t}");
    assert!(
        t.contains("f09.txt\n[Showing entries 1–10 of 30. Next page: offset 10. The full result (30 entries)"),
        "{t}"
    );
    assert_eq!(out.meta["truncated"], true);
    // The page does not show everything: the whole result, in order, is in the saved file.
    let full = out.meta["full_output"].as_str().unwrap();
    assert!(t.contains(full), "{t}");
    let saved = std::fs::read_to_string(full).unwrap();
    std::fs::remove_file(full).unwrap();
    let expected: String = (0..30).map(|i| format!("f{i:02}.txt\n")).collect();
    assert_eq!(saved, expected);

    let out = env.call("grep", json!({"pattern": "hit", "head_limit": 10, "offset": 25})).await;
    let t = out.text_content();
    assert!(t.contains("f25.txt:1:hit\n") && t.contains("f29.txt:1:hit\n[Showing entries 26–30 of 30."), "{t}");
    assert!(!t.contains("f24.txt"));
    // The saved result names each file once above its lines, and starts before the offset.
    let full = out.meta["full_output"].as_str().unwrap();
    let expected: Vec<String> = (0..30).map(|i| format!("f{i:02}.txt\n1:hit\n")).collect();
    assert_eq!(std::fs::read_to_string(full).unwrap(), expected.join("\n"));
    std::fs::remove_file(full).unwrap();
    let t = env.ok("grep", json!({"pattern": "hit", "offset": 99})).await;
    assert!(t.contains("past the end"), "{t}");
    // Everything shown: nothing saved.
    let out = env.call("grep", json!({"pattern": "hit", "path": "f01.txt"})).await;
    assert_eq!(out.text_content(), "Found 1 matching line in 1 file\nf01.txt:1:hit");
    assert!(out.meta["full_output"].is_null());
}

#[tokio::test]
async fn gr1_g20_a_cut_page_with_context_saves_every_group_under_its_file() {
    let env = Env::new();
    env.write("a.txt", "x\nhit\ny\n");
    env.write("b.txt", "hit\n");
    let out = env.call("grep", json!({"pattern": "hit", "context": 1, "head_limit": 2})).await;
    let t = out.text_content();
    assert!(
        t.starts_with("Found 2 matching lines in 2 files\na.txt-1-x\na.txt:2:hit\n[Showing entries 1–2 of 5."),
        "{t}"
    );
    let full = out.meta["full_output"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(full).unwrap(), "a.txt\n1-x\n2:hit\n3-y\n\nb.txt\n1:hit\n");
    std::fs::remove_file(full).unwrap();
    // The page shows the `--` between files as an entry of its own.
    let t = env.ok("grep", json!({"pattern": "hit", "context": 1, "head_limit": 2, "offset": 3})).await;
    assert!(t.starts_with("Found 2 matching lines in 2 files\n--\nb.txt:1:hit\n[Showing entries 4–5 of 5."), "{t}");
}

#[tokio::test]
async fn gr1_file_type_from_ripgreps_table() {
    let env = tree();
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "type": "rust"})).await;
    assert_eq!(t, "Found 2 files\nsrc/lib.rs\nsrc/main.rs");
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "type": "ts,md"})).await;
    assert_eq!(t, "Found 4 files\nREADME.md\napp.ts\nlib/src/deep.ts\nsrc/ui/app.ts");
    let e = env.err("grep", json!({"pattern": "foo", "type": "rustt"})).await;
    assert!(e.contains("unknown file type `rustt`") && e.contains("rust"), "{e}");
    let e = env.err("grep", json!({"pattern": "foo", "type": "жж"})).await;
    assert!(e.contains("unknown file type `жж`"), "{e}");
}

/// Type names are case-insensitive (`JS` is the js type, not only `*.js`; `Rust`), `Makefile`
/// means the make type, and an extension missing from the table is told to use `glob`. Before,
/// `JS` found only `d.js`, `Rust` and `Makefile` were unknown, and `astro` got "did you mean
/// one of: asciidoc, asm, asp?" with no way on.
#[tokio::test]
async fn gr1_file_type_names_ignore_case_and_an_unknown_extension_is_told_to_use_glob() {
    let env = Env::new();
    for f in ["c.jsx", "d.js", "e.mjs", "m.rs", "Makefile", "x.astro"] {
        env.write(f, "fn foo\n");
    }
    let files = |t: String| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    let list = |t: &str| json!({"pattern": "foo", "type": t, "output_mode": "files_with_matches"});
    let js = files(env.ok("grep", list("JS")).await);
    assert_eq!(js, ["c.jsx", "d.js", "e.mjs"]);
    assert_eq!(js, files(env.ok("grep", list("js")).await));
    assert_eq!(files(env.ok("grep", list("Rust")).await), ["m.rs"]);
    assert_eq!(files(env.ok("grep", list("Makefile")).await), ["Makefile"]);
    let e = env.err("grep", list("astro")).await;
    assert!(e.contains("unknown file type `astro`") && e.contains("use `glob: \"*.astro\"` instead of `type`"), "{e}");
    let t = env.ok("grep", json!({"pattern": "foo", "glob": "*.astro", "output_mode": "files_with_matches"})).await;
    assert_eq!(files(t), ["x.astro"]);
}

#[tokio::test]
async fn gr1_file_type_takes_an_extension_or_a_common_language_name() {
    let env = tree();
    env.write("conf/a.yml", "foo: 1\n");
    env.write("conf/b.yaml", "foo: 2\n");
    env.write("web/x.jsx", "foo()\n");
    env.write("web/y.js", "foo()\n");
    let files = |t: &str| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    for (ty, expected) in [
        ("rs", vec!["src/lib.rs", "src/main.rs"]),
        (".yml", vec!["conf/a.yml"]),
        ("*.jsx", vec!["web/x.jsx"]),
        ("javascript", vec!["web/x.jsx", "web/y.js"]),
        ("yaml,rs", vec!["conf/a.yml", "conf/b.yaml", "src/lib.rs", "src/main.rs"]),
    ] {
        let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "type": ty})).await;
        assert_eq!(files(&t), expected, "{ty}: {t}");
    }
    // A word that merely contains short type names is not pointed at them.
    let e = env.err("grep", json!({"pattern": "foo", "type": "javascriptx"})).await;
    assert!(!e.contains(" c,") && !e.contains(", r,") && !e.contains("java,"), "{e}");
}

#[tokio::test]
async fn gr2_bad_regex_is_a_clear_error_with_position_and_nothing_is_kept() {
    let env = tree();
    for _ in 0..3 {
        let out = env.call("grep", json!({"pattern": "foo(bar"})).await;
        assert_eq!(out.status, ToolStatus::Error);
        let e = out.text_content();
        assert!(e.contains("invalid regex `foo(bar`") && e.contains("unclosed group"), "{e}");
        assert!(e.contains("    foo(bar\n       ^\n"), "caret under the pattern as given: {e}");
        assert!(e.contains("at character 4") && e.contains("fixed_strings"), "{e}");
        assert_ne!(out.meta["unchanged"], true, "a failed call is not remembered");
    }
    let e = env.err("grep", json!({"pattern": "a\\nb"})).await;
    assert!(e.contains("multiline: true"), "{e}");
}

#[tokio::test]
async fn gr2_cancellation_stops_the_walk_at_once() {
    let env = Env::new();
    let line = "abcdefghij".repeat(10);
    let body: String = (0..2000).map(|_| format!("{line}\n")).collect();
    for i in 0..400 {
        env.write(&format!("d{}/f{i}.txt", i % 20), &body);
    }
    let cx = env.cx.for_call("c1");
    let tool = env.reg.get("grep").unwrap().clone();
    let cancel = cx.cancel.clone();
    let task = tokio::spawn(async move {
        tool.call(json!({"pattern": "(a|b)+c.*j$", "output_mode": "content", "head_limit": 0}), &cx).await
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t0 = Instant::now();
    cancel.cancel();
    let out = task.await.unwrap();
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text_content());
    assert!(t0.elapsed() < Duration::from_millis(500), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn gr3_single_file_detects_its_encoding_windows_1251_utf8_utf16() {
    let env = Env::new();
    let text = "// Комментарий на русском языке\nфункция возвращает значение\n";
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode(text);
    env.write("win1251.txt", &cp1251);
    env.write("utf8.txt", text);
    let mut utf16le: Vec<u8> = vec![0xFF, 0xFE];
    utf16le.extend(text.encode_utf16().flat_map(|u| u.to_le_bytes()));
    env.write("utf16le.txt", &utf16le);
    let utf16be_nobom: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
    env.write("utf16be.txt", &utf16be_nobom);
    for f in ["win1251.txt", "utf8.txt", "utf16le.txt", "utf16be.txt"] {
        let t = env.ok("grep", json!({"pattern": "возвращает", "path": f, "output_mode": "content"})).await;
        assert_eq!(t, format!("Found 1 matching line in 1 file\n{f}:2:функция возвращает значение"), "{f}");
    }
}

#[tokio::test]
async fn gr3_folder_search_uses_files_encoding_default_bom_sniffing_and_utf8() {
    let text = "привет мир\n";
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode(text);
    let mut utf16le: Vec<u8> = vec![0xFF, 0xFE];
    utf16le.extend(text.encode_utf16().flat_map(|u| u.to_le_bytes()));
    let setup = |env: &Env| {
        env.write("a/win.txt", &cp1251);
        env.write("a/utf8.txt", text);
        env.write("a/utf16.txt", &utf16le);
    };
    let env = Env::new();
    setup(&env);
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "мир"})).await;
    assert_eq!(t, "Found 2 files\na/utf16.txt\na/utf8.txt", "default: BOM sniffing + UTF-8");
    let env = Env::with(SearchToolset::new(), Settings { files_encoding: Some("windows-1251".into()) });
    setup(&env);
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "мир"})).await;
    assert_eq!(t, "Found 2 files\na/utf16.txt\na/win.txt", "files.encoding = windows-1251");
}

#[tokio::test]
async fn gr4_empty_lines_have_path_and_line_number() {
    let env = Env::new();
    env.write("a.txt", "one\n\nthree\n\n");
    env.write("b.txt", "x\r\n\r\ny\r\n");
    let t = env.ok("grep", json!({"pattern": "^$", "output_mode": "content"})).await;
    assert_eq!(t, "Found 3 matching lines in 2 files\na.txt:2:\na.txt:4:\nb.txt:2:");
    let t = env.ok("grep", json!({"pattern": "^$", "output_mode": "count"})).await;
    assert_eq!(t, "Found 3 matching lines in 2 files\na.txt:2\nb.txt:1");
}

#[tokio::test]
async fn gr5_glob_without_slash_matches_any_depth_with_slash_is_anchored() {
    let env = tree();
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "glob": "*.ts"})).await;
    assert_eq!(t, "Found 3 files\napp.ts\nlib/src/deep.ts\nsrc/ui/app.ts");
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "glob": "src/*.rs"})).await;
    assert_eq!(t, "Found 2 files\nsrc/lib.rs\nsrc/main.rs");
    // Anchored at the search folder: `src/*.ts` is not `lib/src/deep.ts` nor `src/ui/app.ts`.
    let out = env.call("grep", json!({"pattern": "foo", "glob": "src/*.ts"})).await;
    assert!(out.text_content().starts_with("No matches"), "{}", out.text_content());
    // ... and relative to `path` when one is given.
    let t = env
        .ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "path": "lib", "glob": "src/*.ts"}))
        .await;
    assert_eq!(t, "Found 1 file\nlib/src/deep.ts");
    // exclude follows the same rules.
    let t = env
        .ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "glob": "*.ts", "exclude": "ui"}))
        .await;
    assert_eq!(t, "Found 2 files\napp.ts\nlib/src/deep.ts");
    let t = env
        .ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "exclude": ["src/**", "*.md"]}))
        .await;
    assert_eq!(t, "Found 2 files\napp.ts\nlib/src/deep.ts");
    let e = env.err("grep", json!({"pattern": "foo", "glob": "src/[a-"})).await;
    assert!(e.contains("invalid glob"), "{e}");
}

#[tokio::test]
async fn g16_kodikignore_hides_hits_and_globs_cannot_bring_them_back() {
    let env = tree();
    env.write(".kodikignore", "*.md\n");
    env.write("src/.kodikignore", "ui/\n");
    env.write("keys.secret", "foo secret\n");
    env.write(".gitignore", "*.secret\n");
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo"})).await;
    assert_eq!(t, "Found 4 files\napp.ts\nlib/src/deep.ts\nsrc/lib.rs\nsrc/main.rs");
    let out = env.call("grep", json!({"pattern": "foo", "glob": ["*.md", "*.secret", "ui/*"]})).await;
    assert!(out.text_content().starts_with("No matches"), "{}", out.text_content());
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "path": "src"})).await;
    assert_eq!(t, "Found 2 files\nsrc/lib.rs\nsrc/main.rs", "rules of a .kodikignore in the searched folder");
    let e = env.err("grep", json!({"pattern": "foo", "path": "README.md"})).await;
    assert!(e.contains(".kodikignore"), "{e}");
}

#[tokio::test]
async fn gr1_hidden_and_binary_files_are_skipped_unless_a_glob_names_hidden() {
    let env = Env::new();
    env.write(".github/ci.yml", "foo: 1\n");
    env.write("bin.dat", b"foo\x00\x01\x02");
    env.write("a.txt", "foo\n");
    let t = env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo"})).await;
    assert_eq!(t, "Found 1 file\na.txt");
    // The NUL comes after the search's first buffer, so hits are found before it is: as with
    // ripgrep's counts, the file still counts as binary and none of its hits are reported.
    let mut late = b"foo\n".repeat(50_000);
    late.extend_from_slice(b"\x00foo\n");
    env.write("late-nul.dat", late);
    for mode in ["count", "content"] {
        let t = env.ok("grep", json!({"output_mode": mode, "pattern": "foo"})).await;
        assert!(t.starts_with("Found 1 matching line in 1 file\na.txt"), "{mode}: {t}");
    }
    let t =
        env.ok("grep", json!({"output_mode": "files_with_matches", "pattern": "foo", "glob": ".github/*.yml"})).await;
    assert_eq!(t, "Found 1 file\n.github/ci.yml");
}

#[tokio::test]
async fn gr1_results_are_in_a_stable_order_across_runs() {
    let env = Env::new();
    for i in 0..200 {
        env.write(&format!("d{}/f{i}.txt", i % 7), format!("needle {i}\n"));
    }
    let first = env.ok("grep", json!({"pattern": "needle", "output_mode": "content", "head_limit": 0})).await;
    let mut sorted: Vec<&str> = first.lines().skip(1).collect();
    let shown = sorted.clone();
    sorted.sort_by_key(|l| l.split(':').next().unwrap().to_string());
    assert_eq!(shown, sorted);
    for i in 0..5 {
        env.cx.session.compacted();
        let again = env.ok("grep", json!({"pattern": "needle", "output_mode": "content", "head_limit": 0})).await;
        assert_eq!(again, first, "run {i}");
    }
}

#[tokio::test]
async fn g15_repeated_grep_unchanged_then_fresh_on_change_or_new_match() {
    let env = tree();
    let args = json!({"pattern": "foo", "output_mode": "content"});
    let first = env.ok("grep", args.clone()).await;
    let out = env.call("grep", args.clone()).await;
    assert_eq!(out.meta["unchanged"], true, "{}", out.text_content());
    assert!(out.text_content().contains("Unchanged since your last identical call"));
    // A file that does not match changing does not matter.
    env.write("src/lib.rs", "pub fn foo() {}\n\npub fn bar() {}\n");
    // A newly matching file → fresh.
    env.write("new.txt", "foo\n");
    let t = env.ok("grep", args.clone()).await;
    assert!(t.contains("new.txt:1:foo") && t != first, "{t}");
    assert_eq!(env.call("grep", args.clone()).await.meta["unchanged"], true);
    // A matched file changed → fresh.
    env.write("new.txt", "foo changed\n");
    let t = env.ok("grep", args.clone()).await;
    assert!(t.contains("new.txt:1:foo changed"), "{t}");
    // Also when the change keeps its size and its mtime is set back (`cp -p`, `touch -r`).
    common::set_mtime(&env.root().join("new.txt"), 1_577_836_800);
    env.ok("grep", args.clone()).await;
    env.write("new.txt", "foo CHANGED\n");
    common::set_mtime(&env.root().join("new.txt"), 1_577_836_800);
    let t = env.ok("grep", args.clone()).await;
    assert!(t.contains("new.txt:1:foo CHANGED"), "{t}");
}

#[tokio::test]
async fn gr1_long_lines_are_cut_in_content_mode() {
    let env = Env::new();
    env.write("min.js", format!("{}needle{}\n", "a".repeat(300), "b".repeat(5000)));
    env.write("ctx.txt", format!("{}\nneedle\n", "c".repeat(5000)));
    let t = env.ok("grep", json!({"pattern": "needle", "path": "min.js"})).await;
    assert!(t.len() < 1000, "{}", t.len());
    assert!(t.contains("min.js:1:[line of 5306 characters, 1 match on it] match at column 301: …aaa"), "{t}");
    assert!(t.contains("aaaneedlebbb") && t.ends_with("bbb…"), "{t}");
    // A long context line shows its start.
    let t = env.ok("grep", json!({"pattern": "needle", "path": "ctx.txt", "context_before": 1})).await;
    assert!(t.contains("ctx.txt-1-ccc") && t.contains("[…4500 more characters]"), "{t}");
}

/// Issue 20.1: a minified file's one long line shows the match, not the line's start, and the
/// column `read_file` continues at.
#[tokio::test]
async fn gr1_a_long_minified_line_shows_a_window_around_each_match_with_its_column() {
    let env = Env::new();
    // ~2 M characters on one line, matches near columns 1.2 M and 1.8 M; the code before them
    // has multi-byte characters, so a byte offset would be the wrong column.
    let filler = |n: usize| "var a=1;ё".repeat(n / 9);
    let line = format!("{}needle(1){}needle(2){}", filler(1_200_000), filler(599_991), filler(180_000));
    let col1 = line.find("needle(1)").map(|b| line[..b].chars().count() + 1).unwrap();
    let col2 = line.find("needle(2)").map(|b| line[..b].chars().count() + 1).unwrap();
    let total = line.chars().count();
    assert!(col1 > 1_000_000 && col2 > col1 + 500_000 && line.len() > total);
    env.write("dist/min.js", format!("{line}\n"));
    for path in ["dist/min.js", "dist"] {
        let t = env.ok("grep", json!({"pattern": "needle\\(\\d\\)", "path": path})).await;
        let hit = t.lines().nth(1).unwrap();
        let head = format!("dist/min.js:1:[line of {total} characters, 2 matches on it] match at column {col1}: …");
        assert!(hit.starts_with(&head), "{path}: {hit}");
        assert!(hit.contains("needle(1)"), "{path}: {hit}");
        assert!(hit.contains(&format!(" match at column {col2}: …")) && hit.contains("needle(2)"), "{path}: {hit}");
        assert!(hit.chars().count() < 700, "{path}: within the per-line cap: {}", hit.chars().count());
    }
    // The column is the one read_file continues at: the text there is the match.
    let range = json!([{"start_line": 1, "end_line": 1, "start_column": col1}]);
    let r = env.ok("read_file", json!({"path": "dist/min.js", "ranges": range})).await;
    assert!(r.contains("1→needle(1)var a=1;ё"), "{}", &r[..r.len().min(300)]);
    // Many matches on one line: windows up to the cap, and all of them counted.
    env.write("many.js", format!("{}\n", "xx needle yy ".repeat(100_000)));
    let t = env.ok("grep", json!({"pattern": "needle", "path": "many.js"})).await;
    assert!(t.contains("[line of 1300000 characters, 100000 matches on it] match at column 4: xx needle yy"), "{t}");
    assert!(t.chars().count() < 800, "{t}");
}

/// Issue 17.3: without `path`, grep and glob search every root; a hit in another root than the
/// first is shown with its root (an absolute path, which read_file takes as it is).
#[tokio::test]
async fn gr1_gl1_without_path_every_root_is_searched_and_labelled_by_root() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(a.path().join("x.txt"), "needle in a\n").unwrap();
    std::fs::create_dir_all(a.path().join("inner")).unwrap();
    std::fs::write(a.path().join("inner/z.txt"), "needle inside\n").unwrap();
    std::fs::create_dir_all(b.path().join("sub")).unwrap();
    std::fs::write(b.path().join("sub/y.txt"), "needle in b\n").unwrap();
    std::fs::write(b.path().join(".kodikignore"), "secret.txt\n").unwrap();
    std::fs::write(b.path().join("secret.txt"), "needle hidden\n").unwrap();
    // A root inside another one is searched once, through the outer one.
    let ws = kodik_core::Workspace::with_roots([a.path(), b.path(), &a.path().join("inner")]).unwrap();
    let b_root = ws.roots()[1].clone();
    let cx = kodik_core::ToolContext::new(ws);
    let mut reg = kodik_core::ToolRegistry::new();
    SearchToolset::new().register(&mut reg);
    let call = |tool: &str, args: serde_json::Value| {
        let (t, cx) = (reg.get(tool).unwrap().clone(), cx.clone());
        async move { t.call(args, &cx).await.text_content() }
    };
    let y = b_root.join("sub/y.txt").display().to_string();
    let t = call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        t,
        format!(
            "Found 3 matching lines in 3 files\ninner/z.txt:1:needle inside\nx.txt:1:needle in a\n{y}:1:needle in b"
        )
    );
    let t = call("grep", json!({"pattern": "needle", "output_mode": "files_with_matches"})).await;
    assert_eq!(t, format!("Found 3 files\ninner/z.txt\nx.txt\n{y}"));
    let t = call("glob", json!({"pattern": "*.txt"})).await;
    let mut listed: Vec<&str> = t.lines().collect();
    listed.sort();
    assert_eq!(listed, [y.as_str(), "inner/z.txt", "x.txt"]);
    // The label is a path the other tools take.
    let r = call("read_file", json!({"path": y})).await;
    assert!(r.contains("needle in b"), "{r}");
    // `path` still narrows the search to one root.
    let t = call("grep", json!({"pattern": "needle", "path": b_root.display().to_string()})).await;
    assert_eq!(t, format!("Found 1 matching line in 1 file\n{y}:1:needle in b"));
}

/// Issue 19: files with more output than a waiting file may hold (1 MiB) pause and then stream
/// in order; the saved full result is exactly every line, file by file, whatever the threads.
#[tokio::test]
async fn gr1_g20_big_files_stream_in_path_order_and_the_saved_result_is_complete() {
    let spool = tempfile::tempdir().unwrap();
    for threads in [1, 2, 4] {
        let tools = SearchToolset::new().threads(threads).spool_dir(Some(spool.path().into()));
        let env = Env::with(tools, Settings::default());
        let mut expected = String::new();
        for (name, lines) in [("a.txt", 100_000), ("b/big.txt", 120_000), ("b/small.txt", 3), ("c.txt", 90_000)] {
            let body: String = (0..lines).map(|i| format!("hit {i}\n")).collect();
            env.write(name, &body);
            if !expected.is_empty() {
                expected.push('\n');
            }
            expected.push_str(name);
            expected.push('\n');
            expected.extend((0..lines).map(|i| format!("{}:hit {i}\n", i + 1)));
        }
        let out = env.call("grep", json!({"pattern": "hit", "head_limit": 0})).await;
        let t = out.text_content();
        assert_eq!(out.meta["total_matches"], 310_003, "{threads} threads");
        assert!(t.starts_with("Found 310003 matching lines in 4 files\na.txt:1:hit 0\na.txt:2:hit 1\n"), "{t:.200}");
        assert!(t.len() < 70 * 1024, "the answer is capped at 64 KB of lines: {}", t.len());
        let next = out.meta["shown"].as_u64().unwrap();
        assert!(t.ends_with(&format!("Next page: offset {next}. (This answer holds at most 64 KB of lines.) The full result (310003 entries; each file's path once, above its `line:text` lines) is in `{}`.]", out.meta["full_output"].as_str().unwrap())), "{}", &t[t.len() - 300..]);
        let full = out.meta["full_output"].as_str().unwrap();
        assert!(std::fs::read_to_string(full).unwrap() == expected, "{threads} threads: saved result differs");
        std::fs::remove_file(full).unwrap();
    }
}

/// G18: when the full result cannot be saved, the answer still comes, bounded, and says why.
#[tokio::test]
async fn g18_an_unwritable_spool_folder_still_gives_the_page_and_says_so() {
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let tools = SearchToolset::new().spool_dir(Some(blocker.path().join("spool")));
    let env = Env::with(tools, Settings::default());
    env.write("a.txt", "hit\n".repeat(1000));
    let out = env.call("grep", json!({"pattern": "hit", "head_limit": 2})).await;
    let t = out.text_content();
    assert!(
        t.starts_with("Found 1000 matching lines in 1 file\na.txt:1:hit\na.txt:2:hit\n[Showing entries 1–2 of 1000."),
        "{t}"
    );
    assert!(t.contains("The full result could not be saved: the full output could not be saved to"), "{t}");
    assert!(out.meta["full_output"].is_null());
}

#[tokio::test]
async fn gr1_g16_ignore_files_above_the_project_apply_only_within_its_repository() {
    // A dotfiles repository in the home folder that ignores everything, and a project with its
    // own repository below it: git sees the project's files, and so must grep and glob.
    let env = Env::below("home/project");
    env.write_outside("home/.git/HEAD", "ref: refs/heads/main\n");
    env.write_outside("home/.gitignore", "*\n!.gitignore\n");
    env.write(".git/HEAD", "ref: refs/heads/main\n");
    env.write("src/main.rs", "fn main() { needle(); }\n");
    let t = env.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nsrc/main.rs:1:fn main() { needle(); }");
    let t = env.ok("grep", json!({"pattern": "needle", "path": "src"})).await;
    assert!(t.contains("src/main.rs:1:"), "{t}");
    assert_eq!(env.ok("glob", json!({"pattern": "**/*.rs"})).await, "src/main.rs");

    // No repository anywhere: a stray .gitignore above the workspace does not apply either.
    let env = Env::below("p");
    env.write_outside(".gitignore", "*.rs\n");
    env.write("src/a.rs", "needle\n");
    assert!(env.ok("grep", json!({"pattern": "needle"})).await.contains("src/a.rs:1:needle"));
    assert_eq!(env.ok("glob", json!({"pattern": "**/*.rs", "path": "src"})).await, "src/a.rs");
}

#[tokio::test]
async fn gr1_g16_rules_above_the_searched_folder_apply_where_they_point() {
    // The workspace is a folder of a repository: the repository's rules above it hold, anchored
    // at the folder they are in, as git reads them.
    let env = Env::below("repo/sub");
    env.write_outside("repo/.git/HEAD", "ref: refs/heads/main\n");
    env.write_outside("repo/.gitignore", "/sub/gen/\n");
    env.write("gen/out.rs", "needle\n");
    env.write("src/gen/kept.rs", "needle\n");
    env.write("src/private/key.rs", "needle\n");
    env.write("src/lib.rs", "needle\n");
    // An anchored .kodikignore rule at the root holds for a search of a folder below it.
    env.write(".kodikignore", "src/private/\n");
    let t = env.ok("grep", json!({"pattern": "needle", "output_mode": "files_with_matches"})).await;
    assert_eq!(t, "Found 2 files\nsrc/gen/kept.rs\nsrc/lib.rs");
    let t = env.ok("grep", json!({"pattern": "needle", "path": "src", "output_mode": "files_with_matches"})).await;
    assert_eq!(t, "Found 2 files\nsrc/gen/kept.rs\nsrc/lib.rs");
    assert_eq!(env.ok("glob", json!({"pattern": "**/*.rs", "path": "src"})).await.lines().count(), 2);
}

#[tokio::test]
async fn gr3_a_large_single_file_keeps_its_encoding_when_streamed() {
    // Past the size read whole: UTF-16 with a BOM, UTF-16 without one, and Windows-1251 are
    // decoded on the fly; a NUL far into a UTF-8 log does not hide the lines around it.
    let env = Env::new();
    let filler = "plain log line number something\n".repeat(400_000);
    let text = format!("первая строка\n{filler}Привет из конца\n");
    let utf16le: Vec<u8> = [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
    env.write("le.txt", &utf16le);
    let utf16be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
    env.write("be.txt", &utf16be);
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode(&text);
    env.write("cp1251.txt", &cp1251);
    let mut nul = text.clone().into_bytes();
    nul.splice(text.len() - 30..text.len() - 30, *b"\x00");
    env.write("nul.txt", &nul);
    let last = 400_002;
    for f in ["le.txt", "be.txt", "cp1251.txt"] {
        assert!(std::fs::metadata(env.root().join(f)).unwrap().len() > 8 << 20, "{f} is past the whole-read size");
        let t = env.ok("grep", json!({"pattern": "Привет|первая", "path": f})).await;
        assert_eq!(t, format!("Found 2 matching lines in 1 file\n{f}:1:первая строка\n{f}:{last}:Привет из конца"));
    }
    let t = env.ok("grep", json!({"pattern": "^первая|конца", "path": "nul.txt"})).await;
    assert!(t.starts_with("Found 2 matching lines in 1 file\nnul.txt:1:первая строка\nnul.txt:"), "{t}");
}

#[tokio::test]
async fn g9_g20_pages_of_one_search_share_one_saved_result_until_a_file_changes() {
    let spool = tempfile::tempdir().unwrap();
    let env = Env::with(SearchToolset::new().spool_dir(Some(spool.path().into())), Settings::default());
    for i in 0..40 {
        env.write(&format!("f{i:02}.txt"), "hit\nhit\n");
    }
    let mut saved = Vec::new();
    for offset in [0, 10, 20, 30] {
        let out = env.call("grep", json!({"pattern": "hit", "head_limit": 10, "offset": offset})).await;
        let full = out.meta["full_output"].as_str().unwrap().to_string();
        assert!(out.text_content().contains(&full), "the page names the saved result");
        saved.push(full);
    }
    assert!(saved.iter().all(|p| *p == saved[0]), "{saved:?}");
    let files: Vec<_> = std::fs::read_dir(spool.path()).unwrap().collect();
    assert_eq!(files.len(), 1, "one copy of the result on disk, not one per page: {files:?}");

    // A changed file makes a new result, saved anew; the search then pages through that one.
    env.write("f05.txt", "hit\nhit\nhit\n");
    let out = env.call("grep", json!({"pattern": "hit", "head_limit": 10, "offset": 10})).await;
    let changed = out.meta["full_output"].as_str().unwrap().to_string();
    assert_ne!(changed, saved[0]);
    assert_eq!(std::fs::read_to_string(&changed).unwrap().matches("hit").count(), 81);
    let out = env.call("grep", json!({"pattern": "hit", "head_limit": 10, "offset": 20})).await;
    assert_eq!(out.meta["full_output"].as_str().unwrap(), changed);
}

#[tokio::test]
async fn gr1_gl1_a_pattern_or_a_typo_as_path_gets_the_call_that_works() {
    let env = Env::new();
    env.write("src/a.ts", "needle\n");
    let e = env.err("grep", json!({"pattern": "needle", "path": "src/*.ts"})).await;
    assert!(e.contains("`src/*.ts` is a glob pattern; put `glob: \"src/*.ts\"` and leave out `path`"), "{e}");
    let e = env.err("grep", json!({"pattern": "needle", "path": "**/*.ts"})).await;
    assert!(e.contains("put `glob: \"**/*.ts\"` and leave out `path`"), "{e}");
    let e = env.err("glob", json!({"pattern": "*", "path": "./src/*.ts"})).await;
    assert!(e.contains("put `path: \"src\"` and `pattern: \"*.ts\"`"), "{e}");
    // Following the advice works.
    assert!(env.ok("grep", json!({"pattern": "needle", "glob": "src/*.ts"})).await.contains("src/a.ts:1:needle"));
    assert_eq!(env.ok("glob", json!({"pattern": "*.ts", "path": "src"})).await, "src/a.ts");
    // A typo gets the near name, as read_file's does.
    let e = env.err("grep", json!({"pattern": "needle", "path": "scr"})).await;
    assert!(e.contains("`scr` does not exist; did you mean: src?"), "{e}");
    let e = env.err("glob", json!({"pattern": "*.ts", "path": "scr"})).await;
    assert!(e.contains("did you mean: src?"), "{e}");
}

/// A glob pattern given as `path` together with the call's own pattern (or grep's one `glob`)
/// gets advice that keeps both, and following it finds what was asked. Before, the advice
/// dropped the call's pattern: `path: "src"` and `pattern: "**"` listed every file, `*/`
/// found nothing, and grep's `glob: "src/**"` replaced the model's `*.ts`.
#[tokio::test]
async fn gr1_gl1_a_pattern_as_path_with_the_calls_own_pattern_gets_advice_keeping_both() {
    let env = Env::new();
    env.write("src/a.ts", "needle\n");
    env.write("src/deep/b.ts", "needle\n");
    env.write("src/deep/c.md", "needle\n");
    let cases = [
        ("glob", json!({"pattern": "*.ts", "path": "src/**"}), "`path: \"src\"` and `pattern: \"**/*.ts\"`"),
        ("glob", json!({"pattern": "*.ts", "path": "**"}), "`pattern: \"**/*.ts\"` and leave out `path`"),
        ("glob", json!({"pattern": "b.ts", "path": "src/*/"}), "`path: \"src\"` and `pattern: \"*/b.ts\"`"),
        (
            "grep",
            json!({"pattern": "needle", "path": "src/**", "glob": "*.ts"}),
            "`path: \"src\"` and `glob: \"*.ts\"`",
        ),
    ];
    for (tool, args, hint) in cases {
        let e = env.err(tool, args.clone()).await;
        assert!(e.contains(&format!("put {hint} instead")), "{args}: {e}");
    }
    // Following it.
    let t = env.ok("glob", json!({"pattern": "**/*.ts", "path": "src"})).await;
    assert_eq!(t.lines().count(), 2, "{t}");
    assert_eq!(env.ok("glob", json!({"pattern": "*/b.ts", "path": "src"})).await, "src/deep/b.ts");
    let t = env
        .ok("grep", json!({"pattern": "needle", "path": "src", "glob": "*.ts", "output_mode": "files_with_matches"}))
        .await;
    assert_eq!(t.lines().count(), 3, "{t}");
}

#[tokio::test]
async fn gr5_a_leading_dot_slash_in_glob_and_exclude_means_the_searched_folder() {
    let env = Env::new();
    env.write("src/a.ts", "needle\n");
    env.write("src/deep/b.ts", "needle\n");
    env.write("top.ts", "needle\n");
    let files = |t: String| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    let list = json!({"pattern": "needle", "output_mode": "files_with_matches"});
    let with = |k: &str, v: &str| {
        let mut a = list.clone();
        a[k] = json!(v);
        a
    };
    assert_eq!(files(env.ok("grep", with("glob", "./src/*.ts")).await), ["src/a.ts"]);
    assert_eq!(files(env.ok("grep", with("glob", "./*.ts")).await), ["top.ts"]);
    assert_eq!(files(env.ok("grep", with("exclude", "./src/*.ts")).await), ["src/deep/b.ts", "top.ts"]);
    // The glob tool reads them the same way.
    assert_eq!(env.ok("glob", json!({"pattern": "./src/*.ts"})).await, "src/a.ts");
}

#[tokio::test]
async fn gr1_max_count_zero_is_an_error_not_an_empty_answer() {
    let env = Env::new();
    env.write("a.txt", "hit\nhit\n");
    let e = env.err("grep", json!({"pattern": "hit", "max_count": 0})).await;
    assert!(e.contains("max_count 0") && e.contains("leave it out"), "{e}");
    // An invalid argument, as the schema's own checks report one (was error_kind `failed`).
    let out = env.call("grep", json!({"pattern": "hit", "max_count": 0, "context": 0})).await;
    assert_eq!(out.meta["error_kind"], "invalid_input", "{}", out.meta);
    let t = env.ok("grep", json!({"pattern": "hit", "max_count": 1})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\na.txt:1:hit");
}

#[tokio::test]
async fn gr3_a_folder_search_that_misses_non_ascii_text_says_how_to_find_it_in_a_legacy_file() {
    let env = Env::new();
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("Привет из 1251\n");
    env.write("legacy.txt", &cp1251);
    let t = env.ok("grep", json!({"pattern": "Привет"})).await;
    assert!(t.starts_with("No matches for `Привет`"), "{t}");
    assert!(t.ends_with("Search such a file by its `path` to have its encoding detected.]"), "{t}");
    // Following the advice finds it.
    let t = env.ok("grep", json!({"pattern": "Привет", "path": "legacy.txt"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nlegacy.txt:1:Привет из 1251");
    // An ASCII pattern reads the same in every such encoding: no note.
    let t = env.ok("grep", json!({"pattern": "nothing here"})).await;
    assert!(!t.contains("encoding"), "{t}");
}

/// The note for non-ASCII text a folder search missed also comes when that text is asked for
/// by a class or an escape (`\p{Cyrillic}`, `\xe9`, `\x{41F}`), and not for classes that take
/// ASCII letters too (`\w`). Before, only a pattern with a non-ASCII character in it got it.
#[tokio::test]
async fn gr3_the_legacy_encoding_note_comes_for_non_ascii_asked_by_class_or_escape() {
    let env = Env::new();
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("Привет из 1251\n");
    env.write("legacy.txt", &cp1251);
    let note = "Search such a file by its `path` to have its encoding detected.]";
    for p in ["\\p{Cyrillic}{3}", "caf\\xe9", "\\x{41F}ривет", "(?i)[А-Я]ривет", "\\p{Greek}+"] {
        let t = env.ok("grep", json!({"pattern": p})).await;
        assert!(t.starts_with("No matches") && t.ends_with(note), "{p}: {t}");
    }
    for p in ["\\wzzz\\d", "nothing.here", "\\p{L}qqq"] {
        let t = env.ok("grep", json!({"pattern": p})).await;
        assert!(t.starts_with("No matches") && !t.contains("encoding"), "{p}: {t}");
    }
}

/// A big file (past the whole-read size) whose first MiB is plain ASCII: Windows-1251 text
/// later in it is found, decided by that text; a line over 64 MB and a multi-line match in a
/// 70 MB log are found as in a smaller file. Before, the first was "No matches" (the ASCII start
/// made it UTF-8) and the other two an internal error "has a line longer than 64 MB".
#[tokio::test]
async fn gr1_gr3_a_big_file_finds_legacy_text_past_its_first_mib_long_lines_and_multiline_matches() {
    let env = Env::new();
    let line = "2026-12-01 INFO request handled in 12ms path=/api/v1/items\n";
    let (tail, _, _) = encoding_rs::WINDOWS_1251.encode("Привет из 1251\n");
    let mut big = line.repeat(160_000).into_bytes();
    big.extend_from_slice(&tail);
    env.write("big1251.log", &big);
    let mut utf8 = line.repeat(160_000);
    utf8.push_str("Привет utf8\n");
    env.write("big_utf8.log", &utf8);
    let mut one = b"{\"a\":\"".to_vec();
    one.resize(one.len() + 70_000_000, b'x');
    one.extend_from_slice(b"needle\"}\n");
    env.write("oneline.json", &one);
    let mut ml = line.repeat(1_200_000);
    ml.push_str("start\nneedle end\n");
    env.write("ml.log", &ml);
    drop((big, utf8, one, ml));

    let t = env.ok("grep", json!({"pattern": "Привет", "path": "big1251.log"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nbig1251.log:160001:Привет из 1251");
    let t = env.ok("grep", json!({"pattern": "Привет", "path": "big_utf8.log"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nbig_utf8.log:160001:Привет utf8");
    let t = env.ok("grep", json!({"pattern": "needle", "path": "oneline.json", "output_mode": "count"})).await;
    assert!(t.contains("oneline.json:1"), "{t}");
    let t = env.ok("grep", json!({"pattern": "start\\nneedle", "multiline": true, "path": "ml.log"})).await;
    assert!(t.ends_with("\nml.log:1200001:start\nml.log:1200002:needle end"), "{t}");
    // As the folder search (which reads files whole) shows it.
    let folder = env.ok("grep", json!({"pattern": "start\\nneedle", "multiline": true, "glob": "ml.log"})).await;
    assert_eq!(t, folder);
}

/// Whether one file is binary is judged by its first MiB whatever its size: a NUL only past it
/// leaves the lines around it searchable in a 6 MB log as in a 10 MB one; a NUL at the start is
/// a binary file in both. Before, the smaller log was refused as binary and the bigger searched.
#[tokio::test]
async fn gr1_gr3_a_nul_past_the_first_mib_is_judged_alike_below_and_above_8_mb() {
    let env = Env::new();
    let line = "2026-12-01 INFO request handled in 12ms path=/api/v1/items\n";
    for (name, lines) in [("smallnul.log", 100_000), ("bignul.log", 160_000)] {
        let mut bytes = line.repeat(lines).into_bytes();
        bytes.extend_from_slice(b"needle before\n\x00 nul\nneedle after\n");
        env.write(name, &bytes);
        let t = env.ok("grep", json!({"pattern": "needle", "path": name})).await;
        let (a, b) = (lines + 1, lines + 3);
        assert_eq!(t, format!("Found 2 matching lines in 1 file\n{name}:{a}:needle before\n{name}:{b}:needle after"));
        let mut start = b"\x00".to_vec();
        start.extend_from_slice(&bytes);
        env.write(name, &start);
        let e = env.err("grep", json!({"pattern": "needle", "path": name})).await;
        assert!(e.contains("binary file"), "{name}: {e}");
    }
}
