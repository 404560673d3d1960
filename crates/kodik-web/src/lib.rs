//! `web_fetch` and `web_search` for Kodik (SPEC W1–W5).
//!
//! - [`GuardedClient`]: the only way a page is reached. Names resolve through a resolver that
//!   drops forbidden addresses (loopback, RFC 1918, link-local/cloud metadata, CGNAT, reserved,
//!   multicast, documentation, unique-local, IPv4 embedded in IPv6 …), IP literals are checked
//!   directly, every redirect hop is checked again (at most 5, never https→http, plain http and
//!   loopback only when the model's own URL named localhost), environment proxies are off.
//! - [`WebFetchTool`]: HTML → Markdown with main-content extraction, JSON, text, PDF, images
//!   described; a 32 KB page cut at a section boundary with the outline of the rest; `query`;
//!   the text framed as untrusted; a 15-minute cache revalidated with ETag/Last-Modified.

pub mod addr;
pub mod client;
pub mod config;
pub mod content;
pub mod decode;
pub mod fetch;
pub mod html;
pub mod sections;

pub use client::{FetchError, Fetched, GuardedClient, GuardedResolver};
pub use config::WebConfig;
pub use fetch::WebFetchTool;
