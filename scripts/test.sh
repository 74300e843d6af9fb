#!/usr/bin/env bash
# The whole test suite: installs dependencies, then builds and runs the plain build's unit tests,
# the ASan+UBSan build's tests, every test under valgrind, and a short smoke of each fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
step() { printf '\n=== %s ===\n' "$*"; }

step "plain build (-Wall -Wextra -Werror) + unit tests + valgrind"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKC_VALGRIND=ON >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs" -L unit)
(cd build && ctest --output-on-failure -j "$jobs" -L valgrind)

step "ASan + UBSan build + unit tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKC_SANITIZE=ON >/dev/null
cmake --build build-asan -j "$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$jobs" -L unit)

step "fuzz smoke (libFuzzer, ${KC_FUZZ_SECONDS:-10}s each)"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DKC_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs"
(cd build-fuzz && ctest --output-on-failure -j "$jobs" -L fuzz)

step "format check"
bad=$(git ls-files '*.c' '*.h' | xargs -r clang-format --dry-run -Werror 2>&1 | grep -c 'error:' || true)
if [ "$bad" != "0" ]; then
  git ls-files '*.c' '*.h' | xargs -r clang-format --dry-run -Werror
  exit 1
fi
echo "all test stages passed"
