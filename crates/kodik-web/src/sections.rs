//! A page's Markdown as sections (by heading): the 32 KB cut at a section boundary, the
//! outline of what was left out, and `query` (W2, W3).

use std::fmt::Write as _;

/// One section: a heading and everything up to the next heading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// 1–6 for `#`…`######`; 0 for the text before the first heading.
    pub level: u8,
    /// The heading's text (empty for the preamble).
    pub title: String,
    /// The headings above it, outermost first.
    pub path: Vec<String>,
    /// Byte range in the Markdown, heading line included.
    pub start: usize,
    /// End of the range (exclusive).
    pub end: usize,
}

/// Splits `md` at ATX headings outside fenced code.
pub fn split(md: &str) -> Vec<Section> {
    let mut out = Vec::new();
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut current = Section { level: 0, title: String::new(), path: Vec::new(), start: 0, end: md.len() };
    let mut fence: Option<&str> = None;
    let mut pos = 0;
    for line in md.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
        } else if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
        } else if let Some((level, title)) = heading(line) {
            current.end = pos;
            if current.end > current.start || current.level > 0 {
                out.push(current);
            }
            stack.retain(|(l, _)| *l < level);
            let path = stack.iter().map(|(_, t)| t.clone()).collect();
            stack.push((level, title.clone()));
            current = Section { level, title, path, start: pos, end: md.len() };
        }
        pos += line.len();
    }
    current.end = md.len();
    if current.end > current.start || current.level > 0 {
        out.push(current);
    }
    out
}

fn heading(line: &str) -> Option<(u8, String)> {
    if line.starts_with("    ") {
        return None;
    }
    let t = line.trim();
    let hashes = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &t[hashes..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim().to_string();
    Some((hashes as u8, title))
}

/// The opening line of the fenced code block `pos` falls inside (e.g. "```rust"), if any: a
/// page cut there closes the fence, and the next page reopens it.
pub fn fence_open_at(md: &str, pos: usize) -> Option<&str> {
    let mut open: Option<&str> = None;
    let mut at = 0;
    for line in md.split_inclusive('\n') {
        if at >= pos {
            break;
        }
        let t = line.trim_start();
        match open {
            Some(f) if t.starts_with(&f.trim_start()[..3]) && t.trim_end().chars().all(|c| c == '`' || c == '~') => {
                open = None;
            }
            None if t.starts_with("```") || t.starts_with("~~~") => open = Some(line.trim_end()),
            _ => {}
        }
        at += line.len();
    }
    open
}

/// One page of `md` from `offset`: whole sections while they fit in `budget` bytes; when they
/// fill less than half of it, the page goes on to the last paragraph break that fits. Returns the
/// text's range and where the next page starts (`None` at the end).
pub fn page(md: &str, sections: &[Section], offset: usize, budget: usize) -> (usize, usize, Option<usize>) {
    let start = floor_char(md, offset.min(md.len()));
    if md.len() - start <= budget {
        return (start, md.len(), None);
    }
    let mut end = start;
    for s in sections.iter().filter(|s| s.start >= start || s.end > start) {
        let s_end = s.end;
        if s_end - start <= budget {
            end = s_end;
        } else {
            break;
        }
    }
    // Whole sections filled less than half the page (a short intro before one long section):
    // go on into the next section up to a paragraph break rather than show a few lines.
    if end - start < budget / 2 {
        end = paragraph_cut(md, start, start + budget);
    }
    (start, end, (end < md.len()).then_some(end))
}

/// The last paragraph break (or line break, or character boundary) before `limit`.
fn paragraph_cut(md: &str, start: usize, limit: usize) -> usize {
    let limit = floor_char(md, limit);
    let window = &md[start..limit];
    if let Some(p) = window.rfind("\n\n").filter(|p| *p > window.len() / 2) {
        return start + p + 2;
    }
    if let Some(p) = window.rfind('\n').filter(|p| *p > window.len() / 2) {
        return start + p + 1;
    }
    limit
}

/// `i`, moved back to a character boundary of `s`.
pub fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The outline of `sections`, one line each with its offset and size, at most `max_lines`
/// lines and about `max_bytes` bytes (a heading is cut at 120 characters): the outline must not
/// outgrow the page it comes with.
pub fn outline<'a>(sections: impl IntoIterator<Item = &'a Section>, max_lines: usize, max_bytes: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    let mut more = 0;
    for s in sections {
        if s.level == 0 {
            continue;
        }
        if n == max_lines || out.len() >= max_bytes {
            more += 1;
            continue;
        }
        n += 1;
        let indent = "  ".repeat(usize::from(s.level.saturating_sub(1)));
        let title: String = if s.title.chars().count() > 120 {
            s.title.chars().take(119).chain(['…']).collect()
        } else {
            s.title.clone()
        };
        let _ = writeln!(out, "{indent}- {title} (offset {}, {})", s.start, size(s.end - s.start));
    }
    if more > 0 {
        let _ = writeln!(out, "- … and {more} more sections");
    }
    out
}

/// `1.2 KB`-style sizes.
pub fn size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// The words of a query: lowercase, alphanumeric runs of two or more characters (one for
/// digits and for a CJK character, which is a word by itself), deduplicated. A run ending in
/// `+` or `#` keeps them, so `C++`, `C#` and `F#` are words of their own rather than a lone
/// letter that would be dropped.
pub fn words(query: &str) -> Vec<String> {
    let mut tokens: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in query.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '_' {
            if cur.ends_with(['+', '#']) {
                // `a+b`: an operator between words, not a suffix.
                tokens.push(cur.trim_end_matches(['+', '#']).to_string());
                cur.clear();
            }
            cur.push(c);
        } else if matches!(c, '+' | '#') && !cur.is_empty() {
            cur.push(c);
        } else {
            tokens.push(std::mem::take(&mut cur));
        }
    }
    tokens.push(cur);
    let mut out: Vec<String> = Vec::new();
    for w in tokens {
        let mut chars = w.chars();
        let single = match (chars.next(), chars.next()) {
            (None, _) => continue,
            (Some(c), None) => Some(c),
            _ => None,
        };
        let keep = match single {
            None => true,
            Some(c) => c.is_ascii_digit() || u32::from(c) >= 0x2E80,
        };
        if keep && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Sections that hold the query's words, best first: the whole query as a phrase, then the
/// weight of the words held, then more distinct words, then words in the heading, then
/// occurrences per KB. Indexes into `sections`.
///
/// A word weighs more the fewer sections hold it (inverse document frequency), and a section
/// weighing less than half the best one is no match: on a guide where "how", "to" and "set"
/// are in most sections, `how to set timeout` finds the timeout section, not 75 sections
/// that say "how to". A one-word query keeps every section holding the word.
pub fn rank(md: &str, sections: &[Section], words: &[String]) -> Vec<usize> {
    // Matched against `normalised` text, so it must drop the same punctuation (`c++ x` → `c x`).
    let phrase = normalised(&words.join(" "));
    let texts: Vec<(String, String)> = sections
        .iter()
        .map(|s| (unescaped(&md[s.start..s.end]).to_lowercase(), unescaped(&s.title).to_lowercase()))
        .collect();
    let n = texts.len() as f64;
    let weight: Vec<f64> = words
        .iter()
        .map(|w| {
            let df = texts.iter().filter(|(t, _)| t.contains(w.as_str())).count() as f64;
            (1.0 + n / df.max(1.0)).ln()
        })
        .collect();
    let mut scored: Vec<(usize, bool, f64, usize, usize, u64)> = Vec::new();
    for (i, (s, (text, title))) in sections.iter().zip(&texts).enumerate() {
        let mut distinct = 0;
        let mut held = 0.0;
        let mut in_title = 0;
        let mut count = 0usize;
        for (w, weight) in words.iter().zip(&weight) {
            let c = text.matches(w.as_str()).count();
            if c > 0 {
                distinct += 1;
                held += weight;
                count += c;
            }
            if title.contains(w.as_str()) {
                in_title += 1;
            }
        }
        if distinct > 0 {
            let density = (count as u64 * 1_000_000) / (s.end - s.start).max(1) as u64;
            let has_phrase = words.len() > 1 && normalised(text).contains(&phrase);
            scored.push((i, has_phrase, held, distinct, in_title, density));
        }
    }
    let best = scored.iter().map(|s| s.2).fold(0.0, f64::max);
    scored.retain(|s| s.1 || s.2 * 2.0 >= best);
    scored.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(b.2.total_cmp(&a.2))
            .then(b.3.cmp(&a.3))
            .then(b.4.cmp(&a.4))
            .then(b.5.cmp(&a.5))
            .then(a.0.cmp(&b.0))
    });
    scored.into_iter().map(|s| s.0).collect()
}

/// Where a part of a section worth showing starts when the whole section does not fit: up to
/// `context` bytes before the first place in `md[start..end]` that holds the most distinct
/// query words (on one line), at a paragraph or line break when there is one, else at a space.
pub fn best_match(md: &str, start: usize, end: usize, words: &[String], context: usize) -> usize {
    let mut best: Option<(usize, usize)> = None; // (distinct words, line start)
    let mut pos = start;
    for line in md[start..end].split_inclusive('\n') {
        let l = unescaped(line).to_lowercase();
        let n = words.iter().filter(|w| l.contains(w.as_str())).count();
        if n > best.map_or(0, |b| b.0) {
            best = Some((n, pos));
            if n == words.len() {
                break;
            }
        }
        pos += line.len();
    }
    let Some((_, line_start)) = best else { return start };
    let line_end = md[line_start..end].find('\n').map_or(end, |i| line_start + i);
    // The first word's place in the line, as written (ASCII case folded keeps byte offsets;
    // an identifier may be written escaped).
    let line = md[line_start..line_end].to_ascii_lowercase();
    let hit = words
        .iter()
        .flat_map(|w| {
            let escaped: String =
                w.chars().flat_map(|c| if c.is_ascii_punctuation() { vec!['\\', c] } else { vec![c] }).collect();
            [line.find(w.as_str()), line.find(&escaped)]
        })
        .flatten()
        .min()
        .map_or(line_start, |i| line_start + i);
    // Up to `context` bytes of what leads up to it (the log lines before an error), from the
    // first break in that stretch.
    let earliest = floor_char(md, hit.saturating_sub(context).max(start));
    if earliest == start {
        return start;
    }
    let before = &md[earliest..hit];
    if let Some(p) = before.find("\n\n") {
        return earliest + p + 2;
    }
    if let Some(p) = before.find('\n') {
        return earliest + p + 1;
    }
    before.find(' ').map_or(earliest, |p| earliest + p + 1)
}

/// `md` without Markdown's backslash escapes: the converter writes `max\_connections` and
/// `2\*3`, while a query names `max_connections`, so matching runs on the text as read.
/// A Markdown line as its text reads: backslash escapes, emphasis and code marks, heading and
/// list markers and link targets gone, whitespace collapsed (matching an element's text).
pub fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = unescaped(line).chars().collect::<Vec<_>>().into_iter().peekable();
    let mut in_target = false;
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        if in_target {
            in_target = c != ')';
            continue;
        }
        if c == ']' && chars.peek() == Some(&'(') {
            in_target = true;
            chars.next();
            continue;
        }
        if matches!(c, '*' | '`' | '#' | '[' | ']' | '>')
            || (c == '_' && (prev == ' ' || chars.peek().is_none_or(|n| n.is_whitespace())))
        {
            continue;
        }
        out.push(c);
        prev = c;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn unescaped(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut chars = md.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(char::is_ascii_punctuation) {
            continue;
        }
        out.push(c);
    }
    out
}

/// Lowercase words joined by single spaces, punctuation dropped: how a phrase is matched.
fn normalised(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "intro\n\n# Guide\n\ntext\n\n## Install\n\ncargo add x\n\n```sh\n# not a heading\n```\n\n## Usage\n\ncall x\n\n# Other\n\nmore\n";

    #[test]
    fn sections_follow_headings_outside_code() {
        let s = split(MD);
        let titles: Vec<&str> = s.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["", "Guide", "Install", "Usage", "Other"]);
        assert_eq!(s[3].path, ["Guide"]);
        assert_eq!(s[4].path, Vec::<String>::new());
        assert!(MD[s[2].start..s[2].end].contains("# not a heading"));
        assert_eq!(s.last().unwrap().end, MD.len());
    }

    #[test]
    fn w2_a_page_ends_at_a_section_boundary() {
        let s = split(MD);
        // Whole sections fill at least half of the 40 bytes.
        let (a, b, next) = page(MD, &s, 0, 40);
        assert_eq!(a, 0);
        assert!(s.iter().any(|s| s.start == b), "cut at {b} is not a section start");
        assert_eq!(next, Some(b));
        let (_, end, none) = page(MD, &s, b, 10_000);
        assert_eq!((end, none), (MD.len(), None));
    }

    #[test]
    fn w2_a_short_intro_before_a_long_section_does_not_make_a_near_empty_page() {
        let s = split(MD);
        // The intro and "Guide" are 22 bytes; "Install" would end at 70. Rather than 22 bytes
        // of 60, the page goes on to Install's last paragraph break that fits.
        let (_, b, next) = page(MD, &s, 0, 60);
        assert_eq!(&MD[..b], "intro\n\n# Guide\n\ntext\n\n## Install\n\ncargo add x\n\n");
        assert_eq!(next, Some(b));
        let md = format!(
            "# Intro\n\nShort intro.\n\n## Reference\n\n{}## After\n\nafter\n",
            "API item text.\n\n".repeat(3000)
        );
        let s = split(&md);
        let (_, b, _) = page(&md, &s, 0, 32 * 1024);
        assert!(b > 16 * 1024 && b <= 32 * 1024, "{b}");
    }

    #[test]
    fn w2_a_cut_inside_a_code_block_knows_its_fence() {
        let md = "text\n\n```rust\nfn a() {}\n\nfn b() {}\n```\n\nafter\n";
        let inside = md.find("fn b").unwrap();
        assert_eq!(fence_open_at(md, inside), Some("```rust"));
        assert_eq!(fence_open_at(md, md.find("after").unwrap()), None);
        assert_eq!(fence_open_at(md, 0), None);
    }

    #[test]
    fn w3_ranking_prefers_more_words_then_headings() {
        let s = split(MD);
        let r = rank(MD, &s, &words("install cargo"));
        assert_eq!(s[r[0]].title, "Install");
        assert!(rank(MD, &s, &words("zebra")).is_empty());
    }

    #[test]
    fn w3_words_in_most_sections_do_not_make_a_match_of_their_own() {
        // The tester's nl.html: 100 steps that say "how to set …", one about the timeout.
        let mut md = String::from("# Guide\n\nSteps.\n\n");
        for i in 0..100 {
            let body = if i == 57 {
                "How to set the timeout: pass timeout=5 to the client.".to_string()
            } else if i % 4 == 0 {
                format!("Step {i} explains things.")
            } else {
                format!("How to set option {i}: write it to the config file and restart.")
            };
            md.push_str(&format!("## Step {i}\n\n{body}\n\n"));
        }
        let s = split(&md);
        let hits = |q: &str| rank(&md, &s, &words(q)).iter().map(|i| s[*i].title.clone()).collect::<Vec<_>>();
        assert_eq!(hits("how to set timeout"), ["Step 57"]);
        assert_eq!(hits("timeout"), ["Step 57"]);
        // A word in most sections, asked alone, still finds them all.
        assert_eq!(hits("config").len(), 74);
    }

    #[test]
    fn w3_identifiers_match_through_markdown_escapes() {
        let md =
            "# Intro\n\nintro\n\n## Config\n\nSet max\\_connections and read\\_timeout.\n\n## max\\_retries\n\nnone\n";
        let s = split(md);
        let hits = |q: &str| rank(md, &s, &words(q)).iter().map(|i| s[*i].title.clone()).collect::<Vec<_>>();
        assert_eq!(hits("max_connections"), ["Config"]);
        assert_eq!(hits("read_timeout max_connections"), ["Config"]);
        assert_eq!(hits("max_retries"), ["max\\_retries"]);
    }
}
