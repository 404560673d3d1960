//! web_search through the shipped providers against SearXNG-, Brave-, Tavily- and Exa-shaped
//! JSON endpoints on 127.0.0.1 (W5).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, Server, context};
use kodik_core::TypedTool;
use kodik_schema::web::WebSearchArgs;
use kodik_web::search::provider_from;
use kodik_web::{
    BraveProvider, ExaProvider, SearchProvider, SearxngProvider, TavilyProvider, WebConfig, WebSearchTool,
};

const KEY: &str = "BSA-secret-key-0123456789";

async fn search(tool: &WebSearchTool, query: &str, limit: Option<u32>) -> Result<String, String> {
    let args = WebSearchArgs { query: query.into(), limit };
    tool.check(&args).map_err(|e| e.to_string())?;
    match tool.run(args, &context()).await {
        Ok(out) if out.is_success() => Ok(out.text_content()),
        Ok(out) => Err(out.text_content()),
        Err(e) => Err(e.to_string()),
    }
}

fn tool(p: impl SearchProvider + 'static, config: WebConfig) -> WebSearchTool {
    WebSearchTool::new(Some(Arc::new(p)), Arc::new(config))
}

fn searxng_json() -> String {
    serde_json::json!({
        "query": "tokio timeout",
        "number_of_results": 3,
        "results": [
            {"url": "https://docs.rs/tokio/latest/tokio/time/fn.timeout.html", "title": "timeout in tokio::time - Rust",
             "content": "Requires a Future to complete before the specified duration has elapsed.", "engine": "duckduckgo",
             "publishedDate": "2026-10-01T00:00:00"},
            {"url": "https://tokio.rs/tokio/tutorial", "title": "Tutorial | Tokio", "content": "Tokio is a runtime for writing reliable asynchronous applications."},
            {"url": "https://spam.example/tokio", "title": "Tokio tips!!!", "content": "Click here."}
        ],
        "answers": ["tokio::time::timeout wraps a future with a deadline."],
        "suggestions": []
    })
    .to_string()
}

#[tokio::test]
async fn w5_searxng_results_are_ranked_with_the_answer_and_framed() {
    let s = Server::start(|r| {
        assert!(
            r.path.starts_with("/search?q=tokio+timeout&format=json") || r.path.contains("q=tokio%20timeout"),
            "{}",
            r.path
        );
        Reply::ok("application/json", searxng_json())
    })
    .await;
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "tokio timeout", Some(2)).await.unwrap();
    assert!(out.starts_with("2 results for \"tokio timeout\" from searxng"), "{out}");
    assert!(out.contains("Answer: tokio::time::timeout wraps a future with a deadline."), "{out}");
    let first = out
        .find("1. timeout in tokio::time - Rust\n   https://docs.rs/tokio/latest/tokio/time/fn.timeout.html")
        .unwrap();
    let second = out.find("2. Tutorial | Tokio\n   https://tokio.rs/tokio/tutorial").unwrap();
    assert!(first < second, "{out}");
    assert!(out.contains("Published: 2026-10-01T00:00:00") && out.contains("Requires a Future to complete"), "{out}");
    assert!(!out.contains("spam.example"), "limit 2: {out}");
    assert!(out.contains("<<<untrusted web content ") && out.contains("<<<end of untrusted web content "), "{out}");
}

#[tokio::test]
async fn w5_blocked_domains_never_show_up_in_results() {
    let s = Server::start(|_| Reply::ok("application/json", searxng_json())).await;
    let config = WebConfig { blocked_domains: vec!["docs.rs".into()], ..WebConfig::default() };
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), config);
    let out = search(&t, "tokio timeout", None).await.unwrap();
    assert!(out.starts_with("2 results") && !out.contains("docs.rs") && out.contains("spam.example"), "{out}");
    let config = WebConfig { allowed_domains: vec!["tokio.rs".into()], ..WebConfig::default() };
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), config);
    let out = search(&t, "tokio timeout", None).await.unwrap();
    assert!(out.starts_with("1 result ") && out.contains("https://tokio.rs/tokio/tutorial"), "{out}");
}

#[tokio::test]
async fn w5_brave_sends_its_key_in_a_header_and_never_shows_it() {
    let s = Server::start(|r| {
        if r.headers.get("x-subscription-token").map(String::as_str) != Some(KEY) {
            return Reply::Full { status: 401, headers: vec![], body: b"{\"error\":\"bad token\"}".to_vec() };
        }
        if r.path.contains("q=fail") {
            // Some APIs echo the credential back in their error.
            let body = format!("{{\"error\":\"token {KEY} is over quota\"}}");
            return Reply::Full { status: 429, headers: vec![], body: body.into_bytes() };
        }
        Reply::ok(
            "application/json",
            serde_json::json!({"type": "search", "web": {"results": [
                {"title": "Rust Release Notes", "url": "https://doc.rust-lang.org/releases.html",
                 "description": "The <strong>Rust</strong> release notes &amp; changes.", "page_age": "2026-11-20"}
            ]}})
            .to_string(),
        )
    })
    .await;
    let t =
        tool(BraveProvider::new(KEY, format!("http://{}/res/v1/web/search", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "rust release notes", None).await.unwrap();
    assert!(out.contains("1. Rust Release Notes\n   https://doc.rust-lang.org/releases.html"), "{out}");
    assert!(out.contains("The Rust release notes & changes."), "{out}");
    assert!(!out.contains(KEY));
    let err = search(&t, "fail", None).await.unwrap_err();
    assert!(err.contains("brave answered HTTP 429") && err.contains("[redacted]") && !err.contains(KEY), "{err}");
    let wrong = tool(BraveProvider::new("other-key", format!("http://{}/x", s.addr)).unwrap(), WebConfig::default());
    let err = search(&wrong, "q", None).await.unwrap_err();
    assert!(err.contains("HTTP 401"), "{err}");
    assert!(!format!("{:?}", BraveProvider::new(KEY, "http://x").unwrap()).contains(KEY));
}

#[tokio::test]
async fn w5_tavily_and_exa_answers_are_read() {
    let s = Server::start(|r| {
        if r.path == "/tavily" {
            assert_eq!(r.headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
            return Reply::ok(
                "application/json",
                r#"{"answer":"Use tokio::time::timeout.","results":[{"title":"T","url":"https://t.example/","content":"tc","published_date":"2026-01-02"}]}"#,
            );
        }
        assert_eq!(r.headers.get("x-api-key").map(String::as_str), Some(KEY));
        Reply::ok("application/json", r#"{"results":[{"title":"E","url":"https://e.example/","text":"exa text","publishedDate":"2025-05-05"}]}"#)
    })
    .await;
    let t = tool(TavilyProvider::new(KEY, format!("http://{}/tavily", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "q", None).await.unwrap();
    assert!(out.contains("Answer: Use tokio::time::timeout.") && out.contains("1. T\n   https://t.example/"), "{out}");
    let t = tool(ExaProvider::new(KEY, format!("http://{}/exa", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "q", None).await.unwrap();
    assert!(out.contains("1. E\n   https://e.example/\n   Published: 2025-05-05\n   exa text"), "{out}");
}

#[tokio::test]
async fn w5_an_unreadable_answer_is_an_error() {
    let s = Server::start(|r| {
        if r.path.contains("shape") {
            Reply::ok("application/json", r#"{"results": "nope"}"#)
        } else {
            Reply::html("<html><body>Too many requests, please solve this CAPTCHA</body></html>")
        }
    })
    .await;
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), WebConfig::default());
    let err = search(&t, "anything", None).await.unwrap_err();
    assert!(err.contains("searxng's answer could not be read: not JSON") && err.contains("CAPTCHA"), "{err}");
    let err = search(&t, "shape", None).await.unwrap_err();
    assert!(err.contains("the result list is not an array"), "{err}");
}

#[tokio::test]
async fn w5_searxng_whose_engines_all_failed_is_an_error_not_zero_results() {
    let s = Server::start(|r| {
        let body = if r.path.contains("q=captcha") {
            // SearXNG's real answer when every engine failed.
            serde_json::json!({"query": "captcha rust", "number_of_results": 0, "results": [], "answers": [],
                "corrections": [], "infoboxes": [], "suggestions": [],
                "unresponsive_engines": [["google", "CAPTCHA"], ["duckduckgo", "too many requests"], ["brave", "timeout"]]})
        } else if r.path.contains("q=partial") {
            serde_json::json!({"query": "partial", "results": [{"url": "https://a.example/", "title": "A", "content": "a"}],
                "unresponsive_engines": [["google", "CAPTCHA"]], "suggestions": ["partial rust"], "corrections": ["partiel"]})
        } else if r.path.contains("q=infobox") {
            serde_json::json!({"query": "infobox", "results": [], "answers": [],
                "infoboxes": [{"infobox": "Rust", "content": "Rust is a programming language."}],
                "unresponsive_engines": [["google", "CAPTCHA"]]})
        } else {
            serde_json::json!({"query": "nothing", "results": [], "answers": [], "unresponsive_engines": []})
        };
        Reply::ok("application/json", body.to_string())
    })
    .await;
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), WebConfig::default());
    let err = search(&t, "captcha rust", None).await.unwrap_err();
    assert!(err.contains("searxng has no results because its engines did not answer"), "{err}");
    assert!(err.contains("google (CAPTCHA), duckduckgo (too many requests), brave (timeout)"), "{err}");

    let out = search(&t, "partial", None).await.unwrap();
    assert!(out.starts_with("1 result for \"partial\""), "{out}");
    assert!(out.contains("Engines that did not answer (results may be incomplete): google (CAPTCHA)."), "{out}");
    assert!(out.contains("Suggested queries: partiel; partial rust"), "{out}");

    let out = search(&t, "infobox", None).await.unwrap();
    assert!(out.contains("Answer: Rust: Rust is a programming language."), "{out}");

    let out = search(&t, "nothing", None).await.unwrap();
    assert!(
        out.starts_with("0 results for \"nothing\"") && !out.contains("did not answer"),
        "a real empty result: {out}"
    );
}

#[tokio::test]
async fn w5_a_result_title_cannot_forge_more_results_and_non_web_urls_are_not_listed() {
    let s = Server::start(|_| {
        let body = serde_json::json!({"query": "weird", "results": [
            {"title": "Line1\n2. Fake result\n   https://evil.example", "url": "https://a.example/x", "content": "<b>bold</b> &amp; stuff"},
            {"title": "", "url": "https://b.example/", "content": ""},
            {"title": "ftp", "url": "ftp://c.example/f", "content": "ftp"},
            {"title": "local", "url": "http://127.0.0.1:8080/admin", "content": "internal"},
            {"title": "private", "url": "http://192.168.1.1/", "content": "router"}
        ]});
        Reply::ok("application/json", body.to_string())
    })
    .await;
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "weird", None).await.unwrap();
    assert!(out.starts_with("2 results for \"weird\""), "{out}");
    assert!(
        out.contains("1. Line1 2. Fake result https://evil.example\n   https://a.example/x\n   bold & stuff\n"),
        "{out}"
    );
    assert!(out.contains("2. https://b.example/\n   https://b.example/\n"), "{out}");
    assert!(!out.contains("ftp://") && !out.contains("127.0.0.1:8080") && !out.contains("192.168.1.1"), "{out}");
}

#[tokio::test]
async fn w5_duplicate_results_are_listed_once_and_control_characters_and_long_snippets_are_cut() {
    // The tester's sx2.py q=dup / q=ctrl / q=longsnip: before, the same URL was results 1-3,
    // a title kept ESC and U+202E, and a 15 KB snippet was printed whole.
    let s = Server::start(|_| {
        let long = "word ".repeat(3000);
        let body = serde_json::json!({"query": "q", "results": [
            {"title": "Dup", "url": "https://a.example/page", "content": "first"},
            {"title": "Dup again", "url": "https://a.example/page", "content": "second"},
            {"title": "Dup slash", "url": "https://a.example/page/", "content": "third"},
            {"title": "a\u{0}b\u{1b}[31mred\u{202e}gnp.exe", "url": "https://b.example/", "content": long}
        ]});
        Reply::ok("application/json", body.to_string())
    })
    .await;
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), WebConfig::default());
    let out = search(&t, "q", None).await.unwrap();
    assert!(out.starts_with("2 results for \"q\""), "{out}");
    assert_eq!(out.matches("https://a.example/page").count(), 1, "{out}");
    assert!(out.contains("2. ab[31mredgnp.exe\n"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}') && !out.contains('\u{0}'), "{out}");
    let snippet = out.lines().find(|l| l.starts_with("   word")).unwrap();
    assert!(snippet.chars().count() <= 503 && snippet.ends_with('…'), "{}", snippet.len());
}

#[tokio::test]
async fn w5_a_timed_out_search_is_not_sent_again() {
    let s = Server::start(|_| Reply::Drip {
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: searxng_json().into_bytes(),
        every: Duration::from_millis(200),
    })
    .await;
    let config = WebConfig { total_timeout: Duration::from_millis(800), ..WebConfig::default() };
    let t = tool(SearxngProvider::new(format!("http://{}", s.addr)).unwrap(), config);
    let started = Instant::now();
    let err = search(&t, "slow", None).await.unwrap_err();
    assert!(err.contains("timed out after 800 ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let hits: usize = ["/search?q=slow&format=json"].iter().map(|p| s.hits(p)).sum();
    assert_eq!(hits, 1, "one request, never re-sent");
}

#[tokio::test]
async fn w5_without_a_provider_the_tool_says_how_to_configure_one() {
    let t = WebSearchTool::new(None, Arc::new(WebConfig::default()));
    assert!(!t.is_configured());
    let err = search(&t, "x", None).await.unwrap_err();
    assert!(err.contains("no search provider configured") && err.contains("KODIK_SEARXNG_URL"), "{err}");
    assert!(search(&t, "  ", None).await.unwrap_err().contains("the query is empty"));
    assert!(search(&t, "x", Some(50)).await.unwrap_err().contains("between 1 and 20"));
}

#[test]
fn w5_the_environment_picks_the_provider() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    assert!(provider_from(env(&[])).unwrap().is_none());
    let p = provider_from(env(&[("BRAVE_API_KEY", "k"), ("KODIK_SEARXNG_URL", "http://127.0.0.1:8888")])).unwrap();
    assert_eq!(p.unwrap().name(), "searxng", "SearXNG is the default when set");
    assert_eq!(provider_from(env(&[("TAVILY_API_KEY", "k")])).unwrap().unwrap().name(), "tavily");
    let p = provider_from(env(&[("KODIK_SEARCH_PROVIDER", "exa"), ("EXA_API_KEY", "k"), ("BRAVE_API_KEY", "b")]));
    assert_eq!(p.unwrap().unwrap().name(), "exa");
    let err = provider_from(env(&[("KODIK_SEARCH_PROVIDER", "brave")])).err().unwrap().to_string();
    assert!(err.contains("needs BRAVE_API_KEY"), "{err}");
}

#[tokio::test]
async fn w5_a_search_configuration_mistake_leaves_the_other_tools_working_and_is_named_by_web_search() {
    use kodik_core::{ApprovalPolicy, Effect, ToolStatus};
    use kodik_web::WebToolset;
    let site = Server::start(|_| Reply::ok("text/plain", "release notes: version 1.0 is out")).await;
    let approve: Arc<dyn kodik_core::Approver> = Arc::new(ApprovalPolicy::ask(None).effect(Effect::Network, true));
    for (vars, says) in [
        (
            &[("KODIK_SEARCH_PROVIDER", "bogus")][..],
            "KODIK_SEARCH_PROVIDER=\"bogus\" is not one of searxng, brave, tavily, exa",
        ),
        (&[("KODIK_SEARCH_PROVIDER", "searxng")][..], "KODIK_SEARCH_PROVIDER=searxng needs KODIK_SEARXNG_URL"),
        (&[("KODIK_SEARXNG_URL", "127.0.0.1:18733")][..], "\"127.0.0.1:18733\" is not an http:// or https:// URL"),
    ] {
        let web = WebToolset::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
            .unwrap_or_else(|e| panic!("{vars:?}: {e}"));
        let mut registry = kodik_core::ToolRegistry::new();
        web.register(&mut registry).unwrap();
        let out = dispatched(&registry, approve.clone(), "web_search", serde_json::json!({"query": "x"})).await;
        assert_ne!(out.status, ToolStatus::Success, "{vars:?}");
        assert!(out.text_content().contains(says), "{vars:?}: {}", out.text_content());
        let out =
            dispatched(&registry, approve.clone(), "web_fetch", serde_json::json!({"url": site.url("/notes")})).await;
        assert_eq!(out.status, ToolStatus::Success, "{vars:?}: {}", out.text_content());
    }
}

/// What dispatch answers for one call through `approver`.
async fn dispatched(
    registry: &kodik_core::ToolRegistry,
    approver: Arc<dyn kodik_core::Approver>,
    name: &str,
    args: serde_json::Value,
) -> kodik_core::ToolOutput {
    let mut cx = context();
    cx.approver = approver;
    kodik_core::dispatch(registry, kodik_core::ToolCall::new("c1", name, args), &cx).await
}

#[tokio::test]
async fn w5_web_search_has_its_own_auto_approve_switch_apart_from_web_fetch() {
    use kodik_core::{ApprovalPolicy, Effect, ToolStatus};
    use kodik_web::{AutoApprove, WebToolset};
    let searches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = searches.clone();
    let engine = Server::start(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::ok("application/json", searxng_json())
    })
    .await;
    let site = Server::start(|_| Reply::ok("text/plain", "release notes: version 1.0 is out")).await;
    let mut registry = kodik_core::ToolRegistry::new();
    let web = WebToolset::new(WebConfig::default())
        .with_search_provider(Arc::new(SearxngProvider::new(engine.url("")).unwrap()));
    web.register(&mut registry).unwrap();
    let search = serde_json::json!({"query": "tokio timeout"});
    let fetch = serde_json::json!({"url": site.url("/notes")});

    // A read-only session auto-approves the network class; web_search switched off still asks
    // (nobody to ask here: denied, never sent), while web_fetch keeps following the class.
    let read_only = || -> Arc<dyn kodik_core::Approver> {
        Arc::new(ApprovalPolicy::ask(None).effect(Effect::ReadOnly, true).effect(Effect::Network, true))
    };
    let off = web.clone().with_auto_approve(AutoApprove { web_search: Some(false), web_fetch: None });
    let out = dispatched(&registry, off.approver(read_only()), "web_search", search.clone()).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
    assert!(out.text_content().contains("KODIK_WEB_SEARCH_AUTO_APPROVE"), "{}", out.text_content());
    assert_eq!(searches.load(std::sync::atomic::Ordering::SeqCst), 0, "a denied search is never sent");
    let out = dispatched(&registry, off.approver(read_only()), "web_fetch", fetch.clone()).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());

    // A session that asks for everything: web_search switched on runs, web_fetch is still asked.
    let ask_all = || -> Arc<dyn kodik_core::Approver> { Arc::new(ApprovalPolicy::ask(None)) };
    let on = web.clone().with_auto_approve(AutoApprove { web_search: Some(true), web_fetch: None });
    let out = dispatched(&registry, on.approver(ask_all()), "web_search", search).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("tokio::time::timeout wraps a future"), "{}", out.text_content());
    assert_eq!(searches.load(std::sync::atomic::Ordering::SeqCst), 1);
    let out = dispatched(&registry, on.approver(ask_all()), "web_fetch", fetch).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
}

#[tokio::test]
async fn w5_a_searxng_address_copied_with_search_or_a_token_reaches_the_search_endpoint() {
    // Before, the address was joined as text: `/search/search?…`, `/?token=T/search&q=…`.
    let s = Server::start(|r| {
        let at_search = r.path.starts_with("/search?") || r.path.starts_with("/searx/search?");
        if at_search && r.path.contains("q=rust") && r.path.contains("format=json") {
            Reply::ok("application/json", searxng_json())
        } else if r.path.starts_with("/nojson/search?") {
            Reply::Full { status: 403, headers: vec![], body: b"<html>403 Forbidden</html>".to_vec() }
        } else {
            Reply::not_found()
        }
    })
    .await;
    for base in [
        format!("http://{}/search", s.addr),
        format!("http://{}/?token=SECRETTOK", s.addr),
        format!("http://{}/search?format=json", s.addr),
        format!("http://{}/searx/", s.addr),
        format!("http://{}", s.addr),
    ] {
        let t = tool(SearxngProvider::new(base.clone()).unwrap(), WebConfig::default());
        let out = search(&t, "rust", Some(2)).await.unwrap_or_else(|e| panic!("{base}: {e}"));
        assert!(out.contains("results for \"rust\" from searxng"), "{base}: {out}");
    }
    assert_eq!(s.hits("/search?token=SECRETTOK&q=rust&format=json"), 1, "the token is kept as a parameter");
    // An instance without the JSON format enabled answers 403: the error says what to change.
    let t = tool(SearxngProvider::new(format!("http://{}/nojson", s.addr)).unwrap(), WebConfig::default());
    let err = search(&t, "rust", Some(2)).await.unwrap_err();
    assert!(err.contains("403") && err.contains("search.formats"), "{err}");
}

#[tokio::test]
async fn w5_an_unreadable_auto_approve_switch_refuses_only_its_own_web_tool_and_names_the_variable() {
    // Before, KODIK_WEB_FETCH_AUTO_APPROVE=maybe failed the whole toolset: `kodik call
    // read_file` and `kodik serve` exited 2 under a "search provider configuration" label.
    use kodik_core::{ApprovalPolicy, Effect, ToolStatus};
    use kodik_web::WebToolset;
    let searches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = searches.clone();
    let engine = Server::start(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::ok("application/json", searxng_json())
    })
    .await;
    let site = Server::start(|_| Reply::ok("text/plain", "release notes: version 1.0 is out")).await;
    let engine_url = engine.url("");
    let search = serde_json::json!({"query": "tokio timeout"});
    let fetch = serde_json::json!({"url": site.url("/notes")});
    let session = || -> Arc<dyn kodik_core::Approver> {
        Arc::new(ApprovalPolicy::ask(None).effect(Effect::ReadOnly, true).effect(Effect::Network, true))
    };
    let toolset = |fetch_switch: &str, search_switch: &str| {
        let vars = [
            ("KODIK_SEARXNG_URL", engine_url.clone()),
            ("KODIK_WEB_FETCH_AUTO_APPROVE", fetch_switch.to_string()),
            ("KODIK_WEB_SEARCH_AUTO_APPROVE", search_switch.to_string()),
        ];
        let web = WebToolset::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).unwrap();
        let mut registry = kodik_core::ToolRegistry::new();
        web.register(&mut registry).unwrap();
        (web, registry)
    };

    let (web, registry) = toolset("maybe", "2");
    let approver = web.approver(session());
    let out = dispatched(&registry, approver.clone(), "web_fetch", fetch.clone()).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
    assert!(
        out.text_content().contains("KODIK_WEB_FETCH_AUTO_APPROVE=\"maybe\" is not one of 1/0")
            && out.text_content().contains("other tools are unaffected"),
        "{}",
        out.text_content()
    );
    let out = dispatched(&registry, approver.clone(), "web_search", search.clone()).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
    assert!(out.text_content().contains("KODIK_WEB_SEARCH_AUTO_APPROVE=\"2\""), "{}", out.text_content());
    assert_eq!(searches.load(std::sync::atomic::Ordering::SeqCst), 0, "a refused search is never sent");
    assert!(approver.approves_without_asking("read_file", Effect::ReadOnly), "other tools keep the session's rules");

    // Only web_fetch's switch is wrong: web_search runs as the session allows.
    let (web, registry) = toolset("maybe", "");
    let out = dispatched(&registry, web.approver(session()), "web_search", search).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let out = dispatched(&registry, web.approver(session()), "web_fetch", fetch).await;
    assert_eq!(out.status, ToolStatus::Denied, "{}", out.text_content());
}

#[test]
fn w5_the_auto_approve_switches_come_from_the_environment_and_bad_values_are_named() {
    use kodik_web::AutoApprove;
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    let s = AutoApprove::from_vars(vars(&[
        ("KODIK_WEB_SEARCH_AUTO_APPROVE", "off"),
        ("KODIK_WEB_FETCH_AUTO_APPROVE", "1"),
    ]));
    assert_eq!(s, Ok(AutoApprove { web_search: Some(false), web_fetch: Some(true) }));
    assert_eq!(AutoApprove::from_vars(vars(&[])), Ok(AutoApprove::default()));
    let err = AutoApprove::from_vars(vars(&[("KODIK_WEB_SEARCH_AUTO_APPROVE", "maybe")])).unwrap_err();
    assert!(err.contains("KODIK_WEB_SEARCH_AUTO_APPROVE") && err.contains("maybe"), "{err}");
}
