/* op_migcheck: the MIG config a node asks for, judged against its GPUs as NVIDIA's MIG manager
 * (mig-parted) will apply it. */
#ifndef OP_MIGCHECK_H
#define OP_MIGCHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_migparted.h"

/* Whether config `cfg` of the parsed MIG manager config `mp` (named `source` in messages, e.g.
 * "ConfigMap gpu-operator/default-mig-parted-config") can be applied to `node`'s GPUs, whose
 * model comes from GPU feature discovery's nvidia.com/gpu.product label. When not, `why` says
 * why: the config is not defined; it has no entry for the GPU model (mig-parted then applies
 * nothing and reports success); a layout cannot be placed (with the memory and compute slice
 * arithmetic); or what mig-parted refuses (a profile the GPU lacks, a GPU index the node does not
 * have). A GPU model not in the table is not judged (true). */
bool op_mig_check(const kc_migparted *mp, const char *source, const char *cfg, const json_t *node,
                  char *why, size_t size);

#endif
