/* op_status: the ClusterPolicy status (state, conditions, per-state and per-node progress with
 * the first nodes behind and why), its Events, and the gpu_operator_* metrics. Written only when
 * something a user can see changed. */
#include "op_controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"
#include "op_policy.h"

#define MAX_BEHIND 10

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static long long num(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* NVIDIA's readiness rule for a DaemonSet, on a status that has caught up with its pods: live is
 * the number of its pods the pod cache holds (not terminating). The DaemonSet controller writes
 * the status after it creates a pod, so a node labelled for the state a moment ago can have a
 * Ready pod (and be validated) while the status still counts one node fewer, and reads ready. */
static bool ds_ready(const json_t *ds, long live, char *why, size_t size)
{
    if (!ds) {
        snprintf(why, size, "not created yet");
        return false;
    }
    const json_t *st = json_object_get(ds, "status");
    long long desired = num(st, "desiredNumberScheduled");
    if (live > desired) {
        snprintf(why, size, "%ld pods, status not caught up (%lld scheduled)", live, desired);
        return false;
    }
    if (desired == 0)
        return true;
    long long gen = num(json_object_get(ds, "metadata"), "generation");
    if (num(st, "numberUnavailable") == 0 && num(st, "observedGeneration") >= gen &&
        num(st, "updatedNumberScheduled") == desired && num(st, "numberAvailable") == desired)
        return true;
    snprintf(why, size, "%lld of %lld pods available", num(st, "numberAvailable"), desired);
    return false;
}

static json_t *condition(const char *type, bool ok, const char *reason, const char *msg,
                         const json_t *old_conds, const char *now)
{
    const char *status = ok ? "True" : "False";
    const char *ltt = now;
    size_t i;
    const json_t *c;
    json_array_foreach(old_conds, i, c)
    {
        const char *t = str_at(c, "type", NULL), *s = str_at(c, "status", NULL);
        if (t && s && !strcmp(t, type) && !strcmp(s, status) &&
            str_at(c, "lastTransitionTime", NULL))
            ltt = str_at(c, "lastTransitionTime", NULL);
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status", status, "reason", reason,
                     "message", msg, "lastTransitionTime", ltt);
}

/* The nodes a DaemonSet runs on (desiredNumberScheduled) and those where its current pod is
 * available (updated and available, at most the desired). */
static void ds_nodes(const json_t *ds, long long *total, long long *ready)
{
    const json_t *st = json_object_get(ds, "status");
    long long desired = num(st, "desiredNumberScheduled");
    long long ok = num(st, "numberAvailable");
    if (num(st, "updatedNumberScheduled") < ok)
        ok = num(st, "updatedNumberScheduled");
    if (ok > desired)
        ok = desired;
    *total = desired;
    *ready = ok < 0 ? 0 : ok;
}

/* The condition about the objects of optional kinds (optional: c->optional), or NULL when none
 * was rendered (optional is NULL) or out of memory. *warn: the spec asked for one whose CRD is not
 * installed. req_missing receives those objects ("Kind name, ..."). */
static json_t *optional_condition(const json_t *optional, const json_t *old_conds, const char *now,
                                  bool *warn, char *req_missing, size_t req_size)
{
    *warn = false;
    req_missing[0] = '\0';
    if (!optional)
        return NULL;
    const json_t *missing = json_object_get(optional, "missing");
    const json_t *applied = json_object_get(optional, "applied");
    char msg[1024] = "";
    size_t l = 0, rl = 0;
    size_t i, j;
    const json_t *e, *f;
    if (json_array_size(missing) == 0) {
        l += (size_t)snprintf(msg, sizeof(msg), "applied: ");
        json_array_foreach(applied, i, e) if (l < sizeof(msg)) l +=
            (size_t)snprintf(msg + l, sizeof(msg) - l, "%s%s", i ? ", " : "", json_string_value(e));
        return condition("OptionalCRDs", true, "Applied", msg, old_conds, now);
    }
    /* Grouped by CRD, in the order first seen. */
    json_array_foreach(missing, i, e)
    {
        const char *crd = str_at(e, "crd", NULL);
        bool first = true;
        json_array_foreach(missing, j, f) if (j < i && !strcmp(str_at(f, "crd", NULL), crd)) first =
            false;
        if (!first)
            continue;
        if (l < sizeof(msg))
            l += (size_t)snprintf(msg + l, sizeof(msg) - l,
                                  "%sCRD %s is not installed, not created: ", i ? "; " : "", crd);
        size_t n = 0;
        json_array_foreach(missing, j, f)
        {
            if (strcmp(str_at(f, "crd", NULL), crd))
                continue;
            const char *obj = str_at(f, "object", NULL);
            if (l < sizeof(msg))
                l += (size_t)snprintf(
                    msg + l, sizeof(msg) - l, "%s%s%s", n++ ? ", " : "", obj,
                    json_is_true(json_object_get(f, "requested")) ? "" : " (on by default)");
            if (json_is_true(json_object_get(f, "requested"))) {
                *warn = true;
                if (rl < req_size)
                    rl += (size_t)snprintf(req_missing + rl, req_size - rl, "%s%s (CRD %s)",
                                           rl ? ", " : "", obj, crd);
            }
        }
    }
    if (l < sizeof(msg))
        snprintf(msg + l, sizeof(msg) - l,
                 "; they are created once the CRD is installed (no restart needed)");
    /* The reason tells a spec that asked for the objects from defaults (the operator's own
     * ServiceMonitor), which are only reported. */
    return condition("OptionalCRDs", false,
                     *warn ? "CRDNotInstalled" : "CRDNotInstalledDefaultsOnly", msg, old_conds,
                     now);
}

/* Whether the old conditions hold the type with status False and this reason. */
static bool was_false(const json_t *old_conds, const char *type, const char *reason)
{
    size_t i;
    const json_t *c;
    json_array_foreach(old_conds, i, c)
    {
        const char *t = str_at(c, "type", NULL), *st = str_at(c, "status", NULL),
                   *r = str_at(c, "reason", NULL);
        if (t && st && !strcmp(t, type))
            return !strcmp(st, "False") && r && !strcmp(r, reason);
    }
    return false;
}

/* A status without timestamps, to compare what a user would see. */
static json_t *comparable(const json_t *status)
{
    json_t *s = json_deep_copy(status);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s, "conditions"), i, c)
        json_object_del(c, "lastTransitionTime");
    return s;
}

/* What a status change says beyond progress: the state, the generation, each condition's type,
 * status and reason (but those of operand states), the operand states there are, and the nodes that
 * failed, are blocked, reconfigure or opted out. Changes of nothing but counts of nodes done and in
 * progress, the nodes behind, the messages that count them and an operand state's readiness (its
 * condition) are progress (see op_reconcile_status): in a rollout a state's DaemonSet turns ready
 * and not ready again with every node its pods reach, several times a second over a large fleet,
 * while whether the whole ClusterPolicy is ready (its state) is written at once. */
static json_t *significant(const json_t *status)
{
    json_t *s =
        json_pack("{s:O?, s:O?, s:[], s:[], s:{}}", "state", json_object_get(status, "state"),
                  "observedGeneration", json_object_get(status, "observedGeneration"), "conditions",
                  "states", "nodes");
    if (!s)
        return NULL;
    size_t i, j;
    const json_t *c, *st;
    json_array_foreach(json_object_get(status, "conditions"), i, c)
    {
        /* An operand state's own condition follows its readiness: progress too. */
        bool of_state = false;
        json_array_foreach(json_object_get(status, "states"), j, st)
        {
            const char *t = json_string_value(json_object_get(c, "type")),
                       *n = json_string_value(json_object_get(st, "name"));
            of_state |= t && n && !strcmp(t, n);
        }
        if (of_state)
            continue;
        if (json_array_append_new(
                json_object_get(s, "conditions"),
                json_pack("{s:O?, s:O?, s:O?}", "type", json_object_get(c, "type"), "status",
                          json_object_get(c, "status"), "reason", json_object_get(c, "reason")))) {
            json_decref(s);
            return NULL;
        }
    }
    json_array_foreach(json_object_get(status, "states"), i, c)
    {
        if (json_array_append_new(json_object_get(s, "states"),
                                  json_pack("{s:O?}", "name", json_object_get(c, "name")))) {
            json_decref(s);
            return NULL;
        }
    }
    static const char *const kept[] = {"gpu", "failed", "blocked", "reconfiguring", "optedOut"};
    const json_t *nodes = json_object_get(status, "nodes");
    for (size_t k = 0; k < sizeof(kept) / sizeof(kept[0]); k++) {
        json_t *v = json_object_get(nodes, kept[k]);
        if (v && json_object_set(json_object_get(s, "nodes"), kept[k], v)) {
            json_decref(s);
            return NULL;
        }
    }
    return s;
}

/* How long a change that is only progress waits after the last status write: 2 ms per GPU node
 * between 200 ms and 5 s, so that a rollout over thousands of nodes updates the counts a user
 * watches every few seconds instead of once per node. */
static uint64_t progress_interval_ms(long gpu_nodes)
{
    uint64_t ms = gpu_nodes > 0 ? (uint64_t)gpu_nodes * 2 : 0;
    return ms < 200 ? 200 : ms > 5000 ? 5000 : ms;
}

typedef struct agg {
    long gpu, done, in_progress, reconfiguring, failed, opted_out, mig_failed, blocked;
    long at_stage[OP_STAGE_COUNT], failed_at[OP_STAGE_COUNT];
    long upgrade[OP_UP_COUNT]; /* GPU nodes per driver upgrade state */
    long up_unavailable;       /* those the upgrade manages that are cordoned or not Ready */
    long sharing_invalid;      /* GPU nodes whose sharing config the plugin would refuse */
    long mig_invalid;          /* GPU nodes whose MIG config cannot be applied as asked */
    char mig_first[600];       /* "<node>: <reason>" of the first of them */
    char sharing_first[640];   /* the first of them: "node: reason" */
    json_t *behind;            /* [{node, state, phase, reason}] */
} agg;

static void aggregate(op_controller *c, agg *a)
{
    memset(a, 0, sizeof(*a));
    a->behind = json_array();
    json_t *failed = json_array(), *others = json_array();
    bool oom = !failed || !others;
    pthread_mutex_lock(&c->mu);
    size_t pos = 0;
    const char *name;
    void *v;
    while (kc_map_next(c->results, &pos, &name, &v)) {
        const op_node_result *r = v;
        if (r->phase == OP_NODE_NOT_GPU)
            continue;
        if (r->phase == OP_NODE_OPTED_OUT) {
            a->opted_out++;
            continue;
        }
        a->gpu++;
        if (r->upgrade < OP_UP_COUNT)
            a->upgrade[r->upgrade]++;
        if (r->upgrade != OP_UP_NONE && r->unavailable)
            a->up_unavailable++;
        if (r->stage >= 0 && r->stage < OP_STAGE_COUNT)
            a->at_stage[r->stage]++;
        if (r->mig_invalid && a->mig_invalid++ == 0)
            snprintf(a->mig_first, sizeof(a->mig_first), "%s: %s", name, op_node_result_reason(r));
        if (r->sharing_invalid && a->sharing_invalid++ == 0)
            snprintf(a->sharing_first, sizeof(a->sharing_first), "%s: %s", name,
                     op_node_result_reason(r));
        switch (r->phase) {
        case OP_NODE_DONE:
            a->done++;
            break;
        case OP_NODE_RECONFIGURING:
            a->reconfiguring++;
            break;
        case OP_NODE_BLOCKED:
            a->blocked++;
            break;
        case OP_NODE_FAILED:
            a->failed++;
            if (r->stage >= 0 && r->stage < OP_STAGE_COUNT)
                a->failed_at[r->stage]++;
            if (r->stage == OP_STAGE_MIG)
                a->mig_failed++;
            break;
        default:
            a->in_progress++;
            break;
        }
        if (r->phase != OP_NODE_DONE) {
            json_t *dst =
                r->phase == OP_NODE_FAILED || r->phase == OP_NODE_BLOCKED ? failed : others;
            if (json_array_size(dst) < MAX_BEHIND &&
                json_array_append_new(dst, json_pack("{s:s, s:s, s:s, s:s}", "node", name, "state",
                                                     op_stage_name((op_stage)r->stage), "phase",
                                                     op_node_phase_name(r->phase), "reason",
                                                     op_node_result_reason(r))))
                oom = true;
        }
    }
    pthread_mutex_unlock(&c->mu);
    size_t i;
    json_t *e;
    json_array_foreach(failed, i, e) if (json_array_size(a->behind) < MAX_BEHIND &&
                                         json_array_append(a->behind, e)) oom = true;
    json_array_foreach(others, i, e) if (json_array_size(a->behind) < MAX_BEHIND &&
                                         json_array_append(a->behind, e)) oom = true;
    json_decref(failed);
    json_decref(others);
    if (oom) { /* a->behind NULL says the aggregate is incomplete */
        json_decref(a->behind);
        a->behind = NULL;
    }
}

/* NVIDIA's driver-upgrade gauges, counted as its upgrade library counts them (GetUpgradesInProgress
 * and the others): out[] in the order of c->m_upgrade. */
static void upgrade_counts(const agg *a, const json_t *policy, double out[6])
{
    const json_t *spec = json_object_get(policy, "spec");
    const json_t *up = json_object_get(json_object_get(spec, "driver"), "upgradePolicy");
    const json_t *au = json_object_get(up, "autoUpgrade"),
                 *mp = json_object_get(up, "maxParallelUpgrades");
    const json_t *mu = json_object_get(up, "maxUnavailable");
    /* As the operator upgrades: autoUpgrade and maxParallelUpgrades default to true and 1. */
    bool enabled = policy && op_spec_enabled(spec, "driver", true) &&
                   (json_is_boolean(au) ? json_is_true(au) : true);
    long max_parallel = json_is_integer(mp) ? (long)json_integer_value(mp) : 1;
    long total = 0;
    for (int i = OP_UP_UNKNOWN; i < OP_UP_COUNT; i++)
        total += a->upgrade[i];
    long pending = a->upgrade[OP_UP_REQUIRED];
    long in_progress = total - (a->upgrade[OP_UP_UNKNOWN] + a->upgrade[OP_UP_DONE] + pending);
    /* maxUnavailable: a count or a percentage of the managed nodes rounded up; all when unset. */
    long max_unavailable = total;
    const char *pct = json_string_value(mu);
    if (json_is_integer(mu))
        max_unavailable = (long)json_integer_value(mu);
    else if (pct && pct[0] && pct[strlen(pct) - 1] == '%')
        max_unavailable = (atol(pct) * total + 99) / 100;
    long available = max_parallel == 0 ? pending : max_parallel - in_progress;
    long unavailable = a->up_unavailable + a->upgrade[OP_UP_CORDON];
    if (available > max_unavailable)
        available = max_unavailable;
    if (unavailable >= max_unavailable)
        available = 0;
    else if (max_unavailable < total && unavailable + available > max_unavailable)
        available = max_unavailable - unavailable;
    out[0] = enabled ? 1 : 0;
    out[1] = (double)in_progress;
    out[2] = (double)a->upgrade[OP_UP_DONE];
    out[3] = (double)a->upgrade[OP_UP_FAILED];
    out[4] = (double)available;
    out[5] = (double)pending;
}

static void metrics(op_controller *c, const agg *a, int status_code, bool has_nfd,
                    const json_t *policy)
{
    if (!c->o.metrics)
        return;
    if (!c->m_gpu_nodes) {
        kc_metric *m;
        static const char *const state_labels[] = {"state", "phase", NULL};
        if (kc_metrics_gauge(c->o.metrics, "gpu_operator_gpu_nodes_total",
                             "GPU nodes in the cluster", NULL, &m, NULL) == KC_OK)
            c->m_gpu_nodes = kc_metric_with(m, NULL);
        if (kc_metrics_gauge(c->o.metrics, "gpu_operator_reconciliation_status",
                             "1 ready, 0 not ready, -1 no ClusterPolicy, -2 error", NULL, &m,
                             NULL) == KC_OK)
            c->m_status = kc_metric_with(m, NULL);
        if (kc_metrics_counter(c->o.metrics, "gpu_operator_reconciliation_total",
                               "status reconciliations", NULL, &m, NULL) == KC_OK)
            c->m_reconciles = kc_metric_with(m, NULL);
        if (kc_metrics_counter(c->o.metrics, "gpu_operator_reconciliation_failed_total",
                               "reconciliations that found an error", NULL, &m, NULL) == KC_OK)
            c->m_failed = kc_metric_with(m, NULL);
        if (kc_metrics_gauge(c->o.metrics, "gpu_operator_reconciliation_last_success_ts_seconds",
                             "time of the last reconciliation that found the cluster ready", NULL,
                             &m, NULL) == KC_OK)
            c->m_last_success = kc_metric_with(m, NULL);
        if (kc_metrics_gauge(c->o.metrics, "gpu_operator_reconciliation_has_nfd_labels",
                             "1 when some node carries NFD's NVIDIA PCI label", NULL, &m,
                             NULL) == KC_OK)
            c->m_nfd = kc_metric_with(m, NULL);
        static const char *const config_labels[] = {"config", NULL};
        kc_metric *errs = NULL;
        const char *sharing[] = {"sharing", NULL}, *mig[] = {"mig", NULL};
        if (kc_metrics_gauge(c->o.metrics, "gpu_operator_node_config_errors",
                             "GPU nodes whose operand config the operand would refuse (sharing: "
                             "the device plugin's time-slicing/MPS config; mig: the MIG config "
                             "the node asks for)",
                             config_labels, &errs, NULL) == KC_OK) {
            c->m_sharing_errors = kc_metric_with(errs, sharing);
            c->m_mig_errors = kc_metric_with(errs, mig);
        }
        kc_metrics_gauge(c->o.metrics, "gpu_operator_state_nodes",
                         "GPU nodes per gated state and phase", state_labels, &c->m_state_nodes,
                         NULL);
        /* NVIDIA's names and help texts. */
        static const char *const up[6][2] = {
            {"gpu_operator_driver_auto_upgrade_enabled",
             "1 if driver auto upgrade is enabled 0 if not"},
            {"gpu_operator_nodes_upgrades_in_progress",
             "Total number of nodes on which the gpu operator pods are being upgraded"},
            {"gpu_operator_nodes_upgrades_done",
             "Total number of nodes on which the gpu operator pods are successfully upgraded"},
            {"gpu_operator_nodes_upgrades_failed",
             "Total number of nodes on which the gpu operator pod upgrades have failed"},
            {"gpu_operator_nodes_upgrades_available",
             "Total number of nodes on which the gpu operator pod upgrades can be done"},
            {"gpu_operator_nodes_upgrades_pending",
             "Total number of nodes on which the gpu operator pod upgrades are pending"}};
        for (int i = 0; i < 6; i++)
            if (kc_metrics_gauge(c->o.metrics, up[i][0], up[i][1], NULL, &m, NULL) == KC_OK)
                c->m_upgrade[i] = kc_metric_with(m, NULL);
    }
    double upv[6];
    upgrade_counts(a, policy, upv);
    for (int i = 0; i < 6; i++)
        kc_gauge_set(c->m_upgrade[i], upv[i]);
    if (c->m_gpu_nodes)
        kc_gauge_set(c->m_gpu_nodes, (double)a->gpu);
    if (c->m_status)
        kc_gauge_set(c->m_status, status_code);
    if (c->m_reconciles)
        kc_counter_inc(c->m_reconciles);
    if (status_code == -2 && c->m_failed)
        kc_counter_inc(c->m_failed);
    if (status_code == 1 && c->m_last_success)
        kc_gauge_set_to_now(c->m_last_success);
    if (c->m_nfd)
        kc_gauge_set(c->m_nfd, has_nfd ? 1 : 0);
    if (c->m_sharing_errors)
        kc_gauge_set(c->m_sharing_errors, (double)a->sharing_invalid);
    if (c->m_mig_errors)
        kc_gauge_set(c->m_mig_errors, (double)a->mig_invalid);
    for (int s = 0; c->m_state_nodes && s < OP_STAGE_COUNT; s++) {
        const char *v1[] = {op_stage_name((op_stage)s), "at", NULL};
        const char *v2[] = {op_stage_name((op_stage)s), "failed", NULL};
        kc_series *x = kc_metric_with(c->m_state_nodes, v1),
                  *y = kc_metric_with(c->m_state_nodes, v2);
        if (x)
            kc_gauge_set(x, (double)a->at_stage[s]);
        if (y)
            kc_gauge_set(y, (double)a->failed_at[s]);
    }
}

long op_reconcile_status(op_controller *c)
{
    json_t *all = kc_informer_list(c->policies);
    json_t *policy = op_active_policy(c);
    json_t *live = NULL, *ds_by_state = NULL, *optional = NULL;
    long again = -1;
    agg a;
    aggregate(c, &a);
    if (!all || !a.behind) {
        again = 1000; /* out of memory */
        goto out;
    }
    if (!policy) {
        metrics(c, &a, -1, false, NULL);
        goto out;
    }
    live = kc_informer_get(c->policies, NULL, str_at(policy, "metadata", "name"));
    if (!live && kc_informer_has(c->policies, NULL, str_at(policy, "metadata", "name"))) {
        again = 1000; /* cached but could not be read: out of memory */
        goto out;
    }
    if (!live || json_object_get(json_object_get(live, "metadata"), "deletionTimestamp"))
        goto out;
    /* The last status write's answer is newer than a cache that has not shown it yet (its watch
     * lags under load): compared with, and written on top of, instead of the cached copy, which
     * would differ by that write and only conflict. */
    const json_t *wmeta = json_object_get(c->status_written, "metadata");
    if (c->status_written &&
        !strcmp(str_at(wmeta, "uid", NULL) ?: "",
                str_at(json_object_get(live, "metadata"), "uid", NULL) ?: "-") &&
        op_rv_num(str_at(json_object_get(live, "metadata"), "resourceVersion", NULL)) <
            op_rv_num(str_at(wmeta, "resourceVersion", NULL))) {
        json_decref(live);
        live = json_incref(c->status_written);
    }
    char render_error[512];
    pthread_mutex_lock(&c->mu);
    snprintf(render_error, sizeof(render_error), "%s", c->render_error);
    ds_by_state = json_incref(c->ds_by_state);
    optional = json_incref(c->optional);
    pthread_mutex_unlock(&c->mu);

    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
    const json_t *old = json_object_get(live, "status");
    const json_t *old_conds = json_object_get(old, "conditions");
    const char *was = str_at(old, "state", NULL);
    if (!was || !strcmp(was, "ready"))
        atomic_store(&c->policy_was_ready, was != NULL);
    json_t *conds = json_array();
    json_t *states = json_array();
    bool oom = !conds || !states;
    char not_ready[1024] = "";
    size_t nr = 0;
    const char *st;
    json_t *dsn;
    json_object_foreach(ds_by_state, st, dsn)
    {
        if (json_array_size(dsn) == 0)
            continue;
        bool ok = true;
        char why[900] = "";
        long long total = -1, ready_nodes = -1;
        size_t i;
        json_t *d;
        json_array_foreach(dsn, i, d)
        {
            json_t *ds = kc_informer_get(c->daemonsets, c->ns, json_string_value(d));
            if (!ds && kc_informer_has(c->daemonsets, c->ns, json_string_value(d)))
                oom = true; /* not "not created yet" */
            char w[200], fw[600];
            if (!ds_ready(ds, op_app_pods(c, json_string_value(d)), w, sizeof(w))) {
                ok = false;
                /* Why its pods are not available, when one is failing to start. */
                bool f = op_app_failing(c, json_string_value(d), fw, sizeof(fw));
                snprintf(why, sizeof(why), "DaemonSet %s: %s%s%s", json_string_value(d), w,
                         f ? "; " : "", f ? fw : "");
            }
            /* A state's nodes: those of its widest DaemonSet, ready where every one is. */
            long long t_ds, r_ds;
            ds_nodes(ds, &t_ds, &r_ds);
            if (t_ds > total)
                total = t_ds;
            if (ready_nodes < 0 || r_ds < ready_nodes)
                ready_nodes = r_ds;
            json_decref(ds);
        }
        if (total < 0)
            total = 0;
        if (ready_nodes < 0 || ready_nodes > total)
            ready_nodes = total;
        char cmsg[1000];
        if (ok)
            snprintf(cmsg, sizeof(cmsg), "operands ready on %lld/%lld nodes", ready_nodes, total);
        else
            snprintf(cmsg, sizeof(cmsg), "%lld/%lld nodes ready; %s", ready_nodes, total, why);
        oom |= json_array_append_new(states,
                                     json_pack("{s:s, s:b, s:I, s:I, s:s}", "name", st, "ready", ok,
                                               "nodesReady", (json_int_t)ready_nodes, "nodesTotal",
                                               (json_int_t)total, "message", ok ? "" : cmsg));
        oom |= json_array_append_new(
            conds, condition(st, ok, ok ? "Ready" : "OperandNotReady", cmsg, old_conds, now));
        /* The image pre-pull's pods come and go with each node's rollout: shown, never waited
         * for (its images' operands report their own pulls). */
        if (!ok && strcmp(st, "state-image-prepull") != 0) {
            size_t l = strlen(not_ready);
            snprintf(not_ready + l, sizeof(not_ready) - l, "%s%s (%lld/%lld nodes)",
                     nr++ ? ", " : "", st, ready_nodes, total);
        }
    }
    /* GPU nodes in the cache that no node reconcile has reported on yet (start-up). */
    long gpu_seen = atomic_load(&c->gpu_nodes);
    /* A node the operands cannot be scheduled on (blocked) is reported, not waited for: it
     * holds no other node back, as long as some node is validated. */
    bool nodes_ok = a.gpu > a.blocked && a.gpu + a.opted_out >= gpu_seen && a.in_progress == 0 &&
                    a.reconfiguring == 0 && a.failed == a.mig_failed;
    bool ready = !render_error[0] && nodes_ok && nr == 0;
    const char *reason;
    char msg[2048];
    if (render_error[0]) {
        reason = "ReconcileFailed";
        snprintf(msg, sizeof(msg), "the spec cannot be applied: %s", render_error);
    } else if (a.gpu + a.opted_out < gpu_seen) {
        reason = "Reconciling";
        snprintf(msg, sizeof(msg), "reconciling GPU nodes: %ld of %ld seen so far",
                 a.gpu + a.opted_out, gpu_seen);
    } else if (a.gpu == 0) {
        reason = "NoGPUNodes";
        snprintf(msg, sizeof(msg),
                 "no GPU node found: no node has feature.node.kubernetes.io/pci-10de.present=true "
                 "(is node-feature-discovery running?)");
    } else if (!ready) {
        reason = "OperandNotReady";
        /* Only the parts that say something: no empty list. */
        size_t l = (size_t)snprintf(msg, sizeof(msg), "ClusterPolicy is not ready");
        if (nr && l < sizeof(msg))
            l += (size_t)snprintf(msg + l, sizeof(msg) - l, "; states not ready: %s", not_ready);
        size_t i;
        json_t *b;
        json_array_foreach(a.behind, i, b)
        {
            if (l >= sizeof(msg))
                break;
            l += (size_t)snprintf(msg + l, sizeof(msg) - l, "%s%s (%s: %s)",
                                  i ? ", " : "; nodes behind: ", str_at(b, "node", NULL),
                                  str_at(b, "state", NULL), str_at(b, "reason", NULL));
        }
        if (!nr && json_array_size(a.behind) == 0 && l < sizeof(msg))
            snprintf(msg + l, sizeof(msg) - l, "; %ld of %ld GPU nodes validated", a.done, a.gpu);
    } else {
        reason = "Reconciled";
        snprintf(msg, sizeof(msg), "ClusterPolicy is ready: %ld GPU nodes validated%s%s", a.done,
                 a.mig_failed ? " (some MIG reconfigurations failed: see status.behind)" : "",
                 a.blocked ? " (some GPU nodes are blocked by taints the operands do not "
                             "tolerate: see status.behind)"
                           : "");
    }
    oom |= json_array_insert_new(conds, 0, condition("Ready", ready, reason, msg, old_conds, now));
    oom |= json_array_insert_new(conds, 1,
                                 condition("Error", render_error[0] != 0,
                                           render_error[0] ? "ReconcileFailed" : "NoError",
                                           render_error[0] ? msg : "", old_conds, now));
    /* Objects of optional kinds (ServiceMonitors): the policy may be ready without them, but
     * says which were not created and why. */
    bool warn_optional = false;
    char req_missing[512];
    json_t *opt_cond = render_error[0]
                           ? NULL
                           : optional_condition(optional, old_conds, now, &warn_optional,
                                                req_missing, sizeof(req_missing));
    if (opt_cond)
        oom |= json_array_insert_new(conds, 2, opt_cond);
    else if (!render_error[0] && optional)
        oom = true; /* optional objects were rendered: NULL is out of memory, not "none" */
    /* Present while the policy names a sharing ConfigMap (or a node still reports one). */
    const json_t *dpcfg =
        json_object_get(json_object_get(json_object_get(live, "spec"), "devicePlugin"), "config");
    const char *dpname = str_at(dpcfg, "name", NULL);
    if ((dpname && *dpname) || a.sharing_invalid) {
        char smsg[1024];
        if (a.sharing_invalid)
            snprintf(smsg, sizeof(smsg),
                     "%ld GPU node%s cannot load %s device-plugin sharing config; %s",
                     a.sharing_invalid, a.sharing_invalid == 1 ? "" : "s",
                     a.sharing_invalid == 1 ? "its" : "their", a.sharing_first);
        else
            snprintf(smsg, sizeof(smsg),
                     "the device-plugin sharing config of every GPU node is valid");
        oom |= json_array_append_new(conds,
                                     condition("SharingConfigValid", !a.sharing_invalid,
                                               a.sharing_invalid ? "InvalidSharingConfig" : "Valid",
                                               smsg, old_conds, now));
    }
    /* Present once a node's MIG config could not be applied as asked, True again once none. */
    bool had_mig = false;
    size_t ci;
    const json_t *oc;
    json_array_foreach(old_conds, ci, oc) had_mig |=
        !strcmp(str_at(oc, "type", NULL) ?: "", "MIGConfigValid");
    if (a.mig_invalid || had_mig) {
        char mmsg[1024];
        if (a.mig_invalid)
            snprintf(mmsg, sizeof(mmsg),
                     "%ld GPU node%s cannot apply the MIG config %s asks for; %s", a.mig_invalid,
                     a.mig_invalid == 1 ? "" : "s", a.mig_invalid == 1 ? "it" : "they",
                     a.mig_first);
        else
            snprintf(mmsg, sizeof(mmsg), "every GPU node's MIG config can be applied");
        oom |= json_array_append_new(conds, condition("MIGConfigValid", !a.mig_invalid,
                                                      a.mig_invalid ? "InvalidMIGConfig" : "Valid",
                                                      mmsg, old_conds, now));
    }
    json_t *status = json_pack(
        "{s:s, s:s, s:I, s:o, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:o, s:O}", "state",
        ready ? "ready" : "notReady", "namespace", c->ns, "observedGeneration",
        (json_int_t)num(json_object_get(live, "metadata"), "generation"), "conditions", conds,
        "nodes", "gpu", (int)a.gpu, "ready", (int)a.done, "inProgress", (int)a.in_progress,
        "reconfiguring", (int)a.reconfiguring, "failed", (int)a.failed, "optedOut",
        (int)a.opted_out, "blocked", (int)a.blocked, "states", states, "behind", a.behind);
    json_t *x = comparable(status), *y = comparable(old);
    bool same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    json_t *sx = same ? NULL : significant(status), *sy = same || !old ? NULL : significant(old);
    bool progress_only = sx && sy && json_equal(sx, sy);
    json_decref(sx);
    json_decref(sy);
    uint64_t now_ms = op_mono_ms(), since = now_ms - c->status_written_ms,
             wait_ms = progress_interval_ms(a.gpu);
    if (oom || !status || !x || (old && !y)) {
        again = 1000; /* out of memory: nothing written */
    } else if (!same && progress_only && c->status_written_ms && since < wait_ms) {
        again = (long)(wait_ms - since); /* progress: written with the next change or then */
    } else if (!same) {
        const char *old_state = str_at(old, "state", NULL);
        json_t *upd = json_deep_copy(live), *written = NULL;
        kc_err err;
        kc_code rc =
            !upd || json_object_set(upd, "status", status)
                ? kc_err_set(&err, KC_ENOMEM, "out of memory building the status")
                : kc_update_status(c->api, &KC_RES_CLUSTERPOLICIES, NULL, upd, &written, &err);
        json_decref(upd);
        if (rc != KC_OK)
            json_decref(written);
        if (rc == KC_ECONFLICT) {
            again = 100;
        } else if (rc != KC_OK) {
            kc_warn("cannot write the ClusterPolicy status", "err=\"%s\"", err.msg);
            op_requeue_failed(c, OP_KEY_STATUS, err.retry_after_s);
            again = OP_REQUEUED;
        } else {
            c->status_written_ms = now_ms;
            json_decref(c->status_written);
            c->status_written = written;
            written = NULL;
            if (ready)
                atomic_store(&c->policy_was_ready, true);
            /* Once, when the condition turns to CRDNotInstalled (not on every reconcile, nor on a
             * restart). */
            if (warn_optional && !was_false(old_conds, "OptionalCRDs", "CRDNotInstalled"))
                kc_event_record(c->events, live, "Warning", "CRDNotInstalled",
                                "the spec asks for %s, whose CRD is not installed: not created "
                                "until the CRD is installed",
                                req_missing);
            if (!old_state || strcmp(old_state, ready ? "ready" : "notReady")) {
                kc_info(ready ? "ClusterPolicy ready" : "ClusterPolicy not ready", "reason=%s",
                        reason);
                /* A policy that was never ready is being installed: operands rolling out are
                 * progress (Normal). Losing readiness, a spec that cannot be applied and a
                 * cluster without GPU nodes are what an administrator must look at (Warning). */
                bool progress = !old_state && (!strcmp(reason, "OperandNotReady") ||
                                               !strcmp(reason, "Reconciling"));
                kc_event_record(c->events, live, ready || progress ? "Normal" : "Warning",
                                ready ? "Ready" : reason, "%s", msg);
            }
        }
    }
    json_decref(status);
    metrics(c, &a, render_error[0] ? -2 : ready ? 1 : 0, a.gpu > 0, policy);
out:
    json_decref(a.behind);
    json_decref(ds_by_state);
    json_decref(optional);
    json_decref(live);
    json_decref(policy);
    json_decref(all);
    return again;
}
