/* ks_api_test: an in-process kubesim API server for the API layer's tests (static helpers):
 * a store with the built-in types plus a custom "widgets.example.com" type, authentication,
 * a generated serving certificate, HTTPS and plain HTTP listeners, a libkube client, and a raw
 * libcurl helper for requests the client does not expose (headers, streams). */
#ifndef KS_API_TEST_H
#define KS_API_TEST_H

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kc_client.h"
#include "kc_config.h"
#include "kc_log.h"
#include "kc_rest.h"
#include "ks_server_int.h"
#include "ks_sim.h"
#include "ks_store.h"

typedef struct ka_env {
    ks_sim sim;
    char *cert, *key;
    const char *token;
    kc_client *c; /* HTTPS, admin */
    const ks_rtype *widgets;
} ka_env;

static ka_env ka;

static const kc_resource KA_WIDGETS = {"example.com", "v1", "widgets", true};

static inline kc_client *ka_client(const char *url, const char *token)
{
    kc_config cfg = {0};
    cfg.server = (char *)url;
    cfg.ca_pem = ka.sim.ca_pem;
    cfg.ca_pem_len = ka.sim.ca_pem ? strlen(ka.sim.ca_pem) : 0;
    cfg.token = (char *)token;
    kc_client_opts o = {
        .qps = -1, .max_retries = -1, .timeout_ms = 10000, .user_agent = "ks-api-test/1.0"};
    kc_client *c = NULL;
    kc_err err;
    cr_assert_eq(kc_client_new(&cfg, &o, &c, &err), KC_OK, "client: %s", err.msg);
    return c;
}

/* Starts the simulator's API layer; opts tweaks (rbac, kubelet) come from the caller. */
static inline void ka_start_opts(bool rbac, bool kubelet)
{
    memset(&ka, 0, sizeof(ka));
    kc_err err;
    ka.sim.opts.listen_host = "127.0.0.1";
    ka.sim.opts.https_port = 0;
    ka.sim.opts.http_port = 0;
    ka.sim.opts.rbac = rbac;
    ka.sim.opts.verbosity = getenv("KA_VERBOSE") ? 2 : 0;
    if (!getenv("KA_VERBOSE"))
        kc_log_set_level(KC_LOG_WARN);
    ka.sim.store = ks_store_new(0);
    cr_assert_not_null(ka.sim.store);
    cr_assert_eq(ks_types_register_builtin(ka.sim.store, &err), KC_OK, "types: %s", err.msg);
    static const char *const wshort[] = {"wd", NULL};
    static const char *const wcat[] = {"all", NULL};
    json_t *cols =
        json_pack("[{s:s, s:s, s:s, s:s, s:i, s:s}, {s:s, s:s, s:s, s:s, s:i, s:s},"
                  " {s:s, s:s, s:s, s:s, s:i, s:s}]",
                  "name", "Name", "type", "string", "format", "name", "description", "", "priority",
                  0, "jsonPath", ".metadata.name", "name", "Size", "type", "integer", "format", "",
                  "description", "the size", "priority", 0, "jsonPath", ".spec.size", "name", "Age",
                  "type", "date", "format", "", "description", "", "priority", 0, "jsonPath",
                  ".metadata.creationTimestamp");
    ks_rtype w = {.group = "example.com",
                  .version = "v1",
                  .resource = "widgets",
                  .kind = "Widget",
                  .singular = "widget",
                  .namespaced = true,
                  .has_status = true,
                  .short_names = wshort,
                  .categories = wcat,
                  .printer_columns = cols,
                  .crd_name = "widgets.example.com"};
    ka.widgets = ks_store_register(ka.sim.store, &w);
    json_decref(cols);
    cr_assert_not_null(ka.widgets);
    cr_assert_eq(ks_auth_new(&ka.sim, &err), KC_OK, "auth: %s", err.msg);
    ka.token = ks_auth_admin_token(&ka.sim);
    cr_assert_eq(ks_pki_init(&ka.sim, &ka.cert, &ka.key, &err), KC_OK, "pki: %s", err.msg);
    if (kubelet)
        cr_assert_eq(ks_kubelet_start(&ka.sim, &err), KC_OK, "kubelet: %s", err.msg);
    cr_assert_eq(ks_server_start(&ka.sim, ka.cert, ka.key, &err), KC_OK, "server: %s", err.msg);
    cr_assert_not_null(ka.sim.server_url);
    cr_assert_not_null(ka.sim.http_url);
    ka.c = ka_client(ka.sim.server_url, ka.token);
    json_t *ns = json_pack("{s:{s:s}}", "metadata", "name", "default");
    kc_code rc = kc_create(ka.c, &KC_RES_NAMESPACES, NULL, ns, NULL, &err);
    cr_assert(rc == KC_OK || rc == KC_EALREADYEXISTS, "ns: %s", err.msg);
    json_decref(ns);
}

static inline void ka_start(void)
{
    ka_start_opts(false, false);
}

static inline void ka_stop(void)
{
    kc_client_free(ka.c);
    ks_server_stop(&ka.sim);
    if (ka.sim.kubelet)
        ks_kubelet_stop(&ka.sim);
    ks_auth_free(&ka.sim);
    ks_store_free(ka.sim.store);
    free(ka.sim.ca_pem);
    free(ka.cert);
    free(ka.key);
    memset(&ka, 0, sizeof(ka));
}

/* ---- raw HTTP ---- */

typedef struct ka_resp {
    long status;
    char *body;
    size_t len;
    char ctype[256];
    char etag[128];
    char warnings[1024]; /* the Warning header values, one per line */
    CURLcode curl;
} ka_resp;

static inline size_t ka_write(char *data, size_t sz, size_t n, void *ud)
{
    ka_resp *r = ud;
    char *nb = realloc(r->body, r->len + sz * n + 1);
    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, data, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static inline size_t ka_header(char *data, size_t sz, size_t n, void *ud)
{
    ka_resp *r = ud;
    size_t len = sz * n;
    char line[512];
    snprintf(line, sizeof(line), "%.*s", (int)(len < 511 ? len : 511), data);
    line[strcspn(line, "\r\n")] = '\0';
    if (!strncasecmp(line, "Content-Type: ", 14))
        snprintf(r->ctype, sizeof(r->ctype), "%s", line + 14);
    if (!strncasecmp(line, "ETag: ", 6))
        snprintf(r->etag, sizeof(r->etag), "%s", line + 6);
    size_t used = strlen(r->warnings);
    if (!strncasecmp(line, "Warning: ", 9) && used < sizeof(r->warnings))
        snprintf(r->warnings + used, sizeof(r->warnings) - used, "%s\n", line + 9);
    return len;
}

/* One request against base (a URL from ka.sim); token NULL: none. headers: extra "K: V" lines
 * (NULL-terminated array or NULL). body of body_len bytes (binary bodies: protobuf), or NULL.
 * timeout_ms 0: 10 s. */
static inline ka_resp ka_http_bin(const char *method, const char *base, const char *path,
                                  const char *token, const char *const *headers, const char *body,
                                  size_t body_len, long timeout_ms)
{
    ka_resp r = {0};
    CURL *h = curl_easy_init();
    char url[2048], auth[300];
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct curl_slist *hl = NULL;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        hl = curl_slist_append(hl, auth);
    }
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ka_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, ka_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    struct curl_blob ca = {.data = ka.sim.ca_pem,
                           .len = ka.sim.ca_pem ? strlen(ka.sim.ca_pem) : 0,
                           .flags = CURL_BLOB_COPY};
    if (!strncmp(base, "https", 5))
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
    r.curl = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
    return r;
}

/* As ka_http_bin with a NUL-terminated body. */
static inline ka_resp ka_http_ex(const char *method, const char *base, const char *path,
                                 const char *token, const char *const *headers, const char *body,
                                 long timeout_ms)
{
    return ka_http_bin(method, base, path, token, headers, body, body ? strlen(body) : 0,
                       timeout_ms);
}

static inline ka_resp ka_http(const char *method, const char *path, const char *ctype,
                              const char *accept, const char *body)
{
    char ct[300], ac[300];
    const char *hs[3] = {NULL, NULL, NULL};
    int n = 0;
    if (ctype) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        hs[n++] = ct;
    }
    if (accept) {
        snprintf(ac, sizeof(ac), "Accept: %s", accept);
        hs[n++] = ac;
    }
    return ka_http_ex(method, ka.sim.server_url, path, ka.token, hs, body, 0);
}

/* The body as JSON (asserts it parses); new reference. */
static inline json_t *ka_json(const ka_resp *r)
{
    json_error_t je;
    json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, &je);
    cr_assert_not_null(j, "body is not JSON (%s): %.300s", je.text, r->body ? r->body : "");
    return j;
}

static inline void ka_resp_free(ka_resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* Asserts a Status failure with code/reason; returns its message (borrowed from st). */
static inline const char *ka_status(json_t *st, int code, const char *reason)
{
    cr_assert_str_eq(json_string_value(json_object_get(st, "kind")), "Status");
    cr_assert_str_eq(json_string_value(json_object_get(st, "status")), "Failure");
    cr_assert_eq(json_integer_value(json_object_get(st, "code")), code, "code %lld",
                 (long long)json_integer_value(json_object_get(st, "code")));
    cr_assert_str_eq(json_string_value(json_object_get(st, "reason")), reason);
    return json_string_value(json_object_get(st, "message"));
}

static inline json_t *ka_cm(const char *name, const char *k, const char *v)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                     "metadata", "name", name, "data", k, v);
}

#endif
