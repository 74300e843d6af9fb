/* fuzz_json_patch: RFC 6902 apply on two JSON documents (document, operations); checks atomicity:
 * the document is never modified and *out is set exactly on success. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_patch_common.h"
#include "kc_patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc, *ops;
    if (!fuzz_split(data, size, &doc, &ops))
        return 0;
    json_t *before = json_deep_copy(doc);
    json_t *out = NULL;
    kc_err err = {0};
    kc_code rc = kc_json_patch_apply(doc, ops, &out, &err);
    if (!json_equal(before, doc) || (rc == KC_OK) != (out != NULL) ||
        (rc != KC_OK && err.code != rc))
        abort();
    json_decref(out);
    /* The pointer helpers on the operations' paths. */
    if (json_is_array(ops)) {
        const char *p = json_string_value(json_object_get(json_array_get(ops, 0), "path"));
        json_t *found;
        if (p && kc_json_pointer_resolve(doc, p, &found, NULL) == KC_OK && !found)
            abort();
        if (p && kc_json_pointer_set(&before, p, json_true(), NULL) == KC_OK &&
            (kc_json_pointer_resolve(before, p, &found, NULL) != KC_OK || !json_is_true(found)) &&
            strlen(p) > 0 && p[strlen(p) - 1] != '-')
            abort();
    }
    json_decref(before);
    json_decref(doc);
    json_decref(ops);
    return 0;
}
