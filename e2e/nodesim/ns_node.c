/* ns_node: the Node object nodesim registers and the labels GPU feature discovery publishes. */
#include "ns_node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void now_rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void set_str(json_t *obj, const char *key, const char *val)
{
    json_object_set_new(obj, key, json_string(val));
}

static void set_int(json_t *obj, const char *key, long v)
{
    json_object_set_new(obj, key, json_sprintf("%ld", v));
}

json_t *ns_node_base_capacity(const ns_fleet_group *g)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "cpu", g->cpu, "memory", g->memory, "pods",
                     g->pods, "ephemeral-storage", "100Gi", "hugepages-1Gi", "0", "hugepages-2Mi",
                     "0");
}

static json_t *cond(const char *type, const char *status, const char *reason, const char *msg,
                    const char *now)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", type, "status", status,
                     "lastHeartbeatTime", now, "lastTransitionTime", now, "reason", reason,
                     "message", msg);
}

json_t *ns_node_conditions(int ready, const char *why, const char *now)
{
    json_t *c = json_array();
    json_array_append_new(c, cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                  "kubelet has sufficient memory available", now));
    json_array_append_new(c, cond("DiskPressure", "False", "KubeletHasNoDiskPressure",
                                  "kubelet has no disk pressure", now));
    json_array_append_new(c, cond("PIDPressure", "False", "KubeletHasSufficientPID",
                                  "kubelet has sufficient PID available", now));
    if (ready)
        json_array_append_new(
            c, cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", now));
    else
        json_array_append_new(c,
                              cond("Ready", "False", "KubeletNotReady",
                                   why && *why ? why : "kubelet stopped posting node status", now));
    return c;
}

/* "5.15.0-1063-aws" → major 5, minor 15, revision 0 (what NFD's kernel source labels). */
static void kernel_labels(json_t *labels, const char *kernel)
{
    unsigned a = 0, b = 0, c = 0;
    set_str(labels, "feature.node.kubernetes.io/kernel-version.full", kernel);
    if (sscanf(kernel, "%u.%u.%u", &a, &b, &c) >= 2) {
        set_int(labels, "feature.node.kubernetes.io/kernel-version.major", a);
        set_int(labels, "feature.node.kubernetes.io/kernel-version.minor", b);
        set_int(labels, "feature.node.kubernetes.io/kernel-version.revision", c);
    }
}

json_t *ns_node_object(const ns_fleet_group *g, const char *name, unsigned index)
{
    json_t *labels = json_deep_copy(g->labels);
    json_t *ann = json_deep_copy(g->annotations);
    if (!labels || !ann) {
        json_decref(labels);
        json_decref(ann);
        return NULL;
    }
    set_str(labels, "kubernetes.io/hostname", name);
    set_str(labels, "kubernetes.io/os", "linux");
    set_str(labels, "kubernetes.io/arch", "amd64");
    set_str(labels, "beta.kubernetes.io/os", "linux");
    set_str(labels, "beta.kubernetes.io/arch", "amd64");
    kernel_labels(labels, g->kernel);
    set_str(labels, "feature.node.kubernetes.io/system-os_release.ID", g->os_id);
    set_str(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID", g->os_version);
    /* NFD splits VERSION_ID at the first dot and keeps the parts as written ("22.04" → 22, 04). */
    const char *dot = strchr(g->os_version, '.');
    if (dot && dot > g->os_version && dot[1]) {
        char major[64];
        snprintf(major, sizeof(major), "%.*s", (int)(dot - g->os_version), g->os_version);
        char minor[64];
        snprintf(minor, sizeof(minor), "%.*s", (int)strcspn(dot + 1, "."), dot + 1);
        set_str(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID.major", major);
        set_str(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor", minor);
    }
    if (g->model)
        set_str(labels, "feature.node.kubernetes.io/pci-10de.present", "true");
    set_str(ann, NS_MANAGED_ANNOTATION, "nodesim");
    set_int(ann, NS_GPUS_ANNOTATION, g->gpus);
    set_str(ann, "node.alpha.kubernetes.io/ttl", "0");
    char now[32];
    now_rfc3339(now);
    char ip[32];
    snprintf(ip, sizeof(ip), "10.%u.%u.%u", 64 + (index / 62500) % 64, (index / 250) % 250,
             index % 250 + 1);
    json_t *cap = ns_node_base_capacity(g);
    json_t *node = json_pack(
        "{s:s, s:s, s:{s:s, s:o, s:o}, s:{}, s:{s:o, s:O, s:o, s:[{s:s, s:s}, {s:s, s:s}], "
        "s:{s:{s:i}}, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}, s:s}}",
        "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels", labels,
        "annotations", ann, "spec", "status", "capacity", cap, "allocatable", cap, "conditions",
        ns_node_conditions(1, NULL, now), "addresses", "type", "InternalIP", "address", ip, "type",
        "Hostname", "address", name, "daemonEndpoints", "kubeletEndpoint", "Port", 10250,
        "nodeInfo", "machineID", name, "systemUUID", name, "bootID", "boot-0", "kernelVersion",
        g->kernel, "osImage", g->os_image, "containerRuntimeVersion", g->runtime, "kubeletVersion",
        "v1.32.0", "kubeProxyVersion", "v1.32.0", "operatingSystem", "linux", "architecture",
        "amd64", "phase", "Running");
    if (node && json_array_size(g->taints) > 0)
        json_object_set(json_object_get(node, "spec"), "taints", g->taints);
    return node;
}

/* ---- GFD ---- */

int ns_gfd_owns_label(const char *key)
{
    static const char *const prefixes[] = {"nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig-",
                                           "nvidia.com/mps.", NULL};
    static const char *const exact[] = {"nvidia.com/mig.capable", "nvidia.com/mig.strategy", NULL};
    if (strncmp(key, "nvidia.com/gpu.deploy.", 22) == 0 ||
        strcmp(key, "nvidia.com/gpu.present") == 0 ||
        strncmp(key, "nvidia.com/gpu.workload.", 24) == 0)
        return 0; /* the operator's labels */
    for (int i = 0; exact[i]; i++)
        if (strcmp(key, exact[i]) == 0)
            return 1;
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* The sharing entry of cfg for resource `res`, or NULL. *kind: "time-slicing" / "mps". */
static const ns_dp_resource *sharing_for(const ns_dpconfig *cfg, const char *res, const char **kind,
                                         int *rename)
{
    if (!cfg)
        return NULL;
    const ns_dp_sharing *s[2] = {&cfg->time_slicing, &cfg->mps};
    const char *k[2] = {"time-slicing", "mps"};
    for (int j = 0; j < 2; j++) {
        if (!s[j]->present)
            continue;
        for (size_t i = 0; i < s[j]->n_resources; i++)
            if (strcmp(s[j]->resources[i].name, res) == 0) {
                *kind = k[j];
                *rename = s[j]->resources[i].rename != NULL || s[j]->rename_by_default;
                return &s[j]->resources[i];
            }
    }
    return NULL;
}

static void driver_labels(json_t *l, const char *drv, const char *cuda)
{
    unsigned a = 0, b = 0;
    char rev[32] = "";
    int n = sscanf(drv, "%u.%u.%31s", &a, &b, rev);
    if (n >= 2) {
        set_int(l, "nvidia.com/cuda.driver-version.major", a);
        set_int(l, "nvidia.com/cuda.driver-version.minor", b);
        if (n == 3)
            set_str(l, "nvidia.com/cuda.driver-version.revision", rev);
        set_str(l, "nvidia.com/cuda.driver-version.full", drv);
        /* The older spellings GFD still publishes. */
        set_int(l, "nvidia.com/cuda.driver.major", a);
        set_int(l, "nvidia.com/cuda.driver.minor", b);
        if (n == 3)
            set_str(l, "nvidia.com/cuda.driver.rev", rev);
    }
    if (sscanf(cuda, "%u.%u", &a, &b) == 2) {
        set_int(l, "nvidia.com/cuda.runtime-version.major", a);
        set_int(l, "nvidia.com/cuda.runtime-version.minor", b);
        set_str(l, "nvidia.com/cuda.runtime-version.full", cuda);
        set_int(l, "nvidia.com/cuda.runtime.major", a);
        set_int(l, "nvidia.com/cuda.runtime.minor", b);
    }
}

static void profile_labels(json_t *l, const char *prefix, const kc_mig_profile *p, int count)
{
    char k[160];
    snprintf(k, sizeof(k), "%s.count", prefix);
    set_int(l, k, count);
    snprintf(k, sizeof(k), "%s.memory", prefix);
    set_int(l, k, p->memory_mib);
    snprintf(k, sizeof(k), "%s.multiprocessors", prefix);
    set_int(l, k, p->multiprocessors);
    snprintf(k, sizeof(k), "%s.slices.gi", prefix);
    set_int(l, k, p->compute_slices);
    snprintf(k, sizeof(k), "%s.slices.ci", prefix);
    set_int(l, k, p->compute_slices);
}

json_t *ns_gfd_labels(const ns_gfd_input *in)
{
    json_t *l = json_object();
    const kc_gpu_model *m = in->model;
    if (!l || !m)
        return l;
    driver_labels(l, in->driver_version, in->cuda_version);
    set_str(l, "nvidia.com/gpu.family", m->family);
    set_int(l, "nvidia.com/gpu.compute.major", m->cc_major);
    set_int(l, "nvidia.com/gpu.compute.minor", m->cc_minor);
    set_str(l, "nvidia.com/gpu.machine", in->machine ? in->machine : "Simulated-Node");
    set_str(l, "nvidia.com/mig.capable", m->mig_capable ? "true" : "false");
    if (m->mig_capable)
        set_str(l, "nvidia.com/mig.strategy", ns_mig_strategy_name(in->strategy));
    set_str(l, "nvidia.com/mps.capable",
            in->sharing && in->sharing->mps.present ? "true" : "false");

    /* Totals of MIG devices per profile over the GPUs with MIG enabled. */
    int totals[KC_GPU_MAX_PROFILES] = {0};
    int mig_gpus = 0;
    for (int i = 0; in->mig && i < in->n_gpus; i++) {
        if (!in->mig[i].mig_enabled)
            continue;
        mig_gpus++;
        for (size_t p = 0; p < m->n_profiles; p++)
            totals[p] += in->mig[i].counts[p];
    }
    const char *product = m->product;
    char prod[160];
    int count = in->n_gpus, memory = m->memory_mib;
    const char *gpu_res = "nvidia.com/gpu";
    if (in->strategy == NS_MIG_SINGLE && mig_gpus > 0) {
        /* Every GPU must be in MIG mode with one profile throughout. */
        int profile = -1, valid = mig_gpus == in->n_gpus;
        for (size_t p = 0; p < m->n_profiles && valid; p++)
            if (totals[p]) {
                if (profile >= 0)
                    valid = 0;
                profile = (int)p;
            }
        if (profile < 0)
            valid = 0;
        if (valid) {
            const kc_mig_profile *pr = &m->profiles[profile];
            char mn[64];
            snprintf(prod, sizeof(prod), "%s-MIG-%s", m->product,
                     kc_gpu_mig_name(pr, mn, sizeof(mn)));
            product = prod;
            count = totals[profile];
            memory = pr->memory_mib;
            set_int(l, "nvidia.com/gpu.multiprocessors", pr->multiprocessors);
            set_int(l, "nvidia.com/gpu.slices.gi", pr->compute_slices);
            set_int(l, "nvidia.com/gpu.slices.ci", pr->compute_slices);
        } else {
            snprintf(prod, sizeof(prod), "%s-MIG-INVALID", m->product);
            set_str(l, "nvidia.com/gpu.product", prod);
            set_str(l, "nvidia.com/gpu.count", "0");
            set_str(l, "nvidia.com/gpu.memory", "0");
            set_str(l, "nvidia.com/gpu.replicas", "0");
            set_str(l, "nvidia.com/gpu.sharing-strategy", "none");
            return l;
        }
    } else if (in->strategy == NS_MIG_MIXED) {
        for (size_t p = 0; p < m->n_profiles; p++) {
            if (!totals[p])
                continue;
            /* GFD and the device plugin name a profile as its resource: "1g.5gb+me" is
             * mig-1g.5gb.me. */
            char prefix[96], mn[64];
            snprintf(prefix, sizeof(prefix), "nvidia.com/mig-%s",
                     kc_gpu_mig_name(&m->profiles[p], mn, sizeof(mn)));
            profile_labels(l, prefix, &m->profiles[p], totals[p]);
            char res[96];
            const char *kind = NULL;
            int renamed = 0;
            snprintf(res, sizeof(res), "%s", prefix);
            const ns_dp_resource *sr = sharing_for(in->sharing, res, &kind, &renamed);
            char k[160];
            snprintf(k, sizeof(k), "%s.replicas", prefix);
            set_int(l, k, sr ? sr->replicas : 1);
            snprintf(k, sizeof(k), "%s.sharing-strategy", prefix);
            set_str(l, k, sr ? kind : "none");
        }
    }
    const char *kind = NULL;
    int renamed = 0;
    const ns_dp_resource *sr = sharing_for(in->sharing, gpu_res, &kind, &renamed);
    char shared[200];
    if (sr && !renamed) {
        snprintf(shared, sizeof(shared), "%s-SHARED", product);
        product = shared;
    }
    set_str(l, "nvidia.com/gpu.product", product);
    set_int(l, "nvidia.com/gpu.count", count);
    set_int(l, "nvidia.com/gpu.memory", memory);
    set_int(l, "nvidia.com/gpu.replicas", sr ? sr->replicas : 1);
    set_str(l, "nvidia.com/gpu.sharing-strategy", sr ? kind : "none");
    return l;
}
