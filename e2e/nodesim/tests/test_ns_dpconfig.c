/* Tests for ns_dpconfig: device-plugin config parsing, key selection and advertised resources. */
#include <criterion/criterion.h>
#include <string.h>

#include "ns_dpconfig.h"
#include "ns_migparted.h"

static ns_dpconfig *parse_ok(const char *yaml)
{
    ns_dpconfig *cfg = NULL;
    kc_err err;
    cr_assert_eq(ns_dpconfig_parse(yaml, strlen(yaml), NULL, &cfg, &err), KC_OK, "%s", err.msg);
    return cfg;
}

static void rejects(const char *yaml, const char *msg)
{
    ns_dpconfig *cfg = (ns_dpconfig *)1;
    kc_err err;
    cr_assert_eq(ns_dpconfig_parse(yaml, strlen(yaml), NULL, &cfg, &err), KC_EINVALID, "%s", yaml);
    cr_assert_null(cfg);
    cr_assert_str_eq(err.msg, msg);
}

static json_int_t count(const json_t *res, const char *name)
{
    const json_t *v = json_object_get(res, name);
    cr_assert(json_is_integer(v), "%s missing", name);
    return json_integer_value(v);
}

/* Resolves mig-parted config `name` on n GPUs of `model`. */
static void resolve(const char *model, size_t n, const char *name, kc_mp_gpu_state *states)
{
    kc_migparted *mp = NULL;
    const char *yaml = ns_migparted_default_yaml();
    const kc_gpu_model *models[8];
    kc_err err;
    cr_assert_eq(kc_migparted_parse(yaml, strlen(yaml), NULL, &mp, &err), KC_OK);
    memset(states, 0, n * sizeof(*states));
    for (size_t i = 0; i < n; i++)
        models[i] = kc_gpu_find(model);
    cr_assert_eq(kc_migparted_apply(mp, name, models, n, states, &err), KC_OK, "%s", err.msg);
    kc_migparted_free(mp);
}

Test(ns_dpconfig, parse_full)
{
    ns_dpconfig *cfg = parse_ok("version: v1\n"
                                "flags:\n"
                                "  migStrategy: mixed\n"
                                "  failOnInitError: false\n"
                                "  nvidiaDriverRoot: /run/nvidia/driver\n"
                                "  plugin: {passDeviceSpecs: true, deviceListStrategy: envvar}\n"
                                "sharing:\n"
                                "  timeSlicing:\n"
                                "    renameByDefault: true\n"
                                "    failRequestsGreaterThanOne: true\n"
                                "    resources:\n"
                                "      - name: nvidia.com/gpu\n"
                                "        replicas: 4\n"
                                "      - name: nvidia.com/mig-1g.5gb\n"
                                "        replicas: 2\n"
                                "        rename: nvidia.com/small\n"
                                "        devices: all\n");
    cr_assert(cfg->has_strategy);
    cr_assert_eq(cfg->strategy, NS_MIG_MIXED);
    cr_assert_not(cfg->fail_on_init_error);
    cr_assert(cfg->time_slicing.present);
    cr_assert(cfg->time_slicing.rename_by_default);
    cr_assert(cfg->time_slicing.fail_requests_greater_than_one);
    cr_assert_eq(cfg->time_slicing.n_resources, 2);
    cr_assert_str_eq(cfg->time_slicing.resources[1].rename, "nvidia.com/small");
    cr_assert_not(cfg->mps.present);
    ns_dpconfig_free(cfg);
    cfg = parse_ok("version: v1\n");
    cr_assert_not(cfg->has_strategy);
    cr_assert(cfg->fail_on_init_error, "NVIDIA's default is true");
    ns_dpconfig_free(cfg);
    ns_dpconfig_free(NULL);
}

Test(ns_dpconfig, malformed)
{
    /* The plugin's own rules and messages (kc_sharing), then what the simulation reads. */
    rejects("version: v2\n", "version: unknown version: v2");
    rejects("version: v1\nflags: {migStrategy: both}\n",
            "flags.migStrategy: unknown MIG strategy: both");
    rejects("version: v1\nflags: {failOnInitError: 3}\n",
            "flags.failOnInitError: must be true or false");
    rejects("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: "
            "1}]}}\n",
            "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2 (got 1)");
    rejects("version: v1\nsharing: {timeSlicing: {resources: []}}\n",
            "sharing.timeSlicing.resources: no resources specified");
    rejects("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}, "
            "{name: nvidia.com/gpu, replicas: 3}]}}\n",
            "sharing.timeSlicing.resources[1]: nvidia.com/gpu is listed twice");
    ns_dpconfig *cfg = NULL;
    kc_err err;
    cr_assert_eq(ns_dpconfig_parse("version: [", 10, NULL, &cfg, &err), KC_EPARSE);
    cr_assert_eq(ns_dpconfig_parse("version: v9", 11, "any.yaml", &cfg, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "any.yaml: version: unknown version: v9");
}

/* What NVIDIA's plugin accepts, nodesim accepts: unknown keys are ignored, no version is v1, a
 * name without a prefix is nvidia.com's, a name that matches no device shares nothing, and with
 * both time-slicing and MPS the plugin uses MPS. */
Test(ns_dpconfig, lenient_where_the_plugin_is)
{
    ns_dpconfig *cfg = parse_ok("flags: {bogus: 1}\nshareing: {}\nsharing:\n  timeSlicing:\n"
                                "    extra: 1\n    resources:\n    - name: gpu\n      replicas: 2\n"
                                "      extra: 1\n    - name: nvidia.com/foo\n      replicas: 3\n");
    cr_assert_eq(cfg->time_slicing.n_resources, 2);
    cr_assert_str_eq(cfg->time_slicing.resources[0].name, "nvidia.com/gpu");
    cr_assert_str_eq(cfg->time_slicing.resources[1].name, "nvidia.com/foo");
    ns_dpconfig_free(cfg);
    cfg = parse_ok(
        "version: v1\nsharing:\n  mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n"
        "  timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}\n");
    cr_assert(cfg->mps.present);
    cr_assert_not(cfg->time_slicing.present, "MPS is the strategy in use");
    ns_dpconfig_free(cfg);
    kc_err err;
    rejects(
        "version: v1\nsharing: {timeSlicing: {resources: [{name: amd.com/gpu, replicas: 2}]}}\n",
        "sharing.timeSlicing.resources[0].name: incorrect format for resource name "
        "'nvidia.com/amd.com/gpu': [a lowercase RFC 1123 subdomain must consist of lower case "
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'example.com')]");
    (void)err;
}

Test(ns_dpconfig, select_key)
{
    json_t *two = json_pack("{s:s, s:s}", "a100", "version: v1", "t4", "version: v1");
    json_t *with_default = json_pack("{s:s, s:s}", "default", "x", "t4", "y");
    json_t *one = json_pack("{s:s}", "only", "x");
    json_t *none = json_object();
    const char *key;
    kc_err err;
    cr_assert_eq(ns_dpconfig_select_key(two, "t4", "a100", NULL, &key, &err), KC_OK);
    cr_assert_str_eq(key, "t4");
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, "a100", NULL, &key, &err), KC_OK);
    cr_assert_str_eq(key, "a100");
    cr_assert_eq(ns_dpconfig_select_key(two, "v100", NULL, "empty", &key, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "node label nvidia.com/device-plugin.config=v100 names no key of "
                              "the ConfigMap (keys: a100, t4)");
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, "v100", "empty", &key, &err), KC_ENOTFOUND);
    cr_assert_eq(ns_dpconfig_select_key(with_default, "t4", NULL, NULL, &key, &err), KC_OK);
    cr_assert_str_eq(key, "t4");
    cr_assert_eq(ns_dpconfig_select_key(none, NULL, NULL, "empty", &key, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "the device-plugin ConfigMap holds no keys");
    cr_assert_eq(ns_dpconfig_select_key(NULL, NULL, NULL, NULL, &key, &err), KC_EINVALID);
    json_decref(two);
    json_decref(with_default);
    json_decref(one);
    json_decref(none);
}

/* No label and no default: the config manager's FALLBACK_STRATEGIES, in order. */
Test(ns_dpconfig, select_key_fallbacks)
{
    json_t *two = json_pack("{s:s, s:s}", "a100", "version: v1", "t4", "version: v1");
    json_t *with_default = json_pack("{s:s, s:s}", "default", "x", "t4", "y");
    json_t *one = json_pack("{s:s}", "only", "x");
    const char *key = "x";
    kc_err err;
    /* The GPU operator's setting: unlabelled nodes run the plugin without a config. */
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, "", "empty", &key, &err), KC_OK);
    cr_assert_null(key);
    cr_assert_eq(ns_dpconfig_select_key(one, "", NULL, "empty", &key, &err), KC_OK);
    cr_assert_null(key);
    cr_assert_eq(ns_dpconfig_select_key(with_default, NULL, NULL, "empty", &key, &err), KC_OK);
    cr_assert_null(key);
    /* The device plugin chart's setting: a key named default, else the only key. */
    cr_assert_eq(ns_dpconfig_select_key(with_default, NULL, NULL, "named,single", &key, &err),
                 KC_OK);
    cr_assert_str_eq(key, "default");
    cr_assert_eq(ns_dpconfig_select_key(one, NULL, NULL, "named, single", &key, &err), KC_OK);
    cr_assert_str_eq(key, "only");
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, NULL, "named,single,empty", &key, &err), KC_OK);
    cr_assert_null(key);
    /* Without FALLBACK_STRATEGIES the config manager has no fallback at all. */
    cr_assert_eq(ns_dpconfig_select_key(one, NULL, NULL, NULL, &key, &err), KC_EINVALID);
    cr_assert_null(key);
    cr_assert_str_eq(err.msg, "no config was set, no default was provided, and all fallbacks "
                              "failed (the node has no nvidia.com/device-plugin.config label, "
                              "FALLBACK_STRATEGIES is \"\", the ConfigMap holds 1 keys: only)");
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, NULL, "named,single", &key, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "no config was set, no default was provided, and all fallbacks "
                              "failed (the node has no nvidia.com/device-plugin.config label, "
                              "FALLBACK_STRATEGIES is \"named,single\", the ConfigMap holds 2 "
                              "keys: a100, t4)");
    cr_assert_eq(ns_dpconfig_select_key(two, NULL, NULL, "empyt", &key, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "unknown fallback strategy: empyt");
    json_decref(two);
    json_decref(with_default);
    json_decref(one);
}

Test(ns_dpconfig, time_slicing_t4)
{
    ns_dpconfig *cfg = parse_ok("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                "      - name: nvidia.com/gpu\n        replicas: 4\n");
    json_t *res = NULL;
    kc_err err;
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_NONE, kc_gpu_find("T4"), 4, NULL, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 16);
    cr_assert_eq(json_object_size(res), 1);
    json_decref(res);
    ns_dpconfig_free(cfg);
    cfg = parse_ok("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                   "    resources: [{name: nvidia.com/gpu, replicas: 4}]\n");
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_NONE, kc_gpu_find("T4"), 4, NULL, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu.shared"), 16);
    cr_assert_null(json_object_get(res, "nvidia.com/gpu"));
    json_decref(res);
    ns_dpconfig_free(cfg);
    /* No sharing: one resource per GPU. */
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_SINGLE, kc_gpu_find("T4"), 4, NULL, &res, &err),
                 KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 4);
    json_decref(res);
}

Test(ns_dpconfig, mig_strategies)
{
    kc_mp_gpu_state st[8];
    const kc_gpu_model *a100 = kc_gpu_find("A100-SXM4-40GB");
    json_t *res = NULL;
    kc_err err;
    resolve("A100-SXM4-40GB", 8, "all-balanced", st);
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_MIXED, a100, 8, st, &res, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(count(res, "nvidia.com/mig-1g.5gb"), 16);
    cr_assert_eq(count(res, "nvidia.com/mig-2g.10gb"), 8);
    cr_assert_eq(count(res, "nvidia.com/mig-3g.20gb"), 8);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 0);
    cr_assert_eq(json_object_size(res), 4);
    json_decref(res);
    /* none ignores MIG. */
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_NONE, a100, 8, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 8);
    json_decref(res);
    /* single with several profiles is MIG-INVALID: nothing advertised. */
    res = (json_t *)1;
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_SINGLE, a100, 8, st, &res, &err), KC_EINVALID);
    cr_assert_null(res);
    cr_assert_str_eq(err.msg, "MIG strategy single needs one MIG profile on every GPU, found "
                              "1g.5gb and 2g.10gb");
    resolve("A100-SXM4-40GB", 8, "all-1g.5gb", st);
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_MIXED, a100, 8, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/mig-1g.5gb"), 56);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 0);
    json_decref(res);
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_SINGLE, a100, 8, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 56);
    json_decref(res);
    /* single with one GPU left whole is invalid too. */
    st[3].mig_enabled = 0;
    memset(st[3].counts, 0, sizeof(st[3].counts));
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_SINGLE, a100, 8, st, &res, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "MIG strategy single needs every GPU in the same MIG mode: 7 of 8 "
                              "GPUs have MIG enabled");
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_MIXED, a100, 8, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/mig-1g.5gb"), 49);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 1);
    json_decref(res);
    /* A +me profile is advertised as NVIDIA's device plugin names it ('+' is not allowed in a
     * resource name): 1g.10gb+me is nvidia.com/mig-1g.10gb.me. */
    const kc_gpu_model *h100 = kc_gpu_find("H100-80GB-HBM3");
    resolve("H100-80GB-HBM3", 2, "all-1g.10gb.me", st);
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_MIXED, h100, 2, st, &res, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(count(res, "nvidia.com/mig-1g.10gb.me"), 2);
    cr_assert_null(json_object_get(res, "nvidia.com/mig-1g.10gb+me"));
    json_decref(res);
}

Test(ns_dpconfig, sharing_mig_devices)
{
    kc_mp_gpu_state st[2];
    const kc_gpu_model *a100 = kc_gpu_find("A100-SXM4-40GB");
    json_t *res = NULL;
    kc_err err;
    resolve("A100-SXM4-40GB", 2, "all-balanced", st);
    ns_dpconfig *cfg = parse_ok("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                                "    resources:\n"
                                "      - {name: nvidia.com/mig-1g.5gb, replicas: 3}\n"
                                "      - {name: nvidia.com/mig-3g.20gb, replicas: 2, rename: "
                                "nvidia.com/big}\n"
                                "      - {name: nvidia.com/mig-7g.40gb, replicas: 2}\n");
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_MIXED, a100, 2, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/mig-1g.5gb.shared"), 12);
    cr_assert_eq(count(res, "nvidia.com/big"), 4);
    cr_assert_eq(count(res, "nvidia.com/mig-2g.10gb"), 2);
    cr_assert_null(json_object_get(res, "nvidia.com/mig-7g.40gb.shared"));
    json_decref(res);
    ns_dpconfig_free(cfg);
    cfg = parse_ok("version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, "
                   "replicas: 2}]\n");
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_MIXED, a100, 2, st, &res, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "unable to validate flags: using --mig-strategy=mixed is not "
                              "supported with MPS");
    /* single on MIG-enabled GPUs: the plugin would share MIG devices, which MPS cannot. */
    resolve("A100-SXM4-40GB", 2, "all-1g.5gb", st);
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_SINGLE, a100, 2, st, &res, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "sharing using MPS is not supported for MIG devices");
    /* none ignores MIG: whole GPUs, shared. */
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_NONE, a100, 2, st, &res, &err), KC_OK);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 4);
    json_decref(res);
    ns_dpconfig_free(cfg);
    /* The strategy in effect is what counts: flags.migStrategy mixed parses, and MIG_STRATEGY
     * single (what the operator sets) on GPUs without MIG shares them with MPS. */
    cfg = parse_ok("version: v1\nflags: {migStrategy: mixed}\nsharing: {mps: {resources: [{name: "
                   "nvidia.com/gpu, replicas: 2}]}}\n");
    resolve("A100-SXM4-40GB", 2, "all-disabled", st);
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_SINGLE, a100, 2, st, &res, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_eq(count(res, "nvidia.com/gpu"), 4);
    json_decref(res);
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_MIXED, a100, 2, st, &res, &err), KC_EINVALID);
    ns_dpconfig_free(cfg);
    cr_assert_eq(ns_dp_advertise(NULL, NS_MIG_NONE, NULL, 2, NULL, &res, &err), KC_EARG);
}

/* What the plugin's Allocate refuses on a 4×T4 node under `yaml`. */
static json_t *t4_limits(const char *yaml)
{
    json_t *res = NULL, *lim = NULL;
    kc_err err;
    ns_dpconfig *cfg = parse_ok(yaml);
    cr_assert_eq(ns_dp_advertise(cfg, NS_MIG_NONE, kc_gpu_find("Tesla-T4"), 4, NULL, &res, &err),
                 KC_OK);
    cr_assert_eq(ns_dp_allocate_limits(cfg, res, &lim, &err), KC_OK);
    json_decref(res);
    ns_dpconfig_free(cfg);
    return lim;
}

/* `lim` refuses more than one `name` with the plugin's message. */
static void assert_max_one(const json_t *lim, const char *name)
{
    char want[256];
    const json_t *rule = json_object_get(lim, name);
    snprintf(want, sizeof(want),
             "invalid allocation request for \"%s\": invalid request: maximum request size for "
             "shared resources is 1; found {found}",
             name);
    cr_assert_eq(json_integer_value(json_object_get(rule, "max")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(rule, "error")), want);
}

/* failRequestsGreaterThanOne: what the plugin's Allocate refuses, per advertised shared resource.
 */
Test(ns_dpconfig, allocate_limits)
{
    static const struct {
        const char *yaml;
        const char *refused; /* the resource refused above 1, NULL: none */
    } cases[] = {
        {"version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
         "    renameByDefault: true\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
         "nvidia.com/gpu.shared"},
        /* Time-slicing allows larger requests unless told otherwise. */
        {"version: v1\nsharing:\n  timeSlicing:\n"
         "    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
         NULL},
        /* MPS refuses them unless the config relaxes it. */
        {"version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
         "nvidia.com/gpu"},
        {"version: v1\nsharing:\n  mps:\n    failRequestsGreaterThanOne: false\n"
         "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
         NULL},
    };
    json_t *lim;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lim = t4_limits(cases[i].yaml);
        cr_assert_eq(json_object_size(lim), cases[i].refused ? 1 : 0, "case %zu", i);
        if (cases[i].refused)
            assert_max_one(lim, cases[i].refused);
        json_decref(lim);
    }
    /* No sharing, nothing refused. */
    kc_err err;
    cr_assert_eq(ns_dp_allocate_limits(NULL, NULL, &lim, &err), KC_OK);
    cr_assert_eq(json_object_size(lim), 0);
    json_decref(lim);
    cr_assert_eq(ns_dp_allocate_limits(NULL, NULL, NULL, &err), KC_EARG);
}
