//! The guarded HTTP client: the one way kodik-web reaches a page (W1, W4).
//!
//! Names are resolved by [`GuardedResolver`], which drops forbidden addresses, so the connector
//! can only dial checked addresses (no re-resolution between check and connect). IP-literal
//! hosts never reach a resolver and are checked here. Redirects are followed by hand so each hop
//! is checked again; environment proxies are off because a proxy would bypass all of it.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use reqwest::header::{CONTENT_ENCODING, HeaderMap, LOCATION};
use tokio_util::sync::CancellationToken;
use url::{Host, Url};

use crate::addr::{Refusal, check_ip, is_loopback};
use crate::config::WebConfig;

/// Why a fetch failed. Every message says what happened and, where it helps, what to do.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL did not parse.
    #[error("`{url}` is not a valid URL: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// A scheme other than https (or http for localhost).
    #[error("`{url}`: only https:// URLs can be fetched (plain http:// only for localhost), not `{scheme}:`")]
    Scheme {
        /// The URL given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// Plain HTTP to a non-local host.
    #[error("`{url}`: plain http:// is allowed only for localhost, 127.0.0.0/8 and [::1]; use https://")]
    PlainHttp {
        /// The URL given.
        url: String,
    },
    /// An address rule refused the host.
    #[error("refused to connect to `{host}`: {refusal}")]
    Refused {
        /// The host of the URL.
        host: String,
        /// The rule and address.
        refusal: Refusal,
    },
    /// A name resolved only to forbidden addresses.
    #[error("refused to connect to `{host}`: every address it resolves to is forbidden ({})", join(.refusals))]
    AllAddressesRefused {
        /// The name.
        host: String,
        /// One refusal per address.
        refusals: Vec<Refusal>,
    },
    /// The name did not resolve.
    #[error("could not resolve `{host}`: {reason}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        reason: String,
    },
    /// The domain is on the block list, or not on a non-empty allow list.
    #[error("`{host}` is not allowed by the web configuration ({reason})")]
    DomainNotAllowed {
        /// The host.
        host: String,
        /// Which list.
        reason: &'static str,
    },
    /// More redirects than the limit.
    #[error("stopped after {limit} redirects; the last one pointed to {next}")]
    TooManyRedirects {
        /// The limit.
        limit: usize,
        /// Where the next hop would have gone.
        next: String,
    },
    /// A redirect came back to a URL already visited.
    #[error("redirect loop: {url} redirects back to itself through {hops} hop(s)")]
    RedirectLoop {
        /// The repeated URL.
        url: String,
        /// How many hops were taken.
        hops: usize,
    },
    /// A redirect hop broke a rule.
    #[error("the redirect from {from} to {to} was not followed: {reason}")]
    RedirectRefused {
        /// The page that redirected.
        from: String,
        /// Where it pointed.
        to: String,
        /// The rule.
        reason: String,
    },
    /// The deadline or the idle timeout passed.
    #[error("timed out after {} ms {phase}", .after.as_millis())]
    TimedOut {
        /// How long it ran.
        after: Duration,
        /// What was being waited for.
        phase: &'static str,
    },
    /// The call was stopped.
    #[error("cancelled")]
    Cancelled,
    /// No connection could be made to the host: nothing listening, unreachable, TLS refused.
    #[error("could not connect to {authority}: {reason}{}", if *.refused {
        " (nothing is listening there: is the server running, and are the host and port right?)"
    } else { "" })]
    Connect {
        /// `host:port` as dialled.
        authority: String,
        /// The transport's error chain.
        reason: String,
        /// The host answered that nothing listens on the port.
        refused: bool,
    },
    /// Anything the transport reported.
    #[error("request to {url} failed: {reason}")]
    Transport {
        /// The URL.
        url: String,
        /// The transport's error chain.
        reason: String,
    },
    /// The client could not be built.
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

fn join(refusals: &[Refusal]) -> String {
    refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// What a fetch brought back.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL after redirects.
    pub final_url: Url,
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// The decoded (decompressed) body, at most the configured cap.
    pub body: bytes::Bytes,
    /// Whether the body was cut at the cap.
    pub truncated: bool,
    /// How many redirects were followed.
    pub redirects: usize,
}

/// Conditional-request validators of a cached copy.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    /// `ETag` of the cached copy.
    pub etag: Option<String>,
    /// `Last-Modified` of the cached copy.
    pub last_modified: Option<String>,
}

/// The guarded client. Cheap to clone.
#[derive(Clone)]
pub struct GuardedClient {
    strict: reqwest::Client,
    local: reqwest::Client,
    config: Arc<WebConfig>,
}

impl std::fmt::Debug for GuardedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedClient").finish_non_exhaustive()
    }
}

static CRYPTO: Once = Once::new();

/// A resolver that returns only addresses the rules allow; with `allow_loopback`, loopback
/// addresses pass too (the client for a URL that names localhost itself, whose redirects never
/// leave that origin).
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    allow_loopback: bool,
}

/// The resolver's refusal, found again in reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("every address of `{host}` is forbidden")]
struct ResolverRefusal {
    host: String,
    refusals: Vec<Refusal>,
}

impl GuardedResolver {
    /// A resolver for public hosts (`allow_loopback: false`) or for localhost URLs.
    pub fn new(allow_loopback: bool) -> Self {
        Self { allow_loopback }
    }

    /// Resolves `host` and keeps the allowed addresses; none left is an error naming each rule.
    pub async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, FetchError> {
        if let Some(addrs) = localhost_addrs(host) {
            return self.filter(host, addrs);
        }
        let addrs = tokio::net::lookup_host((host, 0))
            .await
            .map_err(|e| FetchError::Resolve { host: host.to_string(), reason: e.to_string() })?;
        self.filter(host, addrs)
    }

    /// Keeps the allowed addresses among `addrs`, the addresses `host` resolved to.
    pub fn filter(
        &self,
        host: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, FetchError> {
        let mut ok = Vec::new();
        let mut refusals = Vec::new();
        for a in addrs {
            let verdict = if self.allow_loopback {
                if is_loopback(a.ip()) { Ok(()) } else { check_ip(a.ip(), false) }
            } else {
                check_ip(a.ip(), false)
            };
            match verdict {
                Ok(()) => ok.push(a),
                Err(r) => refusals.push(r),
            }
        }
        if ok.is_empty() {
            if refusals.is_empty() {
                return Err(FetchError::Resolve { host: host.to_string(), reason: "no addresses".into() });
            }
            return Err(FetchError::AllAddressesRefused { host: host.to_string(), refusals });
        }
        Ok(ok)
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = *self;
        let host = name.as_str().to_string();
        Box::pin(async move {
            match this.lookup(&host).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs),
                Err(FetchError::AllAddressesRefused { host, refusals }) => {
                    Err(Box::new(ResolverRefusal { host, refusals }) as Box<dyn std::error::Error + Send + Sync>)
                }
                Err(e) => Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

/// `localhost` and `*.localhost` names resolve to both loopback addresses, IPv4 first, without
/// asking the system (RFC 6761 §6.3, as curl and browsers do): a dev server bound to `::1` alone
/// (Node ≥ 17, Vite) was "nothing is listening there" when the hosts file lists only 127.0.0.1,
/// and `app.localhost` did not resolve at all. `None` for any other name.
pub fn localhost_addrs(host: &str) -> Option<Vec<SocketAddr>> {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    (h == "localhost" || h.ends_with(".localhost")).then(|| {
        vec![SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)), SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0))]
    })
}

/// Whether a URL host is "local" in W1's sense: `localhost` (or a `.localhost` name),
/// 127.0.0.0/8 or `[::1]`. An IPv4-mapped loopback is not: it is how filters get bypassed.
pub fn is_local_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Host::Ipv4(v4) => v4.is_loopback(),
        Host::Ipv6(v6) => v6.is_loopback(),
    }
}

impl GuardedClient {
    /// Builds the client with `config`.
    pub fn new(config: Arc<WebConfig>) -> Result<Self, FetchError> {
        CRYPTO.call_once(|| {
            // Err means another part of the process installed a provider first; that one serves.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let build = |allow_loopback: bool| {
            let mut b = reqwest::Client::builder()
                .tls_backend_rustls()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .retry(reqwest::retry::never())
                .dns_resolver(GuardedResolver::new(allow_loopback))
                .connect_timeout(config.total_timeout)
                .user_agent(config.user_agent.clone());
            for pem in &config.extra_root_certificates {
                let cert = reqwest::Certificate::from_pem(pem).map_err(|e| FetchError::Client(e.to_string()))?;
                b = b.tls_certs_merge([cert]);
            }
            b.build().map_err(|e| FetchError::Client(e.to_string()))
        };
        Ok(Self { strict: build(false)?, local: build(true)?, config })
    }

    /// The configuration.
    pub fn config(&self) -> &WebConfig {
        &self.config
    }

    /// Checks a URL the model gave, before anything is sent.
    pub fn check_start(&self, raw: &str) -> Result<(Url, bool), FetchError> {
        let url = Url::parse(raw.trim())
            .map_err(|e| FetchError::InvalidUrl { url: raw.to_string(), reason: e.to_string() })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(FetchError::Scheme { url: url.to_string(), scheme: url.scheme().to_string() });
        }
        let host = url
            .host()
            .ok_or_else(|| FetchError::InvalidUrl { url: raw.to_string(), reason: "it has no host".into() })?;
        let local = is_local_host(&host);
        match url.scheme() {
            "https" => {}
            "http" if local => {}
            "http" => return Err(FetchError::PlainHttp { url: url.to_string() }),
            other => return Err(FetchError::Scheme { url: url.to_string(), scheme: other.to_string() }),
        }
        check_host(&host, local)?;
        self.check_domain_lists(&host)?;
        Ok((url, local))
    }

    fn check_domain_lists(&self, host: &Host<&str>) -> Result<(), FetchError> {
        let Host::Domain(d) = host else { return Ok(()) };
        let d = d.trim_end_matches('.').to_ascii_lowercase();
        if self.config.blocked_domains.iter().any(|b| domain_matches(&d, b)) {
            return Err(FetchError::DomainNotAllowed { host: d, reason: "it is on the blocked list" });
        }
        if !self.config.allowed_domains.is_empty() && !self.config.allowed_domains.iter().any(|a| domain_matches(&d, a))
        {
            return Err(FetchError::DomainNotAllowed { host: d, reason: "it is not on the allowed list" });
        }
        Ok(())
    }

    /// Fetches `raw` under every rule: the start check, per-hop redirect checks, the deadline,
    /// the idle timeout, the decoded-size cap and `cancel`.
    pub async fn fetch(
        &self,
        raw: &str,
        validators: Option<&Validators>,
        cancel: &CancellationToken,
    ) -> Result<Fetched, FetchError> {
        self.fetch_within(raw, validators, cancel, self.config.total_timeout, self.config.max_bytes).await
    }

    /// [`fetch`](Self::fetch) with a tighter deadline and size cap (robots.txt).
    pub async fn fetch_within(
        &self,
        raw: &str,
        validators: Option<&Validators>,
        cancel: &CancellationToken,
        deadline: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, FetchError> {
        let (url, local) = self.check_start(raw)?;
        let started = Instant::now();
        let work = self.fetch_checked(url, local, validators, started, max_bytes);
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(FetchError::Cancelled),
            r = tokio::time::timeout(deadline, work) => match r {
                Ok(r) => r,
                Err(_) => Err(FetchError::TimedOut {
                    after: started.elapsed(),
                    phase: if deadline == self.config.total_timeout {
                        "(the 30-second limit of a fetch)"
                    } else {
                        "(the shorter limit of a robots.txt fetch)"
                    },
                }),
            },
        }
    }

    async fn fetch_checked(
        &self,
        start: Url,
        local: bool,
        validators: Option<&Validators>,
        started: Instant,
        max_bytes: usize,
    ) -> Result<Fetched, FetchError> {
        let client = if local { &self.local } else { &self.strict };
        let mut url = start.clone();
        let mut visited: HashSet<String> = HashSet::new();
        visited.insert(format!("{url}\n"));
        // Cookies set by this fetch's own redirects, sent back to their host for the rest of it
        // (a site that sets a cookie and redirects to the same URL to check it); never kept
        // past the call.
        let mut jar = Jar::default();
        let mut redirects = 0;
        loop {
            let mut req = client.get(url.clone()).header(
                reqwest::header::ACCEPT,
                "text/markdown;q=1.0, text/html;q=0.9, application/xhtml+xml;q=0.9, application/json;q=0.8, */*;q=0.5",
            );
            if let Some(cookie) = jar.header_for(&url) {
                req = req.header(reqwest::header::COOKIE, cookie);
            }
            if redirects == 0
                && let Some(v) = validators
            {
                if let Some(e) = &v.etag {
                    req = req.header(reqwest::header::IF_NONE_MATCH, e);
                }
                if let Some(m) = &v.last_modified {
                    req = req.header(reqwest::header::IF_MODIFIED_SINCE, m);
                }
            }
            let mut resp = req.send().await.map_err(|e| transport_error(&url, &e))?;
            let status = resp.status();
            if status.is_redirection() && status != reqwest::StatusCode::NOT_MODIFIED {
                let Some(loc) = resp.headers().get(LOCATION).map(|l| location_text(l.as_bytes())) else {
                    return Err(FetchError::Transport {
                        url: url.to_string(),
                        reason: format!("HTTP {status} without a Location header"),
                    });
                };
                let loc = loc.as_str();
                let next = url.join(loc).map_err(|e| FetchError::RedirectRefused {
                    from: url.to_string(),
                    to: loc.to_string(),
                    reason: format!("the Location does not parse: {e}"),
                })?;
                if redirects >= self.config.max_redirects {
                    return Err(FetchError::TooManyRedirects {
                        limit: self.config.max_redirects,
                        next: next.to_string(),
                    });
                }
                self.check_hop(&start, &url, &next, local)?;
                jar.take(&url, resp.headers());
                // The same URL asked for with new cookies is a cookie check, not a loop.
                let key = format!("{next}\n{}", jar.header_for(&next).unwrap_or_default());
                if !visited.insert(key) {
                    return Err(FetchError::RedirectLoop { url: next.to_string(), hops: redirects + 1 });
                }
                redirects += 1;
                url = next;
                continue;
            }
            let mut headers = resp.headers().clone();
            let (body, truncated) = self.read_body(&mut resp, &url, started, max_bytes).await?;
            let (body, truncated) = undo_codings(&mut headers, body, truncated, max_bytes, &url)?;
            return Ok(Fetched { final_url: url, status: status.as_u16(), headers, body, truncated, redirects });
        }
    }

    /// Err when a redirect from `from` to `next` — for a fetch the model started at `start` —
    /// breaks the rules HTTP redirects follow (used for `<meta http-equiv="refresh">`).
    pub fn check_redirect(&self, start: &str, from: &Url, next: &Url) -> Result<(), FetchError> {
        let (start, local) = self.check_start(start)?;
        self.check_hop(&start, from, next, local)
    }

    /// The rules of one redirect hop, on top of what the resolver enforces.
    fn check_hop(&self, start: &Url, from: &Url, next: &Url, local: bool) -> Result<(), FetchError> {
        let refuse =
            |reason: String| FetchError::RedirectRefused { from: from.to_string(), to: next.to_string(), reason };
        match next.scheme() {
            "https" | "http" => {}
            other => return Err(refuse(format!("`{other}:` URLs are never fetched"))),
        }
        if from.scheme() == "https" && next.scheme() == "http" {
            return Err(refuse("it would downgrade https to plain http".into()));
        }
        let host = next.host().ok_or_else(|| refuse("it has no host".into()))?;
        if local {
            // The model named this local server; a redirect may move within it, never elsewhere
            // on the machine (another port is another service) nor out to the network.
            if next.origin() != start.origin() {
                // Say what is really wrong: an address no fetch may reach is not one the model
                // could pass itself.
                if !is_local_host(&host) {
                    check_host(&host, false).map_err(|e| refuse(e.to_string()))?;
                    if next.scheme() == "https" {
                        return Err(refuse(format!(
                            "a local page's redirects stay within its own server (scheme, host and port); {next} \
is a public https address: fetch it yourself if you need it"
                        )));
                    }
                }
                return Err(refuse(
                    "a local page's redirects stay within its own server (scheme, host and port); plain http \
and loopback addresses are reached only when you give that URL yourself"
                        .into(),
                ));
            }
            return Ok(());
        }
        if next.scheme() == "http" {
            return Err(refuse("plain http is allowed only for a localhost URL you give yourself".into()));
        }
        if is_local_host(&host) {
            return Err(refuse("loopback addresses are reached only when you give that URL yourself".into()));
        }
        check_host(&host, false).map_err(|e| refuse(e.to_string()))?;
        self.check_domain_lists(&host).map_err(|e| refuse(e.to_string()))
    }

    async fn read_body(
        &self,
        resp: &mut reqwest::Response,
        url: &Url,
        started: Instant,
        cap: usize,
    ) -> Result<(bytes::Bytes, bool), FetchError> {
        let mut buf = BytesMut::new();
        loop {
            let chunk = match tokio::time::timeout(self.config.idle_timeout, resp.chunk()).await {
                Err(_) => {
                    return Err(FetchError::TimedOut {
                        after: started.elapsed(),
                        phase: "waiting for the next byte of the body (idle timeout)",
                    });
                }
                Ok(Err(e)) => return Err(transport_error(url, &e)),
                Ok(Ok(None)) => return Ok((buf.freeze(), false)),
                Ok(Ok(Some(c))) => c,
            };
            if buf.len() + chunk.len() > cap {
                buf.extend_from_slice(&chunk[..cap - buf.len()]);
                // The rest is never read: dropping the response closes the connection, so a
                // decompression bomb costs at most `cap` decoded bytes.
                return Ok((buf.freeze(), true));
            }
            buf.extend_from_slice(&chunk);
        }
    }
}

/// Cookies one fetch's redirect responses set, by host (host-only: `Domain` and `Path` are not
/// widened or narrowed, and nothing outlives the fetch).
#[derive(Debug, Default)]
struct Jar(Vec<(String, String, String)>);

impl Jar {
    /// Most cookies kept: a site setting thousands in a redirect chain gets the first ones.
    const MAX: usize = 50;

    /// Takes the `Set-Cookie` headers of a response from `url`.
    fn take(&mut self, url: &Url, headers: &HeaderMap) {
        let Some(host) = url.host_str() else { return };
        for v in headers.get_all(reqwest::header::SET_COOKIE) {
            let Ok(v) = v.to_str() else { continue };
            let pair = v.split(';').next().unwrap_or("");
            let Some((name, value)) = pair.split_once('=') else { continue };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                continue;
            }
            self.0.retain(|(h, n, _)| !(h == host && n == name));
            let expired = v.split(';').skip(1).any(|a| {
                let a = a.trim().to_ascii_lowercase();
                a.strip_prefix("max-age=").is_some_and(|m| m.trim().starts_with(['0', '-']))
            });
            if !expired && self.0.len() < Self::MAX {
                self.0.push((host.to_string(), name.to_string(), value.to_string()));
            }
        }
    }

    /// The `Cookie` header for a request to `url`, if this fetch got cookies from its host.
    fn header_for(&self, url: &Url) -> Option<String> {
        let host = url.host_str()?;
        let pairs: Vec<String> =
            self.0.iter().filter(|(h, _, _)| h == host).map(|(_, n, v)| format!("{n}={v}")).collect();
        (!pairs.is_empty()).then(|| pairs.join("; "))
    }
}

/// A `Location` header's bytes as a URL reference: bytes outside visible ASCII (raw UTF-8 such
/// as `/статья`, a Latin-1 `é`, a space) percent-encoded one by one, as curl and browsers do.
/// `HeaderValue::to_str` refuses such a header, and the redirect was then refused as if it had
/// no Location at all.
fn location_text(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for &b in raw {
        if b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Undoes the content codings the HTTP stack left in place and removes the header.
///
/// reqwest decodes a body whose `Content-Encoding` is exactly `gzip`, `deflate`, `br` or `zstd`
/// and drops the header; any other value (`x-gzip`, which RFC 9110 §8.4.1.3 says to read as
/// gzip, a stack such as `gzip, gzip`, an upper-case name) arrives still encoded, and shown as
/// text it is garbage presented as the page. The gzip family is decoded here, last coding first,
/// under the same decoded-size cap; any other coding is an error naming it, never the raw bytes.
fn undo_codings(
    headers: &mut HeaderMap,
    body: bytes::Bytes,
    truncated: bool,
    cap: usize,
    url: &Url,
) -> Result<(bytes::Bytes, bool), FetchError> {
    use std::io::Read as _;
    let codings: Vec<String> = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes()).split(',').map(|c| c.trim().to_string()).collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
        .collect();
    headers.remove(CONTENT_ENCODING);
    let mut body = body.to_vec();
    let mut truncated = truncated;
    let named = codings.join(", ");
    for coding in codings.iter().rev() {
        let lower = coding.to_ascii_lowercase();
        let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
        let mut out = Vec::new();
        let read = match lower.as_str() {
            "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(&body[..]).take(limit).read_to_end(&mut out),
            "deflate" => {
                // RFC 9110's deflate is zlib-wrapped; some servers send the raw stream.
                match flate2::read::ZlibDecoder::new(&body[..]).take(limit).read_to_end(&mut out) {
                    Ok(n) => Ok(n),
                    Err(_) => {
                        out.clear();
                        flate2::read::DeflateDecoder::new(&body[..]).take(limit).read_to_end(&mut out)
                    }
                }
            }
            _ => {
                return Err(FetchError::Transport {
                    url: url.to_string(),
                    reason: format!(
                        "the server sent the body with Content-Encoding: {named}, and `{coding}` is not a coding \
kodik-web decodes (gzip, x-gzip, deflate, br, zstd), so its bytes would be garbage"
                    ),
                });
            }
        };
        match read {
            // A body already cut at the cap ends mid-stream: what decoded so far is the page.
            Err(_) if truncated && !out.is_empty() => {}
            Err(e) => {
                return Err(FetchError::Transport {
                    url: url.to_string(),
                    reason: format!("the body's Content-Encoding: {named} could not be decoded ({e})"),
                });
            }
            Ok(_) => {}
        }
        if out.len() > cap {
            out.truncate(cap);
            truncated = true;
        }
        body = out;
    }
    Ok((bytes::Bytes::from(body), truncated))
}

/// `host` equals `pattern` or is a subdomain of it.
pub fn domain_matches(host: &str, pattern: &str) -> bool {
    let p = pattern.trim().trim_start_matches("*.").trim_end_matches('.').to_ascii_lowercase();
    !p.is_empty() && (host == p || host.ends_with(&format!(".{p}")))
}

/// Checks an IP-literal host (which no resolver sees); names are left to the resolver.
fn check_host(host: &Host<&str>, local: bool) -> Result<(), FetchError> {
    let ip: IpAddr = match host {
        Host::Ipv4(v4) => (*v4).into(),
        Host::Ipv6(v6) => (*v6).into(),
        Host::Domain(_) => return Ok(()),
    };
    check_ip(ip, local).map_err(|refusal| FetchError::Refused { host: host.to_string(), refusal })
}

fn transport_error(url: &Url, e: &reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut chain = Vec::new();
    let mut refused = false;
    while let Some(s) = source {
        refused |=
            s.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        if let Some(r) = s.downcast_ref::<ResolverRefusal>() {
            return FetchError::AllAddressesRefused { host: r.host.clone(), refusals: r.refusals.clone() };
        }
        if let Some(FetchError::Resolve { host, reason }) = s.downcast_ref::<FetchError>() {
            return FetchError::Resolve { host: host.clone(), reason: reason.clone() };
        }
        let text = s.to_string();
        if chain.last() != Some(&text) {
            chain.push(text);
        }
        source = s.source();
    }
    if e.is_timeout() {
        return FetchError::TimedOut { after: Duration::ZERO, phase: "connecting" };
    }
    if e.is_connect() {
        let authority = format!("{}:{}", url.host_str().unwrap_or(""), url.port_or_known_default().unwrap_or(0));
        // reqwest's outer layers only repeat the URL and "connect error"; the cause is last.
        let reason = chain.last().cloned().unwrap_or_default();
        return FetchError::Connect { authority, reason, refused };
    }
    FetchError::Transport { url: url.to_string(), reason: chain.join(": ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> GuardedClient {
        GuardedClient::new(Arc::new(WebConfig::default())).unwrap()
    }

    fn start_err(url: &str) -> String {
        client().check_start(url).unwrap_err().to_string()
    }

    #[test]
    fn w1_literal_hosts_are_checked_after_the_url_crate_normalises_them() {
        // The url crate turns these spellings into 127.0.0.1; as non-local-looking https URLs
        // they are still loopback and allowed only as plain local URLs the model gave.
        for u in ["http://2130706433/", "http://0x7f.1/", "http://127.1/"] {
            let (url, local) = client().check_start(u).unwrap();
            assert_eq!(url.host_str(), Some("127.0.0.1"), "{u}");
            assert!(local, "{u}");
        }
        let e = start_err("https://[::ffff:127.0.0.1]/");
        assert!(e.contains("::ffff:127.0.0.1") && e.contains("loopback"), "{e}");
        let e = start_err("http://[::ffff:127.0.0.1]/");
        assert!(e.contains("plain http"), "{e}");
        let e = start_err("https://169.254.169.254/latest/meta-data/");
        assert!(e.contains("169.254.169.254") && e.contains("cloud metadata"), "{e}");
        let e = start_err("https://0xa9.0xfe.0xa9.0xfe/");
        assert!(e.contains("169.254.169.254"), "{e}");
        let e = start_err("https://10.0.0.1/");
        assert!(e.contains("private network"), "{e}");
        let e = start_err("https://[64:ff9b::a9fe:a9fe]/");
        assert!(e.contains("embeds 169.254.169.254"), "{e}");
        let e = start_err("https://[2002:7f00:1::]/");
        assert!(e.contains("embeds 127.0.0.1"), "{e}");
        let e = start_err("https://[fd12::1]/");
        assert!(e.contains("unique local"), "{e}");
    }

    #[test]
    fn w1_schemes_other_than_https_are_refused_and_http_only_for_localhost() {
        assert!(start_err("http://example.com/").contains("plain http:// is allowed only for localhost"));
        assert!(start_err("file:///etc/passwd").contains("only https://"));
        assert!(start_err("ftp://example.com/").contains("only https://"));
        assert!(start_err("not a url").contains("not a valid URL"));
        for u in ["http://localhost:8080/", "http://127.0.0.1/", "http://[::1]:3000/x", "http://app.localhost/"] {
            assert!(client().check_start(u).unwrap().1, "{u}");
        }
        assert!(!client().check_start("https://example.com/").unwrap().1);
    }

    #[tokio::test]
    async fn w1_the_resolver_drops_forbidden_addresses_and_fails_when_none_remain() {
        let strict = GuardedResolver::new(false);
        let addrs: Vec<SocketAddr> =
            ["169.254.169.254:0", "10.0.0.5:0", "[::ffff:127.0.0.1]:0"].iter().map(|s| s.parse().unwrap()).collect();
        let e = strict.filter("evil.example", addrs.clone()).unwrap_err().to_string();
        assert!(e.contains("evil.example") && e.contains("cloud metadata") && e.contains("private network"), "{e}");
        assert!(e.contains("embeds 127.0.0.1"), "{e}");
        let mut mixed = addrs;
        mixed.push("93.184.215.14:0".parse().unwrap());
        assert_eq!(strict.filter("mixed.example", mixed).unwrap(), vec!["93.184.215.14:0".parse().unwrap()]);
        // A real lookup of a name that resolves to loopback (from /etc/hosts; no traffic).
        let e = strict.lookup("localhost").await.unwrap_err().to_string();
        assert!(e.contains("every address it resolves to is forbidden") && e.contains("loopback"), "{e}");
        // The local client's resolver takes loopback only.
        let local = GuardedResolver::new(true);
        assert!(local.lookup("localhost").await.unwrap().iter().all(|a| a.ip().is_loopback()));
        assert!(local.filter("x", ["1.1.1.1:0".parse().unwrap()]).is_ok());
        assert!(local.filter("x", ["192.168.1.1:0".parse().unwrap()]).is_err());
    }

    #[test]
    fn domain_lists_match_subdomains() {
        assert!(domain_matches("docs.rs", "docs.rs"));
        assert!(domain_matches("a.docs.rs", "*.docs.rs"));
        assert!(!domain_matches("notdocs.rs", "docs.rs"));
        let c = GuardedClient::new(Arc::new(WebConfig {
            blocked_domains: vec!["bad.example".into()],
            ..Default::default()
        }))
        .unwrap();
        assert!(c.check_start("https://x.bad.example/").unwrap_err().to_string().contains("blocked list"));
    }
}
