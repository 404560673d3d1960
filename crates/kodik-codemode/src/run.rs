//! The host side of one script run: starts the script thread, runs its tool calls through
//! [`kodik_core::dispatch`] (hooks and approval included, K5) under the concurrency cap, and
//! enforces the deadline, cancellation (K10) and the memory watchdog even when the script thread
//! cannot answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kodik_core::{
    CallOrder, Content, Event, ToolCall, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolStatus, dispatch,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::catalog::Catalog;
use crate::config::CodeModeConfig;
use crate::engine::boa::BoaEngine;
use crate::engine::{
    AbortFlag, CallResult, Collected, Limits, LocalOutput, ScriptEngine, ScriptJob, ScriptOutput, ScriptSide,
    StartCall, Store, ToScript, abort_error, memory_exceeded, rss_bytes,
};
use crate::error::{ErrorKind, ScriptError};
use crate::worker::{HostSide, Worker};

/// How long the host waits for the script thread to report after asking it to stop.
const STOP_GRACE: Duration = Duration::from_millis(300);
/// How long the host waits for cancelled calls to report their final status.
const CALL_DRAIN: Duration = Duration::from_millis(1000);
/// How long calls in flight when a script fails may go on before they are stopped.
const FAILED_GRACE: Duration = Duration::from_millis(1000);
/// Stack of the script thread: deep native recursion must hit boa's limit, never the guard page.
const SCRIPT_STACK: usize = 64 * 1024 * 1024;

/// What every run shares.
pub(crate) struct Setup {
    pub catalog: Arc<Catalog>,
    pub registry: ToolRegistry,
    pub config: CodeModeConfig,
    pub store: Arc<Mutex<Store>>,
}

/// One nested call as the result metadata lists it (K11).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CallRecord {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    pub status: String,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The script got a cut output (the tool's display limit, a page of matches).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Where the tool saved its whole output, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output: Option<String>,
}

/// What a finished run hands to the renderer.
pub(crate) struct Finished {
    pub outcome: Result<Option<String>, ScriptError>,
    /// What the model must know beyond the outcome (calls the script did not wait for).
    pub notes: Vec<String>,
    pub calls: Vec<CallRecord>,
    pub collected: Collected,
    pub wall: Duration,
}

/// Asks the script thread to stop and gives up the nested calls still running when the run
/// ends or is dropped: nobody will read their results.
struct StopOnDrop {
    abort: Arc<AbortFlag>,
    wake: std::sync::mpsc::Sender<ToScript>,
    calls: NestedCalls,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.abort.set(ErrorKind::Cancelled);
        let _ = self.wake.send(ToScript::Wake);
        self.calls.abandon();
    }
}

/// The cancellation tokens of a script's nested calls, children of the `codemode` call's.
#[derive(Clone)]
struct NestedCalls {
    cancel: CancellationToken,
    abandoned: CancellationToken,
}

impl NestedCalls {
    /// Stops the calls the script gave up (it ended, failed or ran out of time): given up for
    /// good, so what they started stops too — a `shell` command is killed, not sent to the
    /// background with a terminal id nobody is told about (K10, G6).
    fn abandon(&self) {
        self.abandoned.cancel();
        self.cancel.cancel();
    }
}

/// Strips a Markdown code fence around the code; returns the code and how many lines were
/// removed before it.
pub(crate) fn strip_fence(code: &str) -> (&str, u32) {
    let trimmed = code.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return (code, 0) };
    let Some(nl) = rest.find('\n') else { return (code, 0) };
    let body = &rest[nl + 1..];
    let body = body.trim_end().strip_suffix("```").unwrap_or(body);
    let leading = code[..code.len() - code.trim_start().len()].matches('\n').count() as u32;
    (body, leading + 1)
}

/// Starts nested calls straight from the script thread onto the host's runtime: the result goes
/// back to the script thread without passing through the run's own task, which saves two
/// thread hops per call.
struct Calls {
    handle: tokio::runtime::Handle,
    registry: ToolRegistry,
    /// The caller's context with the script's cancellation token.
    cx: ToolContext,
    semaphore: Arc<Semaphore>,
    records: Arc<Mutex<Vec<CallRecord>>>,
    to_script: std::sync::mpsc::Sender<ToScript>,
    /// Calls started and not yet settled, and a signal for each settled one.
    in_flight: Arc<AtomicUsize>,
    settled: tokio::sync::mpsc::UnboundedSender<()>,
    /// Same-resource order for nested calls (G2, E5), the scheduler's rule: calls register
    /// from the script thread as the script makes them, so `Promise.all` of edits to one file
    /// applies them one after another, in the order the script wrote them.
    order: Mutex<CallOrder>,
}

impl Calls {
    fn start(&self, seq: u64, name: String, args: Value) {
        let id = format!("{}.{}", self.cx.call_id, seq);
        self.cx.events.emit(Event::Progress {
            call_id: self.cx.call_id.clone(),
            message: format!("▸ {name} {}", short_json(&args, 200)),
        });
        let index = {
            let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
            records.push(CallRecord {
                id: id.clone(),
                name: name.clone(),
                arguments: preview_args(&args),
                status: "running".into(),
                duration_ms: 0.0,
                error: None,
                truncated: false,
                full_output: None,
            });
            records.len() - 1
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let done = CancellationToken::new();
        let before = match self.registry.get(&name) {
            Some(tool) => {
                let ws = &self.cx.workspace;
                let (writes, reads) = (tool.resources(&args, ws), tool.reads(&args, ws));
                self.order.lock().unwrap_or_else(|p| p.into_inner()).register(writes, reads, &done)
            }
            None => Vec::new(),
        };
        let registry = self.registry.clone();
        let ccx = self.cx.for_call(id.clone());
        let parent = self.cx.clone();
        let semaphore = Arc::clone(&self.semaphore);
        let records = Arc::clone(&self.records);
        let to_script = self.to_script.clone();
        let in_flight = Arc::clone(&self.in_flight);
        let settled = self.settled.clone();
        self.handle.spawn(async move {
            // Later calls on the same files go on however this one ends.
            let _release = done.drop_guard();
            let mut waited = true;
            for prev in &before {
                tokio::select! {
                    () = prev.cancelled() => {}
                    () = ccx.cancel.cancelled() => {
                        waited = false;
                        break;
                    }
                }
            }
            let permit = if waited {
                tokio::select! {
                    p = semaphore.acquire_owned() => p.ok(),
                    () = ccx.cancel.cancelled() => None,
                }
            } else {
                None
            };
            let t0 = Instant::now();
            let out = match permit {
                Some(_) => dispatch(&registry, ToolCall::new(id, name, args), &ccx).await,
                None => ToolError::Cancelled.into_output(),
            };
            drop(permit);
            let result = finish_call(index, &out, t0.elapsed(), &records, &parent);
            // Counted out before the script can see the result: a script that awaited it may
            // return at once, and must not find its own awaited call still counted as running.
            in_flight.fetch_sub(1, Ordering::SeqCst);
            // A closed channel means the script is over; the record above still counts.
            let _ = to_script.send(ToScript::CallDone { seq, result });
            let _ = settled.send(());
        });
    }
}

/// Runs `code` and collects everything the renderer needs.
pub(crate) async fn run(code: &str, setup: &Setup, cx: &ToolContext) -> Finished {
    let started = Instant::now();
    let cfg = &setup.config;
    let (code, line_offset) = strip_fence(code);
    let deadline = started + cfg.timeout_duration();
    let memory = cfg.memory_limit_bytes().and_then(|limit| rss_bytes().map(|base| (base, limit)));
    let limits = Limits {
        deadline,
        max_tool_calls: cfg.max_tool_calls,
        memory,
        timeout_secs: cfg.timeout,
        memory_mb: cfg.memory_limit_mb,
    };
    let abort_err = |kind| abort_error(kind, cfg.timeout, cfg.memory_limit_mb);

    let (to_script, from_host) = std::sync::mpsc::channel::<ToScript>();
    let abort = Arc::new(AbortFlag::default());
    let collected = Arc::new(Mutex::new(Collected::default()));
    let records = Arc::new(Mutex::new(Vec::new()));
    // A bare cancel of the `codemode` call (a new user message) reaches its calls as it is; what
    // the script itself gives up is abandoned.
    let nested = NestedCalls { cancel: cx.cancel.child_token(), abandoned: cx.abandoned.child_token() };
    let _stop = StopOnDrop { abort: Arc::clone(&abort), wake: to_script.clone(), calls: nested.clone() };
    let give_up = || {
        if cx.cancel.is_cancelled() && !cx.is_abandoned() {
            nested.cancel.cancel();
        } else {
            nested.abandon();
        }
    };

    let mut script_cx = cx.clone();
    script_cx.cancel = nested.cancel.clone();
    script_cx.abandoned = nested.abandoned.clone();
    // Nested results go to the script, never to the model: no "already read" notes or loop
    // guard answers in place of the content (K1, G15, R4).
    script_cx.session = Arc::new(cx.session.for_program());
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (settled_tx, mut settled) = tokio::sync::mpsc::unbounded_channel::<()>();
    let calls = Calls {
        handle: tokio::runtime::Handle::current(),
        registry: setup.registry.clone(),
        cx: script_cx,
        semaphore: Arc::new(Semaphore::new(cfg.max_concurrency.max(1))),
        records: Arc::clone(&records),
        to_script: to_script.clone(),
        in_flight: Arc::clone(&in_flight),
        settled: settled_tx,
        order: Mutex::default(),
    };

    let start_call: StartCall = Box::new(move |seq, name, args| calls.start(seq, name, args));
    let output: Arc<dyn ScriptOutput> = Arc::new(LocalOutput {
        collected: Arc::clone(&collected),
        events: Arc::clone(&cx.events),
        call_id: cx.call_id.clone(),
    });
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    let mut worker = None;
    let spawned = match &cfg.worker {
        Some(command) => {
            let side = HostSide {
                registry: setup.registry.clone(),
                start_call,
                from_host,
                output,
                store: Arc::clone(&setup.store),
                done: done_tx,
                withheld: setup.catalog.withheld.clone(),
            };
            Worker::spawn(command, code, line_offset, cfg, deadline, side)
                .map(|w| worker = Some(w))
                .map_err(|e| format!("could not start the script worker `{}`: {e}", command.join(" ")))
        }
        None => {
            let job = ScriptJob {
                code: code.to_string(),
                line_offset,
                catalog: Arc::clone(&setup.catalog),
                limits,
                bridge: ScriptSide {
                    start_call,
                    from_host,
                    abort: Arc::clone(&abort),
                    output,
                    store: Arc::clone(&setup.store),
                },
            };
            let thread = std::thread::Builder::new().name("kodik-codemode".into()).stack_size(SCRIPT_STACK);
            thread
                .spawn(move || {
                    let _ = done_tx.send(BoaEngine.run(job));
                })
                .map(drop)
                .map_err(|e| format!("could not start the script thread: {e}"))
        }
    };
    let finish = |outcome, notes| {
        let mut calls = std::mem::take(&mut *records.lock().unwrap_or_else(|p| p.into_inner()));
        // Cancelled, but not settled within the drain: a write may still land, so it is not
        // reported as cancelled.
        for c in calls.iter_mut().filter(|c| c.status == "running") {
            c.status = "unfinished".into();
            c.error = Some("cancelled when the script ended but had not stopped yet; it may still complete".into());
        }
        Finished {
            outcome,
            notes,
            calls,
            collected: std::mem::take(&mut *collected.lock().unwrap_or_else(|p| p.into_inner())),
            wall: started.elapsed(),
        }
    };
    if let Err(e) = spawned {
        return finish(Err(ScriptError::new(ErrorKind::ExecutionFailure, e)), Vec::new());
    }
    // A worker is measured on its own; a thread shares this process's resident size.
    let over_memory = || match (&worker, cfg.memory_limit_bytes()) {
        (Some(w), Some(limit)) => w.memory_exceeded(limit),
        (Some(_), None) => false,
        (None, _) => memory_exceeded(memory),
    };

    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
    tokio::pin!(sleep);
    let mut memory_tick = tokio::time::interval(Duration::from_millis(20));
    let outcome = loop {
        let kind = tokio::select! {
            biased;
            r = &mut done_rx => {
                let r = r.unwrap_or_else(|_| Err(ScriptError::new(
                    ErrorKind::ExecutionFailure,
                    "the script engine stopped unexpectedly (internal error)",
                )));
                // A cancelled parent cancels the nested calls directly, so the script may end on
                // their `cancelled` results before this loop sees the token: it is still Cancelled.
                break match r {
                    Err(e) if cx.cancel.is_cancelled() && e.kind != ErrorKind::Cancelled => Err(abort_err(ErrorKind::Cancelled)),
                    other => other,
                };
            }
            () = cx.cancel.cancelled() => ErrorKind::Cancelled,
            () = &mut sleep => ErrorKind::TimeoutExceeded,
            _ = memory_tick.tick(), if cfg.memory_limit_bytes().is_some() => {
                if !over_memory() {
                    continue;
                }
                ErrorKind::MemoryLimitExceeded
            }
        };
        abort.set(kind);
        let _ = to_script.send(ToScript::Wake);
        give_up();
        if let Some(w) = &worker {
            w.kill();
        }
        // The thread usually answers at once; if it is stuck in a busy job, the boa runtime
        // limits stop it later and its answer is dropped.
        let reported = tokio::time::timeout(STOP_GRACE, &mut done_rx).await;
        break match reported {
            Ok(Ok(Err(e))) if e.kind == kind => Err(e),
            _ => Err(abort_err(kind)),
        };
    };

    // A script that returned without awaiting some calls (a forgotten `await`): they are waited
    // for up to the time limit rather than cut off halfway, and the model is told (K10, K11).
    let mut notes = Vec::new();
    let unawaited = if outcome.is_ok() { running_calls(&records) } else { Vec::new() };
    if !unawaited.is_empty() {
        let until = tokio::time::Instant::from_std(deadline);
        settle_until(&in_flight, &mut settled, until, &cx.cancel).await;
        let left = running_calls(&records);
        notes.push(if left.is_empty() {
            format!(
                "{} call(s) were still running when the script returned (a missing `await`?); they were waited \
                 for and finished: {}.",
                unawaited.len(),
                name_list(&unawaited)
            )
        } else {
            format!(
                "{} call(s) were still running when the script returned (a missing `await`?); {} of them had not \
                 finished at the time limit and were cancelled: {}. Await every call.",
                unawaited.len(),
                left.len(),
                name_list(&left)
            )
        });
    }
    // A script that failed (threw, a call failed, the call limit) with calls in flight: a write
    // already under way is not stopped by a cancel, so they get a moment to finish on their own
    // before the rest are stopped, and the model learns which did — before it re-runs the
    // script and repeats them (K10, K11). An abort (time, memory, cancel) stops them at once.
    let failed_with_calls = match &outcome {
        Err(e)
            if !matches!(
                e.kind,
                ErrorKind::TimeoutExceeded | ErrorKind::Cancelled | ErrorKind::MemoryLimitExceeded
            ) =>
        {
            running_calls(&records)
        }
        _ => Vec::new(),
    };
    if !failed_with_calls.is_empty() {
        let until = tokio::time::Instant::from_std(deadline).min(tokio::time::Instant::now() + FAILED_GRACE);
        settle_until(&in_flight, &mut settled, until, &cx.cancel).await;
        let left = running_calls(&records);
        let finished: Vec<_> = failed_with_calls.iter().filter(|c| !left.contains(c)).cloned().collect();
        let mut note = format!("{} call(s) were still running when the script failed", failed_with_calls.len());
        if !finished.is_empty() {
            note.push_str(&format!("; {} finished (their changes are made): {}", finished.len(), name_list(&finished)));
        }
        if !left.is_empty() {
            note.push_str(&format!("; {} were stopped: {}", left.len(), name_list(&left)));
        }
        note.push_str(". The call records say how each ended.");
        notes.push(note);
    }
    // Calls that an abort cut short are stopped (K10) and report their final status.
    give_up();
    let drain_until = tokio::time::Instant::now() + CALL_DRAIN;
    while in_flight.load(Ordering::SeqCst) > 0 {
        if tokio::time::timeout_at(drain_until, settled.recv()).await.is_err() {
            break;
        }
    }
    let mut done = finish(outcome, notes);
    if let Some(note) = cut_note(&done.calls) {
        done.notes.push(note);
    }
    done
}

/// What the model must know when the script worked on cut outputs: anything it counted or
/// concluded from them may be incomplete, though the script succeeded (K11).
fn cut_note(calls: &[CallRecord]) -> Option<String> {
    let cut: Vec<(String, String)> = calls.iter().filter(|c| c.truncated).map(labelled).collect();
    (!cut.is_empty()).then(|| {
        format!(
            "{} call output(s) the script got were cut at the tool's limit: {}. What it computed from them may \
             be incomplete: read on with the ranges or offset the output names, narrow the search, or read the \
             saved full output (`full_output` in the call records).",
            cut.len(),
            name_list(&cut)
        )
    })
}

/// Waits until every call in flight has settled, `until` passes, or `cancel` fires.
async fn settle_until(
    in_flight: &AtomicUsize,
    settled: &mut tokio::sync::mpsc::UnboundedReceiver<()>,
    until: tokio::time::Instant,
    cancel: &CancellationToken,
) {
    let limit = tokio::time::sleep_until(until);
    tokio::pin!(limit);
    while in_flight.load(Ordering::SeqCst) > 0 {
        tokio::select! {
            _ = settled.recv() => {}
            () = &mut limit => break,
            () = cancel.cancelled() => break,
        }
    }
}

/// The first ten names of `calls` (id, name), and how many more.
fn name_list(calls: &[(String, String)]) -> String {
    let shown = calls.iter().take(10).map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ");
    match calls.len().saturating_sub(10) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The calls still running, [`labelled`].
fn running_calls(records: &Mutex<Vec<CallRecord>>) -> Vec<(String, String)> {
    let records = records.lock().unwrap_or_else(|p| p.into_inner());
    records.iter().filter(|c| c.status == "running").map(labelled).collect()
}

/// A call's id and its `edit_file (a.txt)`-style name.
fn labelled(c: &CallRecord) -> (String, String) {
    let name = match c.arguments.get("path").and_then(Value::as_str) {
        Some(p) => format!("{} ({p})", c.name),
        None => c.name.clone(),
    };
    (c.id.clone(), name)
}

/// Records a settled call, emits its end event, and says what the script sees of it.
fn finish_call(
    index: usize,
    out: &ToolOutput,
    took: Duration,
    records: &Mutex<Vec<CallRecord>>,
    cx: &ToolContext,
) -> CallResult {
    let text = script_text(out);
    let ok = out.status == ToolStatus::Success;
    let duration_ms = took.as_secs_f64() * 1000.0;
    let mut name = String::new();
    if let Some(rec) = records.lock().unwrap_or_else(|p| p.into_inner()).get_mut(index) {
        rec.status = out.status.as_str().into();
        rec.duration_ms = (duration_ms * 1000.0).round() / 1000.0;
        rec.error = (!ok).then(|| crate::error::failure_gist(&text, 300));
        // Tools say so in their metadata (`truncated`) or by saving the whole output (G9).
        rec.truncated = out.meta.get("truncated").and_then(Value::as_bool) == Some(true) || out.full_output.is_some();
        rec.full_output = out.full_output.as_ref().map(|p| p.display().to_string());
        name = rec.name.clone();
    }
    let message = if ok {
        format!("✓ {name} ({})", human_duration(took))
    } else {
        format!("✗ {name} ({}, {}): {}", out.status, human_duration(took), crate::catalog::first_sentence(&text, 200))
    };
    cx.events.emit(Event::Progress { call_id: cx.call_id.clone(), message });
    CallResult { ok, text, status: out.status.as_str().into() }
}

/// A call's output as a script sees it: its text; structured metadata as JSON when there is no
/// text; a placeholder for images, which scripts cannot look at.
fn script_text(out: &ToolOutput) -> String {
    let text = out.text_content();
    if !text.is_empty() {
        return text;
    }
    let images: Vec<&str> = out
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Image { mime_type, .. } => Some(mime_type.as_str()),
            Content::Text { .. } => None,
        })
        .collect();
    if !images.is_empty() {
        return format!(
            "[{} image(s) ({}) not shown to scripts: call the tool directly to see them]",
            images.len(),
            images.join(", ")
        );
    }
    if out.meta.is_null() { String::new() } else { out.meta.to_string() }
}

/// Longest string kept whole in a call record's arguments.
const ARG_PREVIEW_CHARS: usize = 200;
/// Most items of a list kept in a call record's arguments.
const ARG_PREVIEW_ITEMS: usize = 10;

/// A call's arguments for the result metadata (K11): long strings (a whole file's content) are
/// cut to their first [`ARG_PREVIEW_CHARS`] characters with their length, long lists (an edit
/// with thousands of replacements) to their first [`ARG_PREVIEW_ITEMS`] items and a count, so
/// a script that writes ten large files does not return megabytes of metadata.
fn preview_args(v: &Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > ARG_PREVIEW_CHARS => {
            let head: String = s.chars().take(ARG_PREVIEW_CHARS).collect();
            Value::String(format!("{head}… ({} chars)", s.chars().count()))
        }
        Value::Array(items) if items.len() > ARG_PREVIEW_ITEMS => {
            let mut kept: Vec<Value> = items.iter().take(ARG_PREVIEW_ITEMS).map(preview_args).collect();
            kept.push(Value::String(format!(
                "… {} more items ({} in all)",
                items.len() - ARG_PREVIEW_ITEMS,
                items.len()
            )));
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(preview_args).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), preview_args(v))).collect()),
        other => other.clone(),
    }
}

fn short_json(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

/// `45µs`, `210ms`, `1.2s`.
pub(crate) fn human_duration(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{}µs", d.as_micros())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k1_fences_are_stripped_and_counted() {
        assert_eq!(strip_fence("```js\nreturn 1\n```"), ("return 1\n", 1));
        assert_eq!(strip_fence("\n```javascript\nreturn 2\n```\n"), ("return 2\n", 2));
        assert_eq!(strip_fence("return 3"), ("return 3", 0));
    }
}
