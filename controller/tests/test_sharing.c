/* Tests for kc_sharing: the device-plugin sharing config checked as NVIDIA's device plugin and
 * its config manager check it (key selection, YAML, version, replicas, resource names, devices). */
#include <criterion/criterion.h>
#include <string.h>

#include "kc_sharing.h"

/* Validates text; returns the code and leaves the message in *err. */
static kc_code check(const char *text, const char *strategy, kc_err *err)
{
    return kc_sharing_validate(text, strlen(text), strategy, err);
}

static void refused(const char *text, kc_code want, const char *msg)
{
    kc_err err;
    kc_code rc = check(text, NULL, &err);
    cr_assert_eq(rc, want, "%s: got %d (%s)", text, rc, rc == KC_OK ? "" : err.msg);
    cr_assert_str_eq(err.msg, msg);
}

static void accepted(const char *text)
{
    kc_err err;
    kc_code rc = check(text, NULL, &err);
    cr_assert_eq(rc, KC_OK, "%s: %s", text, err.msg);
}

#define TS(res) "version: v1\nsharing:\n  timeSlicing:\n    resources:\n" res

Test(sharing, valid_configs)
{
    accepted(TS("    - name: nvidia.com/gpu\n      replicas: 4\n"));
    accepted(""); /* an empty key: the plugin's defaults */
    accepted("flags:\n  migStrategy: none\n");
    accepted("sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
             "    - name: gpu\n      replicas: 2\n      devices: [0, \"1:0\", "
             "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763]\n");
    accepted("version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
             "      replicas: 10\n      devices: 2\n      rename: gpu.mps\n");
    /* Unknown keys are ignored, as the plugin's decoder ignores them. */
    accepted("version: v1\nextra: 1\n");
    /* MIG resources are shared by name. */
    accepted(TS("    - name: nvidia.com/mig-1g.5gb\n      replicas: 2\n"));
}

Test(sharing, malformed_yaml_has_line_and_column)
{
    kc_err err;
    cr_assert_eq(check(TS("    - name: nvidia.com/gpu\n     replicas: 2\n"), NULL, &err),
                 KC_EPARSE);
    cr_assert(strstr(err.msg, "line 6 column"), "%s", err.msg);
    cr_assert_eq(check("version: [v1\n", NULL, &err), KC_EPARSE);
    cr_assert(strstr(err.msg, "line "), "%s", err.msg);
}

/* A config and the message the check refuses it with. */
typedef struct refusal {
    const char *text, *msg;
} refusal;

#define RFC1123                                                                                    \
    "': [a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "  \
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com')]"
#define RES0      "sharing.timeSlicing.resources[0]"
#define GPU(more) TS("    - name: gpu\n      replicas: 2\n" more)

static const refusal refusals[] = {
    /* replicas: NVIDIA's rule is >= 2, so one replica is refused too */
    {TS("    - name: nvidia.com/gpu\n      replicas: 0\n"),
     RES0 ".replicas: number of replicas must be >= 2 (got 0)"},
    {TS("    - name: nvidia.com/gpu\n      replicas: -1\n"),
     RES0 ".replicas: number of replicas must be >= 2 (got -1)"},
    {TS("    - name: nvidia.com/gpu\n      replicas: 1\n"),
     RES0 ".replicas: number of replicas must be >= 2 (got 1)"},
    {TS("    - name: nvidia.com/gpu\n      replicas: two\n"),
     RES0 ".replicas: must be an integer, not a string"},
    {TS("    - name: nvidia.com/gpu\n"), RES0 ": no replicas specified"},
    {"sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n",
     "sharing.mps.resources[0].replicas: number of replicas must be >= 2 (got 1)"},
    /* resources and their names */
    {"sharing:\n  timeSlicing: {}\n", "sharing.timeSlicing.resources: no resources specified"},
    {"sharing:\n  timeSlicing:\n    resources: []\n",
     "sharing.timeSlicing.resources: no resources specified"},
    {TS("    - replicas: 2\n"), RES0 ": no resource name specified"},
    {TS("    - name: amd.com/gpu\n      replicas: 2\n"),
     RES0 ".name: incorrect format for resource name 'nvidia.com/amd.com/gpu" RFC1123},
    {TS("    - name: nvidia.com/GPU\n      replicas: 2\n"),
     RES0 ".name: incorrect format for resource name 'nvidia.com/GPU" RFC1123},
    {TS("    - name: nvidia.com/a-very-long-resource-name-that-goes-past-the-limit-of-63\n"
        "      replicas: 2\n"),
     RES0 ".name: fully-qualified resource name must be 63 characters or less: "
          "nvidia.com/a-very-long-resource-name-that-goes-past-the-limit-of-63"},
    {GPU("      rename: Shared\n"),
     RES0 ".rename: incorrect format for resource name 'nvidia.com/Shared" RFC1123},
    {"sharing:\n  timeSlicing:\n    renameByDefault: yes please\n    resources: []\n",
     "sharing.timeSlicing: renameByDefault must be true or false, not a string"},
    {"sharing: [1]\n", "sharing: must be a mapping with timeSlicing or mps, not a list"},
    /* devices */
    {GPU("      devices: some\n"),
     RES0 ".devices: devices set as 'some' but the only valid string input is 'all'"},
    {GPU("      devices: 0\n"),
     RES0 ".devices: devices set as '0' but a count of devices must be > 0"},
    {GPU("      devices: [GPU-123]\n"),
     RES0 ".devices[0]: unsupported type for device in devices list: GPU-123 (a GPU index, a MIG "
          "index such as 0:1, or a GPU or MIG UUID)"},
    {GPU("      devices: {a: 1}\n"),
     RES0 ".devices: unrecognized type for devices spec: a mapping"},
    /* version, flags, the document */
    {"version: v2\n", "version: unknown version: v2"},
    {"version: 1\n", "version: must be a string, not a number"},
    {"flags:\n  migStrategy: both\n", "flags.migStrategy: unknown MIG strategy: both"},
    {"just text\n", "the config must be a mapping (version, flags, sharing), not a string"},
    {"flags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n    - name: gpu\n"
     "      replicas: 2\n",
     "sharing.mps: using --mig-strategy=mixed is not supported with MPS"},
};

Test(sharing, refusals_name_the_value_and_the_rule)
{
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        refused(refusals[i].text, KC_EINVALID, refusals[i].msg);
}

Test(sharing, device_references)
{
    accepted(GPU("      devices: [MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3/0, "
                 "MIG-b1028956cfa20990bf4a5da9abb51763]\n"));
}

Test(sharing, mps_and_the_environment_strategy)
{
    const char *mps = "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n";
    kc_err err;
    cr_assert_eq(check(mps, "mixed", &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "sharing.mps: using --mig-strategy=mixed is not supported with MPS");
    cr_assert_eq(check(mps, "single", &err), KC_OK, "%s", err.msg);
    /* The environment's strategy overrides the file's flags (urfave/cli's IsSet counts the
     * environment), so a file saying mixed runs MPS under MIG_STRATEGY=single... */
    const char *file_mixed = "flags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n"
                             "    - name: gpu\n      replicas: 2\n";
    cr_assert_eq(check(file_mixed, "single", &err), KC_OK, "%s", err.msg);
    /* ... and a file saying single does not under MIG_STRATEGY=mixed. */
    const char *file_single = "flags:\n  migStrategy: single\nsharing:\n  mps:\n    resources:\n"
                              "    - name: gpu\n      replicas: 2\n";
    cr_assert_eq(check(file_single, "mixed", &err), KC_EINVALID);
}

static json_t *configmap(void)
{
    return json_pack("{s:{s:s}, s:{s:s, s:s}}", "metadata", "name", "sharing", "data", "good",
                     "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n"
                     "      replicas: 2\n",
                     "zero",
                     "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n"
                     "      replicas: 0\n");
}

Test(sharing, key_selection)
{
    json_t *cm = configmap();
    kc_sharing_in in = {.ns = "gpu-operator", .cm_name = "sharing", .cm = cm};
    const char *key = "x";
    kc_err err;
    /* No label, no default: FALLBACK_STRATEGIES=empty, plain GPUs. */
    cr_assert_eq(kc_sharing_check(&in, &key, &err), KC_OK, "%s", err.msg);
    cr_assert_null(key);
    in.default_key = "good";
    cr_assert_eq(kc_sharing_check(&in, &key, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(key, "good");
    /* The label wins over the default. */
    in.label = "zero";
    cr_assert_eq(kc_sharing_check(&in, &key, &err), KC_EINVALID);
    cr_assert_str_eq(err.msg, "ConfigMap gpu-operator/sharing key \"zero\": "
                              "sharing.timeSlicing.resources[0].replicas: number of replicas must "
                              "be >= 2 (got 0)");
    in.label = "nope";
    cr_assert_eq(kc_sharing_check(&in, NULL, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "ConfigMap gpu-operator/sharing has no key \"nope\" (named by the "
                              "node label nvidia.com/device-plugin.config; keys: good, zero): "
                              "specified config nope does not exist");
    in.label = "";
    in.default_key = "gone";
    cr_assert_eq(kc_sharing_check(&in, NULL, &err), KC_ENOTFOUND);
    cr_assert(strstr(err.msg, "named by spec.devicePlugin.config.default"), "%s", err.msg);
    in.cm = NULL;
    cr_assert_eq(kc_sharing_check(&in, NULL, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg,
                     "ConfigMap gpu-operator/sharing (spec.devicePlugin.config.name) not found");
    json_t *empty = json_pack("{s:{}}", "data");
    in.cm = empty;
    cr_assert_eq(kc_sharing_check(&in, NULL, &err), KC_ENOTFOUND);
    cr_assert_str_eq(err.msg, "ConfigMap gpu-operator/sharing has no keys: no configuration files "
                              "available");
    cr_assert_eq(kc_sharing_check(NULL, NULL, &err), KC_EARG);
    json_decref(empty);
    json_decref(cm);
}
