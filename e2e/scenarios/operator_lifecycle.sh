#!/usr/bin/env bash
# The operator's lifecycle on kubesim + nodesim: a node whose driver fails is held at the driver
# state (status, Events) while the others finish, and converges once the fault clears; edits
# (a component off, a version change, a no-op); a spec that cannot be rendered changes nothing;
# kill -9 mid-rollout and restart; a second ClusterPolicy is ignored; deleting the ClusterPolicy
# leaves the cluster as it was.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k create namespace gpu-operator >/dev/null
labels_before=$(k get nodes -o json | python3 -c 'import json,sys; print(json.dumps({n["metadata"]["name"]: n["metadata"].get("labels",{}) for n in json.load(sys.stdin)["items"]}, sort_keys=True))')
cp_field() { k get clusterpolicy cluster-policy -o jsonpath="$1"; }

step "a driver that fails on p4d-1 holds only p4d-1 at the driver state"
fault p4d-1 driver-fail
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "p4d-0 validated" "true" 120 node_label p4d-0 nvidia.com/gpu.deploy.gpu-feature-discovery
until_eq "t4-0 validated" "true" 120 node_label t4-0 nvidia.com/gpu.deploy.gpu-feature-discovery
until_eq "p4d-1 failed" "1" 60 cp_field '{.status.nodes.failed}'
assert_eq "p4d-1 held at the driver" "" "$(node_label p4d-1 nvidia.com/gpu.deploy.container-toolkit)"
assert_eq "state" "notReady" "$(cp_state)"
msg=$(cp_field '{.status.conditions[?(@.type=="Ready")].message}')
assert_contains "Ready condition names the node" "p4d-1" "$msg"
# On kwok's nodes the failing driver pod can stay Ready: its validation's failure is the reason.
if kubesim_only "kwok may keep the failing driver pod Ready; its validation's failure is reported"; then
    assert_contains "and the reason" "could not insert 'nvidia'" "$msg"
fi
assert_eq "behind" "p4d-1 driver failed" "$(cp_field '{.status.behind[0].node} {.status.behind[0].state} {.status.behind[0].phase}')"
until_eq "Event on the node" "ValidationFailed" 30 \
    k get events -A --field-selector involvedObject.name=p4d-1,reason=ValidationFailed -o jsonpath='{.items[0].reason}'
# Other nodes may have failed a validation once on the way (a validator that ran before the
# driver finished loading is retried): look for p4d-1 among all NodeFailed Events.
cp_failed_about_p4d1() {
    k get events -A --field-selector involvedObject.name=cluster-policy,reason=NodeFailed \
        -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q 'node p4d-1' && echo yes
}
until_eq "NodeFailed Event on the ClusterPolicy naming p4d-1" "yes" 30 cp_failed_about_p4d1
step "clearing the fault converges without restarting anything"
fault p4d-1 none
until_eq "ready" "ready" 120 cp_state
assert_eq "3 GPU nodes ready" "3" "$(cp_field '{.status.nodes.ready}')"

step "edits: dcgmExporter off removes its DaemonSet; a version change rolls the device plugin"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
until_eq "dcgm-exporter DaemonSet gone" "" 30 k get ds -n gpu-operator nvidia-dcgm-exporter -o name --ignore-not-found
old_img=$(k get ds -n gpu-operator nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}')
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
until_eq "device plugin image" "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" 30 \
    k get ds -n gpu-operator nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}'
[ "$old_img" != "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" ] || fail "the image did not change"
until_eq "new device-plugin pods everywhere" "3" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l app=nvidia-device-plugin-daemonset -o jsonpath='{range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}' | grep -c v0.17.1"
until_eq "ready after the roll" "ready" 120 cp_state

step "a no-op edit writes nothing"
before=$(k get ds -n gpu-operator -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion}{" "}{end}')
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
k label clusterpolicy cluster-policy touched=yes >/dev/null
sleep 2
assert_eq "DaemonSets untouched" "$before" \
    "$(k get ds -n gpu-operator -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion}{" "}{end}')"

step "invalid specs: refused by the CRD, or reported with nothing applied"
out=$(assert_fails "bad strategy" k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"bogus"}}}')
assert_contains "CRD message" 'Unsupported value: "bogus"' "$out"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"1.0:bad:tag"}}}' >/dev/null
until_eq "reported" "ReconcileFailed" 30 cp_field '{.status.conditions[?(@.type=="Error")].reason}'
assert_contains "message names the field" "spec.devicePlugin.version" "$(cp_field '{.status.conditions[?(@.type=="Error")].message}')"
assert_eq "nothing applied" "$before" \
    "$(k get ds -n gpu-operator -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion}{" "}{end}')"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
until_eq "ready again" "ready" 60 cp_state

step "kill -9 mid-rollout, restart: no duplicates, nothing lost"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"toolkit":{"version":"v1.17.1-ubuntu20.04"}}}' >/dev/null
sleep 0.3
pid=$(cat "$E2E_DIR/operator.pid")
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
operator_start
until_eq "toolkit rolled" "v1.17.1-ubuntu20.04" 30 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator nvidia-container-toolkit-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}' | sed 's/.*://'"
until_eq "ready after restart" "ready" 120 cp_state
dups=$(k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation -o json | python3 -c '
import json, sys, collections
c = collections.Counter()
for p in json.load(sys.stdin)["items"]:
    l, a = p["metadata"]["labels"], p["metadata"].get("annotations", {})
    c[(l["nvidia.com/gpu-operator.node"], l["nvidia.com/gpu-operator.validation"], a.get("nvidia.com/gpu-operator.resource", ""))] += 1
print(" ".join("%s/%s/%s=%d" % (k + (v,)) for k, v in sorted(c.items()) if v > 1))')
assert_eq "one validation pod per node, state and resource" "" "$dups"
assert_eq "DaemonSets (no duplicates)" "$(k get ds -n gpu-operator -o name | sort -u | wc -l)" "$(k get ds -n gpu-operator -o name | wc -l)"

step "a second ClusterPolicy is ignored"
second_policy_ignored
assert_contains "says which is active" "cluster-policy" \
    "$(k get clusterpolicy second -o jsonpath='{.status.conditions[0].message}')"
k delete clusterpolicy second >/dev/null

step "deleting the ClusterPolicy leaves the cluster as it was"
k delete clusterpolicy cluster-policy --timeout=60s >/dev/null
assert_eq "no DaemonSets" "" "$(k get ds -n gpu-operator -o name)"
until_eq "no validation pods" "" 30 k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation -o name
labels_after=$(k get nodes -o json | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["items"]
# GFD labels stay (NFD keeps them until its own garbage collection), and nodesim wrote some.
def ours(k): return not (k.startswith("nvidia.com/gpu.") and not k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.present") and not k.startswith(("nvidia.com/cuda.", "nvidia.com/mig-", "nvidia.com/mps.")) and k not in ("nvidia.com/mig.capable", "nvidia.com/mig.strategy", "nvidia.com/mig.config.state")
print(json.dumps({n["metadata"]["name"]: {k: v for k, v in n["metadata"].get("labels", {}).items() if ours(k)} for n in nodes}, sort_keys=True))')
assert_eq "node labels as before install" "$labels_before" "$labels_after"
echo "PASS operator_lifecycle"
