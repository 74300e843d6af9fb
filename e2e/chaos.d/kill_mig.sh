#!/usr/bin/env bash
# Chaos: the operator killed (kill -9) at 20 random points of a MIG reconfiguration (p4d-0
# labelled nvidia.com/mig.config=all-balanced under the mixed strategy, as operator_mig does),
# restarted each time (random sleeps of 0-CHAOS_KILL_MAX_MS; CHAOS_SEED replays them). The node
# must end with its MIG resources advertised, every MIG profile validated and
# mig.config.state=success, and the rest of the cluster as after a clean rollout.
source "$(dirname "$0")/../lib.sh"
source "$E2E_ROOT/lib_gpu.sh"
source "$E2E_ROOT/lib_operator.sh"
source "$E2E_ROOT/lib_chaos.sh"

kills=${CHAOS_KILLS:-20}
max_ms=${CHAOS_KILL_MAX_MS:-1000}
chaos_seed
chaos_init "kill -9 x$kills during a MIG reconfiguration (seed $CHAOS_SEED)"
# Slow MIG changes and validations so that the reconfiguration lasts long enough to be cut 20 times.
chaos_cluster fleet-gpu.yaml --nodesim --mig-apply-ms=30000 --nodesim --validation-ms=3000
chaos_operator
k apply -f "$E2E_ROOT/testdata/clusterpolicy-mixed.yaml" >/dev/null
until_eq "ready before the reconfiguration" ready 180 cp_state

k label node p4d-0 nvidia.com/mig.config=all-balanced --overwrite >/dev/null
mid=0
for i in $(seq 1 "$kills"); do
    chaos_rand "$max_ms"
    ms=$CHAOS_RAND
    sleep_ms "$ms"
    chaos_kill9
    at="$(chaos_state) mig.config.state=$(chaos_mig_state p4d-0)"
    case "$at" in state=ready*mig.config.state=success) ;; *) mid=$((mid + 1)) ;; esac
    echo "kill $i/$kills after ${ms} ms: $at"
    chaos_restart
done
chaos_fault_end
chaos_fault_describe "kill -9 x$kills during a MIG reconfiguration ($mid before done; seed $CHAOS_SEED)"
[ "$mid" -ge $((kills / 2)) ] || fail "only $mid of $kills kills landed before the reconfiguration was done"
chaos_expect_res p4d-0 "nvidia.com/gpu=0 nvidia.com/mig-1g.5gb=16 nvidia.com/mig-2g.10gb=8 nvidia.com/mig-3g.20gb=8"
chaos_expect_res t4-0 "nvidia.com/gpu=4"
chaos_expect_label p4d-0 nvidia.com/mig.config all-balanced
chaos_expect_label p4d-0 nvidia.com/mig.config.state success
chaos_expect_label p4d-0 nvidia.com/gpu.deploy.device-plugin true
for p in mig-1g.5gb mig-2g.10gb mig-3g.20gb; do
    chaos_expect_validation p4d-0 mig-manager "nvidia.com/$p"
done
chaos_converge 180 || true
[ "$CHAOS_CONVERGED" = no ] || chaos_verify_fresh
chaos_finish
