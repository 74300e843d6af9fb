/* ns_reconcile: one node's simulation step: which operands run there, what the driver, toolkit,
 * device plugin, GFD and MIG manager make of it, validation pod outcomes, and the writes (node
 * labels, node status, pod status, pod deletions) that show it through the API server. */
#include "ns_engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_log.h"
#include "kc_patch.h"
#include "kc_rest.h"
#include "ns_node.h"

#define MIG_CONFIG_LABEL "nvidia.com/mig.config"
#define MIG_STATE_LABEL  "nvidia.com/mig.config.state"
#define PAUSED           "paused-for-mig-change"

/* The GPU clients the MIG manager pauses (NVIDIA's list). */
static const char *const client_labels[] = {
    "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter", "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
};
#define N_CLIENTS (sizeof(client_labels) / sizeof(client_labels[0]))

/* Everything one reconcile reads and the writes it accumulates. */
typedef struct step {
    ns_engine *e;
    ns_simnode *n;
    uint64_t now;
    json_t *node;   /* cached Node (borrowed reference we own) */
    json_t *labels; /* its labels (borrowed from node) */
    json_t *pods;   /* pods on the node */
    const json_t *op_pod[NS_OP_COUNT];
    bool op_present[NS_OP_COUNT]; /* any pod, even pending or terminating */
    json_t *label_patch;          /* key → string or null */
    long again;                   /* ms until the next wanted run, -1 none */
    int slow;
} step;

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static void want_again(step *s, uint64_t at)
{
    long d = at > s->now ? (long)(at - s->now) : 0;
    if (s->again < 0 || d < s->again)
        s->again = d;
}

static const char *label(step *s, const char *key)
{
    const json_t *p = json_object_get(s->label_patch, key);
    if (p)
        return json_string_value(p);
    return json_string_value(json_object_get(s->labels, key));
}

static void set_label(step *s, const char *key, const char *val)
{
    const char *cur = json_string_value(json_object_get(s->labels, key));
    if ((cur && val && strcmp(cur, val) == 0) || (!cur && !val)) {
        json_object_del(s->label_patch, key);
        return;
    }
    json_object_set_new(s->label_patch, key, val ? json_string(val) : json_null());
}

static void rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- operands ---- */

static bool pod_running(const json_t *pod)
{
    const char *phase = str_at(pod, "status", "phase");
    return phase && strcmp(phase, "Running") == 0 &&
           !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp");
}

static void observe_operands(step *s)
{
    ns_simnode *n = s->n;
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        ns_operand op = ns_operand_of_pod(p, s->e->o.validator_glob);
        if (op == NS_OP_NONE || op == NS_OP_VALIDATION)
            continue;
        const char *phase = str_at(p, "status", "phase");
        if (!phase || (strcmp(phase, "Succeeded") && strcmp(phase, "Failed")))
            s->op_present[op] = true;
        if (pod_running(p) && !s->op_pod[op])
            s->op_pod[op] = p;
    }
    for (int op = 1; op < NS_OP_COUNT; op++) {
        const char *uid = s->op_pod[op] ? str_at(s->op_pod[op], "metadata", "uid") : NULL;
        if (!uid) {
            n->op_uid[op][0] = '\0';
            n->op_since[op] = 0;
        } else if (strcmp(uid, n->op_uid[op]) != 0) {
            snprintf(n->op_uid[op], sizeof(n->op_uid[op]), "%s", uid);
            n->op_since[op] = s->now;
            kc_debug("operand running", "node=%s operand=%s", n->name, ns_operand_name(op));
        }
    }
}

/* True once operand op has run for ms (scaled by slow faults); schedules a re-run otherwise. */
static bool up_for(step *s, ns_operand op, long ms)
{
    if (!s->n->op_since[op])
        return false;
    uint64_t at = s->n->op_since[op] + (uint64_t)ms * (uint64_t)s->slow;
    if (s->now >= at)
        return true;
    want_again(s, at);
    return false;
}

/* Whether a template kubelet (kwok) wrote the pod's status after nodesim wrote its crash loop
 * (crashed_rv) and lost it: its first container no longer waits in CrashLoopBackOff. A version
 * no newer than nodesim's write is the cache lagging behind it. */
static bool crash_lost(const step *s, const json_t *pod, ns_operand op)
{
    if (!s->e->o.template_kubelet)
        return false;
    const char *rvs = str_at(pod, "metadata", "resourceVersion");
    uint64_t rv = rvs ? strtoull(rvs, NULL, 10) : 0;
    if (rv <= s->n->crashed_rv[op])
        return false;
    const json_t *spec = json_object_get(pod, "spec");
    const char *first =
        str_at(json_array_get(json_object_get(spec, "containers"), 0), "name", NULL);
    const char *why = NULL;
    size_t i;
    const json_t *st;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), i, st)
    {
        const char *sn = str_at(st, "name", NULL);
        if (first && sn && !strcmp(sn, first))
            why = str_at(json_object_get(json_object_get(st, "state"), "waiting"), "reason", NULL);
    }
    return !why || strcmp(why, "CrashLoopBackOff") != 0;
}

/* An operand pod's container status while it fails (a crash loop whose last run ended with
 * msg, the error the component prints), and back to running once it no longer does. */
static void crash_status(step *s, ns_operand op, const char *msg)
{
    ns_simnode *n = s->n;
    const json_t *pod = s->op_pod[op];
    if (!pod)
        return;
    bool crash = msg != NULL;
    const char *uid = n->op_uid[op];
    bool is_crashed = strcmp(n->crashed_uid[op], uid) == 0;
    if (crash && is_crashed && crash_lost(s, pod, op))
        is_crashed = false;
    if (crash == is_crashed)
        return;
    const json_t *c0 =
        json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    const char *cname = str_at(c0, "name", NULL);
    const char *img = str_at(c0, "image", NULL);
    char now[32];
    rfc3339(now);
    json_t *cs;
    if (crash)
        cs = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:{s:{s:s, s:s}}, s:{s:{s:i, s:s, s:s, s:s, "
                       "s:s}}}",
                       "name", cname ? cname : ns_operand_name(op), "image", img ? img : "",
                       "imageID", "", "ready", 0, "started", 0, "restartCount", 3, "state",
                       "waiting", "reason", "CrashLoopBackOff", "message",
                       "back-off 40s restarting failed container", "lastState", "terminated",
                       "exitCode", 1, "reason", "Error", "message", msg, "startedAt", now,
                       "finishedAt", now);
    else
        cs = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:{s:{s:s}}}", "name",
                       cname ? cname : ns_operand_name(op), "image", img ? img : "", "imageID", "",
                       "ready", 1, "started", 1, "restartCount", 4, "state", "running", "startedAt",
                       now);
    json_t *patch =
        json_pack("{s:{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}], s:[o]}}", "status", "conditions",
                  "type", "Ready", "status", crash ? "False" : "True", "lastTransitionTime", now,
                  "type", "ContainersReady", "status", crash ? "False" : "True",
                  "lastTransitionTime", now, "containerStatuses", cs);
    kc_patch_opts po = {.subresource = "status"};
    kc_err err;
    json_t *written = NULL;
    kc_code rc =
        kc_patch(s->e->api, &KC_RES_PODS, str_at(pod, "metadata", "namespace"),
                 str_at(pod, "metadata", "name"), KC_PATCH_STRATEGIC, patch, &po, &written, &err);
    json_decref(patch);
    if (rc == KC_OK) {
        const char *wrv = str_at(written, "metadata", "resourceVersion");
        n->crashed_rv[op] = crash && wrv ? strtoull(wrv, NULL, 10) : 0;
        json_decref(written);
        /* uid is n->op_uid[op]: another array of the same node, copied without snprintf (which
         * may not take an argument from the object it writes) */
        const char *src = crash ? uid : "";
        size_t l = strnlen(src, sizeof(n->crashed_uid[op]) - 1);
        memmove(n->crashed_uid[op], src, l);
        n->crashed_uid[op][l] = '\0';
        kc_info(crash ? "operand fails" : "operand runs again", "node=%s operand=%s pod=%s",
                n->name, ns_operand_name(op), str_at(pod, "metadata", "name"));
    } else {
        kc_warn("cannot write the operand pod status", "node=%s err=\"%s\"", n->name, err.msg);
        want_again(s, s->now + 500);
    }
}

/* What NVIDIA's toolkit installer (nvidia-ctk-installer) ends with when the runtime it is told
 * to configure (RUNTIME) is not the one the node runs: it configures that runtime and then cannot
 * reach it to reload it (containerd and Docker by a signal through their socket, CRI-O through
 * systemd). NULL when they match or the pod names no runtime. */
static const char *toolkit_runtime_error(const json_t *pod, const char *node_runtime, char *buf,
                                         size_t size)
{
    const char *want = pod ? ns_pod_env(pod, "RUNTIME") : NULL;
    if (!want || !*want)
        return NULL;
    const char *have = ns_runtime_name(node_runtime);
    if (have && !strcmp(want, have))
        return NULL;
    if (!strcmp(want, "crio"))
        snprintf(buf, size,
                 "error running nvidia-ctk-installer: unable to setup runtime: unable to restart "
                 "crio: error restarting crio using systemd: exit status 5");
    else if (!strcmp(want, "containerd") || !strcmp(want, "docker"))
        snprintf(buf, size,
                 "error running nvidia-ctk-installer: unable to setup runtime: unable to restart "
                 "%s: unable to dial: dial unix /runtime/sock-dir/%s.sock: connect: no such file "
                 "or directory",
                 want, want);
    else
        snprintf(buf, size,
                 "error running nvidia-ctk-installer: invalid runtime \"%s\"; expected one of "
                 "[containerd | crio | docker]",
                 want);
    return buf;
}

/* Writes the answers to the probes of the node's pods (nodesim.io/probes, which kubesim's
 * kubelet reads when it runs a probe of a simulated container) where they changed. */
static void probe_answers(step *s, const ns_probe_view *v)
{
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        if (!ns_pod_live(p))
            continue;
        json_t *ans = ns_probe_answers(p, ns_operand_of_pod(p, s->e->o.validator_glob), v);
        if (ans && !ns_write_pod_answers(s->e, s->n, p, NS_PROBES_ANNOTATION, ans))
            want_again(s, s->now + 500);
    }
}

/* ---- ConfigMaps ---- */

/* data[key] of ConfigMap ns/name, or NULL (with why). Returns a new reference to the ConfigMap in
 * *cm_out (caller decrefs) so the string stays valid. */
static const json_t *cm_data(step *s, const char *ns, const char *name, json_t **cm_out, char *why,
                             size_t why_size)
{
    *cm_out = kc_informer_get(s->e->cms, ns, name);
    if (!*cm_out) {
        snprintf(why, why_size, "ConfigMap %s/%s not found", ns, name);
        return NULL;
    }
    return json_object_get(*cm_out, "data");
}

/* The device-plugin config a DP or GFD pod uses on this node (NULL: none or broken, with why). */
static ns_dpconfig *pod_dpconfig(step *s, const json_t *pod, char *why, size_t why_size)
{
    static const char *const vols[] = {"available-configs", "config", "device-plugin-config",
                                       "time-slicing-config", NULL};
    why[0] = '\0';
    if (!pod)
        return NULL;
    const char *cmname = ns_pod_configmap(pod, vols, false);
    if (!cmname)
        return NULL;
    json_t *cm = NULL;
    const json_t *data =
        cm_data(s, str_at(pod, "metadata", "namespace"), cmname, &cm, why, why_size);
    ns_dpconfig *cfg = NULL;
    if (data) {
        const char *key = NULL;
        kc_err err;
        const char *def = ns_pod_env(pod, "DEFAULT_CONFIG");
        const char *fallbacks = ns_pod_env(pod, "FALLBACK_STRATEGIES");
        if (ns_dpconfig_select_key(data, label(s, "nvidia.com/device-plugin.config"), def,
                                   fallbacks, &key, &err) != KC_OK)
            snprintf(why, why_size, "%s", err.msg);
        else if (key) {
            const char *text = json_string_value(json_object_get(data, key));
            char nm[300];
            snprintf(nm, sizeof(nm), "%s[%s]", cmname, key);
            if (!text)
                snprintf(why, why_size, "ConfigMap %s key %s is not text", cmname, key);
            else if (ns_dpconfig_parse(text, strlen(text), nm, &cfg, &err) != KC_OK)
                snprintf(why, why_size, "%s", err.msg);
        }
    }
    json_decref(cm);
    return cfg;
}

/* ---- the MIG manager ---- */

static void mm_restore(step *s)
{
    for (size_t i = 0; i < N_CLIENTS; i++) {
        const char *cur = label(s, client_labels[i]);
        if ((s->n->mm_paused >> i) & 1u && cur && strcmp(cur, PAUSED) == 0)
            set_label(s, client_labels[i], "true");
    }
    s->n->mm_paused = 0;
}

static void mm_finish(step *s, bool ok, const char *msg)
{
    ns_simnode *n = s->n;
    mm_restore(s);
    set_label(s, MIG_STATE_LABEL, ok ? "success" : "failed");
    n->mm = MM_IDLE;
    n->mm_have_handled = true;
    snprintf(n->mm_handled, sizeof(n->mm_handled), "%s", n->mm_target);
    if (ok)
        kc_info("MIG config applied", "node=%s config=%s", n->name, n->mm_target);
    else
        kc_warn("MIG config failed", "node=%s config=%s reason=\"%s\"", n->name, n->mm_target, msg);
}

/* Resolves the wanted config from the MIG manager's ConfigMap into n->mm_new. */
static bool mm_resolve(step *s, const json_t *pod, char *why, size_t why_size)
{
    ns_simnode *n = s->n;
    static const char *const vols[] = {"mig-parted-config", "config", NULL};
    const char *cmname = ns_pod_configmap(pod, vols, true);
    if (!cmname) {
        snprintf(why, why_size, "the MIG manager pod mounts no mig-parted ConfigMap");
        return false;
    }
    const char *file = ns_pod_env(pod, "CONFIG_FILE");
    const char *key = file ? (strrchr(file, '/') ? strrchr(file, '/') + 1 : file) : "config.yaml";
    json_t *cm = NULL;
    const json_t *data =
        cm_data(s, str_at(pod, "metadata", "namespace"), cmname, &cm, why, why_size);
    bool ok = false;
    kc_migparted *mp = NULL;
    kc_err err;
    const char *text = data ? json_string_value(json_object_get(data, key)) : NULL;
    if (data && !text)
        snprintf(why, why_size, "ConfigMap %s has no key %s", cmname, key);
    else if (text && kc_migparted_parse(text, strlen(text), cmname, &mp, &err) != KC_OK)
        snprintf(why, why_size, "%s", err.msg);
    else if (mp) {
        const kc_gpu_model *models[NS_MAX_GPUS];
        for (int i = 0; i < n->g->gpus && i < NS_MAX_GPUS; i++)
            models[i] = n->g->model;
        memcpy(n->mm_new, n->mig, sizeof(n->mm_new));
        n->mm_apply_err[0] = '\0';
        kc_code rc =
            kc_migparted_apply(mp, n->mm_target, models, (size_t)n->g->gpus, n->mm_new, &err);
        if (rc == KC_EINVALID) {
            /* The layout is refused when the instances are created: pending first, then failed,
             * the GPUs as they were. */
            snprintf(n->mm_apply_err, sizeof(n->mm_apply_err), "%s", err.msg);
            memcpy(n->mm_new, n->mig, sizeof(n->mm_new));
            ok = true;
        } else if (rc != KC_OK) {
            snprintf(why, why_size, "%s", err.msg);
        } else {
            ok = true;
        }
    }
    kc_migparted_free(mp);
    json_decref(cm);
    return ok;
}

static bool mig_mode_changes(const ns_simnode *n)
{
    for (int i = 0; i < n->g->gpus && i < NS_MAX_GPUS; i++)
        if (n->mig[i].mig_enabled != n->mm_new[i].mig_enabled)
            return true;
    return false;
}

static void mm_delete_validators(step *s)
{
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        ns_operand op = ns_operand_of_pod(p, s->e->o.validator_glob);
        if (op != NS_OP_VALIDATOR && op != NS_OP_VALIDATION)
            continue;
        kc_err err;
        kc_code rc = kc_delete(s->e->api, &KC_RES_PODS, str_at(p, "metadata", "namespace"),
                               str_at(p, "metadata", "name"), KC_PROPAGATE_DEFAULT, NULL, &err);
        if (rc != KC_OK && rc != KC_ENOTFOUND)
            kc_warn("cannot delete a validator pod", "node=%s err=\"%s\"", s->n->name, err.msg);
    }
}

static void mig_manager(step *s)
{
    ns_simnode *n = s->n;
    const kc_gpu_model *m = n->g->model;
    if (!m || !m->mig_capable)
        return;
    const json_t *pod = s->op_pod[NS_OP_MIG_MANAGER];
    const char *want = label(s, MIG_CONFIG_LABEL);
    char why[KC_ERR_MSG_MAX] = "";
    if (n->mm == MM_IDLE) {
        if (!pod || !want || !*want)
            return;
        if (n->mm_have_handled && strcmp(n->mm_handled, want) == 0 &&
            strcmp(n->mm_pod_uid, n->op_uid[NS_OP_MIG_MANAGER]) == 0)
            return;
        snprintf(n->mm_pod_uid, sizeof(n->mm_pod_uid), "%s", n->op_uid[NS_OP_MIG_MANAGER]);
        snprintf(n->mm_target, sizeof(n->mm_target), "%s", want);
        kc_info("MIG manager: config requested", "node=%s config=%s", n->name, want);
        if (!mm_resolve(s, pod, why, sizeof(why))) {
            mm_finish(s, false, why);
            return;
        }
        if (!n->mm_apply_err[0] && memcmp(n->mm_new, n->mig, sizeof(n->mig)) == 0) {
            mm_finish(s, true, NULL); /* already applied */
            return;
        }
        set_label(s, MIG_STATE_LABEL, "pending");
        for (size_t i = 0; i < N_CLIENTS; i++) {
            const char *cur = label(s, client_labels[i]);
            if (cur && (strcmp(cur, "true") == 0 || strcmp(cur, PAUSED) == 0)) {
                set_label(s, client_labels[i], PAUSED);
                n->mm_paused |= 1u << i;
            }
        }
        n->mm = MM_WAIT_CLIENTS;
        n->mm_deadline = s->now + (uint64_t)s->e->t.mig_client_timeout_ms;
        want_again(s, s->now + 50);
        return;
    }
    if (!pod && n->mm != MM_REBOOTING) {
        /* The MIG manager's process ends with its pod: the change stops where it was, the
         * node's labels as they are (pending, clients paused); a new pod starts it over. */
        kc_info("MIG manager gone mid-change", "node=%s config=%s", n->name, n->mm_target);
        n->mm = MM_IDLE;
        n->mm_paused = 0;
        n->mm_have_handled = false;
        return;
    }
    if (n->mm == MM_WAIT_CLIENTS) {
        static const ns_operand clients[] = {NS_OP_DEVICE_PLUGIN, NS_OP_GFD, NS_OP_DCGM,
                                             NS_OP_DCGM_EXPORTER, NS_OP_MPS};
        const char *busy = NULL;
        for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++)
            if (s->op_present[clients[i]])
                busy = ns_operand_name(clients[i]);
        /* Paused labels are written with this step; clients leave after it. */
        if (busy || json_object_size(s->label_patch) > 0) {
            if (s->now >= n->mm_deadline) {
                snprintf(why, sizeof(why), "timed out waiting for GPU client %s to leave the node",
                         busy ? busy : "pods");
                mm_finish(s, false, why);
            } else {
                want_again(s, n->mm_deadline);
            }
            return;
        }
        mm_delete_validators(s);
        if (mig_mode_changes(n) && n->g->mig_needs_reboot) {
            const char *wr = ns_pod_env(pod ? pod : json_null(), "WITH_REBOOT");
            if (!wr || strcmp(wr, "true") != 0) {
                mm_finish(s, false,
                          "changing MIG mode needs a reboot on this node (the GPU cannot be reset) "
                          "and WITH_REBOOT is not true");
                return;
            }
            set_label(s, MIG_STATE_LABEL, "rebooting");
            n->mm = MM_REBOOTING;
            n->boot++;
            n->ready_files = 0; /* /run is a tmpfs: the ready files go with the boot */
            n->reboot_until = s->now + (uint64_t)s->e->t.reboot_ms * (uint64_t)s->slow;
            kc_info("rebooting the node to change MIG mode", "node=%s", n->name);
            want_again(s, n->reboot_until);
            return;
        }
        n->mm = MM_APPLYING;
        n->mm_deadline = s->now + (uint64_t)s->e->t.mig_apply_ms * (uint64_t)s->slow;
        want_again(s, n->mm_deadline);
        return;
    }
    if (n->mm == MM_REBOOTING) {
        if (s->now < n->reboot_until) {
            want_again(s, n->reboot_until);
            return;
        }
        if (n->faults.mig_fail) {
            mm_finish(s, false, "MIG mode did not change after the reboot");
            return;
        }
        set_label(s, MIG_STATE_LABEL, "pending");
        n->mm = MM_APPLYING;
        n->mm_deadline = s->now + (uint64_t)s->e->t.mig_apply_ms * (uint64_t)s->slow;
        want_again(s, n->mm_deadline);
        return;
    }
    /* MM_APPLYING */
    if (n->faults.mig_hang)
        return; /* never finishes; clearing the fault lets it complete */
    if (s->now < n->mm_deadline) {
        want_again(s, n->mm_deadline);
        return;
    }
    if (n->faults.mig_fail) {
        mm_finish(s, false,
                  "creating GPU instances failed: Insufficient Resources (injected fault)");
        return;
    }
    if (n->mm_apply_err[0]) {
        mm_finish(s, false, n->mm_apply_err);
        return;
    }
    memcpy(n->mig, n->mm_new, sizeof(n->mig));
    mm_finish(s, true, NULL);
}

/* ---- validation pods ---- */

/* Ends a run-to-completion pod: its containers terminated with code and reason. */
static void finish_pod_as(step *s, const json_t *pod, int code, const char *reason, const char *log)
{
    bool ok = code == 0;
    char now[32];
    rfc3339(now);
    json_t *statuses = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        json_array_append_new(
            statuses,
            json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:{s:{s:i, s:s, s:s, s:s, s:s}}}", "name",
                      str_at(c, "name", NULL) ?: "", "image", str_at(c, "image", NULL) ?: "",
                      "imageID", "", "ready", 0, "started", 0, "restartCount", 0, "state",
                      "terminated", "exitCode", code, "reason", reason, "message", log, "startedAt",
                      now, "finishedAt", now));
    }
    json_t *patch = json_pack(
        "{s:{s:s, s:[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}], s:o}}", "status", "phase",
        ok ? "Succeeded" : "Failed", "conditions", "type", "Ready", "status", "False", "reason",
        "PodCompleted", "lastTransitionTime", now, "type", "ContainersReady", "status", "False",
        "reason", "PodCompleted", "lastTransitionTime", now, "containerStatuses", statuses);
    kc_patch_opts po = {.subresource = "status"};
    kc_err err;
    kc_code rc = kc_patch(s->e->api, &KC_RES_PODS, str_at(pod, "metadata", "namespace"),
                          str_at(pod, "metadata", "name"), KC_PATCH_MERGE, patch, &po, NULL, &err);
    json_decref(patch);
    if (rc != KC_OK && rc != KC_ENOTFOUND) {
        kc_warn("cannot finish a validation pod", "node=%s pod=%s err=\"%s\"", s->n->name,
                str_at(pod, "metadata", "name"), err.msg);
        want_again(s, s->now + 500);
    } else if (rc == KC_OK) {
        kc_info(ok ? "validation pod succeeded" : "validation pod failed", "node=%s pod=%s/%s",
                s->n->name, str_at(pod, "metadata", "namespace"), str_at(pod, "metadata", "name"));
    }
}

static void validations(step *s, const ns_node_view *view)
{
    ns_simnode *n = s->n;
    kc_map *seen = kc_map_new();
    if (!seen)
        return;
    size_t i;
    const json_t *p;
    json_array_foreach(s->pods, i, p)
    {
        bool direct = false;
        const char *missing = ns_missing_program(p, s->e->o.validator_glob, &direct);
        if (missing) {
            /* As containerd answers a command the image does not have; a shell says it. */
            const char *phase = str_at(p, "status", "phase");
            if (phase && !strcmp(phase, "Running") &&
                !json_object_get(json_object_get(p, "metadata"), "deletionTimestamp")) {
                char msg[512];
                if (direct)
                    snprintf(msg, sizeof(msg),
                             "failed to create containerd task: failed to create shim task: OCI "
                             "runtime create failed: runc create failed: unable to start "
                             "container process: error during container init: exec: \"%s\": "
                             "executable file not found in $PATH: unknown",
                             missing);
                else
                    snprintf(msg, sizeof(msg), "sh: 1: %s: not found\n", missing);
                finish_pod_as(s, p, direct ? 128 : 127, direct ? "StartError" : "Error", msg);
            }
            continue;
        }
        if (ns_operand_of_pod(p, s->e->o.validator_glob) != NS_OP_VALIDATION)
            continue;
        const char *phase = str_at(p, "status", "phase");
        const char *uid = str_at(p, "metadata", "uid");
        if (!uid || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) ||
            json_object_get(json_object_get(p, "metadata"), "deletionTimestamp"))
            continue;
        if (!phase || strcmp(phase, "Running") != 0)
            continue; /* the kubelet has not started it yet */
        uint64_t *since = kc_map_remove(n->vals, uid);
        if (!since) {
            since = malloc(sizeof(*since));
            if (!since)
                continue;
            *since = s->now;
        }
        kc_map_put(seen, uid, since, NULL);
        uint64_t at = *since + (uint64_t)s->e->t.validation_ms * (uint64_t)s->slow;
        if (s->now < at) {
            want_again(s, at);
            continue;
        }
        char *log = NULL;
        int code = ns_validation_run(p, view, &log);
        finish_pod_as(s, p, code, code ? "Error" : "Completed", log ? log : "");
        free(log);
    }
    kc_map_free(n->vals, free);
    n->vals = seen;
}

/* ---- node writes ---- */

/* Merge-patches the node's metadata (labels, annotations); a failure is retried. */
static void patch_node_metadata(step *s, json_t *patch, const char *what)
{
    kc_err err;
    kc_code rc = kc_patch(s->e->api, &KC_RES_NODES, NULL, s->n->name, KC_PATCH_MERGE, patch, NULL,
                          NULL, &err);
    json_decref(patch);
    if (rc != KC_OK) {
        kc_warn("cannot write the node's metadata", "node=%s what=%s err=\"%s\"", s->n->name, what,
                err.msg);
        want_again(s, s->now + 500);
    }
}

static void write_labels(step *s)
{
    if (json_object_size(s->label_patch) == 0)
        return;
    patch_node_metadata(s, json_pack("{s:{s:O}}", "metadata", "labels", s->label_patch), "labels");
}

/* What the device plugin's Allocate refuses, for kubesim's kubelet (ns_dp_allocate_limits). */
static void write_allocate_limits(step *s, const json_t *limits)
{
    static const char key[] = "kubesim.io/allocate-limits";
    const char *cur = json_string_value(
        json_object_get(json_object_get(json_object_get(s->node, "metadata"), "annotations"), key));
    char *want = limits && json_object_size(limits)
                     ? json_dumps(limits, JSON_COMPACT | JSON_SORT_KEYS)
                     : NULL;
    if ((!cur && !want) || (cur && want && strcmp(cur, want) == 0)) {
        free(want);
        return;
    }
    json_t *patch = json_pack("{s:{s:{s:o}}}", "metadata", "annotations", key,
                              want ? json_string(want) : json_null());
    free(want);
    patch_node_metadata(s, patch, key);
}

static void write_status(step *s, json_t *resources, bool ready, const char *why)
{
    ns_simnode *n = s->n;
    const json_t *st = json_object_get(s->node, "status");
    json_t *cap = ns_node_base_capacity(n->g);
    json_object_update(cap, resources);
    const json_t *cur_cap = json_object_get(st, "capacity");
    const json_t *cur_alloc = json_object_get(st, "allocatable");
    const char *cur_ready = NULL;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i,
                       c) if (!strcmp(str_at(c, "type", NULL) ?: "", "Ready")) cur_ready =
        str_at(c, "status", NULL);
    bool ready_ok = cur_ready && strcmp(cur_ready, ready ? "True" : "False") == 0;
    char boot[32];
    snprintf(boot, sizeof(boot), "boot-%d", n->boot);
    const char *cur_boot = str_at(json_object_get(st, "nodeInfo"), "bootID", NULL);
    bool boot_ok = cur_boot && strcmp(cur_boot, boot) == 0;
    if (kc_json_equal(cap, cur_cap) && kc_json_equal(cap, cur_alloc) && ready_ok && boot_ok) {
        json_decref(cap);
        return;
    }
    /* A merge patch merges maps: resources that went away are removed with null. */
    json_t *pcap = json_deep_copy(cap);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)cur_cap, k, v) if (!json_object_get(cap, k))
        json_object_set_new(pcap, k, json_null());
    json_t *palloc = json_deep_copy(cap);
    json_object_foreach((json_t *)cur_alloc, k, v) if (!json_object_get(cap, k))
        json_object_set_new(palloc, k, json_null());
    json_t *status = json_pack("{s:o, s:o}", "capacity", pcap, "allocatable", palloc);
    if (!ready_ok) {
        char now[32];
        rfc3339(now);
        json_object_set_new(status, "conditions", ns_node_conditions(ready, why, now));
    }
    if (!boot_ok)
        json_object_set_new(status, "nodeInfo", json_pack("{s:s}", "bootID", boot));
    json_t *patch = json_pack("{s:o}", "status", status);
    kc_patch_opts po = {.subresource = "status"};
    kc_err err;
    kc_code rc =
        kc_patch(s->e->api, &KC_RES_NODES, NULL, n->name, KC_PATCH_MERGE, patch, &po, NULL, &err);
    json_decref(patch);
    json_decref(cap);
    if (rc != KC_OK) {
        kc_warn("cannot write node status", "node=%s err=\"%s\"", n->name, err.msg);
        want_again(s, s->now + 500);
    } else if (!ready_ok) {
        kc_info(ready ? "node Ready" : "node NotReady", "node=%s", n->name);
    }
}

static void register_node(ns_engine *e, ns_simnode *n)
{
    json_t *obj = ns_node_object(n->g, n->name, n->index);
    kc_err err;
    kc_code rc = obj ? kc_create(e->api, &KC_RES_NODES, NULL, obj, NULL, &err)
                     : kc_err_set(&err, KC_ENOMEM, "out of memory");
    if (rc == KC_OK || rc == KC_EALREADYEXISTS) {
        /* Some servers drop status on create; write it through the subresource too. */
        json_t *patch = json_pack("{s:O}", "status", json_object_get(obj, "status"));
        kc_patch_opts po = {.subresource = "status"};
        rc = kc_patch(e->api, &KC_RES_NODES, NULL, n->name, KC_PATCH_MERGE, patch, &po, NULL, &err);
        json_decref(patch);
    }
    json_decref(obj);
    if (rc != KC_OK)
        kc_warn("cannot register node", "node=%s err=\"%s\"", n->name, err.msg);
    else
        n->created = true;
    if (n->created)
        ns_engine_renew_lease(e, n); /* a kubelet creates its Lease when it registers */
}

long ns_reconcile_node(ns_engine *e, ns_simnode *n)
{
    step s = {.e = e, .n = n, .now = ns_now_ms(), .again = -1};
    s.node = kc_informer_get(e->nodes, NULL, n->name);
    if (!s.node) {
        if (n->gone)
            return -1;
        if (!n->created)
            register_node(e, n);
        return n->created ? 2000 : 1000; /* the watch brings the node; retry otherwise */
    }
    atomic_store(&n->registered, true);
    s.labels = json_object_get(json_object_get(s.node, "metadata"), "labels");
    s.label_patch = json_object();
    s.pods = ns_engine_node_pods(e, n->name);
    if (!s.label_patch || !s.pods)
        goto done;
    ns_answers_sync(e, n, s.pods);

    /* Faults from the node's annotation. */
    const char *spec = json_string_value(json_object_get(
        json_object_get(json_object_get(s.node, "metadata"), "annotations"), NS_FAULT_ANNOTATION));
    if (strcmp(spec ? spec : "", n->fault_spec ? n->fault_spec : "") != 0) {
        kc_err err;
        if (ns_fault_parse(spec, n->g->gpus, &n->faults, &err) != KC_OK)
            kc_warn("ignoring a bad fault annotation", "node=%s err=\"%s\"", n->name, err.msg);
        else
            kc_info("faults", "node=%s faults=\"%s\"", n->name, spec ? spec : "");
        free(n->fault_spec);
        n->fault_spec = spec ? strdup(spec) : NULL;
    }
    s.slow = n->faults.slow_factor > 1 ? n->faults.slow_factor : 1;
    bool rebooting = n->reboot_until > s.now;
    if (rebooting)
        want_again(&s, n->reboot_until);
    atomic_store(&n->hb_down, n->faults.notready || rebooting);

    observe_operands(&s);
    const ns_fleet_group *g = n->g;
    bool has_gpus = g->model != NULL;
    if (has_gpus && g->driver == NS_PROV_CONTAINER)
        crash_status(&s, NS_OP_DRIVER,
                     n->faults.driver_fail
                         ? "modprobe: ERROR: could not insert 'nvidia': No such device (the "
                           "NVIDIA kernel module failed to load)"
                         : NULL);
    bool driver_up = has_gpus && !rebooting && !n->faults.driver_fail &&
                     (g->driver == NS_PROV_HOST || up_for(&s, NS_OP_DRIVER, e->t.driver_load_ms));
    char tk_err[300];
    const char *tk_fail = NULL;
    if (has_gpus && g->toolkit == NS_PROV_CONTAINER) {
        tk_fail =
            toolkit_runtime_error(s.op_pod[NS_OP_TOOLKIT], g->runtime, tk_err, sizeof(tk_err));
        crash_status(&s, NS_OP_TOOLKIT, tk_fail);
    }
    bool toolkit_up = driver_up && !tk_fail &&
                      (g->toolkit == NS_PROV_HOST || up_for(&s, NS_OP_TOOLKIT, e->t.toolkit_ms));
    ns_probe_view pv = {.has_gpus = has_gpus,
                        .driver_up = driver_up,
                        .driver_fail = has_gpus && n->faults.driver_fail,
                        .toolkit_up = toolkit_up};
    probe_answers(&s, &pv);

    /* The GPUs still on the bus and their MIG state. */
    int n_gpus = 0;
    kc_mp_gpu_state present[NS_MAX_GPUS];
    for (int i = 0; i < g->gpus && i < NS_MAX_GPUS; i++)
        if (!((n->faults.lost_gpus >> i) & 1u))
            present[n_gpus++] = n->mig[i];

    if (has_gpus && !rebooting)
        mig_manager(&s);

    /* Device plugin. */
    json_t *resources = json_object();
    json_t *limits = NULL;
    char why[KC_ERR_MSG_MAX];
    const json_t *dp = s.op_pod[NS_OP_DEVICE_PLUGIN];
    if (has_gpus && dp && driver_up && up_for(&s, NS_OP_DEVICE_PLUGIN, e->t.plugin_ms)) {
        ns_dpconfig *cfg = pod_dpconfig(&s, dp, why, sizeof(why));
        if (!cfg && why[0]) {
            kc_warn("device plugin config unusable; advertising nothing", "node=%s err=\"%s\"",
                    n->name, why);
        } else {
            json_t *adv = NULL;
            kc_err err;
            if (ns_dp_advertise(cfg, ns_pod_mig_strategy(dp, cfg), g->model, (size_t)n_gpus,
                                present, &adv, &err) == KC_OK) {
                /* Quantities are strings in a Node's status. */
                const char *k;
                json_t *v;
                json_object_foreach(adv, k, v) json_object_set_new(
                    resources, k, json_sprintf("%lld", (long long)json_integer_value(v)));
                if (ns_dp_allocate_limits(cfg, adv, &limits, &err) != KC_OK)
                    kc_warn("cannot compute the allocate limits", "node=%s err=\"%s\"", n->name,
                            err.msg);
                json_decref(adv);
            } else {
                kc_debug("device plugin advertises nothing", "node=%s err=\"%s\"", n->name,
                         err.msg);
            }
        }
        ns_dpconfig_free(cfg);
    }

    /* GPU feature discovery (its labels stay when it stops, as NFD keeps them). */
    const json_t *gfd = s.op_pod[NS_OP_GFD];
    if (has_gpus && gfd && driver_up && up_for(&s, NS_OP_GFD, e->t.gfd_ms)) {
        ns_dpconfig *cfg = pod_dpconfig(&s, gfd, why, sizeof(why));
        if (!cfg && !why[0] && dp)
            cfg = pod_dpconfig(&s, dp, why, sizeof(why));
        ns_gfd_input in = {.model = g->model,
                           .n_gpus = n_gpus,
                           .mig = present,
                           .strategy = ns_pod_mig_strategy(gfd, cfg),
                           .sharing = cfg,
                           .driver_version = g->driver_version,
                           .cuda_version = g->cuda_version,
                           .machine = json_string_value(
                               json_object_get(g->labels, "node.kubernetes.io/instance-type"))};
        json_t *want = ns_gfd_labels(&in);
        const char *k;
        json_t *v;
        json_object_foreach(want, k, v) set_label(&s, k, json_string_value(v));
        json_object_foreach(s.labels, k, v) if (ns_gfd_owns_label(k) && !json_object_get(want, k))
            set_label(&s, k, NULL);
        json_decref(want);
        ns_dpconfig_free(cfg);
    }

    /* Validation pods see the node as it will be after this step's writes. */
    json_t *alloc = ns_node_base_capacity(g);
    json_object_update(alloc, resources);
    if (rebooting) {
        /* /run is emptied; the validators' init containers run again after the boot. */
        n->ready_files = 0;
        kc_map_free(n->wrote, NULL);
        n->wrote = kc_map_new();
    }
    ns_gate_view gv = {.has_gpus = has_gpus,
                       .driver_up = driver_up,
                       .driver_fail = has_gpus && n->faults.driver_fail,
                       .toolkit_up = toolkit_up,
                       .plugin_gpus = ns_gpu_resource(resources) != NULL,
                       .xid = n->faults.xid_gpus != 0,
                       .written = n->ready_files};
    long init_again = ns_init_step(e, n, s.pods, s.now, &gv, alloc);
    if (init_again >= 0)
        want_again(&s, s.now + (uint64_t)init_again);
    ns_node_view view = {.node = n->name,
                         .model = g->model,
                         .n_gpus = n_gpus,
                         .mig = present,
                         .driver_up = driver_up,
                         .toolkit_up = toolkit_up,
                         .driver_version = g->driver_version,
                         .cuda_version = g->cuda_version,
                         .allocatable = alloc,
                         .faults = &n->faults};
    validations(&s, &view);
    json_decref(alloc);

    write_labels(&s);
    write_allocate_limits(&s, limits);
    json_decref(limits);
    write_status(&s, resources, !n->faults.notready && !rebooting,
                 rebooting ? "node is rebooting" : "kubelet stopped posting node status (fault)");
    json_decref(resources);
done:
    json_decref(s.label_patch);
    json_decref(s.pods);
    json_decref(s.node);
    return s.again;
}
