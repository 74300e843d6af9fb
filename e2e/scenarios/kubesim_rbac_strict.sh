#!/usr/bin/env bash
# The API server's stricter authorization with the real kubectl: RBAC escalation prevention (a
# Role/ClusterRole granting what the requester does not hold needs `escalate`, a binding needs
# `bind` on its role), impersonation (`kubectl --as/--as-group` needs the `impersonate` verb, and
# `auth can-i --as` answers for the impersonated user), and host ports (the scheduler leaves a pod
# whose hostPort is taken on every node Pending; the kubelet rejects one bound there by nodeName).
. "$(dirname "$0")/../lib.sh"
cluster_up --fleet "$E2E_ROOT/testdata/fleet-small.yaml" -- --rbac

k create namespace ra >/dev/null
k create serviceaccount mgr -n ra >/dev/null
cat >"$E2E_DIR/writer.yaml" <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: strict-rbac-writer}
rules:
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [roles, rolebindings, clusterroles, clusterrolebindings]
    verbs: [create, get, update, patch, delete, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: strict-mgr-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: strict-rbac-writer}
subjects: [{kind: ServiceAccount, name: mgr, namespace: ra}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: strict-pod-reader}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list]
YAML
k apply -f "$E2E_DIR/writer.yaml" >/dev/null
token=$(k create token mgr -n ra --duration=1h)
# `kubectl create role|clusterrole|rolebinding|clusterrolebinding` send protobuf, which kubesim
# decodes for a few kinds only: the objects are made client-side and sent as JSON (create -f).
mk() { k create "$@" --dry-run=client -o yaml; }
sa_mk() { mk "$@" | as_sa create -f -; }
adm_mk() { mk "$@" | k create -f - >/dev/null; }
as_sa() { kubectl --kubeconfig "$KUBECONFIG_E2E" --cache-dir "$KCACHE-sa" --token="$token" "$@"; }
groups='(groups=["system:serviceaccounts" "system:serviceaccounts:ra" "system:authenticated"])'
held="user \"system:serviceaccount:ra:mgr\" $groups is attempting to grant RBAC permissions not currently held:"

step "escalation: roles granting what the requester lacks are refused"
out=$(assert_fails "role granting get pods" sa_mk role r1 -n ra --verb=get --resource=pods)
assert_contains "role escalation" "roles.rbac.authorization.k8s.io \"r1\" is forbidden: $held
{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\"]}" "$out"
out=$(assert_fails "clusterrole" sa_mk clusterrole c1 --verb=get,list --resource=pods,configmaps)
assert_contains "clusterrole escalation, compacted and sorted" "clusterroles.rbac.authorization.k8s.io \"c1\" is forbidden: $held
{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\" \"list\"]}
{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}" "$out"
out=$(assert_fails "resourceNames" sa_mk role r3 -n ra --verb=get --resource=pods --resource-name=foo)
assert_contains "resourceNames listed" "{APIGroups:[\"\"], Resources:[\"pods\"], ResourceNames:[\"foo\"], Verbs:[\"get\"]}" "$out"

step "escalation: bindings to roles whose permissions are not held are refused"
out=$(assert_fails "rolebinding" sa_mk rolebinding b1 -n ra --clusterrole=strict-pod-reader --serviceaccount=ra:mgr)
assert_contains "binding escalation" "rolebindings.rbac.authorization.k8s.io \"b1\" is forbidden: $held
{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}" "$out"
out=$(assert_fails "binding to a missing role" sa_mk clusterrolebinding cb2 --clusterrole=nosuch --serviceaccount=ra:mgr)
assert_contains "missing role" 'clusterrolebindings.rbac.authorization.k8s.io "nosuch" not found' "$out"

step "escalate and bind (by name, per namespace) lift the refusals"
adm_mk clusterrole strict-esc --verb=escalate --resource=clusterroles.rbac.authorization.k8s.io --resource=roles.rbac.authorization.k8s.io
adm_mk rolebinding mgr-esc -n ra --clusterrole=strict-esc --serviceaccount=ra:mgr
sa_mk role r1 -n ra --verb=get --resource=pods >/dev/null || fail "escalate in ra allows the role"
out=$(assert_fails "escalate bound in ra only" sa_mk clusterrole c1 --verb=get --resource=pods)
assert_contains "cluster scope still refused" "clusterroles.rbac.authorization.k8s.io \"c1\" is forbidden: $held" "$out"
adm_mk clusterrole strict-bind --verb=bind --resource=clusterroles.rbac.authorization.k8s.io --resource-name=strict-pod-reader
adm_mk rolebinding mgr-bind -n ra --clusterrole=strict-bind --serviceaccount=ra:mgr
sa_mk rolebinding b1 -n ra --clusterrole=strict-pod-reader --serviceaccount=ra:mgr >/dev/null || fail "bind by name allows the binding"
out=$(assert_fails "bind granted in ra only" sa_mk clusterrolebinding cb1 --clusterrole=strict-pod-reader --serviceaccount=ra:mgr)
assert_contains "clusterrolebinding still refused" "clusterrolebindings.rbac.authorization.k8s.io \"cb1\" is forbidden: $held" "$out"

step "impersonation needs the impersonate verb"
out=$(assert_fails "--as without impersonate" as_sa get pods -n ra --as=foo)
assert_contains "users forbidden" 'users "foo" is forbidden: User "system:serviceaccount:ra:mgr" cannot impersonate resource "users" in API group "" at the cluster scope' "$out"
out=$(assert_fails "--as a ServiceAccount" as_sa get pods -n ra --as=system:serviceaccount:ra:other)
assert_contains "serviceaccounts forbidden" 'serviceaccounts "other" is forbidden: User "system:serviceaccount:ra:mgr" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ra"' "$out"
out=$(assert_fails "the admin as foo" k get pods -n ra --as=foo)
assert_contains "impersonated user has no rights" 'pods is forbidden: User "foo" cannot list resource "pods" in API group "" in the namespace "ra"' "$out"
assert_eq "can-i as foo" "no" "$(k auth can-i list pods -n ra --as=foo || true)"
assert_eq "can-i as foo in system:masters" "yes" "$(k auth can-i list pods -n ra --as=foo --as-group=system:masters)"
adm_mk clusterrole strict-imp --verb=impersonate --resource=users --resource-name=foo
adm_mk clusterrolebinding mgr-imp --clusterrole=strict-imp --serviceaccount=ra:mgr
out=$(assert_fails "impersonating foo, allowed, then foo lacks list" as_sa get pods -n ra --as=foo)
assert_contains "request runs as foo" 'pods is forbidden: User "foo" cannot list resource "pods" in API group "" in the namespace "ra"' "$out"
out=$(assert_fails "resourceNames: bar is not foo" as_sa get pods -n ra --as=bar)
assert_contains "bar forbidden" 'users "bar" is forbidden: User "system:serviceaccount:ra:mgr" cannot impersonate resource "users" in API group "" at the cluster scope' "$out"
out=$(assert_fails "groups need impersonate on groups" as_sa get pods -n ra --as=foo --as-group=g1)
assert_contains "groups forbidden" 'groups "g1" is forbidden: User "system:serviceaccount:ra:mgr" cannot impersonate resource "groups" in API group "" at the cluster scope' "$out"
adm_mk rolebinding foo-pods -n ra --clusterrole=strict-pod-reader --user=foo
as_sa get pods -n ra --as=foo >/dev/null || fail "foo, bound, lists pods through impersonation"
assert_eq "can-i as foo after the binding" "yes" "$(as_sa auth can-i list pods -n ra --as=foo)"

step "host ports: a taken hostPort keeps a pod off the node"
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
nnodes=$(k get nodes --no-headers | wc -l | tr -d ' ')
hp_pod() { # NAME PLACEMENT(JSON fragment)
    cat <<JSON
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$1","namespace":"ra"},
 "spec":{$2,"containers":[{"name":"c","image":"busybox","ports":[{"containerPort":80,"hostPort":18080}]}]}}
JSON
}
hp_pod hp-a "\"nodeSelector\":{\"kubernetes.io/hostname\":\"$node\"}" | k apply -f - >/dev/null
until_eq "hp-a scheduled" "$node" 30 k get pod hp-a -n ra -o jsonpath='{.spec.nodeName}'
hp_pod hp-b "\"nodeSelector\":{\"kubernetes.io/hostname\":\"$node\"}" | k apply -f - >/dev/null
until_eq "hp-b unschedulable" "Unschedulable" 30 k get pod hp-b -n ra -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'
msg=$(k get pod hp-b -n ra -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')
others=$((nnodes - 1))
want="0/$nnodes nodes are available: 1 node(s) didn't have free ports for the requested pod ports"
[ "$others" -gt 0 ] && want="$want, $others node(s) didn't match Pod's node affinity/selector"
assert_contains "scheduler's message" "$want." "$msg"
if kubesim_only "kwok's nodes have no kubelet admission"; then
    hp_pod hp-c "\"nodeName\":\"$node\"" | k apply -f - >/dev/null
    until_eq "hp-c rejected by the kubelet" "Failed" 30 k get pod hp-c -n ra -o jsonpath='{.status.phase}'
    assert_eq "reason" "NodePorts" "$(k get pod hp-c -n ra -o jsonpath='{.status.reason}')"
    assert_eq "message" "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" \
        "$(k get pod hp-c -n ra -o jsonpath='{.status.message}')"
fi
echo "PASS"
