//! Fuzzes the edit_file matching cascade: the input is `text \xFF old \xFF new [\xFF old \xFF new …]`.
//! A match must be a char-boundary range of the text, an exact match must really be the old
//! string, and the budget keeps every run short. With several pairs, `apply_edits` (which takes
//! a shortcut for leading exact edits) must give exactly what applying the edits one by one
//! through the cascade gives (E3, E4): the text, stages, lines and the error.
#![no_main]

use kodik_edit::diff::track;
use kodik_edit::edit_file::{AppliedEdit, EditFailure, apply_edits_tracked};
use kodik_edit::matcher::{Budget, Stage, count_newlines, replace_unique};
use kodik_schema::edit::Edit;
use libfuzzer_sys::fuzz_target;

type Outcome = Result<(String, Vec<AppliedEdit>, Vec<kodik_edit::diff::Span>), EditFailure>;

fn one_by_one(text: &str, edits: &[Edit]) -> Outcome {
    let (mut current, mut applied, mut spans) = (text.to_string(), Vec::new(), Vec::new());
    for (i, e) in edits.iter().enumerate() {
        let r = replace_unique(&current, &e.old_string, &e.new_string, &mut Budget::default())
            .map_err(|source| EditFailure { position: i + 1, total: edits.len(), source })?;
        let line = 1 + count_newlines(&current.as_bytes()[..r.start]);
        track(&mut spans, r.start, r.end, r.text.len());
        current.replace_range(r.start..r.end, &r.text);
        applied.push(AppliedEdit { stage: r.stage, line, similarity: r.similarity });
    }
    Ok((current, applied, spans))
}

fuzz_target!(|data: &[u8]| {
    let Ok(parts) = data.split(|b| *b == 0xFF).map(std::str::from_utf8).collect::<Result<Vec<&str>, _>>() else {
        return;
    };
    let [text, old, new, rest @ ..] = parts.as_slice() else { return };
    let mut budget = Budget::new(200_000);
    if let Ok(r) = replace_unique(text, old, new, &mut budget) {
        assert!(r.start <= r.end && r.end <= text.len());
        assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
        if r.stage == Stage::Exact {
            assert_eq!(&text[r.start..r.end], *old);
        }
        let mut out = text.to_string();
        out.replace_range(r.start..r.end, &r.text);
    }
    if rest.len() >= 2 && text.len() <= 4096 {
        let mut edits = vec![Edit { old_string: old.to_string(), new_string: new.to_string() }];
        edits.extend(rest.chunks_exact(2).map(|p| Edit { old_string: p[0].to_string(), new_string: p[1].to_string() }));
        assert_eq!(apply_edits_tracked(text, &edits), one_by_one(text, &edits));
    }
});
