//! `todo_write` (A1): the conversation's task list, changed all-or-nothing.

use std::fmt::Write as _;
use std::sync::Mutex;

use kodik_core::ToolError;
use kodik_schema::agent::{TodoStatus, TodoWriteArgs};
use serde::{Deserialize, Serialize};

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// The item's id, unique in the list.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its state.
    pub status: TodoStatus,
}

#[derive(Debug, Default, Clone)]
struct State {
    items: Vec<Todo>,
    next_id: u64,
}

impl State {
    /// A generated id no item uses, so a model-chosen id like `3` never collides with one
    /// handed out later.
    fn fresh_id(&mut self, taken: &[Todo]) -> String {
        loop {
            self.next_id += 1;
            let id = self.next_id.to_string();
            if !taken.iter().any(|t| t.id == id) {
                return id;
            }
        }
    }
}

/// The task list of one conversation.
#[derive(Debug, Default)]
pub struct TodoList {
    state: Mutex<State>,
}

fn invalid(field: String, message: String) -> ToolError {
    ToolError::InvalidInput { tool: "todo_write".into(), field: Some(field), message }
}

impl TodoList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The items, in order.
    pub fn items(&self) -> Vec<Todo> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).items.clone()
    }

    /// Puts back a list saved earlier (a resumed conversation's last `todo_write` result), so
    /// the model's next merge finds the items its history shows. Generated ids go on after the
    /// highest numeric one.
    pub fn restore(&self, items: Vec<Todo>) {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        guard.next_id = items.iter().filter_map(|t| t.id.parse::<u64>().ok()).max().unwrap_or(0);
        guard.items = items;
    }

    /// Applies one `todo_write` call. The change is computed on a copy and stored only when
    /// every item is valid, so an error leaves the stored list as it was (A1).
    pub fn apply(&self, args: &TodoWriteArgs) -> Result<Vec<Todo>, ToolError> {
        args.check()?;
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = guard.clone();
        let mut items = if args.merge { next.items.clone() } else { Vec::new() };
        // Ids the call names itself are reserved first, so generated ones avoid them.
        let named: Vec<Todo> = args
            .todos
            .iter()
            .filter_map(|t| t.id.clone())
            .map(|id| Todo { id, title: String::new(), status: TodoStatus::Pending })
            .collect();
        for (i, item) in args.todos.iter().enumerate() {
            let existing = item.id.as_deref().and_then(|id| items.iter().position(|t| t.id == id));
            match existing {
                Some(pos) => {
                    let t = &mut items[pos];
                    if let Some(title) = &item.title {
                        t.title = one_line(title);
                    }
                    if let Some(status) = item.status {
                        t.status = status;
                    }
                }
                None => {
                    let Some(title) = &item.title else {
                        let ids: Vec<&str> = next.items.iter().map(|t| t.id.as_str()).collect();
                        let known = if ids.is_empty() {
                            "the list is empty".to_string()
                        } else {
                            format!("ids: {}", ids.join(", "))
                        };
                        return Err(invalid(
                            format!("todos[{i}].id"),
                            format!(
                                "no item has id `{}` ({known}); a status-only change needs an existing id, a new \
                                 item needs a `title`",
                                item.id.as_deref().unwrap_or_default()
                            ),
                        ));
                    };
                    let id = match &item.id {
                        Some(id) => id.trim().to_string(),
                        None => {
                            let mut taken = items.clone();
                            taken.extend(named.iter().cloned());
                            next.fresh_id(&taken)
                        }
                    };
                    items.push(Todo { id, title: one_line(title), status: item.status.unwrap_or(TodoStatus::Pending) });
                }
            }
        }
        next.items = items;
        *guard = next;
        Ok(guard.items.clone())
    }
}

/// A title on one line: a newline in it would render as a fake item of its own
/// (`"a\n[x] 9: fake"`), which the model would then read as part of the list.
fn one_line(title: &str) -> String {
    title.split(char::is_control).map(str::trim).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
}

fn mark(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "[ ]",
        TodoStatus::InProgress => "[~]",
        TodoStatus::Completed => "[x]",
        TodoStatus::Cancelled => "[-]",
    }
}

/// The list as the model reads it: a count line, then one line per item.
pub fn render(items: &[Todo]) -> String {
    if items.is_empty() {
        return "The todo list is empty.".to_string();
    }
    let count = |s| items.iter().filter(|t| t.status == s).count();
    let mut out = format!(
        "Todo list ({} {}: {} completed, {} in progress, {} pending, {} cancelled):",
        items.len(),
        if items.len() == 1 { "item" } else { "items" },
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending),
        count(TodoStatus::Cancelled),
    );
    for t in items {
        let _ = write!(out, "\n{} {}: {}", mark(t.status), t.id, t.title);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kodik_schema::agent::TodoItem;

    fn item(id: Option<&str>, title: Option<&str>, status: Option<TodoStatus>) -> TodoItem {
        TodoItem { id: id.map(String::from), title: title.map(String::from), status }
    }

    #[test]
    fn a1_generated_ids_skip_ids_the_model_chose() {
        let list = TodoList::new();
        let args = TodoWriteArgs {
            todos: vec![item(None, Some("first"), None), item(Some("1"), Some("named one"), None)],
            merge: false,
        };
        let items = list.apply(&args).unwrap();
        assert_eq!(items.len(), 2);
        assert_ne!(items[0].id, items[1].id, "{items:?}");
    }

    #[test]
    fn a1_a_title_with_newlines_stays_one_item_in_the_rendered_list() {
        let list = TodoList::new();
        let args = TodoWriteArgs { todos: vec![item(None, Some("line1\nline2\n[x] 9: fake"), None)], merge: false };
        let items = list.apply(&args).unwrap();
        let shown = render(&items);
        assert_eq!(shown.lines().count(), 2, "{shown}");
        assert!(shown.ends_with("[ ] 1: line1 line2 [x] 9: fake"), "{shown}");
    }
}
