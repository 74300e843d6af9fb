/* op_migcheck: judges the MIG config a node asks for (nvidia.com/mig.config) against the node's
 * GPUs as NVIDIA's MIG manager (mig-parted) will apply it, so the operator can say why before the
 * MIG manager fails, and say it where mig-parted reports success but changes nothing (a config
 * without an entry for the node's GPU model). */
#include "op_migcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_gpu.h"

static const char *label(const json_t *node, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), key));
}

/* The node's GPU model from GPU feature discovery's product label, which carries "-MIG-<profile>"
 * under the single strategy and "-SHARED" when the GPUs are shared; NULL when not in the table.
 * *count is the number of physical GPUs when the label says it (0 when it does not). */
static const kc_gpu_model *node_model(const json_t *node, int *count)
{
    const char *product = label(node, "nvidia.com/gpu.product");
    *count = 0;
    if (!product || !*product)
        return NULL;
    char buf[160];
    snprintf(buf, sizeof(buf), "%s", product);
    size_t n = strlen(buf);
    if (n > 7 && !strcmp(buf + n - 7, "-SHARED"))
        buf[n - 7] = '\0';
    char *mig = strstr(buf, "-MIG-");
    if (mig)
        *mig = '\0';
    else
        *count =
            atoi(label(node, "nvidia.com/gpu.count") ? label(node, "nvidia.com/gpu.count") : "0");
    return kc_gpu_find(buf);
}

/* Slices a layout takes: sums over the entry's profiles the model has. */
static void slices(const kc_gpu_model *m, const kc_mp_entry *e, int *compute, int *memory)
{
    *compute = *memory = 0;
    for (size_t j = 0; j < e->n_profiles; j++) {
        int idx = kc_gpu_profile_index(m, e->profiles[j]);
        if (idx < 0)
            continue;
        *compute += e->counts[j] * m->profiles[idx].compute_slices;
        *memory += e->counts[j] * m->profiles[idx].memory_slices;
    }
}

static bool filter_matches(const kc_mp_entry *e, const kc_gpu_model *m)
{
    if (e->n_filter == 0)
        return true;
    for (size_t i = 0; i < e->n_filter; i++)
        if (e->filter[i] == m->pci_id)
            return true;
    return false;
}

/* Explains a layout that does not fit one GPU: the slice arithmetic, or, where the slices add up,
 * that no placement puts the instances side by side. */
static void explain_fit(const kc_gpu_model *m, const kc_mp_entry *e, char *buf, size_t size)
{
    int counts[KC_GPU_MAX_PROFILES] = {0};
    for (size_t j = 0; j < e->n_profiles; j++) {
        int idx = kc_gpu_profile_index(m, e->profiles[j]);
        if (idx >= 0)
            counts[idx] += e->counts[j];
    }
    if (kc_gpu_layout_fits(m, counts, NULL) == KC_OK) {
        buf[0] = '\0';
        return;
    }
    int cs, ms;
    slices(m, e, &cs, &ms);
    char lay[256];
    kc_gpu_layout_str(m, counts, lay, sizeof(lay));
    size_t l = (size_t)snprintf(buf, size,
                                "%s needs %d of %d memory slices and %d of %d compute "
                                "slices (",
                                lay, ms, m->memory_slices, cs, m->compute_slices);
    for (int i = 0, k = 0; i < (int)m->n_profiles && l < size; i++) {
        if (!counts[i])
            continue;
        l += (size_t)snprintf(buf + l, size - l, "%s%s: %d compute, %d memory", k++ ? "; " : "",
                              m->profiles[i].name, m->profiles[i].compute_slices,
                              m->profiles[i].memory_slices);
    }
    if (l < size)
        l += (size_t)snprintf(buf + l, size - l, ")");
    if (ms <= m->memory_slices && cs <= m->compute_slices && l < size)
        snprintf(buf + l, size - l,
                 "; the slices add up, but NVML has no placement that puts these instances side "
                 "by side");
}

bool op_mig_check(const kc_migparted *mp, const char *source, const char *cfg, const json_t *node,
                  char *why, size_t size)
{
    why[0] = '\0';
    if (!mp || !cfg)
        return true;
    const kc_mp_config *c = kc_migparted_find(mp, cfg);
    if (!c) {
        snprintf(why, size,
                 "MIG config \"%s\" is not defined in %s: the MIG manager will fail it; use one of "
                 "its mig-configs or add \"%s\"",
                 cfg, source, cfg);
        return false;
    }
    int count = 0;
    const kc_gpu_model *m = node_model(node, &count);
    if (!m || !m->mig_capable)
        return true; /* a model we do not know: the MIG manager's own answer stands */
    char pci[16];
    snprintf(pci, sizeof(pci), "0x%08X", m->pci_id);
    bool any = false;
    int max_index = -1;
    for (size_t k = 0; k < c->n_entries; k++) {
        const kc_mp_entry *e = &c->entries[k];
        if (!filter_matches(e, m))
            continue;
        any = true;
        for (size_t i = 0; i < e->n_devices; i++)
            if (e->devices[i] > max_index)
                max_index = e->devices[i];
        if (!e->mig_enabled)
            continue;
        char fit[768];
        explain_fit(m, e, fit, sizeof(fit));
        if (fit[0]) {
            snprintf(why, size,
                     "MIG config \"%s\" (%s) cannot be placed on this node's %s GPUs: %s; "
                     "mig-parted fails it with Insufficient Resources",
                     cfg, source, m->name, fit);
            return false;
        }
    }
    if (!any) {
        snprintf(why, size,
                 "MIG config \"%s\" (%s) has no entry for this node's GPUs (%s, device id %s): "
                 "the MIG manager applies nothing to them and reports success; add an entry "
                 "with device-filter %s or choose a config that has one",
                 cfg, source, m->name, pci, pci);
        return false;
    }
    /* The rest as mig-parted resolves it: profiles the model lacks, GPU indices, limits. */
    size_t n = count > 0 ? (size_t)count : (size_t)(max_index + 1 > 0 ? max_index + 1 : 1);
    if (n > 64)
        n = 64;
    const kc_gpu_model *models[64];
    kc_mp_gpu_state states[64];
    memset(states, 0, sizeof(states));
    for (size_t g = 0; g < n; g++)
        models[g] = m;
    kc_err err;
    if (kc_migparted_apply(mp, cfg, models, n, states, &err) != KC_OK && err.code != KC_ENOMEM) {
        snprintf(why, size, "MIG config \"%s\" (%s) cannot be applied to this node's %s GPUs: %s",
                 cfg, source, m->name, err.msg);
        return false;
    }
    return true;
}
