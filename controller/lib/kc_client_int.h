/* kc_client_int: the client's internals shared by kc_client.c (blocking requests),
 * kc_client_conn.c (connections and transfers) and kc_client_stream.c (streams on a loop). */
#ifndef KC_CLIENT_INT_H
#define KC_CLIENT_INT_H

#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kc_client.h"
#include "kc_http.h"
#include "kc_url.h"

/* Idle keep-alive connections kept for blocking requests. */
#define KC_CLIENT_POOL_MAX 8
/* An idle connection older than this is closed rather than reused (API servers and load
 * balancers drop idle connections after a few minutes). */
#define KC_CONN_MAX_IDLE_S 110.0

typedef struct kc_loopctx kc_loopctx;

/* One TCP connection, with TLS on https. Heap-allocated: the TLS layer keeps a pointer to it. */
typedef struct kc_conn {
    int fd;
    bool tls;
    mbedtls_ssl_context ssl;
    int sys_errno;     /* errno of the last failed send/recv, for messages */
    double idle_since; /* when it went back to the pool */
} kc_conn;

/* Transport failures: what went wrong before a complete HTTP response arrived. */
typedef enum {
    KC_X_OK = 0,
    KC_X_RESOLVE,     /* the host name did not resolve; nothing was sent */
    KC_X_CONNECT,     /* refused or unreachable; nothing was sent */
    KC_X_TLS_VERIFY,  /* the server's certificate failed verification */
    KC_X_TLS_CONFIG,  /* the CA or client certificate cannot be loaded; detail is the message */
    KC_X_TLS,         /* TLS setup or handshake failed otherwise */
    KC_X_SEND,        /* the connection failed while the request was sent */
    KC_X_RECV,        /* the connection failed while the response was read */
    KC_X_GOT_NOTHING, /* the server closed the connection without answering */
    KC_X_PARTIAL,     /* the connection closed before the response ended */
    KC_X_PROTO,       /* the response is not valid HTTP/1.1 */
    KC_X_TIMEOUT,     /* set by the drivers */
    KC_X_NOMEM,
    KC_X_ABORTED, /* the body callback stopped the transfer */
} kc_xerr;

/* Wants returned by kc__xfer_step. */
#define KC_WANT_READ  1
#define KC_WANT_WRITE 2

/* One request/response exchange, advanced by kc__xfer_step whenever its socket is ready. */
typedef struct kc_xfer {
    kc_client *c;
    kc_conn *conn;
    bool reused;       /* conn came from the pool */
    unsigned conn_gen; /* bumped for every socket opened: tells a driver its fd changed */
    int phase;
    struct addrinfo *ai, *ai_next; /* addresses still to try */
    int connect_errno;
    char *out; /* the request: head and body */
    size_t out_len, out_off;
    kc_http_parser p;
    kc_http_body_cb on_body;
    void *ud;
    bool leftover;     /* bytes followed the response: the connection cannot be reused */
    bool connect_only; /* done once connected (and the TLS handshake is done): nothing sent */
    kc_xerr xerr;
    char detail[256];
} kc_xfer;

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

    kc_url url;          /* the parsed server URL */
    char authority[300]; /* Host header value */
    char port_str[8];
    unsigned char verify_ip[16]; /* the address the certificate must name, when host is an IP */
    size_t verify_ip_len;        /* 0: verify a DNS name (or nothing when insecure) */

    kc_client_opts opts; /* defaults resolved */
    char *user_agent;

    pthread_mutex_t mu; /* guards everything below */
    /* TLS configuration shared by every connection, built on first use. */
    bool tls_ready;
    kc_code tls_code; /* the setup's outcome, repeated on every later request when it failed */
    char tls_msg[KC_ERR_MSG_MAX];
    mbedtls_ssl_config tls_conf;
    mbedtls_x509_crt tls_ca, tls_cert;
    mbedtls_pk_context tls_key;
    kc_conn *pool[KC_CLIENT_POOL_MAX];
    int npool;
    char *tok_cache; /* last token read from token_file */
    struct stat tok_st;
    bool tok_have;
    double lim_tokens;
    double lim_last_s;
    uint64_t rng;
    kc_client_stats stats;

    kc_loopctx *lc; /* streaming state, NULL until kc_client_attach_loop */
};

/* Prepares x for req: the request bytes (token included) are built here. */
kc_code kc__xfer_init(kc_xfer *x, kc_client *c, const kc_request *req, kc_http_body_cb on_body,
                      void *ud, kc_err *err);
/* Starts over on a fresh connection (the previous one is closed), same request. */
void kc__xfer_restart(kc_xfer *x);
/* Advances x without blocking: KC_WANT_READ/KC_WANT_WRITE (wait for the socket, x->conn->fd, then
 * call again), 0 when the response is complete, -1 on failure (x->xerr, x->detail). */
int kc__xfer_step(kc_xfer *x);
/* True once the connection is established (and the TLS handshake done). */
bool kc__xfer_connected(const kc_xfer *x);
/* The socket being waited on (-1 between connection attempts). */
int kc__xfer_fd(const kc_xfer *x);
/* After a 0 from kc__xfer_step: gives the connection back for reuse when the response allows
 * it (keep-alive, nothing left over), else closes it. */
void kc__xfer_release_conn(kc_xfer *x);
/* Frees x (closing its connection, if still held). */
void kc__xfer_free(kc_xfer *x);

/* Raw I/O on a connected kc_conn. Both return the bytes moved (recv: 0 when the peer closed),
 * -KC_WANT_READ or -KC_WANT_WRITE when the socket must become ready first, or KC_IO_FAIL with the
 * reason in why (and, for recv, *reset when the peer reset the connection). */
#define KC_IO_FAIL (-100)
ssize_t kc__conn_send(kc_conn *k, const char *p, size_t n, char *why, size_t size);
ssize_t kc__conn_recv(kc_conn *k, char *p, size_t n, bool *reset, char *why, size_t size);
/* Whether TLS holds decrypted bytes not read yet (the socket's readiness does not show them). */
bool kc__conn_buffered(kc_conn *k);

/* Takes an idle pooled connection that is still open, or NULL. */
kc_conn *kc__pool_take(kc_client *c);
void kc__conn_close(kc_conn *k);

/* Maps a failed transfer to a kc_code with a message naming the request. */
kc_code kc__xfer_error(kc_client *c, const kc_xfer *x, const char *method, const char *path,
                       kc_err *err);

/* Takes one token from the rate limiter; returns how long the caller must wait (ms). */
long kc__limiter_reserve(kc_client *c);

/* Counts one request sent. */
void kc__count_request(kc_client *c);
/* strdup that maps NULL to NULL and reports allocation failure through *ok. */
char *kc__dup_opt(const char *s, bool *ok);
/* Monotonic seconds. */
double kc__now_s(void);

/* A response body collected in memory (NUL-terminated once anything arrived). */
typedef struct kc_body_buf {
    char *data;
    size_t len, cap;
} kc_body_buf;
/* A kc_http_body_cb appending to the kc_body_buf ud; false when out of memory. */
bool kc__body_append(const char *p, size_t k, void *ud);

/* Runs the fault hook set by kc_client_set_fault_hook (tests): KC_OK when none is set. */
kc_code kc__fault_check(const kc_request *req);

/* Tears down the streaming state (kc_client_stream.c); used by kc_client_free. */
void kc__stream_detach(kc_client *c);

#endif
