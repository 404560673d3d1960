//! A fetched body as readable text, by content type: HTML → Markdown, JSON pretty-printed,
//! text as is, PDF → text, images and other binaries → a one-line description (W2).

use crate::decode::decode;
use crate::html;
use crate::sections::size;
use crate::stop::Stop;

/// What a body turned into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Title, when the content has one.
    pub title: String,
    /// HTML only: each `id` on the page with the start of its element's text (see
    /// [`crate::html::Converted::anchors`]).
    pub anchors: Vec<(String, String)>,
    /// The text shown to the model (Markdown for HTML).
    pub markdown: String,
    /// The content type, as sent or as sniffed.
    pub content_type: String,
    /// What kind of content it was.
    pub kind: Kind,
}

impl Page {
    /// A page of `kind` without title or anchors: everything but HTML.
    pub fn plain(markdown: String, content_type: String, kind: Kind) -> Self {
        Self { title: String::new(), anchors: Vec::new(), markdown, content_type, kind }
    }
}

/// The kinds of content `web_fetch` tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An HTML page, converted.
    Html {
        /// Main content was extracted (false: whole page minus chrome).
        extracted: bool,
        /// Scripts and almost no text: probably rendered by JavaScript.
        client_rendered: bool,
    },
    /// JSON, pretty-printed.
    Json,
    /// Text as is.
    Text,
    /// PDF text.
    Pdf,
    /// An image or another binary: only described.
    Binary,
}

/// Converts `body`. Runs the HTML converter and the PDF extractor on a big-stack thread (both
/// recurse); a panic in either becomes an error, and a PDF whose drawing would recurse without
/// end is refused before extraction (a stack overflow cannot be caught).
pub fn to_page(body: &[u8], content_type: Option<&str>, url: &str) -> Result<Page, String> {
    to_page_stoppable(body, content_type, url, &Stop::new())
}

/// [`to_page`] that ends early, with an error, once `stop` is raised (see [`crate::stop`]).
pub fn to_page_stoppable(body: &[u8], content_type: Option<&str>, url: &str, stop: &Stop) -> Result<Page, String> {
    let declared = content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let ct = match declared.as_deref() {
        None | Some("" | "application/octet-stream" | "binary/octet-stream" | "application/unknown") => sniff(body),
        // A PDF served under a text label (a misconfigured server) is still a PDF: its source is
        // no page to read.
        Some(_) if body.starts_with(b"%PDF-") => "application/pdf".to_string(),
        Some(c) => c.to_string(),
    };
    if ct == "text/html" || ct == "application/xhtml+xml" {
        let (text, _) = decode(body, content_type, true);
        let c = html::convert_stoppable(text, Some(url.to_string()), stop.clone())?;
        return Ok(Page {
            title: c.title,
            anchors: c.anchors,
            markdown: c.markdown,
            content_type: ct,
            kind: Kind::Html { extracted: c.extracted, client_rendered: c.client_rendered },
        });
    }
    if ct == "application/json" || ct.ends_with("+json") || ct == "text/json" {
        let (text, _) = decode(body, content_type, false);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            let pretty = serde_json::to_string_pretty(&v).unwrap_or(text);
            return Ok(Page::plain(pretty, ct, Kind::Json));
        }
        return Ok(Page::plain(text, ct, Kind::Text));
    }
    if ct == "application/pdf" {
        let bytes = body.to_vec();
        let stop = stop.clone();
        let worker = std::thread::Builder::new()
            .name("kodik-web-pdf".into())
            .stack_size(64 << 20)
            .spawn(move || crate::pdf::extract_text_stoppable(&bytes, &stop))
            .map_err(|e| format!("could not start the PDF reader: {e}"))?;
        let text =
            worker.join().map_err(|_| "the PDF could not be read (its structure is not supported)".to_string())??;
        let text = text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n").trim().to_string();
        if text.is_empty() {
            return Err(format!("the PDF ({}) holds no extractable text (scanned pages?)", size(body.len())));
        }
        return Ok(Page::plain(text, ct, Kind::Pdf));
    }
    if ct.starts_with("text/")
        || ct.ends_with("+xml")
        || ct == "application/xml"
        || ct == "application/javascript"
        || (ct.starts_with("application/") && looks_like_text(body))
    {
        let (text, _) = decode(body, content_type, false);
        return Ok(Page::plain(text, ct, Kind::Text));
    }
    Ok(Page::plain(describe_binary(body, &ct), ct, Kind::Binary))
}

/// Whether a body declared as some `application/*` type is text after all: servers label YAML,
/// TOML, NDJSON, shell scripts, SQL … with types of their own, and the bytes tell. UTF-8 without
/// NUL in the first 8 KB (a character cut at the end of the window is fine) is text.
fn looks_like_text(body: &[u8]) -> bool {
    let head = &body[..body.len().min(8192)];
    if head.contains(&0) || matches!(sniff(head).as_str(), "application/pdf" | "application/zip" | "application/gzip") {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && head.len() == 8192,
    }
}

/// The type of an unlabelled body from its first bytes.
fn sniff(body: &[u8]) -> String {
    let head = &body[..body.len().min(512)];
    let t = match head {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xFF, 0xD8, 0xFF, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "image/webp",
        [b'%', b'P', b'D', b'F', b'-', ..] => "application/pdf",
        [b'P', b'K', 3, 4, ..] => "application/zip",
        [0x1F, 0x8B, ..] => "application/gzip",
        _ => {
            if head.contains(&0) {
                "application/octet-stream"
            } else {
                let lower = String::from_utf8_lossy(head).trim_start().to_ascii_lowercase();
                if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
                    "text/html"
                } else if lower.starts_with('{') || lower.starts_with('[') {
                    "application/json"
                } else {
                    "text/plain"
                }
            }
        }
    };
    t.to_string()
}

/// One line: type, size and, for PNG/GIF, the dimensions. Never the bytes.
fn describe_binary(body: &[u8], ct: &str) -> String {
    let dims = match body {
        [
            0x89,
            b'P',
            b'N',
            b'G',
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            b'I',
            b'H',
            b'D',
            b'R',
            w0,
            w1,
            w2,
            w3,
            h0,
            h1,
            h2,
            h3,
            ..,
        ] => Some((u32::from_be_bytes([*w0, *w1, *w2, *w3]), u32::from_be_bytes([*h0, *h1, *h2, *h3]))),
        [b'G', b'I', b'F', b'8', _, _, w0, w1, h0, h1, ..] => {
            Some((u32::from(u16::from_le_bytes([*w0, *w1])), u32::from(u16::from_le_bytes([*h0, *h1]))))
        }
        _ => None,
    };
    let what = if ct.starts_with("image/") { "An image" } else { "A binary file" };
    match dims {
        Some((w, h)) => {
            format!("{what} ({ct}, {}, {w}×{h} pixels); its bytes are not shown as text.", size(body.len()))
        }
        None => format!("{what} ({ct}, {}); its bytes are not shown as text.", size(body.len())),
    }
}
