/* kc_workqueue: client-go style work queue (dedup, processing set, delays, rate limiting). */
#include "kc_workqueue.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_map.h"
#include "kc_metrics.h"

typedef struct delayed {
    char *key; /* owned */
    uint64_t deadline_ns;
    uint64_t seq; /* insertion order, so equal deadlines come out FIFO */
} delayed;

struct kc_workqueue {
    pthread_mutex_t mu;
    pthread_cond_t ready;      /* signalled when a key is queued or on shutdown */
    pthread_cond_t delay_wake; /* wakes the delay thread (CLOCK_MONOTONIC) */
    pthread_t delay_thread;
    bool shutting_down;

    /* FIFO of queued keys (ring buffer of owned strings). */
    char **ring;
    size_t head, count, cap;
    /* Both map a key to a CLOCK_MONOTONIC time in ns (never 0), what client-go's metrics keep in
     * addTimes and processingStartTimes: */
    kc_map *dirty;      /* keys that need processing (queued, or re-added while processing) →
                         * when they were added */
    kc_map *processing; /* keys handed out and not yet done → when they were handed out */

    /* Min-heap of delayed adds by deadline; waiting maps a key to its heap index + 1. */
    delayed *heap;
    size_t hlen, hcap;
    kc_map *waiting;
    uint64_t seq;

    /* Rate limiter: per-key failure counts and one token bucket. */
    kc_map *failures; /* key → (uintptr_t) count */
    double tokens;
    uint64_t refilled_ns;
    kc_workqueue_opts o;

    /* client-go's work-queue metrics (kc_workqueue_register_metrics): running totals kept here,
     * under mu, and mirrored into the registry when it renders; the histograms are observed
     * after mu is released. */
    unsigned long long adds, retries;
    kc_registry *reg;
    kc_series *m_depth, *m_adds, *m_latency, *m_work, *m_retries, *m_unfinished, *m_longest;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Waiters to wake once mu is released. Signalling under the lock let the woken thread
 * preempt the signaller while it still held mu and then block on it, and the whole queue waited
 * until the signaller was scheduled again: tens of milliseconds on a busy machine. */
typedef struct wakeups {
    int ready;  /* keys queued for workers */
    bool delay; /* the delay thread's next deadline moved */
} wakeups;

static void wake(kc_workqueue *q, const wakeups *w)
{
    for (int i = 0; i < w->ready; i++)
        pthread_cond_signal(&q->ready);
    if (w->delay)
        pthread_cond_signal(&q->delay_wake);
}

/* ---- FIFO and the add/get/done core (mu held) ---- */

static kc_code ring_push(kc_workqueue *q, const char *key)
{
    if (q->count == q->cap) {
        size_t ncap = q->cap ? q->cap * 2 : 16;
        char **nr = malloc(ncap * sizeof(char *));
        if (!nr)
            return KC_ENOMEM;
        for (size_t i = 0; i < q->count; i++)
            nr[i] = q->ring[(q->head + i) % q->cap];
        free(q->ring);
        q->ring = nr;
        q->cap = ncap;
        q->head = 0;
    }
    char *k = strdup(key);
    if (!k)
        return KC_ENOMEM;
    q->ring[(q->head + q->count) % q->cap] = k;
    q->count++;
    return KC_OK;
}

static char *ring_pop(kc_workqueue *q)
{
    char *k = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    return k;
}

/* A map value for the time now (monotonic ns are never 0 after boot; 1 stands in if they were). */
static void *stamp(void)
{
    uint64_t t = now_ns();
    return (void *)(uintptr_t)(t ? t : 1);
}

static double since_s(void *stamped, uint64_t now)
{
    uint64_t t = (uint64_t)(uintptr_t)stamped;
    return now > t ? (double)(now - t) / 1e9 : 0;
}

static kc_code add_locked(kc_workqueue *q, const char *key, wakeups *w)
{
    if (kc_map_get(q->dirty, key))
        return KC_OK;
    if (kc_map_put(q->dirty, key, stamp(), NULL) != KC_OK)
        return KC_ENOMEM;
    q->adds++;
    /* A key being processed is requeued by done, never handed to a second worker. */
    if (kc_map_get(q->processing, key))
        return KC_OK;
    if (ring_push(q, key) != KC_OK) {
        kc_map_remove(q->dirty, key);
        return KC_ENOMEM;
    }
    w->ready++;
    return KC_OK;
}

/* ---- delayed adds: a binary min-heap (mu held) ---- */

static bool heap_less(const delayed *a, const delayed *b)
{
    return a->deadline_ns < b->deadline_ns || (a->deadline_ns == b->deadline_ns && a->seq < b->seq);
}

static void heap_set(kc_workqueue *q, size_t i, delayed d)
{
    q->heap[i] = d;
    /* The key already exists in waiting, so this replace never allocates. */
    kc_map_put(q->waiting, d.key, (void *)(uintptr_t)(i + 1), NULL);
}

static void sift_up(kc_workqueue *q, size_t i)
{
    delayed d = q->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&d, &q->heap[p]))
            break;
        heap_set(q, i, q->heap[p]);
        i = p;
    }
    heap_set(q, i, d);
}

static void sift_down(kc_workqueue *q, size_t i)
{
    delayed d = q->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const delayed *best = &d;
        if (l < q->hlen && heap_less(&q->heap[l], best)) {
            m = l;
            best = &q->heap[l];
        }
        if (r < q->hlen && heap_less(&q->heap[r], best))
            m = r;
        if (m == i)
            break;
        heap_set(q, i, q->heap[m]);
        i = m;
    }
    heap_set(q, i, d);
}

static delayed heap_pop(kc_workqueue *q)
{
    delayed top = q->heap[0];
    kc_map_remove(q->waiting, top.key);
    q->hlen--;
    if (q->hlen) {
        q->heap[0] = q->heap[q->hlen];
        sift_down(q, 0);
    }
    return top;
}

static kc_code delay_locked(kc_workqueue *q, const char *key, uint64_t deadline, wakeups *w)
{
    uintptr_t idx = (uintptr_t)kc_map_get(q->waiting, key);
    if (idx) {
        /* Already waiting: only ever move the deadline earlier. */
        delayed *d = &q->heap[idx - 1];
        if (deadline < d->deadline_ns) {
            d->deadline_ns = deadline;
            sift_up(q, idx - 1);
            w->delay = true;
        }
        return KC_OK;
    }
    if (q->hlen == q->hcap) {
        size_t ncap = q->hcap ? q->hcap * 2 : 16;
        delayed *nh = realloc(q->heap, ncap * sizeof(delayed));
        if (!nh)
            return KC_ENOMEM;
        q->heap = nh;
        q->hcap = ncap;
    }
    char *k = strdup(key);
    if (!k)
        return KC_ENOMEM;
    if (kc_map_put(q->waiting, key, (void *)(uintptr_t)(q->hlen + 1), NULL) != KC_OK) {
        free(k);
        return KC_ENOMEM;
    }
    q->heap[q->hlen++] = (delayed){.key = k, .deadline_ns = deadline, .seq = q->seq++};
    sift_up(q, q->hlen - 1);
    w->delay = true;
    return KC_OK;
}

static void *delay_main(void *arg)
{
    kc_workqueue *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->shutting_down) {
        uint64_t now = now_ns();
        wakeups w = {0};
        while (q->hlen && q->heap[0].deadline_ns <= now) {
            delayed d = heap_pop(q);
            /* On allocation failure the key is lost; nothing better can be done here. */
            add_locked(q, d.key, &w);
            free(d.key);
        }
        if (w.ready) {
            pthread_mutex_unlock(&q->mu);
            wake(q, &w);
            pthread_mutex_lock(&q->mu);
            continue; /* the heap may have changed meanwhile */
        }
        if (!q->hlen) {
            pthread_cond_wait(&q->delay_wake, &q->mu);
        } else {
            uint64_t dl = q->heap[0].deadline_ns;
            struct timespec ts = {.tv_sec = (time_t)(dl / 1000000000ULL),
                                  .tv_nsec = (long)(dl % 1000000000ULL)};
            pthread_cond_timedwait(&q->delay_wake, &q->mu, &ts);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* ---- public API ---- */

/* ---- metrics ---- */

/* Registry hook: mirrors the totals and samples what is cheaper to sample than to track (the
 * depth, and the age of the keys being processed, as client-go's updateUnfinishedWork does). */
static void sample_metrics(kc_registry *r, void *ud)
{
    (void)r;
    kc_workqueue *q = ud;
    pthread_mutex_lock(&q->mu);
    uint64_t now = now_ns();
    double total = 0, oldest = 0;
    size_t pos = 0;
    const char *k;
    void *v;
    while (kc_map_next(q->processing, &pos, &k, &v)) {
        double age = since_s(v, now);
        total += age;
        if (age > oldest)
            oldest = age;
    }
    double depth = (double)kc_map_size(q->dirty);
    unsigned long long adds = q->adds, retries = q->retries;
    pthread_mutex_unlock(&q->mu);
    kc_gauge_set(q->m_depth, depth);
    kc_counter_set(q->m_adds, (double)adds);
    kc_counter_set(q->m_retries, (double)retries);
    kc_gauge_set(q->m_unfinished, total);
    kc_gauge_set(q->m_longest, oldest);
}

kc_code kc_workqueue_register_metrics(kc_workqueue *q, kc_registry *r, const char *name,
                                      kc_err *err)
{
    kc_err_clear(err);
    if (!q || !r || !name || !*name)
        return kc_err_set(err, KC_EARG, "work-queue metrics: a queue, a registry and a name");
    if (q->reg)
        return kc_err_set(err, KC_EARG, "work-queue metrics: already registered");
    /* controller-runtime's families: both labels carry the queue's name; depth also has the
     * priority, empty for a queue without priorities. Labels in client_golang's (sorted) order. */
    static const char *const labels[] = {"controller", "name", NULL};
    static const char *const depth_labels[] = {"controller", "name", "priority", NULL};
    const char *const values[] = {name, name, NULL};
    const char *const depth_values[] = {name, name, "", NULL};
    double b[12]; /* client-go's ExponentialBuckets(10e-9, 10, 12): 10 ns to 1000 s */
    kc_metric *depth, *adds, *latency, *work, *unfinished, *longest, *retries;
    kc_code rc;
    if ((rc = kc_metrics_exp_buckets(10e-9, 10, 12, b, err)) != KC_OK ||
        (rc = kc_metrics_gauge(r, "workqueue_depth",
                               "Current depth of workqueue by workqueue and priority", depth_labels,
                               &depth, err)) != KC_OK ||
        (rc = kc_metrics_counter(r, "workqueue_adds_total",
                                 "Total number of adds handled by workqueue", labels, &adds,
                                 err)) != KC_OK ||
        (rc = kc_metrics_histogram(r, "workqueue_queue_duration_seconds",
                                   "How long in seconds an item stays in workqueue before being "
                                   "requested",
                                   labels, b, 12, &latency, err)) != KC_OK ||
        (rc = kc_metrics_histogram(r, "workqueue_work_duration_seconds",
                                   "How long in seconds processing an item from workqueue takes.",
                                   labels, b, 12, &work, err)) != KC_OK ||
        (rc = kc_metrics_gauge(r, "workqueue_unfinished_work_seconds",
                               "How many seconds of work has been done that is in progress and "
                               "hasn't been observed by work_duration. Large values indicate "
                               "stuck threads. One can deduce the number of stuck threads by "
                               "observing the rate at which this increases.",
                               labels, &unfinished, err)) != KC_OK ||
        (rc = kc_metrics_gauge(r, "workqueue_longest_running_processor_seconds",
                               "How many seconds has the longest running processor for workqueue "
                               "been running.",
                               labels, &longest, err)) != KC_OK ||
        (rc = kc_metrics_counter(r, "workqueue_retries_total",
                                 "Total number of items added to the workqueue with a non-zero "
                                 "delay (rate-limited requeues, explicit RequeueAfter or AddAfter "
                                 "calls)",
                                 labels, &retries, err)) != KC_OK)
        return rc;
    kc_series *s[7] = {kc_metric_with(depth, depth_values), kc_metric_with(adds, values),
                       kc_metric_with(latency, values),     kc_metric_with(work, values),
                       kc_metric_with(unfinished, values),  kc_metric_with(longest, values),
                       kc_metric_with(retries, values)};
    for (size_t i = 0; i < 7; i++)
        if (!s[i])
            return kc_err_set(err, KC_ENOMEM, "work-queue metrics: out of memory");
    pthread_mutex_lock(&q->mu);
    q->m_depth = s[0];
    q->m_adds = s[1];
    q->m_latency = s[2];
    q->m_work = s[3];
    q->m_unfinished = s[4];
    q->m_longest = s[5];
    q->m_retries = s[6];
    q->reg = r;
    pthread_mutex_unlock(&q->mu);
    return kc_metrics_add_hook(r, sample_metrics, q, NULL, err);
}

kc_code kc_workqueue_new(const kc_workqueue_opts *opts, kc_workqueue **out, kc_err *err)
{
    kc_err_clear(err); /* callers may pass an uninitialised record */
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_workqueue_new: out is NULL");
    *out = NULL;
    kc_workqueue *q = calloc(1, sizeof(*q));
    if (!q)
        return kc_err_set(err, KC_ENOMEM, "work queue: out of memory");
    if (opts)
        q->o = *opts;
    if (q->o.base_delay_ms <= 0)
        q->o.base_delay_ms = 5;
    if (q->o.max_delay_ms <= 0)
        q->o.max_delay_ms = 1000000;
    if (q->o.qps == 0)
        q->o.qps = 10;
    if (q->o.burst <= 0)
        q->o.burst = 100;
    q->tokens = q->o.burst;
    q->refilled_ns = now_ns();

    q->dirty = kc_map_new();
    q->processing = kc_map_new();
    q->waiting = kc_map_new();
    q->failures = kc_map_new();
    if (!q->dirty || !q->processing || !q->waiting || !q->failures)
        goto fail_maps;

    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        goto fail_maps;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&q->delay_wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        goto fail_maps;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->ready, NULL);
    if (pthread_create(&q->delay_thread, NULL, delay_main, q) != 0)
        goto fail_sync;
    *out = q;
    return KC_OK;

fail_sync:
    pthread_cond_destroy(&q->ready);
    pthread_cond_destroy(&q->delay_wake);
    pthread_mutex_destroy(&q->mu);
fail_maps:
    kc_map_free(q->dirty, NULL);
    kc_map_free(q->processing, NULL);
    kc_map_free(q->waiting, NULL);
    kc_map_free(q->failures, NULL);
    free(q);
    return kc_err_set(err, KC_ENOMEM, "work queue: cannot allocate its tables or delay thread");
}

void kc_workqueue_shutdown(kc_workqueue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    if (!q->shutting_down) {
        q->shutting_down = true;
        /* Pending delayed adds would be refused anyway; drop them now. */
        while (q->hlen)
            free(heap_pop(q).key);
    }
    pthread_cond_broadcast(&q->ready);
    pthread_cond_signal(&q->delay_wake);
    pthread_mutex_unlock(&q->mu);
}

void kc_workqueue_free(kc_workqueue *q)
{
    if (!q)
        return;
    if (q->reg)
        kc_metrics_remove_hook(q->reg, sample_metrics, q);
    kc_workqueue_shutdown(q);
    pthread_join(q->delay_thread, NULL);
    while (q->count)
        free(ring_pop(q));
    free(q->ring);
    free(q->heap);
    kc_map_free(q->dirty, NULL);
    kc_map_free(q->processing, NULL);
    kc_map_free(q->waiting, NULL);
    kc_map_free(q->failures, NULL);
    pthread_cond_destroy(&q->ready);
    pthread_cond_destroy(&q->delay_wake);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

kc_code kc_workqueue_add(kc_workqueue *q, const char *key)
{
    return kc_workqueue_add_after(q, key, 0);
}

kc_code kc_workqueue_add_after(kc_workqueue *q, const char *key, long delay_ms)
{
    if (!q || !key)
        return KC_EARG;
    kc_code rc;
    wakeups w = {0};
    pthread_mutex_lock(&q->mu);
    if (q->shutting_down)
        rc = KC_ECANCELED;
    else if (delay_ms <= 0)
        rc = add_locked(q, key, &w);
    else {
        q->retries++;
        rc = delay_locked(q, key, now_ns() + (uint64_t)delay_ms * 1000000ULL, &w);
    }
    pthread_mutex_unlock(&q->mu);
    wake(q, &w);
    return rc;
}

long kc_workqueue_delayed_ms(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return -1;
    long ms = -1;
    pthread_mutex_lock(&q->mu);
    uintptr_t at = (uintptr_t)kc_map_get(q->waiting, key);
    if (at) {
        uint64_t now = now_ns(), due = q->heap[at - 1].deadline_ns;
        ms = due > now ? (long)((due - now + 999999) / 1000000) : 0;
    }
    pthread_mutex_unlock(&q->mu);
    return ms;
}

bool kc_workqueue_dirty(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return false;
    pthread_mutex_lock(&q->mu);
    bool dirty = kc_map_get(q->dirty, key) != NULL;
    pthread_mutex_unlock(&q->mu);
    return dirty;
}

/* Per-key exponential delay for the given failure count. */
static double backoff_ms(const kc_workqueue *q, uintptr_t failures)
{
    if (failures >= 62)
        return (double)q->o.max_delay_ms;
    double d = (double)q->o.base_delay_ms * (double)(1ULL << failures);
    return d > (double)q->o.max_delay_ms ? (double)q->o.max_delay_ms : d;
}

/* Refills the bucket and returns the wait one more token would cost, in ms (mu held). */
static double bucket_ms(kc_workqueue *q, bool take)
{
    if (q->o.qps < 0)
        return 0;
    uint64_t now = now_ns();
    q->tokens += (double)(now - q->refilled_ns) / 1e9 * q->o.qps;
    if (q->tokens > q->o.burst)
        q->tokens = q->o.burst;
    q->refilled_ns = now;
    double after = q->tokens - 1;
    if (take)
        q->tokens = after;
    return after >= 0 ? 0 : -after / q->o.qps * 1000.0;
}

long kc_workqueue_peek_delay_ms(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return 0;
    pthread_mutex_lock(&q->mu);
    double a = backoff_ms(q, (uintptr_t)kc_map_get(q->failures, key));
    double b = bucket_ms(q, false);
    pthread_mutex_unlock(&q->mu);
    return (long)(a > b ? a : b);
}

kc_code kc_workqueue_add_rate_limited(kc_workqueue *q, const char *key)
{
    return kc_workqueue_add_backoff(q, key, 0);
}

kc_code kc_workqueue_add_backoff(kc_workqueue *q, const char *key, long min_delay_ms)
{
    if (!q || !key)
        return KC_EARG;
    kc_code rc = KC_OK;
    wakeups w = {0};
    pthread_mutex_lock(&q->mu);
    if (q->shutting_down) {
        rc = KC_ECANCELED;
        goto unlock;
    }
    q->retries++;
    uintptr_t n = (uintptr_t)kc_map_get(q->failures, key);
    double a = backoff_ms(q, n);
    if (kc_map_put(q->failures, key, (void *)(n + 1), NULL) != KC_OK) {
        rc = KC_ENOMEM;
        goto unlock;
    }
    double b = bucket_ms(q, true);
    double ms = a > b ? a : b;
    if (ms < (double)min_delay_ms)
        ms = (double)min_delay_ms;
    uint64_t delay_ns = (uint64_t)(ms * 1e6);
    rc = delay_ns ? delay_locked(q, key, now_ns() + delay_ns, &w) : add_locked(q, key, &w);
unlock:
    pthread_mutex_unlock(&q->mu);
    wake(q, &w);
    return rc;
}

void kc_workqueue_forget(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return;
    pthread_mutex_lock(&q->mu);
    kc_map_remove(q->failures, key);
    pthread_mutex_unlock(&q->mu);
}

int kc_workqueue_num_requeues(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return 0;
    pthread_mutex_lock(&q->mu);
    int n = (int)(uintptr_t)kc_map_get(q->failures, key);
    pthread_mutex_unlock(&q->mu);
    return n;
}

bool kc_workqueue_get(kc_workqueue *q, char **key)
{
    if (key)
        *key = NULL;
    if (!q || !key)
        return false;
    pthread_mutex_lock(&q->mu);
    while (!q->count && !q->shutting_down)
        pthread_cond_wait(&q->ready, &q->mu);
    bool ok = false;
    double waited = 0;
    kc_series *latency = q->m_latency;
    if (q->count) {
        char *k = ring_pop(q);
        void *started = stamp();
        if (kc_map_put(q->processing, k, started, NULL) != KC_OK) {
            /* Cannot track it as processing: put it back rather than risk a double hand-out. */
            q->head = (q->head + q->cap - 1) % q->cap;
            q->ring[q->head] = k;
            q->count++;
        } else {
            waited = since_s(kc_map_remove(q->dirty, k), (uint64_t)(uintptr_t)started);
            *key = k;
            ok = true;
        }
    }
    pthread_mutex_unlock(&q->mu);
    if (ok && latency)
        kc_histogram_observe(latency, waited);
    return ok;
}

void kc_workqueue_done(kc_workqueue *q, const char *key)
{
    if (!q || !key)
        return;
    wakeups w = {0};
    pthread_mutex_lock(&q->mu);
    void *started = kc_map_remove(q->processing, key);
    kc_series *work = q->m_work;
    if (started && kc_map_get(q->dirty, key)) {
        /* Re-added while it was processing: hand it out again now. */
        if (ring_push(q, key) != KC_OK)
            kc_map_remove(q->dirty, key);
        else
            w.ready++;
    }
    pthread_mutex_unlock(&q->mu);
    wake(q, &w);
    if (started && work)
        kc_histogram_observe(work, since_s(started, now_ns()));
}

bool kc_workqueue_shutting_down(kc_workqueue *q)
{
    if (!q)
        return true;
    pthread_mutex_lock(&q->mu);
    bool s = q->shutting_down;
    pthread_mutex_unlock(&q->mu);
    return s;
}

size_t kc_workqueue_len(kc_workqueue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t kc_workqueue_delayed_len(kc_workqueue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->hlen;
    pthread_mutex_unlock(&q->mu);
    return n;
}
