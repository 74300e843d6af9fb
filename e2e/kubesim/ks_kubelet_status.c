/* ks_kubelet_status: the pod status the kubelet writes: phase (the kubelet's getPhase rules),
 * conditions with stable transition times, container and init container statuses, IPs and QoS. */
#include "ks_kubelet_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *sget(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static const char *restart_policy(const kl_pod *p)
{
    const char *s = sget(json_object_get(p->obj, "spec"), "restartPolicy", NULL);
    return s ? s : "Always";
}

static bool ctr_ready(const kl_pod *p, const kl_ctr *c)
{
    if (c->state != CS_RUNNING || !c->started)
        return false;
    if (c->timers_on && c->rprobe.kind)
        return c->ready;
    return kl_now(p->kl) >= c->ready_at_ms;
}

static bool init_done(const kl_pod *p)
{
    return p->stage != ST_PENDING && p->stage != ST_INIT;
}

/* ---- status ---- */

const char *kl_pod_phase(const kl_pod *p)
{
    if (p->reason)
        return "Failed";
    if (p->stage == ST_PENDING)
        return "Pending";
    if (p->stage == ST_INIT) {
        const kl_ctr *c = &p->init[p->cur_init];
        bool failed = c->state == CS_TERMINATED && c->exit_code != 0;
        return failed && strcmp(restart_policy(p), "Never") == 0 ? "Failed" : "Pending";
    }
    /* The kubelet's getPhase: waiting containers that never ran keep the pod Pending; a
     * container in back-off after a run counts as stopped. */
    const char *pol = restart_policy(p);
    size_t running = 0, stopped = 0, succeeded = 0, waiting = 0;
    for (size_t i = 0; i < p->n_ctrs; i++) {
        const kl_ctr *c = &p->ctrs[i];
        if (c->state == CS_RUNNING) {
            running++;
        } else if (c->state == CS_TERMINATED) {
            stopped++;
            succeeded += c->exit_code == 0;
        } else if (c->last_term) {
            stopped++;
        } else {
            waiting++;
        }
    }
    if (waiting > 0)
        return "Pending";
    if (running > 0)
        return "Running";
    if (stopped == 0 || strcmp(pol, "Always") == 0)
        return stopped == 0 ? "Pending" : "Running";
    if (stopped == succeeded)
        return "Succeeded";
    return strcmp(pol, "Never") == 0 ? "Failed" : "Running";
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

static void set_cond(json_t *status, const char *type, bool ok, const char *reason, const char *msg,
                     const char *now)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    json_t *c = NULL;
    size_t i;
    json_t *it;
    json_array_foreach(conds, i, it)
    {
        const char *t = json_string_value(json_object_get(it, "type"));
        if (t && strcmp(t, type) == 0) {
            c = it;
            break;
        }
    }
    const char *st = ok ? "True" : "False";
    if (!c) {
        c = json_object();
        json_object_set_new(c, "type", json_string(type));
        json_array_append_new(conds, c);
    }
    const char *old = json_string_value(json_object_get(c, "status"));
    if (!old || strcmp(old, st) != 0 || !json_object_get(c, "lastTransitionTime"))
        json_object_set_new(c, "lastTransitionTime", json_string(now));
    json_object_set_new(c, "status", json_string(st));
    json_object_set_new(c, "lastProbeTime", json_null());
    if (reason)
        json_object_set_new(c, "reason", json_string(reason));
    else
        json_object_del(c, "reason");
    if (msg)
        json_object_set_new(c, "message", json_string(msg));
    else
        json_object_del(c, "message");
}

static json_t *ctr_status(const kl_pod *p, const kl_ctr *c)
{
    char image_id[400] = "";
    if (c->cid[0] || c->last_term)
        ks_proc_image_id(c->image, image_id, sizeof(image_id));
    bool ready = c->init ? (c->state == CS_TERMINATED && c->exit_code == 0) : ctr_ready(p, c);
    json_t *s = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i}", "name", c->name, "image", c->image,
                          "imageID", image_id, "ready", ready, "started",
                          c->state == CS_RUNNING && c->started, "restartCount", c->restarts);
    json_t *state = json_object();
    if (c->state == CS_RUNNING) {
        json_object_set_new(state, "running", json_pack("{s:s}", "startedAt", c->started_at));
    } else if (c->state == CS_TERMINATED) {
        json_t *t = json_pack("{s:i, s:s, s:s, s:s}", "exitCode", c->exit_code, "reason", c->reason,
                              "startedAt", c->started_at, "finishedAt", c->finished_at);
        if (c->cid[0])
            json_object_set_new(t, "containerID", json_string(c->cid));
        if (c->message)
            json_object_set_new(t, "message", json_string(c->message));
        json_object_set_new(state, "terminated", t);
    } else {
        json_t *w = json_pack("{s:s}", "reason", c->reason[0] ? c->reason : "ContainerCreating");
        if (c->message)
            json_object_set_new(w, "message", json_string(c->message));
        json_object_set_new(state, "waiting", w);
    }
    json_object_set_new(s, "state", state);
    json_object_set_new(s, "lastState",
                        c->last_term ? json_pack("{s:O}", "terminated", c->last_term)
                                     : json_object());
    if (c->cid[0])
        json_object_set_new(s, "containerID", json_string(c->cid));
    return s;
}

/* Names of containers failing pred, as "[a b]" for condition messages. */
static void names_where(const kl_pod *p, const kl_ctr *arr, size_t n, bool want_ready, char *buf,
                        size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    bool first = true;
    for (size_t i = 0; i < n && len < size; i++) {
        bool r = arr[i].init ? arr[i].state == CS_TERMINATED && arr[i].exit_code == 0
                             : ctr_ready(p, &arr[i]);
        if (r == want_ready)
            continue;
        len += (size_t)snprintf(buf + len, size - len, "%s%s", first ? "" : " ", arr[i].name);
        first = false;
    }
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

static const char *qos_class(const json_t *spec)
{
    bool any = false, guaranteed = true;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
    {
        const json_t *res = json_object_get(c, "resources");
        const json_t *lim = json_object_get(res, "limits");
        const json_t *req = json_object_get(res, "requests");
        const char *rs[] = {"cpu", "memory"};
        for (int k = 0; k < 2; k++) {
            const json_t *l = json_object_get(lim, rs[k]);
            const json_t *r = json_object_get(req, rs[k]);
            any = any || l || r;
            if (!l || (r && kl_qty(r) != kl_qty(l)))
                guaranteed = false;
        }
    }
    return !any ? "BestEffort" : guaranteed ? "Guaranteed" : "Burstable";
}

static bool gates_ok(const kl_pod *p, const json_t *status)
{
    size_t i, j;
    json_t *g, *c;
    json_array_foreach(json_object_get(json_object_get(p->obj, "spec"), "readinessGates"), i, g)
    {
        const char *want = sget(g, "conditionType", NULL);
        bool ok = false;
        json_array_foreach(json_object_get(status, "conditions"), j, c)
        {
            const char *t = sget(c, "type", NULL);
            const char *s = sget(c, "status", NULL);
            if (want && t && s && !strcmp(t, want) && !strcmp(s, "True"))
                ok = true;
        }
        if (!ok)
            return false;
    }
    return true;
}

kc_code kl_status_cb(void *ud, json_t *obj, kc_err *err)
{
    kl_write_ctx *w = ud;
    kl_pod *p = w->p;
    const char *uid = sget(json_object_get(obj, "metadata"), "uid", NULL);
    if (!uid || strcmp(uid, p->uid) != 0)
        return kc_err_set(err, KC_ECANCELED, "pod %s was replaced", p->key);
    json_t *status = obj_at(obj, "status");
    if (kl_is_terminal(sget(status, "phase", NULL)) && !p->wrote_terminal)
        return kc_err_set(err, KC_ECANCELED, "pod %s finished by another writer", p->key);
    char now[32];
    ks_now_rfc3339(now);
    bool terminal = kl_is_terminal(w->phase);
    json_object_set_new(status, "phase", json_string(w->phase));
    if (p->reason) {
        json_object_set_new(status, "reason", json_string(p->reason));
        json_object_set_new(status, "message", json_string(p->message ? p->message : ""));
    }
    if (p->host_ip[0]) {
        json_object_set_new(status, "hostIP", json_string(p->host_ip));
        json_object_set_new(status, "hostIPs", json_pack("[{s:s}]", "ip", p->host_ip));
    }
    if (p->ip[0]) {
        json_object_set_new(status, "podIP", json_string(p->ip));
        json_object_set_new(status, "podIPs", json_pack("[{s:s}]", "ip", p->ip));
    }
    if (p->start_time[0])
        json_object_set_new(status, "startTime", json_string(p->start_time));
    if (!json_object_get(status, "qosClass"))
        json_object_set_new(status, "qosClass",
                            json_string(qos_class(json_object_get(obj, "spec"))));
    set_cond(status, "PodScheduled", true, NULL, NULL, now);
    if (p->reason) /* rejected: the real kubelet writes only phase, reason and message */
        return KC_OK;
    set_cond(status, "PodReadyToStartContainers", p->stage != ST_PENDING, NULL, NULL, now);
    char names[1024], msg[1100];
    if (init_done(p)) {
        set_cond(status, "Initialized", true, NULL, NULL, now);
    } else {
        names_where(p, p->init, p->n_init, true, names, sizeof(names));
        snprintf(msg, sizeof(msg), "containers with incomplete status: %s", names);
        set_cond(status, "Initialized", false, "ContainersNotInitialized", msg, now);
    }
    bool all_ready = p->n_ctrs > 0;
    for (size_t i = 0; i < p->n_ctrs; i++)
        all_ready = all_ready && ctr_ready(p, &p->ctrs[i]);
    kl_node *n = kc_map_get(p->kl->nodes, p->node);
    bool node_ok = !n || n->ready;
    if (terminal) {
        set_cond(status, "ContainersReady", false, "PodCompleted", NULL, now);
        set_cond(status, "Ready", false, "PodCompleted", NULL, now);
    } else if (!all_ready) {
        names_where(p, p->ctrs, p->n_ctrs, true, names, sizeof(names));
        snprintf(msg, sizeof(msg), "containers with unready status: %s", names);
        set_cond(status, "ContainersReady", false, "ContainersNotReady", msg, now);
        set_cond(status, "Ready", false, "ContainersNotReady", msg, now);
    } else {
        set_cond(status, "ContainersReady", true, NULL, NULL, now);
        if (!node_ok) {
            snprintf(msg, sizeof(msg), "node %s is not ready", p->node);
            set_cond(status, "Ready", false, "NodeNotReady", msg, now);
        } else if (!gates_ok(p, status)) {
            set_cond(status, "Ready", false, "ReadinessGatesNotReady",
                     "the status of pod readiness gates is not \"True\"", now);
        } else {
            set_cond(status, "Ready", true, NULL, NULL, now);
        }
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < p->n_ctrs; i++)
        json_array_append_new(arr, ctr_status(p, &p->ctrs[i]));
    json_object_set_new(status, "containerStatuses", arr);
    if (p->n_init) {
        arr = json_array();
        for (size_t i = 0; i < p->n_init; i++)
            json_array_append_new(arr, ctr_status(p, &p->init[i]));
        json_object_set_new(status, "initContainerStatuses", arr);
    }
    return KC_OK;
}
