/* ks_store_test: types and object builders shared by the store's unit tests (static helpers). */
#ifndef KS_STORE_TEST_H
#define KS_STORE_TEST_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_store.h"

/* The types registered by hand in every test (the real built-ins live in ks_types.c). */
typedef struct kst_types {
    const ks_rtype *namespaces, *pods, *configmaps, *nodes, *deployments, *widgets;
} kst_types;

static const char *const kst_pod_short[] = {"po", NULL};
static const char *const kst_cm_short[] = {"cm", NULL};
static const char *const kst_all[] = {"all", NULL};

static inline const ks_rtype *kst_register(ks_store *st, const char *group, const char *version,
                                           const char *resource, const char *kind,
                                           const char *singular, bool namespaced, bool has_status,
                                           const char *const *shorts)
{
    ks_rtype t = {.group = group,
                  .version = version,
                  .resource = resource,
                  .kind = kind,
                  .singular = singular,
                  .namespaced = namespaced,
                  .has_status = has_status,
                  .short_names = shorts};
    const ks_rtype *r = ks_store_register(st, &t);
    cr_assert_not_null(r, "registering %s", resource);
    return r;
}

static inline void kst_register_all(ks_store *st, kst_types *ty)
{
    ty->namespaces =
        kst_register(st, "", "v1", "namespaces", "Namespace", "namespace", false, true, NULL);
    ty->pods = kst_register(st, "", "v1", "pods", "Pod", "pod", true, true, kst_pod_short);
    ty->configmaps = kst_register(st, "", "v1", "configmaps", "ConfigMap", "configmap", true, false,
                                  kst_cm_short);
    ty->nodes = kst_register(st, "", "v1", "nodes", "Node", "node", false, true, NULL);
    ty->deployments =
        kst_register(st, "apps", "v1", "deployments", "Deployment", "deployment", true, true, NULL);
    ty->widgets =
        kst_register(st, "example.com", "v1", "widgets", "Widget", "widget", false, true, NULL);
}

/* {"metadata":{"name":name, "namespace":ns?, "labels":{...}?}} plus the given spec. */
static inline json_t *kst_obj(const char *ns, const char *name, json_t *spec)
{
    json_t *o = json_pack("{s:{s:s}}", "metadata", "name", name);
    if (ns)
        json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(ns));
    if (spec)
        json_object_set_new(o, "spec", spec);
    return o;
}

static inline json_t *kst_pod(const char *ns, const char *name, const char *node)
{
    json_t *spec = json_pack("{s:[{s:s, s:s}]}", "containers", "name", "c", "image", "busybox");
    if (node)
        json_object_set_new(spec, "nodeName", json_string(node));
    return kst_obj(ns, name, spec);
}

static inline void kst_set_label(json_t *o, const char *k, const char *v)
{
    json_t *meta = json_object_get(o, "metadata");
    json_t *labels = json_object_get(meta, "labels");
    if (!labels) {
        labels = json_object();
        json_object_set_new(meta, "labels", labels);
    }
    json_object_set_new(labels, k, json_string(v));
}

static inline const char *kst_meta(const json_t *o, const char *field)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), field));
}

static inline json_int_t kst_meta_int(const json_t *o, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(o, "metadata"), field));
}

static inline uint64_t kst_rv(const json_t *o)
{
    const char *s = kst_meta(o, "resourceVersion");
    cr_assert_not_null(s, "object without resourceVersion");
    return strtoull(s, NULL, 10);
}

/* Creates and returns the stored object (caller decrefs); fails the test on error. */
static inline json_t *kst_create(ks_store *st, const ks_rtype *t, const char *ns, json_t *obj)
{
    json_t *out = NULL;
    kc_err err = {0};
    kc_code rc = ks_create(st, t, ns, obj, &out, &err);
    cr_assert_eq(rc, KC_OK, "create %s: %s", t->resource, err.msg);
    return out;
}

static inline void kst_create_free(ks_store *st, const ks_rtype *t, const char *ns, json_t *obj)
{
    json_decref(kst_create(st, t, ns, obj));
}

#endif
