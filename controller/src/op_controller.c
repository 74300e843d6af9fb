/* op_controller: caches, work queue and workers of the operator. Watch events only queue keys:
 * "policy" (render and apply), "node/<name>" (gating) and "status"; workers reconcile them. */
#include "op_controller_int.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"

/* Every kind a state may render, and where it lives. */
static const op_kind kind_table[] = {
    {"v1", "ServiceAccount", {"", "v1", "serviceaccounts", true}, NULL, NULL, NULL, false},
    {"v1", "ConfigMap", {"", "v1", "configmaps", true}, NULL, NULL, NULL, false},
    {"v1", "Service", {"", "v1", "services", true}, NULL, NULL, NULL, false},
    {"apps/v1", "DaemonSet", {"apps", "v1", "daemonsets", true}, NULL, NULL, NULL, false},
    {"rbac.authorization.k8s.io/v1",
     "Role",
     {"rbac.authorization.k8s.io", "v1", "roles", true},
     NULL,
     NULL,
     NULL,
     false},
    {"rbac.authorization.k8s.io/v1",
     "RoleBinding",
     {"rbac.authorization.k8s.io", "v1", "rolebindings", true},
     NULL,
     NULL,
     NULL,
     false},
    {"rbac.authorization.k8s.io/v1",
     "ClusterRole",
     {"rbac.authorization.k8s.io", "v1", "clusterroles", false},
     NULL,
     NULL,
     NULL,
     false},
    {"rbac.authorization.k8s.io/v1",
     "ClusterRoleBinding",
     {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", false},
     NULL,
     NULL,
     NULL,
     false},
    {"node.k8s.io/v1",
     "RuntimeClass",
     {"node.k8s.io", "v1", "runtimeclasses", false},
     NULL,
     NULL,
     NULL,
     false},
    {"monitoring.coreos.com/v1",
     "ServiceMonitor",
     {"monitoring.coreos.com", "v1", "servicemonitors", true},
     NULL,
     "servicemonitors.monitoring.coreos.com",
     NULL,
     false},
};
#define N_KINDS (sizeof(kind_table) / sizeof(kind_table[0]))

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

json_t *op_active_policy(op_controller *c)
{
    pthread_mutex_lock(&c->mu);
    json_t *p = json_incref(c->policy);
    pthread_mutex_unlock(&c->mu);
    return p;
}

op_kind *op_kind_find(op_controller *c, const char *api_version, const char *kind)
{
    for (size_t i = 0; i < c->n_kinds; i++)
        if (api_version && kind && !strcmp(c->kinds[i].api_version, api_version) &&
            !strcmp(c->kinds[i].kind, kind))
            return &c->kinds[i];
    return NULL;
}

uint64_t op_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Remembers when the first event not yet reconciled arrived for a node key. */
static void mark_event(op_controller *c, const char *key)
{
    if (!c->m_delay)
        return;
    pthread_mutex_lock(&c->mu);
    if (!kc_map_get(c->event_at, key)) {
        uint64_t *t = malloc(sizeof(*t));
        if (t) {
            *t = op_mono_ms();
            if (kc_map_put(c->event_at, key, t, NULL) != KC_OK)
                free(t);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Takes the event time of a key (0 when none). */
static uint64_t take_event(op_controller *c, const char *key)
{
    pthread_mutex_lock(&c->mu);
    uint64_t *t = kc_map_remove(c->event_at, key);
    pthread_mutex_unlock(&c->mu);
    uint64_t v = t ? *t : 0;
    free(t);
    return v;
}

/* ---- the pod index (node → names of its pods in our namespace) ----
 * One block per node, the names NUL-terminated back to back: a node has about ten pods, and a
 * map per node (slots, a copy of each key) cost three times the memory. */

typedef struct pod_set {
    size_t len;
    char names[];
} pod_set;

/* Offset of name in the set, or -1. */
static long pod_set_find(const pod_set *s, const char *name)
{
    for (size_t at = 0; s && at < s->len; at += strlen(s->names + at) + 1)
        if (!strcmp(s->names + at, name))
            return (long)at;
    return -1;
}

static void index_pod(op_controller *c, const json_t *pod, bool add)
{
    const char *node = str_at(pod, "spec", "nodeName");
    const char *name = str_at(pod, "metadata", "name");
    if (!node || !name)
        return;
    size_t n = strlen(name) + 1;
    pthread_mutex_lock(&c->mu);
    pod_set *set = kc_map_get(c->pods_by_node, node);
    long at = pod_set_find(set, name);
    if (add && at < 0) {
        size_t len = set ? set->len : 0;
        pod_set *grown = realloc(set, sizeof(*grown) + len + n);
        if (grown) {
            memcpy(grown->names + len, name, n);
            grown->len = len + n;
            if (grown != set && kc_map_put(c->pods_by_node, node, grown, NULL) != KC_OK) {
                /* set (if any) was moved by realloc and is still in the map */
                if (set)
                    kc_map_remove(c->pods_by_node, node);
                free(grown);
            }
        }
    } else if (!add && at >= 0) {
        size_t rest = set->len - (size_t)at - n;
        memmove(set->names + at, set->names + at + n, rest);
        set->len -= n;
        if (!set->len)
            free(kc_map_remove(c->pods_by_node, node));
    }
    pthread_mutex_unlock(&c->mu);
    char nk[300];
    snprintf(nk, sizeof(nk), OP_NODE_PREFIX "%s", node);
    mark_event(c, nk);
    op_enqueue(c, nk, 0);
}

json_t *op_node_pods(op_controller *c, const char *node)
{
    json_t *out = json_array();
    pod_set *copy = NULL;
    pthread_mutex_lock(&c->mu);
    const pod_set *set = kc_map_get(c->pods_by_node, node);
    bool oom = !out || (set && !(copy = malloc(sizeof(*set) + set->len)));
    if (copy)
        memcpy(copy, set, sizeof(*set) + set->len);
    pthread_mutex_unlock(&c->mu);
    for (size_t at = 0; !oom && copy && at < copy->len; at += strlen(copy->names + at) + 1) {
        json_t *p = kc_informer_get(c->pods, c->ns, copy->names + at);
        if (p ? json_array_append_new(out, p) != 0
              : kc_informer_has(c->pods, c->ns, copy->names + at))
            oom = true; /* not a pod deleted meanwhile */
    }
    free(copy);
    if (oom) { /* NULL rather than a list missing pods */
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- the work queue ---- */

static void enqueue_failed(op_controller *c, const char *key, kc_code rc)
{
    if (rc == KC_OK || rc == KC_ECANCELED) /* cancelled: the queue is shutting down */
        return;
    kc_error("cannot queue a key; everything is queued again at the next resync", "key=%s code=%s",
             key, kc_code_name(rc));
    atomic_store(&c->lost_keys, true);
}

void op_enqueue(op_controller *c, const char *key, long delay_ms)
{
    atomic_fetch_add(&c->queued, 1);
    kc_code rc =
        delay_ms > 0 ? kc_workqueue_add_after(c->q, key, delay_ms) : kc_workqueue_add(c->q, key);
    enqueue_failed(c, key, rc);
}

void op_requeue_failed(op_controller *c, const char *key, int retry_after_s)
{
    /* The queue's own per-key base (5 ms) suits reconciles waiting on caches; a failed write
     * backs off from OP_WRITE_BACKOFF_MS instead, doubling per failure of the key. */
    atomic_fetch_add(&c->queued, 1);
    int n = kc_workqueue_num_requeues(c->q, key);
    long floor_ms = n >= 8 ? OP_WRITE_BACKOFF_MAX_MS : OP_WRITE_BACKOFF_MS << n;
    if (floor_ms > OP_WRITE_BACKOFF_MAX_MS)
        floor_ms = OP_WRITE_BACKOFF_MAX_MS;
    if (retry_after_s * 1000L > floor_ms)
        floor_ms = retry_after_s * 1000L;
    enqueue_failed(c, key, kc_workqueue_add_backoff(c->q, key, floor_ms));
}

/* ---- watch handlers (loop thread): they only queue keys ---- */

static void queue_node(op_controller *c, const json_t *node)
{
    const char *name = str_at(node, "metadata", "name");
    char key[300];
    if (!name)
        return;
    snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", name);
    mark_event(c, key);
    op_enqueue(c, key, 0);
}

static bool queue_node_cb(const char *key, const json_t *node, void *ud)
{
    (void)key;
    queue_node(ud, node);
    return true;
}

/* ---- the ConfigMaps the operator reads: sharing (spec.devicePlugin.config.name) and MIG
 * (spec.migManager.config.name) ----
 * The cache keeps every ConfigMap of the namespace as its identity only (name, uid,
 * resourceVersion) and the data of the wanted ones only; a change of one queues every node, so that
 * a config fixed or broken is reported within the reconcile that follows. */

static bool cm_wanted(op_controller *c, const char *name)
{
    bool want = false;
    pthread_mutex_lock(&c->cm_mu);
    for (int i = 0; name && i < OP_CM_WANTED; i++)
        want = want || (c->cm_want[i][0] && !strcmp(name, c->cm_want[i]));
    pthread_mutex_unlock(&c->cm_mu);
    return want;
}

static json_t *cm_transform(json_t *obj, const kc_resource *res, void *ud)
{
    (void)res;
    const json_t *m = json_object_get(obj, "metadata");
    const char *name = str_at(obj, "metadata", "name");
    json_t *out =
        json_pack("{s:s, s:s, s:{s:O*, s:O*, s:O*, s:O*}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", json_object_get(m, "name"), "namespace",
                  json_object_get(m, "namespace"), "uid", json_object_get(m, "uid"),
                  "resourceVersion", json_object_get(m, "resourceVersion"));
    if (out && cm_wanted(ud, name)) {
        json_t *data = json_object_get(obj, "data");
        /* "data" present, even empty, says the cached record carries the ConfigMap's data. */
        if (json_object_set_new(out, "data",
                                json_is_object(data) ? json_incref(data) : json_object())) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(obj);
    return out;
}

static void on_cm(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    op_controller *c = ud;
    if (!cm_wanted(c, str_at(o, "metadata", "name")))
        return;
    kc_informer_foreach(c->nodes, queue_node_cb, c);
    op_enqueue(c, OP_KEY_STATUS, 200);
}

static void on_cm_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    (void)a;
    on_cm(i, b, ud);
}

json_t *op_wanted_configmap(op_controller *c, int slot, const char *name, bool *failed)
{
    *failed = false;
    pthread_mutex_lock(&c->cm_mu);
    if (strcmp(c->cm_want[slot], name)) {
        snprintf(c->cm_want[slot], sizeof(c->cm_want[slot]), "%s", name);
        json_decref(c->cm_fetched[slot]);
        c->cm_fetched[slot] = NULL;
    }
    pthread_mutex_unlock(&c->cm_mu);
    json_t *cm = c->configmaps ? kc_informer_get(c->configmaps, c->ns, name) : NULL;
    if (!cm) {
        *failed = !c->configmaps || kc_informer_has(c->configmaps, c->ns, name);
        return NULL;
    }
    if (json_object_get(cm, "data"))
        return cm;
    /* Cached before it was the wanted one: read it once per resourceVersion (its next change
     * arrives with its data). */
    const char *rv = str_at(cm, "metadata", "resourceVersion");
    json_t *got = NULL;
    pthread_mutex_lock(&c->cm_mu);
    if (c->cm_fetched[slot] && rv && !strcmp(c->cm_want[slot], name) &&
        !strcmp(rv, str_at(c->cm_fetched[slot], "metadata", "resourceVersion") ?: ""))
        got = json_incref(c->cm_fetched[slot]);
    pthread_mutex_unlock(&c->cm_mu);
    json_decref(cm);
    if (got)
        return got;
    kc_err err;
    kc_code rc = kc_get(c->api, &KC_RES_CONFIGMAPS, c->ns, name, &got, &err);
    if (rc == KC_ENOTFOUND)
        return NULL;
    if (rc != KC_OK) {
        kc_warn("cannot read a ConfigMap", "name=%s err=\"%s\"", name, err.msg);
        *failed = true;
        return NULL;
    }
    if (!json_object_get(got, "data") && json_object_set_new(got, "data", json_object())) {
        json_decref(got);
        *failed = true;
        return NULL;
    }
    pthread_mutex_lock(&c->cm_mu);
    if (!strcmp(c->cm_want[slot], name)) {
        json_decref(c->cm_fetched[slot]);
        c->cm_fetched[slot] = json_incref(got);
    }
    pthread_mutex_unlock(&c->cm_mu);
    return got;
}

static void on_policy(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    (void)o;
    op_enqueue(ud, OP_KEY_POLICY, 0);
}
/* Whether key is one of the NULL-terminated list. */
static bool listed(const char *key, const char *const *list)
{
    for (; list && *list; list++)
        if (!strcmp(key, *list))
            return true;
    return false;
}

/* Members of an object whose keys are not in skip. */
static size_t size_except(const json_t *o, const char *const *skip)
{
    size_t n = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) n += !listed(k, skip);
    return n;
}

/* Whether two states of an object are equal once the top-level keys in skip and the metadata
 * keys in meta_skip are left out. */
static bool same_except(const json_t *a, const json_t *b, const char *const *skip,
                        const char *const *meta_skip)
{
    if (size_except(a, skip) != size_except(b, skip))
        return false;
    const char *k;
    const json_t *va;
    json_object_foreach((json_t *)a, k, va)
    {
        if (listed(k, skip))
            continue;
        const json_t *vb = json_object_get(b, k);
        if (!vb)
            return false;
        if (strcmp(k, "metadata") != 0 || !json_is_object(va) || !json_is_object(vb)) {
            if (!json_equal(va, vb))
                return false;
            continue;
        }
        if (size_except(va, meta_skip) != size_except(vb, meta_skip))
            return false;
        const char *mk;
        const json_t *ma;
        json_object_foreach((json_t *)va, mk, ma)
        {
            const json_t *mb = json_object_get(vb, mk);
            if (!listed(mk, meta_skip) && (!mb || !json_equal(ma, mb)))
                return false;
        }
    }
    return true;
}

/* Whether two states of an object differ at most in status and metadata.resourceVersion /
 * managedFields. */
static bool same_but_status(const json_t *a, const json_t *b)
{
    static const char *const top[] = {"status", NULL};
    static const char *const meta[] = {"resourceVersion", "managedFields", NULL};
    return same_except(a, b, top, meta);
}
/* The status reconciler's own writes come back as updates of the active ClusterPolicy. They
 * change nothing the policy reconcile reads (it renders and applies from the spec and metadata),
 * so a status-only change of the active policy queues only the status reconcile, which puts a
 * status someone else overwrote right. Rendering, applying and listing every state's objects on
 * each status write, as a rollout makes hundreds, held the node cache and the workers for tens of
 * milliseconds each time. A status change of another policy still goes to the policy reconcile,
 * which marks it ignored. */
static void on_policy_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    op_controller *c = ud;
    if (same_but_status(a, b)) {
        const char *name = str_at(b, "metadata", "name");
        pthread_mutex_lock(&c->mu);
        const char *active = c->policy ? str_at(c->policy, "metadata", "name") : NULL;
        bool is_active = name && active && !strcmp(name, active);
        pthread_mutex_unlock(&c->mu);
        if (is_active) {
            op_enqueue(c, OP_KEY_STATUS, 100);
            return;
        }
    }
    on_policy(i, b, ud);
}
static void node_added(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    op_controller *c = ud;
    queue_node(c, o);
    op_enqueue(c, OP_KEY_STATUS, 200);
    /* The driver image follows the GPU nodes' OS. */
    op_enqueue(c, OP_KEY_POLICY, 200);
}
/* The node handlers also count the GPU nodes, which the status compares with the nodes
 * reconciled (counting them from the cache would decode every node). */
static void on_node_add(kc_informer *i, const json_t *o, void *ud)
{
    if (op_node_is_gpu(o))
        atomic_fetch_add(&((op_controller *)ud)->gpu_nodes, 1);
    node_added(i, o, ud);
}
/* Whether two cached states of an object differ only in metadata.resourceVersion: the caches
 * keep only what the operator reads, so such an update (a kubelet heartbeat, a pod IP, a
 * container start time) cannot change a reconcile's outcome and queues nothing. */
static bool same_but_rv(const json_t *a, const json_t *b)
{
    static const char *const meta[] = {"resourceVersion", NULL};
    return same_except(a, b, NULL, meta);
}

static void on_node_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    (void)i;
    op_controller *c = ud;
    if (same_but_rv(a, b)) {
        if (c->m_ignored)
            kc_counter_inc(c->m_ignored);
        return;
    }
    long d = (long)op_node_is_gpu(b) - (long)op_node_is_gpu(a);
    if (d)
        atomic_fetch_add(&c->gpu_nodes, d);
    queue_node(c, b);
    /* The toolkit's runtime follows the GPU nodes'. */
    const char *ra = op_node_runtime(a), *rb = op_node_runtime(b);
    if (d || (ra != rb && (!ra || !rb || strcmp(ra, rb))))
        op_enqueue(c, OP_KEY_POLICY, 200);
}
static void on_node_del(kc_informer *i, const json_t *o, void *ud)
{
    if (op_node_is_gpu(o))
        atomic_fetch_sub(&((op_controller *)ud)->gpu_nodes, 1);
    node_added(i, o, ud);
}
/* Counts a pod (d = 1) or stops counting it (d = -1) under its app label, unless terminating. */
static void count_app_pod(op_controller *c, const json_t *pod, int d)
{
    const json_t *m = json_object_get(pod, "metadata");
    const char *app = str_at(json_object_get(m, "labels"), "app", NULL);
    if (!app || json_object_get(m, "deletionTimestamp"))
        return;
    pthread_mutex_lock(&c->mu);
    uintptr_t n = (uintptr_t)kc_map_get(c->app_pods, app);
    if (d > 0)
        n++;
    else if (n > 0)
        n--;
    if (n)
        kc_map_put(c->app_pods, app, (void *)n, NULL); /* out of memory: the count is low */
    else
        kc_map_remove(c->app_pods, app);
    pthread_mutex_unlock(&c->mu);
}

typedef struct op_app_fail {
    char pod[256];
    char why[600];
} op_app_fail;

/* Keeps, per app label, a pod of ours that is failing to start; the status names it. A change
 * queues the status: a pull error does not change the DaemonSet's counts. */
static void note_app_failing(op_controller *c, const json_t *pod, bool gone)
{
    const json_t *m = json_object_get(pod, "metadata");
    const char *app = str_at(json_object_get(m, "labels"), "app", NULL);
    const char *name = str_at(m, "name", NULL);
    if (!app || !name)
        return;
    char why[600];
    bool failing = !gone && !json_object_get(m, "deletionTimestamp") &&
                   op_pod_failing(pod, app, why, sizeof(why));
    bool changed = false;
    pthread_mutex_lock(&c->mu);
    op_app_fail *f = c->app_failing ? kc_map_get(c->app_failing, app) : NULL;
    if (failing && c->app_failing) {
        if (!f && (f = calloc(1, sizeof(*f))) &&
            kc_map_put(c->app_failing, app, f, NULL) != KC_OK) {
            free(f);
            f = NULL;
        }
        if (f && (strcmp(f->pod, name) || strcmp(f->why, why))) {
            snprintf(f->pod, sizeof(f->pod), "%s", name);
            snprintf(f->why, sizeof(f->why), "%s", why);
            changed = true;
        }
    } else if (f && !strcmp(f->pod, name)) {
        free(kc_map_remove(c->app_failing, app));
        changed = true;
    }
    pthread_mutex_unlock(&c->mu);
    if (changed)
        op_enqueue(c, OP_KEY_STATUS, 200);
}

bool op_app_failing(op_controller *c, const char *app, char *why, size_t size)
{
    pthread_mutex_lock(&c->mu);
    const op_app_fail *f = c->app_failing ? kc_map_get(c->app_failing, app) : NULL;
    if (f)
        snprintf(why, size, "%s", f->why);
    pthread_mutex_unlock(&c->mu);
    return f != NULL;
}

long op_app_pods(op_controller *c, const char *app)
{
    pthread_mutex_lock(&c->mu);
    long n = (long)(uintptr_t)kc_map_get(c->app_pods, app);
    pthread_mutex_unlock(&c->mu);
    return n;
}

static void on_pod_add(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    index_pod(ud, o, true);
    count_app_pod(ud, o, 1);
    note_app_failing(ud, o, false);
}
static void on_pod_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    (void)i;
    if (same_but_rv(a, b)) {
        if (((op_controller *)ud)->m_ignored)
            kc_counter_inc(((op_controller *)ud)->m_ignored);
        return;
    }
    const char *na = str_at(a, "spec", "nodeName"), *nb = str_at(b, "spec", "nodeName");
    if (na && (!nb || strcmp(na, nb)))
        index_pod(ud, a, false);
    index_pod(ud, b, true);
    count_app_pod(ud, a, -1);
    count_app_pod(ud, b, 1);
    note_app_failing(ud, b, false);
}
static void on_pod_del(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    index_pod(ud, o, false);
    count_app_pod(ud, o, -1);
    note_app_failing(ud, o, true);
}
/* Owned objects: a change may need a re-apply (someone edited or deleted one). DaemonSet status
 * changes matter to the ClusterPolicy status. */
static void on_owned(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    (void)o;
    op_controller *c = ud;
    op_enqueue(c, OP_KEY_POLICY, 0);
    op_enqueue(c, OP_KEY_STATUS, 200);
}
/* Whether anything but the status and the server's bookkeeping (resourceVersion, generation,
 * managedFields) differs between two versions of an object: an edit the policy reconciler may
 * have to put back. */
static bool edited(const json_t *a, const json_t *b)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)b, key, v)
    {
        if (!strcmp(key, "status") || !strcmp(key, "metadata"))
            continue;
        if (!json_equal(v, json_object_get(a, key)))
            return true;
    }
    json_object_foreach((json_t *)a, key, v) if (!json_object_get(b, key)) return true;
    static const char *const meta[] = {"labels", "annotations", "ownerReferences", NULL};
    const json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");
    for (const char *const *m = meta; *m; m++) {
        const json_t *x = json_object_get(ma, *m), *y = json_object_get(mb, *m);
        if ((x || y) && (!x || !y || !json_equal(x, y)))
            return true;
    }
    return false;
}

static void on_owned_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    (void)i;
    op_controller *c = ud;
    /* A change of what we rendered (our hash) or an edit by someone else needs a re-apply;
     * status changes only matter to the status. */
    if (edited(a, b))
        op_enqueue(c, OP_KEY_POLICY, 0);
    op_enqueue(c, OP_KEY_STATUS, 200);
    /* A new driver template generation starts the node-by-node driver upgrade. */
    const char *name = json_string_value(json_object_get(json_object_get(b, "metadata"), "name"));
    json_int_t ga =
        json_integer_value(json_object_get(json_object_get(a, "metadata"), "generation"));
    json_int_t gb =
        json_integer_value(json_object_get(json_object_get(b, "metadata"), "generation"));
    if (name && ga != gb && !strcmp(name, op_stage_daemonset(OP_STAGE_DRIVER)))
        kc_informer_foreach(c->nodes, queue_node_cb, c);
}

/* Copies the entries of obj whose key passes keep (new object; NULL when obj is NULL). */
static json_t *filtered(const json_t *obj, bool (*keep)(const char *key))
{
    if (!json_is_object(obj))
        return NULL;
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) if (keep(k)) json_object_set(out, k, v);
    return out;
}

/* Node labels the operator reads: NFD's PCI and OS labels and the nvidia.com/ ones. */
bool op_node_label_cached(const char *k)
{
    return !strncmp(k, "nvidia.com/", 11) || !strncmp(k, "feature.node.kubernetes.io/pci-", 31) ||
           !strncmp(k, "feature.node.kubernetes.io/system-os_release.", 45);
}

bool op_node_annotation_cached(const char *k)
{
    return !strncmp(k, "nvidia.com/gpu-operator", 23) ||
           !strncmp(k, "nvidia.com/gpu-driver-upgrade", 29);
}

/* Pod labels the operator reads. */
static bool pod_label_kept(const char *k)
{
    return !strcmp(k, "app") || !strncmp(k, "nvidia.com/", 11) ||
           !strcmp(k, "pod-template-generation") || !strcmp(k, OP_MANAGED_LABEL);
}

/* A container status trimmed to what gating reads: the name; a waiting reason the gate reports
 * as failing (op_waiting_reason_failing), its message and the last termination's message; and,
 * in a pod that failed, the terminated exit code, message and finish time. A container that is
 * merely starting (ContainerCreating, PodInitializing) or running is left out (ctr_statuses),
 * so the steps of a pod's start are one cached state and queue no reconcile. */
static json_t *ctr_status(const json_t *cs, bool pod_failed)
{
    const json_t *st = json_object_get(cs, "state");
    const json_t *w = json_object_get(st, "waiting"), *t = json_object_get(st, "terminated");
    if (!op_waiting_reason_failing(json_string_value(json_object_get(w, "reason"))))
        w = NULL;
    if (!pod_failed)
        t = NULL;
    const json_t *lt = w ? json_object_get(json_object_get(cs, "lastState"), "terminated") : NULL;
    /* state and lastState only when they say something: most containers run. */
    json_t *out = json_pack("{s:O*}", "name", json_object_get(cs, "name"));
    if (!out)
        return NULL;
    if (w || t)
        json_object_set_new(out, "state", json_object());
    if (lt)
        json_object_set_new(out, "lastState", json_object());
    if (w)
        json_object_set_new(json_object_get(out, "state"), "waiting",
                            json_pack("{s:O*, s:O*}", "reason", json_object_get(w, "reason"),
                                      "message", json_object_get(w, "message")));
    /* The output of a container that succeeded is never read (failure reasons come from
     * the others): dropping it keeps a succeeded validation pod at a third of its size. */
    const json_t *code = json_object_get(t, "exitCode");
    bool failed = !json_is_integer(code) || json_integer_value(code) != 0;
    if (t)
        json_object_set_new(json_object_get(out, "state"), "terminated",
                            json_pack("{s:O*, s:O*, s:O*}", "exitCode", code, "message",
                                      failed ? json_object_get(t, "message") : NULL, "finishedAt",
                                      json_object_get(t, "finishedAt")));
    if (lt)
        json_object_set_new(json_object_get(out, "lastState"), "terminated",
                            json_pack("{s:O*}", "message", json_object_get(lt, "message")));
    return out;
}

static json_t *ctr_statuses(const json_t *arr, bool pod_failed)
{
    if (!json_is_array(arr))
        return NULL;
    json_t *out = json_array();
    size_t i;
    const json_t *cs;
    json_array_foreach(arr, i, cs)
    {
        json_t *t = ctr_status(cs, pod_failed);
        /* A name alone says nothing; a failed pod keeps every entry (its first is read). */
        if (!pod_failed && json_object_size(t) == 1) {
            json_decref(t);
            continue;
        }
        json_array_append_new(out, t);
    }
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Keeps what the operator reads of a Pod (a few KB instead of tens once parsed): identity,
 * the labels and annotations it uses, the node, and its status as the gate sees it. The phase is
 * kept when it decides something: Succeeded and Failed (validation results), Running with the
 * Ready condition True (op_pod_ready); a pod that is pending, or running but not Ready, is one
 * state with neither, and the status reason and message (a refused pod's) only when it failed.
 * An update that changes none of this queues no reconcile (on_pod_upd). */
json_t *op_pod_transform(json_t *obj, const kc_resource *res, void *ud)
{
    (void)res;
    (void)ud;
    const json_t *m = json_object_get(obj, "metadata");
    const json_t *st = json_object_get(obj, "status");
    bool ready = false;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *v = json_string_value(json_object_get(c, "status"));
        if (t && !strcmp(t, "Ready"))
            ready = v && !strcmp(v, "True");
    }
    const char *phase = json_string_value(json_object_get(st, "phase"));
    bool failed = phase && !strcmp(phase, "Failed");
    bool decides = failed || (phase && !strcmp(phase, "Succeeded")) ||
                   (ready && phase && !strcmp(phase, "Running"));
    json_t *ready_cond =
        decides && ready ? json_pack("[{s:s, s:s}]", "type", "Ready", "status", "True") : NULL;
    json_t *out = json_pack(
        "{s:s, s:s, s:{s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:o*, s:o*}, s:{s:O*}, "
        "s:{s:O*, s:O*, s:O*, s:o*, s:o*, s:o*}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", json_object_get(m, "name"),
        "namespace", json_object_get(m, "namespace"), "uid", json_object_get(m, "uid"),
        "resourceVersion", json_object_get(m, "resourceVersion"), "creationTimestamp",
        json_object_get(m, "creationTimestamp"), "deletionTimestamp",
        json_object_get(m, "deletionTimestamp"), "labels",
        filtered(json_object_get(m, "labels"), pod_label_kept), "annotations",
        filtered(json_object_get(m, "annotations"), op_node_annotation_cached), "spec", "nodeName",
        json_object_get(json_object_get(obj, "spec"), "nodeName"), "status", "phase",
        decides ? json_object_get(st, "phase") : NULL, "reason",
        failed ? json_object_get(st, "reason") : NULL, "message",
        failed ? json_object_get(st, "message") : NULL, "conditions", ready_cond,
        "containerStatuses", ctr_statuses(json_object_get(st, "containerStatuses"), failed),
        "initContainerStatuses",
        ctr_statuses(json_object_get(st, "initContainerStatuses"), failed));
    json_decref(obj);
    return out;
}

/* The taints that keep pods off a node (NoSchedule, NoExecute): the gate reports a node whose
 * operands do not tolerate one. NULL when none. */
static json_t *hard_taints(const json_t *taints)
{
    json_t *out = NULL;
    size_t i;
    const json_t *t;
    json_array_foreach(taints, i, t)
    {
        const char *eff = json_string_value(json_object_get(t, "effect"));
        if (!eff || (strcmp(eff, "NoSchedule") && strcmp(eff, "NoExecute")))
            continue;
        if (!out && !(out = json_array()))
            return NULL;
        json_array_append_new(out, json_pack("{s:O*, s:O*, s:O*}", "key", json_object_get(t, "key"),
                                             "value", json_object_get(t, "value"), "effect",
                                             json_object_get(t, "effect")));
    }
    return out;
}

/* Keeps what the operator reads of a Node: identity, labels, annotations, allocatable, its
 * container runtime, whether it is cordoned and the taints that keep pods off it. */
static json_t *node_transform(json_t *obj, const kc_resource *res, void *ud)
{
    (void)res;
    (void)ud;
    const json_t *m = json_object_get(obj, "metadata");
    const json_t *st = json_object_get(obj, "status"), *spec = json_object_get(obj, "spec");
    json_t *out = json_pack(
        "{s:s, s:s, s:{s:O*, s:O*, s:O*, s:O*, s:o*, s:o*, s:O*}, s:{s:O*, s:{s:O*}}, "
        "s:{s:O*, s:o*}}",
        "apiVersion", "v1", "kind", "Node", "metadata", "name", json_object_get(m, "name"), "uid",
        json_object_get(m, "uid"), "resourceVersion", json_object_get(m, "resourceVersion"),
        "creationTimestamp", json_object_get(m, "creationTimestamp"), "labels",
        filtered(json_object_get(m, "labels"), op_node_label_cached), "annotations",
        filtered(json_object_get(m, "annotations"), op_node_annotation_cached), "deletionTimestamp",
        json_object_get(m, "deletionTimestamp"), "status", "allocatable",
        json_object_get(st, "allocatable"), "nodeInfo", "containerRuntimeVersion",
        json_object_get(json_object_get(st, "nodeInfo"), "containerRuntimeVersion"), "spec",
        "unschedulable", json_object_get(spec, "unschedulable"), "taints",
        hard_taints(json_object_get(spec, "taints")));
    json_decref(obj);
    return out;
}

/* ---- workers ---- */

static void *worker(void *arg)
{
    op_controller *c = arg;
    char *key;
    while (kc_workqueue_get(c->q, &key)) {
        long again = -1;
        const char *kind = "node";
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (!strcmp(key, OP_KEY_POLICY)) {
            kind = "policy";
            again = op_reconcile_policy(c);
        } else if (!strcmp(key, OP_KEY_STATUS)) {
            kind = "status";
            again = op_reconcile_status(c);
        } else if (!strncmp(key, OP_NODE_PREFIX, strlen(OP_NODE_PREFIX))) {
            uint64_t ev = take_event(c, key);
            again = op_reconcile_node(c, key + strlen(OP_NODE_PREFIX), ev, op_mono_ms());
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (c->m_duration) {
            const char *v[] = {kind, NULL};
            kc_series *se = kc_metric_with(c->m_duration, v);
            if (se)
                kc_histogram_observe(se, (double)(t1.tv_sec - t0.tv_sec) +
                                             (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        }
        kc_workqueue_done(c->q, key);
        if (again >= 0)
            op_enqueue(c, key, again);
        else if (again != OP_REQUEUED && strncmp(key, OP_NODE_PREFIX, strlen(OP_NODE_PREFIX)) != 0)
            kc_workqueue_forget(c->q, key); /* a node's backoff ends when its writes succeed */
        free(key);
    }
    return NULL;
}

bool op_controller_synced(op_controller *c)
{
    return c && atomic_load(&c->synced);
}

static bool sync_optional_kinds(op_controller *c);

static void on_tick(uv_timer_t *t)
{
    op_controller *c = t->data;
    if (c->workers_started)
        return;
    if (!kc_informer_synced(c->policies) || !kc_informer_synced(c->nodes) ||
        !kc_informer_synced(c->pods) || !kc_informer_synced(c->daemonsets) ||
        !kc_informer_synced(c->configmaps))
        return;
    /* The optional kinds whose CRD is installed are part of the first sync: their objects are
     * then applied by the first policy reconcile. */
    for (size_t i = 0; i < c->n_kinds; i++)
        if (c->kinds[i].crd_inf && !kc_informer_synced(c->kinds[i].crd_inf))
            return;
    if (!sync_optional_kinds(c))
        return;
    for (size_t i = 0; i < c->n_kinds; i++)
        if (c->kinds[i].inf && !kc_informer_synced(c->kinds[i].inf))
            return;
    for (size_t i = 0; i < c->n_kinds; i++)
        c->kinds[i].pending = false;
    atomic_store(&c->synced, true);
    c->workers_started = true;
    for (int i = 0; i < c->n_workers; i++)
        if (pthread_create(&c->workers[i], NULL, worker, c) != 0) {
            kc_error("cannot start a worker", "i=%d", i);
            c->n_workers = i;
            break;
        }
    op_enqueue(c, OP_KEY_POLICY, 0);
    malloc_trim(0); /* the list pages are parsed and gone */
    kc_info("caches synced; reconciling", "workers=%d nodes=%zu", c->n_workers,
            kc_informer_count(c->nodes));
    uv_timer_stop(t);
}

/* glibc keeps freed memory in its arenas; a list burst or a rollout would otherwise stay in
 * the RSS for good. A trim walks every free chunk of the heap (about 15 ms at 1,000 nodes), so
 * an operator with nothing to do stops trimming: once two ticks in a row (10-20 s) saw no key
 * queued, what the last reconciles freed has been trimmed. */
static void on_trim(uv_timer_t *t)
{
    op_controller *c = t->data;
    if (c->workers_started && atomic_exchange(&c->lost_keys, false)) {
        kc_warn("resync after a lost queue key", "%s", "");
        op_enqueue(c, OP_KEY_POLICY, 0);
        op_enqueue(c, OP_KEY_STATUS, 0);
        kc_informer_foreach(c->nodes, queue_node_cb, c);
    }
    op_expect_sweep(c, 0);
    unsigned long q = atomic_load(&c->queued);
    c->trim_quiet = q == c->trim_queued ? c->trim_quiet + 1 : 0;
    c->trim_queued = q;
    if (c->trim_quiet < 2)
        malloc_trim(0);
    if (c->m_dict)
        kc_gauge_set(c->m_dict, (double)kc_pack_dict_entries(c->pack));
}

/* Metrics hook: the client's rate limiter keeps its own total. */
static void sample_client(kc_registry *r, void *ud)
{
    (void)r;
    op_controller *c = ud;
    kc_client_stats st;
    kc_client_get_stats(c->api, &st);
    kc_counter_set(c->m_throttled, (double)st.throttled_ms / 1000.0);
}

static void on_stop(uv_async_t *a)
{
    uv_stop(a->loop);
}

void op_controller_stop(op_controller *c)
{
    if (!c)
        return;
    /* The stop token first: from here on nothing is written (a leader that lost its Lease must
     * not write once another may hold it), and workers waiting on a retry or a slow answer
     * return at once. */
    kc_client_cancel(c->api);
    /* Before run (a standby replica told to stop) there is no loop to wake. */
    if (atomic_load(&c->running))
        uv_async_send(&c->stop_async);
}

/* Whether the server serves a resource (discovery of its group/version): 1 yes, 0 no (the group
 * version is absent or does not list it), -1 discovery itself failed (err says why: refused
 * credentials, a server down ...), which is not the same as "not served". */
static int served(op_controller *c, const kc_resource *r, kc_err *err)
{
    if (!r->group[0])
        return 1;
    char path[256];
    snprintf(path, sizeof(path), "/apis/%s/%s", r->group, r->version);
    kc_request req = {.method = "GET", .path = path};
    kc_response resp = {0};
    int ok = 0;
    kc_code rc = kc_client_do(c->api, &req, &resp, err);
    if (rc != KC_OK && rc != KC_ENOTFOUND) {
        kc_err_prefix(err, "discovering %s/%s", r->group, r->version);
        kc_response_free(&resp);
        return -1;
    }
    if (rc == KC_OK && resp.body) {
        json_t *doc = json_loads(resp.body, 0, NULL);
        size_t i;
        const json_t *res;
        json_array_foreach(json_object_get(doc, "resources"), i,
                           res) if (!strcmp(str_at(res, "name", NULL) ?: "", r->resource)) ok = 1;
        json_decref(doc);
    }
    kc_response_free(&resp);
    return ok;
}

static const kc_resource RES_CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                     false};

/* Whether a CRD serves a kind now: Established, not being deleted (its objects are going), and
 * the kind's version served. A real API server serves the kind a moment after Established; the
 * informer's list retries (with backoff) until it does. */
static bool crd_serves(const json_t *crd, const op_kind *k)
{
    if (!crd || json_object_get(json_object_get(crd, "metadata"), "deletionTimestamp"))
        return false;
    bool established = false, version = false;
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(json_object_get(crd, "status"), "conditions"), i, v)
    {
        const char *t = str_at(v, "type", NULL), *st = str_at(v, "status", NULL);
        if (t && st && !strcmp(t, "Established"))
            established = !strcmp(st, "True");
    }
    json_array_foreach(json_object_get(json_object_get(crd, "spec"), "versions"), i, v)
    {
        const char *name = str_at(v, "name", NULL);
        if (name && !strcmp(name, k->res.version) && json_is_true(json_object_get(v, "served")))
            version = true;
    }
    return established && version;
}

/* Starts or stops the informers of the optional kinds to match their CRDs (loop thread, outside
 * the handlers: an informer is freed here). Returns false when a policy reconcile held the kinds
 * and nothing could change: the caller tries again shortly. */
static bool sync_optional_kinds(op_controller *c)
{
    bool locked = false, changed = false;
    for (size_t i = 0; i < c->n_kinds; i++) {
        op_kind *k = &c->kinds[i];
        if (!k->crd_inf)
            continue;
        json_t *crd = kc_informer_get(k->crd_inf, NULL, k->crd);
        if (!crd && kc_informer_has(k->crd_inf, NULL, k->crd))
            return locked ? (pthread_rwlock_unlock(&c->kinds_mu), false) : false; /* no memory */
        bool want = crd_serves(crd, k);
        json_decref(crd);
        if (want == (k->inf != NULL))
            continue;
        if (!locked && pthread_rwlock_trywrlock(&c->kinds_mu) != 0)
            return false;
        locked = true;
        if (!want) {
            kc_informer_free(k->inf);
            k->inf = NULL;
            k->pending = false;
            kc_info("CRD removed: its kind is no longer watched", "kind=%s crd=%s", k->kind,
                    k->crd);
            changed = true;
            continue;
        }
        kc_informer_handlers oh = {on_owned, on_owned_upd, on_owned, c};
        kc_informer_opts owned = {.label_selector = OP_MANAGED_LABEL "=" OP_MANAGED_VALUE};
        kc_err err;
        kc_informer *inf = NULL;
        if (kc_informer_new(c->api, &c->loop, &k->res, k->res.namespaced ? c->ns : NULL, &oh,
                            &owned, &inf, &err) != KC_OK ||
            kc_informer_start(inf, &err) != KC_OK) {
            kc_informer_free(inf);
            kc_warn("cannot watch a kind whose CRD was installed; trying again",
                    "kind=%s err=\"%s\"", k->kind, err.msg);
            pthread_rwlock_unlock(&c->kinds_mu);
            return false;
        }
        k->inf = inf;
        k->pending = true;
        kc_info("CRD installed: watching its kind", "kind=%s crd=%s", k->kind, k->crd);
    }
    if (locked)
        pthread_rwlock_unlock(&c->kinds_mu);
    /* A removed kind: the policy reconcile reports its objects as missing. */
    if (changed && c->workers_started) {
        op_enqueue(c, OP_KEY_POLICY, 0);
        op_enqueue(c, OP_KEY_STATUS, 0);
    }
    return true;
}

/* crd_timer: applies CRD changes (handlers only arm it) and, once a newly started informer has
 * synced, queues the policy reconcile that applies the kind's objects. Stops when done. */
static void on_crd_timer(uv_timer_t *t)
{
    op_controller *c = t->data;
    bool again = !sync_optional_kinds(c);
    for (size_t i = 0; i < c->n_kinds; i++) {
        op_kind *k = &c->kinds[i];
        if (!k->pending)
            continue;
        if (!kc_informer_synced(k->inf)) {
            again = true;
            continue;
        }
        k->pending = false;
        if (c->workers_started) {
            op_enqueue(c, OP_KEY_POLICY, 0);
            op_enqueue(c, OP_KEY_STATUS, 0);
        }
    }
    if (again)
        uv_timer_start(t, on_crd_timer, 50, 0);
}

static void on_crd(kc_informer *i, const json_t *o, void *ud)
{
    (void)i;
    (void)o;
    op_controller *c = ud;
    uv_timer_start(&c->crd_timer, on_crd_timer, 0, 0);
}
static void on_crd_upd(kc_informer *i, const json_t *a, const json_t *b, void *ud)
{
    (void)a;
    on_crd(i, b, ud);
}

/* Watches the CRD of an optional kind by name (a field selector: one object, and RBAC can grant
 * the list and watch for that name alone). Returns 1 when watched, 0 when the operator may not
 * read the CRD (then the kind is discovered once, as before), -1 on error (err). */
static int watch_crd(op_controller *c, op_kind *k, kc_err *err)
{
    char sel[300], path[512];
    snprintf(sel, sizeof(sel), "metadata.name=%s", k->crd);
    snprintf(path, sizeof(path), "/apis/%s/%s/%s?fieldSelector=metadata.name%%3D%s&limit=1",
             RES_CRDS.group, RES_CRDS.version, RES_CRDS.resource, k->crd);
    /* One list first: a watch the operator may not make would never sync and hold every
     * reconcile back. */
    kc_request req = {.method = "GET", .path = path};
    kc_code rc = kc_client_do(c->api, &req, NULL, err);
    if (rc == KC_EFORBIDDEN || rc == KC_ENOTFOUND) {
        kc_warn("cannot read CustomResourceDefinitions: a CRD installed later is noticed only by "
                "a restart (grant list and watch on customresourcedefinitions)",
                "crd=%s err=\"%s\"", k->crd, err->msg);
        kc_err_clear(err);
        return 0;
    }
    if (rc != KC_OK) {
        kc_err_prefix(err, "reading CRD %s", k->crd);
        return -1;
    }
    kc_informer_handlers h = {on_crd, on_crd_upd, on_crd, c};
    kc_informer_opts o = {.field_selector = sel, .name = k->crd};
    if ((rc = kc_informer_new(c->api, &c->loop, &RES_CRDS, NULL, &h, &o, &k->crd_inf, err)) !=
            KC_OK ||
        (rc = kc_informer_start(k->crd_inf, err)) != KC_OK)
        return -1;
    return 1;
}

kc_code op_controller_new(const op_controller_opts *opts, op_controller **out, kc_err *err)
{
    *out = NULL;
    op_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    c->o = *opts;
    c->ns = strdup(opts->ns);
    c->n_workers = opts->workers > 0 ? opts->workers : OP_DEFAULT_WORKERS;
    c->workers = calloc((size_t)c->n_workers, sizeof(*c->workers));
    c->results = kc_map_new();
    c->event_at = kc_map_new();
    c->admitted = kc_map_new();
    c->expect = kc_map_new();
    c->mig_owner = kc_map_new();
    c->pods_by_node = kc_map_new();
    c->app_pods = kc_map_new();
    c->app_failing = kc_map_new();
    c->pack = kc_pack_dict_new(KC_PACK_DICT_MAX);
    c->pack_codec = kc_pack_codec(c->pack);
    c->ds_by_state = json_object();
    c->kinds = calloc(N_KINDS, sizeof(*c->kinds));
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->mig_mu, NULL);
    pthread_mutex_init(&c->cm_mu, NULL);
    pthread_rwlock_init(&c->kinds_mu, NULL);
    atomic_init(&c->synced, false);
    atomic_init(&c->running, false);
    atomic_init(&c->gpu_nodes, 0);
    kc_code rc = KC_OK;
    if (!c->ns || !c->workers || !c->results || !c->event_at || !c->admitted || !c->expect ||
        !c->mig_owner || !c->pods_by_node || !c->app_pods || !c->app_failing || !c->pack ||
        !c->ds_by_state || !c->kinds) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto fail;
    }
    memcpy(c->kinds, kind_table, sizeof(kind_table));
    c->n_kinds = N_KINDS;
    char agent[256];
    /* The replica in the product token, which servers use to tell clients apart. */
    snprintf(agent, sizeof(agent), "gpu-operator%s%s/0.1.0", opts->identity ? "@" : "",
             opts->identity ? opts->identity : "");
    double qps = opts->qps > 0 ? opts->qps : 500;
    /* Watches ask for bookmarks (one about every minute from a real API server and kubesim): a
     * watch silent for much longer than that is dead (a half-open connection, a stuck proxy)
     * and is started again by its informer. */
    kc_client_opts co = {.qps = qps,
                         .burst = (int)(2 * qps),
                         .user_agent = agent,
                         .stream_idle_timeout_s = OP_WATCH_IDLE_TIMEOUT_S};
    if ((rc = kc_client_new(opts->config, &co, &c->api, err)) != KC_OK)
        goto fail;
    kc_workqueue_opts qo = {.qps = -1, .base_delay_ms = 5, .max_delay_ms = 60000};
    if ((rc = kc_workqueue_new(&qo, &c->q, err)) != KC_OK)
        goto fail;
    if (opts->metrics) {
        static const char *const labels[] = {"kind", NULL};
        double b[14]; /* 0.5 ms to 75 s */
        kc_metrics_exp_buckets(0.0005, 2.5, 14, b, NULL);
        kc_metrics_histogram(opts->metrics, "gpu_operator_reconcile_duration_seconds",
                             "time spent in one reconcile, by kind (policy, node, status)", labels,
                             b, 14, &c->m_duration, NULL);
        kc_metric *d = NULL, *qd = NULL, *ad = NULL;
        if (kc_metrics_histogram(opts->metrics, "gpu_operator_transition_delay_seconds",
                                 "from the watch event that allowed a node transition to the "
                                 "operator's first resulting write request written to its "
                                 "connection",
                                 NULL, b, 14, &d, NULL) == KC_OK &&
            kc_metrics_histogram(opts->metrics, "gpu_operator_transition_queued_seconds",
                                 "from the watch event that allowed a node transition to the "
                                 "start of the reconcile that made it (waiting for a worker)",
                                 NULL, b, 14, &qd, NULL) == KC_OK &&
            kc_metrics_histogram(opts->metrics, "gpu_operator_transition_applied_seconds",
                                 "from the watch event that allowed a node transition to the API "
                                 "server's answer to the last write it caused",
                                 NULL, b, 14, &ad, NULL) == KC_OK) {
            c->m_queued = kc_metric_with(qd, NULL);
            c->m_applied = kc_metric_with(ad, NULL);
            c->m_delay = c->m_queued && c->m_applied ? kc_metric_with(d, NULL) : NULL;
        }
        kc_metric *ig = NULL;
        if (kc_metrics_counter(opts->metrics, "gpu_operator_watch_updates_ignored_total",
                               "node and pod updates that changed nothing the operator reads "
                               "(no reconcile queued)",
                               NULL, &ig, NULL) == KC_OK)
            c->m_ignored = kc_metric_with(ig, NULL);
        kc_metric *dict = NULL;
        if (kc_metrics_gauge(opts->metrics, "gpu_operator_cache_dictionary_strings",
                             "distinct strings the node and pod caches share (bounded at 65536)",
                             NULL, &dict, NULL) == KC_OK)
            c->m_dict = kc_metric_with(dict, NULL);
        /* client-go's work-queue and REST client metrics, as NVIDIA's operator exposes them. */
        if ((rc = kc_workqueue_register_metrics(c->q, opts->metrics, "gpu-operator", err)) !=
                KC_OK ||
            (rc = kc_client_register_metrics(c->api, opts->metrics, err)) != KC_OK)
            goto fail;
        kc_metric *thr = NULL;
        if (kc_metrics_counter(opts->metrics, "gpu_operator_api_throttled_seconds_total",
                               "time API requests waited for the client-side rate limit "
                               "(--kube-api-qps, burst twice that)",
                               NULL, &thr, NULL) == KC_OK &&
            (c->m_throttled = kc_metric_with(thr, NULL)) &&
            kc_metrics_add_hook(opts->metrics, sample_client, c, NULL, NULL) != KC_OK)
            c->m_throttled = NULL;
    }
    /* Events about cluster-scoped objects (Nodes, the ClusterPolicy) must live in "default": the
     * API server refuses an involvedObject without namespace in any other namespace. */
    /* Events are written by the recorder's own thread: a worker never waits for one. */
    kc_event_recorder_opts eo = {
        .component = "gpu-operator", .default_namespace = "default", .queue_size = 4096};
    if ((rc = kc_event_recorder_new(c->api, &eo, &c->events, err)) != KC_OK)
        goto fail;
    *out = c;
    return KC_OK;
fail:
    op_controller_free(c);
    return rc;
}

kc_code op_controller_run(op_controller *c, kc_err *err)
{
    kc_code rc;
    uv_loop_init(&c->loop);
    uv_async_init(&c->loop, &c->stop_async, on_stop);
    atomic_store(&c->running, true);
    atomic_store(&c->gpu_nodes, 0); /* the new node cache's handlers count them again */
    pthread_mutex_lock(&c->mu);     /* and the new pod cache's its pods */
    kc_map *fresh = kc_map_new();
    if (fresh) {
        kc_map_free(c->app_pods, NULL);
        c->app_pods = fresh;
    }
    kc_map *fresh_fail = kc_map_new();
    if (fresh_fail) {
        kc_map_free(c->app_failing, free);
        c->app_failing = fresh_fail;
    }
    pthread_mutex_unlock(&c->mu);
    uv_timer_init(&c->loop, &c->tick);
    c->tick.data = c;
    uv_timer_init(&c->loop, &c->trim);
    c->trim.data = c;
    uv_timer_start(&c->trim, on_trim, 10000, 10000);
    uv_timer_init(&c->loop, &c->crd_timer);
    c->crd_timer.data = c;
    /* Over HTTP/2 the pipe runs on the loop, in the multi handle of the watches: one connection
     * for everything, as client-go holds. Over HTTP/1.1 a connection carries one request at a
     * time and nothing is multiplexed: the pipe keeps its own thread and keep-alive connections,
     * which the benchmark measured answering writes sooner (bench/README.md, tenth pass). The
     * core group's discovery tells which protocol the server speaks. */
    kc_request probe = {.method = "GET", .path = "/api/v1"};
    if ((rc = kc_client_do(c->api, &probe, NULL, err)) != KC_OK) {
        kc_err_prefix(err, "discovering core/v1");
        goto out;
    }
    bool on_loop = kc_client_multiplexed(c->api);
    if ((!on_loop &&
         (rc = kc_pipe_new(c->api, OP_PIPE_LANES, OP_PIPE_DEPTH, &c->pipe, err)) != KC_OK) ||
        (rc = kc_client_attach_loop(c->api, &c->loop, err)) != KC_OK ||
        (on_loop &&
         (rc = kc_pipe_new(c->api, OP_PIPE_LANES, OP_PIPE_DEPTH, &c->pipe, err)) != KC_OK))
        goto out;
    kc_info("API server connection", "protocol=%s pipe=%s", on_loop ? "HTTP/2" : "HTTP/1.1",
            on_loop ? "on the loop" : "own thread");
    kc_informer_handlers ph = {on_policy, on_policy_upd, on_policy, c};
    kc_informer_handlers nh = {on_node_add, on_node_upd, on_node_del, c};
    kc_informer_handlers podh = {on_pod_add, on_pod_upd, on_pod_del, c};
    kc_informer_handlers oh = {on_owned, on_owned_upd, on_owned, c};
    kc_informer_handlers cmh = {on_cm, on_cm_upd, on_cm, c};
    /* Nodes and pods are the caches that grow with the fleet: they keep packed records (one
     * allocation per object instead of one per value, keys and recurring strings shared, UIDs
     * and timestamps in binary: about a quarter of the compact JSON text) and list in pages of
     * 100 (a page's parse tree is the operator's peak memory at sync). */
    kc_informer_opts no = {
        .transform = node_transform, .name = "nodes", .codec = &c->pack_codec, .page_size = 100};
    kc_informer_opts owned = {.label_selector = OP_MANAGED_LABEL "=" OP_MANAGED_VALUE};
    kc_informer_opts po = {
        .transform = op_pod_transform, .name = "pods", .codec = &c->pack_codec, .page_size = 100};
    kc_informer_opts cmo = {.transform = cm_transform, .transform_ud = c, .name = "configmaps"};
    if ((rc = kc_informer_new(c->api, &c->loop, &KC_RES_CLUSTERPOLICIES, NULL, &ph, NULL,
                              &c->policies, err)) != KC_OK ||
        (rc = kc_informer_new(c->api, &c->loop, &KC_RES_NODES, NULL, &nh, &no, &c->nodes, err)) !=
            KC_OK ||
        (rc = kc_informer_new(c->api, &c->loop, &KC_RES_PODS, c->ns, &podh, &po, &c->pods, err)) !=
            KC_OK ||
        (rc = kc_informer_new(c->api, &c->loop, &KC_RES_CONFIGMAPS, c->ns, &cmh, &cmo,
                              &c->configmaps, err)) != KC_OK)
        goto out;
    for (size_t i = 0; i < c->n_kinds; i++) {
        op_kind *k = &c->kinds[i];
        int w = k->crd ? watch_crd(c, k, err) : 0;
        if (w < 0) {
            rc = err->code;
            goto out;
        }
        if (w > 0)
            continue; /* its informer starts once the CRD says it is served (on_crd_timer) */
        int sv = served(c, &k->res, err);
        if (sv < 0) {
            rc = err->code;
            goto out;
        }
        if (!sv) {
            kc_warn("kind not served by the API server; its objects are skipped", "kind=%s",
                    k->kind);
            continue;
        }
        if ((rc = kc_informer_new(c->api, &c->loop, &k->res, k->res.namespaced ? c->ns : NULL, &oh,
                                  &owned, &k->inf, err)) != KC_OK)
            goto out;
        if (!strcmp(k->kind, "DaemonSet"))
            c->daemonsets = k->inf;
        if ((rc = kc_informer_start(k->inf, err)) != KC_OK)
            goto out;
    }
    if (!c->daemonsets) {
        rc = kc_err_set(err, KC_EUNAVAILABLE, "the API server does not serve apps/v1 daemonsets");
        goto out;
    }
    if ((rc = kc_informer_start(c->policies, err)) != KC_OK ||
        (rc = kc_informer_start(c->nodes, err)) != KC_OK ||
        (rc = kc_informer_start(c->pods, err)) != KC_OK ||
        (rc = kc_informer_start(c->configmaps, err)) != KC_OK)
        goto out;
    uv_timer_start(&c->tick, on_tick, 20, 50);
    kc_info("operator started", "namespace=%s", c->ns);
    uv_run(&c->loop, UV_RUN_DEFAULT);
out:
    kc_workqueue_shutdown(c->q);
    /* The loop no longer runs: the pipe fails what it holds, so that workers waiting on an answer
     * return, and takes nothing more (a write a worker still hands over fails at once). */
    kc_pipe_stop(c->pipe);
    if (c->workers_started)
        for (int i = 0; i < c->n_workers; i++)
            pthread_join(c->workers[i], NULL);
    c->workers_started = false;
    kc_informer_free(c->policies);
    kc_informer_free(c->nodes);
    kc_informer_free(c->pods);
    kc_informer_free(c->configmaps);
    for (size_t i = 0; i < c->n_kinds; i++) {
        kc_informer_free(c->kinds[i].inf);
        kc_informer_free(c->kinds[i].crd_inf);
    }
    c->policies = c->nodes = c->pods = c->daemonsets = c->configmaps = NULL;
    for (size_t i = 0; i < c->n_kinds; i++) {
        c->kinds[i].inf = c->kinds[i].crd_inf = NULL;
        c->kinds[i].pending = false;
    }
    kc_pipe_free(c->pipe); /* its last callbacks used the queue and the maps */
    c->pipe = NULL;
    kc_client_detach_loop(c->api);
    atomic_store(&c->running, false);
    uv_close((uv_handle_t *)&c->stop_async, NULL);
    uv_close((uv_handle_t *)&c->tick, NULL);
    uv_close((uv_handle_t *)&c->trim, NULL);
    uv_close((uv_handle_t *)&c->crd_timer, NULL);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    uv_loop_close(&c->loop);
    return rc;
}

void op_controller_free(op_controller *c)
{
    if (!c)
        return;
    if (c->m_throttled) /* the registry outlives us: its renders must stop reading c */
        kc_metrics_remove_hook(c->o.metrics, sample_client, c);
    kc_event_recorder_free(c->events);
    kc_workqueue_free(c->q);
    kc_client_free(c->api);
    kc_map_free(c->results, op_node_result_free);
    kc_map_free(c->event_at, free);
    kc_map_free(c->admitted, NULL);
    kc_map_free(c->expect, op_expect_free);
    kc_map_free(c->mig_owner, op_mig_owner_free);
    kc_migparted_free(c->mig_mp);
    free(c->mig_cm_key);
    pthread_mutex_destroy(&c->mig_mu);
    kc_map_free(c->pods_by_node, free);
    kc_map_free(c->app_pods, NULL);
    kc_map_free(c->app_failing, free);
    json_decref(c->policy);
    json_decref(c->status_written);
    json_decref(c->last_spec);
    json_decref(c->ds_by_state);
    kc_pack_dict_free(c->pack);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->cm_mu);
    for (int i = 0; i < OP_CM_WANTED; i++)
        json_decref(c->cm_fetched[i]);
    pthread_rwlock_destroy(&c->kinds_mu);
    json_decref(c->optional);
    free(c->kinds);
    free(c->workers);
    free(c->ns);
    free(c);
}
