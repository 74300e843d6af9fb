/* ns_gpu: nodesim's built-in table of GPU models, their MIG profiles, and the layout-fit check. */
#include "ns_gpu.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Profile memory is published in GiB; GFD labels MiB. */
#define GIB(x) ((int)((x)*1024.0 + 0.5))

/* Memory slices: 1g profiles take 1 (the doubled-memory 1g take 2), 2g take 2, 4g take 4, 7g all 8.
 * 3g profiles are counted as 3 here, not NVIDIA's 4/8: the project's reference facts declare
 * 2×3g.20gb + 1×1g.5gb a valid A100 layout, which only holds with 3. */
static const ns_mig_profile a100_40gb[] = {
    {"1g.5gb", 7, GIB(4.75), 14, 1, 1, 0},   {"1g.5gb+me", 1, GIB(4.75), 14, 1, 1, 1},
    {"1g.10gb", 4, GIB(9.62), 14, 1, 2, 0},  {"2g.10gb", 3, GIB(9.62), 28, 2, 2, 0},
    {"3g.20gb", 2, GIB(19.5), 42, 3, 3, 0},  {"4g.20gb", 1, GIB(19.5), 56, 4, 4, 0},
    {"7g.40gb", 1, GIB(39.25), 98, 7, 8, 0},
};
static const ns_mig_profile a100_80gb[] = {
    {"1g.10gb", 7, GIB(9.75), 14, 1, 1, 0},  {"1g.10gb+me", 1, GIB(9.75), 14, 1, 1, 1},
    {"1g.20gb", 4, GIB(19.5), 14, 1, 2, 0},  {"2g.20gb", 3, GIB(19.5), 28, 2, 2, 0},
    {"3g.40gb", 2, GIB(39.25), 42, 3, 3, 0}, {"4g.40gb", 1, GIB(39.25), 56, 4, 4, 0},
    {"7g.80gb", 1, GIB(79), 98, 7, 8, 0},
};
static const ns_mig_profile h100_80gb[] = {
    {"1g.10gb", 7, GIB(9.75), 16, 1, 1, 0},   {"1g.10gb+me", 1, GIB(9.75), 16, 1, 1, 1},
    {"1g.20gb", 4, GIB(19.62), 26, 1, 2, 0},  {"2g.20gb", 3, GIB(19.62), 32, 2, 2, 0},
    {"3g.40gb", 2, GIB(39.5), 60, 3, 3, 0},   {"4g.40gb", 1, GIB(39.5), 64, 4, 4, 0},
    {"7g.80gb", 1, GIB(79.25), 132, 7, 8, 0},
};
/* H100 NVL: names, maxima and SM counts follow NVIDIA's MIG user guide; the per-instance memory
 * (GiB) is approximate: not confirmed against nvidia-smi output. */
static const ns_mig_profile h100_nvl[] = {
    {"1g.12gb", 7, GIB(10.75), 16, 1, 1, 0},  {"1g.12gb+me", 1, GIB(10.75), 16, 1, 1, 1},
    {"1g.24gb", 4, GIB(21.75), 26, 1, 2, 0},  {"2g.24gb", 3, GIB(21.75), 32, 2, 2, 0},
    {"3g.47gb", 2, GIB(46.38), 60, 3, 3, 0},  {"4g.47gb", 1, GIB(46.38), 64, 4, 4, 0},
    {"7g.94gb", 1, GIB(93.12), 132, 7, 8, 0},
};
static const ns_mig_profile h200[] = {
    {"1g.18gb", 7, GIB(16), 16, 1, 1, 0},       {"1g.18gb+me", 1, GIB(16), 16, 1, 1, 1},
    {"1g.35gb", 4, GIB(32.25), 26, 1, 2, 0},    {"2g.35gb", 3, GIB(32.25), 32, 2, 2, 0},
    {"3g.71gb", 2, GIB(69.5), 60, 3, 3, 0},     {"4g.71gb", 1, GIB(69.5), 64, 4, 4, 0},
    {"7g.141gb", 1, GIB(139.75), 132, 7, 8, 0},
};
/* A30: 4 compute and 4 memory slices. Per-instance memory (GiB) is approximate: not confirmed
 * against nvidia-smi output. */
static const ns_mig_profile a30[] = {
    {"1g.6gb", 4, GIB(5.81), 14, 1, 1, 0},   {"1g.6gb+me", 1, GIB(5.81), 14, 1, 1, 1},
    {"2g.12gb", 2, GIB(11.69), 28, 2, 2, 0}, {"2g.12gb+me", 1, GIB(11.69), 28, 2, 2, 1},
    {"4g.24gb", 1, GIB(23.44), 56, 4, 4, 0},
};

#define PROFILES(p) (p), sizeof(p) / sizeof((p)[0])
#define NO_MIG      0, 0, 0, NULL, 0

/* Whole-GPU memory is the marketed size in GiB × 1024 (GFD would report NVML's slightly smaller
 * figure; the simulation does not need that precision). */
static const ns_gpu_model models[] = {
    {"A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", 0x20B010DE, 40960, "ampere", 8, 0, 1, 7, 8,
     PROFILES(a100_40gb)},
    {"A100-PCIE-40GB", "NVIDIA-A100-PCIE-40GB", 0x20F110DE, 40960, "ampere", 8, 0, 1, 7, 8,
     PROFILES(a100_40gb)},
    {"A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 0x20B210DE, 81920, "ampere", 8, 0, 1, 7, 8,
     PROFILES(a100_80gb)},
    {"A30", "NVIDIA-A30", 0x20B710DE, 24576, "ampere", 8, 0, 1, 4, 4, PROFILES(a30)},
    {"H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", 0x233010DE, 81920, "hopper", 9, 0, 1, 7, 8,
     PROFILES(h100_80gb)},
    {"H100-NVL", "NVIDIA-H100-NVL", 0x232110DE, 96256, "hopper", 9, 0, 1, 7, 8, PROFILES(h100_nvl)},
    {"H200", "NVIDIA-H200", 0x233510DE, 144384, "hopper", 9, 0, 1, 7, 8, PROFILES(h200)},
    {"Tesla-T4", "Tesla-T4", 0x1EB810DE, 16384, "turing", 7, 5, NO_MIG},
    {"Tesla-V100-SXM2-16GB", "Tesla-V100-SXM2-16GB", 0x1DB110DE, 16384, "volta", 7, 0, NO_MIG},
    {"L4", "NVIDIA-L4", 0x27B810DE, 24576, "ada-lovelace", 8, 9, NO_MIG},
};
#define N_MODELS (sizeof(models) / sizeof(models[0]))

/* Short names people type, mapped to our spelling. */
static const struct {
    const char *alias, *name;
} aliases[] = {
    {"V100", "Tesla-V100-SXM2-16GB"},     {"V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"},
    {"H100", "H100-80GB-HBM3"},           {"H100-SXM5", "H100-80GB-HBM3"},
    {"H100-SXM5-80GB", "H100-80GB-HBM3"}, {"H200-141GB", "H200"},
    {"A100", "A100-SXM4-40GB"},           {"A100-80GB", "A100-SXM4-80GB"},
    {"A100-40GB", "A100-SXM4-40GB"},
};

size_t ns_gpu_model_count(void)
{
    return N_MODELS;
}

const ns_gpu_model *ns_gpu_model_at(size_t i)
{
    return i < N_MODELS ? &models[i] : NULL;
}

static int sep(char c)
{
    return c == '-' || c == ' ' || c == '_';
}

/* Compares names ignoring case and treating space, '-' and '_' alike. */
static int name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        if (sep(*a) && sep(*b))
            continue;
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    }
    return *a == *b;
}

/* Skips a vendor prefix ("NVIDIA-", "Tesla-") so "T4" and "Tesla-T4" meet. */
static const char *strip_prefix(const char *s)
{
    static const char *const prefixes[] = {"NVIDIA", "Tesla"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncasecmp(s, prefixes[i], n) == 0 && sep(s[n]) && s[n + 1])
            return s + n + 1;
    }
    return s;
}

const ns_gpu_model *ns_gpu_find(const char *name)
{
    if (!name)
        return NULL;
    const char *bare = strip_prefix(name);
    for (size_t i = 0; i < N_MODELS; i++) {
        if (name_eq(name, models[i].name) || name_eq(name, models[i].product) ||
            name_eq(bare, strip_prefix(models[i].name)))
            return &models[i];
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (name_eq(bare, aliases[i].alias))
            return ns_gpu_find(aliases[i].name);
    }
    return NULL;
}

const ns_gpu_model *ns_gpu_find_pci(uint32_t pci_id)
{
    for (size_t i = 0; i < N_MODELS; i++) {
        if (models[i].pci_id == pci_id)
            return &models[i];
    }
    return NULL;
}

int ns_gpu_profile_index(const ns_gpu_model *model, const char *profile)
{
    if (!model || !profile)
        return -1;
    for (size_t i = 0; i < model->n_profiles; i++) {
        if (strcmp(model->profiles[i].name, profile) == 0)
            return (int)i;
    }
    return -1;
}

const char *ns_gpu_layout_str(const ns_gpu_model *model, const int *counts, char *buf, size_t size)
{
    size_t off = 0;
    int any = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; model && counts && i < model->n_profiles; i++) {
        if (counts[i] <= 0)
            continue;
        any = 1;
        int n;
        if (counts[i] == 1)
            n = snprintf(buf + off, size - off, "%s%s", off ? " + " : "", model->profiles[i].name);
        else
            n = snprintf(buf + off, size - off, "%s%d×%s", off ? " + " : "", counts[i],
                         model->profiles[i].name);
        if (n < 0 || (size_t)n >= size - off)
            break;
        off += (size_t)n;
    }
    if (!any)
        snprintf(buf, size, "no MIG devices");
    return buf;
}

/* "an A100-SXM4-40GB", "a Tesla-T4": the article as the name is spoken. */
static const char *article(const ns_gpu_model *m)
{
    return strncmp(m->name, "Tesla", 5) == 0 ? "a" : "an";
}

kc_code ns_gpu_layout_fits(const ns_gpu_model *model, const int *counts, kc_err *err)
{
    char layout[256];
    if (!model || !counts)
        return kc_err_set(err, KC_EARG, "ns_gpu_layout_fits: model and counts are required");
    ns_gpu_layout_str(model, counts, layout, sizeof(layout));
    int compute = 0, memory = 0, media = 0, any = 0;
    for (size_t i = 0; i < model->n_profiles; i++) {
        const ns_mig_profile *p = &model->profiles[i];
        if (counts[i] < 0)
            return kc_err_set(err, KC_EINVALID, "%s: count %d must not be negative", p->name,
                              counts[i]);
        any |= counts[i] > 0;
        compute += counts[i] * p->compute_slices;
        memory += counts[i] * p->memory_slices;
        if (p->media_extension)
            media += counts[i];
    }
    if (any && !model->mig_capable)
        return kc_err_set(err, KC_EINVALID, "%s %s does not support MIG", article(model),
                          model->name);
    /* Slices first: they name the real obstacle ("3×3g.20gb needs 9 compute slices"). */
    if (compute > model->compute_slices)
        return kc_err_set(err, KC_EINVALID, "%s needs %d compute slices, %s %s has %d", layout,
                          compute, article(model), model->name, model->compute_slices);
    if (memory > model->memory_slices)
        return kc_err_set(err, KC_EINVALID, "%s needs %d memory slices, %s %s has %d", layout,
                          memory, article(model), model->name, model->memory_slices);
    for (size_t i = 0; i < model->n_profiles; i++) {
        const ns_mig_profile *p = &model->profiles[i];
        if (counts[i] > p->max_count)
            return kc_err_set(err, KC_EINVALID, "%d×%s exceeds the maximum of %d per GPU on %s %s",
                              counts[i], p->name, p->max_count, article(model), model->name);
    }
    if (media > 1)
        return kc_err_set(err, KC_EINVALID, "%s has %d +me instances, a GPU holds at most one",
                          layout, media);
    return KC_OK;
}
