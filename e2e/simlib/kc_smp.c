/* kc_smp: Kubernetes strategic merge patch (merge keys, $patch and list directives) for built-in
 * kinds, applied locally the way the API server does. */
#include "kc_patch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIRECTIVE      "$patch"
#define RETAIN_KEYS    "$retainKeys"
#define SET_ORDER      "$setElementOrder/"
#define DELETE_FROM    "$deleteFromPrimitiveList/"
#define STARTS(s, lit) (strncmp((s), (lit), strlen(lit)) == 0)

typedef struct smp {
    const char *kind;
    kc_err *err;
    char *path; /* dotted field path of the map being merged, list positions left out */
    size_t len, cap;
} smp;

static kc_code smp_err(smp *s, kc_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static kc_code smp_err(smp *s, kc_code code, const char *fmt, ...)
{
    char msg[KC_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (code == KC_ENOMEM)
        return kc_err_set(s->err, code, "strategic merge patch: %s", msg);
    return kc_err_set(s->err, code, "strategic merge patch at \"%.200s\": %s",
                      s->len ? s->path : "(top level)", msg);
}

static kc_code path_push(smp *s, const char *key, size_t klen, size_t *saved)
{
    *saved = s->len;
    size_t need = s->len + 1 + klen + 1;
    if (need > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < need)
            cap *= 2;
        char *p = realloc(s->path, cap);
        if (!p)
            return smp_err(s, KC_ENOMEM, "out of memory");
        s->path = p;
        s->cap = cap;
    }
    if (s->len)
        s->path[s->len++] = '.';
    memcpy(s->path + s->len, key, klen);
    s->len += klen;
    s->path[s->len] = 0;
    return KC_OK;
}

static void path_pop(smp *s, size_t saved)
{
    s->len = saved;
    if (s->path)
        s->path[saved] = 0;
}

/* Strategy of the list field `key` of the map at the current path. */
static kc_smp_list field_strategy(smp *s, const char *key, const char **mkey)
{
    size_t saved;
    *mkey = NULL;
    if (path_push(s, key, strlen(key), &saved) != KC_OK)
        return KC_SMP_LIST_REPLACE;
    kc_smp_list st = kc_smp_list_strategy(s->kind, s->path, mkey);
    path_pop(s, saved);
    return st;
}

/* Reads a "$patch" member: 0 none or merge, 'r' replace, 'd' delete. */
static kc_code patch_directive(smp *s, const json_t *obj, int *which)
{
    json_t *v = json_object_get(obj, DIRECTIVE);
    *which = 0;
    if (!v)
        return KC_OK;
    const char *d = json_string_value(v);
    if (d && strcmp(d, "replace") == 0)
        *which = 'r';
    else if (d && strcmp(d, "delete") == 0)
        *which = 'd';
    else if (!d || strcmp(d, "merge") != 0)
        return smp_err(s, KC_EINVALID,
                       "unknown $patch value %s%s%s (expected replace, merge or delete)",
                       d ? "\"" : "", d ? d : "(not a string)", d ? "\"" : "");
    return KC_OK;
}

static kc_code merge_map(smp *s, json_t *dst, const json_t *patch, int *deleted);

static int contains(const json_t *list, const json_t *v)
{
    size_t i;
    json_t *el;
    json_array_foreach(list, i, el)
    {
        if (kc_json_equal(el, v))
            return 1;
    }
    return 0;
}

/* Whether list element `el` of the patch is the list-wide {"$patch": "replace"} directive. */
static int is_list_replace(const json_t *el, const char *mkey)
{
    const char *d = json_string_value(json_object_get(el, DIRECTIVE));
    return json_is_object(el) && d && strcmp(d, "replace") == 0 &&
           !(mkey && json_object_get(el, mkey));
}

/* Merges patch list `plist` into dst[key] following the strategy (not REPLACE). */
static kc_code merge_list(smp *s, json_t *dst, const char *key, size_t klen, const json_t *plist,
                          kc_smp_list st, const char *mkey)
{
    size_t i;
    json_t *el;
    int replace_all = 0;
    json_array_foreach(plist, i, el)
    {
        replace_all |= is_list_replace(el, st == KC_SMP_LIST_MERGE_KEY ? mkey : NULL);
    }
    json_t *out = json_object_getn(dst, key, klen);
    if (replace_all || !json_is_array(out)) {
        if (json_object_setn_new(dst, key, klen, json_array()) != 0)
            return smp_err(s, KC_ENOMEM, "out of memory");
        out = json_object_getn(dst, key, klen);
    }
    json_array_foreach(plist, i, el)
    {
        if (is_list_replace(el, st == KC_SMP_LIST_MERGE_KEY ? mkey : NULL))
            continue;
        if (st == KC_SMP_LIST_MERGE_PRIMITIVE) {
            if (!contains(out, el) && json_array_append_new(out, json_deep_copy(el)) != 0)
                return smp_err(s, KC_ENOMEM, "out of memory");
            continue;
        }
        if (!json_is_object(el))
            return smp_err(s, KC_EINVALID,
                           "element %zu of a list merged by key \"%s\" is not an object", i, mkey);
        int which, del = 0;
        kc_code rc = patch_directive(s, el, &which);
        if (rc != KC_OK)
            return rc;
        json_t *kv = json_object_get(el, mkey);
        if (!kv)
            return smp_err(s, KC_EINVALID, "element %zu does not contain the merge key \"%s\"", i,
                           mkey);
        size_t j, found = (size_t)-1;
        json_t *cur;
        json_array_foreach(out, j, cur)
        {
            if (found == (size_t)-1 && kc_json_equal(json_object_get(cur, mkey), kv))
                found = j;
        }
        if (which == 'd') {
            /* Remove every element with that key, as the API server does. */
            for (j = json_array_size(out); j-- > 0;)
                if (kc_json_equal(json_object_get(json_array_get(out, j), mkey), kv))
                    json_array_remove(out, j);
            continue;
        }
        if (found != (size_t)-1 && json_is_object(json_array_get(out, found))) {
            rc = merge_map(s, json_array_get(out, found), el, &del);
            if (rc != KC_OK)
                return rc;
            continue;
        }
        json_t *fresh = json_object();
        if (!fresh)
            return smp_err(s, KC_ENOMEM, "out of memory");
        rc = merge_map(s, fresh, el, &del);
        if (rc != KC_OK) {
            json_decref(fresh);
            return rc;
        }
        if (json_array_append_new(out, fresh) != 0)
            return smp_err(s, KC_ENOMEM, "out of memory");
    }
    return KC_OK;
}

typedef struct ranked {
    size_t rank, idx;
} ranked;

static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* $setElementOrder/<field>: the elements the order names move, among the positions they hold,
 * into that order; elements it does not name (present only on the server) stay where they are. */
static kc_code set_order(smp *s, json_t *dst, const char *field, const json_t *order)
{
    const char *mkey;
    kc_smp_list st = field_strategy(s, field, &mkey);
    json_t *list = json_object_get(dst, field);
    if (st == KC_SMP_LIST_REPLACE || !json_is_array(list))
        return KC_OK;
    size_t n = json_array_size(list), m = 0;
    ranked *r = calloc(n ? n : 1, sizeof(*r));
    json_t **vals = calloc(n ? n : 1, sizeof(*vals));
    kc_code rc = KC_OK;
    if (!r || !vals) {
        rc = smp_err(s, KC_ENOMEM, "out of memory");
        goto out_arrays;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *el = json_array_get(list, i);
        size_t j;
        json_t *o;
        json_array_foreach(order, j, o)
        {
            int match = st == KC_SMP_LIST_MERGE_KEY
                            ? json_is_object(o) && json_object_get(o, mkey) &&
                                  kc_json_equal(json_object_get(o, mkey), json_object_get(el, mkey))
                            : kc_json_equal(o, el);
            if (match) {
                r[m].rank = j;
                r[m].idx = i;
                vals[m++] = json_incref(el);
                break;
            }
        }
    }
    /* vals[k] belongs to r[k]; sort the pairs, then fill the original slots in index order. */
    ranked *sorted = malloc((m ? m : 1) * sizeof(*sorted));
    if (!sorted) {
        rc = smp_err(s, KC_ENOMEM, "out of memory");
        goto out_vals;
    }
    for (size_t k = 0; k < m; k++)
        sorted[k] = (ranked){r[k].rank, k};
    qsort(sorted, m, sizeof(*sorted), by_rank);
    for (size_t k = 0; k < m; k++)
        json_array_set(list, r[k].idx, vals[sorted[k].idx]);
    free(sorted);
out_vals:
    for (size_t k = 0; k < m; k++)
        json_decref(vals[k]);
out_arrays:
    free(r);
    free(vals);
    return rc;
}

/* Checks the $-keys of a patch map: only the known directives, with the right shapes. */
static kc_code check_directives(smp *s, const json_t *patch)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v)
    {
        if (k[0] != '$' || strcmp(k, DIRECTIVE) == 0)
            continue;
        if (strcmp(k, RETAIN_KEYS) == 0) {
            size_t i;
            json_t *el;
            if (!json_is_array(v))
                return smp_err(s, KC_EINVALID, "$retainKeys must be a list of field names");
            json_array_foreach(v, i, el)
            {
                if (!json_is_string(el))
                    return smp_err(s, KC_EINVALID, "$retainKeys must be a list of field names");
            }
        } else if (STARTS(k, SET_ORDER) || STARTS(k, DELETE_FROM)) {
            const char *field = strchr(k, '/') + 1;
            if (!*field || !json_is_array(v))
                return smp_err(s, KC_EINVALID, "%s needs a field name and a list value", k);
        } else {
            return smp_err(s, KC_EINVALID, "unknown directive \"%.100s\"", k);
        }
    }
    return KC_OK;
}

/* Merges patch (an object) into dst (an object we own) in place. Sets *deleted when the patch
 * says `$patch: delete`, leaving the removal to the caller. */
static kc_code merge_map(smp *s, json_t *dst, const json_t *patch, int *deleted)
{
    const char *k;
    size_t klen;
    json_t *pv;
    int which;
    kc_code rc = patch_directive(s, patch, &which);
    *deleted = 0;
    if (rc != KC_OK || (rc = check_directives(s, patch)) != KC_OK)
        return rc;
    if (which == 'd') {
        *deleted = 1;
        return KC_OK;
    }
    if (which == 'r')
        json_object_clear(dst);
    json_t *retain = json_object_get(patch, RETAIN_KEYS);
    if (retain) {
        void *tmp;
        json_t *dv;
        json_object_keylen_foreach_safe(dst, tmp, k, klen, dv)
        {
            json_t *name = json_stringn(k, klen);
            if (!name)
                return smp_err(s, KC_ENOMEM, "out of memory");
            if (!contains(retain, name))
                json_object_deln(dst, k, klen);
            json_decref(name);
        }
    }
    json_object_keylen_foreach((json_t *)patch, k, klen, pv)
    {
        if (!STARTS(k, DELETE_FROM))
            continue;
        json_t *list = json_object_get(dst, k + strlen(DELETE_FROM));
        for (size_t i = json_array_size(list); i-- > 0;)
            if (contains(pv, json_array_get(list, i)))
                json_array_remove(list, i);
    }
    json_object_keylen_foreach((json_t *)patch, k, klen, pv)
    {
        if (k[0] == '$')
            continue;
        if (json_is_null(pv)) {
            json_object_deln(dst, k, klen);
            continue;
        }
        size_t saved;
        if ((rc = path_push(s, k, klen, &saved)) != KC_OK)
            return rc;
        if (json_is_object(pv)) {
            int del = 0;
            json_t *child = json_object_getn(dst, k, klen);
            if (json_is_object(child)) {
                rc = merge_map(s, child, pv, &del);
            } else {
                json_t *fresh = json_object();
                rc = fresh ? merge_map(s, fresh, pv, &del) : smp_err(s, KC_ENOMEM, "out of memory");
                if (rc == KC_OK && !del && json_object_setn_new(dst, k, klen, fresh) != 0)
                    rc = smp_err(s, KC_ENOMEM, "out of memory");
                else if (rc != KC_OK || del)
                    json_decref(fresh);
            }
            if (rc == KC_OK && del)
                json_object_deln(dst, k, klen);
        } else if (json_is_array(pv)) {
            const char *mkey;
            kc_smp_list st = kc_smp_list_strategy(s->kind, s->path, &mkey);
            if (st != KC_SMP_LIST_REPLACE)
                rc = merge_list(s, dst, k, klen, pv, st, mkey);
            else if (json_object_setn_new(dst, k, klen, json_deep_copy(pv)) != 0) {
                rc = smp_err(s, KC_ENOMEM, "out of memory");
            }
        } else if (json_object_setn_new(dst, k, klen, json_deep_copy(pv)) != 0) {
            rc = smp_err(s, KC_ENOMEM, "out of memory");
        }
        path_pop(s, saved);
        if (rc != KC_OK)
            return rc;
    }
    json_object_keylen_foreach((json_t *)patch, k, klen, pv)
    {
        if (STARTS(k, SET_ORDER) && (rc = set_order(s, dst, k + strlen(SET_ORDER), pv)) != KC_OK)
            return rc;
    }
    return KC_OK;
}

kc_code kc_smp_apply(const json_t *original, const json_t *patch, const char *kind, json_t **out,
                     kc_err *err)
{
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_smp_apply: out is required");
    *out = NULL;
    if (!json_is_object(patch))
        return kc_err_set(err, KC_EINVALID, "a strategic merge patch must be a JSON object, not %s",
                          !patch                 ? "nothing"
                          : json_is_array(patch) ? "an array"
                                                 : "a scalar");
    if (original && !json_is_object(original))
        return kc_err_set(err, KC_EARG, "kc_smp_apply: the original must be a JSON object");
    if (!kc_smp_kind_known(kind)) {
        /* Custom resources have no patch strategies; the API server merges them per RFC 7386. */
        *out = kc_merge_patch_apply(original, patch);
        return *out ? KC_OK : kc_err_set(err, KC_ENOMEM, "out of memory applying a merge patch");
    }
    smp s = {.kind = kind, .err = err};
    json_t *work = original ? json_deep_copy(original) : json_object();
    if (!work)
        return kc_err_set(err, KC_ENOMEM, "out of memory copying the object");
    int deleted = 0;
    kc_code rc = merge_map(&s, work, patch, &deleted);
    free(s.path);
    if (rc != KC_OK) {
        json_decref(work);
        return rc;
    }
    if (deleted)
        json_object_clear(work);
    *out = work;
    return KC_OK;
}
