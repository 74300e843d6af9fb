/* kc_http: an incremental HTTP/1.1 response parser (status line, headers, bodies framed by
 * Content-Length, chunked transfer coding or the end of the connection). It never blocks and
 * never buffers a body: bytes are handed to a callback as they are decoded, so a watch stream of
 * any length runs in constant memory. */
#ifndef KC_HTTP_H
#define KC_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* Response headers larger than this are refused (API servers send well under 1 KiB). */
#define KC_HTTP_HEADERS_MAX (64 * 1024)

/* Receives decoded body bytes; returning false stops the parser (KC_HTTP_ABORTED). */
typedef bool (*kc_http_body_cb)(const char *data, size_t len, void *ud);

typedef enum {
    KC_HTTP_MORE = 0, /* the response is not complete: feed more bytes */
    KC_HTTP_DONE,     /* the response is complete */
    KC_HTTP_ERROR,    /* malformed or unsupported response; p->error says why */
    KC_HTTP_ABORTED,  /* the body callback returned false */
} kc_http_result;

typedef struct kc_http_parser {
    /* Results, valid once the headers were parsed (headers_done). */
    int status;
    bool keep_alive;    /* the connection may carry another request afterwards */
    char *content_type; /* malloc'd, or NULL */
    int retry_after_s;  /* Retry-After in seconds (delta or HTTP date, never negative); 0 if none */
    bool headers_done;
    size_t received; /* bytes fed so far */
    char error[160];

    /* Internal state. */
    int state;
    bool head;  /* the request was HEAD: no body whatever the headers say */
    char *hbuf; /* header block being collected */
    size_t hlen, hcap;
    long long content_length; /* -1 when absent */
    bool chunked;
    unsigned long long left; /* bytes left of the body or of the current chunk */
    char line[128];          /* a chunk-size or trailer line being collected */
    size_t line_len;
    bool line_long; /* a trailer line overflowed line[] (kept, not inspected) */
} kc_http_parser;

/* Prepares p for one response; head: the request was a HEAD. */
void kc_http_parser_init(kc_http_parser *p, bool head);
/* Frees what p holds (content_type included). */
void kc_http_parser_free(kc_http_parser *p);

/* Feeds the next bytes of the response. Bytes after the end of the response are not consumed:
 * *used says how many were (a keep-alive connection must not have any left over). */
kc_http_result kc_http_parse(kc_http_parser *p, const char *data, size_t len, size_t *used,
                             kc_http_body_cb on_body, void *ud);

/* The connection reached its end: KC_HTTP_DONE when that ends the response (a body delimited by
 * the close), else KC_HTTP_ERROR with p->error saying what was cut short. */
kc_http_result kc_http_parse_eof(kc_http_parser *p);

#endif
