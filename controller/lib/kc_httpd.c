/* kc_httpd: serves /metrics, /healthz and /readyz over plain HTTP/1.0 and 1.1 from one thread.
 *
 * Only Prometheus and the kubelet talk to this endpoint, so a small server does: one thread polls
 * the listening socket, a wake pipe and up to MAX_CONNS client connections (kept open between
 * requests, as scrapers and probes reuse them), reads each request head into a bounded buffer,
 * answers it from the registry or a health check, and sends the reply without blocking. Every
 * phase of a connection has a deadline, so a slow or silent client holds a slot for a bounded
 * time and never stalls the others. */
#include "kc_httpd.h"
#include "kc_httpd_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

#define MAX_CONNS         16    /* client connections open at once */
#define HEAD_MAX          8192  /* request line and headers, the most one request may send */
#define IO_TIMEOUT_MS     10000 /* to receive one request head, or to send one response */
#define IDLE_TIMEOUT_MS   30000 /* a kept-alive connection waiting for its next request */
#define LINGER_TIMEOUT_MS 2000  /* a closing connection draining what the client still sends */
#define LINGER_MAX        65536 /* bytes discarded while lingering before giving up */
#define STOP_DRAIN_MS     2000  /* kc_httpd_stop: time left to responses already being sent */
#define ACCEPT_PAUSE_MS   100   /* accept failed for want of descriptors or memory: wait */

typedef enum conn_state {
    CONN_FREE,   /* slot unused */
    CONN_READ,   /* waiting for (the rest of) a request head */
    CONN_WRITE,  /* sending a response */
    CONN_LINGER, /* response sent and write side shut: discarding input until the client closes */
} conn_state;

typedef struct conn {
    conn_state state;
    int fd;
    char *in; /* HEAD_MAX bytes: the request head being received, then any pipelined bytes */
    size_t in_len;
    char *out; /* the response being sent (head and body) */
    size_t out_len, out_off;
    bool close_after;     /* close once out is sent */
    bool idle;            /* no byte of a request received yet (new, or kept alive after one) */
    long long deadline;   /* monotonic ms at which the current phase times out */
    long long idle_since; /* since when it is idle, to evict the longest idle first */
    size_t lingered;      /* bytes discarded while lingering */
} conn;

struct kc_httpd {
    int port;
    int listen_fd;
    int wake[2]; /* self-pipe: kc_httpd_stop writes to [1], the thread polls [0] */
    pthread_t thread;
    kc_registry *registry;
    kc_httpd_check ready, live;
    void *ready_ud, *live_ud;
    /* The thread's own state from here on. */
    bool stopping;
    long long accept_paused_until, accept_warned_at;
    conn conns[MAX_CONNS];
};

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Addresses and the listening socket ---- */

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

/* Creates a listening socket on one address; returns the fd or -1 with errno set. Non-blocking, so
 * an accept after a client gave up returns at once instead of stalling the thread. */
static int listen_on(const struct sockaddr *sa, socklen_t len, int v6only)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

/* ---- Connections ---- */

static void conn_close(conn *c)
{
    close(c->fd);
    free(c->in);
    free(c->out);
    *c = (conn){.state = CONN_FREE, .fd = -1};
}

/* Takes a new connection into the free slot c; closes it when memory is short. */
static void conn_open(conn *c, int fd, long long now)
{
    /* Each response goes out as one send of a complete message, so Nagle's algorithm has nothing
     * to coalesce; it could only delay a kept-alive connection's next reply. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *c = (conn){.state = CONN_READ, .fd = fd, .in = malloc(HEAD_MAX), .idle = true};
    /* A client connects to send a request: its first one has to start in time as well. */
    c->idle_since = now;
    c->deadline = now + IO_TIMEOUT_MS;
    if (!c->in)
        conn_close(c);
}

static conn *free_slot(kc_httpd *h)
{
    for (int i = 0; i < MAX_CONNS; i++)
        if (h->conns[i].state == CONN_FREE)
            return &h->conns[i];
    return NULL;
}

/* The connection to give up for a new one when every slot is taken: the one idle the longest,
 * kept alive after a response or connected without sending anything yet. Closing a connection
 * between requests is ordinary HTTP that clients retry, and it keeps clients that connect and stay
 * silent from locking others out; one in the middle of a request is never chosen. NULL when none
 * is idle. */
static conn *evictable(kc_httpd *h)
{
    conn *best = NULL;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = &h->conns[i];
        if (c->state == CONN_READ && c->idle && (!best || c->idle_since < best->idle_since))
            best = c;
    }
    return best;
}

/* Closing right after a response while the client may still be sending (a request body, a bad
 * request's rest) makes the kernel answer with a reset, which can destroy the response before the
 * client has read it. So the write side is shut and the input drained until the client closes,
 * for a bounded time and size. */
static void conn_linger(conn *c, long long now)
{
    if (shutdown(c->fd, SHUT_WR) != 0) {
        conn_close(c);
        return;
    }
    free(c->in);
    c->in = NULL;
    c->in_len = 0;
    c->lingered = 0;
    c->state = CONN_LINGER;
    c->deadline = now + LINGER_TIMEOUT_MS;
}

/* Sends what the socket takes of c's response. Once all of it is out, the connection waits for
 * its next request, or closes. */
static void conn_send(kc_httpd *h, conn *c, long long now)
{
    if (c->state != CONN_WRITE)
        return;
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    if (h->stopping) {
        conn_close(c);
    } else if (c->close_after) {
        conn_linger(c, now);
    } else {
        c->state = CONN_READ;
        c->idle = c->in_len == 0; /* else a pipelined request is already arriving */
        c->idle_since = now;
        c->deadline = now + (c->idle ? IDLE_TIMEOUT_MS : IO_TIMEOUT_MS);
    }
}

/* ---- Responses ---- */

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    }
    return "Unknown";
}

/* The Date header's IMF-fixdate, written by hand: strftime's names follow the locale. */
static void http_date(char *out, size_t size)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, size, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
             months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* How to answer one request, from its head. */
typedef struct request {
    bool head_only;     /* HEAD: the headers a GET would get, without the body */
    bool close;         /* close the connection after the response */
    bool keep_alive_10; /* an HTTP/1.0 client asked to keep the connection: confirm it */
} request;

/* Queues the response on c (state CONN_WRITE); closes c when memory is short. */
static void respond(conn *c, const request *rq, int status, const char *ctype, const char *body,
                    bool allow, long long now)
{
    char date[64], head[512];
    http_date(date, sizeof(date));
    size_t body_len = strlen(body);
    const char *connection = rq->close           ? "Connection: close\r\n"
                             : rq->keep_alive_10 ? "Connection: keep-alive\r\n"
                                                 : "";
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%s%s\r\n",
                     status, status_text(status), date, ctype, body_len,
                     allow ? "Allow: GET, HEAD\r\n" : "", connection);
    size_t send_len = rq->head_only ? 0 : body_len;
    char *out = n > 0 && (size_t)n < sizeof(head) ? malloc((size_t)n + send_len) : NULL;
    if (!out) {
        conn_close(c);
        return;
    }
    memcpy(out, head, (size_t)n);
    memcpy(out + n, body, send_len);
    c->out = out;
    c->out_len = (size_t)n + send_len;
    c->out_off = 0;
    c->close_after = rq->close;
    c->state = CONN_WRITE;
    c->deadline = now + IO_TIMEOUT_MS;
}

/* ---- Requests ---- */

/* Length of the request head at the start of buf, through the empty line that ends it (CRLF, or
 * a bare LF, which RFC 9112 lets a server accept); 0 while it is incomplete. */
static size_t head_length(const char *buf, size_t len)
{
    for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++) {
        size_t rest = len - (size_t)(p - buf) - 1;
        if (rest >= 1 && p[1] == '\n')
            return (size_t)(p - buf) + 2;
        if (rest >= 2 && p[1] == '\r' && p[2] == '\n')
            return (size_t)(p - buf) + 3;
    }
    return 0;
}

/* Cuts the next line off *p (which stays below end), NUL-terminating it in place without its CRLF
 * or LF. NULL when there is none, or when it holds a NUL or a bare CR, which no valid head does. */
static char *next_line(char **p, char *end)
{
    char *s = *p;
    char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return NULL;
    *p = nl + 1;
    char *e = nl > s && nl[-1] == '\r' ? nl - 1 : nl;
    if (memchr(s, '\0', (size_t)(e - s)) || memchr(s, '\r', (size_t)(e - s)))
        return NULL;
    *e = '\0';
    return s;
}

/* RFC 9110's token characters, the alphabet of methods and header names. */
static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return true;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* Parses the complete head buf[0..len) in place: the request line's method and target, and from
 * the headers whether the connection stays open. Returns 0, or the status to reject it with. */
static int parse_head(char *buf, size_t len, request *rq, char **method, char **target)
{
    char *p = buf, *end = buf + len;
    char *line = next_line(&p, end);
    if (!line)
        return 400;
    /* method SP request-target SP HTTP-version; runs of spaces are tolerated (RFC 9112 §3). */
    char *words[3];
    int nwords = 0;
    for (char *s = line;;) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        if (nwords == 3)
            return 400;
        words[nwords++] = s;
        s += strcspn(s, " ");
        if (*s)
            *s++ = '\0';
    }
    if (nwords != 3 || !is_token(words[0]))
        return 400;
    for (const char *t = words[1]; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
            return 400; /* not even percent-encoded: a broken client */
    const char *v = words[2];
    if (strncmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
        v[7] > '9' || v[8])
        return 400;
    if (v[5] != '1')
        return 505;
    bool http10 = v[7] == '0';

    bool asked_close = false, asked_keep = false, body = false;
    for (;;) {
        if (!(line = next_line(&p, end)))
            return 400;
        if (!*line)
            break; /* the empty line that ends the head */
        if (*line == ' ' || *line == '\t')
            return 400; /* obsolete line folding, which RFC 9112 lets a server refuse */
        char *colon = strchr(line, ':');
        if (!colon)
            return 400;
        *colon = '\0';
        if (!is_token(line))
            return 400; /* includes whitespace before the colon, a request smuggling vector */
        char *value = trim(colon + 1);
        if (strcasecmp(line, "Connection") == 0) {
            char *save = NULL;
            for (char *tok = strtok_r(value, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                tok = trim(tok);
                if (strcasecmp(tok, "close") == 0)
                    asked_close = true;
                else if (strcasecmp(tok, "keep-alive") == 0)
                    asked_keep = true;
            }
        } else if (strcasecmp(line, "Content-Length") == 0) {
            if (!*value || value[strspn(value, "0123456789")])
                return 400;
            if (value[strspn(value, "0")])
                body = true;
        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
            body = true;
        }
    }
    /* HTTP/1.1 keeps the connection unless told to close it, HTTP/1.0 closes it unless asked to
     * keep it. A request body is never read: the connection is closed after the response rather
     * than skipping the body to find the next request. */
    bool keep = http10 ? asked_keep && !asked_close : !asked_close;
    rq->close = !keep || body;
    rq->keep_alive_10 = http10 && !rq->close;
    *method = words[0];
    *target = words[1];
    return 0;
}

/* The path of a request target, query removed: origin-form "/path?query", or the absolute-form
 * "http://host/path?query" that HTTP/1.1 servers must accept as well. NULL for any other form. */
static const char *target_path(const char *target, size_t *len)
{
    if (strncasecmp(target, "http://", 7) == 0 || strncasecmp(target, "https://", 8) == 0) {
        const char *authority = strstr(target, "//") + 2;
        size_t n = strcspn(authority, "/?#");
        target = authority[n] == '/' ? authority + n : "/";
    }
    if (*target != '/')
        return NULL;
    *len = strcspn(target, "?#");
    return target;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Whether the path (len bytes) names want once its %XX escapes are decoded, as libmicrohttpd
 * decoded it before routing; a '%' without two hex digits stands for itself. */
static bool path_is(const char *path, size_t len, const char *want)
{
    for (size_t i = 0; i < len; want++) {
        unsigned char ch = (unsigned char)path[i++];
        if (ch == '%' && len - i >= 2 && hex_value(path[i]) >= 0 && hex_value(path[i + 1]) >= 0) {
            ch = (unsigned char)(hex_value(path[i]) * 16 + hex_value(path[i + 1]));
            i += 2;
        }
        if (!*want || (unsigned char)*want != ch)
            return false;
    }
    return !*want;
}

/* Runs a health check: 200 "ok", or fail_status with its reason (fail_default when it gave
 * none). */
static int run_check(kc_httpd_check fn, void *ud, int fail_status, const char *fail_default,
                     char reason[REASON_MAX], const char **body)
{
    reason[0] = '\0';
    if (!fn || fn(ud, reason, REASON_MAX)) {
        *body = "ok";
        return 200;
    }
    reason[REASON_MAX - 1] = '\0';
    *body = reason[0] ? reason : fail_default;
    return fail_status;
}

static const char *error_body(int status)
{
    switch (status) {
    case 414:
        return "request line too long\n";
    case 431:
        return "request header fields too large\n";
    case 505:
        return "HTTP version not supported\n";
    }
    return "bad request\n";
}

/* Answers the request whose head is c->in[0..head_len), or rejects it with status when it is
 * not 0. */
static void handle_request(kc_httpd *h, conn *c, size_t head_len, int status, long long now)
{
    request rq = {.close = true};
    char *method = NULL, *target = NULL;
    const char *ctype = TEXT_CONTENT_TYPE, *body = NULL, *path;
    char *rendered = NULL;
    char reason[REASON_MAX];
    bool allow = false;
    size_t path_len = 0;
    if (status == 0 && (status = parse_head(c->in, head_len, &rq, &method, &target)) == 0)
        rq.head_only = strcmp(method, "HEAD") == 0;
    if (status != 0) {
        rq.close = true;
        body = error_body(status);
        kc_debug("http request rejected", "status=%d", status);
    } else if (!rq.head_only && strcmp(method, "GET") != 0) {
        /* Answered without reading a body; the connection closes after it when one follows. */
        status = 405;
        body = "method not allowed\n";
        allow = true;
    } else if (!(path = target_path(target, &path_len))) {
        status = 400;
        body = error_body(status);
    } else if (h->registry && path_is(path, path_len, "/metrics")) {
        if ((rendered = kc_metrics_render(h->registry)) != NULL) {
            status = 200;
            ctype = METRICS_CONTENT_TYPE;
            body = rendered;
        } else {
            status = 500;
            body = "out of memory rendering metrics\n";
        }
    } else if (path_is(path, path_len, "/healthz")) {
        status = run_check(h->live, h->live_ud, 500, "unhealthy", reason, &body);
    } else if (path_is(path, path_len, "/readyz")) {
        status = run_check(h->ready, h->ready_ud, 503, "not ready", reason, &body);
    } else {
        status = 404;
        body = "404 page not found\n";
    }
    /* What follows the head is the next request, kept unless the connection is closing. */
    if (rq.close || head_len >= c->in_len) {
        c->in_len = 0;
    } else {
        memmove(c->in, c->in + head_len, c->in_len - head_len);
        c->in_len -= head_len;
    }
    respond(c, &rq, status, ctype, body, allow, now);
    free(rendered);
}

/* Answers the complete request heads buffered on c one at a time: the next is looked at only once
 * the previous response is out, so responses go in request order. */
static void process_input(kc_httpd *h, conn *c, long long now)
{
    while (c->state == CONN_READ && c->in_len > 0) {
        /* Empty lines before a request line are ignored (RFC 9112 §2.2): some clients send a
         * CRLF after a request body. */
        size_t skip = 0;
        while (skip < c->in_len && (c->in[skip] == '\r' || c->in[skip] == '\n'))
            skip++;
        if (skip) {
            memmove(c->in, c->in + skip, c->in_len - skip);
            c->in_len -= skip;
            continue;
        }
        size_t len = head_length(c->in, c->in_len);
        if (len) {
            handle_request(h, c, len, 0, now);
        } else if (c->in_len == HEAD_MAX) {
            /* Full and no end in sight: the request line alone, or the headers, are too long. */
            handle_request(h, c, c->in_len, memchr(c->in, '\n', c->in_len) ? 431 : 414, now);
        } else {
            break; /* the rest is still on its way */
        }
        conn_send(h, c, now);
    }
}

/* Reads what arrived on c: request bytes, or while lingering, bytes to discard. */
static void conn_recv(kc_httpd *h, conn *c, long long now)
{
    ssize_t n;
    if (c->state == CONN_LINGER) {
        char sink[4096];
        n = recv(c->fd, sink, sizeof(sink), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n > 0 && (c->lingered += (size_t)n) <= LINGER_MAX)
            return;
        conn_close(c);
        return;
    }
    n = recv(c->fd, c->in + c->in_len, HEAD_MAX - c->in_len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        conn_close(c); /* the client closed, or the connection failed */
        return;
    }
    if (c->idle) {
        /* A request starts: it has IO_TIMEOUT_MS to arrive whole. */
        c->idle = false;
        c->deadline = now + IO_TIMEOUT_MS;
    }
    c->in_len += (size_t)n;
    process_input(h, c, now);
}

/* Accepts pending connections while a slot is free or can be freed. */
static void accept_conns(kc_httpd *h, long long now)
{
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = free_slot(h);
        if (!c && !evictable(h))
            return;
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue; /* that client is gone; there may be others */
            /* Out of descriptors or memory: the connection stays queued and the listener
             * readable, so pause accepting rather than spin. */
            h->accept_paused_until = now + ACCEPT_PAUSE_MS;
            if (!h->accept_warned_at || now - h->accept_warned_at >= 60000) {
                h->accept_warned_at = now;
                kc_warn("http server cannot accept connections", "port=%d error=\"%s\"", h->port,
                        strerror(errno));
            }
            return;
        }
        if (!c) {
            c = evictable(h);
            conn_close(c);
        }
        conn_open(c, fd, now);
    }
}

/* kc_httpd_stop was called: no more accepting or reading; responses being sent get STOP_DRAIN_MS
 * to finish. */
static void begin_stop(kc_httpd *h)
{
    h->stopping = true;
    close(h->listen_fd);
    h->listen_fd = -1;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = &h->conns[i];
        if (c->state != CONN_FREE && c->state != CONN_WRITE)
            conn_close(c);
    }
}

static long long earliest(long long a, long long b)
{
    return a < 0 || b < a ? b : a;
}

/* The server's thread: one poll over the connections, the listener and the wake pipe. */
static void *serve(void *arg)
{
    kc_httpd *h = arg;
    struct pollfd pfd[MAX_CONNS + 2];
    conn *of[MAX_CONNS + 2]; /* the connection behind each pollfd; NULL for listener and pipe */
    long long stop_deadline = -1;
    for (;;) {
        long long now = mono_ms(), next = stop_deadline;
        if (h->stopping) {
            bool sending = false;
            for (int i = 0; i < MAX_CONNS; i++)
                sending |= h->conns[i].state == CONN_WRITE;
            if (!sending || now >= stop_deadline)
                break;
        }
        /* The connections come first, so that an eviction by accept_conns below happens after
         * their events were handled. */
        nfds_t n = 0;
        for (int i = 0; i < MAX_CONNS; i++) {
            conn *c = &h->conns[i];
            if (c->state == CONN_FREE)
                continue;
            if (now >= c->deadline) {
                kc_debug("http connection timed out", "state=%d", (int)c->state);
                conn_close(c);
                continue;
            }
            next = earliest(next, c->deadline);
            pfd[n] =
                (struct pollfd){.fd = c->fd, .events = c->state == CONN_WRITE ? POLLOUT : POLLIN};
            of[n++] = c;
        }
        if (!h->stopping) {
            if (free_slot(h) || evictable(h)) {
                if (now >= h->accept_paused_until) {
                    pfd[n] = (struct pollfd){.fd = h->listen_fd, .events = POLLIN};
                    of[n++] = NULL;
                } else {
                    next = earliest(next, h->accept_paused_until);
                }
            }
            pfd[n] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
            of[n++] = NULL;
        }
        long long wait = next < 0 ? -1 : next - now;
        int r = poll(pfd, n, wait > INT32_MAX ? INT32_MAX : (int)wait);
        if (r < 0) {
            if (errno != EINTR) {
                kc_warn("http server poll failed", "error=\"%s\"", strerror(errno));
                nanosleep(&(struct timespec){.tv_nsec = 100 * 1000000}, NULL);
            }
            continue;
        }
        now = mono_ms();
        for (nfds_t i = 0; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            conn *c = of[i];
            if (c && c->state == CONN_WRITE) {
                conn_send(h, c, now);
                process_input(h, c, now); /* pipelined requests, once the response is out */
            } else if (c && c->state != CONN_FREE) {
                conn_recv(h, c, now);
            } else if (!c && pfd[i].fd == h->wake[0]) {
                begin_stop(h);
                stop_deadline = now + STOP_DRAIN_MS;
            } else if (!c) {
                accept_conns(h, now);
            }
        }
    }
    for (int i = 0; i < MAX_CONNS; i++)
        if (h->conns[i].state != CONN_FREE)
            conn_close(&h->conns[i]);
    return NULL;
}

/* ---- Starting and stopping ---- */

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

    if ((rc = bind_addr(opts->addr, host, port, &h->listen_fd, err)) != KC_OK)
        goto free_h;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(h->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: getsockname: %s", opts->addr, strerror(errno));
        goto close_fd;
    }
    h->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (pipe2(h->wake, O_CLOEXEC) != 0) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: pipe: %s", opts->addr, strerror(errno));
        goto close_fd;
    }
    /* The thread takes no asynchronous signals: they are for the program's own handling. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int perr = pthread_create(&h->thread, NULL, serve, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (perr != 0) {
        rc = kc_err_set(err, KC_EIO, "listen on %s: cannot start the server thread: %s", opts->addr,
                        strerror(perr));
        goto close_pipe;
    }
    kc_info("http server listening", "addr=%s port=%d", opts->addr, h->port);
    *out = h;
    return KC_OK;
close_pipe:
    close(h->wake[0]);
    close(h->wake[1]);
close_fd:
    close(h->listen_fd);
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
    /* The thread never reads the pipe: one byte keeps it readable until the thread is gone. */
    ssize_t w;
    do {
        w = write(h->wake[1], "x", 1);
    } while (w < 0 && errno == EINTR);
    pthread_join(h->thread, NULL);
    if (h->listen_fd >= 0)
        close(h->listen_fd);
    close(h->wake[0]);
    close(h->wake[1]);
    free(h);
}

int kc__httpd_parse_request(char *buf, size_t len, size_t *head_len, const char **method,
                            const char **path, size_t *path_len, bool *close)
{
    *head_len = head_length(buf, len);
    if (!*head_len)
        return -1;
    request rq = {.close = true};
    char *m = NULL, *target = NULL;
    int status = parse_head(buf, *head_len, &rq, &m, &target);
    if (status != 0)
        return status;
    *method = m;
    *close = rq.close;
    *path = target_path(target, path_len);
    return *path ? 0 : 400;
}
