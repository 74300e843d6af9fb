#!/usr/bin/env bash
# kubectl's typed `create` commands (protobuf bodies) against kubesim, Service addresses reused
# after a delete, and the kubesim program's options.
. "$(dirname "$0")/../lib.sh"

if kubesim_only "kubesim's own command-line options"; then
    step "kubesim --help and --history"
    help=$("$KUBESIM_BIN" --help)
    assert_contains "--history default" "--history N            watch events kept for resuming watches (default 20000)" "$help"
    out=$(assert_fails "--history below the minimum" "$KUBESIM_BIN" --history 10)
    assert_contains "--history message" 'kubesim: --history expects a number of events (1000-100000000), got "10"' "$out"
fi

cluster_up

step "create namespace / serviceaccount / configmap (protobuf bodies)"
assert_eq "create namespace" "namespace/pb created" "$(k create namespace pb)"
assert_eq "namespace phase" "Active" "$(k get ns pb -o jsonpath='{.status.phase}')"
assert_eq "a namespace has no generation" "" "$(k get ns pb -o jsonpath='{.metadata.generation}')"
assert_eq "create serviceaccount" "serviceaccount/robot created" "$(k create serviceaccount robot -n pb)"
assert_eq "serviceaccount namespace" "pb" "$(k get sa robot -n pb -o jsonpath='{.metadata.namespace}')"
assert_eq "create configmap" "configmap/c created" "$(k create configmap c -n pb --from-literal=k=v)"
out=$(assert_fails "namespace exists" k create namespace pb)
assert_contains "AlreadyExists" 'Error from server (AlreadyExists): namespaces "pb" already exists' "$out"
assert_eq "create deployment (protobuf)" "deployment.apps/web created" \
    "$(k create deployment web --image=registry.example/web:1 --replicas=2 --port=8080 -n pb -- run --fast)"
assert_eq "what kubectl sent is what is stored" \
    "2 app=web registry.example/web:1 [\"run\",\"--fast\"] 8080 RollingUpdate 25%" \
    "$(k get deploy web -n pb -o jsonpath='{.spec.replicas} app={.spec.selector.matchLabels.app} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].command} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.strategy.type} {.spec.strategy.rollingUpdate.maxSurge}')"
web_pods() { k get pods -n pb -l app=web -o name | wc -l | tr -d ' '; }
until_eq "the Deployment's pods" 2 60 web_pods

step "a Service's clusterIP and nodePort are free again once it is deleted"
cat >"$E2E_DIR/svc.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: fixed, namespace: pb}
spec:
  type: NodePort
  clusterIP: 10.96.20.20
  selector: {app: fixed}
  ports:
    - {port: 80, nodePort: 30080}
YAML
k apply -f "$E2E_DIR/svc.yaml" >/dev/null
sed 's/name: fixed/name: other/' "$E2E_DIR/svc.yaml" >"$E2E_DIR/svc2.yaml"
out=$(assert_fails "the address is taken" k create -f "$E2E_DIR/svc2.yaml")
assert_contains "already allocated" "failed to allocate IP 10.96.20.20: provided IP is already allocated" "$out"
k delete -f "$E2E_DIR/svc.yaml" >/dev/null
# kubectl delete waits until the Service is gone; the release follows its DELETED event.
until_eq "recreated with the same clusterIP" "service/fixed created" 10 k create -f "$E2E_DIR/svc.yaml"
assert_eq "clusterIP kept" "10.96.20.20" "$(k get svc fixed -n pb -o jsonpath='{.spec.clusterIP}')"
assert_eq "nodePort kept" "30080" "$(k get svc fixed -n pb -o jsonpath='{.spec.ports[0].nodePort}')"
echo "kubectl create: ok"
