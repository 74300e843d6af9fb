/* ks_ctl_cache: the controllers' cache of every object with its indexes (owners → dependents, pods
 * by node and namespace, services by namespace, unscheduled pods), and the dispatch that turns
 * each watch event into keys on the controllers' work queues, so no controller scans the world. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "ks_ctl_int.h"

static const struct {
    const char *group, *version, *resource;
} kind_gvr[KSC_K_COUNT] = {
    [KSC_K_NAMESPACE] = {"", "v1", "namespaces"},
    [KSC_K_NODE] = {"", "v1", "nodes"},
    [KSC_K_POD] = {"", "v1", "pods"},
    [KSC_K_SERVICE] = {"", "v1", "services"},
    [KSC_K_ENDPOINTS] = {"", "v1", "endpoints"},
    [KSC_K_DEPLOYMENT] = {"apps", "v1", "deployments"},
    [KSC_K_REPLICASET] = {"apps", "v1", "replicasets"},
    [KSC_K_DAEMONSET] = {"apps", "v1", "daemonsets"},
    [KSC_K_CREV] = {"apps", "v1", "controllerrevisions"},
    [KSC_K_CRD] = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"},
    [KSC_K_EVENT] = {"", "v1", "events"},
};

static ksc_kind kind_of(const ks_rtype *t)
{
    for (int k = 1; k < KSC_K_COUNT; k++)
        if (!strcmp(t->group ? t->group : "", kind_gvr[k].group) &&
            !strcmp(t->resource, kind_gvr[k].resource))
            return (ksc_kind)k;
    return KSC_K_OTHER;
}

/* ---- small index helpers (OOM leaves an index incomplete, logged; the resync repairs it) ---- */

static void idx_put(kc_map *m, const char *k, void *v)
{
    if (kc_map_put(m, k, v, NULL) != KC_OK)
        kc_warn("controllers: cache index update failed", "key=%s", k);
}

static void sub_put(kc_map *outer, const char *k, const char *subk, void *v)
{
    kc_map *in = kc_map_get(outer, k);
    if (!in) {
        in = kc_map_new();
        if (!in || kc_map_put(outer, k, in, NULL) != KC_OK) {
            kc_map_free(in, NULL);
            kc_warn("controllers: cache index update failed", "key=%s", k);
            return;
        }
    }
    idx_put(in, subk, v);
}

static void sub_del(kc_map *outer, const char *k, const char *subk)
{
    kc_map *in = kc_map_get(outer, k);
    if (!in)
        return;
    kc_map_remove(in, subk);
    if (kc_map_size(in) == 0) {
        kc_map_remove(outer, k);
        kc_map_free(in, NULL);
    }
}

static void free_submap(void *v)
{
    kc_map_free(v, NULL);
}

static void q(ks_controllers *c, int wi, const char *key)
{
    kc_workqueue_add(c->w[wi].q, key);
}

static void qf(ks_controllers *c, int wi, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void qf(ks_controllers *c, int wi, const char *fmt, ...)
{
    char key[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    q(c, wi, key);
}

/* Queues an owner's key a little later: the bursts of pod events a rollout makes then cost one
 * sync of the owner, not one per pod. Each sync looks at every pod of the owner, so owners of
 * many pods wait longer (1 ms more per 100 pods) and sync less often. */
#define KSC_BATCH_MS 15
static long batch_delay(size_t npods)
{
    return KSC_BATCH_MS + (long)(npods / 100);
}

static void qsoon(ks_controllers *c, int wi, const char *ns, const char *name, const char *uid)
{
    char key[512];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    kc_map *deps = kc_map_get(c->deps, uid);
    kc_workqueue_add_after(c->w[wi].q, key, batch_delay(deps ? kc_map_size(deps) : 0));
}

/* ---- entries ---- */

static void ent_clear_fields(ksc_ent *e)
{
    free(e->uid);
    e->uid = NULL;
    for (size_t i = 0; i < e->nowners; i++)
        free(e->owners[i]);
    free(e->owners);
    e->owners = NULL;
    e->nowners = 0;
    free(e->ctrl_uid);
    e->ctrl_uid = NULL;
    free(e->node);
    e->node = NULL;
    json_decref(e->req);
    e->req = NULL;
    json_decref(e->hports);
    e->hports = NULL;
    json_decref(e->alloc);
    e->alloc = NULL;
}

static void ent_free(void *v)
{
    ksc_ent *e = v;
    ent_clear_fields(e);
    json_decref(e->obj);
    free(e->key);
    free(e->nskey);
    free(e->ns);
    free(e->name);
    free(e);
}

/* Of the kinds no controller reads beyond the metadata (config maps, secrets, Events, custom
 * resources...), the cache keeps only what garbage collection needs. */
static json_t *trimmed(const json_t *obj)
{
    static const char *const keep[] = {
        "name",       "namespace",       "uid",        "resourceVersion",
        "generation", "ownerReferences", "finalizers", "deletionTimestamp"};
    json_t *meta = json_object(), *src = json_object_get(obj, "metadata");
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        json_t *v = json_object_get(src, keep[i]);
        if (v)
            json_object_set(meta, keep[i], v);
    }
    json_t *t = json_object();
    json_object_set(t, "apiVersion", json_object_get(obj, "apiVersion"));
    json_object_set(t, "kind", json_object_get(obj, "kind"));
    json_object_set_new(t, "metadata", meta);
    return t;
}

static void ent_fill(ksc_ent *e, json_t *obj)
{
    ent_clear_fields(e);
    json_decref(e->obj);
    e->obj = e->kind == KSC_K_OTHER || e->kind == KSC_K_EVENT ? trimmed(obj) : json_incref(obj);
    e->rv = ksc_rv(obj);
    e->uid = strdup(ksc_str(obj, "metadata.uid"));
    json_t *refs = ksc_at(obj, "metadata.ownerReferences");
    size_t n = json_is_array(refs) ? json_array_size(refs) : 0;
    if (n && (e->owners = calloc(n, sizeof *e->owners))) {
        for (size_t i = 0; i < n; i++) {
            const char *u = ksc_str(json_array_get(refs, i), "uid");
            if (*u && (e->owners[e->nowners] = strdup(u)))
                e->nowners++;
        }
    }
    const json_t *cref = ksc_controller_ref(obj);
    if (cref && *ksc_str(cref, "uid"))
        e->ctrl_uid = strdup(ksc_str(cref, "uid"));
    e->pending = false;
    if (e->kind == KSC_K_NODE) {
        e->alloc = ksc_node_allocatable(obj);
        e->acpu = json_integer_value(json_object_get(e->alloc, "cpu"));
        e->amem = json_integer_value(json_object_get(e->alloc, "memory"));
        json_t *p = json_object_get(e->alloc, "pods");
        e->apods = p ? json_integer_value(p) : -1;
        e->ready = ksc_node_ready(obj);
        e->unschedulable = json_is_true(ksc_at(obj, "spec.unschedulable"));
        e->tainted = false;
        size_t i;
        json_t *taint;
        json_array_foreach(ksc_at(obj, "spec.taints"), i, taint)
        {
            const char *eff = ksc_str(taint, "effect");
            e->tainted |= !strcmp(eff, "NoSchedule") || !strcmp(eff, "NoExecute");
        }
    }
    if (e->kind == KSC_K_POD) {
        const char *node = ksc_str(obj, "spec.nodeName");
        if (*node)
            e->node = strdup(node);
        const char *sched = ksc_str(obj, "spec.schedulerName");
        e->pending = !*node && !ksc_deleting(obj) && !ksc_pod_terminated(obj) &&
                     (!*sched || !strcmp(sched, "default-scheduler"));
        if (*node && !ksc_pod_terminated(obj)) {
            e->req = ksc_pod_requests(obj);
            e->hports = ksc_pod_host_ports(obj);
        }
    }
}

static size_t *ns_counter(ks_controllers *c, const char *ns)
{
    return kc_map_get(c->ns_count, ns);
}

static void usage_free(void *v)
{
    ksc_usage *u = v;
    json_decref(u->sum);
    json_decref(u->ports);
    free(u);
}

/* Adds (sign 1) or removes (-1) a bound pod's requests from its node's usage. */
static void usage_apply(ks_controllers *c, ksc_ent *e, int sign)
{
    if (!e->req || !e->node)
        return;
    ksc_usage *u = kc_map_get(c->node_usage, e->node);
    if (!u && sign > 0) {
        u = calloc(1, sizeof *u);
        if (!u || !(u->sum = json_object()) || !(u->ports = json_object()) ||
            kc_map_put(c->node_usage, e->node, u, NULL) != KC_OK) {
            if (u) {
                json_decref(u->sum);
                json_decref(u->ports);
            }
            free(u);
            kc_warn("controllers: cache index update failed", "node=%s", e->node);
            return;
        }
    }
    if (!u)
        return;
    const char *k;
    json_t *v;
    json_object_foreach(e->req, k, v)
    {
        long long cur = json_integer_value(json_object_get(u->sum, k));
        json_object_set_new(u->sum, k, json_integer(cur + sign * json_integer_value(v)));
    }
    u->cpu = json_integer_value(json_object_get(u->sum, "cpu"));
    u->mem = json_integer_value(json_object_get(u->sum, "memory"));
    long long rc = json_integer_value(json_object_get(e->req, "cpu"));
    long long rm = json_integer_value(json_object_get(e->req, "memory"));
    u->nz_cpu += sign * (rc > 0 ? rc : KSC_DEFAULT_CPU_MILLI);
    u->nz_mem += sign * (rm > 0 ? rm : KSC_DEFAULT_MEM_MILLI);
    size_t i;
    json_array_foreach(e->hports, i, v)
    {
        const char *hp = json_string_value(v);
        long long n = json_integer_value(json_object_get(u->ports, hp)) + sign;
        if (n > 0)
            json_object_set_new(u->ports, hp, json_integer(n));
        else
            json_object_del(u->ports, hp);
    }
    u->npods += sign;
    if (u->npods <= 0)
        usage_free(kc_map_remove(c->node_usage, e->node));
}

static void ent_index(ks_controllers *c, ksc_ent *e)
{
    usage_apply(c, e, 1);
    if (e->uid && *e->uid)
        idx_put(c->by_uid, e->uid, e);
    if (e->kind != KSC_K_OTHER)
        idx_put(c->kind_idx[e->kind], e->nskey, e);
    for (size_t i = 0; e->uid && *e->uid && i < e->nowners; i++)
        sub_put(c->deps, e->owners[i], e->uid, e);
    if (e->node)
        sub_put(c->pods_by_node, e->node, e->nskey, e);
    if (e->kind == KSC_K_POD)
        sub_put(c->pods_by_ns, e->ns, e->nskey, e);
    if (e->kind == KSC_K_SERVICE)
        sub_put(c->svcs_by_ns, e->ns, e->nskey, e);
    if (e->pending)
        idx_put(c->pending, e->nskey, e);
    if (*e->ns) {
        size_t *n = ns_counter(c, e->ns);
        if (!n && (n = calloc(1, sizeof *n)) && kc_map_put(c->ns_count, e->ns, n, NULL) != KC_OK) {
            free(n);
            n = NULL;
        }
        if (n)
            (*n)++;
    }
}

static void ent_unindex(ks_controllers *c, ksc_ent *e)
{
    usage_apply(c, e, -1);
    if (e->uid && *e->uid && kc_map_get(c->by_uid, e->uid) == e)
        kc_map_remove(c->by_uid, e->uid);
    if (e->kind != KSC_K_OTHER)
        kc_map_remove(c->kind_idx[e->kind], e->nskey);
    for (size_t i = 0; e->uid && *e->uid && i < e->nowners; i++)
        sub_del(c->deps, e->owners[i], e->uid);
    if (e->node)
        sub_del(c->pods_by_node, e->node, e->nskey);
    if (e->kind == KSC_K_POD)
        sub_del(c->pods_by_ns, e->ns, e->nskey);
    if (e->kind == KSC_K_SERVICE)
        sub_del(c->svcs_by_ns, e->ns, e->nskey);
    if (e->pending)
        kc_map_remove(c->pending, e->nskey);
    size_t *n = *e->ns ? ns_counter(c, e->ns) : NULL;
    if (n && --(*n) == 0)
        free(kc_map_remove(c->ns_count, e->ns));
}

/* ---- dispatch: which keys an event concerns ---- */

static bool is_deleting_uid(ks_controllers *c, const char *uid)
{
    ksc_ent *o = kc_map_get(c->by_uid, uid);
    return o && ksc_deleting(o->obj);
}

static void dispatch_gc(ks_controllers *c, ksc_ent *e, const json_t *old, const json_t *now,
                        bool deleted)
{
    if (!e->uid || !*e->uid)
        return;
    if (deleted) {
        /* The owner is gone: its dependents may be garbage now. */
        kc_map *in = kc_map_get(c->deps, e->uid);
        size_t pos = 0;
        const char *duid;
        while (in && kc_map_next(in, &pos, &duid, NULL))
            qf(c, KSC_W_GC, "d/%s", duid);
        /* A dependent is gone: an owner in foreground deletion may be done waiting. */
        for (size_t i = 0; i < e->nowners; i++)
            if (is_deleting_uid(c, e->owners[i]))
                qf(c, KSC_W_GC, "o/%s", e->owners[i]);
        return;
    }
    if (e->nowners && (!old || !kc_json_equal(ksc_at(old, "metadata.ownerReferences"),
                                              ksc_at(now, "metadata.ownerReferences"))))
        qf(c, KSC_W_GC, "d/%s", e->uid);
    if (ksc_deleting(now) &&
        (ksc_has_finalizer(now, "foregroundDeletion") || ksc_has_finalizer(now, "orphan")))
        qf(c, KSC_W_GC, "o/%s", e->uid);
    if (ksc_deleting(now) || (old && !kc_json_equal(ksc_at(old, "metadata.ownerReferences"),
                                                    ksc_at(now, "metadata.ownerReferences"))))
        for (size_t i = 0; i < e->nowners; i++)
            if (is_deleting_uid(c, e->owners[i]))
                qf(c, KSC_W_GC, "o/%s", e->owners[i]);
}

static void queue_controller(ks_controllers *c, const json_t *obj)
{
    const json_t *ref = obj ? ksc_controller_ref(obj) : NULL;
    if (!ref)
        return;
    const char *kind = ksc_str(ref, "kind"), *ns = ksc_str(obj, "metadata.namespace");
    const char *uid = ksc_str(ref, "uid");
    if (!strcmp(kind, "ReplicaSet"))
        qsoon(c, KSC_W_RS, ns, ksc_str(ref, "name"), uid);
    else if (!strcmp(kind, "DaemonSet"))
        qsoon(c, KSC_W_DS, ns, ksc_str(ref, "name"), uid);
    else if (!strcmp(kind, "Deployment"))
        qsoon(c, KSC_W_DEPLOY, ns, ksc_str(ref, "name"), uid);
}

bool ksc_selector_map_selects(const json_t *sel, const json_t *obj)
{
    if (!obj || !json_is_object(sel) || json_object_size(sel) == 0)
        return false;
    json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sel, k, v)
    {
        json_t *l = json_object_get(labels, k);
        if (!json_is_string(l) || !json_is_string(v) ||
            strcmp(json_string_value(l), json_string_value(v)))
            return false;
    }
    return true;
}

static void enqueue_kind_locked(ks_controllers *c, ksc_kind kind, int wi)
{
    size_t pos = 0;
    const char *k;
    while (kc_map_next(c->kind_idx[kind], &pos, &k, NULL))
        q(c, wi, k);
}

static void dispatch_pod(ks_controllers *c, ksc_ent *e, const json_t *old, const json_t *now,
                         bool deleted)
{
    queue_controller(c, now);
    if (old && !kc_json_equal(ksc_at(old, "metadata.ownerReferences"),
                              ksc_at(now, "metadata.ownerReferences")))
        queue_controller(c, old);
    /* As the real endpoints controller (GetServicesToUpdateOnPodChange): an added or deleted pod
     * wakes the Services selecting it; an update only when it can change an Endpoints object (its
     * readiness, IPs or deletion: every Service selecting it, old or new) or which Services
     * select it (its labels, hostname or subdomain: those gained or lost). */
    bool pod_changed = true, labels_changed = false;
    if (old && !deleted)
        ksc_pod_endpoints_changed(old, now, &pod_changed, &labels_changed);
    kc_map *svcs = kc_map_get(c->svcs_by_ns, e->ns), *nspods = kc_map_get(c->pods_by_ns, e->ns);
    long ep_delay = batch_delay(nspods ? kc_map_size(nspods) : 0);
    size_t pos = 0;
    const char *sk;
    void *sv;
    while ((pod_changed || labels_changed) && svcs && kc_map_next(svcs, &pos, &sk, &sv)) {
        const json_t *sel = ksc_at(((ksc_ent *)sv)->obj, "spec.selector");
        bool sel_now = ksc_selector_map_selects(sel, now),
             sel_old = ksc_selector_map_selects(sel, old);
        if (pod_changed ? (sel_now || sel_old) : sel_now != sel_old)
            kc_workqueue_add_after(c->w[KSC_W_EP].q, sk, ep_delay);
    }
    /* Pending pods go to the scheduler; so do deleted ones, for it to forget their backoff. */
    if (e->pending)
        q(c, KSC_W_SCHED, e->nskey);
    if (!deleted && e->node && !kc_map_get(c->kind_idx[KSC_K_NODE], e->node))
        q(c, KSC_W_PODGC, e->nskey);
    /* Resources freed on a node: unschedulable pods may fit now. */
    bool was_bound = old && *ksc_str(old, "spec.nodeName");
    if (was_bound && (deleted || (ksc_pod_terminated(now) && !ksc_pod_terminated(old))) &&
        kc_map_size(c->pending))
        kc_workqueue_add_after(c->w[KSC_W_SCHED].q, "*", 100);
}

static void dispatch_node(ks_controllers *c, ksc_ent *e, const json_t *old, const json_t *now,
                          bool deleted)
{
    if (deleted) {
        kc_map *pods = kc_map_get(c->pods_by_node, e->name);
        size_t pos = 0;
        const char *pk;
        while (pods && kc_map_next(pods, &pos, &pk, NULL))
            qf(c, KSC_W_PODGC, "!%s", pk); /* "!": its node was seen going away */
    }
    if (deleted || !old || ksc_node_changed(old, now)) {
        /* As the real controller does: an added or deleted node wakes every DaemonSet, an
         * updated one only those whose decision for it changed (a rollout's label patch wakes
         * one, not all, and none of them then walks the fleet for nothing). */
        size_t pos = 0;
        const char *k;
        void *v;
        while (kc_map_next(c->kind_idx[KSC_K_DAEMONSET], &pos, &k, &v)) {
            bool run0 = true, cont0 = true, run1, cont1;
            const json_t *ds = ((ksc_ent *)v)->obj;
            if (!deleted && old)
                ksc_ds_node_eligibility(ds, old, &run0, &cont0);
            ksc_ds_node_eligibility(ds, now, &run1, &cont1);
            if (deleted || !old || run0 != run1 || cont0 != cont1)
                q(c, KSC_W_DS, k);
        }
        if (kc_map_size(c->pending))
            kc_workqueue_add_after(c->w[KSC_W_SCHED].q, "*", 50);
    }
}

/* Whether a change to a controlled object is more than its status (which its own controller
 * writes: reacting to that would only sync again for nothing). */
static bool beyond_status(const json_t *old, const json_t *now, bool deleted)
{
    return deleted || !old ||
           ksc_int(old, "metadata.generation", 0) != ksc_int(now, "metadata.generation", 0) ||
           ksc_deleting(old) != ksc_deleting(now) ||
           !kc_json_equal(ksc_at(old, "metadata.ownerReferences"),
                          ksc_at(now, "metadata.ownerReferences"));
}

static bool crd_spec_changed(const json_t *old, const json_t *now)
{
    return !kc_json_equal(ksc_at(old, "spec"), ksc_at(now, "spec")) ||
           ksc_deleting(old) != ksc_deleting(now) ||
           !kc_json_equal(ksc_at(old, "metadata.finalizers"), ksc_at(now, "metadata.finalizers"));
}

static void dispatch(ks_controllers *c, ksc_ent *e, const json_t *old, const json_t *now,
                     bool deleted)
{
    dispatch_gc(c, e, old, now, deleted);
    switch (e->kind) {
    case KSC_K_NAMESPACE:
        if (!deleted && ksc_deleting(now))
            q(c, KSC_W_NS, e->nskey);
        break;
    case KSC_K_NODE:
        dispatch_node(c, e, old, now, deleted);
        break;
    case KSC_K_POD:
        dispatch_pod(c, e, old, now, deleted);
        break;
    case KSC_K_SERVICE:
        if (deleted)
            ksc_svc_deleted(c, now);
        q(c, KSC_W_EP, e->nskey);
        break;
    case KSC_K_ENDPOINTS:
        if (kc_map_get(c->kind_idx[KSC_K_SERVICE], e->nskey))
            q(c, KSC_W_EP, e->nskey);
        break;
    case KSC_K_DEPLOYMENT:
        if (beyond_status(old, now, deleted))
            q(c, KSC_W_DEPLOY, e->nskey);
        break;
    case KSC_K_REPLICASET:
        if (beyond_status(old, now, deleted))
            q(c, KSC_W_RS, e->nskey);
        queue_controller(c, now);
        break;
    case KSC_K_DAEMONSET:
        if (beyond_status(old, now, deleted))
            q(c, KSC_W_DS, e->nskey);
        break;
    case KSC_K_CREV:
        queue_controller(c, now);
        break;
    case KSC_K_CRD:
        if (deleted) {
            void *prev = NULL;
            if (kc_map_put(c->crd_tombstones, e->name, json_incref((json_t *)now), &prev) != KC_OK)
                json_decref((json_t *)now);
            json_decref(prev);
        }
        /* Status-only changes are ks_crd_sync's own writes: reacting would loop. */
        if (deleted || !old || crd_spec_changed(old, now))
            q(c, KSC_W_CRD, e->nskey);
        break;
    default:
        break;
    }
    /* The last object of a terminating namespace is gone: the namespace can go. */
    if (deleted && *e->ns && !ns_counter(c, e->ns)) {
        ksc_ent *ns = kc_map_get(c->kind_idx[KSC_K_NAMESPACE], e->ns);
        if (ns && ksc_deleting(ns->obj))
            q(c, KSC_W_NS, e->ns);
    }
}

void ksc_cache_apply(ks_controllers *c, const ks_event *ev)
{
    json_t *obj = ev->object;
    const ks_rtype *t = ev->rtype;
    if (!obj || ev->type == KS_BOOKMARK)
        return;
    if (!t) {
        /* Writes the store made itself carry no type: find it from apiVersion/kind. */
        const char *av = ksc_str(obj, "apiVersion"), *slash = strchr(av, '/');
        char group[256] = "";
        if (slash)
            snprintf(group, sizeof group, "%.*s", (int)(slash - av), av);
        t = ks_store_type_by_kind(c->st, group, slash ? slash + 1 : av, ksc_str(obj, "kind"));
        if (!t)
            return;
    }
    ksc_kind kind = kind_of(t);
    if (kind != KSC_K_OTHER)
        c->types[kind] = t;
    const char *ns = t->namespaced ? ksc_str(obj, "metadata.namespace") : "";
    const char *name = ksc_str(obj, "metadata.name");
    char *key = NULL;
    if (asprintf(&key, "%s/%s/%s/%s", t->group ? t->group : "", t->resource, ns, name) < 0)
        return;
    ksc_ent *e = kc_map_get(c->objs, key);
    if (ev->type == KS_DELETED) {
        if (e) {
            ent_unindex(c, e);
            kc_map_remove(c->objs, key);
            dispatch(c, e, e->obj, obj, true);
            ent_free(e);
        }
        free(key);
        return;
    }
    if (e && ksc_rv(obj) < e->rv) { /* a replay older than what we hold */
        free(key);
        return;
    }
    json_t *old = NULL;
    if (e) {
        old = json_incref(e->obj);
        ent_unindex(c, e);
    } else {
        e = calloc(1, sizeof *e);
        if (!e)
            goto out;
        e->kind = kind;
        e->ns = strdup(ns);
        e->name = strdup(name);
        e->key = strdup(key);
        if (asprintf(&e->nskey, *ns ? "%s/%s" : "%s%s", ns, name) < 0)
            e->nskey = NULL;
        if (!e->ns || !e->name || !e->key || !e->nskey ||
            kc_map_put(c->objs, key, e, NULL) != KC_OK) {
            ent_free(e);
            goto out;
        }
    }
    e->t = t;
    ent_fill(e, obj);
    ent_index(c, e);
    dispatch(c, e, old, obj, false);
out:
    json_decref(old);
    free(key);
}

/* ---- lifecycle ---- */

static void tomb_free(void *v)
{
    json_decref(v);
}

kc_code ksc_cache_init(ks_controllers *c, kc_err *err)
{
    c->objs = kc_map_new();
    c->by_uid = kc_map_new();
    c->deps = kc_map_new();
    c->pods_by_node = kc_map_new();
    c->ns_count = kc_map_new();
    c->svcs_by_ns = kc_map_new();
    c->pending = kc_map_new();
    c->pods_by_ns = kc_map_new();
    c->crd_tombstones = kc_map_new();
    c->node_usage = kc_map_new();
    bool ok = c->objs && c->by_uid && c->deps && c->pods_by_node && c->ns_count && c->svcs_by_ns &&
              c->pending && c->pods_by_ns && c->crd_tombstones && c->node_usage;
    for (int k = 0; k < KSC_K_COUNT; k++)
        ok = (c->kind_idx[k] = kc_map_new()) && ok;
    if (!ok)
        return kc_err_set(err, KC_ENOMEM, "controllers: out of memory creating the cache");
    return KC_OK;
}

void ksc_cache_free(ks_controllers *c)
{
    for (int k = 0; k < KSC_K_COUNT; k++) {
        kc_map_free(c->kind_idx[k], NULL);
        c->kind_idx[k] = NULL;
    }
    kc_map_free(c->by_uid, NULL);
    kc_map_free(c->deps, free_submap);
    kc_map_free(c->pods_by_node, free_submap);
    kc_map_free(c->svcs_by_ns, free_submap);
    kc_map_free(c->pods_by_ns, free_submap);
    kc_map_free(c->ns_count, free);
    kc_map_free(c->pending, NULL);
    kc_map_free(c->crd_tombstones, tomb_free);
    kc_map_free(c->node_usage, usage_free);
    c->node_usage = NULL;
    kc_map_free(c->objs, ent_free);
    c->by_uid = c->deps = c->pods_by_node = c->svcs_by_ns = c->pods_by_ns = NULL;
    c->ns_count = c->pending = c->crd_tombstones = c->objs = NULL;
}

void ksc_cache_reset(ks_controllers *c)
{
    ksc_cache_free(c);
    if (ksc_cache_init(c, NULL) != KC_OK)
        kc_error("controllers: out of memory rebuilding the cache", NULL);
}

/* ---- reads ---- */

json_t *ksc_get(ks_controllers *c, ksc_kind kind, const char *nskey)
{
    pthread_mutex_lock(&c->mu);
    ksc_ent *e = c->kind_idx[kind] ? kc_map_get(c->kind_idx[kind], nskey) : NULL;
    json_t *r = e ? json_incref(e->obj) : NULL;
    pthread_mutex_unlock(&c->mu);
    return r;
}

json_t *ksc_by_uid(ks_controllers *c, const char *uid, const ks_rtype **t)
{
    pthread_mutex_lock(&c->mu);
    ksc_ent *e = c->by_uid ? kc_map_get(c->by_uid, uid) : NULL;
    json_t *r = e ? json_incref(e->obj) : NULL;
    if (t)
        *t = e ? e->t : NULL;
    pthread_mutex_unlock(&c->mu);
    return r;
}

static json_t *collect(kc_map *m, ksc_kind kind, const char *ctrl_uid, const json_t *selector)
{
    json_t *arr = json_array();
    size_t pos = 0;
    void *v;
    while (arr && m && kc_map_next(m, &pos, NULL, &v)) {
        ksc_ent *e = v;
        if (kind != KSC_K_OTHER && e->kind != kind)
            continue;
        if (ctrl_uid && (!e->ctrl_uid || strcmp(e->ctrl_uid, ctrl_uid)))
            continue;
        if (selector && !ksc_selector_map_selects(selector, e->obj))
            continue;
        json_array_append(arr, e->obj);
    }
    return arr;
}

json_t *ksc_dependents(ks_controllers *c, const char *owner_uid, ksc_kind kind, bool ctrl_only)
{
    pthread_mutex_lock(&c->mu);
    json_t *r = collect(c->deps ? kc_map_get(c->deps, owner_uid) : NULL, kind,
                        ctrl_only ? owner_uid : NULL, NULL);
    pthread_mutex_unlock(&c->mu);
    return r;
}

size_t ksc_dependent_count(ks_controllers *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    kc_map *m = c->deps ? kc_map_get(c->deps, uid) : NULL;
    size_t n = m ? kc_map_size(m) : 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

json_t *ksc_all(ks_controllers *c, ksc_kind kind)
{
    pthread_mutex_lock(&c->mu);
    json_t *r = collect(c->kind_idx[kind], KSC_K_OTHER, NULL, NULL);
    pthread_mutex_unlock(&c->mu);
    return r;
}

json_t *ksc_pods_selected(ks_controllers *c, const char *ns, const json_t *selector)
{
    pthread_mutex_lock(&c->mu);
    json_t *r =
        collect(c->pods_by_ns ? kc_map_get(c->pods_by_ns, ns) : NULL, KSC_K_OTHER, NULL, selector);
    pthread_mutex_unlock(&c->mu);
    return r;
}

void ksc_enqueue_all(ks_controllers *c, ksc_kind kind, int wi)
{
    pthread_mutex_lock(&c->mu);
    if (c->kind_idx[kind])
        enqueue_kind_locked(c, kind, wi);
    pthread_mutex_unlock(&c->mu);
}

json_t *ksc_pending_keys(ks_controllers *c)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&c->mu);
    size_t pos = 0;
    const char *k;
    while (arr && c->pending && kc_map_next(c->pending, &pos, &k, NULL))
        json_array_append_new(arr, json_string(k));
    pthread_mutex_unlock(&c->mu);
    return arr;
}

void ksc_lock(ks_controllers *c)
{
    pthread_mutex_lock(&c->mu);
}

void ksc_unlock(ks_controllers *c)
{
    pthread_mutex_unlock(&c->mu);
}

size_t ksc_nodes_locked(ks_controllers *c, const ksc_ent ***out)
{
    kc_map *m = c->kind_idx[KSC_K_NODE];
    size_t n = m ? kc_map_size(m) : 0, i = 0, pos = 0;
    *out = calloc(n ? n : 1, sizeof **out);
    void *v;
    while (*out && m && kc_map_next(m, &pos, NULL, &v))
        (*out)[i++] = v;
    return *out ? i : 0;
}

const ksc_usage *ksc_usage_locked(ks_controllers *c, const char *node)
{
    return c->node_usage ? kc_map_get(c->node_usage, node) : NULL;
}

const ks_rtype *ksc_type(ks_controllers *c, ksc_kind kind)
{
    pthread_mutex_lock(&c->mu);
    const ks_rtype *t = c->types[kind];
    pthread_mutex_unlock(&c->mu);
    if (t || kind == KSC_K_OTHER)
        return t;
    t = ks_store_type(c->st, kind_gvr[kind].group, kind_gvr[kind].version, kind_gvr[kind].resource);
    if (t) {
        pthread_mutex_lock(&c->mu);
        c->types[kind] = t;
        pthread_mutex_unlock(&c->mu);
    }
    return t;
}
