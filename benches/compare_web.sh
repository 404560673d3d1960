#!/usr/bin/env bash
# HTML → Markdown on a 2 MB real-world page and on a 200 KB slice of it: kodik-web (main-content
# extraction + htmd) and the two converter crates alone (htmd, fast_html2md) against turndown
# (npm) under Node, in one run. Each round runs every converter N times in a warm process and
# takes the median; the rounds interleave the tools, so a change of load hits them alike. Prints
# every round's ratios and the median over rounds, and keeps every Markdown output side by side
# under target/web-compare/.
#
#   bash benches/compare_web.sh [PAGE.html] [N] [ROUNDS]
#
# PAGE defaults to The Rust Programming Language as one page (book/print.html of the toolchain's
# docs, ~1.9 MB); the 200 KB slice is its start cut before a chapter heading (as the criterion
# bench `web` cuts it). turndown is installed with npm into target/turndown-bench (never
# committed). Needs: cargo, node, npm, python3 and bc.
set -euo pipefail
cd "$(dirname "$0")/.."

PAGE=${1:-"$(rustc --print sysroot)/share/doc/rust/html/book/print.html"}
N=${2:-15}
ROUNDS=${3:-3}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=target/web-compare
TD=target/turndown-bench
mkdir -p "$OUT" "$TD"
for tool in node npm python3 bc; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }; done
[[ -f "$PAGE" ]] || { echo "no page at $PAGE" >&2; exit 1; }
if [[ ! -d "$TD/node_modules/turndown" ]]; then
    npm install --prefix "$TD" --no-audit --no-fund --silent turndown@7 >/dev/null
fi
cargo build --release -q -p kodik-benches --bin web-md
SMALL="$OUT/page-200k.html"
python3 - "$PAGE" "$SMALL" <<'PY'
import sys
html = open(sys.argv[1], encoding="utf-8").read()
cut = html.encode()[:200 * 1024].decode("utf-8", "ignore")
i = cut.rfind("<h1")
open(sys.argv[2], "w", encoding="utf-8").write((cut[:i] if i > 0 else cut) + "</main></body></html>")
PY

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio() { echo "scale=1; $1 / $2" | bc; }

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for page in "$PAGE" "$SMALL"; do
    name=$(basename "$page" .html)
    echo
    echo "page: $page ($(wc -c <"$page") bytes); each figure the median of $N conversions"
    printf '  %-6s %12s %12s %14s %12s   %s\n' round "turndown ms" "htmd ms" "fast_html2md" "kodik-web" "kodik-web vs turndown"
    : >"$OUT/$name.times"
    for r in $(seq "$ROUNDS"); do
        td=$(node benches/web_turndown.js "$(realpath "$TD")" "$page" "$N" "$OUT/$name.turndown.md")
        hm=$("$TARGET/release/web-md" "$page" "$N" "$OUT/$name.htmd.md" --htmd-only)
        fh=$("$TARGET/release/web-md" "$page" "$N" "$OUT/$name.fast_html2md.md" --fast-html2md)
        kw=$("$TARGET/release/web-md" "$page" "$N" "$OUT/$name.kodik-web.md")
        echo "$td $hm $fh $kw" >>"$OUT/$name.times"
        printf '  %-6s %12s %12s %14s %12s   %sx\n' "$r" "$td" "$hm" "$fh" "$kw" "$(ratio "$td" "$kw")"
    done
    td=$(cut -d' ' -f1 "$OUT/$name.times" | median)
    hm=$(cut -d' ' -f2 "$OUT/$name.times" | median)
    fh=$(cut -d' ' -f3 "$OUT/$name.times" | median)
    kw=$(cut -d' ' -f4 "$OUT/$name.times" | median)
    echo "  median over $ROUNDS rounds:"
    printf '    %-32s %9s ms  %s\n' "turndown 7 (Node $(node --version))" "$td" "baseline"
    printf '    %-32s %9s ms  %sx turndown speed\n' "htmd alone" "$hm" "$(ratio "$td" "$hm")"
    printf '    %-32s %9s ms  %sx turndown speed\n' "fast_html2md alone" "$fh" "$(ratio "$td" "$fh")"
    printf '    %-32s %9s ms  %sx turndown speed\n' "kodik-web (extract + htmd)" "$kw" "$(ratio "$td" "$kw")"
done
echo
wc -c "$OUT"/*.md
