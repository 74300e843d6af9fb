/* Fuzz target: mig-parted config parsing and resolution on a mixed node must never crash or leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "kc_migparted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kc_migparted *mp = NULL;
    kc_err err;
    if (kc_migparted_parse((const char *)data, size, "fuzz", &mp, &err) != KC_OK)
        return 0;
    const kc_gpu_model *models[4] = {kc_gpu_find("A100-SXM4-40GB"), kc_gpu_find("A30"),
                                     kc_gpu_find("H100-NVL"), kc_gpu_find("Tesla-T4")};
    for (size_t c = 0; c < mp->n_configs; c++) {
        kc_mp_gpu_state states[4] = {{0}};
        kc_migparted_apply(mp, mp->configs[c].name, models, 4, states, &err);
    }
    kc_migparted_free(mp);
    return 0;
}
