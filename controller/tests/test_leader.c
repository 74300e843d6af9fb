/* Tests for kc_leader against an in-memory Lease store with resourceVersion checks: acquisition,
 * mutual exclusion, release on stop, renewal failure, stale leases and update conflicts. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_leader.h"
#include "kc_log.h"
#include "testsrv.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* Every duration and time bound below is multiplied by this: 3 under valgrind, whose slowdown
 * would otherwise eat the sub-second renew deadlines these tests use. Lease durations are whole
 * seconds on the wire, so the factor is an integer. */
static long scale = 1;
#define S(ms) ((ms)*scale)

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/ops/leases"
#define LEASE  LEASES "/gpu-operator-lock"

/* The fake API server: one Lease, optimistic concurrency on resourceVersion. */
static struct {
    pthread_mutex_t mu;
    json_t *lease; /* NULL while absent */
    long rv;
    int fail_status;      /* answer everything with this when non-zero */
    int inject_conflicts; /* answer this many more PUTs with 409 */
    int conflicts, puts, posts;
} store = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void handler(ts_server *s, const ts_request *req, ts_conn *conn, void *ud)
{
    pthread_mutex_lock(&store.mu);
    if (store.fail_status) {
        int st = store.fail_status;
        pthread_mutex_unlock(&store.mu);
        ts_respond_status(conn, st, "InternalError", "etcd is on fire");
        return;
    }
    json_t *reply = NULL;
    int status = 200;
    const char *reason = NULL;
    if (strcmp(req->method, "GET") == 0 && strcmp(req->path, LEASE) == 0) {
        if (store.lease)
            reply = json_deep_copy(store.lease);
        else
            status = 404, reason = "NotFound";
    } else if (strcmp(req->method, "POST") == 0 && strcmp(req->path, LEASES) == 0) {
        store.posts++;
        if (store.lease) {
            status = 409, reason = "AlreadyExists";
        } else {
            json_t *obj = json_loads(req->body, 0, NULL);
            char rv[32];
            snprintf(rv, sizeof(rv), "%ld", ++store.rv);
            json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
                                json_string(rv));
            store.lease = obj;
            reply = json_deep_copy(obj);
            status = 201;
        }
    } else if (strcmp(req->method, "PUT") == 0 && strcmp(req->path, LEASE) == 0) {
        store.puts++;
        json_t *obj = json_loads(req->body, 0, NULL);
        const char *want = json_string_value(
            json_object_get(json_object_get(store.lease, "metadata"), "resourceVersion"));
        const char *got =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
        if (!store.lease) {
            status = 404, reason = "NotFound";
            json_decref(obj);
        } else if (store.inject_conflicts > 0 || !got || strcmp(want, got) != 0) {
            if (store.inject_conflicts > 0)
                store.inject_conflicts--;
            store.conflicts++;
            status = 409, reason = "Conflict";
            json_decref(obj);
        } else {
            char rv[32];
            snprintf(rv, sizeof(rv), "%ld", ++store.rv);
            json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
                                json_string(rv));
            json_decref(store.lease);
            store.lease = obj;
            reply = json_deep_copy(obj);
        }
    } else {
        status = 405, reason = "MethodNotAllowed";
    }
    pthread_mutex_unlock(&store.mu);
    if (reason)
        ts_respond_status(conn, status, reason, "from the lease store");
    else
        ts_respond_json(conn, status, reply);
}

static void set_fail(int status)
{
    pthread_mutex_lock(&store.mu);
    store.fail_status = status;
    pthread_mutex_unlock(&store.mu);
}

/* A copy of spec.<field> as a string ("" when absent); integers are printed. */
static void lease_field(const char *field, char *buf, size_t size)
{
    pthread_mutex_lock(&store.mu);
    json_t *v = json_object_get(json_object_get(store.lease, "spec"), field);
    if (json_is_string(v))
        snprintf(buf, size, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, size, "%s", "");
    pthread_mutex_unlock(&store.mu);
}

static void put_lease(const char *holder, int duration_s, int transitions)
{
    pthread_mutex_lock(&store.mu);
    json_decref(store.lease);
    store.lease = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:i, s:s, s:s, s:i}}",
                            "apiVersion", "coordination.k8s.io/v1", "kind", "Lease", "metadata",
                            "name", "gpu-operator-lock", "namespace", "ops", "resourceVersion",
                            "100", "spec", "holderIdentity", holder, "leaseDurationSeconds",
                            duration_s, "acquireTime", "2020-01-01T00:00:00.000000Z", "renewTime",
                            "2020-01-01T00:00:00.000000Z", "leaseTransitions", transitions);
    store.rv = 100;
    pthread_mutex_unlock(&store.mu);
}

typedef struct cand {
    const char *id;
    kc_leader *l;
    atomic_int started, stopped;
    pthread_mutex_t mu;
    char seen[8][64]; /* identities reported by on_new_leader */
    int nseen;
} cand;

static void on_started(void *ud)
{
    cand *c = ud;
    atomic_fetch_add(&c->started, 1);
}

static void on_stopped(void *ud)
{
    cand *c = ud;
    atomic_fetch_add(&c->stopped, 1);
}

static void on_new_leader(const char *identity, void *ud)
{
    cand *c = ud;
    pthread_mutex_lock(&c->mu);
    if (c->nseen < 8)
        snprintf(c->seen[c->nseen++], sizeof(c->seen[0]), "%s", identity);
    pthread_mutex_unlock(&c->mu);
}

static ts_server *srv;
static kc_client *client;

static void setup(void)
{
    scale = RUNNING_ON_VALGRIND ? 3 : 1;
    kc_log_set_level(KC_LOG_ERROR);
    pthread_mutex_lock(&store.mu);
    json_decref(store.lease);
    store.lease = NULL;
    store.rv = 0;
    store.fail_status = store.inject_conflicts = 0;
    store.conflicts = store.puts = store.posts = 0;
    pthread_mutex_unlock(&store.mu);
    srv = ts_start(handler, NULL, NULL);
    cr_assert_not_null(srv);
    kc_config cfg = {.server = (char *)ts_url(srv)};
    /* A blocked renewal cannot be abandoned, so requests must fail fast. */
    kc_client_opts copts = {.qps = -1, .max_retries = -1, .timeout_ms = S(400)};
    kc_err e = {0};
    cr_assert_eq(kc_client_new(&cfg, &copts, &client, &e), KC_OK, "%s", e.msg);
}

static void teardown(void)
{
    kc_client_free(client);
    ts_stop(srv);
    pthread_mutex_lock(&store.mu);
    json_decref(store.lease);
    store.lease = NULL;
    pthread_mutex_unlock(&store.mu);
}

TestSuite(leader, .init = setup, .fini = teardown, .timeout = 30);

static void cand_init(cand *c, const char *id)
{
    memset(c, 0, sizeof(*c));
    c->id = id;
    pthread_mutex_init(&c->mu, NULL);
}

static void start(cand *c, long lease, long renew, long retry)
{
    kc_leader_config cfg = {.namespace_ = "ops",
                            .name = "gpu-operator-lock",
                            .identity = c->id,
                            .lease_duration_ms = S(lease),
                            .renew_deadline_ms = S(renew),
                            .retry_period_ms = S(retry),
                            .on_started_leading = on_started,
                            .on_stopped_leading = on_stopped,
                            .on_new_leader = on_new_leader,
                            .ud = c};
    kc_err e = {0};
    cr_assert_eq(kc_leader_start(client, &cfg, &c->l, &e), KC_OK, "%s", e.msg);
}

static void stop(cand *c)
{
    kc_leader_stop(c->l);
    c->l = NULL;
    pthread_mutex_destroy(&c->mu);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls until the candidate leads (true) or timeout_ms passes (false). */
static bool wait_leading(cand *c, long timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        if (kc_leader_is_leader(c->l))
            return true;
        usleep(5000);
    }
    return false;
}

static bool wait_count(atomic_int *v, int want, long timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        if (atomic_load(v) >= want)
            return true;
        usleep(5000);
    }
    return false;
}

static void assert_micro_time(const char *ts)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    cr_assert_eq(regexec(&re, ts, 0, NULL, 0), 0, "not a MicroTime: \"%s\"", ts);
    regfree(&re);
}

Test(leader, single_candidate_creates_and_renews_the_lease)
{
    cand a;
    cand_init(&a, "pod-a");
    start(&a, 1000, 700, 100);
    cr_assert(wait_leading(&a, S(3000)), "never became leader");
    cr_assert_eq(atomic_load(&a.started), 1);
    char buf[64], renew1[64], renew2[64], acquire1[64], acquire2[64];
    lease_field("holderIdentity", buf, sizeof(buf));
    cr_assert_str_eq(buf, "pod-a");
    lease_field("leaseDurationSeconds", buf, sizeof(buf));
    cr_assert_eq(atol(buf), S(1));
    lease_field("leaseTransitions", buf, sizeof(buf));
    cr_assert_str_eq(buf, "0");
    lease_field("renewTime", renew1, sizeof(renew1));
    lease_field("acquireTime", acquire1, sizeof(acquire1));
    assert_micro_time(renew1);
    assert_micro_time(acquire1);
    usleep(S(350) * 1000);
    lease_field("renewTime", renew2, sizeof(renew2));
    lease_field("acquireTime", acquire2, sizeof(acquire2));
    cr_assert_str_neq(renew1, renew2, "the lease was not renewed");
    cr_assert_str_eq(acquire1, acquire2, "a renewal must keep the acquire time");
    cr_assert(kc_leader_is_leader(a.l));
    cr_assert_str_eq(kc_leader_holder(a.l, buf, sizeof(buf)), "pod-a");
    pthread_mutex_lock(&a.mu);
    cr_assert_eq(a.nseen, 1);
    cr_assert_str_eq(a.seen[0], "pod-a");
    pthread_mutex_unlock(&a.mu);
    pthread_mutex_lock(&store.mu);
    cr_assert_eq(store.posts, 1);
    cr_assert_geq(store.puts, 2);
    pthread_mutex_unlock(&store.mu);
    stop(&a);
    cr_assert_eq(atomic_load(&a.stopped), 1);
    lease_field("holderIdentity", buf, sizeof(buf));
    cr_assert_str_eq(buf, "", "the lease was not released");
    lease_field("leaseDurationSeconds", buf, sizeof(buf));
    cr_assert_str_eq(buf, "1");
}

Test(leader, two_candidates_exactly_one_leads)
{
    cand a, b;
    cand_init(&a, "pod-a");
    cand_init(&b, "pod-b");
    start(&a, 1000, 700, 100);
    start(&b, 1000, 700, 100);
    int64_t end = now_ms() + S(3000);
    while (now_ms() < end && !kc_leader_is_leader(a.l) && !kc_leader_is_leader(b.l))
        usleep(5000);
    cand *leader = kc_leader_is_leader(a.l) ? &a : &b;
    cand *follower = leader == &a ? &b : &a;
    cr_assert(kc_leader_is_leader(leader->l), "nobody became leader");
    /* For well over a lease duration, never two leaders, and the leader keeps its lease. */
    end = now_ms() + S(1500);
    while (now_ms() < end) {
        cr_assert(!(kc_leader_is_leader(a.l) && kc_leader_is_leader(b.l)), "two leaders");
        usleep(10000);
    }
    cr_assert(kc_leader_is_leader(leader->l));
    cr_assert_not(kc_leader_is_leader(follower->l));
    cr_assert_eq(atomic_load(&follower->started), 0);
    char buf[64];
    cr_assert_str_eq(kc_leader_holder(follower->l, buf, sizeof(buf)), leader->id);
    pthread_mutex_lock(&follower->mu);
    cr_assert_geq(follower->nseen, 1);
    cr_assert_str_eq(follower->seen[0], leader->id);
    pthread_mutex_unlock(&follower->mu);
    stop(follower);
    cr_assert_eq(atomic_load(&follower->stopped), 0, "a follower never stops leading");
    stop(leader);
}

Test(leader, stopping_the_leader_hands_over_quickly)
{
    /* A 3 s lease: the takeover must come from the release, not from expiry. */
    cand a, b;
    cand_init(&a, "pod-a");
    cand_init(&b, "pod-b");
    start(&a, 3000, 2000, 150);
    cr_assert(wait_leading(&a, S(3000)));
    start(&b, 3000, 2000, 150);
    usleep(S(400) * 1000);
    cr_assert_not(kc_leader_is_leader(b.l));
    int64_t t0 = now_ms();
    stop(&a);
    cr_assert_eq(atomic_load(&a.stopped), 1, "on_stopped_leading runs before stop returns");
    cr_assert(wait_leading(&b, S(2500)), "the other candidate did not take over");
    int64_t took = now_ms() - t0;
    cr_assert_lt(took, S(1500), "takeover took %lld ms with a %ld ms lease", (long long)took,
                 S(3000));
    char buf[64];
    lease_field("holderIdentity", buf, sizeof(buf));
    cr_assert_str_eq(buf, "pod-b");
    lease_field("leaseTransitions", buf, sizeof(buf));
    cr_assert_str_eq(buf, "1");
    lease_field("leaseDurationSeconds", buf, sizeof(buf));
    cr_assert_eq(atol(buf), S(3));
    pthread_mutex_lock(&b.mu);
    cr_assert_geq(b.nseen, 2);
    cr_assert_str_eq(b.seen[0], "pod-a");
    cr_assert_str_eq(b.seen[b.nseen - 1], "pod-b");
    pthread_mutex_unlock(&b.mu);
    stop(&b);
}

Test(leader, leader_that_cannot_renew_steps_down_within_the_deadline)
{
    cand a;
    cand_init(&a, "pod-a");
    start(&a, 1000, 700, 100);
    cr_assert(wait_leading(&a, S(3000)));
    int64_t t0 = now_ms();
    set_fail(500);
    cr_assert(wait_count(&a.stopped, 1, S(3000)), "never stepped down");
    int64_t took = now_ms() - t0;
    cr_assert_leq(took, S(700 + 300), "stepped down after %lld ms, deadline %ld", (long long)took,
                  S(700));
    cr_assert_not(kc_leader_is_leader(a.l));
    /* Back online: the lease is still ours, so it is taken again at once. */
    set_fail(0);
    cr_assert(wait_leading(&a, S(3000)));
    cr_assert_eq(atomic_load(&a.started), 2);
    stop(&a);
    cr_assert_eq(atomic_load(&a.stopped), 2);
}

Test(leader, stale_lease_is_taken_after_it_expires)
{
    put_lease("dead-pod", (int)S(1), 4);
    cand a;
    cand_init(&a, "pod-a");
    int64_t t0 = now_ms();
    start(&a, 1000, 700, 100);
    usleep(S(600) * 1000);
    cr_assert_not(kc_leader_is_leader(a.l), "took a lease that had not expired yet");
    char buf[64];
    cr_assert_str_eq(kc_leader_holder(a.l, buf, sizeof(buf)), "dead-pod");
    cr_assert(wait_leading(&a, S(3000)));
    int64_t took = now_ms() - t0;
    /* The expiry counts from when this candidate first saw the record, not from renewTime
     * (which is years old). */
    cr_assert_geq(took, S(1000) - 50, "took over after %lld ms", (long long)took);
    cr_assert_leq(took, S(1000 + 600), "took over after %lld ms", (long long)took);
    lease_field("holderIdentity", buf, sizeof(buf));
    cr_assert_str_eq(buf, "pod-a");
    lease_field("leaseTransitions", buf, sizeof(buf));
    cr_assert_str_eq(buf, "5");
    lease_field("acquireTime", buf, sizeof(buf));
    cr_assert_str_neq(buf, "2020-01-01T00:00:00.000000Z");
    pthread_mutex_lock(&a.mu);
    cr_assert_eq(a.nseen, 2);
    cr_assert_str_eq(a.seen[0], "dead-pod");
    cr_assert_str_eq(a.seen[1], "pod-a");
    pthread_mutex_unlock(&a.mu);
    stop(&a);
}

Test(leader, lease_held_by_us_is_taken_at_once)
{
    /* A restarted pod with the same identity does not wait out its own lease. */
    put_lease("pod-a", 60, 2);
    cand a;
    cand_init(&a, "pod-a");
    start(&a, 1000, 700, 100);
    /* The lease runs 60 s: leading well before that is not waiting it out. The bound leaves room
     * for a loaded machine under valgrind (1.5 s was seen missed there). */
    cr_assert(wait_leading(&a, S(10000)));
    char buf[64];
    lease_field("leaseTransitions", buf, sizeof(buf));
    cr_assert_str_eq(buf, "2");
    lease_field("acquireTime", buf, sizeof(buf));
    cr_assert_str_eq(buf, "2020-01-01T00:00:00.000000Z");
    stop(&a);
}

Test(leader, update_conflicts_are_retried)
{
    put_lease("", (int)S(1), 0);
    pthread_mutex_lock(&store.mu);
    store.inject_conflicts = 2;
    pthread_mutex_unlock(&store.mu);
    cand a;
    cand_init(&a, "pod-a");
    start(&a, 1000, 700, 100);
    cr_assert(wait_leading(&a, S(3000)));
    pthread_mutex_lock(&store.mu);
    cr_assert_eq(store.conflicts, 2);
    cr_assert_geq(store.puts, 3);
    cr_assert_eq(store.posts, 0);
    pthread_mutex_unlock(&store.mu);
    cr_assert_eq(atomic_load(&a.started), 1);
    stop(&a);
}

Test(leader, conflict_while_leading_is_not_fatal)
{
    cand a;
    cand_init(&a, "pod-a");
    start(&a, 1000, 700, 100);
    cr_assert(wait_leading(&a, S(3000)));
    pthread_mutex_lock(&store.mu);
    store.inject_conflicts = 2; /* two renewals fail; the third is well within the deadline */
    pthread_mutex_unlock(&store.mu);
    usleep(S(600) * 1000);
    cr_assert(kc_leader_is_leader(a.l));
    cr_assert_eq(atomic_load(&a.stopped), 0);
    pthread_mutex_lock(&store.mu);
    cr_assert_eq(store.conflicts, 2);
    pthread_mutex_unlock(&store.mu);
    stop(&a);
}

Test(leader, config_is_validated)
{
    kc_leader *l = NULL;
    kc_err e = {0};
    kc_leader_config ok = {.namespace_ = "ops", .name = "lock", .identity = "me"};
    kc_leader_config c = ok;
    c.renew_deadline_ms = 15000;
    cr_assert_eq(kc_leader_start(client, &c, &l, &e), KC_EARG);
    cr_assert(strstr(e.msg, "renew deadline (15000 ms) must be shorter than the lease duration "
                            "(15000 ms)") != NULL,
              "%s", e.msg);
    c = ok;
    c.retry_period_ms = 10000;
    cr_assert_eq(kc_leader_start(client, &c, &l, &e), KC_EARG);
    cr_assert(strstr(e.msg, "retry period") != NULL, "%s", e.msg);
    c = ok;
    c.lease_duration_ms = -5;
    cr_assert_eq(kc_leader_start(client, &c, &l, &e), KC_EARG);
    cr_assert(strstr(e.msg, "positive") != NULL, "%s", e.msg);
    c = ok;
    c.identity = "";
    cr_assert_eq(kc_leader_start(client, &c, &l, &e), KC_EARG);
    cr_assert(strstr(e.msg, "identity") != NULL, "%s", e.msg);
    c = ok;
    c.name = NULL;
    cr_assert_eq(kc_leader_start(client, &c, &l, &e), KC_EARG);
    cr_assert_eq(kc_leader_start(NULL, &ok, &l, &e), KC_EARG);
    cr_assert_null(l);
    cr_assert_not(kc_leader_is_leader(NULL));
    kc_leader_stop(NULL);
    /* Defaults (15 s / 10 s / 2 s) are consistent. */
    cr_assert_eq(kc_leader_start(client, &ok, &l, &e), KC_OK, "%s", e.msg);
    kc_leader_stop(l);
}
