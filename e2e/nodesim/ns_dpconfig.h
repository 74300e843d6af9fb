/* ns_dpconfig: NVIDIA device-plugin config (parse, validate, key selection, advertised resources).
 */
#ifndef NS_DPCONFIG_H
#define NS_DPCONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "kc_error.h"
#include "kc_gpu.h"
#include "kc_migparted.h"

typedef enum ns_mig_strategy {
    NS_MIG_NONE = 0,
    NS_MIG_SINGLE,
    NS_MIG_MIXED,
} ns_mig_strategy;

/* Parses "none" | "single" | "mixed"; returns -1 for anything else. */
int ns_mig_strategy_parse(const char *s);
const char *ns_mig_strategy_name(ns_mig_strategy s);

/* One shared resource: nvidia.com/gpu or nvidia.com/mig-<profile>, advertised replicas times. */
typedef struct ns_dp_resource {
    char *name;   /* owned */
    char *rename; /* owned; NULL when absent */
    int replicas; /* >= 2 */
} ns_dp_resource;

/* sharing.timeSlicing or sharing.mps. */
typedef struct ns_dp_sharing {
    int present;
    int rename_by_default;
    int fail_requests_greater_than_one;
    ns_dp_resource *resources; /* owned */
    size_t n_resources;
} ns_dp_sharing;

/* A parsed config file; free with ns_dpconfig_free. */
typedef struct ns_dpconfig {
    int has_strategy;         /* flags.migStrategy was given */
    ns_mig_strategy strategy; /* NS_MIG_NONE when not given */
    int fail_on_init_error;   /* flags.failOnInitError, default 1 as NVIDIA's */
    ns_dp_sharing time_slicing;
    ns_dp_sharing mps;
} ns_dpconfig;

/* Parses one config file (one ConfigMap key's value). `name` labels messages (may be NULL).
 * KC_EPARSE for YAML syntax, KC_EINVALID with the path of the offending value, e.g.
 * `sharing.timeSlicing.resources[0].replicas: must be an integer >= 2`. *out is new on success. */
kc_code ns_dpconfig_parse(const char *yaml, size_t len, const char *name, ns_dpconfig **out,
                          kc_err *err);
kc_code ns_dpconfig_from_json(const json_t *doc, ns_dpconfig **out, kc_err *err);
void ns_dpconfig_free(ns_dpconfig *cfg);

/* Picks the ConfigMap key a node uses, as NVIDIA's config manager does: the node's
 * nvidia.com/device-plugin.config label value (when non-empty; it must name a key), else the
 * configured default (DEFAULT_CONFIG, when non-empty; it must name a key), else the ordered
 * FALLBACK_STRATEGIES list (comma-separated; NULL or "" is an empty list): "named" picks a key
 * named "default", "single" the only key, "empty" no config at all (*key_out NULL: the plugin
 * runs with its defaults, plain GPUs). `data` is the ConfigMap's data object (borrowed); *key_out
 * points into it. Errors: KC_ENOTFOUND naming the missing key and the keys present, KC_EINVALID
 * for an empty ConfigMap, an unknown strategy, or when every fallback fails. */
kc_code ns_dpconfig_select_key(const json_t *data, const char *label, const char *default_key,
                               const char *fallbacks, const char **key_out, kc_err *err);

/* Computes what the device plugin advertises on a node of n_gpus GPUs of `model`:
 * mig[i] is GPU i's MIG state (NULL: every GPU has MIG disabled); `cfg` (may be NULL) supplies
 * sharing. none: every GPU is nvidia.com/gpu; single: MIG devices are nvidia.com/gpu and every
 * GPU must be in the same mode with one profile throughout; mixed: whole GPUs are nvidia.com/gpu,
 * MIG devices nvidia.com/mig-<profile>. Time-slicing/MPS multiply a matching resource by its
 * replicas and rename it (rename, or <name>.shared under renameByDefault). *resources_out is a
 * new object name → integer (nvidia.com/gpu present, possibly 0, unless sharing renamed it).
 * KC_EINVALID when the single strategy's rule is broken (GFD then reports MIG-INVALID and nothing
 * is advertised), MPS is combined with the mixed strategy (refused at start, whatever the GPUs)
 * or MPS would share MIG devices (single strategy on MIG-enabled GPUs). */
kc_code ns_dp_advertise(const ns_dpconfig *cfg, ns_mig_strategy strategy, const kc_gpu_model *model,
                        size_t n_gpus, const kc_mp_gpu_state *mig, json_t **resources_out,
                        kc_err *err);

/* What the device plugin's Allocate refuses under failRequestsGreaterThanOne (time-slicing
 * default false, MPS default true): a new object advertised resource name → {"max": 1, "error":
 * the plugin's message, "{found}" standing for the count asked}, for each shared resource in
 * `advertised` (ns_dp_advertise's result); empty without sharing or with the option off. */
kc_code ns_dp_allocate_limits(const ns_dpconfig *cfg, const json_t *advertised, json_t **out,
                              kc_err *err);

#endif
