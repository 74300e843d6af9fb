#!/usr/bin/env bash
# MIG with the operator on models beyond the A100, from the default config NVIDIA ships:
# all-balanced on an H100 PCIe and a GH200 (their own all-balanced entries), a +me layout on an
# H100 SXM (all-1g.10gb.me: advertised as nvidia.com/mig-1g.10gb.me, the name the device plugin
# gives it, validated by its own pod), and a config with no entry for the GPU's device id, which
# applies nothing and succeeds as mig-parted does.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-mig-models.yaml" --nodesim --mig-apply-ms=1000
install_crd
k create namespace gpu-operator >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready" "ready" 120 cp_state

# mig_validations NODE: "resource=phase" of the node's MIG validation pods, one a line.
mig_validations() {
    k get pods -n gpu-operator -l "nvidia.com/gpu-operator.validation=mig-manager,nvidia.com/gpu-operator.node=$1" \
        -o jsonpath='{range .items[*]}{.metadata.annotations.nvidia\.com/gpu-operator\.resource}={.status.phase}{"\n"}{end}' | sort
}

step "all-balanced on an H100 PCIe and a GH200: each model's own layout, validated per profile"
assert_eq "H100 PCIe product" "NVIDIA-H100-PCIe" "$(node_label h100-pcie nvidia.com/gpu.product)"
k label nodes h100-pcie gh200 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "h100-pcie success" "success" 60 node_label h100-pcie nvidia.com/mig.config.state
until_eq "gh200 success" "success" 60 node_label gh200 nvidia.com/mig.config.state
until_eq "ready again" "ready" 120 cp_state
assert_eq "H100 PCIe capacity" \
    "nvidia.com/gpu=0 nvidia.com/mig-1g.10gb=4 nvidia.com/mig-2g.20gb=2 nvidia.com/mig-3g.40gb=2" \
    "$(node_gpu_resources h100-pcie)"
assert_eq "GH200 capacity" \
    "nvidia.com/gpu=0 nvidia.com/mig-1g.12gb=2 nvidia.com/mig-2g.24gb=1 nvidia.com/mig-3g.48gb=1" \
    "$(node_gpu_resources gh200)"
assert_eq "H100 PCIe validations" "nvidia.com/mig-1g.10gb=Succeeded
nvidia.com/mig-2g.20gb=Succeeded
nvidia.com/mig-3g.40gb=Succeeded" "$(mig_validations h100-pcie)"
assert_eq "GH200 validations" "nvidia.com/mig-1g.12gb=Succeeded
nvidia.com/mig-2g.24gb=Succeeded
nvidia.com/mig-3g.48gb=Succeeded" "$(mig_validations gh200)"

step "+me: all-1g.10gb.me on the H100 SXM is nvidia.com/mig-1g.10gb.me, validated"
k label nodes h100-sxm nvidia.com/mig.config=all-1g.10gb.me --overwrite >/dev/null
until_eq "pending" "pending" 20 node_label h100-sxm nvidia.com/mig.config.state
until_eq "success" "success" 60 node_label h100-sxm nvidia.com/mig.config.state
until_eq "ready again" "ready" 120 cp_state
assert_eq "capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.10gb.me=2" "$(node_gpu_resources h100-sxm)"
assert_eq "allocatable" "2" "$(node_res h100-sxm allocatable nvidia.com/mig-1g.10gb.me)"
assert_eq "GFD count label" "2" "$(node_label h100-sxm nvidia.com/mig-1g.10gb.me.count)"
assert_eq "validation" "nvidia.com/mig-1g.10gb.me=Succeeded" "$(mig_validations h100-sxm)"

step "a config with no entry for the GH200's device id applies nothing: success, layout kept"
k label nodes gh200 nvidia.com/mig.config.state- >/dev/null
k label nodes gh200 nvidia.com/mig.config=all-1g.35gb --overwrite >/dev/null
until_eq "success" "success" 60 node_label gh200 nvidia.com/mig.config.state
assert_eq "layout kept" \
    "nvidia.com/gpu=0 nvidia.com/mig-1g.12gb=2 nvidia.com/mig-2g.24gb=1 nvidia.com/mig-3g.48gb=1" \
    "$(node_gpu_resources gh200)"
until_eq "ready" "ready" 120 cp_state
echo "PASS operator_mig_models"
