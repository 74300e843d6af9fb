#!/usr/bin/env bash
# The operator end to end on kubesim + nodesim: 2×(8×A100-40GB), 1×(4×T4), 1 CPU node. The CRD and
# a ClusterPolicy using every spec section bring the policy to ready; the CPU node gets nothing;
# every GPU node shows a Succeeded validation pod per state whose log ends with Test PASSED; the
# device plugin's capacity is there; a reconcile that finds nothing to change writes nothing.
# The install emits no Warning Event (the driver pod is Ready only once its startupProbe saw the
# driver loaded, so no validation runs early), and NVIDIA's documented smoke test (the CUDA
# vectorAdd sample requesting one GPU) runs to completion. The Prometheus Operator's CRD is
# installed: the ServiceMonitors the ClusterPolicy asks for are created (without it the status and
# a Warning Event would say they are not).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k apply -f "$E2E_ROOT/testdata/servicemonitor-crd.yaml" >/dev/null
crd_established servicemonitors.monitoring.coreos.com
k create namespace gpu-operator >/dev/null
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
operator_start
k apply -f "$E2E_ROOT/testdata/clusterpolicy-full.yaml" >/dev/null

step "the ClusterPolicy becomes ready"
until_eq "state" "ready" 180 cp_state
out=$(k get clusterpolicy)
assert_contains "printer columns" "STATUS" "$out"
assert_contains "ready row" "ready" "$out"
assert_eq "finalizer" "nvidia.com/gpu-operator" \
    "$(k get clusterpolicy cluster-policy -o jsonpath='{.metadata.finalizers[0]}')"
assert_eq "gpu nodes in status" "3" "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.gpu}')"
assert_eq "ready nodes in status" "3" "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.ready}')"

warning_events() {
    k get events -A --field-selector type=Warning \
        -o jsonpath='{range .items[*]}{.involvedObject.kind}/{.involvedObject.name}: {.reason}: {.message}{"\n"}{end}'
}
# kubesim's kubelet waits for the operands' startup probes (the driver pod is Ready once the
# driver loaded); kwok, the real lane's kubelet, runs no probe and marks pods Ready at once, so
# there the first driver validations race the driver's load as they would on no real node.
no_warnings() { [ "$E2E_CLUSTER" = real ] || assert_eq "$1" "" "$(warning_events)"; }
step "a clean install emits no Warning Event"
no_warnings "Warning Events"
assert_eq "ServiceMonitors" "gpu-operator nvidia-dcgm-exporter" \
    "$(k get servicemonitors -n gpu-operator -o jsonpath='{.items[*].metadata.name}')"
assert_eq "OptionalCRDs condition" "True Applied" "$(k get clusterpolicy cluster-policy \
    -o jsonpath='{.status.conditions[?(@.type=="OptionalCRDs")].status} {.status.conditions[?(@.type=="OptionalCRDs")].reason}')"

step "a CUDA workload requesting a GPU runs to completion (the CUDA vectorAdd sample)"
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: cuda-vectoradd, namespace: default}
spec:
  restartPolicy: OnFailure
  containers:
    - name: cuda-vectoradd
      image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
      resources: {limits: {nvidia.com/gpu: 1}}
YAML
until_eq "cuda-vectoradd" "Succeeded" 60 k get pod -n default cuda-vectoradd -o jsonpath='{.status.phase}'
log=$(k logs -n default cuda-vectoradd)
assert_eq "first line" "[Vector addition of 50000 elements]" "$(head -n1 <<<"$log")"
assert_contains "sample output" "Test PASSED" "$log"
assert_eq "last line" "Done" "$(tail -n1 <<<"$log")"
assert_contains "on a GPU node" "$(k get pod -n default cuda-vectoradd -o jsonpath='{.spec.nodeName}')" "p4d-0 p4d-1 t4-0"
no_warnings "still no Warning Event"

step "the CPU node gets no operand and no GPU label"
assert_eq "cpu labels" "" "$(k get node cpu-0 -o json | python3 -c 'import json,sys; print(" ".join(k for k in json.load(sys.stdin)["metadata"]["labels"] if k.startswith("nvidia.com/")))')"
assert_eq "cpu pods" "" "$(k get pods -n gpu-operator --field-selector spec.nodeName=cpu-0 -o name)"

step "GPU nodes: labels, operands, capacity, validation pods"
for n in p4d-0 p4d-1 t4-0; do
    assert_eq "$n gpu.present" "true" "$(node_label "$n" nvidia.com/gpu.present)"
    for l in driver container-toolkit device-plugin gpu-feature-discovery dcgm-exporter; do
        assert_eq "$n deploy.$l" "true" "$(node_label "$n" nvidia.com/gpu.deploy.$l)"
    done
    for st in driver container-toolkit device-plugin; do
        pods=$(k get pods -n gpu-operator -l "nvidia.com/gpu-operator.validation=$st,nvidia.com/gpu-operator.node=$n" \
            -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{"\n"}{end}')
        assert_contains "$n $st validation" "=Succeeded" "$pods"
        pod=$(head -n1 <<<"$pods" | cut -d= -f1)
        log=$(k logs -n gpu-operator "$pod")
        assert_contains "$n $st log" "Test PASSED" "$log"
    done
done
assert_eq "A100 capacity (time-sliced 4×)" "32" "$(node_res p4d-0 capacity nvidia.com/gpu)"
assert_eq "T4 capacity" "16" "$(node_res t4-0 capacity nvidia.com/gpu)"
assert_eq "T4 product" "Tesla-T4-SHARED" "$(node_label t4-0 nvidia.com/gpu.product)"
assert_eq "MIG default on A100s" "all-disabled" "$(node_label p4d-0 nvidia.com/mig.config)"
assert_eq "no MIG manager on T4" "" "$(node_label t4-0 nvidia.com/gpu.deploy.mig-manager)"
ds=$(k get ds -n gpu-operator -o jsonpath='{.items[*].metadata.name}')
for d in nvidia-driver-daemonset nvidia-container-toolkit-daemonset nvidia-device-plugin-daemonset \
    gpu-feature-discovery nvidia-dcgm-exporter nvidia-mig-manager nvidia-operator-validator; do
    assert_contains "DaemonSet $d" "$d" "$ds"
done

step "DCGM exporter: its Service has an endpoint per GPU node"
until_eq "dcgm-exporter endpoints" "3" 30 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get endpoints -n gpu-operator nvidia-dcgm-exporter -o jsonpath='{.subsets[*].addresses[*].ip}' | wc -w"

step "metrics"
m=$(curl -sf "http://127.0.0.1:$METRICS_PORT/metrics")
assert_contains "gpu nodes metric" "gpu_operator_gpu_nodes_total 3" "$m"
assert_contains "status metric" "gpu_operator_reconciliation_status 1" "$m"
assert_contains "per-state node metric" 'gpu_operator_state_nodes{state="driver",phase="failed"} 0' "$m"
assert_contains "reconcile durations" 'gpu_operator_reconcile_duration_seconds_count{kind="node"}' "$m"
assert_contains "transition delays" "gpu_operator_transition_delay_seconds_count" "$m"
assert_contains "client rate-limit waits" "gpu_operator_api_throttled_seconds_total" "$m"
# client-go's work-queue metrics (controller-runtime's labels), the REST client's request
# counts, the build and NVIDIA's driver-upgrade gauges.
wq='controller="gpu-operator",name="gpu-operator"'
assert_contains "work-queue adds" "workqueue_adds_total{$wq}" "$m"
assert_contains "work-queue depth" "workqueue_depth{$wq,priority=\"\"}" "$m"
assert_contains "work-queue latency" "workqueue_queue_duration_seconds_bucket{$wq,le=\"1e-08\"}" "$m"
assert_contains "work durations" "workqueue_work_duration_seconds_bucket{$wq,le=\"1000\"}" "$m"
assert_contains "work-queue retries" "workqueue_retries_total{$wq}" "$m"
assert_contains "unfinished work" "workqueue_unfinished_work_seconds{$wq}" "$m"
assert_contains "longest processor" "workqueue_longest_running_processor_seconds{$wq}" "$m"
assert_contains "GET requests answered 200" 'rest_client_requests_total{code="200",host="' "$m"
assert_contains "build info" "gpu_operator_build_info{" "$m"
for g in driver_auto_upgrade_enabled nodes_upgrades_in_progress nodes_upgrades_done \
    nodes_upgrades_failed nodes_upgrades_available nodes_upgrades_pending; do
    assert_contains "driver upgrade gauge $g" "gpu_operator_$g " "$m"
done
adds=$(metric "workqueue_adds_total{$wq}")
[ "${adds%%.*}" -gt 0 ] || fail "no work-queue adds counted: [$adds]"
gets=$(echo "$m" | awk '$1 ~ /^rest_client_requests_total\{code="200",.*method="GET"\}$/ {print $2}')
[ -n "$gets" ] && [ "${gets%%.*}" -gt 0 ] || fail "no GET answered 200 counted: [$gets]"
assert_eq "build info value" "1" "$(echo "$m" | awk '$1 ~ /^gpu_operator_build_info\{/ {print $2}')"
metrics_parse \
    workqueue_depth:gauge:controller,name,priority \
    workqueue_adds_total:counter:controller,name \
    workqueue_queue_duration_seconds:histogram:controller,name \
    workqueue_work_duration_seconds:histogram:controller,name \
    workqueue_retries_total:counter:controller,name \
    workqueue_unfinished_work_seconds:gauge:controller,name \
    workqueue_longest_running_processor_seconds:gauge:controller,name \
    rest_client_requests_total:counter:code,host,method \
    gpu_operator_build_info:gauge \
    gpu_operator_driver_auto_upgrade_enabled:gauge gpu_operator_nodes_upgrades_in_progress:gauge \
    gpu_operator_nodes_upgrades_done:gauge gpu_operator_nodes_upgrades_failed:gauge \
    gpu_operator_nodes_upgrades_available:gauge gpu_operator_nodes_upgrades_pending:gauge \
    gpu_operator_state_nodes:gauge:phase,state \
    gpu_operator_reconcile_duration_seconds:histogram:kind \
    process_resident_memory_bytes:gauge >"$E2E_DIR/promcheck.out" ||
    fail "/metrics: $(tail -1 "$E2E_DIR/promcheck.out")"

step "connections to the API server"
api_port=$(grep -o 'server: .*' "$KUBECONFIG_E2E" | head -1 | sed -E 's|.*:([0-9]+)/?"?$|\1|')
conns=$(ss -Htnp state established "( dport = :$api_port )" | grep -c "pid=$OPERATOR_PID," || true)
echo "the operator holds $conns connection(s) to the API server ($E2E_CLUSTER)"
if [ "$E2E_CLUSTER" = real ]; then
    # A real API server speaks HTTP/2: every watch, read and write (the request pipe, the
    # blocking requests, Events) is multiplexed on one connection, as client-go does.
    [ "$conns" -eq 1 ] || fail "expected 1 connection over HTTP/2, got $conns"
fi

# How many ClusterPolicy reconciles (render, apply, prune) the operator has run.
policy_reconciles() {
    curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" |
        awk '$1 == "gpu_operator_reconcile_duration_seconds_count{kind=\"policy\"}" {print $2}'
}
reconciled_since() { [ "$(policy_reconciles)" -gt "$1" ] && echo yes; }

step "a status overwritten by someone else is put right without re-rendering the operands"
n0=$(policy_reconciles)
[ -n "$n0" ] || fail "no policy reconcile count in the metrics"
assert_eq "status overwritten" "notReady" "$(k patch clusterpolicy cluster-policy \
    --subresource=status --type=merge -p '{"status":{"state":"notReady"}}' \
    -o jsonpath='{.status.state}')"
until_eq "state put right" "ready" 30 cp_state
sleep 1
assert_eq "no policy reconcile for a status change" "$n0" "$(policy_reconciles)"

step "a node change the operator does not cache queues nothing"
ignored_since() { [ "$(metric gpu_operator_watch_updates_ignored_total)" -gt "$1" ] && echo yes; }
i0=$(metric gpu_operator_watch_updates_ignored_total)
[ -n "$i0" ] || fail "no ignored-update count in the metrics"
k annotate node t4-0 example.com/unrelated=yes >/dev/null
until_eq "the update is ignored" "yes" 30 ignored_since "$i0"

step "a no-op edit writes nothing to operands"
before=$(k get ds -n gpu-operator -o jsonpath='{range .items[*]}{.metadata.resourceVersion}{" "}{end}')
k annotate clusterpolicy cluster-policy example.com/touched=yes >/dev/null
until_eq "a metadata edit is reconciled" "yes" 30 reconciled_since "$n0"
sleep 2
after=$(k get ds -n gpu-operator -o jsonpath='{range .items[*]}{.metadata.resourceVersion}{" "}{end}')
assert_eq "DaemonSets untouched" "$before" "$after"

step "an edit of a field the operator applies is put back (server-side apply, forced)"
ds_image() { k get ds -n gpu-operator nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}'; }
want=$(ds_image)
k patch ds -n gpu-operator nvidia-device-plugin-daemonset --type strategic \
    -p '{"spec":{"template":{"spec":{"containers":[{"name":"nvidia-device-plugin","image":"example.com/hand-edited:1"}]}}}}' >/dev/null
until_eq "the device plugin's image is put back" "$want" 30 ds_image
# A label someone else added (a field the operator does not set) stays.
k label ds -n gpu-operator nvidia-device-plugin-daemonset example.com/owner=someone-else >/dev/null
sleep 2
assert_eq "another manager's label stays" "someone-else" \
    "$(k get ds -n gpu-operator nvidia-device-plugin-daemonset -o jsonpath='{.metadata.labels.example\.com/owner}')"
echo "PASS operator_install"
