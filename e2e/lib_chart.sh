#!/usr/bin/env bash
# Helpers for scenarios that install the Helm chart (charts/gpu-operator) with the real helm on
# kubesim + nodesim: kubesim runs the operator image's pods as local processes of build/gpu-operator
# (e2e/testdata/image-map-operator.yaml), with RBAC on, so the chart's ServiceAccount and roles are
# what the operator works with. On the conformance lane e2e/podrunner.py runs those pods with
# the same map, under tokens the real API server issues for the pods' ServiceAccounts.
# Source after e2e/lib.sh and e2e/lib_gpu.sh.


OPERATOR_BIN="${OPERATOR_BIN:-$BUILD_DIR/gpu-operator}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The operator processes share the host network: each scenario takes free ports for them.
METRICS_PORT=$(free_port)
HEALTH_PORT=$(free_port)
PORT_FLAGS=(--set "operator.metricsPort=$METRICS_PORT" --set "operator.healthPort=$HEALTH_PORT")

# chart_cluster_up FLEET [cluster args...]: kubesim (RBAC on, operator image mapped) + nodesim.
chart_cluster_up() {
    local fleet=$1; shift
    [ -x "$OPERATOR_BIN" ] || fail "no operator binary at $OPERATOR_BIN (build it first)"
    sed -e "s|__OPERATOR_BIN__|$(cd "$(dirname "$OPERATOR_BIN")" && pwd)/$(basename "$OPERATOR_BIN")|" \
        -e "s|__REPO__|$REPO_ROOT|g" "$E2E_ROOT/testdata/image-map-operator.yaml" >"$E2E_DIR/image-map.yaml"
    cluster_up --fleet "$fleet" "$@" -- --image-map "$E2E_DIR/image-map.yaml" --rbac
}

chart_on_exit() {
    local rc=$?
    # The operator's pods (Deployment and hooks) log to kubesim's logs/<ns>_<pod>_<container>.log.
    local logs=("$E2E_DIR"/logs/*_gpu-operator-*.log)
    if [ $rc -ne 0 ]; then
        k get pods -A -o wide >&2 2>/dev/null || true
        # The Ready condition, which the DaemonSet controller counts (kubectl's READY column
        # counts ready containers).
        k get pods -A -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,READY:.status.conditions[?(@.type=="Ready")].status,SINCE:.status.conditions[?(@.type=="Ready")].lastTransitionTime,DELETING:.metadata.deletionTimestamp,RV:.metadata.resourceVersion' >&2 2>/dev/null || true
        k describe clusterpolicy >&2 2>/dev/null || true
        # Who last wrote each pod (a Ready condition nobody set back is otherwise a mystery).
        k get pods -A --show-managed-fields -o jsonpath='{range .items[*]}{.metadata.name}{":"}{range .metadata.managedFields[*]}{" "}{.manager}{"/"}{.operation}{"/"}{.subresource}{"@"}{.time}{end}{"\n"}{end}' >&2 2>/dev/null || true
        # What the DaemonSet controller last wrote: the ClusterPolicy's states are read from it.
        k get ds -A -o custom-columns='NAME:.metadata.name,GEN:.metadata.generation,OBSERVED:.status.observedGeneration,DESIRED:.status.desiredNumberScheduled,CURRENT:.status.currentNumberScheduled,READY:.status.numberReady,UPDATED:.status.updatedNumberScheduled,AVAILABLE:.status.numberAvailable,UNAVAILABLE:.status.numberUnavailable,RV:.metadata.resourceVersion' >&2 2>/dev/null || true
        for f in "${logs[@]}"; do
            [ -f "$f" ] || continue
            echo "--- last lines of $(basename "$f") ---" >&2
            tail -n 30 "$f" >&2 || true
            # The whole log, for the conformance lane to keep with the component logs.
            if [ -n "${E2E_KEEP_LOGS:-}" ]; then cp "$f" "$E2E_KEEP_LOGS/" 2>/dev/null || true; fi
        done
    fi
    # A sanitizer build of the operator (OPERATOR_BIN) reports when it exits: stop the cluster
    # (and with it the operator's processes) first; any report fails the run.
    if [ "$E2E_CLUSTER" = real ]; then
        "$E2E_ROOT/realcluster" stop-pods --state "$E2E_DIR" >/dev/null 2>&1 || true
    else
        "$E2E_ROOT/cluster" down --dir "$E2E_DIR" >/dev/null 2>&1 || true
    fi
    logs=("$E2E_DIR"/logs/*_gpu-operator-*.log)
    if [ -f "${logs[0]}" ] && grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "${logs[@]}"; then
        echo "FAIL: the operator's sanitizer reported errors:" >&2
        grep -E -A20 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "${logs[@]}" | head -60 >&2
        rc=1
    fi
    # --- least privilege: no request by the chart's ServiceAccounts was denied (403) in this
    # scenario for want of a permission (kubesim's authorization decisions; e2e/rbac_usage.py,
    # against the chart's RBAC as rendered by helm template).
    if [ -f "$E2E_DIR/auth-decisions.jsonl" ] &&
        ! { h template gpu-operator "$REPO_ROOT/charts/gpu-operator" -n gpu-operator >"$E2E_DIR/rbac-rendered.yaml" &&
            python3 "$E2E_ROOT/rbac_usage.py" --denied-only --sa-names gpu-operator,gpu-operator-hooks \
                --manifest "$E2E_DIR/rbac-rendered.yaml" --decisions "$E2E_DIR/auth-decisions.jsonl"; } \
            >"$E2E_DIR/denied.txt" 2>&1; then
        echo "FAIL: requests by the chart's ServiceAccounts were denied:" >&2
        head -40 "$E2E_DIR/denied.txt" >&2
        rc=1
    fi
    # --- end least privilege
    set +e # the status below must reach cleanup, which stops the cluster
    (exit $rc)
    cleanup
}
trap chart_on_exit EXIT

# chart_install_ready [helm args...]: helm install of the chart as gpu-operator (free ports for
# the operator's endpoints), then waits for the ClusterPolicy to be ready.
chart_install_ready() {
    h install gpu-operator charts/gpu-operator -n gpu-operator --create-namespace \
        "${PORT_FLAGS[@]}" "$@" --wait --timeout 90s >/dev/null
    until_eq "ready" "ready" 120 cp_state
}

# chart_uninstall: helm uninstall --wait of the release; its output in $E2E_DIR/uninstall.out.
chart_uninstall() {
    h uninstall gpu-operator -n gpu-operator --wait --timeout 90s >"$E2E_DIR/uninstall.out" 2>&1 ||
        { cat "$E2E_DIR/uninstall.out" >&2; fail "helm uninstall"; }
}

cp_state() { k get clusterpolicy "${1:-cluster-policy}" -o jsonpath='{.status.state}'; }

# pods_on NODE: "name=phase" of the gpu-operator pods on NODE, one a line.
pods_on() {
    k get pods -n gpu-operator --field-selector "spec.nodeName=$1" \
        -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{"\n"}{end}'
}

# ds_image NAME CONTAINER: the image of a container of an operand DaemonSet.
ds_image() {
    k get ds -n gpu-operator "$1" -o jsonpath="{.spec.template.spec.containers[?(@.name==\"$2\")].image}"
}

# ds_image_ns NAME CONTAINER: as ds_image, in $NS.
ds_image_ns() {
    k get ds -n "$NS" "$1" -o jsonpath="{.spec.template.spec.containers[?(@.name==\"$2\")].image}"
}
