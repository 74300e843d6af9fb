/* op_transform_plugin: the device plugin, the MPS control daemon and GPU feature discovery:
 * images, MIG_STRATEGY, the device-plugin config, the MPS root. */
#include <stdio.h>
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

/* devicePlugin.mps.root: the host folder of the MPS daemon's pipes and shared memory. */
static kc_code apply_mps_root(op_tctx *t, json_t *ds, json_t *main)
{
    const json_t *mps;
    const char *root;
    kc_code rc = op_spec_path(t->spec, "devicePlugin.mps", &mps, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(mps, "root", "spec.devicePlugin.mps", &root, t->err);
    if (rc != KC_OK || !root)
        return rc;
    if (root[0] != '/' || strpbrk(root, " \t\n") || strstr(root, ".."))
        return kc_err_set(t->err, KC_EINVALID,
                          "spec.devicePlugin.mps.root: \"%s\" is not an absolute path", root);
    char shm[4096];
    snprintf(shm, sizeof shm, "%s/shm", strcmp(root, "/") == 0 ? "" : root);
    json_t *env_mps = main ? op_find_named(json_object_get(main, "env"), "MPS_ROOT") : NULL;
    if (op_volume_host_path(ds, "mps-root", root) != KC_OK ||
        op_volume_host_path(ds, "mps-shm", shm) != KC_OK ||
        (env_mps && op_env_set(main, "MPS_ROOT", root) != KC_OK))
        return OOM(t);
    return KC_OK;
}

kc_code op_transform_device_plugin(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"nvidia-device-plugin", "config-manager-init",
                                       "config-manager", NULL};
    kc_code rc = op_apply_plugin_config(t, ds, ctrs[0], true);
    if (rc == KC_OK)
        rc = apply_mps_root(t, ds, op_find_container(ds, ctrs[0]));
    if (rc != KC_OK)
        return rc;
    op_component c = {.section = "devicePlugin",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    return op_apply_component(t, ds, &c);
}

/* The MPS daemon is part of the device plugin: its image, pull settings and resources. */
kc_code op_transform_mps(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"mps-control-daemon-ctr", "mps-control-daemon-mounts",
                                       "config-manager-init", "config-manager", NULL};
    kc_code rc = op_apply_plugin_config(t, ds, ctrs[0], true);
    if (rc == KC_OK)
        rc = apply_mps_root(t, ds, op_find_container(ds, ctrs[0]));
    if (rc != KC_OK)
        return rc;
    op_component c = {.section = "devicePlugin",
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = false,
                      .args = OP_ARGS_NONE};
    return op_apply_component(t, ds, &c);
}

kc_code op_transform_gfd(op_tctx *t)
{
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"gpu-feature-discovery", "config-manager-init",
                                       "config-manager", NULL};
    kc_code rc = op_apply_plugin_config(t, ds, ctrs[0], true);
    if (rc != KC_OK)
        return rc;
    op_component c = {.section = "gfd",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    return op_apply_component(t, ds, &c);
}
