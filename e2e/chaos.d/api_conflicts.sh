#!/usr/bin/env bash
# Chaos: a 409 Conflict storm on the operator's writes: every create, update, patch and delete
# answered 409 for 20 s, then every second one for 20 s more. The rollout starts under it and 25 s
# in the toolkit's version changes (an update that must get through); afterwards the cluster must
# converge with nothing lost, duplicated or wrong.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "409 on every operator write for 20 s, then every 2nd for 20 s"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=2000 --nodesim --validation-ms=1000
chaos_need_faults
t0=$(now_s)
api_fault '{"rules": [
  {"name": "conflict-all", "match": {"userAgent": "gpu-operator", "verbs": ["create", "update", "patch", "delete"]},
   "seconds": 20, "action": "conflict"},
  {"name": "conflict-half", "match": {"userAgent": "gpu-operator", "verbs": ["create", "update", "patch", "delete"]},
   "after": 20, "seconds": 20, "every": 2, "action": "conflict"}]}'
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
sleep_until "$(s_after "$t0" 25)"
echo "25 s in: $(chaos_state); the toolkit goes to v1.17.1-ubuntu20.04"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"toolkit":{"version":"v1.17.1-ubuntu20.04"}}}' >/dev/null
chaos_fault_end "$(s_after "$t0" 40)"
sleep_until "$CHAOS_FAULT_END"
echo "after 40 s: $(chaos_state)"
chaos_fault_describe "409 on every operator write for 20 s, every 2nd for 20 s, edit at 25 s ($(chaos_fault_counts))"
for r in conflict-all conflict-half; do
    n=$(api_fault_counts | awk -v r="$r" '$1 == r { print $2 }')
    [ "${n:-0}" -gt 0 ] || fail "rule $r injected nothing: the operator never met that fault"
done
chaos_expect_image nvidia-container-toolkit-daemonset nvcr.io/nvidia/k8s/container-toolkit:v1.17.1-ubuntu20.04
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
