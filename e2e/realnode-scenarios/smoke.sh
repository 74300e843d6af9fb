#!/usr/bin/env bash
# realnode smoke: the project's image really runs on the real node (e2e/realnode up).
#  1. a pod runs `gpu-validator --help` to Completed; `kubectl logs` (API server -> CONNECT proxy
#     in the node's namespace -> kubelet) returns its usage text;
#  2. a pod running as uid 1000 with a hostPath /run/nvidia/validations (DirectoryOrCreate) tries
#     to write there: the outcome is reported, not judged (the kubelet creates the directory
#     root-owned 0755, as on any node).
# Needs KUBECONFIG (the cluster) and REALNODE_DIR (the node's --dir).
set -euo pipefail
: "${KUBECONFIG:?set KUBECONFIG to the cluster of e2e/realnode up}"
: "${REALNODE_DIR:?set REALNODE_DIR to the --dir of e2e/realnode up}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=ghcr.io/gpu-operator/gpu-operator-validator:0.1.0
ns=realnode-smoke
k() { kubectl --request-timeout=20s "$@"; }

k create namespace "$ns" >/dev/null
# The namespace's default ServiceAccount comes from the controller-manager.
for _ in $(seq 100); do k -n "$ns" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.1; done

# wait_phase POD SECONDS: until the pod has Succeeded or Failed; prints the phase.
wait_phase() {
  local pod=$1 end=$((SECONDS + $2)) phase=""
  while [ $SECONDS -lt $end ]; do
    phase=$(k -n "$ns" get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    case "$phase" in Succeeded|Failed) break ;; esac
    sleep 0.3
  done
  echo "${phase:-unknown}"
}

t=$SECONDS
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: validator-help}
spec:
  restartPolicy: Never
  containers:
  - name: validator
    image: $IMAGE
    imagePullPolicy: Never
    command: [gpu-validator, --help]
YAML
phase=$(wait_phase validator-help 60)
reason=$(k -n "$ns" get pod validator-help -o jsonpath='{.status.containerStatuses[0].state.terminated.reason}')
echo "validator-help: phase $phase, container $reason, $((SECONDS - t))s"
if [ "$phase" != Succeeded ] || [ "$reason" != Completed ]; then
  k -n "$ns" describe pod validator-help | tail -n 20
  echo "FAIL: gpu-validator --help did not complete"
  exit 1
fi
logs=$(k -n "$ns" logs validator-help)
echo "kubectl logs validator-help:"
sed 's/^/  | /' <<<"$logs" | head -n 8
grep -q 'gpu-validator --help' <<<"$logs" || { echo "FAIL: the logs do not carry gpu-validator's usage"; exit 1; }

t=$SECONDS
k -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: hostpath-uid1000}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, runAsGroup: 1000}
  volumes:
  - name: validations
    hostPath: {path: /run/nvidia/validations, type: DirectoryOrCreate}
  containers:
  - name: probe
    image: $IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'id; ls -ld /run/nvidia/validations; touch /run/nvidia/validations/probe-ready && echo "wrote /run/nvidia/validations/probe-ready" || { echo "cannot write /run/nvidia/validations"; exit 3; }']
    volumeMounts:
    - {name: validations, mountPath: /run/nvidia/validations}
YAML
phase=$(wait_phase hostpath-uid1000 60)
code=$(k -n "$ns" get pod hostpath-uid1000 -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
echo "hostpath-uid1000: phase $phase, exit code ${code:-none}, $((SECONDS - t))s"
k -n "$ns" logs hostpath-uid1000 | sed 's/^/  | /'
echo "on the node: $("$here/../realnode" exec --dir "$REALNODE_DIR" ls -ld /run/nvidia/validations 2>&1)"
k delete namespace "$ns" --wait=false >/dev/null
echo "PASS smoke"
