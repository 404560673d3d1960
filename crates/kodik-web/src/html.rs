//! HTML → Markdown: chrome removed, main content extracted (dom_smoothie, a readability.js
//! port), converted by htmd with fenced code blocks that keep their language.
//!
//! Runs on a thread with a big stack ([`convert_on_big_stack`]) and after [`limit_depth`], so
//! 100 000 nested elements cannot overflow anything recursive in the parsers or the converter.

use std::borrow::Cow;
use std::sync::OnceLock;

use dom_query::Document;
use htmd::HtmlToMarkdown;
use htmd::options::{CodeBlockStyle, Options};

/// Elements deeper than this are unwrapped (their text stays, their tags go).
pub const MAX_DEPTH: usize = 256;

/// Below this much article text, extraction is taken to have failed and the whole page (minus
/// navigation and footer) is converted instead.
const MIN_ARTICLE_CHARS: usize = 250;

/// Below this much text in the whole page, a page with scripts is taken for an application shell.
const SHELL_TEXT_CHARS: usize = 200;

/// A converted page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// `<title>` (or readability's title).
    pub title: String,
    /// The Markdown.
    pub markdown: String,
    /// Whether main-content extraction was used (false: the whole page minus chrome).
    pub extracted: bool,
    /// The page looks client-rendered: scripts and almost no text.
    pub client_rendered: bool,
}

/// Converts on a thread with a 256 MB stack (reserved, not committed): deep documents recurse.
pub fn convert_on_big_stack(html: String, url: Option<String>) -> Result<Converted, String> {
    let worker = std::thread::Builder::new()
        .name("kodik-web-html".into())
        .stack_size(256 << 20)
        .spawn(move || convert(&html, url.as_deref()))
        .map_err(|e| format!("could not start the HTML converter thread: {e}"))?;
    worker.join().map_err(|_| "the HTML converter failed on this page".to_string())
}

/// HTML to Markdown with main-content extraction.
pub fn convert(html: &str, url: Option<&str>) -> Converted {
    let limited = limit_depth(html, MAX_DEPTH);
    let doc = Document::from(limited.as_ref());
    let had_scripts = doc.select("script").exists();
    let noscript_text = doc.select("noscript").text().trim().to_string();
    let title = page_title(&doc);
    clean(&doc);
    normalise_code_languages(&doc);
    let body_text_len = doc.select("body").text().split_whitespace().map(str::len).sum::<usize>();

    // A page that marks its main content (one <main>/[role=main], else one <article>) holding
    // most of the text needs no scoring: readability costs more than parsing and converting
    // together on a large page.
    if let Some(content) = marked_main(&doc, body_text_len) {
        let markdown = tidy(&converter().convert(&content).unwrap_or_default());
        return Converted { title, markdown, extracted: true, client_rendered: false };
    }

    // Classes carry the code blocks' languages (normalised above) through extraction.
    let cfg = dom_smoothie::Config { keep_classes: true, min_score_to_adjust: 10.0, ..Default::default() };
    let article = dom_smoothie::Readability::with_document(doc, url, Some(cfg))
        .ok()
        .and_then(|mut r| r.parse_with_policy(dom_smoothie::ParsePolicy::Strict).ok());
    let (content, extracted, title) = match article {
        Some(a) if a.text_content.split_whitespace().map(str::len).sum::<usize>() >= MIN_ARTICLE_CHARS => {
            let t = if title.is_empty() { a.title.clone() } else { title };
            (a.content.to_string(), true, t)
        }
        _ => {
            // Extraction took the document apart; the whole page comes from a fresh parse.
            let doc = Document::from(limited.as_ref());
            clean(&doc);
            normalise_code_languages(&doc);
            doc.select("nav, footer, header, aside, [role=navigation], [role=banner], [role=contentinfo]").remove();
            let body = doc.select("body");
            let html = if body.exists() { body.html().to_string() } else { doc.html().to_string() };
            (html, false, title)
        }
    };
    let markdown = tidy(&converter().convert(&content).unwrap_or_default());
    let client_rendered = had_scripts
        && body_text_len.saturating_sub(noscript_text.split_whitespace().map(str::len).sum::<usize>())
            < SHELL_TEXT_CHARS;
    Converted { title, markdown, extracted, client_rendered }
}

/// The HTML of the element the page marks as its main content, when it holds at least 60% of
/// the page's text (and enough of it), with navigation and asides inside it removed.
fn marked_main(doc: &Document, body_text_len: usize) -> Option<String> {
    let mains = doc.select("main, [role=main]");
    let candidate = if mains.length() == 1 {
        mains
    } else {
        let articles = doc.select("article");
        if articles.length() != 1 {
            return None;
        }
        articles
    };
    let len = candidate.text().split_whitespace().map(str::len).sum::<usize>();
    if len < MIN_ARTICLE_CHARS || len * 10 < body_text_len * 6 {
        return None;
    }
    candidate.select("nav, aside, [role=navigation], [role=complementary]").remove();
    Some(candidate.html().to_string())
}

fn converter() -> &'static HtmlToMarkdown {
    static CONVERTER: OnceLock<HtmlToMarkdown> = OnceLock::new();
    CONVERTER.get_or_init(|| {
        HtmlToMarkdown::builder()
            .options(Options { code_block_style: CodeBlockStyle::Fenced, ..Default::default() })
            .skip_tags(vec![
                "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed", "canvas", "nav",
                "footer", "button", "select", "input", "textarea", "form", "dialog", "head",
            ])
            .add_handler(vec!["img"], |_: &dyn htmd::element_handler::Handlers, el: htmd::Element| {
                let alt = el
                    .attrs
                    .iter()
                    .find(|a| a.name.local.as_ref() == "alt")
                    .map(|a| a.value.trim().replace(['(', ')', '\n'], " "))
                    .unwrap_or_default();
                if alt.is_empty() { Some("".into()) } else { Some(format!("(image: {alt})").into()) }
            })
            .build()
    })
}

fn page_title(doc: &Document) -> String {
    let og = doc.select("meta[property='og:title']").attr("content").map(|t| t.to_string());
    let t = doc.select("title").first().text().to_string();
    let t = if t.trim().is_empty() { og.unwrap_or_default() } else { t };
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Drops what is never content: code, styling, vector art, embedded frames, and cookie or
/// consent banners.
fn clean(doc: &Document) {
    doc.select("script, style, noscript, template, svg, math, iframe, object, embed, canvas, link, meta").remove();
    // One pass over the elements that have an id or class (a selector list with every word and
    // tag costs several times more on a large page).
    const BANNER_WORDS: [&str; 5] = ["cookie", "consent", "gdpr", "cc-banner", "onetrust"];
    for el in doc.select("div[id], div[class], section[id], section[class], aside, dialog, form, footer").iter() {
        let id = el.attr("id").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
        let class = el.attr("class").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
        if BANNER_WORDS.iter().any(|w| id.contains(w) || class.contains(w)) {
            el.remove();
        }
    }
    // Heading permalinks (`§`, `#`, `¶`) would end up inside every heading's title.
    for a in doc.select("a[href^='#']").iter() {
        if matches!(a.text().trim(), "" | "§" | "#" | "¶" | "🔗") {
            a.remove();
        }
    }
    // Images carry only their alt text; a data: URI is megabytes of nothing for the model.
    for img in doc.select("img[src^='data:']").iter() {
        let alt = img.attr("alt").map(|a| a.trim().to_string()).unwrap_or_default();
        if alt.is_empty() {
            img.remove();
        } else {
            img.replace_with_html(format!("<span>(image: {})</span>", escape_text(&alt)));
        }
    }
}

/// Gives every `<pre>` a `<code class="language-X">` when its language is written anywhere
/// the common highlighters put it: `language-*`, `lang-*`, `highlight-source-*` (on the `pre`,
/// its `code` or the wrapping `div`), or `data-lang`.
fn normalise_code_languages(doc: &Document) {
    for pre in doc.select("pre").iter() {
        let code = pre.select("code").first();
        let parent = pre.parent();
        let lang = [&code, &pre, &parent]
            .iter()
            .find_map(|s| language_of(s.attr("class").as_deref(), s.attr("data-lang").as_deref()));
        let Some(lang) = lang else { continue };
        if code.exists() {
            code.set_attr("class", &format!("language-{lang}"));
        } else {
            let inner = pre.inner_html();
            pre.set_html(format!("<code class=\"language-{lang}\">{inner}</code>"));
        }
    }
}

fn language_of(class: Option<&str>, data_lang: Option<&str>) -> Option<String> {
    if let Some(l) = data_lang.map(str::trim).filter(|l| is_lang_token(l)) {
        return Some(l.to_ascii_lowercase());
    }
    class?.split_whitespace().find_map(|c| {
        ["language-", "lang-", "highlight-source-", "highlight-", "brush:"]
            .iter()
            .find_map(|p| c.strip_prefix(p))
            .filter(|l| is_lang_token(l))
            .map(str::to_ascii_lowercase)
    })
}

fn escape_text(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn is_lang_token(l: &str) -> bool {
    !l.is_empty() && l.len() <= 32 && l.chars().all(|c| c.is_ascii_alphanumeric() || "+#-_.".contains(c))
}

/// Collapses runs of blank lines left by removed elements.
fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut blank = 0;
    let mut in_fence = false;
    for line in md.lines() {
        let t = line.trim_end();
        if t.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if t.is_empty() && !in_fence {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(if in_fence { line } else { t });
        out.push('\n');
    }
    out.trim().to_string()
}

/// Unwraps elements nested deeper than `max`: their start and end tags are dropped, their
/// content kept. Elements whose end tag is optional or absent (void, `p`, `li`, …) do not count,
/// so ordinary malformed pages are left alone; the text of `script`/`style`/`textarea` is copied
/// verbatim. Returns the input untouched when nothing is that deep.
pub fn limit_depth(html: &str, max: usize) -> Cow<'_, str> {
    let b = html.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `html` already accounted for in `out`
    let mut depth = 0usize;
    let mut excess = 0usize;
    let mut i = 0;
    while let Some(off) = memchr_lt(&b[i..]) {
        let start = i + off;
        i = start + 1;
        let Some(&next) = b.get(i) else { break };
        if next == b'!' || next == b'?' {
            let end = if b[i..].starts_with(b"!--") {
                find(b, i, b"-->").map(|e| e + 3)
            } else {
                find(b, i, b">").map(|e| e + 1)
            };
            i = end.unwrap_or(b.len());
            continue;
        }
        let closing = next == b'/';
        let name_start = if closing { i + 1 } else { i };
        let name_len = b[name_start..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'-').count();
        if name_len == 0 || !b[name_start].is_ascii_alphabetic() {
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let Some(end) = tag_end(b, name_start + name_len) else { break };
        i = end;
        if closing {
            if uncounted(&name) {
                continue;
            }
            if excess > 0 {
                excess -= 1;
                let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
                o.push_str(&html[copied..start]);
                copied = end;
            } else {
                depth = depth.saturating_sub(1);
            }
            continue;
        }
        if RAW_TEXT.contains(&name.as_str()) {
            let close = format!("</{name}");
            i = find_ci(b, i, close.as_bytes()).unwrap_or(b.len());
            continue;
        }
        let self_closing = b[..end].ends_with(b"/>");
        if uncounted(&name) || self_closing {
            continue;
        }
        if depth >= max {
            excess += 1;
            let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
            o.push_str(&html[copied..start]);
            copied = end;
        } else {
            depth += 1;
        }
    }
    match out {
        None => Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            Cow::Owned(o)
        }
    }
}

const RAW_TEXT: [&str; 8] = ["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "plaintext"];

fn uncounted(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
            | "p"
            | "li"
            | "dt"
            | "dd"
            | "tr"
            | "td"
            | "th"
            | "option"
            | "optgroup"
            | "thead"
            | "tbody"
            | "tfoot"
            | "colgroup"
            | "rb"
            | "rt"
            | "rtc"
            | "rp"
            | "html"
            | "head"
            | "body"
    )
}

fn memchr_lt(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b'<')
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

fn find_ci(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle)).map(|p| p + from)
}

/// The index just past the `>` ending a tag whose name ends at `from`, quotes respected.
fn tag_end(b: &[u8], from: usize) -> Option<usize> {
    let mut quote = None;
    for (k, &c) in b.get(from..)?.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(c),
            (None, b'>') => return Some(from + k + 1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w2_deep_nesting_is_unwrapped_past_the_limit_and_text_survives() {
        let n = 100_000;
        let html = format!("<html><body>{}deep text{}</body></html>", "<div>".repeat(n), "</div>".repeat(n));
        let limited = limit_depth(&html, 10);
        assert_eq!(limited.matches("<div>").count(), 10);
        assert_eq!(limited.matches("</div>").count(), 10);
        let c = convert_on_big_stack(html, None).unwrap();
        assert!(c.markdown.contains("deep text"), "{}", c.markdown);
    }

    #[test]
    fn shallow_pages_are_not_copied() {
        let html = "<div><p>a<p>b<ul><li>x<li>y</ul></div><script>if (a<b) {}</script>";
        assert!(matches!(limit_depth(html, 3), Cow::Borrowed(_)));
    }

    #[test]
    fn w2_code_languages_come_from_every_common_spelling() {
        let html = r#"<html><body>
            <pre><code class="lang-python">print(1)</code></pre>
            <div class="highlight highlight-source-rust"><pre>fn main() {}</pre></div>
            <pre data-lang="go"><code>package main</code></pre>
            <pre class="language-ts"><code>let x = 1;</code></pre>
            </body></html>"#;
        let md = convert(html, None).markdown;
        for fence in ["```python\nprint(1)", "```rust\nfn main() {}", "```go\npackage main", "```ts\nlet x = 1;"] {
            assert!(md.contains(fence), "{fence} missing in:\n{md}");
        }
    }
}
