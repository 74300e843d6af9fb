/* Tests for a kc_pipe made on a client attached to a libuv loop: it runs on that loop (no thread
 * of its own), in the multi handle of the client's streams; other threads' blocking requests go
 * through it; callbacks run on the loop's thread; stopping it answers everything it holds, and
 * detaching the loop stops it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_client.h"
#include "testsrv.h"

/* Threads of this process. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* ---- the server: echoes, answers slowly on /slow, holds /hold until released, streams ---- */

typedef struct srvstate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool release;
    ts_stream *st; /* the open watch */
} srvstate;

static srvstate S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    (void)ud;
    if (!strcmp(req->path, "/watch")) {
        ts_stream *st = ts_stream_begin(conn, 200, "application/json");
        ts_stream_write(st, "{\"type\":\"ADDED\"}\n", 17);
        pthread_mutex_lock(&S.mu);
        S.st = st;
        pthread_mutex_unlock(&S.mu);
        return;
    }
    if (!strcmp(req->path, "/hold")) {
        pthread_mutex_lock(&S.mu);
        while (!S.release)
            pthread_cond_wait(&S.cv, &S.mu);
        pthread_mutex_unlock(&S.mu);
    }
    if (!strcmp(req->path, "/slow"))
        usleep(20 * 1000);
    char body[128];
    snprintf(body, sizeof(body), "%s %s", req->method, req->path);
    ts_respond(conn, 200, "text/plain", body, NULL);
}

/* Lets every /hold handler answer. */
static void release_held(void)
{
    pthread_mutex_lock(&S.mu);
    S.release = true;
    pthread_cond_broadcast(&S.cv);
    pthread_mutex_unlock(&S.mu);
}

/* ---- the loop thread: attaches, makes the pipe, runs until told to finish ---- */

typedef struct env {
    ts_server *srv;
    kc_client *c;
    kc_pipe *p;
    uv_loop_t loop;
    uv_async_t finish; /* keeps the loop running; on_finish tears down */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ready;
    int threads_before_pipe, threads_after_pipe;
    kc_stream *watch;
    atomic_int watch_bytes;
    atomic_int watch_done;
    kc_code watch_code;
    bool detach_only; /* on_finish detaches with the pipe still there */
} env;

static void on_watch_data(kc_stream *s, const char *data, size_t len, void *ud)
{
    (void)s;
    (void)data;
    env *e = ud;
    atomic_fetch_add(&e->watch_bytes, (int)len);
}

static void on_watch_done(kc_stream *s, kc_code code, const kc_err *err, void *ud)
{
    (void)s;
    (void)err;
    env *e = ud;
    e->watch_code = code;
    e->watch = NULL;
    atomic_store(&e->watch_done, 1);
}

static void on_finish(uv_async_t *a)
{
    env *e = a->data;
    if (!e->detach_only) {
        kc_pipe_stop(e->p);
        kc_pipe_stop(e->p); /* idempotent */
    }
    if (e->watch)
        kc_stream_cancel(e->watch);
    kc_client_detach_loop(e->c); /* stops the pipe when it still runs */
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_main(void *arg)
{
    env *e = arg;
    uv_loop_init(&e->loop);
    uv_async_init(&e->loop, &e->finish, on_finish);
    e->finish.data = e;
    kc_err err;
    cr_assert_eq(kc_client_attach_loop(e->c, &e->loop, &err), KC_OK, "%s", err.msg);
    e->threads_before_pipe = thread_count();
    cr_assert_eq(kc_pipe_new(e->c, 1, 8, &e->p, &err), KC_OK, "%s", err.msg);
    e->threads_after_pipe = thread_count();
    kc_pipe *again = NULL;
    cr_assert_eq(kc_pipe_new(e->c, 1, 8, &again, &err), KC_EARG);
    cr_assert(strstr(err.msg, "already runs"), "%s", err.msg);
    kc_request w = {.method = "GET", .path = "/watch"};
    cr_assert_eq(kc_stream_start(e->c, &w, on_watch_data, on_watch_done, e, &e->watch, &err), KC_OK,
                 "%s", err.msg);
    pthread_mutex_lock(&e->mu);
    e->ready = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Frees what a test tore down itself (the loop has ended). */
static void env_free_after_loop(env *e)
{
    kc_pipe_free(e->p);
    e->p = NULL;
    cr_assert_eq(uv_loop_close(&e->loop), 0, "every handle of the client and pipe closed");
    kc_client_free(e->c);
    release_held();
    ts_stop(e->srv);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static env *env_up(void)
{
    env *e = calloc(1, sizeof(*e));
    cr_assert_not_null(e);
    S.release = false;
    S.st = NULL;
    e->srv = ts_start(handler, NULL, NULL);
    cr_assert_not_null(e->srv);
    kc_config cfg = {.server = (char *)ts_url(e->srv), .source = "test"};
    kc_client_opts o = {.qps = -1, .timeout_ms = 20000};
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &e->c, &err), KC_OK, "%s", err.msg);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    cr_assert_eq(pthread_create(&e->thread, NULL, loop_main, e), 0);
    pthread_mutex_lock(&e->mu);
    while (!e->ready)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return e;
}

static void env_down(env *e)
{
    uv_async_send(&e->finish);
    pthread_join(e->thread, NULL);
    env_free_after_loop(e);
}

/* ---- answers ---- */

typedef struct answers {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, ok, cancelled;
    bool wrong_thread;
    pthread_t loop;
    char last_msg[256];
} answers;

static void on_done(const kc_pipe_result *r, void *ud)
{
    answers *as = ud;
    pthread_mutex_lock(&as->mu);
    as->n++;
    if (r->code == KC_OK)
        as->ok++;
    if (r->code == KC_ECANCELED)
        as->cancelled++;
    if (!pthread_equal(pthread_self(), as->loop))
        as->wrong_thread = true;
    snprintf(as->last_msg, sizeof(as->last_msg), "%s", r->err ? r->err->msg : "");
    pthread_cond_broadcast(&as->cv);
    pthread_mutex_unlock(&as->mu);
}

static void wait_answers(answers *as, int n)
{
    pthread_mutex_lock(&as->mu);
    while (as->n < n)
        pthread_cond_wait(&as->cv, &as->mu);
    pthread_mutex_unlock(&as->mu);
}

typedef struct getter {
    kc_client *c;
    const char *path;
    int ok;
    kc_code last;
    char msg[256];
} getter;

static void *get_loop(void *arg)
{
    getter *g = arg;
    for (int i = 0; i < 5; i++) {
        kc_request req = {.method = "GET", .path = g->path};
        kc_response r = {0};
        kc_err err;
        g->last = kc_client_do(g->c, &req, &r, &err);
        if (g->last == KC_OK && r.body && strstr(r.body, g->path))
            g->ok++;
        else
            snprintf(g->msg, sizeof(g->msg), "%s", err.msg);
        kc_response_free(&r);
    }
    return NULL;
}

Test(pipe_loop, runs_on_the_loop_with_the_streams_and_carries_blocking_requests)
{
    env *e = env_up();
    cr_assert_eq(e->threads_after_pipe, e->threads_before_pipe,
                 "a pipe on a loop starts no thread (%d before, %d after)", e->threads_before_pipe,
                 e->threads_after_pipe);
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    as.loop = e->thread;
    kc_err err;
    for (int i = 0; i < 60; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/slow/%d", i);
        kc_request req = {.method = "POST", .path = path, .body = "{}", .body_len = 2};
        cr_assert_eq(kc_pipe_submit(e->p, i % 3 ? "a" : "b", &req, on_done, &as, &err), KC_OK, "%s",
                     err.msg);
    }
    getter g[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        g[i] = (getter){.c = e->c, .path = "/get"};
        pthread_create(&t[i], NULL, get_loop, &g[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(g[i].ok, 5, "blocking requests through the loop: %s", g[i].msg);
    }
    wait_answers(&as, 60);
    cr_assert_eq(as.ok, 60, "%s", as.last_msg);
    cr_assert(!as.wrong_thread, "callbacks run on the loop's thread");
    /* The watch kept streaming beside them. */
    pthread_mutex_lock(&S.mu);
    ts_stream *st = S.st;
    pthread_mutex_unlock(&S.mu);
    cr_assert_not_null(st, "the watch reached the server");
    cr_assert_eq(ts_stream_write(st, "{\"type\":\"MODIFIED\"}\n", 20), 0);
    for (int i = 0; i < 500 && atomic_load(&e->watch_bytes) < 37; i++)
        usleep(10 * 1000);
    cr_assert_eq(atomic_load(&e->watch_bytes), 37);
    cr_assert_eq(atomic_load(&e->watch_done), 0);
    kc_client_stats s;
    kc_client_get_stats(e->c, &s);
    cr_assert_eq(s.requests, 60 + 20 + 1, "%lu", s.requests);
    /* HTTP/1.1: one watch connection plus at most 4 for the pipe's one lane. */
    cr_assert_leq(s.connections, 5, "%lu connections", s.connections);
    env_down(e);
}

Test(pipe_loop, stopping_answers_what_it_holds_and_blocking_requests_go_on_alone)
{
    env *e = env_up();
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    as.loop = e->thread;
    kc_err err;
    /* Held by the server: in flight (4 connections) and queued behind them. */
    for (int i = 0; i < 10; i++) {
        kc_request req = {.method = "POST", .path = "/hold", .body = "{}", .body_len = 2};
        cr_assert_eq(kc_pipe_submit(e->p, "k", &req, on_done, &as, &err), KC_OK, "%s", err.msg);
    }
    getter g = {.c = e->c, .path = "/hold"};
    pthread_t t;
    pthread_create(&t, NULL, get_loop, &g);
    usleep(200 * 1000);
    e->detach_only = false;
    uv_async_send(&e->finish); /* kc_pipe_stop on the loop, then detach */
    pthread_join(e->thread, NULL);
    wait_answers(&as, 10);
    cr_assert_eq(as.cancelled, 10, "every held request fails: %s", as.last_msg);
    cr_assert(strstr(as.last_msg, "stopping"), "%s", as.last_msg);
    /* Later submissions fail at once; blocking requests go on their own connection. */
    kc_request req = {.method = "POST", .path = "/x", .body = "{}", .body_len = 2};
    cr_assert_eq(kc_pipe_submit(e->p, "k", &req, on_done, &as, &err), KC_ECANCELED);
    release_held();
    pthread_join(t, NULL);
    /* The getter's first request was cancelled (not retried: the pipe answered it cancelled) or,
     * if it came after the stop, went alone; the rest went alone and succeeded. */
    cr_assert_geq(g.ok, 4, "%s", g.msg);
    kc_response r = {0};
    cr_assert_eq(kc_client_do(e->c, &(kc_request){.method = "GET", .path = "/after"}, &r, &err),
                 KC_OK, "%s", err.msg);
    cr_assert_str_eq(r.body, "GET /after");
    kc_response_free(&r);
    env_free_after_loop(e);
}

Test(pipe_loop, detaching_the_loop_stops_the_pipe)
{
    env *e = env_up();
    static answers as = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    as.loop = e->thread;
    kc_err err;
    for (int i = 0; i < 3; i++) {
        kc_request req = {.method = "POST", .path = "/hold", .body = "{}", .body_len = 2};
        cr_assert_eq(kc_pipe_submit(e->p, "k", &req, on_done, &as, &err), KC_OK, "%s", err.msg);
    }
    usleep(100 * 1000);
    e->detach_only = true;
    uv_async_send(&e->finish);
    pthread_join(e->thread, NULL);
    wait_answers(&as, 3);
    cr_assert_eq(as.cancelled, 3, "%s", as.last_msg);
    uv_run(&e->loop, UV_RUN_DEFAULT); /* the closed handles' callbacks */
    env_free_after_loop(e);
}

Test(pipe_loop, a_pipe_on_an_attached_client_is_made_on_the_loops_thread)
{
    env *e = env_up();
    kc_pipe *p = NULL;
    kc_err err;
    cr_assert_eq(kc_pipe_new(e->c, 1, 1, &p, &err), KC_EARG);
    cr_assert(strstr(err.msg, "loop's thread"), "%s", err.msg);
    cr_assert_null(p);
    env_down(e);
}
