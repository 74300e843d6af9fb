#!/bin/sh
# Tests the driver stand-in (driver/nvidia-driver, driver/driver-manager, nvidia-smi) without a
# container runtime: the "host" is a private mount namespace whose run dir is a shared mount, the
# driver container another mount namespace with it as a peer (what mountPropagation Bidirectional
# gives), the startupProbe an nsenter into the driver's namespace. Root only; leaves nothing.
# Usage: tests/driver.sh ARTIFACTS_DIR (from `build --artifacts-only`)
set -eu
A=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/standins-driver.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/run" "$T/src/usr/lib/x86_64-linux-gnu" "$T/src/usr/bin"
cp "$A/libcuda.so.1" "$A/libnvidia-ml.so.1" "$T/src/usr/lib/x86_64-linux-gnu/"
cp "$A/nvidia-smi" "$T/src/usr/bin/"
cp "$HERE/driver/nvidia-driver" "$HERE/driver/driver-manager" "$T/"
export T
unshare -m --propagation private sh -eu -c '
fail() { echo "FAIL: $*"; exit 1; }
mount --bind "$T/run" "$T/run" && mount --make-shared "$T/run"
probe() { nsenter -t "$drv" -m env NVIDIA_SMI_STANDIN_DRIVER_CTR=1 PATH="$T/src/usr/bin:$PATH" \
    LD_LIBRARY_PATH="$T/src/usr/lib/x86_64-linux-gnu" \
    sh -c "test -f /sys/module/nvidia/refcnt && nvidia-smi"; }
# a stale driver root left by a driver container that died: driver-manager clears it
mkdir -p "$T/run/driver" && mount --bind "$T/src" "$T/run/driver" && echo 999999 >"$T/run/nvidia-driver.pid"
NVIDIA_STANDIN_RUN_DIR=$T/run NODE_NAME=n1 "$T/driver-manager" uninstall_driver
mountpoint -q "$T/run/driver" && fail "driver-manager left the stale driver root"
echo "ok: driver-manager unmounted a stale driver root"
NVIDIA_STANDIN_RUN_DIR=$T/run NVIDIA_STANDIN_DRIVER_SRC=$T/src NVIDIA_STANDIN_LOAD_DELAY=3 \
    unshare -m --propagation unchanged "$T/nvidia-driver" init >"$T/driver.log" 2>&1 &
drv=$!
sleep 1
probe >/dev/null 2>&1 && fail "startupProbe passed before the driver loaded"
test -e "$T/run/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1" && fail "published before loading"
echo "ok: startupProbe fails while loading"
for i in 1 2 3 4 5 6 7 8 9 10; do probe >/dev/null 2>&1 && break; sleep 1; done
probe || fail "startupProbe never passed"
echo "ok: startupProbe passes once loaded"
test -f "$T/run/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1" || fail "libcuda.so.1 not published"
test -f "$T/run/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" || fail "libnvidia-ml.so.1 not published"
echo "ok: driver root published to the host: $(ls "$T/run/driver/usr/lib/x86_64-linux-gnu" | tr "\n" " ")"
test -e /sys/module/nvidia && fail "the module stand-in leaked out of the driver mount namespace"
echo "ok: /sys/module of the host untouched"
NVIDIA_STANDIN_RUN_DIR=$T/run NODE_NAME=n1 "$T/driver-manager" uninstall_driver | grep -q "still running" \
    || fail "driver-manager touched a live driver"
echo "ok: driver-manager leaves a live driver alone"
kill -TERM "$drv"; wait "$drv" || fail "driver exited non-zero on SIGTERM"
mountpoint -q "$T/run/driver" && fail "driver root still published after stop"
test -e "$T/run/nvidia-driver.pid" && fail "pid file left"
echo "ok: SIGTERM unpublishes and exits 0"
sed "s/^/  driver log: /" "$T/driver.log"
'
echo "driver stand-in: all checks passed"
