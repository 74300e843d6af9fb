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
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "kc_client_int.h"
#include "kc_config_int.h"
#include "kc_log.h"

/* A CA bundle, certificate or key file larger than this is not one. */
#define KC_TLS_FILE_MAX (4 * 1024 * 1024)

#ifndef KC_VERSION
#define KC_VERSION "0.1.0"
#endif

/* A token file larger than this is not a token. */
#define KC_TOKEN_MAX (64 * 1024)
/* Longest Retry-After we honour; a server asking for more gets this. */
#define KC_RETRY_AFTER_MAX_S 300

bool kc__sleep(kc_client *c, long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->cancelled) &&
           pthread_cond_timedwait(&c->wake, &c->mu, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&c->mu);
    return !atomic_load(&c->cancelled);
}

kc_code kc__cancelled_error(const char *method, const char *path, kc_err *err)
{
    return kc_err_set(err, KC_ECANCELED, "%s %s: canceled (the client is stopping)", method, path);
}

void kc_client_cancel(kc_client *c)
{
    if (!c || atomic_exchange(&c->cancelled, true))
        return;
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->wake);
    /* Under the lock, so that the pipe and the loop context cannot go away meanwhile; both
     * are only woken here. */
    if (c->pipe)
        kc__pipe_wake(c->pipe);
    kc__stream_cancel(c);
    pthread_mutex_unlock(&c->mu);
}

bool kc_client_cancelled(kc_client *c)
{
    return c && atomic_load(&c->cancelled);
}

bool kc_client_multiplexed(kc_client *c)
{
    return c && atomic_load(&c->proto) == KC_PROTO_H2;
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

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool is_loopback(const char *host)
{
    return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "[::1]");
}

/* Parses the server URL (libcurl's parser) and derives what every request needs. With a TLS
 * server name the certificate is verified against, and SNI carries, that name while the
 * connection still goes to the URL's host and the Host header keeps it: requests are addressed
 * to the name and CONNECT_TO sends them to the real host. */
static kc_code setup_server(kc_client *c, kc_err *err)
{
    kc_code code = KC_OK;
    char *scheme = NULL, *host = NULL, *port = NULL, *dport = NULL, *url = NULL;
    CURLU *u = curl_url();
    if (!u)
        return kc_err_set(err, KC_ENOMEM, "out of memory parsing the server URL");
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, c->server, 0);
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    if (uc == CURLUE_OK && strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0)
        uc = CURLUE_UNSUPPORTED_SCHEME;
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_HOST, &host, 0);
    if (uc == CURLUE_OK)
        uc = curl_url_get(u, CURLUPART_PORT, &dport, CURLU_DEFAULT_PORT);
    if (uc != CURLUE_OK) {
        code = kc_err_set(err, KC_ECONFIG, "server URL \"%.200s\" (from %s): %s", c->server,
                          c->source, curl_url_strerror(uc));
        goto out;
    }
    c->loopback = is_loopback(host);
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
        port = NULL; /* the scheme's default */
    if (c->tls_server_name) {
        char line[600];
        snprintf(line, sizeof(line), "Host: %s%s%s", host, port ? ":" : "", port ? port : "");
        c->host_hdr = strdup(line);
        snprintf(line, sizeof(line), "%s:%s:%s:%s", c->tls_server_name, dport, host, dport);
        c->connect_to = curl_slist_append(NULL, line);
        uc = curl_url_set(u, CURLUPART_HOST, c->tls_server_name, 0);
        if (uc != CURLUE_OK) {
            code = kc_err_set(err, KC_ECONFIG, "tls-server-name \"%.200s\" (from %s): %s",
                              c->tls_server_name, c->source, curl_url_strerror(uc));
            goto out;
        }
        if (!c->host_hdr || !c->connect_to) {
            code = kc_err_set(err, KC_ENOMEM, "out of memory parsing the server URL");
            goto out;
        }
    }
    /* Requests append their absolute path to the server URL's own path (without its query). */
    curl_url_set(u, CURLUPART_QUERY, NULL, 0);
    curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
    if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory parsing the server URL");
        goto out;
    }
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
    if (!(c->base_url = strdup(url)))
        code = kc_err_set(err, KC_ENOMEM, "out of memory parsing the server URL");
out:
    curl_free(url);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(dport);
    curl_url_cleanup(u);
    return code;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
    (void)h;
    (void)access;
    kc_client *c = ud;
    pthread_mutex_lock(&c->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
    (void)h;
    kc_client *c = ud;
    pthread_mutex_unlock(&c->share_mu[data]);
}

/* DNS answers and TLS sessions are shared by every handle of the client, on any thread. */
static kc_code setup_share(kc_client *c, kc_err *err)
{
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_mu[i], NULL);
    c->share = curl_share_init();
    if (!c->share || curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)
        return kc_err_set(err, KC_ENOMEM, "cannot set up the client's shared DNS and TLS caches");
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
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return kc_err_set(err, KC_ENOMEM, "cannot initialise libcurl: %s",
                          curl_easy_strerror(curl_init_rc));
    kc_client *c = calloc(1, sizeof(*c));
    if (!c)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating the client");
    bool ok = true;
    c->server = kc__dup_opt(cfg->server, &ok);
    c->metric_host = cfg->server ? kc__url_host(cfg->server) : NULL;
    ok = ok && (c->metric_host || !cfg->server);
    c->ca_pem = dup_pem(cfg->ca_pem, cfg->ca_pem_len, &c->ca_pem_len, &ok);
    c->insecure = cfg->insecure_skip_tls_verify;
    c->no_gzip = cfg->disable_compression;
    c->tls_server_name = kc__dup_opt(cfg->tls_server_name, &ok);
    c->token = kc__dup_opt(cfg->token, &ok);
    c->token_file = kc__dup_opt(cfg->token_file, &ok);
    c->cert_pem = dup_pem(cfg->client_cert_pem, cfg->client_cert_pem_len, &c->cert_pem_len, &ok);
    c->key_pem = dup_pem(cfg->client_key_pem, cfg->client_key_pem_len, &c->key_pem_len, &ok);
    c->source = kc__dup_opt(cfg->source ? cfg->source : "the configuration", &ok);
    /* socks5h: the proxy resolves the server's name, as client-go's SOCKS5 dialer does. */
    if (cfg->proxy_url && !strncasecmp(cfg->proxy_url, "socks5://", 9)) {
        size_t n = strlen(cfg->proxy_url) + 2;
        if ((c->proxy_url = malloc(n)))
            snprintf(c->proxy_url, n, "socks5h://%s", cfg->proxy_url + 9);
        else
            ok = false;
    } else {
        c->proxy_url = kc__dup_opt(cfg->proxy_url, &ok);
    }
    c->ca_file.path = kc__dup_opt(cfg->ca_file, &ok);
    c->cert_file.path = kc__dup_opt(cfg->client_cert_file, &ok);
    c->key_file.path = kc__dup_opt(cfg->client_key_file, &ok);
    kc_tls_file *files[] = {&c->ca_file, &c->cert_file, &c->key_file};
    for (size_t i = 0; i < 3; i++)
        if (files[i]->path && stat(files[i]->path, &files[i]->st) != 0)
            memset(&files[i]->st, 0, sizeof(files[i]->st)); /* read again once it is there */
    c->tls_checked_s = kc__now_s();
    pthread_mutex_init(&c->exec_mu, NULL);
    if (cfg->exec && !(c->exec = kc_exec_config_dup(cfg->exec)))
        ok = false;
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
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (!ok) {
        kc_client_free(c);
        return kc_err_set(err, KC_ENOMEM, "out of memory copying the configuration");
    }
    kc_code code = setup_server(c, err);
    if (code == KC_OK)
        code = setup_share(c, err);
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
    if (c->reg)
        kc_metrics_remove_hook(c->reg, kc__sample_results, c);
    kc__stream_detach(c);
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    if (c->share) {
        curl_share_cleanup(c->share);
        for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
            pthread_mutex_destroy(&c->share_mu[i]);
    }
    curl_slist_free_all(c->connect_to);
    free(c->ca_file.path);
    free(c->cert_file.path);
    free(c->key_file.path);
    free(c->host_hdr);
    free(c->base_url);
    free(c->proxy_url);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wake);
    kc_exec_result_free(&c->exec_cred);
    kc_exec_config_free(c->exec);
    pthread_mutex_destroy(&c->exec_mu);
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
    free(c->metric_host);
    free(c);
}

void kc_client_get_stats(kc_client *c, kc_client_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

void kc__count_connections(kc_client *c, long new_connections)
{
    if (new_connections <= 0)
        return;
    pthread_mutex_lock(&c->mu);
    c->stats.connections += (unsigned long)new_connections;
    pthread_mutex_unlock(&c->mu);
}

void kc__count_request(kc_client *c, long new_connections)
{
    pthread_mutex_lock(&c->mu);
    c->stats.requests++;
    if (new_connections > 0)
        c->stats.connections += (unsigned long)new_connections;
    pthread_mutex_unlock(&c->mu);
}

/* ---- TLS files ---- */

static bool file_changed(const kc_tls_file *f, struct stat *now)
{
    if (!f->path || stat(f->path, now) != 0)
        return false; /* gone for now (e.g. mid-rotation): keep what we have */
    return now->st_ino != f->st.st_ino || now->st_dev != f->st.st_dev ||
           now->st_size != f->st.st_size || now->st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
           now->st_mtim.tv_nsec != f->st.st_mtim.tv_nsec;
}

/* Replaces *pem with the file's contents; false (logged) when it cannot be read. */
static bool reload(kc_client *c, kc_tls_file *f, const struct stat *st, char **pem, size_t *len)
{
    char *buf = NULL, why[160];
    size_t n = 0;
    if (kc_config_read_file(f->path, KC_TLS_FILE_MAX, &buf, &n, NULL, why, sizeof(why)) != KC_OK) {
        kc_warn("cannot read a changed TLS file, keeping its previous contents",
                "file=%s error=\"%s\"", f->path, why);
        return false;
    }
    if (*pem)
        explicit_bzero(*pem, *len); /* a key is a secret */
    free(*pem);
    *pem = buf;
    *len = n;
    f->st = *st;
    kc_info("TLS file changed; new connections use it", "file=%s source=%s", f->path, c->source);
    return true;
}

void kc__tls_files_refresh(kc_client *c)
{
    if (!c->ca_file.path && !c->cert_file.path && !c->key_file.path)
        return;
    pthread_mutex_lock(&c->mu);
    double now = kc__now_s();
    if (now - c->tls_checked_s >= 1.0) {
        c->tls_checked_s = now;
        struct stat a, b, k;
        if (file_changed(&c->ca_file, &a))
            reload(c, &c->ca_file, &a, &c->ca_pem, &c->ca_pem_len);
        /* A certificate and its key change together: both are read again when either did. */
        bool cert = file_changed(&c->cert_file, &b), key = file_changed(&c->key_file, &k);
        if (cert || key) {
            if (!cert && c->cert_file.path && stat(c->cert_file.path, &b) != 0)
                b = c->cert_file.st;
            if (!key && c->key_file.path && stat(c->key_file.path, &k) != 0)
                k = c->key_file.st;
            if (c->cert_file.path)
                reload(c, &c->cert_file, &b, &c->cert_pem, &c->cert_pem_len);
            if (c->key_file.path)
                reload(c, &c->key_file, &k, &c->key_pem, &c->key_pem_len);
        }
    }
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
/* A credential this close to its expiry is renewed before use (client-go renews on expiry; a
 * request in flight must not carry one that lapses on the way). */
#define KC_EXEC_RENEW_MARGIN_S 10

/* The exec plugin's token: the cached one while it is valid, else a fresh run (one at a time;
 * concurrent requests wait for it and share its result). */
static kc_code exec_token(kc_client *c, char **out, unsigned long *gen, kc_err *err)
{
    kc_code code = KC_OK;
    pthread_mutex_lock(&c->exec_mu);
    time_t now = time(NULL);
    if (c->exec_have && c->exec_cred.expires &&
        now + KC_EXEC_RENEW_MARGIN_S >= c->exec_cred.expires)
        c->exec_have = false;
    if (!c->exec_have) {
        kc_exec_result_free(&c->exec_cred);
        code = kc_exec_run(c->exec, c->server, c->ca_pem, &c->exec_cred, err);
        if (code != KC_OK)
            goto unlock;
        c->exec_have = true;
        c->exec_gen++;
    }
    *gen = c->exec_gen;
    if (c->exec_cred.token && !(*out = strdup(c->exec_cred.token)))
        code = kc_err_set(err, KC_ENOMEM, "out of memory copying the bearer token");
unlock:
    pthread_mutex_unlock(&c->exec_mu);
    return code;
}

bool kc__token_refused(kc_client *c, unsigned long gen)
{
    if (!c->exec)
        return false;
    pthread_mutex_lock(&c->exec_mu);
    if (c->exec_have && c->exec_gen == gen)
        c->exec_have = false;
    pthread_mutex_unlock(&c->exec_mu);
    return true;
}

kc_code kc__token_get(kc_client *c, char **out, unsigned long *gen, kc_err *err)
{
    *out = NULL;
    *gen = 0;
    if (c->exec)
        return exec_token(c, out, gen, err);
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

/* One attempt. *retryable says whether the failure may be retried for this method. */
static kc_code do_once(kc_client *c, const kc_request *req, kc_response *r, kc_err *err,
                       bool *retryable, bool *refused)
{
    *refused = false;
    kc_body_buf b = {0};
    kc_xfer x;
    memset(&x, 0, sizeof(x));
    *retryable = false;
    if (atomic_load(&c->cancelled))
        return kc__cancelled_error(req->method, req->path, err);
    kc_code injected = kc__fault_check(req);
    if (injected != KC_OK)
        return kc_err_set(err, injected, "%s %s: injected fault (test hook)", req->method,
                          req->path);
    kc_code code;
    CURLcode cc;
    kc_pipe *p = kc__pipe_acquire(c);
    if (p) {
        /* Over the pipe's connection (counted there). */
        code = kc__pipe_do(p, req, &x, &b, &cc, err);
        kc__pipe_release(c, p);
        if (code != KC_OK)
            goto release;
    } else {
        code = kc__xfer_init(&x, c, kc__pool_take(c), req, c->opts.timeout_ms, kc__body_append, &b,
                             err);
        if (code != KC_OK)
            goto release;
        cc = curl_easy_perform(x.h);
        kc__xfer_finish(&x, cc);
        long conns = 0;
        curl_easy_getinfo(x.h, CURLINFO_NUM_CONNECTS, &conns);
        kc__count_request(c, conns);
    }
    int rc = cc == CURLE_OK ? 0 : -1;
    if (rc < 0) {
        code = kc__xfer_error(c, &x, req->method, req->path, err);
        /* Refused or unresolvable means nothing was sent: safe for every method. */
        *retryable =
            x.xerr == KC_X_CONNECT || x.xerr == KC_X_RESOLVE ||
            (is_idempotent(req->method) && (x.xerr == KC_X_SEND || x.xerr == KC_X_RECV ||
                                            x.xerr == KC_X_GOT_NOTHING || x.xerr == KC_X_PARTIAL));
        goto release;
    }
    r->status = x.status;
    r->retry_after_s = x.retry_after_s;
    r->content_type = x.content_type;
    x.content_type = NULL;
    r->body = b.data;
    r->body_len = b.len;
    b.data = NULL;
    /* The handle goes back with its connection, which curl keeps only when it may be reused. */
    if (x.h) {
        kc__pool_give(c, x.h);
        x.h = NULL;
    }
    code = kc_status_decode(r->status, r->body, r->body_len, err);
    if (r->status == 401)
        *refused = kc__token_refused(c, x.cred_gen);
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
    bool reauthenticated = false;
    for (;;) {
        long wait = kc__limiter_reserve(c);
        kc_response_free(&r);
        kc_err_clear(e);
        if (wait > 0 && !kc__sleep(c, wait)) {
            code = kc__cancelled_error(req->method, req->path, e);
            break;
        }
        bool retryable = false, refused = false;
        code = do_once(c, req, &r, e, &retryable, &refused);
        if (refused && !reauthenticated) {
            /* 401 with an exec plugin's credential: once more with a fresh one, at once. */
            reauthenticated = true;
            kc_debug("credential refused; running the exec plugin again", "path=%s", req->path);
            continue;
        }
        if (code == KC_OK || !retryable || req->no_retry || attempt >= c->opts.max_retries)
            break;
        int ra = e->retry_after_s > KC_RETRY_AFTER_MAX_S ? KC_RETRY_AFTER_MAX_S : e->retry_after_s;
        long delay = ra > 0 ? ra * 1000L : backoff_ms(c, attempt);
        kc_log(r.status >= 500 || r.status == 0 ? KC_LOG_WARN : KC_LOG_DEBUG,
               "retrying API request",
               "method=%s path=%s attempt=%d delay_ms=%ld error=%s status=%d", req->method,
               req->path, attempt + 1, delay, kc_code_name(code), r.status);
        if (!kc__sleep(c, delay)) {
            kc_response_free(&r);
            code = kc__cancelled_error(req->method, req->path, e);
            break;
        }
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
