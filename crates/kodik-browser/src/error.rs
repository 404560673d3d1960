//! [`BrowserError`]: everything that can go wrong in a browser action, said so the model can act on it.

use kodik_core::ToolError;

/// What went wrong in a browser action.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// No Chromium could be found.
    #[error(
        "no Chromium found: install Debian's `chromium` package (apt-get install chromium), or set CHROME to the \
         browser binary"
    )]
    NotInstalled,
    /// Chromium was found but did not start.
    #[error("Chromium ({executable}) did not start: {reason}")]
    Launch {
        /// The binary that was started.
        executable: String,
        /// Why it failed.
        reason: String,
    },
    /// A DevTools command failed.
    #[error("the browser refused `{what}`: {reason}")]
    Cdp {
        /// What was being done.
        what: String,
        /// The browser's answer.
        reason: String,
    },
    /// A ref that is not in the latest snapshot of the tab.
    #[error("{0}; take a new snapshot and use a ref from it")]
    StaleRef(String),
    /// The target matched no element.
    #[error("{0}")]
    NoMatch(String),
    /// The target matched several elements.
    #[error("{0}; use a ref from the list or a more specific target")]
    Ambiguous(String),
    /// The element cannot take the action (hidden, disabled, covered, not a field).
    #[error("{0}")]
    NotActionable(String),
    /// A JavaScript dialog is open and must be answered first.
    #[error(
        "{} {kind} dialog is open on tab {tab} ({message:?}); answer it with handle_dialog (accept: true/false{prompt}) \
         before other actions",
        article(.kind)
    )]
    DialogOpen {
        /// alert, confirm, prompt or beforeunload.
        kind: String,
        /// The tab.
        tab: String,
        /// The dialog's message.
        message: String,
        /// A hint about prompt_text for prompts.
        prompt: &'static str,
    },
    /// handle_dialog with no dialog open.
    #[error("no JavaScript dialog is open on tab {0}")]
    NoDialog(String),
    /// A wait ran out of time.
    #[error("timed out after {ms} ms waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        ms: u64,
    },
    /// An unknown tab id.
    #[error("no tab {id}; open tabs: {open}")]
    NoTab {
        /// The id asked for.
        id: String,
        /// The tabs there are.
        open: String,
    },
    /// An action that needs a tab when none is open.
    #[error("no tab is open; start with `open` and a url")]
    NoOpenTab,
    /// Coordinates that do not belong to the latest screenshot.
    #[error("{0}")]
    StaleScreenshot(String),
    /// Something the caller asked for that this version does not do.
    #[error("`{0}` is not implemented in this version of the browser tool")]
    NotImplemented(String),
    /// A refused request (origin mismatch, eval outside the whitelist, file not allowed).
    #[error("{0}")]
    Refused(String),
    /// The page did not answer in time (a busy script, a hung renderer, a navigation waiting for
    /// its server); later steps of the same call do not wait on it again.
    #[error("{0}")]
    Unresponsive(String),
    /// The call was cancelled while it waited.
    #[error("cancelled while waiting for {0}")]
    Cancelled(String),
    /// Anything else, said plainly.
    #[error("{0}")]
    Other(String),
}

impl From<BrowserError> for ToolError {
    fn from(e: BrowserError) -> Self {
        match e {
            BrowserError::Refused(m) => ToolError::Denied(m),
            BrowserError::Cancelled(_) => ToolError::Cancelled,
            other => ToolError::Failed(other.to_string()),
        }
    }
}

/// "a" or "an" before a dialog kind (an alert, a confirm).
pub(crate) fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

/// Turns a chromiumoxide error into a [`BrowserError::Cdp`] naming what was being done.
pub(crate) fn cdp(what: impl Into<String>) -> impl FnOnce(chromiumoxide::error::CdpError) -> BrowserError {
    let what = what.into();
    move |e| BrowserError::Cdp { what, reason: e.to_string() }
}
