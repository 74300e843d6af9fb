/* testsrv_script: a canned-response handler for ts_server that records every request it saw. */
#include "testsrv_script.h"

#include <stdlib.h>
#include <string.h>

void ts_script_init(ts_script *s, const ts_canned *responses, size_t n)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->responses = responses;
    s->nresponses = n;
}

static char *dup_or_null(const char *v)
{
    return v ? strdup(v) : NULL;
}

void ts_script_handler(ts_server *srv, const ts_request *req, ts_conn *conn, void *ud)
{
    (void)srv;
    ts_script *s = ud;
    pthread_mutex_lock(&s->mu);
    if (s->nrec < TS_SCRIPT_MAX_REC) {
        ts_recorded *r = &s->rec[s->nrec++];
        r->method = dup_or_null(req->method);
        r->path = dup_or_null(req->path);
        r->query = dup_or_null(req->query);
        r->body = dup_or_null(req->body);
        r->content_type = dup_or_null(req->content_type);
        r->authorization = dup_or_null(req->authorization);
        r->accept = dup_or_null(req->accept);
    }
    ts_canned c = {.status = 500, .body = "{}"};
    if (s->nresponses) {
        size_t i = s->next < s->nresponses ? s->next : s->nresponses - 1;
        c = s->responses[i];
        s->next++;
    }
    pthread_mutex_unlock(&s->mu);
    ts_respond(conn, c.status, c.content_type ? c.content_type : "application/json",
               c.body ? c.body : "", c.headers);
}

ts_recorded ts_script_get(ts_script *s, size_t i)
{
    ts_recorded r = {0};
    pthread_mutex_lock(&s->mu);
    if (i < s->nrec)
        r = s->rec[i];
    pthread_mutex_unlock(&s->mu);
    return r;
}

size_t ts_script_count(ts_script *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->nrec;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ts_script_free(ts_script *s)
{
    for (size_t i = 0; i < s->nrec; i++) {
        ts_recorded *r = &s->rec[i];
        free(r->method);
        free(r->path);
        free(r->query);
        free(r->body);
        free(r->content_type);
        free(r->authorization);
        free(r->accept);
    }
    s->nrec = 0;
    pthread_mutex_destroy(&s->mu);
}
