/* op_gate: per-node gating of the driver → toolkit → device plugin → MIG chain. */
#include "op_gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op_render.h"

static const char *const stage_names[OP_STAGE_COUNT] = {"driver", "container-toolkit",
                                                        "device-plugin", "mig-manager"};
static const char *const stage_labels[OP_STAGE_COUNT] = {
    "nvidia.com/gpu.deploy.driver", "nvidia.com/gpu.deploy.container-toolkit",
    "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.mig-manager"};
static const char *const stage_ds[OP_STAGE_COUNT] = {
    "nvidia-driver-daemonset", "nvidia-container-toolkit-daemonset",
    "nvidia-device-plugin-daemonset", "nvidia-mig-manager"};
static const char *const stage_modes[OP_STAGE_COUNT] = {"driver", "toolkit", "plugin", "mig"};

const char *const op_follower_labels[] = {
    "nvidia.com/gpu.deploy.gpu-feature-discovery", "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",         "nvidia.com/gpu.deploy.operator-validator",
    "nvidia.com/gpu.deploy.node-status-exporter",  NULL};

const char *op_stage_name(op_stage s)
{
    return s < OP_STAGE_COUNT ? stage_names[s] : "done";
}
const char *op_stage_deploy_label(op_stage s)
{
    return s < OP_STAGE_COUNT ? stage_labels[s] : NULL;
}
const char *op_stage_daemonset(op_stage s)
{
    return s < OP_STAGE_COUNT ? stage_ds[s] : NULL;
}
const char *op_stage_mode(op_stage s)
{
    return s < OP_STAGE_COUNT ? stage_modes[s] : NULL;
}

const char *op_node_phase_name(op_node_phase p)
{
    static const char *const n[] = {"not-gpu", "opted-out", "in-progress", "reconfiguring",
                                    "failed",  "done",      "blocked"};
    return p <= OP_NODE_BLOCKED ? n[p] : "?";
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static const char *node_label(const json_t *node, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), key));
}

bool op_node_is_gpu(const json_t *node)
{
    static const char *const keys[] = {"feature.node.kubernetes.io/pci-10de.present",
                                       "feature.node.kubernetes.io/pci-0302_10de.present",
                                       "feature.node.kubernetes.io/pci-0300_10de.present"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = node_label(node, keys[i]);
        if (v && strcmp(v, "true") == 0)
            return true;
    }
    return false;
}

const char *op_node_runtime(const json_t *node)
{
    const char *v = str_at(json_object_get(node, "status"), "nodeInfo", "containerRuntimeVersion");
    static const struct {
        const char *prefix, *name;
    } known[] = {{"containerd://", "containerd"}, {"docker://", "docker"}, {"cri-o://", "crio"}};
    for (size_t i = 0; v && i < sizeof known / sizeof known[0]; i++)
        if (!strncmp(v, known[i].prefix, strlen(known[i].prefix)))
            return known[i].name;
    return NULL;
}

bool op_pod_ready(const json_t *pod)
{
    if (!pod || json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
        return false;
    const char *phase = str_at(pod, "status", "phase");
    if (!phase || strcmp(phase, "Running") != 0)
        return false;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
    {
        const char *t = str_at(c, "type", NULL), *s = str_at(c, "status", NULL);
        if (t && s && strcmp(t, "Ready") == 0)
            return strcmp(s, "True") == 0;
    }
    return false;
}

void op_gate_out_clear(op_gate_out *out)
{
    json_decref(out->labels);
    json_decref(out->annotations);
    json_decref(out->create);
    json_decref(out->remove);
    memset(out, 0, sizeof(*out));
}

/* Sets label key to val (NULL removes) in the patch when it differs from the node's. */
static void want_label(const json_t *node, op_gate_out *out, const char *key, const char *val)
{
    const char *cur = node_label(node, key);
    if ((!cur && !val) || (cur && val && strcmp(cur, val) == 0))
        return;
    if (json_object_set_new(out->labels, key, val ? json_string(val) : json_null()))
        out->oom = true; /* a patch missing a label must not be written */
}

/* A deploy label the operator may set or remove: absent or "true" (never a user's "false", nor a
 * pause another component wrote). */
static bool ours(const char *cur)
{
    return !cur || strcmp(cur, "true") == 0;
}

/* The user switched this component off on the node. */
static bool user_off(const json_t *node, const char *key)
{
    const char *cur = node_label(node, key);
    return cur && strcmp(cur, OP_DEPLOY_OFF) == 0;
}

/* ---- taints: whether a DaemonSet's pods can run on the node ---- */

static bool tolerates(const json_t *tol, const json_t *taint)
{
    const char *key = str_at(tol, "key", NULL), *op = str_at(tol, "operator", NULL);
    const char *eff = str_at(tol, "effect", NULL), *val = str_at(tol, "value", NULL);
    const char *tk = str_at(taint, "key", NULL), *tv = str_at(taint, "value", NULL);
    const char *te = str_at(taint, "effect", NULL);
    bool exists = op && strcmp(op, "Exists") == 0;
    if (eff && *eff && (!te || strcmp(eff, te)))
        return false;
    if (!key || !*key)
        return exists; /* an empty key with Exists tolerates every taint */
    if (!tk || strcmp(key, tk))
        return false;
    return exists || !strcmp(val ? val : "", tv ? tv : "");
}

/* The first NoSchedule/NoExecute taint of the node that the DaemonSet's pods do not tolerate, or
 * NULL (also when the DaemonSet is not known yet). The tolerations the DaemonSet controller adds to
 * every pod count (not-ready, unreachable, the pressure conditions, unschedulable: a cordoned node
 * still runs DaemonSet pods). */
static const json_t *untolerated_taint(const json_t *node, const json_t *ds)
{
    static const char *const auto_keys[] = {
        "node.kubernetes.io/not-ready",           "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",       "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable", NULL};
    if (!ds)
        return NULL;
    const json_t *tols = json_object_get(
        json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec"),
        "tolerations");
    size_t i;
    const json_t *taint;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, taint)
    {
        const char *eff = str_at(taint, "effect", NULL), *key = str_at(taint, "key", NULL);
        if (!eff || (strcmp(eff, "NoSchedule") && strcmp(eff, "NoExecute")))
            continue;
        bool ok = false;
        for (int a = 0; auto_keys[a] && !ok; a++)
            ok = key && !strcmp(key, auto_keys[a]);
        size_t j;
        const json_t *tol;
        json_array_foreach(tols, j, tol) if (!ok && tolerates(tol, taint)) ok = true;
        if (!ok)
            return taint;
    }
    return NULL;
}

static void deploy(const json_t *node, op_gate_out *out, const char *key, const char *val)
{
    if (ours(node_label(node, key)))
        want_label(node, out, key, val);
}

/* Whether the node has label key once the patch in out is applied (a pause another component
 * wrote counts: the operand was deployed). */
static bool label_after(const json_t *node, const op_gate_out *out, const char *key)
{
    const json_t *v = json_object_get(out->labels, key);
    return v ? json_is_string(v) : node_label(node, key) != NULL;
}

static uint64_t fnv1a(const char *a, const char *b, const char *c)
{
    uint64_t h = 1469598103934665603ull;
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        for (const char *p = parts[i] ? parts[i] : ""; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ull;
        }
        h ^= 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

static long long rfc3339_ms(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return -1;
    return (long long)timegm(&tm) * 1000;
}

/* The allocatable count of a resource on the node (0 when absent). */
static long allocatable(const json_t *node, const char *res)
{
    const json_t *v =
        json_object_get(json_object_get(json_object_get(node, "status"), "allocatable"), res);
    if (json_is_string(v))
        return atol(json_string_value(v));
    return json_is_integer(v) ? (long)json_integer_value(v) : 0;
}

/* The resource a device-plugin validation requests on this node, or NULL when none is offered. */
static const char *plugin_resource(const json_t *node)
{
    if (allocatable(node, "nvidia.com/gpu") > 0)
        return "nvidia.com/gpu";
    if (allocatable(node, "nvidia.com/gpu.shared") > 0)
        return "nvidia.com/gpu.shared";
    const char *k;
    const json_t *v;
    json_object_foreach(json_object_get(json_object_get(node, "status"), "allocatable"), k,
                        v) if (strncmp(k, "nvidia.com/mig-", 15) == 0 &&
                               allocatable(node, k) > 0) return k;
    return NULL;
}

/* The last meaningful line of a failed validation's output. */
static void failure_reason(const json_t *pod, char *buf, size_t size)
{
    const json_t *cs =
        json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
    const json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");
    const char *msg = str_at(t, "message", NULL);
    if (!t) {
        /* No container ran: the kubelet refused the pod (e.g. OutOfnvidia.com/gpu). */
        const json_t *st = json_object_get(pod, "status");
        const char *why = str_at(st, "message", NULL);
        snprintf(buf, size, "the pod was refused: %s%s%.300s",
                 str_at(st, "reason", NULL) ? str_at(st, "reason", NULL) : "no container ran",
                 why ? ": " : "", why ? why : "");
        return;
    }
    snprintf(buf, size, "exit code %lld",
             (long long)json_integer_value(json_object_get(t, "exitCode")));
    if (!msg)
        return;
    const char *best = NULL;
    size_t best_len = 0;
    for (const char *line = msg; *line;) {
        size_t len = strcspn(line, "\n");
        if (len && strncmp(line, "Done", len) && strncmp(line, "Test FAILED", len)) {
            best = line;
            best_len = len;
        }
        line += len;
        if (*line)
            line++;
    }
    if (best)
        snprintf(buf, size, "%.*s", (int)best_len, best);
}

bool op_waiting_reason_failing(const char *reason)
{
    static const char *const bad[] = {"CrashLoopBackOff",
                                      "ImagePullBackOff",
                                      "ErrImagePull",
                                      "CreateContainerConfigError",
                                      "InvalidImageName",
                                      "RunContainerError",
                                      NULL};
    for (int b = 0; reason && bad[b]; b++)
        if (!strcmp(reason, bad[b]))
            return true;
    return false;
}

/* True when an operand pod is failing rather than starting (a crash loop, an image that cannot
 * be pulled, a bad config); why names the pod, the reason and the last error message. */
bool op_pod_failing(const json_t *pod, const char *ds, char *why, size_t size)
{
    if (!pod)
        return false;
    const char *lists[2] = {"initContainerStatuses", "containerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        const json_t *cs;
        json_array_foreach(json_object_get(json_object_get(pod, "status"), lists[l]), i, cs)
        {
            const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
            const char *r = str_at(w, "reason", NULL);
            if (op_waiting_reason_failing(r)) {
                const char *last =
                    str_at(json_object_get(json_object_get(cs, "lastState"), "terminated"),
                           "message", NULL);
                const char *msg = last ? last : str_at(w, "message", NULL);
                /* The kubelet alternates ErrImagePull and ImagePullBackOff ("Back-off pulling
                 * image \"X\": ErrImagePull: <error>"): one text for both, so the status does
                 * not change with every retry. */
                if (!strcmp(r, "ErrImagePull") || !strcmp(r, "ImagePullBackOff")) {
                    const char *inner = msg ? strstr(msg, ": ErrImagePull: ") : NULL;
                    if (inner && !strncmp(msg, "Back-off pulling image", 22))
                        msg = inner + 16;
                    r = "ImagePullBackOff";
                }
                snprintf(why, size, "%s pod %s is failing: container %s: %s%s%.300s", ds,
                         str_at(json_object_get(pod, "metadata"), "name", NULL) ?: "?",
                         str_at(cs, "name", NULL) ?: "?", r, msg ? ": " : "", msg ? msg : "");
                return true;
            }
        }
    }
    return false;
}

#define DRIVER_ROOT "/run/nvidia/driver"

/* Gives the driver stage's validation container (borrowed from pod) what it needs on a real node:
 * privileged, the driver root mounted read-only, GPU_VALIDATOR_DRIVER_ROOT. Non-zero when out of
 * memory. */
static int driver_root_access(json_t *pod, json_t *ctr)
{
    json_t *env = json_object_get(ctr, "env");
    if (!env) {
        env = json_array();
        if (!env || json_object_set_new(ctr, "env", env))
            return -1;
    }
    return json_object_set_new(
               ctr, "securityContext",
               json_pack("{s:b, s:b}", "privileged", 1, "readOnlyRootFilesystem", 1)) ||
           json_array_append_new(env, json_pack("{s:s, s:s}", "name", "GPU_VALIDATOR_DRIVER_ROOT",
                                                "value", DRIVER_ROOT)) ||
           json_object_set_new(ctr, "volumeMounts",
                               json_pack("[{s:s, s:s, s:b, s:s}]", "name", "driver-root",
                                         "mountPath", DRIVER_ROOT, "readOnly", 1,
                                         "mountPropagation", "HostToContainer")) ||
           json_object_set_new(json_object_get(pod, "spec"), "volumes",
                               json_pack("[{s:s, s:{s:s, s:s}}]", "name", "driver-root", "hostPath",
                                         "path", DRIVER_ROOT, "type", "DirectoryOrCreate"));
}

/* NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES=compute,utility in ctr's env unless
 * spec.validator's env already sets them. Non-zero when out of memory. */
static int visible_devices_all(json_t *ctr)
{
    static const char *const env[][2] = {{"NVIDIA_VISIBLE_DEVICES", "all"},
                                         {"NVIDIA_DRIVER_CAPABILITIES", "compute,utility"}};
    json_t *arr = json_object_get(ctr, "env");
    if (!arr) {
        arr = json_array();
        if (!arr || json_object_set_new(ctr, "env", arr))
            return -1;
    }
    for (size_t i = 0; i < 2; i++) {
        bool have = false;
        size_t k;
        const json_t *e;
        json_array_foreach(arr, k, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            have = have || (n && !strcmp(n, env[i][0]));
        }
        if (!have && json_array_append_new(
                         arr, json_pack("{s:s, s:s}", "name", env[i][0], "value", env[i][1])))
            return -1;
    }
    return 0;
}

static json_t *validation_pod(const op_gate_policy *pol, const json_t *node, op_stage s,
                              const char *key, const char *res, int attempt)
{
    const char *nname = str_at(node, "metadata", "name");
    static const char *const shorts[OP_STAGE_COUNT] = {"driver", "toolkit", "plugin", "mig"};
    char name[96], hash[24], nodelabel[64], att[16];
    snprintf(hash, sizeof(hash), "%010llx",
             (unsigned long long)(fnv1a(nname, key, res) & 0xffffffffffull));
    snprintf(name, sizeof(name), "nvidia-%s-validator-%s-%d", shorts[s], hash, attempt);
    /* Label values are at most 63 characters. */
    if (strlen(nname) <= 63)
        snprintf(nodelabel, sizeof(nodelabel), "%s", nname);
    else
        snprintf(nodelabel, sizeof(nodelabel), "h-%016llx",
                 (unsigned long long)fnv1a(nname, NULL, NULL));
    snprintf(att, sizeof(att), "%d", attempt);
    /* FallbackToLogsOnError: a failed validation's last output lines become its terminated
     * state's message, which the node's status shows (the validator writes no termination log). */
    json_t *ctr =
        json_pack("{s:s, s:s, s:[s], s:[s, s], s:{s:b, s:b, s:{s:[s]}}, s:s}", "name", "validation",
                  "image", pol->validator_image ? pol->validator_image : "", "command",
                  "gpu-validator", "args", "--mode", stage_modes[s], "securityContext",
                  "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1, "capabilities",
                  "drop", "ALL", "terminationMessagePolicy", "FallbackToLogsOnError");
    if (!ctr ||
        (res &&
         json_object_set_new(ctr, "resources", json_pack("{s:{s:s}}", "limits", res, "1"))) ||
        (json_is_array(pol->validator_env[s]) && json_array_size(pol->validator_env[s]) &&
         json_object_set_new(ctr, "env", json_deep_copy(pol->validator_env[s])))) {
        json_decref(ctr);
        return NULL; /* out of memory: no pod rather than one missing its limits */
    }
    json_t *pod = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s, s:s, s:s}}, "
        "s:{s:s, s:s, s:[{s:s}], s:[o], s:b}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", pol->ns, "labels",
        "app", "nvidia-cuda-validator", OP_VAL_STAGE_LABEL, stage_names[s], OP_VAL_NODE_LABEL,
        nodelabel, OP_MANAGED_LABEL, OP_MANAGED_VALUE, "annotations", OP_VAL_KEY_ANN, key,
        "nvidia.com/gpu-operator.attempt", att, "nvidia.com/gpu-operator.resource", res ? res : "",
        "spec", "nodeName", nname, "restartPolicy", "Never", "tolerations", "operator", "Exists",
        "containers", ctr, "automountServiceAccountToken", 0);
    if (!pod)
        return NULL;
    /* The driver stage runs before the toolkit: outside the nvidia runtime, the validator reaches
     * the GPUs through the host's device nodes (privileged) and loads NVML from the driver
     * container's root, which the driver publishes at /run/nvidia/driver on the host. */
    if (s == OP_STAGE_DRIVER && driver_root_access(pod, ctr)) {
        json_decref(pod);
        return NULL;
    }
    /* Through the nvidia runtime, a container gets the driver's libraries only when it asks for
     * devices: NVIDIA_VISIBLE_DEVICES, set by the device plugin's allocation when the pod requests
     * a GPU resource, else here (the toolkit stage requests none). */
    if (s != OP_STAGE_DRIVER && !res && visible_devices_all(ctr)) {
        json_decref(pod);
        return NULL;
    }
    if ((pol->owner && json_object_set_new(json_object_get(pod, "metadata"), "ownerReferences",
                                           json_pack("[O]", pol->owner))) ||
        (s != OP_STAGE_DRIVER && pol->runtime_class && *pol->runtime_class &&
         json_object_set_new(json_object_get(pod, "spec"), "runtimeClassName",
                             json_string(pol->runtime_class)))) {
        json_decref(pod);
        return NULL;
    }
    return pod;
}

/* Evaluates one stage's validation: the pods wanted (one per resource in res[], or one without a
 * resource when n_res == 0) keyed by key. Returns 1 when all Succeeded, 0 in progress, -1 failed
 * (reason set). */
static int validate(const op_gate_policy *pol, const op_gate_in *in, op_stage s, const char *key,
                    const char *const *res, int n_res, op_gate_out *out)
{
    const op_gate_stage_in *si = &in->stage[s];
    const json_t *node = in->node;
    int n_want = n_res > 0 ? n_res : 1;
    int all_ok = 1;
    /* Pods of another key (an older operand pod or MIG layout) are out of date. */
    bool keep[8] = {false};
    for (int w = 0; w < n_want; w++) {
        const char *r = n_res > 0 ? res[w] : "";
        const json_t *latest = NULL;
        int latest_att = -1, li = -1;
        for (int p = 0; p < si->n_val && p < 8; p++) {
            const json_t *ann =
                json_object_get(json_object_get(si->val_pods[p], "metadata"), "annotations");
            const char *k = str_at(ann, OP_VAL_KEY_ANN, NULL);
            const char *pr = str_at(ann, "nvidia.com/gpu-operator.resource", NULL);
            const char *as = str_at(ann, "nvidia.com/gpu-operator.attempt", NULL);
            if (!k || strcmp(k, key) || strcmp(pr ? pr : "", r))
                continue;
            int a = as ? atoi(as) : 0;
            if (a > latest_att) {
                latest_att = a;
                latest = si->val_pods[p];
                li = p;
            }
        }
        if (li >= 0)
            keep[li] = true;
        const char *phase = latest ? str_at(latest, "status", "phase") : NULL;
        if (!latest) {
            if (json_array_append_new(out->create,
                                      validation_pod(pol, node, s, key, n_res ? r : NULL, 0)))
                out->oom = true;
            all_ok = all_ok > 0 ? 0 : all_ok;
            snprintf(out->reason, sizeof(out->reason), "validating %s", stage_names[s]);
        } else if (phase && strcmp(phase, "Succeeded") == 0) {
            continue;
        } else if (phase && strcmp(phase, "Failed") == 0) {
            char why[400];
            failure_reason(latest, why, sizeof(why));
            snprintf(out->reason, sizeof(out->reason), "%s validation failed%s%s: %s",
                     stage_names[s], n_res ? " for " : "", n_res ? r : "", why);
            all_ok = -1;
            /* Retry after a backoff doubling per attempt. */
            long base = pol->backoff_base_ms > 0 ? pol->backoff_base_ms : 5000;
            long cap = pol->backoff_max_ms > 0 ? pol->backoff_max_ms : 300000;
            long delay = base;
            for (int a = 0; a < latest_att && delay < cap; a++)
                delay *= 2;
            if (delay > cap)
                delay = cap;
            const json_t *cs = json_array_get(
                json_object_get(json_object_get(latest, "status"), "containerStatuses"), 0);
            long long fin = rfc3339_ms(str_at(
                json_object_get(json_object_get(cs, "state"), "terminated"), "finishedAt", NULL));
            /* A pod the kubelet refused (e.g. the GPUs were not allocatable yet) has no
             * container that terminated: its creation starts the backoff. Counting from now
             * would put the retry forever one delay away. */
            if (fin <= 0)
                fin = rfc3339_ms(
                    str_at(json_object_get(latest, "metadata"), "creationTimestamp", NULL));
            long long due = (fin > 0 ? fin : (long long)in->now_ms - delay) + delay;
            if ((long long)in->now_ms >= due) {
                if (json_array_append_new(
                        out->create,
                        validation_pod(pol, node, s, key, n_res ? r : NULL, latest_att + 1)))
                    out->oom = true;
            } else {
                long wait = (long)(due - (long long)in->now_ms);
                if (out->requeue_ms < 0 || wait < out->requeue_ms)
                    out->requeue_ms = wait;
            }
        } else {
            if (all_ok > 0)
                all_ok = 0;
            snprintf(out->reason, sizeof(out->reason), "validating %s (pod %s)", stage_names[s],
                     str_at(latest, "metadata", "name"));
        }
    }
    /* Delete what is no longer wanted: other keys, and superseded attempts once a newer one is
     * being created or exists. */
    for (int p = 0; p < si->n_val && p < 8; p++) {
        if (keep[p])
            continue;
        if (json_array_append_new(out->remove,
                                  json_string(str_at(si->val_pods[p], "metadata", "name"))))
            out->oom = true;
    }
    return all_ok;
}

static kc_code gate_node(const op_gate_policy *pol, const op_gate_in *in, op_gate_out *out,
                         kc_err *err)
{
    memset(out, 0, sizeof(*out));
    out->labels = json_object();
    out->annotations = json_object();
    out->create = json_array();
    out->remove = json_array();
    out->requeue_ms = -1;
    out->stage = -1;
    if (!out->labels || !out->annotations || !out->create || !out->remove) {
        op_gate_out_clear(out);
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    const json_t *node = in->node;
    if (!op_node_is_gpu(node)) {
        out->phase = OP_NODE_NOT_GPU;
        /* A node that lost its GPU labels keeps nothing of ours. */
        if (node_label(node, "nvidia.com/gpu.present"))
            want_label(node, out, "nvidia.com/gpu.present", "false");
        for (int s = 0; s < OP_STAGE_COUNT; s++)
            if (node_label(node, stage_labels[s]) && ours(node_label(node, stage_labels[s])))
                want_label(node, out, stage_labels[s], NULL);
        for (int i = 0; op_follower_labels[i]; i++)
            if (ours(node_label(node, op_follower_labels[i])))
                want_label(node, out, op_follower_labels[i], NULL);
        deploy(node, out, OP_PREPULL_LABEL, NULL);
        return KC_OK;
    }
    want_label(node, out, "nvidia.com/gpu.present", "true");
    const char *optout = node_label(node, "nvidia.com/gpu.deploy.operands");
    if (optout && strcmp(optout, "false") == 0) {
        out->phase = OP_NODE_OPTED_OUT;
        /* The operator's labels go (NVIDIA's operator removes them too); a user's "false" and a
         * pause another component wrote stay. */
        for (int s = 0; s < OP_STAGE_COUNT; s++)
            deploy(node, out, stage_labels[s], NULL);
        for (int i = 0; op_follower_labels[i]; i++)
            deploy(node, out, op_follower_labels[i], NULL);
        deploy(node, out, OP_PREPULL_LABEL, NULL);
        snprintf(out->reason, sizeof(out->reason),
                 "opted out (nvidia.com/gpu.deploy.operands=false)");
        return KC_OK;
    }
    bool mig_capable = (node_label(node, "nvidia.com/mig.capable") &&
                        strcmp(node_label(node, "nvidia.com/mig.capable"), "true") == 0);
    /* The default MIG config for a node that asks for none. Only the MIG manager reads it, so it
     * waits for the node's next label patch (at the latest the one that deploys the MIG manager)
     * rather than costing a patch of its own when GPU feature discovery reports mig.capable. */
    bool mig_default = mig_capable && pol->enabled[OP_STAGE_MIG] && pol->mig_default &&
                       *pol->mig_default && !node_label(node, "nvidia.com/mig.config");

    /* The stages this node goes through: enabled by the spec, MIG on MIG-capable nodes, and not
     * switched off on the node by its user. The operands that follow the chain (GFD, DCGM, ...)
     * come once the last of the driver and the toolkit the node runs is validated. */
    bool on[OP_STAGE_COUNT];
    int base_last = -1;
    for (int s = 0; s < OP_STAGE_COUNT; s++) {
        on[s] = pol->enabled[s] && (s != OP_STAGE_MIG || mig_capable) &&
                !user_off(node, stage_labels[s]);
        if (on[s] && (s == OP_STAGE_DRIVER || s == OP_STAGE_TOOLKIT))
            base_last = s;
        /* A stage switched off keeps no validation pod of ours on the node. */
        for (int p = 0; !on[s] && p < in->stage[s].n_val && p < 8; p++) {
            const json_t *m = json_object_get(in->stage[s].val_pods[p], "metadata");
            if (!json_object_get(m, "deletionTimestamp") &&
                json_array_append_new(out->remove, json_string(str_at(m, "name", NULL))))
                out->oom = true;
        }
    }
    bool prev_done = true, followers_ok = base_last < 0;
    out->phase = OP_NODE_IN_PROGRESS;
    for (int s = 0; s < OP_STAGE_COUNT; s++) {
        if (!on[s])
            continue;
        if (!prev_done)
            break;
        out->stage = s;
        const char *cur = node_label(node, stage_labels[s]);
        if (!ours(cur)) {
            out->phase =
                strcmp(cur, OP_PAUSED_MIG) == 0 ? OP_NODE_RECONFIGURING : OP_NODE_IN_PROGRESS;
            snprintf(out->reason, sizeof(out->reason), "%s=%s", stage_labels[s], cur);
            prev_done = false;
            break;
        }
        deploy(node, out, stage_labels[s], "true");
        const json_t *pod = in->stage[s].operand_pod;
        const json_t *taint = pod ? NULL : untolerated_taint(node, in->stage[s].ds);
        if (taint) {
            /* Not transient: the DaemonSet controller will not place the pod until the taint
             * goes or the operands tolerate it. */
            const char *tv = str_at(taint, "value", NULL);
            out->phase = OP_NODE_BLOCKED;
            snprintf(out->reason, sizeof(out->reason),
                     "the operands cannot be scheduled on this node: its taint %s%s%s:%s is not "
                     "tolerated by %s; add a toleration for it to the ClusterPolicy's "
                     "spec.daemonsets.tolerations (Helm value daemonsets.tolerations), or remove "
                     "the taint",
                     str_at(taint, "key", NULL) ?: "?", tv && *tv ? "=" : "", tv ? tv : "",
                     str_at(taint, "effect", NULL) ?: "?", stage_ds[s]);
            prev_done = false;
            break;
        }
        if (!op_pod_ready(pod)) {
            if (op_pod_failing(pod, stage_ds[s], out->reason, sizeof(out->reason)))
                out->phase = OP_NODE_FAILED;
            else
                snprintf(out->reason, sizeof(out->reason),
                         "waiting for %s to be Ready on the node%s", stage_ds[s],
                         pod ? "" : " (no pod yet)");
            prev_done = false;
            break;
        }
        char key[256];
        const char *uid = str_at(pod, "metadata", "uid");
        int r;
        if (s == OP_STAGE_MIG) {
            const char *cfg = node_label(node, "nvidia.com/mig.config");
            const char *st = node_label(node, "nvidia.com/mig.config.state");
            if (st && (!strcmp(st, "pending") || !strcmp(st, "rebooting"))) {
                out->phase = OP_NODE_RECONFIGURING;
                snprintf(out->reason, sizeof(out->reason), "MIG reconfiguration to %s: %s",
                         cfg ? cfg : "?", st);
                prev_done = false;
                break;
            }
            if (st && !strcmp(st, "failed") && in->mig_state_stale) {
                out->phase = OP_NODE_RECONFIGURING;
                snprintf(out->reason, sizeof(out->reason),
                         "waiting for the MIG manager to take up %s (the failed state is an "
                         "earlier config's)",
                         cfg ? cfg : "?");
                prev_done = false;
                break;
            }
            if (st && !strcmp(st, "failed")) {
                out->phase = OP_NODE_FAILED;
                if (in->mig_problem)
                    snprintf(out->reason, sizeof(out->reason), "%s", in->mig_problem);
                else
                    snprintf(out->reason, sizeof(out->reason),
                             "MIG config %s failed (nvidia.com/mig.config.state=failed)",
                             cfg ? cfg : "?");
                prev_done = false;
                break;
            }
            if (!st || strcmp(st, "success")) {
                snprintf(out->reason, sizeof(out->reason),
                         "waiting for the MIG manager to apply %s", cfg ? cfg : "a config");
                prev_done = false;
                break;
            }
            /* One validation per MIG resource the node advertises. */
            const char *res[8];
            int n_res = 0;
            const char *k;
            const json_t *v;
            json_object_foreach(json_object_get(json_object_get(node, "status"), "allocatable"), k,
                                v) if (strncmp(k, "nvidia.com/mig-", 15) == 0 &&
                                       allocatable(node, k) > 0 && n_res < 8) res[n_res++] = k;
            if (n_res == 0)
                continue; /* MIG disabled everywhere: the plugin validation covers the GPUs */
            snprintf(key, sizeof(key), "%s/%s", uid ? uid : "", cfg ? cfg : "");
            r = validate(pol, in, s, key, res, n_res, out);
        } else if (s == OP_STAGE_PLUGIN) {
            const char *res = plugin_resource(node);
            const char *product = node_label(node, "nvidia.com/gpu.product");
            size_t plen = product ? strlen(product) : 0;
            if (!res && plen > 12 && !strcmp(product + plen - 12, "-MIG-INVALID")) {
                /* Not transient: the layout and the strategy do not go together. */
                out->phase = OP_NODE_FAILED;
                snprintf(out->reason, sizeof(out->reason),
                         "the device plugin advertises nothing: the MIG layout (%s) mixes "
                         "profiles, which the single MIG strategy cannot use (GPU feature "
                         "discovery reports %s); use mig.strategy=mixed or a single-profile config",
                         node_label(node, "nvidia.com/mig.config") ?: "?", product);
                prev_done = false;
                break;
            }
            if (!res) {
                snprintf(out->reason, sizeof(out->reason),
                         "waiting for the device plugin to advertise GPUs (no nvidia.com/gpu or "
                         "nvidia.com/mig-* allocatable)");
                prev_done = false;
                break;
            }
            char count[32];
            snprintf(count, sizeof(count), "%ld", allocatable(node, res));
            snprintf(key, sizeof(key), "%s/%s=%s", uid ? uid : "", res, count);
            const char *one[1] = {res};
            r = validate(pol, in, s, key, one, 1, out);
        } else {
            snprintf(key, sizeof(key), "%s", uid ? uid : "");
            r = validate(pol, in, s, key, NULL, 0, out);
        }
        if (r < 0) {
            out->phase = OP_NODE_FAILED;
            prev_done = false;
            break;
        }
        if (r == 0) {
            prev_done = false;
            break;
        }
        if (s == base_last)
            followers_ok = true;
    }
    if (followers_ok && pol->followers_enabled)
        for (int i = 0; op_follower_labels[i]; i++)
            deploy(node, out, op_follower_labels[i], "true");
    /* The image pre-pull runs while a deploy label of the node's chain is still to come: it starts
     * in a patch that deploys an operand (the first) and ends with the last, in their patches.
     * A stage that comes up later (the MIG manager, once GPU feature discovery reports MIG) does
     * not start it again: that would cost patches of its own. */
    bool to_come = false, deploys = false;
    for (int s = 0; s < OP_STAGE_COUNT && !to_come; s++)
        to_come = on[s] && !label_after(node, out, stage_labels[s]);
    for (int i = 0; pol->followers_enabled && op_follower_labels[i] && !to_come; i++)
        to_come = !label_after(node, out, op_follower_labels[i]);
    const char *lk;
    const json_t *lv;
    json_object_foreach(out->labels, lk, lv) if (!strncmp(lk, "nvidia.com/gpu.deploy.", 22) &&
                                                 json_is_string(lv) && !node_label(node, lk))
        deploys = true;
    bool prepull =
        pol->image_prepull && to_come && (node_label(node, OP_PREPULL_LABEL) != NULL || deploys);
    deploy(node, out, OP_PREPULL_LABEL, prepull ? "true" : NULL);
    if (prev_done && in->mig_problem) {
        /* Everything else runs; what the node asked of MIG does not happen. */
        out->phase = OP_NODE_FAILED;
        out->stage = OP_STAGE_MIG;
        snprintf(out->reason, sizeof(out->reason), "%s", in->mig_problem);
    } else if (prev_done) {
        out->phase = OP_NODE_DONE;
        out->stage = OP_STAGE_COUNT;
        out->reason[0] = '\0';
    }
    /* Written with the other labels of this transition, or alone where no transition will come
     * to carry it: the node is at the MIG stage or past it, or no longer waiting on the chain. */
    if (mig_default && (json_object_size(out->labels) > 0 || out->stage >= OP_STAGE_MIG ||
                        out->phase != OP_NODE_IN_PROGRESS)) {
        want_label(node, out, "nvidia.com/mig.config", pol->mig_default);
        if (json_object_set_new(out->annotations, OP_MIG_DEFAULT_ANN,
                                json_string(pol->mig_default)))
            out->oom = true;
    }
    return KC_OK;
}

kc_code op_gate_node(const op_gate_policy *pol, const op_gate_in *in, op_gate_out *out, kc_err *err)
{
    kc_code rc = gate_node(pol, in, out, err);
    if (rc == KC_OK && out->oom) {
        /* Half a decision (a label or a pod missing) must not be acted on. */
        op_gate_out_clear(out);
        return kc_err_set(err, KC_ENOMEM, "out of memory deciding a node's labels and pods");
    }
    return rc;
}
