#!/usr/bin/env bash
# Helpers for scenarios that run the operator out of cluster against kubesim + nodesim: the CRD,
# the operator process (logs in the scenario's directory), a free local port, and readers for
# the ClusterPolicy status. Source after e2e/lib.sh and e2e/lib_gpu.sh.

OPERATOR_BIN="${OPERATOR_BIN:-$BUILD_DIR/gpu-operator}"
OPERATOR_NS=gpu-operator

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# operator_writes AGENT_SUBSTRING [all]: the writes (create, update, patch, delete) the clients
# whose user agent contains AGENT_SUBSTRING sent, from kubesim's per-client counters; Lease and
# Event writes only with "all".
operator_writes() {
    local token url
    token=$(cat "$E2E_DIR/admin.token")
    url=$(grep -o 'server: .*' "$KUBECONFIG_E2E" | head -1 | sed -e 's/server: //' -e 's/"//g')
    curl -sf --cacert "$E2E_DIR/ca.crt" -H "Authorization: Bearer $token" "$url/kubesim/requests" |
        python3 -c '
import json, sys
want, every = sys.argv[1], sys.argv[2] == "all"
n = 0
for c in json.load(sys.stdin).get("clients", {}).values():
    if want in c.get("agent", ""):
        for what, count in c.get("requests", {}).items():
            verb, res = what.split(" ", 1)
            if verb in ("create", "update", "patch", "delete") and (
                    every or not res.startswith(("leases", "events"))):
                n += count
print(n)' "$1" "${2:-}"
}

# metric NAME: the value of the sample NAME (with its labels as rendered) on /metrics; empty
# when absent.
metric() {
    curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v n="$1" '$1 == n {print $2}'
}
# metrics_parse [FAMILY:TYPE[:LABELS]]...: parses the whole of /metrics with prometheus_client's
# parser (e2e/promcheck.py) and checks each family named.
metrics_parse() {
    local py=python3
    "$py" -c 'import prometheus_client' 2>/dev/null || py=/usr/bin/python3
    curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" | "$py" "$E2E_ROOT/promcheck.py" "$@"
}

# operator_start [args...]: starts the operator (metrics on $METRICS_PORT); stops it on exit.
operator_start() {
    METRICS_PORT=$(free_port)
    HEALTH_PORT=$(free_port)
    # OPERATOR_WRAPPER (e.g. "valgrind --leak-check=full ...") runs the operator under a tool.
    # shellcheck disable=SC2086
    OPERATOR_NAMESPACE=$OPERATOR_NS ${OPERATOR_WRAPPER:-} "$OPERATOR_BIN" --kubeconfig "$KUBECONFIG_E2E" \
        --states-dir "$REPO_ROOT/states" --metrics-bind-address "127.0.0.1:$METRICS_PORT" \
        --health-probe-bind-address "127.0.0.1:$HEALTH_PORT" --validation-backoff-ms 1000 "$@" \
        >>"$E2E_DIR/operator.log" 2>&1 &
    OPERATOR_PID=$!
    echo "$OPERATOR_PID" >"$E2E_DIR/operator.pid"
}
operator_stop() {
    local pid
    pid=$(cat "$E2E_DIR/operator.pid" 2>/dev/null || true)
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    # Under a tool (valgrind's leak check at exit) stopping takes longer.
    local tenths=50
    [ -z "${OPERATOR_WRAPPER:-}" ] || tenths=600
    for _ in $(seq 1 $tenths); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$E2E_DIR/operator.pid"
}
operator_on_exit() {
    local rc=$?
    if [ $rc -ne 0 ] && [ -f "$E2E_DIR/operator.log" ]; then
        echo "--- last operator log lines ---" >&2
        tail -n 40 "$E2E_DIR/operator.log" >&2 || true
    fi
    operator_stop
    # A sanitizer build of the operator (OPERATOR_BIN) reports at exit: any report fails the run.
    if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$E2E_DIR/operator.log" 2>/dev/null; then
        echo "FAIL: the operator's sanitizer reported errors:" >&2
        grep -E -A20 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$E2E_DIR/operator.log" | head -60 >&2
        rc=1
    fi
    # Under valgrind memcheck (OPERATOR_WRAPPER): any memory error or lost block fails the run.
    local vg='^==[0-9]+== +(Invalid (read|write|free)|Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap|Process terminating|.* are (definitely|indirectly) lost)'
    if grep -qE "$vg" "$E2E_DIR/operator.log" 2>/dev/null; then
        echo "FAIL: valgrind reported errors in the operator:" >&2
        grep -E -A25 "$vg" "$E2E_DIR/operator.log" | head -80 >&2
        rc=1
    fi
    set +e # the status below must reach cleanup, which stops the cluster
    (exit $rc)
    cleanup
}
trap operator_on_exit EXIT

install_crd() {
    k apply -f "$REPO_ROOT/crds/nvidia.com_clusterpolicies.yaml" >/dev/null
    until_eq "CRD established" "True" 30 k get crd clusterpolicies.nvidia.com \
        -o jsonpath='{.status.conditions[?(@.type=="Established")].status}'
}

cp_state() { k get clusterpolicy "${1:-cluster-policy}" -o jsonpath='{.status.state}'; }

# The ConfigMap clusterpolicy-full.yaml's devicePlugin.config names (time-slicing-config: key
# `any`, 4 replicas of nvidia.com/gpu), in the operator's namespace.
time_slicing_config() {
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: time-slicing-config, namespace: $OPERATOR_NS}
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: 4
YAML
}
