#!/usr/bin/env bash
# The image pre-pull, with kubesim's pull model on (400 MB/s, 20 ms per pull, one pull at a time
# per node: the kubelet's default): on every GPU node a nvidia-image-prepull pod asks for the
# images of the operands that come after the driver while the driver starts, and runs none of
# them (gpu-operator-hold in each); once the node's last operand is deployed the operator removes
# its nvidia.com/gpu.deploy.image-prepull label and the pod goes. --image-prepull=false removes
# the DaemonSet. (operator_stage_order checks that the vectorAdd gates hold; bench/run measures
# what the pre-pull saves.)
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "image pulls are kubesim's kubelet's"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" -- --pull-mbps 400 --pull-latency-ms 20
install_crd
k create namespace gpu-operator >/dev/null
time_slicing_config # clusterpolicy-full.yaml's devicePlugin.config
pods_log="$E2E_DIR/pods-watch.json"
k get pods -n gpu-operator -l app=nvidia-image-prepull --watch --output-watch-events -o json \
    >"$pods_log" 2>"$E2E_DIR/watch.err" &
watch_pid=$!
sleep 1 # the watch is open before the operator starts (it reports nothing before)
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-full.yaml" >/dev/null

step "the ClusterPolicy becomes ready"
until_eq "state" "ready" 180 cp_state

step "no pre-pull pod and no pre-pull label is left"
until_eq "pre-pull pods" "" 30 k get pods -n gpu-operator -l app=nvidia-image-prepull -o name
assert_eq "labelled nodes" "" "$(k get nodes -l nvidia.com/gpu.deploy.image-prepull -o name)"
assert_eq "the DaemonSet stays (for nodes to come)" "daemonset.apps/nvidia-image-prepull" \
    "$(k get ds -n gpu-operator nvidia-image-prepull -o name)"
sleep 1 # the watch delivers the last events
kill $watch_pid 2>/dev/null || true
wait $watch_pid 2>/dev/null || true

step "each GPU node's pre-pull pod asked for every later operand's image, ran with the hold program"
imgs=$(k get ds -n gpu-operator nvidia-image-prepull \
    -o jsonpath='{range .spec.template.spec.containers[*]}{.image}{"\n"}{end}')
for want in container-toolkit k8s-device-plugin dcgm-exporter k8s-mig-manager gpu-operator-validator; do
    assert_contains "pre-pull of $want" "$want" "$imgs"
done
no() { case "$3" in *"$2"*) fail "$1: found [$2] in:
$3" ;; esac; }
no "the driver pulls its own image" "/driver:" "$imgs"
k get events -n gpu-operator -o json >"$E2E_DIR/events.json"
out=$(python3 - "$pods_log" "$E2E_DIR/events.json" "$imgs" <<'PY'
import json, sys

text = open(sys.argv[1]).read()
dec, i, nodes = json.JSONDecoder(), 0, {}
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    ev, i = dec.raw_decode(text, i)
    obj = ev.get("object", {})
    if obj.get("spec", {}).get("nodeName"):
        nodes[obj["metadata"]["name"]] = obj["spec"]["nodeName"]
images = [l for l in sys.argv[3].splitlines() if l]
asked = {}
for e in json.load(open(sys.argv[2]))["items"]:
    o = e.get("involvedObject", {})
    msg = e.get("message", "")
    if e.get("reason") != "Pulling" or o.get("name") not in nodes:
        continue
    img = msg.split('"')[1] if '"' in msg else ""
    asked.setdefault(nodes[o["name"]], set()).add(img)
for node in sorted(set(nodes.values())):
    missing = [im for im in images if im not in asked.get(node, set())]
    print(f"node {node} pods={sum(1 for v in nodes.values() if v == node)} "
          f"asked={len(asked.get(node, ()))} missing={missing}")
PY
)
echo "$out"
for node in p4d-0 p4d-1 t4-0; do
    assert_contains "$node's pre-pull pod asked for every image" "node $node pods=1 " "$out"
    case "$out" in *"node $node "*"missing=[]"*) ;; *) fail "$node: an image was not asked for:
$out" ;; esac
done
no "no pre-pull pod on the CPU node" "node cpu-0" "$out"

step "--image-prepull=false: the DaemonSet goes"
operator_stop
operator_start --image-prepull=false
until_eq "DaemonSet gone" "" 60 k get ds -n gpu-operator -l app=nvidia-image-prepull -o name
assert_eq "state" "ready" "$(cp_state)"
echo "PASS operator_image_prepull"
