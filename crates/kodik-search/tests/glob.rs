//! Behaviour tests of kodik-search's `glob` (SPEC IDs in the test names).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)
mod common;

use common::{Env, set_mtime};
use kodik_core::Settings;
use kodik_search::SearchToolset;
use serde_json::json;

#[tokio::test]
async fn gl1_newest_first_by_modification_time() {
    let env = Env::new();
    for (name, secs) in [("src/old.ts", 1_000), ("src/new.ts", 3_000), ("mid.ts", 2_000), ("x.rs", 4_000)] {
        env.write(name, "x");
        set_mtime(&env.root().join(name), secs);
    }
    let t = env.ok("glob", json!({"pattern": "**/*.ts"})).await;
    assert_eq!(t, "src/new.ts\nmid.ts\nsrc/old.ts");
    // Without `/` the pattern matches at any depth, like `**/*.ts`.
    env.cx.session.compacted();
    let t = env.ok("glob", json!({"pattern": "*.ts"})).await;
    assert_eq!(t, "src/new.ts\nmid.ts\nsrc/old.ts");
}

#[tokio::test]
async fn gl1_pattern_with_slash_is_relative_to_the_folder() {
    let env = Env::new();
    for name in ["src/a.rs", "src/sub/b.rs", "lib/src/c.rs"] {
        env.write(name, "x");
    }
    let t = env.ok("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(t, "src/a.rs");
    let t = env.ok("glob", json!({"pattern": "src/**/*.rs"})).await;
    let mut got: Vec<&str> = t.lines().collect();
    got.sort();
    assert_eq!(got, ["src/a.rs", "src/sub/b.rs"]);
    let t = env.ok("glob", json!({"pattern": "src/*.rs", "path": "lib"})).await;
    assert_eq!(t, "lib/src/c.rs");
    let t = env.ok("glob", json!({"pattern": "*.{rs,toml}", "path": "./src/sub"})).await;
    assert_eq!(t, "src/sub/b.rs");
    // An absolute pattern is the same call as the relative one (so G15 sees a repeat).
    let abs = format!("{}/src/*.rs", env.root().display());
    let out = env.call("glob", json!({"pattern": abs.clone()})).await;
    assert_eq!(out.meta["unchanged"], true, "{}", out.text_content());
    env.cx.session.compacted();
    assert_eq!(env.ok("glob", json!({"pattern": abs})).await, "src/a.rs");
}

#[tokio::test]
async fn gl1_cap_reports_the_count_of_the_rest() {
    let env = Env::with(SearchToolset::new().glob_limit(3), Settings::default());
    for i in 0..10u64 {
        let name = format!("f{i}.txt");
        env.write(&name, "x");
        set_mtime(&env.root().join(&name), 1_000 + i);
    }
    let out = env.call("glob", json!({"pattern": "*.txt"})).await;
    let t = out.text_content();
    assert!(t.starts_with("f9.txt\nf8.txt\nf7.txt\n"), "{t}");
    assert!(t.contains("10 files match") && t.contains("7 more not shown"), "{t}");
    assert_eq!(out.meta["total"], 10);
}

#[tokio::test]
async fn gl1_g9_a_capped_list_saves_the_full_list_and_names_it() {
    let spool = tempfile::tempdir().unwrap();
    let tools = SearchToolset::new().glob_limit(3).spool_dir(Some(spool.path().into()));
    let env = Env::with(tools, Settings::default());
    for i in 0..10u64 {
        let name = format!("d/f{i}.txt");
        env.write(&name, "x");
        set_mtime(&env.root().join(&name), 1_000 + i);
    }
    let out = env.call("glob", json!({"pattern": "**/*.txt"})).await;
    let t = out.text_content();
    let full = out.meta["full_output"].as_str().unwrap();
    assert!(t.ends_with(&format!("The full list (10 files, newest first) is in `{full}`.]")), "{t}");
    let expected: String = (0..10).rev().map(|i| format!("d/f{i}.txt\n")).collect();
    assert_eq!(std::fs::read_to_string(full).unwrap(), expected);
    // A list that fits saves nothing.
    let out = env.call("glob", json!({"pattern": "f1.txt"})).await;
    assert!(out.meta["full_output"].is_null(), "{}", out.meta);
}

#[tokio::test]
async fn gl1_g16_ignore_files_and_hidden_policy() {
    let env = Env::new();
    env.write("keep.rs", "x");
    env.write("gen/out.rs", "x");
    env.write("vendor/v.rs", "x");
    env.write("secret/s.rs", "x");
    env.write(".hidden/h.rs", "x");
    env.write(".github/workflows/ci.yml", "x");
    env.write(".gitignore", "gen/\n");
    env.write(".ignore", "vendor/\n");
    env.write(".kodikignore", "secret/\n");
    let t = env.ok("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(t, "keep.rs");
    // Hidden entries are walked when the pattern names one.
    let t = env.ok("glob", json!({"pattern": ".github/**/*.yml"})).await;
    assert_eq!(t, ".github/workflows/ci.yml");
    let t = env.ok("glob", json!({"pattern": ".hidden/*.rs"})).await;
    assert_eq!(t, ".hidden/h.rs");
    let t = env.ok("glob", json!({"pattern": "**/.gitignore"})).await;
    assert_eq!(t, ".gitignore");
    // A .kodikignore'd folder cannot be searched at all.
    let e = env.err("glob", json!({"pattern": "*.rs", "path": "secret"})).await;
    assert!(e.contains(".kodikignore"), "{e}");
}

#[tokio::test]
async fn gl1_errors_and_empty_results() {
    let env = Env::new();
    env.write("a.txt", "x");
    let e = env.err("glob", json!({"pattern": "*.rs", "path": "a.txt"})).await;
    assert!(e.contains("is a file"), "{e}");
    let e = env.err("glob", json!({"pattern": "*.rs", "path": "missing"})).await;
    assert!(e.contains("does not exist"), "{e}");
    let e = env.err("glob", json!({"pattern": "src/[a-"})).await;
    assert!(e.contains("invalid glob"), "{e}");
    let t = env.ok("glob", json!({"pattern": "*.rs"})).await;
    assert!(t.starts_with("No files match `*.rs`"), "{t}");
}

#[tokio::test]
async fn g15_repeated_glob_unchanged_then_fresh_on_new_or_changed_file() {
    let env = Env::new();
    env.write("a.ts", "x");
    let args = json!({"pattern": "*.ts"});
    assert_eq!(env.ok("glob", args.clone()).await, "a.ts");
    let out = env.call("glob", args.clone()).await;
    assert_eq!(out.meta["unchanged"], true, "{}", out.text_content());
    let out = env.call("glob", args.clone()).await;
    assert_eq!(out.meta["repeats"], 2);
    // A file that does not match does not count.
    env.write("b.rs", "x");
    assert_eq!(env.call("glob", args.clone()).await.meta["unchanged"], true);
    // A newly matching file does.
    env.write("b.ts", "x");
    set_mtime(&env.root().join("b.ts"), 10);
    let t = env.ok("glob", args.clone()).await;
    assert_eq!(t, "a.ts\nb.ts");
    // So does a change to a matched file.
    set_mtime(&env.root().join("b.ts"), 99_999_999_999);
    let t = env.ok("glob", args.clone()).await;
    assert_eq!(t, "b.ts\na.ts");
}

#[tokio::test]
async fn gl1_equal_times_in_path_order_and_g15_sees_a_size_change_at_the_same_time() {
    let env = Env::new();
    // A tree unpacked or copied at once: every file has the same time.
    for name in ["b/z.ts", "a.ts", "a/b.ts", "a-b/c.ts", "c.ts"] {
        env.write(name, "x");
        set_mtime(&env.root().join(name), 5_000);
    }
    let args = json!({"pattern": "*.ts"});
    // Path order, component by component: folder `a` before `a-b`, `a-b` before `a.ts`.
    assert_eq!(env.ok("glob", args.clone()).await, "a/b.ts\na-b/c.ts\na.ts\nb/z.ts\nc.ts");
    assert_eq!(env.call("glob", args.clone()).await.meta["unchanged"], true);
    // Rewritten with the same time but a new size: fresh data, not "nothing changed".
    env.write("c.ts", "longer");
    set_mtime(&env.root().join("c.ts"), 5_000);
    let out = env.call("glob", args).await;
    assert_ne!(out.meta["unchanged"], true, "{}", out.text_content());
    assert_eq!(out.text_content(), "a/b.ts\na-b/c.ts\na.ts\nb/z.ts\nc.ts");
}

#[tokio::test]
async fn gl1_gr1_names_with_a_line_break_or_bytes_not_utf8_stay_one_usable_entry() {
    use std::os::unix::ffi::OsStrExt as _;
    let env = Env::new();
    env.write("new\nline.txt", "needle\n");
    std::fs::write(env.root().join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), "needle\n").unwrap();
    env.write("plain.txt", "needle\n");
    set_mtime(&env.root().join("new\nline.txt"), 3_000);
    set_mtime(&env.root().join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), 2_000);
    set_mtime(&env.root().join("plain.txt"), 1_000);
    let t = env.ok("glob", json!({"pattern": "*.txt"})).await;
    let mut lines = t.lines();
    assert_eq!(lines.next(), Some(r#""new\nline.txt""#), "{t}");
    assert_eq!(lines.next(), Some(r#""caf\xE9.txt""#), "{t}");
    assert_eq!(lines.next(), Some("plain.txt"), "{t}");
    assert!(lines.next().unwrap().starts_with("[Names in double quotes"), "{t}");
    // The quoted name, with its escapes read as JSON, is the file.
    let name: String = serde_json::from_str(r#""new\nline.txt""#).unwrap();
    assert!(env.ok("read_file", json!({"path": name})).await.contains("needle"));
    let t = env.ok("grep", json!({"pattern": "needle", "output_mode": "files_with_matches"})).await;
    assert_eq!(t, "Found 3 files\n\"caf\\xE9.txt\"\n\"new\\nline.txt\"\nplain.txt");
}

/// A `!` exception in a subfolder's `.gitignore` or `.ignore` does not show what a
/// `.kodikignore` above it hides, whether the search starts at the subfolder, between, or the
/// root (read_file refuses the same files). Before, with `path` set, grep printed the hidden
/// file's contents and glob listed it.
#[tokio::test]
async fn g16_gr1_gl1_kodikignore_wins_over_a_gitignore_exception_below_it_with_and_without_path() {
    let env = Env::new();
    env.write(".kodikignore", "secret.txt\n*.key\n");
    env.write("sub/.gitignore", "!secret.txt\n");
    env.write("sub/.ignore", "!*.key\n");
    env.write("sub/secret.txt", "needle SECRET\n");
    env.write("sub/a.key", "needle SECRET key\n");
    env.write("sub/ok.txt", "needle ok\n");
    env.write("a/.kodikignore", "hidden/\n");
    env.write("a/b/c/.gitignore", "!*\n");
    env.write("a/b/c/hidden/h.txt", "needle SECRET deep\n");
    env.write("a/b/c/hidden.txt", "needle ok deep\n");
    for path in [None, Some("sub"), Some("a"), Some("a/b"), Some("a/b/c")] {
        let mut g = json!({"pattern": "needle", "output_mode": "files_with_matches"});
        let mut l = json!({"pattern": "**/*"});
        if let Some(p) = path {
            g["path"] = json!(p);
            l["path"] = json!(p);
        }
        let t = env.ok("grep", g).await;
        assert!(!t.contains("secret.txt") && !t.contains("a.key") && !t.contains("hidden/"), "{path:?}: {t}");
        assert!(t.contains("ok.txt") || t.contains("hidden.txt"), "{path:?}: {t}");
        let t = env.ok("glob", l).await;
        assert!(!t.contains("secret.txt") && !t.contains("a.key") && !t.contains("hidden/"), "{path:?}: {t}");
    }
    let t = env.ok("grep", json!({"pattern": "needle", "path": "sub"})).await;
    assert_eq!(t, "Found 1 matching line in 1 file\nsub/ok.txt:1:needle ok", "{t}");
    let e = env.err("read_file", json!({"path": "sub/secret.txt"})).await;
    assert!(e.contains(".kodikignore"), "{e}");
    // A `.kodikignore` inside the searched folder may still make its own exception.
    env.write("sub/.kodikignore", "!a.key\n");
    let t = env.ok("glob", json!({"pattern": "*", "path": "sub"})).await;
    assert!(t.contains("sub/a.key") && !t.contains("secret.txt"), "{t}");
}
