//! PDF → text through `pdf-extract`, after a walk that proves its recursion ends.
//!
//! `pdf-extract` draws a Form XObject (`Do`) by recursing into its content stream, and looks up
//! a page's inherited `Resources`/`MediaBox` by recursing up `Parent`, with no check for cycles
//! or depth. A PDF whose form draws itself (or whose `Parent` chain loops) therefore overflows
//! the stack, and a stack overflow aborts the whole process: no thread or `catch_unwind` stops
//! it. So the same walk is done here first, without drawing, over the same objects `pdf-extract`
//! would visit, and a document whose walk loops, nests too deep or fans out too far is refused
//! before `pdf-extract` sees it.
//!
//! Nesting inside one object (`[[[…]]]`, `<< /A << /A …`) in the file, an object stream or a
//! content stream is bounded by lopdf's own parser (100 levels, since lopdf 0.42): before that,
//! a 10 KB PDF nested 5 000 levels deep overflowed the stack the same way.

use std::collections::{HashMap, HashSet};

use pdf_extract::content::Content;
use pdf_extract::{
    Dictionary, Document, MediaBox, Object, ObjectId, OutputDev, OutputError, PlainTextOutput, Stream, Transform,
};

use crate::stop::{Stop, Stopped, checkpoint};

/// Deepest chain of forms drawing forms accepted. Real documents nest a few levels; each level
/// costs `pdf-extract` a large stack frame.
const MAX_FORM_DEPTH: usize = 64;

/// Most form drawings one page may cause, counting every drawing its forms cause in turn (a
/// form drawn twice by a form drawn twice … is exponential without being a cycle). Counted per
/// page: a logo form drawn on each of 500 pages is linear work, and a document-wide total
/// refused such a report outright.
const MAX_FORM_DRAWS: u64 = 100_000;

/// The document's text, or why it cannot be read.
pub fn extract_text(bytes: &[u8]) -> Result<String, String> {
    extract_text_stoppable(bytes, &Stop::new())
}

/// [`extract_text`] that ends early, with an error, once `stop` is raised: checked on every
/// page of the walk below and every character drawn, so a 3 000-page PDF nobody waits for
/// stops at once. (lopdf's parse of the file itself runs to its end.)
pub fn extract_text_stoppable(bytes: &[u8], stop: &Stop) -> Result<String, String> {
    stop.run(|| extract(bytes, stop)).map_err(|e| e.to_string())?
}

fn extract(bytes: &[u8], stop: &Stop) -> Result<String, String> {
    let mut doc = Document::load_mem(bytes).map_err(|e| format!("the PDF could not be read: {e}"))?;
    if doc.is_encrypted() {
        // What pdf-extract does itself: many PDFs are encrypted with an empty user password.
        doc.decrypt("").map_err(|e| format!("the PDF is encrypted and could not be opened ({e})"))?;
    }
    checkpoint();
    prune_page_tree(&mut doc);
    check_recursion(&doc)?;
    checkpoint();
    let mut text = String::new();
    let out = pdf_extract::output_doc(&doc, &mut Stoppable { inner: PlainTextOutput::new(&mut text), stop });
    if stop.is_stopped() {
        return Err(Stopped.to_string());
    }
    out.map_err(|e| format!("the PDF could not be read: {e}"))?;
    Ok(text)
}

/// Plain-text output that fails the extraction at the next page or character once its stop
/// flag is raised.
struct Stoppable<'a, O> {
    inner: O,
    stop: &'a Stop,
}

impl<O> Stoppable<'_, O> {
    fn check(&self) -> Result<(), OutputError> {
        if self.stop.is_stopped() { Err(OutputError::FormatError(std::fmt::Error)) } else { Ok(()) }
    }
}

impl<O: OutputDev> OutputDev for Stoppable<'_, O> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.check()?;
        self.inner.begin_page(page_num, media_box, art_box)
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        self.inner.end_page()
    }
    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        self.check()?;
        self.inner.output_character(trm, width, spacing, font_size, char)
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.inner.begin_word()
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        self.inner.end_word()
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        self.inner.end_line()
    }
}

/// Drops the `Kids` entries that name a node already in the page tree (a `Pages` node listing
/// itself or an ancestor): lopdf's page walk gives up on such a tree after a few steps and the
/// document would read as having no pages, while its real pages are all there.
fn prune_page_tree(doc: &mut Document) {
    let Ok(root) = doc.catalog().and_then(|c| c.get(b"Pages")).and_then(Object::as_reference) else { return };
    let mut seen = HashSet::from([root]);
    let mut fixes: Vec<(ObjectId, Vec<Object>)> = Vec::new();
    let mut todo = vec![root];
    while let Some(node) = todo.pop() {
        checkpoint();
        let Ok(kids) = doc.get_dictionary(node).and_then(|d| d.get(b"Kids")).map(|k| deref(doc, k)) else { continue };
        let Ok(kids) = kids.as_array() else { continue };
        let mut kept = Vec::with_capacity(kids.len());
        for kid in kids {
            match kid.as_reference() {
                Ok(id) if !seen.insert(id) => {}
                Ok(id) => {
                    todo.push(id);
                    kept.push(kid.clone());
                }
                Err(_) => kept.push(kid.clone()),
            }
        }
        if kept.len() != kids.len() {
            fixes.push((node, kept));
        }
    }
    for (node, kids) in fixes {
        if let Ok(d) = doc.get_dictionary_mut(node) {
            d.set("Kids", Object::Array(kids));
        }
    }
}

/// Err when `pdf-extract` would recurse without end (or too deep) on `doc`.
pub fn check_recursion(doc: &Document) -> Result<(), String> {
    let empty = Dictionary::new();
    let mut walk = Walk { doc, done: HashMap::new(), stack: HashSet::new() };
    for (n, page_id) in doc.page_iter().enumerate() {
        let Ok(page) = doc.get_dictionary(page_id) else { continue };
        let resources = inherited(doc, page, b"Resources")?;
        inherited(doc, page, b"MediaBox")?;
        let resources = resources.and_then(|o| o.as_dict().ok()).unwrap_or(&empty);
        checkpoint();
        let Ok(content) = doc.get_page_content(page_id) else { continue };
        let on_page = |e: String| format!("{e} (page {})", n.saturating_add(1));
        too_many(walk.stream(&content, resources, 1).map_err(on_page)?).map_err(on_page)?;
    }
    Ok(())
}

/// The object `key` names on `dict` or, as `pdf-extract` looks it up, on the nearest `Parent`
/// that has it; Err when the `Parent` chain comes back on itself before finding it.
fn inherited<'a>(doc: &'a Document, mut dict: &'a Dictionary, key: &[u8]) -> Result<Option<&'a Object>, String> {
    let mut seen = HashSet::new();
    loop {
        if let Ok(o) = dict.get(key) {
            return Ok(Some(deref(doc, o)));
        }
        let Ok(parent) = dict.get(b"Parent").and_then(Object::as_reference) else { return Ok(None) };
        if !seen.insert(parent) {
            return Err(format!(
                "the PDF could not be read: its page tree is its own parent (object {} {})",
                parent.0, parent.1
            ));
        }
        match doc.get_dictionary(parent) {
            Ok(d) => dict = d,
            Err(_) => return Ok(None),
        }
    }
}

/// One level of indirection, as `pdf-extract` follows it.
fn deref<'a>(doc: &'a Document, o: &'a Object) -> &'a Object {
    match o {
        Object::Reference(id) => doc.get_object(*id).unwrap_or(o),
        _ => o,
    }
}

/// A form drawn with a resource dictionary: what `pdf-extract`'s recursion depends on. Keyed by
/// address because both live in the borrowed document for the whole walk.
type State = (usize, usize);

struct Walk<'a> {
    doc: &'a Document,
    /// Draw counts of states already walked to the end.
    done: HashMap<State, u64>,
    /// States on the current chain: meeting one again is a cycle.
    stack: HashSet<State>,
}

fn too_many(draws: u64) -> Result<(), String> {
    if draws > MAX_FORM_DRAWS {
        return Err(format!(
            "the PDF could not be read: a page of it draws more than {MAX_FORM_DRAWS} forms, counting the forms \
             those forms draw"
        ));
    }
    Ok(())
}

impl<'a> Walk<'a> {
    /// Walks the `Do` operators of one content stream drawn with `resources`; returns how many
    /// form drawings it causes.
    fn stream(&mut self, content: &[u8], resources: &'a Dictionary, depth: usize) -> Result<u64, String> {
        // An undecodable stream is pdf-extract's own (caught) error, not a recursion.
        let Ok(content) = Content::decode(content) else { return Ok(0) };
        let xobjects = resources.get(b"XObject").ok().map(|o| deref(self.doc, o)).and_then(|o| o.as_dict().ok());
        let mut total = 0u64;
        for op in content.operations.iter().filter(|op| op.operator == "Do") {
            let (Some(xobjects), Some(name)) = (xobjects, op.operands.first().and_then(|n| n.as_name().ok())) else {
                continue;
            };
            let Some((id, form)) = self.form(xobjects, name) else { continue };
            let inner = form
                .dict
                .get(b"Resources")
                .ok()
                .map(|o| deref(self.doc, o))
                .and_then(|o| o.as_dict().ok())
                .unwrap_or(resources);
            total = total.saturating_add(self.form_draw(id, form, inner, depth)?);
            too_many(total)?;
        }
        Ok(total)
    }

    fn form_draw(
        &mut self,
        id: Option<ObjectId>,
        form: &'a Stream,
        resources: &'a Dictionary,
        depth: usize,
    ) -> Result<u64, String> {
        let state = (std::ptr::from_ref(form) as usize, std::ptr::from_ref(resources) as usize);
        let n = if let Some(n) = self.done.get(&state) {
            *n
        } else {
            let name = id.map(|(n, g)| format!(" (object {n} {g})")).unwrap_or_default();
            if self.stack.contains(&state) {
                return Err(format!("the PDF could not be read: a drawing in it draws itself{name}, without end"));
            }
            if depth > MAX_FORM_DEPTH {
                return Err(format!(
                    "the PDF could not be read: its drawings nest more than {MAX_FORM_DEPTH} levels deep{name}"
                ));
            }
            self.stack.insert(state);
            let content = form.decompressed_content().unwrap_or_else(|_| form.content.clone());
            let inner = self.stream(&content, resources, depth + 1);
            self.stack.remove(&state);
            let n = inner?.saturating_add(1);
            self.done.insert(state, n);
            n
        };
        Ok(n)
    }

    /// The stream `name` names in an XObject dictionary, with its object id when it has one.
    fn form(&self, xobjects: &'a Dictionary, name: &[u8]) -> Option<(Option<ObjectId>, &'a Stream)> {
        let o = xobjects.get(name).ok()?;
        let id = o.as_reference().ok();
        deref(self.doc, o).as_stream().ok().map(|s| (id, s))
    }
}
