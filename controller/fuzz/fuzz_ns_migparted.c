/* Fuzz target: mig-parted config parsing and resolution on a mixed node must never crash or leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "ns_migparted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ns_migparted *mp = NULL;
    kc_err err;
    if (ns_migparted_parse((const char *)data, size, "fuzz", &mp, &err) != KC_OK)
        return 0;
    const ns_gpu_model *models[4] = {ns_gpu_find("A100-SXM4-40GB"), ns_gpu_find("A30"),
                                     ns_gpu_find("H100-NVL"), ns_gpu_find("Tesla-T4")};
    for (size_t c = 0; c < mp->n_configs; c++) {
        ns_mp_gpu_state states[4] = {{0}};
        ns_migparted_apply(mp, mp->configs[c].name, models, 4, states, &err);
    }
    ns_migparted_free(mp);
    return 0;
}
