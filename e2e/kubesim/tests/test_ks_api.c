/* Tests of kubesim's API server verbs over HTTPS and HTTP: CRUD, conflicts, lists with paging and
 * selectors, every patch type, subresources, errors, authentication and authorization. */
#include "ks_api_test.h"

TestSuite(api, .init = ka_start, .fini = ka_stop, .timeout = 60);

Test(api, health_and_version_need_no_token)
{
    ka_resp r = ka_http_ex("GET", ka.sim.server_url, "/healthz", NULL, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url, "/version", NULL, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    json_t *v = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(v, "gitVersion")), "v1.32.0");
    cr_assert_str_eq(json_string_value(json_object_get(v, "minor")), "32");
    json_decref(v);
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url, "/api/v1/namespaces", NULL, NULL, NULL, 0);
    cr_assert_eq(r.status, 401);
    v = ka_json(&r);
    ka_status(v, 401, "Unauthorized");
    json_decref(v);
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url, "/api/v1/namespaces", "wrong-token", NULL, NULL, 0);
    cr_assert_eq(r.status, 401);
    ka_resp_free(&r);
}

Test(api, crud_configmap_over_https)
{
    kc_err err;
    json_t *out = NULL, *cm = ka_cm("c1", "a", "b");
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, &out, &err), KC_OK, "%s",
                 err.msg);
    json_decref(cm);
    cr_assert_str_eq(json_string_value(json_object_get(out, "kind")), "ConfigMap");
    const char *rv1 =
        json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion"));
    cr_assert_not_null(rv1);
    cr_assert_not_null(json_object_get(json_object_get(out, "metadata"), "uid"));

    json_t *got = NULL;
    cr_assert_eq(kc_get(ka.c, &KC_RES_CONFIGMAPS, "default", "c1", &got, &err), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "data"), "a")), "b");

    /* Update with the current RV succeeds; the old RV then conflicts. */
    json_object_set_new(json_object_get(got, "data"), "a", json_string("c"));
    json_t *upd = NULL;
    cr_assert_eq(kc_update(ka.c, &KC_RES_CONFIGMAPS, "default", got, &upd, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(upd, "data"), "a")), "c");
    json_object_set_new(json_object_get(got, "data"), "a", json_string("d"));
    cr_assert_eq(kc_update(ka.c, &KC_RES_CONFIGMAPS, "default", got, NULL, &err), KC_ECONFLICT);
    cr_assert(strstr(err.msg, "the object has been modified"), "%s", err.msg);
    cr_assert_eq(err.http_status, 409);

    /* PUT of a missing object is 404; a name that differs from the URL is 400. */
    ka_resp r = ka_http("PUT", "/api/v1/namespaces/default/configmaps/nope", "application/json",
                        NULL, "{\"metadata\":{\"name\":\"nope\"}}");
    cr_assert_eq(r.status, 404, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("PUT", "/api/v1/namespaces/default/configmaps/c1", "application/json", NULL,
                "{\"metadata\":{\"name\":\"other\"}}");
    cr_assert_eq(r.status, 400);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 400, "BadRequest"),
                     "the name of the object (other) does not match the name on the URL (c1)");
    json_decref(st);
    ka_resp_free(&r);

    cr_assert_eq(
        kc_delete(ka.c, &KC_RES_CONFIGMAPS, "default", "c1", KC_PROPAGATE_BACKGROUND, NULL, &err),
        KC_OK, "%s", err.msg);
    r = ka_http("GET", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 404, "NotFound"), "configmaps \"c1\" not found");
    json_t *d = json_object_get(st, "details");
    cr_assert_str_eq(json_string_value(json_object_get(d, "name")), "c1");
    cr_assert_str_eq(json_string_value(json_object_get(d, "kind")), "configmaps");
    json_decref(st);
    ka_resp_free(&r);
    json_decref(out);
    json_decref(got);
    json_decref(upd);
}

Test(api, plain_http_listener_serves_the_same_api)
{
    kc_client *hc = ka_client(ka.sim.http_url, ka.token);
    cr_assert(!strncmp(ka.sim.http_url, "http://127.0.0.1:", 17), "%s", ka.sim.http_url);
    cr_assert(!strncmp(ka.sim.server_url, "https://127.0.0.1:", 18), "%s", ka.sim.server_url);
    kc_err err;
    json_t *cm = ka_cm("h1", "k", "v"), *out = NULL;
    cr_assert_eq(kc_create(hc, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(kc_get(ka.c, &KC_RES_CONFIGMAPS, "default", "h1", &out, &err), KC_OK);
    json_decref(out);
    json_decref(cm);
    kc_client_free(hc);
}

Test(api, create_collision_is_409_already_exists)
{
    json_t *cm = ka_cm("dup", "a", "b");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK);
    char *body = json_dumps(cm, 0);
    ka_resp r =
        ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/json", NULL, body);
    cr_assert_eq(r.status, 409);
    json_t *st = ka_json(&r);
    ka_status(st, 409, "AlreadyExists");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "details"), "name")),
                     "dup");
    json_decref(st);
    ka_resp_free(&r);
    /* Namespace mismatch between URL and body: 400. */
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/json", NULL,
                "{\"metadata\":{\"name\":\"x\",\"namespace\":\"other\"}}");
    cr_assert_eq(r.status, 400);
    ka_resp_free(&r);
    /* No name nor generateName: 422 with a cause. */
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/json", NULL,
                "{\"metadata\":{}}");
    cr_assert_eq(r.status, 422);
    st = ka_json(&r);
    ka_status(st, 422, "Invalid");
    json_t *cause = json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(cause, "field")), "metadata.name");
    json_decref(st);
    ka_resp_free(&r);
    free(body);
    json_decref(cm);
}

Test(api, bodies_json_yaml_and_errors)
{
    ka_resp r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/yaml", NULL,
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\ndata:\n  a: b\n");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/json", NULL, "{bad");
    cr_assert_eq(r.status, 400);
    json_t *st = ka_json(&r);
    ka_status(st, 400, "BadRequest");
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "text/csv", NULL, "a,b");
    cr_assert_eq(r.status, 415);
    st = ka_json(&r);
    ka_status(st, 415, "UnsupportedMediaType");
    json_decref(st);
    ka_resp_free(&r);
    /* A kind that does not match the URL. */
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps", "application/json", NULL,
                "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"s\"}}");
    cr_assert_eq(r.status, 400);
    ka_resp_free(&r);
}

Test(api, unknown_paths_and_methods)
{
    ka_resp r = ka_http("GET", "/api/v1/nosuchthings", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 404, "NotFound"),
                     "the server could not find the requested resource");
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http("GET", "/openapi/v2", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
    /* A namespaced object addressed without its namespace. */
    r = ka_http("GET", "/api/v1/configmaps/x", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
    r = ka_http("POST", "/api/v1/namespaces/default/configmaps/x", "application/json", NULL, "{}");
    cr_assert_eq(r.status, 405);
    st = ka_json(&r);
    ka_status(st, 405, "MethodNotAllowed");
    json_decref(st);
    ka_resp_free(&r);
    /* The short name is no URL. */
    r = ka_http("GET", "/api/v1/namespaces/default/cm", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
}

static void make_cms(int n)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "cm-%02d", i);
        json_t *cm = ka_cm(name, "i", name);
        json_object_set_new(json_object_get(cm, "metadata"), "labels",
                            json_pack("{s:s}", "tier", i % 2 ? "odd" : "even"));
        kc_err err;
        cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK, "%s",
                     err.msg);
        json_decref(cm);
    }
}

Test(api, list_pages_and_selectors)
{
    make_cms(5);
    kc_err err;
    kc_list_opts lo = {.limit = 2};
    json_t *page = NULL;
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", &lo, &page, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(page, "kind")), "ConfigMapList");
    cr_assert_str_eq(json_string_value(json_object_get(page, "apiVersion")), "v1");
    cr_assert_eq(json_array_size(json_object_get(page, "items")), 2);
    json_t *first = json_array_get(json_object_get(page, "items"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "kind")), "ConfigMap");
    const char *cont =
        json_string_value(json_object_get(json_object_get(page, "metadata"), "continue"));
    cr_assert_not_null(cont);
    json_t *all = NULL;
    cr_assert_eq(kc_list_all(ka.c, &KC_RES_CONFIGMAPS, "default", &lo, &all, &err), KC_OK);
    cr_assert_eq(json_array_size(json_object_get(all, "items")), 5);

    json_t *sel = NULL;
    kc_list_opts ls = {.label_selector = "tier in (odd)"};
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", &ls, &sel, &err), KC_OK);
    cr_assert_eq(json_array_size(json_object_get(sel, "items")), 2);
    json_decref(sel);
    kc_list_opts fs = {.field_selector = "metadata.name=cm-03"};
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, NULL, &fs, &sel, &err), KC_OK);
    cr_assert_eq(json_array_size(json_object_get(sel, "items")), 1);
    json_decref(sel);
    kc_list_opts bad = {.field_selector = "spec.foo=x"};
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", &bad, &sel, &err), KC_EBADREQUEST);
    cr_assert_str_eq(err.msg, "field label not supported: spec.foo");
    kc_list_opts badl = {.label_selector = "a in ("};
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", &badl, &sel, &err), KC_EBADREQUEST);
    /* Pod field selectors kubectl describe node sends. */
    kc_list_opts pf = {.field_selector =
                           "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed"};
    cr_assert_eq(kc_list(ka.c, &KC_RES_PODS, NULL, &pf, &sel, &err), KC_OK, "%s", err.msg);
    json_decref(sel);
    /* A resourceVersion far in the future: 504 Timeout after a short wait. */
    ka_resp r = ka_http("GET", "/api/v1/namespaces/default/configmaps?resourceVersion=999999", NULL,
                        NULL, NULL);
    cr_assert_eq(r.status, 504, "%s", r.body);
    ka_resp_free(&r);
    json_decref(page);
    json_decref(all);
}

Test(api, delete_collection_with_label_selector)
{
    make_cms(4);
    ka_resp r = ka_http("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=tier%3Deven",
                        NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *l = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(l, "kind")), "ConfigMapList");
    cr_assert_eq(json_array_size(json_object_get(l, "items")), 2);
    json_decref(l);
    ka_resp_free(&r);
    json_t *rest = NULL;
    kc_err err;
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", NULL, &rest, &err), KC_OK);
    cr_assert_eq(json_array_size(json_object_get(rest, "items")), 2);
    json_decref(rest);
}

Test(api, delete_options_in_body_and_query)
{
    make_cms(1);
    ka_resp r = ka_http("DELETE", "/api/v1/namespaces/default/configmaps/cm-00", "application/json",
                        NULL, "{\"propagationPolicy\":\"Sideways\"}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("DELETE", "/api/v1/namespaces/default/configmaps/cm-00", "application/json", NULL,
                "{\"preconditions\":{\"uid\":\"not-the-uid\"}}");
    cr_assert_eq(r.status, 409, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("DELETE", "/api/v1/namespaces/default/configmaps/cm-00?dryRun=All", NULL, NULL,
                NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("DELETE",
                "/api/v1/namespaces/default/configmaps/cm-00?propagationPolicy=Foreground", NULL,
                NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *o = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "ConfigMap");
    json_decref(o);
    ka_resp_free(&r);
}

static json_t *patch_cm(kc_patch_type type, const char *json, kc_code want)
{
    json_error_t je;
    json_t *p = json_loads(json, JSON_DECODE_ANY, &je), *out = NULL;
    cr_assert_not_null(p, "%s", je.text);
    kc_err err;
    kc_patch_opts po = {.field_manager = "test"};
    cr_assert_eq(kc_patch(ka.c, &KC_RES_CONFIGMAPS, "default", "p1", type, p, &po, &out, &err),
                 want, "%s", err.msg);
    json_decref(p);
    return out;
}

Test(api, patches_of_each_type)
{
    json_t *cm = ka_cm("p1", "a", "1"), *out;
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK);
    json_decref(cm);
    out = patch_cm(KC_PATCH_MERGE,
                   "{\"metadata\":{\"labels\":{\"x\":\"y\"}},\"data\":{\"b\":\"2\"}}", KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(out, "metadata"), "labels"), "x")),
                     "y");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "data"), "a")), "1");
    json_decref(out);
    out = patch_cm(KC_PATCH_JSON,
                   "[{\"op\":\"test\",\"path\":\"/data/a\",\"value\":\"1\"},"
                   "{\"op\":\"replace\",\"path\":\"/data/a\",\"value\":\"9\"}]",
                   KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "data"), "a")), "9");
    json_decref(out);
    /* A failed test operation: 422. */
    patch_cm(KC_PATCH_JSON, "[{\"op\":\"test\",\"path\":\"/data/a\",\"value\":\"1\"}]",
             KC_EINVALID);
    out = patch_cm(KC_PATCH_STRATEGIC, "{\"data\":{\"c\":\"3\",\"b\":null}}", KC_OK);
    cr_assert_null(json_object_get(json_object_get(out, "data"), "b"));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "data"), "c")), "3");
    json_decref(out);
    /* A stale resourceVersion in a patch is a precondition: 409. */
    patch_cm(KC_PATCH_MERGE, "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"z\":\"z\"}}",
             KC_ECONFLICT);
    /* Server-side apply updates, and creates when absent (201). */
    out = patch_cm(KC_PATCH_APPLY,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"p1\"},"
                   "\"data\":{\"d\":\"4\"}}",
                   KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "data"), "d")), "4");
    json_decref(out);
    ka_resp r = ka_http("PATCH", "/api/v1/namespaces/default/configmaps/fresh?fieldManager=t",
                        "application/apply-patch+yaml", NULL,
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\ndata:\n  "
                        "k: v\n");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("PATCH", "/api/v1/namespaces/default/configmaps/fresh",
                "application/apply-patch+yaml", NULL, "data:\n  k: w\n");
    cr_assert_eq(r.status, 422, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert(strstr(ka_status(st, 422, "Invalid"), "fieldManager: Required value"));
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http("PATCH", "/api/v1/namespaces/default/configmaps/p1", "application/json", NULL,
                "{}");
    cr_assert_eq(r.status, 415);
    ka_resp_free(&r);
    /* A patch of a missing object: 404. */
    r = ka_http("PATCH", "/api/v1/namespaces/default/configmaps/none",
                "application/merge-patch+json", NULL, "{}");
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
}

Test(api, custom_resources_refuse_strategic_merge)
{
    json_t *w = json_pack("{s:s, s:s, s:{s:s}, s:{s:i}}", "apiVersion", "example.com/v1", "kind",
                          "Widget", "metadata", "name", "w1", "spec", "size", 3);
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KA_WIDGETS, "default", w, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(w);
    ka_resp r = ka_http("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w1",
                        "application/strategic-merge-patch+json", NULL, "{\"spec\":{\"size\":4}}");
    cr_assert_eq(r.status, 415);
    json_t *st = ka_json(&r);
    cr_assert(strstr(ka_status(st, 415, "UnsupportedMediaType"), "application/merge-patch+json"));
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w1",
                "application/merge-patch+json", NULL, "{\"spec\":{\"size\":4}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    st = ka_json(&r);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(st, "spec"), "size")), 4);
    json_decref(st);
    ka_resp_free(&r);
}

Test(api, status_subresource_changes_only_status)
{
    json_t *w = json_pack("{s:{s:s}, s:{s:i}}", "metadata", "name", "w2", "spec", "size", 1);
    kc_err err;
    json_t *out = NULL;
    cr_assert_eq(kc_create(ka.c, &KA_WIDGETS, "default", w, &out, &err), KC_OK, "%s", err.msg);
    json_decref(w);
    json_object_set_new(out, "status", json_pack("{s:s}", "phase", "Ready"));
    json_object_set_new(json_object_get(out, "spec"), "size", json_integer(99));
    json_t *st = NULL;
    cr_assert_eq(kc_update_status(ka.c, &KA_WIDGETS, "default", out, &st, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "status"), "phase")),
                     "Ready");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(st, "spec"), "size")), 1);
    json_decref(st);
    ka_resp r = ka_http("PATCH", "/apis/example.com/v1/namespaces/default/widgets/w2/status",
                        "application/merge-patch+json", NULL, "{\"status\":{\"phase\":\"Done\"}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("GET", "/apis/example.com/v1/namespaces/default/widgets/w2/status", NULL, NULL,
                NULL);
    cr_assert_eq(r.status, 200);
    st = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "status"), "phase")),
                     "Done");
    json_decref(st);
    ka_resp_free(&r);
    /* Unknown subresources are 404. */
    r = ka_http("GET", "/apis/example.com/v1/namespaces/default/widgets/w2/scale", NULL, NULL,
                NULL);
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
    json_decref(out);
}

Test(api, deployment_scale_subresource)
{
    json_t *d = json_pack("{s:{s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, s:{s:[{s:s, s:s}]}}}}",
                          "metadata", "name", "web", "spec", "replicas", 2, "selector",
                          "matchLabels", "app", "web", "template", "metadata", "labels", "app",
                          "web", "spec", "containers", "name", "c", "image", "nginx");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_DEPLOYMENTS, "default", d, NULL, &err), KC_OK, "%s",
                 err.msg);
    json_decref(d);
    ka_resp r =
        ka_http("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *sc = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(sc, "kind")), "Scale");
    cr_assert_str_eq(json_string_value(json_object_get(sc, "apiVersion")), "autoscaling/v1");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(sc, "spec"), "replicas")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sc, "status"), "selector")),
                     "app=web");
    json_decref(sc);
    ka_resp_free(&r);
    r = ka_http("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale", "application/json",
                NULL, "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":5}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale",
                "application/merge-patch+json", NULL, "{\"spec\":{\"replicas\":7}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale",
                "application/merge-patch+json", NULL, "{\"spec\":{\"replicas\":-1}}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    ka_resp_free(&r);
    json_t *got = NULL;
    cr_assert_eq(kc_get(ka.c, &KC_RES_DEPLOYMENTS, "default", "web", &got, &err), KC_OK);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(got, "spec"), "replicas")), 7);
    json_decref(got);
}

Test(api, eviction_deletes_the_pod)
{
    json_t *p = json_pack("{s:{s:s}, s:{s:[{s:s, s:s}]}}", "metadata", "name", "ev1", "spec",
                          "containers", "name", "c", "image", "busybox");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_PODS, "default", p, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(p);
    ka_resp r =
        ka_http("POST", "/api/v1/namespaces/default/pods/ev1/eviction", "application/json", NULL,
                "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":"
                "\"ev1\",\"namespace\":\"default\"}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(st, "status")), "Success");
    cr_assert_eq(json_integer_value(json_object_get(st, "code")), 201);
    json_decref(st);
    ka_resp_free(&r);
    json_t *got = NULL;
    cr_assert_eq(kc_get(ka.c, &KC_RES_PODS, "default", "ev1", &got, &err), KC_ENOTFOUND);
    r = ka_http("POST", "/api/v1/namespaces/default/pods/ev1/eviction", "application/json", NULL,
                "{}");
    cr_assert_eq(r.status, 404);
    ka_resp_free(&r);
}

Test(api, binding_assigns_a_node_once)
{
    json_t *p = json_pack("{s:{s:s}, s:{s:[{s:s, s:s}]}}", "metadata", "name", "b1", "spec",
                          "containers", "name", "c", "image", "busybox");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_PODS, "default", p, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(p);
    const char *body = "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"b1\"},"
                       "\"target\":{\"kind\":\"Node\",\"name\":\"n1\"}}";
    ka_resp r = ka_http("POST", "/api/v1/namespaces/default/pods/b1/binding", "application/json",
                        NULL, body);
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("POST", "/api/v1/namespaces/default/pods/b1/binding", "application/json", NULL,
                body);
    cr_assert_eq(r.status, 409, "%s", r.body);
    ka_resp_free(&r);
    json_t *got = NULL;
    cr_assert_eq(kc_get(ka.c, &KC_RES_PODS, "default", "b1", &got, &err), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "spec"), "nodeName")),
                     "n1");
    json_decref(got);
}

Test(api, dry_run_create_does_not_persist)
{
    ka_resp r = ka_http("POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
                        "application/json", NULL, "{\"metadata\":{\"name\":\"dry\"}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    json_t *got = NULL;
    kc_err err;
    cr_assert_eq(kc_get(ka.c, &KC_RES_CONFIGMAPS, "default", "dry", &got, &err), KC_ENOTFOUND);
}

Test(api, request_counters_per_client)
{
    make_cms(1);
    ka_resp r = ka_http("GET", "/kubesim/requests", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *s = ka_json(&r);
    json_t *c = json_object_get(json_object_get(s, "clients"), "admin ks-api-test");
    cr_assert_not_null(c, "%s", r.body);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(c, "requests"), "create configmaps")),
        1);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(c, "requests"), "create namespaces")),
        1);
    cr_assert(json_integer_value(json_object_get(s, "total")) >= 2);
    json_decref(s);
    ka_resp_free(&r);
    s = ks_server_request_stats(&ka.sim);
    cr_assert(json_integer_value(json_object_get(s, "total")) >= 3);
    json_decref(s);
    r = ka_http("POST", "/kubesim/compact", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
}

TestSuite(api_rbac, .fini = ka_stop, .timeout = 60);

Test(api_rbac, forbidden_message_with_rbac)
{
    ka_start_opts(true, false);
    char *tok = ks_auth_sa_token(&ka.sim, "default", "robot");
    cr_assert_not_null(tok);
    ka_resp r =
        ka_http_ex("GET", ka.sim.server_url, "/api/v1/namespaces/default/pods", tok, NULL, NULL, 0);
    cr_assert_eq(r.status, 403, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 403, "Forbidden"),
                     "pods is forbidden: User \"system:serviceaccount:default:robot\" cannot "
                     "list resource \"pods\" in API group \"\" in the namespace \"default\"");
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url, "/apis/apps/v1/namespaces/default/deployments/x", tok,
                   NULL, NULL, 0);
    cr_assert_eq(r.status, 403);
    st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 403, "Forbidden"),
                     "deployments.apps \"x\" is forbidden: User "
                     "\"system:serviceaccount:default:robot\" cannot get resource \"deployments\" "
                     "in API group \"apps\" in the namespace \"default\"");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "details"), "group")),
                     "apps");
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http_ex("GET", ka.sim.server_url, "/api/v1/nodes", tok, NULL, NULL, 0);
    cr_assert_eq(r.status, 403);
    st = ka_json(&r);
    cr_assert(strstr(ka_status(st, 403, "Forbidden"), "at the cluster scope"), "%s", r.body);
    json_decref(st);
    ka_resp_free(&r);
    /* Admin-only endpoints. */
    r = ka_http_ex("GET", ka.sim.server_url, "/kubesim/requests", tok, NULL, NULL, 0);
    cr_assert_eq(r.status, 403);
    ka_resp_free(&r);
    /* Discovery is open to every authenticated user. */
    r = ka_http_ex("GET", ka.sim.server_url, "/api", tok, NULL, NULL, 0);
    cr_assert_eq(r.status, 200);
    ka_resp_free(&r);
    free(tok);
}
