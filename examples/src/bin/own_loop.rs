//! Your own agent loop over a toolbox, with a tool of your own beside the built-ins and an
//! approver: what one request offers, one model turn's calls run the way kodik-agent runs
//! them, and the results as the model reads them. The "model" here is a fixed list of calls.
//!
//! `cargo run -p kodik-examples --bin own_loop [DIR]` (default DIR: a fresh scratch folder).

use std::sync::Arc;

use kodik_tools::core::{
    Approval, ApprovalRequest, Approver, Effect, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool,
};
use kodik_tools::harness::Mode;
use kodik_tools::schema::ToolArgs;
use kodik_tools::schema::providers::{Format, render_all};
use kodik_tools::{Toolbox, async_trait};
use serde_json::json;

/// Count the lines of a file.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LineCountArgs {
    /// The file, relative to the workspace root.
    path: String,
}

impl ToolArgs for LineCountArgs {
    const NAME: &'static str = "line_count";
    const EFFECT: Effect = Effect::ReadOnly;
    const DESCRIPTION: &'static str = "Count the lines of a file in the workspace.";
}

struct LineCount(ToolSpec);

#[async_trait]
impl TypedTool for LineCount {
    type Args = LineCountArgs;
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(&self, args: LineCountArgs, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let path = cx.workspace.resolve(&args.path)?;
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(ToolOutput::text(format!("{} lines", text.lines().count()))),
            Err(e) => Ok(ToolOutput::error(format!("cannot read `{}`: {e}", args.path))),
        }
    }
}

/// Lets every call run except a shell command that removes files.
struct NoRm;

#[async_trait]
impl Approver for NoRm {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        let command = request.args["command"].as_str().unwrap_or_default();
        if request.tool == "shell" && command.split_whitespace().any(|word| word == "rm") {
            return Approval::Denied("removing files is not allowed here".into());
        }
        Approval::Approved
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("kodik-own-loop-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("notes.md"), "# Notes\nTODO: write the parser\nTODO: test it\n")?;
    let toolbox = Toolbox::builder()
        .workspace(&dir)
        .tool(LineCount(kodik_tools::schema::spec::<LineCountArgs>()))
        .approver(Arc::new(NoRm))
        .build()?;

    // The request: what this mode offers this model, in its provider's format.
    let plan = toolbox.plan(Mode::Code, "claude-sonnet-4-5");
    let tools = render_all(&plan.tools, Format::Anthropic);
    let names: Vec<&str> = tools.as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    println!("offered: {}", names.join(" "));

    // One model turn: reads and searches run concurrently, the approver sees the command.
    let turn = [
        ToolCall::new("c1", "line_count", json!({"path": "notes.md"})),
        ToolCall::new("c2", "call_tool", json!({"name": "grep", "arguments": {"pattern": "TODO"}})),
        ToolCall::new("c3", "shell", json!({"command": "rm notes.md"})),
        ToolCall::new("c4", "line_count", json!({"file": "notes.md"})),
    ];
    let results = toolbox.scheduler_for(&plan).run(turn.iter().cloned(), toolbox.context()).await;
    for (call, out) in turn.iter().zip(&results) {
        // Exactly the text kodik-agent's loop sends back for a result.
        println!("--- {} {} [{}]\n{}", call.id, call.name, out.status, kodik_tools::agent::model_text(out));
    }
    Ok(())
}
