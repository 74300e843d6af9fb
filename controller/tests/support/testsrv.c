/* testsrv: an in-process HTTP(S) server on 127.0.0.1 (libmicrohttpd) for client-side tests. */
#include "testsrv.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Size of the blocks MHD asks the stream reader to fill. */
#define TS_STREAM_BLOCK 16384

struct ts_server {
    struct MHD_Daemon *daemon;
    ts_handler handler;
    void *ud;
    int port;
    char url[64];
    atomic_uint nrequests;
    /* Guards every stream's state and the stream list; streams wait on their own condvar. */
    pthread_mutex_t mu;
    bool stopping;
    ts_stream *streams; /* every stream still referenced by the user or by MHD */
};

/* Per-request state: created by the URI log callback (which sees the raw URI with its query),
 * freed by the request-completed callback. */
struct ts_conn {
    ts_server *srv;
    struct MHD_Connection *mc;
    char *path;
    char *query;
    char *body;
    size_t body_len, body_cap;
    bool headers_seen;
    bool responded;
};

/* A chunked response. Two references keep it alive: the user's (dropped by ts_stream_end,
 * ts_stream_abort or ts_stop) and MHD's (dropped when MHD destroys the response). */
struct ts_stream {
    ts_server *srv;
    pthread_cond_t cond;
    char *buf;
    size_t len, off, cap;
    bool ended;    /* the user asked for the terminating chunk */
    bool aborted;  /* the user (or ts_stop) asked to cut the connection */
    bool mhd_gone; /* MHD destroyed the response: the client is gone */
    bool user_ref;
    ts_stream *next, *prev;
};

/* ---- PKI ---- */

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* Builds a certificate for key with subject CN=cn, signed by issuer_key (self-signed when issuer
 * is NULL). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       bool is_ca)
{
    X509 *cert = X509_new();
    if (!cert)
        return NULL;
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    if (RAND_bytes(serial, sizeof(serial)) != 1)
        goto fail;
    serial[0] &= 0x7f; /* keep the serial positive */
    bn = BN_bin2bn(serial, sizeof(serial), NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)))
        goto fail;
    if (!X509_set_version(cert, 2) || !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(cert), 7L * 24 * 3600) || !X509_set_pubkey(cert, key))
        goto fail;
    X509_NAME *name = X509_get_subject_name(cert);
    if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0))
        goto fail;
    if (!X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name))
        goto fail;
    X509 *iss = issuer ? issuer : cert;
    if (is_ca) {
        if (add_ext(cert, iss, NID_basic_constraints, "critical,CA:TRUE") ||
            add_ext(cert, iss, NID_key_usage, "critical,keyCertSign,cRLSign") ||
            add_ext(cert, iss, NID_subject_key_identifier, "hash") ||
            add_ext(cert, iss, NID_authority_key_identifier, "keyid:always"))
            goto fail;
    } else {
        if (add_ext(cert, iss, NID_basic_constraints, "critical,CA:FALSE") ||
            add_ext(cert, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
            add_ext(cert, iss, NID_ext_key_usage, "serverAuth") ||
            add_ext(cert, iss, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost") ||
            add_ext(cert, iss, NID_subject_key_identifier, "hash") ||
            add_ext(cert, iss, NID_authority_key_identifier, "keyid:always"))
            goto fail;
    }
    if (!X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256()))
        goto fail;
    BN_free(bn);
    return cert;
fail:
    BN_free(bn);
    X509_free(cert);
    return NULL;
}

static char *bio_to_string(BIO *bio)
{
    char *data;
    long len = BIO_get_mem_data(bio, &data);
    if (len <= 0)
        return NULL;
    char *s = malloc((size_t)len + 1);
    if (!s)
        return NULL;
    memcpy(s, data, (size_t)len);
    s[len] = '\0';
    return s;
}

static char *cert_pem(X509 *cert)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (bio && PEM_write_bio_X509(bio, cert))
        s = bio_to_string(bio);
    BIO_free(bio);
    return s;
}

static char *key_pem(EVP_PKEY *key)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL))
        s = bio_to_string(bio);
    BIO_free(bio);
    return s;
}

ts_pki *ts_pki_generate(const char *ca_cn)
{
    ts_pki *pki = calloc(1, sizeof(*pki));
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *srv_key = EVP_EC_gen("P-256");
    X509 *ca = NULL, *srv = NULL;
    if (!pki || !ca_key || !srv_key)
        goto fail;
    ca = make_cert(ca_key, ca_cn ? ca_cn : "testsrv-ca", NULL, NULL, true);
    if (!ca)
        goto fail;
    srv = make_cert(srv_key, "localhost", ca, ca_key, false);
    if (!srv)
        goto fail;
    pki->ca_pem = cert_pem(ca);
    pki->cert_pem = cert_pem(srv);
    pki->key_pem = key_pem(srv_key);
    if (!pki->ca_pem || !pki->cert_pem || !pki->key_pem)
        goto fail;
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    return pki;
fail:
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    ts_pki_free(pki);
    return NULL;
}

void ts_pki_free(ts_pki *pki)
{
    if (!pki)
        return;
    free(pki->ca_pem);
    free(pki->cert_pem);
    free(pki->key_pem);
    free(pki);
}

/* ---- streams ---- */

static void stream_unlink_free(ts_stream *st)
{
    ts_server *srv = st->srv;
    if (st->prev)
        st->prev->next = st->next;
    else
        srv->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    pthread_cond_destroy(&st->cond);
    free(st->buf);
    free(st);
}

/* Called with srv->mu held, after one of the two references was dropped. */
static void stream_maybe_free(ts_stream *st)
{
    if (!st->user_ref && st->mhd_gone)
        stream_unlink_free(st);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    ts_stream *st = cls;
    ts_server *srv = st->srv;
    (void)pos;
    ssize_t n;
    pthread_mutex_lock(&srv->mu);
    /* Blocking here is fine: each connection has its own thread. Queued data goes out before an
     * end or an abort takes effect, so a test can write a partial event and then cut. */
    while (st->off == st->len && !st->ended && !st->aborted)
        pthread_cond_wait(&st->cond, &srv->mu);
    if (st->off < st->len) {
        size_t k = st->len - st->off < max ? st->len - st->off : max;
        memcpy(buf, st->buf + st->off, k);
        st->off += k;
        if (st->off == st->len)
            st->off = st->len = 0;
        n = (ssize_t)k;
    } else if (st->aborted) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&srv->mu);
    return n;
}

static void stream_response_freed(void *cls)
{
    ts_stream *st = cls;
    ts_server *srv = st->srv;
    pthread_mutex_lock(&srv->mu);
    st->mhd_gone = true;
    stream_maybe_free(st);
    pthread_mutex_unlock(&srv->mu);
}

ts_stream *ts_stream_begin(ts_conn *conn, int status, const char *content_type)
{
    ts_server *srv = conn->srv;
    if (conn->responded)
        return NULL;
    ts_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->srv = srv;
    st->user_ref = true;
    pthread_cond_init(&st->cond, NULL);
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, TS_STREAM_BLOCK, stream_reader, st, stream_response_freed);
    if (!r) {
        pthread_cond_destroy(&st->cond);
        free(st);
        return NULL;
    }
    if (content_type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    pthread_mutex_lock(&srv->mu);
    st->next = srv->streams;
    if (srv->streams)
        srv->streams->prev = st;
    srv->streams = st;
    /* A stream begun while ts_stop runs is born aborted so that the stop cannot hang on it. */
    if (srv->stopping)
        st->aborted = true;
    pthread_mutex_unlock(&srv->mu);
    MHD_queue_response(conn->mc, (unsigned)status, r);
    /* Dropping our reference now: MHD frees the response (and calls stream_response_freed)
     * once the connection is done with it, or immediately if queueing failed. */
    MHD_destroy_response(r);
    conn->responded = true;
    return st;
}

int ts_stream_write(ts_stream *st, const char *data, size_t len)
{
    ts_server *srv = st->srv;
    int rc = 0;
    pthread_mutex_lock(&srv->mu);
    if (st->ended || st->aborted || st->mhd_gone) {
        rc = -1;
        goto unlock;
    }
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->len + len)
            cap *= 2;
        char *nb = realloc(st->buf, cap);
        if (!nb) {
            rc = -1;
            goto unlock;
        }
        st->buf = nb;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
    pthread_cond_signal(&st->cond);
unlock:
    pthread_mutex_unlock(&srv->mu);
    return rc;
}

static void stream_release(ts_stream *st, bool abort)
{
    ts_server *srv = st->srv;
    pthread_mutex_lock(&srv->mu);
    if (abort)
        st->aborted = true;
    else
        st->ended = true;
    st->user_ref = false;
    pthread_cond_signal(&st->cond);
    stream_maybe_free(st);
    pthread_mutex_unlock(&srv->mu);
}

void ts_stream_end(ts_stream *st)
{
    if (st)
        stream_release(st, false);
}

void ts_stream_abort(ts_stream *st)
{
    if (st)
        stream_release(st, true);
}

/* ---- full responses ---- */

void ts_respond(ts_conn *conn, int status, const char *content_type, const char *body,
                const char *extra_headers)
{
    if (conn->responded)
        return;
    const char *b = body ? body : "";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return;
    if (content_type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra_headers) {
        char *copy = strdup(extra_headers);
        char *save = NULL;
        for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            *colon = '\0';
            char *value = colon + 1;
            while (*value == ' ')
                value++;
            size_t vl = strlen(value);
            if (vl && value[vl - 1] == '\r')
                value[vl - 1] = '\0';
            MHD_add_response_header(r, line, value);
        }
        free(copy);
    }
    MHD_queue_response(conn->mc, (unsigned)status, r);
    MHD_destroy_response(r);
    conn->responded = true;
}

void ts_respond_json(ts_conn *conn, int status, json_t *body)
{
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    ts_respond(conn, status, "application/json", s ? s : "{}", NULL);
    free(s);
    json_decref(body);
}

void ts_respond_status(ts_conn *conn, int status, const char *reason, const char *message)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion",
                           "v1", "metadata", "status", "Failure", "message", message ? message : "",
                           "reason", reason ? reason : "", "code", status);
    ts_respond_json(conn, status, st);
}

/* ---- daemon callbacks ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
    ts_conn *conn = calloc(1, sizeof(*conn));
    if (!conn)
        return NULL;
    conn->srv = cls;
    conn->mc = mc;
    const char *q = strchr(uri, '?');
    size_t plen = q ? (size_t)(q - uri) : strlen(uri);
    conn->path = strndup(uri, plen);
    conn->query = strdup(q ? q + 1 : "");
    return conn;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)mc;
    (void)toe;
    ts_conn *conn = *con_cls;
    if (!conn)
        return;
    free(conn->path);
    free(conn->query);
    free(conn->body);
    free(conn);
    *con_cls = NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    ts_server *srv = cls;
    (void)url;
    (void)version;
    ts_conn *conn = *con_cls;
    if (!conn || !conn->path || !conn->query)
        return MHD_NO;
    if (!conn->headers_seen) {
        conn->headers_seen = true;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        if (conn->body_len + n + 1 > conn->body_cap) {
            size_t cap = conn->body_cap ? conn->body_cap : 1024;
            while (cap < conn->body_len + n + 1)
                cap *= 2;
            char *nb = realloc(conn->body, cap);
            if (!nb)
                return MHD_NO;
            conn->body = nb;
            conn->body_cap = cap;
        }
        memcpy(conn->body + conn->body_len, upload_data, n);
        conn->body_len += n;
        conn->body[conn->body_len] = '\0';
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (conn->responded)
        return MHD_YES;
    ts_request req = {
        .method = method,
        .path = conn->path,
        .query = conn->query,
        .body = conn->body ? conn->body : "",
        .body_len = conn->body_len,
        .content_type = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type"),
        .authorization = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization"),
        .accept = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Accept"),
    };
    atomic_fetch_add(&srv->nrequests, 1);
    srv->handler(srv, &req, conn, srv->ud);
    if (!conn->responded)
        ts_respond_status(conn, 500, "InternalError", "testsrv: the handler did not respond");
    return conn->responded ? MHD_YES : MHD_NO;
}

/* ---- lifecycle ---- */

ts_server *ts_start(ts_handler handler, void *ud, const ts_pki *pki)
{
    if (!handler)
        return NULL;
    if (pki && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return NULL;
    ts_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return NULL;
    srv->handler = handler;
    srv->ud = ud;
    pthread_mutex_init(&srv->mu, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* Thread per connection: a streaming reader may block on its condvar without stalling other
     * connections. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    if (pki)
        flags |= MHD_USE_TLS;
    if (pki)
        srv->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
            srv, MHD_OPTION_HTTPS_MEM_CERT, pki->cert_pem, MHD_OPTION_HTTPS_MEM_KEY, pki->key_pem,
            MHD_OPTION_HTTPS_PRIORITIES, pki->priorities ? pki->priorities : "NORMAL",
            MHD_OPTION_END);
    else
        srv->daemon =
            MHD_start_daemon(flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_SOCK_ADDR,
                             (struct sockaddr *)&addr, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    if (!srv->daemon)
        goto fail;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (!info || !info->port)
        goto fail_daemon;
    srv->port = info->port;
    snprintf(srv->url, sizeof(srv->url), "%s://127.0.0.1:%d", pki ? "https" : "http", srv->port);
    return srv;
fail_daemon:
    MHD_stop_daemon(srv->daemon);
fail:
    pthread_mutex_destroy(&srv->mu);
    free(srv);
    return NULL;
}

const char *ts_url(const ts_server *srv)
{
    return srv->url;
}

int ts_port(const ts_server *srv)
{
    return srv->port;
}

unsigned ts_request_count(ts_server *srv)
{
    return atomic_load(&srv->nrequests);
}

void ts_stop(ts_server *srv)
{
    if (!srv)
        return;
    /* Wake every blocked stream reader with an abort first: MHD_stop_daemon joins the
     * connection threads and would otherwise wait forever on them. */
    pthread_mutex_lock(&srv->mu);
    srv->stopping = true;
    for (ts_stream *st = srv->streams; st; st = st->next) {
        st->aborted = true;
        pthread_cond_signal(&st->cond);
    }
    pthread_mutex_unlock(&srv->mu);
    MHD_stop_daemon(srv->daemon);
    /* Every response is destroyed now; what is left are streams the user never ended. Their
     * handles become invalid here. */
    pthread_mutex_lock(&srv->mu);
    while (srv->streams) {
        srv->streams->user_ref = false;
        srv->streams->mhd_gone = true;
        stream_unlink_free(srv->streams);
    }
    pthread_mutex_unlock(&srv->mu);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
}

char *ts_query_get(const ts_request *req, const char *name)
{
    size_t nlen = strlen(name);
    const char *p = req->query;
    while (p && *p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            int outlen = 0;
            char *dec = curl_easy_unescape(NULL, p + nlen + 1, (int)(len - nlen - 1), &outlen);
            char *v = dec ? strndup(dec, (size_t)outlen) : NULL;
            curl_free(dec);
            return v;
        }
        if (len == nlen && strncmp(p, name, nlen) == 0)
            return strdup("");
        p = end ? end + 1 : NULL;
    }
    return NULL;
}
