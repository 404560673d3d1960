//! web_fetch over HTTPS from a 127.0.0.1 server whose certificate (for `localhost`, issued by a
//! test CA checked in beside it) the client is told to trust (W1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{fetch, framed, tool};
use kodik_web::WebConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CA: &[u8] = include_bytes!("pages/test-ca.crt");
const CERT: &[u8] = include_bytes!("pages/localhost.crt");
const KEY: &[u8] = include_bytes!("pages/localhost.key");
const BLOG: &str = include_str!("pages/blog.html");

/// An HTTPS server on 127.0.0.1 answering every request with the blog page; `/plain` redirects
/// to the same port over plain http.
async fn https_server() -> u16 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = vec![CertificateDer::from_pem_slice(CERT).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(KEY).unwrap();
    let config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else { return };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let reply = if head.starts_with("GET /plain ") {
                    format!(
                        "HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BLOG}",
                        BLOG.len()
                    )
                };
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

#[tokio::test]
async fn w1_https_with_a_trusted_test_ca_works_and_never_downgrades_to_http() {
    let port = https_server().await;
    let trusting = tool(WebConfig { extra_root_certificates: vec![CA.to_vec()], ..WebConfig::default() });
    let out = fetch(&trusting, &format!("https://localhost:{port}/post"), None, None).await.unwrap();
    assert!(framed(&out).contains("## Caching the dependency graph"), "{out}");

    let err = fetch(&trusting, &format!("https://localhost:{port}/plain"), None, None).await.unwrap_err();
    assert!(err.contains("downgrade https to plain http"), "{err}");

    // Without the CA the certificate is refused: the client really verifies.
    let strict = tool(WebConfig::default());
    let err = fetch(&strict, &format!("https://localhost:{port}/post"), None, None).await.unwrap_err();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}
