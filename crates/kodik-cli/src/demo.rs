//! `kodik agent --demo`: a recorded session replayed through the real OpenAI Responses client,
//! the real agent loop and the real tools, on a fresh copy of `examples/demo-workspace/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kodik_tools::model::replay::{Recording, ReplayOptions, ReplayServer};

/// The task the recording answers.
pub const TASK: &str = "The slugify tests fail (`sh test.sh`). Find the bug and fix it, note the fix in \
CHANGELOG.md, and make sure all the tests pass.";

/// The model the recording was written for: its plan offers apply_patch and defers the search tools.
pub const MODEL: &str = "gpt-5";

/// The session, one OpenAI Responses SSE body per model request (see `examples/demo/make_recording.py`).
const RECORDING: &str = include_str!("../../../examples/demo/recording.json");

/// The demo project, embedded so the demo runs from any folder and never touches the checkout.
const FILES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../examples/demo-workspace/README.md")),
    ("CHANGELOG.md", include_str!("../../../examples/demo-workspace/CHANGELOG.md")),
    ("slugify.sh", include_str!("../../../examples/demo-workspace/slugify.sh")),
    ("test.sh", include_str!("../../../examples/demo-workspace/test.sh")),
    ("titles.txt", include_str!("../../../examples/demo-workspace/titles.txt")),
];

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// `--demo-dir` names a folder that already holds files.
    #[error("--demo-dir {0} is not empty; give a new or empty folder (the demo writes its project there)")]
    NotEmpty(PathBuf),
    /// `--demo-dir` names something that is not a folder.
    #[error("--demo-dir {0} is not a folder")]
    NotADir(PathBuf),
    /// The folder or its files could not be written.
    #[error("cannot write the demo project to {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The embedded recording does not parse (a build from a broken checkout).
    #[error("the embedded demo recording is invalid: {0}")]
    Recording(#[from] serde_json::Error),
    /// The loopback server could not start.
    #[error("cannot start the replay server on 127.0.0.1: {0}")]
    Server(std::io::Error),
}

/// Writes the demo project into `dir` (created when missing, refused when not empty) or into a
/// new temporary folder that is kept after the run, and returns the folder.
pub fn prepare(dir: Option<&Path>) -> Result<PathBuf, DemoError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DemoError::Write { path, source }
    };
    let root = match dir {
        Some(dir) => {
            if dir.exists() {
                if !dir.is_dir() {
                    return Err(DemoError::NotADir(dir.to_path_buf()));
                }
                if std::fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
                    return Err(DemoError::NotEmpty(dir.to_path_buf()));
                }
            }
            std::fs::create_dir_all(dir).map_err(write_err(dir))?;
            dir.to_path_buf()
        }
        None => {
            let tmp = std::env::temp_dir();
            tempfile::Builder::new().prefix("kodik-demo-").tempdir_in(&tmp).map_err(write_err(&tmp))?.keep()
        }
    };
    for (name, text) in FILES {
        let path = root.join(name);
        std::fs::write(&path, text).map_err(write_err(&path))?;
    }
    Ok(root)
}

/// Starts the loopback server that answers the agent's requests with the recording. A short
/// pause between events lets the progress display show calls starting while a response streams.
pub async fn replay_server() -> Result<ReplayServer, DemoError> {
    let recording: Recording = serde_json::from_str(RECORDING)?;
    let options = ReplayOptions { chunk_delay: Duration::from_millis(8), ..ReplayOptions::default() };
    ReplayServer::start_with(recording, options).await.map_err(DemoError::Server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_empty_demo_dir_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.txt"), "keep").unwrap();
        let err = prepare(Some(dir.path())).unwrap_err();
        assert!(matches!(err, DemoError::NotEmpty(_)), "{err}");
        assert!(err.to_string().contains("not empty"));
        assert!(!dir.path().join("slugify.sh").exists());
    }

    #[test]
    fn a_new_demo_dir_gets_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = prepare(Some(&dir.path().join("new"))).unwrap();
        for (name, text) in FILES {
            assert_eq!(std::fs::read_to_string(root.join(name)).unwrap(), *text);
        }
    }
}
