/* kc_sharing: the device-plugin sharing config (time-slicing, MPS) a node will load, checked
 * before the device plugin starts with it: the key its config manager picks from the ConfigMap
 * named by spec.devicePlugin.config, and the rules NVIDIA's device plugin applies when it loads
 * that key (api/config/v1 of NVIDIA/k8s-device-plugin). Pure: the caller supplies the ConfigMap. */
#ifndef KC_SHARING_H
#define KC_SHARING_H

#include <jansson.h>
#include <stddef.h>

#include "kc_error.h"

/* The node label that picks a key of the ConfigMap (NVIDIA's). */
#define KC_SHARING_LABEL "nvidia.com/device-plugin.config"

/* Validates one config (a ConfigMap key's value) as the device plugin loads it: YAML syntax
 * (KC_EPARSE, "line L column C: ..."); then KC_EINVALID with the path of the offending value and
 * the plugin's own message, e.g. "sharing.timeSlicing.resources[0].replicas: number of replicas
 * must be >= 2", "version: unknown version: v2". Unknown keys are ignored, as the plugin ignores
 * them. mig_strategy (may be NULL) is the strategy the plugin gets from its environment
 * (MIG_STRATEGY, which the operator sets from spec.mig.strategy); it overrides the config's
 * flags.migStrategy, as the plugin's command line and environment override the file's flags,
 * and the file's counts only when it is NULL. MPS refuses the "mixed" strategy in effect.
 * KC_ENOMEM when out of memory. */
kc_code kc_sharing_validate(const char *yaml, size_t len, const char *mig_strategy, kc_err *err);

typedef struct kc_sharing_in {
    const char *ns;          /* the operator namespace */
    const char *cm_name;     /* spec.devicePlugin.config.name */
    const json_t *cm;        /* that ConfigMap, NULL when it does not exist */
    const char *label;       /* the node's nvidia.com/device-plugin.config label, or NULL */
    const char *default_key; /* spec.devicePlugin.config.default, or NULL */
    const char
        *mig_strategy; /* the plugin's MIG_STRATEGY (spec.mig.strategy; "single" when unset) */
} kc_sharing_in;

/* Checks what the node's device plugin will load. The key is the label's value when not empty,
 * else the default when not empty, else none (the operator runs the config manager with
 * FALLBACK_STRATEGIES=empty: the plugin then runs on its defaults, plain GPUs). KC_OK when the
 * plugin will start (*key_out: the key, or NULL for none; it points into in->cm); otherwise
 * KC_ENOTFOUND (missing ConfigMap, missing key) or KC_EINVALID / KC_EPARSE (a config the plugin
 * refuses) with err->msg naming the ConfigMap, the key and the error. KC_ENOMEM when out of
 * memory. key_out may be NULL. */
kc_code kc_sharing_check(const kc_sharing_in *in, const char **key_out, kc_err *err);

#endif
