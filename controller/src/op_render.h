/* op_render: the objects of each state, from the plain manifests in states/ and a ClusterPolicy
 * spec: one C transform per state sets what the spec controls (images, env, args, resources,
 * tolerations, labels, update strategy, configs ...). Pure: no I/O but loading the directory. */
#ifndef OP_RENDER_H
#define OP_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

/* Annotation holding the hash of the rendered object; an update is needed only when it differs
 * from the live object's (NVIDIA's name). */
#define OP_HASH_ANNOTATION "nvidia.com/last-applied-hash"
/* Label on every object the operator renders. */
#define OP_MANAGED_LABEL "app.kubernetes.io/managed-by"
#define OP_MANAGED_VALUE "gpu-operator"
/* Label naming the state an object belongs to. */
#define OP_STATE_LABEL "nvidia.com/gpu-operator.state"

/* The manifests of every state, loaded once. */
typedef struct op_states op_states;

/* Loads dir (one folder per state, files applied in name order; see states/README.md). States
 * come out in the operator's order: pre-requisites, state-operator-metrics, state-driver,
 * state-container-toolkit, state-operator-validation, state-device-plugin,
 * state-mps-control-daemon, state-dcgm, state-dcgm-exporter, gpu-feature-discovery,
 * state-mig-manager, state-node-status-exporter, state-image-prepull (folders the operator does not
 * know are an error, a missing known folder too). KC_EPARSE / KC_EINVALID naming the file. */
kc_code op_states_load(const char *dir, op_states **out, kc_err *err);
void op_states_free(op_states *s);
size_t op_states_count(const op_states *s);
/* The state's folder name, e.g. "state-driver". */
const char *op_states_name(const op_states *s, size_t i);
/* Index of a state by name, or -1. */
int op_states_find(const op_states *s, const char *name);

typedef struct op_render_ctx {
    const json_t *spec;         /* the ClusterPolicy's .spec (borrowed) */
    const char *ns;             /* the operator's namespace: every namespaced object goes there */
    const json_t *owner;        /* ownerReference to the ClusterPolicy {apiVersion, kind, name, uid,
                                   controller: true, blockOwnerDeletion: true} (borrowed); cluster-
                                   scoped objects get it too */
    const char *operator_image; /* fallback image for the validator when spec.validator names
                                   none (may be NULL) */
    const char *driver_os;      /* the GPU nodes' OS as NVIDIA tags driver images, e.g.
                                   "ubuntu22.04": the driver image's tag gets "-<os>" (replacing
                                   an OS suffix it has), as NVIDIA's operator does; NULL: kept */
    const char *runtime;        /* the GPU nodes' container runtime (containerd, docker, crio),
                                   the toolkit's RUNTIME; NULL: none detected, then
                                   spec.operator.defaultRuntime, else containerd */
    const json_t *rendered;     /* the objects of the states rendered before this one, in order
                                   (borrowed, may be NULL): the image pre-pull lists the images
                                   of their DaemonSets */
    bool no_image_prepull;      /* state-image-prepull renders nothing */
} op_render_ctx;

/* Whether the spec enables state i (NVIDIA's defaults: driver.enabled, toolkit.enabled, ...;
 * operator-validation and pre-requisites always; node-status-exporter off unless enabled; mps
 * with the device plugin; mig-manager with migManager.enabled). */
bool op_state_enabled(const op_states *s, size_t i, const json_t *spec);

/* Renders state i for ctx: *objs_out is a new array of complete objects (apiVersion, kind,
 * metadata.name, metadata.namespace for namespaced kinds, ownerReferences = [ctx->owner], labels
 * OP_MANAGED_LABEL=OP_MANAGED_VALUE and OP_STATE_LABEL=<state>, annotation OP_HASH_ANNOTATION =
 * hex sha256 of the canonical JSON of the object without that annotation). A disabled state
 * renders an empty array (its objects are to be deleted). A spec the transform cannot honour
 * (a malformed image, an env entry without a name, ...) is KC_EINVALID with a message naming
 * the field, e.g. `spec.driver.version: "bad version" is not a valid image tag`; nothing is
 * rendered then. */
kc_code op_render_state(const op_states *s, size_t i, const op_render_ctx *ctx, json_t **objs_out,
                        kc_err *err);

/* The image a component section resolves to: `repository/image:version`, or `image` alone when
 * it already holds a tag or digest; def when the section names none. NULL + err on a malformed
 * one. Malloc'd. */
char *op_image(const json_t *section, const char *field_path, const char *def, kc_err *err);

#endif
