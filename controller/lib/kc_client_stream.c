/* kc_client_stream: streaming requests on a libuv loop. One libcurl multi handle per attached
 * loop, driven by its socket interface (uv_poll per socket, one uv_timer for libcurl's timeouts):
 * over HTTP/2 every stream of the client shares one connection, over HTTP/1.1 each has its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_client.h"
#include "kc_client_int.h"
#include "kc_log.h"

/* Error bodies (non-2xx) are buffered for decoding up to this size; the rest is dropped. */
#define KC_STREAM_ERRBODY_MAX (64 * 1024)

struct kc_stream {
    kc_loopctx *lc;
    kc_xfer x;
    uv_timer_t *wait; /* the rate limiter's wait before the request is added */
    bool added;       /* in the multi handle */
    kc_stream_data_cb on_data;
    kc_stream_done_cb on_done;
    void *ud;
    char *method;
    char *path;
    bool cancelled; /* cancelled inside a curl callback: freed once curl returns */
    bool finishing; /* on_done is running; a cancel now is a no-op */
    char *errbody;
    size_t errbody_len;
    uint64_t heard_ms; /* loop time of the last bytes received (or of the start) */
    kc_stream *next, *prev;
};

/* A socket libcurl asked us to watch. */
typedef struct sockctx {
    uv_poll_t poll;
    curl_socket_t fd;
    kc_loopctx *lc;
} sockctx;

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void check_done(kc_loopctx *lc);
static void sweep(kc_loopctx *lc);

static void stream_end(kc_stream *s, CURLcode rc);

/* The server answered HTTP/1.1: transfers that wait for a connection to multiplex on stop
 * waiting (each gets a connection of its own). */
static void unwait(kc_loopctx *lc)
{
    lc->unwaited = true;
    kc_stream *s = lc->streams;
    while (s) {
        kc_stream *next = s->next;
        if (s->added && !s->cancelled) {
            CURLcode rc = kc__xfer_unwait(lc->multi, &s->x);
            if (rc != CURLE_OK) {
                s->added = false;
                stream_end(s, rc);
            }
        }
        s = next;
    }
    if (lc->pipe)
        kc__pipe_unwait(lc->pipe);
}

static void socket_action(kc_loopctx *lc, curl_socket_t fd, int flags)
{
    int running = 0;
    lc->in_curl++;
    curl_multi_socket_action(lc->multi, fd, flags, &running);
    lc->in_curl--;
    check_done(lc);
    sweep(lc);
    if (!lc->unwaited && atomic_load(&lc->c->proto) == KC_PROTO_H1)
        unwait(lc);
    if (lc->pipe)
        kc__pipe_loop_run(lc->pipe);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    sockctx *sc = h->data;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    socket_action(sc->lc, sc->fd, flags);
}

static void on_timeout(uv_timer_t *t)
{
    socket_action(t->data, CURL_SOCKET_TIMEOUT, 0);
}

/* Ends the streams that received nothing for the idle timeout (a dead peer, a stuck proxy), as
 * a timeout. One timer for every stream: libcurl's low-speed check would wake the loop once a
 * second per stream, an idle operator's only work. */
static void on_idle(uv_timer_t *t)
{
    kc_loopctx *lc = t->data;
    if (lc->in_curl)
        return;
    uint64_t now = uv_now(lc->loop);
    kc_stream *s = lc->streams;
    while (s) {
        kc_stream *next = s->next;
        if (s->added && !s->cancelled && !s->finishing && now - s->heard_ms >= lc->idle_ms) {
            snprintf(s->x.errbuf, sizeof(s->x.errbuf),
                     "nothing received for %llu s (the streams' idle timeout)",
                     (unsigned long long)(lc->idle_ms / 1000));
            stream_end(s, CURLE_OPERATION_TIMEDOUT); /* may free next: start over */
            next = lc->streams;
        }
        s = next;
    }
}

/* libcurl's CURLMOPT_TIMERFUNCTION: (re)arms or stops the one timer. */
static int timer_cb(CURLM *m, long timeout_ms, void *ud)
{
    (void)m;
    kc_loopctx *lc = ud;
    if (timeout_ms < 0)
        uv_timer_stop(lc->timer);
    else
        uv_timer_start(lc->timer, on_timeout, (uint64_t)timeout_ms, 0);
    return 0;
}

/* libcurl's CURLMOPT_SOCKETFUNCTION: watches, re-watches or forgets a socket. */
static int socket_cb(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp)
{
    (void)e;
    kc_loopctx *lc = ud;
    sockctx *sc = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (sc) {
            uv_poll_stop(&sc->poll);
            uv_close((uv_handle_t *)&sc->poll, free_handle);
            curl_multi_assign(lc->multi, fd, NULL);
        }
        return 0;
    }
    if (!sc) {
        sc = calloc(1, sizeof(*sc));
        if (!sc)
            return -1;
        if (uv_poll_init_socket(lc->loop, &sc->poll, fd) != 0) {
            free(sc);
            return -1;
        }
        sc->fd = fd;
        sc->lc = lc;
        sc->poll.data = sc;
        curl_multi_assign(lc->multi, fd, sc);
    }
    int events = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
    uv_poll_start(&sc->poll, events, on_poll);
    return 0;
}

static void stream_finish(kc_stream *s, kc_code code, kc_err *e);

/* The client was cancelled (from any thread): every stream ends now with KC_ECANCELED, idle ones
 * too (libcurl only calls back a transfer that has something to do). */
static void on_cancel(uv_async_t *a)
{
    kc_loopctx *lc = a->data;
    for (;;) {
        /* From the head each time: a callback may cancel other streams (no new one can start). */
        kc_stream *s = lc->streams;
        while (s && s->cancelled)
            s = s->next;
        if (!s)
            return;
        kc_err e = {0};
        kc_code code = kc__cancelled_error(s->method, s->path, &e);
        stream_finish(s, code, &e);
    }
}

void kc__stream_cancel(kc_client *c)
{
    /* Under c->mu (kc_client_cancel): the loop context cannot go away meanwhile. */
    if (c->lc)
        uv_async_send(c->lc->cancel);
}

kc_code kc_client_attach_loop(kc_client *c, uv_loop_t *loop, kc_err *err)
{
    kc_err_clear(err);
    if (!c || !loop)
        return kc_err_set(err, KC_EARG, "kc_client_attach_loop: client and loop are required");
    if (c->lc)
        return kc_err_set(err, KC_EARG, "kc_client_attach_loop: the client is already attached");
    kc_loopctx *lc = calloc(1, sizeof(*lc));
    long idle_s = c->opts.stream_idle_timeout_s;
    if (!lc || !(lc->timer = malloc(sizeof(*lc->timer))) ||
        !(lc->cancel = malloc(sizeof(*lc->cancel))) ||
        (idle_s > 0 && !(lc->idle = malloc(sizeof(*lc->idle)))) ||
        !(lc->multi = curl_multi_init())) {
        if (lc) {
            free(lc->timer);
            free(lc->cancel);
            free(lc->idle);
        }
        free(lc);
        return kc_err_set(err, KC_ENOMEM, "out of memory attaching the client to a loop");
    }
    lc->c = c;
    lc->loop = loop;
    lc->thread = pthread_self();
    uv_timer_init(loop, lc->timer);
    lc->timer->data = lc;
    uv_async_init(loop, lc->cancel, on_cancel);
    lc->cancel->data = lc;
    uv_unref((uv_handle_t *)lc->cancel); /* it alone must not keep the loop running */
    if (lc->idle) {
        /* Checked every quarter of the timeout (at most every 5 s): a silent stream ends
         * between 1 and 1.25 timeouts after its last bytes. */
        lc->idle_ms = (uint64_t)idle_s * 1000;
        uint64_t every = lc->idle_ms / 4 > 5000 ? 5000 : lc->idle_ms / 4;
        uv_timer_init(loop, lc->idle);
        lc->idle->data = lc;
        uv_timer_start(lc->idle, on_idle, every, every);
        uv_unref((uv_handle_t *)lc->idle);
    }
    curl_multi_setopt(lc->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(lc->multi, CURLMOPT_SOCKETDATA, lc);
    curl_multi_setopt(lc->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(lc->multi, CURLMOPT_TIMERDATA, lc);
    curl_multi_setopt(lc->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* The API server allows 100 concurrent streams per HTTP/2 connection by default, and
     * the operator's watches plus LISTs stay well below that. */
    curl_multi_setopt(lc->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 250L);
    pthread_mutex_lock(&c->mu);
    c->lc = lc;
    pthread_mutex_unlock(&c->mu);
    if (kc_client_cancelled(c))
        uv_async_send(lc->cancel);
    return KC_OK;
}

/* ---- streams ---- */

static void stream_unlink(kc_stream *s)
{
    kc_loopctx *lc = s->lc;
    if (s->prev)
        s->prev->next = s->next;
    else
        lc->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

/* Frees a stream that is unlinked already; never inside a curl callback. */
static void stream_free(kc_stream *s)
{
    if (s->added) {
        curl_multi_remove_handle(s->lc->multi, s->x.h);
        s->added = false;
    }
    if (s->wait) {
        uv_close((uv_handle_t *)s->wait, free_handle);
        s->wait = NULL;
    }
    kc__xfer_free(&s->x);
    free(s->method);
    free(s->path);
    free(s->errbody);
    free(s);
}

static void stream_destroy(kc_stream *s)
{
    stream_unlink(s);
    stream_free(s);
}

/* Frees the streams cancelled while curl was running. */
static void sweep(kc_loopctx *lc)
{
    if (!lc->dead_pending || lc->in_curl)
        return;
    lc->dead_pending = false;
    kc_stream *s = lc->streams;
    while (s) {
        kc_stream *next = s->next;
        if (s->cancelled)
            stream_destroy(s);
        s = next;
    }
}

/* Reports the end of a transfer to the user and frees the stream. */
static void stream_finish(kc_stream *s, kc_code code, kc_err *e)
{
    s->finishing = true;
    stream_unlink(s);
    /* Out of the multi handle before the user's callback (it may start another stream). */
    if (s->added) {
        curl_multi_remove_handle(s->lc->multi, s->x.h);
        s->added = false;
    }
    if (s->on_done)
        s->on_done(s, code, e, s->ud);
    stream_free(s);
}

/* Ends the stream after its transfer completed or failed: a transport failure (unless an error
 * body arrived, which says more) or the HTTP status with the error body, if any. */
static void stream_end(kc_stream *s, CURLcode rc)
{
    kc_err e = {0};
    kc_code code;
    kc__xfer_finish(&s->x, rc);
    long conns = 0;
    curl_easy_getinfo(s->x.h, CURLINFO_NUM_CONNECTS, &conns);
    kc__count_connections(s->lc->c, conns);
    int status = s->x.status;
    if (status == 401)
        kc__token_refused(s->lc->c, s->x.cred_gen);
    if (s->x.xerr != KC_X_OK && !(status >= 300 && s->errbody_len))
        code = kc__xfer_error(s->lc->c, &s->x, s->method, s->path, &e);
    else
        code = kc_status_decode(status, s->errbody, s->errbody_len, &e);
    stream_finish(s, code, &e);
}

static void check_done(kc_loopctx *lc)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(lc->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        kc_xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        /* A stream's or a pipe's transfer (kc__pipe_loop_run starts what follows). */
        x->on_done(x, m->data.result);
    }
}

static void stream_xfer_done(kc_xfer *x, CURLcode rc)
{
    kc_stream *s = (kc_stream *)((char *)x - offsetof(kc_stream, x));
    if (s->cancelled)
        return; /* freed by the sweep, without a callback */
    stream_end(s, rc);
}

static bool stream_body(const char *p, size_t k, void *ud)
{
    kc_stream *s = ud;
    if (s->cancelled)
        return false;
    int status = s->x.status;
    if (status < 200 || status >= 300) {
        /* An error body is decoded at the end, never handed to on_data. */
        size_t room = KC_STREAM_ERRBODY_MAX - s->errbody_len;
        size_t take = k < room ? k : room;
        if (take) {
            char *nb = realloc(s->errbody, s->errbody_len + take + 1);
            if (!nb)
                return false;
            memcpy(nb + s->errbody_len, p, take);
            s->errbody = nb;
            s->errbody_len += take;
            nb[s->errbody_len] = '\0';
        }
        s->heard_ms = uv_now(s->lc->loop);
        return true;
    }
    s->heard_ms = uv_now(s->lc->loop);
    s->on_data(s, p, k, s->ud);
    return !s->cancelled;
}

/* The rate limiter's wait is over: the request goes out. */
static void on_wait(uv_timer_t *t)
{
    kc_stream *s = t->data;
    kc_loopctx *lc = s->lc;
    uv_close((uv_handle_t *)s->wait, free_handle);
    s->wait = NULL;
    kc__count_request(lc->c, 0);
    CURLMcode mc = curl_multi_add_handle(lc->multi, s->x.h);
    if (mc != CURLM_OK) {
        snprintf(s->x.errbuf, sizeof(s->x.errbuf), "cannot start the transfer: %s",
                 curl_multi_strerror(mc));
        stream_end(s, mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT);
        return;
    }
    s->added = true;
    s->heard_ms = uv_now(lc->loop);
}

kc_code kc_stream_start(kc_client *c, const kc_request *req, kc_stream_data_cb on_data,
                        kc_stream_done_cb on_done, void *ud, kc_stream **out, kc_err *err)
{
    kc_err_clear(err);
    if (out)
        *out = NULL;
    if (!c || !req || !req->method || !req->path || req->path[0] != '/' || !on_data)
        return kc_err_set(err, KC_EARG,
                          "kc_stream_start: a client, a method, a path starting with '/' and "
                          "on_data are required");
    if (!c->lc)
        return kc_err_set(err, KC_EARG,
                          "kc_stream_start: call kc_client_attach_loop before starting streams");
    if (kc_client_cancelled(c))
        return kc__cancelled_error(req->method, req->path, err);
    kc_loopctx *lc = c->lc;
    kc_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return kc_err_set(err, KC_ENOMEM, "out of memory starting a stream");
    s->lc = lc;
    s->on_data = on_data;
    s->on_done = on_done;
    s->ud = ud;
    s->method = strdup(req->method);
    s->path = strdup(req->path);
    s->wait = malloc(sizeof(*s->wait));
    kc_code code;
    if (!s->method || !s->path || !s->wait) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory starting a stream");
        goto fail;
    }
    code = kc__xfer_init(&s->x, c, NULL, req, 0, stream_body, s, err);
    if (code != KC_OK)
        goto fail;
    s->x.on_done = stream_xfer_done;
    uv_timer_init(lc->loop, s->wait);
    s->wait->data = s;
    /* Timers count from the loop's cached time, which is stale if the loop thread was busy:
     * refresh it so that the wait is not cut short. */
    uv_update_time(lc->loop);
    /* The rate limiter's wait becomes a timer; with no wait the transfer still starts from the
     * loop, so that no user callback runs inside kc_stream_start. */
    uv_timer_start(s->wait, on_wait, (uint64_t)kc__limiter_reserve(c), 0);
    s->next = lc->streams;
    if (lc->streams)
        lc->streams->prev = s;
    lc->streams = s;
    if (out)
        *out = s;
    return KC_OK;
fail:
    free(s->wait);
    kc__xfer_free(&s->x); /* calloc'd or initialised: either is safe to free */
    free(s->method);
    free(s->path);
    free(s);
    return code;
}

void kc_stream_cancel(kc_stream *s)
{
    if (!s || s->finishing || s->cancelled)
        return;
    if (s->lc->in_curl) {
        s->cancelled = true;
        s->lc->dead_pending = true;
    } else {
        stream_destroy(s);
    }
}

void kc__stream_detach(kc_client *c)
{
    kc_loopctx *lc = c ? c->lc : NULL;
    if (!lc)
        return;
    pthread_mutex_lock(&c->mu);
    c->lc = NULL; /* kc_client_cancel no longer wakes this loop */
    pthread_mutex_unlock(&c->mu);
    if (lc->pipe) /* its transfers are in the multi handle about to go */
        kc_pipe_stop(lc->pipe);
    while (lc->streams)
        stream_destroy(lc->streams);
    /* Closes what connections are left; their sockets' polls close through socket_cb. */
    curl_multi_cleanup(lc->multi);
    uv_close((uv_handle_t *)lc->timer, free_handle);
    uv_close((uv_handle_t *)lc->cancel, free_handle);
    if (lc->idle)
        uv_close((uv_handle_t *)lc->idle, free_handle);
    free(lc);
}

void kc_client_detach_loop(kc_client *c)
{
    kc__stream_detach(c);
}
