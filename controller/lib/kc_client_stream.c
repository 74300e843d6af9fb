/* kc_client_stream: streaming requests on a libuv loop. Each stream owns one connection and one
 * transfer (kc_client_conn.c), advanced whenever a uv_poll_t says its socket is ready; a timer
 * per stream covers the rate-limit wait, then the connect deadline, then the idle timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_client.h"
#include "kc_client_int.h"
#include "kc_log.h"

/* Error bodies (non-2xx) are buffered for decoding up to this size; the rest is dropped. */
#define KC_STREAM_ERRBODY_MAX (64 * 1024)

struct kc_loopctx {
    kc_client *c;
    uv_loop_t *loop;
    kc_stream *streams; /* every live stream */
};

enum { T_NONE, T_WAIT, T_CONNECT, T_IDLE };

struct kc_stream {
    kc_loopctx *lc;
    kc_xfer x;
    uv_poll_t *poll; /* on the transfer's socket; NULL while none */
    unsigned poll_gen;
    int poll_events;
    uv_timer_t *timer;
    int tmode;
    uint64_t last_rx_ms; /* loop time of the last bytes received (idle timeout) */
    size_t rx_seen;
    kc_stream_data_cb on_data;
    kc_stream_done_cb on_done;
    void *ud;
    char *method;
    char *path;
    bool driving;   /* inside kc__xfer_step: user callbacks may run */
    bool cancelled; /* canceled while driving: freed when the step returns */
    bool finishing; /* on_done is running; a cancel now is a no-op */
    char *errbody;
    size_t errbody_len;
    kc_stream *next, *prev;
};

static void free_handle(uv_handle_t *h)
{
    free(h);
}

kc_code kc_client_attach_loop(kc_client *c, uv_loop_t *loop, kc_err *err)
{
    kc_err_clear(err);
    if (!c || !loop)
        return kc_err_set(err, KC_EARG, "kc_client_attach_loop: client and loop are required");
    if (c->lc)
        return kc_err_set(err, KC_EARG, "kc_client_attach_loop: the client is already attached");
    kc_loopctx *lc = calloc(1, sizeof(*lc));
    if (!lc)
        return kc_err_set(err, KC_ENOMEM, "out of memory attaching the client to a loop");
    lc->c = c;
    lc->loop = loop;
    c->lc = lc;
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

static void poll_close(kc_stream *s)
{
    if (!s->poll)
        return;
    /* Closing the handle takes the fd out of the loop's epoll set at once, before the
     * transfer closes the fd itself. */
    uv_close((uv_handle_t *)s->poll, free_handle);
    s->poll = NULL;
    s->poll_events = 0;
}

/* Frees a stream that is unlinked already. Never called from inside kc__xfer_step. */
static void stream_free(kc_stream *s)
{
    poll_close(s);
    if (s->timer) {
        uv_close((uv_handle_t *)s->timer, free_handle);
        s->timer = NULL;
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

/* Reports the end of a transfer to the user and frees the stream. */
static void stream_finish(kc_stream *s, kc_code code, kc_err *e)
{
    s->finishing = true;
    stream_unlink(s);
    /* Stop watching the socket before the user's callback (it may start another stream). */
    poll_close(s);
    if (s->on_done)
        s->on_done(s, code, e, s->ud);
    stream_free(s);
}

/* Ends the stream after its transfer completed or failed: a transport failure (unless an error
 * body arrived, which says more) or the HTTP status with the error body, if any. */
static void stream_end(kc_stream *s)
{
    kc_err e = {0};
    kc_code code;
    int status = s->x.p.headers_done ? s->x.p.status : 0;
    if (s->x.xerr != KC_X_OK && !(status >= 300 && s->errbody_len))
        code = kc__xfer_error(s->lc->c, &s->x, s->method, s->path, &e);
    else
        code = kc_status_decode(status, s->errbody, s->errbody_len, &e);
    stream_finish(s, code, &e);
}

static bool stream_body(const char *p, size_t k, void *ud)
{
    kc_stream *s = ud;
    if (s->cancelled)
        return false;
    int status = s->x.p.status;
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
        return true;
    }
    s->on_data(s, p, k, s->ud);
    return !s->cancelled;
}

static void on_poll(uv_poll_t *h, int status, int events);
static void on_timer(uv_timer_t *t);

/* Advances the transfer after a socket event (or at its start) and arranges the next wait. */
static void drive(kc_stream *s)
{
    kc_loopctx *lc = s->lc;
    s->driving = true;
    int r = kc__xfer_step(&s->x);
    s->driving = false;
    if (s->cancelled) {
        stream_destroy(s);
        return;
    }
    if (r <= 0) {
        stream_end(s);
        return;
    }
    if (s->x.p.received != s->rx_seen) {
        s->rx_seen = s->x.p.received;
        s->last_rx_ms = uv_now(lc->loop);
    }
    if (s->tmode == T_CONNECT && kc__xfer_connected(&s->x)) {
        long idle_s = lc->c->opts.stream_idle_timeout_s;
        if (idle_s > 0) {
            s->tmode = T_IDLE;
            s->last_rx_ms = uv_now(lc->loop);
            uv_timer_start(s->timer, on_timer, (uint64_t)idle_s * 1000, 0);
        } else {
            s->tmode = T_NONE;
            uv_timer_stop(s->timer);
        }
    }
    /* A new socket (another address, or the first): a new poll handle. */
    if (s->poll && s->poll_gen != s->x.conn_gen)
        poll_close(s);
    int events = (r & KC_WANT_READ ? UV_READABLE : 0) | (r & KC_WANT_WRITE ? UV_WRITABLE : 0);
    if (!s->poll) {
        s->poll = malloc(sizeof(*s->poll));
        if (!s->poll || uv_poll_init_socket(lc->loop, s->poll, kc__xfer_fd(&s->x)) != 0) {
            free(s->poll);
            s->poll = NULL;
            s->x.xerr = KC_X_NOMEM;
            snprintf(s->x.detail, sizeof(s->x.detail), "cannot watch the connection's socket");
            stream_end(s);
            return;
        }
        s->poll->data = s;
        s->poll_gen = s->x.conn_gen;
    }
    if (events != s->poll_events) {
        uv_poll_start(s->poll, events, on_poll);
        s->poll_events = events;
    }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    /* Errors surface from the socket calls the step makes. */
    drive(h->data);
}

static void on_timer(uv_timer_t *t)
{
    kc_stream *s = t->data;
    kc_loopctx *lc = s->lc;
    switch (s->tmode) {
    case T_WAIT:
        /* The rate limiter's wait is over: the request goes out. */
        kc__count_request(lc->c);
        s->tmode = T_CONNECT;
        uv_timer_start(s->timer, on_timer, (uint64_t)lc->c->opts.connect_timeout_ms, 0);
        drive(s);
        return;
    case T_CONNECT:
        s->x.xerr = KC_X_TIMEOUT;
        snprintf(s->x.detail, sizeof(s->x.detail), "not connected within %ld ms",
                 lc->c->opts.connect_timeout_ms);
        stream_end(s);
        return;
    case T_IDLE: {
        uint64_t idle_ms = (uint64_t)lc->c->opts.stream_idle_timeout_s * 1000;
        uint64_t quiet = uv_now(lc->loop) - s->last_rx_ms;
        if (quiet < idle_ms) {
            uv_timer_start(s->timer, on_timer, idle_ms - quiet, 0);
            return;
        }
        s->x.xerr = KC_X_TIMEOUT;
        snprintf(s->x.detail, sizeof(s->x.detail), "no data for %ld s",
                 lc->c->opts.stream_idle_timeout_s);
        stream_end(s);
        return;
    }
    default:
        return;
    }
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
    s->timer = malloc(sizeof(*s->timer));
    kc_code code;
    if (!s->method || !s->path || !s->timer) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory starting a stream");
        goto fail;
    }
    code = kc__xfer_init(&s->x, c, req, stream_body, s, err);
    if (code != KC_OK)
        goto fail;
    uv_timer_init(lc->loop, s->timer);
    s->timer->data = s;
    s->tmode = T_WAIT;
    /* Timers count from the loop's cached time, which is stale if the loop thread was busy:
     * refresh it so that the wait is not cut short. */
    uv_update_time(lc->loop);
    /* The rate limiter's wait becomes a timer; with no wait the transfer still starts from the
     * loop, so that no user callback runs inside kc_stream_start. */
    uv_timer_start(s->timer, on_timer, (uint64_t)kc__limiter_reserve(c), 0);
    s->next = lc->streams;
    if (lc->streams)
        lc->streams->prev = s;
    lc->streams = s;
    if (out)
        *out = s;
    return KC_OK;
fail:
    free(s->timer);
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
    if (s->driving)
        s->cancelled = true;
    else
        stream_destroy(s);
}

void kc__stream_detach(kc_client *c)
{
    kc_loopctx *lc = c ? c->lc : NULL;
    if (!lc)
        return;
    while (lc->streams)
        stream_destroy(lc->streams);
    c->lc = NULL;
    free(lc);
}

void kc_client_detach_loop(kc_client *c)
{
    kc__stream_detach(c);
}
