//! `generate_plan`, `create_lesson` (A7): the files, and the [`Presenter`] that shows them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use kodik_schema::agent::GeneratePlanArgs;

/// What is being presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactKind {
    /// A Markdown plan.
    Plan,
    /// A self-contained HTML lesson.
    Lesson,
}

/// A written file to show the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Plan or lesson.
    pub kind: ArtifactKind,
    /// Its title.
    pub title: String,
    /// The file, already written.
    pub path: PathBuf,
}

/// Why presenting failed.
#[derive(Debug, thiserror::Error)]
#[error("could not open {path}: {reason}")]
pub struct PresentError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// Opens a plan or a lesson for the user. Returns how it was shown, in a few words for the
/// model (`opened in the browser`, `saved; path shown to the user`).
#[async_trait]
pub trait Presenter: Send + Sync {
    /// Shows `artifact`.
    async fn present(&self, artifact: &Artifact) -> Result<String, PresentError>;
}

/// The default presenter: the file is already written; it prints the path on stderr.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathPresenter {
    /// Print nothing (for servers whose stderr is a log).
    pub quiet: bool,
}

#[async_trait]
impl Presenter for PathPresenter {
    async fn present(&self, artifact: &Artifact) -> Result<String, PresentError> {
        if !self.quiet {
            let what = match artifact.kind {
                ArtifactKind::Plan => "plan",
                ArtifactKind::Lesson => "lesson",
            };
            eprintln!("kodik: {what} \"{}\" written to {}", artifact.title, artifact.path.display());
        }
        Ok("saved; its path was shown to the user".to_string())
    }
}

/// A presenter that runs a command with the file's path as its last argument (e.g.
/// `xdg-open`, or a browser) and waits for it to start.
#[derive(Debug, Clone)]
pub struct CommandPresenter {
    program: PathBuf,
    args: Vec<String>,
}

impl CommandPresenter {
    /// `program args… PATH`.
    pub fn new(program: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { program: program.into(), args: args.into_iter().map(Into::into).collect() }
    }
}

#[async_trait]
impl Presenter for CommandPresenter {
    async fn present(&self, artifact: &Artifact) -> Result<String, PresentError> {
        let status = tokio::process::Command::new(&self.program)
            .args(&self.args)
            .arg(&artifact.path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .map_err(|e| PresentError {
                path: artifact.path.clone(),
                reason: format!("{}: {e}", self.program.display()),
            })?;
        if status.success() {
            Ok(format!("opened with {}", self.program.display()))
        } else {
            Err(PresentError {
                path: artifact.path.clone(),
                reason: format!("{} exited with {status}", self.program.display()),
            })
        }
    }
}

/// A presenter that opens plans and lessons in the browser: it calls the host's `browser` tool
/// (kodik-browser's, or any tool taking `{"action": "open", "url": …}`) with the artifact's
/// page, so the page is the session's current tab, where the person sees it (a headed browser)
/// and the model can read or drive it. A plan is shown through an HTML page written next to
/// its Markdown file.
pub struct BrowserPresenter {
    tool: std::sync::Arc<dyn kodik_core::Tool>,
    context: kodik_core::ToolContext,
}

impl std::fmt::Debug for BrowserPresenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserPresenter").field("tool", &self.tool.spec().name).finish_non_exhaustive()
    }
}

impl BrowserPresenter {
    /// Opens artifacts with `tool` (the `browser` tool) under `context`. The call is the
    /// host's, not the model's: it is not put to the approver.
    pub fn new(tool: std::sync::Arc<dyn kodik_core::Tool>, context: kodik_core::ToolContext) -> Self {
        Self { tool, context }
    }
}

#[async_trait]
impl Presenter for BrowserPresenter {
    async fn present(&self, artifact: &Artifact) -> Result<String, PresentError> {
        let page = html_view(artifact)?;
        let url = file_url(&page);
        let out = self.tool.call(serde_json::json!({ "action": "open", "url": url }), &self.context).await;
        if out.is_success() {
            Ok(format!("opened in the browser ({url})"))
        } else {
            Err(PresentError { path: page, reason: format!("the browser could not open it: {}", out.text_content()) })
        }
    }
}

/// The page that shows `artifact` in a browser: the lesson itself, or for a plan an HTML
/// rendering of its Markdown written next to it (`plan.md` → `plan.html`).
pub fn html_view(artifact: &Artifact) -> Result<PathBuf, PresentError> {
    match artifact.kind {
        ArtifactKind::Lesson => Ok(artifact.path.clone()),
        ArtifactKind::Plan => {
            let err = |reason: String| PresentError { path: artifact.path.clone(), reason };
            let md = std::fs::read_to_string(&artifact.path).map_err(|e| err(format!("reading it: {e}")))?;
            let page = artifact.path.with_extension("html");
            std::fs::write(&page, markdown_page(&artifact.title, &md))
                .map_err(|e| err(format!("writing {}: {e}", page.display())))?;
            Ok(page)
        }
    }
}

/// A `file://` URL for an absolute path, every byte outside the unreserved set escaped.
pub fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'~') {
            url.push(b as char);
        } else {
            let _ = write!(url, "%{b:02X}");
        }
    }
    url
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `**bold**` and `` `code` `` of one escaped line.
fn inline(text: &str) -> String {
    let code = |part: &str| {
        let mut out = String::new();
        for (i, piece) in part.split('`').enumerate() {
            if i % 2 == 1 {
                let _ = write!(out, "<code>{piece}</code>");
            } else {
                out.push_str(piece);
            }
        }
        out
    };
    let mut out = String::new();
    for (i, part) in escape(text).split("**").enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<strong>{}</strong>", code(part));
        } else {
            out.push_str(&code(part));
        }
    }
    out
}

/// The Markdown of [`plan_markdown`] (headings, numbered and bulleted items with indented
/// details, bold and code spans) as a self-contained HTML page; anything else is a paragraph.
pub fn markdown_page(title: &str, md: &str) -> String {
    let mut body = String::new();
    let mut list: Option<&str> = None;
    let close = |body: &mut String, list: &mut Option<&str>| {
        if let Some(tag) = list.take() {
            let _ = writeln!(body, "</li></{tag}>");
        }
    };
    for line in md.lines() {
        let trimmed = line.trim();
        let numbered = trimmed.split_once(". ").filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if trimmed.is_empty() {
            continue;
        } else if let Some(h) = trimmed.strip_prefix("## ") {
            close(&mut body, &mut list);
            let _ = writeln!(body, "<h2>{}</h2>", inline(h));
        } else if let Some(h) = trimmed.strip_prefix("# ") {
            close(&mut body, &mut list);
            let _ = writeln!(body, "<h1>{}</h1>", inline(h));
        } else if let Some((item, tag)) =
            numbered.map(|(_, rest)| (rest, "ol")).or_else(|| trimmed.strip_prefix("- ").map(|r| (r, "ul")))
            && !line.starts_with(' ')
        {
            match list {
                Some(open) if open == tag => body.push_str("</li>\n"),
                _ => {
                    close(&mut body, &mut list);
                    let _ = writeln!(body, "<{tag}>");
                    list = Some(tag);
                }
            }
            let _ = write!(body, "<li>{}", inline(item));
        } else if list.is_some() && line.starts_with(' ') {
            let _ = write!(body, "<br>{}", inline(trimmed));
        } else {
            close(&mut body, &mut list);
            let _ = writeln!(body, "<p>{}</p>", inline(trimmed));
        }
    }
    close(&mut body, &mut list);
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>body{{font-family:sans-serif;\
         max-width:50em;margin:2em auto;line-height:1.5}}code{{background:#eee;padding:0 .2em}}</style></head>\
         <body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// A file name from a title: lowercase ASCII words joined by dashes, at most 60 bytes.
pub fn file_stem(title: &str) -> String {
    let mut s = String::new();
    for w in title.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if s.len() + w.len() > 60 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&w.to_ascii_lowercase());
    }
    if s.is_empty() { "untitled".into() } else { s }
}

/// A path in `dir` for `stem.ext` that no file has yet: a new plan never overwrites an older one.
pub fn fresh_path(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    let mut path = dir.join(format!("{stem}.{ext}"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{stem}-{n}.{ext}"));
    }
    path
}

/// The plan as a reviewable Markdown document: summary, numbered steps with their details and
/// files, every file touched with the steps that touch it, and the risks.
pub fn plan_markdown(plan: &GeneratePlanArgs) -> String {
    let mut md = format!("# {}\n\n{}\n\n## Steps\n", plan.title.trim(), plan.summary.trim());
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = write!(md, "\n{}. **{}**\n", i + 1, step.title.trim());
        if let Some(d) = step.details.as_deref().filter(|d| !d.trim().is_empty()) {
            for line in d.trim().lines() {
                let _ = writeln!(md, "   {line}");
            }
        }
        if !step.files.is_empty() {
            let files: Vec<String> = step.files.iter().map(|f| format!("`{f}`")).collect();
            let _ = writeln!(md, "   Files: {}", files.join(", "));
        }
    }
    let mut files: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        for f in &step.files {
            match files.iter_mut().find(|(name, _)| *name == f.as_str()) {
                Some((_, steps)) => steps.push(i + 1),
                None => files.push((f, vec![i + 1])),
            }
        }
    }
    md.push_str("\n## Files touched\n\n");
    if files.is_empty() {
        md.push_str("None named.\n");
    }
    for (f, steps) in files {
        let steps: Vec<String> = steps.iter().map(usize::to_string).collect();
        let _ = writeln!(md, "- `{f}` (step {})", steps.join(", "));
    }
    md.push_str("\n## Risks\n\n");
    if plan.risks.is_empty() {
        md.push_str("None named.\n");
    }
    for r in &plan.risks {
        let _ = writeln!(md, "- {}", r.trim());
    }
    md
}

/// The first resource of `html` that would be loaded from the network (`src=`, `url(…)`,
/// `@import`, `<link href>` with `http:`, `https:` or `//`), if any. Plain links (`<a href>`)
/// load nothing and are allowed.
pub fn external_resource(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let remote = |rest: &str| {
        let v = rest.trim_start().trim_start_matches(['"', '\'']).trim_start();
        v.starts_with("http:") || v.starts_with("https:") || v.starts_with("//")
    };
    let value_at = |at: usize| -> String {
        html[at..].chars().take_while(|c| !c.is_whitespace() && *c != '>').take(120).collect()
    };
    for pat in ["src=", "src =", "url(", "@import", "srcset="] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(pat) {
            let at = from + i;
            let after = at + pat.len();
            if remote(&lower[after..]) {
                return Some(value_at(at));
            }
            from = after;
        }
    }
    let mut from = 0;
    while let Some(i) = lower[from..].find("<link") {
        let start = from + i;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(h) = tag.find("href=")
            && remote(&tag[h + 5..])
        {
            return Some(value_at(start + h));
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a7_a_plan_page_has_its_headings_steps_details_and_escaped_text() {
        let md = "# Fix <parser>\n\nWhy: **speed**.\n\n## Steps\n\n1. **Split `lex`**\n   Move it out.\n   Files: `src/lex.rs`\n2. **Test**\n\n## Risks\n\n- a & b\n";
        let page = markdown_page("Fix <parser>", md);
        assert!(page.contains("<title>Fix &lt;parser&gt;</title>"), "{page}");
        assert!(page.contains("<h1>Fix &lt;parser&gt;</h1>\n<p>Why: <strong>speed</strong>.</p>"), "{page}");
        assert!(
            page.contains("<ol>\n<li><strong>Split <code>lex</code></strong><br>Move it out.<br>Files: <code>src/lex.rs</code></li>\n<li><strong>Test</strong></li></ol>"),
            "{page}"
        );
        assert!(page.contains("<h2>Risks</h2>\n<ul>\n<li>a &amp; b</li></ul>"), "{page}");
        assert_eq!(file_url(Path::new("/tmp/a b/ü.html")), "file:///tmp/a%20b/%C3%BC.html");
    }

    #[test]
    fn a7_external_resources_are_found_and_links_are_not() {
        assert!(external_resource("<script src=\"https://cdn.x/y.js\"></script>").is_some());
        assert!(external_resource("<img SRC='//x/y.png'>").is_some());
        assert!(external_resource("<style>@import 'http://x/y.css';</style>").is_some());
        assert!(external_resource("<style>b{background:url( \"https://x/y.png\")}</style>").is_some());
        assert!(external_resource("<link rel=stylesheet href=\"https://x.css\">").is_some());
        assert!(
            external_resource("<a href=\"https://doc.rust-lang.org\">docs</a><img src=\"data:image/png;base64,AA\">")
                .is_none()
        );
    }
}
