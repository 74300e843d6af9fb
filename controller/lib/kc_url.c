/* kc_url: a strict parser for the API server URLs of kubeconfigs and the in-cluster config. Only
 * what an API server address needs is accepted; anything else is refused with the reason rather
 * than guessed at. */
#include "kc_url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 3986 unreserved, sub-delims, ':', '@', '/' and '%' (escapes are passed through). */
static bool path_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("-._~!$&'()*+,;=:@/%", ch) != NULL;
}

static bool host_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_';
}

kc_code kc_url_parse(const char *s, kc_url *u, kc_err *err)
{
    memset(u, 0, sizeof(*u));
    if (!s)
        return kc_err_set(err, KC_EARG, "no URL given");
    const char *p = s;
    if (strncasecmp(p, "https://", 8) == 0) {
        u->tls = true;
        p += 8;
    } else if (strncasecmp(p, "http://", 7) == 0) {
        p += 7;
    } else {
        const char *sep = strstr(s, "://");
        if (!sep || sep == s)
            return kc_err_set(err, KC_EARG, "\"%.200s\" is not an http(s) URL: no scheme", s);
        return kc_err_set(err, KC_EARG, "\"%.200s\": the scheme must be https or http", s);
    }
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q <= ' ' || *q >= 0x7f)
            return kc_err_set(err, KC_EARG,
                              "\"%.200s\" is not an http(s) URL: character 0x%02x at offset %zu", s,
                              *q, (size_t)((const char *)q - s));
    }
    const char *auth_end = p + strcspn(p, "/?#");
    const char *at = memchr(p, '@', (size_t)(auth_end - p));
    if (at)
        return kc_err_set(err, KC_EARG, "\"%.200s\" must not contain credentials", s);
    const char *host_end;
    const char *after;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(auth_end - p));
        if (!close)
            return kc_err_set(err, KC_EARG, "\"%.200s\": unclosed '[' in the host", s);
        size_t n = (size_t)(close - p - 1);
        if (n >= sizeof(u->host))
            return kc_err_set(err, KC_EARG, "\"%.200s\": the host is too long", s);
        memcpy(u->host, p + 1, n);
        u->host[n] = '\0';
        unsigned char addr[16];
        if (inet_pton(AF_INET6, u->host, addr) != 1)
            return kc_err_set(err, KC_EARG, "\"%.200s\": [%s] is not an IPv6 address", s, u->host);
        u->host_is_ipv6 = true;
        host_end = close + 1;
        after = host_end;
    } else {
        host_end = p;
        while (host_end < auth_end && *host_end != ':')
            host_end++;
        size_t n = (size_t)(host_end - p);
        if (n >= sizeof(u->host))
            return kc_err_set(err, KC_EARG, "\"%.200s\": the host is too long", s);
        for (size_t i = 0; i < n; i++) {
            if (!host_char((unsigned char)p[i]))
                return kc_err_set(err, KC_EARG, "\"%.200s\": '%c' cannot appear in a host name", s,
                                  p[i]);
        }
        memcpy(u->host, p, n);
        u->host[n] = '\0';
        after = host_end;
    }
    if (!u->host[0])
        return kc_err_set(err, KC_EARG, "\"%.200s\" has no host", s);
    u->port = u->tls ? 443 : 80;
    if (after < auth_end) {
        if (*after != ':')
            return kc_err_set(err, KC_EARG, "\"%.200s\": unexpected '%c' after the host", s,
                              *after);
        const char *d = after + 1;
        long port = 0;
        if (d == auth_end)
            return kc_err_set(err, KC_EARG, "\"%.200s\": empty port", s);
        for (; d < auth_end; d++) {
            if (*d < '0' || *d > '9' || port > 65535)
                return kc_err_set(err, KC_EARG, "\"%.200s\": the port must be a number in 1..65535",
                                  s);
            port = port * 10 + (*d - '0');
        }
        if (port < 1 || port > 65535)
            return kc_err_set(err, KC_EARG, "\"%.200s\": the port must be a number in 1..65535", s);
        u->port = (int)port;
        u->port_explicit = true;
    }
    const char *path = auth_end;
    size_t plen = strcspn(path, "?#");
    if (path[plen] == '?')
        return kc_err_set(err, KC_EARG, "\"%.200s\" must not contain a query", s);
    if (path[plen] == '#')
        return kc_err_set(err, KC_EARG, "\"%.200s\" must not contain a fragment", s);
    for (size_t i = 0; i < plen; i++) {
        if (!path_char((unsigned char)path[i]))
            return kc_err_set(err, KC_EARG, "\"%.200s\": '%c' cannot appear in the path", s,
                              path[i]);
    }
    while (plen && path[plen - 1] == '/')
        plen--; /* request paths carry their own leading slash */
    if (plen >= sizeof(u->path))
        return kc_err_set(err, KC_EARG, "\"%.200s\": the path is too long", s);
    memcpy(u->path, path, plen);
    u->path[plen] = '\0';
    return KC_OK;
}

bool kc_url_authority(const kc_url *u, char *buf, size_t size)
{
    int n;
    const char *l = u->host_is_ipv6 ? "[" : "", *r = u->host_is_ipv6 ? "]" : "";
    if (u->port == (u->tls ? 443 : 80))
        n = snprintf(buf, size, "%s%s%s", l, u->host, r);
    else
        n = snprintf(buf, size, "%s%s%s:%d", l, u->host, r, u->port);
    return n >= 0 && (size_t)n < size;
}
