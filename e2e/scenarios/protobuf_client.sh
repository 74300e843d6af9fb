#!/usr/bin/env bash
# A client-go program speaking protobuf as controller-runtime does (ContentType
# application/vnd.kubernetes.protobuf, Accept protobuf then JSON) creates, gets, lists, watches
# (an update and the delete) and deletes a DaemonSet, a RuntimeClass, a ClusterRole and an Event;
# compares its protobuf answers (object and list) byte for byte with what apimachinery's
# serializer writes for the same answers in JSON, then asks for a CRD and its custom resources, and lists with q-valued Accept headers. The same
# transcript is expected from kubesim and from the real kube-apiserver of the conformance lane:
# built-in kinds and Status errors in protobuf, custom resources in JSON (406, with a protobuf
# Status, when the client accepts only protobuf).
. "$(dirname "$0")/../lib.sh"

command -v go >/dev/null || skip_scenario "no Go toolchain to build the protobuf client"
src="$E2E_ROOT/protoclient"
cache=${GPU_OPERATOR_CACHE:-${HOME:-/tmp}/.cache/gpu-operator}/protoclient
stamp=$(cat "$src/go.sum" "$src/client/main.go" | sha256sum | cut -c1-16)
bin="$cache/client-$stamp"
if [ ! -x "$bin" ]; then
    mkdir -p "$cache"
    (cd "$src" && GOFLAGS=-mod=mod go build -o "$bin.tmp" ./client) >"$e2e_tmp/go-build.log" 2>&1 ||
        skip_scenario "cannot build the protobuf client (no module cache or proxy): $(tail -n1 "$e2e_tmp/go-build.log")"
    mv "$bin.tmp" "$bin"
fi

cluster_up
k create namespace pbclient >/dev/null
cat >"$e2e_tmp/crd.yaml" <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.pbclient.example.com}
spec:
  group: pbclient.example.com
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
YAML
k apply -f "$e2e_tmp/crd.yaml" >/dev/null
crd_established widgets.pbclient.example.com

step "create, get, list, watch, delete in protobuf"
out=$("$bin" "$KUBECONFIG_E2E" pbclient widgets.pbclient.example.com 2>&1) || fail "protobuf client failed: $out"
echo "$out" | sed 's/^/    /'
want=$(cat <<'TXT'
DaemonSet create: labels=app=pbclient image=registry.example/pb:1 memory=64Mi mount=/run/x hostPath=/run/x strategy=RollingUpdate maxUnavailable=1 revisionHistoryLimit=10 gen=1
DaemonSet get: labels=app=pbclient image=registry.example/pb:1 memory=64Mi mount=/run/x hostPath=/run/x strategy=RollingUpdate maxUnavailable=1 revisionHistoryLimit=10 gen=1 name=pbclient-ds uid-set=true
DaemonSet list: 1
DaemonSet bytes: object same bytes as the Go serializer, list same bytes as the Go serializer
DaemonSet watch: update seen=true, then DELETED=true, other events=[]
DaemonSet get after delete: NotFound (NotFound)
RuntimeClass create: labels=app=pbclient handler=nvidia overhead.cpu=250m nodeSelector=nvidia.com/gpu.present=true
RuntimeClass get: labels=app=pbclient handler=nvidia overhead.cpu=250m nodeSelector=nvidia.com/gpu.present=true name=pbclient-rc uid-set=true
RuntimeClass list: 1
RuntimeClass bytes: object same bytes as the Go serializer, list same bytes as the Go serializer
RuntimeClass watch: update seen=true, then DELETED=true, other events=[]
RuntimeClass get after delete: NotFound (NotFound)
ClusterRole create: labels=app=pbclient rules=[{[get list watch] [apps] [daemonsets] [] []} {[get] [] [] [] [/metrics]}]
ClusterRole get: labels=app=pbclient rules=[{[get list watch] [apps] [daemonsets] [] []} {[get] [] [] [] [/metrics]}] name=pbclient-cr uid-set=true
ClusterRole list: 1
ClusterRole bytes: object same bytes as the Go serializer, list same bytes as the Go serializer
ClusterRole watch: update seen=true, then DELETED=true, other events=[]
ClusterRole get after delete: NotFound (NotFound)
Event create: labels=app=pbclient involved=DaemonSet/pbclient-ds reason=Created count=1 first=2025-03-01T12:30:00Z type=Normal source=pbclient
Event get: labels=app=pbclient involved=DaemonSet/pbclient-ds reason=Created count=1 first=2025-03-01T12:30:00Z type=Normal source=pbclient name=pbclient-ev uid-set=true
Event list: 1
Event bytes: object same bytes as the Go serializer, list same bytes as the Go serializer
Event watch: update seen=true, then DELETED=true, other events=[]
Event get after delete: NotFound (NotFound)
raw GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/CRD [application/vnd.kubernetes.protobuf, application/json]: 200 application/vnd.kubernetes.protobuf
raw GET /apis/pbclient.example.com/v1/widgets [application/vnd.kubernetes.protobuf, application/json]: 200 application/json
raw GET /apis/pbclient.example.com/v1/widgets [application/vnd.kubernetes.protobuf]: 406 application/vnd.kubernetes.protobuf reason=NotAcceptable code=406 message="only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
raw GET /apis/node.k8s.io/v1/runtimeclasses [application/vnd.kubernetes.protobuf;q=0.5, application/json]: 200 application/json
raw GET /apis/node.k8s.io/v1/runtimeclasses [application/json;q=0.5, application/vnd.kubernetes.protobuf]: 200 application/vnd.kubernetes.protobuf
raw GET /apis/node.k8s.io/v1/runtimeclasses/nosuch [application/vnd.kubernetes.protobuf]: 404 application/vnd.kubernetes.protobuf reason=NotFound code=404 message="runtimeclasses.node.k8s.io \"nosuch\" not found"
answers: DELETE application/vnd.kubernetes.protobuf; GET application/json; GET application/vnd.kubernetes.protobuf; GET application/vnd.kubernetes.protobuf;stream=watch; POST application/vnd.kubernetes.protobuf; PUT application/vnd.kubernetes.protobuf
TXT
)
assert_eq "the protobuf client's transcript" "$want" "$out"
