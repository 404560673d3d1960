//! HTML → Markdown on one page, N times: prints the median milliseconds and writes the Markdown
//! (`compare_web.sh` runs it beside turndown on the same page).
//! Usage: web-md PAGE.html ITERATIONS OUT.md [--htmd-only | --fast-html2md]
//!
//! Without a flag it runs kodik-web's whole pipeline (clean, main content, htmd); `--htmd-only`
//! and `--fast-html2md` run the two converter crates alone on the raw page, for the choice
//! recorded in kodik-web's README.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [page, iterations, out, rest @ ..] = args.as_slice() else {
        eprintln!("usage: web-md PAGE.html ITERATIONS OUT.md [--htmd-only | --fast-html2md]");
        std::process::exit(2);
    };
    let html = std::fs::read_to_string(page).unwrap();
    let iterations: usize = iterations.parse().unwrap();
    let mode = rest.first().map(String::as_str).unwrap_or("");
    let run = || match mode {
        "--htmd-only" => htmd::convert(&html).unwrap(),
        "--fast-html2md" => html2md::rewrite_html(&html, false),
        "" => {
            kodik_web::html::convert_on_big_stack(
                html.clone(),
                Some("https://doc.rust-lang.org/book/print.html".into()),
            )
            .unwrap()
            .markdown
        }
        other => {
            eprintln!("web-md: unknown flag {other}");
            std::process::exit(2);
        }
    };
    let mut md = run(); // warm-up
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        md = run();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    std::fs::write(out, md).unwrap();
    println!("{:.2}", times[times.len() / 2]);
}
