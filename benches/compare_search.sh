#!/usr/bin/env bash
# Compares kodik-search's grep and glob with ripgrep (`rg`) and fd on a large real
# tree, checking first that every tool finds exactly the same hits / files.
#
#   bash benches/compare_search.sh [TREE]
#
# TREE defaults to a copy of ~/.cargo/registry/src (the crate sources cargo unpacked: a few
# hundred MB of real Rust, C, Markdown, JSON, … in ~17k files). The copy is made under $TMPDIR
# and `git init`-ed, so that all three tools apply the same `.gitignore` rules (rg and fd
# honour `.gitignore` only inside a git repository; kodik always does) and so that cargo
# unpacking more crates meanwhile cannot change the file set between runs.
#
# Needs: cargo, hyperfine, and the current ripgrep and fd. Those are looked for first in
# $KODIK_BENCH_TOOLS/bin (default ~/.cache/kodik-bench-tools/bin, where
#   CARGO_TARGET_DIR=~/.cache/kodik-bench-tools/target cargo install ripgrep fd-find --root ~/.cache/kodik-bench-tools
# puts them), then on PATH (`rg`; `fd`, or Debian's `fdfind`). The versions used are printed;
# an rg older than 15 or an fd older than 10 is used only with a warning, since the figures
# are meant against the current releases.
# kodik is timed through crates/kodik-search/examples/search_bench.rs: one real tool call
# (workspace, walk, parallel search, page, spool) per process, like `kodik call` would make.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=${KODIK_BENCH_TOOLS:-$HOME/.cache/kodik-bench-tools}/bin
find_tool() { # first of the names found in $TOOLS, then on PATH
    local name
    for name in "$@"; do
        if [[ -x "$TOOLS/$name" ]]; then echo "$TOOLS/$name"; return; fi
    done
    for name in "$@"; do
        if command -v "$name" >/dev/null; then command -v "$name"; return; fi
    done
}
RG=$(find_tool rg)
FD=$(find_tool fd fdfind)
for tool in RG FD; do
    [[ -n "${!tool}" ]] || { echo "missing ${tool,,}: cargo install ripgrep fd-find (see the top of this script)" >&2; exit 1; }
done
command -v hyperfine >/dev/null || { echo "missing hyperfine: apt-get install -y hyperfine" >&2; exit 1; }
rg_version=$("$RG" --version | head -1 | awk '{print $2}')
fd_version=$("$FD" --version | head -1 | awk '{print $2}')
echo "rg: $RG ($rg_version); fd: $FD ($fd_version)"
if [[ ${rg_version%%.*} -lt 15 ]]; then
    echo "WARNING: rg $rg_version is older than 15; the figures are not against the current ripgrep." >&2
fi
if [[ ${fd_version%%.*} -lt 10 ]]; then
    echo "WARNING: fd $fd_version is older than 10; the figures are not against the current fd." >&2
fi

SRC=${1:-}
if [[ -z "$SRC" ]]; then
    SRC=$(mktemp -d "${TMPDIR:-/tmp}/kodik-bench-tree.XXXXXX")
    trap 'rm -rf "$SRC"' EXIT
    cp -r "$HOME/.cargo/registry/src/." "$SRC/"
    git -C "$SRC" init -q
fi
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $SRC ($(du -sh "$SRC" | cut -f1), $(find "$SRC" -type f -not -path '*/.git/*' | wc -l) files)"

# FIFO=1 runs the timed commands under SCHED_FIFO (`chrt -f 50`, needs root or CAP_SYS_NICE):
# on a machine shared with other builds they then run as on a quiet one (the others wait), so
# the two tools are compared on their own work rather than on their share of a loaded CPU.
RUN=()
if [[ -n "${FIFO:-}" ]]; then
    chrt -f 50 true || { echo "FIFO=1 needs chrt -f (root or CAP_SYS_NICE)" >&2; exit 1; }
    RUN=(chrt -f 50)
    echo "timing under SCHED_FIFO (chrt -f 50)"
fi

# NO_BUILD=1 times the binary already built (the build waits for cargo's lock meanwhile).
[[ -n "${NO_BUILD:-}" ]] || cargo build --release -q -p kodik-search --example search_bench
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/search_bench
RUNS=${RUNS:-20}
OUT=$(mktemp -d)
status=0

# hyperfine runs one command's runs, then the other's; on a shared machine the load moves in
# between and favours whichever ran in the quieter stretch. So each comparison is ROUNDS
# hyperfine runs of RUNS/ROUNDS each, alternating which command goes first, pooled.
ROUNDS=${ROUNDS:-5}
compare() { # name, kodik command, other command
    local name=$1 ours=$2 theirs=$3 r per=$(( (RUNS + ROUNDS - 1) / ROUNDS ))
    for ((r = 0; r < ROUNDS; r++)); do
        if (( r % 2 == 0 )); then set -- "$ours" "$theirs"; else set -- "$theirs" "$ours"; fi
        "${RUN[@]}" hyperfine -N --warmup 1 --runs "$per" --output=pipe --export-json "$OUT/$name.$r.json" "$1" "$2" >/dev/null
    done
    python3 - "$OUT/$name" "$ROUNDS" "$ours" <<'PY'
import json, sys
prefix, rounds, ours = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {True: [], False: []}
cpu = {True: [], False: []}
for r in range(rounds):
    for res in json.load(open("%s.%d.json" % (prefix, r)))["results"]:
        mine = res["command"] == ours
        runs[mine] += res["times"]
        cpu[mine] += [res["user"] + res["system"]] * len(res["times"])
mean = lambda xs: sum(xs) / len(xs)
ms = lambda x: "%.1f ms" % (x * 1e3)
a, b = runs[True], runs[False]
ca, cb = mean(cpu[True]), mean(cpu[False])
# On a shared, loaded machine the mean moves with other processes; the minimum and the CPU
# time (user + system) are the steadier comparisons, so all three are shown.
print("wall mean %s vs %s: %.2f; wall min %s vs %s: %.2f; cpu %s vs %s: %.2f (%d runs each, %d alternating rounds)"
      % (ms(mean(a)), ms(mean(b)), mean(a) / mean(b), ms(min(a)), ms(min(b)), min(a) / min(b),
         ms(ca), ms(cb), ca / cb, len(a), rounds))
PY
}

peak_rss_rg() { # peak RSS in KiB of rg printing every line into /dev/null
    /usr/bin/time -f %M "$RG" --no-require-git "$@" 2>&1 >/dev/null | tail -1
}

grep_case() { # name, pattern, extra rg flags, extra kodik flags, target
    local name=$1 pat=$2 rgflags=$3 kflags=$4 target=${5:-1.00}
    local ours theirs rss
    ours=$("$BIN" grep "$SRC" "$pat" $kflags | head -1)
    theirs=$("$RG" --no-require-git $rgflags --count --no-filename "$pat" "$SRC" | awk '{s+=$1} END {print s+0}')
    echo "grep $name /$pat/: kodik $ours matching lines, rg $theirs"
    if [[ "$ours" != "$theirs" ]]; then echo "  MISMATCH" >&2; status=1; fi
    # kodik answers with a page (250 lines by default) and, when that is not all, streams the
    # full result to a spool file on disk; rg prints every line into /dev/null.
    echo "  $(compare "$name" "$BIN grep $SRC '$pat' $kflags" "$RG --no-require-git $rgflags -n '$pat' $SRC") (target ≤ $target)"
    if [[ $name == many-hits || $name == dense ]]; then
        # The full result is kept on disk (G9), so the like-for-like floor for a result that does
        # not fit the page is rg writing every line into a file (as `| cat > file` is for shell).
        echo "  vs rg writing its lines to a file: $(compare "$name-file" "$BIN grep $SRC '$pat' $kflags" \
            "sh -c \"$RG --no-require-git $rgflags -n '$pat' $SRC > $OUT/rg.out\"")"
    fi
    rss=$("$BIN" grep "$SRC" "$pat" $kflags --rss | tail -1)
    echo "  peak RSS: kodik $((rss / 1024)) MiB, rg $(($(peak_rss_rg $rgflags -n "$pat" "$SRC") / 1024)) MiB"
}

# CASES picks the comparisons: `grep`, `glob` or both (the default).
CASES=" ${CASES:-grep glob} "
if [[ $CASES == *" grep "* ]]; then
grep_case literal "fn main" "-F" "--fixed"
grep_case few-hits 'unsafe\s+impl\s+\w*Send\w*\s+for' "" ""
grep_case many-hits '\w+\(' "" ""
# Issue 19: every line with an `e` (millions of hits); memory must follow the page, not the result.
grep_case dense 'e' "" ""
for extra in "--head-limit 100000000" "--offset 1000000"; do
    rss=$("$BIN" grep "$SRC" e $extra --rss | tail -1)
    echo "  dense $extra: peak RSS kodik $((rss / 1024)) MiB (target ≤ 64)"
done
fi

if [[ $CASES == *" glob "* ]]; then
"$BIN" glob "$SRC" '**/*.rs' --list | sort >"$OUT/kodik.files"
(cd "$SRC" && "$FD" -t f -g '*.rs' | sed 's|^\./||' | sort) >"$OUT/fd.files"
echo "glob **/*.rs: kodik $(wc -l <"$OUT/kodik.files") files, fd $(wc -l <"$OUT/fd.files")"
if ! cmp -s "$OUT/kodik.files" "$OUT/fd.files"; then
    echo "  MISMATCH:" >&2
    diff "$OUT/kodik.files" "$OUT/fd.files" | head -10 >&2
    status=1
fi
echo "  $(compare glob "$BIN glob $SRC '**/*.rs'" "$FD -t f -g '*.rs' $SRC") (target ≤ 1.00)"
# Newest-first order needs each match's modification time, which plain fd never reads. fd
# reads it (one `statx` per match, as kodik) when filtering on it; a filter every file passes
# makes that the like-for-like floor.
echo "  vs fd reading each match's mtime (--changed-before 2100-01-01): $(compare glob-stat \
    "$BIN glob $SRC '**/*.rs'" "$FD -t f -g '*.rs' --changed-before 2100-01-01 $SRC")"
# ripgrep lists files with the same walker (`ignore`) and the same regex engine features as
# kodik (full DFAs for the ignore globs, which fd's build leaves out): what a tool that also
# greps pays over fd before reading any metadata.
echo "  vs rg --files -g '*.rs': $(compare glob-rg "$BIN glob $SRC '**/*.rs'" "$RG --files -g '*.rs' $SRC")"
echo "  rg --files -g '*.rs' vs fd: $(compare rg-fd "$RG --files -g '*.rs' $SRC" "$FD -t f -g '*.rs' $SRC")"
# The same walk with no match: what remains of the difference above is the one `stat` per
# matched file that newest-first ordering needs (fd -t f reads no metadata; fd -l does).
echo "glob walk only (no match): $(compare walk "$BIN glob $SRC '*.no-such-extension'" "$FD -t f -g '*.no-such-extension' $SRC")"
# What reading one modification time per match costs by itself, outside kodik and fd: find
# (one thread, no ignore rules) listing the same names, without and with printing each
# match's mtime (`fstatat` relative to the open folder, as fd's `--changed-before` does).
echo "stat cost, find printing each match's mtime vs find listing: $(compare find-stat \
    "find $SRC -type f -name '*.rs' -printf '%T@\n'" "find $SRC -type f -name '*.rs'")"
fi
rm -rf "$OUT"
exit $status
