/* Tests for ks_store's watches: replay from an RV, selector transitions, 410 after compaction or
 * history overflow, initial events, bookmarks, overflowing watchers, unregistering, shutdown,
 * concurrent writers and watchers, and a list/watch performance smoke test. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <valgrind/valgrind.h>

#include "ks_store_int.h"
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

TestSuite(watch, .init = setup, .fini = teardown);

static ks_watch *open_watch(const ks_watch_opts *o)
{
    ks_watch *w = NULL;
    kc_err err = {0};
    cr_assert_eq(ks_watch_open(st, o, &w, &err), KC_OK, "open: %s", err.msg);
    return w;
}

/* The next event, which must arrive within a few seconds; the caller decrefs ev->object. */
static void expect_event(ks_watch *w, ks_event *ev, ks_event_type type, const char *name)
{
    kc_err err = {0};
    int r = ks_watch_next(w, 5000, ev, &err);
    cr_assert_eq(r, 1, "expected an event for %s, got %d (%s)", name ? name : "-", r, err.msg);
    cr_assert_eq(ev->type, type, "event type %d, expected %d for %s", ev->type, type,
                 name ? name : "-");
    if (name)
        cr_assert_str_eq(kst_meta(ev->object, "name"), name);
    cr_assert_eq(ev->rv, kst_rv(ev->object));
}

static void expect_quiet(ks_watch *w, int ms)
{
    ks_event ev;
    int r = ks_watch_next(w, ms, &ev, NULL);
    cr_assert_eq(r, 0, "expected no event, got type %d", ev.type);
    if (r == 1)
        json_decref(ev.object);
}

static kc_code set_counter(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    json_object_set_new(obj, "data", json_pack("{s:i}", "i", *(int *)ud));
    return KC_OK;
}

Test(watch, replays_1000_writes_in_order)
{
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    kst_create_free(st, ty.configmaps, "kube-system", kst_obj(NULL, "c", NULL));
    uint64_t from = ks_store_rv(st);
    for (int i = 0; i < 1000; i++) {
        const char *ns = i % 2 ? "kube-system" : "default";
        cr_assert_eq(
            ks_mutate(st, ty.configmaps, ns, "c", KS_WRITE_MAIN, set_counter, &i, NULL, NULL),
            KC_OK);
    }
    /* A "disconnected" client resumes from its last RV and gets every write, in order. */
    ks_watch_opts o = {.rtype = ty.configmaps, .from_rv = from};
    ks_watch *w = open_watch(&o);
    for (int i = 0; i < 1000; i++) {
        ks_event ev;
        expect_event(w, &ev, KS_MODIFIED, "c");
        cr_assert_eq(ev.rv, from + 1 + (uint64_t)i);
        cr_assert_eq(ev.rtype, ty.configmaps);
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(ev.object, "data"), "i")),
                     i);
        json_decref(ev.object);
    }
    expect_quiet(w, 0);
    ks_watch_close(w);
    /* Filters apply to the replay too. */
    ks_watch_opts o2 = {.rtype = ty.configmaps, .from_rv = from, .ns = "kube-system"};
    w = open_watch(&o2);
    for (int i = 1; i < 1000; i += 2) {
        ks_event ev;
        expect_event(w, &ev, KS_MODIFIED, "c");
        cr_assert_str_eq(kst_meta(ev.object, "namespace"), "kube-system");
        json_decref(ev.object);
    }
    expect_quiet(w, 0);
    ks_watch_close(w);
}

Test(watch, live_events_and_deleted_state)
{
    ks_watch_opts o = {.rtype = ty.configmaps, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "c");
    cr_assert_str_eq(json_string_value(json_object_get(ev.object, "apiVersion")), "v1");
    json_decref(ev.object);
    cr_assert_eq(ks_delete(st, ty.configmaps, "default", "c", NULL, NULL, NULL), KC_OK);
    expect_event(w, &ev, KS_DELETED, "c");
    cr_assert_eq(ev.rv, ks_store_rv(st), "DELETED carries the deletion's RV");
    json_decref(ev.object);
    /* Received objects are private at the top level (nested values are shared, read-only). */
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "d", NULL));
    expect_event(w, &ev, KS_ADDED, "d");
    json_object_set_new(ev.object, "data", json_pack("{s:s}", "mine", "yes"));
    json_decref(ev.object);
    json_t *got = NULL;
    cr_assert_eq(ks_get(st, ty.configmaps, "default", "d", &got, NULL), KC_OK);
    cr_assert_null(json_object_get(got, "data"));
    json_decref(got);
    ks_watch_close(w);
}

static kc_code set_app(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    kst_set_label(obj, "app", ud);
    return KC_OK;
}

Test(watch, selector_transitions)
{
    kc_label_selector *ls = NULL;
    cr_assert_eq(kc_label_selector_parse("app=web", &ls, NULL), KC_OK);
    ks_watch_opts o = {.rtype = ty.pods, .labels = ls, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    json_t *p = kst_pod(NULL, "p", "n1");
    kst_set_label(p, "app", "db");
    kst_create_free(st, ty.pods, "default", p);
    expect_quiet(w, 0);
    ks_event ev;
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, set_app, "web", NULL, NULL),
                 KC_OK);
    expect_event(w, &ev, KS_ADDED, "p");
    json_decref(ev.object);
    json_t *s =
        json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", "p", "status", "phase", "Running");
    cr_assert_eq(ks_update(st, ty.pods, "default", s, KS_WRITE_STATUS, NULL, NULL), KC_OK);
    expect_event(w, &ev, KS_MODIFIED, "p");
    json_decref(ev.object);
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, set_app, "db", NULL, NULL),
                 KC_OK);
    expect_event(w, &ev, KS_DELETED, "p");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(ev.object, "metadata"), "labels"), "app")),
                     "db", "the DELETED object is the new state");
    json_decref(ev.object);
    cr_assert_eq(ks_delete(st, ty.pods, "default", "p",
                           &(ks_delete_opts){.grace_period_seconds = 0}, NULL, NULL),
                 KC_OK);
    expect_quiet(w, 0);
    ks_watch_close(w);
    kc_label_selector_free(ls);
}

Test(watch, field_selector_and_name_filters)
{
    kc_field_selector *fs = NULL;
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=n1", &fs, NULL), KC_OK);
    ks_watch_opts o = {.rtype = ty.pods, .fields = fs, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    ks_watch_opts on = {.rtype = ty.pods, .name = "b", .ns = "default", .from_rv = 0};
    ks_watch *wn = open_watch(&on);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "a", "n2"));
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "b", "n1"));
    kst_create_free(st, ty.pods, "kube-system", kst_pod(NULL, "b", "n3"));
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "b");
    json_decref(ev.object);
    expect_quiet(w, 0);
    expect_event(wn, &ev, KS_ADDED, "b");
    cr_assert_str_eq(kst_meta(ev.object, "namespace"), "default");
    json_decref(ev.object);
    expect_quiet(wn, 0);
    ks_watch_close(w);
    ks_watch_close(wn);
    kc_field_selector_free(fs);
}

static kc_code bind_node(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    json_object_set_new(json_object_get(obj, "spec"), "nodeName", json_string(ud));
    return KC_OK;
}

static size_t list_count(const char *selector)
{
    kc_field_selector *fs = NULL;
    cr_assert_eq(kc_field_selector_parse(selector, &fs, NULL), KC_OK);
    ks_list_opts o = {.fields = fs};
    json_t *items = NULL;
    cr_assert_eq(ks_list(st, ty.pods, NULL, &o, &items, NULL, NULL, NULL), KC_OK);
    size_t n = json_array_size(items);
    json_decref(items);
    kc_field_selector_free(fs);
    return n;
}

/* Watches and lists pinned to a node go through the node index: binding and moving pods must
 * reach exactly the watches concerned, and lists must follow. */
Test(watch, node_index_follows_bindings)
{
    kc_field_selector *on1 = NULL, *unbound = NULL, *not1 = NULL;
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=n1", &on1, NULL), KC_OK);
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=", &unbound, NULL), KC_OK);
    cr_assert_eq(kc_field_selector_parse("spec.nodeName!=n1", &not1, NULL), KC_OK);
    ks_watch_opts o1 = {.rtype = ty.pods, .fields = on1, .from_rv = ks_store_rv(st)};
    ks_watch_opts ou = {.rtype = ty.pods, .fields = unbound, .from_rv = ks_store_rv(st)};
    ks_watch_opts on = {.rtype = ty.pods, .fields = not1, .from_rv = ks_store_rv(st)};
    ks_watch *w1 = open_watch(&o1), *wu = open_watch(&ou), *wn = open_watch(&on);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "p", NULL));
    ks_event ev;
    expect_event(wu, &ev, KS_ADDED, "p");
    json_decref(ev.object);
    expect_event(wn, &ev, KS_ADDED, "p");
    json_decref(ev.object);
    expect_quiet(w1, 0);
    cr_assert_eq(list_count("spec.nodeName="), 1);
    cr_assert_eq(list_count("spec.nodeName=n1"), 0);
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, bind_node, "n1", NULL, NULL),
                 KC_OK);
    expect_event(w1, &ev, KS_ADDED, "p");
    json_decref(ev.object);
    expect_event(wu, &ev, KS_DELETED, "p");
    json_decref(ev.object);
    expect_event(wn, &ev, KS_DELETED, "p");
    json_decref(ev.object);
    cr_assert_eq(list_count("spec.nodeName="), 0);
    cr_assert_eq(list_count("spec.nodeName=n1"), 1);
    cr_assert_eq(list_count("spec.nodeName=n1,metadata.namespace=kube-system"), 0);
    cr_assert_eq(ks_mutate(st, ty.pods, "default", "p", KS_WRITE_MAIN, bind_node, "n2", NULL, NULL),
                 KC_OK);
    expect_event(w1, &ev, KS_DELETED, "p");
    json_decref(ev.object);
    expect_event(wn, &ev, KS_ADDED, "p");
    json_decref(ev.object);
    expect_quiet(wu, 0);
    cr_assert_eq(list_count("spec.nodeName=n1"), 0);
    cr_assert_eq(list_count("spec.nodeName=n2"), 1);
    ks_delete_opts now = {.grace_period_seconds = 0};
    cr_assert_eq(ks_delete(st, ty.pods, "default", "p", &now, NULL, NULL), KC_OK);
    expect_event(wn, &ev, KS_DELETED, "p");
    json_decref(ev.object);
    expect_quiet(w1, 0);
    cr_assert_eq(list_count("spec.nodeName=n2"), 0);
    ks_store_stats s;
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.watchers, 3);
    ks_watch_close(w1);
    ks_watch_close(wu);
    ks_watch_close(wn);
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.watchers, 0);
    kc_field_selector_free(on1);
    kc_field_selector_free(unbound);
    kc_field_selector_free(not1);
}

Test(watch, expired_after_compaction)
{
    uint64_t old = ks_store_rv(st);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    ks_store_compact(st);
    uint64_t now = ks_store_rv(st);
    ks_watch *w = NULL;
    kc_err err;
    ks_watch_opts o = {.rtype = ty.configmaps, .from_rv = old};
    cr_assert_eq(ks_watch_open(st, &o, &w, &err), KC_EEXPIRED);
    cr_assert_null(w);
    cr_assert_eq(err.http_status, 410);
    char want[128];
    snprintf(want, sizeof(want), "too old resource version: %llu (%llu)", (unsigned long long)old,
             (unsigned long long)now);
    cr_assert_str_eq(err.msg, want);
    /* Resuming from the current RV works, and a relist (send_initial) always does. */
    o.from_rv = now;
    w = open_watch(&o);
    ks_watch_close(w);
    ks_watch_opts relist = {.rtype = ty.configmaps, .from_rv = old, .send_initial = true};
    w = open_watch(&relist);
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "c");
    json_decref(ev.object);
    ks_watch_close(w);
}

Test(watch, expired_after_history_overflow)
{
    ks_store *small = ks_store_new(10);
    const ks_rtype *cm =
        kst_register(small, "", "v1", "configmaps", "ConfigMap", "configmap", true, false, NULL);
    uint64_t start = ks_store_rv(small);
    for (int i = 0; i < 30; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        kst_create_free(small, cm, "default", kst_obj(NULL, name, NULL));
    }
    uint64_t now = ks_store_rv(small);
    ks_watch *w = NULL;
    kc_err err;
    ks_watch_opts o = {.rtype = cm, .from_rv = start};
    cr_assert_eq(ks_watch_open(small, &o, &w, &err), KC_EEXPIRED);
    char want[128];
    snprintf(want, sizeof(want), "too old resource version: %llu (%llu)", (unsigned long long)start,
             (unsigned long long)(now - 10));
    cr_assert_str_eq(err.msg, want);
    o.from_rv = now - 11;
    cr_assert_eq(ks_watch_open(small, &o, &w, &err), KC_EEXPIRED, "one event too far back");
    o.from_rv = now - 10;
    cr_assert_eq(ks_watch_open(small, &o, &w, &err), KC_OK, "%s", err.msg);
    for (int i = 20; i < 30; i++) {
        ks_event ev;
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        cr_assert_eq(ks_watch_next(w, 1000, &ev, NULL), 1);
        cr_assert_str_eq(kst_meta(ev.object, "name"), name);
        json_decref(ev.object);
    }
    ks_watch_close(w);
    ks_store_free(small);
}

Test(watch, send_initial_then_live)
{
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "b", NULL));
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "a", NULL));
    kst_create_free(st, ty.configmaps, "kube-system", kst_obj(NULL, "x", NULL));
    ks_watch_opts o = {.rtype = ty.configmaps, .ns = "default", .send_initial = true};
    ks_watch *w = open_watch(&o);
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "a");
    json_decref(ev.object);
    expect_event(w, &ev, KS_ADDED, "b");
    json_decref(ev.object);
    expect_quiet(w, 0);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    expect_event(w, &ev, KS_ADDED, "c");
    cr_assert_eq(ev.rv, ks_store_rv(st));
    json_decref(ev.object);
    ks_watch_close(w);
}

Test(watch, bookmarks_when_idle)
{
    ks_watch_opts o = {
        .rtype = ty.configmaps, .from_rv = ks_store_rv(st), .bookmarks = true, .bookmark_ms = 1000};
    ks_watch *w = open_watch(&o);
    ks_watch_opts plain = {.rtype = ty.configmaps, .from_rv = ks_store_rv(st)};
    ks_watch *wp = open_watch(&plain);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "p", NULL));
    uint64_t rv = ks_store_rv(st);
    ks_event ev;
    kc_err err;
    cr_assert_eq(ks_watch_next(w, 3000, &ev, &err), 1);
    cr_assert_eq(ev.type, KS_BOOKMARK);
    cr_assert_eq(ev.rv, rv);
    cr_assert_eq(ev.rtype, ty.configmaps);
    cr_assert_str_eq(json_string_value(json_object_get(ev.object, "kind")), "ConfigMap");
    cr_assert_str_eq(json_string_value(json_object_get(ev.object, "apiVersion")), "v1");
    cr_assert_eq(kst_rv(ev.object), rv);
    json_decref(ev.object);
    /* Nothing new: no second bookmark. */
    expect_quiet(w, 1300);
    expect_quiet(wp, 0);
    ks_watch_close(w);
    ks_watch_close(wp);
}

/* As the API server: a bookmark a minute, not after every quiet second. */
Test(watch, bookmarks_once_a_minute_by_default)
{
    ks_watch_opts o = {.rtype = ty.configmaps, .from_rv = ks_store_rv(st), .bookmarks = true};
    ks_watch *w = open_watch(&o);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "p", NULL));
    expect_quiet(w, 1500);
    ks_watch_close(w);
}

/* A watch that ends at its timeout gets a bookmark 2 s before it, then none until the end. */
Test(watch, bookmark_before_the_watch_ends)
{
    ks_watch_opts o = {
        .rtype = ty.configmaps, .from_rv = ks_store_rv(st), .bookmarks = true, .lifetime_ms = 3000};
    ks_watch *w = open_watch(&o);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "p", NULL));
    uint64_t rv = ks_store_rv(st);
    ks_event ev;
    kc_err err;
    expect_quiet(w, 700);
    cr_assert_eq(ks_watch_next(w, 2000, &ev, &err), 1);
    cr_assert_eq(ev.type, KS_BOOKMARK);
    cr_assert_eq(ev.rv, rv);
    json_decref(ev.object);
    kst_create_free(st, ty.pods, "default", kst_pod(NULL, "q", NULL));
    expect_quiet(w, 2500);
    ks_watch_close(w);
}

Test(watch, every_type_watcher)
{
    ks_watch_opts o = {.from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    kst_create_free(st, ty.nodes, NULL, kst_obj(NULL, "n", NULL));
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "c");
    cr_assert_eq(ev.rtype, ty.configmaps);
    json_decref(ev.object);
    expect_event(w, &ev, KS_ADDED, "n");
    cr_assert_eq(ev.rtype, ty.nodes);
    json_decref(ev.object);
    ks_watch_close(w);
    /* Replaying from the start includes the default namespaces, typed once namespaces is
     * served. */
    ks_watch_opts all = {.from_rv = 1};
    w = open_watch(&all);
    expect_event(w, &ev, KS_ADDED, "default");
    cr_assert_eq(ev.rtype, ty.namespaces);
    cr_assert_str_eq(json_string_value(json_object_get(ev.object, "kind")), "Namespace");
    json_decref(ev.object);
    ks_watch_close(w);
}

Test(watch, other_version_gets_its_apiversion)
{
    const ks_rtype *beta = kst_register(st, "example.com", "v1beta1", "widgets", "Widget", "widget",
                                        false, true, NULL);
    ks_watch_opts o = {.rtype = beta, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w", NULL));
    ks_event ev;
    expect_event(w, &ev, KS_ADDED, "w");
    cr_assert_eq(ev.rtype, beta);
    cr_assert_str_eq(json_string_value(json_object_get(ev.object, "apiVersion")),
                     "example.com/v1beta1");
    json_decref(ev.object);
    ks_watch_close(w);
}

Test(watch, slow_watcher_is_closed_with_410)
{
    ks_store_set_watch_queue_cap(st, 50);
    ks_watch_opts o = {.rtype = ty.configmaps, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    ks_watch_opts other = {.rtype = ty.pods, .from_rv = ks_store_rv(st)};
    ks_watch *wo = open_watch(&other);
    for (int i = 0; i < 60; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, name, NULL));
    }
    ks_event ev;
    kc_err err;
    cr_assert_eq(ks_watch_next(w, 1000, &ev, &err), -1);
    cr_assert_eq(err.code, KC_EEXPIRED);
    cr_assert_eq(err.http_status, 410);
    cr_assert_eq(ks_watch_next(w, 0, &ev, &err), -1, "stays closed");
    expect_quiet(wo, 0);
    ks_store_stats s;
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.watchers, 2);
    ks_watch_close(w);
    ks_store_get_stats(st, &s);
    cr_assert_eq(s.watchers, 1);
    ks_watch_close(wo);
}

Test(watch, unregister_deletes_objects_and_closes)
{
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w1", NULL));
    kst_create_free(st, ty.widgets, NULL, kst_obj(NULL, "w2", NULL));
    ks_watch_opts o = {.rtype = ty.widgets, .from_rv = ks_store_rv(st)};
    ks_watch *w = open_watch(&o);
    ks_watch_opts all = {.from_rv = ks_store_rv(st)};
    ks_watch *wa = open_watch(&all);
    ks_store_unregister(st, ty.widgets);
    ks_event ev;
    expect_event(w, &ev, KS_DELETED, "w1");
    json_decref(ev.object);
    expect_event(w, &ev, KS_DELETED, "w2");
    json_decref(ev.object);
    kc_err err;
    cr_assert_eq(ks_watch_next(w, 1000, &ev, &err), -1);
    cr_assert_eq(err.code, KC_ENOTFOUND);
    expect_event(wa, &ev, KS_DELETED, "w1");
    json_decref(ev.object);
    expect_event(wa, &ev, KS_DELETED, "w2");
    json_decref(ev.object);
    kst_create_free(st, ty.configmaps, "default", kst_obj(NULL, "c", NULL));
    expect_event(wa, &ev, KS_ADDED, "c");
    json_decref(ev.object);
    ks_watch_close(w);
    ks_watch_close(wa);
    cr_assert_eq(ks_watch_open(st, &o, &w, &err), KC_ENOTFOUND);
    /* Served again: empty. */
    ks_store_register(st, ty.widgets);
    cr_assert_eq(ks_count(st, ty.widgets), 0);
}

static void *blocked_waiter(void *arg)
{
    ks_watch *w = arg;
    ks_event ev;
    kc_err err = {0};
    int r = ks_watch_next(w, -1, &ev, &err);
    return (void *)(intptr_t)(r == -1 && err.code == KC_ECANCELED);
}

Test(watch, store_free_wakes_waiters)
{
    ks_store *s2 = ks_store_new(0);
    const ks_rtype *cm =
        kst_register(s2, "", "v1", "configmaps", "ConfigMap", "configmap", true, false, NULL);
    ks_watch_opts o = {.rtype = cm, .bookmarks = true};
    ks_watch *w = NULL;
    cr_assert_eq(ks_watch_open(s2, &o, &w, NULL), KC_OK);
    ks_watch_opts o2 = {.rtype = NULL};
    ks_watch *w2 = NULL;
    cr_assert_eq(ks_watch_open(s2, &o2, &w2, NULL), KC_OK);
    pthread_t th;
    pthread_create(&th, NULL, blocked_waiter, w);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    ks_store_free(s2);
    void *ok = NULL;
    pthread_join(th, &ok);
    cr_assert(ok != NULL, "the waiter woke with -1 and KC_ECANCELED");
    ks_event ev;
    cr_assert_eq(ks_watch_next(w2, 0, &ev, NULL), -1);
    ks_watch_close(w);
    ks_watch_close(w2);
}

/* ---- concurrency ---- */

#define WRITERS  4
#define WATCHERS 3
#define WRITES   1000

typedef struct watcher_ctx {
    ks_watch *w;
    int expected;
    int got;
    bool ordered;
} watcher_ctx;

static void *writer_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof(name), "w%d", id);
    json_t *o = kst_obj(NULL, name, NULL);
    if (ks_create(st, ty.configmaps, "default", o, NULL, NULL) != KC_OK)
        return (void *)1;
    for (int i = 1; i < WRITES; i++)
        if (ks_mutate(st, ty.configmaps, "default", name, KS_WRITE_MAIN, set_counter, &i, NULL,
                      NULL) != KC_OK)
            return (void *)1;
    return NULL;
}

static void *watcher_main(void *arg)
{
    watcher_ctx *c = arg;
    uint64_t last = 0;
    c->ordered = true;
    while (c->got < c->expected) {
        ks_event ev;
        if (ks_watch_next(c->w, 5000, &ev, NULL) != 1)
            break;
        if (ev.rv <= last)
            c->ordered = false;
        last = ev.rv;
        c->got++;
        json_decref(ev.object);
    }
    return NULL;
}

Test(watch, concurrent_writers_and_watchers_lose_nothing)
{
    watcher_ctx ctx[WATCHERS];
    pthread_t wt[WATCHERS], wr[WRITERS];
    for (int i = 0; i < WATCHERS; i++) {
        ks_watch_opts o = {.rtype = i == 2 ? NULL : ty.configmaps,
                           .from_rv = ks_store_rv(st),
                           .bookmarks = i == 1};
        ctx[i] = (watcher_ctx){.w = open_watch(&o), .expected = WRITERS * WRITES};
        pthread_create(&wt[i], NULL, watcher_main, &ctx[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_create(&wr[i], NULL, writer_main, (void *)(intptr_t)i);
    for (int i = 0; i < WRITERS; i++) {
        void *r = NULL;
        pthread_join(wr[i], &r);
        cr_assert_null(r, "writer %d failed", i);
    }
    for (int i = 0; i < WATCHERS; i++) {
        pthread_join(wt[i], NULL);
        cr_assert_eq(ctx[i].got, WRITERS * WRITES, "watcher %d got %d events", i, ctx[i].got);
        cr_assert(ctx[i].ordered, "watcher %d saw events out of order", i);
        ks_watch_close(ctx[i].w);
    }
}

/* ---- performance smoke ---- */

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

Test(watch, perf_smoke_nodes_and_pods, .timeout = 120)
{
    /* Under valgrind the scale is a tenth: the point there is memory correctness. */
    int nodes = RUNNING_ON_VALGRIND ? 500 : 5000, pods = RUNNING_ON_VALGRIND ? 2000 : 20000;
    struct timespec t0;
    char name[32], node[32];
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nodes; i++) {
        snprintf(name, sizeof(name), "node-%05d", i);
        kst_create_free(st, ty.nodes, NULL, kst_obj(NULL, name, NULL));
    }
    double t_nodes = ms_since(&t0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < pods; i++) {
        /* Shuffled names: inserts land all over the sorted index. */
        snprintf(name, sizeof(name), "pod-%08x", (unsigned)(i * 2654435761u));
        snprintf(node, sizeof(node), "node-%05d", i % nodes);
        json_t *p = kst_pod(NULL, name, node);
        cr_assert_eq(ks_create(st, ty.pods, "default", p, NULL, NULL), KC_OK);
    }
    double t_pods = ms_since(&t0);
    kc_field_selector *fs = NULL;
    cr_assert_eq(kc_field_selector_parse("spec.nodeName=node-00042", &fs, NULL), KC_OK);
    ks_list_opts o = {.fields = fs};
    json_t *items = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(ks_list(st, ty.pods, NULL, &o, &items, NULL, NULL, NULL), KC_OK);
    double t_sel = ms_since(&t0);
    cr_assert_eq(json_array_size(items), (size_t)(pods / nodes));
    json_decref(items);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(ks_list(st, ty.pods, NULL, NULL, &items, NULL, NULL, NULL), KC_OK);
    double t_all = ms_since(&t0);
    cr_assert_eq(json_array_size(items), (size_t)pods);
    json_decref(items);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *tok = NULL;
    size_t seen = 0;
    do {
        ks_list_opts po = {.limit = 500, .continue_token = tok};
        char *next = NULL;
        cr_assert_eq(ks_list(st, ty.pods, NULL, &po, &items, NULL, &next, NULL), KC_OK);
        seen += json_array_size(items);
        json_decref(items);
        free(tok);
        tok = next;
    } while (tok);
    double t_pages = ms_since(&t0);
    cr_assert_eq(seen, (size_t)pods);
    ks_watch_opts wo = {.rtype = ty.pods, .fields = fs, .send_initial = true};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ks_watch *w = open_watch(&wo);
    double t_watch = ms_since(&t0);
    for (int i = 0; i < pods / nodes; i++) {
        ks_event ev;
        expect_event(w, &ev, KS_ADDED, NULL);
        json_decref(ev.object);
    }
    ks_watch_close(w);
    /* One watch per node, as per-node agents open them: an update reaches only its node's. */
    ks_watch **per = calloc((size_t)nodes, sizeof(*per));
    kc_field_selector **sels = calloc((size_t)nodes, sizeof(*sels));
    for (int i = 0; i < nodes; i++) {
        snprintf(node, sizeof(node), "spec.nodeName=node-%05d", i);
        cr_assert_eq(kc_field_selector_parse(node, &sels[i], NULL), KC_OK);
        ks_watch_opts po = {.rtype = ty.pods, .fields = sels[i], .from_rv = ks_store_rv(st)};
        per[i] = open_watch(&po);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < pods; i++) {
        snprintf(name, sizeof(name), "pod-%08x", (unsigned)(i * 2654435761u));
        json_t *s =
            json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", name, "status", "phase", "Running");
        cr_assert_eq(ks_update(st, ty.pods, "default", s, KS_WRITE_STATUS, NULL, NULL), KC_OK);
    }
    double t_upd = ms_since(&t0);
    for (int i = 0; i < nodes; i++) {
        for (int k = 0; k < pods / nodes; k++) {
            ks_event ev;
            cr_assert_eq(ks_watch_next(per[i], 0, &ev, NULL), 1, "node %d event %d", i, k);
            cr_assert_eq(ev.type, KS_MODIFIED);
            json_decref(ev.object);
        }
        expect_quiet(per[i], 0);
        ks_watch_close(per[i]);
        kc_field_selector_free(sels[i]);
    }
    free(per);
    free(sels);
    cr_log_info("perf: %d pod status updates with %d per-node watches in %.1f ms (%.1f us/update)",
                pods, nodes, t_upd, t_upd * 1000.0 / pods);
    cr_log_info("perf: %d nodes created in %.1f ms, %d pods in %.1f ms (%.1f us/pod); list by "
                "spec.nodeName %.2f ms; full list %.1f ms; paged list (500) %.1f ms; watch with "
                "initial events by spec.nodeName %.2f ms",
                nodes, t_nodes, pods, t_pods, t_pods * 1000.0 / pods, t_sel, t_all, t_pages,
                t_watch);
    kc_field_selector_free(fs);
}
