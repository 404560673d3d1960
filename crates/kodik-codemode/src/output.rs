//! What the model receives (K2, K8, K11): a status line, the call summary, logs and output, cut
//! to `max-output-bytes` with the full text saved to a temporary file; metadata for hosts.

use kodik_core::{OutputPreview, PreviewConfig, ToolOutput, ToolStatus};
use serde_json::json;

use crate::error::ErrorKind;
use crate::run::{Finished, human_duration};

/// `Tool calls: 7 — ls ×1, read ×6` (names in order of first use).
pub(crate) fn summary_line(calls: &[crate::run::CallRecord]) -> String {
    if calls.is_empty() {
        return "Tool calls: 0".into();
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for c in calls {
        match counts.iter_mut().find(|(n, _)| *n == c.name) {
            Some((_, k)) => *k += 1,
            None => counts.push((&c.name, 1)),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(n, k)| format!("{n} ×{k}")).collect();
    format!("Tool calls: {} — {}", calls.len(), parts.join(", "))
}

/// Builds the tool result.
pub(crate) fn render(done: Finished, max_output_bytes: usize) -> ToolOutput {
    let summary = summary_line(&done.calls);
    let wall = human_duration(done.wall);
    let mut text = match &done.outcome {
        Ok(_) => format!("Script completed in {wall}.\n{summary}\n"),
        Err(e) => format!("Script failed after {wall}: {e}\n{summary}\n"),
    };
    for note in &done.notes {
        text.push_str("Note: ");
        text.push_str(note);
        text.push('\n');
    }
    if !done.collected.logs.is_empty() {
        text.push_str("\nLogs:\n");
        for l in &done.collected.logs {
            text.push_str(l);
            text.push('\n');
        }
    }
    let mut output: Vec<&str> = done.collected.text.iter().map(String::as_str).collect();
    if let Ok(Some(v)) = &done.outcome {
        output.push(v);
    }
    if !output.is_empty() {
        text.push_str(if done.outcome.is_ok() { "\nOutput:\n" } else { "\nOutput before the error:\n" });
        text.push_str(&output.join("\n"));
        text.push('\n');
    }
    let (status, error_kind, error) = match &done.outcome {
        Ok(_) => (ToolStatus::Success, None, None),
        Err(e) => {
            let status = match e.kind {
                ErrorKind::TimeoutExceeded => ToolStatus::TimedOut,
                ErrorKind::Cancelled => ToolStatus::Cancelled,
                _ => ToolStatus::Error,
            };
            (status, Some(e.kind.as_str()), Some(e.clone()))
        }
    };
    let (text, full_output) = if text.len() > max_output_bytes {
        let mut preview = OutputPreview::new(PreviewConfig::with_limit(max_output_bytes));
        preview.push(text.as_bytes());
        let s = preview.summary();
        (s.text, s.full_output)
    } else {
        (text, None)
    };
    let mut meta = json!({
        "codemode": {
            "calls": done.calls,
            "wall_ms": done.wall.as_secs_f64() * 1000.0,
            "error_kind": error_kind,
            "error": error,
            "summary": summary,
            "notes": done.notes,
            "full_output": full_output,
        }
    });
    if let Some(kind) = error_kind {
        // Where every other failed result keeps its kind, too.
        meta["error_kind"] = json!(kind);
    }
    ToolOutput::with_status(status, text).with_meta(meta).with_full_output(full_output)
}
