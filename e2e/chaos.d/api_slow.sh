#!/usr/bin/env bash
# Chaos: for 40 s the API server answers the operator slowly: reads 1.5 s late, every second
# write 1 s late, watches' first byte 3 s late. The rollout runs under it, and 20 s in the device
# plugin's version changes; the cluster must converge on it afterwards.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "slow API for 40 s (reads +1.5 s, every 2nd write +1 s, watches +3 s)"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=2000 --nodesim --validation-ms=1000
chaos_need_faults
t0=$(now_s)
api_fault '{"rules": [
  {"name": "slow-reads", "match": {"userAgent": "gpu-operator", "verbs": ["get", "list"]},
   "seconds": 40, "action": "delay", "delayMs": 1500},
  {"name": "slow-writes", "match": {"userAgent": "gpu-operator", "verbs": ["create", "update", "patch", "delete"]},
   "every": 2, "seconds": 40, "action": "delay", "delayMs": 1000},
  {"name": "slow-watches", "match": {"userAgent": "gpu-operator", "verbs": ["watch"]},
   "seconds": 40, "action": "delay", "delayMs": 3000}]}'
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
sleep_until "$(s_after "$t0" 20)"
echo "20 s in: $(chaos_state); the device plugin goes to v0.17.1"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
chaos_fault_end "$(s_after "$t0" 40)"
sleep_until "$CHAOS_FAULT_END"
echo "after 40 s: $(chaos_state)"
chaos_fault_describe "slow API for 40 s (reads +1.5 s, every 2nd write +1 s, watches +3 s), edit at 20 s ($(chaos_fault_counts))"
for r in slow-reads slow-writes slow-watches; do
    n=$(api_fault_counts | awk -v r="$r" '$1 == r { print $2 }')
    [ "${n:-0}" -gt 0 ] || fail "rule $r injected nothing: the operator never met that fault"
done
chaos_expect_image nvidia-device-plugin-daemonset nvcr.io/nvidia/k8s-device-plugin:v0.17.1
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
