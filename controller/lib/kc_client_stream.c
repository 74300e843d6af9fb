/* kc_client_stream: streaming requests on a libuv loop, driven by curl's multi-socket interface
 * (one uv_poll_t per socket curl asks about, one uv_timer_t for curl's timeout). */
#include <stdlib.h>
#include <string.h>

#include "kc_client.h"
#include "kc_client_int.h"
#include "kc_log.h"

/* Error bodies (non-2xx) are buffered for decoding up to this size; the rest is dropped. */
#define KC_STREAM_ERRBODY_MAX (64 * 1024)

typedef struct kc_pollctx kc_pollctx;

struct kc_loopctx {
    kc_client *c;
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;   /* curl's timeout; lc is freed by its close callback */
    int in_curl;        /* > 0 while curl_multi_socket_action runs (user on_data may run) */
    kc_stream *streams; /* every live stream, waiting on the rate limiter or in the multi */
    kc_pollctx *polls;  /* every uv_poll_t not yet closed */
};

struct kc_pollctx {
    uv_poll_t poll;
    curl_socket_t fd;
    kc_loopctx *lc;
    kc_pollctx *next, *prev;
};

struct kc_stream {
    kc_loopctx *lc;
    CURL *easy;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    kc_stream_data_cb on_data;
    kc_stream_done_cb on_done;
    void *ud;
    char *method;
    char *path;
    uv_timer_t *wait_timer; /* rate-limit wait; NULL once the transfer was added to the multi */
    bool cancelled;         /* canceled inside a curl callback: reaped after it returns */
    bool finishing;         /* on_done is running; a cancel now is a no-op */
    long status;
    char *errbody;
    size_t errbody_len;
    kc_stream *next, *prev;
};

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void free_loopctx(uv_handle_t *h)
{
    free(h->data);
}

/* ---- uv handles for curl's sockets and timer ---- */

static void check_multi_info(kc_loopctx *lc);
static void reap_cancelled(kc_loopctx *lc);

/* Runs curl on a socket event or a timeout. User callbacks (on_data) run inside; cancels made
 * there are deferred until it returns, since curl forbids removing handles from its callbacks. */
static void drive(kc_loopctx *lc, curl_socket_t fd, int flags)
{
    int running = 0;
    lc->in_curl++;
    curl_multi_socket_action(lc->multi, fd, flags, &running);
    lc->in_curl--;
    if (lc->in_curl == 0) {
        reap_cancelled(lc);
        check_multi_info(lc);
    }
}

static void on_poll(uv_poll_t *handle, int status, int events)
{
    kc_pollctx *p = handle->data;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    /* p may be closed by curl during drive(); only the fd is needed. */
    drive(p->lc, p->fd, flags);
}

static void on_timeout(uv_timer_t *t)
{
    drive(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static void poll_close(kc_pollctx *p)
{
    kc_loopctx *lc = p->lc;
    if (p->prev)
        p->prev->next = p->next;
    else
        lc->polls = p->next;
    if (p->next)
        p->next->prev = p->prev;
    uv_poll_stop(&p->poll);
    uv_close((uv_handle_t *)&p->poll, free_handle);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)e;
    kc_loopctx *lc = userp;
    kc_pollctx *p = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (p) {
            curl_multi_assign(lc->multi, fd, NULL);
            poll_close(p);
        }
        return 0;
    }
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return -1;
        if (uv_poll_init_socket(lc->loop, &p->poll, fd) != 0) {
            free(p);
            return -1;
        }
        p->fd = fd;
        p->lc = lc;
        p->poll.data = p;
        p->next = lc->polls;
        if (lc->polls)
            lc->polls->prev = p;
        lc->polls = p;
        curl_multi_assign(lc->multi, fd, p);
    }
    int events = 0;
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    return uv_poll_start(&p->poll, events, on_poll) == 0 ? 0 : -1;
}

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    kc_loopctx *lc = userp;
    /* Even a 0 timeout goes through the loop: curl must not be re-entered from this callback. */
    if (timeout_ms < 0)
        uv_timer_stop(&lc->timer);
    else
        uv_timer_start(&lc->timer, on_timeout, (uint64_t)timeout_ms, 0);
    return 0;
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
    lc->multi = curl_multi_init();
    if (!lc->multi) {
        free(lc);
        return kc_err_set(err, KC_ENOMEM, "curl_multi_init failed");
    }
    lc->c = c;
    lc->loop = loop;
    uv_timer_init(loop, &lc->timer);
    lc->timer.data = lc;
    curl_multi_setopt(lc->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(lc->multi, CURLMOPT_SOCKETDATA, lc);
    curl_multi_setopt(lc->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(lc->multi, CURLMOPT_TIMERDATA, lc);
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

/* Takes the transfer out of the multi (or stops its wait timer) and frees the stream, which
 * must be unlinked already. Never called from inside a curl callback. */
static void stream_free(kc_stream *s)
{
    if (s->wait_timer) {
        s->wait_timer->data = NULL;
        uv_timer_stop(s->wait_timer);
        uv_close((uv_handle_t *)s->wait_timer, free_handle);
    } else if (s->easy) {
        curl_multi_remove_handle(s->lc->multi, s->easy);
    }
    if (s->easy)
        curl_easy_cleanup(s->easy);
    curl_slist_free_all(s->hdrs);
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

static void reap_cancelled(kc_loopctx *lc)
{
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
    if (s->on_done)
        s->on_done(s, code, e, s->ud);
    stream_free(s);
}

static void check_multi_info(kc_loopctx *lc)
{
    CURLMsg *msg;
    int pending;
    while ((msg = curl_multi_info_read(lc->multi, &pending))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        kc_stream *s = NULL;
        CURLcode rc = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
        if (!s)
            continue;
        if (s->cancelled) {
            stream_destroy(s);
            continue;
        }
        kc_err e = {0};
        kc_code code;
        long status = 0;
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK && !(status >= 300 && s->errbody_len))
            code = kc__curl_error(lc->c, rc, s->errbuf, s->method, s->path, &e);
        else
            code = kc_status_decode((int)status, s->errbody, s->errbody_len, &e);
        stream_finish(s, code, &e);
    }
}

static size_t stream_write(char *p, size_t size, size_t n, void *ud)
{
    kc_stream *s = ud;
    size_t k = size * n;
    if (s->cancelled)
        return 0; /* ends the transfer; reaped after curl returns */
    if (!s->status)
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status >= 300) {
        /* An error body is decoded at the end, never handed to on_data. */
        size_t room = KC_STREAM_ERRBODY_MAX - s->errbody_len;
        size_t take = k < room ? k : room;
        if (take) {
            char *nb = realloc(s->errbody, s->errbody_len + take + 1);
            if (!nb)
                return 0;
            memcpy(nb + s->errbody_len, p, take);
            s->errbody = nb;
            s->errbody_len += take;
            nb[s->errbody_len] = '\0';
        }
        return k;
    }
    s->on_data(s, p, k, s->ud);
    return s->cancelled ? 0 : k;
}

static void on_wait_done(uv_timer_t *t)
{
    kc_stream *s = t->data;
    uv_close((uv_handle_t *)t, free_handle);
    if (!s)
        return;
    s->wait_timer = NULL;
    kc__count_request(s->lc->c);
    CURLMcode mrc = curl_multi_add_handle(s->lc->multi, s->easy);
    if (mrc != CURLM_OK) {
        kc_err e = {0};
        kc_err_set(&e, mrc == CURLM_OUT_OF_MEMORY ? KC_ENOMEM : KC_EIO,
                   "%s %s: cannot start the transfer: %s", s->method, s->path,
                   curl_multi_strerror(mrc));
        curl_easy_cleanup(s->easy);
        s->easy = NULL;
        stream_finish(s, e.code, &e);
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
    s->easy = curl_easy_init();
    s->wait_timer = malloc(sizeof(*s->wait_timer));
    kc_code code;
    if (!s->method || !s->path || !s->easy || !s->wait_timer) {
        code = kc_err_set(err, KC_ENOMEM, "out of memory starting a stream");
        goto fail;
    }
    code = kc__setup_easy(c, s->easy, req, &s->hdrs, s->errbuf, err);
    if (code != KC_OK)
        goto fail;
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    if (c->opts.stream_idle_timeout_s > 0) {
        curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, c->opts.stream_idle_timeout_s);
    }
    uv_timer_init(lc->loop, s->wait_timer);
    s->wait_timer->data = s;
    /* Timers count from the loop's cached time, which is stale if the loop thread was busy:
     * refresh it so that the wait is not cut short. */
    uv_update_time(lc->loop);
    /* The rate limiter's wait becomes a timer; with no wait the transfer still starts from the
     * loop, which keeps curl_multi_add_handle out of any curl callback we may be inside. */
    uv_timer_start(s->wait_timer, on_wait_done, (uint64_t)kc__limiter_reserve(c), 0);
    s->next = lc->streams;
    if (lc->streams)
        lc->streams->prev = s;
    lc->streams = s;
    if (out)
        *out = s;
    return KC_OK;
fail:
    free(s->wait_timer);
    if (s->easy)
        curl_easy_cleanup(s->easy);
    curl_slist_free_all(s->hdrs);
    free(s->method);
    free(s->path);
    free(s);
    return code;
}

void kc_stream_cancel(kc_stream *s)
{
    if (!s || s->finishing || s->cancelled)
        return;
    if (s->lc->in_curl > 0 && !s->wait_timer)
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
    /* Cleanup may report sockets of cached connections as removed; lc is still valid here. */
    curl_multi_cleanup(lc->multi);
    while (lc->polls)
        poll_close(lc->polls);
    c->lc = NULL;
    /* lc holds the timer, so it is freed by the timer's close callback. */
    uv_timer_stop(&lc->timer);
    uv_close((uv_handle_t *)&lc->timer, free_loopctx);
}

void kc_client_detach_loop(kc_client *c)
{
    kc__stream_detach(c);
}
