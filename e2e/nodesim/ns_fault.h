/* ns_fault: the faults nodesim injects on a node, parsed from the node's nodesim.io/faults
 * annotation (or the `nodesim fault` command that writes it). */
#ifndef NS_FAULT_H
#define NS_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kc_error.h"

/* The annotation holding a node's active faults: a comma-separated list of
 *   xid[:gpu=N][:code=C]   an XID error on GPU N (default 0, code 13): validation fails there
 *   gpu-lost[:gpu=N]       GPU N (default the last) fell off the bus: capacity drops by one
 *   driver-fail            the driver does not load: its pod crash-loops, GPUs never come up
 *   mig-fail               applying a MIG config fails (state failed)
 *   mig-hang               applying a MIG config never finishes (state stays pending)
 *   notready               the node reports NotReady and stops renewing its Lease
 *   slow[:factor=F]        every operand takes F times longer (default 10)
 * Empty or absent: no fault. */
#define NS_FAULT_ANNOTATION "nodesim.io/faults"
#define NS_FAULT_MAX_GPUS   32

typedef struct ns_faults {
    uint32_t xid_gpus;               /* bit N: XID on GPU N */
    int xid_code[NS_FAULT_MAX_GPUS]; /* XID code per GPU with an XID */
    uint32_t lost_gpus;              /* bit N: GPU N is gone */
    bool driver_fail, mig_fail, mig_hang, notready;
    int slow_factor; /* 1: normal speed */
} ns_faults;

/* Parses spec for a node of n_gpus GPUs (GPU indices must be < n_gpus; GPU faults on a node
 * without GPUs are errors). NULL or "" → no fault. KC_EINVALID with a message naming the entry:
 * `fault "xid:gpu=9": gpu 9 does not exist (the node has 8 GPUs, 0-7)`. On error *out is
 * cleared (no fault). */
kc_code ns_fault_parse(const char *spec, int n_gpus, ns_faults *out, kc_err *err);

/* True when no fault is active. */
bool ns_fault_none(const ns_faults *f);

/* Number of set bits below n (GPUs lost among the first n). */
int ns_fault_count_bits(uint32_t mask, int n);

#endif
