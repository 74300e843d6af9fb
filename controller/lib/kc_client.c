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

#include "kc_client_int.h"
#include "kc_log.h"

#ifndef KC_VERSION
#define KC_VERSION "0.1.0"
#endif

/* A token file larger than this is not a token. */
#define KC_TOKEN_MAX (64 * 1024)
/* Longest Retry-After we honour; a server asking for more gets this. */
#define KC_RETRY_AFTER_MAX_S 300

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* Derives url_base/connect_to/host_header when a TLS server name overrides the verified name:
 * curl verifies the certificate against the URL's host, so the URL carries the override while
 * CONNECT_TO sends the connection to the real address and a Host header keeps the real host. */
static kc_code setup_server_name(kc_client *c, kc_err *err)
{
    kc_code code = KC_OK;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
    CURLU *u = curl_url();
    if (!u)
        return kc_err_set(err, KC_ENOMEM, "out of memory parsing the server URL");
    if (curl_url_set(u, CURLUPART_URL, c->server, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        code = kc_err_set(err, KC_ECONFIG, "server URL \"%s\" (from %s) is not a valid http(s) URL",
                          c->server, c->source ? c->source : "the configuration");
        goto cleanup;
    }
    bool ok = true;
    if (!c->tls_server_name || strcmp(scheme, "https") != 0 ||
        strcmp(c->tls_server_name, host) == 0) {
        ok = (c->url_base = strdup(c->server)) != NULL;
    } else {
        /* Keep a path prefix (API servers behind a proxy) in the rewritten URL. */
        ok = curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK;
        size_t n = strlen(c->tls_server_name) + strlen(host) + 2 * strlen(port) +
                   (path ? strlen(path) : 0) + 32;
        if (ok && (c->url_base = malloc(n)) && (c->connect_to = malloc(n)) &&
            (c->host_header = malloc(n))) {
            snprintf(c->url_base, n, "https://%s:%s%s", c->tls_server_name, port, path);
            snprintf(c->connect_to, n, "%s:%s:%s:%s", c->tls_server_name, port, host, port);
            snprintf(c->host_header, n, "Host: %s:%s", host, port);
            c->connect_to_list = curl_slist_append(NULL, c->connect_to);
        }
        ok = ok && c->url_base && c->connect_to && c->host_header && c->connect_to_list;
    }
    if (!ok) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory copying the server URL");
        goto cleanup;
    }
    size_t len = strlen(c->url_base);
    while (len && c->url_base[len - 1] == '/')
        c->url_base[--len] = '\0'; /* request paths carry their own leading slash */
cleanup:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    return code;
}

kc_code kc_client_new(const kc_config *cfg, const kc_client_opts *opts, kc_client **out,
                      kc_err *err)
{
    kc_err_clear(err);
    if (!cfg || !out)
        return kc_err_set(err, KC_EARG, "kc_client_new: cfg and out are required");
    *out = NULL;
    if (!cfg->server ||
        (strncmp(cfg->server, "https://", 8) != 0 && strncmp(cfg->server, "http://", 7) != 0))
        return kc_err_set(err, KC_ECONFIG,
                          "server \"%s\" (from %s) must be an http:// or https:// URL",
                          cfg->server ? cfg->server : "", cfg->source ? cfg->source : "config");
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return kc_err_set(err, KC_EIO, "curl_global_init failed: %s",
                          curl_easy_strerror(global_rc));
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
    c->lim_last_s = now_s();
    c->rng = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)c << 16) ^ 0x9e3779b97f4a7c15ULL;
    pthread_mutex_init(&c->mu, NULL);
    if (!ok) {
        kc_client_free(c);
        return kc_err_set(err, KC_ENOMEM, "out of memory copying the configuration");
    }
    kc_code code = setup_server_name(c, err);
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
        curl_easy_cleanup(c->pool[i]);
    pthread_mutex_destroy(&c->mu);
    free(c->server);
    free(c->ca_pem);
    free(c->tls_server_name);
    free(c->token);
    free(c->token_file);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->source);
    free(c->url_base);
    free(c->connect_to);
    curl_slist_free_all(c->connect_to_list);
    free(c->host_header);
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
    double now = now_s();
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

static bool append_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *n = curl_slist_append(*list, line);
    if (!n)
        return false;
    *list = n;
    return true;
}

kc_code kc__setup_easy(kc_client *c, CURL *h, const kc_request *req, struct curl_slist **hdrs,
                       char *errbuf, kc_err *err)
{
    kc_code code = KC_OK;
    char *token = NULL, *url = NULL, *line = NULL;
    *hdrs = NULL;
    code = token_get(c, &token, err);
    if (code != KC_OK)
        return code;
    size_t ulen = strlen(c->url_base) + strlen(req->path) + 1;
    url = malloc(ulen);
    const char *accept = req->accept ? req->accept : "application/json";
    const char *ctype = req->content_type ? req->content_type : "application/json";
    size_t llen = strlen(accept) + strlen(ctype) + (token ? strlen(token) : 0) + 32;
    line = malloc(llen);
    if (!url || !line)
        goto nomem;
    snprintf(url, ulen, "%s%s", c->url_base, req->path);
    snprintf(line, llen, "Accept: %s", accept);
    if (!append_header(hdrs, line))
        goto nomem;
    bool has_body = req->body != NULL;
    if (has_body || strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0 ||
        strcmp(req->method, "PATCH") == 0) {
        snprintf(line, llen, "Content-Type: %s", ctype);
        if (!append_header(hdrs, line))
            goto nomem;
    }
    if (token) {
        snprintf(line, llen, "Authorization: Bearer %s", token);
        bool added = append_header(hdrs, line);
        explicit_bzero(line, llen);
        if (!added)
            goto nomem;
    }
    /* No "Expect: 100-continue" round trip before large bodies. */
    if (!append_header(hdrs, "Expect:") || (c->host_header && !append_header(hdrs, c->host_header)))
        goto nomem;

    errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    /* curl_easy_reset (pool_put) cannot report a failure: when one of its allocations fails it
     * returns before setting the rest of its defaults (buffer sizes among them), and the next
     * request on the handle breaks. The defaults a request relies on are set here. */
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)CURL_MAX_WRITE_SIZE);
    /* Over TLS curl copies every request it sends through this buffer, which each handle then
     * keeps: at the 64 KiB default a process with a dozen watches holds ~0.8 MiB for it.
     * Request bodies larger than 16 KiB (rare: manifests, a status) go in several writes. */
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
    curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, 118L);
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 5L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, 200L);
    curl_easy_setopt(h, CURLOPT_HEADEROPT, (long)CURLHEADER_SEPARATE);
    curl_easy_setopt(h, CURLOPT_SSL_ENABLE_ALPN, 1L);
    curl_easy_setopt(h, CURLOPT_UPKEEP_INTERVAL_MS, 60000L);
    /* String options are copied: a failed copy must fail the request, not send another one (a
     * DELETE whose method was lost is a GET). */
    if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent) != CURLE_OK)
        goto nomem;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    if (strcmp(req->method, "GET") == 0 && !has_body) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else {
        if (strcmp(req->method, "POST") != 0 &&
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method) != CURLE_OK)
            goto nomem;
        if (has_body || strcmp(req->method, "DELETE") != 0) {
            /* Copied so that a stream's body outlives the caller's buffer. */
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(has_body ? req->body_len : 0));
            if (curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, has_body ? req->body : "") != CURLE_OK)
                goto nomem;
        }
    }
    if (c->connect_to_list)
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to_list);
    if (c->ca_pem) {
        struct curl_blob blob = {
            .data = c->ca_pem, .len = c->ca_pem_len, .flags = CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    if (c->cert_pem && c->key_pem) {
        struct curl_blob cert = {
            .data = c->cert_pem, .len = c->cert_pem_len, .flags = CURL_BLOB_NOCOPY};
        struct curl_blob key = {
            .data = c->key_pem, .len = c->key_pem_len, .flags = CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    goto cleanup;
nomem:
    code = kc_err_set(err, KC_ENOMEM, "out of memory preparing %s %s", req->method, req->path);
    curl_slist_free_all(*hdrs);
    *hdrs = NULL;
cleanup:
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    free(url); /* curl copies CURLOPT_URL */
    free(line);
    return code;
}

/* ---- blocking requests ---- */

typedef struct body_buf {
    char *data;
    size_t len, cap;
} body_buf;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    body_buf *b = ud;
    size_t k = size * n;
    if (b->len + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + k + 1)
            cap *= 2;
        char *nd = realloc(b->data, cap);
        if (!nd)
            return 0; /* curl reports CURLE_WRITE_ERROR */
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, k);
    b->len += k;
    b->data[b->len] = '\0';
    return k;
}

static CURL *pool_get(kc_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->npool)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->mu);
    return h ? h : curl_easy_init();
}

/* Returns a handle to the pool; curl_easy_reset clears the options (and our pointers to stack
 * buffers) but keeps the live connections, which is why handles are reused at all. */
static void pool_put(kc_client *c, CURL *h)
{
    curl_easy_reset(h);
    pthread_mutex_lock(&c->mu);
    if (c->npool < KC_CLIENT_POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h)
        curl_easy_cleanup(h);
}

static bool is_idempotent(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

/* Retry-After in seconds (delta-seconds or an HTTP date), 0 when absent or unparsable. */
static int retry_after(CURL *h)
{
    struct curl_header *hd = NULL;
    if (curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &hd) != CURLHE_OK || !hd)
        return 0;
    char *end = NULL;
    long v = strtol(hd->value, &end, 10);
    if (end == hd->value || (*end && !isspace((unsigned char)*end))) {
        time_t t = curl_getdate(hd->value, NULL);
        v = t > 0 ? (long)(t - time(NULL)) : 0;
    }
    if (v < 0)
        v = 0;
    return v > KC_RETRY_AFTER_MAX_S ? KC_RETRY_AFTER_MAX_S : (int)v;
}

static _Atomic(kc_client_fault_hook) fault_hook;
static void *_Atomic fault_ud;

void kc_client_set_fault_hook(kc_client_fault_hook hook, void *ud)
{
    atomic_store(&fault_ud, ud);
    atomic_store(&fault_hook, hook);
}

/* One attempt. *retryable says whether the failure may be retried for this method. */
static kc_code do_once(kc_client *c, const kc_request *req, kc_response *r, kc_err *err,
                       bool *retryable)
{
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs = NULL;
    body_buf b = {0};
    *retryable = false;
    kc_client_fault_hook hook = atomic_load(&fault_hook);
    if (hook) {
        kc_code injected = hook(req, atomic_load(&fault_ud));
        if (injected != KC_OK)
            return kc_err_set(err, injected, "%s %s: injected fault (test hook)", req->method,
                              req->path);
    }
    CURL *h = pool_get(c);
    if (!h)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating a curl handle");
    kc_code code = kc__setup_easy(c, h, req, &hdrs, errbuf, err);
    if (code != KC_OK)
        goto release;
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->opts.timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    kc__count_request(c);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK) {
        code = kc__curl_error(c, rc, errbuf, req->method, req->path, err);
        /* Refused or unresolvable means nothing was sent: safe for every method. */
        *retryable =
            rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
            (is_idempotent(req->method) && (rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
                                            rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE));
        goto release;
    }
    r->status = (int)status;
    r->retry_after_s = retry_after(h);
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    if (ct && !(r->content_type = strdup(ct))) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory copying a response header");
        goto release;
    }
    r->body = b.data;
    r->body_len = b.len;
    b.data = NULL;
    code = kc_status_decode(r->status, r->body, r->body_len, err);
    if (code != KC_OK) {
        if (err && !err->retry_after_s)
            err->retry_after_s = r->retry_after_s;
        *retryable =
            status == 429 || (status >= 500 && status != 501 && is_idempotent(req->method));
    }
release:
    free(b.data);
    curl_slist_free_all(hdrs);
    pool_put(c, h);
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
