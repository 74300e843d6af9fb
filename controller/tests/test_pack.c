/* Tests for kc_pack: exact round trips (order, every string form, numbers at their limits), the
 * dictionary's admission rule and bound, malformed records refused with their reason, decodes
 * racing encodes, and the informer codec. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_pack.h"

/* A pod as the operator's pod cache keeps it. */
static const char *POD =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
    "\"nvidia-device-plugin-daemonset-x7k2p\",\"namespace\":\"gpu-operator\",\"uid\":"
    "\"3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e5f60\",\"resourceVersion\":\"184467\","
    "\"creationTimestamp\":\"2026-11-22T06:48:00Z\",\"labels\":{\"app\":"
    "\"nvidia-device-plugin-daemonset\",\"controller-revision-hash\":\"6d8f9c7b5\","
    "\"pod-template-generation\":\"1\"}},\"spec\":{\"nodeName\":\"gpu-17\"},\"status\":{"
    "\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
    "\"containerStatuses\":[{\"name\":\"nvidia-device-plugin\",\"ready\":true,\"restartCount\":0,"
    "\"state\":{\"running\":{\"startedAt\":\"2026-11-22T06:48:01Z\"}}}]}}";

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    cr_assert_not_null(v, "%s: %s", text, e.text);
    return v;
}

/* Packs and unpacks v; the result must equal v with members in the same order. Returns the
 * record's size. */
static size_t roundtrip(kc_pack_dict *d, const json_t *v)
{
    size_t n = 0;
    unsigned char *rec = kc_pack_encode(d, v, &n);
    cr_assert_not_null(rec);
    char why[200];
    json_t *back = kc_pack_decode(d, rec, n, why, sizeof(why));
    cr_assert_not_null(back, "decode: %s", why);
    cr_assert_str_empty(why);
    char *a = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *b = json_dumps(back, JSON_COMPACT | JSON_ENCODE_ANY);
    cr_assert_str_eq(b, a);
    cr_assert(json_equal(v, back));
    free(a);
    free(b);
    json_decref(back);
    free(rec);
    return n;
}

static size_t roundtrip_text(kc_pack_dict *d, const char *text)
{
    json_t *v = parse(text);
    size_t n = roundtrip(d, v);
    json_decref(v);
    return n;
}

/* The pod with another name and UID. */
static json_t *sibling(const json_t *pod, int i)
{
    json_t *p = json_deep_copy(pod);
    json_t *md = json_object_get(p, "metadata");
    char name[64], uid[40];
    snprintf(name, sizeof(name), "nvidia-device-plugin-daemonset-s%04d", i);
    snprintf(uid, sizeof(uid), "3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e%04d", i);
    json_object_set_new(md, "name", json_string(name));
    json_object_set_new(md, "uid", json_string(uid));
    return p;
}

Test(pack, a_pod_round_trips_and_shrinks)
{
    kc_pack_dict *d = kc_pack_dict_new(1024);
    json_t *pod = parse(POD);
    size_t text = strlen(POD), first = roundtrip(d, pod);
    size_t keys = kc_pack_dict_entries(d);
    cr_assert_gt(keys, 15, "keys enter the dictionary at once");
    /* The same object again (a cache re-encodes it on every change): its values are not
     * shared with anything, so none enters. */
    roundtrip(d, pod);
    roundtrip(d, pod);
    cr_assert_eq(kc_pack_dict_entries(d), keys);
    /* A second pod shares the namespace, labels, phase, node...: those enter. */
    json_t *b = sibling(pod, 1), *c = sibling(pod, 2);
    roundtrip(d, b);
    cr_assert_gt(kc_pack_dict_entries(d), keys + 5);
    size_t third = roundtrip(d, c);
    cr_assert_lt(third, first);
    cr_assert_lt(third * 100, text * 35, "packed %zu bytes of %zu bytes of text", third, text);
    cr_assert_gt(kc_pack_dict_bytes(d), kc_pack_dict_entries(d) * 4);
    json_decref(b);
    json_decref(c);
    json_decref(pod);
    kc_pack_dict_free(d);
}

Test(pack, every_string_form_is_exact)
{
    kc_pack_dict *d = kc_pack_dict_new(64);
    const char *cases[] = {
        /* binary forms */
        "\"3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e5f60\"", "\"1970-01-01T00:00:00Z\"",
        "\"2024-02-29T23:59:59Z\"", "\"9999-12-31T23:59:59Z\"", "\"0\"", "\"184467\"",
        "\"9999999999999999999\"",
        /* look-alikes that must stay text */
        "\"3F0C6A5E-9B1D-4C2E-8F7A-1B2C3D4E5F60\"", "\"3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e5f6\"",
        "\"3f0c6a5e_9b1d-4c2e-8f7a-1b2c3d4e5f60\"", "\"2023-02-29T00:00:00Z\"",
        "\"2026-11-22T24:00:00Z\"", "\"2026-11-22T06:48:60Z\"", "\"1969-12-31T23:59:59Z\"",
        "\"2026-11-22T06:48:00.123Z\"", "\"2026-11-22 06:48:00Z\"", "\"2026-13-01T00:00:00Z\"",
        "\"2026-00-10T00:00:00Z\"", "\"2026-04-31T00:00:00Z\"", "\"007\"", "\"-1\"", "\"+1\"",
        "\"18446744073709551615\"", "\"12a\"", "\"\"",
        /* other strings */
        "\"caf\\u00e9 \\u2603 \\ud83d\\ude00\"", "\"a\\u0000b\"", "\"x\"",
        "\"a string longer than the forty-eight bytes a dictionary entry may have\""};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        roundtrip_text(d, cases[i]);
        roundtrip_text(d, cases[i]); /* the second time through the dictionary */
    }
    size_t uid = roundtrip_text(d, "\"3f0c6a5e-9b1d-4c2e-8f7a-1b2c3d4e5f60\"");
    size_t ts = roundtrip_text(d, "\"2026-11-22T06:48:00Z\"");
    cr_assert_eq(uid, 17, "a UID takes its tag and 16 bytes, not %zu", uid);
    cr_assert_leq(ts, 6, "a timestamp takes its tag and a varint, not %zu", ts);
    kc_pack_dict_free(d);
}

Test(pack, numbers_and_shapes)
{
    kc_pack_dict *d = kc_pack_dict_new(64);
    const char *cases[] = {"null",
                           "true",
                           "false",
                           "0",
                           "-1",
                           "1",
                           "9223372036854775807",
                           "-9223372036854775808",
                           "0.5",
                           "-1e300",
                           "3.141592653589793",
                           "5e-324",
                           "[]",
                           "{}",
                           "[[[[]]]]",
                           "[1,\"a\",null,{\"k\":[true]}]",
                           "{\"z\":1,\"a\":2,\"m\":{\"\":3}}",
                           "{\"\\u00e9\":\"\\u00e9\"}"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
        roundtrip_text(d, cases[i]);
    /* jansson can hold a key with a NUL byte (its parser cannot read one, and json_equal
     * cannot compare one): the key comes back whole. */
    json_t *o = json_object();
    json_object_setn_new(o, "k\0ey", 4, json_integer(1));
    size_t n;
    unsigned char *rec = kc_pack_encode(d, o, &n);
    json_t *back = kc_pack_decode(d, rec, n, NULL, 0);
    void *it = json_object_iter(back);
    cr_assert_not_null(it);
    cr_assert_eq(json_object_iter_key_len(it), 4);
    cr_assert_eq(memcmp(json_object_iter_key(it), "k\0ey", 4), 0);
    cr_assert_eq(json_integer_value(json_object_iter_value(it)), 1);
    json_decref(back);
    free(rec);
    json_decref(o);
    kc_pack_dict_free(d);
}

Test(pack, the_dictionary_admits_on_second_sighting_and_stays_bounded)
{
    kc_pack_dict *d = kc_pack_dict_new(3);
    json_t *v = json_string("recurring-value");
    size_t a = roundtrip(d, v);
    cr_assert_eq(kc_pack_dict_entries(d), 0, "a value seen once stays inline");
    size_t b = roundtrip(d, v);
    cr_assert_eq(kc_pack_dict_entries(d), 1);
    cr_assert_lt(b, a);
    cr_assert_eq(roundtrip(d, v), b);
    json_decref(v);
    /* Keys enter at once; the bound holds; past it strings stay inline and still round trip. */
    roundtrip_text(d, "{\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4}");
    cr_assert_eq(kc_pack_dict_entries(d), 3);
    for (int i = 0; i < 3; i++)
        roundtrip_text(d, "{\"k5\":\"other\",\"k6\":\"other\"}");
    cr_assert_eq(kc_pack_dict_entries(d), 3);
    /* Many distinct values: seen once each, none admitted, and the candidate table resets. */
    kc_pack_dict *e = kc_pack_dict_new(KC_PACK_DICT_MAX);
    char s[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(s, sizeof(s), "name-%d", i);
        json_t *x = json_string(s);
        roundtrip(e, x);
        json_decref(x);
    }
    cr_assert_eq(kc_pack_dict_entries(e), 0);
    kc_pack_dict_free(e);
    kc_pack_dict_free(d);
}

static void refused(const kc_pack_dict *d, const unsigned char *rec, size_t n, const char *want)
{
    char why[200];
    json_t *v = kc_pack_decode(d, rec, n, why, sizeof(why));
    cr_assert_null(v, "a malformed record was decoded (expected: %s)", want);
    cr_assert(strstr(why, want), "reason '%s' lacks '%s'", why, want);
    cr_assert(strstr(why, "packed record, byte "), "reason '%s' gives no offset", why);
}

Test(pack, malformed_records_are_refused_with_a_reason)
{
    kc_pack_dict *d = kc_pack_dict_new(16);
    json_t *pod = parse(POD);
    size_t n;
    unsigned char *rec = kc_pack_encode(d, pod, &n);
    cr_assert_not_null(rec);
    for (size_t cut = 0; cut < n; cut++) {
        char why[200];
        json_t *v = kc_pack_decode(d, rec, cut, why, sizeof(why));
        cr_assert_null(v, "a record cut to %zu of %zu bytes was decoded", cut, n);
        cr_assert_str_not_empty(why);
    }
    unsigned char *longer = malloc(n + 2);
    memcpy(longer, rec, n);
    longer[n] = longer[n + 1] = 0;
    refused(d, longer, n + 2, "2 trailing bytes");
    free(longer);
    refused(d, (const unsigned char[]){99}, 1, "unknown tag 99");
    refused(d, (const unsigned char[]){6, 0x7f}, 2, "dictionary id out of range");
    refused(d, (const unsigned char[]){5, 5, 'a'}, 3, "string length runs past the end");
    refused(d, (const unsigned char[]){5, 2, 0xc3, 0x28}, 4, "not UTF-8");
    refused(d, (const unsigned char[]){10, 1, 3, 0, 0}, 5, "key tag 3 is not a string");
    refused(d, (const unsigned char[]){10, 100, 5, 1, 'a', 0}, 6, "member count exceeds");
    refused(d, (const unsigned char[]){11, 9, 0}, 3, "element count exceeds");
    refused(d, (const unsigned char[]){3, 0xff, 0xff, 0xff}, 4, "integer truncated");
    refused(d, (const unsigned char[]){8, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 7,
            "timestamp out of range");
    refused(d, (const unsigned char[]){4, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, 9, "not a finite number");
    unsigned char deep[2 * (KC_PACK_MAX_DEPTH + 2)]; /* [[[[…: one array more than allowed */
    for (size_t i = 0; i < sizeof(deep); i += 2) {
        deep[i] = 11;
        deep[i + 1] = 1;
    }
    refused(d, deep, sizeof(deep), "nested deeper than");
    cr_assert_null(kc_pack_decode(d, NULL, 3, NULL, 0));
    free(rec);
    json_decref(pod);
    kc_pack_dict_free(d);
}

Test(pack, too_deep_values_are_not_encoded)
{
    kc_pack_dict *d = kc_pack_dict_new(16);
    json_t *v = json_array(), *top = v;
    for (int i = 0; i < KC_PACK_MAX_DEPTH + 1; i++) {
        json_t *inner = json_array();
        json_array_append_new(v, inner);
        v = inner;
    }
    size_t n;
    cr_assert_null(kc_pack_encode(d, top, &n));
    json_decref(top);
    kc_pack_dict_free(d);
}

/* Decoders read the dictionary without a lock while an encoder adds to it. */
typedef struct race {
    kc_pack_dict *d;
    unsigned char *rec;
    size_t n;
    json_t *want;
    int bad;
} race;

static void *decoder(void *arg)
{
    race *r = arg;
    for (int i = 0; i < 2000; i++) {
        json_t *v = kc_pack_decode(r->d, r->rec, r->n, NULL, 0);
        if (!v || !json_equal(v, r->want))
            r->bad++;
        json_decref(v);
    }
    return NULL;
}

Test(pack, decodes_race_encodes)
{
    kc_pack_dict *d = kc_pack_dict_new(KC_PACK_DICT_MAX);
    race r = {.d = d, .want = parse(POD)};
    free(kc_pack_encode(d, r.want, &r.n)); /* values recur from here on */
    free(kc_pack_encode(d, r.want, &r.n));
    r.rec = kc_pack_encode(d, r.want, &r.n);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, decoder, &r);
    char s[64];
    for (int i = 0; i < 6000; i++) {
        /* new keys: each enters the dictionary, which grows through several chunks */
        snprintf(s, sizeof(s), "{\"key-%d\":\"v\"}", i);
        json_t *x = parse(s);
        size_t n;
        free(kc_pack_encode(d, x, &n));
        json_decref(x);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(r.bad, 0);
    cr_assert_geq(kc_pack_dict_entries(d), 6000);
    free(r.rec);
    json_decref(r.want);
    kc_pack_dict_free(d);
}

Test(pack, informer_codec_round_trips)
{
    kc_pack_dict *d = kc_pack_dict_new(1024);
    kc_informer_codec c = kc_pack_codec(d);
    cr_assert_eq(c.ud, d);
    json_t *pod = parse(POD);
    /* Large enough that its length takes two varint bytes. */
    json_t *big = json_object();
    char *filler = malloc(300);
    memset(filler, 'q', 299);
    filler[299] = '\0';
    json_object_set_new(big, "blob", json_string(filler));
    free(filler);
    json_t *objs[] = {pod, big};
    for (size_t i = 0; i < 2; i++) {
        void *rec = c.encode(objs[i], c.ud);
        cr_assert_not_null(rec);
        json_t *back = c.decode(rec, c.ud);
        cr_assert(json_equal(back, objs[i]));
        json_decref(back);
        /* rec_size covers the record exactly: a copy of that many bytes decodes alike. */
        size_t n = c.rec_size(rec, c.ud);
        cr_assert_gt(n, i ? 301 : 1);
        unsigned char *copy = malloc(n);
        memcpy(copy, rec, n);
        c.free_rec(rec);
        back = c.decode(copy, c.ud);
        cr_assert(json_equal(back, objs[i]));
        json_decref(back);
        free(copy);
    }
    json_decref(big);
    json_decref(pod);
    kc_pack_dict_free(d);
}
