/* Fuzz target: kubesim's protobuf codec (ks_proto.c, ks_proto_enc.c). Arbitrary envelopes, and
 * arbitrary messages of every kind in ks_proto_tables.c (Pod, Node, DaemonSet, RBAC, Event,
 * CustomResourceDefinition, Status, WatchEvent, ...) wrapped in a valid envelope, go through
 * ks_proto_decode: it must never crash, and must either yield an object of the kind named or
 * fail with KC_EPARSE / KC_EUNSUPPORTED and a message saying where ("protobuf body: ... at offset
 * N") or which kind. A decoded object is encoded (ks_proto_encode) and decoded again, twice: both
 * must succeed, and the second round must change neither the object nor the bytes. The Accept
 * negotiation runs on the input as a header. Needs kubesim_core linked in (see the kubesim fuzz
 * build). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_proto_int.h"
#include "ks_sim.h"

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        out[n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* Go marshals absent pointers and nil slices as null: the same as no key. */
static void drop_nulls(json_t *j)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(j, tmp, k, v)
        {
            if (json_is_null(v))
                json_object_deln(j, k, json_object_iter_key_len(json_object_key_to_iter(k)));
            else
                drop_nulls(v);
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) drop_nulls(v);
    }
}

static void check(const uint8_t *body, size_t len)
{
    json_t *out = (json_t *)0x1;
    kc_err err = {0};
    kc_code rc = ks_proto_decode((const char *)body, len, &out, &err);
    if (rc != KC_OK) {
        if (out != NULL || err.code != rc || !err.msg[0] ||
            (rc != KC_EPARSE && rc != KC_EUNSUPPORTED && rc != KC_ENOMEM))
            abort();
        /* precise: where in the body, or which kind / encoding */
        if (strncmp(err.msg, "protobuf body: ", 15) != 0 &&
            strncmp(err.msg, "the protobuf encoding of ", 25) != 0)
            abort();
        return;
    }
    const char *kind = json_string_value(json_object_get(out, "kind"));
    if (!json_is_object(out) || !kind)
        abort();
    char *s = json_dumps(out, JSON_COMPACT);
    if (!s)
        abort();
    free(s);

    /* encode, decode again: after one round (which adds the value fields Go always writes,
     * e.g. an empty metadata), further rounds change nothing, byte for byte. */
    if (ks_proto_can_encode(out)) {
        char *pb1 = NULL, *pb2 = NULL;
        size_t n1 = 0, n2 = 0;
        json_t *j1 = NULL, *j2 = NULL;
        kc_err e2 = {0};
        if (ks_proto_encode(out, &pb1, &n1, &e2) == KC_OK) {
            if (ks_proto_decode(pb1, n1, &j1, &e2) != KC_OK)
                abort();
            if (ks_proto_encode(j1, &pb2, &n2, &e2) != KC_OK ||
                ks_proto_decode(pb2, n2, &j2, &e2) != KC_OK)
                abort();
            drop_nulls(j1);
            drop_nulls(j2);
            /* compared as text: json_equal looks keys up as C strings, and keys may hold NULs */
            char *x = json_dumps(j1, JSON_COMPACT | JSON_SORT_KEYS);
            char *y = json_dumps(j2, JSON_COMPACT | JSON_SORT_KEYS);
            if (!x || !y || strcmp(x, y) != 0 || n1 != n2 || memcmp(pb1, pb2, n1) != 0) {
                fprintf(stderr, "round trip differs:\n%s\n%s\n", x ? x : "", y ? y : "");
                abort();
            }
            free(x);
            free(y);
        }
        json_decref(j1);
        json_decref(j2);
        free(pb1);
        free(pb2);
    }
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    check(data, size);

    /* The input as an Accept header. */
    char *accept = malloc(size + 1);
    if (accept) {
        memcpy(accept, data, size);
        accept[size] = '\0';
        ks_media m = ks_media_negotiate(accept, size & 1);
        if (m != KS_MEDIA_JSON && m != KS_MEDIA_PROTOBUF && m != KS_MEDIA_NONE)
            abort();
        free(accept);
    }

    /* The input as the raw object of each kind. */
    uint8_t *buf = malloc(size + 600);
    if (!buf)
        return 0;
    for (size_t k = 0; k < KS_PROTO_NKINDS; k++) {
        const char *api = KS_PROTO_KINDS[k].api_version[0] ? KS_PROTO_KINDS[k].api_version : "v1";
        const char *kind = KS_PROTO_KINDS[k].kind;
        size_t n = 4;
        memcpy(buf, "k8s\0", 4);
        uint8_t tm[300];
        size_t tn = 0;
        size_t al = strlen(api), kl = strlen(kind);
        tm[tn++] = 0x0a;
        tm[tn++] = (uint8_t)al;
        memcpy(tm + tn, api, al);
        tn += al;
        tm[tn++] = 0x12;
        tm[tn++] = (uint8_t)kl;
        memcpy(tm + tn, kind, kl);
        tn += kl;
        buf[n++] = 0x0a;
        n += put_varint(buf + n, tn);
        memcpy(buf + n, tm, tn);
        n += tn;
        buf[n++] = 0x12;
        n += put_varint(buf + n, size);
        memcpy(buf + n, data, size);
        n += size;
        check(buf, n);
    }
    free(buf);
    return 0;
}
