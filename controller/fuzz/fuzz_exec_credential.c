/* Fuzz target: exec credential plugin output (kc_exec_parse_credential) and its RFC 3339 times. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kc_exec.h"

/* The token of a well-formed input, when it can be told apart from everything else in it: it
 * holds a '#' (no fixed message text does), occurs once in the input, and the input has no
 * escapes (so no other string decodes to it). NULL otherwise; caller frees. */
static char *lone_token(const uint8_t *data, size_t size)
{
    if (memchr(data, '\\', size))
        return NULL;
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    const char *t = json_string_value(json_object_get(json_object_get(doc, "status"), "token"));
    char *r = NULL;
    if (t && strlen(t) >= 4 && strchr(t, '#')) {
        size_t n = strlen(t), seen = 0;
        for (const uint8_t *p = data; (p = memmem(p, size - (size_t)(p - data), t, n)); p++)
            seen++;
        if (seen == 1)
            r = strdup(t);
    }
    json_decref(doc);
    return r;
}

static void check_credential(const uint8_t *data, size_t size, const char *api)
{
    kc_exec_result r;
    kc_err err;
    memset(&err, 0, sizeof(err));
    kc_code rc = kc_exec_parse_credential((const char *)data, size, api, &r, &err);
    if (rc == KC_OK) {
        if (!r.token && !r.client_cert_pem)
            abort();
        if (!r.client_cert_pem != !r.client_key_pem || r.expires < 0)
            abort();
        if (r.client_cert_pem && (strlen(r.client_cert_pem) != r.client_cert_pem_len ||
                                  strlen(r.client_key_pem) != r.client_key_pem_len))
            abort();
        for (const char *c = r.token; c && *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                abort();
        kc_exec_result_free(&r);
        if (r.token || r.client_cert_pem || r.client_key_pem || r.expires)
            abort();
        return;
    }
    if ((rc != KC_EPARSE && rc != KC_ENOMEM) || !err.msg[0] || r.token || r.client_cert_pem ||
        r.client_key_pem || r.expires)
        abort();
    /* Messages never quote a credential. */
    char *token = lone_token(data, size);
    if (token && strstr(err.msg, token))
        abort();
    free(token);
}

/* A time that parses prints back (as UTC, whole seconds) to one that parses to the same value. */
static void check_time(const uint8_t *data, size_t size)
{
    char s[80];
    if (size >= sizeof(s))
        size = sizeof(s) - 1;
    memcpy(s, data, size);
    s[size] = '\0';
    time_t t;
    if (!kc_exec_parse_time(s, &t))
        return;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
        return;
    char back[64];
    if (strftime(back, sizeof(back), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        abort();
    /* strftime does not pad years below 1000 to four digits. */
    char padded[80];
    snprintf(padded, sizeof(padded), "%04d%s", tm.tm_year + 1900, strchr(back, '-'));
    time_t t2;
    if (!kc_exec_parse_time(padded, &t2) || t2 != t)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_credential(data, size, KC_EXEC_API_V1);
    check_credential(data, size, KC_EXEC_API_V1BETA1);
    check_time(data, size);
    return 0;
}
