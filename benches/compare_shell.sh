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
# Wall time: hyperfine in the same run, one run of each command per round in an order that
# rotates from round to round, so a drifting machine load (other builds) biases none of them; the
# ratio is of medians over all runs. Saved files are deleted by hyperfine's --prepare, outside the
# timed runs. Then a few interleaved runs under GNU time give CPU seconds of the reader alone
# (`cat` vs the runner process, from the capture example's own /proc/self/stat) and peak RSS
# (VmHWM of the runner process).
#
# Everything runs without a controlling terminal (the script re-starts itself with `setsid` when
# it has one), as an agent host under an IDE or MCP client does: the runner then keeps a command in
# the host's session, and so in the host's scheduling group (kernel autogroup). A third command,
# the runner given a controlling terminal by `script` (a pseudo-terminal), shows what a host in a
# terminal pays: there a command must lead a session of its own (S6), a second scheduling group.
#
# Usage: benches/compare_shell.sh [RUNS, default 5: 2×RUNS runs of each command] [workloads, default "lines stream binary"]
# Needs hyperfine, GNU time at /usr/bin/time, `script` and `setsid` (util-linux) and python3.
# KODIK_BENCH_NICE=-10 runs everything at that niceness (root only), which keeps other builds on a
# shared machine from adding noise: the script then runs in a session of its own and gives that
# session's scheduling group the niceness too (with autogroup scheduling a process's nice value
# counts only inside its session's group). The runner-with-a-terminal row is then at a
# disadvantage, since its command's own session keeps the default niceness.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${KODIK_BENCH_DETACHED:-}" ]] && { [[ -n "${KODIK_BENCH_NICE:-}" ]] || (: </dev/tty) 2>/dev/null; }; then
    exec setsid -w env KODIK_BENCH_DETACHED=1 bash "$0" "$@"
fi
if [[ -n "${KODIK_BENCH_NICE:-}" ]]; then
    echo "$KODIK_BENCH_NICE" 2>/dev/null >/proc/self/autogroup || echo "(could not set the session's niceness)" >&2
fi
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

echo "1 GiB capture: kodik-shell runner vs sh -c 'CMD | cat > file' ($((2 * runs)) runs of each, load at start: $(cut -d' ' -f1-3 /proc/loadavg)${KODIK_BENCH_NICE:+, niceness $KODIK_BENCH_NICE})"
for w in $workloads; do
    gen="$(gen_for "$w")"
    floor="sh -c \"$gen | cat > $out/file\""
    runner="$bin \"$gen\" $out"
    # The same runner in a host with a controlling terminal (a pseudo-terminal from `script`).
    printf '%q ' "$bin" "$gen" "$out" >"$work/runner-$w.sh"
    runner_tty="script -qefc \"bash $work/runner-$w.sh\" /dev/null"
    prep="sh -c 'rm -rf $out; mkdir -p $out'"
    all=("$floor" "$runner" "$runner_tty")
    for ((round = 0; round < 2 * runs; round++)); do
        k=$((round % 3))
        cmds=("${all[@]:k}" "${all[@]:0:k}")
        warmup=0
        if ((round == 0)); then warmup=1; fi
        "${nice[@]}" hyperfine -N --style none --warmup "$warmup" --runs 1 --prepare "$prep" \
            --export-json "$work/$w-round$round.json" "${cmds[@]}" >/dev/null
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
    python3 - "$w" "$work" "$floor" "$runner" "$runner_tty" <<'PY'
import glob, json, statistics, sys
w, work, floor, runner, runner_tty = sys.argv[1:6]
times = {floor: [], runner: [], runner_tty: []}
for path in glob.glob(f"{work}/{w}-round*.json"):
    for r in json.load(open(path))["results"]:
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
mt = statistics.median(times[runner_tty])
print(f"  {w:6} wall median: floor {mf:.2f} s, runner {mr:.2f} s -> {mr / mf:.2f}x (min {min(r) / min(f):.2f}x; {len(f)} runs each)")
print(f"  {'':6} runner in a host with a controlling terminal {mt:.2f} s -> {mt / mf:.2f}x of the floor")
print(f"  {'':6} reader CPU median: cat {cf:.2f} s, runner {cr:.2f} s -> {cr / cf:.2f}x; runner peak RSS {max(rss) / 1024:.1f} MiB; {size}")
PY
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
