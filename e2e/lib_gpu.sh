#!/usr/bin/env bash
# Helpers for scenarios on a simulated GPU fleet (kubesim + nodesim): NVIDIA's node components
# placed by hand, node labels and capacity reads, and nodesim's fault command.
# Source after e2e/lib.sh.

NODESIM="${NODESIM_BIN:-$BUILD_DIR/nodesim}"

# place_operands STRATEGY [WITH_REBOOT]: the by-hand DaemonSets and the default mig-parted config.
place_operands() {
    local strategy=$1 reboot=${2:-false}
    sed -e "s/__MIG_STRATEGY__/$strategy/" -e "s/__WITH_REBOOT__/$reboot/" \
        "$E2E_ROOT/testdata/operands/by-hand.yaml" | k apply -f - >/dev/null
    "$NODESIM" default-mig-config >"$E2E_DIR/mig-parted-config.yaml"
    k create configmap default-mig-parted-config -n gpu-operator \
        --from-file=config.yaml="$E2E_DIR/mig-parted-config.yaml" >/dev/null
}

# deploy_on NODE [mig]: the deploy labels an operator would set on a GPU node.
deploy_on() {
    local node=$1
    k label node "$node" nvidia.com/gpu.deploy.driver=true \
        nvidia.com/gpu.deploy.container-toolkit=true nvidia.com/gpu.deploy.device-plugin=true \
        nvidia.com/gpu.deploy.gpu-feature-discovery=true --overwrite >/dev/null
    if [ "${2:-}" = mig ]; then
        k label node "$node" nvidia.com/gpu.deploy.mig-manager=true --overwrite >/dev/null
    fi
}

# node_label NODE KEY: the label's value ("" when absent).
node_label() {
    k get node "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get("labels",{}).get(sys.argv[1],""))' "$2"
}
# node_labels NODE KEY...: the labels' values from one read of the node, joined with "|".
node_labels() {
    k get node "$1" -o json | python3 -c 'import json,sys; l=json.load(sys.stdin)["metadata"].get("labels",{}); print("|".join(l.get(k,"") for k in sys.argv[1:]))' "${@:2}"
}
# node_res NODE FIELD RESOURCE: status.capacity / status.allocatable entry ("" when absent).
node_res() {
    k get node "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"].get(sys.argv[1],{}).get(sys.argv[2],""))' "$2" "$3"
}
# node_gpu_resources NODE: "name=count" of every nvidia.com/ capacity entry, sorted, one line.
node_gpu_resources() {
    k get node "$1" -o json | python3 -c '
import json,sys
c=json.load(sys.stdin)["status"].get("capacity",{})
print(" ".join("%s=%s" % (k,c[k]) for k in sorted(c) if k.startswith("nvidia.com/")))'
}

# fault NODE SPEC: nodesim's fault command ("none" clears).
fault() { "$NODESIM" fault --kubeconfig "$KUBECONFIG_E2E" "$1" "$2" >/dev/null; }

# validation_pod NAME NODE MODE [RESOURCE]: a run-to-completion validator pod pinned to NODE.
validation_pod() {
    local name=$1 node=$2 mode=$3 res=${4:-}
    local limits=""
    [ -z "$res" ] || limits="      resources: {limits: {\"$res\": 1}}"
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: gpu-operator, labels: {app: nvidia-cuda-validator}}
spec:
  nodeName: $node
  restartPolicy: Never
  containers:
    - name: cuda-validation
      image: ghcr.io/gpu-operator/gpu-operator-validator:dev
      args: ["--mode", "$mode"]
$limits
YAML
}

pod_phase() { k get pod -n gpu-operator "$1" -o jsonpath='{.status.phase}'; }
# sim_answers POD KEY: what nodesim answered kubesim's kubelet about pod POD in gpu-operator
# (KEY nodesim.io/init or nodesim.io/probes), as compact JSON with sorted keys, "null" if nothing.
sim_answers() {
    k get --raw "/kubesim/v1/answers/namespaces/gpu-operator/pods/$1" | jq -cS --arg k "$2" '.answers[$k]'
}

# second_policy_ignored: creates a second ClusterPolicy ("second", empty spec) and waits until the
# operator marks it ignored.
second_policy_ignored() {
    printf 'apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: second}\nspec: {}\n' |
        k apply -f - >/dev/null
    until_eq "second ignored" "ignored" 30 k get clusterpolicy second -o jsonpath='{.status.state}'
}
