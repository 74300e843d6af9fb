/* ks_admit: the pieces of kubesim's admission (defaulting and validation) that other parts use:
 * field-error collection in the API server's wording, the details.causes of the last 422, the
 * Go-style value rendering of error messages, and the Service clusterIP/nodePort allocators. */
#ifndef KS_ADMIT_H
#define KS_ADMIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "ks_sim.h"

/* ---- the causes of a 422 ------------------------------------------------------------------ */

/* The details.causes array ([{reason, message, field}], reason being "FieldValueRequired",
 * "FieldValueInvalid", "FieldValueNotSupported" ...) of the KC_EINVALID error that admission
 * (or ks_crd_validate) last reported ON THIS THREAD, when err is that error (its msg matches):
 * the API layer calls it right after ks_create/ks_update/ks_mutate returned KC_EINVALID, from the
 * same thread, to build the Status. Returns a new array (caller decrefs), or NULL when err is not
 * such an error (then the Status carries no causes). */
json_t *ks_admit_causes(const kc_err *err);
/* The untruncated message of that error (kc_err.msg holds at most KC_ERR_MSG_MAX - 1 bytes and
 * the API server's messages can be longer): a thread-local string valid until this thread's next
 * admission, or err->msg itself when err is not admission's last 422. */
const char *ks_admit_message(const kc_err *err);

/* ---- collecting field errors -------------------------------------------------------------- */

/* A list of field errors, rendered as the API server's field.Error: `<field>: <body>` where body
 * is e.g. `Required value`, `Invalid value: "x": detail`, `Unsupported value: "x": supported
 * values: "a", "b"`. Zero-initialise (ks_verr v = {0}); ks_verr_finish releases it. */
typedef struct ks_verr {
    json_t *causes; /* array of {reason, message, field}, created on the first error */
    bool nomem;
    /* Characters of a field path left out where a schema message names the path "in body"
     * (a /status write is checked against the status schema: "status." is not in the body). */
    size_t body_skip;
} ks_verr;

/* Appends one cause. body is the text after `<field>: `. */
void ks_verr_add(ks_verr *v, const char *reason, const char *field, const char *body);
/* `Required value` (+ `: detail` when detail is non-empty). */
void ks_verr_required(ks_verr *v, const char *field, const char *detail);
/* `Forbidden: detail`. */
void ks_verr_forbidden(ks_verr *v, const char *field, const char *detail);
/* `Invalid value: <gov>: detail`; gov is a value already rendered as Go prints it (see ks_go_*). */
void ks_verr_invalid(ks_verr *v, const char *field, const char *gov, const char *detail);
/* As ks_verr_invalid with a string value (printed quoted, as Go's %q). */
void ks_verr_invalid_str(ks_verr *v, const char *field, const char *value, const char *detail);
/* As ks_verr_invalid with an integer value. */
void ks_verr_invalid_int(ks_verr *v, const char *field, long long value, const char *detail);
/* `Invalid value: <gov>: detail` with reason FieldValueTypeInvalid. */
void ks_verr_type_invalid(ks_verr *v, const char *field, const char *gov, const char *detail);
/* `Unsupported value: <gov>: supported values: "a", "b"` (supported NULL-terminated). */
void ks_verr_unsupported(ks_verr *v, const char *field, const char *gov,
                         const char *const *supported);
/* `Duplicate value: <gov>`. */
void ks_verr_duplicate(ks_verr *v, const char *field, const char *gov);
/* `Too long: may not be more than <max> bytes`. */
void ks_verr_too_long(ks_verr *v, const char *field, long long max);
/* `Not found: <gov>`. */
void ks_verr_not_found(ks_verr *v, const char *field, const char *gov);
/* `Too many: <actual>: must have at most <max> items`. */
void ks_verr_too_many(ks_verr *v, const char *field, long long actual, long long max);
/* Number of errors so far. */
size_t ks_verr_count(const ks_verr *v);

/* Finishes a list: with no errors returns KC_OK; otherwise fills err with KC_EINVALID and the
 * API server's message `<Kind>[.<group>] "<name>" is invalid: <err>` (several errors: `[e1, e2]`,
 * duplicates dropped), records the causes for ks_admit_causes and returns KC_EINVALID. Out of
 * memory → KC_ENOMEM. Releases v in every case. */
kc_code ks_verr_finish(ks_verr *v, const char *group, const char *kind, const char *name,
                       kc_err *err);

/* ---- Go value rendering (malloc'd strings, NULL only when out of memory) -------------------- */

/* strconv.Quote: "a\"b\n" → "\"a\\\"b\\n\"". */
char *ks_go_quote(const char *s);
/* A JSON value as the API server prints an unstructured value in errors: strings quoted, numbers
 * as %v (1, 1.5, 1e+06), true/false, "null" for NULL or null, objects and arrays as Go's %#v of
 * map[string]interface {} / []interface {}. */
char *ks_go_value(const json_t *v);
/* map[string]string{"a":"b"} (keys sorted) or map[string]string(nil) for NULL. */
char *ks_go_string_map(const json_t *obj);
/* []string{"a", "b"} or []string(nil). */
char *ks_go_string_slice(const json_t *arr);
/* v1.LabelSelector{MatchLabels:map[string]string{...}, MatchExpressions:[]v1.LabelSelector...} */
char *ks_go_label_selector(const json_t *sel);

/* ---- name and key validation in the API server's words ------------------------------------ */

/* Each returns the number of messages written to msgs (at most 2), e.g. "must be no more than 63
 * characters" and "a lowercase RFC 1123 label must consist of ...". */
typedef char ks_vmsg[400];
int ks_valid_dns1123_label(const char *s, ks_vmsg msgs[2]);
int ks_valid_dns1123_subdomain(const char *s, ks_vmsg msgs[2]);
int ks_valid_dns1035_label(const char *s, ks_vmsg msgs[2]);
int ks_valid_qualified_name(const char *s, ks_vmsg msgs[2]);
int ks_valid_label_value(const char *s, ks_vmsg msgs[2]);
int ks_valid_config_key(const char *s, ks_vmsg msgs[2]);
/* By rule: 's' DNS-1123 subdomain, 'l' DNS-1123 label, '1' DNS-1035 label, 'p' path segment
 * (RBAC names: not "." or "..", no '/' or '%'), anything else: no check. */
int ks_valid_name(char rule, const char *s, ks_vmsg msgs[2]);

/* Validates metadata (name with the given rule, labels, annotations, ownerReferences,
 * finalizers) into v. name_rule: 's' DNS-1123 subdomain, 'l' DNS-1123 label, '1' DNS-1035
 * label, 'p' path segment (RBAC), 0 no check. */
void ks_validate_meta(ks_verr *v, const json_t *obj, char name_rule);
/* Validates the labels object at field `path` (keys qualified names, values label values). */
void ks_validate_labels(ks_verr *v, const json_t *labels, const char *path);
/* Checks the names of a resource list (a Node's capacity, a container's limits) at path, as the
 * API server's validateResourceName does: a prefixed name must be a qualified name ("<path>[name]:
 * Invalid value: ..."); `container` adds the extended-resource check of container resources. */
void ks_validate_resource_names(ks_verr *v, const json_t *resources, const char *path,
                                bool container);
/* Validates a metav1.LabelSelector at `path`. */
void ks_validate_label_selector(ks_verr *v, const json_t *sel, const char *path);

/* ---- the Service address allocators ------------------------------------------------------- */

/* Creates the per-sim allocator state (sim->admit). ks_admit creates it on first use too, but the
 * process should call this before serving so ks_admit_release_service never races with that. */
kc_code ks_admit_init(ks_sim *sim, kc_err *err);
/* Marks the clusterIPs and node ports of the stored Services taken (after a restore). */
kc_code ks_admit_restore_services(ks_sim *sim, kc_err *err);
/* Frees sim->admit (NULL-safe). */
void ks_admit_free(ks_sim *sim);
/* Releases a deleted Service's clusterIP and nodePorts so later Services can get them (call it
 * from whatever sees Services go: the DELETED event). Thread-safe. */
void ks_admit_release_service(ks_sim *sim, const json_t *svc);

/* ---- internals shared by the ks_admit_*.c files ------------------------------------------- */

/* Sets obj[key] = value (STOLEN) when key is absent or null. */
void ks_default_set(json_t *obj, const char *key, json_t *value);
/* Returns obj[key] as an object, creating an empty object there when absent or not an object. */
json_t *ks_obj_child(json_t *obj, const char *key);
/* The string at obj[key], or "" when absent or not a string. */
const char *ks_str(const json_t *obj, const char *key);

/* Pod specs (pods and workload templates): defaulting and validation. `path` is the spec's field
 * path ("spec" or "spec.template.spec"); pod is true for Pod objects (not templates). */
void ks_pod_spec_default(json_t *spec, bool pod);
void ks_pod_spec_validate(ks_verr *v, const json_t *spec, const char *path);
/* Pods: defaults spec/status of a Pod (create: also the service-account token volume and the
 * default tolerations that admission plugins add); validation including update rules. */
void ks_pod_default(json_t *pod, bool create);
void ks_pod_validate(ks_verr *v, const json_t *old, const json_t *pod);

/* Workloads (apps/v1 and batch/v1): per-kind defaulting and validation. */
void ks_apps_default(const char *kind, json_t *obj);
void ks_apps_validate(ks_verr *v, const char *kind, const json_t *old, const json_t *obj);

/* Core kinds other than Pod (Service, Secret, ConfigMap, Namespace ...) and the rest. */
kc_code ks_core_admit(ks_sim *sim, const char *group, const char *kind, const json_t *old,
                      json_t *obj, ks_verr *v, kc_err *err);

/* imagePullPolicy's default for an image: Always for :latest or no tag, else IfNotPresent. */
const char *ks_default_pull_policy(const char *image);

#endif
