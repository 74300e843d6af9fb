#!/usr/bin/env bash
# A GPU node the operands cannot be scheduled on (a NoSchedule taint that daemonsets.tolerations
# does not tolerate) is reported, not waited for: a status entry naming the taint and the fix, a
# Warning Event on the node, and the other nodes (a cordoned one among them: DaemonSets tolerate
# cordons) make the ClusterPolicy ready. Tolerating the taint brings the node in.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-taints.yaml"
install_crd
k create namespace gpu-operator >/dev/null
k cordon plain-0 >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null

step "ready without the tainted node, which is reported with the fix"
until_eq "state" "ready" 120 cp_state
nodes() { k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.ready}/{.status.nodes.blocked}'; }
assert_eq "ready/blocked nodes" "2/1" "$(nodes)"
entry=$(k get clusterpolicy cluster-policy -o json | python3 -c '
import json,sys
for b in json.load(sys.stdin)["status"].get("behind", []):
    if b["node"] == "team-0": print(b["phase"], b["reason"])')
assert_contains "team-0 blocked" "blocked" "$entry"
assert_contains "names the taint" "dedicated=training:NoSchedule" "$entry"
assert_contains "names the fix" "daemonsets.tolerations" "$entry"
ev=$(k get events -A --field-selector involvedObject.name=team-0,type=Warning -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}')
assert_contains "Warning Event on the node" "dedicated=training:NoSchedule" "$ev"
assert_contains "the message" "ready" "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"

step "tolerating the taint brings the node in"
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"daemonsets":{"tolerations":[{"key":"dedicated","operator":"Equal","value":"training","effect":"NoSchedule"}]}}}' >/dev/null
until_eq "ready/blocked nodes" "3/0" 120 nodes
until_eq "state" "ready" 60 cp_state
assert_eq "team-0 device plugin" "true" "$(node_label team-0 nvidia.com/gpu.deploy.device-plugin)"
echo "PASS operator_taint_blocked"
