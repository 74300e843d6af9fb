/* ks_store_write: the store's write paths (create, update, mutate, delete) with the API server's
 * metadata rules, preconditions, finalizers and graceful deletion, and the commit steps that bump
 * the resourceVersion and publish events. */
#include "ks_store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_patch.h"

/* The longest generateName prefix kept, so the generated name stays a valid DNS label. */
#define KS_GENERATE_NAME_MAX 58
#define KS_NAME_MAX          253

/* ---- commits (write lock held) ---- */

static void set_rv(json_t *obj, uint64_t rv)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
    json_t *meta = json_object_get(obj, "metadata");
    if (json_is_object(meta))
        json_object_set_new(meta, "resourceVersion", json_string(buf));
}

kc_code kss_commit_add(ks_store *st, ks_type *t, ks_bucket *b, const char *ns, const char *name,
                       json_t *obj, kc_err *err)
{
    uint64_t rv = st->rv + 1;
    set_rv(obj, rv);
    ks_obj *o = calloc(1, sizeof(*o));
    if (!o) {
        json_decref(obj);
        return kss_err(err, KC_ENOMEM, 500, "out of memory storing %s", name);
    }
    o->obj = obj;
    o->ns = strdup(ns);
    o->name = strdup(name);
    if (!o->ns || !o->name || kss_index_add(b, o) != KC_OK) {
        kss_obj_free(o);
        return kss_err(err, KC_ENOMEM, 500, "out of memory storing %s", name);
    }
    __atomic_store_n(&st->rv, rv, __ATOMIC_SEQ_CST);
    st->stats.creates++;
    kss_publish(st, KS_ADDED, t, b, NULL, obj, rv);
    return KC_OK;
}

/* How deep consecutive versions share unchanged parts: spec, metadata.labels, status.conditions
 * entries of pods and nodes are within 4 levels. */
#define KSS_SHARE_DEPTH 4

void kss_commit_modify(ks_store *st, ks_type *t, ks_bucket *b, ks_obj *o, json_t *next)
{
    uint64_t rv = st->rv + 1;
    set_rv(next, rv);
    json_t *old = o->obj;
    kss_share_unchanged(next, old, KSS_SHARE_DEPTH);
    const char *ov = b->oidx ? kss_field_value(old, b->ifield) : NULL;
    const char *nv = b->oidx ? kss_field_value(next, b->ifield) : NULL;
    bool refile = b->oidx && (!ov || !nv || strcmp(ov, nv) != 0);
    if (refile)
        kss_oidx_remove(b, o, old);
    o->obj = next;
    if (refile)
        kss_oidx_add(b, o);
    __atomic_store_n(&st->rv, rv, __ATOMIC_SEQ_CST);
    st->stats.updates++;
    kss_publish(st, KS_MODIFIED, t, b, old, next, rv);
    json_decref(old);
}

json_t *kss_commit_remove(ks_store *st, ks_type *t, ks_bucket *b, ks_obj *o, json_t *final)
{
    uint64_t rv = st->rv + 1;
    if (!final) {
        /* The last state with the deletion's RV: only metadata is new, the rest is shared. */
        final = json_copy(o->obj);
        json_t *meta = json_copy(json_object_get(o->obj, "metadata"));
        if (final && meta && json_object_set_new(final, "metadata", meta) == 0)
            meta = NULL;
        else {
            json_decref(final);
            final = NULL;
        }
        json_decref(meta);
    }
    if (final) {
        set_rv(final, rv);
        kss_share_unchanged(final, o->obj, KSS_SHARE_DEPTH);
    } else {
        final = json_incref(o->obj); /* out of memory: the last state with its old RV */
    }
    kss_index_remove(b, o);
    __atomic_store_n(&st->rv, rv, __ATOMIC_SEQ_CST);
    st->stats.deletes++;
    kss_publish(st, KS_DELETED, t, b, o->obj, final, rv);
    kss_obj_free(o);
    return final;
}

/* ---- metadata helpers ---- */

/* The metadata object of obj, created when absent; NULL when it is not an object. */
static json_t *ensure_meta(json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (!meta) {
        meta = json_object();
        if (json_object_set_new(obj, "metadata", meta) != 0)
            return NULL;
    }
    return json_is_object(meta) ? meta : NULL;
}

/* Takes obj (STOLEN) and hands back a private deep copy with a metadata object in *mine (the
 * caller may still hold references into obj). verb ("create", "update") names the write in the
 * message for a body that is not an object. */
static kc_code take_private(ks_type *t, json_t *obj, const char *verb, json_t **mine, json_t **meta,
                            kc_err *err)
{
    bool was_object = json_is_object(obj);
    json_t *copy = was_object ? json_deep_copy(obj) : NULL;
    json_decref(obj);
    *meta = copy ? ensure_meta(copy) : NULL;
    if (!*meta) {
        json_decref(copy);
        *mine = NULL;
        if (was_object && !copy)
            return kss_err(err, KC_ENOMEM, 500, "out of memory copying a %s", t->pub.kind);
        return kss_err(err, KC_EBADREQUEST, 400,
                       "the body of a %s %s must be a JSON object with an object metadata",
                       t->pub.kind, verb);
    }
    *mine = copy;
    return KC_OK;
}

static void rfc3339_after(long secs, char buf[32])
{
    time_t at = time(NULL) + secs;
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static bool is_core(const ks_bucket *b, const char *resource)
{
    return !b->group[0] && !strcmp(b->resource, resource);
}

static size_t finalizer_count(const json_t *obj)
{
    return json_array_size(json_object_get(json_object_get(obj, "metadata"), "finalizers"));
}

static bool has_finalizer(const json_t *obj, const char *f)
{
    const json_t *arr = json_object_get(json_object_get(obj, "metadata"), "finalizers");
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (json_is_string(json_array_get(arr, i)) &&
            !strcmp(json_string_value(json_array_get(arr, i)), f))
            return true;
    return false;
}

static json_int_t meta_int(const json_t *obj, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(obj, "metadata"), field));
}

/* Whether an object being deleted has nothing left to wait for (finalizers, a pod's grace period,
 * a namespace's spec.finalizers) and must be removed. */
static bool deletion_complete(const ks_store *st, const ks_bucket *b, const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    if (!json_object_get(meta, "deletionTimestamp") || finalizer_count(obj) > 0)
        return false;
    if (meta_int(obj, "deletionGracePeriodSeconds") > 0)
        return false;
    if (b == st->ns_bucket &&
        json_array_size(json_object_get(json_object_get(obj, "spec"), "finalizers")) > 0)
        return false;
    return true;
}

/* Whether a and b differ in any top-level field other than metadata (and status). */
static bool differs_outside(const json_t *a, const json_t *b, bool skip_status)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)a, key, v)
    {
        if (!strcmp(key, "metadata") || (skip_status && !strcmp(key, "status")))
            continue;
        if (!kc_json_equal(v, json_object_get(b, key)))
            return true;
    }
    json_object_foreach((json_t *)b, key, v)
    {
        if (!strcmp(key, "metadata") || (skip_status && !strcmp(key, "status")))
            continue;
        if (!json_object_get(a, key))
            return true;
    }
    return false;
}

/* Resolves the namespace of a write from the request's ns and the body's metadata.namespace into
 * buf ("" for cluster-scoped types, whose body namespace is dropped). */
static kc_code resolve_ns(const ks_type *t, const char *ns, json_t *meta, char *buf, size_t size,
                          kc_err *err)
{
    const char *bns = json_string_value(json_object_get(meta, "namespace"));
    if (!t->bucket->namespaced) {
        json_object_del(meta, "namespace");
        buf[0] = '\0';
        return KC_OK;
    }
    if (ns && ns[0]) {
        if (bns && bns[0] && strcmp(bns, ns) != 0)
            return kss_err(err, KC_EBADREQUEST, 400,
                           "the namespace of the provided object does not match the namespace "
                           "sent on the request");
    } else if (bns && bns[0]) {
        ns = bns;
    } else {
        return kss_err(err, KC_EBADREQUEST, 400,
                       "an empty namespace may not be set when a resource name is provided "
                       "(%s is namespaced: name a namespace)",
                       t->pub.resource);
    }
    if (strlen(ns) >= size)
        return kss_err(err, KC_EINVALID, 422, "metadata.namespace: Invalid value: too long");
    snprintf(buf, size, "%s", ns);
    json_object_set_new(meta, "namespace", json_string(buf));
    return KC_OK;
}

/* Checks that ns exists and is not terminating (only once a namespaces type is served). */
static kc_code check_namespace(ks_store *st, const ks_type *t, const char *ns, const char *name,
                               kc_err *err)
{
    if (!t->bucket->namespaced || st->ns_bucket->nserved == 0)
        return KC_OK;
    ks_obj *n = kss_find(st->ns_bucket, "", ns);
    if (!n)
        return kss_err(err, KC_ENOTFOUND, 404, "namespaces \"%s\" not found", ns);
    const char *phase =
        json_string_value(json_object_get(json_object_get(n->obj, "status"), "phase"));
    if (json_object_get(json_object_get(n->obj, "metadata"), "deletionTimestamp") ||
        (phase && !strcmp(phase, "Terminating"))) {
        char q[256];
        return kss_err(err, KC_EFORBIDDEN, 403,
                       "%s \"%s\" is forbidden: unable to create new content in namespace %s "
                       "because it is being terminated",
                       kss_qualified(t, q, sizeof(q)), name, ns);
    }
    return KC_OK;
}

static kc_code conflict(kc_err *err, const ks_type *t, const char *name)
{
    char q[256];
    return kss_err(err, KC_ECONFLICT, 409,
                   "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
                   "please apply your changes to the latest version and try again",
                   kss_qualified(t, q, sizeof(q)), name);
}

/* ---- create ---- */

/* What the namespace strategy of the API server forces on a new namespace. */
static void namespace_defaults(json_t *obj, json_t *meta, const char *name)
{
    json_t *labels = json_object_get(meta, "labels");
    if (!json_is_object(labels)) {
        labels = json_object();
        json_object_set_new(meta, "labels", labels);
    }
    json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    if (json_array_size(json_object_get(spec, "finalizers")) == 0)
        json_object_set_new(spec, "finalizers", json_pack("[s]", "kubernetes"));
    json_object_set_new(obj, "status", json_pack("{s:s}", "phase", "Active"));
}

kc_code ks_create(ks_store *st, const ks_rtype *rt, const char *ns, json_t *obj, json_t **out,
                  kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    kc_code rc = KC_OK;
    char nsbuf[256], name[KS_NAME_MAX + 1], uid[37], now[32];
    if (out)
        *out = NULL;
    if (!st || !t) {
        json_decref(obj);
        return kss_err(err, KC_EARG, 0, "ks_create: store and type are required");
    }
    json_t *meta = NULL;
    if ((rc = take_private(t, obj, "create", &obj, &meta, err)) != KC_OK)
        return rc;
    if ((rc = resolve_ns(t, ns, meta, nsbuf, sizeof(nsbuf), err)) != KC_OK)
        goto done;
    const char *n = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    bool generate = !(n && n[0]);
    if (generate && !(gen && gen[0])) {
        rc = kss_err(err, KC_EINVALID, 422,
                     "%s \"\" is invalid: metadata.name: Required value: name or generateName is "
                     "required",
                     t->pub.kind);
        goto done;
    }
    if (!generate && strlen(n) > KS_NAME_MAX) {
        rc = kss_err(err, KC_EINVALID, 422,
                     "%s \"%.64s...\" is invalid: metadata.name: Invalid value: must be no more "
                     "than 253 characters",
                     t->pub.kind, n);
        goto done;
    }
    snprintf(name, sizeof(name), "%s", generate ? "" : n);
    char prefix[KS_GENERATE_NAME_MAX + 1];
    snprintf(prefix, sizeof(prefix), "%s", generate ? gen : "");
    /* The server owns these; whatever the client sent is dropped. */
    json_object_del(meta, "resourceVersion");
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    json_object_del(meta, "selfLink");
    kss_uuid(uid);
    ks_now_rfc3339(now);
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    if (t->pub.no_generation)
        json_object_del(meta, "generation");
    else
        json_object_set_new(meta, "generation", json_integer(1));
    json_object_set_new(obj, "apiVersion", json_string(t->api_version));
    json_object_set_new(obj, "kind", json_string(t->pub.kind));

    pthread_rwlock_wrlock(&st->lock);
    if (!t->served) {
        rc = kss_unserved(err, t);
        goto unlock;
    }
    if ((rc = check_namespace(st, t, nsbuf, name, err)) != KC_OK)
        goto unlock;
    if (generate) {
        /* Like the API server, retry a few times when a generated name is taken. */
        for (int attempt = 0; attempt < 8; attempt++) {
            char suffix[6];
            kss_random_suffix(suffix);
            snprintf(name, sizeof(name), "%s%s", prefix, suffix);
            if (!kss_find(t->bucket, nsbuf, name))
                break;
        }
    }
    json_object_set_new(meta, "name", json_string(name));
    if (kss_find(t->bucket, nsbuf, name)) {
        char q[256];
        rc = kss_err(err, KC_EALREADYEXISTS, 409, "%s \"%s\" already exists",
                     kss_qualified(t, q, sizeof(q)), name);
        goto unlock;
    }
    if (t->bucket == st->ns_bucket)
        namespace_defaults(obj, meta, name);
    if (st->admit && (rc = st->admit(st->admit_ud, &t->pub, NULL, obj, false, err)) != KC_OK)
        goto unlock;
    /* Admission may default fields, never the identity of the object. */
    meta = ensure_meta(obj);
    if (!meta) {
        rc = kss_err(err, KC_ESERVER, 500, "admission replaced the metadata of %s", name);
        goto unlock;
    }
    json_object_set_new(meta, "name", json_string(name));
    if (t->bucket->namespaced)
        json_object_set_new(meta, "namespace", json_string(nsbuf));
    json_t *stored = obj;
    obj = NULL;
    if ((rc = kss_commit_add(st, t, t->bucket, nsbuf, name, stored, err)) != KC_OK)
        goto unlock;
    if (out && !(*out = kss_export(t, stored)))
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", name);
unlock:
    pthread_rwlock_unlock(&st->lock);
done:
    json_decref(obj);
    return rc;
}

/* ---- update and mutate ---- */

/* Lists the finalizers of next missing from old, Go-style (`[]string{"a", "b"}`), into buf;
 * returns how many there are. */
static size_t new_finalizers(const json_t *old, const json_t *next, char *buf, size_t size)
{
    const json_t *arr = json_object_get(json_object_get(next, "metadata"), "finalizers");
    size_t count = 0, used = (size_t)snprintf(buf, size, "[]string{");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *f = json_string_value(json_array_get(arr, i));
        if (!f || has_finalizer(old, f))
            continue;
        if (used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s\"%s\"", count ? ", " : "", f);
        count++;
    }
    if (used < size)
        snprintf(buf + used, size - used, "}");
    return count;
}

/* Copies the fields the server owns from the stored object into next's metadata. */
static void keep_system_meta(const json_t *stored, json_t *next, const ks_type *t)
{
    const json_t *smeta = json_object_get(stored, "metadata");
    json_t *meta = ensure_meta(next);
    if (!meta) {
        json_object_set_new(next, "metadata", json_deep_copy(smeta));
        return;
    }
    static const char *const owned[] = {"name",
                                        "namespace",
                                        "uid",
                                        "creationTimestamp",
                                        "generation",
                                        "resourceVersion",
                                        "deletionTimestamp",
                                        "deletionGracePeriodSeconds",
                                        NULL};
    for (size_t i = 0; owned[i]; i++) {
        json_t *v = json_object_get(smeta, owned[i]);
        if (v)
            json_object_set_new(meta, owned[i], json_deep_copy(v));
        else
            json_object_del(meta, owned[i]);
    }
    json_object_del(meta, "selfLink");
    if (t) {
        json_object_set_new(next, "apiVersion", json_string(t->api_version));
        json_object_set_new(next, "kind", json_string(t->pub.kind));
    }
}

/* A namespace's spec.finalizers only change through /finalize (the namespace controller, which
 * uses ks_mutate): an update (PUT, apply) keeps the stored ones, as the API server does. */
static void keep_namespace_finalizers(const json_t *stored, json_t *next)
{
    json_t *fin = json_object_get(json_object_get(stored, "spec"), "finalizers");
    json_t *spec = json_object_get(next, "spec");
    if (!fin) {
        if (json_is_object(spec))
            json_object_del(spec, "finalizers");
        return;
    }
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(next, "spec", spec);
    }
    json_object_set_new(spec, "finalizers", json_deep_copy(fin));
}

/* A status write's next state is the stored one with cand's status. When cand has the stored
 * top-level fields in the same order, it becomes that state in place: fields other than status
 * that differ from the stored ones are put back (copies), those the stored state lacks go. false
 * (nothing changed): the caller copies the stored state instead. */
static bool status_write_in_place(const json_t *stored, json_t *cand)
{
    if (!json_is_object(cand))
        return false;
    void *b = json_object_iter(cand);
    for (void *a = json_object_iter((json_t *)stored); a;
         a = json_object_iter_next((json_t *)stored, a)) {
        while (b && !json_object_get(stored, json_object_iter_key(b)))
            b = json_object_iter_next(cand, b); /* a field cand added: it goes below */
        if (!b || strcmp(json_object_iter_key(b), json_object_iter_key(a)))
            return false;
        b = json_object_iter_next(cand, b);
    }
    for (void *it = json_object_iter(cand); it;) {
        void *next = json_object_iter_next(cand, it);
        const char *k = json_object_iter_key(it);
        json_t *sv = json_object_get(stored, k);
        if (!strcmp(k, "status")) {
            /* the write's own */
        } else if (!sv) {
            json_object_del(cand, k);
        } else if (!json_equal(sv, json_object_iter_value(it))) {
            json_t *copy = json_deep_copy(sv);
            if (!copy || json_object_iter_set_new(cand, it, copy) != 0)
                return false; /* cand's status is untouched: the caller's copy takes it */
        }
        it = next;
    }
    return true;
}

/* Turns a candidate (an update's body or a mutated copy; STOLEN) into the next state of o and
 * commits it: status handling, the finalizer rule, admission, generation, no-op writes, and
 * deletion once the last finalizer goes. Write lock held. */
static kc_code apply_write(ks_store *st, ks_type *t, ks_obj *o, json_t *cand, ks_write_kind kind,
                           bool api_update, json_t **out, kc_err *err)
{
    const json_t *stored = o->obj;
    json_t *next = NULL;
    kc_code rc = KC_OK;
    if (kind == KS_WRITE_STATUS && !api_update && status_write_in_place(stored, cand)) {
        /* cand is the stored state a mutate function changed (private; its top-level fields in
         * the stored order): it keeps the status and whatever else is unchanged. */
        next = cand;
    } else if (kind == KS_WRITE_STATUS) {
        next = json_deep_copy(stored);
        json_t *status = json_object_get(cand, "status");
        if (next && status)
            json_object_set_new(next, "status", json_deep_copy(status));
        else if (next)
            json_object_del(next, "status");
        json_decref(cand);
    } else {
        next = cand;
        if (t->pub.has_status) {
            json_t *status = json_object_get(stored, "status");
            json_t *have = json_object_get(next, "status");
            if (!status)
                json_object_del(next, "status");
            else if (!(have && have->refcount == 1 && json_equal(have, status)))
                json_object_set_new(next, "status", json_deep_copy(status));
        }
    }
    cand = NULL;
    if (!next)
        return kss_err(err, KC_ENOMEM, 500, "out of memory updating %s", o->name);
    if (api_update && kind == KS_WRITE_MAIN && t->bucket == st->ns_bucket)
        keep_namespace_finalizers(stored, next);
    keep_system_meta(stored, next, t);
    if (json_object_get(json_object_get(stored, "metadata"), "deletionTimestamp")) {
        char list[256];
        if (new_finalizers(stored, next, list, sizeof(list)) > 0) {
            rc = kss_err(err, KC_EINVALID, 422,
                         "%s \"%s\" is invalid: metadata.finalizers: Forbidden: no new finalizers "
                         "can be added if the object is being deleted, found new finalizers %s",
                         t->pub.kind, o->name, list);
            goto fail;
        }
    }
    if (st->admit && (rc = st->admit(st->admit_ud, &t->pub, stored, next, kind == KS_WRITE_STATUS,
                                     err)) != KC_OK)
        goto fail;
    if (!json_is_object(json_object_get(next, "metadata"))) {
        rc = kss_err(err, KC_ESERVER, 500, "admission replaced the metadata of %s", o->name);
        goto fail;
    }
    keep_system_meta(stored, next, t);
    /* Types with a status subresource do not count status changes as a new generation; for the
     * others (custom resources without /status) status is just another field. */
    if (!t->pub.no_generation && differs_outside(stored, next, t->pub.has_status)) {
        json_t *meta = json_object_get(next, "metadata");
        json_object_set_new(meta, "generation", json_integer(meta_int(stored, "generation") + 1));
    }
    if (kc_json_equal(stored, next)) {
        json_decref(next);
        if (out && !(*out = kss_export(t, stored)))
            return kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", o->name);
        return KC_OK;
    }
    if (deletion_complete(st, t->bucket, next)) {
        json_t *final = kss_commit_remove(st, t, t->bucket, o, next);
        if (out && !(*out = kss_export(t, final)))
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory copying the deleted object");
        json_decref(final);
        return rc;
    }
    kss_commit_modify(st, t, t->bucket, o, next);
    if (out && !(*out = kss_export(t, next)))
        return kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", o->name);
    return KC_OK;
fail:
    json_decref(next);
    return rc;
}

kc_code ks_update(ks_store *st, const ks_rtype *rt, const char *ns, json_t *obj, ks_write_kind kind,
                  json_t **out, kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    kc_code rc = KC_OK;
    char nsbuf[256], name[KS_NAME_MAX + 1];
    if (out)
        *out = NULL;
    if (!st || !t) {
        json_decref(obj);
        return kss_err(err, KC_EARG, 0, "ks_update: store and type are required");
    }
    json_t *meta = NULL;
    if ((rc = take_private(t, obj, "update", &obj, &meta, err)) != KC_OK)
        return rc;
    if ((rc = resolve_ns(t, ns, meta, nsbuf, sizeof(nsbuf), err)) != KC_OK)
        goto done;
    const char *n = json_string_value(json_object_get(meta, "name"));
    if (!n || !n[0] || strlen(n) > KS_NAME_MAX) {
        rc = kss_err(err, KC_EINVALID, 422,
                     "%s \"\" is invalid: metadata.name: Required value: name is required",
                     t->pub.kind);
        goto done;
    }
    snprintf(name, sizeof(name), "%s", n);
    pthread_rwlock_wrlock(&st->lock);
    if (!t->served) {
        rc = kss_unserved(err, t);
        goto unlock;
    }
    ks_obj *o = kss_find(t->bucket, nsbuf, name);
    if (!o) {
        rc = kss_not_found(err, t, name);
        goto unlock;
    }
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (rv && rv[0] && strcmp(rv, kss_meta_str(o->obj, "resourceVersion")) != 0) {
        rc = conflict(err, t, name);
        goto unlock;
    }
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    if (uid && uid[0] && strcmp(uid, kss_meta_str(o->obj, "uid")) != 0) {
        rc = kss_err(err, KC_ECONFLICT, 409,
                     "Precondition failed: UID in precondition: %s, UID in object meta: %s", uid,
                     kss_meta_str(o->obj, "uid"));
        goto unlock;
    }
    rc = apply_write(st, t, o, obj, kind, true, out, err);
    obj = NULL;
unlock:
    pthread_rwlock_unlock(&st->lock);
done:
    json_decref(obj);
    return rc;
}

kc_code ks_mutate(ks_store *st, const ks_rtype *rt, const char *ns, const char *name,
                  ks_write_kind kind, ks_mutate_fn fn, void *ud, json_t **out, kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    kc_code rc = KC_OK;
    if (out)
        *out = NULL;
    if (!st || !t || !name || !fn)
        return kss_err(err, KC_EARG, 0, "ks_mutate: store, type, name and function are required");
    pthread_rwlock_wrlock(&st->lock);
    if (!t->served) {
        rc = kss_unserved(err, t);
        goto unlock;
    }
    ks_obj *o = kss_find(t->bucket, t->bucket->namespaced ? (ns ? ns : "") : "", name);
    if (!o) {
        rc = kss_not_found(err, t, name);
        goto unlock;
    }
    json_t *copy = kss_export(t, o->obj);
    if (!copy) {
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", name);
        goto unlock;
    }
    if ((rc = fn(ud, copy, err)) != KC_OK) {
        json_decref(copy);
        goto unlock;
    }
    if (!json_is_object(copy)) {
        json_decref(copy);
        rc = kss_err(err, KC_EARG, 0, "ks_mutate: the function left %s not an object", name);
        goto unlock;
    }
    /* fn may have linked in values it still holds (json_object_set), or kept the whole object:
     * what is shared is copied, the rest of the export is already private. */
    json_t *mine = copy;
    if (copy->refcount > 1) {
        mine = json_deep_copy(copy);
        json_decref(copy);
    }
    if (!mine || !kss_privatize(mine)) {
        json_decref(mine);
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", name);
        goto unlock;
    }
    rc = apply_write(st, t, o, mine, kind, false, out, err);
unlock:
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

/* ---- delete ---- */

static kc_code check_preconditions(const ks_delete_opts *opts, const json_t *obj, kc_err *err)
{
    if (!opts)
        return KC_OK;
    const char *uid = kss_meta_str(obj, "uid");
    if (opts->precondition_uid && opts->precondition_uid[0] &&
        strcmp(opts->precondition_uid, uid) != 0)
        return kss_err(err, KC_ECONFLICT, 409,
                       "Precondition failed: UID in precondition: %s, UID in object meta: %s",
                       opts->precondition_uid, uid);
    const char *rv = kss_meta_str(obj, "resourceVersion");
    if (opts->precondition_resource_version && opts->precondition_resource_version[0] &&
        strcmp(opts->precondition_resource_version, rv) != 0)
        return kss_err(err, KC_ECONFLICT, 409,
                       "Precondition failed: ResourceVersion in precondition: %s, "
                       "ResourceVersion in object meta: %s",
                       opts->precondition_resource_version, rv);
    return KC_OK;
}

/* The grace period of a delete: pods default to spec.terminationGracePeriodSeconds (30), but pods
 * that never reached a node or already finished go at once; other objects have none. */
static long delete_grace(const ks_bucket *b, const json_t *obj, const ks_delete_opts *opts)
{
    if (!is_core(b, "pods"))
        return 0;
    const json_t *spec = json_object_get(obj, "spec");
    const char *node = json_string_value(json_object_get(spec, "nodeName"));
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    if (!node || !node[0] || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
        return 0;
    if (opts && opts->grace_period_seconds >= 0)
        return opts->grace_period_seconds;
    json_t *tg = json_object_get(spec, "terminationGracePeriodSeconds");
    return json_is_integer(tg) && json_integer_value(tg) >= 0 ? (long)json_integer_value(tg) : 30;
}

static void add_finalizer(json_t *obj, const char *f)
{
    if (has_finalizer(obj, f))
        return;
    json_t *meta = json_object_get(obj, "metadata");
    json_t *arr = json_object_get(meta, "finalizers");
    if (!json_is_array(arr)) {
        arr = json_array();
        json_object_set_new(meta, "finalizers", arr);
    }
    json_array_append_new(arr, json_string(f));
}

static void set_deletion(json_t *obj, long grace, bool with_grace)
{
    char ts[32];
    rfc3339_after(grace, ts);
    json_t *meta = json_object_get(obj, "metadata");
    json_object_set_new(meta, "deletionTimestamp", json_string(ts));
    if (with_grace)
        json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(grace));
}

kc_code ks_delete(ks_store *st, const ks_rtype *rt, const char *ns, const char *name,
                  const ks_delete_opts *opts, json_t **out, kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    kc_code rc = KC_OK;
    json_t *result = NULL; /* borrowed state to copy out */
    json_t *final = NULL;  /* owned final state of a removal */
    if (out)
        *out = NULL;
    if (!st || !t || !name)
        return kss_err(err, KC_EARG, 0, "ks_delete: store, type and name are required");
    pthread_rwlock_wrlock(&st->lock);
    if (!t->served) {
        rc = kss_unserved(err, t);
        goto unlock;
    }
    ks_bucket *b = t->bucket;
    ks_obj *o = kss_find(b, b->namespaced ? (ns ? ns : "") : "", name);
    if (!o) {
        rc = kss_not_found(err, t, name);
        goto unlock;
    }
    if ((rc = check_preconditions(opts, o->obj, err)) != KC_OK)
        goto unlock;
    long grace = delete_grace(b, o->obj, opts);
    bool is_ns = b == st->ns_bucket;
    if (json_object_get(json_object_get(o->obj, "metadata"), "deletionTimestamp")) {
        /* Already being deleted: only a shorter pod grace period changes anything. */
        if (!is_core(b, "pods") || grace >= meta_int(o->obj, "deletionGracePeriodSeconds")) {
            result = o->obj;
            goto unlock;
        }
        json_t *next = json_deep_copy(o->obj);
        if (!next) {
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory deleting %s", name);
            goto unlock;
        }
        set_deletion(next, grace, true);
        if (deletion_complete(st, b, next)) {
            final = kss_commit_remove(st, t, b, o, next);
        } else {
            kss_commit_modify(st, t, b, o, next);
            result = next;
        }
        goto unlock;
    }
    json_t *next = json_deep_copy(o->obj);
    if (!next) {
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory deleting %s", name);
        goto unlock;
    }
    ks_propagation prop = opts ? opts->propagation : KS_PROPAGATE_DEFAULT;
    if (prop == KS_PROPAGATE_FOREGROUND)
        add_finalizer(next, "foregroundDeletion");
    else if (prop == KS_PROPAGATE_ORPHAN)
        add_finalizer(next, "orphan");
    bool wait = finalizer_count(next) > 0 || grace > 0;
    if (is_ns) {
        /* The namespace controller empties it, then drops spec.finalizers. */
        json_object_set_new(next, "status", json_pack("{s:s}", "phase", "Terminating"));
        wait = wait ||
               json_array_size(json_object_get(json_object_get(next, "spec"), "finalizers")) > 0;
    }
    if (!wait) {
        json_decref(next);
        final = kss_commit_remove(st, t, b, o, NULL);
        goto unlock;
    }
    set_deletion(next, grace, !is_ns);
    kss_commit_modify(st, t, b, o, next);
    result = next;
unlock:
    if (rc == KC_OK && out) {
        *out = kss_export(t, final ? final : result);
        if (!*out)
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", name);
    }
    pthread_rwlock_unlock(&st->lock);
    json_decref(final);
    return rc;
}
