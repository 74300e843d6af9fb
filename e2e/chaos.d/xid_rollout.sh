#!/usr/bin/env bash
# Chaos: an XID error on a GPU of p4d-0 mid-rollout (nodesim's xid fault: its validations fail),
# held until the operator reports the node failed, then cleared: p4d-0 must converge (validated,
# its capacity back) without restarting anything, t4-0 untouched.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "XID 79 on GPU 3 of p4d-0 mid-rollout, cleared"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=2000 --nodesim --validation-ms=1000
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "the driver DaemonSet is there" yes 60 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator nvidia-driver-daemonset -o name >/dev/null 2>&1 && echo yes"
fault p4d-0 xid:gpu=3:code=79
echo "XID injected: $(chaos_state)"
cp_failed() { k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.failed}'; }
until_eq "p4d-0 reported failed" 1 60 cp_failed
assert_eq "the node behind" "p4d-0" "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.behind[0].node}')"
until_eq "t4-0 validated meanwhile" 1 60 k get clusterpolicy cluster-policy -o jsonpath='{.status.nodes.ready}'
echo "before clearing: $(chaos_state)"
fault p4d-0 none
chaos_fault_end
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
