/* ks_discovery: the API server's self-description: /version, legacy discovery (/api, /apis,
 * /api/v1, /apis/G[/V]), aggregated discovery (apidiscovery.k8s.io v2 and v2beta1), and a
 * minimal OpenAPI v3 (index and per group-version documents) that kubectl and helm accept. */
#include "ks_server_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The API server's group order; groups not listed (CRDs) follow alphabetically. */
static const char *const GROUP_ORDER[] = {"",
                                          "apiregistration.k8s.io",
                                          "apps",
                                          "events.k8s.io",
                                          "authentication.k8s.io",
                                          "authorization.k8s.io",
                                          "autoscaling",
                                          "batch",
                                          "certificates.k8s.io",
                                          "networking.k8s.io",
                                          "policy",
                                          "rbac.authorization.k8s.io",
                                          "storage.k8s.io",
                                          "admissionregistration.k8s.io",
                                          "apiextensions.k8s.io",
                                          "scheduling.k8s.io",
                                          "coordination.k8s.io",
                                          "node.k8s.io",
                                          "discovery.k8s.io",
                                          "flowcontrol.apiserver.k8s.io",
                                          NULL};

static int group_rank(const char *g)
{
    for (int i = 0; GROUP_ORDER[i]; i++)
        if (strcmp(GROUP_ORDER[i], g) == 0)
            return i;
    return 1000;
}

/* "v1" → (3, 1, 0); "v2beta1" → (2, 2, 1); "v1alpha2" → (1, 1, 2); other → (0, 0, 0). */
static void version_key(const char *v, int *stage, long *major, long *minor)
{
    *stage = 0, *major = 0, *minor = 0;
    if (v[0] != 'v' || !isdigit((unsigned char)v[1]))
        return;
    char *end = NULL;
    long maj = strtol(v + 1, &end, 10);
    if (!*end) {
        *stage = 3, *major = maj;
        return;
    }
    int st = !strncmp(end, "beta", 4) ? 2 : !strncmp(end, "alpha", 5) ? 1 : 0;
    if (!st)
        return;
    const char *num = end + (st == 2 ? 4 : 5);
    if (!isdigit((unsigned char)*num))
        return;
    char *e2 = NULL;
    long min = strtol(num, &e2, 10);
    if (*e2)
        return;
    *stage = st, *major = maj, *minor = min;
}

int ks_version_cmp(const char *a, const char *b)
{
    int sa, sb;
    long ma, mb, na, nb;
    version_key(a, &sa, &ma, &na);
    version_key(b, &sb, &mb, &nb);
    if (sa != sb)
        return sb - sa;
    if (sa == 0)
        return strcmp(a, b);
    if (ma != mb)
        return mb > ma ? 1 : -1;
    if (na != nb)
        return nb > na ? 1 : -1;
    return 0;
}

static int type_cmp(const void *pa, const void *pb)
{
    const ks_rtype *a = *(const ks_rtype *const *)pa, *b = *(const ks_rtype *const *)pb;
    int ra = group_rank(a->group), rb = group_rank(b->group);
    if (ra != rb)
        return ra - rb;
    int c = strcmp(a->group, b->group);
    if (c)
        return c;
    if ((c = ks_version_cmp(a->version, b->version)))
        return c;
    return strcmp(a->resource, b->resource);
}

/* The served types, sorted by group rank, version priority, resource. */
static size_t sorted_types(ks_req *r, const ks_rtype ***out)
{
    size_t n = ks_store_types(r->sim->store, out);
    if (n && *out)
        qsort(*out, n, sizeof(**out), type_cmp);
    return *out ? n : 0;
}

json_t *ks_discovery_verbs(const ks_rtype *t)
{
    bool ns_type = !t->group[0] && !strcmp(t->resource, "namespaces");
    if (ns_type)
        return json_pack("[s,s,s,s,s,s,s]", "create", "delete", "get", "list", "patch", "update",
                         "watch");
    return json_pack("[s,s,s,s,s,s,s,s]", "create", "delete", "deletecollection", "get", "list",
                     "patch", "update", "watch");
}

static json_t *str_array(const char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* A subresource: name, the kind it answers with (group/version NULL: the type's), verbs. */
typedef struct subres {
    const char *name, *group, *version, *kind;
    const char *verbs[4];
} subres;

static size_t subresources_of(const ks_rtype *t, subres out[6])
{
    size_t n = 0;
    bool core = !t->group[0];
    if (t->has_status)
        out[n++] = (subres){"status", NULL, NULL, t->kind, {"get", "patch", "update", NULL}};
    if (t->has_scale)
        out[n++] =
            (subres){"scale", "autoscaling", "v1", "Scale", {"get", "patch", "update", NULL}};
    if (core && !strcmp(t->resource, "pods")) {
        out[n++] = (subres){"log", NULL, NULL, "Pod", {"get", NULL}};
        out[n++] = (subres){"eviction", "policy", "v1", "Eviction", {"create", NULL}};
        out[n++] = (subres){"binding", NULL, NULL, "Binding", {"create", NULL}};
    }
    if (core && !strcmp(t->resource, "namespaces"))
        out[n++] = (subres){"finalize", NULL, NULL, "Namespace", {"update", NULL}};
    if (core && !strcmp(t->resource, "serviceaccounts"))
        out[n++] =
            (subres){"token", "authentication.k8s.io", "v1", "TokenRequest", {"create", NULL}};
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * legacy discovery
 */

static json_t *api_resource_list(const ks_rtype *const *types, size_t n, const char *group,
                                 const char *version)
{
    char gv[256];
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++) {
        const ks_rtype *t = types[i];
        if (strcmp(t->group, group) != 0 || strcmp(t->version, version) != 0)
            continue;
        json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", t->resource, "singularName",
                              t->singular ? t->singular : "", "namespaced", t->namespaced, "kind",
                              t->kind, "verbs", ks_discovery_verbs(t));
        if (t->short_names && t->short_names[0])
            json_object_set_new(e, "shortNames", str_array(t->short_names));
        if (t->categories && t->categories[0])
            json_object_set_new(e, "categories", str_array(t->categories));
        json_array_append_new(res, e);
        subres subs[6];
        size_t ns = subresources_of(t, subs);
        for (size_t k = 0; k < ns; k++) {
            char name[300];
            snprintf(name, sizeof(name), "%s/%s", t->resource, subs[k].name);
            json_t *s = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", name, "singularName", "",
                                  "namespaced", t->namespaced, "kind", subs[k].kind, "verbs",
                                  str_array(subs[k].verbs));
            if (subs[k].group) {
                json_object_set_new(s, "group", json_string(subs[k].group));
                json_object_set_new(s, "version", json_string(subs[k].version));
            }
            json_array_append_new(res, s);
        }
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", ks_group_version(gv, sizeof(gv), group, version), "resources",
                     res);
}

/* The distinct versions of group, in priority order (new array of strings). */
static json_t *group_versions(const ks_rtype *const *types, size_t n, const char *group)
{
    json_t *vs = json_array();
    for (size_t i = 0; i < n; i++) {
        if (strcmp(types[i]->group, group) != 0)
            continue;
        size_t k;
        json_t *v;
        bool seen = false;
        json_array_foreach(vs, k, v)
        {
            seen = seen || !strcmp(json_string_value(v), types[i]->version);
        }
        if (!seen)
            json_array_append_new(vs, json_string(types[i]->version));
    }
    return vs; /* types are sorted, so versions come in priority order */
}

static json_t *api_group(const ks_rtype *const *types, size_t n, const char *group)
{
    json_t *vs = group_versions(types, n, group);
    json_t *versions = json_array();
    size_t k;
    json_t *v;
    char gv[256];
    json_array_foreach(vs, k, v)
    {
        json_array_append_new(
            versions, json_pack("{s:s, s:s}", "groupVersion",
                                ks_group_version(gv, sizeof(gv), group, json_string_value(v)),
                                "version", json_string_value(v)));
    }
    json_decref(vs);
    json_t *g = json_pack("{s:s, s:o}", "name", group, "versions", versions);
    json_t *pref = json_array_get(versions, 0);
    if (pref)
        json_object_set(g, "preferredVersion", pref);
    return g;
}

static json_t *api_group_list(const ks_rtype *const *types, size_t n)
{
    json_t *groups = json_array();
    for (size_t i = 0; i < n; i++) {
        const char *g = types[i]->group;
        if (!g[0] || (i > 0 && !strcmp(types[i - 1]->group, g)))
            continue;
        json_array_append_new(groups, api_group(types, n, g));
    }
    return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
                     groups);
}

/* ---------------------------------------------------------------------------------------------
 * aggregated discovery
 */

static json_t *gvk(const char *g, const char *v, const char *k)
{
    return json_pack("{s:s, s:s, s:s}", "group", g, "version", v, "kind", k);
}

static json_t *agg_resource(const ks_rtype *t)
{
    json_t *e = json_pack("{s:s, s:o, s:s, s:s, s:o}", "resource", t->resource, "responseKind",
                          gvk(t->group, t->version, t->kind), "scope",
                          t->namespaced ? "Namespaced" : "Cluster", "singularResource",
                          t->singular ? t->singular : "", "verbs", ks_discovery_verbs(t));
    if (t->short_names && t->short_names[0])
        json_object_set_new(e, "shortNames", str_array(t->short_names));
    if (t->categories && t->categories[0])
        json_object_set_new(e, "categories", str_array(t->categories));
    subres subs[6];
    size_t ns = subresources_of(t, subs);
    if (ns) {
        json_t *arr = json_array();
        for (size_t k = 0; k < ns; k++)
            json_array_append_new(
                arr, json_pack("{s:s, s:o, s:o}", "subresource", subs[k].name, "responseKind",
                               gvk(subs[k].group ? subs[k].group : t->group,
                                   subs[k].version ? subs[k].version : t->version, subs[k].kind),
                               "verbs", str_array(subs[k].verbs)));
        json_object_set_new(e, "subresources", arr);
    }
    return e;
}

static json_t *agg_group(const ks_rtype *const *types, size_t n, const char *group)
{
    json_t *meta = json_pack("{s:n}", "creationTimestamp");
    if (group[0])
        json_object_set_new(meta, "name", json_string(group));
    json_t *vs = group_versions(types, n, group);
    json_t *versions = json_array();
    size_t k;
    json_t *v;
    json_array_foreach(vs, k, v)
    {
        json_t *res = json_array();
        for (size_t i = 0; i < n; i++)
            if (!strcmp(types[i]->group, group) && !strcmp(types[i]->version, json_string_value(v)))
                json_array_append_new(res, agg_resource(types[i]));
        json_array_append_new(versions, json_pack("{s:O, s:o, s:s}", "version", v, "resources", res,
                                                  "freshness", "Current"));
    }
    json_decref(vs);
    return json_pack("{s:o, s:o}", "metadata", meta, "versions", versions);
}

static json_t *agg_list(const ks_rtype *const *types, size_t n, bool core, const char *ver)
{
    json_t *items = json_array();
    if (core) {
        json_array_append_new(items, agg_group(types, n, ""));
    } else {
        for (size_t i = 0; i < n; i++) {
            const char *g = types[i]->group;
            if (!g[0] || (i > 0 && !strcmp(types[i - 1]->group, g)))
                continue;
            json_array_append_new(items, agg_group(types, n, g));
        }
    }
    char av[64];
    snprintf(av, sizeof(av), "apidiscovery.k8s.io/%s", ver);
    return json_pack("{s:s, s:s, s:{}, s:o}", "kind", "APIGroupDiscoveryList", "apiVersion", av,
                     "metadata", "items", items);
}

/* Discovery replies carry an ETag keyed on the set of served types (kubectl revalidates). */
static enum MHD_Result reply_discovery(ks_req *r, json_t *body, const char *ctype)
{
    char etag[64];
    snprintf(etag, sizeof(etag), "\"%s%llx\"", r->srv->nonce,
             (unsigned long long)ks_store_types_generation(r->sim->store));
    const char *inm = ks_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    struct MHD_Response *resp;
    unsigned status = 200;
    if (inm && strstr(inm, etag)) {
        json_decref(body);
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        status = 304;
    } else {
        char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!s)
            return ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
        resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
            free(s);
            return MHD_NO;
        }
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept");
    return ks_reply(r, status, resp);
}

/* ---------------------------------------------------------------------------------------------
 * OpenAPI v3
 */

static const char *gv_path(char *buf, size_t size, const char *group, const char *version)
{
    if (group[0])
        snprintf(buf, size, "apis/%s/%s", group, version);
    else
        snprintf(buf, size, "api/%s", version);
    return buf;
}

static json_t *openapi_index(ks_req *r, const ks_rtype *const *types, size_t n)
{
    json_t *paths = json_object();
    char hash[64], p[300], url[400];
    snprintf(hash, sizeof(hash), "%s%016llX", r->srv->nonce,
             (unsigned long long)ks_store_types_generation(r->sim->store));
    for (char *c = hash; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    for (size_t i = 0; i < n; i++) {
        gv_path(p, sizeof(p), types[i]->group, types[i]->version);
        snprintf(url, sizeof(url), "/openapi/v3/%s?hash=%s", p, hash);
        json_object_set_new(paths, p, json_pack("{s:s}", "serverRelativeURL", url));
    }
    return json_pack("{s:o}", "paths", paths);
}

static void schema_name(char *buf, size_t size, const ks_rtype *t)
{
    if (!t->crd_name) {
        char first[64];
        size_t n = t->group[0] ? strcspn(t->group, ".") : 4;
        snprintf(first, sizeof(first), "%.*s", (int)(n < 63 ? n : 63),
                 t->group[0] ? t->group : "core");
        snprintf(buf, size, "io.k8s.api.%s.%s.%s", first, t->version, t->kind);
        return;
    }
    /* CRDs: the reversed group ("nvidia.com" → "com.nvidia"). */
    size_t len = 0;
    buf[0] = '\0';
    const char *g = t->group, *end = g + strlen(g);
    while (end > g) {
        const char *dot = end;
        while (dot > g && dot[-1] != '.')
            dot--;
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%.*s.", (int)(end - dot),
                                dot);
        end = dot > g ? dot - 1 : g;
    }
    snprintf(buf + (len < size ? len : size - 1), len < size ? size - len : 1, "%s.%s", t->version,
             t->kind);
}

static json_t *query_param(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:b}}", "name", name, "in", "query", "schema", "type",
                     "string", "uniqueItems", true);
}

static json_t *operation(const ks_rtype *t, const char *action, const char *ref, bool writes)
{
    json_t *params = json_array();
    if (writes) {
        json_array_append_new(params, query_param("dryRun"));
        json_array_append_new(params, query_param("fieldManager"));
        json_array_append_new(params, query_param("fieldValidation"));
    }
    char op[300];
    snprintf(op, sizeof(op), "%s%s", action, t->kind);
    /* No requestBody on patch: kubectl then builds strategic merge patches from its own types
     * (and merge patches for custom resources) rather than from this schema-less document. */
    return json_pack("{s:s, s:s, s:o, s:o, s:{s:{s:s, s:{s:{s:{s:s}}}}}}", "operationId", op,
                     "x-kubernetes-action", action, "x-kubernetes-group-version-kind",
                     gvk(t->group, t->version, t->kind), "parameters", params, "responses", "200",
                     "description", "OK", "content", "application/json", "schema", "$ref", ref);
}

static json_t *openapi_doc(const ks_rtype *const *types, size_t n, const char *group,
                           const char *version)
{
    json_t *paths = json_object(), *schemas = json_object();
    char gvp[300], item[600], coll[600], sname[300], ref[400];
    gv_path(gvp, sizeof(gvp), group, version);
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        const ks_rtype *t = types[i];
        if (strcmp(t->group, group) != 0 || strcmp(t->version, version) != 0)
            continue;
        found++;
        schema_name(sname, sizeof(sname), t);
        snprintf(ref, sizeof(ref), "#/components/schemas/%s", sname);
        json_object_set_new(schemas, sname,
                            json_pack("{s:s, s:[o], s:b}", "type", "object",
                                      "x-kubernetes-group-version-kind",
                                      gvk(t->group, t->version, t->kind),
                                      "x-kubernetes-preserve-unknown-fields", true));
        if (t->namespaced)
            snprintf(coll, sizeof(coll), "/%s/namespaces/{namespace}/%s", gvp, t->resource);
        else
            snprintf(coll, sizeof(coll), "/%s/%s", gvp, t->resource);
        snprintf(item, sizeof(item), "%s/{name}", coll);
        json_object_set_new(paths, coll,
                            json_pack("{s:o, s:o}", "get", operation(t, "list", ref, false), "post",
                                      operation(t, "post", ref, true)));
        json_object_set_new(
            paths, item,
            json_pack("{s:o, s:o, s:o, s:o}", "get", operation(t, "get", ref, false), "put",
                      operation(t, "put", ref, true), "patch", operation(t, "patch", ref, true),
                      "delete", operation(t, "delete", ref, false)));
    }
    if (!found) {
        json_decref(paths);
        json_decref(schemas);
        return NULL;
    }
    return json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:o}}", "openapi", "3.0.0", "info", "title",
                     "Kubernetes", "version", "v1.32.0", "paths", paths, "components", "schemas",
                     schemas);
}

/* ---------------------------------------------------------------------------------------------
 * dispatch
 */

/* A plain release version: a pre-release suffix would make helm refuse charts whose kubeVersion
 * constraint (">=1.20.0") has no "-0". */
static enum MHD_Result reply_version(ks_req *r)
{
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1", "minor", "32",
                  "gitVersion", "v1.32.0", "gitCommit", "0000000000000000000000000000000000000000",
                  "gitTreeState", "clean", "buildDate", "2025-01-01T00:00:00Z", "goVersion",
                  "go1.23.4", "compiler", "gc", "platform", "linux/amd64");
    return ks_reply_json(r, 200, v, NULL);
}

static enum MHD_Result reply_api_versions(ks_req *r)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", r->port);
    json_t *v =
        json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions", "versions", "v1",
                  "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0", "serverAddress", addr);
    return ks_reply_json(r, 200, v, NULL);
}

static enum MHD_Result not_found(ks_req *r)
{
    return ks_reply_status(r, 404, "NotFound", "the server could not find the requested resource",
                           json_object());
}

enum MHD_Result ks_handle_discovery(ks_req *r, bool *handled)
{
    *handled = false;
    bool get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    const char **s = r->seg;
    int n = r->nseg;
    if (!get || n < 1 || n > 6)
        return MHD_NO;
    bool api = !strcmp(s[0], "api"), apis = !strcmp(s[0], "apis");
    bool openapi = n >= 2 && !strcmp(s[0], "openapi") && !strcmp(s[1], "v3");
    bool version = n == 1 && !strcmp(s[0], "version");
    if (!(version || openapi || (api && n <= 2) || (apis && n <= 3)))
        return MHD_NO;
    *handled = true;
    if (version)
        return reply_version(r);
    const ks_rtype **types = NULL;
    size_t nt = sorted_types(r, &types);
    enum MHD_Result ret;
    const char *ver = "v2";
    ks_as as = ks_accept_parse(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), KS_ACCEPT_DISCOVERY, &ver);
    bool agg = as == KS_AS_DISCOVERY_V2 || as == KS_AS_DISCOVERY_V2BETA1;
    char ct[128];
    snprintf(ct, sizeof(ct), "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList",
             ver);
    json_t *doc = NULL;
    if (openapi) {
        if (n == 2)
            doc = openapi_index(r, types, nt);
        else if (n == 4 && !strcmp(s[2], "api"))
            doc = openapi_doc(types, nt, "", s[3]);
        else if (n == 5 && !strcmp(s[2], "apis"))
            doc = openapi_doc(types, nt, s[3], s[4]);
        ret = doc ? ks_reply_json(r, 200, doc, NULL) : not_found(r);
    } else if (api && n == 1) {
        ret = agg ? reply_discovery(r, agg_list(types, nt, true, ver), ct) : reply_api_versions(r);
    } else if (apis && n == 1) {
        ret = agg ? reply_discovery(r, agg_list(types, nt, false, ver), ct)
                  : reply_discovery(r, api_group_list(types, nt), "application/json");
    } else {
        const char *group = api ? "" : s[1];
        const char *v = api ? s[1] : (n == 3 ? s[2] : NULL);
        bool any = false;
        for (size_t i = 0; i < nt && !any; i++)
            any = !strcmp(types[i]->group, group) && (!v || !strcmp(types[i]->version, v));
        if (!any)
            ret = not_found(r);
        else if (!v) {
            json_t *g = api_group(types, nt, group);
            json_object_set_new(g, "kind", json_string("APIGroup"));
            json_object_set_new(g, "apiVersion", json_string("v1"));
            ret = ks_reply_json(r, 200, g, NULL);
        } else
            ret = reply_discovery(r, api_resource_list(types, nt, group, v), "application/json");
    }
    free(types);
    return ret;
}
