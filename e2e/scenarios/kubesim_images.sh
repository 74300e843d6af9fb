#!/usr/bin/env bash
# Images as a real node handles them, seen with kubectl: an image the registry does not have goes
# ErrImagePull then ImagePullBackOff with containerd's error, in the pod's status, its Events and
# `kubectl logs`; pulls take their time (the pull model: 100 MB/s and 50 ms per pull here) once
# per node; a validation pod validates only from an image that holds the validator (busybox
# running gpu-validator fails as containerd fails it, StartError).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "image pulls are kubesim's kubelet's (kwok runs any image)"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" -- --pull-mbps 100 --pull-latency-ms 50
k create namespace demo >/dev/null

pod() { # NAME NODE IMAGE [restartPolicy] [command]
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: demo}
spec:
  nodeName: $2
  restartPolicy: ${4:-Always}
  containers:
    - name: c
      image: $3
${5:+      command: $5}
YAML
}
evs() { k get events -n demo --field-selector "involvedObject.name=$1,reason=$2" -o jsonpath='{range .items[*]}{.message}{"\n"}{end}'; }
phase() { k get pod -n demo "$1" -o jsonpath='{.status.phase}'; }

step "an image NVIDIA never published: ErrImagePull, then ImagePullBackOff with containerd's error"
pod bad cpu-0 nvcr.io/nvidia/gpu-operator:0.1.0
err='rpc error: code = NotFound desc = failed to pull and unpack image "nvcr.io/nvidia/gpu-operator:0.1.0": failed to resolve reference "nvcr.io/nvidia/gpu-operator:0.1.0": nvcr.io/nvidia/gpu-operator:0.1.0: not found'
# One read of reason and message: the kubelet alternates the two states while it retries.
state() { k get pod -n demo "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}'; }
until_eq "ErrImagePull" "ErrImagePull: $err" 30 state bad
until_eq "ImagePullBackOff" "ImagePullBackOff: Back-off pulling image \"nvcr.io/nvidia/gpu-operator:0.1.0\": ErrImagePull: $err" 30 state bad
assert_eq "phase" "Pending" "$(phase bad)"
assert_contains "the Failed event" "Failed to pull image \"nvcr.io/nvidia/gpu-operator:0.1.0\": $err" "$(evs bad Failed)"
assert_contains "Error: ErrImagePull" "Error: ErrImagePull" "$(evs bad Failed)"
assert_contains "the BackOff event" 'Back-off pulling image "nvcr.io/nvidia/gpu-operator:0.1.0"' "$(evs bad BackOff)"
out=$(k logs -n demo bad 2>&1) && fail "kubectl logs of a pod that never pulled succeeded: $out"
assert_contains "kubectl logs" 'container "c" in pod "bad" is waiting to start:' "$out"
case "$(k get pods -n demo bad --no-headers)" in
*ImagePullBackOff* | *ErrImagePull*) ;; # the kubelet alternates them, retrying
*) fail "kubectl get pods: $(k get pods -n demo bad --no-headers)" ;;
esac

step "a pull takes size / bandwidth + latency, once per node: 150 MiB at 100 MB/s + 50 ms = 1.623 s"
pod dp p4d-0 nvcr.io/nvidia/k8s-device-plugin:v0.20.0
until_eq "dp running" "Running" 30 phase dp
assert_contains "the Pulled event" 'Successfully pulled image "nvcr.io/nvidia/k8s-device-plugin:v0.20.0" in 1.623s' "$(evs dp Pulled)"
assert_contains "the image size" "Image size: 157286400 bytes." "$(evs dp Pulled)"
pod dp2 p4d-0 nvcr.io/nvidia/k8s-device-plugin:v0.20.0
until_eq "dp2 running" "Running" 30 phase dp2
assert_eq "no second pull on the node" 'Container image "nvcr.io/nvidia/k8s-device-plugin:v0.20.0" already present on machine' "$(evs dp2 Pulled)"

step "the validator runs only from an image that holds it"
pod fake p4d-1 busybox:1.36 Never '[gpu-validator]'
until_eq "busybox running gpu-validator fails" "Failed" 30 phase fake
assert_eq "StartError" "StartError 128" "$(k get pod -n demo fake -o jsonpath='{.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}')"
assert_contains "containerd's message" 'exec: "gpu-validator": executable file not found in $PATH' \
    "$(k get pod -n demo fake -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')"
echo "PASS kubesim_images"
