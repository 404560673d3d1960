//! The text of an `edit_file` call between its edits (E3), without a copy and a full scan of
//! the file per edit.
//!
//! Every edit must match exactly one place in the text the previous edits left. Done naively,
//! 50 edits of a 10 MB file are 50 copies and 50 scans of 10 MB. Here that text is the original
//! plus a sorted list of replaced spans, and the exact stage is decided from (a) one
//! multi-pattern scan of the original for all the edits' `old_string`s — an occurrence no
//! earlier edit touched is still there — and (b) a search of the few bytes around each replaced
//! span, where an earlier edit may have made or broken an occurrence. Whenever that cannot
//! decide cheaply (no exact match, several, too many occurrences) the caller materialises the
//! text and runs the full cascade from that edit on, so every result and every error is exactly
//! what applying the edits one by one gives.

use std::collections::HashMap;
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::diff::Span;

/// Total `old_string` bytes above which the multi-pattern scan is not worth building.
const MAX_PATTERN_BYTES: usize = 256 * 1024;
/// The most pattern bytes [`dfa_scan`] builds a DFA for.
const DFA_MAX_PATTERN_BYTES: usize = 16 * 1024;
/// Occurrences remembered per `old_string`; more means "let the full cascade decide".
const MAX_OCCURRENCES: usize = 16;
/// Bytes searched around replaced spans for one edit before the fast path gives up.
const MAX_WINDOW_BYTES: usize = 1 << 20;

/// Where each edit's `old_string` occurs in the original text.
pub(crate) struct Occurrences {
    /// For each edit, its pattern (`None` for an empty `old_string`).
    pattern_of: Vec<Option<usize>>,
    /// Per distinct pattern: its first positions, ascending, and whether there were more.
    found: Vec<(Vec<usize>, bool)>,
}

impl Occurrences {
    /// One overlapping multi-pattern scan of `text`; `None` when the patterns are too large to
    /// be worth it.
    pub(crate) fn scan(text: &str, olds: &[&str]) -> Option<Self> {
        let mut patterns: Vec<&str> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut pattern_of = Vec::with_capacity(olds.len());
        let mut bytes = 0usize;
        for &old in olds {
            if old.is_empty() {
                pattern_of.push(None);
                continue;
            }
            let id = *index.entry(old).or_insert_with(|| {
                patterns.push(old);
                bytes += old.len();
                patterns.len() - 1
            });
            pattern_of.push(Some(id));
        }
        if patterns.is_empty() || bytes > MAX_PATTERN_BYTES {
            return None;
        }
        let found = anchored_scan(text.as_bytes(), &patterns).or_else(|| dfa_scan(text, &patterns))?;
        Some(Self { pattern_of, found })
    }
}

/// Positions found so far for each pattern.
struct Found(Vec<(Vec<usize>, bool)>);

impl Found {
    fn new(patterns: usize) -> Self {
        Self(vec![(Vec::new(), false); patterns])
    }

    /// Records an occurrence; `false` once every pattern has more than it keeps.
    fn record(&mut self, pattern: usize, at: usize, open: &mut usize) -> bool {
        let f = &mut self.0[pattern];
        if f.1 {
            return true;
        }
        if f.0.len() == MAX_OCCURRENCES {
            f.1 = true;
            *open -= 1;
            return *open > 0;
        }
        f.0.push(at);
        true
    }
}

/// Every occurrence of every pattern (overlapping ones too) by one SIMD multi-substring search
/// for a short, rare-looking anchor inside each pattern, each hit verified in full. Source
/// files repeat their prefixes (`let `, `    `) on every line, so anchoring on the rarest
/// 4 bytes (by a sample of the text) keeps the hits few. `None` when a pattern is shorter
/// than an anchor or the packed searcher is unavailable.
fn anchored_scan(b: &[u8], patterns: &[&str]) -> Option<Vec<(Vec<usize>, bool)>> {
    const SAMPLE: usize = 8 * 1024;
    if patterns.iter().any(|p| p.len() < 4) {
        return None;
    }
    let key = |w: &[u8]| [w[0], w[1], w[2], w[3]];
    let mut seen: HashMap<[u8; 4], u32> = HashMap::new();
    for start in [0, b.len() / 4, b.len() / 2, b.len() - b.len() / 4] {
        let end = (start + SAMPLE).min(b.len());
        for w in b[start..end].windows(4) {
            *seen.entry(key(w)).or_default() += 1;
        }
    }
    // Per 4-byte key: the patterns anchored there and the anchor's offset in each.
    let mut by_key: HashMap<[u8; 4], Vec<(usize, usize)>> = HashMap::new();
    let mut anchors: Vec<&[u8]> = Vec::with_capacity(patterns.len());
    for (k, p) in patterns.iter().enumerate() {
        let pb = p.as_bytes();
        let o = (0..=pb.len() - 4).min_by_key(|&o| seen.get(&key(&pb[o..])).copied().unwrap_or(0))?;
        by_key.entry(key(&pb[o..])).or_default().push((k, o));
        anchors.push(&pb[o..(o + 8).min(pb.len())]);
    }
    let searcher = aho_corasick::packed::Config::new().builder().extend(anchors).build()?;
    // The occurrences that start in `starts`, found from the anchors in `anchors_in`.
    let scan = |anchors_in: Range<usize>, starts: Range<usize>| {
        let mut found = Found::new(patterns.len());
        let mut open = patterns.len();
        let mut pos = anchors_in.start;
        'scan: while pos < anchors_in.end
            && let Some(m) = searcher.find_in(b, aho_corasick::Span::from(pos..anchors_in.end))
        {
            let i = m.start();
            // Leftmost-first reports one anchor per position: check every pattern anchored on
            // these four bytes, so overlapping and coinciding occurrences all count.
            for &(k, o) in b.get(i..i + 4).and_then(|w| by_key.get(&key(w))).into_iter().flatten() {
                if i >= o
                    && starts.contains(&(i - o))
                    && b[i - o..].starts_with(patterns[k].as_bytes())
                    && !found.record(k, i - o, &mut open)
                {
                    break 'scan;
                }
            }
            pos = i + 1;
        }
        found.0
    };
    if b.len() < crate::files::PARALLEL_MIN {
        return Some(scan(0..b.len(), 0..b.len()));
    }
    // A large text is scanned in two halves at once. The first half's occurrences may have
    // their anchor past the middle, so its anchors run a pattern's length further.
    let mid = b.len() / 2;
    let reach = (mid + patterns.iter().map(|p| p.len()).max().unwrap_or(0) + 8).min(b.len());
    let (first, second) = crate::files::alongside(|| scan(0..reach, 0..mid), || scan(mid..b.len(), mid..b.len()));
    let second = second.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    Some(first.into_iter().zip(second).map(|(a, b)| merge_found(a, b)).collect())
}

/// The occurrences of one pattern in two consecutive parts of the text, as [`Found`] keeps
/// them for the whole: the first [`MAX_OCCURRENCES`] and whether there were more.
fn merge_found(first: (Vec<usize>, bool), second: (Vec<usize>, bool)) -> (Vec<usize>, bool) {
    if first.1 {
        return first;
    }
    let (mut all, more) = (first.0, second.1);
    all.extend(second.0);
    let more = more || all.len() > MAX_OCCURRENCES;
    all.truncate(MAX_OCCURRENCES);
    (all, more)
}

/// [`anchored_scan`] for short patterns: an overlapping Aho-Corasick DFA walk.
fn dfa_scan(text: &str, patterns: &[&str]) -> Option<Vec<(Vec<usize>, bool)>> {
    // A DFA has a state per pattern byte: past this, building it costs more than the edits
    // one by one (which is what `None` falls back to, with the same result).
    if patterns.iter().map(|p| p.len()).sum::<usize>() > DFA_MAX_PATTERN_BYTES {
        return None;
    }
    // Source code is full of the bytes a prefilter would look for, so a plain DFA walk is
    // faster than a prefilter that stops every few bytes.
    let ac = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .prefilter(false)
        .build(patterns)
        .ok()?;
    let mut found = Found::new(patterns.len());
    let mut open = patterns.len();
    // Matches come in order of their end, which for one pattern is the order of starts.
    for m in ac.find_overlapping_iter(text) {
        if !found.record(m.pattern().as_usize(), m.start(), &mut open) {
            break;
        }
    }
    Some(found.0)
}

/// Calls `f` with the bytes of `r` found in `parts` (consecutive, with their start bytes), in
/// order; finds the first part by binary search, so a window costs its size, not the edit count.
fn each_in(parts: &[(usize, &[u8])], r: Range<usize>, mut f: impl FnMut(usize, &[u8])) {
    let first = parts.partition_point(|(at, part)| at + part.len() <= r.start);
    for &(at, part) in &parts[first..] {
        if at >= r.end {
            break;
        }
        let (s, e) = (r.start.max(at), r.end.min(at + part.len()));
        if s < e {
            f(s, &part[s - at..e - at]);
        }
    }
}

/// A replaced span: bytes `old` of the original are now `text`, at byte `at` of the current
/// text.
#[derive(Debug)]
struct Piece {
    old: Range<usize>,
    at: usize,
    text: String,
}

impl Piece {
    fn end(&self) -> usize {
        self.at + self.text.len()
    }
    fn delta(&self) -> isize {
        self.text.len() as isize - self.old.len() as isize
    }
}

/// The original text with some spans replaced.
#[derive(Debug)]
pub(crate) struct Edited<'o> {
    orig: &'o str,
    /// Sorted and disjoint, in both coordinates.
    pieces: Vec<Piece>,
    len: usize,
}

impl<'o> Edited<'o> {
    pub(crate) fn new(orig: &'o str) -> Self {
        Self { orig, pieces: Vec::new(), len: orig.len() }
    }

    /// The current text as consecutive parts, each with the byte where it starts.
    fn parts(&self) -> Vec<(usize, &[u8])> {
        let b = self.orig.as_bytes();
        let mut out = Vec::with_capacity(2 * self.pieces.len() + 1);
        let (mut cur, mut from) = (0usize, 0usize);
        for p in &self.pieces {
            out.push((cur, &b[from..p.old.start]));
            out.push((p.at, p.text.as_bytes()));
            (cur, from) = (p.end(), p.old.end);
        }
        out.push((cur, &b[from..]));
        out
    }

    /// Calls `f` with the bytes of `r`, part by part, in order.
    fn each(&self, r: Range<usize>, f: impl FnMut(usize, &[u8])) {
        each_in(&self.parts(), r, f);
    }

    fn byte(&self, pos: usize) -> Option<u8> {
        let mut out = None;
        self.each(pos..pos + 1, |_, b| out = b.first().copied());
        out
    }

    /// `\n` bytes in `r`.
    pub(crate) fn count_newlines(&self, r: Range<usize>) -> usize {
        let mut n = 0;
        self.each(r, |_, b| n += crate::matcher::count_newlines(b));
        n
    }

    /// The first `\n` at or after `from`.
    fn next_newline(&self, from: usize) -> Option<usize> {
        self.parts().into_iter().filter(|(at, part)| at + part.len() > from).find_map(|(at, part)| {
            let skip = from.saturating_sub(at);
            memchr::memchr(b'\n', &part[skip..]).map(|i| at + skip + i)
        })
    }

    /// The last `\n` before `before`.
    fn prev_newline(&self, before: usize) -> Option<usize> {
        self.parts().into_iter().rev().filter(|(at, _)| *at < before).find_map(|(at, part)| {
            let keep = (before - at).min(part.len());
            memchr::memrchr(b'\n', &part[..keep]).map(|i| at + i)
        })
    }

    /// The current position of an occurrence at original byte `p` of length `len`, unless an
    /// edit changed any of its bytes or put text inside it.
    fn surviving(&self, p: usize, len: usize) -> Option<usize> {
        let mut delta = 0isize;
        for piece in &self.pieces {
            if p < piece.old.end && p + len > piece.old.start {
                return None;
            }
            if piece.old.end <= p {
                delta += piece.delta();
            }
        }
        Some((p as isize + delta) as usize)
    }

    /// Whether an occurrence at current byte `h` of length `len` overlaps a replaced span (or
    /// straddles the point where a deletion was).
    fn touches_change(&self, h: usize, len: usize) -> bool {
        self.pieces.iter().any(|p| h < p.end() && h + len > p.at)
    }

    /// The one place `old` (the pattern of edit `edit`) occurs in the current text, if the
    /// fast path can tell; `None` means "ask the full cascade" (no place, several, or too
    /// costly to find out here).
    pub(crate) fn unique_exact(&self, occ: &Occurrences, edit: usize, old: &str) -> Option<usize> {
        let pattern = (*occ.pattern_of.get(edit)?)?;
        let (positions, more) = occ.found.get(pattern)?;
        if *more {
            return None;
        }
        let len = old.len();
        let mut hit: Option<usize> = None;
        for &p in positions {
            if let Some(at) = self.surviving(p, len) {
                if hit.is_some() {
                    return None;
                }
                hit = Some(at);
            }
        }
        let finder = memchr::memmem::Finder::new(old.as_bytes());
        let mut budget = MAX_WINDOW_BYTES;
        let mut buf = Vec::new();
        let parts = self.parts();
        for piece in &self.pieces {
            let (a, b) = (piece.at.saturating_sub(len - 1), (piece.end() + len - 1).min(self.len));
            if b < a + len {
                continue;
            }
            budget = budget.checked_sub(b - a)?;
            buf.clear();
            each_in(&parts, a..b, |_, part| buf.extend_from_slice(part));
            let mut from = 0;
            while let Some(i) = finder.find(&buf[from..]) {
                let h = a + from + i;
                if self.touches_change(h, len) && hit != Some(h) {
                    if hit.is_some() {
                        return None;
                    }
                    hit = Some(h);
                }
                from += i + 1;
            }
        }
        hit
    }

    /// The line break a replacement of an exact match of `old` at `r` should use: what
    /// [`crate::matcher::ending_for`] says on the current text.
    pub(crate) fn ending_for(&self, r: usize, old: &str) -> &'static str {
        let ob = old.as_bytes();
        let (mut crlf, mut lf) = (0usize, 0usize);
        for i in memchr::memchr_iter(b'\n', ob) {
            let before = if i > 0 {
                Some(ob[i - 1])
            } else if r > 0 {
                self.byte(r - 1)
            } else {
                None
            };
            if before == Some(b'\r') { crlf += 1 } else { lf += 1 }
        }
        if crlf + lf > 0 {
            return if crlf >= lf { "\r\n" } else { "\n" };
        }
        let crlf_at = |nl: usize| nl > 0 && self.byte(nl - 1) == Some(b'\r');
        if let Some(nl) = self.next_newline(r + old.len()) {
            return if crlf_at(nl) { "\r\n" } else { "\n" };
        }
        if let Some(nl) = self.prev_newline(r) {
            return if crlf_at(nl) { "\r\n" } else { "\n" };
        }
        "\n"
    }

    /// Replaces current bytes `s..e` with `text`, merging with the spans it touches the way
    /// [`crate::diff::track`] does. `false` (nothing changed) if a boundary is not a character
    /// boundary, which an exact match never produces.
    pub(crate) fn replace(&mut self, s: usize, e: usize, text: &str) -> bool {
        let first = self.pieces.partition_point(|p| p.end() < s);
        let mut last = first;
        while last < self.pieces.len() && self.pieces[last].at <= e {
            last += 1;
        }
        let before: isize = self.pieces[..first].iter().map(Piece::delta).sum();
        let through: isize = self.pieces[..last].iter().map(Piece::delta).sum();
        let mut merged = String::with_capacity(text.len());
        let os = if first < last && self.pieces[first].at <= s {
            let p = &self.pieces[first];
            let Some(head) = p.text.get(..s - p.at) else { return false };
            merged.push_str(head);
            p.old.start
        } else {
            (s as isize - before) as usize
        };
        merged.push_str(text);
        let oe = if first < last && self.pieces[last - 1].end() >= e {
            let p = &self.pieces[last - 1];
            let Some(tail) = p.text.get(e - p.at..) else { return false };
            merged.push_str(tail);
            p.old.end
        } else {
            (e as isize - through) as usize
        };
        if !self.orig.is_char_boundary(os) || !self.orig.is_char_boundary(oe) {
            return false;
        }
        let at = if first < last { self.pieces[first].at.min(s) } else { s };
        let d = text.len() as isize - (e - s) as isize;
        for p in &mut self.pieces[last..] {
            p.at = (p.at as isize + d) as usize;
        }
        self.len = (self.len as isize + d) as usize;
        self.pieces.splice(first..last, [Piece { old: os..oe, at, text: merged }]);
        true
    }

    /// The current text and where it differs from the original.
    pub(crate) fn finish(self, spare: Option<String>) -> Option<(String, Vec<Span>)> {
        let mut out = crate::edit_file::reuse(spare, self.len);
        let mut spans = Vec::with_capacity(self.pieces.len());
        let mut from = 0;
        for p in &self.pieces {
            out.push_str(self.orig.get(from..p.old.start)?);
            out.push_str(&p.text);
            spans.push(Span { old: p.old.clone(), new: p.at..p.end() });
            from = p.old.end;
        }
        out.push_str(self.orig.get(from..)?);
        Some((out, spans))
    }
}

#[cfg(test)]
mod tests {
    use kodik_schema::edit::Edit;
    use proptest::prelude::*;

    use crate::diff::{Span, track};
    use crate::edit_file::{AppliedEdit, EditFailure, apply_edits_tracked};
    use crate::matcher::{Budget, count_newlines, replace_unique};

    /// E3 by definition: each edit through the full cascade on a fresh copy of what the
    /// previous one left.
    fn one_by_one(text: &str, edits: &[Edit]) -> Result<(String, Vec<AppliedEdit>, Vec<Span>), EditFailure> {
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

    fn edit(o: &str, n: &str) -> Edit {
        Edit { old_string: o.into(), new_string: n.into() }
    }

    #[test]
    fn e3_a_large_text_scanned_in_two_halves_finds_every_occurrence_as_one_scan_does() {
        // Over 1 MB: occurrences on both sides of the middle and across it, overlapping ones,
        // a pattern with more than MAX_OCCURRENCES hits, and 50 patterns as the bench has.
        let line = |i: usize| format!("    let value_{i} = compute(alpha, beta, {i}); // line\n");
        let mut text: String = (0..30_000).map(line).collect();
        let mid = text.len() / 2;
        let cut = (mid - 10..mid + 10).find(|&c| text.is_char_boundary(c)).unwrap();
        text.insert_str(cut, "ABABABAB");
        let mut patterns: Vec<String> = (0..50).map(|k| format!("value_{} = compute", k * 600 + 7)).collect();
        patterns.extend(["ABABAB".to_string(), "compute(alpha, beta, 1".to_string()]);
        patterns.push(text[cut - 5..cut + 13].to_string());
        let olds: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let occ = super::Occurrences::scan(&text, &olds).unwrap();
        for (k, p) in patterns.iter().enumerate() {
            let (mut all, mut from) = (Vec::new(), 0);
            while let Some(i) = memchr::memmem::find(&text.as_bytes()[from..], p.as_bytes()) {
                all.push(from + i);
                from += i + 1;
            }
            let more = all.len() > super::MAX_OCCURRENCES;
            all.truncate(super::MAX_OCCURRENCES);
            let want = (all, more);
            let id = occ.pattern_of[k].unwrap();
            assert_eq!(occ.found[id], want, "{p:?}");
        }
    }

    #[test]
    fn e3_e4_e12_one_edit_of_a_large_text_equals_the_cascade() {
        // Over 1 MB, a single edit is placed by the scan too: the same result as the cascade,
        // for a unique match, an ambiguous one, a miss, a match at the very end, and CRLF text.
        let lf: String =
            (0..30_000).map(|i| format!("    let value_{i} = compute(alpha, beta, {i}); // line\n")).collect();
        let crlf = lf.replace('\n', "\r\n");
        for text in [&lf, &crlf] {
            for (old, new) in [
                ("let value_15000 = compute(alpha, beta, 15000);", "let value_15000 = compute(alpha, gamma, 15000);"),
                ("compute(alpha, beta, 15000); // line\n    let", "x\ny\n    let"),
                ("compute(alpha, beta, 1", "compute(alpha, beta, 2"),
                ("let value_99999999 = nothing;", "x"),
                ("(alpha, beta, 29999); // line", "(omega); // end"),
                ("value_0 = compute(alpha, beta, 0);", ""),
            ] {
                let edits = vec![edit(old, new)];
                assert_eq!(apply_edits_tracked(text, &edits), one_by_one(text, &edits), "{old:?}");
            }
        }
    }

    #[test]
    fn e3_edit_builds_on_text_the_previous_one_made_and_broke() {
        let text = "k1 a\nk2 b\r\nk3 c\n";
        let cases: Vec<Vec<Edit>> = vec![
            // The second edit matches only thanks to the first.
            vec![edit("k1", "XY"), edit("XY a", "done")],
            // The first edit destroys the only occurrence of the second's old_string.
            vec![edit("k2 b", "z"), edit("k2", "q")],
            // The first edit makes the second ambiguous.
            vec![edit("k1", "k3"), edit("k3", "w")],
            // A deletion joins two lines into a new match across the gap.
            vec![edit("\r\nk3", ""), edit("bc", "B")],
            // Multi-line replacement in a CRLF region takes the file's line ending.
            vec![edit("k3", "x\ny"), edit("b\r\n", "b!\n")],
            // An edit cancelling the previous one, and an edit equal to its own old_string.
            vec![edit("a", "Q"), edit("Q", "a")],
            vec![edit("a", "Q"), edit("b", "b")],
            vec![edit("a", "Q"), edit("", "x")],
        ];
        for edits in cases {
            assert_eq!(apply_edits_tracked(text, &edits), one_by_one(text, &edits), "{edits:?}");
        }
    }

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ab]{0,3}",
            "k[0-9]",
            "[ab ]k[0-4]",
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("“é”".to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// The fast path of several exact edits gives exactly the one-by-one result: text,
        /// stages, lines, changed spans, and the same error for the same edit.
        #[test]
        fn e3_e4_many_edits_equal_one_by_one_application(
            parts in prop::collection::vec(piece(), 0..24),
            edits in prop::collection::vec(
                (any::<bool>(), 0usize..200, 1usize..7, piece(), "[abkXY\n]{0,4}|\r\n"),
                2..8,
            ),
            long in any::<bool>(),
        ) {
            let text: String = parts.concat();
            // `long`: every old_string has 4+ bytes, which takes the anchored scan; otherwise
            // short ones take the automaton.
            let edits: Vec<Edit> = edits
                .into_iter()
                .map(|(from_text, at, len, lit, new)| {
                    let chars: Vec<(usize, char)> = text.char_indices().collect();
                    let old = if from_text && !chars.is_empty() {
                        let s = chars[at % chars.len()].0;
                        text[s..].chars().take(if long { len + 3 } else { len }).collect()
                    } else if long {
                        lit.repeat(4)
                    } else {
                        lit
                    };
                    Edit { old_string: old, new_string: new }
                })
                .collect();
            prop_assert_eq!(apply_edits_tracked(&text, &edits), one_by_one(&text, &edits), "{:?}", edits);
        }
    }
}
