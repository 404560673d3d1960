//! `web_fetch` and `web_search` for Kodik (SPEC W1–W5).

pub mod addr;
pub mod client;
pub mod config;

pub use client::{FetchError, Fetched, GuardedClient, GuardedResolver};
pub use config::WebConfig;
