#!/usr/bin/env bash
# The whole test suite: installs dependencies, then builds and runs the plain build's unit tests
# and end-to-end scenarios, the product's unit tests under valgrind (the simulators' valgrind pass
# is a CI lane), every unit test in the ASan+UBSan build, the operator scenarios again with the
# sanitizer build of the operator, and a short smoke of each fuzzer. Ends with one
# "N passed, N failed" line over every stage.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
total_pass=0
total_fail=0
step() { printf '\n=== %s ===\n' "$*"; }

# run_ctest DIR LABEL [env...]: runs one label's tests, adds to the totals, fails on any failure.
run_ctest() {
    local dir=$1 label=$2
    shift 2
    local log
    log=$(mktemp)
    set +e
    local -a only=()
    [ -z "${CTEST_REGEX:-}" ] || only=(-R "$CTEST_REGEX")
    (cd "$dir" && env "$@" ctest --output-on-failure --no-tests=ignore -j "${CTEST_JOBS:-$jobs}" -L "$label" \
        "${only[@]+"${only[@]}"}") 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    set -e
    local line n f
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
    rm -f "$log"
    if [ -n "$line" ]; then
        n=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
        f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
        total_pass=$((total_pass + n - f))
        total_fail=$((total_fail + f))
    fi
    if [ "$rc" -ne 0 ]; then
        echo "stage $label in $dir failed"
        echo "suite: $total_pass passed, $((total_fail > 0 ? total_fail : 1)) failed"
        exit 1
    fi
}

step "plain build (-Wall -Wextra -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKC_VALGRIND=ON >/dev/null
cmake --build build -j "$jobs"
step "release build (-O3, as the demo and bench/run build it)"
# Optimisation changes what the compiler can prove (e.g. -Wmaybe-uninitialized): the demo's build
# must not fail where the debug one passes.
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_TESTS=OFF >/dev/null
cmake --build build-release -j "$jobs"
step "unit tests"
run_ctest build unit
step "end-to-end scenarios (kubesim, real kubectl and helm)"
# Scenarios mostly wait on the simulated cluster: one more at a time than there are cores.
# CI (.ci/run) sets KC_E2E_SANITIZED_LANE=1: its sanitized lane (scripts/e2e-sanitized.sh) runs
# every scenario again with the ASan + UBSan builds of kubesim, nodesim and the operator, so here
# only the demo runs (it builds and runs the Release programs, which that lane leaves out).
if [ "${KC_E2E_SANITIZED_LANE:-0}" = 1 ]; then
    CTEST_REGEX='^e2e_readme_demo$' run_ctest build e2e
else
    CTEST_JOBS=$((jobs + 1)) run_ctest build e2e
fi
step "unit tests under valgrind (libkube, the operator, the validator)"
# Many of these wait on in-process servers and timers: one more job than cores keeps both busy.
# The simulators' tests (label valgrind-sim) run under ASan+UBSan below; CI (.ci/run) adds
# their valgrind pass as a lane of its own, which keeps this suite within its time budget.
CTEST_JOBS=$((jobs + 1)) run_ctest build '^valgrind$'

step "ASan + UBSan build + unit tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
run_ctest build-asan unit ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

if [ "${KC_E2E_SANITIZED_LANE:-0}" != 1 ]; then
    step "operator scenarios with the ASan + UBSan operator (any sanitizer report fails)"
    cmake --build build-asan -j "$jobs" --target gpu-operator
    CTEST_REGEX='^e2e_operator_(install|lifecycle|mig)$' run_ctest build e2e OPERATOR_BIN="$PWD/build-asan/gpu-operator" \
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
fi

step "fuzz smoke (libFuzzer, ${KC_FUZZ_SECONDS:-10}s each)"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DKC_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs"
run_ctest build-fuzz fuzz

step "format check (.clang-format)"
if ! git ls-files '*.c' '*.h' | xargs -r clang-format --dry-run -Werror; then
    echo "suite: $total_pass passed, 1 failed"
    exit 1
fi
echo "all test stages passed"
echo "suite: $total_pass passed, $total_fail failed"
