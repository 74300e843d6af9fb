#!/usr/bin/env bash
# The Helm chart without the operator running: `helm lint --strict` clean; values.schema.json is
# what scripts/gen-chart-schema.py writes from the CRD; the chart's CRD is the top-level one (also
# inside `helm package`); `helm template` output, with the defaults and with every spec section
# of e2e/testdata/clusterpolicy-full.yaml given as values, applies to kubesim with the real
# kubectl (strict field validation) and carries each value into the ClusterPolicy; the operator's
# and the hooks' pods run non-root, read-only, no privilege escalation, no capabilities, nothing
# from the host; wrong keys, types and enums fail with the key's path.
source "$(dirname "$0")/../lib.sh"
cd "$REPO_ROOT"
chart=charts/gpu-operator

step "helm lint --strict"
out=$(h lint --strict "$chart" 2>&1) || fail "helm lint: $out"
assert_contains "lint" "0 chart(s) failed" "$out"
case "$out" in *"[WARNING]"*|*"[ERROR]"*) fail "helm lint reported: $out" ;; esac

step "values.schema.json is generated from the CRD"
python3 scripts/gen-chart-schema.py --check || fail "values.schema.json is stale"

step "one CRD: the chart's crds/ file is crds/nvidia.com_clusterpolicies.yaml, also when packaged"
cmp -s "$chart/crds/nvidia.com_clusterpolicies.yaml" crds/nvidia.com_clusterpolicies.yaml ||
    fail "charts/gpu-operator/crds/nvidia.com_clusterpolicies.yaml differs from crds/nvidia.com_clusterpolicies.yaml"
h package "$chart" -d "$E2E_DIR" >/dev/null 2>&1 || fail "helm package"
tar -m -xzf "$E2E_DIR/gpu-operator-0.1.0.tgz" -C "$E2E_DIR" gpu-operator/crds/nvidia.com_clusterpolicies.yaml
cmp -s "$E2E_DIR/gpu-operator/crds/nvidia.com_clusterpolicies.yaml" crds/nvidia.com_clusterpolicies.yaml ||
    fail "the packaged chart's CRD differs from crds/nvidia.com_clusterpolicies.yaml"

step "RBAC escalation: the operator holds every permission the states' Roles and ClusterRoles grant"
h template gpu-operator "$chart" -n gpu-operator >"$E2E_DIR/rbac.yaml" 2>/dev/null
python3 - "$E2E_DIR/rbac.yaml" states <<'PY' || fail "the chart's operator roles miss permissions the states grant"
import glob, os, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def rules(kind):
    return [r for d in docs if d["kind"] == kind and d["metadata"]["name"] == "gpu-operator" for r in d["rules"]]
cluster, ns = rules("ClusterRole"), rules("Role")
def tuples(rule):
    for g in rule.get("apiGroups", []):
        for res in rule.get("resources", []):
            for v in rule.get("verbs", []):
                for n in rule.get("resourceNames") or [None]:
                    yield g, res, v, n
def held(t, have):
    g, res, v, n = t
    return any(g in r.get("apiGroups", []) and res in r.get("resources", []) and v in r.get("verbs", [])
               and (not r.get("resourceNames") or n in r["resourceNames"]) for r in have)
missing = []
for f in sorted(glob.glob(os.path.join(sys.argv[2], "*", "*.yaml"))):
    obj = yaml.safe_load(open(f))
    if obj.get("kind") not in ("Role", "ClusterRole"):
        continue
    have = cluster + ns if obj["kind"] == "Role" else cluster
    for r in obj.get("rules", []):
        missing += ["%s: %s" % (f, t) for t in tuples(r) if not held(t, have)]
print("\n".join(missing))
sys.exit(1 if missing else 0)
PY

step "pod security: the operator's and the hooks' pods, default values"
python3 - "$E2E_DIR/rbac.yaml" <<'PY' || fail "the chart's pods are not locked down"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pods = [(d["kind"] + "/" + d["metadata"]["name"], d["spec"]["template"]["spec"] if d["kind"] == "Deployment" else d["spec"])
        for d in docs if d["kind"] in ("Deployment", "Pod")]
bad = []
names = sorted(n for n, _ in pods)
if names != ["Deployment/gpu-operator", "Pod/gpu-operator-cleanup", "Pod/gpu-operator-upgrade-crd"]:
    bad.append("unexpected pods: %s" % names)
for name, spec in pods:
    psc = spec.get("securityContext") or {}
    for k in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(k):
            bad.append("%s: %s" % (name, k))
    bad += ["%s: hostPath volume %s" % (name, v["name"]) for v in spec.get("volumes") or [] if "hostPath" in v]
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        sc, where = c.get("securityContext") or {}, "%s container %s" % (name, c["name"])
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            bad.append(where + ": runAsNonRoot is not true")
        if (sc.get("runAsUser", psc.get("runAsUser")) or 0) == 0:
            bad.append(where + ": runs as uid 0")
        if sc.get("readOnlyRootFilesystem") is not True:
            bad.append(where + ": readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(where + ": allowPrivilegeEscalation is not false")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"] or (sc.get("capabilities") or {}).get("add"):
            bad.append(where + ": capabilities are not drop [ALL] with nothing added")
        if sc.get("privileged"):
            bad.append(where + ": privileged")
        if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            bad.append(where + ": seccomp profile is not RuntimeDefault")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

step "mistakes fail with the key's path"
out=$(assert_fails "unknown key" h template x "$chart" --set migManager.WITH_REBOT=true)
assert_contains "unknown key" "migManager: Additional property WITH_REBOT is not allowed" "$out"
out=$(assert_fails "unknown top-level key" h template x "$chart" --set devicePlugins.enabled=false)
assert_contains "unknown section" "Additional property devicePlugins is not allowed" "$out"
out=$(assert_fails "bad enum" h template x "$chart" --set mig.strategy=double)
assert_contains "bad enum" "mig.strategy" "$out"
out=$(assert_fails "bad type" h template x "$chart" --set driver.enabled=yes-please)
assert_contains "bad type" "driver.enabled" "$out"
out=$(assert_fails "openshift" h template x "$chart" --set platform.openshift=true)
assert_contains "openshift" "OpenShift is not supported" "$out"

step "helm template applies to kubesim (kubectl, strict validation), defaults and every section"
cluster_up
k apply -f crds/nvidia.com_clusterpolicies.yaml >/dev/null
until_eq "CRD established" "True" 30 k get crd clusterpolicies.nvidia.com \
    -o jsonpath='{.status.conditions[?(@.type=="Established")].status}'
k create namespace gpu-operator >/dev/null
h template gpu-operator "$chart" -n gpu-operator >"$E2E_DIR/default.yaml" 2>/dev/null
k apply -f "$E2E_DIR/default.yaml" >"$E2E_DIR/apply.out" 2>&1 || fail "apply defaults: $(cat "$E2E_DIR/apply.out")"
assert_contains "ClusterPolicy" "clusterpolicy.nvidia.com/cluster-policy created" "$(cat "$E2E_DIR/apply.out")"
assert_contains "Deployment" "deployment.apps/gpu-operator created" "$(cat "$E2E_DIR/apply.out")"
assert_eq "operator args" "--leader-elect --metrics-bind-address=:8080 --health-probe-bind-address=:8081" \
    "$(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.spec.template.spec.containers[0].args[*]}')"
assert_eq "operator resources" '{"limits":{"cpu":"500m","memory":"350Mi"},"requests":{"cpu":"200m","memory":"100Mi"}}' \
    "$(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.spec.template.spec.containers[0].resources}')"
assert_eq "non-root" "1000 true false" "$(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.spec.template.spec.securityContext.runAsUser} {.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem} {.spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation}')"
k delete -n gpu-operator -f "$E2E_DIR/default.yaml" >/dev/null 2>&1 || true

# Every spec section of the full example as values (psp and kataSandboxDevicePlugin are not chart
# values); the rendered ClusterPolicy must carry each of its values.
python3 - "$E2E_ROOT/testdata/clusterpolicy-full.yaml" >"$E2E_DIR/values-full.yaml" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["spec"]
for k in ("psp", "kataSandboxDevicePlugin"):
    spec.pop(k, None)
yaml.safe_dump(spec, sys.stdout)
PY
h template gpu-operator "$chart" -n gpu-operator -f "$E2E_DIR/values-full.yaml" >"$E2E_DIR/full.yaml" 2>"$E2E_DIR/full.err" ||
    fail "helm template with every section: $(cat "$E2E_DIR/full.err")"
k apply -f "$E2E_DIR/full.yaml" >"$E2E_DIR/apply.out" 2>&1 || fail "apply every section: $(cat "$E2E_DIR/apply.out")"
k get clusterpolicy cluster-policy -o json >"$E2E_DIR/stored.json"
python3 - "$E2E_DIR/values-full.yaml" "$E2E_DIR/stored.json" <<'PY' || fail "a value did not reach the ClusterPolicy"
import json, sys, yaml
want = yaml.safe_load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))["spec"]
bad = []
def sub(w, g, path):
    if isinstance(w, dict):
        if not isinstance(g, dict):
            bad.append(path); return
        for k, v in w.items():
            sub(v, g.get(k), path + "." + k)
    elif w != g and not (isinstance(w, list) and w == [] and g in (None, [])):
        bad.append("%s: want %r got %r" % (path, w, g))
# chart-only operator keys never reach spec.operator; everything else must
for sec, v in want.items():
    sub(v, got.get(sec), "spec." + sec)
if bad:
    print("\n".join(bad)); sys.exit(1)
PY
echo "PASS helm_chart_static"
