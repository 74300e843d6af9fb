#!/usr/bin/env bash
# Shared helpers for end-to-end scenarios: a cluster per scenario, the real kubectl and helm,
# and assertions that say what was expected and what came back.
set -euo pipefail

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$E2E_ROOT/.." && pwd)"
: "${BUILD_DIR:=$REPO_ROOT/build}"
export KUBESIM_BIN="${KUBESIM_BIN:-$BUILD_DIR/kubesim}"

# The cluster under test: "kubesim" (default) or "real" (the conformance lane sets KUBECONFIG).
: "${E2E_CLUSTER:=kubesim}"

e2e_tmp=$(mktemp -d "${TMPDIR:-/tmp}/e2e.XXXXXX")
E2E_DIR="$e2e_tmp"
export KUBECONFIG_E2E="$e2e_tmp/kubeconfig"
KCACHE="$e2e_tmp/kube-cache"

cleanup() {
    local rc=$?
    if [ "$E2E_CLUSTER" = kubesim ] && [ -f "$e2e_tmp/kubesim.pid" ]; then
        if [ $rc -ne 0 ] && [ -f "$e2e_tmp/kubesim.log" ]; then
            echo "--- last kubesim log lines ---" >&2
            tail -n 40 "$e2e_tmp/kubesim.log" >&2 || true
            if [ -f "$e2e_tmp/nodesim.log" ]; then
                echo "--- last nodesim log lines ---" >&2
                tail -n 40 "$e2e_tmp/nodesim.log" >&2 || true
            fi
        fi
        "$E2E_ROOT/cluster" down --dir "$e2e_tmp" >/dev/null 2>&1 || true
        # kubesim and nodesim built with sanitizers report when they exit: any report fails.
        local f
        for f in "$e2e_tmp/kubesim.log" "$e2e_tmp/nodesim.log"; do
            [ -f "$f" ] || continue
            if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$f"; then
                echo "FAIL: sanitizer report in $(basename "$f"):" >&2
                grep -E -A25 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$f" | head -60 >&2
                rc=1
            fi
        done
    fi
    # --- conformance lane: stop the pod runner and the nodesim this scenario started
    if [ "$E2E_CLUSTER" = real ] && [ -f "$e2e_tmp/podrunner.pid" ]; then
        "$E2E_ROOT/realcluster" stop-pods --state "$e2e_tmp" >/dev/null 2>&1 || true
    fi
    if [ "$E2E_CLUSTER" = real ] && [ -f "$e2e_tmp/nodesim.pid" ]; then
        if [ $rc -ne 0 ]; then
            echo "--- last nodesim log lines ---" >&2
            tail -n 40 "$e2e_tmp/nodesim.log" >&2 || true
        fi
        "$E2E_ROOT/realcluster" stop-nodesim --state "$e2e_tmp" >/dev/null 2>&1 || true
    fi
    # --- end conformance lane
    rm -rf "$e2e_tmp"
    exit $rc
}
trap cleanup EXIT

# Starts the cluster (kubesim) unless the conformance lane provides one.
cluster_up() {
    if [ "$E2E_CLUSTER" = kubesim ]; then
        # --bare: the scenarios say themselves which images run locally and whether RBAC is on.
        # The fixtures' private registries exist (e2e/testdata/images-e2e.yaml).
        local a dd=0
        for a in "$@"; do [ "$a" != -- ] || dd=1; done
        local -a more=()
        [ $dd -eq 1 ] || more+=(--)
        more+=(--images "$E2E_ROOT/testdata/images-e2e.yaml")
        "$E2E_ROOT/cluster" up --bare --dir "$e2e_tmp" --kubeconfig "$KUBECONFIG_E2E" "$@" \
            "${more[@]}" >/dev/null
    else
        cp "$KUBECONFIG" "$KUBECONFIG_E2E"
        # --- conformance lane: the fleet on the real cluster (nodesim, or plain nodes for kwok);
        # kubesim options are ignored, except --image-map: e2e/podrunner.py runs those pods.
        local a map="" prev=""
        for a in "$@"; do
            [ "$prev" != --image-map ] || map=$a
            prev=$a
        done
        "$E2E_ROOT/realcluster" nodes --kubeconfig "$KUBECONFIG_E2E" --state "$e2e_tmp" "$@" >/dev/null
        if [ -n "$map" ]; then
            "$E2E_ROOT/realcluster" run-pods --kubeconfig "$KUBECONFIG" --state "$e2e_tmp" \
                --image-map "$map" 2>/dev/null
        fi
        # --- end conformance lane
    fi
}

# crd_established NAME: waits up to 30 s for the CRD to be Established. Not `kubectl wait`: a real
# API server creates a CRD with "conditions": null until its controller runs, and kubectl 1.32's
# wait fails at once on that null instead of waiting.
crd_established() {
    until_eq "CRD $1 Established" True 30 \
        k get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}'
}

# skip_scenario WHY: ends the scenario as skipped (exit 77) where it cannot run by its nature.
skip_scenario() {
    echo "SKIP: $*"
    exit 77
}

# kubesim_only WHY: true on kubesim; on a real cluster says the step is skipped and why, and is
# false (use as `if kubesim_only "reason"; then ...; fi` around steps about kubesim itself).
kubesim_only() {
    [ "$E2E_CLUSTER" = kubesim ] && return 0
    echo "--- SKIP on a real cluster (kubesim-only): $*"
    return 1
}

# The real kubectl, with a fresh discovery cache per scenario.
k() { kubectl --kubeconfig "$KUBECONFIG_E2E" --cache-dir "$KCACHE" "$@"; }

helm_bin() { "$REPO_ROOT/scripts/get-helm.sh" 2>/dev/null; }
h() { "$(helm_bin)" --kubeconfig "$KUBECONFIG_E2E" "$@"; }

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() {
    [ "$2" = "$3" ] || fail "$1: expected [$2], got [$3]"
}
# assert_contains WHAT NEEDLE HAYSTACK
assert_contains() {
    case "$3" in *"$2"*) ;; *) fail "$1: expected to find [$2] in:
$3" ;; esac
}
# assert_fails WHAT CMD...: the command must exit non-zero; prints its output for later asserts.
assert_fails() {
    local what=$1; shift
    local out
    if out=$("$@" 2>&1); then fail "$what: expected failure, got success: $out"; fi
    printf '%s' "$out"
}
# until_eq WHAT EXPECTED TIMEOUT_S CMD...: polls CMD until its output equals EXPECTED.
until_eq() {
    local what=$1 want=$2 t=$3; shift 3
    local got="" end=$((SECONDS + t))
    while [ $SECONDS -le $end ]; do
        got=$("$@" 2>/dev/null || true)
        [ "$got" = "$want" ] && return 0
        sleep 0.2
    done
    fail "$what: expected [$want] within ${t}s, last got [$got]"
}
