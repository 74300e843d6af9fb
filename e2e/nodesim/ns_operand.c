/* ns_operand: pod classification and validation-pod outcomes for nodesim. */
#include "ns_operand.h"
#include "ns_access.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[NS_OP_COUNT] = {
    "none",
    "driver",
    "container-toolkit",
    "device-plugin",
    "mps-control-daemon",
    "gpu-feature-discovery",
    "dcgm",
    "dcgm-exporter",
    "mig-manager",
    "operator-validator",
    "validation",
};

const char *ns_operand_name(ns_operand op)
{
    return op >= 0 && op < NS_OP_COUNT ? op_names[op] : "?";
}

static const struct {
    const char *app;
    ns_operand op;
} apps[] = {
    {"nvidia-driver-daemonset", NS_OP_DRIVER},
    {"nvidia-container-toolkit-daemonset", NS_OP_TOOLKIT},
    {"nvidia-device-plugin-daemonset", NS_OP_DEVICE_PLUGIN},
    {"nvidia-device-plugin-mps-control-daemon", NS_OP_MPS},
    {"gpu-feature-discovery", NS_OP_GFD},
    {"nvidia-dcgm", NS_OP_DCGM},
    {"nvidia-dcgm-exporter", NS_OP_DCGM_EXPORTER},
    {"nvidia-mig-manager", NS_OP_MIG_MANAGER},
    {"nvidia-operator-validator", NS_OP_VALIDATOR},
    /* The operator's image pre-pull runs a hold program in NVIDIA's images, none of NVIDIA's
     * programs. */
    {"nvidia-image-prepull", NS_OP_NONE},
};

/* Image name fragments, most specific first. */
static const struct {
    const char *frag;
    ns_operand op;
} images[] = {
    {"k8s-mig-manager", NS_OP_MIG_MANAGER},
    {"dcgm-exporter", NS_OP_DCGM_EXPORTER},
    {"gpu-feature-discovery", NS_OP_GFD},
    {"container-toolkit", NS_OP_TOOLKIT},
    {"k8s-device-plugin", NS_OP_DEVICE_PLUGIN},
    {"/dcgm:", NS_OP_DCGM},
    {"/driver:", NS_OP_DRIVER},
};

static const char *label(const json_t *pod, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), key));
}

static bool runs_to_completion(const json_t *pod)
{
    const char *rp =
        json_string_value(json_object_get(json_object_get(pod, "spec"), "restartPolicy"));
    return rp && (strcmp(rp, "Never") == 0 || strcmp(rp, "OnFailure") == 0);
}

/* NVIDIA's CUDA sample images users run as a smoke test (nvcr.io/nvidia/k8s/cuda-sample:
 * vectoradd-cuda12.5.0 and the like, the older nvidia/samples:vectoradd-cuda11.2.1). */
static bool is_cuda_sample(const json_t *pod)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const char *img = json_string_value(json_object_get(c, "image"));
        if (img && (fnmatch("*cuda-sample:vectoradd*", img, 0) == 0 ||
                    fnmatch("*/samples:vectoradd*", img, 0) == 0))
            return true;
    }
    return false;
}

/* Images that hold the validator: this project's image (gpu-operator and gpu-operator-validator
 * are one image), NVIDIA's gpu-operator-validator (until v25.3) and NVIDIA's operator image, which
 * carries the validator since v25.10. */
static const char *const validator_images[] = {
    "*gpu-operator-validator:*",
    "*gpu-operator-validator@*",
    "*/gpu-operator:*",
    "*/gpu-operator@*",
};

bool ns_image_has_validator(const char *img, const char *glob)
{
    if (!img)
        return false;
    if (glob)
        return fnmatch(glob, img, 0) == 0;
    for (size_t i = 0; i < sizeof(validator_images) / sizeof(validator_images[0]); i++)
        if (fnmatch(validator_images[i], img, 0) == 0)
            return true;
    return false;
}

static const char *const validator_programs[] = {"gpu-validator", "nvidia-validator", "vectorAdd"};

/* The validator program a container runs (its command, or a shell's script in its args), or
 * NULL; *direct tells whether it is the command itself (not started through a shell). */
static const char *validator_program(const json_t *c, bool *direct)
{
    const char *cmd = json_string_value(json_array_get(json_object_get(c, "command"), 0));
    if (cmd) {
        const char *base = strrchr(cmd, '/');
        base = base ? base + 1 : cmd;
        for (size_t k = 0; k < 3; k++)
            if (!strcmp(base, validator_programs[k])) {
                *direct = true;
                return validator_programs[k];
            }
    }
    *direct = false;
    const char *keys[2] = {"command", "args"};
    for (int i = 0; i < 2; i++) {
        size_t j;
        const json_t *a;
        json_array_foreach(json_object_get(c, keys[i]), j, a)
        {
            const char *w = json_string_value(a);
            for (size_t k = 0; w && k < 3; k++)
                if (strstr(w, validator_programs[k]))
                    return validator_programs[k];
        }
    }
    return NULL;
}

/* A validation pod runs a validator program from an image that holds it: labels do not make a
 * busybox pod validate anything, nor does the operator's image running something else (its
 * cleanup hook). */
static bool runs_validator(const json_t *pod, const char *glob)
{
    if (is_cuda_sample(pod))
        return true;
    /* NVIDIA's workload pods run vectorAdd in an init container. */
    const char *lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        const json_t *c;
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), lists[l]), i, c)
        {
            bool direct;
            const char *img = json_string_value(json_object_get(c, "image"));
            if (!ns_image_has_validator(img, glob))
                continue;
            /* A validator image without a command runs its entrypoint, the validator. */
            if (validator_program(c, &direct) ||
                (!json_object_get(c, "command") && img && strstr(img, "validator")))
                return true;
        }
    }
    return false;
}

const char *ns_missing_program(const json_t *pod, const char *glob, bool *direct)
{
    if (!runs_to_completion(pod) || runs_validator(pod, glob))
        return NULL;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const char *prog = validator_program(c, direct);
        if (prog)
            return prog;
    }
    return NULL;
}

ns_operand ns_operand_of_pod(const json_t *pod, const char *validator_glob)
{
    if (runs_to_completion(pod))
        return runs_validator(pod, validator_glob) ? NS_OP_VALIDATION : NS_OP_NONE;
    const char *app = label(pod, "app");
    if (app)
        for (size_t i = 0; i < sizeof(apps) / sizeof(apps[0]); i++)
            if (strcmp(app, apps[i].app) == 0)
                return apps[i].op;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const char *img = json_string_value(json_object_get(c, "image"));
        for (size_t k = 0; img && k < sizeof(images) / sizeof(images[0]); k++)
            if (strstr(img, images[k].frag))
                return images[k].op;
    }
    return NS_OP_NONE;
}

const char *ns_runtime_name(const char *v)
{
    if (!v)
        return NULL;
    if (!strncmp(v, "containerd://", 13))
        return "containerd";
    if (!strncmp(v, "docker://", 9))
        return "docker";
    if (!strncmp(v, "cri-o://", 8))
        return "crio";
    return NULL;
}

const char *ns_pod_env(const json_t *pod, const char *name)
{
    const json_t *spec = json_object_get(pod, "spec");
    const char *lists[2] = {"containers", "initContainers"};
    for (int l = 0; l < 2; l++) {
        size_t i, j;
        const json_t *c, *e;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
            json_array_foreach(json_object_get(c, "env"), j, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            if (n && strcmp(n, name) == 0 && json_is_string(json_object_get(e, "value")))
                return json_string_value(json_object_get(e, "value"));
        }
    }
    return NULL;
}

const char *ns_pod_arg(const json_t *pod, const char *arg)
{
    size_t alen = strlen(arg);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const char *lists[2] = {"command", "args"};
        for (int l = 0; l < 2; l++) {
            const json_t *a = json_object_get(c, lists[l]);
            for (size_t j = 0; j < json_array_size(a); j++) {
                const char *s = json_string_value(json_array_get(a, j));
                if (!s || strncmp(s, arg, alen) != 0)
                    continue;
                if (s[alen] == '=')
                    return s + alen + 1;
                if (s[alen] == '\0' && j + 1 < json_array_size(a))
                    return json_string_value(json_array_get(a, j + 1));
            }
        }
    }
    return NULL;
}

ns_mig_strategy ns_pod_mig_strategy(const json_t *pod, const ns_dpconfig *cfg)
{
    const char *s = ns_pod_env(pod, "MIG_STRATEGY");
    if (!s)
        s = ns_pod_arg(pod, "--mig-strategy");
    int v = s ? ns_mig_strategy_parse(s) : -1;
    if (v >= 0)
        return (ns_mig_strategy)v;
    if (cfg && cfg->has_strategy)
        return cfg->strategy;
    return NS_MIG_NONE;
}

const char *ns_pod_configmap(const json_t *pod, const char *const *names, bool any_fallback)
{
    const json_t *vols = json_object_get(json_object_get(pod, "spec"), "volumes");
    size_t i;
    const json_t *v;
    for (int n = 0; names && names[n]; n++)
        json_array_foreach(vols, i, v)
        {
            const char *vn = json_string_value(json_object_get(v, "name"));
            const char *cm =
                json_string_value(json_object_get(json_object_get(v, "configMap"), "name"));
            if (vn && cm && strcmp(vn, names[n]) == 0)
                return cm;
        }
    if (any_fallback)
        json_array_foreach(vols, i, v)
        {
            const char *cm =
                json_string_value(json_object_get(json_object_get(v, "configMap"), "name"));
            if (cm)
                return cm;
        }
    return NULL;
}

static const char vectoradd[] = "[Vector addition of 50000 elements]\n"
                                "Copy input data from the host memory to the CUDA device\n"
                                "CUDA kernel launch with 196 blocks of 256 threads\n"
                                "Copy output data from the CUDA device to the host memory\n"
                                "Test PASSED\n";

const char *ns_vectoradd_output(void)
{
    return vectoradd;
}

json_t *ns_probe_answers(const json_t *pod, ns_operand op, const ns_probe_view *v)
{
    const char *fail = NULL;
    if (op == NS_OP_NONE || op == NS_OP_VALIDATION)
        fail = NULL;
    else if (!v->has_gpus)
        fail = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver "
               "(no NVIDIA GPU on this node)";
    else if (v->driver_fail)
        fail = "modprobe: ERROR: could not insert 'nvidia': No such device";
    else if (!v->driver_up)
        fail = op == NS_OP_DRIVER
                   ? "test: /sys/module/nvidia/refcnt: No such file or directory (the NVIDIA "
                     "kernel modules are not loaded yet)"
                   : "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                     "driver. Make sure that the latest NVIDIA driver is installed and running.";
    else if (op == NS_OP_TOOLKIT && !v->toolkit_up)
        fail = "the NVIDIA container toolkit is not installed yet (no "
               "/usr/local/nvidia/toolkit/nvidia-container-runtime)";
    json_t *out = NULL;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        if (!name ||
            (!json_object_get(c, "startupProbe") && !json_object_get(c, "readinessProbe") &&
             !json_object_get(c, "livenessProbe")))
            continue;
        if (!out)
            out = json_object();
        json_object_set_new(out, name, json_string(fail ? fail : "ok"));
    }
    return out;
}

/* Appends to a growing string. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[1024];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(tmp))
        n = sizeof(tmp) - 1;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *ns = realloc(b->s, nc);
        if (!ns)
            return;
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->len, tmp, (size_t)n + 1);
    b->len += (size_t)n;
}

/* Requested nvidia.com/ resources must be allocatable; the first one that is not, or NULL. */
static const char *missing_resource(const json_t *pod, const json_t *alloc, long *want, long *have)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        const json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
        const char *k;
        const json_t *q;
        json_object_foreach((json_t *)lim, k, q)
        {
            if (strncmp(k, "nvidia.com/", 11) != 0)
                continue;
            long w = json_is_string(q) ? atol(json_string_value(q)) : (long)json_integer_value(q);
            const json_t *a = json_object_get(alloc, k);
            long h =
                a ? (json_is_string(a) ? atol(json_string_value(a)) : (long)json_integer_value(a))
                  : 0;
            if (h < w) {
                *want = w;
                *have = h;
                return k;
            }
        }
    }
    return NULL;
}

/* The container of pod that runs the operator's gpu-validator, or NULL. */
static const json_t *gpu_validator_ctr(const json_t *pod)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c)
    {
        bool direct;
        const char *prog = validator_program(c, &direct);
        if (prog && !strcmp(prog, "gpu-validator"))
            return c;
    }
    return NULL;
}

int ns_validation_run(const json_t *pod, const ns_node_view *v, char **log_out)
{
    sbuf b = {0};
    const json_t *gv = gpu_validator_ctr(pod);
    char amsg[600];
    int acode = 0;
    const char *mode = ns_pod_arg(pod, "--mode");
    if (!mode)
        mode = ns_pod_env(pod, "VALIDATOR_MODE");
    if (!mode)
        mode = "cuda";
    bool ok = false;
    long want = 0, have = 0;
    const char *res;
    bool sample = is_cuda_sample(pod);
    if (sample && (!v->model || v->n_gpus <= 0 || !v->driver_up || !v->toolkit_up ||
                   missing_resource(pod, v->allocatable, &want, &have))) {
        /* The sample itself: cudaMalloc fails when the container got no GPU. */
        sb_add(&b, "[Vector addition of 50000 elements]\n"
                   "Failed to allocate device vector A (error code no CUDA-capable device is "
                   "detected)!\n");
    } else if (!v->model || v->n_gpus <= 0) {
        sb_add(&b,
               "gpu-validator: mode %s on node %s: no NVIDIA GPU found (NVML reports 0 devices)\n",
               mode, v->node);
    } else if (!v->driver_up) {
        sb_add(&b,
               "gpu-validator: no NVIDIA driver: libcuda.so.1: cannot open shared object file: No "
               "such file or directory (is the driver loaded on node %s?)\n",
               v->node);
    } else if (gv && (acode = ns_validator_access(pod, gv, amsg, sizeof(amsg))) != 0) {
        sb_add(&b, "gpu-validator: %s\nTest FAILED\n", amsg);
    } else if (strcmp(mode, "driver") != 0 && !v->toolkit_up) {
        sb_add(&b,
               "gpu-validator: mode %s: the NVIDIA container toolkit is not ready on node %s: the "
               "container was started without the driver libraries (runtime class nvidia not "
               "configured)\n",
               mode, v->node);
    } else if ((res = missing_resource(pod, v->allocatable, &want, &have))) {
        sb_add(&b,
               "gpu-validator: mode %s: %s: %ld requested, %ld allocatable on node %s (is the "
               "device plugin advertising it?)\n",
               mode, res, want, have, v->node);
    } else {
        if (!sample)
            sb_add(&b, "gpu-validator: mode %s on node %s: %d x %s, driver %s, CUDA %s\n", mode,
                   v->node, v->n_gpus, v->model->product, v->driver_version, v->cuda_version);
        for (int g = 0; !sample && v->mig && g < v->n_gpus; g++) {
            if (!v->mig[g].mig_enabled)
                continue;
            char lay[256];
            sb_add(&b, "GPU %d: MIG enabled: %s\n", g,
                   kc_gpu_layout_str(v->model, v->mig[g].counts, lay, sizeof(lay)));
        }
        int xid_gpu = -1;
        for (int g = 0; g < v->n_gpus && g < NS_FAULT_MAX_GPUS; g++)
            if (v->faults && (v->faults->xid_gpus >> g) & 1u) {
                xid_gpu = g;
                break;
            }
        if (!sample && strcmp(mode, "driver") == 0)
            sb_add(&b, "driver validation: NVML sees %d GPUs (driver libraries only)\n", v->n_gpus);
        if (xid_gpu >= 0) {
            sb_add(&b, "[Vector addition of 50000 elements]\n"
                       "Copy input data from the host memory to the CUDA device\n"
                       "CUDA kernel launch with 196 blocks of 256 threads\n");
            sb_add(&b,
                   "Failed to launch vectorAdd kernel (error CUDA_ERROR_LAUNCH_FAILED: unspecified "
                   "launch failure; Xid %d on GPU %d)\n",
                   v->faults->xid_code[xid_gpu], xid_gpu);
        } else {
            sb_add(&b, "%s%s", vectoradd, sample ? "Done\n" : "");
            ok = true;
        }
    }
    if (!b.s)
        b.s = strdup(ok ? "Test PASSED\n" : "validation failed\n");
    *log_out = b.s;
    return ok ? 0 : acode ? acode : 1;
}
