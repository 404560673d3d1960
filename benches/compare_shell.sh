#!/usr/bin/env bash
# Wall time and peak RSS of capturing 1 GiB of output through kodik-shell's `shell` tool
# (the `capture` example: merged pipe, ANSI stripping, head/tail preview, and the complete
# output saved to a spool file) against plain shells in the same run, interleaved:
#   sh -c '… > /dev/null'   the target's baseline (≤ 1.5× wall; runner peak RSS ≤ 64 MiB)
#   sh -c '… | cat >/dev/null'  the pipe alone (every capture reads the output through one)
#   sh -c '… > file'        the spool write alone (the runner must save every byte, G18–G20)
#   sh -c '… | cat > file'  pipe + file: the least a capture that keeps a full copy must do
# Saved files are deleted outside the timed runs (the runner's too).
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
null_t=(); pipe_t=(); file_t=(); pipefile_t=(); run_t=(); run_rss=()
for _ in $(seq "$runs"); do
    read -r t _ < <(measure sh -c "$gen > /dev/null"); null_t+=("$t")
    read -r t _ < <(measure sh -c "$gen | cat > /dev/null"); pipe_t+=("$t")
    read -r t _ < <(measure sh -c "$gen > $spool_dir/out"); file_t+=("$t"); rm -f "$spool_dir/out"
    read -r t _ < <(measure sh -c "$gen | cat > $spool_dir/out"); pipefile_t+=("$t"); rm -f "$spool_dir/out"
    mkdir -p "$spool_dir/runner"
    read -r t rss < <(measure "$bin" "$gen" "$spool_dir/runner"); run_t+=("$t"); run_rss+=("$rss")
    rm -rf "$spool_dir/runner"
done
n=$(printf '%s\n' "${null_t[@]}" | median)
p=$(printf '%s\n' "${pipe_t[@]}" | median)
f=$(printf '%s\n' "${file_t[@]}" | median)
pf=$(printf '%s\n' "${pipefile_t[@]}" | median)
r=$(printf '%s\n' "${run_t[@]}" | median)
m=$(printf '%s\n' "${run_rss[@]}" | sort -n | tail -1)
x() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
echo "1 GiB capture, median of $runs interleaved runs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "  sh -c '… > /dev/null'          : ${n} s"
echo "  sh -c '… | cat > /dev/null'    : ${p} s  ($(x "$p" "$n")× of /dev/null)"
echo "  sh -c '… > file'               : ${f} s  ($(x "$f" "$n")× of /dev/null)"
echo "  sh -c '… | cat > file'         : ${pf} s  ($(x "$pf" "$n")× of /dev/null)"
echo "  kodik-shell runner             : ${r} s  ($(x "$r" "$n")× of /dev/null, target ≤ 1.5×; $(x "$r" "$f")× of > file; $(x "$r" "$pf")× of | cat > file)"
echo "  runner peak RSS                : $((m / 1024)) MiB (target ≤ 64 MiB)"
