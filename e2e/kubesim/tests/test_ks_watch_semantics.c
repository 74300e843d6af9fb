/* Watch semantics of the whole API server seen through libkube: 1,000 writes made while a watcher
 * is away all arrive in order on resume; a compacted history is a 410 and an informer that falls
 * behind relists and converges; a stale PUT is a 409. */
#include "ks_api_test.h"
#include "ks_store_int.h"

#include <pthread.h>
#include <uv.h>

#include "kc_informer.h"
#include "kc_watch.h"

TestSuite(watchsem, .init = ka_start, .fini = ka_stop, .timeout = 120);

static json_t *cm(const char *name, const char *value)
{
    return json_pack("{s:{s:s}, s:{s:s}}", "metadata", "name", name, "data", "v", value);
}

static uint64_t rv_of(const json_t *obj)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    return rv ? strtoull(rv, NULL, 10) : 0;
}

/* ---- a raw watch read to the end of its timeout ---- */

typedef struct collected {
    kc_watch_decoder dec;
    json_t *events; /* [{type, rv, name}] */
    int errors410;
    bool done;
    kc_code code;
} collected;

static kc_code on_event(kc_watch_type type, json_t *obj, void *ud, kc_err *unused)
{
    collected *c = ud;
    if (type == KC_WATCH_ERROR) {
        kc_err e;
        if (kc_watch_status_error(obj, &e) == KC_EEXPIRED)
            c->errors410++;
        return KC_OK;
    }
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    json_array_append_new(c->events, json_pack("{s:i, s:I, s:s}", "type", (int)type, "rv",
                                               (json_int_t)rv_of(obj), "name", name ? name : ""));
    return KC_OK;
}

static void on_data(kc_stream *s, const char *data, size_t len, void *ud)
{
    collected *c = ud;
    kc_err e;
    kc_watch_decoder_feed(&c->dec, data, len, &e);
}

static void on_done(kc_stream *s, kc_code code, const kc_err *err, void *ud)
{
    collected *c = ud;
    c->code = code;
    c->done = true;
}

static void raw_watch(const char *query, collected *c)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    kc_err err;
    cr_assert_eq(kc_client_attach_loop(ka.c, &loop, &err), KC_OK, "%s", err.msg);
    c->events = json_array();
    kc_watch_decoder_init(&c->dec, 0, on_event, c);
    char path[512];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/configmaps?watch=true&%s", query);
    kc_request req = {.method = "GET", .path = path};
    kc_stream *s = NULL;
    cr_assert_eq(kc_stream_start(ka.c, &req, on_data, on_done, c, &s, &err), KC_OK, "%s", err.msg);
    while (!c->done)
        uv_run(&loop, UV_RUN_ONCE);
    kc_client_detach_loop(ka.c);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    kc_watch_decoder_free(&c->dec);
}

Test(watchsem, a_thousand_writes_made_while_away_arrive_in_order)
{
    kc_err err;
    json_t *list = NULL;
    cr_assert_eq(kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", NULL, &list, &err), KC_OK);
    uint64_t from = strtoull(
        json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion")),
        NULL, 10);
    json_decref(list);

    /* 1,000 writes (creates, then updates and deletes mixed in), recording each one's RV. */
    uint64_t rvs[1000];
    int n = 0;
    for (int i = 0; i < 400; i++) {
        char name[32];
        snprintf(name, sizeof(name), "w%03d", i);
        json_t *o = cm(name, "0"), *out = NULL;
        cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", o, &out, &err), KC_OK, "%s",
                     err.msg);
        rvs[n++] = rv_of(out);
        json_decref(o);
        json_decref(out);
    }
    for (int i = 0; i < 500; i++) {
        char name[32], val[16];
        snprintf(name, sizeof(name), "w%03d", i % 400);
        snprintf(val, sizeof(val), "%d", i + 1);
        json_t *p = json_pack("{s:{s:s}}", "data", "v", val), *out = NULL;
        cr_assert_eq(kc_patch(ka.c, &KC_RES_CONFIGMAPS, "default", name, KC_PATCH_MERGE, p, NULL,
                              &out, &err),
                     KC_OK, "%s", err.msg);
        rvs[n++] = rv_of(out);
        json_decref(p);
        json_decref(out);
    }
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "w%03d", i * 4);
        cr_assert_eq(
            kc_delete(ka.c, &KC_RES_CONFIGMAPS, "default", name, KC_PROPAGATE_DEFAULT, NULL, &err),
            KC_OK, "%s", err.msg);
        rvs[n++] = ks_store_rv(ka.sim.store); /* a delete's event carries the new RV */
    }
    cr_assert_eq(n, 1000);

    char q[128];
    snprintf(q, sizeof(q), "resourceVersion=%llu&timeoutSeconds=2", (unsigned long long)from);
    collected c = {0};
    raw_watch(q, &c);
    cr_assert_eq(c.code, KC_OK, "watch ended with %d", c.code);
    cr_assert_eq(json_array_size(c.events), 1000, "got %zu events", json_array_size(c.events));
    uint64_t prev = from;
    for (size_t i = 0; i < 1000; i++) {
        json_t *e = json_array_get(c.events, i);
        uint64_t rv = (uint64_t)json_integer_value(json_object_get(e, "rv"));
        cr_assert_gt(rv, prev, "event %zu out of order", i);
        int type = (int)json_integer_value(json_object_get(e, "type"));
        if (i < 400)
            cr_assert_eq(type, KC_WATCH_ADDED);
        else if (i < 900)
            cr_assert_eq(type, KC_WATCH_MODIFIED);
        else
            cr_assert_eq(type, KC_WATCH_DELETED);
        if (i < 900)
            cr_assert_eq(rv, rvs[i], "event %zu: rv %llu, write had %llu", i,
                         (unsigned long long)rv, (unsigned long long)rvs[i]);
        prev = rv;
    }
    json_decref(c.events);
}

Test(watchsem, compacted_history_is_410_and_stale_put_is_409)
{
    kc_err err;
    json_t *o = cm("stale", "1"), *first = NULL, *second = NULL;
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", o, &first, &err), KC_OK);
    json_decref(o);
    uint64_t old = rv_of(first);
    json_t *upd = json_deep_copy(first);
    json_object_set_new(json_object_get(upd, "data"), "v", json_string("2"));
    cr_assert_eq(kc_update(ka.c, &KC_RES_CONFIGMAPS, "default", upd, &second, &err), KC_OK);
    /* The same write again carries the first resourceVersion: stale. */
    json_object_set_new(json_object_get(upd, "data"), "v", json_string("3"));
    cr_assert_eq(kc_update(ka.c, &KC_RES_CONFIGMAPS, "default", upd, NULL, &err), KC_ECONFLICT);
    cr_assert_eq(err.http_status, 409);
    cr_assert(strstr(err.msg, "the object has been modified"), "%s", err.msg);
    json_decref(upd);
    json_decref(first);
    json_decref(second);

    ks_store_compact(ka.sim.store);
    char q[128];
    snprintf(q, sizeof(q), "resourceVersion=%llu&timeoutSeconds=2", (unsigned long long)old);
    collected c = {0};
    raw_watch(q, &c);
    cr_assert_eq(c.errors410, 1, "expected one ERROR 410 event");
    cr_assert_eq(json_array_size(c.events), 0);
    json_decref(c.events);
}

/* ---- an informer that falls behind is cut off with 410, relists and converges ---- */

typedef struct paused_loop {
    uv_loop_t loop;
    uv_async_t wake, stop;
    kc_informer *inf;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pause_req, paused, release;
} paused_loop;

static void on_wake(uv_async_t *a)
{
    paused_loop *p = a->data;
    pthread_mutex_lock(&p->mu);
    if (p->pause_req) {
        p->paused = true;
        pthread_cond_broadcast(&p->cv);
        while (!p->release)
            pthread_cond_wait(&p->cv, &p->mu);
        p->pause_req = false;
        p->paused = false;
    }
    pthread_mutex_unlock(&p->mu);
}

static void on_stop(uv_async_t *a)
{
    paused_loop *p = a->data;
    kc_informer_stop(p->inf);
    uv_close((uv_handle_t *)&p->wake, NULL);
    uv_close((uv_handle_t *)&p->stop, NULL);
}

static void *loop_thread(void *arg)
{
    paused_loop *p = arg;
    uv_run(&p->loop, UV_RUN_DEFAULT);
    return NULL;
}

static bool cache_matches_server(kc_informer *inf)
{
    kc_err err;
    json_t *list = NULL;
    if (kc_list(ka.c, &KC_RES_CONFIGMAPS, "default", NULL, &list, &err) != KC_OK)
        return false;
    json_t *items = json_object_get(list, "items");
    bool ok = json_array_size(items) == kc_informer_count(inf);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        if (!ok)
            break;
        const char *name =
            json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        json_t *cached = kc_informer_get(inf, "default", name);
        ok = cached && rv_of(cached) == rv_of(it);
        json_decref(cached);
    }
    json_decref(list);
    return ok;
}

Test(watchsem, informer_that_falls_behind_relists_and_converges)
{
    kc_err err;
    ks_store_set_watch_queue_cap(ka.sim.store, 50);
    paused_loop p = {0};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    uv_loop_init(&p.loop);
    uv_async_init(&p.loop, &p.wake, on_wake);
    uv_async_init(&p.loop, &p.stop, on_stop);
    p.wake.data = p.stop.data = &p;
    cr_assert_eq(kc_client_attach_loop(ka.c, &p.loop, &err), KC_OK);
    kc_informer_opts io = {.backoff_initial_ms = 20, .backoff_max_ms = 100};
    cr_assert_eq(
        kc_informer_new(ka.c, &p.loop, &KC_RES_CONFIGMAPS, "default", NULL, &io, &p.inf, &err),
        KC_OK, "%s", err.msg);
    cr_assert_eq(kc_informer_start(p.inf, &err), KC_OK);
    pthread_t th;
    pthread_create(&th, NULL, loop_thread, &p);
    for (int i = 0; i < 500 && !kc_informer_synced(p.inf); i++)
        usleep(10000);
    cr_assert(kc_informer_synced(p.inf));

    /* Freeze the informer's loop, then write far more (and larger) events than the server will
     * queue for it: the server cuts the watch with 410 Expired. */
    pthread_mutex_lock(&p.mu);
    p.pause_req = true;
    pthread_mutex_unlock(&p.mu);
    uv_async_send(&p.wake);
    pthread_mutex_lock(&p.mu);
    while (!p.paused)
        pthread_cond_wait(&p.cv, &p.mu);
    pthread_mutex_unlock(&p.mu);
    char big[16384]; /* 1,500 events of 16 KiB outgrow any socket buffering */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 1500; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fb%03d", i % 150);
        json_t *o = cm(name, big);
        if (i < 150)
            cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", o, NULL, &err), KC_OK);
        else if (i < 1470) {
            json_t *pt = json_pack("{s:{s:s}}", "data", "n", name);
            json_object_set_new(json_object_get(pt, "data"), "i", json_sprintf("%d", i));
            cr_assert_eq(kc_patch(ka.c, &KC_RES_CONFIGMAPS, "default", name, KC_PATCH_MERGE, pt,
                                  NULL, NULL, &err),
                         KC_OK, "%s", err.msg);
            json_decref(pt);
        } else
            cr_assert_eq(kc_delete(ka.c, &KC_RES_CONFIGMAPS, "default", name, KC_PROPAGATE_DEFAULT,
                                   NULL, &err),
                         KC_OK);
        json_decref(o);
    }
    pthread_mutex_lock(&p.mu);
    p.release = true;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);

    bool converged = false;
    for (int i = 0; i < 1000 && !converged; i++) {
        usleep(10000);
        kc_informer_stats st;
        kc_informer_get_stats(p.inf, &st);
        converged = st.relists >= 1 && cache_matches_server(p.inf);
    }
    kc_informer_stats st;
    kc_informer_get_stats(p.inf, &st);
    cr_assert_geq(st.relists, 1, "the informer never relisted (events %lu)", st.events);
    cr_assert(converged, "informer cache does not equal the server's state");
    cr_assert_eq(kc_informer_count(p.inf), 120);

    uv_async_send(&p.stop);
    pthread_join(th, NULL);
    kc_informer_free(p.inf);
    kc_client_detach_loop(ka.c);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&p.loop), 0);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
}
