//! New files get 0666 minus the process umask, whichever tool creates them (C1, P1, E12).
//!
//! The umask is process-wide, so this binary holds exactly one test, which sets it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;

use common::Env;
use rustix::fs::Mode;

fn mode(env: &Env, rel: &str) -> u32 {
    std::fs::metadata(env.path(rel)).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn c1_p1_e12_new_files_get_0666_minus_umask_and_existing_files_keep_their_mode() {
    let before = rustix::process::umask(Mode::from_raw_mode(0o022));
    for umask in [0o022_u32, 0o077, 0o002] {
        rustix::process::umask(Mode::from_raw_mode(umask));
        let want = 0o666 & !umask;
        let env = Env::new();
        let created = |rel: &str| (rel.to_string(), mode(&env, rel));

        let out = env.call("create_file", serde_json::json!({"path": "a.txt", "content": "a\n"})).await;
        assert!(out.is_success(), "{}", out.text_content());
        let out = env.call("create_file", serde_json::json!({"path": "new/dir/b.txt", "content": "b\n"})).await;
        assert!(out.is_success(), "{}", out.text_content());
        env.write("moved_from.txt", "m\n");
        env.read("moved_from.txt");
        let out = env
            .patch(
                "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Add File: deep/er/d.txt\n+d\n\
                 *** Update File: moved_from.txt\n*** Move to: fresh/moved_to.txt\n@@\n-m\n+M\n*** End Patch",
            )
            .await;
        assert!(out.is_success(), "{}", out.text_content());
        for rel in ["a.txt", "new/dir/b.txt", "c.txt", "deep/er/d.txt", "fresh/moved_to.txt"] {
            assert_eq!(created(rel), (rel.to_string(), want), "umask {umask:03o}");
        }
        // Folders the tools create follow the umask too.
        let dir_mode = std::fs::metadata(env.path("new/dir")).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o777 & !umask, "umask {umask:03o}");

        // An existing file keeps its own mode through an edit and a patch, whatever the umask.
        env.write("run.sh", "echo 1\n");
        std::fs::set_permissions(env.path("run.sh"), std::fs::Permissions::from_mode(0o775)).unwrap();
        env.read("run.sh");
        assert!(env.edit("run.sh", &[("echo 1", "echo 2")]).await.is_success());
        env.read("run.sh");
        let out = env.patch("*** Begin Patch\n*** Update File: run.sh\n@@\n-echo 2\n+echo 3\n*** End Patch").await;
        assert!(out.is_success(), "{}", out.text_content());
        assert_eq!(env.text("run.sh"), "echo 3\n");
        assert_eq!(mode(&env, "run.sh"), 0o775, "umask {umask:03o}");
    }
    rustix::process::umask(before);
}
