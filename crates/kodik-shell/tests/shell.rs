//! Behaviour of shell, get_terminal_output and kill_terminal with real child processes.
//! Every wait is bounded, so no test can hang.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kodik_core::events::CollectingSink;
use kodik_core::{
    CommandInterceptor, Event, PreviewConfig, TerminalEvent, Tool, ToolCall, ToolContext, ToolOutput, ToolRegistry,
    ToolStatus, Workspace, dispatch,
};
use kodik_shell::ShellToolset;
use serde_json::{Value, json};

struct Env {
    dir: tempfile::TempDir,
    toolset: ShellToolset,
    registry: ToolRegistry,
    cx: ToolContext,
    sink: Arc<CollectingSink>,
}

fn env_with(f: impl FnOnce(ShellToolset) -> ShellToolset) -> Env {
    env_in(tempfile::tempdir().unwrap(), f)
}

/// [`env_with`] in a given folder: a host process that is killed never removes its own.
fn env_in(dir: tempfile::TempDir, f: impl FnOnce(ShellToolset) -> ShellToolset) -> Env {
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let spool = dir.path().join(".spool");
    let toolset =
        f(ShellToolset::new().kill_grace(Duration::from_millis(300)).preview(PreviewConfig::default().spool_in(spool)));
    let mut registry = ToolRegistry::new();
    toolset.register(&mut registry);
    let sink = Arc::new(CollectingSink::default());
    let mut cx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    cx.events = sink.clone();
    Env { dir, toolset, registry, cx, sink }
}

fn env() -> Env {
    env_with(|t| t)
}

impl Env {
    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let call = ToolCall::new("c1", tool, args);
        tokio::time::timeout(Duration::from_secs(90), dispatch(&self.registry, &call, &self.cx))
            .await
            .expect("the call settled in time")
    }

    async fn shell(&self, command: &str) -> ToolOutput {
        self.call("shell", json!({ "command": command })).await
    }

    /// Runs `command` and lets it go to the background after ~1 s through the S4 rule.
    async fn background(&self, command: &str) -> (String, ToolOutput) {
        self.cx.turn.call_finished();
        let out = self.shell(command).await;
        assert_eq!(out.meta["running"], true, "{}", out.text_content());
        (out.meta["terminal_id"].as_str().unwrap().to_string(), out)
    }

    /// Terminal events collected within `within`, once at least `n` arrived.
    async fn events(&self, n: usize, within: Duration) -> Vec<TerminalEvent> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        loop {
            for e in self.sink.take() {
                if let Event::Terminal(t) = e {
                    got.push(t);
                }
            }
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Whether `pid` is gone (dead processes may linger as zombies when init does not reap).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, r)| r.trim_start().chars().next());
            matches!(state, Some(Some('Z') | Some('X')))
        }
    }
}

async fn wait_gone(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    process_gone(pid)
}

fn grandchild_pid(text: &str) -> i32 {
    let at = text.find("gc=").expect("grandchild pid printed");
    text[at + 3..].split_whitespace().next().unwrap().parse().unwrap()
}

/// Starts a grandchild that ignores SIGTERM (and so does its `sleep`, which inherits that).
const STUBBORN_BG: &str = "bash -c 'trap \"\" TERM; sleep 300' &";

/// A command whose grandchild ignores SIGTERM (and so does its `sleep`, which inherits that).
const STUBBORN: &str = "bash -c 'trap \"\" TERM; sleep 300' & echo \"gc=$!\"; wait";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_stdout_and_stderr_merge_in_arrival_order() {
    let e = env();
    let out = e.shell("echo a; echo b >&2; echo c; echo d >&2; printf e; printf f >&2").await;
    assert_eq!(out.status, ToolStatus::Success);
    assert!(out.text_content().starts_with("a\nb\nc\nd\nef\n"), "{}", out.text_content());
    assert_eq!(out.meta["exit_code"], 0);
    assert_eq!(out.meta["running"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_ansi_escapes_are_stripped_and_the_real_exit_code_returned() {
    let e = env();
    let out = e.shell("printf '\\033[1;31mred\\033[0m \\033]0;title\\007plain\\n'; exit 7").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.meta["exit_code"], 7);
    let text = out.text_content();
    assert!(text.starts_with("red plain\n"), "{text:?}");
    assert!(!text.contains('\u{1b}'));
    assert!(text.contains("[exit code 7"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_sigpipe_is_back_to_default_so_pipelines_end_quietly() {
    let e = env();
    let out = e.shell("yes | head -n 2; echo done").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    // With SIGPIPE ignored (Rust's default in the host) `yes` would complain about a broken pipe.
    assert!(out.text_content().starts_with("y\ny\ndone\n"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_the_exit_code_comes_when_the_output_pipe_closes_before_the_end() {
    let e = env();
    let t = Instant::now();
    let out = e.shell("echo before; exec >/dev/null 2>&1; sleep 0.3; exit 4").await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(out.meta["exit_code"], 4, "{}", out.text_content());
    assert_eq!(out.meta["running"], false);
    assert!(out.text_content().starts_with("before\n"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_configured_variables_reach_the_command_and_a_nul_byte_is_a_clear_error() {
    let e = env_with(|t| t.env("KODIK_TEST_VAR", "set by the host").unset_env("HOME"));
    let out = e.shell("echo \"$KODIK_TEST_VAR|${HOME-unset}\"").await;
    assert!(out.text_content().starts_with("set by the host|unset\n"), "{}", out.text_content());
    let bad = env_with(|t| t.env("KODIK_TEST_VAR", "a\u{0}b"));
    let out = bad.shell("true").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("NUL"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_a_command_with_a_nul_byte_gets_a_clear_error() {
    let e = env();
    let out = e.shell("echo a\u{0}b").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert!(out.text_content().contains("NUL"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_s13_no_terminal_and_a_hardened_environment() {
    let e = env();
    let out = e
        .shell("echo \"$TERM $HISTFILE $GIT_TERMINAL_PROMPT $PAGER $NO_COLOR\"; [ -t 0 ] || echo no-tty; read x; echo read=$?; tty")
        .await;
    let text = out.text_content();
    assert!(text.contains("dumb /dev/null 0 cat 1"), "{text}");
    assert!(text.contains("no-tty") && text.contains("read=1"), "stdin is closed: {text}");
    assert!(text.contains("not a tty"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_timeouts_are_clamped_not_rejected() {
    let e = env();
    let t = Instant::now();
    let out = e.call("shell", json!({"command": "sleep 1.5; echo done", "timeout": 10})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("done"), "10 ms counts as 5000 ms, so the command finished");
    assert!(t.elapsed() >= Duration::from_millis(1400));
    assert_eq!(out.meta["timeout_ms"], 5000);
    let out = e.call("shell", json!({"command": "true", "timeout": 3_600_000})).await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(out.meta["timeout_ms"], 60000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s5_a_timeout_backgrounds_and_the_end_arrives_as_a_terminal_event() {
    let e = env();
    let t = Instant::now();
    let out = e.shell("echo first; sleep 6.5; echo second; exit 4").await;
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(4900) && waited < Duration::from_millis(6400), "{waited:?}");
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(out.meta["running"], true);
    let id = out.meta["terminal_id"].as_str().unwrap().to_string();
    let text = out.text_content();
    assert!(text.contains("first") && text.contains("terminal event") && text.contains(&id), "{text}");
    assert!(text.contains("NOT stopped"), "{text}");

    let events = e.events(1, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 1, "exactly one terminal event");
    let ev = &events[0];
    assert_eq!(ev.terminal_id, id);
    assert_eq!(ev.exit_code, Some(4));
    assert_eq!(ev.status, ToolStatus::Error);
    assert!(ev.duration_ms >= 6000, "{}", ev.duration_ms);
    assert!(ev.unread_output.contains("second"), "{:?}", ev.unread_output);
    assert!(!ev.unread_output.contains("first"), "only unread output: {:?}", ev.unread_output);
}

/// S5, K1: a program (a code-mode script) reads results, never events: a script polling a
/// command with get_terminal_output gets its last lines even after the end event went out (the
/// event took them as read before, and the script's next check said "no new output").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_k1_a_program_polling_a_command_gets_its_last_lines_after_the_end_event() {
    let mut e = env();
    e.cx.session = Arc::new(kodik_core::Session::new().for_program());
    let (id, _) = e.background("echo one; sleep 1.5; echo LAST").await;
    // The end event goes out while nobody checks.
    let events = e.events(1, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 1, "the end is still announced");
    let done = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert_eq!(done.meta["running"], false, "{}", done.text_content());
    assert!(done.text_content().contains("LAST"), "{}", done.text_content());
    let again = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert!(!again.text_content().contains("LAST"), "read once: {}", again.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_g15_get_terminal_output_returns_only_new_output_then_completion() {
    let e = env();
    let (id, out) = e.background("echo one; sleep 2; echo two; sleep 1.5; echo three").await;
    assert!(out.text_content().contains("one"));

    let first = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert_eq!(first.meta["running"], true);
    assert!(!first.text_content().contains("one"), "already seen: {}", first.text_content());

    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = String::new();
    while !seen.contains("two") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen.push_str(&e.call("get_terminal_output", json!({"terminal_id": id})).await.text_content());
    }
    assert!(seen.contains("two") && !seen.contains("one"), "{seen}");
    let again = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert!(again.text_content().contains("no new output"), "{}", again.text_content());
    assert!(!again.text_content().contains("two"));

    // Completion comes either as the event or in a check, and a repeated empty check still reports it.
    let events = e.events(1, Duration::from_secs(5)).await;
    let done = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    let done2 = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    let all: String = events.iter().map(|ev| ev.unread_output.clone()).collect::<String>() + &done.text_content();
    assert_eq!(all.matches("three").count(), 1, "the end's output is delivered once: {all}");
    for d in [&done, &done2] {
        assert_eq!(d.meta["running"], false);
        assert_eq!(d.meta["exit_code"], 0);
        assert_eq!(d.status, ToolStatus::Success);
        assert!(d.text_content().contains("[exit code 0"), "{}", d.text_content());
    }
    for key in [
        "running",
        "terminal_id",
        "exit_code",
        "status",
        "duration_ms",
        "output_bytes",
        "output_lines",
        "truncated",
        "full_output",
    ] {
        assert!(done.meta.get(key).is_some(), "S7 field {key} in {}", done.meta);
        assert!(out.meta.get(key).is_some(), "S7 field {key} in {}", out.meta);
    }
    assert_eq!(done.meta["output_lines"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_s11_kill_terminal_stops_the_group_including_a_stubborn_grandchild() {
    let e = env();
    let (id, out) = e.background(STUBBORN).await;
    let gc = grandchild_pid(&out.text_content());
    assert!(!process_gone(gc));
    let t = Instant::now();
    let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
    assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
    assert_eq!(killed.meta["status"], "stopped");
    assert_eq!(killed.meta["running"], false);
    assert!(t.elapsed() < Duration::from_secs(4));
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "grandchild {gc} survived");
    // kill_terminal is not announced (S12), and the terminal is freed.
    assert!(e.events(1, Duration::from_millis(500)).await.is_empty());
    let after = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert_eq!(after.status, ToolStatus::Error);
    assert!(after.text_content().contains("kill_terminal"), "{}", after.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_exit_130_by_itself_is_an_error_not_stopped() {
    let e = env();
    let out = e.shell("echo bye; exit 130").await;
    assert_eq!(out.status, ToolStatus::Error);
    assert_eq!(out.meta["status"], "error");
    assert_eq!(out.meta["exit_code"], 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_a_user_stop_is_stopped_and_announced_once_in_the_next_result() {
    let e = env();
    let (id, _) = e.background("echo started; sleep 30").await;
    assert!(e.toolset.user_stop(&id));
    assert!(!e.toolset.user_stop("term-999"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(e.events(1, Duration::from_millis(100)).await.is_empty(), "not emitted before the next result");

    let next = e.shell("echo next").await;
    let text = next.text_content();
    assert!(text.contains("the user stopped `echo started; sleep 30`"), "{text}");
    let events = e.events(1, Duration::from_secs(1)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status, ToolStatus::Stopped);
    assert_eq!(events[0].terminal_id, id);

    let later = e.shell("echo later").await;
    assert!(!later.text_content().contains("user stopped"), "announced once");
    let state = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert_eq!(state.status, ToolStatus::Stopped);
    assert_eq!(state.meta["status"], "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_interactive_commands_fail_at_once_and_say_to_ask_the_user() {
    let e = env();
    for cmd in ["vim notes.txt", "python3", "ssh example.org", "git log | less", "psql mydb", "top"] {
        let t = Instant::now();
        let out = e.shell(cmd).await;
        assert_eq!(out.status, ToolStatus::Error, "{cmd}");
        // Refused before approval, like any argument error (S6, S8).
        assert_eq!(out.meta["error_kind"], "invalid_input", "{cmd}");
        assert!(Tool::validate(&e.toolset.tools().0, &json!({"command": cmd})).is_err());
        assert!(out.text_content().contains("ask the user"), "{cmd}: {}", out.text_content());
        assert!(t.elapsed() < Duration::from_secs(1), "{cmd}");
    }
    let ok = e.shell("python3 -c 'print(6*7)'").await;
    assert!(ok.text_content().contains("42"), "{}", ok.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_a_password_prompt_at_run_time_stops_the_command() {
    let e = env();
    let t = Instant::now();
    let out = e.shell("echo connecting; printf 'Password: '; sleep 30").await;
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert_eq!(out.status, ToolStatus::Error);
    let text = out.text_content();
    assert!(text.contains("connecting") && text.contains("Password:") && text.contains("Ask the user"), "{text}");
    assert_eq!(out.meta["running"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_aliases_work_and_other_parameters_are_rejected_before_approval() {
    let e = env();
    let root = e.cx.workspace.primary_root().to_path_buf();
    for args in [
        json!({"command": "pwd", "cwd": "sub"}),
        json!({"command": "pwd", "working_directory": "sub", "timeout_ms": 6000}),
        json!({"command": "pwd", "workdir": root.join("sub"), "run_in_background": true, "description": "where"}),
        json!({"command": "pwd", "workdir": "sub", "is_background": true, "requires_approval": false}),
    ] {
        let out = e.call("shell", args.clone()).await;
        assert_eq!(out.status, ToolStatus::Success, "{args}: {}", out.text_content());
        assert!(out.text_content().starts_with(&format!("{}\n", root.join("sub").display())), "{args}");
    }
    let (shell, _, _) = e.toolset.tools();
    for (args, needle) in [
        (json!({"command": ["git", "status"]}), "not a list of arguments"),
        (json!({"command": "ls", "mode": "background"}), "mode"),
        (json!({"command": "   "}), "empty"),
        (json!({"cmd": "ls"}), "cmd"),
    ] {
        let err = Tool::validate(&shell, &args).unwrap_err().to_string();
        assert!(err.contains(needle), "{args}: {err}");
        let out = e.call("shell", args).await;
        assert_eq!(out.meta["error_kind"], "invalid_input");
    }
    let outside = e.call("shell", json!({"command": "pwd", "workdir": "/"})).await;
    assert!(outside.text_content().contains("outside the workspace"), "{}", outside.text_content());
    let missing = e.call("shell", json!({"command": "pwd", "workdir": "nope"})).await;
    assert!(missing.text_content().contains("not an existing folder"), "{}", missing.text_content());
}

struct PatchInterceptor;

#[async_trait]
impl CommandInterceptor for PatchInterceptor {
    async fn intercept(&self, command: &str, workdir: &Path, _cx: &ToolContext) -> Option<ToolOutput> {
        command
            .trim_start()
            .starts_with("apply_patch")
            .then(|| ToolOutput::text(format!("patched in {}", workdir.display())))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_an_apply_patch_heredoc_goes_to_the_interceptor_and_starts_no_process() {
    let mut e = env();
    e.cx.interceptor = Some(Arc::new(PatchInterceptor));
    let marker = e.dir.path().join("ran");
    let cmd = format!(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\nEOF\ntouch {}",
        marker.display()
    );
    let out = e.shell(&cmd).await;
    assert_eq!(out.text_content(), format!("patched in {}", e.cx.workspace.primary_root().display()));
    assert!(!marker.exists(), "no process ran");
    let normal = e.shell("echo plain").await;
    assert!(normal.text_content().starts_with("plain\n"));
}

/// Takes a patch only when it is the whole command, as kodik-edit's interceptor does.
struct StrictPatchInterceptor;

#[async_trait]
impl CommandInterceptor for StrictPatchInterceptor {
    async fn intercept(&self, command: &str, _workdir: &Path, _cx: &ToolContext) -> Option<ToolOutput> {
        let body = command.strip_prefix("apply_patch <<'EOF'\n")?;
        let patch = body.strip_suffix("EOF\n").or_else(|| body.strip_suffix("EOF"))?;
        (!patch.contains("\nEOF\n")).then(|| ToolOutput::text("patched"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_a_patch_followed_or_preceded_by_other_commands_is_refused_with_a_way_on() {
    let mut e = env();
    e.cx.interceptor = Some(Arc::new(StrictPatchInterceptor));
    let marker = e.dir.path().join("ran");
    let patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: q3.txt\n+x\n*** End Patch\nEOF\n";
    for cmd in [
        format!("{patch}touch {}", marker.display()),
        format!("touch {}; {patch}", marker.display()),
        format!("touch {} && bash -lc \"{patch}\"", marker.display()),
    ] {
        let out = e.shell(&cmd).await;
        let text = out.text_content();
        assert_eq!(out.status, ToolStatus::Error, "{cmd}: {text}");
        assert!(text.contains("nothing was run") && text.contains("separate shell call"), "{text}");
        assert_eq!(out.meta["error_kind"], "patch_not_alone");
        assert!(!marker.exists(), "nothing ran for {cmd}");
    }
    assert_eq!(e.shell(patch).await.text_content(), "patched");
    for cmd in ["echo apply_patch", "command -v apply_patch || echo none"] {
        let out = e.shell(cmd).await;
        assert_eq!(out.status, ToolStatus::Success, "{cmd}: {}", out.text_content());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g16_a_command_naming_an_ignored_path_is_refused() {
    let e = env();
    let root = e.dir.path();
    std::fs::write(root.join(".kodikignore"), "secret.env\nprivate/\n").unwrap();
    std::fs::write(root.join("secret.env"), "TOKEN=1").unwrap();
    std::fs::write(root.join("ok.txt"), "fine").unwrap();
    std::fs::create_dir_all(root.join("private")).unwrap();
    for cmd in [
        "cat secret.env",
        "cat ./sub/../secret.env",
        "grep -r x private/keys",
        "echo x > secret.env",
        "cd sub && cat ../secret.env",
        "cd private",
    ] {
        let out = e.shell(cmd).await;
        assert_eq!(out.status, ToolStatus::Error, "{cmd}: {}", out.text_content());
        assert!(out.text_content().contains(".kodikignore"), "{cmd}");
    }
    assert_eq!(std::fs::read_to_string(root.join("secret.env")).unwrap(), "TOKEN=1");
    let ok = e.shell("cat ok.txt").await;
    assert!(ok.text_content().starts_with("fine"), "{}", ok.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_g17_g19_one_gib_of_output_keeps_memory_bounded() {
    let e = env();
    let t = Instant::now();
    let out = e.call("shell", json!({"command": "head -c 1G /dev/zero | tr '\\0' x", "timeout": 60000})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.meta);
    assert_eq!(out.meta["output_bytes"], 1u64 << 30);
    assert_eq!(out.meta["truncated"], true);
    let text = out.text_content();
    assert!(text.len() < 64 * 1024, "the preview is bounded: {} bytes", text.len());
    assert!(text.contains("bytes omitted from the middle"));
    let full = PathBuf::from(out.meta["full_output"].as_str().unwrap());
    assert_eq!(std::fs::metadata(&full).unwrap().len(), 1 << 30, "the spool holds every byte");
    std::fs::remove_file(&full).unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(hwm_kib < 256 * 1024, "peak RSS of the test process {hwm_kib} KiB");
    eprintln!("1 GiB captured in {:?}, test process peak RSS {} MiB", t.elapsed(), hwm_kib / 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_s7_g20_escapes_split_across_reads_are_stripped_alike_from_preview_and_saved_output() {
    // ~13 MB of coloured lines with a title sequence each: escapes land across read boundaries
    // at every offset, and stripping happens in the read buffer itself.
    let e = env();
    let n = 400_000;
    let cmd = format!("seq 1 {n} | awk '{{printf \"\\033[1;32m%d\\033[0m ok\\033]0;t%d\\007\\n\", $1, $1}}'");
    let out = e.call("shell", json!({"command": cmd, "timeout": 60000})).await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    let expected: String = (1..=n).map(|i| format!("{i} ok\n")).collect();
    assert_eq!(out.meta["output_bytes"], expected.len() as u64, "escapes are not counted as output");
    assert_eq!(out.meta["output_lines"], n);
    let full = PathBuf::from(out.meta["full_output"].as_str().expect("saved"));
    let saved = std::fs::read_to_string(&full).unwrap();
    assert!(saved == expected, "the saved output is the stripped text, byte for byte");
    let text = out.text_content();
    let (head, rest) = text.split_once("\n[… ").expect("a marked middle");
    let tail = rest.split_once("]\n").expect("the marker ends").1;
    // The result's status line follows the output after one newline.
    let tail = tail.rsplit_once("[exit code").map_or(tail, |(t, _)| t).trim_end();
    assert!(head.len() > 1000 && saved.starts_with(head), "the preview's head is the file's start");
    assert!(tail.len() > 1000 && saved.trim_end().ends_with(tail), "the preview's tail is the file's end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_g9_binary_output_is_saved_byte_for_byte_and_shown_without_escapes() {
    let e = env();
    // 2 MB of pseudo-random bytes: NUL, ESC and BEL bytes all over, as in any binary data.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..2_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as u8
        })
        .collect();
    std::fs::write(e.dir.path().join("data.bin"), &data).unwrap();
    let out = e
        .call("shell", json!({"command": "printf 'start \\033[1mbold\\033[0m\\n'; cat data.bin", "timeout": 60000}))
        .await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.meta);
    let full = PathBuf::from(out.meta["full_output"].as_str().expect("saved"));
    let saved = std::fs::read(&full).unwrap();
    assert!(saved.ends_with(&data), "the binary data is saved as it came, not stripped");
    assert!(saved.starts_with(b"start "), "{:?}", &saved[..20]);
    assert_eq!(out.meta["output_bytes"], saved.len() as u64);
    let text = out.text_content();
    assert!(text.starts_with("start bold\n"), "the text before it is shown stripped: {:?}", &text[..40]);
    assert!(text.contains("bytes omitted from the middle"));
    assert!(!text.contains(['\x1b', '\x07']), "the head and tail shown are stripped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_g18_an_unusable_spool_folder_falls_back_to_a_bounded_preview_with_a_note() {
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let bad = blocker.path().join("spool");
    let e = env_with(|t| t.preview(PreviewConfig::with_limit(2000).spool_in(bad)));
    let out = e.shell("seq 1 20000").await;
    assert_eq!(out.status, ToolStatus::Success);
    assert_eq!(out.meta["truncated"], true);
    assert_eq!(out.meta["full_output"], Value::Null);
    let text = out.text_content();
    assert!(text.starts_with("1\n2\n") && text.contains("20000\n"), "head and tail kept");
    assert!(text.contains("could not be saved"), "{text}");
    assert!(text.len() < 3000, "{}", text.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_a_default_timeout_command_goes_to_the_background_1s_after_another_call_finished() {
    let e = env();
    let turn = e.cx.turn.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        turn.call_finished();
    });
    let t = Instant::now();
    let out = e.shell("sleep 4; echo late").await;
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(1400) && waited < Duration::from_millis(3000), "{waited:?}");
    assert_eq!(out.meta["running"], true);
    assert!(out.text_content().contains("another call of this turn finished"), "{}", out.text_content());

    // An explicit timeout is not cut short by the batch rule.
    let out = e.call("shell", json!({"command": "sleep 2; echo kept", "timeout": 8000})).await;
    assert_eq!(out.meta["running"], false);
    assert!(out.text_content().contains("kept"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_a_new_user_message_ends_the_wait_without_killing_the_command() {
    let e = env();
    let marker = e.dir.path().join("survived");
    let (shell, _, _) = e.toolset.tools();
    let cx = e.cx.for_call("c9");
    let cancel = cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let t = Instant::now();
    let args = json!({"command": format!("sleep 1.5; echo done > {}", marker.display()), "timeout": 30000});
    let out = tokio::time::timeout(Duration::from_secs(10), Tool::call(&shell, args, &cx)).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(out.meta["running"], true);
    assert!(out.text_content().contains("new user message"), "{}", out.text_content());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !marker.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(marker.exists(), "the command was not killed");
    let events = e.events(1, Duration::from_secs(2)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g21_dropping_the_toolset_ends_every_process_group_it_started() {
    let e = env();
    let (_, out) = e.background(STUBBORN).await;
    let gc = grandchild_pid(&out.text_content());
    assert!(!process_gone(gc));
    let Env { toolset, registry, dir, .. } = e;
    drop(registry);
    drop(toolset);
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "grandchild {gc} outlived the toolset");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g21_too_many_running_commands_get_a_clear_error() {
    let e = env_with(|t| t.max_running(1));
    let (id, _) = e.background("sleep 20").await;
    let out = e.shell("echo second").await;
    assert_eq!(out.status, ToolStatus::Error);
    let text = out.text_content();
    assert!(text.contains("too many commands") && text.contains(&id) && text.contains("kill_terminal"), "{text}");
    e.call("kill_terminal", json!({"terminal_id": id})).await;
    let out = e.shell("echo third").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g1_s4_calls_beyond_the_running_limit_wait_for_a_slot_instead_of_failing() {
    // More calls in one turn than the limit: the extra one waits for a foreground command to
    // end and then runs; before, it failed at once with "too many commands".
    let e = env_with(|t| t.max_running(2));
    let (a, b, c) = tokio::join!(
        e.shell("sleep 0.5; echo done-a"),
        e.shell("sleep 0.5; echo done-b"),
        e.shell("sleep 0.5; echo done-c"),
    );
    for (out, word) in [(a, "done-a"), (b, "done-b"), (c, "done-c")] {
        assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
        assert!(out.text_content().contains(word), "{}", out.text_content());
        assert_eq!(out.meta["running"], false, "{}", out.text_content());
    }

    // The wait is bounded by the call's own timeout: the slot stays taken past it.
    let (long, _, short) = tokio::join!(
        e.call("shell", json!({"command": "sleep 7; echo long", "timeout": 20000})),
        e.call("shell", json!({"command": "sleep 7", "timeout": 20000})),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            e.call("shell", json!({"command": "echo never", "timeout": 5000})).await
        },
    );
    assert_eq!(short.status, ToolStatus::Error, "{}", short.text_content());
    let text = short.text_content();
    assert!(
        text.contains("too many commands") && text.contains("timeout ran out") && !text.contains("never\n"),
        "{text}"
    );
    assert!(long.text_content().contains("long"), "{}", long.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_s10_concurrent_commands_each_get_only_their_own_output() {
    let e = env();
    let (server, _) = e.background("echo server-up; sleep 20").await;
    let (a, b) = tokio::join!(e.shell("sleep 0.3; echo alpha"), e.shell("echo beta; exit 2"));
    assert!(a.text_content().starts_with("alpha\n") && !a.text_content().contains("beta"));
    assert!(b.text_content().starts_with("beta\n") && !b.text_content().contains("alpha"));
    assert_eq!((a.meta["exit_code"].clone(), b.meta["exit_code"].clone()), (json!(0), json!(2)));
    let still = e.call("get_terminal_output", json!({"terminal_id": server})).await;
    assert_eq!(still.meta["running"], true, "the background server kept running meanwhile");
    let unknown = e.call("get_terminal_output", json!({"terminal_id": "term-nope"})).await;
    assert!(unknown.text_content().contains(&server), "{}", unknown.text_content());
    e.call("kill_terminal", json!({"terminal_id": server})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_processes_left_running_with_ampersand_keep_running_until_kill_terminal() {
    let e = env();
    let out = e.shell("sleep 30 & echo \"gc=$!\"").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(out.meta["running"], false);
    assert!(out.text_content().contains("still running"), "{}", out.text_content());
    let gc = grandchild_pid(&out.text_content());
    let id = out.meta["terminal_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!process_gone(gc), "a process started with & is left alone");
    let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
    assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "kill_terminal stopped the leftover {gc}");
}

/// `timeout` puts its child in a process group of its own: a signal to the command's group
/// alone stopped the shell and left `timeout 300 sleep 300` running (S10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_kill_terminal_stops_what_timeout_moved_to_its_own_group() {
    let e = env();
    let (id, out) = e.background("timeout 300 sleep 300 & echo \"gc=$!\"; wait").await;
    let gc = grandchild_pid(&out.text_content());
    assert!(!process_gone(gc));
    let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
    assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "`timeout` {gc} survived kill_terminal");
}

/// A process that left the group with `setsid` and ignores SIGTERM, after the command's own
/// shell exited (so it belongs to init now): it still holds the command's output, which is how
/// kill_terminal finds it, and SIGKILL after the grace time ends it (S10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_kill_terminal_stops_a_setsid_leftover_after_the_command_ended() {
    let e = env();
    let out = e.shell("setsid bash -c 'trap \"\" TERM; while :; do sleep 1; done' & echo \"gc=$!\"").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert!(out.text_content().contains("still running"), "{}", out.text_content());
    let gc = grandchild_pid(&out.text_content());
    let id = out.meta["terminal_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!process_gone(gc), "a process started with & is left alone");
    let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
    assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "the setsid leftover {gc} survived kill_terminal");
}

/// Set in the re-executed test binary that plays the host of `s10_…_host_dying…`.
const HOST_ENV: &str = "KODIK_SHELL_TEST_HOST_PIDFILE";

#[test]
fn s10_g21_the_host_process_dying_ends_its_commands() {
    if let Ok(pidfile) = std::env::var(HOST_ENV) {
        // The host: start a command that goes to the background, say so, then wait to be killed.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            // Inside the test's folder, which the test removes: this process is killed.
            let e = env_in(tempfile::tempdir_in(Path::new(&pidfile).parent().unwrap()).unwrap(), |t| t);
            let command = format!("{STUBBORN_BG} echo \"$$ $!\" > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; wait");
            e.background(&command).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        return;
    }
    host_dies_and_its_processes_go_with_it("s10_g21_the_host_process_dying_ends_its_commands", HOST_ENV, true);
}

/// Set in the re-executed test binary that plays the host of `s10_…_redirected_leftover…`.
const LEFTOVER_HOST_ENV: &str = "KODIK_SHELL_TEST_LEFTOVER_HOST_PIDFILE";

#[test]
fn s10_g21_a_finished_commands_redirected_background_process_dies_with_the_host() {
    if let Ok(pidfile) = std::env::var(LEFTOVER_HOST_ENV) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let e = env_in(tempfile::tempdir_in(Path::new(&pidfile).parent().unwrap()).unwrap(), |t| t);
            // The command ends at once; what it started holds no pipe, only the process group.
            let command = format!(
                "nohup bash -c 'trap \"\" TERM; sleep 300' > /dev/null 2>&1 & \
                 echo \"$$ $!\" > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}"
            );
            let out = e.shell(&command).await;
            assert_eq!(out.meta["running"], false);
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        return;
    }
    host_dies_and_its_processes_go_with_it(
        "s10_g21_a_finished_commands_redirected_background_process_dies_with_the_host",
        LEFTOVER_HOST_ENV,
        false,
    );
}

/// Runs this test binary as a host (the test `name`, with `env` naming its pid file), waits for
/// its command to report `SHELL_PID GRANDCHILD_PID`, kills the host and checks both are gone
/// (`shell_waits`: the command's shell is still running when the host dies).
fn host_dies_and_its_processes_go_with_it(name: &str, env: &str, shell_waits: bool) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut host = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--test-threads=1"])
        .env(env, &pidfile)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pidfile.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
        .expect("the host started its command")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (shell, grandchild) = (pids[0], pids[1]);
    if shell_waits {
        assert!(!process_gone(shell));
    } else {
        // Ended by itself: only what it left in its group is there for the reaper.
        let deadline = Instant::now() + Duration::from_secs(3);
        while !process_gone(shell) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(process_gone(shell), "the command {shell} ended by itself");
    }
    assert!(!process_gone(grandchild));
    host.kill().unwrap();
    host.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !(process_gone(shell) && process_gone(grandchild)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (shell_gone, grandchild_gone) = (process_gone(shell), process_gone(grandchild));
    // Never leave a stray process behind, even when the assertion below fails.
    let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{shell}")]).status();
    assert!(shell_gone, "the shell {shell} outlived its host (the reaper)");
    assert!(grandchild_gone, "the grandchild {grandchild} outlived its host (the reaper)");
}

/// Set in the re-executed test binary that plays the host of `s6_s10_…_controlling_terminal…`:
/// `tty` when it was given a controlling terminal, `none` when not.
const TTY_HOST_ENV: &str = "KODIK_SHELL_TEST_TTY_HOST";

/// A host process (this test binary again) in a session of its own, with a pseudo-terminal as
/// its controlling terminal or with none; returns what it printed.
#[allow(unsafe_code)]
fn run_tty_host(with_terminal: bool) -> String {
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    use std::os::unix::process::CommandExt as _;
    // SAFETY: plain libc calls; the descriptor returned by posix_openpt is owned right away.
    let master = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        OwnedFd::from_raw_fd(fd)
    };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `name` is a writable buffer of the length given.
    assert_eq!(unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) }, 0);
    // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
    let slave_path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_owned();
    let slave = std::fs::OpenOptions::new().read(true).write(true).open(slave_path.to_str().unwrap()).unwrap();
    let slave_fd = slave.as_raw_fd();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "s6_s10_a_command_leads_its_own_group_and_never_gets_the_hosts_controlling_terminal"])
        .args(["--nocapture", "--test-threads=1"])
        .env(TTY_HOST_ENV, if with_terminal { "tty" } else { "none" })
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setsid and ioctl are async-signal-safe, as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if with_terminal && libc::ioctl(slave_fd, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(slave);
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the host did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    drop(master);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// `key=value` from a host's report.
fn field<'a>(report: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key}=");
    report
        .split_whitespace()
        .find_map(|word| word.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key} in {report}"))
}

#[test]
fn s6_s10_a_command_leads_its_own_group_and_never_gets_the_hosts_controlling_terminal() {
    if let Ok(kind) = std::env::var(TTY_HOST_ENV) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let e = env();
            // Fields 5 and 6 of /proc/PID/stat: process group and session.
            let out = e
                .shell(
                    "echo \"pid=$$ group=$(cut -d' ' -f5 /proc/$$/stat) session=$(cut -d' ' -f6 /proc/$$/stat)\"; \
                     if (exec 3</dev/tty) 2>/dev/null; then echo tty=opened; else echo tty=refused; fi",
                )
                .await;
            let host_tty = std::fs::File::open("/dev/tty").is_ok();
            // SAFETY: getsid(0) only reads the caller's session id.
            #[allow(unsafe_code)]
            let host_session = unsafe { libc::getsid(0) };
            println!("{kind}: host_tty={host_tty} host_session={host_session} {}", out.text_content());
        });
        return;
    }
    for with_terminal in [true, false] {
        let report = run_tty_host(with_terminal);
        assert_eq!(field(&report, "host_tty"), with_terminal.to_string(), "the host's own terminal: {report}");
        assert_eq!(field(&report, "tty"), "refused", "the command cannot open the host's terminal: {report}");
        let pid = field(&report, "pid");
        assert_eq!(field(&report, "group"), pid, "the command leads its own process group (kill_terminal): {report}");
        let session = field(&report, "session");
        if with_terminal {
            assert_eq!(session, pid, "with a terminal to leave, the command leads a new session: {report}");
        } else {
            // No terminal to leave: the host's session, whose scheduling group it shares (autogroup).
            assert_eq!(session, field(&report, "host_session"), "{report}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_s10_output_of_a_leftover_after_the_commands_end_is_still_collected() {
    let e = env();
    // The leader ends at once; what it left running writes 3 MB (more than the pipe holds) later.
    let out =
        e.shell("(sleep 0.6; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo late-end) & echo \"gc=$!\"").await;
    assert_eq!(out.status, ToolStatus::Success, "{}", out.text_content());
    assert_eq!(out.meta["running"], false, "the command ended without waiting for its leftover");
    assert!(!out.text_content().contains("late-end"));
    let id = out.meta["terminal_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    let mut bytes = 0;
    while !seen.contains("late-end") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let more = e.call("get_terminal_output", json!({"terminal_id": id})).await;
        bytes = more.meta["output_bytes"].as_u64().unwrap();
        seen.push_str(&more.text_content());
        // The leftover's end comes as a terminal event with what was not read yet (S5).
        for ev in e.events(0, Duration::ZERO).await {
            seen.push_str(&ev.unread_output);
        }
    }
    assert!(seen.contains("late-end"), "{}", &seen[seen.len().saturating_sub(300)..]);
    let first = out.text_content().split_once('\n').map(|(l, _)| l.len() + 1).unwrap();
    assert_eq!(bytes, (first + 3_000_000 + 1 + "late-end\n".len()) as u64, "every late byte was collected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_s7_a_background_process_with_redirected_output_stays_listed_until_kill_terminal() {
    let e = env();
    for command in ["sleep 30 > /dev/null 2>&1 & echo \"gc=$!\"", "nohup sleep 30 > out.log 2>&1 & echo \"gc=$!\""] {
        let out = e.shell(command).await;
        let text = out.text_content();
        assert_eq!(out.status, ToolStatus::Success, "{text}");
        assert_eq!(out.meta["running"], false);
        assert_eq!(out.meta["background_running"], true, "{command}: {}", out.meta);
        assert!(text.contains("still running"), "{text}");
        let gc = grandchild_pid(&text);
        let id = out.meta["terminal_id"].as_str().unwrap().to_string();
        tokio::time::sleep(Duration::from_millis(600)).await;
        let later = e.call("get_terminal_output", json!({"terminal_id": id})).await;
        assert_eq!(later.meta["background_running"], true, "{}", later.text_content());
        assert!(later.text_content().contains("still running"), "{}", later.text_content());
        let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
        assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
        assert!(wait_gone(gc, Duration::from_secs(3)).await, "kill_terminal stopped {gc} ({command})");
        assert_eq!(killed.meta["background_running"], false, "{}", killed.meta);
    }
    assert!(e.events(1, Duration::from_millis(500)).await.is_empty(), "a kill the model asked for is not announced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g21_a_redirected_background_process_of_a_finished_command_dies_with_the_toolset() {
    let e = env();
    let out = e.shell("bash -c 'trap \"\" TERM; sleep 300' > /dev/null 2>&1 & echo \"gc=$!\"").await;
    let gc = grandchild_pid(&out.text_content());
    assert!(!process_gone(gc));
    let Env { toolset, registry, dir, .. } = e;
    drop(registry);
    drop(toolset);
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "{gc} outlived the toolset");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_s7_a_crashed_background_server_is_told_apart_from_a_live_one() {
    let e = env();
    let live = e.shell("sleep 30 > /dev/null 2>&1 & echo started").await;
    let live_id = live.meta["terminal_id"].as_str().unwrap().to_string();
    // One crash keeps the output pipe, one writes to a file: both end after their command did.
    let crashed = [
        e.shell("(sleep 0.5; echo 'Error: listen EADDRINUSE :::3000'; exit 1) & echo started").await,
        e.shell("(sleep 0.5; echo 'Error: listen EADDRINUSE'; exit 1) > crash.log 2>&1 & echo started").await,
    ];
    let ids: Vec<String> = crashed.iter().map(|o| o.meta["terminal_id"].as_str().unwrap().to_string()).collect();
    for o in &crashed {
        assert_eq!(o.meta["background_running"], true, "{}", o.text_content());
    }
    let events = e.events(2, Duration::from_secs(5)).await;
    let mut ended: Vec<&str> = events.iter().map(|ev| ev.terminal_id.as_str()).collect();
    ended.sort();
    assert_eq!(ended, ids.iter().map(String::as_str).collect::<Vec<_>>(), "{events:?}");
    for ev in &events {
        assert!(ev.unread_output.contains("have ended"), "{ev:?}");
    }
    let piped = events.iter().find(|ev| ev.terminal_id == ids[0]).unwrap();
    assert!(piped.unread_output.contains("EADDRINUSE"), "the leftover's output comes with its end: {piped:?}");
    let gone = e.call("get_terminal_output", json!({"terminal_id": ids[1]})).await;
    assert_eq!(gone.meta["background_running"], false, "{}", gone.text_content());
    let alive = e.call("get_terminal_output", json!({"terminal_id": live_id})).await;
    assert_eq!(alive.meta["background_running"], true, "{}", alive.text_content());
    e.call("kill_terminal", json!({"terminal_id": live_id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_a_progress_line_that_mentions_a_password_does_not_stop_the_command() {
    let e = env();
    let out = e.shell("printf 'Migrating table user_passwords: '; sleep 1.5; touch migrated.flag; echo done").await;
    let text = out.text_content();
    assert_eq!(out.status, ToolStatus::Success, "{text}");
    assert!(text.starts_with("Migrating table user_passwords: done"), "{text}");
    assert!(e.dir.path().join("migrated.flag").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_progress_lines_naming_a_password_run_to_the_end_and_real_prompts_still_stop() {
    let e = env();
    let lines = [
        "Updating password for admin: ",
        "Setting password for user postgres: ",
        "Generating random password: ",
        "Resetting password: ",
    ];
    let runs = lines.map(|line| format!("printf '{line}'; sleep 1.5; echo done"));
    let (a, b, c, d) = tokio::join!(e.shell(&runs[0]), e.shell(&runs[1]), e.shell(&runs[2]), e.shell(&runs[3]));
    for (line, out) in lines.iter().zip([a, b, c, d]) {
        let text = out.text_content();
        assert_eq!(out.status, ToolStatus::Success, "{text}");
        assert!(text.starts_with(&format!("{line}done")), "{text}");
    }
    let prompts = ["[sudo] password for alice: ", "Enter PEM pass phrase: ", "Retype new password: "];
    let asks = prompts.map(|p| format!("printf '{p}'; sleep 30"));
    let (a, b, c) = tokio::join!(e.shell(&asks[0]), e.shell(&asks[1]), e.shell(&asks[2]));
    for (p, out) in prompts.iter().zip([a, b, c]) {
        let text = out.text_content();
        assert_eq!(out.status, ToolStatus::Error, "{text}");
        assert!(text.contains(p.trim()) && text.contains("Ask the user"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_a_script_fed_on_stdin_runs_instead_of_being_refused_as_a_repl() {
    let e = env();
    for (command, expected) in [
        ("python3 <<'EOF'\nprint(6*7)\nEOF", "42\n"),
        ("echo 'print(6*7)' | python3", "42\n"),
        ("printf 'print(6*7)\\n' > s.py && python3 < s.py", "42\n"),
        ("command -v sh >/dev/null && echo have-sh", "have-sh\n"),
    ] {
        let out = e.shell(command).await;
        let text = out.text_content();
        assert_eq!(out.status, ToolStatus::Success, "{command}: {text}");
        assert!(text.starts_with(expected), "{command}: {text}");
    }
    // Without a script it is still refused before it starts.
    let out = e.shell("python3").await;
    assert!(out.text_content().contains("Refused"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_a_call_given_up_for_good_stops_its_command() {
    let e = env();
    let (shell, _, _) = e.toolset.tools();
    let marker = e.dir.path().join("survived");
    let pidfile = e.dir.path().join("pid");
    let cx = e.cx.for_call("c-cancelled");
    let stopper = cx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // What an MCP server does on notifications/cancelled.
        stopper.abandon();
    });
    let command = format!("echo $$ > {}; sleep 1.5; echo done > {}", pidfile.display(), marker.display());
    let t = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        Tool::call(&shell, json!({"command": command, "timeout": 30000}), &cx),
    )
    .await
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(out.status, ToolStatus::Cancelled, "{}", out.text_content());
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(wait_gone(pid, Duration::from_secs(2)).await, "the cancelled command {pid} was stopped");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "the cancelled command went on");
    assert!(e.events(1, Duration::from_millis(300)).await.is_empty(), "nobody is told later about a cancelled call");
    // Asked about later, it says why it stopped (not "stopped by kill_terminal").
    let id = out.meta["terminal_id"].as_str().unwrap_or_else(|| panic!("{}", out.meta)).to_owned();
    let later = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    assert!(later.text_content().contains("because its call was cancelled"), "{}", later.text_content());
}

/// Set in the re-executed test binary that plays the host of `g18_g21_a_failed_spool…`.
const FULL_DISK_HOST_ENV: &str = "KODIK_SHELL_TEST_FULL_DISK_HOST";

/// Spool files in the test folder's spool.
fn spool_files(e: &Env) -> Vec<String> {
    match std::fs::read_dir(e.dir.path().join(".spool")) {
        Err(_) => Vec::new(),
        Ok(d) => d.flatten().map(|f| f.file_name().to_string_lossy().into_owned()).collect(),
    }
}

#[test]
#[allow(unsafe_code)]
fn g18_g21_a_failed_spool_leaves_no_file_behind_and_saving_works_again_once_there_is_room() {
    if std::env::var_os(FULL_DISK_HOST_ENV).is_some() {
        // A file size limit makes every write past it fail, as a full disk does (EFBIG instead
        // of ENOSPC); the signal that comes with it is ignored, as a host would not die of it.
        let limit = |bytes: u64| {
            // SAFETY: plain libc calls with valid arguments.
            unsafe {
                let mut cur = std::mem::zeroed::<libc::rlimit>();
                assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut cur), 0);
                cur.rlim_cur = if bytes == u64::MAX { cur.rlim_max } else { bytes as libc::rlim_t };
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &cur), 0);
            }
        };
        // SAFETY: setting a signal to be ignored.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let e = env();
            // Fails while the file starts (the head does not fit), then half-way through.
            for room in [1_000, 300_000] {
                limit(room);
                let out = e.shell("seq 1 400000").await;
                assert_eq!(out.meta["full_output"], Value::Null, "{}", out.meta);
                assert!(out.text_content().contains("omitted from the middle"), "{}", out.text_content());
                assert_eq!(spool_files(&e), Vec::<String>::new(), "room {room}: the partial file was deleted");
            }
            limit(u64::MAX);
            let out = e.shell("seq 1 20000").await;
            let full = out.meta["full_output"].as_str().expect("saved once there is room again");
            assert_eq!(std::fs::read(full).unwrap().len(), 108_894);
            println!("full-disk-host-ok");
        });
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "g18_g21_a_failed_spool_leaves_no_file_behind_and_saving_works_again_once_there_is_room"])
        .args(["--nocapture", "--test-threads=1"])
        .env(FULL_DISK_HOST_ENV, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("full-disk-host-ok"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_g18_a_flood_of_output_is_saved_only_up_to_the_cap_and_the_result_says_so() {
    let e = env_with(|t| t.max_saved_output(200_000));
    let out =
        e.shell("yes 'debug: retry waiting for the lock on /var/run/app.pid' | head -c 3000000; echo; echo END").await;
    let text = out.text_content();
    assert_eq!(out.status, ToolStatus::Success, "{text}");
    assert_eq!(out.meta["output_bytes"], 3_000_000 + 5, "every byte is counted");
    assert!(text.contains("only the first 200000 bytes were saved"), "{text}");
    assert!(text.contains("\nEND\n"), "the tail is the real end: {text}");
    let saved = std::fs::read(out.meta["full_output"].as_str().unwrap()).unwrap();
    assert!(saved.len() < 200_200, "the file stopped at the cap: {} bytes", saved.len());
    let end = String::from_utf8_lossy(&saved[saved.len() - 120..]).into_owned();
    assert!(end.contains("saving stopped here"), "the file says where it was cut: {end}");

    // A flood in the background: get_terminal_output says the file holds only the start.
    let (id, _) = e.background("yes 'debug: retry waiting for the lock'").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = e.call("get_terminal_output", json!({"terminal_id": id})).await;
    let text = later.text_content();
    assert!(text.contains("only its first 200000 bytes were saved"), "{}", &text[text.len().saturating_sub(400)..]);
    e.call("kill_terminal", json!({"terminal_id": id})).await;
    let full = later.meta["full_output"].as_str().unwrap();
    assert!(std::fs::metadata(full).unwrap().len() < 200_200);
}

/// Knows only the heredoc form, as kodik-edit's interceptor does, and answers with the patch
/// it was given.
struct HeredocOnlyInterceptor;

#[async_trait]
impl CommandInterceptor for HeredocOnlyInterceptor {
    async fn intercept(&self, command: &str, _workdir: &Path, _cx: &ToolContext) -> Option<ToolOutput> {
        let (first, rest) = command.split_once('\n')?;
        let (cd, head) = match first.split_once(" && ") {
            Some((cd, head)) => (cd.strip_prefix("cd ")?.trim_matches('\''), head),
            None => ("", first),
        };
        let delim = head.strip_prefix("apply_patch <<")?.trim_matches(['\'', '"']);
        let (body, after) = rest.split_once(&format!("\n{delim}\n"))?;
        after.trim().is_empty().then(|| ToolOutput::text(format!("patched in [{cd}]:\n{body}")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_an_apply_patch_wrapped_in_bash_lc_or_given_as_an_argument_goes_to_the_interceptor() {
    let mut e = env();
    e.cx.interceptor = Some(Arc::new(HeredocOnlyInterceptor));
    let body = "*** Begin Patch\n*** Add File: added.txt\n+hi\n*** End Patch";
    for (command, cd) in [
        (format!("apply_patch <<'EOF'\n{body}\nEOF\n"), ""),
        (format!("bash -lc \"apply_patch <<'EOF'\n{body}\nEOF\n\""), ""),
        (format!("apply_patch '{body}'"), ""),
        (format!("apply_patch '{body}\n'"), ""),
        (format!("cd sub && apply_patch '{body}'"), "sub"),
        (format!("bash -lc 'apply_patch \"{body}\"'"), ""),
    ] {
        let out = e.shell(&command).await;
        assert_eq!(out.text_content(), format!("patched in [{cd}]:\n{body}"), "{command}");
    }
    // Anything else still runs as a command.
    let out = e.shell("bash -lc 'echo apply_patch'").await;
    assert!(out.text_content().starts_with("apply_patch\n"), "{}", out.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_g8_an_unterminated_title_sequence_does_not_swallow_the_error_after_it() {
    let e = env();
    let out = e
        .shell("printf 'start\\n\\033]0;title without terminator\\n'; seq 1 3; echo 'ERROR: build failed'; exit 2")
        .await;
    let text = out.text_content();
    assert!(text.starts_with("start\n\n1\n2\n3\nERROR: build failed\n"), "{text}");
    assert_eq!(out.meta["exit_code"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g21_s8_the_file_a_long_command_runs_from_is_gone_while_it_still_runs() {
    // Gone as soon as the shell has it open, so a host killed mid-command leaves nothing in
    // the temp folder; the command's own line numbers are unchanged.
    let e = env();
    let command = format!(
        "#{}\nif [ -e \"$0\" ]; then echo script-present; else echo script-gone; fi\nno_such_cmd_kodik",
        "p".repeat(140_000)
    );
    let out = e.shell(&command).await;
    let text = out.text_content();
    assert!(text.starts_with("script-gone\n"), "{text}");
    assert!(text.contains("line 3: no_such_cmd_kodik"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_s8_a_command_line_over_128_kib_runs_and_is_not_echoed_back_whole() {
    let e = env();
    let command = format!("cat > big.txt <<'EOF'\n{}\nEOF\nwc -c < big.txt; echo \"args=$#\"", "y".repeat(300_000));
    let out = e.shell(&command).await;
    let text = out.text_content();
    assert_eq!(out.status, ToolStatus::Success, "{text}");
    assert!(text.starts_with("300001\nargs=0\n"), "{text}");
    let echoed = out.meta["command"].as_str().unwrap();
    assert!(
        echoed.len() < 4096 && echoed.ends_with(&format!("[{} bytes in all]", command.len())),
        "{}",
        &echoed[echoed.len() - 40..]
    );
    // The script file it ran from is gone with the command.
    let leftover = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().starts_with("kodik-command-"))
        .filter(|f| std::fs::read(f.path()).is_ok_and(|b| b.len() == command.len()))
        .count();
    assert_eq!(leftover, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s5_without_events_reaching_the_model_a_backgrounded_command_says_to_collect_its_result() {
    let e = env_with(|t| t.events_not_delivered_to_model());
    let (id, out) = e.background("sleep 20").await;
    let text = out.text_content();
    assert!(!text.contains("do not poll") && text.contains("get_terminal_output") && text.contains(&id), "{text}");
    assert!(text.contains("next tool result"), "{text}");
    e.call("kill_terminal", json!({"terminal_id": id})).await;
    // With an agent loop that delivers events, the model is told to wait for the event.
    let e = env();
    let (id, out) = e.background("sleep 20").await;
    assert!(out.text_content().contains("do not poll"), "{}", out.text_content());
    e.call("kill_terminal", json!({"terminal_id": id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_s10_the_end_event_of_a_background_command_says_what_it_left_running() {
    let e = env();
    let (id, out) = e.background("sleep 30 > /dev/null 2>&1 & echo \"gc=$!\"; sleep 2").await;
    let gc = grandchild_pid(&out.text_content());
    let events = e.events(1, Duration::from_secs(5)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let text = &events[0].unread_output;
    assert!(text.contains("still running") && text.contains(&id), "{text}");
    let killed = e.call("kill_terminal", json!({"terminal_id": id})).await;
    assert_eq!(killed.status, ToolStatus::Stopped, "{}", killed.text_content());
    assert!(wait_gone(gc, Duration::from_secs(3)).await, "kill_terminal stopped {gc}");
}
