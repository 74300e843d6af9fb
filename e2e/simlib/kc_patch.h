/* kc_patch: JSON merge patch (RFC 7386), JSON patch (RFC 6902) with JSON Pointer (RFC 6901), and
 * the Kubernetes strategic merge patch, all applied locally to jansson values. */
#ifndef KC_PATCH_H
#define KC_PATCH_H

#include <jansson.h>

#include "kc_error.h"

/* Deep equality like json_equal, except that numbers compare by value (1 equals 1.0), as RFC 6902
 * asks for "test". NULL equals only NULL. */
int kc_json_equal(const json_t *a, const json_t *b);

/* ---- RFC 7386 JSON merge patch ---- */

/* Applies `patch` to `target` and returns the result as a new reference; neither argument is
 * modified or kept. A non-object patch replaces the target; a null member deletes the key; a
 * NULL target is treated as absent. Returns NULL only when memory runs out. */
json_t *kc_merge_patch_apply(const json_t *target, const json_t *patch);

/* Computes the smallest merge patch turning `original` into `modified` (new reference, {} when
 * they are equal): keys missing from `modified` become null, changed objects are diffed
 * recursively, everything else (arrays included) is replaced whole. Round trip:
 * kc_merge_patch_apply(original, patch) equals `modified` whenever `modified` holds no nulls inside
 * objects (merge patch cannot express "set to null"). Returns NULL only when memory runs out. */
json_t *kc_merge_patch_create(const json_t *original, const json_t *modified);

/* ---- RFC 6901 JSON Pointer ---- */

/* Pointer errors are KC_EPARSE for a malformed pointer (not "" and not starting with "/", a "~" not
 * followed by 0 or 1) and KC_EINVALID for a pointer that does not fit the document (missing
 * member, array index that is not digits, has a leading zero or is out of range, descending into
 * a scalar).
 * Messages start with `pointer "<p>": `. Keys holding a NUL byte cannot be addressed. */

/* Finds the value `pointer` refers to ("" is the whole document). On success *out is a BORROWED
 * reference into doc, valid while doc is unchanged. */
kc_code kc_json_pointer_resolve(const json_t *doc, const char *pointer, json_t **out, kc_err *err);

/* Sets `value` at `pointer` with JSON patch "add" rules: an object member is created or replaced,
 * an array index inserts before that element (the size of the array or "-" appends), and "" swaps
 * the whole document (*doc is then released and replaced). The parent must exist. `value` is
 * STOLEN, also on error. */
kc_code kc_json_pointer_set(json_t **doc, const char *pointer, json_t *value, kc_err *err);

/* As kc_json_pointer_set with "replace" rules: the target must already exist ("-" is refused). */
kc_code kc_json_pointer_replace(json_t **doc, const char *pointer, json_t *value, kc_err *err);

/* Removes the value at `pointer` (which must exist and must not be ""). When `removed` is not NULL
 * it receives the removed value as a new reference. */
kc_code kc_json_pointer_remove(json_t *doc, const char *pointer, json_t **removed, kc_err *err);

/* Returns a malloc'd pointer `base` + "/" + `token`, with ~ and / in token escaped as ~0 and ~1
 * (base may be "" or NULL for the root). The caller frees it; NULL when memory runs out. */
char *kc_json_pointer_append(const char *base, const char *token);

/* ---- RFC 6902 JSON patch ---- */

/* Applies the operation array `ops` (add, remove, replace, move, copy, test) to `doc` atomically:
 * `doc` is never modified, and only on success *out receives the patched document as a new
 * reference. Operations are numbered from 0 like the array, and every message starts with
 * `operation N (op) path "/p": `. A failed "test" (different value, or nothing at the path) gives
 * KC_EPATCHTEST; a malformed operation
 * (not an object, unknown op, missing or non-string path/from, missing value, bad pointer) gives
 * KC_EPARSE; an operation that does not fit the document (missing target, index out of range,
 * moving a value into its own child) gives KC_EINVALID. Numbers compare by value in "test"
 * (1 equals 1.0). */
kc_code kc_json_patch_apply(const json_t *doc, const json_t *ops, json_t **out, kc_err *err);

/* ---- Kubernetes strategic merge patch ---- */

/* How a list field is merged by a strategic merge patch. */
typedef enum kc_smp_list {
    KC_SMP_LIST_REPLACE = 0,     /* no patch strategy: the patch's list replaces the old one */
    KC_SMP_LIST_MERGE_KEY,       /* list of objects matched by a merge key (containers by name) */
    KC_SMP_LIST_MERGE_PRIMITIVE, /* list of scalars merged as a set, order kept (finalizers) */
} kc_smp_list;

/* Whether `kind` is a built-in kind whose patch strategies are known ("Pod", "DaemonSet",
 * "Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Node", "Service", "ConfigMap",
 * "Secret", ...). Custom resources and NULL are not. */
int kc_smp_kind_known(const char *kind);

/* Returns the strategy of the list at `path` in an object of `kind`. `path` is the dotted field
 * path from the object root, list positions left out ("spec.template.spec.containers.env").
 * For KC_SMP_LIST_MERGE_KEY, *merge_key (may be NULL) receives the static key name. */
kc_smp_list kc_smp_list_strategy(const char *kind, const char *path, const char **merge_key);

/* Applies strategic merge patch `patch` (must be a JSON object) to `original` (an object; NULL is
 * treated as {}) of the given kind. `original` and `patch` are not modified; on success *out is a
 * new reference. For a kind that kc_smp_kind_known() rejects (custom resources, NULL) this is a
 * JSON merge patch, as the API server does for custom resources. Supported: null deletes a key;
 * merged lists per kc_smp_list_strategy (elements matched by key, new ones appended in patch
 * order); directives `$patch: replace|merge|delete` (in a map, or as a list element: delete by
 * merge key, replace the whole list), `$retainKeys`, `$setElementOrder/<list>`,
 * `$deleteFromPrimitiveList/<list>`. Errors: a non-object patch, an unknown `$` directive or
 * `$patch` value, a list element without its merge key: KC_EINVALID, with the field path. */
kc_code kc_smp_apply(const json_t *original, const json_t *patch, const char *kind, json_t **out,
                     kc_err *err);

#endif
