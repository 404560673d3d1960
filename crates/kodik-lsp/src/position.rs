//! Columns: the model counts characters, LSP counts UTF-16 code units (or UTF-8 bytes when
//! negotiated); file paths become `file://` URIs and back.

use std::path::{Path, PathBuf};

/// How the server counts columns (`positionEncoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 bytes.
    Utf8,
    /// UTF-16 code units (the LSP default).
    Utf16,
    /// Unicode scalar values.
    Utf32,
}

impl Encoding {
    /// From the server's `capabilities.positionEncoding`.
    pub fn from_name(name: Option<&str>) -> Self {
        match name {
            Some("utf-8") => Self::Utf8,
            Some("utf-32") => Self::Utf32,
            _ => Self::Utf16,
        }
    }

    fn width(self, c: char) -> u32 {
        match self {
            Self::Utf8 => c.len_utf8() as u32,
            Self::Utf16 => c.len_utf16() as u32,
            Self::Utf32 => 1,
        }
    }
}

/// Line `n` (0-based) of `text`, without its line ending (`\n`, `\r\n`).
pub fn line_of(text: &str, n: usize) -> Option<&str> {
    text.split('\n').nth(n).map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// The server's column for the 0-based character index `chars` on `line`.
pub fn to_lsp_column(line: &str, chars: usize, enc: Encoding) -> u32 {
    line.chars().take(chars).map(|c| enc.width(c)).sum()
}

/// The 0-based character index for the server's column `col` on `line` (clamped to the line).
pub fn from_lsp_column(line: &str, col: u32, enc: Encoding) -> usize {
    let mut units = 0u32;
    for (i, c) in line.chars().enumerate() {
        if units >= col {
            return i;
        }
        units += enc.width(c);
    }
    line.chars().count()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Why a symbol could not be found on its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    /// The line does not exist.
    #[error("line {line} does not exist: the file has {lines} lines")]
    NoLine {
        /// Asked line (1-based).
        line: u32,
        /// Lines in the file.
        lines: usize,
    },
    /// The identifier is not on the line as a whole word.
    #[error("`{symbol}` does not occur as a whole identifier on line {line}: `{text}`")]
    NotOnLine {
        /// The identifier.
        symbol: String,
        /// Line (1-based).
        line: u32,
        /// The line's text.
        text: String,
    },
    /// Fewer occurrences than asked.
    #[error("`{symbol}` occurs {found} time(s) on line {line}, so occurrence {asked} does not exist")]
    NoOccurrence {
        /// The identifier.
        symbol: String,
        /// Line (1-based).
        line: u32,
        /// How many there are.
        found: usize,
        /// Which was asked.
        asked: u32,
    },
    /// `character` does not point into any occurrence of `symbol` on the line.
    #[error("`{symbol}` is not at column {column} of line {line}; it occurs at column(s) {at}")]
    NotAtColumn {
        /// The identifier.
        symbol: String,
        /// Line (1-based).
        line: u32,
        /// The column given (1-based).
        column: u32,
        /// The 1-based columns where it does occur.
        at: String,
    },
    /// The column lies past the end of the line.
    #[error("column {column} is past the end of line {line}, which has {len} characters")]
    PastEnd {
        /// Column (1-based).
        column: u32,
        /// Line (1-based).
        line: u32,
        /// Characters on the line.
        len: usize,
    },
}

/// Where in `symbol` the identifier to ask about starts: 0 for a plain identifier; for a
/// qualified name (`u.greet`, `u.greet()`, `Foo::bar`, `p->x`) its last identifier, the member
/// a model means (not the receiver). `None` when `symbol` is one identifier or has none.
fn member_offset(symbol: &[char]) -> Option<usize> {
    if symbol.iter().all(|&c| is_ident(c)) {
        return None;
    }
    let mut last = None;
    let mut i = 0;
    while i < symbol.len() {
        if is_ident(symbol[i]) {
            if !symbol[i].is_ascii_digit() {
                last = Some(i);
            }
            while i < symbol.len() && is_ident(symbol[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    last
}

/// Start indices of the whole-word matches of `wanted` in `chars` (so `id` never matches
/// inside `idx`).
fn matches(chars: &[char], wanted: &[char]) -> Vec<usize> {
    let mut found = Vec::new();
    if wanted.is_empty() {
        return found;
    }
    let mut i = 0;
    while i + wanted.len() <= chars.len() {
        let before_ok = i == 0 || !is_ident(chars[i - 1]) || !is_ident(wanted[0]);
        let after = i + wanted.len();
        let after_ok = after == chars.len() || !is_ident(chars[after]) || !wanted.last().is_some_and(|&c| is_ident(c));
        if chars[i..after] == wanted[..] && before_ok && after_ok {
            found.push(i);
            i = after;
        } else {
            i += 1;
        }
    }
    found
}

/// The 0-based character index of the symbol on 1-based `line`: the `occurrence`-th whole-word
/// match of `symbol` (so `id` never matches inside `idx`), or the 1-based `character` column.
/// A qualified `symbol` (`u.greet`) points at its last identifier (`greet`), and is looked for
/// as that identifier alone when the whole text is not on the line. With both a symbol and a
/// column, the occurrence that covers the column wins, and a column no occurrence covers is an
/// error that says where the symbol is.
pub fn pick(
    text: &str,
    line: u32,
    symbol: Option<&str>,
    occurrence: Option<u32>,
    character: Option<u32>,
) -> Result<usize, PickError> {
    let Some(src) = line.checked_sub(1).and_then(|n| line_of(text, n as usize)) else {
        // Counted only for the error: this runs on every call, on files of any length.
        return Err(PickError::NoLine { line, lines: text.split('\n').count() });
    };
    let chars: Vec<char> = src.chars().collect();
    let symbol = symbol.unwrap_or("").trim();
    let column = match character {
        Some(col) => {
            let idx = col.saturating_sub(1) as usize;
            if idx >= chars.len() {
                return Err(PickError::PastEnd { column: col, line, len: chars.len() });
            }
            if symbol.is_empty() {
                return Ok(idx);
            }
            Some((col, idx))
        }
        None => None,
    };
    let wanted: Vec<char> = symbol.chars().collect();
    let mut found = matches(&chars, &wanted);
    let mut span = wanted.len();
    let mut offset = 0;
    if let Some(member) = member_offset(&wanted) {
        if found.is_empty() {
            // `User.greet` on `def greet(self)`: the member alone.
            let ident: Vec<char> = wanted[member..].iter().copied().take_while(|&c| is_ident(c)).collect();
            span = ident.len();
            found = matches(&chars, &ident);
        } else {
            offset = member;
        }
    }
    if found.is_empty() {
        return Err(PickError::NotOnLine { symbol: symbol.to_owned(), line, text: src.trim().to_owned() });
    }
    if let Some((col, idx)) = column {
        return found.iter().find(|&&start| start <= idx && idx < start + span).map(|&start| start + offset).ok_or(
            PickError::NotAtColumn {
                symbol: symbol.to_owned(),
                line,
                column: col,
                at: found.iter().map(|s| (s + 1).to_string()).collect::<Vec<_>>().join(", "),
            },
        );
    }
    let n = occurrence.unwrap_or(1);
    found.get(n.saturating_sub(1) as usize).map(|&start| start + offset).ok_or(PickError::NoOccurrence {
        symbol: symbol.to_owned(),
        line,
        found: found.len(),
        asked: n,
    })
}

/// The whole identifier that covers the 0-based character index `idx` of `line`, or `None`
/// when no identifier character is there.
pub fn identifier_at(line: &str, idx: usize) -> Option<String> {
    let chars: Vec<char> = line.chars().collect();
    if !chars.get(idx).is_some_and(|&c| is_ident(c)) {
        return None;
    }
    let start = chars[..idx].iter().rposition(|&c| !is_ident(c)).map_or(0, |p| p + 1);
    let end = chars[idx..].iter().position(|&c| !is_ident(c)).map_or(chars.len(), |p| idx + p);
    Some(chars[start..end].iter().collect())
}

/// `file://` URI of an absolute path, percent-encoding everything but unreserved characters.
pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI; `None` for other schemes.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path` never comes from a local server; `file:///c%3A/…` is Windows-only.
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L3: `foo(foo)` and `id` vs `idx` pick whole identifiers; `occurrence` chooses.
    #[test]
    fn l3_occurrence_respects_word_boundaries() {
        let text = "x = 1\nresult = foo(foo) + idx + id\n";
        assert_eq!(pick(text, 2, Some("foo"), None, None), Ok(9));
        assert_eq!(pick(text, 2, Some("foo"), Some(2), None), Ok(13));
        assert_eq!(pick(text, 2, Some("id"), None, None), Ok(26));
        assert!(matches!(pick(text, 2, Some("foo"), Some(3), None), Err(PickError::NoOccurrence { found: 2, .. })));
        assert!(matches!(pick(text, 2, Some("oo"), None, None), Err(PickError::NotOnLine { .. })));
        assert!(matches!(pick(text, 9, Some("x"), None, None), Err(PickError::NoLine { .. })));
        assert_eq!(pick(text, 2, None, None, Some(10)), Ok(9));
    }

    /// L3: a qualified symbol (`u.greet`, `u.greet()`, `Foo::bar`) points at the member, not
    /// the receiver; a member named with its class on its definition line (`User.greet` on
    /// `def greet`) is found as the member alone.
    #[test]
    fn l3_qualified_symbol_points_at_the_member_not_the_receiver() {
        let text = "def run():\n    return u.greet() + Foo::bar\n    def greet(self):\n";
        assert_eq!(pick(text, 2, Some("u.greet"), None, None), Ok(13));
        assert_eq!(pick(text, 2, Some("u.greet()"), None, None), Ok(13));
        assert_eq!(pick(text, 2, Some("Foo::bar"), None, None), Ok(28));
        assert_eq!(pick(text, 3, Some("User.greet"), None, None), Ok(8));
        assert_eq!(pick(text, 2, Some("v.greet"), None, None), Ok(13));
        assert!(matches!(pick(text, 2, Some("u.nothing"), None, None), Err(PickError::NotOnLine { .. })));
        assert_eq!(identifier_at(line_of(text, 1).unwrap_or(""), 15).as_deref(), Some("greet"));
    }

    /// L3: with a symbol, `character` must point into one of its occurrences (the one it
    /// covers is used); a column elsewhere is an error that says where the symbol is, not a
    /// query at the wrong place that answers "No results".
    #[test]
    fn l3_character_must_point_at_the_symbol() {
        let text = "x = 1\n    u = User(User)\n";
        assert_eq!(pick(text, 2, Some("User"), None, Some(11)), Ok(8));
        assert_eq!(pick(text, 2, Some("User"), None, Some(14)), Ok(13));
        let err = pick(text, 2, Some("User"), None, Some(3));
        assert_eq!(err, Err(PickError::NotAtColumn { symbol: "User".into(), line: 2, column: 3, at: "9, 14".into() }));
        assert!(err.unwrap_err().to_string().contains("it occurs at column(s) 9, 14"));
        // Without a symbol the column is used as given.
        assert_eq!(pick(text, 2, None, None, Some(3)), Ok(2));
    }

    /// L3: emoji, CJK and tabs before the symbol count as one character for the model and as
    /// their UTF-16 / UTF-8 widths for the server; CRLF endings are not part of the line.
    #[test]
    fn l3_columns_convert_for_emoji_cjk_tabs_and_crlf() {
        let text = "a\r\n\t😀 日本 = target\r\n";
        let idx = pick(text, 2, Some("target"), None, None).unwrap();
        assert_eq!(idx, 8);
        let line = line_of(text, 1).unwrap();
        assert_eq!(line, "\t😀 日本 = target");
        assert_eq!(to_lsp_column(line, idx, Encoding::Utf16), 9);
        assert_eq!(to_lsp_column(line, idx, Encoding::Utf8), 1 + 4 + 1 + 6 + 3);
        assert_eq!(from_lsp_column(line, 9, Encoding::Utf16), 8);
        assert_eq!(from_lsp_column(line, 15, Encoding::Utf8), 8);
    }

    #[test]
    fn uris_round_trip_with_spaces_and_unicode() {
        let p = Path::new("/tmp/a b/日本/x#1.py");
        let uri = path_to_uri(p);
        assert_eq!(uri, "file:///tmp/a%20b/%E6%97%A5%E6%9C%AC/x%231.py");
        assert_eq!(uri_to_path(&uri).as_deref(), Some(p));
    }
}
