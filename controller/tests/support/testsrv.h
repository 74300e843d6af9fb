/* testsrv: an in-process HTTP(S) server on 127.0.0.1 (libmicrohttpd) for client-side tests. */
#ifndef TESTSRV_H
#define TESTSRV_H

#include <jansson.h>
#include <stddef.h>

typedef struct ts_server ts_server;
typedef struct ts_conn ts_conn;     /* one request awaiting its response */
typedef struct ts_stream ts_stream; /* a chunked response being written */

typedef struct ts_request {
    const char *method;
    const char *path;  /* without the query */
    const char *query; /* raw query string without '?', "" when none */
    const char *body;  /* NUL-terminated request body ("" when none) */
    size_t body_len;
    const char *content_type;  /* NULL when absent */
    const char *authorization; /* NULL when absent */
    const char *accept;        /* NULL when absent */
} ts_request;

/* Runs on a server thread (one thread per connection). It must answer each request exactly once,
 * before returning, with ts_respond* or ts_stream_begin. */
typedef void (*ts_handler)(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud);

/* TLS material generated in-process with OpenSSL: a CA and a serving certificate it signed. */
typedef struct ts_pki {
    char *ca_pem;           /* CA certificate */
    char *cert_pem;         /* server certificate, SAN IP:127.0.0.1 and DNS:localhost */
    char *key_pem;          /* server private key */
    const char *priorities; /* the server's GnuTLS priority string (e.g. TLS 1.3 only); NULL for
                             * the library's default; not owned */
} ts_pki;
ts_pki *ts_pki_generate(const char *ca_cn);
void ts_pki_free(ts_pki *pki);

/* Starts a server on an ephemeral port (TLS when pki is non-NULL). NULL on failure. */
ts_server *ts_start(ts_handler handler, void *ud, const ts_pki *pki);
/* "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT". */
const char *ts_url(const ts_server *srv);
int ts_port(const ts_server *srv);
/* Number of requests handled so far. */
unsigned ts_request_count(ts_server *srv);
/* Stops accepting, aborts open streams, joins threads, frees. */
void ts_stop(ts_server *srv);

/* Full responses. extra_headers: NULL or "Name: value" lines separated by "\n". */
void ts_respond(ts_conn *conn, int status, const char *content_type, const char *body,
                const char *extra_headers);
/* Takes ownership of body (json_decref'd). */
void ts_respond_json(ts_conn *conn, int status, json_t *body);
/* A Kubernetes Status failure object: {"kind":"Status",...,"reason":reason,"code":status}. */
void ts_respond_status(ts_conn *conn, int status, const char *reason, const char *message);

/* Chunked streaming response; the handle may be used from any thread until ended or aborted.
 * Writes are queued and sent as they arrive. */
ts_stream *ts_stream_begin(ts_conn *conn, int status, const char *content_type);
int ts_stream_write(ts_stream *st, const char *data, size_t len);
/* Ends the body cleanly (terminating chunk). */
void ts_stream_end(ts_stream *st);
/* Cuts the connection mid-stream, as a dropped network would. */
void ts_stream_abort(ts_stream *st);

/* Notes on the implementation (testsrv.c):
 * - req->path is the path exactly as sent (still percent-encoded), req->query likewise.
 * - A handler that returns without answering gets a 500 Status.
 * - ts_stream_write returns 0, or -1 once the stream ended, was aborted or the client left.
 *   Data written before ts_stream_end/ts_stream_abort is sent before the end or the cut.
 * - ts_stop aborts streams the handler side never ended; their handles are invalid afterwards
 *   (stop any thread still writing to them before calling ts_stop). */

/* The percent-decoded value of query parameter name ("" for a bare "name"), malloc'd; NULL when
 * absent. */
char *ts_query_get(const ts_request *req, const char *name);

#endif
