/* Tests of kubesim's discovery (legacy and aggregated), OpenAPI v3 and Table rendering, plus the
 * pure helpers behind them (Accept parsing, JSONPath, HumanDuration, computed cells). */
#include "ks_api_test.h"
#include "ks_table_int.h"

TestSuite(disc, .init = ka_start, .fini = ka_stop, .timeout = 60);

static json_t *find_by(json_t *arr, const char *key, const char *val)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && !strcmp(v, val))
            return e;
    }
    return NULL;
}

Test(disc, legacy_discovery_shapes)
{
    ka_resp r = ka_http("GET", "/api", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    json_t *j = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "APIVersions");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "versions"), 0)), "v1");
    json_t *sa = json_array_get(json_object_get(j, "serverAddressByClientCIDRs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(sa, "clientCIDR")), "0.0.0.0/0");
    cr_assert(strstr(ka.sim.server_url, json_string_value(json_object_get(sa, "serverAddress"))));
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", "/apis", NULL, NULL, NULL);
    j = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "APIGroupList");
    json_t *apps = find_by(json_object_get(j, "groups"), "name", "apps");
    cr_assert_not_null(apps);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(apps, "preferredVersion"),
                                                       "groupVersion")),
                     "apps/v1");
    cr_assert_not_null(find_by(json_object_get(j, "groups"), "name", "example.com"));
    cr_assert_null(find_by(json_object_get(j, "groups"), "name", ""));
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", "/api/v1", NULL, NULL, NULL);
    j = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "APIResourceList");
    cr_assert_str_eq(json_string_value(json_object_get(j, "groupVersion")), "v1");
    json_t *res = json_object_get(j, "resources");
    json_t *pods = find_by(res, "name", "pods");
    cr_assert_not_null(pods);
    cr_assert_str_eq(json_string_value(json_object_get(pods, "kind")), "Pod");
    cr_assert(json_is_true(json_object_get(pods, "namespaced")));
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(pods, "shortNames"), 0)),
                     "po");
    cr_assert_eq(json_array_size(json_object_get(pods, "verbs")), 8);
    cr_assert_not_null(find_by(res, "name", "pods/status"));
    cr_assert_not_null(find_by(res, "name", "pods/log"));
    json_t *ev = find_by(res, "name", "pods/eviction");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "group")), "policy");
    json_t *ns = find_by(res, "name", "namespaces");
    cr_assert(json_is_false(json_object_get(ns, "namespaced")));
    cr_assert_eq(json_array_size(json_object_get(ns, "verbs")), 7);
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", "/apis/apps/v1", NULL, NULL, NULL);
    j = ka_json(&r);
    json_t *scale = find_by(json_object_get(j, "resources"), "name", "deployments/scale");
    cr_assert_not_null(scale);
    cr_assert_str_eq(json_string_value(json_object_get(scale, "kind")), "Scale");
    cr_assert_str_eq(json_string_value(json_object_get(scale, "group")), "autoscaling");
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", "/apis/apps", NULL, NULL, NULL);
    j = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "APIGroup");
    json_decref(j);
    ka_resp_free(&r);
    r = ka_http("GET", "/apis/nonexistent.io/v1", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
}

static const char AGG[] = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                          "application/json;g=apidiscovery.k8s.io;v=v2beta1;as="
                          "APIGroupDiscoveryList,application/json";

Test(disc, aggregated_discovery_shapes_and_etag)
{
    ka_resp r = ka_http("GET", "/apis", NULL, AGG, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.ctype,
                     "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    cr_assert(r.etag[0]);
    json_t *j = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "APIGroupDiscoveryList");
    cr_assert_str_eq(json_string_value(json_object_get(j, "apiVersion")), "apidiscovery.k8s.io/v2");
    json_t *apps = NULL;
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(j, "items"), i, it)
    {
        const char *n = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        if (n && !strcmp(n, "apps"))
            apps = it;
    }
    cr_assert_not_null(apps);
    json_t *v1 = json_array_get(json_object_get(apps, "versions"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(v1, "version")), "v1");
    cr_assert_str_eq(json_string_value(json_object_get(v1, "freshness")), "Current");
    json_t *dep = find_by(json_object_get(v1, "resources"), "resource", "deployments");
    cr_assert_not_null(dep);
    cr_assert_str_eq(json_string_value(json_object_get(dep, "scope")), "Namespaced");
    cr_assert_str_eq(json_string_value(json_object_get(dep, "singularResource")), "deployment");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(dep, "responseKind"), "kind")),
        "Deployment");
    json_t *subs = json_object_get(dep, "subresources");
    json_t *sc = find_by(subs, "subresource", "scale");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(sc, "responseKind"), "group")),
        "autoscaling");
    cr_assert_not_null(find_by(subs, "subresource", "status"));
    json_decref(j);

    /* Revalidation with the ETag: 304 until the set of types changes. */
    char inm[200];
    snprintf(inm, sizeof(inm), "If-None-Match: %s", r.etag);
    char ac[400];
    snprintf(ac, sizeof(ac), "Accept: %s", AGG);
    const char *hs[] = {inm, ac, NULL};
    ka_resp r2 = ka_http_ex("GET", ka.sim.server_url, "/apis", ka.token, hs, NULL, 0);
    cr_assert_eq(r2.status, 304);
    ka_resp_free(&r2);
    ks_rtype g = {.group = "late.io",
                  .version = "v1",
                  .resource = "gadgets",
                  .kind = "Gadget",
                  .singular = "gadget",
                  .namespaced = false,
                  .crd_name = "gadgets.late.io"};
    cr_assert_not_null(ks_store_register(ka.sim.store, &g));
    r2 = ka_http_ex("GET", ka.sim.server_url, "/apis", ka.token, hs, NULL, 0);
    cr_assert_eq(r2.status, 200);
    cr_assert(strstr(r2.body, "\"late.io\""));
    cr_assert(strcmp(r2.etag, r.etag) != 0);
    ka_resp_free(&r2);
    ka_resp_free(&r);

    r = ka_http("GET", "/api", NULL,
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", NULL);
    cr_assert_str_eq(r.ctype,
                     "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList");
    j = ka_json(&r);
    json_t *core = json_array_get(json_object_get(j, "items"), 0);
    cr_assert_null(json_object_get(json_object_get(core, "metadata"), "name"));
    json_t *res =
        json_object_get(json_array_get(json_object_get(core, "versions"), 0), "resources");
    json_t *nodes = find_by(res, "resource", "nodes");
    cr_assert_str_eq(json_string_value(json_object_get(nodes, "scope")), "Cluster");
    json_decref(j);
    ka_resp_free(&r);
}

Test(disc, openapi_v3_index_and_documents)
{
    ka_resp r = ka_http("GET", "/openapi/v3", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    json_t *j = ka_json(&r);
    json_t *paths = json_object_get(j, "paths");
    const char *u = json_string_value(
        json_object_get(json_object_get(paths, "apis/apps/v1"), "serverRelativeURL"));
    cr_assert(u && !strncmp(u, "/openapi/v3/apis/apps/v1?hash=", 30), "%s", u ? u : "(null)");
    cr_assert_not_null(json_object_get(paths, "api/v1"));
    cr_assert_not_null(json_object_get(paths, "apis/example.com/v1"));
    char url[300];
    snprintf(url, sizeof(url), "%s", u);
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", url, NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    j = ka_json(&r);
    json_t *p = json_object_get(json_object_get(j, "paths"),
                                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}");
    json_t *patch = json_object_get(p, "patch");
    cr_assert_not_null(patch);
    json_t *gvk = json_object_get(patch, "x-kubernetes-group-version-kind");
    cr_assert_str_eq(json_string_value(json_object_get(gvk, "kind")), "Deployment");
    cr_assert_not_null(find_by(json_object_get(patch, "parameters"), "name", "fieldValidation"));
    json_t *schema = json_object_get(json_object_get(json_object_get(j, "components"), "schemas"),
                                     "io.k8s.api.apps.v1.Deployment");
    cr_assert_not_null(schema);
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_array_get(json_object_get(schema, "x-kubernetes-group-version-kind"), 0),
            "group")),
        "apps");
    json_decref(j);
    ka_resp_free(&r);

    r = ka_http("GET", "/openapi/v3/apis/example.com/v1", NULL, NULL, NULL);
    j = ka_json(&r);
    cr_assert_not_null(json_object_get(json_object_get(json_object_get(j, "components"), "schemas"),
                                       "com.example.v1.Widget"));
    json_decref(j);
    ka_resp_free(&r);
    r = ka_http("GET", "/openapi/v3/apis/nope.io/v1", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
}

static const char TABLE[] = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as="
                            "Table;v=v1beta1;g=meta.k8s.io,application/json";

Test(disc, tables_for_lists_and_objects)
{
    json_t *p =
        json_pack("{s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "metadata", "name", "tp", "labels",
                  "app", "x", "spec", "containers", "name", "c", "image", "busybox");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_PODS, "default", p, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(p);
    ka_resp r = ka_http("GET", "/api/v1/namespaces/default/pods?limit=500", NULL, TABLE, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.ctype, "application/json;as=Table;v=v1;g=meta.k8s.io");
    json_t *t = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(t, "kind")), "Table");
    json_t *cols = json_object_get(t, "columnDefinitions");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 0), "name")), "Name");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 0), "format")), "name");
    cr_assert_null(json_object_get(json_array_get(cols, 0), "jsonPath"));
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cols, 1), "name")), "Ready");
    json_t *row = json_array_get(json_object_get(t, "rows"), 0);
    json_t *cells = json_object_get(row, "cells");
    cr_assert_str_eq(json_string_value(json_array_get(cells, 0)), "tp");
    cr_assert_str_eq(json_string_value(json_array_get(cells, 1)), "0/1");
    cr_assert_eq(json_array_size(cells), json_array_size(cols));
    json_t *obj = json_object_get(row, "object");
    cr_assert_str_eq(json_string_value(json_object_get(obj, "kind")), "PartialObjectMetadata");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(obj, "metadata"), "labels"), "app")),
                     "x");
    cr_assert_not_null(json_object_get(json_object_get(t, "metadata"), "resourceVersion"));
    json_decref(t);
    ka_resp_free(&r);

    r = ka_http("GET", "/api/v1/namespaces/default/pods/tp?includeObject=None", NULL, TABLE, NULL);
    t = ka_json(&r);
    row = json_array_get(json_object_get(t, "rows"), 0);
    cr_assert_null(json_object_get(row, "object"));
    json_decref(t);
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default/pods/tp?includeObject=Object", NULL, TABLE,
                NULL);
    t = ka_json(&r);
    row = json_array_get(json_object_get(t, "rows"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(row, "object"), "kind")),
                     "Pod");
    json_decref(t);
    ka_resp_free(&r);

    /* A custom resource's printer columns. */
    json_t *w = json_pack("{s:{s:s}, s:{s:i}}", "metadata", "name", "w", "spec", "size", 7);
    cr_assert_eq(kc_create(ka.c, &KA_WIDGETS, "default", w, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(w);
    r = ka_http("GET", "/apis/example.com/v1/namespaces/default/widgets", NULL, TABLE, NULL);
    t = ka_json(&r);
    cells = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "cells");
    cr_assert_eq(json_integer_value(json_array_get(cells, 1)), 7);
    const char *age = json_string_value(json_array_get(cells, 2));
    cr_assert(age && age[strlen(age) - 1] == 's', "%s", age ? age : "(null)");
    json_decref(t);
    ka_resp_free(&r);

    /* Protobuf first: answered in protobuf (test_ks_api_proto.c has the details). */
    r = ka_http("GET", "/api/v1/namespaces/default/pods/tp", NULL,
                "application/vnd.kubernetes.protobuf,application/json", NULL);
    cr_assert_str_eq(r.ctype, "application/vnd.kubernetes.protobuf");
    ka_resp_free(&r);
    /* PartialObjectMetadataList. */
    r = ka_http("GET", "/api/v1/namespaces/default/pods", NULL,
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", NULL);
    t = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(t, "kind")), "PartialObjectMetadataList");
    cr_assert_eq(json_array_size(json_object_get(t, "items")), 1);
    json_decref(t);
    ka_resp_free(&r);
}

/* ---- pure helpers ---- */

Test(helpers, accept_header_parsing)
{
    const char *v = NULL;
    cr_assert_eq(ks_accept_parse(NULL, KS_ACCEPT_OBJECTS, &v), KS_AS_JSON);
    cr_assert_eq(ks_accept_parse(TABLE, KS_ACCEPT_OBJECTS, &v), KS_AS_TABLE);
    cr_assert_str_eq(v, "v1");
    cr_assert_eq(
        ks_accept_parse("application/json;as=Table;v=v1beta1;g=meta.k8s.io", KS_ACCEPT_OBJECTS, &v),
        KS_AS_TABLE);
    cr_assert_str_eq(v, "v1beta1");
    /* Table not allowed here (discovery): the JSON fallback. */
    cr_assert_eq(ks_accept_parse(TABLE, KS_ACCEPT_DISCOVERY, &v), KS_AS_JSON);
    cr_assert_eq(ks_accept_parse("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
                                 "application/json",
                                 KS_ACCEPT_OBJECTS, &v),
                 KS_AS_JSON);
    cr_assert_eq(ks_accept_parse(AGG, KS_ACCEPT_DISCOVERY, &v), KS_AS_DISCOVERY_V2);
    cr_assert_eq(ks_accept_parse(" application/json ; as=Table ; g=meta.k8s.io ; v=v1",
                                 KS_ACCEPT_OBJECTS, &v),
                 KS_AS_TABLE);
    cr_assert_eq(
        ks_accept_parse("application/json;as=Table;v=v9;g=meta.k8s.io", KS_ACCEPT_OBJECTS, &v),
        KS_AS_JSON);
}

static const char *first_str(const json_t *obj, const char *path)
{
    static char buf[256];
    json_t *r = ks_jsonpath_eval(obj, path);
    cr_assert_not_null(r, "path %s", path);
    const char *s = json_string_value(json_array_get(r, 0));
    snprintf(buf, sizeof(buf), "%s", s ? s : "(none)");
    json_decref(r);
    return buf;
}

Test(helpers, jsonpath_evaluation)
{
    json_t *o =
        json_loads("{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"op\",\"x\":\"y\"}},"
                   "\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"i1\"},{\"name\":\"b\","
                   "\"image\":\"i2\"}]},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
                   "\"True\"},{\"type\":\"Other\",\"status\":\"False\"}],\"n\":3}}",
                   0, NULL);
    cr_assert_str_eq(first_str(o, ".metadata.labels.x"), "y");
    cr_assert_str_eq(first_str(o, ".metadata.labels.app\\.kubernetes\\.io/name"), "op");
    cr_assert_str_eq(first_str(o, ".metadata.labels['app.kubernetes.io/name']"), "op");
    cr_assert_str_eq(first_str(o, "{.spec.containers[1].image}"), "i2");
    cr_assert_str_eq(first_str(o, ".spec.containers[-1].name"), "b");
    cr_assert_str_eq(first_str(o, ".status.conditions[?(@.type==\"Ready\")].status"), "True");
    cr_assert_str_eq(first_str(o, ".status.conditions[?(@.status != 'True')].type"), "Other");
    cr_assert_str_eq(first_str(o, ".nothing.here"), "(none)");
    json_t *all = ks_jsonpath_eval(o, ".spec.containers[*].image");
    cr_assert_eq(json_array_size(all), 2);
    json_decref(all);
    cr_assert_null(ks_jsonpath_eval(o, ".spec..image"));
    cr_assert_null(ks_jsonpath_eval(o, ".spec.containers[x"));
    json_decref(o);
}

Test(helpers, human_durations)
{
    char b[32];
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 5), "5s");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 119), "119s");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 185), "3m5s");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 600), "10m");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 3 * 3600 + 120), "3h2m");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 10 * 3600), "10h");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 3 * 86400 + 3600), "3d1h");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 30 * 86400), "30d");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), 3 * 365 * 86400 + 86400), "3y1d");
    cr_assert_str_eq(ks_human_duration(b, sizeof(b), -5), "<invalid>");
    time_t t0;
    cr_assert(ks_parse_rfc3339("2024-01-02T03:04:05Z", &t0));
    cr_assert_str_eq(ks_human_age(b, sizeof(b), "2024-01-02T03:04:05Z", t0 + 61), "61s");
    cr_assert_str_eq(ks_human_age(b, sizeof(b), "2024-01-02T04:04:05+01:00", t0 + 61), "61s");
    cr_assert_str_eq(ks_human_age(b, sizeof(b), "yesterday", t0), "<unknown>");
}

static const char *cell(const char *name, const char *json)
{
    static char buf[256];
    json_t *o = json_loads(json, 0, NULL);
    cr_assert_not_null(o, "%s", json);
    json_t *c = ks_table_computed(name, o, 1000000);
    cr_assert_not_null(c, "%s", name);
    if (json_is_string(c))
        snprintf(buf, sizeof(buf), "%s", json_string_value(c));
    else
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(c));
    json_decref(c);
    json_decref(o);
    return buf;
}

Test(helpers, computed_cells)
{
    cr_assert_str_eq(
        cell("pod.status",
             "{\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"state\":{\"waiting\":"
             "{\"reason\":\"CrashLoopBackOff\"}}}]}}"),
        "CrashLoopBackOff");
    cr_assert_str_eq(cell("pod.status", "{\"metadata\":{\"deletionTimestamp\":\"x\"},"
                                        "\"status\":{\"phase\":\"Running\"}}"),
                     "Terminating");
    cr_assert_str_eq(cell("pod.status", "{\"spec\":{\"initContainers\":[{},{}]},\"status\":{"
                                        "\"phase\":\"Pending\",\"initContainerStatuses\":[{"
                                        "\"state\":{\"running\":{}}}]}}"),
                     "Init:0/2");
    cr_assert_str_eq(cell("pod.ready", "{\"spec\":{\"containers\":[{},{}]},\"status\":{"
                                       "\"containerStatuses\":[{\"ready\":true},{}]}}"),
                     "1/2");
    cr_assert_str_eq(cell("pod.restarts", "{\"status\":{\"containerStatuses\":[{"
                                          "\"restartCount\":2}]}}"),
                     "2");
    cr_assert_str_eq(cell("node.status", "{\"spec\":{\"unschedulable\":true},\"status\":{"
                                         "\"conditions\":[{\"type\":\"Ready\",\"status\":"
                                         "\"True\"}]}}"),
                     "Ready,SchedulingDisabled");
    cr_assert_str_eq(cell("node.roles", "{\"metadata\":{\"labels\":{\"node-role.kubernetes.io/"
                                        "worker\":\"\",\"node-role.kubernetes.io/gpu\":\"\"}}}"),
                     "gpu,worker");
    cr_assert_str_eq(cell("svc.ports", "{\"spec\":{\"ports\":[{\"port\":80},{\"port\":443,"
                                       "\"nodePort\":30443,\"protocol\":\"TCP\"}]}}"),
                     "80/TCP,443:30443/TCP");
    cr_assert_str_eq(cell("svc.externalip", "{\"spec\":{\"type\":\"LoadBalancer\"}}"), "<pending>");
    cr_assert_str_eq(cell("map:.spec.selector", "{\"spec\":{\"selector\":{\"b\":\"2\",\"a\":"
                                                "\"1\"}}}"),
                     "a=1,b=2");
    cr_assert_str_eq(cell("selector:.spec.selector", "{\"spec\":{\"selector\":{\"matchLabels\":"
                                                     "{\"app\":\"x\"}}}}"),
                     "app=x");
    cr_assert_str_eq(cell("count:.data,.binaryData", "{\"data\":{\"a\":\"1\",\"b\":\"2\"},"
                                                     "\"binaryData\":{\"c\":\"\"}}"),
                     "3");
    cr_assert_str_eq(cell("ratio:.status.readyReplicas,.spec.replicas",
                          "{\"spec\":{\"replicas\":3},\"status\":{\"readyReplicas\":1}}"),
                     "1/3");
    cr_assert_str_eq(cell("owner", "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":"
                                   "\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"ds\","
                                   "\"controller\":true}]}}"),
                     "daemonset.apps/ds");
    cr_assert_str_eq(cell("event.object", "{\"involvedObject\":{\"kind\":\"Pod\",\"name\":"
                                          "\"p\"}}"),
                     "pod/p");
    cr_assert_str_eq(cell("event.count", "{}"), "1");
    cr_assert_str_eq(cell("binding.subjects:ServiceAccount",
                          "{\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"sa\","
                          "\"namespace\":\"ns\"},{\"kind\":\"User\",\"name\":\"u\"}]}"),
                     "ns/sa");
    cr_assert_str_eq(cell("job.completions", "{\"spec\":{\"completions\":3},\"status\":{"
                                             "\"succeeded\":1}}"),
                     "1/3");
    cr_assert_str_eq(cell("endpoints", "{\"subsets\":[{\"addresses\":[{\"ip\":\"1.1.1.1\"},{"
                                       "\"ip\":\"2.2.2.2\"},{\"ip\":\"3.3.3.3\"},{\"ip\":"
                                       "\"4.4.4.4\"}],\"ports\":[{\"port\":80}]}]}"),
                     "1.1.1.1:80,2.2.2.2:80,3.3.3.3:80 + 1 more...");
    json_t *o = json_loads("{}", 0, NULL);
    cr_assert_null(ks_table_computed("no.such.thing", o, 0));
    json_decref(o);
}

Test(helpers, invalid_messages_become_status_causes)
{
    ks_store *st = ks_store_new(0);
    kc_err err;
    cr_assert_eq(ks_types_register_builtin(st, &err), KC_OK);
    ks_req r;
    memset(&r, 0, sizeof(r));
    r.route.t = ks_store_type(st, "apps", "v1", "deployments");
    r.route.name = "web";
    kc_err_set(&err, KC_EINVALID,
               "Deployment.apps \"web\" is invalid: [spec.replicas: Invalid value: -1: must be "
               "greater than or equal to 0, spec.strategy.type: Unsupported value: \"X\": "
               "supported values: \"Recreate\", \"RollingUpdate\"]");
    unsigned code = 0;
    json_t *s = ks_status_for_error(&r, &err, &code);
    cr_assert_eq(code, 422);
    json_t *d = json_object_get(s, "details");
    cr_assert_str_eq(json_string_value(json_object_get(d, "kind")), "Deployment");
    cr_assert_str_eq(json_string_value(json_object_get(d, "group")), "apps");
    json_t *causes = json_object_get(d, "causes");
    cr_assert_eq(json_array_size(causes), 2);
    json_t *c1 = json_array_get(causes, 1);
    cr_assert_str_eq(json_string_value(json_object_get(c1, "field")), "spec.strategy.type");
    cr_assert_str_eq(json_string_value(json_object_get(c1, "reason")), "FieldValueNotSupported");
    cr_assert_str_eq(json_string_value(json_object_get(c1, "message")),
                     "Unsupported value: \"X\": supported values: \"Recreate\", \"RollingUpdate\"");
    json_decref(s);
    /* A bare admission message gets the API server's prefix. */
    kc_err_set(&err, KC_EINVALID, "spec.replicas: Required value");
    s = ks_status_for_error(&r, &err, &code);
    cr_assert_str_eq(json_string_value(json_object_get(s, "message")),
                     "Deployment.apps \"web\" is invalid: spec.replicas: Required value");
    json_decref(s);
    /* Conflicts name the resource, not the kind. */
    kc_err_set(&err, KC_ECONFLICT, "x");
    s = ks_status_for_error(&r, &err, &code);
    cr_assert_eq(code, 409);
    cr_assert_str_eq(json_string_value(json_object_get(s, "reason")), "Conflict");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(s, "details"), "kind")),
                     "deployments");
    json_decref(s);
    ks_store_free(st);
}
