//! Scripts in a child process: the one way to stop code after an `await` at once.
//!
//! boa runs the code after an `await` inside a promise job that nothing can interrupt, so on a
//! thread a runaway loop there keeps a core busy, and an allocation loop keeps growing, after
//! the host has answered. With [`crate::CodeModeConfig::worker`] set, each script runs in a
//! child process speaking JSON lines on stdin/stdout; the host kills it the moment the script
//! times out, is cancelled or passes the memory limit, which is measured on that process alone.
//!
//! The worker runs the same engine with the same catalog (built from the tool specs the host
//! sends); everything with an effect stays on the host: tool calls and argument checks go
//! through the host's registry, hooks and approval (K5), and `text()`, console lines and
//! `store()` arrive as they happen, so they survive a kill. A worker whose host goes away
//! (stdin closes) exits at once.
//!
//! A program becomes a worker by calling [`serve_stdio`] — the `kodik codemode-worker`
//! subcommand and this crate's `kodik-codemode-worker` binary do nothing else.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kodik_core::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::config::CodeModeConfig;
use crate::engine::boa::BoaEngine;
use crate::engine::{
    AbortFlag, CallResult, Limits, ScriptEngine, ScriptJob, ScriptOutput, ScriptSide, StartCall, Store, ToScript,
    rss_of,
};
use crate::error::{ErrorKind, ScriptError};

/// What the host sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum HostMessage {
    /// The first line: the script and everything it may use.
    Start(Box<Start>),
    /// Call `seq` settled.
    CallDone { seq: u64, ok: bool, text: String, status: String },
    /// The answer to a [`WorkerMessage::Check`]: the error, or none when the arguments fit.
    Checked { error: Option<String> },
}

#[derive(Debug, Serialize, Deserialize)]
struct Start {
    code: String,
    line_offset: u32,
    specs: Vec<ToolSpec>,
    config: CodeModeConfig,
    /// Time left for the script when the host sent this.
    timeout_ms: u64,
    /// The host's measurement of this machine's loop speed (sizes the loop-iteration backstop).
    loop_rate: f64,
    store: HashMap<String, String>,
    /// Tools left out for this request, for the script's "not available" error.
    #[serde(default)]
    withheld: Vec<String>,
}

/// What the worker sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum WorkerMessage {
    /// The engine is up; the script starts now (the memory baseline is taken here).
    Ready,
    /// Are these arguments valid for `name`? Answered by [`HostMessage::Checked`].
    Check {
        name: String,
        args: Value,
    },
    Call {
        seq: u64,
        name: String,
        args: Value,
    },
    Text {
        text: String,
    },
    Log {
        level: String,
        message: String,
    },
    Store {
        key: String,
        value: Option<String>,
    },
    Done {
        result: Result<Option<String>, ScriptError>,
    },
}

/// Runs one script for the host on the other end of stdin/stdout, then exits. This is the whole
/// `main` of a worker program.
pub fn serve_stdio() -> ExitCode {
    let mut lines = BufReader::new(std::io::stdin()).lines();
    let start = match lines.next() {
        Some(Ok(line)) => match serde_json::from_str::<HostMessage>(&line) {
            Ok(HostMessage::Start(start)) => start,
            _ => return refuse("the first line must be a start message"),
        },
        _ => return refuse("no start message on stdin"),
    };
    let out: Arc<Mutex<std::io::Stdout>> = Arc::new(Mutex::new(std::io::stdout()));
    let send = {
        let out = Arc::clone(&out);
        move |message: &WorkerMessage| write_line(&mut *out.lock().unwrap_or_else(|p| p.into_inner()), message)
    };
    let send: Arc<dyn Fn(&WorkerMessage) -> bool + Send + Sync> = Arc::new(send);

    let (to_script, from_host) = std::sync::mpsc::channel::<ToScript>();
    let (checked_tx, checked_rx) = std::sync::mpsc::channel::<Option<String>>();
    {
        std::thread::spawn(move || {
            for line in lines {
                let Ok(line) = line else { break };
                match serde_json::from_str::<HostMessage>(&line) {
                    Ok(HostMessage::CallDone { seq, ok, text, status }) => {
                        let _ = to_script.send(ToScript::CallDone { seq, result: CallResult { ok, text, status } });
                    }
                    Ok(HostMessage::Checked { error }) => {
                        let _ = checked_tx.send(error);
                    }
                    _ => {}
                }
            }
            // The host is gone: nobody is left to answer, and code after an `await` would never
            // look at an abort flag, so the process ends here.
            std::process::exit(2);
        });
    }

    crate::engine::boa::set_loop_rate(start.loop_rate);
    let checker = Arc::new(Checker { send: Arc::clone(&send), answers: Mutex::new(checked_rx) });
    let mut registry = ToolRegistry::new();
    for spec in start.specs {
        registry.register(RemoteTool { spec, checker: Arc::clone(&checker) });
    }
    let mut catalog = Catalog::build(&registry, &start.config);
    catalog.withheld = start.withheld;
    let catalog = Arc::new(catalog);
    let mut store = Store::default();
    for (key, value) in start.store {
        let _ = store.set(key, Some(value));
    }
    let config = &start.config;
    let limits = Limits {
        deadline: Instant::now() + Duration::from_millis(start.timeout_ms),
        max_tool_calls: config.max_tool_calls,
        // Measured and enforced by the host, on this whole process.
        memory: None,
        timeout_secs: config.timeout,
        memory_mb: config.memory_limit_mb,
    };
    let start_call: StartCall = {
        let send = Arc::clone(&send);
        Box::new(move |seq, name, args| {
            send(&WorkerMessage::Call { seq, name, args });
        })
    };
    let job = ScriptJob {
        code: start.code,
        line_offset: start.line_offset,
        catalog,
        limits,
        bridge: ScriptSide {
            start_call,
            from_host,
            // Unused: the host stops a worker by killing it.
            abort: Arc::new(AbortFlag::default()),
            output: Arc::new(Forward { send: Arc::clone(&send) }),
            store: Arc::new(Mutex::new(store)),
        },
    };
    send(&WorkerMessage::Ready);
    let result = BoaEngine.run(job);
    if send(&WorkerMessage::Done { result }) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn refuse(why: &str) -> ExitCode {
    eprintln!("kodik codemode worker: {why}; this program is started by the codemode tool, not by hand");
    ExitCode::FAILURE
}

fn write_line(out: &mut impl Write, message: &impl Serialize) -> bool {
    let Ok(mut line) = serde_json::to_vec(message) else { return false };
    line.push(b'\n');
    out.write_all(&line).and_then(|()| out.flush()).is_ok()
}

/// Asks the host whether arguments fit a tool, one question at a time (the script thread is the
/// only asker and waits for each answer).
struct Checker {
    send: Arc<dyn Fn(&WorkerMessage) -> bool + Send + Sync>,
    answers: Mutex<Receiver<Option<String>>>,
}

/// A tool as the worker sees it: its spec, and argument checks answered by the host.
struct RemoteTool {
    spec: ToolSpec,
    checker: Arc<Checker>,
}

#[async_trait]
impl Tool for RemoteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        let answers = self.checker.answers.lock().unwrap_or_else(|p| p.into_inner());
        if !(self.checker.send)(&WorkerMessage::Check { name: self.spec.name.clone(), args: args.clone() }) {
            return Err(ToolError::Failed("the host is gone".into()));
        }
        match answers.recv() {
            Ok(None) => Ok(()),
            Ok(Some(error)) => Err(ToolError::Failed(error)),
            Err(_) => Err(ToolError::Failed("the host is gone".into())),
        }
    }

    async fn call(&self, _args: Value, _cx: &ToolContext) -> ToolOutput {
        // Scripts start calls through the bridge; nothing calls a remote tool directly.
        ToolOutput::error("a worker's tools run on the host")
    }
}

/// The worker's script output: each line goes to the host as it happens.
struct Forward {
    send: Arc<dyn Fn(&WorkerMessage) -> bool + Send + Sync>,
}

impl ScriptOutput for Forward {
    fn text(&self, text: String) {
        (self.send)(&WorkerMessage::Text { text });
    }

    fn log(&self, level: String, message: String) {
        (self.send)(&WorkerMessage::Log { level, message });
    }

    fn stored(&self, key: &str, value: Option<&str>) {
        (self.send)(&WorkerMessage::Store { key: key.to_string(), value: value.map(str::to_string) });
    }
}

// ---- the host's side ----

/// A running worker process; dropping it kills the process.
pub(crate) struct Worker {
    child: Arc<Mutex<Option<Child>>>,
    pid: u32,
    /// The worker's resident size when its script started; 0 until then.
    base_rss: Arc<AtomicU64>,
}

/// What the host side of a worker needs from the run.
pub(crate) struct HostSide {
    pub registry: ToolRegistry,
    pub start_call: StartCall,
    /// Settled calls (and wake-ups) for the script, forwarded to the process.
    pub from_host: Receiver<ToScript>,
    pub output: Arc<dyn ScriptOutput>,
    pub store: Arc<Mutex<Store>>,
    pub done: tokio::sync::oneshot::Sender<Result<Option<String>, ScriptError>>,
    /// The host catalog's [`Catalog::withheld`].
    pub withheld: Vec<String>,
}

impl Worker {
    /// Starts `command` and hands it the script; everything the worker says is served on
    /// threads of its own until it exits.
    pub fn spawn(
        command: &[String],
        code: &str,
        line_offset: u32,
        config: &CodeModeConfig,
        deadline: Instant,
        side: HostSide,
    ) -> std::io::Result<Self> {
        let Some((program, args)) = command.split_first() else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the worker command is empty"));
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let pid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the worker's pipes were not set up"));
        };
        let worker = Self { child: Arc::new(Mutex::new(Some(child))), pid, base_rss: Arc::new(AtomicU64::new(0)) };

        let HostSide { registry, start_call, from_host, output, store, done, withheld } = side;
        let specs: Vec<ToolSpec> = registry.specs().filter(|s| s.name != crate::TOOL_NAME).cloned().collect();
        let start = HostMessage::Start(Box::new(Start {
            code: code.to_string(),
            line_offset,
            specs,
            config: CodeModeConfig { worker: None, ..config.clone() },
            timeout_ms: u64::try_from(deadline.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(u64::MAX),
            loop_rate: crate::engine::boa::loop_rate(),
            store: store.lock().unwrap_or_else(|p| p.into_inner()).values.clone(),
            withheld,
        }));
        let stdin = Arc::new(Mutex::new(stdin));
        let send = |stdin: &Mutex<ChildStdin>, message: &HostMessage| {
            write_line(&mut *stdin.lock().unwrap_or_else(|p| p.into_inner()), message)
        };
        if !send(&stdin, &start) {
            return Err(std::io::Error::other("the worker did not take its script"));
        }

        // Settled calls → the worker. Ends when the run drops its senders.
        {
            let stdin = Arc::clone(&stdin);
            std::thread::spawn(move || {
                for message in from_host {
                    if let ToScript::CallDone { seq, result } = message {
                        let CallResult { ok, text, status } = result;
                        if !send(&stdin, &HostMessage::CallDone { seq, ok, text, status }) {
                            break;
                        }
                    }
                }
            });
        }
        // The worker's messages → the run.
        {
            let base_rss = Arc::clone(&worker.base_rss);
            let child = Arc::clone(&worker.child);
            std::thread::spawn(move || {
                let mut result = None;
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let Ok(message) = serde_json::from_str::<WorkerMessage>(&line) else { continue };
                    match message {
                        WorkerMessage::Ready => base_rss.store(rss_of(pid).unwrap_or(1).max(1), Ordering::SeqCst),
                        WorkerMessage::Check { name, args } => {
                            let error = match registry.get(&name) {
                                Some(tool) => tool.validate(&args).err().map(|e| e.to_string()),
                                None => Some(format!("no tool `{name}`")),
                            };
                            send(&stdin, &HostMessage::Checked { error });
                        }
                        WorkerMessage::Call { seq, name, args } => start_call(seq, name, args),
                        WorkerMessage::Text { text } => output.text(text),
                        WorkerMessage::Log { level, message } => output.log(level, message),
                        WorkerMessage::Store { key, value } => {
                            let _ = store.lock().unwrap_or_else(|p| p.into_inner()).set(key, value);
                        }
                        WorkerMessage::Done { result: r } => {
                            result = Some(r);
                            break;
                        }
                    }
                }
                let result = result.unwrap_or_else(|| {
                    // Never `wait` here: a kill takes the lock, and this thread must not hold it.
                    let status = child
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    let how = status.map_or_else(|| "exited".to_string(), |s| format!("exited ({s})"));
                    Err(ScriptError::new(
                        ErrorKind::ExecutionFailure,
                        format!("the script's worker process {how} before the script finished"),
                    ))
                });
                let _ = done.send(result);
            });
        }
        Ok(worker)
    }

    /// Whether the worker grew past `limit` bytes since its script started.
    pub fn memory_exceeded(&self, limit: u64) -> bool {
        let base = self.base_rss.load(Ordering::SeqCst);
        base > 0 && rss_of(self.pid).is_some_and(|now| now.saturating_sub(base) > limit)
    }

    /// Kills the process now (idempotent); it is reaped on a thread of its own.
    pub fn kill(&self) {
        let taken = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = taken {
            let _ = child.kill();
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}
