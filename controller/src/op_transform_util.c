/* op_transform_util: the state → transform table, spec access with field-naming errors, and the
 * manifest edits (containers, env, volumes) the transforms share. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_transform.h"

static const struct {
    const char *state;
    op_transform_fn fn;
} TRANSFORMS[] = {
    {"pre-requisites", op_transform_prerequisites},
    {"state-operator-metrics", op_transform_operator_metrics},
    {"state-driver", op_transform_driver},
    {"state-container-toolkit", op_transform_toolkit},
    {"state-operator-validation", op_transform_validation},
    {"state-device-plugin", op_transform_device_plugin},
    {"state-mps-control-daemon", op_transform_mps},
    {"state-dcgm", op_transform_dcgm},
    {"state-dcgm-exporter", op_transform_dcgm_exporter},
    {"gpu-feature-discovery", op_transform_gfd},
    {"state-mig-manager", op_transform_mig_manager},
    {"state-node-status-exporter", op_transform_node_status_exporter},
    {"state-image-prepull", op_transform_image_prepull},
};

op_transform_fn op_transform_for(const char *state)
{
    for (size_t i = 0; i < sizeof TRANSFORMS / sizeof TRANSFORMS[0]; i++)
        if (strcmp(TRANSFORMS[i].state, state) == 0)
            return TRANSFORMS[i].fn;
    return NULL;
}

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

/* ---- spec access ---- */

kc_code op_spec_obj(const json_t *parent, const char *key, const char *path, const json_t **out,
                    kc_err *err)
{
    json_t *v = parent ? json_object_get(parent, key) : NULL;
    *out = NULL;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_object(v))
        return kc_err_set(err, KC_EINVALID, "%s.%s: must be an object", path, key);
    *out = v;
    return KC_OK;
}

kc_code op_spec_bool(const json_t *parent, const char *key, const char *path, bool def, bool *out,
                     kc_err *err)
{
    json_t *v = parent ? json_object_get(parent, key) : NULL;
    *out = def;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_boolean(v))
        return kc_err_set(err, KC_EINVALID, "%s.%s: must be true or false", path, key);
    *out = json_is_true(v);
    return KC_OK;
}

kc_code op_spec_str(const json_t *parent, const char *key, const char *path, const char **out,
                    kc_err *err)
{
    json_t *v = parent ? json_object_get(parent, key) : NULL;
    *out = NULL;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_string(v))
        return kc_err_set(err, KC_EINVALID, "%s.%s: must be a string", path, key);
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return KC_OK;
}

kc_code op_section_enabled(const json_t *spec, const char *section, bool def, bool *out,
                           kc_err *err)
{
    char path[64];
    snprintf(path, sizeof path, "spec.%s", section);
    const json_t *sec;
    kc_code rc = op_spec_obj(spec, section, "spec", &sec, err);
    if (rc != KC_OK)
        return rc;
    return op_spec_bool(sec, "enabled", path, def, out, err);
}

kc_code op_spec_path(const json_t *spec, const char *dotted, const json_t **out, kc_err *err)
{
    char path[96] = "spec", key[48];
    const json_t *cur = spec;
    const char *p = dotted;
    *out = NULL;
    while (cur && *p) {
        size_t n = strcspn(p, ".");
        if (n >= sizeof key)
            return kc_err_set(err, KC_EARG, "spec path %s too long", dotted);
        memcpy(key, p, n);
        key[n] = 0;
        const json_t *next;
        kc_code rc = op_spec_obj(cur, key, path, &next, err);
        if (rc != KC_OK)
            return rc;
        snprintf(path + strlen(path), sizeof path - strlen(path), ".%s", key);
        cur = next;
        p += n;
        if (*p == '.')
            p++;
    }
    *out = cur;
    return KC_OK;
}

bool op_valid_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* ---- manifest edits ---- */

json_t *op_find_object(json_t *objs, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        const char *k = json_string_value(json_object_get(o, "kind"));
        const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        if (k && strcmp(k, kind) == 0 && (!name || (n && strcmp(n, name) == 0)))
            return o;
    }
    return NULL;
}

void op_remove_object(json_t *objs, const char *kind, const char *name)
{
    json_t *o = op_find_object(objs, kind, name);
    for (size_t i = 0; o && i < json_array_size(objs); i++) {
        if (json_array_get(objs, i) == o) {
            json_array_remove(objs, i);
            return;
        }
    }
}

json_t *op_pod_spec(json_t *ds)
{
    json_t *ps = json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
    return json_is_object(ps) ? ps : NULL;
}

json_t *op_find_named(json_t *arr, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0)
            return e;
    }
    return NULL;
}

void op_remove_named(json_t *arr, const char *name)
{
    for (size_t i = 0; i < json_array_size(arr);) {
        const char *n = json_string_value(json_object_get(json_array_get(arr, i), "name"));
        if (n && strcmp(n, name) == 0)
            json_array_remove(arr, i);
        else
            i++;
    }
}

json_t *op_find_container(json_t *ds, const char *name)
{
    json_t *ps = op_pod_spec(ds);
    json_t *c = op_find_named(json_object_get(ps, "containers"), name);
    return c ? c : op_find_named(json_object_get(ps, "initContainers"), name);
}

void op_remove_container(json_t *ds, const char *name)
{
    json_t *ps = op_pod_spec(ds);
    op_remove_named(json_object_get(ps, "containers"), name);
    op_remove_named(json_object_get(ps, "initContainers"), name);
}

void op_remove_volume(json_t *ds, const char *name)
{
    json_t *ps = op_pod_spec(ds);
    op_remove_named(json_object_get(ps, "volumes"), name);
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(ps, lists[l]), i, c)
            op_remove_named(json_object_get(c, "volumeMounts"), name);
    }
}

kc_code op_env_set(json_t *container, const char *name, const char *value)
{
    json_t *env = json_object_get(container, "env");
    if (!json_is_array(env)) {
        env = json_array();
        if (!env || json_object_set_new(container, "env", env) != 0)
            return KC_ENOMEM;
    }
    /* An empty value is left out, as the API server stores it (omitempty): the object then
     * reads back exactly as rendered. */
    json_t *entry = value && *value ? json_pack("{s:s, s:s}", "name", name, "value", value)
                                    : json_pack("{s:s}", "name", name);
    if (!entry)
        return KC_ENOMEM;
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(env, i), "name"));
        if (n && strcmp(n, name) == 0)
            return json_array_set_new(env, i, entry) == 0 ? KC_OK : KC_ENOMEM;
    }
    return json_array_append_new(env, entry) == 0 ? KC_OK : KC_ENOMEM;
}

void op_env_remove(json_t *container, const char *name)
{
    op_remove_named(json_object_get(container, "env"), name);
}

kc_code op_env_merge(json_t *container, const json_t *env, const char *path, kc_err *err)
{
    if (!env || json_is_null(env))
        return KC_OK;
    if (!json_is_array(env))
        return kc_err_set(err, KC_EINVALID, "%s: must be a list of {name, value}", path);
    size_t i;
    json_t *e;
    json_array_foreach(env, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!json_is_object(e) || !name || !*name)
            return kc_err_set(err, KC_EINVALID, "%s[%zu].name: required (a non-empty string)", path,
                              i);
        json_t *value = json_object_get(e, "value");
        json_t *from = json_object_get(e, "valueFrom");
        if (value && !json_is_null(value) && !json_is_string(value))
            return kc_err_set(err, KC_EINVALID,
                              "%s[%zu].value: must be a string (quote numbers and booleans), "
                              "variable %s",
                              path, i, name);
        if (from && !json_is_object(from))
            return kc_err_set(err, KC_EINVALID, "%s[%zu].valueFrom: must be an object", path, i);
    }
    json_t *cenv = json_object_get(container, "env");
    if (!json_is_array(cenv)) {
        cenv = json_array();
        if (!cenv || json_object_set_new(container, "env", cenv) != 0)
            return kc_err_set(err, KC_ENOMEM, "%s: out of memory", path);
    }
    json_array_foreach(env, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *entry = json_object();
        if (!entry)
            return kc_err_set(err, KC_ENOMEM, "%s: out of memory", path);
        json_object_set_new(entry, "name", json_string(name));
        json_t *value = json_object_get(e, "value");
        json_t *from = json_object_get(e, "valueFrom");
        if (from)
            json_object_set(entry, "valueFrom", from);
        else
            json_object_set_new(entry, "value",
                                json_string(json_is_string(value) ? json_string_value(value) : ""));
        bool replaced = false;
        for (size_t j = 0; j < json_array_size(cenv); j++) {
            const char *n = json_string_value(json_object_get(json_array_get(cenv, j), "name"));
            if (n && strcmp(n, name) == 0) {
                json_array_set(cenv, j, entry);
                replaced = true;
                break;
            }
        }
        int r = replaced ? 0 : json_array_append(cenv, entry);
        json_decref(entry);
        if (r != 0)
            return kc_err_set(err, KC_ENOMEM, "%s: out of memory", path);
    }
    return KC_OK;
}

kc_code op_volume_host_path(json_t *ds, const char *volume, const char *path)
{
    json_t *v = op_find_named(json_object_get(op_pod_spec(ds), "volumes"), volume);
    json_t *hp = json_object_get(v, "hostPath");
    if (!json_is_object(hp))
        return KC_OK;
    return json_object_set_new(hp, "path", json_string(path)) == 0 ? KC_OK : KC_ENOMEM;
}

kc_code op_volume_config_map(json_t *ds, const char *volume, const char *name)
{
    json_t *v = op_find_named(json_object_get(op_pod_spec(ds), "volumes"), volume);
    json_t *cm = json_object_get(v, "configMap");
    if (!json_is_object(cm))
        return KC_OK;
    return json_object_set_new(cm, "name", json_string(name)) == 0 ? KC_OK : KC_ENOMEM;
}
