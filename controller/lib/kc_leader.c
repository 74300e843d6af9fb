/* kc_leader: Lease-based leader election on its own thread (acquire, renew, release). */
#include "kc_leader.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"
#include "kc_rest.h"

#define IDENTITY_MAX 256

struct kc_leader {
    kc_client *client;
    char *ns, *name, *identity;
    long lease_ms, renew_ms, retry_ms;
    int lease_s; /* leaseDurationSeconds we write */
    void (*on_started)(void *ud);
    void (*on_stopped)(void *ud);
    void (*on_new_leader)(const char *identity, void *ud);
    void *ud;
    pthread_t thread;
    unsigned seed; /* for jitter; thread-only */

    /* Guarded by lock: read by other threads. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled by kc_leader_stop; monotonic clock */
    bool stop;
    bool leading;
    int64_t last_renew_ms; /* monotonic start of the last successful acquire/renew */
    char holder[IDENTITY_MAX];

    /* Elector thread only. */
    json_t *observed_spec; /* the Lease spec as last seen (or written) */
    int64_t observed_ms;   /* when observed_spec last changed, local monotonic time */
    json_t *lease;         /* the Lease as last returned by our own write, for the release */
    char reported[IDENTITY_MAX];
};

typedef enum attempt_result {
    ATTEMPT_OK,           /* we hold the Lease now */
    ATTEMPT_FAILED,       /* API error or conflict: try again later */
    ATTEMPT_HELD_BY_OTHER /* another candidate holds an unexpired Lease */
} attempt_result;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* MicroTime: RFC 3339 with exactly six fractional digits, UTC. */
static void micro_time_now(char buf[40])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, 40, "%s.%06ldZ", base, ts.tv_nsec / 1000);
}

/* Sleeps up to ms or until stopped; returns true when stop was requested. */
static bool wait_or_stop(kc_leader *l, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (ms < 0)
        ms = 0;
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->lock);
    while (!l->stop && pthread_cond_timedwait(&l->cond, &l->lock, &ts) == 0)
        ;
    bool stop = l->stop;
    pthread_mutex_unlock(&l->lock);
    return stop;
}

static void set_holder(kc_leader *l, const char *holder)
{
    pthread_mutex_lock(&l->lock);
    snprintf(l->holder, sizeof(l->holder), "%s", holder);
    pthread_mutex_unlock(&l->lock);
    if (holder[0] && strcmp(holder, l->reported) != 0) {
        snprintf(l->reported, sizeof(l->reported), "%s", holder);
        kc_info("new leader observed", "lease=%s/%s holder=%s", l->ns, l->name, holder);
        if (l->on_new_leader)
            l->on_new_leader(holder, l->ud);
    }
}

/* Records the spec we see; the expiry clock restarts only when the record changed, so clock skew
 * between candidates never matters (as in client-go). Takes ownership of spec. */
static void observe(kc_leader *l, json_t *spec, int64_t now)
{
    if (!spec)
        return;
    if (!l->observed_spec || !json_equal(spec, l->observed_spec)) {
        json_decref(l->observed_spec);
        l->observed_spec = spec;
        l->observed_ms = now;
    } else {
        json_decref(spec);
    }
}

static void keep_lease(kc_leader *l, json_t *lease)
{
    json_decref(l->lease);
    l->lease = lease;
}

static json_t *spec_of(const json_t *lease)
{
    json_t *spec = json_object_get(lease, "spec");
    return json_is_object(spec) ? json_deep_copy(spec) : json_object();
}

static attempt_result create_lease(kc_leader *l, int64_t now, const char *ts)
{
    kc_err err = {0};
    json_t *obj =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s, s:s, s:i}}", "apiVersion",
                  "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", l->name,
                  "namespace", l->ns, "spec", "holderIdentity", l->identity, "leaseDurationSeconds",
                  l->lease_s, "acquireTime", ts, "renewTime", ts, "leaseTransitions", 0);
    json_t *out = NULL;
    kc_code rc = obj ? kc_create(l->client, &KC_RES_LEASES, l->ns, obj, &out, &err) : KC_ENOMEM;
    json_decref(obj);
    if (rc != KC_OK) {
        kc_debug("creating lease failed", "lease=%s/%s code=%s", l->ns, l->name, kc_code_name(rc));
        return ATTEMPT_FAILED;
    }
    observe(l, spec_of(out), now);
    keep_lease(l, out);
    set_holder(l, l->identity);
    return ATTEMPT_OK;
}

/* One round of client-go's tryAcquireOrRenew. */
static attempt_result try_acquire_or_renew(kc_leader *l)
{
    int64_t now = mono_ms();
    char ts[40];
    micro_time_now(ts);
    kc_err err = {0};
    json_t *cur = NULL;
    kc_code rc = kc_get(l->client, &KC_RES_LEASES, l->ns, l->name, &cur, &err);
    if (rc == KC_ENOTFOUND)
        return create_lease(l, now, ts);
    if (rc != KC_OK) {
        kc_debug("reading lease failed", "lease=%s/%s code=%s error=%s", l->ns, l->name,
                 kc_code_name(rc), err.msg);
        return ATTEMPT_FAILED;
    }
    json_t *spec = json_object_get(cur, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(cur, "spec", spec);
    }
    observe(l, json_deep_copy(spec), now);
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    holder = holder ? holder : "";
    set_holder(l, holder);
    json_int_t dur_s = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    int64_t dur_ms = dur_s > 0 ? (int64_t)dur_s * 1000 : l->lease_ms;
    bool ours = strcmp(holder, l->identity) == 0;
    if (holder[0] && !ours && l->observed_ms + dur_ms > now) {
        json_decref(cur);
        return ATTEMPT_HELD_BY_OTHER;
    }

    json_int_t transitions = json_integer_value(json_object_get(spec, "leaseTransitions"));
    if (!ours || !json_is_string(json_object_get(spec, "acquireTime"))) {
        json_object_set_new(spec, "acquireTime", json_string(ts));
        if (!ours)
            transitions++;
    }
    json_object_set_new(spec, "holderIdentity", json_string(l->identity));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(l->lease_s));
    json_object_set_new(spec, "renewTime", json_string(ts));
    json_object_set_new(spec, "leaseTransitions", json_integer(transitions));
    json_t *out = NULL;
    rc = kc_update(l->client, &KC_RES_LEASES, l->ns, cur, &out, &err);
    json_decref(cur);
    if (rc != KC_OK) {
        kc_debug("updating lease failed", "lease=%s/%s code=%s error=%s", l->ns, l->name,
                 kc_code_name(rc), err.msg);
        return ATTEMPT_FAILED;
    }
    observe(l, spec_of(out), now);
    keep_lease(l, out);
    set_holder(l, l->identity);
    return ATTEMPT_OK;
}

/* Hands the Lease back so the next candidate need not wait for it to expire. */
static void release(kc_leader *l)
{
    if (!l->lease)
        return;
    char ts[40];
    micro_time_now(ts);
    json_t *obj = json_deep_copy(l->lease);
    json_t *spec = obj ? json_object_get(obj, "spec") : NULL;
    if (!json_is_object(spec)) {
        json_decref(obj);
        return;
    }
    json_object_set_new(spec, "holderIdentity", json_string(""));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
    json_object_set_new(spec, "renewTime", json_string(ts));
    json_object_set_new(spec, "acquireTime", json_string(ts));
    kc_err err = {0};
    kc_code rc = kc_update(l->client, &KC_RES_LEASES, l->ns, obj, NULL, &err);
    json_decref(obj);
    if (rc == KC_OK) {
        kc_info("released leadership", "lease=%s/%s identity=%s", l->ns, l->name, l->identity);
        set_holder(l, "");
    } else {
        kc_warn("releasing lease failed", "lease=%s/%s code=%s error=%s", l->ns, l->name,
                kc_code_name(rc), err.msg);
    }
}

static void set_leading(kc_leader *l, bool leading, int64_t renewed_ms)
{
    pthread_mutex_lock(&l->lock);
    l->leading = leading;
    if (leading)
        l->last_renew_ms = renewed_ms;
    pthread_mutex_unlock(&l->lock);
}

/* Renews every retry period until stopped (true) or leadership is lost (false). */
static bool lead(kc_leader *l, int64_t acquired_ms)
{
    int64_t last_renew = acquired_ms;
    for (;;) {
        int64_t now = mono_ms();
        int64_t until_deadline = last_renew + l->renew_ms - now;
        if (wait_or_stop(l, until_deadline < l->retry_ms ? (long)until_deadline : l->retry_ms))
            return true;
        int64_t start = mono_ms();
        if (start >= last_renew + l->renew_ms) {
            kc_warn("lost leadership: renew deadline passed", "lease=%s/%s identity=%s", l->ns,
                    l->name, l->identity);
            return false;
        }
        attempt_result r = try_acquire_or_renew(l);
        if (r == ATTEMPT_OK) {
            last_renew = start;
            set_leading(l, true, start);
        } else if (r == ATTEMPT_HELD_BY_OTHER) {
            kc_warn("lost leadership: lease taken over", "lease=%s/%s identity=%s holder=%s", l->ns,
                    l->name, l->identity, l->reported);
            return false;
        }
    }
}

static void *elector_main(void *arg)
{
    kc_leader *l = arg;
    for (;;) {
        int64_t start = mono_ms();
        if (try_acquire_or_renew(l) == ATTEMPT_OK) {
            set_leading(l, true, start);
            kc_info("became leader", "lease=%s/%s identity=%s", l->ns, l->name, l->identity);
            if (l->on_started)
                l->on_started(l->ud);
            bool stopped = lead(l, start);
            if (stopped)
                release(l);
            set_leading(l, false, 0);
            if (l->on_stopped)
                l->on_stopped(l->ud);
            if (stopped)
                break;
            continue;
        }
        /* Up to 20% jitter keeps candidates that started together from polling in lockstep. */
        long jitter = (long)((double)l->retry_ms * 0.2 * ((double)rand_r(&l->seed) / RAND_MAX));
        if (wait_or_stop(l, l->retry_ms + jitter))
            break;
    }
    return NULL;
}

static void leader_free(kc_leader *l)
{
    json_decref(l->observed_spec);
    json_decref(l->lease);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l);
}

kc_code kc_leader_start(kc_client *client, const kc_leader_config *cfg, kc_leader **out,
                        kc_err *err)
{
    if (!client || !cfg || !out)
        return kc_err_set(err, KC_EARG, "leader election: client, config and output are required");
    if (!cfg->namespace_ || !cfg->namespace_[0] || !cfg->name || !cfg->name[0])
        return kc_err_set(err, KC_EARG,
                          "leader election: the Lease namespace and name are "
                          "required");
    if (!cfg->identity || !cfg->identity[0] || strlen(cfg->identity) >= IDENTITY_MAX)
        return kc_err_set(err, KC_EARG,
                          "leader election: identity must be non-empty and under %d bytes",
                          IDENTITY_MAX);
    long lease = cfg->lease_duration_ms ? cfg->lease_duration_ms : 15000;
    long renew = cfg->renew_deadline_ms ? cfg->renew_deadline_ms : 10000;
    long retry = cfg->retry_period_ms ? cfg->retry_period_ms : 2000;
    if (lease <= 0 || renew <= 0 || retry <= 0)
        return kc_err_set(err, KC_EARG,
                          "leader election: durations must be positive (lease %ld "
                          "ms, renew deadline %ld ms, retry period %ld ms)",
                          lease, renew, retry);
    if (renew >= lease)
        return kc_err_set(err, KC_EARG,
                          "leader election: renew deadline (%ld ms) must be shorter than the "
                          "lease duration (%ld ms)",
                          renew, lease);
    if (retry >= renew)
        return kc_err_set(err, KC_EARG,
                          "leader election: retry period (%ld ms) must be shorter than the renew "
                          "deadline (%ld ms)",
                          retry, renew);
    kc_leader *l = calloc(1, sizeof(*l));
    if (!l)
        return kc_err_set(err, KC_ENOMEM, "out of memory starting leader election");
    pthread_mutex_init(&l->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &ca);
    pthread_condattr_destroy(&ca);
    l->client = client;
    l->ns = strdup(cfg->namespace_);
    l->name = strdup(cfg->name);
    l->identity = strdup(cfg->identity);
    l->lease_ms = lease;
    l->renew_ms = renew;
    l->retry_ms = retry;
    l->lease_s = (int)((lease + 999) / 1000);
    l->on_started = cfg->on_started_leading;
    l->on_stopped = cfg->on_stopped_leading;
    l->on_new_leader = cfg->on_new_leader;
    l->ud = cfg->ud;
    l->seed = (unsigned)mono_ms() ^ (unsigned)(uintptr_t)l;
    if (!l->ns || !l->name || !l->identity) {
        leader_free(l);
        return kc_err_set(err, KC_ENOMEM, "out of memory starting leader election");
    }
    int e = pthread_create(&l->thread, NULL, elector_main, l);
    if (e != 0) {
        leader_free(l);
        return kc_err_set(err, KC_ENOMEM, "leader election: cannot start its thread: %s",
                          strerror(e));
    }
    *out = l;
    return KC_OK;
}

bool kc_leader_is_leader(kc_leader *l)
{
    if (!l)
        return false;
    pthread_mutex_lock(&l->lock);
    bool r = l->leading && mono_ms() - l->last_renew_ms < l->renew_ms;
    pthread_mutex_unlock(&l->lock);
    return r;
}

const char *kc_leader_holder(kc_leader *l, char *buf, size_t size)
{
    if (!buf || size == 0)
        return "";
    if (!l) {
        buf[0] = '\0';
        return buf;
    }
    pthread_mutex_lock(&l->lock);
    snprintf(buf, size, "%s", l->holder);
    pthread_mutex_unlock(&l->lock);
    return buf;
}

void kc_leader_stop(kc_leader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    leader_free(l);
}
