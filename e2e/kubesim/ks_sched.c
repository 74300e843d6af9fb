/* ks_sched: kubesim's scheduler: binds pods that name no node to a Ready node that their
 * nodeSelector, required node affinity, tolerations and resource requests (cpu, memory, pods and
 * every extended resource such as nvidia.com/gpu) allow, spreading by least allocated; reports
 * unschedulable pods as the real scheduler does (PodScheduled=False, FailedScheduling Event). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "ks_ctl_int.h"

/* ---- node selection rules (shared with the DaemonSet controller) ---- */

static bool in_values(const json_t *values, const char *v)
{
    size_t i;
    json_t *x;
    json_array_foreach(values, i, x)
    {
        if (json_is_string(x) && !strcmp(json_string_value(x), v))
            return true;
    }
    return false;
}

static bool expr_matches(const json_t *expr, const json_t *map)
{
    const char *op = ksc_str(expr, "operator");
    json_t *values = json_object_get(expr, "values");
    json_t *jv = json_object_get(map, ksc_str(expr, "key"));
    const char *v = json_string_value(jv);
    if (!strcmp(op, "In"))
        return v && in_values(values, v);
    if (!strcmp(op, "NotIn"))
        return !v || !in_values(values, v);
    if (!strcmp(op, "Exists"))
        return v != NULL;
    if (!strcmp(op, "DoesNotExist"))
        return v == NULL;
    if (!strcmp(op, "Gt") || !strcmp(op, "Lt")) {
        const char *want = json_string_value(json_array_get(values, 0));
        char *e1, *e2;
        if (!v || !want)
            return false;
        long long have = strtoll(v, &e1, 10), w = strtoll(want, &e2, 10);
        if (*e1 || *e2 || !*v || !*want)
            return false;
        return !strcmp(op, "Gt") ? have > w : have < w;
    }
    return false;
}

static bool term_matches(const json_t *term, const json_t *node)
{
    json_t *exprs = json_object_get(term, "matchExpressions");
    json_t *fields = json_object_get(term, "matchFields");
    if (json_array_size(exprs) == 0 && json_array_size(fields) == 0)
        return false; /* an empty term selects nothing */
    json_t *labels = ksc_at(node, "metadata.labels");
    size_t i;
    json_t *e;
    json_array_foreach(exprs, i, e)
    {
        if (!expr_matches(e, labels))
            return false;
    }
    json_t *fmap = json_pack("{s:s}", "metadata.name", ksc_str(node, "metadata.name"));
    bool ok = true;
    json_array_foreach(fields, i, e)
    {
        if (!expr_matches(e, fmap))
            ok = false;
    }
    json_decref(fmap);
    return ok;
}

bool ksc_node_matches(const json_t *pod_spec, const json_t *node)
{
    json_t *sel = json_object_get(pod_spec, "nodeSelector");
    json_t *req =
        ksc_at(pod_spec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    if (json_object_size(sel) == 0 && !json_is_object(req))
        return true; /* the common case: no need to look at the node */
    json_t *labels = ksc_at(node, "metadata.labels");
    const char *k;
    json_t *v;
    json_object_foreach(sel, k, v)
    {
        json_t *l = json_object_get(labels, k);
        if (!json_is_string(l) || !json_is_string(v) ||
            strcmp(json_string_value(l), json_string_value(v)))
            return false;
    }
    if (!json_is_object(req))
        return true;
    size_t i;
    json_t *term;
    json_array_foreach(json_object_get(req, "nodeSelectorTerms"), i, term)
    {
        if (term_matches(term, node))
            return true;
    }
    return false;
}

static bool tolerates(const json_t *tol, const json_t *taint)
{
    const char *eff = ksc_str(tol, "effect"), *op = ksc_str(tol, "operator");
    const char *key = ksc_str(tol, "key");
    bool exists = !strcmp(op, "Exists");
    if (*eff && strcmp(eff, ksc_str(taint, "effect")))
        return false;
    if (!*key)
        return exists; /* an empty key with Exists tolerates every taint */
    if (strcmp(key, ksc_str(taint, "key")))
        return false;
    return exists || !strcmp(ksc_str(tol, "value"), ksc_str(taint, "value"));
}

static bool tolerated_by(const json_t *tols, const json_t *taint)
{
    size_t i;
    json_t *t;
    json_array_foreach(tols, i, t)
    {
        if (tolerates(t, taint))
            return true;
    }
    return false;
}

const json_t *ksc_untolerated_taint(const json_t *pod_spec, const json_t *extra, const json_t *node,
                                    bool noexec_only)
{
    json_t *tols = json_object_get(pod_spec, "tolerations");
    size_t i;
    json_t *taint;
    json_array_foreach(ksc_at(node, "spec.taints"), i, taint)
    {
        const char *eff = ksc_str(taint, "effect");
        if (strcmp(eff, "NoExecute") && (noexec_only || strcmp(eff, "NoSchedule")))
            continue;
        if (!tolerated_by(tols, taint) && !tolerated_by(extra, taint))
            return taint;
    }
    return NULL;
}

json_t *ksc_ds_tolerations(const json_t *pod_spec)
{
    static const char *const keys[][2] = {
        {"node.kubernetes.io/not-ready", "NoExecute"},
        {"node.kubernetes.io/unreachable", "NoExecute"},
        {"node.kubernetes.io/disk-pressure", "NoSchedule"},
        {"node.kubernetes.io/memory-pressure", "NoSchedule"},
        {"node.kubernetes.io/pid-pressure", "NoSchedule"},
        {"node.kubernetes.io/unschedulable", "NoSchedule"},
        {"node.kubernetes.io/network-unavailable", "NoSchedule"},
    };
    bool host_net = json_is_true(json_object_get(pod_spec, "hostNetwork"));
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (i == 6 && !host_net)
            continue;
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "key", keys[i][0], "operator",
                                             "Exists", "effect", keys[i][1]));
    }
    return arr;
}

static const char *ready_status(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach(ksc_at(node, "status.conditions"), i, c)
    {
        if (!strcmp(ksc_str(c, "type"), "Ready"))
            return ksc_str(c, "status");
    }
    return "";
}

bool ksc_node_ready(const json_t *node)
{
    return !strcmp(ready_status(node), "True");
}

bool ksc_node_changed(const json_t *old, const json_t *now)
{
    static const char *const paths[] = {"metadata.labels", "spec.taints", "spec.unschedulable",
                                        "status.allocatable", "status.capacity"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (!kc_json_equal(ksc_at(old, paths[i]), ksc_at(now, paths[i])))
            return true;
    return strcmp(ready_status(old), ready_status(now)) != 0;
}

/* ---- resources ---- */

static void add_to(json_t *acc, const char *k, long long v, bool max)
{
    long long cur = json_integer_value(json_object_get(acc, k));
    json_object_set_new(acc, k, json_integer(max ? (v > cur ? v : cur) : cur + v));
}

/* One container's requests, with limits standing in for unset requests (API defaulting). */
static json_t *container_requests(const json_t *ctr)
{
    json_t *out = json_object();
    json_t *req = ksc_at(ctr, "resources.requests"), *lim = ksc_at(ctr, "resources.limits");
    const char *k;
    json_t *v;
    long long q;
    json_object_foreach(lim, k, v)
    {
        if (!json_object_get(req, k) && ksc_json_quantity(v, &q))
            add_to(out, k, q, false);
    }
    json_object_foreach(req, k, v)
    {
        if (ksc_json_quantity(v, &q))
            add_to(out, k, q, false);
    }
    return out;
}

json_t *ksc_pod_requests(const json_t *pod)
{
    json_t *acc = json_object(), *spec = json_object_get(pod, "spec");
    size_t i;
    json_t *ctr;
    const char *k;
    json_t *v;
    json_array_foreach(json_object_get(spec, "containers"), i, ctr)
    {
        json_t *r = container_requests(ctr);
        json_object_foreach(r, k, v) add_to(acc, k, json_integer_value(v), false);
        json_decref(r);
    }
    json_array_foreach(json_object_get(spec, "initContainers"), i, ctr)
    {
        json_t *r = container_requests(ctr);
        json_object_foreach(r, k, v) add_to(acc, k, json_integer_value(v), true);
        json_decref(r);
    }
    long long q;
    json_object_foreach(json_object_get(spec, "overhead"), k, v)
    {
        if (ksc_json_quantity(v, &q))
            add_to(acc, k, q, false);
    }
    return acc;
}

json_t *ksc_node_allocatable(const json_t *node)
{
    json_t *a = ksc_at(node, "status.allocatable"), *out = json_object();
    if (!json_is_object(a))
        a = ksc_at(node, "status.capacity");
    const char *k;
    json_t *v;
    long long q;
    json_object_foreach(a, k, v)
    {
        if (ksc_json_quantity(v, &q))
            json_object_set_new(out, k, json_integer(q));
    }
    return out;
}

/* ---- host ports (the NodePorts filter) ---- */

json_t *ksc_pod_host_ports(const json_t *pod)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *ctr, *port;
    json_array_foreach(ksc_at(pod, "spec.containers"), i, ctr)
    {
        json_array_foreach(json_object_get(ctr, "ports"), j, port)
        {
            long long hp = json_integer_value(json_object_get(port, "hostPort"));
            if (hp <= 0)
                continue;
            const char *proto = ksc_str(port, "protocol"), *ip = ksc_str(port, "hostIP");
            char key[160];
            snprintf(key, sizeof(key), "%s/%lld/%s", *proto ? proto : "TCP", hp,
                     *ip ? ip : "0.0.0.0");
            json_array_append_new(out, json_string(key));
        }
    }
    return out;
}

static bool split_port(const char *key, char *proto, size_t psz, long long *port, const char **ip)
{
    const char *s1 = strchr(key, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s1 || !s2)
        return false;
    snprintf(proto, psz, "%.*s", (int)(s1 - key), key);
    *port = strtoll(s1 + 1, NULL, 10);
    *ip = s2 + 1;
    return true;
}

bool ksc_host_ports_conflict(const json_t *used, const json_t *want)
{
    size_t i;
    json_t *w;
    json_array_foreach(want, i, w)
    {
        char wp[32], up[32];
        long long wport, uport;
        const char *wip, *uip, *k;
        if (!split_port(json_string_value(w), wp, sizeof(wp), &wport, &wip))
            continue;
        json_t *v;
        json_object_foreach((json_t *)used, k, v)
        {
            if (!split_port(k, up, sizeof(up), &uport, &uip))
                continue;
            if (uport != wport || strcmp(up, wp) != 0)
                continue;
            /* 0.0.0.0 takes the port on every address. */
            if (!strcmp(wip, "0.0.0.0") || !strcmp(uip, "0.0.0.0") || !strcmp(uip, wip))
                return true;
        }
    }
    return false;
}

/* ---- filtering and scoring ---- */

typedef struct fit {
    const char *reasons[8];
    char buf[8][160];
    int n;
    double score;
} fit;

static void add_reason(fit *f, const char *fmt, const char *a, const char *b)
{
    if (f->n >= 8)
        return;
    snprintf(f->buf[f->n], sizeof f->buf[f->n], fmt, a, b);
    f->reasons[f->n] = f->buf[f->n];
    f->n++;
}

/* The pod's side of the scan, looked up once. */
typedef struct podside {
    const json_t *spec, *tols;
    json_t *hports; /* ksc_pod_host_ports */
    long long cpu, mem;
    const json_t *req;
    bool constrained; /* has a nodeSelector or required node affinity */
} podside;

static bool tolerates_key(const podside *p, const char *key)
{
    json_t *t = json_pack("{s:s, s:s}", "key", key, "effect", "NoSchedule");
    bool ok = tolerated_by(p->tols, t);
    json_decref(t);
    return ok;
}

/* The real scheduler's filters in its order (NodeUnschedulable, TaintToleration, NodeAffinity,
 * NodePorts, NodeResourcesFit): the first that fails gives the node's reason(s). Cache lock held.
 */
static void check_node(ks_controllers *c, const podside *p, const ksc_ent *ne, fit *f)
{
    f->n = 0;
    f->score = 0;
    if (ne->unschedulable && !tolerates_key(p, "node.kubernetes.io/unschedulable")) {
        add_reason(f, "node(s) were unschedulable%s%s", "", "");
        return;
    }
    const json_t *taint = ne->tainted ? ksc_untolerated_taint(p->spec, NULL, ne->obj, false) : NULL;
    if (taint) {
        add_reason(f, "node(s) had untolerated taint {%s: %s}", ksc_str(taint, "key"),
                   ksc_str(taint, "value"));
        return;
    }
    /* The node lifecycle controller taints nodes that are not Ready. */
    if (!ne->ready && !tolerates_key(p, "node.kubernetes.io/not-ready")) {
        add_reason(f, "node(s) had untolerated taint {%s: %s}", "node.kubernetes.io/not-ready", "");
        return;
    }
    if (p->constrained && !ksc_node_matches(p->spec, ne->obj)) {
        add_reason(f, "node(s) didn't match Pod's node affinity/selector%s%s", "", "");
        return;
    }
    const ksc_usage *u = ksc_usage_locked(c, ne->name);
    if (json_array_size(p->hports) && u && ksc_host_ports_conflict(u->ports, p->hports)) {
        add_reason(f, "node(s) didn't have free ports for the requested pod ports%s%s", "", "");
        return;
    }
    long long ucpu = u ? u->cpu : 0, umem = u ? u->mem : 0, npods = u ? u->npods : 0;
    if (ne->apods >= 0 && (npods + 1) * 1000 > ne->apods)
        add_reason(f, "Too many pods%s%s", "", "");
    if (p->cpu > 0 && ucpu + p->cpu > ne->acpu)
        add_reason(f, "Insufficient %s%s", "cpu", "");
    if (p->mem > 0 && umem + p->mem > ne->amem)
        add_reason(f, "Insufficient %s%s", "memory", "");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p->req, k, v)
    {
        long long want = json_integer_value(v);
        if (want <= 0 || !strcmp(k, "pods") || !strcmp(k, "cpu") || !strcmp(k, "memory"))
            continue;
        long long have = json_integer_value(json_object_get(ne->alloc, k));
        if (json_integer_value(json_object_get(u ? u->sum : NULL, k)) + want > have)
            add_reason(f, "Insufficient %s%s", k, "");
    }
    /* Least allocated: the mean free fraction of cpu and memory after placing the pod, counting
     * pods without requests as small ones (as the real scheduler does) so that they spread. */
    long long nzc = (u ? u->nz_cpu : 0) + (p->cpu > 0 ? p->cpu : KSC_DEFAULT_CPU_MILLI);
    long long nzm = (u ? u->nz_mem : 0) + (p->mem > 0 ? p->mem : KSC_DEFAULT_MEM_MILLI);
    if (ne->acpu > 0)
        f->score += (double)(ne->acpu - nzc) / (double)ne->acpu / 2.0;
    if (ne->amem > 0)
        f->score += (double)(ne->amem - nzm) / (double)ne->amem / 2.0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match ...". */
static void failure_message(json_t *counts, size_t nnodes, char *out, size_t size)
{
    if (nnodes == 0) {
        snprintf(out, size, "no nodes available to schedule pods");
        return;
    }
    size_t n = json_object_size(counts), i = 0;
    char **parts = calloc(n ? n : 1, sizeof *parts);
    const char *k;
    json_t *v;
    json_object_foreach(counts, k, v)
    {
        if (parts && asprintf(&parts[i], "%lld %s", (long long)json_integer_value(v), k) >= 0)
            i++;
    }
    if (parts)
        qsort(parts, i, sizeof *parts, cmp_str);
    size_t len = (size_t)snprintf(out, size, "0/%zu nodes are available: ", nnodes);
    for (size_t j = 0; j < i; j++) {
        if (len < size)
            len += (size_t)snprintf(out + len, size - len, "%s%s", j ? ", " : "", parts[j]);
        free(parts[j]);
    }
    if (len < size)
        snprintf(out + len, size - len, ".");
    free(parts);
}

typedef struct cond_req {
    const char *status, *reason, *message;
} cond_req;

static kc_code scheduled_condition(void *ud, json_t *pod, kc_err *err)
{
    const cond_req *r = ud;
    json_t *st = json_object_get(pod, "status");
    if (!json_is_object(st)) {
        st = json_object();
        json_object_set_new(pod, "status", st);
    }
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(st, "conditions", conds);
    }
    size_t i, at = json_array_size(conds);
    json_t *c, *cur = NULL;
    json_array_foreach(conds, i, c)
    {
        if (!strcmp(ksc_str(c, "type"), "PodScheduled")) {
            cur = c;
            at = i;
            break;
        }
    }
    if (cur && !strcmp(ksc_str(cur, "status"), r->status) &&
        !strcmp(ksc_str(cur, "reason"), r->reason) && !strcmp(ksc_str(cur, "message"), r->message))
        return KC_OK;
    char now[32];
    ks_now_rfc3339(now);
    json_t *n = json_pack("{s:s, s:s, s:n, s:s}", "type", "PodScheduled", "status", r->status,
                          "lastProbeTime", "lastTransitionTime", now);
    if (n && *r->reason) {
        json_object_set_new(n, "reason", json_string(r->reason));
        json_object_set_new(n, "message", json_string(r->message));
    }
    if (n && cur)
        json_array_set_new(conds, at, n);
    else if (n)
        json_array_append_new(conds, n);
    if (!*ksc_str(pod, "status.phase"))
        json_object_set_new(st, "phase", json_string("Pending"));
    return KC_OK;
}

static kc_code bind_fn(void *ud, json_t *pod, kc_err *err)
{
    const char *bound = ksc_str(pod, "spec.nodeName");
    if (*bound)
        return kc_err_set(err, KC_ECONFLICT,
                          "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is "
                          "already assigned to node \"%s\"",
                          ksc_str(pod, "metadata.name"), ksc_str(pod, "metadata.name"), bound);
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec))
        return kc_err_set(err, KC_EINVALID, "pod %s has no spec", ksc_str(pod, "metadata.name"));
    json_object_set_new(spec, "nodeName", json_string(ud));
    return KC_OK;
}

/* ---- retries: per-pod backoff (1 s doubling to 10 s), as the real scheduler's ---- */

typedef struct backoff {
    int attempts;
    long long next_ms;
} backoff;

static long long backoff_left(ks_controllers *c, const char *key)
{
    backoff *b = kc_map_get(c->sched_backoff, key);
    long long left = b ? b->next_ms - ksc_now_ms() : 0;
    return left > 0 ? left : 0;
}

static void backoff_fail(ks_controllers *c, const char *key)
{
    backoff *b = kc_map_get(c->sched_backoff, key);
    if (!b && (b = calloc(1, sizeof *b)) && kc_map_put(c->sched_backoff, key, b, NULL) != KC_OK) {
        free(b);
        b = NULL;
    }
    if (!b)
        return;
    long long delay = 1000LL << (b->attempts < 4 ? b->attempts : 4);
    b->attempts++;
    b->next_ms = ksc_now_ms() + (delay > 10000 ? 10000 : delay);
}

static void backoff_forget(ks_controllers *c, const char *key)
{
    free(kc_map_remove(c->sched_backoff, key));
}

/* How many feasible nodes end the search: all of a small cluster, a shrinking share of a big
 * one (the real scheduler's percentageOfNodesToScore), at least 100. */
static size_t feasible_wanted(size_t n)
{
    if (n < 100)
        return n;
    long long pct = 50 - (long long)n / 125;
    if (pct < 5)
        pct = 5;
    size_t want = n * (size_t)pct / 100;
    return want < 100 ? 100 : want;
}

typedef struct pick {
    char *best;
    size_t nnodes;
    json_t *counts; /* failure reason → nodes */
} pick;

static void pick_node(ks_controllers *c, const json_t *pod, const json_t *req, pick *p)
{
    const ksc_ent **nodes = NULL;
    podside ps = {.spec = json_object_get(pod, "spec"), .req = req};
    ps.tols = json_object_get(ps.spec, "tolerations");
    ps.hports = ksc_pod_host_ports(pod);
    ps.cpu = json_integer_value(json_object_get(req, "cpu"));
    ps.mem = json_integer_value(json_object_get(req, "memory"));
    ps.constrained =
        json_object_size(json_object_get(ps.spec, "nodeSelector")) > 0 ||
        json_is_object(ksc_at(ps.spec, "affinity.nodeAffinity."
                                       "requiredDuringSchedulingIgnoredDuringExecution"));
    ksc_lock(c);
    size_t n = ksc_nodes_locked(c, &nodes), feasible = 0, want = feasible_wanted(n), j;
    size_t start = n ? c->sched_next % n : 0;
    const char *best = NULL;
    double best_score = -1e9;
    fit f;
    for (j = 0; j < n && (!want || feasible < want); j++) {
        const ksc_ent *ne = nodes[(start + j) % n];
        check_node(c, &ps, ne, &f);
        const char *nn = ne->name;
        if (f.n == 0) {
            feasible++;
            /* Ties go to the first met; scans start one node further each time. */
            if (!best || f.score > best_score) {
                best = nn;
                best_score = f.score;
            }
            continue;
        }
        for (int r = 0; r < f.n; r++)
            add_to(p->counts, f.reasons[r], 1, false);
    }
    c->sched_next = start + j + 1;
    p->best = best ? strdup(best) : NULL;
    p->nnodes = n;
    ksc_unlock(c);
    free(nodes);
    json_decref(ps.hports);
}

kc_code ksc_sched_sync(ksc_worker *w, const char *key, kc_err *err)
{
    ks_controllers *c = w->c;
    if (!strcmp(key, "*")) {
        json_t *keys = ksc_pending_keys(c);
        size_t i;
        json_t *k;
        json_array_foreach(keys, i, k)
        {
            kc_workqueue_add_after(w->q, json_string_value(k),
                                   backoff_left(c, json_string_value(k)));
        }
        json_decref(keys);
        return KC_OK;
    }
    json_t *pod = ksc_get(c, KSC_K_POD, key);
    const char *sched = ksc_str(pod, "spec.schedulerName");
    if (!pod || *ksc_str(pod, "spec.nodeName") || ksc_deleting(pod) || ksc_pod_terminated(pod) ||
        (*sched && strcmp(sched, "default-scheduler"))) {
        backoff_forget(c, key);
        json_decref(pod);
        return KC_OK;
    }
    long long wait = backoff_left(c, key);
    if (wait > 0) {
        kc_workqueue_add_after(w->q, key, wait);
        json_decref(pod);
        return KC_OK;
    }
    kc_code rc = KC_OK;
    const ks_rtype *pt = ksc_type(c, KSC_K_POD);
    json_t *req = ksc_pod_requests(pod);
    const char *ns = ksc_str(pod, "metadata.namespace"), *name = ksc_str(pod, "metadata.name");
    pick p = {.counts = json_object()};
    pick_node(c, pod, req, &p);
    if (!pt)
        goto out;
    if (p.best) {
        rc = ksc_mutate(w, pt, ns, name, KS_WRITE_MAIN, bind_fn, p.best, err);
        if (rc == KC_ECONFLICT || rc == KC_ENOTFOUND) {
            kc_err_clear(err);
            rc = KC_OK;
            goto out;
        }
        if (rc != KC_OK)
            goto out;
        backoff_forget(c, key);
        cond_req cr = {"True", "", ""};
        ksc_mutate(w, pt, ns, name, KS_WRITE_STATUS, scheduled_condition, &cr, NULL);
        ksc_event(c, w->name, pod, "Normal", "Scheduled", "Successfully assigned %s/%s to %s", ns,
                  name, p.best);
        goto out;
    }
    char msg[1024];
    failure_message(p.counts, p.nnodes, msg, sizeof msg);
    backoff_fail(c, key);
    cond_req cr = {"False", "Unschedulable", msg};
    rc = ksc_mutate(w, pt, ns, name, KS_WRITE_STATUS, scheduled_condition, &cr, err);
    if (rc == KC_ENOTFOUND) {
        kc_err_clear(err);
        rc = KC_OK;
    }
    ksc_event(c, w->name, pod, "Warning", "FailedScheduling", "%s", msg);
out:
    free(p.best);
    json_decref(p.counts);
    json_decref(req);
    json_decref(pod);
    return rc;
}
