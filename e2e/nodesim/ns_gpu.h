/* ns_gpu: nodesim's built-in table of GPU models, their MIG profiles, and the layout-fit check. */
#ifndef NS_GPU_H
#define NS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "kc_error.h"

/* The most profiles any model in the table has (per-GPU count arrays are this long). */
#define NS_GPU_MAX_PROFILES 8

/* One MIG GPU-instance profile of a model. */
typedef struct ns_mig_profile {
    const char *name;    /* "1g.5gb", "1g.5gb+me" */
    int max_count;       /* instances of this profile one GPU can hold */
    int memory_mib;      /* memory of one instance, as GFD labels it */
    int multiprocessors; /* SMs of one instance */
    int compute_slices;  /* the "Ng" number */
    int memory_slices;   /* memory slices one instance takes */
    int media_extension; /* 1 for +me variants: at most one per GPU */
} ns_mig_profile;

/* One GPU model. All strings and the profile array are static. */
typedef struct ns_gpu_model {
    const char *name;               /* our spelling, e.g. "A100-SXM4-40GB", "Tesla-T4" */
    const char *product;            /* GFD nvidia.com/gpu.product, e.g. "NVIDIA-A100-SXM4-40GB" */
    uint32_t pci_id;                /* 0x<device><vendor>, e.g. 0x20B010DE */
    int memory_mib;                 /* nvidia.com/gpu.memory */
    const char *family;             /* nvidia.com/gpu.family: ampere, hopper, turing, volta, ... */
    int cc_major, cc_minor;         /* compute capability */
    int mig_capable;                /* 1 when the model supports MIG */
    int compute_slices;             /* 7 (4 on A30); 0 without MIG */
    int memory_slices;              /* 8 (4 on A30); 0 without MIG */
    const ns_mig_profile *profiles; /* NULL without MIG */
    size_t n_profiles;
} ns_gpu_model;

/* The table: ns_gpu_model_count() models, reachable by index. */
size_t ns_gpu_model_count(void);
const ns_gpu_model *ns_gpu_model_at(size_t i);

/* Finds a model by name, case-insensitively, accepting our spelling, the GFD product spelling and
 * the short names people type ("A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", "Tesla-T4", "T4",
 * "tesla t4", "V100", "H100"); spaces, '-' and '_' are interchangeable. NULL when unknown. */
const ns_gpu_model *ns_gpu_find(const char *name);

/* Finds a model by PCI id (0x<device><vendor>). NULL when unknown. */
const ns_gpu_model *ns_gpu_find_pci(uint32_t pci_id);

/* Index of a profile of `model` by exact name ("1g.5gb"), or -1 when the model lacks it. */
int ns_gpu_profile_index(const ns_gpu_model *model, const char *profile);

/* Decides whether one GPU of `model` can hold `counts` (counts[i] instances of
 * model->profiles[i]; model->n_profiles entries): compute and memory slices within the GPU's,
 * each count within its profile's maximum, at most one +me instance. KC_OK when it fits, else
 * KC_EINVALID with a message such as "3×3g.20gb needs 9 compute slices, an A100-SXM4-40GB has 7".
 * A model without MIG fits only the empty layout. */
kc_code ns_gpu_layout_fits(const ns_gpu_model *model, const int *counts, kc_err *err);

/* Writes the layout as "3g.20gb + 2×1g.5gb" into buf (NUL-terminated, truncated); returns buf. */
const char *ns_gpu_layout_str(const ns_gpu_model *model, const int *counts, char *buf, size_t size);

#endif
