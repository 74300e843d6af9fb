#!/usr/bin/env bash
# The README's first command, scripts/demo.sh, end to end (with the test build instead of its own):
# it reaches ready without a FAILED frame, partitions p4d-0 with all-balanced, shows the new
# capacity, exits 0 and leaves nothing running.
source "$(dirname "$0")/../lib.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "the demo brings its own kubesim"

out=$(DEMO_BUILD_DIR="$BUILD_DIR" TMPDIR="$E2E_DIR" bash "$REPO_ROOT/scripts/demo.sh" 2>&1) ||
    fail "demo failed:
$out"
assert_contains "progress reached ready" "ClusterPolicy: ready" "$out"
assert_contains "MIG applied" "all-balanced/success" "$out"
assert_contains "new capacity" "nvidia.com/mig-1g.5gb      16" "$out"
assert_contains "new capacity" "nvidia.com/mig-3g.20gb     8" "$out"
assert_contains "teardown" "done: tearing the cluster down" "$out"
# A clean install never shows a node failed: the driver pod is Ready only once the driver loaded.
case "$out" in *FAILED*) fail "the demo showed a FAILED frame:
$out" ;; esac
# The demo's processes run with its cluster directory (under $E2E_DIR) in their command line;
# other scenarios' processes do not.
assert_eq "nothing left running" "" "$(pgrep -f "$E2E_DIR/gpu-operator-demo" || true)"
assert_eq "no demo directory left" "" "$(ls -d "$E2E_DIR"/gpu-operator-demo.* 2>/dev/null || true)"

step "scripts/demo.sh --keep leaves the cluster up and says how to use and stop it"
out=$(DEMO_BUILD_DIR="$BUILD_DIR" TMPDIR="$E2E_DIR" bash "$REPO_ROOT/scripts/demo.sh" --keep 2>&1) ||
    fail "demo --keep failed:
$out"
kc=$(grep -o 'export KUBECONFIG=.*' <<<"$out" | sed 's/export KUBECONFIG=//')
down=$(grep -o 'e2e/cluster down --dir .*' <<<"$out" | sed 's/e2e\/cluster down --dir //')
[ -n "$kc" ] && [ -n "$down" ] || fail "no KUBECONFIG or stop command printed:
$out"
assert_eq "the kept cluster answers" "ready" \
    "$(kubectl --kubeconfig "$kc" get clusterpolicy cluster-policy -o jsonpath='{.status.state}')"
"$REPO_ROOT/e2e/cluster" down --dir "$down" >/dev/null 2>&1
rm -rf "$down"
assert_eq "stopped" "" "$(pgrep -f "$E2E_DIR/gpu-operator-demo" || true)"
echo "PASS readme_demo"
