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

/// Starts `command` with `sh -c` in `workdir`, in a new process group.
pub(crate) fn start_server(command: &str, workdir: &Path) -> Result<tokio::process::Child, BrowserError> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(workdir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    cmd.spawn().map_err(|e| BrowserError::Other(format!("cannot start `{command}` in {}: {e}", workdir.display())))
}

/// Waits until something accepts connections at `url`'s host and port, bounded by `timeout`;
/// fails early when the server exits.
pub(crate) async fn wait_until_up(
    url: &str,
    timeout: Duration,
    server: &mut tokio::process::Child,
) -> Result<(), BrowserError> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let hostport = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let addr = if hostport.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        hostport.to_string()
    } else if url.starts_with("https://") {
        format!("{hostport}:443")
    } else {
        format!("{hostport}:80")
    };
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = server.try_wait() {
            return Err(BrowserError::Other(format!("the dev server exited ({status}) before {url} answered")));
        }
        if start.elapsed() >= timeout {
            return Err(BrowserError::Timeout { what: format!("{url} to answer"), ms: timeout.as_millis() as u64 });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
