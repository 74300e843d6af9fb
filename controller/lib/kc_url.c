/* kc_url: the API server URLs of kubeconfigs and the in-cluster config, parsed by libcurl
 * (curl_url) and then checked: only what an API server address needs is accepted; anything else
 * is refused with the reason rather than guessed at. */
#include "kc_url.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One part of a parsed URL (malloc'd by libcurl), or NULL when absent. */
static char *part(CURLU *h, CURLUPart what)
{
    char *v = NULL;
    return curl_url_get(h, what, &v, 0) == CURLUE_OK ? v : NULL;
}

/* The checks of a URL libcurl parsed (h): what an API server address may hold. */
static kc_code check_parts(const char *s, CURLU *h, kc_url *u, kc_err *err)
{
    char *scheme = part(h, CURLUPART_SCHEME), *user = part(h, CURLUPART_USER),
         *pass = part(h, CURLUPART_PASSWORD), *query = part(h, CURLUPART_QUERY),
         *frag = part(h, CURLUPART_FRAGMENT), *host = part(h, CURLUPART_HOST),
         *port = part(h, CURLUPART_PORT), *path = part(h, CURLUPART_PATH);
    kc_code rc = KC_OK;
    if (!scheme || (strcmp(scheme, "https") && strcmp(scheme, "http"))) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\": the scheme must be https or http", s);
        goto out;
    }
    u->tls = !strcmp(scheme, "https");
    if (user || pass) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\" must not contain credentials", s);
        goto out;
    }
    if (query) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\" must not contain a query", s);
        goto out;
    }
    if (frag) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\" must not contain a fragment", s);
        goto out;
    }
    if (!host || !host[0]) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\" has no host", s);
        goto out;
    }
    const char *hn = host;
    size_t n = strlen(host);
    if (host[0] == '[') { /* libcurl checked the IPv6 literal */
        hn++;
        n -= 2;
        u->host_is_ipv6 = true;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (!host_char((unsigned char)host[i])) {
                rc = kc_err_set(err, KC_EARG, "\"%.200s\": '%c' cannot appear in a host name", s,
                                host[i]);
                goto out;
            }
        }
    }
    if (n >= sizeof(u->host)) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\": the host is too long", s);
        goto out;
    }
    memcpy(u->host, hn, n);
    u->host[n] = '\0';
    u->port = u->tls ? 443 : 80;
    if (port) {
        char *end = NULL;
        long v = strtol(port, &end, 10);
        if (!port[0] || *end || v < 1 || v > 65535) {
            rc = kc_err_set(err, KC_EARG, "\"%.200s\": the port must be a number in 1..65535", s);
            goto out;
        }
        u->port = (int)v;
        u->port_explicit = true;
    }
    size_t plen = path ? strlen(path) : 0;
    for (size_t i = 0; i < plen; i++) {
        if (!path_char((unsigned char)path[i])) {
            rc = kc_err_set(err, KC_EARG, "\"%.200s\": '%c' cannot appear in the path", s, path[i]);
            goto out;
        }
    }
    while (plen && path[plen - 1] == '/')
        plen--; /* request paths carry their own leading slash */
    if (plen >= sizeof(u->path)) {
        rc = kc_err_set(err, KC_EARG, "\"%.200s\": the path is too long", s);
        goto out;
    }
    if (plen)
        memcpy(u->path, path, plen);
    u->path[plen] = '\0';
out:
    curl_free(scheme);
    curl_free(user);
    curl_free(pass);
    curl_free(query);
    curl_free(frag);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    return rc;
}

kc_code kc_url_parse(const char *s, kc_url *u, kc_err *err)
{
    memset(u, 0, sizeof(*u));
    if (!s)
        return kc_err_set(err, KC_EARG, "no URL given");
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q <= ' ' || *q >= 0x7f)
            return kc_err_set(err, KC_EARG,
                              "\"%.200s\" is not an http(s) URL: character 0x%02x at offset %zu", s,
                              *q, (size_t)((const char *)q - s));
    }
    const char *sep = strstr(s, "://");
    if (!sep || sep == s)
        return kc_err_set(err, KC_EARG, "\"%.200s\" is not an http(s) URL: no scheme", s);
    /* An empty port ("host:") is dropped by libcurl; an API server address must not have one. */
    const char *auth = sep + 3, *auth_end = auth + strcspn(auth, "/?#");
    if (auth_end > auth && auth_end[-1] == ':')
        return kc_err_set(err, KC_EARG, "\"%.200s\": empty port", s);
    CURLU *h = curl_url();
    if (!h)
        return kc_err_set(err, KC_ENOMEM, "out of memory parsing a URL");
    CURLUcode uc = curl_url_set(h, CURLUPART_URL, s, CURLU_NON_SUPPORT_SCHEME);
    kc_code rc;
    if (uc == CURLUE_OUT_OF_MEMORY)
        rc = kc_err_set(err, KC_ENOMEM, "out of memory parsing a URL");
    else if (uc != CURLUE_OK)
        rc =
            kc_err_set(err, KC_EARG, "\"%.200s\" is not a valid URL: %s", s, curl_url_strerror(uc));
    else
        rc = check_parts(s, h, u, err);
    curl_url_cleanup(h);
    if (rc != KC_OK)
        memset(u, 0, sizeof(*u));
    return rc;
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
