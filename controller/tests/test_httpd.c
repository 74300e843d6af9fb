/* Tests for kc_httpd: address parsing, /metrics, /healthz, /readyz, 404/405, bind errors,
 * keep-alive, concurrent scrapes, dual stack and stopping. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kc_httpd.h"
#include "kc_metrics.h"

typedef struct reply {
    long status;
    char *body;
    size_t len;
    char ctype[128];
    char allow[64];
    curl_off_t content_length; /* the Content-Length header's value, -1 when there was none */
} reply;

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t add = size * n;
    char *nb = realloc(r->body, r->len + add + 1);
    if (!nb)
        return 0;
    memcpy(nb + r->len, data, add);
    r->len += add;
    nb[r->len] = '\0';
    r->body = nb;
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t len = size * n;
    char line[256];
    size_t l = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
    memcpy(line, data, l);
    line[l] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (strncasecmp(line, "Content-Type: ", 14) == 0)
        snprintf(r->ctype, sizeof(r->ctype), "%s", line + 14);
    if (strncasecmp(line, "Allow: ", 7) == 0)
        snprintf(r->allow, sizeof(r->allow), "%s", line + 7);
    return len;
}

/* Requests url on c (which keeps its connection for the next request) into *r. Asserts nothing,
 * so that other threads may call it. */
static CURLcode perform(CURL *c, const char *url, reply *r)
{
    *r = (reply){.body = calloc(1, 1), .content_length = -1};
    if (!r->body)
        return CURLE_OUT_OF_MEMORY;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &r->content_length);
    }
    return cc;
}

/* Requests host:port/path with the given method; the reply's body is "" when none came. */
static reply request(const char *method, const char *host, int port, const char *path)
{
    reply r;
    char url[256];
    snprintf(url, sizeof(url), "http://%s:%d%s", host, port, path);
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "x=1");
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode cc = perform(c, url, &r);
    cr_assert_eq(cc, CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(cc));
    curl_easy_cleanup(c);
    return r;
}

static reply get(kc_httpd *h, const char *path)
{
    return request("GET", "127.0.0.1", kc_httpd_port(h), path);
}

static void reply_free(reply *r)
{
    free(r->body);
}

static kc_registry *reg;
static kc_httpd *srv;
static atomic_int ready_state; /* 0: not ready with reason, 1: ready, 2: not ready, no reason */
static atomic_int live_state = 1;

static bool ready_cb(void *ud, char *reason, size_t size)
{
    cr_assert_eq(ud, &ready_state);
    int s = atomic_load(&ready_state);
    if (s == 0)
        snprintf(reason, size, "informers not synced: %s", "nodes");
    return s == 1;
}

static bool live_cb(void *ud, char *reason, size_t size)
{
    if (atomic_load(&live_state))
        return true;
    snprintf(reason, size, "watch loop stalled");
    return false;
}

static void setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    cr_assert_eq(kc_registry_new(&reg, NULL), KC_OK);
    kc_metric *m;
    cr_assert_eq(
        kc_metrics_counter(reg, "reconciles_total", "Reconciles.", KC_LABELS("result"), &m, NULL),
        KC_OK);
    kc_counter_add(kc_metric_with(m, KC_LABELS("ok")), 7);
    atomic_store(&ready_state, 0);
    atomic_store(&live_state, 1);
    kc_httpd_opts o = {.addr = "127.0.0.1:0",
                       .registry = reg,
                       .ready = ready_cb,
                       .ready_ud = &ready_state,
                       .live = live_cb};
    kc_err e = {0};
    cr_assert_eq(kc_httpd_start(&o, &srv, &e), KC_OK, "%s", e.msg);
    cr_assert_gt(kc_httpd_port(srv), 0);
}

static void teardown(void)
{
    kc_httpd_stop(srv);
    srv = NULL;
    kc_registry_free(reg);
    reg = NULL;
    curl_global_cleanup();
}

TestSuite(httpd, .init = setup, .fini = teardown);

Test(httpd, serves_metrics_text_format)
{
    reply r = get(srv, "/metrics");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    cr_assert_str_eq(r.body, "# HELP reconciles_total Reconciles.\n"
                             "# TYPE reconciles_total counter\n"
                             "reconciles_total{result=\"ok\"} 7\n");
    reply_free(&r);
    /* Each scrape renders the current values; a query string does not change the route. */
    kc_counter_inc(kc_metric_with(NULL, NULL)); /* no-op, must not crash */
    kc_metric *g;
    cr_assert_eq(kc_metrics_gauge(reg, "up", "", NULL, &g, NULL), KC_OK);
    kc_gauge_set(kc_metric_with(g, NULL), 1);
    r = get(srv, "/metrics?debug=1");
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "\nup 1\n") != NULL, "%s", r.body);
    reply_free(&r);
}

Test(httpd, head_has_no_body)
{
    reply r = request("HEAD", "127.0.0.1", kc_httpd_port(srv), "/metrics");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "");
    cr_assert_str_eq(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    /* The headers a GET would get, Content-Length included. */
    reply g = get(srv, "/metrics");
    cr_assert_gt(g.content_length, 0);
    cr_assert_eq(r.content_length, g.content_length);
    reply_free(&g);
    reply_free(&r);
}

Test(httpd, healthz_follows_liveness_check)
{
    reply r = get(srv, "/healthz");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    reply_free(&r);
    atomic_store(&live_state, 0);
    r = get(srv, "/healthz");
    cr_assert_eq(r.status, 500);
    cr_assert_str_eq(r.body, "watch loop stalled");
    reply_free(&r);
}

Test(httpd, readyz_follows_readiness_check)
{
    reply r = get(srv, "/readyz");
    cr_assert_eq(r.status, 503);
    cr_assert_str_eq(r.body, "informers not synced: nodes");
    cr_assert_str_eq(r.ctype, "text/plain; charset=utf-8");
    reply_free(&r);
    atomic_store(&ready_state, 2);
    r = get(srv, "/readyz");
    cr_assert_eq(r.status, 503);
    cr_assert_str_eq(r.body, "not ready");
    reply_free(&r);
    atomic_store(&ready_state, 1);
    r = get(srv, "/readyz");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    reply_free(&r);
}

Test(httpd, unknown_paths_and_methods)
{
    const char *paths[] = {"/", "/metricsx", "/metrics/", "/healthz/extra", "/READYZ"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        reply r = get(srv, paths[i]);
        cr_assert_eq(r.status, 404, "%s gave %ld", paths[i], r.status);
        reply_free(&r);
    }
    const char *methods[] = {"POST", "PUT", "DELETE", "PATCH"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        reply r = request(methods[i], "127.0.0.1", kc_httpd_port(srv), "/metrics");
        cr_assert_eq(r.status, 405, "%s gave %ld", methods[i], r.status);
        cr_assert_str_eq(r.allow, "GET, HEAD");
        reply_free(&r);
    }
    /* The server still answers after refusing those. */
    reply r = get(srv, "/healthz");
    cr_assert_eq(r.status, 200);
    reply_free(&r);
}

Test(httpd, defaults_without_registry_or_checks)
{
    kc_httpd *h;
    kc_err e = {0};
    kc_httpd_opts o = {.addr = ":0"};
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_OK, "%s", e.msg);
    reply r = request("GET", "127.0.0.1", kc_httpd_port(h), "/metrics");
    cr_assert_eq(r.status, 404);
    reply_free(&r);
    r = request("GET", "127.0.0.1", kc_httpd_port(h), "/readyz");
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    reply_free(&r);
    r = request("GET", "localhost", kc_httpd_port(h), "/healthz");
    cr_assert_eq(r.status, 200);
    reply_free(&r);
    kc_httpd_stop(h);
    kc_httpd_stop(NULL);
}

Test(httpd, port_in_use_is_an_io_error)
{
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", kc_httpd_port(srv));
    kc_httpd *h = NULL;
    kc_err e = {0};
    kc_httpd_opts o = {.addr = addr};
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_EIO);
    cr_assert_null(h);
    cr_assert(strstr(e.msg, addr) != NULL, "%s", e.msg);
    cr_assert(strstr(e.msg, "in use") != NULL, "%s", e.msg);
    o.addr = "127.0.0.1:http";
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_EARG);
    cr_assert_eq(kc_httpd_start(NULL, &h, &e), KC_EARG);
}

Test(httpd, parse_addr)
{
    char host[64];
    int port = -1;
    kc_err e = {0};
    cr_assert_eq(kc_httpd_parse_addr(":8080", host, sizeof(host), &port, &e), KC_OK);
    cr_assert_str_eq(host, "");
    cr_assert_eq(port, 8080);
    cr_assert_eq(kc_httpd_parse_addr("127.0.0.1:0", host, sizeof(host), &port, &e), KC_OK);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 0);
    cr_assert_eq(kc_httpd_parse_addr("[::1]:9090", host, sizeof(host), &port, &e), KC_OK);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 9090);
    cr_assert_eq(kc_httpd_parse_addr("metrics.local:65535", host, sizeof(host), &port, &e), KC_OK);
    cr_assert_str_eq(host, "metrics.local");
    cr_assert_eq(port, 65535);

    static const struct {
        const char *addr, *needle;
    } bad[] = {
        {"", "expected host:port"},
        {"8080", "expected host:port"},
        {"localhost:", "port is missing"},
        {":http", "not a number"},
        {":80a", "not a number"},
        {":-1", "not a number"},
        {":65536", "out of range"},
        {":99999999999999999999", "out of range"},
        {"::1:80", "brackets"},
        {"[::1:80", "closing ']'"},
        {"[::1]80", "closing ']'"},
        {"[]:80", "empty brackets"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kc_err_clear(&e);
        cr_assert_eq(kc_httpd_parse_addr(bad[i].addr, host, sizeof(host), &port, &e), KC_EARG,
                     "\"%s\" accepted", bad[i].addr);
        cr_assert(strstr(e.msg, bad[i].needle) != NULL, "\"%s\": %s", bad[i].addr, e.msg);
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i].addr);
        cr_assert(strstr(e.msg, quoted) != NULL, "message does not name the address: %s", e.msg);
    }
    char tiny[4];
    cr_assert_eq(kc_httpd_parse_addr("abcd:1", tiny, sizeof(tiny), &port, &e), KC_EARG);
    cr_assert(strstr(e.msg, "too long") != NULL, "%s", e.msg);
    cr_assert_eq(kc_httpd_parse_addr(NULL, host, sizeof(host), &port, &e), KC_EARG);
}

Test(httpd, keeps_connections_alive)
{
    /* Scrapers and probes reuse their connection: one connection serves every request, HEAD and
     * a 404 included. */
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    const char *paths[] = {"/metrics", "/healthz", "/nothing", "/readyz", "/metrics"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        char url[128];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", kc_httpd_port(srv), paths[i]);
        curl_easy_setopt(c, CURLOPT_NOBODY, i == 4 ? 1L : 0L);
        reply r;
        CURLcode cc = perform(c, url, &r);
        cr_assert_eq(cc, CURLE_OK, "%s: %s", url, curl_easy_strerror(cc));
        cr_assert_neq(r.status, 0);
        long connects = -1;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        cr_assert_eq(connects, i == 0 ? 1 : 0, "request %zu to %s opened %ld connections", i,
                     paths[i], connects);
        reply_free(&r);
    }
    curl_easy_cleanup(c);
}

#define SCRAPERS     8
#define SCRAPES_EACH 25
#define EXPECTED_METRICS                                                                           \
    "# HELP reconciles_total Reconciles.\n# TYPE reconciles_total counter\n"                       \
    "reconciles_total{result=\"ok\"} 7\n"

typedef struct scraper {
    pthread_t thread;
    int port;
    bool fresh_connections; /* a new connection for every scrape, or one kept alive */
    int ok;                 /* scrapes answered 200 with the expected text */
} scraper;

static void *scrape(void *arg)
{
    scraper *s = arg;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", s->port);
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    if (s->fresh_connections)
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    for (int i = 0; i < SCRAPES_EACH; i++) {
        reply r;
        if (perform(c, url, &r) == CURLE_OK && r.status == 200 &&
            strcmp(r.body, EXPECTED_METRICS) == 0)
            s->ok++;
        reply_free(&r);
    }
    curl_easy_cleanup(c);
    return NULL;
}

Test(httpd, concurrent_scrapes)
{
    /* Scrapers at once, half on kept-alive connections, half connecting anew each time: the one
     * server thread answers every request in full. */
    scraper s[SCRAPERS];
    for (int i = 0; i < SCRAPERS; i++) {
        s[i] = (scraper){.port = kc_httpd_port(srv), .fresh_connections = i % 2};
        cr_assert_eq(pthread_create(&s[i].thread, NULL, scrape, &s[i]), 0);
    }
    for (int i = 0; i < SCRAPERS; i++) {
        pthread_join(s[i].thread, NULL);
        cr_assert_eq(s[i].ok, SCRAPES_EACH, "scraper %d: %d of %d scrapes answered", i, s[i].ok,
                     SCRAPES_EACH);
    }
}

/* Whether this host has IPv6 on its loopback interface. */
static bool have_ipv6(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

Test(httpd, every_address_and_ipv6_hosts)
{
    kc_httpd *h;
    kc_err e = {0};
    kc_httpd_opts o = {.addr = ":0"};
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_OK, "%s", e.msg);
    reply r = request("GET", "127.0.0.1", kc_httpd_port(h), "/healthz");
    cr_assert_eq(r.status, 200);
    reply_free(&r);
    if (have_ipv6()) {
        /* ":port" is one dual-stack socket: IPv6 clients reach it as well. */
        r = request("GET", "[::1]", kc_httpd_port(h), "/healthz");
        cr_assert_eq(r.status, 200);
        reply_free(&r);
    }
    /* Every address includes the one a specific host names: that port is taken. */
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", kc_httpd_port(h));
    kc_httpd *again = NULL;
    o.addr = addr;
    cr_assert_eq(kc_httpd_start(&o, &again, &e), KC_EIO);
    cr_assert_null(again);
    cr_assert(strstr(e.msg, addr) != NULL && strstr(e.msg, "in use") != NULL, "%s", e.msg);
    kc_httpd_stop(h);

    if (!have_ipv6())
        return;
    o.addr = "[::1]:0";
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_OK, "%s", e.msg);
    r = request("GET", "[::1]", kc_httpd_port(h), "/healthz");
    cr_assert_eq(r.status, 200);
    reply_free(&r);
    kc_httpd_stop(h);
}

static atomic_int slow_entered;

/* A liveness check that takes its time, and says when it started. */
static bool slow_check(void *ud, char *reason, size_t size)
{
    atomic_store(&slow_entered, 1);
    nanosleep(&(struct timespec){.tv_nsec = 300 * 1000000L}, NULL);
    return true;
}

typedef struct probe {
    pthread_t thread;
    int port;
    CURLcode cc;
    reply r;
} probe;

static void *run_probe(void *arg)
{
    probe *p = arg;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", p->port);
    CURL *c = curl_easy_init();
    if (!c) {
        p->cc = CURLE_FAILED_INIT;
        return NULL;
    }
    p->cc = perform(c, url, &p->r);
    curl_easy_cleanup(c);
    return NULL;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(httpd, stop_lets_a_request_in_flight_finish)
{
    kc_httpd *h;
    kc_err e = {0};
    kc_httpd_opts o = {.addr = "127.0.0.1:0", .live = slow_check};
    cr_assert_eq(kc_httpd_start(&o, &h, &e), KC_OK, "%s", e.msg);
    atomic_store(&slow_entered, 0);
    probe p = {.port = kc_httpd_port(h)};
    cr_assert_eq(pthread_create(&p.thread, NULL, run_probe, &p), 0);
    while (!atomic_load(&slow_entered))
        nanosleep(&(struct timespec){.tv_nsec = 1000000L}, NULL);
    kc_httpd_stop(h);
    pthread_join(p.thread, NULL);
    cr_assert_eq(p.cc, CURLE_OK, "%s", curl_easy_strerror(p.cc));
    cr_assert_eq(p.r.status, 200);
    cr_assert_str_eq(p.r.body, "ok");
    reply_free(&p.r);
}

Test(httpd, stop_does_not_wait_for_idle_connections)
{
    /* A connection kept alive after its response holds no request: stopping closes it at once
     * rather than waiting for the client. */
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", kc_httpd_port(srv));
    reply r;
    cr_assert_eq(perform(c, url, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    reply_free(&r);
    long long t0 = now_ms();
    kc_httpd_stop(srv);
    srv = NULL;
    long long took = now_ms() - t0;
    cr_assert_lt(took, 1000, "stop took %lld ms", took);
    curl_easy_cleanup(c);
}
