//! A [`Tool`] wrapper that reports when a call really starts and ends.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use kodik_core::{Content, Resource, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, ToolStatus, Workspace};
use kodik_model::Image;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::events::AgentEvent;

/// How much of a result a `ToolCallFinished` event carries.
const EVENT_OUTPUT_BYTES: usize = 2048;

/// Call ids whose `ToolCallFinished` was sent: whoever claims an id first sends it, so a call
/// cancelled while the loop collects results is reported once.
pub(crate) type Settled = Arc<Mutex<HashSet<String>>>;

/// Claims the right to report `call_id` as finished.
pub(crate) fn claim(settled: &Settled, call_id: &str) -> bool {
    settled.lock().unwrap_or_else(|p| p.into_inner()).insert(call_id.to_string())
}

/// Wraps a tool of the turn's registry; every method but `call` delegates unchanged, so
/// validation, same-file order (G2) and the streaming-start rule (G4) are the tool's own.
pub(crate) struct Observed {
    pub inner: Arc<dyn Tool>,
    pub events: broadcast::Sender<AgentEvent>,
    pub settled: Settled,
}

#[async_trait]
impl Tool for Observed {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        self.inner.validate(args)
    }

    fn resources(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        self.inner.resources(args, ws)
    }

    fn reads(&self, args: &Value, ws: &Workspace) -> Vec<Resource> {
        self.inner.reads(args, ws)
    }

    fn starts_while_streaming(&self, args: &Value) -> bool {
        self.inner.starts_while_streaming(args)
    }

    fn orders_all_calls(&self, args: &Value) -> bool {
        self.inner.orders_all_calls(args)
    }

    async fn call(&self, args: Value, cx: &ToolContext) -> ToolOutput {
        let name = &self.inner.spec().name;
        // No subscriber, no copy of the arguments (a whole-file edit may carry megabytes).
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(AgentEvent::ToolCallStarted {
                call_id: cx.call_id.clone(),
                name: name.clone(),
                args: args.clone(),
            });
        }
        let mut guard = FinishGuard {
            events: &self.events,
            settled: &self.settled,
            call_id: &cx.call_id,
            name,
            started: Instant::now(),
            armed: true,
        };
        let out = self.inner.call(args, cx).await;
        if self.events.receiver_count() > 0 {
            guard.report(out.status, &model_text(&out));
        } else {
            guard.armed = false;
        }
        out
    }
}

/// Reports the end of a call, also when its future is dropped (cancelled) before it returns.
struct FinishGuard<'a> {
    events: &'a broadcast::Sender<AgentEvent>,
    settled: &'a Settled,
    call_id: &'a str,
    name: &'a str,
    started: Instant,
    armed: bool,
}

impl FinishGuard<'_> {
    fn report(&mut self, status: ToolStatus, text: &str) {
        self.armed = false;
        if self.events.receiver_count() > 0 && claim(self.settled, self.call_id) {
            let _ = self.events.send(AgentEvent::ToolCallFinished {
                call_id: self.call_id.to_string(),
                name: self.name.to_string(),
                status,
                duration_ms: self.started.elapsed().as_millis() as u64,
                output: head(text, EVENT_OUTPUT_BYTES).to_string(),
            });
        }
    }
}

impl Drop for FinishGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.report(ToolStatus::Cancelled, "[cancelled] the call was stopped");
        }
    }
}

/// The first `max` bytes of `s`, cut at a character boundary.
pub(crate) fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The text the model reads for a result: statuses other than success and error are named
/// first (the tool's own text may not say the call never ran), images become a short note,
/// and the file holding a cut output is named (G9). The agent loop sends exactly this; a host
/// with its own loop sends it as the tool result's text.
pub fn model_text(out: &ToolOutput) -> String {
    model_result(out, false).0
}

/// The text and images the model gets for a result. With `show_images` (the provider takes
/// images in tool results) each image goes along and the text marks where it is; otherwise
/// the text says it is not shown.
pub(crate) fn model_result(out: &ToolOutput, show_images: bool) -> (String, Vec<Image>) {
    let mut images = Vec::new();
    let mut text = String::new();
    // The status in brackets, once: a refusal's own text starts with it too ("denied: …").
    let status = (!matches!(out.status, ToolStatus::Success | ToolStatus::Error)).then(|| out.status.to_string());
    if let Some(status) = &status {
        text.push_str(&format!("[{status}] "));
    }
    let mut first = true;
    for c in &out.content {
        if !first {
            text.push('\n');
        }
        match c {
            Content::Text { text: t } => text.push_str(if first { after_status(t, status.as_deref()) } else { t }),
            Content::Image { data, mime_type } => {
                let bytes = data.len() / 4 * 3;
                if show_images {
                    text.push_str(&format!("[image {mime_type}, {bytes} bytes, attached]"));
                    images.push(Image { mime_type: mime_type.clone(), data: data.clone() });
                } else {
                    text.push_str(&format!("[image {mime_type}, {bytes} bytes, not shown to this model]"));
                }
            }
        }
        first = false;
    }
    if first {
        text.push_str("(no output)");
    }
    if text.ends_with("] ") && status.is_some_and(|s| text.len() == s.len() + 3) {
        text.pop(); // the text said nothing beyond its status
    }
    // G9: the model must learn where the whole output is, also from a tool whose preview
    // text does not say it.
    if let Some(path) = &out.full_output {
        let shown = path.display().to_string();
        if !text.contains(&shown) {
            text.push_str(&format!("\n[full output: {shown}]"));
        }
    }
    (text, images)
}

/// `text` without a leading `"{status}: "` (or `text` that is only the status word).
fn after_status<'a>(text: &'a str, status: Option<&str>) -> &'a str {
    let Some(rest) = status.and_then(|s| text.strip_prefix(s)) else { return text };
    rest.strip_prefix(": ").unwrap_or(if rest.is_empty() { rest } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g8_the_model_text_names_statuses_describes_images_and_points_to_full_output() {
        let mut out = ToolOutput::with_status(ToolStatus::TimedOut, "<raw & kept>");
        out.content.push(Content::image(&[0u8; 300], "image/png"));
        out.full_output = Some("/tmp/full-output.log".into());
        let text = model_text(&out);
        assert_eq!(
            text,
            "[timed_out] <raw & kept>\n[image image/png, 300 bytes, not shown to this model]\n\
             [full output: /tmp/full-output.log]"
        );
        assert_eq!(model_text(&ToolOutput::text("")), "");
        assert_eq!(model_text(&ToolOutput { content: vec![], ..ToolOutput::text("") }), "(no output)");
        assert_eq!(model_text(&ToolOutput::error("boom")), "boom");
        // A refusal's text starts with its status; the model reads the status once.
        let denied = ToolError::Denied("blocked by a hook: no pushes".into()).into_output();
        assert_eq!(model_text(&denied), "[denied] blocked by a hook: no pushes");
        assert_eq!(model_text(&ToolError::Cancelled.into_output()), "[cancelled]");
        assert_eq!(head("añb", 2), "a");
        // R5: to a model that takes images, the image goes along and the text says where.
        let (text, images) = model_result(&out, true);
        assert_eq!(
            text,
            "[timed_out] <raw & kept>\n[image image/png, 300 bytes, attached]\n[full output: /tmp/full-output.log]"
        );
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].mime_type, "image/png");
        assert_eq!(images[0].data.len(), 400);
    }
}
