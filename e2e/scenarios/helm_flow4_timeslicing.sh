#!/usr/bin/env bash
# User flow 4 with the Helm chart: a time-slicing ConfigMap created with kubectl and named with
# --set devicePlugin.config.name, one key per node type and no default: the 4×T4 node labelled
# nvidia.com/device-plugin.config=tesla-t4 shows gpu.count=4, Tesla-T4-SHARED, replicas 4 and 16
# nvidia.com/gpu, the unlabelled A100 nodes keep 8 whole GPUs and the policy is ready. Then the
# chart creates the ConfigMap itself (devicePlugin.config.create/data, two keys and a default): a
# helm upgrade moves the nodes to it, and a node's nvidia.com/device-plugin.config label picks
# the other key.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml"

step "kubectl create a per-node time-slicing ConfigMap (no default key), helm install naming it"
# NVIDIA's per-node recipe: one key per GPU model, nodes opt in with the
# nvidia.com/device-plugin.config label; nodes without it keep whole GPUs (the operator runs the
# config manager with FALLBACK_STRATEGIES=empty).
cat >"$E2E_DIR/time-slicing-config.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
data:
  a100-40gb: |-
    version: v1
    sharing:
      timeSlicing:
        renameByDefault: false
        resources:
          - name: nvidia.com/gpu
            replicas: 2
  tesla-t4: |-
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
YAML
k create namespace gpu-operator >/dev/null
k create -n gpu-operator -f "$E2E_DIR/time-slicing-config.yaml" >/dev/null
k label node t4-0 nvidia.com/device-plugin.config=tesla-t4 >/dev/null
h install gpu-operator charts/gpu-operator -n gpu-operator \
  --set devicePlugin.config.name=time-slicing-config "${PORT_FLAGS[@]}" >/dev/null
assert_eq "policy names the ConfigMap" "time-slicing-config" \
    "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.devicePlugin.config.name}')"
assert_eq "no default in the policy" "" \
    "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.devicePlugin.config.default}')"
until_eq "the config manager falls back to no config" "empty" 60 \
    k get ds -n gpu-operator nvidia-device-plugin-daemonset --ignore-not-found \
    -o jsonpath='{.spec.template.spec.containers[?(@.name=="config-manager")].env[?(@.name=="FALLBACK_STRATEGIES")].value}'

step "kubectl describe node t4-0 (labelled tesla-t4): count 4, Tesla-T4-SHARED, replicas 4, capacity 16"
until_eq "T4 capacity" "16" 60 node_res t4-0 capacity nvidia.com/gpu
# The labels come from GPU feature discovery, the capacity from the device plugin: two components
# with no order between them, so the labels are waited for too.
until_eq "T4 replicas label" "4" 30 node_label t4-0 nvidia.com/gpu.replicas
d=$(k describe node t4-0)
assert_contains "gpu.count" "nvidia.com/gpu.count=4" "$d"
assert_contains "product" "nvidia.com/gpu.product=Tesla-T4-SHARED" "$d"
assert_contains "replicas" "nvidia.com/gpu.replicas=4" "$d"
assert_eq "T4 allocatable" "16" "$(node_res t4-0 allocatable nvidia.com/gpu)"

step "unlabelled A100 nodes keep their whole GPUs; the policy is ready"
for n in p4d-0 p4d-1; do
    until_eq "$n capacity" "8" 60 node_res "$n" capacity nvidia.com/gpu
    until_eq "$n product" "NVIDIA-A100-SXM4-40GB" 30 node_label "$n" nvidia.com/gpu.product
done
until_eq "ClusterPolicy ready" "ready" 90 cp_state
k label node p4d-0 nvidia.com/device-plugin.config=a100-40gb >/dev/null
until_eq "p4d-0 on its key" "16" 60 node_res p4d-0 capacity nvidia.com/gpu
until_eq "p4d-0 product" "NVIDIA-A100-SXM4-40GB-SHARED" 30 node_label p4d-0 nvidia.com/gpu.product
assert_eq "p4d-1 still whole" "8" "$(node_res p4d-1 capacity nvidia.com/gpu)"
k label node p4d-0 t4-0 nvidia.com/device-plugin.config- >/dev/null
until_eq "T4 back to whole GPUs" "4" 60 node_res t4-0 capacity nvidia.com/gpu

step "devicePlugin.config.create/data: the chart's own ConfigMap, a default key and a per-node key"
cat >"$E2E_DIR/values-ts.yaml" <<'YAML'
devicePlugin:
  config:
    name: chart-time-slicing
    default: two
    create: true
    data:
      two: |-
        version: v1
        sharing:
          timeSlicing:
            resources:
              - name: nvidia.com/gpu
                replicas: 2
      eight: |-
        version: v1
        sharing:
          timeSlicing:
            resources:
              - name: nvidia.com/gpu
                replicas: 8
YAML
h upgrade gpu-operator charts/gpu-operator -n gpu-operator -f "$E2E_DIR/values-ts.yaml" "${PORT_FLAGS[@]}" >/dev/null
assert_eq "ConfigMap from the chart" "Helm" \
    "$(k get configmap chart-time-slicing -n gpu-operator -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')"
assert_contains "its keys" "replicas: 8" "$(k get configmap chart-time-slicing -n gpu-operator -o jsonpath='{.data.eight}')"
until_eq "T4 on the default key" "8" 60 node_res t4-0 capacity nvidia.com/gpu
until_eq "T4 replicas label" "2" 30 node_label t4-0 nvidia.com/gpu.replicas
k label node t4-0 nvidia.com/device-plugin.config=eight >/dev/null
until_eq "T4 on its own key" "32" 60 node_res t4-0 capacity nvidia.com/gpu
assert_eq "A100 stays on the default" "16" "$(node_res p4d-0 capacity nvidia.com/gpu)"

step "create without data is refused with a message"
out=$(assert_fails "create without data" h upgrade gpu-operator charts/gpu-operator -n gpu-operator \
    --set devicePlugin.config.create=true --set devicePlugin.config.name=x "${PORT_FLAGS[@]}")
assert_contains "message" "devicePlugin.config.create=true needs devicePlugin.config.data" "$out"
echo "PASS helm_flow4_timeslicing"
