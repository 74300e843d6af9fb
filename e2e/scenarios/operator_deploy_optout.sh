#!/usr/bin/env bash
# Per-node opt-outs users set with NVIDIA's operator: nvidia.com/gpu.deploy.<component>=false
# (gpu.deploy.driver=false on a node with a preinstalled driver) keeps that component off the
# node and is never set back to true, through install, a driver upgrade and uninstall;
# nvidia.com/gpu.deploy.operands=false keeps every operand off. The node with its own driver is
# neither given a driver pod nor cordoned by the driver upgrade. Nodes ready in the first rollout
# get no GPUNodeReady Event (the ClusterPolicy's Ready Event says it); a node opted in once the
# policy is ready gets one; opted out again, it loses the labels the operator added and the
# driver upgrade that follows at once leaves it alone while its driver pod stops.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-optout.yaml"
install_crd
k create namespace gpu-operator >/dev/null
k label node host-0 nvidia.com/gpu.deploy.driver=false >/dev/null
k label node nodcgm-0 nvidia.com/gpu.deploy.dcgm-exporter=false >/dev/null
k label node optout-0 nvidia.com/gpu.deploy.operands=false >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null

pods_on() {
    k get pods -n gpu-operator --field-selector "spec.nodeName=$1" \
        -o jsonpath='{range .items[*]}{.metadata.labels.app}{"\n"}{end}' | sort -u | tr '\n' ' '
}

step "the ClusterPolicy becomes ready with the opt-outs kept"
until_eq "state" "ready" 120 cp_state
assert_eq "host-0 driver label" "false" "$(node_label host-0 nvidia.com/gpu.deploy.driver)"
assert_eq "host-0 toolkit label" "true" "$(node_label host-0 nvidia.com/gpu.deploy.container-toolkit)"
assert_eq "host-0 device plugin label" "true" "$(node_label host-0 nvidia.com/gpu.deploy.device-plugin)"
case "$(pods_on host-0)" in *nvidia-driver-daemonset*) fail "a driver pod on host-0: $(pods_on host-0)" ;; esac
assert_contains "host-0 toolkit pod" "nvidia-container-toolkit-daemonset" "$(pods_on host-0)"
assert_eq "nodcgm-0 dcgm-exporter label" "false" "$(node_label nodcgm-0 nvidia.com/gpu.deploy.dcgm-exporter)"
case "$(pods_on nodcgm-0)" in *nvidia-dcgm-exporter*) fail "a DCGM exporter pod on nodcgm-0" ;; esac
assert_contains "gpu-0 driver pod" "nvidia-driver-daemonset" "$(pods_on gpu-0)"
assert_eq "optout-0 pods" "" "$(k get pods -n gpu-operator --field-selector spec.nodeName=optout-0 -l 'app notin (nvidia-cuda-validator)' -o name)"
# deploy_labels NODE: the node's nvidia.com/gpu.deploy.* labels but the user's operands opt-out
# ("error" when they cannot be read).
deploy_labels() {
    k get node "$1" -o json | python3 -c 'import json,sys; print(" ".join(k+"="+v for k,v in json.load(sys.stdin)["metadata"]["labels"].items() if k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.deploy.operands"))' ||
        echo error
}
assert_eq "optout-0 deploy labels" "" "$(deploy_labels optout-0)"
assert_eq "ready nodes" "3" "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.ready}')"
node_ready_events() {
    k get events -A --field-selector reason=GPUNodeReady \
        -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' | sort | tr '\n' ' '
}
# The first rollout is told by the ClusterPolicy's status and its Ready Event, not one per node.
assert_eq "GPUNodeReady Events in the first rollout" "" "$(node_ready_events)"
assert_contains "the ClusterPolicy's Ready Event" "ClusterPolicy is ready: 3 GPU nodes validated" \
    "$(k get events -A --field-selector involvedObject.kind=ClusterPolicy,reason=Ready -o jsonpath='{.items[*].message}')"

step "optout-0 opted in once the policy is ready: its operands come, and an Event says it is ready"
k label node optout-0 nvidia.com/gpu.deploy.operands- >/dev/null
until_eq "optout-0 driver label" "true" 60 node_label optout-0 nvidia.com/gpu.deploy.driver
until_eq "ready nodes" "4" 120 k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.ready}'
until_eq "state" "ready" 60 cp_state
until_eq "GPUNodeReady Events" "optout-0 " 30 node_ready_events
step "optout-0 opted out again: every label the operator added goes"
k label node optout-0 nvidia.com/gpu.deploy.operands=false >/dev/null
until_eq "optout-0 deploy labels" "" 60 deploy_labels optout-0
until_eq "state" "ready" 60 cp_state

step "a driver upgrade leaves the node with its own driver alone"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"560.35.03"}}}' >/dev/null
seen="" seen_optout=""
end=$((SECONDS + 90))
while [ $SECONDS -lt $end ]; do
    st=$(node_labels host-0 nvidia.com/gpu-driver-upgrade-state nvidia.com/gpu.deploy.driver)
    uns=$(k get node host-0 -o jsonpath='{.spec.unschedulable}')
    [ "$st|$uns" = "|false|" ] || seen="$st|$uns"
    # optout-0 was opted out just before: its driver pod may still be stopping; not upgraded.
    st=$(node_label optout-0 nvidia.com/gpu-driver-upgrade-state)
    uns=$(k get node optout-0 -o jsonpath='{.spec.unschedulable}')
    [ "$st|$uns" = "|" ] || seen_optout="$st|$uns"
    [ "$(node_label gpu-0 nvidia.com/gpu-driver-upgrade-state)" = upgrade-done ] && break
    sleep 0.3
done
assert_eq "gpu-0 upgraded" "upgrade-done" "$(node_label gpu-0 nvidia.com/gpu-driver-upgrade-state)"
assert_eq "host-0 untouched (upgrade state, driver label, cordon)" "" "$seen"
assert_eq "optout-0 untouched (upgrade state, cordon)" "" "$seen_optout"
until_eq "state" "ready" 60 cp_state

step "uninstall: the labels the operator added go, the user's stay"
k delete clusterpolicy cluster-policy --wait=true --timeout=60s >/dev/null
assert_eq "host-0 after" "false|" "$(node_labels host-0 nvidia.com/gpu.deploy.driver nvidia.com/gpu.deploy.container-toolkit)"
assert_eq "nodcgm-0 after" "false|" "$(node_labels nodcgm-0 nvidia.com/gpu.deploy.dcgm-exporter nvidia.com/gpu.deploy.driver)"
assert_eq "optout-0 after" "false" "$(node_label optout-0 nvidia.com/gpu.deploy.operands)"
echo "PASS operator_deploy_optout"
