/* ks_server: kubesim's HTTP(S) API server: libmicrohttpd listeners, request bodies, routing,
 * authentication and authorization, request logging and per-client counters. */
#include "ks_server_int.h"
#include "ks_evcache.h"
#include "ks_pki.h"

#include "kc_log.h"
#include "ks_fault.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Each connection has a thread (watches block it): many small stacks rather than 8 MiB ones. */
#define KS_MAX_CONNECTIONS 20000
#define KS_THREAD_STACK    (1024 * 1024)

/* One listener: the callbacks' closure, telling which port and scheme a request came in on. */
typedef struct ks_listener {
    struct ks_server *srv;
    int port;
    bool tls;
} ks_listener;

/* The server state that must outlive the daemons' threads; lives in ks_server's allocation. */
typedef struct ks_server_box {
    struct ks_server srv;
    ks_listener https_l, http_l;
    char *cert, *key; /* copies of the PEM given to MHD */
} ks_server_box;

/* ---------------------------------------------------------------------------------------------
 * per-client counters
 */

static void count_request(ks_req *r, const char *verb, const char *resource)
{
    struct ks_server *srv = r->srv;
    char key[768];
    snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%s", r->user.name, r->agent, verb, resource);
    pthread_mutex_lock(&srv->stats_mu);
    srv->total++;
    uint64_t *n = kc_map_get(srv->stats, key);
    if (n) {
        (*n)++;
    } else if ((n = malloc(sizeof(*n)))) {
        *n = 1;
        if (kc_map_put(srv->stats, key, n, NULL) != KC_OK)
            free(n);
    }
    pthread_mutex_unlock(&srv->stats_mu);
}

json_t *ks_server_request_stats(ks_sim *sim)
{
    json_t *out = json_pack("{s:I, s:{}}", "total", (json_int_t)0, "clients");
    struct ks_server *srv = sim ? sim->server : NULL;
    if (!out || !srv)
        return out;
    json_t *clients = json_object_get(out, "clients");
    pthread_mutex_lock(&srv->stats_mu);
    json_object_set_new(out, "total", json_integer((json_int_t)srv->total));
    size_t pos = 0;
    const char *key;
    void *val;
    while (kc_map_next(srv->stats, &pos, &key, &val)) {
        char buf[768];
        snprintf(buf, sizeof(buf), "%s", key);
        char *f[4] = {buf, NULL, NULL, NULL};
        for (int i = 1; i < 4; i++) {
            char *sep = f[i - 1] ? strchr(f[i - 1], '\x1f') : NULL;
            if (sep) {
                *sep = '\0';
                f[i] = sep + 1;
            }
        }
        if (!f[3])
            continue;
        char client[400], what[400];
        snprintf(client, sizeof(client), "%s %s", f[0], f[1]);
        snprintf(what, sizeof(what), "%s %s", f[2], f[3]);
        json_t *c = json_object_get(clients, client);
        if (!c) {
            c = json_pack("{s:s, s:s, s:I, s:{}}", "user", f[0], "agent", f[1], "total",
                          (json_int_t)0, "requests");
            if (!c)
                continue;
            json_object_set_new(clients, client, c);
        }
        uint64_t n = *(uint64_t *)val;
        json_object_set_new(
            c, "total",
            json_integer(json_integer_value(json_object_get(c, "total")) + (json_int_t)n));
        json_object_set_new(json_object_get(c, "requests"), what, json_integer((json_int_t)n));
    }
    pthread_mutex_unlock(&srv->stats_mu);
    /* How often a watch event's text was shared rather than serialized again (ks_evcache). */
    uint64_t hits = 0, misses = 0;
    ks_evcache_stats(srv->evcache, &hits, &misses);
    json_object_set_new(
        out, "watchEventText",
        json_pack("{s:I, s:I}", "shared", (json_int_t)hits, "serialized", (json_int_t)misses));
    json_object_set_new(out, "controllers", ks_controllers_stats(sim));
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * routing
 */

static void split_path(ks_req *r)
{
    r->nseg = 0;
    free(r->segbuf);
    r->segbuf = strdup(r->url ? r->url : "/");
    if (!r->segbuf)
        return;
    char *save = NULL;
    for (char *s = strtok_r(r->segbuf, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (r->nseg == KS_MAX_SEGMENTS) {
            r->nseg = KS_MAX_SEGMENTS + 1; /* too deep: never a valid route */
            return;
        }
        r->seg[r->nseg++] = s;
    }
}

/* The type named by a URL segment: only the plural resource name is a valid URL. */
static const ks_rtype *url_type(ks_req *r, const char *group, const char *version,
                                const char *resource)
{
    const ks_rtype *t = ks_store_type(r->sim->store, group, version, resource);
    if (!t || strcmp(t->resource, resource) != 0)
        return NULL;
    return t;
}

static bool sub_allowed(const ks_rtype *t, const char *sub)
{
    if (!sub)
        return true;
    if (strcmp(sub, "status") == 0)
        return t->has_status;
    if (strcmp(sub, "scale") == 0)
        return t->has_scale;
    bool core = t->group[0] == '\0';
    if (core && strcmp(t->resource, "pods") == 0)
        return !strcmp(sub, "log") || !strcmp(sub, "eviction") || !strcmp(sub, "binding");
    if (core && strcmp(t->resource, "namespaces") == 0)
        return strcmp(sub, "finalize") == 0;
    if (core && strcmp(t->resource, "serviceaccounts") == 0)
        return strcmp(sub, "token") == 0;
    return false;
}

/* Fills r->route from the segments; false when the path names no served resource. */
static bool parse_route(ks_req *r)
{
    ks_route *rt = &r->route;
    memset(rt, 0, sizeof(*rt));
    if (r->nseg > KS_MAX_SEGMENTS)
        return false;
    int i;
    if (r->nseg >= 3 && strcmp(r->seg[0], "api") == 0) {
        rt->group = "";
        rt->version = r->seg[1];
        i = 2;
    } else if (r->nseg >= 4 && strcmp(r->seg[0], "apis") == 0) {
        rt->group = r->seg[1];
        rt->version = r->seg[2];
        i = 3;
    } else {
        return false;
    }
    if (strcmp(r->seg[i], "watch") == 0) {
        rt->watch_prefix = true;
        i++;
    }
    const char **rest = &r->seg[i];
    int n = r->nseg - i;
    if (n <= 0)
        return false;
    if (strcmp(rest[0], "namespaces") == 0 && n >= 3) {
        const ks_rtype *t = url_type(r, rt->group, rt->version, rest[2]);
        if (t && t->namespaced) {
            if (n > 5)
                return false;
            rt->t = t;
            rt->ns = rest[1];
            rt->resource = rest[2];
            rt->name = n > 3 ? rest[3] : NULL;
            rt->sub = n > 4 ? rest[4] : NULL;
            return sub_allowed(t, rt->sub);
        }
        if (n != 3)
            return false;
        /* /api/v1/namespaces/NAME/status|finalize */
        t = url_type(r, rt->group, rt->version, "namespaces");
        if (!t)
            return false;
        rt->t = t;
        rt->resource = rest[0];
        rt->name = rest[1];
        rt->sub = rest[2];
        return sub_allowed(t, rt->sub);
    }
    if (n > 3)
        return false;
    const ks_rtype *t = url_type(r, rt->group, rt->version, rest[0]);
    if (!t)
        return false;
    rt->t = t;
    rt->resource = rest[0];
    rt->name = n > 1 ? rest[1] : NULL;
    rt->sub = n > 2 ? rest[2] : NULL;
    if (t->namespaced && rt->name)
        return false; /* a namespaced object is only addressable inside its namespace */
    return sub_allowed(t, rt->sub);
}

static const char *route_verb(ks_req *r)
{
    const ks_route *rt = &r->route;
    const char *m = r->method;
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) {
        if (rt->watch_prefix || (!rt->sub && ks_req_arg_bool(r, "watch", false)))
            return "watch";
        return rt->name ? "get" : "list";
    }
    if (!strcmp(m, "POST"))
        return "create";
    if (!strcmp(m, "PUT"))
        return "update";
    if (!strcmp(m, "PATCH"))
        return "patch";
    if (!strcmp(m, "DELETE"))
        return rt->name ? "delete" : "deletecollection";
    return NULL;
}

enum MHD_Result ks_reply_forbidden(ks_req *r, const char *reason)
{
    const ks_route *rt = &r->route;
    char qual[300], msg[KC_ERR_MSG_MAX + 400];
    if (rt->t->group[0])
        snprintf(qual, sizeof(qual), "%s.%s", rt->t->resource, rt->t->group);
    else
        snprintf(qual, sizeof(qual), "%s", rt->t->resource);
    /* A create names an object only through a subresource (serviceaccounts/NAME/token). */
    bool named = rt->name && (strcmp(r->verb, "create") != 0 || rt->sub);
    if (named)
        snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: %s", qual, rt->name, reason);
    else
        snprintf(msg, sizeof(msg), "%s is forbidden: %s", qual, reason);
    json_t *d = json_object();
    if (named)
        json_object_set_new(d, "name", json_string(rt->name));
    if (rt->t->group[0])
        json_object_set_new(d, "group", json_string(rt->t->group));
    json_object_set_new(d, "kind", json_string(rt->t->resource));
    return ks_reply_status(r, 403, "Forbidden", msg, d);
}

/* GET /kubesim/requests, POST /kubesim/compact, /kubesim/v1/faults, /kubesim/v1/answers: test
 * and benchmark hooks for the admin (answers: nodesim's, see ks_kubelet_answers.c). */
static enum MHD_Result handle_admin(ks_req *r)
{
    if (!r->user.admin)
        return ks_reply_status(r, 403, "Forbidden",
                               "forbidden: the kubesim endpoints are for the admin user only",
                               json_object());
    if (r->nseg == 2 && strcmp(r->seg[1], "requests") == 0 && !strcmp(r->method, "GET"))
        return ks_reply_json(r, 200, ks_server_request_stats(r->sim), NULL);
    if (r->nseg == 2 && strcmp(r->seg[1], "compact") == 0 && !strcmp(r->method, "POST")) {
        ks_store_compact(r->sim->store);
        json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                               "metadata", "status", "Success", "code", 200);
        return ks_reply_json(r, 200, st, NULL);
    }
    if (r->nseg == 3 && !strcmp(r->seg[1], "v1") && !strcmp(r->seg[2], "faults"))
        return ks_fault_handle_admin(r);
    if (r->nseg >= 3 && !strcmp(r->seg[1], "v1") && !strcmp(r->seg[2], "answers"))
        return ks_kubelet_answers_handle(r);
    return ks_reply_not_found(r);
}

static bool is_health(const char *url)
{
    static const char *const paths[] = {"/healthz", "/readyz", "/livez"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(paths[i]);
        if (strncmp(url, paths[i], n) == 0 && (url[n] == '\0' || url[n] == '/'))
            return true;
    }
    return false;
}

static void log_body(ks_req *r)
{
    if (r->sim->opts.verbosity < 3 || !r->body_len)
        return;
    char b[2049];
    size_t n = r->body_len < 2048 ? r->body_len : 2048;
    memcpy(b, r->body, n);
    b[n] = '\0';
    kc_info("request body", "method=%s path=%s body=%s", r->method, r->url, b);
}

/* The name a field selector pins (metadata.name=NAME or ==NAME, alone), or NULL. */
static const char *field_selector_name(const char *fs, char *buf, size_t size)
{
    static const char key[] = "metadata.name";
    if (!fs || strncmp(fs, key, sizeof(key) - 1) != 0)
        return NULL;
    const char *v = fs + sizeof(key) - 1;
    if (!strncmp(v, "==", 2))
        v += 2;
    else if (*v == '=')
        v++;
    else
        return NULL;
    if (!*v || strchr(v, ',') || strlen(v) >= size)
        return NULL;
    snprintf(buf, size, "%s", v);
    return buf;
}

static enum MHD_Result dispatch(ks_req *r)
{
    const char *url = r->url;
    if (r->body_too_big)
        return ks_reply_status(r, 413, "RequestEntityTooLarge",
                               "the request body is too large (the limit is 64 MiB)",
                               json_object());
    if (is_health(url))
        return ks_reply_text(r, 200, "ok", 2);
    split_path(r);
    if (!r->segbuf)
        return ks_reply_status(r, 500, "InternalError", "out of memory", NULL);
    bool handled = false;
    enum MHD_Result ret;
    if (strcmp(url, "/version") == 0 || strcmp(url, "/version/") == 0) {
        ret = ks_handle_discovery(r, &handled);
        if (handled)
            return ret;
    }
    kc_err err;
    kc_err_clear(&err);
    if (ks_auth_authenticate(r->sim, ks_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION), &r->user,
                             &err) != KC_OK)
        return ks_reply_status(r, 401, "Unauthorized", "Unauthorized", NULL);
    r->authed = true;
    if (ks_impersonate(r, &ret))
        return ret;
    log_body(r);
    if (r->nseg >= 1 && strcmp(r->seg[0], "kubesim") == 0) {
        /* One counter for every pod's answers, not one per pod. */
        bool answers = r->nseg > 3 && !strcmp(r->seg[1], "v1") && !strcmp(r->seg[2], "answers");
        count_request(r, r->method, answers ? "/kubesim/v1/answers/namespaces/pods" : url);
        return handle_admin(r);
    }
    ret = ks_handle_discovery(r, &handled);
    if (handled) {
        count_request(r, "get", r->nseg && !strcmp(r->seg[0], "openapi") ? "openapi" : "discovery");
        return ret;
    }
    if (ks_is_ssar_path(r)) {
        count_request(r, "create", "selfsubjectaccessreviews.authorization.k8s.io");
        return ks_handle_ssar(r);
    }
    if (!parse_route(r))
        return ks_reply_not_found(r);
    const char *verb = route_verb(r);
    if (!verb)
        return ks_reply_status(r, 405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource",
                               json_object());
    snprintf(r->verb, sizeof(r->verb), "%s", verb);
    const ks_route *rt = &r->route;
    char reason[1024], by_field[256];
    const char *name = strcmp(verb, "create") == 0 && !rt->sub ? NULL : rt->name;
    /* As the API server: a list or watch of one name (fieldSelector metadata.name=NAME) is
     * authorized for that name, so resourceNames rules can grant it. */
    if (!name && (!strcmp(verb, "list") || !strcmp(verb, "watch")))
        name = field_selector_name(ks_req_arg(r, "fieldSelector"), by_field, sizeof(by_field));
    if (!ks_auth_allowed(r->sim, &r->user, verb, rt->t->group, rt->t->resource, rt->sub, rt->ns,
                         name, reason, sizeof(reason)))
        return ks_reply_forbidden(r, reason);
    char what[300];
    snprintf(what, sizeof(what), "%s%s%s%s%s", rt->t->resource, rt->t->group[0] ? "." : "",
             rt->t->group, rt->sub ? "/" : "", rt->sub ? rt->sub : "");
    count_request(r, verb, what);
    if (ks_fault_on_request(r, &ret))
        return ret;
    return ks_handle_resource(r);
}

/* ---------------------------------------------------------------------------------------------
 * libmicrohttpd callbacks
 */

static void agent_product(char *out, size_t size, const char *ua)
{
    if (!ua || !ua[0]) {
        snprintf(out, size, "unknown");
        return;
    }
    size_t n = strcspn(ua, "/ ");
    if (n == 0)
        n = strlen(ua);
    if (n >= size)
        n = size - 1;
    memcpy(out, ua, n);
    out[n] = '\0';
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    ks_listener *l = cls;
    ks_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r)
            return MHD_NO;
        r->srv = l->srv;
        r->sim = l->srv->sim;
        r->conn = conn;
        r->method = method;
        r->port = l->port;
        r->tls = l->tls;
        r->url = strdup(url ? url : "/");
        clock_gettime(CLOCK_MONOTONIC, &r->start);
        agent_product(r->agent, sizeof(r->agent),
                      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"));
        *con_cls = r;
        return r->url ? MHD_YES : MHD_NO;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->body_too_big || r->body_len + n > KS_MAX_BODY) {
            r->body_too_big = true;
            return MHD_YES;
        }
        if (r->body_len + n + 1 > r->body_cap) {
            size_t cap = r->body_cap ? r->body_cap : 4096;
            while (cap < r->body_len + n + 1)
                cap *= 2;
            char *nb = realloc(r->body, cap);
            if (!nb)
                return MHD_NO;
            r->body = nb;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, upload_data, n);
        r->body_len += n;
        r->body[r->body_len] = '\0';
        return MHD_YES;
    }
    return dispatch(r);
}

/* The query string (decoded values) for the request log. */
typedef struct query_buf {
    char s[400];
    size_t len;
} query_buf;

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    query_buf *q = cls;
    if (q->len < sizeof(q->s))
        q->len += (size_t)snprintf(q->s + q->len, sizeof(q->s) - q->len, "%s%s%s%s",
                                   q->len ? "&" : "?", key, value ? "=" : "", value ? value : "");
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    ks_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    int verbosity = r->sim->opts.verbosity;
    bool write = strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0;
    if (verbosity >= 2 || (verbosity >= 1 && write) || r->status >= 500 || r->fault[0]) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ms = (double)(now.tv_sec - r->start.tv_sec) * 1e3 +
                    (double)(now.tv_nsec - r->start.tv_nsec) / 1e6;
        char path[900];
        const char *ua = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent");
        query_buf q = {.len = 0};
        q.s[0] = '\0';
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_query, &q);
        snprintf(path, sizeof(path), "%s%s", r->url ? r->url : "", q.s);
        kc_log(r->status >= 500 ? KC_LOG_WARN : KC_LOG_INFO, "request",
               "method=%s path=%s verb=%s status=%d duration_ms=%.1f user=%s agent=%s%s%s%s",
               r->method, path, r->verb[0] ? r->verb : "-", r->status, ms,
               r->user.name[0] ? r->user.name : "-", ua ? ua : "-",
               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted=true",
               r->fault[0] ? " fault=" : "", r->fault);
    }
    free(r->url);
    free(r->body);
    free(r->segbuf);
    json_decref(r->warnings);
    free(r);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    kc_debug("api server", "detail=%s", msg);
}

/* ---------------------------------------------------------------------------------------------
 * start / stop
 */

static kc_code listen_on(const char *host, int port, int *fd_out, int *port_out, bool *v6,
                         kc_err *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int gai = getaddrinfo(host && host[0] ? host : NULL, ps, &hints, &res);
    if (gai != 0)
        return kc_err_set(err, KC_EARG, "listen on %s:%d: cannot resolve the host: %s",
                          host ? host : "", port, gai_strerror(gai));
    int fd = -1, last = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 512) == 0) {
            *v6 = a->ai_family == AF_INET6;
            break;
        }
        last = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return kc_err_set(err, KC_EIO, "listen on %s:%d: %s", host ? host : "", port,
                          strerror(last));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        int e = errno;
        close(fd);
        return kc_err_set(err, KC_EIO, "listen on %s:%d: getsockname: %s", host ? host : "", port,
                          strerror(e));
    }
    *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return KC_OK;
}

static struct MHD_Daemon *start_daemon(ks_listener *l, int fd, bool v6, const char *cert,
                                       const char *key)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* Thread per connection: watches and log streams block their connection's thread. The idle
     * timeout reclaims keep-alive connections clients forgot; streams turn it off for
     * themselves. */
    if (l->tls)
        return MHD_start_daemon(
            flags | MHD_USE_TLS, 0, NULL, NULL, on_access, l, MHD_OPTION_LISTEN_SOCKET, fd,
            MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_HTTPS_MEM_CERT, cert,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
            NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)KS_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
            MHD_OPTION_THREAD_STACK_SIZE, (size_t)KS_THREAD_STACK, MHD_OPTION_END);
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, l, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)KS_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)KS_THREAD_STACK, MHD_OPTION_END);
}

static char *url_for(const char *scheme, const char *host, int port)
{
    const char *h = host;
    if (!h || !h[0] || !strcmp(h, "0.0.0.0") || !strcmp(h, "::") || !strcmp(h, "localhost"))
        h = "127.0.0.1";
    char buf[300];
    if (strchr(h, ':'))
        snprintf(buf, sizeof(buf), "%s://[%s]:%d", scheme, h, port);
    else
        snprintf(buf, sizeof(buf), "%s://%s:%d", scheme, h, port);
    return strdup(buf);
}

static void random_nonce(char out[17])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[8] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(b, 1, sizeof(b), f) != sizeof(b)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        memcpy(b, &v, sizeof(b));
    }
    if (f)
        fclose(f);
    for (int i = 0; i < 8; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[16] = '\0';
}

/* One descriptor per client connection: thousands of simulated nodes' watches need more than
 * the usual soft limit of 1024. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= 65536 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
    setrlimit(RLIMIT_NOFILE, &rl);
}

kc_code ks_server_start(ks_sim *sim, const char *cert_pem, const char *key_pem, kc_err *err)
{
    if (!sim || !sim->store)
        return kc_err_set(err, KC_EARG, "api server: the simulator has no store");
    if (sim->server)
        return kc_err_set(err, KC_EARG, "api server: already started");
    bool https = sim->opts.https_port >= 0;
    bool http = sim->opts.http_port >= 0;
    if (!https && !http)
        return kc_err_set(err, KC_EARG, "api server: neither an HTTPS nor an HTTP port is set");
    if (https && (!cert_pem || !key_pem))
        return kc_err_set(err, KC_EARG, "api server: HTTPS needs a serving certificate and key");
    if (https && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return kc_err_set(err, KC_EUNSUPPORTED,
                          "api server: libmicrohttpd was built without TLS support");
    raise_fd_limit();
    ks_server_box *box = calloc(1, sizeof(*box));
    if (!box)
        return kc_err_set(err, KC_ENOMEM, "api server: out of memory");
    struct ks_server *srv = &box->srv;
    kc_code rc = KC_OK;
    srv->sim = sim;
    srv->https_port = srv->http_port = -1;
    atomic_init(&srv->stopping, false);
    random_nonce(srv->nonce);
    pthread_mutex_init(&srv->stats_mu, NULL);
    srv->stats = kc_map_new();
    srv->faults = ks_faults_new(srv);
    srv->evcache = ks_evcache_new();
    if (!srv->stats || !srv->faults || !srv->evcache) {
        rc = kc_err_set(err, KC_ENOMEM, "api server: out of memory");
        goto fail;
    }
    const char *host = sim->opts.listen_host ? sim->opts.listen_host : "127.0.0.1";
    if (https) {
        int fd = -1;
        bool v6 = false;
        /* Without a fixed port: the one of the last start on this directory when it is free, so
         * that clients holding the old URL (nodesim, the operator's pods) reconnect after a
         * restart. */
        char pfile[4096] = "";
        if (sim->opts.https_port == 0 && sim->opts.dir && *sim->opts.dir) {
            snprintf(pfile, sizeof(pfile), "%s/https.port", sim->opts.dir);
            FILE *f = fopen(pfile, "re");
            int last = 0;
            if (f && fscanf(f, "%d", &last) == 1 && last > 0 && last < 65536 &&
                listen_on(host, last, &fd, &srv->https_port, &v6, NULL) != KC_OK)
                fd = -1;
            if (f)
                fclose(f);
        }
        if (fd < 0 &&
            (rc = listen_on(host, sim->opts.https_port, &fd, &srv->https_port, &v6, err)) != KC_OK)
            goto fail;
        if (*pfile) {
            char num[16];
            int n = snprintf(num, sizeof(num), "%d\n", srv->https_port);
            if (ks_pki_write_file(pfile, num, (size_t)n, 0644, NULL) != KC_OK)
                kc_warn("cannot record the HTTPS port", "path=%s", pfile);
        }
        box->cert = strdup(cert_pem);
        box->key = strdup(key_pem);
        box->https_l = (ks_listener){.srv = srv, .port = srv->https_port, .tls = true};
        if (box->cert && box->key)
            srv->https_d = start_daemon(&box->https_l, fd, v6, box->cert, box->key);
        if (!srv->https_d) {
            close(fd);
            rc = kc_err_set(err, KC_ETLS,
                            "api server: HTTPS listener on %s:%d failed to start (is the "
                            "certificate/key PEM valid?)",
                            host, srv->https_port);
            goto fail;
        }
    }
    if (http) {
        int fd = -1;
        bool v6 = false;
        if ((rc = listen_on(host, sim->opts.http_port, &fd, &srv->http_port, &v6, err)) != KC_OK)
            goto fail;
        box->http_l = (ks_listener){.srv = srv, .port = srv->http_port, .tls = false};
        srv->http_d = start_daemon(&box->http_l, fd, v6, NULL, NULL);
        if (!srv->http_d) {
            close(fd);
            rc = kc_err_set(err, KC_EIO, "api server: HTTP listener on %s:%d failed to start", host,
                            srv->http_port);
            goto fail;
        }
        sim->http_url = url_for("http", host, srv->http_port);
    }
    sim->server_url =
        https ? url_for("https", host, srv->https_port) : url_for("http", host, srv->http_port);
    sim->server = srv;
    if (!sim->server_url || (http && !sim->http_url)) {
        ks_server_stop(sim);
        return kc_err_set(err, KC_ENOMEM, "api server: out of memory");
    }
    kc_info("api server listening", "url=%s http=%s", sim->server_url,
            sim->http_url ? sim->http_url : "-");
    return KC_OK;
fail:
    if (srv->https_d)
        MHD_stop_daemon(srv->https_d);
    if (srv->http_d)
        MHD_stop_daemon(srv->http_d);
    free(sim->http_url);
    sim->http_url = NULL;
    ks_faults_free(srv->faults);
    ks_evcache_free(srv->evcache);
    kc_map_free(srv->stats, free);
    pthread_mutex_destroy(&srv->stats_mu);
    free(box->cert);
    free(box->key);
    free(box);
    return rc;
}

void ks_server_stop(ks_sim *sim)
{
    struct ks_server *srv = sim ? sim->server : NULL;
    if (!srv)
        return;
    ks_server_box *box = (ks_server_box *)srv;
    ks_faults_shutdown(srv->faults); /* no outage begins or ends from here on */
    /* Streams poll this flag, so the connection threads MHD joins below finish promptly. */
    atomic_store(&srv->stopping, true);
    if (srv->https_d)
        MHD_stop_daemon(srv->https_d);
    if (srv->http_d)
        MHD_stop_daemon(srv->http_d);
    sim->server = NULL;
    free(sim->server_url);
    sim->server_url = NULL;
    free(sim->http_url);
    sim->http_url = NULL;
    ks_faults_free(srv->faults);
    ks_evcache_free(srv->evcache);
    kc_map_free(srv->stats, free);
    pthread_mutex_destroy(&srv->stats_mu);
    free(box->cert);
    free(box->key);
    free(box);
}

void ks_server_pause(struct ks_server *srv)
{
    atomic_store(&srv->stopping, true);
    struct MHD_Daemon *a = srv->https_d, *b = srv->http_d;
    srv->https_d = srv->http_d = NULL;
    /* The listening sockets close first: new clients are refused at once, not after the open
     * streams have noticed the stop. */
    MHD_socket fa = a ? MHD_quiesce_daemon(a) : MHD_INVALID_SOCKET;
    MHD_socket fb = b ? MHD_quiesce_daemon(b) : MHD_INVALID_SOCKET;
    if (fa != MHD_INVALID_SOCKET)
        close(fa);
    if (fb != MHD_INVALID_SOCKET)
        close(fb);
    if (a)
        MHD_stop_daemon(a);
    if (b)
        MHD_stop_daemon(b);
}

kc_code ks_server_resume(struct ks_server *srv, kc_err *err)
{
    ks_server_box *box = (ks_server_box *)srv;
    const char *host = srv->sim->opts.listen_host ? srv->sim->opts.listen_host : "127.0.0.1";
    atomic_store(&srv->stopping, false);
    ks_listener *ls[2] = {&box->https_l, &box->http_l};
    struct MHD_Daemon **ds[2] = {&srv->https_d, &srv->http_d};
    int ports[2] = {srv->https_port, srv->http_port};
    for (int i = 0; i < 2; i++) {
        if (ports[i] < 0 || *ds[i])
            continue;
        int fd = -1, port = 0;
        bool v6 = false;
        kc_code rc = listen_on(host, ports[i], &fd, &port, &v6, err);
        if (rc != KC_OK)
            return rc;
        *ds[i] = start_daemon(ls[i], fd, v6, box->cert, box->key);
        if (!*ds[i]) {
            close(fd);
            return kc_err_set(err, KC_EIO, "api server: listener on %s:%d failed to restart", host,
                              ports[i]);
        }
    }
    return KC_OK;
}
