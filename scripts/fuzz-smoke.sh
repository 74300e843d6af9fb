#!/usr/bin/env bash
# Short libFuzzer run of one target over its committed corpus (a smoke test, not a campaign).
set -euo pipefail
bin=$1; corpus=$2
secs=${KC_FUZZ_SECONDS:-10}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$corpus"
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
  -artifact_prefix="$work/" "$work" "$corpus" 2>"$work/log" || { tail -50 "$work/log"; exit 1; }
grep -E '^Done|DONE' "$work/log" | tail -1
