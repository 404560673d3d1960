//! `codebase_search` in the `kodik` binary (L7): offered when `KODIK_EMBEDDINGS_*` name an
//! OpenAI-compatible `/v1/embeddings` server (here one on 127.0.0.1), not offered otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use kodik_tools::model::HashEmbeddingServer;
use serde_json::Value;

fn call(ws: &std::path::Path, env: &[(&str, String)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kodik"));
    cmd.args(["call", "--workspace"])
        .arg(ws)
        .args(["codebase_search", r#"{"query": "clean up expired sessions", "limit": 1}"#]);
    for var in ["KODIK_EMBEDDINGS_MODEL", "KODIK_EMBEDDINGS_URL", "KODIK_EMBEDDINGS_KEY"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_kodik_call_offers_codebase_search_when_embeddings_are_configured() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("sessions.rs"), "/// Removes expired sessions.\nfn purge_expired_sessions() {}\n")
        .unwrap();
    std::fs::write(ws.path().join("table.rs"), "/// Renders a Markdown table.\nfn render_table() {}\n").unwrap();
    let cache = tempfile::tempdir().unwrap();

    let (path, no_env) = (ws.path().to_path_buf(), [("XDG_CACHE_HOME", cache.path().display().to_string())]);
    let out = tokio::task::spawn_blocking(move || call(&path, &no_env)).await.unwrap();
    assert_eq!(out.status.code(), Some(2), "not offered without an embedder: {}", String::from_utf8_lossy(&out.stdout));

    let server = HashEmbeddingServer::start(128).await.unwrap();
    server.require_key(Some("emb-key"));
    let env = [
        ("KODIK_EMBEDDINGS_URL", server.base_url()),
        ("KODIK_EMBEDDINGS_MODEL", "hash-128".to_owned()),
        ("KODIK_EMBEDDINGS_KEY", "emb-key".to_owned()),
        ("XDG_CACHE_HOME", cache.path().display().to_string()),
    ];
    let (path, first_env) = (ws.path().to_path_buf(), env.clone());
    let out = tokio::task::spawn_blocking(move || call(&path, &first_env)).await.unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("sessions.rs:1-2"), "{text}");
    assert!(server.inputs().iter().any(|i| i.starts_with("sessions.rs\n")));
    // The index was saved in the per-user cache folder, for the next process.
    let saved = std::fs::read_dir(cache.path().join("kodik/index")).unwrap().count();
    assert_eq!(saved, 1);

    // G15: each later process embeds only what changed since the last one exited (the index
    // is written before `kodik call` exits, not left to a background save that may not run).
    let mut sent = server.inputs().len();
    let mut next_call = |edit: Option<&str>| {
        if let Some(text) = edit {
            std::fs::write(ws.path().join("table.rs"), text).unwrap();
        }
        let out = call(ws.path(), &env);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let inputs = server.inputs();
        let new: Vec<String> = inputs[sent..].to_vec();
        sent = inputs.len();
        new
    };
    let new = tokio::task::block_in_place(|| next_call(None));
    assert_eq!(new, ["clean up expired sessions"], "an unchanged workspace is embedded again");
    let new = tokio::task::block_in_place(|| next_call(Some("/// Draws a table with borders.\nfn draw() {}\n")));
    assert_eq!(new.len(), 2, "the edited file and the query, nothing else: {new:?}");
    assert!(new.iter().any(|i| i.starts_with("table.rs\n")), "{new:?}");
    let new = tokio::task::block_in_place(|| next_call(None));
    assert_eq!(new, ["clean up expired sessions"], "the edit made by the last process is embedded again");
}
