//! Unified diffs of a change (E6), bounded in time and in what the model is shown.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;

use kodik_core::{OutputPreview, PreviewConfig};

/// How long the line diff may search for a minimal edit script before it settles for a
/// correct but less minimal one. This is what keeps a whole-file replacement of a large
/// file from going quadratic.
const DIFF_TIMEOUT: Duration = Duration::from_millis(300);

/// Diff text is handed to the preview in pieces of about this size.
const PUSH_CHUNK: usize = 256 * 1024;

/// A diff as the model sees it, with the full text saved when it had to be cut (G9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffText {
    /// The diff, or its head and tail with the dropped middle marked.
    pub text: String,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    /// Where the complete diff was saved when `text` is cut.
    pub full_output: Option<std::path::PathBuf>,
}

/// Where a change happened: a byte range of the old text and the byte range of the new text
/// that replaced it. Outside the spans the two texts are identical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Bytes of the old text.
    pub old: std::ops::Range<usize>,
    /// Bytes of the new text.
    pub new: std::ops::Range<usize>,
}

/// Records that bytes `s..e` of the current text became `len` bytes, merging with the spans
/// it touches. `spans` is sorted, disjoint, and in (old, current) coordinates.
pub fn track(spans: &mut Vec<Span>, s: usize, e: usize, len: usize) {
    let delta = |sp: &Span| sp.new.len() as isize - sp.old.len() as isize;
    let first = spans.partition_point(|sp| sp.new.end < s);
    let mut last = first;
    while last < spans.len() && spans[last].new.start <= e {
        last += 1;
    }
    let before: isize = spans[..first].iter().map(delta).sum();
    let through: isize = spans[..last].iter().map(delta).sum();
    let (ns, os) = if first < last && spans[first].new.start <= s {
        (spans[first].new.start, spans[first].old.start)
    } else {
        (s, (s as isize - before) as usize)
    };
    let (ne, oe) = if first < last && spans[last - 1].new.end >= e {
        (spans[last - 1].new.end, spans[last - 1].old.end)
    } else {
        (e, (e as isize - through) as usize)
    };
    let d = len as isize - (e - s) as isize;
    for sp in &mut spans[last..] {
        sp.new = (sp.new.start as isize + d) as usize..(sp.new.end as isize + d) as usize;
    }
    let merged = Span { old: os..oe, new: ns..(ne as isize + d) as usize };
    spans.splice(first..last, [merged]);
}

/// The unified diff (3 lines of context) from `old` to `new`, labelled with the two names.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> DiffText {
    unified_spans(old, new, &[common_span(old, new)], old_name, new_name, PreviewConfig::default())
}

/// [`unified`] with a chosen preview size and spool folder.
pub fn unified_with(old: &str, new: &str, old_name: &str, new_name: &str, cfg: PreviewConfig) -> DiffText {
    unified_spans(old, new, &[common_span(old, new)], old_name, new_name, cfg)
}

/// The one span between the common prefix and the common suffix.
fn common_span(old: &str, new: &str) -> Span {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let max = a.len().min(b.len());
    let mut p = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(max);
    while !old.is_char_boundary(p) {
        p -= 1;
    }
    let mut q = a[p..].iter().rev().zip(b[p..].iter().rev()).position(|(x, y)| x != y).unwrap_or(max - p);
    while !old.is_char_boundary(a.len() - q) || !new.is_char_boundary(b.len() - q) {
        q -= 1;
    }
    Span { old: p..a.len() - q, new: p..b.len() - q }
}

/// Lines of a text with their breaks, found on demand rather than from a table of every line:
/// a 50 MB file has nearly a million lines, and a table of them would cost the diff of a
/// one-line change a sixth of the file's size (issue 18.2). The diff reads lines going forward,
/// so a line costs the bytes passed over to reach it; a jump back restarts from the nearest
/// line start seen before.
struct Lines<'t> {
    text: &'t str,
    /// The line count, once something needed it (see [`Lines::len`]).
    len: Cell<Option<usize>>,
    /// The last line reached and the byte where it starts.
    cursor: Cell<(usize, usize)>,
    /// Line starts seen by [`Lines::of`], sorted, for jumps back (a few per changed block).
    marks: RefCell<Vec<(usize, usize)>>,
}

/// Lines of unchanged context around each change (unified diff's default).
const CONTEXT: usize = 3;

/// Lines a start may be found from by walking back from a later known one (a hunk's leading
/// context sits just before a line found for its change).
const WALK_BACK_MAX: usize = 64;

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Self {
        Self { text, len: Cell::new(None), cursor: Cell::new((0, 0)), marks: RefCell::new(vec![(0, 0)]) }
    }
    /// The line count. Counted only when needed (a change at the end of the text, or a span
    /// list the diff does not trust), and then from the last line start known, not from the
    /// start: the diff of a change in the middle of a large file never reads its second half.
    fn len(&self) -> usize {
        if let Some(len) = self.len.get() {
            return len;
        }
        let (line, at) = {
            let marks = self.marks.borrow();
            let mark = marks.last().copied().unwrap_or((0, 0));
            let cur = self.cursor.get();
            // The cursor can stand past the last line (asked for one that does not exist).
            if cur.1 > mark.1 && cur.1 < self.text.len() { cur } else { mark }
        };
        let rest = &self.text.as_bytes()[at..];
        let len =
            line + crate::matcher::count_newlines(rest) + usize::from(!rest.is_empty() && rest.last() != Some(&b'\n'));
        self.len.set(Some(len));
        len
    }
    /// The nearest known line start at or before line `i`.
    fn known_by_line(&self, i: usize) -> (usize, usize) {
        let marks = self.marks.borrow();
        let mark = marks[..marks.partition_point(|m| m.0 <= i)].last().copied().unwrap_or((0, 0));
        let cur = self.cursor.get();
        if cur.0 <= i && cur.0 > mark.0 { cur } else { mark }
    }
    /// The nearest known line start after line `i`, if a real line's.
    fn known_after_line(&self, i: usize) -> Option<(usize, usize)> {
        let marks = self.marks.borrow();
        let mark = marks.get(marks.partition_point(|m| m.0 <= i)).copied();
        let cur = Some(self.cursor.get()).filter(|c| c.0 > i && c.1 < self.text.len());
        match (mark, cur) {
            (Some(m), Some(c)) => Some(if c.0 < m.0 { c } else { m }),
            (m, c) => m.or(c),
        }
    }
    /// The nearest known line start at or before byte `pos`.
    fn known_by_byte(&self, pos: usize) -> (usize, usize) {
        let marks = self.marks.borrow();
        let mark = marks[..marks.partition_point(|m| m.1 <= pos)].last().copied().unwrap_or((0, 0));
        let cur = self.cursor.get();
        if cur.1 <= pos && cur.1 > mark.1 { cur } else { mark }
    }
    /// The byte where line `i` starts (the text's length for `i == len`).
    fn start(&self, i: usize) -> usize {
        if let Some(len) = self.len.get()
            && i >= len
        {
            // The end, known without walking there (a whole-file block ends at it).
            self.cursor.set((len, self.text.len()));
            return self.text.len();
        }
        let (line, at) = self.known_by_line(i);
        let bytes = self.text.as_bytes();
        let at = match self.known_after_line(i) {
            // Every line after the first starts just after a line break, so each step back is
            // the break before the previous one.
            Some((next, mut b)) if next - i <= WALK_BACK_MAX && next - i < i - line => {
                for _ in i..next {
                    b = memchr::memrchr(b'\n', &bytes[..b.saturating_sub(1)]).map_or(0, |k| k + 1);
                }
                b
            }
            _ => skip_lines(bytes, at, i - line),
        };
        self.cursor.set((i, at));
        at
    }
    fn line(&self, i: usize) -> &'t str {
        let start = self.start(i);
        let end = memchr::memchr(b'\n', &self.text.as_bytes()[start..]).map_or(self.text.len(), |k| start + k + 1);
        self.cursor.set((i + 1, end));
        &self.text[start..end]
    }
    /// How many lines there are from line `from` on, counting no further than `cap`.
    fn count_from(&self, from: usize, cap: usize) -> usize {
        if let Some(len) = self.len.get() {
            return len.saturating_sub(from).min(cap);
        }
        let bytes = self.text.as_bytes();
        let (mut at, mut n) = (self.start(from), 0);
        while n < cap && at < bytes.len() {
            at = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |k| at + k + 1);
            n += 1;
        }
        n
    }
    /// The line holding byte `pos` (the line count when `pos` is past the last line).
    fn of(&self, pos: usize) -> usize {
        if pos >= self.text.len() {
            return self.len();
        }
        let (line, at) = self.known_by_byte(pos);
        let between = &self.text.as_bytes()[at..pos];
        let found = line + crate::matcher::count_newlines(between);
        let start = memchr::memrchr(b'\n', between).map_or(at, |k| at + k + 1);
        // Kept sorted (line starts grow with their lines), so the nearest is a binary search.
        let mut marks = self.marks.borrow_mut();
        let at = marks.partition_point(|m| m.0 < found);
        if marks.get(at).is_none_or(|m| m.0 != found) {
            marks.insert(at, (found, start));
        }
        found
    }
    /// Lines `l0..l1` that bytes `s..e` may have changed: besides the lines they lie on, the
    /// line before (a removed line break joins it with the next) and the line after.
    fn range(&self, s: usize, e: usize) -> (usize, usize) {
        let l0 = self.of(s.saturating_sub(1));
        // Short of the end, the line after `e`'s is a real one.
        let l1 = if e >= self.text.len() { self.len() } else { self.of(e) + 1 };
        (l0, l1)
    }
}

/// The byte after the `n`th line break at or after `at` (the text's length when it has fewer).
/// Long jumps (a whole-file block's end) count breaks a few KB at a time instead of finding
/// each one, so skipping a line costs a fraction of a byte comparison per byte, not a call.
fn skip_lines(bytes: &[u8], mut at: usize, mut n: usize) -> usize {
    const PIECE: usize = 4096;
    while n > 0 && at < bytes.len() {
        let end = (at + PIECE).min(bytes.len());
        let piece = &bytes[at..end];
        // A short jump (the next line, as the diff reads forward) needs no count.
        let counted = if n <= 4 { usize::MAX } else { crate::matcher::count_newlines(piece) };
        if counted < n {
            n -= counted;
            at = end;
            continue;
        }
        for k in memchr::memchr_iter(b'\n', piece) {
            n -= 1;
            if n == 0 {
                return at + k + 1;
            }
        }
        at = end;
    }
    if n > 0 { bytes.len() } else { at }
}

/// Blocks with more changed lines than this (old and new together) are not searched for a
/// minimal line diff: after their common first and last lines are set aside, the rest is one
/// replacement, written out line by line without a table of them. A whole-file rewrite of a
/// large file is shown as what it is, and its diff costs neither time nor memory in proportion
/// to its line count (E6, issue 18.2).
const BLOCK_LINES_CAP: usize = 100_000;

/// Bytes two texts share at their start, compared a page at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const STEP: usize = 4096;
    let max = a.len().min(b.len());
    let mut p = 0;
    while p + STEP <= max && a[p..p + STEP] == b[p..p + STEP] {
        p += STEP;
    }
    p + a[p..max].iter().zip(&b[p..max]).position(|(x, y)| x != y).unwrap_or(max - p)
}

/// Bytes two texts share at their end, compared a page at a time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const STEP: usize = 4096;
    let max = a.len().min(b.len());
    let (ea, eb) = (a.len(), b.len());
    let mut q = 0;
    while q + STEP <= max && a[ea - q - STEP..ea - q] == b[eb - q - STEP..eb - q] {
        q += STEP;
    }
    q + a[..ea - q].iter().rev().zip(b[..eb - q].iter().rev()).position(|(x, y)| x != y).unwrap_or(max - q)
}

/// The ops of a block over [`BLOCK_LINES_CAP`]: equal lines at both ends, one change between.
fn capped_block_ops(ol: &Lines<'_>, nl: &Lines<'_>, block: (usize, usize, usize, usize)) -> Vec<similar::DiffOp> {
    let (o0, o1, n0, n1) = block;
    let (ob, nb) = (ol.start(o0)..ol.start(o1), nl.start(n0)..nl.start(n1));
    let (a, b) = (&ol.text.as_bytes()[ob], &nl.text.as_bytes()[nb]);
    let p = common_prefix(a, b);
    // Whole lines only: each line break inside the shared bytes closes a line equal in both.
    let head = crate::matcher::count_newlines(&a[..p]);
    let q = common_suffix(&a[p..], &b[p..]);
    // A line is shared at the end when it starts inside the shared bytes (its start then has
    // the same line break before it in both texts).
    let tail = if q == 0 { 0 } else { crate::matcher::count_newlines(&a[a.len() - q..a.len() - 1]) };
    let (co0, co1, cn0, cn1) = (o0 + head, o1 - tail, n0 + head, n1 - tail);
    let mut ops = Vec::with_capacity(3);
    if head > 0 {
        ops.push(similar::DiffOp::Equal { old_index: o0, new_index: n0, len: head });
    }
    match (co1 - co0, cn1 - cn0) {
        (0, 0) => {}
        (0, new_len) => ops.push(similar::DiffOp::Insert { old_index: co0, new_index: cn0, new_len }),
        (old_len, 0) => ops.push(similar::DiffOp::Delete { old_index: co0, old_len, new_index: cn0 }),
        (old_len, new_len) => {
            ops.push(similar::DiffOp::Replace { old_index: co0, old_len, new_index: cn0, new_len });
        }
    }
    if tail > 0 {
        ops.push(similar::DiffOp::Equal { old_index: co1, new_index: cn1, len: tail });
    }
    ops
}

/// The unified diff from `old` to `new` when only `spans` changed: only the lines around the
/// spans are diffed, so the cost follows the size of the change, not of the file (E6).
pub fn unified_spans(
    old: &str,
    new: &str,
    spans: &[Span],
    old_name: &str,
    new_name: &str,
    cfg: PreviewConfig,
) -> DiffText {
    unified_spans_capped(old, new, spans, (old_name, new_name), cfg, BLOCK_LINES_CAP)
}

/// [`unified_spans`] with blocks of more than `cap` lines taken as one change between their
/// shared first and last lines.
fn unified_spans_capped(
    old: &str,
    new: &str,
    spans: &[Span],
    (old_name, new_name): (&str, &str),
    cfg: PreviewConfig,
    cap: usize,
) -> DiffText {
    let (ol, nl) = (Lines::new(old), Lines::new(new));
    // Line blocks around each span, merged when they touch.
    let mut blocks: Vec<(usize, usize, usize, usize)> = Vec::new();
    for sp in spans.iter().filter(|sp| !(sp.old.is_empty() && sp.new.is_empty())) {
        let (o0, o1) = ol.range(sp.old.start, sp.old.end);
        let (n0, n1) = nl.range(sp.new.start, sp.new.end);
        match blocks.last_mut() {
            Some(b) if o0 <= b.1 || n0 <= b.3 => {
                b.1 = b.1.max(o1);
                b.3 = b.3.max(n1);
            }
            _ => blocks.push((o0, o1, n0, n1)),
        }
    }
    // Between blocks the texts are identical, so the gaps must have equal line counts; if
    // not (a bug or an odd span list), one block over the whole changed area is still right.
    let consistent = blocks.first().is_none_or(|b| b.0 == b.2)
        && blocks.windows(2).all(|w| w[1].0 - w[0].1 == w[1].2 - w[0].3)
        // After the last block the texts are the same bytes (checked by length: counting the
        // lines there would read the rest of both texts).
        && blocks.last().is_none_or(|b| old.len() - ol.start(b.1) == new.len() - nl.start(b.3));
    if !consistent && let (Some(f), Some(l)) = (blocks.first().copied(), blocks.last().copied()) {
        let start = f.0.min(f.2);
        let tail = (ol.len() - l.1).min(nl.len() - l.3);
        blocks = vec![(start, ol.len() - tail, start, nl.len() - tail)];
    }
    let deadline = Some(std::time::Instant::now() + DIFF_TIMEOUT);
    let mut ops: Vec<similar::DiffOp> = Vec::new();
    let (mut po, mut pn) = (0usize, 0usize);
    for &(o0, o1, n0, n1) in &blocks {
        if o0 > po {
            ops.push(similar::DiffOp::Equal { old_index: po, new_index: pn, len: o0 - po });
        }
        if (o1 - o0) + (n1 - n0) > cap {
            ops.extend(capped_block_ops(&ol, &nl, (o0, o1, n0, n1)));
        } else {
            let a: Vec<&str> = (o0..o1).map(|i| ol.line(i)).collect();
            let b: Vec<&str> = (n0..n1).map(|i| nl.line(i)).collect();
            for op in block_ops(&a, &b, deadline) {
                ops.push(shift(op, o0, n0));
            }
        }
        (po, pn) = (o1, n1);
    }
    // The lines after the last change: the hunk shows at most CONTEXT of them, so more than
    // that need not be counted (the ops' grouping keeps only CONTEXT of a final equal run).
    let tail = ol.count_from(po, CONTEXT + 1);
    if tail > 0 {
        ops.push(similar::DiffOp::Equal { old_index: po, new_index: pn, len: tail });
    }
    // Neighbouring equal runs (a gap and a block's own context) must be one op, or the
    // hunks would carry their context twice.
    let mut merged: Vec<similar::DiffOp> = Vec::with_capacity(ops.len());
    for op in ops {
        if let (Some(similar::DiffOp::Equal { len: prev_len, .. }), similar::DiffOp::Equal { len, .. }) =
            (merged.last_mut(), op)
        {
            *prev_len += len;
            continue;
        }
        merged.push(op);
    }
    let ops = merged;
    let (mut added, mut removed) = (0, 0);
    for op in &ops {
        match *op {
            similar::DiffOp::Insert { new_len, .. } => added += new_len,
            similar::DiffOp::Delete { old_len, .. } => removed += old_len,
            similar::DiffOp::Replace { old_len, new_len, .. } => {
                added += new_len;
                removed += old_len;
            }
            similar::DiffOp::Equal { .. } => {}
        }
    }
    let mut out = Out { preview: OutputPreview::new(cfg), buf: Vec::new(), breaks: 0 };
    if added + removed > 0 {
        out.text(&format!("--- {old_name}\n+++ {new_name}\n"));
        for group in similar::group_diff_ops(ops, CONTEXT) {
            out.text(&format!("{}\n", similar::udiff::UnifiedHunkHeader::new(&group)));
            for op in &group {
                let (o, n) = (op.old_range(), op.new_range());
                match op.tag() {
                    similar::DiffTag::Equal => out.lines(b' ', &ol, o),
                    similar::DiffTag::Delete => out.lines(b'-', &ol, o),
                    similar::DiffTag::Insert => out.lines(b'+', &nl, n),
                    similar::DiffTag::Replace => {
                        out.lines(b'-', &ol, o);
                        out.lines(b'+', &nl, n);
                    }
                }
            }
        }
        out.flush();
    }
    let mut preview = out.preview;
    let summary = preview.summary();
    DiffText { text: summary.text, added, removed, full_output: summary.full_output }
}

/// The line diff of one block. Large blocks are diffed as 64-bit line hashes (much cheaper to
/// hash and compare than the lines); every line the result calls equal is then checked, and a
/// collision falls back to diffing the lines themselves.
fn block_ops(a: &[&str], b: &[&str], deadline: Option<std::time::Instant>) -> Vec<similar::DiffOp> {
    if a.len() + b.len() < 2048 {
        return similar::capture_diff_slices_deadline(similar::Algorithm::Myers, a, b, deadline);
    }
    // A rewrite that keeps no line at all (a whole-file replacement) is one replace op; finding
    // that out with sets of line keys is far cheaper than the diff's own preparation. First by
    // length and 16 bytes at each end (no need to read whole lines: equal lines agree there),
    // then, if that cannot tell, by whole-line hashes.
    let replace_all =
        || vec![similar::DiffOp::Replace { old_index: 0, old_len: a.len(), new_index: 0, new_len: b.len() }];
    let ends: HashSet<u64, BuildHasherDefault<Prehashed>> = a.iter().map(|l| ends_key(l.as_bytes())).collect();
    if !b.iter().any(|l| ends.contains(&ends_key(l.as_bytes()))) {
        return replace_all();
    }
    let ha: Vec<u64> = a.iter().map(|l| line_hash(l.as_bytes())).collect();
    let hb: Vec<u64> = b.iter().map(|l| line_hash(l.as_bytes())).collect();
    let seen: HashSet<u64, BuildHasherDefault<Prehashed>> = ha.iter().copied().collect();
    if !hb.iter().any(|h| seen.contains(h)) {
        return replace_all();
    }
    let ops = similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &ha, &hb, deadline);
    let verified = ops.iter().all(|op| match *op {
        similar::DiffOp::Equal { old_index, new_index, len } => (0..len).all(|k| a[old_index + k] == b[new_index + k]),
        _ => true,
    });
    if verified { ops } else { similar::capture_diff_slices_deadline(similar::Algorithm::Myers, a, b, deadline) }
}

/// A `Hasher` for keys that are already well-mixed 64-bit hashes.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A hash of a line's length and its first and last 16 bytes.
fn ends_key(line: &[u8]) -> u64 {
    let n = line.len().min(16);
    line_hash(&line[..n]) ^ line_hash(&line[line.len() - n..]).rotate_left(32) ^ (line.len() as u64).rotate_left(17)
}

fn line_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    for &x in chunks.remainder() {
        h = (h.rotate_left(7) ^ u64::from(x)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

/// Diff text on its way to the preview, handed over in pieces of about [`PUSH_CHUNK`] (a
/// whole-file hunk is megabytes) with their line breaks counted as they are written, so the
/// preview does not scan them again.
struct Out {
    preview: OutputPreview,
    buf: Vec<u8>,
    /// Line breaks in `buf`.
    breaks: u64,
}

impl Out {
    fn text(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
        self.breaks += crate::matcher::count_newlines(s.as_bytes()) as u64;
    }

    /// Lines `range` of `lines`, each after `mark`; a last line without a break gets the
    /// unified format's marker.
    fn lines(&mut self, mark: u8, lines: &Lines<'_>, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let bytes = lines.text.as_bytes();
        let base = lines.start(range.start);
        let (mut at, mut left) = (base, range.len());
        for k in memchr::memchr_iter(b'\n', &bytes[base..]) {
            let end = base + k + 1;
            self.buf.push(mark);
            self.buf.extend_from_slice(&bytes[at..end]);
            self.breaks += 1;
            at = end;
            if self.buf.len() >= PUSH_CHUNK {
                self.flush();
            }
            left -= 1;
            if left == 0 {
                break;
            }
        }
        for _ in 0..left {
            self.buf.push(mark);
            self.buf.extend_from_slice(&bytes[at..]);
            self.buf.extend_from_slice(b"\n\\ No newline at end of file\n");
            self.breaks += 2;
            at = bytes.len();
        }
        lines.cursor.set((range.end, at));
    }

    fn flush(&mut self) {
        self.preview.push_lines(&self.buf, self.breaks);
        self.buf.clear();
        self.breaks = 0;
    }
}

fn shift(op: similar::DiffOp, o: usize, n: usize) -> similar::DiffOp {
    use similar::DiffOp::*;
    match op {
        Equal { old_index, new_index, len } => Equal { old_index: old_index + o, new_index: new_index + n, len },
        Delete { old_index, old_len, new_index } => {
            Delete { old_index: old_index + o, old_len, new_index: new_index + n }
        }
        Insert { old_index, new_index, new_len } => {
            Insert { old_index: old_index + o, new_index: new_index + n, new_len }
        }
        Replace { old_index, old_len, new_index, new_len } => {
            Replace { old_index: old_index + o, old_len, new_index: new_index + n, new_len }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e6_diff_is_exact_unified_text() {
        let d = unified("a\nb\nc\n", "a\nB\nc\n", "a/x.txt", "b/x.txt");
        assert_eq!(d.text, "--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        assert_eq!((d.added, d.removed), (1, 1));
    }

    /// Applies a unified diff made by this module to `old`.
    pub(crate) fn patch_back(old: &str, diff: &str) -> String {
        let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
        let mut out = String::new();
        let mut at = 0usize;
        let mut lines = diff.split_inclusive('\n').skip(2).peekable();
        while let Some(l) = lines.next() {
            if let Some(h) = l.strip_prefix("@@ -") {
                let start: usize = h.split([',', ' ']).next().unwrap().parse().unwrap();
                let start = if h.split(' ').next().unwrap().ends_with(",0") { start } else { start - 1 };
                while at < start {
                    out.push_str(old_lines[at]);
                    at += 1;
                }
                continue;
            }
            let no_nl = lines.peek().is_some_and(|n| n.starts_with("\\ No newline"));
            let body = if no_nl { l[1..].strip_suffix('\n').unwrap() } else { &l[1..] };
            if no_nl {
                lines.next();
            }
            match &l[..1] {
                " " => {
                    out.push_str(body);
                    at += 1;
                }
                "-" => at += 1,
                "+" => out.push_str(body),
                _ => panic!("bad diff line {l:?}"),
            }
        }
        while at < old_lines.len() {
            out.push_str(old_lines[at]);
            at += 1;
        }
        out
    }

    #[test]
    fn e6_span_tracking_gives_the_same_result_as_a_full_diff() {
        let old: String = (0..200).map(|i| format!("line {i}\n")).collect();
        let mut cur = old.clone();
        let mut spans = Vec::new();
        for (needle, rep) in [("line 5\n", "five\nFIVE\n"), ("line 150\n", ""), ("FIVE", "5"), ("line 199\n", "end")] {
            let s = cur.find(needle).unwrap();
            track(&mut spans, s, s + needle.len(), rep.len());
            cur.replace_range(s..s + needle.len(), rep);
        }
        let d = unified_spans(&old, &cur, &spans, "a", "b", PreviewConfig::default().without_spool());
        assert_eq!(patch_back(&old, &d.text), cur, "{}", d.text);
        assert!(d.text.contains("\\ No newline at end of file"));
        assert_eq!(spans.len(), 3, "{spans:?}");
        let full = unified(&old, &cur, "a", "b");
        assert_eq!((full.added, full.removed), (d.added, d.removed));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        #[test]
        fn e6_span_diff_always_rebuilds_the_new_text(
            lines in proptest::collection::vec("[ab]{0,2}(\n|\r\n)?", 0..30),
            edits in proptest::collection::vec((0usize..200, 0usize..6, "[abc\n]{0,5}"), 0..6),
        ) {
            let old: String = lines.concat();
            let mut cur = old.clone();
            let mut spans = Vec::new();
            for (at, len, rep) in edits {
                let s = if cur.is_empty() { 0 } else { at % (cur.len() + 1) };
                let e = (s + len).min(cur.len());
                if !cur.is_char_boundary(s) || !cur.is_char_boundary(e) { continue; }
                track(&mut spans, s, e, rep.len());
                cur.replace_range(s..e, &rep);
            }
            let d = unified_spans(&old, &cur, &spans, "a", "b", PreviewConfig::default().without_spool());
            proptest::prop_assert_eq!(patch_back(&old, &d.text), cur.clone(), "{}", d.text);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// Blocks over the cap (here every block) are one change between their shared first and
        /// last lines: still an exact diff of the whole change.
        #[test]
        fn e6_capped_blocks_still_rebuild_the_new_text(
            old_lines in proptest::collection::vec("[ab]{0,2}(\n|\r\n)?", 0..30),
            new_lines in proptest::collection::vec("[ab]{0,2}(\n|\r\n)?", 0..30),
        ) {
            let (old, new) = (old_lines.concat(), new_lines.concat());
            let span = Span { old: 0..old.len(), new: 0..new.len() };
            let cfg = PreviewConfig::default().without_spool();
            let d = unified_spans_capped(&old, &new, &[span], ("a", "b"), cfg, 0);
            proptest::prop_assert_eq!(patch_back(&old, &d.text), new.clone(), "{}", d.text);
        }
    }

    #[test]
    fn e6_a_change_far_from_both_ends_gives_the_exact_hunk_without_counting_the_file() {
        let old: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let (s, e) = (old.find("line 10000\n").unwrap(), old.find("line 10001\n").unwrap());
        let new = format!("{}LINE\n{}", &old[..s], &old[e..]);
        let span = Span { old: s..e, new: s..s + 5 };
        let d = unified_spans(&old, &new, &[span], "a", "b", PreviewConfig::default().without_spool());
        let hunk = "@@ -9998,7 +9998,7 @@\n line 9997\n line 9998\n line 9999\n-line 10000\n+LINE\n line 10001\n line 10002\n line 10003\n";
        assert_eq!(d.text, format!("--- a\n+++ b\n{hunk}"));
        // At the end, without a final line break: the short tail is counted exactly.
        let old = old + "last";
        let s = old.find("line 19999\n").unwrap();
        let new = format!("{}changed\nlast", &old[..s]);
        let span = Span { old: s..old.len() - 4, new: s..s + 8 };
        let d = unified_spans(&old, &new, &[span], "a", "b", PreviewConfig::default().without_spool());
        let hunk = "@@ -19997,5 +19997,5 @@\n line 19996\n line 19997\n line 19998\n-line 19999\n+changed\n last\n\\ No newline at end of file\n";
        assert_eq!(d.text, format!("--- a\n+++ b\n{hunk}"));
    }

    #[test]
    fn e6_long_line_jumps_land_where_finding_each_break_does() {
        // Lines of 0..300 bytes, so jumps cross the 4 KB counting pieces at every offset.
        let text: String = (0..3000).map(|i| format!("{}\n", "x".repeat(i * 37 % 300))).collect::<String>() + "tail";
        let b = text.as_bytes();
        let naive = |mut at: usize, n: usize| {
            for _ in 0..n {
                at = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |k| at + k + 1);
            }
            at
        };
        for at in [0, 1, 150, 4095, 4096, 100_000, b.len() - 3, b.len()] {
            for n in [0, 1, 3, 4, 5, 17, 64, 999, 2999, 3000, 3001, 5000] {
                assert_eq!(skip_lines(b, at, n), naive(at, n), "from {at}, {n} lines");
            }
        }
    }

    #[test]
    fn e6_whole_file_rewrite_over_the_cap_is_one_hunk_between_the_shared_lines() {
        let cfg = || PreviewConfig::with_limit(1 << 30).without_spool();
        let old: String = (0..120_000).map(|i| format!("line {i}\n")).collect();
        // The first and last 1000 lines kept, the 118 000 between rewritten.
        let new: String = (0..120_000)
            .map(|i| if (1000..119_000).contains(&i) { format!("row {i}\n") } else { format!("line {i}\n") })
            .collect();
        let span = Span { old: 0..old.len(), new: 0..new.len() };
        let d = unified_spans(&old, &new, &[span], "a", "b", cfg());
        assert_eq!(patch_back(&old, &d.text), new);
        assert_eq!((d.added, d.removed), (118_000, 118_000));
        assert_eq!(d.text.matches("\n@@ ").count(), 1, "one hunk");
        assert!(d.text.contains("@@ -998,118006 +998,118006 @@\n line 997\n"), "{}", &d.text[..200]);
    }

    #[test]
    fn e6_large_rewrites_with_and_without_shared_lines_give_exact_diffs() {
        let cfg = || PreviewConfig::with_limit(1 << 30).without_spool();
        let old: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        // Every third line kept: the block diff must find them.
        let new: String =
            (0..3000).map(|i| if i % 3 == 0 { format!("line {i}\n") } else { format!("row {i}\n") }).collect();
        let d = unified_with(&old, &new, "a", "b", cfg());
        assert_eq!(patch_back(&old, &d.text), new);
        assert_eq!((d.added, d.removed), (2000, 2000));
        // Same length and the same 16 bytes at both ends, yet no line shared: one replacement.
        let pad = "p".repeat(16);
        let old: String = (0..3000).map(|i| format!("{pad}x{i:05}{pad}\n")).collect();
        let new: String = (0..3000).map(|i| format!("{pad}y{i:05}{pad}\n")).collect();
        let d = unified_with(&old, &new, "a", "b", cfg());
        assert_eq!(patch_back(&old, &d.text), new);
        assert_eq!((d.added, d.removed), (3000, 3000));
    }

    #[test]
    fn g9_huge_diff_is_cut_with_head_tail_and_saved_in_full() {
        let dir = tempfile::tempdir().unwrap();
        let old: String = (0..20_000).map(|i| format!("old line {i}\n")).collect();
        let new: String = (0..20_000).map(|i| format!("new line {i}\n")).collect();
        let d = unified_with(&old, &new, "a/f", "b/f", PreviewConfig::with_limit(4096).spool_in(dir.path()));
        assert!(d.text.contains("omitted"), "{}", &d.text[..200]);
        assert_eq!((d.added, d.removed), (20_000, 20_000));
        let full = std::fs::read_to_string(d.full_output.unwrap()).unwrap();
        assert!(full.contains("-old line 19999\n") && full.contains("+new line 0\n"));
    }
}
