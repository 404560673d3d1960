//! Runs the example as a user would and checks what it printed and changed.

use std::process::Command;

/// G5, E1, E2: the read, the edit and the grep of one turn all succeed in call order and the
/// edit lands on disk. (Which tools the list shows depends on the build: `cargo test
/// --workspace` unifies this package's features with the other members', so only a build of
/// this package alone leaves the shell and code mode out.)
#[test]
fn minimal_harness_reads_edits_and_searches_in_one_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_minimal_harness")).arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    let tools = stdout.lines().next().unwrap();
    assert!(tools.contains("edit_file") && tools.contains("grep"), "{tools}");
    let notes = std::fs::read_to_string(dir.path().join("notes.txt")).unwrap();
    assert_eq!(notes, "done: write the docs\ndone: ship it\n");
    assert!(stdout.contains("--- grep [success]\n"), "{stdout}");
    assert!(stdout.contains("all calls succeeded"), "{stdout}");
}
