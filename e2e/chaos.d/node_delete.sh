#!/usr/bin/env bash
# Chaos: a GPU node deleted while its validation pods run. nodesim does not register a deleted
# node again, so the cluster must settle without it: no pod left bound to it, status.nodes
# counting one GPU node, the other node validated as after a clean rollout.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "node t4-0 deleted mid-validation"
# Validations take 4 s, so that the deletion finds one running.
chaos_cluster fleet-gpu.yaml --nodesim --validation-ms=4000
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
running_validation() {
    k get pods -n gpu-operator -l nvidia.com/gpu-operator.node=t4-0 --field-selector status.phase=Running \
        -o jsonpath='{range .items[*]}{.metadata.labels.nvidia\.com/gpu-operator\.validation}{"\n"}{end}' | head -n 1
}
until_eq "a validation pod running on t4-0" yes 120 bash -c "[ -n \"\$(kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l nvidia.com/gpu-operator.node=t4-0 --field-selector status.phase=Running -o name)\" ] && echo yes"
stage=$(running_validation)
echo "deleting t4-0 while its $stage validation runs ($(chaos_state))"
k delete node t4-0 --wait=false >/dev/null
chaos_fault_end
chaos_fault_describe "node t4-0 deleted during its $stage validation"
chaos_expect_gone t4-0
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
assert_eq "t4-0 not registered again" "" "$(k get node t4-0 -o name --ignore-not-found)"
chaos_finish
