/* ks_crd: CustomResourceDefinitions become served types: ks_crd_sync registers each served
 * version with the store and writes the CRD's status (NamesAccepted, Established), and the CRD's
 * own admission (defaults and the API server's validation of the definition). */
#include "ks_crd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_sim.h"
#include "ks_types.h"

#define CRD_GROUP "apiextensions.k8s.io"

static void lower_copy(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] - 'A' + 'a' : src[i]);
    dst[i] = '\0';
}

/* ---- printer columns ---------------------------------------------------------------------- */

json_t *ks_crd_printer_columns(const json_t *version)
{
    json_t *cols = json_pack("[{s:s, s:s, s:s, s:s, s:i, s:s}]", "name", "Name", "type", "string",
                             "format", "name", "description", KS_NAME_COLUMN_DESC, "priority", 0,
                             "jsonPath", ".metadata.name");
    if (!cols)
        return NULL;
    const json_t *apc = json_object_get(version, "additionalPrinterColumns");
    for (size_t i = 0; i < json_array_size(apc); i++) {
        const json_t *c = json_array_get(apc, i);
        json_t *prio = json_object_get(c, "priority");
        json_t *col = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "name", ks_str(c, "name"), "type",
                                ks_str(c, "type"), "format", ks_str(c, "format"), "description",
                                ks_str(c, "description"), "priority",
                                json_is_integer(prio) ? json_integer_value(prio) : 0, "jsonPath",
                                ks_str(c, "jsonPath"));
        if (!col || json_array_append_new(cols, col) != 0) {
            json_decref(cols);
            return NULL;
        }
    }
    if (json_array_size(apc) == 0) {
        json_t *age = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s}", "name", "Age", "type", "date",
                                "format", "", "description", KS_AGE_COLUMN_DESC, "priority", 0,
                                "jsonPath", ".metadata.creationTimestamp");
        if (!age || json_array_append_new(cols, age) != 0) {
            json_decref(cols);
            return NULL;
        }
    }
    return cols;
}

/* ---- sync --------------------------------------------------------------------------------- */

/* A NULL-terminated array of the strings of a JSON array (borrowed), or NULL when empty. */
static const char **string_list(const json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n == 0)
        return NULL;
    const char **out = calloc(n + 1, sizeof(*out));
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s)
            out[k++] = s;
    }
    return out;
}

/* Unregisters this CRD's types, except versions still served when keep (spec.versions) is given. */
static void unregister_stale(ks_store *st, const char *crd_name, const json_t *keep, bool conflict)
{
    const ks_rtype **types = NULL;
    size_t n = ks_store_types(st, &types);
    for (size_t i = 0; i < n; i++) {
        const ks_rtype *t = types[i];
        if (!t->crd_name || strcmp(t->crd_name, crd_name) != 0)
            continue;
        bool served = false;
        for (size_t j = 0; !conflict && j < json_array_size(keep); j++) {
            const json_t *v = json_array_get(keep, j);
            served |= json_is_true(json_object_get(v, "served")) &&
                      strcmp(ks_str(v, "name"), t->version) == 0;
        }
        if (!served)
            ks_store_unregister(st, t);
    }
    free(types);
}

typedef struct crd_status {
    bool conflict;
    const char *plural;
    json_t *accepted; /* acceptedNames */
    const char *storage;
    char now[32];
} crd_status;

/* Sets condition `type` in conds, keeping lastTransitionTime when the status does not change. */
static void set_condition(json_t *conds, const char *type, const char *status, const char *reason,
                          const char *message, const char *now)
{
    json_t *c = NULL;
    for (size_t i = 0; i < json_array_size(conds) && !c; i++)
        if (strcmp(ks_str(json_array_get(conds, i), "type"), type) == 0)
            c = json_array_get(conds, i);
    if (!c) {
        c = json_object();
        if (!c || json_array_append_new(conds, c) != 0)
            return;
        json_object_set_new(c, "type", json_string(type));
    }
    if (strcmp(ks_str(c, "status"), status) != 0 || !json_object_get(c, "lastTransitionTime"))
        json_object_set_new(c, "lastTransitionTime", json_string(now));
    json_object_set_new(c, "status", json_string(status));
    json_object_set_new(c, "reason", json_string(reason));
    json_object_set_new(c, "message", json_string(message));
}

static kc_code write_status(void *ud, json_t *crd, kc_err *err)
{
    crd_status *cs = ud;
    json_t *status = ks_obj_child(crd, "status");
    json_t *conds = status ? json_object_get(status, "conditions") : NULL;
    if (status && !json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    if (!status || !conds)
        return kc_err_set(err, KC_ENOMEM, "CRD status: out of memory");
    if (cs->conflict) {
        char msg[300];
        snprintf(msg, sizeof(msg), "\"%s\" is already in use", cs->plural);
        set_condition(conds, "NamesAccepted", "False", "PluralConflict", msg, cs->now);
        set_condition(conds, "Established", "False", "NotAccepted", "not all names are accepted",
                      cs->now);
        ks_default_set(status, "acceptedNames", json_pack("{s:s, s:s}", "plural", "", "kind", ""));
    } else {
        set_condition(conds, "NamesAccepted", "True", "NoConflicts", "no conflicts found", cs->now);
        set_condition(conds, "Established", "True", "InitialNamesAccepted",
                      "the initial names have been accepted", cs->now);
        json_object_set(status, "acceptedNames", cs->accepted);
    }
    json_t *stored = json_object_get(status, "storedVersions");
    if (!json_is_array(stored)) {
        stored = json_array();
        json_object_set_new(status, "storedVersions", stored);
    }
    bool have = false;
    for (size_t i = 0; i < json_array_size(stored); i++) {
        const char *sv = json_string_value(json_array_get(stored, i));
        have |= sv && strcmp(sv, cs->storage) == 0;
    }
    if (!have && *cs->storage && !cs->conflict)
        json_array_append_new(stored, json_string(cs->storage));
    return KC_OK;
}

static json_t *accepted_names(const json_t *names, const char *singular, const char *list_kind)
{
    json_t *a = json_pack("{s:s, s:s, s:s, s:s}", "plural", ks_str(names, "plural"), "singular",
                          singular, "kind", ks_str(names, "kind"), "listKind", list_kind);
    if (!a)
        return NULL;
    if (json_array_size(json_object_get(names, "shortNames")))
        json_object_set(a, "shortNames", json_object_get(names, "shortNames"));
    if (json_array_size(json_object_get(names, "categories")))
        json_object_set(a, "categories", json_object_get(names, "categories"));
    return a;
}

kc_code ks_crd_sync(ks_sim *sim, const json_t *crd, bool deleted, kc_err *err)
{
    if (!sim || !sim->store || !json_is_object(crd))
        return kc_err_set(err, KC_EARG, "ks_crd_sync: a sim and a CRD object are required");
    ks_store *st = sim->store;
    const char *name = ks_str(json_object_get(crd, "metadata"), "name");
    if (!*name)
        return kc_err_set(err, KC_EARG, "ks_crd_sync: the CRD has no metadata.name");
    if (deleted) {
        unregister_stale(st, name, NULL, true);
        return KC_OK;
    }
    const json_t *spec = json_object_get(crd, "spec");
    const json_t *names = json_object_get(spec, "names");
    const json_t *versions = json_object_get(spec, "versions");
    const char *group = ks_str(spec, "group");
    const char *plural = ks_str(names, "plural");
    const char *kind = ks_str(names, "kind");
    if (!*group || !*plural || !*kind)
        return kc_err_set(err, KC_EINVALID,
                          "CRD %s: spec.group, spec.names.plural and spec.names.kind are required",
                          name);
    char singular[256], list_kind[300];
    lower_copy(singular, sizeof(singular), kind);
    if (*ks_str(names, "singular"))
        snprintf(singular, sizeof(singular), "%s", ks_str(names, "singular"));
    snprintf(list_kind, sizeof(list_kind), "%sList", kind);
    if (*ks_str(names, "listKind"))
        snprintf(list_kind, sizeof(list_kind), "%s", ks_str(names, "listKind"));

    crd_status cs = {.plural = plural, .storage = ""};
    ks_now_rfc3339(cs.now);
    /* A plural another CRD (or a built-in type) already serves in this group is a conflict. */
    for (size_t i = 0; i < json_array_size(versions); i++) {
        const json_t *v = json_array_get(versions, i);
        const ks_rtype *t = ks_store_type(st, group, ks_str(v, "name"), plural);
        if (t && strcmp(t->resource, plural) == 0 && (!t->crd_name || strcmp(t->crd_name, name)))
            cs.conflict = true;
        if (json_is_true(json_object_get(v, "storage")))
            cs.storage = ks_str(v, "name");
    }

    kc_code rc = KC_OK;
    const char **shorts = string_list(json_object_get(names, "shortNames"));
    const char **cats = string_list(json_object_get(names, "categories"));
    for (size_t i = 0; !cs.conflict && i < json_array_size(versions); i++) {
        const json_t *v = json_array_get(versions, i);
        if (!json_is_true(json_object_get(v, "served")))
            continue;
        const json_t *sub = json_object_get(v, "subresources");
        json_t *cols = ks_crd_printer_columns(v);
        ks_rtype t = {
            .group = group,
            .version = ks_str(v, "name"),
            .resource = plural,
            .kind = kind,
            .singular = singular,
            .namespaced = strcmp(ks_str(spec, "scope"), "Namespaced") == 0,
            .has_status = json_is_object(json_object_get(sub, "status")),
            .has_scale = json_is_object(json_object_get(sub, "scale")),
            .short_names = shorts,
            .categories = cats,
            .printer_columns = cols,
            .schema = json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"),
            .crd_name = name,
        };
        const ks_rtype *r = cols ? ks_store_register(st, &t) : NULL;
        json_decref(cols);
        if (!r) {
            rc = kc_err_set(err, KC_ENOMEM, "CRD %s: registering version %s failed", name,
                            t.version);
            break;
        }
    }
    free(shorts);
    free(cats);
    if (rc != KC_OK)
        return rc;
    unregister_stale(st, name, versions, cs.conflict);

    const ks_rtype *crd_t = ks_store_type(st, CRD_GROUP, "v1", "customresourcedefinitions");
    if (!crd_t)
        return kc_err_set(err, KC_ESERVER, "CRD %s: customresourcedefinitions is not served", name);
    cs.accepted = accepted_names(names, singular, list_kind);
    if (!cs.accepted)
        return kc_err_set(err, KC_ENOMEM, "CRD %s: out of memory", name);
    kc_err e2 = {0};
    rc = ks_mutate(st, crd_t, NULL, name, KS_WRITE_STATUS, write_status, &cs, NULL, &e2);
    json_decref(cs.accepted);
    if (rc == KC_ENOTFOUND)
        return KC_OK; /* deleted meanwhile: its DELETED event unregisters it */
    if (rc != KC_OK && err)
        *err = e2;
    return rc;
}

/* ---- admission of the CRD object itself --------------------------------------------------- */

/* The status the API server stores with a new CRD, before its controllers accept the names:
 * acceptedNames empty, conditions null, storedVersions [the storage version]. */
static void initial_status(json_t *crd)
{
    const json_t *versions = json_object_get(json_object_get(crd, "spec"), "versions");
    json_t *stored = json_array();
    for (size_t i = 0; stored && i < json_array_size(versions); i++) {
        const json_t *ver = json_array_get(versions, i);
        if (json_is_true(json_object_get(ver, "storage")) && *ks_str(ver, "name"))
            json_array_append_new(stored, json_string(ks_str(ver, "name")));
    }
    json_object_set_new(crd, "status",
                        json_pack("{s:{s:s, s:s}, s:n, s:o*}", "acceptedNames", "kind", "",
                                  "plural", "", "conditions", "storedVersions", stored));
}

void ks_crd_definition_default(json_t *crd, bool create)
{
    if (create)
        initial_status(crd);
    json_t *spec = ks_obj_child(crd, "spec");
    json_t *names = spec ? ks_obj_child(spec, "names") : NULL;
    if (!names)
        return;
    const char *kind = ks_str(names, "kind");
    if (*kind) {
        char buf[300];
        lower_copy(buf, sizeof(buf), kind);
        if (!*ks_str(names, "singular"))
            json_object_set_new(names, "singular", json_string(buf));
        snprintf(buf, sizeof(buf), "%sList", kind);
        if (!*ks_str(names, "listKind"))
            json_object_set_new(names, "listKind", json_string(buf));
    }
    json_t *conv = ks_obj_child(spec, "conversion");
    if (conv)
        ks_default_set(conv, "strategy", json_string("None"));
}

static const char *const SCHEMA_TYPES[] = {"array",  "boolean", "integer", "number",
                                           "object", "string",  NULL};

/* The structural-schema rules kubesim checks: every specified field has a known type (unless
 * int-or-string or preserve-unknown-fields), the root is an object. */
static void structural_check(ks_verr *v, const json_t *s, const char *path, int depth,
                             const char *missing_detail)
{
    char p[1024];
    if (!json_is_object(s) || depth > 64)
        return;
    const json_t *type = json_object_get(s, "type");
    const char *ts = json_string_value(type);
    bool intstr = json_is_true(json_object_get(s, "x-kubernetes-int-or-string"));
    bool preserve = json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields"));
    snprintf(p, sizeof(p), "%s.type", path);
    if (!ts || !*ts) {
        if (!intstr && !preserve && missing_detail)
            ks_verr_required(v, p, missing_detail);
    } else {
        bool known = false;
        for (size_t i = 0; SCHEMA_TYPES[i]; i++)
            known |= strcmp(ts, SCHEMA_TYPES[i]) == 0;
        if (!known) {
            char *q = ks_go_quote(ts);
            ks_verr_unsupported(v, p, q, SCHEMA_TYPES);
            free(q);
        }
    }
    const char *k;
    json_t *sub;
    json_object_foreach((json_t *)json_object_get(s, "properties"), k, sub)
    {
        snprintf(p, sizeof(p), "%s.properties[%s]", path, k);
        structural_check(v, sub, p, depth + 1, "must not be empty for specified object fields");
    }
    const json_t *items = json_object_get(s, "items");
    snprintf(p, sizeof(p), "%s.items", path);
    structural_check(v, items, p, depth + 1, "must not be empty for specified array items");
    const json_t *ap = json_object_get(s, "additionalProperties");
    snprintf(p, sizeof(p), "%s.additionalProperties", path);
    structural_check(v, ap, p, depth + 1, "must not be empty for specified object fields");
}

static void names_check(ks_verr *v, const json_t *names)
{
    ks_vmsg msgs[2];
    char p[256], joined[900];
    static const char *const plain[] = {"plural", "singular"};
    for (size_t i = 0; i < 2; i++) {
        const char *s = ks_str(names, plain[i]);
        snprintf(p, sizeof(p), "spec.names.%s", plain[i]);
        if (!*s) {
            ks_verr_required(v, p, "");
            continue;
        }
        int n = ks_valid_dns1035_label(s, msgs);
        if (n) {
            snprintf(joined, sizeof(joined), "%s%s%s", msgs[0], n > 1 ? "," : "",
                     n > 1 ? msgs[1] : "");
            ks_verr_invalid_str(v, p, s, joined);
        }
    }
    static const char *const kinds[] = {"kind", "listKind"};
    for (size_t i = 0; i < 2; i++) {
        const char *s = ks_str(names, kinds[i]);
        snprintf(p, sizeof(p), "spec.names.%s", kinds[i]);
        if (!*s) {
            ks_verr_required(v, p, "");
            continue;
        }
        char lower[300];
        lower_copy(lower, sizeof(lower), s);
        int n = ks_valid_dns1035_label(lower, msgs);
        if (n) {
            snprintf(joined, sizeof(joined),
                     "may have mixed case, but should otherwise match: %s%s%s", msgs[0],
                     n > 1 ? "," : "", n > 1 ? msgs[1] : "");
            ks_verr_invalid_str(v, p, s, joined);
        }
    }
    if (*ks_str(names, "kind") && strcmp(ks_str(names, "kind"), ks_str(names, "listKind")) == 0)
        ks_verr_invalid_str(v, "spec.names.listKind", ks_str(names, "listKind"),
                            "kind and listKind may not be the same");
    static const char *const lists[] = {"shortNames", "categories"};
    for (size_t l = 0; l < 2; l++) {
        const json_t *arr = json_object_get(names, lists[l]);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            const char *s = json_string_value(json_array_get(arr, i));
            int n = ks_valid_dns1035_label(s ? s : "", msgs);
            if (n) {
                snprintf(p, sizeof(p), "spec.names.%s[%zu]", lists[l], i);
                snprintf(joined, sizeof(joined), "%s%s%s", msgs[0], n > 1 ? "," : "",
                         n > 1 ? msgs[1] : "");
                ks_verr_invalid_str(v, p, s ? s : "", joined);
            }
        }
    }
}

/* Go's %#v of spec.versions, shortened: what the API server prints is its internal struct. */
static char *go_versions(const json_t *versions)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    if (json_array_size(versions) == 0) {
        fputs("[]apiextensions.CustomResourceDefinitionVersion(nil)", f);
    } else {
        fputs("[]apiextensions.CustomResourceDefinitionVersion{", f);
        for (size_t i = 0; i < json_array_size(versions); i++) {
            const json_t *v = json_array_get(versions, i);
            char *q = ks_go_quote(ks_str(v, "name"));
            fprintf(f,
                    "%sapiextensions.CustomResourceDefinitionVersion{Name:%s, Served:%s, "
                    "Storage:%s, ...}",
                    i ? ", " : "", q ? q : "\"\"",
                    json_is_true(json_object_get(v, "served")) ? "true" : "false",
                    json_is_true(json_object_get(v, "storage")) ? "true" : "false");
            free(q);
        }
        fputc('}', f);
    }
    fclose(f);
    return out;
}

void ks_crd_definition_validate(ks_verr *v, const json_t *old, const json_t *crd)
{
    const json_t *spec = json_object_get(crd, "spec");
    const json_t *names = json_object_get(spec, "names");
    const char *group = ks_str(spec, "group");
    const char *name = ks_str(json_object_get(crd, "metadata"), "name");
    char want[600];
    snprintf(want, sizeof(want), "%s.%s", ks_str(names, "plural"), group);
    if (strcmp(name, want) != 0)
        ks_verr_invalid_str(v, "metadata.name", name, "must be spec.names.plural+\".\"+spec.group");

    ks_vmsg msgs[2];
    char p[256];
    if (!*group) {
        ks_verr_required(v, "spec.group", "");
    } else {
        int n = ks_valid_dns1123_subdomain(group, msgs);
        if (n) {
            char joined[900];
            snprintf(joined, sizeof(joined), "%s%s%s", msgs[0], n > 1 ? "," : "",
                     n > 1 ? msgs[1] : "");
            ks_verr_invalid_str(v, "spec.group", group, joined);
        } else if (!strchr(group, '.')) {
            ks_verr_invalid_str(v, "spec.group", group, "should be a domain with at least one dot");
        }
    }
    static const char *const scopes[] = {"Cluster", "Namespaced", NULL};
    const char *scope = ks_str(spec, "scope");
    if (!*scope) {
        ks_verr_required(v, "spec.scope", "");
    } else if (strcmp(scope, "Cluster") != 0 && strcmp(scope, "Namespaced") != 0) {
        char *q = ks_go_quote(scope);
        ks_verr_unsupported(v, "spec.scope", q, scopes);
        free(q);
    }

    const json_t *versions = json_object_get(spec, "versions");
    size_t storage = 0;
    bool unique = true;
    for (size_t i = 0; i < json_array_size(versions); i++) {
        const json_t *ver = json_array_get(versions, i);
        const char *vn = ks_str(ver, "name");
        storage += json_is_true(json_object_get(ver, "storage"));
        for (size_t j = 0; j < i; j++)
            unique &= strcmp(vn, ks_str(json_array_get(versions, j), "name")) != 0;
        int n = ks_valid_dns1035_label(vn, msgs);
        if (n) {
            char joined[900];
            snprintf(p, sizeof(p), "spec.versions[%zu].name", i);
            snprintf(joined, sizeof(joined), "%s%s%s", msgs[0], n > 1 ? "," : "",
                     n > 1 ? msgs[1] : "");
            ks_verr_invalid_str(v, p, vn, joined);
        }
        const json_t *schema = json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema");
        snprintf(p, sizeof(p), "spec.versions[%zu].schema.openAPIV3Schema", i);
        if (!json_is_object(schema)) {
            ks_verr_required(v, p, "schemas are required");
            continue;
        }
        const char *rt = ks_str(schema, "type");
        char tp[300];
        snprintf(tp, sizeof(tp), "%s.type", p);
        if (!*rt) {
            ks_verr_required(v, tp, "must not be empty at the root");
        } else if (strcmp(rt, "object") != 0) {
            ks_verr_invalid_str(v, tp, rt, "must be object at the root");
        }
        json_t *root_copy = json_deep_copy(schema);
        if (root_copy) {
            json_object_del(root_copy, "type"); /* reported above */
            structural_check(v, root_copy, p, 0, NULL);
            json_decref(root_copy);
        }
    }
    if (!unique || storage != 1) {
        char *gov = go_versions(versions);
        if (!unique)
            ks_verr_invalid(v, "spec.versions", gov, "must contain unique version names");
        if (storage != 1)
            ks_verr_invalid(v, "spec.versions", gov,
                            "must have exactly one version marked as storage version");
        free(gov);
    }
    names_check(v, names);

    if (old) {
        const json_t *ospec = json_object_get(old, "spec");
        if (strcmp(ks_str(ospec, "group"), group) != 0)
            ks_verr_invalid_str(v, "spec.group", group, "field is immutable");
        if (*ks_str(ospec, "scope") && strcmp(ks_str(ospec, "scope"), scope) != 0)
            ks_verr_invalid_str(v, "spec.scope", scope, "field is immutable");
    }
}
