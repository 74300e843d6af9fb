/* op_policy: which ClusterPolicy is active, and what its spec asks of node gating. */
#ifndef OP_POLICY_H
#define OP_POLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "kc_error.h"
#include "op_gate.h"

/* The operator's version: its images' tag (the chart's appVersion, which a unit test checks). */
#define OP_VERSION "0.1.0"
/* The validator image when the spec names none: this version's image, as the chart tags it. */
#define OP_DEFAULT_VALIDATOR_IMAGE "ghcr.io/gpu-operator/gpu-operator-validator:" OP_VERSION
/* The finalizer the operator keeps on the active ClusterPolicy. */
#define OP_FINALIZER "nvidia.com/gpu-operator"

/* The active policy among `items` (an array of ClusterPolicy objects): the oldest by
 * creationTimestamp, the name breaking ties, of those not marked ignored (status.state): one
 * ignored stays so after the active one is deleted. NULL when there is none. Borrowed. */
const json_t *op_policy_active(const json_t *items);

/* A component section's `enabled` (def when absent or not a boolean). */
bool op_spec_enabled(const json_t *spec, const char *section, bool def);

/* Fills the gating policy from the active ClusterPolicy object. Strings point into obj or are
 * static; *validator_image_out is malloc'd (caller frees) and gate->validator_image points to it:
 * spec.validator's image, else operator_image (--operator-image, may be NULL), else
 * OP_DEFAULT_VALIDATOR_IMAGE, as the DaemonSets' validator containers resolve it.
 * KC_EINVALID naming the field when the spec cannot be used (a malformed validator image). */
kc_code op_policy_gate(const json_t *obj, const char *ns, const json_t *owner,
                       const char *operator_image, op_gate_policy *gate, char **validator_image_out,
                       kc_err *err);

/* The ownerReference to a ClusterPolicy object (new). */
json_t *op_policy_owner_ref(const json_t *obj);

#endif
