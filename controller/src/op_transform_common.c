/* op_transform_common: what every DaemonSet takes from the spec (daemonsets.*, runtime class,
 * host paths, the validator image) and the component-section and device-plugin-config steps the
 * per-state transforms share. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_policy.h"
#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

/* ---- component sections ---- */

static bool in_list(const char *const *list, const char *name)
{
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0)
            return true;
    return false;
}

static kc_code check_pull_policy(const char *v, const char *path, kc_err *err)
{
    if (v && strcmp(v, "Always") != 0 && strcmp(v, "IfNotPresent") != 0 && strcmp(v, "Never") != 0)
        return kc_err_set(err, KC_EINVALID,
                          "%s.imagePullPolicy: \"%s\" is not one of Always, IfNotPresent, Never",
                          path, v);
    return KC_OK;
}

/* Adds a section's imagePullSecrets (names, or {name} objects) to the pod, without duplicates. */
static kc_code add_pull_secrets(op_tctx *t, json_t *ds, const json_t *sec, const char *path)
{
    json_t *secrets = json_object_get(sec, "imagePullSecrets");
    if (!secrets || json_is_null(secrets))
        return KC_OK;
    if (!json_is_array(secrets))
        return kc_err_set(t->err, KC_EINVALID, "%s.imagePullSecrets: must be a list of names",
                          path);
    json_t *ps = op_pod_spec(ds);
    size_t i;
    json_t *s;
    json_array_foreach(secrets, i, s)
    {
        const char *name = json_is_string(s) ? json_string_value(s)
                                             : json_string_value(json_object_get(s, "name"));
        if (!name || !op_valid_name(name))
            return kc_err_set(t->err, KC_EINVALID,
                              "%s.imagePullSecrets[%zu]: must be a Secret name", path, i);
        json_t *list = json_object_get(ps, "imagePullSecrets");
        if (!json_is_array(list)) {
            list = json_array();
            if (!list || json_object_set_new(ps, "imagePullSecrets", list) != 0)
                return OOM(t);
        }
        if (op_find_named(list, name))
            continue;
        if (json_array_append_new(list, json_pack("{s:s}", "name", name)) != 0)
            return OOM(t);
    }
    return KC_OK;
}

static kc_code check_resources(op_tctx *t, const json_t *res, const char *path)
{
    if (!json_is_object(res))
        return kc_err_set(t->err, KC_EINVALID, "%s.resources: must be an object", path);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)res, key, v)
    {
        if (strcmp(key, "limits") != 0 && strcmp(key, "requests") != 0 &&
            strcmp(key, "claims") != 0)
            return kc_err_set(t->err, KC_EINVALID,
                              "%s.resources.%s: unknown field (limits, requests)", path, key);
        if (strcmp(key, "claims") == 0)
            continue;
        if (!json_is_object(v))
            return kc_err_set(t->err, KC_EINVALID, "%s.resources.%s: must be an object", path, key);
        const char *rk;
        json_t *q;
        json_object_foreach(v, rk, q)
        {
            if (!json_is_string(q) && !json_is_integer(q) && !json_is_real(q))
                return kc_err_set(t->err, KC_EINVALID,
                                  "%s.resources.%s.%s: must be a quantity such as 100m or 1Gi",
                                  path, key, rk);
        }
    }
    return KC_OK;
}

kc_code op_apply_component(op_tctx *t, json_t *ds, const op_component *c)
{
    char path[96];
    snprintf(path, sizeof path, "spec.%s", c->section);
    const json_t *sec;
    kc_code rc = op_spec_path(t->spec, c->section, &sec, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *main = op_find_container(ds, c->main);
    const char *def = c->def_image;
    if (!def)
        def = json_string_value(json_object_get(main, "image"));
    char *image = op_image(sec, path, def, t->err);
    if (!image)
        return t->err ? t->err->code : KC_EINVALID;
    const char *policy;
    rc = op_spec_str(sec, "imagePullPolicy", path, &policy, t->err);
    if (rc == KC_OK)
        rc = check_pull_policy(policy, path, t->err);
    if (rc != KC_OK)
        goto cleanup;
    json_t *res = sec ? json_object_get(sec, "resources") : NULL;
    if (res && !json_is_null(res)) {
        rc = check_resources(t, res, path);
        if (rc != KC_OK)
            goto cleanup;
    } else {
        res = NULL;
    }

    json_t *ps = op_pod_spec(ds);
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *ctr;
        json_array_foreach(json_object_get(ps, lists[l]), i, ctr)
        {
            const char *name = json_string_value(json_object_get(ctr, "name"));
            if (!name || !in_list(c->containers, name))
                continue;
            if (json_object_set_new(ctr, "image", json_string(image)) != 0 ||
                (policy && json_object_set_new(ctr, "imagePullPolicy", json_string(policy)) != 0) ||
                (res && l == 1 && json_object_set(ctr, "resources", res) != 0)) {
                rc = OOM(t);
                goto cleanup;
            }
        }
    }
    rc = add_pull_secrets(t, ds, sec, path);
    if (rc != KC_OK)
        goto cleanup;
    if (c->env && main) {
        char epath[112];
        snprintf(epath, sizeof epath, "%s.env", path);
        rc = op_env_merge(main, sec ? json_object_get(sec, "env") : NULL, epath, t->err);
        if (rc != KC_OK)
            goto cleanup;
    }
    json_t *args = sec ? json_object_get(sec, "args") : NULL;
    if (args && !json_is_null(args)) {
        if (!json_is_array(args)) {
            rc = kc_err_set(t->err, KC_EINVALID, "%s.args: must be a list of strings", path);
            goto cleanup;
        }
        size_t i;
        json_t *a;
        json_array_foreach(args, i, a)
        {
            if (!json_is_string(a)) {
                rc = kc_err_set(t->err, KC_EINVALID, "%s.args[%zu]: must be a string", path, i);
                goto cleanup;
            }
        }
        /* NVIDIA's reading: an empty list leaves the manifest's args. */
        json_t *cur = json_object_get(main, "args");
        if (c->args == OP_ARGS_APPEND && main && json_array_size(args) > 0 && json_is_array(cur)) {
            if (json_array_extend(cur, args) != 0) {
                rc = OOM(t);
                goto cleanup;
            }
        } else if (c->args != OP_ARGS_NONE && main && json_array_size(args) > 0 &&
                   json_object_set_new(main, "args", json_deep_copy(args)) != 0) {
            rc = OOM(t);
            goto cleanup;
        }
    }
    if (c->pod) {
        bool host_net;
        rc = op_spec_bool(sec, "hostNetwork", path, false, &host_net, t->err);
        if (rc != KC_OK)
            goto cleanup;
        /* Service names must still resolve from the host's network namespace. */
        if (host_net &&
            (json_object_set_new(ps, "hostNetwork", json_true()) != 0 ||
             json_object_set_new(ps, "dnsPolicy", json_string("ClusterFirstWithHostNet")) != 0)) {
            rc = OOM(t);
            goto cleanup;
        }
    }
cleanup:
    free(image);
    return rc;
}

bool op_is_validator_container(const json_t *container)
{
    const char *img = json_string_value(json_object_get(container, "image"));
    size_t n = strlen(OP_VALIDATOR_REPO);
    return img && strncmp(img, OP_VALIDATOR_REPO, n) == 0 && (img[n] == ':' || img[n] == '@');
}

char *op_validator_image(op_tctx *t)
{
    const json_t *sec;
    if (op_spec_obj(t->spec, "validator", "spec", &sec, t->err) != KC_OK)
        return NULL;
    const char *fallback =
        t->ctx->operator_image ? t->ctx->operator_image : OP_DEFAULT_VALIDATOR_IMAGE;
    return op_image(sec, "spec.validator", fallback, t->err);
}

/* The validator's image, pull policy and pull secrets on the pod's validator containers. */
static kc_code apply_validator_image(op_tctx *t, json_t *ds)
{
    json_t *ps = op_pod_spec(ds);
    static const char *const lists[] = {"initContainers", "containers"};
    char *image = NULL;
    const json_t *sec = NULL;
    const char *policy = NULL;
    bool any = false;
    kc_code rc = op_spec_obj(t->spec, "validator", "spec", &sec, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(sec, "imagePullPolicy", "spec.validator", &policy, t->err);
    if (rc == KC_OK)
        rc = check_pull_policy(policy, "spec.validator", t->err);
    if (rc != KC_OK)
        return rc;
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *ctr;
        json_array_foreach(json_object_get(ps, lists[l]), i, ctr)
        {
            if (!op_is_validator_container(ctr))
                continue;
            if (!image) {
                image = op_validator_image(t);
                if (!image)
                    return t->err ? t->err->code : KC_EINVALID;
            }
            any = true;
            if (json_object_set_new(ctr, "image", json_string(image)) != 0 ||
                (policy && json_object_set_new(ctr, "imagePullPolicy", json_string(policy)) != 0)) {
                free(image);
                return OOM(t);
            }
        }
    }
    free(image);
    return any ? add_pull_secrets(t, ds, sec, "spec.validator") : KC_OK;
}

/* Copies string values of a spec map into obj[key] (created when missing), skipping `skip`. */
static kc_code merge_string_map(op_tctx *t, json_t *obj, const char *key, const json_t *map,
                                const char *path, const json_t *skip)
{
    if (!map || json_is_null(map))
        return KC_OK;
    if (!json_is_object(map))
        return kc_err_set(t->err, KC_EINVALID, "%s: must be a map of strings", path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)map, k, v)
    {
        if (!json_is_string(v))
            return kc_err_set(t->err, KC_EINVALID, "%s.%s: must be a string (quote it)", path, k);
    }
    json_t *dst = json_object_get(obj, key);
    if (!json_is_object(dst)) {
        dst = json_object();
        if (!dst || json_object_set_new(obj, key, dst) != 0)
            return OOM(t);
    }
    json_object_foreach((json_t *)map, k, v)
    {
        /* The selector is immutable: its labels must keep matching the pods. */
        if (skip && json_object_get(skip, k))
            continue;
        if (json_object_set(dst, k, v) != 0)
            return OOM(t);
    }
    return KC_OK;
}

/* "1" -> 1, "25%" -> "25%": an int-or-string that the API accepts. */
static json_t *int_or_percent(const char *s)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%')
        return json_string(s);
    return json_integer(strtoll(s, NULL, 10));
}

static bool valid_max_unavailable(const char *s)
{
    size_t n = strlen(s), digits = 0;
    while (digits < n && isdigit((unsigned char)s[digits]))
        digits++;
    return digits > 0 && digits <= 9 && (digits == n || (digits == n - 1 && s[n - 1] == '%'));
}

static kc_code apply_update_strategy(op_tctx *t, json_t *ds, const json_t *dsets, bool is_driver)
{
    const char *strategy;
    kc_code rc = op_spec_str(dsets, "updateStrategy", "spec.daemonsets", &strategy, t->err);
    if (rc != KC_OK)
        return rc;
    if (strategy && strcmp(strategy, "RollingUpdate") != 0 && strcmp(strategy, "OnDelete") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.daemonsets.updateStrategy: \"%s\" is not one of RollingUpdate, "
                          "OnDelete",
                          strategy);
    const json_t *ru;
    rc = op_spec_obj(dsets, "rollingUpdate", "spec.daemonsets", &ru, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *mu = ru ? json_object_get(ru, "maxUnavailable") : NULL;
    json_t *mu_val = NULL;
    if (mu && !json_is_null(mu)) {
        char buf[32];
        const char *s = json_string_value(mu);
        if (json_is_integer(mu)) {
            snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(mu));
            s = buf;
        }
        if (!s || !valid_max_unavailable(s))
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.daemonsets.rollingUpdate.maxUnavailable: must be a number or "
                              "a percentage such as \"1\" or \"25%%\"");
        mu_val = int_or_percent(s);
    }
    /* The driver is replaced only by its upgrade flow (or by hand): always OnDelete. */
    json_t *us = NULL;
    if (is_driver)
        us = json_pack("{s:s}", "type", "OnDelete");
    else if (strategy && strcmp(strategy, "OnDelete") == 0)
        us = json_pack("{s:s}", "type", "OnDelete");
    else if (mu_val)
        us = json_pack("{s:s, s:{s:O}}", "type", "RollingUpdate", "rollingUpdate", "maxUnavailable",
                       mu_val);
    json_decref(mu_val);
    if (!us)
        return KC_OK; /* the manifest's (RollingUpdate, the API's defaults) */
    return json_object_set_new(json_object_get(ds, "spec"), "updateStrategy", us) == 0 ? KC_OK
                                                                                       : OOM(t);
}

/* Appends spec tolerations not already present (the manifests' nvidia.com/gpu toleration stays,
 * so a list without it cannot keep the pods off the GPU nodes). */
static kc_code apply_tolerations(op_tctx *t, json_t *ps, const json_t *tols)
{
    if (!tols || json_is_null(tols))
        return KC_OK;
    if (!json_is_array(tols))
        return kc_err_set(t->err, KC_EINVALID, "spec.daemonsets.tolerations: must be a list");
    size_t i;
    json_t *tol;
    json_array_foreach(tols, i, tol)
    {
        if (!json_is_object(tol))
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.daemonsets.tolerations[%zu]: must be an object", i);
        const char *op = json_string_value(json_object_get(tol, "operator"));
        json_t *ts = json_object_get(tol, "tolerationSeconds");
        if (op && strcmp(op, "Exists") != 0 && strcmp(op, "Equal") != 0)
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.daemonsets.tolerations[%zu].operator: \"%s\" is not one of "
                              "Exists, Equal",
                              i, op);
        if (ts && !json_is_null(ts) && !json_is_integer(ts))
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.daemonsets.tolerations[%zu].tolerationSeconds: must be an "
                              "integer",
                              i);
    }
    json_t *dst = json_object_get(ps, "tolerations");
    if (!json_is_array(dst)) {
        dst = json_array();
        if (!dst || json_object_set_new(ps, "tolerations", dst) != 0)
            return OOM(t);
    }
    json_array_foreach(tols, i, tol)
    {
        bool dup = false;
        for (size_t j = 0; j < json_array_size(dst) && !dup; j++)
            dup = json_equal(json_array_get(dst, j), tol);
        if (!dup && json_array_append(dst, tol) != 0)
            return OOM(t);
    }
    return KC_OK;
}

static kc_code apply_host_paths(op_tctx *t, json_t *ds)
{
    const json_t *hp;
    kc_code rc = op_spec_obj(t->spec, "hostPaths", "spec", &hp, t->err);
    if (rc != KC_OK || !hp)
        return rc;
    const char *root, *install, *kubelet;
    rc = op_spec_str(hp, "rootFS", "spec.hostPaths", &root, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(hp, "driverInstallDir", "spec.hostPaths", &install, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(hp, "kubeletRootDir", "spec.hostPaths", &kubelet, t->err);
    if (rc != KC_OK)
        return rc;
    if (kubelet && kubelet[0] != '/')
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.hostPaths.kubeletRootDir: \"%s\" is not an absolute path", kubelet);
    if (kubelet) {
        /* The kubelet's device-plugin and pod-resources sockets live under its root dir. */
        static const char *const vols[][2] = {{"device-plugin", "device-plugins"},
                                              {"pod-gpu-resources", "pod-resources"}};
        for (size_t i = 0; i < 2; i++) {
            char p[4096];
            size_t n = strlen(kubelet);
            snprintf(p, sizeof p, "%.*s/%s", (int)(n > 1 && kubelet[n - 1] == '/' ? n - 1 : n),
                     kubelet, vols[i][1]);
            if (op_volume_host_path(ds, vols[i][0], p) != KC_OK)
                return OOM(t);
        }
    }
    if (root && root[0] != '/')
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.hostPaths.rootFS: \"%s\" is not an absolute path", root);
    if (install && install[0] != '/')
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.hostPaths.driverInstallDir: \"%s\" is not an absolute path",
                          install);
    if ((root && op_volume_host_path(ds, "host-root", root) != KC_OK) ||
        (install && op_volume_host_path(ds, "driver-install-dir", install) != KC_OK))
        return OOM(t);
    return KC_OK;
}

kc_code op_apply_daemonset_common(op_tctx *t, json_t *ds, bool is_driver)
{
    json_t *ps = op_pod_spec(ds);
    json_t *tmeta =
        json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "metadata");
    if (!ps || !json_is_object(tmeta))
        return kc_err_set(t->err, KC_EINVALID, "%s: a DaemonSet manifest has no pod template",
                          t->state);
    const json_t *dsets;
    kc_code rc = op_spec_obj(t->spec, "daemonsets", "spec", &dsets, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *selector =
        json_object_get(json_object_get(json_object_get(ds, "spec"), "selector"), "matchLabels");
    if (dsets) {
        rc = merge_string_map(t, tmeta, "labels", json_object_get(dsets, "labels"),
                              "spec.daemonsets.labels", selector);
        if (rc == KC_OK)
            rc = merge_string_map(t, tmeta, "annotations", json_object_get(dsets, "annotations"),
                                  "spec.daemonsets.annotations", NULL);
        if (rc == KC_OK)
            rc = apply_tolerations(t, ps, json_object_get(dsets, "tolerations"));
        if (rc != KC_OK)
            return rc;
        const char *pc;
        rc = op_spec_str(dsets, "priorityClassName", "spec.daemonsets", &pc, t->err);
        if (rc != KC_OK)
            return rc;
        if (pc && !op_valid_name(pc))
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.daemonsets.priorityClassName: \"%s\" is not a valid name", pc);
        if (pc && json_object_set_new(ps, "priorityClassName", json_string(pc)) != 0)
            return OOM(t);
        json_t *psc = json_object_get(dsets, "podSecurityContext");
        if (psc && !json_is_null(psc)) {
            if (!json_is_object(psc))
                return kc_err_set(t->err, KC_EINVALID,
                                  "spec.daemonsets.podSecurityContext: must be an object");
            if (json_object_size(psc) > 0 && json_object_set(ps, "securityContext", psc) != 0)
                return OOM(t);
        }
    }
    rc = apply_update_strategy(t, ds, dsets, is_driver);
    if (rc != KC_OK)
        return rc;

    /* operator.runtimeClass, on the DaemonSets whose manifest names a RuntimeClass. */
    const json_t *op;
    const char *rclass = NULL;
    rc = op_spec_obj(t->spec, "operator", "spec", &op, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(op, "runtimeClass", "spec.operator", &rclass, t->err);
    if (rc != KC_OK)
        return rc;
    if (rclass && !op_valid_name(rclass))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.operator.runtimeClass: \"%s\" is not a valid RuntimeClass name",
                          rclass);
    if (rclass && json_object_get(ps, "runtimeClassName") &&
        json_object_set_new(ps, "runtimeClassName", json_string(rclass)) != 0)
        return OOM(t);

    rc = apply_host_paths(t, ds);
    if (rc != KC_OK)
        return rc;
    return apply_validator_image(t, ds);
}

/* ---- device-plugin configuration (device plugin, MPS daemon, GFD) ---- */

kc_code op_mig_strategy(op_tctx *t, const char **out)
{
    const json_t *mig;
    kc_code rc = op_spec_obj(t->spec, "mig", "spec", &mig, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(mig, "strategy", "spec.mig", out, t->err);
    if (rc != KC_OK)
        return rc;
    if (!*out)
        *out = "single";
    if (strcmp(*out, "none") != 0 && strcmp(*out, "single") != 0 && strcmp(*out, "mixed") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.mig.strategy: \"%s\" is not one of none, single, mixed", *out);
    return KC_OK;
}

kc_code op_apply_plugin_config(op_tctx *t, json_t *ds, const char *main, bool mig_strategy)
{
    json_t *mc = op_find_container(ds, main);
    if (mig_strategy && mc) {
        const char *strategy;
        kc_code rc = op_mig_strategy(t, &strategy);
        if (rc != KC_OK)
            return rc;
        if (op_env_set(mc, "MIG_STRATEGY", strategy) != KC_OK)
            return OOM(t);
    }
    const json_t *dp, *cfg;
    const char *name = NULL, *def = NULL;
    kc_code rc = op_spec_obj(t->spec, "devicePlugin", "spec", &dp, t->err);
    if (rc == KC_OK)
        rc = op_spec_obj(dp, "config", "spec.devicePlugin", &cfg, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(cfg, "name", "spec.devicePlugin.config", &name, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(cfg, "default", "spec.devicePlugin.config", &def, t->err);
    if (rc != KC_OK)
        return rc;
    if (name && !op_valid_name(name))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.devicePlugin.config.name: \"%s\" is not a valid ConfigMap name",
                          name);
    if (!name) {
        /* No config: the plugin runs on its built-in defaults. */
        op_remove_container(ds, "config-manager-init");
        op_remove_container(ds, "config-manager");
        op_remove_volume(ds, "config");
        op_remove_volume(ds, "active-config");
        if (mc)
            op_env_remove(mc, "CONFIG_FILE");
        json_object_del(op_pod_spec(ds), "shareProcessNamespace");
        return KC_OK;
    }
    if (op_volume_config_map(ds, "config", name) != KC_OK)
        return OOM(t);
    static const char *const managers[] = {"config-manager-init", "config-manager"};
    for (size_t i = 0; i < 2; i++) {
        json_t *c = op_find_container(ds, managers[i]);
        if (c && op_env_set(c, "DEFAULT_CONFIG", def ? def : "") != KC_OK)
            return OOM(t);
    }
    return KC_OK;
}
