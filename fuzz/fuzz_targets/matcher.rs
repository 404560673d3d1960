//! Fuzzes the edit_file matching cascade: the input is `text \xFF old \xFF new`. A match must
//! be a char-boundary range of the text, an exact match must really be the old string, and
//! the budget keeps every run short.
#![no_main]

use kodik_edit::matcher::{Budget, Stage, replace_unique};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0xFF);
    let (Some(t), Some(o), Some(n)) = (parts.next(), parts.next(), parts.next()) else { return };
    let (Ok(text), Ok(old), Ok(new)) = (std::str::from_utf8(t), std::str::from_utf8(o), std::str::from_utf8(n)) else {
        return;
    };
    let mut budget = Budget::new(200_000);
    if let Ok(r) = replace_unique(text, old, new, &mut budget) {
        assert!(r.start <= r.end && r.end <= text.len());
        assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
        if r.stage == Stage::Exact {
            assert_eq!(&text[r.start..r.end], old);
        }
        let mut out = text.to_string();
        out.replace_range(r.start..r.end, &r.text);
    }
});
