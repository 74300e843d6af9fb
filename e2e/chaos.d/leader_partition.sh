#!/usr/bin/env bash
# Chaos: two replicas with leader election; the leader's Lease traffic is cut off (every request of
# its Lease client answered 503) while its other requests still go through, mid-rollout. The
# leader must stop every write once it cannot renew (renew deadline 10 s), before its Lease
# expires (15 s after the last renewal): kubesim's per-client counters show no write of it after
# the expiry. The standby takes over, rolls out a device plugin version change made after the
# handover, and the cluster converges.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "the leader's Lease renewals failing (503) mid-rollout; the standby takes over"
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=3000 --nodesim --validation-ms=1000
chaos_need_faults
lease() { k get lease -n gpu-operator 53822513.nvidia.com -o jsonpath="{.spec.$1}" 2>/dev/null; }

operator_start --leader-elect
pid_a=$OPERATOR_PID
until_eq "A holds the Lease" "yes" 30 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get lease -n gpu-operator 53822513.nvidia.com -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | grep -q '_${pid_a}\$' && echo yes"
id_a=$(lease holderIdentity)
operator_start --leader-elect
pid_b=$OPERATOR_PID
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "A is rolling out" "yes" 30 bash -c "[ \$(kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator -o name | wc -l) -gt 3 ] && echo yes"
[ "$(operator_writes "_${pid_a}")" -gt 0 ] || fail "the leader wrote nothing"

api_fault "{\"rules\": [{\"name\": \"lease-partition\", \"match\": {\"userAgent\": \"gpu-operator@${id_a}/leader\"},
  \"action\": \"error\", \"code\": 503}]}"
# A renewal may have been on its way when the rule went in: the last one is read after it.
sleep 2.5
renewed=$(lease renewTime)
duration=$(lease leaseDurationSeconds)
expiry=$(python3 -c "
import datetime, sys
t = datetime.datetime.strptime(sys.argv[1].rstrip('Z')[:26], '%Y-%m-%dT%H:%M:%S.%f')
print('%.3f' % (t.replace(tzinfo=datetime.timezone.utc).timestamp() + int(sys.argv[2])))" "$renewed" "$duration")
echo "A last renewed at $renewed; its Lease expires at $expiry"
sleep_until "$(s_after "$expiry" 0.2)"
at_expiry=$(operator_writes "_${pid_a}")
chaos_fault_end
kill -0 "$pid_a" 2>/dev/null && fail "A still runs after its Lease expired"
rc_a=0
wait "$pid_a" 2>/dev/null || rc_a=$?
echo "A exited with $rc_a; $at_expiry writes of A at the expiry"
grep -q 'leadership lost; stopping' "$E2E_DIR/operator.log" || fail "A did not log the loss of leadership"
until_eq "B holds the Lease" "yes" 25 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get lease -n gpu-operator 53822513.nvidia.com -o jsonpath='{.spec.holderIdentity}' 2>/dev/null | grep -q '_${pid_b}\$' && echo yes"
echo "B leads; the device plugin goes to v0.17.1"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.1"}}}' >/dev/null
chaos_fault_describe "leader A's Lease renewals failing from mid-rollout; A out, B leads"
chaos_expect_image nvidia-device-plugin-daemonset nvcr.io/nvidia/k8s-device-plugin:v0.17.1
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_converge 120 || true
assert_eq "writes of A after its Lease expired" "$at_expiry" "$(operator_writes "_${pid_a}")"
[ "$(operator_writes "_${pid_b}")" -gt 0 ] || fail "the new leader wrote nothing"
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
