#!/usr/bin/env bash
# The whole end-to-end suite with sanitizers and valgrind, not only the unit tests:
#
#   scripts/e2e-sanitized.sh [--jobs N] [--no-valgrind]
#
# 1. Every e2e scenario (ctest label e2e) with kubesim, nodesim and the operator built with
#    AddressSanitizer + UndefinedBehaviorSanitizer (build-asan, RelWithDebInfo): each program's
#    log is searched for reports when the scenario ends (e2e/lib.sh, lib_operator.sh,
#    lib_chart.sh) and any report fails the scenario; LeakSanitizer runs at each exit.
# 2. The operator scenarios with the operator under valgrind memcheck (the plain Debug build in
#    build/): e2e/lib_operator.sh starts it through $OPERATOR_WRAPPER and fails the scenario on
#    any memcheck error or definitely/indirectly lost block.
# Prints one "suite: N passed, N failed" line and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(($(nproc) + 1)) valgrind=1
while [ $# -gt 0 ]; do
    case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --no-valgrind) valgrind=0; shift ;;
    *) echo "usage: $0 [--jobs N] [--no-valgrind]" >&2; exit 2 ;;
    esac
done
pass=0 fail=0
count() { # count LOG: adds ctest's passed/failed numbers
    local line
    line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$1" | tail -1)
    [ -n "$line" ] || { fail=$((fail + 1)); return; }
    local total failed
    failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed.*/\1/')
    total=$(echo "$line" | sed -E 's/.*out of ([0-9]+).*/\1/')
    pass=$((pass + total - failed)); fail=$((fail + failed))
}
log=$(mktemp "${TMPDIR:-/tmp}/e2e-sanitized.XXXXXX")
trap 'rm -f "$log"' EXIT

echo "== e2e with the ASan + UBSan builds of kubesim, nodesim and the operator"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$(nproc)" || { echo "suite: 0 passed, 1 failed"; exit 1; }
# readme_demo builds and runs the Release demo itself: nothing of build-asan runs there.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=max_leaks=10 \
    ctest --test-dir build-asan -L e2e -E '^e2e_readme_demo$' -j "$jobs" --output-on-failure \
    --timeout 900 2>&1 | tee "$log"
count "$log"

if [ "$valgrind" = 1 ]; then
    echo "== operator scenarios with the operator under valgrind memcheck"
    command -v valgrind >/dev/null || { echo "valgrind is not installed"; exit 1; }
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build build -j "$(nproc)" || { echo "suite: $pass passed, $((fail + 1)) failed"; exit 1; }
    OPERATOR_WRAPPER="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --track-origins=no --num-callers=30" \
        ctest --test-dir build -R '^e2e_operator_(install|lifecycle|mig)$' -j 2 --output-on-failure \
        --timeout 900 2>&1 | tee "$log"
    count "$log"
fi
echo "suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
