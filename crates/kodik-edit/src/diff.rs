//! Unified diffs of a change (E6), bounded in time and in what the model is shown.

use std::time::Duration;

use kodik_core::{OutputPreview, PreviewConfig};

/// How long the line diff may search for a minimal edit script before it settles for a
/// correct but less minimal one. This is what keeps a whole-file replacement of a large
/// file from going quadratic.
const DIFF_TIMEOUT: Duration = Duration::from_millis(300);

/// A diff as the model sees it, with the full text saved when it had to be cut (G9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffText {
    /// The diff, or its head and tail with the dropped middle marked.
    pub text: String,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    /// Where the complete diff was saved when `text` is cut.
    pub full_output: Option<std::path::PathBuf>,
}

struct PreviewWriter<'a>(&'a mut OutputPreview);

impl std::io::Write for PreviewWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The unified diff (3 lines of context) from `old` to `new`, labelled with `name`.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> DiffText {
    unified_with(old, new, old_name, new_name, PreviewConfig::default())
}

/// [`unified`] with a chosen preview size and spool folder.
pub fn unified_with(old: &str, new: &str, old_name: &str, new_name: &str, cfg: PreviewConfig) -> DiffText {
    let diff = similar::TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for op in diff.ops() {
        match *op {
            similar::DiffOp::Insert { new_len, .. } => added += new_len,
            similar::DiffOp::Delete { old_len, .. } => removed += old_len,
            similar::DiffOp::Replace { old_len, new_len, .. } => {
                added += new_len;
                removed += old_len;
            }
            similar::DiffOp::Equal { .. } => {}
        }
    }
    let mut preview = OutputPreview::new(cfg);
    if added + removed > 0 {
        let mut udiff = diff.unified_diff();
        udiff.context_radius(3).header(old_name, new_name);
        // Writing into the preview cannot fail.
        let _ = udiff.to_writer(PreviewWriter(&mut preview));
    }
    let summary = preview.summary();
    DiffText { text: summary.text, added, removed, full_output: summary.full_output }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e6_diff_is_exact_unified_text() {
        let d = unified("a\nb\nc\n", "a\nB\nc\n", "a/x.txt", "b/x.txt");
        assert_eq!(d.text, "--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        assert_eq!((d.added, d.removed), (1, 1));
    }

    #[test]
    fn g9_huge_diff_is_cut_with_head_tail_and_saved_in_full() {
        let dir = tempfile::tempdir().unwrap();
        let old: String = (0..20_000).map(|i| format!("old line {i}\n")).collect();
        let new: String = (0..20_000).map(|i| format!("new line {i}\n")).collect();
        let d = unified_with(&old, &new, "a/f", "b/f", PreviewConfig::with_limit(4096).spool_in(dir.path()));
        assert!(d.text.contains("omitted"), "{}", &d.text[..200]);
        assert_eq!((d.added, d.removed), (20_000, 20_000));
        let full = std::fs::read_to_string(d.full_output.unwrap()).unwrap();
        assert!(full.contains("-old line 19999\n") && full.contains("+new line 0\n"));
    }
}
