/* fakeapi: one-resource in-memory API server (objects, history, list paging, watch) on testsrv. */
#include "fakeapi.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testsrv.h"

typedef struct event {
    const char *type;
    uint64_t rv;
    json_t *obj; /* shared with the store; never modified after creation */
} event;

typedef struct watch {
    ts_stream *st;
    char *ns;    /* NULL: all namespaces */
    json_t *sel; /* label selector as {key: value}, NULL: everything */
    bool bookmarks;
    long long deadline_ms; /* 0: none */
    struct watch *next;
} watch;

typedef struct snapshot {
    uint64_t rv;
    json_t *items; /* array, sorted by key */
} snapshot;

struct fakeapi {
    ts_server *srv;
    kc_resource res;
    char *group, *version, *resource;
    char *prefix; /* "/api/v1" or "/apis/g/v" */

    pthread_mutex_t mu;
    uint64_t rv;
    uint64_t compacted; /* history holds only events with rv > compacted */
    json_t *objects;    /* key → object */
    event *hist;
    size_t nhist, caphist;
    watch *watches;
    snapshot *snaps;
    size_t nsnaps;
    fakeapi_expired_mode expired_mode;
    bool cut_next;
    int fail_n, fail_status;
    unsigned fail_from; /* request index from which fail_n applies */
    char fail_reason[64];
    fakeapi_stats stats;
    json_t *requests; /* array of request lines */

    pthread_t reaper;
    bool stopping;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static char *obj_key(const json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    char *k = NULL;
    if (!name)
        return NULL;
    if (ns && ns[0]) {
        if (asprintf(&k, "%s/%s", ns, name) < 0)
            return NULL;
        return k;
    }
    return strdup(name);
}

static bool matches(const watch *w, const json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    if (w->ns) {
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        if (!ns || strcmp(ns, w->ns) != 0)
            return false;
    }
    if (w->sel) {
        json_t *labels = json_object_get(md, "labels");
        const char *k;
        json_t *v;
        json_object_foreach(w->sel, k, v)
        {
            const char *have = json_string_value(json_object_get(labels, k));
            if (!have || strcmp(have, json_string_value(v)) != 0)
                return false;
        }
    }
    return true;
}

static char *event_line(const char *type, json_t *obj)
{
    json_t *ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
    char *s = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    char *line = NULL;
    if (s && asprintf(&line, "%s\n", s) < 0)
        line = NULL;
    free(s);
    return line;
}

/* Drops a watch from the list and releases its stream (mu held). */
static void watch_close(fakeapi *api, watch *w, bool abort)
{
    watch **pp = &api->watches;
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp)
        *pp = w->next;
    if (abort)
        ts_stream_abort(w->st);
    else
        ts_stream_end(w->st);
    free(w->ns);
    json_decref(w->sel);
    free(w);
}

/* Writes to a watch; a client that went away has its watch closed. Returns false then (mu
 * held). */
static bool watch_write(fakeapi *api, watch *w, const char *data, size_t len)
{
    if (ts_stream_write(w->st, data, len) == 0)
        return true;
    watch_close(api, w, true);
    return false;
}

/* Sends one event to every interested watch (mu held). */
static void broadcast(fakeapi *api, const char *type, json_t *obj)
{
    char *line = event_line(type, obj);
    if (!line)
        return;
    size_t len = strlen(line);
    bool cut = api->cut_next;
    api->cut_next = false;
    for (watch *w = api->watches, *next; w; w = next) {
        next = w->next;
        if (cut)
            ts_stream_write(w->st, line, len / 2);
        else if (matches(w, obj))
            watch_write(api, w, line, len);
    }
    if (cut)
        while (api->watches)
            watch_close(api, api->watches, true);
    free(line);
}

static void record(fakeapi *api, const char *type, json_t *obj)
{
    if (api->nhist == api->caphist) {
        api->caphist = api->caphist ? api->caphist * 2 : 64;
        api->hist = realloc(api->hist, api->caphist * sizeof(event));
    }
    api->hist[api->nhist++] = (event){.type = type, .rv = api->rv, .obj = json_incref(obj)};
    broadcast(api, type, obj);
}

static void set_rv(json_t *obj, uint64_t rv)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(obj, "metadata", md);
    }
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, rv);
    json_object_set_new(md, "resourceVersion", json_string(buf));
}

uint64_t fakeapi_put(fakeapi *api, const json_t *obj)
{
    json_t *copy = json_deep_copy(obj);
    char *key = obj_key(copy);
    if (!key) {
        json_decref(copy);
        return 0;
    }
    pthread_mutex_lock(&api->mu);
    uint64_t rv = ++api->rv;
    json_t *prev = json_object_get(api->objects, key);
    json_t *md = json_object_get(copy, "metadata");
    if (!json_object_get(md, "uid")) {
        json_t *uid = prev ? json_object_get(json_object_get(prev, "metadata"), "uid") : NULL;
        char buf[48];
        snprintf(buf, sizeof(buf), "uid-%" PRIu64, rv);
        json_object_set_new(md, "uid", uid ? json_incref(uid) : json_string(buf));
    }
    set_rv(copy, rv);
    const char *type = prev ? "MODIFIED" : "ADDED";
    json_object_set(api->objects, key, copy);
    record(api, type, copy);
    pthread_mutex_unlock(&api->mu);
    json_decref(copy);
    free(key);
    return rv;
}

uint64_t fakeapi_delete(fakeapi *api, const char *ns, const char *name)
{
    char *key = NULL;
    if (ns && ns[0] ? asprintf(&key, "%s/%s", ns, name) < 0 : !(key = strdup(name)))
        return 0;
    pthread_mutex_lock(&api->mu);
    uint64_t rv = 0;
    json_t *prev = json_object_get(api->objects, key);
    if (prev) {
        rv = ++api->rv;
        json_t *gone = json_deep_copy(prev);
        set_rv(gone, rv);
        json_object_del(api->objects, key);
        record(api, "DELETED", gone);
        json_decref(gone);
    }
    pthread_mutex_unlock(&api->mu);
    free(key);
    return rv;
}

uint64_t fakeapi_rv(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    uint64_t rv = api->rv;
    pthread_mutex_unlock(&api->mu);
    return rv;
}

json_t *fakeapi_objects(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    json_t *copy = json_deep_copy(api->objects);
    pthread_mutex_unlock(&api->mu);
    return copy;
}

/* ---- faults ---- */

void fakeapi_cut_watches(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    while (api->watches)
        watch_close(api, api->watches, true);
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_cut_next_event(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    api->cut_next = true;
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_end_watches(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    while (api->watches)
        watch_close(api, api->watches, false);
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_bookmark(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    json_t *obj = json_pack("{s:s, s:{}}", "kind", "Bookmark", "metadata");
    set_rv(obj, api->rv);
    char *line = event_line("BOOKMARK", obj);
    for (watch *w = api->watches, *next; w && line; w = next) {
        next = w->next;
        if (w->bookmarks)
            watch_write(api, w, line, strlen(line));
    }
    free(line);
    json_decref(obj);
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_compact(fakeapi *api)
{
    pthread_mutex_lock(&api->mu);
    for (size_t i = 0; i < api->nhist; i++)
        json_decref(api->hist[i].obj);
    api->nhist = 0;
    api->compacted = api->rv;
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_set_expired_mode(fakeapi *api, fakeapi_expired_mode mode)
{
    pthread_mutex_lock(&api->mu);
    api->expired_mode = mode;
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_fail_next(fakeapi *api, int n, int status, const char *reason)
{
    pthread_mutex_lock(&api->mu);
    unsigned next = api->stats.requests;
    pthread_mutex_unlock(&api->mu);
    fakeapi_fail_at(api, next, n, status, reason);
}

void fakeapi_fail_at(fakeapi *api, unsigned first, int n, int status, const char *reason)
{
    pthread_mutex_lock(&api->mu);
    api->fail_from = first;
    api->fail_n = n;
    api->fail_status = status;
    snprintf(api->fail_reason, sizeof(api->fail_reason), "%s", reason ? reason : "");
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_inject(fakeapi *api, const char *bytes, size_t len)
{
    pthread_mutex_lock(&api->mu);
    for (watch *w = api->watches, *next; w; w = next) {
        next = w->next;
        watch_write(api, w, bytes, len);
    }
    pthread_mutex_unlock(&api->mu);
}

void fakeapi_get_stats(fakeapi *api, fakeapi_stats *out)
{
    pthread_mutex_lock(&api->mu);
    *out = api->stats;
    out->open_watches = 0;
    for (watch *w = api->watches; w; w = w->next)
        out->open_watches++;
    pthread_mutex_unlock(&api->mu);
}

char *fakeapi_request_line(fakeapi *api, unsigned n)
{
    pthread_mutex_lock(&api->mu);
    const char *s = json_string_value(json_array_get(api->requests, n));
    char *copy = s ? strdup(s) : NULL;
    pthread_mutex_unlock(&api->mu);
    return copy;
}

/* ---- request handling ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Parses "k=v,k2=v2" (also "k==v") into {k: v}; NULL with *bad set for anything else. */
static json_t *parse_selector(const char *s, bool *bad)
{
    *bad = false;
    if (!s || !s[0])
        return NULL;
    json_t *sel = json_object();
    char *copy = strdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || strchr(tok, '!')) {
            *bad = true;
            break;
        }
        *eq = '\0';
        const char *v = eq[1] == '=' ? eq + 2 : eq + 1;
        json_object_set_new(sel, tok, json_string(v));
    }
    free(copy);
    if (*bad) {
        json_decref(sel);
        return NULL;
    }
    return sel;
}

/* Matches req->path against the collection; *ns gets the namespace (malloc'd) or NULL. */
static bool parse_path(fakeapi *api, const char *path, char **ns)
{
    *ns = NULL;
    size_t pl = strlen(api->prefix);
    if (strncmp(path, api->prefix, pl) != 0 || path[pl] != '/')
        return false;
    const char *rest = path + pl + 1;
    if (strcmp(rest, api->resource) == 0)
        return true;
    if (!api->res.namespaced || strncmp(rest, "namespaces/", 11) != 0)
        return false;
    rest += 11;
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest || strcmp(slash + 1, api->resource) != 0)
        return false;
    *ns = strndup(rest, (size_t)(slash - rest));
    return true;
}

static void respond_expired(fakeapi *api, ts_conn *conn, uint64_t asked)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "too old resource version: %" PRIu64 " (%" PRIu64 ")", asked,
             api->compacted + 1);
    api->stats.expired++;
    if (api->expired_mode == FAKEAPI_EXPIRED_HTTP) {
        ts_respond_status(conn, 410, "Expired", msg);
        return;
    }
    ts_stream *st = ts_stream_begin(conn, 200, "application/json");
    if (!st)
        return;
    api->stats.watches++;
    json_t *status = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
                               "apiVersion", "v1", "metadata", "status", "Failure", "message", msg,
                               "reason", "Expired", "code", 410);
    char *line = event_line("ERROR", status);
    if (line)
        ts_stream_write(st, line, strlen(line));
    free(line);
    json_decref(status);
    ts_stream_end(st);
}

static void handle_watch(fakeapi *api, const ts_request *req, ts_conn *conn, char *ns, json_t *sel)
{
    char *rvs = ts_query_get(req, "resourceVersion");
    char *bm = ts_query_get(req, "allowWatchBookmarks");
    char *to = ts_query_get(req, "timeoutSeconds");
    uint64_t from = rvs && rvs[0] ? strtoull(rvs, NULL, 10) : 0;
    bool replay_state = !rvs || !rvs[0] || strcmp(rvs, "0") == 0;
    if (api->stopping) {
        ts_respond_status(conn, 503, "ServiceUnavailable", "fakeapi is stopping");
        goto out;
    }
    if (!replay_state && from < api->compacted) {
        respond_expired(api, conn, from);
        goto out;
    }
    watch *w = calloc(1, sizeof(*w));
    w->ns = ns;
    w->sel = sel;
    ns = NULL;
    sel = NULL;
    w->bookmarks = bm && strcmp(bm, "true") == 0;
    if (to && atol(to) > 0)
        w->deadline_ms = now_ms() + atol(to) * 1000;
    w->st = ts_stream_begin(conn, 200, "application/json");
    if (!w->st) {
        json_decref(w->sel);
        free(w->ns);
        free(w);
        goto out;
    }
    api->stats.watches++;
    w->next = api->watches;
    api->watches = w;
    /* Replay: the current state as ADDED for a watch without a version, else every event after
     * the requested version. Live events follow since we hold the lock throughout. */
    if (replay_state) {
        const char *k;
        json_t *o;
        json_object_foreach(api->objects, k, o)
        {
            if (!matches(w, o))
                continue;
            char *line = event_line("ADDED", o);
            bool ok = line && watch_write(api, w, line, strlen(line));
            free(line);
            if (!ok)
                break;
        }
    } else {
        for (size_t i = 0; i < api->nhist; i++) {
            if (api->hist[i].rv <= from || !matches(w, api->hist[i].obj))
                continue;
            char *line = event_line(api->hist[i].type, api->hist[i].obj);
            bool ok = line && watch_write(api, w, line, strlen(line));
            free(line);
            if (!ok)
                break;
        }
    }
out:
    free(ns);
    json_decref(sel);
    free(rvs);
    free(bm);
    free(to);
}

static void handle_list(fakeapi *api, const ts_request *req, ts_conn *conn, const char *ns,
                        const json_t *sel)
{
    char *lim = ts_query_get(req, "limit");
    char *cont = ts_query_get(req, "continue");
    long limit = lim ? atol(lim) : 0;
    snapshot *snap = NULL;
    size_t off = 0;
    size_t snap_idx = 0;
    json_t *fresh = NULL;
    if (cont && cont[0]) {
        unsigned long id = 0, o = 0;
        if (sscanf(cont, "snap-%lu-%lu", &id, &o) != 2 || id >= api->nsnaps) {
            ts_respond_status(conn, 400, "BadRequest", "invalid continue token");
            goto out;
        }
        snap = &api->snaps[id];
        snap_idx = id;
        off = o;
        if (snap->rv < api->compacted) {
            api->stats.expired++;
            ts_respond_status(conn, 410, "Expired",
                              "The provided continue parameter is too old to display a "
                              "consistent list result.");
            goto out;
        }
    } else {
        /* A consistent, sorted view of what matches, kept for the continue tokens. */
        watch filter = {.ns = (char *)ns, .sel = (json_t *)sel};
        size_t n = json_object_size(api->objects), m = 0;
        const char **keys = calloc(n ? n : 1, sizeof(char *));
        const char *k;
        json_t *o;
        json_object_foreach(api->objects, k, o)
        {
            if (matches(&filter, o))
                keys[m++] = k;
        }
        qsort(keys, m, sizeof(char *), cmp_str);
        fresh = json_array();
        for (size_t i = 0; i < m; i++)
            json_array_append(fresh, json_object_get(api->objects, keys[i]));
        free(keys);
    }
    json_t *all = snap ? snap->items : fresh;
    uint64_t rv = snap ? snap->rv : api->rv;
    size_t total = json_array_size(all);
    size_t end = limit > 0 && off + (size_t)limit < total ? off + (size_t)limit : total;
    json_t *items = json_array();
    for (size_t i = off; i < end; i++)
        json_array_append(items, json_array_get(all, i));
    char rvbuf[32], contbuf[64] = "";
    snprintf(rvbuf, sizeof(rvbuf), "%" PRIu64, rv);
    if (end < total) {
        if (!snap) {
            api->snaps = realloc(api->snaps, (api->nsnaps + 1) * sizeof(snapshot));
            api->snaps[api->nsnaps] = (snapshot){.rv = rv, .items = json_incref(fresh)};
            snap_idx = api->nsnaps++;
        }
        snprintf(contbuf, sizeof(contbuf), "snap-%zu-%zu", snap_idx, end);
    }
    json_t *md = json_pack("{s:s}", "resourceVersion", rvbuf);
    if (contbuf[0])
        json_object_set_new(md, "continue", json_string(contbuf));
    api->stats.lists++;
    ts_respond_json(conn, 200,
                    json_pack("{s:s, s:s, s:o, s:o}", "kind", "List", "apiVersion", "v1",
                              "metadata", md, "items", items));
out:
    json_decref(fresh);
    free(lim);
    free(cont);
}

static void handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    fakeapi *api = ud;
    (void)srv;
    pthread_mutex_lock(&api->mu);
    api->stats.requests++;
    char *line = NULL;
    if (asprintf(&line, "%s %s%s%s", req->method, req->path, req->query[0] ? "?" : "",
                 req->query) >= 0) {
        json_array_append_new(api->requests, json_string(line));
        free(line);
    }
    char *ns = NULL;
    json_t *sel = NULL;
    char *w = NULL, *ls = NULL;
    if (api->fail_n > 0 && api->stats.requests - 1 >= api->fail_from) {
        api->fail_n--;
        ts_respond_status(conn, api->fail_status, api->fail_reason, "injected failure");
        goto out;
    }
    if (strcmp(req->method, "GET") != 0) {
        ts_respond_status(conn, 405, "MethodNotAllowed", "fakeapi serves GET only");
        goto out;
    }
    if (!parse_path(api, req->path, &ns)) {
        ts_respond_status(conn, 404, "NotFound", "no such collection");
        goto out;
    }
    ls = ts_query_get(req, "labelSelector");
    bool bad = false;
    sel = parse_selector(ls, &bad);
    if (bad) {
        ts_respond_status(conn, 400, "BadRequest", "fakeapi supports only k=v label selectors");
        goto out;
    }
    w = ts_query_get(req, "watch");
    if (w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0)) {
        handle_watch(api, req, conn, ns, sel); /* takes ns and sel */
        ns = NULL;
        sel = NULL;
    } else {
        handle_list(api, req, conn, ns, sel);
    }
out:
    pthread_mutex_unlock(&api->mu);
    free(ns);
    free(w);
    free(ls);
    json_decref(sel);
}

/* Ends watches whose timeoutSeconds passed. */
static void *reaper_main(void *arg)
{
    fakeapi *api = arg;
    for (;;) {
        pthread_mutex_lock(&api->mu);
        if (api->stopping) {
            pthread_mutex_unlock(&api->mu);
            return NULL;
        }
        long long now = now_ms();
        for (watch *w = api->watches, *next; w; w = next) {
            next = w->next;
            if (w->deadline_ms && now >= w->deadline_ms)
                watch_close(api, w, false);
        }
        pthread_mutex_unlock(&api->mu);
        usleep(10 * 1000);
    }
}

fakeapi *fakeapi_start(const kc_resource *res)
{
    fakeapi *api = calloc(1, sizeof(*api));
    api->group = strdup(res->group ? res->group : "");
    api->version = strdup(res->version);
    api->resource = strdup(res->resource);
    api->res = (kc_resource){.group = api->group,
                             .version = api->version,
                             .resource = api->resource,
                             .namespaced = res->namespaced};
    if (api->group[0]) {
        if (asprintf(&api->prefix, "/apis/%s/%s", api->group, api->version) < 0)
            api->prefix = NULL;
    } else if (asprintf(&api->prefix, "/api/%s", api->version) < 0) {
        api->prefix = NULL;
    }
    api->objects = json_object();
    api->requests = json_array();
    pthread_mutex_init(&api->mu, NULL);
    if (!api->prefix || !(api->srv = ts_start(handler, api, NULL))) {
        fakeapi_free(api);
        return NULL;
    }
    pthread_create(&api->reaper, NULL, reaper_main, api);
    return api;
}

const char *fakeapi_url(fakeapi *api)
{
    return ts_url(api->srv);
}

void fakeapi_free(fakeapi *api)
{
    if (!api)
        return;
    if (api->srv) {
        pthread_mutex_lock(&api->mu);
        api->stopping = true;
        while (api->watches)
            watch_close(api, api->watches, true);
        pthread_mutex_unlock(&api->mu);
        pthread_join(api->reaper, NULL);
        ts_stop(api->srv);
    }
    /* Watches a handler registered during the stop: ts_stop already released their streams. */
    while (api->watches) {
        watch *w = api->watches;
        api->watches = w->next;
        free(w->ns);
        json_decref(w->sel);
        free(w);
    }
    for (size_t i = 0; i < api->nhist; i++)
        json_decref(api->hist[i].obj);
    free(api->hist);
    for (size_t i = 0; i < api->nsnaps; i++)
        json_decref(api->snaps[i].items);
    free(api->snaps);
    json_decref(api->objects);
    json_decref(api->requests);
    pthread_mutex_destroy(&api->mu);
    free(api->group);
    free(api->version);
    free(api->resource);
    free(api->prefix);
    free(api);
}
