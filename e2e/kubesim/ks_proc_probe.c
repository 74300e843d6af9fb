/* ks_proc_probe: HTTP/TCP probes of mapped containers (run on libuv's thread pool) and the
 * image/container identifiers the kubelet reports. */
#include "ks_kubelet.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- probes ---- */

static int int_or(const json_t *o, const char *k, int def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int)json_integer_value(v) : def;
}

static int port_of(const json_t *port, const json_t *container)
{
    if (json_is_integer(port))
        return (int)json_integer_value(port);
    const char *name = json_string_value(port);
    if (!name)
        return 0;
    if (strspn(name, "0123456789") == strlen(name) && *name)
        return atoi(name);
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(container, "ports"), i, p)
    {
        const char *n = json_string_value(json_object_get(p, "name"));
        if (n && strcmp(n, name) == 0)
            return (int)json_integer_value(json_object_get(p, "containerPort"));
    }
    return 0;
}

void ks_probe_parse(const json_t *probe, const json_t *container, ks_probe_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    if (!json_is_object(probe))
        return;
    const json_t *h = json_object_get(probe, "httpGet");
    const json_t *t = json_object_get(probe, "tcpSocket");
    const json_t *src = h ? h : t ? t : json_object_get(probe, "grpc");
    spec->kind = h ? 1 : src ? 2 : json_object_get(probe, "exec") ? 3 : 0;
    if (!spec->kind)
        return;
    const char *host = src ? json_string_value(json_object_get(src, "host")) : NULL;
    snprintf(spec->host, sizeof(spec->host), "%s", host && *host ? host : "127.0.0.1");
    spec->port = src ? port_of(json_object_get(src, "port"), container) : 0;
    const char *path = h ? json_string_value(json_object_get(h, "path")) : NULL;
    snprintf(spec->path, sizeof(spec->path), "%s%s", path && path[0] == '/' ? "" : "/",
             path ? path : "");
    const char *scheme = h ? json_string_value(json_object_get(h, "scheme")) : NULL;
    spec->https = scheme && strcasecmp(scheme, "HTTPS") == 0;
    const json_t *d = json_object_get(probe, "initialDelaySeconds");
    spec->initial_delay_s =
        json_is_integer(d) && json_integer_value(d) > 0 ? (int)json_integer_value(d) : 0;
    spec->period_s = int_or(probe, "periodSeconds", 10);
    spec->timeout_s = int_or(probe, "timeoutSeconds", 1);
    spec->success_threshold = int_or(probe, "successThreshold", 1);
    spec->failure_threshold = int_or(probe, "failureThreshold", 3);
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

static bool tcp_probe(const ks_probe_spec *s)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(s->host, port, &hints, &res) != 0)
        return false;
    bool ok = false;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int r = connect(fd, res->ai_addr, res->ai_addrlen);
        if (r == 0) {
            ok = true;
        } else if (errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t len = sizeof(err);
            ok = poll(&pfd, 1, s->timeout_s * 1000) == 1 &&
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

bool ks_probe_run(const ks_probe_spec *s)
{
    if (s->kind == 3 || s->kind == 0)
        return true;
    if (s->port <= 0)
        return false;
    if (s->kind == 2)
        return tcp_probe(s);
    CURL *c = curl_easy_init();
    if (!c)
        return false;
    char url[1400];
    bool v6 = strchr(s->host, ':') != NULL;
    snprintf(url, sizeof(url), "%s://%s%s%s:%d%s", s->https ? "https" : "http", v6 ? "[" : "",
             s->host, v6 ? "]" : "", s->port, s->path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->timeout_s * 1000);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "kube-probe/1.32");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    long code = 0;
    bool ok = curl_easy_perform(c) == CURLE_OK &&
              curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code >= 200 &&
              code < 400;
    curl_easy_cleanup(c);
    return ok;
}

/* ---- identifiers ---- */

void ks_proc_hash_hex(const char *a, const char *b, int n, char out[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int len = 0;
    char num[16];
    snprintf(num, sizeof(num), "%d", n);
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, strlen(a)) &&
        EVP_DigestUpdate(ctx, "/", 1) && EVP_DigestUpdate(ctx, b, strlen(b)) &&
        EVP_DigestUpdate(ctx, num, strlen(num)) && EVP_DigestFinal_ex(ctx, md, &len) && len == 32) {
        for (int i = 0; i < 32; i++)
            snprintf(out + 2 * i, 3, "%02x", md[i]);
    } else {
        memset(out, '0', 64);
        out[64] = '\0';
    }
    EVP_MD_CTX_free(ctx);
}

void ks_proc_image_id(const char *image, char *buf, size_t size)
{
    if (strstr(image, "@sha256:")) {
        snprintf(buf, size, "%s", image);
        return;
    }
    /* Strip a tag (a ':' after the last '/', so registry ports stay). */
    const char *slash = strrchr(image, '/');
    const char *colon = strrchr(slash ? slash : image, ':');
    int repo_len = colon ? (int)(colon - image) : (int)strlen(image);
    char hex[65];
    ks_proc_hash_hex(image, "", 0, hex);
    snprintf(buf, size, "%.*s@sha256:%s", repo_len, image, hex);
}

void ks_proc_container_id(const char *uid, const char *name, int restarts, char *buf, size_t size)
{
    char hex[65];
    ks_proc_hash_hex(uid, name, restarts, hex);
    snprintf(buf, size, "containerd://%s", hex);
}
