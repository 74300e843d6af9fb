#!/usr/bin/env bash
# Long libFuzzer campaign over every parser target (the CI smoke runs 10 s each; this runs minutes).
#
#   scripts/fuzz-long.sh [--seconds N] [--jobs J] [--targets a,b,...] [--report FILE]
#
# Builds build-fuzz (clang, -DKC_FUZZ=ON) unless FUZZ_BUILD_DIR names a built one, then runs each
# target for N seconds (default 600) starting from its committed corpus
# (controller/fuzz/corpus/<target>), J targets at a time (default 1). New inputs that add coverage
# are merged back into the committed corpus (libFuzzer -merge=1, so the corpus stays minimal).
# A crash, leak, timeout or out-of-memory input is copied to controller/fuzz/corpus/<target>/
# as regress-<kind>-<sha1> (so the CI smoke replays it from then on) and fails the run.
# Prints one line per target (runs, coverage, corpus growth, result) and writes them to the
# report file (default fuzz-long-report.txt in the build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=600 jobs=1 targets="" report=""
while [ $# -gt 0 ]; do
    case $1 in
    --seconds) secs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--jobs J] [--targets a,b] [--report FILE]" >&2; exit 2 ;;
    esac
done
build=${FUZZ_BUILD_DIR:-build-fuzz}
if [ -z "${FUZZ_BUILD_DIR:-}" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DKC_FUZZ=ON >/dev/null
    cmake --build "$build" -j "$(nproc)"
fi
report=${report:-$build/fuzz-long-report.txt}
if [ -z "$targets" ]; then
    targets=$(find controller/fuzz -maxdepth 1 -name 'fuzz_*.c' -printf '%f\n' | sed 's/\.c$//' | sort | paste -sd,)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-long.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run_one TARGET: the campaign for one target; its summary line goes to $work/TARGET.line.
run_one() {
    local t=$1 bin="$build/$1" corpus="controller/fuzz/corpus/$1"
    local new="$work/$t.new" art="$work/$t.art" log="$work/$t.log" merged="$work/$t.merged"
    mkdir -p "$corpus" "$new" "$art" "$merged"
    local before rc=0
    before=$(find "$corpus" -type f | wc -l)
    [ -x "$bin" ] || { echo "$t: FAIL no binary at $bin" >"$work/$t.line"; return; }
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$new" "$corpus" >"$log" 2>&1 || rc=$?
    local found=0 f kind
    for f in "$art"/*; do
        [ -f "$f" ] || continue
        kind=$(basename "$f" | sed 's/-.*//')
        cp "$f" "$corpus/regress-$kind-$(sha1sum "$f" | cut -c1-12)"
        found=$((found + 1))
    done
    # Keep only what adds coverage to the committed corpus.
    "$bin" -merge=1 "$merged" "$corpus" "$new" >>"$log" 2>&1 || true
    local f2
    for f2 in "$merged"/*; do
        [ -f "$f2" ] || continue
        [ -e "$corpus/$(basename "$f2")" ] || cp "$f2" "$corpus/"
    done
    local runs cov after result
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
    after=$(find "$corpus" -type f | wc -l)
    if [ "$found" -gt 0 ] || [ "$rc" -ne 0 ]; then
        result="FAIL ($found crashing inputs kept as regress-*; exit $rc; log tail below)"
        { echo "--- $t"; tail -40 "$log"; } >"$work/$t.fail"
    else
        result="ok, no crash"
    fi
    printf '%-22s %6ss  runs %-11s cov %-6s corpus %s -> %s  %s\n' "$t" "$secs" "${runs:-?}" \
        "${cov:-?}" "$before" "$after" "$result" >"$work/$t.line"
}

IFS=, read -ra list <<<"$targets"
echo "fuzz-long: ${#list[@]} targets, ${secs}s each, $jobs at a time (from $(date -u +%FT%TZ))"
running=0
for t in "${list[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait
{
    echo "fuzz-long on $(git rev-parse --short HEAD 2>/dev/null || echo '?'), ${secs}s per target, finished $(date -u +%FT%TZ)"
    for t in "${list[@]}"; do cat "$work/$t.line"; done
} | tee "$report"
fails=$(cat "$work"/*.fail 2>/dev/null || true)
if [ -n "$fails" ]; then
    echo "$fails" >&2
    exit 1
fi
