#!/usr/bin/env bash
# Least privilege of the chart: the operator (and the hooks) run under the chart's ServiceAccounts
# with RBAC on through install to ready, a ClusterPolicy edit, MIG all-balanced (mixed strategy),
# a second ClusterPolicy (ignored), hand edits of owned objects (restored), time slicing, a driver
# upgrade, a node deletion, helm upgrade and helm uninstall; the operator's validation pods run
# unprivileged in every mode but driver (which reaches the GPUs outside the nvidia runtime:
# privileged, the driver root read-only, nothing else of the host). Then e2e/rbac_usage.py reads kubesim's authorization decisions: no
# request of theirs was denied, and every verb the chart grants them was used or is justified in
# charts/gpu-operator/rbac-justification.yaml (a justification no longer needed fails too).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "reads kubesim's authorization decision log (auth-decisions.jsonl)"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --mig-apply-ms=500
# With the Prometheus operator's CRD the operator manages ServiceMonitors too.
k apply -f "$E2E_ROOT/testdata/servicemonitor-crd.yaml" >/dev/null
crd_established servicemonitors.monitoring.coreos.com
h install gpu-operator charts/gpu-operator -n gpu-operator --create-namespace \
    --set mig.strategy=mixed "${PORT_FLAGS[@]}" --wait --timeout 90s >/dev/null
until_eq "ready" "ready" 120 cp_state

step "edit the ClusterPolicy: dcgm-exporter off (its objects deleted) and on again"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
until_eq "DaemonSet gone" "" 30 k get ds -n gpu-operator nvidia-dcgm-exporter -o name --ignore-not-found
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":true}}}' >/dev/null
until_eq "ready after the edit" "ready" 120 cp_state

step "a second ClusterPolicy is marked ignored"
k get clusterpolicy cluster-policy -o json |
    python3 -c 'import json,sys; p=json.load(sys.stdin); print(json.dumps({"apiVersion":p["apiVersion"],"kind":p["kind"],"metadata":{"name":"second-policy"},"spec":p["spec"]}))' |
    k create -f - >/dev/null
until_eq "ignored" "ignored" 30 cp_state second-policy
k delete clusterpolicy second-policy --wait=true >/dev/null

step "objects edited by hand are restored (the operator updates every kind it owns)"
hash=nvidia.com/last-applied-hash
edits=(configmap/default-mig-parted-config serviceaccount/nvidia-driver service/nvidia-dcgm-exporter
    role/nvidia-driver rolebinding/nvidia-driver servicemonitor/gpu-operator
    clusterrole/nvidia-driver clusterrolebinding/nvidia-driver runtimeclass/nvidia)
for o in "${edits[@]}"; do
    k annotate -n gpu-operator "$o" --overwrite "$hash=edited" >/dev/null
done
hash_of() { k get -n gpu-operator "$1" -o jsonpath="{.metadata.annotations.${hash//./\\.}}"; }
restored() { local v; v=$(hash_of "$1") && [ -n "$v" ] && [ "$v" != edited ] && echo restored; }
for o in "${edits[@]}"; do
    until_eq "$o restored" "restored" 60 restored "$o"
done

step "MIG all-balanced on p4d-0"
k label nodes p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
until_eq "capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" \
    90 node_gpu_resources p4d-0
until_eq "ready after MIG" "ready" 120 cp_state

step "the operator's validation pods: unprivileged in every mode but driver"
k get pods -n gpu-operator -l app=nvidia-cuda-validator -o json | python3 -c '
import json, sys
bad, modes = [], set()
for p in json.load(sys.stdin)["items"]:
    driver = False
    for c in p["spec"]["containers"]:
        a = c.get("args") or []
        mode = a[a.index("--mode") + 1]
        modes.add(mode)
        driver = mode == "driver"
        sc = c.get("securityContext") or {}
        if driver:
            if sc != {"privileged": True, "readOnlyRootFilesystem": True}:
                bad.append("%s: %s" % (p["metadata"]["name"], sc))
        elif sc.get("privileged") or sc.get("allowPrivilegeEscalation") is not False or (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            bad.append("%s: %s" % (p["metadata"]["name"], sc))
    bad += ["%s: %s" % (p["metadata"]["name"], k) for k in ("hostNetwork", "hostPID", "hostIPC") if p["spec"].get(k)]
    for v in p["spec"].get("volumes") or []:
        if "hostPath" in v and not (driver and v["hostPath"]["path"] == "/run/nvidia/driver"):
            bad.append("%s: hostPath %s" % (p["metadata"]["name"], v["hostPath"]["path"]))
if not {"driver", "toolkit", "plugin", "mig"} <= modes:
    bad.append("modes seen: %s" % sorted(modes))
print("\n".join(bad)) if bad else None; sys.exit(1 if bad else 0)' || fail "a validation pod has privileges"

step "time slicing: a ConfigMap named in the ClusterPolicy"
k apply -n gpu-operator -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: 4
YAML
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"any"}}}}' >/dev/null
until_eq "T4 time-sliced" "16" 90 node_res t4-0 capacity nvidia.com/gpu

step "driver upgrade, node by node"
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"driver":{"version":"560.35.03","upgradePolicy":{"autoUpgrade":true,"maxParallelUpgrades":3}}}}' >/dev/null
until_eq "all upgraded" "upgrade-done upgrade-done upgrade-done" 150 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get nodes -l feature.node.kubernetes.io/pci-10de.present=true -o jsonpath='{.items[*].metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'"
until_eq "ready after the upgrade" "ready" 120 cp_state

step "node deletion"
k delete node t4-0 >/dev/null
until_eq "its pods gone" "" 60 pods_on t4-0
until_eq "ready without t4-0" "ready" 120 cp_state

step "helm upgrade (pre-upgrade hook re-applies the CRD)"
h upgrade gpu-operator charts/gpu-operator -n gpu-operator --reuse-values \
    "${PORT_FLAGS[@]}" --wait --timeout 120s >/dev/null
until_eq "ready after the upgrade" "ready" 120 cp_state

# The rendered RBAC, hooks included, before uninstall removes the release.
h get manifest gpu-operator -n gpu-operator >"$E2E_DIR/manifest.yaml"
h get hooks gpu-operator -n gpu-operator >"$E2E_DIR/hooks.yaml"

step "helm uninstall (pre-delete hook deletes the ClusterPolicy, the finalizer cleans up)"
h uninstall gpu-operator -n gpu-operator --wait --timeout 120s >"$E2E_DIR/uninstall.out" 2>&1 ||
    { cat "$E2E_DIR/uninstall.out" >&2; fail "helm uninstall"; }
assert_eq "ClusterPolicy gone" "" "$(k get clusterpolicy -o name)"

step "no request denied; every granted verb used or justified"
python3 "$E2E_ROOT/rbac_usage.py" --manifest "$E2E_DIR/manifest.yaml" --manifest "$E2E_DIR/hooks.yaml" \
    --decisions "$E2E_DIR/auth-decisions.jsonl" --states "$REPO_ROOT/states" \
    --justification "$REPO_ROOT/charts/gpu-operator/rbac-justification.yaml" --namespace gpu-operator ||
    fail "the chart's RBAC is not least privilege (see above)"
echo "PASS rbac_least_privilege"
