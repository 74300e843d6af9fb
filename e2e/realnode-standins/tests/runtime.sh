#!/bin/sh
# Tests the nvidia runtime stand-in (toolkit/nvidia-container-runtime.c) with runc on OCI bundles
# made from a Debian rootfs: a container with NVIDIA_VISIBLE_DEVICES=all gets the driver root's
# libraries and passes `gpu-validator --mode toolkit` (dlopen of libcuda.so.1/libnvidia-ml.so.1 by
# name); with it unset, void or none it gets nothing and the validator finds no driver (exit 2);
# with the driver root empty a GPU container is refused; `runc create` through the wrapper (the
# shim's path) injects too. Root only; leaves nothing.
# Usage: tests/runtime.sh ARTIFACTS_DIR ROOTFS_TAR [GPU_VALIDATOR]
set -eu
A=$(cd "$1" && pwd)
ROOTFS_TAR=$2
VALIDATOR=${3:-$A/gpu-validator}
T=$(mktemp -d /tmp/standins-runtime.XXXXXX)
RUNC_ROOT=$T/runc-state
cleanup() {
    for id in $(runc --root "$RUNC_ROOT" list -q 2>/dev/null); do
        runc --root "$RUNC_ROOT" delete -f "$id" >/dev/null 2>&1 || true
    done
    for m in "$T"/*/rootfs; do umount "$m" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$T/rootfs" "$T/driver/usr/lib/x86_64-linux-gnu" "$T/driver/usr/bin" "$T/empty"
tar -xf "$ROOTFS_TAR" -C "$T/rootfs" --exclude './dev/*'
cp "$VALIDATOR" "$T/rootfs/usr/bin/gpu-validator"
cp "$A/libcuda.so.1" "$A/libnvidia-ml.so.1" "$T/driver/usr/lib/x86_64-linux-gnu/"
cp "$A/nvidia-smi" "$T/driver/usr/bin/"
RT=$A/nvidia-container-runtime

# bundle NAME ENV...: an OCI bundle that runs the validator, its root an overlay on the shared
# rootfs as containerd's snapshots are (runc creates mount points in the root).
bundle() {
    b=$T/$1; shift
    mkdir -p "$b/rootfs" "$b/upper" "$b/work" && (cd "$b" && runc spec)
    mount -t overlay overlay -o "lowerdir=$T/rootfs,upperdir=$b/upper,workdir=$b/work" "$b/rootfs"
    env_json=$(printf '%s\n' "PATH=/usr/sbin:/usr/bin:/sbin:/bin" "$@" | jq -R . | jq -s .)
    jq --arg root "$b/rootfs" --argjson env "$env_json" '
        .root = {path: $root, readonly: false}
        | .process.terminal = false
        | .process.env = $env
        | .process.args = ["sh", "-c", "gpu-validator --mode toolkit; rc=$?; ls /usr/lib/x86_64-linux-gnu | grep -E \"^lib(cuda|nvidia)\" | sed \"s/^/mounted: /\"; nvidia-smi -L 2>/dev/null | sed \"s/^/smi: /\"; exit $rc"]
        | .linux.namespaces |= map(select(.type != "network"))' "$b/config.json" >"$b/c" &&
        mv "$b/c" "$b/config.json"
    echo "$b"
}

# run NAME ROOT ENV...: runs a bundle through the wrapper with `runc run`, prints its output, rc
run() {
    name=$1 root=$2; shift 2
    b=$(bundle "$name" "$@")
    set +e
    NVIDIA_STANDIN_DRIVER_ROOT=$root "$RT" --root "$RUNC_ROOT" run --bundle "$b" "$name" >"$T/$name.out" 2>&1
    rc=$?
    set -e
    sed "s/^/  [$name] /" "$T/$name.out" | tail -n 8
    return $rc
}

echo "== NVIDIA_VISIBLE_DEVICES=all: libraries injected, validator passes"
run gpu-all "$T/driver" NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    || fail "validator failed in a GPU container"
grep -q "Test PASSED" "$T/gpu-all.out" || fail "no Test PASSED"
grep -q "smi: GPU 0: NVIDIA" "$T/gpu-all.out" || fail "nvidia-smi not injected"
jq -e '[.mounts[] | select(.destination == "/usr/lib/x86_64-linux-gnu/libcuda.so.1" and (.options | index("ro")))] | length == 1' \
    "$T/gpu-all/config.json" >/dev/null || fail "config.json lacks the read-only libcuda mount"

for v in unset void none empty; do
    echo "== NVIDIA_VISIBLE_DEVICES $v: nothing injected, validator finds no driver (exit 2)"
    case $v in
    unset) set -- ;;
    empty) set -- NVIDIA_VISIBLE_DEVICES= ;;
    *) set -- NVIDIA_VISIBLE_DEVICES=$v ;;
    esac
    rc=0; run "nogpu-$v" "$T/driver" "$@" || rc=$?
    [ "$rc" = 2 ] || fail "expected exit 2 without NVIDIA_VISIBLE_DEVICES ($v), got $rc"
    grep -q "^  *mounted:\|mounted: lib" "$T/nogpu-$v.out" && fail "libraries injected for $v"
    jq -e '[.mounts[] | select(.destination | test("libcuda|libnvidia"))] | length == 0' \
        "$T/nogpu-$v/config.json" >/dev/null || fail "config.json changed for $v"
done

echo "== a single GPU UUID (what the device plugin's Allocate sets)"
run gpu-one "$T/driver" NVIDIA_VISIBLE_DEVICES=GPU-fa4e0000-0000-4000-8000-000000000001 \
    || fail "validator failed with one GPU"

echo "== driver not ready (empty driver root): a GPU container is refused"
rc=0; run gpu-nodriver "$T/empty" NVIDIA_VISIBLE_DEVICES=all || rc=$?
[ "$rc" != 0 ] || fail "GPU container ran without a driver"
grep -q "load library failed" "$T/gpu-nodriver.out" || fail "no refusal message"

echo "== the shim's path: global options, create, start, wait, delete"
b=$(bundle gpu-create NVIDIA_VISIBLE_DEVICES=all)
NVIDIA_STANDIN_DRIVER_ROOT=$T/driver "$RT" --root "$RUNC_ROOT" --log "$T/runc.log" --log-format json \
    create --bundle "$b" --pid-file "$T/create.pid" gpu-create >"$T/gpu-create.out" 2>&1 </dev/null ||
    { cat "$T/gpu-create.out"; fail "create failed"; }
jq -e '[.mounts[] | select(.destination | test("libcuda"))] | length == 1' "$b/config.json" >/dev/null ||
    fail "create did not inject"
"$RT" --root "$RUNC_ROOT" start gpu-create
for i in $(seq 50); do
    st=$(runc --root "$RUNC_ROOT" state gpu-create | jq -r .status)
    [ "$st" = stopped ] && break; sleep 0.2
done
[ "$st" = stopped ] || fail "created container did not finish"
"$RT" --root "$RUNC_ROOT" delete gpu-create
echo "  [gpu-create] injected at create, ran, deleted"
echo "runtime stand-in: all checks passed"
