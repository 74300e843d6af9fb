/* fuzz_smp: strategic merge patch on two JSON documents (original, patch); the first byte picks the
 * kind. Checks that the original is untouched and *out is set exactly on success. */
#include <stdlib.h>

#include "fuzz_patch_common.h"
#include "kc_patch.h"

static const char *const kinds[] = {"Pod",        "DaemonSet", "Deployment", "Node",
                                    "Service",    "ConfigMap", "CronJob",    "ServiceAccount",
                                    "MyResource", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *orig, *patch;
    if (size < 1)
        return 0;
    const char *kind = kinds[data[0] % (sizeof(kinds) / sizeof(kinds[0]))];
    if (!fuzz_split(data + 1, size - 1, &orig, &patch))
        return 0;
    json_t *before = json_deep_copy(orig);
    json_t *out = NULL;
    kc_err err = {0};
    kc_code rc = kc_smp_apply(json_is_object(orig) ? orig : NULL, patch, kind, &out, &err);
    if (!json_equal(before, orig) || (rc == KC_OK) != (out != NULL) ||
        (rc != KC_OK && err.code != rc))
        abort();
    json_decref(out);
    json_decref(before);
    json_decref(orig);
    json_decref(patch);
    return 0;
}
