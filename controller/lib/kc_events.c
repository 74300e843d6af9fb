/* kc_events: an Event recorder with client-go's deduplication (count patches) and spam filter. */
#include "kc_events.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_client_int.h"
#include "kc_log.h"
#include "kc_rest.h"

#define MESSAGE_MAX 1024
/* Event names are DNS subdomains (253 bytes); the suffix is "." and 16 hex digits. */
#define NAME_PREFIX_MAX (253 - 17)

/* ---- a string-keyed LRU cache ---- */

typedef struct lru_node {
    char *key;
    uint64_t hash;
    void *val;
    struct lru_node *hnext;       /* hash chain */
    struct lru_node *prev, *next; /* recency list, head = most recent */
} lru_node;

typedef struct lru {
    lru_node **table;
    size_t nslots; /* power of two */
    size_t count, cap;
    lru_node *head, *tail;
} lru;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static bool lru_init(lru *l, size_t cap)
{
    l->nslots = 16;
    while (l->nslots < cap)
        l->nslots *= 2;
    l->table = calloc(l->nslots, sizeof(*l->table));
    l->cap = cap;
    return l->table != NULL;
}

static void list_unlink(lru *l, lru_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

static void list_push_front(lru *l, lru_node *n)
{
    n->prev = NULL;
    n->next = l->head;
    if (l->head)
        l->head->prev = n;
    l->head = n;
    if (!l->tail)
        l->tail = n;
}

static lru_node *lru_get(lru *l, const char *key)
{
    uint64_t h = hash_str(key);
    for (lru_node *n = l->table[h & (l->nslots - 1)]; n; n = n->hnext) {
        if (n->hash == h && strcmp(n->key, key) == 0) {
            list_unlink(l, n);
            list_push_front(l, n);
            return n;
        }
    }
    return NULL;
}

static void lru_remove(lru *l, lru_node *n)
{
    lru_node **pp = &l->table[n->hash & (l->nslots - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    list_unlink(l, n);
    l->count--;
    free(n->key);
    free(n->val);
    free(n);
}

/* Inserts key (not present) with val (malloc'd, owned by the cache from now on, also on failure),
 * evicting the least recently used entry when full. NULL when out of memory. */
static lru_node *lru_put(lru *l, const char *key, void *val)
{
    lru_node *n = calloc(1, sizeof(*n));
    if (!n || !(n->key = strdup(key))) {
        free(n);
        free(val);
        return NULL;
    }
    n->val = val;
    n->hash = hash_str(key);
    size_t slot = n->hash & (l->nslots - 1);
    n->hnext = l->table[slot];
    l->table[slot] = n;
    list_push_front(l, n);
    l->count++;
    if (l->count > l->cap)
        lru_remove(l, l->tail);
    return n;
}

static void lru_free(lru *l)
{
    while (l->head)
        lru_remove(l, l->head);
    free(l->table);
}

/* ---- recorder ---- */

typedef struct dedup_entry {
    char name[254];
    char ns[64];
    long count;
    int64_t last_write_ms; /* monotonic */
} dedup_entry;

typedef struct spam_bucket {
    double tokens;
    int64_t last_ms; /* monotonic */
} spam_bucket;

/* A queued Event: the involved object's reference and the Event's fields, copied. */
typedef struct queued_event {
    struct queued_event *next;
    char *kind, *api_version, *name, *ns, *uid, *rv, *type, *reason, *msg;
} queued_event;

struct kc_event_recorder {
    kc_client *client;
    char *component, *instance, *default_ns;
    long window_ms;
    long long (*clock_ms)(void);
    int burst;
    double refill_per_s;
    pthread_mutex_t lock; /* serializes records: caches, stats and the API writes */
    lru dedup, spam;
    kc_event_stats stats;

    /* The queue (queue_cap > 0): guarded by qmu; the sender thread writes what it holds. */
    size_t queue_cap, queued;
    unsigned long q_dropped, q_failed; /* counted under qmu: never wait for a write */
    pthread_mutex_t qmu;
    pthread_cond_t qcond, qidle;
    queued_event *qhead, *qtail;
    bool qstop, qbusy, sender_started;
    pthread_t sender;
};

static void *sender_main(void *arg);

typedef struct obj_ref {
    const char *kind, *api_version, *name, *ns, *uid, *rv;
} obj_ref;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rfc3339_now(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

kc_code kc_event_recorder_new(kc_client *client, const kc_event_recorder_opts *opts,
                              kc_event_recorder **out, kc_err *err)
{
    if (!client || !opts || !out)
        return kc_err_set(err, KC_EARG, "event recorder: client, options and output are required");
    if (!opts->component || !opts->component[0])
        return kc_err_set(err, KC_EARG,
                          "event recorder: options.component must name the "
                          "reporting component, e.g. \"gpu-operator\"");
    kc_event_recorder *rec = calloc(1, sizeof(*rec));
    if (!rec)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating an event recorder");
    char host[256] = "";
    if (!opts->instance && gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "unknown");
    rec->client = client;
    rec->component = strdup(opts->component);
    rec->instance = strdup(opts->instance ? opts->instance : host);
    rec->default_ns = strdup(opts->default_namespace ? opts->default_namespace : "default");
    rec->window_ms = opts->dedup_window_ms > 0 ? opts->dedup_window_ms : 3600000;
    rec->clock_ms = opts->clock_ms ? opts->clock_ms : mono_ms;
    rec->burst = opts->spam_burst ? opts->spam_burst : 25;
    rec->refill_per_s = opts->spam_refill_per_s > 0 ? opts->spam_refill_per_s : 1.0 / 300;
    size_t cap = opts->cache_size ? opts->cache_size : 4096;
    pthread_mutex_init(&rec->lock, NULL);
    pthread_mutex_init(&rec->qmu, NULL);
    pthread_cond_init(&rec->qcond, NULL);
    pthread_cond_init(&rec->qidle, NULL);
    rec->queue_cap = opts->queue_size;
    if (!rec->component || !rec->instance || !rec->default_ns || !lru_init(&rec->dedup, cap) ||
        !lru_init(&rec->spam, cap)) {
        kc_event_recorder_free(rec);
        return kc_err_set(err, KC_ENOMEM, "out of memory creating an event recorder");
    }
    if (rec->queue_cap > 0) {
        if (pthread_create(&rec->sender, NULL, sender_main, rec) != 0) {
            kc_event_recorder_free(rec);
            return kc_err_set(err, KC_ENOMEM,
                              "event recorder: cannot start its sender thread (out of threads "
                              "or memory)");
        }
        rec->sender_started = true;
    }
    *out = rec;
    return KC_OK;
}

static void queued_free(queued_event *q)
{
    if (!q)
        return;
    free(q->kind);
    free(q->api_version);
    free(q->name);
    free(q->ns);
    free(q->uid);
    free(q->rv);
    free(q->type);
    free(q->reason);
    free(q->msg);
    free(q);
}

void kc_event_recorder_flush(kc_event_recorder *rec)
{
    if (!rec || !rec->sender_started)
        return;
    pthread_mutex_lock(&rec->qmu);
    while (rec->qhead || rec->qbusy)
        pthread_cond_wait(&rec->qidle, &rec->qmu);
    pthread_mutex_unlock(&rec->qmu);
}

void kc_event_recorder_free(kc_event_recorder *rec)
{
    if (!rec)
        return;
    if (rec->sender_started) {
        pthread_mutex_lock(&rec->qmu);
        rec->qstop = true;
        pthread_cond_signal(&rec->qcond);
        pthread_mutex_unlock(&rec->qmu);
        pthread_join(rec->sender, NULL);
    }
    while (rec->qhead) {
        queued_event *q = rec->qhead;
        rec->qhead = q->next;
        queued_free(q);
    }
    pthread_mutex_destroy(&rec->qmu);
    pthread_cond_destroy(&rec->qcond);
    pthread_cond_destroy(&rec->qidle);
    if (rec->dedup.table)
        lru_free(&rec->dedup);
    if (rec->spam.table)
        lru_free(&rec->spam);
    pthread_mutex_destroy(&rec->lock);
    free(rec->component);
    free(rec->instance);
    free(rec->default_ns);
    free(rec);
}

void kc_event_recorder_stats(kc_event_recorder *rec, kc_event_stats *out)
{
    if (!out)
        return;
    if (!rec) {
        memset(out, 0, sizeof(*out));
        return;
    }
    pthread_mutex_lock(&rec->lock);
    *out = rec->stats;
    pthread_mutex_unlock(&rec->lock);
    pthread_mutex_lock(&rec->qmu);
    out->queue_dropped = rec->q_dropped;
    out->failed += rec->q_failed;
    pthread_mutex_unlock(&rec->qmu);
}

static const char *str_field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s && s[0] ? s : NULL;
}

/* Reads the reference fields from an object or from an ObjectReference. */
static kc_code read_ref(const json_t *involved, obj_ref *r, kc_err *err)
{
    if (!json_is_object(involved))
        return kc_err_set(err, KC_EARG, "event: the involved object must be a JSON object");
    const json_t *md = json_object_get(involved, "metadata");
    const json_t *src = json_is_object(md) ? md : involved;
    r->kind = str_field(involved, "kind");
    r->api_version = str_field(involved, "apiVersion");
    r->name = str_field(src, "name");
    r->ns = str_field(src, "namespace");
    r->uid = str_field(src, "uid");
    r->rv = str_field(src, "resourceVersion");
    if (!r->kind || !r->name)
        return kc_err_set(err, KC_EARG,
                          "event: the involved object needs kind and %s (got kind=%s name=%s)",
                          src == md ? "metadata.name" : "name", r->kind ? r->kind : "(none)",
                          r->name ? r->name : "(none)");
    return KC_OK;
}

/* Joins fields with a unit separator, which no Kubernetes name or reason holds. */
static char *join_key(const char *const *parts, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(parts[i] ? parts[i] : "") + 1;
    char *k = malloc(len);
    if (!k)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = parts[i] ? parts[i] : "";
        size_t l = strlen(p);
        memcpy(k + o, p, l);
        o += l;
        k[o++] = '\x1f';
    }
    k[o] = '\0';
    return k;
}

/* Takes a token from the object's bucket; false when it is empty. */
static bool spam_allow(kc_event_recorder *rec, const char *key)
{
    if (rec->burst < 0)
        return true;
    int64_t now = rec->clock_ms();
    lru_node *n = lru_get(&rec->spam, key);
    if (!n) {
        spam_bucket *b = malloc(sizeof(*b));
        if (!b)
            return true; /* better an unthrottled Event than a lost one */
        *b = (spam_bucket){(double)rec->burst, now};
        if (!(n = lru_put(&rec->spam, key, b)))
            return true;
    }
    spam_bucket *b = n->val;
    b->tokens += (double)(now - b->last_ms) / 1000.0 * rec->refill_per_s;
    if (b->tokens > rec->burst)
        b->tokens = rec->burst;
    b->last_ms = now;
    if (b->tokens < 1)
        return false;
    b->tokens -= 1;
    return true;
}

/* A name suffix that never repeats within the process: nanoseconds since the epoch, bumped past
 * the last one handed out. */
static uint64_t unique_suffix(void)
{
    static _Atomic uint64_t last;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    uint64_t prev = atomic_load(&last);
    uint64_t next;
    do {
        next = now > prev ? now : prev + 1;
    } while (!atomic_compare_exchange_weak(&last, &prev, next));
    return next;
}

static json_t *build_event(kc_event_recorder *rec, const obj_ref *r, const char *ns,
                           const char *name, const char *type, const char *reason, const char *msg,
                           const char *now)
{
    json_t *inv = json_pack("{s:s, s:s}", "kind", r->kind, "name", r->name);
    if (!inv)
        return NULL;
    if (r->api_version)
        json_object_set_new(inv, "apiVersion", json_string(r->api_version));
    if (r->ns)
        json_object_set_new(inv, "namespace", json_string(r->ns));
    if (r->uid)
        json_object_set_new(inv, "uid", json_string(r->uid));
    if (r->rv)
        json_object_set_new(inv, "resourceVersion", json_string(r->rv));
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, "
                     "s:s, s:i}",
                     "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", ns,
                     "involvedObject", inv, "type", type, "reason", reason, "message", msg,
                     "source", "component", rec->component, "host", rec->instance,
                     "reportingComponent", rec->component, "reportingInstance", rec->instance,
                     "firstTimestamp", now, "lastTimestamp", now, "count", 1);
}

static kc_code create_event(kc_event_recorder *rec, const obj_ref *r, const char *key,
                            const char *type, const char *reason, const char *msg, kc_err *err)
{
    const char *ns = r->ns ? r->ns : rec->default_ns;
    char now[32];
    rfc3339_now(now);
    kc_code rc = KC_OK;
    char name[254];
    /* A name clash (another process, same nanosecond) gets one more try with a new suffix. */
    for (int attempt = 0; attempt < 2; attempt++) {
        snprintf(name, sizeof(name), "%.*s.%016llx", NAME_PREFIX_MAX, r->name,
                 (unsigned long long)unique_suffix());
        json_t *ev = build_event(rec, r, ns, name, type, reason, msg, now);
        if (!ev)
            return kc_err_set(err, KC_ENOMEM, "out of memory building an Event");
        rc = kc_create(rec->client, &KC_RES_EVENTS, ns, ev, NULL, err);
        json_decref(ev);
        if (rc != KC_EALREADYEXISTS)
            break;
    }
    if (rc != KC_OK)
        return rc;
    rec->stats.created++;
    dedup_entry *e = malloc(sizeof(*e));
    if (!e)
        return KC_OK; /* recorded; only the next repeat loses its deduplication */
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->ns, sizeof(e->ns), "%s", ns);
    e->count = 1;
    e->last_write_ms = rec->clock_ms();
    lru_node *old = lru_get(&rec->dedup, key);
    if (old)
        lru_remove(&rec->dedup, old);
    lru_put(&rec->dedup, key, e);
    return KC_OK;
}

/* Counts a repeat on the cached Event; KC_ENOTFOUND when the Event no longer exists. */
static kc_code patch_event(kc_event_recorder *rec, dedup_entry *e, kc_err *err)
{
    char now[32];
    rfc3339_now(now);
    json_t *patch =
        json_pack("{s:I, s:s}", "count", (json_int_t)(e->count + 1), "lastTimestamp", now);
    if (!patch)
        return kc_err_set(err, KC_ENOMEM, "out of memory building an Event patch");
    kc_code rc = kc_patch(rec->client, &KC_RES_EVENTS, e->ns, e->name, KC_PATCH_MERGE, patch, NULL,
                          NULL, err);
    json_decref(patch);
    if (rc == KC_OK) {
        e->count++;
        e->last_write_ms = rec->clock_ms();
        rec->stats.patched++;
    }
    return rc;
}

/* Cuts a message to MESSAGE_MAX bytes without splitting a UTF-8 sequence. */
static void truncate_utf8(char *msg)
{
    size_t len = strlen(msg);
    if (len <= MESSAGE_MAX)
        return;
    size_t cut = MESSAGE_MAX;
    while (cut > 0 && ((unsigned char)msg[cut] & 0xC0) == 0x80)
        cut--;
    msg[cut] = '\0';
}

static kc_code record_locked(kc_event_recorder *rec, const obj_ref *r, const char *type,
                             const char *reason, const char *msg, bool *dropped, kc_err *err)
{
    const char *spam_parts[] = {rec->component, rec->instance, r->kind,       r->ns,
                                r->name,        r->uid,        r->api_version};
    const char *key_parts[] = {rec->component, rec->instance,  r->kind, r->ns,  r->name,
                               r->uid,         r->api_version, type,    reason, msg};
    char *spam_key = join_key(spam_parts, sizeof(spam_parts) / sizeof(spam_parts[0]));
    char *key = join_key(key_parts, sizeof(key_parts) / sizeof(key_parts[0]));
    kc_code rc = KC_OK;
    if (!spam_key || !key) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory recording an Event");
        goto free_keys;
    }
    if (!spam_allow(rec, spam_key)) {
        rec->stats.dropped++;
        *dropped = true;
        rc = kc_err_set(err, KC_ETOOMANYREQUESTS,
                        "event %s for %s %s dropped: the object exceeded %d Events per burst",
                        reason, r->kind, r->name, rec->burst);
        goto free_keys;
    }
    lru_node *n = lru_get(&rec->dedup, key);
    if (n && rec->clock_ms() - ((dedup_entry *)n->val)->last_write_ms <= rec->window_ms) {
        rc = patch_event(rec, n->val, err);
        if (rc != KC_ENOTFOUND)
            goto free_keys;
        /* The Event expired (or was deleted): start a new one. */
        kc_debug("event expired, recreating", "reason=%s kind=%s name=%s", reason, r->kind,
                 r->name);
    }
    rc = create_event(rec, r, key, type, reason, msg, err);
free_keys:
    free(spam_key);
    free(key);
    return rc;
}

/* Writes one Event (or counts a repeat) and logs the outcome. */
static kc_code deliver(kc_event_recorder *rec, const obj_ref *r, const char *type,
                       const char *reason, const char *msg)
{
    kc_err err = {0};
    bool dropped = false;
    pthread_mutex_lock(&rec->lock);
    kc_code rc = record_locked(rec, r, type, reason, msg, &dropped, &err);
    if (rc != KC_OK && !dropped)
        rec->stats.failed++;
    pthread_mutex_unlock(&rec->lock);
    if (rc == KC_OK) {
        kc_debug("event recorded", "type=%s reason=%s kind=%s name=%s message=%s", type, reason,
                 r->kind, r->name, msg);
        return KC_OK;
    }
    if (dropped) {
        /* Dropping is the filter working, not a failure worth a warning each time. */
        kc_debug("event dropped by spam filter", "reason=%s kind=%s name=%s", reason, r->kind,
                 r->name);
        return rc;
    }
    kc_warn("recording event failed", "reason=%s kind=%s name=%s code=%s error=%s", reason, r->kind,
            r->name, kc_code_name(rc), err.msg);
    return rc;
}

/* Copies the Event into the queue; drops it (counted) when the queue is full. */
static kc_code enqueue(kc_event_recorder *rec, const obj_ref *r, const char *type,
                       const char *reason, const char *msg)
{
    queued_event *q = calloc(1, sizeof(*q));
    bool ok = q != NULL;
    if (q) {
        q->kind = kc__dup_opt(r->kind, &ok);
        q->api_version = kc__dup_opt(r->api_version, &ok);
        q->name = kc__dup_opt(r->name, &ok);
        q->ns = kc__dup_opt(r->ns, &ok);
        q->uid = kc__dup_opt(r->uid, &ok);
        q->rv = kc__dup_opt(r->rv, &ok);
        q->type = kc__dup_opt(type, &ok);
        q->reason = kc__dup_opt(reason, &ok);
        q->msg = kc__dup_opt(msg, &ok);
    }
    if (!ok) {
        queued_free(q);
        pthread_mutex_lock(&rec->qmu);
        rec->q_failed++;
        pthread_mutex_unlock(&rec->qmu);
        kc_warn("recording event failed",
                "reason=%s kind=%s code=KC_ENOMEM error=\"out of "
                "memory queueing the Event\"",
                reason, r->kind);
        return KC_ENOMEM;
    }
    pthread_mutex_lock(&rec->qmu);
    bool full = rec->queued >= rec->queue_cap;
    unsigned long n = full ? ++rec->q_dropped : 0;
    if (!full) {
        if (rec->qtail)
            rec->qtail->next = q;
        else
            rec->qhead = q;
        rec->qtail = q;
        rec->queued++;
        pthread_cond_signal(&rec->qcond);
    }
    pthread_mutex_unlock(&rec->qmu);
    if (full) {
        queued_free(q);
        /* Events are best effort; say so once per 100 drops. */
        if (n % 100 == 1)
            kc_warn("event queue full; events dropped", "reason=%s kind=%s name=%s dropped=%lu",
                    reason, r->kind, r->name, n);
        return KC_EUNAVAILABLE;
    }
    return KC_OK;
}

/* The sender thread: writes queued Events in order until told to stop (then drains). */
static void *sender_main(void *arg)
{
    kc_event_recorder *rec = arg;
    pthread_mutex_lock(&rec->qmu);
    for (;;) {
        while (!rec->qhead && !rec->qstop)
            pthread_cond_wait(&rec->qcond, &rec->qmu);
        if (!rec->qhead)
            break; /* stopping and drained */
        queued_event *q = rec->qhead;
        rec->qhead = q->next;
        if (!rec->qhead)
            rec->qtail = NULL;
        rec->queued--;
        rec->qbusy = true;
        pthread_mutex_unlock(&rec->qmu);
        obj_ref r = {q->kind, q->api_version, q->name, q->ns, q->uid, q->rv};
        deliver(rec, &r, q->type, q->reason, q->msg);
        queued_free(q);
        pthread_mutex_lock(&rec->qmu);
        rec->qbusy = false;
        if (!rec->qhead)
            pthread_cond_broadcast(&rec->qidle);
    }
    pthread_cond_broadcast(&rec->qidle);
    pthread_mutex_unlock(&rec->qmu);
    return NULL;
}

kc_code kc_event_vrecord(kc_event_recorder *rec, const json_t *involved, const char *type,
                         const char *reason, const char *fmt, va_list ap)
{
    kc_err err = {0};
    kc_code rc = KC_OK;
    obj_ref r = {0};
    if (!rec || !type || !reason || !reason[0] || !fmt) {
        rc = kc_err_set(&err, KC_EARG, "event: recorder, type, reason and message are required");
        goto log_failure;
    }
    if (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0) {
        rc = kc_err_set(&err, KC_EARG,
                        "event %s: type must be \"Normal\" or \"Warning\", got "
                        "\"%s\"",
                        reason, type);
        goto log_failure;
    }
    if ((rc = read_ref(involved, &r, &err)) != KC_OK)
        goto log_failure;
    char msg[MESSAGE_MAX * 2];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    truncate_utf8(msg);
    if (rec->sender_started)
        return enqueue(rec, &r, type, reason, msg);
    return deliver(rec, &r, type, reason, msg);
log_failure:
    kc_warn("recording event failed", "reason=%s kind=%s name=%s code=%s error=%s",
            reason ? reason : "", r.kind ? r.kind : "", r.name, kc_code_name(rc), err.msg);
    return rc;
}

kc_code kc_event_record(kc_event_recorder *rec, const json_t *involved, const char *type,
                        const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kc_code rc = kc_event_vrecord(rec, involved, type, reason, fmt, ap);
    va_end(ap);
    return rc;
}
