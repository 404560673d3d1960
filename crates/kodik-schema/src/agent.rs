//! Argument types of the conversation tools (SPEC A1–A7): `todo_write`, `memory`, `sub_agent`,
//! `agent_status`, `send_message`, `ask_questions`, `check_understanding`, `create_lesson` and
//! `generate_plan`.
//!
//! Each struct has a `check` for the rules a JSON Schema cannot express (one field or another,
//! an index within a list). Rules that need stored state — that a status-only todo update names
//! an existing id (A1), that a sub-agent id exists — belong to the tool.

use std::collections::HashSet;

use kodik_core::{Effect, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolArgs, invalid_input, spec};

/// The specs of the conversation tools.
pub fn specs() -> Vec<ToolSpec> {
    vec![
        spec::<TodoWriteArgs>(),
        spec::<MemoryArgs>(),
        spec::<SubAgentArgs>(),
        spec::<AgentStatusArgs>(),
        spec::<SendMessageArgs>(),
        spec::<AskQuestionsArgs>(),
        spec::<CheckUnderstandingArgs>(),
        spec::<CreateLessonArgs>(),
        spec::<GeneratePlanArgs>(),
    ]
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

// ---------------------------------------------------------------------------------------------
// todo_write
// ---------------------------------------------------------------------------------------------

/// The state of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on now (keep one item in progress at a time).
    InProgress,
    /// Done.
    Completed,
    /// No longer needed.
    Cancelled,
}

/// One item to create or update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// The item's id. Required to update an existing item (a status-only change must name an
    /// existing id); a new item may omit it and gets one.
    pub id: Option<String>,
    /// A short, imperative title, e.g. `Add the migration`. Required for a new item.
    pub title: Option<String>,
    /// The item's state; a new item without one is `pending`.
    pub status: Option<TodoStatus>,
}

/// Arguments of `todo_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteArgs {
    /// The items to create or update, several per call.
    pub todos: Vec<TodoItem>,
    /// true: update the stored list by `id` and add new items, leaving the others as they are.
    /// false (default): replace the whole list with `todos`.
    #[serde(default)]
    pub merge: bool,
}

impl TodoWriteArgs {
    /// Checks the rules that need no stored list: items are not empty, new items have a title,
    /// ids are unique within the call. An error leaves the stored list unchanged (A1).
    pub fn check(&self) -> Result<(), ToolError> {
        if self.todos.is_empty() {
            return Err(invalid_input(Self::NAME, "todos", "`todos` is empty: give at least one item"));
        }
        let mut seen = HashSet::new();
        for (i, item) in self.todos.iter().enumerate() {
            if let Some(id) = &item.id {
                if blank(id) {
                    return Err(invalid_input(Self::NAME, &format!("todos[{i}].id"), "an id cannot be empty"));
                }
                if !seen.insert(id.as_str()) {
                    return Err(invalid_input(
                        Self::NAME,
                        &format!("todos[{i}].id"),
                        format!("id `{id}` appears twice in this call; give each item once"),
                    ));
                }
            }
            if item.title.as_deref().is_some_and(blank) {
                return Err(invalid_input(Self::NAME, &format!("todos[{i}].title"), "a title cannot be empty"));
            }
            let new_item = !self.merge || item.id.is_none();
            if new_item && item.title.is_none() {
                let why = if self.merge {
                    "a new item (no `id`) needs a `title`"
                } else {
                    "without `merge` the list is replaced, so every item needs a `title`"
                };
                return Err(invalid_input(Self::NAME, &format!("todos[{i}].title"), why));
            }
            if self.merge && item.id.is_some() && item.title.is_none() && item.status.is_none() {
                return Err(invalid_input(
                    Self::NAME,
                    &format!("todos[{i}]"),
                    "this update changes nothing: give a new `status` or `title`",
                ));
            }
        }
        Ok(())
    }
}

impl ToolArgs for TodoWriteArgs {
    const NAME: &'static str = "todo_write";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Create and update the task list for work of three or more steps, several items \
per call. With `merge: true`, items with an existing `id` are updated (a status-only change needs the id) and items \
without an id are added (they need a `title`); with `merge: false` the list is replaced. Mark an item in_progress \
when you start it and completed as soon as it is done. An invalid update changes nothing and returns an error.";
}

// ---------------------------------------------------------------------------------------------
// memory
// ---------------------------------------------------------------------------------------------

/// What `memory` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryAction {
    /// Save a new note (`content`).
    #[default]
    Save,
    /// Replace the note `id` with `content`.
    Update,
    /// Delete the note `id`.
    Delete,
    /// List the notes of `scope` with their ids.
    List,
}

/// Where a note is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryScope {
    /// This workspace: project facts, conventions, commands (the default).
    #[default]
    Workspace,
    /// Every workspace: the user's general preferences.
    Global,
    /// The current task only: notes to keep across context compaction.
    Session,
}

/// Arguments of `memory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryArgs {
    /// What to do (default `save`).
    #[serde(default)]
    pub action: MemoryAction,
    /// Which memory (default `workspace`).
    #[serde(default)]
    pub scope: MemoryScope,
    /// The note, for `save` and `update`: one self-contained fact or preference.
    pub content: Option<String>,
    /// The note's id (from `list` or an earlier save), for `update` and `delete`.
    pub id: Option<String>,
}

impl MemoryArgs {
    /// Checks that the action has what it needs.
    pub fn check(&self) -> Result<(), ToolError> {
        let needs_content = matches!(self.action, MemoryAction::Save | MemoryAction::Update);
        let needs_id = matches!(self.action, MemoryAction::Update | MemoryAction::Delete);
        if needs_id && self.id.as_deref().is_none_or(blank) {
            return Err(invalid_input(Self::NAME, "id", "this action needs the note's `id` (see action `list`)"));
        }
        if needs_content && self.content.as_deref().is_none_or(blank) {
            return Err(invalid_input(Self::NAME, "content", "this action needs `content`: the note's text"));
        }
        if !needs_content && self.content.is_some() {
            return Err(invalid_input(Self::NAME, "content", "`content` is only for `save` and `update`"));
        }
        if !needs_id && self.id.is_some() {
            return Err(invalid_input(Self::NAME, "id", "`id` is only for `update` and `delete`"));
        }
        Ok(())
    }
}

impl ToolArgs for MemoryArgs {
    const NAME: &'static str = "memory";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Save notes that outlast this conversation: `workspace` memory for project facts \
and conventions, `global` memory for the user's general preferences, `session` memory for the current task (kept \
across context compaction). Save one self-contained fact per note; update or delete outdated notes by id.";
}

// ---------------------------------------------------------------------------------------------
// sub_agent
// ---------------------------------------------------------------------------------------------

/// A conversation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// Write and change code.
    Code,
    /// Find and fix a bug.
    Debug,
    /// Research and plan without changing files.
    Plan,
    /// Answer questions without changing files.
    Ask,
    /// Teach.
    Educator,
}

/// Arguments of `sub_agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubAgentArgs {
    /// A short name of the task (3–6 words), shown to the user and by agent_status.
    pub description: String,
    /// The complete task. The sub-agent sees nothing of this conversation: give the goal, the
    /// relevant paths and facts, the constraints, and what to report back.
    pub prompt: String,
    /// true: return at once with the sub-agent's id; it reports when it settles (check it with
    /// agent_status, talk to it with send_message). false (default): wait for its report.
    #[serde(default)]
    pub background: bool,
    /// The sub-agent's mode (default: this conversation's mode).
    pub mode: Option<AgentMode>,
}

impl SubAgentArgs {
    /// Checks that the task is not empty.
    pub fn check(&self) -> Result<(), ToolError> {
        if blank(&self.description) {
            return Err(invalid_input(
                Self::NAME,
                "description",
                "`description` is empty: name the task in a few words",
            ));
        }
        if blank(&self.prompt) {
            return Err(invalid_input(Self::NAME, "prompt", "`prompt` is empty: describe the whole task"));
        }
        Ok(())
    }
}

impl ToolArgs for SubAgentArgs {
    const NAME: &'static str = "sub_agent";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Delegate a self-contained subtask to a sub-agent with its own context, e.g. a \
broad search or an independent change, so this conversation keeps only the result. Write a complete `prompt`: the \
sub-agent sees nothing of this conversation. With `background: true` the call returns at once with the sub-agent's \
id and the sub-agent reports back when it settles; meanwhile use agent_status and send_message. Independent \
sub-agents can run in parallel.";
}

// ---------------------------------------------------------------------------------------------
// agent_status
// ---------------------------------------------------------------------------------------------

/// What `agent_status` lists when no `agent_id` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusScope {
    /// The background sub-agents of this conversation (the default).
    Agents,
    /// Other conversations, open and closed.
    Sessions,
    /// Both.
    All,
    /// This conversation: session id, title, mode, model, workspace, context fill, goal status.
    #[serde(rename = "self")]
    Current,
}

/// A conversation's state, to filter lists by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Working now.
    Running,
    /// Open, waiting for input.
    Idle,
    /// Closed.
    Closed,
}

/// Arguments of `agent_status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentStatusArgs {
    /// A background sub-agent's id (from sub_agent) for its status, goal and elapsed time, or
    /// another conversation's session id for its recent activity. Omit it to list.
    #[serde(alias = "id")]
    pub agent_id: Option<String>,
    /// What to list when `agent_id` is omitted (default `agents`).
    pub scope: Option<StatusScope>,
    /// Only conversations in this state (for `sessions` and `all`).
    pub status: Option<SessionState>,
    /// Only conversations active within this many minutes (for `sessions` and `all`).
    #[schemars(range(min = 1))]
    pub active_within_minutes: Option<u32>,
    /// Only conversations of this workspace, by folder path or name (for `sessions` and `all`).
    pub workspace: Option<String>,
    /// Only conversations whose title or content mentions these words (for `sessions` and `all`).
    pub query: Option<String>,
    /// At most this many entries (default 20).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
    /// Skip this many entries, to page through a long list (default 0).
    pub offset: Option<u32>,
    /// With `agent_id` of a sub-agent: block until it settles and return its full report.
    #[serde(default)]
    pub wait: bool,
}

impl AgentStatusArgs {
    /// Checks that the filters fit together.
    pub fn check(&self) -> Result<(), ToolError> {
        if let Some(id) = &self.agent_id {
            if blank(id) {
                return Err(invalid_input(Self::NAME, "agent_id", "`agent_id` is empty; omit it to list"));
            }
            if self.scope.is_some() {
                return Err(invalid_input(
                    Self::NAME,
                    "scope",
                    "`scope` chooses what to list; with `agent_id` nothing is listed, so give one or the other",
                ));
            }
        } else if self.wait {
            return Err(invalid_input(Self::NAME, "wait", "`wait` needs the `agent_id` of the sub-agent to wait for"));
        }
        if self.limit == Some(0) {
            return Err(invalid_input(Self::NAME, "limit", "`limit` must be at least 1"));
        }
        let lists_sessions =
            self.agent_id.is_none() && matches!(self.scope, Some(StatusScope::Sessions | StatusScope::All));
        let filters = [
            ("status", self.status.is_some()),
            ("active_within_minutes", self.active_within_minutes.is_some()),
            ("workspace", self.workspace.is_some()),
            ("query", self.query.is_some()),
        ];
        if !lists_sessions && let Some((name, _)) = filters.iter().find(|(_, set)| *set) {
            return Err(invalid_input(
                Self::NAME,
                name,
                format!("`{name}` filters the list of conversations: use it with `scope: \"sessions\"` or `\"all\"`"),
            ));
        }
        Ok(())
    }
}

impl ToolArgs for AgentStatusArgs {
    const NAME: &'static str = "agent_status";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Check on background sub-agents and other conversations. Without `agent_id` it \
lists this conversation's background sub-agents; `scope: \"sessions\"` lists other conversations (open and closed) \
instead and `\"all\"` both, narrowed by `status` (running, idle, closed), `active_within_minutes`, `workspace` and \
`query` and paged with `limit` and `offset`; `scope: \"self\"` describes this conversation (session id, title, mode, \
model, workspace, context fill, goal). With a sub-agent's `agent_id` it reports its status, goal and elapsed time, \
and `wait: true` blocks until it settles and returns its full report; with a conversation's id it reports its recent \
activity. Completion is reported to you automatically, so poll only when you need to.";
}

// ---------------------------------------------------------------------------------------------
// send_message
// ---------------------------------------------------------------------------------------------

/// Arguments of `send_message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageArgs {
    /// The recipient: a background sub-agent's id (running, or finished recently: it resumes its
    /// saved conversation), or another conversation's session id (a closed one starts working on
    /// the message at once). Omit it when `parent` is true.
    pub agent_id: Option<String>,
    /// true: send to the agent that started you (only a sub-agent has one).
    #[serde(default)]
    pub parent: bool,
    /// The message, complete enough to act on without this conversation.
    pub message: String,
}

impl SendMessageArgs {
    /// Checks that exactly one recipient is named and the message is not empty.
    pub fn check(&self) -> Result<(), ToolError> {
        match (&self.agent_id, self.parent) {
            (Some(_), true) => {
                return Err(invalid_input(
                    Self::NAME,
                    "parent",
                    "name one recipient: `agent_id` or `parent: true`, not both",
                ));
            }
            (None, false) => {
                return Err(invalid_input(
                    Self::NAME,
                    "agent_id",
                    "no recipient: give `agent_id` (a sub-agent or conversation id) or `parent: true`",
                ));
            }
            (Some(id), false) if blank(id) => {
                return Err(invalid_input(Self::NAME, "agent_id", "`agent_id` is empty"));
            }
            _ => {}
        }
        if blank(&self.message) {
            return Err(invalid_input(Self::NAME, "message", "`message` is empty"));
        }
        Ok(())
    }
}

impl ToolArgs for SendMessageArgs {
    const NAME: &'static str = "send_message";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Send a message to a background sub-agent you started (`agent_id`; a finished \
one resumes its saved conversation), to your parent agent (`parent: true`, from a sub-agent), or to another \
conversation by its session id (a closed one starts working on it at once, as on a user message). Sub-agents cannot \
message each other.";
}

// ---------------------------------------------------------------------------------------------
// ask_questions
// ---------------------------------------------------------------------------------------------

/// One answer the user can pick.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionOption {
    /// The answer, a few words.
    pub label: String,
    /// What choosing it means, in one line.
    pub description: Option<String>,
}

/// One question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The question, one short sentence.
    pub question: String,
    /// The answers to choose from. The user may also answer in their own words or skip.
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen (default false).
    #[serde(default)]
    pub allow_multiple: bool,
}

/// Arguments of `ask_questions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskQuestionsArgs {
    /// The questions, fewest that settle the ambiguity (at most 5).
    pub questions: Vec<Question>,
}

impl AskQuestionsArgs {
    /// Checks that there are 1–5 non-empty questions with non-empty, distinct option labels.
    pub fn check(&self) -> Result<(), ToolError> {
        if self.questions.is_empty() || self.questions.len() > 5 {
            return Err(invalid_input(
                Self::NAME,
                "questions",
                format!("ask 1 to 5 questions (got {})", self.questions.len()),
            ));
        }
        for (i, q) in self.questions.iter().enumerate() {
            if blank(&q.question) {
                return Err(invalid_input(Self::NAME, &format!("questions[{i}].question"), "the question is empty"));
            }
            let mut labels = HashSet::new();
            for (j, o) in q.options.iter().enumerate() {
                let field = format!("questions[{i}].options[{j}].label");
                if blank(&o.label) {
                    return Err(invalid_input(Self::NAME, &field, "an option's label is empty"));
                }
                if !labels.insert(o.label.trim()) {
                    return Err(invalid_input(Self::NAME, &field, format!("option `{}` appears twice", o.label)));
                }
            }
        }
        Ok(())
    }
}

impl ToolArgs for AskQuestionsArgs {
    const NAME: &'static str = "ask_questions";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Ask the user short clarifying questions when an ambiguity would change what you \
build. Offer options, each with a one-line explanation; the user answers with an option, in their own words, or \
skips. Questions left untouched for a minute are skipped: then go on with your best judgement and state the \
assumptions you made. Do not ask what you can find out yourself.";
}

// ---------------------------------------------------------------------------------------------
// check_understanding
// ---------------------------------------------------------------------------------------------

/// One comprehension question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuizQuestion {
    /// The question.
    pub question: String,
    /// Answer choices. Omit them for an open question the learner answers in words.
    #[serde(default)]
    pub options: Vec<String>,
    /// The 0-based index in `options` of the correct answer (with `options`).
    pub correct_option: Option<u32>,
    /// Shown after the answer: why the correct answer is correct.
    pub explanation: Option<String>,
}

/// Arguments of `check_understanding`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckUnderstandingArgs {
    /// What is being checked, e.g. `Rust ownership and borrowing`.
    pub topic: String,
    /// 1 to 5 short questions.
    pub questions: Vec<QuizQuestion>,
}

impl CheckUnderstandingArgs {
    /// Checks that there are 1–5 questions and each correct answer is one of its options.
    pub fn check(&self) -> Result<(), ToolError> {
        if blank(&self.topic) {
            return Err(invalid_input(Self::NAME, "topic", "`topic` is empty"));
        }
        if self.questions.is_empty() || self.questions.len() > 5 {
            return Err(invalid_input(
                Self::NAME,
                "questions",
                format!("give 1 to 5 questions (got {})", self.questions.len()),
            ));
        }
        for (i, q) in self.questions.iter().enumerate() {
            if blank(&q.question) {
                return Err(invalid_input(Self::NAME, &format!("questions[{i}].question"), "the question is empty"));
            }
            match (q.options.len(), q.correct_option) {
                (0, Some(_)) => {
                    return Err(invalid_input(
                        Self::NAME,
                        &format!("questions[{i}].correct_option"),
                        "`correct_option` needs `options`",
                    ));
                }
                (1, _) => {
                    return Err(invalid_input(
                        Self::NAME,
                        &format!("questions[{i}].options"),
                        "a choice needs at least 2 options (or none, for an open question)",
                    ));
                }
                (n, Some(c)) if c as usize >= n => {
                    return Err(invalid_input(
                        Self::NAME,
                        &format!("questions[{i}].correct_option"),
                        format!("`correct_option` is {c}, but the options are numbered 0 to {}", n - 1),
                    ));
                }
                (n, None) if n > 0 => {
                    return Err(invalid_input(
                        Self::NAME,
                        &format!("questions[{i}].correct_option"),
                        "a question with options needs `correct_option`",
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl ToolArgs for CheckUnderstandingArgs {
    const NAME: &'static str = "check_understanding";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Educator mode: run a short comprehension check on what you just explained, \
with 1 to 5 questions (multiple choice with the correct option and an explanation, or open). The learner's answers \
come back so you can fill the gaps.";
}

// ---------------------------------------------------------------------------------------------
// create_lesson
// ---------------------------------------------------------------------------------------------

/// Arguments of `create_lesson`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateLessonArgs {
    /// The lesson's title.
    pub title: String,
    /// The whole lesson as one self-contained HTML document (inline CSS and JavaScript, no
    /// external resources): explanations, examples and interactive exercises.
    pub html: String,
}

impl CreateLessonArgs {
    /// Checks that the lesson has a title and content.
    pub fn check(&self) -> Result<(), ToolError> {
        if blank(&self.title) {
            return Err(invalid_input(Self::NAME, "title", "`title` is empty"));
        }
        if blank(&self.html) {
            return Err(invalid_input(Self::NAME, "html", "`html` is empty: give the whole lesson document"));
        }
        Ok(())
    }
}

impl ToolArgs for CreateLessonArgs {
    const NAME: &'static str = "create_lesson";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Educator mode: build an interactive HTML lesson and open it in the browser. Give \
one self-contained HTML document (inline CSS and JavaScript, no external resources) with explanations, examples and \
exercises the learner can try.";
}

// ---------------------------------------------------------------------------------------------
// generate_plan
// ---------------------------------------------------------------------------------------------

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// What the step does, in one line.
    pub title: String,
    /// How: the approach, the functions or types involved, risks (Markdown).
    pub details: Option<String>,
    /// The files the step creates or changes, relative to the workspace.
    #[serde(default)]
    pub files: Vec<String>,
}

/// Arguments of `generate_plan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GeneratePlanArgs {
    /// The plan's title.
    pub title: String,
    /// The goal, the chosen approach and why, in a few paragraphs of Markdown.
    pub summary: String,
    /// The steps in the order to carry them out.
    pub steps: Vec<PlanStep>,
    /// What could go wrong or is still uncertain, one line each, for the reviewer to weigh.
    #[serde(default)]
    pub risks: Vec<String>,
}

impl GeneratePlanArgs {
    /// Checks that the plan has a title, a summary and at least one titled step.
    pub fn check(&self) -> Result<(), ToolError> {
        if blank(&self.title) {
            return Err(invalid_input(Self::NAME, "title", "`title` is empty"));
        }
        if blank(&self.summary) {
            return Err(invalid_input(Self::NAME, "summary", "`summary` is empty: state the goal and the approach"));
        }
        if self.steps.is_empty() {
            return Err(invalid_input(Self::NAME, "steps", "a plan needs at least one step"));
        }
        if let Some(i) = self.steps.iter().position(|s| blank(&s.title)) {
            return Err(invalid_input(Self::NAME, &format!("steps[{i}].title"), "the step's title is empty"));
        }
        if let Some(i) = self.risks.iter().position(|r| blank(r)) {
            return Err(invalid_input(Self::NAME, &format!("risks[{i}]"), "a risk is empty: leave it out"));
        }
        Ok(())
    }
}

impl ToolArgs for GeneratePlanArgs {
    const NAME: &'static str = "generate_plan";
    const EFFECT: Effect = Effect::Conversation;
    const DESCRIPTION: &'static str = "Plan mode: present a reviewable implementation plan — a title, a summary of the \
goal and the approach, and ordered steps, each with details and the files it touches, and the risks. Research first (read, search); \
the user reviews the plan before anything is changed.";
}
