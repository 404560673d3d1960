//! The Codex patch grammar (P1), parsed leniently where models are sloppy (a wrapping heredoc,
//! padded markers and headers) and precisely where it matters: every error names the patch
//! line it is about.
//!
//! ```text
//! patch     := "*** Begin Patch" NL { file_op } "*** End Patch" NL?
//! file_op   := add | delete | update
//! add       := "*** Add File: " path NL { "+" line NL }
//! delete    := "*** Delete File: " path NL
//! update    := "*** Update File: " path NL [ "*** Move to: " path NL ] { hunk }
//! hunk      := [ "@@" [ " " header ] NL ] { (" " | "-" | "+") line NL } [ "*** End of File" NL ]
//! ```

use std::cell::Cell;

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The file operations, in patch order.
    pub ops: Vec<PatchOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchOp {
    /// `*** Add File:` — creates the file, or replaces an existing one.
    Add {
        /// The path as written.
        path: String,
        /// The full content (every `+` line followed by `\n`).
        content: String,
        /// 1-based patch line of the header.
        line: usize,
    },
    /// `*** Delete File:`.
    Delete {
        /// The path as written.
        path: String,
        /// 1-based patch line of the header.
        line: usize,
    },
    /// `*** Update File:`, optionally with `*** Move to:`.
    Update {
        /// The path as written.
        path: String,
        /// Where the file moves to.
        move_to: Option<String>,
        /// The hunks, in file order.
        hunks: Vec<Hunk>,
        /// 1-based patch line of the header.
        line: usize,
    },
}

impl PatchOp {
    /// The path the operation starts from.
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path, .. } | Self::Update { path, .. } => path,
        }
    }

    /// The 1-based patch line of its header.
    pub fn line(&self) -> usize {
        match self {
            Self::Add { line, .. } | Self::Delete { line, .. } | Self::Update { line, .. } => *line,
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The text after `@@`: a line that precedes the change (a function or class header).
    pub header: Option<String>,
    /// Context, removed and added lines.
    pub lines: Vec<HunkLine>,
    /// `*** End of File`: the hunk's old lines end the file.
    pub end_of_file: bool,
    /// 1-based patch line where the hunk starts.
    pub line: usize,
}

impl Hunk {
    /// The lines the file has before the change (context and removed).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Remove(s) => Some(s.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` ` — kept.
    Context(String),
    /// `-` — removed.
    Remove(String),
    /// `+` — added.
    Add(String),
}

/// A malformed patch, with the 1-based line of the patch text the problem is on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid patch at line {line}: {message}")]
pub struct ParseError {
    /// 1-based line in the patch text.
    pub line: usize,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError { line, message: message.into() }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const EOF_MARK: &str = "*** End of File";

/// The lines of a patch (split at `\n`, a `\r` before it dropped), found on demand rather than
/// listed: a table of a 50 MB `*** Add File` would cost a quarter of its size on top of the
/// text and the content built from it (issue 18.2). The parser moves forward line by line, so a
/// line costs the bytes passed over to reach it; the few jumps (to the end for `*** End Patch`,
/// back after a look-ahead) start from the nearest of the start, the end and the last line read.
struct PatchLines<'a> {
    text: &'a str,
    len: usize,
    /// Where the last line starts.
    last: usize,
    /// A line and the byte where it starts.
    cursor: Cell<(usize, usize)>,
}

impl<'a> PatchLines<'a> {
    fn new(text: &'a str) -> Self {
        let len = crate::matcher::count_newlines(text.as_bytes()) + 1;
        let last = memchr::memrchr(b'\n', text.as_bytes()).map_or(0, |k| k + 1);
        Self { text, len, last, cursor: Cell::new((0, 0)) }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Line `i` (`i < len`), without its break.
    fn get(&self, i: usize) -> &'a str {
        let b = self.text.as_bytes();
        let cur = self.cursor.get();
        let (mut line, mut at) = [(0, 0), cur, (self.len - 1, self.last)]
            .into_iter()
            .min_by_key(|&(l, _): &(usize, usize)| l.abs_diff(i))
            .unwrap_or((0, 0));
        while line < i {
            at = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |k| at + k + 1);
            line += 1;
        }
        while line > i {
            at = memchr::memrchr(b'\n', &b[..at - 1]).map_or(0, |k| k + 1);
            line -= 1;
        }
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |k| at + k);
        self.cursor.set(if end < b.len() { (i + 1, end + 1) } else { (i, at) });
        let l = &self.text[at..end];
        l.strip_suffix('\r').unwrap_or(l)
    }
}

/// Parses patch text. A wrapping heredoc (`<<'EOF'` … `EOF`) and blank lines or spaces around
/// the markers are accepted.
pub fn parse_patch(input: &str) -> Result<Patch, ParseError> {
    parse(input, true)
}

/// [`parse_patch`] for the checks before a call (does it parse, which files does it touch):
/// the same answer, but an added file's content is left empty rather than built, so checking a
/// 50 MB `*** Add File` holds no second copy of it.
pub(crate) fn parse_patch_shape(input: &str) -> Result<Patch, ParseError> {
    parse(input, false)
}

fn parse(input: &str, build_content: bool) -> Result<Patch, ParseError> {
    let lines = PatchLines::new(input);
    // Skip blank lines and a heredoc opener before `*** Begin Patch`.
    let mut i = 0;
    while i < lines.len() && lines.get(i).trim().is_empty() {
        i += 1;
    }
    let mut heredoc: Option<String> = None;
    if i < lines.len()
        && lines.get(i).trim() != BEGIN
        && let Some(delim) = heredoc_delimiter(lines.get(i))
    {
        heredoc = Some(delim);
        i += 1;
    }
    if i >= lines.len() || lines.get(i).trim() != BEGIN {
        let at = i.min(lines.len().saturating_sub(1)) + 1;
        return Err(err(at, format!("the patch must start with `{BEGIN}`")));
    }
    let begin_line = i + 1;
    i += 1;
    // Find `*** End Patch` from the end, skipping blank lines and the heredoc terminator.
    let mut end = lines.len();
    while end > i && lines.get(end - 1).trim().is_empty() {
        end -= 1;
    }
    if let Some(d) = &heredoc
        && end > i
        && lines.get(end - 1).trim() == d
    {
        end -= 1;
        while end > i && lines.get(end - 1).trim().is_empty() {
            end -= 1;
        }
    }
    if end <= i || lines.get(end - 1).trim() != END {
        return Err(err(end.max(begin_line), format!("the patch must end with `{END}`")));
    }
    let body_end = end - 1;
    let mut ops = Vec::new();
    while i < body_end {
        let raw = lines.get(i);
        let line_no = i + 1;
        let t = raw.trim();
        if t.is_empty() {
            i += 1;
            continue;
        }
        if let Some(path) = header_path(t, ADD, line_no)? {
            i += 1;
            // Sized up front: growing a 50 MB file's content by doubling would briefly hold
            // it one and a half times over.
            let size: usize = if build_content {
                (i..body_end).map(|k| lines.get(k)).map_while(|l| l.strip_prefix('+')).map(|rest| rest.len() + 1).sum()
            } else {
                0
            };
            let mut content = String::with_capacity(size);
            while i < body_end {
                let l = lines.get(i);
                if let Some(rest) = l.strip_prefix('+') {
                    if build_content {
                        content.push_str(rest);
                        content.push('\n');
                    }
                    i += 1;
                } else if l.trim_start().starts_with("***")
                    || l.trim().is_empty() && next_is_header(&lines, i, body_end)
                {
                    break;
                } else {
                    return Err(err(
                        i + 1,
                        format!("every line of an added file must start with `+` (in `{ADD} {path}`), found {l:?}"),
                    ));
                }
            }
            ops.push(PatchOp::Add { path, content, line: line_no });
        } else if let Some(path) = header_path(t, DELETE, line_no)? {
            i += 1;
            ops.push(PatchOp::Delete { path, line: line_no });
        } else if let Some(path) = header_path(t, UPDATE, line_no)? {
            i += 1;
            let mut move_to = None;
            if i < body_end
                && let Some(dest) = header_path(lines.get(i).trim(), MOVE, i + 1)?
            {
                move_to = Some(dest);
                i += 1;
            }
            let (hunks, next) = parse_hunks(&lines, i, body_end, &path)?;
            i = next;
            if hunks.is_empty() && move_to.is_none() {
                return Err(err(
                    line_no,
                    format!("`{UPDATE} {path}` has no hunks; add `@@` hunks with context, `-` and `+` lines"),
                ));
            }
            ops.push(PatchOp::Update { path, move_to, hunks, line: line_no });
        } else if t == BEGIN || t == END {
            return Err(err(line_no, format!("unexpected `{t}` inside the patch")));
        } else {
            return Err(err(
                line_no,
                format!(
                    "{t:?} is not a valid file operation header; expected `{ADD} <path>`, `{DELETE} <path>` \
                     or `{UPDATE} <path>`"
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(err(begin_line, "the patch has no file operations between the markers"));
    }
    Ok(Patch { ops })
}

/// Whether the next non-blank line is a file-operation header or the end of the body.
fn next_is_header(lines: &PatchLines<'_>, mut i: usize, end: usize) -> bool {
    while i < end && lines.get(i).trim().is_empty() {
        i += 1;
    }
    i >= end || lines.get(i).trim_start().starts_with("***")
}

/// `Some(path)` when `t` is `marker` followed by a path.
fn header_path(t: &str, marker: &str, line: usize) -> Result<Option<String>, ParseError> {
    let Some(rest) = t.strip_prefix(marker) else { return Ok(None) };
    let path = rest.trim();
    if path.is_empty() {
        return Err(err(line, format!("`{marker}` needs a path after it")));
    }
    Ok(Some(path.to_string()))
}

fn parse_hunks(lines: &PatchLines<'_>, mut i: usize, end: usize, path: &str) -> Result<(Vec<Hunk>, usize), ParseError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    let close = |h: Option<Hunk>, hunks: &mut Vec<Hunk>| -> Result<(), ParseError> {
        if let Some(h) = h {
            if h.lines.is_empty() {
                return Err(err(h.line, format!("hunk of `{path}` has no lines; give context, `-` and `+` lines")));
            }
            hunks.push(h);
        }
        Ok(())
    };
    while i < end {
        let l = lines.get(i);
        let t = l.trim();
        if t.starts_with("@@") && !l.starts_with(' ') && !l.starts_with('+') && !l.starts_with('-') {
            close(current.take(), &mut hunks)?;
            let h = t.trim_start_matches("@@").trim();
            // `@@ -1,3 +1,4 @@` from unified diffs carries no usable context.
            let header =
                if h.is_empty() || (h.starts_with('-') && h.ends_with("@@")) { None } else { Some(h.to_string()) };
            current = Some(Hunk { header, lines: Vec::new(), end_of_file: false, line: i + 1 });
            i += 1;
            continue;
        }
        if t == EOF_MARK {
            match current.as_mut() {
                Some(h) => h.end_of_file = true,
                None => return Err(err(i + 1, format!("`{EOF_MARK}` outside a hunk of `{path}`"))),
            }
            close(current.take(), &mut hunks)?;
            i += 1;
            continue;
        }
        // A padded file-operation header still ends the update; any other `***` line at the
        // start of a line is left for the caller to report.
        if (t.starts_with("*** ") && is_op_header(t)) || l.starts_with("***") {
            break;
        }
        let parsed = if let Some(r) = l.strip_prefix('+') {
            HunkLine::Add(r.to_string())
        } else if let Some(r) = l.strip_prefix('-') {
            HunkLine::Remove(r.to_string())
        } else if let Some(r) = l.strip_prefix(' ') {
            HunkLine::Context(r.to_string())
        } else if l.is_empty() {
            // Models often drop the space of an empty context line.
            if next_is_header(lines, i, end) && current.is_some() {
                i += 1;
                continue;
            }
            HunkLine::Context(String::new())
        } else {
            return Err(err(
                i + 1,
                format!(
                    "unexpected line {l:?} in the update of `{path}`; every hunk line starts with ` ` (context), \
                     `-` (removed) or `+` (added), and hunks start with `@@`"
                ),
            ));
        };
        current
            .get_or_insert_with(|| Hunk { header: None, lines: Vec::new(), end_of_file: false, line: i + 1 })
            .lines
            .push(parsed);
        i += 1;
    }
    close(current.take(), &mut hunks)?;
    Ok((hunks, i))
}

fn is_op_header(t: &str) -> bool {
    [ADD, DELETE, UPDATE, MOVE, END, BEGIN].iter().any(|m| t.starts_with(m))
}

/// The delimiter of a heredoc opener such as `<<'EOF'`, `<<EOF`, `<<"EOF"` or
/// `apply_patch <<'EOF'`.
pub(crate) fn heredoc_delimiter(line: &str) -> Option<String> {
    let t = line.trim();
    let pos = t.find("<<")?;
    let before = t[..pos].trim();
    if !(before.is_empty() || before.ends_with("apply_patch") || before.ends_with("applypatch")) {
        return None;
    }
    let d = t[pos + 2..].trim().trim_start_matches('-').trim();
    let d = d.trim_matches(|c| c == '\'' || c == '"');
    (!d.is_empty() && d.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| d.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check before a call gives the same answer as the full parse (paths, lines, hunks,
    /// errors and where they are), only without an added file's content.
    #[test]
    fn p1_the_check_before_a_call_answers_like_the_full_parse() {
        let without_content = |p: Patch| Patch {
            ops: p
                .ops
                .into_iter()
                .map(|op| match op {
                    PatchOp::Add { path, line, .. } => PatchOp::Add { path, content: String::new(), line },
                    other => other,
                })
                .collect(),
        };
        for input in [
            "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b\n*** End Patch\n",
            "\r\n<<'EOF'\r\n*** Begin Patch\r\n*** Update File: c\r\n*** Move to: d\r\n@@ fn x\r\n a\r\n-b\r\n+c\r\n\r\n*** End Patch\r\nEOF\r\n\r\n",
            "*** Begin Patch\n*** Add File: a\n+x\n\n*** Update File: c\n a\n\n-b\n*** End of File\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\n+x\nno plus\n*** End Patch\n",
            "*** Begin Patch\n*** Update File: c\n@@\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "",
            "\n\n",
        ] {
            let full = parse_patch(input).map(without_content);
            assert_eq!(parse_patch_shape(input), full, "{input:?}");
        }
        let big: String = (0..1000).map(|i| format!("+line {i}\r\n")).collect();
        let input = format!("*** Begin Patch\n*** Add File: big\n{big}*** End Patch\n");
        let PatchOp::Add { content, .. } = &parse_patch(&input).unwrap().ops[0] else { panic!("not an add") };
        assert_eq!(content.lines().count(), 1000);
        assert!(content.starts_with("line 0\nline 1\n") && content.ends_with("line 999\n"));
    }

    #[test]
    fn p1_parses_every_operation_kind() {
        let p = parse_patch(
            "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n*** Update File: c.txt\n\
             *** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n@@\n-x\n+y\n*** End of File\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(p.ops.len(), 3);
        assert_eq!(p.ops[0], PatchOp::Add { path: "a.txt".into(), content: "one\ntwo\n".into(), line: 2 });
        let PatchOp::Update { move_to, hunks, .. } = &p.ops[2] else { panic!() };
        assert_eq!(move_to.as_deref(), Some("d.txt"));
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].header.as_deref(), Some("fn main"));
        assert!(hunks[1].end_of_file && !hunks[0].end_of_file);
    }

    #[test]
    fn p1_errors_name_the_patch_line() {
        let e = parse_patch("*** Begin Patch\n*** Update File: a\n@@\n ok\nbad line\n*** End Patch").unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        let e = parse_patch("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("not a valid file operation header"));
        let e = parse_patch("garbage").unwrap_err();
        assert!(e.to_string().contains("Begin Patch"));
        let e = parse_patch("*** Begin Patch\n*** Add File: a\n+x\n").unwrap_err();
        assert!(e.to_string().contains("End Patch"), "{e}");
    }

    #[test]
    fn p1_heredoc_and_padding_are_accepted() {
        let p = parse_patch("apply_patch <<'EOF'\n *** Begin Patch \n  *** Add File: a\n+x\n *** End Patch\nEOF\n")
            .unwrap();
        assert_eq!(p.ops.len(), 1);
        assert_eq!(heredoc_delimiter("<<\"PATCH\""), Some("PATCH".into()));
        assert_eq!(heredoc_delimiter("cat <<EOF"), None);
    }
}
