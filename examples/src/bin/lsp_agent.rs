//! The agent loop asking a language server: on a small Python project (written into DIR, or a
//! temporary folder), the model calls `lsp` for the definition and the references of a function
//! used across two files, and `read_lints` for the errors pyright reports, then answers. `lsp` is
//! deferred in every mode (G12), so the calls go through `call_tool`. With `KODIK_MODEL` set it
//! talks to that model; without, it replays the bundled recording.
//!
//! `cargo run -p kodik-examples --bin lsp_agent [DIR] [TASK]` (needs `pyright-langserver` in
//! `KODIK_LSP_BIN` or on `PATH`: `npm install -g pyright`, or `cargo xtask test-tools`).

use std::path::PathBuf;
use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::agent::{AgentConfig, AgentEvent, CancellationToken};
use kodik_tools::lsp::LspConfig;
use kodik_tools::model::replay::{Recording, ReplayServer};
use kodik_tools::model::{ModelClient, ModelConfig, Provider};

const RECORDING: &str = include_str!("../../lsp_agent.recording.json");

const PROJECT: [(&str, &str); 4] = [
    ("pyrightconfig.json", "{}\n"),
    ("shop/__init__.py", ""),
    (
        "shop/prices.py",
        "def total(prices: list[float], tax: float = 0.2) -> float:\n    return sum(prices) * (1 + tax)\n",
    ),
    ("app.py", "from shop.prices import total\n\n\nprint(total([1.0, 2.5]))\ncount: int = \"three\"\n"),
];

/// `pyright-langserver` from `KODIK_LSP_BIN` (where `cargo xtask test-tools` installs it), else `PATH`.
fn pyright() -> Option<PathBuf> {
    let dirs = std::env::var_os("KODIK_LSP_BIN").into_iter().map(PathBuf::from);
    let path = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    dirs.chain(path).map(|d| d.join("pyright-langserver")).find(|p| p.is_file())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(program) = pyright() else {
        eprintln!("lsp_agent: pyright-langserver not found in KODIK_LSP_BIN or PATH (`npm install -g pyright`)");
        std::process::exit(2);
    };
    let mut args = std::env::args().skip(1);
    // Without DIR the project lives in a temporary folder, removed when `_temp` drops at the end.
    let (dir, _temp) = match args.next() {
        Some(dir) => (PathBuf::from(dir), None),
        None => {
            let temp = tempfile::tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let task =
        args.next().unwrap_or_else(|| "Where is `total` defined, who uses it, and what errors are there?".into());
    for (rel, text) in PROJECT {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
        std::fs::write(path, text)?;
    }
    let mut servers = kodik_tools::lsp::config::default_servers();
    servers.iter_mut().filter(|s| s.name == "pyright").for_each(|s| s.command = program.clone());
    let toolbox = Toolbox::builder().workspace(&dir).lsp(LspConfig { servers, ..LspConfig::default() }).build()?;

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

    let config = AgentConfig::default().sessions_dir(std::env::temp_dir().join("kodik-lsp-agent"));
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
    toolbox.lsp().shutdown();
    println!("{}", outcome.final_text);
    match outcome.error {
        Some(error) => Err(format!("the run ended {}: {error}", outcome.status).into()),
        None => Ok(()),
    }
}
