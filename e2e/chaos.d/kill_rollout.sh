#!/usr/bin/env bash
# Chaos: the operator killed (kill -9) at 20 random points of a rollout, restarted each time
# (random sleeps of 0-CHAOS_KILL_MAX_MS after creating the ClusterPolicy and after each restart;
# the seed is printed, CHAOS_SEED replays it). The cluster must then converge with nothing lost,
# duplicated or wrong.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

kills=${CHAOS_KILLS:-20}
max_ms=${CHAOS_KILL_MAX_MS:-1500}
chaos_seed
chaos_init "kill -9 x$kills during a rollout (seed $CHAOS_SEED)"
# Slow node components so that the rollout lasts long enough to be cut 20 times.
chaos_cluster fleet-gpu.yaml --nodesim --driver-load-ms=15000 --nodesim --toolkit-ms=2000 --nodesim --validation-ms=5000
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
mid=0
for i in $(seq 1 "$kills"); do
    chaos_rand "$max_ms"
    ms=$CHAOS_RAND
    sleep_ms "$ms"
    chaos_kill9
    at=$(chaos_state)
    case "$at" in state=ready*) ;; *) mid=$((mid + 1)) ;; esac
    echo "kill $i/$kills after ${ms} ms: $at"
    chaos_restart
done
chaos_fault_end
chaos_fault_describe "kill -9 x$kills during a rollout ($mid before ready; seed $CHAOS_SEED)"
[ "$mid" -ge $((kills / 2)) ] || fail "only $mid of $kills kills landed before the rollout was done"
chaos_expect_res p4d-0 "nvidia.com/gpu=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_expect_label p4d-0 nvidia.com/gpu.product NVIDIA-A100-SXM4-40GB
chaos_expect_label t4-0 nvidia.com/gpu.product Tesla-T4
chaos_expect_label p4d-0 nvidia.com/mig.config all-disabled
chaos_converge 180 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
