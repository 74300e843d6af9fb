/* kc_url: the API server URLs a kubeconfig may name ("https://host:port/prefix"). */
#ifndef KC_URL_H
#define KC_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "kc_error.h"

#define KC_URL_HOST_MAX 256
#define KC_URL_PATH_MAX 1024

typedef struct kc_url {
    bool tls;                   /* https */
    char host[KC_URL_HOST_MAX]; /* a name, an IPv4 literal, or an IPv6 literal without brackets */
    bool host_is_ipv6;          /* host came in brackets */
    int port;                   /* explicit, else 443 for https and 80 for http */
    bool port_explicit;
    char path[KC_URL_PATH_MAX]; /* prefix without trailing '/', "" for none */
} kc_url;

/* Parses an http(s) URL with a host, an optional port and an optional path (libcurl's URL parser,
 * then our checks; the path comes normalized, dot segments resolved). Refused, each with a
 * message quoting the URL and naming the fault (KC_EARG; libcurl's reason where it refused):
 * another scheme, no host, credentials
 * ("user@"), a query or a fragment, a port that is not a number in 1..65535, an unclosed or
 * invalid IPv6 literal, characters that cannot appear in a URL (spaces, controls, non-ASCII),
 * and hosts or paths longer than the buffers above. Scheme matching ignores case. */
kc_code kc_url_parse(const char *s, kc_url *out, kc_err *err);

/* Writes the "Host" header value for u: host (bracketed when IPv6), then ":port" unless the port
 * is the scheme's default. Returns false when size is too small. */
bool kc_url_authority(const kc_url *u, char *buf, size_t size);

#endif
