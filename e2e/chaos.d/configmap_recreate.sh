#!/usr/bin/env bash
# Chaos: the ConfigMaps the cluster's GPU setup depends on deleted at once, on a ready cluster:
# the two the operator renders for the MIG manager (default-mig-parted-config,
# default-gpu-clients), which it must restore with the same data, and the user's time-slicing
# config named by devicePlugin.config.name, recreated by hand 5 s later, which the device plugin
# must read again (4 replicas per GPU) with the operator ready again.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "ConfigMaps deleted: MIG manager's (restored by the operator), time-slicing (recreated after 5 s)"
chaos_cluster fleet-gpu.yaml
slicing_cm() {
    k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: time-slicing-config, namespace: gpu-operator}
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: 4
YAML
}
slicing_cm
chaos_operator
k apply -f - >/dev/null <<'YAML'
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  mig: {strategy: mixed}
  devicePlugin:
    config: {name: time-slicing-config, default: any}
YAML
until_eq "ready before the fault" ready 180 cp_state
until_eq "time-sliced capacity" "nvidia.com/gpu=32" 60 node_gpu_resources p4d-0
chaos_expect_cmdata default-mig-parted-config
chaos_expect_cmdata default-gpu-clients
chaos_expect_cmdata time-slicing-config
uid_before=$(k get configmap -n gpu-operator default-mig-parted-config -o jsonpath='{.metadata.uid}')

k delete configmap -n gpu-operator default-mig-parted-config default-gpu-clients time-slicing-config >/dev/null
sleep 5
echo "5 s without the ConfigMaps: $(chaos_state); p4d-0: $(node_gpu_resources p4d-0)"
restored=$(k get configmap -n gpu-operator default-mig-parted-config -o jsonpath='{.metadata.uid}' --ignore-not-found)
[ -n "$restored" ] || fail "the operator did not restore default-mig-parted-config within 5 s"
[ "$restored" != "$uid_before" ] || fail "default-mig-parted-config was not deleted"
slicing_cm
chaos_fault_end
chaos_expect_res p4d-0 "nvidia.com/gpu=32"
chaos_expect_res t4-0 "nvidia.com/gpu=16"
chaos_expect_label p4d-0 nvidia.com/gpu.product NVIDIA-A100-SXM4-40GB-SHARED
chaos_expect_label t4-0 nvidia.com/gpu.product Tesla-T4-SHARED
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
