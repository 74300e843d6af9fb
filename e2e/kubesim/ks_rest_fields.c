/* ks_rest_fields: server-side field validation (?fieldValidation=Strict|Warn|Ignore) of custom
 * objects: fields their CRD's schema does not declare are an error (Strict, what kubectl sends),
 * a Warning header (Warn, the default) or silently pruned (Ignore), as the API server does. */
#include "ks_admit.h"
#include "ks_crd.h"
#include "ks_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ks_fv ks_fv_parse(ks_req *r)
{
    const char *v = ks_req_arg(r, "fieldValidation");
    if (!v || !*v || strcmp(v, "Warn") == 0)
        return KS_FV_WARN;
    if (strcmp(v, "Strict") == 0)
        return KS_FV_STRICT;
    if (strcmp(v, "Ignore") == 0)
        return KS_FV_IGNORE;
    return KS_FV_BAD;
}

enum MHD_Result ks_fv_reply_bad(ks_req *r, const char *options_kind)
{
    char *q = ks_go_quote(ks_req_arg(r, "fieldValidation"));
    char body[400], msg[600];
    snprintf(body, sizeof(body),
             "Unsupported value: %s: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
             q ? q : "\"\"");
    free(q);
    snprintf(msg, sizeof(msg), "%s.meta.k8s.io \"\" is invalid: fieldValidation: %s", options_kind,
             body);
    json_t *d = json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}]}", "group", "meta.k8s.io", "kind",
                          options_kind, "causes", "reason", "FieldValueNotSupported", "message",
                          body, "field", "fieldValidation");
    return ks_reply_status(r, 422, "Invalid", msg, d);
}

void ks_req_warn(ks_req *r, const char *text)
{
    if (!r->warnings && !(r->warnings = json_array()))
        return;
    json_array_append_new(r->warnings, json_string(text));
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

kc_code ks_fv_check(ks_req *r, ks_fv mode, const ks_rtype *t, const json_t *obj, bool patch,
                    kc_err *err)
{
    if (mode == KS_FV_IGNORE || !t || !t->crd_name || !t->schema || !json_is_object(obj))
        return KC_OK;
    /* The fields pruning would drop are the unknown ones: prune a scratch copy to list them. */
    json_t *copy = json_deep_copy(obj), *pruned = json_array();
    const char **paths = NULL;
    kc_code rc = KC_OK;
    if (!copy || !pruned) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory validating the fields of the object");
        goto out;
    }
    size_t n = ks_crd_prune(t->schema, copy, pruned);
    if (n == 0)
        goto out;
    if (!(paths = calloc(n, sizeof(*paths)))) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory validating the fields of the object");
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < json_array_size(pruned) && k < n; i++)
        if (json_string_value(json_array_get(pruned, i)))
            paths[k++] = json_string_value(json_array_get(pruned, i));
    qsort(paths, k, sizeof(*paths), str_cmp);
    char list[KC_ERR_MSG_MAX], one[600];
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        if (i > 0 && strcmp(paths[i], paths[i - 1]) == 0)
            continue;
        snprintf(one, sizeof(one), "unknown field \"%s\"", paths[i]);
        if (mode == KS_FV_WARN)
            ks_req_warn(r, one);
        else if (used < sizeof(list))
            used +=
                (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", one);
    }
    if (mode != KS_FV_STRICT)
        goto out;
    /* Create and update fail while decoding the body; a patch while decoding its result. */
    if (patch)
        rc = kc_err_set(err, KC_EBADREQUEST, "strict decoding error: %s", list);
    else
        rc = kc_err_set(err, KC_EBADREQUEST,
                        "%s in version \"%s\" cannot be handled as a %s: strict decoding error: %s",
                        t->kind, t->version, t->kind, list);
out:
    free(paths);
    json_decref(pruned);
    json_decref(copy);
    return rc;
}
