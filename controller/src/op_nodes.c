/* op_nodes: the node reconciler: gathers a node's operand and validation pods from the caches,
 * lets op_gate decide, and writes the label patch, the validation pods and Events. */
#include "op_controller_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "kc_log.h"
#include "op_migcheck.h"
#include "op_policy.h"
#include "kc_sharing.h"

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static uint64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u;
}

/* ---- one reconcile's writes ----
 * The reconcile hands its writes to the pipe and goes on; the pipe's thread answers them. The
 * batch lives until the last answer (the reconcile holds one reference while it submits) and then
 * times the transition: from the watch event that allowed it to the reconcile's start (waiting
 * for a worker), to the first write sent (the operator's share), and to the last write answered
 * (adds the API server's time). */
typedef struct op_batch {
    op_controller *c;
    uint64_t ev, start;     /* CLOCK_MONOTONIC ms; ev 0: no event to time from */
    atomic_int refs;        /* the reconcile's own, plus one per write not answered yet */
    _Atomic uint64_t first; /* the first write sent; 0: none yet */
    bool tracked;           /* writes submitted from now on are in the node's expectation */
    char node[];
} op_batch;

enum { W_LABELS, W_DELETE, W_CREATE };

typedef struct op_write {
    op_batch *b;
    int what;
    bool tracked; /* counted in the node's expectation (op_expect.inflight) */
    char pod[];   /* the pod deleted or created */
} op_write;

static op_batch *batch_new(op_controller *c, const char *node, uint64_t ev, uint64_t start)
{
    op_batch *b = calloc(1, sizeof(*b) + strlen(node) + 1);
    if (!b)
        return NULL;
    b->c = c;
    b->ev = ev;
    b->start = start;
    atomic_init(&b->refs, 1);
    atomic_init(&b->first, 0);
    strcpy(b->node, node);
    return b;
}

/* Notes a write sent at `at` (the earliest one counts). */
static void batch_sent(op_batch *b, uint64_t at)
{
    uint64_t cur = atomic_load(&b->first);
    while (at && (!cur || at < cur) && !atomic_compare_exchange_weak(&b->first, &cur, at)) {
    }
}

static void batch_release(op_batch *b)
{
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    op_controller *c = b->c;
    uint64_t first = atomic_load(&b->first);
    if (first && b->ev && c->m_delay) {
        uint64_t end = op_mono_ms();
        kc_histogram_observe(c->m_queued, (double)(b->start - b->ev) / 1000.0);
        kc_histogram_observe(c->m_delay, (double)(first - b->ev) / 1000.0);
        kc_histogram_observe(c->m_applied, (double)(end - b->ev) / 1000.0);
    }
    free(b);
}

static void drop_expectation(op_controller *c, const char *node)
{
    pthread_mutex_lock(&c->mu);
    op_expect_free(kc_map_remove(c->expect, node));
    pthread_mutex_unlock(&c->mu);
}

static void expect_answered(op_controller *c, const char *node, int what, const kc_pipe_result *r);

/* A write's answer, on the pipe's thread. A failed write drops what the node's reconciles expect
 * of their writes (the next one sees the caches as they are) and requeues the node. */
static void write_done(const kc_pipe_result *r, void *ud)
{
    op_write *w = ud;
    op_batch *b = w->b;
    op_controller *c = b->c;
    batch_sent(b, r->sent_ms);
    bool ok = r->code == KC_OK || (w->what == W_DELETE && r->code == KC_ENOTFOUND) ||
              (w->what == W_CREATE && r->code == KC_EALREADYEXISTS);
    const char *msg = r->err ? r->err->msg : "";
    if (ok && w->what == W_CREATE && r->code == KC_OK)
        kc_info("validation pod created", "node=%s pod=%s", b->node, w->pod);
    if (!ok) {
        if (w->what == W_LABELS)
            kc_warn("cannot label node", "node=%s err=\"%s\"", b->node, msg);
        else if (w->what == W_DELETE)
            kc_warn("cannot delete a validation pod", "pod=%s err=\"%s\"", w->pod, msg);
        else
            kc_warn("cannot create a validation pod", "node=%s err=\"%s\"", b->node, msg);
        drop_expectation(c, b->node);
        char key[300];
        snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", b->node);
        op_requeue_failed(c, key, r->err ? r->err->retry_after_s : 0);
    } else {
        if (w->tracked)
            expect_answered(c, b->node, w->what, r);
        if (r->code == KC_OK) {
            char key[300];
            snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", b->node);
            kc_workqueue_forget(c->q, key);
        }
    }
    free(w);
    batch_release(b);
}

/* Hands one write to the pipe; false when it could not be (logged; the caller requeues). */
static bool submit(op_batch *b, int what, const char *pod, const json_t *body)
{
    op_controller *c = b->c;
    if (!pod) /* a creation: the pod's name, for the log */
        pod = str_at(json_object_get(body, "metadata"), "name", NULL);
    op_write *w = calloc(1, sizeof(*w) + (pod ? strlen(pod) : 0) + 1);
    if (!w)
        return false;
    w->b = b;
    w->what = what;
    w->tracked = b->tracked;
    strcpy(w->pod, pod ? pod : "");
    atomic_fetch_add(&b->refs, 1);
    kc_err err;
    kc_code rc;
    if (what == W_LABELS)
        rc = kc_patch_async(c->pipe, b->node, &KC_RES_NODES, NULL, b->node, KC_PATCH_MERGE, body,
                            NULL, write_done, w, &err);
    else if (what == W_DELETE)
        rc = kc_delete_async(c->pipe, b->node, &KC_RES_PODS, c->ns, pod, KC_PROPAGATE_BACKGROUND,
                             NULL, write_done, w, &err);
    else
        rc = kc_create_async(c->pipe, b->node, &KC_RES_PODS, c->ns, body, write_done, w, &err);
    if (rc == KC_OK)
        return true;
    kc_warn("cannot send a write", "node=%s err=\"%s\"", b->node, err.msg);
    free(w);
    atomic_fetch_sub(&b->refs, 1); /* the reconcile still holds its own */
    return false;
}

const char *op_node_result_reason(const op_node_result *r)
{
    return r->reason ? r->reason : "";
}

void op_node_result_free(void *r)
{
    if (r)
        free(((op_node_result *)r)->reason);
    free(r);
}

/* Records the node's result; returns the previous one (or a zero result) in *prev, whose
 * reason the caller frees. */
static void set_result(op_controller *c, const char *name, const op_gate_out *out,
                       const op_node_result *up, op_node_result *prev)
{
    memset(prev, 0, sizeof(*prev));
    prev->stage = -2;
    /* An empty reason (the usual case) takes no allocation; a failed copy reads as empty. */
    char *reason = out->reason[0] ? strdup(out->reason) : NULL;
    pthread_mutex_lock(&c->mu);
    op_node_result *r = kc_map_get(c->results, name);
    if (r)
        *prev = *r;
    else if ((r = calloc(1, sizeof(*r))) && kc_map_put(c->results, name, r, NULL) != KC_OK) {
        free(r);
        r = NULL;
    }
    if (r) {
        r->phase = out->phase;
        r->stage = out->stage;
        r->upgrade = up->upgrade;
        r->unavailable = up->unavailable;
        r->sharing_invalid = out->sharing_invalid;
        r->mig_invalid = out->mig_invalid;
        r->reason = reason;
        reason = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(reason);
}

static void drop_result(op_controller *c, const char *name)
{
    pthread_mutex_lock(&c->mu);
    op_node_result_free(kc_map_remove(c->results, name));
    op_mig_owner_free(kc_map_remove(c->mig_owner, name));
    op_expect_free(kc_map_remove(c->expect, name));
    pthread_mutex_unlock(&c->mu);
}

/* ---- expectations ----
 * A node's reconcile reads the node and its pods from the caches, which show the operator's own
 * writes only once their watch events arrive. A reconcile in between (another pod of the node
 * changed) saw the old state and wrote the same labels and created the same pods again: under
 * load, a third of all requests. So each reconcile that writes records what it wrote, and until
 * the caches show it the next reconcile sees the node and its pods with those writes applied
 * (as client-go's mutation cache does). An expectation is dropped once the caches show it, or
 * once they have caught up with every write it records: every write answered, and the node and
 * pod caches at or past the resourceVersions the answers carried (compared as numbers, as
 * client-go's mutation cache does). What the caches show then is the truth, a write someone else
 * overtook included. A watch that lags by seconds therefore causes no duplicate writes. When an
 * answer carries no usable resourceVersion, the expectation goes after EXPECT_MS; in any case
 * after EXPECT_MAX_MS (caches that never catch up are a broken watch, which relists). */
#define EXPECT_MS     10000
#define EXPECT_MAX_MS 120000

typedef struct op_expect {
    uint64_t id;         /* tells a replaced expectation from the one read */
    uint64_t since_ms;   /* when the oldest write it folds was recorded */
    json_t *labels;      /* label → value (null: removed) */
    json_t *annotations; /* the same for annotations */
    json_t *created;     /* pods created (identity, labels, annotations, node): they must be
                          * in the cache */
    json_t *deleted;     /* names of pods deleted: gone from the cache, or terminating */
    int inflight;        /* writes not answered yet */
    uint64_t node_rv;    /* the newest resourceVersion the node's label patches got back */
    uint64_t pod_rv;     /* the same for its pod creations and deletions */
    bool rv_ok;          /* every answer so far carried a resourceVersion */
} op_expect;

uint64_t op_rv_num(const char *rv)
{
    char *end = NULL;
    unsigned long long v = rv && *rv ? strtoull(rv, &end, 10) : 0;
    return end && !*end ? (uint64_t)v : 0;
}

/* The resourceVersions the node and pod caches are at (0: unknown). Read without c->mu (the
 * informers' locks come before it). */
static void cache_rvs(op_controller *c, uint64_t *nodes, uint64_t *pods)
{
    kc_informer_stats st;
    *nodes = *pods = 0;
    if (c->nodes) {
        kc_informer_get_stats(c->nodes, &st);
        *nodes = op_rv_num(st.resource_version);
    }
    if (c->pods) {
        kc_informer_get_stats(c->pods, &st);
        *pods = op_rv_num(st.resource_version);
    }
}

static uint64_t expect_deadline(const op_expect *e)
{
    return e->since_ms + (e->rv_ok ? EXPECT_MAX_MS : EXPECT_MS);
}

/* Whether the caches have caught up with every write e records. */
static bool expect_settled(const op_expect *e, uint64_t nodes_rv, uint64_t pods_rv)
{
    return e->rv_ok && e->inflight <= 0 && (!e->node_rv || (nodes_rv && nodes_rv >= e->node_rv)) &&
           (!e->pod_rv || (pods_rv && pods_rv >= e->pod_rv));
}

/* A tracked write's successful answer: its resourceVersion joins the node's expectation. A
 * create that found the pod there, or a delete that found it gone, has nothing to wait for. */
static void expect_answered(op_controller *c, const char *node, int what, const kc_pipe_result *r)
{
    uint64_t rv = 0;
    bool parsed = true;
    if (r->code == KC_OK) {
        json_t *obj = r->body ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
        rv = op_rv_num(str_at(json_object_get(obj, "metadata"), "resourceVersion", NULL));
        parsed = rv > 0;
        json_decref(obj);
    }
    pthread_mutex_lock(&c->mu);
    op_expect *e = kc_map_get(c->expect, node);
    if (e) {
        e->inflight--;
        if (!parsed)
            e->rv_ok = false;
        else if (what == W_LABELS && rv > e->node_rv)
            e->node_rv = rv;
        else if (what != W_LABELS && rv > e->pod_rv)
            e->pod_rv = rv;
    }
    pthread_mutex_unlock(&c->mu);
}

void op_expect_free(void *p)
{
    op_expect *e = p;
    if (!e)
        return;
    json_decref(e->labels);
    json_decref(e->annotations);
    json_decref(e->created);
    json_decref(e->deleted);
    free(e);
}

/* Whether the cached values of the keys in want (those the cache keeps) match it. */
static bool shows(const json_t *have, const json_t *want, bool (*cached)(const char *key))
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        if (!cached(k))
            continue;
        const json_t *h = json_object_get(have, k);
        if (json_is_null(v) ? h != NULL : !h || !json_equal(h, v))
            return false;
    }
    return true;
}

static const json_t *pod_named(const json_t *pods, const char *name, size_t *at)
{
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        const char *n = str_at(json_object_get(p, "metadata"), "name", NULL);
        if (n && name && !strcmp(n, name)) {
            if (at)
                *at = i;
            return p;
        }
    }
    return NULL;
}

static bool terminating(const json_t *pod)
{
    return json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") != NULL;
}

/* Sets obj.metadata.<field>[k] = v for each k, v of want (null removes k). */
static void apply_map(json_t *obj, const char *field, const json_t *want)
{
    json_t *meta = json_object_get(obj, "metadata");
    json_t *m = json_object_get(meta, field);
    if (!json_is_object(m) && json_object_size(want)) {
        m = json_object();
        json_object_set_new(meta, field, m);
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        if (json_is_null(v))
            json_object_del(m, k);
        else
            json_object_set(m, k, v);
    }
}

/* Applies the node's writes the caches do not show yet to *node and pods (both the caller's:
 * *node may be replaced by a changed copy; pods elements are replaced, never changed), or
 * drops the expectation once they show all of it, or once it is too old. The caches are read
 * without c->mu held (kc_informer_foreach takes the cache lock, then c->mu). Returns false only
 * when out of memory. */
static bool overlay_expected(op_controller *c, const char *name, json_t **node, json_t *pods)
{
    pthread_mutex_lock(&c->mu);
    op_expect *e = kc_map_get(c->expect, name);
    op_expect x = {0};
    if (e) {
        x = *e;
        json_incref(x.labels);
        json_incref(x.annotations);
        json_incref(x.created);
        json_incref(x.deleted);
    }
    pthread_mutex_unlock(&c->mu);
    if (!e)
        return true;
    uint64_t nodes_rv, pods_rv;
    cache_rvs(c, &nodes_rv, &pods_rv);
    bool ok = true,
         pending = wall_ms() < expect_deadline(&x) && !expect_settled(&x, nodes_rv, pods_rv);
    if (pending) {
        const json_t *meta = json_object_get(*node, "metadata");
        bool node_shows =
            shows(json_object_get(meta, "labels"), x.labels, op_node_label_cached) &&
            shows(json_object_get(meta, "annotations"), x.annotations, op_node_annotation_cached);
        bool pods_show = true;
        size_t i, at;
        json_t *p;
        json_array_foreach(x.created, i, p)
        {
            if (pod_named(pods, str_at(json_object_get(p, "metadata"), "name", NULL), NULL))
                continue;
            pods_show = false;
            if (json_array_append(pods, p))
                ok = false;
        }
        json_array_foreach(x.deleted, i, p)
        {
            const json_t *have = pod_named(pods, json_string_value(p), &at);
            if (!have || terminating(have))
                continue;
            pods_show = false;
            json_t *gone = json_copy((json_t *)have);
            json_t *meta_copy = gone ? json_copy(json_object_get(gone, "metadata")) : NULL;
            if (!meta_copy ||
                json_object_set_new(meta_copy, "deletionTimestamp", json_string("deleting")) ||
                json_object_set_new(gone, "metadata", meta_copy) ||
                json_array_set(pods, at, gone)) {
                ok = false;
                if (!gone)
                    json_decref(meta_copy);
            }
            json_decref(gone);
        }
        if (!node_shows) {
            json_t *copy = json_deep_copy(*node);
            if (copy) {
                apply_map(copy, "labels", x.labels);
                apply_map(copy, "annotations", x.annotations);
                json_decref(*node);
                *node = copy;
            } else {
                ok = false;
            }
        }
        pending = !node_shows || !pods_show;
    }
    if (!pending) {
        pthread_mutex_lock(&c->mu);
        op_expect *now = kc_map_get(c->expect, name);
        if (now && now->id == x.id) /* not replaced meanwhile */
            op_expect_free(kc_map_remove(c->expect, name));
        pthread_mutex_unlock(&c->mu);
    }
    json_decref(x.labels);
    json_decref(x.annotations);
    json_decref(x.created);
    json_decref(x.deleted);
    return ok;
}

size_t op_expect_sweep(op_controller *c, uint64_t ahead_ms)
{
    uint64_t now = wall_ms() + ahead_ms, nodes_rv, pods_rv;
    size_t n = 0;
    cache_rvs(c, &nodes_rv, &pods_rv);
    pthread_mutex_lock(&c->mu);
    /* The map cannot change under its iteration: collect the expired ones, then remove them. */
    const char **gone = malloc((kc_map_size(c->expect) + 1) * sizeof(*gone));
    size_t pos = 0;
    const char *name;
    void *v;
    while (gone && kc_map_next(c->expect, &pos, &name, &v))
        if (expect_deadline(v) <= now || expect_settled(v, nodes_rv, pods_rv))
            gone[n++] = name;
    for (size_t i = 0; i < n; i++) {
        /* the key is freed with its entry: copy it first */
        char *key = strdup(gone[i]);
        if (key)
            op_expect_free(kc_map_remove(c->expect, key));
        free(key);
    }
    pthread_mutex_unlock(&c->mu);
    free(gone);
    return n;
}

/* A new map: base's entries, then upd's over them (new references). */
static json_t *merged_map(const json_t *base, const json_t *upd)
{
    json_t *m = json_is_object(base) ? json_copy((json_t *)base) : json_object();
    if (m && json_is_object(upd) && json_object_update(m, (json_t *)upd) != 0) {
        json_decref(m);
        m = NULL;
    }
    return m;
}

static bool named_in(const json_t *names, const char *name)
{
    size_t i;
    const json_t *n;
    json_array_foreach(names, i, n)
    {
        if (name && json_is_string(n) && !strcmp(json_string_value(n), name))
            return true;
    }
    return false;
}

/* Folds the expectation a reconcile before left, still pending, into e (this reconcile's): its
 * labels and annotations under e's, its created pods unless e deletes them, its deletions.
 * Without this, a reconcile that only creates a pod replaced the one that labelled the node
 * before the label's watch event came, and the next reconcile, not seeing the label in the
 * cache nor in any expectation, sent it again. False only when out of memory. */
static bool fold_pending(op_expect *e, const op_expect *prev)
{
    json_t *labels = merged_map(prev->labels, e->labels);
    json_t *annotations = merged_map(prev->annotations, e->annotations);
    json_t *created = json_array(), *deleted = json_array();
    bool ok = labels && annotations && created && deleted;
    size_t i;
    json_t *p;
    json_array_foreach(prev->created, i, p)
    {
        const char *n = str_at(json_object_get(p, "metadata"), "name", NULL);
        if (ok && !named_in(e->deleted, n))
            ok = json_array_append(created, p) == 0;
    }
    ok = ok && json_array_extend(created, e->created) == 0 &&
         json_array_extend(deleted, prev->deleted) == 0 &&
         json_array_extend(deleted, e->deleted) == 0;
    if (!ok) {
        json_decref(labels);
        json_decref(annotations);
        json_decref(created);
        json_decref(deleted);
        return false;
    }
    json_decref(e->labels);
    json_decref(e->annotations);
    json_decref(e->created);
    json_decref(e->deleted);
    e->since_ms = prev->since_ms;
    e->inflight += prev->inflight;
    e->node_rv = prev->node_rv;
    e->pod_rv = prev->pod_rv;
    e->rv_ok = prev->rv_ok;
    e->labels = labels;
    e->annotations = annotations;
    e->created = created;
    e->deleted = deleted;
    return true;
}

/* Records what this reconcile wrote, with what earlier ones wrote that the caches do not show
 * yet. Out of memory only loses the protection against a duplicate write. */
void op_expect_record(op_controller *c, const char *name, const json_t *labels,
                      const json_t *annotations, json_t *created, json_t *deleted, int writes)
{
    if (!json_object_size(labels) && !json_object_size(annotations) && !json_array_size(created) &&
        !json_array_size(deleted))
        return;
    op_expect *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    uint64_t now = wall_ms();
    e->since_ms = now;
    e->inflight = writes;
    e->rv_ok = true;
    e->labels = json_incref((json_t *)labels);
    e->annotations = json_incref((json_t *)annotations);
    e->created = json_incref(created);
    e->deleted = json_incref(deleted);
    static uint64_t next_id;
    void *old = NULL;
    pthread_mutex_lock(&c->mu);
    const op_expect *prev = kc_map_get(c->expect, name);
    if (prev && expect_deadline(prev) > now)
        fold_pending(e, prev);
    e->id = ++next_id;
    if (kc_map_put(c->expect, name, e, &old) != KC_OK)
        op_expect_free(e);
    pthread_mutex_unlock(&c->mu);
    op_expect_free(old);
}

json_t *op_expect_describe(op_controller *c, const char *name)
{
    json_t *out = NULL;
    pthread_mutex_lock(&c->mu);
    const op_expect *e = kc_map_get(c->expect, name);
    if (e) {
        json_t *created = json_array();
        size_t i;
        json_t *p;
        json_array_foreach(e->created, i, p)
        {
            json_array_append(created, json_object_get(json_object_get(p, "metadata"), "name"));
        }
        out = json_pack("{s:O*, s:O*, s:o*, s:O*}", "labels", e->labels, "annotations",
                        e->annotations, "created", created, "deleted", e->deleted);
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

/* Events for the transitions a user cares about, on the Node. */
static void node_events(op_controller *c, const json_t *node, const json_t *policy,
                        const op_node_result *prev, const op_gate_out *out)
{
    if (prev->phase == out->phase && prev->stage == out->stage &&
        ((out->phase != OP_NODE_FAILED && out->phase != OP_NODE_BLOCKED) ||
         !strcmp(op_node_result_reason(prev), out->reason)))
        return;
    const char *name = str_at(node, "metadata", "name");
    switch (out->phase) {
    case OP_NODE_DONE:
        /* A node ready in a policy's first rollout is counted in its status and its Ready
         * Event: one Event per node there would be a write per node that adds nothing. */
        if (atomic_load(&c->policy_was_ready) ||
            !strcmp(str_at(json_object_get(policy, "status"), "state", NULL) ?: "", "ready"))
            kc_event_record(c->events, node, "Normal", "GPUNodeReady",
                            "every GPU operand is validated on this node");
        kc_info("node ready", "node=%s", name);
        break;
    case OP_NODE_FAILED:
    case OP_NODE_BLOCKED: {
        bool blocked = out->phase == OP_NODE_BLOCKED;
        const char *on_node = out->sharing_invalid         ? "InvalidSharingConfig"
                              : blocked                    ? "OperandsNotSchedulable"
                              : out->stage == OP_STAGE_MIG ? "MIGConfigFailed"
                                                           : "ValidationFailed";
        const char *on_policy = out->sharing_invalid ? "InvalidSharingConfig"
                                : blocked            ? "NodeBlocked"
                                                     : "NodeFailed";
        kc_event_record(c->events, node, "Warning", on_node, "%s", out->reason);
        if (policy)
            kc_event_record(c->events, policy, "Warning", on_policy, "node %s: %s", name,
                            out->reason);
        kc_warn(blocked ? "node blocked" : "node failed", "node=%s stage=%s reason=\"%s\"", name,
                op_stage_name((op_stage)out->stage), out->reason);
        break;
    }
    case OP_NODE_RECONFIGURING:
        if (prev->phase != OP_NODE_RECONFIGURING)
            kc_event_record(c->events, node, "Normal", "MIGReconfiguring", "%s", out->reason);
        break;
    case OP_NODE_IN_PROGRESS:
        /* Logged, not recorded as Events: four per node would be most of a rollout's writes;
         * the status shows where each node is. */
        if (out->stage >= 0 && out->stage != prev->stage)
            kc_info("node entered state", "node=%s stage=%s", name,
                    op_stage_name((op_stage)out->stage));
        break;
    default:
        break;
    }
}

/* ---- what a node asks of MIG ---- */

/* How long a failed MIG state is taken for an earlier config's after the node's config label
 * changed: NVIDIA's MIG manager marks a new config pending within a second or two. */
#define MIG_STALE_MS 30000

void op_mig_owner_free(void *o)
{
    op_mig_owner *m = o;
    if (m) {
        free(m->config);
        free(m);
    }
}

/* Whether the node's failed MIG state belongs to a config other than the one it asks for now: the
 * failure is attributed to the config the node asked for when the state was first seen failed,
 * and a relabel leaves it there until the MIG manager moves the state on (or MIG_STALE_MS pass).
 * *requeue_ms is set when the node should be looked at again. */
static bool mig_state_stale(op_controller *c, const char *name, const json_t *node, uint64_t now,
                            long *requeue_ms)
{
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *cfg = str_at(labels, "nvidia.com/mig.config", NULL);
    const char *st = str_at(labels, "nvidia.com/mig.config.state", NULL);
    bool stale = false;
    pthread_mutex_lock(&c->mu);
    op_mig_owner *o = kc_map_get(c->mig_owner, name);
    if (!cfg || !st || strcmp(st, "failed")) {
        op_mig_owner_free(kc_map_remove(c->mig_owner, name));
    } else if (!o) {
        o = calloc(1, sizeof(*o));
        if (o && (!(o->config = strdup(cfg)) || kc_map_put(c->mig_owner, name, o, NULL) != KC_OK))
            op_mig_owner_free(o); /* out of memory: the failure is taken as the config's */
    } else if (strcmp(o->config, cfg) == 0) {
        o->stale_since = 0;
    } else {
        if (!o->stale_since)
            o->stale_since = now;
        uint64_t waited = now - o->stale_since;
        if (waited < MIG_STALE_MS) {
            stale = true;
            *requeue_ms = (long)(MIG_STALE_MS - waited) + 10;
        } else {
            char *own = strdup(cfg);
            if (own) {
                free(o->config);
                o->config = own;
            }
            o->stale_since = 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return stale;
}

/* Why what the node asks of MIG cannot happen ("" when it can or cannot be judged): a MIG label
 * on GPUs without MIG or with the MIG manager off, or a config the MIG manager cannot apply to
 * the node's GPUs (op_mig_check against the MIG manager's ConfigMap, parsed once a version). */
static void mig_problem(op_controller *c, const json_t *policy, const json_t *node,
                        const op_gate_policy *gp, char *why, size_t size)
{
    why[0] = '\0';
    const json_t *m = json_object_get(node, "metadata");
    const json_t *labels = json_object_get(m, "labels");
    const char *cfg = str_at(labels, "nvidia.com/mig.config", NULL);
    const char *capable = str_at(labels, "nvidia.com/mig.capable", NULL);
    if (!cfg || !*cfg || !capable)
        return; /* nothing asked, or GPU feature discovery has not labelled the node yet */
    const char *def = str_at(json_object_get(m, "annotations"), OP_MIG_DEFAULT_ANN, NULL);
    bool user_set = !def || strcmp(def, cfg) != 0;
    const char *product = str_at(labels, "nvidia.com/gpu.product", NULL);
    const char *off = str_at(labels, op_stage_deploy_label(OP_STAGE_MIG), NULL);
    if (strcmp(capable, "true") != 0) {
        if (user_set && strcmp(cfg, "all-disabled") != 0)
            snprintf(why, size,
                     "nvidia.com/mig.config=%s is set, but this node's GPUs (%s) cannot do MIG "
                     "(nvidia.com/mig.capable=%s): the label has no effect; remove it",
                     cfg, product ? product : "?", capable);
        return;
    }
    if (!gp->enabled[OP_STAGE_MIG]) {
        if (user_set)
            snprintf(why, size,
                     "nvidia.com/mig.config=%s is set, but the MIG manager is disabled "
                     "(ClusterPolicy spec.migManager.enabled=false): nothing applies it",
                     cfg);
        return;
    }
    if (off && !strcmp(off, OP_DEPLOY_OFF)) {
        if (user_set)
            snprintf(why, size,
                     "nvidia.com/mig.config=%s is set, but the MIG manager is switched off on this "
                     "node (%s=false): nothing applies it",
                     cfg, op_stage_deploy_label(OP_STAGE_MIG));
        return;
    }
    const json_t *cm_name = json_object_get(
        json_object_get(json_object_get(json_object_get(policy, "spec"), "migManager"), "config"),
        "name");
    const char *cmn = json_is_string(cm_name) && *json_string_value(cm_name)
                          ? json_string_value(cm_name)
                          : "default-mig-parted-config";
    char key[300], source[300];
    snprintf(source, sizeof(source), "ConfigMap %s/%s", c->ns, cmn);
    bool failed = false;
    json_t *cm = op_wanted_configmap(c, OP_CM_MIG, cmn, &failed);
    if (!cm) {
        /* Not there: the MIG manager cannot start (its pod waits for the volume). Not readable
         * now: the MIG manager's own answer stands until the next reconcile. */
        if (!failed)
            snprintf(why, size,
                     "%s (spec.migManager.config.name) not found: the MIG manager has no configs "
                     "to apply nvidia.com/mig.config=%s from",
                     source, cfg);
        return;
    }
    snprintf(key, sizeof(key), "%s@%s", cmn,
             str_at(json_object_get(cm, "metadata"), "resourceVersion", NULL) ?: "");
    pthread_mutex_lock(&c->mig_mu);
    if (!c->mig_cm_key || strcmp(c->mig_cm_key, key) != 0) {
        kc_migparted_free(c->mig_mp);
        c->mig_mp = NULL;
        c->mig_parse_err[0] = '\0';
        free(c->mig_cm_key);
        c->mig_cm_key = strdup(key); /* NULL (out of memory): parsed again next time */
        const char *text = str_at(json_object_get(cm, "data"), "config.yaml", NULL);
        kc_err err;
        if (!text)
            snprintf(c->mig_parse_err, sizeof(c->mig_parse_err), "it has no config.yaml key");
        else if (kc_migparted_parse(text, strlen(text), "config.yaml", &c->mig_mp, &err) != KC_OK)
            snprintf(c->mig_parse_err, sizeof(c->mig_parse_err), "%s", err.msg);
    }
    if (c->mig_mp)
        op_mig_check(c->mig_mp, source, cfg, node, why, size);
    else if (c->mig_parse_err[0])
        snprintf(why, size, "the MIG manager's config (%s) cannot be used: %s", source,
                 c->mig_parse_err);
    pthread_mutex_unlock(&c->mig_mu);
    json_decref(cm);
}

/* Reports a node whose device plugin would refuse its sharing config (the ConfigMap
 * spec.devicePlugin.config.name names is missing, the key the node picks is not in it, or the
 * plugin rejects that key's config) as failed at the device plugin, before the plugin fails
 * there: without this the node only waits for GPUs that never come. */
static void check_sharing(op_controller *c, const json_t *node, const json_t *policy,
                          op_gate_out *out)
{
    if ((out->phase != OP_NODE_IN_PROGRESS && out->phase != OP_NODE_FAILED &&
         out->phase != OP_NODE_DONE) ||
        out->stage < OP_STAGE_PLUGIN)
        return;
    const json_t *spec = json_object_get(policy, "spec");
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *deploy = str_at(labels, op_stage_deploy_label(OP_STAGE_PLUGIN), NULL);
    if (!op_spec_enabled(spec, "devicePlugin", true) || (deploy && !strcmp(deploy, OP_DEPLOY_OFF)))
        return;
    const json_t *cfg = json_object_get(json_object_get(spec, "devicePlugin"), "config");
    const char *name = str_at(cfg, "name", NULL);
    if (!name || !*name)
        return;
    bool failed;
    json_t *cm = op_wanted_configmap(c, OP_CM_SHARING, name, &failed);
    if (failed)
        return; /* unknown: reported once it can be read */
    kc_sharing_in in = {.ns = c->ns,
                        .cm_name = name,
                        .cm = cm,
                        .label = str_at(labels, KC_SHARING_LABEL, NULL),
                        .default_key = str_at(cfg, "default", NULL),
                        .mig_strategy =
                            str_at(json_object_get(spec, "mig"), "strategy", NULL) ?: "single"};
    kc_err err;
    kc_code rc = kc_sharing_check(&in, NULL, &err);
    json_decref(cm);
    if (rc == KC_OK || rc == KC_ENOMEM)
        return;
    out->phase = OP_NODE_FAILED;
    out->stage = OP_STAGE_PLUGIN;
    out->sharing_invalid = true;
    snprintf(out->reason, sizeof(out->reason), "invalid device-plugin sharing config: %s", err.msg);
}

/* ---- the driver upgrade (OnDelete driver DaemonSet, NVIDIA's upgrade-state label) ---- */

#define UPGRADE_LABEL "nvidia.com/gpu-driver-upgrade-state"

/* Whether the operator upgrades this node's driver: its driver is on, the operator deploys it
 * there (the node's driver label is set and not false: a preinstalled driver is not ours to
 * cordon), and the user has not opted the node out of every operand (a driver pod still
 * stopping there after the opt-out is not upgraded). */
static bool upgrade_managed(const json_t *node, const json_t *spec)
{
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *deploy =
        json_string_value(json_object_get(labels, op_stage_deploy_label(OP_STAGE_DRIVER)));
    const char *operands =
        json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.operands"));
    return op_spec_enabled(spec, "driver", true) && deploy && strcmp(deploy, OP_DEPLOY_OFF) &&
           !(operands && !strcmp(operands, OP_DEPLOY_OFF));
}

/* The node's upgrade state and availability (cordoned or not Ready) for NVIDIA's upgrade
 * metrics. */
static void upgrade_result(const json_t *node, const json_t *policy, op_node_result *r)
{
    static const char *const names[OP_UP_COUNT] = {[OP_UP_REQUIRED] = "upgrade-required",
                                                   [OP_UP_CORDON] = "cordon-required",
                                                   [OP_UP_WAIT_JOBS] = "wait-for-jobs-required",
                                                   [OP_UP_POD_DELETION] = "pod-deletion-required",
                                                   [OP_UP_DRAIN] = "drain-required",
                                                   [OP_UP_POD_RESTART] = "pod-restart-required",
                                                   [OP_UP_VALIDATION] = "validation-required",
                                                   [OP_UP_UNCORDON] = "uncordon-required",
                                                   [OP_UP_DONE] = "upgrade-done",
                                                   [OP_UP_FAILED] = "upgrade-failed"};
    r->upgrade = OP_UP_NONE;
    if (upgrade_managed(node, json_object_get(policy, "spec"))) {
        const char *st = json_string_value(json_object_get(
            json_object_get(json_object_get(node, "metadata"), "labels"), UPGRADE_LABEL));
        r->upgrade = st ? OP_UP_NONE : OP_UP_UNKNOWN;
        for (int i = OP_UP_REQUIRED; st && i < OP_UP_COUNT; i++)
            if (!strcmp(st, names[i]))
                r->upgrade = (unsigned char)i;
    }
    /* The cache keeps no conditions: a node not Ready carries the taint the node lifecycle
     * controller puts on it. */
    const json_t *spec = json_object_get(node, "spec"), *t;
    size_t i;
    r->unavailable = json_is_true(json_object_get(spec, "unschedulable"));
    json_array_foreach(json_object_get(spec, "taints"), i, t)
    {
        const char *key = str_at(t, "key", NULL) ?: "";
        if (!strcmp(key, "node.kubernetes.io/not-ready") ||
            !strcmp(key, "node.kubernetes.io/unreachable"))
            r->unavailable = true;
    }
}

static bool upgrade_active(const char *st)
{
    return st && (!strcmp(st, "cordon-required") || !strcmp(st, "pod-restart-required") ||
                  !strcmp(st, "validation-required") || !strcmp(st, "uncordon-required"));
}

/* Admits a node to the driver upgrade when fewer than max nodes are under way: those whose label
 * says so in the cache plus those admitted by this process whose label the cache does not show
 * yet (workers run in parallel: the check and the admission happen under one lock). */
static bool upgrade_admit(op_controller *c, const char *node, long max)
{
    json_t *nodes = kc_informer_list(c->nodes);
    pthread_mutex_lock(&c->mu);
    long n = 0;
    size_t i;
    const json_t *o;
    json_array_foreach(nodes, i, o)
    {
        const char *nm = str_at(o, "metadata", "name");
        const char *st = json_string_value(json_object_get(
            json_object_get(json_object_get(o, "metadata"), "labels"), UPGRADE_LABEL));
        bool active = upgrade_active(st);
        if (nm && (active || (st && !strcmp(st, "upgrade-done"))))
            kc_map_remove(c->admitted, nm); /* the cache caught up */
        if (active || (nm && kc_map_get(c->admitted, nm)))
            n++;
    }
    bool ok = max <= 0 || n < max;
    if (ok)
        kc_map_put(c->admitted, node, (void *)1, NULL);
    pthread_mutex_unlock(&c->mu);
    json_decref(nodes);
    return ok;
}

static kc_code node_patch(op_controller *c, const char *name, json_t *patch, kc_err *err)
{
    kc_code rc =
        kc_patch(c->api, &KC_RES_NODES, NULL, name, KC_PATCH_MERGE, patch, NULL, NULL, err);
    json_decref(patch);
    return rc;
}

/* A reconcile of the node that could not finish (out of memory, a write refused): it runs again
 * after the key's backoff (doubling per failure, Retry-After honoured), not at a fixed pace. */
static long backoff(op_controller *c, const char *name, int retry_after_s)
{
    char key[300];
    snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", name);
    op_requeue_failed(c, key, retry_after_s);
    return OP_REQUEUED;
}

/* One step of a node's driver upgrade: a driver pod from an older template generation is
 * replaced node by node (at most maxParallelUpgrades at once, default 1): cordon, delete the pod
 * (the DaemonSet recreates it from the new template), wait for the new driver to validate,
 * uncordon. autoUpgrade false only marks nodes upgrade-required (the user deletes the pods).
 * Returns a requeue delay or -1. */
static long driver_upgrade(op_controller *c, const json_t *node, const json_t *policy,
                           const json_t *driver_pod, const op_gate_out *gate, op_batch *b)
{
    const json_t *spec = json_object_get(policy, "spec");
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    if (!upgrade_managed(node, spec))
        return -1;
    json_t *ds = kc_informer_get(c->daemonsets, c->ns, op_stage_daemonset(OP_STAGE_DRIVER));
    long long gen =
        json_integer_value(json_object_get(json_object_get(ds, "metadata"), "generation"));
    json_decref(ds);
    const char *name = str_at(node, "metadata", "name");
    const char *st = json_string_value(json_object_get(labels, UPGRADE_LABEL));
    const char *pg = driver_pod
                         ? json_string_value(json_object_get(
                               json_object_get(json_object_get(driver_pod, "metadata"), "labels"),
                               "pod-template-generation"))
                         : NULL;
    bool outdated = gen > 0 && pg && atoll(pg) < gen;
    const json_t *up = json_object_get(json_object_get(spec, "driver"), "upgradePolicy");
    const json_t *au = json_object_get(up, "autoUpgrade");
    bool autoup = json_is_boolean(au) ? json_is_true(au) : true;
    const json_t *mp = json_object_get(up, "maxParallelUpgrades");
    long max_parallel = json_is_integer(mp) ? (long)json_integer_value(mp) : 1;
    const char *next = NULL;
    json_t *extra = NULL;
    kc_err err;
    if (!st || !strcmp(st, "upgrade-done")) {
        if (outdated)
            next = "upgrade-required";
    } else if (!strcmp(st, "upgrade-required")) {
        if (!outdated)
            next = "upgrade-done";
        else if (autoup && upgrade_admit(c, name, max_parallel))
            next = "cordon-required";
        else if (autoup)
            return 2000; /* waiting for a slot */
    } else if (!strcmp(st, "cordon-required")) {
        const json_t *uns = json_object_get(json_object_get(node, "spec"), "unschedulable");
        next = "pod-restart-required";
        if (!json_is_true(uns))
            extra = json_pack("{s:{s:b}, s:{s:{s:s}}}", "spec", "unschedulable", 1, "metadata",
                              "annotations", OP_CORDONED_ANN, "true");
    } else if (!strcmp(st, "pod-restart-required")) {
        if (!outdated && driver_pod)
            next = "validation-required";
        else if (driver_pod &&
                 !json_object_get(json_object_get(driver_pod, "metadata"), "deletionTimestamp")) {
            kc_code rc =
                kc_delete(c->api, &KC_RES_PODS, c->ns, str_at(driver_pod, "metadata", "name"),
                          KC_PROPAGATE_BACKGROUND, NULL, &err);
            batch_sent(b, op_mono_ms());
            if (rc != KC_OK && rc != KC_ENOTFOUND) {
                kc_warn("driver upgrade: cannot delete the driver pod", "node=%s err=\"%s\"", name,
                        err.msg);
                return backoff(c, name, err.retry_after_s);
            }
            kc_info("driver upgrade: driver pod deleted", "node=%s", name);
            return 1000; /* until the new driver pod is there */
        }
    } else if (!strcmp(st, "validation-required")) {
        if (gate->stage > OP_STAGE_DRIVER || gate->phase == OP_NODE_DONE)
            next = "uncordon-required";
    } else if (!strcmp(st, "uncordon-required")) {
        next = "upgrade-done";
        if (json_string_value(
                json_object_get(json_object_get(json_object_get(node, "metadata"), "annotations"),
                                OP_CORDONED_ANN)))
            extra = json_pack("{s:{s:b}, s:{s:{s:n}}}", "spec", "unschedulable", 0, "metadata",
                              "annotations", OP_CORDONED_ANN);
    }
    if (!next)
        return -1;
    json_t *patch = extra ? extra : json_object();
    json_t *meta = json_object_get(patch, "metadata");
    if (!meta) {
        meta = json_object();
        json_object_set_new(patch, "metadata", meta);
    }
    json_object_set_new(meta, "labels", json_pack("{s:s}", UPGRADE_LABEL, next));
    batch_sent(b, op_mono_ms());
    if (node_patch(c, name, patch, &err) != KC_OK) {
        kc_warn("driver upgrade: cannot update the node", "node=%s err=\"%s\"", name, err.msg);
        if (!strcmp(next, "cordon-required")) {
            pthread_mutex_lock(&c->mu);
            kc_map_remove(c->admitted, name); /* give the slot back */
            pthread_mutex_unlock(&c->mu);
        }
        return backoff(c, name, err.retry_after_s);
    }
    kc_info("driver upgrade", "node=%s state=%s", name, next);
    if (!strcmp(next, "upgrade-done")) {
        pthread_mutex_lock(&c->mu);
        kc_map_remove(c->admitted, name); /* its slot is free */
        pthread_mutex_unlock(&c->mu);
    }
    if (strcmp(next, "upgrade-done") || st)
        kc_event_record(c->events, node, "Normal", "DriverUpgrade", "driver upgrade: %s", next);
    return 200;
}

long op_reconcile_node(op_controller *c, const char *name, uint64_t ev, uint64_t start)
{
    json_t *node = kc_informer_get(c->nodes, NULL, name);
    if (!node && kc_informer_has(c->nodes, NULL, name))
        return backoff(c, name, 0); /* cached but could not be read: out of memory */
    if (!node) {
        drop_result(c, name);
        op_enqueue(c, OP_KEY_STATUS, 200);
        return -1;
    }
    json_t *policy = op_active_policy(c);
    long again = -1;
    json_t *pods = NULL, *owner = NULL;
    char *vimg = NULL;
    op_batch *batch = NULL;
    op_gate_out out = {0};
    if (!policy)
        goto done;
    owner = op_policy_owner_ref(policy);
    op_gate_policy gp;
    kc_err err;
    if (!owner) {
        again = backoff(c, name, 0); /* out of memory */
        goto done;
    }
    if (op_policy_gate(policy, c->ns, owner, c->o.operator_image, &gp, &vimg, &err) != KC_OK) {
        /* The policy reconciler reports a spec error; out of memory is retried. */
        if (err.code == KC_ENOMEM)
            again = backoff(c, name, 0);
        goto done;
    }
    gp.backoff_base_ms = c->o.validation_backoff_ms;
    gp.image_prepull = !c->o.no_image_prepull;
    pods = op_node_pods(c, name);
    if (!pods || !overlay_expected(c, name, &node, pods)) {
        again = backoff(c, name, 0);
        goto done;
    }
    op_gate_in in = {.node = node, .now_ms = wall_ms()};
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        const json_t *labels = json_object_get(json_object_get(p, "metadata"), "labels");
        const char *app = str_at(labels, "app", NULL);
        const char *vst = str_at(labels, OP_VAL_STAGE_LABEL, NULL);
        for (int s = 0; s < OP_STAGE_COUNT; s++) {
            if (vst && !strcmp(vst, op_stage_name((op_stage)s)) && in.stage[s].n_val < 8)
                in.stage[s].val_pods[in.stage[s].n_val++] = p;
            /* The operand pod: prefer a Ready one over a terminating or starting one. */
            if (app && !strcmp(app, op_stage_daemonset((op_stage)s)) &&
                (!in.stage[s].operand_pod || op_pod_ready(p)))
                in.stage[s].operand_pod = p;
        }
    }
    /* A node with taints that keep pods off: the gate checks that the DaemonSets of the stages
     * without a pod there tolerate them (most nodes have none, and their reconciles read no
     * DaemonSet). */
    json_t *stage_ds[OP_STAGE_COUNT] = {NULL};
    if (c->daemonsets && json_array_size(json_object_get(json_object_get(node, "spec"), "taints")))
        for (int s = 0; s < OP_STAGE_COUNT; s++)
            if (!in.stage[s].operand_pod)
                in.stage[s].ds = stage_ds[s] =
                    kc_informer_get(c->daemonsets, c->ns, op_stage_daemonset((op_stage)s));
    char mig_why[600];
    long mig_requeue = -1;
    mig_problem(c, policy, node, &gp, mig_why, sizeof(mig_why));
    in.mig_problem = mig_why[0] ? mig_why : NULL;
    in.mig_state_stale = mig_state_stale(c, name, node, in.now_ms, &mig_requeue);
    kc_code gate_rc = op_gate_node(&gp, &in, &out, &err);
    out.mig_invalid = in.mig_problem && out.phase == OP_NODE_FAILED && out.stage == OP_STAGE_MIG &&
                      !strcmp(out.reason, in.mig_problem);
    if (gate_rc == KC_OK && mig_requeue >= 0 &&
        (out.requeue_ms < 0 || mig_requeue < out.requeue_ms))
        out.requeue_ms = mig_requeue;
    for (int s = 0; s < OP_STAGE_COUNT; s++)
        json_decref(stage_ds[s]);
    if (gate_rc != KC_OK || !out.labels || !out.annotations ||
        !(batch = batch_new(c, name, ev, start))) {
        again = backoff(c, name, 0);
        goto done;
    }
    long up = driver_upgrade(c, node, policy, in.stage[OP_STAGE_DRIVER].operand_pod, &out, batch);
    if (up == OP_REQUEUED || (up >= 0 && again != OP_REQUEUED && (again < 0 || up < again)))
        again = up;
    /* What the writes will do is recorded first: the pipe may answer before this returns, and a
     * failed write drops the record. */
    bool label = json_object_size(out.labels) > 0 || json_object_size(out.annotations) > 0;
    json_t *created = json_array(), *deleted = json_array();
    json_array_extend(deleted, out.remove);
    json_array_foreach(out.create, i, p)
    {
        /* What the gate reads of a pod just created: its identity, labels, annotations (the
         * validation key) and node; the whole spec is not kept. */
        const json_t *m = json_object_get(p, "metadata");
        json_array_append_new(created,
                              json_pack("{s:{s:O*, s:O*, s:O*, s:O*}, s:{s:O*}}", "metadata",
                                        "name", json_object_get(m, "name"), "namespace",
                                        json_object_get(m, "namespace"), "labels",
                                        json_object_get(m, "labels"), "annotations",
                                        json_object_get(m, "annotations"), "spec", "nodeName",
                                        json_object_get(json_object_get(p, "spec"), "nodeName")));
    }
    op_expect_record(
        c, name, label ? out.labels : NULL, label ? out.annotations : NULL, created, deleted,
        (label ? 1 : 0) + (int)json_array_size(out.remove) + (int)json_array_size(out.create));
    batch->tracked = true;
    json_decref(created);
    json_decref(deleted);
    bool sent = true;
    if (label) {
        json_t *patch = json_pack("{s:{s:O, s:O}}", "metadata", "labels", out.labels, "annotations",
                                  out.annotations);
        sent = patch && submit(batch, W_LABELS, NULL, patch);
        json_decref(patch);
    }
    json_array_foreach(out.remove, i, p)
    {
        if (!submit(batch, W_DELETE, json_string_value(p), NULL))
            sent = false;
    }
    json_array_foreach(out.create, i, p)
    {
        if (!submit(batch, W_CREATE, NULL, p))
            sent = false;
    }
    if (!sent) {
        drop_expectation(c, name);
        again = backoff(c, name, 0);
    } else if (again != OP_REQUEUED && !label && !json_array_size(out.remove) &&
               !json_array_size(out.create)) {
        /* Nothing to write and nothing failed: the key's backoff starts over (a write's answer
         * does this for reconciles that wrote). */
        char key[300];
        snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", name);
        kc_workqueue_forget(c->q, key);
    }
    check_sharing(c, node, policy, &out);
    if (out.requeue_ms >= 0 && again != OP_REQUEUED && (again < 0 || out.requeue_ms < again))
        again = out.requeue_ms;
    op_node_result prev, upr;
    upgrade_result(node, policy, &upr);
    set_result(c, name, &out, &upr, &prev);
    node_events(c, node, policy, &prev, &out);
    if (prev.phase != out.phase || prev.stage != out.stage ||
        strcmp(op_node_result_reason(&prev), out.reason) || prev.upgrade != upr.upgrade ||
        prev.sharing_invalid != out.sharing_invalid || prev.mig_invalid != out.mig_invalid ||
        prev.unavailable != upr.unavailable)
        op_enqueue(c, OP_KEY_STATUS, 100);
    free(prev.reason);
done:
    batch_release(batch);
    op_gate_out_clear(&out);
    free(vimg);
    json_decref(pods);
    json_decref(owner);
    json_decref(policy);
    json_decref(node);
    return again;
}
