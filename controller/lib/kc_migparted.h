/* kc_migparted: parser, validator and resolver for mig-parted's config format (config.yaml). */
#ifndef KC_MIGPARTED_H
#define KC_MIGPARTED_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kc_error.h"
#include "kc_gpu.h"

/* One entry of a named config: which GPUs it targets and what it makes of them. */
typedef struct kc_mp_entry {
    int all_devices; /* 1 for `devices: all` */
    int *devices;    /* GPU indices when !all_devices (owned) */
    size_t n_devices;
    uint32_t *filter; /* device-filter PCI ids; n_filter == 0 means every model (owned) */
    size_t n_filter;
    int mig_enabled;
    char **profiles; /* mig-devices keys, in file order (owned) */
    int *counts;     /* mig-devices values (owned) */
    size_t n_profiles;
} kc_mp_entry;

typedef struct kc_mp_config {
    char *name; /* owned */
    kc_mp_entry *entries;
    size_t n_entries;
} kc_mp_config;

/* A parsed config file. Everything inside is owned by it; free with kc_migparted_free. */
typedef struct kc_migparted {
    kc_mp_config *configs; /* in file order */
    size_t n_configs;
} kc_migparted;

/* The MIG state of one GPU: MIG mode and how many instances of each of its model's profiles
 * (counts[i] for model->profiles[i]). */
typedef struct kc_mp_gpu_state {
    int mig_enabled;
    int counts[KC_GPU_MAX_PROFILES];
} kc_mp_gpu_state;

/* Parses and validates config.yaml text. `name` labels the input in messages (may be NULL).
 * Errors: KC_EPARSE for YAML syntax, KC_EINVALID for a document that breaks the format, with the
 * path of the offending value, e.g.
 * `mig-configs.all-balanced[1].mig-devices."1g.5gb": count must be a positive integer`.
 * On success *out is new (caller frees with kc_migparted_free). */
kc_code kc_migparted_parse(const char *yaml, size_t len, const char *name, kc_migparted **out,
                           kc_err *err);

/* As kc_migparted_parse from an already-decoded document (borrowed). */
kc_code kc_migparted_from_json(const json_t *doc, kc_migparted **out, kc_err *err);

/* Frees a parsed config; accepts NULL. */
void kc_migparted_free(kc_migparted *mp);

/* The named config, or NULL (borrowed from mp). */
const kc_mp_config *kc_migparted_find(const kc_migparted *mp, const char *name);

/* Resolves config `name` for a node whose GPU i is of model models[i] (n_gpus entries).
 * states[] holds each GPU's current state on entry and the result on return: entries apply in
 * file order, a later entry overriding an earlier one for the same GPU; a GPU that no entry
 * matches (by index and device-filter) keeps its state. Each resulting layout is checked with
 * kc_gpu_layout_fits. On error (KC_ENOTFOUND for an unknown name, KC_EINVALID for a profile the
 * model lacks or a layout that does not fit) states[] is left unchanged. */
kc_code kc_migparted_apply(const kc_migparted *mp, const char *name,
                           const kc_gpu_model *const *models, size_t n_gpus,
                           kc_mp_gpu_state *states, kc_err *err);

#endif
