/* Tests for kc_migparted: parsing, validation and resolution of mig-parted configs. */
#include <criterion/criterion.h>
#include <string.h>

#include "ns_migparted.h"

static kc_migparted *parse_ok(const char *yaml)
{
    kc_migparted *mp = NULL;
    kc_err err;
    kc_code rc = kc_migparted_parse(yaml, strlen(yaml), NULL, &mp, &err);
    cr_assert_eq(rc, KC_OK, "%s", err.msg);
    cr_assert_not_null(mp);
    return mp;
}

/* Node of n GPUs of one model, all MIG-disabled. */
static void node(const char *model, size_t n, const kc_gpu_model **models, kc_mp_gpu_state *states)
{
    for (size_t i = 0; i < n; i++) {
        models[i] = kc_gpu_find(model);
        cr_assert_not_null(models[i]);
        memset(&states[i], 0, sizeof(states[i]));
    }
}

static int total(const kc_gpu_model *const *models, const kc_mp_gpu_state *states, size_t n,
                 const char *profile)
{
    int sum = 0;
    for (size_t i = 0; i < n; i++) {
        int idx = kc_gpu_profile_index(models[i], profile);
        if (idx >= 0)
            sum += states[i].counts[idx];
    }
    return sum;
}

/* The device ids NVIDIA's default config (gpu-operator v26.7.0) gives an all-balanced entry. */
static const uint32_t balanced_ids[] = {
    0x294110DE, 0x2BB510DE, 0x290110DE, 0x234810DE, 0x233510DE, 0x233B10DE, 0x232110DE,
    0x233A10DE, 0x233010DE, 0x233110DE, 0x232210DE, 0x20B210DE, 0x20B510DE, 0x20F310DE,
    0x20F510DE, 0x232410DE, 0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE, 0x20B710DE,
    0x234210DE, 0x233D10DE, 0x20B610DE, 0x232910DE, 0x318210DE, 0x31C210DE};

Test(kc_migparted, default_config_is_nvidias_in_full)
{
    kc_migparted *mp = parse_ok(ns_migparted_default_yaml());
    cr_assert_eq(mp->n_configs, 81);
    const kc_mp_config *bal = kc_migparted_find(mp, "all-balanced");
    cr_assert_not_null(bal);
    cr_assert_eq(bal->n_entries, 12);
    size_t n_ids = 0;
    for (size_t e = 0; e < bal->n_entries; e++)
        n_ids += bal->entries[e].n_filter;
    cr_assert_eq(n_ids, sizeof(balanced_ids) / sizeof(balanced_ids[0]));
    /* Every device id has a model, and all-balanced, all-disabled and all-enabled apply to it. */
    for (size_t i = 0; i < sizeof(balanced_ids) / sizeof(balanced_ids[0]); i++) {
        const kc_gpu_model *m = kc_gpu_find_pci(balanced_ids[i]);
        cr_assert_not_null(m, "no model for 0x%08X", balanced_ids[i]);
        static const char *const names[] = {"all-balanced", "all-disabled", "all-enabled"};
        for (size_t n = 0; n < 3; n++) {
            const kc_gpu_model *models[4];
            kc_mp_gpu_state states[4];
            kc_err err;
            node(m->name, 4, models, states);
            cr_assert_eq(kc_migparted_apply(mp, names[n], models, 4, states, &err), KC_OK,
                         "%s on %s: %s", names[n], m->name, err.msg);
            cr_assert_eq(states[3].mig_enabled, n != 1, "%s on %s", names[n], m->name);
        }
    }
    /* Every all-<profile> config applies on some model of the table, but for the three profiles
     * of a 189 GB part that no entry of the config names by device id. */
    for (size_t c = 0; c < mp->n_configs; c++) {
        const char *cn = mp->configs[c].name;
        if (!strcmp(cn, "all-3g.95gb") || !strcmp(cn, "all-4g.95gb") || !strcmp(cn, "all-7g.189gb"))
            continue;
        int applied = 0;
        for (size_t i = 0; i < kc_gpu_model_count() && !applied; i++) {
            const kc_gpu_model *models[2];
            kc_mp_gpu_state states[2];
            kc_err err;
            node(kc_gpu_model_at(i)->name, 2, models, states);
            applied =
                kc_migparted_apply(mp, mp->configs[c].name, models, 2, states, &err) == KC_OK &&
                (states[0].mig_enabled || !strcmp(mp->configs[c].name, "all-disabled"));
        }
        cr_assert(applied, "no model takes %s", mp->configs[c].name);
    }
    kc_migparted_free(mp);
}

Test(kc_migparted, balanced_and_single_profile_totals)
{
    kc_migparted *mp = parse_ok(ns_migparted_default_yaml());
    const kc_gpu_model *models[8];
    kc_mp_gpu_state states[8];
    kc_err err;
    node("A100-SXM4-40GB", 8, models, states);
    cr_assert_eq(kc_migparted_apply(mp, "all-balanced", models, 8, states, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(total(models, states, 8, "1g.5gb"), 16);
    cr_assert_eq(total(models, states, 8, "2g.10gb"), 8);
    cr_assert_eq(total(models, states, 8, "3g.20gb"), 8);
    cr_assert_eq(total(models, states, 8, "7g.40gb"), 0);
    for (size_t i = 0; i < 8; i++)
        cr_assert(states[i].mig_enabled);
    cr_assert_eq(kc_migparted_apply(mp, "all-1g.5gb", models, 8, states, &err), KC_OK);
    cr_assert_eq(total(models, states, 8, "1g.5gb"), 56);
    cr_assert_eq(total(models, states, 8, "3g.20gb"), 0, "a later config replaces the layout");
    cr_assert_eq(kc_migparted_apply(mp, "all-disabled", models, 8, states, &err), KC_OK);
    for (size_t i = 0; i < 8; i++)
        cr_assert_not(states[i].mig_enabled);
    cr_assert_eq(total(models, states, 8, "1g.5gb"), 0);
    cr_assert_eq(kc_migparted_apply(mp, "all-enabled", models, 8, states, &err), KC_OK);
    cr_assert(states[7].mig_enabled);
    /* The same names resolve per model: 1g.10gb is 4 per A100-40GB but 7 per H100. */
    cr_assert_eq(kc_migparted_apply(mp, "all-1g.10gb", models, 8, states, &err), KC_OK);
    cr_assert_eq(total(models, states, 8, "1g.10gb"), 32);
    node("H100-80GB-HBM3", 8, models, states);
    cr_assert_eq(kc_migparted_apply(mp, "all-1g.10gb", models, 8, states, &err), KC_OK);
    cr_assert_eq(total(models, states, 8, "1g.10gb"), 56);
    node("A30", 4, models, states);
    cr_assert_eq(kc_migparted_apply(mp, "all-balanced", models, 4, states, &err), KC_OK);
    cr_assert_eq(total(models, states, 4, "1g.6gb"), 8);
    cr_assert_eq(total(models, states, 4, "2g.12gb"), 4);
    kc_migparted_free(mp);
}

Test(kc_migparted, unmatched_gpus_are_left_alone)
{
    kc_migparted *mp = parse_ok(ns_migparted_default_yaml());
    const kc_gpu_model *models[2] = {kc_gpu_find("A100-SXM4-40GB"), kc_gpu_find("Tesla-T4")};
    kc_mp_gpu_state states[2] = {{0}, {0}};
    kc_err err;
    cr_assert_eq(kc_migparted_apply(mp, "all-1g.35gb", models, 2, states, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_not(states[0].mig_enabled, "the H200 and GB300 filters do not match an A100");
    cr_assert_eq(kc_migparted_apply(mp, "all-balanced", models, 2, states, &err), KC_OK);
    cr_assert(states[0].mig_enabled);
    cr_assert_not(states[1].mig_enabled);
    /* `devices: all` passes over a GPU without MIG, as mig-parted does. */
    cr_assert_eq(kc_migparted_apply(mp, "all-enabled", models, 2, states, &err), KC_OK);
    cr_assert_not(states[1].mig_enabled);
    kc_migparted_free(mp);
}

/* A config with no entry for the GPU's device id applies nothing and succeeds: mig-parted walks
 * no GPU, and mig-manager then sets nvidia.com/mig.config.state=success. */
Test(kc_migparted, unknown_device_id_applies_nothing)
{
    kc_migparted *mp = parse_ok("version: v1\nmig-configs:\n  other:\n"
                                "    - device-filter: [\"0x12345678\"]\n      devices: all\n"
                                "      mig-enabled: true\n      mig-devices: {\"1g.5gb\": 7}\n");
    const kc_gpu_model *models[2];
    kc_mp_gpu_state states[2];
    kc_err err;
    node("H100-80GB-HBM3", 2, models, states);
    int i = kc_gpu_profile_index(models[0], "3g.40gb");
    states[1].mig_enabled = 1;
    states[1].counts[i] = 2;
    cr_assert_eq(kc_migparted_apply(mp, "other", models, 2, states, &err), KC_OK, "%s", err.msg);
    cr_assert_not(states[0].mig_enabled);
    cr_assert(states[1].mig_enabled);
    cr_assert_eq(states[1].counts[i], 2);
    kc_migparted_free(mp);
}

Test(kc_migparted, unknown_name)
{
    kc_migparted *mp = parse_ok(ns_migparted_default_yaml());
    const kc_gpu_model *models[1] = {kc_gpu_find("A100-SXM4-40GB")};
    kc_mp_gpu_state states[1] = {{0}};
    kc_err err;
    cr_assert_eq(kc_migparted_apply(mp, "all-9g.1tb", models, 1, states, &err), KC_ENOTFOUND);
    cr_assert(strstr(err.msg, "\"all-9g.1tb\" is not defined"), "%s", err.msg);
    cr_assert_null(kc_migparted_find(mp, "nope"));
    kc_migparted_free(mp);
}

Test(kc_migparted, entries_in_order_by_index)
{
    kc_migparted *mp = parse_ok("version: v1\n"
                                "mig-configs:\n"
                                "  custom:\n"
                                "    - devices: all\n"
                                "      mig-enabled: true\n"
                                "      mig-devices: {\"7g.40gb\": 1}\n"
                                "    - devices: [1, 3]\n"
                                "      device-filter: 0x20B010DE\n"
                                "      mig-enabled: true\n"
                                "      mig-devices:\n"
                                "        3g.20gb: 1\n"
                                "        2g.10gb: 1\n"
                                "        1g.5gb: 2\n"
                                "    - devices: [2]\n"
                                "      mig-enabled: false\n"
                                "      mig-devices: {}\n");
    const kc_gpu_model *models[4];
    kc_mp_gpu_state states[4];
    kc_err err;
    node("A100-SXM4-40GB", 4, models, states);
    cr_assert_eq(kc_migparted_apply(mp, "custom", models, 4, states, &err), KC_OK, "%s", err.msg);
    int i7 = kc_gpu_profile_index(models[0], "7g.40gb");
    int i1 = kc_gpu_profile_index(models[0], "1g.5gb");
    cr_assert_eq(states[0].counts[i7], 1);
    cr_assert_eq(states[1].counts[i7], 0);
    cr_assert_eq(states[1].counts[i1], 2);
    cr_assert_not(states[2].mig_enabled);
    cr_assert_eq(states[3].counts[i1], 2);
    /* Index 3 on a two-GPU node does not exist. */
    cr_assert_eq(kc_migparted_apply(mp, "custom", models, 2, states, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "mig-configs.custom[1].devices: GPU index 3 does not exist (the "
                              "node has 2 GPUs)");
    kc_migparted_free(mp);
}

static void apply_fails(const char *yaml, const char *model, const char *msg)
{
    kc_migparted *mp = parse_ok(yaml);
    const kc_gpu_model *models[2];
    kc_mp_gpu_state states[2];
    kc_err err;
    node(model, 2, models, states);
    states[1].mig_enabled = 1; /* must survive the failed apply */
    cr_assert_eq(kc_migparted_apply(mp, "c", models, 2, states, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, msg);
    cr_assert_not(states[0].mig_enabled);
    cr_assert(states[1].mig_enabled);
    kc_migparted_free(mp);
}

Test(kc_migparted, user_layouts)
{
    apply_fails("version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: true\n"
                "      mig-devices: {3g.20gb: 2, 1g.5gb: 1}\n",
                "A100-SXM4-40GB",
                "mig-configs.c: GPU 0: error setting MIGConfig: error attempting multiple config "
                "orderings: error creating GPU instance for '1g.5gb': Insufficient Resources");
    apply_fails("version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: true\n"
                "      mig-devices: {1g.12gb: 1}\n",
                "A100-SXM4-40GB",
                "mig-configs.c: GPU 0: error setting MIGConfig: error attempting multiple config "
                "orderings: MIG profile \"1g.12gb\" not found on this GPU");
    apply_fails("version: v1\nmig-configs:\n  c:\n    - devices: [0]\n      mig-enabled: true\n"
                "      mig-devices: {}\n",
                "Tesla-T4",
                "mig-configs.c[0]: GPU 0 (a Tesla-T4): cannot set MIG config on non MIG-capable "
                "GPU");
    kc_migparted *mp = parse_ok("version: v1\nmig-configs:\n  c:\n    - devices: all\n"
                                "      mig-enabled: true\n      mig-devices:\n"
                                "        3g.20gb: 1\n        2g.10gb: 1\n        1g.5gb: 2\n");
    const kc_gpu_model *models[1] = {kc_gpu_find("A100-SXM4-40GB")};
    kc_mp_gpu_state states[1] = {{0}};
    kc_err err;
    cr_assert_eq(kc_migparted_apply(mp, "c", models, 1, states, &err), KC_OK, "%s", err.msg);
    kc_migparted_free(mp);
}

static void rejects(const char *yaml, kc_code code, const char *msg)
{
    kc_migparted *mp = (kc_migparted *)1;
    kc_err err;
    cr_assert_eq(kc_migparted_parse(yaml, strlen(yaml), NULL, &mp, &err), code, "%s", err.msg);
    cr_assert_null(mp);
    if (msg)
        cr_assert_str_eq(err.msg, msg);
}

#define ENTRY "version: v1\nmig-configs:\n  all-balanced:\n    - devices: all\n"

Test(kc_migparted, malformed)
{
    rejects("version: v2\nmig-configs: {}\n", KC_EINVALID,
            "version: \"v2\" is not supported (the only supported value is v1)");
    rejects("mig-configs: {}\n", KC_EINVALID, "version: required (the only supported value is v1)");
    rejects("version: 1\nmig-configs: {}\n", KC_EINVALID, "version: must be the string v1");
    rejects("version: v1\n", KC_EINVALID,
            "mig-configs: required (a map of config name to a list of entries)");
    rejects("version: v1\nmig-configs: []\n", KC_EINVALID,
            "mig-configs: must be a map of config name to a list of entries");
    rejects("version: v1\nmig-configs: {}\nextra: 1\n", KC_EINVALID,
            "extra: unknown top-level key (expected version and mig-configs)");
    rejects("- a\n", KC_EINVALID, "the config must be a mapping with version and mig-configs");
    rejects("version: v1\nmig-configs:\n  x: {}\n", KC_EINVALID,
            "mig-configs.x: must be a list of entries");
    rejects("version: v1\nmig-configs:\n  x: [1]\n", KC_EINVALID,
            "mig-configs.x[0]: must be a mapping with devices, mig-enabled and mig-devices");
    rejects(ENTRY "      mig-enabled: false\n      gpus: 2\n", KC_EINVALID,
            "mig-configs.all-balanced[0].gpus: unknown key (expected devices, mig-enabled, "
            "mig-devices, device-filter)");
    rejects(ENTRY "      mig-enabled: true\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-devices: required when mig-enabled is true (use {} "
            "for no MIG devices)");
    rejects(ENTRY "      mig-enabled: false\n      mig-devices: {1g.5gb: 1}\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-devices: must be empty when mig-enabled is false");
    rejects(ENTRY "      mig-enabled: true\n      mig-devices: {\"1g.5gb\": -1}\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-devices.\"1g.5gb\": count must be a positive "
            "integer");
    rejects(ENTRY "      mig-enabled: true\n      mig-devices: {\"1g.5gb\": 0}\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-devices.\"1g.5gb\": count must be a positive "
            "integer");
    rejects(ENTRY "      mig-enabled: true\n      mig-devices: [1]\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-devices: must be a map of MIG profile to count");
    rejects(ENTRY "      mig-enabled: maybe\n", KC_EINVALID,
            "mig-configs.all-balanced[0].mig-enabled: must be true or false");
    rejects(ENTRY, KC_EINVALID,
            "mig-configs.all-balanced[0].mig-enabled: required (true or false)");
    rejects("version: v1\nmig-configs:\n  c:\n    - mig-enabled: false\n", KC_EINVALID,
            "mig-configs.c[0].devices: required (\"all\" or a list of GPU indices)");
    rejects("version: v1\nmig-configs:\n  c:\n    - devices: [0, -1]\n      mig-enabled: false\n",
            KC_EINVALID, "mig-configs.c[0].devices[1]: must be a non-negative GPU index");
    rejects("version: v1\nmig-configs:\n  c:\n    - devices: some\n      mig-enabled: false\n",
            KC_EINVALID, "mig-configs.c[0].devices: must be \"all\" or a list of GPU indices");
    rejects(ENTRY "      mig-enabled: false\n      device-filter: [\"0x20B010DE\", \"0x20B0\"]\n",
            KC_EINVALID,
            "mig-configs.all-balanced[0].device-filter[1]: \"0x20B0\" is not a PCI id of the form "
            "0x<device><vendor> (8 hex digits, e.g. 0x20B010DE)");
    rejects(ENTRY "      mig-enabled: false\n      device-filter: \"0xZZB010DE\"\n", KC_EINVALID,
            "mig-configs.all-balanced[0].device-filter: \"0xZZB010DE\" is not a PCI id of the "
            "form 0x<device><vendor> (8 hex digits, e.g. 0x20B010DE)");
    rejects(ENTRY "      mig-enabled: false\n      device-filter: {a: 1}\n", KC_EINVALID,
            "mig-configs.all-balanced[0].device-filter: must be a PCI id or a list of PCI ids");
    rejects("version: v1\nmig-configs: [\n", KC_EPARSE, NULL);
}

Test(kc_migparted, filter_spellings_and_name_prefix)
{
    kc_migparted *mp = parse_ok(ENTRY "      mig-enabled: false\n"
                                      "      device-filter: [\"0x20b010de\", 0X20F110DE]\n");
    cr_assert_eq(mp->configs[0].entries[0].n_filter, 2);
    cr_assert_eq(mp->configs[0].entries[0].filter[0], 0x20B010DE);
    cr_assert_eq(mp->configs[0].entries[0].filter[1], 0x20F110DE);
    kc_migparted_free(mp);
    const char *bad = "version: v3\nmig-configs: {}\n";
    kc_err err;
    cr_assert_eq(kc_migparted_parse(bad, strlen(bad), "config.yaml", &mp, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "config.yaml: version: \"v3\" is not supported (the only supported "
                              "value is v1)");
    cr_assert_eq(kc_migparted_parse("", 0, NULL, &mp, &err), KC_EINVALID);
    cr_assert_eq(kc_migparted_parse(NULL, 0, NULL, NULL, &err), KC_EARG);
    kc_migparted_free(NULL);
}
