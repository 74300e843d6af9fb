/* ns_fleet: the fleet file nodesim registers (groups of nodes with their GPUs, OS and labels). */
#ifndef NS_FLEET_H
#define NS_FLEET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "kc_gpu.h"

/* How a host component is provided on a node: by the operator's container (the default) or
 * already installed on the host (the operand's pod is then not needed). */
typedef enum ns_provision { NS_PROV_CONTAINER = 0, NS_PROV_HOST } ns_provision;

/* One group of the fleet file. Strings and JSON values are owned by the fleet. */
typedef struct ns_fleet_group {
    char *name;                /* name prefix ("p4d" → p4d-0, p4d-1, ...); the node name itself
                                  when the group has no count */
    bool has_count;            /* count was given */
    int count;                 /* nodes in the group (1 without count) */
    const kc_gpu_model *model; /* NULL: CPU-only nodes */
    int gpus;                  /* GPUs per node (0 on CPU-only nodes) */
    char *cpu, *memory, *pods; /* capacity quantities */
    char *runtime;             /* nodeInfo.containerRuntimeVersion */
    char *kernel;              /* nodeInfo.kernelVersion and the NFD kernel label */
    char *os_id, *os_version;  /* NFD system-os_release.ID / VERSION_ID */
    char *os_image;            /* nodeInfo.osImage */
    char *driver_version;      /* CUDA driver version GFD reports, "550.90.07" */
    char *cuda_version;        /* CUDA version the driver supports, "12.4" */
    ns_provision driver, toolkit;
    bool mig_needs_reboot; /* MIG mode changes need a reboot (the GPU cannot be reset) */
    json_t *labels;        /* object: extra node labels */
    json_t *annotations;   /* object: extra node annotations */
    json_t *taints;        /* array of {key, value, effect} */
} ns_fleet_group;

typedef struct ns_fleet {
    ns_fleet_group *groups;
    size_t n_groups;
    size_t n_nodes; /* total over groups */
} ns_fleet;

/* Parses and validates a fleet file. Unknown keys, wrong types, unknown GPU models and bad counts
 * are KC_EINVALID with the path of the value: `nodes[1].gpu: unknown GPU model "A999" (known:
 * ...)`. `name` labels the input in messages. *out is new on success (ns_fleet_free). */
kc_code ns_fleet_parse(const char *yaml, size_t len, const char *name, ns_fleet **out, kc_err *err);
kc_code ns_fleet_load(const char *path, ns_fleet **out, kc_err *err);
void ns_fleet_free(ns_fleet *f);

/* Name of node k (0-based) of group g into buf. */
void ns_fleet_node_name(const ns_fleet_group *g, int k, char *buf, size_t size);

#endif
