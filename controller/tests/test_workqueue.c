/* Tests for kc_workqueue: dedup, exclusive processing, delays, rate limiting and shutdown. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_workqueue.h"

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static kc_workqueue *mkq(const kc_workqueue_opts *o)
{
    kc_workqueue *q = NULL;
    kc_err err;
    cr_assert_eq(kc_workqueue_new(o, &q, &err), KC_OK, "%s", err.msg);
    return q;
}

/* Gets one key and checks it is want; marks it done. */
static void expect_get(kc_workqueue *q, const char *want)
{
    char *k = NULL;
    cr_assert(kc_workqueue_get(q, &k), "queue unexpectedly shut down");
    cr_assert_str_eq(k, want);
    kc_workqueue_done(q, k);
    free(k);
}

Test(workqueue, add_deduplicates_and_is_fifo)
{
    kc_workqueue *q = mkq(NULL);
    cr_assert_eq(kc_workqueue_add(q, "a"), KC_OK);
    cr_assert_eq(kc_workqueue_add(q, "b"), KC_OK);
    cr_assert_eq(kc_workqueue_add(q, "a"), KC_OK);
    cr_assert_eq(kc_workqueue_add(q, "c"), KC_OK);
    cr_assert_eq(kc_workqueue_add(q, "b"), KC_OK);
    cr_assert_eq(kc_workqueue_len(q), 3);
    expect_get(q, "a");
    expect_get(q, "b");
    expect_get(q, "c");
    cr_assert_eq(kc_workqueue_len(q), 0);
    cr_assert_eq(kc_workqueue_add(NULL, "a"), KC_EARG);
    cr_assert_eq(kc_workqueue_add(q, NULL), KC_EARG);
    kc_workqueue_free(q);
}

Test(workqueue, key_readded_while_processing_is_requeued_on_done)
{
    kc_workqueue *q = mkq(NULL);
    kc_workqueue_add(q, "x");
    char *k;
    cr_assert(kc_workqueue_get(q, &k));
    cr_assert_str_eq(k, "x");
    /* While x is processing, re-adding does not make it available to another worker. */
    kc_workqueue_add(q, "x");
    kc_workqueue_add(q, "x");
    cr_assert_eq(kc_workqueue_len(q), 0);
    kc_workqueue_add(q, "y");
    char *k2;
    cr_assert(kc_workqueue_get(q, &k2));
    cr_assert_str_eq(k2, "y", "x must not be handed out twice");
    kc_workqueue_done(q, k2);
    free(k2);
    kc_workqueue_done(q, k);
    free(k);
    cr_assert_eq(kc_workqueue_len(q), 1, "dirty x comes back exactly once after done");
    expect_get(q, "x");
    cr_assert_eq(kc_workqueue_len(q), 0);
    /* done of an unknown key is harmless. */
    kc_workqueue_done(q, "nope");
    cr_assert_eq(kc_workqueue_len(q), 0);
    kc_workqueue_free(q);
}

#define NKEYS    16
#define NWORKERS 4

typedef struct stress {
    kc_workqueue *q;
    atomic_int active[NKEYS];
    atomic_int processed[NKEYS];
    atomic_int version[NKEYS]; /* bumped by the producer before each add */
    atomic_int seen[NKEYS];    /* highest version a worker observed after getting the key */
    atomic_int violations;
    atomic_int max_parallel; /* most workers busy at once: proves the test ran in parallel */
    atomic_int busy;
} stress;

static void *worker(void *arg)
{
    stress *s = arg;
    char *k;
    while (kc_workqueue_get(s->q, &k)) {
        int i = atoi(k + 1);
        int v = atomic_load(&s->version[i]);
        if (v > atomic_load(&s->seen[i]))
            atomic_store(&s->seen[i], v);
        if (atomic_fetch_add(&s->active[i], 1) != 0)
            atomic_fetch_add(&s->violations, 1);
        int b = atomic_fetch_add(&s->busy, 1) + 1;
        int m = atomic_load(&s->max_parallel);
        while (b > m && !atomic_compare_exchange_weak(&s->max_parallel, &m, b))
            ;
        usleep(200);
        atomic_fetch_sub(&s->busy, 1);
        atomic_fetch_sub(&s->active[i], 1);
        atomic_fetch_add(&s->processed[i], 1);
        kc_workqueue_done(s->q, k);
        free(k);
    }
    return NULL;
}

Test(workqueue, workers_never_process_a_key_concurrently)
{
    stress s = {0};
    s.q = mkq(NULL);
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        pthread_create(&th[i], NULL, worker, &s);
    char key[8];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < NKEYS; i++) {
            snprintf(key, sizeof(key), "k%d", i);
            atomic_store(&s.version[i], round);
            cr_assert_eq(kc_workqueue_add(s.q, key), KC_OK);
        }
        if (round % 20 == 0)
            usleep(1000);
    }
    /* Wait until everything added has been processed, then drain. */
    long deadline = now_ms() + 5000;
    while ((kc_workqueue_len(s.q) > 0 || atomic_load(&s.busy) > 0) && now_ms() < deadline)
        usleep(1000);
    kc_workqueue_shutdown(s.q);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(atomic_load(&s.violations), 0, "a key was processed by two workers at once");
    cr_assert_geq(atomic_load(&s.max_parallel), 2, "workers should have overlapped");
    int total = 0;
    for (int i = 0; i < NKEYS; i++) {
        cr_assert_geq(atomic_load(&s.processed[i]), 1, "k%d never processed", i);
        /* An add while the key was processing must lead to one more processing run. */
        cr_assert_eq(atomic_load(&s.seen[i]), 199, "k%d: the last add was lost", i);
        total += atomic_load(&s.processed[i]);
    }
    cr_assert_lt(total, 200 * NKEYS, "dedup should have merged repeated adds (%d)", total);
    kc_workqueue_free(s.q);
}

Test(workqueue, delayed_adds_come_out_in_deadline_order)
{
    kc_workqueue *q = mkq(NULL);
    long t0 = now_ms();
    cr_assert_eq(kc_workqueue_add_after(q, "c", 150), KC_OK);
    cr_assert_eq(kc_workqueue_add_after(q, "a", 50), KC_OK);
    cr_assert_eq(kc_workqueue_add_after(q, "b", 100), KC_OK);
    cr_assert_eq(kc_workqueue_delayed_len(q), 3);
    cr_assert_eq(kc_workqueue_len(q), 0, "nothing is ready before its delay");
    expect_get(q, "a");
    cr_assert_geq(now_ms() - t0, 50);
    expect_get(q, "b");
    cr_assert_geq(now_ms() - t0, 100);
    expect_get(q, "c");
    cr_assert_geq(now_ms() - t0, 150);
    cr_assert_eq(kc_workqueue_delayed_len(q), 0);
    /* A zero delay is an immediate add. */
    kc_workqueue_add_after(q, "now", 0);
    cr_assert_eq(kc_workqueue_len(q), 1);
    expect_get(q, "now");
    kc_workqueue_free(q);
}

Test(workqueue, delayed_add_keeps_the_earlier_deadline)
{
    kc_workqueue *q = mkq(NULL);
    long t0 = now_ms();
    kc_workqueue_add_after(q, "x", 40);
    kc_workqueue_add_after(q, "x", 5000); /* later: ignored */
    kc_workqueue_add_after(q, "y", 5000);
    kc_workqueue_add_after(q, "y", 80); /* earlier: moves y forward */
    cr_assert_eq(kc_workqueue_delayed_len(q), 2, "one entry per key");
    expect_get(q, "x");
    expect_get(q, "y");
    long took = now_ms() - t0;
    cr_assert_geq(took, 80);
    cr_assert_lt(took, 2000, "the later deadlines must not have been used (%ld ms)", took);
    /* A delayed add of a key that is already queued does not duplicate it. */
    kc_workqueue_add(q, "z");
    kc_workqueue_add_after(q, "z", 10);
    usleep(50 * 1000);
    cr_assert_eq(kc_workqueue_len(q), 1);
    expect_get(q, "z");
    kc_workqueue_free(q);
}

Test(workqueue, delayed_ms_reports_a_pending_delayed_add_only)
{
    kc_workqueue *q = mkq(NULL);
    cr_assert_eq(kc_workqueue_delayed_ms(q, "a"), -1);
    kc_workqueue_add(q, "a"); /* queued at once: no delayed add */
    cr_assert_eq(kc_workqueue_delayed_ms(q, "a"), -1);
    kc_workqueue_add_after(q, "a", 5000);
    long ms = kc_workqueue_delayed_ms(q, "a");
    cr_assert(ms > 4000 && ms <= 5000, "%ld ms", ms);
    kc_workqueue_add_after(q, "b", 30);
    expect_get(q, "a");
    for (int i = 0; i < 200 && !kc_workqueue_dirty(q, "b"); i++)
        usleep(10 * 1000);
    cr_assert(kc_workqueue_dirty(q, "b"), "due: queued, no longer delayed");
    cr_assert_eq(kc_workqueue_delayed_ms(q, "b"), -1);
    expect_get(q, "b"); /* once handed out, b's delayed add is gone */
    cr_assert_eq(kc_workqueue_delayed_ms(q, "b"), -1);
    cr_assert_not(kc_workqueue_dirty(q, "b"));
    cr_assert_not(kc_workqueue_dirty(NULL, "b"));
    cr_assert_eq(kc_workqueue_delayed_ms(NULL, "b"), -1);
    kc_workqueue_free(q);
}

Test(workqueue, per_key_backoff_grows_and_forget_resets)
{
    kc_workqueue_opts o = {.base_delay_ms = 5, .max_delay_ms = 1000000, .qps = -1};
    kc_workqueue *q = mkq(&o);
    long want = 5;
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(kc_workqueue_num_requeues(q, "k"), i);
        cr_assert_eq(kc_workqueue_peek_delay_ms(q, "k"), want, "failure %d", i);
        cr_assert_eq(kc_workqueue_add_rate_limited(q, "k"), KC_OK);
        want *= 2;
    }
    cr_assert_eq(kc_workqueue_num_requeues(q, "k"), 10);
    cr_assert_eq(kc_workqueue_peek_delay_ms(q, "k"), 5 * 1024);
    cr_assert_eq(kc_workqueue_num_requeues(q, "other"), 0, "counts are per key");
    kc_workqueue_forget(q, "k");
    cr_assert_eq(kc_workqueue_num_requeues(q, "k"), 0);
    cr_assert_eq(kc_workqueue_peek_delay_ms(q, "k"), 5);
    kc_workqueue_free(q);
}

Test(workqueue, backoff_is_capped_and_delays_the_add)
{
    kc_workqueue_opts o = {.base_delay_ms = 20, .max_delay_ms = 60, .qps = -1};
    kc_workqueue *far = mkq(&o);
    for (int i = 0; i < 70; i++)
        kc_workqueue_add_rate_limited(far, "far");
    cr_assert_eq(kc_workqueue_num_requeues(far, "far"), 70);
    cr_assert_eq(kc_workqueue_peek_delay_ms(far, "far"), 60, "capped at max_delay");
    kc_workqueue_free(far);
    kc_workqueue *q = mkq(&o);
    long t0 = now_ms();
    cr_assert_eq(kc_workqueue_add_rate_limited(q, "k"), KC_OK); /* 20 ms */
    cr_assert_eq(kc_workqueue_len(q), 0);
    expect_get(q, "k");
    long took = now_ms() - t0;
    cr_assert_geq(took, 20);
    t0 = now_ms();
    cr_assert_eq(kc_workqueue_add_rate_limited(q, "k"), KC_OK); /* 40 ms */
    expect_get(q, "k");
    cr_assert_geq(now_ms() - t0, 40);
    cr_assert_eq(kc_workqueue_num_requeues(q, "k"), 2);
    kc_workqueue_free(q);
}

Test(workqueue, token_bucket_limits_overall_rate)
{
    /* Burst 3 at 10 qps: three keys go (almost) at once, the fourth waits ~100 ms. */
    kc_workqueue_opts o = {.base_delay_ms = 1, .qps = 10, .burst = 3};
    kc_workqueue *q = mkq(&o);
    cr_assert_leq(kc_workqueue_peek_delay_ms(q, "a"), 1);
    kc_workqueue_add_rate_limited(q, "a");
    kc_workqueue_add_rate_limited(q, "b");
    kc_workqueue_add_rate_limited(q, "c");
    long d = kc_workqueue_peek_delay_ms(q, "d");
    cr_assert(d >= 60 && d <= 100, "bucket empty: next token in ~100 ms, got %ld", d);
    long t0 = now_ms();
    kc_workqueue_add_rate_limited(q, "d");
    d = kc_workqueue_peek_delay_ms(q, "e");
    cr_assert(d >= 150 && d <= 200, "second overdraft waits ~200 ms, got %ld", d);
    char *k;
    int got = 0;
    while (got < 4 && kc_workqueue_get(q, &k)) {
        if (strcmp(k, "d") == 0)
            cr_assert_geq(now_ms() - t0, 60, "d came early");
        got++;
        kc_workqueue_done(q, k);
        free(k);
    }
    cr_assert_eq(got, 4);
    kc_workqueue_free(q);
}

static void *blocked_getter(void *arg)
{
    kc_workqueue *q = arg;
    char *k = (char *)"sentinel";
    bool ok = kc_workqueue_get(q, &k);
    return (void *)(intptr_t)(ok ? 1 : (k == NULL ? 0 : 2));
}

Test(workqueue, shutdown_wakes_getters_and_drains)
{
    kc_workqueue *q = mkq(NULL);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, blocked_getter, q);
    usleep(20 * 1000);
    kc_workqueue_shutdown(q);
    for (int i = 0; i < 3; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        cr_assert_eq((intptr_t)rv, 0, "getter must return false with key NULL");
    }
    cr_assert(kc_workqueue_shutting_down(q));
    cr_assert_eq(kc_workqueue_add(q, "late"), KC_ECANCELED);
    cr_assert_eq(kc_workqueue_add_after(q, "late", 5), KC_ECANCELED);
    cr_assert_eq(kc_workqueue_add_rate_limited(q, "late"), KC_ECANCELED);
    cr_assert_eq(kc_workqueue_len(q), 0);
    kc_workqueue_shutdown(q); /* idempotent */
    kc_workqueue_free(q);
}

Test(workqueue, shutdown_hands_out_queued_keys_first_and_drops_delayed)
{
    kc_workqueue *q = mkq(NULL);
    kc_workqueue_add(q, "a");
    kc_workqueue_add(q, "b");
    kc_workqueue_add_after(q, "later", 20);
    kc_workqueue_shutdown(q);
    cr_assert_eq(kc_workqueue_delayed_len(q), 0);
    expect_get(q, "a");
    expect_get(q, "b");
    usleep(40 * 1000);
    char *k;
    cr_assert_not(kc_workqueue_get(q, &k), "the delayed key must not appear after shutdown");
    cr_assert_null(k);
    kc_workqueue_free(q);
}

Test(workqueue, free_with_pending_work_does_not_leak)
{
    kc_workqueue *q = mkq(NULL);
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        kc_workqueue_add(q, key);
        kc_workqueue_add_after(q, key, 60000 + i);
        kc_workqueue_add_rate_limited(q, key);
    }
    char *k;
    cr_assert(kc_workqueue_get(q, &k));
    free(k); /* never marked done: free must still release everything */
    kc_workqueue_free(q);
    kc_workqueue_free(NULL);
    cr_assert_eq(kc_workqueue_new(NULL, NULL, NULL), KC_EARG);
}

/* The value of the sample line starting with prefix in the rendered registry (-1 when absent). */
static double sample(kc_registry *r, const char *prefix)
{
    char *text = kc_metrics_render(r);
    cr_assert_not_null(text);
    double v = -1;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix)) && p[strlen(prefix)] == ' ') {
            v = strtod(p + strlen(prefix) + 1, NULL);
            break;
        }
    free(text);
    return v;
}

#define WQ "{controller=\"q1\",name=\"q1\"}"

Test(workqueue, metrics_count_adds_retries_depth_and_durations)
{
    kc_workqueue_opts o = {.qps = -1, .base_delay_ms = 1, .max_delay_ms = 1};
    kc_workqueue *q = mkq(&o);
    kc_registry *r = NULL;
    kc_err err;
    cr_assert_eq(kc_registry_new(&r, &err), KC_OK);
    cr_assert_eq(kc_workqueue_register_metrics(q, r, "q1", &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_workqueue_register_metrics(q, r, "q1", &err), KC_EARG);
    /* Nothing yet: every series is there at 0. */
    cr_assert_eq(sample(r, "workqueue_adds_total" WQ), 0);
    cr_assert_eq(sample(r, "workqueue_depth{controller=\"q1\",name=\"q1\",priority=\"\"}"), 0);
    cr_assert_eq(sample(r, "workqueue_queue_duration_seconds_bucket{controller=\"q1\",name=\"q1\","
                           "le=\"1e-08\"}"),
                 0);
    /* Two adds of a queued key count once; the depth is the keys waiting for a worker. */
    kc_workqueue_add(q, "a");
    kc_workqueue_add(q, "a");
    kc_workqueue_add(q, "b");
    cr_assert_eq(sample(r, "workqueue_adds_total" WQ), 2);
    cr_assert_eq(sample(r, "workqueue_depth{controller=\"q1\",name=\"q1\",priority=\"\"}"), 2);
    char *k;
    cr_assert(kc_workqueue_get(q, &k));
    cr_assert_eq(sample(r, "workqueue_depth{controller=\"q1\",name=\"q1\",priority=\"\"}"), 1);
    cr_assert_eq(sample(r, "workqueue_queue_duration_seconds_count" WQ), 1);
    usleep(30 * 1000);
    /* One key processing for 30 ms or more. */
    cr_assert_geq(sample(r, "workqueue_unfinished_work_seconds" WQ), 0.03);
    cr_assert_geq(sample(r, "workqueue_longest_running_processor_seconds" WQ), 0.03);
    /* Re-added while processing: an add, queued again by done. */
    kc_workqueue_add(q, k);
    cr_assert_eq(sample(r, "workqueue_adds_total" WQ), 3);
    kc_workqueue_done(q, k);
    free(k);
    cr_assert_eq(sample(r, "workqueue_work_duration_seconds_count" WQ), 1);
    cr_assert_geq(sample(r, "workqueue_work_duration_seconds_sum" WQ), 0.03);
    cr_assert_eq(sample(r, "workqueue_unfinished_work_seconds" WQ), 0);
    cr_assert_eq(sample(r, "workqueue_longest_running_processor_seconds" WQ), 0);
    expect_get(q, "b");
    expect_get(q, "a");
    cr_assert_eq(sample(r, "workqueue_queue_duration_seconds_count" WQ), 3);
    cr_assert_eq(sample(r, "workqueue_work_duration_seconds_count" WQ), 3);
    /* Delayed adds are retries (an add without delay is not); each counts as an add once it
     * is queued. */
    cr_assert_eq(sample(r, "workqueue_retries_total" WQ), 0);
    kc_workqueue_add_after(q, "c", 1);
    kc_workqueue_add_rate_limited(q, "d");
    kc_workqueue_add_after(q, "e", 0);
    cr_assert_eq(sample(r, "workqueue_retries_total" WQ), 2);
    char *got[3];
    for (int i = 0; i < 3; i++)
        cr_assert(kc_workqueue_get(q, &got[i]));
    for (int i = 0; i < 3; i++) {
        kc_workqueue_done(q, got[i]);
        free(got[i]);
    }
    cr_assert_eq(sample(r, "workqueue_adds_total" WQ), 6);
    /* client-go's buckets: 10 ns to 1000 s by tens. */
    cr_assert_eq(sample(r, "workqueue_work_duration_seconds_bucket{controller=\"q1\",name=\"q1\","
                           "le=\"1000\"}"),
                 6);
    cr_assert_eq(sample(r, "workqueue_work_duration_seconds_bucket{controller=\"q1\",name=\"q1\","
                           "le=\"+Inf\"}"),
                 6);
    /* The queue removes its hook when freed; the registry renders on. */
    kc_workqueue_free(q);
    cr_assert_eq(sample(r, "workqueue_adds_total" WQ), 6);
    kc_registry_free(r);
}
