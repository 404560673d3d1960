//! The agent loop with code mode: the model writes one JavaScript program that calls the tools,
//! instead of one request per call. With `KODIK_MODEL` (and its key) set it talks to that model;
//! without, it replays a small bundled recording through kodik-model's loopback server, so it
//! runs offline through the same client code.
//!
//! `cargo run -p kodik-examples --bin codemode_agent [DIR] [TASK]` (default DIR: the current folder).

use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::agent::{AgentConfig, AgentEvent, CancellationToken};
use kodik_tools::model::replay::{Recording, ReplayServer};
use kodik_tools::model::{ModelClient, ModelConfig, Provider};

const RECORDING: &str = include_str!("../../codemode_agent.recording.json");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| ".".into());
    let task = args.next().unwrap_or_else(|| "How many lines does each shell script here have?".into());
    let toolbox = Toolbox::builder().workspace(&dir).build()?;

    // The replay server must live as long as the run.
    let mut _replay = None;
    let model: Arc<dyn ModelClient> = if std::env::var_os("KODIK_MODEL").is_some() {
        kodik_tools::model::client(ModelConfig::from_env()?)?
    } else {
        let server = ReplayServer::start(serde_json::from_str::<Recording>(RECORDING)?).await?;
        eprintln!("KODIK_MODEL is not set: replaying the bundled recording (offline)");
        let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url());
        _replay = Some(server);
        kodik_tools::model::client(config)?
    };

    let config = AgentConfig::default()
        .sessions_dir(std::env::temp_dir().join("kodik-codemode-agent"))
        .system_prompt("When a task needs several tool calls, write one codemode script that makes them.");
    let agent = toolbox.agent(model, config);
    let mut events = agent.subscribe();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            match event {
                AgentEvent::ToolCallStarted { name, args, .. } => eprintln!("> {name} {args}"),
                AgentEvent::ToolCallFinished { name, status, output, .. } => {
                    eprintln!("< {name} [{}]\n{output}", status.as_str())
                }
                _ => {}
            }
        }
    });

    let mut conversation = agent.start()?;
    let outcome = conversation.run(&task, CancellationToken::new()).await;
    println!("{}", outcome.final_text);
    match outcome.error {
        Some(error) => Err(format!("the run ended {}: {error}", outcome.status).into()),
        None => Ok(()),
    }
}
