//! Property tests (E4, P1 a): a failed edit or patch never changes a byte on disk; the parser
//! and the matcher never panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, tree};
use proptest::prelude::*;

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("fn main() {".to_string()),
        Just("    let x = 1;".to_string()),
        Just("\tlet y = “quoted” — dash;".to_string()),
        Just("}".to_string()),
        Just(String::new()),
        "[a-c ]{0,6}",
        "[xyz\u{00A0}’]{1,4}",
    ]
}

fn content() -> impl Strategy<Value = String> {
    prop::collection::vec((line(), prop_oneof![Just("\n"), Just("\r\n")]), 0..12)
        .prop_map(|ls| ls.into_iter().map(|(l, e)| format!("{l}{e}")).collect())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn e4_failed_edit_never_changes_a_byte(
        text in content(),
        edits in prop::collection::vec((line(), line(), any::<bool>()), 1..4),
        cut in 0usize..40,
    ) {
        let env = Env::new();
        env.write("f.txt", &text);
        env.read("f.txt");
        // Mix old_strings taken from the file with made-up ones.
        let edits: Vec<(String, String)> = edits
            .into_iter()
            .map(|(o, n, from_file)| {
                if from_file && !text.is_empty() {
                    let start = text.char_indices().map(|(i, _)| i).nth(cut % text.chars().count()).unwrap_or(0);
                    let slice: String = text[start..].chars().take(8).collect();
                    (slice, n)
                } else {
                    (o, n)
                }
            })
            .collect();
        let refs: Vec<(&str, &str)> = edits.iter().map(|(o, n)| (o.as_str(), n.as_str())).collect();
        let out = runtime().block_on(env.edit("f.txt", &refs));
        if !out.is_success() {
            prop_assert_eq!(env.bytes("f.txt"), text.as_bytes().to_vec(), "{}", out.text_content());
            prop_assert!(env.tools.checkpoints().is_empty());
        }
    }

    #[test]
    fn p1a_failed_patch_never_changes_a_byte(
        a in content(),
        b in content(),
        hunk in prop::collection::vec((prop_oneof![Just(' '), Just('-'), Just('+')], line()), 1..6),
        add_first in any::<bool>(),
        delete_b in any::<bool>(),
    ) {
        let env = Env::new();
        env.write("a.txt", &a);
        env.write("b.txt", &b);
        let before = tree(&env.root());
        let mut patch = String::from("*** Begin Patch\n");
        if add_first {
            patch.push_str("*** Add File: new/c.txt\n+c\n");
        }
        if delete_b {
            patch.push_str("*** Delete File: b.txt\n");
        }
        patch.push_str("*** Update File: a.txt\n@@\n");
        for (k, l) in &hunk {
            patch.push(*k);
            patch.push_str(l);
            patch.push('\n');
        }
        patch.push_str("*** End Patch\n");
        let out = runtime().block_on(env.patch(&patch));
        if !out.is_success() {
            prop_assert_eq!(tree(&env.root()), before, "{}", out.text_content());
        }
    }

    #[test]
    fn p1_parser_never_panics(s in "(\\*\\*\\* (Begin Patch|End Patch|Add File: a|Update File: a|Delete File: a|Move to: b|End of File)\n|@@ ?[a-z]*\n|[ +-][a-z]*\n|[a-z ]*\n){0,12}") {
        let _ = kodik_edit::apply_patch::parse_patch(&s);
        if let Ok(p) = kodik_edit::apply_patch::parse_patch(&s) {
            for op in &p.ops {
                if let kodik_edit::apply_patch::PatchOp::Update { hunks, .. } = op {
                    let _ = kodik_edit::apply_patch::apply_hunks("a\nb\nc\n", hunks);
                }
            }
        }
    }

    #[test]
    fn e1_matcher_replacements_land_on_char_boundaries(text in content(), old in line(), new in line()) {
        let mut budget = kodik_edit::matcher::Budget::default();
        if let Ok(r) = kodik_edit::matcher::replace_unique(&text, &old, &new, &mut budget) {
            prop_assert!(r.start <= r.end && r.end <= text.len());
            prop_assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A patch made from a real diff either applies and gives exactly the new text, or is
    /// refused as ambiguous/not found — never a wrong result.
    #[test]
    fn p1_patch_from_a_diff_rebuilds_the_new_text(
        old in prop::collection::vec("[a-h]{2,4}", 1..25),
        changes in prop::collection::vec((0usize..30, prop::option::of("[a-h]{2,4}")), 1..5),
    ) {
        let mut new = old.clone();
        for (at, rep) in changes {
            let i = at % (new.len() + 1);
            match rep {
                Some(r) if i < new.len() => new[i] = r,
                Some(r) => new.push(r),
                None if i < new.len() && new.len() > 1 => { new.remove(i); }
                None => {}
            }
        }
        let old_text: String = old.iter().map(|l| format!("{l}\n")).collect();
        let new_text: String = new.iter().map(|l| format!("{l}\n")).collect();
        let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old, &new);
        let mut patch = String::from("*** Begin Patch\n*** Update File: f\n");
        let groups = similar::group_diff_ops(ops, 3);
        prop_assume!(!groups.is_empty());
        for g in groups {
            patch.push_str("@@\n");
            for op in g {
                for ch in op.iter_changes(&old, &new) {
                    let mark = match ch.tag() {
                        similar::ChangeTag::Equal => ' ',
                        similar::ChangeTag::Delete => '-',
                        similar::ChangeTag::Insert => '+',
                    };
                    patch.push(mark);
                    patch.push_str(&ch.value());
                    patch.push('\n');
                }
            }
        }
        patch.push_str("*** End Patch\n");
        let parsed = kodik_edit::apply_patch::parse_patch(&patch).unwrap();
        let kodik_edit::apply_patch::PatchOp::Update { hunks, .. } = &parsed.ops[0] else { panic!() };
        match kodik_edit::apply_patch::apply_hunks(&old_text, hunks) {
            Ok((out, _)) => prop_assert_eq!(out, new_text, "{}", patch),
            // Refusals are fine only for the reason the engine gives on purpose.
            Err(e) => prop_assert!(e.message.contains("places") || e.message.contains("several"), "{e}\n{patch}"),
        }
    }
}
