#!/usr/bin/env bash
# nodesim: what the device plugin and GFD publish under time-slicing (user flow 4: 4×T4 with
# replicas 4 → 16, Tesla-T4-SHARED), per-node config selection, renameByDefault, and the single
# MIG strategy (one profile → <product>-MIG-<profile>; mixed profiles → MIG-INVALID, nothing
# advertised), MPS refused on MIG devices, and failRequestsGreaterThanOne (a pod asking two shared
# GPUs fails with UnexpectedAdmissionError and the plugin's message).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=300
place_operands single
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: time-slicing-config, namespace: gpu-operator}
data:
  any: |-
    version: v1
    flags:
      migStrategy: none
    sharing:
      timeSlicing:
        renameByDefault: false
        failRequestsGreaterThanOne: false
        resources:
          - name: nvidia.com/gpu
            replicas: 4
  renamed: |-
    version: v1
    sharing:
      timeSlicing:
        renameByDefault: true
        failRequestsGreaterThanOne: true
        resources:
          - name: nvidia.com/gpu
            replicas: 8
  mps: |-
    version: v1
    sharing:
      mps:
        resources:
          - name: nvidia.com/gpu
            replicas: 2
YAML
# The device plugin and GFD mount the config as NVIDIA's operator does (volume "config").
for ds in nvidia-device-plugin-daemonset gpu-feature-discovery; do
    k patch ds -n gpu-operator "$ds" --type strategic -p \
        '{"spec":{"template":{"spec":{"volumes":[{"name":"config","configMap":{"name":"time-slicing-config"}}]}}}}' >/dev/null
done
# On the T4 node the config's key "any" is picked with the DEFAULT_CONFIG env naming it.
for ds in nvidia-device-plugin-daemonset gpu-feature-discovery; do
    k set env ds -n gpu-operator "$ds" DEFAULT_CONFIG=any >/dev/null
done

step "4×T4 with time-slicing replicas 4"
deploy_on t4-0
until_eq "T4 capacity" "nvidia.com/gpu=16" 60 node_gpu_resources t4-0
assert_eq "allocatable" "16" "$(node_res t4-0 allocatable nvidia.com/gpu)"
until_eq "product" "Tesla-T4-SHARED" 30 node_label t4-0 nvidia.com/gpu.product
assert_eq "count" "4" "$(node_label t4-0 nvidia.com/gpu.count)"
assert_eq "replicas" "4" "$(node_label t4-0 nvidia.com/gpu.replicas)"
assert_eq "sharing strategy" "time-slicing" "$(node_label t4-0 nvidia.com/gpu.sharing-strategy)"
assert_eq "no mig.strategy on a non-MIG GPU" "" "$(node_label t4-0 nvidia.com/mig.strategy)"

step "per-node choice by label: renameByDefault gives nvidia.com/gpu.shared"
k label node t4-0 nvidia.com/device-plugin.config=renamed >/dev/null
until_eq "renamed capacity" "nvidia.com/gpu.shared=32" 60 node_gpu_resources t4-0
until_eq "renamed product has no -SHARED" "Tesla-T4" 30 node_label t4-0 nvidia.com/gpu.product
assert_eq "replicas 8" "8" "$(node_label t4-0 nvidia.com/gpu.replicas)"

step "failRequestsGreaterThanOne: the plugin's Allocate refuses 2 shared GPUs, the kubelet the pod"
gpu_pod() { # NAME RESOURCE COUNT
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeName: t4-0
  restartPolicy: Never
  containers:
    - name: c
      image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04
      resources: {limits: {$2: $3}}
YAML
}
# The refusal is the kubelet's admission calling the plugin's Allocate: kwok's nodes have none.
if kubesim_only "the kubelet's device manager calls Allocate; kwok's nodes have no kubelet"; then
    gpu_pod two-shared nvidia.com/gpu.shared 2
    until_eq "two shared GPUs: rejected" "Failed UnexpectedAdmissionError" 30 \
        k get pod two-shared -o jsonpath='{.status.phase} {.status.reason}'
    assert_eq "the plugin's message" "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = invalid allocation request for \"nvidia.com/gpu.shared\": invalid request: maximum request size for shared resources is 1; found 2, which is unexpected" \
        "$(k get pod two-shared -o jsonpath='{.status.message}')"
    gpu_pod one-shared nvidia.com/gpu.shared 1
    until_eq "one shared GPU runs" "Running" 30 k get pod one-shared -o jsonpath='{.status.phase}'
    k delete pod two-shared one-shared --wait=false >/dev/null
fi
step "a label naming a missing key: nothing advertised"
k label node t4-0 nvidia.com/device-plugin.config=nope --overwrite >/dev/null
until_eq "nothing advertised" "" 60 node_gpu_resources t4-0
k label node t4-0 nvidia.com/device-plugin.config- >/dev/null
until_eq "back to the default key" "nvidia.com/gpu=16" 60 node_gpu_resources t4-0
gpu_pod two-any nvidia.com/gpu 2
until_eq "failRequestsGreaterThanOne false: two shared GPUs run" "Running" 30 \
    k get pod two-any -o jsonpath='{.status.phase}'
k delete pod two-any --wait=false >/dev/null

step "single strategy: one profile everywhere"
deploy_on p4d-0 mig
k label node p4d-0 nvidia.com/mig.config=all-1g.5gb >/dev/null
until_eq "state" "success" 60 node_label p4d-0 nvidia.com/mig.config.state
# The config's flags say migStrategy none, but the MIG_STRATEGY env (what the operator sets) wins,
# as in NVIDIA's device plugin; the default key "any" time-slices each MIG device 4 ways.
until_eq "single capacity" "nvidia.com/gpu=224" 60 node_gpu_resources p4d-0
until_eq "single product" "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED" 30 node_label p4d-0 nvidia.com/gpu.product
assert_eq "single count" "56" "$(node_label p4d-0 nvidia.com/gpu.count)"

step "MPS on MIG devices: the plugin refuses to start, nothing advertised"
k label node p4d-0 nvidia.com/device-plugin.config=mps >/dev/null
until_eq "MPS over MIG devices" "" 60 node_gpu_resources p4d-0
k label node p4d-0 nvidia.com/device-plugin.config- >/dev/null
until_eq "back to the default key" "nvidia.com/gpu=224" 60 node_gpu_resources p4d-0

step "single strategy with mixed profiles: MIG-INVALID and no MIG resources"
k label node p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "state" "success" 60 node_label p4d-0 nvidia.com/mig.config.state
until_eq "invalid product" "NVIDIA-A100-SXM4-40GB-MIG-INVALID" 30 node_label p4d-0 nvidia.com/gpu.product
assert_eq "invalid count" "0" "$(node_label p4d-0 nvidia.com/gpu.count)"
until_eq "nothing advertised" "" 30 node_gpu_resources p4d-0
echo "PASS nodesim_sharing"
