#!/usr/bin/env bash
# kubesim's fault injection driven by the real kubectl: a rule set given at start (--faults), rule
# sets installed and cleared at runtime through /kubesim/v1/faults (kubectl create/get/delete
# --raw), kubectl meeting the injected 500, 503 and 409, the counters, the request log's marker,
# and an API server outage (refuse) that keeps the cluster's state.
. "$(dirname "$0")/../lib.sh"
. "$E2E_ROOT/lib_faults.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "the real API server has no /kubesim/v1/faults"

cat >"$E2E_DIR/start-faults.json" <<'JSON'
{"rules": [{"name": "start-flag", "match": {"resources": ["secrets"], "verbs": ["get"]},
            "action": "error", "code": 500, "message": "injected at start"}]}
JSON
cluster_up -- --faults "$E2E_DIR/start-faults.json"

step "rules given with --faults apply from the start"
out=$(assert_fails "get secret" k get secret nope --request-timeout=10s)
assert_contains "500 from the start rules" "Error from server (InternalError): injected at start" "$out"
assert_eq "start rule counted" "start-flag 1" "$(api_fault_counts)"

step "a 503 rule on pods: kubectl get pods fails with the injected status"
k create configmap kept --from-literal=a=b >/dev/null
api_fault '{"rules": [{"name": "pods-503", "match": {"resources": ["pods"]},
                       "action": "error", "code": 503}]}'
# No Retry-After: kubectl does not retry this; the timeout bounds it if it ever did.
out=$(assert_fails "get pods under a 503 rule" k get pods --request-timeout=10s)
assert_contains "injected 503" "Error from server (ServiceUnavailable): the server is currently unable to handle the request (injected by kubesim fault rule \"pods-503\")" "$out"
assert_eq "other resources unaffected" "configmap/kept" "$(k get cm kept -o name --request-timeout=10s)"
out=$(assert_fails "get secret after the replacement" k get secret nope --request-timeout=10s)
assert_contains "the start rules were replaced" "NotFound" "$out"
assert_eq "counters" "pods-503 1" "$(api_fault_counts)"
grep -q 'verb=list status=503 .*fault=pods-503:error' "$E2E_DIR/kubesim.log" ||
    fail "the request log marks the injected fault"

step "bad rules are refused with a message naming the field"
printf '%s' '{"rules": [{"action": "eror"}]}' >"$E2E_DIR/bad.json"
out=$(assert_fails "bad rule" k create --raw /kubesim/v1/faults -f "$E2E_DIR/bad.json")
assert_contains "parser message" 'rules[0].action: unknown action "eror" (want error, delay, cutWatch, gone, refuse, conflict)' "$out"
assert_eq "old rules kept" "pods-503 1" "$(api_fault_counts)"

step "cleared: kubectl get pods succeeds"
api_fault_clear
assert_eq "no rules" "" "$(api_fault_counts)"
k get pods --request-timeout=10s >/dev/null 2>&1 || fail "get pods after clearing"

step "conflict: writes get 409, reads pass"
api_fault '{"rules": [{"name": "storm", "match": {"resources": ["configmaps"]}, "action": "conflict"}]}'
out=$(assert_fails "create under conflict" k create configmap c1 --from-literal=a=b)
assert_contains "409 message" 'Operation cannot be fulfilled on configmaps "c1": the object has been modified' "$out"
assert_eq "reads pass" "b" "$(k get cm kept -o jsonpath='{.data.a}')"
api_fault_clear

step "refuse: the API server is down for 2 s, then back with its state"
api_fault '{"rules": [{"name": "restart", "action": "refuse", "seconds": 2}]}'
sleep 0.7
out=$(assert_fails "get during the outage" k get cm kept --request-timeout=2s)
assert_contains "connection refused" "refused" "$out"
until_eq "API server back" "configmap/kept" 10 k get cm kept -o name --request-timeout=2s
assert_eq "outage counted" "restart 1" "$(api_fault_counts)"
api_fault_clear
echo "PASS"
