//! The matching cascade shared by `edit_file`, `apply_patch` and `edit_notebook` (E1, E7, E8, E11).
//!
//! Stages run in order and a later stage runs only when the earlier ones found nothing:
//! exact → line-ending-insensitive → typographic normalisation → whitespace/indentation-tolerant
//! lines → bounded fuzzy lines. Every stage demands exactly one match; two or more is an
//! ambiguity error listing the candidates' line numbers, never a guess.
//!
//! The lenient stages work on normalised copies with offset maps back into the original text,
//! so a match always replaces an exact byte range of the file. The line stages and the fuzzy
//! stage charge every comparison to a fixed [`Budget`], so neither a 10 MB file nor a
//! pathological `old_string` can make a call slow.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

/// Which stage of the cascade matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Byte-for-byte.
    Exact,
    /// Equal once `\r\n` and `\n` are treated alike.
    LineEndings,
    /// Equal once curly quotes, dashes and Unicode spaces are treated as their ASCII forms (E7).
    Typography,
    /// Whole lines equal once indentation and runs of whitespace are ignored (E8).
    Whitespace,
    /// Whole lines nearly equal (bounded fuzzy recovery, E8).
    Fuzzy,
}

impl Stage {
    /// The snake_case name used in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::LineEndings => "line_endings",
            Self::Typography => "typography",
            Self::Whitespace => "whitespace",
            Self::Fuzzy => "fuzzy",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Work units the line stages and the fuzzy stage may spend on one search. One unit is about
/// one line comparison or one cell of an edit-distance table; 40 M units is tens of
/// milliseconds.
pub const DEFAULT_BUDGET: u64 = 40_000_000;

/// How many candidate places an ambiguity error lists.
const MAX_CANDIDATES: usize = 10;

/// Minimum mean line similarity for a fuzzy match.
const FUZZY_ACCEPT: f64 = 0.88;
/// A second fuzzy window this close to the best makes the match ambiguous.
const FUZZY_AMBIGUITY_MARGIN: f64 = 0.04;
/// Windows scored by the fuzzy stage at most.
const FUZZY_MAX_WINDOWS: usize = 48;
/// Characters of a line compared by edit distance at most.
const FUZZY_MAX_LINE_CHARS: usize = 256;

/// A fixed amount of work a search may do.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    remaining: u64,
    exhausted: bool,
}

impl Budget {
    /// A budget of `units`.
    pub fn new(units: u64) -> Self {
        Self { remaining: units, exhausted: false }
    }

    /// Spends `units`; `false` once the budget is gone.
    fn spend(&mut self, units: u64) -> bool {
        if self.remaining >= units {
            self.remaining -= units;
            true
        } else {
            self.remaining = 0;
            self.exhausted = true;
            false
        }
    }

    /// Whether some search stopped early because the budget ran out.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

/// Why an `old_string` could not be placed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MatchError {
    /// `old_string` was empty.
    #[error(
        "old_string is empty, which only a file with no content takes (the edit then gives it its content); \
         copy the text to replace from the file (to add text, include a neighbouring line in old_string and \
         repeat it in new_string; to create a new file use create_file)"
    )]
    EmptyOld,
    /// `new_string` equals `old_string`.
    #[error("new_string is identical to old_string, so this edit would change nothing; give the changed text")]
    Unchanged,
    /// More than one place matched in the first stage that matched at all.
    #[error(
        "old_string matches {count}{more} places ({how}) at lines {lines}; the file was not changed — \
         add more surrounding lines to old_string so it points at exactly one place (re-read the file if unsure)",
        count = .lines.len(),
        more = if *.more { "+" } else { "" },
        how = stage_words(*.stage),
        lines = join_lines(.lines)
    )]
    Ambiguous {
        /// The stage that found several places.
        stage: Stage,
        /// 1-based first lines of the candidates (at most 10).
        lines: Vec<usize>,
        /// Whether there were more than listed.
        more: bool,
    },
    /// Nothing matched; `hint` shows the nearest candidate and what differs.
    #[error(
        "old_string was not found in the file; the file was not changed. {hint}\nRead the file again \
         (read_file) and copy old_string exactly from its current content before retrying."
    )]
    NotFound {
        /// The nearest candidate region and the differences, worded for the model.
        hint: String,
    },
}

fn stage_words(stage: Stage) -> &'static str {
    match stage {
        Stage::Exact => "exactly",
        Stage::LineEndings => "ignoring line endings",
        Stage::Typography => "ignoring typographic quotes, dashes and spaces",
        Stage::Whitespace => "ignoring indentation and whitespace",
        Stage::Fuzzy => "approximately",
    }
}

fn join_lines(lines: &[usize]) -> String {
    lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ")
}

/// One placed replacement: bytes `start..end` of the text become `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement {
    /// Start byte of the replaced range.
    pub start: usize,
    /// End byte (exclusive) of the replaced range.
    pub end: usize,
    /// The replacement, adapted to the file's line endings (and, for lenient stages, its
    /// indentation and typography where that is unambiguous).
    pub text: String,
    /// The stage that matched.
    pub stage: Stage,
    /// For the fuzzy stage: the mean line similarity of the match (0..1).
    pub similarity: Option<f64>,
}

/// Finds the one place `old` points at in `text` and returns how to replace it with `new`.
pub fn replace_unique(text: &str, old: &str, new: &str, budget: &mut Budget) -> Result<Replacement, MatchError> {
    if old.is_empty() {
        // A file with nothing (or only blank lines) in it has no text to quote: an empty
        // old_string gives it its content, as Claude Code's Edit does. Otherwise an empty
        // __init__.py could be filled by no tool (create_file never overwrites).
        if text.trim().is_empty() && new != text {
            // A blank file with CRLF line breaks keeps them.
            let new =
                if text.contains("\r\n") { new.replace("\r\n", "\n").replace('\n', "\r\n") } else { new.to_string() };
            return Ok(Replacement { start: 0, end: text.len(), text: new, stage: Stage::Exact, similarity: None });
        }
        return Err(if text.is_empty() { MatchError::Unchanged } else { MatchError::EmptyOld });
    }
    if old == new {
        return Err(MatchError::Unchanged);
    }
    // Stage 1: exact.
    let hits = find_all(text, old, MAX_CANDIDATES + 1);
    if let Some(r) = single(text, &hits, Stage::Exact)? {
        let end = r + old.len();
        return Ok(Replacement {
            start: r,
            end,
            text: with_endings(new, ending_for(text, r, end)),
            stage: Stage::Exact,
            similarity: None,
        });
    }
    // Stages 2 and 3: normalised substring search with an offset map.
    for (stage, typo) in [(Stage::LineEndings, false), (Stage::Typography, true)] {
        let (nt, t_changed) = Norm::of(text, typo);
        let (no, o_changed) = Norm::of(old, typo);
        if !t_changed && !o_changed {
            continue;
        }
        if stage == Stage::Typography && !nt.typo && !no.typo {
            continue;
        }
        let nhits = find_all(&nt.text, &no.text, MAX_CANDIDATES + 1);
        let hits: Vec<usize> = nhits.iter().map(|&p| nt.map(p)).collect();
        if let Some(start) = single(text, &hits, stage)? {
            let Some(&np) = nhits.first() else { continue };
            let end = nt.map(np + no.text.len());
            let ending = ending_for(text, start, end);
            let adapted = if stage == Stage::Typography {
                keep_typography(&text[start..end], old, new).unwrap_or_else(|| new.to_string())
            } else {
                new.to_string()
            };
            return Ok(Replacement { start, end, text: with_endings(&adapted, ending), stage, similarity: None });
        }
    }
    // Stages 4 and 5: whole lines.
    let lines = LineIndex::new(text);
    let pat = Pattern::new(old);
    if pat.core.is_empty() {
        return Err(MatchError::NotFound { hint: "old_string holds only blank lines.".into() });
    }
    let hashes = lines.hashes(text, Level::Whitespace);
    let found = find_line_seq(&lines, text, &hashes, &pat.core_refs(), 0..lines.len(), Level::Whitespace, budget);
    if found.len() > 1 {
        return Err(MatchError::Ambiguous {
            stage: Stage::Whitespace,
            lines: found.iter().take(MAX_CANDIDATES).map(|i| i + 1).collect(),
            more: found.len() > MAX_CANDIDATES,
        });
    }
    if let Some(&i) = found.first() {
        return Ok(lines_replacement(text, &lines, i, &pat, new, Stage::Whitespace, None));
    }
    let fuzzy = fuzzy_search(&lines, text, &hashes, &pat.core_refs(), 0..lines.len(), budget);
    match fuzzy.verdict() {
        FuzzyVerdict::Unique(w) if drift_only_in_kept_lines(text, &lines, w.start, &pat, new) => {
            Ok(lines_replacement(text, &lines, w.start, &pat, new, Stage::Fuzzy, Some(w.score)))
        }
        FuzzyVerdict::Unique(w) => Err(MatchError::NotFound {
            hint: format!(
                "{} The lines that differ are lines your edit changes, so it would be built on text the file \
                 does not have.",
                nearest_hint(text, &lines, &pat.core_refs(), Some(w), old, budget)
            ),
        }),
        FuzzyVerdict::Ambiguous(starts) => Err(MatchError::Ambiguous {
            stage: Stage::Fuzzy,
            lines: starts.iter().map(|s| s + 1).collect(),
            more: false,
        }),
        FuzzyVerdict::None => {
            Err(MatchError::NotFound { hint: nearest_hint(text, &lines, &pat.core_refs(), fuzzy.best(), old, budget) })
        }
    }
}

/// Start offsets of `needle` in `hay`, overlapping ones included, at most `cap`.
pub fn find_all(hay: &str, needle: &str, cap: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if needle.is_empty() {
        return out;
    }
    let bytes = hay.as_bytes();
    if needle.len() > bytes.len() {
        return out;
    }
    // A needle almost as long as the text (a whole-file replacement) fits at only a few
    // offsets: comparing there is linear, while building a searcher for it is not cheap.
    let slack = bytes.len() - needle.len();
    if slack < 64 {
        for p in 0..=slack {
            if &bytes[p..p + needle.len()] == needle.as_bytes() {
                out.push(p);
                if out.len() >= cap {
                    break;
                }
            }
        }
        return out;
    }
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut from = 0;
    while from <= bytes.len() && out.len() < cap {
        match finder.find(&bytes[from..]) {
            Some(p) => {
                out.push(from + p);
                from += p + 1;
            }
            None => break,
        }
    }
    out
}

/// Number of `\n` bytes in `b`.
pub fn count_newlines(b: &[u8]) -> usize {
    // Counted in byte-wide lanes over 255-byte pieces (the most a u8 can count), which the
    // compiler vectorizes: several times faster than finding each break when lines are short.
    b.chunks(255).map(|piece| piece.iter().fold(0u8, |n, &x| n + u8::from(x == b'\n')) as usize).sum()
}

/// `Ok(None)` for no hit, the one hit, or an ambiguity error.
fn single(text: &str, hits: &[usize], stage: Stage) -> Result<Option<usize>, MatchError> {
    match hits {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => {
            let mut lines = Vec::new();
            let mut line = 1;
            let mut at = 0;
            for &h in many.iter().take(MAX_CANDIDATES) {
                line += count_newlines(&text.as_bytes()[at..h]);
                at = h;
                lines.push(line);
            }
            Err(MatchError::Ambiguous { stage, lines, more: many.len() > MAX_CANDIDATES })
        }
    }
}

/// The line break a replacement of `start..end` should use: the region's own, else the one
/// ending the line it sits on, else `\n`.
pub fn ending_for(text: &str, start: usize, end: usize) -> &'static str {
    let b = text.as_bytes();
    let region = &b[start..end];
    // No `\r` in or just before the region: every break in it is `\n`. One SIMD scan instead of
    // visiting each break (a whole-file region has hundreds of thousands).
    if memchr::memchr(b'\r', &b[start.saturating_sub(1)..end]).is_none() && memchr::memchr(b'\n', region).is_some() {
        return "\n";
    }
    let (mut crlf, mut lf) = (0usize, 0usize);
    for i in memchr::memchr_iter(b'\n', region) {
        let abs = start + i;
        if abs > 0 && b[abs - 1] == b'\r' { crlf += 1 } else { lf += 1 }
    }
    if crlf + lf > 0 {
        return if crlf >= lf { "\r\n" } else { "\n" };
    }
    if let Some(i) = memchr::memchr(b'\n', &b[end..]) {
        let abs = end + i;
        return if abs > 0 && b[abs - 1] == b'\r' { "\r\n" } else { "\n" };
    }
    if let Some(i) = memchr::memrchr(b'\n', &b[..start]) {
        return if i > 0 && b[i - 1] == b'\r' { "\r\n" } else { "\n" };
    }
    "\n"
}

/// `s` with every line break written as `ending`.
pub fn with_endings(s: &str, ending: &str) -> String {
    if !s.contains('\n') {
        return s.to_string();
    }
    let unified = if s.contains('\r') { s.replace("\r\n", "\n") } else { s.to_string() };
    if ending == "\n" { unified } else { unified.replace('\n', ending) }
}

/// The ASCII form of a typographic character (E7), one character for one.
pub fn typo_char(c: char) -> Option<char> {
    Some(match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}' | '\u{00BB}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        _ => return None,
    })
}

/// A normalised copy of a text with a map back to original byte offsets.
struct Norm<'a> {
    text: std::borrow::Cow<'a, str>,
    /// `(normalised offset after a shrunk character, total bytes dropped up to there)`.
    marks: Vec<(usize, usize)>,
    /// Whether a typographic character was replaced.
    typo: bool,
}

impl<'a> Norm<'a> {
    /// Normalises `\r\n` to `\n` and, when `typo`, typographic characters to ASCII. The flag
    /// says whether anything changed.
    fn of(s: &'a str, typo: bool) -> (Self, bool) {
        let needs = s.as_bytes().iter().any(|&b| b == b'\r' || (typo && b >= 0x80));
        if !needs {
            // Nothing to normalise: no copy (a 10 MB file would cost one per stage).
            return (Self { text: std::borrow::Cow::Borrowed(s), marks: Vec::new(), typo: false }, false);
        }
        let mut text = String::with_capacity(s.len());
        let mut marks = Vec::new();
        let mut dropped = 0usize;
        let mut saw_typo = false;
        let bytes = s.as_bytes();
        for (i, c) in s.char_indices() {
            if c == '\r' && bytes.get(i + 1) == Some(&b'\n') {
                dropped += 1;
                continue;
            }
            if c == '\n' && i > 0 && bytes[i - 1] == b'\r' {
                text.push('\n');
                marks.push((text.len(), dropped));
                continue;
            }
            if typo && let Some(r) = typo_char(c) {
                saw_typo = true;
                text.push(r);
                dropped += c.len_utf8() - 1;
                if c.len_utf8() > 1 {
                    marks.push((text.len(), dropped));
                }
                continue;
            }
            text.push(c);
        }
        let changed = dropped > 0 || saw_typo;
        (Self { text: std::borrow::Cow::Owned(text), marks, typo: saw_typo }, changed)
    }

    /// The original byte offset of normalised offset `pos`.
    fn map(&self, pos: usize) -> usize {
        let i = self.marks.partition_point(|m| m.0 <= pos);
        if i == 0 { pos } else { pos + self.marks[i - 1].1 }
    }
}

/// Keeps the file's typography in the unchanged parts of `new` (stage 3): characters `new`
/// shares with `old` are taken from the matched file text, inserted ones stay as typed.
fn keep_typography(region: &str, old: &str, new: &str) -> Option<String> {
    let region_lf: Vec<char> = region.replace("\r\n", "\n").chars().collect();
    let old_lf: Vec<char> = old.replace("\r\n", "\n").chars().collect();
    let new_lf: Vec<char> = new.replace("\r\n", "\n").chars().collect();
    if region_lf.len() != old_lf.len() || old_lf.len() > 20_000 || new_lf.len() > 20_000 {
        return None;
    }
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &old_lf,
        &new_lf,
        Some(std::time::Instant::now() + std::time::Duration::from_millis(50)),
    );
    let mut out = String::with_capacity(new.len());
    for op in ops {
        match op {
            similar::DiffOp::Equal { old_index, len, .. } => out.extend(&region_lf[old_index..old_index + len]),
            similar::DiffOp::Delete { .. } => {}
            similar::DiffOp::Insert { new_index, new_len, .. }
            | similar::DiffOp::Replace { new_index, new_len, .. } => {
                out.extend(&new_lf[new_index..new_index + new_len])
            }
        }
    }
    Some(out)
}

/// How strictly two lines are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Content equal (line endings never count).
    Exact,
    /// Equal after typographic normalisation.
    Typography,
    /// Equal after typographic normalisation, trimming and collapsing whitespace runs.
    Whitespace,
}

/// The key characters of a line at `level`.
pub fn line_key(line: &str, level: Level) -> String {
    let mut out = String::with_capacity(line.len());
    match level {
        Level::Exact => out.push_str(line),
        Level::Typography => out.extend(line.chars().map(|c| typo_char(c).unwrap_or(c))),
        Level::Whitespace => {
            let mut pending = false;
            for c in line.chars() {
                let c = typo_char(c).unwrap_or(c);
                if c.is_whitespace() {
                    pending = !out.is_empty();
                } else {
                    if pending {
                        out.push(' ');
                        pending = false;
                    }
                    out.push(c);
                }
            }
        }
    }
    out
}

fn hash_key(line: &str, level: Level) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |c: char| h = (h.rotate_left(5) ^ c as u64).wrapping_mul(K);
    match level {
        Level::Exact if line.is_ascii() => {
            for &b in line.as_bytes() {
                mix(b as char);
            }
        }
        Level::Exact => line.chars().for_each(&mut mix),
        Level::Typography => line.chars().for_each(|c| mix(typo_char(c).unwrap_or(c))),
        Level::Whitespace if line.is_ascii() => {
            // The same as below without decoding: ASCII has no typographic characters.
            let (mut pending, mut any) = (false, false);
            for &b in line.as_bytes() {
                let c = b as char;
                if c.is_whitespace() {
                    pending = any;
                } else {
                    if pending {
                        mix(' ');
                        pending = false;
                    }
                    any = true;
                    mix(c);
                }
            }
        }
        Level::Whitespace => {
            let (mut pending, mut any) = (false, false);
            for c in line.chars() {
                let c = typo_char(c).unwrap_or(c);
                if c.is_whitespace() {
                    pending = any;
                } else {
                    if pending {
                        mix(' ');
                        pending = false;
                    }
                    any = true;
                    mix(c);
                }
            }
        }
    }
    h
}

/// Where each line of a text starts and ends.
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// `(start, content_end, end)`: content excludes the line break, `end` includes it.
    spans: Vec<(usize, usize, usize)>,
}

impl LineIndex {
    /// Indexes `text`. A final line without a break counts; an empty text has no lines.
    pub fn new(text: &str) -> Self {
        let b = text.as_bytes();
        let mut spans = Vec::with_capacity(b.len() / 40 + 1);
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', b) {
            let content_end = if nl > start && b[nl - 1] == b'\r' { nl - 1 } else { nl };
            spans.push((start, content_end, nl + 1));
            start = nl + 1;
        }
        if start < b.len() {
            spans.push((start, b.len(), b.len()));
        }
        Self { spans }
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no lines.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Content of line `i` (0-based) without its break.
    pub fn line<'t>(&self, text: &'t str, i: usize) -> &'t str {
        let (s, e, _) = self.spans[i];
        &text[s..e]
    }

    /// Byte where line `i` starts (`text.len()` past the end).
    pub fn start(&self, i: usize, text: &str) -> usize {
        self.spans.get(i).map_or(text.len(), |s| s.0)
    }

    /// Byte where line `i`'s content ends.
    pub fn content_end(&self, i: usize) -> usize {
        self.spans[i].1
    }

    /// Byte after line `i`'s break.
    pub fn end(&self, i: usize) -> usize {
        self.spans[i].2
    }

    /// The break ending line `i` (`""` for a last line without one).
    pub fn terminator<'t>(&self, text: &'t str, i: usize) -> &'t str {
        let (_, ce, e) = self.spans[i];
        &text[ce..e]
    }

    /// A hash of every line's key at `level`.
    pub fn hashes(&self, text: &str, level: Level) -> Vec<u64> {
        self.spans.iter().map(|&(s, e, _)| hash_key(&text[s..e], level)).collect()
    }
}

/// Starts of the runs of lines in `range` whose keys at `level` equal `pat`'s (at most 11).
pub fn find_line_seq(
    lines: &LineIndex,
    text: &str,
    hashes: &[u64],
    pat: &[&str],
    range: std::ops::Range<usize>,
    level: Level,
    budget: &mut Budget,
) -> Vec<usize> {
    let k = pat.len();
    let mut out = Vec::new();
    if k == 0 || range.end < range.start || range.end - range.start < k {
        return out;
    }
    let ph: Vec<u64> = pat.iter().map(|l| hash_key(l, level)).collect();
    let keys: Vec<String> = pat.iter().map(|l| line_key(l, level)).collect();
    for i in range.start..=range.end - k {
        if !budget.spend(1) {
            break;
        }
        if hashes[i] != ph[0] {
            continue;
        }
        let mut ok = true;
        for j in 1..k {
            if !budget.spend(1) || hashes[i + j] != ph[j] {
                ok = false;
                break;
            }
        }
        if ok && (0..k).all(|j| line_key(lines.line(text, i + j), level) == keys[j]) {
            out.push(i);
            if out.len() > MAX_CANDIDATES {
                break;
            }
        }
    }
    out
}

/// `old` split into lines, with its blank first and last lines set aside.
pub(crate) struct Pattern {
    /// Every line of `old` (`\r` stripped); a trailing break gives a last empty line.
    raw: Vec<String>,
    /// Index in `raw` of the first core line.
    first: usize,
    /// The lines between the blank edges.
    core: Vec<String>,
}

impl Pattern {
    pub(crate) fn new(old: &str) -> Self {
        let raw: Vec<String> = old.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect();
        let first = raw.iter().position(|l| !l.trim().is_empty()).unwrap_or(raw.len());
        let last = raw.iter().rposition(|l| !l.trim().is_empty()).map_or(first, |p| p + 1);
        let core = raw[first..last.max(first)].to_vec();
        Self { raw, first, core }
    }

    pub(crate) fn core_refs(&self) -> Vec<&str> {
        self.core.iter().map(String::as_str).collect()
    }
}

fn leading_ws(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// How to turn the model's indentation into the file's, learnt from matched line pairs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reindent {
    /// Keep as typed.
    Keep,
    /// Put this before every non-blank line.
    Add(String),
    /// Remove this from the start of every line that has it.
    Remove(String),
    /// The model indents with another unit than the file (spaces for the file's tabs, two
    /// spaces for its four): each line's depth in the model's unit, shifted by `shift` levels,
    /// is written in the file's unit (E8).
    Convert {
        /// The model's unit.
        from: IndentUnit,
        /// The file's unit.
        to: IndentUnit,
        /// Levels the file's lines are deeper (or, negative, shallower) than the model's.
        shift: isize,
    },
    /// No one rule explains every pair, but each indentation of the model's is always the same
    /// one of the file's: a tab file's continuation line (`\t    b)`, a level and alignment) the
    /// model typed as eight spaces next to its four for `\t`. A line indented as one of the
    /// model's is written with the file's; other lines follow `rest`, learnt from the pairs
    /// without such alignment.
    Known {
        /// The model's indentations and the file's for each.
        table: Vec<(String, String)>,
        /// The rule for indentations not in `table`.
        rest: Box<Reindent>,
    },
}

/// One level of indentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndentUnit {
    /// A tab.
    Tab,
    /// This many spaces.
    Spaces(usize),
}

impl IndentUnit {
    /// `indent` as whole levels and the spaces left over (alignment), or `None` when it is not
    /// written in this unit (a tab among space levels, a space before a tab).
    fn levels(self, indent: &str) -> Option<(usize, usize)> {
        match self {
            IndentUnit::Tab => {
                let tabs = indent.len() - indent.trim_start_matches('\t').len();
                let rest = &indent[tabs..];
                rest.bytes().all(|b| b == b' ').then_some((tabs, rest.len()))
            }
            IndentUnit::Spaces(w) => indent.bytes().all(|b| b == b' ').then_some((indent.len() / w, indent.len() % w)),
        }
    }

    fn write(self, levels: usize, align: usize) -> String {
        match self {
            IndentUnit::Tab => format!("{}{}", "\t".repeat(levels), " ".repeat(align)),
            IndentUnit::Spaces(w) => " ".repeat(levels * w + align),
        }
    }

    /// The units `indents` may be written in, likeliest first: tabs when any starts with one,
    /// else the widths of space indentation programmers use.
    fn candidates<'a>(indents: impl Iterator<Item = &'a str>) -> Vec<IndentUnit> {
        let mut gcd = 0usize;
        for i in indents {
            if i.starts_with('\t') {
                return vec![IndentUnit::Tab];
            }
            gcd = num_gcd(gcd, i.len());
        }
        let mut out = Vec::new();
        for w in [gcd, 4, 2, 8, 3] {
            if (1..=8).contains(&w) && !out.contains(&IndentUnit::Spaces(w)) {
                out.push(IndentUnit::Spaces(w));
            }
        }
        out
    }
}

fn num_gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { num_gcd(b, a % b) }
}

impl Reindent {
    /// The one rule that turns every `old` indentation into its paired `file` one, if any.
    pub(crate) fn learn<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        let indents = pairs
            .filter(|(old, file)| !old.trim().is_empty() && !file.trim().is_empty())
            .map(|(old, file)| (leading_ws(old), leading_ws(file)));
        if let Some(rule) = Self::by_prefix(indents.clone()) {
            return rule;
        }
        Self::by_unit(indents.clone()).or_else(|| Self::by_table(indents)).unwrap_or(Reindent::Keep)
    }

    /// [`Reindent::Known`], when each of the model's indentations pairs with one of the file's.
    fn by_table<'a>(indents: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Option<Self> {
        let mut table: Vec<(String, String)> = Vec::new();
        for (oi, fi) in indents.clone() {
            match table.iter().find(|(o, _)| o == oi) {
                Some((_, f)) if f != fi => return None,
                Some(_) => {}
                None => table.push((oi.to_string(), fi.to_string())),
            }
        }
        // Alignment after a tab is what no unit rule can write; the other pairs may have one.
        let plain = indents.filter(|(_, fi)| !fi.contains("\t "));
        let rest = Self::by_prefix(plain.clone()).or_else(|| Self::by_unit(plain)).unwrap_or(Reindent::Keep);
        Some(Reindent::Known { table, rest: Box::new(rest) })
    }

    /// One prefix added to (or removed from) every line, when that explains every pair.
    fn by_prefix<'a>(indents: impl Iterator<Item = (&'a str, &'a str)>) -> Option<Self> {
        let mut rule: Option<Reindent> = None;
        for (oi, fi) in indents {
            let this = if oi == fi {
                Reindent::Keep
            } else if let Some(p) = fi.strip_suffix(oi) {
                Reindent::Add(p.to_string())
            } else if let Some(q) = oi.strip_suffix(fi) {
                Reindent::Remove(q.to_string())
            } else {
                return None;
            };
            match &rule {
                None => rule = Some(this),
                Some(r) if *r == this => {}
                Some(_) => return None,
            }
        }
        Some(rule.unwrap_or(Reindent::Keep))
    }

    /// A change of unit that explains every pair: same depth (or the same shift of depth) and
    /// the same alignment spaces. The same depth is preferred, as the model nests the code as
    /// the file does and only spells the levels differently.
    fn by_unit<'a>(indents: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Option<Self> {
        let from_units = IndentUnit::candidates(indents.clone().map(|(o, _)| o));
        let to_units = IndentUnit::candidates(indents.clone().map(|(_, f)| f));
        let mut found: Option<Self> = None;
        for &from in &from_units {
            for &to in &to_units {
                let mut shift: Option<isize> = None;
                let fits = indents.clone().all(|(oi, fi)| match (from.levels(oi), to.levels(fi)) {
                    (Some((lo, ao)), Some((lf, af))) if ao == af => {
                        let d = lf as isize - lo as isize;
                        *shift.get_or_insert(d) == d
                    }
                    _ => false,
                });
                let Some(shift) = shift.filter(|_| fits) else { continue };
                let rule = Reindent::Convert { from, to, shift };
                if shift == 0 {
                    return Some(rule);
                }
                found.get_or_insert(rule);
            }
        }
        found
    }

    pub(crate) fn apply(&self, line: &str) -> String {
        match self {
            Reindent::Keep => line.to_string(),
            Reindent::Add(p) if !line.trim().is_empty() => format!("{p}{line}"),
            Reindent::Add(_) => line.to_string(),
            Reindent::Remove(q) => line.strip_prefix(q.as_str()).unwrap_or(line).to_string(),
            Reindent::Convert { from, to, shift } => {
                let indent = leading_ws(line);
                if line.trim().is_empty() {
                    return line.to_string();
                }
                match from.levels(indent) {
                    Some((levels, align)) => {
                        let levels = (levels as isize + shift).max(0) as usize;
                        format!("{}{}", to.write(levels, align), &line[indent.len()..])
                    }
                    // Not written in the model's unit: as typed.
                    None => line.to_string(),
                }
            }
            Reindent::Known { table, rest } => {
                let indent = leading_ws(line);
                match table.iter().find(|(o, _)| o == indent).filter(|_| !line.trim().is_empty()) {
                    Some((_, file)) => format!("{file}{}", &line[indent.len()..]),
                    None => rest.apply(line),
                }
            }
        }
    }
}

/// The replacement of whole lines `i..i+core` for a line-stage match: lines `new` keeps from
/// `old` are taken verbatim from the file, other lines are re-indented the way the file is.
fn lines_replacement(
    text: &str,
    lines: &LineIndex,
    i: usize,
    pat: &Pattern,
    new: &str,
    stage: Stage,
    similarity: Option<f64>,
) -> Replacement {
    let k = pat.core.len();
    let start = lines.start(i, text);
    let end = lines.content_end(i + k - 1);
    let ending = ending_for(text, start, lines.end(i + k - 1));
    let file_line = |j: usize| lines.line(text, i + j);
    let reindent = Reindent::learn((0..k).map(|j| (pat.core[j].as_str(), file_line(j))));
    let new_raw: Vec<&str> = new.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let old_raw: Vec<&str> = pat.raw.iter().map(String::as_str).collect();
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &old_raw,
        &new_raw,
        Some(std::time::Instant::now() + std::time::Duration::from_millis(100)),
    );
    let mut out: Vec<String> = Vec::with_capacity(new_raw.len());
    let in_core = |j: usize| j >= pat.first && j < pat.first + k;
    for op in ops {
        match op {
            similar::DiffOp::Equal { old_index, len, .. } => {
                for d in 0..len {
                    let j = old_index + d;
                    // Blank edge lines of old_string lie outside the replaced lines.
                    if in_core(j) {
                        out.push(file_line(j - pat.first).to_string());
                    }
                }
            }
            similar::DiffOp::Delete { .. } => {}
            similar::DiffOp::Insert { new_index, new_len, .. }
            | similar::DiffOp::Replace { new_index, new_len, .. } => {
                for l in &new_raw[new_index..new_index + new_len] {
                    out.push(reindent.apply(l));
                }
            }
        }
    }
    Replacement { start, end, text: out.join(ending), stage, similarity }
}

/// The fuzzy stage only forgives drift in lines `new` keeps as they are (context); a line the
/// edit changes or deletes must be in the file as the model believes it is.
fn drift_only_in_kept_lines(text: &str, lines: &LineIndex, start: usize, pat: &Pattern, new: &str) -> bool {
    let new_raw: Vec<&str> = new.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let old_raw: Vec<&str> = pat.raw.iter().map(String::as_str).collect();
    let ops = similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        &old_raw,
        &new_raw,
        Some(std::time::Instant::now() + std::time::Duration::from_millis(100)),
    );
    let mut kept = vec![false; old_raw.len()];
    for op in ops {
        if let similar::DiffOp::Equal { old_index, len, .. } = op {
            kept[old_index..old_index + len].iter_mut().for_each(|k| *k = true);
        }
    }
    (0..pat.core.len()).all(|j| {
        kept[pat.first + j]
            || line_key(lines.line(text, start + j), Level::Whitespace) == line_key(&pat.core[j], Level::Whitespace)
    })
}

/// One scored fuzzy window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub(crate) start: usize,
    pub(crate) score: f64,
}

pub(crate) struct FuzzyResult {
    windows: Vec<Window>,
    k: usize,
    eligible: bool,
}

pub(crate) enum FuzzyVerdict {
    Unique(Window),
    Ambiguous(Vec<usize>),
    None,
}

impl FuzzyResult {
    pub(crate) fn best(&self) -> Option<Window> {
        self.windows.first().copied()
    }

    pub(crate) fn verdict(&self) -> FuzzyVerdict {
        let Some(best) = self.best() else { return FuzzyVerdict::None };
        if !self.eligible || best.score < FUZZY_ACCEPT {
            return FuzzyVerdict::None;
        }
        let rivals: Vec<usize> = self
            .windows
            .iter()
            .skip(1)
            .filter(|w| w.start.abs_diff(best.start) >= self.k && w.score >= best.score - FUZZY_AMBIGUITY_MARGIN)
            .map(|w| w.start)
            .collect();
        if rivals.is_empty() {
            FuzzyVerdict::Unique(best)
        } else {
            let mut all = vec![best.start];
            all.extend(rivals.into_iter().take(MAX_CANDIDATES - 1));
            FuzzyVerdict::Ambiguous(all)
        }
    }
}

/// Bounded fuzzy line matching: windows are seeded by lines that match at the whitespace
/// level, then the best-voted windows are scored by per-line edit distance.
pub(crate) fn fuzzy_search(
    lines: &LineIndex,
    text: &str,
    hashes: &[u64],
    pat: &[&str],
    range: std::ops::Range<usize>,
    budget: &mut Budget,
) -> FuzzyResult {
    let k = pat.len();
    let nonblank = pat.iter().filter(|l| !l.trim().is_empty()).count();
    let mut result = FuzzyResult { windows: Vec::new(), k, eligible: nonblank >= 3 };
    if k == 0 || range.end < range.start || range.end - range.start < k {
        return result;
    }
    let keys: Vec<String> = pat.iter().map(|l| line_key(l, Level::Whitespace)).collect();
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    for (j, key) in keys.iter().enumerate() {
        // Very short lines (`}`, `end`) are everywhere and would only add noise.
        if key.chars().count() >= 4 {
            by_hash.entry(hash_key(pat[j], Level::Whitespace)).or_default().push(j);
        }
    }
    // A line repeated all over old_string says nothing about where it is.
    by_hash.retain(|_, js| js.len() <= 8);
    let mut votes: HashMap<usize, u32> = HashMap::new();
    let last_start = range.end - k;
    for i in range.clone() {
        if !budget.spend(1) {
            break;
        }
        if let Some(js) = by_hash.get(&hashes[i]) {
            if !budget.spend(js.len() as u64) {
                break;
            }
            for &j in js {
                if i >= j + range.start && i - j <= last_start {
                    *votes.entry(i - j).or_default() += 1;
                }
            }
        }
    }
    let mut seeds: Vec<(usize, u32)> = votes.into_iter().collect();
    seeds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    seeds.truncate(FUZZY_MAX_WINDOWS);
    let total_weight: f64 = keys.iter().map(|k| k.chars().count().max(1) as f64).sum();
    for (start, _) in seeds {
        let mut acc = 0.0;
        let mut complete = true;
        for (j, key) in keys.iter().enumerate() {
            let file_key = line_key(lines.line(text, start + j), Level::Whitespace);
            let (a, b) = (clip(&file_key), clip(key));
            let cost = (a.chars().count() as u64 + 1) * (b.chars().count() as u64 + 1);
            if !budget.spend(cost) {
                complete = false;
                break;
            }
            let sim = if a == b { 1.0 } else { strsim::normalized_levenshtein(a, b) };
            acc += sim * key.chars().count().max(1) as f64;
        }
        if !complete {
            break;
        }
        result.windows.push(Window { start, score: acc / total_weight });
    }
    result.windows.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.start.cmp(&b.start)));
    result
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(FUZZY_MAX_LINE_CHARS) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn shorten(s: &str) -> String {
    const MAX: usize = 120;
    let s = s.trim_end();
    if s.chars().count() <= MAX {
        format!("`{s}`")
    } else {
        format!("`{}…`", s.chars().take(MAX).collect::<String>())
    }
}

/// When no line matched even loosely: the window around the first place the longest word of
/// `old` that is in the file occurs, aligned to the pattern line that holds the word. The
/// longest word may be the one mistyped (`stepp` for `step`), so the next longest are tried.
fn token_window(text: &str, lines: &LineIndex, pat: &[&str], old: &str) -> Option<Window> {
    // A few words, each a scan of the file: this only places a hint.
    const TRIED: usize = 8;
    let mut words: Vec<&str> =
        old.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|t| t.chars().count() >= 3).collect();
    words.sort_by_key(|t| std::cmp::Reverse(t.len()));
    words.dedup();
    let (tok, p) = words.into_iter().take(TRIED).find_map(|t| Some((t, *find_all(text, t, 1).first()?)))?;
    let line = memchr::memchr_iter(b'\n', &text.as_bytes()[..p]).count();
    let j = pat.iter().position(|l| l.contains(tok)).unwrap_or(0);
    let k = pat.len();
    if lines.len() < k {
        return None;
    }
    let start = line.saturating_sub(j).min(lines.len() - k);
    // Score a bounded prefix: this only ranks a hint, and old_string may be huge.
    let scored = k.min(40);
    let sim: f64 = (0..scored)
        .map(|i| {
            let (a, b) =
                (line_key(lines.line(text, start + i), Level::Whitespace), line_key(pat[i], Level::Whitespace));
            strsim::normalized_levenshtein(clip(&a), clip(&b))
        })
        .sum::<f64>()
        / scored.max(1) as f64;
    Some(Window { start, score: sim })
}

/// The length of a read_file line-number prefix (`  12→`) at the start of `line`.
fn line_number_prefix(line: &str) -> Option<usize> {
    let t = line.trim_start_matches(' ');
    let rest = t.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < t.len() && rest.starts_with('→')).then(|| line.len() - rest.len() + '→'.len_utf8())
}

/// `pat` without read_file's line-number prefixes, when its first non-blank line has one.
fn without_line_numbers(pat: &[&str]) -> Option<Vec<String>> {
    line_number_prefix(pat.iter().find(|l| !l.trim().is_empty())?)?;
    Some(pat.iter().map(|l| line_number_prefix(l).map_or(*l, |n| &l[n..]).to_string()).collect())
}

/// Whether most of `pat`'s lines that start with a line-number prefix (`2→`) face a line of the
/// file in window `w` that starts with the same prefix: the file's own text, such as a list
/// written `1→2 first step`.
fn prefixes_in_file(text: &str, lines: &LineIndex, pat: &[&str], w: Window) -> bool {
    let prefix = |l: &str| line_number_prefix(l).map(|n| l[..n].trim_start().to_string());
    let (mut prefixed, mut same) = (0, 0);
    for (j, p) in pat.iter().enumerate().filter(|(j, _)| w.start + j < lines.len()) {
        let Some(want) = prefix(p) else { continue };
        prefixed += 1;
        same += usize::from(prefix(lines.line(text, w.start + j)).as_ref() == Some(&want));
    }
    prefixed > 0 && same * 2 > prefixed
}

/// The window where most of `pat`'s non-blank lines are the file's lines at the same offsets,
/// ignoring whitespace; the score is the share of them found. `None` when no line occurs.
/// Catches what the other searches miss: short lines (`b1`) and a pattern too different for
/// the fuzzy search.
fn line_window(text: &str, lines: &LineIndex, pat: &[&str]) -> Option<Window> {
    let k = pat.len();
    let n = lines.len();
    let mut at: HashMap<String, Vec<usize>> = HashMap::new();
    // Votes from a bounded prefix: this only ranks a hint, and old_string may be huge and
    // repetitive (50,000 equal lines would cost that many votes per file line).
    for (j, p) in pat.iter().enumerate().take(40).filter(|(_, p)| !p.trim().is_empty()) {
        at.entry(line_key(p, Level::Whitespace)).or_default().push(j);
    }
    let counted = at.values().map(Vec::len).sum::<usize>();
    if counted == 0 || n < k {
        return None;
    }
    let mut votes: HashMap<usize, usize> = HashMap::new();
    for i in 0..n {
        if let Some(js) = at.get(&line_key(lines.line(text, i), Level::Whitespace)) {
            for &j in js.iter().filter(|&&j| j <= i && i - j + k <= n) {
                *votes.entry(i - j).or_default() += 1;
            }
        }
    }
    let (start, v) = votes.into_iter().max_by_key(|&(start, v)| (v, std::cmp::Reverse(start)))?;
    Some(Window { start, score: v as f64 / counted as f64 })
}

/// The E11 explanation: where the nearest candidate is and what differs.
pub(crate) fn nearest_hint(
    text: &str,
    lines: &LineIndex,
    pat: &[&str],
    best: Option<Window>,
    old: &str,
    budget: &Budget,
) -> String {
    let mut hint = String::new();
    if budget.exhausted() {
        hint.push_str("(The search stopped at its work limit; a shorter, more exact old_string helps.) ");
    }
    // Where old_string as written is likeliest: when the file's lines there start with the same
    // `N→` as its lines, the arrows are the file's own text, not read_file's numbering.
    let raw = best.or_else(|| line_window(text, lines, pat)).or_else(|| token_window(text, lines, pat, old));
    if let Some(stripped) =
        without_line_numbers(pat).filter(|_| !raw.is_some_and(|w| prefixes_in_file(text, lines, pat, w)))
    {
        // The likeliest cause by far: the model quoted read_file's output with its numbers.
        let refs: Vec<&str> = stripped.iter().map(String::as_str).collect();
        let example = pat.iter().find(|l| !l.trim().is_empty()).map_or("", |l| l.trim_start());
        let example = example.split('→').next().unwrap_or("");
        let _ = write!(
            hint,
            "It starts with read_file's line-number prefix (`{example}→`), which is not part of the file: copy \
             only the text after each arrow, in old_string and new_string alike."
        );
        match line_window(text, lines, &refs) {
            Some(w) if w.score >= 1.0 => {
                let _ = write!(hint, " Without the prefixes the text is at line {}.", w.start + 1);
            }
            _ => {
                hint.push(' ');
                hint.push_str(&nearest_hint(text, lines, &refs, None, &refs.join("\n"), &Budget::default()));
            }
        }
        return hint;
    }
    let w = match raw {
        Some(w) => w,
        None => {
            hint.push_str("None of its lines occurs in the file, even ignoring whitespace.");
            return hint;
        }
    };
    let k = pat.len();
    let _ = write!(
        hint,
        "The nearest candidate is lines {}-{} ({:.0}% similar). What differs:",
        w.start + 1,
        w.start + k,
        w.score * 100.0
    );
    let mut shown = 0;
    for (j, p) in pat.iter().enumerate() {
        let f = lines.line(text, w.start + j);
        if f == *p {
            continue;
        }
        if shown == 5 {
            hint.push_str("\n  …and more lines");
            break;
        }
        shown += 1;
        let how = if line_key(f, Level::Whitespace) == line_key(p, Level::Whitespace) {
            " (only whitespace/indentation differs)"
        } else {
            ""
        };
        let _ = write!(
            hint,
            "\n  line {}{how}: the file has {}, old_string has {}",
            w.start + j + 1,
            shorten(f),
            shorten(p)
        );
    }
    if shown == 0 {
        hint.push_str(" only the lines around it (old_string may run past the end of this region).");
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, old: &str, new: &str) -> Result<(String, Stage), MatchError> {
        let r = replace_unique(text, old, new, &mut Budget::default())?;
        Ok((format!("{}{}{}", &text[..r.start], r.text, &text[r.end..]), r.stage))
    }

    #[test]
    fn e1_exact_unique_match_is_replaced() {
        let (out, stage) = apply("a\nb\nc\n", "b\n", "B\n").unwrap();
        assert_eq!(out, "a\nB\nc\n");
        assert_eq!(stage, Stage::Exact);
    }

    #[test]
    fn e1_overlapping_repeats_are_ambiguous_with_lines() {
        let err = apply("x\naa\naaa\n", "aa", "b").unwrap_err();
        let MatchError::Ambiguous { lines, .. } = &err else { panic!("{err}") };
        assert_eq!(lines, &vec![2, 3, 3]);
        assert!(err.to_string().contains("add more surrounding lines"));
    }

    #[test]
    fn e1_empty_and_unchanged_are_refused() {
        assert_eq!(apply("a", "", "b").unwrap_err(), MatchError::EmptyOld);
        assert_eq!(apply("a", "a", "a").unwrap_err(), MatchError::Unchanged);
    }

    #[test]
    fn e12_lf_old_string_matches_crlf_file_and_keeps_crlf() {
        let (out, stage) = apply("one\r\ntwo\r\nthree\r\n", "one\ntwo\n", "uno\ndos\n").unwrap();
        assert_eq!(stage, Stage::LineEndings);
        assert_eq!(out, "uno\r\ndos\r\nthree\r\n");
    }

    #[test]
    fn e7_straight_quotes_match_curly_and_keep_file_typography() {
        let text = "say “hello” — it’s fine\nnext\n";
        let (out, stage) = apply(text, "say \"hello\" - it's fine", "say \"hello\" - it's great").unwrap();
        assert_eq!(stage, Stage::Typography);
        assert_eq!(out, "say “hello” — it’s great\nnext\n");
        // The other way round: the model typed curly quotes, the file has straight ones.
        let (out, _) = apply("x = 'a'\u{00A0}+ 1\n", "x = ‘a’ + 1", "x = ‘b’ + 1").unwrap();
        assert_eq!(out, "x = 'b'\u{00A0}+ 1\n");
    }

    #[test]
    fn e8_indentation_drift_matches_and_keeps_file_indentation() {
        let text = "fn main() {\n        let a = 1;\n        let b = 2;\n}\n";
        let (out, stage) = apply(text, "let a = 1;\nlet b = 2;", "let a = 1;\nlet b = 3;\nlet c = 4;").unwrap();
        assert_eq!(stage, Stage::Whitespace);
        assert_eq!(out, "fn main() {\n        let a = 1;\n        let b = 3;\n        let c = 4;\n}\n");
    }

    #[test]
    fn e8_fuzzy_recovers_small_context_drift() {
        let text = "def f(x):\n    total = 0\n    for item in x:\n        total += item * 2\n    return total\n\nprint(f([1]))\n";
        // The model remembers a context line slightly wrong (`items`), but changes another one.
        let old = "    total = 0\n    for item in items:\n        total += item * 2\n    return total";
        let new = "    total = 0\n    for item in items:\n        total += item * 4\n    return total";
        let (out, stage) = apply(text, old, new).unwrap();
        assert_eq!(stage, Stage::Fuzzy);
        assert!(out.contains("    for item in x:\n        total += item * 4\n"), "{out}");
        // A changed line that is not in the file is never forgiven.
        let wrong = "    total = 0\n    for item in x:\n        total += item * 3\n    return total";
        let err = apply(text, wrong, new).unwrap_err();
        assert!(err.to_string().contains("lines your edit changes"), "{err}");
    }

    #[test]
    fn e8_fuzzy_ambiguity_is_an_error() {
        let block = "    alpha = compute(1)\n    beta = compute(2)\n    gamma = compute(3)\n";
        let text = format!("def a():\n{block}\ndef b():\n{block}");
        let old = "    alpha = compute(1)\n    beta = compute(9)\n    gamma = compute(3)";
        let err = apply(&text, old, "x").unwrap_err();
        assert!(matches!(err, MatchError::Ambiguous { stage: Stage::Fuzzy, .. }), "{err}");
    }

    #[test]
    fn e11_no_match_names_nearest_region_and_difference() {
        let text = "a\nfn compute(x: i32) -> i32 {\n    x + 1\n}\nz\n";
        let err = apply(text, "fn compute(x: i64) -> i64 {\n    x + 2\n}", "y").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("lines 2-4"), "{msg}");
        assert!(msg.contains("i64") && msg.contains("i32"), "{msg}");
        assert!(msg.contains("Read the file again"), "{msg}");
    }

    #[test]
    fn e8_fuzzy_on_big_input_stays_within_budget() {
        let line = "let value = compute(alpha, beta, gamma);\n";
        let text = line.repeat(200_000);
        let old: String = (0..40).map(|i| format!("totally different line {i} with words\n")).collect();
        let mut budget = Budget::new(2_000_000);
        let err = replace_unique(&text, &old, "x", &mut budget).unwrap_err();
        assert!(matches!(err, MatchError::NotFound { .. }));
    }

    #[test]
    fn e8_repetitive_file_and_repetitive_old_string_stay_within_budget() {
        let text = "x = 1\n".repeat(100_000);
        let old = format!("{}y = 2\n", "x = 1\n".repeat(50_000));
        // Without per-vote charging this input costs ~10^10 steps; with it, the budget.
        let mut budget = Budget::new(2_000_000);
        let err = replace_unique(&text, &old, "z", &mut budget).unwrap_err();
        assert!(matches!(err, MatchError::NotFound { .. }), "{err}");
    }

    #[test]
    fn e8_line_hash_is_the_hash_of_the_normalised_line() {
        for l in ["", "   ", "  let  a =\t1; ", "x", "\u{b}a\u{c}b", "  “q” —\u{a0}z  ", "é  è", "a\u{3000}b"] {
            let key = line_key(l, Level::Whitespace);
            assert_eq!(hash_key(l, Level::Whitespace), hash_key(&key, Level::Exact), "{l:?}");
        }
    }

    #[test]
    fn count_newlines_matches_a_plain_count() {
        let s = "a\nb\n\n\u{0a0a}x\n\r\n12345678\n\n\n\n\n\n\n\n\nz\u{8a}\n";
        for i in 0..s.len() {
            let b = &s.as_bytes()[i..];
            assert_eq!(count_newlines(b), b.iter().filter(|&&x| x == b'\n').count());
        }
    }

    #[test]
    fn norm_map_round_trips_offsets() {
        let (n, _) = Norm::of("a\r\n“b”\r\nc", true);
        assert_eq!(n.text, "a\n\"b\"\nc");
        assert_eq!(n.map(0), 0);
        assert_eq!(n.map(1), 1); // the \n maps to the \r before it
        assert_eq!(n.map(2), 3);
        assert_eq!(n.map(3), 6); // after the opening quote
        assert_eq!(n.map(n.text.len()), "a\r\n“b”\r\nc".len());
    }
}
