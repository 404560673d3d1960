//! SPEC E1–E12 through the real `edit_file` tool: tempdir workspace, dispatch, session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use common::Env;
use kodik_core::{Diagnostic, DiagnosticSeverity, DiagnosticsProvider, PreviewConfig, ToolStatus};
use kodik_edit::EditToolset;

#[tokio::test]
async fn e1_unique_match_is_replaced_and_empty_new_string_deletes() {
    let env = Env::new();
    env.write("a.txt", "alpha\nbeta\ngamma\n");
    env.read("a.txt");
    let out = env.edit("a.txt", &[("beta\n", "")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("a.txt"), "alpha\ngamma\n");
}

/// An empty file (`__init__.py`) has no text to quote: an empty old_string gives it its content,
/// also after the model emptied it itself; create_file's refusal names that way, so the two
/// errors never send the model back and forth (E1, C1, E11).
#[tokio::test]
async fn e1_c1_e11_an_empty_file_is_filled_by_an_empty_old_string() {
    let env = Env::new();
    env.write("pkg/__init__.py", "");
    env.read("pkg/__init__.py");
    let out = env.call("create_file", serde_json::json!({"path": "pkg/__init__.py", "content": "x\n"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("old_string \"\""), "{}", out.text_content());
    let out = env.edit("pkg/__init__.py", &[("", "from .core import main\n"), ("main", "main, run")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("pkg/__init__.py"), "from .core import main, run\n");

    // Emptied by an edit, then filled again; a file with only blank lines counts as empty.
    assert!(env.edit("pkg/__init__.py", &[("from .core import main, run\n", "")]).await.is_success());
    assert!(env.edit("pkg/__init__.py", &[("", "A = 1\n")]).await.is_success());
    assert_eq!(env.text("pkg/__init__.py"), "A = 1\n");
    env.write("blank.txt", "\n\n");
    env.read("blank.txt");
    assert!(env.edit("blank.txt", &[("", "text\n")]).await.is_success());
    assert_eq!(env.text("blank.txt"), "text\n");

    // A file with content still needs the text to replace.
    let out = env.edit("blank.txt", &[("", "more\n")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("old_string is empty"), "{}", out.text_content());
    assert_eq!(env.text("blank.txt"), "text\n");
    // A blank file with CRLF line breaks is filled with CRLF line breaks.
    env.write("crlf.txt", "\r\n");
    env.read("crlf.txt");
    assert!(env.edit("crlf.txt", &[("", "a\nb\n")]).await.is_success());
    assert_eq!(env.text("crlf.txt"), "a\r\nb\r\n");
}

#[tokio::test]
async fn e1_identical_new_string_and_ambiguous_old_string_are_refused() {
    let env = Env::new();
    env.write("a.txt", "x = 1\ny = 2\nx = 1\n");
    env.read("a.txt");
    let out = env.edit("a.txt", &[("y = 2", "y = 2")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("identical"), "{}", out.text_content());
    let out = env.edit("a.txt", &[("x = 1", "x = 3")]).await;
    assert!(out.text_content().contains("lines 1, 3"), "{}", out.text_content());
    assert!(out.text_content().contains("surrounding lines"));
    assert_eq!(env.text("a.txt"), "x = 1\ny = 2\nx = 1\n");
}

#[tokio::test]
async fn e2_edit_of_a_file_never_read_is_refused() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    let out = env.edit("a.txt", &[("hello", "bye")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("read it with read_file first"), "{}", out.text_content());
    assert_eq!(env.text("a.txt"), "hello\n");
}

#[tokio::test]
async fn e2_file_changed_on_disk_since_read_asks_for_a_re_read() {
    let env = Env::new();
    env.write("a.txt", "hello\n");
    env.read("a.txt");
    env.write("a.txt", "hello\nadded by the user\n");
    let out = env.edit("a.txt", &[("hello", "bye")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("changed on disk since you last read it"), "{}", out.text_content());
    assert!(out.text_content().contains("re-read"));
    assert_eq!(env.text("a.txt"), "hello\nadded by the user\n");
}

#[tokio::test]
async fn e2_e9_follow_up_edit_after_own_write_needs_no_re_read() {
    let env = Env::new();
    env.write("a.txt", "one\n");
    env.read("a.txt");
    assert!(env.edit("a.txt", &[("one", "two")]).await.is_success());
    let out = env.edit("a.txt", &[("two", "three")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("no need to read it again"));
    assert_eq!(env.text("a.txt"), "three\n");
}

#[tokio::test]
async fn e3_edits_apply_in_order_each_on_the_previous_result() {
    let env = Env::new();
    env.write("a.rs", "fn a() {}\n");
    env.read("a.rs");
    let out = env.edit("a.rs", &[("fn a() {}", "fn a() {}\nfn b() {}"), ("fn b() {}", "fn b() { a() }")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("a.rs"), "fn a() {}\nfn b() { a() }\n");
}

#[tokio::test]
async fn e4_failed_edit_leaves_file_byte_for_byte_and_names_its_position() {
    let env = Env::new();
    let original = b"keep\r\nthis \xe2\x80\x94 text\r\n".to_vec();
    env.write("a.txt", &original);
    env.read("a.txt");
    let out = env.edit("a.txt", &[("keep", "changed"), ("no such text anywhere", "x"), ("text", "y")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    let msg = out.text_content();
    assert!(msg.contains("edit 2 of 3 failed"), "{msg}");
    assert!(msg.contains("No edit of this call was applied"), "{msg}");
    assert_eq!(env.bytes("a.txt"), original);
    assert!(env.tools.checkpoints().is_empty(), "a failed edit records no checkpoint");
}

#[tokio::test]
async fn e5_g2_separate_calls_apply_in_order_and_aliases_share_one_resource() {
    let env = Env::new();
    env.write("src/a.txt", "v1\n");
    env.read("src/a.txt");
    assert!(env.edit("src/a.txt", &[("v1", "v2")]).await.is_success());
    assert!(env.edit("./src/../src/a.txt", &[("v2", "v3")]).await.is_success());
    assert_eq!(env.text("src/a.txt"), "v3\n");
    let tool = env.registry.get("edit_file").unwrap();
    let ws = &env.cx.workspace;
    let args = |p: &str| serde_json::json!({"path": p, "edits": [{"old_string": "a", "new_string": "b"}]});
    let abs = env.path("src/a.txt");
    let keys: Vec<_> = ["src/a.txt", "./src/a.txt", "src/../src/a.txt", abs.to_str().unwrap()]
        .iter()
        .map(|p| tool.resources(&args(p), ws))
        .collect();
    assert!(keys.iter().all(|k| k == &keys[0] && k.len() == 1), "{keys:?}");
    assert_ne!(tool.resources(&args("src/b.txt"), ws), keys[0]);
}

#[tokio::test]
async fn e6_result_carries_exact_unified_diff_and_stage_meta() {
    let env = Env::new();
    env.write("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n");
    env.read("a.txt");
    let out = env.edit("a.txt", &[("4\n", "four\n")]).await;
    let text = out.text_content();
    assert!(text.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,7 +1,7 @@\n 1\n 2\n 3\n-4\n+four\n 5\n 6\n 7\n"), "{text}");
    assert_eq!(out.meta["stage"], "exact");
    assert_eq!(out.meta["added"], 1);
}

#[tokio::test]
async fn e6_whole_file_replacement_diff_is_complete() {
    let env = Env::new();
    let old: String = (0..30_000).map(|i| format!("old {i}\n")).collect();
    let new: String = (0..30_000).map(|i| format!("new {i}\n")).collect();
    env.write("big.txt", &old);
    env.read("big.txt");
    let out = env.edit("big.txt", &[(&old, &new)]).await;
    assert!(out.is_success(), "{}", &out.text_content()[..300]);
    assert_eq!(env.text("big.txt"), new);
    assert_eq!(out.meta["added"], 30_000);
    assert_eq!(out.meta["removed"], 30_000);
    let full = std::fs::read_to_string(out.full_output.as_ref().expect("a cut diff is saved in full")).unwrap();
    assert!(full.contains("-old 29999\n") && full.contains("+new 0\n"));
}

#[tokio::test]
async fn e7_typographic_quotes_dashes_and_nbsp_match_and_file_typography_is_kept() {
    let env = Env::new();
    env.write("doc.md", "He said “don’t” — twice.\u{00A0}End\n");
    env.read("doc.md");
    let out = env.edit("doc.md", &[("He said \"don't\" - twice. End", "He said \"don't\" - three times. End")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("doc.md"), "He said “don’t” — three times.\u{00A0}End\n");
    assert_eq!(out.meta["stage"], "typography");
}

#[tokio::test]
async fn e8_indentation_drift_is_recovered_and_stage_reported() {
    let env = Env::new();
    env.write("a.py", "class A:\n    def f(self):\n        return 1\n");
    env.read("a.py");
    let out = env.edit("a.py", &[("def f(self):\n    return 1", "def f(self):\n    return 2")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("a.py"), "class A:\n    def f(self):\n        return 2\n");
    assert_eq!(out.meta["stage"], "whitespace");
    assert!(out.text_content().contains("ignoring indentation"));
}

/// The model indents with spaces, the file with tabs (or the other way round, or with another
/// width): the lines it writes get the file's unit at the same depth, so a Makefile still runs
/// and Python does not mix tabs and spaces (E8, P1).
#[tokio::test]
async fn e8_p1_indentation_in_another_unit_is_written_in_the_files_unit() {
    let env = Env::new();
    env.write("Makefile", "all:\n\techo one\n\techo two\n");
    env.read("Makefile");
    let out = env
        .edit("Makefile", &[("all:\n    echo one\n    echo two", "all:\n    echo one\n    echo TWO\n    echo 3")])
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("Makefile"), "all:\n\techo one\n\techo TWO\n\techo 3\n");

    // Two-space text into a four-space file, nesting kept.
    env.write("a.py", "def f(x):\n    if x:\n        return 1\n    return 2\n");
    env.read("a.py");
    let out = env
        .edit(
            "a.py",
            &[(
                "def f(x):\n  if x:\n    return 1",
                "def f(x):\n  if x:\n    y = 1\n    while y:\n      y -= 1\n    return y",
            )],
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(
        env.text("a.py"),
        "def f(x):\n    if x:\n        y = 1\n        while y:\n            y -= 1\n        return y\n    return 2\n"
    );

    // apply_patch: a tab-indented hunk against a four-space file.
    env.write("b.py", "def g():\n    x = 1\n    return 2\n");
    env.read("b.py");
    let out = env.patch("*** Begin Patch\n*** Update File: b.py\n@@\n \tx = 1\n-\treturn 2\n+\tif x:\n+\t\treturn 20\n*** End Patch").await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("b.py"), "def g():\n    x = 1\n    if x:\n        return 20\n");
}

/// A tab-indented file with a continuation line aligned by spaces after its tab (Go, C): the
/// model types both in spaces, and a rewritten continuation line keeps the file's tab and
/// alignment, a rewritten plain line gets a tab; with edit_file and apply_patch. Before, no
/// unit explained both lines, so the new lines went in as typed: eight spaces next to the
/// file's tabs (E8).
#[tokio::test]
async fn e8_a_tab_and_alignment_continuation_line_keeps_the_files_indentation() {
    let env = Env::new();
    let go = "func main() {\n\tx := foo(a,\n\t    b)\n\tfmt.Println(x)\n}\n";
    env.write("m.go", go);
    env.read("m.go");
    let out = env.edit("m.go", &[("    x := foo(a,\n        b)", "    x := foo(a,\n        b, c)\n    y := x")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("m.go"), "func main() {\n\tx := foo(a,\n\t    b, c)\n\ty := x\n\tfmt.Println(x)\n}\n");

    env.write("n.go", go);
    env.read("n.go");
    let patch = "*** Begin Patch\n*** Update File: n.go\n@@\n-    x := foo(a,\n-        b)\n+    x := bar(a,\n+        b)\n*** End Patch";
    let out = env.patch(patch).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("n.go"), "func main() {\n\tx := bar(a,\n\t    b)\n\tfmt.Println(x)\n}\n");
}

#[tokio::test]
async fn e8_ambiguous_lenient_match_leaves_file_untouched_and_asks_for_more_context() {
    let env = Env::new();
    let text = "if a:\n    x = 1\n    y = 2\nif b:\n        x = 1\n        y = 2\n";
    env.write("a.py", text);
    env.read("a.py");
    let out = env.edit("a.py", &[("x = 1\ny = 2", "x = 0")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("lines 2, 5"), "{}", out.text_content());
    assert_eq!(env.text("a.py"), text);
}

struct FakeLsp {
    calls: AtomicUsize,
    handles: bool,
}

#[async_trait]
impl DiagnosticsProvider for FakeLsp {
    fn handles(&self, path: &Path) -> bool {
        self.handles && path.extension().is_some_and(|e| e == "ts")
    }
    async fn diagnostics(&self, _path: &Path, text: &str) -> Vec<Diagnostic> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        assert!(text.contains("let y"), "diagnostics see the written version");
        let mut d: Vec<Diagnostic> = (1..=30)
            .map(|i| Diagnostic {
                line: i,
                column: 1,
                severity: DiagnosticSeverity::Error,
                // One message of several lines, as tsc's chains are.
                message: if i == 2 {
                    format!("error number {i}\nrelated: see line 1")
                } else {
                    format!("error number {i}")
                },
                source: Some("tsc".into()),
            })
            .collect();
        d.push(Diagnostic {
            line: 1,
            column: 1,
            severity: DiagnosticSeverity::Warning,
            message: "a warning".into(),
            source: None,
        });
        d
    }
}

#[tokio::test]
async fn e9_errors_of_the_written_file_at_most_20_with_their_count_and_no_warnings() {
    let mut env = Env::new();
    let lsp = Arc::new(FakeLsp { calls: AtomicUsize::new(0), handles: true });
    env.cx.diagnostics = Some(lsp.clone());
    env.write("a.ts", "let x = 1;\n");
    env.read("a.ts");
    let out = env.edit("a.ts", &[("let x", "let y")]).await;
    let text = out.text_content();
    assert!(text.contains("Errors in the written file (30; the first 20 shown, read_lints lists all)"), "{text}");
    assert!(text.contains("error number 20") && !text.contains("error number 21"));
    // A message's second line is indented under it, not shown as an error of its own.
    assert!(text.contains("error number 2\n      related: see line 1"), "{text}");
    assert_eq!(out.meta["diagnostics"].as_array().map(Vec::len), Some(20));
    assert!(!text.contains("a warning"));
    assert_eq!(lsp.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn e9_file_without_provider_activity_is_not_waited_for() {
    let mut env = Env::new();
    let lsp = Arc::new(FakeLsp { calls: AtomicUsize::new(0), handles: false });
    env.cx.diagnostics = Some(lsp.clone());
    env.write("a.ts", "let x = 1;\n");
    env.read("a.ts");
    let out = env.edit("a.ts", &[("let x", "let y")]).await;
    assert!(out.is_success());
    assert_eq!(lsp.calls.load(Ordering::SeqCst), 0, "a provider that does not handle the file is never asked");
    assert!(!out.text_content().contains("Errors in the written file"));
}

#[tokio::test]
async fn e10_folder_path_and_windows_tab_path_are_clear_errors_and_tabs_in_content_survive() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("src")).unwrap();
    let out = env.edit("src", &[("a", "b")]).await;
    assert!(out.text_content().contains("is a folder"), "{}", out.text_content());
    let out = env.edit("C:\tmp\\file.txt", &[("a", "b")]).await;
    assert!(out.text_content().contains("forward slashes"), "{}", out.text_content());
    env.write("t.txt", "a\tb\n");
    env.read("t.txt");
    assert!(env.edit("t.txt", &[("a\tb", "a\t\tb\nc\td")]).await.is_success());
    assert_eq!(env.text("t.txt"), "a\t\tb\nc\td\n");
    let out = env.edit("missing.txt", &[("a", "b")]).await;
    assert!(out.text_content().contains("create_file"), "{}", out.text_content());
}

/// The two misses the model makes most often get a true explanation: old_string copied with
/// read_file's `  12→` prefixes is named as such, and short lines that are in the file are shown
/// as the nearest candidate instead of "none of its lines occurs" (E11, P1).
#[tokio::test]
async fn e11_p1_line_number_prefixes_are_named_and_short_lines_found_are_shown() {
    let env = Env::new();
    env.write("a.py", "if ok:\n    go()\nelse:\n    stop()\n");
    env.write("b.txt", "b1\nb2\nb3\n");
    env.read("a.py");
    env.read("b.txt");
    for old in ["    2→    go()", "2→    go()\n3→else:"] {
        let out = env.edit("a.py", &[(old, "walk()")]).await;
        assert_eq!(out.status, ToolStatus::Error);
        let t = out.text_content();
        assert!(t.contains("read_file's line-number prefix (`2→`)"), "{t}");
        assert!(t.contains("Without the prefixes the text is at line 2."), "{t}");
        assert!(!t.contains("None of its lines"), "{t}");
    }
    let out = env.edit("b.txt", &[("b1\nbX\nb3", "b1\nB2\nb3")]).await;
    let t = out.text_content();
    assert!(t.contains("The nearest candidate is lines 1-3"), "{t}");
    assert!(t.contains("line 2: the file has `b2`, old_string has `bX`"), "{t}");
    let out = env.patch("*** Begin Patch\n*** Update File: b.txt\n@@\n b1\n-bX\n+B2\n*** End Patch").await;
    let t = out.text_content();
    assert!(t.contains("The nearest candidate is lines 1-2"), "{t}");
    assert!(!t.contains("None of its lines"), "{t}");
    assert_eq!(env.text("b.txt"), "b1\nb2\nb3\n");
}

/// A file whose lines really start with `N→` (a list written `1→2 first step`): a near miss
/// gets the nearest candidate with what differs, in edit_file and apply_patch alike. Before, the
/// arrows were taken for read_file's prefixes: the model was told to strip text that is in the
/// file, and that "None of its lines occurs in the file" (E11). read_file's prefixes quoted
/// over such a file are still named.
#[tokio::test]
async fn e11_arrows_that_are_the_files_own_text_get_the_nearest_candidate() {
    let env = Env::new();
    env.write("a.md", "steps:\n1→2 first step\nend\n");
    env.read("a.md");
    let out = env.edit("a.md", &[("1→2 first stepp", "1→2 first")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    let t = out.text_content();
    assert!(t.contains("line 2: the file has `1→2 first step`, old_string has `1→2 first stepp`"), "{t}");
    assert!(!t.contains("line-number prefix") && !t.contains("None of its lines"), "{t}");
    let out = env
        .patch("*** Begin Patch\n*** Update File: a.md\n@@\n steps:\n-1→2 first stepp\n+1→2 first\n*** End Patch")
        .await;
    let t = out.text_content();
    assert!(t.contains("the file has `1→2 first step`"), "{t}");
    assert!(!t.contains("line-number prefix") && !t.contains("None of its lines"), "{t}");
    // read_file's own prefix in front of the file's arrows is still read_file's.
    let out = env.edit("a.md", &[("2→1→2 first step", "x")]).await;
    let t = out.text_content();
    assert!(t.contains("read_file's line-number prefix (`2→`)"), "{t}");
    assert_eq!(env.text("a.md"), "steps:\n1→2 first step\nend\n");
}

#[tokio::test]
async fn e11_no_match_explains_nearest_candidate_and_advises_re_read() {
    let env = Env::new();
    env.write("a.rs", "fn main() {\n    let total = items.len();\n    println!(\"{total}\");\n}\n");
    env.read("a.rs");
    let out =
        env.edit("a.rs", &[("fn main() {\n    let total = items.count();\n    println!(\"{total}\");\n}", "x")]).await;
    let msg = out.text_content();
    assert!(msg.contains("nearest candidate is lines 1-4"), "{msg}");
    assert!(msg.contains("items.len()") && msg.contains("items.count()"), "{msg}");
    assert!(msg.contains("Read the file again"), "{msg}");
}

#[tokio::test]
async fn e12_encoding_bom_line_endings_final_newline_and_permissions_survive() {
    let env = Env::new();
    // Windows-1251 with CRLF and no final newline, executable.
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("// Привет, мир! Комментарий\r\nlet a = 1;\r\nlet b = 2;");
    env.write("ru.js", &cp1251);
    std::fs::set_permissions(env.path("ru.js"), std::fs::Permissions::from_mode(0o755)).unwrap();
    env.read("ru.js");
    let out = env.edit("ru.js", &[("let a = 1;\nlet b = 2;", "let a = 10;\n// Пока\nlet b = 20;")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    let (expected, _, _) =
        encoding_rs::WINDOWS_1251.encode("// Привет, мир! Комментарий\r\nlet a = 10;\r\n// Пока\r\nlet b = 20;");
    assert_eq!(env.bytes("ru.js"), expected.to_vec());
    assert_eq!(std::fs::metadata(env.path("ru.js")).unwrap().permissions().mode() & 0o777, 0o755);

    // UTF-16 LE with BOM.
    let fmt = kodik_core::text::TextFormat {
        encoding: encoding_rs::UTF_16LE,
        bom: true,
        line_ending: kodik_core::text::LineEnding::Lf,
    };
    env.write("u16.txt", kodik_core::text::encode("über\nstraße\n", &fmt));
    env.read("u16.txt");
    assert!(env.edit("u16.txt", &[("straße", "Straße")]).await.is_success());
    assert_eq!(env.bytes("u16.txt"), kodik_core::text::encode("über\nStraße\n", &fmt));

    // UTF-8 BOM, mixed endings: untouched lines keep theirs, new lines follow their neighbours.
    env.write("mixed.txt", b"\xEF\xBB\xBFa\r\nb\nc\r\n");
    env.read("mixed.txt");
    assert!(env.edit("mixed.txt", &[("b", "b\nb2")]).await.is_success());
    assert_eq!(env.bytes("mixed.txt"), b"\xEF\xBB\xBFa\r\nb\nb2\nc\r\n");
}

#[tokio::test]
async fn e12_character_the_encoding_cannot_store_is_refused_without_writing() {
    let env = Env::new();
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode("привет мир, это тест кодировки\n");
    env.write("ru.txt", &cp1251);
    env.read("ru.txt");
    let out = env.edit("ru.txt", &[("тест", "test ✅")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("cannot hold"), "{}", out.text_content());
    assert_eq!(env.bytes("ru.txt"), cp1251.to_vec());
}

/// E12, E4: a UTF-8 file with a few damaged bytes (shown as U+FFFD) can be edited elsewhere, and
/// keeps those bytes exactly, with or without a BOM; an edit that removes a U+FFFD is refused and
/// leaves the file as it was. Before, every edit of such a file was refused.
#[tokio::test]
async fn e12_e4_a_utf8_file_with_damaged_bytes_is_edited_and_keeps_them() {
    let env = Env::new();
    let line = |text: &str| text.as_bytes().to_vec();
    let damaged = [b"name = \"caf\xe9\"\n".as_slice(), b"city = \"K\xf6ln\"\n"].concat();
    let original = [damaged.clone(), line("mark = \"\u{2713}\u{2713}\u{2713}\"\n"), line("x = 1\n")].concat();
    env.write("legacy.py", &original);
    env.read("legacy.py");
    let out = env.edit("legacy.py", &[("x = 1", "x = \"\u{2713}\"")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    let expected =
        [damaged.clone(), line("mark = \"\u{2713}\u{2713}\u{2713}\"\n"), line("x = \"\u{2713}\"\n")].concat();
    assert_eq!(env.bytes("legacy.py"), expected);

    // Removing one U+FFFD of two: which bytes remain where is unknown.
    let out = env.edit("legacy.py", &[("caf\u{FFFD}", "cafe")]).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert!(out.text_content().contains("not valid UTF-8"), "{}", out.text_content());
    assert_eq!(env.bytes("legacy.py"), expected, "a refused edit wrote");

    // Replacing every U+FFFD at once repairs the file: plain UTF-8 is written.
    let out = env.edit("legacy.py", &[("caf\u{FFFD}", "caf\u{e9}"), ("K\u{FFFD}ln", "K\u{f6}ln")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    let repaired = String::from_utf8(env.bytes("legacy.py")).unwrap();
    assert!(repaired.starts_with("name = \"caf\u{e9}\"\ncity = \"K\u{f6}ln\"\n"), "{repaired}");

    env.write("bom.txt", b"\xEF\xBB\xBFa \xff\nb\n");
    env.read("bom.txt");
    assert!(env.edit("bom.txt", &[("b", "c")]).await.is_success());
    assert_eq!(env.bytes("bom.txt"), b"\xEF\xBB\xBFa \xff\nc\n");
}

/// E12: lines holding damaged bytes that an edit moves take their own bytes along — with
/// edit_file and apply_patch, and a real U+FFFD character stays one. Before, the bytes were put
/// back in order of appearance, so swapping `A=\xff` and `B=\xfe` wrote `B=\xff` and `A=\xfe`
/// and reported success. Where nothing tells which bytes go where, nothing is written.
#[tokio::test]
async fn e12_moved_lines_keep_their_own_damaged_bytes() {
    let env = Env::new();
    let head = "// Gr\u{f6}\u{df}e \u{2713} caf\u{e9}\n".as_bytes();
    env.write("s.txt", [head, b"A=\xff\n", b"B=\xfe\n", b"end\n"].concat());
    env.read("s.txt");
    let out = env.edit("s.txt", &[("A=\u{FFFD}\nB=\u{FFFD}\n", "B=\u{FFFD}\nA=\u{FFFD}\n")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.bytes("s.txt"), [head, b"B=\xfe\n", b"A=\xff\n", b"end\n"].concat());

    // A moved line that is also changed keeps its bytes; a real U+FFFD (EF BF BD) stays one.
    let real = "real: \u{FFFD} here\n".as_bytes();
    env.write("r.txt", [head, real, b"bad: \xff\n"].concat());
    env.read("r.txt");
    let patch = "*** Begin Patch\n*** Update File: r.txt\n@@\n-real: \u{FFFD} here\n-bad: \u{FFFD}\n\
                 +bad: \u{FFFD} (fixed later)\n+real: \u{FFFD} here\n*** End Patch";
    let out = env.patch(patch).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.bytes("r.txt"), [head, b"bad: \xff (fixed later)\n", real].concat());

    // Both lines rewritten beyond recognition: which bytes belong to which U+FFFD is unknown.
    env.write("u.txt", [head, b"A=\xff\nB=\xfe\n"].concat());
    env.read("u.txt");
    let out = env.edit("u.txt", &[("A=\u{FFFD}\nB=\u{FFFD}\n", "first line \u{FFFD}\nsecond line \u{FFFD}\n")]).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert!(out.text_content().contains("cannot be told"), "{}", out.text_content());
    assert_eq!(env.bytes("u.txt"), [head, b"A=\xff\nB=\xfe\n"].concat(), "a refused edit wrote");
}

#[tokio::test]
async fn g16_ignored_file_cannot_be_edited_and_binary_is_refused() {
    let env = Env::new();
    env.write(".kodikignore", "secret/\n");
    env.write("secret/key.txt", "k\n");
    let out = env.edit("secret/key.txt", &[("k", "x")]).await;
    assert!(out.text_content().contains(".kodikignore"), "{}", out.text_content());
    assert_eq!(env.text("secret/key.txt"), "k\n");
    env.write("bin.dat", b"\x7fELF\x00\x01\x02");
    env.read("bin.dat");
    let out = env.edit("bin.dat", &[("ELF", "x")]).await;
    assert!(out.text_content().contains("binary"), "{}", out.text_content());
}

#[test]
fn e3_reported_lines_follow_the_text_each_edit_saw() {
    use kodik_schema::edit::Edit;
    let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    let e = |o: &str, n: &str| Edit { old_string: o.into(), new_string: n.into() };
    let (out, applied) =
        kodik_edit::edit_file::apply_edits(&text, &[e("l3\n", "a\nb\nc\n"), e("l9", "x"), e("l1\n", "")]).unwrap();
    assert_eq!(applied.iter().map(|a| a.line).collect::<Vec<_>>(), vec![3, 11, 1]);
    assert!(out.starts_with("l2\na\nb\nc\nl4"));
}

#[tokio::test]
async fn e6_g9_long_diffs_are_saved_in_the_toolsets_spool_folder_and_short_ones_leave_nothing() {
    let spool = tempfile::tempdir().unwrap();
    let env = Env::with_tools(EditToolset::new().preview(PreviewConfig::default().spool_in(spool.path())));
    let text: String = (0..5000).map(|i| format!("let value_{i} = compute(alpha, beta, {i}); // line\n")).collect();
    env.write("big.rs", &text);
    // 50 edits: a diff of ~25 KB, longer than the head (16 KB) but within head + tail (32 KB),
    // so it is shown whole and the spool file started for it must not stay behind (issue 20.4).
    env.read("big.rs");
    let edits: Vec<(String, String)> = (0..50)
        .map(|k| (format!("let value_{} = compute", k * 100), format!("let value_{} = evaluate", k * 100)))
        .collect();
    let pairs: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let out = env.edit("big.rs", &pairs).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().len() > 16 * 1024, "the case must pass the head: {}", out.text_content().len());
    assert_eq!(out.full_output, None);
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
    // A whole-file change: the diff is cut, saved in full in the toolset's folder.
    env.read("big.rs");
    let new_text = env.text("big.rs").replace("compute", "calc");
    let out = env.edit("big.rs", &[(env.text("big.rs").as_str(), new_text.as_str())]).await;
    assert!(out.is_success(), "{}", out.text_content());
    let full = out.full_output.expect("a long diff is saved");
    assert_eq!(full.parent(), Some(spool.path()));
    assert!(std::fs::read_to_string(&full).unwrap().contains("+let value_4999 = calc(alpha, beta, 4999); // line"));
}

#[tokio::test]
async fn e1_e2_e4_e12_whole_file_replacement_taken_without_a_second_read_keeps_every_rule() {
    let env = Env::new();
    // CRLF file, LF new text: the file's line endings are kept (the cascade decides).
    env.write("crlf.txt", "a\r\nb\r\n");
    env.read("crlf.txt");
    assert!(env.edit("crlf.txt", &[("a\r\nb\r\n", "x\ny\n")]).await.is_success());
    assert_eq!(env.text("crlf.txt"), "x\r\ny\r\n");
    // Identical new text: refused, file untouched.
    env.write("same.txt", "keep\n");
    env.read("same.txt");
    let out = env.edit("same.txt", &[("keep\n", "keep\n")]).await;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.text_content());
    assert_eq!(env.text("same.txt"), "keep\n");
    // Changed on disk since the read, to exactly the old_string: still refused (E2).
    env.write("moved.txt", "one\n");
    env.read("moved.txt");
    env.write("moved.txt", "two\n");
    let out = env.edit("moved.txt", &[("two\n", "three\n")]).await;
    assert!(out.text_content().contains("changed on disk"), "{}", out.text_content());
    assert_eq!(env.text("moved.txt"), "two\n");
    // A BOM file: the BOM is not part of the text and survives.
    env.write("bom.txt", "\u{FEFF}old\n");
    env.read("bom.txt");
    assert!(env.edit("bom.txt", &[("old\n", "new\n")]).await.is_success());
    assert_eq!(env.bytes("bom.txt"), "\u{FEFF}new\n".as_bytes());
    // The plain case, then undo: the checkpoint holds the old text.
    env.write("plain.txt", "first\nsecond\n");
    env.read("plain.txt");
    let out = env.edit("plain.txt", &[("first\nsecond\n", "only\n")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(out.meta["stage"], "exact");
    assert_eq!(env.text("plain.txt"), "only\n");
    env.tools.checkpoints().undo_all();
    assert_eq!(env.text("plain.txt"), "first\nsecond\n");
}

/// Replaces the whole of `big.txt` (`old` → `new`) twice: first after the file changed on
/// disk since its read into exactly `old` — refused (E2), the file untouched and no diff saved,
/// though the diff is built while the file is checked — then after a fresh read, written with
/// its full diff saved. Returns the environment (with its spool folder) and the second result.
async fn refused_after_a_change_then_written(old: &str, new: &str) -> (Env, tempfile::TempDir, kodik_core::ToolOutput) {
    let spool = tempfile::tempdir().unwrap();
    let env = Env::with_tools(EditToolset::new().preview(PreviewConfig::default().spool_in(spool.path())));
    env.write("big.txt", "as read\n");
    env.read("big.txt");
    env.write("big.txt", old);
    let out = env.edit("big.txt", &[(old, new)]).await;
    assert!(out.text_content().contains("changed on disk"), "{}", out.text_content());
    assert_eq!(env.text("big.txt"), old);
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
    env.read("big.txt");
    let out = env.edit("big.txt", &[(old, new)]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("big.txt"), new);
    assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 1);
    (env, spool, out)
}

#[tokio::test]
async fn e2_g21_refused_whole_file_replacement_leaves_no_saved_diff() {
    // Long enough for the diff to be saved in full.
    let old: String = (0..20_000).map(|i| format!("old line {i}\n")).collect();
    let new: String = (0..20_000).map(|i| format!("new line {i}\n")).collect();
    refused_after_a_change_then_written(&old, &new).await;
}

#[tokio::test]
async fn e2_e6_e12_whole_file_replacement_of_a_large_file_keeps_every_rule() {
    // Over 1 MB, where the file is compared in one pass and both versions are hashed on their
    // own threads: the same rules as for a small file.
    let old: String = (0..40_000).map(|i| format!("old line {i:>20}\n")).collect();
    let new: String = (0..40_000).map(|i| format!("new line {i:>20}\n")).collect();
    assert!(old.len() > 1 << 20);
    // Refused after a change on disk (E2), then written; the saved diff is exact and whole (E6).
    let (env, _spool, out) = refused_after_a_change_then_written(&old, &new).await;
    assert_eq!((out.meta["added"].as_u64(), out.meta["removed"].as_u64()), (Some(40_000), Some(40_000)));
    let full = std::fs::read_to_string(out.full_output.expect("saved in full")).unwrap();
    assert!(
        full.starts_with("--- a/big.txt\n+++ b/big.txt\n@@ -1,40000 +1,40000 @@\n-old line                    0\n"),
        "{}",
        &full[..80]
    );
    assert!(full.ends_with("+new line                39999\n"));
    assert_eq!(
        full.len(),
        old.len() + new.len() + 40_000 * 2 + "--- a/big.txt\n+++ b/big.txt\n@@ -1,40000 +1,40000 @@\n".len()
    );
    // A CRLF file given LF text: its line endings stay (E12).
    let crlf = old.replace('\n', "\r\n");
    env.write("crlf.txt", &crlf);
    env.read("crlf.txt");
    assert!(env.edit("crlf.txt", &[(&crlf, &new)]).await.is_success());
    assert_eq!(env.text("crlf.txt"), new.replace('\n', "\r\n"));
}

#[tokio::test]
async fn e3_e12_large_edits_one_after_another_each_write_exactly_their_own_text() {
    // Each large edit builds its text in the memory the previous one left: nothing of an
    // earlier text may show through, whatever the sizes.
    let env = Env::new();
    let file = |tag: &str, n: usize| -> String { (0..n).map(|i| format!("{tag} line {i:>12}\n")).collect() };
    let (a, b) = (file("alpha", 80_000), file("beta", 50_000));
    assert!(b.len() > 1 << 20 && a.len() > b.len());
    env.write("a.txt", &a);
    env.write("b.txt", &b);
    env.read("a.txt");
    env.read("b.txt");
    let out = env.edit("a.txt", &[("alpha line        40000\n", "A\n")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("a.txt"), a.replace("alpha line        40000\n", "A\n"));
    let out = env.edit("b.txt", &[("beta line            7\n", ""), ("beta line        49999\n", "end\n")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(
        env.text("b.txt"),
        b.replace("beta line            7\n", "").replace("beta line        49999\n", "end\n")
    );
    let out = env.edit("a.txt", &[("alpha line            0\n", "")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(
        env.text("a.txt"),
        a.replace("alpha line        40000\n", "A\n").replace("alpha line            0\n", "")
    );
}
