//! SSE parse and event assembly throughput of kodik-model on 20 MB recorded-shape bodies
//! (`KODIK_BENCH_SSE_MB` changes the size), in bytes/s, against two baselines measured in the
//! same run: splitting the body into lines (the floor of any SSE parser) and parsing every data
//! line into a `serde_json::Value` (what a naive client does before any assembly). Also the
//! whole client over loopback HTTP (ReplayServer → reqwest → decoder → event stream).

use std::collections::VecDeque;
use std::fmt::Write as _;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt;
use kodik_model::decode::BodyDecoder;
use kodik_model::replay::{Exchange, Recording, ReplayOptions, ReplayServer};
use kodik_model::{Item, ModelConfig, ModelEvent, Provider, Request};
use tokio_util::sync::CancellationToken;

const WORDS: [&str; 12] =
    [" the", " slug", "ify", " function", " fails", " on", " repeated", " dashes", ";", " fix", " it", "\\n"];

fn target_bytes() -> usize {
    std::env::var("KODIK_BENCH_SSE_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(20usize) * 1024 * 1024
}

/// Text deltas with a function call every 500 events, shaped like OpenAI's stream.
fn responses_body(target: usize) -> String {
    let mut s = String::with_capacity(target + 4096);
    let mut seq = 0u64;
    let mut out = 0u64;
    while s.len() < target {
        out += 1;
        let _ = write!(
            s,
            "event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"sequence_number\":{seq},\"output_index\":{out},\"item\":{{\"id\":\"msg_{out}\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}}}\n\n"
        );
        for i in 0..500u64 {
            seq += 1;
            let w = WORDS[(seq % 12) as usize];
            let _ = write!(
                s,
                "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{seq},\"item_id\":\"msg_{out}\",\"output_index\":{out},\"content_index\":0,\"delta\":\"{w}\",\"logprobs\":[],\"obfuscation\":\"aB3dE{i}\"}}\n\n"
            );
        }
        out += 1;
        let _ = write!(
            s,
            "event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"sequence_number\":{seq},\"output_index\":{out},\"item\":{{\"id\":\"fc_{out}\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":\"\",\"call_id\":\"call_{out}\",\"name\":\"grep\"}}}}\n\n"
        );
        for part in ["{\\\"pattern\\\":", "\\\"slugify\\\",", "\\\"path\\\":\\\"src\\\"}"] {
            seq += 1;
            let _ = write!(
                s,
                "event: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":{seq},\"item_id\":\"fc_{out}\",\"output_index\":{out},\"delta\":\"{part}\"}}\n\n"
            );
        }
        let _ = write!(
            s,
            "event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"sequence_number\":{seq},\"output_index\":{out},\"item\":{{\"id\":\"fc_{out}\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{{\\\"pattern\\\":\\\"slugify\\\",\\\"path\\\":\\\"src\\\"}}\",\"call_id\":\"call_{out}\",\"name\":\"grep\"}}}}\n\n"
        );
    }
    s.push_str("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":10}}}\n\n");
    s
}

fn chat_body(target: usize) -> String {
    let mut s = String::with_capacity(target + 4096);
    let mut i = 0u64;
    while s.len() < target {
        i += 1;
        let w = WORDS[(i % 12) as usize];
        let _ = write!(
            s,
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1764560000,\"model\":\"gpt-4.1\",\"system_fingerprint\":\"fp_1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{w}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        );
    }
    s.push_str("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    s
}

fn anthropic_body(target: usize) -> String {
    let mut s = String::with_capacity(target + 4096);
    s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    let mut i = 0u64;
    while s.len() < target {
        i += 1;
        let w = WORDS[(i % 12) as usize];
        let _ = write!(
            s,
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{w}\"}}}}\n\n"
        );
    }
    s.push_str("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":99}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    s
}

/// Feeds `body` in 64 KiB chunks (a typical socket read) and counts the events.
fn decode(provider: Provider, body: &[u8]) -> usize {
    let mut decoder = BodyDecoder::new(provider);
    let mut out = VecDeque::new();
    let mut events = 0;
    for chunk in body.chunks(64 * 1024) {
        decoder.feed(chunk, &mut out).unwrap();
        events += out.len();
        out.clear();
    }
    decoder.end(&mut out).unwrap();
    events + out.len()
}

fn bench(c: &mut Criterion) {
    let target = target_bytes();
    let responses = responses_body(target);
    let bodies = [
        ("responses", Provider::OpenAiResponses, responses.clone()),
        ("chat", Provider::ChatCompletions, chat_body(target)),
        ("anthropic", Provider::Anthropic, anthropic_body(target)),
    ];
    let mut g = c.benchmark_group("sse");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(responses.len() as u64));
    g.bench_function("baseline_line_split/responses", |b| {
        b.iter(|| responses.lines().filter(|l| l.is_empty()).count())
    });
    g.bench_function("baseline_serde_value_per_event/responses", |b| {
        b.iter(|| {
            responses
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
                .filter(serde_json::Value::is_object)
                .count()
        })
    });
    for (name, provider, body) in &bodies {
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(format!("kodik_decode/{name}"), |b| b.iter(|| decode(*provider, body.as_bytes())));
    }

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let recording = Recording::new(Provider::OpenAiResponses, "gpt-5").with(Exchange::sse(responses.clone()));
    let options = ReplayOptions { chunk_size: Some(64 * 1024), ..ReplayOptions::default() };
    let request = Request { items: vec![Item::User { text: "hi".into() }], ..Request::default() };
    g.throughput(Throughput::Bytes(responses.len() as u64));
    g.bench_function("kodik_client_over_loopback/responses", |b| {
        b.iter_batched(
            // A server answers each exchange once: a fresh one per iteration, set up unmeasured.
            || {
                let server = rt.block_on(ReplayServer::start_with(recording.clone(), options.clone())).unwrap();
                let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url());
                (server, kodik_model::client(config).unwrap())
            },
            |(server, client)| {
                let n = rt.block_on(async {
                    let mut stream = client.stream(&request, CancellationToken::new()).await.unwrap();
                    let mut n = 0;
                    while let Some(event) = stream.next().await {
                        if let ModelEvent::Completed { .. } = event.unwrap() {
                            break;
                        }
                        n += 1;
                    }
                    n
                });
                drop(server);
                n
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
