/* testsrv_script: a canned-response handler for ts_server that records every request it saw. */
#ifndef TESTSRV_SCRIPT_H
#define TESTSRV_SCRIPT_H

#include <pthread.h>
#include <stddef.h>

#include "testsrv.h"

typedef struct ts_canned {
    int status;
    const char *content_type; /* NULL → "application/json" */
    const char *body;         /* NULL → "" */
    const char *headers;      /* extra headers as for ts_respond, or NULL */
} ts_canned;

typedef struct ts_recorded {
    char *method, *path, *query, *body, *content_type, *authorization, *accept;
} ts_recorded;

#define TS_SCRIPT_MAX_REC 256

/* Answers request i with responses[i] (the last one repeats) and records the request. */
typedef struct ts_script {
    pthread_mutex_t mu;
    const ts_canned *responses;
    size_t nresponses;
    size_t next;
    ts_recorded rec[TS_SCRIPT_MAX_REC];
    size_t nrec;
} ts_script;

void ts_script_init(ts_script *s, const ts_canned *responses, size_t n);
/* The ts_handler to pass to ts_start with the script as ud. */
void ts_script_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud);
/* A copy of recorded request i (zeroed when out of range); valid until ts_script_free. */
ts_recorded ts_script_get(ts_script *s, size_t i);
size_t ts_script_count(ts_script *s);
void ts_script_free(ts_script *s);

#endif
