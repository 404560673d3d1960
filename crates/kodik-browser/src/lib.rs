//! `browser`: a real headless Chromium (through chromiumoxide) that an AI agent can see, act in
//! and trust (SPEC B1–B12).
//!
//! One [`BrowserSession`] per conversation owns its tabs and starts Chromium lazily on the first
//! `open`; [`BrowserTool`] is the `browser` tool over it. The model looks at a page through a
//! compact accessibility snapshot whose `[ref=eN]` refs are valid for the latest observation only,
//! acts through refs or strict locators (several matches or none are errors that list what was
//! found), and is told about dialogs, new tabs, blocked popups and console errors in the result
//! of the action that caused them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kodik_browser::{BrowserOptions, BrowserSession, BrowserTool};
//! let session = Arc::new(BrowserSession::new(BrowserOptions::default()));
//! let tool = BrowserTool::new(session.clone());
//! # let _ = tool;
//! ```

mod actions;
pub mod credentials;
pub mod error;
mod eval;
mod frames;
pub mod launch;
mod preview;
mod raw;
mod render;
mod session;
mod tool;

pub use credentials::{Credential, CredentialStore};
pub use error::BrowserError;
pub use launch::find_chromium;
pub use session::{BrowserOptions, BrowserSession, Takeover};
pub use tool::BrowserTool;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
