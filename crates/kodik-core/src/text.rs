//! Detect, decode and re-encode file bytes so a read shows the right characters (R6) and a
//! write gives back the file's own encoding, BOM and line endings (E12).
//!
//! Decoding keeps the text exactly as stored (line endings included), so
//! `encode(decode(bytes))` returns the same bytes for every losslessly decodable file.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};
use serde::{Deserialize, Serialize};

/// The line endings a text uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineEnding {
    /// `\n` only (also used for text without any line break).
    Lf,
    /// `\r\n` only.
    CrLf,
    /// Both; `crlf_dominant` says which one is the more frequent.
    Mixed {
        /// Whether `\r\n` is at least as frequent as a lone `\n`.
        crlf_dominant: bool,
    },
}

impl LineEnding {
    /// The line endings of `text`.
    pub fn detect(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut crlf = 0usize;
        let mut lf = 0usize;
        for i in memchr_iter(b'\n', bytes) {
            if i > 0 && bytes[i - 1] == b'\r' {
                crlf += 1;
            } else {
                lf += 1;
            }
        }
        match (crlf, lf) {
            (0, _) => Self::Lf,
            (_, 0) => Self::CrLf,
            (c, l) => Self::Mixed { crlf_dominant: c >= l },
        }
    }

    /// The ending new lines should get: the only one, or the dominant one of a mixed file.
    pub fn dominant(self) -> &'static str {
        match self {
            Self::Lf | Self::Mixed { crlf_dominant: false } => "\n",
            Self::CrLf | Self::Mixed { crlf_dominant: true } => "\r\n",
        }
    }

    /// `text` with every line break (`\n` or `\r\n`) written as this file's dominant ending.
    pub fn apply(self, text: &str) -> String {
        let unified = text.replace("\r\n", "\n");
        match self.dominant() {
            "\n" => unified,
            ending => unified.replace('\n', ending),
        }
    }
}

fn memchr_iter(needle: u8, hay: &[u8]) -> impl Iterator<Item = usize> + '_ {
    hay.iter().enumerate().filter(move |(_, b)| **b == needle).map(|(i, _)| i)
}

/// How a text file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextFormat {
    /// The encoding.
    pub encoding: &'static Encoding,
    /// Whether the file starts with a byte-order mark.
    pub bom: bool,
    /// The line endings found when it was read.
    pub line_ending: LineEnding,
}

impl Default for TextFormat {
    fn default() -> Self {
        Self { encoding: UTF_8, bom: false, line_ending: LineEnding::Lf }
    }
}

/// A decoded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text, line endings untouched.
    pub text: String,
    /// How it was stored.
    pub format: TextFormat,
    /// Whether some bytes were not valid in the detected encoding and were replaced by U+FFFD;
    /// writing such a text back would not give the same bytes.
    pub lossy: bool,
}

/// Why bytes could not be read as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// NUL bytes outside a UTF-16 pattern: an executable, an archive, an image, ….
    #[error("the file is binary (it contains NUL bytes), not text")]
    Binary,
}

/// Decodes `bytes`: BOM first, then UTF-16 without BOM (NUL pattern), then UTF-8 — also when
/// a few sequences are invalid but valid multi-byte characters outnumber them (the invalid
/// bytes become U+FFFD and `lossy` is set) — then `fallback` (the project's `files.encoding`),
/// then statistical detection of legacy code pages such as Windows-1251.
pub fn decode(bytes: &[u8], fallback: Option<&'static Encoding>) -> Result<Decoded, TextError> {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        return Ok(decode_with(enc, &bytes[bom_len..], true));
    }
    if bytes.contains(&0) {
        return match utf16_without_bom(bytes) {
            Some(enc) => Ok(decode_with(enc, bytes, false)),
            None => Err(TextError::Binary),
        };
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(Decoded {
            text: text.to_string(),
            format: TextFormat { encoding: UTF_8, bom: false, line_ending: LineEnding::detect(text) },
            lossy: false,
        });
    }
    if mostly_utf8(bytes) {
        return Ok(decode_with(UTF_8, bytes, false));
    }
    let enc = fallback.unwrap_or_else(|| {
        let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
        det.feed(bytes, true);
        det.guess(None, chardetng::Utf8Detection::Deny)
    });
    Ok(decode_with(enc, bytes, false))
}

fn decode_with(enc: &'static Encoding, bytes: &[u8], bom: bool) -> Decoded {
    let (text, lossy) = enc.decode_without_bom_handling(bytes);
    let text = text.into_owned();
    let line_ending = LineEnding::detect(&text);
    Decoded { text, format: TextFormat { encoding: enc, bom, line_ending }, lossy }
}

/// Whether bytes that are not valid UTF-8 are still UTF-8 text with a few damaged spots (a
/// truncated line, one stray Latin-1 byte): its valid multi-byte characters outnumber its
/// invalid sequences. Re-reading the whole file in a legacy code page for one bad byte turned
/// every correct character into mojibake; a file really written in such a code page has almost
/// no byte pairs that happen to form a UTF-8 character.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (mut multibyte, mut invalid) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        multibyte += chunk.valid().bytes().filter(|b| *b >= 0xC0).count();
        invalid += usize::from(!chunk.invalid().is_empty());
    }
    multibyte > invalid
}

/// UTF-16 without a BOM: an even length, NULs only at one parity (the high bytes of ASCII
/// characters) and at least one in [`UTF16_MIN_NUL_SHARE`] of that parity's bytes, and a clean
/// decode. A stray NUL in an ASCII file is at one parity too, and almost any byte pairs decode
/// as UTF-16; only the share of NULs tells text in UTF-16 from such a file.
fn utf16_without_bom(bytes: &[u8]) -> Option<&'static Encoding> {
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let (mut even, mut odd) = (0usize, 0usize);
    for (i, b) in bytes.iter().enumerate() {
        if *b == 0 {
            if i % 2 == 0 { even += 1 } else { odd += 1 }
        }
    }
    let (enc, nuls) = match (even, odd) {
        (0, o) if o > 0 => (UTF_16LE, o),
        (e, 0) if e > 0 => (UTF_16BE, e),
        _ => return None,
    };
    if nuls * UTF16_MIN_NUL_SHARE < bytes.len() / 2 {
        return None;
    }
    let (_, had_errors) = enc.decode_without_bom_handling(bytes);
    (!had_errors).then_some(enc)
}

/// UTF-16 without a BOM needs a NUL in at least one of this many characters: the high byte of
/// an ASCII character (space, newline, digit, punctuation), which even text in Cyrillic or
/// Greek has in one character of five or so.
const UTF16_MIN_NUL_SHARE: usize = 10;

/// Encodes `text` in `format`'s encoding, with its BOM when it had one. Line endings are
/// written as they are in `text`; use [`LineEnding::apply`] on new content first.
pub fn encode(text: &str, format: &TextFormat) -> Vec<u8> {
    let enc = format.encoding;
    let mut out = Vec::with_capacity(text.len() + 3);
    if enc == UTF_16LE || enc == UTF_16BE {
        let le = enc == UTF_16LE;
        if format.bom {
            out.extend_from_slice(if le { &[0xFF, 0xFE] } else { &[0xFE, 0xFF] });
        }
        for unit in text.encode_utf16() {
            out.extend_from_slice(&if le { unit.to_le_bytes() } else { unit.to_be_bytes() });
        }
        return out;
    }
    if format.bom && enc == UTF_8 {
        out.extend_from_slice(&[0xEF, 0xBB, 0xBF]);
    }
    let (bytes, _, _) = enc.encode(text);
    out.extend_from_slice(&bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(bytes: &[u8]) -> Decoded {
        let d = decode(bytes, None).unwrap();
        assert!(!d.lossy);
        assert_eq!(encode(&d.text, &d.format), bytes, "round trip of {:?}", d.format);
        d
    }

    #[test]
    fn r6_e12_utf8_with_and_without_bom_round_trip() {
        let d = round_trip("héllo\nwörld\n".as_bytes());
        assert_eq!(d.format.encoding, UTF_8);
        assert!(!d.format.bom);
        let mut with_bom = vec![0xEF, 0xBB, 0xBF];
        with_bom.extend_from_slice("héllo\r\n".as_bytes());
        let d = round_trip(&with_bom);
        assert!(d.format.bom);
        assert_eq!(d.text, "héllo\r\n");
    }

    #[test]
    fn r6_e12_utf16_le_and_be_with_and_without_bom_round_trip() {
        let text = "Привет, world\r\nline 2\n";
        for (enc, bom) in [(UTF_16LE, true), (UTF_16LE, false), (UTF_16BE, true), (UTF_16BE, false)] {
            let fmt = TextFormat { encoding: enc, bom, line_ending: LineEnding::Mixed { crlf_dominant: true } };
            let bytes = encode(text, &fmt);
            let d = round_trip(&bytes);
            assert_eq!(d.text, text);
            assert_eq!((d.format.encoding, d.format.bom), (enc, bom));
        }
    }

    #[test]
    fn r6_e12_windows_1251_is_detected_and_round_trips() {
        let text = "// Комментарий на русском языке: привет, мир!\nфункция возвращает значение\n";
        let (bytes, _, _) = encoding_rs::WINDOWS_1251.encode(text);
        let d = round_trip(&bytes);
        assert_eq!(d.format.encoding, encoding_rs::WINDOWS_1251);
        assert_eq!(d.text, text);
    }

    #[test]
    fn r6_fallback_setting_decides_ambiguous_bytes() {
        let (bytes, _, _) = encoding_rs::KOI8_R.encode("привет мир\n");
        let d = decode(&bytes, Some(encoding_rs::KOI8_R)).unwrap();
        assert_eq!(d.text, "привет мир\n");
    }

    #[test]
    fn e12_crlf_and_mixed_endings_round_trip_and_are_detected() {
        assert_eq!(round_trip(b"a\r\nb\r\n").format.line_ending, LineEnding::CrLf);
        let d = round_trip(b"a\r\nb\nc\r\n");
        assert_eq!(d.format.line_ending, LineEnding::Mixed { crlf_dominant: true });
        assert_eq!(d.format.line_ending.apply("x\ny"), "x\r\ny");
        assert_eq!(LineEnding::Lf.apply("x\r\ny"), "x\ny");
    }

    #[test]
    fn r6_gr3_one_stray_nul_in_ascii_text_is_not_utf16() {
        let mut log = b"needle early\n".to_vec();
        for _ in 0..10 {
            log.extend_from_slice(b"some log line\n");
        }
        // One NUL at an even offset, then at an odd one: each looked like UTF-16 BE / LE.
        let mut even = log.clone();
        even.extend_from_slice(b"a\x00 end\n");
        assert_eq!(even.len() % 2, 0);
        assert_eq!(decode(&even, None), Err(TextError::Binary));
        let mut odd = log;
        odd.extend_from_slice(b"\x00 end!\n");
        assert_eq!(odd.len() % 2, 0);
        assert_eq!(decode(&odd, None), Err(TextError::Binary));
        // Cyrillic in UTF-16 without a BOM has NULs only in its spaces and ASCII, and still is.
        let text = "Привет мир, как дела?\nвсё хорошо\n";
        let fmt = TextFormat { encoding: UTF_16LE, bom: false, line_ending: LineEnding::Lf };
        assert_eq!(round_trip(&encode(text, &fmt)).text, text);
    }

    #[test]
    fn r6_gr3_utf8_with_a_few_invalid_bytes_stays_utf8() {
        let mut bytes = "// 日本語 comment ✓\n".repeat(50).into_bytes();
        bytes.extend_from_slice(b"bad byte: \xff\xfe here\n");
        bytes.extend_from_slice("// more ✓\nПривет utf8\n".as_bytes());
        let d = decode(&bytes, None).unwrap();
        assert_eq!(d.format.encoding, UTF_8);
        assert!(d.lossy);
        assert!(d.text.starts_with("// 日本語 comment ✓\n"));
        assert!(d.text.ends_with("bad byte: \u{FFFD}\u{FFFD} here\n// more ✓\nПривет utf8\n"), "{}", d.text);
        // Even the project's fallback does not turn clear UTF-8 into another code page.
        assert_eq!(decode(&bytes, Some(encoding_rs::WINDOWS_1251)).unwrap().format.encoding, UTF_8);
        // A short mixed line: six Cyrillic letters against two bad bytes.
        let mixed = [b"ok needle \xff\xfe bad\n".as_slice(), "Привет utf8\n".as_bytes()].concat();
        let d = decode(&mixed, None).unwrap();
        assert_eq!((d.format.encoding, d.text.lines().nth(1)), (UTF_8, Some("Привет utf8")));
    }

    #[test]
    fn binary_bytes_are_refused() {
        assert_eq!(decode(b"\x7fELF\x02\x01\x00\x00\x00\x01\x00", None), Err(TextError::Binary));
    }
}
