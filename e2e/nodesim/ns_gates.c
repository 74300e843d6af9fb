/* ns_gates: the init containers of the pods on a node, as nodesim plays their runtime: answers
 * in each pod's nodesim.io/init annotation (see ns_init.h), the node's ready files, and the
 * workload pods NVIDIA's validator creates for its cuda and plugin components. */
#include "ns_engine_int.h"
#include "ns_access.h"
#include "ns_init.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "kc_rest.h"

/* One node's pass (worker thread). */
typedef struct gstep {
    ns_engine *e;
    ns_simnode *n;
    const json_t *pods;
    uint64_t now;
    uint64_t next; /* when the next run is wanted, 0: none */
} gstep;

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static void want_again(gstep *s, uint64_t at)
{
    if (!s->next || at < s->next)
        s->next = at > s->now ? at : s->now;
}

static bool annotate(ns_engine *e, const char *node, const json_t *p, const char *key,
                     const char *text)
{
    const char *cur = json_string_value(
        json_object_get(json_object_get(json_object_get(p, "metadata"), "annotations"), key));
    if (cur && strcmp(cur, text) == 0)
        return true;
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, text);
    kc_err err;
    kc_code rc = kc_patch(e->api, &KC_RES_PODS, str_at(p, "metadata", "namespace"),
                          str_at(p, "metadata", "name"), KC_PATCH_MERGE, patch, NULL, NULL, &err);
    json_decref(patch);
    if (rc != KC_OK && rc != KC_ENOTFOUND) {
        kc_warn("cannot write a pod's answers", "node=%s pod=%s what=%s err=\"%s\"", node,
                str_at(p, "metadata", "name"), key, err.msg);
        return false;
    }
    return true;
}

/* PUT of the answers to kubesim's kubelet. A pod that is gone or was replaced (404, 409) needs
 * none. */
static bool hand_over(ns_engine *e, const char *node, const json_t *p, const char *key, json_t *ans)
{
    const char *ns = str_at(p, "metadata", "namespace"), *name = str_at(p, "metadata", "name");
    const char *uid = str_at(p, "metadata", "uid");
    if (!ns || !name || !uid)
        return true;
    char path[800];
    snprintf(path, sizeof(path), "/kubesim/v1/answers/namespaces/%s/pods/%s", ns, name);
    json_t *body = json_pack("{s:s, s:s, s:O}", "uid", uid, "key", key, "answers", ans);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return false;
    kc_request req = {.method = "PUT", .path = path, .body = text, .body_len = strlen(text)};
    kc_err err;
    kc_code rc = kc_client_do(e->api, &req, NULL, &err);
    free(text);
    if (rc != KC_OK && rc != KC_ENOTFOUND && rc != KC_ECONFLICT) {
        kc_warn("cannot hand a pod's answers to the kubelet", "node=%s pod=%s what=%s err=\"%s\"",
                node, name, key, err.msg);
        return false;
    }
    return true;
}

bool ns_write_pod_answers(ns_engine *e, ns_simnode *n, const json_t *p, const char *key,
                          json_t *ans)
{
    char *text = json_dumps(ans, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) {
        json_decref(ans);
        return false;
    }
    bool ok;
    if (e->o.template_kubelet) {
        ok = annotate(e, n->name, p, key, text);
        free(text);
    } else {
        char skey[400];
        snprintf(skey, sizeof(skey), "%s %s", str_at(p, "metadata", "uid") ?: "", key);
        const char *was = kc_map_get(n->sent, skey);
        ok = was && strcmp(was, text) == 0;
        if (!ok && (ok = hand_over(e, n->name, p, key, ans))) {
            void *old = NULL;
            if (kc_map_put(n->sent, skey, text, &old) == KC_OK)
                text = NULL;
            free(old);
        }
        free(text);
    }
    json_decref(ans);
    return ok;
}

void ns_answers_sync(ns_engine *e, ns_simnode *n, const json_t *pods)
{
    unsigned epoch = atomic_load(&e->answers_epoch);
    if (epoch != n->sent_epoch) {
        kc_map_free(n->sent, free);
        n->sent = kc_map_new();
        n->sent_epoch = epoch;
        return;
    }
    if (!n->sent || !kc_map_size(n->sent))
        return;
    kc_map *keep = kc_map_new();
    if (!keep)
        return;
    size_t pos = 0;
    const char *k;
    void *v;
    while (kc_map_next(n->sent, &pos, &k, &v)) {
        size_t ul = strcspn(k, " ");
        bool live = false;
        size_t i;
        const json_t *p;
        json_array_foreach(pods, i, p)
        {
            const char *uid = str_at(p, "metadata", "uid");
            if (uid && strlen(uid) == ul && !strncmp(uid, k, ul))
                live = true;
        }
        if (live && kc_map_put(keep, k, v, NULL) == KC_OK)
            continue;
        free(v);
    }
    kc_map_free(n->sent, NULL);
    n->sent = keep;
}

void ns_answers_check_kubelet(ns_engine *e)
{
    if (e->o.template_kubelet)
        return;
    kc_request req = {.method = "GET", .path = "/kubesim/v1/answers"};
    kc_response resp = {0};
    kc_err err;
    if (kc_client_do(e->api, &req, &resp, &err) != KC_OK) {
        kc_response_free(&resp);
        return; /* down or restarting: asked again on the next beat */
    }
    json_t *doc = resp.body ? json_loadb(resp.body, resp.body_len, 0, NULL) : NULL;
    const char *boot = json_string_value(json_object_get(doc, "bootID"));
    if (boot && strcmp(boot, e->kubelet_boot) != 0) {
        bool restarted = e->kubelet_boot[0] != '\0';
        snprintf(e->kubelet_boot, sizeof(e->kubelet_boot), "%s", boot);
        if (restarted) {
            kc_info("kubesim's kubelet restarted: handing over every answer again", "boot=%s",
                    boot);
            atomic_fetch_add(&e->answers_epoch, 1);
            for (size_t i = 0; i < e->n; i++)
                kc_workqueue_add(e->q, e->sn[i].name);
        }
    }
    json_decref(doc);
    kc_response_free(&resp);
}

bool ns_pod_live(const json_t *p)
{
    const char *phase = str_at(p, "status", "phase");
    return !(phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) &&
           !json_object_get(json_object_get(p, "metadata"), "deletionTimestamp");
}

/* Init container name of pod as the kubelet reports it: 'r' running, 'd' exited 0, else 0. */
static char init_state(const json_t *pod, const char *name)
{
    size_t i;
    const json_t *cs;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "initContainerStatuses"), i,
                       cs)
    {
        if (strcmp(str_at(cs, "name", NULL) ?: "", name))
            continue;
        const json_t *st = json_object_get(cs, "state");
        if (json_object_get(st, "running"))
            return 'r';
        const json_t *t = json_object_get(st, "terminated");
        return t && json_integer_value(json_object_get(t, "exitCode")) == 0 ? 'd' : 0;
    }
    return 0;
}

static long qty(const json_t *v)
{
    return json_is_string(v) ? atol(json_string_value(v)) : (long)json_integer_value(v);
}

/* The GPU resource NVIDIA's validator asks for in its plugin workload pod: nvidia.com/gpu, else
 * the first MIG resource the node advertises. */
const char *ns_gpu_resource(const json_t *alloc)
{
    if (qty(json_object_get(alloc, "nvidia.com/gpu")) > 0)
        return "nvidia.com/gpu";
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)alloc, k,
                        v) if (!strncmp(k, "nvidia.com/mig-", 15) && qty(v) > 0) return k;
    return NULL;
}

/* NVIDIA's validator with a workload (cuda, plugin): it deletes an earlier workload pod of the
 * node, creates its own and waits for it to succeed. NULL once it did, else what it waits for. */
static const char *gate_workload(gstep *s, kc_map *seen, const json_t *pod, const json_t *c,
                                 const ns_init_gate *g, const ns_gate_view *v, const json_t *alloc,
                                 char *buf, size_t size)
{
    ns_simnode *n = s->n;
    const char *cname = str_at(c, "name", NULL) ?: "";
    const char *ns = str_at(pod, "metadata", "namespace");
    char key[400];
    snprintf(key, sizeof(key), "%s/%s", str_at(pod, "metadata", "uid") ?: "", cname);
    bool plugin = !strcmp(g->what, "plugin");
    char *name = kc_map_remove(n->workloads, key);
    if (name) {
        const json_t *wp = NULL;
        size_t i;
        const json_t *p;
        json_array_foreach(
            s->pods, i, p) if (!strcmp(str_at(p, "metadata", "name") ?: "", name) &&
                               !strcmp(str_at(p, "metadata", "namespace") ?: "", ns ?: "")) wp = p;
        json_t *got = NULL;
        kc_err err;
        kc_code rc = KC_OK;
        if (!wp) /* not in the cache yet, or gone */
            rc = kc_get(s->e->api, &KC_RES_PODS, ns, name, &got, &err);
        if (wp || rc == KC_OK) {
            const char *phase = str_at(wp ? wp : got, "status", "phase") ?: "Pending";
            bool ok = !strcmp(phase, "Succeeded");
            if (!ok)
                snprintf(buf, size, "pod %s is currently in %s phase", name, phase);
            json_decref(got);
            if (kc_map_put(seen, key, name, NULL) != KC_OK)
                free(name);
            return ok ? NULL : buf;
        }
        if (rc != KC_ENOTFOUND) {
            want_again(s, s->now + 500);
            snprintf(buf, size, "failed to get pod %s, err %s", name, err.msg);
            if (kc_map_put(seen, key, name, NULL) != KC_OK)
                free(name);
            return buf;
        }
        /* Deleted under it: the validator fails and its container runs again. */
        free(name);
    }
    const char *res = plugin ? ns_gpu_resource(alloc) : NULL;
    if (plugin && (!v->plugin_gpus || !res))
        return "waiting for the device plugin to advertise GPUs to the kubelet";
    json_t *ds = NULL;
    kc_err err;
    if (kc_get(s->e->api, &KC_RES_DAEMONSETS, ns, "nvidia-operator-validator", &ds, &err) !=
        KC_OK) {
        snprintf(buf, size, "unable to retrieve the operator validator daemonset: %s", err.msg);
        want_again(s, s->now + 5000);
        return buf;
    }
    const char *app = ns_init_workload_app(g);
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        if (strcmp(str_at(p, "metadata", "namespace") ?: "", ns ?: "") ||
            strcmp(str_at(json_object_get(p, "metadata"), "labels", "app") ?: "", app))
            continue;
        kc_code rc = kc_delete(s->e->api, &KC_RES_PODS, ns, str_at(p, "metadata", "name"),
                               KC_PROPAGATE_BACKGROUND, NULL, &err);
        if (rc != KC_OK && rc != KC_ENOTFOUND)
            kc_warn("cannot delete previous validation pod", "node=%s err=\"%s\"", n->name,
                    err.msg);
        break; /* the validator deletes the first one it lists */
    }
    json_t *obj = ns_init_workload_pod(g, c, ns, n->name, ds, res);
    json_decref(ds);
    json_t *out = NULL;
    kc_code rc = obj ? kc_create(s->e->api, &KC_RES_PODS, ns, obj, &out, &err)
                     : kc_err_set(&err, KC_ENOMEM, "out of memory");
    json_decref(obj);
    if (rc != KC_OK) {
        snprintf(buf, size, "failed to create %s validation pod, err %s",
                 plugin ? "plugin" : "cuda", err.msg);
        want_again(s, s->now + 1000);
        return buf;
    }
    const char *made = str_at(out, "metadata", "name") ?: "";
    kc_info("validator created its workload pod", "node=%s pod=%s/%s", n->name, ns, made);
    snprintf(buf, size, "pod %s is currently in Pending phase", made);
    char *dup = strdup(made);
    json_decref(out);
    if (dup && kc_map_put(seen, key, dup, NULL) != KC_OK)
        free(dup);
    return buf;
}

/* Answers for the init containers of the node's pods (nodesim.io/init, which kubesim's kubelet
 * waits on for simulated init containers): NVIDIA's gates complete once the component is ready
 * here, validators' workloads once their pod succeeded, others at once. */
static void init_answers(gstep *s, const ns_gate_view *v, const json_t *alloc)
{
    ns_simnode *n = s->n;
    unsigned files = n->ready_files;
    kc_map *seen = kc_map_new(), *wrote = kc_map_new();
    if (!seen || !wrote) {
        kc_map_free(seen, NULL);
        kc_map_free(wrote, NULL);
        return;
    }
    /* A validator pod stopping ran its preStop hook: the ready files are gone. */
    if (atomic_exchange(&n->clear_files, false))
        files = 0;
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        const json_t *inits = json_object_get(json_object_get(p, "spec"), "initContainers");
        if (!json_array_size(inits) || !ns_pod_live(p))
            continue;
        bool validation = ns_operand_of_pod(p, s->e->o.validator_glob) == NS_OP_VALIDATION;
        json_t *ans = json_object();
        size_t j;
        const json_t *c;
        json_array_foreach(inits, j, c)
        {
            const char *name = str_at(c, "name", NULL);
            if (!name)
                continue;
            ns_init_gate g;
            ns_init_gate_of(c, &g);
            char buf[512];
            const char *wait = NULL;
            char st = init_state(p, name);
            if (validation)
                wait = NULL; /* the workload runs as the validation pod (see validations) */
            else if (g.kind == NS_GATE_VALIDATOR && g.workload)
                wait = st == 'r' ? gate_workload(s, seen, p, c, &g, v, alloc, buf, sizeof(buf))
                                 : "not started";
            else
                wait = ns_init_gate_wait(&g, v);
            /* The operator's gpu-validator that cannot reach the driver's libraries or its
             * status file exits at once, whatever the component's state: the kubelet restarts
             * it with its back-off. */
            char why[600], acc[700];
            int code = 0;
            if (!validation && g.kind == NS_GATE_VALIDATOR && !g.nvidia &&
                (code = ns_validator_access(p, c, why, sizeof(why))) != 0) {
                snprintf(acc, sizeof(acc), "%s%d: gpu-validator: %s", NS_INIT_EXIT, code, why);
                wait = acc;
            }
            if (g.kind == NS_GATE_VALIDATOR) {
                /* A validation deletes its file when it starts and writes it once, when it
                 * passed. */
                unsigned bit = ns_ready_file_bit(g.what);
                char key[400];
                snprintf(key, sizeof(key), "%s/%s", str_at(p, "metadata", "uid") ?: "", name);
                bool done_before = kc_map_get(n->wrote, key) != NULL;
                if (!wait && (st == 'r' || st == 'd')) {
                    if (!done_before)
                        files |= bit;
                    kc_map_put(wrote, key, (void *)1, NULL);
                } else if (st == 'r') {
                    files &= ~bit;
                } else if (done_before) {
                    kc_map_put(wrote, key, (void *)1, NULL);
                }
            }
            json_object_set_new(ans, name, json_string(wait ? wait : "ok"));
        }
        if (!ns_write_pod_answers(s->e, n, p, NS_INIT_ANNOTATION, ans))
            want_again(s, s->now + 500);
    }
    kc_map_free(n->workloads, free);
    n->workloads = seen;
    kc_map_free(n->wrote, NULL);
    n->wrote = wrote;
    if (files != n->ready_files) {
        kc_info("ready files", "node=%s driver=%d toolkit=%d cuda=%d plugin=%d", n->name,
                !!(files & NS_READY_DRIVER), !!(files & NS_READY_TOOLKIT),
                !!(files & NS_READY_CUDA), !!(files & NS_READY_PLUGIN));
        n->ready_files = files;
        want_again(s, s->now); /* the gates waiting for them see them on the next run */
    }
}

long ns_init_step(ns_engine *e, ns_simnode *n, const json_t *pods, uint64_t now,
                  const ns_gate_view *v, const json_t *alloc)
{
    gstep s = {.e = e, .n = n, .pods = pods, .now = now};
    init_answers(&s, v, alloc);
    return s.next ? (long)(s.next - now) : -1;
}
