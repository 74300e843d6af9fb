/* kc_gpu: lookups in the table of GPU models (kc_gpu_models.c) and the MIG layout-fit
 * check, which places instances as NVML does. */
#include "kc_gpu.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Short names people type, mapped to our spelling. */
static const struct {
    const char *alias, *name;
} aliases[] = {
    {"V100", "Tesla-V100-SXM2-16GB"},
    {"V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"},
    {"H100", "H100-80GB-HBM3"},
    {"H100-SXM5", "H100-80GB-HBM3"},
    {"H100-SXM5-80GB", "H100-80GB-HBM3"},
    {"H200-141GB", "H200"},
    {"A100", "A100-SXM4-40GB"},
    {"A100-80GB", "A100-SXM4-80GB"},
    {"A100-40GB", "A100-SXM4-40GB"},
    {"H800", "H800-80GB-HBM3"},
    {"GH200", "GH200-96GB"},
    {"RTX-PRO-6000-Blackwell", "RTX-PRO-6000"},
};

size_t kc_gpu_model_count(void)
{
    return kc_gpu_n_models;
}

const kc_gpu_model *kc_gpu_model_at(size_t i)
{
    return i < kc_gpu_n_models ? &kc_gpu_models[i] : NULL;
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

const kc_gpu_model *kc_gpu_find(const char *name)
{
    if (!name)
        return NULL;
    const char *bare = strip_prefix(name);
    for (size_t i = 0; i < kc_gpu_n_models; i++) {
        if (name_eq(name, kc_gpu_models[i].name) || name_eq(name, kc_gpu_models[i].product) ||
            name_eq(bare, strip_prefix(kc_gpu_models[i].name)))
            return &kc_gpu_models[i];
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (name_eq(bare, aliases[i].alias))
            return kc_gpu_find(aliases[i].name);
    }
    return NULL;
}

const kc_gpu_model *kc_gpu_find_pci(uint32_t pci_id)
{
    for (size_t i = 0; i < kc_gpu_n_models; i++) {
        if (kc_gpu_models[i].pci_id == pci_id)
            return &kc_gpu_models[i];
    }
    return NULL;
}

int kc_gpu_profile_index(const kc_gpu_model *model, const char *profile)
{
    if (!model || !profile)
        return -1;
    for (size_t i = 0; i < model->n_profiles; i++) {
        if (strcmp(model->profiles[i].name, profile) == 0)
            return (int)i;
    }
    return -1;
}

const char *kc_gpu_layout_str(const kc_gpu_model *model, const int *counts, char *buf, size_t size)
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
static const char *article(const kc_gpu_model *m)
{
    return strncmp(m->name, "Tesla", 5) == 0 ? "a" : "an";
}

const char *kc_gpu_mig_name(const kc_mig_profile *p, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    snprintf(buf, size, "%s", p && p->name ? p->name : "");
    for (char *c = buf; *c; c++)
        if (*c == '+')
            *c = '.';
    return buf;
}

/* One instance to place: its profile. */
typedef struct {
    const kc_mig_profile *p;
    int profile;
} instance;

/* Gives instances[i..n) non-overlapping placements on the memory slices not in `used`; start[]
 * receives each one's first slice. Depth-first over each profile's placements, as few as 7
 * instances on 8 slices keep this small. */
static int place(const instance *in, size_t i, size_t n, unsigned used, int *start)
{
    if (i == n)
        return 1;
    const kc_mig_profile *p = in[i].p;
    unsigned span = (1u << p->memory_slices) - 1;
    for (int k = 0; k < 32; k++) {
        unsigned mask = span << k;
        if (!(p->starts >> k & 1u) || (used & mask))
            continue;
        /* Instances of one profile take increasing placements: the same sets in another order
         * are not worth trying again. */
        if (i > 0 && in[i - 1].p == p && start[i - 1] >= k)
            continue;
        start[i] = k;
        if (place(in, i + 1, n, used | mask, start))
            return 1;
    }
    return 0;
}

static kc_code insufficient(kc_err *err, const kc_mig_profile *p)
{
    return kc_err_set(err, KC_EINVALID,
                      "error setting MIGConfig: error attempting multiple config orderings: error "
                      "creating GPU instance for '%s': Insufficient Resources",
                      p->name);
}

kc_code kc_gpu_layout_place(const kc_gpu_model *model, const int *counts, int *placed,
                            size_t n_placed, kc_err *err)
{
    if (!model || !counts)
        return kc_err_set(err, KC_EARG, "kc_gpu_layout_fits: model and counts are required");
    instance in[64] = {0};
    size_t n = 0;
    int compute = 0, media = 0;
    for (size_t i = 0; i < model->n_profiles; i++) {
        const kc_mig_profile *p = &model->profiles[i];
        if (counts[i] < 0)
            return kc_err_set(err, KC_EINVALID, "%s: count %d must not be negative", p->name,
                              counts[i]);
        /* NVML refuses the instance past the profile's limit, the second media-extension one
         * and the one the compute slices no longer hold. */
        if (counts[i] > p->max_count)
            return insufficient(err, p);
        media += p->media_extension ? counts[i] : 0;
        if (p->media_extension && media > 1)
            return insufficient(err, p);
        compute += counts[i] * p->compute_slices;
        if (compute > model->compute_slices)
            return insufficient(err, p);
        for (int c = 0; c < counts[i] && n < sizeof(in) / sizeof(in[0]); c++)
            in[n++] = (instance){p, (int)i};
    }
    if (n && !model->mig_capable)
        return kc_err_set(err, KC_EINVALID, "%s %s does not support MIG", article(model),
                          model->name);
    /* Larger instances first: they have the fewest placements. */
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && in[j - 1].p->memory_slices < in[j].p->memory_slices; j--) {
            instance t = in[j];
            in[j] = in[j - 1];
            in[j - 1] = t;
        }
    }
    int start[64] = {0};
    if (!place(in, 0, n, 0, start)) {
        /* The instance NVML refuses: the first one that no longer finds a free placement when
         * they are created in that order. */
        unsigned used = 0;
        for (size_t i = 0; i < n; i++) {
            int ok = 0;
            for (int k = 0; k < 32 && !ok; k++) {
                unsigned mask = ((1u << in[i].p->memory_slices) - 1) << k;
                if ((in[i].p->starts >> k & 1u) && !(used & mask)) {
                    used |= mask;
                    ok = 1;
                }
            }
            if (!ok)
                return insufficient(err, in[i].p);
        }
        return insufficient(err, in[n - 1].p);
    }
    /* Report the starts in profile order. */
    size_t out = 0;
    for (size_t i = 0; placed && i < model->n_profiles; i++) {
        for (size_t j = 0; j < n; j++)
            if (in[j].profile == (int)i && out < n_placed)
                placed[out++] = start[j];
    }
    return KC_OK;
}

kc_code kc_gpu_layout_fits(const kc_gpu_model *model, const int *counts, kc_err *err)
{
    return kc_gpu_layout_place(model, counts, NULL, 0, err);
}
