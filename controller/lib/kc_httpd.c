/* kc_httpd: serves /metrics, /healthz and /readyz from a libmicrohttpd thread. */
#include "kc_httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kc_log.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_CONTENT_TYPE    "text/plain; charset=utf-8"
#define REASON_MAX           512

struct kc_httpd {
    struct MHD_Daemon *daemon;
    int port;
    kc_registry *registry;
    kc_httpd_check ready, live;
    void *ready_ud, *live_ud;
};

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

/* Creates a listening socket on one address; returns the fd or -1 with errno set. */
static int listen_on(const struct sockaddr *sa, socklen_t len, int v6only)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6 && v6only >= 0)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
    if (bind(fd, sa, len) != 0 || listen(fd, 64) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static kc_code bind_addr(const char *addr, const char *host, int port, int *fd_out, kc_err *err)
{
    int fd = -1;
    if (!host[0]) {
        /* Every address: prefer one dual-stack IPv6 socket, fall back to IPv4 where the kernel
         * has no IPv6. */
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
        a6.sin6_addr = in6addr_any;
        fd = listen_on((struct sockaddr *)&a6, sizeof(a6), 0);
        if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
            struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
            a4.sin_addr.s_addr = htonl(INADDR_ANY);
            fd = listen_on((struct sockaddr *)&a4, sizeof(a4), -1);
        }
        if (fd < 0)
            return kc_err_set(err, KC_EIO, "listen on %s: %s", addr, strerror(errno));
        *fd_out = fd;
        return KC_OK;
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
    int last_errno = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = listen_on(ai->ai_addr, ai->ai_addrlen, 1);
        if (fd < 0)
            last_errno = errno;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return kc_err_set(err, KC_EIO, "listen on %s: %s", addr, strerror(last_errno));
    *fd_out = fd;
    return KC_OK;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype,
                                 const char *body, const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_metrics(kc_httpd *h, struct MHD_Connection *c)
{
    char *text = kc_metrics_render(h->registry);
    if (!text)
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, TEXT_CONTENT_TYPE,
                         "out of memory rendering metrics\n", NULL);
    /* MHD frees the buffer with free() once sent. */
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_check(struct MHD_Connection *c, kc_httpd_check fn, void *ud,
                                   unsigned fail_status, const char *fail_default)
{
    char reason[REASON_MAX] = "";
    if (!fn || fn(ud, reason, sizeof(reason)))
        return send_text(c, MHD_HTTP_OK, TEXT_CONTENT_TYPE, "ok", NULL);
    reason[sizeof(reason) - 1] = '\0';
    return send_text(c, fail_status, TEXT_CONTENT_TYPE, reason[0] ? reason : fail_default, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    kc_httpd *h = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        /* Answered on the first call, before any request body is read. */
        return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT_CONTENT_TYPE, "method not allowed\n",
                         "GET, HEAD");
    }
    if (strcmp(url, "/metrics") == 0 && h->registry)
        return serve_metrics(h, c);
    if (strcmp(url, "/healthz") == 0)
        return serve_check(c, h->live, h->live_ud, MHD_HTTP_INTERNAL_SERVER_ERROR, "unhealthy");
    if (strcmp(url, "/readyz") == 0)
        return serve_check(c, h->ready, h->ready_ud, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready");
    return send_text(c, MHD_HTTP_NOT_FOUND, TEXT_CONTENT_TYPE, "404 page not found\n", NULL);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    char q[600];
    kc_warn("http server", "detail=%s", kc_log_quote(q, sizeof(q), msg));
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

    int fd = -1;
    if ((rc = bind_addr(opts->addr, host, port, &fd, err)) != KC_OK)
        goto free_h;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: getsockname: %s", opts->addr, strerror(errno));
        goto close_fd;
    }
    h->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    h->daemon =
        MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                         on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                         MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
    if (!h->daemon) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: the HTTP server failed to start", opts->addr);
        /* MHD closes the given socket on some of its failure paths and not on others; a leaked
         * descriptor on this rare path is safer than closing one twice. */
        goto free_h;
    }
    kc_info("http server listening", "addr=%s port=%d", opts->addr, h->port);
    *out = h;
    return KC_OK;
close_fd:
    close(fd);
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
    /* Closes the listening socket it was given, too. */
    MHD_stop_daemon(h->daemon);
    free(h);
}
