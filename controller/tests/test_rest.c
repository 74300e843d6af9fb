/* Tests for kc_rest: paths and queries, each verb's method/path/body/content type as the server
 * sees them, paging, and error and malformed-response handling. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_rest.h"
#include "testsrv.h"
#include "testsrv_script.h"

typedef struct fixture {
    ts_script sc;
    ts_server *srv;
    kc_client *c;
} fixture;

static void setup(fixture *f, const ts_canned *responses, size_t n)
{
    ts_script_init(&f->sc, responses, n);
    f->srv = ts_start(ts_script_handler, &f->sc, NULL);
    cr_assert_not_null(f->srv);
    kc_config cfg = {.server = (char *)ts_url(f->srv), .source = "test"};
    kc_client_opts o = {.qps = -1, .max_retries = -1};
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &f->c, &err), KC_OK, "%s", err.msg);
}

static void teardown(fixture *f)
{
    kc_client_free(f->c);
    ts_stop(f->srv);
    ts_script_free(&f->sc);
}

/* Decoded query parameter of recorded request i (malloc'd or NULL). */
static char *qparam(fixture *f, size_t i, const char *name)
{
    ts_recorded r = ts_script_get(&f->sc, i);
    ts_request req = {.query = r.query ? r.query : ""};
    return ts_query_get(&req, name);
}

static void assert_param(fixture *f, size_t i, const char *name, const char *want)
{
    char *v = qparam(f, i, name);
    if (!want) {
        cr_assert_null(v, "%s unexpectedly present (%s)", name, v);
    } else {
        cr_assert_not_null(v, "%s missing in request %zu", name, i);
        cr_assert_str_eq(v, want);
    }
    free(v);
}

Test(rest, paths_and_queries)
{
    char *p = kc_rest_path(&KC_RES_PODS, "default", "web-1", "status");
    cr_assert_str_eq(p, "/api/v1/namespaces/default/pods/web-1/status");
    free(p);
    p = kc_rest_path(&KC_RES_NODES, "ignored", "n1", NULL);
    cr_assert_str_eq(p, "/api/v1/nodes/n1");
    free(p);
    p = kc_rest_path(&KC_RES_NAMESPACES, NULL, "kube-system", NULL);
    cr_assert_str_eq(p, "/api/v1/namespaces/kube-system");
    free(p);
    p = kc_rest_path(&KC_RES_DAEMONSETS, "gpu", NULL, NULL);
    cr_assert_str_eq(p, "/apis/apps/v1/namespaces/gpu/daemonsets");
    free(p);
    p = kc_rest_path(&KC_RES_DEPLOYMENTS, NULL, NULL, NULL);
    cr_assert_str_eq(p, "/apis/apps/v1/deployments");
    free(p);
    p = kc_rest_path(&KC_RES_LEASES, "ns", "lock", NULL);
    cr_assert_str_eq(p, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock");
    free(p);
    p = kc_rest_path(&KC_RES_CRDS, NULL, "clusterpolicies.nvidia.com", NULL);
    cr_assert_str_eq(p, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                        "clusterpolicies.nvidia.com");
    free(p);
    p = kc_rest_path(&KC_RES_CLUSTERPOLICIES, NULL, "cluster-policy", "status");
    cr_assert_str_eq(p, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy/status");
    free(p);
    /* Segments cannot inject path or query syntax. */
    p = kc_rest_path(&KC_RES_CONFIGMAPS, "a b", "x/../y?z=1&w", NULL);
    cr_assert_str_eq(p, "/api/v1/namespaces/a%20b/configmaps/x%2F..%2Fy%3Fz%3D1%26w");
    free(p);
    cr_assert_null(kc_rest_path(NULL, NULL, NULL, NULL));
    cr_assert(KC_RES_SECRETS.namespaced && KC_RES_SERVICES.namespaced &&
              KC_RES_SERVICEACCOUNTS.namespaced && KC_RES_EVENTS.namespaced);
    cr_assert_str_eq(KC_RES_EVENTS.group, "");

    kc_list_opts o = {.label_selector = "app=web,tier in (a,b)",
                      .field_selector = "spec.nodeName=n1",
                      .limit = 50,
                      .continue_token = "tok+/=",
                      .resource_version = "0",
                      .resource_version_match = "NotOlderThan"};
    char *q = kc_rest_list_query("/api/v1/pods", &o, false, false, 0);
    cr_assert_str_eq(q, "/api/v1/pods?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
                        "&fieldSelector=spec.nodeName%3Dn1&limit=50&continue=tok%2B%2F%3D"
                        "&resourceVersion=0&resourceVersionMatch=NotOlderThan");
    free(q);
    kc_list_opts w = {.resource_version = "42"};
    q = kc_rest_list_query("/api/v1/nodes?x=1", &w, true, true, 300);
    cr_assert_str_eq(q, "/api/v1/nodes?x=1&resourceVersion=42&watch=true&allowWatchBookmarks=true"
                        "&timeoutSeconds=300");
    free(q);
    q = kc_rest_list_query("/api/v1/nodes", NULL, true, false, 0);
    cr_assert_str_eq(q, "/api/v1/nodes?watch=true");
    free(q);
    q = kc_rest_list_query("/api/v1/nodes", NULL, false, false, 0);
    cr_assert_str_eq(q, "/api/v1/nodes");
    free(q);
}

Test(rest, get_object_and_not_found)
{
    static const ts_canned seq[] = {
        {200, NULL, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\"}}", NULL},
        {404, NULL,
         "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"p2\\\" not found\","
         "\"reason\":\"NotFound\",\"details\":{\"name\":\"p2\",\"kind\":\"pods\"},\"code\":404}",
         NULL}};
    fixture f;
    setup(&f, seq, 2);
    json_t *obj = NULL;
    kc_err err;
    cr_assert_eq(kc_get(f.c, &KC_RES_PODS, "default", "p1", &obj, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(obj, "kind")), "Pod");
    json_decref(obj);
    ts_recorded r = ts_script_get(&f.sc, 0);
    cr_assert_str_eq(r.method, "GET");
    cr_assert_str_eq(r.path, "/api/v1/namespaces/default/pods/p1");
    obj = (json_t *)1;
    cr_assert_eq(kc_get(f.c, &KC_RES_PODS, "default", "p2", &obj, &err), KC_ENOTFOUND);
    cr_assert_null(obj);
    cr_assert_str_eq(err.msg, "pods \"p2\" not found");
    cr_assert_str_eq(err.reason, "NotFound");
    cr_assert_eq(err.http_status, 404);
    /* Argument errors never reach the server. */
    cr_assert_eq(kc_get(f.c, &KC_RES_PODS, NULL, "p1", &obj, &err), KC_EARG);
    cr_assert_eq(kc_get(f.c, &KC_RES_PODS, "ns", NULL, &obj, &err), KC_EARG);
    cr_assert_eq(kc_get(NULL, &KC_RES_PODS, "ns", "x", &obj, &err), KC_EARG);
    cr_assert_eq(ts_script_count(&f.sc), 2);
    teardown(&f);
}

Test(rest, list_sends_selectors)
{
    static const ts_canned seq[] = {
        {200, NULL,
         "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"77\"},\"items\":[{}]}", NULL},
        {200, NULL, "{\"kind\":\"NodeList\",\"metadata\":{},\"items\":null}", NULL}};
    fixture f;
    setup(&f, seq, 2);
    kc_list_opts o = {.label_selector = "app=gpu,tier!=x",
                      .field_selector = "spec.nodeName=node-1",
                      .limit = 10,
                      .resource_version = "0"};
    json_t *list = NULL;
    kc_err err;
    cr_assert_eq(kc_list(f.c, &KC_RES_PODS, "gpu-operator", &o, &list, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(json_array_size(json_object_get(list, "items")), 1);
    json_decref(list);
    ts_recorded r = ts_script_get(&f.sc, 0);
    cr_assert_str_eq(r.path, "/api/v1/namespaces/gpu-operator/pods");
    assert_param(&f, 0, "labelSelector", "app=gpu,tier!=x");
    assert_param(&f, 0, "fieldSelector", "spec.nodeName=node-1");
    assert_param(&f, 0, "limit", "10");
    assert_param(&f, 0, "resourceVersion", "0");
    assert_param(&f, 0, "continue", NULL);
    /* All namespaces / cluster scope; a null items becomes []. */
    cr_assert_eq(kc_list(f.c, &KC_RES_NODES, NULL, NULL, &list, &err), KC_OK, "%s", err.msg);
    cr_assert(json_is_array(json_object_get(list, "items")));
    cr_assert_eq(json_array_size(json_object_get(list, "items")), 0);
    json_decref(list);
    r = ts_script_get(&f.sc, 1);
    cr_assert_str_eq(r.path, "/api/v1/nodes");
    cr_assert_str_eq(r.query, "");
    teardown(&f);
}

Test(rest, list_all_follows_continue_over_three_pages)
{
    static const ts_canned seq[] = {
        {200, NULL,
         "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"10\",\"continue\":\"c1\"},"
         "\"items\":[{\"n\":1},{\"n\":2}]}",
         NULL},
        {200, NULL,
         "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"10\",\"continue\":\"c/2\"},"
         "\"items\":[{\"n\":3},{\"n\":4}]}",
         NULL},
        {200, NULL,
         "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"11\",\"continue\":\"\"},"
         "\"items\":[{\"n\":5}]}",
         NULL}};
    fixture f;
    setup(&f, seq, 3);
    kc_list_opts o = {.limit = 2, .label_selector = "gpu=true", .resource_version = "0"};
    json_t *all = NULL;
    kc_err err;
    cr_assert_eq(kc_list_all(f.c, &KC_RES_NODES, NULL, &o, &all, &err), KC_OK, "%s", err.msg);
    json_t *items = json_object_get(all, "items");
    cr_assert_eq(json_array_size(items), 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(json_integer_value(json_object_get(json_array_get(items, i), "n")),
                     (json_int_t)i + 1);
    json_t *meta = json_object_get(all, "metadata");
    cr_assert_str_eq(json_string_value(json_object_get(meta, "resourceVersion")), "11");
    cr_assert_null(json_object_get(meta, "continue"));
    cr_assert_str_eq(json_string_value(json_object_get(all, "kind")), "NodeList");
    json_decref(all);
    cr_assert_eq(ts_script_count(&f.sc), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_param(&f, i, "limit", "2");
        assert_param(&f, i, "labelSelector", "gpu=true");
    }
    assert_param(&f, 0, "continue", NULL);
    assert_param(&f, 0, "resourceVersion", "0");
    assert_param(&f, 1, "continue", "c1");
    assert_param(&f, 1, "resourceVersion", NULL);
    assert_param(&f, 2, "continue", "c/2");
    teardown(&f);
}

Test(rest, list_all_reports_expired_continue_and_loops)
{
    static const ts_canned seq[] = {
        {200, NULL, "{\"metadata\":{\"continue\":\"c1\"},\"items\":[{}]}", NULL},
        {410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"continue expired\"}",
         NULL},
        {200, NULL, "{\"metadata\":{\"continue\":\"same\"},\"items\":[]}", NULL}};
    fixture f;
    setup(&f, seq, 3);
    json_t *all = (json_t *)1;
    kc_err err;
    cr_assert_eq(kc_list_all(f.c, &KC_RES_PODS, "ns", NULL, &all, &err), KC_EEXPIRED);
    cr_assert_null(all);
    cr_assert(strstr(err.msg, "page 2") && strstr(err.msg, "continue expired"), "%s", err.msg);
    assert_param(&f, 0, "limit", "500");
    /* The server now repeats "same" forever: detected instead of looping. */
    cr_assert_eq(kc_list_all(f.c, &KC_RES_PODS, "ns", NULL, &all, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "same continue token"), "%s", err.msg);
    teardown(&f);
}

Test(rest, create_update_and_status)
{
    static const ts_canned seq[] = {{201, NULL, "{\"metadata\":{\"uid\":\"u1\"}}", NULL},
                                    {200, NULL, "{\"metadata\":{\"resourceVersion\":\"2\"}}", NULL},
                                    {200, NULL, "{}", NULL},
                                    {409, NULL,
                                     "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":"
                                     "\"the object has been modified\",\"code\":409}",
                                     NULL}};
    fixture f;
    setup(&f, seq, 4);
    json_t *cm =
        json_pack("{s:s, s:{s:s, s:s, s:s}, s:{s:s}}", "kind", "ConfigMap", "metadata", "name",
                  "cfg", "namespace", "gpu", "resourceVersion", "1", "data", "k", "v");
    json_t *out = NULL;
    kc_err err;
    cr_assert_eq(kc_create(f.c, &KC_RES_CONFIGMAPS, NULL, cm, &out, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "metadata"), "uid")),
                     "u1");
    json_decref(out);
    ts_recorded r = ts_script_get(&f.sc, 0);
    cr_assert_str_eq(r.method, "POST");
    cr_assert_str_eq(r.path, "/api/v1/namespaces/gpu/configmaps");
    cr_assert_str_eq(r.content_type, "application/json");
    json_t *sent = json_loads(r.body, 0, NULL);
    cr_assert(json_equal(sent, cm), "body %s", r.body);
    json_decref(sent);

    cr_assert_eq(kc_update(f.c, &KC_RES_CONFIGMAPS, "other", cm, NULL, &err), KC_OK, "%s", err.msg);
    r = ts_script_get(&f.sc, 1);
    cr_assert_str_eq(r.method, "PUT");
    cr_assert_str_eq(r.path, "/api/v1/namespaces/other/configmaps/cfg");
    cr_assert(strstr(r.body, "\"resourceVersion\":\"1\""), "%s", r.body);

    cr_assert_eq(kc_update_status(f.c, &KC_RES_CONFIGMAPS, NULL, cm, NULL, &err), KC_OK);
    r = ts_script_get(&f.sc, 2);
    cr_assert_str_eq(r.method, "PUT");
    cr_assert_str_eq(r.path, "/api/v1/namespaces/gpu/configmaps/cfg/status");

    cr_assert_eq(kc_update(f.c, &KC_RES_CONFIGMAPS, NULL, cm, NULL, &err), KC_ECONFLICT);
    cr_assert_str_eq(err.msg, "the object has been modified");

    /* No name, no namespace, not an object: rejected locally. */
    json_t *noname = json_pack("{s:{s:s}}", "metadata", "namespace", "gpu");
    cr_assert_eq(kc_update(f.c, &KC_RES_CONFIGMAPS, NULL, noname, NULL, &err), KC_EARG);
    cr_assert(strstr(err.msg, "metadata.name"), "%s", err.msg);
    json_t *nons = json_pack("{s:{s:s}}", "metadata", "name", "x");
    cr_assert_eq(kc_create(f.c, &KC_RES_CONFIGMAPS, NULL, nons, NULL, &err), KC_EARG);
    cr_assert(strstr(err.msg, "namespace"), "%s", err.msg);
    json_t *arr = json_array();
    cr_assert_eq(kc_create(f.c, &KC_RES_NODES, NULL, arr, NULL, &err), KC_EARG);
    cr_assert_eq(ts_script_count(&f.sc), 4);
    json_decref(noname);
    json_decref(nons);
    json_decref(arr);
    json_decref(cm);
    teardown(&f);
}

Test(rest, patch_content_types_and_params)
{
    static const ts_canned seq[] = {{200, NULL, "{\"patched\":true}", NULL}};
    fixture f;
    setup(&f, seq, 1);
    json_t *merge = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "a", "b");
    json_t *jp = json_pack("[{s:s, s:s, s:s}]", "op", "replace", "path", "/spec/x", "value", "y");
    kc_err err;
    json_t *out = NULL;
    cr_assert_eq(kc_patch(f.c, &KC_RES_NODES, NULL, "n1", KC_PATCH_MERGE, merge, NULL, &out, &err),
                 KC_OK, "%s", err.msg);
    cr_assert(json_is_true(json_object_get(out, "patched")));
    json_decref(out);
    cr_assert_eq(kc_patch(f.c, &KC_RES_DEPLOYMENTS, "ns", "d", KC_PATCH_JSON, jp, NULL, NULL, &err),
                 KC_OK);
    kc_patch_opts so = {.subresource = "status"};
    cr_assert_eq(kc_patch(f.c, &KC_RES_CLUSTERPOLICIES, NULL, "cp", KC_PATCH_STRATEGIC, merge, &so,
                          NULL, &err),
                 KC_OK);
    kc_patch_opts ao = {.field_manager = "gpu operator", .force = true};
    cr_assert_eq(
        kc_patch(f.c, &KC_RES_DAEMONSETS, "ns", "ds", KC_PATCH_APPLY, merge, &ao, NULL, &err),
        KC_OK);

    ts_recorded r = ts_script_get(&f.sc, 0);
    cr_assert_str_eq(r.method, "PATCH");
    cr_assert_str_eq(r.path, "/api/v1/nodes/n1");
    cr_assert_str_eq(r.content_type, "application/merge-patch+json");
    cr_assert_str_eq(r.body, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}");
    r = ts_script_get(&f.sc, 1);
    cr_assert_str_eq(r.path, "/apis/apps/v1/namespaces/ns/deployments/d");
    cr_assert_str_eq(r.content_type, "application/json-patch+json");
    cr_assert_eq(r.body[0], '[');
    r = ts_script_get(&f.sc, 2);
    cr_assert_str_eq(r.path, "/apis/nvidia.com/v1/clusterpolicies/cp/status");
    cr_assert_str_eq(r.content_type, "application/strategic-merge-patch+json");
    cr_assert_str_eq(r.query, "");
    r = ts_script_get(&f.sc, 3);
    cr_assert_str_eq(r.path, "/apis/apps/v1/namespaces/ns/daemonsets/ds");
    cr_assert_str_eq(r.content_type, "application/apply-patch+yaml");
    assert_param(&f, 3, "fieldManager", "gpu operator");
    assert_param(&f, 3, "force", "true");

    /* Local validation: apply needs a manager, JSON patch an array, merge an object. */
    cr_assert_eq(kc_patch(f.c, &KC_RES_NODES, NULL, "n1", KC_PATCH_APPLY, merge, NULL, NULL, &err),
                 KC_EARG);
    cr_assert(strstr(err.msg, "field manager"), "%s", err.msg);
    cr_assert_eq(kc_patch(f.c, &KC_RES_NODES, NULL, "n1", KC_PATCH_JSON, merge, NULL, NULL, &err),
                 KC_EARG);
    cr_assert_eq(kc_patch(f.c, &KC_RES_NODES, NULL, "n1", KC_PATCH_MERGE, jp, NULL, NULL, &err),
                 KC_EARG);
    cr_assert_eq(
        kc_patch(f.c, &KC_RES_NODES, NULL, "n1", (kc_patch_type)99, merge, NULL, NULL, &err),
        KC_EARG);
    cr_assert_eq(kc_patch(f.c, &KC_RES_PODS, NULL, "p", KC_PATCH_MERGE, merge, NULL, NULL, &err),
                 KC_EARG);
    cr_assert_eq(ts_script_count(&f.sc), 4);
    json_decref(merge);
    json_decref(jp);
    teardown(&f);
}

Test(rest, delete_sends_delete_options)
{
    static const ts_canned seq[] = {
        {200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}", NULL},
        {200, NULL, "not json, but delete ignores the body", NULL},
        {409, NULL,
         "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"Precondition failed: UID in "
         "precondition: u1, UID in object meta: u2\",\"code\":409}",
         NULL}};
    fixture f;
    setup(&f, seq, 3);
    kc_err err;
    cr_assert_eq(kc_delete(f.c, &KC_RES_PODS, "ns", "p1", KC_PROPAGATE_FOREGROUND, "uid-123", &err),
                 KC_OK, "%s", err.msg);
    ts_recorded r = ts_script_get(&f.sc, 0);
    cr_assert_str_eq(r.method, "DELETE");
    cr_assert_str_eq(r.path, "/api/v1/namespaces/ns/pods/p1");
    cr_assert_str_eq(r.content_type, "application/json");
    json_t *body = json_loads(r.body, 0, NULL);
    cr_assert_not_null(body, "body %s", r.body);
    cr_assert_str_eq(json_string_value(json_object_get(body, "kind")), "DeleteOptions");
    cr_assert_str_eq(json_string_value(json_object_get(body, "apiVersion")), "v1");
    cr_assert_str_eq(json_string_value(json_object_get(body, "propagationPolicy")), "Foreground");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(body, "preconditions"), "uid")),
        "uid-123");
    json_decref(body);

    cr_assert_eq(kc_delete(f.c, &KC_RES_NODES, NULL, "n1", KC_PROPAGATE_DEFAULT, NULL, &err), KC_OK,
                 "%s", err.msg);
    body = json_loads(ts_script_get(&f.sc, 1).body, 0, NULL);
    cr_assert_null(json_object_get(body, "propagationPolicy"));
    cr_assert_null(json_object_get(body, "preconditions"));
    json_decref(body);

    cr_assert_eq(kc_delete(f.c, &KC_RES_NAMESPACES, NULL, "gpu", KC_PROPAGATE_ORPHAN, "u1", &err),
                 KC_ECONFLICT);
    cr_assert(strstr(err.msg, "Precondition failed"), "%s", err.msg);
    body = json_loads(ts_script_get(&f.sc, 2).body, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(body, "propagationPolicy")), "Orphan");
    json_decref(body);
    cr_assert_eq(ts_script_get(&f.sc, 2).path[0], '/');
    cr_assert_str_eq(ts_script_get(&f.sc, 2).path, "/api/v1/namespaces/gpu");

    cr_assert_eq(kc_delete(f.c, &KC_RES_PODS, "ns", "p", (kc_propagation)7, NULL, &err), KC_EARG);
    cr_assert_eq(kc_delete(f.c, &KC_RES_PODS, NULL, "p", KC_PROPAGATE_DEFAULT, NULL, &err),
                 KC_EARG);
    teardown(&f);
}

Test(rest, malformed_success_bodies_are_parse_errors)
{
    static const ts_canned seq[] = {{200, "text/html", "<html>proxy login</html>", NULL},
                                    {200, NULL, "{\"kind\":\"Pod\",\"metadata\":{\"name\":", NULL},
                                    {200, NULL, "", NULL},
                                    {200, NULL, "[1,2,3]", NULL},
                                    {200, NULL, "{\"items\":{\"not\":\"an array\"}}", NULL},
                                    {200, NULL, "{\"items\":[1,2", NULL},
                                    {200, NULL, "{\"metadata\":{},\"items\":[1]} trailing", NULL}};
    fixture f;
    setup(&f, seq, 7);
    json_t *obj = NULL;
    kc_err err;
    cr_assert_eq(kc_get(f.c, &KC_RES_NODES, NULL, "a", &obj, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "not JSON") && strstr(err.msg, "text/html"), "%s", err.msg);
    cr_assert(strstr(err.msg, "/api/v1/nodes/a"), "%s", err.msg);
    cr_assert_eq(kc_get(f.c, &KC_RES_NODES, NULL, "b", &obj, &err), KC_EPARSE);
    cr_assert_eq(kc_get(f.c, &KC_RES_NODES, NULL, "c", &obj, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "empty body"), "%s", err.msg);
    cr_assert_eq(kc_get(f.c, &KC_RES_NODES, NULL, "d", &obj, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "not an object"), "%s", err.msg);
    cr_assert_eq(kc_list(f.c, &KC_RES_NODES, NULL, NULL, &obj, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "items"), "%s", err.msg);
    cr_assert_eq(kc_list_all(f.c, &KC_RES_NODES, NULL, NULL, &obj, &err), KC_EPARSE);
    cr_assert_eq(kc_list(f.c, &KC_RES_NODES, NULL, NULL, &obj, &err), KC_EPARSE);
    cr_assert_null(obj);
    teardown(&f);
}

Test(rest, works_over_tls)
{
    ts_pki *pki = ts_pki_generate("rest-ca");
    static const ts_canned seq[] = {{200, NULL, "{\"kind\":\"Node\"}", NULL}};
    ts_script sc;
    ts_script_init(&sc, seq, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    kc_config cfg = {.server = (char *)ts_url(srv), .ca_pem = pki->ca_pem, .source = "test"};
    kc_client *c;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, NULL, &c, &err), KC_OK);
    json_t *obj = NULL;
    cr_assert_eq(kc_get(c, &KC_RES_NODES, NULL, "n", &obj, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(obj, "kind")), "Node");
    json_decref(obj);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
}
