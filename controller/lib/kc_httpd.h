/* kc_httpd: the operator's HTTP endpoint for /metrics, /healthz and /readyz (plain HTTP/1.x). */
#ifndef KC_HTTPD_H
#define KC_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"
#include "kc_metrics.h"

typedef struct kc_httpd kc_httpd;

/* A health check: returns true when healthy; when not, may write a one-line reason (NUL
 * terminated, at most reason_size bytes) that becomes the 503/500 response body. Runs on the
 * server's thread, one request at a time, so it must be quick and thread-safe with respect to
 * the state it reads. */
typedef bool (*kc_httpd_check)(void *ud, char *reason, size_t reason_size);

typedef struct kc_httpd_opts {
    /* "host:port", ":port" (every address, IPv6 dual-stack when available, else IPv4),
     * "[v6addr]:port"; host may be a name. Port 0 binds an ephemeral port (see kc_httpd_port). */
    const char *addr;
    kc_registry *registry; /* served at /metrics; NULL → /metrics is 404. Not owned. */
    kc_httpd_check ready;  /* /readyz: 200 "ok" when it returns true, else 503 + reason; NULL →
                              always ready */
    void *ready_ud;
    kc_httpd_check
        live; /* /healthz: 200 "ok" when it returns true (or is NULL), else 500 + reason */
    void *live_ud;
} kc_httpd_opts;

/* Splits an address as accepted by kc_httpd_opts.addr into host ("" for ":port", brackets of an
 * IPv6 literal removed) and port. A missing or non-numeric port, a port above 65535, an IPv6
 * literal without brackets or a host longer than host_size-1 → KC_EARG naming the address. */
kc_code kc_httpd_parse_addr(const char *addr, char *host, size_t host_size, int *port, kc_err *err);

/* Binds and starts serving on an internal thread. GET and HEAD are served; other methods get 405
 * with an Allow header, unknown paths 404. Bind failures → KC_EIO with the address and the
 * system's reason; a bad address → KC_EARG. *out is freed by kc_httpd_stop. The registry and
 * callbacks must outlive the server. */
kc_code kc_httpd_start(const kc_httpd_opts *opts, kc_httpd **out, kc_err *err);
/* The port actually bound (useful with port 0). */
int kc_httpd_port(const kc_httpd *h);
/* Stops serving (in-flight requests finish), closes the socket, frees. Accepts NULL. */
void kc_httpd_stop(kc_httpd *h);

#endif
