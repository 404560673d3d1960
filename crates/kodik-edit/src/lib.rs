//! The kodik edit engine: the tools that change files, and the checkpoints that undo them.
//!
//! | tool | type | SPEC |
//! | --- | --- | --- |
//! | `edit_file` | [`EditFileTool`] | E1–E13 |
//! | `create_file` | [`CreateFileTool`] | C1 |
//! | `delete_file` | [`DeleteFileTool`] | D1 |
//! | `apply_patch` | [`ApplyPatchTool`] (+ [`PatchInterceptor`] for shell heredocs) | P1–P5 |
//! | `edit_notebook` | [`EditNotebookTool`] | N1 |
//!
//! [`EditToolset`] builds all five around one shared [`Checkpoints`] (E13) and registers them.
//! The pure engines are public too, for embedders and fuzzing: [`matcher::replace_unique`]
//! (the cascade), [`edit_file::apply_edits`], [`apply_patch::parse_patch`] and
//! [`apply_patch::apply_hunks`].
//!
//! Guarantees every tool keeps: a failure never changes a byte (writes are planned fully in
//! memory, then written atomically); encoding, BOM, line endings, a missing final newline and
//! permissions survive; every path goes through [`kodik_core::Workspace::check`] (confinement,
//! `.kodikignore`, E10's Windows-path hint).

pub mod apply_patch;
pub mod checkpoints;
mod create_delete;
mod damaged;
pub mod diff;
mod disproved;
pub mod edit_file;
mod edited;
mod files;
mod lean;
pub mod matcher;
pub mod notebook;

use std::sync::Arc;

pub use apply_patch::{ApplyPatchTool, PatchInterceptor, parse_invocation};
pub use checkpoints::{Checkpoints, UndoReport};
pub use create_delete::{CreateFileTool, DeleteFileTool};
pub use edit_file::EditFileTool;
pub use notebook::EditNotebookTool;

use kodik_core::{CommandInterceptor, PathError, ToolError, ToolRegistry};

/// A kind of file operation the host may switch off (P4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileOp {
    /// Creating a file that does not exist.
    Create,
    /// Changing an existing file.
    Change,
    /// Deleting a file.
    Delete,
}

/// Which file operations are allowed (P4). A patch is checked as a whole: a move needs all
/// three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOps {
    /// Creating files.
    pub create: bool,
    /// Changing existing files.
    pub change: bool,
    /// Deleting files.
    pub delete: bool,
}

impl Default for FileOps {
    fn default() -> Self {
        Self { create: true, change: true, delete: true }
    }
}

impl FileOps {
    fn allows(&self, op: FileOp) -> bool {
        match op {
            FileOp::Create => self.create,
            FileOp::Change => self.change,
            FileOp::Delete => self.delete,
        }
    }

    /// `Denied` naming the first of `needed` that is switched off.
    pub(crate) fn require(&self, needed: &[FileOp], tool: &str) -> Result<(), ToolError> {
        match needed.iter().find(|op| !self.allows(**op)) {
            None => Ok(()),
            Some(op) => {
                let what = match op {
                    FileOp::Create => "creating files",
                    FileOp::Change => "changing files",
                    FileOp::Delete => "deleting files",
                };
                Err(ToolError::Denied(format!(
                    "{tool}: {what} is switched off in this session{}",
                    if needed.len() > 1 { " (a move needs creating, changing and deleting files)" } else { "" }
                )))
            }
        }
    }
}

/// What the edit tools of one toolset share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) checkpoints: Arc<Checkpoints>,
    pub(crate) ops: FileOps,
    /// Size of a diff in a result, and where a longer one is saved in full (G9).
    pub(crate) preview: kodik_core::PreviewConfig,
    /// The new text of the last large edit, once its call is done: the next one builds its
    /// text in it instead of in fresh memory, whose every page the kernel would have to
    /// fault in and clear (a tenth of a 15 MB edit). At most one such buffer, of at most
    /// [`SPARE_MAX`] bytes, is kept.
    pub(crate) spare: std::sync::Mutex<String>,
}

/// The largest buffer [`Shared::spare`] keeps.
const SPARE_MAX: usize = 64 << 20;

impl Shared {
    /// The kept buffer (empty, maybe with capacity), leaving none behind.
    pub(crate) fn take_spare(&self) -> String {
        let mut spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        spare.clear();
        spare
    }

    /// Keeps `text`'s memory for the next edit when it is large (and not too large).
    pub(crate) fn keep_spare(&self, text: String) {
        if (files::PARALLEL_MIN..=SPARE_MAX).contains(&text.capacity()) {
            *self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = text;
        }
    }
}

/// A path error, with a hint for the tool that fits when the file does not exist.
pub(crate) fn path_error(e: PathError, tool_for_missing: &str) -> ToolError {
    match e {
        PathError::NotFound(p) if tool_for_missing == "create_file" => {
            ToolError::failed(format!("`{p}` does not exist; to make a new file use create_file"))
        }
        PathError::NotFoundNear { path, near } if tool_for_missing == "create_file" => ToolError::failed(format!(
            "`{path}` does not exist{}; to make a new file use create_file",
            kodik_core::error::suggestions_suffix(&near)
        )),
        other => ToolError::Path(other),
    }
}

/// The five edit tools around one [`Checkpoints`].
#[derive(Clone)]
pub struct EditToolset {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EditToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EditToolset").field("ops", &self.shared.ops).finish_non_exhaustive()
    }
}

impl Default for EditToolset {
    fn default() -> Self {
        Self::new()
    }
}

impl EditToolset {
    /// A toolset with every file operation allowed and empty checkpoints.
    pub fn new() -> Self {
        Self::with_file_ops(FileOps::default())
    }

    /// A toolset that allows only `ops` (P4).
    pub fn with_file_ops(ops: FileOps) -> Self {
        Self {
            shared: Arc::new(Shared {
                checkpoints: Arc::new(Checkpoints::new()),
                ops,
                preview: kodik_core::PreviewConfig::default(),
                spare: Default::default(),
            }),
        }
    }

    /// How much of a diff a result shows and where a longer one is saved in full (G9); by
    /// default [`kodik_core::PreviewConfig::default`]. Call it before [`register`](Self::register):
    /// tools registered earlier keep the setting they were made with.
    pub fn preview(mut self, cfg: kodik_core::PreviewConfig) -> Self {
        let shared = Shared {
            checkpoints: Arc::clone(&self.shared.checkpoints),
            ops: self.shared.ops,
            preview: cfg,
            spare: Default::default(),
        };
        self.shared = Arc::new(shared);
        self
    }

    /// Registers `edit_file`, `create_file`, `delete_file`, `apply_patch` and `edit_notebook`.
    pub fn register(&self, registry: &mut ToolRegistry) {
        registry.register(lean::Lean(EditFileTool::new(Arc::clone(&self.shared))));
        registry.register(lean::Lean(CreateFileTool::new(Arc::clone(&self.shared))));
        registry.register(DeleteFileTool::new(Arc::clone(&self.shared)));
        registry.register(lean::Lean(ApplyPatchTool::new(Arc::clone(&self.shared))));
        registry.register(EditNotebookTool::new(Arc::clone(&self.shared)));
    }

    /// The diff preview settings set with [`preview`](Self::preview).
    pub fn preview_config(&self) -> &kodik_core::PreviewConfig {
        &self.shared.preview
    }

    /// The checkpoints every tool of this set records into (E13).
    pub fn checkpoints(&self) -> Arc<Checkpoints> {
        Arc::clone(&self.shared.checkpoints)
    }

    /// The shell interceptor that routes `apply_patch` heredocs here (P2).
    pub fn interceptor(&self) -> Arc<dyn CommandInterceptor> {
        Arc::new(PatchInterceptor::new(Arc::clone(&self.shared)))
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
