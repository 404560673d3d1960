//! Fuzzes the Codex patch parser and the hunk engine: no panic, errors point at a real patch
//! line, and every parsed update either applies or fails cleanly on a fixed file.
#![no_main]

use kodik_edit::apply_patch::{HunkLine, PatchOp, apply_hunks, parse_patch};
use libfuzzer_sys::fuzz_target;

const FILE: &str = "fn main() {\n    let x = 1;\n\tlet y = “two”;\n}\r\nlast line";

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    match parse_patch(input) {
        Err(e) => assert!(e.line >= 1 && e.line <= input.split('\n').count() + 1, "{e}"),
        Ok(patch) => {
            assert!(!patch.ops.is_empty());
            for op in &patch.ops {
                if let PatchOp::Update { hunks, .. } = op {
                    if let Ok((out, stages)) = apply_hunks(FILE, hunks) {
                        assert_eq!(stages.len(), hunks.len());
                        // The file had no final newline and must not gain one — unless its new
                        // last line is an empty one the patch added: "x\n" is how that line
                        // is written (regression test p1_e12_blank_line_appended_to_file_...).
                        let adds_blank = hunks
                            .iter()
                            .flat_map(|h| &h.lines)
                            .any(|l| matches!(l, HunkLine::Add(s) if s.trim().is_empty()));
                        assert!(!out.ends_with('\n') || adds_blank, "{out:?}");
                    }
                }
            }
        }
    }
});
