#!/usr/bin/env bash
# Probes of simulated containers as a kubelet runs them, answered by nodesim from the simulated
# component's state: NVIDIA's driver pod (its startupProbe) is not Ready while nodesim's driver is
# still loading, says why in a Warning Event, and is Ready once the driver has loaded; a liveness
# probe that fails failureThreshold times restarts the container; a pod of no NVIDIA component
# passes its probes. Probe timings run at kubesim's --probe-scale (1/20 in e2e/cluster).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
[ "$E2E_CLUSTER" = kubesim ] || skip_scenario "the probes are kubesim's kubelet answering from nodesim"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --driver-load-ms=8000
k create namespace gpu-operator >/dev/null

# driver_pod NAME NODE: a driver pod with NVIDIA's startupProbe (60 s delay, every 10 s, 120
# failures allowed: 3 s, 0.5 s at the e2e scale) and NVIDIA's peermem container (startup and
# liveness probes; without its startup probe the liveness probe would kill it while the driver
# loads).
driver_pod() {
    k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: gpu-operator, labels: {app: nvidia-driver-daemonset}}
spec:
  nodeName: $2
  containers:
    - name: nvidia-driver-ctr
      image: nvcr.io/nvidia/driver:580.95.05-ubuntu22.04
      startupProbe:
        exec: {command: [sh, -c, "test -f /sys/module/nvidia/refcnt && nvidia-smi"]}
        initialDelaySeconds: 60
        periodSeconds: 10
        timeoutSeconds: 60
        failureThreshold: 120
    - name: nvidia-peermem-ctr
      image: nvcr.io/nvidia/driver:580.95.05-ubuntu22.04
      startupProbe: {exec: {command: [sh, -c, "nvidia-driver probe_nvidia_peermem"]},
                     initialDelaySeconds: 10, periodSeconds: 10, failureThreshold: 120}
      livenessProbe: {exec: {command: [sh, -c, "nvidia-driver probe_nvidia_peermem"]},
                      initialDelaySeconds: 30, periodSeconds: 30, failureThreshold: 1}
YAML
}
ready() { k get pod -n gpu-operator "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
started() { k get pod -n gpu-operator "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="nvidia-driver-ctr")].started}'; }
restarts() { k get pod -n gpu-operator "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="nvidia-peermem-ctr")].restartCount}'; }
events() {
    k get events -n gpu-operator --field-selector "involvedObject.name=$1,type=Warning" \
        -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}'
}

step "the driver pod runs but is not Ready while the driver loads (8 s)"
driver_pod drv p4d-0
t0=$SECONDS
until_eq "driver pod Running" "Running" 30 k get pod -n gpu-operator drv -o jsonpath='{.status.phase}'
until_eq "a startup probe failed" "yes" 20 bash -c \
    "kubectl --kubeconfig $KUBECONFIG_E2E get events -n gpu-operator --field-selector involvedObject.name=drv,type=Warning -o jsonpath='{.items[*].message}' | grep -q 'Startup probe failed' && echo yes"
assert_eq "not Ready before the driver loaded" "False" "$(ready drv)"
assert_eq "driver container not started" "false" "$(started drv)"
assert_contains "the probe says why" "/sys/module/nvidia/refcnt: No such file or directory" "$(events drv)"
assert_contains "nodesim's answer" "not loaded yet" \
    "$(sim_answers drv nodesim.io/probes)"
[ $((SECONDS - t0)) -lt 8 ] || fail "the failing probe was seen only after the driver's load time"

step "Ready once the driver has loaded"
until_eq "driver pod Ready" "True" 30 ready drv
assert_eq "driver container started" "true" "$(started drv)"
assert_eq "nodesim's answer" '{"nvidia-driver-ctr":"ok","nvidia-peermem-ctr":"ok"}' \
    "$(sim_answers drv nodesim.io/probes)"
assert_eq "the answers stay on the node: no annotation" "" \
    "$(k get pod -n gpu-operator drv -o jsonpath='{.metadata.annotations.nodesim\.io/probes}')"
[ $((SECONDS - t0)) -ge 8 ] || fail "Ready after $((SECONDS - t0)) s, before the driver's 8 s load"
assert_eq "no restart" "0" "$(restarts drv)"

step "a failing liveness probe restarts its container (failureThreshold 1)"
fault p4d-0 driver-fail
until_eq "peermem container restarted" "yes" 30 bash -c \
    "[ \"\$(kubectl --kubeconfig $KUBECONFIG_E2E get pod -n gpu-operator drv -o jsonpath='{.status.containerStatuses[?(@.name==\"nvidia-peermem-ctr\")].restartCount}')\" -ge 1 ] && echo yes"
ev=$(events drv)
assert_contains "liveness event" "Liveness probe failed: modprobe: ERROR: could not insert 'nvidia'" "$ev"
assert_eq "killed by exit 137" "137" "$(k get pod -n gpu-operator drv -o jsonpath='{.status.containerStatuses[?(@.name=="nvidia-peermem-ctr")].lastState.terminated.exitCode}')"
fault p4d-0 none

step "probes of a pod that is no NVIDIA component pass"
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: gpu-operator}
spec:
  nodeName: cpu-0
  containers:
    - name: web
      image: nginx:1.27
      startupProbe: {exec: {command: [true]}, periodSeconds: 1}
      readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 1}
YAML
until_eq "web Ready" "True" 30 ready web
assert_eq "no Warning Event for web" "" "$(events web)"
echo "PASS nodesim_probes"
