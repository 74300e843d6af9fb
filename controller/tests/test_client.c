/* Tests for kc_client's blocking path against the in-process test server: auth, TLS, errors,
 * retries, rate limiting, timeouts and concurrency. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kc_client.h"
#include "testsrv.h"
#include "tproxy.h"
#include "testsrv_script.h"
#include "testutil.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A config pointing at srv; strings borrowed (the client copies them). */
static kc_config cfg_for(ts_server *srv)
{
    return (kc_config){.server = (char *)ts_url(srv), .source = "test"};
}

static kc_client *client_for(const kc_config *cfg, const kc_client_opts *opts)
{
    kc_client *c = NULL;
    kc_err err;
    kc_code code = kc_client_new(cfg, opts, &c, &err);
    cr_assert_eq(code, KC_OK, "kc_client_new: %s", err.msg);
    return c;
}

static const kc_client_opts fast = {.qps = -1, .backoff_base_ms = 10, .backoff_max_ms = 40};

static kc_code get(kc_client *c, const char *path, kc_response *resp, kc_err *err)
{
    kc_request req = {.method = "GET", .path = path};
    return kc_client_do(c, &req, resp, err);
}

Test(client, get_sends_bearer_token_and_accept)
{
    static const ts_canned ok[] = {{200, NULL, "{\"kind\":\"Node\"}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    cfg.token = "s3cr3t";
    kc_client *c = client_for(&cfg, &fast);
    kc_response resp;
    kc_err err;
    cr_assert_eq(get(c, "/api/v1/nodes/n1?x=1", &resp, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(resp.status, 200);
    cr_assert_str_eq(resp.body, "{\"kind\":\"Node\"}");
    cr_assert_eq(resp.body_len, strlen(resp.body));
    cr_assert_str_eq(resp.content_type, "application/json");
    ts_recorded r = ts_script_get(&sc, 0);
    cr_assert_str_eq(r.method, "GET");
    cr_assert_str_eq(r.path, "/api/v1/nodes/n1");
    cr_assert_str_eq(r.query, "x=1");
    cr_assert_str_eq(r.authorization, "Bearer s3cr3t");
    cr_assert_str_eq(r.accept, "application/json");
    kc_response_free(&resp);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.requests, 1);
    cr_assert_eq(st.retries, 0);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, post_put_send_body_and_content_type)
{
    static const ts_canned ok[] = {{201, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client *c = client_for(&cfg, &fast);
    const char *body = "{\"a\":[1,2]}";
    kc_request post = {.method = "POST", .path = "/x", .body = body, .body_len = strlen(body)};
    cr_assert_eq(kc_client_do(c, &post, NULL, NULL), KC_OK);
    kc_request patch = {.method = "PATCH",
                        .path = "/y",
                        .body = "[]",
                        .body_len = 2,
                        .content_type = "application/json-patch+json",
                        .accept = "application/yaml"};
    cr_assert_eq(kc_client_do(c, &patch, NULL, NULL), KC_OK);
    kc_request put = {.method = "PUT", .path = "/z"};
    cr_assert_eq(kc_client_do(c, &put, NULL, NULL), KC_OK);
    ts_recorded r = ts_script_get(&sc, 0);
    cr_assert_str_eq(r.method, "POST");
    cr_assert_str_eq(r.body, body);
    cr_assert_str_eq(r.content_type, "application/json");
    cr_assert_null(r.authorization);
    r = ts_script_get(&sc, 1);
    cr_assert_str_eq(r.method, "PATCH");
    cr_assert_str_eq(r.body, "[]");
    cr_assert_str_eq(r.content_type, "application/json-patch+json");
    cr_assert_str_eq(r.accept, "application/yaml");
    r = ts_script_get(&sc, 2);
    cr_assert_str_eq(r.method, "PUT");
    cr_assert_str_eq(r.body, "");
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, token_file_rotation_is_picked_up)
{
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    char *path = tu_write_tmp("first-token\n");
    kc_config cfg = cfg_for(srv);
    cfg.token = "static-loses-to-file";
    cfg.token_file = path;
    kc_client *c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/a", NULL, NULL), KC_OK);
    cr_assert_eq(get(c, "/a", NULL, NULL), KC_OK);
    FILE *f = fopen(path, "w");
    fputs("second-token-rotated", f);
    fclose(f);
    cr_assert_eq(get(c, "/a", NULL, NULL), KC_OK);
    cr_assert_str_eq(ts_script_get(&sc, 0).authorization, "Bearer first-token");
    cr_assert_str_eq(ts_script_get(&sc, 1).authorization, "Bearer first-token");
    cr_assert_str_eq(ts_script_get(&sc, 2).authorization, "Bearer second-token-rotated");
    /* A vanished file keeps the last good token rather than failing requests. */
    unlink(path);
    cr_assert_eq(get(c, "/a", NULL, NULL), KC_OK);
    cr_assert_str_eq(ts_script_get(&sc, 3).authorization, "Bearer second-token-rotated");
    kc_client_free(c);
    tu_remove_tmp(path);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, missing_token_file_is_a_config_error)
{
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    cfg.token_file = "/nonexistent/kc-test/token";
    kc_client *c = client_for(&cfg, &fast);
    kc_err err;
    cr_assert_eq(get(c, "/a", NULL, &err), KC_ECONFIG);
    cr_assert(strstr(err.msg, "/nonexistent/kc-test/token"), "%s", err.msg);
    cr_assert_eq(ts_script_count(&sc), 0);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

static void expect_status(int status, const char *reason, const char *message, kc_code want)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"%s\","
             "\"reason\":\"%s\",\"code\":%d}",
             message, reason, status);
    ts_canned resp[] = {{status, NULL, body, NULL}};
    ts_script sc;
    ts_script_init(&sc, resp, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client *c = client_for(&cfg, &fast);
    kc_request req = {
        .method = "POST", .path = "/api/v1/namespaces/ns/pods", .body = "{}", .body_len = 2};
    kc_response resp_out;
    kc_err err;
    cr_assert_eq(kc_client_do(c, &req, &resp_out, &err), want, "got %s", kc_code_name(err.code));
    cr_assert_eq(err.code, want);
    cr_assert_eq(err.http_status, status);
    cr_assert_str_eq(err.reason, reason);
    cr_assert_str_eq(err.msg, message);
    cr_assert_eq(resp_out.status, status);
    cr_assert_str_eq(resp_out.body, body);
    kc_response_free(&resp_out);
    cr_assert_eq(ts_script_count(&sc), 1, "POST must not be retried on %d", status);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, api_errors_keep_reason_and_message)
{
    expect_status(404, "NotFound", "pods not-there not found", KC_ENOTFOUND);
}

Test(client, conflict_versus_already_exists_versus_invalid)
{
    expect_status(409, "Conflict", "the object has been modified", KC_ECONFLICT);
    expect_status(409, "AlreadyExists", "pods already exists", KC_EALREADYEXISTS);
    expect_status(422, "Invalid", "spec.containers: Required value", KC_EINVALID);
    expect_status(500, "InternalError", "etcd is sad", KC_ESERVER);
}

Test(client, retry_after_on_429_is_honoured)
{
    static const ts_canned seq[] = {
        {429, NULL, "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}",
         "Retry-After: 1"},
        {200, NULL, "{\"ok\":true}", NULL}};
    ts_script sc;
    ts_script_init(&sc, seq, 2);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client *c = client_for(&cfg, &fast);
    /* POST too: every method is retried on 429. */
    kc_request req = {.method = "POST", .path = "/p", .body = "{}", .body_len = 2};
    kc_response resp;
    double t0 = now_s();
    cr_assert_eq(kc_client_do(c, &req, &resp, NULL), KC_OK);
    double dt = now_s() - t0;
    cr_assert_geq(dt, 0.95, "waited only %.3f s", dt);
    cr_assert_lt(dt, 5.0);
    cr_assert_str_eq(resp.body, "{\"ok\":true}");
    kc_response_free(&resp);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.requests, 2);
    cr_assert_eq(st.retries, 1);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

/* A server answering seq[0..n) in turn (the last one again after that) and a client for it. */
static kc_client *scripted_client(const ts_canned *seq, size_t n, ts_script *sc, ts_server **srv)
{
    ts_script_init(sc, seq, n);
    *srv = ts_start(ts_script_handler, sc, NULL);
    kc_config cfg = cfg_for(*srv);
    return client_for(&cfg, &fast);
}

Test(client, get_retried_on_503_post_not_retried_on_500)
{
    static const ts_canned seq[] = {{503, "text/plain", "busy", NULL},
                                    {503, "text/plain", "busy", NULL},
                                    {200, NULL, "{}", NULL},
                                    {500, "text/html", "<html>oops</html>", NULL}};
    ts_script sc;
    ts_server *srv;
    kc_client *c = scripted_client(seq, 4, &sc, &srv);
    kc_err err;
    cr_assert_eq(get(c, "/g", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(ts_script_count(&sc), 3);
    kc_request post = {.method = "POST", .path = "/p", .body = "{}", .body_len = 2};
    cr_assert_eq(kc_client_do(c, &post, NULL, &err), KC_ESERVER);
    cr_assert_eq(ts_script_count(&sc), 4);
    /* A non-JSON error body still yields a message with the status and an excerpt. */
    cr_assert(strstr(err.msg, "500"), "%s", err.msg);
    cr_assert(strstr(err.msg, "<html>oops</html>"), "%s", err.msg);
    cr_assert_eq(err.http_status, 500);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

/* The count of rows code/method in c's request table (0 when absent). */
static unsigned long long result_count(kc_client *c, int code, const char *method)
{
    kc_client_result rows[64];
    size_t n = kc_client_results(c, rows, 64);
    for (size_t i = 0; i < n; i++)
        if (rows[i].code == code && !strcmp(rows[i].method, method))
            return rows[i].count;
    return 0;
}

Test(client, requests_counted_by_code_method_and_host)
{
    static const ts_canned seq[] = {{503, "text/plain", "busy", NULL},
                                    {200, NULL, "{}", NULL},
                                    {404, NULL, "{}", NULL},
                                    {500, "text/plain", "oops", NULL}};
    ts_script sc;
    ts_server *srv;
    kc_client *c = scripted_client(seq, 4, &sc, &srv);
    kc_registry *reg = NULL;
    kc_err err;
    cr_assert_eq(kc_registry_new(&reg, &err), KC_OK);
    cr_assert_eq(kc_client_register_metrics(c, reg, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_client_register_metrics(c, reg, &err), KC_EARG);
    cr_assert_eq(get(c, "/g", NULL, &err), KC_OK, "%s", err.msg); /* 503 retried, then 200 */
    cr_assert_eq(get(c, "/missing", NULL, &err), KC_ENOTFOUND);
    kc_request post = {.method = "POST", .path = "/p", .body = "{}", .body_len = 2};
    cr_assert_eq(kc_client_do(c, &post, NULL, &err), KC_ESERVER);
    cr_assert_eq(result_count(c, 503, "GET"), 1);
    cr_assert_eq(result_count(c, 200, "GET"), 1);
    cr_assert_eq(result_count(c, 404, "GET"), 1);
    cr_assert_eq(result_count(c, 500, "POST"), 1);
    cr_assert_eq(result_count(c, 200, "POST"), 0);
    /* client-go's host label: the server URL's host and port. */
    const char *host = strstr(ts_url(srv), "://") + 3;
    cr_assert_str_eq(kc_client_host(c), host);
    char *text = kc_metrics_render(reg);
    char want[256];
    snprintf(want, sizeof(want),
             "rest_client_requests_total{code=\"503\",host=\"%s\",method=\"GET\"} 1\n", host);
    cr_assert(strstr(text, want), "%s", text);
    snprintf(want, sizeof(want),
             "rest_client_requests_total{code=\"500\",host=\"%s\",method=\"POST\"} 1\n", host);
    cr_assert(strstr(text, want), "%s", text);
    cr_assert(strstr(text, "# TYPE rest_client_requests_total counter\n"), "%s", text);
    free(text);
    kc_client_free(c); /* removes its hook: the registry renders without it */
    text = kc_metrics_render(reg);
    cr_assert_not_null(text);
    free(text);
    kc_registry_free(reg);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, url_host_as_client_go_labels_it)
{
    kc_config cfg = {.server = "https://user@api.example.com:6443/prefix?x=1", .source = "test"};
    kc_client *c = client_for(&cfg, &fast);
    cr_assert_str_eq(kc_client_host(c), "api.example.com:6443");
    kc_client_free(c);
    cfg.server = "https://10.0.0.1";
    c = client_for(&cfg, &fast);
    cr_assert_str_eq(kc_client_host(c), "10.0.0.1");
    kc_client_free(c);
}

Test(client, retries_stop_at_max_retries)
{
    static const ts_canned seq[] = {{503, NULL, "", NULL}};
    ts_script sc;
    ts_script_init(&sc, seq, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client_opts o = fast;
    o.max_retries = 2;
    kc_client *c = client_for(&cfg, &o);
    kc_err err;
    cr_assert_eq(get(c, "/g", NULL, &err), KC_EUNAVAILABLE);
    cr_assert(strstr(err.msg, "503"), "%s", err.msg);
    cr_assert_eq(ts_script_count(&sc), 3);
    kc_request once = {.method = "GET", .path = "/g", .no_retry = true};
    cr_assert_eq(kc_client_do(c, &once, NULL, NULL), KC_EUNAVAILABLE);
    cr_assert_eq(ts_script_count(&sc), 4);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

Test(client, connection_refused_is_eio_after_retries)
{
    /* A port that was just listening and is now closed refuses connections. */
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    char url[64];
    snprintf(url, sizeof(url), "%s", ts_url(srv));
    ts_stop(srv);
    ts_script_free(&sc);
    kc_config cfg = {.server = url, .source = "test"};
    kc_client_opts o = fast;
    o.max_retries = 2;
    kc_client *c = client_for(&cfg, &o);
    kc_err err;
    kc_response resp;
    /* Refused means nothing was sent, so even POST is retried. */
    kc_request post = {.method = "POST", .path = "/p", .body = "{}", .body_len = 2};
    cr_assert_eq(kc_client_do(c, &post, &resp, &err), KC_EIO);
    cr_assert_eq(resp.status, 0);
    cr_assert_eq(err.http_status, 0);
    cr_assert(strstr(err.msg, "gave up after 3 attempts"), "%s", err.msg);
    cr_assert(strstr(err.msg, url), "%s", err.msg);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.requests, 3);
    cr_assert_eq(st.retries, 2);
    /* No answer: client-go's "<error>" row, code 0 here. */
    cr_assert_eq(result_count(c, 0, "POST"), 3);
    kc_client_free(c);
}

Test(client, qps_limiter_throttles)
{
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client_opts o = {.qps = 20, .burst = 1};
    kc_client *c = client_for(&cfg, &o);
    double t0 = now_s();
    for (int i = 0; i < 10; i++)
        cr_assert_eq(get(c, "/q", NULL, NULL), KC_OK);
    double dt = now_s() - t0;
    /* 9 waits of 50 ms after the first token. */
    cr_assert_geq(dt, 0.40, "10 calls at 20 qps took only %.3f s", dt);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_geq(st.throttled_ms, 300);
    kc_client_free(c);

    /* Unlimited: no throttling recorded. */
    c = client_for(&cfg, &fast);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(get(c, "/q", NULL, NULL), KC_OK);
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.throttled_ms, 0);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

typedef struct worker {
    kc_client *c;
    int ok;
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 10; i++)
        if (get(w->c, "/c", NULL, NULL) == KC_OK)
            w->ok++;
    return NULL;
}

Test(client, concurrent_requests_share_one_client)
{
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client *c = client_for(&cfg, &fast);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.c = c};
        pthread_create(&t[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].ok, 10);
    }
    cr_assert_eq(ts_script_count(&sc), 40);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
}

static void hang_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    (void)ud;
    ts_stream *st = ts_stream_begin(conn, 200, "application/json");
    if (strcmp(req->path, "/truncated") == 0) {
        ts_stream_write(st, "{\"items\":[", 10);
        ts_stream_abort(st);
    }
    /* "/hang": never written; ts_stop aborts it. */
}

Test(client, timeout_and_truncated_body)
{
    ts_server *srv = ts_start(hang_handler, NULL, NULL);
    kc_config cfg = cfg_for(srv);
    kc_client_opts o = fast;
    o.timeout_ms = 300;
    o.max_retries = 1;
    kc_client *c = client_for(&cfg, &o);
    kc_err err;
    double t0 = now_s();
    cr_assert_eq(get(c, "/hang", NULL, &err), KC_ETIMEDOUT, "%s", err.msg);
    cr_assert_lt(now_s() - t0, 3.0);
    cr_assert(strstr(err.msg, "timed out"), "%s", err.msg);
    kc_client_free(c);
    /* The cut body needs a client that does not time out first: on a loaded machine (or under
     * valgrind) the test server may take longer than 300 ms to send its 10 bytes. */
    o.timeout_ms = 20000;
    c = client_for(&cfg, &o);
    cr_assert_eq(get(c, "/truncated", NULL, &err), KC_EIO, "%s", err.msg);
    cr_assert(strstr(err.msg, "ended early"), "%s", err.msg);
    cr_assert_eq(ts_request_count(srv), 3, "the truncated GET is retried once");
    kc_client_free(c);
    ts_stop(srv);
}

Test(client, tls_with_generated_ca)
{
    ts_pki *pki = ts_pki_generate("kc-test-ca");
    ts_pki *other = ts_pki_generate("kc-other-ca");
    cr_assert(pki && other);
    static const ts_canned ok[] = {{200, NULL, "{\"tls\":1}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    cr_assert_not_null(srv);
    kc_config cfg = cfg_for(srv);
    cfg.ca_pem = pki->ca_pem;
    cfg.token = "tls-token";
    kc_client *c = client_for(&cfg, &fast);
    kc_response resp;
    kc_err err;
    cr_assert_eq(get(c, "/t", &resp, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(resp.body, "{\"tls\":1}");
    kc_response_free(&resp);
    cr_assert_str_eq(ts_script_get(&sc, 0).authorization, "Bearer tls-token");
    kc_client_free(c);

    /* The SAN holds localhost too: verifying under that name works. */
    cfg.tls_server_name = "localhost";
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/t", NULL, &err), KC_OK, "%s", err.msg);
    kc_client_free(c);

    /* A name the certificate does not carry fails verification. */
    cfg.tls_server_name = "not-in-the-cert.example";
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/t", NULL, &err), KC_ETLS, "%s", err.msg);
    kc_client_free(c);
    cfg.tls_server_name = NULL;

    /* The wrong CA fails, TLS errors are not retried, and the message says why. */
    cfg.ca_pem = other->ca_pem;
    c = client_for(&cfg, &fast);
    size_t before = ts_script_count(&sc);
    cr_assert_eq(get(c, "/t", NULL, &err), KC_ETLS);
    cr_assert(strstr(err.msg, "certificate"), "%s", err.msg);
    cr_assert(strstr(err.msg, "configured CA"), "%s", err.msg);
    cr_assert_eq(ts_script_count(&sc), before);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.retries, 0);
    kc_client_free(c);

    /* insecure-skip-tls-verify accepts any certificate. */
    cfg.insecure_skip_tls_verify = true;
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/t", NULL, &err), KC_OK, "%s", err.msg);
    kc_client_free(c);

    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
    ts_pki_free(other);
}

Test(client, new_rejects_bad_config)
{
    kc_client *c = (kc_client *)1;
    kc_err err;
    cr_assert_eq(kc_client_new(NULL, NULL, &c, &err), KC_EARG);
    kc_config cfg = {.server = "ftp://example", .source = "/tmp/kubeconfig"};
    cr_assert_eq(kc_client_new(&cfg, NULL, &c, &err), KC_ECONFIG);
    cr_assert_null(c);
    cr_assert(strstr(err.msg, "ftp://example") && strstr(err.msg, "/tmp/kubeconfig"), "%s",
              err.msg);
    cfg.server = NULL;
    cr_assert_eq(kc_client_new(&cfg, NULL, &c, &err), KC_ECONFIG);
    cfg.server = "http://127.0.0.1:1";
    cr_assert_eq(kc_client_new(&cfg, NULL, &c, &err), KC_OK);
    kc_request bad = {.method = "GET", .path = "no-slash"};
    cr_assert_eq(kc_client_do(c, &bad, NULL, &err), KC_EARG);
    cr_assert_eq(kc_client_do(c, NULL, NULL, &err), KC_EARG);
    kc_client_free(c);
    kc_client_free(NULL);
}

Test(client, status_decode_variants)
{
    kc_err err;
    const char *s = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429,"
                    "\"details\":{\"retryAfterSeconds\":7}}";
    cr_assert_eq(kc_status_decode(429, s, strlen(s), &err), KC_ETOOMANYREQUESTS);
    cr_assert_eq(err.retry_after_s, 7);
    cr_assert(strstr(err.msg, "429"), "%s", err.msg);

    s = "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"details\":{\"kind\":\"Pod\","
        "\"name\":\"p\",\"causes\":[{\"field\":\"spec.x\",\"message\":\"Required value\"}]}}";
    cr_assert_eq(kc_status_decode(422, s, strlen(s), &err), KC_EINVALID);
    cr_assert(strstr(err.msg, "Pod p") && strstr(err.msg, "spec.x Required value"), "%s", err.msg);

    /* A watch ERROR event: no HTTP status, the code comes from the object. */
    json_t *j = json_pack("{s:s, s:s, s:i, s:s}", "kind", "Status", "reason", "Expired", "code",
                          410, "message", "too old resource version: 1 (5)");
    cr_assert_eq(kc_status_from_json(0, j, &err), KC_EEXPIRED);
    cr_assert_eq(err.http_status, 410);
    cr_assert_str_eq(err.msg, "too old resource version: 1 (5)");
    cr_assert_str_eq(err.reason, "Expired");
    json_decref(j);

    cr_assert_eq(kc_status_decode(502, NULL, 0, &err), KC_ESERVER);
    cr_assert(strstr(err.msg, "502") && strstr(err.msg, "empty"), "%s", err.msg);
    cr_assert_eq(kc_status_decode(418, "\x01\x02garbage\n", 10, &err), KC_EHTTP);
    cr_assert(strstr(err.msg, "418") && strstr(err.msg, "garbage"), "%s", err.msg);
    cr_assert_eq(kc_status_decode(404, "{\"truncated\":", 13, &err), KC_ENOTFOUND);
    cr_assert_eq(kc_status_decode(404, "[1,2]", 5, &err), KC_ENOTFOUND);
    cr_assert_eq(kc_status_decode(200, "whatever", 8, &err), KC_OK);
    cr_assert_eq(err.code, KC_OK);
    cr_assert_eq(kc_status_decode(409, "{\"reason\":\"AlreadyExists\"}", 26, NULL),
                 KC_EALREADYEXISTS);
}

/* Hardened API servers accept TLS 1.3 only (--tls-min-version=VersionTLS13). */
Test(client, tls13_only_server_is_reached)
{
    ts_pki *pki = ts_pki_generate("tls13-ca");
    cr_assert_not_null(pki);
    pki->priorities = "NORMAL:-VERS-ALL:+VERS-TLS1.3";
    static const ts_canned ok[] = {{200, NULL, "{\"v\":13}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    cr_assert_not_null(srv);
    kc_config cfg = cfg_for(srv);
    cfg.ca_pem = pki->ca_pem;
    kc_client *c = client_for(&cfg, &fast);
    kc_response resp;
    kc_err err;
    cr_assert_eq(get(c, "/v", &resp, &err), KC_OK, "%s", err.msg);
    cr_assert_str_eq(resp.body, "{\"v\":13}");
    kc_response_free(&resp);
    kc_client_free(c);
    ts_stop(srv);
    /* The same server limited to TLS 1.0 is refused: the client's floor is TLS 1.2. */
    pki->priorities = "NORMAL:-VERS-ALL:+VERS-TLS1.0";
    srv = ts_start(ts_script_handler, &sc, pki);
    cr_assert_not_null(srv);
    cfg = cfg_for(srv);
    cfg.ca_pem = pki->ca_pem;
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/v", NULL, &err), KC_ETLS, "%s", err.msg);
    cr_assert(strstr(err.msg, "TLS handshake"), "%s", err.msg);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
}

/* proxy-url: requests go through the proxy's CONNECT tunnel, TLS verified end to end; a loopback
 * server is never proxied through HTTPS_PROXY (as client-go); a dead proxy is named. */
Test(client, proxy_url_tunnels_through_a_connect_proxy)
{
    ts_pki *pki = ts_pki_generate("proxy-ca");
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    tproxy *px = tproxy_start();
    cr_assert(pki && srv && px);
    kc_config cfg = cfg_for(srv);
    cfg.ca_pem = pki->ca_pem;
    cfg.proxy_url = (char *)tproxy_url(px);
    kc_client *c = client_for(&cfg, &fast);
    kc_err err;
    cr_assert_eq(get(c, "/p", NULL, &err), KC_OK, "%s", err.msg);
    char last[300], want[64];
    cr_assert_eq(tproxy_tunnels(px, last, sizeof(last)), 1);
    snprintf(want, sizeof(want), "127.0.0.1:%d", ts_port(srv));
    cr_assert_str_eq(last, want);
    kc_client_free(c);

    cfg.proxy_url = NULL;
    setenv("HTTPS_PROXY", tproxy_url(px), 1);
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/p", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(tproxy_tunnels(px, NULL, 0), 1, "a loopback server is reached directly");
    kc_client_free(c);
    unsetenv("HTTPS_PROXY");
    tproxy_stop(px);

    cfg.proxy_url = "http://127.0.0.1:1";
    kc_client_opts o = fast;
    o.max_retries = -1;
    c = client_for(&cfg, &o);
    cr_assert_eq(get(c, "/p", NULL, &err), KC_EIO, "%s", err.msg);
    cr_assert(strstr(err.msg, "127.0.0.1:1"), "%s", err.msg);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
}

/* ---- exec credential plugins ---- */

/* Answers 200 to "Bearer <accept>", 401 to anything else. */
typedef struct auth_state {
    pthread_mutex_t mu;
    char accept[64];
    int refused;
} auth_state;

static void auth_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    auth_state *a = ud;
    char want[80];
    pthread_mutex_lock(&a->mu);
    snprintf(want, sizeof(want), "Bearer %s", a->accept);
    bool ok = req->authorization && !strcmp(req->authorization, want);
    if (!ok)
        a->refused++;
    pthread_mutex_unlock(&a->mu);
    if (ok)
        ts_respond(conn, 200, "application/json", "{}", NULL);
    else
        ts_respond_status(conn, 401, "Unauthorized", "Unauthorized");
}

static int plugin_runs(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/count", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        fclose(f);
    }
    return n;
}

/* A kubeconfig for srv whose user runs dir/plugin (which prints "tok-<run number>"). */
static kc_config *exec_config(ts_server *srv, const char *dir, const char *expiry)
{
    char path[512], script[1024], kc[2048];
    snprintf(path, sizeof(path), "%s/plugin", dir);
    snprintf(script, sizeof(script),
             "#!/bin/sh\n"
             "n=$(cat '%s/count' 2>/dev/null || echo 0); n=$((n + 1)); echo $n >'%s/count'\n"
             "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
             "\"ExecCredential\",\"status\":{\"token\":\"tok-%%s\"%s}}' $n\n",
             dir, dir, expiry);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(script, f);
    fclose(f);
    chmod(path, 0700);
    snprintf(kc, sizeof(kc),
             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
             "clusters: [{name: c, cluster: {server: \"%s\"}}]\n"
             "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
             "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
             "command: \"%s\", interactiveMode: Never}}}]\n",
             ts_url(srv), path);
    kc_config *cfg = NULL;
    kc_err err;
    cr_assert_eq(kc_config_parse_kubeconfig(kc, strlen(kc), NULL, NULL, &cfg, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_not_null(cfg->exec);
    return cfg;
}

Test(client, exec_plugin_token_cached_and_renewed_after_401)
{
    char dir[] = "/tmp/kcexec.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    static auth_state a = {.mu = PTHREAD_MUTEX_INITIALIZER, .accept = "tok-1"};
    ts_server *srv = ts_start(auth_handler, &a, NULL);
    kc_config *cfg = exec_config(srv, dir, "");
    kc_client *c = client_for(cfg, &fast);
    kc_err err;
    cr_assert_eq(get(c, "/a", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(get(c, "/b", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(plugin_runs(dir), 1, "the token is cached: one run for two requests");
    /* The server rotates: the cached token is refused once, the plugin runs again, the request
     * goes through with the new token. */
    pthread_mutex_lock(&a.mu);
    snprintf(a.accept, sizeof(a.accept), "tok-2");
    pthread_mutex_unlock(&a.mu);
    cr_assert_eq(get(c, "/c", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(plugin_runs(dir), 2);
    cr_assert_eq(a.refused, 1);
    /* A server that refuses the fresh token too: the 401 reaches the caller, one re-run only. */
    pthread_mutex_lock(&a.mu);
    snprintf(a.accept, sizeof(a.accept), "nobody");
    pthread_mutex_unlock(&a.mu);
    cr_assert_eq(get(c, "/d", NULL, &err), KC_EUNAUTHORIZED, "%s", err.msg);
    cr_assert_eq(plugin_runs(dir), 3);
    kc_client_free(c);
    kc_config_free(cfg);
    ts_stop(srv);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(client, exec_plugin_runs_again_once_its_credential_expired)
{
    char dir[] = "/tmp/kcexec.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    static auth_state a = {.mu = PTHREAD_MUTEX_INITIALIZER, .accept = "tok-1"};
    ts_server *srv = ts_start(auth_handler, &a, NULL);
    /* Already expired when it is issued: every request needs a fresh one. */
    kc_config *cfg = exec_config(srv, dir, ",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"");
    kc_client *c = client_for(cfg, &fast);
    kc_err err;
    cr_assert_eq(get(c, "/a", NULL, &err), KC_OK, "%s", err.msg);
    pthread_mutex_lock(&a.mu);
    snprintf(a.accept, sizeof(a.accept), "tok-2");
    pthread_mutex_unlock(&a.mu);
    cr_assert_eq(get(c, "/b", NULL, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(plugin_runs(dir), 2);
    cr_assert_eq(a.refused, 0, "an expired credential is never sent");
    kc_client_free(c);
    kc_config_free(cfg);
    /* A plugin that fails: the request is not sent, the error names the command. */
    cfg = exec_config(srv, dir, "");
    char path[600];
    snprintf(path, sizeof(path), "%s/plugin", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("#!/bin/sh\necho 'no credentials' >&2\nexit 3\n", f);
    fclose(f);
    c = client_for(cfg, &fast);
    unsigned before = ts_request_count(srv);
    cr_assert_neq(get(c, "/c", NULL, &err), KC_OK);
    cr_assert(strstr(err.msg, "plugin"), "%s", err.msg);
    cr_assert_eq(ts_request_count(srv), before, "nothing sent without a credential");
    kc_client_free(c);
    kc_config_free(cfg);
    ts_stop(srv);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A CA file named by the kubeconfig is read again when it changes (a rotated CA): a wrong CA
 * fails verification, the right one written over it is used by the next requests. */
Test(client, ca_file_read_again_when_it_changes)
{
    ts_pki *pki = ts_pki_generate("rotated-ca");
    ts_pki *other = ts_pki_generate("old-ca");
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    cr_assert(pki && other && srv);
    char dir[] = "/tmp/kcca.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char ca[512], kc[2048];
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    FILE *f = fopen(ca, "w");
    cr_assert_not_null(f);
    fputs(other->ca_pem, f);
    fclose(f);
    snprintf(kc, sizeof(kc),
             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
             "clusters: [{name: c, cluster: {server: \"%s\", certificate-authority: \"%s\"}}]\n"
             "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
             "users: [{name: u, user: {token: t}}]\n",
             ts_url(srv), ca);
    kc_config *cfg = NULL;
    kc_err err;
    cr_assert_eq(kc_config_parse_kubeconfig(kc, strlen(kc), NULL, NULL, &cfg, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_str_eq(cfg->ca_file, ca);
    kc_client_opts o = fast;
    o.max_retries = -1;
    kc_client *c = client_for(cfg, &o);
    cr_assert_eq(get(c, "/a", NULL, &err), KC_ETLS, "%s", err.msg);
    f = fopen(ca, "w");
    cr_assert_not_null(f);
    fputs(pki->ca_pem, f);
    fclose(f);
    usleep(1100000); /* files are looked at once a second at most */
    cr_assert_eq(get(c, "/b", NULL, &err), KC_OK, "%s", err.msg);
    kc_client_free(c);
    kc_config_free(cfg);
    unlink(ca);
    rmdir(dir);
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
    ts_pki_free(other);
}

Test(client, client_certificate_blobs)
{
    ts_pki *pki = ts_pki_generate("cert-ca");
    static const ts_canned ok[] = {{200, NULL, "{}", NULL}};
    ts_script sc;
    ts_script_init(&sc, ok, 1);
    ts_server *srv = ts_start(ts_script_handler, &sc, pki);
    kc_config cfg = cfg_for(srv);
    cfg.ca_pem = pki->ca_pem;
    /* A well-formed pair is loaded (the test server does not ask for it, so it is unused). */
    cfg.client_cert_pem = pki->cert_pem;
    cfg.client_key_pem = pki->key_pem;
    cfg.client_key_pem_len = strlen(pki->key_pem);
    kc_client *c = client_for(&cfg, &fast);
    kc_err err;
    cr_assert_eq(get(c, "/c", NULL, &err), KC_OK, "%s", err.msg);
    kc_client_free(c);
    /* A key that is not PEM fails the handshake setup with a TLS error naming the source. */
    cfg.client_key_pem = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n";
    cfg.client_key_pem_len = 0;
    c = client_for(&cfg, &fast);
    cr_assert_eq(get(c, "/c", NULL, &err), KC_ETLS, "got %s: %s", kc_code_name(err.code), err.msg);
    cr_assert(strstr(err.msg, "client certificate"), "%s", err.msg);
    kc_client_free(c);
    ts_stop(srv);
    ts_script_free(&sc);
    ts_pki_free(pki);
}
