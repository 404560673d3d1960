//! Runs one `grep` or `glob` through the library, as a model's call would, and prints what it
//! found, so `benches/compare_search.sh` can time it against ripgrep and fd and check that the
//! results are identical.
//!
//! ```text
//! search_bench grep DIR PATTERN [--fixed]   prints the number of matching lines (content mode)
//! search_bench glob DIR PATTERN [--list]    prints the number of files, or every path with --list
//! ```

use std::process::ExitCode;

use kodik_core::{ToolContext, ToolRegistry, Workspace};
use kodik_search::SearchToolset;
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(tool), Some(dir), Some(pattern)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: search_bench grep|glob DIR PATTERN [--fixed] [--list]");
        return ExitCode::from(2);
    };
    let flag = |f: &str| args.iter().skip(3).any(|a| a == f);
    let ws = match Workspace::new(dir) {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cx = ToolContext::new(ws);
    let mut registry = ToolRegistry::new();
    SearchToolset::new().glob_limit(usize::MAX).register(&mut registry);
    let call = match tool.as_str() {
        "grep" => json!({"pattern": pattern, "output_mode": "content", "fixed_strings": flag("--fixed")}),
        "glob" => json!({"pattern": pattern}),
        other => {
            eprintln!("unknown tool {other}; use grep or glob");
            return ExitCode::from(2);
        }
    };
    let Some(t) = registry.get(tool) else {
        eprintln!("{tool} is not registered");
        return ExitCode::from(2);
    };
    let out = t.call(call, &cx).await;
    if !out.is_success() {
        eprintln!("{}", out.text_content());
        return ExitCode::FAILURE;
    }
    if tool == "glob" && flag("--list") {
        let text = out.text_content();
        if out.meta["total"] != 0 {
            println!("{text}");
        }
    } else if tool == "glob" {
        println!("{}", out.meta["total"]);
    } else {
        println!("{}", out.meta["total_matches"]);
    }
    ExitCode::SUCCESS
}
