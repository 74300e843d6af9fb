/* ks_ctl_test: the fixture shared by the controllers' tests: a store with the built-in types, the
 * controllers running on it, a minimal fake kubelet (pods bound to a node become Ready with an
 * IP; pods being deleted are removed), and small builders and waiters (static helpers). */
#ifndef KS_CTL_TEST_H
#define KS_CTL_TEST_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks_admit.h"
#include "ks_ctl_int.h"
#include "ks_sim.h"
#include "ks_store.h"

typedef struct kct {
    ks_sim sim;
    ks_store *st;
    const ks_rtype *ns, *nodes, *pods, *deploy, *rs, *ds, *crev, *svc, *ep, *events, *cm, *crd;
    pthread_t kubelet;
    bool kubelet_on;
    volatile int stop;
    volatile int auto_ready;     /* kubelet: bound pods become Ready */
    volatile int auto_remove;    /* kubelet: pods being deleted are removed */
    volatile int ready_delay_ms; /* kubelet: how long a pod takes to become Ready */
    unsigned ip_seq;
} kct;

static inline const ks_rtype *kct_type(kct *k, const char *g, const char *r)
{
    const ks_rtype *t = ks_store_type(k->st, g, "v1", r);
    cr_assert_not_null(t, "type %s/%s registered", g, r);
    return t;
}

static inline void kct_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline json_t *kct_get(kct *k, const ks_rtype *t, const char *ns, const char *name)
{
    json_t *o = NULL;
    if (ks_get(k->st, t, ns, name, &o, NULL) != KC_OK)
        return NULL;
    return o;
}

static inline json_t *kct_list(kct *k, const ks_rtype *t, const char *ns)
{
    json_t *items = NULL;
    uint64_t rv;
    char *cont = NULL;
    kc_err err = {0};
    cr_assert_eq(ks_list(k->st, t, ns, NULL, &items, &rv, &cont, &err), KC_OK, "list: %s", err.msg);
    free(cont);
    return items;
}

static inline size_t kct_count(kct *k, const ks_rtype *t, const char *ns)
{
    json_t *l = kct_list(k, t, ns);
    size_t n = json_array_size(l);
    json_decref(l);
    return n;
}

/* Polls cond (an expression) every 5 ms for up to ms milliseconds. */
#define KCT_WAIT(cond, ms)                                                                         \
    ({                                                                                             \
        bool ok_ = false;                                                                          \
        for (long t_ = 0; t_ <= (ms); t_ += 5) {                                                   \
            if ((cond)) {                                                                          \
                ok_ = true;                                                                        \
                break;                                                                             \
            }                                                                                      \
            kct_sleep_ms(5);                                                                       \
        }                                                                                          \
        ok_;                                                                                       \
    })

static inline kc_code kct_ready_fn(void *ud, json_t *pod, kc_err *err)
{
    const char *ip = ud;
    char now[32];
    ks_now_rfc3339(now);
    json_t *st = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "phase",
                           "Running", "podIP", ip, "hostIP", "192.168.0.1", "conditions", "type",
                           "Ready", "status", *ip ? "True" : "False", "lastTransitionTime", now,
                           "type", "PodScheduled", "status", "True", "lastTransitionTime", now);
    if (!*ip)
        json_object_del(st, "podIP");
    json_object_set_new(pod, "status", st);
    return KC_OK;
}

/* Marks a pod Ready (with an IP) or not Ready (ip ""). */
static inline kc_code kct_set_ready(kct *k, const char *ns, const char *name, bool ready)
{
    char ip[32] = "";
    if (ready) {
        unsigned n = __atomic_add_fetch(&k->ip_seq, 1, __ATOMIC_RELAXED);
        snprintf(ip, sizeof ip, "10.%u.%u.%u", (n >> 16) & 255, (n >> 8) & 255, n & 255);
    }
    return ks_mutate(k->st, k->pods, ns, name, KS_WRITE_STATUS, kct_ready_fn, ip, NULL, NULL);
}

/* Keys controller wi has synced. */
static inline unsigned long kct_syncs(kct *k, int wi)
{
    return __atomic_load_n(&k->sim.ctl->w[wi].syncs, __ATOMIC_SEQ_CST);
}

/* Controller wi's syncs once they have stopped changing for 300 ms. */
static inline unsigned long kct_syncs_settled(kct *k, int wi)
{
    unsigned long n = kct_syncs(k, wi);
    for (int i = 0; i < 100; i++) {
        kct_sleep_ms(300);
        unsigned long m = kct_syncs(k, wi);
        if (m == n)
            return n;
        n = m;
    }
    cr_assert_fail("controller %s never went quiet (%lu syncs)", k->sim.ctl->w[wi].name, n);
    return n;
}

static inline void *kct_kubelet_main(void *arg)
{
    kct *k = arg;
    ks_watch_opts o = {.rtype = k->pods, .send_initial = true};
    ks_watch *w = NULL;
    cr_assert_eq(ks_watch_open(k->st, &o, &w, NULL), KC_OK);
    while (!k->stop) {
        ks_event ev;
        int r = ks_watch_next(w, 50, &ev, NULL);
        if (r < 0)
            break;
        if (r == 0)
            continue;
        const char *ns = ksc_str(ev.object, "metadata.namespace");
        const char *name = ksc_str(ev.object, "metadata.name");
        bool bound = *ksc_str(ev.object, "spec.nodeName");
        if (ev.type != KS_DELETED && bound && ksc_deleting(ev.object) && k->auto_remove) {
            ks_delete_opts d = {.grace_period_seconds = 0};
            ks_delete(k->st, k->pods, ns, name, &d, NULL, NULL);
        } else if (ev.type != KS_DELETED && bound && !ksc_deleting(ev.object) && k->auto_ready &&
                   !ksc_pod_ready(ev.object)) {
            if (k->ready_delay_ms)
                kct_sleep_ms(k->ready_delay_ms);
            kct_set_ready(k, ns, name, true);
        }
        json_decref(ev.object);
    }
    ks_watch_close(w);
    return NULL;
}

static inline void kct_start(kct *k, bool admit, bool kubelet)
{
    memset(k, 0, sizeof *k);
    kc_err err = {0};
    k->st = ks_store_new(0);
    cr_assert_not_null(k->st);
    cr_assert_eq(ks_types_register_builtin(k->st, &err), KC_OK, "%s", err.msg);
    if (admit)
        ks_store_set_admission(k->st, ks_admit, &k->sim);
    k->sim.store = k->st;
    k->ns = kct_type(k, "", "namespaces");
    k->nodes = kct_type(k, "", "nodes");
    k->pods = kct_type(k, "", "pods");
    k->svc = kct_type(k, "", "services");
    k->ep = kct_type(k, "", "endpoints");
    k->events = kct_type(k, "", "events");
    k->cm = kct_type(k, "", "configmaps");
    k->deploy = kct_type(k, "apps", "deployments");
    k->rs = kct_type(k, "apps", "replicasets");
    k->ds = kct_type(k, "apps", "daemonsets");
    k->crev = kct_type(k, "apps", "controllerrevisions");
    k->crd = kct_type(k, "apiextensions.k8s.io", "customresourcedefinitions");
    k->auto_ready = 1;
    k->auto_remove = 1;
    if (kubelet) {
        cr_assert_eq(pthread_create(&k->kubelet, NULL, kct_kubelet_main, k), 0);
        k->kubelet_on = true;
    }
    cr_assert_eq(ks_controllers_start(&k->sim, &err), KC_OK, "%s", err.msg);
}

static inline void kct_stop(kct *k)
{
    k->stop = 1;
    if (k->kubelet_on)
        pthread_join(k->kubelet, NULL);
    ks_controllers_stop(&k->sim);
    cr_assert_null(k->sim.ctl);
    ks_store_free(k->st);
    ks_admit_free(&k->sim);
}

static inline json_t *kct_create(kct *k, const ks_rtype *t, const char *ns, json_t *obj)
{
    json_t *out = NULL;
    kc_err err = {0};
    kc_code rc = ks_create(k->st, t, ns, obj, &out, &err);
    cr_assert_eq(rc, KC_OK, "create %s: %s", t->resource, err.msg);
    return out;
}

static inline kc_code kct_status_fn(void *ud, json_t *obj, kc_err *err)
{
    json_object_set(obj, "status", ud);
    return KC_OK;
}

/* A Ready node with labels (JSON object or NULL), taints (array or NULL) and allocatable
 * (object or NULL → cpu 8, memory 32Gi, pods 110). */
static inline void kct_node(kct *k, const char *name, json_t *labels, json_t *taints, json_t *alloc)
{
    json_t *n = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "v1", "kind", "Node",
                          "metadata", "name", name, "spec");
    if (labels)
        json_object_set_new(json_object_get(n, "metadata"), "labels", labels);
    if (taints)
        json_object_set_new(json_object_get(n, "spec"), "taints", taints);
    json_decref(kct_create(k, k->nodes, "", n));
    if (!alloc)
        alloc = json_pack("{s:s, s:s, s:s}", "cpu", "8", "memory", "32Gi", "pods", "110");
    json_t *st = json_pack("{s:O, s:o, s:[{s:s, s:s}]}", "capacity", alloc, "allocatable", alloc,
                           "conditions", "type", "Ready", "status", "True");
    kc_err err = {0};
    cr_assert_eq(
        ks_mutate(k->st, k->nodes, "", name, KS_WRITE_STATUS, kct_status_fn, st, NULL, &err), KC_OK,
        "%s", err.msg);
    json_decref(st);
}

static inline void kct_namespace(kct *k, const char *name)
{
    json_decref(kct_create(k, k->ns, "",
                           json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                     "metadata", "name", name)));
}

/* Pods of ns whose metadata.labels[key] == value (value NULL: any pod). */
static inline json_t *kct_pods(kct *k, const char *ns, const char *key, const char *value)
{
    json_t *all = kct_list(k, k->pods, ns), *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(all, i, p)
    {
        const char *v = json_string_value(json_object_get(ksc_at(p, "metadata.labels"), key));
        if (!value || (v && !strcmp(v, value)))
            json_array_append(out, p);
    }
    json_decref(all);
    return out;
}

static inline size_t kct_npods(kct *k, const char *ns, const char *key, const char *value,
                               bool live_only)
{
    json_t *l = kct_pods(k, ns, key, value);
    size_t n = 0, i;
    json_t *p;
    json_array_foreach(l, i, p) n += !live_only || !ksc_deleting(p);
    json_decref(l);
    return n;
}

/* Events of ns with the given reason (new array). */
static inline json_t *kct_events(kct *k, const char *ns, const char *reason)
{
    json_t *all = kct_list(k, k->events, ns), *out = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(all, i, e)
    {
        if (!strcmp(ksc_str(e, "reason"), reason))
            json_array_append(out, e);
    }
    json_decref(all);
    return out;
}

static inline long long kct_int(kct *k, const ks_rtype *t, const char *ns, const char *name,
                                const char *path)
{
    json_t *o = kct_get(k, t, ns, name);
    long long v = o ? ksc_int(o, path, -1) : -2;
    json_decref(o);
    return v;
}

#endif
