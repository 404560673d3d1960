//! Limits shared by the three tools.

use std::path::PathBuf;

/// Limits of `read_file`, `glob` and `grep`. Every field has a sensible default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchConfig {
    /// The model's context window in tokens (default 200 000). Without an explicit
    /// [`max_file_bytes`](Self::max_file_bytes) a text file may be read whole up to a quarter
    /// of the window, at about 4 bytes a token: 200 000 bytes by default (R3).
    pub context_window_tokens: usize,
    /// An explicit size limit for reading a text file whole (R3).
    pub max_file_bytes: Option<u64>,
    /// At most this many bytes of text per `read_file` call (R2: 16 KB).
    pub read_output_bytes: usize,
    /// Largest image `read_file` opens (R5: 20 MB).
    pub max_image_bytes: u64,
    /// Images with a longer side are downscaled to it (R5: 2048 px).
    pub image_max_side: u32,
    /// Near-square images (sides within 25% of each other) above this many pixels are
    /// downscaled to it (R5's "large near-square image"; 1.15 megapixels, what vision
    /// models take without resampling).
    pub image_square_max_pixels: u64,
    /// Files `glob` lists before it only counts the rest (default 100).
    pub glob_limit: usize,
    /// Entries `grep` shows when the call gives no `head_limit` (default 250).
    pub grep_head_limit: usize,
    /// Characters of one line `grep` shows before cutting it (default 500); a longer matching
    /// line is shown as windows around its matches, with their columns.
    pub grep_max_line_chars: usize,
    /// Bytes of matching lines one `grep` answer shows at most, whatever `head_limit` says
    /// (default 64 KiB); the answer names the offset of the next page.
    pub grep_max_output_bytes: usize,
    /// Where `grep` saves its full result when the answer shows only part of it (default
    /// kodik-core's spool folder, `$TMPDIR/kodik-output`); `None` saves nothing.
    pub spool_dir: Option<PathBuf>,
    /// Worker threads for walks; 0 is ripgrep's default (one per core, at most 12).
    pub threads: usize,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            context_window_tokens: 200_000,
            max_file_bytes: None,
            read_output_bytes: 16 * 1024,
            max_image_bytes: 20 * 1024 * 1024,
            image_max_side: 2048,
            image_square_max_pixels: 1_150_000,
            glob_limit: 100,
            grep_head_limit: 250,
            grep_max_line_chars: 500,
            grep_max_output_bytes: 64 * 1024,
            spool_dir: Some(kodik_core::preview::default_spool_dir()),
            threads: 0,
        }
    }
}

impl SearchConfig {
    /// The size limit for reading a text file whole (R3).
    pub fn max_file_bytes(&self) -> u64 {
        // A quarter of the window at ~4 bytes a token: one byte per token.
        self.max_file_bytes.unwrap_or(self.context_window_tokens as u64)
    }
}
