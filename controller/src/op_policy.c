/* op_policy: the active ClusterPolicy and the gating settings its spec implies. */
#include "op_policy.h"

#include <stdlib.h>
#include <string.h>

#include "op_render.h"

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

const json_t *op_policy_active(const json_t *items)
{
    const json_t *best = NULL;
    size_t i;
    const json_t *p;
    json_array_foreach(items, i, p)
    {
        /* Once ignored, always ignored: the active one going (helm uninstall deletes it just
         * before the operator) must not hand the cluster to another. */
        const char *st = json_string_value(json_object_get(json_object_get(p, "status"), "state"));
        if (st && !strcmp(st, "ignored"))
            continue;
        if (!best) {
            best = p;
            continue;
        }
        /* RFC 3339 timestamps of one format compare as strings. */
        const char *a = meta_str(p, "creationTimestamp"), *b = meta_str(best, "creationTimestamp");
        int c = strcmp(a ? a : "", b ? b : "");
        if (c < 0 ||
            (c == 0 && strcmp(meta_str(p, "name") ?: "", meta_str(best, "name") ?: "") < 0))
            best = p;
    }
    return best;
}

bool op_spec_enabled(const json_t *spec, const char *section, bool def)
{
    const json_t *v = json_object_get(json_object_get(spec, section), "enabled");
    return json_is_boolean(v) ? json_is_true(v) : def;
}

json_t *op_policy_owner_ref(const json_t *obj)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", "nvidia.com/v1", "kind",
                     "ClusterPolicy", "name", meta_str(obj, "name") ?: "", "uid",
                     meta_str(obj, "uid") ?: "", "controller", 1, "blockOwnerDeletion", 1);
}

kc_code op_policy_gate(const json_t *obj, const char *ns, const json_t *owner,
                       const char *operator_image, op_gate_policy *gate, char **validator_image_out,
                       kc_err *err)
{
    const json_t *spec = json_object_get(obj, "spec");
    memset(gate, 0, sizeof(*gate));
    *validator_image_out = NULL;
    gate->ns = ns;
    gate->owner = owner;
    gate->enabled[OP_STAGE_DRIVER] = op_spec_enabled(spec, "driver", true);
    gate->enabled[OP_STAGE_TOOLKIT] = op_spec_enabled(spec, "toolkit", true);
    gate->enabled[OP_STAGE_PLUGIN] = op_spec_enabled(spec, "devicePlugin", true);
    gate->enabled[OP_STAGE_MIG] = op_spec_enabled(spec, "migManager", true);
    gate->followers_enabled = true;
    const json_t *mm_cfg = json_object_get(json_object_get(spec, "migManager"), "config");
    const json_t *def = json_object_get(mm_cfg, "default");
    /* NVIDIA's default is all-disabled; any named config is allowed here. */
    gate->mig_default = json_is_string(def) ? json_string_value(def) : "all-disabled";
    const json_t *rc = json_object_get(json_object_get(spec, "operator"), "runtimeClass");
    gate->runtime_class =
        json_is_string(rc) && *json_string_value(rc) ? json_string_value(rc) : "nvidia";
    const json_t *val = json_object_get(spec, "validator");
    static const char *const subs[OP_STAGE_COUNT] = {"driver", "toolkit", "plugin", "cuda"};
    for (int s = 0; s < OP_STAGE_COUNT; s++) {
        const json_t *env = json_object_get(json_object_get(val, subs[s]), "env");
        gate->validator_env[s] = json_is_array(env) ? env : json_object_get(val, "env");
    }
    char *img = op_image(val, "spec.validator",
                         operator_image ? operator_image : OP_DEFAULT_VALIDATOR_IMAGE, err);
    if (!img)
        return err ? err->code : KC_EINVALID;
    *validator_image_out = img;
    gate->validator_image = img;
    return KC_OK;
}
