/* kc_client: blocking HTTP requests to the API server with TLS, bearer tokens, a client-side
 * rate limiter, retries with jittered backoff and decoding of Kubernetes Status errors. */
#include "kc_client.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <poll.h>

#include "kc_client_int.h"
#include "kc_log.h"

#ifndef KC_VERSION
#define KC_VERSION "0.1.0"
#endif

/* A token file larger than this is not a token. */
#define KC_TOKEN_MAX (64 * 1024)
/* Longest Retry-After we honour; a server asking for more gets this. */
#define KC_RETRY_AFTER_MAX_S 300

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static char *dup_bytes(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

char *kc__dup_opt(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

static char *dup_pem(const char *s, size_t len, size_t *out_len, bool *ok)
{
    if (!s)
        return NULL;
    if (!len)
        len = strlen(s);
    char *d = dup_bytes(s, len);
    if (!d)
        *ok = false;
    *out_len = len;
    return d;
}

/* Parses the server URL and derives what every request needs: the Host header, the port, and
 * the address the certificate must name when the server is addressed by IP. With a TLS server
 * name the connection still goes to the URL's host (and Host keeps it), but the certificate is
 * verified against, and SNI carries, the override. */
static kc_code setup_server(kc_client *c, kc_err *err)
{
    kc_err e;
    kc_err_clear(&e);
    if (kc_url_parse(c->server, &c->url, &e) != KC_OK)
        return kc_err_set(err, KC_ECONFIG, "server URL (from %s): %s", c->source, e.msg);
    if (!kc_url_authority(&c->url, c->authority, sizeof(c->authority)))
        return kc_err_set(err, KC_ECONFIG, "server URL \"%.200s\" (from %s): host too long",
                          c->server, c->source);
    snprintf(c->port_str, sizeof(c->port_str), "%d", c->url.port);
    const char *vname = c->tls_server_name ? c->tls_server_name : c->url.host;
    if (inet_pton(AF_INET, vname, c->verify_ip) == 1)
        c->verify_ip_len = 4;
    else if (inet_pton(AF_INET6, vname, c->verify_ip) == 1)
        c->verify_ip_len = 16;
    return KC_OK;
}

kc_code kc_client_new(const kc_config *cfg, const kc_client_opts *opts, kc_client **out,
                      kc_err *err)
{
    kc_err_clear(err);
    if (!cfg || !out)
        return kc_err_set(err, KC_EARG, "kc_client_new: cfg and out are required");
    *out = NULL;
    if (!cfg->server)
        return kc_err_set(err, KC_ECONFIG, "no server URL (from %s)",
                          cfg->source ? cfg->source : "config");
    kc_client *c = calloc(1, sizeof(*c));
    if (!c)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating the client");
    bool ok = true;
    c->server = kc__dup_opt(cfg->server, &ok);
    c->ca_pem = dup_pem(cfg->ca_pem, cfg->ca_pem_len, &c->ca_pem_len, &ok);
    c->insecure = cfg->insecure_skip_tls_verify;
    c->tls_server_name = kc__dup_opt(cfg->tls_server_name, &ok);
    c->token = kc__dup_opt(cfg->token, &ok);
    c->token_file = kc__dup_opt(cfg->token_file, &ok);
    c->cert_pem = dup_pem(cfg->client_cert_pem, cfg->client_cert_pem_len, &c->cert_pem_len, &ok);
    c->key_pem = dup_pem(cfg->client_key_pem, cfg->client_key_pem_len, &c->key_pem_len, &ok);
    c->source = kc__dup_opt(cfg->source ? cfg->source : "the configuration", &ok);
    kc_client_opts o = opts ? *opts : (kc_client_opts){0};
    if (o.qps == 0)
        o.qps = 50;
    if (o.burst <= 0)
        o.burst = 100;
    if (o.timeout_ms <= 0)
        o.timeout_ms = 30000;
    if (o.connect_timeout_ms <= 0)
        o.connect_timeout_ms = 10000;
    if (o.max_retries == 0)
        o.max_retries = 5;
    else if (o.max_retries < 0)
        o.max_retries = 0;
    if (o.backoff_base_ms <= 0)
        o.backoff_base_ms = 200;
    if (o.backoff_max_ms <= 0)
        o.backoff_max_ms = 10000;
    if (o.backoff_max_ms < o.backoff_base_ms)
        o.backoff_max_ms = o.backoff_base_ms;
    c->user_agent = kc__dup_opt(o.user_agent ? o.user_agent : "gpu-operator/" KC_VERSION, &ok);
    o.user_agent = c->user_agent;
    c->opts = o;
    c->lim_tokens = o.burst;
    c->lim_last_s = kc__now_s();
    c->rng = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)c << 16) ^ 0x9e3779b97f4a7c15ULL;
    pthread_mutex_init(&c->mu, NULL);
    if (!ok) {
        kc_client_free(c);
        return kc_err_set(err, KC_ENOMEM, "out of memory copying the configuration");
    }
    kc_code code = setup_server(c, err);
    if (code != KC_OK) {
        kc_client_free(c);
        return code;
    }
    *out = c;
    return KC_OK;
}

void kc_client_free(kc_client *c)
{
    if (!c)
        return;
    kc__stream_detach(c);
    for (int i = 0; i < c->npool; i++)
        kc__conn_close(c->pool[i]);
    if (c->tls_ready) {
        mbedtls_ssl_config_free(&c->tls_conf);
        mbedtls_x509_crt_free(&c->tls_ca);
        mbedtls_x509_crt_free(&c->tls_cert);
        mbedtls_pk_free(&c->tls_key);
    }
    pthread_mutex_destroy(&c->mu);
    free(c->server);
    free(c->ca_pem);
    free(c->tls_server_name);
    free(c->token);
    free(c->token_file);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->source);
    free(c->user_agent);
    free(c->tok_cache);
    free(c);
}

void kc_client_get_stats(kc_client *c, kc_client_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

void kc__count_request(kc_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->stats.requests++;
    pthread_mutex_unlock(&c->mu);
}

/* ---- rate limiter and backoff ---- */

long kc__limiter_reserve(kc_client *c)
{
    if (c->opts.qps < 0)
        return 0;
    /* A reservation bucket: the token is taken now, even if that drives the bucket negative,
     * and the caller sleeps until it would have been refilled. Concurrent callers thus queue
     * up fairly without holding the lock while they wait. */
    pthread_mutex_lock(&c->mu);
    double now = kc__now_s();
    c->lim_tokens += (now - c->lim_last_s) * c->opts.qps;
    if (c->lim_tokens > c->opts.burst)
        c->lim_tokens = c->opts.burst;
    c->lim_last_s = now;
    c->lim_tokens -= 1;
    long wait = 0;
    if (c->lim_tokens < 0)
        wait = (long)ceil(-c->lim_tokens / c->opts.qps * 1000.0);
    c->stats.throttled_ms += (unsigned long)wait;
    pthread_mutex_unlock(&c->mu);
    return wait;
}

/* Exponential backoff doubling from base up to max, with equal jitter: a uniformly random delay
 * in [d/2, d] so that clients retrying together spread out. */
static long backoff_ms(kc_client *c, int attempt)
{
    long d = c->opts.backoff_base_ms;
    for (int i = 0; i < attempt && d < c->opts.backoff_max_ms; i++)
        d *= 2;
    if (d > c->opts.backoff_max_ms)
        d = c->opts.backoff_max_ms;
    pthread_mutex_lock(&c->mu);
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    uint64_t r = c->rng;
    pthread_mutex_unlock(&c->mu);
    return d / 2 + (long)(r % (uint64_t)(d / 2 + 1));
}

/* ---- bearer token ---- */

/* Returns the token to send (malloc'd, or NULL for none). A token file is re-read whenever its
 * identity or size or mtime changes, so rotated service-account tokens are picked up. The token
 * itself never appears in a message or a log line. */
static kc_code token_get(kc_client *c, char **out, kc_err *err)
{
    *out = NULL;
    kc_code code = KC_OK;
    pthread_mutex_lock(&c->mu);
    if (!c->token_file) {
        if (c->token && c->token[0] && !(*out = strdup(c->token)))
            code = kc_err_set(err, KC_ENOMEM, "out of memory copying the bearer token");
        goto unlock;
    }
    struct stat st;
    bool changed = stat(c->token_file, &st) != 0 || !c->tok_have || st.st_ino != c->tok_st.st_ino ||
                   st.st_dev != c->tok_st.st_dev || st.st_size != c->tok_st.st_size ||
                   st.st_mtim.tv_sec != c->tok_st.st_mtim.tv_sec ||
                   st.st_mtim.tv_nsec != c->tok_st.st_mtim.tv_nsec;
    if (changed) {
        char *buf = NULL;
        int fd = open(c->token_file, O_RDONLY | O_CLOEXEC);
        const char *why = NULL;
        ssize_t n = -1;
        if (fd < 0 || fstat(fd, &st) != 0)
            why = strerror(errno);
        else if (st.st_size > KC_TOKEN_MAX)
            why = "file too large for a token";
        else if (!(buf = malloc((size_t)st.st_size + 1)))
            why = "out of memory";
        else if ((n = read(fd, buf, (size_t)st.st_size)) < 0)
            why = strerror(errno);
        if (fd >= 0)
            close(fd);
        if (why) {
            free(buf);
            if (!c->tok_have) {
                code = kc_err_set(err, KC_ECONFIG, "cannot read bearer token file %s (from %s): %s",
                                  c->token_file, c->source, why);
                goto unlock;
            }
            kc_warn("cannot re-read bearer token file, keeping the previous token",
                    "file=%s error=\"%s\"", c->token_file, why);
        } else {
            while (n > 0 && isspace((unsigned char)buf[n - 1]))
                n--;
            buf[n] = '\0';
            free(c->tok_cache);
            c->tok_cache = buf;
            c->tok_st = st;
            c->tok_have = true;
        }
    }
    if (c->tok_cache && c->tok_cache[0] && !(*out = strdup(c->tok_cache)))
        code = kc_err_set(err, KC_ENOMEM, "out of memory copying the bearer token");
unlock:
    pthread_mutex_unlock(&c->mu);
    return code;
}

/* ---- request setup ---- */

/* Header values and the request target must not be able to end a line or the request. */
static bool clean_field(const char *s)
{
    for (; s && *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    }
    return true;
}

static bool clean_target(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    }
    return true;
}

kc_code kc__xfer_init(kc_xfer *x, kc_client *c, const kc_request *req, kc_http_body_cb on_body,
                      void *ud, kc_err *err)
{
    memset(x, 0, sizeof(*x));
    x->c = c;
    x->on_body = on_body;
    x->ud = ud;
    kc_http_parser_init(&x->p, strcmp(req->method, "HEAD") == 0);
    const char *accept = req->accept ? req->accept : "application/json";
    const char *ctype = req->content_type ? req->content_type : "application/json";
    if (!clean_target(req->path) || !clean_target(req->method) || !clean_field(accept) ||
        !clean_field(ctype))
        return kc_err_set(err, KC_EARG,
                          "%s %s: the method, path and headers must not hold spaces or control "
                          "characters",
                          req->method, req->path);
    char *token = NULL;
    kc_code code = token_get(c, &token, err);
    if (code != KC_OK)
        return code;
    if (token && !clean_field(token)) {
        explicit_bzero(token, strlen(token));
        free(token);
        return kc_err_set(err, KC_ECONFIG, "the bearer token (from %s) holds control characters",
                          c->source);
    }
    bool has_body = req->body != NULL;
    bool send_length = has_body || strcmp(req->method, "POST") == 0 ||
                       strcmp(req->method, "PUT") == 0 || strcmp(req->method, "PATCH") == 0;
    size_t body_len = has_body ? req->body_len : 0;
    size_t cap = strlen(req->method) + strlen(c->url.path) + strlen(req->path) +
                 strlen(c->authority) + strlen(c->user_agent) + strlen(accept) + strlen(ctype) +
                 (token ? strlen(token) : 0) + 160 + body_len;
    x->out = malloc(cap);
    if (!x->out) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory preparing %s %s", req->method, req->path);
        goto done;
    }
    int n =
        snprintf(x->out, cap, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nAccept: %s\r\n",
                 req->method, c->url.path, req->path, c->authority, c->user_agent, accept);
    if (send_length)
        n += snprintf(x->out + n, cap - (size_t)n, "Content-Type: %s\r\nContent-Length: %zu\r\n",
                      ctype, body_len);
    if (token)
        n += snprintf(x->out + n, cap - (size_t)n, "Authorization: Bearer %s\r\n", token);
    n += snprintf(x->out + n, cap - (size_t)n, "\r\n");
    if (body_len)
        memcpy(x->out + n, req->body, body_len);
    x->out_len = (size_t)n + body_len;
done:
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    return code;
}

/* ---- blocking requests ---- */

bool kc__body_append(const char *p, size_t k, void *ud)
{
    kc_body_buf *b = ud;
    if (b->len + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + k + 1)
            cap *= 2;
        char *nd = realloc(b->data, cap);
        if (!nd)
            return false;
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return true;
}

static bool is_idempotent(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

static _Atomic(kc_client_fault_hook) fault_hook;
static void *_Atomic fault_ud;

void kc_client_set_fault_hook(kc_client_fault_hook hook, void *ud)
{
    atomic_store(&fault_ud, ud);
    atomic_store(&fault_hook, hook);
}

kc_code kc__fault_check(const kc_request *req)
{
    kc_client_fault_hook hook = atomic_load(&fault_hook);
    return hook ? hook(req, atomic_load(&fault_ud)) : KC_OK;
}

/* Runs x to its end on this thread, waiting on its socket with poll(2): the connection (and
 * TLS handshake) within connect_timeout_ms, the whole exchange within timeout_ms. */
static int run_blocking(kc_client *c, kc_xfer *x)
{
    double start = kc__now_s();
    double deadline = start + c->opts.timeout_ms / 1000.0;
    double cdeadline = start + c->opts.connect_timeout_ms / 1000.0;
    for (;;) {
        int r = kc__xfer_step(x);
        if (r <= 0)
            return r;
        double now = kc__now_s();
        double until = kc__xfer_connected(x) || deadline < cdeadline ? deadline : cdeadline;
        if (now >= until) {
            x->xerr = KC_X_TIMEOUT;
            snprintf(x->detail, sizeof(x->detail),
                     kc__xfer_connected(x)
                         ? "no complete response within %ld ms (%zu bytes received)"
                         : "not connected within %ld ms",
                     (long)((now - start) * 1000.0 + 0.5), x->p.received);
            return -1;
        }
        struct pollfd pfd = {
            .fd = kc__xfer_fd(x),
            .events = (short)((r & KC_WANT_READ ? POLLIN : 0) | (r & KC_WANT_WRITE ? POLLOUT : 0))};
        int ms = (int)((until - now) * 1000.0) + 1;
        if (poll(&pfd, 1, ms) < 0 && errno != EINTR) {
            x->xerr = KC_X_RECV;
            snprintf(x->detail, sizeof(x->detail), "poll: %s", strerror(errno));
            return -1;
        }
    }
}

/* One attempt. *retryable says whether the failure may be retried for this method. */
static kc_code do_once(kc_client *c, const kc_request *req, kc_response *r, kc_err *err,
                       bool *retryable)
{
    kc_body_buf b = {0};
    kc_xfer x;
    *retryable = false;
    kc_code injected = kc__fault_check(req);
    if (injected != KC_OK)
        return kc_err_set(err, injected, "%s %s: injected fault (test hook)", req->method,
                          req->path);
    kc_code code = kc__xfer_init(&x, c, req, kc__body_append, &b, err);
    if (code != KC_OK)
        goto release;
    x.conn = kc__pool_take(c);
    x.reused = x.conn != NULL;
    kc__count_request(c);
    int rc = run_blocking(c, &x);
    if (rc < 0 && x.reused && !x.p.received &&
        (x.xerr == KC_X_SEND || x.xerr == KC_X_RECV || x.xerr == KC_X_GOT_NOTHING)) {
        /* The server closed the idle connection as we reused it: nothing of the request was
         * processed, so it goes again on a fresh connection (not a retry). */
        b.len = 0;
        kc__xfer_restart(&x);
        rc = run_blocking(c, &x);
    }
    if (rc < 0) {
        code = kc__xfer_error(c, &x, req->method, req->path, err);
        /* Refused or unresolvable means nothing was sent: safe for every method. */
        *retryable =
            x.xerr == KC_X_CONNECT || x.xerr == KC_X_RESOLVE ||
            (is_idempotent(req->method) && (x.xerr == KC_X_SEND || x.xerr == KC_X_RECV ||
                                            x.xerr == KC_X_GOT_NOTHING || x.xerr == KC_X_PARTIAL));
        goto release;
    }
    r->status = x.p.status;
    r->retry_after_s = x.p.retry_after_s;
    r->content_type = x.p.content_type;
    x.p.content_type = NULL;
    r->body = b.data;
    r->body_len = b.len;
    b.data = NULL;
    kc__xfer_release_conn(&x);
    code = kc_status_decode(r->status, r->body, r->body_len, err);
    if (code != KC_OK) {
        if (err && !err->retry_after_s)
            err->retry_after_s = r->retry_after_s;
        *retryable = r->status == 429 ||
                     (r->status >= 500 && r->status != 501 && is_idempotent(req->method));
    }
release:
    free(b.data);
    kc__xfer_free(&x);
    return code;
}

kc_code kc_client_do(kc_client *c, const kc_request *req, kc_response *resp, kc_err *err)
{
    kc_err_clear(err);
    if (resp)
        memset(resp, 0, sizeof(*resp));
    if (!c || !req || !req->method || !req->path || req->path[0] != '/')
        return kc_err_set(err, KC_EARG,
                          "kc_client_do: a client, a method and a path starting with '/' are "
                          "required");
    kc_response r = {0};
    kc_err local = {0};
    kc_err *e = err ? err : &local;
    kc_code code;
    int attempt = 0;
    for (;;) {
        long wait = kc__limiter_reserve(c);
        if (wait > 0)
            sleep_ms(wait);
        kc_response_free(&r);
        kc_err_clear(e);
        bool retryable = false;
        code = do_once(c, req, &r, e, &retryable);
        if (code == KC_OK || !retryable || req->no_retry || attempt >= c->opts.max_retries)
            break;
        int ra = e->retry_after_s > KC_RETRY_AFTER_MAX_S ? KC_RETRY_AFTER_MAX_S : e->retry_after_s;
        long delay = ra > 0 ? ra * 1000L : backoff_ms(c, attempt);
        char qpath[256];
        kc_log(r.status >= 500 || r.status == 0 ? KC_LOG_WARN : KC_LOG_DEBUG,
               "retrying API request",
               "method=%s path=%s attempt=%d delay_ms=%ld error=%s status=%d", req->method,
               kc_log_quote(qpath, sizeof(qpath), req->path), attempt + 1, delay,
               kc_code_name(code), r.status);
        sleep_ms(delay);
        attempt++;
        pthread_mutex_lock(&c->mu);
        c->stats.retries++;
        pthread_mutex_unlock(&c->mu);
    }
    if (code != KC_OK && attempt > 0 && r.status == 0)
        kc_err_prefix(e, "gave up after %d attempts", attempt + 1);
    if (resp)
        *resp = r;
    else
        kc_response_free(&r);
    return code;
}

void kc_response_free(kc_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    free(resp->content_type);
    memset(resp, 0, sizeof(*resp));
}
