/* Tests for kc_events against an in-memory Events endpoint: create, count patches, re-create on
 * 404, namespaces, spam filter, dedup window, LRU eviction and failures. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_events.h"
#include "kc_log.h"
#include "testsrv.h"

#define MAX_REQS 64

typedef struct seen_req {
    char method[8];
    char path[256];
    char content_type[64];
    json_t *body;
} seen_req;

/* The fake API server's state: the Events it holds and every request it saw. */
static struct {
    pthread_mutex_t mu;
    json_t *events; /* "ns/name" → Event */
    seen_req reqs[MAX_REQS];
    size_t nreqs;
    int fail_status; /* answer every request with this status when non-zero */
} api = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_bool api_hold;
static ts_server *srv;
static kc_client *client;
static _Atomic long long fake_now = 1000000; /* the recorder's clock in the timing tests */

static long long fake_clock(void)
{
    return fake_now;
}
static kc_event_recorder *rec;

static const char *EVENTS_PREFIX = "/api/v1/namespaces/";

static void handler(ts_server *s, const ts_request *req, ts_conn *conn, void *ud)
{
    pthread_mutex_lock(&api.mu);
    if (api.nreqs < MAX_REQS) {
        seen_req *r = &api.reqs[api.nreqs++];
        snprintf(r->method, sizeof(r->method), "%s", req->method);
        snprintf(r->path, sizeof(r->path), "%s", req->path);
        snprintf(r->content_type, sizeof(r->content_type), "%s",
                 req->content_type ? req->content_type : "");
        r->body = json_loads(req->body, 0, NULL);
    }
    /* A held server keeps the request open (the queue tests fill the recorder's queue). */
    while (atomic_load(&api_hold)) {
        pthread_mutex_unlock(&api.mu);
        usleep(1000);
        pthread_mutex_lock(&api.mu);
    }
    if (api.fail_status) {
        int st = api.fail_status;
        pthread_mutex_unlock(&api.mu);
        ts_respond_status(conn, st, st == 503 ? "ServiceUnavailable" : "InternalError",
                          "injected failure");
        return;
    }
    /* /api/v1/namespaces/NS/events[/NAME] */
    char ns[128] = "", name[300] = "";
    const char *p = req->path + strlen(EVENTS_PREFIX);
    const char *slash = strchr(p, '/');
    if (strncmp(req->path, EVENTS_PREFIX, strlen(EVENTS_PREFIX)) != 0 || !slash ||
        strncmp(slash, "/events", 7) != 0) {
        pthread_mutex_unlock(&api.mu);
        ts_respond_status(conn, 404, "NotFound", "no such path");
        return;
    }
    snprintf(ns, sizeof(ns), "%.*s", (int)(slash - p), p);
    if (slash[7] == '/')
        snprintf(name, sizeof(name), "%s", slash + 8);
    char key[512];
    if (strcmp(req->method, "POST") == 0 && !name[0]) {
        json_t *ev = json_loads(req->body, 0, NULL);
        const char *n = json_string_value(json_object_get(json_object_get(ev, "metadata"), "name"));
        snprintf(key, sizeof(key), "%s/%s", ns, n ? n : "");
        json_object_set(api.events, key, ev);
        pthread_mutex_unlock(&api.mu);
        ts_respond_json(conn, 201, ev);
        return;
    }
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    json_t *ev = json_object_get(api.events, key);
    if (strcmp(req->method, "PATCH") == 0 && name[0] && ev) {
        json_t *patch = json_loads(req->body, 0, NULL);
        json_object_update(ev, patch); /* a flat merge patch is enough for these fields */
        json_decref(patch);
        json_incref(ev);
        pthread_mutex_unlock(&api.mu);
        ts_respond_json(conn, 200, ev);
        return;
    }
    pthread_mutex_unlock(&api.mu);
    ts_respond_status(conn, 404, "NotFound", "events not found");
}

static void reset_api(void)
{
    pthread_mutex_lock(&api.mu);
    for (size_t i = 0; i < api.nreqs; i++)
        json_decref(api.reqs[i].body);
    api.nreqs = 0;
    json_decref(api.events);
    api.events = json_object();
    api.fail_status = 0;
    pthread_mutex_unlock(&api.mu);
}

static void set_fail(int status)
{
    pthread_mutex_lock(&api.mu);
    api.fail_status = status;
    pthread_mutex_unlock(&api.mu);
}

static void expire_all_events(void)
{
    pthread_mutex_lock(&api.mu);
    json_object_clear(api.events);
    pthread_mutex_unlock(&api.mu);
}

static size_t nreqs(void)
{
    pthread_mutex_lock(&api.mu);
    size_t n = api.nreqs;
    pthread_mutex_unlock(&api.mu);
    return n;
}

/* Requests are only read after the synchronous record returned, so no lock is needed. */
static seen_req *req_at(size_t i)
{
    cr_assert_lt(i, nreqs(), "request %zu was never made (only %zu)", i, nreqs());
    return &api.reqs[i];
}

static const char *jstr(const json_t *o, const char *path)
{
    /* "a.b.c" */
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const json_t *cur = o;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, tok);
    return json_string_value(cur);
}

static void start_recorder(const kc_event_recorder_opts *opts)
{
    kc_err e = {0};
    cr_assert_eq(kc_event_recorder_new(client, opts, &rec, &e), KC_OK, "%s", e.msg);
}

static void setup(void)
{
    kc_log_set_level(KC_LOG_ERROR);
    reset_api();
    srv = ts_start(handler, NULL, NULL);
    cr_assert_not_null(srv);
    kc_config cfg = {.server = (char *)ts_url(srv)};
    kc_client_opts copts = {.qps = -1, .max_retries = -1, .timeout_ms = 5000};
    kc_err e = {0};
    cr_assert_eq(kc_client_new(&cfg, &copts, &client, &e), KC_OK, "%s", e.msg);
}

static void teardown(void)
{
    atomic_store(&api_hold, false);
    kc_event_recorder_free(rec);
    rec = NULL;
    kc_client_free(client);
    client = NULL;
    ts_stop(srv);
    srv = NULL;
    reset_api();
    json_decref(api.events);
    api.events = NULL;
}

TestSuite(events, .init = setup, .fini = teardown);

static json_t *pod(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "namespace", "ns1", "uid", "uid-1",
                     "resourceVersion", "42", "spec");
}

static void assert_rfc3339(const char *ts)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    cr_assert_not_null(ts);
    cr_assert_eq(regexec(&re, ts, 0, NULL, 0), 0, "not RFC 3339: %s", ts);
    regfree(&re);
}

static void assert_event_name(const char *name, const char *prefix)
{
    regex_t re;
    char pat[128];
    snprintf(pat, sizeof(pat), "^%s\\.[0-9a-f]{16}$", prefix);
    cr_assert_eq(regcomp(&re, pat, REG_EXTENDED | REG_NOSUB), 0);
    cr_assert_not_null(name);
    cr_assert_eq(regexec(&re, name, 0, NULL, 0), 0, "bad Event name %s", name);
    regfree(&re);
}

Test(events, first_record_creates_the_event)
{
    start_recorder(&(kc_event_recorder_opts){.component = "gpu-operator", .instance = "pod-a"});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Started", "container %s started", "c1"), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 1);
    seen_req *r = req_at(0);
    cr_assert_str_eq(r->method, "POST");
    cr_assert_str_eq(r->path, "/api/v1/namespaces/ns1/events");
    json_t *ev = r->body;
    cr_assert_not_null(ev);
    cr_assert_str_eq(jstr(ev, "apiVersion"), "v1");
    cr_assert_str_eq(jstr(ev, "kind"), "Event");
    assert_event_name(jstr(ev, "metadata.name"), "p1");
    cr_assert_str_eq(jstr(ev, "metadata.namespace"), "ns1");
    cr_assert_str_eq(jstr(ev, "involvedObject.kind"), "Pod");
    cr_assert_str_eq(jstr(ev, "involvedObject.apiVersion"), "v1");
    cr_assert_str_eq(jstr(ev, "involvedObject.name"), "p1");
    cr_assert_str_eq(jstr(ev, "involvedObject.namespace"), "ns1");
    cr_assert_str_eq(jstr(ev, "involvedObject.uid"), "uid-1");
    cr_assert_str_eq(jstr(ev, "involvedObject.resourceVersion"), "42");
    cr_assert_str_eq(jstr(ev, "type"), "Normal");
    cr_assert_str_eq(jstr(ev, "reason"), "Started");
    cr_assert_str_eq(jstr(ev, "message"), "container c1 started");
    cr_assert_str_eq(jstr(ev, "source.component"), "gpu-operator");
    cr_assert_str_eq(jstr(ev, "source.host"), "pod-a");
    cr_assert_str_eq(jstr(ev, "reportingComponent"), "gpu-operator");
    cr_assert_str_eq(jstr(ev, "reportingInstance"), "pod-a");
    assert_rfc3339(jstr(ev, "firstTimestamp"));
    cr_assert_str_eq(jstr(ev, "firstTimestamp"), jstr(ev, "lastTimestamp"));
    cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 1);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.created, 1);
    cr_assert_eq(st.patched + st.dropped + st.failed, 0);
}

Test(events, repeats_patch_the_count)
{
    start_recorder(&(kc_event_recorder_opts){.component = "gpu-operator"});
    json_t *p = pod("p1");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kc_event_record(rec, p, "Warning", "BackOff", "restarting %d", 7), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 3);
    const char *name = jstr(req_at(0)->body, "metadata.name");
    char path[300];
    snprintf(path, sizeof(path), "/api/v1/namespaces/ns1/events/%s", name);
    for (int i = 1; i < 3; i++) {
        seen_req *r = req_at((size_t)i);
        cr_assert_str_eq(r->method, "PATCH");
        cr_assert_str_eq(r->path, path);
        cr_assert_str_eq(r->content_type, "application/merge-patch+json");
        cr_assert_eq(json_integer_value(json_object_get(r->body, "count")), i + 1);
        assert_rfc3339(jstr(r->body, "lastTimestamp"));
        /* Only the counting fields are sent. */
        cr_assert_eq(json_object_size(r->body), 2);
    }
    /* The server's copy carries the count too. */
    char key[300];
    snprintf(key, sizeof(key), "ns1/%s", name);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(api.events, key), "count")), 3);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.created, 1);
    cr_assert_eq(st.patched, 2);
}

Test(events, different_message_or_reason_is_a_new_event)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "one"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "two"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Other", "two"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Warning", "Other", "two"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "one"), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 5);
    for (size_t i = 0; i < 4; i++)
        cr_assert_str_eq(req_at(i)->method, "POST", "request %zu", i);
    const char *names[4];
    for (size_t i = 0; i < 4; i++)
        names[i] = jstr(req_at(i)->body, "metadata.name");
    for (size_t i = 0; i < 4; i++)
        for (size_t j = i + 1; j < 4; j++)
            cr_assert_str_neq(names[i], names[j]);
    cr_assert_str_eq(req_at(4)->method, "PATCH");
    cr_assert(strstr(req_at(4)->path, names[0]) != NULL);
}

Test(events, expired_event_is_created_anew)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "m"), KC_OK);
    expire_all_events();
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "m"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "Synced", "m"), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 4);
    cr_assert_str_eq(req_at(0)->method, "POST");
    cr_assert_str_eq(req_at(1)->method, "PATCH");
    cr_assert_str_eq(req_at(2)->method, "POST");
    cr_assert_eq(json_integer_value(json_object_get(req_at(2)->body, "count")), 1);
    const char *second = jstr(req_at(2)->body, "metadata.name");
    cr_assert_str_neq(second, jstr(req_at(0)->body, "metadata.name"));
    /* Later repeats count on the new Event. */
    cr_assert_str_eq(req_at(3)->method, "PATCH");
    cr_assert(strstr(req_at(3)->path, second) != NULL);
    cr_assert_eq(json_integer_value(json_object_get(req_at(3)->body, "count")), 2);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.created, 2);
    cr_assert_eq(st.patched, 1);
    cr_assert_eq(st.failed, 0);
}

Test(events, cluster_scoped_objects_use_the_default_namespace)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *node = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Node",
                             "metadata", "name", "gpu-node-1", "uid", "n-uid");
    cr_assert_eq(kc_event_record(rec, node, "Warning", "GPUMissing", "no GPU found"), KC_OK);
    seen_req *r = req_at(0);
    cr_assert_str_eq(r->path, "/api/v1/namespaces/default/events");
    cr_assert_str_eq(jstr(r->body, "metadata.namespace"), "default");
    cr_assert_null(json_object_get(json_object_get(r->body, "involvedObject"), "namespace"));
    cr_assert_str_eq(jstr(r->body, "involvedObject.uid"), "n-uid");
    assert_event_name(jstr(r->body, "metadata.name"), "gpu-node-1");
    kc_event_recorder_free(rec);

    start_recorder(
        &(kc_event_recorder_opts){.component = "c", .default_namespace = "gpu-operator"});
    cr_assert_eq(kc_event_record(rec, node, "Normal", "GPUFound", "8 GPUs"), KC_OK);
    cr_assert_str_eq(req_at(1)->path, "/api/v1/namespaces/gpu-operator/events");
    json_decref(node);
}

Test(events, accepts_an_object_reference)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *ref =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", "ClusterPolicy", "apiVersion",
                  "nvidia.com/v1", "name", "cluster-policy", "namespace", "ops", "uid", "cp-1");
    cr_assert_eq(kc_event_record(rec, ref, "Normal", "Reconciled", "ok"), KC_OK);
    json_decref(ref);
    seen_req *r = req_at(0);
    cr_assert_str_eq(r->path, "/api/v1/namespaces/ops/events");
    cr_assert_str_eq(jstr(r->body, "involvedObject.kind"), "ClusterPolicy");
    cr_assert_str_eq(jstr(r->body, "involvedObject.apiVersion"), "nvidia.com/v1");
    cr_assert_str_eq(jstr(r->body, "involvedObject.uid"), "cp-1");
}

Test(events, bad_arguments_make_no_request)
{
    kc_err e = {0};
    cr_assert_eq(kc_event_recorder_new(client, &(kc_event_recorder_opts){0}, &rec, &e), KC_EARG);
    cr_assert(strstr(e.msg, "component") != NULL, "%s", e.msg);
    cr_assert_eq(kc_event_recorder_new(NULL, &(kc_event_recorder_opts){.component = "c"}, &rec, &e),
                 KC_EARG);
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Error", "R", "m"), KC_EARG);
    cr_assert_eq(kc_event_record(rec, p, NULL, "R", "m"), KC_EARG);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "", "m"), KC_EARG);
    cr_assert_eq(kc_event_record(rec, NULL, "Normal", "R", "m"), KC_EARG);
    cr_assert_eq(kc_event_record(NULL, p, "Normal", "R", "m"), KC_EARG);
    json_t *nameless = json_pack("{s:s, s:{}}", "kind", "Pod", "metadata");
    cr_assert_eq(kc_event_record(rec, nameless, "Normal", "R", "m"), KC_EARG);
    json_t *kindless = json_pack("{s:{s:s}}", "metadata", "name", "x");
    cr_assert_eq(kc_event_record(rec, kindless, "Normal", "R", "m"), KC_EARG);
    json_t *arr = json_array();
    cr_assert_eq(kc_event_record(rec, arr, "Normal", "R", "m"), KC_EARG);
    json_decref(nameless);
    json_decref(kindless);
    json_decref(arr);
    json_decref(p);
    cr_assert_eq(nreqs(), 0);
}

Test(events, spam_filter_limits_each_object)
{
    start_recorder(&(kc_event_recorder_opts){
        .component = "c", .spam_burst = 3, .spam_refill_per_s = 2, .clock_ms = fake_clock});
    json_t *p1 = pod("p1"), *p2 = pod("p2");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message %d", i), KC_OK);
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message 3"), KC_ETOOMANYREQUESTS);
    /* Repeats count against the bucket too, before deduplication. */
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message 0"), KC_ETOOMANYREQUESTS);
    /* Another object has its own bucket. */
    cr_assert_eq(kc_event_record(rec, p2, "Normal", "R", "message 0"), KC_OK);
    cr_assert_eq(nreqs(), 4);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.dropped, 2);
    cr_assert_eq(st.failed, 0);
    /* 2 tokens a second: not one yet after 400 ms, one after 500 ms, and only one. */
    fake_now += 400;
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message 3"), KC_ETOOMANYREQUESTS);
    fake_now += 100;
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message 3"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "message 4"), KC_ETOOMANYREQUESTS);
    /* A long pause refills to the burst, not beyond. */
    fake_now += 3600 * 1000;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "later %d", i), KC_OK);
    cr_assert_eq(kc_event_record(rec, p1, "Normal", "R", "later 3"), KC_ETOOMANYREQUESTS);
    json_decref(p1);
    json_decref(p2);
}

Test(events, spam_filter_can_be_disabled)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .spam_burst = -1});
    json_t *p = pod("p1");
    for (int i = 0; i < 40; i++)
        cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m%d", i), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 40);
}

Test(events, default_spam_burst_is_25)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    for (int i = 0; i < 25; i++)
        cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m%d", i), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m25"), KC_ETOOMANYREQUESTS);
    json_decref(p);
}

Test(events, repeat_after_the_window_is_a_new_event)
{
    start_recorder(&(kc_event_recorder_opts){
        .component = "c", .dedup_window_ms = 100, .clock_ms = fake_clock});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    fake_now += 100; /* the window counts from the last write, inclusive */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    fake_now += 100;
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    fake_now += 101;
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    json_decref(p);
    const char *want[] = {"POST", "PATCH", "PATCH", "POST"};
    cr_assert_eq(nreqs(), 4);
    for (size_t i = 0; i < 4; i++)
        cr_assert_str_eq(req_at(i)->method, want[i], "request %zu", i);
}

Test(events, lru_evicts_the_oldest_entry)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .cache_size = 2});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "a"), KC_OK); /* POST */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "b"), KC_OK); /* POST */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "a"), KC_OK); /* PATCH; a is newest */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "c"), KC_OK); /* POST, evicts b */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "a"), KC_OK); /* PATCH */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "b"), KC_OK); /* POST again */
    json_decref(p);
    const char *want[] = {"POST", "POST", "PATCH", "POST", "PATCH", "POST"};
    cr_assert_eq(nreqs(), 6);
    for (size_t i = 0; i < 6; i++)
        cr_assert_str_eq(req_at(i)->method, want[i], "request %zu", i);
    cr_assert_eq(json_integer_value(json_object_get(req_at(4)->body, "count")), 3);
}

Test(events, failures_are_counted_not_fatal)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    set_fail(500);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_ESERVER);
    set_fail(0);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    /* A failed count patch keeps the entry; the next repeat counts from where it was. */
    set_fail(503);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_EUNAVAILABLE);
    set_fail(0);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    json_decref(p);
    cr_assert_eq(nreqs(), 4);
    cr_assert_str_eq(req_at(3)->method, "PATCH");
    cr_assert_eq(json_integer_value(json_object_get(req_at(3)->body, "count")), 2);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.failed, 2);
    cr_assert_eq(st.created, 1);
    cr_assert_eq(st.patched, 1);
}

Test(events, long_messages_are_cut_on_a_character_boundary)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    /* 1023 ASCII bytes then a 2-byte character that would straddle the 1024-byte limit. */
    char msg[1100];
    memset(msg, 'x', 1023);
    strcpy(msg + 1023, "\xc3\xa9tail");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "%s", msg), KC_OK);
    json_decref(p);
    const char *sent = jstr(req_at(0)->body, "message");
    cr_assert_not_null(sent, "the message must still be valid UTF-8 JSON");
    cr_assert_eq(strlen(sent), 1023);
}

Test(events, hostname_is_the_default_instance)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c"});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK);
    json_decref(p);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    cr_assert_str_eq(jstr(req_at(0)->body, "reportingInstance"), host);
}

/* ---- the queue: records return at once, a sender thread writes ---- */

static bool wait_reqs(size_t n)
{
    for (int i = 0; i < 5000 && nreqs() < n; i++)
        usleep(1000);
    return nreqs() >= n;
}

Test(events, queued_events_are_written_in_order_by_the_sender)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .queue_size = 16});
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "A", "first"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "B", "second"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "A", "first"), KC_OK);
    json_decref(p); /* the queue holds copies */
    kc_event_recorder_flush(rec);
    cr_assert_eq(nreqs(), 3);
    cr_assert_str_eq(req_at(0)->method, "POST");
    cr_assert_str_eq(jstr(req_at(0)->body, "message"), "first");
    cr_assert_str_eq(jstr(req_at(0)->body, "involvedObject.name"), "p1");
    cr_assert_str_eq(jstr(req_at(0)->body, "involvedObject.uid"), "uid-1");
    cr_assert_str_eq(jstr(req_at(1)->body, "message"), "second");
    cr_assert_str_eq(req_at(2)->method, "PATCH", "the repeat is still deduplicated");
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.created, 2);
    cr_assert_eq(st.patched, 1);
    cr_assert_eq(st.queue_dropped + st.failed, 0);
}

Test(events, a_full_queue_drops_and_counts)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .queue_size = 2});
    atomic_store(&api_hold, true);
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "in flight"), KC_OK);
    cr_assert(wait_reqs(1), "the sender must be writing the first Event");
    /* The record calls return at once although the server does not answer. */
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "queued 1"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "queued 2"), KC_OK);
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "dropped"), KC_EUNAVAILABLE);
    atomic_store(&api_hold, false);
    kc_event_recorder_flush(rec);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.queue_dropped, 1);
    cr_assert_eq(nreqs(), 3);
    cr_assert_str_eq(jstr(req_at(1)->body, "message"), "queued 1");
    cr_assert_str_eq(jstr(req_at(2)->body, "message"), "queued 2");
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.created, 3, "created %lu failed %lu dropped %lu", st.created, st.failed,
                 st.dropped);
    json_decref(p);
}

Test(events, free_writes_what_is_still_queued)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .queue_size = 8});
    atomic_store(&api_hold, true);
    json_t *p = pod("p1");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m%d", i), KC_OK);
    json_decref(p);
    cr_assert(wait_reqs(1));
    atomic_store(&api_hold, false);
    kc_event_recorder_free(rec);
    rec = NULL;
    cr_assert_eq(nreqs(), 3);
    cr_assert_str_eq(jstr(req_at(2)->body, "message"), "m2");
}

Test(events, failed_queued_writes_are_counted)
{
    start_recorder(&(kc_event_recorder_opts){.component = "c", .queue_size = 8});
    set_fail(500);
    json_t *p = pod("p1");
    cr_assert_eq(kc_event_record(rec, p, "Normal", "R", "m"), KC_OK, "queued: no error yet");
    json_decref(p);
    kc_event_recorder_flush(rec);
    kc_event_stats st;
    kc_event_recorder_stats(rec, &st);
    cr_assert_eq(st.failed, 1);
    cr_assert_eq(st.created, 0);
}
