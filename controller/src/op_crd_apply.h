/* op_crd_apply: the operator's Helm hook modes: re-apply a CRD file, delete a ClusterPolicy or
 * a CRD. */
#ifndef OP_CRD_APPLY_H
#define OP_CRD_APPLY_H

#include <stdio.h>

#include "kc_client.h"
#include "kc_error.h"

/* The file a --apply-crd argument names: an absolute or ./ path as given; a bare relative one is
 * looked up in crds_dir (NULL: $CRDS_DIR, then /opt/gpu-operator/crds), then taken as given.
 * Writes into buf; returns buf. */
const char *op_crd_resolve(const char *arg, const char *crds_dir, char *buf, size_t size);

/* Creates the CustomResourceDefinition in `path` (one YAML document), or replaces the spec,
 * labels and annotations of the installed one with the file's, then waits up to timeout_s for it
 * to be Established. Says what it did on `out`. */
kc_code op_crd_apply(kc_client *c, const char *path, int timeout_s, FILE *out, kc_err *err);

/* Deletes the ClusterPolicy `name` and waits up to timeout_s for it to be gone (the operator's
 * finalizer removes operands and node labels first). A missing policy is success. */
kc_code op_policy_delete_wait(kc_client *c, const char *name, int timeout_s, FILE *out,
                              kc_err *err);

/* Deletes the CustomResourceDefinition `name` and waits up to timeout_s for it to be gone (the
 * chart's operator.cleanupCRD). A missing CRD is success. */
kc_code op_crd_delete_wait(kc_client *c, const char *name, int timeout_s, FILE *out, kc_err *err);

#endif
