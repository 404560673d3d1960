//! `memory` (A2): notes as plain Markdown files, one file per note, that a person can read and
//! edit: `<workspace>/.kodik/memory/<id>.md`, `<config dir>/kodik/memory/<id>.md` and, for the
//! session scope, `<workspace>/.kodik/memory/sessions/<session id>/<id>.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kodik_core::ToolError;

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

/// Lists the notes in `dir` (none when it does not exist yet), sorted by id.
pub fn list(dir: &Path) -> Result<Vec<Note>, ToolError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ToolError::io("listing", dir, e)),
    };
    let mut notes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ToolError::io("listing", dir, e))?;
        let path = entry.path();
        let Some(id) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".md")) else {
            continue;
        };
        if id.starts_with('.') || !path.is_file() {
            continue;
        }
        let content = std::fs::read_to_string(&path).map_err(|e| ToolError::io("reading", &path, e))?;
        notes.push(Note { id: id.to_string(), content, path });
    }
    notes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(notes)
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

/// Writes through a temporary file and a rename, so a reader never sees half a note.
fn write_atomic(path: &Path, text: &str) -> Result<(), ToolError> {
    let dir = path.parent().ok_or_else(|| failed(format!("{} has no folder", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| ToolError::io("creating", dir, e))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("note");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| ToolError::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ToolError::io("writing", path, e)
    })
}

/// Saves a new note and returns it.
pub fn save(dir: &Path, content: &str, limits: MemoryLimits) -> Result<Note, ToolError> {
    let text = check_content(content, limits)?;
    let notes = list(dir)?;
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
    while notes.iter().any(|note| note.id == id) {
        n += 1;
        id = format!("{base}-{n}");
    }
    let path = dir.join(format!("{id}.md"));
    write_atomic(&path, &text)?;
    Ok(Note { id, content: text, path })
}

fn existing(dir: &Path, id: &str) -> Result<PathBuf, ToolError> {
    let id = check_id(id)?;
    let path = dir.join(format!("{id}.md"));
    if path.is_file() {
        return Ok(path);
    }
    let ids: Vec<String> = list(dir)?.into_iter().map(|n| n.id).collect();
    let known = if ids.is_empty() { "this memory is empty".to_string() } else { format!("ids: {}", ids.join(", ")) };
    Err(ToolError::InvalidInput {
        tool: "memory".into(),
        field: Some("id".into()),
        message: format!("no note `{id}` ({known})"),
    })
}

/// Replaces note `id` with `content`.
pub fn update(dir: &Path, id: &str, content: &str, limits: MemoryLimits) -> Result<Note, ToolError> {
    let text = check_content(content, limits)?;
    let path = existing(dir, id)?;
    write_atomic(&path, &text)?;
    Ok(Note { id: check_id(id)?.to_string(), content: text, path })
}

/// Deletes note `id`.
pub fn delete(dir: &Path, id: &str) -> Result<PathBuf, ToolError> {
    let path = existing(dir, id)?;
    std::fs::remove_file(&path).map_err(|e| ToolError::io("deleting", &path, e))?;
    Ok(path)
}

/// The notes as the model reads them: each with its id and full text.
pub fn render(scope: &str, dir: &Path, notes: &[Note]) -> String {
    if notes.is_empty() {
        return format!("The {scope} memory is empty ({}).", dir.display());
    }
    let mut out = format!("{} notes in the {scope} memory ({}):", notes.len(), dir.display());
    for n in notes {
        let _ = write!(out, "\n\n## {}\n{}", n.id, n.content.trim_end());
    }
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

    #[test]
    fn a2_slug_is_readable_and_bounded() {
        assert_eq!(slug("Use pnpm, not npm!"), "use-pnpm-not-npm");
        assert!(slug(&"word ".repeat(50)).len() <= 40);
        assert_eq!(slug("日本語"), "note");
    }
}
