#!/usr/bin/env bash
# User flow 2 with the Helm chart: the blog-post command on p4d.24xlarge-like nodes (8×A100 whose
# MIG mode changes need a reboot). Every flag has its effect: migManager.WITH_REBOOT reaches the
# MIG manager's env (so the reboot-only nodes reach success), migManager.default labels the nodes
# all-balanced (16/8/8 under the mixed strategy), operator.defaultRuntime reaches the toolkit,
# the versions reach the DaemonSet images. A mistyped key fails the install naming the key. The
# post's gfd.version=v0.8.0 names an image NVIDIA never published (GFD lives in the device
# plugin's image since v0.15; k8s-device-plugin:v0.8.0 does not exist): the GFD pods cannot pull
# it, the ClusterPolicy's status says so with containerd's error, and the user's fix (a published
# version) makes the rest of the flow go on.
# nfd.enabled=true (NVIDIA's default) installs: the notes say the chart deploys no NFD, which label
# the operator needs, and how many nodes carry it (a warning when none does).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_chart.sh"
cd "$REPO_ROOT"

chart_cluster_up "$E2E_ROOT/testdata/fleet-p4d.yaml" --nodesim --reboot-ms=1500 --nodesim --mig-apply-ms=300
NS=default # the command names no namespace
kd() { k -n "$NS" "$@"; }

step "a mistyped key fails helm install with a message naming it"
out=$(assert_fails "WITH_REBOT" h upgrade --install gpuo charts/gpu-operator --set migManager.WITH_REBOT=true "${PORT_FLAGS[@]}")
assert_contains "names the key" "migManager: Additional property WITH_REBOT is not allowed" "$out"
out=$(assert_fails "unknown runtime" h upgrade --install gpuo charts/gpu-operator --set operator.defaultRuntime=containerdd "${PORT_FLAGS[@]}")
assert_contains "names the value" "operator.defaultRuntime" "$out"
assert_eq "nothing installed" "" "$(h list -q)"

step "nfd.enabled=true (NVIDIA's default) installs; the notes say NFD is not deployed and count GPU nodes"
# helm install --dry-run=server renders the notes with the cluster's nodes (helm's lookup).
nfd_notes() { h install nfd-check charts/gpu-operator --dry-run=server --set nfd.enabled=true "${PORT_FLAGS[@]}" 2>&1; }
out=$(nfd_notes) || fail "nfd.enabled=true: $out"
assert_contains "NFD not deployed" "This chart does not deploy Node Feature Discovery (NFD): nfd.enabled=true deploys it with NVIDIA's chart only." "$out"
assert_contains "the label to set by hand" "kubectl label node NODE feature.node.kubernetes.io/pci-10de.present=true" "$out"
assert_contains "GPU nodes counted" "GPU nodes now: 2 of 3 nodes carry the label." "$out"
k label node p4d-0 p4d-1 feature.node.kubernetes.io/pci-10de.present- >/dev/null
out=$(nfd_notes) || fail "nfd.enabled=true without GPU labels: $out"
assert_contains "no GPU node: a warning" "WARNING: none of the 3 nodes carries the label yet" "$out"
k label node p4d-0 p4d-1 feature.node.kubernetes.io/pci-0302_10de.present=true >/dev/null
assert_contains "NFD's class-qualified label counts" "GPU nodes now: 2 of 3" "$(nfd_notes)"
k label node p4d-0 p4d-1 feature.node.kubernetes.io/pci-0302_10de.present- \
    feature.node.kubernetes.io/pci-10de.present=true >/dev/null
assert_eq "nothing installed by the dry run" "" "$(h list -q)"

step "the blog-post command"
h upgrade --install gpuo charts/gpu-operator \
  --set driver.enabled=true --set mig.strategy=mixed --set devicePlugin.enabled=true \
  --set migManager.enabled=true --set migManager.WITH_REBOOT=true \
  --set toolkit.version=v1.13.1-centos7 --set operator.defaultRuntime=containerd \
  --set gfd.version=v0.8.0 --set devicePlugin.version=v0.13.0 --set migManager.default=all-balanced \
  "${PORT_FLAGS[@]}" >"$E2E_DIR/install.out" 2>&1 || { cat "$E2E_DIR/install.out" >&2; fail "helm upgrade --install"; }
assert_contains "release" "STATUS: deployed" "$(cat "$E2E_DIR/install.out")"

step "the ClusterPolicy carries each flag"
cp() { k get clusterpolicy cluster-policy -o jsonpath="$1"; }
assert_eq "mig.strategy" "mixed" "$(cp '{.spec.mig.strategy}')"
assert_eq "migManager.config.default" "all-balanced" "$(cp '{.spec.migManager.config.default}')"
assert_eq "migManager env" "WITH_REBOOT=true" "$(cp '{range .spec.migManager.env[*]}{.name}={.value}{end}')"
assert_eq "operator.defaultRuntime" "containerd" "$(cp '{.spec.operator.defaultRuntime}')"

step "operands: versions in the images, WITH_REBOOT and the runtime in the env"
until_eq "MIG manager DaemonSet" "daemonset.apps/nvidia-mig-manager" 60 kd get ds nvidia-mig-manager -o name
assert_eq "WITH_REBOOT on the MIG manager" "true" \
    "$(kd get ds nvidia-mig-manager -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="WITH_REBOOT")].value}')"
until_eq "toolkit image" "nvcr.io/nvidia/k8s/container-toolkit:v1.13.1-centos7" 60 \
    ds_image_ns nvidia-container-toolkit-daemonset nvidia-container-toolkit-ctr
assert_eq "toolkit runtime" "containerd" \
    "$(kd get ds nvidia-container-toolkit-daemonset -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="RUNTIME")].value}')"
until_eq "device plugin image" "nvcr.io/nvidia/k8s-device-plugin:v0.13.0" 60 \
    ds_image_ns nvidia-device-plugin-daemonset nvidia-device-plugin
until_eq "GFD image" "nvcr.io/nvidia/k8s-device-plugin:v0.8.0" 60 \
    ds_image_ns gpu-feature-discovery gpu-feature-discovery
assert_eq "device plugin MIG strategy" "mixed" \
    "$(kd get ds nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[?(@.name=="nvidia-device-plugin")].env[?(@.name=="MIG_STRATEGY")].value}')"

if kubesim_only "image pulls are kubesim's kubelet's (kwok runs every image)"; then
    step "gfd.version=v0.8.0 does not exist: the status names the pull error"
    gfd_cond() { k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="gpu-feature-discovery")].message}'; }
    until_eq "GFD condition names the pull error" "yes" 60 bash -c \
        "kubectl --kubeconfig $KUBECONFIG_E2E get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"gpu-feature-discovery\")].message}' | grep -q 'ImagePullBackOff: rpc error: code = NotFound' && echo yes"
    assert_contains "containerd's error" \
        'failed to resolve reference "nvcr.io/nvidia/k8s-device-plugin:v0.8.0": nvcr.io/nvidia/k8s-device-plugin:v0.8.0: not found' \
        "$(gfd_cond)"
    # The kubelet alternates ErrImagePull and ImagePullBackOff while it retries.
    case "$(kd get pods -l app=gpu-feature-discovery -o jsonpath='{.items[0].status.containerStatuses[0].state.waiting.reason}')" in
    ErrImagePull | ImagePullBackOff) ;;
    *) fail "GFD pod state: $(kd get pods -l app=gpu-feature-discovery --no-headers)" ;;
    esac
fi
step "the fix: a published GFD version"
h upgrade gpuo charts/gpu-operator --reuse-values --set gfd.version=v0.17.0 "${PORT_FLAGS[@]}" >/dev/null \
    || fail "helm upgrade --set gfd.version=v0.17.0"
until_eq "GFD image" "nvcr.io/nvidia/k8s-device-plugin:v0.17.0" 60 \
    ds_image_ns gpu-feature-discovery gpu-feature-discovery

step "migManager.default: both nodes labelled all-balanced, rebooted, success, 16/8/8"
for n in p4d-0 p4d-1; do
    until_eq "$n mig.config" "all-balanced" 60 node_label "$n" nvidia.com/mig.config
done
for n in p4d-0 p4d-1; do
    until_eq "$n mig.config.state" "success" 60 node_label "$n" nvidia.com/mig.config.state
    until_eq "$n capacity" "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8" 30 \
        node_gpu_resources "$n"
done
assert_eq "rebooted for the mode change" "boot-1" "$(k get node p4d-0 -o jsonpath='{.status.nodeInfo.bootID}')"
until_eq "ClusterPolicy ready" "ready" 90 k get clusterpolicy cluster-policy -o jsonpath='{.status.state}'
assert_eq "nothing on the CPU node" "" "$(node_label cpu-0 nvidia.com/mig.config)"
echo "PASS helm_flow2_flags"
