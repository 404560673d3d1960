//! Publishes an agent's conversations to a [`ConversationStore`], so `agent_status` in any
//! other process lists them with their mode, model, workspace, activity and context fill (A4).

use std::path::PathBuf;
use std::sync::Arc;

use kodik_agent::{Agent, AgentEvent};
use kodik_conversation::store::now_secs;
use kodik_conversation::{ConversationStore, SessionInfo};
use kodik_schema::agent::SessionState;
use tokio::sync::broadcast::error::RecvError;

/// How many of a conversation's last messages are kept in its entry.
const LAST_MESSAGES: usize = 3;

/// Follows `agent`'s events and keeps one entry per conversation in `store`: running while a
/// run is under way, idle after it, closed when the agent is gone. Store errors are skipped
/// (the listing is informational; the run never waits for it). The task ends with the agent.
pub fn publish_sessions(
    agent: &Agent,
    store: Arc<dyn ConversationStore>,
    workspace: PathBuf,
) -> tokio::task::JoinHandle<()> {
    let mut events = agent.subscribe();
    let window = agent.config().context_window.max(1);
    tokio::spawn(async move {
        let mut current: Option<SessionInfo> = None;
        loop {
            let event = match events.recv().await {
                Ok(e) => e,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break,
            };
            let changed = match (event, current.as_mut()) {
                (AgentEvent::SessionStarted { session_id, model, mode, .. }, _) => {
                    let previous = store.get(&session_id).ok().flatten();
                    current = Some(SessionInfo {
                        mode: Some(mode),
                        model: Some(model),
                        workspace: Some(workspace.clone()),
                        // Lets senders tell an open conversation from one a crash left "running".
                        pid: Some(std::process::id()),
                        ..previous.unwrap_or_else(|| SessionInfo::new(session_id))
                    });
                    true
                }
                (AgentEvent::TurnStarted { .. }, Some(info)) => {
                    info.status = SessionState::Running;
                    true
                }
                // The title is what the user asked for (the first line of the task), so
                // agent_status's `query` finds a conversation by its task.
                (AgentEvent::UserMessage { text }, Some(info)) if info.title.is_empty() => {
                    info.title = title_of(&text);
                    true
                }
                (AgentEvent::AssistantMessage { text }, Some(info)) if !text.trim().is_empty() => {
                    if info.title.is_empty() {
                        info.title = title_of(&text);
                    }
                    info.last_messages.push(text);
                    let extra = info.last_messages.len().saturating_sub(LAST_MESSAGES);
                    info.last_messages.drain(..extra);
                    true
                }
                (AgentEvent::TurnCompleted { usage, .. }, Some(info)) => {
                    info.context_fill = Some((usage.input_tokens + usage.output_tokens) as f32 / window as f32);
                    true
                }
                (AgentEvent::RunFinished { .. }, Some(info)) => {
                    info.status = SessionState::Idle;
                    true
                }
                _ => false,
            };
            if changed && let Some(info) = current.as_mut() {
                info.last_activity = now_secs();
                let _ = store.put(info);
            }
        }
        if let Some(info) = current.as_mut() {
            info.status = SessionState::Closed;
            info.last_activity = now_secs();
            let _ = store.put(info);
        }
    })
}

/// A conversation's title from a message: its first non-empty line, at most 80 characters.
fn title_of(text: &str) -> String {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().chars().take(80).collect()
}
