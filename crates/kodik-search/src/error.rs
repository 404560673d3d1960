//! [`SearchError`]: everything the three tools can refuse, worded for the model.

use kodik_core::{PathError, ToolError};

/// Why a search tool call failed. Each message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A path was refused (outside the workspace, `.kodikignore`, missing, …).
    #[error(transparent)]
    Path(#[from] PathError),
    /// `read_file` was given a folder.
    #[error("`{0}` is a folder, not a file; use `glob` (e.g. pattern `{0}/**/*`) to list its files")]
    IsFolder(String),
    /// `glob` or `grep` was given something that is neither file nor folder.
    #[error("`{0}` is not a regular file or folder")]
    NotSearchable(String),
    /// A glob pattern given as `path`, which takes a file or folder.
    #[error(
        "`path` takes a file or folder, and `{given}` is a glob pattern; put {hint} instead (`{field}` takes the pattern)"
    )]
    GlobAsPath {
        /// The path as given.
        given: String,
        /// The call that means it: `path` and pattern split.
        hint: String,
        /// The parameter that takes a pattern: `glob` (grep) or `pattern` (glob).
        field: &'static str,
    },
    /// `glob` was given a file where it needs a folder.
    #[error("`{0}` is a file; `glob` searches a folder — give the folder as `path`")]
    GlobOnFile(String),
    /// A binary file where text was expected.
    #[error("`{0}` is a binary file (it contains NUL bytes), not text or a supported image; it cannot be read")]
    Binary(String),
    /// An image over the size limit.
    #[error("`{path}` is {size} bytes; images are read up to {limit} bytes")]
    ImageTooLarge {
        /// The image.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A file with an image extension that is not a valid image.
    #[error("`{path}` has an image extension but is not a valid PNG, JPEG, GIF or WebP image: {reason}")]
    InvalidImage {
        /// The file.
        path: String,
        /// What the decoder said.
        reason: String,
    },
    /// A valid image that could not be re-encoded after downscaling.
    #[error("`{path}`: the downscaled image could not be encoded: {reason}")]
    ImageEncode {
        /// The file.
        path: String,
        /// What the encoder said.
        reason: String,
    },
    /// A bad entry in `ranges`.
    #[error("ranges[{index}]: {reason}")]
    BadRange {
        /// Which range (0-based).
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The regex did not compile.
    #[error(
        "invalid regex `{pattern}`: {message}\nFix the pattern (Rust regex syntax, as ripgrep), or set `fixed_strings: true` to search for the text literally."
    )]
    BadRegex {
        /// The pattern.
        pattern: String,
        /// The regex engine's message, with the position.
        message: String,
    },
    /// A glob (in `glob`, or grep's `glob`/`exclude`) did not compile.
    #[error("invalid glob `{glob}`: {reason}")]
    BadGlob {
        /// The glob.
        glob: String,
        /// What is wrong.
        reason: String,
    },
    /// grep's `max_count: 0`, which would show no match at all.
    #[error(
        "max_count 0 would stop before the first match in every file, so nothing could be found; leave it out \
         for no limit (head_limit: 0 is what shows every entry), or give a count of 1 or more"
    )]
    MaxCountZero,
    /// Unknown file type for grep's `type`.
    #[error("unknown file type `{name}` (ripgrep's type table); {hint}")]
    UnknownType {
        /// The name given.
        name: String,
        /// Close names or examples.
        hint: String,
    },
    /// An I/O error.
    #[error("{action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// A bug: a worker thread failed.
    #[error("internal error in the search tool: {0}")]
    Internal(String),
}

impl From<SearchError> for ToolError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Path(p) => ToolError::Path(p),
            SearchError::Io { action, path, source } => ToolError::Io { action, path, source },
            SearchError::Cancelled => ToolError::Cancelled,
            // An argument no call can use: the model's to fix, as a schema mismatch is.
            e @ SearchError::MaxCountZero => {
                ToolError::InvalidInput { tool: "grep".into(), field: Some("max_count".into()), message: e.to_string() }
            }
            other => ToolError::Failed(other.to_string()),
        }
    }
}
