/* ks_kubelet_pod: the pod lifecycle on kubesim's nodes (admission of extended resources, Pending →
 * init containers → Running → Ready, termination, graceful deletion) and the status it writes,
 * never overwriting a terminal phase that another writer (nodesim, a test) set. */
#include "ks_ctl_int.h"
#include "ks_kubelet_int.h"

#include "kc_log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- references and handles ---- */

static void pod_free(kl_pod *p)
{
    for (size_t i = 0; i < p->n_init; i++)
        kl_ctr_clear(&p->init[i]);
    for (size_t i = 0; i < p->n_ctrs; i++)
        kl_ctr_clear(&p->ctrs[i]);
    free(p->init);
    free(p->ctrs);
    free(p->key);
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p->node);
    free(p->reason);
    free(p->message);
    free(p->sa_root);
    json_decref(p->obj);
    json_decref(p->ext);
    free(p);
}

void kl_pod_ref(kl_pod *p)
{
    p->refs++;
}

void kl_pod_unref(kl_pod *p)
{
    if (--p->refs == 0 && p->removed)
        pod_free(p);
}

static void on_closed(uv_handle_t *h)
{
    kl_pod_unref(h->data);
}

void kl_timer_init(kl_pod *p, uv_timer_t *t)
{
    uv_timer_init(&p->kl->loop, t);
    t->data = p;
    p->refs++;
}

void kl_close(kl_pod *p, uv_handle_t *h)
{
    if (uv_is_closing(h))
        return;
    h->data = p;
    uv_close(h, on_closed);
}

void kl_ctr_clear(kl_ctr *c)
{
    free(c->name);
    free(c->image);
    free(c->message);
    free(c->pull_err);
    json_decref(c->last_term);
}

/* ---- helpers ---- */

static const char *sget(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

bool kl_is_terminal(const char *phase)
{
    return phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

/* ---- extended resources ---- */

static bool is_extended(const char *name)
{
    return strchr(name, '/') && strncmp(name, "kubernetes.io/", 14) != 0 &&
           strncmp(name, "requests.", 9) != 0;
}

double kl_qty(const json_t *v)
{
    double d = 0;
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_string(v) && ks_quantity_parse(json_string_value(v), &d))
        return d;
    return 0;
}

/* Effective extended requests: max(sum of containers, each init container). */
static json_t *ext_requests(const json_t *spec)
{
    json_t *sum = json_object();
    const char *lists[] = {"containers", "initContainers"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");
            json_t *mine = json_object();
            const char *which[] = {"limits", "requests"};
            for (int w = 0; w < 2; w++) {
                const char *k;
                json_t *v;
                json_object_foreach((json_t *)json_object_get(res, which[w]), k, v)
                {
                    if (!is_extended(k))
                        continue;
                    double q = kl_qty(v);
                    if (q > kl_qty(json_object_get(mine, k)))
                        json_object_set_new(mine, k, json_real(q));
                }
            }
            const char *k;
            json_t *v;
            json_object_foreach(mine, k, v)
            {
                double have = kl_qty(json_object_get(sum, k));
                double q = json_real_value(v);
                json_object_set_new(sum, k, json_real(l == 0 ? have + q : (q > have ? q : have)));
            }
            json_decref(mine);
        }
    }
    return sum;
}

static void ext_release(kl_pod *p)
{
    if (!p->ext)
        return;
    kl_node *n = kc_map_get(p->kl->nodes, p->node);
    const char *k;
    json_t *v;
    if (n)
        json_object_foreach(p->ext, k, v) json_object_set_new(
            n->used, k, json_real(kl_qty(json_object_get(n->used, k)) - json_real_value(v)));
    json_decref(p->ext);
    p->ext = NULL;
}

/* The device plugins' Allocate, called per container: a container asking more of a resource than
 * the node's allocate limits allow is refused, and the kubelet rejects the pod with
 * UnexpectedAdmissionError and the plugin's error. */
static bool ext_allocate(kl_pod *p, const kl_node *n)
{
    const json_t *spec = json_object_get(p->obj, "spec");
    const char *lists[] = {"initContainers", "containers"};
    for (int l = 0; n->alloc_limits && l < 2; l++) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");
            const char *k;
            json_t *rule;
            json_object_foreach(n->alloc_limits, k, rule)
            {
                double want = kl_qty(json_object_get(json_object_get(res, "limits"), k));
                double req = kl_qty(json_object_get(json_object_get(res, "requests"), k));
                const json_t *max = json_object_get(rule, "max");
                const char *text = json_string_value(json_object_get(rule, "error"));
                if (req > want)
                    want = req;
                if (!json_is_integer(max) || !text || want <= (double)json_integer_value(max))
                    continue;
                char found[32], desc[600], msg[800];
                snprintf(found, sizeof(found), "%.0f", want);
                const char *at = strstr(text, "{found}");
                if (at)
                    snprintf(desc, sizeof(desc), "%.*s%s%s", (int)(at - text), text, found,
                             at + strlen("{found}"));
                else
                    snprintf(desc, sizeof(desc), "%s", text);
                snprintf(msg, sizeof(msg),
                         "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc "
                         "= %s, which is unexpected",
                         desc);
                p->reason = strdup("UnexpectedAdmissionError");
                p->message = strdup(msg);
                return false;
            }
        }
    }
    return true;
}

/* The kubelet's admission: a pod asking for more of an extended resource than the node has left
 * is rejected (Failed, reason OutOf<resource>), as is one a device plugin refuses to allocate
 * (UnexpectedAdmissionError). */
static bool ext_admit(kl_pod *p, kl_node *n)
{
    json_t *req = ext_requests(json_object_get(p->obj, "spec"));
    if (!req || json_object_size(req) == 0) {
        json_decref(req);
        return true;
    }
    const char *k;
    json_t *v;
    bool refreshed = false;
    json_object_foreach(req, k, v)
    {
        double want = json_real_value(v);
        double cap = kl_qty(json_object_get(n->allocatable, k));
        double used = kl_qty(json_object_get(n->used, k));
        if (used + want > cap && !refreshed) {
            kl_node_refresh_devices(p->kl, n);
            refreshed = true;
            cap = kl_qty(json_object_get(n->allocatable, k));
        }
        if (used + want > cap) {
            char reason[300], msg[600];
            snprintf(reason, sizeof(reason), "OutOf%s", k);
            snprintf(msg, sizeof(msg),
                     "Pod was rejected: Node didn't have enough resource: %s, requested: %.0f, "
                     "used: %.0f, capacity: %.0f",
                     k, want, used, cap);
            p->reason = strdup(reason);
            p->message = strdup(msg);
            json_decref(req);
            return false;
        }
    }
    if (!ext_allocate(p, n)) {
        json_decref(req);
        return false;
    }
    json_object_foreach(req, k, v) json_object_set_new(
        n->used, k, json_real(kl_qty(json_object_get(n->used, k)) + json_real_value(v)));
    p->ext = req;
    return true;
}

/* The kubelet's NodePorts admission (generalFilter): a pod asking for a host port that an admitted,
 * not yet finished pod on the node holds is rejected (Failed, reason NodePorts), as the real
 * kubelet rejects a pod bound by spec.nodeName without the scheduler. */
static bool ports_admit(kl_pod *p)
{
    json_t *want = ksc_pod_host_ports(p->obj);
    if (json_array_size(want) == 0) {
        json_decref(want);
        return true;
    }
    json_t *used = json_object();
    size_t pos = 0;
    const char *k;
    void *v;
    while (used && kc_map_next(p->kl->pods, &pos, &k, &v)) {
        kl_pod *o = v;
        if (o == p || o->removed || o->stage == ST_DONE || !o->node || strcmp(o->node, p->node))
            continue;
        json_t *hp = ksc_pod_host_ports(o->obj);
        size_t i;
        json_t *x;
        json_array_foreach(hp, i, x) json_object_set_new(used, json_string_value(x), json_true());
        json_decref(hp);
    }
    bool ok = !ksc_host_ports_conflict(used, want);
    json_decref(used);
    json_decref(want);
    if (!ok) {
        p->reason = strdup("NodePorts");
        p->message = strdup("Pod was rejected: Predicate NodePorts failed: node(s) didn't have "
                            "free ports for the requested pod ports");
    }
    return ok;
}

static void quiesce_all(kl_pod *p, int sig)
{
    for (size_t i = 0; i < p->n_init; i++) {
        kl_ctr_quiesce(&p->init[i]);
        if (sig)
            kl_ctr_signal(&p->init[i], sig);
    }
    for (size_t i = 0; i < p->n_ctrs; i++) {
        kl_ctr_quiesce(&p->ctrs[i]);
        if (sig)
            kl_ctr_signal(&p->ctrs[i], sig);
    }
}

void kl_pod_write(kl_pod *p)
{
    if (p->removed || p->stage == ST_DELETING || p->stage == ST_DONE)
        return;
    kl_write_ctx w = {.p = p, .phase = kl_pod_phase(p)};
    kc_err e;
    kc_code rc = ks_mutate(p->kl->st, p->kl->t_pods, p->ns, p->name, KS_WRITE_STATUS, kl_status_cb,
                           &w, NULL, &e);
    if (rc == KC_ECANCELED) {
        /* Someone else decided the outcome: stop running it, leave the status alone. */
        p->stage = ST_DONE;
        quiesce_all(p, SIGTERM);
        ext_release(p);
        return;
    }
    if (rc != KC_OK) {
        if (rc != KC_ENOTFOUND)
            kc_warn("kubelet: pod status write failed", "pod=%s err=\"%s\"", p->key, e.msg);
        return;
    }
    if (kl_is_terminal(w.phase)) {
        p->wrote_terminal = true;
        p->stage = ST_DONE;
        quiesce_all(p, 0);
        ext_release(p);
    }
}

/* ---- lifecycle ---- */

static void finish_delete(kl_pod *p)
{
    quiesce_all(p, SIGKILL);
    ks_delete_opts o = {.grace_period_seconds = 0, .precondition_uid = p->uid};
    kc_err e;
    kc_code rc = ks_delete(p->kl->st, p->kl->t_pods, p->ns, p->name, &o, NULL, &e);
    if (rc != KC_OK && rc != KC_ENOTFOUND && rc != KC_ECONFLICT)
        kc_warn("kubelet: removing a deleted pod failed", "pod=%s err=\"%s\"", p->key, e.msg);
}

static void on_delete_timer(uv_timer_t *t)
{
    finish_delete(t->data);
}

static bool any_running(const kl_pod *p)
{
    for (size_t i = 0; i < p->n_init; i++)
        if (p->init[i].run)
            return true;
    for (size_t i = 0; i < p->n_ctrs; i++)
        if (p->ctrs[i].run)
            return true;
    return false;
}

static void begin_delete(kl_pod *p)
{
    p->stage = ST_DELETING;
    uv_timer_stop(&p->t_stage);
    uv_timer_stop(&p->t_ready);
    for (size_t i = 0; i < p->n_ctrs; i++)
        if (p->ctrs[i].state == CS_RUNNING)
            kl_event(p->kl, p, &p->ctrs[i], "Normal", "Killing", "Stopping container %s",
                     p->ctrs[i].name);
    quiesce_all(p, SIGTERM);
    ext_release(p);
    json_t *g = json_object_get(json_object_get(p->obj, "metadata"), "deletionGracePeriodSeconds");
    long long grace_ms = json_is_integer(g) ? json_integer_value(g) * 1000 : 30000;
    long long cap = atomic_load(&p->kl->grace_cap_ms);
    if (grace_ms > cap)
        grace_ms = cap;
    if (grace_ms < 0)
        grace_ms = 0;
    uv_timer_start(&p->t_stage, on_delete_timer, (uint64_t)grace_ms, 0);
}

static void assign_ip(kl_pod *p)
{
    const json_t *spec = json_object_get(p->obj, "spec");
    if (json_is_true(json_object_get(spec, "hostNetwork"))) {
        snprintf(p->ip, sizeof(p->ip), "%s", p->host_ip);
        return;
    }
    unsigned n;
    do {
        n = p->kl->ip_next++ & 0xffff;
    } while ((n & 0xff) == 0 || (n & 0xff) == 255);
    snprintf(p->ip, sizeof(p->ip), "10.244.%u.%u", n >> 8, n & 0xff);
}

static void on_ready_timer(uv_timer_t *t);

static void arm_ready(kl_pod *p)
{
    uint64_t now = kl_now(p->kl), next = UINT64_MAX;
    for (size_t i = 0; i < p->n_ctrs; i++) {
        const kl_ctr *c = &p->ctrs[i];
        if (c->state == CS_RUNNING && c->ready_at_ms > now && c->ready_at_ms < next)
            next = c->ready_at_ms;
    }
    if (next != UINT64_MAX)
        uv_timer_start(&p->t_ready, on_ready_timer, next - now, 0);
}

static void on_ready_timer(uv_timer_t *t)
{
    kl_pod *p = t->data;
    kl_pod_write(p);
    arm_ready(p);
}

static void begin_main(kl_pod *p)
{
    p->stage = ST_RUNNING;
    if (!p->ip[0])
        assign_ip(p);
    /* In order, as SyncPod starts them: a start whose image is being pulled holds the pod's
     * later starts until that pull ends (kl_pull_before_start defers them). */
    for (size_t i = 0; i < p->n_ctrs; i++)
        kl_ctr_start(&p->ctrs[i]);
    kl_pod_write(p);
    arm_ready(p);
}

/* Whether simulated init container c has exited: 1 exited 0, 0 still running, -1 exited with a
 * failure (*code, msg). Elsewhere nothing runs in it and it completes at once; on nodesim's nodes
 * nodesim plays the container runtime: the container runs until the pod's nodesim.io/init
 * annotation answers "ok" for it (NVIDIA's gates wait there for the component they wait on), or
 * "exit N: TEXT" (it failed with code N, printing TEXT). */
static int sim_init_done(const kl_ctr *c, int *code, char *msg, size_t size)
{
    kl_pod *p = c->p;
    kl_node *n = kl_node_get(p->kl, p->node);
    if (!n || !n->nodesim)
        return 1;
    char v[1024];
    if (!kl_answer(p, KL_ANSWER_INIT, c->name, v, sizeof(v)))
        return 0;
    return ks_answer_init_parse(v, code, msg, size);
}

static void sim_init_complete(kl_ctr *c)
{
    c->state = CS_TERMINATED;
    c->exit_code = 0;
    snprintf(c->reason, sizeof(c->reason), "Completed");
    ks_now_rfc3339(c->finished_at);
}

/* Runs init containers in order; a simulated one runs until sim_init_done. */
static void run_inits(kl_pod *p)
{
    while (p->cur_init < p->n_init) {
        kl_ctr *c = &p->init[p->cur_init];
        if (c->state == CS_TERMINATED && c->exit_code == 0) {
            p->cur_init++;
            continue;
        }
        if (c->map || c->state != CS_RUNNING)
            kl_ctr_start(c);
        int code = 0, done = 0;
        char msg[1024];
        if (!c->map && c->state == CS_RUNNING)
            done = sim_init_done(c, &code, msg, sizeof(msg));
        if (done < 0) {
            kl_ctr_sim_exit(c, code, msg); /* back-off, then run_inits again */
            return;
        }
        if (!done) {
            kl_pod_write(p);
            return;
        }
        sim_init_complete(c);
        p->cur_init++;
    }
    begin_main(p);
}

void kl_pod_ctr_pulled(kl_pod *p, kl_ctr *c)
{
    if (p->removed || p->stage == ST_DONE || p->stage == ST_DELETING)
        return;
    if (c->init) {
        if (p->stage == ST_INIT && &p->init[p->cur_init] == c)
            run_inits(p);
        return;
    }
    if (p->stage != ST_RUNNING)
        return;
    kl_ctr_start(c);
    kl_pod_ctr_changed(p, c);
}

/* The pod object changed (nodesim's answers among others): a simulated init container waiting
 * for its answer may be done. */
static void recheck_init(kl_pod *p)
{
    if (p->stage != ST_INIT || p->cur_init >= p->n_init)
        return;
    kl_ctr *c = &p->init[p->cur_init];
    int code;
    char msg[8];
    if (!c->map && c->state == CS_RUNNING && sim_init_done(c, &code, msg, sizeof(msg)))
        run_inits(p);
}

void kl_pod_answered(struct ks_kubelet *kl, const char *pod_key)
{
    kl_pod *p = pod_key ? kc_map_get(kl->pods, pod_key) : NULL;
    if (p)
        recheck_init(p);
}

static void pod_start(kl_pod *p)
{
    if (p->stage != ST_PENDING)
        return;
    if (!p->ip[0] && p->n_init > 0)
        assign_ip(p);
    if (p->n_init > 0) {
        p->stage = ST_INIT;
        p->cur_init = 0;
        run_inits(p);
    } else {
        begin_main(p);
    }
}

static void on_start_timer(uv_timer_t *t)
{
    pod_start(t->data);
}

void kl_pod_ctr_changed(kl_pod *p, kl_ctr *c)
{
    if (p->removed)
        return;
    if (p->stage == ST_DELETING) {
        if (!any_running(p)) {
            uv_timer_stop(&p->t_stage);
            finish_delete(p);
        }
        return;
    }
    if (p->stage == ST_DONE)
        return;
    if (p->stage == ST_INIT && c->init && c->state == CS_TERMINATED && c->exit_code == 0) {
        p->cur_init++;
        run_inits(p);
        return;
    }
    if (p->stage == ST_INIT && c->init && !c->map && c->state == CS_RUNNING &&
        p->cur_init < p->n_init && &p->init[p->cur_init] == c) {
        run_inits(p); /* a simulated init container restarted: nodesim's answer decides again */
        return;
    }
    kl_pod_write(p);
    arm_ready(p);
}

static bool ctr_init(kl_pod *p, kl_ctr *c, const json_t *spec, bool init, size_t idx)
{
    c->p = p;
    c->init = init;
    c->idx = idx;
    const char *name = sget(spec, "name", NULL);
    const char *image = sget(spec, "image", NULL);
    c->name = strdup(name ? name : "");
    c->image = strdup(image ? image : "");
    if (!c->name || !c->image)
        return false;
    c->state = CS_WAITING;
    snprintf(c->reason, sizeof(c->reason), "%s",
             init || p->n_init == 0 ? "ContainerCreating" : "PodInitializing");
    if (init)
        snprintf(c->reason, sizeof(c->reason), "PodInitializing");
    c->map = ks_image_map_match(&p->kl->imap, c->image);
    if (!init) {
        ks_probe_parse(json_object_get(spec, "startupProbe"), spec, &c->sprobe);
        ks_probe_parse(json_object_get(spec, "readinessProbe"), spec, &c->rprobe);
        ks_probe_parse(json_object_get(spec, "livenessProbe"), spec, &c->lprobe);
        /* Startup probes always succeed once: the threshold is 1 by the API's validation. */
        c->sprobe.success_threshold = 1;
    }
    /* nodesim may fail a simulated init container (an "exit" answer): it restarts with the
     * back-off timer. */
    kl_node *n = init && !c->map ? kl_node_get(p->kl, p->node) : NULL;
    if (c->map || c->sprobe.kind || c->rprobe.kind || c->lprobe.kind || p->kl->reg ||
        (n && n->nodesim)) {
        kl_timer_init(p, &c->t_backoff);
        kl_timer_init(p, &c->t_sprobe);
        kl_timer_init(p, &c->t_rprobe);
        kl_timer_init(p, &c->t_lprobe);
        c->timers_on = true;
    }
    return true;
}

static kl_pod *pod_new(struct ks_kubelet *kl, json_t *obj, kl_node *n)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const json_t *spec = json_object_get(obj, "spec");
    const char *ns = sget(meta, "namespace", NULL), *name = sget(meta, "name", NULL);
    const char *uid = sget(meta, "uid", NULL), *node = sget(spec, "nodeName", NULL);
    kl_pod *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->kl = kl;
    p->obj = json_incref(obj);
    p->ns = strdup(ns ? ns : "");
    p->name = strdup(name ? name : "");
    p->uid = strdup(uid ? uid : "");
    p->node = strdup(node ? node : "");
    if (asprintf(&p->key, "%s/%s", p->ns ? p->ns : "", p->name ? p->name : "") < 0)
        p->key = NULL;
    const json_t *cs = json_object_get(spec, "containers");
    const json_t *is = json_object_get(spec, "initContainers");
    p->n_ctrs = json_array_size(cs);
    p->n_init = json_array_size(is);
    p->ctrs = calloc(p->n_ctrs + 1, sizeof(*p->ctrs));
    p->init = calloc(p->n_init + 1, sizeof(*p->init));
    if (!p->ctrs || !p->init)
        p->n_ctrs = p->n_init = 0;
    p->refs = 1; /* dropped at the end of construction; handles keep their own */
    bool ok = p->ns && p->name && p->uid && p->node && p->key && p->ctrs && p->init;
    kl_timer_init(p, &p->t_stage);
    kl_timer_init(p, &p->t_ready);
    for (size_t i = 0; ok && i < p->n_init; i++)
        ok = ctr_init(p, &p->init[i], json_array_get(is, i), true, i);
    for (size_t i = 0; ok && i < p->n_ctrs; i++)
        ok = ctr_init(p, &p->ctrs[i], json_array_get(cs, i), false, i);
    ok = ok && kc_map_put(kl->pods, p->key, p, NULL) == KC_OK;
    if (!ok) {
        kc_error("kubelet: out of memory tracking a pod", "pod=%s/%s", ns ? ns : "",
                 name ? name : "");
        p->removed = true;
        for (size_t i = 0; i < p->n_init; i++)
            kl_ctr_close_timers(&p->init[i]);
        for (size_t i = 0; i < p->n_ctrs; i++)
            kl_ctr_close_timers(&p->ctrs[i]);
        kl_close(p, (uv_handle_t *)&p->t_stage);
        kl_close(p, (uv_handle_t *)&p->t_ready);
        kl_pod_unref(p);
        return NULL;
    }
    snprintf(p->host_ip, sizeof(p->host_ip), "%s", n->ip);
    ks_now_rfc3339(p->start_time);
    p->refs--;
    return p;
}

void kl_pod_remove(kl_pod *p, bool hard)
{
    if (p->removed)
        return;
    kc_map_remove(p->kl->pods, p->key);
    kl_answers_drop(p->kl, p->uid);
    p->removed = true;
    ext_release(p);
    quiesce_all(p, hard ? SIGKILL : SIGTERM);
    for (size_t i = 0; i < p->n_init; i++)
        kl_ctr_close_timers(&p->init[i]);
    for (size_t i = 0; i < p->n_ctrs; i++)
        kl_ctr_close_timers(&p->ctrs[i]);
    kl_pod_ref(p);
    kl_close(p, (uv_handle_t *)&p->t_stage);
    kl_close(p, (uv_handle_t *)&p->t_ready);
    kl_pod_unref(p);
}

void kl_pod_event(struct ks_kubelet *kl, ks_event_type type, json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = sget(meta, "namespace", NULL), *name = sget(meta, "name", NULL);
    const char *uid = sget(meta, "uid", NULL);
    if (!ns || !name || !uid)
        return;
    char key[600];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    kl_pod *p = kc_map_get(kl->pods, key);
    if (p && strcmp(p->uid, uid) != 0) {
        kl_pod_remove(p, true);
        ks_kl_logs_drop_pod(kl->logs, ns, name);
        p = NULL;
    }
    if (type == KS_DELETED) {
        if (p)
            kl_pod_remove(p, true);
        kl_answers_drop(kl, uid);
        ks_kl_logs_drop_pod(kl->logs, ns, name);
        return;
    }
    const char *phase = sget(json_object_get(obj, "status"), "phase", NULL);
    bool deleting = json_object_get(meta, "deletionTimestamp") != NULL;
    if (p) {
        json_decref(p->obj);
        p->obj = json_incref(obj);
        if (deleting && p->stage != ST_DELETING) {
            begin_delete(p);
        } else if (kl_is_terminal(phase) && !p->wrote_terminal && p->stage != ST_DONE &&
                   p->stage != ST_DELETING) {
            p->stage = ST_DONE;
            quiesce_all(p, SIGTERM);
            ext_release(p);
        } else {
            recheck_init(p);
        }
        return;
    }
    const char *node = sget(json_object_get(obj, "spec"), "nodeName", NULL);
    if (!node || !*node || kl_is_terminal(phase))
        return;
    kl_node *n = kl_node_get(kl, node);
    if (!n || n->external)
        return;
    p = pod_new(kl, obj, n);
    if (!p)
        return;
    if (deleting) {
        begin_delete(p);
        return;
    }
    if (!ext_admit(p, n) || !ports_admit(p)) {
        ext_release(p);
        kl_event(kl, p, NULL, "Warning", p->reason, "%s", p->message);
        kl_pod_write(p);
        p->stage = ST_DONE;
        return;
    }
    int delay = kl->sim->opts.pod_start_ms;
    if (delay <= 0) {
        pod_start(p);
        return;
    }
    kl_pod_write(p);
    uv_timer_start(&p->t_stage, on_start_timer, (uint64_t)delay, 0);
}

void kl_pod_sync(struct ks_kubelet *kl, json_t *items)
{
    kc_map *seen = kc_map_new();
    size_t i;
    json_t *obj;
    json_array_foreach(items, i, obj)
    {
        kl_pod_event(kl, KS_ADDED, obj);
        const json_t *meta = json_object_get(obj, "metadata");
        char key[600];
        const char *ns = sget(meta, "namespace", NULL), *name = sget(meta, "name", NULL);
        snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "");
        if (seen)
            kc_map_put(seen, key, (void *)1, NULL);
    }
    kl->pods_synced = true;
    if (!seen)
        return;
    /* Pods deleted while the watch was down (collected first: no map changes mid-walk). */
    kl_pod **gone = calloc(kc_map_size(kl->pods) + 1, sizeof(*gone));
    size_t n = 0, pos = 0;
    kl_pod *p;
    const char *k;
    while (gone && kc_map_next(kl->pods, &pos, &k, (void **)&p))
        if (!kc_map_get(seen, k))
            gone[n++] = p;
    for (size_t j = 0; j < n; j++) {
        ks_kl_logs_drop_pod(kl->logs, gone[j]->ns, gone[j]->name);
        kl_pod_remove(gone[j], true);
    }
    free(gone);
    kc_map_free(seen, NULL);
}

/* The pods running on node, as a NULL-terminated array (caller frees; NULL when out of memory). */
static kl_pod **running_on(struct ks_kubelet *kl, const char *node)
{
    size_t pos = 0, n = 0;
    kl_pod *p;
    kl_pod **running = calloc(kc_map_size(kl->pods) + 1, sizeof(*running));
    while (running && kc_map_next(kl->pods, &pos, NULL, (void **)&p))
        if (p->stage == ST_RUNNING && strcmp(p->node, node) == 0)
            running[n++] = p;
    return running;
}

void kl_pod_node_ready_changed(struct ks_kubelet *kl, const char *node)
{
    kl_pod **running = running_on(kl, node);
    for (size_t i = 0; running && running[i]; i++)
        kl_pod_write(running[i]);
    free(running);
}

void kl_pod_node_rebooted(struct ks_kubelet *kl, const char *node)
{
    kl_pod **running = running_on(kl, node);
    char now[32];
    ks_now_rfc3339(now);
    for (size_t i = 0; running && running[i]; i++) {
        for (size_t j = 0; j < running[i]->n_ctrs; j++) {
            kl_ctr *c = &running[i]->ctrs[j];
            /* Local processes keep running: only simulated containers "restart". */
            if (c->map || c->state != CS_RUNNING)
                continue;
            json_decref(c->last_term);
            c->last_term = json_pack("{s:i, s:s, s:s, s:s}", "exitCode", 255, "reason", "Unknown",
                                     "startedAt", c->started_at, "finishedAt", now);
            c->restarts++;
            snprintf(c->started_at, sizeof(c->started_at), "%s", now);
            kl_ctr_probes_start(c);
        }
        kl_pod_write(running[i]);
    }
    free(running);
}
