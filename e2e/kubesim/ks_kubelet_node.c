/* ks_kubelet_node: the kubelet's nodes: registration with a full status, the node cache the pod
 * logic reads, and heartbeats (the kube-node-lease Lease and the conditions' lastHeartbeatTime). */
#include "ks_kubelet_int.h"

#include "kc_log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node status (conditions' lastHeartbeatTime) is reported every STATUS_EVERY lease
 * renewals: with the default 10 s lease that is the real kubelet's nodeStatusReportFrequency of
 * 5 minutes, and it keeps 5,000 nodes from flooding every node watcher with large objects. */
#define STATUS_EVERY 30

static atomic_uint node_ip_next;

void kl_node_free(void *v)
{
    kl_node *n = v;
    if (!n)
        return;
    free(n->name);
    json_decref(n->allocatable);
    json_decref(n->used);
    json_decref(n->alloc_limits);
    free(n);
}

static const char *str_at(const json_t *obj, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(obj, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return json_string_value(v);
}

static const json_t *find_cond(const json_t *node, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

static void set_default(json_t *obj, const char *key, json_t *val)
{
    if (!json_object_get(obj, key))
        json_object_set_new(obj, key, val);
    else
        json_decref(val);
}

static json_t *obj_at(json_t *parent, const char *key)
{
    json_t *o = json_object_get(parent, key);
    if (!json_is_object(o)) {
        o = json_object();
        json_object_set_new(parent, key, o);
    }
    return o;
}

static json_t *condition(const char *type, const char *status, const char *reason, const char *msg,
                         const char *now)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", type, "status", status,
                     "lastHeartbeatTime", now, "lastTransitionTime", now, "reason", reason,
                     "message", msg);
}

/* Fills whatever a real kubelet would have reported and obj lacks (never overwrites). */
static void fill_node(json_t *obj)
{
    json_t *meta = obj_at(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    json_t *labels = obj_at(meta, "labels");
    set_default(labels, "kubernetes.io/hostname", json_string(name));
    set_default(labels, "kubernetes.io/os", json_string("linux"));
    set_default(labels, "kubernetes.io/arch", json_string("amd64"));
    set_default(labels, "beta.kubernetes.io/os", json_string("linux"));
    set_default(labels, "beta.kubernetes.io/arch", json_string("amd64"));
    json_t *status = obj_at(obj, "status");
    json_t *cap = obj_at(status, "capacity");
    set_default(cap, "cpu", json_string("8"));
    set_default(cap, "memory", json_string("32Gi"));
    set_default(cap, "pods", json_string("110"));
    set_default(cap, "ephemeral-storage", json_string("100Gi"));
    set_default(cap, "hugepages-1Gi", json_string("0"));
    set_default(cap, "hugepages-2Mi", json_string("0"));
    if (!json_is_object(json_object_get(status, "allocatable")))
        json_object_set_new(status, "allocatable", json_deep_copy(cap));
    char now[32];
    ks_now_rfc3339(now);
    if (!json_is_array(json_object_get(status, "conditions")) ||
        json_array_size(json_object_get(status, "conditions")) == 0) {
        json_t *conds = json_array();
        json_array_append_new(conds,
                              condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                        "kubelet has sufficient memory available", now));
        json_array_append_new(conds, condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                                               "kubelet has no disk pressure", now));
        json_array_append_new(conds, condition("PIDPressure", "False", "KubeletHasSufficientPID",
                                               "kubelet has sufficient PID available", now));
        json_array_append_new(conds, condition("Ready", "True", "KubeletReady",
                                               "kubelet is posting ready status", now));
        json_object_set_new(status, "conditions", conds);
    }
    if (!json_is_array(json_object_get(status, "addresses"))) {
        unsigned n = atomic_fetch_add(&node_ip_next, 1);
        char ip[32];
        snprintf(ip, sizeof(ip), "10.0.%u.%u", (n / 250) % 256, n % 250 + 1);
        json_object_set_new(status, "addresses",
                            json_pack("[{s:s, s:s}, {s:s, s:s}]", "type", "InternalIP", "address",
                                      ip, "type", "Hostname", "address", name));
    }
    set_default(status, "daemonEndpoints",
                json_pack("{s:{s:i}}", "kubeletEndpoint", "Port", 10250));
    json_t *info = obj_at(status, "nodeInfo");
    /* Stable per-node identities derived from the name, as distinct machines would have. */
    char h[65], uuid[40];
    ks_proc_hash_hex(name ? name : "", "machine", 0, h);
    set_default(info, "machineID", json_sprintf("%.32s", h));
    snprintf(uuid, sizeof(uuid), "%.8s-%.4s-4%.3s-8%.3s-%.12s", h + 32, h + 40, h + 44, h + 47,
             h + 50);
    set_default(info, "systemUUID", json_string(uuid));
    ks_proc_hash_hex(name ? name : "", "boot", 0, h);
    snprintf(uuid, sizeof(uuid), "%.8s-%.4s-4%.3s-8%.3s-%.12s", h, h + 8, h + 12, h + 15, h + 18);
    set_default(info, "bootID", json_string(uuid));
    set_default(info, "kernelVersion", json_string("6.8.0-1015-kubesim"));
    set_default(info, "osImage", json_string("Ubuntu 22.04.4 LTS"));
    set_default(info, "containerRuntimeVersion", json_string("containerd://1.7.0"));
    set_default(info, "kubeletVersion", json_string("v1.32.0"));
    set_default(info, "kubeProxyVersion", json_string("v1.32.0"));
    set_default(info, "operatingSystem", json_string("linux"));
    set_default(info, "architecture", json_string("amd64"));
    set_default(status, "phase", json_string("Running"));
}

static kc_code renew_lease(ks_store *st, const ks_rtype *t, const char *node, kc_err *err);

kc_code ks_kubelet_add_node(ks_sim *sim, const json_t *node, kc_err *err)
{
    if (!sim || !sim->store || !json_is_object(node))
        return kc_err_set(err, KC_EARG, "ks_kubelet_add_node: a node object is required");
    const char *name = str_at(node, "metadata", "name", NULL);
    if (!name || !*name)
        return kc_err_set(err, KC_EINVALID, "ks_kubelet_add_node: metadata.name: Required value");
    ks_store *st = sim->store;
    const ks_rtype *t = ks_store_type(st, "", "v1", "nodes");
    if (!t)
        return kc_err_set(err, KC_EARG, "ks_kubelet_add_node: nodes are not a served type");
    json_t *obj = json_deep_copy(node);
    if (!obj)
        return kc_err_set(err, KC_ENOMEM, "out of memory registering node %s", name);
    json_object_set_new(obj, "apiVersion", json_string("v1"));
    json_object_set_new(obj, "kind", json_string("Node"));
    fill_node(obj);
    json_t *status = json_incref(json_object_get(obj, "status"));
    json_t *created = NULL;
    kc_code rc = ks_create(st, t, NULL, obj, &created, err);
    if (rc != KC_OK) {
        kc_err_prefix(err, "registering node %s", name);
        goto out;
    }
    /* The store may drop .status on create for types with a status subresource. */
    if (!find_cond(created, "Ready")) {
        json_t *upd = json_deep_copy(created);
        json_object_set(upd, "status", status);
        json_object_del(json_object_get(upd, "metadata"), "resourceVersion");
        rc = ks_update(st, t, NULL, upd, KS_WRITE_STATUS, NULL, err);
        if (rc != KC_OK) {
            kc_err_prefix(err, "writing the status of node %s", name);
            goto out;
        }
    }
    const ks_rtype *lt = ks_store_type(st, "coordination.k8s.io", "v1", "leases");
    if (lt && renew_lease(st, lt, name, err) != KC_OK)
        kc_warn("kubelet: node lease not created", "node=%s err=\"%s\"", name, err ? err->msg : "");
    rc = KC_OK;
out:
    json_decref(created);
    json_decref(status);
    return rc;
}

/* ---- the node cache ---- */

static bool node_ready(const json_t *obj)
{
    const json_t *c = find_cond(obj, "Ready");
    const char *s = c ? json_string_value(json_object_get(c, "status")) : NULL;
    /* A node without a Ready condition has not reported yet: not ready. */
    return s && strcmp(s, "True") == 0;
}

static void node_ip(const json_t *obj, char *buf, size_t size)
{
    size_t i;
    json_t *a;
    buf[0] = '\0';
    json_array_foreach(json_object_get(json_object_get(obj, "status"), "addresses"), i, a)
    {
        const char *t = json_string_value(json_object_get(a, "type"));
        const char *ad = json_string_value(json_object_get(a, "address"));
        if (t && ad && strcmp(t, "InternalIP") == 0) {
            snprintf(buf, size, "%s", ad);
            return;
        }
    }
}

/* Upserts the cache entry of obj; *was_new / *ready_changed tell what happened. */
/* What the node's device plugins offer (allocatable) and refuse in Allocate (nodesim publishes
 * it as an annotation). */
static void set_devices(kl_node *n, const json_t *obj)
{
    json_decref(n->allocatable);
    n->allocatable = json_incref(json_object_get(json_object_get(obj, "status"), "allocatable"));
    const char *limits = str_at(obj, "metadata", "annotations", KL_ALLOCATE_LIMITS);
    json_decref(n->alloc_limits);
    n->alloc_limits = limits ? json_loads(limits, 0, NULL) : NULL;
    if (n->alloc_limits && !json_is_object(n->alloc_limits)) {
        json_decref(n->alloc_limits);
        n->alloc_limits = NULL;
    }
}

/* A real kubelet's device manager is the source of the node's allocatable, so it never admits
 * against an older view than the API server shows. Here the node's devices are published by
 * nodesim and reach the kubelet on a watch thread of their own, which can run behind the pods'
 * watch: before refusing a pod the kubelet reads the node's devices as stored now. */
void kl_node_refresh_devices(struct ks_kubelet *kl, kl_node *n)
{
    json_t *obj = NULL;
    if (ks_get(kl->st, kl->t_nodes, NULL, n->name, &obj, NULL) != KC_OK)
        return;
    set_devices(n, obj);
    json_decref(obj);
}

static kl_node *node_put(struct ks_kubelet *kl, const json_t *obj, bool *was_new,
                         bool *ready_changed)
{
    const char *name = str_at(obj, "metadata", "name", NULL);
    *was_new = *ready_changed = false;
    if (!name)
        return NULL;
    kl_node *n = kc_map_get(kl->nodes, name);
    if (!n) {
        n = calloc(1, sizeof(*n));
        if (!n || !(n->name = strdup(name)) || !(n->used = json_object()) ||
            kc_map_put(kl->nodes, name, n, NULL) != KC_OK) {
            kl_node_free(n);
            return NULL;
        }
        *was_new = true;
        uint64_t hb =
            (uint64_t)(kl->sim->opts.node_heartbeat_s > 0 ? kl->sim->opts.node_heartbeat_s : 10) *
            1000;
        /* Spread first renewals over one period so thousands of nodes do not renew at once. */
        uint64_t h = 5381;
        for (const char *s = name; *s; s++)
            h = h * 33 + (unsigned char)*s;
        n->next_hb_ms = kl_now(kl) + h % hb;
    }
    const char *ext = str_at(obj, "metadata", "labels", "kubesim.io/external");
    const char *by = str_at(obj, "metadata", "annotations", "kubesim.io/managed-by");
    n->external = ext && strcmp(ext, "true") == 0;
    n->nodesim = by && strcmp(by, "nodesim") == 0;
    bool ready = node_ready(obj);
    *ready_changed = !*was_new && ready != n->ready;
    const char *boot = str_at(obj, "status", "nodeInfo", "bootID");
    n->rebooted = !*was_new && boot && n->boot_id[0] && strcmp(boot, n->boot_id) != 0;
    snprintf(n->boot_id, sizeof(n->boot_id), "%s", boot ? boot : "");
    n->ready = ready;
    node_ip(obj, n->ip, sizeof(n->ip));
    set_devices(n, obj);
    return n;
}

kl_node *kl_node_get(struct ks_kubelet *kl, const char *name)
{
    kl_node *n = kc_map_get(kl->nodes, name);
    if (n)
        return n;
    json_t *obj = NULL;
    if (ks_get(kl->st, kl->t_nodes, NULL, name, &obj, NULL) != KC_OK) {
        kc_map_put(kl->missing, name, (void *)1, NULL);
        return NULL;
    }
    bool was_new, changed;
    n = node_put(kl, obj, &was_new, &changed);
    json_decref(obj);
    return n;
}

static kc_code fill_status_cb(void *ud, json_t *obj, kc_err *err)
{
    (void)ud;
    (void)err;
    fill_node(obj);
    return KC_OK;
}

/* Pods that named this node before it existed are picked up now. */
static void adopt_pods(struct ks_kubelet *kl, const char *name)
{
    char sel[512];
    snprintf(sel, sizeof(sel), "spec.nodeName=%s", name);
    kc_field_selector *fs = NULL;
    if (kc_field_selector_parse(sel, &fs, NULL) != KC_OK)
        return;
    ks_list_opts lo = {.fields = fs};
    json_t *items = NULL;
    if (ks_list(kl->st, kl->t_pods, NULL, &lo, &items, NULL, NULL, NULL) == KC_OK) {
        size_t i;
        json_t *p;
        json_array_foreach(items, i, p) kl_pod_event(kl, KS_ADDED, p);
    }
    json_decref(items);
    kc_field_selector_free(fs);
}

void kl_node_event(struct ks_kubelet *kl, ks_event_type type, json_t *obj)
{
    const char *name = str_at(obj, "metadata", "name", NULL);
    if (!name)
        return;
    if (type == KS_DELETED) {
        kl_node_free(kc_map_remove(kl->nodes, name));
        kl_pull_node_gone(kl, name);
        return;
    }
    bool was_new, ready_changed;
    kl_node *n = node_put(kl, obj, &was_new, &ready_changed);
    if (!n)
        return;
    if (was_new && !n->external && !n->nodesim && !find_cond(obj, "Ready")) {
        kc_err e;
        if (ks_mutate(kl->st, kl->t_nodes, NULL, name, KS_WRITE_STATUS, fill_status_cb, NULL, NULL,
                      &e) != KC_OK)
            kc_warn("kubelet: cannot fill node status", "node=%s err=\"%s\"", name, e.msg);
    }
    if (kc_map_remove(kl->missing, name) && !n->external)
        adopt_pods(kl, name);
    if (n->rebooted) {
        n->rebooted = false;
        kl_pod_node_rebooted(kl, name);
    } else if (ready_changed) {
        kl_pod_node_ready_changed(kl, name);
    }
}

void kl_node_sync(struct ks_kubelet *kl, json_t *items)
{
    kc_map *seen = kc_map_new();
    size_t i;
    json_t *obj;
    json_array_foreach(items, i, obj)
    {
        kl_node_event(kl, KS_ADDED, obj);
        const char *name = str_at(obj, "metadata", "name", NULL);
        if (seen && name)
            kc_map_put(seen, name, (void *)1, NULL);
    }
    if (!seen)
        return;
    /* Nodes deleted while the watch was down (collected first: no map changes mid-walk). */
    char **gone = calloc(kc_map_size(kl->nodes) + 1, sizeof(*gone));
    size_t n = 0, pos = 0;
    const char *k;
    while (gone && kc_map_next(kl->nodes, &pos, &k, NULL))
        if (!kc_map_get(seen, k))
            gone[n++] = strdup(k);
    for (size_t j = 0; j < n; j++) {
        if (gone[j]) {
            kl_node_free(kc_map_remove(kl->nodes, gone[j]));
            kl_pull_node_gone(kl, gone[j]);
        }
        free(gone[j]);
    }
    free(gone);
    kc_map_free(seen, NULL);
}

/* ---- heartbeats ---- */

static kc_code lease_cb(void *ud, json_t *obj, kc_err *err)
{
    (void)err;
    const char *node = ud;
    char now[40];
    ks_now_rfc3339_micro(now);
    json_t *spec = obj_at(obj, "spec");
    json_object_set_new(spec, "holderIdentity", json_string(node));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(40));
    json_object_set_new(spec, "renewTime", json_string(now));
    return KC_OK;
}

static kc_code renew_lease(ks_store *st, const ks_rtype *t, const char *node, kc_err *err)
{
    kc_code rc =
        ks_mutate(st, t, "kube-node-lease", node, KS_WRITE_MAIN, lease_cb, (void *)node, NULL, err);
    if (rc != KC_ENOTFOUND)
        return rc;
    char now[40];
    ks_now_rfc3339_micro(now);
    json_t *lease = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:[{s:s, s:s, s:s, s:s}]}, s:{s:s, s:i, s:s}}", "apiVersion",
        "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", node, "namespace",
        "kube-node-lease", "ownerReferences", "apiVersion", "v1", "kind", "Node", "name", node,
        "uid", "", "spec", "holderIdentity", node, "leaseDurationSeconds", 40, "renewTime", now);
    if (!lease)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating the lease of %s", node);
    /* The owner reference lets the GC drop the lease with its node; it needs the node's uid. */
    json_t *nobj = NULL;
    const ks_rtype *nt = ks_store_type(st, "", "v1", "nodes");
    if (nt && ks_get(st, nt, NULL, node, &nobj, NULL) == KC_OK) {
        json_t *ref = json_array_get(
            json_object_get(json_object_get(lease, "metadata"), "ownerReferences"), 0);
        json_object_set(ref, "uid", json_object_get(json_object_get(nobj, "metadata"), "uid"));
    } else {
        json_object_del(json_object_get(lease, "metadata"), "ownerReferences");
    }
    json_decref(nobj);
    rc = ks_create(st, t, "kube-node-lease", lease, NULL, err);
    return rc == KC_EALREADYEXISTS ? KC_OK : rc;
}

static kc_code heartbeat_cb(void *ud, json_t *obj, kc_err *err)
{
    (void)ud;
    (void)err;
    char now[32];
    ks_now_rfc3339(now);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(obj, "status"), "conditions"), i, c)
        json_object_set_new(c, "lastHeartbeatTime", json_string(now));
    return KC_OK;
}

void kl_heartbeat(uv_timer_t *t)
{
    struct ks_kubelet *kl = t->data;
    uint64_t now = kl_now(kl);
    uint64_t period =
        (uint64_t)(kl->sim->opts.node_heartbeat_s > 0 ? kl->sim->opts.node_heartbeat_s : 10) * 1000;
    size_t pos = 0;
    kl_node *n;
    while (kc_map_next(kl->nodes, &pos, NULL, (void **)&n)) {
        if (n->external || n->nodesim || now < n->next_hb_ms)
            continue;
        n->next_hb_ms = now + period;
        kc_err e;
        if (kl->t_leases && renew_lease(kl->st, kl->t_leases, n->name, &e) != KC_OK)
            kc_debug("kubelet: lease renewal failed", "node=%s err=\"%s\"", n->name, e.msg);
        if (n->hb_count++ % STATUS_EVERY == STATUS_EVERY - 1 &&
            ks_mutate(kl->st, kl->t_nodes, NULL, n->name, KS_WRITE_STATUS, heartbeat_cb, NULL, NULL,
                      &e) != KC_OK)
            kc_debug("kubelet: node status heartbeat failed", "node=%s err=\"%s\"", n->name, e.msg);
    }
}
