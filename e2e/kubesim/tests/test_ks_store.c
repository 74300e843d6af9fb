/* Tests for ks_store's types, reads and writes: metadata on create, errors with the API server's
 * messages, updates (conflicts, generation, status), finalizers, deletion, and admission. Lists
 * are in test_ks_list.c, watches in test_ks_watch.c. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "ks_store_test.h"

static ks_store *st;
static kst_types ty;

static void setup(void)
{
    st = ks_store_new(1000);
    cr_assert_not_null(st);
    kst_register_all(st, &ty);
}

static void teardown(void)
{
    ks_store_free(st);
    st = NULL;
}

TestSuite(store, .init = setup, .fini = teardown);

/* ---- store and types ---- */

Test(store, default_namespaces_exist_and_are_active)
{
    json_t *items = NULL;
    uint64_t rv = 0;
    cr_assert_eq(ks_list(st, ty.namespaces, NULL, NULL, &items, &rv, NULL, NULL), KC_OK);
    const char *want[] = {"default", "kube-node-lease", "kube-public", "kube-system"};
    cr_assert_eq(json_array_size(items), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *ns = json_array_get(items, i);
        cr_assert_str_eq(kst_meta(ns, "name"), want[i]);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ns, "status"), "phase")),
                         "Active");
        cr_assert_str_eq(json_string_value(json_object_get(ns, "apiVersion")), "v1");
        cr_assert_str_eq(json_string_value(json_object_get(ns, "kind")), "Namespace");
    }
    cr_assert_eq(rv, 5, "the RV starts at 1 and each default namespace is a write");
    cr_assert_eq(ks_store_rv(st), 5);
    json_decref(items);
}

Test(store, type_lookup_by_names_and_kind)
{
    cr_assert_eq(ks_store_type(st, "", "v1", "pods"), ty.pods);
    cr_assert_eq(ks_store_type(st, "", "v1", "pod"), ty.pods);
    cr_assert_eq(ks_store_type(st, "", "v1", "po"), ty.pods);
    cr_assert_eq(ks_store_type(st, "", NULL, "cm"), ty.configmaps);
    cr_assert_eq(ks_store_type(st, "apps", "v1", "deployments"), ty.deployments);
    cr_assert_null(ks_store_type(st, "", "v1", "deployments"), "group must match");
    cr_assert_null(ks_store_type(st, "apps", "v2", "deployments"), "version must match");
    cr_assert_null(ks_store_type(st, "", "v1", "nothing"));
    cr_assert_eq(ks_store_type_by_kind(st, "apps", NULL, "Deployment"), ty.deployments);
    cr_assert_eq(ks_store_type_by_kind(st, "example.com", "v1", "Widget"), ty.widgets);
    cr_assert_null(ks_store_type_by_kind(st, "", "v1", "Deployment"));
    cr_assert_str_eq(ty.pods->kind, "Pod");
    cr_assert_str_eq(ty.pods->short_names[0], "po");
}

Test(store, types_snapshot_generation_and_reregister)
{
    const ks_rtype **all = NULL;
    size_t n = ks_store_types(st, &all);
    cr_assert_eq(n, 6);
    free(all);
    uint64_t g0 = ks_store_types_generation(st);
    json_t *cols =
        json_pack("[{s:s, s:s, s:s}]", "name", "Size", "type", "string", "jsonPath", ".spec.size");
    ks_rtype again = {.group = "example.com",
                      .version = "v1",
                      .resource = "widgets",
                      .kind = "Widget",
                      .singular = "widget",
                      .has_status = true,
                      .categories = kst_all,
                      .printer_columns = cols};
    const ks_rtype *r = ks_store_register(st, &again);
    json_decref(cols);
    cr_assert_eq(r, ty.widgets, "re-registering keeps the pointer");
    cr_assert_gt(ks_store_types_generation(st), g0);
    cr_assert_eq(json_array_size(ty.widgets->printer_columns), 1);
    cr_assert_str_eq(ty.widgets->categories[0], "all");
    n = ks_store_types(st, &all);
    cr_assert_eq(n, 6, "no duplicate entry");
    free(all);
    uint64_t g1 = ks_store_types_generation(st);
    ks_store_unregister(st, ty.widgets);
    cr_assert_gt(ks_store_types_generation(st), g1);
    cr_assert_null(ks_store_type(st, "example.com", "v1", "widgets"));
    n = ks_store_types(st, &all);
    cr_assert_eq(n, 5);
    free(all);
    kc_err err;
    json_t *out = NULL;
    cr_assert_eq(ks_get(st, ty.widgets, NULL, "x", &out, &err), KC_ENOTFOUND);
    cr_assert_eq(ks_store_register(st, &again), ty.widgets, "served again, same pointer");
    cr_assert_eq(ks_store_type(st, "example.com", "v1", "widgets"), ty.widgets);
}

Test(store, versions_share_storage)
{
    const ks_rtype *beta = kst_register(st, "example.com", "v1beta1", "widgets", "Widget", "widget",
                                        false, true, NULL);
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w1", json_pack("{s:i}", "size", 3)));
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, beta, NULL, "w1", &got, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(got, "apiVersion")), "example.com/v1beta1");
    json_decref(got);
    ks_store_unregister(st, beta);
    cr_assert_eq(ks_count(st, ty.widgets), 1, "the other version keeps the objects");
}

Test(store, rfc3339_formats)
{
    char b[32], m[40];
    ks_now_rfc3339(b);
    ks_now_rfc3339_micro(m);
    cr_assert_eq(strlen(b), 20, "%s", b);
    cr_assert_eq(b[4], '-');
    cr_assert_eq(b[10], 'T');
    cr_assert_eq(b[19], 'Z');
    cr_assert_eq(strlen(m), 27, "%s", m);
    cr_assert_eq(m[19], '.');
    cr_assert_eq(m[26], 'Z');
    cr_assert(strncmp(b, m, 19) == 0 || b[18] != m[18], "same second (or a tick between)");
}

/* ---- create ---- */

Test(store, create_fills_metadata)
{
    json_t *in = kst_pod(NULL, "p1", NULL);
    json_t *meta = json_object_get(in, "metadata");
    json_object_set_new(meta, "resourceVersion", json_string("999"));
    json_object_set_new(meta, "uid", json_string("bogus"));
    json_object_set_new(meta, "deletionTimestamp", json_string("2020-01-01T00:00:00Z"));
    json_object_set_new(in, "status", json_pack("{s:s}", "phase", "Running"));
    uint64_t before = ks_store_rv(st);
    json_t *p = kst_create(st, ty.pods, "default", in);
    cr_assert_str_eq(kst_meta(p, "namespace"), "default");
    cr_assert_str_eq(kst_meta(p, "name"), "p1");
    cr_assert_eq(kst_rv(p), before + 1);
    cr_assert_eq(ks_store_rv(st), before + 1);
    cr_assert_eq(kst_meta_int(p, "generation"), 1);
    cr_assert_null(kst_meta(p, "deletionTimestamp"));
    const char *uid = kst_meta(p, "uid");
    cr_assert_eq(strlen(uid), 36);
    cr_assert_eq(uid[14], '4', "a version 4 UUID: %s", uid);
    cr_assert(strchr("89ab", uid[19]) != NULL, "RFC 4122 variant: %s", uid);
    cr_assert_eq(strlen(kst_meta(p, "creationTimestamp")), 20);
    cr_assert_str_eq(json_string_value(json_object_get(p, "apiVersion")), "v1");
    cr_assert_str_eq(json_string_value(json_object_get(p, "kind")), "Pod");
    json_t *d = kst_create(st, ty.deployments, "default", kst_obj(NULL, "d1", json_object()));
    cr_assert_str_eq(json_string_value(json_object_get(d, "apiVersion")), "apps/v1");
    cr_assert_str_neq(kst_meta(d, "uid"), uid);
    /* The caller's copy is private: changing it does not change the store. */
    json_object_set_new(json_object_get(p, "metadata"), "name", json_string("changed"));
    json_t *again = NULL;
    cr_assert_eq(ks_get(st, ty.pods, "default", "p1", &again, NULL), KC_OK);
    cr_assert_str_eq(kst_meta(again, "name"), "p1");
    json_decref(again);
    json_decref(p);
    json_decref(d);
}

Test(store, writes_copy_what_the_caller_still_holds)
{
    json_t *mine = kst_obj(NULL, "c", json_pack("{s:s}", "a", "1"));
    kst_create_free(st, ty.configmaps, "default", json_incref(mine));
    json_object_set_new(json_object_get(mine, "spec"), "a", json_string("changed"));
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, ty.configmaps, "default", "c", &got, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "spec"), "a")), "1");
    json_object_set_new(got, "status", json_pack("{s:s}", "x", "1"));
    cr_assert_eq(
        ks_update(st, ty.configmaps, "default", json_incref(got), KS_WRITE_STATUS, NULL, NULL),
        KC_OK);
    json_object_set_new(json_object_get(got, "status"), "x", json_string("changed"));
    json_t *again = NULL;
    cr_assert_eq(ks_get(st, ty.configmaps, "default", "c", &again, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(again, "status"), "x")),
                     "1");
    json_decref(again);
    json_decref(got);
    json_decref(mine);
}

static kc_code link_held(void *ud, json_t *obj, kc_err *err)
{
    /* Links in values the caller keeps: one under a new key, one deep in an array. */
    json_t *held = ud;
    json_object_set(json_object_get(obj, "spec"), "held", held);
    json_object_set_new(json_object_get(obj, "spec"), "list", json_pack("[i, O]", 1, held));
    json_object_set(obj, "status", json_object_get(held, "status"));
    return KC_OK;
}

Test(store, mutate_copies_what_its_function_still_holds)
{
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "m", json_pack("{s:s}", "a", "1")));
    json_t *held = json_pack("{s:s, s:{s:s}}", "v", "1", "status", "s", "1");
    for (int i = 0; i < 2; i++) {
        ks_write_kind kind = i ? KS_WRITE_STATUS : KS_WRITE_MAIN;
        cr_assert_eq(
            ks_mutate(st, ty.configmaps, "default", "m", kind, link_held, held, NULL, NULL), KC_OK);
    }
    /* The caller changes what it held: the stored state does not. */
    json_object_set_new(held, "v", json_string("changed"));
    json_object_set_new(json_object_get(held, "status"), "s", json_string("changed"));
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, ty.configmaps, "default", "m", &got, NULL), KC_OK);
    json_t *spec = json_object_get(got, "spec");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(spec, "held"), "v")), "1");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(spec, "list"), 1), "v")),
        "1");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "status"), "s")), "1");
    json_decref(got);
    json_decref(held);
}

Test(store, create_namespace_rules)
{
    kc_err err;
    json_t *out = NULL;
    cr_assert_eq(ks_create(st, ty.pods, "default", kst_pod("kube-system", "p", NULL), &out, &err),
                 KC_EBADREQUEST);
    cr_assert_null(out);
    cr_assert_eq(err.http_status, 400);
    cr_assert_str_eq(err.msg, "the namespace of the provided object does not match the namespace "
                              "sent on the request");
    /* The body's namespace is used when the request names none. */
    json_t *p = kst_create(st, ty.pods, NULL, kst_pod("kube-system", "p", NULL));
    cr_assert_str_eq(kst_meta(p, "namespace"), "kube-system");
    json_decref(p);
    cr_assert_eq(ks_create(st, ty.pods, NULL, kst_pod(NULL, "p", NULL), NULL, &err),
                 KC_EBADREQUEST);
    cr_assert_eq(ks_create(st, ty.pods, "nope", kst_pod(NULL, "p", NULL), NULL, &err),
                 KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "namespaces \"nope\" not found");
    cr_assert_eq(err.http_status, 404);
    /* Cluster-scoped objects lose any namespace. */
    json_t *n = kst_create(st, ty.nodes, "default", kst_obj("default", "n1", NULL));
    cr_assert_null(kst_meta(n, "namespace"));
    json_decref(n);
}

Test(store, namespace_check_waits_for_the_namespaces_type)
{
    ks_store *s2 = ks_store_new(0);
    const ks_rtype *cm =
        kst_register(s2, "", "v1", "configmaps", "ConfigMap", "configmap", true, false, NULL);
    /* Without a served namespaces type there is nothing to check against. */
    kst_create_free(s2, cm, "anything", kst_obj(NULL, "c", NULL));
    const ks_rtype *nst =
        kst_register(s2, "", "v1", "namespaces", "Namespace", "namespace", false, true, NULL);
    cr_assert_eq(ks_count(s2, nst), 4, "the default namespaces exist from the start");
    kc_err err;
    cr_assert_eq(ks_create(s2, cm, "other", kst_obj(NULL, "c", NULL), NULL, &err), KC_ENOTFOUND);
    kst_create_free(s2, cm, "kube-public", kst_obj(NULL, "c", NULL));
    ks_store_free(s2);
}

Test(store, create_name_rules)
{
    kc_err err;
    json_t *noname = json_pack("{s:{}}", "metadata");
    cr_assert_eq(ks_create(st, ty.configmaps, "default", noname, NULL, &err), KC_EINVALID);
    cr_assert_eq(err.http_status, 422);
    cr_assert_str_eq(err.msg, "ConfigMap \"\" is invalid: metadata.name: Required value: name or "
                              "generateName is required");
    cr_assert_eq(ks_create(st, ty.configmaps, "default", json_string("x"), NULL, &err),
                 KC_EBADREQUEST);
    for (int i = 0; i < 20; i++) {
        json_t *g = json_pack("{s:{s:s}}", "metadata", "generateName", "web-");
        json_t *out = kst_create(st, ty.configmaps, "default", g);
        const char *name = kst_meta(out, "name");
        cr_assert_eq(strlen(name), 9, "%s", name);
        cr_assert_eq(strncmp(name, "web-", 4), 0);
        for (int k = 4; k < 9; k++)
            cr_assert(strchr("bcdfghjklmnpqrstvwxz2456789", name[k]) != NULL, "%s", name);
        json_decref(out);
    }
    cr_assert_eq(ks_count(st, ty.configmaps), 20, "generated names do not collide");
}

Test(store, create_already_exists)
{
    kc_err err;
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    cr_assert_eq(ks_create(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL), NULL, &err),
                 KC_EALREADYEXISTS);
    cr_assert_str_eq(err.msg, "configmaps \"c\" already exists");
    cr_assert_eq(err.http_status, 409);
    kst_create_free(st, ty.configmaps, "kube-system", kst_obj(NULL, "c", NULL));
    kst_create_free(st, ty.deployments, "default", kst_obj(NULL, "d", NULL));
    cr_assert_eq(ks_create(st, ty.deployments, "default", kst_obj(NULL, "d", NULL), NULL, &err),
                 KC_EALREADYEXISTS);
    cr_assert_str_eq(err.msg, "deployments.apps \"d\" already exists");
}

Test(store, get_not_found_messages)
{
    kc_err err;
    json_t *out = (json_t *)1;
    cr_assert_eq(ks_get(st, ty.pods, "default", "ghost", &out, &err), KC_ENOTFOUND);
    cr_assert_null(out);
    cr_assert_str_eq(err.msg, "pods \"ghost\" not found");
    cr_assert_eq(ks_get(st, ty.widgets, NULL, "ghost", &out, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "widgets.example.com \"ghost\" not found");
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    cr_assert_eq(ks_get(st, ty.configmaps, "kube-system", "c", &out, &err), KC_ENOTFOUND,
                 "objects are per namespace");
}

Test(store, terminating_namespace_refuses_content)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "team", NULL));
    kst_create_free(st, ty.configmaps, "team", kst_obj(NULL, "c", NULL));
    json_t *ns = NULL;
    cr_assert_eq(ks_delete(st, ty.namespaces, NULL, "team", NULL, &ns, NULL), KC_OK);
    cr_assert_not_null(kst_meta(ns, "deletionTimestamp"));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ns, "status"), "phase")),
                     "Terminating");
    json_decref(ns);
    kc_err err;
    cr_assert_eq(ks_create(st, ty.configmaps, "team", kst_obj(NULL, "d", NULL), NULL, &err),
                 KC_EFORBIDDEN);
    cr_assert_eq(err.http_status, 403);
    cr_assert_str_eq(err.msg, "configmaps \"d\" is forbidden: unable to create new content in "
                              "namespace team because it is being terminated");
}

/* ---- update ---- */

Test(store, update_conflicts_on_stale_rv)
{
    json_t *c = kst_create(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    json_t *stale = json_deep_copy(c);
    json_object_set_new(c, "data", json_pack("{s:s}", "k", "v1"));
    json_t *c2 = NULL;
    cr_assert_eq(ks_update(st, ty.configmaps, "default", c, KS_WRITE_MAIN, &c2, NULL), KC_OK);
    cr_assert_gt(kst_rv(c2), kst_rv(stale));
    kc_err err;
    json_object_set_new(stale, "data", json_pack("{s:s}", "k", "v2"));
    cr_assert_eq(
        ks_update(st, ty.configmaps, "default", json_incref(stale), KS_WRITE_MAIN, NULL, &err),
        KC_ECONFLICT);
    cr_assert_eq(err.http_status, 409);
    cr_assert_str_eq(err.msg, "Operation cannot be fulfilled on configmaps \"c\": the object has "
                              "been modified; please apply your changes to the latest version and "
                              "try again");
    /* Without a resourceVersion the write is unconditional. */
    json_object_del(json_object_get(stale, "metadata"), "resourceVersion");
    json_t *c3 = NULL;
    cr_assert_eq(ks_update(st, ty.configmaps, "default", stale, KS_WRITE_MAIN, &c3, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c3, "data"), "k")), "v2");
    cr_assert_str_eq(kst_meta(c3, "uid"), kst_meta(c2, "uid"));
    cr_assert_str_eq(kst_meta(c3, "creationTimestamp"), kst_meta(c2, "creationTimestamp"));
    /* A group type names its group in the message. */
    json_t *d = kst_create(st, ty.deployments, "default", kst_obj(NULL, "d", NULL));
    json_object_set_new(json_object_get(d, "metadata"), "resourceVersion", json_string("1"));
    cr_assert_eq(ks_update(st, ty.deployments, "default", d, KS_WRITE_MAIN, NULL, &err),
                 KC_ECONFLICT);
    cr_assert(strstr(err.msg, "on deployments.apps \"d\": the object has been modified"), "%s",
              err.msg);
    json_decref(c2);
    json_decref(c3);
}

Test(store, update_not_found_uid_and_namespace)
{
    kc_err err;
    cr_assert_eq(ks_update(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL), KS_WRITE_MAIN,
                           NULL, &err),
                 KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "configmaps \"c\" not found");
    json_t *c = kst_create(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    json_t *wrong = json_deep_copy(c);
    json_object_set_new(json_object_get(wrong, "metadata"), "uid", json_string("other-uid"));
    cr_assert_eq(ks_update(st, ty.configmaps, "default", wrong, KS_WRITE_MAIN, NULL, &err),
                 KC_ECONFLICT);
    char want[256];
    snprintf(want, sizeof(want),
             "Precondition failed: UID in precondition: other-uid, UID in object meta: %s",
             kst_meta(c, "uid"));
    cr_assert_str_eq(err.msg, want);
    cr_assert_eq(
        ks_update(st, ty.configmaps, "kube-system", json_incref(c), KS_WRITE_MAIN, NULL, &err),
        KC_EBADREQUEST);
    json_t *noname = json_pack("{s:{}}", "metadata");
    cr_assert_eq(ks_update(st, ty.configmaps, "default", noname, KS_WRITE_MAIN, NULL, &err),
                 KC_EINVALID);
    json_decref(c);
}

Test(store, generation_counts_spec_changes_only)
{
    json_t *d = kst_create(st, ty.deployments, "default",
                           kst_obj(NULL, "d", json_pack("{s:i}", "replicas", 1)));
    cr_assert_eq(kst_meta_int(d, "generation"), 1);
    kst_set_label(d, "app", "web");
    json_t *d2 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d, KS_WRITE_MAIN, &d2, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(d2, "generation"), 1, "labels are metadata");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(d2, "metadata"), "labels"), "app")),
                     "web");
    json_object_set_new(json_object_get(d2, "spec"), "replicas", json_integer(3));
    json_t *d3 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d2, KS_WRITE_MAIN, &d3, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(d3, "generation"), 2);
    json_object_set_new(d3, "status", json_pack("{s:i}", "observedGeneration", 2));
    json_t *d4 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d3, KS_WRITE_STATUS, &d4, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(d4, "generation"), 2, "status is not a new generation");
    /* A client cannot set the generation itself. */
    json_object_set_new(json_object_get(d4, "metadata"), "generation", json_integer(77));
    json_object_set_new(json_object_get(d4, "spec"), "paused", json_true());
    json_t *d5 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d4, KS_WRITE_MAIN, &d5, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(d5, "generation"), 3);
    json_decref(d5);
}

Test(store, status_subresource_rules)
{
    json_t *in = kst_obj(NULL, "d", json_pack("{s:i}", "replicas", 1));
    json_object_set_new(in, "status", json_pack("{s:i}", "replicas", 9));
    json_t *d = kst_create(st, ty.deployments, "default", in);
    /* A main write cannot change status... */
    json_object_set_new(d, "status", json_pack("{s:i}", "replicas", 5));
    json_object_set_new(json_object_get(d, "spec"), "replicas", json_integer(2));
    json_t *d2 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d, KS_WRITE_MAIN, &d2, NULL), KC_OK);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d2, "status"), "replicas")), 9);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d2, "spec"), "replicas")), 2);
    /* ...and a status write changes nothing else, metadata included. */
    json_object_set_new(d2, "status", json_pack("{s:i}", "replicas", 2));
    json_object_set_new(json_object_get(d2, "spec"), "replicas", json_integer(7));
    kst_set_label(d2, "x", "y");
    json_t *d3 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d2, KS_WRITE_STATUS, &d3, NULL), KC_OK);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d3, "status"), "replicas")), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d3, "spec"), "replicas")), 2);
    cr_assert_null(json_object_get(json_object_get(d3, "metadata"), "labels"));
    /* Types without /status take status in main writes. */
    json_t *c = kst_create(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    json_object_set_new(c, "status", json_pack("{s:s}", "a", "b"));
    json_t *c2 = NULL;
    cr_assert_eq(ks_update(st, ty.configmaps, "default", c, KS_WRITE_MAIN, &c2, NULL), KC_OK);
    cr_assert_not_null(json_object_get(c2, "status"));
    json_decref(c2);
    json_decref(d3);
}

Test(store, noop_update_keeps_rv)
{
    json_t *c =
        kst_create(st, ty.configmaps, "default", kst_obj(NULL, "c", json_pack("{s:s}", "a", "b")));
    uint64_t rv = ks_store_rv(st);
    json_t *same = NULL;
    cr_assert_eq(
        ks_update(st, ty.configmaps, "default", json_deep_copy(c), KS_WRITE_MAIN, &same, NULL),
        KC_OK);
    cr_assert_eq(ks_store_rv(st), rv, "nothing changed: no write");
    cr_assert_eq(kst_rv(same), kst_rv(c));
    ks_store_stats s;
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.updates, 0);
    /* Without a resourceVersion, equal content is still a no-op. */
    json_object_del(json_object_get(c, "metadata"), "resourceVersion");
    cr_assert_eq(ks_update(st, ty.configmaps, "default", c, KS_WRITE_MAIN, NULL, NULL), KC_OK);
    cr_assert_eq(ks_store_rv(st), rv);
    json_decref(same);
}

static kc_code add_label(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    kst_set_label(obj, "touched", ud);
    json_object_set_new(json_object_get(obj, "metadata"), "name", json_string("renamed"));
    return KC_OK;
}

static kc_code refuse(void *ud, json_t *obj, kc_err *err)
{
    (void)ud;
    (void)obj;
    return kc_err_set(err, KC_EINVALID, "refused by the test");
}

Test(store, mutate_read_modify_write)
{
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    json_t *out = NULL;
    cr_assert_eq(
        ks_mutate(st, ty.configmaps, "default", "c", KS_WRITE_MAIN, add_label, "yes", &out, NULL),
        KC_OK);
    cr_assert_str_eq(kst_meta(out, "name"), "c", "the identity cannot be mutated");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(out, "metadata"), "labels"), "touched")),
                     "yes");
    uint64_t rv = ks_store_rv(st);
    kc_err err;
    cr_assert_eq(
        ks_mutate(st, ty.configmaps, "default", "c", KS_WRITE_MAIN, refuse, NULL, NULL, &err),
        KC_EINVALID);
    cr_assert_str_eq(err.msg, "refused by the test");
    cr_assert_eq(ks_store_rv(st), rv);
    cr_assert_eq(
        ks_mutate(st, ty.configmaps, "default", "nope", KS_WRITE_MAIN, refuse, NULL, NULL, &err),
        KC_ENOTFOUND);
    json_decref(out);
}

/* ---- finalizers and deletion ---- */

Test(store, finalizers_hold_deletion)
{
    json_t *in = kst_obj(NULL, "w", NULL);
    json_object_set_new(json_object_get(in, "metadata"), "finalizers",
                        json_pack("[s]", "example.com/cleanup"));
    kst_create_free(st, ty.widgets, NULL, in);
    json_t *w = NULL;
    cr_assert_eq(ks_delete(st, ty.widgets, NULL, "w", NULL, &w, NULL), KC_OK);
    cr_assert_not_null(kst_meta(w, "deletionTimestamp"));
    cr_assert_eq(kst_meta_int(w, "deletionGracePeriodSeconds"), 0);
    cr_assert_not_null(
        json_object_get(json_object_get(w, "metadata"), "deletionGracePeriodSeconds"));
    cr_assert_eq(ks_count(st, ty.widgets), 1);
    /* Deleting again changes nothing. */
    uint64_t rv = ks_store_rv(st);
    json_t *again = NULL;
    cr_assert_eq(ks_delete(st, ty.widgets, NULL, "w", NULL, &again, NULL), KC_OK);
    cr_assert_eq(ks_store_rv(st), rv);
    cr_assert_str_eq(kst_meta(again, "deletionTimestamp"), kst_meta(w, "deletionTimestamp"));
    json_decref(again);
    /* No new finalizers once deletion started. */
    json_t *more = json_deep_copy(w);
    json_array_append_new(json_object_get(json_object_get(more, "metadata"), "finalizers"),
                          json_string("late"));
    kc_err err;
    cr_assert_eq(ks_update(st, ty.widgets, NULL, more, KS_WRITE_MAIN, NULL, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "Widget \"w\" is invalid: metadata.finalizers: Forbidden: no new "
                              "finalizers can be added if the object is being deleted, found new "
                              "finalizers []string{\"late\"}");
    /* The client cannot clear deletionTimestamp. */
    json_t *clear = json_deep_copy(w);
    json_object_del(json_object_get(clear, "metadata"), "deletionTimestamp");
    kst_set_label(clear, "a", "b");
    json_t *still = NULL;
    cr_assert_eq(ks_update(st, ty.widgets, NULL, clear, KS_WRITE_MAIN, &still, NULL), KC_OK);
    cr_assert_not_null(kst_meta(still, "deletionTimestamp"));
    json_decref(still);
    /* Removing the last finalizer deletes it. */
    json_object_set_new(json_object_get(w, "metadata"), "finalizers", json_array());
    json_object_del(json_object_get(w, "metadata"), "resourceVersion");
    json_t *gone = NULL;
    cr_assert_eq(ks_update(st, ty.widgets, NULL, w, KS_WRITE_MAIN, &gone, NULL), KC_OK);
    cr_assert_eq(kst_rv(gone), ks_store_rv(st), "the final state carries the deletion's RV");
    cr_assert_eq(ks_count(st, ty.widgets), 0);
    cr_assert_eq(ks_get(st, ty.widgets, NULL, "w", &again, NULL), KC_ENOTFOUND);
    json_decref(gone);
}

Test(store, delete_propagation_finalizers)
{
    kst_create_free(st, ty.deployments, "default", kst_obj(NULL, "fg", NULL));
    kst_create_free(st, ty.deployments, "default", kst_obj(NULL, "or", NULL));
    kst_create_free(st, ty.deployments, "default", kst_obj(NULL, "bg", NULL));
    ks_delete_opts fg = {.propagation = KS_PROPAGATE_FOREGROUND, .grace_period_seconds = -1};
    ks_delete_opts orph = {.propagation = KS_PROPAGATE_ORPHAN, .grace_period_seconds = -1};
    ks_delete_opts bg = {.propagation = KS_PROPAGATE_BACKGROUND, .grace_period_seconds = -1};
    json_t *o = NULL;
    cr_assert_eq(ks_delete(st, ty.deployments, "default", "fg", &fg, &o, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(o, "metadata"), "finalizers"), 0)),
                     "foregroundDeletion");
    cr_assert_not_null(kst_meta(o, "deletionTimestamp"));
    json_decref(o);
    cr_assert_eq(ks_delete(st, ty.deployments, "default", "or", &orph, &o, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(o, "metadata"), "finalizers"), 0)),
                     "orphan");
    json_decref(o);
    cr_assert_eq(ks_delete(st, ty.deployments, "default", "bg", &bg, &o, NULL), KC_OK);
    cr_assert_str_eq(kst_meta(o, "name"), "bg");
    cr_assert_eq(kst_rv(o), ks_store_rv(st));
    json_decref(o);
    cr_assert_eq(ks_count(st, ty.deployments), 2, "background deletes at once");
}

Test(store, delete_preconditions)
{
    json_t *c = kst_create(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    kc_err err;
    ks_delete_opts o = {.precondition_uid = "not-it", .grace_period_seconds = -1};
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", &o, NULL, &err), KC_ECONFLICT);
    char want[256];
    snprintf(want, sizeof(want),
             "Precondition failed: UID in precondition: not-it, UID in object meta: %s",
             kst_meta(c, "uid"));
    cr_assert_str_eq(err.msg, want);
    ks_delete_opts r = {.precondition_resource_version = "1", .grace_period_seconds = -1};
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", &r, NULL, &err), KC_ECONFLICT);
    snprintf(want, sizeof(want),
             "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object "
             "meta: %s",
             kst_meta(c, "resourceVersion"));
    cr_assert_str_eq(err.msg, want);
    ks_delete_opts ok = {.precondition_uid = kst_meta(c, "uid"),
                         .precondition_resource_version = kst_meta(c, "resourceVersion"),
                         .grace_period_seconds = -1};
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", &ok, NULL, &err), KC_OK);
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", NULL, NULL, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "configmaps \"c\" not found");
    json_decref(c);
}

Test(store, pod_graceful_deletion)
{
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "unbound", NULL));
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "bound", "node-1"));
    json_t *custom = kst_pod(NULL, "custom", "node-1");
    json_object_set_new(json_object_get(custom, "spec"), "terminationGracePeriodSeconds",
                        json_integer(5));
    kst_create_free(st, ty.pods, "default", custom);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "now", "node-1"));
    json_t *o = NULL;
    cr_assert_eq(ks_delete(st, ty.pods, "default", "unbound", NULL, &o, NULL), KC_OK);
    json_decref(o);
    cr_assert_eq(ks_get(st, ty.pods, "default", "unbound", &o, NULL), KC_ENOTFOUND,
                 "a pod on no node goes at once");
    cr_assert_eq(ks_delete(st, ty.pods, "default", "bound", NULL, &o, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(o, "deletionGracePeriodSeconds"), 30);
    cr_assert_not_null(kst_meta(o, "deletionTimestamp"));
    json_decref(o);
    cr_assert_eq(ks_delete(st, ty.pods, "default", "custom", NULL, &o, NULL), KC_OK);
    cr_assert_eq(kst_meta_int(o, "deletionGracePeriodSeconds"), 5);
    json_decref(o);
    /* The kubelet's status writes during the grace period do not remove it. */
    json_t *s =
        json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", "bound", "status", "phase", "Running");
    cr_assert_eq(ks_update(st, ty.pods, "default", s, KS_WRITE_STATUS, NULL, NULL), KC_OK);
    cr_assert_eq(ks_get(st, ty.pods, "default", "bound", &o, NULL), KC_OK);
    json_decref(o);
    /* Grace 0 (the kubelet's final delete) removes it. */
    ks_delete_opts zero = {.grace_period_seconds = 0};
    cr_assert_eq(ks_delete(st, ty.pods, "default", "bound", &zero, &o, NULL), KC_OK);
    json_decref(o);
    cr_assert_eq(ks_get(st, ty.pods, "default", "bound", &o, NULL), KC_ENOTFOUND);
    cr_assert_eq(ks_delete(st, ty.pods, "default", "now", &zero, NULL, NULL), KC_OK);
    cr_assert_eq(ks_count(st, ty.pods), 1);
}

static kc_code drop_spec_finalizers(void *ud, json_t *obj, kc_err *err)
{
    (void)ud;
    (void)err;
    json_object_del(json_object_get(obj, "spec"), "finalizers");
    return KC_OK;
}

Test(store, namespace_deletion_lifecycle)
{
    kst_create_free(st, ty.namespaces, NULL, kst_obj(NULL, "gone", NULL));
    json_t *ns = NULL;
    cr_assert_eq(ks_get(st, ty.namespaces, NULL, "gone", &ns, NULL), KC_OK);
    cr_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(ns, "spec"), "finalizers"), 0)),
                     "kubernetes");
    json_decref(ns);
    cr_assert_eq(ks_delete(st, ty.namespaces, NULL, "gone", NULL, NULL, NULL), KC_OK);
    cr_assert_eq(ks_count(st, ty.namespaces), 5, "waits for the namespace controller");
    /* A PUT cannot drop spec.finalizers (only /finalize can)... */
    json_t *fin =
        json_pack("{s:{s:s}, s:{s:[]}}", "metadata", "name", "gone", "spec", "finalizers");
    json_t *out = NULL;
    cr_assert_eq(ks_update(st, ty.namespaces, NULL, fin, KS_WRITE_MAIN, &out, NULL), KC_OK);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(out, "spec"), "finalizers")), 1);
    json_decref(out);
    cr_assert_eq(ks_count(st, ty.namespaces), 5);
    /* ...the namespace controller drops them (ks_mutate) once the namespace is empty. */
    cr_assert_eq(ks_mutate(st, ty.namespaces, NULL, "gone", KS_WRITE_MAIN, drop_spec_finalizers,
                           NULL, &out, NULL),
                 KC_OK);
    cr_assert_not_null(kst_meta(out, "deletionTimestamp"), "the final state is returned");
    json_decref(out);
    cr_assert_eq(ks_count(st, ty.namespaces), 4);
}

/* ---- admission ---- */

typedef struct admit_log {
    int creates, updates, status_writes;
} admit_log;

static kc_code admit(void *ud, const ks_rtype *t, const json_t *old, json_t *obj, bool status_write,
                     kc_err *err)
{
    admit_log *log = ud;
    if (!old)
        log->creates++;
    else if (status_write)
        log->status_writes++;
    else
        log->updates++;
    const char *name = kst_meta(obj, "name");
    if (name && !strcmp(name, "bad"))
        return kc_err_set(err, KC_EINVALID, "%s \"bad\" is invalid: spec: Required value", t->kind);
    if (!json_object_get(obj, "spec"))
        json_object_set_new(obj, "spec", json_pack("{s:i}", "replicas", 1)); /* defaulting */
    return KC_OK;
}

Test(store, admission_defaults_and_rejects)
{
    admit_log log = {0};
    ks_store_set_admission(st, admit, &log);
    json_t *d = kst_create(st, ty.deployments, "default", kst_obj(NULL, "d", NULL));
    cr_assert_eq(log.creates, 1);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(d, "spec"), "replicas")), 1);
    cr_assert_not_null(kst_meta(d, "uid"), "metadata is filled before admission");
    kc_err err;
    uint64_t rv = ks_store_rv(st);
    cr_assert_eq(ks_create(st, ty.deployments, "default", kst_obj(NULL, "bad", NULL), NULL, &err),
                 KC_EINVALID);
    cr_assert_str_eq(err.msg, "Deployment \"bad\" is invalid: spec: Required value");
    cr_assert_eq(ks_store_rv(st), rv, "a rejected write commits nothing");
    json_object_set_new(d, "status", json_pack("{s:i}", "replicas", 1));
    cr_assert_eq(
        ks_update(st, ty.deployments, "default", json_incref(d), KS_WRITE_STATUS, NULL, NULL),
        KC_OK);
    cr_assert_eq(log.status_writes, 1);
    json_object_del(d, "spec");
    json_object_del(json_object_get(d, "metadata"), "resourceVersion");
    json_t *d2 = NULL;
    cr_assert_eq(ks_update(st, ty.deployments, "default", d, KS_WRITE_MAIN, &d2, NULL), KC_OK);
    cr_assert_eq(log.updates, 1);
    cr_assert_not_null(json_object_get(d2, "spec"), "admission defaulted the update");
    json_decref(d2);
}

Test(store, stats_count_writes)
{
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    json_t *c = NULL;
    cr_assert_eq(
        ks_mutate(st, ty.configmaps, "default", "c", KS_WRITE_MAIN, add_label, "v", &c, NULL),
        KC_OK);
    json_decref(c);
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", NULL, NULL, NULL), KC_OK);
    ks_store_stats s;
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.creates, 5, "4 default namespaces and the configmap");
    cr_assert_eq(s.updates, 1);
    cr_assert_eq(s.deletes, 1);
    cr_assert_eq(s.events, 7);
    cr_assert_eq(s.watchers, 0);
    cr_assert_eq(ks_count(st, ty.configmaps), 0);
}
