//! Bytes to text: the charset from the BOM, the `Content-Type` header, `<meta charset>`, or
//! detection (chardetng), in that order — except that a header saying ISO-8859-1 /
//! windows-1252 (many servers' default, often wrong) yields to a `<meta>` that says otherwise,
//! a legacy header yields when the non-ASCII bytes are all valid UTF-8, a header saying UTF-8
//! yields when the bytes are not UTF-8, and UTF-16 declared for a body without NUL bytes is not
//! believed.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};

/// Decodes `body`; returns the text and the encoding used.
pub fn decode(body: &[u8], content_type: Option<&str>, html: bool) -> (String, &'static Encoding) {
    if let Some((enc, bom_len)) = Encoding::for_bom(body) {
        let (text, _) = enc.decode_without_bom_handling(&body[bom_len..]);
        return (text.into_owned(), enc);
    }
    let header = content_type.and_then(charset_param).and_then(|l| Encoding::for_label(l.as_bytes()));
    let meta = if html { meta_charset(body) } else { None };
    let chosen = match (header, meta) {
        (Some(h), _) if h == UTF_8 && std::str::from_utf8(body).is_err() => meta.unwrap_or_else(|| detect(body)),
        // Non-ASCII bytes that all form UTF-8 sequences are UTF-8 whatever a legacy header says
        // (Apache's `AddDefaultCharset ISO-8859-1` on UTF-8 files): in a single-byte or legacy
        // multi-byte text they essentially never line up like that.
        (Some(h), _) if h != UTF_8 && !body.is_ascii() && is_utf8(body) => UTF_8,
        (Some(h), Some(m)) if h == WINDOWS_1252 && m != h => m,
        (Some(h), _) => h,
        (None, Some(m)) => m,
        (None, None) => detect(body),
    };
    // UTF-16 text holds NUL bytes (every ASCII character has one); a body declared UTF-16
    // without any is ASCII-compatible, as WHATWG rules for <meta> (and a wrong header is too).
    let chosen = if (chosen == encoding_rs::UTF_16LE || chosen == encoding_rs::UTF_16BE)
        && !body[..body.len().min(1024)].contains(&0)
    {
        if meta.is_some_and(|m| m != chosen && m != encoding_rs::UTF_16LE && m != encoding_rs::UTF_16BE) {
            meta.unwrap_or(UTF_8)
        } else {
            detect(body)
        }
    } else {
        chosen
    };
    let (text, _) = chosen.decode_without_bom_handling(body);
    (text.into_owned(), chosen)
}

/// Valid UTF-8, allowing a character cut off at the end (a body truncated at the size limit).
fn is_utf8(body: &[u8]) -> bool {
    match std::str::from_utf8(body) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

fn detect(body: &[u8]) -> &'static Encoding {
    if std::str::from_utf8(body).is_ok() {
        return UTF_8;
    }
    let mut d = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    d.feed(&body[..body.len().min(64 * 1024)], body.len() <= 64 * 1024);
    d.guess(None, chardetng::Utf8Detection::Allow)
}

fn charset_param(ct: &str) -> Option<String> {
    ct.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("charset").then(|| v.trim().trim_matches(['"', '\'']).to_string())
    })
}

/// `<meta charset=…>` or `<meta http-equiv=Content-Type content="…; charset=…">` in the first
/// 4 KB (as browsers prescan 1024 bytes, a little more generous).
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(p) = rest.find("<meta") {
        rest = &rest[p + 5..];
        let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
        if let Some(c) = tag.find("charset") {
            let v = tag[c + 7..].trim_start().strip_prefix('=')?.trim_start();
            let v = v.trim_start_matches(['"', '\'']);
            let end = v
                .find(|ch: char| ch == '"' || ch == '\'' || ch == ';' || ch.is_whitespace() || ch == '/')
                .unwrap_or(v.len());
            if let Some(e) = Encoding::for_label(&v.as_bytes()[..end]) {
                return Some(e);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w2_a_latin1_header_yields_to_a_windows_1251_meta() {
        let (bytes, _, _) = encoding_rs::WINDOWS_1251.encode("Привет, мир");
        let mut body = b"<html><head><meta charset=\"windows-1251\"></head><body>".to_vec();
        body.extend_from_slice(&bytes);
        let (text, enc) = decode(&body, Some("text/html; charset=ISO-8859-1"), true);
        assert_eq!(enc, encoding_rs::WINDOWS_1251);
        assert!(text.contains("Привет, мир"));
    }

    #[test]
    fn w2_a_legacy_header_on_a_utf8_body_yields_to_utf8() {
        let text = "Привет, мир — “quotes” café naïve 日本語.";
        for header in
            ["text/plain; charset=ISO-8859-1", "text/html; charset=windows-1251", "text/plain; charset=koi8-r"]
        {
            let (got, enc) = decode(text.as_bytes(), Some(header), header.contains("html"));
            assert_eq!((got.as_str(), enc), (text, UTF_8), "{header}");
        }
        // Truncated in the middle of a character, still UTF-8.
        let cut = &text.as_bytes()[..text.len() - 1];
        assert_eq!(decode(cut, Some("text/plain; charset=ISO-8859-1"), false).1, UTF_8);
        // Real Latin-1 stays Latin-1.
        let (latin, _, _) = WINDOWS_1252.encode("café naïve");
        assert_eq!(decode(&latin, Some("text/plain; charset=ISO-8859-1"), false).0, "café naïve");
    }

    #[test]
    fn w2_utf16_declared_for_a_body_without_nul_bytes_is_not_believed() {
        let body = "<html><body><p>Hello, wörld</p></body></html>";
        assert_eq!(decode(body.as_bytes(), Some("text/html; charset=utf-16"), true).0, body);
        let real: Vec<u8> = "Hello".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(decode(&real, Some("text/plain; charset=utf-16le"), false).0, "Hello");
    }

    #[test]
    fn bom_wins_and_detection_fills_in() {
        let mut body = vec![0xEF, 0xBB, 0xBF];
        body.extend_from_slice("héllo".as_bytes());
        assert_eq!(decode(&body, Some("text/plain; charset=windows-1252"), false).0, "héllo");
        let (bytes, _, _) =
            encoding_rs::WINDOWS_1251.encode("Съешь же ещё этих мягких французских булок, да выпей чаю");
        let (text, _) = decode(&bytes, None, false);
        assert!(text.contains("французских"), "{text}");
    }
}
