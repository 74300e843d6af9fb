/* ks_admit: kubesim's admission hook (defaulting, then validation, per kind) and the field-error
 * machinery that renders 422 messages and causes exactly as the API server words them. */
#include "ks_admit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_crd.h"

/* ---- small JSON helpers ------------------------------------------------------------------- */

void ks_default_set(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return;
    json_t *cur = json_object_get(obj, key);
    if (!cur || json_is_null(cur))
        json_object_set_new(obj, key, value);
    else
        json_decref(value);
}

json_t *ks_obj_child(json_t *obj, const char *key)
{
    json_t *c = json_object_get(obj, key);
    if (json_is_object(c))
        return c;
    c = json_object();
    if (json_object_set_new(obj, key, c) != 0)
        return NULL;
    return c;
}

const char *ks_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* ---- field errors ------------------------------------------------------------------------- */

void ks_verr_add(ks_verr *v, const char *reason, const char *field, const char *body)
{
    if (!v->causes) {
        v->causes = json_array();
        if (!v->causes) {
            v->nomem = true;
            return;
        }
    }
    json_t *c = json_pack("{s:s, s:s, s:s}", "reason", reason, "message", body ? body : "", "field",
                          field ? field : "");
    if (!c || json_array_append_new(v->causes, c) != 0)
        v->nomem = true;
}

static void verr_addf(ks_verr *v, const char *reason, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void verr_addf(ks_verr *v, const char *reason, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *body = NULL;
    int n = vasprintf(&body, fmt, ap);
    va_end(ap);
    if (n < 0) {
        v->nomem = true;
        return;
    }
    ks_verr_add(v, reason, field, body);
    free(body);
}

static const char *with_detail(const char *detail)
{
    return detail && *detail ? ": " : "";
}

void ks_verr_required(ks_verr *v, const char *field, const char *detail)
{
    verr_addf(v, "FieldValueRequired", field, "Required value%s%s", with_detail(detail),
              detail ? detail : "");
}

void ks_verr_forbidden(ks_verr *v, const char *field, const char *detail)
{
    verr_addf(v, "FieldValueForbidden", field, "Forbidden%s%s", with_detail(detail),
              detail ? detail : "");
}

void ks_verr_invalid(ks_verr *v, const char *field, const char *gov, const char *detail)
{
    verr_addf(v, "FieldValueInvalid", field, "Invalid value: %s%s%s", gov ? gov : "null",
              with_detail(detail), detail ? detail : "");
}

void ks_verr_invalid_str(ks_verr *v, const char *field, const char *value, const char *detail)
{
    char *q = ks_go_quote(value ? value : "");
    if (!q) {
        v->nomem = true;
        return;
    }
    ks_verr_invalid(v, field, q, detail);
    free(q);
}

void ks_verr_invalid_int(ks_verr *v, const char *field, long long value, const char *detail)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", value);
    ks_verr_invalid(v, field, buf, detail);
}

void ks_verr_type_invalid(ks_verr *v, const char *field, const char *gov, const char *detail)
{
    verr_addf(v, "FieldValueTypeInvalid", field, "Invalid value: %s%s%s", gov ? gov : "null",
              with_detail(detail), detail ? detail : "");
}

void ks_verr_unsupported(ks_verr *v, const char *field, const char *gov,
                         const char *const *supported)
{
    char *list = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&list, &len);
    if (!f) {
        v->nomem = true;
        return;
    }
    for (size_t i = 0; supported && supported[i]; i++) {
        char *q = ks_go_quote(supported[i]);
        fprintf(f, "%s%s", i ? ", " : "supported values: ", q ? q : "\"\"");
        free(q);
    }
    fclose(f);
    verr_addf(v, "FieldValueNotSupported", field, "Unsupported value: %s%s%s", gov ? gov : "null",
              with_detail(list), list ? list : "");
    free(list);
}

void ks_verr_duplicate(ks_verr *v, const char *field, const char *gov)
{
    verr_addf(v, "FieldValueDuplicate", field, "Duplicate value: %s", gov ? gov : "null");
}

void ks_verr_not_found(ks_verr *v, const char *field, const char *gov)
{
    verr_addf(v, "FieldValueNotFound", field, "Not found: %s", gov ? gov : "null");
}

void ks_verr_too_long(ks_verr *v, const char *field, long long max)
{
    verr_addf(v, "FieldValueTooLong", field, "Too long: may not be more than %lld bytes", max);
}

void ks_verr_too_many(ks_verr *v, const char *field, long long actual, long long max)
{
    verr_addf(v, "FieldValueTooMany", field, "Too many: %lld: must have at most %lld items", actual,
              max);
}

size_t ks_verr_count(const ks_verr *v)
{
    return v->causes ? json_array_size(v->causes) : 0;
}

/* The full message and causes of the last 422 this thread produced, in fixed storage: thread-
 * local heap pointers would leak when API threads exit. tl_msg is the (possibly truncated) kc_err
 * message they belong to. */
#define CAUSES_MAX  16384
#define MESSAGE_MAX 8192
static _Thread_local char tl_msg[KC_ERR_MSG_MAX];
static _Thread_local char tl_full[MESSAGE_MAX];
static _Thread_local char tl_causes[CAUSES_MAX];

static void remember(const char *msg, const char *full, json_t *causes)
{
    tl_msg[0] = '\0';
    tl_causes[0] = '\0';
    snprintf(tl_full, sizeof(tl_full), "%s", full);
    /* Drop causes from the end until the array fits: a partial list beats none. */
    while (json_array_size(causes) > 0) {
        size_t n = json_dumpb(causes, tl_causes, CAUSES_MAX - 1, JSON_COMPACT);
        if (n > 0 && n < CAUSES_MAX - 1) {
            tl_causes[n] = '\0';
            break;
        }
        json_array_remove(causes, json_array_size(causes) - 1);
    }
    snprintf(tl_msg, sizeof(tl_msg), "%s", msg);
}

static bool is_last(const kc_err *err)
{
    return err && err->code == KC_EINVALID && tl_msg[0] && strcmp(err->msg, tl_msg) == 0;
}

json_t *ks_admit_causes(const kc_err *err)
{
    if (!is_last(err) || !tl_causes[0])
        return NULL;
    return json_loads(tl_causes, 0, NULL);
}

const char *ks_admit_message(const kc_err *err)
{
    if (!err)
        return "";
    return is_last(err) ? tl_full : err->msg;
}

kc_code ks_verr_finish(ks_verr *v, const char *group, const char *kind, const char *name,
                       kc_err *err)
{
    kc_code rc = KC_OK;
    char *joined = NULL, *qname = NULL;
    size_t jlen = 0, n = ks_verr_count(v);
    if (v->nomem) {
        rc = kc_err_set(err, KC_ENOMEM, "admission: out of memory");
        goto out;
    }
    if (n == 0)
        goto out;
    FILE *f = open_memstream(&joined, &jlen);
    if (!f) {
        rc = kc_err_set(err, KC_ENOMEM, "admission: out of memory");
        goto out;
    }
    /* Identical messages are reported once, as Go's ErrorList.ToAggregate does. */
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(v->causes, i);
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++) {
            json_t *d = json_array_get(v->causes, j);
            dup = strcmp(ks_str(c, "field"), ks_str(d, "field")) == 0 &&
                  strcmp(ks_str(c, "message"), ks_str(d, "message")) == 0;
        }
        if (dup)
            continue;
        fprintf(f, "%s%s: %s", shown ? ", " : "", ks_str(c, "field"), ks_str(c, "message"));
        shown++;
    }
    fclose(f);
    qname = ks_go_quote(name ? name : "");
    rc = KC_EINVALID;
    if (err) {
        char *full = NULL;
        if (asprintf(&full, "%s%s%s %s is invalid: %s%s%s", kind ? kind : "",
                     group && *group ? "." : "", group ? group : "", qname ? qname : "\"\"",
                     shown > 1 ? "[" : "", joined ? joined : "", shown > 1 ? "]" : "") < 0)
            full = NULL;
        kc_err_set(err, KC_EINVALID, "%s", full ? full : "invalid object");
        snprintf(err->reason, sizeof(err->reason), "Invalid");
        err->http_status = 422;
        remember(err->msg, full ? full : err->msg, v->causes);
        free(full);
    }
out:
    free(joined);
    free(qname);
    json_decref(v->causes);
    v->causes = NULL;
    v->nomem = false;
    return rc;
}

void ks_validate_labels(ks_verr *v, const json_t *labels, const char *path)
{
    const char *k;
    json_t *val;
    ks_vmsg msgs[2];
    json_object_foreach((json_t *)labels, k, val)
    {
        int n = ks_valid_qualified_name(k, msgs);
        for (int i = 0; i < n; i++)
            ks_verr_invalid_str(v, path, k, msgs[i]);
        const char *s = json_string_value(val);
        n = ks_valid_label_value(s ? s : "", msgs);
        for (int i = 0; i < n; i++)
            ks_verr_invalid_str(v, path, s ? s : "", msgs[i]);
    }
}

void ks_validate_resource_names(ks_verr *v, const json_t *resources, const char *path,
                                bool container)
{
    const char *k;
    json_t *val;
    ks_vmsg msgs[2];
    char p[512];
    json_object_foreach((json_t *)resources, k, val)
    {
        /* Names without a prefix are the standard ones (cpu, memory, pods, ...). */
        if (!strchr(k, '/'))
            continue;
        snprintf(p, sizeof(p), "%s[%s]", path, k);
        int n = ks_valid_qualified_name(k, msgs);
        for (int i = 0; i < n; i++)
            ks_verr_invalid_str(v, p, k, msgs[i]);
        /* An extended resource must also make a valid quota name ("requests.<name>"). */
        if (n && container && strncmp(k, "kubernetes.io/", 14) != 0 &&
            strstr(k, ".kubernetes.io/") == NULL)
            ks_verr_invalid_str(v, p, k, "doesn't follow extended resource name standard");
    }
}

void ks_validate_label_selector(ks_verr *v, const json_t *sel, const char *path)
{
    char p[512];
    if (!json_is_object(sel))
        return;
    snprintf(p, sizeof(p), "%s.matchLabels", path);
    ks_validate_labels(v, json_object_get(sel, "matchLabels"), p);
    const json_t *exprs = json_object_get(sel, "matchExpressions");
    for (size_t i = 0; i < json_array_size(exprs); i++) {
        const json_t *e = json_array_get(exprs, i);
        const char *op = ks_str(e, "operator");
        size_t nvals = json_array_size(json_object_get(e, "values"));
        if (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0) {
            if (nvals == 0) {
                snprintf(p, sizeof(p), "%s.matchExpressions[%zu].values", path, i);
                ks_verr_required(v, p, "must be specified when `operator` is 'In' or 'NotIn'");
            }
        } else if (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0) {
            if (nvals > 0) {
                snprintf(p, sizeof(p), "%s.matchExpressions[%zu].values", path, i);
                ks_verr_forbidden(
                    v, p, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
            }
        } else {
            snprintf(p, sizeof(p), "%s.matchExpressions[%zu].operator", path, i);
            ks_verr_invalid_str(v, p, op, "not a valid selector operator");
        }
        ks_vmsg msgs[2];
        snprintf(p, sizeof(p), "%s.matchExpressions[%zu].key", path, i);
        int n = ks_valid_qualified_name(ks_str(e, "key"), msgs);
        for (int j = 0; j < n; j++)
            ks_verr_invalid_str(v, p, ks_str(e, "key"), msgs[j]);
        for (size_t j = 0; j < nvals; j++) {
            const char *s = json_string_value(json_array_get(json_object_get(e, "values"), j));
            n = ks_valid_label_value(s ? s : "", msgs);
            snprintf(p, sizeof(p), "%s.matchExpressions[%zu].values[%zu]", path, i, j);
            for (int m = 0; m < n; m++)
                ks_verr_invalid_str(v, p, s ? s : "", msgs[m]);
        }
    }
}

void ks_validate_meta(ks_verr *v, const json_t *obj, char name_rule)
{
    const json_t *md = json_object_get(obj, "metadata");
    ks_vmsg msgs[2];
    const char *gen = ks_str(md, "generateName");
    if (*gen && name_rule) {
        /* A generated name gets a suffix: a trailing '-' is fine there. */
        char *masked = strdup(gen);
        if (masked) {
            size_t n = strlen(masked);
            if (masked[n - 1] == '-')
                masked[n - 1] = 'a';
            int k = ks_valid_name(name_rule, masked, msgs);
            for (int i = 0; i < k; i++)
                ks_verr_invalid_str(v, "metadata.generateName", gen, msgs[i]);
            free(masked);
        }
    }
    const char *name = ks_str(md, "name");
    if (!*name) {
        ks_verr_required(v, "metadata.name", "name or generateName is required");
    } else {
        int k = ks_valid_name(name_rule, name, msgs);
        for (int i = 0; i < k; i++)
            ks_verr_invalid_str(v, "metadata.name", name, msgs[i]);
    }
    ks_validate_labels(v, json_object_get(md, "labels"), "metadata.labels");

    const json_t *ann = json_object_get(md, "annotations");
    const char *k;
    json_t *val;
    size_t total = 0;
    json_object_foreach((json_t *)ann, k, val)
    {
        char *lower = strdup(k);
        if (lower) {
            for (char *c = lower; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                    *c = (char)(*c - 'A' + 'a');
            int n = ks_valid_qualified_name(lower, msgs);
            for (int i = 0; i < n; i++)
                ks_verr_invalid_str(v, "metadata.annotations", k, msgs[i]);
            free(lower);
        }
        total += strlen(k) + (json_is_string(val) ? json_string_length(val) : 0);
    }
    if (total > 256 * 1024)
        ks_verr_too_long(v, "metadata.annotations", 256 * 1024);

    const json_t *refs = json_object_get(md, "ownerReferences");
    char first_ctl[600] = "";
    for (size_t i = 0; i < json_array_size(refs); i++) {
        const json_t *r = json_array_get(refs, i);
        const char *api = ks_str(r, "apiVersion");
        const char *slash = strrchr(api, '/');
        const char *ver = slash ? slash + 1 : api;
        if (!*ver)
            ks_verr_invalid_str(v, "metadata.ownerReferences.apiVersion", api,
                                "version must not be empty");
        if (!*ks_str(r, "kind"))
            ks_verr_invalid_str(v, "metadata.ownerReferences.kind", "", "kind must not be empty");
        if (!*ks_str(r, "name"))
            ks_verr_invalid_str(v, "metadata.ownerReferences.name", "", "name must not be empty");
        if (!*ks_str(r, "uid"))
            ks_verr_invalid_str(v, "metadata.ownerReferences.uid", "", "uid must not be empty");
        if (json_is_true(json_object_get(r, "controller"))) {
            char cur[600];
            snprintf(cur, sizeof(cur), "%s/%s", ks_str(r, "kind"), ks_str(r, "name"));
            if (first_ctl[0]) {
                char detail[1400];
                snprintf(detail, sizeof(detail),
                         "Only one reference can have Controller set to true. Found \"true\" in "
                         "references for %s and %s",
                         first_ctl, cur);
                ks_verr_invalid(v, "metadata.ownerReferences", "[]v1.OwnerReference{...}", detail);
            } else {
                snprintf(first_ctl, sizeof(first_ctl), "%s", cur);
            }
        }
    }

    const json_t *fins = json_object_get(md, "finalizers");
    bool orphan = false, fg = false;
    for (size_t i = 0; i < json_array_size(fins); i++) {
        const char *f = json_string_value(json_array_get(fins, i));
        if (!f)
            f = "";
        int n = ks_valid_qualified_name(f, msgs);
        for (int j = 0; j < n; j++)
            ks_verr_invalid_str(v, "metadata.finalizers", f, msgs[j]);
        orphan |= strcmp(f, "orphan") == 0;
        fg |= strcmp(f, "foregroundDeletion") == 0;
    }
    if (orphan && fg) {
        char *gov = ks_go_string_slice(fins);
        ks_verr_invalid(v, "metadata.finalizers", gov,
                        "finalizer orphan and foregroundDeletion cannot be both set");
        free(gov);
    }
}

/* ---- the hook ----------------------------------------------------------------------------- */

static const char *obj_name(const json_t *obj)
{
    return ks_str(json_object_get(obj, "metadata"), "name");
}

static char name_rule_for(const char *group, const char *kind)
{
    if (strcmp(group, "rbac.authorization.k8s.io") == 0)
        return 'p';
    if (!*group && strcmp(kind, "Namespace") == 0)
        return 'l';
    if (!*group && strcmp(kind, "Service") == 0)
        return '1';
    return 's';
}

kc_code ks_admit(void *simp, const ks_rtype *t, const json_t *old, json_t *obj, bool status_write,
                 kc_err *err)
{
    ks_sim *sim = simp;
    ks_verr v = {0};
    if (!t || !json_is_object(obj))
        return KC_OK;
    const char *group = t->group ? t->group : "";
    const char *kind = t->kind ? t->kind : "";

    if (t->crd_name) {
        /* Custom resources: prune, default, validate against the version's schema; /status
         * writes against its status part, as the API server does. */
        if (t->schema) {
            ks_crd_prune(t->schema, obj, NULL);
            ks_crd_default(t->schema, obj);
        }
        if (!old)
            ks_validate_meta(&v, obj, 's');
        if (t->schema && status_write)
            ks_crd_schema_check_status(&v, t->schema, obj);
        else if (t->schema)
            ks_crd_schema_check(&v, t->schema, obj);
        return ks_verr_finish(&v, group, kind, obj_name(obj), err);
    }
    /* Node capacity and allocatable: every name a resource name (a device plugin's '+' is not). */
    if (!*group && strcmp(kind, "Node") == 0) {
        const json_t *st = json_object_get(obj, "status");
        ks_validate_resource_names(&v, json_object_get(st, "capacity"), "status.capacity", false);
        ks_validate_resource_names(&v, json_object_get(st, "allocatable"), "status.allocatable",
                                   false);
        if (status_write || ks_verr_count(&v))
            return ks_verr_finish(&v, group, kind, obj_name(obj), err);
    }
    if (status_write)
        return KC_OK;

    /* Defaulting first, as the API server decodes with defaults before validating. */
    bool apps = strcmp(group, "apps") == 0 || strcmp(group, "batch") == 0;
    if (!*group && strcmp(kind, "Pod") == 0)
        ks_pod_default(obj, old == NULL);
    else if (apps)
        ks_apps_default(kind, obj);
    else if (strcmp(group, "apiextensions.k8s.io") == 0 &&
             strcmp(kind, "CustomResourceDefinition") == 0)
        ks_crd_definition_default(obj, old == NULL);

    if (!old) {
        ks_validate_meta(&v, obj, name_rule_for(group, kind));
    } else {
        /* Updates re-check what may change: labels, annotations, owners, finalizers. */
        ks_validate_meta(&v, obj, 0);
    }

    kc_code rc = KC_OK;
    if (!*group && strcmp(kind, "Pod") == 0)
        ks_pod_validate(&v, old, obj);
    else if (apps)
        ks_apps_validate(&v, kind, old, obj);
    else if (strcmp(group, "apiextensions.k8s.io") == 0 &&
             strcmp(kind, "CustomResourceDefinition") == 0)
        ks_crd_definition_validate(&v, old, obj);
    else
        rc = ks_core_admit(sim, group, kind, old, obj, &v, err);
    if (rc != KC_OK) {
        json_decref(v.causes);
        return rc;
    }
    return ks_verr_finish(&v, group, kind, obj_name(obj), err);
}
