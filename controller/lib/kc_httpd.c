/* kc_httpd: serves /metrics, /healthz and /readyz from one libmicrohttpd thread. */
#include "kc_httpd.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kc_log.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_CONTENT_TYPE    "text/plain; charset=utf-8"
#define REASON_MAX           512

/* Only Prometheus and the kubelet talk to this endpoint: a few connections, kept alive between
 * scrapes and probes, which come every few seconds to a minute. */
#define MAX_CONNS      64
#define IDLE_TIMEOUT_S 30   /* a connection without traffic for this long is closed */
#define STOP_DRAIN_MS  2000 /* kc_httpd_stop: time left to responses already being sent */
#define STOP_POLL_MS   5
#define START_MSG_MAX  256

struct kc_httpd {
    struct MHD_Daemon *daemon;
    int port;
    kc_registry *registry;
    kc_httpd_check ready, live;
    void *ready_ud, *live_ud;
    /* Requests begun and not over yet (on_request to on_completed), for kc_httpd_stop to wait
     * on. */
    atomic_int in_flight;
};

/* What libmicrohttpd reported while a daemon was starting: the last message it logged and the
 * errno of the call that failed. */
typedef struct start_report {
    int errnum;
    char msg[START_MSG_MAX];
} start_report;

/* Set for the length of one MHD_start_daemon on the thread that calls it, so that what MHD logs
 * meanwhile (on that thread) becomes the reason of a failed start instead of a log line; the
 * server's own thread never sees it set and logs its messages. */
static _Thread_local start_report *starting;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Addresses ---- */

kc_code kc_httpd_parse_addr(const char *addr, char *host, size_t host_size, int *port, kc_err *err)
{
    if (!addr || !host || host_size == 0 || !port)
        return kc_err_set(err, KC_EARG, "listen address: address and outputs must not be NULL");
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return kc_err_set(err, KC_EARG,
                          "listen address \"%s\": expected host:port, :port or [ipv6]:port", addr);
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (addr[0] == '[') {
        if (hlen == 2 && addr[1] == ']')
            return kc_err_set(err, KC_EARG,
                              "listen address \"%s\": empty brackets; use :port for every "
                              "address",
                              addr);
        if (hlen < 2 || addr[hlen - 1] != ']')
            return kc_err_set(err, KC_EARG,
                              "listen address \"%s\": an IPv6 address needs its closing ']' "
                              "right before :port",
                              addr);
        h = addr + 1;
        hlen -= 2;
    } else if (memchr(addr, ':', hlen)) {
        return kc_err_set(err, KC_EARG,
                          "listen address \"%s\": write IPv6 addresses in brackets, e.g. "
                          "[::1]:8080",
                          addr);
    }
    if (hlen >= host_size)
        return kc_err_set(err, KC_EARG, "listen address \"%s\": host is too long", addr);
    const char *p = colon + 1;
    if (!*p)
        return kc_err_set(err, KC_EARG, "listen address \"%s\": port is missing after ':'", addr);
    long v = 0;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return kc_err_set(err, KC_EARG,
                              "listen address \"%s\": port \"%s\" is not a number 0-65535", addr,
                              p);
        v = v * 10 + (*q - '0');
        if (v > 65535)
            return kc_err_set(err, KC_EARG,
                              "listen address \"%s\": port %s is out of range 0-65535", addr, p);
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)v;
    return KC_OK;
}

/* ---- Requests ---- */

/* Queues a response of status with body as its text (kept as mode says) and the content type;
 * allow adds the Allow header a 405 must carry. HEAD requests get the same headers without the
 * body: libmicrohttpd leaves it out. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               char *body, enum MHD_ResponseMemoryMode mode, bool allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body); /* not taken on failure */
        return MHD_NO;  /* the connection is closed without a response */
    }
    enum MHD_Result ret = MHD_NO;
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype) == MHD_YES &&
        (!allow || MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") == MHD_YES))
        ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r); /* the queued response holds its own reference */
    return ret;
}

/* Static bodies are sent from where they are, without a copy. */
static enum MHD_Result respond_static(struct MHD_Connection *c, unsigned status, const char *body,
                                      bool allow)
{
    return respond(c, status, TEXT_CONTENT_TYPE, (char *)body, MHD_RESPMEM_PERSISTENT, allow);
}

static enum MHD_Result serve_metrics(kc_httpd *h, struct MHD_Connection *c)
{
    char *text = kc_metrics_render(h->registry);
    if (!text)
        return respond_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                              "out of memory rendering metrics\n", false);
    return respond(c, MHD_HTTP_OK, METRICS_CONTENT_TYPE, text, MHD_RESPMEM_MUST_FREE, false);
}

/* Runs a health check: 200 "ok", or fail_status with its reason (fail_default when it gave
 * none). */
static enum MHD_Result serve_check(struct MHD_Connection *c, kc_httpd_check fn, void *ud,
                                   unsigned fail_status, const char *fail_default)
{
    char reason[REASON_MAX] = "";
    if (!fn || fn(ud, reason, sizeof(reason)))
        return respond_static(c, MHD_HTTP_OK, "ok", false);
    reason[sizeof(reason) - 1] = '\0';
    if (!reason[0])
        return respond_static(c, fail_status, fail_default, false);
    return respond(c, fail_status, TEXT_CONTENT_TYPE, reason, MHD_RESPMEM_MUST_COPY, false);
}

/* Whether a body follows the request head. */
static bool has_body(struct MHD_Connection *c)
{
    const char *len =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
           (len && len[strspn(len, "0")]);
}

/* The path of a request target: origin-form "/path", or the absolute-form "http://host/path"
 * that HTTP/1.1 servers must accept as well ("/" when it has no path). */
static const char *target_path(const char *url)
{
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return url;
    const char *path = strchr(strstr(url, "//") + 2, '/');
    return path ? path : "/";
}

/* libmicrohttpd's access handler: called first with the request head, then with the body (if
 * any) and once more when the request is complete. url comes with its query removed and its
 * %XX escapes decoded. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    kc_httpd *h = cls;
    if (!*req_cls) {
        /* In flight until on_completed, so that kc_httpd_stop lets the response go out. */
        *req_cls = h;
        atomic_fetch_add(&h->in_flight, 1);
        /* A response queued on this first call makes libmicrohttpd close the connection after
         * it without reading the body: what a request with a body gets, as no endpoint takes
         * one. Others are answered on the next call, keeping the connection for the next
         * request. */
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
            return respond_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", true);
        if (!has_body(c))
            return MHD_YES;
    } else if (*upload_data_size) {
        *upload_data_size = 0; /* body bytes offered all the same: dropped */
        return MHD_YES;
    }
    const char *path = target_path(url);
    if (h->registry && strcmp(path, "/metrics") == 0)
        return serve_metrics(h, c);
    if (strcmp(path, "/healthz") == 0)
        return serve_check(c, h->live, h->live_ud, MHD_HTTP_INTERNAL_SERVER_ERROR, "unhealthy");
    if (strcmp(path, "/readyz") == 0)
        return serve_check(c, h->ready, h->ready_ud, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready");
    return respond_static(c, MHD_HTTP_NOT_FOUND, "404 page not found\n", false);
}

/* A request is over: its response went out, or its connection closed or timed out. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    kc_httpd *h = cls;
    if (!*req_cls)
        return; /* never reached on_request */
    *req_cls = NULL;
    atomic_fetch_sub(&h->in_flight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    /* MHD formats its message right after the call that failed: errno is still that call's. */
    int errnum = errno;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    if (starting) {
        starting->errnum = errnum;
        snprintf(starting->msg, sizeof(starting->msg), "%s", msg);
        return;
    }
    kc_warn("http server", "detail=%s", msg);
}

/* ---- Starting and stopping ---- */

/* Starts a daemon on sa (NULL: every address of the family flags name) and port; NULL when it
 * failed, with what libmicrohttpd said in *rep. */
static struct MHD_Daemon *start_daemon(kc_httpd *h, unsigned flags, int port,
                                       const struct sockaddr *sa, start_report *rep)
{
    /* One internal thread serves every connection (epoll where available), so the checks run one
     * request at a time as kc_httpd.h promises. ITC lets kc_httpd_stop close the listener before
     * the daemon stops. */
    flags |= MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    *rep = (start_report){0};
    /* The server's thread inherits the mask: it takes no asynchronous signals, which are for the
     * program's own handling. */
    sigset_t all, old;
    sigfillset(&all);
    bool masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    starting = rep;
    errno = 0;
    struct MHD_Daemon *d =
        MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, sa,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_EXTERNAL_LOGGER,
                         mhd_log, h, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNS, MHD_OPTION_END);
    if (!d && !rep->msg[0])
        rep->errnum = errno; /* it logged nothing: errno is all there is */
    starting = NULL;
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return d;
}

static kc_code start_failed(const char *addr, const start_report *rep, kc_err *err)
{
    if (rep->msg[0])
        return kc_err_set(err, KC_EIO, "listen on %s: %s", addr, rep->msg);
    if (rep->errnum)
        return kc_err_set(err, KC_EIO, "listen on %s: %s", addr, strerror(rep->errnum));
    return kc_err_set(err, KC_EIO, "listen on %s: the HTTP server failed to start", addr);
}

/* Starts h->daemon on the address; host "" is every address. */
static kc_code listen_on(kc_httpd *h, const char *addr, const char *host, int port, kc_err *err)
{
    start_report rep = {0};
    if (!host[0]) {
        /* Every address: one dual-stack IPv6 socket, or IPv4 alone where the kernel has no
         * IPv6. */
        h->daemon = start_daemon(h, MHD_USE_DUAL_STACK, port, NULL, &rep);
        if (!h->daemon && (rep.errnum == EAFNOSUPPORT || rep.errnum == EADDRNOTAVAIL))
            h->daemon = start_daemon(h, 0, port, NULL, &rep);
        return h->daemon ? KC_OK : start_failed(addr, &rep, err);
    }
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0)
        return kc_err_set(err, KC_EARG, "listen address \"%s\": cannot resolve host \"%s\": %s",
                          addr, host, gai_strerror(gai));
    /* The first of the host's addresses that binds; an IPv6 one serves IPv6 only, as the host
     * names that address and no other. */
    for (struct addrinfo *ai = res; ai && !h->daemon; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET6)
            h->daemon = start_daemon(h, MHD_USE_IPv6, port, ai->ai_addr, &rep);
        else if (ai->ai_family == AF_INET)
            h->daemon = start_daemon(h, 0, port, ai->ai_addr, &rep);
    }
    freeaddrinfo(res);
    return h->daemon ? KC_OK : start_failed(addr, &rep, err);
}

kc_code kc_httpd_start(const kc_httpd_opts *opts, kc_httpd **out, kc_err *err)
{
    if (!opts || !out)
        return kc_err_set(err, KC_EARG, "http server: options and output must not be NULL");
    char host[256];
    int port = 0;
    kc_code rc = kc_httpd_parse_addr(opts->addr, host, sizeof(host), &port, err);
    if (rc != KC_OK)
        return rc;
    kc_httpd *h = calloc(1, sizeof(*h));
    if (!h)
        return kc_err_set(err, KC_ENOMEM, "out of memory starting the http server");
    h->registry = opts->registry;
    h->ready = opts->ready;
    h->ready_ud = opts->ready_ud;
    h->live = opts->live;
    h->live_ud = opts->live_ud;
    atomic_init(&h->in_flight, 0);

    if ((rc = listen_on(h, opts->addr, host, port, err)) != KC_OK)
        goto free_h;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (!info || info->port == 0) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: cannot tell the port bound", opts->addr);
        goto stop_daemon;
    }
    h->port = info->port;
    kc_info("http server listening", "addr=%s port=%d", opts->addr, h->port);
    *out = h;
    return KC_OK;
stop_daemon:
    MHD_stop_daemon(h->daemon);
free_h:
    free(h);
    return rc;
}

int kc_httpd_port(const kc_httpd *h)
{
    return h ? h->port : 0;
}

void kc_httpd_stop(kc_httpd *h)
{
    if (!h)
        return;
    /* New clients are refused at once; responses already being sent get STOP_DRAIN_MS to go out
     * before MHD_stop_daemon closes every connection. Kept-alive connections between requests
     * are not waited for. */
    MHD_socket listen_fd = MHD_quiesce_daemon(h->daemon);
    long long deadline = mono_ms() + STOP_DRAIN_MS;
    while (atomic_load(&h->in_flight) > 0 && mono_ms() < deadline) {
        /* Interrupted by a signal, it only looks again sooner. */
        nanosleep(&(struct timespec){.tv_nsec = STOP_POLL_MS * 1000000L}, NULL);
    }
    MHD_stop_daemon(h->daemon);
    /* A quiesced daemon leaves its listening socket to the caller. */
    if (listen_fd != MHD_INVALID_SOCKET)
        close(listen_fd);
    free(h);
}
