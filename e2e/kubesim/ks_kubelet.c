/* ks_kubelet: kubesim's kubelet for its simulated nodes: a libuv loop thread owning every pod's
 * state, fed by two watch threads (pods, nodes) through a queue; plus logs and events. */
#include "ks_kubelet_int.h"
#include "ks_pki.h"

#include "kc_log.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_WAIT_MS 200
#define STOP_KILL_MS  1500

uint64_t kl_now(struct ks_kubelet *kl)
{
    return uv_now(&kl->loop);
}

/* ---- the queue from the watch threads to the loop ---- */

static void push(struct ks_kubelet *kl, int kind, ks_event_type type, json_t *obj)
{
    pthread_mutex_lock(&kl->qmu);
    if (kl->qlen == kl->qcap) {
        size_t cap = kl->qcap ? kl->qcap * 2 : 256;
        kl_qev *q = realloc(kl->q, cap * sizeof(*q));
        if (!q) {
            pthread_mutex_unlock(&kl->qmu);
            kc_error("kubelet: out of memory queueing a watch event", NULL);
            json_decref(obj);
            return;
        }
        kl->q = q;
        kl->qcap = cap;
    }
    kl->q[kl->qlen++] = (kl_qev){.kind = kind, .type = type, .obj = obj};
    pthread_mutex_unlock(&kl->qmu);
    uv_async_send(&kl->async);
}

void kl_push_answered(struct ks_kubelet *kl, const char *pod_key)
{
    json_t *k = json_string(pod_key);
    if (k)
        push(kl, 4, KS_MODIFIED, k);
}

typedef struct bridge_arg {
    struct ks_kubelet *kl;
    int idx; /* 0 pods, 1 nodes */
} bridge_arg;

/* List then watch from the list's RV, relisting when the store closes the watch (too far
 * behind): the loop gets a full list it reconciles against, then the events. */
static void *bridge_main(void *arg)
{
    bridge_arg *ba = arg;
    struct ks_kubelet *kl = ba->kl;
    const ks_rtype *t = ba->idx == 0 ? kl->t_pods : kl->t_nodes;
    ks_watch *w = NULL;
    while (!atomic_load(&kl->stopping)) {
        kc_err e;
        if (!w) {
            json_t *items = NULL;
            uint64_t rv = 0;
            if (ks_list(kl->st, t, NULL, NULL, &items, &rv, NULL, &e) != KC_OK) {
                kc_warn("kubelet: list failed, retrying", "resource=%s err=\"%s\"", t->resource,
                        e.msg);
                usleep(WATCH_WAIT_MS * 1000);
                continue;
            }
            ks_watch_opts wo = {.rtype = t, .from_rv = rv};
            if (ks_watch_open(kl->st, &wo, &w, &e) != KC_OK) {
                json_decref(items);
                w = NULL;
                usleep(WATCH_WAIT_MS * 1000);
                continue;
            }
            push(kl, ba->idx == 0 ? 2 : 3, KS_ADDED, items);
        }
        ks_event ev = {0};
        int r = ks_watch_next(w, WATCH_WAIT_MS, &ev, &e);
        if (r == 1) {
            if (ev.type == KS_BOOKMARK)
                json_decref(ev.object);
            else
                push(kl, ba->idx, ev.type, ev.object);
        } else if (r < 0) {
            ks_watch_close(w);
            w = NULL;
        }
    }
    if (w)
        ks_watch_close(w);
    free(ba);
    return NULL;
}

/* ---- stopping ---- */

static void kill_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type != UV_PROCESS || uv_is_closing(h))
        return;
    kl_run *r = h->data;
    if (r && r->pid > 0 && !r->exited)
        kill(-r->pid, SIGKILL);
}

static void close_loop_handles(struct ks_kubelet *kl)
{
    if (!uv_is_closing((uv_handle_t *)&kl->async))
        uv_close((uv_handle_t *)&kl->async, NULL);
    if (!uv_is_closing((uv_handle_t *)&kl->t_hb))
        uv_close((uv_handle_t *)&kl->t_hb, NULL);
    if (!uv_is_closing((uv_handle_t *)&kl->t_stop))
        uv_close((uv_handle_t *)&kl->t_stop, NULL);
    if (!uv_is_closing((uv_handle_t *)&kl->t_pull))
        uv_close((uv_handle_t *)&kl->t_pull, NULL);
}

static void on_stop_timer(uv_timer_t *t)
{
    struct ks_kubelet *kl = t->data;
    uv_walk(&kl->loop, kill_walk, NULL);
    if (kl->runs == 0)
        close_loop_handles(kl);
}

static void begin_stop(struct ks_kubelet *kl)
{
    kl->stop_seen = true;
    uv_timer_stop(&kl->t_hb);
    /* Removing pods sends SIGTERM to their processes; whatever still runs after STOP_KILL_MS
     * gets SIGKILL. The loop ends once every process was reaped and every handle closed. */
    kl_pod *p;
    size_t pos = 0;
    kl_pod **all = calloc(kc_map_size(kl->pods) + 1, sizeof(*all));
    size_t n = 0;
    while (all && kc_map_next(kl->pods, &pos, NULL, (void **)&p))
        all[n++] = p;
    for (size_t i = 0; i < n; i++)
        kl_pod_remove(all[i], false);
    free(all);
    if (kl->runs == 0)
        close_loop_handles(kl);
    else
        uv_timer_start(&kl->t_stop, on_stop_timer, STOP_KILL_MS, 0);
}

void kl_runs_changed(struct ks_kubelet *kl)
{
    if (kl->stop_seen && kl->runs == 0)
        close_loop_handles(kl);
}

static void on_async(uv_async_t *a)
{
    struct ks_kubelet *kl = a->data;
    if (kl->stop_seen)
        return;
    pthread_mutex_lock(&kl->qmu);
    kl_qev *q = kl->q;
    size_t n = kl->qlen;
    kl->q = NULL;
    kl->qlen = kl->qcap = 0;
    pthread_mutex_unlock(&kl->qmu);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&kl->stopping)) {
            json_decref(q[i].obj);
            continue;
        }
        switch (q[i].kind) {
        case 0:
            kl_pod_event(kl, q[i].type, q[i].obj);
            break;
        case 1:
            kl_node_event(kl, q[i].type, q[i].obj);
            break;
        case 2:
            kl_pod_sync(kl, q[i].obj);
            break;
        case 4:
            kl_pod_answered(kl, json_string_value(q[i].obj));
            break;
        case 3:
            kl_node_sync(kl, q[i].obj);
            break;
        }
        json_decref(q[i].obj);
    }
    free(q);
    if (atomic_load(&kl->stopping))
        begin_stop(kl);
}

static void *loop_main(void *arg)
{
    struct ks_kubelet *kl = arg;
    uv_run(&kl->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- events ---- */

void kl_event(struct ks_kubelet *kl, const kl_pod *p, const kl_ctr *c, const char *type,
              const char *reason, const char *fmt, ...)
{
    if (!atomic_load(&kl->events) || !kl->t_events)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char now[32], name[600], field[300] = "";
    ks_now_rfc3339(now);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, sizeof(name), "%s.%llx", p->name,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    if (c)
        snprintf(field, sizeof(field), "spec.%s{%s}", c->init ? "initContainers" : "containers",
                 c->name);
    const char *rv =
        json_string_value(json_object_get(json_object_get(p->obj, "metadata"), "resourceVersion"));
    json_t *ev = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:{s:s, s:s},"
        " s:s, s:s, s:i, s:s, s:n, s:s, s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", p->ns,
        "involvedObject", "kind", "Pod", "namespace", p->ns, "name", p->name, "uid", p->uid,
        "apiVersion", "v1", "resourceVersion", rv ? rv : "", "fieldPath", field, "reason", reason,
        "message", msg, "source", "component", "kubelet", "host", p->node, "firstTimestamp", now,
        "lastTimestamp", now, "count", 1, "type", type, "eventTime", "reportingComponent",
        "kubelet", "reportingInstance", p->node);
    if (!ev)
        return;
    if (!*field)
        json_object_del(json_object_get(ev, "involvedObject"), "fieldPath");
    kc_err e;
    if (ks_create(kl->st, kl->t_events, p->ns, ev, NULL, &e) != KC_OK)
        kc_debug("kubelet: event not recorded", "pod=%s reason=%s err=\"%s\"", p->key, reason,
                 e.msg);
}

/* ---- start / stop ---- */

static void kubelet_free(struct ks_kubelet *kl)
{
    if (!kl)
        return;
    for (size_t i = 0; i < kl->qlen; i++)
        json_decref(kl->q[i].obj);
    free(kl->q);
    kc_map_free(kl->pods, NULL);
    kc_map_free(kl->nodes, kl_node_free);
    kc_map_free(kl->missing, NULL);
    kl_answers_free(kl);
    ks_image_map_free(&kl->imap);
    kl_pull_free(kl);
    ks_kl_logs_free(kl->logs);
    pthread_mutex_destroy(&kl->qmu);
    free(kl);
}

static kc_code ensure_lease_namespace(struct ks_kubelet *kl, kc_err *err)
{
    if (!kl->t_ns)
        return KC_OK;
    json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                           "metadata", "name", "kube-node-lease");
    kc_err e;
    kc_code rc = ks_create(kl->st, kl->t_ns, NULL, ns, NULL, &e);
    if (rc == KC_OK || rc == KC_EALREADYEXISTS)
        return KC_OK;
    if (err)
        *err = e;
    kc_err_prefix(err, "kubelet: creating namespace kube-node-lease");
    return rc;
}

kc_code ks_kubelet_start(ks_sim *sim, kc_err *err)
{
    if (!sim || !sim->store)
        return kc_err_set(err, KC_EARG, "ks_kubelet_start: the simulator has no store");
    if (sim->kubelet)
        return kc_err_set(err, KC_EARG, "ks_kubelet_start: the kubelet is already running");
    kc_code rc = KC_OK;
    struct ks_kubelet *kl = calloc(1, sizeof(*kl));
    if (!kl)
        return kc_err_set(err, KC_ENOMEM, "out of memory starting the kubelet");
    pthread_mutex_init(&kl->qmu, NULL);
    atomic_init(&kl->stopping, false);
    kl->sim = sim;
    kl->st = sim->store;
    kl_reap_orphans(kl);
    atomic_init(&kl->events, true);
    atomic_init(&kl->grace_cap_ms, 1000);
    atomic_init(&kl->backoff_ms, 1000);
    atomic_init(&kl->backoff_max_ms, 30000);
    kl->t_pods = ks_store_type(kl->st, "", "v1", "pods");
    kl->t_nodes = ks_store_type(kl->st, "", "v1", "nodes");
    kl->t_ns = ks_store_type(kl->st, "", "v1", "namespaces");
    kl->t_secrets = ks_store_type(kl->st, "", "v1", "secrets");
    kl->t_cms = ks_store_type(kl->st, "", "v1", "configmaps");
    kl->t_events = ks_store_type(kl->st, "", "v1", "events");
    kl->t_leases = ks_store_type(kl->st, "coordination.k8s.io", "v1", "leases");
    if (!kl->t_pods || !kl->t_nodes) {
        rc = kc_err_set(err, KC_EARG,
                        "ks_kubelet_start: pods and nodes are not served types (register the "
                        "built-in types first)");
        goto fail;
    }
    if (sim->opts.image_map &&
        (rc = ks_image_map_load(sim->opts.image_map, &kl->imap, err)) != KC_OK)
        goto fail;
    char logdir[4096] = "";
    if (sim->opts.dir && *sim->opts.dir)
        snprintf(logdir, sizeof(logdir), "%s/logs", sim->opts.dir);
    kl->logs = ks_kl_logs_new(*logdir ? logdir : NULL, 1u << 20);
    kl->pods = kc_map_new();
    kl->nodes = kc_map_new();
    kl->missing = kc_map_new();
    if (!kl->logs || !kl->pods || !kl->nodes || !kl->missing) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory starting the kubelet");
        goto fail;
    }
    if ((rc = kl_answers_init(kl, err)) != KC_OK)
        goto fail;
    if (*logdir && (rc = ks_pki_mkdirs(logdir, err)) != KC_OK)
        goto fail;
    if (!kl_pull_init(kl, err)) {
        rc = err ? err->code : KC_ENOMEM;
        goto fail;
    }
    if ((rc = ensure_lease_namespace(kl, err)) != KC_OK)
        goto fail;
    int uvr = uv_loop_init(&kl->loop);
    if (uvr != 0) {
        rc = kc_err_set(err, KC_EIO, "kubelet: cannot create its event loop: %s", uv_strerror(uvr));
        goto fail;
    }
    kl->loop_ok = true;
    uv_async_init(&kl->loop, &kl->async, on_async);
    kl->async.data = kl;
    uv_timer_init(&kl->loop, &kl->t_hb);
    kl->t_hb.data = kl;
    uv_timer_init(&kl->loop, &kl->t_stop);
    kl->t_stop.data = kl;
    uv_timer_init(&kl->loop, &kl->t_pull);
    kl->t_pull.data = kl;
    uv_timer_start(&kl->t_hb, kl_heartbeat, 250, 250);
    sim->kubelet = kl;
    if (pthread_create(&kl->loop_thread, NULL, loop_main, kl) != 0) {
        rc = kc_err_set(err, KC_ENOMEM, "kubelet: cannot start its loop thread");
        goto fail_sim;
    }
    kl->threads_ok[0] = true;
    for (int i = 0; i < 2; i++) {
        bridge_arg *ba = malloc(sizeof(*ba));
        if (ba)
            *ba = (bridge_arg){.kl = kl, .idx = i};
        if (!ba || pthread_create(&kl->bridge[i], NULL, bridge_main, ba) != 0) {
            free(ba);
            rc = kc_err_set(err, KC_ENOMEM, "kubelet: cannot start its watch threads");
            goto fail_sim;
        }
        kl->threads_ok[1 + i] = true;
    }
    return KC_OK;
fail_sim:
    ks_kubelet_stop(sim);
    return rc;
fail:
    if (kl->loop_ok)
        uv_loop_close(&kl->loop);
    kubelet_free(kl);
    return rc;
}

void ks_kubelet_stop(ks_sim *sim)
{
    struct ks_kubelet *kl = sim ? sim->kubelet : NULL;
    if (!kl)
        return;
    atomic_store(&kl->stopping, true);
    for (int i = 0; i < 2; i++)
        if (kl->threads_ok[1 + i])
            pthread_join(kl->bridge[i], NULL);
    if (kl->threads_ok[0]) {
        uv_async_send(&kl->async);
        pthread_join(kl->loop_thread, NULL);
    } else {
        close_loop_handles(kl);
        uv_run(&kl->loop, UV_RUN_DEFAULT);
    }
    if (uv_loop_close(&kl->loop) != 0)
        kc_warn("kubelet: event loop closed with handles still open", NULL);
    sim->kubelet = NULL;
    kubelet_free(kl);
}

void ks_kubelet_tune(ks_sim *sim, const ks_kubelet_tuning *t)
{
    struct ks_kubelet *kl = sim ? sim->kubelet : NULL;
    if (!kl || !t)
        return;
    if (t->grace_cap_ms > 0)
        atomic_store(&kl->grace_cap_ms, t->grace_cap_ms);
    if (t->backoff_ms > 0)
        atomic_store(&kl->backoff_ms, t->backoff_ms);
    if (t->backoff_max_ms > 0)
        atomic_store(&kl->backoff_max_ms, t->backoff_max_ms);
    if (t->log_cap > 0)
        ks_kl_logs_set_cap(kl->logs, t->log_cap);
}

void ks_kubelet_set_events(ks_sim *sim, bool on)
{
    struct ks_kubelet *kl = sim ? sim->kubelet : NULL;
    if (kl)
        atomic_store(&kl->events, on);
}

/* ---- logs ---- */

void ks_kubelet_append_log(ks_sim *sim, const char *ns, const char *pod, const char *container,
                           const char *text, size_t len)
{
    struct ks_kubelet *kl = sim ? sim->kubelet : NULL;
    if (!kl || !ns || !pod || !container || !text)
        return;
    ks_kl_logs_append(kl->logs, ns, pod, container, text, len);
}

static bool has_container(const json_t *arr, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) if (json_is_string(json_object_get(c, "name")) &&
                                      strcmp(json_string_value(json_object_get(c, "name")), name) ==
                                          0) return true;
    return false;
}

/* The waiting reason of a container from the pod's status, or NULL when it started. */
static const char *waiting_reason(const json_t *pod, const char *ctr)
{
    const json_t *st = json_object_get(pod, "status");
    const char *keys[] = {"containerStatuses", "initContainerStatuses"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *cs;
        json_array_foreach(json_object_get(st, keys[k]), i, cs)
        {
            const char *n = json_string_value(json_object_get(cs, "name"));
            if (!n || strcmp(n, ctr) != 0)
                continue;
            const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
            if (!w || json_object_size(json_object_get(cs, "lastState")) > 0 ||
                json_integer_value(json_object_get(cs, "restartCount")) > 0)
                return NULL;
            const char *r = json_string_value(json_object_get(w, "reason"));
            return r ? r : "ContainerCreating";
        }
    }
    /* No status yet: the pod was not started on a node. */
    return "ContainerCreating";
}

/* state.terminated.message (else lastState's) of a container's status, or NULL. */
static const char *termination_message(const json_t *pod, const char *container)
{
    const json_t *st = json_object_get(pod, "status");
    const char *lists[2] = {"containerStatuses", "initContainerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        const json_t *cs;
        json_array_foreach(json_object_get(st, lists[l]), i, cs)
        {
            const char *n = json_string_value(json_object_get(cs, "name"));
            if (!n || strcmp(n, container) != 0)
                continue;
            const char *states[2] = {"state", "lastState"};
            for (int k = 0; k < 2; k++) {
                const json_t *t = json_object_get(json_object_get(cs, states[k]), "terminated");
                const char *m = json_string_value(json_object_get(t, "message"));
                if (m && *m)
                    return m;
            }
        }
    }
    return NULL;
}

/* The last tail_lines lines of text (all when < 0), malloc'd. */
static char *tail_text(const char *text, long tail_lines, size_t *len)
{
    size_t n = strlen(text);
    const char *start = text;
    if (tail_lines >= 0) {
        long lines = 0;
        const char *p = text + n;
        if (p > text && p[-1] == '\n')
            p--;
        while (p > text) {
            if (p[-1] == '\n' && ++lines >= tail_lines)
                break;
            p--;
        }
        start = tail_lines == 0 ? text + n : p;
    }
    char *out = strdup(start);
    if (out && len)
        *len = strlen(out);
    return out;
}

kc_code ks_kubelet_logs(ks_sim *sim, const char *ns, const char *pod, const char *container,
                        long tail_lines, char **out, size_t *len, kc_err *err)
{
    struct ks_kubelet *kl = sim ? sim->kubelet : NULL;
    if (!out || !ns || !pod)
        return kc_err_set(err, KC_EARG, "ks_kubelet_logs: namespace, pod and out are required");
    *out = NULL;
    if (len)
        *len = 0;
    if (!kl)
        return kc_err_set(err, KC_EUNAVAILABLE, "the kubelet is not running");
    json_t *obj = NULL;
    kc_code rc = ks_get(kl->st, kl->t_pods, ns, pod, &obj, err);
    if (rc != KC_OK)
        return rc;
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *ctrs = json_object_get(spec, "containers");
    const json_t *inits = json_object_get(spec, "initContainers");
    if (!container || !*container)
        container = json_string_value(json_object_get(json_array_get(ctrs, 0), "name"));
    if (!container) {
        rc = kc_err_set(err, KC_EBADREQUEST, "pod %s has no containers", pod);
        goto done;
    }
    if (!has_container(ctrs, container) && !has_container(inits, container)) {
        rc =
            kc_err_set(err, KC_EBADREQUEST, "container %s is not valid for pod %s", container, pod);
        goto done;
    }
    if (ks_kl_logs_get(kl->logs, ns, pod, container, tail_lines, out, len))
        goto done;
    /* A container no local process ran (nodesim finished it) shows its termination message. */
    const char *msg = termination_message(obj, container);
    if (msg) {
        *out = tail_text(msg, tail_lines, len);
        if (!*out)
            rc = kc_err_set(err, KC_ENOMEM, "out of memory reading logs");
        goto done;
    }
    const char *wr = waiting_reason(obj, container);
    if (wr) {
        /* The kubelet's words for the common pending failures. */
        if (!strcmp(wr, "ErrImagePull"))
            wr = "image can't be pulled";
        else if (!strcmp(wr, "ImagePullBackOff"))
            wr = "trying and failing to pull image";
        rc = kc_err_set(err, KC_EBADREQUEST,
                        "container \"%s\" in pod \"%s\" is waiting to start: %s", container, pod,
                        wr);
        goto done;
    }
    *out = strdup("");
    if (!*out)
        rc = kc_err_set(err, KC_ENOMEM, "out of memory reading logs");
done:
    json_decref(obj);
    return rc;
}
