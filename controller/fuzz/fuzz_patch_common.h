/* fuzz_patch_common: shared by the patch fuzzers: splits the input into two JSON documents at the
 * first NUL byte or newline and parses both. */
#ifndef FUZZ_PATCH_COMMON_H
#define FUZZ_PATCH_COMMON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Returns 1 with two new references when both halves parse, else 0. */
static inline int fuzz_split(const uint8_t *data, size_t size, json_t **a, json_t **b)
{
    size_t cut = 0;
    while (cut < size && data[cut] != 0 && data[cut] != '\n')
        cut++;
    if (cut == size)
        return 0;
    *a = json_loadb((const char *)data, cut, JSON_DECODE_ANY, NULL);
    if (!*a)
        return 0;
    *b = json_loadb((const char *)data + cut + 1, size - cut - 1, JSON_DECODE_ANY, NULL);
    if (!*b) {
        json_decref(*a);
        return 0;
    }
    return 1;
}

/* Whether an object anywhere outside arrays has a null member (merge patch cannot express it). */
static inline int fuzz_has_null_member(const json_t *v)
{
    const char *k;
    json_t *m;
    if (!json_is_object(v))
        return 0;
    json_object_foreach((json_t *)v, k, m)
    {
        if (json_is_null(m) || fuzz_has_null_member(m))
            return 1;
    }
    return 0;
}

#endif
