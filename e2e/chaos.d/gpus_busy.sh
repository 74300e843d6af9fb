#!/usr/bin/env bash
# Chaos: every GPU of t4-0 taken by a workload when the device plugin's validation runs (a version
# edit makes the operator validate again): the kubelet rejects the validation pod
# (OutOfnvidia.com/gpu, no container runs). Once the workload leaves, the operator must retry
# and the node converge.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "all GPUs of t4-0 in use during its device-plugin validation, then freed"
chaos_cluster fleet-gpu.yaml
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready before the fault" ready 180 cp_state
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: gpu-hog, namespace: default}
spec:
  nodeName: t4-0
  containers:
    - name: c
      image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04
      resources: {limits: {nvidia.com/gpu: 4}}
YAML
until_eq "the workload runs" Running 30 k get pod gpu-hog -o jsonpath='{.status.phase}'
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
rejected() {
    k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation=device-plugin,nvidia.com/gpu-operator.node=t4-0 \
        -o jsonpath='{range .items[*]}{.status.reason}{"\n"}{end}' | grep -c OutOf
}
until_eq "the validation pod is rejected" 1 60 rejected
k delete pod gpu-hog >/dev/null
chaos_fault_end
chaos_expect_image nvidia-device-plugin-daemonset nvcr.io/nvidia/k8s-device-plugin:v0.17.1
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 60 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
