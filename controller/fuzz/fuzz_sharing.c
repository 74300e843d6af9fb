/* Fuzz target: the operator's device-plugin sharing config check must never crash or leak, and a
 * refusal always says why. The input is a config (one ConfigMap key's value); it is also checked
 * through the key selection, as the label's key of a one-key ConfigMap. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_sharing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kc_err err;
    static const char *const strategies[] = {NULL, "single", "mixed"};
    for (size_t i = 0; i < 3; i++) {
        kc_code rc = kc_sharing_validate((const char *)data, size, strategies[i], &err);
        if (rc != KC_OK && rc != KC_ENOMEM && !err.msg[0])
            abort();
    }
    /* Not valid UTF-8 (no JSON string, so never a ConfigMap's value): no ConfigMap. */
    json_t *cm = json_pack("{s:{s:s%}}", "data", "k", (const char *)data, size);
    if (cm) {
        kc_sharing_in in = {.ns = "ns", .cm_name = "cm", .cm = cm, .label = "k"};
        const char *key = NULL;
        kc_code rc = kc_sharing_check(&in, &key, &err);
        if (rc == KC_OK && (!key || strcmp(key, "k")))
            abort();
        if (rc != KC_OK && rc != KC_ENOMEM && !err.msg[0])
            abort();
    }
    json_decref(cm);
    return 0;
}
