#!/usr/bin/env bash
# nodesim: validation (vectorAdd) pods and injected faults. Validation pods succeed with the
# sample's output when the node can run them; an XID on one GPU fails the next validation on that
# node only; a driver that fails to load crash-loops and fails validation until cleared; a lost
# GPU drops capacity; a NotReady node stops its heartbeat; slow operands delay everything.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"

cluster_up --fleet "$E2E_ROOT/testdata/fleet-nodesim.yaml" --nodesim --validation-ms=200
place_operands none
for n in p4d-0 p4d-1; do deploy_on "$n"; done
for n in p4d-0 p4d-1; do until_eq "$n GPUs" "nvidia.com/gpu=8" 60 node_gpu_resources "$n"; done

step "validation pods succeed with the vectorAdd output"
validation_pod val-a p4d-0 plugin nvidia.com/gpu
validation_pod val-b p4d-1 plugin nvidia.com/gpu
until_eq "val-a" "Succeeded" 30 pod_phase val-a
until_eq "val-b" "Succeeded" 30 pod_phase val-b
log=$(k logs -n gpu-operator val-a)
assert_contains "log" "[Vector addition of 50000 elements]" "$log"
assert_contains "log" "CUDA kernel launch with 196 blocks of 256 threads" "$log"
assert_eq "last line" "Test PASSED" "$(tail -n1 <<<"$log")"
assert_contains "log" "Test PASSED" "$log"
assert_eq "exit code" "0" "$(k get pod -n gpu-operator val-a -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')"

step "a validation pod on a CPU-only node fails, saying why"
validation_pod val-cpu cpu-0 cuda
until_eq "val-cpu" "Failed" 30 pod_phase val-cpu
assert_contains "cpu log" "no NVIDIA GPU found" "$(k logs -n gpu-operator val-cpu)"

step "an XID on p4d-0 GPU 3 fails p4d-0's next validation, and only p4d-0's"
fault p4d-0 xid:gpu=3:code=79
until_eq "fault annotation" "xid:gpu=3:code=79" 10 \
    k get node p4d-0 -o jsonpath='{.metadata.annotations.nodesim\.io/faults}'
validation_pod val-c p4d-0 plugin nvidia.com/gpu
validation_pod val-d p4d-1 plugin nvidia.com/gpu
until_eq "val-c" "Failed" 30 pod_phase val-c
until_eq "val-d" "Succeeded" 30 pod_phase val-d
log=$(k logs -n gpu-operator val-c)
assert_contains "xid log" "Xid 79 on GPU 3" "$log"
assert_contains "xid message in status" "Xid 79" \
    "$(k get pod -n gpu-operator val-c -o jsonpath='{.status.containerStatuses[0].state.terminated.message}')"
fault p4d-0 none
validation_pod val-e p4d-0 plugin nvidia.com/gpu
until_eq "val-e after clearing" "Succeeded" 30 pod_phase val-e

step "a GPU falling off the bus drops capacity"
fault p4d-1 gpu-lost:gpu=7
until_eq "p4d-1 capacity" "nvidia.com/gpu=7" 30 node_gpu_resources p4d-1
fault p4d-1 none
until_eq "p4d-1 capacity back" "nvidia.com/gpu=8" 30 node_gpu_resources p4d-1

step "a driver that fails to load: crash loop, no GPUs, validation fails; clearing recovers"
fault p4d-1 driver-fail
drv=$(k get pods -n gpu-operator -l app=nvidia-driver-daemonset --field-selector spec.nodeName=p4d-1 -o jsonpath='{.items[0].metadata.name}')
until_eq "driver crash-looping" "CrashLoopBackOff" 30 \
    k get pod -n gpu-operator "$drv" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}'
assert_eq "driver not ready" "False" \
    "$(k get pod -n gpu-operator "$drv" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
assert_contains "driver pod message" "could not insert 'nvidia'" \
    "$(k get pod -n gpu-operator "$drv" -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}')"
if [ "$E2E_CLUSTER" != kubesim ]; then
    # kwok writes a new pod's status from its template, at times twice: a write that lands after
    # nodesim's loses the crash loop, and nodesim writes it again (its --kubelet kwok). kubesim's
    # kubelet writes what the pod's containers do and is not a template.
    ctr=$(k get pod -n gpu-operator "$drv" -o jsonpath='{.spec.containers[0].name}')
    img=$(k get pod -n gpu-operator "$drv" -o jsonpath='{.spec.containers[0].image}')
    k patch pod -n gpu-operator "$drv" --subresource=status --type=strategic -p "{\"status\":{\"containerStatuses\":[{\"name\":\"$ctr\",\"image\":\"$img\",\"imageID\":\"\",\"ready\":true,\"started\":true,\"restartCount\":0,\"state\":{\"running\":{\"startedAt\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}}]}}" >/dev/null
    until_eq "the crash loop written again after a template's write" "CrashLoopBackOff" 10 \
        k get pod -n gpu-operator "$drv" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}'
fi
until_eq "p4d-1 no GPUs advertised" "" 30 node_gpu_resources p4d-1
validation_pod val-f p4d-1 driver
until_eq "val-f" "Failed" 30 pod_phase val-f
assert_contains "driver log" "no NVIDIA driver" "$(k logs -n gpu-operator val-f)"
fault p4d-1 none
until_eq "driver ready again" "True" 30 \
    k get pod -n gpu-operator "$drv" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
until_eq "p4d-1 GPUs back" "nvidia.com/gpu=8" 30 node_gpu_resources p4d-1

step "a NotReady node"
fault t4-0 notready
until_eq "t4-0 NotReady" "False" 30 \
    k get node t4-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
renew1=$(k get lease -n kube-node-lease t4-0 -o jsonpath='{.spec.renewTime}')
fault t4-0 none
until_eq "t4-0 Ready" "True" 30 \
    k get node t4-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
[ -n "$renew1" ] || fail "t4-0 has no lease renewTime"

step "bad fault specs are refused with a message"
out=$(assert_fails "unknown fault" "$NODESIM" fault --kubeconfig "$KUBECONFIG_E2E" p4d-0 melt)
assert_contains "message" 'unknown fault "melt"' "$out"
out=$(assert_fails "gpu out of range" "$NODESIM" fault --kubeconfig "$KUBECONFIG_E2E" t4-0 xid:gpu=9)
assert_contains "message" "gpu 9 does not exist (the node has 4 GPUs, 0-3)" "$out"
echo "PASS nodesim_faults"
