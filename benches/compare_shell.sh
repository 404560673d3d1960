#!/usr/bin/env bash
# Capturing 1 GiB through kodik-shell's `shell` tool (the `capture` example: merged pipe, ANSI
# stripping, line count, head/tail preview, every byte saved to a spool file) against the floor
# of any capture that keeps every byte: `sh -c 'CMD | cat > file'` (one pipe read and one file
# write per byte). Target: runner ≤ 1.15× that floor, runner peak RSS ≤ 64 MiB.
#
# Three outputs of 1 GiB each:
#   lines   `yes '<an 83-byte log line>' | head -c 1G`    (line-oriented text)
#   stream  `head -c 1G /dev/zero | tr '\0' x`             (no newline at all)
#   binary  16 × `cat` of 64 MiB from /dev/urandom         (an ESC every 256 bytes: stripping works)
#
# Wall time: hyperfine in the same run, floor and runner alternating order between two
# invocations (floor first, then runner first) so a drifting machine load biases neither; the
# ratio is of medians over all runs. Saved files are deleted by hyperfine's --prepare, outside the
# timed runs. Then a few interleaved runs under GNU time give CPU seconds of the reader alone
# (`cat` vs the runner process, from the capture example's own /proc/self/stat) and peak RSS
# (VmHWM of the runner process).
#
# A third command, the floor started with `setsid` (a new session, as the runner starts every
# command), shows how much of the gap is the session's own scheduling group (kernel autogroup).
#
# Usage: benches/compare_shell.sh [runs per order, default 5] [workloads, default "lines stream binary"]
# Needs hyperfine, GNU time at /usr/bin/time and python3. KODIK_BENCH_NICE=-10 runs everything at
# that niceness (root only), which keeps other builds on a shared machine from adding noise.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
workloads="${2:-lines stream binary}"
cargo build --release -q -p kodik-shell --example capture
bin="$(realpath "${CARGO_TARGET_DIR:-target}/release/examples/capture")"
nice=()
if [[ -n "${KODIK_BENCH_NICE:-}" ]]; then nice=(nice -n "$KODIK_BENCH_NICE"); fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$work/out"

gen_for() {
    case "$1" in
        lines) echo "yes 'INFO 2026-12-01T10:00:00Z worker[17]: processed request id=12345 path=/api/v1/items status=200' | head -c 1G" ;;
        stream) echo "head -c 1G /dev/zero | tr '\\0' x" ;;
        binary)
            [[ -f "$work/random" ]] || head -c 64M /dev/urandom >"$work/random"
            echo "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do cat $work/random; done"
            ;;
        *) echo "unknown workload $1" >&2; exit 2 ;;
    esac
}

echo "1 GiB capture: kodik-shell runner vs sh -c 'CMD | cat > file' ($runs runs per order, load at start: $(cut -d' ' -f1-3 /proc/loadavg))"
for w in $workloads; do
    gen="$(gen_for "$w")"
    floor="sh -c \"$gen | cat > $out/file\""
    # The runner starts every command in a new session (S10); with the kernel's autogroup
    # scheduling that session is a scheduling group of its own, which on a loaded machine costs
    # wall time by itself. This floor starts the same pipeline in a new session too.
    floor_setsid="setsid -w sh -c \"$gen | cat > $out/file\""
    runner="$bin \"$gen\" $out"
    prep="sh -c 'rm -rf $out; mkdir -p $out'"
    for order in floor-first runner-first; do
        if [[ $order == floor-first ]]; then cmds=("$floor" "$floor_setsid" "$runner"); else cmds=("$runner" "$floor_setsid" "$floor"); fi
        "${nice[@]}" hyperfine -N --style none --warmup 1 --runs "$runs" --prepare "$prep" \
            --export-json "$work/$w-$order.json" "${cmds[@]}" >/dev/null
    done
    # CPU of the reader alone and peak RSS, interleaved.
    : >"$work/$w-cpu"
    for _ in 1 2 3; do
        rm -rf "$out"; mkdir -p "$out"
        "${nice[@]}" sh -c "$gen | /usr/bin/time -f '%U %S' -o $work/cat-time cat > $out/file"
        echo "floor $(awk '{print $1 + $2}' "$work/cat-time")" >>"$work/$w-cpu"
        rm -rf "$out"; mkdir -p "$out"
        line="$("${nice[@]}" "$bin" "$gen" "$out")"
        echo "runner $(sed -E 's/.*runner_cpu_s=([0-9.]+) runner_peak_rss_kib=([0-9]+).*/\1 \2/' <<<"$line") $(sed -E 's/.*output_bytes=([0-9]+) output_lines=([0-9]+).*/\1 \2/' <<<"$line")" >>"$work/$w-cpu"
    done
    rm -rf "$out"
    python3 - "$w" "$work" "$floor" "$runner" "$floor_setsid" <<'PY'
import json, statistics, sys
w, work, floor, runner, floor_setsid = sys.argv[1:6]
times = {floor: [], runner: [], floor_setsid: []}
for order in ("floor-first", "runner-first"):
    for r in json.load(open(f"{work}/{w}-{order}.json"))["results"]:
        times[r["command"]] += r["times"]
f, r = times[floor], times[runner]
mf, mr = statistics.median(f), statistics.median(r)
cpu = {"floor": [], "runner": []}
rss, size = [], ""
for line in open(f"{work}/{w}-cpu"):
    k, *v = line.split()
    cpu[k].append(float(v[0]))
    if k == "runner":
        rss.append(int(v[1]))
        size = f"{int(v[2]) / 2**20:.0f} MiB saved, {int(v[3])} lines"
cf, cr = statistics.median(cpu["floor"]), statistics.median(cpu["runner"])
ms = statistics.median(times[floor_setsid])
print(f"  {w:6} wall median: floor {mf:.2f} s, runner {mr:.2f} s -> {mr / mf:.2f}x (min {min(r) / min(f):.2f}x; {len(f)} runs each)")
print(f"  {'':6} floor in a new session (setsid) {ms:.2f} s -> runner {mr / ms:.2f}x of it")
print(f"  {'':6} reader CPU median: cat {cf:.2f} s, runner {cr:.2f} s -> {cr / cf:.2f}x; runner peak RSS {max(rss) / 1024:.1f} MiB; {size}")
PY
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
