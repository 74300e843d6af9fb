/* kc_client_status: turning failures into kc_err: transport errors and Kubernetes Status
 * bodies (or any other error body) returned with a non-2xx HTTP status. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "kc_client.h"
#include "kc_client_int.h"

kc_code kc__xfer_error(kc_client *c, const kc_xfer *x, const char *method, const char *path,
                       kc_err *err)
{
    const char *detail = x->detail[0] ? x->detail : "unknown failure";
    const char *base = c->server;
    switch (x->xerr) {
    case KC_X_TLS_VERIFY:
        if (c->ca_pem)
            return kc_err_set(err, KC_ETLS,
                              "%s %s: the server certificate of %s could not be verified against "
                              "the configured CA (certificate-authority from %s): %s",
                              method, path, base, c->source, detail);
        return kc_err_set(err, KC_ETLS,
                          "%s %s: the server certificate of %s could not be verified against the "
                          "system CA store (no certificate-authority in %s): %s",
                          method, path, base, c->source, detail);
    case KC_X_TLS_CONFIG:
        return kc_err_set(err, KC_ETLS,
                          "%s %s: the TLS configuration from %s cannot be used (its "
                          "certificate authority, client certificate or client key): %s",
                          method, path, c->source, detail);
    case KC_X_TLS:
        if (c->cert_pem)
            return kc_err_set(err, KC_ETLS,
                              "%s %s: TLS handshake with %s failed (check the client certificate "
                              "and key in %s): %s",
                              method, path, base, c->source, detail);
        return kc_err_set(err, KC_ETLS, "%s %s: TLS handshake with %s failed: %s", method, path,
                          base, detail);
    case KC_X_PROXY:
        return kc_err_set(err, KC_EIO, "%s %s: the proxy %s failed the connection to %s: %s",
                          method, path, c->proxy_url ? c->proxy_url : "(from HTTPS_PROXY)", base,
                          detail);
    case KC_X_TIMEOUT:
        return kc_err_set(err, KC_ETIMEDOUT, "%s %s: request to %s timed out: %s", method, path,
                          base, detail);
    case KC_X_NOMEM:
        return kc_err_set(err, KC_ENOMEM, "%s %s: %s", method, path, detail);
    case KC_X_ABORTED:
        return kc_err_set(err, KC_ECANCELED, "%s %s: canceled", method, path);
    case KC_X_CONNECT:
    case KC_X_RESOLVE:
        if (c->proxy_url)
            return kc_err_set(err, KC_EIO,
                              "%s %s: cannot connect to the proxy %s (proxy-url in "
                              "%s) for %s: %s",
                              method, path, c->proxy_url, c->source, base, detail);
        return kc_err_set(err, KC_EIO, "%s %s: cannot connect to %s (is the API server up?): %s",
                          method, path, base, detail);
    default:
        return kc_err_set(err, KC_EIO, "%s %s: connection to %s failed: %s", method, path, base,
                          detail);
    }
}

/* Copies at most max bytes of a body for a message, with control characters replaced. */
static void excerpt(char *dst, size_t size, const char *body, size_t len, size_t max)
{
    size_t n = len < max ? len : max;
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++)
        dst[i] = isprint((unsigned char)body[i]) ? body[i] : ' ';
    dst[n] = '\0';
}

kc_code kc_status_from_json(int http_status, const json_t *status, kc_err *err)
{
    const char *reason = json_string_value(json_object_get(status, "reason"));
    const char *message = json_string_value(json_object_get(status, "message"));
    json_t *jcode = json_object_get(status, "code");
    int st =
        http_status ? http_status : (json_is_integer(jcode) ? (int)json_integer_value(jcode) : 0);
    kc_code code = kc_code_from_reason(reason, st);
    kc_err_clear(err);
    if (code == KC_OK) {
        kc_err_clear(err);
        return KC_OK;
    }
    if (!err)
        return code;
    json_t *details = json_object_get(status, "details");
    if (message && message[0]) {
        kc_err_set(err, code, "%s", message);
    } else {
        /* No message: say what we know from details (kind/name and the first cause). */
        const char *kind = json_string_value(json_object_get(details, "kind"));
        const char *name = json_string_value(json_object_get(details, "name"));
        json_t *cause = json_array_get(json_object_get(details, "causes"), 0);
        const char *cmsg = json_string_value(json_object_get(cause, "message"));
        const char *cfield = json_string_value(json_object_get(cause, "field"));
        kc_err_set(err, code, "the server answered HTTP %d (%s)%s%s%s%s%s%s%s", st,
                   reason && reason[0] ? reason : kc_code_name(code), kind || name ? " for " : "",
                   kind ? kind : "", kind && name ? " " : "", name ? name : "", cmsg ? ": " : "",
                   cfield ? cfield : "", cmsg ? (cfield ? " " : "") : "");
        if (cmsg) {
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof(err->msg) - l, "%s", cmsg);
        }
    }
    err->http_status = st;
    if (reason && reason[0])
        snprintf(err->reason, sizeof(err->reason), "%s", reason);
    json_t *ra = json_object_get(details, "retryAfterSeconds");
    err->retry_after_s = json_is_integer(ra) ? (int)json_integer_value(ra) : 0;
    return code;
}

kc_code kc_status_decode(int http_status, const char *body, size_t len, kc_err *err)
{
    kc_err_clear(err);
    if (http_status >= 200 && http_status < 300) {
        kc_err_clear(err);
        return KC_OK;
    }
    if (body && len) {
        json_t *j = json_loadb(body, len, 0, NULL);
        if (json_is_object(j) && (json_object_get(j, "reason") || json_object_get(j, "message") ||
                                  json_object_get(j, "code"))) {
            kc_code code = kc_status_from_json(http_status, j, err);
            json_decref(j);
            return code;
        }
        json_decref(j);
    }
    kc_code code = kc_code_from_http(http_status);
    if (code == KC_OK)
        code = KC_EHTTP;
    if (!body || !len)
        kc_err_set(err, code, "the server answered HTTP %d with an empty body", http_status);
    else {
        char ex[161];
        excerpt(ex, sizeof(ex), body, len, 160);
        kc_err_set(err, code, "the server answered HTTP %d with a non-Status body: \"%s\"%s",
                   http_status, ex, len > 160 ? "..." : "");
    }
    if (err) {
        err->http_status = http_status;
        err->retry_after_s = 0;
    }
    return code;
}
