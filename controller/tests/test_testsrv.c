/* Tests for the in-process test server itself, driven with plain libcurl easy handles. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testsrv.h"

typedef struct buf {
    char *data;
    size_t len;
} buf;

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    buf *b = ud;
    char *nd = realloc(b->data, b->len + size * n + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, p, size * n);
    b->data = nd;
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* Performs one request; returns the curl result, fills *status and the body. */
static CURLcode fetch(const char *url, const char *method, const char *body, const char *ca,
                      long *status, buf *out)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/x-test");
    hdrs = curl_slist_append(hdrs, "Authorization: Bearer abc");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    if (method)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (ca) {
        struct curl_blob blob = {.data = (void *)ca, .len = strlen(ca), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return rc;
}

typedef struct seen {
    char method[16];
    char path[128];
    char query[256];
    char body[256];
    char ctype[64];
    char auth[64];
    char *selector;
} seen;

static void echo_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    seen *s = ud;
    snprintf(s->method, sizeof(s->method), "%s", req->method);
    snprintf(s->path, sizeof(s->path), "%s", req->path);
    snprintf(s->query, sizeof(s->query), "%s", req->query);
    snprintf(s->body, sizeof(s->body), "%s", req->body);
    snprintf(s->ctype, sizeof(s->ctype), "%s", req->content_type ? req->content_type : "");
    snprintf(s->auth, sizeof(s->auth), "%s", req->authorization ? req->authorization : "");
    free(s->selector);
    s->selector = ts_query_get(req, "labelSelector");
    if (strcmp(req->path, "/missing") == 0)
        ts_respond_status(conn, 404, "NotFound", "nodes \"x\" not found");
    else if (strcmp(req->path, "/silent") == 0)
        return; /* the server must answer 500 on the handler's behalf */
    else
        ts_respond(conn, 201, "text/plain", "hello", "X-Test: yes\nRetry-After: 3");
}

Test(testsrv, request_fields_reach_the_handler)
{
    seen s = {0};
    ts_server *srv = ts_start(echo_handler, &s, NULL);
    cr_assert_not_null(srv);
    cr_assert_gt(ts_port(srv), 0);
    char url[256];
    snprintf(url, sizeof(url), "%s/api/v1/pods?labelSelector=app%%3Dweb%%2Cx&limit=5", ts_url(srv));
    long status = 0;
    buf b = {0};
    cr_assert_eq(fetch(url, "PATCH", "{\"a\":1}", NULL, &status, &b), CURLE_OK);
    cr_assert_eq(status, 201);
    cr_assert_str_eq(b.data, "hello");
    cr_assert_str_eq(s.method, "PATCH");
    cr_assert_str_eq(s.path, "/api/v1/pods");
    cr_assert_str_eq(s.query, "labelSelector=app%3Dweb%2Cx&limit=5");
    cr_assert_str_eq(s.selector, "app=web,x");
    cr_assert_str_eq(s.body, "{\"a\":1}");
    cr_assert_str_eq(s.ctype, "application/x-test");
    cr_assert_str_eq(s.auth, "Bearer abc");
    cr_assert_eq(ts_request_count(srv), 1);
    free(b.data);
    b = (buf){0};

    snprintf(url, sizeof(url), "%s/missing", ts_url(srv));
    cr_assert_eq(fetch(url, NULL, NULL, NULL, &status, &b), CURLE_OK);
    cr_assert_eq(status, 404);
    cr_assert(strstr(b.data, "\"reason\":\"NotFound\""));
    cr_assert(strstr(b.data, "\"code\":404"));
    cr_assert_str_eq(s.query, "");
    cr_assert_null(s.selector);
    free(b.data);
    b = (buf){0};

    snprintf(url, sizeof(url), "%s/silent", ts_url(srv));
    cr_assert_eq(fetch(url, NULL, NULL, NULL, &status, &b), CURLE_OK);
    cr_assert_eq(status, 500);
    free(b.data);
    cr_assert_eq(ts_request_count(srv), 3);
    ts_stop(srv);
    free(s.selector);
}

typedef struct streamer {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ts_stream *st;
    bool abort;
} streamer;

static void stream_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    (void)req;
    streamer *sm = ud;
    ts_stream *st = ts_stream_begin(conn, 200, "application/json");
    pthread_mutex_lock(&sm->mu);
    sm->st = st;
    pthread_cond_signal(&sm->cond);
    pthread_mutex_unlock(&sm->mu);
}

static void *feeder(void *arg)
{
    streamer *sm = arg;
    pthread_mutex_lock(&sm->mu);
    while (!sm->st)
        pthread_cond_wait(&sm->cond, &sm->mu);
    pthread_mutex_unlock(&sm->mu);
    ts_stream_write(sm->st, "one,", 4);
    usleep(20000);
    ts_stream_write(sm->st, "two,", 4);
    usleep(20000);
    ts_stream_write(sm->st, "three", 5);
    if (sm->abort)
        ts_stream_abort(sm->st);
    else
        ts_stream_end(sm->st);
    return NULL;
}

static void run_stream(bool abort)
{
    streamer sm = {.abort = abort};
    pthread_mutex_init(&sm.mu, NULL);
    pthread_cond_init(&sm.cond, NULL);
    ts_server *srv = ts_start(stream_handler, &sm, NULL);
    cr_assert_not_null(srv);
    pthread_t t;
    pthread_create(&t, NULL, feeder, &sm);
    long status = 0;
    buf b = {0};
    CURLcode rc = fetch(ts_url(srv), NULL, NULL, NULL, &status, &b);
    pthread_join(t, NULL);
    cr_assert_eq(status, 200);
    cr_assert_str_eq(b.data, "one,two,three", "got %s", b.data);
    if (abort)
        cr_assert(rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR, "rc %d", rc);
    else
        cr_assert_eq(rc, CURLE_OK);
    free(b.data);
    ts_stop(srv);
    pthread_cond_destroy(&sm.cond);
    pthread_mutex_destroy(&sm.mu);
}

Test(testsrv, stream_end_delivers_every_write)
{
    run_stream(false);
}

Test(testsrv, stream_abort_cuts_after_queued_data)
{
    run_stream(true);
}

static void *stopper(void *arg)
{
    usleep(100000);
    ts_stop(arg);
    return NULL;
}

Test(testsrv, stop_with_an_open_stream_does_not_hang)
{
    streamer sm = {0};
    pthread_mutex_init(&sm.mu, NULL);
    pthread_cond_init(&sm.cond, NULL);
    ts_server *srv = ts_start(stream_handler, &sm, NULL);
    cr_assert_not_null(srv);
    /* The stopper frees srv (and its URL) while the request runs: keep a copy. */
    char url[256];
    snprintf(url, sizeof(url), "%s", ts_url(srv));
    pthread_t t;
    pthread_create(&t, NULL, stopper, srv);
    long status = 0;
    buf b = {0};
    CURLcode rc = fetch(url, NULL, NULL, NULL, &status, &b);
    pthread_join(t, NULL);
    cr_assert_neq(rc, CURLE_OK);
    cr_assert_neq(rc, CURLE_OPERATION_TIMEDOUT);
    free(b.data);
    pthread_cond_destroy(&sm.cond);
    pthread_mutex_destroy(&sm.mu);
}

Test(testsrv, tls_with_generated_ca)
{
    ts_pki *pki = ts_pki_generate("test-ca");
    ts_pki *other = ts_pki_generate("other-ca");
    cr_assert_not_null(pki);
    cr_assert_not_null(other);
    cr_assert(strstr(pki->ca_pem, "BEGIN CERTIFICATE"));
    cr_assert(strstr(pki->key_pem, "PRIVATE KEY"));
    seen s = {0};
    ts_server *srv = ts_start(echo_handler, &s, pki);
    cr_assert_not_null(srv);
    cr_assert_eq(strncmp(ts_url(srv), "https://127.0.0.1:", 18), 0);
    long status = 0;
    buf b = {0};
    cr_assert_eq(fetch(ts_url(srv), NULL, NULL, pki->ca_pem, &status, &b), CURLE_OK);
    cr_assert_eq(status, 201);
    cr_assert_str_eq(b.data, "hello");
    free(b.data);
    b = (buf){0};
    cr_assert_eq(fetch(ts_url(srv), NULL, NULL, other->ca_pem, &status, &b),
                 CURLE_PEER_FAILED_VERIFICATION);
    free(b.data);
    ts_stop(srv);
    ts_pki_free(pki);
    ts_pki_free(other);
    free(s.selector);
}
