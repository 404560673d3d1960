//! The boa_engine 0.22 implementation of [`ScriptEngine`].
//!
//! How it stays bounded, since a boa `Context` cannot be interrupted from another thread:
//! - the script runs on its own thread; top-level code runs through
//!   `evaluate_async_with_budget`, polled by hand, so the deadline, the abort flag and the
//!   memory watchdog are checked every few thousand instructions;
//! - code after an `await` runs inside promise jobs, which this module's own queue runs one at a
//!   time, checking the same things between jobs; inside one job only `RuntimeLimits` can stop
//!   a busy loop, so the loop-iteration limit is re-sized before every job to about the time
//!   left (from a one-off measurement of this machine's loop speed);
//! - boa 0.22 drops an engine error (stack overflow, loop limit) raised in an async function
//!   after an `await`: the function just never settles. [`ScriptHooks`] notices resumptions
//!   that left no trace: when it is the script's own body, the script ends with
//!   ExecutionFailure at once; when it is a function the model wrote, the script goes on, and
//!   if it then waits for a promise nothing can settle, that is reported as the function's
//!   stack overflow instead of an UnsettledPromise;
//! - between jobs the thread blocks on the host channel (the next tool result, a timer, the
//!   deadline or an abort), never polling.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future as _;
use std::path::Path;
use std::rc::Rc;
use std::sync::OnceLock;
use std::sync::mpsc::RecvTimeoutError;
use std::task::Poll;
use std::time::{Duration, Instant};

use boa_engine::builtins::promise::{OperationType, Promise, PromiseState, ResolvingFunctions};
use boa_engine::context::HostHooks;
use boa_engine::job::{Job, JobCallback, JobExecutor};
use boa_engine::module::{Module, ModuleLoader, ModuleRequest, Referrer};
use boa_engine::native_function::NativeFunctionObject;
use boa_engine::object::ObjectInitializer;
use boa_engine::object::builtins::{JsArray, JsFunction, JsPromise};
use boa_engine::vm::SourcePath;
use boa_engine::{
    Context, EngineError, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction,
    RuntimeLimitError, Script, Source, js_string,
};
use serde_json::{Value, json};

use super::{
    CallResult, Limits, ScriptEngine, ScriptJob, ScriptSide, StartCall, ToScript, abort_error, memory_exceeded,
};
use crate::catalog::Catalog;
use crate::error::{ErrorKind, ScriptError, failure_gist};

/// The path the model's code is compiled under; stack frames with it are the model's lines.
const SCRIPT_PATH: &str = "script.js";
/// The name of the async function the model's code runs in, so [`ScriptHooks`] can tell its
/// frames from those of functions the model defines.
const MAIN_NAME: &str = "__kodik_main";
const PRELUDE: &str = include_str!("../prelude.js");
/// VM "cycles" between checks of the deadline and the watchdog in top-level code.
const BUDGET: u32 = 10_000;
/// How often the memory watchdog samples the process.
const MEMORY_EVERY: Duration = Duration::from_millis(5);

/// The boa engine.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BoaEngine;

impl ScriptEngine for BoaEngine {
    fn run(&self, job: ScriptJob) -> Result<Option<String>, ScriptError> {
        let ScriptJob { code, line_offset, catalog, limits, bridge } = job;
        let ScriptSide { start_call, from_host, abort, output, store } = bridge;
        let queue = Rc::new(Queue::default());
        let mut ctx = Context::builder()
            .job_executor(Rc::clone(&queue))
            .host_hooks(Rc::new(ScriptHooks))
            // Without a loader of its own boa resolves `import()` against the process's working
            // directory and reads any file there (K3).
            .module_loader(Rc::new(NoModules))
            .build()
            .map_err(|e| ScriptError::new(ErrorKind::ExecutionFailure, format!("the engine did not start: {e}")))?;
        let host = Rc::new(Host {
            catalog,
            limits,
            line_offset,
            source: code.clone(),
            start_call,
            abort,
            output,
            store,
            seq: Cell::new(0),
            calls: Cell::new(0),
            pending: RefCell::new(HashMap::new()),
            sleepers: RefCell::new(HashMap::new()),
            timers: RefCell::new(BinaryHeap::new()),
            fatal: RefCell::new(None),
            last_memory_check: Cell::new(Instant::now()),
            trace: Cell::new(Trace::default()),
            resumed: RefCell::new(None),
            stalled: RefCell::new(None),
        });
        ctx.insert_data(Rc::clone(&host));
        let result = run_script(&code, &mut ctx, &queue, &host, &from_host);
        // Drop engine objects held outside the heap while the context still exists.
        host.pending.borrow_mut().clear();
        host.sleepers.borrow_mut().clear();
        queue.jobs.borrow_mut().clear();
        ctx.remove_data::<Rc<Host>>();
        result
    }
}

/// The script thread's state, reachable from native functions through the context.
struct Host {
    catalog: std::sync::Arc<Catalog>,
    limits: Limits,
    line_offset: u32,
    /// The model's code, to place errors boa reports at the function's start.
    source: String,
    start_call: StartCall,
    abort: std::sync::Arc<super::AbortFlag>,
    output: std::sync::Arc<dyn super::ScriptOutput>,
    store: std::sync::Arc<std::sync::Mutex<super::Store>>,
    seq: Cell<u64>,
    calls: Cell<usize>,
    /// Tool calls in flight: seq → (tool name, resolvers).
    pending: RefCell<HashMap<u64, (String, ResolvingFunctions)>>,
    /// `sleep()` promises: seq → resolvers.
    sleepers: RefCell<HashMap<u64, ResolvingFunctions>>,
    timers: RefCell<BinaryHeap<Reverse<(Instant, u64)>>>,
    /// An error that ends the script at the next check (the call limit).
    fatal: RefCell<Option<ScriptError>>,
    last_memory_check: Cell<Instant>,
    /// What async code has done so far, for [`ScriptHooks`].
    trace: Cell<Trace>,
    /// Set when the running job resumes an async function after an `await`.
    resumed: RefCell<Option<Resumed>>,
    /// A function the model wrote that ended after an `await` without a trace.
    stalled: RefCell<Option<AwaitSite>>,
}

impl Host {
    fn next_seq(&self) -> u64 {
        let s = self.seq.get() + 1;
        self.seq.set(s);
        s
    }

    /// Whether the script must stop now, and why.
    fn check(&self) -> Result<(), ScriptError> {
        if let Some(e) = self.fatal.borrow_mut().take() {
            return Err(e);
        }
        if let Some(kind) = self.abort.get() {
            return Err(self.abort_error(kind));
        }
        let now = Instant::now();
        if now >= self.limits.deadline {
            return Err(self.abort_error(ErrorKind::TimeoutExceeded));
        }
        if self.limits.memory.is_some() && now.duration_since(self.last_memory_check.get()) >= MEMORY_EVERY {
            self.last_memory_check.set(now);
            if memory_exceeded(self.limits.memory) {
                self.abort.set(ErrorKind::MemoryLimitExceeded);
                return Err(self.abort_error(ErrorKind::MemoryLimitExceeded));
            }
        }
        Ok(())
    }

    fn abort_error(&self, kind: ErrorKind) -> ScriptError {
        abort_error(kind, self.limits.timeout_secs, self.limits.memory_mb)
    }

    fn user_line(&self, engine_line: u32) -> u32 {
        // Line 1 of the compiled text is the async wrapper.
        engine_line.saturating_sub(1).max(1) + self.line_offset
    }
}

/// Refuses every `import()`, whatever the specifier, with the same message, so a script learns
/// neither that modules exist on disk nor which paths do (K3).
struct NoModules;

/// What a script that imports or requires a module is told.
pub(crate) const NO_MODULES: &str = "modules are not available in code mode (no import or require): call tools \
     instead — tools.read_file({path}) for a file's lines, numbered `N→text`: fileText() takes the numbers off, so \
     JSON.parse(fileText(await tools.read_file({path: 'package.json'}))) gives JSON data; tools.shell({command}) \
     to run a program — and write the logic in this script.";

impl ModuleLoader for NoModules {
    async fn load_imported_module(
        self: Rc<Self>,
        _referrer: Referrer,
        _request: ModuleRequest,
        _context: &RefCell<&mut Context>,
    ) -> JsResult<Module> {
        Err(JsNativeError::typ().with_message(NO_MODULES).into())
    }
}

/// Promise jobs only: scripts get no timers or host async jobs from boa (K3).
#[derive(Default)]
struct Queue {
    jobs: RefCell<VecDeque<Job>>,
    /// Jobs ever queued, so [`ScriptHooks`] can see whether a resumption queued any.
    queued: Cell<u64>,
}

impl Queue {
    fn pop(&self) -> Option<Job> {
        self.jobs.borrow_mut().pop_front()
    }
}

impl JobExecutor for Queue {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        if matches!(job, Job::PromiseJob(_) | Job::GenericJob(_) | Job::AsyncJob(_)) {
            self.jobs.borrow_mut().push_back(job);
            self.queued.set(self.queued.get() + 1);
        }
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        while let Some(job) = self.pop() {
            run_job(job, context)?;
        }
        Ok(())
    }
}

fn run_job(job: Job, ctx: &mut Context) -> JsResult<()> {
    match job {
        Job::PromiseJob(j) => j.call(ctx).map(drop),
        Job::GenericJob(j) => j.call(ctx).map(drop),
        // The only async jobs a script can start are dynamic imports, which [`NoModules`]
        // refuses at once: poll once so the import's promise rejects. Anything still
        // pending is dropped: scripts get no host async work but tool calls (K3).
        Job::AsyncJob(j) => {
            let cell = RefCell::new(ctx);
            let mut fut = j.call(&cell);
            let mut task_cx = std::task::Context::from_waker(std::task::Waker::noop());
            match std::pin::Pin::new(&mut fut).poll(&mut task_cx) {
                Poll::Ready(r) => r.map(drop),
                Poll::Pending => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Counters of what async code did, compared before and after a job.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Trace {
    /// Reactions registered from the body's frame (each `await` registers two).
    main_awaits: u64,
    /// Reactions registered from any frame of the model's code.
    script_awaits: u64,
    /// Promises rejected with no handler (a function that threw with nobody waiting).
    rejections: u64,
}

/// Where a reaction was registered from, an `await` in the model's code: the awaiting
/// function's name ("" when anonymous; [`MAIN_NAME`] for the script's body) and the model's
/// line it starts on (boa keeps no position for the `await` itself). Kept as a `JobCallback`'s
/// host data, which must be garbage-collector aware: a tuple of a `JsString` (a shared,
/// reference-counted name, no copy per `await`) and a number is.
type AwaitSite = (JsString, u32);

fn is_main(site: &AwaitSite) -> bool {
    site.0 == MAIN_NAME
}

/// A job that resumes an async function after an `await`.
#[derive(Debug, Clone)]
struct Resumed {
    site: AwaitSite,
    trace: Trace,
    queued: u64,
}

/// Watches async functions across their `await`s.
///
/// boa 0.22 resumes an async function from a promise reaction and ignores how the resumed code
/// ended, so an engine error there (a stack overflow, the loop limit) leaves the function
/// suspended forever with no error anywhere. A reaction registered while a frame of the
/// model's code is on top is an `await` (`.then()` runs through a prelude wrapper, so its
/// reactions never look like that); the job that runs it resumes that function, which must end
/// in one of: another `await`, queued work (settling a promise someone waits for, returning a
/// thenable), an unhandled rejection, or — for the body — settling the script's promise. If
/// none happened by the end of the job, the function died (or, for one of the model's own
/// functions, finished with nobody waiting yet); `run_script` checks after every job.
struct ScriptHooks;

impl HostHooks for ScriptHooks {
    fn make_job_callback(&self, callback: JsFunction, context: &mut Context) -> JobCallback {
        // An `await` resumes through a native closure of boa's. A JavaScript callback here is
        // the `then` of a thenable the function returned or awaited (`return tools.x()`): its
        // job only hands the outer promise on to that thenable and resumes nothing, so it must
        // not be taken for a resumption that left no trace.
        if !callback.is::<NativeFunctionObject>() {
            return JobCallback::new(callback, ());
        }
        let top = context.stack_trace().next().and_then(|frame| {
            let loc = frame.position();
            let ours = matches!(&loc.path, SourcePath::Path(p) if p.as_ref() == Path::new(SCRIPT_PATH));
            ours.then(|| (frame.code_block().name().clone(), loc.position.map(|p| p.line_number())))
        });
        let (Some((function, line)), Some(host)) = (top, context.get_data::<Rc<Host>>()) else {
            return JobCallback::new(callback, ());
        };
        let site: AwaitSite = (function, host.user_line(line.unwrap_or(1)));
        let mut trace = host.trace.get();
        trace.script_awaits += 1;
        trace.main_awaits += u64::from(is_main(&site));
        host.trace.set(trace);
        JobCallback::new(callback, site)
    }

    fn call_job_callback(
        &self,
        job: &JobCallback,
        this: &JsValue,
        args: &[JsValue],
        context: &mut Context,
    ) -> JsResult<JsValue> {
        if let Some(site) = job.host_defined().as_any().downcast_ref::<AwaitSite>()
            && let Some(host) = context.get_data::<Rc<Host>>()
            && let Some(queue) = context.downcast_job_executor::<Queue>()
        {
            let resumed = Resumed { site: site.clone(), trace: host.trace.get(), queued: queue.queued.get() };
            *host.resumed.borrow_mut() = Some(resumed);
        }
        job.callback().call(this, args, context)
    }

    fn promise_rejection_tracker(&self, _promise: &JsObject<Promise>, operation: OperationType, context: &mut Context) {
        if matches!(operation, OperationType::Reject)
            && let Some(host) = context.get_data::<Rc<Host>>()
        {
            let mut trace = host.trace.get();
            trace.rejections += 1;
            host.trace.set(trace);
        }
    }
}

static LOOP_RATE: OnceLock<f64> = OnceLock::new();

/// Loop iterations per second of an empty loop on this machine, measured once per process.
pub(crate) fn loop_rate() -> f64 {
    *LOOP_RATE.get_or_init(|| {
        const N: u64 = 100_000;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let mut ctx = Context::default();
            ctx.runtime_limits_mut().set_loop_iteration_limit(N);
            let started = Instant::now();
            let _ = ctx.eval(Source::from_bytes("while (true) {}"));
            best = best.min(started.elapsed().as_secs_f64());
        }
        N as f64 / best.max(1e-6)
    })
}

/// Takes the loop rate measured by another process on this machine (a worker gets its host's),
/// which saves the measurement at every start.
pub(crate) fn set_loop_rate(rate: f64) {
    if rate.is_finite() && rate > 0.0 {
        let _ = LOOP_RATE.set(rate);
    }
}

/// Sizes the loop-iteration backstop to the time left, with slack: the rate is measured on the
/// fastest possible loop, so real loops reach it later, and a busy machine during the measurement
/// must not make it fire before the deadline. The host answers at the deadline anyway; this only
/// bounds how long a stuck script thread keeps running afterwards.
fn size_loop_limit(ctx: &mut Context, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64();
    let n = (loop_rate() * left * 3.0).max(100_000.0);
    ctx.runtime_limits_mut().set_loop_iteration_limit(n as u64);
}

fn run_script(
    code: &str,
    ctx: &mut Context,
    queue: &Rc<Queue>,
    host: &Rc<Host>,
    from_host: &std::sync::mpsc::Receiver<ToScript>,
) -> Result<Option<String>, ScriptError> {
    let fmt = install_prelude(ctx, &host.catalog)?;
    let wrapped = format!("(async function {MAIN_NAME}() {{\n{code}\n}})()");
    let source = Source::from_bytes(wrapped.as_bytes()).with_path(Path::new(SCRIPT_PATH));
    let script = Script::parse(source, None, ctx).map_err(|e| parse_error(&e, code, host))?;
    host.check()?;
    size_loop_limit(ctx, host.limits.deadline);

    let top = {
        let mut fut = std::pin::pin!(script.evaluate_async_with_budget(ctx, BUDGET));
        let mut task_cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            match fut.as_mut().poll(&mut task_cx) {
                Poll::Ready(r) => break r,
                Poll::Pending => host.check()?,
            }
        }
    };
    let top = top.map_err(|e| js_error(e, ctx, host))?;
    let Some(promise) = top.as_promise() else {
        return Err(ScriptError::new(ErrorKind::ExecutionFailure, "the script did not produce a promise"));
    };

    loop {
        while let Some(job) = queue.pop() {
            host.check()?;
            size_loop_limit(ctx, host.limits.deadline);
            host.resumed.borrow_mut().take();
            if let Err(e) = run_job(job, ctx) {
                return Err(js_error(e, ctx, host));
            }
            host.check()?;
            let resumed = host.resumed.borrow_mut().take();
            if let Some(r) = resumed {
                let (now, queued) = (host.trace.get(), queue.queued.get());
                let main = is_main(&r.site);
                let main_died = main
                    && now.main_awaits == r.trace.main_awaits
                    && queued == r.queued
                    && matches!(promise.state(), PromiseState::Pending);
                if main_died {
                    return Err(ScriptError::new(
                        ErrorKind::ExecutionFailure,
                        "stack overflow after an `await` in the script: the maximum call depth was exceeded \
                         (unbounded recursion?), or an engine limit stopped a long loop. The script ended there; \
                         calls still running were cancelled.",
                    ));
                }
                if !main && now == r.trace && queued == r.queued {
                    *host.stalled.borrow_mut() = Some(r.site);
                }
            }
        }
        host.check()?;
        match promise.state() {
            PromiseState::Fulfilled(v) => return format_value(&v, &fmt, ctx, host),
            PromiseState::Rejected(e) => return Err(classify(&e, ctx, host)),
            PromiseState::Pending => {}
        }
        let next_timer = host.timers.borrow().peek().map(|Reverse((at, _))| *at);
        if host.pending.borrow().is_empty() && next_timer.is_none() {
            if let Some((function, line)) = host.stalled.borrow_mut().take() {
                let function = if function.is_empty() {
                    "an anonymous async function".into()
                } else {
                    format!("`{}`", function.to_std_string_lossy())
                };
                return Err(ScriptError::new(
                    ErrorKind::ExecutionFailure,
                    format!(
                        "stack overflow after an `await`: {function} (starting on line {line}) ended after an \
                         `await` without returning or throwing — most likely the maximum call depth was exceeded \
                         there (unbounded recursion?), which boa 0.22 cannot raise as an error — and the script \
                         is left waiting for a promise that can never settle."
                    ),
                ));
            }
            return Err(ScriptError::new(
                ErrorKind::UnsettledPromise,
                "the script is waiting for a promise that nothing will ever settle (no tool call or sleep is \
                 pending). Make sure every promise you await is resolved, and `return` the result.",
            ));
        }
        let wake_at = next_timer.map_or(host.limits.deadline, |t| t.min(host.limits.deadline));
        match from_host.recv_timeout(wake_at.saturating_duration_since(Instant::now())) {
            Ok(ToScript::CallDone { seq, result }) => settle_call(seq, result, ctx, host)?,
            Ok(ToScript::Wake) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(host.abort_error(ErrorKind::Cancelled)),
        }
        fire_timers(ctx, host)?;
    }
}

fn fire_timers(ctx: &mut Context, host: &Host) -> Result<(), ScriptError> {
    let now = Instant::now();
    loop {
        let due = {
            let mut timers = host.timers.borrow_mut();
            match timers.peek() {
                Some(Reverse((at, seq))) if *at <= now => {
                    let seq = *seq;
                    timers.pop();
                    Some(seq)
                }
                _ => None,
            }
        };
        let Some(seq) = due else { return Ok(()) };
        let resolvers = host.sleepers.borrow_mut().remove(&seq);
        if let Some(r) = resolvers {
            r.resolve.call(&JsValue::undefined(), &[], ctx).map_err(|e| js_error(e, ctx, host))?;
        }
    }
}

fn settle_call(seq: u64, result: CallResult, ctx: &mut Context, host: &Host) -> Result<(), ScriptError> {
    let Some((name, resolvers)) = host.pending.borrow_mut().remove(&seq) else { return Ok(()) };
    let obj = if result.ok {
        json!({"ok": true, "text": result.text})
    } else {
        let message = format!("tool `{name}` failed ({}): {}", result.status, failure_gist(&result.text, 2000));
        json!({"ok": false, "output": result.text, "status": result.status, "message": message})
    };
    let value = JsValue::from_json(&obj, ctx).map_err(|e| js_error(e, ctx, host))?;
    resolvers.resolve.call(&JsValue::undefined(), &[value], ctx).map_err(|e| js_error(e, ctx, host))?;
    Ok(())
}

fn install_prelude(ctx: &mut Context, catalog: &Catalog) -> Result<JsFunction, ScriptError> {
    let fail = |e: JsError| ScriptError::new(ErrorKind::ExecutionFailure, format!("the script prelude failed: {e}"));
    let natives = ObjectInitializer::new(ctx)
        .function(NativeFunction::from_fn_ptr(native_call), js_string!("call"), 2)
        .function(NativeFunction::from_fn_ptr(native_text), js_string!("text"), 1)
        .function(NativeFunction::from_fn_ptr(native_log), js_string!("log"), 2)
        .function(NativeFunction::from_fn_ptr(native_search), js_string!("search"), 2)
        .function(NativeFunction::from_fn_ptr(native_describe), js_string!("describe"), 1)
        .function(NativeFunction::from_fn_ptr(native_all), js_string!("all"), 0)
        .function(NativeFunction::from_fn_ptr(native_store), js_string!("store"), 2)
        .function(NativeFunction::from_fn_ptr(native_load), js_string!("load"), 1)
        .function(NativeFunction::from_fn_ptr(native_sleep), js_string!("sleep"), 1)
        .function(NativeFunction::from_fn_ptr(native_lines), js_string!("lines"), 1)
        .function(NativeFunction::from_fn_ptr(native_grep), js_string!("grep"), 3)
        .function(NativeFunction::from_fn_ptr(native_file_text), js_string!("fileText"), 1)
        .build();
    let list: Vec<Value> = catalog
        .entries
        .values()
        .map(|e| {
            let tool = e.name.split_once("__").map(|(_, t)| t).unwrap_or(&e.name);
            json!({"name": e.name, "namespace": e.namespace, "tool": tool})
        })
        .collect();
    let list = JsValue::from_json(&Value::Array(list), ctx).map_err(fail)?;
    let source = Source::from_bytes(PRELUDE.as_bytes()).with_path(Path::new("kodik-prelude.js"));
    let factory = ctx.eval(source).map_err(fail)?;
    let factory = factory
        .as_callable()
        .ok_or_else(|| ScriptError::new(ErrorKind::ExecutionFailure, "the script prelude is not a function"))?;
    let fmt = factory.call(&JsValue::undefined(), &[natives.into(), list], ctx).map_err(fail)?;
    fmt.as_callable()
        .and_then(|f| JsFunction::from_object(f.clone()))
        .ok_or_else(|| ScriptError::new(ErrorKind::ExecutionFailure, "the script prelude returned no formatter"))
}

// ---- native functions (reachable only through the prelude) ----

fn host_of(ctx: &Context) -> JsResult<Rc<Host>> {
    ctx.get_data::<Rc<Host>>().cloned().ok_or_else(|| JsNativeError::error().with_message("no host").into())
}

fn arg_string(args: &[JsValue], i: usize, ctx: &mut Context) -> JsResult<String> {
    match args.get(i) {
        Some(v) if !v.is_undefined() => Ok(v.to_string(ctx)?.to_std_string_lossy()),
        _ => Ok(String::new()),
    }
}

fn json_value(v: &Value, ctx: &mut Context) -> JsResult<JsValue> {
    JsValue::from_json(v, ctx)
}

fn js_str(s: &str) -> JsValue {
    JsValue::from(JsString::from(s))
}

/// Where in the model's code the running native was called from.
fn call_site(ctx: &Context, host: &Host) -> (Option<u32>, Option<u32>) {
    for frame in ctx.stack_trace() {
        let loc = frame.position();
        if let SourcePath::Path(p) = &loc.path
            && p.as_ref() == Path::new(SCRIPT_PATH)
            && let Some(pos) = loc.position
        {
            return (Some(host.user_line(pos.line_number())), Some(pos.column_number()));
        }
    }
    (None, None)
}

fn native_call(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let name = arg_string(args, 0, ctx)?;
    let (line, column) = call_site(ctx, &host);
    let refuse = |kind: ErrorKind, message: String, ctx: &mut Context| {
        json_value(&json!({"error": kind.as_str(), "message": message, "line": line, "column": column}), ctx)
    };
    if name == crate::TOOL_NAME {
        let msg = "`codemode` cannot be called from a script; write the steps in this script instead".to_string();
        return refuse(ErrorKind::UnknownTool, msg, ctx);
    }
    let Some(entry) = host.catalog.find(&name) else {
        let msg = if host.catalog.model_only.iter().any(|m| m == &name) {
            format!("`{name}` is model-only: call it directly as a tool, not from a script")
        } else if host.catalog.withheld.iter().any(|m| m == &name) {
            format!(
                "`{name}` is not available to this request (its mode does not offer it, it is switched off or \
                 not configured): scripts can call only the tools in ALL_TOOLS"
            )
        } else {
            let s = host.catalog.suggest(&name);
            let hint = kodik_core::error::suggestions_suffix(&s);
            let end = if hint.is_empty() { "." } else { "" };
            format!(
                "no tool `{name}` can be called from a script{hint}{end} Use searchTools(\"keyword\") to find tools."
            )
        };
        return refuse(ErrorKind::UnknownTool, msg, ctx);
    };
    let call_args = match args.get(1) {
        None => json!({}),
        Some(v) if v.is_undefined() || v.is_null() => json!({}),
        // The prelude sends the arguments as JSON text with every string made well-formed (a
        // lone surrogate becomes U+FFFD, as Node writes it), which boa's own conversion would
        // turn into the six characters `\uD83D`.
        Some(v) => match serde_json::from_str::<Value>(&v.to_string(ctx)?.to_std_string_lossy()) {
            Ok(j @ Value::Object(_)) => j,
            Err(e) => {
                let msg = format!("the arguments of {}() are not plain JSON data: {e}", entry.path);
                return refuse(ErrorKind::InvalidToolInput, msg, ctx);
            }
            Ok(_) => {
                let msg = format!("{}() takes one object argument, e.g. {}({{...}})", entry.path, entry.path);
                return refuse(ErrorKind::InvalidToolInput, msg, ctx);
            }
        },
    };
    if let Err(e) = entry.tool.validate(&call_args) {
        let msg = format!("{e} — the tool did not run. Signature: {}", entry.full_signature());
        return refuse(ErrorKind::InvalidToolInput, msg, ctx);
    }
    let made = host.calls.get() + 1;
    host.calls.set(made);
    if made > host.limits.max_tool_calls {
        let msg = format!(
            "the script tried to make more than {} tool calls; the limit stops it. Batch the work into fewer \
             calls, or split it across scripts.",
            host.limits.max_tool_calls
        );
        *host.fatal.borrow_mut() =
            Some(ScriptError::new(ErrorKind::ToolCallLimitExceeded, msg.clone()).at(line, column));
        return refuse(ErrorKind::ToolCallLimitExceeded, msg, ctx);
    }
    let seq = host.next_seq();
    let (promise, resolvers) = JsPromise::new_pending(ctx);
    host.pending.borrow_mut().insert(seq, (entry.name.clone(), resolvers));
    (host.start_call)(seq, entry.name.clone(), call_args);
    let out = json_value(&json!({"line": line, "column": column}), ctx)?;
    if let Some(obj) = out.as_object() {
        obj.set(js_string!("promise"), JsValue::from(promise), false, ctx)?;
    }
    Ok(out)
}

fn native_text(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let s = arg_string(args, 0, ctx)?;
    host.output.text(s);
    Ok(JsValue::undefined())
}

fn native_log(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let level = arg_string(args, 0, ctx)?;
    let message = arg_string(args, 1, ctx)?;
    host.output.log(level, message);
    Ok(JsValue::undefined())
}

fn native_search(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let query = arg_string(args, 0, ctx)?;
    let opts: Value = serde_json::from_str(&arg_string(args, 1, ctx)?).unwrap_or(Value::Null);
    let limit = opts.get("limit").and_then(Value::as_u64).map_or(10, |l| l.clamp(1, 200) as usize);
    let namespace = opts.get("namespace").and_then(Value::as_str);
    let found: Vec<Value> = host
        .catalog
        .search(&query, limit, namespace)
        .into_iter()
        .map(|e| {
            json!({
                "name": e.name,
                "path": e.path,
                "signature": e.full_signature(),
                "description": e.summary(),
            })
        })
        .collect();
    Ok(js_str(&Value::Array(found).to_string()))
}

fn native_describe(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let name = arg_string(args, 0, ctx)?;
    let v = match host.catalog.find(&name) {
        Some(e) => json!({"text": e.describe()}),
        None => {
            let s = host.catalog.suggest(&name);
            let hint = kodik_core::error::suggestions_suffix(&s);
            let end = if hint.is_empty() { "." } else { "" };
            let message = format!("no tool `{name}` can be called from a script{hint}{end}");
            json!({"error": "UnknownTool", "message": message})
        }
    };
    json_value(&v, ctx)
}

fn native_all(_this: &JsValue, _args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let all: Vec<Value> = host
        .catalog
        .entries
        .values()
        .map(|e| json!({"name": e.name, "path": e.path, "description": e.summary()}))
        .collect();
    Ok(js_str(&Value::Array(all).to_string()))
}

fn native_store(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let key = arg_string(args, 0, ctx)?;
    let value = match args.get(1) {
        Some(v) if !v.is_undefined() => Some(v.to_string(ctx)?.to_std_string_lossy()),
        _ => None,
    };
    let set = host.store.lock().unwrap_or_else(|p| p.into_inner()).set(key.clone(), value.clone());
    set.map_err(|message| JsNativeError::range().with_message(message))?;
    host.output.stored(&key, value.as_deref());
    Ok(JsValue::undefined())
}

fn native_load(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let key = arg_string(args, 0, ctx)?;
    let store = host.store.lock().unwrap_or_else(|p| p.into_inner());
    Ok(store.values.get(&key).map_or(JsValue::undefined(), |v| js_str(v)))
}

fn native_sleep(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let host = host_of(ctx)?;
    let ms = args.first().map_or(Ok(0.0), |v| v.to_number(ctx))?;
    let ms = if ms.is_finite() { ms.clamp(0.0, 86_400_000.0) } else { 0.0 };
    let seq = host.next_seq();
    let (promise, resolvers) = JsPromise::new_pending(ctx);
    host.sleepers.borrow_mut().insert(seq, resolvers);
    host.timers.borrow_mut().push(Reverse((Instant::now() + Duration::from_secs_f64(ms / 1000.0), seq)));
    Ok(promise.into())
}

fn native_lines(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = arg_string(args, 0, ctx)?;
    let items: Vec<JsValue> = split_lines(&s).map(js_str).collect();
    Ok(JsArray::from_iter(items, ctx).into())
}

fn native_grep(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let s = arg_string(args, 0, ctx)?;
    let needle = arg_string(args, 1, ctx)?;
    let ignore_case = args.get(2).is_some_and(JsValue::to_boolean);
    let lower_needle = needle.to_lowercase();
    let items: Vec<JsValue> = split_lines(&s)
        .filter(|l| if ignore_case { l.to_lowercase().contains(&lower_needle) } else { l.contains(&needle) })
        .map(js_str)
        .collect();
    Ok(JsArray::from_iter(items, ctx).into())
}

fn native_file_text(_this: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    Ok(js_str(&file_text(&arg_string(args, 0, ctx)?)))
}

/// The file's text in a `read_file` result: the part after `→` of every numbered line
/// (`<spaces><number>→<text>`), each ending in a newline; read_file's bracketed notes (the cut,
/// the encoding) and anything else unnumbered are left out. A file line cannot hold a newline,
/// so every line of the result that starts with a number and `→` is one of the file's.
fn file_text(read_output: &str) -> String {
    let mut out = String::with_capacity(read_output.len());
    for line in split_lines(read_output) {
        let Some((number, text)) = line.split_once('→') else { continue };
        let number = number.trim_start_matches(' ');
        if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

fn split_lines(s: &str) -> impl Iterator<Item = &str> {
    let body = s.strip_suffix('\n').unwrap_or(s);
    let empty = s.is_empty();
    body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(move |_| !empty)
}

// ---- results and errors ----

fn format_value(v: &JsValue, fmt: &JsFunction, ctx: &mut Context, host: &Host) -> Result<Option<String>, ScriptError> {
    if v.is_undefined() {
        return Ok(None);
    }
    if let Some(s) = v.as_string() {
        return Ok(Some(s.to_std_string_lossy()));
    }
    let s = fmt.call(&JsValue::undefined(), std::slice::from_ref(v), ctx).map_err(|e| js_error(e, ctx, host))?;
    Ok(Some(s.to_string(ctx).map_err(|e| js_error(e, ctx, host))?.to_std_string_lossy()))
}

/// An error from the engine itself: engine errors (runtime limits) by kind, JavaScript errors
/// through [`classify`].
fn js_error(err: JsError, ctx: &mut Context, host: &Host) -> ScriptError {
    if let Some(engine) = err.as_engine() {
        return match engine {
            EngineError::RuntimeLimit(RuntimeLimitError::LoopIteration) => {
                let mut e = host.abort_error(ErrorKind::TimeoutExceeded);
                e.message = format!("a loop kept the CPU busy until the time limit. {}", e.message);
                e
            }
            EngineError::RuntimeLimit(RuntimeLimitError::Recursion | RuntimeLimitError::StackSize) => ScriptError::new(
                ErrorKind::ExecutionFailure,
                "stack overflow: the maximum call depth was exceeded (unbounded recursion?)",
            ),
            other => ScriptError::new(ErrorKind::ExecutionFailure, format!("engine error: {other}")),
        };
    }
    match err.into_opaque(ctx) {
        Ok(v) => classify(&v, ctx, host),
        Err(e) => ScriptError::new(ErrorKind::ExecutionFailure, e.to_string()),
    }
}

fn get_prop(obj: &JsObject, key: &str, ctx: &mut Context) -> Option<JsValue> {
    obj.get(JsString::from(key), ctx).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

fn get_string(obj: &JsObject, key: &str, ctx: &mut Context) -> Option<String> {
    get_prop(obj, key, ctx).and_then(|v| v.to_string(ctx).ok()).map(|s| s.to_std_string_lossy())
}

fn get_u32(obj: &JsObject, key: &str, ctx: &mut Context) -> Option<u32> {
    get_prop(obj, key, ctx).and_then(|v| v.as_number()).filter(|n| *n >= 1.0).map(|n| n as u32)
}

/// A value the script threw (or its promise rejected with), as a typed error.
fn classify(v: &JsValue, ctx: &mut Context, host: &Host) -> ScriptError {
    if let Some(s) = v.as_string() {
        let s = s.to_std_string_lossy();
        return ScriptError::new(ErrorKind::ExecutionFailure, format!("uncaught exception (a thrown string): {s}"));
    }
    let Some(obj) = v.as_object() else {
        let shown = v.to_string(ctx).map(|s| s.to_std_string_lossy()).unwrap_or_default();
        return ScriptError::new(ErrorKind::ExecutionFailure, format!("uncaught exception: {shown}"));
    };
    let name = get_string(&obj, "name", ctx);
    let message = get_string(&obj, "message", ctx);
    if name.is_none() && message.is_none() {
        let shown = v.to_json(ctx).ok().flatten().map(|j| j.to_string()).unwrap_or_else(|| "[object]".into());
        return ScriptError::new(ErrorKind::ExecutionFailure, format!("uncaught exception: {shown}"));
    }
    let name = name.unwrap_or_else(|| "Error".into());
    let message = message.unwrap_or_default();
    let kind = ErrorKind::from_js_name(&name).unwrap_or(ErrorKind::ExecutionFailure);
    let (mut line, mut column) = (get_u32(&obj, "line", ctx), get_u32(&obj, "column", ctx));
    if line.is_none()
        && let Some(stack) = get_string(&obj, "stack", ctx)
        && let Some((l, c)) = stack_position(&stack)
    {
        // boa places a ReferenceError at the start of the function it happened in (line 1,
        // column 32 for the script's body): the first use of the name from there is the spot.
        let unknown = message.strip_suffix(" is not defined").filter(|_| name == "ReferenceError");
        match unknown.and_then(|ident| first_use(&host.source, ident, l.saturating_sub(2) as usize)) {
            Some((code_line, col)) => {
                line = Some(code_line + 1 + host.line_offset);
                column = Some(col);
            }
            None => {
                line = Some(host.user_line(l));
                column = Some(c);
            }
        }
    }
    let message = match kind {
        ErrorKind::ExecutionFailure
            if name == "ReferenceError"
                && matches!(
                    message.as_str(),
                    "require is not defined" | "module is not defined" | "exports is not defined"
                ) =>
        {
            format!("uncaught {name}: {message}: {NO_MODULES}")
        }
        ErrorKind::ExecutionFailure => format!("uncaught {name}: {message}"),
        // A failed call's message can end with lines of its output: the hint goes below them.
        ErrorKind::ToolFailure => {
            let sep = if message.contains('\n') { "\n" } else { " " };
            format!("{message}{sep}(uncaught ToolError; catch it with try/catch to handle it)")
        }
        _ => message,
    };
    ScriptError::new(kind, message).at(line, column)
}

/// The first use of the identifier `ident` in `code` from line index `from` on, as a 0-based line
/// index and a 1-based column: whole words only, not after a `.` (a property), not as an object
/// literal's key (`{path: p}`, while `a ? path : b` is a use), not in a `//` comment or on a
/// line where it only appears inside quotes.
fn first_use(code: &str, ident: &str, from: usize) -> Option<(u32, u32)> {
    if ident.is_empty() || !ident.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$') {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    for (i, text) in code.split('\n').enumerate().skip(from) {
        let text = text.split("//").next().unwrap_or(text);
        let mut start = 0;
        while let Some(at) = text[start..].find(ident) {
            let at = start + at;
            let before = text[..at].chars().next_back();
            let after = text[at + ident.len()..].chars().next();
            let quotes = text[..at].chars().filter(|c| matches!(c, '"' | '\'' | '`')).count();
            let key = text[at + ident.len()..].trim_start().starts_with(':')
                && !text[..at].trim_end().ends_with('?')
                && !text[..at].trim_end().ends_with("case");
            if !before.is_some_and(|c| is_word(c) || c == '.') && !after.is_some_and(is_word) && quotes % 2 == 0 && !key
            {
                let col = text[..at].chars().count() + 1;
                return Some((u32::try_from(i).ok()?, u32::try_from(col).ok()?));
            }
            start = at + ident.len();
        }
    }
    None
}

/// The first `script.js:L:C` in a stack string.
fn stack_position(stack: &str) -> Option<(u32, u32)> {
    let needle = format!("{SCRIPT_PATH}:");
    let at = stack.find(&needle)? + needle.len();
    let rest = &stack[at..];
    let mut parts = rest.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty());
    let line = parts.next()?.parse().ok()?;
    let col = parts.next()?.parse().ok()?;
    Some((line, col))
}

/// A parse error with its position moved to the model's lines ("… at line L, col C"). An error
/// the parser only meets in the wrapper's closing `}})()` means the model's code stopped short
/// (an open bracket, a dangling operator): it is reported as the end of the script, at the
/// model's last line, with what was still expected there (K9).
fn parse_error(err: &JsError, code: &str, host: &Host) -> ScriptError {
    let text = err.as_native().map_or_else(|| err.to_string(), |n| n.message().to_string());
    let text = text.trim().trim_start_matches("SyntaxError:").trim().to_string();
    let (head, position) = match text.rfind(" at line ") {
        Some(at) => {
            let (head, tail) = text.split_at(at);
            let nums: Vec<u32> = tail.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok()).collect();
            (head.trim().to_string(), nums.first().copied().map(|l| (l, nums.get(1).copied())))
        }
        None => (text, None),
    };
    // Line 1 of the compiled text is the wrapper's head, the code follows, then its tail.
    let code_lines = u32::try_from(code.split('\n').count()).unwrap_or(u32::MAX);
    let in_tail = position.is_some_and(|(l, _)| l > code_lines.saturating_add(1));
    let found = scan(code);
    // boa reports an unterminated string or template with no position: the scan finds where it
    // opens.
    if head.starts_with("unterminated")
        && (position.is_none() || in_tail)
        && let Some((quote, line, col)) = found.unterminated
    {
        let what = if quote == '`' { "template literal" } else { "string" };
        let message = format!("{head}: the {what} opened here with {quote} is never closed");
        return ScriptError::new(ErrorKind::ParseError, message).at(Some(line + host.line_offset), Some(col));
    }
    // A closing bracket too many closes the hidden wrapper, and the parser only stumbles at its
    // end: the stray bracket is the spot.
    if in_tail && let Some((close, line, col)) = found.stray {
        let message = format!("unexpected `{close}`: it closes no bracket (one too many?)");
        return ScriptError::new(ErrorKind::ParseError, message).at(Some(line + host.line_offset), Some(col));
    }
    if in_tail {
        let (last_line, last_col) = end_of(code);
        let message = if head.starts_with("unterminated") {
            head
        } else {
            format!("unexpected end of script: {}", expected_at_end(code, &head, host.line_offset))
        };
        return ScriptError::new(ErrorKind::ParseError, message).at(Some(last_line + host.line_offset), Some(last_col));
    }
    // A script is a function body, so a static `import`/`export` fails with parser words about
    // `import.meta`; what the model needs is that modules are not there.
    let line_text = position.and_then(|(l, _)| code.split('\n').nth(l.saturating_sub(2) as usize)).unwrap_or("");
    let head = match line_text.trim_start().split([' ', '{', '*']).next() {
        Some("import" | "export") => format!("`{}` is not possible here: {NO_MODULES}", line_text.trim()),
        _ => head,
    };
    match position {
        Some((l, c)) => ScriptError::new(ErrorKind::ParseError, head).at(Some(host.user_line(l)), c),
        None => ScriptError::new(ErrorKind::ParseError, head),
    }
}

/// The 1-based line and column just after the last non-blank character of `code`.
fn end_of(code: &str) -> (u32, u32) {
    let trimmed = code.trim_end();
    let line = trimmed.split('\n').count();
    let col = trimmed.rsplit('\n').next().map_or(0, |l| l.chars().count());
    (u32::try_from(line).unwrap_or(u32::MAX).max(1), u32::try_from(col).unwrap_or(u32::MAX).saturating_add(1))
}

/// What the parser still needed when the code ended: the closer of the innermost bracket left
/// open, or else the parser's own expectation (`primary expression` after a dangling `+`).
fn expected_at_end(code: &str, parser_message: &str, line_offset: u32) -> String {
    if let Some((open, line, col)) = scan(code).open {
        let close = match open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        };
        return format!("expected `{close}` to close the `{open}` at line {}, column {col}", line + line_offset);
    }
    // boa says "unexpected token '}', primary expression" or "expected token ';', got ')' in …";
    // the token it names is the wrapper's, so only what it wanted is kept.
    let wanted = match parser_message.strip_prefix("unexpected token ") {
        Some(rest) => rest.split_once(", ").map_or("", |(_, w)| w),
        None => parser_message.split(", got ").next().unwrap_or(parser_message),
    };
    let wanted = wanted.split(" in ").next().unwrap_or(wanted).trim();
    let expected = wanted.strip_prefix("expected ").unwrap_or(wanted);
    if expected.is_empty() { "the code stops mid-statement".into() } else { format!("expected {expected}") }
}

/// What a plain scan of `code` finds wrong with its brackets and quotes, each with its 1-based
/// line and column. Comments are skipped; a regular expression holding a quote or a bracket can
/// mislead it, which only makes the hints fall back to the parser's own words.
#[derive(Debug, Default, PartialEq, Eq)]
struct Scan {
    /// The innermost bracket still open at the end.
    open: Option<(char, u32, u32)>,
    /// The first closing bracket that closes nothing.
    stray: Option<(char, u32, u32)>,
    /// The opening quote of a string the line ends in, or of a template literal never closed.
    unterminated: Option<(char, u32, u32)>,
}

fn scan(code: &str) -> Scan {
    let mut found = Scan::default();
    let mut stack: Vec<(char, u32, u32)> = Vec::new();
    let (mut line, mut col) = (1u32, 0u32);
    let mut chars = code.chars().peekable();
    let mut quote: Option<(char, u32, u32)> = None;
    let (mut line_comment, mut block_comment, mut escaped) = (false, false, false);
    while let Some(c) = chars.next() {
        col += 1;
        if let Some((q, ql, qc)) = quote {
            match c {
                // A backslash before a newline continues a string on the next line.
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                '\n' if q != '`' => {
                    found.unterminated = Some((q, ql, qc));
                    break;
                }
                _ => {}
            }
            if c == '\n' {
                (line, col) = (line + 1, 0);
            }
            continue;
        }
        if c == '\n' {
            (line, col, line_comment) = (line + 1, 0, false);
            continue;
        }
        if line_comment {
            continue;
        }
        if block_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                col += 1;
                block_comment = false;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some((c, line, col)),
            '/' if chars.peek() == Some(&'/') => line_comment = true,
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                col += 1;
                block_comment = true;
            }
            '(' | '[' | '{' => stack.push((c, line, col)),
            ')' | ']' | '}' => {
                let closes_nothing = stack.pop().is_none();
                if closes_nothing && found.stray.is_none() {
                    found.stray = Some((c, line, col));
                }
            }
            _ => {}
        }
    }
    if found.unterminated.is_none() {
        found.unterminated = quote;
    }
    found.open = stack.pop();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k9_stack_positions_are_found() {
        assert_eq!(stack_position("    at f (script.js:4:11)\n    at <main> (script.js:7:1)"), Some((4, 11)));
        assert_eq!(stack_position("at kodik-prelude.js:1:2"), None);
    }

    #[test]
    fn k9_the_first_use_of_an_unknown_name_is_found() {
        let code = "// foo\nconst s = 'foo';\nobj.foo = 1;\nreturn foo + 1;";
        assert_eq!(first_use(code, "foo", 0), Some((3, 8)));
        assert_eq!(first_use("function f(){\n  return zzz;\n}", "zzz", 0), Some((1, 10)));
        assert_eq!(first_use("return foodstuff", "foo", 0), None);
        assert_eq!(first_use("const o = {foo: 1, bar : 2};\nreturn foo;", "foo", 0), Some((1, 8)));
        assert_eq!(first_use("const o = {\n  bar: 2,\n};\nreturn bar;", "bar", 0), Some((3, 8)));
        assert_eq!(first_use("const v = x ? foo : 1;", "foo", 0), Some((0, 15)));
        assert_eq!(first_use("switch (1) { case foo: }", "foo", 0), Some((0, 19)));
    }

    #[test]
    fn k4_file_text_takes_the_numbers_and_notes_off_a_read() {
        let read = " 9→{\"a\": 1,\n10→\n11→  \"x→y\": \"12→z\"}\n\n[Output cut at the 16 KB limit of one call.]";
        assert_eq!(file_text(read), "{\"a\": 1,\n\n  \"x→y\": \"12→z\"}\n");
        assert_eq!(file_text("[`e.txt` is empty (0 lines).]"), "");
        assert_eq!(file_text("plain text → not numbered"), "");
    }

    #[test]
    fn k9_the_scan_finds_open_brackets_stray_closers_and_unterminated_literals() {
        assert_eq!(scan("f(a, [1, {x: 2}]").open, Some(('(', 1, 2)));
        assert_eq!(scan("return 1 }").stray, Some(('}', 1, 10)));
        assert_eq!(scan("const a = 1;\nconst b = \"oops;\nreturn a").unterminated, Some(('"', 2, 11)));
        assert_eq!(scan("const s = `multi\nline").unterminated, Some(('`', 1, 11)));
        assert_eq!(scan("const s = 'a\\\nb'; // ' in a comment\nreturn s"), Scan::default());
    }

    #[test]
    fn k4_lines_split_like_a_model_expects() {
        assert_eq!(split_lines("a\r\nb\n").collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(split_lines("").count(), 0);
        assert_eq!(split_lines("a\n\nb").collect::<Vec<_>>(), vec!["a", "", "b"]);
    }
}
