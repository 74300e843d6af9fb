/* kc_client_int: the client's internals shared by kc_client.c (blocking) and kc_client_stream.c. */
#ifndef KC_CLIENT_INT_H
#define KC_CLIENT_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kc_client.h"

#define KC_CLIENT_POOL_MAX 8

typedef struct kc_loopctx kc_loopctx;

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

    /* URL prefix requests go to; differs from server when tls_server_name redirects the name
     * curl verifies (see kc_client_new). */
    char *url_base;
    char *connect_to;                   /* CURLOPT_CONNECT_TO entry, or NULL */
    struct curl_slist *connect_to_list; /* holding connect_to, read by curl on each transfer */
    char *host_header;                  /* "Host: host:port" keeping the real host, or NULL */

    kc_client_opts opts; /* defaults resolved */
    char *user_agent;

    pthread_mutex_t mu; /* guards everything below */
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
};

/* Applies everything common to blocking and streaming requests to a fresh (or reset) easy
 * handle: URL, method, body (copied), headers (token included; *hdrs receives the list, freed
 * by the caller after the transfer), TLS, connect timeout, error buffer. */
kc_code kc__setup_easy(kc_client *c, CURL *h, const kc_request *req, struct curl_slist **hdrs,
                       char *errbuf, kc_err *err);

/* Takes one token from the rate limiter; returns how long the caller must wait (ms). */
long kc__limiter_reserve(kc_client *c);

/* Maps a failed transfer to a kc_code with a message naming the request. */
kc_code kc__curl_error(kc_client *c, CURLcode rc, const char *errbuf, const char *method,
                       const char *path, kc_err *err);

/* Counts one request sent. */
void kc__count_request(kc_client *c);
/* strdup that maps NULL to NULL and reports allocation failure through *ok. */
char *kc__dup_opt(const char *s, bool *ok);

/* Tears down the streaming state (kc_client_stream.c); used by kc_client_free. */
void kc__stream_detach(kc_client *c);

#endif
