/* ks_store_watch: the store's event history (a ring the watches replay from), per-watcher event
 * queues with selector transitions, bookmarks, and closing watchers on shutdown, unserved types
 * or overflow. */
#include "ks_store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- watcher queues ---- */

static void queue_clear(ks_watch *w)
{
    for (size_t i = 0; i < w->qlen; i++)
        json_decref(w->q[(w->qhead + i) % w->qcap].obj);
    w->qhead = 0;
    w->qlen = 0;
}

/* Marks w closed (w->mu held); a watcher closed for overflow or shutdown loses its queue. */
static void close_locked(ks_watch *w, kc_code code, bool drop, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void close_locked(ks_watch *w, kc_code code, bool drop, const char *fmt, ...)
{
    if (w->closed && !drop)
        return;
    w->closed = true;
    w->close_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->close_msg, sizeof(w->close_msg), fmt, ap);
    va_end(ap);
    if (drop) {
        w->drop_queue = true;
        queue_clear(w);
    }
    pthread_cond_broadcast(&w->cond);
}

static void queue_push(ks_store *st, ks_watch *w, ks_event_type type, ks_type *t, json_t *obj,
                       uint64_t rv)
{
    pthread_mutex_lock(&w->mu);
    if (w->closed)
        goto unlock;
    if (w->qlen >= st->queue_cap) {
        /* A watcher this far behind would pin unbounded memory: it relists instead. */
        close_locked(w, KC_EEXPIRED, true,
                     "the watcher fell behind by more than %zu events; relist and watch again",
                     st->queue_cap);
        goto unlock;
    }
    if (w->qlen == w->qcap) {
        size_t ncap = w->qcap ? w->qcap * 2 : 16;
        ks_qev *nq = malloc(ncap * sizeof(*nq));
        if (!nq) {
            close_locked(w, KC_ENOMEM, true, "out of memory queueing watch events");
            goto unlock;
        }
        for (size_t i = 0; i < w->qlen; i++)
            nq[i] = w->q[(w->qhead + i) % w->qcap];
        free(w->q);
        w->q = nq;
        w->qcap = ncap;
        w->qhead = 0;
    }
    ks_qev *e = &w->q[(w->qhead + w->qlen) % w->qcap];
    e->type = type;
    e->t = t;
    e->obj = json_incref(obj);
    e->rv = rv;
    w->qlen++;
    pthread_cond_signal(&w->cond);
unlock:
    pthread_mutex_unlock(&w->mu);
}

/* ---- filtering ---- */

static bool matches(const ks_watch *w, const json_t *obj)
{
    if (!obj)
        return false;
    if (w->ns && strcmp(kss_meta_str(obj, "namespace"), w->ns) != 0)
        return false;
    if (w->name && strcmp(kss_meta_str(obj, "name"), w->name) != 0)
        return false;
    if (w->labels && !kc_label_selector_matches_object(w->labels, obj))
        return false;
    if (w->fields && !kc_field_selector_matches(w->fields, obj))
        return false;
    return true;
}

/* Queues what one committed event means to w: objects entering its selection are ADDED, leaving
 * it DELETED (with the new state, as the API server does). */
static void deliver(ks_store *st, ks_watch *w, ks_event_type type, ks_type *t, ks_bucket *b,
                    json_t *old, json_t *obj, uint64_t rv)
{
    ks_type *as = w->t ? w->t : (t ? t : kss_bucket_type(st, b));
    if (!as)
        return; /* a bootstrap write of a type nobody serves yet */
    bool nm = matches(w, obj);
    switch (type) {
    case KS_ADDED:
        if (nm)
            queue_push(st, w, KS_ADDED, as, obj, rv);
        break;
    case KS_MODIFIED: {
        bool om = matches(w, old);
        if (om || nm)
            queue_push(st, w, om && nm ? KS_MODIFIED : nm ? KS_ADDED : KS_DELETED, as, obj, rv);
        break;
    }
    case KS_DELETED:
        if (nm || matches(w, old))
            queue_push(st, w, KS_DELETED, as, obj, rv);
        break;
    case KS_BOOKMARK:
        break;
    }
}

typedef struct publish_ctx {
    ks_store *st;
    ks_event_type type;
    ks_type *t;
    ks_bucket *b;
    json_t *old, *obj;
    uint64_t rv;
} publish_ctx;

static void deliver_cb(ks_watch *w, void *ud)
{
    publish_ctx *c = ud;
    deliver(c->st, w, c->type, c->t, c->b, c->old, c->obj, c->rv);
}

void kss_publish(ks_store *st, ks_event_type type, ks_type *t, ks_bucket *b, json_t *old,
                 json_t *obj, uint64_t rv)
{
    /* On disk before anyone hears of it, and before the write returns to its client. */
    kss_persist_append(st, type, b, obj, rv);
    if (st->hlen == st->hcap) {
        ks_hist *h = &st->hist[st->hhead];
        st->hfloor = h->rv;
        json_decref(h->old);
        json_decref(h->obj);
        st->hhead = (st->hhead + 1) % st->hcap;
        st->hlen--;
    }
    ks_hist *h = &st->hist[(st->hhead + st->hlen) % st->hcap];
    h->type = type;
    h->t = t;
    h->b = b;
    h->old = json_incref(old);
    h->obj = json_incref(obj);
    h->rv = rv;
    st->hlen++;
    st->stats.events++;
    publish_ctx c = {st, type, t, b, old, obj, rv};
    kss_bucket_event_watches(b, old, obj, deliver_cb, &c);
    for (size_t i = 0; i < st->nall; i++)
        deliver(st, st->all_watchers[i], type, t, b, old, obj, rv);
    /* Bookmarks read this: every event up to rv is now in the queues it belongs in. */
    __atomic_store_n(&st->delivered_rv, rv, __ATOMIC_SEQ_CST);
}

void kss_history_clear(ks_store *st)
{
    while (st->hlen > 0) {
        ks_hist *h = &st->hist[st->hhead];
        json_decref(h->old);
        json_decref(h->obj);
        st->hhead = (st->hhead + 1) % st->hcap;
        st->hlen--;
    }
    st->hhead = 0;
}

void ks_store_compact(ks_store *st)
{
    pthread_rwlock_wrlock(&st->lock);
    kss_history_clear(st);
    st->hfloor = st->rv;
    pthread_rwlock_unlock(&st->lock);
}

/* ---- closing ---- */

static void close_if_type(ks_watch *w, void *ud)
{
    ks_type *t = ud;
    if (w->t != t)
        return;
    char q[256];
    pthread_mutex_lock(&w->mu);
    close_locked(w, KC_ENOTFOUND, false, "%s is no longer served", kss_qualified(t, q, sizeof(q)));
    pthread_mutex_unlock(&w->mu);
}

void kss_close_type_watchers(ks_store *st, ks_type *t)
{
    (void)st;
    kss_bucket_foreach_watch(t->bucket, close_if_type, t);
}

static void detach(ks_watch *w, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&w->mu);
    close_locked(w, KC_ECANCELED, true, "the store was shut down");
    w->st = NULL;
    pthread_mutex_unlock(&w->mu);
}

void kss_watch_shutdown(ks_store *st)
{
    /* The watches stay listed: the buckets and their lists are freed with the store. */
    for (size_t i = 0; i < st->nbuckets; i++)
        kss_bucket_foreach_watch(st->buckets[i], detach, NULL);
    for (size_t i = 0; i < st->nall; i++)
        detach(st->all_watchers[i], NULL);
    st->nall = 0;
    for (size_t i = 0; st->hist && i < st->hlen; i++) {
        ks_hist *h = &st->hist[(st->hhead + i) % st->hcap];
        json_decref(h->old);
        json_decref(h->obj);
    }
    st->hlen = 0;
    free(st->hist);
    st->hist = NULL;
}

/* ---- open / next / close ---- */

static kc_code list_add(ks_watch ***arr, size_t *n, size_t *cap, ks_watch *w)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        ks_watch **na = realloc(*arr, ncap * sizeof(*na));
        if (!na)
            return KC_ENOMEM;
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*n)++] = w;
    return KC_OK;
}

static void list_remove(ks_watch **arr, size_t *n, ks_watch *w)
{
    for (size_t i = 0; i < *n; i++) {
        if (arr[i] == w) {
            arr[i] = arr[*n - 1];
            (*n)--;
            return;
        }
    }
}

/* Removes w from the store's lists (write lock held). */
static void unlist(ks_store *st, ks_watch *w)
{
    if (w->t)
        kss_bucket_watch_remove(w->t->bucket, w);
    else
        list_remove(st->all_watchers, &st->nall, w);
}

static void watch_free(ks_watch *w)
{
    if (!w)
        return;
    queue_clear(w);
    free(w->q);
    free(w->ns);
    free(w->name);
    free(w->ivalue);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cond);
    free(w);
}

static uint64_t obj_rv(const json_t *obj)
{
    return strtoull(kss_meta_str(obj, "resourceVersion"), NULL, 10);
}

/* Queues an ADDED for every current match of bucket b (namespace, then name order). */
static kc_code send_initial(ks_store *st, ks_watch *w, ks_bucket *b)
{
    ks_type *as = w->t ? w->t : kss_bucket_type(st, b);
    if (!as)
        return KC_OK;
    const char *pin =
        w->fields && b->oidx ? kc_field_selector_equals_value(w->fields, b->ifield) : NULL;
    kss_candidates_t c;
    if (kss_candidates(b, b->namespaced ? w->ns : NULL, w->name, pin, &c) != KC_OK)
        return KC_ENOMEM;
    for (size_t i = 0; i < c.n; i++)
        if (matches(w, c.v[i]->obj))
            queue_push(st, w, KS_ADDED, as, c.v[i]->obj, obj_rv(c.v[i]->obj));
    free(c.owned);
    return KC_OK;
}

/* Queues every retained event after from_rv that concerns w. */
static void replay(ks_store *st, ks_watch *w, uint64_t from_rv)
{
    /* RVs in the ring increase: binary search for the first one after from_rv. */
    size_t lo = 0, hi = st->hlen;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->hist[(st->hhead + mid) % st->hcap].rv <= from_rv)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < st->hlen; i++) {
        ks_hist *h = &st->hist[(st->hhead + i) % st->hcap];
        if (w->t && h->b != w->t->bucket)
            continue;
        deliver(st, w, h->type, h->t, h->b, h->old, h->obj, h->rv);
    }
}

static void mono_now(struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
}

static long ms_between(const struct timespec *a, const struct timespec *b)
{
    return (long)((b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000);
}

static void ts_add_ms(struct timespec *ts, long ms)
{
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

kc_code ks_watch_open(ks_store *st, const ks_watch_opts *opts, ks_watch **out, kc_err *err)
{
    *out = NULL;
    if (!st || !opts)
        return kss_err(err, KC_EARG, 0, "ks_watch_open: store and options are required");
    ks_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return kss_err(err, KC_ENOMEM, 500, "out of memory opening a watch");
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    w->t = (ks_type *)opts->rtype;
    w->labels = opts->labels;
    w->fields = opts->fields;
    w->bookmarks = opts->bookmarks;
    w->keep_src = opts->keep_src;
    w->bookmark_ms = opts->bookmark_ms > 0 ? opts->bookmark_ms : KS_BOOKMARK_DEFAULT_MS;
    /* A namespace filter means nothing for a cluster-scoped type. */
    bool want_ns = opts->ns && opts->ns[0] && !(w->t && !w->t->bucket->namespaced);
    if (want_ns)
        w->ns = strdup(opts->ns);
    if (opts->name)
        w->name = strdup(opts->name);
    if ((want_ns && !w->ns) || (opts->name && !w->name)) {
        watch_free(w);
        return kss_err(err, KC_ENOMEM, 500, "out of memory opening a watch");
    }
    mono_now(&w->last_active);
    if (opts->lifetime_ms > KS_BOOKMARK_BEFORE_END_MS) {
        w->final_bookmark = true;
        w->final_at = w->last_active;
        ts_add_ms(&w->final_at, opts->lifetime_ms - KS_BOOKMARK_BEFORE_END_MS);
    }
    kc_code rc = KC_OK;
    pthread_rwlock_wrlock(&st->lock);
    if (w->t && !w->t->served) {
        rc = kss_unserved(err, w->t);
        goto unlock;
    }
    if (!opts->send_initial && opts->from_rv && opts->from_rv < st->hfloor) {
        rc = kss_err(err, KC_EEXPIRED, 410, "too old resource version: %llu (%llu)",
                     (unsigned long long)opts->from_rv, (unsigned long long)st->hfloor);
        goto unlock;
    }
    rc = w->t ? kss_bucket_watch_add(w->t->bucket, w)
              : list_add(&st->all_watchers, &st->nall, &st->capall, w);
    if (rc != KC_OK) {
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory opening a watch");
        goto unlock;
    }
    w->st = st;
    if (opts->send_initial) {
        for (size_t i = 0; i < st->nbuckets && rc == KC_OK; i++)
            if (!w->t || st->buckets[i] == w->t->bucket)
                rc = send_initial(st, w, st->buckets[i]);
        if (rc != KC_OK) {
            unlist(st, w);
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory sending initial events");
            goto unlock;
        }
        w->last_rv = st->rv;
    } else if (opts->from_rv) {
        replay(st, w, opts->from_rv);
        w->last_rv = opts->from_rv;
    } else {
        w->last_rv = st->rv;
    }
unlock:
    pthread_rwlock_unlock(&st->lock);
    if (rc != KC_OK) {
        watch_free(w);
        return rc;
    }
    *out = w;
    return KC_OK;
}

/* {"kind":K,"apiVersion":V,"metadata":{"resourceVersion":"N"}} as the API server sends. */
static json_t *bookmark_object(const ks_type *t, uint64_t rv)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
    if (t)
        return json_pack("{s:s, s:s, s:{s:s}}", "kind", t->pub.kind, "apiVersion", t->api_version,
                         "metadata", "resourceVersion", buf);
    return json_pack("{s:{s:s}}", "metadata", "resourceVersion", buf);
}

int ks_watch_next(ks_watch *w, int timeout_ms, ks_event *ev, kc_err *err)
{
    memset(ev, 0, sizeof(*ev));
    if (!w) {
        kss_err(err, KC_EARG, 0, "ks_watch_next: no watch");
        return -1;
    }
    struct timespec deadline;
    mono_now(&deadline);
    if (timeout_ms > 0)
        ts_add_ms(&deadline, timeout_ms);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        struct timespec now;
        mono_now(&now);
        if (w->qlen > 0) {
            ks_qev q = w->q[w->qhead];
            w->qhead = (w->qhead + 1) % w->qcap;
            w->qlen--;
            if (q.rv > w->last_rv)
                w->last_rv = q.rv;
            w->last_active = now;
            /* The type's strings may go with the store once this lock is released. */
            char av[256];
            snprintf(av, sizeof(av), "%s", q.t->api_version);
            ev->type = q.type;
            ev->rtype = &q.t->pub;
            ev->rv = q.rv;
            pthread_mutex_unlock(&w->mu);
            /* A shallow copy, made outside every lock: the queued state is immutable and its
             * nested values are shared (a deep copy per watcher per event was most of kubesim's
             * CPU in a 1,000-node rollout). */
            ev->object = json_copy(q.obj);
            if (w->keep_src && ev->object)
                ev->src = q.obj; /* the queue's reference, handed on */
            else
                json_decref(q.obj);
            if (!ev->object) {
                kss_err(err, KC_ENOMEM, 500, "out of memory copying a watch event");
                return -1;
            }
            json_object_set_new(ev->object, "apiVersion", json_string(av));
            return 1;
        }
        if (w->closed) {
            kss_err(err, w->close_code, w->close_code == KC_EEXPIRED ? 410 : 0, "%s", w->close_msg);
            pthread_mutex_unlock(&w->mu);
            return -1;
        }
        struct timespec due = w->last_active;
        ts_add_ms(&due, w->bookmark_ms);
        if (w->final_bookmark && ms_between(&w->final_at, &due) > 0)
            due = w->final_at;
        if (w->bookmarks && w->st && ms_between(&due, &now) >= 0) {
            /* Read under w->mu with an empty queue: nothing up to this RV is still on its way to
             * this watcher (writers queue an event before publishing its RV here). */
            uint64_t rv = __atomic_load_n(&w->st->delivered_rv, __ATOMIC_SEQ_CST);
            w->last_active = now;
            if (w->final_bookmark && ms_between(&w->final_at, &now) >= 0)
                w->final_bookmark = false;
            if (rv > w->last_rv) {
                w->last_rv = rv;
                ev->type = KS_BOOKMARK;
                ev->rtype = w->t ? &w->t->pub : NULL;
                ev->rv = rv;
                ev->object = bookmark_object(w->t, rv);
                pthread_mutex_unlock(&w->mu);
                if (!ev->object) {
                    kss_err(err, KC_ENOMEM, 500, "out of memory building a bookmark");
                    return -1;
                }
                return 1;
            }
        }
        if (timeout_ms >= 0 && ms_between(&deadline, &now) >= 0) {
            pthread_mutex_unlock(&w->mu);
            return 0;
        }
        struct timespec wake = deadline;
        bool have_wake = timeout_ms >= 0;
        if (w->bookmarks && w->st) {
            if (!have_wake || ms_between(&due, &wake) > 0)
                wake = due;
            have_wake = true;
        }
        if (have_wake)
            pthread_cond_timedwait(&w->cond, &w->mu, &wake);
        else
            pthread_cond_wait(&w->cond, &w->mu);
    }
}

void ks_watch_close(ks_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    ks_store *st = w->st;
    pthread_mutex_unlock(&w->mu);
    if (st) {
        pthread_rwlock_wrlock(&st->lock);
        unlist(st, w);
        pthread_rwlock_unlock(&st->lock);
    }
    watch_free(w);
}
