#!/usr/bin/env bash
# The vectorAdd gate of every stage holds: from a watch of every pod in the operator's namespace
# during an install (2×(8×A100-40GB), 1×(4×T4), 1 CPU node), no operand pod is bound to a node
# before the validation pod of the stage before it succeeded on that node: the toolkit after the
# driver's validation, the device plugin after the toolkit's, the MIG manager after the device
# plugin's (MIG-capable nodes), and GFD, DCGM exporter and the validator DaemonSet after the
# toolkit's. The order is the watch's, not timestamps (seconds only).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k create namespace gpu-operator >/dev/null
time_slicing_config # clusterpolicy-full.yaml's devicePlugin.config
watch_log="$E2E_DIR/pods-watch.json"
k get pods -n gpu-operator --watch --output-watch-events -o json >"$watch_log" 2>"$E2E_DIR/watch.err" &
watch_pid=$!
# The watch is open once it reports a marker pod (unschedulable: it never runs).
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: watch-marker, namespace: gpu-operator}
spec:
  nodeSelector: {e2e.example.com/no-such-node: "true"}
  containers: [{name: c, image: busybox:1.36}]
YAML
until_eq "the watch saw the marker" "yes" 30 sh -c "grep -q '\"name\":\"watch-marker\"' '$watch_log' && echo yes"
k delete pod -n gpu-operator watch-marker --wait=false >/dev/null
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-full.yaml" >/dev/null

step "the ClusterPolicy becomes ready"
until_eq "state" "ready" 180 cp_state
sleep 1 # the watch delivers the last events
kill $watch_pid 2>/dev/null || true
wait $watch_pid 2>/dev/null || true

step "no operand pod on a node before the stage before it validated there"
out=$(python3 - "$watch_log" <<'PY'
import json, sys

text = open(sys.argv[1]).read()
dec, i, events = json.JSONDecoder(), 0, []
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    ev, i = dec.raw_decode(text, i)
    events.append(ev)

STAGE = "nvidia.com/gpu-operator.validation"
# operand app label -> the stage whose validation must have succeeded on the node first
NEEDS = {
    "nvidia-container-toolkit-daemonset": "driver",
    "nvidia-device-plugin-daemonset": "container-toolkit",
    "nvidia-mig-manager": "device-plugin",
    "gpu-feature-discovery": "container-toolkit",
    "nvidia-dcgm-exporter": "container-toolkit",
    "nvidia-operator-validator": "container-toolkit",
}
validated = set()  # (node, stage) whose validation pod was seen Succeeded
first_bound = {}   # (node, app) -> index of the event that first showed the pod bound there
violations, checked = [], 0
for n, ev in enumerate(events):
    obj = ev.get("object", {})
    meta, spec = obj.get("metadata", {}), obj.get("spec", {})
    node = spec.get("nodeName")
    labels = meta.get("labels", {})
    if not node:
        continue
    if STAGE in labels:
        if obj.get("status", {}).get("phase") == "Succeeded":
            validated.add((node, labels[STAGE]))
        continue
    app = labels.get("app")
    if app not in NEEDS or (node, app) in first_bound:
        continue
    first_bound[(node, app)] = n
    checked += 1
    if (node, NEEDS[app]) not in validated:
        violations.append(f"{app} pod {meta.get('name')} on {node} (event {n}) before the "
                          f"{NEEDS[app]} validation succeeded there")
print(f"events={len(events)} operand-pods-checked={checked}")
for (node, app) in sorted(first_bound):
    print(f"bound {node} {app}")
for v in violations:
    print("VIOLATION " + v)
PY
)
echo "$out" | head -n 1
no() { case "$3" in *"$2"*) fail "$1: found [$2] in:
$3" ;; esac; }
no "violations" "VIOLATION" "$out"
# Every GPU node got every operand it must (MIG manager on the A100 nodes only), so the check
# above saw each one.
for node in p4d-0 p4d-1 t4-0; do
    for app in nvidia-container-toolkit-daemonset nvidia-device-plugin-daemonset \
        gpu-feature-discovery nvidia-dcgm-exporter nvidia-operator-validator; do
        assert_contains "$app on $node" "bound $node $app" "$out"
    done
done
assert_contains "MIG manager on p4d-0" "bound p4d-0 nvidia-mig-manager" "$out"
assert_contains "MIG manager on p4d-1" "bound p4d-1 nvidia-mig-manager" "$out"
no "no MIG manager on the T4" "bound t4-0 nvidia-mig-manager" "$out"
no "nothing on the CPU node" "bound cpu-0" "$out"
echo "PASS operator_stage_order"
