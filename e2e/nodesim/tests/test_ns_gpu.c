/* Tests for ns_gpu: the model table, lookups and the MIG layout-fit check. */
#include <criterion/criterion.h>
#include <string.h>

#include "ns_gpu.h"

/* Builds a count array for `model` from "profile", count pairs ending with NULL. */
static void layout(const ns_gpu_model *m, int *counts, const char *first, ...)
{
    va_list ap;
    memset(counts, 0, sizeof(int) * NS_GPU_MAX_PROFILES);
    va_start(ap, first);
    for (const char *p = first; p; p = va_arg(ap, const char *)) {
        int idx = ns_gpu_profile_index(m, p);
        cr_assert_geq(idx, 0, "profile %s missing on %s", p, m->name);
        counts[idx] = va_arg(ap, int);
    }
    va_end(ap);
}

Test(ns_gpu, table_facts)
{
    cr_assert_eq(ns_gpu_model_count(), 10);
    const ns_gpu_model *a100 = ns_gpu_find("A100-SXM4-40GB");
    cr_assert_not_null(a100);
    cr_assert_eq(a100->pci_id, 0x20B010DE);
    cr_assert_str_eq(a100->product, "NVIDIA-A100-SXM4-40GB");
    cr_assert_str_eq(a100->family, "ampere");
    cr_assert_eq(a100->memory_mib, 40960);
    cr_assert_eq(a100->cc_major, 8);
    cr_assert_eq(a100->compute_slices, 7);
    cr_assert_eq(a100->memory_slices, 8);
    const ns_mig_profile *p = &a100->profiles[ns_gpu_profile_index(a100, "1g.5gb")];
    cr_assert_eq(p->max_count, 7);
    cr_assert_eq(p->memory_mib, 4864);
    cr_assert_eq(p->multiprocessors, 14);
    const ns_gpu_model *a30 = ns_gpu_find("A30");
    cr_assert_eq(a30->compute_slices, 4);
    cr_assert_eq(a30->memory_slices, 4);
    cr_assert_eq(a30->profiles[ns_gpu_profile_index(a30, "1g.6gb")].max_count, 4);
    const ns_gpu_model *t4 = ns_gpu_find("Tesla-T4");
    cr_assert_eq(t4->mig_capable, 0);
    cr_assert_eq(t4->n_profiles, 0);
    cr_assert_str_eq(t4->family, "turing");
    cr_assert_eq(t4->cc_minor, 5);
    cr_assert_str_eq(ns_gpu_find("L4")->family, "ada-lovelace");
    cr_assert_eq(ns_gpu_find("H200")
                     ->profiles[ns_gpu_profile_index(ns_gpu_find("H200"), "7g.141gb")]
                     .multiprocessors,
                 132);
    /* Every model's table is well formed. */
    for (size_t i = 0; i < ns_gpu_model_count(); i++) {
        const ns_gpu_model *m = ns_gpu_model_at(i);
        cr_assert_leq(m->n_profiles, NS_GPU_MAX_PROFILES);
        cr_assert_eq(m->pci_id & 0xFFFF, 0x10DE, "%s", m->name);
        cr_assert_eq(ns_gpu_find_pci(m->pci_id), m, "%s", m->name);
        cr_assert_eq(m->mig_capable, m->n_profiles > 0);
    }
    cr_assert_null(ns_gpu_model_at(10));
}

Test(ns_gpu, lookup_spellings)
{
    const ns_gpu_model *a100 = ns_gpu_find("A100-SXM4-40GB");
    cr_assert_eq(ns_gpu_find("NVIDIA-A100-SXM4-40GB"), a100);
    cr_assert_eq(ns_gpu_find("nvidia-a100-sxm4-40gb"), a100);
    cr_assert_eq(ns_gpu_find("A100 SXM4 40GB"), a100);
    const ns_gpu_model *t4 = ns_gpu_find("Tesla-T4");
    cr_assert_not_null(t4);
    cr_assert_eq(ns_gpu_find("T4"), t4);
    cr_assert_eq(ns_gpu_find("tesla t4"), t4);
    cr_assert_eq(ns_gpu_find("V100"), ns_gpu_find("Tesla-V100-SXM2-16GB"));
    cr_assert_eq(ns_gpu_find("NVIDIA-H100-80GB-HBM3")->pci_id, 0x233010DE);
    cr_assert_eq(ns_gpu_find("H100")->pci_id, 0x233010DE);
    cr_assert_eq(ns_gpu_find("H100 NVL")->pci_id, 0x232110DE);
    cr_assert_eq(ns_gpu_find("NVIDIA-L4")->pci_id, 0x27B810DE);
    cr_assert_null(ns_gpu_find("RTX-4090"));
    cr_assert_null(ns_gpu_find(""));
    cr_assert_null(ns_gpu_find(NULL));
    cr_assert_null(ns_gpu_find("NVIDIA-"));
    cr_assert_eq(ns_gpu_find_pci(0x20F110DE), ns_gpu_find("A100-PCIE-40GB"));
    cr_assert_null(ns_gpu_find_pci(0x12345678));
    cr_assert_eq(ns_gpu_profile_index(a100, "1g.6gb"), -1);
    cr_assert_eq(ns_gpu_profile_index(NULL, "1g.5gb"), -1);
}

Test(ns_gpu, layouts_that_fit)
{
    const ns_gpu_model *m = ns_gpu_find("A100-SXM4-40GB");
    int c[NS_GPU_MAX_PROFILES];
    kc_err err;
    layout(m, c, "1g.5gb", 4, "3g.20gb", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "3g.20gb", 2, "1g.5gb", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "1g.5gb", 7, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "3g.20gb", 1, "2g.10gb", 1, "1g.5gb", 2, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, "7g.40gb", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK, "%s", err.msg);
    layout(m, c, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_OK);
    const ns_gpu_model *a30 = ns_gpu_find("A30");
    layout(a30, c, "1g.6gb", 2, "2g.12gb", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(a30, c, &err), KC_OK, "%s", err.msg);
    const ns_gpu_model *t4 = ns_gpu_find("T4");
    memset(c, 0, sizeof(c));
    cr_assert_eq(ns_gpu_layout_fits(t4, c, &err), KC_OK);
}

Test(ns_gpu, layouts_that_do_not_fit)
{
    const ns_gpu_model *m = ns_gpu_find("A100-SXM4-40GB");
    int c[NS_GPU_MAX_PROFILES];
    kc_err err;
    layout(m, c, "3g.20gb", 3, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "3×3g.20gb needs 9 compute slices, an A100-SXM4-40GB has 7");
    layout(m, c, "1g.5gb", 8, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "8×1g.5gb needs 8 compute slices, an A100-SXM4-40GB has 7");
    layout(m, c, "1g.10gb", 5, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "5×1g.10gb needs 10 memory slices, an A100-SXM4-40GB has 8");
    layout(m, c, "4g.20gb", 1, "1g.10gb", 3, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg,
                     "3×1g.10gb + 4g.20gb needs 10 memory slices, an A100-SXM4-40GB has 8");
    layout(m, c, "1g.5gb+me", 2, NULL);
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "2×1g.5gb+me exceeds the maximum of 1 per GPU on an A100-SXM4-40GB");
    const ns_gpu_model *a30 = ns_gpu_find("A30");
    layout(a30, c, "1g.6gb+me", 1, "2g.12gb+me", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(a30, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg,
                     "1g.6gb+me + 2g.12gb+me has 2 +me instances, a GPU holds at most one");
    layout(a30, c, "2g.12gb", 1, "4g.24gb", 1, NULL);
    cr_assert_eq(ns_gpu_layout_fits(a30, c, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "2g.12gb + 4g.24gb needs 6 compute slices, an A30 has 4");
    layout(m, c, NULL);
    c[0] = -1;
    cr_assert_eq(ns_gpu_layout_fits(m, c, &err), KC_EINVALID);
    cr_assert_eq(ns_gpu_layout_fits(NULL, c, &err), KC_EARG);
}

Test(ns_gpu, layout_str)
{
    const ns_gpu_model *m = ns_gpu_find("A100-SXM4-40GB");
    int c[NS_GPU_MAX_PROFILES];
    char buf[64], tiny[8];
    layout(m, c, "1g.5gb", 2, "3g.20gb", 1, NULL);
    cr_assert_str_eq(ns_gpu_layout_str(m, c, buf, sizeof(buf)), "2×1g.5gb + 3g.20gb");
    layout(m, c, NULL);
    cr_assert_str_eq(ns_gpu_layout_str(m, c, buf, sizeof(buf)), "no MIG devices");
    layout(m, c, "1g.5gb", 2, "3g.20gb", 1, NULL);
    ns_gpu_layout_str(m, c, tiny, sizeof(tiny));
    cr_assert_lt(strlen(tiny), sizeof(tiny));
    cr_assert_null(strstr(tiny, "no MIG"), "a truncated layout must not read as empty");
}
