#!/bin/bash
# On a machine with an NVIDIA GPU, the driver and the CUDA toolkit: builds gpu-validator with
# gcc alone and runs every mode (plain, with a status file), the refusals (bad mode, no device,
# no driver), ptxas on the shipped PTX, and compute-sanitizer's memcheck, racecheck, initcheck
# and synccheck on each mode; then lists the GPU's MIG profiles and placements (read only).
#   bash controller/validator/gpu-check.sh   (from the repository root)
set -u
V=controller/validator
B=$(mktemp -d)
echo "== machine"; nvidia-smi --query-gpu=name,pci.device_id,driver_version,memory.total,mig.mode.current --format=csv
uname -r; gcc --version | head -1; which compute-sanitizer ptxas
echo "== build"
gcc -std=c11 -O2 -g -Wall -Wextra -Werror -Wno-format-truncation -D_GNU_SOURCE -I$V $V/validator.c $V/validator_dl.c $V/validator_cuda.c $V/validator_nvml.c $V/vectoradd_ptx.c $V/validator_main.c -ldl -lm -o $B/gpu-validator || exit 1
echo "== ptxas of the shipped PTX"
cat > $B/dump.c <<'C'
#include <stdio.h>
#include "vectoradd_ptx.h"
int main(void){fputs(vectoradd_ptx,stdout);return 0;}
C
gcc -I$V $B/dump.c $V/vectoradd_ptx.c -o $B/dump 2>&1 && $B/dump > $B/v.ptx && ptxas -arch=sm_90 -v $B/v.ptx -o $B/v.cubin 2>&1 | tail -3; echo "ptxas rc=$?"
for m in driver toolkit plugin mig cuda; do
  echo "== mode $m"; rm -f $B/st
  ( time $B/gpu-validator --mode $m --status-file $B/st ) 2>&1; echo "rc=$?"; echo "-- status file:"; cat $B/st 2>/dev/null
done
echo "== bad mode"; $B/gpu-validator --mode nope; echo "rc=$?"
echo "== CUDA_VISIBLE_DEVICES=1 (no such device)"; CUDA_VISIBLE_DEVICES=1 $B/gpu-validator --mode cuda 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
echo "== no driver (wrong lib path)"; GPU_VALIDATOR_LIBCUDA=/nonexistent/libcuda.so.1 $B/gpu-validator --mode cuda 2>&1 | tail -2; echo "rc=${PIPESTATUS[0]}"
for t in memcheck racecheck initcheck synccheck; do
  for m in driver plugin mig cuda; do
    echo "== compute-sanitizer --tool $t, mode $m"
    extra=""; [ $t = memcheck ] && extra="--leak-check full"
    compute-sanitizer --tool $t $extra --error-exitcode 9 $B/gpu-validator --mode $m 2>&1 | grep -E "Test (PASSED|FAILED)|ERROR SUMMARY|LEAK SUMMARY|Error|error" | head -5
    echo "rc=${PIPESTATUS[0]}"
  done
done 2>&1
echo "== MIG profiles and placements (read only)"; nvidia-smi mig -lgip 2>&1 | head -40; nvidia-smi mig -lgipp 2>&1 | head -20
