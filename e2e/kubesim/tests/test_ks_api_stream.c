/* Tests of kubesim's streaming responses: watches (initial events, resume, selectors, 410
 * expiry, Table events, bookmarks, client disconnects) and pod logs (plain, tail, follow). */
#include "ks_api_test.h"
#include "ks_evcache.h"

#include "kc_watch.h"

#include <pthread.h>

TestSuite(stream, .init = ka_start, .fini = ka_stop, .timeout = 60);

typedef struct events {
    json_t *list; /* [{"type":..,"object":..}] */
} events;

static kc_code on_event(kc_watch_type type, json_t *object, void *ud, kc_err *err)
{
    events *e = ud;
    json_array_append_new(
        e->list, json_pack("{s:s, s:O}", "type", kc_watch_type_name(type), "object", object));
    return KC_OK;
}

/* Runs a watch request to its end (the server's timeoutSeconds) and decodes its events. */
static json_t *watch_all(const char *path, const char *accept, ka_resp *raw)
{
    char ac[300];
    const char *hs[2] = {NULL, NULL};
    if (accept) {
        snprintf(ac, sizeof(ac), "Accept: %s", accept);
        hs[0] = ac;
    }
    ka_resp r = ka_http_ex("GET", ka.sim.server_url, path, ka.token, hs, NULL, 15000);
    cr_assert_eq(r.curl, CURLE_OK, "curl: %s", curl_easy_strerror(r.curl));
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.ctype, "application/json");
    events e = {.list = json_array()};
    kc_watch_decoder d;
    kc_watch_decoder_init(&d, 0, on_event, &e);
    kc_err err;
    cr_assert_eq(kc_watch_decoder_feed(&d, r.body ? r.body : "", r.len, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(kc_watch_decoder_finish(&d, &err), KC_OK, "%s", err.msg);
    kc_watch_decoder_free(&d);
    if (raw)
        *raw = r;
    else
        ka_resp_free(&r);
    return e.list;
}

static const char *ev_type(json_t *evs, size_t i)
{
    return json_string_value(json_object_get(json_array_get(evs, i), "type"));
}

static const char *ev_name(json_t *evs, size_t i)
{
    json_t *o = json_object_get(json_array_get(evs, i), "object");
    return json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
}

static char *create_cm(const char *name, const char *tier)
{
    json_t *cm = ka_cm(name, "k", "v"), *out = NULL;
    if (tier)
        json_object_set_new(json_object_get(cm, "metadata"), "labels",
                            json_pack("{s:s}", "tier", tier));
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, &out, &err), KC_OK, "%s",
                 err.msg);
    char *rv = strdup(
        json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion")));
    json_decref(cm);
    json_decref(out);
    return rv;
}

Test(stream, watch_sends_initial_events_then_resumes_from_a_version)
{
    free(create_cm("a", "x"));
    char *rv = create_cm("b", "y");
    json_t *evs =
        watch_all("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", NULL, NULL);
    cr_assert_eq(json_array_size(evs), 2);
    cr_assert_str_eq(ev_type(evs, 0), "ADDED");
    cr_assert_str_eq(ev_name(evs, 0), "a");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(evs, 0), "object"), "kind")),
                     "ConfigMap");
    json_decref(evs);

    free(create_cm("c", "x"));
    kc_err err;
    cr_assert_eq(
        kc_delete(ka.c, &KC_RES_CONFIGMAPS, "default", "a", KC_PROPAGATE_DEFAULT, NULL, &err),
        KC_OK);
    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=1",
             rv);
    evs = watch_all(path, NULL, NULL);
    cr_assert_eq(json_array_size(evs), 2, "%s", json_dumps(evs, 0));
    cr_assert_str_eq(ev_type(evs, 0), "ADDED");
    cr_assert_str_eq(ev_name(evs, 0), "c");
    cr_assert_str_eq(ev_type(evs, 1), "DELETED");
    cr_assert_str_eq(ev_name(evs, 1), "a");
    json_decref(evs);

    /* Selectors apply to watches; metadata.name narrows to one object. */
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=tier%%3Dx&"
             "resourceVersion=0&timeoutSeconds=1");
    evs = watch_all(path, NULL, NULL);
    cr_assert_eq(json_array_size(evs), 1);
    cr_assert_str_eq(ev_name(evs, 0), "c");
    json_decref(evs);
    evs = watch_all("/api/v1/configmaps?watch=true&fieldSelector=metadata.name%3Db&"
                    "timeoutSeconds=1",
                    NULL, NULL);
    cr_assert_eq(json_array_size(evs), 1);
    cr_assert_str_eq(ev_name(evs, 0), "b");
    json_decref(evs);
    free(rv);
}

Test(stream, watch_of_compacted_history_is_one_410_error_event)
{
    char *rv = create_cm("old", NULL);
    free(create_cm("newer", NULL));
    ka_resp r = ka_http("POST", "/kubesim/compact", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    ka_resp_free(&r);
    free(create_cm("newest", NULL));
    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=%s", rv);
    /* No timeoutSeconds: the stream must end by itself after the ERROR event. */
    json_t *evs = watch_all(path, NULL, NULL);
    cr_assert_eq(json_array_size(evs), 1);
    cr_assert_str_eq(ev_type(evs, 0), "ERROR");
    json_t *st = json_object_get(json_array_get(evs, 0), "object");
    cr_assert(strstr(ka_status(st, 410, "Expired"), "too old resource version"));
    json_decref(evs);
    free(rv);
}

Test(stream, watch_as_table_sends_table_events)
{
    free(create_cm("t1", NULL));
    json_t *evs = watch_all("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
                            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", NULL);
    cr_assert_eq(json_array_size(evs), 1);
    json_t *t = json_object_get(json_array_get(evs, 0), "object");
    cr_assert_str_eq(json_string_value(json_object_get(t, "kind")), "Table");
    cr_assert_str_eq(json_string_value(json_object_get(t, "apiVersion")), "meta.k8s.io/v1");
    cr_assert(json_array_size(json_object_get(t, "columnDefinitions")) >= 2);
    json_t *row = json_array_get(json_object_get(t, "rows"), 0);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(row, "cells"), 0)), "t1");
    json_decref(evs);
}

Test(stream, send_initial_events_ends_with_a_marked_bookmark)
{
    free(create_cm("s1", NULL));
    free(create_cm("s2", NULL));
    json_t *evs = watch_all("/api/v1/namespaces/default/configmaps?watch=true&"
                            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
                            "allowWatchBookmarks=true&timeoutSeconds=1",
                            NULL, NULL);
    cr_assert_geq(json_array_size(evs), 3);
    cr_assert_str_eq(ev_type(evs, 0), "ADDED");
    cr_assert_str_eq(ev_name(evs, 1), "s2");
    cr_assert_str_eq(ev_type(evs, 2), "BOOKMARK");
    json_t *meta = json_object_get(json_object_get(json_array_get(evs, 2), "object"), "metadata");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                       "k8s.io/initial-events-end")),
                     "true");
    cr_assert_not_null(json_object_get(meta, "resourceVersion"));
    json_decref(evs);
}

Test(stream, watch_without_bookmark_flag_sends_no_bookmarks)
{
    free(create_cm("q", NULL));
    json_t *evs =
        watch_all("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=2", NULL, NULL);
    for (size_t i = 0; i < json_array_size(evs); i++)
        cr_assert_str_neq(ev_type(evs, i), "BOOKMARK");
    json_decref(evs);
}

/* Writes while a watch is open arrive as events, each flushed on its own. */
typedef struct writer_args {
    int n;
} writer_args;

static void *writer(void *arg)
{
    writer_args *w = arg;
    usleep(300 * 1000);
    for (int i = 0; i < w->n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "live-%d", i);
        json_t *cm = ka_cm(name, "k", "v");
        kc_create(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, NULL);
        json_decref(cm);
    }
    return NULL;
}

Test(stream, live_events_reach_an_open_watch)
{
    char *rv = create_cm("base", NULL);
    writer_args w = {.n = 20};
    pthread_t th;
    pthread_create(&th, NULL, writer, &w);
    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=%s&"
             "timeoutSeconds=2",
             rv);
    json_t *evs = watch_all(path, NULL, NULL);
    pthread_join(th, NULL);
    cr_assert_eq(json_array_size(evs), 20, "%zu events", json_array_size(evs));
    cr_assert_str_eq(ev_name(evs, 0), "live-0");
    cr_assert_str_eq(ev_name(evs, 19), "live-19");
    json_decref(evs);
    free(rv);
}

Test(stream, watchers_of_one_event_get_one_serialization)
{
    /* Three watchers of the same 20 events: two alike, one whose label selector turns an update
     * into DELETED. Each event's object is serialized once (ks_evcache) and every line reads as
     * the API server writes it: {"type":...,"object":...}, compact, in that order. The watchers
     * replay the events one after another, so which of them serializes is fixed. */
    char *rv = create_cm("base", NULL);
    for (int i = 0; i < 10; i++) {
        char name[32];
        snprintf(name, sizeof(name), "shared-%d", i);
        free(create_cm(name, "x"));
        json_t *cm = ka_cm(name, "k", "v2"); /* drops the label: DELETED for the third */
        kc_err err;
        cr_assert_eq(kc_update(ka.c, &KC_RES_CONFIGMAPS, "default", cm, NULL, &err), KC_OK, "%s",
                     err.msg);
        json_decref(cm);
    }
    char path[3][256];
    for (int i = 0; i < 3; i++)
        snprintf(path[i], sizeof(path[i]),
                 "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=%s&"
                 "timeoutSeconds=1%s",
                 rv, i == 2 ? "&labelSelector=tier%3Dx" : "");
    uint64_t h[4], m[4];
    ka_resp r[3];
    ks_evcache_stats(ka.sim.server->evcache, &h[0], &m[0]);
    for (int i = 0; i < 3; i++) {
        r[i] = ka_http_ex("GET", ka.sim.server_url, path[i], ka.token, NULL, NULL, 15000);
        cr_assert_eq(r[i].status, 200, "%s", r[i].body);
        ks_evcache_stats(ka.sim.server->evcache, &h[i + 1], &m[i + 1]);
    }
    cr_assert_eq(m[1] - m[0], 20, "the first watcher serialized %llu",
                 (unsigned long long)(m[1] - m[0]));
    cr_assert_eq(h[3] - h[1], 40, "the others shared %llu", (unsigned long long)(h[3] - h[1]));
    cr_assert_eq(m[3], m[1], "the others serialized again");
    cr_assert_str_eq(r[0].body, r[1].body, "two alike watchers got different bytes");
    int deleted = 0;
    for (int i = 0; i < 3; i++) {
        int lines = 0;
        char *save = NULL;
        for (char *l = strtok_r(r[i].body, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            json_error_t je;
            json_t *ev = json_loads(l, 0, &je);
            cr_assert_not_null(ev, "line %s: %s", l, je.text);
            char *again = json_dumps(ev, JSON_COMPACT);
            cr_assert_str_eq(again, l);
            cr_assert(!strncmp(l, "{\"type\":\"", 9), "%s", l);
            json_t *o = json_object_get(ev, "object");
            cr_assert_str_eq(json_string_value(json_object_get(o, "kind")), "ConfigMap");
            cr_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")), "v1");
            deleted += i == 2 && !strcmp(json_string_value(json_object_get(ev, "type")), "DELETED");
            free(again);
            json_decref(ev);
            lines++;
        }
        cr_assert_eq(lines, 20, "watcher %d got %d events", i, lines);
        ka_resp_free(&r[i]);
    }
    cr_assert_eq(deleted, 10, "the selector's watcher saw %d DELETED", deleted);
    free(rv);
}

Test(stream, client_disconnect_closes_the_store_watch)
{
    ks_store_stats before, after;
    ks_store_get_stats(ka.sim.store, &before);
    ka_resp r =
        ka_http_ex("GET", ka.sim.server_url, "/api/v1/namespaces/default/configmaps?watch=true",
                   ka.token, NULL, NULL, 500);
    cr_assert_eq(r.curl, CURLE_OPERATION_TIMEDOUT);
    ka_resp_free(&r);
    bool closed = false;
    for (int i = 0; i < 40 && !closed; i++) {
        ks_store_get_stats(ka.sim.store, &after);
        closed = after.watchers <= before.watchers;
        if (!closed)
            usleep(100 * 1000);
    }
    cr_assert(closed, "watchers %llu → %llu", (unsigned long long)before.watchers,
              (unsigned long long)after.watchers);
}

Test(stream, watch_with_a_bad_version_is_400)
{
    ka_resp r = ka_http("GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=x",
                        NULL, NULL, NULL);
    cr_assert_eq(r.status, 400, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=spec.x%3D1",
                NULL, NULL, NULL);
    cr_assert_eq(r.status, 400, "%s", r.body);
    ka_resp_free(&r);
}

/* ---- logs ---- */

TestSuite(logs, .fini = ka_stop, .timeout = 60);

static void make_pod(const char *name)
{
    json_t *p = json_pack("{s:{s:s}, s:{s:[{s:s, s:s}]}}", "metadata", "name", name, "spec",
                          "containers", "name", "main", "image", "busybox");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_PODS, "default", p, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(p);
}

Test(logs, log_endpoint_returns_text_and_tails)
{
    ka_start_opts(false, true);
    make_pod("lp");
    const char *text = "one\ntwo\nthree\n";
    ks_kubelet_append_log(&ka.sim, "default", "lp", "main", text, strlen(text));
    ka_resp r = ka_http("GET", "/api/v1/namespaces/default/pods/lp/log", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.body, text);
    cr_assert(!strncmp(r.ctype, "text/plain", 10), "%s", r.ctype);
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default/pods/lp/log?tailLines=1&container=main", NULL,
                NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.body, "three\n");
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default/pods/lp/log?container=nope", NULL, NULL, NULL);
    cr_assert_eq(r.status, 400, "%s", r.body);
    ka_resp_free(&r);
    r = ka_http("GET", "/api/v1/namespaces/default/pods/missing/log", NULL, NULL, NULL);
    cr_assert_eq(r.status, 404, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 404, "NotFound"), "pods \"missing\" not found");
    json_decref(st);
    ka_resp_free(&r);
}

static void *appender(void *arg)
{
    (void)arg;
    usleep(400 * 1000);
    ks_kubelet_append_log(&ka.sim, "default", "fp", "main", "later\n", 6);
    /* The follow request must be in before the pod goes (else it is a 404): under valgrind on a
     * loaded machine it has taken more than the 0.8 s this once allowed. */
    usleep(2000 * 1000);
    ks_delete_opts o = {.grace_period_seconds = 0};
    kc_err err;
    json_t *out = NULL;
    ks_delete(ka.sim.store, ks_store_type(ka.sim.store, "", "v1", "pods"), "default", "fp", &o,
              &out, &err);
    json_decref(out);
    return NULL;
}

Test(logs, follow_streams_new_output_until_the_pod_is_gone)
{
    ka_start_opts(false, true);
    make_pod("fp");
    ks_kubelet_append_log(&ka.sim, "default", "fp", "main", "first\n", 6);
    pthread_t th;
    pthread_create(&th, NULL, appender, NULL);
    ka_resp r =
        ka_http_ex("GET", ka.sim.server_url, "/api/v1/namespaces/default/pods/fp/log?follow=true",
                   ka.token, NULL, NULL, 10000);
    pthread_join(th, NULL);
    cr_assert_eq(r.curl, CURLE_OK, "%s", curl_easy_strerror(r.curl));
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "first\nlater\n");
    ka_resp_free(&r);
}

/* ---- nodesim's answers to the kubelet (/kubesim/v1/answers) ---- */

TestSuite(answers, .fini = ka_stop, .timeout = 60);

static json_t *pod_now(const char *name)
{
    json_t *p = NULL;
    kc_err err;
    cr_assert_eq(kc_get(ka.c, &KC_RES_PODS, "default", name, &p, &err), KC_OK, "%s", err.msg);
    return p;
}

static const char *pod_str(const json_t *p, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(json_object_get(p, a), b);
    return json_string_value(c ? json_object_get(v, c) : v);
}

/* The phase of pod name once it has one other than from (waits up to 10 s). */
static char *phase_after(const char *name, const char *from)
{
    for (int i = 0; i < 200; i++) {
        json_t *p = pod_now(name);
        const char *ph = pod_str(p, "status", "phase", NULL);
        char *out = ph && strcmp(ph, from) ? strdup(ph) : NULL;
        json_decref(p);
        if (out)
            return out;
        usleep(50 * 1000);
    }
    return strdup(from);
}

static ka_resp put_answers(const char *pod, const char *body)
{
    char path[200];
    snprintf(path, sizeof(path), "/kubesim/v1/answers/namespaces/default/pods/%s", pod);
    return ka_http("PUT", path, "application/json", NULL, body);
}

/* A simulated init container on a nodesim node runs until nodesim answers over the channel,
 * which writes nothing to the pod; the answers read back, with the kubelet's boot id. */
Test(answers, the_kubelet_waits_for_nodesims_answer_handed_over_beside_the_api)
{
    ka_start_opts(false, true);
    json_t *node = json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "g1", "annotations",
                             "kubesim.io/managed-by", "nodesim");
    kc_err err;
    cr_assert_eq(kc_create(ka.c, &KC_RES_NODES, NULL, node, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(node);
    json_t *p = json_pack("{s:{s:s}, s:{s:s, s:[{s:s, s:s}], s:[{s:s, s:s}]}}", "metadata", "name",
                          "gated", "spec", "nodeName", "g1", "initContainers", "name", "wait",
                          "image", "nvcr.io/nvidia/gpu-operator:v25.3.0", "containers", "name",
                          "main", "image", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0");
    cr_assert_eq(kc_create(ka.c, &KC_RES_PODS, "default", p, NULL, &err), KC_OK, "%s", err.msg);
    json_decref(p);
    p = pod_now("gated");
    char uid[64];
    snprintf(uid, sizeof(uid), "%s", pod_str(p, "metadata", "uid", NULL));
    json_decref(p);

    char body[400];
    snprintf(body, sizeof(body),
             "{\"uid\":\"%s\",\"key\":\"nodesim.io/init\",\"answers\":{\"wait\":\"not yet\"}}",
             uid);
    ka_resp r = put_answers("gated", body);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *doc = ka_json(&r);
    char boot[32];
    snprintf(boot, sizeof(boot), "%s", json_string_value(json_object_get(doc, "bootID")));
    cr_assert_eq(strlen(boot), 16, "%s", r.body);
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(doc, "answers"), "nodesim.io/init"), "wait")),
        "not yet");
    json_decref(doc);
    ka_resp_free(&r);
    usleep(300 * 1000);
    char *ph = phase_after("gated", "Pending");
    cr_assert_str_eq(ph, "Pending", "the init container runs until its answer");
    free(ph);

    snprintf(body, sizeof(body),
             "{\"uid\":\"%s\",\"key\":\"nodesim.io/init\",\"answers\":{\"wait\":\"ok\"}}", uid);
    r = put_answers("gated", body);
    cr_assert_eq(r.status, 200, "%s", r.body);
    ka_resp_free(&r);
    ph = phase_after("gated", "Pending");
    cr_assert_str_eq(ph, "Running", "the init container ends on nodesim's ok");
    free(ph);
    p = pod_now("gated");
    cr_assert_null(json_object_get(json_object_get(p, "metadata"), "annotations"),
                   "the answer is no write to the pod");
    json_decref(p);

    r = ka_http("GET", "/kubesim/v1/answers/namespaces/default/pods/gated", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    doc = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "bootID")), boot);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "uid")), uid);
    json_decref(doc);
    ka_resp_free(&r);
    r = ka_http("GET", "/kubesim/v1/answers", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    doc = ka_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "bootID")), boot);
    json_decref(doc);
    ka_resp_free(&r);
    /* Every pod's answers count under one key of the request counters, not one per pod. */
    json_t *st = ks_server_request_stats(&ka.sim);
    char *text = json_dumps(st, JSON_COMPACT);
    cr_assert_null(strstr(text, "pods/gated"), "%s", text);
    cr_assert_not_null(strstr(text, "\"PUT /kubesim/v1/answers/namespaces/pods\":2"), "%s", text);
    free(text);
    json_decref(st);
}

/* What the channel refuses, with messages in the API server's words. */
Test(answers, bad_answers_are_refused_precisely)
{
    ka_start_opts(false, true);
    make_pod("ap");
    json_t *p = pod_now("ap");
    char uid[64];
    snprintf(uid, sizeof(uid), "%s", pod_str(p, "metadata", "uid", NULL));
    json_decref(p);
    static const struct {
        const char *body;
        int status;
        const char *msg;
    } cases[] = {
        {"{\"uid\":", 400, "answers: not valid JSON: "},
        {"{\"key\":\"nodesim.io/init\",\"answers\":{}}", 400, "answers: uid: Required value"},
        {"{\"uid\":\"UID\",\"key\":\"nodesim.io/exit\",\"answers\":{}}", 400,
         "answers: key: Unsupported value: \"nodesim.io/exit\": supported values: "
         "\"nodesim.io/init\", \"nodesim.io/probes\""},
        {"{\"uid\":\"UID\",\"key\":\"nodesim.io/probes\",\"answers\":[]}", 400,
         "answers: answers: Required value: an object of container names"},
        {"{\"uid\":\"UID\",\"key\":\"nodesim.io/probes\",\"answers\":{\"main\":1}}", 400,
         "answers: answers[main]: Invalid value: must be a string"},
        {"{\"uid\":\"other\",\"key\":\"nodesim.io/probes\",\"answers\":{}}", 409,
         "Precondition failed: UID in precondition: other, UID in object meta: "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[400];
        const char *u = strstr(cases[i].body, "UID");
        if (u)
            snprintf(body, sizeof(body), "%.*s%s%s", (int)(u - cases[i].body), cases[i].body, uid,
                     u + 3);
        else
            snprintf(body, sizeof(body), "%s", cases[i].body);
        ka_resp r = put_answers("ap", body);
        cr_assert_eq(r.status, cases[i].status, "case %zu: %s", i, r.body);
        json_t *st = ka_json(&r);
        const char *msg = json_string_value(json_object_get(st, "message"));
        cr_assert(msg && !strncmp(msg, cases[i].msg, strlen(cases[i].msg)), "case %zu: %s", i,
                  r.body);
        json_decref(st);
        ka_resp_free(&r);
    }
    ka_resp r = put_answers("missing", "{}");
    cr_assert_eq(r.status, 404, "%s", r.body);
    json_t *st = ka_json(&r);
    cr_assert_str_eq(ka_status(st, 404, "NotFound"), "pods \"missing\" not found");
    json_decref(st);
    ka_resp_free(&r);
    r = ka_http("DELETE", "/kubesim/v1/answers/namespaces/default/pods/ap", NULL, NULL, NULL);
    cr_assert_eq(r.status, 405, "%s", r.body);
    ka_resp_free(&r);
}
