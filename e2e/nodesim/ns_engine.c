/* ns_engine: nodesim's runtime: one watch per kind (nodes, pods, ConfigMaps) feeding a work queue
 * of node names, reconcile workers, and the Lease heartbeat thread. */
#include "ns_engine_int.h"
#include "ns_init.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_log.h"
#include "kc_rest.h"

uint64_t ns_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void ns_simnode_init(ns_simnode *n)
{
    memset(n, 0, sizeof(*n));
    n->vals = kc_map_new();
    n->workloads = kc_map_new();
    n->wrote = kc_map_new();
    n->sent = kc_map_new();
    ns_fault_parse(NULL, 0, &n->faults, NULL);
    atomic_init(&n->hb_down, false);
    atomic_init(&n->registered, false);
    atomic_init(&n->clear_files, false);
}

void ns_simnode_clear(ns_simnode *n)
{
    free(n->fault_spec);
    kc_map_free(n->vals, free);
    kc_map_free(n->workloads, free);
    kc_map_free(n->wrote, NULL);
    kc_map_free(n->sent, free);
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

/* ---- pod index: node → pod keys ---- */

static void index_put(ns_engine *e, const char *node, const char *key)
{
    pthread_mutex_lock(&e->idx_mu);
    kc_map *set = kc_map_get(e->pods_by_node, node);
    if (!set && (set = kc_map_new()) && kc_map_put(e->pods_by_node, node, set, NULL) != KC_OK) {
        kc_map_free(set, NULL);
        set = NULL;
    }
    if (set)
        kc_map_put(set, key, (void *)1, NULL);
    pthread_mutex_unlock(&e->idx_mu);
}

static void index_del(ns_engine *e, const char *node, const char *key)
{
    pthread_mutex_lock(&e->idx_mu);
    kc_map *set = kc_map_get(e->pods_by_node, node);
    if (set) {
        kc_map_remove(set, key);
        if (kc_map_size(set) == 0)
            kc_map_free(kc_map_remove(e->pods_by_node, node), NULL);
    }
    pthread_mutex_unlock(&e->idx_mu);
}

json_t *ns_engine_node_pods(ns_engine *e, const char *node)
{
    json_t *out = json_array();
    if (!out)
        return NULL;
    char **keys = NULL;
    size_t nk = 0;
    pthread_mutex_lock(&e->idx_mu);
    kc_map *set = kc_map_get(e->pods_by_node, node);
    if (set && (keys = calloc(kc_map_size(set) + 1, sizeof(*keys)))) {
        size_t pos = 0;
        const char *k;
        while (kc_map_next(set, &pos, &k, NULL))
            keys[nk++] = strdup(k);
    }
    pthread_mutex_unlock(&e->idx_mu);
    for (size_t i = 0; i < nk; i++) {
        if (!keys[i])
            continue;
        char *slash = strchr(keys[i], '/');
        json_t *p = NULL;
        if (slash) {
            *slash = '\0';
            p = kc_informer_get(e->pods, keys[i], slash + 1);
        }
        if (p)
            json_array_append_new(out, p);
        free(keys[i]);
    }
    free(keys);
    return out;
}

static void enqueue(ns_engine *e, const char *node)
{
    if (node && kc_map_get(e->by_name, node))
        kc_workqueue_add(e->q, node);
}

/* ---- informer handlers (loop thread) ---- */

static void node_add(kc_informer *inf, const json_t *obj, void *ud)
{
    (void)inf;
    enqueue(ud, str_at(obj, "metadata", "name"));
}
static void node_update(kc_informer *inf, const json_t *o, const json_t *obj, void *ud)
{
    (void)inf;
    (void)o;
    enqueue(ud, str_at(obj, "metadata", "name"));
}
static void node_delete(kc_informer *inf, const json_t *obj, void *ud)
{
    (void)inf;
    ns_engine *e = ud;
    ns_simnode *n = kc_map_get(e->by_name, str_at(obj, "metadata", "name") ?: "");
    if (n) {
        /* Someone deleted a registered node: like a kubelet that is not restarted, nodesim does
         * not register it again. */
        kc_info("node deleted; not re-registering it", "node=%s", n->name);
        atomic_store(&n->registered, false);
        n->gone = true;
    }
}

/* Adds (or removes) a pod to its node's index entry and queues the node; pods on nodes that are
 * not ours are ignored. */
static void pod_index(ns_engine *e, const json_t *pod, bool add)
{
    const char *node = str_at(pod, "spec", "nodeName");
    if (!node || !kc_map_get(e->by_name, node))
        return;
    char *key = kc_informer_key(pod);
    if (key && add)
        index_put(e, node, key);
    else if (key)
        index_del(e, node, key);
    free(key);
    enqueue(e, node);
}

/* A pod began to stop (deletionTimestamp set, or deleted at once): its preStop hook runs, which
 * for the validators removes the node's ready files. */
static void pod_stopping(ns_engine *e, const json_t *pod)
{
    ns_simnode *n = kc_map_get(e->by_name, str_at(pod, "spec", "nodeName") ?: "");
    if (n && ns_pod_clears_ready_files(pod))
        atomic_store(&n->clear_files, true);
}

static bool deleting(const json_t *pod)
{
    return json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") != NULL;
}

static void pod_add(kc_informer *inf, const json_t *obj, void *ud)
{
    (void)inf;
    pod_index(ud, obj, true);
}
static void pod_update(kc_informer *inf, const json_t *o, const json_t *obj, void *ud)
{
    (void)inf;
    const char *old_node = str_at(o, "spec", "nodeName");
    const char *node = str_at(obj, "spec", "nodeName");
    if (old_node && (!node || strcmp(old_node, node)))
        pod_index(ud, o, false);
    if (deleting(obj) && !deleting(o))
        pod_stopping(ud, obj);
    pod_index(ud, obj, true);
}
static void pod_delete(kc_informer *inf, const json_t *obj, void *ud)
{
    (void)inf;
    if (!deleting(obj))
        pod_stopping(ud, obj);
    pod_index(ud, obj, false);
}

/* A ConfigMap (device-plugin or mig-parted config) changed: any node may read it. */
static void cm_any(ns_engine *e)
{
    if (!kc_informer_synced(e->nodes))
        return;
    for (size_t i = 0; i < e->n; i++)
        kc_workqueue_add(e->q, e->sn[i].name);
}
static void cm_add(kc_informer *inf, const json_t *obj, void *ud)
{
    (void)inf;
    (void)obj;
    cm_any(ud);
}
static void cm_update(kc_informer *inf, const json_t *o, const json_t *obj, void *ud)
{
    (void)inf;
    (void)o;
    (void)obj;
    cm_any(ud);
}

/* Keeps only what nodesim reads of a pod: metadata, spec, and status phase, conditions and
 * container statuses (which init container runs). */
static json_t *pod_transform(json_t *obj, const kc_resource *res, void *ud)
{
    (void)ud;
    obj = kc_informer_default_transform(obj, res, NULL);
    json_t *st = json_object_get(obj, "status");
    if (st) {
        json_t *keep =
            json_pack("{s:O*, s:O*, s:O*, s:O*}", "phase", json_object_get(st, "phase"),
                      "conditions", json_object_get(st, "conditions"), "containerStatuses",
                      json_object_get(st, "containerStatuses"), "initContainerStatuses",
                      json_object_get(st, "initContainerStatuses"));
        if (keep)
            json_object_set_new(obj, "status", keep);
    }
    return obj;
}

/* ---- workers ---- */

static void *worker(void *arg)
{
    ns_engine *e = arg;
    char *key;
    while (kc_workqueue_get(e->q, &key)) {
        ns_simnode *n = kc_map_get(e->by_name, key);
        long again = n ? ns_reconcile_node(e, n) : -1;
        kc_workqueue_done(e->q, key);
        if (again >= 0)
            kc_workqueue_add_after(e->q, key, again);
        free(key);
    }
    return NULL;
}

/* ---- heartbeats ---- */

void ns_engine_renew_lease(ns_engine *e, ns_simnode *n)
{
    char now[40];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t l = strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(now + l, sizeof(now) - l, ".%06ldZ", ts.tv_nsec / 1000);
    json_t *patch = json_pack("{s:{s:s}}", "spec", "renewTime", now);
    kc_err err;
    kc_code rc = kc_patch(e->api, &KC_RES_LEASES, "kube-node-lease", n->name, KC_PATCH_MERGE, patch,
                          NULL, NULL, &err);
    if (rc == KC_ENOTFOUND) {
        json_t *node = kc_informer_get(e->nodes, NULL, n->name);
        if (!node)
            kc_get(e->api, &KC_RES_NODES, NULL, n->name, &node, NULL);
        const char *uid = node ? str_at(json_object_get(node, "metadata"), "uid", NULL) : NULL;
        json_t *lease = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s}}", "apiVersion",
                                  "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
                                  n->name, "namespace", "kube-node-lease", "spec", "holderIdentity",
                                  n->name, "leaseDurationSeconds", 40, "renewTime", now);
        if (lease && uid)
            json_object_set_new(json_object_get(lease, "metadata"), "ownerReferences",
                                json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "v1", "kind",
                                          "Node", "name", n->name, "uid", uid));
        rc = kc_create(e->api, &KC_RES_LEASES, "kube-node-lease", lease, NULL, &err);
        json_decref(lease);
        json_decref(node);
        if (rc == KC_EALREADYEXISTS)
            rc = KC_OK;
    }
    if (rc != KC_OK)
        kc_warn("lease renewal failed", "node=%s err=\"%s\"", n->name, err.msg);
    json_decref(patch);
}

static void *heartbeat(void *arg)
{
    ns_engine *e = arg;
    uint64_t period = (uint64_t)e->o.heartbeat_s * 1000u;
    /* Spread renewals evenly over one period so thousands of nodes do not renew at once. */
    uint64_t start = ns_now_ms();
    for (size_t i = 0; i < e->n; i++)
        e->sn[i].next_hb_ms = start + period * i / (e->n ? e->n : 1);
    uint64_t next_boot_check = 0;
    while (!atomic_load(&e->stop)) {
        uint64_t now = ns_now_ms();
        if (now >= next_boot_check) {
            ns_answers_check_kubelet(e);
            next_boot_check = now + 2000;
        }
        for (size_t i = 0; i < e->n && !atomic_load(&e->stop); i++) {
            ns_simnode *n = &e->sn[i];
            if (now < n->next_hb_ms)
                continue;
            n->next_hb_ms = now + period;
            if (atomic_load(&n->registered) && !atomic_load(&n->hb_down))
                ns_engine_renew_lease(e, n);
        }
        usleep(100 * 1000);
    }
    return NULL;
}

/* ---- start-up and shutdown (loop thread) ---- */

static void write_ready(ns_engine *e)
{
    if (e->ready_written)
        return;
    size_t have = 0;
    for (size_t i = 0; i < e->n; i++)
        have += atomic_load(&e->sn[i].registered) ? 1 : 0;
    if (have < e->n)
        return;
    e->ready_written = true;
    kc_info("fleet registered", "nodes=%zu", e->n);
    if (e->o.ready_file) {
        FILE *f = fopen(e->o.ready_file, "w");
        if (f) {
            fprintf(f, "%zu\n", e->n);
            fclose(f);
        } else {
            kc_warn("cannot write the ready file", "path=%s", e->o.ready_file);
        }
    }
}

static void on_tick(uv_timer_t *t)
{
    ns_engine *e = t->data;
    if (!e->started_workers && kc_informer_synced(e->nodes) && kc_informer_synced(e->pods) &&
        kc_informer_synced(e->cms)) {
        e->started_workers = true;
        for (int i = 0; i < e->n_workers; i++)
            if (pthread_create(&e->workers[i], NULL, worker, e) != 0) {
                kc_error("cannot start a worker thread", "i=%d", i);
                e->n_workers = i;
                break;
            }
        if (pthread_create(&e->hb, NULL, heartbeat, e) != 0)
            kc_error("cannot start the heartbeat thread", "%s", "");
        for (size_t i = 0; i < e->n; i++)
            kc_workqueue_add(e->q, e->sn[i].name);
        kc_info("caches synced; reconciling the fleet", "nodes=%zu workers=%d", e->n, e->n_workers);
    }
    if (e->started_workers)
        write_ready(e);
}

static void on_signal(uv_signal_t *s, int signum)
{
    ns_engine *e = s->data;
    kc_info("stopping", "signal=%d", signum);
    atomic_store(&e->stop, true);
    uv_stop(s->loop);
}

static void close_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

kc_code ns_engine_run(const ns_engine_opts *opts, kc_err *err)
{
    ns_engine *e = calloc(1, sizeof(*e));
    kc_code rc = KC_OK;
    if (!e)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    e->o = *opts;
    ns_timings d = {800, 300, 200, 200, 300, 1000, 300000, 3000};
    e->t = opts->timings;
#define DEF(f)                                                                                     \
    if (e->t.f <= 0)                                                                               \
    e->t.f = d.f
    DEF(driver_load_ms);
    DEF(toolkit_ms);
    DEF(plugin_ms);
    DEF(gfd_ms);
    DEF(validation_ms);
    DEF(mig_apply_ms);
    DEF(mig_client_timeout_ms);
    DEF(reboot_ms);
#undef DEF
    if (e->o.heartbeat_s <= 0)
        e->o.heartbeat_s = 10;
    e->n_workers = opts->workers > 0 ? opts->workers : 4;
    pthread_mutex_init(&e->idx_mu, NULL);
    atomic_init(&e->stop, false);
    atomic_init(&e->answers_epoch, 0u);
    e->by_name = kc_map_new();
    e->pods_by_node = kc_map_new();
    e->n = opts->fleet->n_nodes;
    e->sn = calloc(e->n + 1, sizeof(*e->sn));
    e->workers = calloc((size_t)e->n_workers, sizeof(*e->workers));
    if (!e->by_name || !e->pods_by_node || !e->sn || !e->workers) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto free_engine;
    }
    size_t k = 0;
    for (size_t gi = 0; gi < opts->fleet->n_groups; gi++) {
        const ns_fleet_group *g = &opts->fleet->groups[gi];
        for (int j = 0; j < g->count; j++, k++) {
            ns_simnode *n = &e->sn[k];
            ns_simnode_init(n);
            n->g = g;
            n->index = (unsigned)k;
            ns_fleet_node_name(g, j, n->name, sizeof(n->name));
            if (kc_map_get(e->by_name, n->name)) {
                rc = kc_err_set(err, KC_EINVALID, "fleet: node %s is named twice", n->name);
                goto free_nodes;
            }
            kc_map_put(e->by_name, n->name, n, NULL);
        }
    }
    kc_client_opts co = {.qps = -1, .user_agent = "nodesim"};
    if ((rc = kc_client_new(opts->config, &co, &e->api, err)) != KC_OK ||
        (rc = kc_client_new(opts->config, &co, &e->watch, err)) != KC_OK)
        goto free_nodes;
    kc_workqueue_opts qo = {.qps = -1, .base_delay_ms = 50, .max_delay_ms = 30000};
    if ((rc = kc_workqueue_new(&qo, &e->q, err)) != KC_OK)
        goto free_clients;
    uv_loop_init(&e->loop);
    if ((rc = kc_client_attach_loop(e->watch, &e->loop, err)) != KC_OK)
        goto close_loop;
    kc_informer_handlers nh = {node_add, node_update, node_delete, e};
    kc_informer_handlers ph = {pod_add, pod_update, pod_delete, e};
    kc_informer_handlers ch = {cm_add, cm_update, cm_add, e};
    kc_informer_opts po = {.transform = pod_transform, .field_selector = "spec.nodeName!="};
    if ((rc = kc_informer_new(e->watch, &e->loop, &KC_RES_NODES, NULL, &nh, NULL, &e->nodes,
                              err)) != KC_OK ||
        (rc = kc_informer_new(e->watch, &e->loop, &KC_RES_PODS, NULL, &ph, &po, &e->pods, err)) !=
            KC_OK ||
        (rc = kc_informer_new(e->watch, &e->loop, &KC_RES_CONFIGMAPS, NULL, &ch, NULL, &e->cms,
                              err)) != KC_OK)
        goto free_informers;
    if ((rc = kc_informer_start(e->nodes, err)) != KC_OK ||
        (rc = kc_informer_start(e->pods, err)) != KC_OK ||
        (rc = kc_informer_start(e->cms, err)) != KC_OK)
        goto free_informers;
    uv_signal_init(&e->loop, &e->sigint);
    uv_signal_init(&e->loop, &e->sigterm);
    e->sigint.data = e->sigterm.data = e;
    uv_signal_start(&e->sigint, on_signal, SIGINT);
    uv_signal_start(&e->sigterm, on_signal, SIGTERM);
    uv_timer_init(&e->loop, &e->tick);
    e->tick.data = e;
    uv_timer_start(&e->tick, on_tick, 50, 100);
    kc_info("nodesim started", "nodes=%zu", e->n);

    uv_run(&e->loop, UV_RUN_DEFAULT);

    atomic_store(&e->stop, true);
    kc_workqueue_shutdown(e->q);
    if (e->started_workers) {
        for (int i = 0; i < e->n_workers; i++)
            pthread_join(e->workers[i], NULL);
        pthread_join(e->hb, NULL);
    }
free_informers:
    kc_informer_free(e->nodes);
    kc_informer_free(e->pods);
    kc_informer_free(e->cms);
    kc_client_detach_loop(e->watch);
close_loop:
    uv_walk(&e->loop, close_cb, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    kc_workqueue_free(e->q);
free_clients:
    kc_client_free(e->api);
    kc_client_free(e->watch);
free_nodes:
    for (size_t i = 0; i < e->n; i++)
        ns_simnode_clear(&e->sn[i]);
free_engine:
    if (e->pods_by_node) {
        size_t pos = 0;
        void *v;
        while (kc_map_next(e->pods_by_node, &pos, NULL, &v))
            kc_map_free(v, NULL);
        kc_map_free(e->pods_by_node, NULL);
    }
    kc_map_free(e->by_name, NULL);
    pthread_mutex_destroy(&e->idx_mu);
    free(e->sn);
    free(e->workers);
    free(e);
    return rc;
}
