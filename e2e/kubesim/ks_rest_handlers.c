/* ks_rest_handlers: the API server's verbs on resources: get, list, create, update, delete,
 * deletecollection, and the pod subresources log, eviction and binding (patches and /scale are in
 * ks_rest_patch.c, watches in ks_watch_http.c). */
#include "ks_auth.h"
#include "ks_server_int.h"

#include "kc_yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char TABLE_CT[] = "application/json;as=Table;v=%s;g=meta.k8s.io";

/* ---------------------------------------------------------------------------------------------
 * shared helpers (declared in ks_server_int.h)
 */

const char *ks_content_type(ks_req *r, char *buf, size_t size)
{
    const char *ct = ks_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct)
        return NULL;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)(ct[i] >= 'A' && ct[i] <= 'Z' ? ct[i] + 32 : ct[i]);
    buf[n] = '\0';
    return buf;
}

bool ks_dry_run(ks_req *r)
{
    const char *d = ks_req_arg(r, "dryRun");
    return d && strcmp(d, "All") == 0;
}

kc_code ks_decode_body(ks_req *r, json_t **out, kc_err *err)
{
    *out = NULL;
    char ctb[128];
    const char *ct = ks_content_type(r, ctb, sizeof(ctb));
    json_t *obj = NULL;
    kc_code rc = KC_OK;
    if (!ct || !strcmp(ct, "application/json") || !strcmp(ct, "*/*") || !ct[0]) {
        json_error_t je;
        obj = json_loadb(r->body ? r->body : "", r->body_len, 0, &je);
        if (!obj)
            return kc_err_set(
                err, KC_EBADREQUEST,
                "couldn't get version/kind; json parse error: %s (line %d, column %d)", je.text,
                je.line, je.column);
    } else if (!strcmp(ct, "application/yaml") || !strcmp(ct, "application/x-yaml") ||
               !strcmp(ct, "text/yaml")) {
        if ((rc = kc_yaml_parse_one(r->body ? r->body : "", r->body_len, "request body", &obj,
                                    err)) != KC_OK) {
            if (err)
                err->code = KC_EBADREQUEST;
            return KC_EBADREQUEST;
        }
    } else if (!strcmp(ct, "application/vnd.kubernetes.protobuf") && r->route.t &&
               r->route.t->crd_name) {
        /* custom resources: JSON and YAML only */
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json, application/yaml");
    } else if (!strcmp(ct, "application/vnd.kubernetes.protobuf")) {
        if ((rc = ks_proto_decode(r->body ? r->body : "", r->body_len, &obj, err)) != KC_OK) {
            if (rc != KC_EUNSUPPORTED && rc != KC_ENOMEM) {
                if (err)
                    err->code = KC_EBADREQUEST;
                rc = KC_EBADREQUEST;
            }
            return rc;
        }
    } else {
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json, application/yaml, "
                          "application/vnd.kubernetes.protobuf");
    }
    if (!json_is_object(obj)) {
        json_decref(obj);
        return kc_err_set(err, KC_EBADREQUEST,
                          "the request body must be a JSON object (a Kubernetes object)");
    }
    *out = obj;
    return KC_OK;
}

enum MHD_Result ks_reply_object(ks_req *r, unsigned status, json_t *obj)
{
    const char *ver = "v1";
    ks_as as = ks_accept_parse(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), KS_ACCEPT_OBJECTS, &ver);
    if (as == KS_AS_TABLE) {
        json_t *items = json_pack("[O]", obj);
        const char *rv =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        json_t *table =
            items ? ks_table_build(r->route.t, items, rv, NULL,
                                   ks_include_parse(ks_req_arg(r, "includeObject")), true, ver)
                  : NULL;
        json_decref(items);
        json_decref(obj);
        char ct[96];
        snprintf(ct, sizeof(ct), TABLE_CT, ver);
        return ks_reply_json(r, status, table, ct);
    }
    if (as == KS_AS_PARTIAL) {
        json_t *p = ks_partial_metadata(obj, ver);
        json_decref(obj);
        char ct[96];
        snprintf(ct, sizeof(ct), "application/json;as=PartialObjectMetadata;v=%s;g=meta.k8s.io",
                 ver);
        return ks_reply_json(r, status, p, ct);
    }
    json_t *out = ks_object_for_route(&r->route, obj);
    json_decref(obj);
    return ks_reply_json(r, status, out, NULL);
}

static enum MHD_Result method_not_allowed(ks_req *r)
{
    return ks_reply_status(r, 405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource",
                           json_object());
}

static enum MHD_Result reply_code(ks_req *r, kc_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_code(ks_req *r, kc_code code, const char *fmt, ...)
{
    kc_err err;
    va_list ap;
    va_start(ap, fmt);
    kc_err_vset(&err, code, fmt, ap);
    va_end(ap);
    return ks_reply_error(r, &err);
}

/* ---------------------------------------------------------------------------------------------
 * get / list
 */

static enum MHD_Result handle_get(ks_req *r)
{
    const ks_route *rt = &r->route;
    json_t *obj = NULL;
    kc_err err;
    if (ks_get(r->sim->store, rt->t, rt->ns, rt->name, &obj, &err) != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 200, obj);
}

/* resourceVersion=N on a list: "not older than N"; a future N waits briefly, then 504. */
static kc_code check_list_rv(ks_req *r, kc_err *err)
{
    const char *rvs = ks_req_arg(r, "resourceVersion");
    if (!rvs || !rvs[0] || strcmp(rvs, "0") == 0)
        return KC_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long want = strtoull(rvs, &end, 10);
    if (errno || !end || *end || rvs[0] == '-')
        return kc_err_set(err, KC_EBADREQUEST, "invalid resource version \"%s\"", rvs);
    for (int i = 0; i < 20 && ks_store_rv(r->sim->store) < want; i++)
        usleep(50 * 1000);
    uint64_t cur = ks_store_rv(r->sim->store);
    if (cur < want)
        return kc_err_set(err, KC_ESERVERTIMEOUT, "Too large resource version: %llu, current: %llu",
                          want, (unsigned long long)cur);
    return KC_OK;
}

static json_t *list_object(ks_req *r, json_t *items, const char *rv, const char *cont)
{
    const ks_route *rt = &r->route;
    char gv[256], kind[200];
    ks_group_version(gv, sizeof(gv), rt->group, rt->version);
    snprintf(kind, sizeof(kind), "%sList", rt->t->kind);
    json_t *meta = json_pack("{s:s}", "resourceVersion", rv);
    if (meta && cont && cont[0])
        json_object_set_new(meta, "continue", json_string(cont));
    /* Objects of a CRD served at several versions carry the stored apiVersion. */
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *av = json_string_value(json_object_get(it, "apiVersion"));
        if (!av || strcmp(av, gv) != 0) {
            json_t *c = ks_object_for_route(rt, it);
            if (c)
                json_array_set_new(items, i, c);
        }
    }
    return json_pack("{s:s, s:s, s:o, s:O}", "kind", kind, "apiVersion", gv, "metadata", meta,
                     "items", items);
}

static enum MHD_Result handle_list(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    ks_selectors sel;
    if (ks_selectors_parse(r, &sel, &err) != KC_OK)
        return ks_reply_error(r, &err);
    enum MHD_Result ret;
    json_t *items = NULL;
    char *next = NULL;
    uint64_t rv = 0;
    if (check_list_rv(r, &err) != KC_OK) {
        ret = ks_reply_error(r, &err);
        goto free_sel;
    }
    const char *ls = ks_req_arg(r, "limit");
    long limit = ls ? strtol(ls, NULL, 10) : 0;
    ks_list_opts lo = {.labels = sel.labels,
                       .fields = sel.fields,
                       .limit = limit > 0 ? limit : 0,
                       .continue_token = ks_req_arg(r, "continue")};
    if (lo.continue_token && !lo.continue_token[0])
        lo.continue_token = NULL;
    if (ks_list(r->sim->store, rt->t, rt->ns, &lo, &items, &rv, &next, &err) != KC_OK) {
        ret = ks_reply_error(r, &err);
        goto free_sel;
    }
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)rv);
    const char *ver = "v1";
    ks_as as = ks_accept_parse(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), KS_ACCEPT_OBJECTS, &ver);
    char ct[96];
    if (as == KS_AS_TABLE) {
        json_t *table = ks_table_build(rt->t, items, rvs, next,
                                       ks_include_parse(ks_req_arg(r, "includeObject")), true, ver);
        snprintf(ct, sizeof(ct), TABLE_CT, ver);
        ret = ks_reply_json(r, 200, table, ct);
    } else if (as == KS_AS_PARTIAL) {
        json_t *list =
            json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", "PartialObjectMetadataList",
                      "apiVersion", !strcmp(ver, "v1") ? "meta.k8s.io/v1" : "meta.k8s.io/v1beta1",
                      "metadata", "resourceVersion", rvs, "items");
        if (list && next)
            json_object_set_new(json_object_get(list, "metadata"), "continue", json_string(next));
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
            json_array_append_new(json_object_get(list, "items"), ks_partial_metadata(it, ver));
        }
        snprintf(ct, sizeof(ct), "application/json;as=PartialObjectMetadataList;v=%s;g=meta.k8s.io",
                 ver);
        ret = ks_reply_json(r, 200, list, ct);
    } else {
        ret = ks_reply_json(r, 200, list_object(r, items, rvs, next), NULL);
    }
    json_decref(items);
    free(next);
free_sel:
    ks_selectors_free(&sel);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * create / update
 */

/* The checks the API server makes on a body against the URL: apiVersion group, kind, namespace
 * (filled in when absent), and, when url_name is given, the name. */
static kc_code check_body(ks_req *r, json_t *obj, const char *url_name, kc_err *err)
{
    const ks_route *rt = &r->route;
    const ks_rtype *t = rt->t;
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (av && av[0]) {
        const char *slash = strchr(av, '/');
        size_t glen = slash ? (size_t)(slash - av) : 0;
        if (strlen(t->group) != glen || strncmp(av, t->group, glen) != 0) {
            char gv[256];
            return kc_err_set(err, KC_EBADREQUEST,
                              "the API version in the data (%s) does not match the expected API "
                              "version (%s)",
                              av, ks_group_version(gv, sizeof(gv), rt->group, rt->version));
        }
    }
    if (kind && kind[0] && strcmp(kind, t->kind) != 0)
        return kc_err_set(err, KC_EBADREQUEST,
                          "the kind in the data (%s) does not match the expected kind (%s)", kind,
                          t->kind);
    json_t *meta = json_object_get(obj, "metadata");
    if (!meta) {
        meta = json_object();
        json_object_set_new(obj, "metadata", meta);
    }
    if (!json_is_object(meta))
        return kc_err_set(err, KC_EBADREQUEST, "metadata must be an object");
    const char *ons = json_string_value(json_object_get(meta, "namespace"));
    if (t->namespaced) {
        if (ons && ons[0] && strcmp(ons, rt->ns) != 0)
            return kc_err_set(err, KC_EBADREQUEST,
                              "the namespace of the provided object does not match the namespace "
                              "sent on the request");
        json_object_set_new(meta, "namespace", json_string(rt->ns));
    } else if (ons) {
        json_object_del(meta, "namespace");
    }
    if (url_name) {
        const char *on = json_string_value(json_object_get(meta, "name"));
        if (!on || !on[0])
            return kc_err_set(err, KC_EBADREQUEST, "name must be provided");
        if (strcmp(on, url_name) != 0)
            return kc_err_set(err, KC_EBADREQUEST,
                              "the name of the object (%s) does not match the name on the URL (%s)",
                              on, url_name);
    }
    return KC_OK;
}

bool ks_escalation_refused(ks_req *r, const json_t *obj, const json_t *old, enum MHD_Result *ret)
{
    const ks_route *rt = &r->route;
    const char *res = rt->t->resource;
    if (rt->sub || strcmp(rt->t->group, "rbac.authorization.k8s.io") != 0 ||
        (strcmp(res, "roles") && strcmp(res, "clusterroles") && strcmp(res, "rolebindings") &&
         strcmp(res, "clusterrolebindings")))
        return false;
    char *msg = NULL;
    const char *url_name = strcmp(r->verb, "create") == 0 ? NULL : rt->name;
    unsigned code = ks_auth_escalation(r->sim, &r->user, res, rt->ns, url_name, obj, old, &msg);
    if (!code)
        return false;
    const json_t *named =
        code == 404 ? json_object_get(obj, "roleRef") : json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(named, "name"));
    json_t *d = json_pack("{s:s, s:s, s:s}", "name", name ? name : "", "group",
                          "rbac.authorization.k8s.io", "kind", res);
    *ret = ks_reply_status(r, code, code == 404 ? "NotFound" : "Forbidden", msg ? msg : "forbidden",
                           d);
    free(msg);
    return true;
}

static enum MHD_Result handle_create(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *obj = NULL;
    ks_fv fv = ks_fv_parse(r);
    if (fv == KS_FV_BAD)
        return ks_fv_reply_bad(r, "CreateOptions");
    if (ks_decode_body(r, &obj, &err) != KC_OK || check_body(r, obj, NULL, &err) != KC_OK ||
        ks_fv_check(r, fv, rt->t, obj, false, &err) != KC_OK) {
        json_decref(obj);
        return ks_reply_error(r, &err);
    }
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    if ((!name || !name[0]) && (!gen || !gen[0])) {
        json_decref(obj);
        return reply_code(r, KC_EINVALID,
                          "metadata.name: Required value: name or generateName is required");
    }
    snprintf(r->obj_name, sizeof(r->obj_name), "%s", name ? name : "");
    enum MHD_Result ret;
    if (ks_escalation_refused(r, obj, NULL, &ret)) {
        json_decref(obj);
        return ret;
    }
    if (ks_dry_run(r)) {
        json_t *cur = NULL;
        if (name && name[0] && ks_get(r->sim->store, rt->t, rt->ns, name, &cur, NULL) == KC_OK) {
            json_decref(cur);
            json_decref(obj);
            return reply_code(r, KC_EALREADYEXISTS, "%s%s%s \"%s\" already exists", rt->t->resource,
                              rt->t->group[0] ? "." : "", rt->t->group, name);
        }
        char gv[256], now[32];
        ks_now_rfc3339(now);
        json_object_set_new(obj, "apiVersion",
                            json_string(ks_group_version(gv, sizeof(gv), rt->group, rt->version)));
        json_object_set_new(obj, "kind", json_string(rt->t->kind));
        json_object_set_new(meta, "creationTimestamp", json_string(now));
        return ks_reply_object(r, 201, obj);
    }
    json_t *out = NULL;
    if (ks_create(r->sim->store, rt->t, rt->ns, obj, &out, &err) != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 201, out);
}

static enum MHD_Result handle_update(ks_req *r, ks_write_kind kind)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *obj = NULL;
    ks_fv fv = ks_fv_parse(r);
    if (fv == KS_FV_BAD)
        return ks_fv_reply_bad(r, "UpdateOptions");
    if (ks_decode_body(r, &obj, &err) != KC_OK || check_body(r, obj, rt->name, &err) != KC_OK ||
        ks_fv_check(r, fv, rt->t, obj, false, &err) != KC_OK) {
        json_decref(obj);
        return ks_reply_error(r, &err);
    }
    if (!rt->sub && !strcmp(rt->t->group, "rbac.authorization.k8s.io")) {
        json_t *cur = NULL;
        enum MHD_Result ret;
        bool found = ks_get(r->sim->store, rt->t, rt->ns, rt->name, &cur, NULL) == KC_OK;
        /* An update that creates (PUT of an absent object) is checked as a create. */
        bool refused = ks_escalation_refused(r, obj, found ? cur : NULL, &ret);
        json_decref(cur);
        if (refused) {
            json_decref(obj);
            return ret;
        }
    }
    if (ks_dry_run(r)) {
        json_t *cur = NULL;
        if (ks_get(r->sim->store, rt->t, rt->ns, rt->name, &cur, &err) != KC_OK) {
            json_decref(obj);
            return ks_reply_error(r, &err);
        }
        json_decref(cur);
        return ks_reply_object(r, 200, obj);
    }
    json_t *out = NULL;
    if (ks_update(r->sim->store, rt->t, rt->ns, obj, kind, &out, &err) != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 200, out);
}

/* PUT namespaces/NAME/finalize: only spec.finalizers changes. */
static kc_code finalize_fn(void *ud, json_t *obj, kc_err *err)
{
    json_t *fin = ud;
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    if (fin)
        json_object_set(spec, "finalizers", fin);
    else
        json_object_del(spec, "finalizers");
    return KC_OK;
}

static enum MHD_Result handle_finalize(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *obj = NULL, *out = NULL;
    if (ks_decode_body(r, &obj, &err) != KC_OK || check_body(r, obj, rt->name, &err) != KC_OK) {
        json_decref(obj);
        return ks_reply_error(r, &err);
    }
    json_t *fin = json_object_get(json_object_get(obj, "spec"), "finalizers");
    kc_code rc = ks_mutate(r->sim->store, rt->t, NULL, rt->name, KS_WRITE_MAIN, finalize_fn, fin,
                           &out, &err);
    json_decref(obj);
    if (rc != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 200, out);
}

/* ---------------------------------------------------------------------------------------------
 * delete
 */

typedef struct delete_params {
    ks_delete_opts o;
    char uid[128], rv[64];
    bool dry_run;
} delete_params;

static kc_code set_propagation(delete_params *p, const char *v, kc_err *err)
{
    if (!strcmp(v, "Background"))
        p->o.propagation = KS_PROPAGATE_BACKGROUND;
    else if (!strcmp(v, "Foreground"))
        p->o.propagation = KS_PROPAGATE_FOREGROUND;
    else if (!strcmp(v, "Orphan"))
        p->o.propagation = KS_PROPAGATE_ORPHAN;
    else
        return kc_err_set(err, KC_EINVALID,
                          "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: "
                          "Unsupported value: \"%s\": supported values: \"Foreground\", "
                          "\"Background\", \"Orphan\"",
                          v);
    return KC_OK;
}

/* DeleteOptions from the query and then the body (JSON or protobuf), the body winning. */
static kc_code parse_delete_options(ks_req *r, const json_t *body_opts, delete_params *p,
                                    kc_err *err)
{
    memset(p, 0, sizeof(*p));
    p->o.grace_period_seconds = -1;
    p->dry_run = ks_dry_run(r);
    const char *v;
    kc_code rc;
    if ((v = ks_req_arg(r, "propagationPolicy")) && (rc = set_propagation(p, v, err)) != KC_OK)
        return rc;
    if ((v = ks_req_arg(r, "gracePeriodSeconds")))
        p->o.grace_period_seconds = strtol(v, NULL, 10);
    if ((v = ks_req_arg(r, "orphanDependents")))
        p->o.propagation = !strcmp(v, "true") ? KS_PROPAGATE_ORPHAN : KS_PROPAGATE_BACKGROUND;
    if (json_is_object(body_opts)) {
        json_t *j;
        if ((j = json_object_get(body_opts, "orphanDependents")) && json_is_boolean(j))
            p->o.propagation = json_is_true(j) ? KS_PROPAGATE_ORPHAN : KS_PROPAGATE_BACKGROUND;
        if ((v = json_string_value(json_object_get(body_opts, "propagationPolicy"))) &&
            (rc = set_propagation(p, v, err)) != KC_OK)
            return rc;
        if ((j = json_object_get(body_opts, "gracePeriodSeconds")) && json_is_integer(j))
            p->o.grace_period_seconds = (long)json_integer_value(j);
        json_t *pre = json_object_get(body_opts, "preconditions");
        if ((v = json_string_value(json_object_get(pre, "uid"))) && v[0]) {
            snprintf(p->uid, sizeof(p->uid), "%s", v);
            p->o.precondition_uid = p->uid;
        }
        if ((v = json_string_value(json_object_get(pre, "resourceVersion"))) && v[0]) {
            snprintf(p->rv, sizeof(p->rv), "%s", v);
            p->o.precondition_resource_version = p->rv;
        }
        json_t *dr = json_object_get(body_opts, "dryRun");
        if (json_is_array(dr) && json_array_size(dr) > 0)
            p->dry_run = true;
    }
    if (p->o.grace_period_seconds < -1)
        p->o.grace_period_seconds = 0;
    return KC_OK;
}

static kc_code body_delete_options(ks_req *r, json_t **out, kc_err *err)
{
    *out = NULL;
    if (!r->body_len)
        return KC_OK;
    return ks_decode_body(r, out, err);
}

static kc_code delete_one(ks_req *r, const char *ns, const char *name, const delete_params *p,
                          json_t **out, kc_err *err)
{
    if (p->dry_run)
        return ks_get(r->sim->store, r->route.t, ns, name, out, err);
    return ks_delete(r->sim->store, r->route.t, ns, name, &p->o, out, err);
}

static enum MHD_Result handle_delete(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *bo = NULL, *out = NULL;
    delete_params p;
    if (body_delete_options(r, &bo, &err) != KC_OK ||
        parse_delete_options(r, bo, &p, &err) != KC_OK) {
        json_decref(bo);
        return ks_reply_error(r, &err);
    }
    json_decref(bo);
    if (delete_one(r, rt->ns, rt->name, &p, &out, &err) != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 200, out);
}

static enum MHD_Result handle_deletecollection(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *bo = NULL, *items = NULL, *deleted = NULL;
    delete_params p;
    ks_selectors sel = {0};
    enum MHD_Result ret;
    if (body_delete_options(r, &bo, &err) != KC_OK ||
        parse_delete_options(r, bo, &p, &err) != KC_OK ||
        ks_selectors_parse(r, &sel, &err) != KC_OK) {
        ret = ks_reply_error(r, &err);
        goto done;
    }
    ks_list_opts lo = {.labels = sel.labels, .fields = sel.fields};
    uint64_t rv = 0;
    if (ks_list(r->sim->store, rt->t, rt->ns, &lo, &items, &rv, NULL, &err) != KC_OK) {
        ret = ks_reply_error(r, &err);
        goto done;
    }
    deleted = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        json_t *meta = json_object_get(it, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        json_t *out = NULL;
        kc_code rc = delete_one(r, rt->t->namespaced ? ns : NULL, name, &p, &out, &err);
        if (rc == KC_ENOTFOUND)
            continue;
        if (rc != KC_OK) {
            ret = ks_reply_error(r, &err);
            goto done;
        }
        json_array_append_new(deleted, out);
    }
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)ks_store_rv(r->sim->store));
    ret = ks_reply_json(r, 200, list_object(r, deleted, rvs, NULL), NULL);
done:
    json_decref(bo);
    json_decref(items);
    json_decref(deleted);
    ks_selectors_free(&sel);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * pods: log, eviction, binding
 */

static enum MHD_Result reply_success(ks_req *r, unsigned code)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", "Success", "code", (int)code);
    return ks_reply_json(r, code, st, NULL);
}

static enum MHD_Result handle_log(ks_req *r)
{
    const ks_route *rt = &r->route;
    const char *container = ks_req_arg(r, "container");
    if (container && !container[0])
        container = NULL;
    long tail = -1;
    const char *ts = ks_req_arg(r, "tailLines");
    if (ts) {
        char *end = NULL;
        tail = strtol(ts, &end, 10);
        if (!end || *end || tail < 0)
            return reply_code(r, KC_EBADREQUEST,
                              "tailLines: Invalid value: \"%s\": must be a "
                              "non-negative integer",
                              ts);
    }
    if (ks_req_arg_bool(r, "follow", false))
        return ks_handle_log_follow(r, container, tail);
    char *text = NULL;
    size_t len = 0;
    kc_err err;
    if (ks_kubelet_logs(r->sim, rt->ns, rt->name, container, tail, &text, &len, &err) != KC_OK)
        return ks_reply_error(r, &err);
    const char *lb = ks_req_arg(r, "limitBytes");
    if (lb) {
        long n = strtol(lb, NULL, 10);
        if (n > 0 && (size_t)n < len)
            len = (size_t)n;
    }
    enum MHD_Result ret = ks_reply_text(r, 200, text ? text : "", text ? len : 0);
    free(text);
    return ret;
}

static enum MHD_Result handle_eviction(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *ev = NULL, *out = NULL;
    /* An Eviction body kubesim cannot decode (client-go may send protobuf) still names the pod
     * of the URL; evict with default options then. */
    if (r->body_len && ks_decode_body(r, &ev, &err) != KC_OK && err.code != KC_EUNSUPPORTED)
        return ks_reply_error(r, &err);
    const char *bn = json_string_value(json_object_get(json_object_get(ev, "metadata"), "name"));
    if (bn && bn[0] && strcmp(bn, rt->name) != 0) {
        json_decref(ev);
        return reply_code(r, KC_EBADREQUEST, "name in URL does not match name in Eviction object");
    }
    delete_params p;
    kc_code rc = parse_delete_options(r, json_object_get(ev, "deleteOptions"), &p, &err);
    json_decref(ev);
    if (rc != KC_OK)
        return ks_reply_error(r, &err);
    if (delete_one(r, rt->ns, rt->name, &p, &out, &err) != KC_OK)
        return ks_reply_error(r, &err);
    json_decref(out);
    return reply_success(r, 201);
}

static kc_code bind_fn(void *ud, json_t *pod, kc_err *err)
{
    const char *node = ud;
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(pod, "spec", spec);
    }
    const char *cur = json_string_value(json_object_get(spec, "nodeName"));
    if (cur && cur[0])
        return kc_err_set(
            err, KC_ECONFLICT, "pod %s is already assigned to node \"%s\"",
            json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")), cur);
    json_object_set_new(spec, "nodeName", json_string(node));
    return KC_OK;
}

static enum MHD_Result handle_binding(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    json_t *b = NULL, *out = NULL;
    if (ks_decode_body(r, &b, &err) != KC_OK)
        return ks_reply_error(r, &err);
    const char *node = json_string_value(json_object_get(json_object_get(b, "target"), "name"));
    if (!node || !node[0]) {
        json_decref(b);
        return reply_code(r, KC_EINVALID, "target.name: Required value");
    }
    kc_code rc = ks_mutate(r->sim->store, rt->t, rt->ns, rt->name, KS_WRITE_MAIN, bind_fn,
                           (void *)node, &out, &err);
    json_decref(b);
    json_decref(out);
    if (rc != KC_OK)
        return ks_reply_error(r, &err);
    return reply_success(r, 201);
}

/* ---------------------------------------------------------------------------------------------
 * dispatch
 */

enum MHD_Result ks_handle_resource(ks_req *r)
{
    const ks_route *rt = &r->route;
    const char *m = r->method;
    bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    if (rt->sub) {
        const char *sub = rt->sub;
        if (!strcmp(sub, "log"))
            return get ? handle_log(r) : method_not_allowed(r);
        if (!strcmp(sub, "eviction"))
            return !strcmp(m, "POST") ? handle_eviction(r) : method_not_allowed(r);
        if (!strcmp(sub, "binding"))
            return !strcmp(m, "POST") ? handle_binding(r) : method_not_allowed(r);
        if (!strcmp(sub, "finalize"))
            return !strcmp(m, "PUT") ? handle_finalize(r) : method_not_allowed(r);
        if (!strcmp(sub, "token"))
            return !strcmp(m, "POST") ? ks_handle_token(r) : method_not_allowed(r);
        if (!strcmp(sub, "scale"))
            return ks_handle_scale(r);
        /* status */
        if (get)
            return handle_get(r);
        if (!strcmp(m, "PUT"))
            return handle_update(r, KS_WRITE_STATUS);
        if (!strcmp(m, "PATCH"))
            return ks_handle_patch(r);
        return method_not_allowed(r);
    }
    /* Custom resources are never protobuf: a client accepting nothing else is refused before
     * anything happens, as the API server negotiates first. */
    if (rt->t && rt->t->crd_name &&
        ks_media_negotiate(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), false) == KS_MEDIA_NONE)
        return ks_reply_not_acceptable(r);
    if (get && !strcmp(r->verb, "watch")) {
        ks_selectors sel;
        kc_err err;
        if (ks_selectors_parse(r, &sel, &err) != KC_OK)
            return ks_reply_error(r, &err);
        return ks_handle_watch(r, &sel);
    }
    if (!rt->name) {
        if (get)
            return handle_list(r);
        if (!strcmp(m, "POST"))
            return handle_create(r);
        if (!strcmp(m, "DELETE"))
            return handle_deletecollection(r);
        return method_not_allowed(r);
    }
    if (get)
        return handle_get(r);
    if (!strcmp(m, "PUT"))
        return handle_update(r, KS_WRITE_MAIN);
    if (!strcmp(m, "PATCH"))
        return ks_handle_patch(r);
    if (!strcmp(m, "DELETE"))
        return handle_delete(r);
    return method_not_allowed(r);
}
