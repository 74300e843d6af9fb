/* kc_client: an HTTP connection to one Kubernetes API server (TLS, auth, rate limit, retries). */
#ifndef KC_CLIENT_H
#define KC_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kc_config.h"
#include "kc_error.h"
#include "kc_metrics.h"

typedef struct kc_client kc_client;

typedef struct kc_client_opts {
    double qps;              /* client-side rate limit; 0 → 50; <0 → unlimited */
    int burst;               /* token bucket depth; 0 → 100 */
    long timeout_ms;         /* whole-request timeout for non-streaming calls; 0 → 30000 */
    long connect_timeout_ms; /* 0 → 10000 */
    int max_retries;         /* retries of a retryable failure; 0 → 5; <0 → none */
    long backoff_base_ms;    /* first retry delay (jittered, doubles); 0 → 200 */
    long backoff_max_ms;     /* cap; 0 → 10000 */
    const char *user_agent;  /* NULL → "gpu-operator/<version>" */
    /* Streams only: end a stream (KC_ETIMEDOUT) when nothing arrives for this many seconds (one
     * loop timer checks every stream each quarter of it, at most every 5 s); 0 → off. Off by
     * default because a quiet watch may legitimately send nothing for minutes; watches that
     * ask for bookmarks get one about every minute, so a client that only watches with
     * bookmarks can set it above that. Dead peers are also found by TCP keepalive (idle 30 s,
     * probes every 10 s) and the server ends watches after their timeoutSeconds. */
    long stream_idle_timeout_s;
} kc_client_opts;

/* Creates a client for the server in cfg (the config is copied; the caller keeps ownership).
 * TLS verification is on unless the config says insecure-skip-tls-verify; without ca_pem the
 * system CA store is used. When both token and token_file are set the file wins (as in
 * client-go); the file is stat'ed before each request and re-read when it changed, and the last
 * good token is kept if it vanishes. tls_server_name: the certificate is verified against that
 * name (the connection still goes to the server's address, with the original Host header). */
kc_code kc_client_new(const kc_config *cfg, const kc_client_opts *opts, kc_client **out,
                      kc_err *err);
/* Frees the client; every stream must have ended or been cancelled first. Accepts NULL. If the
 * client is still attached it is detached first (see kc_client_detach_loop). */
void kc_client_free(kc_client *c);

typedef struct kc_request {
    const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;         /* absolute path with query, e.g. "/api/v1/pods?limit=500" */
    const char *content_type; /* of body; NULL → "application/json" when a body is given */
    const char *body;         /* may be NULL */
    size_t body_len;
    const char *accept; /* NULL → "application/json" */
    bool no_retry;      /* never retry this request */
} kc_request;

typedef struct kc_response {
    int status; /* HTTP status; 0 when no response arrived */
    char *body; /* NUL-terminated, malloc'd (may be NULL) */
    size_t body_len;
    char *content_type; /* malloc'd or NULL */
    int retry_after_s;  /* Retry-After header in seconds, 0 when absent */
} kc_response;

/* Performs one request, blocking (over the client's pipe's connection when it has a pipe and the
 * caller is not the pipe's thread), with rate limiting and retries: GET/HEAD/PUT/DELETE are retried
 * on connection errors and 5xx; every method is retried on 429 (after Retry-After when given) and
 * when the connection was refused before the request was sent. Thread-safe: any thread may call
 * it concurrently. Returns KC_OK for 2xx; otherwise the code decoded from the server's Status
 * object (message and reason kept in err) or the transport error. resp, when non-NULL, receives
 * the last response either way and must be released with kc_response_free.
 * Details: retries wait a jittered exponential backoff (uniform in [d/2, d], d doubling from
 * backoff_base_ms to backoff_max_ms) or the Retry-After / details.retryAfterSeconds the server
 * gave (capped at 300 s). Client timeouts (KC_ETIMEDOUT) and TLS errors are not retried. Each
 * attempt takes a rate-limiter token. Transport errors: KC_EIO (refused, reset, truncated),
 * KC_ETIMEDOUT, KC_ETLS (verification or handshake; the message says against which CA). */
kc_code kc_client_do(kc_client *c, const kc_request *req, kc_response *resp, kc_err *err);
void kc_response_free(kc_response *resp);

/* Cancels every request of the client, for good (a stop token): requests in flight end with
 * KC_ECANCELED within about a second (libcurl's progress callback; the pipe and streams at
 * once), retry and rate-limit waits wake at once, and every later request fails with
 * KC_ECANCELED without being sent. Thread-safe, idempotent; the client still has to be freed. */
void kc_client_cancel(kc_client *c);
/* Whether kc_client_cancel was called. */
bool kc_client_cancelled(kc_client *c);
/* Whether the server's last answer came over HTTP/2 (so requests share one connection); false
 * before any answer and over HTTP/1.x. */
bool kc_client_multiplexed(kc_client *c);

/* Decodes a Kubernetes Status object (or any error body) returned with an HTTP status into err;
 * returns the code. Used for responses and for watch ERROR events. body may be NULL. */
kc_code kc_status_decode(int http_status, const char *body, size_t len, kc_err *err);
kc_code kc_status_from_json(int http_status, const json_t *status, kc_err *err);

/* Fault injection for tests: when a hook is set, kc_client_do calls it before each attempt; a
 * return other than KC_OK fails that attempt with that code (nothing is sent, no retry), as a
 * broken connection would. Process-wide; NULL (the default) turns it off. Tests only. */
typedef kc_code (*kc_client_fault_hook)(const kc_request *req, void *ud);
void kc_client_set_fault_hook(kc_client_fault_hook hook, void *ud);

/* ---- Streaming requests on a libuv loop (libcurl's multi-socket interface: over HTTP/2 every
 * stream of the client shares one connection), used by watches and informers ---- */

typedef struct kc_stream kc_stream;
/* Called for each chunk of a 2xx response body as it arrives (any split, any size). */
typedef void (*kc_stream_data_cb)(kc_stream *s, const char *data, size_t len, void *ud);
/* Called exactly once when the stream ends: KC_OK for a cleanly finished 2xx body, else the
 * transport error or the decoded API error (err holds the message). The stream is freed after
 * this callback returns. Never called if kc_stream_start failed, nor after kc_stream_cancel. */
typedef void (*kc_stream_done_cb)(kc_stream *s, kc_code code, const kc_err *err, void *ud);

/* Binds the client's streaming requests to a loop (once, before any kc_stream_start), called on
 * the loop's thread, which is then the only thread allowed to start or cancel streams. */
kc_code kc_client_attach_loop(kc_client *c, uv_loop_t *loop, kc_err *err);
/* Detaches from the loop, closing its handles; call before the loop is closed, never from inside
 * a stream callback. Streams still live are freed without callbacks; a pipe running on the loop
 * is stopped (kc_pipe_stop). The handles close
 * asynchronously: run the loop (uv_run) afterwards so their close callbacks free them. A no-op
 * when not attached. */
void kc_client_detach_loop(kc_client *c);

/* Starts a request whose body is delivered incrementally; no overall timeout applies (watches
 * carry timeoutSeconds instead) but a low-speed timeout detects dead connections. Rate limited
 * like every request (the wait is a loop timer, not a blocking sleep). Not retried: the caller
 * (an informer) owns resumption. */
kc_code kc_stream_start(kc_client *c, const kc_request *req, kc_stream_data_cb on_data,
                        kc_stream_done_cb on_done, void *ud, kc_stream **out, kc_err *err);
/* Cancels a running stream; no callback fires afterwards and the stream is freed. Safe inside
 * on_data (of this or another stream; the transfer is then torn down once it yields), ignored
 * inside this stream's on_done. Accepts NULL. */
void kc_stream_cancel(kc_stream *s);

/* ---- The request pipe: requests handed over at once, answered later on the pipe's thread ---- */

typedef struct kc_pipe kc_pipe;

typedef struct kc_pipe_result {
    kc_code code;      /* KC_OK for 2xx; else the decoded API error or the transport error */
    const kc_err *err; /* the message when code is not KC_OK (NULL: out of memory) */
    int status;        /* HTTP status; 0 when no response arrived */
    const char *body;  /* the response body, NUL-terminated (may be NULL) */
    size_t body_len;
    unsigned long long sent_ms; /* CLOCK_MONOTONIC ms when it was about to be sent (libcurl's
                                 * pre-transfer time); 0 when it was never sent */
} kc_pipe_result;
/* Called once per submitted request, on the pipe's thread (or its loop's), with none of the pipe's
 * locks held (it may submit again); r and what it points to are valid during the call only. */
typedef void (*kc_pipe_done_cb)(const kc_pipe_result *r, void *ud);

/* Starts a pipe on c (which must outlive it). On a client attached to a loop
 * (kc_client_attach_loop; call this on the loop's thread) the pipe runs on that loop, in the
 * multi handle of the client's streams: over HTTP/2 streams, pipelined and blocking requests all
 * share one connection, and no thread is started; its callbacks then run on the loop's thread.
 * Otherwise it runs on a thread of its own with a multi handle of its own. Over HTTP/2 every
 * request is multiplexed on one connection; over HTTP/1.1 up to 4 x `lanes` keep-alive
 * connections carry one request each at a time. Lane keys are spread over `lanes` x `depth`
 * ordered queues (at most 1,024). The first pipe of a client also carries the client's blocking
 * requests (kc_client_do from threads other than the pipe's own), so that they share its
 * connection; the client then keeps no idle connection of its own. */
kc_code kc_pipe_new(kc_client *c, int lanes, int depth, kc_pipe **out, kc_err *err);
/* Hands req over (copied; the bearer token is read when it starts) and returns without waiting
 * for the answer. Requests with the same lane_key go one at a time, in the order submitted, so
 * they reach the server in that order; other keys go side by side (at most max(64, 2 x the
 * connections) in flight). Each takes a token of the client's rate limiter before it starts; the
 * whole-request timeout counts from then. libcurl sends a request again when a reused keep-alive
 * connection turns out closed before any answer, so only requests that are safe to send twice
 * belong here: merge patches that set values, creations of named objects, deletions. Nothing
 * else is retried: 429, 5xx and transport failures reach cb for the caller to decide; so do a bad
 * request line or header and a credential that cannot be had. Thread-safe. Fails (cb never
 * called) on bad arguments, out of memory, a cancelled client or a pipe that is stopping. */
kc_code kc_pipe_submit(kc_pipe *p, const char *lane_key, const kc_request *req, kc_pipe_done_cb cb,
                       void *ud, kc_err *err);
/* Waits until every request submitted so far has been answered and its callback has returned.
 * Never from a callback, nor from the thread of the loop the pipe runs on. */
void kc_pipe_drain(kc_pipe *p);
/* Stops the pipe: requests not answered yet complete with KC_ECANCELED (their callbacks and
 * waiting blocking callers are answered before this returns), later submissions fail, blocking
 * requests go on their own connection again; the thread ends (or, on a loop, its loop handles
 * close: call it on the loop's thread, with the loop running or stopped, and run the loop
 * afterwards). Idempotent; accepts NULL. Detaching the loop stops a pipe running on it. */
void kc_pipe_stop(kc_pipe *p);
/* Stops the pipe (kc_pipe_stop, same rules) and frees it. Accepts NULL. */
void kc_pipe_free(kc_pipe *p);

/* Counters for tests and metrics (thread-safe snapshot). */
typedef struct kc_client_stats {
    unsigned long requests;    /* HTTP requests sent, retries included */
    unsigned long connections; /* connections opened (HTTP/2 multiplexes many requests on one) */
    unsigned long retries;
    unsigned long throttled_ms; /* total time spent waiting on the rate limiter */
} kc_client_stats;
void kc_client_get_stats(kc_client *c, kc_client_stats *out);

/* Requests by answer and method, as client-go's rest_client_requests_total counts them: each
 * HTTP request sent (blocking, pipelined, a stream), retries included, once its answer's headers
 * came, or when its transfer failed without an answer. */
typedef struct kc_client_result {
    int code;           /* the HTTP status; 0 no answer (client-go's "<error>"); -1 other */
    const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other" */
    unsigned long long count;
} kc_client_result;
/* Fills out[0..max) with the rows counted so far (any order) and returns how many. The table is
 * fixed (48 status and method pairs; what does not fit is one row with code -1): counting
 * allocates nothing. */
size_t kc_client_results(kc_client *c, kc_client_result *out, size_t max);
/* The server's host[:port], client-go's host label ("none" without one). */
const char *kc_client_host(kc_client *c);
/* Registers rest_client_requests_total{code,host,method} (client-go's name, help and labels;
 * code "<error>" for a request without an answer) in r, filled from kc_client_results when r
 * renders. Once per registry and client; r must outlive c (kc_client_free removes the hook). */
kc_code kc_client_register_metrics(kc_client *c, kc_registry *r, kc_err *err);

#endif
