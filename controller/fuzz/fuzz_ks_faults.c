/* Fuzz target: kubesim's fault-injection rule parser (ks_fault_parse) on arbitrary JSON. Checks
 * that a rule set is accepted whole or refused with a message naming the field, never leaking.
 * Input: the JSON text of a rule set ({"rules": [...]}). Needs kubesim_core linked in. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ks_fault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    ks_fault_set *fs = NULL;
    kc_err err;
    kc_err_clear(&err);
    kc_code rc = ks_fault_parse(doc, &fs, &err);
    if (rc == KC_OK) {
        /* accepted: one rule per array entry, at most the limit */
        json_t *rules = json_object_get(doc, "rules");
        if (!fs || ks_fault_set_len(fs) != json_array_size(rules) ||
            ks_fault_set_len(fs) > KS_FAULT_MAX_RULES)
            abort();
    } else {
        /* refused: nothing to free, and a message naming where */
        if (fs || !err.msg[0] ||
            (strncmp(err.msg, "rules", 5) != 0 && strncmp(err.msg, "faults:", 7) != 0 &&
             !strchr(err.msg, ':')))
            abort();
    }
    ks_fault_set_free(fs);
    json_decref(doc);
    return 0;
}
