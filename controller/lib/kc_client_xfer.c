/* kc_client_xfer: one API request on a libcurl easy handle (URL, method, headers, body, TLS
 * through OpenSSL, proxy, timeouts), the pool of idle handles blocking requests reuse, and the
 * mapping of libcurl's failures to the client's transport errors. */
#include <stdio.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_client_int.h"

/* Longest Retry-After we keep; a server asking for more gets this (kc_client_do caps again). */
#define KC_RETRY_AFTER_KEEP_S 3600

double kc__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

CURL *kc__pool_take(kc_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->npool > 0)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->mu);
    /* A reset keeps the handle's live connection, DNS cache and TLS sessions. */
    if (h)
        curl_easy_reset(h);
    return h;
}

void kc__pool_give(kc_client *c, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&c->mu);
    /* With a pipe, blocking requests share its connection: the few made from the pipe's own
     * thread do not keep one more open. */
    if (!c->pipe && c->npool < KC_CLIENT_POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h)
        curl_easy_cleanup(h);
}

void kc__note_proto(kc_xfer *x)
{
    long v = 0;
    if (curl_easy_getinfo(x->h, CURLINFO_HTTP_VERSION, &v) != CURLE_OK || !v)
        return;
    int proto = v >= CURL_HTTP_VERSION_2_0 ? KC_PROTO_H2 : KC_PROTO_H1;
    if (atomic_load(&x->c->proto) != proto)
        atomic_store(&x->c->proto, proto);
}

/* The end of a response's headers (the empty line) tells which protocol the server speaks, and
 * the request is counted then, as client-go counts it once the response's headers are in (a
 * watch too, however long it streams). */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    size_t len = size * n;
    if (len <= 2 && (len == 0 || p[0] == '\r' || p[0] == '\n')) {
        kc_xfer *x = ud;
        kc__note_proto(x);
        long code = 0;
        if (curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code >= 200) {
            x->status = (int)code; /* a final answer, not 100 Continue */
            kc__count_result(x->c, x);
        }
    }
    return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    kc_xfer *x = ud;
    size_t len = size * n;
    if (!x->status) {
        long code = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        x->status = (int)code;
    }
    x->received += len;
    if (x->on_body && !x->on_body(p, len, x->ud))
        return 0; /* any short count stops the transfer with CURLE_WRITE_ERROR */
    return len;
}

static bool add_header(kc_xfer *x, const char *fmt, const char *a, const char *b)
{
    char line[8192];
    int n = snprintf(line, sizeof(line), fmt, a, b);
    if (n < 0 || (size_t)n >= sizeof(line))
        return false;
    struct curl_slist *l = curl_slist_append(x->headers, line);
    if (!l)
        return false;
    x->headers = l;
    return true;
}

/* The method and body: curl sends POST for a body, CUSTOMREQUEST renames the method. */
static CURLcode set_method(CURL *h, const kc_request *req, bool with_body)
{
    CURLcode rc = CURLE_OK;
    if (!strcmp(req->method, "HEAD"))
        return curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (with_body) {
        size_t len = req->body ? req->body_len : 0;
        rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, req->body ? req->body : "");
    }
    if (rc == CURLE_OK && strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0)
        rc = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    return rc;
}

/* The CA, client certificate and key, copied into the handle under the client's lock (a changed
 * file replaces the buffers: kc__tls_files_refresh). */
static CURLcode set_tls_files(CURL *h, kc_client *c)
{
    CURLcode rc = CURLE_OK;
    pthread_mutex_lock(&c->mu);
    if (c->insecure) {
        rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (c->ca_pem) {
        struct curl_blob ca = {c->ca_pem, c->ca_pem_len, CURL_BLOB_COPY};
        rc = curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (rc == CURLE_OK && c->cert_pem) {
        struct curl_blob cert = {c->cert_pem, c->cert_pem_len, CURL_BLOB_COPY};
        rc = curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (rc == CURLE_OK && c->key_pem) {
        struct curl_blob key = {c->key_pem, c->key_pem_len, CURL_BLOB_COPY};
        rc = curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
        if (rc == CURLE_OK)
            rc = curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* TLS through OpenSSL: at least TLS 1.2 (1.3 when the server offers it), the configured CA only
 * (never the system store besides it, as client-go), client certificate and key from memory. */
static CURLcode set_tls_files(CURL *h, kc_client *c);

static CURLcode set_tls(CURL *h, kc_client *c)
{
    kc__tls_files_refresh(c);
    CURLcode rc = curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (rc == CURLE_OK)
        rc = set_tls_files(h, c);
    if (rc == CURLE_OK && c->exec) {

        /* An exec plugin's certificate is replaced when it expires: each handle keeps a copy. */
        pthread_mutex_lock(&c->exec_mu);
        const kc_exec_result *r = &c->exec_cred;
        if (c->exec_have && r->client_cert_pem && r->client_key_pem) {
            struct curl_blob cert = {r->client_cert_pem, r->client_cert_pem_len, CURL_BLOB_COPY};
            struct curl_blob key = {r->client_key_pem, r->client_key_pem_len, CURL_BLOB_COPY};
            rc = curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
            if (rc == CURLE_OK)
                rc = curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
            if (rc == CURLE_OK)
                rc = curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
            if (rc == CURLE_OK)
                rc = curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        }
        pthread_mutex_unlock(&c->exec_mu);
    }
    return rc;
}

/* libcurl calls this often while a transfer moves and about once a second while it waits: a
 * cancelled client's transfers end there (CURLE_ABORTED_BY_CALLBACK). */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    kc_client *c = ud;
    return atomic_load(&c->cancelled) ? 1 : 0;
}

/* Every TLS connection's context: OpenSSL frees a connection's read and write buffers (about
 * 33 KiB) while it is idle, which most watch and keep-alive connections are most of the time. */
static CURLcode on_ssl_ctx(CURL *h, void *ctx, void *ud)
{
    (void)h;
    (void)ud;
    SSL_CTX_set_mode((SSL_CTX *)ctx, SSL_MODE_RELEASE_BUFFERS);
    return CURLE_OK;
}

/* Connection behaviour common to every request. */
static CURLcode set_transport(CURL *h, kc_client *c, long timeout_ms)
{
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (rc == CURLE_OK)                                                                        \
            rc = curl_easy_setopt(h, opt, val);                                                    \
    } while (0)
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_NOPROGRESS, 0L);
    SET(CURLOPT_XFERINFOFUNCTION, on_progress);
    SET(CURLOPT_XFERINFODATA, c);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_SHARE, c->share);
    SET(CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
    /* HTTP/2 through ALPN where the server offers it: a multi handle then multiplexes every
     * transfer on one connection (PIPEWAIT: wait for it rather than open another). Once the
     * server is known to answer HTTP/1.1 nothing waits: libcurl would hold a waiting transfer
     * until some transfer ends, and a watch may not end for minutes. */
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_PIPEWAIT, atomic_load(&c->proto) == KC_PROTO_H1 ? 0L : 1L);
    if (!c->no_gzip)
        SET(CURLOPT_ACCEPT_ENCODING, ""); /* every encoding libcurl decodes (gzip at least) */
    SET(CURLOPT_USERAGENT, c->user_agent);
    /* libcurl's smallest upload buffer (default 64 KiB, kept per handle): the operator's
     * request bodies are a few KiB, larger ones go in several writes. */
    SET(CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
    SET(CURLOPT_TIMEOUT_MS, timeout_ms);
    /* Dead peers of long-lived connections are found by keepalive probes. */
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, 30L);
    SET(CURLOPT_TCP_KEEPINTVL, 10L);
    if (c->proxy_url)
        SET(CURLOPT_PROXY, c->proxy_url);
    else if (c->loopback)
        SET(CURLOPT_NOPROXY, "*"); /* client-go never proxies loopback servers either */
    if (c->connect_to)
        SET(CURLOPT_CONNECT_TO, c->connect_to);
#undef SET
    if (rc == CURLE_OK)
        rc = set_tls(h, c);
    return rc;
}

kc_code kc__xfer_init(kc_xfer *x, kc_client *c, CURL *h, const kc_request *req, long timeout_ms,
                      kc_body_cb on_body, void *ud, kc_err *err)
{
    memset(x, 0, sizeof(*x));
    x->c = c;
    x->h = h;
    x->method = kc__method_index(req->method);
    x->on_body = on_body;
    x->ud = ud;
    const char *accept = req->accept ? req->accept : "application/json";
    const char *ctype = req->content_type ? req->content_type : "application/json";
    if (!clean_target(req->path) || !clean_target(req->method) || !clean_field(accept) ||
        !clean_field(ctype))
        return kc_err_set(err, KC_EARG,
                          "%s %s: the method, path and headers must not hold spaces or control "
                          "characters",
                          req->method, req->path);
    if (!x->h && !(x->h = curl_easy_init()))
        return kc_err_set(err, KC_ENOMEM, "out of memory preparing %s %s", req->method, req->path);
    char *token = NULL;
    kc_code code = kc__token_get(c, &token, &x->cred_gen, err);
    if (code != KC_OK)
        return code;
    if (token && !clean_field(token)) {
        code = kc_err_set(err, KC_ECONFIG, "the bearer token (from %s) holds control characters",
                          c->source);
        goto wipe;
    }
    bool with_body = req->body != NULL || !strcmp(req->method, "POST") ||
                     !strcmp(req->method, "PUT") || !strcmp(req->method, "PATCH");
    size_t ulen = strlen(c->base_url) + strlen(req->path) + 1;
    char *url = malloc(ulen);
    bool ok = url != NULL && add_header(x, "Accept: %s%s", accept, "") &&
              (!with_body || add_header(x, "Content-Type: %s%s", ctype, "")) &&
              /* no "Expect: 100-continue" round trip before larger bodies */
              add_header(x, "Expect:%s%s", "", "") &&
              (!c->host_hdr || add_header(x, "%s%s", c->host_hdr, "")) &&
              (!token || add_header(x, "Authorization: Bearer %s%s", token, ""));
    if (!ok) {
        free(url);
        code = kc_err_set(err, KC_ENOMEM, "out of memory preparing %s %s", req->method, req->path);
        goto wipe;
    }
    snprintf(url, ulen, "%s%s", c->base_url, req->path);
    CURLcode rc = curl_easy_setopt(x->h, CURLOPT_URL, url);
    free(url);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
    if (rc == CURLE_OK)
        rc = set_method(x->h, req, with_body);
    if (rc == CURLE_OK)
        rc = set_transport(x->h, c, timeout_ms);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    if (rc != CURLE_OK)
        code = kc_err_set(err, rc == CURLE_OUT_OF_MEMORY ? KC_ENOMEM : KC_ECONFIG,
                          "%s %s: cannot set up the request: %s", req->method, req->path,
                          curl_easy_strerror(rc));
wipe:
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    return code;
}

static kc_xerr classify(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return KC_X_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
        return KC_X_RESOLVE;
    case CURLE_COULDNT_CONNECT:
        return KC_X_CONNECT;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_PROXY:
        return KC_X_PROXY;
    case CURLE_PEER_FAILED_VERIFICATION:
        return KC_X_TLS_VERIFY;
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CIPHER:
        return KC_X_TLS_CONFIG;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_SHUTDOWN_FAILED:
        return KC_X_TLS;
    case CURLE_SEND_ERROR:
        return KC_X_SEND;
    case CURLE_GOT_NOTHING:
        return KC_X_GOT_NOTHING;
    case CURLE_PARTIAL_FILE:
        return KC_X_PARTIAL;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return KC_X_PROTO;
    case CURLE_OPERATION_TIMEDOUT:
        return KC_X_TIMEOUT;
    case CURLE_OUT_OF_MEMORY:
        return KC_X_NOMEM;
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
        return KC_X_ABORTED;
    default:
        return KC_X_RECV;
    }
}

void kc__xfer_finish(kc_xfer *x, CURLcode rc)
{
    long code = 0;
    if (curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code > 0)
        x->status = (int)code;
    curl_off_t ra = 0;
    if (curl_easy_getinfo(x->h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
        x->retry_after_s = ra > KC_RETRY_AFTER_KEEP_S ? KC_RETRY_AFTER_KEEP_S : (int)ra;
    char *ct = NULL;
    if (!x->content_type && curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        x->content_type = strdup(ct); /* NULL on OOM: the type is informational */
    x->xerr = classify(rc);
    kc__count_result(x->c, x); /* when no headers came: "<error>" */
    if (rc != CURLE_OK)
        snprintf(x->detail, sizeof(x->detail), "%s%s (%s, %zu body bytes received)",
                 x->xerr == KC_X_PARTIAL ? "the response ended early: " : "",
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc), curl_easy_strerror(rc),
                 x->received);
}

CURLcode kc__xfer_unwait(CURLM *multi, kc_xfer *x)
{
    curl_off_t t = 0;
    if (curl_easy_getinfo(x->h, CURLINFO_CONNECT_TIME_T, &t) != CURLE_OK || t > 0)
        return CURLE_OK;
    curl_multi_remove_handle(multi, x->h);
    curl_easy_setopt(x->h, CURLOPT_PIPEWAIT, 0L);
    CURLMcode mc = curl_multi_add_handle(multi, x->h);
    if (mc == CURLM_OK)
        return CURLE_OK;
    snprintf(x->errbuf, sizeof(x->errbuf), "cannot restart the transfer: %s",
             curl_multi_strerror(mc));
    return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
}

void kc__xfer_free(kc_xfer *x)
{
    if (!x)
        return;
    if (x->h)
        curl_easy_cleanup(x->h);
    curl_slist_free_all(x->headers);
    free(x->content_type);
    memset(x, 0, sizeof(*x));
}
