#!/usr/bin/env bash
# Chaos: the cluster corrupted behind the operator's back while it is down (and a check of the
# checker itself): on a ready cluster, with the operator stopped, a DaemonSet is deleted, another's
# template hash annotation is tampered with, a validation pod is duplicated and a node's deploy
# label is removed (a `false` would be the user's opt-out, which the operator keeps). The checker must see each (lost, duplicated, wrong) and the fresh-operator
# cross-check the tampered hash; the restarted operator must then repair all of it (the duplicate
# validation pod included: it carries the operator's labels and owner).
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

chaos_init "cluster corrupted while the operator was down"
chaos_cluster fleet-gpu.yaml
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_fault_end
chaos_converge 120 || fail "the cluster did not converge before the corruption"

operator_stop
k delete ds -n gpu-operator nvidia-dcgm-exporter >/dev/null
k annotate ds -n gpu-operator nvidia-device-plugin-daemonset nvidia.com/last-applied-hash=tampered --overwrite >/dev/null
k label node t4-0 nvidia.com/gpu.deploy.gpu-feature-discovery- >/dev/null
orig=$(k get pods -n gpu-operator -l nvidia.com/gpu-operator.validation=driver,nvidia.com/gpu-operator.node=p4d-0 -o jsonpath='{.items[0].metadata.name}')
k get pod -n gpu-operator "$orig" -o json | python3 -c '
import json, sys
p = json.load(sys.stdin)
m = p["metadata"]
p["metadata"] = {"name": m["name"] + "-copy", "namespace": m["namespace"], "labels": m["labels"],
                 "annotations": m.get("annotations", {})}
p.pop("status", None)
print(json.dumps(p))' | k create -f - >/dev/null

step "the checker sees each corruption"
chaos_check && fail "the checker passed a corrupted cluster"
cat "$E2E_DIR/chaos-findings"
findings=$(cat "$E2E_DIR/chaos-findings")
assert_contains "deleted DaemonSet" "lost: DaemonSet nvidia-dcgm-exporter" "$findings"
assert_contains "duplicated validation pod" "duplicated: validation pods for node p4d-0 stage driver: 2" "$findings"
assert_contains "removed label" "lost: node t4-0: label nvidia.com/gpu.deploy.gpu-feature-discovery=None" "$findings"
detected="lost $CHAOS_LOST, duplicated $CHAOS_DUP, wrong $CHAOS_WRONG"

step "the fresh-operator cross-check sees the deleted DaemonSet and the tampered hash"
chaos_verify_fresh
fresh=$(cat "$E2E_DIR/chaos-fresh")
assert_contains "recreated DaemonSet" "lost: DaemonSet/nvidia-dcgm-exporter" "$fresh"
assert_contains "tampered hash" "wrong: DaemonSet/nvidia-device-plugin-daemonset hash tampered" "$fresh"

step "the restarted operator repairs what it owns"
chaos_fault_end
chaos_fault_describe "cluster corrupted while the operator was down (checker saw: $detected)"
chaos_converge 120 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
