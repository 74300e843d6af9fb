/* kc_client_conn: connections to the API server (TCP, TLS through mbedTLS) and the transfer state
 * machine both the blocking client and the loop-driven streams run. Every socket is
 * non-blocking; a transfer advances as far as its socket allows and says what it waits for. */
#include <errno.h>
#include <fcntl.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kc_client_int.h"

enum {
    PH_START,      /* take the pooled connection or resolve the host */
    PH_NEXT_ADDR,  /* start connecting to the next address */
    PH_CONNECTING, /* a non-blocking connect is in progress */
    PH_HANDSHAKE,  /* TLS handshake */
    PH_SEND,       /* writing the request */
    PH_RECV,       /* reading the response */
    PH_DONE,
};

/* How much one step reads before yielding to the loop (other streams, timers). */
#define STEP_READ_MAX (1024 * 1024)

double kc__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- TLS configuration (one per client, shared read-only by its connections) ---- */

static int tls_random(void *ud, unsigned char *out, size_t len)
{
    (void)ud;
    while (len) {
        ssize_t n = getrandom(out, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
        }
        out += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The certificate of a server addressed by IP must name that IP in a subjectAltName (the name
 * check mbedTLS does covers DNS names only). Runs once per certificate of the chain. */
static int tls_verify_ip(void *ud, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    const kc_client *c = ud;
    if (depth != 0 || !c->verify_ip_len)
        return 0;
    for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s && s->buf.p; s = s->next) {
        /* iPAddress is [7] IMPLICIT OCTET STRING: 4 or 16 bytes. */
        if ((s->buf.tag & MBEDTLS_ASN1_TAG_CLASS_MASK) == MBEDTLS_ASN1_CONTEXT_SPECIFIC &&
            (s->buf.tag & MBEDTLS_ASN1_TAG_VALUE_MASK) == 7 && s->buf.len == c->verify_ip_len &&
            memcmp(s->buf.p, c->verify_ip, c->verify_ip_len) == 0)
            return 0;
    }
    *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}

/* Loads the trust store when the configuration names no CA: SSL_CERT_FILE, SSL_CERT_DIR or the
 * distribution's bundle. Certificates that fail to parse are skipped (as OpenSSL does). */
static void load_system_cas(mbedtls_x509_crt *ca)
{
    const char *file = getenv("SSL_CERT_FILE");
    const char *dir = getenv("SSL_CERT_DIR");
    if (file && *file && mbedtls_x509_crt_parse_file(ca, file) >= 0)
        return;
    if (dir && *dir && mbedtls_x509_crt_parse_path(ca, dir) >= 0)
        return;
    static const char *const bundles[] = {"/etc/ssl/certs/ca-certificates.crt",
                                          "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};
    for (size_t i = 0; i < sizeof(bundles) / sizeof(bundles[0]); i++) {
        if (mbedtls_x509_crt_parse_file(ca, bundles[i]) >= 0)
            return;
    }
}

/* Builds the client's TLS configuration; called with c->mu held. */
static kc_code tls_setup(kc_client *c)
{
    char why[200];
    int rc;
    mbedtls_ssl_config_init(&c->tls_conf);
    mbedtls_x509_crt_init(&c->tls_ca);
    mbedtls_x509_crt_init(&c->tls_cert);
    mbedtls_pk_init(&c->tls_key);
    c->tls_ready = true;
    if ((rc = mbedtls_ssl_config_defaults(&c->tls_conf, MBEDTLS_SSL_IS_CLIENT,
                                          MBEDTLS_SSL_TRANSPORT_STREAM,
                                          MBEDTLS_SSL_PRESET_DEFAULT)) != 0) {
        mbedtls_strerror(rc, why, sizeof(why));
        snprintf(c->tls_msg, sizeof(c->tls_msg), "TLS setup for %s failed: %s", c->server, why);
        return c->tls_code = KC_ETLS;
    }
    mbedtls_ssl_conf_rng(&c->tls_conf, tls_random, NULL);
    /* mbedTLS 2 offers its curves largest first (secp521r1), and a server that follows the
     * client's order (GnuTLS does) then makes each handshake an order of magnitude dearer than
     * with X25519 or P-256, which Go's and OpenSSL's servers pick. Offer those first. */
    static const mbedtls_ecp_group_id curves[] = {
        MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1,
        MBEDTLS_ECP_DP_SECP521R1, MBEDTLS_ECP_DP_NONE};
    mbedtls_ssl_conf_curves(&c->tls_conf, curves);
    mbedtls_ssl_conf_min_version(&c->tls_conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    if (c->insecure) {
        mbedtls_ssl_conf_authmode(&c->tls_conf, MBEDTLS_SSL_VERIFY_NONE);
    } else {
        mbedtls_ssl_conf_authmode(&c->tls_conf, MBEDTLS_SSL_VERIFY_REQUIRED);
        if (c->ca_pem) {
            /* mbedTLS wants PEM with its terminating NUL counted; ca_pem has one. */
            rc = mbedtls_x509_crt_parse(&c->tls_ca, (const unsigned char *)c->ca_pem,
                                        c->ca_pem_len + 1);
            if (rc < 0 || !c->tls_ca.raw.p) {
                mbedtls_strerror(rc, why, sizeof(why));
                snprintf(c->tls_msg, sizeof(c->tls_msg),
                         "the certificate-authority (from %s) holds no usable certificate: %s",
                         c->source, rc < 0 ? why : "no PEM certificate found");
                return c->tls_code = KC_ETLS;
            }
        } else {
            load_system_cas(&c->tls_ca);
        }
        mbedtls_ssl_conf_ca_chain(&c->tls_conf, &c->tls_ca, NULL);
        mbedtls_ssl_conf_verify(&c->tls_conf, tls_verify_ip, c);
    }
    if (c->cert_pem && c->key_pem) {
        const char *which = "certificate";
        rc = mbedtls_x509_crt_parse(&c->tls_cert, (const unsigned char *)c->cert_pem,
                                    c->cert_pem_len + 1);
        if (rc == 0) {
            which = "key";
            rc = mbedtls_pk_parse_key(&c->tls_key, (const unsigned char *)c->key_pem,
                                      c->key_pem_len + 1, NULL, 0);
        }
        if (rc == 0) {
            which = "certificate and key pair";
            rc = mbedtls_ssl_conf_own_cert(&c->tls_conf, &c->tls_cert, &c->tls_key);
        }
        if (rc != 0) {
            mbedtls_strerror(rc, why, sizeof(why));
            snprintf(c->tls_msg, sizeof(c->tls_msg),
                     "TLS handshake with %s cannot start: the client certificate %s (from %s) "
                     "cannot be loaded: %s",
                     c->server, which, c->source, why);
            return c->tls_code = KC_ETLS;
        }
    }
    return c->tls_code = KC_OK;
}

static kc_code tls_config(kc_client *c, kc_xfer *x)
{
    pthread_mutex_lock(&c->mu);
    kc_code code = c->tls_ready ? c->tls_code : tls_setup(c);
    if (code != KC_OK)
        snprintf(x->detail, sizeof(x->detail), "%s", c->tls_msg);
    pthread_mutex_unlock(&c->mu);
    return code;
}

/* ---- the socket layer under mbedTLS ---- */

static int bio_send(void *ud, const unsigned char *buf, size_t len)
{
    kc_conn *k = ud;
    for (;;) {
        ssize_t n = send(k->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MBEDTLS_ERR_SSL_WANT_WRITE;
        k->sys_errno = errno;
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
}

static int bio_recv(void *ud, unsigned char *buf, size_t len)
{
    kc_conn *k = ud;
    for (;;) {
        ssize_t n = recv(k->fd, buf, len, 0);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MBEDTLS_ERR_SSL_WANT_READ;
        k->sys_errno = errno;
        return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
    }
}

void kc__conn_close(kc_conn *k)
{
    if (!k)
        return;
    if (k->tls)
        mbedtls_ssl_free(&k->ssl);
    if (k->fd >= 0)
        close(k->fd);
    free(k);
}

/* ---- the connection pool of blocking requests ---- */

/* Is an idle connection still usable? Readable means the server closed it (or sent something
 * unasked, which makes it just as unusable). */
static bool conn_alive(kc_conn *k, double now)
{
    if (now - k->idle_since > KC_CONN_MAX_IDLE_S)
        return false;
    struct pollfd pfd = {.fd = k->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

kc_conn *kc__pool_take(kc_client *c)
{
    double now = kc__now_s();
    for (;;) {
        kc_conn *k = NULL;
        pthread_mutex_lock(&c->mu);
        if (c->npool)
            k = c->pool[--c->npool]; /* the most recently used is the most likely alive */
        pthread_mutex_unlock(&c->mu);
        if (!k || conn_alive(k, now))
            return k;
        kc__conn_close(k);
    }
}

static void pool_put(kc_client *c, kc_conn *k)
{
    k->idle_since = kc__now_s();
    pthread_mutex_lock(&c->mu);
    if (c->npool < KC_CLIENT_POOL_MAX) {
        c->pool[c->npool++] = k;
        k = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    kc__conn_close(k);
}

/* ---- transfers ---- */

static int fail(kc_xfer *x, kc_xerr e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(kc_xfer *x, kc_xerr e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->detail, sizeof(x->detail), fmt, ap);
    va_end(ap);
    x->xerr = e;
    return -1;
}

bool kc__xfer_connected(const kc_xfer *x)
{
    return x->phase >= PH_SEND;
}

int kc__xfer_fd(const kc_xfer *x)
{
    return x->conn ? x->conn->fd : -1;
}

static void set_sockopts(int fd)
{
    int one = 1, idle = 30, intvl = 10;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Dead peers of long-quiet watches are found by keepalive probes. */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
}

static int step_resolve(kc_xfer *x)
{
    kc_client *c = x->c;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG};
    if (x->ai)
        freeaddrinfo(x->ai);
    x->ai = NULL;
    int rc = getaddrinfo(c->url.host, c->port_str, &hints, &x->ai);
    if (rc == EAI_ADDRFAMILY || rc == EAI_NONAME) {
        /* AI_ADDRCONFIG hides 127.0.0.1 on hosts with no configured address: retry without. */
        hints.ai_flags = AI_NUMERICSERV;
        rc = getaddrinfo(c->url.host, c->port_str, &hints, &x->ai);
    }
    if (rc == EAI_MEMORY)
        return fail(x, KC_X_NOMEM, "out of memory resolving %s", c->url.host);
    if (rc != 0)
        return fail(x, KC_X_RESOLVE, "cannot resolve host %s: %s", c->url.host,
                    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    x->ai_next = x->ai;
    x->connect_errno = ECONNREFUSED;
    x->phase = PH_NEXT_ADDR;
    return 0;
}

/* Starts a connection to the next address; falls through the list on immediate failures. */
static int step_next_addr(kc_xfer *x)
{
    while (x->ai_next) {
        struct addrinfo *a = x->ai_next;
        x->ai_next = a->ai_next;
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            x->connect_errno = errno;
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                break;
            continue;
        }
        set_sockopts(fd);
        kc_conn *k = calloc(1, sizeof(*k));
        if (!k) {
            close(fd);
            return fail(x, KC_X_NOMEM, "out of memory opening a connection");
        }
        k->fd = fd;
        x->conn = k;
        x->conn_gen++;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            x->phase = PH_HANDSHAKE;
            return 0;
        }
        if (errno == EINPROGRESS || errno == EINTR) {
            x->phase = PH_CONNECTING;
            return KC_WANT_WRITE;
        }
        x->connect_errno = errno;
        kc__conn_close(k);
        x->conn = NULL;
    }
    return fail(x, KC_X_CONNECT, "%s", strerror(x->connect_errno));
}

static int step_connecting(kc_xfer *x)
{
    struct pollfd pfd = {.fd = x->conn->fd, .events = POLLOUT};
    if (poll(&pfd, 1, 0) == 0)
        return KC_WANT_WRITE; /* woken early: still connecting */
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(x->conn->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
        soerr = errno;
    if (soerr == 0) {
        x->phase = PH_HANDSHAKE;
        return 0;
    }
    x->connect_errno = soerr;
    kc__conn_close(x->conn);
    x->conn = NULL;
    x->phase = PH_NEXT_ADDR;
    return 0;
}

static int step_handshake(kc_xfer *x)
{
    kc_client *c = x->c;
    kc_conn *k = x->conn;
    if (!c->url.tls) {
        x->phase = PH_SEND;
        return 0;
    }
    if (!k->tls) {
        if (tls_config(c, x) != KC_OK) {
            x->xerr = KC_X_TLS_CONFIG;
            return -1;
        }
        mbedtls_ssl_init(&k->ssl);
        k->tls = true;
        int rc = mbedtls_ssl_setup(&k->ssl, &c->tls_conf);
        /* The name verified and sent as SNI: the override, else a DNS host; an IP host is
         * checked against the certificate's IP SANs by tls_verify_ip instead. */
        const char *name = c->tls_server_name ? c->tls_server_name
                           : c->verify_ip_len ? NULL
                                              : c->url.host;
        if (rc == 0)
            rc = mbedtls_ssl_set_hostname(&k->ssl, name);
        if (rc != 0)
            return fail(x, rc == MBEDTLS_ERR_SSL_ALLOC_FAILED ? KC_X_NOMEM : KC_X_TLS,
                        "TLS setup failed (-0x%04x)", (unsigned)-rc);
        mbedtls_ssl_set_bio(&k->ssl, k, bio_send, bio_recv, NULL);
    }
    int rc = mbedtls_ssl_handshake(&k->ssl);
    if (rc == MBEDTLS_ERR_SSL_WANT_READ)
        return KC_WANT_READ;
    if (rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return KC_WANT_WRITE;
    if (rc == 0) {
        x->phase = PH_SEND;
        return 0;
    }
    char why[200];
    uint32_t flags = mbedtls_ssl_get_verify_result(&k->ssl);
    if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags != 0 && flags != (uint32_t)-1) {
        char info[512];
        int n = mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
        /* One line: the reasons come newline-separated. */
        for (int i = 0; i < n && info[i]; i++) {
            if (info[i] == '\n')
                info[i] = (info[i + 1] && i + 1 < n) ? ';' : '\0';
        }
        return fail(x, KC_X_TLS_VERIFY, "%s", n > 0 ? info : "certificate verification failed");
    }
    if (rc == MBEDTLS_ERR_SSL_ALLOC_FAILED)
        return fail(x, KC_X_NOMEM, "out of memory in the TLS handshake");
    mbedtls_strerror(rc, why, sizeof(why));
    if (k->sys_errno)
        return fail(x, KC_X_TLS, "%s (%s)", why, strerror(k->sys_errno));
    return fail(x, KC_X_TLS, "%s", why);
}

/* Says why a TLS read or write failed: the socket's errno when that was the cause. */
static ssize_t tls_fail(const kc_conn *k, int rc, char *why, size_t size)
{
    if (k->sys_errno)
        snprintf(why, size, "%s", strerror(k->sys_errno));
    else
        mbedtls_strerror(rc, why, size);
    return KC_IO_FAIL;
}

ssize_t kc__conn_send(kc_conn *k, const char *p, size_t n, char *why, size_t size)
{
    for (;;) {
        if (k->tls) {
            int rc = mbedtls_ssl_write(&k->ssl, (const unsigned char *)p, n);
            if (rc == MBEDTLS_ERR_SSL_WANT_WRITE)
                return -KC_WANT_WRITE;
            if (rc == MBEDTLS_ERR_SSL_WANT_READ)
                return -KC_WANT_READ;
            if (rc >= 0)
                return rc;
            return tls_fail(k, rc, why, size);
        }
        ssize_t w = send(k->fd, p, n, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -KC_WANT_WRITE;
        snprintf(why, size, "%s", strerror(errno));
        return KC_IO_FAIL;
    }
}

ssize_t kc__conn_recv(kc_conn *k, char *p, size_t n, bool *reset, char *why, size_t size)
{
    *reset = false;
    for (;;) {
        if (k->tls) {
            int rc = mbedtls_ssl_read(&k->ssl, (unsigned char *)p, n);
            if (rc == MBEDTLS_ERR_SSL_WANT_READ)
                return -KC_WANT_READ;
            if (rc == MBEDTLS_ERR_SSL_WANT_WRITE)
                return -KC_WANT_WRITE;
            if (rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
                return 0;
            if (rc >= 0)
                return rc;
            *reset = rc == MBEDTLS_ERR_NET_CONN_RESET;
            return tls_fail(k, rc, why, size);
        }
        ssize_t r = recv(k->fd, p, n, 0);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -KC_WANT_READ;
        *reset = errno == ECONNRESET;
        snprintf(why, size, "%s", strerror(errno));
        return KC_IO_FAIL;
    }
}

bool kc__conn_buffered(kc_conn *k)
{
    return k->tls && mbedtls_ssl_get_bytes_avail(&k->ssl) > 0;
}

static int step_send(kc_xfer *x)
{
    while (x->out_off < x->out_len) {
        char why[200];
        ssize_t w =
            kc__conn_send(x->conn, x->out + x->out_off, x->out_len - x->out_off, why, sizeof(why));
        if (w == -KC_WANT_WRITE || w == -KC_WANT_READ)
            return (int)-w;
        if (w < 0)
            return fail(x, KC_X_SEND, "sending the request failed: %s", why);
        x->out_off += (size_t)w;
    }
    if (x->connect_only) {
        x->phase = PH_DONE;
        return 0;
    }
    x->phase = PH_RECV;
    return 0;
}

/* Feeds received bytes to the parser; returns 0 to go on reading, 1 when done, -1 on failure. */
static int feed(kc_xfer *x, const char *buf, size_t n)
{
    size_t used = 0;
    kc_http_result r = kc_http_parse(&x->p, buf, n, &used, x->on_body, x->ud);
    switch (r) {
    case KC_HTTP_MORE:
        return 0;
    case KC_HTTP_DONE:
        x->leftover = used < n;
        x->phase = PH_DONE;
        return 1;
    case KC_HTTP_ABORTED:
        return fail(x, KC_X_ABORTED, "stopped by the receiver");
    default:
        return fail(x, KC_X_PROTO, "invalid response: %s", x->p.error);
    }
}

static int at_eof(kc_xfer *x)
{
    if (kc_http_parse_eof(&x->p) == KC_HTTP_DONE) {
        x->phase = PH_DONE;
        x->p.keep_alive = false;
        return 0;
    }
    return fail(x, x->p.received ? KC_X_PARTIAL : KC_X_GOT_NOTHING, "%s", x->p.error);
}

static int step_recv(kc_xfer *x)
{
    kc_conn *k = x->conn;
    char buf[16384];
    size_t total = 0;
    for (;;) {
        /* Yield to the loop now and then, but only with nothing decrypted left inside mbedTLS:
         * the socket's readiness says nothing about those bytes. */
        if (total >= STEP_READ_MAX && !kc__conn_buffered(k))
            return KC_WANT_READ;
        char why[200];
        bool reset;
        ssize_t n = kc__conn_recv(k, buf, sizeof(buf), &reset, why, sizeof(why));
        if (n == -KC_WANT_READ || n == -KC_WANT_WRITE)
            return (int)-n;
        if (n == 0)
            return at_eof(x);
        if (n < 0) {
            if (reset && !x->p.received)
                return fail(x, KC_X_GOT_NOTHING, "connection reset before any response");
            return fail(x, KC_X_RECV, "receiving the response failed: %s", why);
        }
        total += (size_t)n;
        int r = feed(x, buf, (size_t)n);
        if (r != 0)
            return r < 0 ? -1 : 0;
    }
}

int kc__xfer_step(kc_xfer *x)
{
    for (;;) {
        int r;
        switch (x->phase) {
        case PH_START:
            if (x->conn) {
                x->phase = PH_SEND;
                continue;
            }
            r = step_resolve(x);
            break;
        case PH_NEXT_ADDR:
            r = step_next_addr(x);
            break;
        case PH_CONNECTING:
            r = step_connecting(x);
            break;
        case PH_HANDSHAKE:
            r = step_handshake(x);
            break;
        case PH_SEND:
            r = step_send(x);
            break;
        case PH_RECV:
            r = step_recv(x);
            break;
        default:
            return 0;
        }
        if (r != 0)
            return r;
        if (x->phase == PH_DONE)
            return 0;
    }
}

void kc__xfer_restart(kc_xfer *x)
{
    kc__conn_close(x->conn);
    x->conn = NULL;
    x->reused = false;
    x->phase = PH_START;
    x->out_off = 0;
    x->leftover = false;
    x->xerr = KC_X_OK;
    x->detail[0] = '\0';
    bool head = x->p.head;
    kc_http_parser_free(&x->p);
    kc_http_parser_init(&x->p, head);
}

void kc__xfer_release_conn(kc_xfer *x)
{
    kc_conn *k = x->conn;
    x->conn = NULL;
    if (!k)
        return;
    if (x->phase == PH_DONE && x->p.keep_alive && !x->leftover && !kc__conn_buffered(k))
        pool_put(x->c, k);
    else
        kc__conn_close(k);
}

void kc__xfer_free(kc_xfer *x)
{
    if (!x)
        return;
    kc__conn_close(x->conn);
    x->conn = NULL;
    if (x->ai)
        freeaddrinfo(x->ai);
    x->ai = NULL;
    if (x->out) {
        explicit_bzero(x->out, x->out_len); /* it holds the bearer token */
        free(x->out);
    }
    x->out = NULL;
    kc_http_parser_free(&x->p);
}
