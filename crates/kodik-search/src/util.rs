//! Small helpers shared by the tools.

use std::hash::{DefaultHasher, Hash, Hasher};

use kodik_core::CancellationToken;

use crate::error::SearchError;

/// Runs blocking file work off the async threads; a cancellation answers at once while the
/// worker (which watches the same token) winds down on its own.
pub(crate) async fn run_blocking<T, F>(cancel: &CancellationToken, work: F) -> Result<T, SearchError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, SearchError> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(SearchError::Cancelled);
    }
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(SearchError::Cancelled),
        joined = handle => joined.map_err(|e| SearchError::Internal(e.to_string()))?,
    }
}

/// A cancellation check cheap enough for every entry of a walk: it looks at the token every
/// 64th time only. The token takes a lock, which walker threads asking for every entry contend
/// for — and on a loaded machine wait on while its holder is preempted, which turned a parallel
/// walk's wall time serial.
pub(crate) struct CancelCheck {
    token: CancellationToken,
    calls: u32,
}

impl CancelCheck {
    pub(crate) fn new(token: CancellationToken) -> Self {
        Self { token, calls: 0 }
    }

    /// Whether the call was cancelled, as seen at the latest look.
    pub(crate) fn is_cancelled(&mut self) -> bool {
        self.calls = self.calls.wrapping_add(1);
        self.calls.is_multiple_of(64) && self.token.is_cancelled()
    }
}

/// A stable 64-bit hash of anything hashable (within one process, which is all the loop guard needs).
pub(crate) fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// `(mtime in ns, len)` of a file, for loop-guard fingerprints; zeros when it cannot be read.
pub(crate) fn stamp(meta: Option<&std::fs::Metadata>) -> (u128, u64) {
    match meta {
        Some(m) => {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (t, m.len())
        }
        None => (0, 0),
    }
}

/// Whether a glob names a hidden component (`.github/**`, `**/.env*`): then hidden files are
/// searched too, since the model asked for them explicitly.
pub(crate) fn names_hidden(pattern: &str) -> bool {
    pattern.trim_start_matches('!').split('/').any(|c| c.starts_with('.') && c != "." && c != "..")
}

/// A byte count for people: `512 bytes`, `12.3 KB`, `4.0 MB`.
pub(crate) fn human_bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n < 1024 * 1024 {
        format!("{:.1} KB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MB", n as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gl1_hidden_components_are_recognised() {
        assert!(names_hidden(".github/**/*.yml"));
        assert!(names_hidden("**/.env*"));
        assert!(!names_hidden("**/*.rs"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("../x/*.rs"));
    }
}
