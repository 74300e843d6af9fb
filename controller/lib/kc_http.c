/* kc_http: the incremental HTTP/1.1 response parser used by kc_client. */
#include "kc_http.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum {
    ST_HEADERS,    /* collecting the status line and headers */
    ST_BODY_LEN,   /* Content-Length body */
    ST_BODY_CLOSE, /* body delimited by the end of the connection */
    ST_CHUNK_SIZE, /* a chunk-size line */
    ST_CHUNK_DATA, /* chunk data */
    ST_CHUNK_CRLF, /* the CRLF after chunk data */
    ST_TRAILER,    /* trailer lines after the last chunk */
    ST_DONE,
    ST_ERROR,
};

/* Largest chunk or body we accept: far beyond any API response, and far from overflow. */
#define BODY_MAX (1ULL << 48)

void kc_http_parser_init(kc_http_parser *p, bool head)
{
    memset(p, 0, sizeof(*p));
    p->head = head;
    p->content_length = -1;
    p->state = ST_HEADERS;
}

void kc_http_parser_free(kc_http_parser *p)
{
    free(p->hbuf);
    free(p->content_type);
    p->hbuf = NULL;
    p->content_type = NULL;
}

static kc_http_result fail(kc_http_parser *p, const char *fmt, const char *arg)
{
    snprintf(p->error, sizeof(p->error), fmt, arg);
    p->state = ST_ERROR;
    return KC_HTTP_ERROR;
}

/* Is token (case-insensitive) one of the comma-separated elements of list? */
static bool has_token(const char *list, const char *token)
{
    size_t tl = strlen(token);
    const char *s = list;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - s) == tl && strncasecmp(s, token, tl) == 0)
            return true;
        s = e;
    }
    return false;
}

static int parse_retry_after(const char *v)
{
    char *end = NULL;
    if (*v >= '0' && *v <= '9') {
        long n = strtol(v, &end, 10);
        if (*end == '\0')
            return n > 86400 ? 86400 : (int)n;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end)
        return 0;
    long d = (long)(timegm(&tm) - time(NULL));
    return d <= 0 ? 0 : d > 86400 ? 86400 : (int)d;
}

/* Parses the collected header block (NUL-terminated, lines ending in CRLF or LF). Returns
 * KC_HTTP_MORE when it was an interim (1xx) response, to be followed by the real one. */
static kc_http_result parse_headers(kc_http_parser *p)
{
    char *save = NULL;
    char *line = strtok_r(p->hbuf, "\n", &save);
    if (!line)
        return fail(p, "empty response%s", "");
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r')
        line[--ll] = '\0';
    int minor = 0, status = 0, n = 0;
    if (sscanf(line, "HTTP/1.%1d %3d%n", &minor, &status, &n) != 2 || n != 12 ||
        (line[n] != ' ' && line[n] != '\0') || status < 100)
        return fail(p, "not an HTTP/1.x status line: \"%.60s\"", line);
    bool interim = status < 200;
    p->status = status;
    p->keep_alive = minor >= 1;
    p->chunked = false;
    p->content_length = -1;
    while ((line = strtok_r(NULL, "\n", &save))) {
        ll = strlen(line);
        if (ll && line[ll - 1] == '\r')
            line[--ll] = '\0';
        if (!ll)
            continue;
        char *colon = strchr(line, ':');
        if (!colon || colon == line || line[0] == ' ' || line[0] == '\t')
            return fail(p, "malformed header line \"%.60s\"", line);
        *colon = '\0';
        for (char *q = line; *q; q++) {
            if (!isgraph((unsigned char)*q))
                return fail(p, "malformed header name \"%.60s\"", line);
        }
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *ve = v + strlen(v);
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            *--ve = '\0';
        if (interim)
            continue;
        if (strcasecmp(line, "Content-Length") == 0) {
            if (!*v)
                return fail(p, "empty Content-Length%s", "");
            unsigned long long cl = 0;
            for (const char *d = v; *d; d++) {
                if (*d < '0' || *d > '9' || cl > BODY_MAX)
                    return fail(p, "invalid Content-Length \"%.40s\"", v);
                cl = cl * 10 + (unsigned)(*d - '0');
            }
            if (cl > BODY_MAX)
                return fail(p, "invalid Content-Length \"%.40s\"", v);
            if (p->content_length >= 0 && (unsigned long long)p->content_length != cl)
                return fail(p, "conflicting Content-Length headers (\"%.40s\")", v);
            p->content_length = (long long)cl;
        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
            /* We send no TE or Accept-Encoding: chunked is the only coding a server may use. */
            if (strcasecmp(v, "chunked") != 0)
                return fail(p, "unsupported Transfer-Encoding \"%.60s\"", v);
            p->chunked = true;
        } else if (strcasecmp(line, "Content-Encoding") == 0) {
            if (strcasecmp(v, "identity") != 0)
                return fail(p, "unsupported Content-Encoding \"%.60s\" (none was accepted)", v);
        } else if (strcasecmp(line, "Connection") == 0) {
            if (has_token(v, "close"))
                p->keep_alive = false;
            else if (has_token(v, "keep-alive"))
                p->keep_alive = true;
        } else if (strcasecmp(line, "Content-Type") == 0) {
            free(p->content_type);
            if (!(p->content_type = strdup(v)))
                return fail(p, "out of memory copying a header%s", "");
        } else if (strcasecmp(line, "Retry-After") == 0) {
            p->retry_after_s = parse_retry_after(v);
        }
    }
    if (interim) {
        if (status == 101)
            return fail(p, "the server switched protocols (101)%s", "");
        p->status = 0;
        return KC_HTTP_MORE;
    }
    p->headers_done = true;
    if (p->head || status == 204 || status == 304) {
        p->state = ST_DONE;
        return KC_HTTP_DONE;
    }
    if (p->chunked) {
        p->content_length = -1; /* chunked framing wins (RFC 9112 6.3) */
        p->state = ST_CHUNK_SIZE;
    } else if (p->content_length >= 0) {
        p->left = (unsigned long long)p->content_length;
        p->state = p->left ? ST_BODY_LEN : ST_DONE;
    } else {
        p->keep_alive = false;
        p->state = ST_BODY_CLOSE;
    }
    return p->state == ST_DONE ? KC_HTTP_DONE : KC_HTTP_MORE;
}

/* Collects header bytes until the blank line; returns how many bytes of data it used. */
static kc_http_result feed_headers(kc_http_parser *p, const char *data, size_t len, size_t *used)
{
    size_t i = 0;
    while (i < len) {
        if (p->hlen + 2 > p->hcap) {
            size_t cap = p->hcap ? p->hcap * 2 : 1024;
            if (cap > KC_HTTP_HEADERS_MAX + 2)
                cap = KC_HTTP_HEADERS_MAX + 2;
            if (p->hlen + 2 > cap) {
                *used = i;
                return fail(p, "response headers exceed %s bytes", "65536");
            }
            char *nb = realloc(p->hbuf, cap);
            if (!nb) {
                *used = i;
                return fail(p, "out of memory reading response headers%s", "");
            }
            p->hbuf = nb;
            p->hcap = cap;
        }
        char ch = data[i++];
        if (ch == '\0') {
            *used = i;
            return fail(p, "NUL byte in the response headers%s", "");
        }
        p->hbuf[p->hlen++] = ch;
        p->hbuf[p->hlen] = '\0';
        /* The block ends at an empty line: "\n\n" or "\n\r\n". */
        if (ch == '\n' && p->hlen >= 2 &&
            (p->hbuf[p->hlen - 2] == '\n' ||
             (p->hlen >= 3 && p->hbuf[p->hlen - 2] == '\r' && p->hbuf[p->hlen - 3] == '\n'))) {
            kc_http_result r = parse_headers(p);
            p->hlen = 0;
            if (r != KC_HTTP_MORE || p->headers_done) {
                *used = i;
                return r;
            }
            /* an interim response: go on with the next header block */
        }
    }
    *used = i;
    return KC_HTTP_MORE;
}

/* Collects one line (chunk size or trailer) into p->line; true when complete. */
static bool take_line(kc_http_parser *p, const char *data, size_t len, size_t *i)
{
    while (*i < len) {
        char ch = data[(*i)++];
        if (ch == '\n') {
            if (p->line_len && p->line[p->line_len - 1] == '\r')
                p->line_len--;
            p->line[p->line_len] = '\0';
            return true;
        }
        if (p->line_len + 1 < sizeof(p->line))
            p->line[p->line_len++] = ch;
        else
            p->line_long = true;
    }
    return false;
}

static kc_http_result chunk_size(kc_http_parser *p)
{
    if (p->line_long)
        return fail(p, "chunk-size line longer than %s bytes", "127");
    const char *s = p->line;
    unsigned long long n = 0;
    int digits = 0;
    for (; isxdigit((unsigned char)*s); s++, digits++) {
        if (n > BODY_MAX)
            return fail(p, "chunk size \"%.40s\" too large", p->line);
        int d = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
        n = n * 16 + (unsigned)d;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    if (!digits || (*s && *s != ';') || n > BODY_MAX)
        return fail(p, "invalid chunk-size line \"%.40s\"", p->line);
    p->left = n;
    p->state = n ? ST_CHUNK_DATA : ST_TRAILER;
    return KC_HTTP_MORE;
}

kc_http_result kc_http_parse(kc_http_parser *p, const char *data, size_t len, size_t *used,
                             kc_http_body_cb on_body, void *ud)
{
    size_t i = 0;
    kc_http_result r = KC_HTTP_MORE;
    if (p->state == ST_ERROR) {
        *used = 0;
        return KC_HTTP_ERROR;
    }
    while (r == KC_HTTP_MORE && (i < len || p->state == ST_DONE)) {
        switch (p->state) {
        case ST_HEADERS: {
            size_t u = 0;
            r = feed_headers(p, data + i, len - i, &u);
            i += u;
            break;
        }
        case ST_BODY_LEN:
        case ST_CHUNK_DATA:
        case ST_BODY_CLOSE: {
            size_t n = len - i;
            if (p->state != ST_BODY_CLOSE && n > p->left)
                n = (size_t)p->left;
            const char *chunk = data + i;
            i += n;
            if (p->state != ST_BODY_CLOSE) {
                p->left -= n;
                if (!p->left)
                    p->state = p->state == ST_BODY_LEN ? ST_DONE : ST_CHUNK_CRLF;
            }
            if (n && on_body && !on_body(chunk, n, ud))
                r = KC_HTTP_ABORTED;
            break;
        }
        case ST_CHUNK_CRLF:
            if (take_line(p, data, len, &i)) {
                if (p->line_len || p->line_long)
                    r = fail(p, "chunk data longer than its size (\"%.40s\")", p->line);
                else
                    p->state = ST_CHUNK_SIZE;
                p->line_len = 0;
                p->line_long = false;
            }
            break;
        case ST_CHUNK_SIZE:
            if (take_line(p, data, len, &i)) {
                r = chunk_size(p);
                p->line_len = 0;
                p->line_long = false;
            }
            break;
        case ST_TRAILER:
            if (take_line(p, data, len, &i)) {
                bool empty = !p->line_len && !p->line_long;
                p->line_len = 0;
                p->line_long = false;
                if (empty)
                    p->state = ST_DONE;
            }
            break;
        case ST_DONE:
            r = KC_HTTP_DONE;
            break;
        default:
            r = KC_HTTP_ERROR;
            break;
        }
    }
    if (r == KC_HTTP_MORE && p->state == ST_DONE)
        r = KC_HTTP_DONE;
    p->received += i;
    *used = i;
    return r;
}

kc_http_result kc_http_parse_eof(kc_http_parser *p)
{
    char what[64];
    switch (p->state) {
    case ST_DONE:
        return KC_HTTP_DONE;
    case ST_BODY_CLOSE:
        p->state = ST_DONE;
        return KC_HTTP_DONE;
    case ST_ERROR:
        return KC_HTTP_ERROR;
    case ST_HEADERS:
        if (!p->received && !p->hlen)
            return fail(p, "the server closed the connection without a response%s", "");
        return fail(p, "the connection closed in the response headers%s", "");
    case ST_BODY_LEN:
        snprintf(what, sizeof(what), "%llu of %lld",
                 (unsigned long long)p->content_length - p->left, p->content_length);
        return fail(p, "the response body ended early (%s bytes)", what);
    default:
        return fail(p, "the chunked response body ended early%s", "");
    }
}
