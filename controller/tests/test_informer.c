/* Tests for kc_informer against fakeapi: list and watch, cache reads, paging, transforms,
 * selectors, stopping, concurrent readers. Fault handling is in test_informer_faults.c. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "informer_env.h"

Test(informer, initial_list_then_watch_events)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "cm-%d", i);
        ie_put_cm(&e, i % 2 ? "a" : "b", name, "v0");
    }
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    cr_assert_not(kc_informer_synced(e.inf));
    ie_start_synced(&e);
    cr_assert_eq(e.adds, 5);
    cr_assert_eq(e.adds_before_synced, 5, "synced must turn true only after the initial adds");
    cr_assert_eq(kc_informer_count(e.inf), 5);
    ie_assert_consistent(&e);

    /* The list asked for pages of 500; the watch resumes from the list's version. */
    ie_wait_watches(&e, 1);
    char *l0 = fakeapi_request_line(e.api, 0), *l1 = fakeapi_request_line(e.api, 1);
    cr_assert_str_eq(l0, "GET /api/v1/configmaps?limit=500");
    char want[128];
    snprintf(want, sizeof(want),
             "GET /api/v1/configmaps?resourceVersion=%llu&watch=true"
             "&allowWatchBookmarks=true&timeoutSeconds=",
             (unsigned long long)fakeapi_rv(e.api));
    cr_assert(strncmp(l1, want, strlen(want)) == 0, "watch request was %s", l1);
    long to = atol(l1 + strlen(want));
    cr_assert(to >= 290 && to <= 600, "timeoutSeconds %ld outside [290, 600]", to);
    free(l0);
    free(l1);

    /* Add, modify, delete while watching. */
    ie_put_cm(&e, "a", "new", "x");
    ie_put_cm(&e, "a", "cm-1", "v1");
    fakeapi_delete(e.api, "b", "cm-0");
    ie_wait_events(&e, 8);
    ie_settle(&e, 50);
    cr_assert_eq(e.adds, 6);
    cr_assert_eq(e.updates, 1);
    cr_assert_eq(e.deletes, 1);
    ie_assert_consistent(&e);

    json_t *got = kc_informer_get(e.inf, "a", "cm-1");
    cr_assert_not_null(got);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "data"), "v")), "v1");
    cr_assert_gt(got->refcount, 1, "get hands out a new reference to the shared object");
    json_decref(got);
    cr_assert_null(kc_informer_get(e.inf, "b", "cm-0"));
    cr_assert_null(kc_informer_get(e.inf, NULL, "cm-1"), "namespaced keys need the namespace");

    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.lists, 1);
    cr_assert_eq(s.relists, 0);
    cr_assert_eq(s.pages, 1);
    cr_assert_eq(s.watches, 1);
    cr_assert_eq(s.events, 3);
    cr_assert_eq(s.errors, 0);
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)fakeapi_rv(e.api));
    cr_assert_str_eq(s.resource_version, rv);
    ie_fini(&e);
}

/* Counts visits, checks each key against its object, stops after the fourth. */
static bool count_keys(const char *key, const json_t *obj, void *ud)
{
    int *n = ud;
    (*n)++;
    char want[64];
    snprintf(want, sizeof(want), "ns/%s",
             json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
    cr_assert_str_eq(key, want);
    return *n < 4;
}

Test(informer, reads_list_foreach_and_paging)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%02d", i);
        ie_put_cm(&e, "ns", name, "v");
    }
    kc_informer_opts o = ie_fast_opts();
    o.page_size = 3;
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.pages, 4, "10 objects in pages of 3");
    cr_assert_eq(s.lists, 1);
    cr_assert_eq(e.adds, 10);
    ie_assert_consistent(&e);
    char *l1 = fakeapi_request_line(e.api, 1);
    cr_assert_str_eq(l1, "GET /api/v1/configmaps?limit=3&continue=snap-0-3");
    free(l1);

    json_t *arr = kc_informer_list(e.inf);
    cr_assert_eq(json_array_size(arr), 10);
    json_decref(arr);
    int n = 0;
    kc_informer_foreach(e.inf, count_keys, &n);
    cr_assert_eq(n, 4, "foreach stops when fn returns false");
    ie_fini(&e);
}

static void failed_page_restarts_list(int status, const char *reason)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%d", i);
        ie_put_cm(&e, "ns", name, "v");
    }
    fakeapi_fail_at(e.api, 1, 1, status, reason); /* the second page */
    kc_informer_opts o = ie_fast_opts();
    o.page_size = 3;
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    kc_informer_stats s = ie_stats(&e);
    cr_assert_eq(s.errors, 1);
    cr_assert_eq(s.pages, 4, "page 1, then a fresh list of 3 pages");
    cr_assert_eq(s.lists, 1);
    cr_assert_eq(e.adds, 7, "items of the abandoned list must not be added twice");
    char *l = fakeapi_request_line(e.api, 2);
    cr_assert_str_eq(l, "GET /api/v1/configmaps?limit=3", "the list starts over");
    free(l);
    ie_assert_consistent(&e);
    ie_fini(&e);
}

Test(informer, expired_continue_token_restarts_the_list)
{
    failed_page_restarts_list(410, "Expired");
}

Test(informer, failed_page_restarts_the_list)
{
    failed_page_restarts_list(500, "InternalError");
}

/* The acceptance criterion: a watch cut mid-stream resumes with no event lost or repeated. */
static json_t *keep_name_and_data(json_t *obj, const kc_resource *res, void *ud)
{
    (void)res;
    atomic_int *calls = ud;
    atomic_fetch_add(calls, 1);
    json_t *md = json_object_get(obj, "metadata");
    json_t *slim =
        json_pack("{s:{s:O, s:O, s:O}, s:O}", "metadata", "name", json_object_get(md, "name"),
                  "namespace", json_object_get(md, "namespace"), "resourceVersion",
                  json_object_get(md, "resourceVersion"), "data", json_object_get(obj, "data"));
    json_decref(obj);
    return slim;
}

static bool saw_two(ie_env *e)
{
    return ie_events(e) >= 2;
}

Test(informer, custom_transform_applies_to_cache_and_handlers)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    atomic_int calls = 0;
    kc_informer_opts o = ie_fast_opts();
    o.transform = keep_name_and_data;
    o.transform_ud = &calls;
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    ie_put_cm(&e, "ns", "a", "1");
    cr_assert(ie_wait_for(&e, saw_two, 20000));
    cr_assert_eq(atomic_load(&calls), 2, "once per listed object and per event");
    json_t *a = kc_informer_get(e.inf, "ns", "a");
    cr_assert_null(json_object_get(a, "kind"), "transform must have dropped kind");
    cr_assert_null(json_object_get(json_object_get(a, "metadata"), "labels"));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "data"), "v")), "1");
    json_t *m = json_object_get(e.mirror, "ns/a");
    cr_assert_null(json_object_get(m, "kind"), "handlers see the transformed object");
    json_decref(a);
    ie_fini(&e);
}

Test(informer, default_transform_trims_nodes_and_managed_fields)
{
    ie_env e;
    ie_init(&e, &KC_RES_NODES);
    json_t *node = json_pack("{s:s, s:{s:s, s:[{s:s}]}, s:{s:[{s:[s]}], s:[{s:s, s:s}]}}", "kind",
                             "Node", "metadata", "name", "n1", "managedFields", "manager",
                             "kubelet", "status", "images", "names", "nvcr.io/nvidia/driver:550",
                             "conditions", "type", "Ready", "status", "True");
    fakeapi_put(e.api, node);
    json_decref(node);
    ie_informer(&e, &KC_RES_NODES, NULL, NULL);
    ie_start_synced(&e);
    json_t *n = kc_informer_get(e.inf, NULL, "n1");
    cr_assert_not_null(n, "cluster-scoped objects are keyed by name");
    cr_assert_null(json_object_get(json_object_get(n, "metadata"), "managedFields"));
    cr_assert_null(json_object_get(json_object_get(n, "status"), "images"));
    cr_assert_eq(json_array_size(json_object_get(json_object_get(n, "status"), "conditions")), 1,
                 "the rest of the status stays");
    json_decref(n);
    ie_fini(&e);

    /* no_transform keeps objects exactly as served. */
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "a", "0");
    kc_informer_opts o = ie_fast_opts();
    o.no_transform = true;
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    json_t *a = kc_informer_get(e.inf, "ns", "a");
    cr_assert_not_null(json_object_get(json_object_get(a, "metadata"), "managedFields"));
    json_decref(a);
    ie_fini(&e);
}

Test(informer, label_selector_is_sent_and_respected)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    ie_put_cm(&e, "ns", "labelled", "0");
    json_t *plain = json_pack("{s:{s:s, s:s}}", "metadata", "name", "plain", "namespace", "ns");
    fakeapi_put(e.api, plain);
    json_decref(plain);
    kc_informer_opts o = ie_fast_opts();
    o.label_selector = "app=demo";
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    cr_assert_eq(kc_informer_count(e.inf), 1);
    json_t *l = kc_informer_get(e.inf, "ns", "labelled");
    cr_assert_not_null(l);
    json_decref(l);
    char *line = fakeapi_request_line(e.api, 0);
    cr_assert(strstr(line, "labelSelector=app%3Ddemo"), "%s", line);
    free(line);
    ie_fini(&e);
}

Test(informer, stop_from_handler_stops_everything)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "s%d", i);
        ie_put_cm(&e, "ns", name, "0");
    }
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    e.stop_in_add = true;
    kc_err err;
    cr_assert_eq(kc_informer_start(e.inf, &err), KC_OK);
    ie_wait_events(&e, 1);
    ie_settle(&e, 100);
    cr_assert_eq(e.adds, 1, "no handler after stop");
    cr_assert_not(kc_informer_synced(e.inf));
    ie_put_cm(&e, "ns", "more", "0");
    ie_settle(&e, 50);
    cr_assert_eq(ie_events(&e), 1);
    fakeapi_stats fs;
    fakeapi_get_stats(e.api, &fs);
    cr_assert_eq(fs.watches, 0, "no watch after stop");
    cr_assert_eq(kc_informer_start(e.inf, &err), KC_EARG, "a stopped informer cannot restart");
    kc_informer_stop(e.inf); /* idempotent */
    ie_fini(&e);
}

Test(informer, stop_while_watching_and_bad_arguments)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    kc_informer_stop(e.inf);
    ie_put_cm(&e, "ns", "late", "0");
    ie_settle(&e, 50);
    cr_assert_eq(ie_events(&e), 0);
    cr_assert(kc_informer_synced(e.inf), "the cache stays readable after stop");

    kc_informer *x = NULL;
    kc_err err;
    cr_assert_eq(kc_informer_new(NULL, &e.loop, &KC_RES_PODS, NULL, NULL, NULL, &x, &err), KC_EARG);
    cr_assert_eq(kc_informer_new(e.c, &e.loop, NULL, NULL, NULL, NULL, &x, &err), KC_EARG);
    cr_assert_eq(kc_informer_new(e.c, &e.loop, &KC_RES_PODS, NULL, NULL, NULL, NULL, &err),
                 KC_EARG);
    cr_assert_null(x);
    /* Created and freed without ever starting. */
    cr_assert_eq(kc_informer_new(e.c, &e.loop, &KC_RES_PODS, "ns", NULL, NULL, &x, &err), KC_OK);
    cr_assert_not(kc_informer_synced(x));
    cr_assert_eq(kc_informer_count(x), 0);
    json_t *arr = kc_informer_list(x);
    cr_assert_eq(json_array_size(arr), 0);
    json_decref(arr);
    kc_informer_free(x);
    kc_informer_free(NULL);
    cr_assert_not(kc_informer_synced(NULL));
    cr_assert_null(kc_informer_get(NULL, "a", "b"));
    ie_fini(&e);
}

typedef struct reader {
    kc_informer *inf;
    atomic_bool stop;
    atomic_long reads;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    /* At least one pass even when the events were all delivered before this thread ran. */
    do {
        json_t *o = kc_informer_get(r->inf, "ns", "hot");
        if (o && !json_object_get(o, "metadata"))
            abort(); /* a torn object would be a bug */
        json_decref(o);
        json_t *all = kc_informer_list(r->inf);
        json_decref(all);
        (void)kc_informer_count(r->inf);
        atomic_fetch_add(&r->reads, 1);
    } while (!atomic_load(&r->stop));
    return NULL;
}

Test(informer, concurrent_reads_while_events_flow)
{
    ie_env e;
    ie_init(&e, &KC_RES_CONFIGMAPS);
    kc_informer_opts o = ie_fast_opts();
    ie_informer(&e, &KC_RES_CONFIGMAPS, NULL, &o);
    ie_start_synced(&e);
    ie_wait_watches(&e, 1);
    reader r = {.inf = e.inf};
    pthread_t th;
    pthread_create(&th, NULL, reader_main, &r);
    char v[16];
    for (int i = 0; i < 100; i++) {
        snprintf(v, sizeof(v), "%d", i);
        ie_put_cm(&e, "ns", "hot", v);
        if (i % 10 == 0) {
            snprintf(v, sizeof(v), "o%d", i);
            ie_put_cm(&e, "ns", v, "x");
        }
    }
    ie_wait_events(&e, 110);
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    cr_assert_gt(atomic_load(&r.reads), 0);
    cr_assert_eq(e.updates, 99);
    ie_assert_consistent(&e);
    ie_fini(&e);
}
