/* op_transform_mig: the MIG manager: image, the mig-parted and GPU-clients ConfigMaps, its env
 * (WITH_REBOOT and the rest of migManager.env), host GPU clients with a host driver. */
#include <stdio.h>
#include <string.h>

#include "op_transform.h"

#define OOM(t) kc_err_set((t)->err, KC_ENOMEM, "%s: out of memory", (t)->state)

#define DEFAULT_MIG_CONFIG "default-mig-parted-config"

static kc_code config_name(op_tctx *t, const json_t *mm, const char *key, const char **out)
{
    const json_t *cfg;
    char path[64];
    snprintf(path, sizeof path, "spec.migManager.%s", key);
    kc_code rc = op_spec_obj(mm, key, "spec.migManager", &cfg, t->err);
    if (rc == KC_OK)
        rc = op_spec_str(cfg, "name", path, out, t->err);
    if (rc == KC_OK && *out && !op_valid_name(*out))
        rc = kc_err_set(t->err, KC_EINVALID, "%s.name: \"%s\" is not a valid ConfigMap name", path,
                        *out);
    return rc;
}

kc_code op_transform_mig_manager(op_tctx *t)
{
    const json_t *mm;
    const char *cfg = NULL, *clients = NULL;
    bool driver;
    kc_code rc;
    if ((rc = op_spec_obj(t->spec, "migManager", "spec", &mm, t->err)) != KC_OK ||
        (rc = config_name(t, mm, "config", &cfg)) != KC_OK ||
        (rc = config_name(t, mm, "gpuClientsConfig", &clients)) != KC_OK ||
        (rc = op_section_enabled(t->spec, "driver", true, &driver, t->err)) != KC_OK)
        return rc;
    /* The default layouts are created only when the policy names no ConfigMap of its own. */
    if (cfg && strcmp(cfg, DEFAULT_MIG_CONFIG) != 0)
        op_remove_object(t->objs, "ConfigMap", DEFAULT_MIG_CONFIG);
    json_t *ds = op_find_object(t->objs, "DaemonSet", NULL);
    if (!ds)
        return KC_OK;
    static const char *const ctrs[] = {"nvidia-mig-manager", NULL};
    json_t *ctr = op_find_container(ds, ctrs[0]);
    if ((cfg && op_volume_config_map(ds, "mig-parted-config", cfg) != KC_OK) ||
        (clients && op_volume_config_map(ds, "gpu-clients", clients) != KC_OK))
        return OOM(t);
    /* A host-installed driver has host services holding the GPUs; stop them for a change. */
    if (ctr && !driver && op_env_set(ctr, "WITH_SHUTDOWN_HOST_GPU_CLIENTS", "true") != KC_OK)
        return OOM(t);
    op_component c = {.section = "migManager",
                      .pod = true,
                      .containers = ctrs,
                      .main = ctrs[0],
                      .env = true,
                      .args = OP_ARGS_REPLACE};
    return op_apply_component(t, ds, &c);
}
