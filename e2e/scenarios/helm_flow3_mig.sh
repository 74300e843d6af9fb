#!/usr/bin/env bash
# User flow 3 from a helm install of the chart: label a node all-1g.5gb (pending … success, 56
# mig-1g.5gb, no whole GPU), then all-balanced (16/8/8) with clients paused meanwhile; a
# Deployment asking for nvidia.com/mig-1g.5gb scaled to 100 runs exactly 16 pods there; the MIG
# manager's ConfigMap is there to describe; a bad config name ends failed with an Event, clients
# restored.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=2000
chart_install_ready --set mig.strategy=mixed
NODE=p4d-0

step "kubectl label nodes \$NODE nvidia.com/mig.config=all-1g.5gb --overwrite"
k label nodes "$NODE" nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "pending" "pending" 20 node_label "$NODE" nvidia.com/mig.config.state
assert_eq "clients paused" "paused-for-mig-change" "$(node_label "$NODE" nvidia.com/gpu.deploy.device-plugin)"
out=$(k get node "$NODE" -L nvidia.com/mig.config.state)
assert_contains "the -L column" "MIG.CONFIG.STATE" "$out"
until_eq "success" "success" 60 node_label "$NODE" nvidia.com/mig.config.state
until_eq "describe node: 56 mig-1g.5gb, no whole GPU" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 60 node_gpu_resources "$NODE"
assert_contains "kubectl describe node" "nvidia.com/mig-1g.5gb:  56" "$(k describe node "$NODE")"
assert_eq "clients back" "true" "$(node_label "$NODE" nvidia.com/gpu.deploy.device-plugin)"

step "all-balanced: 16/8/8"
k label nodes "$NODE" nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" \
    60 node_gpu_resources "$NODE"
until_eq "ready again" "ready" 120 cp_state
desc=$(k describe configmaps default-mig-parted-config -n gpu-operator)
assert_contains "the MIG configs" "all-balanced:" "$desc"

step "a Deployment of 100 replicas asking for nvidia.com/mig-1g.5gb: 16 run on the node"
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: mig-users, namespace: default}
spec:
  replicas: 100
  selector: {matchLabels: {app: mig-users}}
  template:
    metadata: {labels: {app: mig-users}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $NODE}
      containers:
        - name: c
          image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04
          resources: {limits: {nvidia.com/mig-1g.5gb: 1}}
YAML
until_eq "16 running" "16" 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -l app=mig-users --field-selector status.phase=Running -o name | wc -l"
k delete deployment mig-users >/dev/null

step "a bad config name: failed, an Event saying why, clients restored"
k label nodes "$NODE" nvidia.com/mig.config=all-3g.40gb-typo --overwrite >/dev/null
until_eq "failed" "failed" 30 node_label "$NODE" nvidia.com/mig.config.state
until_eq "Event" "yes" 30 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get events -A --field-selector involvedObject.name=$NODE,reason=MIGConfigFailed -o jsonpath='{.items[*].message}' | grep -q 'not defined in ConfigMap' && echo yes"
assert_eq "clients restored" "true" "$(node_label "$NODE" nvidia.com/gpu.deploy.device-plugin)"
echo "PASS helm_flow3_mig"
