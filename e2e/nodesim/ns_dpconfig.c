/* ns_dpconfig: NVIDIA device-plugin config (parse, validate, key selection, advertised resources).
 */
#include "ns_dpconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_sharing.h"
#include "kc_yaml.h"

#define PATH_LEN 256

int ns_mig_strategy_parse(const char *s)
{
    if (!s)
        return -1;
    if (strcmp(s, "none") == 0)
        return NS_MIG_NONE;
    if (strcmp(s, "single") == 0)
        return NS_MIG_SINGLE;
    if (strcmp(s, "mixed") == 0)
        return NS_MIG_MIXED;
    return -1;
}

const char *ns_mig_strategy_name(ns_mig_strategy s)
{
    return s == NS_MIG_SINGLE ? "single" : s == NS_MIG_MIXED ? "mixed" : "none";
}

static kc_code get_bool(const json_t *obj, const char *key, const char *path, int *out, kc_err *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return KC_OK;
    if (!json_is_boolean(v)) {
        char p[PATH_LEN];
        snprintf(p, sizeof(p), "%s.%s", path, key);
        return kc_yaml_fail(err, p, "must be true or false");
    }
    *out = json_is_true(v);
    return KC_OK;
}

static void sharing_clear(ns_dp_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++) {
        free(s->resources[i].name);
        free(s->resources[i].rename);
    }
    free(s->resources);
}

void ns_dpconfig_free(ns_dpconfig *cfg)
{
    if (!cfg)
        return;
    sharing_clear(&cfg->time_slicing);
    sharing_clear(&cfg->mps);
    free(cfg);
}

/* A resource name as the plugin reads it: "gpu" is "nvidia.com/gpu" (kc_sharing_validate has
 * checked its form). Names that match no device (not nvidia.com/gpu or nvidia.com/mig-<profile>)
 * are kept and share nothing, as with the real plugin. */
static char *full_name(const char *raw)
{
    static const char prefix[] = "nvidia.com/";
    size_t n = strlen(raw) + sizeof(prefix);
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s", strncmp(raw, prefix, sizeof(prefix) - 1) ? prefix : "", raw);
    return out;
}

static kc_code parse_resource(const json_t *v, const char *path, ns_dp_resource *r, kc_err *err)
{
    char p[PATH_LEN];
    if (!json_is_object(v))
        return kc_yaml_fail(err, path, "must be a mapping with name and replicas");
    const json_t *name = json_object_get(v, "name");
    snprintf(p, sizeof(p), "%s.name", path);
    if (!json_is_string(name) || json_string_length(name) == 0)
        return kc_yaml_fail(err, p, "no resource name specified");
    const json_t *rep = json_object_get(v, "replicas");
    snprintf(p, sizeof(p), "%s.replicas", path);
    if (!json_is_integer(rep) || json_integer_value(rep) < 2 || json_integer_value(rep) > 10000)
        return kc_yaml_fail(err, p, "number of replicas must be >= 2");
    const json_t *rename = json_object_get(v, "rename");
    snprintf(p, sizeof(p), "%s.rename", path);
    if (rename && (!json_is_string(rename) || json_string_length(rename) == 0))
        return kc_yaml_fail(err, p, "must be a non-empty resource name");
    /* devices selects which GPUs are shared; the simulation shares all of them. */
    const json_t *devices = json_object_get(v, "devices");
    snprintf(p, sizeof(p), "%s.devices", path);
    if (devices && !(json_is_string(devices) && strcmp(json_string_value(devices), "all") == 0) &&
        !(json_is_integer(devices) && json_integer_value(devices) > 0) && !json_is_array(devices))
        return kc_yaml_fail(err, p,
                            "must be \"all\", a positive count, or a list of GPU indices or UUIDs");
    r->name = full_name(json_string_value(name));
    r->rename = rename ? full_name(json_string_value(rename)) : NULL;
    r->replicas = (int)json_integer_value(rep);
    if (!r->name || (rename && !r->rename))
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    return KC_OK;
}

static kc_code parse_sharing(const json_t *v, const char *path, ns_dp_sharing *s, kc_err *err)
{
    char p[PATH_LEN];
    kc_code rc;
    if (!json_is_object(v))
        return kc_yaml_fail(err, path, "must be a mapping with resources");
    s->present = 1;
    if ((rc = get_bool(v, "renameByDefault", path, &s->rename_by_default, err)) != KC_OK ||
        (rc = get_bool(v, "failRequestsGreaterThanOne", path, &s->fail_requests_greater_than_one,
                       err)) != KC_OK)
        return rc;
    const json_t *res = json_object_get(v, "resources");
    snprintf(p, sizeof(p), "%s.resources", path);
    if (!json_is_array(res) || json_array_size(res) == 0)
        return kc_yaml_fail(err, p, "no resources specified");
    size_t n = json_array_size(res);
    s->resources = calloc(n, sizeof(*s->resources));
    if (!s->resources)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof(p), "%s.resources[%zu]", path, i);
        s->n_resources++; /* counted first so a half-parsed resource is still freed */
        if ((rc = parse_resource(json_array_get(res, i), p, &s->resources[i], err)) != KC_OK)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(s->resources[j].name, s->resources[i].name) == 0)
                return kc_yaml_fail(err, p, "%s is listed twice", s->resources[i].name);
        }
    }
    return KC_OK;
}

static kc_code parse_flags(const json_t *v, ns_dpconfig *cfg, kc_err *err)
{
    if (!json_is_object(v))
        return kc_yaml_fail(err, "flags", "must be a mapping");
    const json_t *strategy = json_object_get(v, "migStrategy");
    if (strategy) {
        int s = json_is_string(strategy) ? ns_mig_strategy_parse(json_string_value(strategy)) : -1;
        if (s < 0)
            return kc_yaml_fail(err, "flags.migStrategy", "must be none, single or mixed");
        cfg->has_strategy = 1;
        cfg->strategy = (ns_mig_strategy)s;
    }
    return get_bool(v, "failOnInitError", "flags", &cfg->fail_on_init_error, err);
}

kc_code ns_dpconfig_from_json(const json_t *doc, ns_dpconfig **out, kc_err *err)
{
    kc_code rc;
    if (!out)
        return kc_err_set(err, KC_EARG, "ns_dpconfig_from_json: out is required");
    *out = NULL;
    /* As the plugin reads it: unknown keys are ignored, an empty document or version is v1. */
    if (json_is_null(doc) || (json_is_string(doc) && json_string_length(doc) == 0))
        doc = NULL;
    else if (!json_is_object(doc))
        return kc_err_set(err, KC_EINVALID, "the config must be a mapping");
    const json_t *version = json_object_get(doc, "version");
    if (version && !(json_is_string(version) && (json_string_length(version) == 0 ||
                                                 !strcmp(json_string_value(version), "v1"))))
        return kc_yaml_fail(err, "version", "unknown version: %s",
                            json_is_string(version) ? json_string_value(version)
                                                    : "(not a string)");
    ns_dpconfig *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    cfg->fail_on_init_error = 1;
    const json_t *flags = json_object_get(doc, "flags");
    if (flags && (rc = parse_flags(flags, cfg, err)) != KC_OK)
        goto free_cfg;
    const json_t *sharing = json_object_get(doc, "sharing");
    if (sharing) {
        if (!json_is_object(sharing)) {
            rc = kc_yaml_fail(err, "sharing", "must be a mapping with timeSlicing or mps");
            goto free_cfg;
        }
        const json_t *ts = json_object_get(sharing, "timeSlicing");
        const json_t *mps = json_object_get(sharing, "mps");
        /* With both, MPS is the strategy the plugin uses (time-slicing's entries are unused). */
        if (ts && !mps &&
            (rc = parse_sharing(ts, "sharing.timeSlicing", &cfg->time_slicing, err)) != KC_OK)
            goto free_cfg;
        /* Under MPS a request for more than one replica fails unless the config says otherwise. */
        cfg->mps.fail_requests_greater_than_one = 1;
        if (mps && (rc = parse_sharing(mps, "sharing.mps", &cfg->mps, err)) != KC_OK)
            goto free_cfg;
    }
    *out = cfg;
    return KC_OK;
free_cfg:
    ns_dpconfig_free(cfg);
    return rc;
}

kc_code ns_dpconfig_parse(const char *yaml, size_t len, const char *name, ns_dpconfig **out,
                          kc_err *err)
{
    json_t *doc = NULL;
    if (!out || (!yaml && len))
        return kc_err_set(err, KC_EARG, "ns_dpconfig_parse: yaml and out are required");
    *out = NULL;
    /* First the rules NVIDIA's plugin applies when it loads the file (shared with the operator's
     * check), with the plugin's messages; then what the simulation reads of it. */
    /* The strategy in effect (the environment's over the file's) is ns_dp_advertise's to judge:
     * "none" keeps the MPS check out of the file's rules here. */
    kc_code rc = kc_sharing_validate(yaml ? yaml : "", len, "none", err);
    if (rc == KC_OK)
        rc = kc_yaml_parse_one(yaml ? yaml : "", len, name, &doc, err);
    if (rc != KC_OK) {
        if (rc != KC_ENOMEM && rc != KC_EPARSE && name)
            kc_err_prefix(err, "%s", name);
        return rc;
    }
    rc = ns_dpconfig_from_json(doc, out, err);
    if (rc != KC_OK && rc != KC_ENOMEM && name)
        kc_err_prefix(err, "%s", name);
    json_decref(doc);
    return rc;
}

/* One entry of a FALLBACK_STRATEGIES list ("named,single"): *out is the key it picks, NULL for
 * the empty config; returns 0 when the strategy does not apply, -1 when it is unknown. */
static int try_fallback(const json_t *data, const char *strategy, size_t len, const char **out)
{
    const char *key;
    json_t *val;
    *out = NULL;
    if (len == 5 && strncmp(strategy, "named", len) == 0) {
        json_object_foreach((json_t *)data, key, val)
        {
            if (strcmp(key, "default") == 0)
                *out = key;
        }
        return *out != NULL;
    }
    if (len == 6 && strncmp(strategy, "single", len) == 0) {
        if (json_object_size(data) != 1)
            return 0;
        json_object_foreach((json_t *)data, key, val) *out = key;
        return 1;
    }
    if (len == 5 && strncmp(strategy, "empty", len) == 0)
        return 1;
    return -1;
}

kc_code ns_dpconfig_select_key(const json_t *data, const char *label, const char *default_key,
                               const char *fallbacks, const char **key_out, kc_err *err)
{
    char keys[256];
    if (!key_out)
        return kc_err_set(err, KC_EARG, "ns_dpconfig_select_key: key_out is required");
    *key_out = NULL;
    if (!json_is_object(data))
        return kc_err_set(err, KC_EINVALID, "the device-plugin ConfigMap has no data");
    if (json_object_size(data) == 0)
        return kc_err_set(err, KC_EINVALID, "the device-plugin ConfigMap holds no keys");
    const char *want = label && *label ? label : default_key && *default_key ? default_key : NULL;
    if (want) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)data, key, val)
        {
            if (strcmp(key, want) == 0)
                *key_out = key;
        }
        if (*key_out)
            return KC_OK;
        if (want == label)
            return kc_err_set(err, KC_ENOTFOUND,
                              "node label nvidia.com/device-plugin.config=%s names no key of the "
                              "ConfigMap (keys: %s)",
                              label, kc_yaml_key_list(data, keys, sizeof(keys)));
        return kc_err_set(err, KC_ENOTFOUND,
                          "the default device-plugin config %s names no key of the ConfigMap "
                          "(keys: %s)",
                          want, kc_yaml_key_list(data, keys, sizeof(keys)));
    }
    /* No label and no default: the config manager's fallbacks, in order. */
    for (const char *f = fallbacks ? fallbacks : ""; *f;) {
        size_t len = strcspn(f, ",");
        size_t lead = strspn(f, " ");
        size_t n = len - lead;
        while (n > 0 && f[lead + n - 1] == ' ')
            n--;
        if (n > 0) {
            int r = try_fallback(data, f + lead, n, key_out);
            if (r < 0)
                return kc_err_set(err, KC_EINVALID, "unknown fallback strategy: %.*s", (int)n,
                                  f + lead);
            if (r > 0)
                return KC_OK;
        }
        f += len + (f[len] == ',');
    }
    return kc_err_set(err, KC_EINVALID,
                      "no config was set, no default was provided, and all fallbacks failed "
                      "(the node has no nvidia.com/device-plugin.config label, FALLBACK_STRATEGIES "
                      "is \"%s\", the ConfigMap holds %zu keys: %s)",
                      fallbacks ? fallbacks : "", json_object_size(data),
                      kc_yaml_key_list(data, keys, sizeof(keys)));
}

static kc_code add_count(json_t *res, const char *name, json_int_t n)
{
    json_t *cur = json_object_get(res, name);
    json_int_t base = cur ? json_integer_value(cur) : 0;
    return json_object_set_new(res, name, json_integer(base + n)) == 0 ? KC_OK : KC_ENOMEM;
}

/* The single strategy: every GPU in the same MIG mode, and every MIG device of one profile. */
static kc_code single_count(const kc_gpu_model *model, size_t n_gpus, const kc_mp_gpu_state *mig,
                            json_int_t *out, kc_err *err)
{
    size_t enabled = 0;
    int profile = -1;
    json_int_t devices = 0;
    for (size_t g = 0; g < n_gpus; g++)
        enabled += mig && mig[g].mig_enabled;
    if (enabled == 0) {
        *out = (json_int_t)n_gpus;
        return KC_OK;
    }
    if (enabled != n_gpus)
        return kc_err_set(err, KC_EINVALID,
                          "MIG strategy single needs every GPU in the same MIG mode: %zu of %zu "
                          "GPUs have MIG enabled",
                          enabled, n_gpus);
    for (size_t g = 0; g < n_gpus; g++) {
        for (size_t i = 0; i < model->n_profiles && i < KC_GPU_MAX_PROFILES; i++) {
            if (mig[g].counts[i] <= 0)
                continue;
            if (profile >= 0 && profile != (int)i)
                return kc_err_set(err, KC_EINVALID,
                                  "MIG strategy single needs one MIG profile on every GPU, found "
                                  "%s and %s",
                                  model->profiles[profile].name, model->profiles[i].name);
            profile = (int)i;
            devices += mig[g].counts[i];
        }
    }
    *out = devices;
    return KC_OK;
}

/* The name a shared resource is advertised under. */
static const char *shared_name(const ns_dp_sharing *sh, const ns_dp_resource *r, char *buf,
                               size_t size)
{
    if (r->rename)
        return r->rename;
    if (!sh->rename_by_default)
        return r->name;
    snprintf(buf, size, "%s.shared", r->name);
    return buf;
}

kc_code ns_dp_advertise(const ns_dpconfig *cfg, ns_mig_strategy strategy, const kc_gpu_model *model,
                        size_t n_gpus, const kc_mp_gpu_state *mig, json_t **resources_out,
                        kc_err *err)
{
    kc_code rc = KC_OK;
    if (!resources_out || (!model && n_gpus))
        return kc_err_set(err, KC_EARG, "ns_dp_advertise: model and resources_out are required");
    *resources_out = NULL;
    const ns_dp_sharing *sh = cfg && cfg->time_slicing.present ? &cfg->time_slicing
                              : cfg && cfg->mps.present        ? &cfg->mps
                                                               : NULL;
    /* The plugin checks MPS against the strategy in effect (flags.migStrategy or MIG_STRATEGY)
     * when it starts, whatever the GPUs, and then refuses to share MIG devices. */
    if (cfg && cfg->mps.present && strategy == NS_MIG_MIXED)
        return kc_err_set(err, KC_EINVALID,
                          "unable to validate flags: using --mig-strategy=mixed is not supported "
                          "with MPS");
    for (size_t g = 0; cfg && cfg->mps.present && strategy == NS_MIG_SINGLE && mig && g < n_gpus;
         g++) {
        if (mig[g].mig_enabled)
            return kc_err_set(err, KC_EINVALID,
                              "sharing using MPS is not supported for MIG devices");
    }
    json_t *res = json_object();
    if (!res)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    if (strategy == NS_MIG_SINGLE) {
        json_int_t n = 0;
        if ((rc = single_count(model, n_gpus, mig, &n, err)) != KC_OK)
            goto free_res;
        rc = add_count(res, "nvidia.com/gpu", n);
    } else {
        rc = add_count(res, "nvidia.com/gpu", 0);
        for (size_t g = 0; rc == KC_OK && g < n_gpus; g++) {
            if (strategy == NS_MIG_NONE || !mig || !mig[g].mig_enabled) {
                rc = add_count(res, "nvidia.com/gpu", 1);
                continue;
            }
            for (size_t i = 0; rc == KC_OK && i < model->n_profiles && i < KC_GPU_MAX_PROFILES;
                 i++) {
                char name[96], mn[64];
                if (mig[g].counts[i] <= 0)
                    continue;
                snprintf(name, sizeof(name), "nvidia.com/mig-%s",
                         kc_gpu_mig_name(&model->profiles[i], mn, sizeof(mn)));
                rc = add_count(res, name, mig[g].counts[i]);
            }
        }
    }
    if (rc != KC_OK) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto free_res;
    }
    for (size_t i = 0; sh && i < sh->n_resources; i++) {
        const ns_dp_resource *r = &sh->resources[i];
        json_t *cur = json_object_get(res, r->name);
        if (!cur)
            continue; /* a resource this node does not advertise */
        char shared[128];
        const char *to = shared_name(sh, r, shared, sizeof(shared));
        if (strcmp(to, r->name) == 0)
            to = NULL;
        json_int_t n = json_integer_value(cur) * r->replicas;
        int failed;
        if (to) {
            json_object_del(res, r->name); /* frees cur */
            failed = add_count(res, to, n) != KC_OK;
        } else {
            failed = json_object_set_new(res, r->name, json_integer(n)) != 0;
        }
        if (failed) {
            rc = kc_err_set(err, KC_ENOMEM, "out of memory");
            goto free_res;
        }
    }
    *resources_out = res;
    return KC_OK;
free_res:
    json_decref(res);
    return rc;
}

kc_code ns_dp_allocate_limits(const ns_dpconfig *cfg, const json_t *advertised, json_t **out,
                              kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "ns_dp_allocate_limits: out is required");
    *out = json_object();
    if (!*out)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    const ns_dp_sharing *sh = cfg && cfg->time_slicing.present ? &cfg->time_slicing
                              : cfg && cfg->mps.present        ? &cfg->mps
                                                               : NULL;
    if (!sh || !sh->fail_requests_greater_than_one)
        return KC_OK;
    for (size_t i = 0; i < sh->n_resources; i++) {
        char buf[128], msg[400];
        const char *name = shared_name(sh, &sh->resources[i], buf, sizeof(buf));
        if (!json_object_get(advertised, name))
            continue;
        snprintf(msg, sizeof(msg),
                 "invalid allocation request for \"%s\": invalid request: maximum request size "
                 "for shared resources is 1; found {found}",
                 name);
        if (json_object_set_new(*out, name, json_pack("{s:i, s:s}", "max", 1, "error", msg))) {
            json_decref(*out);
            *out = NULL;
            return kc_err_set(err, KC_ENOMEM, "out of memory");
        }
    }
    return KC_OK;
}
