/* ks_rest_patch: PATCH for kubesim's API server (JSON merge, JSON patch, strategic merge and
 * server-side apply, applied inside the store's read-modify-write so the resourceVersion stays
 * consistent) and the autoscaling/v1 /scale subresource. */
#include "ks_auth.h"
#include "ks_crd.h"
#include "ks_server_int.h"

#include "kc_patch.h"
#include "kc_yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum patch_kind { PATCH_MERGE, PATCH_JSON, PATCH_SMP, PATCH_APPLY } patch_kind;

typedef struct patch_ctx {
    ks_req *r;
    patch_kind kind;
    const json_t *patch;
    bool scale; /* the patch is against the Scale view of the object */
    ks_fv fv;   /* ?fieldValidation= */
} patch_ctx;

static const char UNKNOWN_PATCH[] = "the body of the request was in an unknown format - accepted "
                                    "media types include: application/json-patch+json, "
                                    "application/merge-patch+json, application/apply-patch+yaml";

static const char *qualified(char *buf, size_t size, const ks_rtype *t)
{
    if (t->group[0])
        snprintf(buf, size, "%s.%s", t->resource, t->group);
    else
        snprintf(buf, size, "%s", t->resource);
    return buf;
}

static kc_code conflict(const ks_req *r, kc_err *err)
{
    char q[300];
    return kc_err_set(err, KC_ECONFLICT,
                      "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
                      "please apply your changes to the latest version and try again",
                      qualified(q, sizeof(q), r->route.t), r->route.name);
}

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* Applies one patch of any kind to doc; *out a new reference. */
static kc_code apply_patch(const patch_ctx *c, const json_t *doc, const char *kind, json_t **out,
                           kc_err *err)
{
    *out = NULL;
    switch (c->kind) {
    case PATCH_MERGE:
        *out = kc_merge_patch_apply(doc, c->patch);
        break;
    case PATCH_JSON:
        return kc_json_patch_apply(doc, c->patch, out, err);
    case PATCH_SMP:
        return kc_smp_apply(doc, c->patch, kind, out, err);
    case PATCH_APPLY: {
        /* Server-side apply without field ownership: the applied configuration is merged into
         * the live object (strategic merge for built-in kinds, merge patch for custom ones). */
        json_t *cfg = json_deep_copy(c->patch);
        if (!cfg)
            break;
        json_t *meta = json_object_get(cfg, "metadata");
        if (json_is_object(meta)) {
            json_object_del(meta, "managedFields");
            json_object_del(meta, "resourceVersion");
        }
        kc_code rc = c->r->route.t->crd_name ? ((*out = kc_merge_patch_apply(doc, cfg)), KC_OK)
                                             : kc_smp_apply(doc, cfg, kind, out, err);
        json_decref(cfg);
        if (rc != KC_OK)
            return rc;
        break;
    }
    }
    if (!*out)
        return kc_err_set(err, KC_ENOMEM, "out of memory applying the patch");
    return KC_OK;
}

/* The resourceVersion a patched document carries must be the stored one (a precondition). */
static kc_code check_rv(const patch_ctx *c, const json_t *before, const json_t *after, kc_err *err)
{
    const char *rv = meta_str(after, "resourceVersion");
    const char *cur = meta_str(before, "resourceVersion");
    if (rv && rv[0] && (!cur || strcmp(rv, cur) != 0))
        return conflict(c->r, err);
    return KC_OK;
}

static kc_code patch_fn(void *ud, json_t *obj, kc_err *err)
{
    patch_ctx *c = ud;
    const ks_route *rt = &c->r->route;
    json_t *res = NULL;
    kc_code rc = apply_patch(c, obj, rt->t->kind, &res, err);
    if (rc != KC_OK)
        return rc;
    if (!json_is_object(res)) {
        json_decref(res);
        return kc_err_set(err, KC_EBADREQUEST, "the patch turns the object into a non-object");
    }
    if ((rc = check_rv(c, obj, res, err)) != KC_OK) {
        json_decref(res);
        return rc;
    }
    json_t *meta = json_object_get(res, "metadata");
    if (!json_is_object(meta)) {
        json_decref(res);
        return kc_err_set(err, KC_EBADREQUEST, "the patch removes the object's metadata");
    }
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name || strcmp(name, rt->name) != 0) {
        rc = kc_err_set(err, KC_EBADREQUEST,
                        "the name of the object (%s) does not match the name on the URL (%s)",
                        name ? name : "", rt->name);
        json_decref(res);
        return rc;
    }
    /* Unknown fields of a custom object: decided on the patched result, as the API server does
     * (server-side apply reports them its own way and is not checked here). */
    if (c->kind != PATCH_APPLY && (rc = ks_fv_check(c->r, c->fv, rt->t, res, true, err)) != KC_OK) {
        json_decref(res);
        return rc;
    }
    /* What the patch cannot change. */
    json_object_set(res, "apiVersion", json_object_get(obj, "apiVersion"));
    json_object_set(res, "kind", json_object_get(obj, "kind"));
    json_t *ons = json_object_get(json_object_get(obj, "metadata"), "namespace");
    if (ons)
        json_object_set(meta, "namespace", ons);
    else
        json_object_del(meta, "namespace");
    json_object_clear(obj);
    json_object_update(obj, res);
    json_decref(res);
    return KC_OK;
}

static kc_code patch_kind_of(ks_req *r, patch_kind *kind, kc_err *err)
{
    char ctb[128];
    const char *ct = ks_content_type(r, ctb, sizeof(ctb));
    if (ct && !strcmp(ct, "application/merge-patch+json"))
        *kind = PATCH_MERGE;
    else if (ct && !strcmp(ct, "application/json-patch+json"))
        *kind = PATCH_JSON;
    else if (ct && !strcmp(ct, "application/strategic-merge-patch+json"))
        *kind = PATCH_SMP;
    else if (ct && !strcmp(ct, "application/apply-patch+yaml"))
        *kind = PATCH_APPLY;
    else if (r->route.t->crd_name)
        return kc_err_set(err, KC_EUNSUPPORTED, "%s", UNKNOWN_PATCH);
    else
        return kc_err_set(err, KC_EUNSUPPORTED, "%s, application/strategic-merge-patch+json",
                          UNKNOWN_PATCH);
    /* The API server has no strategic merge for custom resources (no Go struct tags). */
    bool scale = r->route.sub && !strcmp(r->route.sub, "scale");
    if (*kind == PATCH_SMP && r->route.t->crd_name && !scale)
        return kc_err_set(err, KC_EUNSUPPORTED, "%s", UNKNOWN_PATCH);
    return KC_OK;
}

static kc_code parse_patch_body(ks_req *r, patch_kind kind, json_t **out, kc_err *err)
{
    *out = NULL;
    json_t *p = NULL;
    if (kind == PATCH_APPLY) {
        if (kc_yaml_parse_one(r->body ? r->body : "", r->body_len, "apply patch", &p, err) !=
            KC_OK) {
            if (err)
                err->code = KC_EBADREQUEST;
            return KC_EBADREQUEST;
        }
    } else {
        json_error_t je;
        p = json_loadb(r->body ? r->body : "", r->body_len, JSON_DECODE_ANY, &je);
        if (!p)
            return kc_err_set(err, KC_EBADREQUEST, "error decoding patch: %s (line %d, column %d)",
                              je.text, je.line, je.column);
    }
    if (kind == PATCH_JSON ? !json_is_array(p) : !json_is_object(p)) {
        json_decref(p);
        return kc_err_set(err, KC_EBADREQUEST,
                          kind == PATCH_JSON ? "a JSON patch must be an array of operations"
                                             : "the patch must be a JSON object");
    }
    *out = p;
    return KC_OK;
}

/* Server-side apply of an absent object creates it from the applied configuration. */
static enum MHD_Result apply_create(ks_req *r, const json_t *cfg)
{
    const ks_route *rt = &r->route;
    kc_err err;
    /* An apply that creates is authorized as a create too (the request itself as a patch). */
    char reason[1024];
    if (!ks_auth_allowed(r->sim, &r->user, "create", rt->t->group, rt->t->resource, rt->sub, rt->ns,
                         NULL, reason, sizeof(reason)))
        return ks_reply_forbidden(r, reason);
    json_t *obj = json_deep_copy(cfg), *out = NULL;
    if (!obj)
        return ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(obj, "metadata", meta);
    }
    json_object_del(meta, "managedFields");
    json_object_del(meta, "resourceVersion");
    json_object_set_new(meta, "name", json_string(rt->name));
    if (rt->t->namespaced)
        json_object_set_new(meta, "namespace", json_string(rt->ns));
    enum MHD_Result ret;
    if (ks_escalation_refused(r, obj, NULL, &ret)) {
        json_decref(obj);
        return ret;
    }
    if (ks_dry_run(r))
        return ks_reply_object(r, 201, obj);
    if (ks_create(r->sim->store, rt->t, rt->ns, obj, &out, &err) != KC_OK)
        return ks_reply_error(r, &err);
    return ks_reply_object(r, 201, out);
}

/* Server-side apply builds a typed object from the applied configuration before anything else:
 * for a custom resource with a schema, a field the schema does not declare fails the request
 * with 500 and no reason (not a field-validation warning), naming the first such field. */
static bool apply_undeclared(ks_req *r, const json_t *cfg, enum MHD_Result *ret)
{
    const ks_rtype *t = r->route.t;
    if (!t || !t->crd_name || !t->schema || !json_is_object(cfg))
        return false;
    json_t *copy = json_deep_copy(cfg), *pruned = json_array();
    bool found = false;
    if (copy && pruned && ks_crd_prune(t->schema, copy, pruned) > 0) {
        const char *first = NULL;
        size_t i;
        json_t *v;
        json_array_foreach(pruned, i, v)
        {
            const char *path = json_string_value(v);
            if (path && (!first || strcmp(path, first) < 0))
                first = path;
        }
        if (first) {
            char msg[1024];
            snprintf(msg, sizeof(msg),
                     "failed to create typed patch object (%s/%s; %s%s%s, Kind=%s): %s%s: field "
                     "not declared in schema",
                     r->route.ns ? r->route.ns : "", r->route.name ? r->route.name : "",
                     t->group && t->group[0] ? t->group : "", t->group && t->group[0] ? "/" : "",
                     t->version, t->kind, first[0] == '.' ? "" : ".", first);
            *ret = ks_reply_status(r, 500, "", msg, NULL);
            found = true;
        }
    }
    json_decref(copy);
    json_decref(pruned);
    return found;
}

enum MHD_Result ks_handle_patch(ks_req *r)
{
    const ks_route *rt = &r->route;
    kc_err err;
    patch_kind kind;
    json_t *patch = NULL, *out = NULL;
    enum MHD_Result ret;
    ks_fv fv = ks_fv_parse(r);
    if (fv == KS_FV_BAD)
        return ks_fv_reply_bad(r, "PatchOptions");
    if (patch_kind_of(r, &kind, &err) != KC_OK || parse_patch_body(r, kind, &patch, &err) != KC_OK)
        return ks_reply_error(r, &err);
    if (kind == PATCH_APPLY) {
        const char *fm = ks_req_arg(r, "fieldManager");
        if (!fm || !fm[0]) {
            json_decref(patch);
            /* The API server validates PatchOptions: 422 Invalid, kind PatchOptions. */
            json_t *d =
                json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}]}", "group", "meta.k8s.io", "kind",
                          "PatchOptions", "causes", "reason", "FieldValueRequired", "message",
                          "Required value: is required for apply patch", "field", "fieldManager");
            return ks_reply_status(r, 422, "Invalid",
                                   "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                   "Required value: is required for apply patch",
                                   d);
        }
        enum MHD_Result undeclared;
        if (apply_undeclared(r, patch, &undeclared)) {
            json_decref(patch);
            return undeclared;
        }
        const char *n = meta_str(patch, "name");
        if (n && n[0] && strcmp(n, rt->name) != 0) {
            json_decref(patch);
            kc_err_set(&err, KC_EBADREQUEST,
                       "the name of the object (%s) does not match the name on the URL (%s)", n,
                       rt->name);
            return ks_reply_error(r, &err);
        }
    }
    patch_ctx c = {.r = r, .kind = kind, .patch = patch, .fv = fv};
    ks_write_kind wk = rt->sub && !strcmp(rt->sub, "status") ? KS_WRITE_STATUS : KS_WRITE_MAIN;
    kc_code rc;
    if (wk == KS_WRITE_MAIN && !strcmp(rt->t->group, "rbac.authorization.k8s.io")) {
        /* Escalation is judged on the patched object, as the API server's update does. */
        json_t *cur = NULL, *cand = NULL;
        bool refused = false;
        if (ks_get(r->sim->store, rt->t, rt->ns, rt->name, &cur, NULL) == KC_OK &&
            (cand = json_deep_copy(cur)) && patch_fn(&c, cand, NULL) == KC_OK)
            refused = ks_escalation_refused(r, cand, cur, &ret);
        json_decref(cur);
        json_decref(cand);
        if (refused) {
            json_decref(patch);
            return ret;
        }
    }
    if (ks_dry_run(r)) {
        json_t *cur = NULL;
        rc = ks_get(r->sim->store, rt->t, rt->ns, rt->name, &cur, &err);
        if (rc == KC_OK) {
            out = json_deep_copy(cur);
            rc = out ? patch_fn(&c, out, &err) : kc_err_set(&err, KC_ENOMEM, "out of memory");
        }
        json_decref(cur);
    } else {
        rc = ks_mutate(r->sim->store, rt->t, rt->ns, rt->name, wk, patch_fn, &c, &out, &err);
    }
    if (rc == KC_ENOTFOUND && kind == PATCH_APPLY && wk == KS_WRITE_MAIN) {
        ret = apply_create(r, patch);
    } else if (rc != KC_OK) {
        json_decref(out);
        ret = ks_reply_error(r, &err);
    } else {
        ret = ks_reply_object(r, 200, out);
    }
    json_decref(patch);
    return ret;
}

/* ---------------------------------------------------------------------------------------------
 * /scale
 */

static json_t *scale_of(const json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    json_t *spec = json_object_get(obj, "spec");
    json_t *status = json_object_get(obj, "status");
    json_t *m = json_object();
    static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion",
                                       "creationTimestamp"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        json_t *v = json_object_get(meta, keep[i]);
        if (v)
            json_object_set(m, keep[i], v);
    }
    json_int_t want = json_integer_value(json_object_get(spec, "replicas"));
    if (!json_object_get(spec, "replicas"))
        want = 1;
    json_t *st =
        json_pack("{s:I}", "replicas", json_integer_value(json_object_get(status, "replicas")));
    kc_label_selector *sel = NULL;
    json_t *js = json_object_get(spec, "selector");
    if (js && kc_label_selector_from_json(js, &sel, NULL) == KC_OK) {
        char *s = kc_label_selector_string(sel);
        if (s && st)
            json_object_set_new(st, "selector", json_string(s));
        free(s);
        kc_label_selector_free(sel);
    }
    return json_pack("{s:s, s:s, s:o, s:{s:I}, s:o}", "kind", "Scale", "apiVersion",
                     "autoscaling/v1", "metadata", m, "spec", "replicas", want, "status", st);
}

static kc_code set_replicas(const ks_req *r, json_t *obj, const json_t *scale, kc_err *err)
{
    json_t *rep = json_object_get(json_object_get(scale, "spec"), "replicas");
    if (rep && !json_is_integer(rep))
        return kc_err_set(err, KC_EBADREQUEST, "spec.replicas must be an integer");
    json_int_t n = rep ? json_integer_value(rep) : 0;
    if (n < 0)
        return kc_err_set(err, KC_EINVALID,
                          "Scale.autoscaling \"%s\" is invalid: spec.replicas: Invalid value: "
                          "%lld: must be greater than or equal to 0",
                          r->route.name, (long long)n);
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    json_object_set_new(spec, "replicas", json_integer(n));
    return KC_OK;
}

typedef struct scale_ctx {
    patch_ctx pc;
    const json_t *put; /* PUT: the Scale body; PATCH: NULL */
} scale_ctx;

static kc_code scale_fn(void *ud, json_t *obj, kc_err *err)
{
    scale_ctx *s = ud;
    json_t *cur = scale_of(obj), *next = NULL;
    if (!cur)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    kc_code rc;
    if (s->put) {
        next = json_incref((json_t *)s->put);
    } else if ((rc = apply_patch(&s->pc, cur, "Scale", &next, err)) != KC_OK) {
        json_decref(cur);
        return rc;
    }
    rc = check_rv(&s->pc, cur, next, err);
    if (rc == KC_OK)
        rc = set_replicas(s->pc.r, obj, next, err);
    json_decref(cur);
    json_decref(next);
    return rc;
}

enum MHD_Result ks_handle_scale(ks_req *r)
{
    const ks_route *rt = &r->route;
    const char *m = r->method;
    kc_err err;
    json_t *obj = NULL, *body = NULL;
    kc_code rc;
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) {
        if (ks_get(r->sim->store, rt->t, rt->ns, rt->name, &obj, &err) != KC_OK)
            return ks_reply_error(r, &err);
        json_t *sc = scale_of(obj);
        json_decref(obj);
        return ks_reply_json(r, 200, sc, NULL);
    }
    scale_ctx s = {.pc = {.r = r, .scale = true}};
    if (!strcmp(m, "PUT")) {
        if ((rc = ks_decode_body(r, &body, &err)) != KC_OK)
            return ks_reply_error(r, &err);
        s.put = body;
    } else if (!strcmp(m, "PATCH")) {
        patch_kind kind;
        if (patch_kind_of(r, &kind, &err) != KC_OK ||
            parse_patch_body(r, kind, &body, &err) != KC_OK)
            return ks_reply_error(r, &err);
        s.pc.kind = kind == PATCH_APPLY ? PATCH_MERGE : kind;
        s.pc.patch = body;
    } else {
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource",
                               json_object());
    }
    rc = ks_mutate(r->sim->store, rt->t, rt->ns, rt->name, KS_WRITE_MAIN, scale_fn, &s, &obj, &err);
    json_decref(body);
    if (rc != KC_OK)
        return ks_reply_error(r, &err);
    json_t *sc = scale_of(obj);
    json_decref(obj);
    return ks_reply_json(r, 200, sc, NULL);
}
