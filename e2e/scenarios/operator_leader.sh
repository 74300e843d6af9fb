#!/usr/bin/env bash
# Two operator replicas with leader election: only the Lease holder writes (kubesim counts each
# replica's requests by its user agent); killing the leader (kill -9, no release) hands over
# within the lease duration (15 s) and the new leader finishes the rollout.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --driver-load-ms=3000
install_crd
k create namespace gpu-operator >/dev/null
holder() { k get lease -n gpu-operator 53822513.nvidia.com -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }

step "two replicas: one leads"
operator_start --leader-elect
pid_a=$OPERATOR_PID
until_eq "A holds the Lease" "yes" 30 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get lease -n gpu-operator 53822513.nvidia.com -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | grep -q '_${pid_a}\$' && echo yes"

operator_start --leader-elect
pid_b=$OPERATOR_PID
echo "$pid_a $pid_b" >"$E2E_DIR/operator.pids"
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "A is rolling out" "yes" 30 bash -c "[ \$(kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator -o name | wc -l) -gt 3 ] && echo yes"
sleep 1
if kubesim_only "kubesim counts requests per client"; then
    assert_eq "B (standby) wrote nothing" "0" "$(operator_writes "_${pid_b}")"
    [ "$(operator_writes "_${pid_a}")" -gt 0 ] || fail "the leader wrote nothing"
fi
assert_eq "not ready yet (drivers load for 3 s)" "notReady" "$(cp_state)"

step "kill -9 the leader mid-rollout: B takes over within the lease duration and finishes"
kill -9 "$pid_a"
wait "$pid_a" 2>/dev/null || true
t0=$SECONDS
until_eq "B holds the Lease" "yes" 25 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get lease -n gpu-operator 53822513.nvidia.com -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | grep -q '_${pid_b}\$' && echo yes"
took=$((SECONDS - t0))
# The Lease lasts 15 s from the leader's last renewal, candidates retry every 2 s; the poll above
# adds up to a second.
[ $took -le 19 ] || fail "handover took ${took}s (lease 15 s + retry 2 s)"
echo "handover after ${took}s"
until_eq "ready under B" "ready" 120 cp_state
if kubesim_only "kubesim counts requests per client"; then
    [ "$(operator_writes "_${pid_b}")" -gt 0 ] || fail "the new leader wrote nothing"
fi
assert_eq "one DaemonSet each" "$(k get ds -n gpu-operator -o name | sort -u | wc -l)" "$(k get ds -n gpu-operator -o name | wc -l)"
kill -TERM "$pid_b" 2>/dev/null || true
echo "PASS operator_leader"
