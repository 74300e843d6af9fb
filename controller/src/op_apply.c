/* op_apply: the policy reconciler. Picks the active ClusterPolicy, marks the others ignored,
 * renders every state and applies what changed (creates, updates whose content hash differs,
 * deletes of objects no longer rendered), keeps the finalizer, and on deletion removes the
 * operands, the validation pods and, once the MIG manager is gone, the node labels the operator
 * and its MIG manager added before letting the ClusterPolicy go. */
#include "op_controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "kc_log.h"
#include "op_policy.h"

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static const char *obj_hash(const json_t *obj)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(obj, "metadata"), "annotations"), OP_HASH_ANNOTATION));
}

static bool has_finalizer(const json_t *obj)
{
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "finalizers"), i,
                       f) if (json_string_value(f) &&
                              !strcmp(json_string_value(f), OP_FINALIZER)) return true;
    return false;
}

/* Sets the finalizer list with or without ours (merge patch of the whole list, guarded by the
 * resourceVersion so a concurrent change is not lost). */
static kc_code set_finalizer(op_controller *c, const json_t *obj, bool on, kc_err *err)
{
    json_t *list = json_array();
    bool oom = !list;
    size_t i;
    const json_t *f;
    /* The whole list is written: one lost entry would drop another controller's finalizer. */
    json_array_foreach(
        json_object_get(json_object_get(obj, "metadata"), "finalizers"), i,
        f) if ((!json_string_value(f) || strcmp(json_string_value(f), OP_FINALIZER)) &&
               json_array_append(list, (json_t *)f)) oom = true;
    if (on && json_array_append_new(list, json_string(OP_FINALIZER)))
        oom = true;
    if (oom) {
        json_decref(list);
        return kc_err_set(err, KC_ENOMEM, "out of memory building the finalizer list");
    }
    json_t *patch = json_pack("{s:{s:o, s:O}}", "metadata", "finalizers", list, "resourceVersion",
                              json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (!patch)
        return kc_err_set(err, KC_ENOMEM, "out of memory building the finalizer patch");
    kc_code rc = kc_patch(c->api, &KC_RES_CLUSTERPOLICIES, NULL, str_at(obj, "metadata", "name"),
                          KC_PATCH_MERGE, patch, NULL, NULL, err);
    json_decref(patch);
    return rc;
}

/* Writes status.state=ignored on a ClusterPolicy that is not the active one. */
static void mark_ignored(op_controller *c, const json_t *obj, const char *active)
{
    const char *state = str_at(json_object_get(obj, "status"), "state", NULL);
    if (state && !strcmp(state, "ignored"))
        return;
    char msg[512];
    snprintf(msg, sizeof(msg),
             "only one ClusterPolicy is active: %s (the oldest); this one stays ignored, also "
             "once that one is deleted (delete and re-create it to make it active)",
             active);
    json_t *patch =
        json_pack("{s:{s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status", "state", "ignored",
                  "namespace", c->ns, "conditions", "type", "Ready", "status", "False", "reason",
                  "Ignored", "message", msg, "lastTransitionTime", "1970-01-01T00:00:00Z");
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(patch, "status"), "conditions"), 0),
        "lastTransitionTime", json_string(now));
    kc_patch_opts po = {.subresource = "status"};
    kc_err err;
    if (kc_patch(c->api, &KC_RES_CLUSTERPOLICIES, NULL, str_at(obj, "metadata", "name"),
                 KC_PATCH_MERGE, patch, &po, NULL, &err) == KC_OK) {
        kc_info("ClusterPolicy ignored", "name=%s active=%s", str_at(obj, "metadata", "name"),
                active);
        kc_event_record(c->events, obj, "Warning", "Ignored", "%s", msg);
    }
    json_decref(patch);
}

/* The live object for a rendered one (new reference) or NULL. */
static json_t *live_of(op_controller *c, op_kind *k, const json_t *obj)
{
    if (!k->inf)
        return NULL;
    return kc_informer_get(k->inf, k->res.namespaced ? c->ns : NULL,
                           str_at(obj, "metadata", "name"));
}

/* Creates or updates one rendered object; returns 1 when it wrote, 0 when nothing changed, -1 on
 * error (err set). */
/* Whether every field of want has the same value in have (arrays element by element, same
 * length): the live object still holds what we applied, whatever the server defaulted around
 * it. A null in want stands for "absent". */
static bool holds(const json_t *want, const json_t *have)
{
    if (json_is_null(want))
        return !have || json_is_null(have);
    if (!have || json_typeof(want) != json_typeof(have))
        return json_is_number(want) && json_is_number(have) && json_equal(want, have);
    if (json_is_object(want)) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)want, key, v)
        {
            if (!holds(v, json_object_get(have, key)))
                return false;
        }
        return true;
    }
    if (json_is_array(want)) {
        if (json_array_size(want) != json_array_size(have))
            return false;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!holds(json_array_get(want, i), json_array_get(have, i)))
                return false;
        return true;
    }
    return json_equal(want, have);
}

/* Applies obj with server-side apply (field manager gpu-operator, forced: the fields we set are
 * ours) when it is absent, its spec hash changed, or someone changed a field we set (an edit is
 * put back). Returns 1 when it wrote, 0 when nothing was due, -1 on failure (err). */
static int apply_one(op_controller *c, op_kind *k, json_t *obj, kc_err *err)
{
    const char *ns = k->res.namespaced ? c->ns : NULL;
    const char *name = str_at(obj, "metadata", "name");
    json_t *live = live_of(c, k, obj);
    if (!live && k->inf && kc_informer_has(k->inf, ns, name)) {
        /* Cached but could not be read: applying blind would revert nothing and hide drift. */
        kc_err_set(err, KC_ENOMEM, "out of memory reading %s %s from the cache", k->kind, name);
        return -1;
    }
    const char *why = NULL;
    if (!live) {
        why = "absent";
    } else {
        const char *lh = obj_hash(live), *rh = obj_hash(obj);
        if (!lh || !rh || strcmp(lh, rh) != 0)
            why = "changed";
        else if (!holds(obj, live))
            why = "edited outside the operator";
    }
    if (!why) {
        json_decref(live);
        return 0;
    }
    kc_patch_opts po = {.field_manager = OP_FIELD_MANAGER, .force = true};
    kc_code rc = kc_patch(c->api, &k->res, ns, name, KC_PATCH_APPLY, obj, &po, NULL, err);
    if (rc == KC_OK)
        kc_info(live ? "updated" : "created", "kind=%s name=%s why=\"%s\"", k->kind, name, why);
    json_decref(live);
    return rc == KC_OK ? 1 : -1;
}

/* Deletes every object we own that is not in `keep` (set of "Kind/name"); with keep NULL,
 * everything we own. Returns how many objects remain to be deleted (still in the caches); *failed
 * is set when a delete (or listing a cache) failed. */
static size_t delete_stale(op_controller *c, const json_t *keep, bool *failed)
{
    size_t left = 0;
    for (size_t i = 0; i < c->n_kinds; i++) {
        op_kind *k = &c->kinds[i];
        if (!k->inf)
            continue;
        json_t *items = kc_informer_list(k->inf);
        if (!items) {
            *failed = true;
            left++; /* unknown: keep the finalizer */
            continue;
        }
        size_t j;
        const json_t *o;
        json_array_foreach(items, j, o)
        {
            const char *name = str_at(o, "metadata", "name");
            char id[400];
            snprintf(id, sizeof(id), "%s/%s", k->kind, name ? name : "");
            if (keep && json_object_get(keep, id))
                continue;
            left++;
            if (json_object_get(json_object_get(o, "metadata"), "deletionTimestamp"))
                continue;
            kc_err err;
            kc_code rc = kc_delete(c->api, &k->res, k->res.namespaced ? c->ns : NULL, name,
                                   KC_PROPAGATE_BACKGROUND, NULL, &err);
            if (rc == KC_OK) {
                kc_info("deleted", "kind=%s name=%s", k->kind, name);
            } else if (rc != KC_ENOTFOUND) {
                kc_warn("delete failed", "kind=%s name=%s err=\"%s\"", k->kind, name, err.msg);
                *failed = true;
            }
        }
        json_decref(items);
    }
    return left;
}

/* Removes the labels the operator added from every node; returns the nodes still carrying some. */
static size_t unlabel_nodes(op_controller *c)
{
    json_t *nodes = kc_informer_list(c->nodes);
    size_t left = nodes ? 0 : 1; /* a cache that cannot be listed: not done */
    size_t i;
    const json_t *n;
    json_array_foreach(nodes, i, n)
    {
        const json_t *labels = json_object_get(json_object_get(n, "metadata"), "labels");
        const char *mig_default = json_string_value(json_object_get(
            json_object_get(json_object_get(n, "metadata"), "annotations"), OP_MIG_DEFAULT_ANN));
        json_t *patch = json_object();
        json_t *ann = json_object();
        if (!patch || !ann) {
            left++;
            json_decref(patch);
            json_decref(ann);
            continue;
        }
        if (mig_default) {
            /* The MIG config the operator set as the default goes; one a user set stays. */
            const char *cur = json_string_value(json_object_get(labels, "nvidia.com/mig.config"));
            if (cur && !strcmp(cur, mig_default))
                json_object_set_new(patch, "nvidia.com/mig.config", json_null());
            json_object_set_new(ann, OP_MIG_DEFAULT_ANN, json_null());
        }
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)labels, k, v)
        {
            const char *val = json_string_value(v);
            /* Only the operator's own "true": a user's "false" stays. */
            bool deploy = !strncmp(k, "nvidia.com/gpu.deploy.", 22) &&
                          strcmp(k, "nvidia.com/gpu.deploy.operands") && val &&
                          !strcmp(val, "true");
            /* The MIG manager's pauses and state go too: with the MIG manager gone, no one
             * would ever set them back. */
            bool paused =
                !strncmp(k, "nvidia.com/gpu.deploy.", 22) && val && !strcmp(val, OP_PAUSED_MIG);
            if (deploy || paused || !strcmp(k, "nvidia.com/gpu.present") ||
                !strcmp(k, "nvidia.com/mig.config.state") ||
                !strcmp(k, "nvidia.com/gpu-driver-upgrade-state"))
                json_object_set_new(patch, k, json_null());
        }
        /* A node a driver upgrade left cordoned is uncordoned, as the upgrade would have. */
        json_t *spec = NULL;
        if (json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"),
                            OP_CORDONED_ANN)) {
            json_object_set_new(ann, OP_CORDONED_ANN, json_null());
            spec = json_pack("{s:b}", "unschedulable", 0);
        }
        if (json_object_size(patch) || json_object_size(ann)) {
            left++;
            json_t *body = json_pack("{s:{s:O, s:O}, s:o*}", "metadata", "labels", patch,
                                     "annotations", ann, "spec", spec);
            spec = NULL;
            kc_err err;
            if (!body)
                kc_warn("cannot remove node labels", "node=%s err=\"out of memory\"",
                        str_at(n, "metadata", "name"));
            else if (kc_patch(c->api, &KC_RES_NODES, NULL, str_at(n, "metadata", "name"),
                              KC_PATCH_MERGE, body, NULL, NULL, &err) != KC_OK)
                kc_warn("cannot remove node labels", "node=%s err=\"%s\"",
                        str_at(n, "metadata", "name"), err.msg);
            json_decref(body);
        }
        json_decref(spec);
        json_decref(patch);
        json_decref(ann);
    }
    json_decref(nodes);
    return left;
}

/* The MIG manager's pods still running: it writes the MIG state and pauses on the nodes, so the
 * labels are removed once it is gone. A pod past its deletion deadline (on an unreachable node)
 * no longer counts. */
static size_t mig_manager_pods(op_controller *c)
{
    json_t *pods = kc_informer_list(c->pods);
    size_t left = pods ? 0 : 1; /* a cache that cannot be listed: not done */
    time_t now = time(NULL);
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        const json_t *m = json_object_get(p, "metadata");
        const char *app = str_at(json_object_get(m, "labels"), "app", NULL);
        if (!app || strcmp(app, op_stage_daemonset(OP_STAGE_MIG)))
            continue;
        const char *del = str_at(m, "deletionTimestamp", NULL);
        struct tm tm = {0};
        const char *end = del ? strptime(del, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        if (!del || !end || timegm(&tm) >= now)
            left++;
    }
    json_decref(pods);
    return left;
}

/* Validation pods are owned by the ClusterPolicy; they go with the rest on deletion. */
static size_t delete_validation_pods(op_controller *c)
{
    json_t *pods = kc_informer_list(c->pods);
    size_t left = pods ? 0 : 1; /* a cache that cannot be listed: not done */
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p)
    {
        if (!json_object_get(json_object_get(json_object_get(p, "metadata"), "labels"),
                             OP_VAL_STAGE_LABEL))
            continue;
        left++;
        if (!json_object_get(json_object_get(p, "metadata"), "deletionTimestamp"))
            kc_delete(c->api, &KC_RES_PODS, c->ns, str_at(p, "metadata", "name"),
                      KC_PROPAGATE_BACKGROUND, NULL, NULL);
    }
    json_decref(pods);
    return left;
}

static void set_active(op_controller *c, const json_t *obj)
{
    pthread_mutex_lock(&c->mu);
    json_decref(c->policy);
    c->policy = obj ? json_deep_copy(obj) : NULL;
    pthread_mutex_unlock(&c->mu);
}

static bool queue_node_key(const char *name, const json_t *n, void *ud)
{
    (void)n;
    char key[300];
    snprintf(key, sizeof(key), OP_NODE_PREFIX "%s", name);
    op_enqueue(ud, key, 0);
    return true;
}

/* Queues every node (the spec changed what gating wants). */
static void fan_out_nodes(op_controller *c)
{
    kc_informer_foreach(c->nodes, queue_node_key, c);
}

/* What the policy's render takes from the GPU nodes: the OS most of them run and their container
 * runtimes. */
typedef struct gpu_nodes_scan {
    kc_map *count;
    size_t best;
    char *os;
    size_t size;
    bool containerd, docker, crio;
} gpu_nodes_scan;

static bool scan_gpu_node(const char *key, const json_t *n, void *ud)
{
    (void)key;
    gpu_nodes_scan *sc = ud;
    if (!op_node_is_gpu(n))
        return true;
    const char *rt = op_node_runtime(n);
    if (rt) {
        sc->containerd |= !strcmp(rt, "containerd");
        sc->docker |= !strcmp(rt, "docker");
        sc->crio |= !strcmp(rt, "crio");
    }
    const json_t *l = json_object_get(json_object_get(n, "metadata"), "labels");
    const char *id =
        json_string_value(json_object_get(l, "feature.node.kubernetes.io/system-os_release.ID"));
    const char *ver = json_string_value(
        json_object_get(l, "feature.node.kubernetes.io/system-os_release.VERSION_ID"));
    if (!id || !ver || !sc->count)
        return true;
    char os[64];
    snprintf(os, sizeof(os), "%s%s", id, ver);
    size_t k = (size_t)(uintptr_t)kc_map_get(sc->count, os) + 1;
    kc_map_put(sc->count, os, (void *)(uintptr_t)k, NULL);
    if (k > sc->best || (k == sc->best && strcmp(os, sc->os) < 0)) {
        sc->best = k;
        snprintf(sc->os, sc->size, "%s", os);
    }
    return true;
}

/* The OS most GPU nodes run, as NVIDIA tags driver images ("ubuntu22.04"), from NFD's
 * system-os_release labels ("" when no GPU node says), and the one container runtime the toolkit
 * configures, NVIDIA's choice: containerd when any GPU node runs it, else the one they run
 * (docker before cri-o when both), NULL when none reports a known runtime. Logged when it
 * changes. */
static const char *scan_gpu_nodes(op_controller *c, char *os, size_t size)
{
    gpu_nodes_scan sc = {.count = kc_map_new(), .os = os, .size = size};
    os[0] = '\0';
    kc_informer_foreach(c->nodes, scan_gpu_node, &sc);
    kc_map_free(sc.count, NULL);
    const char *rt = sc.containerd ? "containerd" : sc.docker ? "docker" : sc.crio ? "crio" : NULL;
    pthread_mutex_lock(&c->mu);
    if (strcmp(c->runtime, rt ? rt : "")) {
        snprintf(c->runtime, sizeof(c->runtime), "%s", rt ? rt : "");
        if (rt)
            kc_info("container runtime of the GPU nodes", "runtime=%s", rt);
        else
            kc_info("no GPU node reports a known container runtime",
                    "runtime=\"spec.operator.defaultRuntime, else containerd\"");
    }
    pthread_mutex_unlock(&c->mu);
    return rt;
}

/* States whose optional objects are rendered by default (the operator's own ServiceMonitor, on
 * unless operator.metrics.serviceMonitor.enabled is false): their absence is reported in the
 * status, not warned about. The others render them only when the spec opts in. */
static bool optional_by_default(const char *state)
{
    return state && !strcmp(state, "state-operator-metrics");
}

/* Records an object of an optional kind in out ({"applied": [...], "missing": [...]}). */
static bool note_optional(json_t *out, const op_kind *k, const json_t *obj, const char *state,
                          bool applied)
{
    char what[300];
    snprintf(what, sizeof(what), "%s %s", k->kind, str_at(obj, "metadata", "name") ?: "");
    json_t *e = applied ? json_string(what)
                        : json_pack("{s:s, s:s, s:b}", "object", what, "crd", k->crd, "requested",
                                    !optional_by_default(state));
    return e && !json_array_append_new(json_object_get(out, applied ? "applied" : "missing"), e);
}

static long reconcile_policy(op_controller *c);

long op_reconcile_policy(op_controller *c)
{
    /* The informers of the optional kinds stay put while this reconcile reads them. */
    pthread_rwlock_rdlock(&c->kinds_mu);
    long again = reconcile_policy(c);
    pthread_rwlock_unlock(&c->kinds_mu);
    return again;
}

static long reconcile_policy(op_controller *c)
{
    json_t *all = kc_informer_list(c->policies);
    long again = -1;
    if (!all) {
        /* Not "no ClusterPolicy": the list could not be made. */
        kc_warn("cannot list the ClusterPolicies from the cache; retrying",
                "err=\"out of memory\"");
        return 1000;
    }
    const json_t *active = op_policy_active(all);
    if (!active) {
        set_active(c, NULL);
        op_enqueue(c, OP_KEY_STATUS, 0);
        goto out;
    }
    const char *name = str_at(active, "metadata", "name");
    size_t i;
    const json_t *p;
    json_array_foreach(all, i, p) if (p != active) mark_ignored(c, p, name);

    kc_err err;
    if (json_object_get(json_object_get(active, "metadata"), "deletionTimestamp")) {
        if (!has_finalizer(active))
            goto out;
        set_active(c, NULL);
        bool failed = false;
        size_t left = delete_stale(c, NULL, &failed) + delete_validation_pods(c);
        size_t mm = mig_manager_pods(c);
        left += mm ? mm : unlabel_nodes(c);
        if (left) {
            kc_info("ClusterPolicy deleted: removing operands and node labels", "name=%s left=%zu",
                    name, left);
            again = 500;
            goto out;
        }
        if (set_finalizer(c, active, false, &err) != KC_OK && err.code != KC_ENOTFOUND) {
            kc_warn("cannot remove the finalizer", "name=%s err=\"%s\"", name, err.msg);
            op_requeue_failed(c, OP_KEY_POLICY, err.retry_after_s);
            again = OP_REQUEUED;
        } else {
            kc_info("ClusterPolicy cleaned up; finalizer removed", "name=%s", name);
        }
        goto out;
    }
    if (!has_finalizer(active)) {
        if (set_finalizer(c, active, true, &err) != KC_OK) {
            kc_warn("cannot add the finalizer", "name=%s err=\"%s\"", name, err.msg);
            op_requeue_failed(c, OP_KEY_POLICY, err.retry_after_s);
            again = OP_REQUEUED;
        }
        goto out; /* the update event brings us back */
    }
    set_active(c, active);

    /* Render everything first: a spec that cannot be rendered changes nothing. */
    json_t *owner = op_policy_owner_ref(active);
    char driver_os[64];
    const char *runtime = scan_gpu_nodes(c, driver_os, sizeof(driver_os));
    op_render_ctx ctx = {.spec = json_object_get(active, "spec"),
                         .ns = c->ns,
                         .owner = owner,
                         .operator_image = c->o.operator_image,
                         .driver_os = driver_os,
                         .runtime = runtime,
                         .no_image_prepull = c->o.no_image_prepull};
    size_t n_states = op_states_count(c->o.states);
    json_t *rendered = json_array();
    ctx.rendered = rendered;
    json_t *rendered_state = json_array(); /* the state of each rendered object */
    json_t *keep = json_object();
    json_t *ds_by_state = json_object();
    char rerr[512] = "";
    /* Out of memory is no error of the spec: nothing is applied, nothing reported, and the
     * reconcile is retried. */
    bool transient = !owner || !rendered || !rendered_state || !keep || !ds_by_state;
    for (size_t s = 0; s < n_states && !transient; s++) {
        json_t *objs = NULL;
        if (op_render_state(c->o.states, s, &ctx, &objs, &err) != KC_OK) {
            if (err.code == KC_ENOMEM)
                transient = true;
            else
                snprintf(rerr, sizeof(rerr), "%s: %s", op_states_name(c->o.states, s), err.msg);
            break;
        }
        json_t *dsn = json_array();
        if (!dsn)
            transient = true;
        size_t j;
        json_t *o;
        json_array_foreach(objs, j, o)
        {
            char id[400];
            snprintf(id, sizeof(id), "%s/%s", str_at(o, "kind", NULL),
                     str_at(o, "metadata", "name"));
            if (json_object_set_new(keep, id, json_true()) || json_array_append(rendered, o) ||
                json_array_append_new(rendered_state,
                                      json_string(op_states_name(c->o.states, s))) ||
                (!strcmp(str_at(o, "kind", NULL) ?: "", "DaemonSet") &&
                 json_array_append_new(dsn, json_string(str_at(o, "metadata", "name")))))
                transient = true;
        }
        if (json_object_set_new(ds_by_state, op_states_name(c->o.states, s), dsn))
            transient = true;
        json_decref(objs);
    }
    json_decref(owner);
    if (transient) {
        kc_warn("cannot render the ClusterPolicy; retrying", "name=%s err=\"out of memory\"", name);
        again = 1000;
        goto rendered_out;
    }
    pthread_mutex_lock(&c->mu);
    bool was_error = c->render_error[0] != 0;
    snprintf(c->render_error, sizeof(c->render_error), "%s", rerr);
    if (!rerr[0]) {
        json_decref(c->ds_by_state);
        c->ds_by_state = json_incref(ds_by_state);
    }
    bool spec_changed = !json_equal(c->last_spec, json_object_get(active, "spec"));
    if (spec_changed) {
        json_decref(c->last_spec);
        /* NULL when out of memory: the next reconcile fans out again. */
        c->last_spec = json_deep_copy(json_object_get(active, "spec"));
    }
    pthread_mutex_unlock(&c->mu);
    if (rerr[0]) {
        if (!was_error) {
            kc_warn("ClusterPolicy cannot be rendered; nothing applied", "name=%s err=\"%s\"", name,
                    rerr);
            kc_event_record(c->events, active, "Warning", "ReconcileFailed",
                            "spec cannot be applied, nothing changed: %s", rerr);
        }
    } else {
        size_t wrote = 0;
        bool failed = false;
        int retry_after_s = 0; /* the longest Retry-After of a failed write */
        json_t *optional = json_pack("{s:[], s:[]}", "applied", "missing");
        bool any_optional = false, optional_oom = !optional;
        size_t j;
        json_t *o;
        json_array_foreach(rendered, j, o)
        {
            op_kind *k = op_kind_find(c, str_at(o, "apiVersion", NULL), str_at(o, "kind", NULL));
            const char *state = json_string_value(json_array_get(rendered_state, j));
            bool served = k && k->inf;
            int w = served ? apply_one(c, k, o, &err) : 0;
            /* A CRD deleted a moment ago: its deletion event stops the kind's watch; the object
             * is reported missing, not retried. */
            bool gone = served && w < 0 && k->crd && err.code == KC_ENOTFOUND;
            if (k && k->crd) {
                any_optional = true;
                if (!optional_oom && (w >= 0 || gone) &&
                    !note_optional(optional, k, o, state, served && !gone))
                    optional_oom = true;
            }
            if (!served)
                continue; /* e.g. ServiceMonitor without the Prometheus operator's CRD */
            if (gone) {
                kc_info("not applied: its CRD was just removed", "kind=%s name=%s", k->kind,
                        str_at(o, "metadata", "name"));
                continue;
            }
            if (w < 0) {
                failed = true;
                if (err.retry_after_s > retry_after_s)
                    retry_after_s = err.retry_after_s;
                kc_warn("apply failed", "kind=%s name=%s err=\"%s\"", k->kind,
                        str_at(o, "metadata", "name"), err.msg);
            } else {
                wrote += (size_t)w;
            }
        }
        if (!optional_oom) {
            pthread_mutex_lock(&c->mu);
            json_decref(c->optional);
            c->optional = any_optional ? json_incref(optional) : NULL;
            pthread_mutex_unlock(&c->mu);
        }
        json_decref(optional);
        delete_stale(c, keep, &failed);
        if (wrote)
            kc_debug("policy applied", "writes=%zu", wrote);
        if (failed) {
            op_requeue_failed(c, OP_KEY_POLICY, retry_after_s);
            again = OP_REQUEUED;
        }
        if (spec_changed)
            fan_out_nodes(c);
    }
rendered_out:
    json_decref(rendered);
    json_decref(rendered_state);
    json_decref(keep);
    json_decref(ds_by_state);
    op_enqueue(c, OP_KEY_STATUS, 100);
out:
    json_decref(all);
    return again;
}
