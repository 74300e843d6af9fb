#!/usr/bin/env bash
# realnode flows: the README's user flows on the real node (e2e/realnode up), with the chart and
# the images built from the Dockerfile, NVIDIA's components played by e2e/realnode-standins:
#  1. install: `helm install` → the operator, every operand and the validation pods Running or
#     Completed on the node, the ClusterPolicy ready, `kubectl logs` of a validation pod shows
#     vectorAdd's output and "Test PASSED", the node advertises nvidia.com/gpu; the image
#     pre-pull's containers started (the hold program in NVIDIA's images) and its pod is gone;
#  5. edit the ClusterPolicy: DCGM exporter off (its DaemonSet and pod go) and on again (back,
#     Running); the device plugin's version changed (its DaemonSet rolls to the new image, the
#     node validates again and is ready);
#  -  `helm upgrade` of the operator itself: a new operator pod takes over, the operands' pods
#     stay;
#  7. uninstall: `helm uninstall` leaves no DaemonSet, pod or label of the operator's, and the
#     driver root is unpublished on the node.
# Needs KUBECONFIG (the cluster) and REALNODE_DIR (the node's --dir).
set -euo pipefail
: "${KUBECONFIG:?set KUBECONFIG to the cluster of e2e/realnode up}"
: "${REALNODE_DIR:?set REALNODE_DIR to the --dir of e2e/realnode up}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
realnode="$repo/e2e/realnode"
helm=$("$repo/scripts/get-helm.sh")
ns=gpu-operator
k() { kubectl --request-timeout=20s "$@"; }
h() { "$helm" "$@"; }
fail() {
    echo "FAIL: $*"
    echo "--- kubectl get pods -A -o wide"
    k get pods -A -o wide 2>&1 | sed 's/^/  | /'
    # What the failing containers said (the status shows only their back-off).
    local pod c
    for pod in $(k -n "$ns" get pods --no-headers 2>/dev/null | awk '$3 ~ /CrashLoopBackOff|Error/ {print $1}'); do
        for c in $(k -n "$ns" get pod "$pod" -o jsonpath='{.spec.initContainers[*].name} {.spec.containers[*].name}' 2>/dev/null); do
            { k -n "$ns" logs "$pod" -c "$c" --previous --tail 3 2>/dev/null ||
                k -n "$ns" logs "$pod" -c "$c" --tail 3 2>/dev/null; } | sed "s#^#  | $pod/$c: #" || true
        done
    done
    echo "--- ClusterPolicy status"
    k get clusterpolicy cluster-policy -o jsonpath='{.status}' 2>&1 | head -c 3000 | sed 's/^/  | /'
    echo
    exit 1
}
step() { echo "--- $* ($((SECONDS - t0))s)"; }
# until_ok WHAT TIMEOUT_S CMD...: polls CMD until it succeeds.
until_ok() {
    local what=$1 t=$2
    shift 2
    local end=$((SECONDS + t))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || fail "$what: not within ${t}s"
        sleep 1
    done
}
cp_state() { [ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state}' 2>/dev/null)" = "$1" ]; }
ds_gone() { ! k -n "$ns" get daemonset "$1" >/dev/null 2>&1; }
# ds_rolled NAME IMAGE: the DaemonSet's pods all run IMAGE and are ready, as its controller
# reports for the DaemonSet's current generation (right after an edit, the status still
# counts the old pods as updated and ready).
ds_rolled() {
    local gen seen want have ready
    read -r gen seen want have ready < <(k -n "$ns" get daemonset "$1" -o jsonpath='{.metadata.generation} {.status.observedGeneration} {.status.desiredNumberScheduled} {.status.updatedNumberScheduled} {.status.numberReady}')
    [ -n "$gen" ] && [ "$seen" = "$gen" ] && [ "${want:-0}" -ge 1 ] && [ "$have" = "$want" ] &&
        [ "$ready" = "$want" ] &&
        k -n "$ns" get daemonset "$1" -o jsonpath='{.spec.template.spec.containers[*].image}' | grep -q "$2"
}
no_pods() { [ -z "$(k -n "$ns" get pods -o name 2>/dev/null)" ]; }
# until_ready TIMEOUT_S: waits for the ClusterPolicy to be ready; a node the status counts as
# failed for 45 s in a row ends the wait at once (a clean install fails no node: what the status
# says is the defect).
until_ready() {
    local end=$((SECONDS + $1)) st state failed since=""
    while :; do
        st=$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state} {.status.nodes.failed}' 2>/dev/null || true)
        read -r state failed <<<"$st"
        [ "$state" != ready ] || return 0
        if [[ "${failed:-0}" =~ ^[1-9][0-9]*$ ]]; then
            since=${since:-$SECONDS}
            [ $((SECONDS - since)) -lt 45 ] || fail "the ClusterPolicy counts $failed failed node(s) for 45 s"
        else
            since=""
        fi
        [ $SECONDS -lt $end ] || fail "the ClusterPolicy ready: not within ${1}s"
        sleep 1
    done
}

t0=$SECONDS
node=$(k get nodes -o jsonpath='{.items[0].metadata.name}')
[ -n "$node" ] || fail "no node"
# NFD's labels, set by hand as the README allows (the chart does not deploy NFD): a PCI device of
# vendor 10de, and the OS the driver image's tag is chosen for.
k label node "$node" --overwrite feature.node.kubernetes.io/pci-10de.present=true \
    feature.node.kubernetes.io/system-os_release.ID=debian \
    feature.node.kubernetes.io/system-os_release.VERSION_ID=12 >/dev/null

step "flow 1: helm install"
h install gpu-operator "$repo/charts/gpu-operator" -n "$ns" --create-namespace --wait --timeout 5m >/dev/null ||
    fail "helm install"
until_ready 420
step "ClusterPolicy ready"
pods=$(k -n "$ns" get pods -o wide)
echo "kubectl get pods -n $ns -o wide:"
sed 's/^/  | /' <<<"$pods"
for app in gpu-operator nvidia-driver-daemonset nvidia-container-toolkit-daemonset \
    nvidia-device-plugin-daemonset gpu-feature-discovery nvidia-dcgm-exporter \
    nvidia-operator-validator; do
    line=$(grep -E "^$app-" <<<"$pods" | head -n 1)
    [ -n "$line" ] || fail "no $app pod"
    grep -q " Running " <<<"$line" || fail "$app is not Running: $line"
    grep -q " $node " <<<"$line" || fail "$app is not on $node: $line"
done
validators=$(k -n "$ns" get pods -l app=nvidia-cuda-validator -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}')
for stage in driver toolkit plugin; do
    grep -Eq "^nvidia-$stage-validator-[0-9a-f]+-[0-9]+ Succeeded$" <<<"$validators" ||
        fail "no Succeeded $stage validation pod: $validators"
done
vpod=$(grep -E "^nvidia-plugin-validator-" <<<"$validators" | tail -n 1 | cut -d' ' -f1)
logs=$(k -n "$ns" logs "$vpod")
echo "kubectl logs $vpod:"
sed 's/^/  | /' <<<"$logs"
grep -q '^\[Vector addition of 50000 elements\]$' <<<"$logs" || fail "no vectorAdd output in $vpod's log"
grep -q '^Test PASSED$' <<<"$logs" || fail "no Test PASSED in $vpod's log"
gpus=$(k get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')
[ "${gpus:-0}" -ge 1 ] || fail "the node advertises no nvidia.com/gpu (allocatable: ${gpus:-none})"
echo "node $node: nvidia.com/gpu allocatable $gpus"
# The image pre-pull ran here, in runc: the static hold program copied out of the project's image
# ran in the stand-ins of NVIDIA's images, and the pod went with the node's last deploy label.
no_prepull_pod() { [ -z "$(k -n "$ns" get pods -l app=nvidia-image-prepull -o name)" ]; }
until_ok "the pre-pull pod gone" 120 no_prepull_pod
pre=$(k -n "$ns" get events -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason}: {.message}{"\n"}{end}' |
    grep '^nvidia-image-prepull-' || true)
echo "the pre-pull pod's events:"
sed 's/^/  | /' <<<"$pre"
for c in install-hold hold pull-container-toolkit pull-k8s-device-plugin pull-dcgm-exporter; do
    grep -q " Started: Started container $c$" <<<"$pre" || fail "the pre-pull's $c never started"
done
! grep -Eq ' (BackOff|Failed): ' <<<"$pre" || fail "the pre-pull failed on $node"

step "flow 5: DCGM exporter off"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
until_ok "the DCGM exporter's DaemonSet removed" 120 ds_gone nvidia-dcgm-exporter
until_ok "the DCGM exporter's pod gone" 120 sh -c "! kubectl -n $ns get pods -o name | grep -q nvidia-dcgm-exporter"
step "flow 5: DCGM exporter on"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":true}}}' >/dev/null
until_ok "the DCGM exporter back and ready" 180 ds_rolled nvidia-dcgm-exporter dcgm-exporter
step "flow 5: device plugin v0.20.0 -> v0.17.0"
# The node has the stand-in under a second tag too (e2e/realnode-standins/build).
old_uid=$(k -n "$ns" get pods -l app=nvidia-device-plugin-daemonset -o jsonpath='{.items[0].metadata.uid}')
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"devicePlugin":{"version":"v0.17.0"}}}' >/dev/null
until_ok "the device plugin rolled to v0.17.0" 240 ds_rolled nvidia-device-plugin-daemonset k8s-device-plugin:v0.17.0
plugin_replaced() {
    local uids
    uids=$(k -n "$ns" get pods -l app=nvidia-device-plugin-daemonset -o jsonpath='{.items[*].metadata.uid}')
    [ -n "$uids" ] && ! grep -q "$old_uid" <<<"$uids"
}
until_ok "the device plugin's old pod replaced" 120 plugin_replaced
until_ok "the ClusterPolicy ready after the roll" 300 cp_state ready
step "device plugin rolled, ready again"

step "helm upgrade of the operator itself"
op_old=$(k -n "$ns" get pods -l app=gpu-operator -o jsonpath='{.items[0].metadata.name}')
operands_before=$(k -n "$ns" get pods -l 'app in (nvidia-driver-daemonset,nvidia-container-toolkit-daemonset,nvidia-device-plugin-daemonset)' -o jsonpath='{.items[*].metadata.uid}')
h upgrade gpu-operator "$repo/charts/gpu-operator" -n "$ns" --reuse-values \
    --set-string 'operator.annotations.upgraded-by=realnode-flows' --wait --timeout 5m >/dev/null ||
    fail "helm upgrade"
op_pods() { k -n "$ns" get pods -l app=gpu-operator -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}'; }
until_ok "one new operator pod Running" 180 sh -c "[ \"\$(kubectl -n $ns get pods -l app=gpu-operator -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}' | grep -v '^$op_old ' | grep -c ' Running$')\" = 1 ] && ! kubectl -n $ns get pod $op_old >/dev/null 2>&1"
echo "operator pods: $(op_pods | tr '\n' ' ')"
until_ok "the ClusterPolicy ready under the new operator" 120 cp_state ready
operands_after=$(k -n "$ns" get pods -l 'app in (nvidia-driver-daemonset,nvidia-container-toolkit-daemonset,nvidia-device-plugin-daemonset)' -o jsonpath='{.items[*].metadata.uid}')
[ "$operands_after" = "$operands_before" ] || fail "the operands' pods changed under an operator upgrade"

step "flow 7: helm uninstall"
h uninstall gpu-operator -n "$ns" --wait --timeout 5m >/dev/null || fail "helm uninstall"
until_ok "no DaemonSet left" 180 sh -c "[ -z \"\$(kubectl -n $ns get daemonsets -o name)\" ]"
until_ok "no pod left" 180 no_pods
labels=$(k get node "$node" -o jsonpath='{.metadata.labels}')
if grep -Eo '"nvidia\.com/[^"]*"' <<<"$labels" | grep -q .; then
    fail "labels of the operator left on the node: $(grep -Eo '"nvidia\.com/[^"]*"' <<<"$labels" | tr '\n' ' ')"
fi
until_ok "the driver root unpublished on the node" 60 \
    sh -c "! '$realnode' exec --dir '$REALNODE_DIR' sh -c 'grep -q \" /run/nvidia/driver \" /proc/self/mountinfo'"
step "uninstalled"
echo "PASS flows"
