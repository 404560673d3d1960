//! The `/v1/embeddings` client against a real HTTP server on 127.0.0.1: order and batching,
//! 429 with Retry-After, 5xx backoff, a refused key, a missing key, an unreachable server, a
//! server that does not answer in time, an unusable answer (L7).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use kodik_core::{EmbedError, Embedder};
use kodik_model::embeddings::hash_embedding;
use kodik_model::replay::{Exchange, Recording, ReplayServer};
use kodik_model::{EmbeddingsClient, EmbeddingsConfig, HashEmbeddingServer, Provider};

const KEY: &str = "sk-embed-SECRET-0123456789";

fn client(server: &HashEmbeddingServer, config: impl FnOnce(EmbeddingsConfig) -> EmbeddingsConfig) -> EmbeddingsClient {
    let base =
        EmbeddingsConfig::new(server.base_url(), "hash-embed").api_key(KEY).retry_base_delay(Duration::from_millis(20));
    EmbeddingsClient::new(config(base)).unwrap()
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text number {i} about sessions and tokens {}", "x".repeat(i))).collect()
}

#[tokio::test]
async fn l7_vectors_come_back_in_input_order_and_large_batches_are_split() {
    let server = HashEmbeddingServer::start(32).await.unwrap();
    let client = client(&server, |c| c.batch_size(2));
    let input = texts(5);
    let vectors = client.embed(&input).await.unwrap();
    // The server answers each batch in reverse order; `index` puts them back.
    let want: Vec<Vec<f32>> = input.iter().map(|t| hash_embedding(t, 32)).collect();
    assert_eq!(vectors, want);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "5 texts in batches of 2");
    assert_eq!(requests[0].path, "/v1/embeddings");
    assert_eq!(requests[0].body["model"], "hash-embed");
    assert_eq!(requests[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(client.dimension(), Some(32), "learnt from the first answer");
    assert_eq!(client.model(), "hash-embed");
}

#[tokio::test]
async fn l7_rate_limit_with_retry_after_is_waited_out() {
    let server = HashEmbeddingServer::start(8).await.unwrap();
    server.fail_next(429, Some(1));
    let client = client(&server, |c| c);
    let started = Instant::now();
    let vectors = client.embed(&texts(1)).await.unwrap();
    assert_eq!(vectors.len(), 1);
    assert!(started.elapsed() >= Duration::from_millis(950), "Retry-After ignored: {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn l7_server_errors_are_retried_with_backoff_then_reported() {
    let server = HashEmbeddingServer::start(8).await.unwrap();
    server.fail_next(500, None);
    server.fail_next(503, None);
    let client = client(&server, |c| c);
    assert_eq!(client.embed(&texts(2)).await.unwrap().len(), 2);
    assert_eq!(server.requests().len(), 3);

    server.set_failing(Some(502));
    let err = client.embed(&texts(1)).await.unwrap_err();
    assert!(matches!(err, EmbedError::Http { status: 502, .. }), "{err:?}");
    assert_eq!(server.requests().len(), 3 + 4, "one try and three retries");
}

#[tokio::test]
async fn l7_a_long_retry_after_is_reported_at_once_not_waited() {
    let server = HashEmbeddingServer::start(8).await.unwrap();
    server.fail_next(429, Some(120));
    let client = client(&server, |c| c.max_retry_wait(Duration::from_secs(5)));
    let err = client.embed(&texts(1)).await.unwrap_err();
    assert_eq!(
        err,
        EmbedError::RateLimited {
            retry_after: Some(Duration::from_secs(120)),
            message: "failing on purpose with 429".into()
        }
    );
    assert!(err.to_string().contains("retry after 120 s"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn l7_a_refused_key_is_a_clear_error_without_the_key_and_is_not_retried() {
    let server = HashEmbeddingServer::start(8).await.unwrap();
    server.require_key(Some("the-right-key"));
    let err = client(&server, |c| c).embed(&texts(1)).await.unwrap_err();
    let EmbedError::Refused { status: 401, message } = &err else { panic!("{err:?}") };
    assert_eq!(message, "Incorrect API key provided");
    assert!(!format!("{err} {err:?}").contains(KEY));
    assert!(err.advice().unwrap().contains("API key"));
    assert_eq!(server.requests().len(), 1);

    // No key at all: the error says one is needed.
    let keyless = EmbeddingsClient::new(EmbeddingsConfig::new(server.base_url(), "m")).unwrap();
    assert_eq!(keyless.embed(&texts(1)).await.unwrap_err(), EmbedError::MissingKey);
}

#[tokio::test]
async fn l7_an_unreachable_server_says_so() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = EmbeddingsConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
        .retries(1)
        .retry_base_delay(Duration::from_millis(10));
    let err = EmbeddingsClient::new(config).unwrap().embed(&texts(1)).await.unwrap_err();
    let EmbedError::Unreachable(message) = &err else { panic!("{err:?}") };
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(err.advice().unwrap().contains("running"));
}

#[tokio::test]
async fn l7_a_server_slower_than_the_timeout_is_given_up() {
    let server = HashEmbeddingServer::start(8).await.unwrap();
    server.set_delay(Duration::from_secs(5));
    let client = client(&server, |c| c.retries(0).request_timeout(Duration::from_millis(300)));
    let started = Instant::now();
    let err = client.embed(&texts(1)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    let EmbedError::Unreachable(message) = &err else { panic!("{err:?}") };
    assert!(message.contains("no answer"), "{message}");
}

#[tokio::test]
async fn l7_unusable_answers_are_bad_responses() {
    for (body, expect) in [
        ("<html>proxy</html>", "not JSON"),
        (r#"{"data": []}"#, "1 texts sent, 0 vectors received"),
        (r#"{"data": [{"index": 0, "embedding": ["a"]}]}"#, "non-number"),
        (r#"{"object": "list"}"#, "no `data` list"),
    ] {
        let recording = Recording::new(Provider::ChatCompletions, "m").with(Exchange {
            status: 200,
            headers: [("content-type".to_owned(), "application/json".to_owned())].into(),
            body: body.to_owned(),
        });
        let server = ReplayServer::start(recording).await.unwrap();
        let client = EmbeddingsClient::new(EmbeddingsConfig::new(server.base_url(), "m")).unwrap();
        let err = client.embed(&texts(1)).await.unwrap_err();
        let EmbedError::BadResponse(message) = &err else { panic!("{body}: {err:?}") };
        assert!(message.contains(expect), "{body}: {message}");
    }
}

#[test]
fn l7_configuration_from_the_environment() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    };
    assert!(EmbeddingsConfig::from_vars(vars(&[])).unwrap().is_none(), "no model: no embeddings");
    let local = EmbeddingsConfig::from_vars(vars(&[
        ("KODIK_EMBEDDINGS_MODEL", "nomic-embed-text"),
        ("KODIK_EMBEDDINGS_URL", "http://127.0.0.1:11434/v1/"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(local.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(local.model, "nomic-embed-text");
    assert!(!format!("{local:?}").contains("SECRET"));
    // OpenAI's API without any key is refused up front.
    assert_eq!(
        EmbeddingsConfig::from_vars(vars(&[("KODIK_EMBEDDINGS_MODEL", "text-embedding-3-small")])).unwrap_err(),
        EmbedError::MissingKey
    );
    let openai = EmbeddingsConfig::from_vars(vars(&[
        ("KODIK_EMBEDDINGS_MODEL", "text-embedding-3-small"),
        ("OPENAI_API_KEY", "sk-SECRET-1234"),
    ]))
    .unwrap()
    .unwrap();
    assert!(!format!("{openai:?}").contains("SECRET"));
    assert!(EmbeddingsClient::new(EmbeddingsConfig::new("ftp://x", "m")).is_err());
}
