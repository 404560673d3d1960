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
    let (mut browser, mut handler) = Browser::launch(config).await.map_err(|e| failed(e.to_string()))?;
    let pid = browser.get_mut_child().and_then(|c| c.inner.id());
    let watchdog = pid.and_then(|pid| Watchdog::start(pid, user_data_dir));
    let handler: JoinHandle<()> = tokio::spawn(async move {
        // Lives as long as the connection is driven: when the session ends the browser goes
        // with it, and the watchdog stands down.
        let _watchdog = watchdog;
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

/// What the watchdog runs: wait for its stdin to close; unless the host said `done` first (it
/// ended the browser itself), stop the Chromium `$1` — when it still is the one on profile `$2`,
/// so a reused pid is never hit — with SIGTERM, which lets it write cookies to the profile and
/// end its own helper processes, then SIGKILL after 5 s.
const WATCHDOG_SCRIPT: &str = r#"read -r line
[ "$line" = done ] && exit 0
case "$(tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null)" in
  *"--user-data-dir=$2"*) ;;
  *) exit 0 ;;
esac
kill -TERM "$1" 2>/dev/null
i=0
while [ $i -lt 50 ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -KILL "$1" 2>/dev/null
exit 0"#;

/// A small helper process that stops the Chromium this session started when the host dies
/// without ending it (SIGKILL, a crash, the OOM killer). Chromium is started by chromiumoxide,
/// with no way to set `PR_SET_PDEATHSIG` in between fork and exec, and an orphaned Chromium
/// would run forever and keep its profile locked, so every later session fell back to a fresh
/// temporary profile without the saved logins (B1). The helper blocks reading a pipe only this
/// process holds; the kernel closes it when the process dies, however it dies.
struct Watchdog {
    alive: Option<std::process::ChildStdin>,
    child: Option<std::process::Child>,
}

impl Watchdog {
    /// `None` when the helper cannot start: then only a host that dies abruptly leaves the
    /// browser behind, as before.
    fn start(pid: u32, user_data_dir: &Path) -> Option<Self> {
        use std::os::unix::process::CommandExt as _;
        use std::process::{Command, Stdio};
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("kodik-browser-watchdog")
            .arg(pid.to_string())
            .arg(user_data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: a Ctrl-C at the host's terminal, or a kill of the host's group,
            // must not take it away before it has done its work.
            .process_group(0);
        let mut child = cmd.spawn().ok()?;
        let alive = child.stdin.take();
        Some(Self { alive, child: Some(child) })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        use std::io::Write as _;
        if let Some(mut stdin) = self.alive.take() {
            let _ = stdin.write_all(b"done\n");
        }
        // The helper exits at once now; collect it off this thread so no zombie is left.
        if let Some(mut child) = self.child.take() {
            let _ = std::thread::Builder::new().name("kodik-browser-watchdog".into()).spawn(move || child.wait());
        }
    }
}
