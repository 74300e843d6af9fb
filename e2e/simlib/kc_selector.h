/* kc_selector: Kubernetes label and field selectors: parsing, matching and canonical strings. */
#ifndef KC_SELECTOR_H
#define KC_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

/* ---- label selectors ---------------------------------------------------------------------- */

typedef enum kc_label_op {
    KC_LABEL_EQ,        /* k=v, k==v, matchLabels */
    KC_LABEL_NEQ,       /* k!=v (matches when k is absent) */
    KC_LABEL_IN,        /* k in (a,b) */
    KC_LABEL_NOTIN,     /* k notin (a,b) (matches when k is absent) */
    KC_LABEL_EXISTS,    /* k */
    KC_LABEL_NOTEXISTS, /* !k */
} kc_label_op;

/* One requirement of a selector; all requirements of a selector must hold (AND). Owned by the
 * selector and read-only for callers. values are sorted and distinct; EQ/NEQ have exactly one,
 * IN/NOTIN at least one, EXISTS/NOTEXISTS none. */
typedef struct kc_label_requirement {
    char *key;
    kc_label_op op;
    char **values;
    size_t nvalues;
} kc_label_requirement;

typedef struct kc_label_selector kc_label_selector;

/* Parses the string form: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined
 * by ',' (AND), with optional whitespace around tokens. The empty string selects everything.
 * Keys are qualified names ([DNS-subdomain prefix/]name), values label values (may be empty).
 * On error returns KC_EPARSE with a message naming the selector and the 1-based position.
 * On success *out is a new selector the caller frees with kc_label_selector_free. */
kc_code kc_label_selector_parse(const char *s, kc_label_selector **out, kc_err *err);

/* Builds a selector from the JSON LabelSelector form
 * {"matchLabels": {k: v}, "matchExpressions": [{"key", "operator", "values"}]}, operator being
 * In, NotIn, Exists or DoesNotExist. NULL, JSON null and {} select everything. sel stays owned
 * by the caller; *out as for kc_label_selector_parse. Errors are KC_EPARSE naming the field. */
kc_code kc_label_selector_from_json(const json_t *sel, kc_label_selector **out, kc_err *err);

/* True when every requirement holds for labels (a JSON object of string values, or NULL for no
 * labels). A label whose value is not a string counts as present but equal to no value. */
bool kc_label_selector_matches(const kc_label_selector *sel, const json_t *labels);

/* As kc_label_selector_matches, on obj["metadata"]["labels"]. */
bool kc_label_selector_matches_object(const kc_label_selector *sel, const json_t *obj);

/* True when the selector has no requirements (selects everything). */
bool kc_label_selector_empty(const kc_label_selector *sel);

/* The requirements, sorted by key (then operator), for callers that inspect a selector. */
size_t kc_label_selector_count(const kc_label_selector *sel);
const kc_label_requirement *kc_label_selector_at(const kc_label_selector *sel, size_t i);

/* The canonical string form (requirements sorted by key, `=` for equality, sets sorted), which
 * kc_label_selector_parse reads back to an equal selector. "" for an empty selector. The caller
 * frees the result; NULL on allocation failure. */
char *kc_label_selector_string(const kc_label_selector *sel);

/* Accepts NULL. */
void kc_label_selector_free(kc_label_selector *sel);

/* Validates a label key / value as the API server does; on failure returns false and, when why
 * is non-NULL, writes the reason (e.g. "name part must be no more than 63 characters"). */
bool kc_label_key_valid(const char *key, char *why, size_t why_size);
bool kc_label_value_valid(const char *value, char *why, size_t why_size);

/* ---- field selectors ---------------------------------------------------------------------- */

typedef enum kc_field_op {
    KC_FIELD_EQ,  /* f=v, f==v */
    KC_FIELD_NEQ, /* f!=v */
} kc_field_op;

typedef struct kc_field_selector kc_field_selector;

/* Parses `f=v`, `f==v`, `f!=v` joined by ',' (AND). In values, `\,` `\=` and `\\` stand for the
 * literal characters and an unescaped ',' or '=' is an error; empty terms are skipped and the empty
 * string selects everything. Whitespace around a field name is ignored, values are taken as is.
 * On error returns KC_EPARSE naming the selector and the 1-based position. On success *out is a
 * new selector the caller frees with kc_field_selector_free. */
kc_code kc_field_selector_parse(const char *s, kc_field_selector **out, kc_err *err);

/* True when every term holds for obj. A field is a dotted path into obj ("metadata.name",
 * "spec.nodeName", "involvedObject.uid"); a missing field or null compares as "", numbers and
 * booleans by their JSON text, and an object or array equals no value. */
bool kc_field_selector_matches(const kc_field_selector *sel, const json_t *obj);

bool kc_field_selector_empty(const kc_field_selector *sel);

/* The terms, sorted by field; the pointers stay owned by the selector. Returns false when i is out
 * of range. Any of field/op/value may be NULL. */
size_t kc_field_selector_count(const kc_field_selector *sel);
bool kc_field_selector_term(const kc_field_selector *sel, size_t i, const char **field,
                            kc_field_op *op, const char **value);

/* The first field of sel not listed in supported (a NULL-terminated array), or NULL when all are
 * supported. The result is owned by the selector. */
const char *kc_field_selector_unsupported(const kc_field_selector *sel,
                                          const char *const *supported);

/* As kc_field_selector_unsupported, as an error for an API server to return: KC_EBADREQUEST with
 * "field label not supported: X"; KC_OK when every field is supported. */
kc_code kc_field_selector_require(const kc_field_selector *sel, const char *const *supported,
                                  kc_err *err);

/* Looks up the value an `=` term requires for field (e.g. to narrow a list by metadata.name), or
 * NULL when there is none. Owned by the selector. */
const char *kc_field_selector_equals_value(const kc_field_selector *sel, const char *field);

/* Canonical string (terms sorted by field, `=` for equality, values escaped); the caller frees it;
 * NULL on allocation failure. */
char *kc_field_selector_string(const kc_field_selector *sel);

/* Accepts NULL. */
void kc_field_selector_free(kc_field_selector *sel);

#endif
