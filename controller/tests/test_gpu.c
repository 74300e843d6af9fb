/* Tests for kc_gpu: the model table, lookups and the MIG layout-fit check. */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_gpu.h"

/* Builds a count array for `model` from "profile", count pairs ending with NULL. */
static void layout(const kc_gpu_model *m, int *counts, const char *first, ...)
{
    va_list ap;
    memset(counts, 0, sizeof(int) * KC_GPU_MAX_PROFILES);
    va_start(ap, first);
    for (const char *p = first; p; p = va_arg(ap, const char *)) {
        int idx = kc_gpu_profile_index(m, p);
        cr_assert_geq(idx, 0, "profile %s missing on %s", p, m->name);
        counts[idx] = va_arg(ap, int);
    }
    va_end(ap);
}

Test(gpu, table_facts)
{
    cr_assert_eq(kc_gpu_model_count(), 30);
    const kc_gpu_model *a100 = kc_gpu_find("A100-SXM4-40GB");
    cr_assert_not_null(a100);
    cr_assert_eq(a100->pci_id, 0x20B010DE);
    cr_assert_str_eq(a100->product, "NVIDIA-A100-SXM4-40GB");
    cr_assert_str_eq(a100->family, "ampere");
    cr_assert_eq(a100->memory_mib, 40960);
    cr_assert_eq(a100->cc_major, 8);
    cr_assert_eq(a100->compute_slices, 7);
    cr_assert_eq(a100->memory_slices, 8);
    const kc_mig_profile *p = &a100->profiles[kc_gpu_profile_index(a100, "1g.5gb")];
    cr_assert_eq(p->max_count, 7);
    cr_assert_eq(p->memory_mib, 4864);
    cr_assert_eq(p->multiprocessors, 14);
    const kc_gpu_model *a30 = kc_gpu_find("A30");
    cr_assert_eq(a30->compute_slices, 4);
    cr_assert_eq(a30->memory_slices, 4);
    cr_assert_eq(a30->profiles[kc_gpu_profile_index(a30, "1g.6gb")].max_count, 4);
    const kc_gpu_model *t4 = kc_gpu_find("Tesla-T4");
    cr_assert_eq(t4->mig_capable, 0);
    cr_assert_eq(t4->n_profiles, 0);
    cr_assert_str_eq(t4->family, "turing");
    cr_assert_eq(t4->cc_minor, 5);
    cr_assert_str_eq(kc_gpu_find("L4")->family, "ada-lovelace");
    cr_assert_eq(kc_gpu_find("H200")
                     ->profiles[kc_gpu_profile_index(kc_gpu_find("H200"), "7g.141gb")]
                     .multiprocessors,
                 132);
    /* Every model's table is well formed. */
    for (size_t i = 0; i < kc_gpu_model_count(); i++) {
        const kc_gpu_model *m = kc_gpu_model_at(i);
        cr_assert_leq(m->n_profiles, KC_GPU_MAX_PROFILES);
        cr_assert_eq(m->pci_id & 0xFFFF, 0x10DE, "%s", m->name);
        cr_assert_eq(kc_gpu_find_pci(m->pci_id), m, "%s", m->name);
        cr_assert_eq(m->mig_capable, m->n_profiles > 0);
        /* Placements lie inside the GPU and offer room for the profile's maximum. */
        for (size_t q = 0; q < m->n_profiles; q++) {
            const kc_mig_profile *pr = &m->profiles[q];
            cr_assert_geq(__builtin_popcount(pr->starts), pr->max_count, "%s %s", m->name,
                          pr->name);
            cr_assert_eq(pr->starts >> (m->memory_slices - pr->memory_slices + 1), 0, "%s %s",
                         m->name, pr->name);
            /* Every profile fits alone, as many times as its maximum. */
            int c[KC_GPU_MAX_PROFILES] = {0};
            kc_err err;
            c[q] = pr->max_count;
            cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s %s: %s", m->name, pr->name,
                         err.msg);
        }
    }
    cr_assert_null(kc_gpu_model_at(30));
}

Test(gpu, lookup_spellings)
{
    const kc_gpu_model *a100 = kc_gpu_find("A100-SXM4-40GB");
    cr_assert_eq(kc_gpu_find("NVIDIA-A100-SXM4-40GB"), a100);
    cr_assert_eq(kc_gpu_find("nvidia-a100-sxm4-40gb"), a100);
    cr_assert_eq(kc_gpu_find("A100 SXM4 40GB"), a100);
    const kc_gpu_model *t4 = kc_gpu_find("Tesla-T4");
    cr_assert_not_null(t4);
    cr_assert_eq(kc_gpu_find("T4"), t4);
    cr_assert_eq(kc_gpu_find("tesla t4"), t4);
    cr_assert_eq(kc_gpu_find("V100"), kc_gpu_find("Tesla-V100-SXM2-16GB"));
    cr_assert_eq(kc_gpu_find("NVIDIA-H100-80GB-HBM3")->pci_id, 0x233010DE);
    cr_assert_eq(kc_gpu_find("H100")->pci_id, 0x233010DE);
    cr_assert_eq(kc_gpu_find("H100 NVL")->pci_id, 0x232110DE);
    cr_assert_eq(kc_gpu_find("NVIDIA-L4")->pci_id, 0x27B810DE);
    cr_assert_null(kc_gpu_find("RTX-4090"));
    cr_assert_null(kc_gpu_find(""));
    cr_assert_null(kc_gpu_find(NULL));
    cr_assert_null(kc_gpu_find("NVIDIA-"));
    cr_assert_eq(kc_gpu_find_pci(0x20F110DE), kc_gpu_find("A100-PCIE-40GB"));
    cr_assert_null(kc_gpu_find_pci(0x12345678));
    cr_assert_eq(kc_gpu_profile_index(a100, "1g.6gb"), -1);
    cr_assert_eq(kc_gpu_profile_index(NULL, "1g.5gb"), -1);
}

Test(gpu, layouts_that_fit)
{
    const kc_gpu_model *m = kc_gpu_find("A100-SXM4-40GB");
    int c[KC_GPU_MAX_PROFILES];
    kc_err err;
    layout(m, c, "1g.5gb", 4, "3g.20gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "3g.20gb", 2, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "4g.20gb", 1, "3g.20gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "1g.5gb", 6, "1g.5gb+me", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "1g.5gb", 7, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "3g.20gb", 1, "2g.10gb", 1, "1g.5gb", 2, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "7g.40gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK);
    const kc_gpu_model *a30 = kc_gpu_find("A30");
    layout(a30, c, "1g.6gb", 2, "2g.12gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(a30, c, &err), KC_OK, "%s", err.msg);
    const kc_gpu_model *t4 = kc_gpu_find("T4");
    memset(c, 0, sizeof(c));
    cr_assert_eq(kc_gpu_layout_fits(t4, c, &err), KC_OK);
}

/* mig-parted's message when NVML refuses a GPU instance of `profile`. */
#define REFUSED(profile)                                                                           \
    "error setting MIGConfig: error attempting multiple config orderings: error creating GPU "     \
    "instance for '" profile "': Insufficient Resources"

Test(gpu, layouts_that_do_not_fit)
{
    const kc_gpu_model *m = kc_gpu_find("A100-SXM4-40GB");
    int c[KC_GPU_MAX_PROFILES];
    kc_err err;
    /* Placement, not slice counting: a 3g instance takes 4 of the 8 memory slices, so two of
     * them leave no room for a 1g one although 3 + 3 + 1 compute slices fit. */
    layout(m, c, "3g.20gb", 2, "1g.5gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.5gb"));
    layout(m, c, "3g.20gb", 3, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("3g.20gb"));
    layout(m, c, "1g.5gb", 8, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.5gb"));
    layout(m, c, "1g.10gb", 5, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.10gb"));
    layout(m, c, "4g.20gb", 1, "1g.10gb", 3, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.10gb"));
    layout(m, c, "1g.5gb+me", 2, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.5gb+me"));
    const kc_gpu_model *a30 = kc_gpu_find("A30");
    layout(a30, c, "1g.6gb+me", 1, "2g.12gb+me", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(a30, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("2g.12gb+me"));
    layout(a30, c, "2g.12gb", 1, "4g.24gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(a30, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("4g.24gb"));
    layout(m, c, NULL);
    c[0] = -1;
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_eq(kc_gpu_layout_fits(NULL, c, &err), KC_EARG);
}

/* The H200 as nvidia-smi lists it on a real GPU (driver 580.159.04, device id 0x233510DE, 143771
 * MiB): `nvidia-smi mig -lgip` (memory in GiB, two decimals) and `-lgipp` (placements). */
Test(gpu, h200_rows_as_nvidia_smi_lists_them)
{
    static const struct {
        const char *name;
        int id, max, sms;
        double gib;
        int size;
        unsigned starts;
    } rows[] = {
        {"1g.18gb", 19, 7, 16, 16.00, 1, 0x7F},   {"1g.18gb+me", 20, 1, 16, 16.00, 1, 0x7F},
        {"1g.35gb", 15, 4, 26, 32.50, 2, 0x55},   {"2g.35gb", 14, 3, 32, 32.50, 2, 0x15},
        {"3g.71gb", 9, 2, 60, 69.75, 4, 0x11},    {"4g.71gb", 5, 1, 64, 69.75, 4, 0x01},
        {"7g.141gb", 0, 1, 132, 140.00, 8, 0x01},
    };
    const kc_gpu_model *m = kc_gpu_find_pci(0x233510DE);
    cr_assert_not_null(m);
    cr_assert_str_eq(m->product, "NVIDIA-H200");
    cr_assert_eq(m->memory_mib, 143771);
    cr_assert_eq(m->n_profiles, 7);
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        int i = kc_gpu_profile_index(m, rows[r].name);
        cr_assert_geq(i, 0, "%s", rows[r].name);
        const kc_mig_profile *p = &m->profiles[i];
        cr_assert_eq(p->id, rows[r].id, "%s", p->name);
        cr_assert_eq(p->max_count, rows[r].max, "%s", p->name);
        cr_assert_eq(p->multiprocessors, rows[r].sms, "%s", p->name);
        double gib = p->memory_mib / 1024.0;
        cr_assert(gib > rows[r].gib - 0.005 && gib < rows[r].gib + 0.005, "%s: %d MiB", p->name,
                  p->memory_mib);
        cr_assert_eq(p->memory_slices, rows[r].size, "%s", p->name);
        cr_assert_eq(p->starts, rows[r].starts, "%s placements", p->name);
    }
}

/* The H100 80GB HBM3 rows NVML reports on a real GPU (driver 580): name, profile id, compute
 * slices, maximum, SMs, MiB and placements (first memory slice + size). */
Test(gpu, h100_80gb_rows_as_nvml_reports_them)
{
    static const struct {
        const char *name;
        int id, compute, max, sms, mib, size, n;
        int starts[7];
    } rows[] = {
        {"1g.10gb", 19, 1, 7, 16, 9984, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.10gb+me", 20, 1, 1, 16, 9984, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.20gb", 15, 1, 4, 26, 20096, 2, 4, {0, 2, 4, 6}},
        {"2g.20gb", 14, 2, 3, 32, 20096, 2, 3, {0, 2, 4}},
        {"3g.40gb", 9, 3, 2, 60, 40448, 4, 2, {0, 4}},
        {"4g.40gb", 5, 4, 1, 64, 40448, 4, 1, {0}},
        {"7g.80gb", 0, 7, 1, 132, 81152, 8, 1, {0}},
    };
    const kc_gpu_model *m = kc_gpu_find_pci(0x233010DE);
    cr_assert_not_null(m);
    cr_assert_str_eq(m->product, "NVIDIA-H100-80GB-HBM3");
    cr_assert_eq(m->n_profiles, 7);
    cr_assert_eq(m->compute_slices, 7);
    cr_assert_eq(m->memory_slices, 8);
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        int i = kc_gpu_profile_index(m, rows[r].name);
        cr_assert_geq(i, 0, "%s", rows[r].name);
        const kc_mig_profile *p = &m->profiles[i];
        cr_assert_eq(p->id, rows[r].id, "%s", p->name);
        cr_assert_eq(p->compute_slices, rows[r].compute, "%s", p->name);
        cr_assert_eq(p->max_count, rows[r].max, "%s", p->name);
        cr_assert_eq(p->multiprocessors, rows[r].sms, "%s", p->name);
        cr_assert_eq(p->memory_mib, rows[r].mib, "%s", p->name);
        cr_assert_eq(p->memory_slices, rows[r].size, "%s", p->name);
        unsigned starts = 0;
        for (int k = 0; k < rows[r].n; k++)
            starts |= 1u << rows[r].starts[k];
        cr_assert_eq(p->starts, starts, "%s placements", p->name);
        cr_assert_eq(p->media_extension, strstr(p->name, "+me") != NULL, "%s", p->name);
    }
    /* The layouts the measurement shows fitting, with the placements NVML would give them. */
    int c[KC_GPU_MAX_PROFILES], at[8];
    kc_err err;
    layout(m, c, "3g.40gb", 2, NULL);
    cr_assert_eq(kc_gpu_layout_place(m, c, at, 8, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(at[0], 0);
    cr_assert_eq(at[1], 4);
    layout(m, c, "3g.40gb", 1, "2g.20gb", 1, "1g.10gb", 2, NULL);
    cr_assert_eq(kc_gpu_layout_place(m, c, at, 8, &err), KC_OK, "%s", err.msg);
    /* Profile order 1g.10gb, 2g.20gb, 3g.40gb: the 3g half is 4+4, so the rest share 0..3. */
    cr_assert_eq(at[0], 2);
    cr_assert_eq(at[1], 3);
    cr_assert_eq(at[2], 0);
    cr_assert_eq(at[3], 4);
    layout(m, c, "3g.40gb", 2, "1g.10gb", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, REFUSED("1g.10gb"));
    layout(m, c, "1g.10gb", 6, "1g.10gb+me", 1, NULL);
    cr_assert_eq(kc_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
}

Test(gpu, resource_names_of_profiles)
{
    char buf[32];
    const kc_gpu_model *m = kc_gpu_find("A100-SXM4-40GB");
    cr_assert_str_eq(
        kc_gpu_mig_name(&m->profiles[kc_gpu_profile_index(m, "1g.5gb+me")], buf, sizeof(buf)),
        "1g.5gb.me");
    cr_assert_str_eq(
        kc_gpu_mig_name(&m->profiles[kc_gpu_profile_index(m, "3g.20gb")], buf, sizeof(buf)),
        "3g.20gb");
    const kc_gpu_model *rtx = kc_gpu_find("RTX-PRO-6000");
    cr_assert_not_null(rtx);
    cr_assert_str_eq(kc_gpu_mig_name(&rtx->profiles[kc_gpu_profile_index(rtx, "2g.48gb+me.all")],
                                     buf, sizeof(buf)),
                     "2g.48gb.me.all");
    cr_assert_str_eq(
        kc_gpu_mig_name(&rtx->profiles[kc_gpu_profile_index(rtx, "1g.24gb-me")], buf, sizeof(buf)),
        "1g.24gb-me");
}

Test(gpu, layout_str)
{
    const kc_gpu_model *m = kc_gpu_find("A100-SXM4-40GB");
    int c[KC_GPU_MAX_PROFILES];
    char buf[64], tiny[8];
    layout(m, c, "1g.5gb", 2, "3g.20gb", 1, NULL);
    cr_assert_str_eq(kc_gpu_layout_str(m, c, buf, sizeof(buf)), "2×1g.5gb + 3g.20gb");
    layout(m, c, NULL);
    cr_assert_str_eq(kc_gpu_layout_str(m, c, buf, sizeof(buf)), "no MIG devices");
    layout(m, c, "1g.5gb", 2, "3g.20gb", 1, NULL);
    kc_gpu_layout_str(m, c, tiny, sizeof(tiny));
    cr_assert_lt(strlen(tiny), sizeof(tiny));
    cr_assert_null(strstr(tiny, "no MIG"), "a truncated layout must not read as empty");
}
