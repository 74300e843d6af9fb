/* op_transform_validation: the container-toolkit and operator-validation states: toolkit image,
 * install dir, runtime and CDI env; validator env per validation and the driver root. */
#include <stdio.h>
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

/* Where the driver's libraries are for a driver-validation container, which runs outside the
 * nvidia runtime: under the containerized driver's root, or under the host's root (mounted at
 * /host) when the driver is installed on the host. gpu-validator looks for libnvidia-ml.so.1 and
 * libcuda.so.1 in that root's library directories; naming only NVML leaves libcuda.so.1 unfound. */
#define DRIVER_ROOT_CONTAINER "/run/nvidia/driver"
#define DRIVER_ROOT_HOST      "/host"

kc_code op_set_driver_root(op_tctx *t, json_t *container)
{
    bool driver;
    kc_code rc = op_section_enabled(t->spec, "driver", true, &driver, t->err);
    if (rc != KC_OK || !container)
        return rc;
    /* An explicit hostPaths.driverInstallDir is mounted at /run/nvidia/driver: keep that path. */
    const json_t *hp;
    const char *install = NULL;
    rc = op_spec_obj(t->spec, "hostPaths", "spec", &hp, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(hp, "driverInstallDir", "spec.hostPaths", &install, t->err);
    if (rc != KC_OK)
        return rc;
    const char *root = driver || install ? DRIVER_ROOT_CONTAINER : DRIVER_ROOT_HOST;
    return op_env_set(container, "GPU_VALIDATOR_DRIVER_ROOT", root) == KC_OK ? KC_OK : OOM(t);
}

/* validator.env, then validator.<sub>.env, into one validator container. */
static kc_code validator_env(op_tctx *t, json_t *container, const char *sub)
{
    const json_t *val, *subsec = NULL;
    kc_code rc = op_spec_obj(t->spec, "validator", "spec", &val, t->err);
    if (rc == KC_OK)
        rc = op_env_merge(container, val ? json_object_get(val, "env") : NULL, "spec.validator.env",
                          t->err);
    if (rc != KC_OK || !sub)
        return rc;
    char path[64];
    snprintf(path, sizeof path, "spec.validator.%s", sub);
    rc = op_spec_obj(val, sub, "spec.validator", &subsec, t->err);
    if (rc != KC_OK)
        return rc;
    snprintf(path, sizeof path, "spec.validator.%s.env", sub);
    return op_env_merge(container, subsec ? json_object_get(subsec, "env") : NULL, path, t->err);
}

static bool valid_abs_path(const char *p)
{
    return p && p[0] == '/' && !strstr(p, "..") && !strpbrk(p, " \t\n");
}

kc_code op_transform_toolkit(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    const json_t *tk, *op, *cdi;
    const char *install, *runtime, *rclass;
    kc_code rc;
    if ((rc = op_spec_obj(t->spec, "toolkit", "spec", &tk, t->err)) != KC_OK ||
        (rc = op_spec_str(tk, "installDir", "spec.toolkit", &install, t->err)) != KC_OK ||
        (rc = op_spec_obj(t->spec, "operator", "spec", &op, t->err)) != KC_OK ||
        (rc = op_spec_str(op, "defaultRuntime", "spec.operator", &runtime, t->err)) != KC_OK ||
        (rc = op_spec_str(op, "runtimeClass", "spec.operator", &rclass, t->err)) != KC_OK ||
        (rc = op_spec_obj(t->spec, "cdi", "spec", &cdi, t->err)) != KC_OK)
        return rc;
    json_t *ctr = op_find_container(ds, "nvidia-container-toolkit-ctr");
    if (install) {
        if (!valid_abs_path(install))
            return kc_err_set(t->err, KC_EINVALID,
                              "spec.toolkit.installDir: \"%s\" is not an absolute path", install);
        /* Same path on the host and in the container: the runtime config names host paths. */
        json_t *mount = op_find_named(json_object_get(ctr, "volumeMounts"), "toolkit-install-dir");
        if (op_volume_host_path(ds, "toolkit-install-dir", install) != KC_OK ||
            (mount && json_object_set_new(mount, "mountPath", json_string(install)) != 0) ||
            (ctr && op_env_set(ctr, "ROOT", install) != KC_OK))
            return OOM(t);
    }
    if (runtime && strcmp(runtime, "containerd") != 0 && strcmp(runtime, "docker") != 0 &&
        strcmp(runtime, "crio") != 0)
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.operator.defaultRuntime: \"%s\" is not one of containerd, docker, "
                          "crio",
                          runtime);
    /* The runtime the GPU nodes report wins over the deprecated defaultRuntime, which only
     * fills in when no GPU node names a known one (NVIDIA's operator falls back to containerd).
     * Set after toolkit.env, as NVIDIA's operator does: the nodes decide. */
    const char *rt = t->ctx->runtime && *t->ctx->runtime ? t->ctx->runtime
                     : runtime                           ? runtime
                                                         : "containerd";
    /* The runtime handler the toolkit registers must match the RuntimeClass's handler. */
    if (ctr && rclass && op_env_set(ctr, "CONTAINERD_RUNTIME_CLASS", rclass) != KC_OK)
        return OOM(t);
    if (cdi && ctr) {
        bool enabled, def;
        if ((rc = op_spec_bool(cdi, "enabled", "spec.cdi", true, &enabled, t->err)) != KC_OK ||
            (rc = op_spec_bool(cdi, "default", "spec.cdi", false, &def, t->err)) != KC_OK)
            return rc;
        if (op_env_set(ctr, "CDI_ENABLED", enabled ? "true" : "false") != KC_OK ||
            (enabled && def && op_env_set(ctr, "NVIDIA_CONTAINER_RUNTIME_MODE", "cdi") != KC_OK))
            return OOM(t);
    }

    json_t *dv = op_find_container(ds, "driver-validation");
    if (dv) {
        if ((rc = op_set_driver_root(t, dv)) != KC_OK ||
            (rc = validator_env(t, dv, "driver")) != KC_OK)
            return rc;
    }
    static const char *const ctrs[] = {"nvidia-container-toolkit-ctr", NULL};
    op_component c = {.section = "toolkit",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    if ((rc = op_apply_component(t, ds, &c)) != KC_OK)
        return rc;
    return ctr && op_env_set(ctr, "RUNTIME", rt) != KC_OK ? OOM(t) : KC_OK;
}

kc_code op_transform_validation(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const struct {
        const char *container, *sub;
    } subs[] = {
        {"driver-validation", "driver"},
        {"toolkit-validation", "toolkit"},
        {"cuda-validation", "cuda"},
        {"nvidia-operator-validator", NULL},
    };
    kc_code rc = KC_OK;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        json_t *c = op_find_container(ds, subs[i].container);
        if (!c)
            continue;
        if (strcmp(subs[i].container, "driver-validation") == 0 &&
            (rc = op_set_driver_root(t, c)) != KC_OK)
            return rc;
        if ((rc = validator_env(t, c, subs[i].sub)) != KC_OK)
            return rc;
    }
    /* spec.validator's resources and pull secrets (its image is set on every validator
     * container already); the main container runs a script, so args stay. */
    json_t *main = op_find_container(ds, "nvidia-operator-validator");
    static const char *const ctrs[] = {"nvidia-operator-validator", NULL};
    op_component c = {.section = "validator",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .def_image = json_string_value(json_object_get(main, "image")),
                      .env = false,
                      .args = OP_ARGS_NONE};
    return op_apply_component(t, ds, &c);
}
