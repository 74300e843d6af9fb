/* ks_crd: CustomResourceDefinitions: their admission (defaults and validation of the CRD itself)
 * and the structural-schema machinery applied to custom objects (pruning, defaults, validation).
 * ks_crd_sync and ks_crd_validate are declared in ks_sim.h. */
#ifndef KS_CRD_H
#define KS_CRD_H

#include <jansson.h>
#include <stddef.h>

#include "ks_admit.h"

/* Drops the fields of obj that schema does not declare (at the root: everything but apiVersion,
 * kind, metadata and the declared properties), except under x-kubernetes-preserve-unknown-fields
 * and additionalProperties, as the API server prunes custom objects. When pruned is an array,
 * the path of each dropped field is appended to it (".spec.foo" style, for strict field
 * validation: `unknown field "spec.foo"`). Returns the number of fields dropped. */
size_t ks_crd_prune(const json_t *schema, json_t *obj, json_t *pruned);

/* Fills the schema's `default` values into obj where a property is absent (or null and not
 * nullable) and its parent object exists, as the API server defaults custom objects. A null in a
 * field that is neither nullable nor defaulted is dropped first, as the API server's decoder does
 * (declared properties and additionalProperties; array elements are left alone). */
void ks_crd_default(const json_t *schema, json_t *obj);

/* Validates obj against schema, appending every violation to v (the root's apiVersion, kind and
 * metadata are not checked against the schema): types, enum, bounds, lengths, patterns, the
 * `date` and `date-time` string formats, required properties, then the uniqueness rules of
 * x-kubernetes-list-type `set` and `map` lists (Duplicate value), in the API server's order. */
void ks_crd_schema_check(ks_verr *v, const json_t *schema, const json_t *obj);
/* What the API server checks on a /status write: the object's status against the schema's
 * status property; fields are named status.<path>, the messages' "in body" paths <path>. */
void ks_crd_schema_check_status(ks_verr *v, const json_t *schema, const json_t *obj);

/* Admission of CustomResourceDefinition objects: defaults (names.singular, listKind,
 * conversion; on create, the initial status the API server stores) and validation (group, names,
 * scope, versions, name = plural.group, schemas). */
void ks_crd_definition_default(json_t *crd, bool create);
void ks_crd_definition_validate(ks_verr *v, const json_t *old, const json_t *crd);

/* The Table columns of one CRD version: Name, then additionalPrinterColumns (or Age when there
 * are none). New reference. */
json_t *ks_crd_printer_columns(const json_t *version);

#endif
