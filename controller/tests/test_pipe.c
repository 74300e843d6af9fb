/* Tests for kc_pipe: requests answered on the pipe's thread, against the in-process
 * test server (TLS, many requests, per-lane order) and a raw socket server that misbehaves in
 * the ways keep-alive connections do (closing after some answers, closing without answering,
 * never answering). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_rest.h"
#include "testsrv.h"
#include "testutil.h"

/* ---- what the callbacks saw ---- */

#define MAX_ANSWERS 512

typedef struct answer {
    int tag; /* the submitter's number for the request */
    kc_code code;
    int status;
    char body[64];
    char msg[256];
    unsigned long long sent_ms;
} answer;

typedef struct answers {
    pthread_mutex_t mu;
    pthread_t thread; /* the thread the callbacks ran on */
    int n;
    answer a[MAX_ANSWERS];
} answers;

typedef struct tagged {
    answers *to;
    int tag;
} tagged;

static void on_done(const kc_pipe_result *r, void *ud)
{
    tagged *t = ud;
    answers *as = t->to;
    pthread_mutex_lock(&as->mu);
    as->thread = pthread_self();
    if (as->n < MAX_ANSWERS) {
        answer *a = &as->a[as->n++];
        a->tag = t->tag;
        a->code = r->code;
        a->status = r->status;
        snprintf(a->body, sizeof(a->body), "%s", r->body ? r->body : "");
        snprintf(a->msg, sizeof(a->msg), "%s", r->code != KC_OK && r->err ? r->err->msg : "");
        a->sent_ms = r->sent_ms;
    }
    pthread_mutex_unlock(&as->mu);
    free(t);
}

static void submit(kc_pipe *p, answers *as, const char *lane, const char *method, const char *path,
                   int tag)
{
    tagged *t = malloc(sizeof(*t));
    cr_assert_not_null(t);
    *t = (tagged){as, tag};
    kc_request req = {.method = method, .path = path};
    if (strcmp(method, "GET") && strcmp(method, "DELETE")) {
        req.body = "{}";
        req.body_len = 2;
    }
    kc_err err;
    cr_assert_eq(kc_pipe_submit(p, lane, &req, on_done, t, &err), KC_OK, "%s", err.msg);
}

static const answer *find(answers *as, int tag)
{
    for (int i = 0; i < as->n; i++)
        if (as->a[i].tag == tag)
            return &as->a[i];
    return NULL;
}

static kc_pipe *pipe_on(kc_client *c, int lanes, int depth)
{
    kc_pipe *p = NULL;
    kc_err err;
    cr_assert_eq(kc_pipe_new(c, lanes, depth, &p, &err), KC_OK, "%s", err.msg);
    return p;
}

static kc_client *client_at(const char *url, const char *ca, long timeout_ms)
{
    kc_config cfg = {.server = (char *)url, .source = "test", .ca_pem = (char *)ca};
    if (ca)
        cfg.ca_pem_len = strlen(ca);
    /* The connect timeout covers the TLS handshake, which under valgrind on a loaded machine
     * can take seconds: as long as the request timeout, and at least 2 s. */
    kc_client_opts o = {.qps = -1,
                        .timeout_ms = timeout_ms,
                        .connect_timeout_ms = timeout_ms > 2000 ? timeout_ms : 2000};
    kc_client *c = NULL;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &c, &err), KC_OK, "%s", err.msg);
    return c;
}

/* ---- against the test server (libmicrohttpd, TLS) ---- */

static void echo_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    (void)ud;
    if (!strcmp(req->path, "/exists")) {
        ts_respond_status(conn, 409, "AlreadyExists", "pods \"x\" already exists");
        return;
    }
    char body[128];
    snprintf(body, sizeof(body), "%s %s", req->method, req->path);
    ts_respond(conn, 200, "text/plain", body, NULL);
}

Test(pipe, many_requests_over_tls_keep_each_lanes_order)
{
    ts_pki *pki = ts_pki_generate("kc-pipe-ca");
    ts_server *srv = ts_start(echo_handler, NULL, pki);
    kc_client *c = client_at(ts_url(srv), pki->ca_pem, 20000);
    kc_pipe *p = NULL;
    kc_err err;
    cr_assert_eq(kc_pipe_new(c, 2, 16, &p, &err), KC_OK, "%s", err.msg);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    const char *lanes[] = {"node-a", "node-b", "node-c"};
    char path[64];
    int n = 300;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "/r/%d", i);
        submit(p, &as, lanes[i % 3], i % 2 ? "PATCH" : "POST", path, i);
    }
    submit(p, &as, "node-a", "POST", "/exists", n);
    kc_pipe_drain(p);
    cr_assert_eq(as.n, n + 1);
    cr_assert(!pthread_equal(as.thread, pthread_self()), "callbacks run on the pipe's thread");
    int last[3] = {-1, -1, -1};
    for (int i = 0; i < as.n; i++) {
        const answer *a = &as.a[i];
        if (a->tag == n)
            continue;
        cr_assert_eq(a->code, KC_OK, "#%d: %s", a->tag, a->msg);
        cr_assert_eq(a->status, 200);
        snprintf(path, sizeof(path), "%s /r/%d", a->tag % 2 ? "PATCH" : "POST", a->tag);
        cr_assert_str_eq(a->body, path, "the answer belongs to its request");
        cr_assert_gt(a->sent_ms, 0);
        /* a lane's answers come in the order its requests were submitted */
        cr_assert_gt(a->tag, last[a->tag % 3], "lane %d: %d after %d", a->tag % 3, a->tag,
                     last[a->tag % 3]);
        last[a->tag % 3] = a->tag;
    }
    const answer *x = find(&as, n);
    cr_assert_not_null(x);
    cr_assert_eq(x->code, KC_EALREADYEXISTS, "%s", x->msg);
    cr_assert_eq(x->status, 409);
    cr_assert(strstr(x->msg, "already exists"), "%s", x->msg);
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.requests, (unsigned long)n + 1);
    cr_assert_eq(ts_request_count(srv), (unsigned)n + 1);
    kc_pipe_free(p);
    kc_client_free(c);
    ts_stop(srv);
    ts_pki_free(pki);
}

Test(pipe, rest_writes_go_through_the_pipe)
{
    ts_server *srv = ts_start(echo_handler, NULL, NULL);
    kc_client *c = client_at(ts_url(srv), NULL, 20000);
    kc_pipe *p = NULL;
    kc_err err;
    cr_assert_eq(kc_pipe_new(c, 1, 4, &p, &err), KC_OK, "%s", err.msg);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "a", "b");
    json_t *pod = json_pack("{s:{s:s}}", "metadata", "name", "p1");
    tagged *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = malloc(sizeof(*t[i]));
        *t[i] = (tagged){&as, i};
    }
    cr_assert_eq(kc_patch_async(p, "n1", &KC_RES_NODES, NULL, "n1", KC_PATCH_MERGE, patch, NULL,
                                on_done, t[0], &err),
                 KC_OK, "%s", err.msg);
    cr_assert_eq(kc_create_async(p, "n1", &KC_RES_PODS, "ns1", pod, on_done, t[1], &err), KC_OK,
                 "%s", err.msg);
    cr_assert_eq(kc_delete_async(p, "n1", &KC_RES_PODS, "ns1", "p0", KC_PROPAGATE_BACKGROUND, NULL,
                                 on_done, t[2], &err),
                 KC_OK, "%s", err.msg);
    /* The same argument checks as the blocking calls; nothing is handed over. */
    cr_assert_eq(kc_delete_async(p, "n1", &KC_RES_PODS, NULL, "p0", KC_PROPAGATE_BACKGROUND, NULL,
                                 on_done, NULL, &err),
                 KC_EARG);
    cr_assert(strstr(err.msg, "namespace is required"), "%s", err.msg);
    kc_pipe_drain(p);
    cr_assert_eq(as.n, 3);
    cr_assert_str_eq(find(&as, 0)->body, "PATCH /api/v1/nodes/n1");
    cr_assert_str_eq(find(&as, 1)->body, "POST /api/v1/namespaces/ns1/pods");
    cr_assert_str_eq(find(&as, 2)->body, "DELETE /api/v1/namespaces/ns1/pods/p0");
    json_decref(patch);
    json_decref(pod);
    kc_pipe_free(p);
    kc_client_free(c);
    ts_stop(srv);
}

typedef struct chain {
    kc_pipe *p;
    answers *as;
    int left;
} chain;

static chain g_chain;

/* Each answer submits the next request, from the pipe's own thread. */
static void on_chain(const kc_pipe_result *r, void *ud)
{
    chain *ch = ud;
    pthread_mutex_lock(&ch->as->mu);
    answer *a = &ch->as->a[ch->as->n++];
    a->code = r->code;
    snprintf(a->body, sizeof(a->body), "%s", r->body ? r->body : "");
    pthread_mutex_unlock(&ch->as->mu);
    if (--ch->left > 0) {
        kc_request req = {.method = "GET", .path = "/next"};
        kc_err err;
        cr_assert_eq(kc_pipe_submit(ch->p, "n", &req, on_chain, ch, &err), KC_OK, "%s", err.msg);
    }
}

Test(pipe, a_callback_may_submit_again)
{
    ts_server *srv = ts_start(echo_handler, NULL, NULL);
    kc_client *c = client_at(ts_url(srv), NULL, 20000);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kc_err err;
    g_chain = (chain){NULL, &as, 5};
    cr_assert_eq(kc_pipe_new(c, 1, 4, &g_chain.p, &err), KC_OK, "%s", err.msg);
    kc_request req = {.method = "GET", .path = "/first"};
    cr_assert_eq(kc_pipe_submit(g_chain.p, "n", &req, on_chain, &g_chain, &err), KC_OK, "%s",
                 err.msg);
    kc_pipe_drain(g_chain.p); /* the follow-ups count as pending before their parent ends */
    cr_assert_eq(as.n, 5);
    cr_assert_str_eq(as.a[0].body, "GET /first");
    for (int i = 1; i < 5; i++) {
        cr_assert_eq(as.a[i].code, KC_OK);
        cr_assert_str_eq(as.a[i].body, "GET /next");
    }
    kc_pipe_free(g_chain.p);
    kc_client_free(c);
    ts_stop(srv);
}

/* ---- a raw server that misbehaves ---- */

typedef enum { RAW_CLOSE_AFTER, RAW_CLOSE_SILENTLY, RAW_HANG } raw_mode;

typedef struct raw_srv {
    int lfd, port;
    raw_mode mode;
    int close_after; /* RAW_CLOSE_AFTER: answers per connection, the last with Connection: close */
    pthread_t th;
    volatile int stop;
    pthread_mutex_t mu;
    int conns;          /* connections accepted */
    int requests;       /* requests read */
    char seen[256][32]; /* their paths, in arrival order */
} raw_srv;

/* One complete request at the front of buf (head and Content-Length body): its length, else 0. */
static size_t request_len(const char *buf, size_t n, char *path, size_t psize)
{
    const char *end = memmem(buf, n, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - buf) + 4, body = 0;
    const char *cl = memmem(buf, head, "Content-Length: ", 16);
    if (cl)
        body = (size_t)atol(cl + 16);
    if (n < head + body)
        return 0;
    const char *sp = memchr(buf, ' ', head), *sp2 = sp ? memchr(sp + 1, ' ', head) : NULL;
    size_t l = sp && sp2 ? (size_t)(sp2 - sp - 1) : 0;
    if (l >= psize)
        l = psize - 1;
    memcpy(path, sp ? sp + 1 : "", l);
    path[l] = '\0';
    return head + body;
}

static void *raw_thread(void *arg)
{
    raw_srv *s = arg;
    while (!s->stop) {
        struct pollfd pl = {.fd = s->lfd, .events = POLLIN};
        if (poll(&pl, 1, 50) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&s->mu);
        s->conns++;
        pthread_mutex_unlock(&s->mu);
        char buf[65536];
        size_t n = 0;
        int answered = 0;
        bool open = true;
        while (open && !s->stop) {
            struct pollfd pc = {.fd = fd, .events = POLLIN};
            if (poll(&pc, 1, 50) <= 0)
                continue;
            ssize_t r = recv(fd, buf + n, sizeof(buf) - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            char path[32];
            size_t len;
            while (open && (len = request_len(buf, n, path, sizeof(path))) > 0) {
                memmove(buf, buf + len, n - len);
                n -= len;
                pthread_mutex_lock(&s->mu);
                if (s->requests < 256)
                    snprintf(s->seen[s->requests], sizeof(s->seen[0]), "%s", path);
                s->requests++;
                pthread_mutex_unlock(&s->mu);
                if (s->mode == RAW_CLOSE_SILENTLY) {
                    open = false;
                } else if (s->mode == RAW_CLOSE_AFTER) {
                    bool last = ++answered == s->close_after;
                    char resp[256];
                    int k = snprintf(resp, sizeof(resp),
                                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\n%s",
                                     strlen(path), last ? "Connection: close\r\n" : "", path);
                    if (send(fd, resp, (size_t)k, MSG_NOSIGNAL) < 0)
                        open = false;
                    if (last) {
                        /* As HTTP servers close: no more writes, then read what is still on
                         * its way (closing with unread bytes would reset the connection and
                         * could destroy the answers before the client reads them). */
                        shutdown(fd, SHUT_WR);
                        while (poll(&pc, 1, 200) > 0 && recv(fd, buf, sizeof(buf), 0) > 0) {
                        }
                        open = false;
                    }
                }
            }
        }
        close(fd);
    }
    return NULL;
}

static raw_srv *raw_start(raw_mode mode, int close_after)
{
    raw_srv *s = calloc(1, sizeof(*s));
    cr_assert_not_null(s);
    s->mode = mode;
    s->close_after = close_after;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(s->lfd, 16), 0);
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&s->th, NULL, raw_thread, s), 0);
    return s;
}

static void raw_stop(raw_srv *s)
{
    s->stop = 1;
    pthread_join(s->th, NULL);
    close(s->lfd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static kc_client *raw_client(raw_srv *s, long timeout_ms)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", s->port);
    return client_at(url, NULL, timeout_ms);
}

Test(pipe, a_lane_keeps_its_order_across_connections_the_server_closes)
{
    /* Three answers per connection, the third with Connection: close: ten requests of one lane
     * (one at a time) need four connections, and each is answered once, in order. */
    raw_srv *s = raw_start(RAW_CLOSE_AFTER, 3);
    kc_client *c = raw_client(s, 20000);
    kc_pipe *p = pipe_on(c, 1, 8);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char path[32];
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof(path), "/r/%d", i);
        submit(p, &as, "one", "POST", path, i);
    }
    kc_pipe_drain(p);
    cr_assert_eq(as.n, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof(path), "/r/%d", i);
        cr_assert_eq(as.a[i].tag, i, "answered in order");
        cr_assert_eq(as.a[i].code, KC_OK, "#%d: %s", i, as.a[i].msg);
        cr_assert_str_eq(as.a[i].body, path);
    }
    pthread_mutex_lock(&s->mu);
    cr_assert_eq(s->conns, 4, "%d connections", s->conns);
    /* What reached the server is in order. */
    int next = 0;
    for (int i = 0; i < s->requests && i < 256; i++) {
        int k = atoi(s->seen[i] + 3);
        cr_assert_leq(k, next, "request %d reached the server before %d", k, next);
        if (k == next)
            next++;
    }
    cr_assert_eq(next, 10);
    pthread_mutex_unlock(&s->mu);
    kc_pipe_free(p);
    kc_client_free(c);
    raw_stop(s);
}

/* A fresh connection closed without an answer fails the request: it may have been processed, and
 * only the caller knows whether sending it again is safe. */
Test(pipe, a_server_that_never_answers_fails_the_request)
{
    raw_srv *s = raw_start(RAW_CLOSE_SILENTLY, 0);
    kc_client *c = raw_client(s, 20000);
    kc_pipe *p = pipe_on(c, 1, 8);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    submit(p, &as, "one", "PATCH", "/only", 0);
    kc_pipe_drain(p);
    cr_assert_eq(as.n, 1);
    cr_assert_eq(as.a[0].code, KC_EIO, "%s", as.a[0].msg);
    cr_assert_eq(as.a[0].status, 0);
    cr_assert(strstr(as.a[0].msg, "PATCH /only"), "%s", as.a[0].msg);
    pthread_mutex_lock(&s->mu);
    cr_assert_eq(s->requests, 1, "sent once: %d", s->requests);
    pthread_mutex_unlock(&s->mu);
    kc_pipe_free(p);
    kc_client_free(c);
    raw_stop(s);
}

Test(pipe, timeouts_refusals_faults_and_shutdown_reach_the_callbacks)
{
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kc_err err;
    kc_pipe *p = NULL;
    /* a server that reads and never answers: the whole-request timeout */
    raw_srv *s = raw_start(RAW_HANG, 0);
    kc_client *c = raw_client(s, 300);
    cr_assert_eq(kc_pipe_new(c, 1, 8, &p, &err), KC_OK, "%s", err.msg);
    submit(p, &as, "x", "POST", "/hang", 0);
    kc_pipe_drain(p);
    cr_assert_eq(find(&as, 0)->code, KC_ETIMEDOUT, "%s", find(&as, 0)->msg);
    cr_assert(strstr(find(&as, 0)->msg, "timed out"), "%s", find(&as, 0)->msg);
    /* shutdown with requests outstanding: each is answered, canceled */
    submit(p, &as, "x", "POST", "/hang", 1);
    submit(p, &as, "y", "POST", "/hang", 2);
    kc_pipe_free(p);
    cr_assert_eq(find(&as, 1)->code, KC_ECANCELED, "%s", find(&as, 1)->msg);
    cr_assert_eq(find(&as, 2)->code, KC_ECANCELED, "%s", find(&as, 2)->msg);
    kc_client_free(c);
    int port = s->port;
    raw_stop(s);
    /* nothing listens any more: refused */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    c = client_at(url, NULL, 2000);
    cr_assert_eq(kc_pipe_new(c, 2, 8, &p, &err), KC_OK, "%s", err.msg);
    submit(p, &as, "x", "DELETE", "/gone", 3);
    kc_pipe_drain(p);
    cr_assert_eq(find(&as, 3)->code, KC_EIO, "%s", find(&as, 3)->msg);
    cr_assert(strstr(find(&as, 3)->msg, "cannot connect"), "%s", find(&as, 3)->msg);
    cr_assert_eq(find(&as, 3)->sent_ms, 0);
    /* bad arguments are refused at once */
    kc_request bad = {.method = "GET", .path = "no-slash"};
    cr_assert_eq(kc_pipe_submit(p, "x", &bad, on_done, NULL, &err), KC_EARG);
    bad.path = "/x";
    bad.method = "HEAD";
    cr_assert_eq(kc_pipe_submit(p, "x", &bad, on_done, NULL, &err), KC_EARG);
    cr_assert_eq(kc_pipe_new(c, 0, 8, &(kc_pipe *){NULL}, &err), KC_EARG);
    kc_pipe_free(p);
    kc_client_free(c);
}

static kc_code refuse_patches(const kc_request *req, void *ud)
{
    (void)ud;
    return !strcmp(req->method, "PATCH") ? KC_EUNAVAILABLE : KC_OK;
}

Test(pipe, the_fault_hook_fails_requests_without_sending_them)
{
    ts_server *srv = ts_start(echo_handler, NULL, NULL);
    kc_client *c = client_at(ts_url(srv), NULL, 20000);
    kc_pipe *p = pipe_on(c, 1, 8);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER};
    kc_client_set_fault_hook(refuse_patches, NULL);
    submit(p, &as, "n", "PATCH", "/a", 0);
    submit(p, &as, "n", "POST", "/b", 1);
    kc_pipe_drain(p);
    kc_client_set_fault_hook(NULL, NULL);
    cr_assert_eq(find(&as, 0)->code, KC_EUNAVAILABLE);
    cr_assert(strstr(find(&as, 0)->msg, "injected fault"), "%s", find(&as, 0)->msg);
    cr_assert_eq(find(&as, 0)->sent_ms, 0);
    cr_assert_eq(find(&as, 1)->code, KC_OK, "%s", find(&as, 1)->msg);
    cr_assert_eq(ts_request_count(srv), 1, "only the POST was sent");
    kc_pipe_free(p);
    kc_client_free(c);
    ts_stop(srv);
}

/* ---- blocking requests of a client with a pipe go over the pipe's connections ---- */

static void slow_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    (void)ud;
    usleep(20000);
    ts_respond(conn, 200, "text/plain", req->path, NULL);
}

typedef struct getter {
    kc_client *c;
    int ok;
} getter;

static void *get_loop(void *arg)
{
    getter *g = arg;
    for (int i = 0; i < 5; i++) {
        kc_request req = {.method = "GET", .path = "/g"};
        kc_err err;
        if (kc_client_do(g->c, &req, NULL, &err) == KC_OK)
            g->ok++;
    }
    return NULL;
}

/* A callback that makes a blocking request of the same client gets it done directly (the pipe's
 * thread cannot wait for itself). */
static void blocking_in_callback(const kc_pipe_result *r, void *ud)
{
    (void)r;
    getter *g = ud;
    kc_request req = {.method = "GET", .path = "/from-callback"};
    kc_err err;
    if (kc_client_do(g->c, &req, NULL, &err) == KC_OK)
        g->ok++;
}

Test(pipe, blocking_requests_share_the_pipes_connections)
{
    ts_server *srv = ts_start(slow_handler, NULL, NULL);
    kc_client *c = client_at(ts_url(srv), NULL, 20000);
    kc_pipe *p = pipe_on(c, 1, 8); /* one lane: at most 4 connections over HTTP/1.1 */
    getter g[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        g[i] = (getter){.c = c};
        pthread_create(&t[i], NULL, get_loop, &g[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(g[i].ok, 5);
    }
    kc_client_stats st;
    kc_client_get_stats(c, &st);
    cr_assert_eq(st.requests, 40);
    cr_assert_leq(st.connections, 4, "8 threads opened %lu connections", st.connections);
    getter cb = {.c = c};
    kc_request req = {.method = "POST", .path = "/w", .body = "{}", .body_len = 2};
    kc_err err;
    cr_assert_eq(kc_pipe_submit(p, "k", &req, blocking_in_callback, &cb, &err), KC_OK, "%s",
                 err.msg);
    kc_pipe_drain(p);
    cr_assert_eq(cb.ok, 1);
    kc_pipe_free(p);
    /* Without the pipe the client works on its own again. */
    cr_assert_eq(kc_client_do(c, &(kc_request){.method = "GET", .path = "/after"}, NULL, &err),
                 KC_OK, "%s", err.msg);
    kc_client_free(c);
    ts_stop(srv);
}
