//! The tool structs: each parses its arguments (kodik-schema), checks them, and runs against
//! the shared [`ConversationToolset`].

use std::fmt::Write as _;
use std::path::PathBuf;

use async_trait::async_trait;
use kodik_core::{Resource, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool, Workspace};
use kodik_schema::agent::{
    AgentStatusArgs, AskQuestionsArgs, CheckUnderstandingArgs, CreateLessonArgs, GeneratePlanArgs, MemoryAction,
    MemoryArgs, MemoryScope, Question, QuestionOption, SendMessageArgs, SessionState, StatusScope, SubAgentArgs,
    TodoWriteArgs,
};
use serde_json::json;

use crate::agents::{self, ChildState, ChildStatus, ChildTask};
use crate::ask::{Answer, AskOutcome, ask_with_countdown};
use crate::present::{Artifact, ArtifactKind, external_resource, file_stem, fresh_path, plan_markdown};
use crate::store::{ConversationStore, FileStore, SessionInfo, now_secs};
use crate::{ConversationToolset, memory, todo};

macro_rules! tool_struct {
    ($(#[$doc:meta])* $name:ident, $args:ty) => {
        $(#[$doc])*
        pub struct $name {
            spec: ToolSpec,
            set: ConversationToolset,
        }

        impl $name {
            /// The tool over `set`'s state and host traits.
            pub fn new(set: ConversationToolset) -> Self {
                Self { spec: kodik_schema::spec::<$args>(), set }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

fn state_name(s: SessionState) -> &'static str {
    match s {
        SessionState::Running => "running",
        SessionState::Idle => "idle",
        SessionState::Closed => "closed",
    }
}

fn root(cx: &ToolContext) -> PathBuf {
    cx.workspace.primary_root().to_path_buf()
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `todo_write` (A1).
    TodoWriteTool,
    TodoWriteArgs
);

/// Adds the unchanged list to an error's message: the model sees the list in every result.
fn with_list(e: ToolError, items: &[todo::Todo]) -> ToolError {
    let list = format!("\nThe list is unchanged. {}", todo::render(items));
    match e {
        ToolError::InvalidInput { tool, field, message } => {
            ToolError::InvalidInput { tool, field, message: message + &list }
        }
        other => ToolError::failed(format!("{other}{list}")),
    }
}

#[async_trait]
impl TypedTool for TodoWriteTool {
    type Args = TodoWriteArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &TodoWriteArgs) -> Result<(), ToolError> {
        args.check().map_err(|e| with_list(e, &self.set.inner.todos.items()))
    }

    async fn run(&self, args: TodoWriteArgs, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let todos = &self.set.inner.todos;
        let items = todos.apply(&args).map_err(|e| with_list(e, &todos.items()))?;
        Ok(ToolOutput::text(todo::render(&items)).with_meta(json!({ "todos": items })))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `memory` (A2).
    MemoryTool,
    MemoryArgs
);

impl MemoryTool {
    /// The folder of `scope`, before any check: also the key that orders a turn's calls on it.
    fn folder(&self, scope: MemoryScope, ws: &Workspace) -> Result<PathBuf, ToolError> {
        let config = &self.set.inner.config;
        Ok(match scope {
            MemoryScope::Workspace => ws.primary_root().join(".kodik").join("memory"),
            MemoryScope::Session => {
                // The id comes from the host; it names one folder and nothing above it.
                let id = &self.set.session_id();
                if id.is_empty() || id.starts_with('.') || id.contains(['/', '\\', '\0']) {
                    return Err(ToolError::failed(format!(
                        "the session memory is not available: this session's id `{id}` cannot name a folder"
                    )));
                }
                ws.primary_root().join(".kodik").join("memory").join("sessions").join(id)
            }
            MemoryScope::Global => config.global_memory_dir.clone().ok_or_else(|| {
                ToolError::failed(
                    "the global memory is not available here (no user config folder: set KODIK_CONFIG_DIR or HOME); \
                     use scope `workspace`",
                )
            })?,
        })
    }

    /// The folder of `scope` to use, and the workspace its notes must stay in: the workspace and
    /// session memories are inside the workspace, so a `.kodik/memory` that is a link elsewhere is
    /// refused as `create_file` refuses it (G16).
    fn dir(&self, scope: MemoryScope, cx: &ToolContext) -> Result<(PathBuf, Option<Workspace>), ToolError> {
        let dir = self.folder(scope, &cx.workspace)?;
        if scope == MemoryScope::Global {
            return Ok((dir, None));
        }
        let resolved = cx.workspace.resolve(&dir).map_err(|_| {
            ToolError::failed(format!(
                "the {} memory folder {} leads outside the workspace (a link): memory neither reads nor writes \
                 there; remove the link to use it",
                scope_name(scope),
                dir.display()
            ))
        })?;
        Ok((resolved, Some(cx.workspace.clone())))
    }
}

/// The scheduler's key for one memory folder.
fn memory_key(dir: PathBuf) -> Resource {
    Resource::Session(format!("memory:{}", dir.display()))
}

fn scope_name(s: MemoryScope) -> &'static str {
    match s {
        MemoryScope::Workspace => "workspace",
        MemoryScope::Global => "global",
        MemoryScope::Session => "session",
    }
}

#[async_trait]
impl TypedTool for MemoryTool {
    type Args = MemoryArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &MemoryArgs) -> Result<(), ToolError> {
        args.check()
    }

    /// Every change of one memory folder is ordered after the earlier calls on it (G2): a
    /// `delete` then an `update` of one note run in the model's order, and a `list` after a
    /// `save` sees the note.
    fn resources(&self, args: &MemoryArgs, ws: &Workspace) -> Vec<Resource> {
        match args.action {
            MemoryAction::List => Vec::new(),
            _ => self.folder(args.scope, ws).map(memory_key).into_iter().collect(),
        }
    }

    fn reads(&self, args: &MemoryArgs, ws: &Workspace) -> Vec<Resource> {
        match args.action {
            MemoryAction::List => self.folder(args.scope, ws).map(memory_key).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    async fn run(&self, args: MemoryArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (dir, inside) = self.dir(args.scope, cx)?;
        let inside = inside.as_ref();
        let limits = self.set.inner.config.memory_limits;
        let scope = scope_name(args.scope);
        let content = args.content.as_deref().unwrap_or_default();
        let id = args.id.as_deref().unwrap_or_default();
        let (text, meta) = match args.action {
            MemoryAction::Save => {
                if args.scope == MemoryScope::Session
                    && let Some(sessions) = dir.parent()
                {
                    // Session notes are scratch of one conversation, like the git-ignored
                    // transcripts they belong to: kept from a model's `git add -A`. Workspace notes
                    // are project facts a team may well commit, so `.kodik/memory/` itself is not
                    // hidden. Best effort: a note is still saved when the .gitignore cannot be.
                    let _ = kodik_core::workspace::hide_from_git(
                        sessions,
                        "kodik session memory: notes of one conversation",
                    );
                }
                let n = memory::save(&dir, content, limits, inside)?;
                (
                    format!("Saved note `{}` in the {scope} memory ({}).", n.id, n.path.display()),
                    json!({ "id": n.id, "path": n.path, "scope": scope }),
                )
            }
            MemoryAction::Update => {
                let n = memory::update(&dir, id, content, limits, inside)?;
                (
                    format!("Updated note `{}` in the {scope} memory ({}).", n.id, n.path.display()),
                    json!({ "id": n.id, "path": n.path, "scope": scope }),
                )
            }
            MemoryAction::Delete => {
                let path = memory::delete(&dir, id, inside)?;
                (
                    format!("Deleted note `{}` from the {scope} memory.", id.trim().trim_end_matches(".md")),
                    json!({ "path": path, "scope": scope }),
                )
            }
            MemoryAction::List => {
                let listing = memory::list(&dir, inside)?;
                let ids: Vec<&str> = listing.notes.iter().map(|n| n.id.as_str()).collect();
                let skipped: Vec<&str> = listing.skipped.iter().map(|s| s.name.as_str()).collect();
                (
                    memory::render(scope, &dir, &listing),
                    json!({ "ids": ids, "skipped": skipped, "dir": dir, "scope": scope }),
                )
            }
        };
        Ok(ToolOutput::text(text).with_meta(meta))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `ask_questions` (A6).
    AskQuestionsTool,
    AskQuestionsArgs
);

fn no_asker() -> ToolError {
    ToolError::failed(
        "nobody can be asked in this session (the host has no way to reach the user): go on with your best \
         judgement and state the assumptions you make",
    )
}

/// Checks that the asker gave one answer per question and only offered options.
fn check_answers(questions: &[Question], answers: &[Answer]) -> Result<(), ToolError> {
    if answers.len() != questions.len() {
        return Err(ToolError::failed(format!(
            "the host returned {} answers for {} questions",
            answers.len(),
            questions.len()
        )));
    }
    for (q, a) in questions.iter().zip(answers) {
        if let Answer::Chosen(labels) = a {
            if labels.is_empty() || (!q.allow_multiple && labels.len() > 1) {
                return Err(ToolError::failed(format!(
                    "the host returned {} options for `{}`",
                    labels.len(),
                    q.question
                )));
            }
            if let Some(bad) = labels.iter().find(|l| !q.options.iter().any(|o| o.label == **l)) {
                return Err(ToolError::failed(format!("the host chose `{bad}`, not an option of `{}`", q.question)));
            }
        }
    }
    Ok(())
}

fn timed_out_text(n: usize, timeout: std::time::Duration) -> String {
    format!(
        "The user did not touch the {n} question(s) within {timeout:?}, so they were skipped. Go on with your best \
         judgement and state the assumptions you make."
    )
}

#[async_trait]
impl TypedTool for AskQuestionsTool {
    type Args = AskQuestionsArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &AskQuestionsArgs) -> Result<(), ToolError> {
        args.check()
    }

    async fn run(&self, args: AskQuestionsArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let asker = self.set.inner.asker.as_deref().ok_or_else(no_asker)?;
        let timeout = self.set.inner.config.question_timeout;
        let outcome = ask_with_countdown(asker, &args.questions, timeout, &cx.cancel).await.map_err(|e| {
            ToolError::failed(format!("{e}: go on with your best judgement and state your assumptions"))
        })?;
        let answers = match outcome {
            AskOutcome::Cancelled => return Err(ToolError::Cancelled),
            AskOutcome::TimedOut => {
                return Ok(ToolOutput::text(timed_out_text(args.questions.len(), timeout))
                    .with_meta(json!({ "timed_out": true, "answers": [] })));
            }
            AskOutcome::Answered(a) => a,
        };
        check_answers(&args.questions, &answers)?;
        let mut text = String::from("The user's answers:");
        let mut meta = Vec::new();
        let mut skipped = 0;
        for (i, (q, a)) in args.questions.iter().zip(&answers).enumerate() {
            let said = match a {
                Answer::Chosen(l) => {
                    meta.push(json!({ "chosen": l }));
                    format!("chose {}", l.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", "))
                }
                Answer::Own(t) => {
                    meta.push(json!({ "own": t }));
                    format!("answered in their own words: {t}")
                }
                Answer::Skipped => {
                    skipped += 1;
                    meta.push(json!({ "skipped": true }));
                    "skipped".to_string()
                }
            };
            let _ = write!(text, "\n{}. {} → {said}", i + 1, q.question);
        }
        if skipped > 0 {
            text.push_str(
                "\nFor the skipped questions, go on with your best judgement and state the assumptions you make.",
            );
        }
        Ok(ToolOutput::text(text).with_meta(json!({ "timed_out": false, "answers": meta })))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `agent_status` (A4).
    AgentStatusTool,
    AgentStatusArgs
);

fn ago(secs: u64) -> String {
    let d = now_secs().saturating_sub(secs);
    match d {
        0..60 => format!("{d} s ago"),
        60..3600 => format!("{} min ago", d / 60),
        3600..86400 => format!("{} h ago", d / 3600),
        _ => format!("{} days ago", d / 86400),
    }
}

fn describe(info: &SessionInfo) -> String {
    let mut s = format!(
        "- {} [{}] {}",
        info.id,
        state_name(info.status),
        if info.title.is_empty() { "(untitled)" } else { &info.title }
    );
    let mut facts = Vec::new();
    if let Some(m) = &info.mode {
        facts.push(format!("mode {m}"));
    }
    if let Some(m) = &info.model {
        facts.push(format!("model {m}"));
    }
    if let Some(w) = &info.workspace {
        facts.push(format!("workspace {}", w.display()));
    }
    facts.push(format!("active {}", ago(info.last_activity)));
    if let Some(f) = info.context_fill {
        facts.push(format!("context {:.0}% full", f * 100.0));
    }
    if let Some(p) = &info.parent {
        facts.push(format!("sub-agent of {p}"));
    }
    let _ = write!(s, " — {}", facts.join(", "));
    if let Some(g) = &info.goal {
        let _ = write!(s, "\n  goal: {g}");
    }
    s
}

/// An entry as it is now: one left "running" or "idle" by a process that is gone (a crash, a
/// kill) is closed.
fn as_it_is(mut info: SessionInfo) -> SessionInfo {
    if !info.is_open() {
        info.status = SessionState::Closed;
    }
    info
}

/// Whether `info` is of workspace `want`: its path (`..`, links and a relative path resolved
/// against this workspace's root, compared in full) or its folder name.
fn matches_workspace(info: &SessionInfo, want: &str, root: &std::path::Path) -> bool {
    let want = want.trim().trim_end_matches('/');
    let canonical = |p: &std::path::Path| std::fs::canonicalize(root.join(p)).ok();
    let wanted = canonical(std::path::Path::new(want));
    info.workspace.as_ref().is_some_and(|w| {
        w.to_string_lossy().trim_end_matches('/') == want
            || w.file_name().is_some_and(|n| n.to_string_lossy() == want)
            || (wanted.is_some() && canonical(w) == wanted)
    })
}

fn matches_query(info: &SessionInfo, query: &str) -> bool {
    let hay = format!(
        "{} {} {} {}",
        info.id,
        info.title,
        info.goal.as_deref().unwrap_or_default(),
        info.last_messages.join(" ")
    )
    .to_lowercase();
    query.split_whitespace().all(|w| hay.contains(&w.to_lowercase()))
}

impl AgentStatusTool {
    fn store(&self, cx: &ToolContext) -> std::sync::Arc<dyn ConversationStore> {
        match &self.set.inner.store {
            Some(s) => s.clone(),
            None => std::sync::Arc::new(FileStore::for_workspace(&root(cx))),
        }
    }

    fn current(&self, cx: &ToolContext, store: &dyn ConversationStore) -> Result<SessionInfo, ToolError> {
        let id = &self.set.session_id();
        let stored = store.get(id).map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(stored.unwrap_or_else(|| SessionInfo { workspace: Some(root(cx)), ..SessionInfo::new(id.clone()) }))
    }

    fn sessions(
        &self,
        args: &AgentStatusArgs,
        store: &dyn ConversationStore,
        root: &std::path::Path,
    ) -> Result<(String, serde_json::Value), ToolError> {
        let me = &self.set.session_id();
        let mut all: Vec<SessionInfo> = store
            .list()
            .map_err(|e| ToolError::failed(e.to_string()))?
            .into_iter()
            .filter(|s| s.id != *me)
            .map(as_it_is)
            .filter(|s| args.status.is_none_or(|st| s.status == st))
            .filter(|s| {
                args.active_within_minutes
                    .is_none_or(|m| now_secs().saturating_sub(s.last_activity) <= u64::from(m) * 60)
            })
            .filter(|s| args.workspace.as_deref().is_none_or(|w| matches_workspace(s, w, root)))
            .filter(|s| args.query.as_deref().is_none_or(|q| matches_query(s, q)))
            .collect();
        all.sort_by(|a, b| b.last_activity.cmp(&a.last_activity).then_with(|| a.id.cmp(&b.id)));
        let total = all.len();
        let offset = args.offset.unwrap_or(0) as usize;
        let limit = args.limit.unwrap_or(20) as usize;
        let page: Vec<SessionInfo> = all.into_iter().skip(offset).take(limit).collect();
        let mut text = if total == 0 {
            "No other conversations match.".to_string()
        } else if page.is_empty() {
            format!("{total} conversations match; offset {offset} is past the end.")
        } else {
            format!("Conversations {}–{} of {total}, most recently active first:", offset + 1, offset + page.len())
        };
        for s in &page {
            text.push('\n');
            text.push_str(&describe(s));
        }
        if offset + page.len() < total {
            let _ = write!(text, "\nMore: call again with offset {}.", offset + page.len());
        }
        Ok((text, json!({ "total": total, "sessions": page.iter().map(|s| &s.id).collect::<Vec<_>>() })))
    }
}

#[async_trait]
impl TypedTool for AgentStatusTool {
    type Args = AgentStatusArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &AgentStatusArgs) -> Result<(), ToolError> {
        args.check()?;
        // The schema's bounds, which not every client enforces: 0 minutes would silently list
        // nothing, as `limit: 0` would.
        let invalid = |field: &str, message: &str| ToolError::InvalidInput {
            tool: "agent_status".into(),
            field: Some(field.into()),
            message: message.into(),
        };
        if args.active_within_minutes == Some(0) {
            return Err(invalid("active_within_minutes", "`active_within_minutes` must be at least 1"));
        }
        if args.limit.is_some_and(|l| l > 200) {
            return Err(invalid("limit", "`limit` can be at most 200; page with `offset` for more"));
        }
        Ok(())
    }

    async fn run(&self, args: AgentStatusArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let store = self.store(cx);
        if let Some(id) = args.agent_id.as_deref().map(str::trim)
            && let Some(child) = self.set.inner.children.get(id)
        {
            if args.wait {
                let Some(report) = child.settled(&cx.cancel).await else { return Err(ToolError::Cancelled) };
                // Read here, so not again as a note before the next request.
                self.set.inner.children.reports.lock().unwrap_or_else(|p| p.into_inner()).retain(|(c, _)| c != id);
                return Ok(ToolOutput::text(agents::report_text(id, &report))
                    .with_meta(json!({ "agent_id": id, "settled": true })));
            }
            let settled = matches!(child.state(), ChildState::Settled(_));
            return Ok(
                ToolOutput::text(agents::describe(&child)).with_meta(json!({ "agent_id": id, "settled": settled }))
            );
        }
        if let Some(id) = args.agent_id.as_deref().map(str::trim) {
            let info = store.get(id).map_err(|e| ToolError::failed(e.to_string()))?;
            let Some(info) = info.map(as_it_is) else {
                return Err(ToolError::failed(format!(
                    "no sub-agent or conversation `{id}`: list them with agent_status scope `all`"
                )));
            };
            if args.wait {
                return Err(ToolError::failed(format!(
                    "`{id}` is a conversation, not a sub-agent of this one: `wait` only waits for your sub-agents"
                )));
            }
            let mut text = describe(&info);
            if !info.last_messages.is_empty() {
                text.push_str("\n  last messages:");
                for m in &info.last_messages {
                    let _ = write!(text, "\n  > {}", m.replace('\n', "\n  > "));
                }
            }
            return Ok(ToolOutput::text(text).with_meta(serde_json::to_value(&info).unwrap_or_default()));
        }
        let scope = args.scope.unwrap_or(StatusScope::Agents);
        let children = self.set.inner.children.all();
        let background: Vec<_> = children.iter().filter(|c| c.background).collect();
        let agents = if background.is_empty() {
            "This conversation has no background sub-agents.".to_string()
        } else {
            let mut t = format!("{} background sub-agents:", background.len());
            for c in &background {
                t.push('\n');
                t.push_str(&agents::describe(c));
            }
            t
        };
        let agent_ids: Vec<&str> = background.iter().map(|c| c.id.as_str()).collect();
        let (text, meta) = match scope {
            StatusScope::Agents => (agents, json!({ "agents": agent_ids })),
            StatusScope::Current => {
                let me = self.current(cx, &*store)?;
                let mut text = describe(&me);
                let todos = self.set.todos();
                if !todos.is_empty() {
                    let _ = write!(text, "\n  {}", todo::render(&todos).replace('\n', "\n  "));
                }
                (text, serde_json::to_value(&me).unwrap_or_default())
            }
            StatusScope::Sessions => self.sessions(&args, &*store, &root(cx))?,
            StatusScope::All => {
                let (sessions, meta) = self.sessions(&args, &*store, &root(cx))?;
                (format!("{agents}\n\n{sessions}"), meta)
            }
        };
        Ok(ToolOutput::text(text).with_meta(meta))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `generate_plan` (A7, Plan mode): writes `.kodik/plans/<title>.md` and presents it.
    GeneratePlanTool,
    GeneratePlanArgs
);

async fn write_and_present(
    set: &ConversationToolset,
    kind: ArtifactKind,
    title: &str,
    path: PathBuf,
    body: &str,
) -> Result<(PathBuf, String), ToolError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ToolError::io("creating", dir, e))?;
    }
    std::fs::write(&path, body).map_err(|e| ToolError::io("writing", &path, e))?;
    let artifact = Artifact { kind, title: title.trim().to_string(), path: path.clone() };
    let how = set.presenter().present(&artifact).await.map_err(|e| {
        ToolError::failed(format!("the file is written ({}), but showing it failed: {e}", path.display()))
    })?;
    Ok((path, how))
}

#[async_trait]
impl TypedTool for GeneratePlanTool {
    type Args = GeneratePlanArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &GeneratePlanArgs) -> Result<(), ToolError> {
        args.check()
    }

    async fn run(&self, args: GeneratePlanArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let md = plan_markdown(&args);
        let dir = root(cx).join(".kodik").join("plans");
        let path = fresh_path(&dir, &file_stem(&args.title), "md");
        let (path, how) = write_and_present(&self.set, ArtifactKind::Plan, &args.title, path, &md).await?;
        let text = format!(
            "Plan \"{}\" ({} steps) written to {} and {how}. The user reviews it before anything changes: wait for \
             their decision.",
            args.title.trim(),
            args.steps.len(),
            path.display()
        );
        Ok(ToolOutput::text(text).with_meta(json!({ "path": path, "steps": args.steps.len() })))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `create_lesson` (A7, Educator mode): writes `.kodik/lessons/<title>.html` and presents it.
    CreateLessonTool,
    CreateLessonArgs
);

#[async_trait]
impl TypedTool for CreateLessonTool {
    type Args = CreateLessonArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &CreateLessonArgs) -> Result<(), ToolError> {
        args.check()?;
        let invalid = |message: String| ToolError::InvalidInput {
            tool: "create_lesson".into(),
            field: Some("html".into()),
            message,
        };
        if !args.html.to_ascii_lowercase().contains("<html") && !args.html.to_ascii_lowercase().contains("<body") {
            return Err(invalid("`html` is not an HTML document: give the whole page, with <html> or <body>".into()));
        }
        if let Some(r) = external_resource(&args.html) {
            return Err(invalid(format!(
                "the lesson loads `{r}` from the network; it must be self-contained: inline the CSS and JavaScript, \
                 embed images as data: URLs"
            )));
        }
        Ok(())
    }

    async fn run(&self, args: CreateLessonArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let dir = root(cx).join(".kodik").join("lessons");
        let path = fresh_path(&dir, &file_stem(&args.title), "html");
        let (path, how) = write_and_present(&self.set, ArtifactKind::Lesson, &args.title, path, &args.html).await?;
        let text = format!("Lesson \"{}\" written to {} and {how}.", args.title.trim(), path.display());
        Ok(ToolOutput::text(text).with_meta(json!({ "path": path })))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `check_understanding` (A7, Educator mode): asks the quiz through the [`crate::Asker`]
    /// and grades the answers.
    CheckUnderstandingTool,
    CheckUnderstandingArgs
);

#[async_trait]
impl TypedTool for CheckUnderstandingTool {
    type Args = CheckUnderstandingArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &CheckUnderstandingArgs) -> Result<(), ToolError> {
        args.check()
    }

    async fn run(&self, args: CheckUnderstandingArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let asker = self.set.inner.asker.as_deref().ok_or_else(no_asker)?;
        let questions: Vec<Question> = args
            .questions
            .iter()
            .map(|q| Question {
                question: q.question.clone(),
                options: q.options.iter().map(|o| QuestionOption { label: o.clone(), description: None }).collect(),
                allow_multiple: false,
            })
            .collect();
        let timeout = self.set.inner.config.question_timeout;
        let outcome = ask_with_countdown(asker, &questions, timeout, &cx.cancel)
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let answers = match outcome {
            AskOutcome::Cancelled => return Err(ToolError::Cancelled),
            AskOutcome::TimedOut => {
                return Ok(
                    ToolOutput::text(timed_out_text(questions.len(), timeout)).with_meta(json!({ "timed_out": true }))
                );
            }
            AskOutcome::Answered(a) => a,
        };
        check_answers(&questions, &answers)?;
        let mut text = format!("Comprehension check on {}:", args.topic.trim());
        let (mut right, mut graded) = (0, 0);
        let mut results = Vec::new();
        for (i, (q, a)) in args.questions.iter().zip(&answers).enumerate() {
            let correct = q.correct_option.and_then(|c| q.options.get(c as usize));
            let line = match (a, correct) {
                (Answer::Skipped, _) => {
                    results.push(json!({ "skipped": true }));
                    "skipped".to_string()
                }
                (Answer::Chosen(l), Some(c)) => {
                    graded += 1;
                    let ok = l.first() == Some(c);
                    right += usize::from(ok);
                    results.push(json!({ "answer": l.first(), "correct": ok }));
                    if ok {
                        format!("`{}` — correct", c)
                    } else {
                        format!("`{}` — wrong; correct: `{c}`", l.join(", "))
                    }
                }
                (Answer::Own(t), Some(c)) => {
                    graded += 1;
                    results.push(json!({ "answer": t, "correct": null }));
                    format!("in their own words: {t} (the expected answer: `{c}`; judge it yourself)")
                }
                (Answer::Own(_) | Answer::Chosen(_), None) => {
                    let t = match a {
                        Answer::Chosen(l) => l.join(", "),
                        Answer::Own(t) => t.clone(),
                        Answer::Skipped => String::new(),
                    };
                    results.push(json!({ "answer": t }));
                    format!("open answer: {t}")
                }
            };
            let _ = write!(text, "\n{}. {} → {line}", i + 1, q.question);
            if let Some(e) = &q.explanation {
                let _ = write!(text, "\n   why: {e}");
            }
        }
        if graded > 0 {
            let _ = write!(text, "\n{right} of {graded} choice answers correct. Revisit what was missed.");
        }
        Ok(ToolOutput::text(text).with_meta(json!({ "correct": right, "graded": graded, "results": results })))
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `sub_agent` (A3).
    SubAgentTool,
    SubAgentArgs
);

fn no_runner() -> ToolError {
    ToolError::failed("sub-agents are not available in this host (it has no agent runner): do the task yourself")
}

#[async_trait]
impl TypedTool for SubAgentTool {
    type Args = SubAgentArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &SubAgentArgs) -> Result<(), ToolError> {
        args.check()
    }

    /// A sub-agent reads and changes files with its own tools: it starts after the turn's
    /// earlier calls on files, and later changes of files wait for it (G2, G4).
    fn resources(&self, _args: &SubAgentArgs, _ws: &Workspace) -> Vec<Resource> {
        vec![Resource::any_file()]
    }

    async fn run(&self, args: SubAgentArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let inner = &self.set.inner;
        let runner = inner.runner.get().ok_or_else(no_runner)?;
        let (depth, max_depth) = (inner.config.depth, inner.config.max_depth);
        if depth >= max_depth {
            return Err(ToolError::failed(if depth == 0 {
                "sub-agents are turned off in this session (their depth limit is 0): do the task yourself".to_string()
            } else {
                format!(
                    "you are a sub-agent at depth {depth} and sub-agents may nest at most {max_depth} deep, so you \
                     cannot start one: do the task yourself, or say in your report what should be delegated"
                )
            }));
        }
        let started = inner.children.all().len();
        if started >= inner.config.max_children {
            return Err(ToolError::failed(format!(
                "this conversation already started {started} sub-agents, the most it may: message a finished one \
                 with send_message, or do the task yourself"
            )));
        }
        let task = ChildTask {
            description: args.description.trim().to_string(),
            mode: args.mode,
            parent: self.set.session_id(),
            tools: self.set.child_toolset(),
        };
        let conv = runner.start(&task).map_err(|e| ToolError::failed(format!("the sub-agent could not start: {e}")))?;
        let id = conv.id().to_string();
        task.tools.set_session_id(id.clone());
        let child = inner.children.add(id.clone(), task.description.clone(), args.background, task.tools.clone());
        let reports = Some(std::sync::Arc::downgrade(&inner.children));
        if args.background {
            let cancel = inner.children.stop.child_token();
            tokio::spawn(agents::drive(child, conv, args.prompt, cancel, reports));
            return Ok(ToolOutput::text(format!(
                "Sub-agent {id} started in the background on \"{}\". It reports when it settles; meanwhile use \
                 agent_status (wait: true blocks until it settles) and send_message.",
                task.description
            ))
            .with_meta(json!({ "agent_id": id, "background": true })));
        }
        // The child runs in its own task, so it settles (as cancelled) even when this call's
        // future is dropped; it stops with this call's cancellation (G6), with the call itself
        // (the guard), and with the host's stop of all children.
        let cancel = inner.children.stop.child_token();
        let _stop_with_call = cancel.clone().drop_guard();
        let (call, link) = (cx.cancel.clone(), cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = call.cancelled() => link.cancel(),
                _ = link.cancelled() => {}
            }
        });
        let report = tokio::spawn(agents::drive(child, conv, args.prompt, cancel, None))
            .await
            .map_err(|e| ToolError::failed(format!("sub-agent {id} failed: {e}")))?;
        if report.status == ChildStatus::Cancelled {
            return Err(ToolError::Cancelled);
        }
        let out = ToolOutput::text(agents::report_text(&id, &report)).with_meta(
            json!({ "agent_id": id, "background": false, "status": format!("{:?}", report.status).to_lowercase() }),
        );
        Ok(if report.status == ChildStatus::Completed {
            out
        } else {
            ToolOutput { status: kodik_core::ToolStatus::Error, ..out }
        })
    }
}

// ---------------------------------------------------------------------------------------------

tool_struct!(
    /// `send_message` (A5).
    SendMessageTool,
    SendMessageArgs
);

#[async_trait]
impl TypedTool for SendMessageTool {
    type Args = SendMessageArgs;

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check(&self, args: &SendMessageArgs) -> Result<(), ToolError> {
        args.check()
    }

    async fn run(&self, args: SendMessageArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let inner = &self.set.inner;
        let id = args.agent_id.as_deref().map(str::trim).unwrap_or_default();
        let to_parent = args.parent || inner.parent.as_ref().is_some_and(|p| p.id == id);
        if to_parent {
            let Some(link) = &inner.parent else {
                return Err(ToolError::failed(
                    "this conversation is not a sub-agent, so it has no parent to message: name a sub-agent or \
                     conversation with agent_id",
                ));
            };
            link.send(&args.message)
                .map_err(|e| ToolError::failed(format!("{e}: put what it needs in your final answer")))?;
            return Ok(ToolOutput::text(format!(
                "Message delivered to your parent {}: it reads it before its next model request. Go on with your task; \
                 your final answer is still your report.",
                link.id
            ))
            .with_meta(json!({ "agent_id": link.id, "delivered": "parent" })));
        }
        let Some(child) = inner.children.get(id) else {
            if inner.parent.is_some() {
                // A5: never child → child, so a sub-agent reaches only its parent and its own sub-agents.
                return Err(ToolError::failed(format!(
                    "`{id}` is not a sub-agent you started, and a sub-agent may message only its parent (parent: \
                     true) and its own sub-agents, never its siblings or other conversations: tell your parent in \
                     your report or with send_message parent: true"
                )));
            }
            return self.to_conversation(id, &args.message, cx);
        };
        let last = match agents::queue_or_claim(&child, &args.message) {
            agents::Delivery::Queued => {
                return Ok(ToolOutput::text(format!(
                    "Message queued for sub-agent {id}: it is working and reads it before its next model request."
                ))
                .with_meta(json!({ "agent_id": id, "delivered": "queued" })));
            }
            agents::Delivery::Claimed(last) => last,
        };
        let resumed = inner.runner.get().ok_or_else(no_runner).and_then(|runner| {
            runner
                .resume(id, &child.tools)
                .map_err(|e| ToolError::failed(format!("sub-agent {id} could not be resumed: {e}")))
        });
        let conv = match resumed {
            Ok(conv) => conv,
            Err(e) => {
                child.state.send_replace(ChildState::Settled(last));
                return Err(e);
            }
        };
        let cancel = inner.children.stop.child_token();
        let reports = Some(std::sync::Arc::downgrade(&inner.children));
        tokio::spawn(agents::drive(child, conv, args.message, cancel, reports));
        Ok(ToolOutput::text(format!(
            "Sub-agent {id} resumed its saved conversation with your message; it reports when it settles \
             (agent_status with wait: true blocks until then)."
        ))
        .with_meta(json!({ "agent_id": id, "delivered": "resumed" })))
    }
}

impl SendMessageTool {
    /// A message to a conversation that is not one of ours (A5). An open one, here or in
    /// another process, finds it in its mailbox before its next model request. A closed one is
    /// resumed from its transcript and works on the message at once; it is then followed like
    /// a background sub-agent.
    fn to_conversation(&self, id: &str, message: &str, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let inner = &self.set.inner;
        let me = self.set.session_id();
        let store = self.set.store_for(&root(cx));
        if id == me {
            return Err(ToolError::failed(format!("`{id}` is this conversation's own id: name another conversation")));
        }
        let info = store.get(id).ok().flatten();
        let Some(info) = info else {
            let known: Vec<String> = inner.children.all().iter().map(|c| c.id.clone()).collect();
            let known =
                if known.is_empty() { "you started none".to_string() } else { format!("yours: {}", known.join(", ")) };
            return Err(ToolError::failed(format!(
                "`{id}` is neither a sub-agent of this conversation ({known}) nor another conversation: list them \
                 with agent_status scope `all`"
            )));
        };
        let title = if info.title.is_empty() { id.to_string() } else { info.title.clone() };
        if info.is_open() {
            let letter = crate::store::Letter { from: me, message: message.trim().to_string(), sent: now_secs() };
            store.post(id, &letter).map_err(|e| ToolError::failed(e.to_string()))?;
            return Ok(ToolOutput::text(format!(
                "Message left for conversation {id} (\"{title}\", {}): it reads it before its next model request. \
                 Its answer, if any, comes to you as a message.",
                state_name(info.status)
            ))
            .with_meta(json!({ "agent_id": id, "delivered": "mailbox" })));
        }
        let runner = inner.runner.get().ok_or_else(|| {
            // A host without a model (kodik serve, call, batch) cannot run it: say so, and how
            // the user can, rather than the sub-agent refusal the model never asked for.
            ToolError::failed(format!(
                "conversation {id} (\"{title}\") is closed, and this host has no model to resume it with, so \
                 the message was not delivered: tell the user to resume it with `kodik agent --resume {id} \
                 \"<message>\"`"
            ))
        })?;
        let tools = self.set.child_toolset();
        tools.set_session_id(id);
        let conv = runner
            .resume(id, &tools)
            .map_err(|e| ToolError::failed(format!("conversation {id} could not be resumed: {e}")))?;
        let child = inner.children.add(id.to_string(), format!("conversation: {title}"), true, tools);
        let cancel = inner.children.stop.child_token();
        let reports = Some(std::sync::Arc::downgrade(&inner.children));
        tokio::spawn(agents::drive(child, conv, message.to_string(), cancel, reports));
        Ok(ToolOutput::text(format!(
            "Conversation {id} (\"{title}\") was closed; it resumed with your message and reports when it settles \
             (agent_status with its id and wait: true blocks until then)."
        ))
        .with_meta(json!({ "agent_id": id, "delivered": "resumed_conversation" })))
    }
}
