//! Runs one `grep` or `glob` through the library, as a model's call would, and prints what it
//! found, so `benches/compare_search.sh` can time it against ripgrep and fd and check that the
//! results are identical.
//!
//! ```text
//! search_bench grep DIR PATTERN [--fixed] [--mode M] [--head-limit N] [--offset N] [--rss] [--no-spool] [--threads N] [--keep-spool]
//!     prints the number of matching lines (content mode unless --mode says otherwise)
//! search_bench glob DIR PATTERN [--list] [--threads N]    prints the number of files, or every path with --list
//! ```
//!
//! `--keep-spool` keeps the full result's spool file and prints its path on stderr (to compare it
//! with `rg --sort path --heading -n`). `--rss` also prints the process's peak resident memory (`VmHWM` in `/proc/self/status`) in
//! KiB on a second line; the memory test and the README's figures use it.

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
    let value = |f: &str| args.iter().skip(3).skip_while(|a| *a != f).nth(1).cloned();
    let number = |f: &str| value(f).and_then(|v| v.parse::<u64>().ok());
    let ws = match Workspace::new(dir) {
        Ok(ws) => ws,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cx = ToolContext::new(ws);
    let mut registry = ToolRegistry::new();
    let mut tools = SearchToolset::new().glob_limit(usize::MAX);
    if let Some(n) = number("--threads") {
        tools = tools.threads(n as usize);
    }
    if flag("--no-spool") {
        tools = tools.spool_dir(None);
    }
    tools.register(&mut registry);
    let call = match tool.as_str() {
        "grep" => {
            let mut call = json!({"pattern": pattern, "output_mode": value("--mode").unwrap_or("content".into()),
                "fixed_strings": flag("--fixed")});
            if let Some(n) = number("--head-limit") {
                call["head_limit"] = n.into();
            }
            if let Some(n) = number("--offset") {
                call["offset"] = n.into();
            }
            call
        }
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
        if let Some(full) = out.meta["full_output"].as_str() {
            if flag("--keep-spool") {
                eprintln!("{full}");
            } else {
                // The spool file is the bench's by-product, not something to keep.
                let _ = std::fs::remove_file(full);
            }
        }
    }
    if flag("--rss") {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let hwm = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().trim_end_matches(" kB"));
        println!("{}", hwm.unwrap_or("unknown"));
    }
    ExitCode::SUCCESS
}
