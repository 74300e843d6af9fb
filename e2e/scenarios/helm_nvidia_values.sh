#!/usr/bin/env bash
# A user migrating from NVIDIA's GPU Operator brings NVIDIA's values file
# (e2e/testdata/nvidia-values/: every key of NVIDIA's chart at v23.9, v24.9, v25.10 and v26.7 with
# its default). With it `helm template` and `helm install` work: NVIDIA's keys do what NVIDIA's do
# (gpuPodDeletion, operator.logging/env, clusterPolicy.deployCR, the CSV DCGM metrics list), the
# operator and validator images are this chart's (NVIDIA's values name NVIDIA's registry with no
# version), nfd.enabled: true installs (the notes say that this chart deploys no Node Feature
# Discovery and how many nodes carry the GPU label NFD gives), and each feature this operator does
# not implement installs while off and fails with its key's name and "not supported by this
# operator" when turned on. Typos are still refused, and so is a ClusterPolicy spec typo under
# kubectl's strict field validation. The operator pod carries NVIDIA's drain-skip label and its
# metrics Service reaches operator.metricsPort; operator.cleanupCRD deletes the CRD on uninstall.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"
chart=charts/gpu-operator
values="$E2E_ROOT/testdata/nvidia-values"
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")
[ -n "$app" ] || fail "no appVersion in $chart/Chart.yaml"

# check_render FILE: the objects helm template rendered from one of NVIDIA's values files.
check_render() {
    python3 - "$1" "$app" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
app = sys.argv[2]
bad = []
def one(kind, name=None):
    got = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(got) != 1:
        bad.append("want one %s %s, got %d" % (kind, name or "", len(got)))
        return {}
    return got[0]
spec = one("ClusterPolicy").get("spec", {})
for sec in ("validator", "nodeStatusExporter"):
    s = spec.get(sec, {})
    img = "%s/%s:%s" % (s.get("repository"), s.get("image"), s.get("version"))
    if img != "ghcr.io/gpu-operator/gpu-operator-validator:" + app:
        bad.append("spec.%s image %s" % (sec, img))
drv = spec.get("driver", {})
if "nvidiaDriverCRD" in drv:
    bad.append("spec.driver.nvidiaDriverCRD rendered")
up = drv.get("upgradePolicy", {})
if "gpuPodDeletion" in up or up.get("podDeletion") != {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False}:
    bad.append("gpuPodDeletion not rendered as podDeletion: %r" % up)
for k in ("cleanupCRD", "logging", "env", "repository", "image"):
    if k in spec.get("operator", {}):
        bad.append("chart-only key spec.operator.%s rendered" % k)
dep = one("Deployment", "gpu-operator")
pod = dep.get("spec", {}).get("template", {})
c = (pod.get("spec", {}).get("containers") or [{}])[0]
if c.get("image") != "ghcr.io/gpu-operator/gpu-operator:" + app:
    bad.append("operator image %s" % c.get("image"))
for where, labels in (("Deployment", dep.get("metadata", {}).get("labels", {})),
                      ("pod", pod.get("metadata", {}).get("labels", {}))):
    if labels.get("nvidia.com/gpu-driver-upgrade-drain.skip") != "true":
        bad.append("%s lacks nvidia.com/gpu-driver-upgrade-drain.skip=true" % where)
env = {e["name"]: e.get("value") for e in c.get("env", [])}
if env.get("KC_LOG_LEVEL") != "info":
    bad.append("operator.logging.level info: KC_LOG_LEVEL %r" % env.get("KC_LOG_LEVEL"))
# NVIDIA's develMode false is zap's production encoder (JSON); timeEncoding epoch.
if env.get("KC_LOG_FORMAT") != "json" or env.get("KC_LOG_TIME") != "epoch":
    bad.append("operator.logging develMode=false, timeEncoding=epoch: KC_LOG_FORMAT %r, KC_LOG_TIME %r"
               % (env.get("KC_LOG_FORMAT"), env.get("KC_LOG_TIME")))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

step "helm template with each of NVIDIA's values files"
for v in v23.9 v24.9 v25.10 v26.7; do
    h template gpu-operator "$chart" -n gpu-operator -f "$values/$v.yaml" \
        >"$E2E_DIR/$v.yaml" 2>"$E2E_DIR/$v.err" || fail "helm template -f $v: $(cat "$E2E_DIR/$v.err")"
    check_render "$E2E_DIR/$v.yaml" || fail "$v: rendered objects"
done

step "operator.logging, operator.env, clusterPolicy.deployCR"
h template x "$chart" -f "$values/v26.7.yaml" --set operator.logging.develMode=true \
    --set 'operator.env[0].name=HTTPS_PROXY' --set 'operator.env[0].value=http://proxy:3128' >"$E2E_DIR/env.yaml"
assert_eq "develMode and env" "KC_LOG_LEVEL=debug KC_LOG_FORMAT=text KC_LOG_TIME=epoch HTTPS_PROXY=http://proxy:3128" "$(python3 -c '
import sys, yaml
d = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"][0]
print(" ".join("%s=%s" % (e["name"], e["value"]) for e in d["spec"]["template"]["spec"]["containers"][0]["env"] if "value" in e))' "$E2E_DIR/env.yaml")"
assert_eq "deployCR=false: no ClusterPolicy" "0" \
    "$(h template x "$chart" -f "$values/v26.7.yaml" --set clusterPolicy.deployCR=false | grep -c '^kind: ClusterPolicy' || true)"

step "dcgmExporter.config.data as NVIDIA's CSV string: the chart creates the ConfigMap"
printf 'DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %%).\nDCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n' >"$E2E_DIR/metrics.csv"
h template x "$chart" -n gpu-operator -f "$values/v26.7.yaml" --set dcgmExporter.config.create=true \
    --set dcgmExporter.config.name=custom-dcgm-metrics --set-file dcgmExporter.config.data="$E2E_DIR/metrics.csv" \
    >"$E2E_DIR/dcgm.yaml" 2>"$E2E_DIR/dcgm.err" || fail "CSV metrics list: $(cat "$E2E_DIR/dcgm.err")"
python3 - "$E2E_DIR/dcgm.yaml" "$E2E_DIR/metrics.csv" <<'PY' || fail "the DCGM metrics ConfigMap"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "custom-dcgm-metrics"]
cp = [d for d in docs if d["kind"] == "ClusterPolicy"][0]
assert len(cm) == 1, "no ConfigMap custom-dcgm-metrics"
assert cm[0]["data"] == {"dcgm-metrics.csv": open(sys.argv[2]).read()}, cm[0]["data"]
assert cp["spec"]["dcgmExporter"]["config"] == {"name": "custom-dcgm-metrics"}, cp["spec"]["dcgmExporter"]["config"]
PY

step "features this operator does not implement: off by default, on fails naming the key"
unsupported() { # KEY SET...: helm template with SET fails naming KEY
    local key=$1 out; shift
    out=$(assert_fails "$key on" h template x "$chart" -f "$values/v26.7.yaml" "$@")
    assert_contains "$key named" "$key" "$out"
    assert_contains "$key: not supported" "not supported by this operator" "$out"
}
unsupported driver.nvidiaDriverCRD.enabled --set driver.nvidiaDriverCRD.enabled=true
unsupported gpuCluster.deployCR --set gpuCluster.deployCR=true
unsupported draDriver --set gpuCluster.deployCR=true
unsupported kataManager.enabled --set kataManager.enabled=true
unsupported kataSandboxDevicePlugin.enabled --set sandboxWorkloads.enabled=true --set sandboxWorkloads.mode=kata
unsupported psp.enabled -f "$values/v23.9.yaml" --set psp.enabled=true

step "typos in NVIDIA's keys are still refused with the key's path"
typo() { # WHAT SET
    local out
    out=$(assert_fails "$2" h template x "$chart" -f "$values/v26.7.yaml" --set "$2")
    assert_contains "$2 named" "$1" "$out"
}
typo "operator: Additional property cleanupCRDs is not allowed" operator.cleanupCRDs=true
typo "gpuPodDeletion: Additional property forse is not allowed" driver.upgradePolicy.gpuPodDeletion.forse=true
typo "gpuCluster: Additional property deployCr is not allowed" gpuCluster.deployCr=true
typo "draDriver: Additional property imageTag is not allowed" draDriver.imageTag=v1
typo "logging" operator.logging.level=verbose
typo "Additional property kataSandboxDevicePlugins is not allowed" kataSandboxDevicePlugins.enabled=false
typo "nfd: Additional property enable is not allowed" nfd.enable=true

chart_cluster_up "$E2E_ROOT/testdata/fleet-nodesim.yaml"

step "the ClusterPolicy CRD refuses a spec typo under strict field validation"
k apply -f crds/nvidia.com_clusterpolicies.yaml >/dev/null
crd_established clusterpolicies.nvidia.com
printf 'apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: typo}\nspec:\n  devicePlugn: {enabled: false}\n  driver: {upgradePolicy: {gpuPodDeletion: {force: true}}}\n' >"$E2E_DIR/typo.yaml"
out=$(assert_fails "spec typo" k apply --validate=strict -f "$E2E_DIR/typo.yaml")
assert_contains "spec.devicePlugn refused" 'strict decoding error: unknown field "spec.devicePlugn"' "$out"
assert_contains "nested typo refused" 'unknown field "spec.driver.upgradePolicy.gpuPodDeletion"' "$out"
out=$(k apply --validate=false -f "$E2E_DIR/typo.yaml" 2>&1) || fail "apply --validate=false: $out"
assert_eq "spec.devicePlugn pruned without strict validation" "" \
    "$(k get clusterpolicy typo -o jsonpath='{.spec.devicePlugn}')"
assert_eq "gpuPodDeletion pruned" "" "$(k get clusterpolicy typo -o jsonpath='{.spec.driver.upgradePolicy.gpuPodDeletion}')"
k delete clusterpolicy typo >/dev/null

step "helm install with each of NVIDIA's values files, then helm uninstall"
for v in v23.9 v24.9 v25.10 v26.7; do
    # the last one also turns NVIDIA's operator.cleanupCRD on: uninstall deletes the CRD
    extra=()
    [ "$v" = v26.7 ] && extra=(--set operator.cleanupCRD=true)
    h install gpu-operator "$chart" -n gpu-operator --create-namespace --wait --timeout 60s \
        -f "$values/$v.yaml" "${PORT_FLAGS[@]}" "${extra[@]}" >"$E2E_DIR/install-$v.out" 2>&1 ||
        { cat "$E2E_DIR/install-$v.out" >&2; fail "helm install -f $v"; }
    notes=$(cat "$E2E_DIR/install-$v.out")
    assert_contains "$v: NFD not deployed" "This chart does not deploy Node Feature Discovery (NFD): nfd.enabled=true deploys it with NVIDIA's chart only." "$notes"
    assert_contains "$v: GPU nodes counted" "GPU nodes now: 3 of 4 nodes carry the label." "$notes"
    assert_contains "$v: NFD subchart values unused" "the node-feature-discovery values are not used" "$notes"
    assert_eq "$v: operator ready" "1" "$(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.status.readyReplicas}')"
    assert_eq "$v: drain-skip label on the operator pod" "true" \
        "$(k get pods -n gpu-operator -l app=gpu-operator -o jsonpath='{.items[0].metadata.labels.nvidia\.com/gpu-driver-upgrade-drain\.skip}')"
    until_eq "$v: the validator runs this chart's image" "ghcr.io/gpu-operator/gpu-operator-validator:$app" 60 \
        ds_image nvidia-operator-validator nvidia-operator-validator
    if [ "$v" = v26.7 ]; then
        until_eq "$v: ClusterPolicy ready" "ready" 120 cp_state
        assert_eq "metrics Service targets the pod's metrics port" "metrics" \
            "$(k get svc gpu-operator -n gpu-operator -o jsonpath='{.spec.ports[0].targetPort}')"
        until_eq "metrics Endpoints: operator.metricsPort" "$METRICS_PORT" 30 \
            k get endpoints gpu-operator -n gpu-operator -o jsonpath='{.subsets[0].ports[0].port}'
        assert_contains "metrics served there" "gpu_operator_reconciliation_status" \
            "$(curl -sf "http://127.0.0.1:$METRICS_PORT/metrics")"
    fi
    h uninstall gpu-operator -n gpu-operator --wait --timeout 90s >"$E2E_DIR/uninstall-$v.out" 2>&1 ||
        { cat "$E2E_DIR/uninstall-$v.out" >&2; fail "helm uninstall ($v)"; }
    assert_eq "$v: ClusterPolicy gone" "" "$(k get clusterpolicy -o name)"
    until_eq "$v: pods gone" "" 60 k get pods -n gpu-operator -o name
done
assert_contains "operator.cleanupCRD: the pre-delete hook deleted the CRD" \
    "customresourcedefinition.apiextensions.k8s.io/clusterpolicies.nvidia.com gone" \
    "$(cat "$E2E_DIR/logs/gpu-operator_gpu-operator-cleanup_cleanup.log")"
assert_eq "CRD gone" "" "$(k get crd -o name | grep clusterpolicies || true)"
echo "PASS helm_nvidia_values"
