#!/usr/bin/env bash
# The real kubectl against kubesim over HTTPS: apply, get, label, annotate, patch, describe,
# delete with a finalizer, wait, logs, protobuf bodies and CRD printer columns.
. "$(dirname "$0")/../lib.sh"
cluster_up --fleet "$E2E_ROOT/testdata/fleet-small.yaml"

step "discovery and namespaces"
out=$(k get ns -o name)
assert_contains "namespaces" "namespace/default" "$out"
assert_contains "namespaces" "namespace/kube-system" "$out"
assert_eq "nodes" "2" "$(k get nodes --no-headers | wc -l | tr -d ' ')"

step "create configmap (protobuf body) and apply create/update"
k create configmap proto-cm --from-literal=a=b >/dev/null
assert_eq "configmap data" "b" "$(k get configmap proto-cm -o jsonpath='{.data.a}')"
cat >"$E2E_DIR/cm.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  labels: {tier: web, env: prod}
data:
  key: one
YAML
k apply -f "$E2E_DIR/cm.yaml" | grep "configmap/applied created" >/dev/null || fail "apply create"
sed -i 's/key: one/key: two/' "$E2E_DIR/cm.yaml"
k apply -f "$E2E_DIR/cm.yaml" | grep "configmap/applied configured" >/dev/null || fail "apply update"
assert_eq "applied data" "two" "$(k get cm applied -o jsonpath='{.data.key}')"
sed -i 's/key: two/key: three/; s/name: applied/name: ssa/' "$E2E_DIR/cm.yaml"
k apply --server-side -f "$E2E_DIR/cm.yaml" >/dev/null
assert_eq "server-side apply" "three" "$(k get cm ssa -o jsonpath='{.data.key}')"

step "get -o yaml / -o wide / set-based selectors"
k get cm applied -o yaml | grep "key: two" >/dev/null || fail "get -o yaml"
k get nodes -o wide | grep "INTERNAL-IP" >/dev/null || fail "get -o wide columns"
assert_eq "set selector" "configmap/applied configmap/ssa" \
    "$(k get cm -l 'tier in (web,api),env!=dev' -o name | sort | tr '\n' ' ' | sed 's/ $//')"
assert_eq "notin selector" "" "$(k get cm -l 'tier notin (web)' -o name | grep applied || true)"

step "label, annotate, patch"
k label cm applied tier=api --overwrite >/dev/null
assert_eq "label" "api" "$(k get cm applied -o jsonpath='{.metadata.labels.tier}')"
k annotate cm applied note=hello >/dev/null
assert_eq "annotate" "hello" "$(k get cm applied -o jsonpath='{.metadata.annotations.note}')"
k patch cm applied --type merge -p '{"data":{"m":"1"}}' >/dev/null
k patch cm applied --type json -p '[{"op":"add","path":"/data/j","value":"2"}]' >/dev/null
k patch cm applied -p '{"data":{"s":"3"}}' >/dev/null
assert_eq "patches" "1 2 3" "$(k get cm applied -o jsonpath='{.data.m} {.data.j} {.data.s}')"
out=$(assert_fails "json patch test op" k patch cm applied --type json -p '[{"op":"test","path":"/data/m","value":"x"}]')

step "pods: wait Ready, logs, describe"
cat >"$E2E_DIR/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
    - name: c
      image: registry.example/web:1.0
YAML
k apply -f "$E2E_DIR/pod.yaml" >/dev/null
k wait --for=condition=Ready pod/web --timeout=30s >/dev/null
k wait --for=jsonpath='{.status.phase}'=Running pod/web --timeout=30s >/dev/null
k logs web >/dev/null
node=$(k get pod web -o jsonpath='{.spec.nodeName}')
[ -n "$node" ] || fail "pod not scheduled"
k describe node "$node" | grep "Allocatable" >/dev/null || fail "describe node"
k describe pod web | grep "Scheduled" >/dev/null || fail "describe pod lists events"

step "delete with a finalizer removed by a second client"
k create configmap fin >/dev/null
k patch cm fin --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}' >/dev/null
k delete cm fin --wait=false >/dev/null
[ -n "$(k get cm fin -o jsonpath='{.metadata.deletionTimestamp}')" ] || fail "deletionTimestamp"
( sleep 1; k patch cm fin --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null ) &
k wait --for=delete cm/fin --timeout=30s >/dev/null
wait

step "CRD printer columns and schema validation"
k apply -f "$E2E_ROOT/testdata/widget-crd.yaml" >/dev/null
crd_established widgets.example.com
printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {mode: mixed, size: 2}\n' | k apply -f - >/dev/null
k patch widget w1 --subresource=status --type merge -p '{"status":{"state":"ready"}}' >/dev/null
out=$(k get widgets)
assert_contains "printer columns" "STATUS" "$out"
assert_contains "printer column value" "ready" "$out"
out=$(assert_fails "enum validation" sh -c "printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {mode: bogus}\n' | kubectl --kubeconfig $KUBECONFIG_E2E --cache-dir $KCACHE apply -f -")
assert_contains "enum message" 'Unsupported value: "bogus"' "$out"

step "get clusterpolicy shows the CRD's printer columns"
k apply -f "$E2E_ROOT/testdata/clusterpolicy-crd-min.yaml" >/dev/null
crd_established clusterpolicies.nvidia.com
printf 'apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\nspec: {}\n' | k apply -f - >/dev/null
k patch clusterpolicy cluster-policy --subresource=status --type merge -p '{"status":{"state":"ready"}}' >/dev/null
out=$(k get clusterpolicy)
assert_eq "clusterpolicy header" "NAME STATUS AGE" "$(head -1 <<<"$out" | tr -s ' ')"
assert_contains "clusterpolicy row" "cluster-policy   ready" "$out"
echo "kubectl basics: ok"
