//! clangd's background index (what finds references in files that are not open) is written
//! next to the project's compile_commands.json, in `.cache/clangd/index`. kodik starts clangd
//! for the user's project, so that folder must not show in `git status` or be committed by a
//! `git add -A`, while cross-file references keep working (L2, L5).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Harness, configured};
use serde_json::json;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The index files clangd has written below `dir`.
fn index_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join(".cache/clangd/index")) else { return Vec::new() };
    entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".idx")).collect()
}

/// L2, L5: after clangd has indexed a committed C project, references still come from files
/// that are not open, and `git status --porcelain` is empty: the index is invisible to git
/// (and no tracked file was touched to make it so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_l5_clangd_background_index_stays_out_of_git_status() {
    let Some(cfg) = configured("clangd", "clangd") else { return };
    // The database at the root, and in `build/` as CMake writes it (clangd finds it there too).
    for database in ["compile_commands.json", "build/compile_commands.json"] {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::new(dir.path(), cfg.clone());
        let root = h.root.display().to_string();
        let entry =
            |f: &str| json!({"directory": root, "file": f, "arguments": ["cc", "-std=c11", "-Iinclude", "-c", f]});
        h.write(database, &json!([entry("src/main.c"), entry("src/util.c")]).to_string());
        h.write("include/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\n#endif\n");
        h.write("src/util.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n");
        h.write("src/main.c", "#include \"util.h\"\nint main(void) {\n    return add(1, 2);\n}\n");
        git(&h.root, &["init", "-q"]);
        git(&h.root, &["add", "-A"]);
        git(&h.root, &["commit", "-q", "-m", "c project"]);

        // main.c is never opened: its use is found through the background index.
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let refs =
                h.lsp(json!({"operation": "references", "path": "include/util.h", "line": 3, "symbol": "add"})).await;
            if refs.contains("src/main.c:3:12:") {
                break;
            }
            assert!(Instant::now() < end, "{database}: clangd never found the use in src/main.c: {refs}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // The index really is on disk in the project (so the checks below are not vacuous).
        let end = Instant::now() + Duration::from_secs(30);
        while index_files(&h.root).len() < 2 {
            assert!(Instant::now() < end, "{database}: clangd wrote no index under .cache/clangd/index");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let status = git(&h.root, &["status", "--porcelain", "--untracked-files=all"]);
        assert_eq!(status, "", "{database}: the index shows in git status");
        assert_eq!(git(&h.root, &["add", "-A", "--dry-run"]), "", "{database}: git add -A would commit the index");
        assert_eq!(git(&h.root, &["diff", "HEAD", "--stat"]), "", "{database}: a tracked file was changed");
    }
}
