/* Tests for op_mig_check: a node's MIG config judged against its GPUs as mig-parted applies it. */
#include <criterion/criterion.h>
#include <string.h>

#include "op_migcheck.h"

static const char *CONFIG = "version: v1\n"
                            "mig-configs:\n"
                            "  all-disabled:\n"
                            "    - devices: all\n"
                            "      mig-enabled: false\n"
                            "  all-1g.5gb:\n"
                            "    - devices: all\n"
                            "      mig-enabled: true\n"
                            "      mig-devices: {\"1g.5gb\": 7}\n"
                            "  all-7g.80gb:\n"
                            "    - devices: all\n"
                            "      mig-enabled: true\n"
                            "      mig-devices: {\"7g.80gb\": 1}\n"
                            "  h200-only:\n"
                            "    - device-filter: [\"0x233510DE\"]\n"
                            "      devices: all\n"
                            "      mig-enabled: true\n"
                            "      mig-devices: {\"1g.35gb\": 4}\n"
                            "  too-big:\n"
                            "    - devices: all\n"
                            "      mig-enabled: true\n"
                            "      mig-devices: {\"3g.20gb\": 2, \"1g.5gb\": 1}\n"
                            "  gpu-9:\n"
                            "    - devices: [9]\n"
                            "      mig-enabled: true\n"
                            "      mig-devices: {\"7g.40gb\": 1}\n";

static kc_migparted *mp;
static const char *SRC = "ConfigMap gpu-operator/default-mig-parted-config";

static void setup(void)
{
    kc_err err;
    cr_assert_eq(kc_migparted_parse(CONFIG, strlen(CONFIG), "config.yaml", &mp, &err), KC_OK, "%s",
                 err.msg);
}

static void teardown(void)
{
    kc_migparted_free(mp);
}

TestSuite(migcheck, .init = setup, .fini = teardown);

static json_t *node(const char *product, const char *count)
{
    return json_pack("{s:{s:{s:s, s:s, s:s}}}", "metadata", "labels", "nvidia.com/gpu.product",
                     product, "nvidia.com/gpu.count", count, "nvidia.com/mig.capable", "true");
}

static bool check(const char *product, const char *count, const char *cfg, char *why, size_t n)
{
    json_t *nd = node(product, count);
    bool ok = op_mig_check(mp, SRC, cfg, nd, why, n);
    json_decref(nd);
    return ok;
}

Test(migcheck, configs_that_apply)
{
    char why[1024];
    cr_assert(check("NVIDIA-A100-SXM4-40GB", "8", "all-1g.5gb", why, sizeof(why)), "%s", why);
    cr_assert_str_empty(why);
    cr_assert(check("NVIDIA-A100-SXM4-40GB", "8", "all-disabled", why, sizeof(why)), "%s", why);
    /* Under the single strategy GFD names the MIG profile in the product. */
    cr_assert(check("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "56", "all-1g.5gb", why, sizeof(why)), "%s",
              why);
    /* A model the table does not know is not judged. */
    cr_assert(check("NVIDIA-Made-Up-GPU", "8", "too-big", why, sizeof(why)));
}

Test(migcheck, an_undefined_config)
{
    char why[1024];
    cr_assert_not(check("NVIDIA-A100-SXM4-40GB", "8", "no-such", why, sizeof(why)));
    cr_assert_str_eq(why, "MIG config \"no-such\" is not defined in ConfigMap "
                          "gpu-operator/default-mig-parted-config: the MIG manager will fail it; "
                          "use one of its mig-configs or add \"no-such\"");
}

Test(migcheck, a_config_without_an_entry_for_the_gpu)
{
    char why[1024];
    cr_assert_not(check("NVIDIA-A100-SXM4-40GB", "8", "h200-only", why, sizeof(why)));
    cr_assert_str_eq(why, "MIG config \"h200-only\" (ConfigMap "
                          "gpu-operator/default-mig-parted-config) has no entry for this node's "
                          "GPUs (A100-SXM4-40GB, device id 0x20B010DE): the MIG manager applies "
                          "nothing to them and reports success; add an entry with device-filter "
                          "0x20B010DE or choose a config that has one");
}

Test(migcheck, a_layout_that_cannot_be_placed_says_the_slice_arithmetic)
{
    char why[1024];
    cr_assert_not(check("NVIDIA-A100-SXM4-40GB", "8", "too-big", why, sizeof(why)));
    cr_assert(strstr(why, "cannot be placed on this node's A100-SXM4-40GB GPUs"), "%s", why);
    cr_assert(strstr(why, "needs 9 of 8 memory slices and 7 of 7 compute slices"), "%s", why);
    cr_assert(strstr(why, "1g.5gb: 1 compute, 1 memory; 3g.20gb: 3 compute, 4 memory"), "%s", why);
    cr_assert(strstr(why, "Insufficient Resources"), "%s", why);
}

Test(migcheck, what_mig_parted_refuses)
{
    char why[1024];
    /* A profile of another model. */
    cr_assert_not(check("NVIDIA-A100-SXM4-40GB", "8", "all-7g.80gb", why, sizeof(why)));
    cr_assert(strstr(why, "cannot be applied to this node's A100-SXM4-40GB GPUs"), "%s", why);
    cr_assert(strstr(why, "MIG profile \"7g.80gb\" not found on this GPU"), "%s", why);
    /* A GPU index the node does not have. */
    cr_assert_not(check("NVIDIA-A100-SXM4-40GB", "8", "gpu-9", why, sizeof(why)));
    cr_assert(strstr(why, "GPU index 9 does not exist (the node has 8 GPUs)"), "%s", why);
    /* Under the single strategy the GPU count is not known: no index is refused. */
    cr_assert(check("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "56", "gpu-9", why, sizeof(why)), "%s",
              why);
}
