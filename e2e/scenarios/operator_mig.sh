#!/usr/bin/env bash
# MIG end to end with the operator (user flow 3): labelling a node all-balanced makes it
# reconfigure (clients paused, status says reconfiguring), then success, one MIG validation pod
# per profile, ready again with 16/8/8; all-1g.5gb gives 56; a made-up config name fails with a
# status entry and an Event saying why, clients restored and the other nodes unaffected.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=1500
install_crd
k create namespace gpu-operator >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready" "ready" 120 cp_state
cp_field() { k get clusterpolicy cluster-policy -o jsonpath="$1"; }

step "all-balanced: pending, clients paused, reconfiguring, success, MIG validation, ready"
k label nodes p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "pending" "pending" 20 node_label p4d-0 nvidia.com/mig.config.state
assert_eq "device plugin paused" "paused-for-mig-change" "$(node_label p4d-0 nvidia.com/gpu.deploy.device-plugin)"
until_eq "status says reconfiguring" "1" 20 cp_field '{.status.nodes.reconfiguring}'
assert_eq "not failed" "0" "$(cp_field '{.status.nodes.failed}')"
until_eq "success" "success" 60 node_label p4d-0 nvidia.com/mig.config.state
until_eq "ready again" "ready" 120 cp_state
assert_eq "clients restored" "true" "$(node_label p4d-0 nvidia.com/gpu.deploy.device-plugin)"
assert_eq "capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" \
    "$(node_gpu_resources p4d-0)"
mig_pods=$(k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation=mig-manager,nvidia.com/gpu-operator.node=p4d-0 \
    -o jsonpath='{range .items[*]}{.metadata.annotations.nvidia\.com/gpu-operator\.resource}={.status.phase}{"\n"}{end}' | sort)
assert_eq "one MIG validation per profile" "nvidia.com/mig-1g.5gb=Succeeded
nvidia.com/mig-2g.10gb=Succeeded
nvidia.com/mig-3g.20gb=Succeeded" "$mig_pods"
pod=$(k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation=mig-manager,nvidia.com/gpu-operator.node=p4d-0 -o jsonpath='{.items[0].metadata.name}')
assert_contains "MIG validation log" "MIG enabled: 2×1g.5gb + 2g.10gb + 3g.20gb" "$(k logs -n gpu-operator "$pod")"
assert_eq "other A100 untouched" "nvidia.com/gpu=8" "$(node_gpu_resources p4d-1)"

step "a Deployment asking for nvidia.com/mig-1g.5gb runs exactly 16 pods on the node"
k apply -f - >/dev/null <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: mig-users, namespace: default}
spec:
  replicas: 100
  selector: {matchLabels: {app: mig-users}}
  template:
    metadata: {labels: {app: mig-users}}
    spec:
      nodeSelector: {kubernetes.io/hostname: p4d-0}
      containers:
        - name: c
          image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04
          resources: {limits: {nvidia.com/mig-1g.5gb: 1}}
YAML
until_eq "16 running" "16" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -l app=mig-users --field-selector status.phase=Running -o name | wc -l"
sleep 1
assert_eq "still 16" "16" "$(k get pods -l app=mig-users --field-selector status.phase=Running -o name | wc -l)"
k delete deployment mig-users >/dev/null

step "all-1g.5gb: 56"
k label nodes p4d-0 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "pending" "pending" 20 node_label p4d-0 nvidia.com/mig.config.state
until_eq "capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 60 node_gpu_resources p4d-0
until_eq "ready again" "ready" 120 cp_state

step "a made-up config name: failed, reported with the reason, others unaffected"
k label nodes p4d-1 nvidia.com/mig.config=no-such-layout --overwrite >/dev/null
until_eq "failed" "failed" 30 node_label p4d-1 nvidia.com/mig.config.state
until_eq "status entry" "p4d-1 mig-manager failed" 30 cp_field '{.status.behind[0].node} {.status.behind[0].state} {.status.behind[0].phase}'
assert_contains "reason" 'config "no-such-layout" is not defined in ConfigMap gpu-operator/default-mig-parted-config' \
    "$(cp_field '{.status.behind[0].reason}')"
until_eq "Event" "ValidationFailed" 30 \
    k get events -A --field-selector involvedObject.name=p4d-1,reason=ValidationFailed -o jsonpath='{.items[0].reason}'
assert_eq "clients restored" "true" "$(node_label p4d-1 nvidia.com/gpu.deploy.device-plugin)"
assert_eq "other nodes still validated" "ready" "$(cp_state)"
assert_eq "p4d-0 unaffected" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" "$(node_gpu_resources p4d-0)"
echo "PASS operator_mig"
