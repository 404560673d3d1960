//! `memory` (A2): notes as plain Markdown files, one file per note, that a person can read and
//! edit: `<workspace>/.kodik/memory/<id>.md`, `<config dir>/kodik/memory/<id>.md` and, for the
//! session scope, `<workspace>/.kodik/memory/sessions/<session id>/<id>.md`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kodik_core::{ToolError, Workspace};

/// Size limits of the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Largest note, in bytes (default 4 KiB: a note is one fact, not a document).
    pub max_note_bytes: usize,
    /// Most notes in one scope (default 200).
    pub max_notes: usize,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        Self { max_note_bytes: 4096, max_notes: 200 }
    }
}

/// One stored note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The file stem: what `update` and `delete` take.
    pub id: String,
    /// The file's text.
    pub content: String,
    /// Where it is stored.
    pub path: PathBuf,
}

/// The user-level memory folder: `$KODIK_CONFIG_DIR/memory`, else
/// `$XDG_CONFIG_HOME/kodik/memory`, else `~/.config/kodik/memory` (the same root as the other
/// user-level kodik files).
pub fn default_global_dir() -> Option<PathBuf> {
    let env = |k| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("KODIK_CONFIG_DIR")
        .or_else(|| env("XDG_CONFIG_HOME").map(|d| d.join("kodik")))
        .or_else(|| env("HOME").map(|d| d.join(".config").join("kodik")))
        .map(|d| d.join("memory"))
}

fn failed(msg: impl Into<String>) -> ToolError {
    ToolError::failed(msg)
}

/// Whether `id` names a file directly inside the memory folder and nothing else: one path
/// component, no separators, no leading dot (so neither `..` nor hidden temp files).
fn check_id(id: &str) -> Result<&str, ToolError> {
    let id = id.trim();
    let id = id.strip_suffix(".md").unwrap_or(id);
    let ok = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && !id.contains(['/', '\\', '\0', ':'])
        && !id.chars().any(char::is_control);
    if ok {
        Ok(id)
    } else {
        Err(ToolError::InvalidInput {
            tool: "memory".into(),
            field: Some("id".into()),
            message: format!("`{id}` is not a note id: use an id from action `list` (a file name, no path)"),
        })
    }
}

/// A readable id from the note's first words: lowercase ASCII letters, digits and dashes.
fn slug(content: &str) -> String {
    let mut s = String::new();
    for word in content.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if s.len() + word.len() > 40 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    if s.is_empty() { "note".to_string() } else { s }
}

/// A note file [`list`] left out, and why: the model is told, so it does not save the same fact
/// again or look for the note by an id that is not listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file's name.
    pub name: String,
    /// Why it was left out.
    pub reason: String,
}

/// The notes of one folder: what [`list`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The readable notes, sorted by id.
    pub notes: Vec<Note>,
    /// Files that look like notes but were left out.
    pub skipped: Vec<Skipped>,
}

/// Where a memory folder may reach. A workspace's memory is part of the workspace: a note that is
/// a link to a file outside it (`~/.aws/credentials` planted by a cloned repo) is neither read
/// nor changed, as `read_file` and `create_file` refuse such paths (G16). The user's own global
/// memory is not confined.
fn escapes(path: &Path, inside: Option<&Workspace>) -> bool {
    let Some(ws) = inside else { return false };
    let is_link = path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink());
    is_link && ws.resolve(path).is_err()
}

/// Lists the notes in `dir` (none when it does not exist yet), sorted by id. A file that is not
/// UTF-8 text or is a link out of the workspace `inside` is skipped and named in
/// [`Listing::skipped`], so one odd file does not break the whole memory.
pub fn list(dir: &Path, inside: Option<&Workspace>) -> Result<Listing, ToolError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(ToolError::io("listing", dir, e)),
    };
    let mut out = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| ToolError::io("listing", dir, e))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(id) = name.strip_suffix(".md") else {
            continue;
        };
        if id.starts_with('.') || !path.is_file() {
            continue;
        }
        let skip = |reason: &str| Skipped { name: name.to_string(), reason: reason.to_string() };
        if escapes(&path, inside) {
            out.skipped.push(skip("a link to a file outside the workspace"));
            continue;
        }
        if check_id(id).is_err() {
            out.skipped
                .push(skip("its name cannot be a note id (no `:`, `\\`, control characters; at most 100 bytes)"));
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(content) => out.notes.push(Note { id: id.to_string(), content, path }),
                Err(_) => out.skipped.push(skip("not UTF-8 text")),
            },
            // Deleted between the listing and the read (another agent): it is gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ToolError::io("reading", &path, e)),
        }
    }
    out.notes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn check_content(content: &str, limits: MemoryLimits) -> Result<String, ToolError> {
    let content = content.trim();
    if content.len() > limits.max_note_bytes {
        return Err(ToolError::InvalidInput {
            tool: "memory".into(),
            field: Some("content".into()),
            message: format!(
                "the note has {} bytes, more than the {} a note may have: save one fact per note, split it up",
                content.len(),
                limits.max_note_bytes
            ),
        });
    }
    Ok(format!("{content}\n"))
}

/// A temporary file in `dir` holding `text`, under a name no other write uses: this process's
/// id and a counter, so neither two saves of one process nor two processes share it.
fn write_temp(dir: &Path, name: &str, text: &str) -> Result<PathBuf, ToolError> {
    static N: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir).map_err(|e| ToolError::io("creating", dir, e))?;
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| ToolError::io("writing", &tmp, e))?;
    if let Err(e) = file.write_all(text.as_bytes()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(ToolError::io("writing", &tmp, e));
    }
    Ok(tmp)
}

/// Writes through a temporary file and a rename, so a reader never sees half a note.
fn write_atomic(path: &Path, text: &str) -> Result<(), ToolError> {
    let dir = path.parent().ok_or_else(|| failed(format!("{} has no folder", path.display())))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("note");
    let tmp = write_temp(dir, name, text)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ToolError::io("writing", path, e)
    })
}

/// Puts `text` at `path` only if nothing is there yet: `Ok(false)` when the name is taken. Two
/// saves racing for one id (same first words, in one turn or from two agents) thus never both
/// get it. A hard link of a complete temporary file is both exclusive and atomic; where the
/// file system has no hard links, an exclusive create of the file itself.
fn create_exclusive(path: &Path, text: &str) -> Result<bool, ToolError> {
    let dir = path.parent().ok_or_else(|| failed(format!("{} has no folder", path.display())))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("note");
    let tmp = write_temp(dir, name, text)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(_) => {
            let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(ToolError::io("writing", path, e)),
            };
            file.write_all(text.as_bytes()).map_err(|e| ToolError::io("writing", path, e))?;
            Ok(true)
        }
    }
}

/// Saves a new note and returns it.
pub fn save(dir: &Path, content: &str, limits: MemoryLimits, inside: Option<&Workspace>) -> Result<Note, ToolError> {
    let text = check_content(content, limits)?;
    let notes = list(dir, inside)?.notes;
    if notes.len() >= limits.max_notes {
        return Err(failed(format!(
            "this memory already holds {} notes, the most it may: update or delete outdated notes first (action `list`)",
            notes.len()
        )));
    }
    if let Some(same) = notes.iter().find(|n| n.content.trim() == text.trim()) {
        return Ok(same.clone());
    }
    let base = slug(&text);
    let mut id = base.clone();
    let mut n = 1;
    loop {
        let path = dir.join(format!("{id}.md"));
        // Ids the listing knows are skipped without a try; a name taken meanwhile by another
        // save is found by the exclusive create and the next number is tried.
        let known = notes.iter().any(|note| note.id == id) || path.symlink_metadata().is_ok();
        if !known && create_exclusive(&path, &text)? {
            return Ok(Note { id, content: text, path });
        }
        n += 1;
        id = format!("{base}-{n}");
    }
}

fn existing(dir: &Path, id: &str, inside: Option<&Workspace>) -> Result<PathBuf, ToolError> {
    let id = check_id(id)?;
    let path = dir.join(format!("{id}.md"));
    if escapes(&path, inside) {
        return Err(failed(format!(
            "note `{id}` is a link to a file outside the workspace ({}); memory neither reads nor changes it",
            path.display()
        )));
    }
    if path.is_file() {
        return Ok(path);
    }
    let ids: Vec<String> = list(dir, inside)?.notes.into_iter().map(|n| n.id).collect();
    let known = if ids.is_empty() { "this memory is empty".to_string() } else { format!("ids: {}", ids.join(", ")) };
    Err(ToolError::InvalidInput {
        tool: "memory".into(),
        field: Some("id".into()),
        message: format!("no note `{id}` ({known})"),
    })
}

/// Replaces note `id` with `content`.
pub fn update(
    dir: &Path,
    id: &str,
    content: &str,
    limits: MemoryLimits,
    inside: Option<&Workspace>,
) -> Result<Note, ToolError> {
    let text = check_content(content, limits)?;
    let path = existing(dir, id, inside)?;
    write_atomic(&path, &text)?;
    Ok(Note { id: check_id(id)?.to_string(), content: text, path })
}

/// Deletes note `id`.
pub fn delete(dir: &Path, id: &str, inside: Option<&Workspace>) -> Result<PathBuf, ToolError> {
    let path = existing(dir, id, inside)?;
    std::fs::remove_file(&path).map_err(|e| ToolError::io("deleting", &path, e))?;
    Ok(path)
}

/// The notes as the model reads them: each with its id and full text.
pub fn render(scope: &str, dir: &Path, listing: &Listing) -> String {
    let mut unbounded = usize::MAX;
    render_within(scope, dir, listing, &mut unbounded)
}

/// [`render`] within `budget` bytes (taken from it): whole notes in id order while they fit,
/// then the ids of the rest (at most 50) and how to read them, so many or long notes cannot
/// fill a request the model has not even started on. Files that are not usable notes are
/// always named, with why.
pub fn render_within(scope: &str, dir: &Path, listing: &Listing, budget: &mut usize) -> String {
    let notes = &listing.notes;
    let mut out = if notes.is_empty() {
        format!("The {scope} memory is empty ({}).", dir.display())
    } else {
        format!("{} notes in the {scope} memory ({}):", notes.len(), dir.display())
    };
    let mut left_out = Vec::new();
    for n in notes {
        let section = format!("\n\n## {}\n{}", n.id, n.content.trim_end());
        if left_out.is_empty() && out.len().saturating_add(section.len()) <= *budget {
            out.push_str(&section);
        } else {
            left_out.push(n.id.as_str());
        }
    }
    if !left_out.is_empty() {
        let shown = left_out.len().min(50);
        let more = if left_out.len() > shown { format!(" and {} more", left_out.len() - shown) } else { String::new() };
        let _ = write!(
            out,
            "\n\n{} more notes are not shown here (read them with memory `list`, scope `{scope}`): {}{more}",
            left_out.len(),
            left_out[..shown].join(", ")
        );
    }
    if !listing.skipped.is_empty() {
        out.push_str("\n\nLeft out (not notes memory can use; a person can fix or remove them):");
        for s in &listing.skipped {
            let _ = write!(out, "\n- {}: {}", s.name, s.reason);
        }
    }
    *budget = budget.saturating_sub(out.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2_ids_cannot_leave_the_memory_folder() {
        for bad in ["../x", "a/b", "..", ".hidden", "", "a\\b", "/etc/passwd"] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
        assert_eq!(check_id("use-pnpm.md").unwrap(), "use-pnpm");
    }

    /// A2: the bounded rendering a new conversation's first request carries still names the
    /// files that are not usable notes, as the memory tool's list does.
    #[test]
    fn a2_notes_within_a_budget_still_name_the_files_left_out() {
        let note = |id: &str, text: &str| Note { id: id.into(), content: text.into(), path: PathBuf::from(id) };
        let listing = Listing {
            notes: vec![note("a", &"x".repeat(300)), note("b", "short")],
            skipped: vec![Skipped { name: "bad.md".into(), reason: "not UTF-8 text".into() }],
        };
        let mut budget = 200;
        let out = render_within("workspace", Path::new("/m"), &listing, &mut budget);
        assert!(out.contains("2 more notes are not shown here") && out.contains("a, b"), "{out}");
        assert!(out.contains("Left out") && out.contains("- bad.md: not UTF-8 text"), "{out}");
        assert_eq!(budget, 0);
        let whole = render("workspace", Path::new("/m"), &listing);
        assert!(whole.contains("## b\nshort") && whole.contains("- bad.md"), "{whole}");
    }

    #[test]
    fn a2_slug_is_readable_and_bounded() {
        assert_eq!(slug("Use pnpm, not npm!"), "use-pnpm-not-npm");
        assert!(slug(&"word ".repeat(50)).len() <= 40);
        assert_eq!(slug("日本語"), "note");
    }
}
