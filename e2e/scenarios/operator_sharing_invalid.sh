#!/usr/bin/env bash
# A device-plugin sharing config the device plugin would refuse is reported before the plugin
# fails, not waited for: malformed YAML (with line and column), replicas 0 and -1 (the plugin
# wants >= 2), a node label nvidia.com/device-plugin.config naming a key the ConfigMap lacks and
# a spec.devicePlugin.config.name naming a missing ConfigMap each give the node a status entry
# (phase failed, state device-plugin, the ConfigMap, the key and the error), a Warning Event
# InvalidSharingConfig on the node and on the ClusterPolicy, the SharingConfigValid condition
# False and gpu_operator_node_config_errors{config="sharing"}. Fixing the config (relabelling,
# editing the key, creating the ConfigMap) brings the node back to ready without a restart.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

# cfg SHARING REPLICAS [INDENT]: a device-plugin config sharing nvidia.com/gpu; INDENT (default 6)
# is the column of "replicas", 5 making it malformed YAML.
cfg() {
    printf 'version: v1\nsharing:\n  %s:\n    resources:\n    - name: nvidia.com/gpu\n%*sreplicas: %s\n' \
        "$1" "${3:-6}" "" "$2"
}

# Three T4 nodes; the team node's taint is not what this scenario is about.
cluster_up --fleet "$E2E_ROOT/testdata/fleet-taints.yaml"
k taint node team-0 dedicated- >/dev/null
install_crd
k create namespace gpu-operator >/dev/null
k create configmap -n gpu-operator sharing-config --from-literal=good="$(cfg timeSlicing 2)" \
    --from-literal=bad-yaml="$(cfg timeSlicing 2 5)" --from-literal=zero="$(cfg timeSlicing 0)" \
    --from-literal=negative="$(cfg mps -1)" >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"devicePlugin":{"config":{"name":"sharing-config"}}}}' >/dev/null

entry() { # NODE: "phase state reason" of the node's status entry
    k get clusterpolicy cluster-policy -o json | python3 -c '
import json,sys
for b in json.load(sys.stdin)["status"].get("behind", []):
    if b["node"] == sys.argv[1]: print(b["phase"], b["state"], b["reason"])' "$1"
}
phase_of() { entry "$1" | cut -d' ' -f1-2; }
cond() { k get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"SharingConfigValid\")].$1}"; }
events() { # OBJECT: Warning Events about it, "reason: message" per line
    k get events -A --field-selector "involvedObject.name=$1,type=Warning" \
        -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}'
}
sharing_errors() { metric 'gpu_operator_node_config_errors{config="sharing"}'; }

step "unlabelled nodes (no key, no default) keep plain GPUs: ready, condition True, metric 0"
until_eq "state" "ready" 120 cp_state
assert_eq "condition" "True" "$(cond status)"
assert_eq "metric" "0" "$(sharing_errors)"

# expect_invalid NODE WHAT NEEDLE...: the node is reported with every NEEDLE in its entry, the
# Events, the condition and the metric.
expect_invalid() {
    local node=$1 what=$2; shift 2
    until_eq "$what: $node failed at the device plugin" "failed device-plugin" 60 phase_of "$node"
    local e n
    e=$(entry "$node")
    for n in "$@"; do assert_contains "$what: status entry" "$n" "$e"; done
    assert_contains "$what: names the ConfigMap" "gpu-operator/$CM" "$e"
    until_eq "$what: condition" "False" 30 cond status
    assert_eq "$what: condition reason" "InvalidSharingConfig" "$(cond reason)"
    assert_contains "$what: condition message" "$1" "$(cond message)"
    until_eq "$what: metric" "${NBAD:-1}" 30 sharing_errors
    local ev
    for _ in $(seq 1 50); do
        ev=$(events "$node")
        case "$ev" in *"InvalidSharingConfig: "*"$1"*) break ;; esac
        sleep 0.2
    done
    assert_contains "$what: Warning Event on the node" "InvalidSharingConfig: " "$ev"
    assert_contains "$what: node Event message" "$1" "$ev"
    ev=$(events cluster-policy)
    assert_contains "$what: Warning Event on the ClusterPolicy" "InvalidSharingConfig: node $node: " "$ev"
    assert_contains "$what: policy Event message" "$1" "$ev"
}
CM=sharing-config

step "malformed YAML: the key, line and column"
k label node plain-0 nvidia.com/device-plugin.config=bad-yaml >/dev/null
expect_invalid plain-0 "malformed YAML" 'key "bad-yaml"' "line 6 column"

step "replicas 0: NVIDIA's message"
k label --overwrite node plain-0 nvidia.com/device-plugin.config=zero >/dev/null
expect_invalid plain-0 "replicas 0" 'key "zero"' \
    "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2 (got 0)"

step "replicas -1 (MPS)"
k label --overwrite node plain-0 nvidia.com/device-plugin.config=negative >/dev/null
expect_invalid plain-0 "replicas -1" 'key "negative"' \
    "sharing.mps.resources[0].replicas: number of replicas must be >= 2 (got -1)"
assert_eq "the other nodes are unaffected" "" "$(entry gputaint-0)"

step "a label naming a key the ConfigMap lacks"
k label --overwrite node plain-0 nvidia.com/device-plugin.config=missing-key >/dev/null
expect_invalid plain-0 "missing key" 'has no key "missing-key"' \
    "named by the node label nvidia.com/device-plugin.config" "keys: bad-yaml, good, negative, zero"
assert_eq "one Event per change, not per reconcile" "1" \
    "$(events plain-0 | grep -c 'missing-key')"

step "fixing the config: the key is added, the node recovers"
k patch configmap -n gpu-operator sharing-config --type merge -p "$(python3 -c '
import json, sys
print(json.dumps({"data": {"missing-key": sys.argv[1]}}))' "$(cfg timeSlicing 4)")" >/dev/null
until_eq "plain-0 recovers" "" 90 entry plain-0
until_eq "state" "ready" 90 cp_state
assert_eq "condition True again" "True" "$(cond status)"
assert_eq "metric 0 again" "0" "$(sharing_errors)"
until_eq "plain-0 shares its GPU" "4" 60 node_res plain-0 allocatable nvidia.com/gpu

step "a ConfigMap that does not exist: every GPU node reported the same way"
k label node plain-0 nvidia.com/device-plugin.config- >/dev/null
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"devicePlugin":{"config":{"name":"absent-config","default":"good"}}}}' >/dev/null
CM=absent-config NBAD=3 expect_invalid gputaint-0 "missing ConfigMap" \
    "ConfigMap gpu-operator/absent-config (spec.devicePlugin.config.name) not found"
for n in plain-0 team-0; do
    assert_contains "$n reported too" "absent-config" "$(entry "$n")"
done
metrics_parse gpu_operator_node_config_errors:gauge:config >"$E2E_DIR/promcheck.out" ||
    fail "/metrics: $(tail -1 "$E2E_DIR/promcheck.out")"

step "creating it: every node recovers to ready"
k create configmap -n gpu-operator absent-config --from-literal=good="$(cfg timeSlicing 2)" >/dev/null
until_eq "state" "ready" 120 cp_state
assert_eq "condition True" "True" "$(cond status)"
assert_eq "metric 0" "0" "$(sharing_errors)"
echo "PASS operator_sharing_invalid"
