//! The agent loop driving the `browser` tool: the example serves a small form on 127.0.0.1, and
//! the model opens it, reads its accessibility snapshot, fills the Name field and clicks Greet by
//! strict locators (label, role + name), waits for the greeting and answers. With `KODIK_MODEL`
//! set it talks to that model; without, it replays the bundled recording, in which `{{URL}}`
//! stands for the page's address (its port is only known once the server is bound).
//!
//! `cargo run -p kodik-examples --bin browser_agent [TASK]` (needs Chromium: Debian's `chromium`, or `CHROME`).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::Arc;

use kodik_tools::Toolbox;
use kodik_tools::agent::{AgentConfig, AgentEvent, CancellationToken};
use kodik_tools::model::replay::{Recording, ReplayServer};
use kodik_tools::model::{ModelClient, ModelConfig, Provider};

const RECORDING: &str = include_str!("../../browser_agent.recording.json");

const PAGE: &str = r#"<!doctype html><html><head><title>Greeter</title></head><body>
<form id="f"><label for="name">Name</label> <input id="name"> <button type="submit">Greet</button></form>
<p role="status" id="out"></p>
<script>document.getElementById("f").addEventListener("submit", (e) => { e.preventDefault();
  const name = document.getElementById("name").value; // read on submit: a fill after the click is not seen
  setTimeout(() => { document.getElementById("out").textContent = `Hello, ${name}!`; }, 300); });</script>
</body></html>"#;

/// Answers every request with the page (a thread per server is enough for one browser tab).
fn serve(listener: TcpListener) {
    for mut stream in listener.incoming().flatten() {
        // Read the request head before answering: closing with unread bytes would reset the connection.
        let mut reader = BufReader::new(&mut stream);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            line.clear();
        }
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n", PAGE.len());
        let _ = write!(stream, "{head}connection: close\r\n\r\n{PAGE}");
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let task =
        std::env::args().nth(1).unwrap_or_else(|| "Greet Ada Lovelace on the form and tell me what it says.".into());
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || serve(listener));
    let workspace = std::env::temp_dir().join("kodik-browser-agent");
    std::fs::create_dir_all(&workspace)?;
    let toolbox = Toolbox::builder().workspace(&workspace).build()?;

    // The replay server must live as long as the run.
    let mut _replay = None;
    let model: Arc<dyn ModelClient> = if std::env::var_os("KODIK_MODEL").is_some() {
        kodik_tools::model::client(ModelConfig::from_env()?)?
    } else {
        let recording = RECORDING.replace("{{URL}}", &url);
        let server = ReplayServer::start(serde_json::from_str::<Recording>(&recording)?).await?;
        eprintln!("KODIK_MODEL is not set: replaying the bundled recording (offline) against {url}");
        let config = ModelConfig::new(Provider::OpenAiResponses, "gpt-5").base_url(server.base_url());
        _replay = Some(server);
        kodik_tools::model::client(config)?
    };

    let config = AgentConfig::default()
        .sessions_dir(workspace.join("sessions"))
        .system_prompt(format!("The form to use is at {url}/. Find elements by label or role and name, not by ref."));
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
    toolbox.browser().shutdown().await;
    println!("{}", outcome.final_text);
    match outcome.error {
        Some(error) => Err(format!("the run ended {}: {error}", outcome.status).into()),
        None => Ok(()),
    }
}
