/* kc_client_int: the client's internals shared by kc_client.c (blocking requests),
 * kc_client_xfer.c (one request on a libcurl easy handle), kc_client_stream.c (streams on a
 * libuv loop) and kc_client_pipe.c (requests answered on the pipe's thread). */
#ifndef KC_CLIENT_INT_H
#define KC_CLIENT_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kc_client.h"
#include "kc_exec.h"

/* The protocol a client's server answers with (kc_client.proto). */
#define KC_PROTO_UNKNOWN 0
#define KC_PROTO_H1      1 /* HTTP/1.x: transfers never wait for a connection to multiplex */
#define KC_PROTO_H2      2

/* Idle easy handles (each keeping its connection alive) kept for blocking requests. */
#define KC_CLIENT_POOL_MAX 8

typedef struct kc_loopctx kc_loopctx;

/* A TLS file the client watches: its path and what stat said when it was last read. */
typedef struct kc_tls_file {
    char *path;
    struct stat st;
} kc_tls_file;
typedef struct kc_body_buf kc_body_buf;

/* Transport failures: what went wrong before a complete HTTP response arrived. */
typedef enum {
    KC_X_OK = 0,
    KC_X_RESOLVE,     /* the host name did not resolve; nothing was sent */
    KC_X_CONNECT,     /* refused or unreachable; nothing was sent */
    KC_X_TLS_VERIFY,  /* the server's certificate failed verification */
    KC_X_TLS_CONFIG,  /* the CA or client certificate cannot be loaded */
    KC_X_TLS,         /* TLS setup or handshake failed otherwise */
    KC_X_SEND,        /* the connection failed while the request was sent */
    KC_X_RECV,        /* the connection failed while the response was read */
    KC_X_GOT_NOTHING, /* the server closed the connection without answering */
    KC_X_PARTIAL,     /* the connection closed before the response ended */
    KC_X_PROTO,       /* the response is not valid HTTP */
    KC_X_TIMEOUT,
    KC_X_NOMEM,
    KC_X_ABORTED, /* the body callback stopped the transfer */
    KC_X_PROXY,   /* the proxy refused or failed the tunnel */
} kc_xerr;

/* Receives a response body chunk; false stops the transfer (KC_X_ABORTED). */
typedef bool (*kc_body_cb)(const char *data, size_t len, void *ud);

typedef struct kc_xfer kc_xfer;
/* Called on the loop's thread when a transfer in the loop's multi handle has finished. */
typedef void (*kc_xfer_done_fn)(kc_xfer *x, CURLcode rc);

/* One request/response exchange on a libcurl easy handle. */
struct kc_xfer {
    kc_client *c;
    CURL *h;
    kc_xfer_done_fn on_done; /* set by whoever adds it to a loop's multi handle */
    struct curl_slist *headers;
    kc_body_cb on_body;
    void *ud;
    int status;        /* HTTP status once the headers arrived, else 0 */
    size_t received;   /* body bytes delivered */
    int retry_after_s; /* Retry-After, 0 when absent */
    char *content_type;
    kc_xerr xerr;
    unsigned char method;   /* kc__method_index of the request's method */
    bool counted;           /* in rest_client_requests_total already */
    unsigned long cred_gen; /* the exec credential generation the request carries */
    char detail[CURL_ERROR_SIZE + 64];
    char errbuf[CURL_ERROR_SIZE];
};

/* A client's streaming state on a libuv loop (kc_client_stream.c): one multi handle driven by
 * libcurl's socket interface. A pipe made on an attached client (kc_client_pipe.c) runs its
 * transfers in the same multi handle, so that everything shares one HTTP/2 connection. */
struct kc_loopctx {
    kc_client *c;
    uv_loop_t *loop;
    pthread_t thread; /* the loop's thread (the one that attached) */
    CURLM *multi;
    uv_timer_t *timer;  /* libcurl's timeout */
    uv_timer_t *idle;   /* checks the streams for silence (NULL: no idle timeout) */
    uint64_t idle_ms;   /* a stream that received nothing for this long ends */
    int in_curl;        /* inside curl_multi_socket_action: no handle may be removed */
    kc_stream *streams; /* every live stream */
    bool dead_pending;  /* a stream was cancelled inside a curl callback */
    uv_async_t *cancel; /* kc_client_cancel's wake-up: ends every stream on the loop */
    kc_pipe *pipe;      /* the pipe running on this loop, or NULL */
    bool unwaited;      /* HTTP/1.1 seen: waiting transfers were told not to wait */
};

/* When x's transfer has no connection yet, takes it out of the multi handle and puts it back
 * not waiting for a multiplexed connection (libcurl would hold it until some transfer ends).
 * Not CURLE_OK: it could not be put back (it is out of the multi handle; end it with that). */
CURLcode kc__xfer_unwait(CURLM *multi, kc_xfer *x);

/* rest_client_requests_total's table (kc_client_metrics.c): a slot per (status, method) seen. */
#define KC_METHODS      8
#define KC_RESULT_SLOTS 48
typedef struct kc_result_slot {
    atomic_uint key; /* 0 free, else 1 + status × KC_METHODS + method */
    atomic_ullong count;
} kc_result_slot;
unsigned char kc__method_index(const char *method);
/* Counts x's request once: its HTTP status, or a transport failure when it has none. */
void kc__count_result(kc_client *c, kc_xfer *x);
/* The host[:port] of a URL (client-go's host label), malloc'd; NULL when out of memory. */
char *kc__url_host(const char *url);
/* The registry hook kc_client_register_metrics adds (ud: the client). */
void kc__sample_results(kc_registry *r, void *ud);

struct kc_client {
    /* Our own copy of the configuration fields the client needs. */
    char *server;
    char *ca_pem;
    size_t ca_pem_len;
    bool insecure;
    char *tls_server_name;
    char *token;
    char *token_file;
    char *cert_pem;
    size_t cert_pem_len;
    char *key_pem;
    size_t key_pem_len;
    char *source;
    char *proxy_url; /* the kubeconfig's proxy-url, or NULL (then HTTPS_PROXY/NO_PROXY apply) */
    kc_exec_config *exec; /* the exec credential plugin, or NULL */
    /* Its last credential, kept until it expires or the server answers 401 (under exec_mu, which
     * also makes concurrent requests wait for one run of the plugin). */
    pthread_mutex_t exec_mu;
    kc_exec_result exec_cred;
    bool exec_have;
    unsigned long exec_gen; /* bumped per plugin run: a 401 drops only the credential it used */

    char *base_url; /* where requests go: server, or the server with tls_server_name as host */
    struct curl_slist *connect_to; /* "name:port:host:port" with tls_server_name, else NULL */
    char *host_hdr;                /* "Host: authority" when tls_server_name is set, else NULL */
    bool loopback;                 /* the server is on this machine: no proxy, as client-go does */
    bool no_gzip;                  /* the kubeconfig's disable-compression */

    kc_client_opts opts; /* defaults resolved */
    char *user_agent;

    CURLSH *share; /* DNS cache and TLS sessions shared by every handle */
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];

    atomic_bool cancelled; /* kc_client_cancel was called */
    atomic_int proto;      /* what the server answered with last: KC_PROTO_* */
    pthread_cond_t wake;   /* on mu: wakes retry and rate-limit sleeps (CLOCK_MONOTONIC) */
    /* The client's pipe (kc_client_pipe.c), or NULL: its thread also carries the blocking
     * requests of other threads, so that they share its connection (one, over HTTP/2). Under
     * mu; pipe_users counts the requests using it, which kc_pipe_free waits out (wake). */
    kc_pipe *pipe;
    int pipe_users;

    pthread_mutex_t mu; /* guards everything below */
    /* The files ca_pem, cert_pem and key_pem came from (NULL: inline), read again when they
     * change (checked at most once a second); the PEM buffers are replaced under mu. */
    kc_tls_file ca_file, cert_file, key_file;
    double tls_checked_s;
    CURL *pool[KC_CLIENT_POOL_MAX];
    int npool;
    char *tok_cache; /* last token read from token_file */
    struct stat tok_st;
    bool tok_have;
    double lim_tokens;
    double lim_last_s;
    uint64_t rng;
    kc_client_stats stats;

    kc_loopctx *lc; /* streaming state, NULL until kc_client_attach_loop */

    /* rest_client_requests_total (kc_client_metrics.c) */
    kc_result_slot results[KC_RESULT_SLOTS];
    atomic_ullong results_dropped; /* the table was full */
    char *metric_host;             /* the server's host[:port] */
    kc_registry *reg;              /* where kc_client_register_metrics put them, or NULL */
    kc_metric *m_requests;
};

/* Prepares x for req on a new easy handle (or h when non-NULL, which x then owns): URL, method,
 * headers (token included), body, TLS, proxy and timeouts. timeout_ms 0: no overall timeout. */
kc_code kc__xfer_init(kc_xfer *x, kc_client *c, CURL *h, const kc_request *req, long timeout_ms,
                      kc_body_cb on_body, void *ud, kc_err *err);
/* Records the outcome of a finished transfer: status, Retry-After, content type, and for a
 * failure the kind (x->xerr) and its message (x->detail). */
void kc__xfer_finish(kc_xfer *x, CURLcode rc);
/* Records which protocol x's response came in (once its headers are in). */
void kc__note_proto(kc_xfer *x);
/* Frees x; its handle too unless taken (x->h set to NULL by the caller). */
void kc__xfer_free(kc_xfer *x);

/* Takes an idle pooled easy handle (reset, its connection kept), or NULL. */
CURL *kc__pool_take(kc_client *c);
/* Gives h back to the pool (or cleans it up, closing its connection, when the pool is full or
 * the client has a pipe). */
void kc__pool_give(kc_client *c, CURL *h);

/* Maps a failed transfer to a kc_code with a message naming the request. */
kc_code kc__xfer_error(kc_client *c, const kc_xfer *x, const char *method, const char *path,
                       kc_err *err);

/* Takes one token from the rate limiter; returns how long the caller must wait (ms). */
long kc__limiter_reserve(kc_client *c);

/* Counts one request sent, and the connections it opened. */
void kc__count_request(kc_client *c, long new_connections);
/* Counts connections a stream opened (its request was counted when it started). */
void kc__count_connections(kc_client *c, long new_connections);
/* strdup that maps NULL to NULL and reports allocation failure through *ok. */
char *kc__dup_opt(const char *s, bool *ok);
/* Monotonic seconds. */
double kc__now_s(void);

/* A response body collected in memory (NUL-terminated once anything arrived). */
struct kc_body_buf {
    char *data;
    size_t len, cap;
};
/* A kc_body_cb appending to the kc_body_buf ud; false when out of memory. */
bool kc__body_append(const char *p, size_t k, void *ud);

/* The bearer token to send (malloc'd, or NULL for none): the static token, the token file (re-read
 * when it changed) or the exec plugin's (run when none is cached or it expired; *gen says which
 * run). The caller wipes and frees it. */
kc_code kc__token_get(kc_client *c, char **out, unsigned long *gen, kc_err *err);
/* The server refused the credential of generation gen (401): an exec plugin's is dropped, so the
 * next request runs the plugin again. Returns whether a fresh credential can be had (exec). */
bool kc__token_refused(kc_client *c, unsigned long gen);

/* The client's pipe, held for one blocking request (NULL when it has none, or when the caller is
 * the pipe's own thread); kc__pipe_release gives it back. */
kc_pipe *kc__pipe_acquire(kc_client *c);
void kc__pipe_release(kc_client *c, kc_pipe *p);
/* Runs req on the pipe's thread and waits for it: on KC_OK *cc is the transfer's outcome and x
 * (without a handle) and body hold what a direct transfer would; otherwise err says why it never
 * ran (cancelled, out of memory, a bad request). The caller took the rate-limiter token. */
kc_code kc__pipe_do(kc_pipe *p, const kc_request *req, kc_xfer *x, kc_body_buf *body, CURLcode *cc,
                    kc_err *err);
/* Wakes the pipe's thread or, on a loop, the pipe's loop handler (the client's cancel). */
void kc__pipe_wake(kc_pipe *p);
/* On the loop's thread after libcurl ran: starts what the pipe's answers made ready and runs
 * their callbacks. */
void kc__pipe_loop_run(kc_pipe *p);
/* HTTP/1.1 seen on the loop: the pipe's transfers in flight stop waiting (kc__xfer_unwait). */
void kc__pipe_unwait(kc_pipe *p);

/* Reads the CA, client certificate and key files again when they changed on disk (at most once
 * a second); on a read failure the previous contents stay and a warning is logged. */
void kc__tls_files_refresh(kc_client *c);

/* Sleeps ms unless the client is cancelled meanwhile; false when cancelled. */
bool kc__sleep(kc_client *c, long ms);
/* The error every request of a cancelled client gets. */
kc_code kc__cancelled_error(const char *method, const char *path, kc_err *err);

/* Runs the fault hook set by kc_client_set_fault_hook (tests): KC_OK when none is set. */
kc_code kc__fault_check(const kc_request *req);

/* Ends every stream of the attached loop with KC_ECANCELED, on the loop's thread (called under
 * c->mu by kc_client_cancel). */
void kc__stream_cancel(kc_client *c);
/* Tears down the streaming state (kc_client_stream.c); used by kc_client_free. */
void kc__stream_detach(kc_client *c);

#endif
