//! Finding and starting Chromium.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chromiumoxide::{Browser, BrowserConfig};
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::error::BrowserError;

/// Where Chromium is looked for, in order, after `CHROME` and an explicit path: Debian's real
/// binary first (its `/usr/bin/chromium` is a wrapper script), then common names on PATH.
const CANDIDATES: &[&str] =
    &["/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// The Chromium binary to start: `explicit`, else `CHROME`, else the first that exists of
/// Debian's `/usr/lib/chromium/chromium` and `chromium`, `chromium-browser`, `google-chrome`,
/// `google-chrome-stable` on PATH.
pub fn find_chromium(explicit: Option<&Path>) -> Result<PathBuf, BrowserError> {
    if let Some(p) = explicit {
        return if p.is_file() { Ok(p.to_path_buf()) } else { Err(BrowserError::NotInstalled) };
    }
    if let Some(p) = std::env::var_os("CHROME").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(BrowserError::Launch { executable: p.display().to_string(), reason: "CHROME names no file".into() })
        };
    }
    for c in CANDIDATES {
        let p = Path::new(c);
        if p.is_absolute() {
            if p.is_file() {
                return Ok(p.to_path_buf());
            }
            continue;
        }
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                let full = dir.join(c);
                if full.is_file() {
                    return Ok(full);
                }
            }
        }
    }
    Err(BrowserError::NotInstalled)
}

/// A started browser and the task that polls its DevTools connection.
pub(crate) struct Launched {
    pub browser: Browser,
    pub handler: JoinHandle<()>,
}

/// Starts headless Chromium on `user_data_dir`, with `temp_dir` as its `TMPDIR`.
///
/// With `--disable-dev-shm-usage` Chromium keeps its shared memory in files under `TMPDIR`
/// (`.org.chromium.Chromium.*`), and a killed browser leaves them there for good; a folder of
/// the session's own, removed with it, takes them away.
pub(crate) async fn launch(
    executable: &Path,
    user_data_dir: &Path,
    temp_dir: &Path,
    timeout: Duration,
) -> Result<Launched, BrowserError> {
    let failed = |reason: String| BrowserError::Launch { executable: executable.display().to_string(), reason };
    let mut builder = BrowserConfig::builder()
        .chrome_executable(executable)
        .user_data_dir(user_data_dir)
        .launch_timeout(timeout)
        .request_timeout(Duration::from_secs(30))
        .viewport(None)
        .window_size(1280, 800)
        .env("TMPDIR", temp_dir.to_string_lossy())
        // chromiumoxide's puppeteer defaults include --disable-popup-blocking, which would let a
        // window.open without a user gesture through (B7); the list here is ours.
        .disable_default_args()
        .args([
            "disable-gpu",
            "disable-quic",
            "no-first-run",
            "disable-background-networking",
            "disable-component-update",
            "disable-sync",
            "disable-breakpad",
            "disable-dev-shm-usage",
            "disable-default-apps",
            "disable-hang-monitor",
            "disable-background-timer-throttling",
            "disable-renderer-backgrounding",
            "disable-backgrounding-occluded-windows",
            "password-store=basic",
            "use-mock-keychain",
            "metrics-recording-only",
            "enable-automation",
            "lang=en-US",
        ]);
    // The sandbox needs user namespaces a root process cannot use; an ordinary user keeps it.
    if rustix::process::geteuid().is_root() {
        builder = builder.no_sandbox();
    }
    let config = builder.build().map_err(failed)?;
    let (browser, mut handler) = Browser::launch(config).await.map_err(|e| failed(e.to_string()))?;
    let handler: JoinHandle<()> = tokio::spawn(async move {
        // The connection is driven only while this stream is polled; it ends when the browser goes.
        while let Some(event) = handler.next().await {
            if event.is_err() {
                // A single undecodable message is not fatal; the stream ends when the socket does.
                continue;
            }
        }
    });
    Ok(Launched { browser, handler })
}
