#!/bin/sh
# Tests the stand-in images through a private containerd (runc.v2 shim, no kubelet): the toolkit
# image installs the nvidia runtime into a "host" install dir; the driver image, privileged with
# the "host" /run/nvidia mounted rshared (what mountPropagation Bidirectional gives), fails the
# startupProbe command until loaded, passes it after, and publishes its root to the "host"; a
# container run through the installed runtime (as BinaryName of the runc.v2 shim) with
# NVIDIA_VISIBLE_DEVICES=all gets the driver's libraries and nvidia-smi, one without gets none;
# SIGTERM unpublishes the driver root and uninstalls the runtime. Everything runs in a private
# mount namespace; containerd's root, state and socket are in a temp dir. Root only.
# With VALIDATOR_ARCHIVE (a docker-archive of the project's image, e.g. e2e/realnode's
# images/gpu-operator-*.tar) it also runs gpu-validator as the validation pods run it: toolkit,
# plugin and cuda modes through the runtime, driver mode on the published driver root; and prints,
# without failing, what the DaemonSets' driver-validation and the gate's toolkit validation pod,
# as rendered now, get on a node whose runtime honours NVIDIA's contract.
# Usage: tests/containerd.sh IMAGES_ARCHIVE [VALIDATOR_ARCHIVE]
set -eu
ARCHIVE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
VALARCHIVE=
[ -n "${2:-}" ] && VALARCHIVE=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
export VALARCHIVE
T=$(mktemp -d /tmp/standins-ctrd.XXXXXX)
NS=realnode-standins-test-$$
export T ARCHIVE NS
# Stops what this test started, and only that: its containerd's tasks and containers, its
# containerd, the shims serving its socket, the cgroups under its namespace.
cleanup() {
    set +e
    c() { ctr -a "$T/c.sock" -n "$NS" "$@"; }
    if [ -S "$T/c.sock" ]; then
        for id in $(c task ls -q 2>/dev/null); do c task kill -s SIGKILL "$id" >/dev/null 2>&1; done
        sleep 1
        for id in $(c task ls -q 2>/dev/null); do c task delete -f "$id" >/dev/null 2>&1; done
        for id in $(c container ls -q 2>/dev/null); do c container delete "$id" >/dev/null 2>&1; done
    fi
    [ -f "$T/containerd.pid" ] && kill "$(cat "$T/containerd.pid")" 2>/dev/null && sleep 1
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "-address $T/c.sock" &&
            kill -KILL "${p#/proc/}" 2>/dev/null
    done
    sleep 0.5
    for d in /sys/fs/cgroup/$NS /sys/fs/cgroup/*/$NS; do
        [ -d "$d" ] || continue
        for s in "$d"/*/; do [ -d "$s" ] && rmdir "$s" 2>/dev/null; done
        rmdir "$d" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
unshare -m --propagation private sh -eu -c '
fail() { echo "FAIL: $*"; exit 1; }
DRIVER=$(tar -xOf "$ARCHIVE" manifest.json | jq -r "[.[].RepoTags[] | select(startswith(\"nvcr.io/nvidia/driver:\"))][0]")
TOOLKIT=$(tar -xOf "$ARCHIVE" manifest.json | jq -r "[.[].RepoTags[] | select(startswith(\"nvcr.io/nvidia/k8s/container-toolkit:\"))][0]")
mkdir -p "$T/hostrun" "$T/usr-local-nvidia" "$T/root" "$T/state"
mount --bind "$T/hostrun" "$T/hostrun" && mount --make-rshared "$T/hostrun"
cat >"$T/config.toml" <<EOC
version = 2
root = "$T/root"
state = "$T/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$T/c.sock"
EOC
NVIDIA_STANDIN_DRIVER_ROOT=$T/hostrun/driver containerd --config "$T/config.toml" >"$T/containerd.log" 2>&1 &
echo $! >"$T/containerd.pid"
c() { ctr -a "$T/c.sock" -n "$NS" "$@"; }
for i in $(seq 50); do c version >/dev/null 2>&1 && break; sleep 0.2; done
c images import "$ARCHIVE" >/dev/null
echo "ok: imported $(c images ls -q | grep -c nvcr.io) NVIDIA image names"

c run -d --env ROOT=/usr/local/nvidia --env TOOLKIT_PID_FILE=/run/nvidia/toolkit/toolkit.pid \
    --mount "type=bind,src=$T/usr-local-nvidia,dst=/usr/local/nvidia,options=rbind:rw" \
    "$TOOLKIT" toolkit nvidia-toolkit >/dev/null
RT=$T/usr-local-nvidia/toolkit/nvidia-container-runtime
for i in $(seq 50); do [ -x "$RT" ] && break; sleep 0.2; done
[ -x "$RT" ] || fail "the toolkit container did not install the runtime"
echo "ok: toolkit container installed $RT"

c run -d --privileged --rootfs-propagation rshared --env NVIDIA_STANDIN_LOAD_DELAY=3 \
    --mount "type=bind,src=$T/hostrun,dst=/run/nvidia,options=rbind:rshared" \
    "$DRIVER" driver nvidia-driver init >/dev/null
probe() { c task exec --exec-id "probe$1" driver sh -c "test -f /sys/module/nvidia/refcnt && nvidia-smi"; }
sleep 1
probe 0 >/dev/null 2>&1 && fail "startupProbe passed before loading"
echo "ok: startupProbe fails while loading"
ok=
for i in 1 2 3 4 5 6 7 8 9 10; do probe $i >"$T/probe.out" 2>&1 && { ok=1; break; }; sleep 1; done
[ -n "$ok" ] || { cat "$T/probe.out"; fail "startupProbe never passed"; }
sed "s/^/  probe: /" "$T/probe.out"
echo "ok: startupProbe passes once loaded"
ls "$T/hostrun/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1" "$T/hostrun/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" >/dev/null ||
    fail "driver root not published on the host"
test -e /sys/module/nvidia && fail "module stand-in visible outside the driver container"
echo "ok: driver root published at the host'"'"'s run dir; host /sys/module untouched"

c run --rm --runc-binary "$RT" --env NVIDIA_VISIBLE_DEVICES=all "$TOOLKIT" gpu \
    sh -c "ls /usr/lib/x86_64-linux-gnu/ | grep -E \"^lib(cuda|nvidia-ml)\"; nvidia-smi -L" >"$T/gpu.out" 2>&1 ||
    { cat "$T/gpu.out"; fail "GPU container failed"; }
sed "s/^/  gpu container: /" "$T/gpu.out"
grep -q "libcuda.so.1" "$T/gpu.out" && grep -q "^GPU 1: NVIDIA" "$T/gpu.out" || fail "nothing injected"
c run --rm --runc-binary "$RT" "$TOOLKIT" nogpu \
    sh -c "ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/bin/nvidia-smi" >"$T/nogpu.out" 2>&1 &&
    fail "libraries injected without NVIDIA_VISIBLE_DEVICES"
echo "ok: runc.v2 shim with the installed runtime injects for NVIDIA_VISIBLE_DEVICES=all, nothing without"

PLUGIN=$(tar -xOf "$ARCHIVE" manifest.json | jq -r "[.[].RepoTags[] | select(startswith(\"nvcr.io/nvidia/k8s-device-plugin:\"))][0]")
EXPORTER=$(tar -xOf "$ARCHIVE" manifest.json | jq -r "[.[].RepoTags[] | select(startswith(\"nvcr.io/nvidia/k8s/dcgm-exporter:\"))][0]")
mkdir -p "$T/features.d"
c run --rm --runc-binary "$RT" --env GFD_ONESHOT=true \
    --mount "type=bind,src=$T/features.d,dst=/etc/kubernetes/node-feature-discovery/features.d,options=rbind:rw" \
    "$PLUGIN" gfd gpu-feature-discovery >"$T/gfd.out" 2>&1 || { cat "$T/gfd.out"; fail "GFD failed"; }
grep -q "^nvidia.com/gpu.count=2$" "$T/features.d/gfd" || fail "GFD wrote no gpu.count"
echo "ok: GFD (image ENV asks for the GPUs, runtime injects NVML) wrote $(wc -l <"$T/features.d/gfd") labels, e.g. $(grep gpu.product "$T/features.d/gfd")"
rc=0; c run --rm --env NVIDIA_STANDIN_DP_DIR=/tmp "$PLUGIN" dp-nonvidia nvidia-device-plugin >"$T/dp.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "failed to initialize NVML" "$T/dp.out" || { cat "$T/dp.out"; fail "device plugin without the nvidia runtime: rc $rc"; }
echo "ok: device plugin outside the nvidia runtime fails as NVIDIA'"'"'s does: $(tail -n1 "$T/dp.out" | sed "s/.*error: //")"
port=$((20000 + $$ % 20000))
c run -d --net-host --runc-binary "$RT" --env DCGM_EXPORTER_LISTEN=127.0.0.1:$port --env NODE_NAME=n1 \
    "$EXPORTER" exporter >/dev/null
for i in $(seq 50); do curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "http://127.0.0.1:$port/metrics" >"$T/metrics" || fail "no /metrics"
grep "^DCGM_FI_DEV_FB_FREE" "$T/metrics" | sed "s/^/  metrics: /"
[ "$(grep -c "^DCGM_FI_DEV_GPU_UTIL{" "$T/metrics")" = 2 ] || fail "not one GPU_UTIL per GPU"
c task kill -s SIGTERM exporter
echo "ok: DCGM exporter image serves /health and /metrics from its entrypoint"

if [ -n "$VALARCHIVE" ]; then
    c images import "$VALARCHIVE" >/dev/null
    VAL=$(tar -xOf "$VALARCHIVE" manifest.json | jq -r ".[0].RepoTags[0]")
    v() { name=$1; shift; c run --rm "$@" >"$T/$name.out" 2>&1; }
    v val-toolkit --runc-binary "$RT" --env NVIDIA_VISIBLE_DEVICES=all --env NVIDIA_DRIVER_CAPABILITIES=compute,utility \
        "$VAL" val-toolkit gpu-validator --mode toolkit || { cat "$T/val-toolkit.out"; fail "toolkit validation"; }
    v val-cuda --runc-binary "$RT" --env NVIDIA_VISIBLE_DEVICES=all "$VAL" val-cuda gpu-validator --mode cuda ||
        { cat "$T/val-cuda.out"; fail "cuda validation"; }
    v val-plugin --runc-binary "$RT" --env NVIDIA_VISIBLE_DEVICES=GPU-fa4e0000-0000-4000-8000-000000000001 \
        "$VAL" val-plugin gpu-validator --mode plugin || { cat "$T/val-plugin.out"; fail "plugin validation"; }
    echo "ok: $VAL passes --mode toolkit, cuda, plugin through the runtime ($(tail -n1 "$T/val-plugin.out"))"
    drvmount="type=bind,src=$T/hostrun/driver,dst=/run/nvidia/driver,options=rbind:ro:rslave"
    v val-driver --privileged --mount "$drvmount" --env GPU_VALIDATOR_DRIVER_ROOT=/run/nvidia/driver \
        "$VAL" val-driver gpu-validator --mode driver || { cat "$T/val-driver.out"; fail "driver validation"; }
    echo "ok: --mode driver on the published driver root, as the gate'"'"'s driver validation pod runs it (GPU_VALIDATOR_DRIVER_ROOT)"
    rc=0; v val-driver-ds --privileged --mount "$drvmount" \
        --env GPU_VALIDATOR_LIBNVML=/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 \
        "$VAL" val-driver-ds gpu-validator --mode driver || rc=$?
    echo "note: driver-validation as the toolkit/validator DaemonSets run it (GPU_VALIDATOR_LIBNVML only): exit $rc: $(grep "^gpu-validator:" "$T/val-driver-ds.out" || tail -n1 "$T/val-driver-ds.out")"
    rc=0; v val-toolkit-gate --runc-binary "$RT" "$VAL" val-toolkit-gate gpu-validator --mode toolkit || rc=$?
    echo "note: the gate'"'"'s toolkit validation pod (runtimeClassName nvidia, no NVIDIA_VISIBLE_DEVICES): exit $rc: $(grep "^gpu-validator:" "$T/val-toolkit-gate.out" || tail -n1 "$T/val-toolkit-gate.out")"
fi

c task kill -s SIGTERM driver
for i in $(seq 50); do c task ls | grep -q "^driver .*STOPPED" && break; sleep 0.2; done
mountpoint -q "$T/hostrun/driver" && fail "driver root still published after SIGTERM"
c task ls | grep "^driver " | sed "s/^/  /"
echo "ok: SIGTERM unpublished the driver root"
c task kill -s SIGTERM toolkit
for i in $(seq 50); do c task ls | grep -q "^toolkit .*STOPPED" && break; sleep 0.2; done
[ -x "$RT" ] || fail "the runtime was removed when the toolkit stopped (NVIDIA'"'"'s installer keeps it)"
echo "ok: SIGTERM stopped the toolkit, the runtime stays installed"
c task delete driver >/dev/null; c task delete toolkit >/dev/null 2>&1 || true
c container delete driver toolkit
c run --rm --runc-binary "$RT" --env NVIDIA_VISIBLE_DEVICES=all "$TOOLKIT" late true >/dev/null 2>&1 &&
    fail "a GPU container ran with the driver unpublished"
echo "ok: with the driver gone, GPU containers cannot start"
'
echo "containerd: all checks passed"
