//! A writer killed with SIGKILL at any moment leaves every file as one whole version and no
//! temporary file in the folder, once the next write there has run (E12, P1; issue 17.2).
//!
//! The writer is this test binary run again as a child process, applying real patches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use kodik_core::{ToolCall, ToolContext, ToolRegistry, Workspace, dispatch};
use kodik_edit::EditToolset;

const CHILD_ENV: &str = "KODIK_CRASH_WRITER_DIR";
/// Where the child's results keep their full diffs: a folder of the test's own, so the
/// megabytes of diff per write do not pile up in the user's spool folder.
const SPOOL_ENV: &str = "KODIK_CRASH_WRITER_SPOOL";
const FILES: [&str; 2] = ["a.txt", "b.txt"];
const LINES: usize = 20_000; // ~1 MB per file: a write takes long enough for kills to land inside it

fn version(k: u64) -> String {
    let line = format!("version {k:010} of this file, the same on every line\n");
    line.repeat(LINES)
}

/// The version a file holds, if it is exactly one whole version.
fn whole_version(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let k: u64 = text.strip_prefix("version ")?.get(..10)?.parse().ok()?;
    (text == version(k)).then_some(k)
}

/// The child: rewrites both files with `apply_patch` (`*** Add File` over an existing file) until killed.
async fn write_forever(dir: &Path) -> ! {
    let mut registry = ToolRegistry::new();
    EditToolset::new().register(&mut registry);
    let cx = ToolContext::new(Workspace::new(dir).unwrap());
    for k in 1.. {
        let body: String = version(k).lines().map(|l| format!("+{l}\n")).collect();
        let patch = format!("*** Begin Patch\n*** Add File: a.txt\n{body}*** Add File: b.txt\n{body}*** End Patch");
        let out =
            dispatch(&registry, &ToolCall::new("w", "apply_patch", serde_json::json!({"input": patch})), &cx).await;
        assert!(out.is_success(), "{}", out.text_content());
    }
    unreachable!("the loop only ends when the process is killed")
}

/// A little randomness without a dependency: the clock's nanoseconds, stirred.
fn random_below(n: u64, seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % n
}

#[tokio::test]
async fn e12_p1_writer_killed_at_random_moments_leaves_whole_files_and_no_temp_files() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        kodik_core::preview::set_default_spool_dir(std::env::var_os(SPOOL_ENV).map(Into::into));
        write_forever(Path::new(&dir)).await;
    }
    let mut seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut leftovers_seen = 0;
    let mut versions_seen = std::collections::BTreeSet::new();
    let spool = tempfile::tempdir().unwrap();
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        for f in FILES {
            std::fs::write(dir.path().join(f), version(0)).unwrap();
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "e12_p1_writer_killed_at_random_moments_leaves_whole_files_and_no_temp_files"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env(SPOOL_ENV, spool.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(50 + random_below(1000, &mut seed)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let names = |d: &Path| {
            let mut v: Vec<String> =
                std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            v.sort();
            v
        };
        if names(dir.path()).len() != FILES.len() {
            leftovers_seen += 1;
        }
        for f in FILES {
            let k = whole_version(&std::fs::read(dir.path().join(f)).unwrap());
            assert!(k.is_some(), "round {round}: `{f}` is not one whole version");
            versions_seen.extend(k);
        }
        // The next write in the folder (here: another process's) heals whatever the kill left.
        let a = dir.path().join("a.txt");
        kodik_core::fs::write_atomic(&a, &std::fs::read(&a).unwrap(), false).unwrap();
        assert_eq!(names(dir.path()), FILES, "round {round}: only the files themselves remain");
    }
    eprintln!("versions seen: {versions_seen:?}; leftovers seen: {leftovers_seen}");
    // The kills did land while writing was going on, not only before the first write.
    assert!(versions_seen.len() > 1, "versions seen: {versions_seen:?}; leftovers seen: {leftovers_seen}");
    assert!(
        std::fs::read_dir(spool.path()).unwrap().next().is_some(),
        "the child's full diffs went to the test's spool folder"
    );
}
