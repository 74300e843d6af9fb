/* ks_controllers: starts and stops kubesim's in-process controllers: one thread consumes a watch of
 * every type into an indexed cache and queues keys; one worker per controller syncs them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"
#include "ks_ctl_int.h"

#define KSC_RESYNC_MS       30000 /* safety resync of every controlled object */
#define KSC_SYNC_WAIT_MS    2000  /* bound on waiting for the cache to see our own writes */
#define KSC_SNAPSHOT_WAIT_S 60    /* bound on waiting for a (re)built cache to be complete */
/* A pod bound to a node nobody has registered (yet) is left alone this long, as the real pod
 * GC's quarantine does; pods of a node seen being deleted go at once. */
#define KSC_PODGC_QUARANTINE_MS 10000

typedef struct ksc_worker_def {
    const char *name;
    ksc_sync_fn sync;
} ksc_worker_def;

/* Events' source components are the real controllers' names. */
static const ksc_worker_def worker_defs[KSC_W_COUNT] = {
    [KSC_W_GC] = {"garbage-collector-controller", ksc_gc_sync},
    [KSC_W_NS] = {"namespace-controller", ksc_ns_sync},
    [KSC_W_DEPLOY] = {"deployment-controller", ksc_deploy_sync},
    [KSC_W_RS] = {"replicaset-controller", ksc_rs_sync},
    [KSC_W_DS] = {"daemonset-controller", ksc_ds_sync},
    [KSC_W_SCHED] = {"default-scheduler", ksc_sched_sync},
    [KSC_W_EP] = {"endpoint-controller", ksc_ep_sync},
    [KSC_W_PODGC] = {"pod-garbage-collector", ksc_podgc_sync},
    [KSC_W_CRD] = {"apiextensions-controller", ksc_crd_sync},
};

void ksc_wait_synced(ksc_worker *w)
{
    ks_controllers *c = w->c;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += KSC_SNAPSHOT_WAIT_S;
    pthread_mutex_lock(&c->mu);
    /* A cache still filling from a snapshot would show a partial world (a Deployment without
     * its ReplicaSets...): nobody acts on it. */
    while (!c->synced && !c->stopping) {
        if (pthread_cond_timedwait(&c->seen_cv, &c->mu, &deadline) == ETIMEDOUT) {
            kc_warn("controllers: cache still not synced", "controller=%s", w->name);
            break;
        }
    }
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += KSC_SYNC_WAIT_MS / 1000;
    while (c->seen_rv < w->wrote_rv && !c->stopping) {
        if (pthread_cond_timedwait(&c->seen_cv, &c->mu, &deadline) == ETIMEDOUT) {
            kc_debug("cache did not catch up", "controller=%s wrote_rv=%llu seen_rv=%llu", w->name,
                     (unsigned long long)w->wrote_rv, (unsigned long long)c->seen_rv);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Opens the watch of every type. Its initial ADDED events are queued at once, before any live
 * one, each with an RV no newer than the store's after the open; so the snapshot is complete
 * in the cache once the queue runs dry or a newer event arrives (see event_main). */
static kc_code open_watch(ks_controllers *c, kc_err *err)
{
    ks_watch_opts o = {.rtype = NULL, .send_initial = true};
    pthread_mutex_lock(&c->mu);
    c->synced = false;
    pthread_mutex_unlock(&c->mu);
    kc_code rc = ks_watch_open(c->st, &o, &c->watch, err);
    c->open_rv = ks_store_rv(c->st);
    return rc;
}

static void set_synced(ks_controllers *c)
{
    c->synced = true;
    pthread_cond_broadcast(&c->seen_cv);
}

static void resync(ks_controllers *c)
{
    ksc_enqueue_all(c, KSC_K_DEPLOYMENT, KSC_W_DEPLOY);
    ksc_enqueue_all(c, KSC_K_REPLICASET, KSC_W_RS);
    ksc_enqueue_all(c, KSC_K_DAEMONSET, KSC_W_DS);
    ksc_enqueue_all(c, KSC_K_SERVICE, KSC_W_EP);
    kc_workqueue_add(c->w[KSC_W_SCHED].q, "*");
}

static void *event_main(void *arg)
{
    ks_controllers *c = arg;
    c->last_resync_ms = ksc_now_ms();
    long backoff_ms = 0; /* grows while rebuilt watches keep failing before catching up */
    while (!c->stopping) {
        if (!c->watch) {
            kc_err err;
            kc_err_clear(&err);
            if (open_watch(c, &err) != KC_OK) {
                kc_warn("controllers: cannot watch the store", "error=\"%s\"", err.msg);
                struct timespec ts = {0, 500 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        ks_event ev;
        kc_err err;
        kc_err_clear(&err);
        int r = ks_watch_next(c->watch, 200, &ev, &err);
        if (r == 1) {
            pthread_mutex_lock(&c->mu);
            ksc_cache_apply(c, &ev);
            if (ev.rv > c->seen_rv)
                c->seen_rv = ev.rv;
            if (!c->synced && ev.rv > c->open_rv)
                set_synced(c); /* a live event: the snapshot is all in */
            pthread_cond_broadcast(&c->seen_cv);
            pthread_mutex_unlock(&c->mu);
            json_decref(ev.object);
        } else if (r == 0) {
            backoff_ms = 0; /* caught up */
            pthread_mutex_lock(&c->mu);
            if (!c->synced)
                set_synced(c);
            pthread_mutex_unlock(&c->mu);
        } else if (r < 0) {
            /* Fell behind or the store closed us: start over from a fresh snapshot; every
             * object comes back as ADDED, which requeues everything (a relist). */
            ks_watch_close(c->watch);
            c->watch = NULL;
            if (c->stopping)
                break;
            kc_log(backoff_ms ? KC_LOG_DEBUG : KC_LOG_INFO,
                   "controllers: watch closed, rebuilding the cache", "reason=\"%s\"", err.msg);
            pthread_mutex_lock(&c->mu);
            ksc_cache_reset(c);
            c->rebuilds++;
            pthread_mutex_unlock(&c->mu);
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2) : 10;
            struct timespec ts = {0, backoff_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        long long now = ksc_now_ms();
        if (now - c->last_resync_ms >= KSC_RESYNC_MS) {
            c->last_resync_ms = now;
            resync(c);
        }
    }
    if (c->watch) {
        ks_watch_close(c->watch);
        c->watch = NULL;
    }
    return NULL;
}

static void *worker_main(void *arg)
{
    ksc_worker *w = arg;
    char *key;
    while (kc_workqueue_get(w->q, &key)) {
        if (!w->c->stopping) {
            ksc_wait_synced(w);
            kc_err err;
            kc_err_clear(&err);
            long long t0 = ksc_now_ms();
            kc_code rc = w->sync(w, key, &err);
            __atomic_fetch_add(&w->busy_ms, ksc_now_ms() - t0, __ATOMIC_RELAXED);
            __atomic_fetch_add(&w->syncs, 1, __ATOMIC_RELAXED);
            if (rc == KC_OK) {
                kc_workqueue_forget(w->q, key);
            } else if (!w->c->stopping) {
                int n = kc_workqueue_num_requeues(w->q, key);
                kc_log(n == 5 ? KC_LOG_WARN : KC_LOG_DEBUG, "controller sync failed; retrying",
                       "controller=%s key=%s retries=%d error=\"%s\"", w->name, key, n, err.msg);
                kc_workqueue_add_rate_limited(w->q, key);
            }
        }
        kc_workqueue_done(w->q, key);
        free(key);
    }
    return NULL;
}

json_t *ks_controllers_stats(ks_sim *sim)
{
    ks_controllers *c = sim ? sim->ctl : NULL;
    json_t *out = json_object();
    for (int i = 0; c && out && i < KSC_W_COUNT; i++) {
        const ksc_worker *w = &c->w[i];
        json_object_set_new(out, w->name,
                            json_pack("{s:I, s:I}", "syncs",
                                      (json_int_t)__atomic_load_n(&w->syncs, __ATOMIC_RELAXED),
                                      "busyMs",
                                      (json_int_t)__atomic_load_n(&w->busy_ms, __ATOMIC_RELAXED)));
    }
    return out;
}

static void controllers_free(ks_controllers *c)
{
    for (int i = 0; i < KSC_W_COUNT; i++)
        kc_workqueue_free(c->w[i].q);
    ksc_recorder_free(c->rec);
    ksc_cache_free(c);
    kc_map_free(c->sched_backoff, free);
    kc_map_free(c->podgc_missing, free);
    pthread_cond_destroy(&c->seen_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void controllers_halt(ks_controllers *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->seen_cv);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < KSC_W_COUNT; i++)
        if (c->w[i].q)
            kc_workqueue_shutdown(c->w[i].q);
    if (c->event_started)
        pthread_join(c->event_th, NULL);
    for (int i = 0; i < KSC_W_COUNT; i++)
        if (c->w[i].started)
            pthread_join(c->w[i].th, NULL);
}

kc_code ks_controllers_start(ks_sim *sim, kc_err *err)
{
    if (!sim || !sim->store)
        return kc_err_set(err, KC_EARG, "ks_controllers_start: the simulator has no store");
    if (sim->ctl)
        return kc_err_set(err, KC_EARG, "ks_controllers_start: controllers already running");
    kc_code rc;
    ks_controllers *c = calloc(1, sizeof *c);
    if (!c)
        return kc_err_set(err, KC_ENOMEM, "ks_controllers_start: out of memory");
    c->sim = sim;
    c->st = sim->store;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->seen_cv, NULL);
    if ((rc = ksc_cache_init(c, err)) != KC_OK)
        goto fail_free;
    c->podgc_quarantine_ms = KSC_PODGC_QUARANTINE_MS;
    if (!(c->sched_backoff = kc_map_new()) || !(c->podgc_missing = kc_map_new())) {
        rc = kc_err_set(err, KC_ENOMEM, "controllers: out of memory");
        goto fail_free;
    }
    if ((rc = ksc_recorder_new(c, &c->rec, err)) != KC_OK)
        goto fail_free;
    kc_workqueue_opts qo = {.base_delay_ms = 5, .max_delay_ms = 30000, .qps = -1};
    for (int i = 0; i < KSC_W_COUNT; i++) {
        c->w[i].c = c;
        c->w[i].name = worker_defs[i].name;
        c->w[i].sync = worker_defs[i].sync;
        if ((rc = kc_workqueue_new(&qo, &c->w[i].q, err)) != KC_OK)
            goto fail_free;
    }
    /* Open the watch here so that a broken store is reported to the caller. */
    if ((rc = open_watch(c, err)) != KC_OK) {
        kc_err_prefix(err, "controllers: watching every type");
        goto fail_free;
    }
    if (pthread_create(&c->event_th, NULL, event_main, c) != 0) {
        ks_watch_close(c->watch);
        c->watch = NULL;
        rc = kc_err_set(err, KC_ENOMEM, "controllers: cannot start the event thread");
        goto fail_free;
    }
    c->event_started = true;
    for (int i = 0; i < KSC_W_COUNT; i++) {
        if (pthread_create(&c->w[i].th, NULL, worker_main, &c->w[i]) != 0) {
            rc =
                kc_err_set(err, KC_ENOMEM, "controllers: cannot start the %s thread", c->w[i].name);
            goto fail_halt;
        }
        c->w[i].started = true;
    }
    sim->ctl = (struct ks_controllers *)c;
    return KC_OK;

fail_halt:
    controllers_halt(c);
fail_free:
    controllers_free(c);
    return rc;
}

void ks_controllers_stop(ks_sim *sim)
{
    if (!sim || !sim->ctl)
        return;
    ks_controllers *c = (ks_controllers *)sim->ctl;
    controllers_halt(c);
    controllers_free(c);
    sim->ctl = NULL;
}
