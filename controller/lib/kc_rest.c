/* kc_rest: REST verbs (get, list, create, update, patch, delete) over any group/version/resource,
 * building escaped paths and parsing JSON responses on top of kc_client. */
#include "kc_rest.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Safety net against a server handing out continue tokens forever. */
#define KC_LIST_MAX_PAGES 100000

const kc_resource KC_RES_NODES = {"", "v1", "nodes", false};
const kc_resource KC_RES_PODS = {"", "v1", "pods", true};
const kc_resource KC_RES_NAMESPACES = {"", "v1", "namespaces", false};
const kc_resource KC_RES_CONFIGMAPS = {"", "v1", "configmaps", true};
const kc_resource KC_RES_SECRETS = {"", "v1", "secrets", true};
const kc_resource KC_RES_SERVICES = {"", "v1", "services", true};
const kc_resource KC_RES_SERVICEACCOUNTS = {"", "v1", "serviceaccounts", true};
const kc_resource KC_RES_EVENTS = {"", "v1", "events", true};
const kc_resource KC_RES_DAEMONSETS = {"apps", "v1", "daemonsets", true};
const kc_resource KC_RES_DEPLOYMENTS = {"apps", "v1", "deployments", true};
const kc_resource KC_RES_LEASES = {"coordination.k8s.io", "v1", "leases", true};
const kc_resource KC_RES_CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
const kc_resource KC_RES_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies", false};

/* ---- a tiny growable string ---- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Percent-encodes everything but RFC 3986 unreserved characters, so a segment can never add a
 * '/', '?' or '&' of its own. */
static void sb_escape(sbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            sb_add(b, (const char *)p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            sb_add(b, e, 3);
        }
    }
}

static char *sb_take(sbuf *b)
{
    if (b->oom) {
        free(b->s);
        return NULL;
    }
    if (!b->s)
        return strdup("");
    return b->s;
}

/* ---- paths ---- */

char *kc_rest_path(const kc_resource *res, const char *ns, const char *name, const char *sub)
{
    if (!res || !res->version || !res->resource)
        return NULL;
    sbuf b = {0};
    if (!res->group || !res->group[0]) {
        sb_str(&b, "/api/");
    } else {
        sb_str(&b, "/apis/");
        sb_escape(&b, res->group);
        sb_str(&b, "/");
    }
    sb_escape(&b, res->version);
    if (res->namespaced && ns && ns[0]) {
        sb_str(&b, "/namespaces/");
        sb_escape(&b, ns);
    }
    sb_str(&b, "/");
    sb_escape(&b, res->resource);
    if (name && name[0]) {
        sb_str(&b, "/");
        sb_escape(&b, name);
        if (sub && sub[0]) {
            sb_str(&b, "/");
            sb_escape(&b, sub);
        }
    }
    return sb_take(&b);
}

static void sb_param(sbuf *b, const char *key, const char *value)
{
    sb_str(b, strchr(b->s ? b->s : "", '?') ? "&" : "?");
    sb_str(b, key);
    sb_str(b, "=");
    sb_escape(b, value);
}

char *kc_rest_list_query(const char *path, const kc_list_opts *opts, bool watch, bool bookmarks,
                         long timeout_seconds)
{
    if (!path)
        return NULL;
    sbuf b = {0};
    sb_str(&b, path);
    char num[32];
    if (opts) {
        if (opts->label_selector && opts->label_selector[0])
            sb_param(&b, "labelSelector", opts->label_selector);
        if (opts->field_selector && opts->field_selector[0])
            sb_param(&b, "fieldSelector", opts->field_selector);
        if (opts->limit > 0) {
            snprintf(num, sizeof(num), "%ld", opts->limit);
            sb_param(&b, "limit", num);
        }
        if (opts->continue_token && opts->continue_token[0])
            sb_param(&b, "continue", opts->continue_token);
        if (opts->resource_version)
            sb_param(&b, "resourceVersion", opts->resource_version);
        if (opts->resource_version_match && opts->resource_version_match[0])
            sb_param(&b, "resourceVersionMatch", opts->resource_version_match);
    }
    if (watch) {
        sb_param(&b, "watch", "true");
        if (bookmarks)
            sb_param(&b, "allowWatchBookmarks", "true");
        if (timeout_seconds > 0) {
            snprintf(num, sizeof(num), "%ld", timeout_seconds);
            sb_param(&b, "timeoutSeconds", num);
        }
    }
    return sb_take(&b);
}

/* ---- requests ---- */

/* Where a write goes: a blocking client, or a pipe (answered later through cb). */
typedef struct via {
    kc_client *c;
    kc_pipe *p;
    const char *lane;
    kc_pipe_done_cb cb;
    void *ud;
} via;

/* Sends one request and parses a 2xx JSON response into *out (when out is non-NULL); through a
 * pipe it is only handed over. The error message names the method and path. */
static kc_code call_via(const via *v, const char *method, const char *path, const char *ctype,
                        const json_t *body, json_t **out, kc_err *err)
{
    char *data = NULL;
    if (body) {
        data = json_dumps(body, JSON_COMPACT);
        if (!data)
            return kc_err_set(err, KC_EARG, "%s %s: the request body cannot be encoded as JSON",
                              method, path);
    }
    kc_request req = {.method = method,
                      .path = path,
                      .content_type = ctype,
                      .body = data,
                      .body_len = data ? strlen(data) : 0};
    if (v->p) {
        kc_code rc = kc_pipe_submit(v->p, v->lane, &req, v->cb, v->ud, err);
        free(data);
        return rc;
    }
    kc_client *c = v->c;
    kc_response resp;
    kc_code code = kc_client_do(c, &req, &resp, err);
    if (code == KC_OK && out) {
        json_error_t jerr;
        json_t *j = resp.body_len ? json_loadb(resp.body, resp.body_len, 0, &jerr) : NULL;
        if (!j) {
            const char *ct = resp.content_type ? resp.content_type : "none";
            if (!resp.body_len)
                code = kc_err_set(err, KC_EPARSE,
                                  "%s %s: the server answered HTTP %d with an empty body where a "
                                  "JSON object was expected",
                                  method, path, resp.status);
            else
                code = kc_err_set(err, KC_EPARSE,
                                  "%s %s: the server answered HTTP %d with a body that is not JSON "
                                  "(content type %s; line %d column %d: %s)",
                                  method, path, resp.status, ct, jerr.line, jerr.column, jerr.text);
            if (err)
                err->http_status = resp.status;
        } else if (!json_is_object(j)) {
            json_decref(j);
            code = kc_err_set(err, KC_EPARSE,
                              "%s %s: the server answered HTTP %d with JSON that is not an "
                              "object",
                              method, path, resp.status);
        } else {
            *out = j;
        }
    }
    kc_response_free(&resp);
    free(data);
    return code;
}

/* The client or pipe a via names (NULL when neither), for the argument checks. */
static const void *via_target(const via *v)
{
    return v->c ? (const void *)v->c : (const void *)v->p;
}

static kc_code call(kc_client *c, const char *method, const char *path, const char *ctype,
                    const json_t *body, json_t **out, kc_err *err)
{
    return call_via(&(via){.c = c}, method, path, ctype, body, out, err);
}

/* need_ns: the call addresses one object, so a namespaced resource needs its namespace. */
static kc_code check_args(const void *c, const kc_resource *res, const char *ns, bool need_ns,
                          const char *what, kc_err *err)
{
    kc_err_clear(err);
    if (!c || !res || !res->version || !res->resource)
        return kc_err_set(err, KC_EARG, "%s: a client and a resource are required", what);
    if (need_ns && res->namespaced && (!ns || !ns[0]))
        return kc_err_set(err, KC_EARG, "%s %s: a namespace is required", what, res->resource);
    return KC_OK;
}

kc_code kc_get(kc_client *c, const kc_resource *res, const char *ns, const char *name, json_t **out,
               kc_err *err)
{
    if (out)
        *out = NULL;
    kc_code code = check_args(c, res, ns, true, "kc_get", err);
    if (code != KC_OK)
        return code;
    if (!name || !name[0])
        return kc_err_set(err, KC_EARG, "kc_get %s: a name is required", res->resource);
    char *path = kc_rest_path(res, ns, name, NULL);
    if (!path)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    code = call(c, "GET", path, NULL, NULL, out, err);
    free(path);
    return code;
}

kc_code kc_list(kc_client *c, const kc_resource *res, const char *ns, const kc_list_opts *opts,
                json_t **out, kc_err *err)
{
    if (out)
        *out = NULL;
    kc_code code = check_args(c, res, ns, false, "kc_list", err);
    if (code != KC_OK)
        return code;
    char *base = kc_rest_path(res, ns, NULL, NULL);
    char *path = base ? kc_rest_list_query(base, opts, false, false, 0) : NULL;
    free(base);
    if (!path)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    json_t *list = NULL;
    code = call(c, "GET", path, NULL, NULL, &list, err);
    if (code == KC_OK && !json_is_array(json_object_get(list, "items"))) {
        /* A List always has items (possibly empty); anything else is not what we asked for. */
        if (json_object_get(list, "items") && !json_is_null(json_object_get(list, "items"))) {
            code = kc_err_set(err, KC_EPARSE, "GET %s: the response's items is not an array", path);
        } else if (json_object_set_new(list, "items", json_array()) != 0) {
            code = kc_err_set(err, KC_ENOMEM, "out of memory");
        }
    }
    free(path);
    if (code != KC_OK) {
        json_decref(list);
        return code;
    }
    if (out)
        *out = list;
    else
        json_decref(list);
    return KC_OK;
}

kc_code kc_list_all(kc_client *c, const kc_resource *res, const char *ns, const kc_list_opts *opts,
                    json_t **out, kc_err *err)
{
    if (out)
        *out = NULL;
    kc_code code = check_args(c, res, ns, false, "kc_list_all", err);
    if (code != KC_OK)
        return code;
    kc_list_opts o = opts ? *opts : (kc_list_opts){0};
    if (o.limit <= 0)
        o.limit = 500;
    json_t *items = json_array();
    json_t *page = NULL;
    char *cont = NULL;
    if (!items)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    for (int n = 0;; n++) {
        if (n >= KC_LIST_MAX_PAGES) {
            code = kc_err_set(err, KC_EPARSE, "listing %s: more than %d pages; giving up",
                              res->resource, KC_LIST_MAX_PAGES);
            goto fail;
        }
        json_decref(page);
        page = NULL;
        o.continue_token = cont;
        code = kc_list(c, res, ns, &o, &page, err);
        if (code != KC_OK) {
            kc_err_prefix(err, "listing %s (page %d)", res->resource, n + 1);
            goto fail;
        }
        if (json_array_extend(items, json_object_get(page, "items")) != 0) {
            code = kc_err_set(err, KC_ENOMEM, "out of memory collecting list items");
            goto fail;
        }
        const char *next =
            json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
        if (!next || !next[0])
            break;
        if (cont && strcmp(cont, next) == 0) {
            code = kc_err_set(err, KC_EPARSE,
                              "listing %s: the server returned the same continue token twice",
                              res->resource);
            goto fail;
        }
        free(cont);
        if (!(cont = strdup(next))) {
            code = kc_err_set(err, KC_ENOMEM, "out of memory");
            goto fail;
        }
        /* Later pages come from the snapshot the token names; a resourceVersion alongside a
         * continue token is rejected by the API server. */
        o.resource_version = NULL;
        o.resource_version_match = NULL;
    }
    json_t *meta = json_object_get(page, "metadata");
    if (json_is_object(meta))
        json_object_del(meta, "continue");
    if (json_object_set(page, "items", items) != 0) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto fail;
    }
    json_decref(items);
    free(cont);
    if (out)
        *out = page;
    else
        json_decref(page);
    return KC_OK;
fail:
    json_decref(page);
    json_decref(items);
    free(cont);
    return code;
}

/* The name and, for namespaced resources without an explicit ns, the namespace of obj. */
static kc_code obj_target(const kc_resource *res, const char *ns, const json_t *obj,
                          const char *what, bool need_name, const char **name_out,
                          const char **ns_out, kc_err *err)
{
    if (!json_is_object(obj))
        return kc_err_set(err, KC_EARG, "%s %s: the object must be a JSON object", what,
                          res->resource);
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (need_name && (!name || !name[0]))
        return kc_err_set(err, KC_EARG, "%s %s: the object has no metadata.name", what,
                          res->resource);
    if (!ns || !ns[0])
        ns = json_string_value(json_object_get(meta, "namespace"));
    if (res->namespaced && (!ns || !ns[0]))
        return kc_err_set(err, KC_EARG,
                          "%s %s: a namespace is required (argument or metadata.namespace)", what,
                          res->resource);
    *name_out = name;
    *ns_out = ns;
    return KC_OK;
}

static kc_code create_via(const via *v, const kc_resource *res, const char *ns, const json_t *obj,
                          json_t **out, kc_err *err)
{
    if (out)
        *out = NULL;
    const char *name, *target_ns;
    kc_code code = check_args(via_target(v), res, ns, false, "kc_create", err);
    if (code == KC_OK)
        code = obj_target(res, ns, obj, "create", false, &name, &target_ns, err);
    if (code != KC_OK)
        return code;
    char *path = kc_rest_path(res, target_ns, NULL, NULL);
    if (!path)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    code = call_via(v, "POST", path, "application/json", obj, out, err);
    free(path);
    return code;
}

kc_code kc_create(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                  json_t **out, kc_err *err)
{
    return create_via(&(via){.c = c}, res, ns, obj, out, err);
}

kc_code kc_create_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                        const json_t *obj, kc_pipe_done_cb cb, void *ud, kc_err *err)
{
    return create_via(&(via){.p = p, .lane = lane, .cb = cb, .ud = ud}, res, ns, obj, NULL, err);
}

static kc_code put(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                   const char *sub, json_t **out, kc_err *err)
{
    if (out)
        *out = NULL;
    const char *name, *target_ns;
    kc_code code = check_args(c, res, ns, false, sub ? "kc_update_status" : "kc_update", err);
    if (code == KC_OK)
        code = obj_target(res, ns, obj, "update", true, &name, &target_ns, err);
    if (code != KC_OK)
        return code;
    char *path = kc_rest_path(res, target_ns, name, sub);
    if (!path)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    code = call(c, "PUT", path, "application/json", obj, out, err);
    free(path);
    return code;
}

kc_code kc_update(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                  json_t **out, kc_err *err)
{
    return put(c, res, ns, obj, NULL, out, err);
}

kc_code kc_update_status(kc_client *c, const kc_resource *res, const char *ns, const json_t *obj,
                         json_t **out, kc_err *err)
{
    return put(c, res, ns, obj, "status", out, err);
}

static kc_code patch_via(const via *v, const kc_resource *res, const char *ns, const char *name,
                         kc_patch_type type, const json_t *patch, const kc_patch_opts *opts,
                         json_t **out, kc_err *err)
{
    if (out)
        *out = NULL;
    kc_code code = check_args(via_target(v), res, ns, true, "kc_patch", err);
    if (code != KC_OK)
        return code;
    if (!name || !name[0])
        return kc_err_set(err, KC_EARG, "kc_patch %s: a name is required", res->resource);
    const char *ctype;
    switch (type) {
    case KC_PATCH_MERGE:
        ctype = "application/merge-patch+json";
        break;
    case KC_PATCH_JSON:
        ctype = "application/json-patch+json";
        break;
    case KC_PATCH_STRATEGIC:
        ctype = "application/strategic-merge-patch+json";
        break;
    case KC_PATCH_APPLY:
        ctype = "application/apply-patch+yaml";
        break;
    default:
        return kc_err_set(err, KC_EARG, "kc_patch %s/%s: unknown patch type %d", res->resource,
                          name, (int)type);
    }
    if (type == KC_PATCH_JSON ? !json_is_array(patch) : !json_is_object(patch))
        return kc_err_set(err, KC_EARG, "kc_patch %s/%s: a %s patch must be a JSON %s",
                          res->resource, name, ctype, type == KC_PATCH_JSON ? "array" : "object");
    const char *fm = opts ? opts->field_manager : NULL;
    if (type == KC_PATCH_APPLY && (!fm || !fm[0]))
        return kc_err_set(err, KC_EARG, "kc_patch %s/%s: server-side apply needs a field manager",
                          res->resource, name);
    sbuf b = {0};
    char *base = kc_rest_path(res, ns, name, opts ? opts->subresource : NULL);
    if (!base)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    sb_str(&b, base);
    free(base);
    if (fm && fm[0])
        sb_param(&b, "fieldManager", fm);
    if (type == KC_PATCH_APPLY && opts->force)
        sb_param(&b, "force", "true");
    char *path = sb_take(&b);
    if (!path)
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    code = call_via(v, "PATCH", path, ctype, patch, out, err);
    free(path);
    return code;
}

kc_code kc_patch(kc_client *c, const kc_resource *res, const char *ns, const char *name,
                 kc_patch_type type, const json_t *patch, const kc_patch_opts *opts, json_t **out,
                 kc_err *err)
{
    return patch_via(&(via){.c = c}, res, ns, name, type, patch, opts, out, err);
}

kc_code kc_patch_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                       const char *name, kc_patch_type type, const json_t *patch,
                       const kc_patch_opts *opts, kc_pipe_done_cb cb, void *ud, kc_err *err)
{
    return patch_via(&(via){.p = p, .lane = lane, .cb = cb, .ud = ud}, res, ns, name, type, patch,
                     opts, NULL, err);
}

static kc_code delete_via(const via *v, const kc_resource *res, const char *ns, const char *name,
                          kc_propagation prop, const char *precondition_uid, kc_err *err)
{
    kc_code code = check_args(via_target(v), res, ns, true, "kc_delete", err);
    if (code != KC_OK)
        return code;
    if (!name || !name[0])
        return kc_err_set(err, KC_EARG, "kc_delete %s: a name is required", res->resource);
    static const char *const policies[] = {
        [KC_PROPAGATE_BACKGROUND] = "Background",
        [KC_PROPAGATE_FOREGROUND] = "Foreground",
        [KC_PROPAGATE_ORPHAN] = "Orphan",
    };
    if ((int)prop < 0 || prop > KC_PROPAGATE_ORPHAN)
        return kc_err_set(err, KC_EARG, "kc_delete %s/%s: unknown propagation %d", res->resource,
                          name, (int)prop);
    json_t *opts = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
    if (!opts)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    if ((prop != KC_PROPAGATE_DEFAULT &&
         json_object_set_new(opts, "propagationPolicy", json_string(policies[prop])) != 0) ||
        (precondition_uid &&
         json_object_set_new(opts, "preconditions", json_pack("{s:s}", "uid", precondition_uid)) !=
             0)) {
        json_decref(opts);
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    char *path = kc_rest_path(res, ns, name, NULL);
    if (!path) {
        json_decref(opts);
        return kc_err_set(err, KC_ENOMEM, "out of memory building a path");
    }
    /* The response (the object being deleted, or a Status) is not needed. */
    code = call_via(v, "DELETE", path, "application/json", opts, NULL, err);
    json_decref(opts);
    free(path);
    return code;
}

kc_code kc_delete(kc_client *c, const kc_resource *res, const char *ns, const char *name,
                  kc_propagation prop, const char *precondition_uid, kc_err *err)
{
    return delete_via(&(via){.c = c}, res, ns, name, prop, precondition_uid, err);
}

kc_code kc_delete_async(kc_pipe *p, const char *lane, const kc_resource *res, const char *ns,
                        const char *name, kc_propagation prop, const char *precondition_uid,
                        kc_pipe_done_cb cb, void *ud, kc_err *err)
{
    return delete_via(&(via){.p = p, .lane = lane, .cb = cb, .ud = ud}, res, ns, name, prop,
                      precondition_uid, err);
}
