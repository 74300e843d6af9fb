#!/usr/bin/env bash
# ServiceMonitors follow the Prometheus Operator's CRD while the operator runs: with
# dcgmExporter.serviceMonitor.enabled and no CRD the ClusterPolicy says so (the OptionalCRDs
# condition names servicemonitors.monitoring.coreos.com, one Warning Event); installing the CRD
# creates the ServiceMonitors within seconds and clears the condition, without a restart;
# deleting it leaves the operator running, quiet (no error loop), and the condition back.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
SM_CRD=servicemonitors.monitoring.coreos.com

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml"
install_crd
k delete crd "$SM_CRD" --ignore-not-found --wait=true >/dev/null
k create namespace gpu-operator >/dev/null
operator_start
pid=$OPERATOR_PID
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"dcgmExporter":{"serviceMonitor":{"enabled":true}}}}' >/dev/null

cond() { k get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"OptionalCRDs\")].$1}"; }
warnings() {
    k get events -A --field-selector involvedObject.name=cluster-policy,reason=CRDNotInstalled,type=Warning \
        -o jsonpath='{range .items[*]}{.count}{"\n"}{end}'
}
sms() { k get servicemonitors -n gpu-operator -o jsonpath='{.items[*].metadata.name}'; }

step "no CRD: the status says which ServiceMonitor is missing and why; one Warning Event"
until_eq "OptionalCRDs False" "False" 60 cond status
assert_eq "reason" "CRDNotInstalled" "$(cond reason)"
assert_contains "names the CRD" "$SM_CRD" "$(cond message)"
assert_contains "names the ServiceMonitor" "ServiceMonitor nvidia-dcgm-exporter" "$(cond message)"
until_eq "one Warning Event" "1" 30 warnings
until_eq "ready without monitoring" "ready" 180 cp_state
assert_eq "still one Warning Event, counted once" "1" "$(warnings)"
assert_eq "the condition stays" "False" "$(cond status)"

step "installing the CRD creates the ServiceMonitors, no restart"
k apply -f "$E2E_ROOT/testdata/servicemonitor-crd.yaml" >/dev/null
crd_established "$SM_CRD"
until_eq "ServiceMonitors created" "gpu-operator nvidia-dcgm-exporter" 15 sms
until_eq "OptionalCRDs True" "True" 15 cond status
assert_eq "reason" "Applied" "$(cond reason)"
assert_contains "says what it applied" "ServiceMonitor nvidia-dcgm-exporter" "$(cond message)"
kill -0 "$pid" 2>/dev/null || fail "the operator exited"
assert_eq "started once" "1" "$(grep -c 'msg="operator started"' "$E2E_DIR/operator.log")"
assert_eq "still ready" "ready" "$(cp_state)"

step "a ServiceMonitor deleted by hand comes back (its informer runs)"
k delete servicemonitor -n gpu-operator nvidia-dcgm-exporter --wait=true >/dev/null
until_eq "ServiceMonitor back" "gpu-operator nvidia-dcgm-exporter" 15 sms

step "deleting the CRD: the operator keeps running, no error loop, the condition returns"
lines=$(wc -l <"$E2E_DIR/operator.log")
k delete crd "$SM_CRD" --wait=true >/dev/null
until_eq "OptionalCRDs False again" "False" 15 cond status
assert_contains "names the CRD" "$SM_CRD" "$(cond message)"
sleep 5
kill -0 "$pid" 2>/dev/null || fail "the operator exited"
after=$(tail -n +"$((lines + 1))" "$E2E_DIR/operator.log")
noisy=$(grep -cE ' (WARN|ERROR) ' <<<"$after" || true)
[ "$noisy" -le 2 ] || fail "the operator logs warnings after the CRD's deletion ($noisy):
$after"
n1=$(wc -l <"$E2E_DIR/operator.log")
sleep 5
n2=$(wc -l <"$E2E_DIR/operator.log")
[ $((n2 - n1)) -le 2 ] || fail "the operator keeps logging after the CRD's deletion:
$(tail -n +"$((n1 + 1))" "$E2E_DIR/operator.log")"
assert_eq "still ready" "ready" "$(cp_state)"

step "installed again: created again"
k apply -f "$E2E_ROOT/testdata/servicemonitor-crd.yaml" >/dev/null
crd_established "$SM_CRD"
until_eq "ServiceMonitors created again" "gpu-operator nvidia-dcgm-exporter" 15 sms
until_eq "OptionalCRDs True again" "True" 15 cond status
assert_eq "started once" "1" "$(grep -c 'msg="operator started"' "$E2E_DIR/operator.log")"
echo "PASS operator_servicemonitor_crd"
