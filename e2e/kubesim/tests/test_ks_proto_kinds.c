/* The protobuf encoding of every built-in kind kubesim serves, against test vectors the API
 * server's own Go serializer wrote (tests/proto/NAME.pb and NAME.json, from
 * e2e/protoclient/fixtures): decode(pb) is the Go JSON, encode(JSON) is the pb byte for byte,
 * decode(encode(x)) == x, and a watch frame is the one a protobuf watch stream carries. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_sim.h"

static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    const char *slash = strrchr(__FILE__, '/');
    snprintf(path, sizeof(path), "%.*s/proto/%s", slash ? (int)(slash - __FILE__) : 1,
             slash ? __FILE__ : ".", name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    char *b = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 > cap)
            b = realloc(b, cap = (cap + 4096) * 2);
        got = fread(b + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    *len = n;
    return b;
}

/* Go marshals absent pointers, nil slices and the zero time as null: the same as no key. */
static void drop_nulls(json_t *j)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(j, tmp, k, v)
        {
            if (json_is_null(v))
                json_object_del(j, k);
            else
                drop_nulls(v);
        }
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) drop_nulls(v);
    }
}

static json_t *load_json(const char *name)
{
    size_t n;
    char *s = slurp(name, &n);
    json_error_t je;
    json_t *j = json_loadb(s, n, 0, &je);
    free(s);
    cr_assert_not_null(j, "%s: %s", name, je.text);
    drop_nulls(j);
    return j;
}

static void assert_same(json_t *got, json_t *want, const char *what)
{
    drop_nulls(got);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        char *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
        char dump[256];
        snprintf(dump, sizeof(dump), "/tmp/ks_proto_%s.got", what);
        FILE *f = fopen(dump, "w");
        if (f) {
            fprintf(f, "%s\n%s\n", g, w);
            fclose(f);
        }
        cr_assert_fail("%s: decoded JSON differs (both in %s)", what, dump);
    }
}

static void first_diff(const char *a, size_t an, const char *b, size_t bn, const char *what)
{
    size_t i = 0;
    while (i < an && i < bn && a[i] == b[i])
        i++;
    cr_assert(an == bn && i == an, "%s: %zu bytes vs the API server's %zu, first difference at %zu",
              what, an, bn, i);
}

static void check_kind(const char *name)
{
    char fn[128];
    size_t pn;
    snprintf(fn, sizeof(fn), "%s.pb", name);
    char *pb = slurp(fn, &pn);
    snprintf(fn, sizeof(fn), "%s.json", name);
    json_t *want = load_json(fn);

    /* decode: the Go JSON */
    json_t *got = NULL;
    kc_err e = {0};
    cr_assert_eq(ks_proto_decode(pb, pn, &got, &e), KC_OK, "%s: %s", name, e.msg);
    assert_same(got, want, name);
    json_decref(got);

    /* encode: the API server's bytes */
    char *enc = NULL;
    size_t en = 0;
    cr_assert_eq(ks_proto_encode(want, &enc, &en, &e), KC_OK, "%s: %s", name, e.msg);
    first_diff(enc, en, pb, pn, name);

    /* round trip */
    cr_assert_eq(ks_proto_decode(enc, en, &got, &e), KC_OK, "%s: %s", name, e.msg);
    assert_same(got, want, name);
    json_decref(got);
    free(enc);
    free(pb);
    json_decref(want);
}

Test(ks_proto_kinds, pod)
{
    check_kind("pod");
}
Test(ks_proto_kinds, node)
{
    check_kind("node");
}
Test(ks_proto_kinds, namespace)
{
    check_kind("namespace");
}
Test(ks_proto_kinds, service)
{
    check_kind("service");
}
Test(ks_proto_kinds, serviceaccount)
{
    check_kind("serviceaccount");
}
Test(ks_proto_kinds, secret)
{
    check_kind("secret");
}
Test(ks_proto_kinds, configmap)
{
    check_kind("configmap");
}
Test(ks_proto_kinds, core_event)
{
    check_kind("event");
}
Test(ks_proto_kinds, core_event_list)
{
    check_kind("event_list");
}
Test(ks_proto_kinds, events_k8s_io_event)
{
    check_kind("events_event");
}
Test(ks_proto_kinds, daemonset)
{
    check_kind("daemonset");
}
Test(ks_proto_kinds, daemonset_list)
{
    check_kind("daemonset_list");
}
Test(ks_proto_kinds, deployment)
{
    check_kind("deployment");
}
Test(ks_proto_kinds, replicaset)
{
    check_kind("replicaset");
}
Test(ks_proto_kinds, role)
{
    check_kind("role");
}
Test(ks_proto_kinds, rolebinding)
{
    check_kind("rolebinding");
}
Test(ks_proto_kinds, clusterrole)
{
    check_kind("clusterrole");
}
Test(ks_proto_kinds, clusterrolebinding)
{
    check_kind("clusterrolebinding");
}
Test(ks_proto_kinds, runtimeclass)
{
    check_kind("runtimeclass");
}
Test(ks_proto_kinds, lease)
{
    check_kind("lease");
}
Test(ks_proto_kinds, priorityclass)
{
    check_kind("priorityclass");
}
Test(ks_proto_kinds, status)
{
    check_kind("status");
}
Test(ks_proto_kinds, deleteoptions)
{
    check_kind("deleteoptions");
}
Test(ks_proto_kinds, customresourcedefinition)
{
    check_kind("crd");
}

Test(ks_proto_kinds, watch_frame)
{
    size_t fn;
    char *frame = slurp("watch_daemonset.frame", &fn);
    json_t *ds = load_json("daemonset.json");
    char *got = NULL;
    size_t gn = 0;
    kc_err e = {0};
    cr_assert_eq(ks_proto_watch_frame("ADDED", ds, &got, &gn, &e), KC_OK, "%s", e.msg);
    first_diff(got, gn, frame, fn, "watch frame");
    free(got);
    free(frame);
    json_decref(ds);
}

/* Map keys in Go's order (bytes, a prefix first), NUL bytes in keys kept. */
Test(ks_proto_kinds, map_keys_sorted_as_go_sorts_them)
{
    json_t *cm = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", "c", "data");
    json_t *data = json_object_get(cm, "data");
    json_object_setn_new(data, "ab", 2, json_string("3"));
    json_object_setn_new(data, "a\0b", 3, json_string("2"));
    json_object_setn_new(data, "a", 1, json_string("1"));
    char *pb = NULL;
    size_t n = 0;
    kc_err e = {0};
    cr_assert_eq(ks_proto_encode(cm, &pb, &n, &e), KC_OK, "%s", e.msg);
    /* data entries: field 2, {1: key, 2: value} */
    static const char want[] = "\x12\x06\x0a\x01"
                               "a"
                               "\x12\x01"
                               "1"
                               "\x12\x08\x0a\x03"
                               "a\0b"
                               "\x12\x01"
                               "2"
                               "\x12\x07\x0a\x02"
                               "ab"
                               "\x12\x01"
                               "3";
    bool found = false;
    for (size_t i = 0; i + sizeof(want) - 1 <= n && !found; i++)
        found = !memcmp(pb + i, want, sizeof(want) - 1);
    cr_assert(found, "entries not in Go's order");
    json_t *back = NULL;
    cr_assert_eq(ks_proto_decode(pb, n, &back, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(json_string_value(json_object_getn(json_object_get(back, "data"), "a\0b", 3)),
                     "2");
    json_decref(back);
    json_decref(cm);
    free(pb);
}

/* An empty map (a pod's annotations: {}) encodes as no entries. Sorting its no keys once passed
 * qsort a null array, undefined behaviour that UBSan stops kubesim on (kubectl describe node
 * lists the node's pods as protobuf). */
Test(ks_proto_kinds, empty_map_encodes_as_no_entries)
{
    json_t *pod =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:{}, s:{}}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
                  "kind", "Pod", "metadata", "name", "p", "namespace", "default", "annotations",
                  "labels", "spec", "containers", "name", "c", "image", "busybox");
    char *pb = NULL;
    size_t n = 0;
    kc_err e = {0};
    cr_assert_eq(ks_proto_encode(pod, &pb, &n, &e), KC_OK, "%s", e.msg);
    json_t *back = NULL;
    cr_assert_eq(ks_proto_decode(pb, n, &back, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(back, "metadata"), "name")),
                     "p");
    cr_assert_eq(
        json_object_size(json_object_get(json_object_get(back, "metadata"), "annotations")), 0);
    json_decref(back);
    json_decref(pod);
    free(pb);
}
