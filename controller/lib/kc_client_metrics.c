/* kc_client_metrics: client-go's rest_client_requests_total{code,method,host} for a client: every
 * HTTP request (blocking, pipelined, streams), counted in a small fixed table of atomics once its
 * answer's headers came or its transfer failed without one. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc_client_int.h"

/* The methods the client sends, and a row for anything else. */
static const char *const methods[KC_METHODS] = {"GET",    "POST", "PUT",     "PATCH",
                                                "DELETE", "HEAD", "OPTIONS", "other"};

unsigned char kc__method_index(const char *method)
{
    for (unsigned char i = 0; i + 1 < KC_METHODS; i++)
        if (method && !strcmp(method, methods[i]))
            return i;
    return KC_METHODS - 1;
}

/* A slot's key: 1 + (code × KC_METHODS + method), code 0 for a transport failure; 0 is free. */
void kc__count_result(kc_client *c, kc_xfer *x)
{
    if (!c || x->counted)
        return;
    x->counted = true;
    unsigned code = x->status > 0 && x->status < 1000 ? (unsigned)x->status : 0;
    unsigned key = 1 + code * KC_METHODS + x->method;
    /* Open addressing: a slot, once claimed, keeps its key for the client's life. */
    for (unsigned i = 0; i < KC_RESULT_SLOTS; i++) {
        kc_result_slot *s = &c->results[(key + i) % KC_RESULT_SLOTS];
        unsigned k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (!k) {
            unsigned expected = 0;
            if (atomic_compare_exchange_strong(&s->key, &expected, key))
                k = key;
            else
                k = expected;
        }
        if (k == key) {
            atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
            return;
        }
    }
    atomic_fetch_add_explicit(&c->results_dropped, 1, memory_order_relaxed);
}

size_t kc_client_results(kc_client *c, kc_client_result *out, size_t max)
{
    size_t n = 0;
    for (unsigned i = 0; c && i < KC_RESULT_SLOTS && n < max; i++) {
        unsigned k = atomic_load_explicit(&c->results[i].key, memory_order_acquire);
        if (!k)
            continue;
        out[n].code = (int)((k - 1) / KC_METHODS);
        out[n].method = methods[(k - 1) % KC_METHODS];
        out[n].count = atomic_load_explicit(&c->results[i].count, memory_order_relaxed);
        n++;
    }
    unsigned long long dropped = c ? atomic_load(&c->results_dropped) : 0;
    if (dropped && n < max)
        out[n++] =
            (kc_client_result){.code = -1, .method = methods[KC_METHODS - 1], .count = dropped};
    return n;
}

const char *kc_client_host(kc_client *c)
{
    return c && c->metric_host ? c->metric_host : "none";
}

char *kc__url_host(const char *url)
{
    const char *p = url ? strstr(url, "://") : NULL;
    p = p ? p + 3 : url;
    if (!p)
        return NULL;
    const char *at = strpbrk(p, "@/?#");
    if (at && *at == '@') /* user info is no part of the host */
        p = at + 1;
    return strndup(p, strcspn(p, "/?#"));
}

/* Registry hook: the table's counts into the family. */
void kc__sample_results(kc_registry *r, void *ud)
{
    (void)r;
    kc_client *c = ud;
    kc_client_result rows[KC_RESULT_SLOTS + 1];
    size_t n = kc_client_results(c, rows, KC_RESULT_SLOTS + 1);
    for (size_t i = 0; i < n; i++) {
        char code[16];
        if (rows[i].code > 0)
            snprintf(code, sizeof(code), "%d", rows[i].code);
        else /* client-go's label for a request without an answer */
            snprintf(code, sizeof(code), "%s", rows[i].code == 0 ? "<error>" : "other");
        kc_counter_set(
            kc_metric_with(c->m_requests, KC_LABELS(code, kc_client_host(c), rows[i].method)),
            (double)rows[i].count);
    }
}

kc_code kc_client_register_metrics(kc_client *c, kc_registry *r, kc_err *err)
{
    kc_err_clear(err);
    if (!c || !r)
        return kc_err_set(err, KC_EARG, "client metrics: a client and a registry are required");
    if (c->reg)
        return kc_err_set(err, KC_EARG, "client metrics: already registered");
    kc_code rc = kc_metrics_counter(r, "rest_client_requests_total",
                                    "Number of HTTP requests, partitioned by status code, method, "
                                    "and host.",
                                    KC_LABELS("code", "host", "method"), &c->m_requests, err);
    if (rc != KC_OK)
        return rc;
    if ((rc = kc_metrics_add_hook(r, kc__sample_results, c, NULL, err)) != KC_OK)
        return rc;
    c->reg = r;
    return KC_OK;
}
