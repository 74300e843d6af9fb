#!/usr/bin/env bash
# What `kubectl describe clusterpolicy` tells during a rollout held back on one node: a MIG
# reconfiguration that hangs on p4d-0 keeps the node behind while every DaemonSet is ready. The
# status lists each state with its ready/total nodes, the Ready condition names the node behind
# and why, and no message carries an empty list ("states not ready: []").
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k create namespace gpu-operator >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
describe() { k describe clusterpolicy cluster-policy; }
ready_msg() { k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
no_empty_list() {
    case "$2" in *"[]"*) fail "$1 shows an empty list:
$2" ;; esac
}

step "while the operands roll out, the describe output never shows an empty list"
end=$((SECONDS + 180))
while [ "$(cp_state)" != ready ]; do
    [ $SECONDS -le $end ] || fail "not ready within 180s"
    no_empty_list "describe during the install" "$(describe)"
    sleep 0.5
done
out=$(describe)
assert_contains "per-state ready nodes" "Nodes Ready:" "$out"
assert_contains "per-state total nodes" "Nodes Total:" "$out"
nodes_of() {
    k get clusterpolicy cluster-policy -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["status"]["states"]:
    if s["name"] == sys.argv[1]: print("%s/%s" % (s.get("nodesReady"), s.get("nodesTotal")))' "$1"
}
assert_eq "driver on every GPU node" "3/3" "$(nodes_of state-driver)"
assert_eq "MIG manager on the A100 nodes" "2/2" "$(nodes_of state-mig-manager)"

step "a MIG reconfiguration that hangs holds p4d-0 back while every DaemonSet is ready"
fault p4d-0 mig-hang
k label node p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
# One snapshot of the status: every state ready, p4d-0 behind, and a Ready message made of the
# parts that say something (no "states not ready", no empty list). Prints "yes" then.
held_back() {
    k get clusterpolicy cluster-policy -o json | python3 -c '
import json, sys
st = json.load(sys.stdin)["status"]
msg = [c["message"] for c in st["conditions"] if c["type"] == "Ready"][0]
b = (st.get("behind") or [{}])[0]
ok = (st["state"] == "notReady" and all(s["ready"] for s in st["states"]) and
      b.get("node") == "p4d-0" and b.get("reason") and "nodes behind: p4d-0 (" in msg and
      "states not ready" not in msg and "[]" not in msg)
print("yes" if ok else msg)'
}
# The reconfiguration pauses the device plugin on p4d-0: its DaemonSet settles on the others.
until_eq "every state ready, p4d-0 behind, the Ready message without empty parts" "yes" 60 held_back
out=$(describe)
no_empty_list "describe with p4d-0 behind" "$out"
assert_contains "the node behind in describe" "nodes behind: p4d-0 (" "$out"
# The Behind entry of p4d-0 with its state and a reason (which step it is at moves on: the
# device plugin paused for the MIG change on kubesim, its validation again on a real cluster).
entry=$(awk '/^  Behind:/ {b = 1; next} b && /^  [A-Z]/ {b = 0} b' <<<"$out")
assert_contains "Behind names p4d-0" "Node:    p4d-0" "$entry"
grep -qE '^ +Reason: +[^ ]' <<<"$entry" || fail "no reason for p4d-0 in describe's Behind: $entry"
grep -qE '^ +State: +[a-z-]+$' <<<"$entry" || fail "no state for p4d-0 in describe's Behind: $entry"
assert_contains "per-state counts in describe" "Nodes Ready:" "$out"

step "clearing the fault: ready again"
fault p4d-0 none
until_eq "ready" "ready" 120 cp_state
no_empty_list "describe once ready" "$(describe)"
echo "PASS operator_status_describe"
