/* ks_store_read: the store's read paths: get, count, and list with label/field selectors, limit
 * and continue tokens, served from the sorted index (or the node index for pods) without copying
 * what does not match. */
#include "ks_store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_base64.h"

kc_code ks_get(ks_store *st, const ks_rtype *rt, const char *ns, const char *name, json_t **out,
               kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    *out = NULL;
    if (!st || !t || !name)
        return kss_err(err, KC_EARG, 0, "ks_get: store, type and name are required");
    json_t *found = NULL;
    pthread_rwlock_rdlock(&st->lock);
    if (!t->served) {
        pthread_rwlock_unlock(&st->lock);
        return kss_unserved(err, t);
    }
    ks_obj *o = kss_find(t->bucket, t->bucket->namespaced ? (ns ? ns : "") : "", name);
    if (o)
        found = json_incref(o->obj);
    pthread_rwlock_unlock(&st->lock);
    if (!found)
        return kss_not_found(err, t, name);
    *out = kss_export(t, found);
    json_decref(found);
    return *out ? KC_OK : kss_err(err, KC_ENOMEM, 500, "out of memory copying %s", name);
}

size_t ks_count(ks_store *st, const ks_rtype *rt)
{
    ks_type *t = (ks_type *)rt;
    if (!st || !t)
        return 0;
    pthread_rwlock_rdlock(&st->lock);
    size_t n = t->served ? t->bucket->n : 0;
    pthread_rwlock_unlock(&st->lock);
    return n;
}

static const char continue_expired_msg[] =
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list.";

/* Token: base64 of {"v":"meta.k8s.io/v1","rv":N,"ns":..,"name":..} naming the last item given. */
static char *continue_encode(uint64_t rv, const char *ns, const char *name)
{
    json_t *j = json_pack("{s:s, s:I, s:s, s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv, "ns",
                          ns, "name", name);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    char *tok = s ? kc_base64_encode((const unsigned char *)s, strlen(s)) : NULL;
    free(s);
    return tok;
}

static kc_code continue_decode(const char *tok, uint64_t *rv, char **ns, char **name, kc_err *err)
{
    unsigned char *raw = NULL;
    size_t len = 0;
    kc_err e;
    if (kc_base64_decode(tok, strlen(tok), &raw, &len, &e) != KC_OK)
        return kss_err(err, KC_EBADREQUEST, 400, "continue key is not valid: %s", e.msg);
    json_t *j = json_loadb((const char *)raw, len, 0, NULL);
    free(raw);
    json_int_t r = 0;
    const char *n1 = NULL, *n2 = NULL;
    if (!j || json_unpack(j, "{s:I, s:s, s:s}", "rv", &r, "ns", &n1, "name", &n2) != 0 || r <= 0) {
        json_decref(j);
        return kss_err(err, KC_EBADREQUEST, 400,
                       "continue key is not valid: expected a token from a previous list");
    }
    *rv = (uint64_t)r;
    *ns = strdup(n1);
    *name = strdup(n2);
    json_decref(j);
    if (!*ns || !*name) {
        free(*ns);
        free(*name);
        return kss_err(err, KC_ENOMEM, 500, "out of memory decoding the continue token");
    }
    return KC_OK;
}

static bool list_matches(const ks_list_opts *opts, const json_t *obj)
{
    if (!opts)
        return true;
    if (opts->labels && !kc_label_selector_matches_object(opts->labels, obj))
        return false;
    if (opts->fields && !kc_field_selector_matches(opts->fields, obj))
        return false;
    return true;
}

/* Collects references (not copies) to the matching objects under the read lock and copies them
 * after it. Continue tokens are served from the current state: items after the token's position
 * as they are now, with the token's RV reported, so a watch from that RV replays whatever changed
 * in between (real servers serve a consistent snapshot instead). */
kc_code ks_list(ks_store *st, const ks_rtype *rt, const char *ns, const ks_list_opts *opts,
                json_t **items, uint64_t *rv, char **next_continue, kc_err *err)
{
    ks_type *t = (ks_type *)rt;
    *items = NULL;
    if (next_continue)
        *next_continue = NULL;
    if (!st || !t)
        return kss_err(err, KC_EARG, 0, "ks_list: store and type are required");
    uint64_t tok_rv = 0;
    char *tok_ns = NULL, *tok_name = NULL;
    if (opts && opts->continue_token && opts->continue_token[0]) {
        kc_code rc = continue_decode(opts->continue_token, &tok_rv, &tok_ns, &tok_name, err);
        if (rc != KC_OK)
            return rc;
    }
    json_t **refs = NULL;
    size_t nrefs = 0, caprefs = 0;
    kc_code rc = KC_OK;
    ks_obj *last = NULL;
    bool more = false;
    uint64_t snap_rv;
    kss_candidates_t c = {0};
    pthread_rwlock_rdlock(&st->lock);
    snap_rv = st->rv;
    if (!t->served) {
        rc = kss_unserved(err, t);
        goto unlock;
    }
    if (tok_rv && tok_rv < st->hfloor) {
        rc = kss_err(err, KC_EEXPIRED, 410, "%s", continue_expired_msg);
        goto unlock;
    }
    if (tok_rv)
        snap_rv = tok_rv;
    ks_bucket *b = t->bucket;
    const char *want_ns = b->namespaced && ns && ns[0] ? ns : NULL;
    const char *fname =
        opts && opts->fields ? kc_field_selector_equals_value(opts->fields, "metadata.name") : NULL;
    const char *fns = opts && opts->fields
                          ? kc_field_selector_equals_value(opts->fields, "metadata.namespace")
                          : NULL;
    if (fns && b->namespaced) {
        if (want_ns && strcmp(want_ns, fns) != 0)
            goto unlock; /* two different namespaces: nothing matches */
        want_ns = fns;
    }
    const char *pin = opts && opts->fields && b->oidx
                          ? kc_field_selector_equals_value(opts->fields, b->ifield)
                          : NULL;
    if (kss_candidates(b, want_ns, fname, pin, &c) != KC_OK) {
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory listing %s", t->pub.resource);
        goto unlock;
    }
    size_t i = tok_ns ? kss_bound_after(c.v, c.n, tok_ns, tok_name) : 0;
    long limit = opts ? opts->limit : 0;
    for (; i < c.n; i++) {
        ks_obj *o = c.v[i];
        if ((fname && strcmp(o->name, fname) != 0) || !list_matches(opts, o->obj))
            continue;
        if (limit > 0 && (long)nrefs == limit) {
            more = true; /* one more match exists: the client gets a continue token */
            break;
        }
        if (nrefs == caprefs) {
            size_t ncap = caprefs ? caprefs * 2 : 64;
            json_t **nr = realloc(refs, ncap * sizeof(*nr));
            if (!nr) {
                rc = kss_err(err, KC_ENOMEM, 500, "out of memory listing %s", t->pub.resource);
                goto unlock;
            }
            refs = nr;
            caprefs = ncap;
        }
        refs[nrefs++] = json_incref(o->obj);
        last = o;
    }
    if (more && next_continue) {
        *next_continue = continue_encode(snap_rv, last->ns, last->name);
        if (!*next_continue)
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory building a continue token");
    }
unlock:
    pthread_rwlock_unlock(&st->lock);
    free(c.owned);
    free(tok_ns);
    free(tok_name);
    json_t *arr = rc == KC_OK ? json_array() : NULL;
    if (rc == KC_OK && !arr)
        rc = kss_err(err, KC_ENOMEM, 500, "out of memory listing %s", t->pub.resource);
    /* Copies are made outside the lock: committed objects are immutable. */
    for (size_t k = 0; k < nrefs; k++) {
        if (arr && json_array_append_new(arr, kss_export(t, refs[k])) != 0) {
            json_decref(arr);
            arr = NULL;
            rc = kss_err(err, KC_ENOMEM, 500, "out of memory listing %s", t->pub.resource);
        }
        json_decref(refs[k]);
    }
    free(refs);
    if (rc != KC_OK) {
        if (next_continue) {
            free(*next_continue);
            *next_continue = NULL;
        }
        return rc;
    }
    *items = arr;
    if (rv)
        *rv = snap_rv;
    return KC_OK;
}
