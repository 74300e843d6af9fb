#!/usr/bin/env bash
# MIG end to end with the operator (user flow 3): labelling a node all-balanced makes it
# reconfigure (clients paused, status says reconfiguring), then success, one MIG validation pod
# per profile, ready again with 16/8/8; all-1g.5gb gives 56; a made-up config name fails with a
# status entry and an Event saying why, clients restored and the other nodes unaffected. The
# operator judges each config as mig-parted applies it and says why it cannot work: a profile of
# another GPU model, a config without an entry for the node's GPUs (mig-parted reports success
# and changes nothing), a MIG label on a GPU without MIG or with the MIG manager disabled; and a
# relabelled failed node gets no failure Event for a config that then succeeds.
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
until_eq "Event" "MIGConfigFailed" 30 \
    k get events -A --field-selector involvedObject.name=p4d-1,reason=MIGConfigFailed -o jsonpath='{.items[0].reason}'
assert_eq "clients restored" "true" "$(node_label p4d-1 nvidia.com/gpu.deploy.device-plugin)"
assert_eq "other nodes still validated" "ready" "$(cp_state)"
assert_eq "p4d-0 unaffected" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" "$(node_gpu_resources p4d-0)"

# node_reason NODE: the reason of NODE's status entry ("" when it has none).
node_reason() {
    k get clusterpolicy cluster-policy -o json | python3 -c '
import json, sys
for b in json.load(sys.stdin)["status"].get("behind", []):
    if b["node"] == sys.argv[1]: print(b["reason"])' "$1"
}
# warnings NODE TEXT: the Warning Events on NODE whose message holds TEXT, one a line.
warnings() {
    k get events -A --field-selector "involvedObject.name=$1,type=Warning" \
        -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' | grep -F -- "$2" || true
}

step "the failed node relabelled to a config that works: no failure Event for it"
k label nodes p4d-1 nvidia.com/mig.config=all-disabled --overwrite >/dev/null
until_eq "success" "success" 60 node_label p4d-1 nvidia.com/mig.config.state
until_eq "p4d-1 validated again" "" 60 node_reason p4d-1
assert_eq "no Warning about all-disabled" "" "$(warnings p4d-1 all-disabled)"

step "a config for another GPU model: failed, saying the profile is not on this GPU"
k label nodes p4d-1 nvidia.com/mig.config=all-7g.80gb --overwrite >/dev/null
until_eq "failed" "failed" 30 node_label p4d-1 nvidia.com/mig.config.state
until_contains() { # until_contains WHAT TEXT TIMEOUT CMD...
    local what=$1 text=$2 t=$3
    shift 3
    local end=$((SECONDS + t)) out=""
    while [ $SECONDS -lt $end ]; do
        out=$("$@" 2>/dev/null || true)
        case "$out" in *"$text"*) return 0 ;; esac
        sleep 0.3
    done
    fail "$what: never contained [$text]; last [$out]"
}
until_contains "reason" 'cannot be applied to this node'"'"'s A100-SXM4-40GB GPUs: mig-configs.all-7g.80gb: GPU 0: error setting MIGConfig: error attempting multiple config orderings: MIG profile "7g.80gb" not found on this GPU' 30 node_reason p4d-1
until_contains "node Event" 'MIGConfigFailed: MIG config "all-7g.80gb"' 30 warnings p4d-1 all-7g.80gb
until_contains "policy Event" 'node p4d-1: MIG config "all-7g.80gb"' 30 warnings cluster-policy all-7g.80gb

step "a config without an entry for the node's GPUs: mig-parted says success, the status says why"
k label nodes p4d-1 nvidia.com/mig.config=all-1g.35gb --overwrite >/dev/null
until_eq "success" "success" 60 node_label p4d-1 nvidia.com/mig.config.state
until_contains "reason" 'MIG config "all-1g.35gb" (ConfigMap gpu-operator/default-mig-parted-config) has no entry for this node'"'"'s GPUs (A100-SXM4-40GB, device id 0x20B010DE): the MIG manager applies nothing to them and reports success' 30 node_reason p4d-1
until_contains "node Event" 'MIGConfigFailed: MIG config "all-1g.35gb"' 30 warnings p4d-1 all-1g.35gb
mig_cond() { k get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"MIGConfigValid\")].$1}"; }
mig_cond_sr() { echo "$(mig_cond status) $(mig_cond reason)"; }
until_eq "condition" "False InvalidMIGConfig" 30 mig_cond_sr
assert_contains "condition message" 'p4d-1: MIG config "all-1g.35gb"' "$(mig_cond message)"
until_eq "metric" "1" 30 metric 'gpu_operator_node_config_errors{config="mig"}'
metrics_parse gpu_operator_node_config_errors:gauge:config
until_eq "the policy is ready (a MIG failure holds no other node back)" "ready" 60 cp_state
assert_eq "the status counts it failed" "1" "$(cp_field '{.status.nodes.failed}')"

step "a MIG label on GPUs without MIG (T4): said, not silently ignored"
k label nodes t4-0 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_contains "reason" 'nvidia.com/mig.config=all-1g.5gb is set, but this node'"'"'s GPUs (Tesla-T4) cannot do MIG (nvidia.com/mig.capable=false): the label has no effect; remove it' 30 node_reason t4-0
until_contains "node Event" 'MIGConfigFailed: nvidia.com/mig.config=all-1g.5gb is set' 30 warnings t4-0 all-1g.5gb
assert_eq "t4-0's GPUs still validated and advertised" "nvidia.com/gpu=4" "$(node_gpu_resources t4-0)"
k label nodes t4-0 nvidia.com/mig.config- >/dev/null
until_eq "label removed: no entry" "" 30 node_reason t4-0

# (p4d-0's all-1g.5gb must stay defined: a config the node asks for and the new ConfigMap lacks
# is a failure of its own.)
step "the user's own MIG ConfigMap: a layout NVML cannot place is refused with the slice arithmetic"
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: custom-mig-config, namespace: gpu-operator}
data:
  config.yaml: |
    version: v1
    mig-configs:
      all-disabled:
        - devices: all
          mig-enabled: false
      all-1g.5gb:
        - devices: all
          mig-enabled: true
          mig-devices: {"1g.5gb": 7}
      too-big:
        - devices: all
          mig-enabled: true
          mig-devices: {"3g.20gb": 2, "1g.5gb": 1}
YAML
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"migManager":{"config":{"name":"custom-mig-config"}}}}' >/dev/null
k label nodes p4d-1 nvidia.com/mig.config=too-big --overwrite >/dev/null
until_contains "reason" 'MIG config "too-big" (ConfigMap gpu-operator/custom-mig-config) cannot be placed on this node'"'"'s A100-SXM4-40GB GPUs: 1g.5gb + 2×3g.20gb needs 9 of 8 memory slices and 7 of 7 compute slices (1g.5gb: 1 compute, 1 memory; 3g.20gb: 3 compute, 4 memory); mig-parted fails it with Insufficient Resources' 60 node_reason p4d-1
until_eq "the MIG manager fails it too" "failed" 60 node_label p4d-1 nvidia.com/mig.config.state
until_contains "node Event" 'MIGConfigFailed: MIG config "too-big"' 30 warnings p4d-1 too-big
step "the ConfigMap fixed: the node recovers without a restart"
k patch configmap -n gpu-operator custom-mig-config --type merge -p '{"data":{"config.yaml":"version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n  all-1g.5gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.5gb\": 7}\n  too-big:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"3g.20gb\": 2}\n"}}' >/dev/null
k label nodes p4d-1 nvidia.com/mig.config=all-disabled --overwrite >/dev/null
k label nodes p4d-1 nvidia.com/mig.config=too-big --overwrite >/dev/null
until_eq "success" "success" 60 node_label p4d-1 nvidia.com/mig.config.state
until_eq "p4d-1 validated" "" 60 node_reason p4d-1
until_eq "condition True again" "True Valid" 30 mig_cond_sr
assert_eq "metric 0" "0" "$(metric 'gpu_operator_node_config_errors{config="mig"}')"
until_eq "16 × 3g.20gb" "nvidia.com/gpu=0 nvidia.com/mig-3g.20gb=16" 60 node_gpu_resources p4d-1

step "a MIG label while the MIG manager is disabled: said"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"migManager":{"enabled":false}}}' >/dev/null
until_contains "reason" 'nvidia.com/mig.config=all-1g.5gb is set, but the MIG manager is disabled (ClusterPolicy spec.migManager.enabled=false): nothing applies it' 60 node_reason p4d-0
until_contains "node Event" 'MIGConfigFailed: nvidia.com/mig.config=all-1g.5gb is set, but the MIG manager is disabled' 30 warnings p4d-0 disabled
echo "PASS operator_mig"
