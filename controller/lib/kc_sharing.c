/* kc_sharing: the device-plugin sharing config a node will load, checked as NVIDIA's device
 * plugin checks it (api/config/v1: config.go, replicas.go, resources.go; the config manager's key
 * selection in cmd/config-manager). Messages end with the plugin's own wording. */
#include "kc_sharing.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_yaml.h"

#define PATH_LEN 128
/* NVIDIA's ResourceNamePrefix and MaxResourceNameLength. */
#define PREFIX       "nvidia.com/"
#define NAME_MAX_LEN 63

/* A lowercase RFC 1123 subdomain (Kubernetes' IsDNS1123Subdomain). */
static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    bool start = true;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (ch == '.') {
            if (start || s[i - 1] == '-')
                return false;
            start = true;
        } else if (ch == '-') {
            if (start)
                return false;
        } else if (alnum) {
            start = false;
        } else {
            return false;
        }
    }
    return !start && s[n - 1] != '-';
}

/* NewResourceName: prefixed with nvidia.com/ unless it is, at most 63 characters, and the part
 * after the first '/' a DNS subdomain. */
static kc_code resource_name(const json_t *v, const char *path, kc_err *err)
{
    if (!json_is_string(v))
        return kc_yaml_fail(err, path, "must be a resource name (a string), not %s",
                            kc_json_kind(v, true));
    const char *raw = json_string_value(v);
    char full[512];
    snprintf(full, sizeof(full), "%s%s", strncmp(raw, PREFIX, strlen(PREFIX)) ? PREFIX : "", raw);
    if (strlen(full) > NAME_MAX_LEN)
        return kc_yaml_fail(err, path,
                            "fully-qualified resource name must be %d characters or less: %s",
                            NAME_MAX_LEN, full);
    if (!dns_subdomain(strchr(full, '/') + 1))
        return kc_yaml_fail(
            err, path,
            "incorrect format for resource name '%s': [a lowercase RFC 1123 subdomain "
            "must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'example.com')]",
            full);
    return KC_OK;
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* A UUID as google/uuid parses it: 8-4-4-4-12 hex digits, or 32 without dashes. */
static bool uuid_ok(const char *s, size_t n)
{
    if (n == 32) {
        for (size_t i = 0; i < n; i++)
            if (!isxdigit((unsigned char)s[i]))
                return false;
        return true;
    }
    if (n != 36)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return false;
    }
    return true;
}

/* ReplicatedDeviceRef: a GPU index, a MIG index (gpu:mig), a GPU-<uuid>, MIG-<uuid> or
 * MIG-GPU-<uuid>/<gi>/<ci>. */
static bool device_ref_ok(const char *s)
{
    size_t n = strlen(s);
    const char *colon = strchr(s, ':');
    if (all_digits(s, n) ||
        (colon && all_digits(s, (size_t)(colon - s)) && all_digits(colon + 1, strlen(colon + 1))))
        return true;
    if (!strncmp(s, "GPU-", 4))
        return uuid_ok(s + 4, n - 4);
    if (strncmp(s, "MIG-", 4))
        return false;
    s += 4;
    n -= 4;
    if (uuid_ok(s, n))
        return true;
    const char *a = strchr(s, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    return b && !strncmp(s, "GPU-", 4) && uuid_ok(s + 4, (size_t)(a - s) - 4) &&
           all_digits(a + 1, (size_t)(b - a - 1)) && all_digits(b + 1, strlen(b + 1));
}

static kc_code devices(const json_t *v, const char *path, kc_err *err)
{
    if (!v)
        return KC_OK; /* "all" */
    if (json_is_string(v) || json_is_null(v)) {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(s, "all"))
            return kc_yaml_fail(err, path,
                                "devices set as '%s' but the only valid string input is 'all'", s);
        return KC_OK;
    }
    if (json_is_integer(v)) {
        if (json_integer_value(v) <= 0)
            return kc_yaml_fail(err, path,
                                "devices set as '%lld' but a count of devices must be > 0",
                                (long long)json_integer_value(v));
        return KC_OK;
    }
    if (!json_is_array(v))
        return kc_yaml_fail(err, path, "unrecognized type for devices spec: %s",
                            kc_json_kind(v, true));
    size_t i;
    const json_t *d;
    json_array_foreach(v, i, d)
    {
        if (json_is_integer(d) && json_integer_value(d) >= 0)
            continue;
        if (json_is_string(d) && device_ref_ok(json_string_value(d)))
            continue;
        char p[PATH_LEN];
        snprintf(p, sizeof(p), "%s[%zu]", path, i);
        return kc_yaml_fail(
            err, p,
            "unsupported type for device in devices list: %s (a GPU index, a MIG index "
            "such as 0:1, or a GPU or MIG UUID)",
            json_is_string(d) ? json_string_value(d) : kc_json_kind(d, true));
    }
    return KC_OK;
}

/* ReplicatedResource.UnmarshalJSON: name, devices, replicas, rename, in that order. */
static kc_code replicated_resource(const json_t *v, const char *path, kc_err *err)
{
    char p[PATH_LEN];
    kc_code rc;
    if (!json_is_object(v) && !json_is_null(v))
        return kc_yaml_fail(err, path, "must be a mapping with name and replicas, not %s",
                            kc_json_kind(v, true));
    const json_t *name = json_object_get(v, "name");
    if (!name)
        return kc_yaml_fail(err, path, "no resource name specified");
    snprintf(p, sizeof(p), "%s.name", path);
    if ((rc = resource_name(name, p, err)) != KC_OK)
        return rc;
    snprintf(p, sizeof(p), "%s.devices", path);
    if ((rc = devices(json_object_get(v, "devices"), p, err)) != KC_OK)
        return rc;
    const json_t *rep = json_object_get(v, "replicas");
    if (!rep)
        return kc_yaml_fail(err, path, "no replicas specified");
    snprintf(p, sizeof(p), "%s.replicas", path);
    if (!json_is_integer(rep) && !json_is_null(rep))
        return kc_yaml_fail(err, p, "must be an integer, not %s", kc_json_kind(rep, true));
    if (json_integer_value(rep) < 2) /* null leaves it 0 */
        return kc_yaml_fail(err, p, "number of replicas must be >= 2 (got %lld)",
                            (long long)json_integer_value(rep));
    const json_t *rename = json_object_get(v, "rename");
    snprintf(p, sizeof(p), "%s.rename", path);
    if (rename && !json_is_null(rename))
        return resource_name(rename, p, err);
    return KC_OK;
}

static kc_code boolean(const json_t *obj, const char *key, const char *path, kc_err *err)
{
    const json_t *v = json_object_get(obj, key);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return kc_yaml_fail(err, path, "%s must be true or false, not %s", key,
                            kc_json_kind(v, true));
    return KC_OK;
}

/* ReplicatedResources.UnmarshalJSON (sharing.timeSlicing, sharing.mps). */
static kc_code replicated_resources(const json_t *v, const char *path, kc_err *err)
{
    kc_code rc;
    if (!json_is_object(v) && !json_is_null(v))
        return kc_yaml_fail(err, path, "must be a mapping with resources, not %s",
                            kc_json_kind(v, true));
    if ((rc = boolean(v, "renameByDefault", path, err)) != KC_OK ||
        (rc = boolean(v, "failRequestsGreaterThanOne", path, err)) != KC_OK)
        return rc;
    const json_t *res = json_object_get(v, "resources");
    char p[PATH_LEN];
    snprintf(p, sizeof(p), "%s.resources", path);
    if (res && !json_is_array(res) && !json_is_null(res))
        return kc_yaml_fail(err, p, "must be a list of {name, replicas}, not %s",
                            kc_json_kind(res, true));
    if (json_array_size(res) == 0)
        return kc_yaml_fail(err, p, "no resources specified");
    size_t i;
    const json_t *r;
    json_array_foreach(res, i, r)
    {
        snprintf(p, sizeof(p), "%s.resources[%zu]", path, i);
        if ((rc = replicated_resource(r, p, err)) != KC_OK)
            return rc;
    }
    return KC_OK;
}

static kc_code check_doc(const json_t *doc, const char *mig_strategy, kc_err *err)
{
    kc_code rc;
    if (json_is_null(doc))
        return KC_OK; /* an empty config: the plugin's defaults */
    if (!json_is_object(doc))
        return kc_err_set(err, KC_EINVALID,
                          "the config must be a mapping (version, flags, sharing), not %s",
                          kc_json_kind(doc, true));
    const json_t *flags = json_object_get(doc, "flags");
    if (flags && !json_is_object(flags) && !json_is_null(flags))
        return kc_yaml_fail(err, "flags", "must be a mapping, not %s", kc_json_kind(flags, true));
    const json_t *ms = json_object_get(flags, "migStrategy");
    if (ms && !json_is_null(ms)) {
        if (!json_is_string(ms))
            return kc_yaml_fail(err, "flags.migStrategy", "must be a string, not %s",
                                kc_json_kind(ms, true));
        const char *file = json_string_value(ms);
        if (strcmp(file, "none") && strcmp(file, "single") && strcmp(file, "mixed"))
            return kc_yaml_fail(err, "flags.migStrategy", "unknown MIG strategy: %s", file);
        /* The plugin's command line and environment (MIG_STRATEGY, which the operator sets)
         * override the file's flags: the file's strategy counts only without them. */
        if (!mig_strategy)
            mig_strategy = file;
    }
    const json_t *sharing = json_object_get(doc, "sharing");
    if (sharing && !json_is_object(sharing) && !json_is_null(sharing))
        return kc_yaml_fail(err, "sharing", "must be a mapping with timeSlicing or mps, not %s",
                            kc_json_kind(sharing, true));
    const json_t *ts = json_object_get(sharing, "timeSlicing");
    const json_t *mps = json_object_get(sharing, "mps");
    if (ts && (rc = replicated_resources(ts, "sharing.timeSlicing", err)) != KC_OK)
        return rc;
    if (mps && !json_is_null(mps)) {
        if ((rc = replicated_resources(mps, "sharing.mps", err)) != KC_OK)
            return rc;
        if (mig_strategy && !strcmp(mig_strategy, "mixed"))
            return kc_yaml_fail(err, "sharing.mps",
                                "using --mig-strategy=mixed is not supported with MPS");
    }
    const json_t *version = json_object_get(doc, "version");
    if (version && !json_is_string(version) && !json_is_null(version))
        return kc_yaml_fail(err, "version", "must be a string, not %s",
                            kc_json_kind(version, true));
    const char *ver = json_string_value(version);
    if (ver && *ver && strcmp(ver, "v1"))
        return kc_yaml_fail(err, "version", "unknown version: %s", ver);
    return KC_OK;
}

kc_code kc_sharing_validate(const char *yaml, size_t len, const char *mig_strategy, kc_err *err)
{
    if (!yaml && len)
        return kc_err_set(err, KC_EARG, "kc_sharing_validate: no text");
    json_t *doc = NULL;
    kc_code rc = kc_yaml_parse_one(yaml ? yaml : "", len, NULL, &doc, err);
    if (rc != KC_OK)
        return rc;
    rc = check_doc(doc, mig_strategy, err);
    json_decref(doc);
    return rc;
}

kc_code kc_sharing_check(const kc_sharing_in *in, const char **key_out, kc_err *err)
{
    const char *ignored;
    if (!key_out)
        key_out = &ignored;
    *key_out = NULL;
    if (!in || !in->cm_name || !in->ns)
        return kc_err_set(err, KC_EARG, "kc_sharing_check: no ConfigMap name");
    if (!in->cm)
        return kc_err_set(err, KC_ENOTFOUND,
                          "ConfigMap %s/%s (spec.devicePlugin.config.name) not found", in->ns,
                          in->cm_name);
    const json_t *data = json_object_get(in->cm, "data");
    if (json_object_size(data) == 0)
        return kc_err_set(err, KC_ENOTFOUND,
                          "ConfigMap %s/%s has no keys: no configuration files available", in->ns,
                          in->cm_name);
    bool by_label = in->label && *in->label;
    const char *want = by_label                              ? in->label
                       : in->default_key && *in->default_key ? in->default_key
                                                             : NULL;
    if (!want)
        return KC_OK; /* FALLBACK_STRATEGIES=empty: no config, plain GPUs */
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)data, key, val)
    {
        if (!strcmp(key, want))
            *key_out = key;
    }
    char keys[200];
    if (!*key_out)
        return kc_err_set(err, KC_ENOTFOUND,
                          "ConfigMap %s/%s has no key \"%s\" (named by %s; keys: %s): specified "
                          "config %s does not exist",
                          in->ns, in->cm_name, want,
                          by_label ? "the node label " KC_SHARING_LABEL
                                   : "spec.devicePlugin.config.default",
                          kc_yaml_key_list(data, keys, sizeof(keys)), want);
    const char *text = json_string_value(json_object_get(data, *key_out));
    kc_code rc = kc_sharing_validate(text, text ? strlen(text) : 0, in->mig_strategy, err);
    if (rc != KC_OK && rc != KC_ENOMEM)
        kc_err_prefix(err, "ConfigMap %s/%s key \"%s\"", in->ns, in->cm_name, *key_out);
    return rc;
}
