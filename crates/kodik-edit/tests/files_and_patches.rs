//! SPEC C1, D1, P1–P5, E13, G2, G16 through the real tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, tree};
use kodik_core::{ApprovalPolicy, ToolStatus};
use kodik_edit::{EditToolset, FileOps};
use std::sync::Arc;

#[tokio::test]
async fn c1_creates_file_and_missing_parents_and_empty_content() {
    let env = Env::new();
    let out = env.call("create_file", serde_json::json!({"path": "a/b/c.txt", "content": "x\n\ty\n"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!(env.text("a/b/c.txt"), "x\n\ty\n");
    assert!(env.call("create_file", serde_json::json!({"path": "empty.txt", "content": ""})).await.is_success());
    assert_eq!(env.bytes("empty.txt"), b"");
}

#[tokio::test]
async fn c1_refuses_to_overwrite_an_existing_path() {
    let env = Env::new();
    env.write("a.txt", "keep");
    let out = env.call("create_file", serde_json::json!({"path": "a.txt", "content": "new"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("already exists"), "{}", out.text_content());
    assert_eq!(env.text("a.txt"), "keep");
    std::fs::create_dir(env.path("d")).unwrap();
    let out = env.call("create_file", serde_json::json!({"path": "d", "content": "x"})).await;
    assert!(out.text_content().contains("is a folder"));
}

#[tokio::test]
async fn c1_created_file_can_be_edited_without_a_read() {
    let env = Env::new();
    env.call("create_file", serde_json::json!({"path": "n.txt", "content": "one\n"})).await;
    assert!(env.edit("n.txt", &[("one", "two")]).await.is_success());
}

#[tokio::test]
async fn d1_deletes_one_file_and_refuses_folders_and_missing_paths() {
    let env = Env::new();
    env.write("dir/a.txt", "a");
    let out = env.call("delete_file", serde_json::json!({"path": "dir/a.txt"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(!env.path("dir/a.txt").exists());
    assert!(env.path("dir").is_dir(), "only the file goes");
    let out = env.call("delete_file", serde_json::json!({"path": "dir"})).await;
    assert!(out.text_content().contains("is a folder"), "{}", out.text_content());
    let out = env.call("delete_file", serde_json::json!({"path": "dir/a.txt"})).await;
    assert!(out.text_content().contains("does not exist"), "{}", out.text_content());
}

#[tokio::test]
async fn g16_create_delete_and_patch_refuse_ignored_paths_and_escapes() {
    let env = Env::new();
    env.write(".kodikignore", "*.secret\n");
    env.write("a.secret", "s");
    let out = env.call("create_file", serde_json::json!({"path": "new.secret", "content": "x"})).await;
    assert!(out.text_content().contains(".kodikignore"));
    assert!(!env.path("new.secret").exists());
    let out = env.call("delete_file", serde_json::json!({"path": "a.secret"})).await;
    assert!(out.text_content().contains(".kodikignore"));
    assert!(env.path("a.secret").exists());
    let before = tree(&env.root());
    let out = env.patch("*** Begin Patch\n*** Add File: ok.txt\n+x\n*** Delete File: a.secret\n*** End Patch\n").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains(".kodikignore"), "{}", out.text_content());
    let out = env.patch("*** Begin Patch\n*** Add File: ../outside.txt\n+x\n*** End Patch\n").await;
    assert!(out.text_content().contains("outside the workspace"), "{}", out.text_content());
    assert_eq!(tree(&env.root()), before);
}

#[tokio::test]
async fn p1_one_patch_adds_updates_deletes_and_moves_with_a_m_d_r_report() {
    let env = Env::new();
    env.write("mod.txt", "a\nb\nc\nd\ne\nf\ng\n");
    env.write("gone.txt", "bye\n");
    env.write("old/name.txt", "from\n");
    let out = env
        .patch(
            "*** Begin Patch\n*** Add File: new/file.txt\n+hello\n*** Update File: mod.txt\n@@\n a\n-b\n+B\n@@\n e\n-f\n+F\n\
             *** Delete File: gone.txt\n*** Update File: old/name.txt\n*** Move to: renamed/name.txt\n@@\n-from\n+to\n\
             *** End Patch",
        )
        .await;
    let text = out.text_content();
    assert!(out.is_success(), "{text}");
    assert!(text.contains("A new/file.txt\nM mod.txt\nD gone.txt\nR old/name.txt -> renamed/name.txt"), "{text}");
    assert!(text.contains("-b\n+B") && text.contains("-f\n+F"), "{text}");
    assert_eq!(env.text("new/file.txt"), "hello\n");
    assert_eq!(env.text("mod.txt"), "a\nB\nc\nd\ne\nF\ng\n");
    assert!(!env.path("gone.txt").exists() && !env.path("old/name.txt").exists());
    assert_eq!(env.text("renamed/name.txt"), "to\n");
}

#[tokio::test]
async fn p1a_any_failing_hunk_changes_no_file() {
    let env = Env::new();
    env.write("one.txt", "1\n2\n3\n");
    env.write("two.txt", "x\ny\n");
    let before = tree(&env.root());
    let out = env
        .patch(
            "*** Begin Patch\n*** Update File: one.txt\n@@\n-2\n+two\n*** Add File: three.txt\n+3\n\
             *** Delete File: two.txt\n*** Update File: one.txt\n@@\n-not there\n+z\n*** End Patch\n",
        )
        .await;
    assert_eq!(out.status, ToolStatus::Error);
    let msg = out.text_content();
    assert!(msg.contains("no file was changed") && msg.contains("patch line 9"), "{msg}");
    assert_eq!(tree(&env.root()), before);
}

#[tokio::test]
async fn p1_hunk_context_must_match_exactly_one_place() {
    let env = Env::new();
    env.write("a.txt", "x\ny\nx\ny\n");
    let out = env.patch("*** Begin Patch\n*** Update File: a.txt\n@@\n x\n-y\n+z\n*** End Patch\n").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("2 places"), "{}", out.text_content());
    assert_eq!(env.text("a.txt"), "x\ny\nx\ny\n");
}

#[tokio::test]
async fn p1_line_endings_and_encoding_survive_a_patch() {
    let env = Env::new();
    let (cp, _, _) = encoding_rs::WINDOWS_1251.encode("заголовок файла с текстом\r\nстрока два\r\nконец\r\n");
    env.write("ru.txt", &cp);
    let out = env
        .patch("*** Begin Patch\n*** Update File: ru.txt\n@@\n заголовок файла с текстом\n-строка два\n+строка 2\n+ещё\n*** End Patch\n")
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    let (want, _, _) = encoding_rs::WINDOWS_1251.encode("заголовок файла с текстом\r\nстрока 2\r\nещё\r\nконец\r\n");
    assert_eq!(env.bytes("ru.txt"), want.to_vec());
}

#[tokio::test]
async fn p1_malformed_patch_error_names_the_patch_line() {
    let env = Env::new();
    let out = env.patch("*** Begin Patch\n*** Update File: a.txt\n@@\n ctx\n?? what\n*** End Patch\n").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("line 5"), "{}", out.text_content());
}

#[tokio::test]
async fn p5_json_form_takes_input_only() {
    let env = Env::new();
    let out = env.call("apply_patch", serde_json::json!({"patch": "*** Begin Patch\n*** End Patch"})).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.meta["error_kind"], "invalid_input");
}

#[tokio::test]
async fn g2_patch_resources_cover_every_file_and_move_targets() {
    let env = Env::new();
    let tool = env.registry.get("apply_patch").unwrap();
    let args = serde_json::json!({"input": "*** Begin Patch\n*** Update File: ./a.txt\n*** Move to: b/c.txt\n@@\n-x\n+y\n\
        *** Add File: d.txt\n+z\n*** End Patch"});
    let res = tool.resources(&args, &env.cx.workspace);
    let ws = &env.cx.workspace;
    assert_eq!(res, vec![ws.resource("a.txt"), ws.resource("b/c.txt"), ws.resource("d.txt")]);
}

#[tokio::test]
async fn p2_shell_heredoc_goes_through_the_same_engine_with_cd_and_checkpoints() {
    let env = Env::new();
    env.write("sub/f.txt", "old\n");
    let interceptor = env.tools.interceptor();
    let cmd =
        "cd sub && apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n@@\n-old\n+new\n*** End Patch\nEOF\n";
    let out = interceptor.intercept(cmd, &env.root(), &env.cx).await.expect("intercepted");
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("M sub/f.txt"), "{}", out.text_content());
    assert_eq!(env.text("sub/f.txt"), "new\n");
    assert!(interceptor.intercept("echo hi", &env.root(), &env.cx).await.is_none());
    env.tools.checkpoints().undo_turn();
    assert_eq!(env.text("sub/f.txt"), "old\n");
}

#[tokio::test]
async fn p2_g3_heredoc_patch_needs_the_same_approval() {
    let mut env = Env::new();
    env.cx.approver = Arc::new(ApprovalPolicy::ask(None).tool("shell", true));
    let cmd = "apply_patch <<EOF\n*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\nEOF";
    let out = env.tools.interceptor().intercept(cmd, &env.root(), &env.cx).await.unwrap();
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
    assert!(!env.path("x.txt").exists());
}

#[tokio::test]
async fn p3_e13_undo_restores_both_ends_of_a_move_created_and_deleted_files() {
    let env = Env::new();
    env.write("src/a.txt", "A\n");
    env.write("src/b.txt", "B\n");
    env.write("keep.txt", "K\n");
    let before = tree(&env.root());
    let out = env
        .patch(
            "*** Begin Patch\n*** Update File: src/a.txt\n*** Move to: moved/deep/a.txt\n@@\n-A\n+A2\n\
             *** Delete File: src/b.txt\n*** Add File: new.txt\n+N\n*** Add File: keep.txt\n+replaced\n*** End Patch\n",
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_ne!(tree(&env.root()), before);
    let report = env.tools.checkpoints().undo_turn();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(tree(&env.root()), before, "every file and folder back as it was");
}

#[tokio::test]
async fn e13_undo_turn_undoes_only_the_last_turn_and_undo_all_everything() {
    let env = Env::new();
    env.write("a.txt", "v0\n");
    env.read("a.txt");
    assert!(env.edit("a.txt", &[("v0", "v1")]).await.is_success());
    env.cx.session.next_message();
    assert!(env.edit("a.txt", &[("v1", "v2")]).await.is_success());
    env.call("create_file", serde_json::json!({"path": "made.txt", "content": "m"})).await;
    env.call("delete_file", serde_json::json!({"path": "a.txt"})).await;
    assert!(!env.path("a.txt").exists());
    let cp = env.tools.checkpoints();
    assert_eq!(cp.turns(), vec![0, 1]);
    cp.undo_turn();
    assert_eq!(env.text("a.txt"), "v1\n");
    assert!(!env.path("made.txt").exists());
    env.read("a.txt");
    assert!(env.edit("a.txt", &[("v1", "v3")]).await.is_success());
    cp.undo_all();
    assert_eq!(env.text("a.txt"), "v0\n");
    assert!(cp.is_empty());
}

#[tokio::test]
async fn p4_move_needs_create_change_and_delete_allowed() {
    let tools = EditToolset::with_file_ops(FileOps { create: true, change: true, delete: false });
    let env = Env::with_tools(tools);
    env.write("a.txt", "x\n");
    let before = tree(&env.root());
    let out = env.patch("*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("deleting files is switched off"), "{}", out.text_content());
    assert_eq!(tree(&env.root()), before);
    // A plain update is fine.
    let out = env.patch("*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch").await;
    assert!(out.is_success(), "{}", out.text_content());
    let out = env.call("delete_file", serde_json::json!({"path": "a.txt"})).await;
    assert_eq!(out.status, ToolStatus::Denied);
}

#[tokio::test]
async fn e1_d1_n1_missing_path_names_the_closest_existing_files_of_its_folder() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    env.write("nb/analysis.ipynb", "{}");
    let out = env.edit("a.tx", &[("a", "b")]).await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(
        out.text_content().contains("`a.tx` does not exist; did you mean: a.txt?; to make a new file use create_file"),
        "{}",
        out.text_content()
    );
    let out = env.call("delete_file", serde_json::json!({"path": "a.tx"})).await;
    assert!(out.text_content().contains("`a.tx` does not exist; did you mean: a.txt?"), "{}", out.text_content());
    assert!(env.path("a.txt").exists());
    let out = env
        .call(
            "edit_notebook",
            serde_json::json!({"target_notebook": "nb/analysis.ipnb", "operation": "delete", "cell_index": 0}),
        )
        .await;
    assert!(out.text_content().contains("did you mean: nb/analysis.ipynb?"), "{}", out.text_content());
    let out = env.call("delete_file", serde_json::json!({"path": "zzzzzz.md"})).await;
    assert!(!out.text_content().contains("did you mean"), "{}", out.text_content());
}

/// Deleting a name that is a symlink removes the link, as `rm` does; the file it points to and
/// its data stay (D1, P1). Undo brings the link back as a link (E13, P3).
#[tokio::test]
async fn d1_p1_e13_deleting_a_symlink_removes_the_link_and_keeps_its_target() {
    let env = Env::new();
    env.write("real.txt", "important data\n");
    env.write("r2.txt", "keep me\n");
    env.write("r3.txt", "moved link\n");
    for (link, target) in [("alias.txt", "real.txt"), ("a2.txt", "r2.txt"), ("a3.txt", "r3.txt")] {
        std::os::unix::fs::symlink(target, env.path(link)).unwrap();
    }
    env.read("a3.txt");
    let is_link = |rel: &str| std::fs::symlink_metadata(env.path(rel)).is_ok_and(|m| m.is_symlink());

    let out = env.call("delete_file", serde_json::json!({"path": "alias.txt"})).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("symlink `alias.txt`"), "{}", out.text_content());
    assert!(!is_link("alias.txt") && !env.path("alias.txt").exists(), "the link is gone");
    assert_eq!(env.text("real.txt"), "important data\n", "its target is untouched");

    let out = env
        .patch(
            "*** Begin Patch\n*** Delete File: a2.txt\n*** Update File: a3.txt\n*** Move to: m3.txt\n@@\n-moved link\n\
             +moved\n*** End Patch",
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("D a2.txt"), "{}", out.text_content());
    // The move is named as the link's: its target was not moved.
    assert!(out.text_content().contains("R a3.txt -> m3.txt"), "{}", out.text_content());
    assert!(!out.text_content().contains("r3.txt"), "{}", out.text_content());
    assert!(!is_link("a2.txt") && !is_link("a3.txt"));
    assert_eq!(env.text("r2.txt"), "keep me\n");
    assert_eq!(env.text("r3.txt"), "moved link\n", "a moved link leaves its target as it was");
    assert_eq!(env.text("m3.txt"), "moved\n");

    let report = env.tools.checkpoints().undo_all();
    assert!(report.is_complete(), "{report:?}");
    for (link, target) in [("alias.txt", "real.txt"), ("a2.txt", "r2.txt"), ("a3.txt", "r3.txt")] {
        assert_eq!(std::fs::read_link(env.path(link)).unwrap(), std::path::Path::new(target), "{link}");
    }
    assert!(!env.path("m3.txt").exists());
}

/// `*** Move to:` gives the destination the source's mode, as `mv` does: a script stays
/// executable, a private file stays private (E12, P1).
#[tokio::test]
async fn p1_e12_a_moved_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    for (name, mode) in [("t.sh", 0o755), ("u.sh", 0o600)] {
        env.write(name, "#!/bin/sh\necho x\n");
        std::fs::set_permissions(env.path(name), std::fs::Permissions::from_mode(mode)).unwrap();
        env.read(name);
    }
    let out = env
        .patch(
            "*** Begin Patch\n*** Update File: t.sh\n*** Move to: bin/t2.sh\n@@\n-echo x\n+echo y\n\
             *** Update File: u.sh\n*** Move to: u2.sh\n@@\n-echo x\n+echo z\n*** End Patch",
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    let mode = |rel: &str| std::fs::metadata(env.path(rel)).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode("bin/t2.sh"), mode("u2.sh")), (0o755, 0o600));
    assert_eq!(env.text("u2.sh"), "#!/bin/sh\necho z\n");
    // Moved onto an existing 0644 file, a 0600 file stays 0600, as with `mv`.
    env.write("secret.env", "KEY=1\n");
    std::fs::set_permissions(env.path("secret.env"), std::fs::Permissions::from_mode(0o600)).unwrap();
    env.read("secret.env");
    env.write("public.env", "old\n");
    std::fs::set_permissions(env.path("public.env"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = env
        .patch(
            "*** Begin Patch\n*** Update File: secret.env\n*** Move to: public.env\n@@\n-KEY=1\n+KEY=2\n*** End Patch",
        )
        .await;
    assert!(out.is_success(), "{}", out.text_content());
    assert_eq!((mode("public.env"), env.text("public.env").as_str()), (0o600, "KEY=2\n"));
}

/// Every tool's write keeps the replaced file's owner (root editing a user's checkout), and a
/// result says when other hard links of the file keep the old content (E12).
#[tokio::test]
async fn e12_writes_keep_the_owner_and_say_when_hard_links_keep_the_old_content() {
    use std::os::unix::fs::MetadataExt as _;
    let env = Env::new();
    env.write("h.txt", "h\n");
    std::fs::hard_link(env.path("h.txt"), env.path("h2.txt")).unwrap();
    env.read("h.txt");
    let out = env.edit("h.txt", &[("h", "H")]).await;
    assert!(out.is_success(), "{}", out.text_content());
    assert!(out.text_content().contains("`h.txt` had another name (a hard link)"), "{}", out.text_content());
    assert_eq!((env.text("h.txt"), env.text("h2.txt")), ("H\n".to_string(), "h\n".to_string()));
    // The split name has no links left: the next write says nothing.
    let out = env.edit("h.txt", &[("H", "I")]).await;
    assert!(!out.text_content().contains("hard link"), "{}", out.text_content());
    std::fs::hard_link(env.path("h2.txt"), env.path("h3.txt")).unwrap();
    env.read("h2.txt");
    let out = env.patch("*** Begin Patch\n*** Update File: h2.txt\n@@\n-h\n+j\n*** End Patch").await;
    assert!(out.text_content().contains("`h2.txt` had another name"), "{}", out.text_content());

    env.write("f.txt", "a\n");
    if std::os::unix::fs::chown(env.path("f.txt"), Some(65534), Some(65534)).is_err() {
        // Only root can give a file away; elsewhere there is no foreign owner to keep.
        assert!(std::env::var_os("CI").is_none(), "CI must run this test as root (chown to nobody failed)");
        return;
    }
    env.read("f.txt");
    assert!(env.edit("f.txt", &[("a", "b")]).await.is_success());
    env.read("f.txt");
    let out = env.patch("*** Begin Patch\n*** Update File: f.txt\n@@\n-b\n+c\n*** End Patch").await;
    assert!(out.is_success(), "{}", out.text_content());
    let m = std::fs::metadata(env.path("f.txt")).unwrap();
    assert_eq!((m.uid(), m.gid(), env.text("f.txt")), (65534, 65534, "c\n".to_string()));
}
