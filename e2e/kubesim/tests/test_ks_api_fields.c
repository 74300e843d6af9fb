/* Tests of server-side field validation of custom objects over HTTPS: ?fieldValidation=Strict
 * (what kubectl sends) rejects fields the CRD schema does not declare with the API server's
 * message, Warn (the default) answers with Warning headers and prunes, Ignore prunes silently;
 * creates, updates and patches. */
#include "ks_admit.h"
#include "ks_api_test.h"

static const ks_rtype *gadgets;

/* A namespaced custom type with a schema: spec.size (integer), spec.tags (array of objects with
 * name), spec.free (preserves unknown fields), status.state. */
static void start(void)
{
    ka_start();
    ks_store_set_admission(ka.sim.store, ks_admit, &ka.sim);
    json_error_t je;
    json_t *schema = json_loads(
        "{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{"
        "\"size\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
        "\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}},\"free\":{\"type\":"
        "\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}},\"status\":{\"type\":"
        "\"object\",\"properties\":{\"state\":{\"type\":\"string\"}}}}}",
        0, &je);
    cr_assert_not_null(schema, "%s", je.text);
    ks_rtype t = {.group = "example.com",
                  .version = "v1",
                  .resource = "gadgets",
                  .kind = "Gadget",
                  .singular = "gadget",
                  .namespaced = true,
                  .has_status = true,
                  .schema = schema,
                  .crd_name = "gadgets.example.com"};
    gadgets = ks_store_register(ka.sim.store, &t);
    json_decref(schema);
    cr_assert_not_null(gadgets);
}

static void stop(void)
{
    ks_admit_free(&ka.sim);
    ka_stop();
}

TestSuite(fields, .init = start, .fini = stop, .timeout = 60);

#define COLL "/apis/example.com/v1/namespaces/default/gadgets"

static ka_resp req(const char *method, const char *path, const char *ctype, const char *body)
{
    return ka_http(method, path, ctype, NULL, body);
}

static json_t *get_spec(const char *name)
{
    char path[200];
    snprintf(path, sizeof(path), COLL "/%s", name);
    ka_resp r = req("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *o = ka_json(&r);
    ka_resp_free(&r);
    json_t *spec = json_incref(json_object_get(o, "spec"));
    json_decref(o);
    return spec;
}

static const char *bad_request(ka_resp *r, json_t **st)
{
    cr_assert_eq(r->status, 400, "%ld %s", r->status, r->body);
    *st = ka_json(r);
    return ka_status(*st, 400, "BadRequest");
}

Test(fields, strict_create_names_every_unknown_field)
{
    ka_resp r = req("POST", COLL "?fieldValidation=Strict", "application/json",
                    "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{"
                    "\"name\":\"g\"},\"spec\":{\"size\":1,\"extra\":true}}");
    json_t *st;
    cr_assert_str_eq(bad_request(&r, &st), "Gadget in version \"v1\" cannot be handled as a "
                                           "Gadget: strict decoding error: unknown field "
                                           "\"spec.extra\"");
    cr_assert_null(json_object_get(st, "details"));
    json_decref(st);
    ka_resp_free(&r);
    r = req("GET", COLL "/g", NULL, NULL);
    cr_assert_eq(r.status, 404, "nothing was stored");
    ka_resp_free(&r);
    /* Several: sorted, comma separated; nested in arrays too. */
    r = req("POST", COLL "?fieldValidation=Strict", "application/json",
            "{\"metadata\":{\"name\":\"g\"},\"bogus\":1,\"spec\":{\"tags\":[{\"name\":\"a\"},"
            "{\"name\":\"b\",\"color\":\"red\"}],\"extra\":true}}");
    cr_assert_str_eq(bad_request(&r, &st),
                     "Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding "
                     "error: unknown field \"bogus\", unknown field \"spec.extra\", unknown field "
                     "\"spec.tags[1].color\"");
    json_decref(st);
    ka_resp_free(&r);
}

Test(fields, strict_accepts_declared_and_preserved_fields)
{
    ka_resp r = req("POST", COLL "?fieldValidation=Strict", "application/json",
                    "{\"metadata\":{\"name\":\"ok\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"size\":"
                    "2,\"tags\":[{\"name\":\"x\"}],\"free\":{\"anything\":{\"goes\":1}}},"
                    "\"status\":{\"state\":\"new\"}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(r.warnings, "");
    ka_resp_free(&r);
    json_t *spec = get_spec("ok");
    cr_assert_not_null(json_object_get(json_object_get(spec, "free"), "anything"));
    json_decref(spec);
    /* Built-in kinds are not checked against a schema. */
    r = req("POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            "application/json", "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k\":\"v\"}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
}

Test(fields, warn_and_ignore_prune)
{
    /* No parameter means Warn: a Warning header per field, and the field is dropped. */
    ka_resp r = req("POST", COLL, "application/json",
                    "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"size\":1,\"extra\":true,\"more\":"
                    "2}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(r.warnings, "299 - \"unknown field \\\"spec.extra\\\"\"\n"
                                 "299 - \"unknown field \\\"spec.more\\\"\"\n");
    ka_resp_free(&r);
    json_t *spec = get_spec("w");
    cr_assert_null(json_object_get(spec, "extra"));
    cr_assert_eq(json_integer_value(json_object_get(spec, "size")), 1);
    json_decref(spec);
    r = req("POST", COLL "?fieldValidation=Ignore", "application/json",
            "{\"metadata\":{\"name\":\"i\"},\"spec\":{\"size\":1,\"extra\":true}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(r.warnings, "");
    ka_resp_free(&r);
    spec = get_spec("i");
    cr_assert_null(json_object_get(spec, "extra"));
    json_decref(spec);
}

Test(fields, updates_and_patches)
{
    ka_resp r = req("POST", COLL "?fieldValidation=Strict", "application/json",
                    "{\"metadata\":{\"name\":\"u\"},\"spec\":{\"size\":1}}");
    cr_assert_eq(r.status, 201, "%s", r.body);
    ka_resp_free(&r);
    json_t *st;
    r = req("PUT", COLL "/u?fieldValidation=Strict", "application/json",
            "{\"metadata\":{\"name\":\"u\"},\"spec\":{\"size\":2,\"extra\":1}}");
    cr_assert_str_eq(bad_request(&r, &st), "Gadget in version \"v1\" cannot be handled as a "
                                           "Gadget: strict decoding error: unknown field "
                                           "\"spec.extra\"");
    json_decref(st);
    ka_resp_free(&r);
    /* A patch is judged on its result, with the patch handler's wording. */
    r = req("PATCH", COLL "/u?fieldValidation=Strict", "application/merge-patch+json",
            "{\"spec\":{\"extra\":1}}");
    cr_assert_str_eq(bad_request(&r, &st), "strict decoding error: unknown field \"spec.extra\"");
    json_decref(st);
    ka_resp_free(&r);
    r = req("PATCH", COLL "/u?fieldValidation=Strict", "application/json-patch+json",
            "[{\"op\":\"add\",\"path\":\"/spec/tags\",\"value\":[{\"name\":\"a\",\"x\":1}]}]");
    cr_assert_str_eq(bad_request(&r, &st),
                     "strict decoding error: unknown field \"spec.tags[0].x\"");
    json_decref(st);
    ka_resp_free(&r);
    json_t *spec = get_spec("u");
    cr_assert_eq(json_integer_value(json_object_get(spec, "size")), 1, "nothing changed");
    json_decref(spec);
    r = req("PATCH", COLL "/u", "application/merge-patch+json",
            "{\"spec\":{\"size\":3,\"extra\":1}}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.warnings, "299 - \"unknown field \\\"spec.extra\\\"\"\n");
    ka_resp_free(&r);
    spec = get_spec("u");
    cr_assert_eq(json_integer_value(json_object_get(spec, "size")), 3);
    cr_assert_null(json_object_get(spec, "extra"));
    json_decref(spec);
    /* The status subresource is checked too. */
    r = req("PATCH", COLL "/u/status?fieldValidation=Strict", "application/merge-patch+json",
            "{\"status\":{\"state\":\"x\",\"phase\":\"y\"}}");
    cr_assert_str_eq(bad_request(&r, &st), "strict decoding error: unknown field \"status.phase\"");
    json_decref(st);
    ka_resp_free(&r);
}

Test(fields, unsupported_directive_is_invalid)
{
    ka_resp r = req("POST", COLL "?fieldValidation=Loud", "application/json",
                    "{\"metadata\":{\"name\":\"x\"}}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 422, "Invalid"),
                     "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
                     "value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
    json_t *d = json_object_get(st, "details");
    cr_assert_str_eq(json_string_value(json_object_get(d, "kind")), "CreateOptions");
    json_decref(st);
    ka_resp_free(&r);
    r = req("PATCH", COLL "/x?fieldValidation=Loud", "application/merge-patch+json", "{}");
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(strstr(r.body, "PatchOptions.meta.k8s.io"), "%s", r.body);
    ka_resp_free(&r);
}
