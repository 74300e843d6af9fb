/* fuzz_pack: the packed-record decoder on arbitrary bytes, and the encoder on arbitrary JSON.
 * Byte 0 picks the mode: even, the rest is a record decoded against a dictionary that a pod
 * filled (it must be refused with a reason or decode to a value that packs back to the same
 * one); odd, the rest is JSON text that must pack and unpack to the same value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_pack.h"

static const char POD[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":"
    "\"gpu-operator\",\"uid\":\"3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e5f60\",\"resourceVersion\":"
    "\"184467\",\"creationTimestamp\":\"2026-11-22T06:48:00Z\",\"labels\":{\"app\":\"a\"}},"
    "\"status\":{\"phase\":\"Running\",\"phase2\":\"Running\"}}";

static void check_roundtrip(kc_pack_dict *d, const json_t *v)
{
    size_t n;
    unsigned char *rec = kc_pack_encode(d, v, &n);
    if (!rec)
        return; /* too deep (or out of memory) */
    char why[256];
    json_t *back = kc_pack_decode(d, rec, n, why, sizeof(why));
    if (!back)
        __builtin_trap();
    /* Compared as text: json_equal cannot compare keys holding a NUL byte. */
    char *a = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *b = json_dumps(back, JSON_COMPACT | JSON_ENCODE_ANY);
    if (a && b && strcmp(a, b) != 0)
        __builtin_trap();
    free(a);
    free(b);
    json_decref(back);
    free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    kc_pack_dict *d = kc_pack_dict_new(64);
    json_t *pod = json_loads(POD, 0, NULL);
    size_t n;
    free(kc_pack_encode(d, pod, &n));
    free(kc_pack_encode(d, pod, &n));
    json_decref(pod);
    if (data[0] % 2 == 0) {
        char why[256];
        json_t *v = kc_pack_decode(d, data + 1, size - 1, why, sizeof(why));
        if (!v && !why[0])
            __builtin_trap(); /* a refusal always says why */
        if (v)
            check_roundtrip(d, v);
        json_decref(v);
    } else {
        json_t *v = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
        if (v)
            check_roundtrip(d, v);
        json_decref(v);
    }
    kc_pack_dict_free(d);
    return 0;
}
