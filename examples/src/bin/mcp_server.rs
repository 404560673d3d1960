//! The toolbox served to any MCP client over stdio: stdout is the protocol, logs go to stderr.
//!
//! `cargo run -p kodik-examples --bin mcp_server [DIR]` (default DIR: the current folder); point
//! an MCP client at that command.

use kodik_tools::Toolbox;
use kodik_tools::harness::Mode;
use kodik_tools::scheduler::Scheduler;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os().nth(1).unwrap_or_else(|| ".".into());
    let toolbox = Toolbox::builder().workspace(dir).build()?;
    // The tool set a Code-mode session of a non-OpenAI client gets (create/edit/delete_file, G10);
    // deferred tools stay reachable through tool_search/call_tool (G12).
    let plan = toolbox.plan(Mode::Code, "mcp-client");
    let scheduler = Scheduler::new(toolbox.registry_for(&plan));
    eprintln!("serving {} tools over MCP on stdio", plan.tools.len());
    let server = kodik_mcp::McpServer::new(scheduler, toolbox.context().clone(), plan.tools.clone())
        .with_instructions(plan.guidance.clone());
    server.serve_stdio().await?;
    Ok(())
}
