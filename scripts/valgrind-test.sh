#!/usr/bin/env bash
# Runs one criterion test binary under valgrind (following the per-test child processes) and fails
# on any memory error or leak reported by any process.
# System programs the tests start (the kubelet's `sh`, `sleep`, `echo`) run natively: they are not
# our code, and on a loaded machine a traced `sh` or `sleep` can take longer than the kubelet
# tests' grace period to act on SIGTERM, so it was killed (exit 137) where a real one exits 143.
set -uo pipefail
bin=$1; shift
# libvalgrind-lazygit.so (controller/tests/valgrind/lazygit.c), built next to the test binaries,
# spares each test process libgit2's eager start-up inside libcriterion (~0.5 s under memcheck).
preload=$(dirname "$bin")/libvalgrind-lazygit.so
if [ -f "$preload" ]; then
  export LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}"
fi
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
valgrind --trace-children=yes --trace-children-skip='/usr/*,/bin/*,/sbin/*' \
  --leak-check=full --show-leak-kinds=definite,indirect,possible \
  --errors-for-leak-kinds=definite,indirect,possible --track-fds=no --child-silent-after-fork=no \
  --suppressions="$(dirname "$0")/valgrind.supp" --log-file="$logdir/vg.%p.log" \
  "$bin" --jobs=1 --short-filename "$@"
rc=$?
bad=0
for f in "$logdir"/vg.*.log; do
  [ -s "$f" ] || continue
  if grep -qE 'are definitely lost|ERROR SUMMARY: [1-9]|definitely lost: [1-9]|indirectly lost: [1-9]|possibly lost: [1-9]|Invalid (read|write|free)|uninitialised' "$f"; then
    echo "valgrind reported problems ($f):"; cat "$f"; bad=1
  fi
done
[ $rc -eq 0 ] || { echo "test binary exited $rc under valgrind"; exit $rc; }
[ $bad -eq 0 ] || exit 1
echo "valgrind: no errors, no leaks ($(basename "$bin"))"
