/* fuzz_yaml: kc_yaml_parse must never crash or leak, and what it returns must be an array of
 * documents that jansson can serialize. */
#include <stdint.h>
#include <stdlib.h>

#include "kc_yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *docs = NULL;
    kc_err err = {0};
    kc_code rc = kc_yaml_parse((const char *)data, size, "fuzz.yaml", &docs, &err);
    if (rc == KC_OK) {
        if (!json_is_array(docs))
            abort();
        char *s = json_dumps(docs, JSON_COMPACT);
        free(s);
        json_decref(docs);
    } else if (docs != NULL || err.code != rc) {
        abort();
    }
    json_t *one = NULL;
    if (kc_yaml_parse_one((const char *)data, size, NULL, &one, &err) == KC_OK)
        json_decref(one);
    return 0;
}
