//! `ToolboxBuilder::embedder` offers `codebase_search` (L7); without an embedder it is not offered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::core::{ToolCall, ToolStatus};
use kodik_tools::model::{EmbeddingsClient, EmbeddingsConfig, HashEmbeddingServer};
use serde_json::json;

#[tokio::test]
async fn l7_an_embedder_given_to_the_builder_offers_codebase_search() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sessions.rs"), "/// Removes expired sessions.\nfn purge_expired_sessions() {}\n")
        .unwrap();
    std::fs::write(dir.path().join("table.rs"), "/// Renders a Markdown table.\nfn render_table() {}\n").unwrap();

    let plain = Toolbox::builder().workspace(dir.path()).build().unwrap();
    assert!(plain.registry().get("codebase_search").is_none(), "no embedder, no tool");
    assert!(plain.codebase_index().is_none());

    let server = HashEmbeddingServer::start(128).await.unwrap();
    let client = EmbeddingsClient::new(EmbeddingsConfig::new(server.base_url(), "hash-128")).unwrap();
    // Untrusted: the index stays in memory, so the test writes nothing to the user's cache.
    let tb = Toolbox::builder().workspace(dir.path()).trusted(false).embedder(Arc::new(client)).build().unwrap();
    // Warmed at start: the index is built before the first question.
    let index = tb.codebase_index().unwrap();
    index.warm(&tb.context().workspace).await;
    assert!(index.wait_until_current(&tb.context().workspace, std::time::Duration::from_secs(20)).await);
    assert_eq!(index.status(&tb.context().workspace).unwrap().chunks, 2);
    let out = tb
        .call(&ToolCall::new("c1", "codebase_search", json!({ "query": "clean up expired sessions", "limit": 1 })))
        .await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().starts_with("sessions.rs:1-2"), "{}", out.text_content());
    assert!(server.inputs().iter().any(|i| i.starts_with("sessions.rs\n")));
}
