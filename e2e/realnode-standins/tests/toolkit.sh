#!/bin/sh
# Tests the toolkit stand-in (toolkit/nvidia-toolkit): installs the runtime under $ROOT/toolkit,
# writes the PID file; on SIGTERM removes the PID file, keeps the runtime (as NVIDIA's installer
# does) and exits 0. Leaves nothing.
# Usage: tests/toolkit.sh ARTIFACTS_DIR
set -eu
A=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/standins-toolkit.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ROOT=$T/usr-local-nvidia TOOLKIT_PID_FILE=$T/toolkit/toolkit.pid NVIDIA_STANDIN_RUNTIME_SRC=$A/nvidia-container-runtime \
    "$HERE/toolkit/nvidia-toolkit" >"$T/log" 2>&1 &
pid=$!
for i in $(seq 50); do grep -q "waiting for signal" "$T/log" && break; sleep 0.1; done
test -x "$T/usr-local-nvidia/toolkit/nvidia-container-runtime" || fail "runtime not installed"
"$T/usr-local-nvidia/toolkit/nvidia-container-runtime" --version | grep -q "runc version" || fail "installed runtime does not pass through to runc"
[ "$(cat "$T/toolkit/toolkit.pid")" = "$pid" ] || fail "pid file"
echo "ok: installed, passes through to runc, pid file written"
kill -TERM "$pid"; wait "$pid" || fail "non-zero exit on SIGTERM"
test -x "$T/usr-local-nvidia/toolkit/nvidia-container-runtime" || fail "runtime removed on shutdown"
test -e "$T/toolkit/toolkit.pid" && fail "pid file left"
echo "ok: SIGTERM keeps the runtime, removes the pid file and exits 0"
sed 's/^/  toolkit log: /' "$T/log"
echo "toolkit stand-in: all checks passed"
