//! [`WebConfig`]: limits, domain lists and cache sizes of the web tools.

use std::time::Duration;

/// Configuration of `web_fetch` and `web_search`. `Default` is what the tools ship with.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// Total deadline of one fetch or search, redirects and body included (W2, W5: 30 s).
    pub total_timeout: Duration,
    /// The longest wait for the next body byte.
    pub idle_timeout: Duration,
    /// Cap on the **decoded** body (10 MB): a compression bomb stops here.
    pub max_bytes: usize,
    /// Redirects followed before giving up (5).
    pub max_redirects: usize,
    /// The Markdown shown per call (32 KB, W2).
    pub max_output_bytes: usize,
    /// Domains never fetched, nor shown in search results (subdomains included).
    pub blocked_domains: Vec<String>,
    /// When non-empty, the only domains fetched or shown in search results.
    pub allowed_domains: Vec<String>,
    /// How long a fetched page is served from memory before it is revalidated (15 min).
    pub cache_ttl: Duration,
    /// At most this many pages in the cache.
    pub cache_entries: usize,
    /// At most this many bytes of Markdown in the cache.
    pub cache_bytes: usize,
    /// The User-Agent sent.
    pub user_agent: String,
    /// Extra trusted root certificates (PEM), e.g. a company proxy's or a test server's.
    pub extra_root_certificates: Vec<Vec<u8>>,
    /// Honour robots.txt (RFC 9309) as the MCP reference `fetch` server does for the model's own
    /// fetches: a path the site disallows for `kodik-web` (or `*`) is refused, and a site whose
    /// robots.txt answers 5xx or cannot be read is not fetched. On by default.
    pub respect_robots_txt: bool,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            total_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(15),
            max_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            max_output_bytes: 32 * 1024,
            blocked_domains: Vec::new(),
            allowed_domains: Vec::new(),
            cache_ttl: Duration::from_secs(15 * 60),
            cache_entries: 64,
            cache_bytes: 32 * 1024 * 1024,
            user_agent: concat!("kodik-web/", env!("CARGO_PKG_VERSION"), " (+https://github.com/kodik-tools)").into(),
            extra_root_certificates: Vec::new(),
            respect_robots_txt: true,
        }
    }
}
