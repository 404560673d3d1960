//! Folders and files the search cannot read are named in the answer, never passed over in
//! silence (ripgrep names them on stderr and exits 2).
//!
//! Tests usually run as root, who reads everything: each test first drops, for its own thread
//! and the threads it starts, the two capabilities that let root past file modes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (common.md)
mod common;

use std::os::unix::fs::PermissionsExt as _;

use common::Env;
use serde_json::json;

/// Drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this thread's effective set (threads it
/// starts afterwards inherit that), so modes like 000 hold even for root. Other test threads
/// keep theirs.
#[allow(unsafe_code)] // capget/capset have no safe wrapper in the workspace's dependencies.
fn obey_file_modes() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const DAC_BITS: u32 = (1 << 1) | (1 << 2);
    let mut header = Header { version: VERSION_3, pid: 0 };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset read and write exactly the header and two data structs of
    // _LINUX_CAPABILITY_VERSION_3, for the calling thread (pid 0).
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()), 0);
        data[0].effective &= !DAC_BITS;
        assert_eq!(libc::syscall(libc::SYS_capset, &header, data.as_ptr()), 0);
    }
}

fn chmod(path: &std::path::Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs `f` on a fresh thread that obeys file modes, with its own runtime.
fn obeying_modes<F: std::future::Future<Output = ()>>(f: impl FnOnce() -> F + Send + 'static) {
    std::thread::spawn(move || {
        obey_file_modes();
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(f());
    })
    .join()
    .unwrap();
}

#[test]
fn gr1_unreadable_folders_and_files_are_named_not_skipped_in_silence() {
    obeying_modes(|| async {
        let env = Env::new();
        env.write("ok/a.txt", "needle a\n");
        env.write("ok/unread.txt", "needle u\n");
        env.write("locked/l.txt", "needle l\n");
        chmod(&env.root().join("locked"), 0o000);
        chmod(&env.root().join("ok/unread.txt"), 0o000);

        let out = env.call("grep", json!({"pattern": "needle"})).await;
        let t = out.text_content();
        assert!(out.is_success(), "{t}");
        assert!(t.starts_with("Found 1 matching line in 1 file\nok/a.txt:1:needle a\n"), "{t}");
        assert!(
            t.ends_with(
                "[Not searched, could not be read: `locked` (permission denied), `ok/unread.txt` (permission denied).]"
            ),
            "{t}"
        );
        assert_eq!(out.meta["unreadable"], 2);
        assert_eq!(out.meta["searched_files"], 1, "the unreadable file was not searched");

        // Nothing readable with hits: the answer still says what could not be read.
        let t = env.ok("grep", json!({"pattern": "nothing-like-this"})).await;
        assert!(t.starts_with("No matches") && t.contains("could not be read: `locked`"), "{t}");

        // Searching the unreadable folder itself is an error, not "No matches".
        let e = env.err("grep", json!({"pattern": "needle", "path": "locked"})).await;
        assert!(e.contains("locked") && e.to_lowercase().contains("permission denied"), "{e}");
        let e = env.err("glob", json!({"pattern": "*.txt", "path": "locked"})).await;
        assert!(e.to_lowercase().contains("permission denied"), "{e}");

        // glob lists the unreadable file (it exists) and names the folder it could not list.
        let out = env.call("glob", json!({"pattern": "**/*.txt"})).await;
        let t = out.text_content();
        assert!(t.contains("ok/a.txt") && t.contains("ok/unread.txt"), "{t}");
        assert!(t.ends_with("[Not listed, could not be read: `locked` (permission denied).]"), "{t}");
        assert_eq!(out.meta["unreadable"], 1);

        chmod(&env.root().join("locked"), 0o755);
    });
}

#[test]
fn g16_an_unreadable_kodikignore_hides_its_folder_and_says_why() {
    obeying_modes(|| async {
        let env = Env::new();
        env.write("open.txt", "needle open\n");
        env.write("sub/.kodikignore", "secret.txt\n");
        env.write("sub/secret.txt", "needle SECRET\n");
        env.write("sub/deep/more.txt", "needle SECRET deeper\n");
        env.write("other/deep/ok.txt", "needle open\n");
        chmod(&env.root().join("sub/.kodikignore"), 0o000);

        // The folder it governs is not searched, and the answer says why.
        let out = env.call("grep", json!({"pattern": "needle"})).await;
        let t = out.text_content();
        assert!(!t.contains("SECRET"), "{t}");
        assert!(
            t.starts_with(
                "Found 2 matching lines in 2 files\nopen.txt:1:needle open\nother/deep/ok.txt:1:needle open\n"
            ),
            "{t}"
        );
        assert!(t.contains("`sub` (its .kodikignore cannot be read: permission denied)"), "{t}");
        let t = env.ok("glob", json!({"pattern": "**/*.txt"})).await;
        assert!(t.starts_with("open.txt\n") || t.starts_with("other/deep/ok.txt\n"), "{t}");
        assert!(!t.contains("sub/"), "{t}");
        assert!(t.contains("`sub` (its .kodikignore cannot be read"), "{t}");

        // Reading or searching inside it names the unreadable file instead of showing the secret.
        for (tool, args) in [
            ("read_file", json!({"path": "sub/secret.txt"})),
            ("grep", json!({"pattern": "needle", "path": "sub/secret.txt"})),
            ("grep", json!({"pattern": "needle", "path": "sub"})),
        ] {
            let e = env.err(tool, args).await;
            assert!(e.contains("`sub/.kodikignore`") && e.contains("cannot be read"), "{tool}: {e}");
            assert!(!e.contains("SECRET"), "{e}");
        }

        // Made readable again, its rules apply as usual.
        chmod(&env.root().join("sub/.kodikignore"), 0o644);
        let t = env.ok("grep", json!({"pattern": "needle", "output_mode": "files_with_matches"})).await;
        assert_eq!(t, "Found 3 files\nopen.txt\nother/deep/ok.txt\nsub/deep/more.txt");
        assert!(env.ok("read_file", json!({"path": "sub/.kodikignore"})).await.contains("secret.txt"));
    });
}

/// The folder of an unreadable `.kodikignore` is not searched at all and is always named, so
/// the answer is the same whatever its files hold. Before, its files were searched and the note
/// appeared only when one matched: a yes/no oracle for the hidden content and names.
#[test]
fn g16_gr1_gl1_an_unreadable_kodikignore_folder_is_named_whatever_is_searched_for() {
    obeying_modes(|| async {
        let env = Env::new();
        env.write("sub/.kodikignore", "secret.txt\n");
        env.write("sub/secret.txt", "password=hunter2\n");
        env.write("sub/deep/x.txt", "password=deeper\n");
        env.write("other/o.txt", "needle other\n");
        chmod(&env.root().join("sub/.kodikignore"), 0o000);
        let note = "[Not searched, could not be read: `sub` (its .kodikignore cannot be read: permission denied).]";
        let mut answers = Vec::new();
        for p in ["password=hunter2", "password=hunter3", "password=h", "password=x"] {
            let out = env.call("grep", json!({"pattern": p})).await;
            let t = out.text_content();
            assert!(out.is_success() && t.starts_with("No matches") && t.ends_with(note), "{p}: {t}");
            assert_eq!(out.meta["searched_files"], 1, "{p}: only other/o.txt is read");
            answers.push(t.replace(p, "P"));
        }
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
        let listed = note.replace("Not searched", "Not listed");
        for p in ["**/secret.txt", "**/nothere.txt", "**/x.txt"] {
            let t = env.ok("glob", json!({"pattern": p})).await;
            assert!(t.starts_with("No files match") && t.ends_with(&listed), "{p}: {t}");
        }
        chmod(&env.root().join("sub/.kodikignore"), 0o644);
    });
}

/// A folder that can be listed but not entered (mode 444) is named as such, never blamed on a
/// `.kodikignore` it does not have; grep and glob agree. Before, the answer said its (absent)
/// `.kodikignore` could not be read and "the user must make it readable".
#[test]
fn g16_gr1_gl1_a_folder_that_cannot_be_entered_is_not_blamed_on_a_kodikignore() {
    obeying_modes(|| async {
        let env = Env::new();
        env.write("rd/a.txt", "needle r\n");
        env.write("ok.txt", "needle ok\n");
        chmod(&env.root().join("rd"), 0o444);
        for tool in ["grep", "glob"] {
            let args = if tool == "grep" {
                json!({"pattern": "needle", "path": "rd"})
            } else {
                json!({"pattern": "*", "path": "rd"})
            };
            let e = env.err(tool, args).await;
            assert!(!e.contains(".kodikignore") && e.contains("folder rd"), "{tool}: {e}");
            assert!(e.to_lowercase().contains("permission denied"), "{tool}: {e}");
        }
        let t = env.ok("grep", json!({"pattern": "needle"})).await;
        assert!(t.ends_with("[Not searched, could not be read: `rd` (permission denied).]"), "{t}");
        let t = env.ok("glob", json!({"pattern": "**/*.txt"})).await;
        assert_eq!(t, "ok.txt\n[Not listed, could not be read: `rd` (permission denied).]");
        chmod(&env.root().join("rd"), 0o755);
    });
}

/// Of many unreadable files, the note names the first five in path order, the same every run.
/// Before, it named the first five the walker threads met (`f123, f164, f296, f38, f77`).
#[test]
fn gr1_the_unreadable_note_names_the_first_paths_in_path_order() {
    obeying_modes(|| async {
        let env = Env::new();
        for i in 0..60 {
            let f = format!("d{}/f{i:02}.txt", i % 7);
            env.write(&f, "needle\n");
            chmod(&env.root().join(&f), 0o000);
        }
        let t = env.ok("grep", json!({"pattern": "needle"})).await;
        let first: Vec<String> = {
            let mut all: Vec<String> = (0..60).map(|i| format!("d{}/f{i:02}.txt", i % 7)).collect();
            all.sort();
            all.into_iter().take(5).map(|f| format!("`{f}` (permission denied)")).collect()
        };
        let expected = format!("[Not searched, could not be read: {} and 55 more.]", first.join(", "));
        assert!(t.ends_with(&expected), "{t}\nwanted: {expected}");
    });
}
