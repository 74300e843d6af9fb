#!/usr/bin/env bash
# helm 3.17 against kubesim: install --wait, upgrade --wait, uninstall --wait of a chart with a CRD
# in crds/, a Deployment, a DaemonSet, a Service, a ConfigMap and RBAC; release Secrets as helm
# stores and lists them.
. "$(dirname "$0")/../lib.sh"
cluster_up --fleet "$E2E_ROOT/testdata/fleet-small.yaml"
chart="$E2E_ROOT/testdata/charts/demo"

step "install --wait"
h install demo "$chart" -n demo --create-namespace --wait --timeout 60s >/dev/null
assert_eq "release status" "deployed" "$(h status demo -n demo -o json | sed -E 's/.*"status":"([a-z-]+)".*/\1/' | head -1)"
assert_eq "deployment ready" "2" "$(k get deploy demo-web -n demo -o jsonpath='{.status.readyReplicas}')"
assert_eq "daemonset ready" "2" "$(k get ds demo-agent -n demo -o jsonpath='{.status.numberReady}')"
[ -n "$(k get svc demo-svc -n demo -o jsonpath='{.spec.clusterIP}')" ] || fail "service clusterIP"
assert_eq "CR created" "single" "$(k get widget demo-widget -o jsonpath='{.spec.mode}')"
assert_eq "release secret" "secret/sh.helm.release.v1.demo.v1" \
    "$(k get secret -n demo -l owner=helm,name=demo -o name)"
assert_contains "helm list" "demo" "$(h list -n demo)"

step "upgrade --wait"
h upgrade demo "$chart" -n demo --set replicas=3 --set message=bye --wait --timeout 60s >/dev/null
assert_eq "scaled" "3" "$(k get deploy demo-web -n demo -o jsonpath='{.status.readyReplicas}')"
assert_eq "configmap updated" "bye" "$(k get cm demo-config -n demo -o jsonpath='{.data.message}')"
assert_eq "two release secrets" "2" "$(k get secret -n demo -l owner=helm,name=demo -o name | wc -l | tr -d ' ')"
assert_eq "history" "2" "$(h history demo -n demo -o json | grep -o '"revision":' | wc -l | tr -d ' ')"

step "uninstall --wait"
h uninstall demo -n demo --wait --timeout 60s >/dev/null
until_eq "deployment gone" "" 30 k get deploy -n demo -o name
until_eq "pods gone" "" 30 k get pods -n demo -o name
assert_eq "release secrets gone" "" "$(k get secret -n demo -l owner=helm -o name)"
assert_eq "CRD kept (helm never deletes CRDs)" "customresourcedefinition.apiextensions.k8s.io/widgets.example.com" \
    "$(k get crd widgets.example.com -o name)"
echo "helm lifecycle: ok"
