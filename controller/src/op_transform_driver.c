/* op_transform_driver: the driver state: driver and driver-manager images, env and args, the
 * driver manager's eviction and drain settings from driver.upgradePolicy, kernel module type,
 * startup probe, secretEnv, RDMA. */
#include <stdio.h>
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

#define DRIVER_CTR  "nvidia-driver-ctr"
#define MANAGER_CTR "k8s-driver-manager"

static kc_code set_bool_env(op_tctx *t, json_t *c, const char *name, bool v)
{
    return op_env_set(c, name, v ? "true" : "false") == KC_OK ? KC_OK : OOM(t);
}

static kc_code get_int(op_tctx *t, const json_t *sec, const char *key, const char *path, int def,
                       long long *out)
{
    json_t *v = sec ? json_object_get(sec, key) : NULL;
    *out = def;
    if (!v || json_is_null(v))
        return KC_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return kc_err_set(t->err, KC_EINVALID, "%s.%s: must be a non-negative integer", path, key);
    *out = json_integer_value(v);
    return KC_OK;
}

/* force/timeout/deleteEmptyDir of a podDeletion or drain section as the driver manager's env. */
static kc_code eviction_env(op_tctx *t, json_t *mgr, const json_t *sec, const char *path)
{
    bool force, empty;
    long long timeout;
    kc_code rc;
    if ((rc = op_spec_bool(sec, "force", path, false, &force, t->err)) != KC_OK ||
        (rc = op_spec_bool(sec, "deleteEmptyDir", path, false, &empty, t->err)) != KC_OK ||
        (rc = get_int(t, sec, "timeoutSeconds", path, 300, &timeout)) != KC_OK)
        return rc;
    char secs[32];
    snprintf(secs, sizeof secs, "%llds", timeout);
    if ((rc = set_bool_env(t, mgr, "DRAIN_USE_FORCE", force)) != KC_OK ||
        (rc = set_bool_env(t, mgr, "DRAIN_DELETE_EMPTYDIR_DATA", empty)) != KC_OK)
        return rc;
    return op_env_set(mgr, "DRAIN_TIMEOUT_SECONDS", secs) == KC_OK ? KC_OK : OOM(t);
}

/* driver.upgradePolicy as the driver manager's env: before it unloads a driver it evicts the GPU
 * pods (podDeletion) and, with drain.enable, drains the node (drain wins over podDeletion for
 * the shared force/timeout/emptyDir settings). With autoUpgrade the operator's upgrade flow has
 * evicted and drained already, so the manager does neither. */
static kc_code apply_upgrade_policy(op_tctx *t, json_t *mgr)
{
    const json_t *up, *pd, *drain;
    kc_code rc = op_spec_path(t->spec, "driver.upgradePolicy", &up, t->err);
    if (rc == KC_OK)
        rc = op_spec_obj(up, "podDeletion", "spec.driver.upgradePolicy", &pd, t->err);
    if (rc == KC_OK)
        rc = op_spec_obj(up, "drain", "spec.driver.upgradePolicy", &drain, t->err);
    if (rc != KC_OK || !up || !mgr)
        return rc;
    bool autoup, enable = false;
    const char *selector = NULL;
    if ((rc = op_spec_bool(up, "autoUpgrade", "spec.driver.upgradePolicy", false, &autoup,
                           t->err)) != KC_OK)
        return rc;
    if (pd && (rc = eviction_env(t, mgr, pd, "spec.driver.upgradePolicy.podDeletion")) != KC_OK)
        return rc;
    if (drain) {
        const char *path = "spec.driver.upgradePolicy.drain";
        if ((rc = op_spec_bool(drain, "enable", path, false, &enable, t->err)) != KC_OK ||
            (rc = op_spec_str(drain, "podSelector", path, &selector, t->err)) != KC_OK)
            return rc;
        if (enable && (rc = eviction_env(t, mgr, drain, path)) != KC_OK)
            return rc;
        if ((rc = set_bool_env(t, mgr, "ENABLE_AUTO_DRAIN", enable && !autoup)) != KC_OK ||
            op_env_set(mgr, "DRAIN_POD_SELECTOR_LABEL", selector ? selector : "") != KC_OK)
            return rc != KC_OK ? rc : OOM(t);
    }
    if (autoup && ((rc = set_bool_env(t, mgr, "ENABLE_GPU_POD_EVICTION", false)) != KC_OK ||
                   (rc = set_bool_env(t, mgr, "ENABLE_AUTO_DRAIN", false)) != KC_OK))
        return rc;
    return KC_OK;
}

/* driver.rdma: GPUDirect RDMA through the MOFED driver (containerized, or the host's). */
static kc_code apply_rdma(op_tctx *t, const json_t *drv, json_t *ctr)
{
    const json_t *rdma;
    bool on, host;
    kc_code rc = op_spec_obj(drv, "rdma", "spec.driver", &rdma, t->err);
    if (rc == KC_OK)
        rc = op_spec_bool(rdma, "enabled", "spec.driver.rdma", false, &on, t->err);
    if (rc == KC_OK)
        rc = op_spec_bool(rdma, "useHostMofed", "spec.driver.rdma", false, &host, t->err);
    if (rc != KC_OK || !on || !ctr)
        return rc;
    if ((rc = set_bool_env(t, ctr, "ENABLE_RDMA", true)) != KC_OK ||
        (rc = set_bool_env(t, ctr, "USE_HOST_MOFED", host)) != KC_OK)
        return rc;
    return KC_OK;
}

static kc_code apply_kernel_module_type(op_tctx *t, const json_t *drv, json_t *ctr)
{
    const char *type;
    bool open_modules;
    kc_code rc = op_spec_str(drv, "kernelModuleType", "spec.driver", &type, t->err);
    if (rc == KC_OK)
        rc = op_spec_bool(drv, "useOpenKernelModules", "spec.driver", false, &open_modules, t->err);
    if (rc != KC_OK)
        return rc;
    if (type && strcmp(type, "auto") != 0 && strcmp(type, "open") != 0 &&
        strcmp(type, "proprietary") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.driver.kernelModuleType: \"%s\" is not one of auto, open, "
                          "proprietary",
                          type);
    /* useOpenKernelModules is the deprecated spelling of kernelModuleType: open. */
    if (!type && open_modules)
        type = "open";
    if (type && ctr && op_env_set(ctr, "KERNEL_MODULE_TYPE", type) != KC_OK)
        return OOM(t);
    return KC_OK;
}

/* driver.startupProbe's timings on the driver container's startup probe. */
static kc_code apply_startup_probe(op_tctx *t, const json_t *drv, json_t *ctr)
{
    const json_t *sp;
    kc_code rc = op_spec_obj(drv, "startupProbe", "spec.driver", &sp, t->err);
    json_t *probe = json_object_get(ctr, "startupProbe");
    if (rc != KC_OK || !sp || !json_is_object(probe))
        return rc;
    static const char *const keys[] = {"initialDelaySeconds", "timeoutSeconds", "periodSeconds",
                                       "successThreshold", "failureThreshold"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(sp, keys[i]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.driver.startupProbe.%s: must be a non-negative integer",
                              keys[i]);
        if (json_object_set(probe, keys[i], v) != 0)
            return OOM(t);
    }
    return KC_OK;
}

/* driver.secretEnv: a Secret whose keys become env of the driver container. */
static kc_code apply_secret_env(op_tctx *t, const json_t *drv, json_t *ctr)
{
    const char *name;
    kc_code rc = op_spec_str(drv, "secretEnv", "spec.driver", &name, t->err);
    if (rc != KC_OK || !name || !ctr)
        return rc;
    if (!op_valid_name(name))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.driver.secretEnv: \"%s\" is not a valid Secret name", name);
    json_t *from = json_object_get(ctr, "envFrom");
    if (!json_is_array(from)) {
        from = json_array();
        if (!from || json_object_set_new(ctr, "envFrom", from) != 0)
            return OOM(t);
    }
    if (json_array_append_new(from, json_pack("{s:{s:s}}", "secretRef", "name", name)) != 0)
        return OOM(t);
    return KC_OK;
}

/* Driver images are published per OS ("550.90.07-ubuntu22.04"): the tag gets the nodes' OS,
 * replacing an OS suffix it carries; a digest is left alone. */
static kc_code driver_os_tag(op_tctx *t, json_t *ctr)
{
    const char *img = json_string_value(json_object_get(ctr, "image"));
    if (!img || strchr(img, '@'))
        return KC_OK;
    const char *slash = strrchr(img, '/');
    const char *colon = strrchr(slash ? slash : img, ':');
    if (!colon)
        return KC_OK;
    static const char *const oses[] = {"-ubuntu", "-rhel",   "-rhcos", "-centos", "-sles",
                                       "-amzn",   "-debian", "-rocky", NULL};
    size_t keep = strlen(img);
    for (int i = 0; oses[i]; i++) {
        const char *at = strstr(colon, oses[i]);
        if (at && (size_t)(at - img) < keep) {
            const char *q = at + strlen(oses[i]);
            while (*q && (strchr("0123456789.", *q)))
                q++;
            if (!*q)
                keep = (size_t)(at - img);
        }
    }
    char buf[1024];
    snprintf(buf, sizeof(buf), "%.*s-%s", (int)keep, img, t->ctx->driver_os);
    return json_object_set_new(ctr, "image", json_string(buf)) == 0 ? KC_OK : OOM(t);
}

kc_code op_transform_driver(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    const json_t *drv;
    kc_code rc = op_spec_obj(t->spec, "driver", "spec", &drv, t->err);
    if (rc != KC_OK)
        return rc;
    json_t *ctr = op_find_container(ds, DRIVER_CTR);
    json_t *mgr = op_find_container(ds, MANAGER_CTR);
    if ((rc = apply_kernel_module_type(t, drv, ctr)) != KC_OK ||
        (rc = apply_startup_probe(t, drv, ctr)) != KC_OK ||
        (rc = apply_secret_env(t, drv, ctr)) != KC_OK || (rc = apply_rdma(t, drv, ctr)) != KC_OK ||
        (rc = apply_upgrade_policy(t, mgr)) != KC_OK)
        return rc;

    static const char *const driver_ctrs[] = {DRIVER_CTR, NULL};
    static const char *const manager_ctrs[] = {MANAGER_CTR, NULL};
    op_component driver = {.section = "driver",
                           .pod = true,
                           .containers = driver_ctrs,
                           .main = DRIVER_CTR,
                           .env = true,
                           .args = OP_ARGS_APPEND};
    op_component manager = {.section = "driver.manager",
                            .containers = manager_ctrs,
                            .main = MANAGER_CTR,
                            .env = true,
                            .args = OP_ARGS_NONE};
    rc = op_apply_component(t, ds, &driver);
    if (rc == KC_OK)
        rc = op_apply_component(t, ds, &manager);
    if (rc == KC_OK && ctr && t->ctx->driver_os && *t->ctx->driver_os)
        rc = driver_os_tag(t, ctr);
    return rc;
}
