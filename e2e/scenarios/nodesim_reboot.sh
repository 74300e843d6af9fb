#!/usr/bin/env bash
# nodesim: a node whose GPUs cannot be reset. Without WITH_REBOOT the MIG manager fails a mode
# change (clients restored); with WITH_REBOOT=true it goes rebooting (node NotReady, containers
# restarted) and then applies the config.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-reboot.yaml" --nodesim --reboot-ms=2000 \
    --nodesim --mig-apply-ms=300
place_operands mixed false
deploy_on vm-0 mig
until_eq "whole GPUs" "nvidia.com/gpu=8" 60 node_gpu_resources vm-0

step "WITH_REBOOT false: a MIG mode change fails, clients restored"
k label node vm-0 nvidia.com/mig.config=all-balanced >/dev/null
until_eq "failed" "failed" 60 node_label vm-0 nvidia.com/mig.config.state
assert_eq "device plugin restored" "true" "$(node_label vm-0 nvidia.com/gpu.deploy.device-plugin)"
until_eq "still whole GPUs" "nvidia.com/gpu=8" 60 node_gpu_resources vm-0

step "WITH_REBOOT true: rebooting, NotReady, then success"
k set env ds -n gpu-operator nvidia-mig-manager WITH_REBOOT=true >/dev/null
until_eq "rebooting" "rebooting" 60 node_label vm-0 nvidia.com/mig.config.state
until_eq "NotReady while rebooting" "False" 10 \
    k get node vm-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
until_eq "success" "success" 60 node_label vm-0 nvidia.com/mig.config.state
assert_eq "Ready again" "True" \
    "$(k get node vm-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
assert_eq "boot id changed" "boot-1" "$(k get node vm-0 -o jsonpath='{.status.nodeInfo.bootID}')"
until_eq "capacity" \
    "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" \
    60 node_gpu_resources vm-0
if kubesim_only "containers restart after a reboot by the kubelet's doing (kubesim's); kwok restarts none"; then
    drv=$(k get pods -n gpu-operator -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}')
    [ "${drv:-0}" -ge 1 ] || fail "the driver container did not restart with the node (restartCount ${drv:-0})"
fi
echo "PASS nodesim_reboot"
