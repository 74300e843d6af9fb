/* ks_store_index: the store's secondary index on one field per bucket (spec.nodeName for pods,
 * metadata.name otherwise), so a list or a watch pinned to one node or one name touches only what
 * can match: 5,000 per-node watchers must not each see every pod event. */
#include "ks_store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kss_field_value(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char key[128];
        if (len >= sizeof(key) || !json_is_object(cur))
            return "";
        memcpy(key, p, len);
        key[len] = '\0';
        cur = json_object_get(cur, key);
        p = dot ? dot + 1 : p + len;
    }
    if (!cur || json_is_null(cur))
        return "";
    return json_string_value(cur);
}

kc_code kss_bucket_index_init(ks_bucket *b)
{
    bool pods = !b->group[0] && !strcmp(b->resource, "pods");
    b->ifield = pods ? "spec.nodeName" : "metadata.name";
    b->widx = kc_map_new();
    if (pods)
        b->oidx = kc_map_new();
    return b->widx && (!pods || b->oidx) ? KC_OK : KC_ENOMEM;
}

static void wlist_free(void *p)
{
    ks_wlist *l = p;
    if (l)
        free(l->v);
    free(l);
}

static void inner_free(void *p)
{
    kc_map_free(p, NULL);
}

void kss_bucket_index_free(ks_bucket *b)
{
    kc_map_free(b->widx, wlist_free);
    kc_map_free(b->oidx, inner_free);
    b->widx = NULL;
    b->oidx = NULL;
}

/* ---- objects ---- */

static void obj_key(const ks_bucket *b, const ks_obj *o, char *buf, size_t size)
{
    if (b->namespaced)
        snprintf(buf, size, "%s/%s", o->ns, o->name);
    else
        snprintf(buf, size, "%s", o->name);
}

void kss_oidx_add(ks_bucket *b, ks_obj *o)
{
    if (!b->oidx || b->oidx_broken)
        return;
    const char *v = kss_field_value(o->obj, b->ifield);
    if (!v) {
        b->oidx_broken = true; /* a non-string value: lists fall back to scanning */
        return;
    }
    kc_map *inner = kc_map_get(b->oidx, v);
    if (!inner) {
        inner = kc_map_new();
        if (!inner || kc_map_put(b->oidx, v, inner, NULL) != KC_OK) {
            kc_map_free(inner, NULL);
            b->oidx_broken = true;
            return;
        }
    }
    char key[512];
    obj_key(b, o, key, sizeof(key));
    if (kc_map_put(inner, key, o, NULL) != KC_OK)
        b->oidx_broken = true;
}

void kss_oidx_remove(ks_bucket *b, ks_obj *o, const json_t *state)
{
    if (!b->oidx || b->oidx_broken)
        return;
    const char *v = kss_field_value(state, b->ifield);
    kc_map *inner = v ? kc_map_get(b->oidx, v) : NULL;
    if (!inner)
        return;
    char key[512];
    obj_key(b, o, key, sizeof(key));
    kc_map_remove(inner, key);
    if (kc_map_size(inner) == 0)
        kc_map_free(kc_map_remove(b->oidx, v), NULL);
}

kc_map *kss_oidx_get(ks_bucket *b, const char *value, bool *usable)
{
    *usable = b->oidx && !b->oidx_broken;
    return *usable ? kc_map_get(b->oidx, value) : NULL;
}

/* ---- candidates of a list or of initial events ---- */

static int obj_cmp(const void *a, const void *b)
{
    const ks_obj *x = *(ks_obj *const *)a, *y = *(ks_obj *const *)b;
    return kss_key_cmp(x->ns, x->name, y->ns, y->name);
}

/* First index of v[0..n) whose key sorts after (ns, name) (name NULL: after every name in ns). */
size_t kss_bound_after(ks_obj *const *v, size_t n, const char *ns, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->ns, ns);
        if (c == 0 && name)
            c = strcmp(v[mid]->name, name);
        if (c <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

kc_code kss_candidates(ks_bucket *b, const char *want_ns, const char *fname, const char *pin,
                       kss_candidates_t *c)
{
    memset(c, 0, sizeof(*c));
    if (fname && (want_ns || !b->namespaced)) {
        ks_obj *o = kss_find(b, want_ns ? want_ns : "", fname);
        if (!(c->owned = malloc(sizeof(*c->owned))))
            return KC_ENOMEM;
        c->owned[0] = o;
        c->v = c->owned;
        c->n = o ? 1 : 0;
        return KC_OK;
    }
    bool usable = false;
    kc_map *inner = pin ? kss_oidx_get(b, pin, &usable) : NULL;
    if (pin && usable) {
        size_t k = inner ? kc_map_size(inner) : 0;
        if (!(c->owned = malloc((k ? k : 1) * sizeof(*c->owned))))
            return KC_ENOMEM;
        size_t pos = 0;
        void *val;
        while (inner && kc_map_next(inner, &pos, NULL, &val)) {
            ks_obj *o = val;
            if (!want_ns || !strcmp(o->ns, want_ns))
                c->owned[c->n++] = o;
        }
        qsort(c->owned, c->n, sizeof(*c->owned), obj_cmp);
        c->v = c->owned;
        return KC_OK;
    }
    size_t lo = want_ns ? kss_lower_bound(b, want_ns, "") : 0;
    size_t hi = want_ns ? kss_bound_after(b->sorted, b->n, want_ns, NULL) : b->n;
    c->v = b->sorted + lo;
    c->n = hi - lo;
    return KC_OK;
}

/* ---- watches ---- */

static kc_code wlist_add(ks_watch ***v, size_t *n, size_t *cap, ks_watch *w)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        ks_watch **nv = realloc(*v, ncap * sizeof(*nv));
        if (!nv)
            return KC_ENOMEM;
        *v = nv;
        *cap = ncap;
    }
    (*v)[(*n)++] = w;
    return KC_OK;
}

static void wlist_remove(ks_watch **v, size_t *n, ks_watch *w)
{
    for (size_t i = 0; i < *n; i++) {
        if (v[i] == w) {
            v[i] = v[*n - 1];
            (*n)--;
            return;
        }
    }
}

/* The value of the indexed field that w's filter requires, or NULL. */
static const char *pinned_value(const ks_bucket *b, const ks_watch *w)
{
    if (!strcmp(b->ifield, "metadata.name") && w->name)
        return w->name;
    return w->fields ? kc_field_selector_equals_value(w->fields, b->ifield) : NULL;
}

kc_code kss_bucket_watch_add(ks_bucket *b, ks_watch *w)
{
    const char *v = pinned_value(b, w);
    if (!v)
        return wlist_add(&b->watchers, &b->nwatchers, &b->capwatchers, w);
    if (!(w->ivalue = strdup(v)))
        return KC_ENOMEM;
    ks_wlist *l = kc_map_get(b->widx, v);
    if (!l) {
        l = calloc(1, sizeof(*l));
        if (!l || kc_map_put(b->widx, v, l, NULL) != KC_OK) {
            free(l);
            goto oom;
        }
    }
    if (wlist_add(&l->v, &l->n, &l->cap, w) == KC_OK)
        return KC_OK;
    if (l->n == 0)
        wlist_free(kc_map_remove(b->widx, v));
oom:
    free(w->ivalue);
    w->ivalue = NULL;
    return KC_ENOMEM;
}

void kss_bucket_watch_remove(ks_bucket *b, ks_watch *w)
{
    if (!w->ivalue) {
        wlist_remove(b->watchers, &b->nwatchers, w);
        return;
    }
    ks_wlist *l = kc_map_get(b->widx, w->ivalue);
    if (l) {
        wlist_remove(l->v, &l->n, w);
        if (l->n == 0)
            wlist_free(kc_map_remove(b->widx, w->ivalue));
    }
}

void kss_bucket_foreach_watch(ks_bucket *b, void (*fn)(ks_watch *w, void *ud), void *ud)
{
    for (size_t i = 0; i < b->nwatchers; i++)
        fn(b->watchers[i], ud);
    size_t pos = 0;
    void *val;
    while (kc_map_next(b->widx, &pos, NULL, &val)) {
        ks_wlist *l = val;
        for (size_t i = 0; i < l->n; i++)
            fn(l->v[i], ud);
    }
}

size_t kss_bucket_watch_count(ks_bucket *b)
{
    size_t n = b->nwatchers, pos = 0;
    void *val;
    while (kc_map_next(b->widx, &pos, NULL, &val))
        n += ((ks_wlist *)val)->n;
    return n;
}

void kss_bucket_event_watches(ks_bucket *b, const json_t *old, const json_t *obj,
                              void (*fn)(ks_watch *w, void *ud), void *ud)
{
    for (size_t i = 0; i < b->nwatchers; i++)
        fn(b->watchers[i], ud);
    if (kc_map_size(b->widx) == 0)
        return;
    const char *nv = obj ? kss_field_value(obj, b->ifield) : NULL;
    const char *ov = old ? kss_field_value(old, b->ifield) : NULL;
    ks_wlist *l = nv ? kc_map_get(b->widx, nv) : NULL;
    for (size_t i = 0; l && i < l->n; i++)
        fn(l->v[i], ud);
    l = ov && (!nv || strcmp(ov, nv) != 0) ? kc_map_get(b->widx, ov) : NULL;
    for (size_t i = 0; l && i < l->n; i++)
        fn(l->v[i], ud);
}
