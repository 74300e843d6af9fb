/* op_transform: the per-state transforms of op_render and the helpers they share (spec access
 * with field-naming errors, container/env/volume edits, the settings common to DaemonSets). */
#ifndef OP_TRANSFORM_H
#define OP_TRANSFORM_H

#include <jansson.h>
#include <stdbool.h>

#include "kc_error.h"
#include "op_render.h"

/* The validator image of the manifests; containers using it take spec.validator's image. */
#define OP_VALIDATOR_REPO "ghcr.io/gpu-operator/gpu-operator-validator"

/* What a transform works on: the state's objects (already copies; edit or remove them freely). */
typedef struct op_tctx {
    const op_render_ctx *ctx;
    const json_t *spec; /* never NULL: an empty object stands for a missing spec */
    json_t *objs;       /* array of the state's objects */
    const char *state;
    kc_err *err;
} op_tctx;

typedef kc_code (*op_transform_fn)(op_tctx *t);

/* The transform of a state by folder name, or NULL for none. */
op_transform_fn op_transform_for(const char *state);

kc_code op_transform_prerequisites(op_tctx *t);
kc_code op_transform_operator_metrics(op_tctx *t);
kc_code op_transform_driver(op_tctx *t);
kc_code op_transform_toolkit(op_tctx *t);
kc_code op_transform_validation(op_tctx *t);
kc_code op_transform_device_plugin(op_tctx *t);
kc_code op_transform_mps(op_tctx *t);
kc_code op_transform_dcgm(op_tctx *t);
kc_code op_transform_dcgm_exporter(op_tctx *t);
kc_code op_transform_gfd(op_tctx *t);
kc_code op_transform_mig_manager(op_tctx *t);
kc_code op_transform_node_status_exporter(op_tctx *t);
kc_code op_transform_image_prepull(op_tctx *t);

/* ---- spec access: absent fields give the default; a field of the wrong type is KC_EINVALID
 * naming it as `spec.<path>`. ---- */

/* spec.<name> as an object, NULL when absent; *out set, error when present but not an object. */
kc_code op_spec_obj(const json_t *parent, const char *key, const char *path, const json_t **out,
                    kc_err *err);
kc_code op_spec_bool(const json_t *parent, const char *key, const char *path, bool def, bool *out,
                     kc_err *err);
/* A string field; NULL when absent or empty. */
kc_code op_spec_str(const json_t *parent, const char *key, const char *path, const char **out,
                    kc_err *err);
/* The `enabled` of spec.<section> with NVIDIA's default. */
kc_code op_section_enabled(const json_t *spec, const char *section, bool def, bool *out,
                           kc_err *err);

/* ---- manifest edits ---- */

json_t *op_find_object(json_t *objs, const char *kind, const char *name);
void op_remove_object(json_t *objs, const char *kind, const char *name);
/* The pod spec of a DaemonSet (spec.template.spec), or NULL. */
json_t *op_pod_spec(json_t *ds);
/* A container of the pod by name, in containers or initContainers. */
json_t *op_find_container(json_t *ds, const char *name);
/* An element {name: ...} of an array by name. */
json_t *op_find_named(json_t *arr, const char *name);
void op_remove_named(json_t *arr, const char *name);
/* Removes a container (from containers or initContainers), a volume, or a volumeMount of every
 * container. */
void op_remove_container(json_t *ds, const char *name);
void op_remove_volume(json_t *ds, const char *name);
/* Sets env name=value (replacing a valueFrom entry of that name, or appending). */
kc_code op_env_set(json_t *container, const char *name, const char *value);
void op_env_remove(json_t *container, const char *name);
/* Merges the spec env array (at path) into the container's env by name. */
kc_code op_env_merge(json_t *container, const json_t *env, const char *path, kc_err *err);
/* Sets the hostPath path of a volume, when the pod has that volume. */
kc_code op_volume_host_path(json_t *ds, const char *volume, const char *path);
/* Sets the configMap name of a volume, when the pod has that volume. */
kc_code op_volume_config_map(json_t *ds, const char *volume, const char *name);

/* How a section's args reach the main container. */
typedef enum op_args_mode {
    OP_ARGS_NONE,    /* not applied (the manifest's args are a script) */
    OP_ARGS_REPLACE, /* a non-empty list replaces the manifest's */
    OP_ARGS_APPEND,  /* appended to the manifest's (which select the container's mode) */
} op_args_mode;

/* A component section applied to its containers. */
typedef struct op_component {
    const char *section;           /* path under spec, e.g. "devicePlugin" or "driver.manager" */
    const char *const *containers; /* NULL-terminated: containers taking the section's image */
    const char *main;              /* the container taking env and args */
    const char *def_image;         /* NULL: the manifest image of `main` */
    bool env;                      /* merge the section's env into main */
    op_args_mode args;
    bool pod; /* the section owns the pod: its hostNetwork applies */
} op_component;

/* Image, imagePullPolicy, imagePullSecrets, resources (every listed regular container), env and
 * args of a component section, and hostNetwork when it owns the pod. */
kc_code op_apply_component(op_tctx *t, json_t *ds, const op_component *c);

/* The settings every DaemonSet takes: daemonsets.*, runtimeClassName where the manifest sets one,
 * hostPaths, and spec.validator's image on the validator containers. */
kc_code op_apply_daemonset_common(op_tctx *t, json_t *ds, bool is_driver);

/* The validator image the spec resolves to (malloc'd), from spec.validator, else the operator
 * image, else OP_DEFAULT_VALIDATOR_IMAGE (the validation pods' image too: the manifests' `dev`
 * tag names no published image). */
char *op_validator_image(op_tctx *t);

/* Whether a container's image is the validator's (by repository). */
bool op_is_validator_container(const json_t *container);

/* Device-plugin config shared by the device plugin, MPS daemon and GFD: MIG_STRATEGY on `main`,
 * the `config` volume from devicePlugin.config.name and DEFAULT_CONFIG; without a name the
 * config-manager containers, config volumes and CONFIG_FILE go. */
kc_code op_apply_plugin_config(op_tctx *t, json_t *ds, const char *main, bool mig_strategy);

/* spec.mig.strategy (default single), validated. */
kc_code op_mig_strategy(op_tctx *t, const char **out);

/* The section at a dotted path under spec ("driver.manager"), NULL when absent. */
kc_code op_spec_path(const json_t *spec, const char *dotted, const json_t **out, kc_err *err);

/* Applies a ServiceMonitor section ({interval, scrapeTimeout, honorLabels, additionalLabels,
 * relabelings}) at path to the ServiceMonitor object. */
kc_code op_apply_service_monitor(op_tctx *t, json_t *sm, const json_t *sec, const char *path);

/* GPU_VALIDATOR_DRIVER_ROOT of a driver-validation container: the driver container's root, or the
 * host's (at /host) when the driver is not containerized. */
kc_code op_set_driver_root(op_tctx *t, json_t *container);

/* Checks that a string is a Kubernetes object name (DNS-1123 subdomain). */
bool op_valid_name(const char *s);

#endif
