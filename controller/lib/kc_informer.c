/* kc_informer: reflector (list, watch, resume, relist) and thread-safe cache on a libuv loop. */
#include "kc_informer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_log.h"
#include "kc_map.h"
#include "kc_watch.h"

/* What the loop timer does when it fires. Every new request is started from the timer, never
 * from inside a stream callback, so the client never sees re-entrant starts or cancels. */
typedef enum action {
    ACT_NONE,
    ACT_LIST,   /* start a full list from the first page */
    ACT_PAGE,   /* fetch the next page of the list in progress */
    ACT_WATCH,  /* watch from inf->rv */
    ACT_FAIL,   /* cancel the current stream, then handle the recorded failure */
    ACT_CANCEL, /* only cancel the current stream (stop() called from inside a callback) */
} action;

struct kc_informer {
    kc_client *client;
    uv_loop_t *loop;
    kc_resource res; /* strings below are our copies */
    char *group, *version, *resource, *ns, *label_sel, *field_sel, *name;
    kc_informer_handlers h;
    kc_informer_opts o;

    /* Guards cache, synced and stats, which other threads read. */
    pthread_mutex_t mu;
    kc_map *cache; /* key → json_t* (one reference each), or stored* with a codec */
    bool synced;
    kc_informer_stats stats;

    /* Everything below is touched on the loop thread only. */
    bool started, stopped;
    uv_timer_t timer;
    action pending;
    kc_stream *stream;
    int in_cb; /* > 0 while inside a stream callback */

    char *body; /* list page being received */
    size_t body_len, body_cap;
    kc_map *building; /* the list being assembled, swapped in when complete */
    char *continue_token;

    kc_watch_decoder dec;
    char *rv;           /* resourceVersion to resume watching from */
    bool stream_failed; /* the current stream was abandoned; ignore its remaining callbacks */
    uint64_t watch_started_ms;
    kc_code fail_code;
    kc_err fail_err;
    bool fail_in_list;

    long backoff_ms;        /* next base delay; 0 before the first error */
    uint64_t last_error_ms; /* loop time of the last error */
    uint64_t rng;
};

/* ---- small helpers ---- */

static uint64_t next_rand(kc_informer *inf)
{
    /* xorshift64*: jitter only, not security. */
    inf->rng ^= inf->rng >> 12;
    inf->rng ^= inf->rng << 25;
    inf->rng ^= inf->rng >> 27;
    return inf->rng * 2685821657736338717ULL;
}

static const char *obj_rv(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

char *kc_informer_key(const json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    if (!name || !name[0])
        return NULL;
    char *key = NULL;
    if (ns && ns[0]) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
        return key;
    }
    return strdup(name);
}

json_t *kc_informer_default_transform(json_t *obj, const kc_resource *res, void *ud)
{
    (void)ud;
    json_t *md = json_object_get(obj, "metadata");
    if (json_is_object(md))
        json_object_del(md, "managedFields");
    if (res && res->resource && strcmp(res->resource, "nodes") == 0 &&
        (!res->group || !res->group[0])) {
        /* Image lists are the bulk of a Node and nothing in the operator reads them. */
        json_t *st = json_object_get(obj, "status");
        if (json_is_object(st))
            json_object_del(st, "images");
    }
    return obj;
}

/* Takes a reference to obj and returns the object to cache (new reference) or NULL. */
static json_t *transform(kc_informer *inf, json_t *obj)
{
    json_incref(obj);
    if (inf->o.no_transform)
        return obj;
    return inf->o.transform(obj, &inf->res, inf->o.transform_ud);
}

static void set_rv(kc_informer *inf, const char *rv)
{
    if (!rv || !rv[0])
        return;
    char *copy = strdup(rv);
    if (!copy)
        return; /* keep the older version: a resume from it replays events the cache absorbs */
    free(inf->rv);
    inf->rv = copy;
    pthread_mutex_lock(&inf->mu);
    snprintf(inf->stats.resource_version, sizeof(inf->stats.resource_version), "%s", rv);
    pthread_mutex_unlock(&inf->mu);
}

static void count(kc_informer *inf, unsigned long *field)
{
    pthread_mutex_lock(&inf->mu);
    (*field)++;
    pthread_mutex_unlock(&inf->mu);
}

/* ---- cache entries: a json_t reference, or with a codec its record and resourceVersion ---- */

typedef struct stored {
    void *rec; /* the codec's record, or with rec_size its copy after rv */
    /* Readers decode a record outside the cache lock: they hold a reference meanwhile, and a
     * record replaced or deleted under them is freed by the last one. */
    atomic_uint refs;
    bool rec_inline;
    char rv[]; /* "" when the object had none */
} stored;

static void *json_text_encode(const json_t *obj, void *ud)
{
    (void)ud;
    return json_dumps(obj, JSON_COMPACT);
}

static json_t *json_text_decode(const void *rec, void *ud)
{
    (void)ud;
    return json_loads(rec, 0, NULL);
}

static size_t json_text_size(const void *rec, void *ud)
{
    (void)ud;
    return strlen(rec) + 1;
}

const kc_informer_codec kc_informer_json_text_codec = {json_text_encode, json_text_decode, free,
                                                       NULL, json_text_size};

/* What the cache keeps for obj (obj is not consumed); NULL when out of memory. */
static void *entry_new(kc_informer *inf, json_t *obj)
{
    const kc_informer_codec *cd = inf->o.codec;
    if (!cd)
        return json_incref(obj);
    const char *rv = obj_rv(obj);
    size_t l = rv ? strlen(rv) : 0;
    void *rec = cd->encode(obj, cd->ud);
    if (!rec)
        return NULL;
    size_t n = cd->rec_size ? cd->rec_size(rec, cd->ud) : 0;
    stored *e = malloc(sizeof(*e) + l + 1 + n);
    if (!e) {
        cd->free_rec(rec);
        return NULL;
    }
    memcpy(e->rv, rv ? rv : "", l);
    e->rv[l] = '\0';
    atomic_init(&e->refs, 1);
    e->rec_inline = cd->rec_size != NULL;
    e->rec = rec;
    if (e->rec_inline) {
        e->rec = e->rv + l + 1;
        memcpy(e->rec, rec, n);
        cd->free_rec(rec);
    }
    return e;
}

/* The object of an entry as a new reference (NULL for NULL, or when out of memory). */
static json_t *entry_json(const kc_informer *inf, void *v)
{
    if (!v)
        return NULL;
    if (!inf->o.codec)
        return json_incref(v);
    return inf->o.codec->decode(((stored *)v)->rec, inf->o.codec->ud);
}

static const char *entry_rv(const kc_informer *inf, void *v)
{
    if (!v)
        return NULL;
    if (!inf->o.codec)
        return obj_rv(v);
    const char *rv = ((stored *)v)->rv;
    return rv[0] ? rv : NULL;
}

static void entry_free(const kc_informer *inf, void *v)
{
    if (!v)
        return;
    if (!inf->o.codec) {
        json_decref(v);
        return;
    }
    stored *e = v;
    if (atomic_fetch_sub(&e->refs, 1) != 1)
        return;
    if (!e->rec_inline)
        inf->o.codec->free_rec(e->rec);
    free(e);
}

/* Takes a reference to an entry for reading it outside the cache lock (inf->mu held); release
 * it with entry_free. */
static void *entry_hold(const kc_informer *inf, void *v)
{
    if (v && inf->o.codec)
        atomic_fetch_add(&((stored *)v)->refs, 1);
    else if (v)
        json_incref(v);
    return v;
}

static void map_free(const kc_informer *inf, kc_map *m)
{
    if (!m)
        return;
    size_t pos = 0;
    void *v;
    while (kc_map_next(m, &pos, NULL, &v))
        entry_free(inf, v);
    kc_map_free(m, NULL);
}

static void on_timer(uv_timer_t *t);

static void schedule(kc_informer *inf, long delay_ms, action act)
{
    inf->pending = act;
    uv_timer_start(&inf->timer, on_timer, delay_ms > 0 ? (uint64_t)delay_ms : 0, 0);
}

/* The delay before the next attempt: doubles per consecutive error up to the cap, starts over
 * after backoff_reset_ms without errors, plus up to 25% jitter so that many informers failing
 * together do not retry in lock step. */
static long next_backoff(kc_informer *inf)
{
    uint64_t now = uv_now(inf->loop);
    if (!inf->backoff_ms || now - inf->last_error_ms >= (uint64_t)inf->o.backoff_reset_ms)
        inf->backoff_ms = inf->o.backoff_initial_ms;
    long base = inf->backoff_ms;
    long d = base + (long)(next_rand(inf) % (uint64_t)(base / 4 + 1));
    inf->backoff_ms = base * 2 > inf->o.backoff_max_ms ? inf->o.backoff_max_ms : base * 2;
    inf->last_error_ms = now;
    pthread_mutex_lock(&inf->mu);
    inf->stats.last_backoff_ms = d;
    pthread_mutex_unlock(&inf->mu);
    return d;
}

/* Decides what follows a failed list or watch. */
static void handle_error(kc_informer *inf, kc_code code, const kc_err *err, bool in_list)
{
    if (inf->stopped)
        return;
    const char *msg = err && err->msg[0] ? err->msg : kc_code_name(code);
    if (code == KC_EEXPIRED && !in_list) {
        /* The server no longer has history from our resourceVersion: only a relist can tell us
         * what changed. Not an error; no backoff. */
        kc_info("watch expired, relisting", "informer=%s rv=%s error=%s", inf->name,
                inf->rv ? inf->rv : "", msg);
        free(inf->rv);
        inf->rv = NULL;
        schedule(inf, 0, ACT_LIST);
        return;
    }
    count(inf, &inf->stats.errors);
    long d = next_backoff(inf);
    /* Canceled: the client is stopping (SIGTERM, a lost Lease), an ordinary end that the
     * informer's own stop follows; not worth a warning. */
    kc_log(code == KC_ECANCELED ? KC_LOG_DEBUG : KC_LOG_WARN,
           in_list ? "list failed" : "watch failed", "informer=%s code=%s backoff_ms=%ld error=%s",
           inf->name, kc_code_name(code), d, msg);
    /* A list that failed halfway starts over: pages of different lists cannot be mixed. */
    schedule(inf, d, in_list || !inf->rv ? ACT_LIST : ACT_WATCH);
}

/* Records a failure detected inside a stream callback; the timer cancels the stream and handles
 * it once the callback has returned. */
static void fail_stream(kc_informer *inf, kc_code code, const kc_err *err, bool in_list)
{
    inf->stream_failed = true;
    inf->fail_code = code;
    inf->fail_in_list = in_list;
    if (err)
        inf->fail_err = *err;
    else
        kc_err_set(&inf->fail_err, code, "%s", kc_code_name(code));
    schedule(inf, 0, ACT_FAIL);
}

/* ---- list ---- */

static void on_list_data(kc_stream *s, const char *data, size_t len, void *ud)
{
    kc_informer *inf = ud;
    (void)s;
    if (inf->stopped || inf->stream_failed)
        return;
    if (inf->body_len + len + 1 > inf->body_cap) {
        size_t cap = inf->body_cap ? inf->body_cap : 65536;
        while (cap < inf->body_len + len + 1)
            cap *= 2;
        char *nb = realloc(inf->body, cap);
        if (!nb) {
            kc_err e;
            kc_err_clear(&e);
            kc_err_set(&e, KC_ENOMEM, "cannot buffer a %zu-byte list page", inf->body_len + len);
            fail_stream(inf, KC_ENOMEM, &e, true);
            return;
        }
        inf->body = nb;
        inf->body_cap = cap;
    }
    memcpy(inf->body + inf->body_len, data, len);
    inf->body_len += len;
}

/* Files the items of one page into inf->building. */
static kc_code absorb_page(kc_informer *inf, json_t *page, kc_err *err)
{
    json_t *items = json_object_get(page, "items");
    if (!json_is_array(items) && !json_is_null(items) && items)
        return kc_err_set(err, KC_EPARSE, "list of %s: \"items\" is not an array", inf->name);
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        char *key = kc_informer_key(item);
        if (!key) {
            kc_warn("list item without metadata.name skipped", "informer=%s index=%zu", inf->name,
                    i);
            continue;
        }
        json_t *obj = transform(inf, item);
        void *ent = obj ? entry_new(inf, obj) : NULL;
        json_decref(obj);
        void *old = NULL;
        if (!ent || kc_map_put(inf->building, key, ent, &old) != KC_OK) {
            entry_free(inf, ent);
            free(key);
            return kc_err_set(err, KC_ENOMEM, "list of %s: out of memory caching items", inf->name);
        }
        entry_free(inf, old);
        free(key);
    }
    return KC_OK;
}

/* Swaps the completed list in and tells the handlers what changed. */
static void apply_list(kc_informer *inf, const char *list_rv)
{
    pthread_mutex_lock(&inf->mu);
    kc_map *old = inf->cache;
    inf->cache = inf->building;
    bool first = !inf->synced;
    inf->stats.lists++;
    if (!first)
        inf->stats.relists++;
    pthread_mutex_unlock(&inf->mu);
    inf->building = NULL;
    set_rv(inf, list_rv);
    kc_info(first ? "initial list complete" : "relist complete", "informer=%s objects=%zu rv=%s",
            inf->name, kc_map_size(inf->cache), inf->rv ? inf->rv : "");

    size_t pos = 0;
    const char *key;
    void *val;
    /* The loop thread is the only writer, so iterating the new cache without the lock is safe;
     * handlers may read it (under the lock) meanwhile. */
    while (!inf->stopped && kc_map_next(inf->cache, &pos, &key, &val)) {
        void *prev = kc_map_get(old, key);
        if (!prev) {
            if (inf->h.on_add) {
                json_t *o = entry_json(inf, val);
                if (o)
                    inf->h.on_add(inf, o, inf->h.ud);
                json_decref(o);
            }
        } else {
            const char *a = entry_rv(inf, prev), *b = entry_rv(inf, val);
            if ((!a || !b || strcmp(a, b) != 0) && inf->h.on_update) {
                json_t *po = entry_json(inf, prev), *o = entry_json(inf, val);
                if (po && o)
                    inf->h.on_update(inf, po, o, inf->h.ud);
                json_decref(po);
                json_decref(o);
            }
        }
    }
    pos = 0;
    while (!inf->stopped && kc_map_next(old, &pos, &key, &val)) {
        if (!kc_map_get(inf->cache, key) && inf->h.on_delete) {
            json_t *o = entry_json(inf, val);
            if (o)
                inf->h.on_delete(inf, o, inf->h.ud);
            json_decref(o);
        }
    }
    map_free(inf, old);
    if (first && !inf->stopped) {
        pthread_mutex_lock(&inf->mu);
        inf->synced = true;
        pthread_mutex_unlock(&inf->mu);
    }
}

static void on_list_done(kc_stream *s, kc_code code, const kc_err *err, void *ud)
{
    kc_informer *inf = ud;
    (void)s;
    inf->stream = NULL;
    if (inf->stopped || inf->stream_failed)
        return;
    inf->in_cb++;
    kc_err e;
    kc_err_clear(&e);
    json_t *page = NULL;
    if (code != KC_OK) {
        handle_error(inf, code, err, true);
        goto out;
    }
    count(inf, &inf->stats.pages);
    json_error_t jerr;
    page = json_loadb(inf->body ? inf->body : "", inf->body_len, 0, &jerr);
    inf->body_len = 0;
    if (!page)
        kc_err_set(&e, KC_EPARSE, "list of %s: invalid JSON in the response at column %d: %s",
                   inf->name, jerr.column, jerr.text);
    else if (!json_is_object(page))
        kc_err_set(&e, KC_EPARSE, "list of %s: the response is not a JSON object", inf->name);
    if (e.code != KC_OK) {
        handle_error(inf, KC_EPARSE, &e, true);
        goto out;
    }
    if (absorb_page(inf, page, &e) != KC_OK) {
        handle_error(inf, e.code, &e, true);
        goto out;
    }
    json_t *md = json_object_get(page, "metadata");
    const char *cont = json_string_value(json_object_get(md, "continue"));
    free(inf->continue_token);
    inf->continue_token = NULL;
    if (cont && cont[0]) {
        inf->continue_token = strdup(cont);
        if (!inf->continue_token) {
            kc_err_set(&e, KC_ENOMEM, "list of %s: out of memory", inf->name);
            handle_error(inf, KC_ENOMEM, &e, true);
            goto out;
        }
        schedule(inf, 0, ACT_PAGE);
        goto out;
    }
    /* A large page buffer is not worth keeping for the informer's lifetime. */
    free(inf->body);
    inf->body = NULL;
    inf->body_cap = 0;
    apply_list(inf, json_string_value(json_object_get(md, "resourceVersion")));
    if (!inf->stopped)
        schedule(inf, 0, ACT_WATCH);
out:
    json_decref(page);
    inf->in_cb--;
}

/* Requests the next page (inf->continue_token, or the first page when NULL). */
static void request_page(kc_informer *inf)
{
    kc_err e;
    kc_err_clear(&e);
    kc_list_opts lo = {.label_selector = inf->label_sel,
                       .field_selector = inf->field_sel,
                       .limit = inf->o.page_size,
                       .continue_token = inf->continue_token};
    char *path = kc_rest_path(&inf->res, inf->ns, NULL, NULL);
    char *url = path ? kc_rest_list_query(path, &lo, false, false, 0) : NULL;
    free(path);
    if (!url) {
        kc_err_set(&e, KC_ENOMEM, "list of %s: out of memory building the path", inf->name);
        handle_error(inf, KC_ENOMEM, &e, true);
        return;
    }
    kc_request req = {.method = "GET", .path = url};
    inf->body_len = 0;
    inf->stream_failed = false;
    kc_code rc =
        kc_stream_start(inf->client, &req, on_list_data, on_list_done, inf, &inf->stream, &e);
    free(url);
    if (rc != KC_OK) {
        inf->stream = NULL;
        handle_error(inf, rc, &e, true);
        return;
    }
}

static void begin_list(kc_informer *inf)
{
    map_free(inf, inf->building);
    inf->building = kc_map_new();
    free(inf->continue_token);
    inf->continue_token = NULL;
    if (!inf->building) {
        kc_err e;
        kc_err_clear(&e);
        kc_err_set(&e, KC_ENOMEM, "list of %s: out of memory", inf->name);
        handle_error(inf, KC_ENOMEM, &e, true);
        return;
    }
    request_page(inf);
}

/* ---- watch ---- */

static kc_code on_event(kc_watch_type type, json_t *obj, void *ud, kc_err *err)
{
    kc_informer *inf = ud;
    if (inf->stopped)
        return KC_ECANCELED;
    count(inf, &inf->stats.events);
    if (type == KC_WATCH_ERROR)
        return kc_watch_status_error(obj, err);
    if (type == KC_WATCH_BOOKMARK) {
        count(inf, &inf->stats.bookmarks);
        set_rv(inf, obj_rv(obj));
        return KC_OK;
    }
    char *key = kc_informer_key(obj);
    if (!key) {
        kc_warn("watch event without metadata.name skipped", "informer=%s type=%s", inf->name,
                kc_watch_type_name(type));
        set_rv(inf, obj_rv(obj));
        return KC_OK;
    }
    /* Remember the version before the transform can touch metadata. */
    char *rv = obj_rv(obj) ? strdup(obj_rv(obj)) : NULL;
    json_t *nobj = transform(inf, obj);
    if (!nobj) {
        free(key);
        free(rv);
        return kc_err_set(err, KC_ENOMEM, "watch of %s: transform failed (out of memory)",
                          inf->name);
    }
    void *prev = NULL, *ent = NULL;
    kc_code rc = KC_OK;
    if (type != KC_WATCH_DELETED && !(ent = entry_new(inf, nobj)))
        rc = KC_ENOMEM;
    if (rc == KC_OK) {
        pthread_mutex_lock(&inf->mu);
        if (type == KC_WATCH_DELETED)
            prev = kc_map_remove(inf->cache, key);
        else if (kc_map_put(inf->cache, key, ent, &prev) != KC_OK)
            rc = KC_ENOMEM;
        pthread_mutex_unlock(&inf->mu);
    }
    free(key);
    if (rc != KC_OK) {
        entry_free(inf, ent);
        json_decref(nobj);
        free(rv);
        return kc_err_set(err, rc, "watch of %s: out of memory caching an object", inf->name);
    }
    set_rv(inf, rv);
    const char *orv = entry_rv(inf, prev);
    /* Handlers hear of each change once: a delete of something already gone, or a replay of a
     * version already cached, changes nothing. */
    bool replay = orv && rv && strcmp(orv, rv) == 0;
    if (type == KC_WATCH_DELETED) {
        if (prev && inf->h.on_delete)
            inf->h.on_delete(inf, nobj, inf->h.ud);
    } else if (prev) {
        if (!replay && inf->h.on_update) {
            json_t *old = entry_json(inf, prev);
            if (old)
                inf->h.on_update(inf, old, nobj, inf->h.ud);
            json_decref(old);
        }
    } else if (inf->h.on_add) {
        inf->h.on_add(inf, nobj, inf->h.ud);
    }
    free(rv);
    entry_free(inf, prev);
    json_decref(nobj);
    return inf->stopped ? KC_ECANCELED : KC_OK;
}

static void on_watch_data(kc_stream *s, const char *data, size_t len, void *ud)
{
    kc_informer *inf = ud;
    (void)s;
    if (inf->stopped || inf->stream_failed)
        return;
    inf->in_cb++;
    kc_err e;
    kc_err_clear(&e);
    kc_code rc = kc_watch_decoder_feed(&inf->dec, data, len, &e);
    if (rc != KC_OK && !inf->stopped)
        fail_stream(inf, rc, &e, false);
    inf->in_cb--;
}

static void on_watch_done(kc_stream *s, kc_code code, const kc_err *err, void *ud)
{
    kc_informer *inf = ud;
    (void)s;
    inf->stream = NULL;
    if (inf->stopped || inf->stream_failed)
        return;
    inf->in_cb++;
    kc_err e;
    kc_err_clear(&e);
    if (code != KC_OK) {
        handle_error(inf, code, err, false);
    } else if (kc_watch_decoder_finish(&inf->dec, &e) != KC_OK) {
        handle_error(inf, e.code, &e, false);
    } else if (inf->dec.events == 0 && uv_now(inf->loop) - inf->watch_started_ms < 1000) {
        /* A server that ends every watch at once would otherwise be hammered in a tight loop. */
        kc_err_set(&e, KC_EIO, "watch of %s ended after %llu ms without any event", inf->name,
                   (unsigned long long)(uv_now(inf->loop) - inf->watch_started_ms));
        handle_error(inf, KC_EIO, &e, false);
    } else {
        /* The server ended the watch (timeoutSeconds): resume where we were. */
        kc_debug("watch ended, resuming", "informer=%s rv=%s", inf->name, inf->rv ? inf->rv : "");
        schedule(inf, 0, ACT_WATCH);
    }
    inf->in_cb--;
}

static void begin_watch(kc_informer *inf)
{
    kc_err e;
    kc_err_clear(&e);
    long timeout = inf->o.watch_timeout_s;
    if (timeout <= 0)
        timeout = 290 + (long)(next_rand(inf) % 311);
    kc_list_opts lo = {.label_selector = inf->label_sel,
                       .field_selector = inf->field_sel,
                       .resource_version = inf->rv};
    char *path = kc_rest_path(&inf->res, inf->ns, NULL, NULL);
    char *url = path ? kc_rest_list_query(path, &lo, true, true, timeout) : NULL;
    free(path);
    if (!url) {
        kc_err_set(&e, KC_ENOMEM, "watch of %s: out of memory building the path", inf->name);
        handle_error(inf, KC_ENOMEM, &e, false);
        return;
    }
    kc_watch_decoder_free(&inf->dec);
    kc_watch_decoder_init(&inf->dec, 0, on_event, inf);
    inf->stream_failed = false;
    kc_request req = {.method = "GET", .path = url};
    count(inf, &inf->stats.watches);
    inf->watch_started_ms = uv_now(inf->loop);
    kc_debug("watch starting", "informer=%s rv=%s timeout_s=%ld", inf->name, inf->rv ? inf->rv : "",
             timeout);
    kc_code rc =
        kc_stream_start(inf->client, &req, on_watch_data, on_watch_done, inf, &inf->stream, &e);
    free(url);
    if (rc != KC_OK) {
        inf->stream = NULL;
        handle_error(inf, rc, &e, false);
        return;
    }
}

static void cancel_stream(kc_informer *inf)
{
    if (inf->stream) {
        kc_stream_cancel(inf->stream);
        inf->stream = NULL;
    }
}

static void on_timer(uv_timer_t *t)
{
    kc_informer *inf = t->data;
    action act = inf->pending;
    inf->pending = ACT_NONE;
    if (act == ACT_CANCEL || inf->stopped) {
        cancel_stream(inf);
        return;
    }
    switch (act) {
    case ACT_LIST:
        cancel_stream(inf);
        begin_list(inf);
        break;
    case ACT_PAGE:
        cancel_stream(inf);
        request_page(inf);
        break;
    case ACT_WATCH:
        cancel_stream(inf);
        begin_watch(inf);
        break;
    case ACT_FAIL: {
        cancel_stream(inf);
        kc_err e = inf->fail_err;
        inf->stream_failed = false;
        handle_error(inf, inf->fail_code, &e, inf->fail_in_list);
        break;
    }
    default:
        break;
    }
}

/* ---- lifecycle ---- */

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

static void destroy(kc_informer *inf)
{
    kc_watch_decoder_free(&inf->dec);
    map_free(inf, inf->cache);
    map_free(inf, inf->building);
    free(inf->body);
    free(inf->continue_token);
    free(inf->rv);
    free(inf->group);
    free(inf->version);
    free(inf->resource);
    free(inf->ns);
    free(inf->label_sel);
    free(inf->field_sel);
    free(inf->name);
    pthread_mutex_destroy(&inf->mu);
    free(inf);
}

kc_code kc_informer_new(kc_client *client, uv_loop_t *loop, const kc_resource *res, const char *ns,
                        const kc_informer_handlers *handlers, const kc_informer_opts *opts,
                        kc_informer **out, kc_err *err)
{
    /* Callers may pass an uninitialised record; kc_err_set reads its reason. */
    kc_err_clear(err);
    if (!out)
        return kc_err_set(err, KC_EARG, "kc_informer_new: out is NULL");
    *out = NULL;
    if (!client || !loop || !res || !res->version || !res->resource || !res->resource[0])
        return kc_err_set(err, KC_EARG,
                          "kc_informer_new: client, loop and a resource with version and plural "
                          "name are required");
    kc_informer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return kc_err_set(err, KC_ENOMEM, "informer: out of memory");
    inf->client = client;
    inf->loop = loop;
    if (handlers)
        inf->h = *handlers;
    if (opts)
        inf->o = *opts;
    if (!inf->o.transform)
        inf->o.transform = kc_informer_default_transform;
    if (inf->o.page_size <= 0)
        inf->o.page_size = 500;
    if (inf->o.backoff_initial_ms <= 0)
        inf->o.backoff_initial_ms = 800;
    if (inf->o.backoff_max_ms <= 0)
        inf->o.backoff_max_ms = 30000;
    if (inf->o.backoff_max_ms < inf->o.backoff_initial_ms)
        inf->o.backoff_max_ms = inf->o.backoff_initial_ms;
    if (inf->o.backoff_reset_ms <= 0)
        inf->o.backoff_reset_ms = 120000;
    inf->group = strdup(res->group ? res->group : "");
    inf->version = strdup(res->version);
    inf->resource = strdup(res->resource);
    inf->ns = dup_or_null(ns);
    inf->label_sel = dup_or_null(inf->o.label_selector);
    inf->field_sel = dup_or_null(inf->o.field_selector);
    inf->name = strdup(inf->o.name ? inf->o.name : res->resource);
    inf->cache = kc_map_new();
    pthread_mutex_init(&inf->mu, NULL);
    if (!inf->group || !inf->version || !inf->resource || !inf->name || !inf->cache ||
        (ns && ns[0] && !inf->ns) ||
        (inf->o.label_selector && inf->o.label_selector[0] && !inf->label_sel) ||
        (inf->o.field_selector && inf->o.field_selector[0] && !inf->field_sel)) {
        destroy(inf);
        return kc_err_set(err, KC_ENOMEM, "informer: out of memory");
    }
    inf->o.label_selector = inf->label_sel;
    inf->o.field_selector = inf->field_sel;
    inf->o.name = inf->name;
    inf->res = (kc_resource){.group = inf->group,
                             .version = inf->version,
                             .resource = inf->resource,
                             .namespaced = res->namespaced};
    inf->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)inf ^ 0x9e3779b97f4a7c15ULL;
    if (!inf->rng)
        inf->rng = 1;
    kc_watch_decoder_init(&inf->dec, 0, on_event, inf);
    int uerr = uv_timer_init(loop, &inf->timer);
    if (uerr) {
        destroy(inf);
        return kc_err_set(err, KC_EARG, "informer: cannot create its loop timer: %s",
                          uv_strerror(uerr));
    }
    inf->timer.data = inf;
    *out = inf;
    return KC_OK;
}

kc_code kc_informer_start(kc_informer *inf, kc_err *err)
{
    kc_err_clear(err);
    if (!inf)
        return kc_err_set(err, KC_EARG, "kc_informer_start: informer is NULL");
    if (inf->started || inf->stopped)
        return kc_err_set(err, KC_EARG, "informer %s: %s", inf->name,
                          inf->stopped ? "was stopped and cannot be restarted" : "already started");
    inf->started = true;
    /* Through the timer like every request, so start never runs a request inline. */
    schedule(inf, 0, ACT_LIST);
    return KC_OK;
}

void kc_informer_stop(kc_informer *inf)
{
    if (!inf || inf->stopped)
        return;
    inf->stopped = true;
    uv_timer_stop(&inf->timer);
    if (inf->stream) {
        if (inf->in_cb)
            schedule(inf, 0, ACT_CANCEL); /* cannot cancel a stream from its own callback */
        else
            cancel_stream(inf);
    }
}

static void on_closed(uv_handle_t *h)
{
    destroy(h->data);
}

void kc_informer_free(kc_informer *inf)
{
    if (!inf)
        return;
    kc_informer_stop(inf);
    cancel_stream(inf); /* a cancel deferred by stop() from a callback happens now */
    uv_close((uv_handle_t *)&inf->timer, on_closed);
}

/* ---- reads ---- */

bool kc_informer_synced(kc_informer *inf)
{
    if (!inf)
        return false;
    pthread_mutex_lock(&inf->mu);
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

json_t *kc_informer_get(kc_informer *inf, const char *ns, const char *name)
{
    if (!inf || !name)
        return NULL;
    char *key = NULL;
    if (ns && ns[0]) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
    } else {
        key = strdup(name);
    }
    if (!key)
        return NULL;
    /* Decoding takes far longer than the lookup: it runs outside the lock, so that readers on
     * several threads and the watch applying events do not wait for one another. */
    pthread_mutex_lock(&inf->mu);
    void *v = entry_hold(inf, kc_map_get(inf->cache, key));
    pthread_mutex_unlock(&inf->mu);
    free(key);
    json_t *obj = entry_json(inf, v);
    entry_free(inf, v);
    return obj;
}

bool kc_informer_has(kc_informer *inf, const char *ns, const char *name)
{
    char key[640]; /* a namespace (63) and a name (253) fit */
    if (!inf || !name ||
        (size_t)snprintf(key, sizeof(key), "%s%s%s", ns && ns[0] ? ns : "", ns && ns[0] ? "/" : "",
                         name) >= sizeof(key))
        return false;
    pthread_mutex_lock(&inf->mu);
    bool found = kc_map_get(inf->cache, key) != NULL;
    pthread_mutex_unlock(&inf->mu);
    return found;
}

json_t *kc_informer_list(kc_informer *inf)
{
    if (!inf)
        return NULL;
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    pthread_mutex_lock(&inf->mu);
    size_t pos = 0;
    void *val;
    while (kc_map_next(inf->cache, &pos, NULL, &val)) {
        if (json_array_append_new(arr, entry_json(inf, val)) != 0) {
            json_decref(arr);
            arr = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&inf->mu);
    return arr;
}

size_t kc_informer_count(kc_informer *inf)
{
    if (!inf)
        return 0;
    pthread_mutex_lock(&inf->mu);
    size_t n = kc_map_size(inf->cache);
    pthread_mutex_unlock(&inf->mu);
    return n;
}

void kc_informer_foreach(kc_informer *inf, bool (*fn)(const char *key, const json_t *obj, void *ud),
                         void *ud)
{
    if (!inf || !fn)
        return;
    pthread_mutex_lock(&inf->mu);
    size_t pos = 0;
    const char *key;
    void *val;
    while (kc_map_next(inf->cache, &pos, &key, &val)) {
        json_t *o = entry_json(inf, val);
        bool more = !o || fn(key, o, ud);
        json_decref(o);
        if (!more)
            break;
    }
    pthread_mutex_unlock(&inf->mu);
}

void kc_informer_get_stats(kc_informer *inf, kc_informer_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof(*out));
    if (!inf)
        return;
    pthread_mutex_lock(&inf->mu);
    *out = inf->stats;
    pthread_mutex_unlock(&inf->mu);
}
