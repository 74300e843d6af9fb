/* ks_store: kubesim's object store: lifecycle, served types, identifiers and timestamps, and the
 * read paths (get, list with selectors and continue tokens, count). Writes are in
 * ks_store_write.c, the history and watchers in ks_store_watch.c. */
#include "ks_store_int.h"

#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define KS_DEFAULT_HISTORY   KS_STORE_DEFAULT_HISTORY
#define KS_DEFAULT_QUEUE_CAP 100000

/* ---- small helpers ---- */

kc_code kss_err(kc_err *err, kc_code code, int http, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    kc_err_vset(err, code, fmt, ap);
    va_end(ap);
    err->http_status = http;
    return code;
}

const char *kss_qualified(const ks_type *t, char *buf, size_t size)
{
    if (!t->pub.group[0])
        snprintf(buf, size, "%s", t->pub.resource);
    else
        snprintf(buf, size, "%s.%s", t->pub.resource, t->pub.group);
    return buf;
}

kc_code kss_not_found(kc_err *err, const ks_type *t, const char *name)
{
    char q[256];
    return kss_err(err, KC_ENOTFOUND, 404, "%s \"%s\" not found", kss_qualified(t, q, sizeof(q)),
                   name);
}

kc_code kss_unserved(kc_err *err, const ks_type *t)
{
    char q[256];
    return kss_err(err, KC_ENOTFOUND, 404,
                   "the server could not find the requested resource (%s is no longer served)",
                   kss_qualified(t, q, sizeof(q)));
}

const char *kss_meta_str(const json_t *obj, const char *field)
{
    const char *s = json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
    return s ? s : "";
}

void ks_now_rfc3339(char buf[32])
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void ks_now_rfc3339_micro(char buf[40])
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    time_t secs = tv.tv_sec;
    gmtime_r(&secs, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, 40, "%s.%06ldZ", base, (long)tv.tv_usec);
}

static void random_bytes(unsigned char *p, size_t n)
{
    if (RAND_bytes(p, (int)n) == 1)
        return;
    /* OpenSSL's generator failing is near impossible; identifiers must still differ. */
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(p, 1, n, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = got; i < n; i++)
        p[i] = (unsigned char)rand();
}

void kss_uuid(char out[37])
{
    unsigned char b[16];
    random_bytes(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

void kss_random_suffix(char out[6])
{
    /* The API server's alphabet: no vowels (no words) and no confusable characters. */
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char b[5];
    random_bytes(b, sizeof(b));
    for (int i = 0; i < 5; i++)
        out[i] = alphabet[b[i] % (sizeof(alphabet) - 1)];
    out[5] = '\0';
}

json_t *kss_export(const ks_type *t, const json_t *stored)
{
    json_t *copy = json_deep_copy(stored);
    if (copy && t) {
        const char *av = json_string_value(json_object_get(copy, "apiVersion"));
        if (!av || strcmp(av, t->api_version) != 0)
            json_object_set_new(copy, "apiVersion", json_string(t->api_version));
    }
    return copy;
}

/* Whether v is held elsewhere too (jansson's singletons true, false and null never change). */
static bool shared_value(const json_t *v)
{
    return v->refcount > 1 && !json_is_true(v) && !json_is_false(v) && !json_is_null(v);
}

/* child made private: itself when only its parent holds it (its own children made private),
 * else a deep copy; NULL when out of memory. */
static json_t *private_child(json_t *child)
{
    if (!shared_value(child))
        return kss_privatize(child) ? child : NULL;
    return json_deep_copy(child);
}

bool kss_privatize(json_t *v)
{
    if (json_is_object(v)) {
        for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
            json_t *c = json_object_iter_value(it), *p = private_child(c);
            if (!p || (p != c && json_object_iter_set_new(v, it, p) != 0))
                return false;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *c = json_array_get(v, i), *p = private_child(c);
            if (!p || (p != c && json_array_set_new(v, i, p) != 0))
                return false;
        }
    }
    return true;
}

void kss_share_unchanged(json_t *next, const json_t *prev, int depth)
{
    if (depth <= 0 || next == prev)
        return;
    if (json_is_object(next) && json_is_object(prev)) {
        for (void *it = json_object_iter(next); it; it = json_object_iter_next(next, it)) {
            json_t *nv = json_object_iter_value(it);
            json_t *pv = json_object_get(prev, json_object_iter_key(it));
            if (!pv || nv == pv)
                continue;
            /* Exact equality (jansson's): 1 and 1.0 stay distinct values. */
            if (json_equal(nv, pv))
                json_object_iter_set(next, it, pv);
            else
                kss_share_unchanged(nv, pv, depth - 1);
        }
    } else if (json_is_array(next) && json_is_array(prev)) {
        size_t n = json_array_size(next), m = json_array_size(prev);
        for (size_t i = 0; i < n && i < m; i++) {
            json_t *nv = json_array_get(next, i), *pv = json_array_get(prev, i);
            if (nv == pv)
                continue;
            if (json_equal(nv, pv))
                json_array_set(next, i, pv);
            else
                kss_share_unchanged(nv, pv, depth - 1);
        }
    }
}

/* ---- buckets and the sorted index ---- */

int kss_key_cmp(const char *ns1, const char *n1, const char *ns2, const char *n2)
{
    int c = strcmp(ns1, ns2);
    return c ? c : strcmp(n1, n2);
}

size_t kss_lower_bound(const ks_bucket *b, const char *ns, const char *name)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kss_key_cmp(b->sorted[mid]->ns, b->sorted[mid]->name, ns, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void make_key(const ks_bucket *b, const char *ns, const char *name, char *buf, size_t size)
{
    if (b->namespaced)
        snprintf(buf, size, "%s/%s", ns, name);
    else
        snprintf(buf, size, "%s", name);
}

ks_obj *kss_find(ks_bucket *b, const char *ns, const char *name)
{
    char key[512];
    make_key(b, ns ? ns : "", name, key, sizeof(key));
    return kc_map_get(b->objs, key);
}

kc_code kss_index_add(ks_bucket *b, ks_obj *o)
{
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 64;
        ks_obj **ns = realloc(b->sorted, ncap * sizeof(*ns));
        if (!ns)
            return KC_ENOMEM;
        b->sorted = ns;
        b->cap = ncap;
    }
    char key[512];
    make_key(b, o->ns, o->name, key, sizeof(key));
    if (kc_map_put(b->objs, key, o, NULL) != KC_OK)
        return KC_ENOMEM;
    size_t at = kss_lower_bound(b, o->ns, o->name);
    memmove(b->sorted + at + 1, b->sorted + at, (b->n - at) * sizeof(*b->sorted));
    b->sorted[at] = o;
    b->n++;
    kss_oidx_add(b, o);
    return KC_OK;
}

void kss_index_remove(ks_bucket *b, ks_obj *o)
{
    kss_oidx_remove(b, o, o->obj);
    char key[512];
    make_key(b, o->ns, o->name, key, sizeof(key));
    kc_map_remove(b->objs, key);
    size_t at = kss_lower_bound(b, o->ns, o->name);
    if (at < b->n && b->sorted[at] == o) {
        memmove(b->sorted + at, b->sorted + at + 1, (b->n - at - 1) * sizeof(*b->sorted));
        b->n--;
    }
}

void kss_obj_free(void *p)
{
    ks_obj *o = p;
    if (!o)
        return;
    json_decref(o->obj);
    free(o->ns);
    free(o->name);
    free(o);
}

static void bucket_free(ks_bucket *b)
{
    if (!b)
        return;
    kc_map_free(b->objs, kss_obj_free);
    kss_bucket_index_free(b);
    free(b->sorted);
    free(b->watchers);
    free(b->group);
    free(b->resource);
    free(b);
}

ks_bucket *kss_bucket_get(ks_store *st, const char *group, const char *resource, bool namespaced)
{
    for (size_t i = 0; i < st->nbuckets; i++)
        if (!strcmp(st->buckets[i]->group, group) && !strcmp(st->buckets[i]->resource, resource))
            return st->buckets[i];
    if (st->nbuckets == st->capbuckets) {
        size_t ncap = st->capbuckets ? st->capbuckets * 2 : 32;
        ks_bucket **nb = realloc(st->buckets, ncap * sizeof(*nb));
        if (!nb)
            return NULL;
        st->buckets = nb;
        st->capbuckets = ncap;
    }
    ks_bucket *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->group = strdup(group);
    b->resource = strdup(resource);
    b->objs = kc_map_new();
    b->namespaced = namespaced;
    if (!b->group || !b->resource || !b->objs || kss_bucket_index_init(b) != KC_OK) {
        bucket_free(b);
        return NULL;
    }
    st->buckets[st->nbuckets++] = b;
    return b;
}

ks_type *kss_bucket_type(ks_store *st, ks_bucket *b)
{
    for (size_t i = 0; i < st->ntypes; i++)
        if (st->types[i]->bucket == b && st->types[i]->served)
            return st->types[i];
    return NULL;
}

/* ---- store lifecycle ---- */

static kc_code add_initial_namespace(ks_store *st, const char *name)
{
    char uid[37], now[32];
    kss_uuid(uid);
    ks_now_rfc3339(now);
    /* Namespaces have no metadata.generation on a real API server. */
    json_t *ns = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:[s]}, s:{s:s}}",
                           "apiVersion", "v1", "kind", "Namespace", "metadata", "name", name, "uid",
                           uid, "creationTimestamp", now, "labels", "kubernetes.io/metadata.name",
                           name, "spec", "finalizers", "kubernetes", "status", "phase", "Active");
    if (!ns)
        return KC_ENOMEM;
    return kss_commit_add(st, NULL, st->ns_bucket, "", name, ns, NULL);
}

ks_store *ks_store_new(size_t history_cap)
{
    ks_store *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* Lists and watches must not starve writers (controllers write continuously). */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    st->rv = 1;
    st->delivered_rv = 1;
    st->hfloor = 1;
    st->types_gen = 1;
    st->hcap = history_cap ? history_cap : KS_DEFAULT_HISTORY;
    st->queue_cap = st->hcap > KS_DEFAULT_QUEUE_CAP ? st->hcap : KS_DEFAULT_QUEUE_CAP;
    st->hist = calloc(st->hcap, sizeof(*st->hist));
    if (!st->hist)
        goto fail;
    /* The namespaces bucket exists from the start so that the default namespaces do too; the
     * namespace-existence check on create starts once a namespaces type is registered. */
    st->ns_bucket = kss_bucket_get(st, "", "namespaces", false);
    if (!st->ns_bucket)
        goto fail;
    static const char *const initial[] = {"default", "kube-node-lease", "kube-public",
                                          "kube-system"};
    for (size_t i = 0; i < sizeof(initial) / sizeof(initial[0]); i++)
        if (add_initial_namespace(st, initial[i]) != KC_OK)
            goto fail;
    return st;
fail:
    ks_store_free(st);
    return NULL;
}

static void strv_free(const char *const *v)
{
    if (!v)
        return;
    for (size_t i = 0; v[i]; i++)
        free((char *)v[i]);
    free((void *)v);
}

static void rtype_fields_free(ks_rtype *r)
{
    free((char *)r->group);
    free((char *)r->version);
    free((char *)r->resource);
    free((char *)r->kind);
    free((char *)r->singular);
    free((char *)r->crd_name);
    strv_free(r->short_names);
    strv_free(r->categories);
    json_decref(r->printer_columns);
    json_decref(r->schema);
}

void ks_store_free(ks_store *st)
{
    if (!st)
        return;
    kss_persist_close(st);
    pthread_rwlock_wrlock(&st->lock);
    kss_watch_shutdown(st);
    pthread_rwlock_unlock(&st->lock);
    for (size_t i = 0; i < st->nbuckets; i++)
        bucket_free(st->buckets[i]);
    free(st->buckets);
    for (size_t i = 0; i < st->ntypes; i++) {
        rtype_fields_free(&st->types[i]->pub);
        free(st->types[i]->api_version);
        free(st->types[i]);
    }
    free(st->types);
    for (size_t i = 0; i < st->nretired; i++) {
        rtype_fields_free(st->retired[i]);
        free(st->retired[i]);
    }
    free(st->retired);
    free(st->all_watchers);
    pthread_rwlock_destroy(&st->lock);
    free(st);
}

/* ---- types ---- */

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static const char *const *strv_dup(const char *const *v, bool *oom)
{
    if (!v)
        return NULL;
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof(*out));
    if (!out) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!(out[i] = strdup(v[i])))
            *oom = true;
    return (const char *const *)out;
}

static bool strv_equal(const char *const *a, const char *const *b)
{
    if (!a || !b)
        return a == b;
    size_t i = 0;
    for (; a[i] && b[i]; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return !a[i] && !b[i];
}

/* A deep, owned copy of every field of in (NULL on allocation failure). */
static ks_rtype *rtype_copy(const ks_rtype *in)
{
    ks_rtype *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    bool oom = false;
    *r = *in;
    r->group = dup_or_empty(in->group);
    r->version = dup_or_empty(in->version);
    r->resource = dup_or_empty(in->resource);
    r->kind = dup_or_empty(in->kind);
    r->singular = in->singular ? strdup(in->singular) : NULL;
    r->crd_name = in->crd_name ? strdup(in->crd_name) : NULL;
    r->short_names = strv_dup(in->short_names, &oom);
    r->categories = strv_dup(in->categories, &oom);
    r->printer_columns = json_incref(in->printer_columns);
    r->schema = json_incref(in->schema);
    if (oom || !r->group || !r->version || !r->resource || !r->kind ||
        (in->singular && !r->singular) || (in->crd_name && !r->crd_name)) {
        rtype_fields_free(r);
        free(r);
        return NULL;
    }
    return r;
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

/* Moves the fields of `nf` that differ into cur; the replaced (or identical, unused) values end
 * up in nf, which is retired: readers may still hold the old pointers until the store is freed. */
static void rtype_swap_changed(ks_rtype *cur, ks_rtype *nf)
{
#define SWAP_IF(field, differ)                                                                     \
    do {                                                                                           \
        if (differ) {                                                                              \
            __typeof__(cur->field) tmp_ = cur->field;                                              \
            cur->field = nf->field;                                                                \
            nf->field = tmp_;                                                                      \
        }                                                                                          \
    } while (0)
    SWAP_IF(kind, !str_eq(cur->kind, nf->kind));
    SWAP_IF(singular, !str_eq(cur->singular, nf->singular));
    SWAP_IF(crd_name, !str_eq(cur->crd_name, nf->crd_name));
    SWAP_IF(short_names, !strv_equal(cur->short_names, nf->short_names));
    SWAP_IF(categories, !strv_equal(cur->categories, nf->categories));
    SWAP_IF(printer_columns, !json_equal(cur->printer_columns, nf->printer_columns) ||
                                 !cur->printer_columns != !nf->printer_columns);
    SWAP_IF(schema, !json_equal(cur->schema, nf->schema) || !cur->schema != !nf->schema);
#undef SWAP_IF
    cur->namespaced = nf->namespaced;
    cur->has_status = nf->has_status;
    cur->has_scale = nf->has_scale;
    cur->no_generation = nf->no_generation;
}

const ks_rtype *ks_store_register(ks_store *st, const ks_rtype *in)
{
    if (!st || !in || !in->resource || !in->resource[0] || !in->kind || !in->version)
        return NULL;
    ks_rtype *nf = rtype_copy(in);
    if (!nf)
        return NULL;
    ks_type *t = NULL;
    pthread_rwlock_wrlock(&st->lock);
    for (size_t i = 0; i < st->ntypes; i++) {
        ks_rtype *p = &st->types[i]->pub;
        if (!strcmp(p->group, nf->group) && !strcmp(p->version, nf->version) &&
            !strcmp(p->resource, nf->resource)) {
            t = st->types[i];
            break;
        }
    }
    if (t) {
        if (st->nretired == st->capretired) {
            size_t ncap = st->capretired ? st->capretired * 2 : 16;
            ks_rtype **nr = realloc(st->retired, ncap * sizeof(*nr));
            if (!nr)
                goto oom;
            st->retired = nr;
            st->capretired = ncap;
        }
        rtype_swap_changed(&t->pub, nf);
        st->retired[st->nretired++] = nf;
        nf = NULL;
    } else {
        if (st->ntypes == st->captypes) {
            size_t ncap = st->captypes ? st->captypes * 2 : 64;
            ks_type **nt = realloc(st->types, ncap * sizeof(*nt));
            if (!nt)
                goto oom;
            st->types = nt;
            st->captypes = ncap;
        }
        ks_bucket *b = kss_bucket_get(st, nf->group, nf->resource, nf->namespaced);
        t = calloc(1, sizeof(*t));
        if (!b || !t)
            goto oom;
        size_t avlen = strlen(nf->group) + strlen(nf->version) + 2;
        t->api_version = malloc(avlen);
        if (!t->api_version)
            goto oom;
        if (nf->group[0])
            snprintf(t->api_version, avlen, "%s/%s", nf->group, nf->version);
        else
            snprintf(t->api_version, avlen, "%s", nf->version);
        t->pub = *nf;
        free(nf);
        nf = NULL;
        t->bucket = b;
        /* The bucket keeps the scope of its first type; a later namespaced flag cannot change
         * how existing keys were built. */
        if (b->nserved == 0 && b->n == 0)
            b->namespaced = t->pub.namespaced;
        st->types[st->ntypes++] = t;
    }
    if (!t->served) {
        t->served = true;
        t->bucket->nserved++;
    }
    __atomic_add_fetch(&st->types_gen, 1, __ATOMIC_SEQ_CST);
    pthread_rwlock_unlock(&st->lock);
    return &t->pub;
oom:
    if (t && !t->bucket)
        free(t);
    pthread_rwlock_unlock(&st->lock);
    if (nf) {
        rtype_fields_free(nf);
        free(nf);
    }
    return NULL;
}

void ks_store_unregister(ks_store *st, const ks_rtype *rt)
{
    ks_type *t = (ks_type *)rt;
    if (!st || !t)
        return;
    pthread_rwlock_wrlock(&st->lock);
    if (!t->served) {
        pthread_rwlock_unlock(&st->lock);
        return;
    }
    t->served = false;
    ks_bucket *b = t->bucket;
    b->nserved--;
    /* Another served version keeps the objects (they are stored once per group/resource). */
    if (b->nserved == 0 && b != st->ns_bucket) {
        while (b->n > 0)
            json_decref(kss_commit_remove(st, t, b, b->sorted[0], NULL));
    }
    kss_close_type_watchers(st, t);
    __atomic_add_fetch(&st->types_gen, 1, __ATOMIC_SEQ_CST);
    pthread_rwlock_unlock(&st->lock);
}

static bool type_names_match(const ks_rtype *p, const char *resource)
{
    if (!strcmp(p->resource, resource) || (p->singular && !strcmp(p->singular, resource)))
        return true;
    for (size_t i = 0; p->short_names && p->short_names[i]; i++)
        if (!strcmp(p->short_names[i], resource))
            return true;
    return false;
}

const ks_rtype *ks_store_type(ks_store *st, const char *group, const char *version,
                              const char *resource)
{
    if (!st || !resource)
        return NULL;
    const char *g = group ? group : "";
    const ks_rtype *found = NULL;
    pthread_rwlock_rdlock(&st->lock);
    /* Plural names win over singular and short names of another type. */
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (size_t i = 0; i < st->ntypes && !found; i++) {
            ks_type *t = st->types[i];
            if (!t->served || strcmp(t->pub.group, g) != 0)
                continue;
            if (version && version[0] && strcmp(t->pub.version, version) != 0)
                continue;
            if (pass == 0 ? !strcmp(t->pub.resource, resource)
                          : type_names_match(&t->pub, resource))
                found = &t->pub;
        }
    }
    pthread_rwlock_unlock(&st->lock);
    return found;
}

const ks_rtype *ks_store_type_by_kind(ks_store *st, const char *group, const char *version,
                                      const char *kind)
{
    if (!st || !kind)
        return NULL;
    const char *g = group ? group : "";
    const ks_rtype *found = NULL;
    pthread_rwlock_rdlock(&st->lock);
    for (size_t i = 0; i < st->ntypes; i++) {
        ks_type *t = st->types[i];
        if (!t->served || strcmp(t->pub.group, g) != 0 || strcmp(t->pub.kind, kind) != 0)
            continue;
        if (!version || !version[0] || !strcmp(t->pub.version, version)) {
            found = &t->pub;
            break;
        }
        if (!found)
            found = &t->pub;
    }
    pthread_rwlock_unlock(&st->lock);
    return found;
}

size_t ks_store_types(ks_store *st, const ks_rtype ***out)
{
    *out = NULL;
    if (!st)
        return 0;
    pthread_rwlock_rdlock(&st->lock);
    size_t n = 0;
    const ks_rtype **arr = malloc((st->ntypes ? st->ntypes : 1) * sizeof(*arr));
    if (arr)
        for (size_t i = 0; i < st->ntypes; i++)
            if (st->types[i]->served)
                arr[n++] = &st->types[i]->pub;
    pthread_rwlock_unlock(&st->lock);
    *out = arr;
    return n;
}

uint64_t ks_store_types_generation(ks_store *st)
{
    return st ? __atomic_load_n(&st->types_gen, __ATOMIC_SEQ_CST) : 0;
}

void ks_store_set_admission(ks_store *st, ks_admit_fn fn, void *ud)
{
    pthread_rwlock_wrlock(&st->lock);
    st->admit = fn;
    st->admit_ud = ud;
    pthread_rwlock_unlock(&st->lock);
}

uint64_t ks_store_rv(ks_store *st)
{
    return __atomic_load_n(&st->rv, __ATOMIC_SEQ_CST);
}

void ks_store_get_stats(ks_store *st, ks_store_stats *out)
{
    pthread_rwlock_rdlock(&st->lock);
    *out = st->stats;
    size_t w = st->nall;
    for (size_t i = 0; i < st->nbuckets; i++)
        w += kss_bucket_watch_count(st->buckets[i]);
    out->watchers = w;
    pthread_rwlock_unlock(&st->lock);
}

void ks_store_set_watch_queue_cap(ks_store *st, size_t cap)
{
    pthread_rwlock_wrlock(&st->lock);
    st->queue_cap = cap ? cap : KS_DEFAULT_QUEUE_CAP;
    pthread_rwlock_unlock(&st->lock);
}
