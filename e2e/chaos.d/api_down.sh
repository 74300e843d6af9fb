#!/usr/bin/env bash
# Chaos: the API server down for 30 s mid-rollout (kubesim's refuse fault: listeners and every
# connection closed, state kept, as in an API server restart). The operator and nodesim must
# reconnect and the rollout finish as if nothing had happened.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "API server down 30 s mid-rollout (refuse)"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=3000 --nodesim --validation-ms=1500
chaos_need_faults
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "the rollout is under way" yes 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator nvidia-driver-daemonset -o name >/dev/null 2>&1 && echo yes"
echo "before the outage: $(chaos_state)"
t0=$(now_s)
api_fault '{"rules": [{"name": "down", "action": "refuse", "seconds": 30}]}'
sleep 2
assert_fails "the API server refuses connections" k get --raw /readyz --request-timeout=3s >/dev/null
# The outage starts 0.25 s after installation and lasts 30 s.
chaos_fault_end "$(s_after "$t0" 30.25)"
sleep_until "$CHAOS_FAULT_END"
until_eq "the API server is back" ok 30 k get --raw /readyz
echo "after the outage: $(chaos_state)"
chaos_fault_describe "API server down 30 s mid-rollout (refuse; $(chaos_fault_counts))"
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
