/* informer_env: the informer test harness (fakeapi + client + loop + recording handlers). */
#include "informer_env.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long ie_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

const char *ie_rv_of(const json_t *obj)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    return rv ? rv : "";
}

static void note_bad(ie_env *e, const char *what, const char *key)
{
    e->bad++;
    snprintf(e->bad_msg, sizeof(e->bad_msg), "%s: %s", what, key ? key : "(no key)");
}

static void on_add(kc_informer *inf, const json_t *obj, void *ud)
{
    ie_env *e = ud;
    e->adds++;
    if (!kc_informer_synced(inf))
        e->adds_before_synced++;
    char *key = kc_informer_key(obj);
    if (!key || json_object_get(e->mirror, key))
        note_bad(e, "add of a key already present", key);
    else
        json_object_set(e->mirror, key, (json_t *)obj);
    free(key);
    if (e->stop_in_add)
        kc_informer_stop(inf);
}

static void on_update(kc_informer *inf, const json_t *old_obj, const json_t *new_obj, void *ud)
{
    ie_env *e = ud;
    (void)inf;
    e->updates++;
    char *key = kc_informer_key(new_obj);
    json_t *m = key ? json_object_get(e->mirror, key) : NULL;
    if (!m)
        note_bad(e, "update of an unknown key", key);
    else if (strcmp(ie_rv_of(m), ie_rv_of(old_obj)) != 0)
        note_bad(e, "update whose old object is not the last one seen", key);
    else if (strcmp(ie_rv_of(old_obj), ie_rv_of(new_obj)) == 0)
        note_bad(e, "update without a resourceVersion change", key);
    if (key)
        json_object_set(e->mirror, key, (json_t *)new_obj);
    free(key);
}

static void on_delete(kc_informer *inf, const json_t *obj, void *ud)
{
    ie_env *e = ud;
    (void)inf;
    e->deletes++;
    char *key = kc_informer_key(obj);
    if (!key || !json_object_get(e->mirror, key))
        note_bad(e, "delete of an unknown key", key);
    else
        json_object_del(e->mirror, key);
    free(key);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

kc_informer_opts ie_fast_opts(void)
{
    return (kc_informer_opts){.backoff_initial_ms = 20, .backoff_max_ms = 100};
}

void ie_init(ie_env *e, const kc_resource *res)
{
    memset(e, 0, sizeof(*e));
    e->mirror = json_object();
    cr_assert_eq(uv_loop_init(&e->loop), 0);
    uv_timer_init(&e->loop, &e->tick);
    uv_timer_start(&e->tick, on_tick, 5, 5);
    e->api = fakeapi_start(res);
    cr_assert_not_null(e->api);
    kc_config cfg = {.server = (char *)fakeapi_url(e->api), .source = "test"};
    kc_client_opts co = {.qps = -1, .max_retries = -1};
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &co, &e->c, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_client_attach_loop(e->c, &e->loop, &err), KC_OK, "%s", err.msg);
}

void ie_informer(ie_env *e, const kc_resource *res, const char *ns, const kc_informer_opts *o)
{
    kc_informer_handlers h = {
        .on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ud = e};
    kc_err err;
    cr_assert_eq(kc_informer_new(e->c, &e->loop, res, ns, &h, o, &e->inf, &err), KC_OK, "%s",
                 err.msg);
}

void ie_fini(ie_env *e)
{
    kc_informer_free(e->inf);
    kc_client_detach_loop(e->c);
    uv_close((uv_handle_t *)&e->tick, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&e->loop), 0, "handles left on the loop");
    kc_client_free(e->c);
    fakeapi_free(e->api);
    json_decref(e->mirror);
}

bool ie_wait_for(ie_env *e, bool (*pred)(ie_env *), long timeout_ms)
{
    long long dl = ie_now_ms() + timeout_ms;
    while (!pred(e)) {
        if (ie_now_ms() > dl)
            return false;
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    return true;
}

void ie_settle(ie_env *e, long ms)
{
    long long dl = ie_now_ms() + ms;
    while (ie_now_ms() < dl)
        uv_run(&e->loop, UV_RUN_ONCE);
}

bool ie_is_synced(ie_env *e)
{
    return kc_informer_synced(e->inf);
}

bool ie_cache_matches(ie_env *e)
{
    json_t *srv = fakeapi_objects(e->api);
    bool ok = json_object_size(srv) == kc_informer_count(e->inf);
    const char *key;
    json_t *o;
    json_object_foreach(srv, key, o)
    {
        if (!ok)
            break;
        json_t *md = json_object_get(o, "metadata");
        json_t *c = kc_informer_get(e->inf, json_string_value(json_object_get(md, "namespace")),
                                    json_string_value(json_object_get(md, "name")));
        ok = c && strcmp(ie_rv_of(c), ie_rv_of(o)) == 0;
        json_decref(c);
    }
    json_decref(srv);
    return ok;
}

void ie_assert_consistent(ie_env *e)
{
    cr_assert_eq(e->bad, 0, "%d inconsistent handler calls, last: %s", e->bad, e->bad_msg);
    cr_assert(ie_cache_matches(e), "cache differs from the server");
    json_t *srv = fakeapi_objects(e->api);
    cr_assert_eq(json_object_size(e->mirror), json_object_size(srv),
                 "handlers saw %zu objects, server has %zu", json_object_size(e->mirror),
                 json_object_size(srv));
    const char *key;
    json_t *o;
    json_object_foreach(srv, key, o)
    {
        json_t *m = json_object_get(e->mirror, key);
        cr_assert_not_null(m, "handlers never reported %s", key);
        cr_assert_str_eq(ie_rv_of(m), ie_rv_of(o), "%s: handlers ended at another version", key);
    }
    json_decref(srv);
}

uint64_t ie_put_cm(ie_env *e, const char *ns, const char *name, const char *value)
{
    json_t *o =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:[{s:s}]}, s:{s:s}}", "apiVersion", "v1",
                  "kind", "ConfigMap", "metadata", "name", name, "namespace", ns, "labels", "app",
                  "demo", "managedFields", "manager", "kubectl", "data", "v", value);
    uint64_t rv = fakeapi_put(e->api, o);
    json_decref(o);
    cr_assert_gt(rv, 0);
    return rv;
}

int ie_events(const ie_env *e)
{
    return e->adds + e->updates + e->deletes;
}

kc_informer_stats ie_stats(ie_env *e)
{
    kc_informer_stats s;
    kc_informer_get_stats(e->inf, &s);
    return s;
}

void ie_start_synced(ie_env *e)
{
    kc_err err;
    cr_assert_eq(kc_informer_start(e->inf, &err), KC_OK, "%s", err.msg);
    cr_assert(ie_wait_for(e, ie_is_synced, 20000), "informer never synced");
}

static int events_target;
static bool reached_events(ie_env *e)
{
    return ie_events(e) >= events_target;
}

void ie_wait_events(ie_env *e, int n)
{
    events_target = n;
    cr_assert(ie_wait_for(e, reached_events, 20000), "only %d of %d handler calls", ie_events(e),
              n);
}

static unsigned watches_target;
static bool watch_restarted(ie_env *e)
{
    fakeapi_stats s;
    fakeapi_get_stats(e->api, &s);
    return s.watches >= watches_target && s.open_watches > 0;
}

void ie_wait_watches(ie_env *e, unsigned n)
{
    watches_target = n;
    cr_assert(ie_wait_for(e, watch_restarted, 20000), "watch %u never started", n);
}
