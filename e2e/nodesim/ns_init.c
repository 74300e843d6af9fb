/* ns_init: which init containers are NVIDIA's readiness gates and what they wait for, and the
 * workload pods NVIDIA's validator creates (see ns_init.h). */
#include "ns_init.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATIONS_DIR "/run/nvidia/validations/"

static const char *ctr_env(const json_t *c, const char *name)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0)
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

/* command and args joined by spaces (malloc'd). */
static char *ctr_text(const json_t *c)
{
    size_t len = 1;
    const char *keys[2] = {"command", "args"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        const json_t *s;
        json_array_foreach(json_object_get(c, keys[k]), i, s) len +=
            strlen(json_string_value(s) ?: "") + 1;
    }
    char *out = calloc(1, len);
    if (!out)
        return NULL;
    for (int k = 0; k < 2; k++) {
        size_t i;
        const json_t *s;
        json_array_foreach(json_object_get(c, keys[k]), i, s)
        {
            if (*out)
                strcat(out, " ");
            strcat(out, json_string_value(s) ?: "");
        }
    }
    return out;
}

/* The value after `--flag` (`--flag x` or `--flag=x`) in text, into buf. */
static bool flag_value(const char *text, const char *flag, char *buf, size_t size)
{
    const char *p = strstr(text, flag);
    if (!p)
        return false;
    p += strlen(flag);
    if (*p != ' ' && *p != '=')
        return false;
    p += strspn(p, " =");
    size_t n = strcspn(p, " ;\"'");
    snprintf(buf, size, "%.*s", (int)n, p);
    return n > 0;
}

void ns_init_gate_of(const json_t *container, ns_init_gate *g)
{
    memset(g, 0, sizeof(*g));
    char *text = ctr_text(container);
    if (!text)
        return;
    const char *f = strstr(text, VALIDATIONS_DIR);
    if (strstr(text, "nvidia-validator")) {
        const char *comp = ctr_env(container, "COMPONENT");
        char buf[32] = "";
        if ((comp && *comp) || flag_value(text, "--component", buf, sizeof(buf))) {
            g->kind = NS_GATE_VALIDATOR;
            g->nvidia = true;
            snprintf(g->what, sizeof(g->what), "%s", comp && *comp ? comp : buf);
            const char *wl = ctr_env(container, "WITH_WORKLOAD");
            g->workload = (!strcmp(g->what, "cuda") || !strcmp(g->what, "plugin")) &&
                          !(wl && !strcmp(wl, "false"));
        }
    } else if (strstr(text, "gpu-validator")) {
        char buf[32];
        if (flag_value(text, "--mode", buf, sizeof(buf))) {
            g->kind = NS_GATE_VALIDATOR;
            snprintf(g->what, sizeof(g->what), "%s", buf);
        }
    } else if (f && (strstr(text, "until") || strstr(text, "while"))) {
        f += strlen(VALIDATIONS_DIR);
        const char *end = strstr(f, "-ready");
        size_t n = end ? (size_t)(end - f) : 0;
        if (n > 0 && n < sizeof(g->what) && strcspn(f, " ]/;\"'") >= n) {
            g->kind = NS_GATE_FILE;
            snprintf(g->what, sizeof(g->what), "%.*s", (int)n, f);
        }
    }
    free(text);
}

unsigned ns_ready_file_bit(const char *what)
{
    static const char *const names[] = {"driver", "toolkit", "cuda", "plugin"};
    for (unsigned i = 0; i < 4; i++)
        if (!strcmp(what, names[i]))
            return 1u << i;
    return 0;
}

bool ns_pod_clears_ready_files(const json_t *pod)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const json_t *ex = json_object_get(
            json_object_get(json_object_get(json_object_get(c, "lifecycle"), "preStop"), "exec"),
            "command");
        if (!ex)
            continue;
        json_t *tmp = json_pack("{s:O}", "command", ex);
        char *text = tmp ? ctr_text(tmp) : NULL;
        json_decref(tmp);
        bool clears = text && strstr(text, "rm ") && strstr(text, VALIDATIONS_DIR);
        free(text);
        if (clears)
            return true;
    }
    return false;
}

/* The component's own state, NULL when up. */
static const char *component_wait(const char *w, const ns_gate_view *v)
{
    if (!strcmp(w, "driver")) {
        if (!v->has_gpus)
            return "no NVIDIA GPU on this node";
        if (v->driver_fail)
            return "the NVIDIA driver failed to load (modprobe: ERROR: could not insert "
                   "'nvidia')";
        return v->driver_up ? NULL : "waiting for the NVIDIA driver to load";
    }
    if (!strcmp(w, "toolkit")) {
        if (!v->has_gpus)
            return "no NVIDIA GPU on this node";
        return v->toolkit_up ? NULL : "waiting for the NVIDIA container toolkit to be set up";
    }
    if (!strcmp(w, "cuda")) {
        if (!v->has_gpus || !v->toolkit_up)
            return "CUDA workload validation cannot run: no usable GPU (driver or container "
                   "toolkit not ready)";
        return v->xid ? "CUDA workload validation failed: a GPU reports an XID error" : NULL;
    }
    if (!strcmp(w, "plugin"))
        return v->plugin_gpus ? NULL
                              : "waiting for the device plugin to advertise GPUs to the kubelet";
    return NULL;
}

const char *ns_init_gate_wait(const ns_init_gate *g, const ns_gate_view *v)
{
    if (g->kind == NS_GATE_NONE)
        return NULL;
    if (g->kind == NS_GATE_FILE) {
        unsigned bit = ns_ready_file_bit(g->what);
        if (!(v->written & bit))
            return "waiting for the ready file: no validator has written it on this node";
    }
    return component_wait(g->what, v);
}

const char *ns_init_workload_app(const ns_init_gate *g)
{
    return !strcmp(g->what, "plugin") ? "nvidia-device-plugin-validator" : "nvidia-cuda-validator";
}

json_t *ns_init_workload_pod(const ns_init_gate *g, const json_t *container, const char *ns,
                             const char *node, const json_t *ds, const char *resource)
{
    bool plugin = !strcmp(g->what, "plugin");
    const char *app = ns_init_workload_app(g);
    const char *image = ctr_env(container, "VALIDATOR_IMAGE");
    if (!image || !*image)
        image = json_string_value(json_object_get(container, "image")) ?: "";
    const char *pull = ctr_env(container, "VALIDATOR_IMAGE_PULL_POLICY");
    if (!pull || !*pull)
        pull = "IfNotPresent";
    char gen[64];
    snprintf(gen, sizeof(gen), "%s-", app);
    json_t *init = json_pack("{s:s, s:s, s:s, s:[s,s], s:[s]}", "name",
                             plugin ? "plugin-validation" : "cuda-validation", "image", image,
                             "imagePullPolicy", pull, "command", "sh", "-c", "args", "vectorAdd");
    json_t *main = json_pack("{s:s, s:s, s:s, s:[s,s], s:[s]}", "name", app, "image", image,
                             "imagePullPolicy", pull, "command", "sh", "-c", "args",
                             plugin ? "echo device-plugin workload validation is successful"
                                    : "echo cuda workload validation is successful");
    if (plugin) {
        json_object_set_new(init, "securityContext",
                            json_pack("{s:b}", "allowPrivilegeEscalation", 0));
        json_object_set_new(
            main, "securityContext",
            json_pack("{s:b, s:b}", "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1));
        json_object_set_new(init, "resources",
                            json_pack("{s:{s:s}, s:{s:s}}", "limits", resource ?: "nvidia.com/gpu",
                                      "1", "requests", resource ?: "nvidia.com/gpu", "1"));
    } else {
        json_object_set_new(
            init, "env",
            json_pack("[{s:s, s:s}]", "name", "NVIDIA_VISIBLE_DEVICES", "value", "all"));
        json_object_set_new(init, "securityContext", json_pack("{s:b}", "privileged", 1));
        json_object_set_new(main, "securityContext",
                            json_pack("{s:b, s:b}", "privileged", 1, "readOnlyRootFilesystem", 1));
    }
    const json_t *tpl =
        json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
    json_t *tol = json_object_get(tpl, "tolerations");
    json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s, s:[o], s:[o]}}",
                            "apiVersion", "v1", "kind", "Pod", "metadata", "generateName", gen,
                            "namespace", ns, "labels", "app", app, "spec", "restartPolicy",
                            "OnFailure", "serviceAccountName", "nvidia-operator-validator",
                            "nodeName", node, "initContainers", init, "containers", main);
    if (!pod)
        return NULL;
    json_t *meta = json_object_get(pod, "metadata");
    if (!plugin)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", "nvidia.cdi.k8s.io/container.cuda-validation",
                                      "management.nvidia.com/gpu=all"));
    json_t *owners = json_object_get(json_object_get(ds, "metadata"), "ownerReferences");
    if (json_array_size(owners))
        json_object_set(meta, "ownerReferences", owners);
    json_object_set_new(json_object_get(pod, "spec"), "tolerations",
                        tol ? json_incref(tol)
                            : json_pack("[{s:s, s:s, s:s}]", "key", "nvidia.com/gpu", "operator",
                                        "Exists", "effect", "NoSchedule"));
    return pod;
}
