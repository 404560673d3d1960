//! Writing back a UTF-8 file with a few invalid bytes after an edit (E12). Its text shows each
//! invalid byte sequence as U+FFFD; before writing, every U+FFFD of the edited text is traced to
//! the U+FFFD of the file's text it was — by where it stands: in an unchanged line, in a line
//! moved as it is, or in the changed line most like its own — and gets that one's bytes back.
//! Putting the bytes back in order of appearance instead would swap them between two lines the
//! edit swapped, silently.

use std::collections::HashMap;

use similar::{Algorithm, DiffOp};

const MARK: &str = "\u{FFFD}";

/// What each U+FFFD of the lossy UTF-8 decode of `body` stands for, in order: its invalid
/// bytes, or `None` for a real U+FFFD character.
pub(crate) fn stood_for(body: &[u8]) -> Vec<Option<&[u8]>> {
    let mut out = Vec::new();
    for chunk in body.utf8_chunks() {
        out.extend(chunk.valid().matches(MARK).map(|_| None));
        if !chunk.invalid().is_empty() {
            out.push(Some(chunk.invalid()));
        }
    }
    out
}

/// How many U+FFFD `s` holds.
pub(crate) fn marks(s: &str) -> usize {
    memchr::memmem::find_iter(s.as_bytes(), MARK.as_bytes()).count()
}

/// For each U+FFFD of `new`, an edit of `old`, the index of the U+FFFD of `old` it is; `None`
/// when nothing tells (a U+FFFD the edit typed, or one in a line rewritten beyond recognition).
/// Each U+FFFD of `old` is given to at most one of `new`.
pub(crate) fn trace(old: &str, new: &str) -> Vec<Option<usize>> {
    let mut out = vec![None; marks(new)];
    // Whole lines only: a common prefix or suffix cut inside a line would pair the U+FFFD of
    // two lines that merely end alike (`A=\u{FFFD}` and `B=\u{FFFD}` share `=\u{FFFD}\n`).
    let (p, s) = common_lines(old, new);
    let (old_mid, new_mid) = (&old[p..old.len() - s], &new[p..new.len() - s]);
    let before = marks(&new[..p]);
    for (i, o) in out.iter_mut().enumerate().take(before) {
        *o = Some(i);
    }
    let (old_in, new_in) = (marks(old_mid), marks(new_mid));
    for i in 0..out.len() - before - new_in {
        out[before + new_in + i] = Some(before + old_in + i);
    }
    if new_in > 0 {
        trace_lines(old_mid, new_mid, before, &mut out[before..before + new_in]);
    }
    out
}

/// The byte lengths of the longest common prefix and suffix of `old` and `new` made of whole
/// lines, not overlapping.
fn common_lines(old: &str, new: &str) -> (usize, usize) {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let mut p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    p = memchr::memrchr(b'\n', &a[..p]).map_or(0, |i| i + 1);
    let (a_rest, b_rest) = (&a[p..], &b[p..]);
    let mut s = a_rest.iter().rev().zip(b_rest.iter().rev()).take_while(|(x, y)| x == y).count();
    let line_start = |bytes: &[u8], at: usize| at == 0 || bytes[at - 1] == b'\n';
    while s > 0 && !(line_start(a_rest, a_rest.len() - s) && line_start(b_rest, b_rest.len() - s)) {
        let tail = &a_rest[a_rest.len() - s..];
        s = match memchr::memchr(b'\n', tail) {
            Some(i) => s - i - 1,
            None => 0,
        };
    }
    (p, s)
}

/// One line of a text and the index of its first U+FFFD in the whole text.
struct Line<'a> {
    text: &'a str,
    first: usize,
    marks: usize,
}

fn lines(s: &str, mut first: usize) -> Vec<Line<'_>> {
    s.split_inclusive('\n')
        .map(|text| {
            let marks = marks(text);
            let line = Line { text, first, marks };
            first += marks;
            line
        })
        .collect()
}

/// [`trace`] for the changed region: `out` is its part of the result, `old_first` the index of
/// the region's first U+FFFD in `old`.
fn trace_lines(old: &str, new: &str, old_first: usize, out: &mut [Option<usize>]) {
    let (ol, nl) = (lines(old, old_first), lines(new, 0));
    let (ok, nk): (Vec<&str>, Vec<&str>) = (ol.iter().map(|l| l.text).collect(), nl.iter().map(|l| l.text).collect());
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &ok, &nk, Some(soon()));
    let mut taken = vec![false; marks(old)];
    let mut give = |out: &mut [Option<usize>], new_at: usize, old_at: usize| {
        if !std::mem::replace(&mut taken[old_at - old_first], true) {
            out[new_at] = Some(old_at);
        }
    };
    let (mut changed_old, mut changed_new) = (Vec::new(), Vec::new());
    for op in ops {
        match op {
            DiffOp::Equal { old_index, new_index, len } => {
                for d in 0..len {
                    let (o, n) = (&ol[old_index + d], &nl[new_index + d]);
                    (0..n.marks).for_each(|k| give(out, n.first + k, o.first + k));
                }
            }
            _ => {
                changed_old.extend(op.old_range().filter(|&i| ol[i].marks > 0));
                changed_new.extend(op.new_range().filter(|&j| nl[j].marks > 0));
            }
        }
    }
    // A line moved as it is keeps its bytes.
    let mut moved: HashMap<&str, Vec<usize>> = HashMap::new();
    for &i in changed_old.iter().rev() {
        moved.entry(ol[i].text).or_default().push(i);
    }
    let mut rewritten = Vec::new();
    for j in changed_new {
        match moved.get_mut(nl[j].text).and_then(Vec::pop) {
            Some(i) => (0..nl[j].marks).for_each(|k| give(out, nl[j].first + k, ol[i].first + k)),
            None => rewritten.push(j),
        }
    }
    let left: Vec<usize> = moved.into_values().flatten().collect();
    // A rewritten line takes the bytes of the changed line most like it, where a character diff
    // of the two keeps the U+FFFD. Bounded: a damaged file has a few such lines.
    if rewritten.len().saturating_mul(left.len()) > 4096 {
        return;
    }
    // Each character with the number of U+FFFD before it in its line.
    let indexed = |s: &str| {
        let mut seen = 0;
        s.chars()
            .map(|c| {
                let at = seen;
                seen += usize::from(c == '\u{FFFD}');
                (c, at)
            })
            .collect::<Vec<_>>()
    };
    for j in rewritten {
        let new_chars = indexed(nl[j].text);
        let new_keys: Vec<char> = new_chars.iter().map(|c| c.0).collect();
        let best = left
            .iter()
            .map(|&i| {
                let old_chars = indexed(ol[i].text);
                let old_keys: Vec<char> = old_chars.iter().map(|c| c.0).collect();
                let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &old_keys, &new_keys, Some(soon()));
                (similar::diff_ratio(&ops, old_keys.len(), new_keys.len()), i, old_chars, ops)
            })
            .filter(|(ratio, ..)| *ratio >= 0.5)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, i, old_chars, ops)) = best else { continue };
        for op in ops {
            if let DiffOp::Equal { old_index, new_index, len } = op {
                for d in (0..len).filter(|d| new_chars[new_index + d].0 == '\u{FFFD}') {
                    give(out, nl[j].first + new_chars[new_index + d].1, ol[i].first + old_chars[old_index + d].1);
                }
            }
        }
    }
}

/// The time a diff that only places U+FFFD may take before it settles for a coarser answer.
fn soon() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_millis(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e12_swapped_lines_keep_their_own_marks() {
        let old = "// x \u{FFFD}\nA=\u{FFFD}\nB=\u{FFFD}\nend\n";
        let new = "// x \u{FFFD}\nB=\u{FFFD}\nA=\u{FFFD}\nend\n";
        assert_eq!(trace(old, new), vec![Some(0), Some(2), Some(1)]);
    }

    #[test]
    fn e12_a_rewritten_line_keeps_its_mark_and_a_typed_one_is_unknown() {
        let old = "a\nname = \"caf\u{FFFD}\" # x\ncity = K\u{FFFD}ln\n";
        let new = "a\ncity = K\u{FFFD}ln!\nname = \"caf\u{FFFD}\" # y\n\u{FFFD}\n";
        assert_eq!(trace(old, new), vec![Some(1), Some(0), None]);
    }

    #[test]
    fn e12_common_lines_stop_at_line_starts() {
        assert_eq!(common_lines("x\nA=1\ny\n", "x\nB=1\ny\n"), (2, 2));
        assert_eq!(common_lines("same\n", "same\n"), (5, 0));
        assert_eq!(common_lines("a\nb", "a\nc\nb"), (2, 1));
    }
}
