/* kc_mergepatch: RFC 7386 JSON merge patch, applying and computing patches. */
#include "kc_patch.h"

/* Whether integer i has exactly the value d. */
static int int_is_double(json_int_t i, double d)
{
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return 0;
    return (json_int_t)d == i && (double)i == d;
}

int kc_json_equal(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return a == b;
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        if (json_is_integer(a))
            return int_is_double(json_integer_value(a), json_real_value(b));
        if (json_is_integer(b))
            return int_is_double(json_integer_value(b), json_real_value(a));
        return json_real_value(a) == json_real_value(b);
    }
    if (json_typeof(a) != json_typeof(b))
        return 0;
    if (json_is_array(a)) {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!kc_json_equal(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    if (json_is_object(a)) {
        const char *k;
        size_t klen;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_keylen_foreach((json_t *)a, k, klen, v)
        {
            if (!kc_json_equal(v, json_object_getn(b, k, klen)))
                return 0;
        }
        return 1;
    }
    return json_equal(a, b);
}

/* Merges patch (an object) into target (an object we own), in place. Returns 0, or -1 when memory
 * runs out. */
static int merge_into(json_t *target, const json_t *patch)
{
    const char *k;
    size_t klen;
    json_t *pv;
    json_object_keylen_foreach((json_t *)patch, k, klen, pv)
    {
        if (json_is_null(pv)) {
            json_object_deln(target, k, klen);
            continue;
        }
        if (!json_is_object(pv)) {
            if (json_object_setn_new(target, k, klen, json_deep_copy(pv)) != 0)
                return -1;
            continue;
        }
        json_t *tv = json_object_getn(target, k, klen);
        if (!json_is_object(tv)) {
            /* Merging into a non-object starts from {}, which also drops nulls in the patch. */
            if (json_object_setn_new(target, k, klen, json_object()) != 0)
                return -1;
            tv = json_object_getn(target, k, klen);
        }
        if (merge_into(tv, pv) != 0)
            return -1;
    }
    return 0;
}

json_t *kc_merge_patch_apply(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return patch ? json_deep_copy(patch) : json_null();
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out)
        return NULL;
    if (merge_into(out, patch) != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *kc_merge_patch_create(const json_t *original, const json_t *modified)
{
    if (!json_is_object(original) || !json_is_object(modified)) {
        if (kc_json_equal(original, modified) && json_is_object(modified))
            return json_object();
        return modified ? json_deep_copy(modified) : json_null();
    }
    json_t *patch = json_object();
    if (!patch)
        return NULL;
    const char *k;
    size_t klen;
    json_t *ov, *mv;
    json_object_keylen_foreach((json_t *)original, k, klen, ov)
    {
        if (!json_object_getn(modified, k, klen) &&
            json_object_setn_new(patch, k, klen, json_null()) != 0)
            goto fail_patch;
    }
    json_object_keylen_foreach((json_t *)modified, k, klen, mv)
    {
        ov = json_object_getn(original, k, klen);
        if (ov && kc_json_equal(ov, mv))
            continue;
        json_t *pv = (ov && json_is_object(ov) && json_is_object(mv))
                         ? kc_merge_patch_create(ov, mv)
                         : json_deep_copy(mv);
        if (json_object_setn_new(patch, k, klen, pv) != 0)
            goto fail_patch;
    }
    return patch;
fail_patch:
    json_decref(patch);
    return NULL;
}
