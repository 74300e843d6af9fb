#!/usr/bin/env bash
# nodesim: fleet registration, and the MIG manager's label state machine under the mixed
# strategy with NVIDIA's components placed by hand: all-balanced → 16/8/8, all-1g.5gb → 56 and
# no whole GPUs, a made-up config → failed with clients restored, a layout NVML cannot place →
# failed with mig-parted's message, a failing apply → failed.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=3000

step "registration: NFD labels, capacity, Ready, Leases"
assert_eq "nodes" "cpu-0 p4d-0 p4d-1 t4-0" "$(k get nodes -o jsonpath='{.items[*].metadata.name}')"
assert_eq "p4d-0 pci label" "true" "$(node_label p4d-0 feature.node.kubernetes.io/pci-10de.present)"
assert_eq "cpu-0 pci label" "" "$(node_label cpu-0 feature.node.kubernetes.io/pci-10de.present)"
assert_eq "os label" "ubuntu" "$(node_label t4-0 feature.node.kubernetes.io/system-os_release.ID)"
assert_eq "os version minor" "04" "$(node_label t4-0 feature.node.kubernetes.io/system-os_release.VERSION_ID.minor)"
assert_eq "kernel label" "5.15.0-1063-aws" "$(node_label p4d-0 feature.node.kubernetes.io/kernel-version.full)"
assert_eq "cpu capacity" "96" "$(node_res p4d-0 capacity cpu)"
assert_eq "no GPU resource before the device plugin" "" "$(node_gpu_resources p4d-0)"
ready=$(k get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}')
assert_eq "all Ready" "True True True True " "$ready"
until_eq "leases" "cpu-0 p4d-0 p4d-1 t4-0" 30 k get leases -n kube-node-lease -o jsonpath='{.items[*].metadata.name}'

step "operands placed by hand, mixed strategy"
place_operands mixed
for n in p4d-0 p4d-1; do deploy_on "$n" mig; done
k label node p4d-0 p4d-1 nvidia.com/mig.config=all-disabled >/dev/null
until_eq "p4d-0 whole GPUs" "nvidia.com/gpu=8" 60 node_gpu_resources p4d-0
until_eq "GFD product" "NVIDIA-A100-SXM4-40GB" 30 node_label p4d-0 nvidia.com/gpu.product
assert_eq "GFD count" "8" "$(node_label p4d-0 nvidia.com/gpu.count)"
assert_eq "GFD strategy" "mixed" "$(node_label p4d-0 nvidia.com/mig.strategy)"
assert_eq "GFD mig.capable" "true" "$(node_label p4d-0 nvidia.com/mig.capable)"
until_eq "all-disabled applied" "success" 30 node_label p4d-0 nvidia.com/mig.config.state

step "all-balanced: pending, clients paused, success, 16/8/8"
k label node p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
# The pending window lasts --mig-apply-ms (3 s): on a loaded machine a few kubectl calls take
# longer, so the labels are checked on the one read of the node that shows pending.
snap="" end=$((SECONDS + 20))
while [ "${snap%%|*}" != pending ]; do
    [ $SECONDS -le $end ] || fail "state pending: not seen within 20s, last labels [$snap]"
    snap=$(node_labels p4d-0 nvidia.com/mig.config.state nvidia.com/gpu.deploy.device-plugin \
        nvidia.com/gpu.deploy.gpu-feature-discovery nvidia.com/gpu.deploy.driver || true)
    sleep 0.1
done
assert_eq "while pending: device plugin and GFD paused, driver not" \
    "pending|paused-for-mig-change|paused-for-mig-change|true" "$snap"
until_eq "device-plugin pod gone while paused" "" 30 \
    k get pods -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=p4d-0 -o name
until_eq "state success" "success" 60 node_label p4d-0 nvidia.com/mig.config.state
assert_eq "device plugin restored" "true" "$(node_label p4d-0 nvidia.com/gpu.deploy.device-plugin)"
until_eq "all-balanced capacity" \
    "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" \
    60 node_gpu_resources p4d-0
assert_eq "allocatable matches" "16" "$(node_res p4d-0 allocatable nvidia.com/mig-1g.5gb)"
until_eq "GFD per-profile label" "16" 30 node_label p4d-0 nvidia.com/mig-1g.5gb.count
assert_eq "other node untouched" "nvidia.com/gpu=8" "$(node_gpu_resources p4d-1)"

step "all-1g.5gb: 56 and no whole GPU"
k label node p4d-0 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "state pending" "pending" 20 node_label p4d-0 nvidia.com/mig.config.state
until_eq "state success" "success" 60 node_label p4d-0 nvidia.com/mig.config.state
until_eq "all-1g.5gb capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 60 node_gpu_resources p4d-0
until_eq "stale GFD profile labels removed" "" 30 node_label p4d-0 nvidia.com/mig-2g.10gb.count

step "a made-up config name: failed, clients restored"
k label node p4d-0 nvidia.com/mig.config=no-such-config --overwrite >/dev/null
until_eq "state failed" "failed" 30 node_label p4d-0 nvidia.com/mig.config.state
for l in device-plugin gpu-feature-discovery; do
    assert_eq "$l restored" "true" "$(node_label p4d-0 nvidia.com/gpu.deploy.$l)"
done
assert_eq "layout kept" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" "$(node_gpu_resources p4d-0)"

step "a layout NVML cannot place (2×3g.20gb + 1g.5gb per A100): pending, then failed with mig-parted's message"
{
    cat "$E2E_DIR/mig-parted-config.yaml"
    printf '  halves-and-one:\n    - devices: all\n      mig-enabled: true\n'
    printf '      mig-devices: {"3g.20gb": 2, "1g.5gb": 1}\n'
} >"$E2E_DIR/mig-parted-custom.yaml"
k create configmap default-mig-parted-config -n gpu-operator --dry-run=client -o yaml \
    --from-file=config.yaml="$E2E_DIR/mig-parted-custom.yaml" | k apply -f - >/dev/null 2>&1
k label node p4d-0 nvidia.com/mig.config.state- >/dev/null
k label node p4d-0 nvidia.com/mig.config=halves-and-one --overwrite >/dev/null
until_eq "state pending" "pending" 20 node_label p4d-0 nvidia.com/mig.config.state
until_eq "state failed" "failed" 60 node_label p4d-0 nvidia.com/mig.config.state
assert_contains "nodesim says why" "config=halves-and-one reason=\"mig-configs.halves-and-one: GPU 0: error setting MIGConfig: error attempting multiple config orderings: error creating GPU instance for '1g.5gb': Insufficient Resources\"" \
    "$(cat "$E2E_DIR/nodesim.log")"
until_eq "device plugin restored" "true" 10 node_label p4d-0 nvidia.com/gpu.deploy.device-plugin
# The apply failed after pausing the clients: the device plugin, started again, advertises the
# layout it finds, which is the one kept (its resources are absent until it has registered).
until_eq "layout kept" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 30 node_gpu_resources p4d-0

step "an apply that fails on the GPU: failed after pausing, clients restored"
fault p4d-1 mig-fail
k label node p4d-1 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "p4d-1 pending" "pending" 20 node_label p4d-1 nvidia.com/mig.config.state
until_eq "p4d-1 failed" "failed" 60 node_label p4d-1 nvidia.com/mig.config.state
until_eq "p4d-1 device plugin restored" "true" 10 node_label p4d-1 nvidia.com/gpu.deploy.device-plugin
until_eq "p4d-1 whole GPUs again" "nvidia.com/gpu=8" 60 node_gpu_resources p4d-1
step "clearing the fault and relabelling applies it"
fault p4d-1 none
k label node p4d-1 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "p4d-1 success" "success" 60 node_label p4d-1 nvidia.com/mig.config.state
until_eq "p4d-1 capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 60 node_gpu_resources p4d-1
echo "PASS nodesim_mig"
