#!/usr/bin/env bash
# Wall time and peak RSS of capturing 1 GiB of output through kodik-shell's `shell` tool
# (the `capture` example: preview + spool file + ANSI stripping) against plain
# `sh -c '… > /dev/null'`, in the same run. Targets: ≤ 1.5× wall, runner peak RSS ≤ 64 MiB.
# Usage: benches/compare_shell.sh [runs]   (needs GNU time at /usr/bin/time)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
gen="head -c 1G /dev/zero | tr '\\0' x"
cargo build --release -q -p kodik-shell --example capture
bin="${CARGO_TARGET_DIR:-target}/release/examples/capture"

measure() { # prints "seconds max_rss_kib" of one run of "$@"
    local log
    log="$(mktemp)"
    /usr/bin/time -f '%e %M' -o "$log" "$@" >/dev/null
    cat "$log"
    rm -f "$log"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

spool_dir="$(mktemp -d)"
trap 'rm -rf "$spool_dir"' EXIT
base_t=(); file_t=(); run_t=(); run_rss=()
for _ in $(seq "$runs"); do
    read -r t _ < <(measure sh -c "$gen > /dev/null"); base_t+=("$t")
    # The runner also saves every byte (G18-G20): this is the floor for that part.
    read -r t _ < <(measure sh -c "$gen > $spool_dir/out"); file_t+=("$t"); rm -f "$spool_dir/out"
    read -r t rss < <(measure "$bin" "$gen"); run_t+=("$t"); run_rss+=("$rss")
done
b=$(printf '%s\n' "${base_t[@]}" | median)
f=$(printf '%s\n' "${file_t[@]}" | median)
r=$(printf '%s\n' "${run_t[@]}" | median)
m=$(printf '%s\n' "${run_rss[@]}" | sort -n | tail -1)
echo "1 GiB capture, median of $runs runs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  baseline sh -c '… > /dev/null' : ${b} s"
echo "  baseline sh -c '… > file'      : ${f} s"
echo "  kodik-shell runner              : ${r} s  ($(awk -v r="$r" -v b="$b" 'BEGIN{printf "%.2f", r/b}')× of /dev/null, target ≤ 1.5×; $(awk -v r="$r" -v f="$f" 'BEGIN{printf "%.2f", r/f}')× of > file)"
echo "  runner peak RSS                 : $((m / 1024)) MiB (target ≤ 64 MiB)"
