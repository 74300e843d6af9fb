/* Fuzz target: kubesim's image references (ks_image_ref_parse) and images files
 * (ks_registry_load_text). A reference is accepted with a normalized name that parses again to
 * itself, or refused with the kubelet's "couldn't parse image name" message; an images file adds
 * all its entries or none. Input: the first line is an image reference, the rest an images file.
 * Needs kubesim_core linked in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ks_registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    const char *nl = memchr(data, '\n', size);
    size_t rn = nl ? (size_t)(nl - (const char *)data) : size;
    char *image = malloc(rn + 1);
    if (!image)
        return 0;
    memcpy(image, data, rn);
    image[rn] = '\0';
    ks_image_ref ref, again;
    kc_err err;
    kc_err_clear(&err);
    if (ks_image_ref_parse(image, &ref, &err) == KC_OK) {
        /* the normalized form is a fixed point */
        if (ks_image_ref_parse(ref.full, &again, &err) != KC_OK || strcmp(again.full, ref.full))
            abort();
        if (!ref.tag[0] && !ref.digest[0])
            abort();
    } else if (strncmp(err.msg, "couldn't parse image name \"", 27) != 0) {
        abort();
    }
    free(image);
    ks_registry *r = ks_registry_new();
    if (!r)
        return 0;
    size_t before = ks_registry_len(r);
    const char *rest = nl ? nl + 1 : "";
    size_t rest_len = nl ? size - rn - 1 : 0;
    kc_err_clear(&err);
    kc_code rc = ks_registry_load_text(r, rest, rest_len, "fuzz.yaml", &err);
    if (rc != KC_OK && (ks_registry_len(r) != before || !err.msg[0]))
        abort();
    if (rc == KC_OK && ks_registry_len(r) < before)
        abort();
    ks_registry_free(r);
    return 0;
}
