/* op_render: loads the states/ manifests and renders a state's objects for a ClusterPolicy spec
 * (transform, namespace, owner reference, labels, hash annotation). */
#include "op_render.h"

#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kc_yaml.h"
#include "op_transform.h"

/* The operator's states, in the order it walks them. */
static const char *const STATE_ORDER[] = {
    "pre-requisites",
    "state-operator-metrics",
    "state-driver",
    "state-container-toolkit",
    "state-operator-validation",
    "state-device-plugin",
    "state-mps-control-daemon",
    "state-dcgm",
    "state-dcgm-exporter",
    "gpu-feature-discovery",
    "state-mig-manager",
    "state-node-status-exporter",
    "state-image-prepull",
};
#define STATE_COUNT (sizeof STATE_ORDER / sizeof STATE_ORDER[0])

struct op_states {
    json_t *objs[STATE_COUNT]; /* per state, an array of its objects in file order */
};

static int known_index(const char *name)
{
    for (size_t i = 0; i < STATE_COUNT; i++)
        if (strcmp(STATE_ORDER[i], name) == 0)
            return (int)i;
    return -1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_manifest(const char *name)
{
    size_t n = strlen(name);
    if (name[0] == '.')
        return false;
    return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static void free_dirents(struct dirent **list, int n)
{
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* Loads every manifest of one state folder (name order) into a new array. */
static kc_code load_state(const char *dir, json_t **out, kc_err *err)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, by_name);
    if (n < 0)
        return kc_err_set(err, KC_EIO, "%s: cannot read the folder: %m", dir);
    kc_code rc = KC_OK;
    json_t *objs = json_array();
    char *path = NULL;
    if (!objs) {
        rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", dir);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        if (!is_manifest(list[i]->d_name))
            continue;
        free(path);
        if (asprintf(&path, "%s/%s", dir, list[i]->d_name) < 0) {
            path = NULL;
            rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", dir);
            goto cleanup;
        }
        json_t *docs = NULL;
        rc = kc_yaml_parse_file(path, &docs, err);
        if (rc != KC_OK)
            goto cleanup;
        size_t j;
        json_t *doc;
        json_array_foreach(docs, j, doc)
        {
            json_t *meta = json_object_get(doc, "metadata");
            if (!json_is_object(doc) || !json_is_string(json_object_get(doc, "apiVersion")) ||
                !json_is_string(json_object_get(doc, "kind")) ||
                !json_is_string(json_object_get(meta, "name"))) {
                rc = kc_err_set(err, KC_EINVALID,
                                "%s: document %zu is not a Kubernetes object (apiVersion, kind "
                                "and metadata.name are required)",
                                path, j + 1);
                json_decref(docs);
                goto cleanup;
            }
            json_array_append(objs, doc);
        }
        json_decref(docs);
    }
    if (json_array_size(objs) == 0) {
        rc = kc_err_set(err, KC_EINVALID, "%s: the state folder holds no manifests", dir);
        goto cleanup;
    }
    *out = objs;
    objs = NULL;
cleanup:
    free(path);
    json_decref(objs);
    free_dirents(list, n);
    return rc;
}

kc_code op_states_load(const char *dir, op_states **out, kc_err *err)
{
    if (!dir || !out)
        return kc_err_set(err, KC_EARG, "op_states_load: dir and out are required");
    *out = NULL;
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, by_name);
    if (n < 0)
        return kc_err_set(err, KC_EIO, "%s: cannot read the states folder: %m", dir);
    kc_code rc = KC_OK;
    char *path = NULL;
    op_states *s = calloc(1, sizeof *s);
    if (!s) {
        rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", dir);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (name[0] == '.')
            continue;
        free(path);
        if (asprintf(&path, "%s/%s", dir, name) < 0) {
            path = NULL;
            rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", dir);
            goto cleanup;
        }
        if (!is_dir(path))
            continue; /* README.md and the like */
        int k = known_index(name);
        if (k < 0) {
            rc = kc_err_set(err, KC_EINVALID,
                            "%s: unknown state folder (known states: "
                            "pre-requisites, state-driver, ...)",
                            path);
            goto cleanup;
        }
        rc = load_state(path, &s->objs[k], err);
        if (rc != KC_OK)
            goto cleanup;
    }
    for (size_t k = 0; k < STATE_COUNT; k++) {
        if (!s->objs[k]) {
            rc = kc_err_set(err, KC_EINVALID, "%s/%s: state folder missing", dir, STATE_ORDER[k]);
            goto cleanup;
        }
    }
    *out = s;
    s = NULL;
cleanup:
    free(path);
    op_states_free(s);
    free_dirents(list, n);
    return rc;
}

void op_states_free(op_states *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < STATE_COUNT; i++)
        json_decref(s->objs[i]);
    free(s);
}

size_t op_states_count(const op_states *s)
{
    return s ? STATE_COUNT : 0;
}

const char *op_states_name(const op_states *s, size_t i)
{
    return s && i < STATE_COUNT ? STATE_ORDER[i] : NULL;
}

int op_states_find(const op_states *s, const char *name)
{
    return s && name ? known_index(name) : -1;
}

/* spec.<section>.enabled as a plain bool (a malformed value counts as the default here; rendering
 * reports it). */
static bool section_on(const json_t *spec, const char *section, bool def)
{
    json_t *v = json_object_get(json_object_get(spec, section), "enabled");
    return json_is_boolean(v) ? json_is_true(v) : def;
}

bool op_state_enabled(const op_states *s, size_t i, const json_t *spec)
{
    const char *name = op_states_name(s, i);
    if (!name)
        return false;
    if (strcmp(name, "state-driver") == 0)
        return section_on(spec, "driver", true);
    if (strcmp(name, "state-container-toolkit") == 0)
        return section_on(spec, "toolkit", true);
    if (strcmp(name, "state-device-plugin") == 0 || strcmp(name, "state-mps-control-daemon") == 0)
        return section_on(spec, "devicePlugin", true);
    if (strcmp(name, "state-dcgm") == 0)
        return section_on(spec, "dcgm", false);
    if (strcmp(name, "state-dcgm-exporter") == 0)
        return section_on(spec, "dcgmExporter", true);
    if (strcmp(name, "gpu-feature-discovery") == 0)
        return section_on(spec, "gfd", true);
    if (strcmp(name, "state-mig-manager") == 0)
        return section_on(spec, "migManager", true);
    if (strcmp(name, "state-node-status-exporter") == 0)
        return section_on(spec, "nodeStatusExporter", false);
    return true; /* pre-requisites, operator metrics, operator validation */
}

/* The `enabled` section gating a state, to report a non-boolean value. */
static const char *gating_section(const char *state)
{
    static const char *const map[][2] = {
        {"state-driver", "driver"},
        {"state-container-toolkit", "toolkit"},
        {"state-device-plugin", "devicePlugin"},
        {"state-mps-control-daemon", "devicePlugin"},
        {"state-dcgm", "dcgm"},
        {"state-dcgm-exporter", "dcgmExporter"},
        {"gpu-feature-discovery", "gfd"},
        {"state-mig-manager", "migManager"},
        {"state-node-status-exporter", "nodeStatusExporter"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i][0], state) == 0)
            return map[i][1];
    return NULL;
}

static bool cluster_scoped(const char *kind)
{
    static const char *const kinds[] = {
        "RuntimeClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "Namespace",
        "PriorityClass",
        "CustomResourceDefinition",
        "StorageClass",
        "PersistentVolume",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i], kind) == 0)
            return true;
    return false;
}

/* Object of obj[key], created when missing. */
static json_t *ensure_obj(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_object(v))
        return v;
    v = json_object();
    if (!v || json_object_set_new(obj, key, v) != 0)
        return NULL;
    return v;
}

/* sha256 of the canonical JSON (sorted keys, compact) as lowercase hex. */
static kc_code hash_hex(const json_t *obj, char out[65], kc_err *err)
{
    char *text = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
    if (!text)
        return kc_err_set(err, KC_ENOMEM, "hashing an object: out of memory");
    unsigned char md[32];
    int ok = EVP_Digest(text, strlen(text), md, NULL, EVP_sha256(), NULL);
    free(text);
    if (ok != 1)
        return kc_err_set(err, KC_ENOMEM, "hashing an object: sha256 failed");
    for (unsigned int i = 0; i < sizeof(md); i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return KC_OK;
}

/* What every rendered object gets: namespace, owner, labels, hash. */
static kc_code finish_object(json_t *obj, const char *state, const op_render_ctx *ctx, kc_err *err)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    json_t *meta = ensure_obj(obj, "metadata");
    json_t *labels = meta ? ensure_obj(meta, "labels") : NULL;
    if (!labels)
        goto oom;
    if (cluster_scoped(kind ? kind : ""))
        json_object_del(meta, "namespace");
    else if (json_object_set_new(meta, "namespace", json_string(ctx->ns)) != 0)
        goto oom;

    if (kind && (strcmp(kind, "RoleBinding") == 0 || strcmp(kind, "ClusterRoleBinding") == 0)) {
        size_t i;
        json_t *sub;
        json_array_foreach(json_object_get(obj, "subjects"), i, sub)
        {
            const char *sk = json_string_value(json_object_get(sub, "kind"));
            if (sk && strcmp(sk, "ServiceAccount") == 0 &&
                json_object_set_new(sub, "namespace", json_string(ctx->ns)) != 0)
                goto oom;
        }
    }
    if (kind && strcmp(kind, "ServiceMonitor") == 0) {
        json_t *sel = json_object_get(json_object_get(obj, "spec"), "namespaceSelector");
        if (json_is_object(sel) && json_object_get(sel, "matchNames")) {
            json_t *names = json_pack("[s]", ctx->ns);
            if (!names || json_object_set_new(sel, "matchNames", names) != 0)
                goto oom;
        }
    }
    if (json_object_set_new(labels, OP_MANAGED_LABEL, json_string(OP_MANAGED_VALUE)) != 0 ||
        json_object_set_new(labels, OP_STATE_LABEL, json_string(state)) != 0)
        goto oom;
    if (ctx->owner) {
        json_t *refs = json_pack("[O]", ctx->owner);
        if (!refs || json_object_set_new(meta, "ownerReferences", refs) != 0)
            goto oom;
    }

    /* Hashed without the hash annotation, and without an annotations map it leaves empty. */
    json_t *ann = json_object_get(meta, "annotations");
    if (ann) {
        json_object_del(ann, OP_HASH_ANNOTATION);
        if (json_object_size(ann) == 0)
            json_object_del(meta, "annotations");
    }
    char hex[65];
    kc_code rc = hash_hex(obj, hex, err);
    if (rc != KC_OK)
        return rc;
    ann = ensure_obj(meta, "annotations");
    if (!ann || json_object_set_new(ann, OP_HASH_ANNOTATION, json_string(hex)) != 0)
        goto oom;
    return KC_OK;
oom:
    return kc_err_set(err, KC_ENOMEM, "%s: out of memory", state);
}

kc_code op_render_state(const op_states *s, size_t i, const op_render_ctx *ctx, json_t **objs_out,
                        kc_err *err)
{
    if (objs_out)
        *objs_out = NULL;
    if (!s || i >= STATE_COUNT || !ctx || !ctx->ns || !*ctx->ns || !objs_out)
        return kc_err_set(err, KC_EARG,
                          "op_render_state: states, a known index, ctx with a "
                          "namespace and objs_out are required");
    if (ctx->owner && !json_is_object(ctx->owner))
        return kc_err_set(err, KC_EARG, "op_render_state: ctx->owner must be an object");
    const char *state = STATE_ORDER[i];
    json_t *empty = NULL;
    const json_t *spec = ctx->spec;
    if (!spec || json_is_null(spec)) {
        spec = empty = json_object();
        if (!empty)
            return kc_err_set(err, KC_ENOMEM, "%s: out of memory", state);
    }
    kc_code rc = KC_OK;
    json_t *objs = NULL;
    if (!json_is_object(spec)) {
        rc = kc_err_set(err, KC_EINVALID, "spec: must be an object");
        goto cleanup;
    }
    const char *gate = gating_section(state);
    if (gate) {
        bool on;
        rc = op_section_enabled(spec, gate, true, &on, err);
        if (rc != KC_OK)
            goto cleanup;
    }
    if (!op_state_enabled(s, i, spec)) {
        objs = json_array();
        if (!objs)
            rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", state);
        goto cleanup;
    }
    objs = json_deep_copy(s->objs[i]);
    if (!objs) {
        rc = kc_err_set(err, KC_ENOMEM, "%s: out of memory", state);
        goto cleanup;
    }
    op_tctx t = {.ctx = ctx, .spec = spec, .objs = objs, .state = state, .err = err};
    size_t k;
    json_t *obj;
    json_array_foreach(objs, k, obj)
    {
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        if (kind && strcmp(kind, "DaemonSet") == 0) {
            rc = op_apply_daemonset_common(&t, obj, strcmp(state, "state-driver") == 0);
            if (rc != KC_OK)
                goto cleanup;
        }
    }
    op_transform_fn fn = op_transform_for(state);
    if (fn) {
        rc = fn(&t);
        if (rc != KC_OK)
            goto cleanup;
    }
    json_array_foreach(objs, k, obj)
    {
        rc = finish_object(obj, state, ctx, err);
        if (rc != KC_OK)
            goto cleanup;
    }
cleanup:
    json_decref(empty);
    if (rc != KC_OK) {
        json_decref(objs);
        return rc;
    }
    *objs_out = objs;
    return KC_OK;
}
