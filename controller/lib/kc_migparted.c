/* kc_migparted: parser, validator and resolver for mig-parted's config format (config.yaml). */
#include "kc_migparted.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kc_yaml.h"

#define PATH_MAX_LEN 256

/* Keys holding dots or other punctuation are quoted in paths so the path stays unambiguous. */
static void key_path(char *out, size_t size, const char *parent, const char *key)
{
    int plain = *key != '\0';
    for (const char *p = key; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
            plain = 0;
    }
    snprintf(out, size, plain ? "%s%s%s" : "%s%s\"%s\"", parent, *parent ? "." : "", key);
}

/* Parses "0x20B010DE" (case-insensitive hex, exactly 8 digits) or the integer kc_yaml makes of an
 * unquoted hex scalar. Returns 0 on success. */
static int parse_pci_id(const json_t *v, uint32_t *out)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > 0xFFFFFFFFLL)
            return -1;
        *out = (uint32_t)n;
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    const char *s = json_string_value(v);
    if (json_string_length(v) != 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return -1;
    uint32_t id = 0;
    for (int i = 2; i < 10; i++) {
        if (!isxdigit((unsigned char)s[i]))
            return -1;
        id = id * 16 + (uint32_t)(isdigit((unsigned char)s[i])
                                      ? s[i] - '0'
                                      : tolower((unsigned char)s[i]) - 'a' + 10);
    }
    *out = id;
    return 0;
}

static void entry_clear(kc_mp_entry *e)
{
    for (size_t i = 0; i < e->n_profiles; i++)
        free(e->profiles[i]);
    free(e->profiles);
    free(e->counts);
    free(e->devices);
    free(e->filter);
}

void kc_migparted_free(kc_migparted *mp)
{
    if (!mp)
        return;
    for (size_t c = 0; c < mp->n_configs; c++) {
        for (size_t i = 0; i < mp->configs[c].n_entries; i++)
            entry_clear(&mp->configs[c].entries[i]);
        free(mp->configs[c].entries);
        free(mp->configs[c].name);
    }
    free(mp->configs);
    free(mp);
}

static kc_code parse_devices(const json_t *v, const char *path, kc_mp_entry *e, kc_err *err)
{
    if (json_is_string(v) && strcmp(json_string_value(v), "all") == 0) {
        e->all_devices = 1;
        return KC_OK;
    }
    if (!json_is_array(v))
        return kc_yaml_fail(err, path, "must be \"all\" or a list of GPU indices");
    size_t n = json_array_size(v);
    e->devices = calloc(n ? n : 1, sizeof(*e->devices));
    if (!e->devices)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(v, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 1023) {
            char p[PATH_MAX_LEN];
            snprintf(p, sizeof(p), "%s[%zu]", path, i);
            return kc_yaml_fail(err, p, "must be a non-negative GPU index");
        }
        e->devices[e->n_devices++] = (int)json_integer_value(d);
    }
    return KC_OK;
}

static kc_code parse_filter(const json_t *v, const char *path, kc_mp_entry *e, kc_err *err)
{
    static const char form[] = "is not a PCI id of the form 0x<device><vendor> (8 hex digits, e.g. "
                               "0x20B010DE)";
    int single = !json_is_array(v);
    size_t n = single ? 1 : json_array_size(v);
    if (single && !json_is_string(v) && !json_is_integer(v))
        return kc_yaml_fail(err, path, "must be a PCI id or a list of PCI ids");
    e->filter = calloc(n ? n : 1, sizeof(*e->filter));
    if (!e->filter)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *d = single ? v : json_array_get(v, i);
        char p[PATH_MAX_LEN];
        if (single)
            snprintf(p, sizeof(p), "%s", path);
        else
            snprintf(p, sizeof(p), "%s[%zu]", path, i);
        if (parse_pci_id(d, &e->filter[e->n_filter]) != 0) {
            if (json_is_string(d))
                return kc_yaml_fail(err, p, "\"%s\" %s", json_string_value(d), form);
            return kc_yaml_fail(err, p, "%s", "must be a PCI id string such as \"0x20B010DE\"");
        }
        e->n_filter++;
    }
    return KC_OK;
}

static kc_code parse_mig_devices(const json_t *v, const char *path, kc_mp_entry *e, kc_err *err)
{
    if (!json_is_object(v))
        return kc_yaml_fail(err, path, "must be a map of MIG profile to count");
    size_t n = json_object_size(v);
    e->profiles = calloc(n ? n : 1, sizeof(*e->profiles));
    e->counts = calloc(n ? n : 1, sizeof(*e->counts));
    if (!e->profiles || !e->counts)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        char p[PATH_MAX_LEN];
        key_path(p, sizeof(p), path, key);
        if (!json_is_integer(val) || json_integer_value(val) <= 0 || json_integer_value(val) > 1000)
            return kc_yaml_fail(err, p, "count must be a positive integer");
        e->profiles[e->n_profiles] = strdup(key);
        if (!e->profiles[e->n_profiles])
            return kc_err_set(err, KC_ENOMEM, "out of memory");
        e->counts[e->n_profiles++] = (int)json_integer_value(val);
    }
    return KC_OK;
}

static kc_code parse_entry(const json_t *v, const char *path, kc_mp_entry *e, kc_err *err)
{
    char p[PATH_MAX_LEN];
    kc_code rc;
    if (!json_is_object(v))
        return kc_yaml_fail(err, path,
                            "must be a mapping with devices, mig-enabled and mig-devices");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "devices") != 0 && strcmp(key, "mig-enabled") != 0 &&
            strcmp(key, "mig-devices") != 0 && strcmp(key, "device-filter") != 0) {
            key_path(p, sizeof(p), path, key);
            return kc_yaml_fail(
                err, p, "unknown key (expected devices, mig-enabled, mig-devices, device-filter)");
        }
    }
    snprintf(p, sizeof(p), "%s.devices", path);
    const json_t *devices = json_object_get(v, "devices");
    if (!devices)
        return kc_yaml_fail(err, p, "required (\"all\" or a list of GPU indices)");
    if ((rc = parse_devices(devices, p, e, err)) != KC_OK)
        return rc;
    snprintf(p, sizeof(p), "%s.mig-enabled", path);
    const json_t *enabled = json_object_get(v, "mig-enabled");
    if (!enabled)
        return kc_yaml_fail(err, p, "required (true or false)");
    if (!json_is_boolean(enabled))
        return kc_yaml_fail(err, p, "must be true or false");
    e->mig_enabled = json_is_true(enabled);
    snprintf(p, sizeof(p), "%s.mig-devices", path);
    const json_t *devs = json_object_get(v, "mig-devices");
    if (e->mig_enabled && !devs)
        return kc_yaml_fail(err, p,
                            "required when mig-enabled is true (use {} for no MIG devices)");
    if (!e->mig_enabled && devs && !json_is_null(devs) &&
        !(json_is_object(devs) && json_object_size(devs) == 0))
        return kc_yaml_fail(err, p, "must be empty when mig-enabled is false");
    if (e->mig_enabled && (rc = parse_mig_devices(devs, p, e, err)) != KC_OK)
        return rc;
    snprintf(p, sizeof(p), "%s.device-filter", path);
    const json_t *filter = json_object_get(v, "device-filter");
    if (filter && (rc = parse_filter(filter, p, e, err)) != KC_OK)
        return rc;
    return KC_OK;
}

static kc_code parse_config(const char *name, const json_t *v, kc_mp_config *c, kc_err *err)
{
    char path[PATH_MAX_LEN];
    key_path(path, sizeof(path), "mig-configs", name);
    c->name = strdup(name);
    if (!c->name)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    if (!json_is_array(v))
        return kc_yaml_fail(err, path, "must be a list of entries");
    size_t n = json_array_size(v);
    c->entries = calloc(n ? n : 1, sizeof(*c->entries));
    if (!c->entries)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof(p), "%s[%zu]", path, i);
        c->n_entries++; /* counted first so a failed entry is still freed */
        kc_code rc = parse_entry(json_array_get(v, i), p, &c->entries[i], err);
        if (rc != KC_OK)
            return rc;
    }
    return KC_OK;
}

kc_code kc_migparted_from_json(const json_t *doc, kc_migparted **out, kc_err *err)
{
    kc_code rc = KC_OK;
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_migparted_from_json: out is required");
    *out = NULL;
    if (!json_is_object(doc))
        return kc_err_set(err, KC_EINVALID,
                          "the config must be a mapping with version and mig-configs");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)doc, key, val)
    {
        if (strcmp(key, "version") != 0 && strcmp(key, "mig-configs") != 0) {
            char p[PATH_MAX_LEN];
            key_path(p, sizeof(p), "", key);
            return kc_yaml_fail(err, p, "unknown top-level key (expected version and mig-configs)");
        }
    }
    const json_t *version = json_object_get(doc, "version");
    if (!version)
        return kc_yaml_fail(err, "version", "required (the only supported value is v1)");
    if (!json_is_string(version) || strcmp(json_string_value(version), "v1") != 0) {
        if (json_is_string(version))
            return kc_yaml_fail(err, "version",
                                "\"%s\" is not supported (the only supported value is v1)",
                                json_string_value(version));
        return kc_yaml_fail(err, "version", "must be the string v1");
    }
    const json_t *configs = json_object_get(doc, "mig-configs");
    if (!configs)
        return kc_yaml_fail(err, "mig-configs",
                            "required (a map of config name to a list of entries)");
    if (!json_is_object(configs))
        return kc_yaml_fail(err, "mig-configs",
                            "must be a map of config name to a list of entries");
    kc_migparted *mp = calloc(1, sizeof(*mp));
    if (!mp)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    size_t n = json_object_size(configs);
    mp->configs = calloc(n ? n : 1, sizeof(*mp->configs));
    if (!mp->configs) {
        rc = kc_err_set(err, KC_ENOMEM, "out of memory");
        goto free_mp;
    }
    json_object_foreach((json_t *)configs, key, val)
    {
        kc_mp_config *c = &mp->configs[mp->n_configs++];
        if ((rc = parse_config(key, val, c, err)) != KC_OK)
            goto free_mp;
    }
    *out = mp;
    return KC_OK;
free_mp:
    kc_migparted_free(mp);
    return rc;
}

kc_code kc_migparted_parse(const char *yaml, size_t len, const char *name, kc_migparted **out,
                           kc_err *err)
{
    json_t *doc = NULL;
    if (!out || (!yaml && len))
        return kc_err_set(err, KC_EARG, "kc_migparted_parse: yaml and out are required");
    *out = NULL;
    kc_code rc = kc_yaml_parse_one(yaml ? yaml : "", len, name, &doc, err);
    if (rc != KC_OK)
        return rc;
    rc = kc_migparted_from_json(doc, out, err);
    if (rc != KC_OK && rc != KC_ENOMEM && name)
        kc_err_prefix(err, "%s", name);
    json_decref(doc);
    return rc;
}

const kc_mp_config *kc_migparted_find(const kc_migparted *mp, const char *name)
{
    for (size_t i = 0; mp && name && i < mp->n_configs; i++) {
        if (strcmp(mp->configs[i].name, name) == 0)
            return &mp->configs[i];
    }
    return NULL;
}

static int entry_matches(const kc_mp_entry *e, size_t gpu, const kc_gpu_model *m)
{
    int hit = e->all_devices;
    for (size_t i = 0; !hit && i < e->n_devices; i++)
        hit = (size_t)e->devices[i] == gpu;
    if (!hit || e->n_filter == 0)
        return hit;
    for (size_t i = 0; i < e->n_filter; i++) {
        if (m && e->filter[i] == m->pci_id)
            return 1;
    }
    return 0;
}

/* "a Tesla-T4" / "an A100-SXM4-40GB". */
static const char *article(const kc_gpu_model *m)
{
    return strncmp(m->name, "Tesla", 5) == 0 ? "a" : "an";
}

kc_code kc_migparted_apply(const kc_migparted *mp, const char *name,
                           const kc_gpu_model *const *models, size_t n_gpus,
                           kc_mp_gpu_state *states, kc_err *err)
{
    kc_code rc = KC_OK;
    if (!mp || !name || (n_gpus && (!models || !states)))
        return kc_err_set(err, KC_EARG,
                          "kc_migparted_apply: config, name, models and states "
                          "are required");
    const kc_mp_config *c = kc_migparted_find(mp, name);
    if (!c)
        return kc_err_set(err, KC_ENOTFOUND,
                          "mig-parted config \"%s\" is not defined in the "
                          "config file (%zu configs are)",
                          name, mp->n_configs);
    kc_mp_gpu_state *next = calloc(n_gpus ? n_gpus : 1, sizeof(*next));
    if (!next)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    if (n_gpus)
        memcpy(next, states, n_gpus * sizeof(*next));
    for (size_t k = 0; k < c->n_entries; k++) {
        const kc_mp_entry *e = &c->entries[k];
        char path[PATH_MAX_LEN];
        snprintf(path, sizeof(path), "mig-configs.%s[%zu]", c->name, k);
        for (size_t i = 0; !e->all_devices && i < e->n_devices; i++) {
            if ((size_t)e->devices[i] >= n_gpus) {
                rc = kc_err_set(err, KC_EINVALID,
                                "%s.devices: GPU index %d does not exist (the node has %zu GPUs)",
                                path, e->devices[i], n_gpus);
                goto free_next;
            }
        }
        for (size_t g = 0; g < n_gpus; g++) {
            const kc_gpu_model *m = models[g];
            if (!m || !entry_matches(e, g, m))
                continue;
            /* As mig-parted: an entry for every GPU skips the ones without MIG; one naming
             * a GPU without MIG may only leave MIG disabled. */
            if (!m->mig_capable && (e->all_devices || !e->mig_enabled))
                continue;
            if (e->mig_enabled && !m->mig_capable) {
                rc = kc_err_set(err, KC_EINVALID,
                                "%s: GPU %zu (%s %s): cannot set MIG config on non MIG-capable GPU",
                                path, g, article(m), m->name);
                goto free_next;
            }
            kc_mp_gpu_state s = {.mig_enabled = e->mig_enabled};
            for (size_t j = 0; j < e->n_profiles; j++) {
                int idx = kc_gpu_profile_index(m, e->profiles[j]);
                if (idx < 0) {
                    rc = kc_err_set(err, KC_EINVALID,
                                    "mig-configs.%s: GPU %zu: error setting MIGConfig: error "
                                    "attempting multiple config orderings: MIG profile \"%s\" "
                                    "not found on this GPU",
                                    c->name, g, e->profiles[j]);
                    goto free_next;
                }
                s.counts[idx] = e->counts[j];
            }
            next[g] = s;
        }
    }
    for (size_t g = 0; g < n_gpus; g++) {
        if (models[g] && (rc = kc_gpu_layout_fits(models[g], next[g].counts, err)) != KC_OK) {
            kc_err_prefix(err, "mig-configs.%s: GPU %zu", c->name, g);
            goto free_next;
        }
    }
    if (n_gpus)
        memcpy(states, next, n_gpus * sizeof(*next));
free_next:
    free(next);
    return rc;
}
