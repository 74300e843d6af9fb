#!/usr/bin/env bash
# Chaos: for 40 s the operator's watches break: every second resume from a resourceVersion gets
# the 410 Expired answer of a compacted history (so the informer must list again), the others are
# cut mid-stream after 2 events. The rollout runs under it, and 15 s in dcgmExporter is switched
# off (a DaemonSet deletion the operator learns of through those watches).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "operator watches cut after 2 events, every 2nd resume 410 Expired, for 40 s"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=2000 --nodesim --validation-ms=1000
chaos_need_faults
chaos_operator
until_eq "the operator's caches synced" yes 30 policy_reconciled
t0=$(now_s)
api_fault '{"rules": [
  {"name": "expired", "match": {"userAgent": "gpu-operator", "verbs": ["watch", "list"]},
   "every": 2, "seconds": 40, "action": "gone"},
  {"name": "cut", "match": {"userAgent": "gpu-operator", "verbs": ["watch"]},
   "seconds": 40, "action": "cutWatch", "afterEvents": 2}]}'
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
sleep_until "$(s_after "$t0" 15)"
echo "15 s in: $(chaos_state); dcgmExporter off"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
chaos_fault_end "$(s_after "$t0" 40)"
sleep_until "$CHAOS_FAULT_END"
echo "after 40 s: $(chaos_state)"
chaos_fault_describe "operator watches cut after 2 events, every 2nd resume 410 Expired, 40 s; edit at 15 s ($(chaos_fault_counts))"
for r in expired cut; do
    n=$(api_fault_counts | awk -v r="$r" '$1 == r { print $2 }')
    [ "${n:-0}" -gt 0 ] || fail "rule $r injected nothing: the operator never met that fault"
done
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
assert_eq "dcgm-exporter DaemonSet gone" "" "$(k get ds -n gpu-operator nvidia-dcgm-exporter -o name --ignore-not-found)"
chaos_finish
