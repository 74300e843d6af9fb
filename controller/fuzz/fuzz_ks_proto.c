/* Fuzz target: kubesim's protobuf body decoder (ks_proto_decode) on arbitrary envelopes, and on
 * arbitrary messages of every kind it decodes (Secret, ConfigMap, Namespace, ServiceAccount,
 * TokenRequest, SelfSubjectAccessReview, DeleteOptions) wrapped in a valid envelope. Needs
 * kubesim_core linked in (see the kubesim fuzz build). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The kinds ks_proto_decode decodes, with the apiVersion the envelope names. */
static const char *const kinds[][2] = {
    {"v1", "Secret"},
    {"v1", "ConfigMap"},
    {"v1", "Namespace"},
    {"v1", "ServiceAccount"},
    {"authentication.k8s.io/v1", "TokenRequest"},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview"},
    {"v1", "DeleteOptions"},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static bool known_kind(const char *kind)
{
    for (size_t k = 0; kind && k < NKINDS; k++)
        if (strcmp(kind, kinds[k][1]) == 0)
            return true;
    return false;
}

/* Success yields an object of a decoded kind that serialises; failure yields no object and a
 * message, with one of the codes the API layer maps (400, 415, 500). */
static void check(const uint8_t *body, size_t len)
{
    json_t *out = (json_t *)0x1;
    kc_err err = {0};
    kc_code rc = ks_proto_decode((const char *)body, len, &out, &err);
    if (rc == KC_OK) {
        const char *kind = json_string_value(json_object_get(out, "kind"));
        if (!json_is_object(out) || !known_kind(kind))
            abort();
        char *s = json_dumps(out, JSON_COMPACT);
        if (!s)
            abort();
        free(s);
        json_decref(out);
        return;
    }
    if (out != NULL || err.code != rc || !err.msg[0] ||
        (rc != KC_EPARSE && rc != KC_EUNSUPPORTED && rc != KC_ENOMEM))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    check(data, size);

    /* The input as the raw object of each supported kind. */
    uint8_t *buf = malloc(size + 128);
    if (!buf)
        return 0;
    for (size_t k = 0; k < NKINDS; k++) {
        size_t n = 0;
        memcpy(buf, "k8s\0", 4);
        n = 4;
        uint8_t tm[96];
        size_t tn = 0;
        size_t al = strlen(kinds[k][0]), kl = strlen(kinds[k][1]);
        tm[tn++] = 0x0a;
        tm[tn++] = (uint8_t)al;
        memcpy(tm + tn, kinds[k][0], al);
        tn += al;
        tm[tn++] = 0x12;
        tm[tn++] = (uint8_t)kl;
        memcpy(tm + tn, kinds[k][1], kl);
        tn += kl;
        buf[n++] = 0x0a;
        buf[n++] = (uint8_t)tn;
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
