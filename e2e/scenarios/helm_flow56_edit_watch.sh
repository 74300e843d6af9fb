#!/usr/bin/env bash
# User flows 5 and 6 from a helm install of the chart: kubectl patch of the ClusterPolicy turns a
# component off (its DaemonSet goes), rolls a version, changes mig.strategy (what the device
# plugin advertises follows), refuses an invalid value; kubectl get clusterpolicy -w shows the
# state move, describe shows per-state conditions and Events, /metrics answers, the operator's
# log says what it did.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml"
h install gpu-operator charts/gpu-operator -n gpu-operator --create-namespace \
    "${PORT_FLAGS[@]}" --wait --timeout 90s >/dev/null

step "kubectl get clusterpolicy -w sees notReady then ready"
timeout 90 kubectl --kubeconfig "$KUBECONFIG_E2E" get clusterpolicy -w >"$E2E_DIR/watch.txt" 2>&1 &
wpid=$!
until_eq "ready" "ready" 120 cp_state
sleep 1
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
w=$(cat "$E2E_DIR/watch.txt")
assert_contains "watch header" "STATUS" "$w"
assert_contains "watch shows ready" "ready" "$w"

step "kubectl patch: dcgmExporter off, devicePlugin.version, mig.strategy"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
until_eq "DaemonSet gone" "" 30 k get ds -n gpu-operator nvidia-dcgm-exporter -o name --ignore-not-found
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
until_eq "rolled" "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" 30 \
    k get ds -n gpu-operator nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}'
k label nodes p4d-0 nvidia.com/mig.config=all-1g.5gb --overwrite >/dev/null
until_eq "single strategy: MIG devices are nvidia.com/gpu" "nvidia.com/gpu=56" 90 node_gpu_resources p4d-0
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"mixed"}}}' >/dev/null
until_eq "mixed: nvidia.com/mig-1g.5gb" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=56" 90 node_gpu_resources p4d-0
out=$(assert_fails "invalid strategy" k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"some"}}}')
assert_contains "refused by the CRD" 'Unsupported value: "some"' "$out"
until_eq "ready after the edits" "ready" 120 cp_state

step "kubectl describe clusterpolicy: per-state conditions and Events; metrics; logs"
d=$(k describe clusterpolicy cluster-policy)
for c in state-driver state-device-plugin Ready; do assert_contains "condition $c" "$c" "$d"; done
assert_contains "Events section" "Events:" "$d"
pod=$(k get pods -n gpu-operator -l app=gpu-operator -o jsonpath='{.items[0].metadata.name}')
oplog=$(k logs -n gpu-operator "$pod")
assert_contains "operator log says what it did" "updated" "$oplog"
# NVIDIA's default operator.logging (develMode false) gives JSON lines, as zap's production
# encoder does: every line one object with ts, level and msg.
python3 -c '
import json, sys
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
assert lines, "no log lines"
for l in lines:
    o = json.loads(l)
    assert isinstance(o.get("ts"), (int, float)) and o.get("level") and "msg" in o, l
print(len(lines), "JSON log lines")' <<<"$oplog" || fail "the operator log is not JSON lines (operator.logging.develMode=false)"
assert_contains "metrics" "gpu_operator_reconciliation_status 1" "$(curl -sf "http://127.0.0.1:$METRICS_PORT/metrics")"
echo "PASS helm_flow56_edit_watch"
