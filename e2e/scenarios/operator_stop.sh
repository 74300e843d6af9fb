#!/usr/bin/env bash
# SIGTERM while the API server answers every write of the operator with 429 and Retry-After 30:
# the operator exits within 2 s, cleanly, and sends no write after the signal (kubesim counts each
# client's requests). Waiting out Retry-After, or a write sent after the signal, fails it.
# kubesim-only: fault injection and per-client request counters are kubesim's
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_faults.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --driver-load-ms=3000
install_crd
k create namespace gpu-operator >/dev/null

step "the operator rolls out, then every write it sends is answered 429, Retry-After 30"
operator_start
pid=$OPERATOR_PID
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "DaemonSets created" "yes" 30 bash -c "[ \$(kubectl --kubeconfig $KUBECONFIG_E2E get ds -n gpu-operator -o name | wc -l) -gt 3 ] && echo yes"
api_fault '{"rules": [{"name": "writes-429", "match": {"userAgent": "gpu-operator", "verbs": ["create", "update", "patch", "delete"]},
  "action": "error", "code": 429, "retryAfter": 30}]}'
# The rollout goes on (drivers load, nodes advance): writes keep coming and are refused.
until_eq "writes refused" "yes" 30 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get --raw /kubesim/v1/faults | python3 -c 'import json,sys; print(\"yes\" if json.load(sys.stdin)[\"counters\"][0][\"injected\"] >= 3 else \"no\")'"
sleep 2 # workers now wait out Retry-After in the client

step "SIGTERM: out within 2 s, no write after the signal"
t0=$(date +%s.%N)
kill -TERM "$pid"
before=$(operator_writes "_${pid}" all)
rc=0
while kill -0 "$pid" 2>/dev/null; do
    if python3 -c "import sys,time; sys.exit(0 if time.time() - $t0 > 10 else 1)"; then
        fail "the operator still runs 10 s after SIGTERM"
    fi
    sleep 0.05
done
wait "$pid" || rc=$?
took=$(python3 -c "import time; print('%.2f' % (time.time() - $t0))")
rm -f "$E2E_DIR/operator.pid"
echo "exited with $rc after ${took}s"
assert_eq "exit status" "0" "$rc"
python3 -c "import sys; sys.exit(0 if $took <= 2.0 else 1)" || fail "exit took ${took}s (limit 2 s)"
assert_eq "writes after the signal" "$before" "$(operator_writes "_${pid}" all)"
grep -q 'signal received; stopping' "$E2E_DIR/operator.log" || fail "no stop logged"
echo "PASS operator_stop"
