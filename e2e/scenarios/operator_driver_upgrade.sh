#!/usr/bin/env bash
# A driver version change (the driver DaemonSet is OnDelete): the operator upgrades node by node
# (maxParallelUpgrades 1) through NVIDIA's nvidia.com/gpu-driver-upgrade-state labels: cordon,
# driver pod replaced from the new template, driver validated again, uncordon, upgrade-done; the
# ClusterPolicy is ready again with every driver pod on the new image. With autoUpgrade false the
# nodes are only marked upgrade-required. Deleting the ClusterPolicy mid-upgrade uncordons the
# node the operator cordoned (not one the user cordoned) and removes the upgrade labels.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k create namespace gpu-operator >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready" "ready" 120 cp_state
drv_images() {
    k get pods -n gpu-operator -l app=nvidia-driver-daemonset \
        -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | sed 's/.*://' | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' '
}
assert_eq "driver pods, OS-tagged" "3x595.91.07-ubuntu22.04 " "$(drv_images)"

step "autoUpgrade false: nodes are marked, nothing restarts"
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"driver":{"version":"560.35.03","upgradePolicy":{"autoUpgrade":false}}}}' >/dev/null
until_eq "marked" "upgrade-required upgrade-required upgrade-required" 30 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get nodes -l feature.node.kubernetes.io/pci-10de.present=true -o jsonpath='{.items[*].metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'"
sleep 1
assert_eq "old driver pods still run" "3x595.91.07-ubuntu22.04 " "$(drv_images)"
# NVIDIA's upgrade gauges: three nodes pending, auto upgrade off.
until_eq "pending upgrades metric" "3" 30 metric gpu_operator_nodes_upgrades_pending
assert_eq "auto upgrade metric off" "0" "$(metric gpu_operator_driver_auto_upgrade_enabled)"
assert_eq "no upgrade in progress" "0" "$(metric gpu_operator_nodes_upgrades_in_progress)"

step "autoUpgrade true: one node at a time, cordoned, re-validated, uncordoned"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{"autoUpgrade":true,"maxParallelUpgrades":1}}}}' >/dev/null
max=0
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ]; do
    states=$(k get nodes -l feature.node.kubernetes.io/pci-10de.present=true -o jsonpath='{.items[*].metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')
    busy=$(tr ' ' '\n' <<<"$states" | grep -cE 'cordon-required|pod-restart-required|validation-required|uncordon-required' || true)
    [ "$busy" -le "$max" ] || max=$busy
    [ "$states" = "upgrade-done upgrade-done upgrade-done" ] && break
    sleep 0.2
done
assert_eq "all upgraded" "upgrade-done upgrade-done upgrade-done" "$states"
assert_eq "never more than one node at a time" "1" "$max"
assert_eq "new driver pods" "3x560.35.03-ubuntu22.04 " "$(drv_images)"
assert_eq "nobody left cordoned" "" "$(k get nodes -o jsonpath='{.items[?(@.spec.unschedulable==true)].metadata.name}')"
until_eq "ready" "ready" 60 cp_state
until_eq "done upgrades metric" "3" 30 metric gpu_operator_nodes_upgrades_done
assert_eq "auto upgrade metric on" "1" "$(metric gpu_operator_driver_auto_upgrade_enabled)"
assert_eq "nothing pending" "0" "$(metric gpu_operator_nodes_upgrades_pending)"
assert_eq "nothing in progress" "0" "$(metric gpu_operator_nodes_upgrades_in_progress)"
assert_eq "nothing failed" "0" "$(metric gpu_operator_nodes_upgrades_failed)"
assert_contains "Events" "DriverUpgrade" "$(k get events -A --field-selector reason=DriverUpgrade -o jsonpath='{.items[*].reason}')"
step "deleting the ClusterPolicy mid-upgrade: the operator's cordon is undone, the user's stays"
k cordon t4-0 >/dev/null
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"570.86.15"}}}' >/dev/null
cordoned_by_operator() {
    k get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.annotations.nvidia\.com/gpu-driver-upgrade\.cordoned-by-operator}{"\n"}{end}' | sed -n 's/=true$//p' | tr '\n' ' '
}
end=$((SECONDS + 60))
until [ -n "$(cordoned_by_operator)" ] || [ $SECONDS -ge $end ]; do sleep 0.1; done
[ -n "$(cordoned_by_operator)" ] || fail "no node cordoned by the upgrade"
k delete clusterpolicy cluster-policy --timeout=60s >/dev/null
assert_eq "only the user's cordon left" "t4-0" "$(k get nodes -o jsonpath='{.items[?(@.spec.unschedulable==true)].metadata.name}')"
assert_eq "no cordon annotation" "" "$(cordoned_by_operator)"
assert_eq "no upgrade state" "" "$(k get nodes -o jsonpath='{.items[*].metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')"
echo "PASS operator_driver_upgrade"
