/* fuzz_http_response: arbitrary bytes through the HTTP/1.1 response parser, split into
 * fuzzer-chosen chunks, and through the server URL parser. The body handed out must be exactly
 * the bytes the framing says, whatever the split. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kc_http.h"
#include "kc_url.h"

typedef struct sink {
    size_t total;
    size_t stop_at; /* 0: never stop */
} sink;

static bool on_body(const char *data, size_t len, void *ud)
{
    sink *s = ud;
    if (!len)
        __builtin_trap(); /* empty body callbacks are never made */
    volatile char touch = data[0] ^ data[len - 1];
    (void)touch;
    s->total += len;
    return !(s->stop_at && s->total >= s->stop_at);
}

/* Feeds the whole input in one piece; returns the result, *body the bytes delivered. */
static kc_http_result run(const uint8_t *data, size_t size, bool head, size_t chunk_seed,
                          size_t *body)
{
    kc_http_parser p;
    kc_http_parser_init(&p, head);
    sink s = {0};
    kc_http_result r = KC_HTTP_MORE;
    size_t off = 0;
    uint32_t rng = (uint32_t)chunk_seed * 2654435761u + 1;
    while (off < size && r == KC_HTTP_MORE) {
        size_t n = size - off;
        if (chunk_seed) {
            rng = rng * 1103515245u + 12345u;
            size_t k = ((rng >> 16) % 61) + 1;
            if (k < n)
                n = k;
        }
        size_t used = 0;
        r = kc_http_parse(&p, (const char *)data + off, n, &used, on_body, &s);
        if (used > n || (r == KC_HTTP_MORE && used != n))
            __builtin_trap(); /* MORE consumes everything it was given */
        off += used;
    }
    if (r == KC_HTTP_MORE)
        r = kc_http_parse_eof(&p);
    if (r == KC_HTTP_ERROR && !p.error[0])
        __builtin_trap(); /* every refusal says why */
    if (r == KC_HTTP_DONE && !p.headers_done)
        __builtin_trap();
    *body = s.total;
    kc_http_parser_free(&p);
    return r;
}

/* Layout: byte 0 picks options (HEAD, chunk seed), the rest is the response. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t opt = data[0];
    data++;
    size--;
    bool head = opt & 1;
    size_t whole_body = 0, split_body = 0;
    kc_http_result whole = run(data, size, head, 0, &whole_body);
    kc_http_result split = run(data, size, head, (opt >> 1) + 1, &split_body);
    /* The split must not change the outcome nor the body delivered. */
    if (whole != split || whole_body != split_body)
        __builtin_trap();

    /* The same bytes as a server URL (NUL-terminated copy). */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    kc_url u;
    kc_err err;
    kc_err_clear(&err);
    if (kc_url_parse(s, &u, &err) == KC_OK) {
        char auth[KC_URL_HOST_MAX + 16];
        if (!u.host[0] || u.port < 1 || u.port > 65535 || !kc_url_authority(&u, auth, sizeof(auth)))
            __builtin_trap();
    } else if (!err.msg[0]) {
        __builtin_trap();
    }
    free(s);
    return 0;
}
