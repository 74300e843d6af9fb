#!/usr/bin/env bash
# kubesim keeps its objects across restarts (issue 24 point 7). `e2e/cluster up` with its
# defaults (the chart's operator image runs the operator binary, RBAC on) and nodesim; `helm
# install` of the chart reconciles to a ready ClusterPolicy. `e2e/cluster restart`: every object is
# still there with the same uid and a resourceVersion no smaller, a watch from before the restart
# gets its events, the operator (its pod started again, its watches reconnecting) and nodesim
# (kept running, reconnecting with the same token to the same URL) pick up, and a MIG change made
# after the restart is carried out. Then `restart --kill` (SIGKILL, as a crash): no write that was
# acknowledged is lost, the operator process the killed kubesim left is stopped, and disabling a
# component afterwards is reconciled. Last, a restart with a new admin token: nodesim follows the
# rewritten kubeconfig instead of staying Unauthorized.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "restarts kubesim itself"
[ -x "$OPERATOR_BIN" ] || fail "no operator binary at $OPERATOR_BIN (build it first)"
cluster() { OPERATOR_BIN="$OPERATOR_BIN" "$E2E_ROOT/cluster" "$@"; }

step "e2e/cluster up with its defaults: the operator image runs the operator, RBAC on"
cluster up --dir "$e2e_tmp" --kubeconfig "$KUBECONFIG_E2E" --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" \
    --nodesim --mig-apply-ms=500 >/dev/null 2>"$E2E_DIR/up.err" || { cat "$E2E_DIR/up.err" >&2; fail "cluster up"; }
assert_contains "up says how the operator image runs" "the operator image runs" "$(cat "$E2E_DIR/up.err")"
assert_contains "RBAC on" "--rbac" "$(cat "$e2e_tmp/kubesim.args")"

step "helm install: the operator reconciles (ClusterPolicy ready)"
chart_install_ready --set mig.strategy=mixed
assert_eq "the operator pod is a local process" "1" \
    "$(grep -c 'program:' "$e2e_tmp/image-map.yaml")"

# name uid resourceVersion of every object of these kinds.
objects() {
    k get nodes,clusterpolicies,deployments,daemonsets,configmaps,serviceaccounts -A \
        -o jsonpath='{range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name} {.metadata.uid} {.metadata.resourceVersion}{"\n"}{end}' | sort
}
list_rv() { k get --raw /api/v1/namespaces | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])'; }
objects >"$E2E_DIR/before.txt"
rv_before=$(list_rv)
op_pod=$(k get pods -n gpu-operator -l app=gpu-operator -o jsonpath='{.items[0].metadata.name}')
op_uid=$(k get pod -n gpu-operator "$op_pod" -o jsonpath='{.metadata.uid}')
kubesim_pid=$(cat "$e2e_tmp/kubesim.pid")
nodesim_pid=$(cat "$e2e_tmp/nodesim.pid")
k create configmap before-restart -n default --from-literal=k=v >/dev/null
rv_cm=$(k get configmap before-restart -n default -o jsonpath='{.metadata.resourceVersion}')

step "e2e/cluster restart"
out=$(cluster restart --dir "$e2e_tmp" 2>&1) || { echo "$out" >&2; fail "cluster restart"; }
echo "$out" | sed 's/^/    /'
assert_contains "says what it restored" "restored" "$out"
assert_contains "says nodesim kept running" "nodesim (pid $nodesim_pid) kept running" "$out"
[ "$(cat "$e2e_tmp/kubesim.pid")" != "$kubesim_pid" ] || fail "kubesim was not restarted"

step "kubectl get: everything is there, same uids, resourceVersions not smaller"
objects >"$E2E_DIR/after.txt"
python3 - "$E2E_DIR/before.txt" "$E2E_DIR/after.txt" <<'PY' || fail "objects changed across the restart"
import sys
def load(p):
    return {l.split()[0]: l.split()[1:] for l in open(p) if l.strip()}
b, a = load(sys.argv[1]), load(sys.argv[2])
bad = [k for k in b if k not in a or a[k][0] != b[k][0] or int(a[k][1]) < int(b[k][1])]
for k in bad:
    print("  %s: before %s, after %s" % (k, b[k], a.get(k)), file=sys.stderr)
print("  %d objects compared" % len(b))
sys.exit(1 if bad or len(b) < 20 else 0)
PY
rv_after=$(list_rv)
[ "$rv_after" -ge "$rv_before" ] || fail "list resourceVersion went back: $rv_before -> $rv_after"
assert_eq "the operator's pod is the same object" "$op_uid" \
    "$(k get pod -n gpu-operator "$op_pod" -o jsonpath='{.metadata.uid}')"

step "a watch from before the restart gets the events since (or 410 Gone)"
w=$(k get --raw "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=$((rv_cm - 1))&timeoutSeconds=1")
if ! grep -q '"code":410' <<<"$w"; then
    assert_contains "the ADDED event of the ConfigMap made before the restart" '"name":"before-restart"' "$w"
fi

step "nodesim and the operator recover"
until_eq "nodesim renews its node leases again" "yes" 30 bash -c \
    "t=\$(kubectl --kubeconfig $KUBECONFIG_E2E get lease p4d-0 -n kube-node-lease -o jsonpath='{.spec.renewTime}'); sleep 2; \
     u=\$(kubectl --kubeconfig $KUBECONFIG_E2E get lease p4d-0 -n kube-node-lease -o jsonpath='{.spec.renewTime}'); [ \"\$t\" != \"\$u\" ] && echo yes"
assert_eq "nodesim is the same process" "$nodesim_pid" "$(cat "$e2e_tmp/nodesim.pid")"
kill -0 "$nodesim_pid" || fail "nodesim exited"
# The new kubelet knows none of the answers nodesim handed the old one (it keeps them in memory):
# nodesim sees its new boot id and hands them over again.
until_eq "nodesim hands its answers to the new kubelet" yes 30 bash -c \
    "grep -q \"kubesim's kubelet restarted: handing over every answer again\" '$e2e_tmp/nodesim.log' && echo yes"
drv=$(k get pods -n gpu-operator -l app=nvidia-driver-daemonset --field-selector spec.nodeName=p4d-0 -o jsonpath='{.items[0].metadata.name}')
until_eq "the driver pod's probe answers are back" '{"nvidia-driver-ctr":"ok"}' 30 sim_answers "$drv" nodesim.io/probes
until_eq "the operator's pod Running" "Running" 60 k get pod -n gpu-operator "$op_pod" -o jsonpath='{.status.phase}'
until_eq "ClusterPolicy ready" "ready" 60 cp_state

step "a MIG change after the restart is carried out: p4d-0 → all-1g.5gb"
k label nodes p4d-0 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "success" "success" 90 node_label p4d-0 nvidia.com/mig.config.state
until_eq "56 mig-1g.5gb, no whole GPU" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 60 node_gpu_resources p4d-0
until_eq "ClusterPolicy ready" "ready" 90 cp_state

step "restart --kill right after acknowledged writes: none is lost"
for i in $(seq 1 20); do
    k create configmap "acked-$i" -n default --from-literal=i="$i" >/dev/null
done
k label nodes t4-0 restart.example.com/acked=yes >/dev/null
rv_last=$(k get node t4-0 -o jsonpath='{.metadata.resourceVersion}')
op_procs_before=$(pgrep -f -x "$(readlink -f "$OPERATOR_BIN").*" | wc -l)
out=$(cluster restart --kill --dir "$e2e_tmp" 2>&1) || { echo "$out" >&2; fail "cluster restart --kill"; }
echo "$out" | sed 's/^/    /'
assert_contains "SIGKILL" "stopped with SIGKILL" "$out"
assert_eq "20 ConfigMaps" "20" "$(k get configmaps -n default -o name | grep -c '/acked-')"
assert_eq "the label" "yes" "$(node_label t4-0 restart.example.com/acked)"
rv_now=$(k get node t4-0 -o jsonpath='{.metadata.resourceVersion}')
[ "$rv_now" -ge "$rv_last" ] || fail "t4-0 resourceVersion went back: $rv_last -> $rv_now"
assert_contains "the operator the killed kubesim left is stopped" "left by an earlier kubesim" \
    "$(cat "$e2e_tmp/kubesim.log")"
until_eq "the operator's pod Running" "Running" 60 k get pod -n gpu-operator "$op_pod" -o jsonpath='{.status.phase}'
until_eq "ClusterPolicy ready" "ready" 90 cp_state
until_eq "one operator process" "$op_procs_before" 30 bash -c \
    "pgrep -f -x '$(readlink -f "$OPERATOR_BIN").*' | wc -l"

step "disabling a component after the crash is reconciled: dcgmExporter.enabled=false"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
until_eq "no DCGM exporter pods" "0" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -o name | grep -c nvidia-dcgm-exporter || true"
until_eq "ClusterPolicy ready" "ready" 90 cp_state
assert_eq "MIG layout kept across both restarts" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" "$(node_gpu_resources p4d-0)"

step "a restart with a new admin token (admin.token removed): nodesim re-authenticates"
rm -f "$e2e_tmp/admin.token"
cluster restart --dir "$e2e_tmp" >/dev/null 2>&1 || fail "cluster restart with a new token"
until_eq "nodesim follows the kubeconfig's new token" "yes" 30 bash -c \
    "grep -q 'holds a new token' '$e2e_tmp/nodesim.log' && echo yes"
until_eq "nodesim renews its node leases again" "yes" 30 bash -c \
    "t=\$(kubectl --kubeconfig $KUBECONFIG_E2E get lease t4-0 -n kube-node-lease -o jsonpath='{.spec.renewTime}'); sleep 2; \
     u=\$(kubectl --kubeconfig $KUBECONFIG_E2E get lease t4-0 -n kube-node-lease -o jsonpath='{.spec.renewTime}'); [ \"\$t\" != \"\$u\" ] && echo yes"
echo "PASS"
