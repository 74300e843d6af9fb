/* Tests for kc_http (the response parser) and kc_url (server URLs): framing by length, chunks
 * and close, split at every byte; interim responses; headers the client relies on; and precise
 * refusals of malformed input. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kc_http.h"
#include "kc_url.h"

typedef struct body {
    char data[4096];
    size_t len;
} body;

static bool collect(const char *p, size_t n, void *ud)
{
    body *b = ud;
    cr_assert_leq(b->len + n, sizeof(b->data));
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* Parses text fed in pieces of at most step bytes, then the end of the connection when the
 * parser still wants more and eof is set. */
static kc_http_result parse_in_steps(kc_http_parser *p, const char *text, size_t step, body *b,
                                     bool eof, size_t *consumed)
{
    size_t len = strlen(text), off = 0;
    kc_http_result r = KC_HTTP_MORE;
    while (off < len && r == KC_HTTP_MORE) {
        size_t n = len - off < step ? len - off : step, used = 0;
        r = kc_http_parse(p, text + off, n, &used, collect, b);
        off += used;
    }
    if (r == KC_HTTP_MORE && eof)
        r = kc_http_parse_eof(p);
    if (consumed)
        *consumed = off;
    return r;
}

Test(http, content_length_chunked_and_close_at_every_split)
{
    static const struct {
        const char *text;
        const char *body;
        int status;
        bool keep_alive;
        bool eof;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
         "{\"a\":1}", 200, true, false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n"
         "A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
         "abc0123456789", 200, true, false},
        {"HTTP/1.0 500 Internal Server Error\r\n\r\nuntil the end", "until the end", 500, false,
         true},
        {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n"
         "Connection: close\r\n\r\nok",
         "ok", 201, false, false},
        {"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", "", 204, true, false},
        /* Bare LF line ends are accepted. */
        {"HTTP/1.1 200 OK\nContent-Length: 1\n\nz", "z", 200, true, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t step = 1; step <= strlen(cases[i].text); step++) {
            kc_http_parser p;
            kc_http_parser_init(&p, false);
            body b = {0};
            kc_http_result r = parse_in_steps(&p, cases[i].text, step, &b, cases[i].eof, NULL);
            cr_assert_eq(r, KC_HTTP_DONE, "case %zu step %zu: %d %s", i, step, r, p.error);
            cr_assert_eq(p.status, cases[i].status, "case %zu", i);
            cr_assert_str_eq(b.data, cases[i].body, "case %zu step %zu", i, step);
            cr_assert_eq(p.keep_alive, cases[i].keep_alive, "case %zu", i);
            kc_http_parser_free(&p);
        }
    }
}

Test(http, headers_the_client_reads)
{
    kc_http_parser p;
    kc_http_parser_init(&p, false);
    body b = {0};
    const char *t = "HTTP/1.1 429 Too Many Requests\r\ncontent-type:  application/json \r\n"
                    "Retry-After: 7\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}";
    cr_assert_eq(parse_in_steps(&p, t, 1000, &b, false, NULL), KC_HTTP_DONE, "%s", p.error);
    cr_assert_str_eq(p.content_type, "application/json");
    cr_assert_eq(p.retry_after_s, 7);
    kc_http_parser_free(&p);

    /* A HEAD response has no body whatever its Content-Length says. */
    kc_http_parser_init(&p, true);
    cr_assert_eq(
        parse_in_steps(&p, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", 1000, &b, false, NULL),
        KC_HTTP_DONE);
    kc_http_parser_free(&p);

    /* Bytes after the response are left unconsumed (the connection is then not reused). */
    kc_http_parser_init(&p, false);
    size_t used = 0;
    const char *two = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxEXTRA";
    cr_assert_eq(parse_in_steps(&p, two, 1000, &b, false, &used), KC_HTTP_DONE);
    cr_assert_eq(used, strlen(two) - 5);
    kc_http_parser_free(&p);
}

Test(http, refusals_say_what_is_wrong)
{
    static const struct {
        const char *text;
        const char *msg;
        bool eof;
    } cases[] = {
        {"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line", false},
        {"HTTP/1.1 20 OK\r\n\r\n", "not an HTTP/1.x status line", false},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "invalid Content-Length", false},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
         "conflicting Content-Length", false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
         "unsupported Transfer-Encoding", false},
        {"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\n",
         "unsupported Content-Encoding", false},
        {"HTTP/1.1 200 OK\r\nbad header\r\n\r\n", "malformed header line", false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid chunk-size",
         false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
         "chunk data longer than its size", false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", "too large",
         false},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "ended early (3 of 10 bytes)", true},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
         "chunked response body ended early", true},
        {"HTTP/1.1 200 OK\r\nContent-", "closed in the response headers", true},
        {"", "without a response", true},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kc_http_parser p;
        kc_http_parser_init(&p, false);
        body b = {0};
        kc_http_result r = parse_in_steps(&p, cases[i].text, 1000, &b, cases[i].eof, NULL);
        cr_assert_eq(r, KC_HTTP_ERROR, "case %zu: %d", i, r);
        cr_assert(strstr(p.error, cases[i].msg), "case %zu: %s", i, p.error);
        /* Once failed, it stays failed. */
        size_t used = 1;
        cr_assert_eq(kc_http_parse(&p, "x", 1, &used, collect, &b), KC_HTTP_ERROR);
        cr_assert_eq(used, 0);
        kc_http_parser_free(&p);
    }

    /* Oversized header blocks are refused, not buffered without end. */
    size_t big = KC_HTTP_HEADERS_MAX + 100;
    char *h = malloc(big + 1);
    memcpy(h, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(h + 20, 'a', big - 20);
    h[big] = '\0';
    kc_http_parser p;
    kc_http_parser_init(&p, false);
    body b = {0};
    cr_assert_eq(parse_in_steps(&p, h, 4096, &b, false, NULL), KC_HTTP_ERROR);
    cr_assert(strstr(p.error, "exceed"), "%s", p.error);
    kc_http_parser_free(&p);
    free(h);
}

static bool stop_after_first(const char *p, size_t n, void *ud)
{
    (void)p;
    (void)n;
    (*(int *)ud)++;
    return false;
}

Test(http, body_callback_can_stop)
{
    kc_http_parser p;
    kc_http_parser_init(&p, false);
    int calls = 0;
    size_t used = 0;
    const char *t = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    cr_assert_eq(kc_http_parse(&p, t, strlen(t), &used, stop_after_first, &calls), KC_HTTP_ABORTED);
    cr_assert_eq(calls, 1);
    kc_http_parser_free(&p);
}

Test(url, parses_what_kubeconfigs_hold)
{
    kc_url u;
    kc_err e;
    cr_assert_eq(kc_url_parse("https://10.0.0.1:6443", &u, &e), KC_OK, "%s", e.msg);
    cr_assert(u.tls);
    cr_assert_str_eq(u.host, "10.0.0.1");
    cr_assert_eq(u.port, 6443);
    cr_assert_str_eq(u.path, "");
    char auth[300];
    cr_assert(kc_url_authority(&u, auth, sizeof(auth)));
    cr_assert_str_eq(auth, "10.0.0.1:6443");

    cr_assert_eq(kc_url_parse("HTTPS://[fd00::1]/k8s/clusters/c-1/", &u, &e), KC_OK, "%s", e.msg);
    cr_assert_str_eq(u.host, "fd00::1");
    cr_assert(u.host_is_ipv6);
    cr_assert_eq(u.port, 443);
    cr_assert_str_eq(u.path, "/k8s/clusters/c-1");
    cr_assert(kc_url_authority(&u, auth, sizeof(auth)));
    cr_assert_str_eq(auth, "[fd00::1]");

    cr_assert_eq(kc_url_parse("http://kubernetes.default.svc", &u, &e), KC_OK, "%s", e.msg);
    cr_assert_not(u.tls);
    cr_assert_eq(u.port, 80);
    cr_assert_not(kc_url_authority(&u, auth, 5), "a short buffer is reported");
}

Test(url, refuses_with_the_reason)
{
    static const struct {
        const char *url;
        const char *msg;
    } cases[] = {
        {"h:6443", "is not an http(s) URL"},
        {"ftp://h", "the scheme must be https or http"},
        {"https://", "has no host"},
        {"https://:6443", "has no host"},
        {"https://h:", "empty port"},
        {"https://h:0", "1..65535"},
        {"https://h:65536", "1..65535"},
        {"https://h:99999999999999999999", "1..65535"},
        {"https://h:6443x", "1..65535"},
        {"https://[::1", "unclosed '['"},
        {"https://[nope]:1", "is not an IPv6 address"},
        {"https://[::1]x", "unexpected 'x' after the host"},
        {"https://u:p@h/", "must not contain credentials"},
        {"https://h/?x=1", "must not contain a query"},
        {"https://h/#f", "must not contain a fragment"},
        {"https://h w", "is not an http(s) URL"},
        {"https://h\x7f", "is not an http(s) URL"},
        {"https://h/a\"b", "cannot appear in the path"},
        {"https://h!x", "cannot appear in a host name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kc_url u;
        kc_err e;
        kc_err_clear(&e);
        cr_assert_eq(kc_url_parse(cases[i].url, &u, &e), KC_EARG, "%s", cases[i].url);
        cr_assert(strstr(e.msg, cases[i].msg), "%s: %s", cases[i].url, e.msg);
    }
    char longhost[400];
    memset(longhost, 'a', sizeof(longhost));
    memcpy(longhost, "https://", 8);
    longhost[sizeof(longhost) - 1] = '\0';
    kc_url u;
    kc_err e;
    cr_assert_eq(kc_url_parse(longhost, &u, &e), KC_EARG);
    cr_assert(strstr(e.msg, "too long"), "%s", e.msg);
}
