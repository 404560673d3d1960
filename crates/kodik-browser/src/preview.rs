//! `preview` (B2): an optional dev-server command in its own process group, stopped with the preview.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::BrowserError;

/// A running preview: the tab showing it and the server it started, if any.
#[derive(Debug)]
pub(crate) struct Preview {
    pub tab: String,
    server: Option<tokio::process::Child>,
}

impl Preview {
    pub fn new(tab: String, server: Option<tokio::process::Child>) -> Self {
        Self { tab, server }
    }

    /// Stops the server's whole process group (npm starts node starts esbuild …).
    pub async fn stop(mut self) {
        if let Some(child) = self.server.as_mut() {
            if let Some(pid) = child.id()
                && let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
                if tokio::time::timeout(Duration::from_secs(3), child.wait()).await.is_err() {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
            }
            let _ = child.wait().await;
        }
    }
}

/// Starts `command` with `sh -c` in `workdir`, in a new process group, its output going to an
/// unnamed temporary file (returned) so that a failure can quote it.
pub(crate) fn start_server(
    command: &str,
    workdir: &Path,
) -> Result<(tokio::process::Child, std::fs::File), BrowserError> {
    let cannot =
        |e: std::io::Error| BrowserError::Other(format!("cannot start `{command}` in {}: {e}", workdir.display()));
    let log = tempfile::tempfile().map_err(cannot)?;
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(workdir)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(cannot)?)
        .stderr(log.try_clone().map_err(cannot)?)
        .process_group(0)
        .kill_on_drop(true);
    Ok((cmd.spawn().map_err(cannot)?, log))
}

/// Refuses to start a dev server for `url` when something already answers there: the new one
/// would fail to bind (or move to another port) and the page shown would be the old server's.
pub(crate) async fn check_free(url: &str, command: &str) -> Result<(), BrowserError> {
    let addr = address(url);
    if tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(&addr))
        .await
        .is_ok_and(|c| c.is_ok())
    {
        return Err(BrowserError::Other(format!(
            "{url} already answers before `{command}` started: another server holds {addr} (an old dev server?); \
             stop it first, or preview {url} without `command`"
        )));
    }
    Ok(())
}

/// The last lines of a dev server's output, for an error.
fn tail(log: &std::fs::File) -> String {
    use std::io::{Read, Seek};
    let Ok(mut f) = log.try_clone() else { return String::new() };
    let mut bytes = Vec::new();
    if f.seek(std::io::SeekFrom::Start(0)).is_err() || f.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines[lines.len().saturating_sub(15)..].join("\n");
    if last.is_empty() {
        " It printed nothing.".to_string()
    } else {
        format!(" Its last output:\n{}", crate::actions::clip_chars(&last, 3000))
    }
}

/// `host:port` of `url`.
fn address(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let hostport = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if hostport.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        hostport.to_string()
    } else if url.starts_with("https://") {
        format!("{hostport}:443")
    } else {
        format!("{hostport}:80")
    }
}

/// Waits until something accepts connections at `url`'s host and port, bounded by `timeout`;
/// fails early when the server exits, quoting its output from `log`.
pub(crate) async fn wait_until_up(
    url: &str,
    timeout: Duration,
    server: &mut tokio::process::Child,
    log: &std::fs::File,
) -> Result<(), BrowserError> {
    let addr = address(url);
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = server.try_wait() {
            return Err(BrowserError::Other(format!(
                "the dev server exited ({status}) before {url} answered.{}",
                tail(log)
            )));
        }
        if start.elapsed() >= timeout {
            return Err(BrowserError::Timeout { what: format!("{url} to answer"), ms: timeout.as_millis() as u64 });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
