//! benches: helpers the benchmarks share.

use std::path::Path;

/// Writes the Rust tree the search benchmarks run over into `dir`: 2 000 files of 200 lines
/// each (`fn item_…` calling `helper`), spread over 140 folders two levels deep.
pub fn write_rust_tree(dir: &Path) -> std::io::Result<()> {
    for i in 0..2000 {
        let sub = dir.join(format!("src/m{}/n{}", i % 20, i % 7));
        std::fs::create_dir_all(&sub)?;
        let body: String =
            (0..200).map(|l| format!("fn item_{i}_{l}(x: u32) -> u32 {{ helper(x) + {l} }} // line {l}\n")).collect();
        std::fs::write(sub.join(format!("f{i}.rs")), body)?;
    }
    Ok(())
}
