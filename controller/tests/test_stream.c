/* Tests for kc_client's streaming requests on a libuv loop: incremental delivery, clean and
 * broken ends, API errors, cancellation (also from inside on_data), rate limiting, detaching. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_client.h"
#include "testsrv.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- server side: a feeder thread writes chunks into the stream the handler began ---- */

typedef struct feed {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ts_stream *st;
    const char *const *chunks;
    int nchunks;
    bool abort_at_end;
    bool stop_server;       /* instead of ending: return and let ts_stop cut the stream */
    atomic_size_t received; /* bytes the client has seen, for lockstep writing */
} feed;

static void handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    feed *f = ud;
    if (strcmp(req->path, "/gone") == 0) {
        ts_respond_status(conn, 410, "Expired", "too old resource version: 5 (42)");
    } else if (strcmp(req->path, "/oops") == 0) {
        ts_respond(conn, 500, "text/plain", "upstream exploded", NULL);
    } else if (strncmp(req->path, "/now/", 5) == 0) {
        /* The whole body at once. */
        ts_stream *st = ts_stream_begin(conn, 200, "application/json");
        ts_stream_write(st, req->path + 5, strlen(req->path + 5));
        ts_stream_end(st);
    } else {
        ts_stream *st = ts_stream_begin(conn, 200, "application/json");
        pthread_mutex_lock(&f->mu);
        f->st = st;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
    }
}

/* Writes chunk i+1 only once the client has received chunks 0..i: delivery must be incremental
 * for this to make progress. */
static void *feeder(void *arg)
{
    feed *f = arg;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    pthread_mutex_lock(&f->mu);
    while (!f->st)
        if (pthread_cond_timedwait(&f->cond, &f->mu, &dl) != 0)
            break;
    ts_stream *st = f->st;
    pthread_mutex_unlock(&f->mu);
    if (!st)
        return NULL;
    size_t total = 0;
    for (int i = 0; i < f->nchunks; i++) {
        if (i > 0) {
            double t0 = now_s();
            while (atomic_load(&f->received) < total && now_s() - t0 < 5)
                usleep(1000);
        }
        ts_stream_write(st, f->chunks[i], strlen(f->chunks[i]));
        total += strlen(f->chunks[i]);
    }
    if (f->stop_server)
        return NULL;
    if (f->abort_at_end)
        ts_stream_abort(st);
    else
        ts_stream_end(st);
    return NULL;
}

/* ---- client side ---- */

typedef struct sink {
    char data[4096];
    size_t len;
    int ncalls;
    bool done;
    int ndone;
    kc_code code;
    kc_err err;
    bool cancel_in_data;
    kc_stream *s;
    feed *f;
    /* Started from inside on_done, as an informer restarting its watch would. */
    kc_client *restart_client;
    const char *restart_path;
    struct sink *restart_sink;
} sink;

static void on_data(kc_stream *s, const char *data, size_t len, void *ud)
{
    sink *k = ud;
    cr_assert_lt(k->len + len, sizeof(k->data));
    memcpy(k->data + k->len, data, len);
    k->len += len;
    k->data[k->len] = '\0';
    k->ncalls++;
    if (k->f)
        atomic_store(&k->f->received, k->len);
    if (k->cancel_in_data) {
        kc_stream_cancel(s);
        kc_stream_cancel(s); /* a second cancel is harmless */
    }
}

static void on_done(kc_stream *s, kc_code code, const kc_err *err, void *ud)
{
    sink *k = ud;
    cr_assert_eq(s, k->s);
    k->done = true;
    k->ndone++;
    k->code = code;
    k->err = *err;
    kc_stream_cancel(s); /* ignored inside on_done */
    if (k->restart_sink) {
        kc_request req = {.method = "GET", .path = k->restart_path};
        kc_err e;
        kc_code rc = kc_stream_start(k->restart_client, &req, on_data, on_done, k->restart_sink,
                                     &k->restart_sink->s, &e);
        cr_assert_eq(rc, KC_OK, "%s", e.msg);
    }
}

typedef struct env {
    uv_loop_t loop;
    uv_timer_t tick;
    int nticks;
    kc_client *c;
    ts_server *srv;
    feed f;
} env;

static void on_tick(uv_timer_t *t)
{
    ((env *)t->data)->nticks++;
}

static void env_init(env *e, const ts_pki *pki, const kc_client_opts *opts)
{
    memset(e, 0, sizeof(*e));
    pthread_mutex_init(&e->f.mu, NULL);
    pthread_cond_init(&e->f.cond, NULL);
    cr_assert_eq(uv_loop_init(&e->loop), 0);
    /* A periodic tick keeps uv_run(UV_RUN_ONCE) from blocking forever and shows the loop is not
     * blocked by the client. */
    uv_timer_init(&e->loop, &e->tick);
    e->tick.data = e;
    uv_timer_start(&e->tick, on_tick, 10, 10);
    e->srv = ts_start(handler, &e->f, pki);
    cr_assert_not_null(e->srv);
    kc_config cfg = {
        .server = (char *)ts_url(e->srv), .source = "test", .ca_pem = pki ? pki->ca_pem : NULL};
    kc_client_opts o = opts ? *opts : (kc_client_opts){.qps = -1};
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &e->c, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_client_attach_loop(e->c, &e->loop, &err), KC_OK, "%s", err.msg);
    cr_assert_eq(kc_client_attach_loop(e->c, &e->loop, &err), KC_EARG);
}

static void run_until(env *e, const bool *flag, double timeout_s)
{
    double t0 = now_s();
    while (!(flag && *flag) && now_s() - t0 < timeout_s)
        uv_run(&e->loop, UV_RUN_ONCE);
}

/* Detaches, lets the close callbacks run, and checks the loop closes with nothing left. */
static void env_fini(env *e)
{
    kc_client_detach_loop(e->c);
    kc_client_detach_loop(e->c); /* idempotent */
    uv_close((uv_handle_t *)&e->tick, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&e->loop), 0, "handles left on the loop");
    kc_client_free(e->c);
    ts_stop(e->srv);
    pthread_cond_destroy(&e->f.cond);
    pthread_mutex_destroy(&e->f.mu);
}

static void start(env *e, sink *k, const char *path)
{
    kc_request req = {.method = "GET", .path = path};
    kc_err err;
    cr_assert_eq(kc_stream_start(e->c, &req, on_data, on_done, k, &k->s, &err), KC_OK, "%s",
                 err.msg);
    cr_assert_not_null(k->s);
}

static const char *const three[] = {"{\"type\":\"ADDED\"}\n", "{\"type\":", "\"MODIFIED\"}\n"};

Test(stream, chunks_arrive_incrementally_then_end_cleanly)
{
    env e;
    env_init(&e, NULL, NULL);
    e.f.chunks = three;
    e.f.nchunks = 3;
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f};
    start(&e, &k, "/api/v1/pods?watch=true");
    run_until(&e, &k.done, 5);
    pthread_join(t, NULL);
    cr_assert(k.done);
    cr_assert_eq(k.code, KC_OK, "%s", k.err.msg);
    cr_assert_str_eq(k.data, "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n");
    /* The feeder waited for each chunk to arrive before writing the next. */
    cr_assert_geq(k.ncalls, 3);
    cr_assert_eq(k.ndone, 1);
    kc_client_stats st;
    kc_client_get_stats(e.c, &st);
    cr_assert_eq(st.requests, 1);
    env_fini(&e);
}

Test(stream, aborted_stream_ends_with_eio)
{
    env e;
    env_init(&e, NULL, NULL);
    static const char *const part[] = {"{\"type\":\"ADDED\"}\n", "{\"type\":\"MOD"};
    e.f.chunks = part;
    e.f.nchunks = 2;
    e.f.abort_at_end = true;
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f};
    start(&e, &k, "/watch");
    run_until(&e, &k.done, 5);
    pthread_join(t, NULL);
    cr_assert(k.done);
    cr_assert_eq(k.code, KC_EIO, "got %s: %s", kc_code_name(k.code), k.err.msg);
    cr_assert(strstr(k.err.msg, "/watch"), "%s", k.err.msg);
    cr_assert_str_eq(k.data, "{\"type\":\"ADDED\"}\n{\"type\":\"MOD");
    env_fini(&e);
}

Test(stream, api_errors_are_decoded_not_delivered)
{
    env e;
    env_init(&e, NULL, NULL);
    sink gone = {0}, oops = {0};
    start(&e, &gone, "/gone");
    start(&e, &oops, "/oops");
    run_until(&e, &gone.done, 5);
    run_until(&e, &oops.done, 5);
    cr_assert_eq(gone.code, KC_EEXPIRED);
    cr_assert_eq(gone.err.http_status, 410);
    cr_assert_str_eq(gone.err.reason, "Expired");
    cr_assert_str_eq(gone.err.msg, "too old resource version: 5 (42)");
    cr_assert_eq(gone.ncalls, 0, "error bodies never reach on_data");
    cr_assert_eq(oops.code, KC_ESERVER);
    cr_assert(strstr(oops.err.msg, "500") && strstr(oops.err.msg, "upstream exploded"), "%s",
              oops.err.msg);
    cr_assert_eq(oops.ncalls, 0);
    env_fini(&e);
}

Test(stream, cancel_from_inside_on_data)
{
    env e;
    env_init(&e, NULL, NULL);
    static const char *const two[] = {"first", "second"};
    e.f.chunks = two;
    e.f.nchunks = 2;
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f, .cancel_in_data = true};
    start(&e, &k, "/watch");
    bool never = false;
    double t0 = now_s();
    while (k.ncalls == 0 && now_s() - t0 < 5)
        uv_run(&e.loop, UV_RUN_ONCE);
    cr_assert_eq(k.ncalls, 1);
    /* Keep the loop running a while: no more data and no on_done may arrive. */
    run_until(&e, &never, 0.3);
    pthread_join(t, NULL);
    cr_assert_eq(k.ncalls, 1);
    cr_assert_str_eq(k.data, "first");
    cr_assert_not(k.done);
    env_fini(&e);
}

Test(stream, cancel_outside_callbacks_and_detach_with_live_streams)
{
    env e;
    env_init(&e, NULL, NULL);
    e.f.nchunks = 0;
    e.f.stop_server = true; /* nothing is written; the stream stays open */
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink a = {0}, b = {0};
    start(&e, &a, "/watch");
    /* Wait until the request reached the server, then cancel from the loop thread. */
    double t0 = now_s();
    while (ts_request_count(e.srv) < 1 && now_s() - t0 < 5)
        uv_run(&e.loop, UV_RUN_ONCE);
    cr_assert_eq(ts_request_count(e.srv), 1);
    /* Counted once its answer's headers came, as client-go counts a watch, while it streams. */
    kc_client_result rows[4];
    t0 = now_s();
    while (kc_client_results(e.c, rows, 4) < 1 && now_s() - t0 < 5)
        uv_run(&e.loop, UV_RUN_ONCE);
    cr_assert_eq(kc_client_results(e.c, rows, 4), 1);
    cr_assert_eq(rows[0].code, 200);
    cr_assert_str_eq(rows[0].method, "GET");
    cr_assert_eq(rows[0].count, 1);
    kc_stream_cancel(a.s);
    /* A second stream is still waiting on the rate limiter's timer when detached. */
    start(&e, &b, "/now/x");
    bool never = false;
    run_until(&e, &never, 0.1);
    pthread_join(t, NULL);
    cr_assert_not(a.done);
    env_fini(&e); /* detaches with b possibly live: freed silently, no callback */
    cr_assert_eq(a.ndone, 0);
}

Test(stream, rate_limited_start_waits_on_the_loop)
{
    /* One token per 2 s: the second stream waits ~2 s, on a loop timer. */
    kc_client_opts o = {.qps = 0.5, .burst = 1};
    env e;
    env_init(&e, NULL, &o);
    sink k1 = {0}, k2 = {0};
    double t0 = now_s();
    start(&e, &k1, "/now/one");
    start(&e, &k2, "/now/two");
    cr_assert_lt(now_s() - t0, 0.5, "kc_stream_start blocked on the rate limiter");
    /* The loop keeps serving the first stream while the second one waits. */
    run_until(&e, &k1.done, 5);
    cr_assert_eq(k1.code, KC_OK, "%s", k1.err.msg);
    cr_assert_str_eq(k1.data, "one");
    cr_assert_not(k2.done);
    cr_assert_eq(ts_request_count(e.srv), 1, "the second request went out before its token");
    run_until(&e, &k2.done, 5);
    double dt = now_s() - t0;
    cr_assert_eq(k2.code, KC_OK, "%s", k2.err.msg);
    cr_assert_str_eq(k2.data, "two");
    cr_assert_geq(dt, 1.9, "second stream done after %.3f s", dt);
    kc_client_stats st;
    kc_client_get_stats(e.c, &st);
    cr_assert_geq(st.throttled_ms, 1900);
    cr_assert_eq(st.requests, 2);
    env_fini(&e);
}

Test(stream, many_streams_and_connection_reuse)
{
    env e;
    env_init(&e, NULL, NULL);
    sink k[6] = {0};
    char paths[6][32];
    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof(paths[i]), "/now/body-%d", i);
        start(&e, &k[i], paths[i]);
    }
    for (int i = 0; i < 6; i++)
        run_until(&e, &k[i].done, 5);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(k[i].code, KC_OK, "%d: %s", i, k[i].err.msg);
        cr_assert_str_eq(k[i].data, paths[i] + 5);
    }
    /* Sequential streams after the first batch reuse cached connections. */
    for (int i = 0; i < 3; i++) {
        sink s = {0};
        start(&e, &s, "/now/again");
        run_until(&e, &s.done, 5);
        cr_assert_eq(s.code, KC_OK, "%s", s.err.msg);
        cr_assert_str_eq(s.data, "again");
    }
    env_fini(&e);
}

Test(stream, server_stop_mid_stream_and_tls)
{
    ts_pki *pki = ts_pki_generate("stream-ca");
    env e;
    env_init(&e, pki, NULL);
    static const char *const one[] = {"{\"type\":\"ADDED\"}\n"};
    e.f.chunks = one;
    e.f.nchunks = 1;
    e.f.stop_server = true;
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f};
    start(&e, &k, "/watch");
    double t0 = now_s();
    while (k.len == 0 && now_s() - t0 < 5)
        uv_run(&e.loop, UV_RUN_ONCE);
    pthread_join(t, NULL);
    cr_assert_str_eq(k.data, "{\"type\":\"ADDED\"}\n");
    ts_stop(e.srv); /* cuts the open stream */
    e.srv = ts_start(handler, &e.f, pki);
    run_until(&e, &k.done, 5);
    cr_assert(k.done);
    cr_assert_eq(k.code, KC_EIO, "got %s: %s", kc_code_name(k.code), k.err.msg);
    env_fini(&e);
    ts_pki_free(pki);
}

Test(stream, start_requires_attached_loop_and_valid_args)
{
    kc_config cfg = {.server = "http://127.0.0.1:1", .source = "test"};
    kc_client *c;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, NULL, &c, &err), KC_OK);
    kc_request req = {.method = "GET", .path = "/x"};
    kc_stream *s = (kc_stream *)1;
    cr_assert_eq(kc_stream_start(c, &req, on_data, on_done, NULL, &s, &err), KC_EARG);
    cr_assert_null(s);
    cr_assert(strstr(err.msg, "kc_client_attach_loop"), "%s", err.msg);
    cr_assert_eq(kc_stream_start(c, &req, NULL, on_done, NULL, &s, &err), KC_EARG);
    kc_stream_cancel(NULL);
    kc_client_free(c);
}

Test(stream, connection_refused_reports_eio)
{
    env e;
    env_init(&e, NULL, NULL);
    /* Point a second client at a closed port. */
    ts_server *tmp = ts_start(handler, &e.f, NULL);
    kc_config cfg = {.server = (char *)ts_url(tmp), .source = "test"};
    char url[64];
    snprintf(url, sizeof(url), "%s", ts_url(tmp));
    cfg.server = url;
    ts_stop(tmp);
    kc_client *c2;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, NULL, &c2, &err), KC_OK);
    cr_assert_eq(kc_client_attach_loop(c2, &e.loop, &err), KC_OK);
    sink k = {0};
    kc_request req = {.method = "GET", .path = "/watch"};
    cr_assert_eq(kc_stream_start(c2, &req, on_data, on_done, &k, &k.s, &err), KC_OK);
    run_until(&e, &k.done, 5);
    cr_assert_eq(k.code, KC_EIO, "got %s: %s", kc_code_name(k.code), k.err.msg);
    kc_client_free(c2); /* detaches too; the loop completes the closes in env_fini */
    env_fini(&e);
}

Test(stream, restart_from_inside_on_done)
{
    env e;
    env_init(&e, NULL, NULL);
    sink second = {0};
    sink first = {.restart_sink = &second, .restart_client = e.c, .restart_path = "/now/again"};
    start(&e, &first, "/gone");
    run_until(&e, &second.done, 5);
    cr_assert_eq(first.code, KC_EEXPIRED);
    cr_assert(second.done);
    cr_assert_eq(second.code, KC_OK, "%s", second.err.msg);
    cr_assert_str_eq(second.data, "again");
    cr_assert_eq(first.ndone, 1);
    cr_assert_eq(second.ndone, 1);
    env_fini(&e);
}

/* A watch that goes silent (a dead peer, a stuck proxy) ends with a timeout once nothing arrived
 * for stream_idle_timeout_s; the informer then starts it again. */
Test(stream, a_silent_stream_times_out)
{
    env e;
    kc_client_opts o = {.qps = -1, .stream_idle_timeout_s = 1};
    env_init(&e, NULL, &o);
    static const char *const one[] = {"{\"type\":\"ADDED\"}\n"};
    e.f.chunks = one;
    e.f.nchunks = 1;
    e.f.stop_server = true; /* the feeder writes once and returns; the stream stays open */
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f};
    double t0 = now_s();
    start(&e, &k, "/watch");
    run_until(&e, &k.done, 15);
    pthread_join(t, NULL);
    cr_assert(k.done, "the silent stream never ended");
    cr_assert_eq(k.code, KC_ETIMEDOUT, "got %s: %s", kc_code_name(k.code), k.err.msg);
    cr_assert_str_eq(k.data, "{\"type\":\"ADDED\"}\n");
    double took = now_s() - t0;
    /* Checked every quarter of the timeout: between 1 and 1.25 s after the last bytes. */
    cr_assert(took >= 0.9 && took < 3, "ended after %.2f s", took);
    cr_assert(strstr(k.err.msg, "nothing received for 1 s"), "%s", k.err.msg);
    env_fini(&e);
}

/* The client's stop token ends a live stream (KC_ECANCELED) and refuses new ones. */
Test(stream, cancel_ends_live_streams_and_refuses_new_ones)
{
    env e;
    env_init(&e, NULL, NULL);
    static const char *const one[] = {"{\"type\":\"ADDED\"}\n"};
    e.f.chunks = one;
    e.f.nchunks = 1;
    e.f.stop_server = true;
    pthread_t t;
    pthread_create(&t, NULL, feeder, &e.f);
    sink k = {.f = &e.f};
    start(&e, &k, "/watch");
    bool got = false;
    double t0 = now_s();
    while (!got && now_s() - t0 < 5) {
        uv_run(&e.loop, UV_RUN_ONCE);
        got = k.len > 0;
    }
    pthread_join(t, NULL);
    cr_assert(got);
    kc_client_cancel(e.c);
    t0 = now_s();
    run_until(&e, &k.done, 5);
    cr_assert(k.done);
    cr_assert_eq(k.code, KC_ECANCELED, "got %s: %s", kc_code_name(k.code), k.err.msg);
    cr_assert_lt(now_s() - t0, 2.0);
    kc_request req = {.method = "GET", .path = "/watch"};
    kc_err err;
    kc_stream *s2 = NULL;
    cr_assert_eq(kc_stream_start(e.c, &req, on_data, on_done, &k, &s2, &err), KC_ECANCELED);
    cr_assert_null(s2);
    env_fini(&e);
}
