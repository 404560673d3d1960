//! HTML → Markdown: chrome removed, main content extracted, converted by htmd with fenced code
//! blocks that keep their language.
//!
//! The page is parsed once (dom_query). One pass over that tree finds the title, the text
//! weight of the page and of the element it marks as its main content, and whether it is an
//! application shell. The chosen subtree is then copied straight into the tree htmd converts —
//! dropping scripts, styles, banners, navigation and the like on the way and writing every code
//! block's language where htmd looks for it — so nothing is serialised back to HTML and parsed
//! again. Only pages that mark no main content pay for readability scoring (dom_smoothie, a
//! readability.js port), on the same parsed tree.
//!
//! Runs on a thread with a big stack ([`convert_on_big_stack`]) and after [`limit_depth`], so
//! 100 000 nested elements cannot overflow anything recursive in the parsers or the converter.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock, mpsc};

use dom_query::{Document, NodeData as DqData, NodeId, Tree};
use htmd::HtmlToMarkdown;
use htmd::options::{CodeBlockStyle, Options};
use html5ever::tendril::StrTendril;
use html5ever::{Attribute, LocalName, QualName, local_name, ns};
use markup5ever_rcdom::{Node as MdNode, NodeData as MdData};

use crate::stop::{Stop, checkpoint};

/// Elements deeper than this are unwrapped (their text stays, their tags go).
pub const MAX_DEPTH: usize = 256;

/// Below this much article text, extraction is taken to have failed and the whole page (minus
/// navigation and footer) is converted instead.
const MIN_ARTICLE_CHARS: usize = 250;

/// Below this much text in the whole page, a page with scripts is taken for an application shell.
const SHELL_TEXT_CHARS: usize = 200;
/// Below this much text, a page with scripts and an empty mount point (`<div id="root">`) is an
/// application shell: navigation and a footer fit, an article does not.
const SHELL_WITH_MOUNT_CHARS: usize = 1500;

/// Ids React, Vue, Next.js, Nuxt, Angular, Svelte and Quasar apps are mounted on.
fn is_mount_id(id: &str) -> bool {
    matches!(id, "root" | "app" | "__next" | "__nuxt" | "svelte" | "q-app" | "react-root" | "app-root" | "main-app")
}

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
    /// Each `id` (and `<a name>`) on the page with the start of its element's text: what a
    /// URL's `#fragment` points at, found again in the Markdown by that text.
    pub anchors: Vec<(String, String)>,
}

/// Converts on a thread with a 256 MB stack (reserved, not committed): deep documents recurse.
pub fn convert_on_big_stack(html: String, url: Option<String>) -> Result<Converted, String> {
    convert_stoppable(html, url, Stop::new())
}

/// [`convert_on_big_stack`] that ends early, with an error, once `stop` is raised: the
/// converter's loops check it (see [`crate::stop`]).
pub fn convert_stoppable(html: String, url: Option<String>, stop: Stop) -> Result<Converted, String> {
    on_big_stack(move || stop.run(|| convert(&html, url.as_deref())))?.map_err(|e| e.to_string())
}

type Job = Box<dyn FnOnce() + Send>;

/// Idle converter threads. Threads are kept rather than spawned per page: a fresh thread gets a
/// fresh malloc arena and stack, and faulting in that memory cost a quarter of the conversion
/// time of a 2 MB page.
static IDLE_WORKERS: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());
/// Idle threads kept at most; more run one job and end.
const MAX_IDLE_WORKERS: usize = 4;

/// Runs `f` on one of the big-stack converter threads; a panic in `f` is an error.
pub fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (done, result) = mpsc::channel();
    let mut job: Job = Box::new(move || {
        let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    let idle = IDLE_WORKERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    if let Some(worker) = idle {
        // A worker whose thread ended hands the job back; a new one takes it then.
        match worker.send(job) {
            Ok(()) => return receive(result),
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    let (tx, rx) = mpsc::channel::<Job>();
    let me = tx.clone();
    std::thread::Builder::new()
        .name("kodik-web-html".into())
        .stack_size(256 << 20)
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
                let mut idle = IDLE_WORKERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if idle.len() >= MAX_IDLE_WORKERS {
                    break;
                }
                idle.push(me.clone());
            }
        })
        .map_err(|e| format!("could not start the HTML converter thread: {e}"))?;
    tx.send(job).map_err(|_| "the HTML converter thread ended before it started".to_string())?;
    receive(result)
}

fn receive<T>(result: mpsc::Receiver<std::thread::Result<T>>) -> Result<T, String> {
    match result.recv() {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) | Err(_) => Err("the HTML converter failed on this page".to_string()),
    }
}

/// The delay and target of a `<meta http-equiv="refresh" content="N; url=…">` in the first
/// 8 KB of an HTML body (one inside `<noscript>` is for browsers without JavaScript and does not
/// count); `None` without one or without a target.
pub fn meta_refresh(body: &[u8]) -> Option<(u64, String)> {
    let head = String::from_utf8_lossy(&body[..body.len().min(8192)]).into_owned();
    let lower = head.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find("<meta") {
        let at = from + p;
        let end = lower[at..].find('>').map_or(lower.len(), |e| at + e);
        from = end;
        let tag = &lower[at..end];
        let equiv = tag.find("http-equiv").map(|i| tag[i + 10..].trim_start());
        if !equiv.is_some_and(|e| e.trim_start_matches(['=', ' ', '"', '\'']).starts_with("refresh")) {
            continue;
        }
        if lower[..at].rfind("<noscript").is_some_and(|n| lower[..at].rfind("</noscript").is_none_or(|c| c < n)) {
            continue;
        }
        let c = tag.find("content")?;
        let rest = tag[c + 7..].trim_start().strip_prefix('=')?.trim_start();
        let quote = rest.chars().next().filter(|q| *q == '"' || *q == '\'');
        let value_start = at + (tag.len() - rest.len()) + quote.map_or(0, |_| 1);
        let value_end = match quote {
            Some(q) => head[value_start..end].find(q).map_or(end, |e| value_start + e),
            None => head[value_start..end].find(char::is_whitespace).map_or(end, |e| value_start + e),
        };
        // The original case is kept for the URL: paths are case-sensitive.
        return refresh_value(&head[value_start..value_end]);
    }
    None
}

/// The delay and target of a refresh value, `N; url=…` (a `<meta http-equiv="refresh">`
/// content or a `Refresh:` header); `None` without a target.
pub fn refresh_value(value: &str) -> Option<(u64, String)> {
    let value = value.trim();
    let (delay, target) = value.split_once([';', ',']).unwrap_or((value, ""));
    let delay = delay.trim().split('.').next()?.parse().ok()?;
    let target = target.trim();
    // `get`: byte 4 may fall inside a character of a bare non-ASCII target (`0;ドキュメント.html`).
    let target = match target.get(..4) {
        Some(p) if p.eq_ignore_ascii_case("url=") => &target[4..],
        _ => target,
    };
    let target = target.trim().trim_matches(['"', '\'']).trim();
    (!target.is_empty()).then(|| (delay, target.to_string()))
}

/// Bytes the parser is given at a time, with a [`checkpoint`] between.
const PARSE_CHUNK: usize = 64 * 1024;

/// Parses `html` as `Document::from` does, fed in chunks so a stopped conversion ends between
/// two of them rather than after the whole page.
fn parse(html: &str) -> Document {
    use html5ever::tendril::TendrilSink;
    let opts = html5ever::ParseOpts {
        tree_builder: html5ever::tree_builder::TreeBuilderOpts { scripting_enabled: false, ..Default::default() },
        ..Default::default()
    };
    let mut parser = html5ever::parse_document(Document::default(), opts);
    let mut rest = html;
    while !rest.is_empty() {
        checkpoint();
        let mut cut = rest.len().min(PARSE_CHUNK);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        parser.process(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
    }
    parser.finish()
}

/// Tables nested deeper than this make readability scoring (dom_smoothie) too slow to allow:
/// its work grows much faster than the page (2 500 nested tables, 82 KB, took 36 s) and runs
/// where no [`checkpoint`] can stop it. Such a page is converted whole, minus chrome. Old
/// table-layout sites (forums, intranets) nest well under this and keep their extraction:
/// measured in a release build, 64 nested tables of scored text take 10 ms, 256 take 87 ms.
const MAX_TABLE_NESTING_FOR_SCORING: usize = 64;

/// HTML to Markdown with main-content extraction.
pub fn convert(html: &str, url: Option<&str>) -> Converted {
    let limited = limit_depth(html, MAX_DEPTH);
    checkpoint();
    let doc = parse(&limited);
    open_shadow_roots(&doc, &limited);
    math_as_tex(&doc, &limited);
    expand_row_spans(&doc, &limited);
    frames_as_links(&doc, &limited);
    let scan = scan(&doc.tree);
    let anchors = anchors(&doc);
    let title = if scan.title.is_empty() { scan.og_title.clone() } else { scan.title.clone() };
    // Links are written absolute, so the model can fetch them as they stand: against
    // `<base href>` when the page has one, else against the page's own URL.
    let page_url = url.and_then(|u| url::Url::parse(u).ok());
    let base = page_url
        .as_ref()
        .map(|p| scan.base_href.as_deref().and_then(|b| p.join(b.trim()).ok()).unwrap_or_else(|| p.clone()));
    let base = base.as_ref();

    // A page that marks its main content (one <main>/[role=main], else one <article>) holding
    // most of the text needs no scoring: readability costs more than parsing and converting
    // together on a large page.
    if let Some(main) = scan.marked_main() {
        let markdown = to_markdown(&doc.tree, main, Keep::Main, base);
        return Converted { title, markdown, extracted: true, client_rendered: false, anchors };
    }

    // Classes carry the code blocks' languages (normalised first) through extraction.
    clean(&doc);
    normalise_code_languages(&doc);
    let cfg = dom_smoothie::Config { keep_classes: true, min_score_to_adjust: 10.0, ..Default::default() };
    let mut extracted = None;
    checkpoint();
    if scan.table_nesting <= MAX_TABLE_NESTING_FOR_SCORING
        && let Ok(mut r) = dom_smoothie::Readability::with_document(doc, url, Some(cfg))
        && let Ok(a) = r.parse_with_policy(dom_smoothie::ParsePolicy::Strict)
        && text_weight(&a.text_content) >= MIN_ARTICLE_CHARS
        && let Some(root) = r.doc.select("#readability-page-1").nodes().first().map(|n| n.id)
    {
        let t = if title.is_empty() { a.title.clone() } else { title.clone() };
        extracted = Some((to_markdown(&r.doc.tree, root, Keep::Article, base), t));
    }
    let (markdown, is_extracted, title) = match extracted {
        Some((markdown, t)) => (markdown, true, t),
        None => {
            // Extraction took the document apart; the whole page comes from a fresh parse.
            let doc = parse(&limited);
            open_shadow_roots(&doc, &limited);
            math_as_tex(&doc, &limited);
            expand_row_spans(&doc, &limited);
            frames_as_links(&doc, &limited);
            let root = doc.tree.body().map_or_else(|| doc.tree.root_id(), |b| b.id);
            (to_markdown(&doc.tree, root, Keep::WholePage, base), false, title)
        }
    };
    let text = scan.body_chars.saturating_sub(scan.noscript_chars);
    // An empty mount point beside a bundle is the shell whatever chrome surrounds it: a header
    // of links and a footer are text, not the page the script renders into `#root`.
    let client_rendered =
        scan.had_scripts && (text < SHELL_TEXT_CHARS || (scan.empty_mount && text < SHELL_WITH_MOUNT_CHARS));
    Converted { title, markdown, extracted: is_extracted, client_rendered, anchors }
}

/// Puts the content of declarative shadow roots (`<template shadowrootmode="open">`, how
/// server-rendered web components ship their markup) in place of the template, as a browser
/// shows it; any other `<template>` stays inert and is dropped later.
fn open_shadow_roots(doc: &Document, html: &str) {
    if !html.contains("shadowroot") {
        return;
    }
    for t in doc.select("template[shadowrootmode], template[shadowroot]").iter() {
        let Some(node) = t.nodes().first() else { continue };
        // The template's markup lives in its own fragment, not among its children.
        let Some(contents) = node.query(|n| n.as_element().and_then(|e| e.template_contents)).flatten() else {
            continue;
        };
        let inner = doc.tree.get(&contents).map(|f| f.inner_html()).unwrap_or_default();
        t.replace_with_html(inner);
    }
}

/// Puts each MathML formula back as the TeX it was written in (the `application/x-tex`
/// annotation LaTeXML, arXiv, KaTeX and MathJax write, else `alttext`, else the formula's
/// text), in the `<span class="math math-inline">` htmd writes as `$…$` (`$$…$$` for
/// `display="block"`). `<math>` itself stays never-content: its presentation markup read as
/// text is `softmaxQKT/dkV`, and before this the formula vanished mid-sentence. A KaTeX span
/// carries a visible HTML copy beside its MathML; the whole span becomes the one formula.
fn math_as_tex(doc: &Document, html: &str) {
    if !html.contains("<math") && !html.contains("<MATH") {
        return;
    }
    for math in doc.select("math").nodes() {
        let annotation = math.descendants_it().find(|d| {
            d.node_name().as_deref() == Some("annotation")
                && d.attr("encoding").is_some_and(|e| e.to_ascii_lowercase().contains("tex"))
        });
        let tex = annotation
            .map(|a| a.text().to_string())
            .filter(|t| !t.trim().is_empty())
            .or_else(|| math.attr("alttext").map(|a| a.to_string()).filter(|t| !t.trim().is_empty()))
            .unwrap_or_else(|| math.text().to_string());
        let tex = tex.split_whitespace().collect::<Vec<_>>().join(" ");
        let target = math.ancestors_it(Some(3)).find(|a| a.has_class("katex")).unwrap_or(*math);
        if tex.is_empty() {
            target.remove_from_parent();
            continue;
        }
        let display = math.attr("display").is_some_and(|d| d.eq_ignore_ascii_case("block"))
            || target.parent().is_some_and(|p| p.has_class("katex-display"));
        let class = if display { "math math-display" } else { "math math-inline" };
        let text = tex.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        target.replace_with_html(format!("<span class=\"{class}\">{text}</span>"));
    }
}

/// Puts each `<frame src>` and `<iframe src>` in place as a link the model can fetch, `(frame:
/// [name](url))`, and a frameset's `<noframes>` text as the markup it is: a frame's content is
/// another document, and before, a javadoc frameset read as escaped `\<h2>Frame Alert\</h2>`
/// and an iframe vanished without its address.
fn frames_as_links(doc: &Document, html: &str) {
    let lower_has = |needle: &str| html.contains(needle) || html.contains(&needle.to_ascii_uppercase());
    if !lower_has("<frame") && !lower_has("<iframe") {
        return;
    }
    let escape = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    for f in doc.select("frame[src], iframe[src]").nodes() {
        let src = f.attr("src").unwrap_or_default();
        let src = src.trim();
        let lower = src.to_ascii_lowercase();
        if src.is_empty()
            || lower.starts_with("about:")
            || lower.starts_with("javascript:")
            || lower.starts_with("data:")
        {
            f.remove_from_parent();
            continue;
        }
        let name = f
            .attr("title")
            .or_else(|| f.attr("name"))
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| src.to_string());
        f.replace_with_html(format!("<p>(frame: <a href=\"{}\">{}</a>)</p>", escape(src), escape(&name)));
    }
    for n in doc.select("noframes").nodes() {
        let markup = n.text().to_string();
        n.replace_with_html(markup);
    }
}

/// Most anchors kept from one page.
const MAX_ANCHORS: usize = 20_000;

/// Each element's `id` (and each `<a name>`) with the first words of its text, or of the next
/// element's when it has none (`<a id="x"></a><h2>…`). Only the start of the text is read.
fn anchors(doc: &Document) -> Vec<(String, String)> {
    let first_words = |n: &dom_query::NodeRef| {
        let mut out = String::new();
        for d in n.descendants_it() {
            if d.is_text() {
                out.push_str(&d.text());
                out.push(' ');
                if out.len() > 200 {
                    break;
                }
            }
        }
        let words: Vec<&str> = out.split_whitespace().collect();
        let mut line = String::new();
        for w in words {
            if line.len() + w.len() > 80 {
                break;
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
        line
    };
    let mut out = Vec::new();
    for n in doc.select("[id], a[name]").nodes().iter().take(MAX_ANCHORS) {
        checkpoint();
        let Some(id) = n.attr("id").or_else(|| n.attr("name")) else { continue };
        let mut text = first_words(n);
        if text.is_empty()
            && let Some(next) = n.next_element_sibling()
        {
            text = first_words(&next);
        }
        if !text.is_empty() {
            out.push((id.to_string(), text));
        }
    }
    out
}

/// Most rows a spanned cell's text is repeated into (a `rowspan` beyond the table's rows
/// changes nothing; this bounds the work on a hostile page).
const MAX_ROW_SPAN: usize = 1000;

/// Writes the cells a `rowspan` covers into the rows below it, as htmd lays a table out row by
/// row and knows nothing of spans: without this the next row's cells slid left under the wrong
/// headers (`| str | Duration. |` under Option and Type). The filler repeats the spanning cell's
/// text when it is short (a name, a type), else stays empty.
fn expand_row_spans(doc: &Document, html: &str) {
    if !html.contains("rowspan") && !html.contains("ROWSPAN") {
        return;
    }
    for table in doc.select("table").nodes() {
        if !table.descendants_it().any(|d| d.attr("rowspan").is_some()) {
            continue;
        }
        let own = |d: &dom_query::NodeRef| {
            d.ancestors_it(None).find(|a| a.node_name().as_deref() == Some("table")).is_some_and(|t| t.id == table.id)
        };
        let rows: Vec<_> =
            table.descendants_it().filter(|d| d.node_name().as_deref() == Some("tr") && own(d)).collect();
        // Column → (rows still covered below, cell name, filler text).
        let mut pending: std::collections::BTreeMap<usize, (usize, String, String)> = Default::default();
        for (r, row) in rows.iter().enumerate() {
            let covered: Vec<(usize, String, String)> =
                pending.iter().map(|(c, (_, name, text))| (*c, name.clone(), text.clone())).collect();
            let cells: Vec<_> = row
                .element_children()
                .into_iter()
                .filter(|c| matches!(c.node_name().as_deref(), Some("td" | "th")))
                .collect();
            let filler = |name: &str, text: &str| {
                let td = doc.tree.new_element(name);
                if !text.is_empty() {
                    td.append_child(&doc.tree.new_text(text));
                }
                td
            };
            let mut spans = Vec::new();
            let mut col = 0usize;
            let mut next_covered = covered.iter().peekable();
            for cell in &cells {
                while let Some((c, name, text)) = next_covered.peek() {
                    if *c > col {
                        break;
                    }
                    if *c == col {
                        cell.insert_before(&filler(name, text));
                        col += 1;
                    }
                    next_covered.next();
                }
                let number = |a: &str| cell.attr(a).and_then(|v| v.trim().parse::<usize>().ok());
                let width = number("colspan").unwrap_or(1).clamp(1, 1000);
                let height = match number("rowspan") {
                    Some(0) => rows.len() - r,
                    Some(n) => n.min(MAX_ROW_SPAN),
                    None => 1,
                };
                if height > 1 {
                    let text = cell.text().split_whitespace().collect::<Vec<_>>().join(" ");
                    let text = if text.chars().count() <= 60 { text } else { String::new() };
                    let name = cell.node_name().map_or_else(|| "td".to_string(), |n| n.to_string());
                    spans.extend((col..col + width).map(|c| (c, height - 1, name.clone(), text.clone())));
                }
                col += width;
            }
            for (_, name, text) in next_covered {
                row.append_child(&filler(name, text));
            }
            pending.retain(|_, (left, _, _)| {
                *left -= 1;
                *left > 0
            });
            for (c, left, name, text) in spans {
                pending.insert(c, (left, name, text));
            }
        }
    }
}

/// What one pass over the parsed page finds.
#[derive(Debug, Default)]
struct Scan {
    title: String,
    og_title: String,
    had_scripts: bool,
    /// Text weight of `<noscript>` elements.
    noscript_chars: usize,
    /// Text weight of the page outside what is never content (scripts, banners, …).
    body_chars: usize,
    /// `<main>` / `[role=main]` elements with their text weight.
    mains: Vec<(NodeId, usize)>,
    /// `<article>` elements with their text weight.
    articles: Vec<(NodeId, usize)>,
    /// The first `<base href>`.
    base_href: Option<String>,
    /// An empty element with an id frameworks mount their app on (`root`, `app`, `__next` …).
    empty_mount: bool,
    /// Most `<table>`s nested in one another.
    table_nesting: usize,
}

impl Scan {
    /// The element the page marks as its main content (one `<main>`/`[role=main]`, else one
    /// `<article>`), when it holds at least 60% of the page's text and enough of it.
    fn marked_main(&self) -> Option<NodeId> {
        let (id, len) = match (self.mains.as_slice(), self.articles.as_slice()) {
            ([one], _) => *one,
            ([], [one]) | ([_, _, ..], [one]) => *one,
            _ => return None,
        };
        (len >= MIN_ARTICLE_CHARS && len * 10 >= self.body_chars * 6).then_some(id)
    }
}

/// Non-whitespace bytes: the text measure every threshold here is in.
fn text_weight(t: &str) -> usize {
    t.split_whitespace().map(str::len).sum()
}

/// What the scan does with one element.
enum Visit {
    Text(usize),
    Children,
    Candidate { main: bool },
    Head,
    Script,
    Noscript,
    EmptyMount,
    Skip,
}

/// One iterative pass (no recursion: the tree may be deep) over the whole page.
fn scan(tree: &Tree) -> Scan {
    enum Step {
        /// A node, and how many tables it is inside.
        Enter(NodeId, usize),
        Leave,
    }
    let mut s = Scan::default();
    // Candidates whose subtree is being walked: (is main, index in mains/articles).
    let mut open: Vec<(bool, usize)> = Vec::new();
    let mut stack = vec![Step::Enter(tree.root_id(), 0)];
    while let Some(step) = stack.pop() {
        checkpoint();
        let (id, tables) = match step {
            Step::Enter(id, tables) => (id, tables),
            Step::Leave => {
                open.pop();
                continue;
            }
        };
        let node = tree.get_unchecked(&id);
        let visit = node
            .query(|t| match &t.data {
                DqData::Text { contents } => Visit::Text(text_weight(contents)),
                DqData::Document | DqData::Fragment => Visit::Children,
                DqData::Element(e) => {
                    let attr = |n: &str| e.attrs.iter().find(|a| &*a.name.local == n).map(|a| &*a.value);
                    match e.name.local {
                        local_name!("script") => Visit::Script,
                        local_name!("noscript") => Visit::Noscript,
                        local_name!("head") => Visit::Head,
                        _ if attr("id").is_some_and(is_mount_id)
                            && node
                                .children_it(false)
                                .all(|c| c.is_text() && c.text().trim().is_empty() || c.is_comment()) =>
                        {
                            Visit::EmptyMount
                        }
                        local_name!("main") => Visit::Candidate { main: true },
                        local_name!("article") if attr("role") != Some("main") => Visit::Candidate { main: false },
                        ref n if never_content(n) || is_hidden(&attr) => Visit::Skip,
                        ref n if banner_named(n, &attr) && banner_shaped(tree, &id, &attr) => Visit::Skip,
                        _ if attr("role") == Some("main") => Visit::Candidate { main: true },
                        _ => Visit::Children,
                    }
                }
                _ => Visit::Skip,
            })
            .unwrap_or(Visit::Skip);
        match visit {
            Visit::Text(n) => {
                s.body_chars += n;
                for &(main, i) in &open {
                    let list = if main { &mut s.mains } else { &mut s.articles };
                    list[i].1 += n;
                }
                continue;
            }
            Visit::Script => s.had_scripts = true,
            Visit::EmptyMount => s.empty_mount = true,
            Visit::Noscript => s.noscript_chars += text_weight(&node.text()),
            Visit::Head => {
                for d in node.descendants_it() {
                    match d.node_name().as_deref() {
                        Some("title") if s.title.is_empty() => {
                            s.title = d.text().split_whitespace().collect::<Vec<_>>().join(" ");
                        }
                        Some("meta") if s.og_title.is_empty() && d.attr("property").as_deref() == Some("og:title") => {
                            let t = d.attr("content").unwrap_or_default();
                            s.og_title = t.split_whitespace().collect::<Vec<_>>().join(" ");
                        }
                        Some("base") if s.base_href.is_none() => s.base_href = d.attr("href").map(|h| h.to_string()),
                        // An application bundle in <head> is deferred or a module (Create React
                        // App, Vite, Next.js) so that it runs after the body it fills is parsed;
                        // `async` analytics and inline snippets there build no page.
                        Some("script")
                            if d.has_attr("defer")
                                || d.attr("type").is_some_and(|t| t.eq_ignore_ascii_case("module")) =>
                        {
                            s.had_scripts = true;
                        }
                        _ => {}
                    }
                }
            }
            Visit::Skip => {}
            Visit::Children => {
                let tables = tables + usize::from(node.node_name().as_deref() == Some("table"));
                s.table_nesting = s.table_nesting.max(tables);
                stack.extend(tree.child_ids_of_it(&id, true).map(|c| Step::Enter(c, tables)));
            }
            Visit::Candidate { main } => {
                let list = if main { &mut s.mains } else { &mut s.articles };
                list.push((id, 0));
                open.push((main, list.len() - 1));
                stack.push(Step::Leave);
                stack.extend(tree.child_ids_of_it(&id, true).map(|c| Step::Enter(c, tables)));
            }
        }
    }
    s
}

/// Elements that are never content, whatever part of the page is kept. A `<form>` is not one of
/// them: ASP.NET WebForms and SharePoint wrap the whole page in one; its controls go instead.
fn never_content(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("script")
            | local_name!("style")
            | local_name!("noscript")
            | local_name!("template")
            | local_name!("svg")
            | local_name!("math")
            | local_name!("iframe")
            | local_name!("object")
            | local_name!("embed")
            | local_name!("canvas")
            | local_name!("link")
            | local_name!("meta")
            | local_name!("head")
            | local_name!("title")
            | local_name!("button")
            | local_name!("select")
            | local_name!("input")
            | local_name!("textarea")
            | local_name!("dialog")
            | local_name!("nav")
            | local_name!("footer")
    )
}

/// Whether an element is hidden from every reader as the page is served: the `hidden`
/// attribute (not `hidden="until-found"`, whose text find-in-page reveals) or an inline
/// `display: none` / `visibility: hidden`. Browsers never show it, and it is where hidden
/// instructions for an agent are put.
fn is_hidden<'a>(attr: &impl Fn(&str) -> Option<&'a str>) -> bool {
    if attr("hidden").is_some_and(|v| !v.trim().eq_ignore_ascii_case("until-found")) {
        return true;
    }
    attr("style").is_some_and(|style| {
        let style: String = style.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
        style.split(';').any(|d| {
            let d = d.trim_end_matches("!important");
            d == "display:none" || d == "visibility:hidden"
        })
    })
}

/// Words in the id or class of cookie and consent banners.
const BANNER_WORDS: [&str; 5] = ["cookie", "consent", "gdpr", "cc-banner", "onetrust"];

/// An element whose id or class names a cookie or consent banner. Only a first test: a
/// documentation section about cookies is named that way too (Sphinx's `<section
/// id="cookies">`), so [`banner_shaped`] decides.
fn banner_named<'a>(name: &LocalName, attr: &impl Fn(&str) -> Option<&'a str>) -> bool {
    if !matches!(
        *name,
        local_name!("div")
            | local_name!("section")
            | local_name!("aside")
            | local_name!("dialog")
            | local_name!("form")
            | local_name!("footer")
    ) {
        return false;
    }
    let has = |v: Option<&str>| {
        v.is_some_and(|v| {
            let v = v.to_ascii_lowercase();
            BANNER_WORDS.iter().any(|w| v.contains(w))
        })
    };
    has(attr("id")) || has(attr("class"))
}

/// Whether a banner-named element acts like a banner: it is a dialog, or it offers something
/// to click or fill in (accept, reject, settings), and it is not long text under headings. A
/// section of content about cookies has no dialog role, and when it has controls they sit
/// beside code (sphinx-design tabs are radio inputs, copy buttons are buttons): a consent
/// banner never shows code, so an element holding `<pre>` or `<code>` is content.
fn banner_shaped<'a>(tree: &Tree, id: &NodeId, attr: &impl Fn(&str) -> Option<&'a str>) -> bool {
    if matches!(attr("role"), Some("dialog" | "alertdialog")) || attr("aria-modal") == Some("true") {
        return true;
    }
    let node = tree.get_unchecked(id);
    let mut controls = false;
    let mut headed_text = false;
    for d in node.descendants_it() {
        let Some(n) = d.node_name() else { continue };
        match &*n {
            "button" | "input" | "select" => controls = true,
            "a" if d.attr("role").as_deref() == Some("button") => controls = true,
            "h1" | "h2" | "h3" => headed_text = true,
            "pre" | "code" => return false,
            _ if d.attr("role").as_deref() == Some("button") => controls = true,
            _ => {}
        }
    }
    // A consent dialog may carry a heading ("This website uses cookies"), but not pages of text.
    controls && !(headed_text && text_weight(&node.text()) > BANNER_MAX_CHARS)
}

/// The most text a banner with headings holds (Cookiebot's dialog with its details is about
/// 2 KB); more is a page section.
const BANNER_MAX_CHARS: usize = 4000;

/// Which part of the page a copy keeps, beyond what is never content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The marked main element: navigation inside it goes too, and asides that are mostly links.
    Main,
    /// Readability's article, already cleaned.
    Article,
    /// The whole body: header, asides and landmarks of navigation go too.
    WholePage,
}

/// What the copy does with one source node.
enum CopyStep {
    Text(StrTendril),
    /// `wrapper`: a highlighter's wrapper (`div.highlight`) that passes the language written
    /// above it on to its code.
    Element {
        name: QualName,
        attrs: Vec<Attribute>,
        lang: Option<String>,
        check_anchor: bool,
        wrapper: bool,
    },
    Skip,
}

/// Converts the subtree at `root` to Markdown, copying it into htmd's tree on the way (no
/// serialising and re-parsing): what is never content is left out, and every code block gets
/// a `<code class="language-X">` when its language is written anywhere the common highlighters
/// put it (`language-*`, `lang-*`, `highlight-source-*` on the `code`, the `pre` or the wrapping
/// element, or `data-lang`).
fn to_markdown(tree: &Tree, root: NodeId, keep: Keep, base: Option<&url::Url>) -> String {
    tidy(&converter().tree_to_markdown(&copy_tree(tree, root, keep, base)))
}

/// One step of [`copy_tree`]: (source node, copied parent, the language written on the source
/// node's parent, inside a `pre`); no node: a line break to write into the parent once the
/// nodes pushed after it are done.
type CopyWork = (Option<NodeId>, Rc<MdNode>, Option<Rc<str>>, bool);

/// The copy [`to_markdown`] converts.
fn copy_tree(tree: &Tree, root: NodeId, keep: Keep, base: Option<&url::Url>) -> Rc<MdNode> {
    let md_root = MdNode::new(MdData::Document);
    // `code` elements that take the language found on their `pre` or its parent.
    let mut code_langs: HashMap<NodeId, String> = HashMap::new();
    // The rows and cells of tables that lay out code blocks beside line numbers: not copied,
    // their contents are.
    let mut unwrapped_parts: std::collections::HashSet<NodeId> = std::collections::HashSet::new();
    let mut stack: Vec<CopyWork> = vec![(Some(root), md_root.clone(), None, false)];
    while let Some((id, parent, parent_lang, in_pre)) = stack.pop() {
        checkpoint();
        let Some(id) = id else {
            append(&parent, MdNode::new(MdData::Text { contents: RefCell::new(StrTendril::from_slice("\n")) }));
            continue;
        };
        let node = tree.get_unchecked(&id);
        let copy = node
            .query(|t| match &t.data {
                DqData::Text { contents } => CopyStep::Text(StrTendril::from_slice(contents)),
                DqData::Document | DqData::Fragment => CopyStep::Element {
                    name: QualName::new(None, ns!(html), local_name!("div")),
                    attrs: Vec::new(),
                    lang: None,
                    check_anchor: false,
                    wrapper: false,
                },
                DqData::Element(e) => {
                    let attr = |n: &str| e.attrs.iter().find(|a| &*a.name.local == n).map(|a| &*a.value);
                    let name = &e.name.local;
                    if never_content(name)
                        || is_hidden(&attr)
                        || is_line_numbers(attr("class"))
                        || dropped_by(keep, name, attr("role"), || mostly_links(tree, &id))
                        || (banner_named(name, &attr) && banner_shaped(tree, &id, &attr))
                    {
                        return CopyStep::Skip;
                    }
                    let lang = language_of(attr("class"), attr("data-lang"));
                    let attrs = e
                        .attrs
                        .iter()
                        .filter(|a| kept_attr(name, &a.name.local, &a.value))
                        .map(|a| {
                            let value = match a.name.local {
                                local_name!("href") | local_name!("src") => absolute(base, &a.value),
                                _ => None,
                            };
                            let value = value.as_deref().unwrap_or(&a.value);
                            Attribute { name: a.name.clone(), value: StrTendril::from_slice(value) }
                        })
                        .collect();
                    let check_anchor = *name == local_name!("a") && attr("href").is_some_and(|h| h.starts_with('#'));
                    let wrapper = lang.is_none()
                        && attr("class").is_some_and(|c| c.split_ascii_whitespace().any(|t| t == "highlight"));
                    CopyStep::Element { name: e.name.clone(), attrs, lang, check_anchor, wrapper }
                }
                _ => CopyStep::Skip,
            })
            .unwrap_or(CopyStep::Skip);
        let (name, mut attrs, lang, check_anchor, wrapper) = match copy {
            CopyStep::Skip => continue,
            CopyStep::Text(contents) => {
                append(&parent, MdNode::new(MdData::Text { contents: RefCell::new(contents) }));
                continue;
            }
            CopyStep::Element { name, attrs, lang, check_anchor, wrapper } => {
                (name, attrs, lang, check_anchor, wrapper)
            }
        };
        // Heading permalinks (`§`, `#`, `¶`) would end up inside every heading's title.
        if check_anchor && matches!(node.text().trim(), "" | "§" | "#" | "¶" | "🔗") {
            continue;
        }
        // A table that lays out code beside its line numbers is no data table. Pygments'
        // `linenos`, MkDocs and Sphinx put a `<pre>` in a cell: that block stands on its own,
        // fenced. GitHub's blob and gist views (and diff views) put one line per row, the code
        // straight in a `blob-code` cell: those rows are joined into one fenced block, their
        // indentation kept. A data table with a `<pre>` in a cell stays a table.
        let table_part = matches!(
            name.local,
            local_name!("thead")
                | local_name!("tbody")
                | local_name!("tfoot")
                | local_name!("tr")
                | local_name!("td")
                | local_name!("th")
        );
        if table_part && unwrapped_parts.contains(&id) {
            stack.extend(
                tree.child_ids_of_it(&id, true).map(|c| (Some(c), parent.clone(), parent_lang.clone(), in_pre)),
            );
            continue;
        }
        if name.local == local_name!("table")
            && let Some(code) = code_table(&node)
        {
            match code {
                CodeTable::Blocks => {
                    unwrapped_parts.extend(node.descendants_it().map(|d| d.id));
                    stack.extend(
                        tree.child_ids_of_it(&id, true).map(|c| (Some(c), parent.clone(), parent_lang.clone(), in_pre)),
                    );
                }
                CodeTable::Lines { text, lang: named } => {
                    let lang = named.or_else(|| lang.clone()).or_else(|| parent_lang.as_deref().map(str::to_string));
                    let pre = element(local_name!("pre"), Vec::new());
                    let code = element(local_name!("code"), lang.iter().map(|l| class_attr(l)).collect());
                    append(&code, MdNode::new(MdData::Text { contents: RefCell::new(StrTendril::from_slice(&text)) }));
                    append(&pre, code);
                    append(&parent, pre);
                }
            }
            continue;
        }
        // Highlighters write code lines as `<div class="line">` or end them with `<br>`; in a
        // code block those are line breaks, not Markdown paragraphs or hard breaks.
        if in_pre && name.local == local_name!("br") {
            append(&parent, MdNode::new(MdData::Text { contents: RefCell::new(StrTendril::from_slice("\n")) }));
            continue;
        }
        if in_pre && matches!(name.local, local_name!("div") | local_name!("p") | local_name!("li")) {
            if !node.text().ends_with('\n') {
                stack.push((None, parent.clone(), None, true));
            }
            stack.extend(tree.child_ids_of_it(&id, true).map(|c| (Some(c), parent.clone(), parent_lang.clone(), true)));
            continue;
        }
        let in_pre = in_pre || name.local == local_name!("pre");
        let mut wrap_children_in = None;
        if name.local == local_name!("code") {
            attrs.retain(|a| a.name.local != local_name!("class"));
            if let Some(l) = code_langs.remove(&id).or_else(|| lang.clone()) {
                attrs.push(class_attr(&l));
            }
        } else if name.local == local_name!("pre") {
            let code = first_code_in(tree, id);
            let code_lang = code.and_then(|c| {
                tree.get_unchecked(&c).query(|t| match &t.data {
                    DqData::Element(e) => {
                        let attr = |n: &str| e.attrs.iter().find(|a| &*a.name.local == n).map(|a| &*a.value);
                        language_of(attr("class"), attr("data-lang"))
                    }
                    _ => None,
                })?
            });
            let l = code_lang.or_else(|| lang.clone()).or_else(|| parent_lang.as_deref().map(str::to_string));
            match (code, l) {
                (Some(c), Some(l)) => {
                    code_langs.insert(c, l);
                }
                (Some(_), None) => {}
                // htmd fences a `pre` only around a `code`: without one, the block's lines and
                // indentation would be run together as a paragraph.
                (None, l) => {
                    wrap_children_in = Some(element(local_name!("code"), l.iter().map(|l| class_attr(l)).collect()));
                }
            }
        }
        let el = MdNode::new(MdData::Element {
            name,
            attrs: RefCell::new(attrs),
            template_contents: RefCell::new(None),
            mathml_annotation_xml_integration_point: false,
        });
        append(&parent, el.clone());
        let children_parent = match wrap_children_in {
            Some(code) => {
                append(&el, code.clone());
                code
            }
            None => el,
        };
        // Sphinx writes the language two levels up (`div.highlight-python > div.highlight > pre`):
        // a highlighter's wrapper passes on the language written above it.
        let lang: Option<Rc<str>> = if wrapper { parent_lang.clone() } else { lang.map(Into::into) };
        stack.extend(tree.child_ids_of_it(&id, true).map(|c| (Some(c), children_parent.clone(), lang.clone(), in_pre)));
    }
    md_root
}

/// What a table laying out code is.
enum CodeTable {
    /// Its code is in `<pre>` blocks (beside a gutter of line numbers): copy them on their own.
    Blocks,
    /// One line of code per row (GitHub's blob, gist and diff views): the lines, and the
    /// language the view names.
    Lines { text: String, lang: Option<String> },
}

/// Whether `table` lays out code rather than data, and how.
fn code_table(table: &dom_query::NodeRef) -> Option<CodeTable> {
    let class_has = |n: &dom_query::NodeRef, f: &dyn Fn(&str) -> bool| {
        n.attr("class").is_some_and(|c| c.split_ascii_whitespace().any(f))
    };
    let mut gutter = false;
    let mut pre = false;
    let mut blob_code = false;
    for d in table.descendants_it() {
        match d.node_name().as_deref() {
            Some("pre") => pre = true,
            Some("td" | "th" | "div") => {
                gutter |= is_line_numbers(d.attr("class").as_deref());
                blob_code |= class_has(&d, &|t| t == "blob-code" || t == "blob-code-inner");
            }
            _ => {}
        }
    }
    if pre && (gutter || class_has(table, &|t| t == "highlighttable")) {
        return Some(CodeTable::Blocks);
    }
    if !blob_code {
        return None;
    }
    let mut lines = Vec::new();
    for row in table.descendants_it().filter(|d| d.node_name().as_deref() == Some("tr")) {
        let line: String = row
            .element_children()
            .into_iter()
            .filter(|c| matches!(c.node_name().as_deref(), Some("td" | "th")))
            .filter(|c| !is_line_numbers(c.attr("class").as_deref()))
            .map(|c| c.text().trim_end_matches(['\n', '\r']).to_string())
            .collect();
        lines.push(line);
    }
    // GitHub names the language on the table (`data-tagsearch-lang="Python"`) or on the blob's
    // wrapper (`type-python`).
    let lang =
        table.attr("data-tagsearch-lang").map(|l| l.trim().to_ascii_lowercase()).filter(|l| !l.is_empty()).or_else(
            || {
                table.ancestors_it(Some(4)).find_map(|a| {
                    a.attr("class").and_then(|c| {
                        c.split_ascii_whitespace()
                            .find_map(|t| t.strip_prefix("type-").filter(|l| !l.is_empty()).map(str::to_string))
                    })
                })
            },
        );
    Some(CodeTable::Lines { text: lines.join("\n"), lang })
}

/// The line-number gutter highlighters put beside code (Pygments, highlight.js plugins,
/// Prism, GitHub's blob view): numbers, not code.
fn is_line_numbers(class: Option<&str>) -> bool {
    class.is_some_and(|c| {
        c.split_ascii_whitespace().any(|t| {
            matches!(
                t,
                "linenos" | "linenodiv" | "lineno" | "gutter" | "blob-num" | "line-numbers-rows" | "hljs-ln-numbers"
            )
        })
    })
}

/// `link` resolved against `base`, when it is relative and not a link within the page (`#…`).
fn absolute(base: Option<&url::Url>, link: &str) -> Option<String> {
    let link = link.trim();
    if link.is_empty() || link.starts_with('#') || url::Url::parse(link).is_ok() {
        return None;
    }
    base?.join(link).ok().map(String::from)
}

/// Elements a part of the page leaves out besides [`never_content`]. Inside the marked main
/// element an `<aside>` is often content — a callout (Starlight's Note/Caution), a sidenote — so
/// only one that is mostly links (a table of contents, related pages) goes.
fn dropped_by(keep: Keep, name: &LocalName, role: Option<&str>, mostly_links: impl FnOnce() -> bool) -> bool {
    match keep {
        Keep::Article => false,
        Keep::Main => {
            role == Some("navigation")
                || ((*name == local_name!("aside") || role == Some("complementary")) && mostly_links())
        }
        Keep::WholePage => {
            matches!(*name, local_name!("header") | local_name!("aside"))
                || matches!(role, Some("navigation" | "banner" | "contentinfo"))
        }
    }
}

/// Whether at least half of the element's text is link text (or it has none).
fn mostly_links(tree: &Tree, id: &NodeId) -> bool {
    let node = tree.get_unchecked(id);
    let all = text_weight(&node.text());
    let linked: usize =
        node.descendants_it().filter(|d| d.node_name().as_deref() == Some("a")).map(|a| text_weight(&a.text())).sum();
    linked * 2 >= all
}

/// The attributes htmd reads; the rest (styles, data-*, event handlers, …) are not copied.
fn kept_attr(element: &LocalName, attr: &LocalName, value: &str) -> bool {
    match *attr {
        // A script URL leads nowhere the model can fetch: the link's text stays, not its target.
        local_name!("href") | local_name!("src") => {
            let scheme = value.trim_start().get(..11).unwrap_or("").to_ascii_lowercase();
            !(scheme.starts_with("javascript:") || scheme.starts_with("vbscript:"))
        }
        local_name!("alt")
        | local_name!("title")
        | local_name!("start")
        | local_name!("colspan")
        | local_name!("rowspan") => true,
        // Inline maths (`<span class="math math-inline">`) is told by its class.
        local_name!("class") => *element == local_name!("span") && value.starts_with("math"),
        _ => false,
    }
}

fn class_attr(lang: &str) -> Attribute {
    Attribute {
        name: QualName::new(None, ns!(), local_name!("class")),
        value: StrTendril::from_slice(&format!("language-{lang}")),
    }
}

fn element(name: LocalName, attrs: Vec<Attribute>) -> Rc<MdNode> {
    MdNode::new(MdData::Element {
        name: QualName::new(None, ns!(html), name),
        attrs: RefCell::new(attrs),
        template_contents: RefCell::new(None),
        mathml_annotation_xml_integration_point: false,
    })
}

fn append(parent: &Rc<MdNode>, child: Rc<MdNode>) {
    child.parent.set(Some(Rc::downgrade(parent)));
    parent.children.borrow_mut().push(child);
}

/// The first `<code>` inside a `<pre>` (a small subtree).
fn first_code_in(tree: &Tree, pre: NodeId) -> Option<NodeId> {
    tree.get_unchecked(&pre).descendants_it().find(|d| d.node_name().as_deref() == Some("code")).map(|d| d.id)
}

fn converter() -> &'static HtmlToMarkdown {
    static CONVERTER: OnceLock<HtmlToMarkdown> = OnceLock::new();
    CONVERTER.get_or_init(|| {
        HtmlToMarkdown::builder()
            .options(Options { code_block_style: CodeBlockStyle::Fenced, ..Default::default() })
            .skip_tags(vec![
                "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed", "canvas", "nav",
                "footer", "button", "select", "input", "textarea", "dialog", "head",
            ])
            // htmd's walk of a big page is long: a stopped conversion ends at the next block.
            .add_handler(
                vec![
                    "p",
                    "div",
                    "li",
                    "tr",
                    "td",
                    "th",
                    "table",
                    "section",
                    "pre",
                    "blockquote",
                    "dd",
                    "dt",
                    "h1",
                    "h2",
                    "h3",
                    "h4",
                    "h5",
                    "h6",
                ],
                |h: &dyn htmd::element_handler::Handlers, el: htmd::Element| {
                    checkpoint();
                    h.fallback(el)
                },
            )
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

/// Drops what is never content before readability scores the page: code, styling, vector art,
/// embedded frames, and cookie or consent banners.
fn clean(doc: &Document) {
    doc.select("script, style, noscript, template, svg, math, iframe, object, embed, canvas, link, meta").remove();
    // One pass over the elements that have an id or class (a selector list with every word and
    // tag costs several times more on a large page).
    for el in doc.select("div[id], div[class], section[id], section[class], aside, dialog, form, footer").iter() {
        let Some(node) = el.nodes().first() else { continue };
        let (id, class, role, modal) = (el.attr("id"), el.attr("class"), el.attr("role"), el.attr("aria-modal"));
        let attr = |n: &str| match n {
            "id" => id.as_deref(),
            "class" => class.as_deref(),
            "role" => role.as_deref(),
            "aria-modal" => modal.as_deref(),
            _ => None,
        };
        let Some(name) = node.qual_name_ref().map(|q| q.local.clone()) else { continue };
        if banner_named(&name, &attr) && banner_shaped(&doc.tree, &node.id, &attr) {
            el.remove();
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
        let self_closing = b[..end].ends_with(b"/>");
        let removed = !(uncounted(&name) || self_closing) && depth >= max;
        if !removed && let Some(cut) = attributes_cut(b, name_start + name_len, end) {
            // html5ever compares each attribute with the ones before it: 50 000 of them on one
            // element cost minutes. The first MAX_ATTRIBUTES are kept.
            let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
            o.push_str(&html[copied..cut]);
            o.push_str(if self_closing { "/>" } else { ">" });
            copied = end;
        }
        if RAW_TEXT.contains(&name.as_str()) {
            let close = format!("</{name}");
            i = find_ci(b, i, close.as_bytes()).unwrap_or(b.len());
            continue;
        }
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
/// Most attributes one element keeps (real pages use a few dozen at most).
const MAX_ATTRIBUTES: usize = 256;

/// Where to cut a start tag whose attributes (in `b[from..end]`, `end` just past its `>`)
/// number more than [`MAX_ATTRIBUTES`]: just after the last one kept. `None` when they fit.
/// The cut is always at an ASCII byte (after a quote or before whitespace or `/`).
fn attributes_cut(b: &[u8], from: usize, end: usize) -> Option<usize> {
    let stop = end.saturating_sub(1);
    let mut i = from;
    let mut count = 0;
    loop {
        let after = i;
        while i < stop && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        if i >= stop {
            return None;
        }
        if count == MAX_ATTRIBUTES {
            return Some(after);
        }
        while i < stop && !b[i].is_ascii_whitespace() && !matches!(b[i], b'=' | b'/' | b'>') {
            i += 1;
        }
        let mut j = i;
        while j < stop && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j < stop && b[j] == b'=' {
            j += 1;
            while j < stop && b[j].is_ascii_whitespace() {
                j += 1;
            }
            match b.get(j) {
                Some(&q @ (b'"' | b'\'')) if j < stop => {
                    j += 1;
                    while j < stop && b[j] != q {
                        j += 1;
                    }
                    j = (j + 1).min(stop);
                }
                _ => {
                    while j < stop && !b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                }
            }
            i = j;
        }
        count += 1;
    }
}

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

    /// W3: a table-layout page (tables nested a dozen deep, as old forums are) still gets its
    /// main content extracted; only pathological nesting skips readability.
    #[test]
    fn w3_a_table_layout_page_nested_a_dozen_deep_keeps_its_extraction() {
        let cell = "<p>Some forum post text that is long enough to be scored as content by readability.</p>";
        let html = format!(
            "<html><body><div class=nav><a href=/>Home</a></div>{}{cell}{cell}{cell}{}</body></html>",
            format!("<table><tr><td>{cell}").repeat(12),
            "</td></tr></table>".repeat(12)
        );
        let c = convert(&html, None);
        assert!(c.extracted, "{}", c.markdown);
        assert!(c.markdown.contains("forum post text"), "{}", c.markdown);
    }

    /// W1: a refresh target without `url=` whose fourth byte falls inside a character is read
    /// as the target (before, slicing it panicked and the fetch was lost).
    #[test]
    fn w1_a_bare_non_ascii_refresh_target_is_read_not_a_panic() {
        assert_eq!(refresh_value("0;ドキュメント.html"), Some((0, "ドキュメント.html".into())));
        assert_eq!(refresh_value("0; caf\u{FFFD}.html"), Some((0, "caf\u{FFFD}.html".into())));
        assert_eq!(refresh_value("3; URL='next.html'"), Some((3, "next.html".into())));
    }

    #[test]
    fn w2_an_element_with_thousands_of_attributes_keeps_the_first_256_and_its_text() {
        let attrs: Vec<String> = (0..50_000).map(|i| format!("a{i}=\"x y\"")).collect();
        let html = format!("<main><h1>A</h1><div {} data-last='z'>text after</div><p>é</p></main>", attrs.join(" "));
        let limited = limit_depth(&html, MAX_DEPTH);
        assert!(limited.contains("a255=\"x y\">text after</div>") && !limited.contains("a256="), "{}", &limited[..200]);
        let md = convert(&html, None).markdown;
        assert!(md.contains("text after") && md.contains('é'), "{md}");
        // A tag under the limit is left as written.
        let few = "<div a=1 b='2' c=\"3\" d>x</div>";
        assert_eq!(limit_depth(few, MAX_DEPTH), few);
    }

    #[test]
    fn w2_code_lines_written_as_divs_or_br_stay_lines_in_the_code_block() {
        let prose = "<p>Ordinary documentation prose that explains the feature in detail, long enough to count.</p>";
        let html = format!(
            "<html><body><main><h1>Code</h1>{prose}{prose}{prose}\
<pre class=\"language-js\"><code><div class=\"line\">const a = 1;</div><div class=\"line\">const b = 2;</div></code></pre>\
<pre><code class=\"language-python\">def f():<br>    return 1</code></pre></main></body></html>"
        );
        let md = convert(&html, None).markdown;
        assert!(md.contains("```js\nconst a = 1;\nconst b = 2;\n```"), "{md}");
        assert!(md.contains("```python\ndef f():\n    return 1\n```"), "{md}");
    }

    #[test]
    fn w2_declarative_shadow_dom_content_is_kept_and_inert_templates_are_not() {
        let html = "<html><body><main><h1>Cards</h1><my-card><template shadowrootmode=\"open\"><h2>Card title</h2>\
<p>Card body text that a browser shows from the shadow root.</p><slot></slot></template><p>Light DOM text of the card.</p></my-card>\
<template id=\"row\"><p>INERTTEMPLATE</p></template><p>Enough ordinary text on the page to be its main content for sure.</p></main></body></html>";
        let md = convert(html, None).markdown;
        assert!(md.contains("## Card title") && md.contains("Card body text"), "{md}");
        assert!(md.contains("Light DOM text of the card."), "{md}");
        assert!(!md.contains("INERTTEMPLATE"), "{md}");
    }

    #[test]
    fn w2_a_code_block_beside_its_line_numbers_is_one_fenced_block_without_them() {
        let prose = "<p>Ordinary documentation prose that explains the feature in detail, long enough to count.</p>";
        let html = format!(
            "<html><body><main><h1>Code</h1>{prose}{prose}{prose}\
<div class=\"highlight-python notranslate\"><table class=\"highlighttable\"><tr><td class=\"linenos\"><div class=\"linenodiv\">\
<pre><span class=\"normal\">1</span>\n<span class=\"normal\">2</span></pre></div></td><td class=\"code\"><div class=\"highlight\">\
<pre><span></span>def f():\n    return 1\n</pre></div></td></tr></table></div>\
<table><tr><th>Option</th><th>Default</th></tr><tr><td>gap</td><td>8px</td></tr></table></main></body></html>"
        );
        let md = convert(&html, None).markdown;
        assert!(md.contains("```python\ndef f():\n    return 1\n```"), "{md}");
        assert!(!md.contains("1\n2"), "{md}");
        assert!(md.contains("| gap"), "a data table stays a table: {md}");
    }

    #[test]
    fn w2_meta_refresh_targets_are_read_in_their_common_spellings() {
        let get = |h: &str| meta_refresh(h.as_bytes());
        assert_eq!(get(r#"<meta http-equiv="refresh" content="0; url=/Snake.html">"#), Some((0, "/Snake.html".into())));
        assert_eq!(
            get(r#"<META HTTP-EQUIV="Refresh" CONTENT="3;URL='https://a.example/x'">"#),
            Some((3, "https://a.example/x".into()))
        );
        assert_eq!(get(r#"<meta content="0;url=../v2/" http-equiv="refresh">"#), Some((0, "../v2/".into())));
        assert_eq!(get(r#"<meta http-equiv="refresh" content="300">"#), None, "a reload, not a redirect");
        assert_eq!(get(r#"<noscript><meta http-equiv="refresh" content="0; url=/nojs"></noscript>"#), None);
        assert_eq!(get(r#"<meta name="viewport" content="width=device-width">"#), None);
    }

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
    fn w2_a_converter_panic_is_an_error_and_later_pages_still_convert() {
        let err = on_big_stack(|| -> u32 { panic!("converter bug") }).unwrap_err();
        assert!(err.contains("failed on this page"), "{err}");
        for i in 0..3 {
            let html = format!("<html><body><main><h1>Page {i}</h1><p>text</p></main></body></html>");
            let c = convert_on_big_stack(html, None).unwrap();
            assert!(c.markdown.contains(&format!("# Page {i}")), "{}", c.markdown);
        }
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
