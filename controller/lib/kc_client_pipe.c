/* kc_client_pipe: requests handed over at once and answered later. A pipe made on a client
 * attached to a libuv loop runs on that loop, in the multi handle the client's streams use (one
 * HTTP/2 connection for everything, no thread of its own); otherwise it owns a thread and a
 * libcurl multi handle. Over HTTP/2 every request is multiplexed on one connection, over
 * HTTP/1.1 they share a few keep-alive connections. Requests with the same lane key go one at a
 * time, in the order submitted, so they reach the server in that order; requests of different
 * keys go side by side. The caller (a reconcile) hands its writes over and goes on; a saturated
 * server then delays the answers, not the next reconcile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_client_int.h"

/* Connections per lane over HTTP/1.1, where a connection carries one request at a time. */
#define PIPE_CONNS_PER_LANE 4
/* Lane keys are hashed onto this many ordered queues at most. */
#define PIPE_SLOTS_MAX 1024
/* Queues of their own for blocking requests (no order among them), after the lanes' ones. */
#define PIPE_DIRECT_SLOTS 16
/* Transfers in flight at most (each holds a libcurl handle and its buffer); the rest wait in
 * their queues. Enough to keep every HTTP/1.1 connection busy and an HTTP/2 one well fed. */
#define PIPE_INFLIGHT_MIN 64
/* Receive buffer of a transfer: answers to writes are one object, a few KiB. */
#define PIPE_BUFFER_SIZE 8192L

/* A blocking request's caller, waiting for its item (kc__pipe_do). */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    kc_xfer *x;        /* gets the outcome (status, Retry-After, error, content type) */
    kc_body_buf *body; /* gets the body */
    CURLcode cc;
    bool ran; /* the transfer took place (else code/err say why not) */
    kc_code code;
    kc_err *err;
} waiter;

typedef struct item {
    struct item *next;
    kc_pipe *p;
    kc_xfer x; /* prepared when it starts (a handle costs memory: none for queued requests) */
    kc_body_buf body;
    char *method, *path; /* the request, copied; the path also names it in messages */
    char *req_body, *ctype, *accept;
    size_t req_body_len;
    bool has_body;
    kc_pipe_done_cb cb;
    void *ud;
    unsigned slot;
    kc_code injected;  /* the test fault hook failed it: answered without being sent */
    bool token;        /* its rate-limiter token is taken */
    double not_before; /* when the limiter lets it go */
    double added_s;    /* when it went to libcurl */
    uint64_t sent_ms;
    kc_code code; /* the outcome, once answered */
    kc_err *err;  /* its message, when it failed */
    waiter *w;    /* a blocking request's caller, or NULL */
    CURLcode cc;  /* the transfer's result (blocking requests) */
    bool ran;
} item;

/* One ordered queue: its head is in flight when busy. */
typedef struct slot {
    item *head, *tail;
    bool busy;
    bool ready; /* on the ready list: its head waits to be started */
    struct slot *next_ready;
} slot;

struct kc_pipe {
    kc_client *c;
    unsigned long direct_seq; /* spreads blocking requests over their slots (under mu) */
    CURLM *multi;             /* its own, or the loop's */
    kc_loopctx *lc;           /* the loop it runs on, NULL once stopped or without one */
    bool on_loop;             /* made on an attached client: runs on its loop (fixed) */
    pthread_t loop_thread;    /* that loop's thread (fixed) */
    uv_async_t *wake;         /* on the loop: new requests, cancel, stop */
    uv_timer_t *limit;        /* on the loop: the rate limiter's next start */
    bool dirty;               /* on the loop: answers arrived since the last run */
    int conns;                /* HTTP/1.1 connections it may use */
    bool multiplexed;         /* an answer came over HTTP/2 */
    int nslots;
    slot *slots;
    slot *ready_head, *ready_tail; /* the thread's own */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* the inbox and stopping */
    item *in_head, *in_tail;
    bool stopping;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle;
    unsigned long pending;      /* submitted, callback not returned yet (under idle_mu) */
    item *done, *done_tail;     /* answered, callbacks not run yet (the thread's own) */
    unsigned long completed;    /* transfers finished (the thread's own) */
    int inflight, inflight_max; /* transfers in the multi handle (the thread's own) */
};

static void item_free(item *it)
{
    if (!it)
        return;
    kc__xfer_free(&it->x);
    free(it->body.data);
    free(it->method);
    free(it->path);
    free(it->req_body);
    free(it->ctype);
    free(it->accept);
    free(it->err);
    free(it);
}

/* Records its outcome and queues it for run_callbacks. */
static void finish(kc_pipe *p, item *it, kc_code code, const kc_err *err)
{
    it->code = code;
    if (code != KC_OK && err && (it->err = malloc(sizeof(*it->err))))
        *it->err = *err;
    it->next = NULL;
    if (p->done_tail)
        p->done_tail->next = it;
    else
        p->done = it;
    p->done_tail = it;
}

/* Gives a blocking request's outcome to its waiting caller (who owns w and x). */
static void hand_over(item *it)
{
    waiter *w = it->w;
    pthread_mutex_lock(&w->mu);
    w->ran = it->ran;
    w->cc = it->cc;
    w->code = it->code;
    if (it->err && w->err)
        *w->err = *it->err;
    if (it->ran) {
        kc_xfer *x = w->x;
        x->status = it->x.status;
        x->received = it->x.received;
        x->retry_after_s = it->x.retry_after_s;
        x->content_type = it->x.content_type;
        it->x.content_type = NULL;
        x->xerr = it->x.xerr;
        x->cred_gen = it->x.cred_gen;
        memcpy(x->detail, it->x.detail, sizeof(x->detail));
        *w->body = it->body;
        it->body = (kc_body_buf){0};
    }
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Runs the callbacks of the requests answered so far, with no lock held (a callback may submit
 * again), and frees them. */
static void run_callbacks(kc_pipe *p)
{
    while (p->done) {
        item *it = p->done;
        p->done = it->next;
        if (!p->done)
            p->done_tail = NULL;
        if (it->w) {
            hand_over(it);
        } else {
            kc_pipe_result r = {.code = it->code,
                                .err = it->err,
                                .status = it->x.status,
                                .body = it->body.data,
                                .body_len = it->body.len,
                                .sent_ms = it->sent_ms};
            if (it->cb)
                it->cb(&r, it->ud);
        }
        item_free(it);
        pthread_mutex_lock(&p->idle_mu);
        if (--p->pending == 0)
            pthread_cond_broadcast(&p->idle);
        pthread_mutex_unlock(&p->idle_mu);
    }
}

static void make_ready(kc_pipe *p, slot *s)
{
    if (s->ready || s->busy || !s->head)
        return;
    s->ready = true;
    s->next_ready = NULL;
    if (p->ready_tail)
        p->ready_tail->next_ready = s;
    else
        p->ready_head = s;
    p->ready_tail = s;
}

static item *slot_pop(slot *s)
{
    item *it = s->head;
    s->head = it->next;
    if (!s->head)
        s->tail = NULL;
    it->next = NULL;
    return it;
}

static void slot_push(kc_pipe *p, item *it)
{
    slot *s = &p->slots[it->slot];
    it->next = NULL;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    make_ready(p, s);
}

/* Prepares its transfer from the copied request (the bearer token is read now). */
static kc_code prepare(kc_pipe *p, item *it, kc_err *err)
{
    kc_request req = {.method = it->method,
                      .path = it->path,
                      .body = it->has_body ? (it->req_body ? it->req_body : "") : NULL,
                      .body_len = it->req_body_len,
                      .content_type = it->ctype,
                      .accept = it->accept};
    kc_code code = kc__xfer_init(&it->x, p->c, NULL, &req, p->c->opts.timeout_ms, kc__body_append,
                                 &it->body, err);
    if (code == KC_OK &&
        curl_easy_setopt(it->x.h, CURLOPT_BUFFERSIZE, PIPE_BUFFER_SIZE) != CURLE_OK)
        code = kc_err_set(err, KC_ENOMEM, "%s %s: out of memory", it->method, it->path);
    return code;
}

static void item_xfer_done(kc_xfer *x, CURLcode rc);

/* Starts the heads of the ready slots whose rate-limiter wait is over; returns how long until
 * the next one may start (ms), or -1 when none waits. */
static long start_ready(kc_pipe *p)
{
    double now = kc__now_s();
    long wait_ms = -1;
    slot *keep_head = NULL, *keep_tail = NULL;
    while (p->ready_head && p->inflight < p->inflight_max) {
        slot *s = p->ready_head;
        p->ready_head = s->next_ready;
        if (!p->ready_head)
            p->ready_tail = NULL;
        s->ready = false;
        item *it = s->head;
        if (it->injected != KC_OK) {
            kc_err err = {0};
            kc_code code = kc_err_set(&err, it->injected, "%s %s: injected fault (test hook)",
                                      it->method, it->path);
            finish(p, slot_pop(s), code, &err);
            make_ready(p, s);
            continue;
        }
        if (!it->token) {
            it->token = true;
            it->not_before = now + kc__limiter_reserve(p->c) / 1000.0;
        }
        if (it->not_before > now) {
            long ms = (long)((it->not_before - now) * 1000.0) + 1;
            if (wait_ms < 0 || ms < wait_ms)
                wait_ms = ms;
            s->next_ready = NULL;
            if (keep_tail)
                keep_tail->next_ready = s;
            else
                keep_head = s;
            keep_tail = s;
            s->ready = true;
            continue;
        }
        kc_err err = {0};
        kc_code code = prepare(p, it, &err);
        if (code == KC_OK)
            it->x.on_done = item_xfer_done;
        CURLMcode mc = code == KC_OK ? curl_multi_add_handle(p->multi, it->x.h) : CURLM_OK;
        if (code == KC_OK && mc != CURLM_OK)
            code = kc_err_set(&err, mc == CURLM_OUT_OF_MEMORY ? KC_ENOMEM : KC_EIO,
                              "%s %s: cannot start the request: %s", it->method, it->path,
                              curl_multi_strerror(mc));
        if (code != KC_OK) {
            finish(p, slot_pop(s), code, &err);
            make_ready(p, s);
            continue;
        }
        it->added_s = now;
        p->inflight++;
        s->busy = true;
    }
    /* The slots still waiting for the limiter go first, then those the cap held back. */
    if (keep_tail) {
        keep_tail->next_ready = p->ready_head;
        if (!p->ready_head)
            p->ready_tail = keep_tail;
        p->ready_head = keep_head;
    }
    return wait_ms;
}

/* An answered (or failed) request: its outcome, then the next of its slot may go. */
static void complete(kc_pipe *p, item *it, CURLcode rc)
{
    slot *s = &p->slots[it->slot];
    curl_multi_remove_handle(p->multi, it->x.h);
    kc__xfer_finish(&it->x, rc);
    curl_off_t pre = 0;
    long conns = 0;
    curl_easy_getinfo(it->x.h, CURLINFO_NUM_CONNECTS, &conns);
    kc__count_request(p->c, conns);
    if (curl_easy_getinfo(it->x.h, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK && pre > 0)
        it->sent_ms = (uint64_t)(it->added_s * 1000.0) + (uint64_t)(pre / 1000);
    it->ran = true;
    it->cc = rc;
    kc_err err = {0};
    kc_code code;
    if (rc != CURLE_OK) {
        code = kc__xfer_error(p->c, &it->x, it->method, it->path, &err);
    } else {
        if (it->x.status == 401)
            kc__token_refused(p->c, it->x.cred_gen);
        code = kc_status_decode(it->x.status, it->body.data, it->body.len, &err);
        if (code != KC_OK && !err.retry_after_s)
            err.retry_after_s = it->x.retry_after_s;
    }
    s->busy = false;
    p->inflight--;
    p->completed++;
    if (p->lc && !p->multiplexed) {
        /* On the loop no host connection limit applies (the streams hold theirs): the number in
         * flight is the limit, a connection each over HTTP/1.1, many once HTTP/2 is seen. */
        long v = 0;
        if (curl_easy_getinfo(it->x.h, CURLINFO_HTTP_VERSION, &v) == CURLE_OK &&
            v >= CURL_HTTP_VERSION_2_0) {
            p->multiplexed = true;
            p->inflight_max = p->conns * 2 > PIPE_INFLIGHT_MIN ? p->conns * 2 : PIPE_INFLIGHT_MIN;
        }
    }
    p->dirty = true;
    finish(p, slot_pop(s), code, &err);
    make_ready(p, s);
}

static void read_done(kc_pipe *p)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(p->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        kc_xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        item *it = (item *)((char *)x - offsetof(item, x));
        complete(p, it, m->data.result);
    }
}

/* On the loop: a transfer of the pipe finished (kc__pipe_loop_run follows). */
static void item_xfer_done(kc_xfer *x, CURLcode rc)
{
    item *it = (item *)((char *)x - offsetof(item, x));
    complete(it->p, it, rc);
}

/* Fails every request still held with KC_ECANCELED (the pipe is stopping). */
static void cancel_all(kc_pipe *p)
{
    for (int i = 0; i < p->nslots + PIPE_DIRECT_SLOTS; i++) {
        slot *s = &p->slots[i];
        while (s->head) {
            item *it = slot_pop(s);
            if (s->busy) {
                curl_multi_remove_handle(p->multi, it->x.h);
                s->busy = false;
                p->inflight--;
            }
            kc_err err = {0};
            kc_code code =
                kc_client_cancelled(p->c)
                    ? kc__cancelled_error(it->method, it->path, &err)
                    : kc_err_set(&err, KC_ECANCELED, "%s %s: the request pipe is stopping",
                                 it->method, it->path);
            finish(p, it, code, &err);
        }
        s->ready = false;
    }
    p->ready_head = p->ready_tail = NULL;
}

/* Moves the inbox into the slots; returns whether the pipe is stopping. */
static bool take_inbox(kc_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    item *in = p->in_head;
    p->in_head = p->in_tail = NULL;
    bool stopping = p->stopping;
    pthread_mutex_unlock(&p->mu);
    while (in) {
        item *next = in->next;
        slot_push(p, in);
        in = next;
    }
    return stopping;
}

static void *pipe_thread(void *arg)
{
    kc_pipe *p = arg;
    for (;;) {
        if (take_inbox(p)) {
            cancel_all(p);
            run_callbacks(p);
            return NULL;
        }
        if (kc_client_cancelled(p->c)) {
            /* The client's stop token: nothing more goes out, everything held fails now. */
            cancel_all(p);
            run_callbacks(p);
            curl_multi_poll(p->multi, NULL, 0, 1000, NULL);
            continue;
        }
        long wait_ms = start_ready(p);
        int running = 0;
        curl_multi_perform(p->multi, &running);
        unsigned long before = p->completed;
        read_done(p);
        run_callbacks(p);
        if (p->completed != before)
            continue; /* answers freed slots: start their next requests at once */
        long curl_ms = -1;
        curl_multi_timeout(p->multi, &curl_ms);
        int ms = 1000;
        if (curl_ms >= 0 && curl_ms < ms)
            ms = (int)curl_ms;
        if (wait_ms >= 0 && wait_ms < ms)
            ms = (int)wait_ms;
        curl_multi_poll(p->multi, NULL, 0, ms, NULL);
    }
}

/* ---- on a loop: the same work, from the loop's callbacks ---- */

static void on_limit(uv_timer_t *t);

/* One round on the loop's thread: new requests in, what may start started, callbacks run. */
static void loop_round(kc_pipe *p)
{
    if (!p->lc)
        return; /* stopped: its loop handles are closing */
    p->dirty = false;
    if (take_inbox(p) || kc_client_cancelled(p->c)) {
        /* The client's stop token: nothing more goes out, everything held fails now. */
        cancel_all(p);
        run_callbacks(p);
        return;
    }
    long wait_ms = start_ready(p);
    run_callbacks(p);
    if (wait_ms >= 0)
        uv_timer_start(p->limit, on_limit, (uint64_t)wait_ms, 0);
}

static void on_wake(uv_async_t *a)
{
    loop_round(a->data);
}

static void on_limit(uv_timer_t *t)
{
    loop_round(t->data);
}

void kc__pipe_unwait(kc_pipe *p)
{
    for (int i = 0; i < p->nslots + PIPE_DIRECT_SLOTS; i++) {
        slot *s = &p->slots[i];
        if (!s->busy)
            continue;
        item *it = s->head;
        CURLcode rc = kc__xfer_unwait(p->multi, &it->x);
        if (rc != CURLE_OK)
            complete(p, it, rc);
    }
}

void kc__pipe_loop_run(kc_pipe *p)
{
    if (p->dirty)
        loop_round(p);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* Fails everything and closes the loop handles (the loop's thread, or with the loop stopped). */
static void loop_stop(kc_pipe *p)
{
    if (!p->lc)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_mutex_unlock(&p->mu);
    take_inbox(p);
    cancel_all(p);
    run_callbacks(p);
    uv_close((uv_handle_t *)p->wake, free_handle);
    uv_close((uv_handle_t *)p->limit, free_handle);
    p->wake = NULL;
    p->limit = NULL;
    p->lc->pipe = NULL;
    p->lc = NULL;
}

void kc__pipe_wake(kc_pipe *p)
{
    /* Under the client's lock: the pipe cannot go away meanwhile. */
    if (!p->on_loop) {
        curl_multi_wakeup(p->multi);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (!p->stopping && p->wake)
        uv_async_send(p->wake);
    pthread_mutex_unlock(&p->mu);
}

kc_code kc_pipe_new(kc_client *c, int lanes, int depth, kc_pipe **out, kc_err *err)
{
    kc_err_clear(err);
    if (!c || !out || lanes <= 0 || depth <= 0)
        return kc_err_set(err, KC_EARG, "kc_pipe_new: a client, lanes > 0 and depth > 0");
    *out = NULL;
    kc_loopctx *lc = c->lc;
    if (lc && !pthread_equal(pthread_self(), lc->thread))
        return kc_err_set(err, KC_EARG,
                          "kc_pipe_new: the client is attached to a loop: make its pipe on the "
                          "loop's thread");
    if (lc && lc->pipe)
        return kc_err_set(err, KC_EARG, "kc_pipe_new: a pipe already runs on the client's loop");
    kc_pipe *p = calloc(1, sizeof(*p));
    if (!p)
        return kc_err_set(err, KC_ENOMEM, "out of memory creating the request pipe");
    p->c = c;
    long n = (long)lanes * depth;
    p->nslots = n > PIPE_SLOTS_MAX ? PIPE_SLOTS_MAX : (int)n;
    p->slots = calloc((size_t)p->nslots + PIPE_DIRECT_SLOTS, sizeof(*p->slots));
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->idle_mu, NULL);
    pthread_cond_init(&p->idle, NULL);
    long conns = (long)lanes * PIPE_CONNS_PER_LANE;
    p->conns = (int)conns;
    if (lc) {
        p->multi = lc->multi;
        p->wake = malloc(sizeof(*p->wake));
        p->limit = malloc(sizeof(*p->limit));
        if (!p->slots || !p->wake || !p->limit) {
            free(p->wake);
            free(p->limit);
            p->wake = NULL;
            p->limit = NULL;
            p->multi = NULL;
            kc_pipe_free(p);
            return kc_err_set(err, KC_ENOMEM, "out of memory creating the request pipe");
        }
        uv_async_init(lc->loop, p->wake, on_wake);
        p->wake->data = p;
        uv_unref((uv_handle_t *)p->wake); /* it alone must not keep the loop running */
        uv_timer_init(lc->loop, p->limit);
        p->limit->data = p;
        /* Until HTTP/2 is seen, one request per HTTP/1.1 connection it may use. */
        p->inflight_max = (int)conns;
        p->lc = lc;
        p->on_loop = true;
        p->loop_thread = lc->thread;
        lc->pipe = p;
    } else {
        p->multi = curl_multi_init();
        if (!p->slots || !p->multi) {
            kc_pipe_free(p);
            return kc_err_set(err, KC_ENOMEM, "out of memory creating the request pipe");
        }
        p->inflight_max = conns * 2 > PIPE_INFLIGHT_MIN ? (int)conns * 2 : PIPE_INFLIGHT_MIN;
        curl_multi_setopt(p->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        curl_multi_setopt(p->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
        curl_multi_setopt(p->multi, CURLMOPT_MAXCONNECTS, conns);
        int e = pthread_create(&p->thread, NULL, pipe_thread, p);
        if (e != 0) {
            kc_pipe_free(p);
            return kc_err_set(err, KC_EIO, "cannot start the request pipe's thread: %s",
                              strerror(e));
        }
        p->started = true;
    }
    pthread_mutex_lock(&c->mu);
    bool first = !c->pipe;
    if (first)
        c->pipe = p; /* the first pipe also carries the client's blocking requests */
    int npool = c->npool;
    CURL *pool[KC_CLIENT_POOL_MAX];
    memcpy(pool, c->pool, sizeof(pool));
    if (first)
        c->npool = 0; /* their connections go: blocking requests share the pipe's from now on */
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; first && i < npool; i++)
        curl_easy_cleanup(pool[i]);
    *out = p;
    return KC_OK;
}

/* A new item for req, the request copied (its transfer is prepared when it starts). */
static kc_code item_new(kc_pipe *p, const kc_request *req, item **out, kc_err *err)
{
    item *it = calloc(1, sizeof(*it));
    if (!it)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    it->p = p;
    bool ok = (it->method = strdup(req->method)) && (it->path = strdup(req->path)) &&
              (!req->content_type || (it->ctype = strdup(req->content_type))) &&
              (!req->accept || (it->accept = strdup(req->accept)));
    if (ok && req->body) {
        it->has_body = true;
        it->req_body_len = req->body_len;
        if (req->body_len && (ok = (it->req_body = malloc(req->body_len))))
            memcpy(it->req_body, req->body, req->body_len);
    }
    if (!ok) {
        item_free(it);
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    *out = it;
    return KC_OK;
}

/* Puts it in the thread's inbox (a blocking request on a slot of its own, spread over them) and
 * wakes the thread; a stopping pipe frees it and says so. */
static kc_code hand_to_thread(kc_pipe *p, item *it, bool blocking, kc_err *err)
{
    pthread_mutex_lock(&p->mu);
    bool stopping = p->stopping;
    if (!stopping) {
        if (blocking)
            it->slot = (unsigned)p->nslots + (unsigned)(p->direct_seq++ % PIPE_DIRECT_SLOTS);
        pthread_mutex_lock(&p->idle_mu);
        p->pending++;
        pthread_mutex_unlock(&p->idle_mu);
        if (p->in_tail)
            p->in_tail->next = it;
        else
            p->in_head = it;
        p->in_tail = it;
        if (p->on_loop) /* under the lock: a stopping pipe closes it after setting stopping */
            uv_async_send(p->wake);
    }
    bool threaded = !p->on_loop;
    pthread_mutex_unlock(&p->mu);
    if (stopping) {
        kc_code code = kc_err_set(err, KC_ECANCELED, "%s %s: the request pipe is stopping",
                                  it->method, it->path);
        item_free(it);
        return code;
    }
    if (threaded)
        curl_multi_wakeup(p->multi);
    return KC_OK;
}

static unsigned slot_of(const kc_pipe *p, const char *key)
{
    /* FNV-1a: the same key always lands on the same queue. */
    uint32_t h = 2166136261u;
    for (const unsigned char *k = (const unsigned char *)(key ? key : ""); *k; k++)
        h = (h ^ *k) * 16777619u;
    return h % (unsigned)p->nslots;
}

kc_code kc_pipe_submit(kc_pipe *p, const char *lane_key, const kc_request *req, kc_pipe_done_cb cb,
                       void *ud, kc_err *err)
{
    kc_err_clear(err);
    if (!p || !req || !req->method || !req->path || req->path[0] != '/')
        return kc_err_set(err, KC_EARG,
                          "kc_pipe_submit: a pipe, a method and a path starting with '/' are "
                          "required");
    if (!strcmp(req->method, "HEAD"))
        return kc_err_set(err, KC_EARG, "kc_pipe_submit: HEAD is not pipelined");
    if (kc_client_cancelled(p->c))
        return kc__cancelled_error(req->method, req->path, err);
    item *it = NULL;
    kc_code code = item_new(p, req, &it, err);
    if (code != KC_OK)
        return code;
    it->cb = cb;
    it->ud = ud;
    it->injected = kc__fault_check(req);
    it->slot = slot_of(p, lane_key);
    return hand_to_thread(p, it, false, err);
}

kc_pipe *kc__pipe_acquire(kc_client *c)
{
    pthread_mutex_lock(&c->mu);
    kc_pipe *p = c->pipe;
    /* A callback's own request (or one from the loop the pipe runs on): the thread cannot wait
     * for itself. */
    if (p && pthread_equal(pthread_self(), p->on_loop ? p->loop_thread : p->thread))
        p = NULL;
    if (p) {
        pthread_mutex_lock(&p->mu);
        bool stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);
        if (stopping)
            p = NULL; /* stopped: on its own connection, as before the pipe */
    }
    if (p)
        c->pipe_users++;
    pthread_mutex_unlock(&c->mu);
    return p;
}

void kc__pipe_release(kc_client *c, kc_pipe *p)
{
    (void)p;
    pthread_mutex_lock(&c->mu);
    if (--c->pipe_users == 0)
        pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->mu);
}

kc_code kc__pipe_do(kc_pipe *p, const kc_request *req, kc_xfer *x, kc_body_buf *body, CURLcode *cc,
                    kc_err *err)
{
    waiter w = {.x = x, .body = body, .err = err};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    item *it = NULL;
    kc_code code = item_new(p, req, &it, err);
    if (code != KC_OK)
        goto out;
    it->w = &w;
    it->token = true; /* the caller took it */
    if ((code = hand_to_thread(p, it, true, err)) != KC_OK)
        goto out;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    *cc = w.cc;
    code = w.ran ? KC_OK : w.code;
out:
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return code;
}

void kc_pipe_drain(kc_pipe *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->idle_mu);
    while (p->pending)
        pthread_cond_wait(&p->idle, &p->idle_mu);
    pthread_mutex_unlock(&p->idle_mu);
}

void kc_pipe_stop(kc_pipe *p)
{
    if (!p)
        return;
    if (p->on_loop) {
        loop_stop(p); /* a no-op once stopped, or once the loop went away */
    } else if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stopping = true;
        pthread_mutex_unlock(&p->mu);
        curl_multi_wakeup(p->multi);
        pthread_join(p->thread, NULL);
        p->started = false;
    }
}

void kc_pipe_free(kc_pipe *p)
{
    if (!p)
        return;
    kc_client *c = p->c;
    pthread_mutex_lock(&c->mu);
    bool carried = c->pipe == p;
    if (carried)
        c->pipe = NULL; /* blocking requests from now on go on their own */
    pthread_mutex_unlock(&c->mu);
    kc_pipe_stop(p);
    if (carried) {
        /* Blocking requests that still hold the pipe were answered (cancelled) by its last
         * round; wait until their callers let go of it. */
        pthread_mutex_lock(&c->mu);
        while (c->pipe_users > 0)
            pthread_cond_wait(&c->wake, &c->mu);
        pthread_mutex_unlock(&c->mu);
    }
    if (p->multi && !p->on_loop)
        curl_multi_cleanup(p->multi);
    free(p->wake); /* set only when it never reached the loop */
    free(p->limit);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->idle_mu);
    pthread_cond_destroy(&p->idle);
    free(p->slots);
    free(p);
}
