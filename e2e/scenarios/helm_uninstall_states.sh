#!/usr/bin/env bash
# helm uninstall is clean in every state: an operand switched off takes its validation pods with
# it; with a MIG change pending on a node (clients paused by the MIG manager), a second
# ClusterPolicy present (ignored) and a user's own opt-out label, `helm uninstall` leaves no
# operand, validation pod, finalizer or label the operator or its operands added (no
# paused-for-mig-change value, no nvidia.com/mig.config.state), keeps the user's labels, and does
# not activate the second ClusterPolicy on the way out. After failures too: a node whose MIG config
# failed, a driver upgrade stuck on a node whose new driver cannot load (cordoned by the
# operator), and a failed validation leave nothing behind either, and the operator's cordon goes.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

# A slow MIG apply: the change is still pending when helm uninstall runs.
chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=30000
chart_install_ready --set mig.strategy=mixed
val_pods() { k get pods -n gpu-operator -l "nvidia.com/gpu-operator.validation=$1" -o name; }

step "an operand switched off takes its validation pods with it"
[ -n "$(val_pods device-plugin)" ] || fail "no device-plugin validation pods to start with"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"enabled":false}}}' >/dev/null
until_eq "device-plugin DaemonSet gone" "" 30 k get ds -n gpu-operator nvidia-device-plugin-daemonset -o name --ignore-not-found
until_eq "device-plugin validation pods gone" "" 30 val_pods device-plugin
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"enabled":true}}}' >/dev/null
until_eq "device-plugin validated again" "3" 90 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l nvidia.com/gpu-operator.validation=device-plugin --field-selector status.phase=Succeeded -o name | wc -l"
until_eq "ready again" "ready" 120 cp_state

step "a user's opt-out, a second ClusterPolicy (ignored), a MIG change pending"
k label node t4-0 nvidia.com/gpu.deploy.dcgm-exporter=false --overwrite >/dev/null
second_policy_ignored
assert_eq "p4d-1 has the MIG state of its default config" "success" "$(node_label p4d-1 nvidia.com/mig.config.state)"
k label nodes p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "pending" "pending" 20 node_label p4d-0 nvidia.com/mig.config.state
assert_eq "clients paused" "paused-for-mig-change" "$(node_label p4d-0 nvidia.com/gpu.deploy.device-plugin)"

step "failures: a MIG config that failed, a driver upgrade stuck on a driver that cannot load"
k label nodes p4d-1 nvidia.com/mig.config=no-such-config --overwrite >/dev/null
until_eq "p4d-1 MIG failed" "failed" 30 node_label p4d-1 nvidia.com/mig.config.state
fault t4-0 driver-fail
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"560.35.03",
    "upgradePolicy":{"autoUpgrade":true,"maxParallelUpgrades":0,"maxUnavailable":"100%"}}}}' >/dev/null
until_eq "t4-0 cordoned by the upgrade" "true" 60 k get node t4-0 -o jsonpath='{.spec.unschedulable}'
until_eq "t4-0's new driver crash-looping" "CrashLoopBackOff" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l app=nvidia-driver-daemonset --field-selector spec.nodeName=t4-0 -o jsonpath='{.items[0].status.containerStatuses[0].state.waiting.reason}'"
until_eq "t4-0 failed in the status" "t4-0 driver failed" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get clusterpolicy cluster-policy -o json | python3 -c '
import json, sys
for b in json.load(sys.stdin)[\"status\"].get(\"behind\", []):
    if b[\"node\"] == \"t4-0\": print(b[\"node\"], b[\"state\"], b[\"phase\"])'"
assert_contains "t4-0 upgrade under way" "t4-0" \
    "$(k get nodes -l nvidia.com/gpu-driver-upgrade-state -o name)"

step "helm uninstall while the MIG change is pending, after the failures"
chart_uninstall
assert_eq "cluster-policy gone" "" "$(k get clusterpolicy cluster-policy -o name --ignore-not-found)"
assert_eq "the second ClusterPolicy got no finalizer" "" \
    "$(k get clusterpolicy second -o jsonpath='{.metadata.finalizers}')"
assert_eq "and was not activated" "ignored" "$(k get clusterpolicy second -o jsonpath='{.status.state}')"
k delete clusterpolicy second --timeout=15s >/dev/null || fail "deleting the second ClusterPolicy hangs"
until_eq "no pods left" "" 30 k get pods -n gpu-operator -o name
assert_eq "no DaemonSets" "" "$(k get ds -n gpu-operator -o name)"
assert_eq "no node left cordoned" "" "$(k get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{end}' | sed 's/false//g')"
assert_eq "no upgrade annotation" "" "$(k get nodes -o json | python3 -c '
import json, sys
print(" ".join(n["metadata"]["name"] + ":" + a for n in json.load(sys.stdin)["items"]
               for a in n["metadata"].get("annotations", {}) if "upgrade" in a))')"
# The labels of the operator and of its operands (the MIG manager's state and pauses); GFD's
# and nodesim's hardware labels stay, as NFD keeps them, and so do the user's own.
leftovers() {
    k get nodes -o json | python3 -c '
import json, sys
out = []
for n in json.load(sys.stdin)["items"]:
    l = n["metadata"].get("labels", {})
    for k, v in sorted(l.items()):
        if (k.startswith("nvidia.com/gpu.deploy.") and v != "false") or k in (
                "nvidia.com/gpu.present", "nvidia.com/mig.config.state",
                "nvidia.com/gpu-driver-upgrade-state") or v == "paused-for-mig-change" or (
                k == "nvidia.com/mig.config" and v not in ("all-balanced", "no-such-config")):
            out.append("%s:%s=%s" % (n["metadata"]["name"], k, v))
print(" ".join(out))'
}
assert_eq "no operator or operand labels" "" "$(leftovers)"
sleep 5
assert_eq "none written afterwards" "" "$(leftovers)"
assert_eq "the user's opt-out stays" "false" "$(node_label t4-0 nvidia.com/gpu.deploy.dcgm-exporter)"
assert_eq "the user's MIG config stays" "all-balanced" "$(node_label p4d-0 nvidia.com/mig.config)"
assert_eq "the user's failed MIG config stays" "no-such-config" "$(node_label p4d-1 nvidia.com/mig.config)"
assert_eq "no operator annotation" "" "$(k get nodes -o jsonpath='{range .items[*]}{.metadata.annotations.nvidia\.com/gpu-operator\.mig-config-default}{end}')"
echo "PASS helm_uninstall_states"
