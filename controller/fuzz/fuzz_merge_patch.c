/* fuzz_merge_patch: RFC 7386 apply and create on two JSON documents (target, patch); checks that
 * the target is untouched and that create/apply round-trips. */
#include <stdlib.h>

#include "fuzz_patch_common.h"
#include "kc_patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *target, *patch;
    if (!fuzz_split(data, size, &target, &patch))
        return 0;
    json_t *before = json_deep_copy(target);
    json_t *result = kc_merge_patch_apply(target, patch);
    if (!result || !json_equal(before, target))
        abort();
    if (!fuzz_has_null_member(result)) {
        json_t *diff = kc_merge_patch_create(target, result);
        json_t *back = kc_merge_patch_apply(target, diff);
        if (!kc_json_equal(back, result))
            abort();
        json_decref(back);
        json_decref(diff);
    }
    json_decref(result);
    json_decref(before);
    json_decref(target);
    json_decref(patch);
    return 0;
}
