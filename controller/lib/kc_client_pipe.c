/* kc_client_pipe: requests sent at once and answered later. A pipe owns a thread and a few
 * keep-alive connections (lanes); each lane writes its requests back to back without waiting for
 * the answers (HTTP/1.1 pipelining, RFC 9112 section 9.3.2) and matches the responses to them in
 * order. The caller (a reconcile) hands its writes over and goes on; a saturated server then
 * delays the answers, not the next reconcile. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kc_client_int.h"

/* How often a request the connection lost before any byte of its answer goes again. */
#define PIPE_RESENDS 2
/* How much one lane reads per round: the thread then takes new requests and serves the other
 * lanes before it reads on (a lane whose answers keep coming must not hold new requests back). */
#define PIPE_READ_ROUND (32 * 1024)

typedef struct item {
    struct item *next;
    kc_xfer x; /* the request bytes and the response parser; the connection is the lane's */
    kc_body_buf body;
    char *method, *path; /* for messages */
    kc_pipe_done_cb cb;
    void *ud;
    kc_code injected; /* the test fault hook failed it: answered without being sent */
    int resends;
    bool token;        /* its rate-limiter token is taken */
    double not_before; /* when the limiter lets it go */
    double deadline;   /* when its answer is due (set once sent) */
    uint64_t sent_ms;
    kc_code code; /* the outcome, once answered */
    kc_err *err;  /* its message, when it failed */
} item;

typedef struct lane {
    /* Guards the connection and the queue: the thread holds it while it serves the lane, a
     * submitter that finds the lane ready sends its request itself under it. */
    pthread_mutex_t mu;
    kc_xfer cx; /* the connection being opened */
    bool connecting;
    double connect_deadline;
    kc_conn *conn;
    double idle_since;
    int answered; /* answers on this connection: a connection lost after some is progress */
    /* The queue in order: [head, unsent) sent and waiting for their answers (outstanding of
     * them), [unsent, tail] not sent yet (unsent may be partly written). */
    item *head, *tail, *unsent;
    int outstanding;
    item *in_head, *in_tail; /* handed over, not yet taken by the thread (under kc_pipe.mu) */
    atomic_bool kick;        /* step it on the next round */
    /* The thread's own: */
    double timer;   /* step it at this time (deadlines, the rate limiter) */
    int fd, events; /* what the round polls for it */
} lane;

struct kc_pipe {
    kc_client *c;
    int nlanes, depth;
    lane *lanes;
    pthread_t thread;
    bool started;
    int wake_fd;
    pthread_mutex_t mu; /* the lanes' in lists and stopping; taken before a lane's mu */
    bool stopping;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle;
    unsigned long pending;  /* submitted, callback not returned yet (under idle_mu) */
    item *done, *done_tail; /* answered, callbacks not run yet (the thread's own) */
};

static void item_free(item *it)
{
    if (!it)
        return;
    kc__xfer_free(&it->x);
    free(it->body.data);
    free(it->method);
    free(it->path);
    free(it->err);
    free(it);
}

/* Records its outcome and queues it for run_callbacks (the thread's, after it lets go of the
 * lane). */
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

/* Runs the callbacks of the requests answered so far, with no lock held (a callback may submit
 * again), and frees them. */
static void run_callbacks(kc_pipe *p)
{
    while (p->done) {
        item *it = p->done;
        p->done = it->next;
        if (!p->done)
            p->done_tail = NULL;
        kc_pipe_result r = {.code = it->code,
                            .err = it->err,
                            .status = it->x.p.headers_done ? it->x.p.status : 0,
                            .body = it->body.data,
                            .body_len = it->body.len,
                            .sent_ms = it->sent_ms};
        if (it->cb)
            it->cb(&r, it->ud);
        item_free(it);
        pthread_mutex_lock(&p->idle_mu);
        if (--p->pending == 0)
            pthread_cond_broadcast(&p->idle);
        pthread_mutex_unlock(&p->idle_mu);
    }
}

static void finish_response(kc_pipe *p, item *it)
{
    kc_err err = {0};
    kc_code code = kc_status_decode(it->x.p.status, it->body.data, it->body.len, &err);
    if (code != KC_OK && !err.retry_after_s)
        err.retry_after_s = it->x.p.retry_after_s;
    finish(p, it, code, &err);
}

/* Takes the first outstanding request off the lane: its answer is complete. */
static item *pop_answered(lane *l)
{
    item *h = l->head;
    l->head = h->next;
    if (!l->head)
        l->tail = NULL;
    l->outstanding--;
    return h;
}

/* Fails it with a transport error, in the words the blocking client uses. */
static void finish_failed(kc_pipe *p, item *it, const kc_xfer *how)
{
    kc_err err = {0};
    kc_code code = kc__xfer_error(p->c, how, it->method, it->path, &err);
    finish(p, it, code, &err);
}

static void finish_xerr(kc_pipe *p, item *it, kc_xerr e, const char *detail)
{
    it->x.xerr = e;
    snprintf(it->x.detail, sizeof(it->x.detail), "%s", detail);
    finish_failed(p, it, &it->x);
}

/* Takes the lane's queue off it (to fail or resend it). */
static item *take_queue(lane *l)
{
    item *q = l->head;
    l->head = l->tail = l->unsent = NULL;
    l->outstanding = 0;
    return q;
}

/* Prepares it to go again on a fresh connection. */
static void rewind_item(item *it)
{
    it->x.out_off = 0;
    it->x.xerr = KC_X_OK;
    it->x.detail[0] = '\0';
    kc_http_parser_free(&it->x.p);
    kc_http_parser_init(&it->x.p, false);
    it->body.len = 0;
    if (it->body.data)
        it->body.data[0] = '\0';
    it->sent_ms = 0;
}

static void push(lane *l, item *it)
{
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    if (!l->unsent)
        l->unsent = it;
}

/* The connection is gone (failed, closed, or given up on): the first outstanding request fails
 * with e when part of its answer had arrived (or always, with always_head), every other request
 * goes again on a new connection. A server may close a connection after any answer, with more
 * requests read or on their way; only connections that answered nothing count against a request
 * (PIPE_RESENDS of those, then it fails with e as well). */
static void conn_lost(kc_pipe *p, lane *l, kc_xerr e, const char *detail, bool always_head)
{
    kc__conn_close(l->conn);
    l->conn = NULL;
    bool progress = l->answered > 0;
    int outstanding = l->outstanding;
    item *q = take_queue(l);
    for (int i = 0; q; i++) {
        item *it = q;
        q = q->next;
        bool was_sent = i < outstanding;
        if (was_sent && i == 0 && (always_head || it->x.p.received)) {
            finish_xerr(p, it, e, detail);
            continue;
        }
        if (was_sent && !progress && ++it->resends > PIPE_RESENDS) {
            finish_xerr(p, it, e == KC_X_PARTIAL ? KC_X_GOT_NOTHING : e, detail);
            continue;
        }
        rewind_item(it);
        push(l, it);
    }
    atomic_store(&l->kick, l->head != NULL);
}

static void fail_all(kc_pipe *p, lane *l, const kc_xfer *how)
{
    item *q = take_queue(l);
    while (q) {
        item *it = q;
        q = q->next;
        finish_failed(p, it, how);
    }
}

/* Reads what the connection has, up to PIPE_READ_ROUND (then kicks the lane for the next
 * round); 0 to go on, -1 when the connection was dropped. */
static int lane_read(kc_pipe *p, lane *l, int *want)
{
    char buf[16384];
    for (size_t total = 0;; total += sizeof(buf)) {
        if (total >= PIPE_READ_ROUND) {
            atomic_store(&l->kick, true);
            return 0;
        }
        char why[200];
        bool reset;
        ssize_t n = kc__conn_recv(l->conn, buf, sizeof(buf), &reset, why, sizeof(why));
        if (n == -KC_WANT_READ || n == -KC_WANT_WRITE) {
            *want |= (int)-n;
            return 0;
        }
        if (n == 0) {
            item *h = l->outstanding ? l->head : NULL;
            if (h && kc_http_parse_eof(&h->x.p) == KC_HTTP_DONE)
                finish_response(p, pop_answered(l)); /* a body that ends with the connection */
            h = l->outstanding ? l->head : NULL;
            conn_lost(p, l, h && h->x.p.received ? KC_X_PARTIAL : KC_X_GOT_NOTHING,
                      h && h->x.p.received ? h->x.p.error
                                           : "the server closed the connection without answering",
                      false);
            return -1;
        }
        if (n < 0) {
            char detail[256];
            snprintf(detail, sizeof(detail), "receiving the response failed: %s", why);
            conn_lost(p, l, KC_X_RECV, detail, false);
            return -1;
        }
        size_t off = 0;
        while (off < (size_t)n) {
            item *it = l->outstanding ? l->head : NULL;
            if (!it) {
                conn_lost(p, l, KC_X_PROTO, "the server sent bytes no request asked for", false);
                return -1;
            }
            size_t used = 0;
            kc_http_result r = kc_http_parse(&it->x.p, buf + off, (size_t)n - off, &used,
                                             kc__body_append, &it->body);
            off += used;
            if (r == KC_HTTP_MORE)
                break;
            if (r != KC_HTTP_DONE) {
                bool oom = r == KC_HTTP_ABORTED;
                conn_lost(p, l, oom ? KC_X_NOMEM : KC_X_PROTO,
                          oom ? "out of memory reading the response" : it->x.p.error, true);
                return -1;
            }
            bool keep = it->x.p.keep_alive;
            l->answered++;
            finish_response(p, pop_answered(l));
            if (!keep) {
                /* Connection: close after this answer: the rest go on a new connection. */
                conn_lost(p, l, KC_X_GOT_NOTHING, "the server closed the connection", false);
                return -1;
            }
        }
    }
}

/* Writes l->unsent, the next request, as far as the socket takes it (l->mu held): 1 when it went
 * out whole, 0 when the limiter or the socket (*want) holds it back, -1 when the connection
 * failed (why). */
static int send_next(kc_pipe *p, lane *l, double now, int *want, char *why, size_t size)
{
    item *it = l->unsent;
    if (!it->token) {
        long wait = kc__limiter_reserve(p->c);
        it->token = true;
        it->not_before = now + (double)wait / 1000.0;
    }
    if (now < it->not_before)
        return 0;
    while (it->x.out_off < it->x.out_len) {
        ssize_t w = kc__conn_send(l->conn, it->x.out + it->x.out_off, it->x.out_len - it->x.out_off,
                                  why, size);
        if (w == -KC_WANT_WRITE || w == -KC_WANT_READ) {
            *want |= (int)-w;
            return 0;
        }
        if (w < 0)
            return -1;
        it->x.out_off += (size_t)w;
    }
    it->sent_ms = (uint64_t)(kc__now_s() * 1000.0);
    it->deadline = now + (double)p->c->opts.timeout_ms / 1000.0;
    kc__count_request(p->c);
    l->outstanding++;
    l->unsent = it->next;
    return 1;
}

/* Writes what the lane may send now; 0 to go on, -1 when the connection was dropped. */
static int lane_write(kc_pipe *p, lane *l, double now, int *want)
{
    while (l->unsent && l->outstanding < p->depth) {
        char why[200];
        int r = send_next(p, l, now, want, why, sizeof(why));
        if (r < 0) {
            char detail[256];
            snprintf(detail, sizeof(detail), "sending the request failed: %s", why);
            conn_lost(p, l, KC_X_SEND, detail, false);
            return -1;
        }
        if (r == 0) {
            double nb = l->unsent->not_before;
            if (now < nb && nb < l->timer)
                l->timer = nb;
            return 0;
        }
    }
    return 0;
}

/* Advances one lane as far as its socket allows; sets l->fd, l->events and l->timer. */
static void lane_step(kc_pipe *p, lane *l, double now)
{
    l->fd = -1;
    l->events = 0;
    l->timer = INFINITY;
    if (!l->head) {
        if (!l->conn)
            return;
        /* Idle: readable means the server closed it (or sent what nobody asked for). */
        char b;
        bool reset;
        char why[8];
        ssize_t n = kc__conn_recv(l->conn, &b, 1, &reset, why, sizeof(why));
        if (n != -KC_WANT_READ || now - l->idle_since > KC_CONN_MAX_IDLE_S) {
            kc__conn_close(l->conn);
            l->conn = NULL;
            return;
        }
        l->fd = l->conn->fd;
        l->events = POLLIN;
        l->timer = l->idle_since + KC_CONN_MAX_IDLE_S;
        return;
    }
    if (!l->conn && !l->connecting) {
        memset(&l->cx, 0, sizeof(l->cx));
        l->cx.c = p->c;
        l->cx.connect_only = true;
        kc_http_parser_init(&l->cx.p, false);
        l->connecting = true;
        l->connect_deadline = now + (double)p->c->opts.connect_timeout_ms / 1000.0;
    }
    if (l->connecting) {
        int r = kc__xfer_step(&l->cx);
        if (r > 0 && now >= l->connect_deadline) {
            l->cx.xerr = KC_X_TIMEOUT;
            snprintf(l->cx.detail, sizeof(l->cx.detail), "not connected within %ld ms",
                     p->c->opts.connect_timeout_ms);
            r = -1;
        }
        if (r < 0) {
            fail_all(p, l, &l->cx);
            kc__xfer_free(&l->cx);
            l->connecting = false;
            return;
        }
        if (r > 0) {
            l->fd = kc__xfer_fd(&l->cx);
            l->events = (r & KC_WANT_READ ? POLLIN : 0) | (r & KC_WANT_WRITE ? POLLOUT : 0);
            l->timer = l->connect_deadline;
            return;
        }
        l->conn = l->cx.conn;
        l->cx.conn = NULL;
        l->answered = 0;
        kc__xfer_free(&l->cx);
        l->connecting = false;
    }
    int want = 0;
    if (lane_write(p, l, now, &want) < 0 || lane_read(p, l, &want) < 0)
        return; /* the connection is gone; kick says whether to go again */
    if (l->unsent && l->outstanding < p->depth && !(want & KC_WANT_WRITE))
        atomic_store(&l->kick, true); /* answers made room for more requests */
    if (l->outstanding && now >= l->head->deadline) {
        char detail[128];
        snprintf(detail, sizeof(detail), "no complete response within %ld ms",
                 p->c->opts.timeout_ms);
        conn_lost(p, l, KC_X_TIMEOUT, detail, true);
        return;
    }
    if (l->outstanding && l->head->deadline < l->timer)
        l->timer = l->head->deadline;
    if (!l->head)
        l->idle_since = now;
    l->fd = l->conn->fd;
    l->events = POLLIN | (want & KC_WANT_WRITE ? POLLOUT : 0);
}

static void *pipe_thread(void *arg)
{
    kc_pipe *p = arg;
    struct pollfd *pfd = calloc((size_t)p->nlanes + 1, sizeof(*pfd));
    int *which = calloc((size_t)p->nlanes + 1, sizeof(*which));
    bool stop = false;
    while (pfd && which) {
        pthread_mutex_lock(&p->mu);
        stop = p->stopping;
        for (int i = 0; i < p->nlanes; i++) {
            lane *l = &p->lanes[i];
            while (l->in_head) {
                item *it = l->in_head;
                l->in_head = it->next;
                if (it->injected != KC_OK) {
                    kc_err err = {0};
                    kc_code code =
                        kc_err_set(&err, it->injected, "%s %s: injected fault (test hook)",
                                   it->method, it->path);
                    finish(p, it, code, &err);
                } else {
                    pthread_mutex_lock(&l->mu);
                    push(l, it);
                    pthread_mutex_unlock(&l->mu);
                    atomic_store(&l->kick, true);
                }
            }
            l->in_tail = NULL;
        }
        pthread_mutex_unlock(&p->mu);
        run_callbacks(p);
        if (stop)
            break;
        double now = kc__now_s(), until = INFINITY;
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = p->wake_fd, .events = POLLIN};
        for (int i = 0; i < p->nlanes; i++) {
            lane *l = &p->lanes[i];
            if (atomic_exchange(&l->kick, false) || now >= l->timer) {
                pthread_mutex_lock(&l->mu);
                lane_step(p, l, now);
                pthread_mutex_unlock(&l->mu);
                run_callbacks(p);
                /* more to do at once (or a lost connection with requests left) */
                if (atomic_load(&l->kick))
                    until = now;
            }
            if (l->timer < until)
                until = l->timer;
            if (l->fd >= 0 && l->events) {
                which[n] = i;
                pfd[n++] = (struct pollfd){.fd = l->fd, .events = (short)l->events};
            }
        }
        int ms = -1;
        if (until < INFINITY) {
            double d = (until - now) * 1000.0;
            ms = d <= 0 ? 0 : d > 60000 ? 60000 : (int)ceil(d);
        }
        if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents) {
            uint64_t v;
            if (read(p->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                break;
        }
        for (int k = 1; k < n; k++)
            if (pfd[k].revents)
                atomic_store(&p->lanes[which[k]].kick, true);
    }
    free(pfd);
    free(which);
    /* Stopped (or the thread could not go on): nothing left is answered. */
    kc_xfer gone = {0};
    gone.xerr = KC_X_ABORTED;
    for (int i = 0; i < p->nlanes; i++) {
        lane *l = &p->lanes[i];
        pthread_mutex_lock(&p->mu);
        item *in = l->in_head;
        l->in_head = l->in_tail = NULL;
        pthread_mutex_unlock(&p->mu);
        pthread_mutex_lock(&l->mu);
        while (in) {
            item *it = in;
            in = in->next;
            push(l, it);
        }
        fail_all(p, l, &gone);
        if (l->connecting)
            kc__xfer_free(&l->cx);
        l->connecting = false;
        kc__conn_close(l->conn);
        l->conn = NULL;
        pthread_mutex_unlock(&l->mu);
        run_callbacks(p);
    }
    return NULL;
}

kc_code kc_pipe_new(kc_client *c, int lanes, int depth, kc_pipe **out, kc_err *err)
{
    *out = NULL;
    if (!c || lanes < 1 || lanes > 64 || depth < 1)
        return kc_err_set(err, KC_EARG,
                          "kc_pipe_new: a client, 1 to 64 lanes and a depth of 1 or "
                          "more are required");
    kc_pipe *p = calloc(1, sizeof(*p));
    if (!p)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    p->c = c;
    p->nlanes = lanes;
    p->depth = depth;
    p->lanes = calloc((size_t)lanes, sizeof(*p->lanes));
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->idle_mu, NULL);
    pthread_cond_init(&p->idle, NULL);
    if (!p->lanes || p->wake_fd < 0) {
        kc_code rc = p->lanes ? kc_err_set(err, KC_EIO, "eventfd: %s", strerror(errno))
                              : kc_err_set(err, KC_ENOMEM, "out of memory");
        kc_pipe_free(p);
        return rc;
    }
    for (int i = 0; i < lanes; i++) {
        pthread_mutex_init(&p->lanes[i].mu, NULL);
        atomic_init(&p->lanes[i].kick, false);
        p->lanes[i].fd = -1;
        p->lanes[i].timer = INFINITY;
    }
    int e = pthread_create(&p->thread, NULL, pipe_thread, p);
    if (e != 0) {
        kc_pipe_free(p);
        return kc_err_set(err, KC_EIO, "cannot start the request pipe's thread: %s", strerror(e));
    }
    p->started = true;
    *out = p;
    return KC_OK;
}

static unsigned lane_of(const kc_pipe *p, const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *s = key ? key : ""; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % (unsigned)p->nlanes;
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
    item *it = calloc(1, sizeof(*it));
    if (!it)
        return kc_err_set(err, KC_ENOMEM, "out of memory");
    kc_code code = kc__xfer_init(&it->x, p->c, req, kc__body_append, &it->body, err);
    if (code == KC_OK) {
        it->method = strdup(req->method);
        it->path = strdup(req->path);
        if (!it->method || !it->path)
            code = kc_err_set(err, KC_ENOMEM, "out of memory");
    }
    if (code != KC_OK) {
        item_free(it);
        return code;
    }
    it->cb = cb;
    it->ud = ud;
    it->injected = kc__fault_check(req);
    lane *l = &p->lanes[lane_of(p, lane_key)];
    pthread_mutex_lock(&p->mu);
    bool stopping = p->stopping, direct = false;
    if (!stopping) {
        pthread_mutex_lock(&p->idle_mu);
        p->pending++;
        pthread_mutex_unlock(&p->idle_mu);
        /* A lane with its connection up and nothing waiting to be sent takes the request from
         * this thread at once (the pipe's thread may be busy or not scheduled yet); otherwise
         * the thread sends it, behind those before it. */
        if (it->injected == KC_OK && !l->in_head && pthread_mutex_trylock(&l->mu) == 0) {
            direct = l->conn && !l->unsent && l->outstanding < p->depth;
            if (direct)
                push(l, it);
            else
                pthread_mutex_unlock(&l->mu);
        }
        if (!direct) {
            if (l->in_tail)
                l->in_tail->next = it;
            else
                l->in_head = it;
            l->in_tail = it;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (stopping) {
        item_free(it);
        return kc_err_set(err, KC_ECANCELED, "%s %s: the request pipe is stopping", req->method,
                          req->path);
    }
    if (direct) {
        /* Whatever is left (the limiter, a full socket, a failed connection) the thread finishes
         * in its turn; it also needs to know the answer's deadline. */
        char why[200];
        int want = 0;
        send_next(p, l, kc__now_s(), &want, why, sizeof(why));
        pthread_mutex_unlock(&l->mu);
    }
    atomic_store(&l->kick, true);
    uint64_t one = 1;
    if (write(p->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        kc_err_clear(err); /* the counter is full: the thread is awake anyway */
    return KC_OK;
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

void kc_pipe_free(kc_pipe *p)
{
    if (!p)
        return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stopping = true;
        pthread_mutex_unlock(&p->mu);
        uint64_t one = 1;
        if (write(p->wake_fd, &one, sizeof(one)) < 0) {
            /* full: the thread wakes anyway */
        }
        pthread_join(p->thread, NULL);
    }
    if (p->wake_fd >= 0)
        close(p->wake_fd);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->idle_mu);
    pthread_cond_destroy(&p->idle);
    for (int i = 0; p->lanes && i < p->nlanes; i++)
        pthread_mutex_destroy(&p->lanes[i].mu);
    free(p->lanes);
    free(p);
}
