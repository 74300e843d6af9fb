/* ns_node: what a simulated GPU node shows through the API: its registered Node object and the
 * labels GPU feature discovery would publish for its current GPUs. Pure functions. */
#ifndef NS_NODE_H
#define NS_NODE_H

#include <jansson.h>

#include "kc_error.h"
#include "ns_dpconfig.h"
#include "ns_fleet.h"
#include "kc_migparted.h"

/* Annotation on every node nodesim registers: kubesim leaves such nodes' status and heartbeats
 * to nodesim. */
#define NS_MANAGED_ANNOTATION "kubesim.io/managed-by"
/* Annotation with the node's number of simulated GPUs (the fault command checks indices). */
#define NS_GPUS_ANNOTATION "nodesim.io/gpus"

/* The Node object of node `name` of group g as a kubelet with NFD running would register it:
 * labels (hostname, os, arch, NFD kernel/OS labels, pci-10de.present on GPU nodes, the group's
 * labels), annotations (the group's, NS_MANAGED_ANNOTATION=nodesim, NS_GPUS_ANNOTATION), taints,
 * and a status with capacity/allocatable (cpu, memory, pods, ephemeral-storage), Ready conditions,
 * an InternalIP (10.<a>.<b>.<c> from `index`) and nodeInfo. New reference; NULL when out of memory.
 */
json_t *ns_node_object(const ns_fleet_group *g, const char *name, unsigned index);

/* The node's base capacity (no GPU resources): a new object of quantity strings. */
json_t *ns_node_base_capacity(const ns_fleet_group *g);

/* The node's Ready-style conditions with Ready set from `ready` (reason/message say why when
 * not). `now` is RFC 3339. New array. */
json_t *ns_node_conditions(int ready, const char *why, const char *now);

/* Inputs of GFD's labels. */
typedef struct ns_gfd_input {
    const kc_gpu_model *model;
    int n_gpus;                 /* GPUs present (lost ones excluded) */
    const kc_mp_gpu_state *mig; /* n_gpus entries, or NULL when MIG is off everywhere */
    ns_mig_strategy strategy;   /* GFD's --mig-strategy */
    const ns_dpconfig *sharing; /* the sharing config GFD reads (may be NULL) */
    const char *driver_version; /* "550.90.07" */
    const char *cuda_version;   /* "12.4" */
    const char *machine;        /* gpu.machine (the node's product name) */
} ns_gfd_input;

/* Every nvidia.com/ label GFD publishes for the input, as a new object name → string value:
 * gpu.count/product/memory/family/compute.major/compute.minor/replicas/sharing-strategy/machine,
 * cuda.driver-version.*, cuda.runtime-version.*, mig.capable, mig.strategy, mps.capable, and per
 * strategy: single with one profile everywhere → product "<product>-MIG-<profile>", count and
 * memory of the MIG devices; single with mixed layouts → product "<product>-MIG-INVALID", count
 * 0; mixed → mig-<profile>.{count,memory,multiprocessors,slices.gi,slices.ci,engines.*}.
 * Time-slicing/MPS of nvidia.com/gpu: gpu.replicas=N, gpu.sharing-strategy, and gpu.product
 * gains "-SHARED" unless the resource is renamed. */
json_t *ns_gfd_labels(const ns_gfd_input *in);

/* True for label keys GFD owns (the ones ns_gfd_labels may produce, and stale per-profile
 * mig-<profile>.* keys). */
int ns_gfd_owns_label(const char *key);

#endif
