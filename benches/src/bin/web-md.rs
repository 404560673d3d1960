//! kodik-web's HTML → Markdown on one page, N times: prints the median milliseconds and writes
//! the Markdown (`compare_web.sh` runs it beside turndown on the same page).
//! Usage: web-md PAGE.html ITERATIONS OUT.md [--htmd-only]

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [page, iterations, out, rest @ ..] = args.as_slice() else {
        eprintln!("usage: web-md PAGE.html ITERATIONS OUT.md [--htmd-only]");
        std::process::exit(2);
    };
    let html = std::fs::read_to_string(page).unwrap();
    let iterations: usize = iterations.parse().unwrap();
    let htmd_only = rest.iter().any(|a| a == "--htmd-only");
    let run = || {
        if htmd_only {
            htmd::convert(&html).unwrap()
        } else {
            kodik_web::html::convert_on_big_stack(
                html.clone(),
                Some("https://doc.rust-lang.org/book/print.html".into()),
            )
            .unwrap()
            .markdown
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
