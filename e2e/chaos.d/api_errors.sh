#!/usr/bin/env bash
# Chaos: every third API request of the operator failing for a minute, from its start: reads
# (get, list) with 500, writes with 503 (Retry-After 1), watches with 429 (Retry-After 1). The
# rollout runs under it, and 25 s in the device plugin's version changes; after the minute the
# cluster must converge on the new version with nothing lost, duplicated or wrong.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "every 3rd operator request failing for 60 s (500 reads, 503 writes, 429 watches)"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=2000 --nodesim --validation-ms=1000
chaos_need_faults
t0=$(now_s)
api_fault '{"rules": [
  {"name": "reads-500", "match": {"userAgent": "gpu-operator", "verbs": ["get", "list"]},
   "every": 3, "seconds": 60, "action": "error", "code": 500},
  {"name": "writes-503", "match": {"userAgent": "gpu-operator", "verbs": ["create", "update", "patch", "delete"]},
   "every": 3, "seconds": 60, "action": "error", "code": 503, "retryAfter": 1},
  {"name": "watches-429", "match": {"userAgent": "gpu-operator", "verbs": ["watch"]},
   "every": 3, "seconds": 60, "action": "error", "code": 429, "retryAfter": 1}]}'
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
sleep_until "$(s_after "$t0" 25)"
echo "25 s in: $(chaos_state); the device plugin goes to v0.17.1"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
chaos_fault_end "$(s_after "$t0" 60)"
sleep_until "$CHAOS_FAULT_END"
echo "after the minute: $(chaos_state)"
counts=$(chaos_fault_counts)
chaos_fault_describe "every 3rd operator request failing for 60 s, version edit at 25 s ($counts)"
for r in reads-500 writes-503 watches-429; do
    n=$(api_fault_counts | awk -v r="$r" '$1 == r { print $2 }')
    [ "${n:-0}" -gt 0 ] || fail "rule $r injected nothing: the operator never met that fault"
done
chaos_expect_image nvidia-device-plugin-daemonset nvcr.io/nvidia/k8s-device-plugin:v0.17.1
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
