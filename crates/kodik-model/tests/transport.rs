//! What all three clients share: retries (429 with Retry-After, 5xx, connection failures),
//! provider error messages, the key kept out of errors, Debug and recordings, recording a
//! session and replaying it, configuration from the environment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::time::{Duration, Instant};

use common::*;
use kodik_model::replay::{Exchange, Recording, ReplayServer};
use kodik_model::{Item, ModelConfig, ModelError, Provider, Request, client};
use tokio_util::sync::CancellationToken;

fn request() -> Request {
    Request {
        model: "gpt-5".into(),
        system: "sys".into(),
        items: vec![Item::User { text: "hi".into() }],
        tools: vec![grep_tool()],
        parallel_tool_calls: true,
        max_output_tokens: None,
    }
}

fn config(server: &ReplayServer) -> ModelConfig {
    ModelConfig::new(Provider::OpenAiResponses, "gpt-5")
        .base_url(server.base_url())
        .api_key(KEY)
        .retry_base_delay(Duration::from_millis(20))
}

/// A 429 with `Retry-After: 1` is waited out and retried; the caller sees one event sequence.
#[tokio::test]
async fn rate_limit_with_retry_after_is_waited_out_and_yields_one_sequence() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(429, "Rate limit reached for gpt-5").header("retry-after", "1"))
        .with(Exchange::sse(fixture("responses_text.sse")));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = client(config(&server)).unwrap();
    let started = Instant::now();
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert!(started.elapsed() >= Duration::from_millis(950), "Retry-After ignored: {:?}", started.elapsed());
    assert_eq!(kinds(&events), ["text", "text", "completed"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
}

#[tokio::test]
async fn server_error_then_success_is_retried_with_backoff() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(500, "internal"))
        .with(Exchange::error(503, "busy"))
        .with(Exchange::sse(fixture("responses_text.sse")));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = client(config(&server)).unwrap();
    let (events, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "The tests \"pass\" now — all 12.");
    assert_eq!(server.requests().len(), 3);
}

/// After the last retry the error carries the provider's message; the key it echoed is redacted.
#[tokio::test]
async fn exhausted_retries_give_the_provider_message_without_the_key() {
    let echo = format!("upstream failed for key {KEY}");
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(502, &echo))
        .with(Exchange::error(502, &echo));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = client(config(&server).retries(1)).unwrap();
    let error = client.stream(&request(), CancellationToken::new()).await.err().unwrap();
    let ModelError::Http { status, message } = &error else { panic!("{error:?}") };
    assert_eq!(*status, 502);
    assert_eq!(message, "upstream failed for key <redacted>");
    assert!(!format!("{error} {error:?}").contains(KEY));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(400, "Invalid schema for function 'grep'"))
        .with(Exchange::sse(fixture("responses_text.sse")));
    let server = ReplayServer::start(recording).await.unwrap();
    let error = client(config(&server)).unwrap().stream(&request(), CancellationToken::new()).await.err().unwrap();
    assert_eq!(error.to_string(), "the provider answered HTTP 400: Invalid schema for function 'grep'");
    assert_eq!(server.requests().len(), 1);
}

/// A 404 names the address asked and what is usually wrong with the base URL for the provider
/// (`/v1` missing for an OpenAI-compatible server, doubled for Anthropic); one whose message
/// blames the model gets no base-URL advice. Before, it said only "404 page not found".
#[tokio::test]
async fn a_404_names_the_url_and_how_to_fix_the_base_url() {
    let cases = [
        (Provider::ChatCompletions, "", "404 page not found", "/chat/completions", Some("under /v1, e.g. ")),
        (Provider::Anthropic, "/v1", "Not Found", "/v1/v1/messages", Some("without /v1")),
        (Provider::OpenAiResponses, "/v1", "404 page not found", "/v1/responses", Some("--provider chat-completions")),
        (
            Provider::ChatCompletions,
            "/v1",
            "model \"llama9\" not found, try pulling it first",
            "/v1/chat/completions",
            None,
        ),
    ];
    for (provider, suffix, body, path, hint) in cases {
        let recording = Recording::new(provider, "m").with(Exchange::error(404, body));
        let server = ReplayServer::start(recording).await.unwrap();
        let root = server.base_url();
        let root = root.strip_suffix("/v1").unwrap_or(&root);
        let base = format!("{root}{suffix}");
        let config = ModelConfig::new(provider, "m").base_url(&base).api_key(KEY);
        let mut request = request();
        request.model = "m".into();
        let error = client(config).unwrap().stream(&request, CancellationToken::new()).await.err().unwrap();
        let text = error.to_string();
        assert!(text.starts_with(&format!("the provider answered HTTP 404: {body} (POST {root}{path})")), "{text}");
        match hint {
            Some(hint) => assert!(text.contains("check the base URL") && text.contains(hint), "{text}"),
            None => assert!(!text.contains("base URL"), "{text}"),
        }
        assert_eq!(server.requests().len(), 1, "a 404 is not retried");
    }
    // Credentials in the base URL never reach the error (keys never appear in errors).
    let recording = Recording::new(Provider::ChatCompletions, "m").with(Exchange::error(404, "404 page not found"));
    let server = ReplayServer::start(recording).await.unwrap();
    let root = server.base_url();
    let root = root.strip_suffix("/v1").unwrap_or(&root);
    let base = root.replacen("http://", "http://user:s3cret-pass@", 1);
    let config = ModelConfig::new(Provider::ChatCompletions, "m").base_url(&base).api_key(KEY);
    let mut request = request();
    request.model = "m".into();
    let error = client(config).unwrap().stream(&request, CancellationToken::new()).await.err().unwrap();
    let text = error.to_string();
    assert!(text.contains(&format!("(POST {root}/chat/completions)")), "{text}");
    assert!(!text.contains("s3cret") && !text.contains("user:"), "{text}");
}

#[tokio::test]
async fn a_request_past_the_recording_gets_a_clear_500() {
    let recording =
        Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(fixture("responses_text.sse")));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = client(config(&server).retries(0)).unwrap();
    let (_, error) = collect(client.stream(&request(), CancellationToken::new()).await.unwrap()).await;
    assert!(error.is_none());
    let error = client.stream(&request(), CancellationToken::new()).await.err().unwrap();
    assert_eq!(
        error.to_string(),
        "the provider answered HTTP 500: replay: request 2 arrived but the recording has only 1 exchange(s)"
    );
}

#[tokio::test]
async fn connection_refused_is_a_transport_error_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = ModelConfig::new(Provider::ChatCompletions, "m")
        .base_url(format!("http://{addr}/v1"))
        .api_key(KEY)
        .retries(2)
        .retry_base_delay(Duration::from_millis(10));
    let error = client(config).unwrap().stream(&request(), CancellationToken::new()).await.err().unwrap();
    let ModelError::Transport(message) = &error else { panic!("{error:?}") };
    assert!(message.to_lowercase().contains("connect"), "{message}");
    assert!(!format!("{error:?}").contains(KEY));
}

#[tokio::test]
async fn cancelling_during_a_retry_wait_returns_cancelled_at_once() {
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(429, "slow down").header("retry-after", "30"));
    let server = ReplayServer::start(recording).await.unwrap();
    let client = client(config(&server)).unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let error = client.stream(&request(), cancel).await.err().unwrap();
    assert!(matches!(error, ModelError::Cancelled), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// `record_to` writes a recording after each response — the 429 too — that replays to the same
/// events; neither the key nor auth headers are in it.
#[tokio::test]
async fn a_recorded_session_replays_to_the_same_events_and_holds_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    let original = Recording::new(Provider::OpenAiResponses, "gpt-5")
        .with(Exchange::error(429, "wait").header("retry-after", "0"))
        .with(Exchange::sse(fixture("responses_tools.sse")))
        .with(Exchange::sse(fixture("responses_text.sse")));
    let server = ReplayServer::start(original.clone()).await.unwrap();
    let recorder = client(config(&server).record_to(&path)).unwrap();
    let mut live = Vec::new();
    for _ in 0..2 {
        let (events, error) = collect(recorder.stream(&request(), CancellationToken::new()).await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        live.push(events);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(KEY) && !text.to_lowercase().contains("bearer"), "{text}");
    let recorded = Recording::load(&path).unwrap();
    assert_eq!(recorded, original);

    let replay = ReplayServer::start(recorded).await.unwrap();
    let replayer = client(config(&replay)).unwrap();
    for expected in live {
        let (events, error) = collect(replayer.stream(&request(), CancellationToken::new()).await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(events, expected);
    }
}

#[test]
fn debug_output_of_a_config_never_shows_the_key() {
    let config = ModelConfig::new(Provider::Anthropic, "claude-sonnet-4-5").api_key(KEY);
    let debug = format!("{config:?}");
    assert!(!debug.contains(KEY) && debug.contains("<redacted>"), "{debug}");
    assert!(config.has_api_key());
}

#[test]
fn config_from_environment_infers_provider_and_needs_a_key_for_hosted_apis() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    };
    let c = ModelConfig::from_vars(vars(&[("KODIK_MODEL", "claude-sonnet-4-5"), ("ANTHROPIC_API_KEY", "k1")])).unwrap();
    assert_eq!((c.provider, c.base_url.as_str()), (Provider::Anthropic, "https://api.anthropic.com"));
    let c = ModelConfig::from_vars(vars(&[("KODIK_MODEL", "gpt-5"), ("OPENAI_API_KEY", "k2")])).unwrap();
    assert_eq!((c.provider, c.base_url.as_str()), (Provider::OpenAiResponses, "https://api.openai.com/v1"));
    let c = ModelConfig::from_vars(vars(&[
        ("KODIK_MODEL", "gpt-5"),
        ("KODIK_PROVIDER", "chat-completions"),
        ("KODIK_BASE_URL", "http://127.0.0.1:11434/v1/"),
    ]))
    .unwrap();
    assert_eq!(
        (c.provider, c.base_url.as_str(), c.has_api_key()),
        (Provider::ChatCompletions, "http://127.0.0.1:11434/v1", false)
    );

    let e = ModelConfig::from_vars(vars(&[("KODIK_MODEL", "claude-opus-4")])).unwrap_err();
    assert!(e.to_string().contains("set ANTHROPIC_API_KEY"), "{e}");
    let e = ModelConfig::from_vars(vars(&[])).unwrap_err();
    assert!(e.to_string().contains("KODIK_MODEL"), "{e}");
    let e =
        ModelConfig::from_vars(vars(&[("KODIK_MODEL", "x"), ("KODIK_PROVIDER", "gemini"), ("OPENAI_API_KEY", "k")]))
            .unwrap_err();
    assert!(e.to_string().contains("unknown provider `gemini`"), "{e}");
}

#[test]
fn a_base_url_without_scheme_is_a_config_error() {
    let error = client(ModelConfig::new(Provider::ChatCompletions, "m").base_url("localhost:8080")).err().unwrap();
    assert!(error.to_string().contains("must start with http:// or https://"), "{error}");
}

/// The shared transport behaves the same for every wire API: a 500 is retried into one event
/// sequence, a stalled body ends in IdleTimeout after the events that did arrive, and a cancel
/// mid-stream ends it with Cancelled and hangs up.
#[tokio::test]
async fn every_provider_retries_a_500_times_out_a_stall_and_cancels_mid_stream() {
    use futures_util::StreamExt;
    use kodik_model::replay::ReplayOptions;
    for (provider, file) in [
        (Provider::OpenAiResponses, "responses_text.sse"),
        (Provider::ChatCompletions, "chat_text.sse"),
        (Provider::Anthropic, "anthropic_text.sse"),
    ] {
        let body = fixture(file);
        let cfg = |server: &ReplayServer| {
            ModelConfig::new(provider, "m")
                .base_url(server.base_url())
                .api_key(KEY)
                .retry_base_delay(Duration::from_millis(10))
                .idle_timeout(Duration::from_millis(300))
        };
        let mut req = request();
        req.model = String::new();

        let recording = Recording::new(provider, "m").with(Exchange::error(500, "boom")).with(Exchange::sse(&body));
        let server = ReplayServer::start(recording).await.unwrap();
        let (events, error) =
            collect(client(cfg(&server)).unwrap().stream(&req, CancellationToken::new()).await.unwrap()).await;
        assert!(error.is_none(), "{provider}: {error:?}");
        assert_eq!(kinds(&events), ["text", "text", "completed"], "{provider}");
        assert_eq!(server.requests().len(), 2, "{provider}");

        // Stall right after the first text delta.
        let first_text = body.find("All 12 tests").or_else(|| body.find("The tests")).unwrap();
        let stall_at = first_text + body[first_text..].find("\n\n").unwrap() + 2;
        let options = ReplayOptions { stall: Some((0, stall_at)), ..ReplayOptions::default() };
        let server =
            ReplayServer::start_with(Recording::new(provider, "m").with(Exchange::sse(&body)), options.clone())
                .await
                .unwrap();
        let (events, error) =
            collect(client(cfg(&server)).unwrap().stream(&req, CancellationToken::new()).await.unwrap()).await;
        assert_eq!(kinds(&events), ["text"], "{provider}");
        assert!(matches!(error, Some(ModelError::IdleTimeout(1))), "{provider}: {error:?}");
        assert_eq!(error.unwrap().to_string(), "the response stream sent nothing for 1 s and was closed");

        let server =
            ReplayServer::start_with(Recording::new(provider, "m").with(Exchange::sse(&body)), options).await.unwrap();
        let cancel = CancellationToken::new();
        let long_idle = cfg(&server).idle_timeout(Duration::from_secs(60));
        let mut stream = client(long_idle).unwrap().stream(&req, cancel.clone()).await.unwrap();
        assert!(matches!(stream.next().await, Some(Ok(kodik_model::ModelEvent::TextDelta { .. }))), "{provider}");
        cancel.cancel();
        assert!(matches!(stream.next().await, Some(Err(ModelError::Cancelled))), "{provider}");
        assert!(stream.next().await.is_none());
        let started = Instant::now();
        while server.client_closed_early() == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "{provider}: the connection stayed open");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_malformed_with_the_servers_message() {
    let recording = Recording::new(Provider::ChatCompletions, "m").with(
        Exchange::sse(r#"{"error":{"message":"streaming is disabled on this deployment"}}"#)
            .header("content-type", "application/json"),
    );
    let server = ReplayServer::start(recording).await.unwrap();
    let config = ModelConfig::new(Provider::ChatCompletions, "m").base_url(server.base_url());
    let error = client(config).unwrap().stream(&request(), CancellationToken::new()).await.err().unwrap();
    assert_eq!(
        error.to_string(),
        "malformed event from the provider: expected an event stream (text/event-stream) but the server answered application/json: streaming is disabled on this deployment"
    );
}

#[tokio::test]
async fn a_web_page_answer_to_a_streaming_request_names_the_page_not_a_broken_stream() {
    let page = "<html><body><h1>502 Bad Gateway</h1></body></html>";
    let recording = Recording::new(Provider::ChatCompletions, "m")
        .with(Exchange::sse(page).header("content-type", "text/html; charset=utf-8"));
    let server = ReplayServer::start(recording).await.unwrap();
    let config = ModelConfig::new(Provider::ChatCompletions, "m").base_url(server.base_url()).retries(0);
    let error = client(config).unwrap().stream(&request(), CancellationToken::new()).await.err().unwrap();
    let message = error.to_string();
    assert!(
        message.contains("expected an event stream (text/event-stream) but the server answered text/html")
            && message.contains("check the base URL")
            && message.contains("502 Bad Gateway"),
        "{message}"
    );
    assert!(!matches!(error, ModelError::Truncated));
}
