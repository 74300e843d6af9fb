/* Fuzz target: device-plugin config parsing and resource computation must never crash or leak. */
#include <stddef.h>
#include <stdint.h>

#include "ns_dpconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ns_dpconfig *cfg = NULL;
    kc_err err;
    if (ns_dpconfig_parse((const char *)data, size, "fuzz", &cfg, &err) != KC_OK)
        return 0;
    const kc_gpu_model *a100 = kc_gpu_find("A100-SXM4-40GB");
    kc_mp_gpu_state states[2] = {{0}};
    states[1].mig_enabled = 1;
    states[1].counts[0] = 7;
    for (int s = NS_MIG_NONE; s <= NS_MIG_MIXED; s++) {
        json_t *res = NULL;
        if (ns_dp_advertise(cfg, (ns_mig_strategy)s, a100, 2, states, &res, &err) == KC_OK)
            json_decref(res);
    }
    ns_dpconfig_free(cfg);
    return 0;
}
