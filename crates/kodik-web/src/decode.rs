//! Bytes to text: the charset from the BOM, the `Content-Type` header, `<meta charset>`, or
//! detection (chardetng), in that order — except that a header saying ISO-8859-1 /
//! windows-1252 (many servers' default, often wrong) yields to a `<meta>` that says otherwise,
//! and a header saying UTF-8 yields when the bytes are not UTF-8.

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
        (Some(h), Some(m)) if h == WINDOWS_1252 && m != h => m,
        (Some(h), _) => h,
        (None, Some(m)) => m,
        (None, None) => detect(body),
    };
    // A page that declares UTF-16 in <meta> is really ASCII-compatible (WHATWG).
    let chosen = if chosen == encoding_rs::UTF_16LE || chosen == encoding_rs::UTF_16BE { UTF_8 } else { chosen };
    let (text, _) = chosen.decode_without_bom_handling(body);
    (text.into_owned(), chosen)
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
