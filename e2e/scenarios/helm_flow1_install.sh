#!/usr/bin/env bash
# User flow 1 and 7 with the Helm chart: `helm install gpu-operator charts/gpu-operator -n
# gpu-operator --create-namespace --wait` on 2×(8×A100), 1×(4×T4), 1 CPU node, the operator
# running as the chart's Deployment under RBAC with the chart's roles. Every GPU node gets its
# operand pods and completed validation pods, the ClusterPolicy is ready, validation logs show
# vectorAdd, nodes advertise nvidia.com/gpu. `helm upgrade` re-applies a stale CRD (pre-upgrade
# hook); `helm uninstall` deletes the ClusterPolicy first (pre-delete hook), so the operator's
# finalizer removes the operands and the node labels it added. Every helm command also takes
# free ports for the operator's endpoints (PORT_FLAGS): its pod is a local process here.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml"

step "helm install ... --create-namespace --wait"
h install gpu-operator charts/gpu-operator -n gpu-operator --create-namespace --wait --timeout 60s \
    "${PORT_FLAGS[@]}" >"$E2E_DIR/install.out" 2>&1 || { cat "$E2E_DIR/install.out" >&2; fail "helm install"; }
assert_contains "NOTES" "kubectl get clusterpolicy cluster-policy" "$(cat "$E2E_DIR/install.out")"
assert_eq "operator ready" "1" "$(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.status.readyReplicas}')"
assert_eq "runs as the chart's ServiceAccount" "gpu-operator" \
    "$(k get pods -n gpu-operator -l app=gpu-operator -o jsonpath='{.items[0].spec.serviceAccountName}')"

step "kubectl get clusterpolicy → ready"
until_eq "ClusterPolicy state" "ready" 90 cp_state
out=$(k get clusterpolicy)
assert_contains "printer columns" "STATUS" "$out"
assert_contains "ready row" "cluster-policy   ready" "$out"

step "the install emitted no Warning Event (the operator's probes, the operands' startup probes)"
# Not on the real lane: kwok runs no probe and marks the driver pod Ready before it loaded.
[ "$E2E_CLUSTER" = real ] || assert_eq "Warning Events" "" "$(k get events -A --field-selector type=Warning \
    -o jsonpath='{range .items[*]}{.involvedObject.kind}/{.involvedObject.name}: {.reason}: {.message}{"\n"}{end}')"

step "kubectl get pods -n gpu-operator: operands Running and validations Completed per GPU node"
k get pods -n gpu-operator >"$E2E_DIR/pods.txt"
for n in p4d-0 p4d-1 t4-0; do
    pods=$(pods_on "$n")
    want="nvidia-driver-daemonset nvidia-container-toolkit-daemonset nvidia-device-plugin-daemonset gpu-feature-discovery nvidia-dcgm-exporter nvidia-operator-validator"
    [ "${n%-*}" = p4d ] && want="$want nvidia-mig-manager"
    for ds in $want; do
        assert_contains "$n: $ds Running" "=Running" "$(grep "^$ds-" <<<"$pods" || true)"
    done
    assert_contains "$n: completed validation pods" "=Succeeded" "$pods"
done
assert_eq "no MIG manager on the T4 node" "" "$(pods_on t4-0 | grep '^nvidia-mig-manager-' || true)"
assert_eq "nothing on the CPU node" "" "$(pods_on cpu-0)"
assert_contains "kubectl shows Completed" "Completed" "$(cat "$E2E_DIR/pods.txt")"

step "kubectl logs of a validation pod: vectorAdd of 50000 elements, Test PASSED"
vpod=$(k get pods -n gpu-operator -l nvidia.com/gpu-operator.node=p4d-0 \
    --field-selector status.phase=Succeeded -o jsonpath='{.items[0].metadata.name}')
log=$(k logs -n gpu-operator "$vpod")
assert_contains "50000 elements" "50000 elements" "$log"
assert_contains "Test PASSED" "Test PASSED" "$log"

step "kubectl describe node: nvidia.com/gpu in Capacity and Allocatable, GPU labels"
d=$(k describe node p4d-0)
assert_contains "capacity" "nvidia.com/gpu:" "$d"
assert_eq "A100 capacity" "8" "$(node_res p4d-0 capacity nvidia.com/gpu)"
assert_eq "A100 allocatable" "8" "$(node_res p4d-0 allocatable nvidia.com/gpu)"
assert_eq "T4 capacity" "4" "$(node_res t4-0 capacity nvidia.com/gpu)"
assert_contains "product label" "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB" "$d"

step "the operator: metrics on its port, least-privilege RBAC"
m=$(curl -sf "http://127.0.0.1:$METRICS_PORT/metrics")
assert_contains "metrics" "gpu_operator_reconciliation_status 1" "$m"
token=$(k create token gpu-operator -n gpu-operator)
can() { kubectl --kubeconfig "$KUBECONFIG_E2E" --cache-dir "$KCACHE-sa" --token="$token" auth can-i "$@" 2>/dev/null || true; }
assert_eq "patch nodes" "yes" "$(can patch nodes)"
assert_eq "create pods in its namespace" "yes" "$(can create pods -n gpu-operator)"
assert_eq "no pods elsewhere" "no" "$(can create pods -n default)"
assert_eq "no secrets" "no" "$(can get secrets -n gpu-operator)"
assert_eq "no node deletion" "no" "$(can delete nodes)"
assert_eq "no ClusterPolicy deletion" "no" "$(can delete clusterpolicies.nvidia.com)"

step "helm upgrade re-applies a stale CRD (pre-upgrade hook)"
k patch crd clusterpolicies.nvidia.com --type json \
    -p '[{"op":"remove","path":"/spec/versions/0/additionalPrinterColumns"}]' >/dev/null
assert_eq "CRD made stale" "" "$(k get crd clusterpolicies.nvidia.com -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}')"
h upgrade gpu-operator charts/gpu-operator -n gpu-operator --reuse-values --wait --timeout 60s >/dev/null 2>&1 ||
    fail "helm upgrade: $(h upgrade gpu-operator charts/gpu-operator -n gpu-operator --reuse-values 2>&1 | tail -3)"
assert_eq "printer columns back" "Status Age" \
    "$(k get crd clusterpolicies.nvidia.com -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}')"
assert_eq "hook pod removed after success" "" "$(k get pods -n gpu-operator -o name | grep upgrade-crd || true)"
assert_contains "the hook pod re-applied it" "clusterpolicies.nvidia.com configured" \
    "$(cat "$E2E_DIR/logs/gpu-operator_gpu-operator-upgrade-crd_upgrade-crd.log")"
assert_eq "still ready" "ready" "$(cp_state)"

step "helm uninstall: the operands and node labels go before the operator"
chart_uninstall
assert_eq "ClusterPolicy gone" "" "$(k get clusterpolicy -o name)"
assert_contains "the pre-delete hook waited for the finalizer" "clusterpolicy.nvidia.com/cluster-policy gone" \
    "$(cat "$E2E_DIR/logs/gpu-operator_gpu-operator-cleanup_cleanup.log")"
until_eq "pods gone" "" 30 k get pods -n gpu-operator -o name
assert_eq "DaemonSets gone" "" "$(k get ds -n gpu-operator -o name)"
assert_eq "Deployment gone" "" "$(k get deploy -n gpu-operator -o name)"
assert_eq "ClusterRoles gone" "" "$(k get clusterroles -o name | grep -E 'gpu-operator|nvidia' || true)"
assert_eq "RuntimeClass gone" "" "$(k get runtimeclass -o name)"
for n in p4d-0 p4d-1 t4-0; do
    assert_eq "$n operator labels removed" "" "$(k get node "$n" -o json | python3 -c '
import json,sys
l=json.load(sys.stdin)["metadata"]["labels"]
print(" ".join(k for k in sorted(l) if k == "nvidia.com/gpu.present" or k.startswith("nvidia.com/gpu.deploy.") or k == "nvidia.com/mig.config"))')"
done
assert_eq "NFD labels kept" "true" "$(node_label p4d-0 feature.node.kubernetes.io/pci-10de.present)"
assert_eq "CRD kept (helm never deletes CRDs)" "customresourcedefinition.apiextensions.k8s.io/clusterpolicies.nvidia.com" \
    "$(k get crd clusterpolicies.nvidia.com -o name)"
echo "PASS helm_flow1_install"
