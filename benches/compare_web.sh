#!/usr/bin/env bash
# HTML → Markdown on one 2 MB real-world page: kodik-web (main-content extraction + htmd) and
# htmd alone against turndown (npm) under Node, in one run, medians of N conversions each in a
# warm process. Keeps every Markdown output side by side under target/web-compare/.
#
#   bash benches/compare_web.sh [PAGE.html] [N]
#
# PAGE defaults to The Rust Programming Language as one page (book/print.html of the toolchain's
# docs, ~1.9 MB). turndown is installed with npm into target/turndown-bench (never committed).
# Needs: cargo, node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

PAGE=${1:-"$(rustc --print sysroot)/share/doc/rust/html/book/print.html"}
N=${2:-15}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=target/web-compare
TD=target/turndown-bench
mkdir -p "$OUT" "$TD"
for tool in node npm; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }; done
[[ -f "$PAGE" ]] || { echo "no page at $PAGE" >&2; exit 1; }
if [[ ! -d "$TD/node_modules/turndown" ]]; then
    npm install --prefix "$TD" --no-audit --no-fund --silent turndown@7 >/dev/null
fi
cargo build --release -q -p kodik-benches --bin web-md

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "page: $PAGE ($(wc -c <"$PAGE") bytes), median of $N conversions each"
kodik=$("$TARGET/release/web-md" "$PAGE" "$N" "$OUT/kodik-web.md")
htmd=$("$TARGET/release/web-md" "$PAGE" "$N" "$OUT/htmd.md" --htmd-only)
turndown=$(node benches/web_turndown.js "$(realpath "$TD")" "$PAGE" "$N" "$OUT/turndown.md")
printf '%-34s %9s ms  %s\n' "turndown 7 (Node $(node --version))" "$turndown" "baseline"
printf '%-34s %9s ms  %sx turndown speed\n' "htmd alone" "$htmd" "$(echo "scale=1; $turndown / $htmd" | bc)"
printf '%-34s %9s ms  %sx turndown speed\n' "kodik-web (extract + htmd)" "$kodik" "$(echo "scale=1; $turndown / $kodik" | bc)"
wc -c "$OUT"/*.md
