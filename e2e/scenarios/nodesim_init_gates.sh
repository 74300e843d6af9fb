#!/usr/bin/env bash
# Init containers of simulated pods follow the node's simulated state, as on a real node. NVIDIA's
# gate `until [ -f /run/nvidia/validations/driver-ready ]` keeps its pod in Init:0/1 (the init
# container Running) until the file exists: NVIDIA's nvidia-operator-validator writes it once its
# driver component (nvidia-validator, COMPONENT=driver) saw nodesim's driver loaded. The
# validator's components wait in turn (driver, toolkit, cuda), and its cuda component creates
# NVIDIA's nvidia-cuda-validator-<hash> workload pod and completes only once that pod succeeded.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "init containers are kubesim's kubelet answering from nodesim"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --driver-load-ms=6000
k create namespace gpu-operator >/dev/null
NODE=p4d-0

status() { k get pod -n gpu-operator "$1" --no-headers | awk '{print $3}'; }
init_state() {
    k get pod -n gpu-operator "$1" -o jsonpath="{.status.initContainerStatuses[?(@.name==\"$2\")].state}" |
        python3 -c 'import json,sys; s=sys.stdin.read(); print(next(iter(json.loads(s))) if s else "")'
}
vpod() { k get pods -n gpu-operator -l app=nvidia-operator-validator -o jsonpath='{.items[0].metadata.name}'; }

step "a pod gated on driver-ready and NVIDIA's validator wait while no driver runs"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: gated, namespace: gpu-operator, labels: {app: gated}}
spec:
  nodeName: $NODE
  initContainers:
    - name: driver-validation
      image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
      command: ['sh', '-c']
      args: ["until [ -f /run/nvidia/validations/driver-ready ]; do echo waiting for the driver; sleep 5; done"]
  containers:
    - name: main
      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
      command: [sleep, infinity]
YAML
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-operator-validator, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: nvidia-operator-validator}}
  template:
    metadata: {labels: {app: nvidia-operator-validator}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $NODE}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      initContainers:
        - name: driver-validation
          image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
          command: ['sh', '-c']
          args: ["nvidia-validator"]
          env: [{name: WITH_WAIT, value: "true"}, {name: COMPONENT, value: driver}]
        - name: toolkit-validation
          image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
          command: ['sh', '-c']
          args: ["nvidia-validator"]
          env: [{name: WITH_WAIT, value: "false"}, {name: COMPONENT, value: toolkit}]
        - name: cuda-validation
          image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
          command: ['sh', '-c']
          args: ["nvidia-validator"]
          env:
            - {name: WITH_WAIT, value: "false"}
            - {name: COMPONENT, value: cuda}
            - {name: VALIDATOR_IMAGE, value: "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0"}
      containers:
        - name: nvidia-operator-validator
          image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
          command: ['sh', '-c']
          args: ["echo all validations are successful; sleep infinity"]
          lifecycle:
            preStop:
              exec:
                command: ["sh", "-c", "rm -f /run/nvidia/validations/*-ready"]
YAML
until_eq "gated pod in Init:0/1" "Init:0/1" 30 status gated
until_eq "its init container Running" "running" 10 init_state gated driver-validation
until_eq "validator pod created" "yes" 30 bash -c "[ -n \"\$(kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l app=nvidia-operator-validator -o name)\" ] && echo yes"
V=$(vpod)
until_eq "validator in Init:0/3" "Init:0/3" 30 status "$V"
sleep 3
k get pods -n gpu-operator
assert_eq "still Init:0/1 without a driver" "Init:0/1" "$(status gated)"
assert_eq "validator still Init:0/3" "Init:0/3" "$(status "$V")"
assert_contains "nodesim says why" "no validator has written it" \
    "$(sim_answers gated nodesim.io/init)"
assert_contains "the validator's driver component waits for the driver" "waiting for the NVIDIA driver to load" \
    "$(sim_answers "$V" nodesim.io/init)"

step "the driver pod runs: the gates wait while the driver loads (6 s), then the pod runs"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: drv, namespace: gpu-operator, labels: {app: nvidia-driver-daemonset}}
spec:
  nodeName: $NODE
  containers:
    - name: nvidia-driver-ctr
      image: nvcr.io/nvidia/driver:580.95.05-ubuntu22.04
YAML
until_eq "driver pod Running" "Running" 30 status drv
t0=$SECONDS
sleep 2
assert_eq "Init:0/1 while the driver loads" "Init:0/1" "$(status gated)"
until_eq "gated pod Running once the driver loaded" "Running" 30 status gated
[ $((SECONDS - t0)) -ge 4 ] || fail "the gate passed $((SECONDS - t0)) s after the driver pod ran, before its 6 s load"
assert_eq "init container completed" "terminated" "$(init_state gated driver-validation)"
k get pods -n gpu-operator

step "NVIDIA's validator: toolkit, then cuda with its workload pod"
until_eq "driver done, toolkit-validation waits for the toolkit" "Init:1/3" 30 status "$V"
sleep 2
assert_eq "no toolkit: still Init:1/3" "Init:1/3" "$(status "$V")"
assert_eq "no workload pod before the cuda component runs" "" \
    "$(k get pods -n gpu-operator -l app=nvidia-cuda-validator -o name)"
# tk_gated NAME: a pod with the device plugin's gate on toolkit-ready.
tk_gated() {
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: gpu-operator}
spec:
  nodeName: $NODE
  initContainers:
    - name: toolkit-validation
      image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.0
      command: ['sh', '-c']
      args: ["until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia container stack to be setup; sleep 5; done"]
  containers:
    - name: nvidia-device-plugin
      image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0
YAML
}
tk_gated dp1
until_eq "toolkit-gated pod in Init:0/1" "Init:0/1" 30 status dp1
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: toolkit, namespace: gpu-operator, labels: {app: nvidia-container-toolkit-daemonset}}
spec:
  nodeName: $NODE
  containers:
    - name: nvidia-container-toolkit-ctr
      image: nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04
YAML
until_eq "the cuda component created its workload pod" "yes" 30 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l app=nvidia-cuda-validator -o name | grep -q nvidia-cuda-validator- && echo yes"
W=$(k get pods -n gpu-operator -l app=nvidia-cuda-validator -o jsonpath='{.items[0].metadata.name}')
case "$W" in nvidia-cuda-validator-?????) ;; *) fail "workload pod name $W is not NVIDIA's generateName" ;; esac
assert_eq "workload pod on the node" "$NODE" "$(k get pod -n gpu-operator "$W" -o jsonpath='{.spec.nodeName}')"
until_eq "workload pod succeeded" "Completed" 30 status "$W"
until_eq "validator pod Running after the workload succeeded" "Running" 30 status "$V"
assert_eq "toolkit-gated pod Running" "Running" "$(status dp1)"
k get pods -n gpu-operator -o wide

step "the validator's preStop removes the ready files: a new gated pod waits"
k delete daemonset -n gpu-operator nvidia-operator-validator --wait=true >/dev/null
until_eq "validator pod gone" "" 30 bash -c "kubectl --kubeconfig $KUBECONFIG_E2E get pods -n gpu-operator -l app=nvidia-operator-validator -o name"
tk_gated dp2
until_eq "new toolkit-gated pod in Init:0/1" "Init:0/1" 30 status dp2
sleep 3
assert_eq "still Init:0/1 without toolkit-ready" "Init:0/1" "$(status dp2)"
assert_eq "the running one is unaffected" "Running" "$(status dp1)"
echo "PASS nodesim_init_gates"
