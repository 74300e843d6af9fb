/* kc_gpu: the table of NVIDIA GPU models (kc_gpu_models.c), their MIG profiles, and the
 * placement-based layout-fit check. */
#ifndef KC_GPU_H
#define KC_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "kc_error.h"

/* The most profiles any model in the table has (per-GPU count arrays are this long). */
#define KC_GPU_MAX_PROFILES 12

/* One MIG GPU-instance profile of a model, as NVML describes it. */
typedef struct kc_mig_profile {
    const char *name;    /* "1g.5gb", "1g.5gb+me" (mig-parted's and nvidia-smi's spelling) */
    int id;              /* the GPU-instance profile id nvidia-smi lists; -1 when not known */
    int max_count;       /* instances of this profile one GPU can hold */
    int memory_mib;      /* memory of one instance, as GFD labels it */
    int multiprocessors; /* SMs of one instance */
    int compute_slices;  /* the "Ng" number */
    int memory_slices;   /* memory slices one instance takes (the placements' size) */
    int media_extension; /* 1 for +me and +me.all variants: at most one per GPU */
    unsigned starts;     /* placements NVML offers: bit i set when an instance may start at
                            memory slice i */
} kc_mig_profile;

/* One GPU model. All strings and the profile array are static. */
typedef struct kc_gpu_model {
    const char *name;               /* our spelling, e.g. "A100-SXM4-40GB", "Tesla-T4" */
    const char *product;            /* GFD nvidia.com/gpu.product, e.g. "NVIDIA-A100-SXM4-40GB" */
    uint32_t pci_id;                /* 0x<device><vendor>, e.g. 0x20B010DE */
    int memory_mib;                 /* nvidia.com/gpu.memory */
    const char *family;             /* nvidia.com/gpu.family: ampere, hopper, turing, volta, ... */
    int cc_major, cc_minor;         /* compute capability */
    int mig_capable;                /* 1 when the model supports MIG */
    int compute_slices;             /* 7 (4 on A30); 0 without MIG */
    int memory_slices;              /* 8 (4 on A30); 0 without MIG */
    const kc_mig_profile *profiles; /* NULL without MIG */
    size_t n_profiles;
} kc_gpu_model;

/* The table itself (kc_gpu_models.c); use the functions below. */
extern const kc_gpu_model kc_gpu_models[];
extern const size_t kc_gpu_n_models;

/* The table: kc_gpu_model_count() models, reachable by index. */
size_t kc_gpu_model_count(void);
const kc_gpu_model *kc_gpu_model_at(size_t i);

/* Finds a model by name, case-insensitively, accepting our spelling, the GFD product spelling and
 * the short names people type ("A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", "Tesla-T4", "T4",
 * "tesla t4", "V100", "H100"); spaces, '-' and '_' are interchangeable. NULL when unknown. */
const kc_gpu_model *kc_gpu_find(const char *name);

/* Finds a model by PCI id (0x<device><vendor>). NULL when unknown. */
const kc_gpu_model *kc_gpu_find_pci(uint32_t pci_id);

/* Index of a profile of `model` by exact name ("1g.5gb"), or -1 when the model lacks it. */
int kc_gpu_profile_index(const kc_gpu_model *model, const char *profile);

/* Decides whether one GPU of `model` can hold `counts` (counts[i] instances of
 * model->profiles[i]; model->n_profiles entries): every instance must get one of its profile's
 * placements without overlapping another's memory slices, compute slices must stay within the
 * GPU's, and each count within its profile's maximum (at most one +me instance). KC_OK when it
 * fits, else KC_EINVALID with mig-parted's message for a GPU instance NVML refuses:
 * "error setting MIGConfig: error attempting multiple config orderings: error creating GPU
 * instance for '1g.5gb': Insufficient Resources". A model without MIG fits only the empty layout.
 */
kc_code kc_gpu_layout_fits(const kc_gpu_model *model, const int *counts, kc_err *err);

/* As kc_gpu_layout_fits; on success placed[] (n_placed entries at most) receives the first memory
 * slice given to each instance, in profile order (counts[0] starts of profile 0, then profile 1's,
 * ...). placed may be NULL. */
kc_code kc_gpu_layout_place(const kc_gpu_model *model, const int *counts, int *placed,
                            size_t n_placed, kc_err *err);

/* The resource and label name of a MIG profile, as NVIDIA's device plugin and GFD spell it: the
 * profile name with each '+' made '.' ("1g.5gb+me" -> "1g.5gb.me"), since a '+' is not allowed
 * in a Kubernetes resource name. Writes into buf (NUL-terminated, truncated); returns buf. */
const char *kc_gpu_mig_name(const kc_mig_profile *p, char *buf, size_t size);

/* Writes the layout as "3g.20gb + 2×1g.5gb" into buf (NUL-terminated, truncated); returns buf. */
const char *kc_gpu_layout_str(const kc_gpu_model *model, const int *counts, char *buf, size_t size);

#endif
