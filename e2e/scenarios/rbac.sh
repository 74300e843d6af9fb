#!/usr/bin/env bash
# RBAC with the real kubectl against kubesim --rbac: a ServiceAccount's token from
# `kubectl create token`, requests as that token forbidden with the API server's message until a
# Role and RoleBinding grant them (in that namespace only), a RoleBinding to a ClusterRole staying
# namespace-scoped, and `kubectl auth can-i` answering from the same rules.
. "$(dirname "$0")/../lib.sh"
cluster_up -- --rbac

step "namespaces and a ServiceAccount (protobuf bodies), its token"
k create namespace rbac-a >/dev/null
k create namespace rbac-b >/dev/null
k create serviceaccount viewer -n rbac-a >/dev/null
token=$(k create token viewer -n rbac-a --duration=1h)
[ -n "$token" ] || fail "kubectl create token printed no token"
out=$(assert_fails "token of a missing ServiceAccount" k create token nosuch -n rbac-a)
assert_contains "missing ServiceAccount" 'serviceaccounts "nosuch" not found' "$out"

# kubectl as the ServiceAccount: the admin kubeconfig's server and CA, the token as credentials.
as_sa() { kubectl --kubeconfig "$KUBECONFIG_E2E" --cache-dir "$KCACHE-sa" --token="$token" "$@"; }
user='User "system:serviceaccount:rbac-a:viewer"'

step "nothing bound: forbidden with the API server's message"
out=$(assert_fails "get pods as the ServiceAccount" as_sa get pods -n rbac-a)
assert_contains "forbidden" "Error from server (Forbidden): pods is forbidden: $user cannot list resource \"pods\" in API group \"\" in the namespace \"rbac-a\"" "$out"
assert_eq "can-i before the grant" "no" "$(as_sa auth can-i list pods -n rbac-a || true)"
out=$(assert_fails "a ServiceAccount cannot mint tokens" as_sa create token viewer -n rbac-a)
assert_contains "token forbidden" "serviceaccounts \"viewer\" is forbidden: $user cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"rbac-a\"" "$out"

step "a Role and RoleBinding grant list pods in rbac-a only"
cat >"$E2E_DIR/role.yaml" <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: rbac-a}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer-pods, namespace: rbac-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
  - kind: ServiceAccount
    name: viewer
    namespace: rbac-a
YAML
k apply -f "$E2E_DIR/role.yaml" >/dev/null
out=$(as_sa get pods -n rbac-a 2>&1) || fail "get pods in rbac-a after the grant: $out"
assert_contains "allowed list" "No resources found in rbac-a namespace." "$out"
out=$(assert_fails "get pods in rbac-b" as_sa get pods -n rbac-b)
assert_contains "other namespace" "pods is forbidden: $user cannot list resource \"pods\" in API group \"\" in the namespace \"rbac-b\"" "$out"
out=$(assert_fails "get pods in every namespace" as_sa get pods -A)
assert_contains "cluster scope" "cannot list resource \"pods\" in API group \"\" at the cluster scope" "$out"
assert_eq "can-i list pods in rbac-a" "yes" "$(as_sa auth can-i list pods -n rbac-a)"
assert_eq "can-i list pods in rbac-b" "no" "$(as_sa auth can-i list pods -n rbac-b || true)"
assert_eq "can-i delete pods in rbac-a" "no" "$(as_sa auth can-i delete pods -n rbac-a || true)"
assert_eq "the admin can" "yes" "$(k auth can-i delete nodes --all-namespaces)"

step "a RoleBinding to a ClusterRole stays namespace-scoped"
cat >"$E2E_DIR/clusterrole.yaml" <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cm-reader}
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer-cms, namespace: rbac-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cm-reader}
subjects:
  - kind: ServiceAccount
    name: viewer
    namespace: rbac-a
YAML
k apply -f "$E2E_DIR/clusterrole.yaml" >/dev/null
k create configmap settings -n rbac-a --from-literal=a=b >/dev/null
k create configmap settings -n rbac-b --from-literal=a=b >/dev/null
assert_eq "configmap in rbac-a" "b" "$(as_sa get configmap settings -n rbac-a -o jsonpath='{.data.a}')"
out=$(assert_fails "configmap in rbac-b" as_sa get configmap settings -n rbac-b)
assert_contains "ClusterRole through a RoleBinding" "configmaps \"settings\" is forbidden: $user cannot get resource \"configmaps\" in API group \"\" in the namespace \"rbac-b\"" "$out"
out=$(assert_fails "configmaps in every namespace" as_sa get configmaps -A)
assert_contains "no cluster-wide grant" "at the cluster scope" "$out"
assert_eq "can-i get configmaps in rbac-b" "no" "$(as_sa auth can-i get configmaps -n rbac-b || true)"

step "removing the binding takes the grant away"
k delete rolebinding viewer-pods -n rbac-a >/dev/null
out=$(assert_fails "get pods after unbinding" as_sa get pods -n rbac-a)
assert_contains "forbidden again" "pods is forbidden: $user" "$out"
echo "rbac: ok"
