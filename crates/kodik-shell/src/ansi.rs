//! A streaming ANSI/VT escape-sequence stripper (S1).
//!
//! Output arrives in arbitrary chunks, so a sequence may be split anywhere; the stripper keeps
//! its state between calls. Text without escapes passes through without a copy, which keeps a
//! gigabyte of plain output cheap. Sequences that never end (garbage after an ESC) are given up
//! after a bounded length, so a stray ESC cannot swallow the rest of the output; a string
//! sequence (a title, a hyperlink) never spans lines, so one cut off before its terminator ends
//! at the next newline, which is kept, instead of eating the lines after it.

use std::borrow::Cow;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
/// Longest control sequence (CSI) we keep swallowing before deciding it is not one.
const MAX_CSI: usize = 64;
/// Longest string sequence (OSC, DCS, …; hyperlinks carry URLs) before giving up.
const MAX_STRING: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// Just saw ESC.
    Escape,
    /// ESC followed by intermediate bytes (`ESC ( B`), waiting for the final byte.
    EscapeIntermediate,
    /// `ESC [` … parameters, waiting for the final byte.
    Csi,
    /// `ESC ]` … terminated by BEL or `ESC \`.
    Osc,
    /// `ESC P`, `ESC X`, `ESC ^`, `ESC _` … terminated by `ESC \`.
    Str,
    /// Saw ESC inside an OSC or string sequence: `\` ends it.
    StrEscape,
}

/// Removes ANSI/VT escape sequences (colours, cursor movement, titles, hyperlinks) and BEL
/// from a byte stream fed in chunks.
#[derive(Debug, Clone)]
pub struct AnsiStripper {
    state: State,
    /// Bytes swallowed in the current sequence.
    seq_len: usize,
}

impl Default for AnsiStripper {
    fn default() -> Self {
        Self::new()
    }
}

impl AnsiStripper {
    /// A stripper at the start of a stream.
    pub fn new() -> Self {
        Self { state: State::Ground, seq_len: 0 }
    }

    /// Strips one chunk. Returns the input itself when it holds nothing to strip.
    pub fn strip<'a>(&mut self, input: &'a [u8]) -> Cow<'a, [u8]> {
        if self.passes_through(input) {
            return Cow::Borrowed(input);
        }
        let mut out = input.to_vec();
        let len = self.strip_in_place(&mut out);
        out.truncate(len);
        Cow::Owned(out)
    }

    /// Whether `input` would come out of [`strip`](Self::strip) unchanged (outside any sequence
    /// and free of ESC and BEL): one SIMD scan, the whole cost of stripping plain text.
    pub fn passes_through(&self, input: &[u8]) -> bool {
        self.state == State::Ground && memchr::memchr2(ESC, BEL, input).is_none()
    }

    /// Strips `buf` in place and returns the length of the text left at its start: stripping
    /// only removes bytes, so the kept ones move towards the start and no second buffer (and no
    /// allocation per chunk) is needed.
    pub fn strip_in_place(&mut self, buf: &mut [u8]) -> usize {
        // `w` (bytes kept) never passes `i` (bytes read).
        let mut w = 0;
        let mut i = 0;
        while i < buf.len() {
            if self.state == State::Ground {
                let (next, found) = match memchr::memchr2(ESC, BEL, &buf[i..]) {
                    None => (buf.len(), false),
                    Some(off) => (i + off, true),
                };
                if w != i {
                    buf.copy_within(i..next, w);
                }
                w += next - i;
                i = next;
                if found {
                    if buf[i] == ESC {
                        self.state = State::Escape;
                        self.seq_len = 0;
                    }
                    i += 1;
                }
                continue;
            }
            let b = buf[i];
            i += 1;
            self.seq_len += 1;
            self.state = match self.state {
                State::Ground => State::Ground,
                State::Escape => match b {
                    b'[' => State::Csi,
                    b']' => State::Osc,
                    b'P' | b'X' | b'^' | b'_' => State::Str,
                    0x20..=0x2f => State::EscapeIntermediate,
                    // Any other byte ends a two-byte sequence (`ESC =`, `ESC 7`, `ESC M`, …).
                    _ => State::Ground,
                },
                State::EscapeIntermediate => match b {
                    0x20..=0x2f if self.seq_len < MAX_CSI => State::EscapeIntermediate,
                    _ => State::Ground,
                },
                State::Csi => match b {
                    0x40..=0x7e => State::Ground,
                    0x20..=0x3f if self.seq_len < MAX_CSI => State::Csi,
                    // Not a control sequence after all: keep the byte.
                    _ => {
                        buf[w] = b;
                        w += 1;
                        State::Ground
                    }
                },
                State::Osc | State::Str => match b {
                    BEL if self.state == State::Osc => State::Ground,
                    ESC => State::StrEscape,
                    // Unterminated (output cut short, a stray `ESC ]`): the lines after it are
                    // text, such as the error message that follows.
                    b'\n' => {
                        buf[w] = b;
                        w += 1;
                        State::Ground
                    }
                    _ if self.seq_len > MAX_STRING => State::Ground,
                    _ => self.state,
                },
                State::StrEscape => match b {
                    b'\\' => State::Ground,
                    // A new sequence starts; the unterminated string is dropped.
                    b'[' => State::Csi,
                    _ => State::Ground,
                },
            };
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip_all(chunks: &[&[u8]]) -> String {
        let mut s = AnsiStripper::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&s.strip(c));
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn s1_colours_cursor_moves_titles_and_links_are_removed() {
        let input = b"\x1b[1;31merror\x1b[0m: x\x1b[2K\x1b[1G\x07done \x1b]0;title\x07\x1b]8;;http://a\x1b\\link\x1b]8;;\x1b\\ \x1b(Bok\x1b=";
        assert_eq!(strip_all(&[input]), "error: xdone link ok");
    }

    #[test]
    fn s1_sequences_split_across_chunks_are_removed() {
        let input = b"a\x1b[38;5;196mb\x1b[0mc\x1b]2;t\x1b\\d";
        for split in 0..input.len() {
            let (x, y) = input.split_at(split);
            assert_eq!(strip_all(&[x, y]), "abcd", "split at {split}");
        }
    }

    #[test]
    fn s1_plain_text_is_not_copied_and_utf8_survives() {
        let mut s = AnsiStripper::new();
        assert!(matches!(s.strip("привет\n".as_bytes()), Cow::Borrowed(_)));
        assert_eq!(strip_all(&["\x1b[32mпривет\x1b[0m".as_bytes()]), "привет");
    }

    #[test]
    fn s1_an_unterminated_title_or_string_sequence_ends_at_the_line_end() {
        for opener in ["\x1b]0;title without terminator", "\x1bP unterminated dcs", "\x1b_ apc"] {
            let input = format!("start\n{opener}\n1\n2\nERROR: build failed\n");
            assert_eq!(strip_all(&[input.as_bytes()]), "start\n\n1\n2\nERROR: build failed\n", "{opener:?}");
            let (a, b) = input.as_bytes().split_at(10);
            assert_eq!(strip_all(&[a, b]), "start\n\n1\n2\nERROR: build failed\n", "{opener:?} split");
        }
    }

    #[test]
    fn s1_a_stray_escape_does_not_swallow_the_rest() {
        let mut long = b"\x1b[".to_vec();
        long.extend(std::iter::repeat_n(b'1', 100));
        long.extend_from_slice(b"tail");
        let out = strip_all(&[&long]);
        assert!(out.ends_with("tail"), "{out}");
    }
}
