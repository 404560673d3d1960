//! Behaviour tests of kodik-search's `read_file` (SPEC IDs in the test names).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)
mod common;

use common::Env;
use kodik_core::{FileVersion, Settings, ToolStatus};
use kodik_search::SearchToolset;
use serde_json::json;

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn r1_line_numbers_in_quotable_format() {
    let env = Env::new();
    env.write("a.txt", "first\n\tindented\r\nlast");
    let text = env.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(text, "1→first\n2→\tindented\n3→last\n");
}

#[tokio::test]
async fn r1_several_ranges_in_one_call() {
    let env = Env::new();
    env.write("a.txt", numbered(300));
    let out = env
        .call(
            "read_file",
            json!({"path": "a.txt", "ranges": [{"start_line": 2, "end_line": 3}, {"start_line": 250, "end_line": 251}]}),
        )
        .await;
    let text = out.text_content();
    assert!(text.starts_with("  2→line 2\n  3→line 3\n250→line 250\n251→line 251\n"), "{text}");
    assert!(text.contains("300 lines"), "{text}");
    assert_eq!(out.meta["shown"], json!([[2, 3], [250, 251]]));
}

#[tokio::test]
async fn r1_bad_ranges_are_specific_errors() {
    let env = Env::new();
    env.write("a.txt", numbered(10));
    let e = env.err("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 0, "end_line": 3}]})).await;
    assert!(e.contains("1-based"), "{e}");
    let e = env.err("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 5, "end_line": 3}]})).await;
    assert!(e.contains("before start_line"), "{e}");
    let e = env.err("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 11, "end_line": 12}]})).await;
    assert!(e.contains("has 10 lines"), "{e}");
    // An end past the file is clamped and said so.
    let t = env.ok("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 9, "end_line": 99}]})).await;
    assert!(t.starts_with(" 9→line 9\n10→line 10\n"), "{t}");
    assert!(t.contains("end_line 99 is past the end"), "{t}");
}

#[tokio::test]
async fn r2_sixteen_kb_per_call_with_exact_next_ranges() {
    let env = Env::new();
    let content: String = (1..=3000).map(|i| format!("{i:05} {}\n", "x".repeat(40))).collect();
    env.write("big.txt", &content);
    let out = env.call("read_file", json!({"path": "big.txt"})).await;
    let text = out.text_content();
    assert!(text.len() <= 16 * 1024, "{} bytes", text.len());
    assert_eq!(out.meta["truncated"], true);
    let next = out.meta["next_ranges"].clone();
    let first_missing = next[0]["start_line"].as_u64().unwrap() as usize;
    assert!(text.contains(&format!("ranges: {}", serde_json::to_string(&next).unwrap())), "{text}");
    assert_eq!(next[0]["end_line"], 3000);
    // Everything up to the cut was shown, nothing after it.
    assert!(text.contains(&format!("→{:05} ", first_missing - 1)));
    assert!(!text.contains(&format!("→{first_missing:05} ")));
    // Following the advice until done gives back every line exactly once.
    env.cx.session.compacted();
    let mut seen = Vec::new();
    let mut args = json!({"path": "big.txt"});
    for _ in 0..100 {
        let out = env.call("read_file", args.clone()).await;
        assert!(out.text_content().len() <= 16 * 1024);
        for l in out.text_content().lines().filter(|l| l.contains('→')) {
            seen.push(l.split('→').nth(1).unwrap().to_string());
        }
        if out.meta["truncated"] == false {
            break;
        }
        args = json!({"path": "big.txt", "ranges": out.meta["next_ranges"]});
    }
    let expected: Vec<String> = content.lines().map(str::to_string).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn r2_many_ranges_stay_within_sixteen_kb_including_the_notes() {
    let env = Env::new();
    let content: String = (1..=5000).map(|i| format!("{i:05} {}\n", "y".repeat(60))).collect();
    env.write("big.txt", &content);
    let ranges: Vec<_> = (0..60).map(|i| json!({"start_line": i * 80 + 1, "end_line": i * 80 + 79})).collect();
    let out = env.call("read_file", json!({"path": "big.txt", "ranges": ranges})).await;
    assert_eq!(out.meta["truncated"], true);
    assert!(out.text_content().len() <= 16 * 1024, "{}", out.text_content().len());
    assert!(out.meta["next_ranges"].as_array().unwrap().len() > 40);
}

#[tokio::test]
async fn r2_cut_inside_one_long_line_and_continue_by_column() {
    let env = Env::new();
    // A minified JSON: one 50 KB line with multi-byte characters.
    let line: String = (0..5000).map(|i| format!("{{\"k{i}\":\"é\"}},")).collect();
    env.write("min.json", format!("[{line}]\nsecond\n"));
    let out = env.call("read_file", json!({"path": "min.json"})).await;
    let text = out.text_content();
    assert!(text.len() <= 16 * 1024, "{}", text.len());
    assert!(text.contains("Line 1 is"), "{text}");
    let next = &out.meta["next_ranges"][0];
    assert_eq!((next["start_line"].as_u64(), next["end_line"].as_u64()), (Some(1), Some(2)));
    assert!(next["start_column"].as_u64().unwrap() > 1000);
    // Reassemble the whole line by following next_ranges.
    let mut pieces = String::new();
    let mut args = json!({"path": "min.json"});
    let mut calls = 0;
    env.cx.session.compacted();
    while calls < 100 {
        calls += 1;
        let out = env.call("read_file", args.clone()).await;
        assert!(out.text_content().len() <= 16 * 1024);
        let body = out.text_content();
        let first = body.lines().next().unwrap();
        if let Some(piece) = first.strip_prefix("1→") {
            pieces.push_str(piece);
        }
        if out.meta["truncated"] == false {
            assert!(body.contains("2→second"), "{body}");
            break;
        }
        args = json!({"path": "min.json", "ranges": out.meta["next_ranges"]});
    }
    assert_eq!(pieces, format!("[{line}]"));
    assert!(calls >= 4, "{calls}");
}

#[tokio::test]
async fn r3_file_over_size_limit_recommends_grep_or_ranges() {
    let env = Env::with(SearchToolset::new().max_file_bytes(1000), Settings::default());
    env.write("big.log", numbered(500));
    let out = env.call("read_file", json!({"path": "big.log"})).await;
    let text = out.text_content();
    assert_eq!(out.meta["too_large"], true);
    assert!(text.contains("grep") && text.contains("ranges") && text.contains("500 lines"), "{text}");
    assert!(!text.contains("line 1\n"));
    assert!(env.cx.session.last_read(&env.root().join("big.log")).is_none(), "nothing was read");
    // Ranges still work on a large file.
    let t = env.ok("read_file", json!({"path": "big.log", "ranges": [{"start_line": 400, "end_line": 401}]})).await;
    assert!(t.starts_with("400→line 400\n401→line 401\n"), "{t}");
}

#[test]
fn r3_size_limit_is_derived_from_the_context_window() {
    let small = SearchToolset::new().context_window_tokens(32_000);
    let large = SearchToolset::new().context_window_tokens(1_000_000);
    assert!(small.config().max_file_bytes() < large.config().max_file_bytes());
    assert_eq!(SearchToolset::new().max_file_bytes(5).config().max_file_bytes(), 5);
}

#[tokio::test]
async fn r4_rereading_same_lines_in_one_message_is_still_current() {
    let env = Env::new();
    env.write("a.txt", numbered(50));
    env.ok("read_file", json!({"path": "a.txt"})).await;
    // Other lines, same file, same message: a subset of what was read → still current.
    let out = env.call("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 10, "end_line": 20}]})).await;
    assert_eq!(out.meta["still_current"], true, "{}", out.text_content());
    assert!(out.text_content().contains("still current"));
    assert!(!out.text_content().contains("line 10"));
    // The file changed: fresh content.
    env.write("a.txt", numbered(60));
    let t = env.ok("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 10, "end_line": 20}]})).await;
    assert!(t.contains("10→line 10"), "{t}");
    // A new user message: lines not read in it come back (different range, so not a G15 repeat).
    env.cx.session.next_message();
    let t = env.ok("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 10, "end_line": 21}]})).await;
    assert!(t.contains("21→line 21"), "{t}");
}

#[tokio::test]
async fn r4_a_read_after_the_session_wrote_the_file_shows_the_content() {
    let env = Env::new();
    env.write("a.txt", numbered(5));
    env.ok("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 1, "end_line": 5}]})).await;
    // An edit tool writes the file and records the write (E9), in the same message.
    env.write("a.txt", "edited\n");
    env.cx.session.record_write(&env.root().join("a.txt"), FileVersion::of_bytes(b"edited\n"));
    let t = env.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(t, "1→edited\n");
    // Now it was read: the same lines again are still current.
    let out = env.call("read_file", json!({"path": "a.txt", "ranges": [{"start_line": 1, "end_line": 1}]})).await;
    assert_eq!(out.meta["still_current"], true, "{}", out.text_content());
}

#[tokio::test]
async fn e2_reads_are_recorded_with_version_and_lines() {
    let env = Env::new();
    env.write("a.txt", numbered(5));
    env.ok("read_file", json!({"path": "./a.txt", "ranges": [{"start_line": 2, "end_line": 3}]})).await;
    let rec = env.cx.session.last_read(&env.root().join("a.txt")).unwrap();
    assert_eq!(rec.version, FileVersion::of_bytes(numbered(5).as_bytes()));
    assert_eq!(rec.ranges, vec![(2, 3)]);
}

#[tokio::test]
async fn r6_encodings_are_decoded_and_named() {
    let env = Env::new();
    let text = "// Комментарий на русском языке: привет, мир!\nфункция возвращает значение\n";
    let (cp1251, _, _) = encoding_rs::WINDOWS_1251.encode(text);
    env.write("win.txt", &cp1251);
    let out = env.ok("read_file", json!({"path": "win.txt"})).await;
    assert!(out.contains("1→// Комментарий на русском языке: привет, мир!"), "{out}");
    assert!(out.contains("windows-1251"), "{out}");
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(text.encode_utf16().flat_map(|u| u.to_le_bytes()));
    env.write("u16.txt", &utf16);
    let out = env.ok("read_file", json!({"path": "u16.txt"})).await;
    assert!(out.contains("2→функция возвращает значение"), "{out}");
    assert!(out.contains("UTF-16LE with BOM"), "{out}");
}

#[tokio::test]
async fn r6_files_encoding_setting_decides_ambiguous_files() {
    let settings = Settings { files_encoding: Some("koi8-r".into()) };
    let env = Env::with(SearchToolset::new(), settings);
    let (koi, _, _) = encoding_rs::KOI8_R.encode("привет мир\n");
    env.write("k.txt", &koi);
    let out = env.ok("read_file", json!({"path": "k.txt"})).await;
    assert!(out.contains("1→привет мир"), "{out}");
}

#[tokio::test]
async fn r_folder_missing_ignored_binary_are_specific_errors() {
    let env = Env::new();
    env.write("dir/x.txt", "x");
    env.write("secret.env", "KEY=1");
    env.write(".kodikignore", "*.env\n");
    env.write("prog.bin", b"\x7fELF\x02\x01\x00\x00\x00\x01\x00");
    let e = env.err("read_file", json!({"path": "dir"})).await;
    assert!(e.contains("is a folder") && e.contains("glob"), "{e}");
    let e = env.err("read_file", json!({"path": "nope.txt"})).await;
    assert!(e.contains("does not exist"), "{e}");
    let e = env.err("read_file", json!({"path": "secret.env"})).await;
    assert!(e.contains(".kodikignore"), "{e}");
    let e = env.err("read_file", json!({"path": "prog.bin"})).await;
    assert!(e.contains("binary"), "{e}");
    let e = env.err("read_file", json!({"path": "/etc/hostname"})).await;
    assert!(e.contains("outside the workspace"), "{e}");
}

#[tokio::test]
async fn g15_identical_read_of_unchanged_file_gets_a_short_hint() {
    let env = Env::new();
    env.write("a.txt", numbered(5));
    let args = json!({"path": "a.txt", "ranges": [{"start_line": 1, "end_line": 3}]});
    env.ok("read_file", args.clone()).await;
    env.cx.session.next_message();
    let out = env.call("read_file", args.clone()).await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(out.meta["unchanged"], true, "{}", out.text_content());
    assert!(out.text_content().contains("Unchanged since your last identical call"));
    // Changed file → fresh data.
    env.write("a.txt", "new 1\nnew 2\nnew 3\n");
    let t = env.ok("read_file", args.clone()).await;
    assert!(t.contains("1→new 1"), "{t}");
    // After compaction the same file can be read whole again.
    env.cx.session.compacted();
    let t = env.ok("read_file", args).await;
    assert!(t.contains("1→new 1"), "{t}");
}

#[tokio::test]
async fn r_empty_file_reads_as_empty() {
    let env = Env::new();
    env.write("e.txt", "");
    let t = env.ok("read_file", json!({"path": "e.txt"})).await;
    assert!(t.contains("empty (0 lines)"), "{t}");
}

#[tokio::test]
async fn r_missing_path_names_the_closest_existing_files_of_its_folder() {
    let env = Env::new();
    env.write("a.txt", "a");
    env.write("src/main.rs", "fn main() {}");
    let e = env.err("read_file", json!({"path": "a.tx"})).await;
    assert!(e.contains("`a.tx` does not exist; did you mean: a.txt?"), "{e}");
    let e = env.err("read_file", json!({"path": "scr/main.rs"})).await;
    assert!(e.contains("did you mean: src/main.rs?"), "{e}");
}
