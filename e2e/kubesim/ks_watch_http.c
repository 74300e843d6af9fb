/* ks_watch_http: the API server's streaming responses: watches (one JSON event per line, flushed
 * per event, from the store's watch) and `logs -f` (the pod log, polled as it grows). Both run on
 * their connection's own thread and end on timeout, shutdown, or when the client leaves. */
#include "ks_server_int.h"

#include "ks_evcache.h"
#include "ks_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define WATCH_WAIT_MS      500         /* how often a quiet stream checks its client */
#define WATCH_BATCH        (64 * 1024) /* events already queued are sent together up to this */
#define WATCH_DEFAULT_S    1800        /* timeoutSeconds when the client gives none */
#define LOG_POLL_MS        200
#define STREAM_BLOCK_BYTES (64 * 1024)

/* Pending output of a stream: bytes produced but not yet handed to MHD. */
typedef struct pending {
    char *buf;
    size_t len, off, cap;
} pending;

static bool pend_add(pending *p, const char *data, size_t n)
{
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n)
            cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb)
            return false;
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, data, n);
    p->len += n;
    return true;
}

/* Copies pending bytes into MHD's buffer; 0 when there are none. */
static ssize_t pend_take(pending *p, char *buf, size_t max)
{
    size_t n = p->len - p->off;
    if (n == 0) {
        p->len = p->off = 0;
        return 0;
    }
    if (n > max)
        n = max;
    memcpy(buf, p->buf + p->off, n);
    p->off += n;
    return (ssize_t)n;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------------
 * watch
 */

typedef struct watch_stream {
    struct ks_server *srv;
    struct MHD_Connection *conn;
    ks_req *req; /* valid while MHD calls the reader (the request is not complete yet) */
    ks_watch *w;
    ks_selectors sel; /* borrowed by the watch: freed after it */
    ks_route rt;      /* t plus copies of group/version below */
    char group[128], version[64];
    char ns[256], name[256]; /* copies: the store may keep the pointers of ks_watch_opts */
    bool table;
    bool proto; /* application/vnd.kubernetes.protobuf;stream=watch: length-prefixed frames */
    const char *table_ver;
    ks_include include;
    bool headers_sent;
    int64_t deadline_ms;
    pending out;
    bool done;            /* nothing more after the pending bytes */
    ks_fault_watch fault; /* cutWatch rules */
} watch_stream;

static const char *type_name(ks_event_type t)
{
    switch (t) {
    case KS_ADDED:
        return "ADDED";
    case KS_MODIFIED:
        return "MODIFIED";
    case KS_DELETED:
        return "DELETED";
    case KS_BOOKMARK:
        return "BOOKMARK";
    }
    return "ERROR";
}

static bool add_line(watch_stream *s, const char *type, json_t *object /* stolen */)
{
    if (s->proto && object) {
        /* The object as the API server sends it: apiVersion and kind set. */
        json_t *o = json_is_object(object) && !json_object_get(object, "kind")
                        ? ks_object_for_route(&s->rt, object)
                        : json_incref(object);
        json_decref(object);
        char *frame = NULL;
        size_t n = 0;
        kc_err err;
        kc_err_clear(&err);
        kc_code rc = o ? ks_proto_watch_frame(type, o, &frame, &n, &err) : KC_ENOMEM;
        json_decref(o);
        if (rc != KC_OK) {
            /* An object the encoding cannot carry ends the stream with an error event. */
            json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
                                   "apiVersion", "v1", "metadata", "status", "Failure", "message",
                                   err.msg[0] ? err.msg : "out of memory", "reason",
                                   "InternalError", "code", 500);
            rc = st ? ks_proto_watch_frame("ERROR", st, &frame, &n, &err) : KC_ENOMEM;
            json_decref(st);
            s->done = true;
        }
        bool ok = rc == KC_OK && pend_add(&s->out, frame, n);
        free(frame);
        return ok;
    }
    json_t *ev = object ? json_pack("{s:s, s:o}", "type", type, "object", object) : NULL;
    char *line = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    bool ok = line && pend_add(&s->out, line, strlen(line)) && pend_add(&s->out, "\n", 1);
    free(line);
    return ok;
}

static void add_error(watch_stream *s, unsigned code, const char *reason, const char *msg)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion",
                           "v1", "metadata", "status", "Failure", "message", msg, "reason", reason,
                           "code", (int)code);
    add_line(s, "ERROR", st);
    s->done = true;
}

static json_t *bookmark_object(watch_stream *s, uint64_t rv)
{
    char gv[256], rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)rv);
    if (s->table)
        return json_pack("{s:s, s:s, s:{s:s}, s:[], s:[]}", "kind", "Table", "apiVersion",
                         !strcmp(s->table_ver, "v1") ? "meta.k8s.io/v1" : "meta.k8s.io/v1beta1",
                         "metadata", "resourceVersion", rvs, "columnDefinitions", "rows");
    return json_pack("{s:s, s:s, s:{s:s}}", "kind", s->rt.t->kind, "apiVersion",
                     ks_group_version(gv, sizeof(gv), s->group, s->version), "metadata",
                     "resourceVersion", rvs);
}

/* A JSON event line whose object's text every watcher of the event shares (ks_evcache): what
 * add_line would write for it, byte for byte, serialized once. */
static bool add_shared_line(watch_stream *s, const char *type, ks_event *ev)
{
    char key[512], gv[256];
    snprintf(key, sizeof(key), "%s\x1f%s\x1f%s",
             json_string_value(json_object_get(ev->object, "apiVersion")),
             ks_group_version(gv, sizeof(gv), s->rt.group, s->rt.version),
             s->rt.t ? s->rt.t->kind : "");
    size_t n = 0;
    char *text = ks_evcache_get(s->srv->evcache, ev->src, key, &n);
    if (!text) {
        json_t *obj = ks_object_for_route(&s->rt, ev->object);
        text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        json_decref(obj);
        if (!text)
            return false;
        n = strlen(text);
        ks_evcache_put(s->srv->evcache, ev->src, key, text, n);
    }
    bool ok = pend_add(&s->out, "{\"type\":\"", 9) && pend_add(&s->out, type, strlen(type)) &&
              pend_add(&s->out, "\",\"object\":", 11) && pend_add(&s->out, text, n) &&
              pend_add(&s->out, "}\n", 2);
    free(text);
    return ok;
}

/* Formats one store event (its object consumed) into the pending output. */
static bool add_event(watch_stream *s, ks_event *ev)
{
    json_t *obj;
    if (ev->src) { /* only on JSON watches (keep_src), only for the store's events */
        bool ok = add_shared_line(s, type_name(ev->type), ev);
        json_decref(ev->src);
        ev->src = NULL;
        json_decref(ev->object);
        ev->object = NULL;
        return ok;
    }
    if (ev->type == KS_BOOKMARK) {
        obj = bookmark_object(s, ev->rv);
    } else if (s->table) {
        json_t *items = json_pack("[O]", ev->object);
        const char *rv = json_string_value(
            json_object_get(json_object_get(ev->object, "metadata"), "resourceVersion"));
        obj = items ? ks_table_build(s->rt.t, items, rv, NULL, s->include, !s->headers_sent,
                                     s->table_ver)
                    : NULL;
        json_decref(items);
        s->headers_sent = true;
    } else {
        obj = ks_object_for_route(&s->rt, ev->object);
    }
    json_decref(ev->object);
    ev->object = NULL;
    return add_line(s, type_name(ev->type), obj);
}

/* Handles ks_watch_next's result: true when the stream must go on reading. */
static void after_next(watch_stream *s, int got, ks_event *ev, const kc_err *err)
{
    if (got > 0) {
        if (!add_event(s, ev))
            s->done = true;
    } else if (got < 0) {
        if (err->code == KC_EEXPIRED)
            add_error(s, 410, "Expired", err->msg);
        s->done = true;
    }
}

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    watch_stream *s = cls;
    for (;;) {
        ssize_t n = pend_take(&s->out, buf, max);
        if (n > 0)
            return n;
        if (s->done || atomic_load(&s->srv->stopping) || now_ms() >= s->deadline_ms)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (ks_client_gone(s->req) || ks_fault_watch_cut(&s->fault))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        int64_t left = s->deadline_ms - now_ms();
        int wait = left < WATCH_WAIT_MS ? (int)(left > 0 ? left : 0) : WATCH_WAIT_MS;
        ks_event ev = {0};
        kc_err err;
        kc_err_clear(&err);
        int got = ks_watch_next(s->w, wait, &ev, &err);
        after_next(s, got, &ev, &err);
        s->fault.events += got > 0;
        /* Send what is already queued together; a quiet stream still flushes every event. */
        while (got > 0 && !s->done && s->out.len < WATCH_BATCH && !ks_fault_watch_full(&s->fault)) {
            memset(&ev, 0, sizeof(ev));
            got = ks_watch_next(s->w, 0, &ev, &err);
            after_next(s, got, &ev, &err);
            s->fault.events += got > 0;
        }
    }
}

static void watch_free(void *cls)
{
    watch_stream *s = cls;
    ks_watch_close(s->w);
    ks_selectors_free(&s->sel);
    free(s->out.buf);
    free(s);
}

static kc_code parse_rv(const char *s, uint64_t *out, kc_err *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || !s[0])
        return kc_err_set(err, KC_EBADREQUEST, "invalid resource version \"%s\"", s);
    *out = v;
    return KC_OK;
}

static kc_code initial_events(ks_req *r, watch_stream *s, ks_watch_opts *wo, kc_err *err)
{
    ks_list_opts lo = {.labels = s->sel.labels, .fields = s->sel.fields};
    json_t *items = NULL;
    uint64_t rv = 0;
    kc_code rc = ks_list(r->sim->store, s->rt.t, wo->ns, &lo, &items, &rv, NULL, err);
    if (rc != KC_OK)
        return rc;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *n = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
        if (wo->name && (!n || strcmp(wo->name, n) != 0))
            continue;
        ks_event ev = {.type = KS_ADDED, .rtype = s->rt.t, .object = json_incref(it)};
        add_event(s, &ev);
    }
    json_decref(items);
    json_t *bm = bookmark_object(s, rv);
    json_t *meta = json_object_get(bm, "metadata");
    if (meta)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    add_line(s, "BOOKMARK", bm);
    wo->send_initial = false;
    wo->from_rv = rv;
    return KC_OK;
}

enum MHD_Result ks_handle_watch(ks_req *r, ks_selectors *sel)
{
    const ks_route *rt = &r->route;
    kc_err err;
    kc_err_clear(&err);
    watch_stream *s = calloc(1, sizeof(*s));
    if (!s) {
        ks_selectors_free(sel);
        return ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
    }
    s->sel = *sel;
    memset(sel, 0, sizeof(*sel));
    s->srv = r->srv;
    s->conn = r->conn;
    s->req = r;
    snprintf(s->group, sizeof(s->group), "%s", rt->group);
    snprintf(s->version, sizeof(s->version), "%s", rt->version);
    s->rt = *rt;
    s->rt.group = s->group;
    s->rt.version = s->version;
    s->rt.ns = s->rt.name = s->rt.sub = s->rt.resource = NULL; /* point into the request */
    s->table = ks_accept_parse(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), 1u << KS_AS_TABLE,
                               &s->table_ver) == KS_AS_TABLE;
    s->include = ks_include_parse(ks_req_arg(r, "includeObject"));
    s->proto =
        !s->table && !(rt->t && rt->t->crd_name) &&
        ks_media_negotiate(ks_req_header(r, MHD_HTTP_HEADER_ACCEPT), true) == KS_MEDIA_PROTOBUF;
    ks_fault_watch_init(r, &s->fault);

    const char *ts = ks_req_arg(r, "timeoutSeconds");
    long timeout = ts ? strtol(ts, NULL, 10) : 0;
    if (timeout <= 0)
        timeout = WATCH_DEFAULT_S;
    s->deadline_ms = now_ms() + timeout * 1000;

    const char *rvs = ks_req_arg(r, "resourceVersion");
    snprintf(s->ns, sizeof(s->ns), "%s", rt->ns ? rt->ns : "");
    snprintf(s->name, sizeof(s->name), "%s", rt->name ? rt->name : "");
    ks_watch_opts wo = {.rtype = rt->t,
                        .ns = rt->ns ? s->ns : NULL,
                        .name = rt->name ? s->name : NULL,
                        .labels = s->sel.labels,
                        .fields = s->sel.fields,
                        .bookmarks = ks_req_arg_bool(r, "allowWatchBookmarks", false),
                        .lifetime_ms = timeout * 1000,
                        .keep_src = !s->table && !s->proto && s->srv->evcache};
    if (!wo.name && s->sel.fields)
        wo.name = kc_field_selector_equals_value(s->sel.fields, "metadata.name");
    if (ks_req_arg_bool(r, "sendInitialEvents", false)) {
        /* Streaming lists (client-go's WatchList): the state as ADDED events, a bookmark marking
         * their end, then the changes after that snapshot. */
        if (initial_events(r, s, &wo, &err) != KC_OK) {
            watch_free(s);
            return ks_reply_error(r, &err);
        }
    } else if (!rvs || !rvs[0] || strcmp(rvs, "0") == 0) {
        wo.send_initial = true;
    } else if (parse_rv(rvs, &wo.from_rv, &err) != KC_OK) {
        watch_free(s);
        return ks_reply_error(r, &err);
    }
    kc_code rc = ks_watch_open(r->sim->store, &wo, &s->w, &err);
    if (rc == KC_EEXPIRED) {
        /* The API server answers 200 and reports the expiry as the stream's only event. */
        add_error(s, 410, "Expired", err.msg);
    } else if (rc != KC_OK) {
        watch_free(s);
        return ks_reply_error(r, &err);
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK_BYTES, watch_reader, s, watch_free);
    if (!resp) {
        watch_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            s->proto ? "application/vnd.kubernetes.protobuf;stream=watch"
                                     : "application/json");
    ks_req_no_timeout(r);
    return ks_reply(r, 200, resp);
}

/* ---------------------------------------------------------------------------------------------
 * logs -f
 */

typedef struct log_stream {
    struct ks_server *srv;
    ks_req *req; /* valid while MHD calls the reader */
    ks_sim *sim;
    const ks_rtype *pods;
    char ns[256], pod[256], container[256];
    bool has_container;
    size_t offset; /* bytes of the whole log already sent */
    pending out;
    bool done;
    bool last_poll; /* the pod finished: one more read for its final output */
} log_stream;

static bool pod_finished(log_stream *s, bool *gone)
{
    json_t *pod = NULL;
    *gone = false;
    if (ks_get(s->sim->store, s->pods, s->ns, s->pod, &pod, NULL) != KC_OK) {
        *gone = true;
        return true;
    }
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    bool fin = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
    json_decref(pod);
    return fin;
}

static void log_poll(log_stream *s)
{
    char *text = NULL;
    size_t len = 0;
    if (ks_kubelet_logs(s->sim, s->ns, s->pod, s->has_container ? s->container : NULL, -1, &text,
                        &len, NULL) != KC_OK) {
        s->done = true;
        return;
    }
    if (len > s->offset)
        pend_add(&s->out, text + s->offset, len - s->offset);
    s->offset = len;
    free(text);
}

static ssize_t log_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    log_stream *s = cls;
    for (;;) {
        ssize_t n = pend_take(&s->out, buf, max);
        if (n > 0)
            return n;
        if (s->done || atomic_load(&s->srv->stopping))
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (ks_client_gone(s->req))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        usleep(LOG_POLL_MS * 1000);
        bool gone = false;
        bool fin = pod_finished(s, &gone);
        if (gone) {
            s->done = true;
            continue;
        }
        log_poll(s);
        if (fin)
            s->done = true;
    }
}

static void log_free(void *cls)
{
    log_stream *s = cls;
    free(s->out.buf);
    free(s);
}

enum MHD_Result ks_handle_log_follow(ks_req *r, const char *container, long tail_lines)
{
    const ks_route *rt = &r->route;
    kc_err err;
    char *text = NULL, *all = NULL;
    size_t len = 0, all_len = 0;
    if (ks_kubelet_logs(r->sim, rt->ns, rt->name, container, tail_lines, &text, &len, &err) !=
        KC_OK)
        return ks_reply_error(r, &err);
    /* Where the stream continues from: the end of the whole log. */
    if (ks_kubelet_logs(r->sim, rt->ns, rt->name, container, -1, &all, &all_len, &err) != KC_OK) {
        free(text);
        return ks_reply_error(r, &err);
    }
    free(all);
    log_stream *s = calloc(1, sizeof(*s));
    if (!s || (len && !pend_add(&s->out, text, len))) {
        free(text);
        if (s)
            log_free(s);
        return ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
    }
    free(text);
    s->srv = r->srv;
    s->req = r;
    s->sim = r->sim;
    s->pods = rt->t;
    snprintf(s->ns, sizeof(s->ns), "%s", rt->ns);
    snprintf(s->pod, sizeof(s->pod), "%s", rt->name);
    if (container) {
        snprintf(s->container, sizeof(s->container), "%s", container);
        s->has_container = true;
    }
    s->offset = all_len;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK_BYTES, log_reader, s, log_free);
    if (!resp) {
        log_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    ks_req_no_timeout(r);
    return ks_reply(r, 200, resp);
}
